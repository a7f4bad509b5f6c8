"""Half precision (`.f16`) arithmetic through f32: an f16 value is the low 16 bits of a word.

Every f16 value widens to f32 exactly, so one f32 operation then one rounding to f16 is the f16
operation correctly rounded wherever rounding twice is innocuous:
* add, sub, mul: f32's 24 bits are at least 2 x 11 + 2 (Figueroa, "When is double rounding
  innocuous?", 1995);
* fma: a x b is exact in f32 (22 bits); a x b + c is rounded to odd in f32 (truncated, the last
  bit set when inexact) and then to f16, exact since 24 >= 11 + 2 (Boldo & Melquiond, "Emulation
  of FMA and correctly rounded sums: proved algorithms using rounding to odd", 2008);
* min, max, compare: exact (the result is an operand, a NaN or a predicate).
PTX has only `.rn` on f16. `.ftz` flushes the f16 operands and the result, `.sat` clamps the
result to [0, 1] (NaN and -0 to +0), and a NaN result is the canonical f16 NaN 0x7FFF, as in
`qwengpu.semantics.floats`.
"""
from __future__ import annotations

from .convert import cvt
from .f32 import add, compare, max, min, mul, sub

F16_NAN = 0x7FFF


def widen(em, h):
    """An f16 word as f32 (exact)."""
    return cvt(em, (h,), "f32", "f16")[0]


def narrow(em, x):
    """An f32 word rounded to f16 (.rn)."""
    return cvt(em, (x,), "f16", "f32", rnd="rn")[0]


def isnan16(em, h):
    return em.alu("LTU", 0x7C00, em.alu("AND", h, 0x7FFF))


def flush16(em, h, ftz: bool = True):
    """.ftz: a subnormal f16 becomes the zero of its sign."""
    if not ftz:
        return h
    return em.alu("SEL", em.alu("AND", h, 0x8000), h, em.alu("EQ", em.alu("AND", h, 0x7C00), 0))


def sat16(em, h):
    """.sat: NaN and negative values (-0 too) give +0, values above 1 give 1."""
    bad = em.alu("OR", isnan16(em, h), em.alu("SHR", h, 15))
    return em.alu("SEL", 0, em.alu("SEL", 0x3C00, h, em.alu("LTU", 0x3C00, h)), bad)


def _result(em, r, ftz, sat):
    r = flush16(em, r, ftz)
    return sat16(em, r) if sat else r


def _arith(op):
    def routine(em, a, b, ftz=False, sat=False):
        a, b = flush16(em, a, ftz), flush16(em, b, ftz)
        return _result(em, narrow(em, op(em, widen(em, a), widen(em, b), "rn")), ftz, sat)
    routine.__name__ = routine.__qualname__ = op.__name__ + "16"      # the name labels a shared copy in the ROM
    return routine


add16, sub16, mul16 = _arith(add), _arith(sub), _arith(mul)


def fma16(em, a, b, c, ftz=False, sat=False):
    """fma.rn.f16: rm and rp of a x b + c in f32 differ exactly when it is inexact; the one toward
    zero with that as its last bit is the round-to-odd value. An exact zero keeps .rn's sign (rp's:
    -0 only when both rm and rp are)."""
    a, b, c = (flush16(em, x, ftz) for x in (a, b, c))
    p = mul(em, widen(em, a), widen(em, b), "rn")
    c = widen(em, c)
    down, up = add(em, p, c, "rm"), add(em, p, c, "rp")
    toward0 = em.alu("SEL", up, down, em.alu("SHR", down, 31))
    inexact = em.alu("AND", em.alu("LTU", 0, em.alu("XOR", down, up)),
                     em.alu("LTU", 0, em.alu("AND", em.alu("OR", down, up), 0x7FFFFFFF)))
    return _result(em, narrow(em, em.alu("OR", toward0, inexact)), ftz, sat)


def _pick(op):
    def routine(em, a, b, ftz=False, nan=False):
        a, b = flush16(em, a, ftz), flush16(em, b, ftz)
        return narrow(em, op(em, widen(em, a), widen(em, b), nan=nan))
    routine.__name__ = routine.__qualname__ = op.__name__ + "16"
    return routine


min16 = _pick(min)
max16 = _pick(max)


def neg16(em, a, ftz=False):
    """The sign flipped; a NaN gives the canonical NaN."""
    a = flush16(em, a, ftz)
    return em.alu("SEL", F16_NAN, em.alu("XOR", a, 0x8000), isnan16(em, a))


def abs16(em, a, ftz=False):
    a = flush16(em, a, ftz)
    return em.alu("SEL", F16_NAN, em.alu("AND", a, 0x7FFF), isnan16(em, a))


def compare16(em, op, a, b, ftz=False):
    """setp.op.f16 -> 0/1."""
    a, b = flush16(em, a, ftz), flush16(em, b, ftz)
    return compare(em, op, widen(em, a), widen(em, b))
