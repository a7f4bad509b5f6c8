"""What each forward pass of a recorded launch is, in words a student can follow.

A launch on the machine is a stream of tokens (`docs/machine.md`, "The token protocol"); a pass
consumes one and emits the next. What a pass *does* is what its consumed token says: `<exec 2 1110>`
runs bundle 2 (the whole bundle, every unit, in that one pass), `<carry 0 1 3 0c>` writes byte 1 of
a register of lane 3 (a value the bundle computed that must outlive it), `<fpu 2>` (a machine
with a float unit) runs the unit's one datapath again for lane 2, `<memw 1 0 08>` writes a
byte of lane 1's store, `<warp 1>` switches warps, `<release 1>` opens a barrier, `<block 1>` (or
`<go>`, block 0) starts a block. What it emits is what comes next: another carry, the next bundle,
`<halt>` or `<fault ...>`. So one PTX instruction is not one pass: dot's 14 warp-instructions are 3
bundles, and its 19 passes are those 3 executions (one per lane for the atomic, served lane by lane)
plus 8 carries, 4 memory writes and the start.

    label = pass_label(view, 13)
    label.kind, label.text        # "execute", "execute bundle 2 for lanes 1, 2, 3 (the atomic serves lane 1)"
    label.then_kind, label.then   # "memory write", "memory write byte 0 of lane 1"
    label.ptx                     # [(PTX pc, line, text)] of the instructions this pass belongs to
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwengpu.machine.config import LANES
from qwengpu.machine.tokens import parse_token

from .values import pretty_text

#: the kinds of pass, by the token consumed (`<go>` starts block 0) or, for the last pass, emitted
KINDS = ("execute", "float unit", "carry", "memory write", "warp switch", "barrier release", "block start", "halt",
         "fault")

FAULT_KINDS = {0: "read", 1: "write", 2: "misaligned", 3: "atomic"}


@dataclass
class PassLabel:
    """One forward pass, said in words (see the module docstring)."""
    position: int
    kind: str                      # one of KINDS: what the consumed token makes the pass do
    text: str                      # "carry byte 1 of r0 (%r2) for lane 3"
    then_kind: str                 # one of KINDS: what the emitted token says comes next
    then: str                      # "execute bundle 1 for lanes 0, 1, 2, 3"
    bundle: int | None             # the bundle this pass runs or writes back for (None: between bundles)
    lanes: list                    # the lanes it concerns (the lanes run; the lane a carry or write is for)
    ptx: list = field(default_factory=list)     # [(PTX pc, source line, text)] it belongs to
    cuda: list = field(default_factory=list)    # [(CUDA line, text)] they came from (`view.source`), where known

    def __str__(self) -> str:
        at = f" [CUDA line{'s' if len(self.cuda) > 1 else ''} {', '.join(str(n) for n, _ in self.cuda)}]" if self.cuda else ""
        return f"pass {self.position}: {self.text}{at} → then {self.then}"


def lanes_text(lanes) -> str:
    lanes = list(lanes)
    if not lanes:
        return "no lanes"
    return ("lane " if len(lanes) == 1 else "lanes ") + ", ".join(str(l) for l in lanes)


def mask_lanes(mask: int) -> list[int]:
    return [l for l in range(LANES) if mask >> l & 1]


def is_atomic(bundle) -> bool:
    return any(so is not None and so.op.op == "ATOM" for so in bundle.slots)


def served_lanes(bundle, mask: int) -> list[int]:
    """The lanes an EXEC of `bundle` for `mask` serves: all of them, or, for an atomic, the first
    (the others replay the bundle in later passes)."""
    lanes = mask_lanes(mask)
    return lanes[:1] if is_atomic(bundle) else lanes


def _ptx_of(view, pcs) -> list:
    body = view.kernel_fn.body
    return [(p, body[p].line, pretty_text(body[p].text))
            for p in sorted({p for p in pcs if p is not None and 0 <= p < len(body)})]


def _carry_ptx_pc(bundle, j: int):
    _, (slot, _part) = bundle.carries[j]
    so = bundle.slots[slot] if 0 <= slot < len(bundle.slots) else None
    return so.op.ptx_pc if so is not None and so.op.ptx_pc >= 0 else None


def _fpu_ptx_pc(bundle):
    for so in bundle.slots:
        if so is not None and so.op.kind == "fpu" and so.op.ptx_pc >= 0:
            return so.op.ptx_pc
    return None


#: the float unit's ops whose result is a float (FSETP's is a predicate)
FLOAT_RESULTS = ("FADD", "FSUB", "FMUL", "FFMA", "FMIN", "FMAX", "I2F")
#: the tokens that write a bundle's results back after its EXEC
_WRITE_BACK = ("FPU", "CARRY", "MEMW")


def _unit_carry(bundle):
    """(the float unit's op, the carry slot of its result) in `bundle`, or None when the bundle
    carries no unit result."""
    for j, (_, (slot, _part)) in enumerate(bundle.carries):
        so = bundle.slots[slot] if 0 <= slot < len(bundle.slots) else None
        if so is not None and so.op.kind == "fpu":
            return so.op, j
    return None


def unit_result(view, position: int, bundle: int, lane: int) -> str | None:
    """The float unit's result for `lane`, said as a value: "r3 (%f2) = 2.5". Read from the model's
    registers after the bundle's write-back (its carries hold what the unit computed; none when
    the result equals the register's old value), so the label shows the model's own number."""
    found = _unit_carry(view.image.bundles[bundle])
    if found is None:
        return None
    op, j = found
    recs, tokens = view.trace.records, view.trace.tokens
    end = position
    while end + 1 < len(recs) and parse_token(tokens[recs[end + 1].index - 1])[0] in _WRITE_BACK:
        end += 1
    ms = recs[end].machine
    reg = view.image.bundles[bundle].carry_regs[j]
    vals = ms.regs.get((ms.warp, reg))
    if vals is None:
        return None
    word = int(vals[lane]) & 0xFFFFFFFF
    name = f"r{reg} ({view.register_name(view.image.bundles[bundle].carries[j][0])})"
    if op.op in FLOAT_RESULTS:
        return f"{name} = {float_text(word)} for lane {lane}"
    return f"{name} = {'true' if word else 'false'} for lane {lane}"


def float_text(word: int) -> str:
    """A 32-bit word as the float it holds, shortest round-trip form (`2.5`, `-0`, `inf`, `nan`)."""
    x = np.uint32(word).view(np.float32)
    return str(x) if np.isfinite(x) else ("nan" if np.isnan(x) else ("-inf" if x < 0 else "inf"))


def _store_ptx_pc(bundle):
    for so in bundle.slots:
        if so is not None and so.op.kind == "mem" and so.op.ptx_pc >= 0:
            return so.op.ptx_pc
    return None


def token_ptx_pcs(bundles, tok: tuple, pc: int) -> list:
    """The PTX instructions (pcs in the kernel's body) a parsed machine token belongs to, `pc` the
    bundle running when it comes: an EXEC, its bundle's; a CARRY, the instruction that computed
    the value; a MEMW, the store; the others, none."""
    kind = tok[0]
    if kind == "EXEC":
        return list(bundles[tok[1]].ptx_pcs)
    b = bundles[pc] if 0 <= pc < len(bundles) else None
    if b is None:
        return []
    if kind == "CARRY":
        return [_carry_ptx_pc(b, tok[1])] if tok[1] < len(b.carries) else []
    if kind == "MEMW":
        return [_store_ptx_pc(b)]
    if kind == "FPU":
        return [_fpu_ptx_pc(b)]
    if kind == "FAULT":
        return list(b.ptx_pcs)
    return []


def describe_token(view, text: str, pc: int, warp: int):
    """A machine token as (kind, words, bundle, lanes, PTX pcs); `pc` is the bundle running when it
    comes (the one a carry or memory write belongs to), `warp` the current warp."""
    tok = parse_token(text)
    kind = tok[0]
    bundles = view.image.bundles
    b = bundles[pc] if 0 <= pc < len(bundles) else None
    if kind == "EXEC":
        nb = bundles[tok[1]]
        lanes = mask_lanes(tok[2])
        served = served_lanes(nb, tok[2])
        words = f"execute bundle {tok[1]} for {lanes_text(lanes)}"
        if is_atomic(nb) and len(lanes) > 1:
            words += f" (the atomic serves lane {served[0]}; the others run it again after)"
        return "execute", words, tok[1], lanes, list(nb.ptx_pcs)
    if kind == "CARRY":
        j, byte, lane = tok[1], tok[2], tok[3]
        lanes = list(range(LANES)) if lane == "all" else [lane]
        who = "all lanes" if lane == "all" else f"lane {lane}"
        if b is not None and j < len(b.carry_regs):
            held = view.register_name(b.carries[j][0])
            words = f"carry byte {byte} of r{b.carry_regs[j]} ({held}) for {who}: {tok[4]:02x}"
            return "carry", words, pc, lanes, [_carry_ptx_pc(b, j)]
        return "carry", f"carry byte {byte} of carry slot {j} for {who}: {tok[4]:02x}", pc, lanes, []
    if kind == "FPU":
        words = f"float unit: bundle {pc}'s float operation for lane {tok[1]} (its one datapath ran the first lane in the execute pass)"
        return "float unit", words, pc, [tok[1]], [_fpu_ptx_pc(b)] if b is not None else []
    if kind == "MEMW":
        lane, byte = tok[1], tok[2]
        words = f"memory write byte {byte} of lane {lane}'s store: {tok[3]:02x}"
        return "memory write", words, pc, [lane], [_store_ptx_pc(b)] if b is not None else []
    if kind == "WARP":
        return "warp switch", f"warp switch to warp {tok[1]}", None, [], []
    if kind == "RELEASE":
        return "barrier release", f"barrier release: every live lane reached the barrier (epoch {tok[1]})", None, [], []
    if kind == "BLOCK":
        return "block start", f"block start: block {tok[1]}, every lane at the entry bundle", None, [], []
    if kind == "GO":
        return "block start", "block start: block 0 (the launch begins), every lane at the entry bundle", None, [], []
    if kind == "HALT":
        return "halt", "halt: the launch is over", None, [], []
    if kind == "FAULT":
        what = FAULT_KINDS.get(tok[1], f"kind {tok[1]}")
        return "fault", f"fault: lane {tok[2]} ({what})", pc, [tok[2]], list(b.ptx_pcs) if b is not None else []
    return kind.lower(), text, None, [], []


def pass_label(view, position: int) -> PassLabel:
    """What pass `position` of a `MachineView` did (its consumed token) and what it emitted."""
    rec = view.trace.records[position]
    ms = rec.machine
    consumed = view.trace.tokens[rec.index - 1]
    # a consumed EXEC names its own bundle; a carry or write belongs to the bundle running (the
    # control word's pc, which only an EXEC changes), as does an emitted carry or write
    kind, text, bundle, lanes, pcs = describe_token(view, consumed, ms.pc, ms.warp)
    if kind == "memory write":
        where = view.written_bytes(position)
        if where:
            text += " → " + ", ".join(where)
    if kind in ("execute", "float unit") and bundle is not None and lanes:
        # the unit's one datapath runs the first lane in the EXEC pass, lane l in an <fpu l> pass
        result = unit_result(view, position, bundle, lanes[0])
        if result is not None:
            text += f"; the float unit: {result}"
    then_kind, then, _, _, _ = describe_token(view, rec.text, ms.pc, ms.warp)
    if then_kind == "fault" and view.fault is not None:
        then = f"fault: {view.fault}"
    ptx = _ptx_of(view, pcs)
    cuda = []
    src = getattr(view, "source", None)
    if src is not None:
        for ln in sorted({src.line_of_ptx(line) for _, line, _ in ptx} - {None}):
            cuda.append((ln, src.text(ln).strip()))
    return PassLabel(position, kind, text, then_kind, then, bundle, lanes, ptx, cuda)
