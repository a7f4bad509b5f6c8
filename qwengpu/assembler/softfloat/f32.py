"""f32 routines: bit operations (abs, neg, copysign), compare, testp, min/max, the rounding of a
significand, add/sub, mul, fma, div/rcp, sqrt.
"""
from __future__ import annotations

from qwengpu.machine.uops import M32

from .builder import ABS, COMPARE_OPS, F32_INF, F32_NAN, F32_ONE, FROUND, S31, SoftFloatError, routine

# f32: bit operations, compare, testp, min/max

def check_mode(rnd, allowed, what):
    r = "rn" if rnd is None else str(rnd).lstrip(".").lower()
    if r not in allowed:
        raise SoftFloatError(f"{what}: rounding mode {rnd!r} not in {allowed}")
    return r


def flush32(b, x):
    """.ftz input: subnormal -> zero of the same sign."""
    return b.sel(x & F32_INF, x, x & S31)


def isnan32(b, x):
    """0/1: x is a NaN."""
    return b.ltu(0xFF000000, x << 1)


def sat32(b, r, one=F32_ONE, inf=F32_INF):
    """.sat: clamp to [+0, 1]; NaN and negative numbers (-0 too) give +0 (f16: one=0x3C00,
    inf=0x7C00 on the low half)."""
    r1 = b.sel(b.ltu(one, r), one, r)
    return b.sel(b.ltu(inf, r), 0, r1)


def _abs32(b, a, ftz=False):
    m = a & ABS
    if ftz:
        m = b.sel(a & F32_INF, m, 0)
    return b.sel(b.ltu(F32_INF, m), F32_NAN, m)


def _neg32(b, a, ftz=False):
    if ftz:
        a = flush32(b, a)
    return b.sel(isnan32(b, a), F32_NAN, a ^ S31)


def abs(em, a, ftz=False):   # noqa: A001 - PTX name
    """abs{.ftz}.f32: clear the sign; a NaN gives the canonical NaN."""
    return routine(em, lambda b, a: _abs32(b, a, ftz), a)


def neg(em, a, ftz=False):
    """neg{.ftz}.f32: flip the sign; a NaN gives the canonical NaN."""
    return routine(em, lambda b, a: _neg32(b, a, ftz), a)


def copysign(em, a, b):
    """copysign.f32 d, a, b: the sign of a with the rest of b (PTX operand order)."""
    return routine(em, lambda bl, a, b: b ^ ((a ^ b) & S31), a, b)


def _ukey(b, x, inf):
    """Unsigned order key: inf + x (x >= 0) or inf - |x| (x < 0): finite and infinite values map
    in order onto [0, 2*inf] with -0 == +0, every NaN above 2*inf."""
    return b.sel(x >> 31, b.sub(S31 + inf, x), x + inf)


def _compare_keys(b, op, ka, kb, top):
    """setp on unsigned keys (non-NaN in [0, top], NaN above)."""
    ok_a = b.leu(ka, top)
    ok_b = b.leu(kb, top)
    nan_a = b.ltu(top, ka)
    nan_b = b.ltu(top, kb)
    if op == "eq":
        return b.eq(ka, kb) & ok_a
    if op == "ne":
        return b.sel(b.eq(ka, kb), 0, ok_b) & ok_a
    if op == "lt":
        return b.ltu(ka, kb) & ok_b
    if op == "le":
        return b.leu(ka, kb) & ok_b
    if op == "gt":
        return b.ltu(kb, ka) & ok_a
    if op == "ge":
        return b.leu(kb, ka) & ok_a
    if op == "equ":
        return b.sel(b.eq(ka, kb), 1, nan_a | nan_b)
    if op == "neu":
        return b.sel(b.eq(ka, kb), nan_a, 1)
    if op == "ltu":
        return b.ltu(ka, kb) | nan_a
    if op == "leu":
        return b.leu(ka, kb) | nan_a
    if op == "gtu":
        return b.ltu(kb, ka) | nan_b
    if op == "geu":
        return b.leu(kb, ka) | nan_b
    raise SoftFloatError(f"setp: unknown comparison {op!r}")


def _compare32(b, op, a, c, ftz, inf=F32_INF):
    op = str(op).lstrip(".").lower()
    if op not in COMPARE_OPS:
        raise SoftFloatError(f"setp: unknown comparison {op!r}")
    if op in ("num", "nan"):
        na = b.ltu(inf << 1, a << 1)
        nc = b.ltu(inf << 1, c << 1)
        return (na | nc) if op == "nan" else b.not01(na | nc)
    if ftz:
        a, c = flush32(b, a), flush32(b, c)
    return _compare_keys(b, op, _ukey(b, a, inf), _ukey(b, c, inf), 2 * inf)


def compare(em, op, a, b, ftz=False):
    """setp.op{.ftz}.f32 -> 0/1, for every op in COMPARE_OPS (ordered ones are false on NaN,
    the u-suffixed ones true; num/nan test for NaNs)."""
    return routine(em, lambda bl, a, c: _compare32(bl, op, a, c, ftz), a, b)


def _testp32(b, op, a):
    op = str(op).lstrip(".").lower()
    a2 = a << 1
    if op == "finite":
        return b.ltu(a2, 0xFF000000)
    if op == "infinite":
        return b.eq(a2, 0xFF000000)
    if op == "number":
        return b.leu(a2, 0xFF000000)
    if op == "notanumber":
        return b.ltu(0xFF000000, a2)
    if op == "subnormal":
        return b.ltu(a2 - 1, 0x00FFFFFF)
    if op == "normal":                      # zero counts as normal
        return b.sel(a2, b.ltu(a2 - 0x01000000, 0xFE000000), 1)
    raise SoftFloatError(f"testp: unknown property {op!r}")


def testp(em, op, a):
    """testp.op.f32 -> 0/1 (op in TESTP_OPS; zero counts as normal)."""
    return routine(em, lambda b, a: _testp32(b, op, a), a)


def _minmax32(b, a, c, is_max, ftz, nan, fmt_nan=F32_NAN, inf2=0xFF000000):
    if ftz:
        a, c = flush32(b, a), flush32(b, c)
    if not is_max and not nan and fmt_nan == F32_NAN:
        # min: a NaN becomes the canonical NaN, the largest pattern as a signed int, which the
        # order below never picks over a number (and two NaNs give the canonical one)
        a = b.sel(b.ltu(inf2, a << 1), F32_NAN, a)
        c = b.sel(b.ltu(inf2, c << 1), F32_NAN, c)
        return b.sel(b.lt(a, c) ^ b.lt(a & c, 0), a, c)
    # non-NaN order: signed-int order, reversed when both are negative (-0 < +0 falls out)
    lt = b.lt(c, a) if is_max else b.lt(a, c)
    both_neg = b.lt(a & c, 0)
    r = b.sel(lt ^ both_neg, a, c)
    na = b.ltu(inf2, a << 1)
    nc = b.ltu(inf2, c << 1)
    if nan:
        return b.sel(na | nc, fmt_nan, r)
    r = b.sel(na, c, r)
    return b.sel(nc, b.sel(na, fmt_nan, a), r)


def min(em, a, b, ftz=False, nan=False):   # noqa: A001 - PTX name
    """min{.ftz}{.NaN}.f32 (-0 < +0; one NaN -> the other operand; .NaN -> canonical NaN)."""
    return routine(em, lambda bl, a, c: _minmax32(bl, a, c, False, ftz, nan), a, b)


def max(em, a, b, ftz=False, nan=False):   # noqa: A001 - PTX name
    """max{.ftz}{.NaN}.f32."""
    return routine(em, lambda bl, a, c: _minmax32(bl, a, c, True, ftz, nan), a, b)


# f32 rounding: a significand n with its leading bit at bit 30 (or lower for a subnormal result)
# and 7 bits below the last kept bit; ek = biased exponent - 1, so that
#     packed = (ek << 23) + (n >> 7 rounded)
# (the leading bit adds the missing 1 to the exponent field; a rounding carry out of the
# significand moves into the exponent by itself, subnormal -> normal included).

def round30(b, n, mode, sign, inexact=False, sh=7):
    """n >> sh rounded per `mode` (n < 2^31; n's bit 0 is a sticky bit). `sign`: bit 31 = result
    sign. inexact=True: the value is known to lie strictly above n (never exactly on it)."""
    if mode == "rz":
        return n >> sh
    if mode == "rn":
        # round half to even: (n + half - 1 + L) >> sh, L = bit sh of n (through the carry flag)
        t = n << (31 - sh)
        b.flag_add(t, t)
        return b.add_cin(n, (1 << (sh - 1)) - (0 if inexact else 1)) >> sh
    # directed: add 2^sh - 1 when rounding away from zero
    away = b.sar(sign, 31) if mode == "rm" else ~b.sar(sign, 31)
    return (n + (away & ((1 << sh) - 1))) >> sh


def pack32(b, ek, rd, mode, sign, mbits=23, inf=F32_INF, sbit=S31):
    """(ek << mbits) + rd with overflow to infinity or the largest finite value, plus the sign
    (bit 31 of `sign`, placed at `sbit`). Needs (ek << mbits) + rd < 2^32."""
    p = (ek << mbits) + rd
    ov = b.leu(inf, p)
    if mode == "rn":
        ovv = inf
    elif mode == "rz":
        ovv = inf - 1
    else:
        neg = sign >> 31
        ovv = b.sub(inf, neg) if mode == "rp" else (inf - 1) + neg
    p = b.sel(ov, ovv, p)
    if sbit == S31:
        return p | (sign & S31)
    return p | ((sign >> 31) << (sbit.bit_length() - 1))


def denorm(b, n, ek):
    """Subnormal results: if ek < 0 shift n right by -ek (keeping a sticky bit) and set ek = 0."""
    ekc = ek & ~b.sar(ek, 31)
    sh = ekc - ek
    n1 = n >> sh
    lost = b.ltu(n1 << sh, n)
    return n1 | lost, ekc


def ftz_out32(b, r):
    """.ftz on a result: exponent field 0 -> zero of the same sign."""
    return b.sel(r & F32_INF, r, r & S31)


# ---------------------------------------------------------------------------------------------
# add / sub

def _add32(b, a, c, mode, ftz, sat, negate=False):
    if negate:
        c = c ^ S31
    a2, c2 = a << 1, c << 1
    sw = b.ltu(a2, c2)                       # |a| < |c|: x is the larger magnitude
    x = b.sel(sw, c, a)
    x2 = b.sel(sw, c2, a2)
    y2 = b.sel(sw, a2, c2)
    ex = x2 >> 24
    ey = y2 >> 24
    d = ex - ey
    # significands with the hidden bit at 29 (6 guard bits); a subnormal uses exponent 0 and a
    # doubled significand (f << 7), which keeps ex/ey the raw fields
    vx = (x2 << 5) & 0x1FFFFFC0
    vy = (y2 << 5) & 0x1FFFFFC0
    if ftz:                                  # a subnormal input counts as zero
        mx = b.sel(ex, vx | 0x20000000, 0)
        my = b.sel(ey, vy | 0x20000000, 0)
    else:
        mx = vx + b.sel(ex, 0x20000000, vx)
        my = vy + b.sel(ey, 0x20000000, vy)
    # align y with a sticky bit
    t = my >> d
    t = t | b.ltu(t << d, my)
    # effective subtraction: r = mx - t  as  ~(~mx + t)
    m = b.sar(a ^ c, 31)
    r = (((mx ^ m) + t) ^ m)
    # normalise to bit 30; stop at the subnormal boundary (ek >= 0)
    k = b.clz((r << 1) | (S31 >> ex))
    n = r << k
    ek = ex - k
    sign = x
    rd = round30(b, n, mode, sign)
    res = pack32(b, ek, rd, mode, sign)
    # exact zero (cancellation or two zeros), infinities and NaNs
    zero = (a | c) & S31 if mode == "rm" else (a & c) & S31
    sp = b.leu(0xFF000000, x2)
    xs = b.sel(b.eq(x2, 0xFF000000), x, F32_NAN)
    res = b.sel(sp, xs, res)
    res = b.sel(r, res, b.sel(sp, F32_NAN, zero))
    if ftz:
        res = ftz_out32(b, res)
    if sat:
        res = sat32(b, res)
    return res


def add(em, a, b, rnd="rn", ftz=False, sat=False):
    """add{.rnd}{.ftz}{.sat}.f32 (rnd: rn rz rm rp)."""
    mode = check_mode(rnd, FROUND, "add.f32")
    return routine(em, lambda bl, a, c: _add32(bl, a, c, mode, ftz, sat), a, b)


def sub(em, a, b, rnd="rn", ftz=False, sat=False):
    """sub{.rnd}{.ftz}{.sat}.f32: a - b."""
    mode = check_mode(rnd, FROUND, "sub.f32")
    return routine(em, lambda bl, a, c: _add32(bl, a, c, mode, ftz, sat, negate=True), a, b)


# ---------------------------------------------------------------------------------------------
# mul

def _special_mul32(b, a, c, sign):
    """(is_special, value) for a*c when an operand is zero, infinite or NaN."""
    x, y = a & ABS, c & ABS
    sw = b.ltu(x, y)
    big = b.sel(sw, y, x)
    small = b.sel(sw, x, y)
    q = b.sel(small, F32_INF, 0)
    sp = b.leu(q, big)                       # small == 0 or big >= inf
    nan = b.ltu(b.sel(small, F32_INF, F32_INF - 1), big)   # NaN operand or 0 * inf
    return sp, b.sel(nan, F32_NAN, q | sign)


def _mul32(b, a, c, mode, ftz, sat):
    if ftz:
        a, c = flush32(b, a), flush32(b, c)
    ea = a & F32_INF
    ec = c & F32_INF
    # significands: a with its leading bit at 31, c at 30; a subnormal uses exponent 0 and a
    # doubled significand
    va = a << 9
    ma = b.sel(ea, (va >> 1) | S31, va)
    vc = (c << 9) >> 2
    mc = vc + b.sel(ec, 0x40000000, vc)
    hi = b.mulhu(ma, mc)
    lo = b.mul(ma, mc)
    # normalise the 64-bit product to bit 62 (bit 30 of the high word)
    zc = b.clz(hi)
    z = zc - 1
    n = (hi << z) | (lo >> b.sub(33, zc))
    n = n | b.ltu(0, lo << z)
    ek = ((ea + ec) >> 23) - 126 - zc
    n, ek = denorm(b, n, ek)
    sign = a ^ c
    rd = round30(b, n, mode, sign)
    res = pack32(b, ek, rd, mode, sign)
    sp, sv = _special_mul32(b, a, c, sign & S31)
    res = b.sel(sp, sv, res)
    if ftz:
        res = ftz_out32(b, res)
    if sat:
        res = sat32(b, res)
    return res


def mul(em, a, b, rnd="rn", ftz=False, sat=False):
    """mul{.rnd}{.ftz}{.sat}.f32."""
    mode = check_mode(rnd, FROUND, "mul.f32")
    return routine(em, lambda bl, a, c: _mul32(bl, a, c, mode, ftz, sat), a, b)


# ---------------------------------------------------------------------------------------------
# fma

def _fma32(b, a, bb, c, mode, ftz, sat):
    if ftz:
        a, bb, c = flush32(b, a), flush32(b, bb), flush32(b, c)
    sp = a ^ bb                               # product sign (bit 31)
    ea, eb, ec = a & F32_INF, bb & F32_INF, c & F32_INF
    va = a << 9
    ma = b.sel(ea, (va >> 1) | S31, va)      # leading bit 31 (raw convention for subnormals)
    vb = (bb << 9) >> 5
    mb = vb + b.sel(eb, 0x08000000, vb)      # leading bit 27
    vc = c << 9
    mc = b.sel(ec, (vc >> 1) | S31, vc)      # leading bit 31
    ph = b.mulhu(ma, mb)                      # P = ma*mb < 2^60, value P * 2^(ea+eb-312)
    pl = b.mul(ma, mb)
    # c = (mc:0) * 2^-ng in units of P; a zero product puts c in charge (ng very negative)
    ecs = ec >> 23
    eab = b.sel(b.sel(ma, mb, 0), (ea + eb) >> 23, (-(1 << 20)) & M32)
    ng = (eab - ecs) - 122
    # 64-bit window: P's leading bit at 58 or 59, c's at 63-ng. c may sit at most at 61 (the
    # sum stays below 2^63); when c would be higher it goes to 61 and P moves right by 2-ng,
    # and c then exceeds P by two binades at least (no deep cancellation, so P's low word is
    # only a sticky bit: it lies entirely below c's last bit)
    shc2 = b.sel(b.lt(ng, 2), 2, ng)
    shp = shc2 - ng
    shc = b.sel(b.ltu(63, shc2), 63, shc2)   # c entirely below the window -> sticky only
    # c placed: (ch:cl) = (mc:0) >> shc, lost bits -> sticky in bit 0
    ch = mc >> shc
    cl = (mc << (32 - shc)) | (mc >> (shc - 32))
    cl = cl | b.ltu(0, mc << (64 - shc))
    # P placed: shifted right only when c dominates, and then its low word is only sticky
    p32 = ph | b.ltu(0, pl)
    px = b.sel(shp, p32, ph)
    ph2 = px >> shp
    pl2 = b.sel(shp, b.ltu(ph2 << shp, px), pl)
    # signed sum: T = (P ^ m) + C, m = all ones for an effective subtraction
    m = b.sar(sp ^ c, 31)
    tl, th = b.add64((pl2 ^ m, ph2 ^ m), (cl, ch))
    # |P -/+ C|: add -> T;  sub -> ~T if T < 0 (P >= C) else T + 1
    n_ = b.sar(th, 31)
    k = m & ~n_                               # sub and C > P: result sign flips, add 1
    rl, rh = b.add64((tl ^ n_, th ^ n_), (~k, ~k), cin="1")
    sign = sp ^ k
    # normalise |R| (< 2^63) so the high word has its leading bit at 30
    hz = b.eq(rh, 0)
    h1 = b.sel(hz, rl >> 1, rh)
    l1 = b.sel(hz, rl << 31, rl)
    zc = b.clz(h1)
    z = zc - 1
    n = (h1 << z) | (l1 >> (32 - z))
    n = n | b.ltu(0, l1 << z)
    # ek = biased exponent - 1 = ea+eb-124 + shp - (z + 31*hz) = ecs-2 + shc2 - (z + 31*hz)
    ek = (ecs + shc2) - (zc + b.sel(hz, 32, 1))
    n, ek = denorm(b, n, ek)
    rd = round30(b, n, mode, sign)
    res = pack32(b, ek, rd, mode, sign)
    # exact zero result (R may be a lone sticky bit: a tiny P squashed next to c = 0)
    zero = (sp | c) & S31 if mode == "rm" else (sp & c) & S31
    res = b.sel(rh | rl, res, zero)
    # infinities and NaNs
    x, y, zc = a & ABS, bb & ABS, c & ABS
    sw = b.ltu(x, y)
    big = b.sel(sw, y, x)
    small = b.sel(sw, x, y)
    pnan = b.ltu(b.sel(small, F32_INF, F32_INF - 1), big)   # NaN operand or 0 * inf
    pinf = b.leu(F32_INF, big)
    infs = (sp & S31) | F32_INF
    val = b.sel(pinf, infs, c)
    nan = pnan | b.ltu(F32_INF, zc) | b.eq(val ^ c, S31)
    spv = b.sel(nan, F32_NAN, val)
    res = b.sel(pinf | b.leu(F32_INF, zc), spv, res)
    if ftz:
        res = ftz_out32(b, res)
    if sat:
        res = sat32(b, res)
    return res


def fma(em, a, b, c, rnd="rn", ftz=False, sat=False):
    """fma.rnd{.ftz}{.sat}.f32 (= mad.rnd.f32): a*b+c rounded once."""
    mode = check_mode(rnd, FROUND, "fma.f32")
    return routine(em, lambda bl, a, bb, c: _fma32(bl, a, bb, c, mode, ftz, sat), a, b, c)


# ---------------------------------------------------------------------------------------------
# div / rcp

def unpack_norm32(b, x, e23):
    """Normalised significand (leading bit at 31; 0 for a zero) and biased exponent (below 1
    for a subnormal) of a finite x: value = m * 2^(e - 158)."""
    v = x << 9
    u = b.sel(e23, (v >> 1) | S31, v)        # a subnormal: exponent 0, significand doubled
    z = b.clz(u)
    return u << z, (e23 >> 23) - z, z


# linear seed for 2^63/m: (c0 - 2x) * 2^31 with x = m/2^32, c0 = sqrt(48) - 4 (error < 7.2%)
_RCP_C0 = int((48 ** 0.5 - 4) * 2 ** 31) & M32


def recip32(b, m):
    """R <= 2^63/m (m in [2^31, 2^32)), relative error < 2^-29.2: a linear seed, one Newton step
    y*(2 - x*y) and two y + y*(1 - x*y), every rounding downwards. Checked exhaustively for all
    2^23 significands (tests/test_softfloat.py::test_recip32_exhaustive)."""
    r = b.sub(_RCP_C0, m)
    p = b.mulhu(m, r)
    r = b.mulhu(r, ~p) << 1                  # ~p = 2^32 - 1 - p <= (2 - x*y) * 2^31
    for _ in range(2):
        p = b.mulhu(m, r)
        r = r + b.mulhu(r, (~p) << 1)        # (~p) << 1 = 2^32 - 2 - 2p <= (1 - x*y) * 2^32
    return r


def special_div32(b, a, c, sign):
    """(is_special, value) for a/c when an operand is zero, infinite or NaN."""
    x, y = a & ABS, c & ABS
    gt = b.ltu(y, x)
    big = b.sel(gt, x, y)
    small = b.sel(gt, y, x)
    sp = b.leu(b.sel(small, F32_INF, 0), big)     # a zero, or an infinity/NaN
    # given sp: 0/0, inf/inf and NaNs give NaN (x == y or a NaN); else x > y: inf, x < y: 0
    nan = b.eq(x, y) | b.ltu(F32_INF, big)
    return sp, b.sel(nan, F32_NAN, b.sel(gt, sign | F32_INF, sign))


def _div32(b, a, c, mode, ftz):
    if ftz:
        a, c = flush32(b, a), flush32(b, c)
    sign = (a ^ c) & S31
    ea23, ec23 = a & F32_INF, c & F32_INF
    ma, ea, _ = unpack_norm32(b, a, ea23)
    mc, ec, _ = unpack_norm32(b, c, ec23)
    # quotient: A' = ma * 2^u in [mc, 2 mc); Q = floor(A' * 2^25 / mc) in [2^25, 2^26)
    u = b.ltu(ma, mc)
    r = recip32(b, mc)
    q0 = b.mulhu(ma >> (6 - u), r)           # Q - 1 <= q0 <= Q (r's error < 2^-29, Q < 2^26)
    d24 = mc >> 8
    rem = (ma << (u + 17)) - b.mul(q0, d24)  # exact: A'*2^25 - q0*d in [0, 2d)
    up = b.leu(d24, rem)
    q = q0 + up
    sticky = b.ltu(b.sel(up, d24, 0), rem)
    n = (q << 5) | sticky
    ek = (ea - ec) - u + 126
    n, ek = denorm(b, n, ek)
    rd = round30(b, n, mode, sign)
    res = pack32(b, ek, rd, mode, sign)
    sp, sv = special_div32(b, a, c, sign)
    res = b.sel(sp, sv, res)
    if ftz:
        res = ftz_out32(b, res)
    return res


def div(em, a, b, rnd="rn", ftz=False):
    """div.rnd{.ftz}.f32 (IEEE, correctly rounded: rn rz rm rp)."""
    mode = check_mode(rnd, FROUND, "div.f32")
    return routine(em, lambda bl, a, c: _div32(bl, a, c, mode, ftz), a, b)


def rcp(em, a, rnd="rn", ftz=False):
    """rcp.rnd{.ftz}.f32: correctly rounded 1/a."""
    mode = check_mode(rnd, FROUND, "rcp.f32")
    return routine(em, lambda bl, a: _div32(bl, F32_ONE, a, mode, ftz), a)


# ---------------------------------------------------------------------------------------------
# sqrt

# quadratic seed for 1/sqrt(x), x in [1/2, 1): c0 - x*(k1 - c2*x) (relative error < 2^-8.2)
_RSQ_C2 = int(0.83542149 * 2 ** 31)
_RSQ_K1 = int(2.06613124 * 2 ** 31) & M32
_RSQ_K0 = int(2.23390533 * 2 ** 31) & M32
_RSQRT_HALF = int(2 ** 32 / 2 ** 0.5)          # floor(2^32 / sqrt 2)


def rsqrt32(b, m):
    """Y <= 2^31/sqrt(m/2^32) for m in [2^31, 2^32): quadratic seed and two Newton steps
    y*(3 - x*y^2)/2, every rounding downwards (checked exhaustively in the tests)."""
    y = b.sub(_RSQ_K0, b.mulhu(m, b.sub(_RSQ_K1, b.mulhu(m, _RSQ_C2))))
    for _ in range(2):
        p = b.mulhu(m, b.mulhu(y, y))          # x*y^2 * 2^30 (rounded down twice)
        y = b.mulhu(y, ~p + 0xBFFFFFFF) << 1   # 1.5*2^31 - p - 2 <= (3 - x*y^2)/2 * 2^31
    return y


def _isqrt26(b, m, par):
    """(S0, radicand mod 2^32): S0 = S or S - 1, S = floor(sqrt(m*2^(19+par))) in [2^25, 2^26)
    for a normalised m (leading bit 31)."""
    y = rsqrt32(b, m)
    g = b.mulhu(m, y)                          # sqrt(m/2^32) * 2^31
    s0 = b.sel(par, g, b.mulhu(g, _RSQRT_HALF)) >> 5
    return s0, m << (par + 19)


def _sqrt32(b, a, mode, ftz):
    if ftz:
        a = flush32(b, a)
    ea23 = a & F32_INF
    m, ea, _ = unpack_norm32(b, a, ea23)
    par = ~ea & 1                              # radicand m * 2^par: even total exponent
    s0, x = _isqrt26(b, m, par)
    rem = x - b.mul(s0, s0)                    # exact, in [0, 2(2S+1))
    t = s0 << 1
    up = b.ltu(t, rem)                         # (S0+1)^2 <= radicand
    s = s0 + up
    n = s << 5
    if mode == "rp":                           # (rm = rz for a non-negative result)
        n = n | b.ltu(b.sel(up, t | 1, 0), rem)
    # rn: a square root is never exactly halfway between two floats (the square of a 25-bit
    # odd significand has more than 24 bits), so the round bit alone decides: rounding as if
    # sticky were set is exact. rz needs no sticky at all.
    ek = (ea + 125) >> 1
    rd = round30(b, n, mode, 0, inexact=True)
    res = (ek << 23) + rd
    # +-0 -> itself, +inf -> +inf, anything else special (negative, NaN) -> NaN
    sp = b.leu(0x7F7FFFFF, a - 1)
    keep = b.eq(a << 1, 0) | b.eq(a, F32_INF)
    return b.sel(sp, b.sel(keep, a, F32_NAN), res)


def sqrt(em, a, rnd="rn", ftz=False):
    """sqrt.rnd{.ftz}.f32 (IEEE, correctly rounded)."""
    mode = check_mode(rnd, FROUND, "sqrt.f32")
    return routine(em, lambda b, a: _sqrt32(b, a, mode, ftz), a)
