"""Oracles of the kernels reduced from `qwengpu fuzz` disagreements."""
from __future__ import annotations

import numpy as np

from .common import cdiv, ints, oracle, s32, s64, u32, u64


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


@oracle("fuzz_loop_exit_shfl", tags={"loop", "control", "warp", "float", "convert", "fuzz"},
        about="lanes leave a loop after different trips, then shuffle a quotient computed after it (reduced from qwengpu fuzz)")
def fuzz_loop_exit_shfl(ii, fi, out, last):
    with np.errstate(all="ignore"):              # inf and nan inputs, as the kernel meets them
        return _loop_exit_shfl(ii, fi)


def _loop_exit_shfl(ii, fi):
    q, n = [], []
    for g in range(8):
        t = g % 4
        u0, u1 = u32(int(ii[g * 3 + 2])) ^ 2654435769, u32(int(ii[g * 3 + 1])) ^ 1013904242
        f0, f1 = fi[g * 3], fi[g * 3 + 1]
        d = u32(u1 << (u1 & 31))
        bound = ((u0 | t) if d == 0 else (u0 | t) % d) & 3
        m = int(ii[g * 3 + 1])
        for k in range(bound):
            m = k
            if f0 != fma32(f1, f0, f0):
                break
        n.append(m)
        q.append(np.float32(0.71642828) / fma32(np.float32(g), f0, np.float32(g)))
    shuffled = [q[g + 2] if g % 4 < 2 else q[g] for g in range(8)]
    return [ii, fi, np.array(shuffled, dtype=np.float32), np.array(n, dtype=np.int32)]


def fma32(a, b, c) -> np.float32:
    """fmaf: a*b + c rounded once to f32 (exact in fractions, then to the nearest f32)."""
    from fractions import Fraction
    a, b, c = (np.float32(x) for x in (a, b, c))
    if not all(np.isfinite(x) for x in (a, b, c)):
        return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    return round_f32(exact)


def round_f32(x) -> np.float32:
    """A rational to the nearest f32, ties to even (one rounding)."""
    from fractions import Fraction
    if x == 0:
        return np.float32(0.0)
    lo = np.float32(float(x))                    # within an ulp of x; step to the nearest
    cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - x) if np.isfinite(c) else Fraction(10 ** 60),
                                     int(np.float32(c).view(np.uint32)) & 1))
    return np.float32(best)


@oracle("fuzz_shl64_merge", tags={"int64", "control", "local", "fuzz"},
        about="a 64-bit value shifted left by 32 in place on one side of a divergent branch (reduced from qwengpu fuzz)")
def fuzz_shl64_merge(ii, il, ou, ol):
    us, ls = [], []
    for t in range(8):
        loc = [(j * t) ^ j for j in range(8)]
        u0, l0 = u32(int(ii[t])) ^ 2654435769, int(il[t])
        if -15 * t >= s32(u32(-7) << (loc[(t * 3) & 7] & 31)):
            u0 = 7 if u32(int(ii[t])) != u32(~u0) else 0
        else:
            l0 = s64(u64(l0) << 32)
        us.append(u0)
        ls.append(l0)
    return [ii, il, np.array(us, dtype=np.uint32), np.array(ls, dtype=np.int64)]
