"""Control-flow graph of a function and the reconvergence point of every branch.

A divergent branch reconverges at its immediate post-dominator (IPDOM): the first instruction
that every path from the branch must reach. Paths that leave the function (`ret`/`exit`) reach the
virtual exit node, numbered `len(body)`; a branch whose IPDOM is the exit reconverges only when its
lanes have all left.
"""
from __future__ import annotations

from qwengpu.ptx.ir import Function, Label


def successors(fn: Function) -> list[list[int]]:
    """Successor pcs of every instruction (the exit node is `len(fn.body)`)."""
    n = len(fn.body)
    succ: list[list[int]] = []
    for pc, ins in enumerate(fn.body):
        nxt = pc + 1
        guarded = ins.guard is not None
        if ins.op == "bra":
            tgt = fn.labels[ins.operands[0].name]
            s = [tgt, nxt] if guarded else [tgt]
        elif ins.op == "brx":
            s = [fn.labels[t] for t in fn.branch_targets[ins.operands[1].name]]
            if guarded:
                s.append(nxt)
        elif ins.op in ("ret", "exit", "trap"):
            s = [n, nxt] if guarded else [n]
        else:
            s = [nxt]
        succ.append(sorted(set(min(x, n) for x in s)))
    return succ


def immediate_postdominators(fn: Function) -> list[int]:
    """`ipdom[pc]` for every instruction: the pc where lanes diverging at `pc` reconverge."""
    n = len(fn.body)
    succ = successors(fn)
    preds: list[list[int]] = [[] for _ in range(n + 1)]
    for pc, ss in enumerate(succ):
        for s in ss:
            preds[s].append(pc)
    # Post-dominator sets by iterative dataflow over bit masks (functions are small).
    full = (1 << (n + 1)) - 1
    pdom = [full] * (n + 1)
    pdom[n] = 1 << n
    # nodes that cannot reach the exit (infinite loops) keep only themselves + exit
    reach = {n}
    stack = [n]
    while stack:
        x = stack.pop()
        for p in preds[x]:
            if p not in reach:
                reach.add(p)
                stack.append(p)
    for pc in range(n):
        if pc not in reach:
            pdom[pc] = (1 << pc) | (1 << n)
    order = [pc for pc in reversed(range(n)) if pc in reach]
    changed = True
    while changed:
        changed = False
        for pc in order:
            acc = full
            for s in succ[pc]:
                acc &= pdom[s]
            new = acc | (1 << pc)
            if new != pdom[pc]:
                pdom[pc] = new
                changed = True
    ipdom = []
    for pc in range(n):
        strict = pdom[pc] & ~(1 << pc)
        # the immediate post-dominator is the strict post-dominator that all others post-dominate:
        # the one with the largest post-dominator set among the candidates
        best, best_size = n, -1
        x = strict
        while x:
            low = x & -x
            cand = low.bit_length() - 1
            x ^= low
            size = bin(pdom[cand]).count("1")
            if size > best_size:
                best, best_size = cand, size
        ipdom.append(best)
    return ipdom


def branch_targets(fn: Function, pc: int) -> list[int]:
    ins = fn.body[pc]
    if ins.op == "bra":
        return [fn.labels[ins.operands[0].name]]
    if ins.op == "brx":
        return [fn.labels[t] for t in fn.branch_targets[ins.operands[1].name]]
    return []


def labels_at(fn: Function) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for name, pc in fn.labels.items():
        out.setdefault(pc, []).append(name)
    return out


__all__ = ["successors", "immediate_postdominators", "branch_targets", "labels_at", "Label"]
