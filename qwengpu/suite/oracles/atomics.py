"""Oracles of the atomics kernels: global and shared atomics, inc/dec, exchange and CAS, 64-bit
atomics."""
from __future__ import annotations

import numpy as np

from .common import ints, oracle, s32, u32, u64


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
