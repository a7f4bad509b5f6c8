"""NumPy oracles for the kernel suite: one independent re-implementation per kernel.

An oracle receives the launch arguments in order (buffers as arrays holding their INITIAL contents, scalars as
NumPy scalars) and returns the EXPECTED FINAL contents of every argument: an array per buffer (the input itself
where the kernel leaves it unchanged) and None per scalar. Integer arithmetic wraps exactly like the kernel's C
(Python ints, then masked); float32 arithmetic is done step by step in np.float32 in the kernel's order, with
fma and rounding-mode conversions computed exactly (see `_fp`). NaN results of f32 arithmetic are the GPU's
canonical NaN 0x7fffffff.

One module per family of kernels (`integer`, `floats`, `control`, `algorithms`, `memory`, `atomics`, `warp`,
`approx`, `printf`, `calls_spills`, `fuzzed`; `course`: the kernels that need the course machine), each
registering its oracles in `ORACLES` (`common.oracle`); a new kernel's oracle goes into the module of its family.
"""
from __future__ import annotations

from . import (algorithms, approx, atomics, calls_spills, control, course, floats, fuzzed, integer,  # noqa: F401
               memory, printf, warp)                       # (importing a family registers its oracles)
from .common import ORACLES, Oracle, oracle
from .printf import PRINTF_TEXT

__all__ = ["ORACLES", "Oracle", "oracle", "PRINTF_TEXT"]
