"""Oracles of the memory-space kernels: constant tables, device arrays, structs by value, dynamic
shared memory, vector loads, gathers and pointer chasing."""
from __future__ import annotations

import numpy as np

from .._fp import fma
from .common import ints, oracle, u32


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


@oracle("conv_row_const", tags={"const", "global_var", "shared", "sync", "multiwarp", "grid", "float", "atomics"},
        about="separable convolution's row pass: a __constant__ filter and a __device__ counter set from the spec",
        symbols=True)
def conv_row_const(src, dst, width, symbols):
    radius, tile = 2, 8
    filt = symbols["c_row_filter"]
    zeros = int(symbols["g_apron_zeros"][0])
    width, dst = int(width), dst.copy()

    def at(i):            # the row, zero beyond its ends (the apron's zeros)
        return src[i] if 0 <= i < width else np.float32(0)

    for x in range(min(width, len(dst))):
        s = np.float32(0)
        for k in range(-radius, radius + 1):          # nvcc's order: the filter's last tap first, fused
            s = fma(filt[radius - k], at(x + k), s)
        dst[x] = s
    for block_start in range(0, len(dst), tile):      # threads 0 and 1 of each block load the apron
        for t in range(radius):
            x = block_start + t
            zeros += (x - radius < 0) + (x + tile >= width)
    return [src, dst, None], {"c_row_filter": filt, "g_apron_zeros": np.array([u32(zeros)], dtype=np.uint32)}
