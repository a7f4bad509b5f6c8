"""Oracles of the register-spilling and recursion kernels."""
from __future__ import annotations

import math

import numpy as np

from .._fp import fma
from .common import fmax, fmin, oracle


@oracle("live48", tags={"float", "spill"},
        about="48 floats per thread live at once (a mirrored fminf/fmaxf stage): more values than registers")
def live48(x, y):
    y = y.copy()
    n = 48
    for t in range(len(x) // n):
        v = x[t * n:(t + 1) * n]
        for k in range(n // 2):
            y[t * n + k] = fmax(v[k], v[n - 1 - k])
            y[t * n + n - 1 - k] = fmin(v[k], v[n - 1 - k])
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
