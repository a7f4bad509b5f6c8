"""Straight-line integer routines over the micro-ISA: division, 64-bit arithmetic, bit fields,
permutes (see docs/intcode.md for the algorithms, the correctness arguments and the costs).

Every routine takes an `Emitter` and operands as `Src` (32-bit) or `(lo, hi)` tuples of `Src`
(64-bit), emits ALU micro-ops only (branch-free: SEL instead of branches), and returns `Src` /
tuples. Results are bit-exact with `qwengpu.interp.alu` for every input.

Operands that are immediates (`Imm`) are folded at assembly time: an op whose operands are all
constants is computed here and never emitted, and trivial identities (x|0, x<<0, SEL on a
constant condition, ...) are simplified. So a routine called with constant shift amounts, bit
positions or permute selectors costs only what depends on the register operands.

Carry chains are pairs only: a flag producer is immediately followed by its single consumer,
which never sets the flag itself (the bundle packer keeps exactly such pairs together).
"""
from __future__ import annotations

import functools

from qwengpu.machine.uops import M32, Imm, Src, VReg, src

from .emit import Emitter, Recorder
from .simplify import Operand, Sym, simplify

__all__ = [
    "div_u32", "div_s32", "rem_u32", "rem_s32", "divrem_u32", "divrem_s32",
    "div_u64", "div_s64", "rem_u64", "rem_s64", "divrem_u64", "divrem_s64",
    "mulhi_u64", "mulhi_s64", "mullo_u64", "add64", "sub64", "neg64",
    "shl64", "shr64", "sar64",
    "bfe_u32", "bfe_s32", "bfe_u64", "bfe_s64", "bfi_b32", "bfi_b64",
    "prmt", "PRMT_MODES", "shf", "bfind", "sad",
    "min64", "max64", "abs64", "clz64", "popc64", "brev64",
    "COST", "measure",
]

# ---------------------------------------------------------------------------------------------
# emission helpers: constant folding and trivial identities


def _const(x) -> int | None:
    """The value of an immediate operand (inversion applied), else None."""
    x = src(x)
    if isinstance(x.value, Imm):
        v = x.value.value
        return (~v & M32) if x.inv else v
    return None


def _sym(x: Src):
    """A `Src` as the simplifier sees it: its constant, or the register it reads."""
    k = _const(x)
    return k if k is not None else Sym(x.value, x.inv)


def _op(em: Emitter, op: str, a, b=None, c=None, cin: str = "0") -> Src:
    """Emit one ALU op (no carry flag out), folding constants and trivial identities
    (`qwengpu.assembler.simplify`)."""
    srcs = {"a": src(a), "b": None if b is None else src(b), "c": None if c is None else src(c)}
    r = simplify(op, *(None if x is None else _sym(x) for x in srcs.values()), cin=cin)
    if isinstance(r, int):
        return src(Imm(r))
    if isinstance(r, Operand):
        return srcs[r.name]
    return em.alu(op, srcs["a"], srcs["b"], srcs["c"], cin=cin)


def _roots(x, out: set):
    if isinstance(x, Src):
        if isinstance(x.value, VReg):
            out.add(x.value)
    elif isinstance(x, tuple):
        for y in x:
            _roots(y, out)


def _routine(fn):
    """Public routines drop what they emitted but do not use (values made dead by constant
    folding, e.g. the branch a SEL with an immediate condition does not take)."""
    @functools.wraps(fn)
    def wrapper(em, *args, **kw):
        start = len(em.out)
        result = fn(em, *args, **kw)
        ops = em.out[start:]
        live: set = set()
        _roots(result, live)
        keep = [False] * len(ops)
        for i in range(len(ops) - 1, -1, -1):
            op = ops[i]
            if op.dst[0] in live or (op.sets_flag and i + 1 < len(ops) and keep[i + 1]
                                     and ops[i + 1].cin == "flag"):
                keep[i] = True
                for r in op.reads():
                    live.add(r)
        if not all(keep):
            ops = [op for op, k in zip(ops, keep) if k]
            for i, op in enumerate(ops):          # a carry nobody reads any more
                if op.sets_flag and not (i + 1 < len(ops) and ops[i + 1].cin == "flag"):
                    op.sets_flag = False
            em.out[start:] = ops
        return result
    return wrapper


def _add_pair(em: Emitter, a0, b0, a1, b1, cin0: str = "0") -> tuple:
    """(a0 + b0 + cin0) and (a1 + b1 + carry out of the first): a flag pair, folded if possible."""
    k0, k1 = _const(a0), _const(b0)
    if k0 is not None and k1 is not None:
        t = k0 + k1 + int(cin0)
        return src(Imm(t & M32)), _op(em, "ADD", a1, b1, cin=str(t >> 32))
    if cin0 == "0" and (k0 == 0 or k1 == 0):
        return (src(b0) if k0 == 0 else src(a0)), _op(em, "ADD", a1, b1)
    lo = em.alu("ADD", a0, b0, cin=cin0, sets_flag=True)
    hi = em.alu("ADD", a1, b1, cin="flag")
    return lo, hi


def _inv(x) -> Src:
    return src(x, True)


def _p(x) -> tuple:
    lo, hi = x
    return src(lo), src(hi)


def _add(em, a, b, cin="0"):
    return _op(em, "ADD", a, b, cin=cin)


def _sub(em, a, b):
    """a - b (mod 2^32)."""
    return _op(em, "ADD", a, _inv(b), cin="1")


@_routine
def add64(em, a, b) -> tuple:
    a, b = _p(a), _p(b)
    return _add_pair(em, a[0], b[0], a[1], b[1])


@_routine
def sub64(em, a, b) -> tuple:
    a, b = _p(a), _p(b)
    return _add_pair(em, a[0], _inv(b[0]), a[1], _inv(b[1]), cin0="1")


@_routine
def neg64(em, a) -> tuple:
    """-a (mod 2^64)."""
    a = _p(a)
    return _add_pair(em, _inv(a[0]), 0, _inv(a[1]), 0, cin0="1")


def _lt64(em, a, b, signed: bool) -> Src:
    """1 if a < b (64-bit) else 0: the low words decide when the high words are equal."""
    a, b = _p(a), _p(b)
    lo = _op(em, "LTU", a[0], b[0])
    le = _op(em, "LE" if signed else "LEU", a[1], b[1])
    lt = _op(em, "LT" if signed else "LTU", a[1], b[1])
    return _op(em, "SEL", le, lt, lo)


def _le64(em, a, b, signed: bool) -> Src:
    """1 if a <= b (64-bit) else 0."""
    a, b = _p(a), _p(b)
    lo = _op(em, "LEU", a[0], b[0])
    le = _op(em, "LE" if signed else "LEU", a[1], b[1])
    lt = _op(em, "LT" if signed else "LTU", a[1], b[1])
    return _op(em, "SEL", le, lt, lo)


def _sel64(em, c, a, b) -> tuple:
    a, b = _p(a), _p(b)
    return _op(em, "SEL", a[0], b[0], c), _op(em, "SEL", a[1], b[1], c)


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
    x = _inv(d)                                       # 2^32 - 1 - d  (x * 2^32, rounded down)
    x2 = _op(em, "ADD", x, x, cin="1")                # 2x * 2^32 - 1
    acc = _add(em, _op(em, "MULHU", x2, _RC2), _RC1)  # c1 + x c2      (Q31)
    acc = _add(em, _op(em, "MULHU", x, acc), _RC0)    # c0 + x (...)    (Q31)
    y = _op(em, "MULHU", x2, acc)                     # (p - 1) * 2^32
    # one Newton-type step of order 5: e = 1 - d*Y (>= 0), Y' = Y (1 + e + e^2 + e^3 + e^4)
    t = _op(em, "MULHU", d, y)
    e = _op(em, "ADD", _inv(t), _inv(d), cin="1")     # ~(t + d) = 2^32 e rounded down
    e2 = _op(em, "MULHU", e, e)
    g = _add(em, e, e2)                               # e + e^2
    f = _add(em, g, _op(em, "MULHU", g, e2))          # (e + e^2)(1 + e^2)
    m = _op(em, "MULHU", y, f)
    return _op(em, "ADD", _add(em, y, f), m, cin="1")  # y + f + y f; the +1 is allowed (doc)


def _half(em, y) -> Src:
    """floor(Yc / 2) = 2^31 + (y >> 1), a 32-bit multiplier."""
    return _op(em, "OR", _op(em, "SHR", y, 1), 0x80000000)


def _udiv32(em: Emitter, a, b) -> tuple:
    """(q0, r0, c): q0 = a/b or a/b - 1, r0 = a - q0 b, c = (r0 >= b); q = q0 + c. 25 ops."""
    a, b = src(a), src(b)
    s = _op(em, "CLZ", b)
    d = _op(em, "SHL", b, s)
    m = _half(em, _recip32(em, d))                    # floor(Yc / 2)
    n = _op(em, "XOR", s, 31)                         # 31 - s (s = 32 for b = 0: 63)
    q0 = _op(em, "SHR", _op(em, "MULHU", a, m), n)    # floor(a m / 2^(63 - s))
    r0 = _sub(em, a, _op(em, "MUL", q0, b))
    c = _op(em, "LEU", b, r0)
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
        return _op(em, "SHR", a, d.bit_length() - 1)
    if d >> 31:
        return _op(em, "LEU", d, a)
    k = _magic_u(d, 32)
    if k[0] == "mul":
        _, m, sh, z = k
        return _op(em, "SHR", _op(em, "MULHU", _op(em, "SHR", a, z), m), sh)
    _, m, l = k
    t = _op(em, "MULHU", a, m)
    return _op(em, "SHR", _add(em, _op(em, "SHR", _sub(em, a, t), 1), t), l - 1)


def _sdiv32_k(em, a, d: int) -> Src:
    """a / d (signed, truncating) for a constant d != 0: 1-5 ops."""
    sd = _sx32(d)
    if sd == 1:
        return src(a)
    if sd == -1:
        return _sub(em, 0, a)                          # wraps for INT_MIN
    ad = abs(sd)
    if ad & (ad - 1) == 0:
        if ad == 1 << 31:
            return _op(em, "EQ", a, 0x80000000)
        k = ad.bit_length() - 1
        bias = _op(em, "SHR", _op(em, "SAR", a, k - 1), 32 - k)       # 2^k - 1 if a < 0
        q = _op(em, "SAR", _add(em, a, bias), k)
        return q if sd > 0 else _sub(em, 0, q)
    m, sh = _magic_s32(sd)
    q = _op(em, "MULHS", a, m)
    if sd > 0 and m >> 31:
        q = _add(em, q, a)
    if sd < 0 and not m >> 31:
        q = _sub(em, q, a)
    q = _op(em, "SAR", q, sh)
    return _add(em, q, _op(em, "SHR", q, 31))


def _k64(b):
    if isinstance(b, tuple):
        lo, hi = _const(b[0]), _const(b[1])
        if lo is not None and hi is not None:
            return lo | (hi << 32)
    return None


def _shr64k(em, a, k: int) -> tuple:
    return shr64(em, a, k) if k else _p(a)


def _udiv64_k(em, a, d: int) -> tuple:
    """a / d for a constant 1 <= d < 2^64."""
    a = _p(a)
    if d & (d - 1) == 0:
        return _shr64k(em, a, d.bit_length() - 1)
    if d >> 63:
        return _le64(em, (d & M32, d >> 32), a, False), src(Imm(0))
    k = _magic_u(d, 64)
    if k[0] == "mul":
        _, m, sh, z = k
        return _shr64k(em, mulhi_u64(em, _shr64k(em, a, z), (m & M32, m >> 32)), sh)
    _, m, l = k
    t = mulhi_u64(em, a, (m & M32, m >> 32))
    return _shr64k(em, add64(em, _shr64k(em, sub64(em, a, t), 1), t), l - 1)


def _urem64_k(em, a, d: int) -> tuple:
    a = _p(a)
    if d & (d - 1) == 0:
        return _op(em, "AND", a[0], (d - 1) & M32), _op(em, "AND", a[1], (d - 1) >> 32)
    return sub64(em, a, mullo_u64(em, _udiv64_k(em, a, d), (d & M32, d >> 32)))


@_routine
def div_u32(em: Emitter, a, b) -> Src:
    """a / b (unsigned; x / 0 = 0xFFFFFFFF); 27 ops, 0-5 for an immediate b."""
    kb = _const(b)
    if kb is not None:
        return src(Imm(M32)) if kb == 0 else _udiv32_k(em, a, kb)
    q0, r0, c = _udiv32(em, a, b)
    return _op(em, "SEL", _add(em, q0, c), M32, b)    # x / 0 = all ones


@_routine
def rem_u32(em: Emitter, a, b) -> Src:
    """a % b (unsigned; x % 0 = x); 27 ops, 0-7 for an immediate b."""
    kb = _const(b)
    if kb is not None:
        if kb == 0:
            return src(a)
        if kb & (kb - 1) == 0:
            return _op(em, "AND", a, kb - 1)
        return _sub(em, a, _op(em, "MUL", _udiv32_k(em, a, kb), kb))
    q0, r0, c = _udiv32(em, a, b)
    return _op(em, "SEL", _sub(em, r0, b), r0, c)     # x % 0 = x (q0 * 0 = 0, c = 1)


@_routine
def divrem_u32(em: Emitter, a, b) -> tuple:
    """(a / b, a % b); 29 ops."""
    if _const(b) is not None:
        return div_u32(em, a, b), rem_u32(em, a, b)
    q0, r0, c = _udiv32(em, a, b)
    return (_op(em, "SEL", _add(em, q0, c), M32, b),
            _op(em, "SEL", _sub(em, r0, b), r0, c))


def _abs32(em, a) -> tuple:
    """(|a| as unsigned, sign mask of a)."""
    sa = _op(em, "SAR", a, 31)
    return _sub(em, _op(em, "XOR", a, sa), sa), sa


def _cneg(em, x, m) -> Src:
    """m ? -x : x for a mask m in {0, -1}."""
    return _sub(em, _op(em, "XOR", x, m), m)


@_routine
def div_s32(em: Emitter, a, b) -> Src:
    """a / b (signed, truncating; x / 0 = -1, INT_MIN / -1 = INT_MIN); 36 ops, 0-5 for an
    immediate b."""
    kb = _const(b)
    if kb is not None:
        return src(Imm(M32)) if kb == 0 else _sdiv32_k(em, a, kb)
    ua, sa = _abs32(em, a)
    ub, sb = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    q = _cneg(em, _add(em, q0, c), _op(em, "XOR", sa, sb))
    return _op(em, "SEL", q, M32, b)                  # x / 0 = -1; INT_MIN / -1 wraps


@_routine
def rem_s32(em: Emitter, a, b) -> Src:
    """a % b (signed, the sign of a; x % 0 = x, INT_MIN % -1 = 0); 35 ops, 0-7 for an
    immediate b."""
    kb = _const(b)
    if kb is not None:
        return src(a) if kb == 0 else _sub(em, a, _op(em, "MUL", _sdiv32_k(em, a, kb), kb))
    ua, sa = _abs32(em, a)
    ub, _ = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    return _cneg(em, _op(em, "SEL", _sub(em, r0, ub), r0, c), sa)


@_routine
def divrem_s32(em: Emitter, a, b) -> tuple:
    """(a / b, a % b) signed; 40 ops."""
    if _const(b) is not None:
        return div_s32(em, a, b), rem_s32(em, a, b)
    ua, sa = _abs32(em, a)
    ub, sb = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    q = _cneg(em, _add(em, q0, c), _op(em, "XOR", sa, sb))
    return (_op(em, "SEL", q, M32, b),
            _cneg(em, _op(em, "SEL", _sub(em, r0, ub), r0, c), sa))


# ---------------------------------------------------------------------------------------------
# 64-bit multiplication


@_routine
def mullo_u64(em: Emitter, a, b) -> tuple:
    """Low 64 bits of a * b (signed or unsigned alike); 6 ops."""
    a, b = _p(a), _p(b)
    lo = _op(em, "MUL", a[0], b[0])
    hi = _add(em, _add(em, _op(em, "MULHU", a[0], b[0]), _op(em, "MUL", a[0], b[1])),
              _op(em, "MUL", a[1], b[0]))
    return lo, hi


@_routine
def mulhi_u64(em: Emitter, a, b) -> tuple:
    """High 64 bits of the unsigned 128-bit product a * b; 15 ops.

    a*b = (a1 b) 2^32 + a0 b. M = floor(a0 b / 2^32) = a0 b1 + hi(a0 b0) and
    N = floor(a1 b / 2^32) = a1 b1 + hi(a1 b0) are exact 64-bit sums; the high half is
    N + floor((M + lo(a1 b0)) / 2^32), and the last term's high word cannot overflow.
    """
    a, b = _p(a), _p(b)
    h00 = _op(em, "MULHU", a[0], b[0])
    m = _add_pair(em, _op(em, "MUL", a[0], b[1]), h00, _op(em, "MULHU", a[0], b[1]), 0)
    nn = _add_pair(em, _op(em, "MUL", a[1], b[1]), _op(em, "MULHU", a[1], b[0]),
                   _op(em, "MULHU", a[1], b[1]), 0)
    _, k = _add_pair(em, m[0], _op(em, "MUL", a[1], b[0]), m[1], 0)
    return _add_pair(em, nn[0], k, nn[1], 0)


@_routine
def mulhi_s64(em: Emitter, a, b) -> tuple:
    """High 64 bits of the signed 128-bit product: the unsigned one minus (a<0 ? b : 0) and
    (b<0 ? a : 0), modulo 2^64; 25 ops."""
    a, b = _p(a), _p(b)
    h = mulhi_u64(em, a, b)
    sa = _op(em, "SAR", a[1], 31)
    sb = _op(em, "SAR", b[1], 31)
    h = sub64(em, h, (_op(em, "AND", b[0], sa), _op(em, "AND", b[1], sa)))
    return sub64(em, h, (_op(em, "AND", a[0], sb), _op(em, "AND", a[1], sb)))


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
    D0, D1 = _p(D)
    s = _add_pair(em, D0, _op(em, "MUL", D1, y), D1, _op(em, "MULHU", D1, y))
    s0, s1 = _add_pair(em, s[0], _op(em, "MULHU", D0, y), s[1], 0)
    e0, e1 = _inv(s0), _inv(s1)                       # e = ~S, a signed 64-bit value
    yneg = _op(em, "AND", y, _op(em, "SAR", s1, 31))  # y unless e < 0: MULHU(y, e1) is then
    lo, hi = _add_pair(em, e0, _op(em, "MUL", y, e1),  # y e1 / 2^32 + y (unsigned e1)
                       _op(em, "MULHU", y, e1), yneg)
    return _add_pair(em, lo, _op(em, "MULHU", y, e0), hi, e1)


def _udiv64(em: Emitter, a, b, want_q: bool = True) -> tuple:
    """(qh, q0, r, c): the quotient is (q0 + c, qh), the remainder r - (c ? b : 0)."""
    a, b = _p(a), _p(b)
    x1 = _op(em, "SEL", b[1], b[0], b[1])             # top nonzero word of b
    x0 = _op(em, "SEL", b[0], 0, b[1])
    s1 = _op(em, "CLZ", x1)
    k1 = _op(em, "ADD", _inv(s1), 33)                 # 32 - s1
    D1 = _op(em, "OR", _op(em, "SHL", x1, s1), _op(em, "SHR", x0, k1))
    D0 = _op(em, "SHL", x0, s1)
    y = _recip32(em, D1)
    n = _op(em, "XOR", s1, 31)                        # 31 - s1
    # high digit: a1 / b0 when b1 == 0 (the 32-bit division with d = D1)
    qh = _op(em, "SHR", _op(em, "MULHU", a[1], _half(em, y)), n)
    rh = _sub(em, a[1], _op(em, "MUL", qh, b[0]))
    ch = _op(em, "LEU", b[0], rh)
    rh = _op(em, "SEL", a[1], _op(em, "SEL", _sub(em, rh, b[0]), rh, ch), b[1])
    qh = _op(em, "SEL", 0, _add(em, qh, ch), b[1]) if want_q else None
    # low digit: (rh, a0) / b < 2^32
    Y0, Y1 = _nr64(em, (D0, D1), y)
    z = (_op(em, "OR", _op(em, "SHR", Y0, 1), _op(em, "SHL", Y1, 31)),
         _op(em, "OR", _op(em, "SHR", Y1, 1), 0x80000000))    # Z = (2^64 + Y) / 2
    num = (a[0], rh)
    T0, T1 = mulhi_u64(em, num, z)
    q0 = _op(em, "SEL", _op(em, "SHR", T1, n),                # b1 != 0: T >> (63 - s1)
             _op(em, "OR", _op(em, "SHR", T0, n),             # b1 == 0: T >> (31 - s1)
                 _op(em, "SHL", T1, _add(em, s1, 1))), b[1])
    p = (_op(em, "MUL", q0, b[0]),
         _add(em, _op(em, "MULHU", q0, b[0]), _op(em, "MUL", q0, b[1])))
    r = sub64(em, num, p)
    c = _le64(em, b, r, False)
    return qh, q0, r, c


def _q64(em, b, qh, q0, c) -> tuple:
    nz = _op(em, "OR", b[0], b[1])
    return _op(em, "SEL", _add(em, q0, c), M32, nz), _op(em, "SEL", qh, M32, nz)


def _r64(em, b, r, c) -> tuple:
    b = _p(b)
    return sub64(em, r, (_op(em, "SEL", b[0], 0, c), _op(em, "SEL", b[1], 0, c)))


@_routine
def div_u64(em: Emitter, a, b) -> tuple:
    """a / b (unsigned; x / 0 = all ones); 92 ops, 0-27 for an immediate b."""
    kb = _k64(b)
    if kb is not None:
        return (src(Imm(M32)), src(Imm(M32))) if kb == 0 else _udiv64_k(em, a, kb)
    qh, q0, r, c = _udiv64(em, a, b)
    return _q64(em, _p(b), qh, q0, c)


@_routine
def rem_u64(em: Emitter, a, b) -> tuple:
    """a % b (unsigned; x % 0 = x); 90 ops, 0-33 for an immediate b."""
    kb = _k64(b)
    if kb is not None:
        return _p(a) if kb == 0 else _urem64_k(em, a, kb)
    _, _, r, c = _udiv64(em, a, b, want_q=False)
    return _r64(em, b, r, c)


@_routine
def divrem_u64(em: Emitter, a, b) -> tuple:
    """(a / b, a % b); 96 ops."""
    if _k64(b) is not None:
        return div_u64(em, a, b), rem_u64(em, a, b)
    qh, q0, r, c = _udiv64(em, a, b)
    return _q64(em, _p(b), qh, q0, c), _r64(em, b, r, c)


def _abs64(em, a) -> tuple:
    """(|a| as unsigned, sign mask of a)."""
    a = _p(a)
    s = _op(em, "SAR", a[1], 31)
    return _cneg64(em, a, s), s


def _cneg64(em, x, m) -> tuple:
    """m ? -x : x for a mask m in {0, -1}."""
    x = _p(x)
    return _add_pair(em, _op(em, "XOR", x[0], m), _inv(m), _op(em, "XOR", x[1], m), _inv(m), cin0="1")


def _sdiv64_k(em, a, d: int) -> tuple:
    sd = d - (1 << 64) if d >> 63 else d
    if sd == 1:
        return _p(a)
    if sd == -1:
        return neg64(em, a)
    ua, sa = _abs64(em, a)
    return _cneg64(em, _udiv64_k(em, ua, abs(sd)), _inv(sa) if sd < 0 else sa)


@_routine
def div_s64(em: Emitter, a, b) -> tuple:
    """a / b (signed, truncating; x / 0 = -1, INT64_MIN / -1 = INT64_MIN); 107 ops, 0-36 for an
    immediate b."""
    kb = _k64(b)
    if kb is not None:
        return (src(Imm(M32)), src(Imm(M32))) if kb == 0 else _sdiv64_k(em, a, kb)
    ua, sa = _abs64(em, a)
    ub, sb = _abs64(em, b)
    qh, q0, r, c = _udiv64(em, ua, ub)
    q = _cneg64(em, (_add(em, q0, c), qh), _op(em, "XOR", sa, sb))
    nz = _op(em, "OR", b[0], b[1])
    return _op(em, "SEL", q[0], M32, nz), _op(em, "SEL", q[1], M32, nz)   # x / 0 = -1


@_routine
def rem_s64(em: Emitter, a, b) -> tuple:
    """a % b (signed, the sign of a; x % 0 = x); 104 ops, 0-42 for an immediate b."""
    kb = _k64(b)
    if kb is not None:
        if kb == 0:
            return _p(a)
        ua, sa = _abs64(em, a)
        ad = (1 << 64) - kb if kb >> 63 else kb
        return _cneg64(em, _urem64_k(em, ua, ad), sa)
    ua, sa = _abs64(em, a)
    ub, _ = _abs64(em, b)
    _, _, r, c = _udiv64(em, ua, ub, want_q=False)
    return _cneg64(em, _r64(em, ub, r, c), sa)


@_routine
def divrem_s64(em: Emitter, a, b) -> tuple:
    """(a / b, a % b) signed; 115 ops."""
    if _k64(b) is not None:
        return div_s64(em, a, b), rem_s64(em, a, b)
    ua, sa = _abs64(em, a)
    ub, sb = _abs64(em, b)
    qh, q0, r, c = _udiv64(em, ua, ub)
    q = _cneg64(em, (_add(em, q0, c), qh), _op(em, "XOR", sa, sb))
    nz = _op(em, "OR", b[0], b[1])
    return ((_op(em, "SEL", q[0], M32, nz), _op(em, "SEL", q[1], M32, nz)),
            _cneg64(em, _r64(em, ub, r, c), sa))


# ---------------------------------------------------------------------------------------------
# 64-bit shifts by a register amount (the full 32-bit value counts: >= 64 gives 0 / the sign)


@_routine
def shl64(em: Emitter, a, n) -> tuple:
    """a << n; 8 ops. Amounts past 31 make the 32-bit shifts give 0, so each term vanishes
    outside its range: hi = a1 << n | a0 >> (32 - n) | a0 << (n - 32)."""
    n = src(n)
    return _shl64(em, _p(a), n, _op(em, "ADD", _inv(n), 33), _add(em, n, -32 & M32))


def _shl64(em, a, n, up, dn) -> tuple:
    """shl64 with the amounts 32 - n and n - 32 given."""
    hi = _op(em, "OR", _op(em, "OR", _op(em, "SHL", a[1], n), _op(em, "SHR", a[0], up)),
             _op(em, "SHL", a[0], dn))
    return _op(em, "SHL", a[0], n), hi


@_routine
def shr64(em: Emitter, a, n) -> tuple:
    """a >> n (logical); 8 ops."""
    a, n = _p(a), src(n)
    up, dn = _op(em, "ADD", _inv(n), 33), _add(em, n, -32 & M32)
    lo = _op(em, "OR", _op(em, "OR", _op(em, "SHR", a[0], n), _op(em, "SHL", a[1], up)),
             _op(em, "SHR", a[1], dn))
    return lo, _op(em, "SHR", a[1], n)


@_routine
def sar64(em: Emitter, a, n) -> tuple:
    """a >> n (arithmetic, amounts >= 64 give the sign); 9 ops."""
    a, n = _p(a), src(n)
    up, dn = _op(em, "ADD", _inv(n), 33), _add(em, n, -32 & M32)
    small = _op(em, "OR", _op(em, "SHR", a[0], n), _op(em, "SHL", a[1], up))   # n < 32
    lo = _op(em, "SEL", _op(em, "SAR", a[1], dn), small, _op(em, "SHR", n, 5))
    return lo, _op(em, "SAR", a[1], n)


# ---------------------------------------------------------------------------------------------
# small 64-bit operations


@_routine
def abs64(em: Emitter, a) -> tuple:
    """|a| (abs(INT64_MIN) = INT64_MIN); 5 ops."""
    return _abs64(em, a)[0]


@_routine
def min64(em: Emitter, a, b, signed: bool) -> tuple:
    """min(a, b); 6 ops."""
    return _sel64(em, _lt64(em, a, b, signed), a, b)


@_routine
def max64(em: Emitter, a, b, signed: bool) -> tuple:
    """max(a, b); 6 ops."""
    return _sel64(em, _lt64(em, a, b, signed), b, a)


@_routine
def clz64(em: Emitter, a) -> Src:
    """Leading zeros of a 64-bit value (64 for 0); 4 ops."""
    a = _p(a)
    return _op(em, "SEL", _op(em, "CLZ", a[1]), _add(em, _op(em, "CLZ", a[0]), 32), a[1])


@_routine
def popc64(em: Emitter, a) -> Src:
    a = _p(a)
    return _add(em, _op(em, "POPC", a[0]), _op(em, "POPC", a[1]))


@_routine
def brev64(em: Emitter, a) -> tuple:
    a = _p(a)
    return _op(em, "BREV", a[1]), _op(em, "BREV", a[0])


@_routine
def bfind(em: Emitter, a, width: int = 32, signed: bool = False, shiftamt: bool = False) -> Src:
    """PTX bfind: the position of the most significant 1 (of the most significant 0 for negative
    signed values), counted from the msb with .shiftamt; 0xFFFFFFFF when there is none.
    32-bit: 2 ops (+2 signed); 64-bit: 5 ops (+3 signed)."""
    if width == 64:
        x = _p(a)
        if signed:
            s = _op(em, "SAR", x[1], 31)
            x = (_op(em, "XOR", x[0], s), _op(em, "XOR", x[1], s))
        c1, c0 = _op(em, "CLZ", x[1]), _op(em, "CLZ", x[0])
        if shiftamt:
            return _op(em, "SEL", c1, _op(em, "SEL", _add(em, c0, 32), M32, x[0]), x[1])
        # 31 - clz: the -1 of a zero word comes out by itself (31 - 32)
        return _op(em, "SEL", _op(em, "ADD", _inv(c1), 64), _op(em, "ADD", _inv(c0), 32), x[1])
    x = src(a)
    if signed:
        x = _op(em, "XOR", x, _op(em, "SAR", x, 31))
    c = _op(em, "CLZ", x)
    if shiftamt:
        return _op(em, "SEL", c, M32, x)
    return _op(em, "ADD", _inv(c), 32)


@_routine
def sad(em: Emitter, a, b, c, signed: bool = False):
    """c + |a - b| (32-bit: Src operands, 5 ops; 64-bit: pairs, 12 ops)."""
    if isinstance(a, tuple):
        a, b, c = _p(a), _p(b), _p(c)
        lt = _lt64(em, a, b, signed)
        d = _sel64(em, lt, sub64(em, b, a), sub64(em, a, b))
        return add64(em, c, d)
    lt = _op(em, "LT" if signed else "LTU", a, b)
    return _add(em, c, _op(em, "SEL", _sub(em, b, a), _sub(em, a, b), lt))


# ---------------------------------------------------------------------------------------------
# bit fields (position and length: their low 8 bits count, as in alu.bfe / alu.bfi)


def _bfe32_k(em, a, p: int, ln: int, signed: bool) -> Src:
    """Immediate position and length: 0-2 ops."""
    p, ln = p & 0xFF, ln & 0xFF
    if ln == 0:
        return src(Imm(0))
    if p + ln >= 32:
        return _op(em, "SAR" if signed else "SHR", a, min(p, 31) if signed else p)
    return _op(em, "SAR" if signed else "SHR", _op(em, "SHL", a, 32 - p - ln), 32 - ln)


@_routine
def bfe_u32(em: Emitter, a, pos, length) -> Src:
    """(a >> pos) & ((1 << len) - 1), shifts past 31 giving 0 and lengths past 31 all ones; 5 ops."""
    if _const(pos) is not None and _const(length) is not None:
        return _bfe32_k(em, a, _const(pos), _const(length), False)
    p = _op(em, "AND", pos, 0xFF)
    ln = _op(em, "AND", length, 0xFF)
    return _op(em, "AND", _op(em, "SHR", a, p), _inv(_op(em, "SHL", M32, ln)))


@_routine
def bfe_s32(em: Emitter, a, pos, length) -> Src:
    """The field sign-extended: x = a >> pos (arithmetic) already carries the right sign bits
    beyond a's msb; below 32 bits it is sign-extended from bit len - 1. len = 0 gives 0 by
    itself (shifts by 32); 8 ops."""
    if _const(pos) is not None and _const(length) is not None:
        return _bfe32_k(em, a, _const(pos), _const(length), True)
    x = _op(em, "SAR", a, _op(em, "AND", pos, 0xFF))
    m = _op(em, "ADD", _inv(_op(em, "AND", length, 0xFF)), 33)      # 32 - len
    ext = _op(em, "SAR", _op(em, "SHL", x, m), m)
    return _op(em, "SEL", x, ext, _op(em, "AND", length, 0xE0))     # len >= 32: x


@_routine
def bfi_b32(em: Emitter, a, b, pos, length) -> Src:
    """b with its bits [pos, pos + len) replaced by the low bits of a; 8 ops."""
    p = _op(em, "AND", pos, 0xFF)
    ln = _op(em, "AND", length, 0xFF)
    mask = _op(em, "SHL", _inv(_op(em, "SHL", M32, ln)), p)
    b = src(b)
    return _op(em, "XOR", b, _op(em, "AND", _op(em, "XOR", b, _op(em, "SHL", a, p)), mask))


def _lowmask64(em, ln) -> tuple:
    """64-bit mask of the low `ln` bits (ln <= 255); 5 ops."""
    lo = _inv(_op(em, "SHL", M32, ln))
    hi = _op(em, "SEL", _inv(_op(em, "SHL", M32, _add(em, ln, -32 & M32))), 0, _op(em, "SHR", ln, 5))
    return lo, hi


@_routine
def bfe_u64(em: Emitter, a, pos, length) -> tuple:
    """17 ops."""
    p = _op(em, "AND", pos, 0xFF)
    ln = _op(em, "AND", length, 0xFF)
    x = shr64(em, a, p)
    m = _lowmask64(em, ln)
    return _op(em, "AND", x[0], m[0]), _op(em, "AND", x[1], m[1])


@_routine
def bfe_s64(em: Emitter, a, pos, length) -> tuple:
    """x = a >> pos (arithmetic), then sign-extended from bit len - 1 when len < 64; 23 ops."""
    p = _op(em, "AND", pos, 0xFF)
    ln = _op(em, "AND", length, 0xFF)
    x = sar64(em, a, p)
    m1 = _op(em, "ADD", _inv(ln), 33)                                # 32 - len
    lo_s = _op(em, "SAR", _op(em, "SHL", x[0], m1), m1)              # len <= 32
    m2 = _op(em, "ADD", _inv(ln), 65)                                # 64 - len
    hi_b = _op(em, "SAR", _op(em, "SHL", x[1], m2), m2)              # 32 <= len <= 64
    big = _op(em, "LTU", 32, ln)                                     # len > 32
    hi = _op(em, "SEL", _op(em, "SEL", x[1], hi_b, _op(em, "LTU", 64, ln)),
             _op(em, "SAR", lo_s, 31), big)
    return _op(em, "SEL", x[0], lo_s, big), hi


@_routine
def bfi_b64(em: Emitter, a, b, pos, length) -> tuple:
    """b ^ ((b ^ (a << pos)) & (lowmask(len) << pos)); 27 ops."""
    p = _op(em, "AND", pos, 0xFF)
    ln = _op(em, "AND", length, 0xFF)
    a, b = _p(a), _p(b)
    up, dn = _op(em, "ADD", _inv(p), 33), _add(em, p, -32 & M32)
    ap = _shl64(em, a, p, up, dn)
    mask = _shl64(em, _lowmask64(em, ln), p, up, dn)
    return tuple(_op(em, "XOR", b[i], _op(em, "AND", _op(em, "XOR", b[i], ap[i]), mask[i]))
                 for i in range(2))


# ---------------------------------------------------------------------------------------------
# funnel shift


@_routine
def shf(em: Emitter, a, b, n, left: bool, clamp: bool) -> Src:
    """PTX shf.{l,r}.{wrap,clamp}: 32 bits of the 64-bit b:a shifted by n (wrap: n & 31,
    clamp: min(n, 32)); 5 ops (wrap) / 6 (clamp); 3 or fewer for an immediate n."""
    a, b, n = src(a), src(b), src(n)
    k = _op(em, "AND", n, 31) if not clamp else _op(em, "SEL", n, 32, _op(em, "LTU", n, 32))
    up = _op(em, "ADD", _inv(k), 33)                                 # 32 - k (k = 0: 32)
    if left:
        return _op(em, "OR", _op(em, "SHL", b, k), _op(em, "SHR", a, up))
    return _op(em, "OR", _op(em, "SHR", a, k), _op(em, "SHL", b, up))


# ---------------------------------------------------------------------------------------------
# byte permute

PRMT_MODES = (None, "f4e", "b4e", "rc8", "ecl", "ecr", "rc16")


def _prmt_selectors(c: int, mode) -> list:
    """[(source byte 0..7 of b:a, sign-replicate)] for the 4 result bytes (as alu.prmt)."""
    if mode is None:
        return [((c >> (4 * i)) & 7, bool((c >> (4 * i)) & 8)) for i in range(4)]
    n = c & 3
    sel = {
        "f4e": [(n + i) & 7 for i in range(4)],
        "b4e": [(n - i) & 7 for i in range(4)],
        "rc8": [n] * 4,
        "ecl": [max(i, n) for i in range(4)],
        "ecr": [min(i, n) for i in range(4)],
        "rc16": [2 * (n & 1), 2 * (n & 1) + 1] * 2,
    }[mode]
    return [(s, False) for s in sel]


def _bytes_mask(bs) -> int:
    return sum(0xFF << (8 * i) for i in bs)


def _prmt_parts(sels, choice: int) -> list:
    """Parts (kind, word, arg, result bytes, top) for one assignment of the plain bytes: bit k
    of `choice` set = the k-th plain byte comes from a replicated byte instead of a shift."""
    plain = [i for i, (_, sg) in enumerate(sels) if not sg]
    parts: dict = {}
    for k, i in enumerate(plain):
        s = sels[i][0]
        w, j = s >> 2, s & 3
        key = ("rep", w, j) if choice >> k & 1 else ("sh", w, 8 * (i - j))
        parts.setdefault(key, []).append(i)
    for i, (s, sg) in enumerate(sels):
        if sg:
            parts.setdefault(("sgn", s >> 2, s & 3), []).append(i)
    out = [(k, w, x, tuple(sorted(bs)), None) for (k, w, x), bs in parts.items()]
    # a shifted group whose top byte is followed, up to byte 3, by that byte's sign fills is
    # one sign extension: (w << (24 - 8 j)) >> (24 - 8 i) (arithmetic)
    for sg in [p for p in out if p[0] == "sgn"]:
        top = sg[3][0] - 1
        if top < 0 or sg[3] != tuple(range(top + 1, 4)):
            continue
        for sh in out:
            if sh[0] == "sh" and sh[1] == sg[1] and sh[3][-1] == top and top - sh[2] // 8 == sg[2]:
                out.remove(sg)
                out.remove(sh)
                out.append(("ext", sh[1], sh[2], sh[3] + sg[3], top))
                break
    return out


def _prmt_live(kind, x, top) -> tuple:
    """Result bytes a part can leave nonzero before its AND."""
    if kind == "sh":
        return tuple(i for i in range(4) if 0 <= i - x // 8 <= 3)
    if kind == "ext":
        return tuple(i for i in range(4) if i > top or i - x // 8 >= 0)
    return (0, 1, 2, 3)


def _prmt_cost(parts) -> int | None:
    cost = len(parts) - 1
    for kind, w, x, bs, top in parts:
        if kind == "rep":
            if len(bs) < 2:
                return None
            cost += (x > 0) + (x < 3) + 1
            continue
        if kind == "sh":
            cost += x != 0
        elif kind == "ext":
            cost += (top - x // 8 < 3) + 1
        else:
            cost += (x < 3) + 1
        cost += bs != _prmt_live(kind, x, top)
    return cost


def _prmt_plan(sels) -> list:
    """The cheapest way to assemble a constant permutation: each result byte comes from a
    shifted copy of its word (bytes moved by the same distance share one shift), a replicated
    byte (one MUL spreads a byte to several places), a sign fill (SAR 31), or a sign extension
    (SHL, SAR); parts are ORed. Every assignment of the plain bytes is costed."""
    n = sum(1 for _, sg in sels if not sg)
    best = None
    for choice in range(1 << n):
        parts = _prmt_parts(sels, choice)
        cost = _prmt_cost(parts)
        if cost is not None and (best is None or cost < best[0]):
            best = (cost, sorted(parts, key=repr))
    return best[1]


def _prmt_const(em, a, b, sels) -> Src:
    words = (src(a), src(b))
    out = None
    for kind, w, x, bs, top in _prmt_plan(sels):
        v = words[w]
        if kind == "rep":
            v = _op(em, "SHR", v, 8 * x)
            if x < 3:
                v = _op(em, "AND", v, 0xFF)
            v = _op(em, "MUL", v, sum(1 << (8 * i) for i in bs))
        else:
            if kind == "sh":
                v = _op(em, "SHL", v, x) if x >= 0 else _op(em, "SHR", v, -x)
            elif kind == "ext":
                v = _op(em, "SAR", _op(em, "SHL", v, 24 - 8 * (top - x // 8)), 24 - 8 * top)
            else:
                v = _op(em, "SAR", _op(em, "SHL", v, 24 - 8 * x), 31)
            if bs != _prmt_live(kind, x, top):
                v = _op(em, "AND", v, _bytes_mask(bs))
        out = v if out is None else _op(em, "OR", out, v)
    return out


def _byterev(em, x) -> Src:
    x = _op(em, "OR", _op(em, "SHL", x, 16), _op(em, "SHR", x, 16))
    return _op(em, "OR", _op(em, "SHL", _op(em, "AND", x, 0x00FF00FF), 8),
               _op(em, "AND", _op(em, "SHR", x, 8), 0x00FF00FF))


@_routine
def prmt(em: Emitter, a, b, c, mode=None) -> Src:
    """PTX prmt.b32{,.f4e,.b4e,.rc8,.ecl,.ecr,.rc16} d, a, b, c.

    An immediate selector c is folded at assembly time (0-9 ops, see _prmt_plan). A register
    selector costs 37 ops in the default mode (each result byte: its word by SEL, moved to the
    top byte by SHL, sign-filled by SAR when bit 3 of its nibble is set) and 5-13 ops in the
    others (only c & 3 counts)."""
    a, b, c = src(a), src(b), src(c)
    kc = _const(c)
    if kc is not None:
        return _prmt_const(em, a, b, _prmt_selectors(kc, mode))
    if mode is None:
        out = None
        for i in range(4):
            nib = _op(em, "SHL", _inv(c), 3) if i == 0 else _op(em, "SHR", _inv(c), 4 * i - 3)
            sh = _op(em, "AND", nib, 24)                             # 8 * (3 - (sel & 3))
            w = _op(em, "SEL", b, a, _op(em, "AND", c, 4 << (4 * i)))
            v = _op(em, "SAR", _op(em, "SHL", w, sh), _op(em, "AND", c, 8 << (4 * i)))
            if i == 0:
                part = _op(em, "SHR", v, 24)
            elif i == 3:
                part = _op(em, "AND", v, 0xFF000000)
            else:
                part = _op(em, "AND", _op(em, "SHR", v, 24 - 8 * i), 0xFF << (8 * i))
            out = part if out is None else _op(em, "OR", out, part)
        return out
    if mode == "rc16":
        h = _op(em, "AND", _op(em, "SHL", c, 4), 16)
        return _op(em, "MUL", _op(em, "AND", _op(em, "SHR", a, h), 0xFFFF), 0x00010001)
    if mode == "b4e":
        # bytes n, n-1, ... of b:a = the byte reversal of bytes n+1 .. n+4 of a:b
        u = _op(em, "AND", _op(em, "SHL", _inv(c), 3), 24)          # 24 - 8n
        win = _op(em, "OR", _op(em, "SHR", b, _op(em, "ADD", _inv(u), 33)), _op(em, "SHL", a, u))
        return _byterev(em, win)
    n8 = _op(em, "AND", _op(em, "SHL", c, 3), 24)                    # 8 * (c & 3)
    if mode == "f4e":
        return _op(em, "OR", _op(em, "SHR", a, n8), _op(em, "SHL", b, _op(em, "ADD", _inv(n8), 33)))
    rep = _op(em, "MUL", _op(em, "AND", _op(em, "SHR", a, n8), 0xFF), 0x01010101)
    if mode == "rc8":
        return rep
    if mode == "ecl":      # bytes below n take byte n
        return _op(em, "XOR", rep, _op(em, "AND", _op(em, "XOR", rep, a), _op(em, "SHL", M32, n8)))
    if mode == "ecr":      # bytes above n take byte n
        return _op(em, "XOR", a, _op(em, "AND", _op(em, "XOR", a, rep), _op(em, "SHL", 0xFFFFFF00, n8)))
    raise ValueError(f"unknown prmt mode {mode}")


# ---------------------------------------------------------------------------------------------
# micro-op counts


def measure(fn, widths, *args, **kw) -> int:
    """Micro-ops `fn(em, *inputs, *args, **kw)` emits for register inputs of the given widths
    (32 or 64); arguments in `args` may be immediates (`src(Imm(v))`)."""
    rec = Recorder()
    em = rec.emitter()
    ins = [(rec.input(), rec.input()) if w == 64 else rec.input() for w in widths]
    fn(em, *ins, *args, **kw)
    return len(rec.ops)


def _costs() -> dict:
    w2, w3 = [32, 32], [32, 32, 32]
    d2 = [64, 64]
    out = {}
    for name in ("div_u32", "rem_u32", "divrem_u32", "div_s32", "rem_s32", "divrem_s32"):
        out[name] = measure(globals()[name], w2)
    for name in ("div_u64", "rem_u64", "divrem_u64", "div_s64", "rem_s64", "divrem_s64",
                 "mulhi_u64", "mulhi_s64", "mullo_u64"):
        out[name] = measure(globals()[name], d2)
    for name in ("shl64", "shr64", "sar64"):
        out[name] = measure(globals()[name], [64, 32])
    for name in ("bfe_u32", "bfe_s32"):
        out[name] = measure(globals()[name], w3)
    for name in ("bfe_u64", "bfe_s64"):
        out[name] = measure(globals()[name], [64, 32, 32])
    out["bfi_b32"] = measure(bfi_b32, [32] * 4)
    out["bfi_b64"] = measure(bfi_b64, [64, 64, 32, 32])
    for mode in PRMT_MODES:
        out["prmt" + ("." + mode if mode else "")] = measure(prmt, w3, mode)
    for left in (True, False):
        for clamp in (False, True):
            out[f"shf.{'l' if left else 'r'}.{'clamp' if clamp else 'wrap'}"] = measure(shf, w3, left, clamp)
    for w in (32, 64):
        for sg in (False, True):
            for sa in (False, True):
                out[f"bfind.{'s' if sg else 'u'}{w}{'.shiftamt' if sa else ''}"] = measure(bfind, [w], w, sg, sa)
            out[f"sad.{'s' if sg else 'u'}{w}"] = measure(sad, [w] * 3, sg)
    for name in ("min64", "max64"):
        for sg in (False, True):
            out[f"{name}.{'s' if sg else 'u'}"] = measure(globals()[name], d2, sg)
    for name in ("abs64", "neg64", "clz64", "popc64", "brev64"):
        out[name] = measure(globals()[name], [64])
    return out


#: routine (with its PTX variant) -> micro-ops emitted for register operands
COST = _costs()
