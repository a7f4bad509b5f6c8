"""Bit-exact PTX floating-point semantics, vectorised over lanes.

Registers are raw bit patterns held in numpy ``uint64`` arrays of shape ``(lanes,)``: an
``.f16`` value lives in the low 16 bits, ``.f32`` in the low 32 and ``.f64`` in all 64. Inputs
may carry garbage above the operation's width (PTX lets a wider register feed a narrower
instruction); it is masked off. Outputs always have zeros above the result's width.

Design: *exact, then round*. Every operation has a reference path that decodes each lane to
an exact dyadic rational (sign, integer mantissa, power-of-two exponent) held in Python
ints, computes the exact result (or, for div and sqrt, enough quotient/root bits plus a
sticky bit), and rounds it once to the target format with the requested IEEE mode
(``rn rz rm rp``), handling subnormals, overflow (to infinity or to the largest finite value
depending on the mode) and signed zeros. This path is the semantics; it is slow but small.

Fast paths use numpy's IEEE binary32/binary64 arithmetic where it is provably the same
single correctly rounded operation (``rn`` add/sub/mul/div/sqrt, and ``fma.rn.f32`` through
an exact binary64 product plus a TwoSum check that sends double-rounding candidates to the
exact path), then fix NaNs, ``.ftz`` and ``.sat`` with bit operations. ``exact_only()``
turns them off (the tests compare both paths).

Hardware rules implemented (PTX ISA 9.x, CUDA Programming Guide "Floating-Point Standard";
see docs/floats.md for the sources and for what is an assumption):

* f32 / f16 arithmetic that produces a NaN returns the canonical NaN ``0x7FFFFFFF`` /
  ``0x7FFF``. f64 arithmetic supports NaN payloads: a NaN operand propagates unchanged (the
  first NaN operand in a, b, c order); a NaN created by an invalid operation (0*inf,
  inf-inf, sqrt(-x), 0/0, inf/inf) is ``F64_CANONICAL_NAN`` = ``0xFFF8000000000000``.
* ``.ftz`` flushes subnormal inputs and subnormal results (detected after rounding) to a
  zero of the same sign; f32 and f16 only.
* ``.sat`` clamps to [+0.0, 1.0]; NaN and -0.0 become +0.0.
* min/max return the non-NaN operand when exactly one is NaN, order -0.0 < +0.0, and with
  ``.NaN`` return the canonical NaN if either input is NaN.
* cvt float->int rounds with .rni/.rzi/.rmi/.rpi, always clamps to the destination range,
  and maps NaN to 0, except that an f64 source or a 64-bit destination gives
  ``1 << (width-1)``.

Approximate instructions (ex2/lg2/sin/cos/tanh/rsqrt .approx, div.approx, div.full,
rcp.approx) are deliberately absent: their results are implementation-specific (`approx` defines
qwenGPU's).

This module is the public face (`__all__`); the formats and the exact path are `float_exact`,
`cvt` is `float_convert`.
"""
from __future__ import annotations

import functools
import struct

import numpy as np

from .float_convert import cvt
from .float_exact import (COMPARE_OPS, F16, F16_CANONICAL_NAN, F16_POS_INF, F32, F32_CANONICAL_NAN, F32_POS_INF, F64,
                          F64_CANONICAL_NAN, F64_POS_INF, FLOAT_TYPES, INT_TYPES, TESTP_OPS, UnsupportedFloatOp,
                          bits_of_numpy, check_ftz, check_rounding, check_sat, exact_add, exact_div, exact_fma,
                          exact_mul, exact_only, exact_rcp, exact_sqrt, fast_paths_on, flush_subnormals, format_of,
                          is_nan, normalise_modifier, numpy_of_bits, operands, per_lane, quiet_numpy, saturate)

__all__ = [
    "UnsupportedFloatOp",
    "F16_CANONICAL_NAN", "F32_CANONICAL_NAN", "F64_CANONICAL_NAN",
    "F16_POS_INF", "F32_POS_INF", "F64_POS_INF",
    "fadd", "fsub", "fmul", "ffma", "fdiv", "frcp", "fsqrt",
    "fmin", "fmax", "fabs", "fneg", "fcopysign", "fcompare", "ftestp", "cvt",
    "to_bits", "from_bits", "float_bits", "exact_only",
    "COMPARE_OPS", "TESTP_OPS", "INT_TYPES", "FLOAT_TYPES",
]


# --------------------------------------------------------------------------------------
# arithmetic

_NP2 = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _fast2(op, a, b, fmt):
    """numpy rn path. Returns (bits, lanes that still need the exact path)."""
    if fmt is F16:                       # add/sub/mul of two f16 is exact in f64: one rounding
        fa = numpy_of_bits(a, fmt).astype(np.float64)
        fb = numpy_of_bits(b, fmt).astype(np.float64)
        with np.errstate(all="ignore"):
            r = _NP2[op](fa, fb).astype(np.float16)
    else:
        with np.errstate(all="ignore"):
            r = _NP2[op](numpy_of_bits(a, fmt), numpy_of_bits(b, fmt))
    out = bits_of_numpy(r, fmt)
    nan = np.isnan(r)
    if fmt is F64:
        return out, nan
    out[nan] = fmt.u_nan
    return out, None


def _arith2(op, a, b, width, rnd, ftz, sat):
    fmt = format_of(width, op)
    if fmt is F16 and op == "div":
        raise UnsupportedFloatOp("div.f16 does not exist in PTX")
    mode = check_rounding(rnd, fmt, op, default="rn" if op != "div" else None)
    check_ftz(ftz, fmt, op)
    check_sat(sat, fmt, op)
    a, b = operands(fmt, a, b)
    if ftz:
        a, b = flush_subnormals(a, fmt), flush_subnormals(b, fmt)
    if op == "add":
        fn = functools.partial(exact_add, fmt=fmt, mode=mode)
    elif op == "sub":
        fn = functools.partial(exact_add, fmt=fmt, mode=mode, negate_b=True)
    elif op == "mul":
        fn = functools.partial(exact_mul, fmt=fmt, mode=mode)
    else:
        fn = functools.partial(exact_div, fmt=fmt, mode=mode)
    if fast_paths_on() and mode == "rn" and (fmt is not F16 or op != "div"):
        out, redo = _fast2(op, a, b, fmt)
        if redo is not None and redo.any():
            out = per_lane(fn, [a, b], out=out, where=redo)
    else:
        out = per_lane(fn, [a, b])
    if ftz:
        out = flush_subnormals(out, fmt)
    if sat:
        out = saturate(out, fmt)
    return out


@quiet_numpy
def fadd(a, b, *, width=32, rnd="rn", ftz=False, sat=False):
    """add{.rnd}{.ftz}{.sat}.f32 / add{.rnd}.f64 / add{.rn}{.ftz}{.sat}.f16. rnd=None -> .rn."""
    return _arith2("add", a, b, width, rnd, ftz, sat)


@quiet_numpy
def fsub(a, b, *, width=32, rnd="rn", ftz=False, sat=False):
    """sub: a - b (same modifiers as add)."""
    return _arith2("sub", a, b, width, rnd, ftz, sat)


@quiet_numpy
def fmul(a, b, *, width=32, rnd="rn", ftz=False, sat=False):
    """mul: a * b (same modifiers as add)."""
    return _arith2("mul", a, b, width, rnd, ftz, sat)


@quiet_numpy
def fdiv(a, b, *, width=32, rnd="rn", ftz=False):
    """div.rnd{.ftz}.f32 / div.rnd.f64: IEEE correctly rounded a / b (no .approx/.full)."""
    return _arith2("div", a, b, width, rnd, ftz, False)


def _fma_f32_rn_fast(a, b, c):
    """fma.rn.f32 through binary64: the product of two f32 is exact in f64; if the f64 sum is
    exact (TwoSum error 0) one f32 rounding is correct, and if it is inexact the only way
    double rounding can go wrong is when the f64 sum lands exactly on an f32 midpoint.
    Returns (bits, lanes needing the exact path)."""
    fa = numpy_of_bits(a, F32).astype(np.float64)
    fb = numpy_of_bits(b, F32).astype(np.float64)
    fc = numpy_of_bits(c, F32).astype(np.float64)
    with np.errstate(all="ignore"):
        p = fa * fb
        s = p + fc
        bb = s - p
        err = (p - (s - bb)) + (fc - bb)
        r = s.astype(np.float32)
    finite = np.isfinite(fa) & np.isfinite(fb) & np.isfinite(fc) & np.isfinite(s)
    sb = s.view(np.uint64)
    mag = sb & np.uint64(0x7FFFFFFFFFFFFFFF)
    normal_range = mag >= np.uint64(0x3810000000000000)          # |s| >= 2**-126
    mid_normal = (sb & np.uint64((1 << 29) - 1)) == np.uint64(1 << 28)
    with np.errstate(all="ignore"):
        t = np.abs(s) * 2.0 ** 150                               # f32 subnormal grid: 2**-149
        ti = np.floor(t)
        mid_sub = (t == ti) & (np.fmod(ti, 2.0) == 1.0)
    midpoint = np.where(normal_range, mid_normal, mid_sub)
    redo = ~finite | ((err != 0) & midpoint)
    return bits_of_numpy(r, F32), redo


@quiet_numpy
def ffma(a, b, c, *, width=32, rnd="rn", ftz=False, sat=False):
    """fma.rnd / mad.rnd (sm_20+): a*b+c computed exactly, rounded once.

    fma and mad with a rounding modifier are the same instruction. A rounding modifier is
    required; legacy ``mad.f32`` without one (PTX ISA <= 3.1 on sm_20+) means mad.rn.f32 and
    the caller should pass rnd="rn" for it. Half precision: fma.rn{.ftz}{.sat}.f16."""
    fmt = format_of(width, "fma")
    mode = check_rounding(rnd, fmt, "fma", default=None)
    check_ftz(ftz, fmt, "fma")
    check_sat(sat, fmt, "fma")
    a, b, c = operands(fmt, a, b, c)
    if ftz:
        a, b, c = flush_subnormals(a, fmt), flush_subnormals(b, fmt), flush_subnormals(c, fmt)
    fn = functools.partial(exact_fma, fmt=fmt, mode=mode)
    if fast_paths_on() and fmt is F32 and mode == "rn":
        out, redo = _fma_f32_rn_fast(a, b, c)
        if redo.any():
            out = per_lane(fn, [a, b, c], out=out, where=redo)
    else:
        out = per_lane(fn, [a, b, c])
    if ftz:
        out = flush_subnormals(out, fmt)
    if sat:
        out = saturate(out, fmt)
    return out


@quiet_numpy
def frcp(a, *, width=32, rnd="rn", ftz=False):
    """rcp.rnd{.ftz}.f32 / rcp.rnd.f64: correctly rounded 1/a (no rcp.approx)."""
    return _unary("rcp", exact_rcp, lambda x, fmt: fmt.npfloat(1.0) / x, a, width, rnd, ftz)


@quiet_numpy
def fsqrt(a, *, width=32, rnd="rn", ftz=False):
    """sqrt.rnd{.ftz}.f32 / sqrt.rnd.f64: correctly rounded square root (no sqrt.approx)."""
    return _unary("sqrt", exact_sqrt, lambda x, fmt: np.sqrt(x), a, width, rnd, ftz)


def _unary(name, exact, numpy_op, a, width, rnd, ftz):
    """A correctly rounded unary operation: `exact` per lane, or numpy's IEEE `numpy_op` where it is
    the same rounding (rn; f64 NaNs by the exact path, for their payloads)."""
    fmt = format_of(width, name)
    if fmt is F16:
        raise UnsupportedFloatOp(f"{name}.f16 does not exist in PTX")
    mode = check_rounding(rnd, fmt, name, default=None)
    check_ftz(ftz, fmt, name)
    (a,) = operands(fmt, a)
    if ftz:
        a = flush_subnormals(a, fmt)
    fn = functools.partial(exact, fmt=fmt, mode=mode)
    if fast_paths_on() and mode == "rn":
        with np.errstate(all="ignore"):
            r = numpy_op(numpy_of_bits(a, fmt), fmt)
        out = bits_of_numpy(r, fmt)
        nan = np.isnan(r)
        if fmt is F64:
            if nan.any():
                out = per_lane(fn, [a], out=out, where=nan)
        else:
            out[nan] = fmt.u_nan
    else:
        out = per_lane(fn, [a])
    if ftz:
        out = flush_subnormals(out, fmt)
    return out


# --------------------------------------------------------------------------------------
# min / max / abs / neg / copysign / compare / testp (pure bit operations)

def _order_key(x, fmt):
    """Unsigned key whose order is the numeric order of non-NaN values, with -0 < +0."""
    neg = (x & fmt.u_sign) != 0
    return np.where(neg, (~x) & fmt.u_mask, x | fmt.u_sign)


def _minmax(a, b, width, ftz, nan, is_max):
    op = "max" if is_max else "min"
    fmt = format_of(width, op)
    check_ftz(ftz, fmt, op)
    if nan and fmt is F64:
        raise UnsupportedFloatOp(f"{op}.NaN is not defined for .f64")
    a, b = operands(fmt, a, b)
    if ftz:
        a, b = flush_subnormals(a, fmt), flush_subnormals(b, fmt)
    an, bn = is_nan(a, fmt), is_nan(b, fmt)
    ka, kb = _order_key(a, fmt), _order_key(b, fmt)
    pick_a = (ka > kb) if is_max else (ka < kb)
    out = np.where(pick_a, a, b)
    out = np.where(an & ~bn, b, out)
    out = np.where(bn & ~an, a, out)
    both = an & bn
    # f32/f16: canonical NaN. f64: the first operand's NaN (payloads supported; assumption).
    out = np.where(both, a if fmt is F64 else fmt.u_nan, out)
    if nan:
        out = np.where(an | bn, fmt.u_nan, out)
    return out


@quiet_numpy
def fmin(a, b, *, width=32, ftz=False, nan=False):
    """min{.ftz}{.NaN}.f32 / min.f64 / min{.ftz}{.NaN}.f16 (-0.0 < +0.0)."""
    return _minmax(a, b, width, ftz, nan, False)


@quiet_numpy
def fmax(a, b, *, width=32, ftz=False, nan=False):
    """max{.ftz}{.NaN}.f32 / max.f64 / max{.ftz}{.NaN}.f16 (+0.0 > -0.0)."""
    return _minmax(a, b, width, ftz, nan, True)


@quiet_numpy
def fabs(a, *, width=32, ftz=False):
    """abs{.ftz}.f32 / abs.f64 / abs{.ftz}.f16. f64 NaN passes through unchanged; f32/f16 NaN
    gives the canonical NaN."""
    fmt = format_of(width, "abs")
    check_ftz(ftz, fmt, "abs")
    (a,) = operands(fmt, a)
    if ftz:
        a = flush_subnormals(a, fmt)
    nan = is_nan(a, fmt)
    return np.where(nan, a if fmt is F64 else fmt.u_nan, a & fmt.u_absmask)


@quiet_numpy
def fneg(a, *, width=32, ftz=False):
    """neg{.ftz}.f32 / neg.f64 / neg{.ftz}.f16. f64 NaN passes through unchanged; f32/f16 NaN
    gives the canonical NaN."""
    fmt = format_of(width, "neg")
    check_ftz(ftz, fmt, "neg")
    (a,) = operands(fmt, a)
    if ftz:
        a = flush_subnormals(a, fmt)
    nan = is_nan(a, fmt)
    return np.where(nan, a if fmt is F64 else fmt.u_nan, a ^ fmt.u_sign)


@quiet_numpy
def fcopysign(a, b, *, width=32):
    """copysign.type d, a, b: the sign bit of **a** with the rest of **b** (PTX operand order)."""
    fmt = format_of(width, "copysign")
    if fmt is F16:
        raise UnsupportedFloatOp("copysign is only defined for .f32 and .f64")
    a, b = operands(fmt, a, b)
    return (a & fmt.u_sign) | (b & fmt.u_absmask)


@quiet_numpy
def fcompare(op, a, b, *, width=32, ftz=False):
    """setp/set comparison of two floats -> bool array. op in COMPARE_OPS."""
    op = normalise_modifier(op)
    if op not in COMPARE_OPS:
        raise UnsupportedFloatOp(f"setp: invalid float comparison {op!r}")
    fmt = format_of(width, "setp")
    check_ftz(ftz, fmt, "setp")
    a, b = operands(fmt, a, b)
    if ftz:
        a, b = flush_subnormals(a, fmt), flush_subnormals(b, fmt)
    unord = is_nan(a, fmt) | is_nan(b, fmt)
    if op == "num":
        return ~unord
    if op == "nan":
        return unord
    za = (a & fmt.u_absmask) == 0
    zb = (b & fmt.u_absmask) == 0
    ka = _order_key(np.where(za, np.uint64(0), a), fmt)
    kb = _order_key(np.where(zb, np.uint64(0), b), fmt)
    base = op[:2]
    r = {"eq": ka == kb, "ne": ka != kb, "lt": ka < kb,
         "le": ka <= kb, "gt": ka > kb, "ge": ka >= kb}[base]
    if op.endswith("u"):
        return r | unord
    return r & ~unord


@quiet_numpy
def ftestp(op, a, *, width=32):
    """testp.op.type -> bool array. Zero counts as normal (PTX's special case)."""
    op = normalise_modifier(op)
    if op not in TESTP_OPS:
        raise UnsupportedFloatOp(f"testp: invalid property {op!r}")
    fmt = format_of(width, "testp")
    if fmt is F16:
        raise UnsupportedFloatOp("testp is only defined for .f32 and .f64")
    (a,) = operands(fmt, a)
    ex = a & fmt.u_expmask
    frac = a & np.uint64(fmt.fracmask)
    special = ex == fmt.u_expmask
    nan = special & (frac != 0)
    if op == "finite":
        return ~special
    if op == "infinite":
        return special & (frac == 0)
    if op == "number":
        return ~nan
    if op == "notanumber":
        return nan
    sub = (ex == 0) & (frac != 0)
    if op == "subnormal":
        return sub
    return ~special & ~sub                                   # normal (incl. +-0)


# --------------------------------------------------------------------------------------
# convenience

def to_bits(values, width=32):
    """Python/numpy floats -> uint64 bit patterns of the given float width."""
    fmt = format_of(width, "to_bits")
    return np.asarray(values, dtype=fmt.npfloat).view(fmt.npuint).astype(np.uint64)


def from_bits(bits, width=32):
    """uint64 bit patterns -> numpy floats of the given width (garbage above width ignored)."""
    fmt = format_of(width, "from_bits")
    (x,) = operands(fmt, bits)
    return numpy_of_bits(x, fmt)


def float_bits(x: float, width: int) -> int:
    """The bits of the Python float `x` as a `width`-bit float (16, 32 or 64), rounded to nearest:
    how an instruction's decimal literal becomes its operand, on every engine."""
    if width == 32:
        return struct.unpack("<I", struct.pack("<f", x))[0]
    if width == 64:
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    return int(np.array([x], dtype=np.float16).view(np.uint16)[0])
