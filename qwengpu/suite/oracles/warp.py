"""Oracles of the warp-level kernels: shuffles, votes, match, activemask."""
from __future__ import annotations

import numpy as np

from .common import ints, oracle, s32, s64


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
