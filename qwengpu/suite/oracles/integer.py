"""Oracles of the integer kernels: arithmetic, division, min/max, bit operations, shifts, byte
permutes, bit fields, 8/16/64-bit types."""
from __future__ import annotations

from .common import M32, cdiv, crem, ints, oracle, s32, s64, u32, u64


@oracle("dot", tags={"atomics", "int", "ci"}, about="4 lanes: atomicAdd of a[i]*b[i] into out[0] (the demo; 32)")
def dot(a, b, out):
    out = out.copy()
    out[0] = s32(int(out[0]) + sum(x * y for x, y in zip(ints(a), ints(b))))
    return [a, b, out]


@oracle("int_arith", tags={"int", "ci"}, about="u32 add/sub/mul.lo/mad/neg with wrap-around, 2 blocks of 4")
def int_arith(a, b, c, out):
    out = out.copy()
    for i, (x, y, z) in enumerate(zip(ints(a), ints(b), ints(c))):
        out[6 * i:6 * i + 6] = [u32(x + y), u32(x - y), u32(x * y), u32(x * y + z), u32(-x),
                                u32(u32((x + 12345) * 7) - (y << 3))]
    return [a, b, c, out]


@oracle("int_divrem", tags={"int", "ci"}, about="signed/unsigned div and rem with negative operands, constant divisors")
def int_divrem(a, b, sout, uout):
    sout, uout = sout.copy(), uout.copy()
    for i, (x, y) in enumerate(zip(ints(a), ints(b))):
        sout[4 * i:4 * i + 4] = [cdiv(x, y), crem(x, y), cdiv(x, 7), crem(x, -3)]
        ux, uy = u32(x), u32(y)
        uout[4 * i:4 * i + 4] = [ux // uy, ux % uy, ux // 10, ux % 10]
    return [a, b, sout, uout]


def _sext(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@oracle("int_mulhi", tags={"int", "int64"}, about="__mulhi/__umulhi, mul.wide.s32/u32, __mul24/__umul24, __mul64hi/__umul64hi")
def int_mulhi(a, b, o32, o64):
    o32, o64 = o32.copy(), o64.copy()
    for i, (x, y) in enumerate(zip(ints(a), ints(b))):
        ux, uy = u32(x), u32(y)
        o32[6 * i:6 * i + 6] = [s32((x * y) >> 32), s32((ux * uy) >> 32), s32(_sext(x, 24) * _sext(y, 24)),
                                s32((ux & 0xFFFFFF) * (uy & 0xFFFFFF)), s32((ux * uy) >> 32), s32((x * y) >> 16)]
        X = s64(x * 0x10001 + y)
        Y = s64(y * 0x7FFF3 - x)
        hi_s = s64((X * Y) >> 64)
        hi_u = u64((u64(X) * u64(Y)) >> 64)
        o64[3 * i:3 * i + 3] = [x * y, ux * uy, s64(hi_s ^ hi_u)]
    return [a, b, o32, o64]


@oracle("int_minmax", tags={"int", "int64", "ci"}, about="signed/unsigned min/max, abs, neg, 64-bit min/max/llabs")
def int_minmax(a, b, out, o64):
    out, o64 = out.copy(), o64.copy()
    for i, (x, y) in enumerate(zip(ints(a), ints(b))):
        out[6 * i:6 * i + 6] = [min(x, y), max(x, y), s32(min(u32(x), u32(y))), s32(max(u32(x), u32(y))),
                                abs(x), -y]
        X, Y = x * 3, y * 4
        o64[2 * i:2 * i + 2] = [min(X, Y) + abs(X - Y), s64(max(u64(X), u64(Y)))]
    return [a, b, out, o64]


@oracle("bitwise", tags={"bits", "int", "ci"}, about="and/or/xor/not/and-not/bitwise select, 32 and 64 bit")
def bitwise(a, b, m, out):
    out = out.copy()
    for i, (x, y, s) in enumerate(zip(ints(a), ints(b), ints(m))):
        X = (x << 32) | y
        Y = (s << 32) | u32(~y)
        r = u64((X ^ Y) | (~X & 0x00FF00FF00FF00FF))
        out[8 * i:8 * i + 8] = [x & y, x | y, x ^ y, u32(~x), x & u32(~y), (x & s) | (y & u32(~s)), r & M32, r >> 32]
    return [a, b, m, out]


@oracle("shifts", tags={"bits", "int", "int64"}, about="constant/variable/masked shifts, explicit >=32 clamps, 64-bit shifts")
def shifts(a, n, out, o64):
    out, o64 = out.copy(), o64.copy()
    for i, (x, c) in enumerate(zip(ints(a), ints(n))):
        s = s32(x)
        m = c & 31
        out[8 * i:8 * i + 8] = [u32(x << 7), x >> 9, u32(s >> 9), u32(x << m), x >> m, u32(s >> m),
                                0 if c >= 32 else u32(x << c), u32(s >> 31 if c >= 32 else s >> c)]
        X = (x << 32) | (x ^ 0x5A5A5A5A)
        m6 = c & 63
        o64[3 * i:3 * i + 3] = [u64(X << m6), X >> m6, u64(s64(X) >> m6)]
    return [a, n, out, o64]


@oracle("shift_clamp", tags={"asm", "bits", "int"}, about="inline-PTX shl/shr.u/shr.s with counts >= 32 (PTX clamps)")
def shift_clamp(a, n, out):
    out = out.copy()
    for i, (x, c) in enumerate(zip(ints(a), ints(n))):
        k = min(c, 32)
        out[3 * i:3 * i + 3] = [u32(x << k), x >> k, u32(s32(x) >> k)]
    return [a, n, out]


@oracle("funnel_shift", tags={"bits", "int", "ci"}, about="__funnelshift_l/r (count mod 32) and _lc/_rc (count clamped to 32)")
def funnel_shift(lo, hi, n, out):
    out = out.copy()
    for i, (l, h, c) in enumerate(zip(ints(lo), ints(hi), ints(n))):
        cat = (h << 32) | l
        w, k = c & 31, min(c, 32)
        out[5 * i:5 * i + 5] = [u32((cat << w) >> 32), u32(cat >> w), u32((cat << k) >> 32), u32(cat >> k),
                                u32((l << 13) | (l >> 19))]
    return [lo, hi, n, out]


def _byte_perm(x: int, y: int, s: int) -> int:
    src = (y << 32) | x
    return sum(((src >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))


@oracle("byte_perm", tags={"bits", "int", "ci"}, about="__byte_perm (prmt.b32), constant and runtime selectors")
def byte_perm(a, b, sel, out):
    out = out.copy()
    for i, (x, y, s) in enumerate(zip(ints(a), ints(b), ints(sel))):
        out[4 * i:4 * i + 4] = [_byte_perm(x, y, 0x0123), _byte_perm(x, y, 0x5140), _byte_perm(x, y, s),
                                _byte_perm(x, 0, 0x3210 + (i & 1) * 0x4444)]
    return [a, b, sel, out]


@oracle("bitfield", tags={"bits", "int"}, about="bit-field extract/insert written in C (shr/and/shl/or)")
def bitfield(a, b, pos, out):
    out = out.copy()
    for i, (x, y, p) in enumerate(zip(ints(a), ints(b), ints(pos))):
        p &= 15
        out[5 * i:5 * i + 5] = [(x >> 5) & 0x3F, u32(s32(x << 10) >> 24), (x >> p) & 0xFF,
                                (x & u32(~0x3F0)) | ((y & 0x3F) << 4), (x & u32(~(0xF << p))) | ((y & 0xF) << p)]
    return [a, b, pos, out]


def _bfe(a: int, b: int, c: int, signed: bool) -> int:
    """PTX bfe.{u32,s32} pseudocode."""
    msb, pos, ln = 31, b & 0xFF, c & 0xFF
    sbit = 0 if (not signed or ln == 0) else (a >> min(pos + ln - 1, msb)) & 1
    d = 0
    for i in range(msb + 1):
        bit = (a >> (pos + i)) & 1 if (i < ln and pos + i <= msb) else sbit
        d |= bit << i
    return d


def _bfi(a: int, b: int, c: int, d: int) -> int:
    """PTX bfi.b32 f, a, b, c, d pseudocode: insert a's low bits into b at position c, length d."""
    msb, pos, ln = 31, c & 0xFF, d & 0xFF
    f = b
    i = 0
    while i < ln and pos + i <= msb:
        f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
        i += 1
    return f


@oracle("bitfield_asm", tags={"asm", "bits", "int"}, about="inline-PTX bfe.u32/bfe.s32/bfi.b32 incl. len 0, pos+len > 32")
def bitfield_asm(a, b, pos, ln, out):
    out = out.copy()
    for i, (x, y, p, l) in enumerate(zip(ints(a), ints(b), ints(pos), ints(ln))):
        out[3 * i:3 * i + 3] = [_bfe(x, p, l, False), _bfe(x, p, l, True), _bfi(y, x, p, l)]
    return [a, b, pos, ln, out]


def _clz(v: int, bits: int) -> int:
    return bits - v.bit_length()


def _ffs(v: int) -> int:
    return (v & -v).bit_length()


def _brev(v: int, bits: int) -> int:
    return int(format(v, f"0{bits}b")[::-1], 2)


@oracle("bit_count", tags={"bits", "int", "int64", "ci"}, about="__brev/__clz/__popc/__ffs and 64-bit versions")
def bit_count(a, b, out, rev64):
    out, rev64 = out.copy(), rev64.copy()
    for i, (x, y) in enumerate(zip(ints(a), ints(b))):
        out[7 * i:7 * i + 7] = [s32(_brev(x, 32)), _clz(x, 32), bin(x).count("1"), _ffs(x),
                                _clz(y, 64), bin(y).count("1"), _ffs(y)]
        rev64[i] = _brev(y, 64)
    return [a, b, out, rev64]


@oracle("int8_int16", tags={"int", "int16", "int8", "ci"}, about="char/short loads (sign/zero ext), truncating u8/u16 stores")
def int8_int16(c, uc, s, us, wide, c_out, s_out):
    wide, c_out, s_out = wide.copy(), c_out.copy(), s_out.copy()
    for i in range(4):
        a, b, d, e = int(c[i]), int(uc[i]), int(s[i]), int(us[i])
        wide[4 * i:4 * i + 4] = [a + b, d * a - e, _sext(d + 100, 8), (a * 300) & 0xFFFF]
        c_out[i] = _sext(b * 3 + a, 8)
        s_out[i] = _sext(d ^ (e << 4), 16)
    return [c, uc, s, us, wide, c_out, s_out]


@oracle("int64_arith", tags={"int", "int64"}, about="64-bit add/sub/mul/div/rem/compare and 32<->64 conversions")
def int64_arith(a, b, c, out, trunc):
    out, trunc = out.copy(), trunc.copy()
    for i, (x, y, k) in enumerate(zip(ints(a), ints(b), ints(c))):
        ux, uy = u64(x), u64(y)
        o7 = s64(ux + u32(k)) ^ (1 if x < y else 2) ^ ((1 if uy > ux else 0) << 4)
        out[8 * i:8 * i + 8] = [s64(ux + uy), s64(ux - uy * 3), s64(ux * uy), cdiv(x, y), crem(x, y),
                                s64(ux // uy), x + k, o7]
        trunc[i] = s32(x ^ (x >> 32))
    return [a, b, c, out, trunc]


@oracle("int_intrinsics", tags={"int", "int64"}, about="__sad/__usad, __hadd/__rhadd/__uhadd/__urhadd, 64-bit min/max")
def int_intrinsics(a, b, c, out, o64):
    out, o64 = out.copy(), o64.copy()
    for i, (x, y, z) in enumerate(zip(ints(a), ints(b), ints(c))):
        ux, uy = u32(x), u32(y)
        out[6 * i:6 * i + 6] = [s32(abs(x - y) + z), s32(abs(ux - uy) + z), (x + y) >> 1, (x + y + 1) >> 1,
                                s32((ux + uy) >> 1), s32((ux + uy + 1) >> 1)]
        X, Y = x * 1048576, y * -1000
        o64[2 * i:2 * i + 2] = [min(X, Y) ^ max(X, Y), s64(min(u64(X), u64(Y)) - max(u64(X), u64(Y)))]
    return [a, b, c, out, o64]
