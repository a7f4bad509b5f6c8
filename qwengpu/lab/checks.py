"""The lab's cross-checks of a launch recorded from the model (`MachineView.check`):

* against the simulator, every token: `ReferenceRun` drives the token-level simulator with its
  own tokens and takes, after every consumed token, the state the model must hold
  (`Simulator.held_state`); `compare_states` lists where a decoded state differs;
* against the interpreter, where comparable: the PTX names of the carried virtual registers
  (`ptx_aliases`), the interpreter's per-lane register histories (`register_histories`) and the PTX
  instructions the lowering turned into loops (`micro_loop_pcs`, whose carried values can be
  intermediate).
"""
from __future__ import annotations

from qwengpu.assembler.lower import lower
from qwengpu.machine.config import LANES
from qwengpu.machine.simulator import Simulator
from qwengpu.machine.uops import VReg

from .record import MachineState, Mismatch


class ReferenceRun:
    """The simulator driven with its own tokens, kept between calls: `upto(limit)` extends its
    passes only as far as asked (a recording still running asks again with more passes)."""

    def __init__(self, image, module, spec, max_tokens: int):
        self.sim = Simulator(image, module, spec, max_tokens=max_tokens)
        self.tokens: list = []
        self.states: list = []
        self.errors: list = []
        self._next = ("GO",)

    def upto(self, limit: int) -> tuple[list, list, list]:
        """(the tokens it emits, the state the model must hold after each consumed token, replay
        errors: the held state differing from the simulator's own at the end of a pass, a bug of
        the simulator's token semantics) for its first `limit` passes (fewer where it stops)."""
        sim = self.sim
        while len(self.tokens) < limit and self._next is not None:
            tok = self._next
            out = sim.step(tok)
            held = sim.held_state()
            self.states.append(held)
            self.tokens.append(out)
            if tok[0] in ("EXEC", "CARRY", "MEMW") and out[0] not in ("CARRY", "MEMW", "FAULT"):
                for key, vals in sim.regs.items():         # the pass is complete: same as the simulator
                    if list(held.regs.get(key, [0] * LANES)) != list(vals):
                        self.errors.append(f"replayed register {key} differs from the simulator's")
                if held.memory != bytes(sim.memory):
                    self.errors.append("replayed memory differs from the simulator's")
            self._next = None if out[0] in ("HALT", "FAULT") else out
        n = min(limit, len(self.tokens))
        return self.tokens[:n], self.states[:n], list(self.errors)


def compare_states(position: int, index: int, got: MachineState, want: MachineState, lanes_used: int) -> list:
    """Differences between the state decoded from the model and the reference state."""
    out = []
    for what in ("pc", "mask", "warp", "block", "epoch"):
        a, b = getattr(want, what), getattr(got, what)
        if a != b:
            out.append(Mismatch(index, position, what, a, b))
    for i in range(lanes_used):
        if got.lanes[i] != want.lanes[i]:
            out.append(Mismatch(index, position, f"lane {i % LANES} of warp {i // LANES}", want.lanes[i], got.lanes[i]))
    for key in sorted(set(got.regs) | set(want.regs)):
        a = list(want.regs.get(key, [0] * LANES))
        b = list(got.regs.get(key, [0] * LANES))
        if a != b:
            lane = next(i for i in range(LANES) if a[i] != b[i])
            out.append(Mismatch(index, position, f"register r{key[1]} of warp {key[0]}, lane {lane}", a[lane], b[lane]))
    if got.memory != want.memory:
        i = next(k for k in range(len(want.memory)) if want.memory[k] != got.memory[k])
        out.append(Mismatch(index, position, f"memory byte {i} (line {i // 16})", want.memory[i], got.memory[i]))
    return out


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
