"""`cvt` of the IEEE semantics (`floats`): integer <-> integer, float -> integer (rounded with
.rni/.rzi/.rmi/.rpi, clamped, NaN to 0 or to the minimum of a 64-bit destination), integer -> float
and float -> float (rounded with .rn/.rz/.rm/.rp), each with `.ftz` and `.sat` where PTX has them.
"""
from __future__ import annotations

import functools

import numpy as np

from .float_exact import (CLASS_INF, CLASS_NAN, CLASS_ZERO, F16, F32, F64, F64_POS_INF, FLOAT_ROUNDINGS, FLOAT_TYPES,
                          INT_ROUNDINGS, INT_TYPES, UnsupportedFloatOp, bits_of_numpy, decode, exact_rint,
                          fast_paths_on, flush_subnormals, infinity, is_nan, normalise_modifier, numpy_of_bits,
                          operands, per_lane, quiet_numpy, round_exact, round_int_magnitude, saturate, zero_of)


def _norm_type(t):
    t = normalise_modifier(t)
    if t in INT_TYPES or t in FLOAT_TYPES:
        return t
    raise UnsupportedFloatOp(f"cvt: unsupported type {t!r}")


def _int_range(w, signed):
    if signed:
        return -(1 << (w - 1)), (1 << (w - 1)) - 1
    return 0, (1 << w) - 1


def _int_value(x, w, signed):
    x &= (1 << w) - 1
    if signed and x >> (w - 1):
        return x - (1 << w)
    return x


@quiet_numpy
def cvt(a, dst, src, *, rnd=None, sat=False, ftz=False):
    """cvt{.rnd}{.ftz}{.sat}.dst.src. Returns dst bit patterns zero-extended to 64 bits.

    dst/src: u8 u16 u32 u64 s8 s16 s32 s64 b8..b64 (as unsigned) f16 f32 f64. For a signed
    integer destination held in a wider register the caller sign-extends the result.
    Rounding: float->int needs .rni/.rzi/.rmi/.rpi; int->float and narrowing float->float need
    .rn/.rz/.rm/.rp; same-size float->float accepts an integer rounding (round to integral);
    every other use of a rounding modifier is rejected, as PTX rejects it.
    """
    d = _norm_type(dst)
    s = _norm_type(src)
    r = normalise_modifier(rnd)
    name = f"cvt{'.' + r if r else ''}{'.ftz' if ftz else ''}{'.sat' if sat else ''}.{d}.{s}"
    if r is not None and r not in FLOAT_ROUNDINGS and r not in INT_ROUNDINGS:
        raise UnsupportedFloatOp(f"{name}: unknown rounding modifier {rnd!r}")
    if ftz and "f32" not in (d, s):
        raise UnsupportedFloatOp(f"{name}: .ftz requires .f32 as source or destination type")
    d_int, s_int = d in INT_TYPES, s in INT_TYPES
    if d_int and s_int:
        return _cvt_int_int(a, d, s, r, sat, name)
    if d_int:
        return _cvt_f2i(a, d, s, r, sat, ftz, name)
    if s_int:
        return _cvt_i2f(a, d, s, r, sat, ftz, name)
    return _cvt_f2f(a, d, s, r, sat, ftz, name)


def _u64(a):
    return operands(F64, a)[0]


def _cvt_int_int(a, d, s, r, sat, name):
    if r is not None:
        raise UnsupportedFloatOp(f"{name}: rounding modifiers are illegal for int-to-int cvt")
    dw, dsg = INT_TYPES[d]
    sw, ssg = INT_TYPES[s]
    dlo, dhi = _int_range(dw, dsg)
    slo, shi = _int_range(sw, ssg)
    if sat and dlo <= slo and shi <= dhi:
        raise UnsupportedFloatOp(f"{name}: .sat is illegal when the destination range contains "
                                 f"the source range")
    x = _u64(a)
    if not sat:
        x = x & np.uint64((1 << sw) - 1)
        if ssg and sw < 64:
            sb = np.uint64(1 << (sw - 1))
            with np.errstate(all="ignore"):
                x = (x ^ sb) - sb                      # sign-extend (two's complement, mod 2**64)
        return x & np.uint64((1 << dw) - 1)

    def one(v):
        v = _int_value(v, sw, ssg)
        return min(max(v, dlo), dhi) & ((1 << dw) - 1)
    return per_lane(one, [x])


def _f2i_nan(sfmt, dw):
    return (1 << (dw - 1)) if (sfmt is F64 or dw == 64) else 0


def _x_f2i(x, sfmt, dw, dsg, irnd):
    c, sg, m, e = decode(x, sfmt)
    lo, hi = _int_range(dw, dsg)
    if c == CLASS_NAN:
        return _f2i_nan(sfmt, dw)
    if c == CLASS_INF:
        v = lo if sg else hi
    elif c == CLASS_ZERO:
        v = 0
    else:
        mag = round_int_magnitude(sg, m, e, irnd)
        v = -mag if sg else mag
        v = min(max(v, lo), hi)
    return v & ((1 << dw) - 1)


_NP_IRND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def _cvt_f2i(a, d, s, r, sat, ftz, name):
    if r not in INT_ROUNDINGS:
        raise UnsupportedFloatOp(f"{name}: float-to-int cvt requires .rni/.rzi/.rmi/.rpi")
    sfmt = FLOAT_TYPES[s]
    dw, dsg = INT_TYPES[d]
    (x,) = operands(sfmt, a)
    if ftz:
        x = flush_subnormals(x, sfmt)
    if fast_paths_on() and dw <= 32:
        f = numpy_of_bits(x, sfmt).astype(np.float64)
        lo, hi = _int_range(dw, dsg)
        with np.errstate(all="ignore"):
            v = np.clip(_NP_IRND[r](f), float(lo), float(hi))
        nan = np.isnan(f)
        v = np.where(nan, 0.0, v).astype(np.int64).view(np.uint64) & np.uint64((1 << dw) - 1)
        return np.where(nan, np.uint64(_f2i_nan(sfmt, dw)), v)
    fn = functools.partial(_x_f2i, sfmt=sfmt, dw=dw, dsg=dsg, irnd=r)
    return per_lane(fn, [x])


def _x_i2f(x, sw, ssg, dfmt, mode):
    v = _int_value(x, sw, ssg)
    if v == 0:
        return 0
    return round_exact(int(v < 0), abs(v), 0, False, dfmt, mode)


def _cvt_i2f(a, d, s, r, sat, ftz, name):
    if r not in FLOAT_ROUNDINGS:
        raise UnsupportedFloatOp(f"{name}: int-to-float cvt requires .rn/.rz/.rm/.rp")
    dfmt = FLOAT_TYPES[d]
    sw, ssg = INT_TYPES[s]
    x = _u64(a) & np.uint64((1 << sw) - 1)
    if fast_paths_on() and sw <= 32 and dfmt is not F16 and (r == "rn" or dfmt is F64):
        if ssg:
            sb = np.uint64(1 << (sw - 1))
            with np.errstate(all="ignore"):
                v = ((x ^ sb) - sb).view(np.int64)
        else:
            v = x.view(np.int64)
        f = v.astype(np.float64)                            # exact for |v| < 2**53
        out = bits_of_numpy(f.astype(dfmt.npfloat), dfmt)
    else:
        fn = functools.partial(_x_i2f, sw=sw, ssg=ssg, dfmt=dfmt, mode=r)
        out = per_lane(fn, [x])
    if ftz and dfmt is F32:
        out = flush_subnormals(out, dfmt)
    if sat:
        out = saturate(out, dfmt)
    return out


def _widen_nan(x, sfmt, dfmt):
    """NaN conversion to a wider format: f32/f16 destinations get the canonical NaN; an f64
    destination keeps sign and payload (assumption, see docs/floats.md)."""
    if dfmt is not F64:
        return dfmt.default_nan
    sg = (x >> (sfmt.width - 1)) & 1
    frac = x & sfmt.fracmask
    return (sg << 63) | F64_POS_INF | (frac << (52 - sfmt.mbits))


def _x_f2f(x, sfmt, dfmt, mode):
    c, sg, m, e = decode(x, sfmt)
    if c == CLASS_NAN:
        return _widen_nan(x, sfmt, dfmt)
    if c == CLASS_INF:
        return infinity(dfmt, sg)
    if c == CLASS_ZERO:
        return zero_of(dfmt, sg)
    return round_exact(sg, m, e, False, dfmt, mode)


def _cvt_f2f(a, d, s, r, sat, ftz, name):
    sfmt, dfmt = FLOAT_TYPES[s], FLOAT_TYPES[d]
    (x,) = operands(sfmt, a)
    if ftz and sfmt is F32:
        x = flush_subnormals(x, sfmt)
    if sfmt is dfmt:
        if r is not None and r not in INT_ROUNDINGS:
            raise UnsupportedFloatOp(f"{name}: same-size float cvt only takes an integer "
                                     f"rounding (.rni/.rzi/.rmi/.rpi)")
        if r is None:
            out = x
            if ftz and sfmt is not F64:
                out = np.where(is_nan(out, sfmt), sfmt.u_nan, out)
        elif fast_paths_on():
            with np.errstate(all="ignore"):
                f = _NP_IRND[r](numpy_of_bits(x, sfmt))
            out = bits_of_numpy(f, sfmt)
            nan = is_nan(x, sfmt)
            out = np.where(nan, x if sfmt is F64 else sfmt.u_nan, out)
        else:
            out = per_lane(functools.partial(exact_rint, fmt=sfmt, irnd=r), [x])
    elif dfmt.width > sfmt.width:
        if r is not None:
            raise UnsupportedFloatOp(f"{name}: rounding modifiers are illegal for widening "
                                     f"float conversions")
        if fast_paths_on():
            with np.errstate(all="ignore"):
                out = bits_of_numpy(numpy_of_bits(x, sfmt).astype(dfmt.npfloat), dfmt)
            nan = is_nan(x, sfmt)
            if nan.any():
                out = per_lane(functools.partial(_widen_nan, sfmt=sfmt, dfmt=dfmt), [x],
                             out=out, where=nan)
        else:
            out = per_lane(functools.partial(_x_f2f, sfmt=sfmt, dfmt=dfmt, mode="rn"), [x])
    else:
        if r not in FLOAT_ROUNDINGS:
            raise UnsupportedFloatOp(f"{name}: narrowing float conversions require "
                                     f".rn/.rz/.rm/.rp")
        if fast_paths_on() and r == "rn":
            with np.errstate(all="ignore"):
                f = numpy_of_bits(x, sfmt).astype(dfmt.npfloat)
            out = bits_of_numpy(f, dfmt)
            out[np.isnan(f)] = dfmt.u_nan
        else:
            out = per_lane(functools.partial(_x_f2f, sfmt=sfmt, dfmt=dfmt, mode=r), [x])
    if ftz and dfmt is F32:
        out = flush_subnormals(out, dfmt)
    if sat:
        out = saturate(out, dfmt)
    return np.asarray(out, dtype=np.uint64)
