"""The program image: the bundles the machine runs, as the assembler leaves them and the hardware,
the simulator and the prompt read them.

A bundle holds one micro-op per unit (`SlotOp`, `None` for an idle unit) with the source of each
operand (`Source`: a register read port, an earlier unit of the same bundle, an immediate, a
special register), its terminator, and the registers it reads (ports) and writes back (carries).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .config import ALU, FPU, MEM, XLANE, MachineConfig
from .uops import MicroOp

#: register read ports per unit kind, and the terminator's (the float unit has none of its own: it
#: reads the ports of the first two ALU slots, `format.fpu_port_slots`)
PORTS = {ALU: 2, MEM: 4, XLANE: 3, FPU: 0}
TERM_PORTS = 1


@dataclass(frozen=True)
class Source:
    """Where a unit's operand comes from: a read port, an earlier slot's result (or carry flag),
    an immediate, or a special value; `inv` = bitwise NOT."""
    kind: str                 # "port" | "sport" (another slot's port: index (slot, port)) | "slot" | "flag" | "imm" | "special"
    index: object = 0         # port number, slot number, immediate value, special name
    inv: bool = False

    def __repr__(self) -> str:
        n = "~" if self.inv else ""
        if self.kind == "imm":
            return f"{n}#{self.index:#x}"
        if self.kind == "special":
            return f"{n}%{self.index}"
        return f"{n}{self.kind}{self.index}"


@dataclass
class SlotOp:
    op: MicroOp
    srcs: dict                # operand name -> Source (a, b, c, guard, addr_lo, addr_hi, data_lo, ...)


@dataclass
class Bundle:
    index: int
    label: str
    slots: list               # SlotOp | None per unit
    port_regs: list           # VRegs read through ports, by port
    term: tuple               # resolved terminator (targets as bundle indices)
    term_src: Source | None = None
    writes: dict = field(default_factory=dict)      # VReg -> slot (last writer in the bundle)
    carries: list = field(default_factory=list)     # [(VReg, slot)] written back
    ports: list = field(default_factory=list)       # physical registers read, by port
    carry_regs: list = field(default_factory=list)  # physical registers written, by carry slot
    ptx_pcs: list = field(default_factory=list)

    def ops(self):
        return [s for s in self.slots if s is not None]


@dataclass
class Image:
    """The program image: bundles plus what the runtime and lab need to read them."""
    bundles: list[Bundle]
    config: MachineConfig
    nregs: int                 # physical registers used
    reg_of: dict               # VReg -> physical register
    layout: object
    kernel: str
    entry: int = 0

    def disassemble(self) -> str:
        lines = []
        for b in self.bundles:
            lines.append(f"{b.index:4}: [{b.label}] ports={b.ports} carries={b.carry_regs} term={b.term} {b.term_src or ''}")
            for s, so in enumerate(b.slots):
                if so is not None:
                    srcs = ", ".join(f"{k}={v}" for k, v in so.srcs.items()) + f" ports={b.ports[s]}"
                    lines.append(f"        {s}: {so.op.op} {so.op.extra.get('mode', '')} -> {so.op.dst} ({srcs})")
        return "\n".join(lines)
