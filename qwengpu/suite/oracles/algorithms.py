"""Oracles of the algorithm kernels: Collatz, gcd, CRC-32, FNV, reductions, scans, sorts, histograms,
matrix-vector, grids."""
from __future__ import annotations

import math
import zlib

import numpy as np

from .._fp import fma
from .common import ints, oracle, s32, u32


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
