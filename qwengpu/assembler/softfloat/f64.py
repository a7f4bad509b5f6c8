"""f64 routines on (lo, hi) pairs: add/sub, mul, min/max, compare, testp, abs/neg/copysign, div/rcp,
sqrt, fma. NaN operands propagate unchanged (the first NaN operand), a NaN made by an invalid
operation is F64_CANONICAL_NAN = 0xFFF8000000000000; no .ftz/.sat.
"""
from __future__ import annotations

from qwengpu.machine.uops import M32

from .builder import ABS, COMPARE_OPS, F64_NAN_HI, FROUND, S31, SoftFloatError, routine
from .f32 import check_mode, recip32, rsqrt32

# f64 on (lo, hi) pairs. NaN operands propagate unchanged (the first NaN operand), a NaN made
# by an invalid operation is F64_CANONICAL_NAN = 0xFFF8000000000000; no .ftz/.sat.

F64_INF_HI = 0x7FF00000


def _isnan64(b, lo, hi):
    """0/1: (lo, hi) is a NaN."""
    return b.ltu(F64_INF_HI, (hi & ABS) | b.ltu(0, lo))


def _run64(em, build, *pairs):
    """Routine on f64 operands given as (lo, hi) pairs; returns one pair or one word."""
    flat = [x for p in pairs for x in p]

    def wrapped(b, *xs):
        ps = [(xs[2 * i], xs[2 * i + 1]) for i in range(len(pairs))]
        return build(b, *ps)
    return routine(em, wrapped, *flat)


def abs64(em, a):
    """abs.f64: clear the sign; a NaN passes through unchanged."""
    def build(b, a):
        lo, hi = a
        return lo, b.sel(_isnan64(b, lo, hi), hi, hi & ABS)
    return _run64(em, build, a)


def neg64(em, a):
    """neg.f64: flip the sign; a NaN passes through unchanged."""
    def build(b, a):
        lo, hi = a
        return lo, b.sel(_isnan64(b, lo, hi), hi, hi ^ S31)
    return _run64(em, build, a)


def copysign64(em, a, b):
    """copysign.f64 d, a, b: the sign of a with the rest of b."""
    return _run64(em, lambda bl, a, c: (c[0], c[1] ^ ((a[1] ^ c[1]) & S31)), a, b)


def _ukey64(b, lo, hi):
    """64-bit unsigned order key: finite and infinite values in order on [0, (0xFFE00000, 0)]
    with -0 == +0; NaNs above (like _ukey for f32, the magnitude offset by the infinity)."""
    s = b.sar(hi, 31)
    # positive: x + inf;  negative: inf - |x|  ==  (~x + 1) + inf - 2^63 (mod 2^64)
    th = (hi ^ s) + (0x7FF00000 ^ (s & S31))
    tl = lo ^ s
    return b.add64((tl, th), (~s, ~s), cin="1")


def _ltu64(b, a, c):
    return b.ltu(a[1], c[1]) | (b.eq(a[1], c[1]) & b.ltu(a[0], c[0]))


def _leu64(b, a, c):
    return b.ltu(a[1], c[1]) | (b.eq(a[1], c[1]) & b.leu(a[0], c[0]))


def _eq64(b, a, c):
    return b.eq(a[1], c[1]) & b.eq(a[0], c[0])


def _compare64(b, op, a, c):
    op = str(op).lstrip(".").lower()
    if op not in COMPARE_OPS:
        raise SoftFloatError(f"setp: unknown comparison {op!r}")
    if op in ("num", "nan"):
        n = _isnan64(b, *a) | _isnan64(b, *c)
        return n if op == "nan" else b.not01(n)
    ka, kc = _ukey64(b, *a), _ukey64(b, *c)

    def ok(k):                                # k <= (0xFFE00000, 0): not a NaN
        return b.ltu(k[1], 0xFFE00000 + b.eq(k[0], 0))

    def bad(k):
        return b.not01(ok(k))
    if op == "eq":
        return _eq64(b, ka, kc) & ok(ka)
    if op == "ne":
        return b.sel(_eq64(b, ka, kc), 0, ok(kc)) & ok(ka)
    if op == "lt":
        return _ltu64(b, ka, kc) & ok(kc)
    if op == "le":
        return _leu64(b, ka, kc) & ok(kc)
    if op == "gt":
        return _ltu64(b, kc, ka) & ok(ka)
    if op == "ge":
        return _leu64(b, kc, ka) & ok(ka)
    if op == "equ":
        return b.sel(_eq64(b, ka, kc), 1, bad(ka) | bad(kc))
    if op == "neu":
        return b.sel(_eq64(b, ka, kc), bad(ka), 1)
    if op == "ltu":
        return _ltu64(b, ka, kc) | bad(ka)
    if op == "leu":
        return _leu64(b, ka, kc) | bad(ka)
    if op == "gtu":
        return _ltu64(b, kc, ka) | bad(kc)
    return _leu64(b, kc, ka) | bad(kc)           # geu


def compare64(em, op, a, b):
    """setp.op.f64 on (lo, hi) pairs -> 0/1."""
    return _run64(em, lambda bl, a, c: _compare64(bl, op, a, c), a, b)


def _testp64(b, op, lo, hi):
    op = str(op).lstrip(".").lower()
    h2 = hi << 1
    if op == "finite":
        return b.ltu(h2, 0xFFE00000)
    if op == "infinite":
        return b.eq(h2, 0xFFE00000) & b.eq(lo, 0)
    if op == "number":
        return b.ltu(h2, 0xFFE00000 + b.eq(lo, 0))
    if op == "notanumber":
        return b.ltu(0xFFE00000, h2 | b.ltu(0, lo))
    if op == "subnormal":
        return b.ltu(h2, 0x00200000) & b.ltu(0, h2 | lo)
    if op == "normal":
        return b.sel(h2 | lo, b.ltu(h2 - 0x00200000, 0xFFC00000), 1)
    raise SoftFloatError(f"testp: unknown property {op!r}")


def testp64(em, op, a):
    """testp.op.f64 -> 0/1."""
    return _run64(em, lambda b, a: _testp64(b, op, *a), a)


def _minmax64(b, a, c, is_max):
    def okey(lo, hi):                          # ones'-complement order key: -0 < +0
        s = b.sar(hi, 31)
        return lo ^ s, hi ^ (s | S31)
    ka, kc = okey(*a), okey(*c)
    pick_a = _ltu64(b, kc, ka) if is_max else _ltu64(b, ka, kc)
    lo = b.sel(pick_a, a[0], c[0])
    hi = b.sel(pick_a, a[1], c[1])
    na, nc = _isnan64(b, *a), _isnan64(b, *c)
    lo, hi = b.sel(na, c[0], lo), b.sel(na, c[1], hi)
    return b.sel(nc, a[0], lo), b.sel(nc, a[1], hi)       # both NaN: a


def min64(em, a, b):
    """min.f64 (-0 < +0; one NaN -> the other; two NaNs -> a)."""
    return _run64(em, lambda bl, a, c: _minmax64(bl, a, c, False), a, b)


def max64(em, a, b):
    """max.f64."""
    return _run64(em, lambda bl, a, c: _minmax64(bl, a, c, True), a, b)


def _round_pack64(b, sh, sl, x, ek, mode, sign):
    """f64 rounding and packing. (sh:sl) = the significand truncated to 53 bits (hidden bit at
    bit 20 of sh, or below for a subnormal), x = the bits below (bit 31 = round bit, the rest
    sticky, jammed), ek = biased exponent - 1 >= 0 with (ek << 20) + sh < 2^32; sign in bit 31.
    Overflow gives infinity or the largest finite value per mode."""
    if mode == "rz":
        up = 0
    elif mode == "rn":
        up = b.ltu(S31, x | (sl & 1))         # x > 1/2, or = 1/2 and odd
    else:
        neg = sign >> 31
        up = b.ltu(0, x) & (neg if mode == "rm" else b.not01(neg))
    rl, rh = b.add64((sl, sh), (up, 0))
    ph = (ek << 20) + rh
    ov = b.leu(F64_INF_HI, ph)
    if mode == "rn":
        ovh, ovl = F64_INF_HI, 0
    elif mode == "rz":
        ovh, ovl = F64_INF_HI - 1, M32
    else:
        neg = sign >> 31
        inf = b.not01(neg) if mode == "rp" else neg        # 1: overflow to infinity
        ovh = b.sub(F64_INF_HI, b.not01(inf))
        ovl = b.sub(0, b.not01(inf))
    ph = b.sel(ov, ovh, ph)
    rl = b.sel(ov, ovl, rl)
    return rl, ph | (sign & S31)


def _f64_sig_top(b, lo, hi):
    """The significand of a normal f64 with its leading bit at bit 31 of the first word:
    (Mh, Ml) = (1.f) * 2^63 as two words (hidden bit forced)."""
    return (hi << 11) | S31 | (lo >> 21), lo << 11


def f64_to_int(b, lo, hi, dw, signed, irnd):
    """cvt.irnd.{s,u}dw.f64: round, clamp; NaN -> 1 << (dw - 1)."""
    h2 = hi << 1
    e = h2 >> 21
    mh, ml = _f64_sig_top(b, lo, hi)          # value = M * 2^(e - 1086)
    nan = _isnan64(b, lo, hi)
    if irnd in ("rpi", "rmi"):
        nz = hi | b.ltu(0, lo)
        cond = b.lt(0, nz) if irnd == "rpi" else b.ltu(S31, nz)   # nonzero, rounding direction
    if dw == 64:
        s = 1086 - e
        ql = (ml >> s) | (mh << (32 - s)) | (mh >> (s - 32))
        qh = mh >> s
        fw = (mh << (64 - s)) | (ml >> (s - 32)) | (ml << (32 - s))   # fraction, left-aligned
        st = b.ltu(0, ml << (64 - s))
        if irnd == "rni":
            up = b.ltu(S31, fw | st | (ql & 1))
        elif irnd in ("rpi", "rmi"):
            up = b.ltu(0, fw | st | b.ltu(64, s)) & cond      # s > 64: 0 < |x| < 1/2
        else:
            up = 0
        ql, qh = b.add64((ql, qh), (up, 0))
        sg = b.sar(hi, 31)
        if signed:
            sg = b.sel(nan, M32, sg)          # NaN -> -2^63, like a negative overflow
            ql, qh = b.add64((ql ^ sg, qh ^ sg), (~sg, ~sg), cin="1")
            fits = b.ltu(h2, 1086 << 21)
            return b.sel(fits, ql, ~sg), b.sel(fits, qh, 0x7FFFFFFF ^ sg)
        ov = b.leu(1087 << 21, h2)
        ql, qh = b.sel(ov, M32, ql), b.sel(ov, M32, qh)
        ql, qh = b.sel(b.lt(hi, 0), 0, ql), b.sel(b.lt(hi, 0), 0, qh)
        return b.sel(nan, 0, ql), b.sel(nan, S31, qh)
    sh = 1054 - e
    q0 = mh >> sh
    q = q0
    if irnd == "rni":
        fw = (mh << (e - 1022)) | (ml >> sh)
        st = b.ltu(0, ml << (e - 1022))
        q = q0 + b.ltu(S31, fw | st | (q0 & 1))
    elif irnd in ("rpi", "rmi"):
        inexact = b.ltu((q0 << sh), mh) | b.ltu(0, ml)
        q = q0 + (inexact & cond)
    sg = b.sar(hi, 31)
    if signed:
        sg = b.sel(nan, M32, sg)
        r = (q ^ sg) - sg
        ov = b.leu(1054 << 21, h2)
        if irnd != "rzi":                     # just below 2^31, rounded up to it
            ov = ov | b.lt(r & ~sg, 0)
        r = b.sel(ov, 0x7FFFFFFF ^ sg, r)
        if dw < 32:
            lim = (1 << (dw - 1)) - 1
            r = b.sel(b.lt(lim, r), lim, r)
            r = b.sel(b.lt(r, -lim - 1), (-lim - 1) & M32, r)
            r = r & ((1 << dw) - 1)
        return (r,)
    ov = b.leu(1055 << 21, h2)
    if irnd != "rzi":                         # just below 2^32, rounded up to it (wraps to 0)
        ov = ov | b.ltu(q, q0)
    r = b.sel(ov, M32, q)
    r = b.sel(b.lt(hi, 0), 0, r)
    if dw < 32:
        r = b.sel(b.ltu((1 << dw) - 1, r), (1 << dw) - 1, r)
    return (b.sel(nan, 1 << (dw - 1), r),)


def int_to_f64(b, parts, sw, signed, mode):
    """cvt.rnd.f64.{s,u}sw: exact for 32-bit sources, rounded for 64-bit ones."""
    x = parts[0]
    if sw < 32:
        x = b.sar(x << (32 - sw), 32 - sw) if signed else x & ((1 << sw) - 1)
    if sw < 64:
        if signed:
            s = b.sar(x, 31)
            mag = (x ^ s) - s
        else:
            mag, s = x, 0
        z = b.clz(mag)
        n = mag << z                          # leading bit 31 -> f64 hidden bit (hi bit 20)
        hi = ((n >> 11) + ((1053 - z) << 20)) | (s & S31)
        return b.sel(mag, n << 21, 0), b.sel(mag, hi, 0)
    lo, hi = x, parts[1]
    if signed:
        s = b.sar(hi, 31)
        lo, hi = b.add64((lo ^ s, hi ^ s), (~s, ~s), cin="1")
    else:
        s = 0
    hz = b.eq(hi, 0)
    h1 = b.sel(hz, lo, hi)
    l1 = b.sel(hz, 0, lo)
    zc = b.clz(h1)
    nh = (h1 << zc) | (l1 >> (32 - zc))       # leading bit 31
    nl = l1 << zc
    k = b.sub(b.sel(hz, 32, 64), zc)          # number of bits
    sh, sl, gx = nh >> 11, (nl >> 11) | (nh << 21), nl << 21
    rl, rh = _round_pack64(b, sh, sl, gx, k + 1021, mode, s)
    nz = lo | hi
    return b.sel(nz, rl, 0), b.sel(nz, rh, 0)


F64_CNAN = (0, F64_NAN_HI)                   # 0xFFF8000000000000


def _sig64(b, lo, h, e):
    """Significand of |x| (h = high word without the sign, e = its exponent field) with the
    hidden bit at bit 61 (bit 29 of the high word) and 9 guard bits; subnormal: no hidden bit
    (its exponent counts as 1)."""
    return (lo << 9), ((h << 12) >> 3) | (lo >> 23) | b.sel(e, 0x20000000, 0)


def _shr64_jam(b, lo, hi, d):
    """(lo, hi) >> d for any d >= 0 with the lost bits jammed into bit 0 (hi < 2^31)."""
    d = b.sel(b.ltu(63, d), 63, d)
    big = b.ltu(31, d)
    h0 = b.sel(big, 0, hi)
    l0 = b.sel(big, hi, lo)
    s0 = b.sel(big, lo, 0)
    k = d & 31
    th = h0 >> k
    tl = (l0 >> k) | (h0 << (32 - k))
    lost = (l0 << (32 - k)) | s0
    return tl | b.ltu(0, lost), th


def _add64(b, a, c, mode, negate=False):
    al, ah = a
    cl, ch0 = c
    ch = ch0 ^ S31 if negate else ch0
    aa, ca = ah & ABS, ch & ABS
    sw = _ltu64(b, (al, aa), (cl, ca))       # |a| < |c|: x is the larger magnitude
    xl, xh = b.sel(sw, cl, al), b.sel(sw, ca, aa)
    yl, yh = b.sel(sw, al, cl), b.sel(sw, aa, ca)
    xs = b.sel(sw, ch, ah)
    ex, ey = xh >> 20, yh >> 20
    exe, eye = b.sel(ex, ex, 1), b.sel(ey, ey, 1)
    mxl, mxh = _sig64(b, xl, xh, ex)
    myl, myh = _sig64(b, yl, yh, ey)
    tl, th = _shr64_jam(b, myl, myh, exe - eye)
    # effective subtraction: r = ~(~mx + t)
    m = b.sar(ah ^ ch, 31)
    rl, rh = b.add64((mxl ^ m, mxh ^ m), (tl, th))
    rl, rh = rl ^ m, rh ^ m
    # r < 2^63: normalise to bit 62, stopping at the subnormal boundary (ek = exe - k >= 0)
    z = b.sel(rh, b.clz(rh), b.clz(rl) + 32) - 1
    k = b.sel(b.ltu(z, exe), z, exe)
    nh = (rh << k) | (rl >> (32 - k)) | (rl << (k - 32))
    nl = rl << k
    sh, sl, gx = nh >> 10, (nl >> 10) | (nh << 22), nl << 22
    ek = exe - k
    lo, hi = _round_pack64(b, sh, sl, gx, ek, mode, xs)
    # exact zero
    zs = (ah | ch) & S31 if mode == "rm" else (ah & ch) & S31
    nz = rh | rl
    lo, hi = b.sel(nz, lo, 0), b.sel(nz, hi, zs)
    # infinities: x is inf or NaN; inf - inf (r == 0) -> canonical NaN
    sp = b.leu(F64_INF_HI, xh)
    lo = b.sel(sp, b.sel(nz, xl, 0), lo)
    hi = b.sel(sp, b.sel(nz, xs, F64_NAN_HI), hi)
    # NaN operands propagate (the first one, c un-negated)
    na = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    nc = b.ltu(F64_INF_HI, (ch0 & ABS) | b.ltu(0, cl))
    nn = na | nc
    lo = b.sel(nn, b.sel(na, al, cl), lo)
    hi = b.sel(nn, b.sel(na, ah, ch0), hi)
    return lo, hi


def add64(em, a, b, rnd="rn"):
    """add{.rnd}.f64 on (lo, hi) pairs."""
    mode = check_mode(rnd, FROUND, "add.f64")
    return _run64(em, lambda bl, a, c: _add64(bl, a, c, mode), a, b)


def sub64(em, a, b, rnd="rn"):
    """sub{.rnd}.f64: a - b (a NaN b is returned un-negated)."""
    mode = check_mode(rnd, FROUND, "sub.f64")
    return _run64(em, lambda bl, a, c: _add64(bl, a, c, mode, negate=True), a, b)


def _shl64(b, lo, hi, k):
    """(lo, hi) << k for 0 <= k < 64."""
    shl = lambda x, y: b.op("SHL", x, y)            # machine semantics for constants too
    return shl(lo, k), shl(hi, k) | b.op("SHR", lo, b.sub(32, k)) | shl(lo, b.sub(k, 32))


def _unpack_norm64(b, lo, hi):
    """Finite nonzero f64 -> (ml, mh, e): the significand normalised with its leading bit at
    bit 52 (bit 20 of mh) and the exponent (below 1 for a subnormal): value = m * 2^(e-1075).
    Returns also the exponent field."""
    ex = (hi << 1) >> 21
    h0 = (hi & 0xFFFFF) | b.sel(ex, 0x100000, 0)
    z = b.sel(h0, b.clz(h0), b.clz(lo) + 32) - 11          # 0 for a normal number
    ml, mh = _shl64(b, lo, h0, z)
    return ml, mh, b.sel(ex, ex, 1) - z, ex


def _finish64(b, nl, nh, ek, mode, sign):
    """n = (nl, nh): significand with its leading bit at 62 (or lower, denormalised) and 10
    bits below the last kept one, sticky in bit 0; ek = biased exponent - 1 (may be < 0 or
    very large). Denormalise, round, pack."""
    ekc = ek & ~b.sar(ek, 31)
    ekc = b.sel(b.lt(ekc, 2047), ekc, 2047)              # overflows anyway
    nl, nh = _shr64_jam(b, nl, nh, ekc - ek)
    sh, sl, gx = nh >> 10, (nl >> 10) | (nh << 22), nl << 22
    return _round_pack64(b, sh, sl, gx, ekc, mode, sign)


def _mul64(b, a, c, mode):
    al, ah = a
    cl, ch = c
    sign = ah ^ ch
    xl, xh, ex, fa = _unpack_norm64(b, al, ah)
    yl, yh, ey, fc = _unpack_norm64(b, cl, ch)
    # 106-bit product of two 53-bit significands (high words < 2^21)
    hh_l, hh_h = b.mul(xh, yh), b.mulhu(xh, yh)
    hl_l, hl_h = b.mul(xh, yl), b.mulhu(xh, yl)
    lh_l, lh_h = b.mul(xl, yh), b.mulhu(xl, yh)
    ll_l, ll_h = b.mul(xl, yl), b.mulhu(xl, yl)
    m_l, m_h = b.add64((hl_l, hl_h), (lh_l, lh_h))        # < 2^54
    w1, t = b.add64((ll_h, m_h), (m_l, 0))
    w2, w3 = b.add64((hh_l, hh_h), (t, 0))                # P = w3:w2:w1:ll_l, 2^104 <= P < 2^106
    cc = w3 >> 9                                          # leading bit 105
    u = 10 + cc
    v = 22 - cc
    nh = (w3 << v) | (w2 >> u)
    nl = (w2 << v) | (w1 >> u)
    nl = nl | b.ltu(0, (w1 << v) | ll_l)
    ek = (ex + ey + cc) - 1024
    lo, hi = _finish64(b, nl, nh, ek, mode, sign)
    # zeros, infinities, NaNs
    aa, ca = ah & ABS, ch & ABS
    nz = b.sel(aa | al, ca | cl, 0)                       # both nonzero
    lo, hi = b.sel(nz, lo, 0), b.sel(nz, hi, sign & S31)
    inf = b.leu(F64_INF_HI, aa) | b.leu(F64_INF_HI, ca)
    lo = b.sel(inf, 0, lo)
    hi = b.sel(inf, b.sel(nz, (sign & S31) | F64_INF_HI, F64_NAN_HI), hi)
    na = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    nc = b.ltu(F64_INF_HI, ca | b.ltu(0, cl))
    nn = na | nc
    lo = b.sel(nn, b.sel(na, al, cl), lo)
    hi = b.sel(nn, b.sel(na, ah, ch), hi)
    return lo, hi


def mul64(em, a, b, rnd="rn"):
    """mul{.rnd}.f64 on (lo, hi) pairs."""
    mode = check_mode(rnd, FROUND, "mul.f64")
    return _run64(em, lambda bl, a, c: _mul64(bl, a, c, mode), a, b)


def _mulq64(b, q, lo, hi):
    """q * (lo, hi) mod 2^64 for a 32-bit q."""
    return b.mul(q, lo), b.mulhu(q, lo) + b.mul(q, hi)


def _shl64c(b, lo, hi, k):
    """(lo, hi) << k mod 2^64, constant 0 < k < 32."""
    return lo << k, (hi << k) | (lo >> (32 - k))


def _special_div64(b, a, c, sign, res):
    """Zeros, infinities and NaNs of a / c, over the finite result `res`."""
    al, ah = a
    cl, ch = c
    aa, ca = ah & ABS, ch & ABS
    az = b.eq(aa | al, 0)
    cz = b.eq(ca | cl, 0)
    ai = b.leu(F64_INF_HI, aa)
    ci = b.leu(F64_INF_HI, ca)
    # inf/x or x/0 -> inf; 0/x or x/inf -> 0; 0/0, inf/inf -> NaN
    inf = ai | cz
    zero = az | ci
    lo = b.sel(inf | zero, 0, res[0])
    hi = b.sel(inf, (sign & S31) | F64_INF_HI, b.sel(zero, sign & S31, res[1]))
    inv = (az & cz) | (ai & ci)
    lo, hi = b.sel(inv, 0, lo), b.sel(inv, F64_NAN_HI, hi)
    na = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    nc = b.ltu(F64_INF_HI, ca | b.ltu(0, cl))
    nn = na | nc
    return b.sel(nn, b.sel(na, al, cl), lo), b.sel(nn, b.sel(na, ah, ch), hi)


def _div64(b, a, c, mode):
    al, ah = a
    cl, ch = c
    sign = ah ^ ch
    xl, xh, ea, _ = _unpack_norm64(b, al, ah)           # A: leading bit 52
    yl, yh, ec, _ = _unpack_norm64(b, cl, ch)           # B
    x2l, x2h = _shl64c(b, xl, xh, 1)                    # A2 = 2A in [2^53, 2^54)
    d = (yh << 11) | (yl >> 21)                          # top 32 bits of B
    r = recip32(b, d) - 2                               # <= 2^63/(d+1) <= 2^84/B
    # digit 1: q1 = floor(A2 * 2^26 / B) in [2^26, 2^28); estimate from the top 32 bits of A2
    q = b.mulhu((x2h << 10) | (x2l >> 22), r) >> 4       # q1 - 1 <= q <= q1
    tl, th = _shl64c(b, x2l, x2h, 26)
    pl, ph = _mulq64(b, q, yl, yh)
    rl, rh = b.sub64((tl, th), (pl, ph))                 # exact, in [0, 2B)
    up = _leu64(b, (yl, yh), (rl, rh))
    q1 = q + up
    rl, rh = b.sub64((rl, rh), (b.sel(up, yl, 0), b.sel(up, yh, 0)))
    # digit 2: q2 = floor(r1 * 2^27 / B) in [0, 2^27)
    q = b.mulhu((rh << 10) | (rl >> 22), r) >> 3         # q2 - 1 <= q <= q2
    tl, th = _shl64c(b, rl, rh, 27)
    pl, ph = _mulq64(b, q, yl, yh)
    rl, rh = b.sub64((tl, th), (pl, ph))
    up = _leu64(b, (yl, yh), (rl, rh))
    q2 = q + up
    sticky = _ltu64(b, (b.sel(up, yl, 0), b.sel(up, yh, 0)), (rl, rh))
    # Q = q1 * 2^27 + q2 in [2^53, 2^55): to n with the leading bit at 62
    ql, qh = (q1 << 27) | q2, q1 >> 5
    top = qh >> 22                                       # Q >= 2^54
    s = 9 - top
    nh = (qh << s) | (ql >> (32 - s))
    nl = (ql << s) | sticky
    # value = Q * 2^(ea - ec - 54) ; n = Q * 2^s  -> ek = ea - ec + 1022 - 53 + 62 - ... :
    ek = (ea - ec) + (1022 - 1) + top
    res = _finish64(b, nl, nh, ek, mode, sign)
    return _special_div64(b, a, c, sign, res)


def div64(em, a, b, rnd="rn"):
    """div.rnd.f64 on (lo, hi) pairs (IEEE, correctly rounded)."""
    mode = check_mode(rnd, FROUND, "div.f64")
    return _run64(em, lambda bl, a, c: _div64(bl, a, c, mode), a, b)


def rcp64(em, a, rnd="rn"):
    """rcp.rnd.f64: correctly rounded 1/a."""
    mode = check_mode(rnd, FROUND, "rcp.f64")
    return _run64(em, lambda bl, a: _div64(bl, (0, 0x3FF00000), a, mode), a)


def _sqrt64(b, a, mode):
    al, ah = a
    ml, mh, e, _ = _unpack_norm64(b, al, ah)             # M: leading bit 52
    par = ~e & 1                                         # Z = M * 2^(2+par): even exponent
    k = par + 2
    zl = ml << k
    zh = (mh << k) | (ml >> (32 - k))                    # Z in [2^54, 2^56)
    zw = (zh << 8) | (zl >> 24)                          # Z >> 24
    y = rsqrt32(b, (mh << 11) | (ml >> 21)) - 1         # <= 2^31 / sqrt(M / 2^53)
    # yz <= 2^31 / sqrt(Z / 2^56) (relative error < 2^-28.75 + 2 * 2^-31 < 2^-28.19)
    yz = b.sel(par, y, y + b.mulhu(y, 0x6A09E667))       # (sqrt 2 - 1) * 2^32
    # digit 1: s1 = floor(sqrt(Z)) in [2^27, 2^28), remainder r1 = Z - s1^2 in [0, 2 s1]
    s = b.mulhu(zw, yz) >> 3                             # s1 - 2 <= s <= s1
    r1 = zl - b.mul(s, s)                                # exact: the true value is < 2^31
    for _ in range(2):
        t = s << 1
        up = b.ltu(t, r1)
        s = s + up
        r1 = b.sel(up, r1 + ~t, r1)                      # r1 - (2s + 1)
    s1 = s
    # digit 2: S = s1 * 2^27 + s2 = floor(sqrt(Z * 2^54)); s2 - 1 <= v <= s2 (see docs)
    v = b.mulhu(r1, yz) >> 1
    sl, sh = (s1 << 27) | v, s1 >> 5
    # exact remainder X - S0^2 (mod 2^64; the true value is in [0, 2(2S+1)))
    pl = b.mul(sl, sl)
    ph = b.mulhu(sl, sl) + (b.mul(sl, sh) << 1)
    rl, rh = b.sub64((0, zl << 22), (pl, ph))
    tl, th = sl << 1, (sh << 1) | (sl >> 31)             # 2 S0
    up = _ltu64(b, (tl, th), (rl, rh))
    sl, sh = b.add64((sl, sh), (up, 0))                  # S in [2^54, 2^55)
    # S = 53 significand bits + 2 more; the rest (the remainder) is the sticky bit
    if mode == "rp":
        sticky = _ltu64(b, (b.sel(up, tl | 1, 0), b.sel(up, th, 0)), (rl, rh))
    else:
        sticky = 1          # rn: a square root is never exactly halfway (rz = rm: unused)
    gx = (sl << 30) | sticky
    sig_l, sig_h = (sl >> 2) | (sh << 30), sh >> 2
    ek = (e + 1021) >> 1
    lo, hi = _round_pack64(b, sig_h, sig_l, gx, ek, mode, 0)
    # +-0 and NaN -> themselves, +inf -> +inf, other negatives -> canonical NaN
    aa = ah & ABS
    nan = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    keep = nan | b.eq(aa | al, 0) | (b.eq(ah, F64_INF_HI) & b.eq(al, 0))
    neg = b.lt(ah, 0)
    lo = b.sel(keep, al, b.sel(neg, 0, lo))
    hi = b.sel(keep, ah, b.sel(neg, F64_NAN_HI, hi))
    return lo, hi


def sqrt64(em, a, rnd="rn"):
    """sqrt.rnd.f64 on a (lo, hi) pair (IEEE, correctly rounded)."""
    mode = check_mode(rnd, FROUND, "sqrt.f64")
    return _run64(em, lambda bl, a: _sqrt64(bl, a, mode), a)


def _raw64(b, lo, hi):
    """Raw significand (hidden bit only if normal; leading bit <= 52) and exponent max(e, 1)."""
    ex = (hi << 1) >> 21
    return lo, (hi & 0xFFFFF) | b.sel(ex, 0x100000, 0), b.sel(ex, ex, 1)


def _mul53(b, xl, xh, yl, yh):
    """4-word product of two 2-word significands whose middle partial products sum below 2^64."""
    hh_l, hh_h = b.mul(xh, yh), b.mulhu(xh, yh)
    m_l, m_h = b.add64((b.mul(xh, yl), b.mulhu(xh, yl)), (b.mul(xl, yh), b.mulhu(xl, yh)))
    ll_l, ll_h = b.mul(xl, yl), b.mulhu(xl, yl)
    w1, t = b.add64((ll_h, m_h), (m_l, 0))
    w2, w3 = b.add64((hh_l, hh_h), (t, 0))
    return ll_l, w1, w2, w3


def _fma64(b, a, bb, c, mode):
    al, ah = a
    bl, bh = bb
    cl, ch = c
    sp = ah ^ bh                                          # product sign (bit 31)
    xl, xh, ea = _raw64(b, al, ah)
    yl, yh, eb = _raw64(b, bl, bh)
    zl, zh, ec = _raw64(b, cl, ch)
    # P = (A << 9) * (B << 8): exact, below 2^123, lowest possible bit 17
    p0, p1, p2, p3 = _mul53(b, *_shl64c(b, xl, xh, 9), *_shl64c(b, yl, yh, 8))
    # window (128 bits, unit 2^(ea+eb-2167)): c's leading bit would be at 1144+ec-ea-eb; it may
    # be at most at 124 (the sum stays below 2^126). Higher: c at 124, P moves right by g
    # (then c > 4P: P's two low words lie below c's last bit and the rounding point).
    eab = b.sel(b.sel(xl | xh, yl | yh, 0), ea + eb, (-(1 << 20)) & M32)   # zero P: c rules
    g = (ec - eab) + 1020
    r = b.sel(b.lt(g, 0), 0 - g, 0)                       # c's right shift from bit 124
    sh_p = r + g                                          # P's right shift
    # c at 124, shifted right by r (any amount) into 4 words, sticky in bit 0
    c3, c2 = (zh << 8) | (zl >> 24), zl << 8
    rc = b.sel(b.ltu(127, r), 127, r)                    # beyond: c is a sticky bit only
    k = rc & 31
    q = rc >> 5
    y3 = c3 >> k
    y2 = (c2 >> k) | (c3 << (32 - k))
    y1 = c2 << (32 - k)
    q1, q2, q3 = b.eq(q, 1), b.eq(q, 2), b.eq(q, 3)
    w3 = b.sel(q, 0, y3)
    w2 = b.sel(q, b.sel(q1, y3, 0), y2)
    w1 = b.sel(q, b.sel(q1, y2, b.sel(q2, y3, 0)), y1)
    w0 = b.sel(q1, y1, b.sel(q2, y2, b.sel(q3, y3, 0)))
    w0 = w0 | b.ltu(0, b.sel(q2, y1, b.sel(q3, y2 | y1, 0)))
    # P placed: shifted only when c dominates, its low words then a sticky bit
    px = b.sel(sh_p, p2 | b.ltu(0, p1 | p0), p2)
    p2, p3 = _shr64_jam(b, px, p3, sh_p)
    p1, p0 = b.sel(sh_p, 0, p1), b.sel(sh_p, 0, p0)
    # signed sum T = (P ^ m) + C over four words
    m = b.sar(sp ^ ch, 31)
    x0, x1, x2, x3 = p0 ^ m, p1 ^ m, p2 ^ m, p3 ^ m
    s0, s1 = b.add64((x0, x1), (w0, w1))
    cy = _ltu64(b, (s0, s1), (x0, x1))
    s2, s3 = b.add64((x2, x3), (w2, w3))
    s2, s3 = b.add64((s2, s3), (cy, 0))
    # |R| = (T ^ n) - k  (k = m & ~n: subtraction with C > P; the sign flips)
    n_ = b.sar(s3, 31)
    kk = m & ~n_
    t0, t1 = b.add64((s0 ^ n_, s1 ^ n_), (kk & 1, 0))
    cy = kk & b.eq(t0 | t1, 0) & 1                       # the +1 carried out of the low half
    t2, t3 = b.add64((s2 ^ n_, s3 ^ n_), (cy, 0))
    sign = sp ^ kk
    nz = t0 | t1 | t2 | t3
    # normalise: word shifts (64, then 32), CLZ, top 64 bits + sticky, halve to bit 62
    z64 = b.eq(t3 | t2, 0)
    t3, t2, t1, t0 = b.sel(z64, t1, t3), b.sel(z64, t0, t2), b.sel(z64, 0, t1), b.sel(z64, 0, t0)
    z32 = b.eq(t3, 0)
    t3, t2, t1, t0 = b.sel(z32, t2, t3), b.sel(z32, t1, t2), b.sel(z32, t0, t1), b.sel(z32, 0, t0)
    z = b.clz(t3)
    nh = (t3 << z) | (t2 >> (32 - z))
    nl = (t2 << z) | (t1 >> (32 - z))
    st = nl | b.ltu(0, (t1 << z) | t0)
    nl, nh = (st >> 1) | (nh << 31) | (st & 1), nh >> 1
    ek = (ec + r) + 2 - z - b.sel(z64, 64, 0) - b.sel(z32, 32, 0)
    lo, hi = _finish64(b, nl, nh, ek, mode, sign)
    # exact zero: +0 (-0 in rm) unless both addends are -0-like
    zs = (sp | ch) & S31 if mode == "rm" else (sp & ch) & S31
    lo, hi = b.sel(nz, lo, 0), b.sel(nz, hi, zs)
    # infinities and NaNs
    aa, ba, ca = ah & ABS, bh & ABS, ch & ABS
    pinf = b.leu(F64_INF_HI, aa) | b.leu(F64_INF_HI, ba)
    cinf = b.leu(F64_INF_HI, ca)
    infs = (sp & S31) | F64_INF_HI
    vlo, vhi = b.sel(pinf, 0, cl), b.sel(pinf, infs, ch)
    zero_ab = b.eq(aa | al, 0) | b.eq(ba | bl, 0)
    invalid = (pinf & zero_ab) | (pinf & b.eq(ch, infs ^ S31) & b.eq(cl, 0))
    vlo, vhi = b.sel(invalid, 0, vlo), b.sel(invalid, F64_NAN_HI, vhi)
    spc = pinf | cinf
    lo, hi = b.sel(spc, vlo, lo), b.sel(spc, vhi, hi)
    na = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    nb = b.ltu(F64_INF_HI, ba | b.ltu(0, bl))
    nc = b.ltu(F64_INF_HI, ca | b.ltu(0, cl))
    nlo = b.sel(na, al, b.sel(nb, bl, cl))
    nhi = b.sel(na, ah, b.sel(nb, bh, ch))
    nn = na | nb | nc
    return b.sel(nn, nlo, lo), b.sel(nn, nhi, hi)


def fma64(em, a, b, c, rnd="rn"):
    """fma.rnd.f64 on (lo, hi) pairs: a*b+c rounded once."""
    mode = check_mode(rnd, FROUND, "fma.f64")
    return _run64(em, lambda bl, a, bb, c: _fma64(bl, a, bb, c, mode), a, b, c)
