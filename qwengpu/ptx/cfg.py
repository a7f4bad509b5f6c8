"""Control-flow graph of a function and the reconvergence point of every branch.

A divergent branch reconverges at its immediate post-dominator (IPDOM): the first instruction
that every path from the branch must reach. Paths that leave the function (`ret`/`exit`) reach the
virtual exit node, numbered `len(body)`; a branch whose IPDOM is the exit reconverges only when its
lanes have all left. Instructions that cannot reach the exit (an infinite loop) are left out of the
post-dominance of those that can.
"""
from __future__ import annotations

from qwengpu.ptx.ir import Addr, ArgList, Function, Label, Neg, Pair, Reg, Special, Vec


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
    # nodes that cannot reach the exit (infinite loops) keep only themselves + exit, and the nodes
    # that can ignore them: a dead end on one side of a branch must not move the branch's
    # reconvergence to the exit (nvcc emits `L: bra.uni L;` after a loop it proves never runs
    # there; a lane that went in would spin forever anyway)
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
                if s in reach:
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


#: specials with one value for every lane of a warp
WARP_UNIFORM_SPECIALS = {"%ctaid", "%ntid", "%nctaid", "%warpid", "%nwarpid", "%gridid", "%smid", "WARP_SZ"}
#: instructions whose results may differ between the lanes of a warp whatever their operands
_VARYING = {"atom", "shfl", "vote", "match", "activemask", "call", "clock", "clock64"}
_NO_DEST = {"st", "red", "bar", "barrier", "bra", "brx", "ret", "exit", "membar", "fence", "trap", "brkpt",
            "nanosleep", "prefetch"}


def operand_registers(o) -> list[str]:
    """The names of the registers in operand o (the items of a vector, a pair or an argument list,
    an address's base register)."""
    if isinstance(o, Reg):
        return [o.name]
    if isinstance(o, (Vec, ArgList)):
        return [r for i in o.items if i is not None for r in operand_registers(i)]
    if isinstance(o, Pair):
        return [o.first.name, o.second.name]
    if isinstance(o, Neg):
        return [o.reg.name]
    if isinstance(o, Addr):
        return operand_registers(o.base) if isinstance(o.base, Reg) else []
    return []


def _varying_special(o) -> bool:
    if isinstance(o, Special):
        return o.name.partition(".")[0] not in WARP_UNIFORM_SPECIALS
    if isinstance(o, (Vec, ArgList)):
        return any(_varying_special(i) for i in o.items if i is not None)
    return False


def divergent_barriers(fn: Function) -> set[int]:
    """The pcs of the block barriers (`bar.sync`, `bar.red`) that only some live lanes of a warp
    may reach together: those inside the region of a branch (up to its IPDOM) whose lanes may
    disagree, or guarded. A branch may diverge when its predicate or index may differ between the
    lanes of a warp: values from `%tid`, `%laneid`..., atomics, shuffles, votes, calls, local or
    generic loads, anything computed from them or written inside a divergent region (a
    flow-insensitive fixed point: conservative). A barrier outside every such region runs with
    all the warp's live lanes (`docs/interpreter.md`)."""
    n = len(fn.body)
    succ = successors(fn)
    ipdom = immediate_postdominators(fn)

    def region(pc: int) -> set[int]:
        seen, stack = set(), [s for s in succ[pc] if s != ipdom[pc] and s < n]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            stack += [s for s in succ[x] if s != ipdom[pc] and s < n]
        return seen

    varying: set[str] = set()
    divergent: set[int] = set()
    inside: set[int] = set()
    changed = True
    while changed:
        changed = False
        for pc, ins in enumerate(fn.body):
            guard_varies = ins.guard is not None and ins.guard.reg.name in varying
            if ins.op in ("bra", "brx", "ret", "exit") and pc not in divergent:
                index_varies = ins.op == "brx" and any(r in varying for r in operand_registers(ins.operands[0]))
                if guard_varies or index_varies:
                    divergent.add(pc)
                    inside |= region(pc)
                    changed = True
            if ins.op in _NO_DEST or not ins.operands:
                continue
            srcs = [r for o in ins.operands[1:] for r in operand_registers(o)]
            space = getattr(ins.info, "space", "?")
            varies = (guard_varies or pc in inside or ins.op in _VARYING
                      or any(r in varying for r in srcs) or any(_varying_special(o) for o in ins.operands[1:])
                      or (ins.op in ("ld", "ldu") and space in (None, "local")))
            if varies:
                for r in operand_registers(ins.operands[0]):
                    if r not in varying:
                        varying.add(r)
                        changed = True
    return {pc for pc, ins in enumerate(fn.body) if ins.op in ("bar", "barrier")
            and (pc in inside or ins.guard is not None)}


__all__ = ["successors", "immediate_postdominators", "branch_targets", "labels_at", "divergent_barriers", "Label"]
