"""The lab's cross-checks of a launch recorded from the model (`MachineView.check`) against the
interpreter, where comparable (against the simulator, every token, it uses the runtime's
per-pass check, `qwengpu.runtime.statecheck`): the PTX names of the carried virtual registers
(`ptx_aliases`), the interpreter's per-lane register histories (`register_histories`) and the PTX
instructions the lowering turned into loops (`micro_loop_pcs`, whose carried values can be
intermediate).
"""
from __future__ import annotations

from qwengpu.assembler.lower import lower
from qwengpu.machine.config import LANES
from qwengpu.machine.uops import VReg


# ---------------------------------------------------------------------------------------------
# PTX names of the carried virtual registers


def ptx_aliases(module, spec, kernel_fn, layout) -> dict:
    """{virtual register: (PTX register, half)} where the unoptimised lowering copies the virtual
    register into a PTX register (or it is one). half: 0 = low 32 bits, 1 = high 32 bits."""
    prog = lower(module, spec, kernel_fn, layout)
    out: dict = {}

    def named(v):
        n = v.name
        return (n[:-3], 1) if n.endswith(".hi") else (n, 0)

    seen: dict = {}
    for b in prog.blocks:
        for op in b.ops:
            for d in op.writes():
                if isinstance(d, VReg) and d.name.startswith("%"):
                    out[d] = named(d)
            if op.kind == "alu" and op.op == "MOV" and op.dst and isinstance(op.dst[0], VReg) \
                    and op.dst[0].name.startswith("%") and op.a is not None and isinstance(op.a.value, VReg) \
                    and not op.a.inv and not op.a.value.name.startswith("%"):
                seen.setdefault(op.a.value, set()).add(named(op.dst[0]))
    for v, names in seen.items():
        if len(names) == 1 and v not in out:
            out[v] = next(iter(names))
    return out


def micro_loop_pcs(image, kernel_fn) -> set:
    """PTX instructions the lowering turned into a loop of bundles (a CAS loop, an atomic served one
    lane at a time): a backward jump or branch, not from a PTX branch, over bundles that all run
    that instruction. Values carried inside such a loop can be intermediate (a retry's old value)."""
    bundles = image.bundles
    body = kernel_fn.body
    out: set = set()
    for i, b in enumerate(bundles):
        t = b.term
        targets = [t[1]] if t[0] == "jump" else ([t[2], t[3]] if t[0] == "branch" else [])
        if any(0 <= p < len(body) and body[p].op.startswith("bra") for p in b.ptx_pcs):
            continue
        for j in targets:
            if isinstance(j, int) and j <= i:
                common = set(bundles[j].ptx_pcs)
                for k in range(j, i + 1):
                    common &= set(bundles[k].ptx_pcs)
                out |= common
    return out


def register_histories(ref_view, kernel: str) -> dict:
    """{(block, warp, lane, PTX register): [(value after the write, pc, step)]}, starting with the
    unwritten value 0, from the interpreter's trace (the kernel's own frame only)."""
    H: dict = {}
    for s in ref_view.steps:
        if s.function != kernel or s.depth:
            continue
        for name, vals in s.reg_writes.items():
            for lane in range(LANES):
                if s.reg_write_mask >> lane & 1:
                    H.setdefault((s.block, s.warp, lane, name), [(0, None, -1)]).append((vals[lane], s.pc, s.index))
    return H
