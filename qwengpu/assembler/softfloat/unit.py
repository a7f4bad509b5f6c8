"""f32 div, rcp and sqrt as short sequences on the float unit (issue 22), for machines whose unit
has FFMA and FMUL (`UNIT_OPS`): the same results as the soft-float routines (`f32.div`, `rcp`,
`sqrt`), bit for bit, for every operand, rounding mode and `.ftz`.

The unit computes in round-to-nearest on normalised operands, where nothing overflows or
underflows; integer micro-ops do the rest:

* the operands' significands as f32 values in [1, 2) (subnormals normalised by `CLZ`) and their
  exponents (`_significand`);
* a seed by integer arithmetic on the bit pattern (`DIV_SEED`, `RSQRT_SEED`), refined on the unit
  until the approximation q1 of the significands' quotient or root X in [1, 2) is *faithful*:
  |q1 - X| < u = 2^-23 (one of the two floats around X);
* an exact remainder from one more FFMA (r = A - B*q1, or q1*q1 - M), whose sign says on which
  side of q1 X lies, and whose size against B*u/2 (q1*u for the root) whether X is beyond the
  midpoint (a quotient of 24-bit significands is never a midpoint, a square root never is);
* a normal result: q1 moved by at most one ulp and rescaled by an integer add to its exponent
  (overflow as `pack32`); a subnormal quotient: the unit's FMUL in the instruction's mode rounds
  Z * 2^scale, Z a product of two floats strictly between q1 and its neighbour on X's side;
* special operands: the unit's a*rc, rc a stand-in for 1/c (`_divisor32`), gives IEEE's a/c.

A division by a divisor known in advance (the lowering hoists it: `FastDivisionOps.unit_fast_divisor`) has a
short path on the operands themselves (`fast_divisor`, `fast_check`, `fast_quotient`): with c's
correctly rounded reciprocal yh hoisted, q0 = RN(a*yh), r = RN(a - c*q0), RN(q0 + r*yh) is a/c
rounded to nearest (three unit ops); the directed modes also hoist the rest yl of 1/c
(`fast_low`) and take q0 = RN(a*yh + RN(a*yl)), which is faithful, so that Markstein's step
o(q0 + r*yh) rounds correctly (four unit ops). It holds where nothing overflows or underflows
(`fast_check`: c's and a's exponents within `FAST_DIVISOR` and `FAST_SPAN`); elsewhere the
lowering runs the sequence above.

docs/softfloat.md ("Sequences on the float unit") has the error bound of each step and the
correctness arguments; `unitcheck` runs the sequences against the interpreter on millions of
operands (`python -m qwengpu.assembler.softfloat.unitcheck`).
"""
from __future__ import annotations

from .builder import ABS, F32_INF, F32_NAN, F32_ONE, FROUND, S31, routine
from .f32 import check_mode, flush32, ftz_out32, pack32

#: the float-unit micro-ops the sequences need
UNIT_OPS = frozenset({"FFMA", "FMUL"})

#: y0 = DIV_SEED - bits(B) ~ 1/B for B in [1, 2): relative error below 0.0506 (2^-4.30) over every
#: significand (the best such constant, searched exhaustively; `tests/test_unit_sequences.py`)
DIV_SEED = 0x7EF31200
#: g0 = RSQRT_SEED - bits(M)/2 ~ 1/sqrt(M) for M in [1, 4): relative error below 0.0343 (2^-4.87)
RSQRT_SEED = 0x5F376400

F32_HALF = 0x3F000000
_RN = {"rnd": "rn"}

#: the short division's range (unbiased exponents): the divisor's exponent within +-FAST_DIVISOR,
#: the dividend's within +-FAST_SPAN of the divisor's (docs/softfloat.md, "Division by a divisor
#: known in advance": every intermediate is then normal, or exact where it is not)
FAST_DIVISOR = 40
FAST_SPAN = 60


def has_sequences(fpu_ops) -> bool:
    """Whether a float unit with `fpu_ops` runs these sequences."""
    return UNIT_OPS <= set(fpu_ops)


def _ffma(b, x, y, z):
    return b.fpu("FFMA", x, y, z, **_RN)


def _away(b, mode, sign):
    """0/1 (a word for rm/rp): a rounding in `mode` of a result of sign `sign` (bit 31) goes away
    from zero; None for rn (it depends on the value)."""
    if mode == "rz":
        return 0
    if mode == "rp":
        return b.ltu(sign, 1)
    if mode == "rm":
        return sign >> 31
    return None


def _significand(b, x):
    """x's significand as an f32 in [1, 2), and its exponent in units of 2^22 (e22 >> 22 = the
    biased exponent of a normal x, 1 - z for a subnormal one, whose leading bit is z below bit 23):
    |x| = sig * 2^((e22 >> 22) - 127). (Units of 2^22: a difference of two stays within 32 bits.)"""
    f = x & 0x7FFFFF
    z = b.clz(x << 8)
    e23 = x & F32_INF
    sig = b.sel(e23, f | F32_ONE, (f << z) | F32_HALF)
    e22 = b.sel(e23, e23 >> 1, b.sub(1 << 22, z << 22))
    return sig, e22


def _divisor32(b, c, ftz):
    """What a division needs of its divisor alone: (-B, y, c22, rc, special) with B = c's
    significand in [1, 2) (garbage for a zero, infinite or NaN c), y ~ 1/B with |1 - B*y| < 2^-12.9,
    c's exponent (`_significand`), rc a stand-in for 1/c where c is special (infinity for a zero,
    a zero for an infinity, c itself for a NaN, 1 otherwise, with c's sign: a*rc is IEEE's a/c
    whenever a or c is zero, infinite or NaN), and whether c is one of those. The lowering shares
    it between divisions by one register."""
    if ftz:
        c = flush32(b, c)
    big_b, c22 = _significand(b, c)
    neg_b = big_b | S31
    y0 = b.sub(DIV_SEED, big_b)                      # 1 - B*y0 = e, |e| < 2^-4.3
    e = _ffma(b, neg_b, y0, F32_ONE)
    mag = c & ABS
    rc = b.sel(mag, b.sel(b.eq(mag, F32_INF), 0, b.sel(b.ltu(F32_INF, mag), mag, F32_ONE)), F32_INF) | (c & S31)
    t = _ffma(b, e, e, e)
    special = _is_special(b, c)
    y = _ffma(b, y0, t, y0)                          # y0 (1 + e + e^2): B*y = 1 - e^3
    return neg_b, y, c22, rc, special


def _is_special(b, x):
    """0/1: x is a zero, an infinity or a NaN."""
    return b.leu(0xFEFFFFFF, b.sub(x << 1, 1))


def _quotient32(b, a, c, neg_b, y, c22, rc, c_special, mode, ftz, unit_dividend=False):
    """a/c rounded in `mode`, given `_divisor32(c)`. The nodes are built in the order the (in-order)
    bundle packer should meet them: a bundle's worth of work between the unit's ops."""
    if ftz:
        a, c = flush32(b, a), flush32(b, c)
    sign = (a ^ c) & S31
    sig_a, a22 = _significand(b, a)
    big_b = neg_b & ABS
    u = b.ltu(sig_a, big_b)                          # A = 2^u * a's significand in [B, 2B): X = A/B in [1, 2)
    u23 = u << 23
    big_a = sig_a + u23
    sp = _is_special(b, a) | c_special               # zeros, infinities, NaN: IEEE's a/c is a*rc
    sv = b.fpu("FMUL", a, rc, **_RN)
    sc22 = b.sub(a22 - c22, u << 22)                 # |a/c| = X * 2^scale, sc22 = scale << 22
    tiny = b.lt(sc22, -126 << 22)                    # a subnormal result (or one that rounds up to 2^-126)
    sc23 = b.sel(b.lt(129 << 22, sc22), 129 << 23, sc22 << 1)    # (any scale above 128 overflows)
    clamp = b.sel(b.lt(sc22, -160 << 22), -160 << 22, sc22)    # (every scale below -151 rounds alike)
    z_b0 = (clamp << 1) + ((40 + 127) << 23)         # 2^(scale + 40)
    s40 = sign - (40 << 23)
    q0 = y + u23 if unit_dividend else b.fpu("FMUL", big_a, y, **_RN)    # 1.0 / B: A*y is exact
    r0 = _ffma(b, neg_b, q0, big_a)
    q1 = _ffma(b, r0, y, q0)                         # faithful: |q1 - X| < 2^-24.8 + u/2
    z_a0 = q1 + s40                                  # q1 * 2^-40 with the sign
    p0 = q1 + sc23                                   # q1 * 2^scale, when that is normal
    r1 = _ffma(b, neg_b, q1, big_a)                  # A - B*q1, exact: its sign is X - q1's
    # a subnormal result: the unit rounds Z * 2^scale, Z = q1 if exact, else a product of two floats
    # strictly between q1 and its neighbour on X's side (no breakpoint of a subnormal result lies
    # between two neighbours in [1, 2)): q1 (1 - 2^-24) below, (q1 + u)(1 - 2^-24) above (as
    # X < 2 - u -- A <= 2B - 2u -- q1 + u < 2 then, and the product exceeds q1)
    pos = b.lt(0, r1)                                # X above q1
    z_a = z_a0 + pos
    z_b = b.sub(z_b0, b.ltu(0, r1))                  # r1 is never -0
    sub = b.fpu("FMUL", z_a, z_b, rnd=mode)
    # a normal result: q1 moved by one ulp at most, then scaled (an integer add to the exponent)
    down = b.sar(r1, 31)                             # -1: X below q1
    away = _away(b, mode, sign)
    if away is None:                                 # rn: beyond the midpoint iff |r1| > B*u/2
        far = b.ltu(big_b - (24 << 23), r1 & ABS)
        adj = b.sub(far ^ down, down)
    else:
        adj = b.sel(away, pos, down)
    normal = pack32(b, 0, p0 + adj, mode, sign)
    res = b.sel(tiny, sub, normal)
    res = b.sel(sp, sv, res)
    return ftz_out32(b, res) if ftz else res


def _recip_normal32(b, c):
    """RN(1/c) for c normal with |c| in [2^-126, 2^126) (so that 1/c is normal): the division's
    steps 1-6 (docs/softfloat.md) for the dividend 1.0, without its cases for zeros, infinities,
    NaN, subnormals and overflow (garbage for other c; `tests/test_unit_sequences.py` checks every
    significand)."""
    big_b = (c & 0x7FFFFF) | F32_ONE
    neg_b = big_b | S31
    y0 = b.sub(DIV_SEED, big_b)                      # 1 - B*y0 = e, |e| < 2^-4.3
    e = _ffma(b, neg_b, y0, F32_ONE)
    t = _ffma(b, e, e, e)
    y = _ffma(b, y0, t, y0)                          # |1 - B*y| < 2^-12.9
    u23 = b.ltu(F32_ONE, big_b) << 23                # A = 2^u in [B, 2B): X = A/B in [1, 2)
    big_a = F32_ONE + u23
    q0 = y + u23                                     # A*y, exact
    r0 = _ffma(b, neg_b, q0, big_a)
    q1 = _ffma(b, r0, y, q0)                         # faithful
    r1 = _ffma(b, neg_b, q1, big_a)                  # A - B*q1, exact
    down = b.sar(r1, 31)
    far = b.ltu(big_b - (24 << 23), r1 & ABS)        # beyond the midpoint
    scale23 = b.sub(b.sub(127 << 23, c & F32_INF), u23)    # 1/|c| = X * 2^(127 - exponent field - u)
    return (q1 + b.sub(far ^ down, down) + scale23) | (c & S31)


def _fast_divisor32(b, c):
    """What the short division by c needs, computed once: (yh, -c, lo, width) with yh = RN(1/c)
    (`_recip_normal32`) and the dividend's window: a takes the short path iff
    (a << 1) - lo <u width (`_fast_check32`), empty (width 0) unless c's exponent is within
    +-FAST_DIVISOR. Out of that range yh is garbage the check never lets through. (The same with
    .ftz: nothing inside the window is subnormal.)"""
    yh = _recip_normal32(b, c)
    c2 = c << 1                                      # (the exponent field at bit 24, no sign)
    fits = b.ltu(b.sub(c2, (127 - FAST_DIVISOR) << 24), (2 * FAST_DIVISOR + 1) << 24)
    lo = b.sub(c2, FAST_SPAN << 24)                  # a's exponent >= c's - FAST_SPAN
    width = b.sel(fits, (2 * FAST_SPAN) << 24, 0)    # ... and <= c's + FAST_SPAN
    return yh, c ^ S31, lo, width


def _fast_low32(b, yh, neg_c):
    """yl = RN((1 - c*yh) * yh), the rest of 1/c (1 - c*yh is exact: yh + yl = 1/c within 2^-46.9
    relative), for the directed modes' short path."""
    return b.fpu("FMUL", _ffma(b, neg_c, yh, F32_ONE), yh, **_RN)


def _fast_check32(b, a, lo, width):
    """0/1: a/c takes the short path (a finite, normal, its exponent in c's window)."""
    return b.ltu(b.sub(a << 1, lo), width)


def _fast_quotient32(b, a, yh, neg_c, mode, yl=None):
    """a/c rounded in `mode` where `_fast_check32` holds (docs/softfloat.md has the proofs). rn:
    q0 = RN(a*yh), r = RN(a - c*q0), RN(q0 + r*yh) (three unit ops; q0 may be 1.5 ulps off and r
    inexact, the result is still right). rz, rm, rp need `yl`: q0 = RN(a*yh + RN(a*yl)) is
    faithful, r = a - c*q0 exact, o(q0 + r*yh) = o(a/c) (Markstein); q0 = RN(a*yh) is not enough
    there (x / x gives 1 - 2^-24 in rz for 15 % of divisors). No .ftz: every input and the result
    are normal there, but r may be subnormal and must not be flushed."""
    if mode == "rn":
        q0 = b.fpu("FMUL", a, yh, **_RN)
    else:
        q0 = _ffma(b, a, yh, b.fpu("FMUL", a, yl, **_RN))
    r = _ffma(b, neg_c, q0, a)
    return b.fpu("FFMA", r, yh, q0, rnd=mode)


def _div_unit32(b, a, c, mode, ftz, unit_dividend=False):
    return _quotient32(b, a, c, *_divisor32(b, c, ftz), mode, ftz, unit_dividend)


def _sqrt_unit32(b, a, mode, ftz):
    # (node order: see `_div_unit32`)
    if ftz:
        a = flush32(b, a)
    sig, e22 = _significand(b, a)
    par = ~(e22 >> 22) & 1                           # M = 2^par * sig in [1, 4): an even exponent
    big_m = sig + (par << 23)
    neg_m = big_m | S31
    g0 = b.sub(RSQRT_SEED, big_m >> 1)               # ~ 1/sqrt(M), relative error < 2^-4.87
    nh0 = (g0 - (1 << 23)) | S31                     # -g0/2
    s0 = b.fpu("FMUL", big_m, g0, **_RN)
    exp23 = b.sub(e22, (par << 22) + (127 << 22))    # sqrt(|a|) = sqrt(M) * 2^(exp23 >> 23)
    e0 = _ffma(b, s0, nh0, F32_HALF)                 # Goldschmidt: s1 ~ sqrt(M), -nh1 ~ 1/(2 sqrt(M))
    sp = b.leu(0x7F7FFFFF, a - 1)                    # +-0, negative, infinite or NaN
    s1 = _ffma(b, s0, e0, s0)                        # (relative errors ~1.5 e0^2 < 2^-9.2)
    keep = b.eq(a << 1, 0) | b.eq(a, F32_INF)        # +-0 -> itself, +inf -> +inf, the rest NaN
    nh1 = _ffma(b, nh0, e0, nh0)
    special = b.sel(keep, a, F32_NAN)
    t1 = _ffma(b, s1, s1, neg_m)                     # s - (s^2 - M) * h, twice: error * 2^-9.2 + s's own
    s2 = _ffma(b, t1, nh1, s1)
    t2 = _ffma(b, s2, s2, neg_m)
    s3 = _ffma(b, t2, nh1, s2)                       # faithful: |s3 - X| < 2^-25.6 + u/2
    p0 = s3 + exp23                                  # s3 scaled: a root is never subnormal, never overflows
    dd = _ffma(b, s3, s3, neg_m)                     # s3^2 - M: exact where it is below 2^-22
    above = b.lt(dd, 0)                              # X above s3
    if mode == "rn":
        # beyond the midpoint: above iff M - s3^2 > s3*u; below iff s3^2 - M >= s3*u
        mag = dd & ABS
        su = s3 - (23 << 23)                         # s3 * u
        adj = b.sel(above, b.ltu(su, mag), b.sub(0, b.leu(su, mag)))
    elif mode == "rp":
        adj = above
    else:                                            # rz, rm: a root is positive
        adj = b.sub(0, b.lt(0, dd))
    return b.sel(sp, special, p0 + adj)


def div(em, a, b, rnd="rn", ftz=False):
    """div.rnd{.ftz}.f32 on the float unit (`f32.div`'s results)."""
    mode = check_mode(rnd, FROUND, "div.f32")
    return routine(em, lambda bl, a, c: _div_unit32(bl, a, c, mode, ftz), a, b)


def rcp(em, a, rnd="rn", ftz=False):
    """rcp.rnd{.ftz}.f32 on the float unit (`f32.rcp`'s results)."""
    mode = check_mode(rnd, FROUND, "rcp.f32")
    return routine(em, lambda bl, a: _div_unit32(bl, F32_ONE, a, mode, ftz, unit_dividend=True), a)


def divisor(em, c, ftz=False):
    """The divisor's part of `div` (`_divisor32`), as Srcs."""
    return routine(em, lambda bl, c: _divisor32(bl, c, ftz), c)


def quotient(em, a, c, neg_b, y, c22, rc, c_special, rnd="rn", ftz=False):
    """`div`'s result from the parts `divisor(em, c, ftz)` returns."""
    mode = check_mode(rnd, FROUND, "div.f32")
    return routine(em, lambda bl, *x: _quotient32(bl, *x, mode, ftz), a, c, neg_b, y, c22, rc, c_special)


def fast_divisor(em, c):
    """The short division's part of the divisor c (`_fast_divisor32`): (yh, -c, lo, width), the
    same with or without .ftz."""
    return routine(em, _fast_divisor32, c)


def fast_low(em, yh, neg_c):
    """yl for the directed modes' short path (`_fast_low32`), from `fast_divisor(c)`'s yh, -c."""
    return routine(em, _fast_low32, yh, neg_c)


def fast_check(em, a, lo, width):
    """0/1: a / c takes the short path (`_fast_check32`), from `fast_divisor(c)`'s lo and width."""
    return routine(em, _fast_check32, a, lo, width)


def fast_quotient(em, a, yh, neg_c, rnd="rn", yl=None):
    """a / c in mode `rnd` where `fast_check` holds (.ftz or not: the same there), from
    `fast_divisor(c)`'s yh and -c, and `fast_low`'s yl for rz, rm, rp."""
    mode = check_mode(rnd, FROUND, "div.f32")
    if mode == "rn":
        return routine(em, lambda bl, *x: _fast_quotient32(bl, *x, mode), a, yh, neg_c)
    if yl is None:
        raise ValueError(f"the short division in mode {mode} needs yl (`fast_low`)")
    return routine(em, lambda bl, a, yh, neg_c, yl: _fast_quotient32(bl, a, yh, neg_c, mode, yl), a, yh, neg_c, yl)


def fast_div(em, a, c, rnd="rn", ftz=False):
    """div.rnd{.ftz}.f32 as the lowering builds it for a hoisted divisor, straight-line: the
    short path where `fast_check` holds, else `div` (a model for tests and `unitcheck`)."""
    mode = check_mode(rnd, FROUND, "div.f32")

    def build(bl, a, c):
        yh, neg_c, lo, width = _fast_divisor32(bl, c)
        yl = None if mode == "rn" else _fast_low32(bl, yh, neg_c)
        full = _div_unit32(bl, a, c, mode, ftz)
        return bl.sel(_fast_check32(bl, a, lo, width), _fast_quotient32(bl, a, yh, neg_c, mode, yl), full)
    return routine(em, build, a, c)


def sqrt(em, a, rnd="rn", ftz=False):
    """sqrt.rnd{.ftz}.f32 on the float unit (`f32.sqrt`'s results)."""
    mode = check_mode(rnd, FROUND, "sqrt.f32")
    return routine(em, lambda bl, a: _sqrt_unit32(bl, a, mode, ftz), a)
