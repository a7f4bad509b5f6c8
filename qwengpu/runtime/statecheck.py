"""The model's state checked against the machine's specification, pass by pass.

`ReferenceRun` drives the token-level simulator with its own tokens and takes, after every consumed
token, the state the model must hold (`Simulator.held_state`: EXEC sets pc and mask and the lanes,
CARRY writes one register byte, MEMW one memory byte, ...); `compare_states` lists where a state
read from the model (`qwengpu.runtime.readback`) differs from it. Both engines' runs use them:
`StateCheck` (`run(..., check_states=True)`, `qwengpu verify --check-states`) at the end of every
pass, the lab (`MachineView.check`) at every token.
"""
from __future__ import annotations

from dataclasses import dataclass

from qwengpu.semantics.faults import ExecutionFault
from qwengpu.machine.config import LANES
from qwengpu.machine.layout import LINE
from qwengpu.machine.simulator import MachineState, Simulator
from qwengpu.machine.tokens import IN_PASS, PASS_KINDS

from .readback import MachineReader, layer_states

#: the parts of a machine state `compare_states` compares
PARTS = ("control", "lanes", "registers", "memory")


@dataclass
class Mismatch:
    token: int                     # sequence index of the token whose pass disagrees
    position: int
    what: str                      # "pc", "register r3 of warp 0, lane 2", "memory byte at machine address 0x20 (line 2)", "token"
    expected: object
    got: object
    against: str = "simulator"     # or "interpreter"

    def __str__(self) -> str:
        return (f"position {self.position} (token {self.token}): {self.what} decodes to {self.got!r}, "
                f"the {self.against} has {self.expected!r}")


def compare_states(position: int, index: int, got: MachineState, want: MachineState, lanes_used: int,
                   parts=PARTS) -> list:
    """Differences between the state decoded from the model and the reference state, in `parts`
    (a register never written reads as 0: a pass writing 0 to it emits no token)."""
    out = []
    if "control" in parts:
        for what in ("pc", "mask", "warp", "block", "epoch"):
            a, b = getattr(want, what), getattr(got, what)
            if a != b:
                out.append(Mismatch(index, position, what, a, b))
    if "lanes" in parts:
        for i in range(lanes_used):
            if got.lanes[i] != want.lanes[i]:
                out.append(Mismatch(index, position, f"lane {i % LANES} of warp {i // LANES}", want.lanes[i],
                                    got.lanes[i]))
    if "registers" in parts:
        for key in sorted(set(got.regs) | set(want.regs)):
            a = list(want.regs.get(key, [0] * LANES))
            b = list(got.regs.get(key, [0] * LANES))
            if a != b:
                lane = next(i for i in range(LANES) if a[i] != b[i])
                out.append(Mismatch(index, position, f"register r{key[1]} of warp {key[0]}, lane {lane}", a[lane],
                                    b[lane]))
    if "memory" in parts and got.memory != want.memory:
        i = next(k for k in range(len(want.memory)) if want.memory[k] != got.memory[k])
        out.append(Mismatch(index, position, f"memory byte at machine address 0x{i:x} (line {i // LINE})", want.memory[i], got.memory[i]))
    return out


class ReferenceRun:
    """The simulator driven with its own tokens, kept between calls: `upto(limit)` extends its
    passes only as far as asked (a recording still running asks again with more passes).
    `ends[i]`: whether the pass at position i ends a bundle's pass (it consumed the bundle's EXEC,
    CARRY or MEMW tokens and emits the next control token: the bundle's writes are all held), and
    `stored[i]` whether that bundle's pass wrote memory (MEMW tokens)."""

    def __init__(self, image, module, spec, max_tokens: int):
        self.sim = Simulator(image, module, spec, max_tokens=max_tokens)
        self.tokens: list = []
        self.states: list = []
        self.errors: list = []
        self.ends: list = []
        self.stored: list = []
        self._next = ("GO",)
        self._storing = False

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
            in_pass = tok[0] in PASS_KINDS
            self._storing = in_pass and (self._storing and tok[0] != "EXEC" or out[0] == "MEMW")
            self.ends.append(in_pass and out[0] not in IN_PASS)
            self.stored.append(self.ends[-1] and self._storing)
            if in_pass and out[0] not in IN_PASS + ("FAULT",):
                for key, vals in sim.regs.items():         # the pass is complete: same as the simulator
                    if list(held.regs.get(key, [0] * LANES)) != list(vals):
                        self.errors.append(f"replayed register {key} differs from the simulator's")
                if held.memory != bytes(sim.memory):
                    self.errors.append("replayed memory differs from the simulator's")
            self._next = None if out[0] in ("HALT", "FAULT") else out
        n = min(limit, len(self.tokens))
        return self.tokens[:n], self.states[:n], list(self.errors)


class StateCheck:
    """`run(..., check_states=True)`: at the end of every bundle's pass, the registers read from the
    model's GDN states against the state the simulator says the model holds (`ReferenceRun`), and
    the machine memory too after a pass that stored; raises `ExecutionFault` at the first
    difference. `checked`, `memory_checked`: the passes compared."""

    def __init__(self, machine, img, module, spec, max_tokens: int):
        self.reference = ReferenceRun(img, module, spec, max_tokens)
        self.reader = MachineReader(machine.placements)
        self.kernel = img.kernel
        self.checked = 0
        self.memory_checked = 0

    def __call__(self, index: int, text: str, state):
        ref = self.reference
        ref.upto(index + 1)
        if index >= len(ref.tokens) or not ref.ends[index]:
            return
        want = ref.states[index]
        get = layer_states(state)
        parts = ("registers", "memory") if ref.stored[index] else ("registers",)
        got = MachineState(regs=self.reader.registers(get),
                           memory=self.reader.memory(get)[0] if ref.stored[index] else want.memory)
        found = compare_states(index, index, got, want, 0, parts)
        if found:
            m = found[0]
            raise ExecutionFault(f"after the pass of bundle {want.pc} (generated token {index}) the model's "
                                 f"{m.what} is {m.got}; the simulator has {m.expected}", kernel=self.kernel)
        self.checked += 1
        self.memory_checked += ref.stored[index]
