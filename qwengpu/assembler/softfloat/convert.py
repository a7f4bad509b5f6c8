"""Conversions: between f32, f16, f64 and the integer types, in every rounding mode (`cvt`).
"""
from __future__ import annotations

from qwengpu.machine.uops import M32

from .builder import ABS, F32_INF, F32_NAN, F32_ONE, FROUND, IROUND, S31, SoftFloatError, routine
from .f32 import denorm, flush32, ftz_out32, isnan32, pack32, round30, sat32
from .f64 import f64_to_int, int_to_f64

# conversions

INT_TYPES = {}
for _w in (8, 16, 32, 64):
    INT_TYPES[f"u{_w}"] = (_w, False)
    INT_TYPES[f"b{_w}"] = (_w, False)
    INT_TYPES[f"s{_w}"] = (_w, True)
FLOAT_TYPES = ("f16", "f32", "f64")


def _f32_to_int(b, x, dw, signed, irnd):
    """cvt.irnd.{s,u}dw.f32: round to an integer, clamp to the destination range; NaN -> 0
    (1 << 63 for a 64-bit destination). Returns a tuple of words."""
    x2 = x << 1
    e = x2 >> 24
    m = (x << 8) | S31                        # a subnormal keeps a (wrong) hidden bit: it is
    sh = 158 - e                              # still below 1/2 and rounds like any tiny value
    if dw == 64:
        lo = (m << (e - 158)) | (m >> sh)     # m * 2^(e-158): integer part (64 bits)
        hi = m >> (190 - e)
    else:
        lo, hi = m >> sh, None
    # rounding: frac = the bits below the integer part, left-aligned (0 once x >= 2^31)
    if irnd == "rni":
        frac = m << (e - 126)
        lo = lo + b.ltu(S31, frac + (lo & 1))  # frac has 8 trailing zeros: no wrap
    elif irnd in ("rpi", "rmi"):
        # only x of the rounding direction's sign, nonzero and below 2^31 can move
        if irnd == "rpi":
            cond = b.ltu(x - 1, 0x4F000000 - 1) if dw == 64 else b.lt(0, x)
        else:
            cond = b.ltu(x - 0x80000001, 0x4F000000 - 1) if dw == 64 else b.ltu(S31, x)
        mm = b.sel(cond, m, 0)
        lo = lo + b.ltu((m >> sh) << sh, mm)
    s = b.sar(x, 31)
    if dw == 64:
        if signed:
            nan = b.ltu(0xFF000000, x2)
            s = b.sel(nan, M32, s)            # NaN -> -2^63, like a negative overflow
            lo, hi = b.add64((lo ^ s, hi ^ s), (~s, ~s), cin="1")
            fits = b.ltu(x2, 190 << 24)
            return b.sel(fits, lo, ~s), b.sel(fits, hi, 0x7FFFFFFF ^ s)
        neg = b.ltu(F32_INF, x)               # negative or +NaN
        ov = b.leu(191 << 24, x2)
        lo = b.sel(ov, M32, lo)
        hi = b.sel(ov, M32, hi)
        nanh = b.sel(b.ltu(0xFF000000, x2), S31, 0)
        return b.sel(neg, 0, lo), b.sel(neg, nanh, hi)
    if signed:
        r = (lo ^ s) - s
        r = b.sel(b.leu(158 << 24, x2), 0x7FFFFFFF ^ s, r)
        r = b.sel(b.ltu(0xFF000000, x2), 0, r)
        if dw < 32:
            lim = (1 << (dw - 1)) - 1
            r = b.sel(b.lt(lim, r), lim, r)
            r = b.sel(b.lt(r, -lim - 1), (-lim - 1) & M32, r)
            r = r & ((1 << dw) - 1)
        return (r,)
    r = b.sel(b.leu(159 << 24, x2), M32, lo)
    r = b.sel(b.ltu(F32_INF, x), 0, r)        # negative (rounds to <= 0) or NaN
    if dw < 32:
        r = b.sel(b.ltu((1 << dw) - 1, r), (1 << dw) - 1, r)
    return (r,)


def _norm_pair(b, lo, hi):
    """A nonzero 64-bit magnitude as (n, k): n = its top bits with the leading one at bit 30
    and a sticky bit 0, k = its number of bits (value = n * 2^(k - 31) up to the sticky)."""
    hz = b.eq(hi, 0)
    h1 = b.sel(hz, lo, hi)
    l1 = b.sel(hz, 0, lo)
    zc = b.clz(h1)
    n = (h1 << zc) | (l1 >> (32 - zc))
    j = n | b.ltu(0, l1 << zc)
    return (j >> 1) | (j & 1), b.sub(b.sel(hz, 32, 64), zc)


def _int_to_f32(b, parts, sw, signed, mode):
    """cvt.rnd.f32.{s,u}sw: exact integer -> f32 rounded per mode (never overflows)."""
    x = parts[0]
    if sw < 32:
        x = b.sar(x << (32 - sw), 32 - sw) if signed else x & ((1 << sw) - 1)
    if sw == 64:
        lo, hi = x, parts[1]
        if signed:
            s = b.sar(hi, 31)
            lo, hi = b.add64((lo ^ s, hi ^ s), (~s, ~s), cin="1")
            sign = s
        else:
            sign = 0
        n, k = _norm_pair(b, lo, hi)
        nz = lo | hi
    else:
        if signed:
            s = b.sar(x, 31)
            mag = (x ^ s) - s
            sign = s
        else:
            mag, sign = x, 0
        z = b.clz(mag)
        n31 = mag << z
        # bit 0 of n31 can only be set when z == 0, i.e. mag >= 2^31: u32 only (s32: 2^31 even)
        n = (n31 >> 1) | (n31 & 1) if not signed else n31 >> 1
        k = 32 - z
        nz = mag
    # value = n * 2^(k - 31); n's leading bit 30 -> biased exponent k + 126, ek = k + 125
    rd = round30(b, n, mode, sign)
    res = ((k + 125) << 23) + rd
    if not isinstance(sign, int):
        res = res | (sign & S31)
    return b.sel(nz, res, 0)


def _rint32(b, x, irnd):
    """cvt.irnd.f32.f32: round to an integral value (keeps the sign of zero); NaN -> canonical."""
    ax = x & ABS
    e = ax >> 23
    low = M32 >> (e - 118)                    # the fraction bits below the units bit (e >= 127)
    if irnd == "rzi":
        r = x & ~low
    elif irnd == "rni":
        t = (x >> 1) << (e - 118)             # bit 31 = the units bit (0 once x is integral)
        half = low >> 1
        b.flag_add(t, t)
        r = b.add_cin(x, half) & ~low         # + half - 1 + units bit: ties to even
    else:
        away = b.sar(x, 31) if irnd == "rmi" else b.sar(~x, 31)
        r = (x + (low & away)) & ~low
    # |x| < 1: +-0 or +-1
    if irnd == "rni":
        one = b.ltu(0x3F000000, ax)
    elif irnd == "rzi":
        one = 0
    elif irnd == "rpi":
        one = b.lt(0, x)
    else:
        one = b.ltu(S31, x)
    small = (x & S31) | b.sel(one, F32_ONE, 0)
    r = b.sel(b.ltu(ax, F32_ONE), small, r)
    return b.sel(b.ltu(F32_INF, ax), F32_NAN, r)


def _f32_to_f64(b, x):
    """cvt.f64.f32: exact; a NaN keeps its sign and payload (shifted), not quieted."""
    a = x & ABS
    e = a >> 23
    # subnormal: normalise to a pattern with exponent field 1 - k (possibly negative)
    k = b.clz(a) - 8
    sub = (a << k) - (k << 23)
    p = b.sel(e, a, sub)
    bias = b.sel(b.leu(F32_INF, a), (2047 - 255) << 20, (1023 - 127) << 20)
    hi = (b.sar(p, 3) + bias) | (x & S31)
    lo = p << 29
    return b.sel(a, lo, 0), b.sel(a, hi, x & S31)


def _f64_to_f32(b, lo, hi, mode):
    """cvt.rnd.f32.f64."""
    ah = hi & ABS
    e = ah >> 20
    n = ((hi << 10) & 0x3FFFFC00) | 0x40000000 | (lo >> 22)
    n = n | b.ltu(0, lo << 10)
    ek = e - 897
    ek = b.sel(b.lt(ek, 256), ek, 256)       # keep (ek << 23) from wrapping
    n, ek = denorm(b, n, ek)
    rd = round30(b, n, mode, hi)
    res = pack32(b, ek, rd, mode, hi)
    res = b.sel(ah | lo, res, hi & S31)      # +-0 (an f64 subnormal is a tiny nonzero)
    # inf / NaN
    nan = b.ltu(0x7FF00000, ah | b.ltu(0, lo))
    spv = b.sel(nan, F32_NAN, (hi & S31) | F32_INF)
    return b.sel(b.leu(0x7FF00000, ah), spv, res)


def _f16_to_f32(b, x):
    """cvt.f32.f16: exact; a NaN gives the canonical f32 NaN."""
    h = x << 16                               # drop anything above bit 15
    a = (h << 1) >> 17                        # |x| as 15 bits
    e = a >> 10
    k = b.clz(a) - 21                         # subnormal: normalise to bit 10
    sub = (a << k) - (k << 10)
    p = b.sel(e, a, sub)
    r = ((b.sar(p << 16, 3) + ((127 - 15) << 23)) | (h & S31))
    r = b.sel(a, r, h & S31)
    inf = b.leu(0x7C00, a)
    spv = b.sel(b.eq(a, 0x7C00), (h & S31) | F32_INF, F32_NAN)
    return b.sel(inf, spv, r)


def _f32_to_f16(b, x, mode):
    """cvt.rnd.f16.f32: the f16 bits in the low half, zero above."""
    ax = x & ABS
    e = ax >> 23
    n = ((x << 7) & 0x3FFFFF80) | 0x40000000
    ek = e - 113
    ek = b.sel(b.lt(ek, 32), ek, 32)
    n, ek = denorm(b, n, ek)
    rd = round30(b, n, mode, x, sh=20)
    res = pack32(b, ek, rd, mode, x, mbits=10, inf=0x7C00, sbit=0x8000)
    sg = (x >> 16) & 0x8000
    res = b.sel(ax, res, sg)
    spv = b.sel(b.ltu(F32_INF, ax), 0x7FFF, sg | 0x7C00)
    return b.sel(b.leu(F32_INF, ax), spv, res)


def cvt(em, a_parts, dst_type, src_type, rnd=None, sat=False, ftz=False):
    """cvt{.rnd}{.ftz}{.sat}.dst.src -> tuple of Src (one word, or (lo, hi) for 64-bit types).

    a_parts: the source as a tuple of words ((lo, hi) for 64-bit types; an f16 or a narrow
    integer in the low bits of one word -- garbage above its width is ignored). A result
    narrower than 32 bits comes zero-extended (the caller sign-extends a signed one).
    Supported: f32 <-> {s,u,b}{8,16,32,64}, f32 -> f32 (rni rzi rmi rpi, or none with
    .ftz/.sat), f32 <-> f64, f16 <-> f32, f64 <-> integers, f64 -> f64 (rni ...).
    """
    d = str(dst_type).lstrip(".").lower()
    s = str(src_type).lstrip(".").lower()
    r = None if rnd is None else str(rnd).lstrip(".").lower()
    parts = tuple(a_parts) if isinstance(a_parts, (tuple, list)) else (a_parts,)
    name = f"cvt.{r}.{d}.{s}"

    def run(build, n):
        return routine(em, lambda bl, *xs: build(bl, *xs), *parts[:n])

    if d in INT_TYPES and s == "f32":
        if r not in IROUND:
            raise SoftFloatError(f"{name}: float -> int needs rni/rzi/rmi/rpi")
        dw, dsg = INT_TYPES[d]

        def build(bl, x):
            return _f32_to_int(bl, flush32(bl, x) if ftz else x, dw, dsg, r)
        out = run(build, 1)
        return out if isinstance(out, tuple) else (out,)
    if s in INT_TYPES and d == "f32":
        if r not in FROUND:
            raise SoftFloatError(f"{name}: int -> float needs rn/rz/rm/rp")
        sw, ssg = INT_TYPES[s]

        def build(bl, *xs):
            res = _int_to_f32(bl, xs, sw, ssg, r)
            # (an integer never gives a subnormal: .ftz has nothing to do)
            return sat32(bl, res) if sat else res
        return (run(build, 2 if sw == 64 else 1),)
    if d == "f32" and s == "f32":
        if r is not None and r not in IROUND:
            raise SoftFloatError(f"{name}: same-size float cvt only takes rni/rzi/rmi/rpi")

        def build(bl, x):
            if ftz:
                x = flush32(bl, x)
            if r is not None:
                x = _rint32(bl, x, r)
            elif ftz:
                x = bl.sel(isnan32(bl, x), F32_NAN, x)
            return sat32(bl, x) if sat else x
        return (run(build, 1),)
    if d == "f64" and s == "f32":
        if r is not None:
            raise SoftFloatError(f"{name}: widening float cvt takes no rounding modifier")
        if sat:
            raise SoftFloatError(f"{name}: .sat on an f64 result is not supported here")
        return run(lambda bl, x: _f32_to_f64(bl, flush32(bl, x) if ftz else x), 1)
    if d == "f32" and s == "f64":
        if r not in FROUND:
            raise SoftFloatError(f"{name}: narrowing float cvt needs rn/rz/rm/rp")

        def build(bl, lo, hi):
            res = _f64_to_f32(bl, lo, hi, r)
            if ftz:
                res = ftz_out32(bl, res)
            return sat32(bl, res) if sat else res
        return (run(build, 2),)
    if d == "f32" and s == "f16":
        if r is not None:
            raise SoftFloatError(f"{name}: widening float cvt takes no rounding modifier")

        def build(bl, x):
            res = _f16_to_f32(bl, x)
            if ftz:
                res = ftz_out32(bl, res)
            return sat32(bl, res) if sat else res
        return (run(build, 1),)
    if d == "f16" and s == "f32":
        if r not in FROUND:
            raise SoftFloatError(f"{name}: narrowing float cvt needs rn/rz/rm/rp")

        def build(bl, x):
            res = _f32_to_f16(bl, flush32(bl, x) if ftz else x, r)
            return sat32(bl, res, 0x3C00, 0x7C00) if sat else res
        return (run(build, 1),)
    return _cvt64(em, parts, d, s, r, sat, ftz, name)


def _rint64(b, lo, hi, irnd):
    """cvt.irnd.f64.f64: round to an integral value (keeps the sign of zero); a NaN passes
    unchanged. With f = 1075 - e fraction bits below the units bit (1 <= f <= 52 when
    1 <= |x| < 2^52), the pattern arithmetic of `_rint32` on the pair: add (half - 1 + the units
    bit) or (the mask, away from zero), clear the mask; carries reach the exponent by themselves."""
    ah = hi & ABS
    e = ah >> 20
    f = 1075 - e
    nlow0 = M32 << f                          # the f low bits (f in 1..52) are (~nlow0, low1)
    low1 = M32 >> (64 - f)
    if irnd == "rni":
        half = (~(M32 << (f - 1)), M32 >> (65 - f))                    # 2^(f-1) - 1
        unit = ((lo >> f) | (hi >> (f - 32))) & 1                      # the units bit
        t = b.add64(b.add64((lo, hi), half), (unit, 0))
    elif irnd == "rmi":
        neg = b.sar(hi, 31)
        t = b.add64((lo, hi), (~nlow0 & neg, low1 & neg))
    elif irnd == "rpi":                       # (every inverted operand second, or one inversion)
        nonneg_not = b.sar(hi, 31)
        t = b.add64((lo, hi), (~(nlow0 | nonneg_not), low1 & ~nonneg_not))
    else:
        t = (lo, hi)
    r = (t[0] & nlow0, t[1] & ~low1)
    # |x| < 1: +-0 or +-1
    nonzero = b.ltu(0, ah | lo)
    if irnd == "rni":
        one = b.ltu(0x3FE00000, ah) | (b.eq(ah, 0x3FE00000) & b.ltu(0, lo))   # |x| > 1/2
    elif irnd == "rzi":
        one = 0
    elif irnd == "rpi":
        one = nonzero & b.sar(~hi, 31)
    else:
        one = nonzero & b.sar(hi, 31)
    small_hi = (hi & S31) | b.sel(one, 0x3FF00000, 0)
    small = b.ltu(ah, 0x3FF00000)
    big = b.leu(0x43300000, ah)                # |x| >= 2^52, infinities and NaNs: unchanged
    return (b.sel(big, lo, b.sel(small, 0, r[0])), b.sel(big, hi, b.sel(small, small_hi, r[1])))


def _cvt64(em, parts, d, s, r, sat, ftz, name):
    if ftz or sat:
        raise SoftFloatError(f"{name}: .ftz/.sat need an f32 side")
    if d == "f64" and s == "f64":
        if r is None:
            return tuple(parts[:2])
        if r not in IROUND:
            raise SoftFloatError(f"{name}: same-size float cvt only takes rni/rzi/rmi/rpi")
        return routine(em, lambda b, lo, hi: _rint64(b, lo, hi, r), *parts[:2])
    if d in INT_TYPES and s == "f64":
        if r not in IROUND:
            raise SoftFloatError(f"{name}: float -> int needs rni/rzi/rmi/rpi")
        dw, dsg = INT_TYPES[d]
        out = routine(em, lambda b, lo, hi: f64_to_int(b, lo, hi, dw, dsg, r), *parts[:2])
        return out if isinstance(out, tuple) else (out,)
    if s in INT_TYPES and d == "f64":
        if r not in FROUND:
            raise SoftFloatError(f"{name}: int -> float needs rn/rz/rm/rp")
        sw, ssg = INT_TYPES[s]
        return routine(em, lambda b, *xs: int_to_f64(b, xs, sw, ssg, r), *parts[:2 if sw == 64 else 1])
    raise SoftFloatError(f"{name}: conversion not supported by softfloat")
