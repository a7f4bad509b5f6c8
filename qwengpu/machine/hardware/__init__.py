"""The machine as circuits: a compiler `Program` whose forward passes run the token protocol of
`qwengpu.machine.simulator` for one `MachineConfig`. See docs/machine.md for the map.

Sections (top to bottom of the network):

- tokens: the vocabulary and what each token's embedding carries.
- control state (`ctl`, one GDN slot): the current pc/mask (written by EXEC), warp, block,
  barrier epoch, and the prompt's write cursor (AT).
- program ROM: one GDN copy per bundle segment, read just before its unit needs it, written whole
  from a one-word staging copy that the prompt's W tokens fill a byte at a time.
- launch tables: per-warp thread ids and present lanes, per-block ctaid, launch constants.
- register file: one GDN copy per unit (its read ports), written whole by CARRY tokens from a
  staging copy that takes the carried byte.
- units: ALU slots (operand multiplexer, two arithmetic levels), the memory unit (addresses,
  pending addresses for MEMW, line memory, load byte selection, atomics), the cross-lane unit,
  the float unit (`fpu`: beside the others, its result only carried).
- control: next lane states, the lane table, the warp summary, the next control token.
- emitter: which token comes out: a carry byte, a memory byte, or the control token."""
from __future__ import annotations

from qwengpu.compiler.program import topo_order
from qwengpu.compiler.run import emitted

from ..config import ALU, MEM, XLANE, MachineConfig
from ..tokens import ends_launch
from .alu import alu
from .builder import Builder
from .carries import carry_buffer
from .control import control, early
from .control_state import control_state, prompt_enables
from .emitter import emitter, faults
from .fpu import CIRCUIT_OPS, fpu
from .lanes import lane_states
from .mem import mem
from .regfile import register_write
from .tables import tables
from .vocabulary import inputs, vocabulary
from .xlane import xlane

__all__ = ["Hardware", "reference_tokens"]


class Hardware(Builder):
    """The machine's circuits for one `MachineConfig`, built top to bottom of the network (the
    sections of the module docstring); `hw.p` is the compiler `Program`."""

    def __init__(self, cfg: MachineConfig, partial: bool = False):
        super().__init__(cfg)
        inputs(self)
        vocabulary(self)
        control_state(self)
        prompt_enables(self)
        tables(self)
        register_write(self)
        early(self)
        for k, kind in enumerate(cfg.slots):
            if kind == ALU:
                alu(self, k)
            elif kind == MEM:
                mem(self, k)
            elif kind == XLANE:
                xlane(self, k)
            else:                # built after the units it runs beside: it takes the room they leave
                missing = set(cfg.fpu_ops) - set(CIRCUIT_OPS)
                if missing:
                    raise ValueError(f"machine {cfg.name}: the float unit's circuits lack {', '.join(sorted(missing))}")
                self.units.append(fpu(self, k))
        if not partial:
            if self.mem_info is None:
                raise ValueError("the machine needs a memory slot")
            lane_states(self)
            carry_buffer(self)
            faults(self)
            control(self)
            emitter(self)


def reference_tokens(hw: Hardware, prompt: list, max_tokens: int = 10_000) -> list:
    """The tokens the circuits generate after `prompt`, from their reference semantics (every
    neuron at its ideal value, exact Python, no model): the oracle for what the weights compute."""
    order = topo_order(hw.p)
    state: dict = {}

    def step(text):
        env = {"@token": hw.p.token_by_text[text]}
        for node in order:
            node.evaluate(env, state)
        return env

    for t in prompt[:-1]:
        step(t)
    env = step(prompt[-1])
    out = []
    while len(out) < max_tokens:
        tok = emitted(hw.p, env)
        out.append(tok)
        if ends_launch(tok):
            break
        env = step(tok)
    return out
