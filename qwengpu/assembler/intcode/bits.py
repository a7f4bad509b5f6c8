"""Bit-field routines (bfe, bfi), the funnel shift (shf) and the byte permute (prmt, its plans and
costs), 32- and 64-bit.
"""
from __future__ import annotations

from qwengpu.machine.uops import M32, Imm, Src, src
from qwengpu.semantics.integers import prmt_selectors

from ..emit import Emitter
from .folding import add32, as_pair, const_value, emit_op, inverted, public_routine
from .wide import sar64, shl64_amounts, shr64

# ---------------------------------------------------------------------------------------------
# bit fields (position and length: their low 8 bits count, as in alu.bfe / alu.bfi)


def _bfe32_k(em, a, p: int, ln: int, signed: bool) -> Src:
    """Immediate position and length: 0-2 ops."""
    p, ln = p & 0xFF, ln & 0xFF
    if ln == 0:
        return src(Imm(0))
    if p + ln >= 32:
        return emit_op(em, "SAR" if signed else "SHR", a, min(p, 31) if signed else p)
    return emit_op(em, "SAR" if signed else "SHR", emit_op(em, "SHL", a, 32 - p - ln), 32 - ln)


@public_routine
def bfe_u32(em: Emitter, a, pos, length) -> Src:
    """(a >> pos) & ((1 << len) - 1), shifts past 31 giving 0 and lengths past 31 all ones; 5 ops."""
    if const_value(pos) is not None and const_value(length) is not None:
        return _bfe32_k(em, a, const_value(pos), const_value(length), False)
    p = emit_op(em, "AND", pos, 0xFF)
    ln = emit_op(em, "AND", length, 0xFF)
    return emit_op(em, "AND", emit_op(em, "SHR", a, p), inverted(emit_op(em, "SHL", M32, ln)))


@public_routine
def bfe_s32(em: Emitter, a, pos, length) -> Src:
    """The field sign-extended: x = a >> pos (arithmetic) already carries the right sign bits
    beyond a's msb; below 32 bits it is sign-extended from bit len - 1. len = 0 gives 0 by
    itself (shifts by 32); 8 ops."""
    if const_value(pos) is not None and const_value(length) is not None:
        return _bfe32_k(em, a, const_value(pos), const_value(length), True)
    x = emit_op(em, "SAR", a, emit_op(em, "AND", pos, 0xFF))
    m = emit_op(em, "ADD", inverted(emit_op(em, "AND", length, 0xFF)), 33)      # 32 - len
    ext = emit_op(em, "SAR", emit_op(em, "SHL", x, m), m)
    return emit_op(em, "SEL", x, ext, emit_op(em, "AND", length, 0xE0))     # len >= 32: x


@public_routine
def bfi_b32(em: Emitter, a, b, pos, length) -> Src:
    """b with its bits [pos, pos + len) replaced by the low bits of a; 8 ops."""
    p = emit_op(em, "AND", pos, 0xFF)
    ln = emit_op(em, "AND", length, 0xFF)
    mask = emit_op(em, "SHL", inverted(emit_op(em, "SHL", M32, ln)), p)
    b = src(b)
    return emit_op(em, "XOR", b, emit_op(em, "AND", emit_op(em, "XOR", b, emit_op(em, "SHL", a, p)), mask))


def _lowmask64(em, ln) -> tuple:
    """64-bit mask of the low `ln` bits (ln <= 255); 5 ops."""
    lo = inverted(emit_op(em, "SHL", M32, ln))
    hi = emit_op(em, "SEL", inverted(emit_op(em, "SHL", M32, add32(em, ln, -32 & M32))), 0, emit_op(em, "SHR", ln, 5))
    return lo, hi


@public_routine
def bfe_u64(em: Emitter, a, pos, length) -> tuple:
    """17 ops."""
    p = emit_op(em, "AND", pos, 0xFF)
    ln = emit_op(em, "AND", length, 0xFF)
    x = shr64(em, a, p)
    m = _lowmask64(em, ln)
    return emit_op(em, "AND", x[0], m[0]), emit_op(em, "AND", x[1], m[1])


@public_routine
def bfe_s64(em: Emitter, a, pos, length) -> tuple:
    """x = a >> pos (arithmetic), then sign-extended from bit len - 1 when len < 64; 23 ops."""
    p = emit_op(em, "AND", pos, 0xFF)
    ln = emit_op(em, "AND", length, 0xFF)
    x = sar64(em, a, p)
    m1 = emit_op(em, "ADD", inverted(ln), 33)                                # 32 - len
    lo_s = emit_op(em, "SAR", emit_op(em, "SHL", x[0], m1), m1)              # len <= 32
    m2 = emit_op(em, "ADD", inverted(ln), 65)                                # 64 - len
    hi_b = emit_op(em, "SAR", emit_op(em, "SHL", x[1], m2), m2)              # 32 <= len <= 64
    big = emit_op(em, "LTU", 32, ln)                                     # len > 32
    hi = emit_op(em, "SEL", emit_op(em, "SEL", x[1], hi_b, emit_op(em, "LTU", 64, ln)),
             emit_op(em, "SAR", lo_s, 31), big)
    return emit_op(em, "SEL", x[0], lo_s, big), hi


@public_routine
def bfi_b64(em: Emitter, a, b, pos, length) -> tuple:
    """b ^ ((b ^ (a << pos)) & (lowmask(len) << pos)); 27 ops."""
    p = emit_op(em, "AND", pos, 0xFF)
    ln = emit_op(em, "AND", length, 0xFF)
    a, b = as_pair(a), as_pair(b)
    up, dn = emit_op(em, "ADD", inverted(p), 33), add32(em, p, -32 & M32)
    ap = shl64_amounts(em, a, p, up, dn)
    mask = shl64_amounts(em, _lowmask64(em, ln), p, up, dn)
    return tuple(emit_op(em, "XOR", b[i], emit_op(em, "AND", emit_op(em, "XOR", b[i], ap[i]), mask[i]))
                 for i in range(2))


# ---------------------------------------------------------------------------------------------
# funnel shift


@public_routine
def shf(em: Emitter, a, b, n, left: bool, clamp: bool) -> Src:
    """PTX shf.{l,r}.{wrap,clamp}: 32 bits of the 64-bit b:a shifted by n (wrap: n & 31,
    clamp: min(n, 32)); 5 ops (wrap) / 6 (clamp); 3 or fewer for an immediate n."""
    a, b, n = src(a), src(b), src(n)
    k = emit_op(em, "AND", n, 31) if not clamp else emit_op(em, "SEL", n, 32, emit_op(em, "LTU", n, 32))
    up = emit_op(em, "ADD", inverted(k), 33)                                 # 32 - k (k = 0: 32)
    if left:
        return emit_op(em, "OR", emit_op(em, "SHL", b, k), emit_op(em, "SHR", a, up))
    return emit_op(em, "OR", emit_op(em, "SHR", a, k), emit_op(em, "SHL", b, up))


# ---------------------------------------------------------------------------------------------
# byte permute

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
            v = emit_op(em, "SHR", v, 8 * x)
            if x < 3:
                v = emit_op(em, "AND", v, 0xFF)
            v = emit_op(em, "MUL", v, sum(1 << (8 * i) for i in bs))
        else:
            if kind == "sh":
                v = emit_op(em, "SHL", v, x) if x >= 0 else emit_op(em, "SHR", v, -x)
            elif kind == "ext":
                v = emit_op(em, "SAR", emit_op(em, "SHL", v, 24 - 8 * (top - x // 8)), 24 - 8 * top)
            else:
                v = emit_op(em, "SAR", emit_op(em, "SHL", v, 24 - 8 * x), 31)
            if bs != _prmt_live(kind, x, top):
                v = emit_op(em, "AND", v, _bytes_mask(bs))
        out = v if out is None else emit_op(em, "OR", out, v)
    return out


def _byterev(em, x) -> Src:
    x = emit_op(em, "OR", emit_op(em, "SHL", x, 16), emit_op(em, "SHR", x, 16))
    return emit_op(em, "OR", emit_op(em, "SHL", emit_op(em, "AND", x, 0x00FF00FF), 8),
               emit_op(em, "AND", emit_op(em, "SHR", x, 8), 0x00FF00FF))


@public_routine
def prmt(em: Emitter, a, b, c, mode=None) -> Src:
    """PTX prmt.b32{,.f4e,.b4e,.rc8,.ecl,.ecr,.rc16} d, a, b, c.

    An immediate selector c is folded at assembly time (0-9 ops, see _prmt_plan). A register
    selector costs 37 ops in the default mode (each result byte: its word by SEL, moved to the
    top byte by SHL, sign-filled by SAR when bit 3 of its nibble is set) and 5-13 ops in the
    others (only c & 3 counts)."""
    a, b, c = src(a), src(b), src(c)
    kc = const_value(c)
    if kc is not None:
        return _prmt_const(em, a, b, prmt_selectors(kc, mode))
    if mode is None:
        out = None
        for i in range(4):
            nib = emit_op(em, "SHL", inverted(c), 3) if i == 0 else emit_op(em, "SHR", inverted(c), 4 * i - 3)
            sh = emit_op(em, "AND", nib, 24)                             # 8 * (3 - (sel & 3))
            w = emit_op(em, "SEL", b, a, emit_op(em, "AND", c, 4 << (4 * i)))
            v = emit_op(em, "SAR", emit_op(em, "SHL", w, sh), emit_op(em, "AND", c, 8 << (4 * i)))
            if i == 0:
                part = emit_op(em, "SHR", v, 24)
            elif i == 3:
                part = emit_op(em, "AND", v, 0xFF000000)
            else:
                part = emit_op(em, "AND", emit_op(em, "SHR", v, 24 - 8 * i), 0xFF << (8 * i))
            out = part if out is None else emit_op(em, "OR", out, part)
        return out
    if mode == "rc16":
        h = emit_op(em, "AND", emit_op(em, "SHL", c, 4), 16)
        return emit_op(em, "MUL", emit_op(em, "AND", emit_op(em, "SHR", a, h), 0xFFFF), 0x00010001)
    if mode == "b4e":
        # bytes n, n-1, ... of b:a = the byte reversal of bytes n+1 .. n+4 of a:b
        u = emit_op(em, "AND", emit_op(em, "SHL", inverted(c), 3), 24)          # 24 - 8n
        win = emit_op(em, "OR", emit_op(em, "SHR", b, emit_op(em, "ADD", inverted(u), 33)), emit_op(em, "SHL", a, u))
        return _byterev(em, win)
    n8 = emit_op(em, "AND", emit_op(em, "SHL", c, 3), 24)                    # 8 * (c & 3)
    if mode == "f4e":
        return emit_op(em, "OR", emit_op(em, "SHR", a, n8), emit_op(em, "SHL", b, emit_op(em, "ADD", inverted(n8), 33)))
    rep = emit_op(em, "MUL", emit_op(em, "AND", emit_op(em, "SHR", a, n8), 0xFF), 0x01010101)
    if mode == "rc8":
        return rep
    if mode == "ecl":      # bytes below n take byte n
        return emit_op(em, "XOR", rep, emit_op(em, "AND", emit_op(em, "XOR", rep, a), emit_op(em, "SHL", M32, n8)))
    if mode == "ecr":      # bytes above n take byte n
        return emit_op(em, "XOR", a, emit_op(em, "AND", emit_op(em, "XOR", a, rep), emit_op(em, "SHL", 0xFFFFFF00, n8)))
    raise ValueError(f"unknown prmt mode {mode}")
