"""The approximate f32 instructions on the micro-ISA: `qwengpu.semantics.approx`'s definitions, run
on the soft-float routines, so that the machine computes the interpreter's bits by construction.

`ex2`, `lg2`, `sin` and `cos` build the fixed-point programs (`approx.FIXED_POINT`, written against
the builder interface) with this package's `Builder`; `approximate` runs the compositions
(`approx.COMPOSITE`: `rsqrt`, `tanh`) with `EmOps`, whose float operations are this package's `.rn` routines
(bit-exact with `semantics.floats`) and whose integer operations are single micro-ops.
`rcp/sqrt/div .approx` and `div.full` need nothing here: the decoder makes them `.rn`.
"""
from __future__ import annotations

from qwengpu.semantics import approx as definitions
from qwengpu.machine.uops import src

from .builder import routine
from .f32 import add, div, fma, mul, rcp, sqrt
from .f64 import rcp64, sqrt64

APPROX_OPS = ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt")


def ex2(em, a, ftz=False):
    """ex2.approx{.ftz}.f32 (`qwengpu.semantics.approx.ex2_f32`) -> Src."""
    return routine(em, lambda b, x: definitions.ex2_f32(b, x, ftz), a)


class EmOps:
    """The ops interface of `qwengpu.semantics.approx` on an `Emitter`: values are `Src`s."""

    def __init__(self, em):
        self.em = em

    def alu(self, op, a, b=None, c=None):
        return routine(self.em, lambda bl, *x: bl.op(op, *x), *[v for v in (a, b, c) if v is not None])

    def fadd(self, a, b, ftz):
        return add(self.em, a, b, "rn", ftz=ftz)

    def fmul(self, a, b, ftz):
        return mul(self.em, a, b, "rn", ftz=ftz)

    def fdiv(self, a, b, ftz):
        return div(self.em, a, b, "rn", ftz=ftz)

    def ffma(self, a, b, c, ftz):
        return fma(self.em, a, b, c, "rn", ftz=ftz)

    def frcp(self, a, ftz):
        return rcp(self.em, a, "rn", ftz=ftz)

    def fsqrt(self, a, ftz):
        return sqrt(self.em, a, "rn", ftz=ftz)

    def ex2(self, a, ftz):
        return ex2(self.em, a, ftz)


def rcp_f64(em, a):
    """rcp.approx.ftz.f64 (`qwengpu.semantics.approx.rcp_f64`) of the (lo, hi) pair a -> (lo, hi)."""
    def flush(b, h):
        return b.sel(h & 0x7FF00000, h, h & 0x80000000)
    x = routine(em, lambda b, lo_, hi_: (b.sel(hi_ & 0x7FF00000, lo_, 0), flush(b, hi_)), *a)
    lo, rh = rcp64(em, x, "rn")
    return src(0), routine(em, lambda b, lo_, hi_: flush(b, hi_ + (lo_ >> 31)), lo, rh)


def rsqrt_f64(em, a):
    """rsqrt.approx.f64: rcp.rn.f64(sqrt.rn.f64(a)) -> (lo, hi)."""
    return rcp64(em, sqrt64(em, a, "rn"), "rn")


def approximate(em, op: str, a, ftz: bool = False):
    """`op`.approx{.ftz}.f32 of the word `a` (op in `APPROX_OPS`) -> Src."""
    if op in definitions.FIXED_POINT:
        return routine(em, lambda b, x: definitions.FIXED_POINT[op](b, x, ftz), a)
    fn = definitions.COMPOSITE.get(op)
    if fn is None:
        raise ValueError(f"no approximate definition for {op!r}")
    return fn(EmOps(em), a, ftz)
