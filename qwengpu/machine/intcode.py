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

from .emit import Emitter, Recorder
from .isa import M32, Imm, Src, alu_eval, src

__all__ = ["div_u32", "div_s32", "rem_u32", "rem_s32", "divrem_u32", "divrem_s32"]

# ---------------------------------------------------------------------------------------------
# emission helpers: constant folding and trivial identities


def _const(x) -> int | None:
    """The value of an immediate operand (inversion applied), else None."""
    x = src(x)
    if isinstance(x.value, Imm):
        v = x.value.value
        return (~v & M32) if x.inv else v
    return None


def _op(em: Emitter, op: str, a, b=None, c=None, cin: str = "0") -> Src:
    """Emit one ALU op (no carry flag out), folding constants and trivial identities."""
    a = src(a)
    b = None if b is None else src(b)
    c = None if c is None else src(c)
    ka = _const(a)
    kb = None if b is None else _const(b)
    kc = None if c is None else _const(c)
    if cin != "flag" and ka is not None and (b is None or kb is not None) and (c is None or kc is not None):
        r, _ = alu_eval(op, ka, kb or 0, kc or 0, int(cin))
        return src(Imm(r))
    zero = src(Imm(0))
    if op == "MOV":
        return a
    if op == "ADD" and cin == "0":
        if kb == 0:
            return a
        if ka == 0:
            return b
    elif op == "AND":
        if ka == 0 or kb == 0:
            return zero
        if ka == M32:
            return b
        if kb == M32 or a == b:
            return a
    elif op == "OR":
        if ka == M32 or kb == M32:
            return src(Imm(M32))
        if ka == 0:
            return b
        if kb == 0 or a == b:
            return a
    elif op == "XOR":
        if ka == 0:
            return b
        if kb == 0:
            return a
        if a == b:
            return zero
    elif op in ("SHL", "SHR"):
        if kb == 0:
            return a
        if ka == 0 or (kb is not None and kb >= 32):
            return zero
    elif op == "SAR":
        if kb == 0 or ka in (0, M32):
            return a
    elif op == "SEL":
        if kc is not None:
            return a if kc else b
        if a == b:
            return a
    elif op == "MUL":
        if ka == 0 or kb == 0:
            return zero
        if kb == 1:
            return a
        if ka == 1:
            return b
    elif op in ("MULHU", "MULHS"):
        if ka == 0 or kb == 0:
            return zero
        if op == "MULHU" and (ka == 1 or kb == 1):
            return zero
    return em.alu(op, a, b, c, cin=cin)


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


def add64(em, a, b) -> tuple:
    a, b = _p(a), _p(b)
    return _add_pair(em, a[0], b[0], a[1], b[1])


def sub64(em, a, b) -> tuple:
    a, b = _p(a), _p(b)
    return _add_pair(em, a[0], _inv(b[0]), a[1], _inv(b[1]), cin0="1")


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
# d = b << clz(b) is the normalised divisor (2^31 <= d < 2^32). _recip32 returns y with
# Yc = 2^32 + y approximating T = 2^64 / d from below:  T - 8 < Yc - 1 <= T, and
# T - 2 <= Yc - 1 at d = 2^31, T - 4 <= Yc - 1 at d = 3*2^30 (proved in docs/intcode.md:
# the bound of the Newton step, checked exhaustively over all 2^31 values of d), and
# Yc <= T + 1.
# The quotient estimate q0 = floor(a * Yc / 2^(64 - s)) then satisfies q - 1 <= q0 <= q.

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


def _udiv32(em: Emitter, a, b) -> tuple:
    """(q0, r0, c): q0 = a/b or a/b - 1, r0 = a - q0 b, c = (r0 >= b); q = q0 + c. 26 ops."""
    a, b = src(a), src(b)
    s = _op(em, "CLZ", b)
    d = _op(em, "SHL", b, s)
    y = _recip32(em, d)
    n = _op(em, "XOR", s, 31)                         # 31 - s (s = 32 for b = 0: 63)
    t = _op(em, "MULHU", a, y)
    h = _add(em, _op(em, "SHR", _sub(em, a, t), 1), t)  # floor((a + t) / 2), no overflow
    q0 = _op(em, "SHR", h, n)
    r0 = _sub(em, a, _op(em, "MUL", q0, b))
    c = _op(em, "LEU", b, r0)
    return q0, r0, c


def div_u32(em: Emitter, a, b) -> Src:
    q0, r0, c = _udiv32(em, a, b)
    return _op(em, "SEL", _add(em, q0, c), M32, b)    # x / 0 = all ones


def rem_u32(em: Emitter, a, b) -> Src:
    q0, r0, c = _udiv32(em, a, b)
    return _op(em, "SEL", _sub(em, r0, b), r0, c)     # x % 0 = x (q0 * 0 = 0, c = 1)


def divrem_u32(em: Emitter, a, b) -> tuple:
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


def div_s32(em: Emitter, a, b) -> Src:
    ua, sa = _abs32(em, a)
    ub, sb = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    q = _cneg(em, _add(em, q0, c), _op(em, "XOR", sa, sb))
    return _op(em, "SEL", q, M32, b)                  # x / 0 = -1; INT_MIN / -1 wraps


def rem_s32(em: Emitter, a, b) -> Src:
    ua, sa = _abs32(em, a)
    ub, _ = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    return _cneg(em, _op(em, "SEL", _sub(em, r0, ub), r0, c), sa)


def divrem_s32(em: Emitter, a, b) -> tuple:
    ua, sa = _abs32(em, a)
    ub, sb = _abs32(em, b)
    q0, r0, c = _udiv32(em, ua, ub)
    q = _cneg(em, _add(em, q0, c), _op(em, "XOR", sa, sb))
    return (_op(em, "SEL", q, M32, b),
            _cneg(em, _op(em, "SEL", _sub(em, r0, ub), r0, c), sa))
