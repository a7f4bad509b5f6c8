"""Per-lane values as the interpreter's handlers hold them: Python ints per lane (raw bits), numpy
arrays of them for the float semantics, a lane mask's lanes, a PTX type's width and signedness."""
from __future__ import annotations

import numpy as np

from qwengpu.ptx.ir import TYPE_BITS
from qwengpu.semantics.launch_model import LANES


def floats():
    """`qwengpu.semantics.floats`, imported on first use (a kernel without floats does not load it)."""
    from qwengpu.semantics import floats
    return floats


def approx():
    """`qwengpu.semantics.approx`, imported on first use."""
    from qwengpu.semantics import approx
    return approx


def type_bits(t: str) -> int:
    return 1 if t == "pred" else TYPE_BITS[t]


def is_signed(t: str) -> bool:
    return t[0] == "s"


def lanes_of(mask: int) -> list[int]:
    return [i for i in range(LANES) if mask >> i & 1]


def to_numpy(vals: list[int]) -> np.ndarray:
    return np.array(vals, dtype=np.uint64)


def from_numpy(arr) -> list[int]:
    return [int(x) for x in np.asarray(arr).tolist()]
