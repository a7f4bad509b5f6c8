"""Integer division and remainder routines: 32-bit by a register (a reciprocal estimate and one
correction), by a constant (a magic multiply), and 64-bit (docs/intcode.md has the arguments).
"""
from __future__ import annotations

from qwengpu.machine.uops import M32, Imm, Src, src

from ..emit import Emitter
from .folding import (add32, add64, add_pair, as_pair, const_value, emit_op, inverted, le64, neg64, public_routine,
                      sub32, sub64)
from .wide import abs_and_sign64, cond_neg64, mulhi_u64, mullo_u64, shr64

# ---------------------------------------------------------------------------------------------
# 32-bit division
#
# d = b << clz(b) is the normalised divisor (2^31 <= d < 2^32), k = 32 - clz(b) the length of b
# and T = 2^64 / d = 2^(32+k) / b. _recip32 returns y with Yc = 2^32 + y in T - 6 < Yc < T + 1
# for every d (checked exhaustively, tests/test_intcode.py), Yc = T - 2 at d = 2^31 and
# Yc >= T - 4/3 at d = 3 * 2^30. With m = floor(Yc / 2) the estimate
# q0 = floor(a m / 2^(31 + k)) satisfies q - 1 <= q0 <= q (docs/intcode.md), so one
# conditional +1 finishes.

# the initial estimate p(x) = 1 + x * (C0 + x * (C1 + x * C2)), x = 1 - d/2^32, a one-sided
# (p <= 1/(1 - x)) fit with relative error below 2^-7.5; Q-format constants
_RC2 = 0xBACDB891          # c2 * 2^30
_RC1 = 0x3FC094FF          # c1 * 2^31
_RC0 = 0x80006148          # c0 * 2^31


def _recip32(em: Emitter, d) -> Src:
    """y such that 2^32 + y approximates 2^64 / d (2^31 <= d < 2^32); 15 ops."""
    x = inverted(d)                                       # 2^32 - 1 - d  (x * 2^32, rounded down)
    x2 = emit_op(em, "ADD", x, x, cin="1")                # 2x * 2^32 - 1
    acc = add32(em, emit_op(em, "MULHU", x2, _RC2), _RC1)  # c1 + x c2      (Q31)
    acc = add32(em, emit_op(em, "MULHU", x, acc), _RC0)    # c0 + x (...)    (Q31)
    y = emit_op(em, "MULHU", x2, acc)                     # (p - 1) * 2^32
    # one Newton-type step of order 5: e = 1 - d*Y (>= 0), Y' = Y (1 + e + e^2 + e^3 + e^4)
    t = emit_op(em, "MULHU", d, y)
    e = emit_op(em, "ADD", inverted(t), inverted(d), cin="1")     # ~(t + d) = 2^32 e rounded down
    e2 = emit_op(em, "MULHU", e, e)
    g = add32(em, e, e2)                               # e + e^2
    f = add32(em, g, emit_op(em, "MULHU", g, e2))          # (e + e^2)(1 + e^2)
    m = emit_op(em, "MULHU", y, f)
    return emit_op(em, "ADD", add32(em, y, f), m, cin="1")  # y + f + y f; the +1 is allowed (doc)


def _half(em, y) -> Src:
    """floor(Yc / 2) = 2^31 + (y >> 1), a 32-bit multiplier."""
    return emit_op(em, "OR", emit_op(em, "SHR", y, 1), 0x80000000)


def _udiv32(em: Emitter, a, b) -> tuple:
    """(q0, r0, c): q0 = a/b or a/b - 1, r0 = a - q0 b, c = (r0 >= b); q = q0 + c. 25 ops."""
    a, b = src(a), src(b)
    s = emit_op(em, "CLZ", b)
    d = emit_op(em, "SHL", b, s)
    m = _half(em, _recip32(em, d))                    # floor(Yc / 2)
    n = emit_op(em, "XOR", s, 31)                         # 31 - s (s = 32 for b = 0: 63)
    q0 = emit_op(em, "SHR", emit_op(em, "MULHU", a, m), n)    # floor(a m / 2^(63 - s))
    r0 = sub32(em, a, emit_op(em, "MUL", q0, b))
    c = emit_op(em, "LEU", b, r0)
    return q0, r0, c



# division by a constant (an immediate divisor, or a 64-bit pair of immediates): a multiply by a
# magic reciprocal, exact by construction (Granlund & Montgomery 1994, Thm 4.2; Warren,
# Hacker's Delight, ch. 10)


def _magic_u(d: int, N: int) -> tuple:
    """For 1 < d < 2^(N-1), not a power of 2: ("mul", m, s, z) with m < 2^N and
    floor(n/d) = floor((n >> z) m / 2^(N+s)) for all n < 2^N (2^p <= m d' <= 2^p + 2^(p-N+z),
    d' = d >> z), or ("add", m, l): q = (t + ((n - t) >> 1)) >> (l - 1), t = hi(n m), the
    magic 2^N + m = floor(2^(N+l)/d) + 1 with l = ceil(log2 d)."""
    shifts = [0]
    if d % 2 == 0:
        shifts.append((d & -d).bit_length() - 1)
    for z in shifts:
        dd, nz = d >> z, N - z
        for p in range(N, N + dd.bit_length() + 1):
            m = -(-(1 << p) // dd)
            if m >> N:
                break
            if m * dd - (1 << p) <= 1 << (p - nz):
                return ("mul", m, p - N, z)
    l = (d - 1).bit_length()
    return ("add", (1 << (N + l)) // d + 1 - (1 << N), l)


def _magic_s32(d: int) -> tuple:
    """(M, s) for signed 32-bit division by d (|d| >= 2 not a power of 2): Hacker's Delight
    fig. 10-1. q = (hi_s(n M) [+ n if d > 0 > M] [- n if d < 0 < M]) >> s, plus 1 if negative."""
    two31 = 1 << 31
    ad = abs(d)
    t = two31 + (d < 0)
    anc = t - 1 - t % ad
    p = 31
    q1, r1 = divmod(two31, anc)
    q2, r2 = divmod(two31, ad)
    while True:
        p += 1
        q1, r1 = 2 * q1, 2 * r1
        if r1 >= anc:
            q1, r1 = q1 + 1, r1 - anc
        q2, r2 = 2 * q2, 2 * r2
        if r2 >= ad:
            q2, r2 = q2 + 1, r2 - ad
        delta = ad - r2
        if not (q1 < delta or (q1 == delta and r1 == 0)):
            break
    m = q2 + 1
    return (-m if d < 0 else m) & M32, p - 32


def _sx32(v: int) -> int:
    return v - (1 << 32) if v >> 31 else v


def _udiv32_k(em, a, d: int) -> Src:
    """a / d for a constant 1 <= d < 2^32: 0-5 ops."""
    if d & (d - 1) == 0:
        return emit_op(em, "SHR", a, d.bit_length() - 1)
    if d >> 31:
        return emit_op(em, "LEU", d, a)
    k = _magic_u(d, 32)
    if k[0] == "mul":
        _, m, sh, z = k
        return emit_op(em, "SHR", emit_op(em, "MULHU", emit_op(em, "SHR", a, z), m), sh)
    _, m, l = k
    t = emit_op(em, "MULHU", a, m)
    return emit_op(em, "SHR", add32(em, emit_op(em, "SHR", sub32(em, a, t), 1), t), l - 1)


def _sdiv32_k(em, a, d: int) -> Src:
    """a / d (signed, truncating) for a constant d != 0: 1-5 ops."""
    sd = _sx32(d)
    if sd == 1:
        return src(a)
    if sd == -1:
        return sub32(em, 0, a)                          # wraps for INT_MIN
    ad = abs(sd)
    if ad & (ad - 1) == 0:
        if ad == 1 << 31:
            return emit_op(em, "EQ", a, 0x80000000)
        k = ad.bit_length() - 1
        bias = emit_op(em, "SHR", emit_op(em, "SAR", a, k - 1), 32 - k)       # 2^k - 1 if a < 0
        q = emit_op(em, "SAR", add32(em, a, bias), k)
        return q if sd > 0 else sub32(em, 0, q)
    m, sh = _magic_s32(sd)
    q = emit_op(em, "MULHS", a, m)
    if sd > 0 and m >> 31:
        q = add32(em, q, a)
    if sd < 0 and not m >> 31:
        q = sub32(em, q, a)
    q = emit_op(em, "SAR", q, sh)
    return add32(em, q, emit_op(em, "SHR", q, 31))


def _k64(b):
    if isinstance(b, tuple):
        lo, hi = const_value(b[0]), const_value(b[1])
        if lo is not None and hi is not None:
            return lo | (hi << 32)
    return None


def _shr64k(em, a, k: int) -> tuple:
    return shr64(em, a, k) if k else as_pair(a)


def _udiv64_k(em, a, d: int) -> tuple:
    """a / d for a constant 1 <= d < 2^64."""
    a = as_pair(a)
    if d & (d - 1) == 0:
        return _shr64k(em, a, d.bit_length() - 1)
    if d >> 63:
        return le64(em, (d & M32, d >> 32), a, False), src(Imm(0))
    k = _magic_u(d, 64)
    if k[0] == "mul":
        _, m, sh, z = k
        return _shr64k(em, mulhi_u64(em, _shr64k(em, a, z), (m & M32, m >> 32)), sh)
    _, m, l = k
    t = mulhi_u64(em, a, (m & M32, m >> 32))
    return _shr64k(em, add64(em, _shr64k(em, sub64(em, a, t), 1), t), l - 1)


def _urem64_k(em, a, d: int) -> tuple:
    a = as_pair(a)
    if d & (d - 1) == 0:
        return emit_op(em, "AND", a[0], (d - 1) & M32), emit_op(em, "AND", a[1], (d - 1) >> 32)
    return sub64(em, a, mullo_u64(em, _udiv64_k(em, a, d), (d & M32, d >> 32)))


@public_routine
def div_u32(em: Emitter, a, b) -> Src:
    """a / b (unsigned; x / 0 = 0xFFFFFFFF); 27 ops, 0-5 for an immediate b."""
    kb = const_value(b)
    if kb is not None:
        return src(Imm(M32)) if kb == 0 else _udiv32_k(em, a, kb)
    q0, r0, c = _udiv32(em, a, b)
    return emit_op(em, "SEL", add32(em, q0, c), M32, b)    # x / 0 = all ones


@public_routine
def rem_u32(em: Emitter, a, b) -> Src:
    """a % b (unsigned; x % 0 = x); 27 ops, 0-7 for an immediate b."""
    kb = const_value(b)
    if kb is not None:
        if kb == 0:
            return src(a)
        if kb & (kb - 1) == 0:
            return emit_op(em, "AND", a, kb - 1)
        return sub32(em, a, emit_op(em, "MUL", _udiv32_k(em, a, kb), kb))
    q0, r0, c = _udiv32(em, a, b)
    return emit_op(em, "SEL", sub32(em, r0, b), r0, c)     # x % 0 = x (q0 * 0 = 0, c = 1)


@public_routine
def divrem_u32(em: Emitter, a, b) -> tuple:
    """(a / b, a % b); 29 ops."""
    if const_value(b) is not None:
        return div_u32(em, a, b), rem_u32(em, a, b)
    q0, r0, c = _udiv32(em, a, b)
    return (emit_op(em, "SEL", add32(em, q0, c), M32, b),
            emit_op(em, "SEL", sub32(em, r0, b), r0, c))


def _abs32(em, a) -> tuple:
    """(|a| as unsigned, sign mask of a)."""
    sa = emit_op(em, "SAR", a, 31)
    return sub32(em, emit_op(em, "XOR", a, sa), sa), sa


def _cneg(em, x, m) -> Src:
    """m ? -x : x for a mask m in {0, -1}."""
    return sub32(em, emit_op(em, "XOR", x, m), m)


@public_routine
def div_s32(em: Emitter, a, b) -> Src:
    """a / b (signed, truncating; x / 0 = -1, INT_MIN / -1 = INT_MIN); 36 ops, 0-5 for an
    immediate b."""
    kb = const_value(b)
    if kb is not None:
        return src(Imm(M32)) if kb == 0 else _sdiv32_k(em, a, kb)
    ua, sa = _abs32(em, a)
    ub, sb = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    q = _cneg(em, add32(em, q0, c), emit_op(em, "XOR", sa, sb))
    return emit_op(em, "SEL", q, M32, b)                  # x / 0 = -1; INT_MIN / -1 wraps


@public_routine
def rem_s32(em: Emitter, a, b) -> Src:
    """a % b (signed, the sign of a; x % 0 = x, INT_MIN % -1 = 0); 35 ops, 0-7 for an
    immediate b."""
    kb = const_value(b)
    if kb is not None:
        return src(a) if kb == 0 else sub32(em, a, emit_op(em, "MUL", _sdiv32_k(em, a, kb), kb))
    ua, sa = _abs32(em, a)
    ub, _ = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    return _cneg(em, emit_op(em, "SEL", sub32(em, r0, ub), r0, c), sa)


@public_routine
def divrem_s32(em: Emitter, a, b) -> tuple:
    """(a / b, a % b) signed; 40 ops."""
    if const_value(b) is not None:
        return div_s32(em, a, b), rem_s32(em, a, b)
    ua, sa = _abs32(em, a)
    ub, sb = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    q = _cneg(em, add32(em, q0, c), emit_op(em, "XOR", sa, sb))
    return (emit_op(em, "SEL", q, M32, b),
            _cneg(em, emit_op(em, "SEL", sub32(em, r0, ub), r0, c), sa))


# ---------------------------------------------------------------------------------------------
# 64-bit division
#
# Normalise b: x1 = top nonzero word, s1 = clz(x1), (D1, D0) = b << (s1 + (b1 == 0 ? 32 : 0)).
# The quotient is found as two digits. The high digit is nonzero only when b1 == 0: it is
# a1 / b0, done by the 32-bit scheme (D1 = b0 << s1 is then its normalised divisor). The rest,
# n = (a1 % b0 or a1, a0), divided by b has a quotient below 2^32 in both cases; its estimate
# uses a 64-bit reciprocal Z ~ 2^127 / D from one Newton step on the 32-bit one, whose error
# (below 76 units) is far inside the 2^32 units the estimate tolerates, then one correction.


def _nr64(em, D, y) -> tuple:
    """Yc = 2^64 + Y, Y = (lo, hi), with 2^128/D - 75 < Yc <= 2^128/D; 16 ops.

    With Y1 = 2^32 + y (~2^64 / D1) and e = 1 - D Y1 / 2^96 (signed, |e| < 6 * 2^-32):
    S = D + D1 y + floor(D0 y / 2^32) = 2^64 (1 - e) - frac, so ~S = 2^64 e rounded down;
    Y = y 2^32 + e + floor(y e / 2^32) with y e = y e_hi (signed high word) + y e_lo.
    """
    D0, D1 = as_pair(D)
    s = add_pair(em, D0, emit_op(em, "MUL", D1, y), D1, emit_op(em, "MULHU", D1, y))
    s0, s1 = add_pair(em, s[0], emit_op(em, "MULHU", D0, y), s[1], 0)
    e0, e1 = inverted(s0), inverted(s1)                       # e = ~S, a signed 64-bit value
    yneg = emit_op(em, "AND", y, emit_op(em, "SAR", s1, 31))  # y unless e < 0: MULHU(y, e1) is then
    lo, hi = add_pair(em, e0, emit_op(em, "MUL", y, e1),  # y e1 / 2^32 + y (unsigned e1)
                       emit_op(em, "MULHU", y, e1), yneg)
    return add_pair(em, lo, emit_op(em, "MULHU", y, e0), hi, e1)


def _udiv64(em: Emitter, a, b, want_q: bool = True) -> tuple:
    """(qh, q0, r, c): the quotient is (q0 + c, qh), the remainder r - (c ? b : 0)."""
    a, b = as_pair(a), as_pair(b)
    x1 = emit_op(em, "SEL", b[1], b[0], b[1])             # top nonzero word of b
    x0 = emit_op(em, "SEL", b[0], 0, b[1])
    s1 = emit_op(em, "CLZ", x1)
    k1 = emit_op(em, "ADD", inverted(s1), 33)                 # 32 - s1
    D1 = emit_op(em, "OR", emit_op(em, "SHL", x1, s1), emit_op(em, "SHR", x0, k1))
    D0 = emit_op(em, "SHL", x0, s1)
    y = _recip32(em, D1)
    n = emit_op(em, "XOR", s1, 31)                        # 31 - s1
    # high digit: a1 / b0 when b1 == 0 (the 32-bit division with d = D1)
    qh = emit_op(em, "SHR", emit_op(em, "MULHU", a[1], _half(em, y)), n)
    rh = sub32(em, a[1], emit_op(em, "MUL", qh, b[0]))
    ch = emit_op(em, "LEU", b[0], rh)
    rh = emit_op(em, "SEL", a[1], emit_op(em, "SEL", sub32(em, rh, b[0]), rh, ch), b[1])
    qh = emit_op(em, "SEL", 0, add32(em, qh, ch), b[1]) if want_q else None
    # low digit: (rh, a0) / b < 2^32
    Y0, Y1 = _nr64(em, (D0, D1), y)
    z = (emit_op(em, "OR", emit_op(em, "SHR", Y0, 1), emit_op(em, "SHL", Y1, 31)),
         emit_op(em, "OR", emit_op(em, "SHR", Y1, 1), 0x80000000))    # Z = (2^64 + Y) / 2
    num = (a[0], rh)
    T0, T1 = mulhi_u64(em, num, z)
    q0 = emit_op(em, "SEL", emit_op(em, "SHR", T1, n),                # b1 != 0: T >> (63 - s1)
             emit_op(em, "OR", emit_op(em, "SHR", T0, n),             # b1 == 0: T >> (31 - s1)
                 emit_op(em, "SHL", T1, add32(em, s1, 1))), b[1])
    p = (emit_op(em, "MUL", q0, b[0]),
         add32(em, emit_op(em, "MULHU", q0, b[0]), emit_op(em, "MUL", q0, b[1])))
    r = sub64(em, num, p)
    c = le64(em, b, r, False)
    return qh, q0, r, c


def _q64(em, b, qh, q0, c) -> tuple:
    nz = emit_op(em, "OR", b[0], b[1])
    return emit_op(em, "SEL", add32(em, q0, c), M32, nz), emit_op(em, "SEL", qh, M32, nz)


def _r64(em, b, r, c) -> tuple:
    b = as_pair(b)
    return sub64(em, r, (emit_op(em, "SEL", b[0], 0, c), emit_op(em, "SEL", b[1], 0, c)))


@public_routine
def div_u64(em: Emitter, a, b) -> tuple:
    """a / b (unsigned; x / 0 = all ones); 92 ops, 0-27 for an immediate b."""
    kb = _k64(b)
    if kb is not None:
        return (src(Imm(M32)), src(Imm(M32))) if kb == 0 else _udiv64_k(em, a, kb)
    qh, q0, r, c = _udiv64(em, a, b)
    return _q64(em, as_pair(b), qh, q0, c)


@public_routine
def rem_u64(em: Emitter, a, b) -> tuple:
    """a % b (unsigned; x % 0 = x); 90 ops, 0-33 for an immediate b."""
    kb = _k64(b)
    if kb is not None:
        return as_pair(a) if kb == 0 else _urem64_k(em, a, kb)
    _, _, r, c = _udiv64(em, a, b, want_q=False)
    return _r64(em, b, r, c)


@public_routine
def divrem_u64(em: Emitter, a, b) -> tuple:
    """(a / b, a % b); 96 ops."""
    if _k64(b) is not None:
        return div_u64(em, a, b), rem_u64(em, a, b)
    qh, q0, r, c = _udiv64(em, a, b)
    return _q64(em, as_pair(b), qh, q0, c), _r64(em, b, r, c)




def _sdiv64_k(em, a, d: int) -> tuple:
    sd = d - (1 << 64) if d >> 63 else d
    if sd == 1:
        return as_pair(a)
    if sd == -1:
        return neg64(em, a)
    ua, sa = abs_and_sign64(em, a)
    return cond_neg64(em, _udiv64_k(em, ua, abs(sd)), inverted(sa) if sd < 0 else sa)


@public_routine
def div_s64(em: Emitter, a, b) -> tuple:
    """a / b (signed, truncating; x / 0 = -1, INT64_MIN / -1 = INT64_MIN); 107 ops, 0-36 for an
    immediate b."""
    kb = _k64(b)
    if kb is not None:
        return (src(Imm(M32)), src(Imm(M32))) if kb == 0 else _sdiv64_k(em, a, kb)
    ua, sa = abs_and_sign64(em, a)
    ub, sb = abs_and_sign64(em, b)
    qh, q0, r, c = _udiv64(em, ua, ub)
    q = cond_neg64(em, (add32(em, q0, c), qh), emit_op(em, "XOR", sa, sb))
    nz = emit_op(em, "OR", b[0], b[1])
    return emit_op(em, "SEL", q[0], M32, nz), emit_op(em, "SEL", q[1], M32, nz)   # x / 0 = -1


@public_routine
def rem_s64(em: Emitter, a, b) -> tuple:
    """a % b (signed, the sign of a; x % 0 = x); 104 ops, 0-42 for an immediate b."""
    kb = _k64(b)
    if kb is not None:
        if kb == 0:
            return as_pair(a)
        ua, sa = abs_and_sign64(em, a)
        ad = (1 << 64) - kb if kb >> 63 else kb
        return cond_neg64(em, _urem64_k(em, ua, ad), sa)
    ua, sa = abs_and_sign64(em, a)
    ub, _ = abs_and_sign64(em, b)
    _, _, r, c = _udiv64(em, ua, ub, want_q=False)
    return cond_neg64(em, _r64(em, ub, r, c), sa)


@public_routine
def divrem_s64(em: Emitter, a, b) -> tuple:
    """(a / b, a % b) signed; 115 ops."""
    if _k64(b) is not None:
        return div_s64(em, a, b), rem_s64(em, a, b)
    ua, sa = abs_and_sign64(em, a)
    ub, sb = abs_and_sign64(em, b)
    qh, q0, r, c = _udiv64(em, ua, ub)
    q = cond_neg64(em, (add32(em, q0, c), qh), emit_op(em, "XOR", sa, sb))
    nz = emit_op(em, "OR", b[0], b[1])
    return ((emit_op(em, "SEL", q[0], M32, nz), emit_op(em, "SEL", q[1], M32, nz)),
            cond_neg64(em, _r64(em, ub, r, c), sa))
