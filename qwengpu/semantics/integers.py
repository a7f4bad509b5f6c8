"""Integer semantics of PTX, one lane at a time on Python ints (raw bit patterns).

Every function takes and returns unsigned bit patterns of the operation's width; signed
interpretation happens inside. Results are masked to the width.

Division by zero (PTX leaves it machine-specific) is defined here as NVIDIA GPUs compute it:
unsigned x/0 = all ones, x%0 = x; signed x/0 = -1, x%0 = x. INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0.
"""
from __future__ import annotations


def mask(w: int) -> int:
    return (1 << w) - 1


def sx(v: int, w: int) -> int:
    """Bit pattern -> signed value."""
    v &= mask(w)
    return v - (1 << w) if v >> (w - 1) else v


def wrap(v: int, w: int) -> int:
    return v & mask(w)


def add(a, b, w, signed=False, sat=False):
    if sat:   # add.sat.s32: clamp to the signed range
        r = sx(a, w) + sx(b, w)
        return wrap(max(-(1 << (w - 1)), min((1 << (w - 1)) - 1, r)), w)
    return wrap(a + b, w)


def sub(a, b, w, signed=False, sat=False):
    if sat:
        r = sx(a, w) - sx(b, w)
        return wrap(max(-(1 << (w - 1)), min((1 << (w - 1)) - 1, r)), w)
    return wrap(a - b, w)


def mul(a, b, w, signed, mode):
    x, y = (sx(a, w), sx(b, w)) if signed else (a & mask(w), b & mask(w))
    p = x * y
    if mode == "lo":
        return wrap(p, w)
    if mode == "hi":
        return wrap(p >> w, w)
    return wrap(p, 2 * w)          # wide


def mul24(a, b, signed, mode):
    x, y = (sx(a, 24), sx(b, 24)) if signed else (a & mask(24), b & mask(24))
    p = x * y                      # 48-bit product
    if mode == "lo":
        return wrap(p, 32)
    return wrap(p >> 16, 32)       # hi: bits 47..16


def div(a, b, w, signed):
    if signed:
        x, y = sx(a, w), sx(b, w)
        if y == 0:
            return mask(w)         # -1
        q = abs(x) // abs(y)
        if (x < 0) != (y < 0):
            q = -q
        return wrap(q, w)
    x, y = a & mask(w), b & mask(w)
    if y == 0:
        return mask(w)
    return x // y


def rem(a, b, w, signed):
    if signed:
        x, y = sx(a, w), sx(b, w)
        if y == 0:
            return wrap(x, w)
        r = abs(x) % abs(y)
        return wrap(-r if x < 0 else r, w)
    x, y = a & mask(w), b & mask(w)
    if y == 0:
        return x
    return x % y


def absolute(a, w):
    return wrap(abs(sx(a, w)), w)     # abs(INT_MIN) = INT_MIN


def neg(a, w):
    return wrap(-a, w)


def minimum(a, b, w, signed):
    return min(a & mask(w), b & mask(w), key=(lambda v: sx(v, w)) if signed else None)


def maximum(a, b, w, signed):
    return max(a & mask(w), b & mask(w), key=(lambda v: sx(v, w)) if signed else None)


def sad(a, b, c, w, signed):
    x, y = (sx(a, w), sx(b, w)) if signed else (a & mask(w), b & mask(w))
    return wrap(c + abs(x - y), w)


def shl(a, n, w):
    n &= 0xFFFFFFFF
    return 0 if n >= w else wrap(a << n, w)


def shr(a, n, w, signed):
    n &= 0xFFFFFFFF
    if signed:
        x = sx(a, w)
        return wrap(x >> min(n, w - 1), w)
    return 0 if n >= w else (a & mask(w)) >> n


def shf(a, b, n, left, clamp):
    """Funnel shift of the 64-bit value b:a (b high) by n; returns 32 bits."""
    n &= 0xFFFFFFFF
    n = min(n, 32) if clamp else n & 31
    v = ((b & 0xFFFFFFFF) << 32) | (a & 0xFFFFFFFF)
    if left:
        return ((v << n) >> 32) & 0xFFFFFFFF
    return (v >> n) & 0xFFFFFFFF


def popc(a, w):
    return bin(a & mask(w)).count("1")


def clz(a, w):
    a &= mask(w)
    return w - a.bit_length()


def brev(a, w):
    a &= mask(w)
    return int(format(a, f"0{w}b")[::-1], 2)


def bfind(a, w, signed, shiftamt):
    a &= mask(w)
    if signed and a >> (w - 1):
        a = ~a & mask(w)           # for negative values: the most significant 0 bit
    if a == 0:
        return 0xFFFFFFFF
    pos = a.bit_length() - 1
    return (w - 1 - pos) if shiftamt else pos


def bfe(a, pos, length, w, signed):
    pos &= 0xFF
    length &= 0xFF
    a &= mask(w)
    if length == 0:
        return 0
    if signed:
        # sign bit: the msb of the field, or of the source if the field runs past it
        sbit_pos = min(pos + length - 1, w - 1)
        sbit = (a >> sbit_pos) & 1 if pos < w else (a >> (w - 1)) & 1
    else:
        sbit = 0
    out = 0
    for i in range(w):
        if i < length and pos + i <= w - 1:
            bit = (a >> (pos + i)) & 1
        else:
            bit = sbit
        out |= bit << i
    return out


def bfi(a, b, pos, length, w):
    """Insert the low `length` bits of a into b at `pos`."""
    pos &= 0xFF
    length &= 0xFF
    out = b & mask(w)
    for i in range(length):
        if pos + i >= w:
            break
        bit = (a >> i) & 1
        out = (out & ~(1 << (pos + i))) | (bit << (pos + i))
    return out


#: prmt's modes (None: the default, a selector nibble per result byte)
PRMT_MODES = (None, "f4e", "b4e", "rc8", "ecl", "ecr", "rc16")


def prmt_selectors(c: int, mode) -> list[tuple[int, bool]]:
    """[(source byte 0..7 of b:a, sign-replicate)] for prmt's 4 result bytes: the default mode's
    selector nibbles (bit 3: replicate the selected byte's sign), or a mode's pattern from c & 3."""
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


def prmt(a, b, c, mode):
    a &= 0xFFFFFFFF
    b &= 0xFFFFFFFF
    src = a | (b << 32)
    bytes_ = [(src >> (8 * i)) & 0xFF for i in range(8)]
    out = 0
    for i, (s, replicate) in enumerate(prmt_selectors(c, mode)):
        byte = bytes_[s]
        if replicate:              # the selected byte's msb, replicated
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


def lop3(a, b, c, imm):
    out = 0
    for i in range(32):
        idx = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1)
        out |= ((imm >> idx) & 1) << i
    return out


def dp4a(a, b, c, a_signed, b_signed):
    acc = sx(c, 32) if (a_signed or b_signed) else c
    for i in range(4):
        x = (a >> (8 * i)) & 0xFF
        y = (b >> (8 * i)) & 0xFF
        if a_signed:
            x = sx(x, 8)
        if b_signed:
            y = sx(y, 8)
        acc += x * y
    return wrap(acc, 32)


def dp2a(a, b, c, a_signed, b_signed, hi):
    acc = sx(c, 32) if (a_signed or b_signed) else c
    for i in range(2):
        x = (a >> (16 * i)) & 0xFFFF
        y = (b >> (8 * (i + (2 if hi else 0)))) & 0xFF
        if a_signed:
            x = sx(x, 16)
        if b_signed:
            y = sx(y, 8)
        acc += x * y
    return wrap(acc, 32)


def compare(cmp: str, a: int, b: int, w: int, signed: bool) -> bool:
    if signed:
        x, y = sx(a, w), sx(b, w)
    else:
        x, y = a & mask(w), b & mask(w)
    if cmp in ("lo",):
        x, y, cmp = a & mask(w), b & mask(w), "lt"
    elif cmp == "ls":
        x, y, cmp = a & mask(w), b & mask(w), "le"
    elif cmp == "hi":
        x, y, cmp = a & mask(w), b & mask(w), "gt"
    elif cmp == "hs":
        x, y, cmp = a & mask(w), b & mask(w), "ge"
    return {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[cmp]


def extend(v: int, from_w: int, to_w: int, signed: bool) -> int:
    """Sign- or zero-extend (or truncate) a bit pattern."""
    if to_w <= from_w:
        return v & mask(to_w)
    return wrap(sx(v, from_w), to_w) if signed else v & mask(from_w)
