"""The oracles' registry (`ORACLES`, the `oracle` decorator) and the helpers every family uses: C's
integer wrap-around and division, float32 steps, bit views of floats."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._fp import canon


ORACLES: dict[str, "Oracle"] = {}


@dataclass(frozen=True)
class Oracle:
    name: str
    fn: Callable
    tags: frozenset
    about: str
    max_steps: int | None = None      # a token budget above the runtime's default (verify runs with it)
    #: the kernel's spec sets module variables (`"symbols"`): `fn` takes them as `symbols=` ({name:
    #: the spec's data}) and returns (the arguments' final contents, {name: a variable's final contents})
    symbols: bool = False
    #: the machine geometry the kernel needs, by name (`qwengpu.machine.config.CONFIGS`), where the
    #: built-in one cannot hold it (its memory sizes, its threads per block); None: the built-in one
    machine: str | None = None


def oracle(name: str, tags=(), about: str = "", max_steps: int | None = None, symbols: bool = False,
           machine: str | None = None):
    """Register `fn` as the oracle of suite kernel `name` (`machine`: the geometry it needs, when
    the built-in one does not hold it)."""
    def deco(fn):
        if name in ORACLES:
            raise ValueError(f"duplicate oracle {name!r}")
        ORACLES[name] = Oracle(name, fn, frozenset(tags), about, max_steps, symbols, machine)
        return fn
    return deco


M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def u32(v: int) -> int:
    return v & M32


def s64(v: int) -> int:
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def u64(v: int) -> int:
    return v & M64


def cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def crem(a: int, b: int) -> int:
    """C remainder (sign follows the dividend)."""
    return a - cdiv(a, b) * b


def ints(a) -> list[int]:
    return [int(v) for v in a]


def f32(x) -> np.float32:
    return np.float32(x)


def tid_grid(grid: int, block: int):
    """Global thread ids of a 1D launch."""
    return range(grid * block)


def _ignoring_nan(pick):
    """fminf/fmaxf from `pick` (min or max): a NaN operand gives the other one, two give the
    canonical NaN."""
    def f(x, y):
        if np.isnan(x) and np.isnan(y):
            return canon(np.float32("nan"))
        if np.isnan(x):
            return y
        if np.isnan(y):
            return x
        return pick(x, y)
    return f


fmin, fmax = _ignoring_nan(min), _ignoring_nan(max)
