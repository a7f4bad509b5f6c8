"""Oracles of the control-flow kernels: divergence, loops, switches, device calls, local arrays,
predication, 3D blocks."""
from __future__ import annotations

import numpy as np

from .common import cdiv, crem, ints, oracle, s32, u32


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


@oracle("block_3d", tags={"grid"}, about="3D block 2x2x2 in a 1x1x2 grid: .z special registers")
def block_3d(out):
    out = out.copy()
    for bz in range(2):
        for tz in range(2):
            for ty in range(2):
                for tx in range(2):
                    out[bz * 8 + (tz * 2 + ty) * 2 + tx] = tx + 10 * ty + 100 * tz + 1000 * bz + 10000 * 2
    return [out]
