"""Oracles of the kernels that need the course machine (`compact-fpu-course`: 64 threads per block,
global 32 KiB, shared 8 KiB, local 256 B a thread, const 4 KiB; docs/memory_sizes.md): a course's
first kernels at their own sizes, each refused by the built-in machine."""
from __future__ import annotations

import numpy as np

from .._fp import fma
from .common import oracle

#: the geometry these kernels name (`Oracle.machine`)
COURSE = "compact-fpu-course"


@oracle("scalar_prod_shared", tags={"float", "shared", "sync", "grid", "multiwarp", "loop", "heavy", "course"},
        machine=COURSE,
        about="scalarProd's shape: a pair of 1,100 floats, grid-stride over 2 blocks of 64, a 4 KiB shared accumulator tree")
def scalar_prod_shared(out, a, b, pairs, length):
    slots, n = 1024, int(length)
    out = out.copy()
    for p in range(int(pairs)):
        x, y = a[p * n:(p + 1) * n], b[p * n:(p + 1) * n]
        partial = []
        for s in range(slots):
            acc = np.float32(0)
            for i in range(s, n, slots):          # acc += x*y contracts to fma
                acc = fma(x[i], y[i], acc)
            partial.append(acc)
        half = slots // 2
        while half:
            for s in range(half):
                partial[s] = np.float32(partial[s] + partial[s + half])
            half //= 2
        out[p] = partial[0]
    return [out, a, b, None, None]


@oracle("histogram64_shared", tags={"int", "int8", "shared", "sync", "grid", "multiwarp", "atomics", "heavy", "course"},
        machine=COURSE,
        about="histogram64's shape: 64 bins of bytes >> 2, 2 blocks of 64 threads, per-thread byte counters in 4 KiB of shared")
def histogram64_shared(partial, total, words, count):
    blocks, threads = len(partial) // 64, 64
    partial, total = partial.copy(), total.copy()
    for blk in range(blocks):
        bins = [0] * 64
        for t in range(threads):
            for i in range(blk * threads + t, int(count), blocks * threads):
                w = int(words[i])
                for k in range(4):
                    bins[(w >> (8 * k + 2)) & 63] += 1
        partial[blk * 64:(blk + 1) * 64] = bins
        total += np.array(bins, dtype=np.uint32)
    return [partial, total, words, None]


@oracle("vector_add_512", tags={"float", "grid", "multiwarp", "course"}, machine=COURSE,
        about="c = a + b over 512 floats (6 KiB of global memory), 8 blocks of 64 threads")
def vector_add_512(a, b, c, n):
    c = c.copy()
    m = int(n)
    c[:m] = (a[:m] + b[:m]).astype(np.float32)
    return [a, b, c, None]


@oracle("matmul_tile8x8", tags={"float", "shared", "sync", "grid", "multiwarp", "heavy", "course"}, machine=COURSE,
        about="matrixMul's shape: 16x16 floats, 2x2 blocks of 8x8 threads, 8x8 tiles of A and B in shared memory")
def matmul_tile8x8(c, a, b, n):
    n = int(n)
    c = np.zeros_like(c)
    for i in range(n):
        for j in range(n):
            acc = np.float32(0)
            for k in range(n):                    # step by step along k, unrolled fmas
                acc = fma(a[i * n + k], b[k * n + j], acc)
            c[i * n + j] = acc
    return [c, a, b, None]
