"""64-bit multiplication, shifts by a register amount, and the small 64-bit operations (abs, min,
max, clz, popc, brev, bfind, sad).
"""
from __future__ import annotations

from qwengpu.machine.uops import M32, Src, src

from ..emit import Emitter
from .folding import add32, add64, add_pair, as_pair, emit_op, inverted, lt64, public_routine, sel64, sub32, sub64

# ---------------------------------------------------------------------------------------------
# 64-bit multiplication


@public_routine
def mullo_u64(em: Emitter, a, b) -> tuple:
    """Low 64 bits of a * b (signed or unsigned alike); 6 ops."""
    a, b = as_pair(a), as_pair(b)
    lo = emit_op(em, "MUL", a[0], b[0])
    hi = add32(em, add32(em, emit_op(em, "MULHU", a[0], b[0]), emit_op(em, "MUL", a[0], b[1])),
              emit_op(em, "MUL", a[1], b[0]))
    return lo, hi


@public_routine
def mulhi_u64(em: Emitter, a, b) -> tuple:
    """High 64 bits of the unsigned 128-bit product a * b; 15 ops.

    a*b = (a1 b) 2^32 + a0 b. M = floor(a0 b / 2^32) = a0 b1 + hi(a0 b0) and
    N = floor(a1 b / 2^32) = a1 b1 + hi(a1 b0) are exact 64-bit sums; the high half is
    N + floor((M + lo(a1 b0)) / 2^32), and the last term's high word cannot overflow.
    """
    a, b = as_pair(a), as_pair(b)
    h00 = emit_op(em, "MULHU", a[0], b[0])
    m = add_pair(em, emit_op(em, "MUL", a[0], b[1]), h00, emit_op(em, "MULHU", a[0], b[1]), 0)
    nn = add_pair(em, emit_op(em, "MUL", a[1], b[1]), emit_op(em, "MULHU", a[1], b[0]),
                   emit_op(em, "MULHU", a[1], b[1]), 0)
    _, k = add_pair(em, m[0], emit_op(em, "MUL", a[1], b[0]), m[1], 0)
    return add_pair(em, nn[0], k, nn[1], 0)


@public_routine
def mulhi_s64(em: Emitter, a, b) -> tuple:
    """High 64 bits of the signed 128-bit product: the unsigned one minus (a<0 ? b : 0) and
    (b<0 ? a : 0), modulo 2^64; 25 ops."""
    a, b = as_pair(a), as_pair(b)
    h = mulhi_u64(em, a, b)
    sa = emit_op(em, "SAR", a[1], 31)
    sb = emit_op(em, "SAR", b[1], 31)
    h = sub64(em, h, (emit_op(em, "AND", b[0], sa), emit_op(em, "AND", b[1], sa)))
    return sub64(em, h, (emit_op(em, "AND", a[0], sb), emit_op(em, "AND", a[1], sb)))




def abs_and_sign64(em, a) -> tuple:
    """(|a| as unsigned, sign mask of a)."""
    a = as_pair(a)
    s = emit_op(em, "SAR", a[1], 31)
    return cond_neg64(em, a, s), s


def cond_neg64(em, x, m) -> tuple:
    """m ? -x : x for a mask m in {0, -1}."""
    x = as_pair(x)
    return add_pair(em, emit_op(em, "XOR", x[0], m), inverted(m), emit_op(em, "XOR", x[1], m), inverted(m), cin0="1")


# ---------------------------------------------------------------------------------------------
# 64-bit shifts by a register amount (the full 32-bit value counts: >= 64 gives 0 / the sign)


@public_routine
def shl64(em: Emitter, a, n) -> tuple:
    """a << n; 8 ops. Amounts past 31 make the 32-bit shifts give 0, so each term vanishes
    outside its range: hi = a1 << n | a0 >> (32 - n) | a0 << (n - 32)."""
    n = src(n)
    return shl64_amounts(em, as_pair(a), n, emit_op(em, "ADD", inverted(n), 33), add32(em, n, -32 & M32))


def shl64_amounts(em, a, n, up, dn) -> tuple:
    """shl64 with the amounts 32 - n and n - 32 given."""
    hi = emit_op(em, "OR", emit_op(em, "OR", emit_op(em, "SHL", a[1], n), emit_op(em, "SHR", a[0], up)),
             emit_op(em, "SHL", a[0], dn))
    return emit_op(em, "SHL", a[0], n), hi


@public_routine
def shr64(em: Emitter, a, n) -> tuple:
    """a >> n (logical); 8 ops."""
    a, n = as_pair(a), src(n)
    up, dn = emit_op(em, "ADD", inverted(n), 33), add32(em, n, -32 & M32)
    lo = emit_op(em, "OR", emit_op(em, "OR", emit_op(em, "SHR", a[0], n), emit_op(em, "SHL", a[1], up)),
             emit_op(em, "SHR", a[1], dn))
    return lo, emit_op(em, "SHR", a[1], n)


@public_routine
def sar64(em: Emitter, a, n) -> tuple:
    """a >> n (arithmetic, amounts >= 64 give the sign); 9 ops."""
    a, n = as_pair(a), src(n)
    up, dn = emit_op(em, "ADD", inverted(n), 33), add32(em, n, -32 & M32)
    small = emit_op(em, "OR", emit_op(em, "SHR", a[0], n), emit_op(em, "SHL", a[1], up))   # n < 32
    lo = emit_op(em, "SEL", emit_op(em, "SAR", a[1], dn), small, emit_op(em, "SHR", n, 5))
    return lo, emit_op(em, "SAR", a[1], n)


# ---------------------------------------------------------------------------------------------
# small 64-bit operations


@public_routine
def abs64(em: Emitter, a) -> tuple:
    """|a| (abs(INT64_MIN) = INT64_MIN); 5 ops."""
    return abs_and_sign64(em, a)[0]


@public_routine
def min64(em: Emitter, a, b, signed: bool) -> tuple:
    """min(a, b); 6 ops."""
    return sel64(em, lt64(em, a, b, signed), a, b)


@public_routine
def max64(em: Emitter, a, b, signed: bool) -> tuple:
    """max(a, b); 6 ops."""
    return sel64(em, lt64(em, a, b, signed), b, a)


@public_routine
def clz64(em: Emitter, a) -> Src:
    """Leading zeros of a 64-bit value (64 for 0); 4 ops."""
    a = as_pair(a)
    return emit_op(em, "SEL", emit_op(em, "CLZ", a[1]), add32(em, emit_op(em, "CLZ", a[0]), 32), a[1])


@public_routine
def popc64(em: Emitter, a) -> Src:
    a = as_pair(a)
    return add32(em, emit_op(em, "POPC", a[0]), emit_op(em, "POPC", a[1]))


@public_routine
def brev64(em: Emitter, a) -> tuple:
    a = as_pair(a)
    return emit_op(em, "BREV", a[1]), emit_op(em, "BREV", a[0])


@public_routine
def bfind(em: Emitter, a, width: int = 32, signed: bool = False, shiftamt: bool = False) -> Src:
    """PTX bfind: the position of the most significant 1 (of the most significant 0 for negative
    signed values), counted from the msb with .shiftamt; 0xFFFFFFFF when there is none.
    32-bit: 2 ops (+2 signed); 64-bit: 5 ops (+3 signed)."""
    if width == 64:
        x = as_pair(a)
        if signed:
            s = emit_op(em, "SAR", x[1], 31)
            x = (emit_op(em, "XOR", x[0], s), emit_op(em, "XOR", x[1], s))
        c1, c0 = emit_op(em, "CLZ", x[1]), emit_op(em, "CLZ", x[0])
        if shiftamt:
            return emit_op(em, "SEL", c1, emit_op(em, "SEL", add32(em, c0, 32), M32, x[0]), x[1])
        # 31 - clz: the -1 of a zero word comes out by itself (31 - 32)
        return emit_op(em, "SEL", emit_op(em, "ADD", inverted(c1), 64), emit_op(em, "ADD", inverted(c0), 32), x[1])
    x = src(a)
    if signed:
        x = emit_op(em, "XOR", x, emit_op(em, "SAR", x, 31))
    c = emit_op(em, "CLZ", x)
    if shiftamt:
        return emit_op(em, "SEL", c, M32, x)
    return emit_op(em, "ADD", inverted(c), 32)


@public_routine
def sad(em: Emitter, a, b, c, signed: bool = False):
    """c + |a - b| (32-bit: Src operands, 5 ops; 64-bit: pairs, 12 ops)."""
    if isinstance(a, tuple):
        a, b, c = as_pair(a), as_pair(b), as_pair(c)
        lt = lt64(em, a, b, signed)
        d = sel64(em, lt, sub64(em, b, a), sub64(em, a, b))
        return add64(em, c, d)
    lt = emit_op(em, "LT" if signed else "LTU", a, b)
    return add32(em, c, emit_op(em, "SEL", sub32(em, b, a), sub32(em, a, b), lt))
