"""Narrowing the residual: move scheduled nodes within their slack so that fewer features are
live across the widest sublayer boundaries.

The residual's width is the largest number of features live across a sublayer boundary (the
layout is a greedy interval colouring, `compiling.layout`). A variable occupies its features from
the sublayer that writes it to the MLP that erases it after its last reader, so where its writer
and its readers sit decides its interval. The scheduler places nodes as early as they can go and
sinks some of them towards their readers (`_delay_late_nodes`, `_sink_nodes`); both are local
rules. This pass looks at the whole profile instead: pass after pass it moves each node (an MLP
circuit, a memory or attention mixer, a memory spread over layers re-spread from another first
layer) to the place, between its inputs and its first reader, where it lowers
sum_s (live_s / peak)^K the most (K large, so the widest boundaries dominate), respecting MLP
widths, key heads and layer types; a late memory and the late staging memory that reads its word
move as a pair. The layer count never grows: a node only moves within the layers already there.

A place is `(first, last, where)`: the sublayer from which the node writes its outputs, the one
where it last reads its inputs, and what `_place` needs (the sublayer, or a spread memory's unit
layers).
"""
from __future__ import annotations

import numpy as np

from .program import EmbedNode

#: the exponent of the objective: large enough that lowering the widest boundary wins over
#: widening many narrow ones
POWER = 16


def narrow(prog, sched, target, heads_of, cap_at, passes: int = 8) -> int:
    """Move nodes of `sched` (the scheduler's state: `mlp`, `mixers`, `available`, `first_write`
    and `types`, the mixer layers' types) to narrow the residual. `heads_of(node)`: the key or
    attention heads a mixer takes; `cap_at(L)`: the neurons layer L's MLP may take. Each pass
    moves every node that can lower the objective to its best place; returns the moves made."""
    rvars = {v.name: v for v in prog.residual_vars}
    nodes = [n for n in prog.nodes if n.layer is not None and not isinstance(n, EmbedNode)]
    n_sub = 2 * (max([n.layer for n in nodes] + [0]) + 1)
    kept = prog.output_sources()

    def first_sub(n):
        units = getattr(n, "unit_layers", None)
        return 2 * min(units) if units else 2 * n.layer + (1 if n.kind == "mlp" else 0)

    def last_sub(n):
        return 2 * n.layer + (1 if n.kind == "mlp" else 0)

    readers: dict = {}
    for n in nodes:
        for v in n.inputs:
            if v.name in rvars and v.producer is not n:
                readers.setdefault(v.name, []).append(n)

    def born(v):
        if v.producer is None or isinstance(v.producer, EmbedNode) or v.producer.layer is None:
            return 0
        return sched.first_write.get(v.name, first_sub(v.producer)) if getattr(v.producer, "unit_layers", None) \
            else first_sub(v.producer)

    def ready_of(v):                # where a reader may first read v: after its (last) writer
        p = v.producer
        if p is None or isinstance(p, EmbedNode) or p.layer is None:
            return -1
        return last_sub(p)

    def dies(last):                 # the boundary from which the MLP at or after its last reader erased it
        return last if last % 2 == 1 else last + 1

    def death(v, exclude=None):
        if v.name in kept:
            return n_sub
        subs = [last_sub(r) for r in readers.get(v.name, ()) if r is not exclude]
        return dies(max(subs)) if subs else None

    s_axis = np.arange(n_sub)

    def profile():
        live = np.zeros(n_sub)
        for v in rvars.values():
            d = death(v)
            b = born(v)
            if d is None:                    # never read: erased by the next MLP
                d = dies(b + 1)
            live[max(b, 0):d] += v.size
        return live

    mlp_load = {L: sum(len(n.neurons) for n in ns) for L, ns in sched.mlp.items()}
    heads_load = {L: sum(heads_of(n) for n in ns) for L, ns in sched.mixers.items()}
    live = profile()
    moves = 0
    # a late memory written with the word a late staging memory reads for it (the ROM segments):
    # they move together, the stage just before the memory, which single moves cannot find
    pairs = []
    for n in nodes:
        if n.kind == "mlp" or not getattr(n, "late", False) or getattr(n, "unit_layers", None):
            continue
        for v in n.inputs:
            p = v.producer
            if (p is not None and p is not n and p.kind != "mlp" and getattr(p, "late", False)
                    and all(r is n for w in p.outputs for r in readers.get(w.name, ()))):
                pairs.append((n, p))

    def places(n):
        ready = max([ready_of(v) for v in n.inputs if v.name in rvars and v.producer is not n] + [-1])
        firsts = [first_sub(r) for v in n.outputs for r in readers.get(v.name, ())]
        if not firsts and not any(v.name in rvars for v in n.outputs):
            return []
        first = min(firsts) if firsts else n_sub
        if getattr(n, "unit_layers", None):
            return _spreads(n, ready, first, sched, target, n_sub, heads_load)
        return _positions(n, ready, first, sched, target, n_sub, mlp_load, heads_load, heads_of, cap_at)

    def place(n, where):
        if getattr(n, "unit_layers", None):
            _respread(n, where, sched, heads_load, target)
        else:
            _move(n, where, sched, mlp_load, heads_load, heads_of, target)

    for _ in range(passes):
        moved = 0
        for n in nodes:
            peak = live.max()
            cand = places(n)
            if not cand:
                continue
            here, here_last = first_sub(n), last_sub(n)
            P = np.array([c[0] for c in cand])       # where the outputs are first written
            Q = np.array([c[1] for c in cand])       # where the inputs are last read
            delta = np.zeros((len(P), n_sub))
            for v in n.outputs:
                d = death(v) if v.name in rvars else None
                if d is None:
                    continue
                delta -= v.size * ((s_axis >= here) & (s_axis < d))
                delta += v.size * ((s_axis[None, :] >= P[:, None]) & (s_axis[None, :] < d))
            for v in n.inputs:
                if v.name not in rvars or v.producer is n or v.name in kept:
                    continue
                others = death(v, exclude=n)
                others = -1 if others is None else others
                b = max(born(v), 0)
                old = max(others, dies(here_last))
                new = np.maximum(others, np.where(Q % 2 == 1, Q, Q + 1))
                delta -= v.size * ((s_axis >= b) & (s_axis < old))
                delta += v.size * ((s_axis[None, :] >= b) & (s_axis[None, :] < new[:, None]))
            base_obj = np.sum((live / peak) ** POWER)
            objs = np.sum(((live[None, :] + delta) / peak) ** POWER, axis=1)
            i = int(np.argmin(objs))
            if objs[i] < base_obj * (1 - 1e-9):
                place(n, cand[i][2])
                live = live + delta[i]
                moved += 1
        for n, stage in pairs:
            if _move_pair(n, stage, place, profile, places):
                live = profile()
                moved += 1
        moves += moved
        if not moved:
            break
    return moves


def _positions(n, ready, first, sched, target, n_sub, mlp_load, heads_load, heads_of, cap_at):
    """The places of a node (not spread): a sublayer of its kind after its inputs (`ready`),
    before its first reader, with room."""
    here = 2 * n.layer + (1 if n.kind == "mlp" else 0)
    lo = max(ready + 1, 2 * getattr(n, "min_layer", 0))
    out = []
    if n.kind == "mlp":
        size = len(n.neurons)
        for s in range(lo, min(first, n_sub)):
            if s % 2 == 1 and s != here:
                cap = cap_at(s // 2)
                if not cap or mlp_load.get(s // 2, 0) + size <= cap:
                    out.append((s, s, s))
        return out
    want = "linear_attention" if n.kind == "gdn" else "full_attention"
    kh = heads_of(n)
    cap = (target.linear_key_heads or target.gdn_head_budget) if want == "linear_attention" else target.attn_heads
    for s in range(lo, min(first, n_sub)):
        if s % 2 == 1 or s == here:
            continue
        L = s // 2
        if target.layer_types:
            t = target.layer_types[L % len(target.layer_types)]
        else:
            t = sched.types.get(L, want) if sched.mixers.get(L) else want
        if t == want and not (cap and heads_load.get(L, 0) + kh > cap):
            out.append((s, s, s))
    return out


def _move(n, s, sched, mlp_load, heads_load, heads_of, target):
    L = s // 2
    if n.kind == "mlp":
        sched.mlp[n.layer].remove(n)
        mlp_load[n.layer] -= len(n.neurons)
        sched.mlp.setdefault(L, []).append(n)
        mlp_load[L] = mlp_load.get(L, 0) + len(n.neurons)
    else:
        kh = heads_of(n)
        sched.mixers[n.layer].remove(n)
        heads_load[n.layer] -= kh
        if not sched.mixers[n.layer] and not target.layer_types:
            sched.types.pop(n.layer, None)
        sched.mixers.setdefault(L, []).append(n)
        heads_load[L] = heads_load.get(L, 0) + kh
        sched.types[L] = "linear_attention" if n.kind == "gdn" else "full_attention"
    n.layer = L
    for v in n.outputs:
        sched.available[v.name] = s


def _spreads(n, ready, first, sched, target, n_sub, heads_load):
    """The places of a memory spread over layers: its units filled into the free key heads of
    consecutive GDN layers from each possible first layer on, the last before its first reader."""
    cap = target.linear_key_heads
    if not cap:
        return []
    mine: dict = {}
    for L in n.unit_layers:
        mine[L] = mine.get(L, 0) + 1
    units = len(n.unit_layers)
    out = []
    for L0 in range(max(ready + 2, 0) // 2, n_sub // 2):
        layers, L = [], L0
        while len(layers) < units and 2 * L < first:
            t = (target.layer_types[L % len(target.layer_types)] if target.layer_types else
                 (sched.types.get(L, "linear_attention") if [m for m in sched.mixers.get(L, []) if m is not n]
                  else "linear_attention"))
            free = cap - heads_load.get(L, 0) + mine.get(L, 0)
            if t == "linear_attention" and free > 0:
                layers += [L] * min(free, units - len(layers))
            L += 1
        if len(layers) < units or 2 * layers[-1] >= first:
            break
        if layers != list(n.unit_layers):
            out.append((2 * layers[0], 2 * layers[-1], layers))
    return out


def _respread(n, layers, sched, heads_load, target):
    for L in set(n.unit_layers):
        heads_load[L] -= n.unit_layers.count(L)
        sched.mixers[L].remove(n)
        if not sched.mixers[L] and not target.layer_types:
            sched.types.pop(L, None)
    for L in set(layers):
        heads_load[L] = heads_load.get(L, 0) + layers.count(L)
        sched.mixers.setdefault(L, []).append(n)
        sched.types[L] = "linear_attention"
    n.unit_layers = list(layers)
    n.layer = layers[-1]
    for v in n.outputs:
        sched.available[v.name] = 2 * layers[-1]
        sched.first_write[v.name] = 2 * layers[0]


def _move_pair(n, stage, place, profile, places) -> bool:
    """Try every place of the late memory `n` with its staging memory re-placed as late as it
    can go before it; keep the best if it narrows the residual. True when moved."""
    def where(x):
        return list(x.unit_layers) if getattr(x, "unit_layers", None) else 2 * x.layer + (x.kind == "mlp")

    home_n, home_s = where(n), where(stage)
    live0 = profile()
    peak = live0.max()
    best = (np.sum((live0 / peak) ** POWER) * (1 - 1e-9), None)
    early = places(stage)
    if early:                   # the stage out of the way (as early as it goes) frees n's places after it
        place(stage, min(early, key=lambda c: c[1])[2])
    for c_n in places(n):
        place(n, c_n[2])
        later = [c for c in places(stage) if c[1] < 2 * n.layer]
        if later:
            place(stage, max(later, key=lambda c: c[1])[2])
            obj = np.sum((profile() / peak) ** POWER)
            if obj < best[0]:
                best = (obj, (c_n[2], where(stage)))
    w_n, w_s = best[1] if best[1] is not None else (home_n, home_s)
    place(stage, w_s)          # (the stage first, out of n's way, then again after n: place checks nothing)
    place(n, w_n)
    place(stage, w_s)
    return best[1] is not None
