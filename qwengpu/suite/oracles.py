"""NumPy oracles for the kernel suite: one independent re-implementation per kernel.

An oracle receives the launch arguments in order (buffers as arrays holding their INITIAL contents, scalars as
NumPy scalars) and returns the EXPECTED FINAL contents of every argument: an array per buffer (the input itself
where the kernel leaves it unchanged) and None per scalar. Integer arithmetic wraps exactly like the kernel's C
(Python ints, then masked); float32 arithmetic is done step by step in np.float32 in the kernel's order, with
fma and rounding-mode conversions computed exactly (see `_fp`). NaN results of f32 arithmetic are the GPU's
canonical NaN 0x7fffffff.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._fp import canon, ex2_approx, float_to_int, fma, fma_mode, int_to_float

ORACLES: dict[str, "Oracle"] = {}


@dataclass(frozen=True)
class Oracle:
    name: str
    fn: Callable
    tags: frozenset
    about: str


def oracle(name: str, tags=(), about: str = ""):
    """Register `fn` as the oracle of suite kernel `name`."""
    def deco(fn):
        if name in ORACLES:
            raise ValueError(f"duplicate oracle {name!r}")
        ORACLES[name] = Oracle(name, fn, frozenset(tags), about)
        return fn
    return deco


# ----------------------------------------------------------------------------- integer helpers
M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def u32(v: int) -> int:
    return v & M32


def s64(v: int) -> int:
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def u64(v: int) -> int:
    return v & M64


def cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def crem(a: int, b: int) -> int:
    """C remainder (sign follows the dividend)."""
    return a - cdiv(a, b) * b


def ints(a) -> list[int]:
    return [int(v) for v in a]


def f32(x) -> np.float32:
    return np.float32(x)


def tid_grid(grid: int, block: int):
    """Global thread ids of a 1D launch."""
    return range(grid * block)


# ============================================================================= integer kernels
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


# ============================================================================= float kernels
@oracle("f32_arith", tags={"float", "ci"}, about="f32 add/sub/mul/div (rn), neg, abs; subnormals, inf, signed zero")
def f32_arith(a, b, out):
    out = out.copy()
    with np.errstate(all="ignore"):
        for i, (x, y) in enumerate(zip(a, b)):
            out[6 * i:6 * i + 6] = [canon(x + y), canon(x - y), canon(x * y), canon(x / y), -x, abs(y)]
    return [a, b, out]


@oracle("f32_sqrt_fma", tags={"float", "ci"}, about="sqrtf, fmaf, contracted a*b+c, separately rounded mul+add")
def f32_sqrt_fma(a, b, c, out):
    out = out.copy()
    with np.errstate(all="ignore"):
        for i, (x, y, z) in enumerate(zip(a, b, c)):
            out[5 * i:5 * i + 5] = [canon(np.sqrt(abs(x))), fma(x, y, z), fma(x, y, z), canon((x * y) + z),
                                    canon(np.sqrt(x))]
    return [a, b, c, out]


def _fmin(x, y):
    if np.isnan(x) and np.isnan(y):
        return canon(np.float32("nan"))
    if np.isnan(x):
        return y
    if np.isnan(y):
        return x
    return min(x, y)


def _fmax(x, y):
    if np.isnan(x) and np.isnan(y):
        return canon(np.float32("nan"))
    if np.isnan(x):
        return y
    if np.isnan(y):
        return x
    return max(x, y)


@oracle("f32_minmax_nan", tags={"float", "ci"}, about="fminf/fmaxf with NaN, isnan/isinf/isfinite, ordered/unordered compares")
def f32_minmax_nan(a, b, fout, flags):
    fout, flags = fout.copy(), flags.copy()
    for i, (x, y) in enumerate(zip(a, b)):
        fout[3 * i:3 * i + 3] = [_fmin(x, y), _fmax(x, y), x if x > y else y]
        f = 0
        f |= 1 if np.isnan(x) else 0
        f |= 2 if np.isinf(y) else 0
        f |= 4 if np.isfinite(x) else 0
        f |= 8 if x < y else 0
        f |= 16 if x == y else 0
        f |= 32 if x != y else 0
        f |= 64 if not (x >= y) else 0
        f |= 128 if x <= y else 0
        flags[i] = f
    return [a, b, fout, flags]


@oracle("f2i_convert", tags={"convert", "float", "int64"},
        about="float->int with rn/rz/rd/ru, saturation, NaN -> 0 (s32/u32) and INT64_MIN (s64)")
def f2i_convert(a, s, u, l):
    s, u, l = s.copy(), u.copy(), l.copy()
    for i, x in enumerate(a):
        s[5 * i:5 * i + 5] = [float_to_int(x, m, 32, True) for m in ("rni", "rzi", "rmi", "rpi", "rzi")]
        u[3 * i:3 * i + 3] = [float_to_int(x, m, 32, False) for m in ("rmi", "rpi", "rni")]
        l[i] = float_to_int(x, "rni", 64, True)
    return [a, s, u, l]


@oracle("i2f_convert", tags={"convert", "float", "int64", "ci"}, about="int/uint/long long -> float with rn/rz/rm/rp")
def i2f_convert(a, b, out):
    out = out.copy()
    for i, (x, y) in enumerate(zip(ints(a), ints(b))):
        out[8 * i:8 * i + 8] = [int_to_float(x, "rn"), int_to_float(x, "rz"), int_to_float(x, "rm"),
                                int_to_float(x, "rp"), int_to_float(u32(x), "rn"), int_to_float(u32(x), "rz"),
                                int_to_float(y, "rn"), int_to_float(y, "rz")]
    return [a, b, out]


def _roundf(x: np.float32) -> np.float32:
    """C roundf: half away from zero."""
    if not np.isfinite(x):
        return x
    return np.float32(math.copysign(math.floor(abs(float(x)) + 0.5), float(x)))


@oracle("f32_rounding", tags={"convert", "float"}, about="floorf/ceilf/truncf/rintf/roundf/copysignf (cvt.r*i.f32.f32)")
def f32_rounding(a, out):
    out = out.copy()
    for i, x in enumerate(a):
        out[6 * i:6 * i + 6] = [np.floor(x), np.ceil(x), np.trunc(x), np.rint(x), _roundf(x),
                                np.copysign(np.float32(1.5), x)]
    return [a, out]


@oracle("f64_math", tags={"f64"}, about="double add/sub/mul/div/fma/sqrt/min/max (incl. subnormals, overflow)")
def f64_math(a, b, c, out):
    out = out.copy()
    with np.errstate(all="ignore"):
        for i, (x, y, z) in enumerate(zip(a, b, c)):
            out[7 * i:7 * i + 7] = [x + y, x - y, x * y, x / y, fma(x, y, z, "f64"), np.sqrt(abs(x)),
                                    max(x, z) - min(y, z)]
    return [a, b, c, out]


@oracle("f64_convert", tags={"convert", "f64"}, about="float<->double, int<->double, double->long long (saturating; NaN)")
def f64_convert(f, d, k, od, of, oi, ol):
    od, of, oi, ol = od.copy(), of.copy(), oi.copy(), ol.copy()
    with np.errstate(all="ignore"):
        for i in range(4):
            od[2 * i] = np.float64(f[i]) * 3.0
            od[2 * i + 1] = np.float64(k[i]) + 0.25
            of[i] = canon(np.float32(d[i]))          # numpy's f64->f32 cast rounds to nearest even
            oi[i] = float_to_int(d[i], "rzi", 32, True, src_f64=True)
            ol[i] = float_to_int(d[i] * 1024.0, "rzi", 64, True, src_f64=True)
    return [f, d, k, od, of, oi, ol]


# ============================================================================= control flow
@oracle("divergent_loop", tags={"control", "divergence", "loop", "ci"}, about="per-lane trip counts 0,1,3,6")
def divergent_loop(n, data, out):
    out = out.copy()
    for i in range(4):
        acc = i
        for k in range(int(n[i])):
            acc = s32(acc * 3 + int(data[(i + k) & 7]))
        out[i] = acc
    return [n, data, out]


@oracle("nested_divergence", tags={"control", "divergence", "loop", "multiwarp"}, about="if in if in a per-lane loop, 2 warps")
def nested_divergence(x, out):
    out = out.copy()
    for i in range(8):
        v = int(x[i])
        acc, k = 0, 0
        while k < (v & 3) + 2:           # the bound is re-read every iteration (v changes)
            if v & 1:
                acc = acc + v if k % 3 == 0 else acc - k
            else:
                acc = acc ^ (v << k) if k & 1 else acc + 1
            v >>= 1
            k += 1
        out[i] = s32(acc)
    return [x, out]


@oracle("early_return", tags={"control", "divergence", "multiwarp", "ci"}, about="lanes return at different points")
def early_return(x, out):
    out = out.copy()
    for i in range(8):
        v = int(x[i])
        if v < 0:
            out[i] = -1
            continue
        acc, done = 0, False
        for k in range(4):
            acc += v
            if acc > 20:
                out[i] = 1000 + k
                done = True
                break
            v = v * 2 - 1
        if done or acc & 3 == 0:
            continue
        out[i] = acc
    return [x, out]


@oracle("break_continue", tags={"control", "divergence", "loop", "heavy"}, about="rolled loop with continue and break")
def break_continue(x, limit, n, out):
    out = out.copy()
    n = int(n)
    for i in range(4):
        total = count = 0
        for k in range(n):
            v = int(x[i * n + k])
            if crem(v, 3) == 0:
                continue
            total += v
            count += 1
            if total > int(limit[i]):
                break
        out[2 * i:2 * i + 2] = [total, count]
    return [x, limit, None, out]


@oracle("switch_sparse", tags={"control", "switch"}, about="sparse switch with fallthrough and default")
def switch_sparse(x, out):
    out = out.copy()
    for i, v in enumerate(ints(x)):
        if v == -5:
            r = 11
        elif v in (1, 10):
            r = (v + 100 if v == 1 else 0) + 7
        elif v == 100:
            r = v * v
        elif v == 1000:
            r = -v
        else:
            r = v & 0xFF
        out[i] = r
    return [x, out]


def _dense_case(v: int, w: int) -> int:
    table = {0: lambda: w * 3, 1: lambda: w + 7, 2: lambda: w ^ 0x55, 3: lambda: w - 11, 4: lambda: s32(w << 3),
             5: lambda: s32(w * w), 6: lambda: 99, 7: lambda: w | 0x100, 8: lambda: cdiv(w, 3), 9: lambda: crem(w, 7),
             10: lambda: ~w, 11: lambda: w & 0xF0}
    return table[v]() if v in table else -1


@oracle("switch_dense", tags={"control", "switch"}, about="dense 12-case switch (compare tree)")
def switch_dense(x, y, out):
    out = out.copy()
    for i, (v, w) in enumerate(zip(ints(x), ints(y))):
        out[i] = _dense_case(v, w)
    return [x, y, out]


@oracle("switch_jumptable", tags={"control", "jumptable", "switch", "ci"}, about="dense switch lowered to brx.idx")
def switch_jumptable(x, y, out):
    out = out.copy()
    for i, (v, w) in enumerate(zip(ints(x), ints(y))):
        out[i] = _dense_case(v, w) if 0 <= v <= 7 else -1
    return [x, y, out]


def _rotl(x: int, n: int) -> int:
    return u32((x << (n & 31)) | (x >> ((32 - n) & 31)))


@oracle("device_calls", tags={"call", "float", "local", "ci"}, about="__noinline__ calls: params, struct return, out-pointer, 2 deep")
def device_calls(x, f, out, fout):
    out, fout = out.copy(), fout.copy()
    xs = ints(x)
    for i in range(4):
        r = _rotl(u32(xs[i] ^ xs[i + 4]), i + 3)
        m = s32(r + u32(xs[(i + 1) & 3]) * 5)
        p = m * 1000003
        lo, hi = s32(p), s32(p >> 32)
        a, b, t = f[i], f[i + 4], f[8 + i]
        fout[i] = a + t * (b - a)          # np.float32 ops: three separate roundings, as in the kernel
        out[3 * i:3 * i + 3] = [m, lo ^ hi, 1 if t > np.float32(0.5) else 0]
    return [x, f, out, fout]


@oracle("local_array", tags={"local", "loop"}, about="runtime-indexed per-thread array (.local)")
def local_array(x, idx, out):
    out = out.copy()
    for i in range(4):
        buf = ints(x[i * 8:i * 8 + 8])
        for k in range(4):
            j = int(idx[i * 4 + k]) & 7
            buf[j] += buf[(j + 1) & 7] * 2
        acc = 0
        for k in range(3):
            acc = acc * 10 + buf[int(idx[(i + k) & 3]) & 7]
        out[i] = s32(acc)
    return [x, idx, out]


@oracle("predication", tags={"control", "predicate", "ci"}, about="selp, and/or/xor/not of predicates, predicated stores")
def predication(a, b, out):
    out = out.copy()
    for i, (x, y) in enumerate(zip(ints(a), ints(b))):
        p, q, r = x < y, (x & 1) == 0, u32(y) > 100
        out[4 * i:4 * i + 4] = [x if p else y, (x + y) if (p and q) else ((x - y) if (p or r) else 42),
                                int(p != q) + 2 * int(not r) + 4 * int(x == y), y if q else ~y]
    return [a, b, out]


# ============================================================================= algorithms
@oracle("collatz", tags={"algo", "divergence", "loop", "heavy"}, about="Collatz step counts: data-dependent while loop")
def collatz(n, steps):
    steps = steps.copy()
    for i, v in enumerate(ints(n)):
        s = 0
        while v > 1:
            v = u32(3 * v + 1) if v & 1 else v >> 1
            s += 1
        steps[i] = s
    return [n, steps]


@oracle("lcg_soak", tags={"loop", "int"}, about="n LCG steps per lane (the soak test's loop; n is an argument)")
def lcg_soak(out, n):
    out = out.copy()
    for t in range(len(out)):
        x, acc = u32(t * 2654435761 + 1), 0
        for _ in range(int(n)):
            x = u32(x * 1664525 + 1013904223)
            acc = u32(acc + (x >> 7)) if x & 0x10000 else acc ^ x
        out[t] = acc
    return [out, n]


@oracle("isqrt_bisect", tags={"algo", "int64", "loop"}, about="integer sqrt by bisection (mul.wide.u32)")
def isqrt_bisect(x, out):
    out = out.copy()
    for i, v in enumerate(ints(x)):
        out[i] = math.isqrt(v)
    return [x, out]


@oracle("gcd", tags={"algo", "divergence", "int64", "loop"}, about="Euclid's gcd (rem.u32) and lcm (64-bit)")
def gcd(a, b, g, l):
    g, l = g.copy(), l.copy()
    for i, (x, y) in enumerate(zip(ints(a), ints(b))):
        d = math.gcd(x, y)
        g[i] = d
        l[i] = (x // d * y) if d else 0
    return [a, b, g, l]


@oracle("crc32", tags={"algo", "bits", "int8", "loop", "heavy"}, about="bitwise CRC-32 of 4 bytes per lane (nested loops)")
def crc32(data, nbytes, out):
    out = out.copy()
    n = int(nbytes)
    for i in range(4):
        out[i] = zlib.crc32(bytes(data[i * n:(i + 1) * n].tobytes()))
    return [data, None, out]


@oracle("fnv_hash", tags={"algo", "divergence", "int8", "loop"}, about="FNV-1a over per-lane byte strings of different lengths")
def fnv_hash(data, ln, out):
    out = out.copy()
    for i in range(4):
        h = 2166136261
        for k in range(int(ln[i])):
            h = u32((h ^ int(data[i * 8 + k])) * 16777619)
        out[i] = h
    return [data, ln, out]


@oracle("shared_reduce", tags={"grid", "multiwarp", "shared", "sync"}, about="shared-memory tree sum, 2 blocks of 8")
def shared_reduce(x, out):
    out = out.copy()
    for blk in range(2):
        out[blk] = s32(sum(ints(x[blk * 8:blk * 8 + 8])))
    return [x, out]


@oracle("shared_minmax16", tags={"float", "multiwarp", "shared", "sync"}, about="f32 min/max reduction over 16 threads")
def shared_minmax16(x, out):
    out = out.copy()
    out[0], out[1] = x.min(), x.max()
    return [x, out]


@oracle("scan_shared", tags={"algo", "multiwarp", "shared", "sync", "ci"}, about="Hillis-Steele inclusive scan of 8 ints")
def scan_shared(x, out):
    return [x, np.cumsum(x.astype(np.int64)).astype(np.int32)]


@oracle("bitonic_sort8", tags={"algo", "grid", "multiwarp", "shared", "sync", "heavy"}, about="bitonic sort of 8 ints per block, 2 blocks")
def bitonic_sort8(x, out):
    return [x, np.concatenate([np.sort(x[:8]), np.sort(x[8:])]).astype(np.int32)]


@oracle("histogram", tags={"algo", "atomics", "grid", "multiwarp", "shared", "sync", "heavy"},
        about="8-bin histogram: shared atomics then global atomics, 2 blocks of 16")
def histogram(data, n, hist):
    hist = hist.copy()
    for v in ints(data[:int(n)]):
        hist[v >> 5] += 1
    return [data, None, hist]


@oracle("matvec", tags={"algo", "float", "loop"}, about="4x6 f32 matrix-vector product, sequential fma chain")
def matvec(A, x, y, cols):
    y = y.copy()
    c = int(cols)
    for r in range(4):
        acc = np.float32(0.0)
        for k in range(c):
            acc = fma(A[r * c + k], x[k], acc)
        y[r] = acc
    return [A, x, y, None]


@oracle("grid_2d", tags={"grid", "ci"}, about="2x2 grid of 2x2 blocks: blockIdx/blockDim/gridDim .x/.y")
def grid_2d(inp, out):
    out = out.copy()
    for by in range(2):
        for bx in range(2):
            for ty in range(2):
                for tx in range(2):
                    x, y = bx * 2 + tx, by * 2 + ty
                    k = y * 4 + x
                    out[k] = int(inp[k]) * 100 + (by * 2 + bx) * 10 + ty * 2 + tx
    return [inp, out]


@oracle("grid_stride", tags={"grid", "loop"}, about="grid-stride loop, n=13 over 2 blocks of 4")
def grid_stride(x, n, out):
    out = out.copy()
    for k in range(int(n)):
        out[k] = int(x[k]) * 2 + k
    return [x, None, out]


# ============================================================================= memory spaces
_TABLE = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]
_COEF = np.array([0.5, -1.25, 2.0, 0.125], dtype=np.float32)


@oracle("const_mem", tags={"const", "float", "ci"}, about="__constant__ tables with initialisers, runtime-indexed")
def const_mem(idx, x, out, fout):
    out, fout = out.copy(), fout.copy()
    for i in range(8):
        j = int(idx[i]) & 15
        out[i] = _TABLE[j] * 10 + _TABLE[(j + 5) & 15]
        fout[i] = _COEF[i & 3] * x[i]
    return [idx, x, out, fout]


@oracle("global_device_array", tags={"global_var", "multiwarp", "sync"}, about="__device__ arrays with initialisers, updated")
def global_device_array(x, out, snapshot):
    weights = [10, -20, 30, -40, 50, -60, 70, -80]
    counter = [100, 200, 300, 400]
    out, snapshot = out.copy(), snapshot.copy()
    for i in range(8):
        out[i] = int(x[i]) * weights[i] + weights[7 - i]
    for i in range(4):
        counter[i] = u32(counter[i] + u32(int(x[i])))
    for i in range(4):
        snapshot[i] = counter[3 - i]
    return [x, out, snapshot]


@oracle("struct_param", tags={"param", "ci"}, about="structs by value (.param .b8 arrays), given as raw-byte u64 scalars")
def struct_param(x, aff, rng, out, fout):
    out, fout = out.copy(), fout.copy()
    raw = int(aff).to_bytes(8, "little")
    scale = int.from_bytes(raw[0:4], "little", signed=True)
    offset = int.from_bytes(raw[4:6], "little", signed=True)
    shift = raw[6]
    bias = int.from_bytes(raw[7:8], "little", signed=True)
    lo, hi = np.frombuffer(int(rng).to_bytes(8, "little"), dtype=np.float32)
    for i, v in enumerate(ints(x)):
        out[i] = ((v * scale + offset) >> shift) + bias
        fout[i] = min(max(np.float32(v), lo), hi)
    return [x, None, None, out, fout]


@oracle("struct_big", tags={"param", "ci"}, about="a 24-byte struct by value, given as {\"struct\": HEX}")
def struct_big(x, p, out, iout):
    import struct
    n, scale, offset, lo, hi, *add = struct.unpack("<ifdhh4B", p.tobytes())
    out, iout = out.copy(), iout.copy()
    for i, v in enumerate(x):
        out[i] = np.float32(v) * np.float32(scale) + np.float32(offset) if i < n else np.float32(0)
        iout[i] = min(max(int(v), lo), hi) + add[i & 3]
    return [x, None, out, iout]


@oracle("dynamic_shared", tags={"multiwarp", "shared", "sync"}, about="extern __shared__ array sized by shared_bytes")
def dynamic_shared(x, out):
    return [x, (x.astype(np.int64) + x[::-1]).astype(np.int32)]


@oracle("vector_load", tags={"float", "vector", "ci"}, about="int4/float2 vector loads and an int4 vector store")
def vector_load(a, b, out, fout):
    out, fout = out.copy(), fout.copy()
    for i in range(4):
        x, y, z, w = ints(a[4 * i:4 * i + 4])
        out[4 * i:4 * i + 4] = [w, x + y, z ^ x, y - w]
        fout[i] = b[2 * i] - b[2 * i + 1]
    return [a, b, out, fout]


@oracle("transpose_shared", tags={"grid", "multiwarp", "shared", "sync", "heavy"}, about="4x4 tiles transposed via 2D shared array")
def transpose_shared(inp, out, width):
    w = int(width)
    m = inp.reshape(-1, w)
    return [inp, np.ascontiguousarray(m.T).reshape(-1), None]


@oracle("saxpy", tags={"float", "grid", "ci"}, about="y = a*x + y (fma), n=10 over 3 blocks of 4 (bounds check)")
def saxpy(n, a, x, y):
    y = y.copy()
    for i in range(int(n)):
        y[i] = fma(a, x[i], y[i])
    return [None, None, x, y]


# ============================================================================= atomics
@oracle("atomics_global", tags={"atomics", "grid", "ci"}, about="global atomicAdd/Sub/Min/Max/And/Or/Xor, s32 and u32")
def atomics_global(x, s, u):
    s, u = s.copy(), u.copy()
    v = ints(x)
    s[0] = s32(int(s[0]) + sum(v))
    s[1] = s32(int(s[1]) - sum(v))
    s[2] = min([int(s[2])] + v)
    s[3] = max([int(s[3])] + v)
    u[0] = min([int(u[0])] + [u32(t) for t in v])
    u[1] = max([int(u[1])] + [u32(t) for t in v])
    acc_and, acc_or, acc_xor = int(u[2]), int(u[3]), int(u[4])
    for i, t in enumerate(v):
        acc_and &= u32(~(1 << (i & 31)))
        acc_or |= u32(t) & 0xFF0
        acc_xor ^= u32(t)
    u[2], u[3], u[4] = acc_and, acc_or, acc_xor
    return [x, s, u]


@oracle("atomics_shared", tags={"atomics", "multiwarp", "shared", "sync"}, about="shared-memory atomics, 8 threads")
def atomics_shared(x, out):
    out = out.copy()
    v = ints(x)
    a, o, xr = -1, 0, 0
    for t in v:
        a &= t | 0x0F0F0000
        o |= t & 0x00FFFF00
        xr ^= t
    out[:6] = [s32(sum(v)), min([0x7FFFFFFF] + v), max([-0x7FFFFFFF] + v), s32(a), s32(o), s32(xr)]
    return [x, out]


@oracle("atomic_inc_dec", tags={"atomics", "grid"}, about="atomicInc/atomicDec as modulo counters, 16 threads")
def atomic_inc_dec(c, limits):
    c = c.copy()
    n = 16
    c[0] = (int(c[0]) + n) % (int(limits[0]) + 1)
    c[1] = (int(c[1]) - n) % (int(limits[1]) + 1)
    c[2] = u32(int(c[2]) + n)
    c[3] = int(c[3]) - n // 2
    return [c, limits]


@oracle("atomic_exch_cas", tags={"atomics", "grid", "loop"}, about="atomicExch/CAS on own slots; CAS-loop atomic product")
def atomic_exch_cas(slots, x, olds, prod):
    slots, olds, prod = slots.copy(), olds.copy(), prod.copy()
    p = int(prod[0])
    for i, v in enumerate(ints(x)):
        old = int(slots[2 * i])
        slots[2 * i] = v
        seen = int(slots[2 * i + 1])
        if seen == old:
            slots[2 * i + 1] = v + old
        olds[2 * i:2 * i + 2] = [old, seen]
        p = u32(p * u32(2 * v + 1))
    prod[0] = p
    return [slots, x, olds, prod]


@oracle("atomic64", tags={"atomics", "int64"}, about="64-bit atomicAdd/And/Or/Xor/Min/Max/Exch/CAS")
def atomic64(x, acc, mm, slots, rets):
    acc, mm, slots, rets = acc.copy(), mm.copy(), slots.copy(), rets.copy()
    v = ints(x)
    a0, a1, a2, a3 = ints(acc)
    for t in v:
        u = u64(t)
        a0 = u64(a0 + u)
        a1 &= u | 0xFF00FF00FF00FF00
        a2 |= u & 0x0F0F0F0F0F0F0F0F
        a3 ^= u
    acc[:] = [a0, a1, a2, a3]
    mm[0] = min([int(mm[0])] + v)
    mm[1] = max([int(mm[1])] + v)
    for i, t in enumerate(v):
        u = u64(t)
        old = int(slots[2 * i])
        slots[2 * i] = u
        seen = int(slots[2 * i + 1])
        if seen == old:
            slots[2 * i + 1] = u64(old + u)
        rets[2 * i:2 * i + 2] = [old, seen]
    return [x, acc, mm, slots, rets]


@oracle("atomic_float_add", tags={"atomics", "float", "grid"}, about="f32 atomicAdd of exactly representable values")
def atomic_float_add(x, total):
    total = total.copy()
    for i, v in enumerate(x):
        total[0] += v
        total[1 + (i & 1)] += np.float32(0.25) * v
    return [x, total]


# ============================================================================= warp-level
@oracle("shfl_xor_reduce", tags={"grid", "shfl", "warp", "ci"}, about="butterfly sum/max via __shfl_xor_sync width 4")
def shfl_xor_reduce(x, total, mx):
    total, mx = total.copy(), mx.copy()
    for g in range(2):
        seg = ints(x[4 * g:4 * g + 4])
        total[4 * g:4 * g + 4] = s32(sum(seg))
        mx[4 * g:4 * g + 4] = max(seg)
    return [x, total, mx]


@oracle("shfl_up_down", tags={"shfl", "warp"}, about="shfl up/down at the edges (keep own value), shfl_up scan")
def shfl_up_down(x, out):
    out = out.copy()
    v = ints(x)
    for lane in range(4):
        up1 = v[lane - 1] if lane >= 1 else v[lane]
        down2 = v[lane + 2] if lane + 2 < 4 else v[lane]
        out[3 * lane:3 * lane + 3] = [up1, down2, s32(sum(v[:lane + 1]))]
    return [x, out]


@oracle("shfl_idx", tags={"float", "grid", "shfl", "warp"}, about="__shfl_sync broadcast/rotate/runtime src lanes mod 4, f32")
def shfl_idx(x, src, f, out, fout):
    out, fout = out.copy(), fout.copy()
    for blk in range(2):
        v = ints(x[blk * 4:blk * 4 + 4])
        for lane in range(4):
            s = int(src[blk * 4 + lane]) & 3
            out[blk * 12 + 3 * lane:blk * 12 + 3 * lane + 3] = [v[2], v[(lane + 1) & 3], v[s]]
            fout[blk * 4 + lane] = f[blk * 4 + 3 - lane]
    return [x, src, f, out, fout]


@oracle("vote", tags={"divergence", "grid", "vote", "warp"}, about="ballot/any/all, __activemask and ballot in divergent branches")
def vote(x, out):
    out = out.copy()
    for blk in range(2):
        v = ints(x[blk * 4:blk * 4 + 4])
        ballot = sum(1 << l for l in range(4) if v[l] > 0)
        anyall = int(any(t > 10 for t in v)) | (int(all(t != 0 for t in v)) << 1)
        odd = sum(1 << l for l in range(4) if v[l] & 1)
        even = 0xF & ~odd
        for lane in range(4):
            o = blk * 16 + 4 * lane
            if v[lane] & 1:
                b = sum(1 << l for l in range(4) if (odd >> l) & 1 and v[l] > 5)
                out[o:o + 4] = [ballot, anyall, odd, b]
            else:
                al = int(all(v[l] >= 0 for l in range(4) if (even >> l) & 1))
                out[o:o + 4] = [ballot, anyall, even << 4, al]
    return [x, out]


@oracle("syncwarp", tags={"shared", "sync", "warp", "ci"}, about="shared-memory exchange separated by __syncwarp")
def syncwarp(x, out):
    s = ints(x)
    a = [s[(l + 1) & 3] for l in range(4)]
    s2 = [a[l] * 2 + s[(l + 2) & 3] for l in range(4)]
    return [x, np.array([s2[3 - l] for l in range(4)], dtype=np.int32)]


# ============================================================================= second batch
from fractions import Fraction  # noqa: E402

from ._fp import round_op, sqrt_round  # noqa: E402


def _q(v) -> Fraction:
    return Fraction(float(v))


@oracle("f32_round_modes", tags={"float"}, about="add/mul/fma/div .rz/.rp/.rm, rcp.rn/.rz, sqrt.rp/.rm, cvt.sat.f32")
def f32_round_modes(a, b, c, out):
    out = out.copy()
    for i, (x, y, z) in enumerate(zip(a, b, c)):
        s, p, f, d = _q(x) + _q(y), _q(x) * _q(y), _q(x) * _q(y) + _q(z), _q(x) / _q(y)
        sat = np.float32(0.0) if np.isnan(x) else min(max(x, np.float32(0.0)), np.float32(1.0))
        out[16 * i:16 * i + 16] = [round_op(s, "rz"), round_op(s, "rp"), round_op(s, "rm"),
                                   round_op(p, "rz"), round_op(p, "rp"), round_op(p, "rm"),
                                   round_op(f, "rz"), round_op(f, "rp"), round_op(f, "rm"),
                                   round_op(d, "rz"), round_op(d, "rp"), round_op(1 / _q(y), "rn"),
                                   round_op(1 / _q(y), "rz"), sqrt_round(abs(x), "rp"), sqrt_round(abs(z), "rm"), sat]
    return [a, b, c, out]


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


@oracle("byte_shared", tags={"int16", "int8", "multiwarp", "shared", "sync"}, about="st.shared.u8/u16 into shared words")
def byte_shared(x, words, halves):
    raw = bytearray(16)
    for t in range(8):
        raw[2 * t] = int(x[t])
        raw[2 * t + 1] = int(x[t]) ^ 0xFF
    words = np.frombuffer(bytes(raw), dtype="<u4").astype(np.uint32)
    shorts = np.frombuffer(bytes(raw), dtype="<u2").astype(np.int64)
    shorts = [(int(shorts[t]) + 0x1234 * t) & 0xFFFF for t in range(8)]
    return [x, words, np.array([shorts[7 - t] for t in range(8)], dtype=np.uint16)]


@oracle("syncthreads_reduce", tags={"grid", "multiwarp", "sync"}, about="__syncthreads_count/_and/_or (bar.red)")
def syncthreads_reduce(x, out):
    out = out.copy()
    for blk in range(2):
        v = ints(x[blk * 8:blk * 8 + 8])
        r = sum(t > 0 for t in v) * 100 + (10 if all(t != 0 for t in v) else 0) + (1 if any(t > 100 for t in v) else 0)
        out[blk * 8:blk * 8 + 8] = r
    return [x, out]


@oracle("last_block_reduce", tags={"algo", "atomics", "grid", "sync"}, about="last-block-done reduction with a ticket counter")
def last_block_reduce(x, partial, ticket, total):
    p = np.array([s32(sum(ints(x[4 * b:4 * b + 4]))) for b in range(3)], dtype=np.int32)
    return [x, p, np.zeros(1, dtype=np.uint32), np.array([s32(sum(ints(p)))], dtype=np.int32)]


@oracle("atomics_shared_more", tags={"atomics", "int64", "multiwarp", "shared", "sync"},
        about="shared atomicSub/Inc/Dec/Exch/CAS and 64-bit atomicAdd")
def atomics_shared_more(x, out, o64):
    out, o64 = out.copy(), o64.copy()
    v = ints(x)
    for t in range(8):
        out[2 * t:2 * t + 2] = [t * 10, v[t] ^ (v[t] + 1)]
    out[16:19] = [s32(1000 - sum(t & 0xFF for t in v)), (3 + 8) % 5, (5 - 8) % 7]
    o64[0] = u64(0xFFFFFFF0 + sum(u32(t) for t in v))
    return [x, out, o64]


@oracle("match_sync", tags={"grid", "match", "warp"}, about="__match_any_sync/__match_all_sync, 32 and 64 bit")
def match_sync(x, out):
    out = out.copy()
    for blk in range(2):
        v = ints(x[blk * 4:blk * 4 + 4])
        odd = [t & 1 for t in v]
        all_same = len(set(odd)) == 1
        for lane in range(4):
            o = blk * 12 + 3 * lane
            any_m = sum(1 << l for l in range(4) if v[l] == v[lane])
            any64 = sum(1 << l for l in range(4) if (v[l] & 6) == (v[lane] & 6))
            out[o:o + 3] = [any_m, (0xF | 0x100) if all_same else 0, any64]
    return [x, out]


@oracle("shfl_64", tags={"f64", "int64", "shfl", "warp"}, about="64-bit shuffles (two shfl.b32 each): xor/down/idx")
def shfl_64(x, d, out, dout):
    out, dout = out.copy(), dout.copy()
    v = ints(x)
    for lane in range(4):
        down = v[lane + 1] if lane + 1 < 4 else v[lane]
        out[2 * lane:2 * lane + 2] = [v[lane ^ 1], s64(down - v[lane])]
        dout[lane] = d[(lane + 3) & 3]
    return [x, d, out, dout]


@oracle("block_3d", tags={"grid"}, about="3D block 2x2x2 in a 1x1x2 grid: .z special registers")
def block_3d(out):
    out = out.copy()
    for bz in range(2):
        for tz in range(2):
            for ty in range(2):
                for tx in range(2):
                    out[bz * 8 + (tz * 2 + ty) * 2 + tx] = tx + 10 * ty + 100 * tz + 1000 * bz + 10000 * 2
    return [out]


@oracle("gather_scatter", tags={"grid", "memory"}, about="gather via index array, scatter via permutation, p[-1]")
def gather_scatter(src, idx, perm, dst):
    dst = dst.copy()
    s = ints(src)
    for i in range(8):
        j = int(idx[i])
        dst[int(perm[i])] = s[j] * 2 + (s[j - 1] if j > 0 else 0)
    return [src, idx, perm, dst]


@oracle("pointer_chase", tags={"divergence", "loop", "memory"}, about="linked-list walk through next-indices")
def pointer_chase(nxt, val, start, total, ln):
    total, ln = total.copy(), ln.copy()
    for i in range(4):
        node, s, n = int(start[i]), 0, 0
        while node >= 0:
            s += int(val[node])
            n += 1
            node = int(nxt[node])
        total[i], ln[i] = s, n
    return [nxt, val, start, total, ln]


# ============================================================================= math functions (approximate instructions)
def _f32_bits(v: int) -> np.float32:
    return np.array([v & M32], dtype=np.uint32).view(np.float32)[0]


def _bits_f32(x) -> int:
    return int(np.float32(x).view(np.uint32))


def _fsat(x):
    """cvt.sat.f32.f32: clamp to [0, 1], NaN to 0."""
    x = np.float32(x)
    return np.float32(0.0) if np.isnan(x) or x <= 0 else np.float32(1.0) if x >= 1 else x


def expf_parts(x):
    """libdevice's expf as nvcc 13 emits it (-O3, sm_75): (2^r by ex2.approx.ftz, 2^j as a bit pattern),
    whose product is expf(x): j = round(x log2 e) through an fma.rm trick, r = x log2 e - j in two fmas."""
    x = np.float32(x)
    t = _fsat(fma(x, _f32_bits(0x3BBB989D), np.float32(0.5)))
    j = fma_mode(t, np.float32(252.0), _f32_bits(0x4B400001), "rm")
    r = fma(x, _f32_bits(0x3FB8AA3B), -(j + _f32_bits(0xCB40007F)))
    r = fma(x, _f32_bits(0x32A57060), r)
    return ex2_approx(r, ftz=True), _f32_bits(_bits_f32(j) << 23)


def expf(x):
    e, s = expf_parts(x)
    return np.float32(e * s)


def tanhf(x):
    """libdevice's tanhf as nvcc 13 emits it: |x| >= 0.6: 1 - 2 / (2^(2|x| log2 e) + 1) with ex2.approx.ftz
    and rcp.approx.ftz (qwenGPU: rcp.rn), 1 from |x| >= 9.0109, with x's sign; else an odd polynomial."""
    x = np.float32(x)
    ax = np.float32(abs(x))
    e = ex2_approx(np.float32(ax * _f32_bits(0x4038AA3B)), ftz=True)
    big = fma(np.float32(1.0) / np.float32(e + np.float32(1.0)), np.float32(-2.0), np.float32(1.0))
    big = np.float32(1.0) if ax >= _f32_bits(0x41102CB4) else big
    big = np.float32(math.copysign(float(big), float(x)))
    x2 = np.float32(x * x)
    p = fma(_f32_bits(0x3C80F082), x2, _f32_bits(0xBD563CAE))
    p = fma(p, x2, _f32_bits(0x3E085941))
    p = fma(p, x2, _f32_bits(0xBEAAA9ED))
    p = fma(p, x2, np.float32(0.0))
    small = fma(p, x, x)
    return big if ax >= _f32_bits(0x3F19999A) else small


@oracle("softmax_expf", tags={"float", "shared", "approx"},
        about="softmax of 8 floats with expf (ex2.approx.ftz), 8 threads, max and sum through shared memory")
def softmax_expf(x, y):
    x = x.astype(np.float32)
    m = x[0]
    for v in x[1:]:
        m = max(m, v)
    e = [expf(np.float32(v - m)) for v in x]
    p = [np.float32(e[2 * k] + e[2 * k + 1]) for k in range(4)]
    total = np.float32(np.float32(p[0] + p[1]) + np.float32(p[2] + p[3]))
    return [x, np.array([np.float32(v / total) for v in e], dtype=np.float32)]


@oracle("sigmoid", tags={"float", "grid", "approx"}, about="1 / (1 + expf(-x)) over 8 floats (ex2.approx.ftz)")
def sigmoid(x, y):
    out = []
    for v in x.astype(np.float32):
        e, s = expf_parts(-v)
        out.append(np.float32(1.0) / fma(e, s, np.float32(1.0)))
    return [x, np.array(out, dtype=np.float32)]


@oracle("gelu_tanh", tags={"float", "grid", "approx"},
        about="GELU (tanh form) over 8 floats: tanhf (ex2.approx.ftz, rcp.approx.ftz)")
def gelu_tanh(x, y):
    out = []
    for v in x.astype(np.float32):
        u = fma(v, np.float32(v * np.float32(v * _f32_bits(0x3D372713))), v)
        u = np.float32(u * _f32_bits(0x3F4C422A))
        out.append(np.float32(np.float32(v * np.float32(0.5)) * np.float32(tanhf(u) + np.float32(1.0))))
    return [x, np.array(out, dtype=np.float32)]


# ============================================================================= printf
#: the printf output a kernel must give (as `LaunchResult.printf.text()` shows it), by kernel: C's printf,
#: written out by hand
PRINTF_TEXT = {"printf_basic": """[thread 0] [0]     7 7   | 00000007 3.14
[thread 0] a lane 21 60129542144
[thread 1] [1]   -42 4294967254| ffffffd6 -0.50
[thread 1] b lane -126 -360777252864
[thread 2] [2] 65535 65535| 0000ffff 1000.12
[thread 2] c lane 196605 562941363486720
[thread 3] [3]     0 0   | 00000000 0.00
[thread 3] d lane 0 0"""}


@oracle("printf_basic", tags={"printf"},
        about="printf from 4 threads (%d %u %x %f %s %c %ld %lld, widths, precision); y = 2x")
def printf_basic(x, f, y):
    return [x, f, np.array([s32(2 * int(v)) for v in x], dtype=np.int32)]


# qwenGPU's definitions of lg2.approx and sin.approx (docs/floats.md, "Approximate instructions"), re-implemented
# here on Python integers from their description
LG2_COEFFS = (1549082010, -774540990, 516359558, -387271133, 309879951, -258211517, 219822676, -191720248,
              186428239, -184178726, 104039832)


def _fixed_to_f32(v: int, scale: int) -> np.float32:
    """v * 2^-scale rounded half up to f32 (|v| < 2^31)."""
    mag = abs(v)
    if mag == 0:
        return np.float32(0.0)
    nz = 32 - mag.bit_length()
    mn = mag << nz
    out = ((157 - nz - scale) << 23) + (mn >> 8) + ((mn >> 7) & 1)
    return _f32_bits(out | (0x80000000 if v < 0 else 0))


def lg2_approx(x):
    """lg2.approx.f32 for positive finite x: x = 2^E m, m in [sqrt(1/2), sqrt(2)); u = m - 1 in units of
    2^-32; log2 m = u P(u) by fixed-point Horner (floor of each signed product / 2^32), units of 2^-30;
    E + log2 m in units of 2^-30 (E = 0), 2^-26 (|E| < 32) or 2^-23 (truncated), rounded half up."""
    bits = _bits_f32(x)
    if not 0 < bits < 0x7F800000:
        raise ValueError("lg2_approx: the oracle takes positive finite operands only")
    ef, frac = bits >> 23, bits & 0x7FFFFF
    if ef == 0:
        sh = 24 - frac.bit_length()
        m, e = frac << sh, -126 - sh
    else:
        m, e = frac | 0x800000, ef - 127
    big = m > 0xB504F3
    e += big
    u = (m << (9 - big)) - (1 << 32)
    h = LG2_COEFFS[-1]
    for c in reversed(LG2_COEFFS[:-1]):
        h = c + _mulhs(u, h)
    lg = _mulhs(u, h)
    scale = 30 if e == 0 else 26 if abs(e) < 32 else 23
    return _fixed_to_f32((e << scale) + (lg >> (30 - scale)), scale)


def _mulhs(a: int, b: int) -> int:
    """The high word of the signed 64-bit product of two signed 32-bit words."""
    return (a * b) >> 32


def sin_approx(x):
    """sin.approx.f32 (qwenGPU's definition, docs/floats.md) on Python integers: y = |x| 2/pi from the
    64-bit constant, truncated to 2 quadrant and 32 fraction bits; r = the fraction as a signed word;
    r S(r^2) and C(r^2) by fixed-point Horner (floor of each signed product / 2^32); the quadrant's
    +-sin/+-cos rounded half up to f32, with x's sign."""
    bits = _bits_f32(x)
    ax = bits & 0x7FFFFFFF
    if ax > 0x7F7FFFFF:
        return _f32_bits(0x7FFFFFFF)
    if ax < 0x39800000:
        return np.float32(x)
    e, m = ax >> 23, (ax & 0x7FFFFF) | 0x800000
    y = m * 0xA2F9836E4E44152A >> (182 - min(e, 150))          # quadrant bits and 32 fraction bits
    f = y & 0xFFFFFFFF
    r = f - (1 << 32) if f >> 31 else f
    n = ((y >> 32) + (f >> 31)) & 3
    z = _mulhs(r, r)
    h = 169636
    for c in (-5026338, 85569234, -693598665, 1686629713):
        h = c + _mulhs(z, h)
    sv = _mulhs(r, h)
    h = -26684
    for c in (986942, -22401978, 272375559, -1324675879, 1073741824):
        h = c + _mulhs(z, h)
    v = (sv, h, -sv, -h)[n]
    mag = abs(v)
    if mag == 0:
        out = 0
    else:
        nz = 32 - mag.bit_length()
        mn = mag << nz
        out = ((127 - nz) << 23) + (mn >> 8) + ((mn >> 7) & 1)
    out |= (0x80000000 if v < 0 else 0)
    return _f32_bits(out ^ (bits & 0x80000000))


@oracle("fast_log_rsqrt", tags={"float", "grid", "approx"},
        about="__fdividef(__logf(x), rsqrtf(x + 1)) with --use_fast_math: lg2/rsqrt/div .approx.ftz")
def fast_log_rsqrt(x, y):
    out = []
    for v in x.astype(np.float32):
        num = np.float32(lg2_approx(v) * _f32_bits(0x3F317218))
        rs = np.float32(np.float32(1) / np.float32(np.sqrt(np.float32(v + np.float32(1)))))
        out.append(np.float32(num / rs))
    return [x, np.array(out, dtype=np.float32)]


@oracle("fast_sin", tags={"float", "grid", "approx"}, about="__sinf over 8 floats up to 300 (sin.approx.f32)")
def fast_sin(x, y):
    return [x, np.array([sin_approx(v) for v in x.astype(np.float32)], dtype=np.float32)]


# ============================================================================= register spilling, recursion
@oracle("live48", tags={"float", "spill"},
        about="48 floats per thread live at once (a mirrored fminf/fmaxf stage): more values than registers")
def live48(x, y):
    y = y.copy()
    n = 48
    for t in range(len(x) // n):
        v = x[t * n:(t + 1) * n]
        for k in range(n // 2):
            y[t * n + k] = _fmax(v[k], v[n - 1 - k])
            y[t * n + n - 1 - k] = _fmin(v[k], v[n - 1 - k])
    return [x, y]


def _fib(n: int) -> int:
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


@oracle("fib_recursive", tags={"int", "recursion"}, about="naive recursive Fibonacci, n = 0, 7, 12, 1 (divergent depths)")
def fib_recursive(n, out):
    return [n, np.array([_fib(int(v)) for v in n], dtype=np.int32)]


@oracle("factorial_recursive", tags={"int", "recursion"},
        about="recursive 64-bit n! (built through a result pointer) and a recursive power by squaring")
def factorial_recursive(n, fact, pw):
    f = [math.factorial(max(int(v), 1)) % 2**64 for v in n]
    p = [pow(int(v) + 1, int(v), 2**32) for v in n]
    return [n, np.array(f, dtype=np.uint64), np.array(p, dtype=np.uint32)]


def _range_depth(lo: int, hi: int) -> int:
    return 1 if hi - lo == 1 else 1 + max(_range_depth(lo, (lo + hi) // 2), _range_depth((lo + hi) // 2, hi))


@oracle("tree_sum", tags={"int", "recursion"},
        about="recursive divide-and-conquer sums of 16-int slices (lengths 16, 1, 5, 11) and their depths")
def tree_sum(a, length, sums, depths):
    s = [int(a[16 * t:16 * t + int(m)].astype(np.int64).sum()) for t, m in enumerate(length)]
    d = [_range_depth(0, int(m)) for m in length]
    return [a, length, np.array(s, dtype=np.int32), np.array(d, dtype=np.int32)]


@oracle("matmul_tile4", tags={"float", "shared", "grid", "heavy"},
        about="NVIDIA's matrixMul with 4x4 tiles, 8x8 floats (more fmas than the ROM holds inlined: shared routine)")
def matmul_tile4(c, a, b, wa, wb):
    n = int(wa)
    out = np.zeros(64, dtype=np.float32)
    for i in range(n):
        for j in range(int(wb)):
            acc = np.float32(0)
            for k in range(n):
                acc = fma(a[i * n + k], b[k * int(wb) + j], acc)
            out[i * int(wb) + j] = acc
    return [out, a, b, None, None]


@oracle("half_arith", tags={"float", "half"},
        about="__half/__half2 arithmetic (add, sub, mul, fma, neg, min, compare; f16x2 mul and add)")
def half_arith(x, out):
    from fractions import Fraction

    def h(v: Fraction) -> np.float16:
        """The nearest half (ties to even): NumPy rounds a float64 to half correctly, and each value
        here is exact in float64 (a check, not an assumption)."""
        f = float(v)
        assert Fraction(f) == v, "the oracle needs the exact value in float64"
        return np.float16(f)

    out = out.copy()
    for t in range(4):
        a, b = np.float16(x[t]), np.float16(x[t + 4])          # cvt.rn.f16.f32
        A, B = Fraction(float(a)), Fraction(float(b))
        row = [h(A + B), h(A - B), h(A * B), h(A * B - A), min(a, b), 1.0 if a < b else 0.0,
               h(Fraction(float(h(A * A))) + A), h(Fraction(float(h(B * B))) + B), a]
        out[9 * t:9 * t + 9] = np.array([float(v) for v in row], dtype=np.float32)
    return [x, out]


# ----------------------------------------------------------------------------- reduced from `qwengpu fuzz`

@oracle("fuzz_inverted_divisor", tags={"int", "convert", "fuzz"},
        about="division and u32->f32 conversion of a bitwise NOT (reduced from qwengpu fuzz)")
def fuzz_inverted_divisor(x, uq, iq, fv):
    xs = ints(x)
    uq = np.array([u32(xs[t]) // u32(~t) for t in range(4)], dtype=np.uint32)
    q = []
    for t in range(4):
        d, n = s32(~xs[t]), xs[t + 4]
        q.append(n if d == 0 or (n == -(1 << 31) and d == -1) else cdiv(n, d))
    fv = np.array([u32(~t) for t in range(4)], dtype=np.float64).astype(np.float32)   # exact, then rounded once
    return [x, uq, np.array(q, dtype=np.int32), fv]


@oracle("fuzz_inverted_select_u64", tags={"int64", "float", "fuzz"},
        about="64-bit remainder by a guarded bitwise NOT, of a value chosen by a float compare (reduced from qwengpu fuzz)")
def fuzz_inverted_select_u64(l, f, q, out):
    res = []
    for t in range(4):
        qt = int(q[t])
        b = u64(~(qt >> (qt & 63)))
        a = u64(int(l[t])) if np.float32(t) >= f[t] else 0
        res.append(a if b == 0 else a % b)
    return [l, f, q, np.array(res, dtype=np.uint64)]


@oracle("fuzz_shared_8", tags={"shared", "sync", "multiwarp", "int64", "fuzz"},
        about="2 blocks of 8 threads: shifted values through shared memory between barriers (reduced from qwengpu fuzz)")
def fuzz_shared_8(ii, il, fi, oi, ol, of):
    oi, ol, of = oi.copy(), ol.copy(), of.copy()
    for blk in range(2):
        sh = [s32(1546137605 << ((t * t) & 31)) for t in range(8)]
        for t in range(8):
            g = blk * 8 + t
            u0 = u32(int(ii[g * 3 + 2])) ^ 2654435769
            u1 = u32(int(ii[g * 3 + 1])) ^ 1013904242
            oi[g * 4:g * 4 + 4] = [int(ii[g * 3]), sh[(t + 7) % 8], s32(u0), s32(u1)]
            ol[g * 2:g * 2 + 2] = [int(il[g * 2]), s64(u64(int(il[g * 2 + 1])) * 2685821657736338717)]
            of[g * 2:g * 2 + 2] = fi[g * 3:g * 3 + 2]
    return [ii, il, fi, oi, ol, of]


@oracle("fuzz_loop_break_not", tags={"int", "loop", "control", "predicate", "fuzz"},
        about="a NOT inside a loop nest left by break after one trip (reduced from qwengpu fuzz)")
def fuzz_loop_break_not(x, f, out):
    return [x, f, np.array([u32(~(u32(int(v)) ^ 2654435769)) for v in x], dtype=np.uint32)]
