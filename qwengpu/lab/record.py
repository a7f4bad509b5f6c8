"""What a launch on the model hands the lab: one `ModelRecord` per generated token, and how GDN
states are read.

`qwengpu.lab.trace_launch(program, launch, engine="compact" | "model")` runs the forward passes once
(`qwengpu.lab.recorder.record_launch`) and keeps a `ModelTrace`:

    ModelTrace(
        tokens=[...],          # every token's text: the prompt, then the generated ones
        layers=[LayerInfo(index, kind, role), ...],   # every layer: "linear_attention" (GDN) with
                               # the machine memories it holds, or "full_attention" (inert: MLP only)
        records=[ModelRecord(...), ...],               # one per generated token, in order
    )

    ModelRecord(
        index=73, token=1234, text="<carry 0 0 1 02>",   # this pass emitted token `text`, at
                               # sequence index `index` (the prompt comes first)
        position=4,            # the pass's number: position 0 consumed the prompt's last token <go>,
                               # position i the generated token i - 1
        machine=MachineState(pc=0, mask=0b1111, warp=0, block=0, epoch=0,
                             lanes=[(pc, state) per warp x lane], regs={(warp, reg): [lane values]},
                             memory=b"..."),   # decoded from the model's GDN states after the pass
        margins={"mem": 16.0, ...},            # the code margin of every memory (of 16)
    )

A memory's place in the model is its `qwengpu.compiler.placement.MemoryPlacement` (the one layout:
slot s is key row s of its bank; field f of the word sits in a value head, columns 2j (the "1"
rail) and 2j + 1 (the "0" rail) for its bit j). `decode_state` reads every slot's word with the
compiler's decoder (`decode_words`, as the circuits read: a bit is 1 when its 1-rail exceeds half
the rail level; the margin is the distance from that level; a slot whose rails are all below a
quarter of the level was never written), labelled for the lab (`slot_label`, `memory_role`).

The lab never invents these records: with engine="interp" there is no `ModelTrace`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwengpu.compiler.placement import MemoryPlacement, decode_words
from qwengpu.machine.format import WARP_BITS
from qwengpu.machine.layout import MemoryMap
from qwengpu.machine.simulator import LANE_BARRIER, LANE_EPOCH, LANE_RUN, MachineState  # noqa: F401 (the record's state)
from qwengpu.runtime.statecheck import Mismatch  # noqa: F401 (a record's check)


# -- the memories as the lab labels them

ROLES = {
    "ctl": "control word: pc, mask, warp, block, epoch",
    "ltab": "launch table: lanes' thread ids per warp",
    "btab": "block table: ctaid per block",
    "conf": "launch configuration",
    "rom.tail": "ROM: terminator, carries, ports (slot = bundle pc)",
    "pa": "pending addresses of the last memory op",
    "mem": "machine memory: 256 lines of 16 bytes (slot = line)",
    "mbuf": "store buffer",
    "reg.term": "register file copy read by the terminator",
    "lanes": "lane table: next pc and state of every lane",
    "cbuf": "carry buffer: the values a bundle's carries write",
    "reg.emit": "register file copy read by the emitter (slot = warp + 8 x register)",
}


def memory_role(name: str) -> str:
    """What memory `name` holds, as the lab labels it."""
    if name in ROLES:
        return ROLES[name]
    if name.startswith("rom.s"):
        return f"ROM segment of unit {name[5:]} (slot = bundle pc)"
    if name.startswith("reg."):
        return f"register file copy read by unit {name[4:]} (slot = warp + 8 x register)"
    return ""


# ---------------------------------------------------------------------------------------------
# where the machine's memories live in the model


def slot_label(name: str, slot: int, memory: MemoryMap | None = None, warp_bits: int = WARP_BITS) -> str:
    """A slot of a machine memory as the lab labels it; a `mem` line by its space's address in
    `memory` (the machine's memory map, default the built-in machine's), a register by its warp
    (`warp_bits`, the machine's) and number."""
    if name.startswith("rom."):
        return f"pc {slot}"
    if name.startswith("reg."):
        return f"w{slot & ((1 << warp_bits) - 1)} r{slot >> warp_bits}"
    if name == "mem":
        at = (memory or _builtin_memory()).line_address(slot)
        if at is not None:
            space, addr, thread = at
            if space == "global":
                return f"0x{addr:x}"
            if space == "local":
                return f"local t{thread} +{addr}"
            return f"{space} 0x{addr:x}"
    if name == "ltab":
        return f"warp {slot}"
    if name == "btab":
        return f"block {slot}"
    return str(slot)



def _builtin_memory() -> MemoryMap:
    from qwengpu.machine.config import COMPACT
    from qwengpu.machine.layout import memory_map
    return memory_map(COMPACT)


@dataclass
class SlotValue:
    slot: int
    label: str
    value: int | None              # None: never written
    margin: float                  # smallest distance of the word's bits from the decision (inf if empty)
    bits: list = field(default_factory=list)   # per bit: 1, 0


@dataclass
class GDNState:
    layer: int
    state: np.ndarray              # [value_heads, key_dim, value_dim] (or the heads of one memory)
    placements: list = field(default_factory=list)     # [MemoryPlacement] of the memories it shows

    def decode(self) -> dict:
        """{memory name: [SlotValue]}"""
        return {pl.name: decode_state(self.state, pl) for pl in self.placements}


def decode_state(state: np.ndarray, placement: MemoryPlacement, labels: list | None = None) -> list[SlotValue]:
    """Every slot of a memory decoded from one layer's recurrent state [heads, dk, dv] (the
    compiler's decoder, `qwengpu.compiler.placement.decode_words`), as `SlotValue`s labelled by
    `labels` (default: the lab's slot labels of the machine's memories, `slot_label`)."""
    vals, written, margin = decode_words(state, placement, per_slot=True)
    spans = placement.spans
    width = max((lo + w for lo, w in spans), default=0)
    out = []
    for s in range(placement.slots):
        label = labels[s] if labels is not None and s < len(labels) else slot_label(placement.name, s)
        if not written[s]:
            out.append(SlotValue(s, label, None, float("inf"), []))
            continue
        value = 0
        for f, (lo, _) in enumerate(spans):
            value |= int(vals[f, s]) << lo
        out.append(SlotValue(s, label, value, float(margin[s]), [value >> j & 1 for j in range(width)]))
    return out


def recurrent_state(cache, layer: int, batch: int = 0) -> np.ndarray:
    """A GDN layer's recurrent state [value_heads, key_dim, value_dim] from a transformers cache
    (`DynamicCache` after a forward pass with `use_cache=True`) or the compact engine's state."""
    s = cache.get_recurrent_state(layer)
    if s is None:
        raise ValueError(f"layer {layer} has no recurrent state in this cache (not a GDN layer, or no "
                         f"forward pass has run)")
    return s[batch].detach().float().cpu().numpy()


@dataclass
class ModelRecord:
    index: int                     # the emitted token's index in the sequence (prompt included)
    token: int                     # its id
    text: str                      # its text
    position: int | None = None    # the pass's number (0: it consumed <go>)
    machine: MachineState | None = None
    margins: dict = field(default_factory=dict)     # memory -> code margin after the pass
    attention: dict = field(default_factory=dict)   # attending layer -> [heads, index] (none in the machine)
    gdn: dict = field(default_factory=dict)         # layer -> GDNState (filled on request)
    # what the views derive from this pass alone (its lanes' timeline codes, its CUDA lines): kept
    # between the views of a launch still recording, which share their records
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def margin(self) -> float:
        return min(self.margins.values()) if self.margins else float("inf")


@dataclass
class LayerInfo:
    index: int
    kind: str                      # "full_attention" | "linear_attention"
    role: str = ""                 # what it does for the machine (the memories it holds, "inert", ...)
    part: str = "gpu"              # "gpu", or "base": a spliced checkpoint's own layer (after the GPU's)


@dataclass
class RegCheck:
    """One carried register value the model holds, matched against the interpreter's history of the
    PTX register it holds (see `qwengpu.lab.checks`)."""
    position: int                  # the record after the pass's carries
    warp: int
    block: int
    reg: int                       # physical register
    lane: int
    name: str                      # PTX register
    half: int                      # 0: low 32 bits, 1: high 32 bits
    value: int                     # what the model holds
    ok: bool | None                # None: an intermediate value of a lowering loop (not compared)
    step: int | None = None        # the interpreter step that wrote the matched value (-1: unwritten)


@dataclass
class Selection:
    """What one memory's key heads select for every consumed token (rows: the prompt, then every
    generated token but the last): write slot and strength (k, beta), per read port the read slot
    and strength (q, output gate). Strengths are 0..1."""
    memory: str
    layer: int
    slots: int
    write_slot: np.ndarray         # [rows]
    write: np.ndarray              # [rows]
    read_slot: np.ndarray          # [rows, ports]
    read: np.ndarray               # [rows, ports]

    def matrix(self, rows: slice | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(writes [rows, slots], reads [rows, slots]) as dense heatmaps (reads: max over ports)."""
        sl = rows or slice(None)
        ws, w = self.write_slot[sl], self.write[sl]
        rs, r = self.read_slot[sl], self.read[sl]
        n = len(ws)
        W = np.zeros((n, self.slots), np.float32)
        R = np.zeros((n, self.slots), np.float32)
        ok = (ws >= 0) & (ws < self.slots)
        W[np.nonzero(ok)[0], ws[ok]] = w[ok]
        for p in range(rs.shape[1]):
            okp = (rs[:, p] >= 0) & (rs[:, p] < self.slots)
            idx = np.nonzero(okp)[0]
            R[idx, rs[idx, p]] = np.maximum(R[idx, rs[idx, p]], r[idx, p])
        return W, R


class ModelTrace:
    """All tokens of one launch on the model (see the module docstring). The recorder also sets:
    `engine`, `memories` ({name: qwengpu.compiler.placement.MemoryPlacement}), `group` (value heads per
    key head), `prompt_len`, `taps` (the key
    heads' selections per consumed token), `base_raw`/`updates` (the raw GDN states), `raw_exact`,
    `seconds` (the run, recording included) and, once checked, `consistency`."""

    def __init__(self, tokens: list, records: list, layers: list | None = None):
        self.tokens = list(tokens)
        self.records = list(records)
        self.layers = list(layers or [])
        self.prompt_len = len(self.tokens) - len(self.records)
        self.consistency: dict = {}
        self.mismatches: list[Mismatch] = []
        self.reg_checks: list[RegCheck] = []

    def __len__(self) -> int:
        return len(self.records)

    def record_at(self, position: int) -> ModelRecord | None:
        return self.records[position] if 0 <= position < len(self.records) else None

    def first_mismatch(self, upto: int | None = None, against: str | None = None) -> Mismatch | None:
        ms = [m for m in self.mismatches if (upto is None or m.position <= upto)
              and (against is None or m.against == against)]
        return min(ms, key=lambda m: m.position) if ms else None


#: memories the slot-selection panel shows by default: fetch, a register read copy, memory, the
#: register file copy carries write, the lane table and the control word
DEFAULT_SELECTIONS = ("ctl", "rom.s0", "reg.0", "mem", "reg.emit", "lanes")


def selection_of(trace, name: str) -> Selection:
    """The slot selections of memory `name` for every consumed token (`Selection`). A memory in
    banks (`MemoryPlacement.pieces`) writes and reads through the key head of the bank its address
    lies in (the others' strengths are closed by the bank match): each token's slot is taken from the
    strongest of them."""
    pl = trace.memories[name]
    group = trace.group
    pieces = pl.all_pieces()
    li = {L: i for i, L in enumerate(trace.gdn_layers)}
    # the write strength: key weight x beta of the memory's own value heads (port 0's copy; the
    # other value heads of its key heads have no weights: beta 0.5 on zero values writes nothing)
    w_str = np.stack([trace.taps[:, li[L], h // group, 3] * trace.betas[:, li[L], h]
                      for L, h, _, _, _, _ in pieces], axis=1)                      # [rows, pieces]
    w_slot = np.stack([trace.taps[:, li[L], h // group, 2] + s0 for L, h, _, _, s0, _ in pieces], axis=1)
    write, write_slot = _strongest(w_str, w_slot)
    read, read_slot = [], []
    for keys in pl.port_keys():
        r_str = np.stack([trace.taps[:, li[L], kh, 1] * trace.taps[:, li[L], kh, 5] for L, kh, _ in keys], axis=1)
        r_slot = np.stack([trace.taps[:, li[L], kh, 0] + s0 for L, kh, s0 in keys], axis=1)
        strength, slot = _strongest(r_str, r_slot)
        read.append(strength)
        read_slot.append(slot)
    return Selection(name, pl.layer, pl.slots, write_slot.astype(np.int64), np.clip(write, 0, 1),
                     np.stack(read_slot, axis=1).astype(np.int64), np.clip(np.stack(read, axis=1), 0, 1))


def _strongest(strength, slot):
    """Per row, the strength and slot of the strongest key head ([rows, heads] each -> [rows])."""
    pick = strength.argmax(axis=1)[:, None]
    return np.take_along_axis(strength, pick, 1)[:, 0], np.take_along_axis(slot, pick, 1)[:, 0]
