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

A `MemoryMap` says how to read a word memory out of a GDN layer's state [value heads, key dim,
value dim] (the layout `qwengpu.compiler.memory.GDNMemory` writes): slot s is key row s; field f
of the word sits in value head `fields[f].head`, columns `column + 2j` (the "1" rail) and
`column + 2j + 1` (the "0" rail) for bit `lo + j`. `decode_state` reads every slot's word with the
compiler's reader (`qwengpu.compiler.placement.read_rails`, as the circuits read: a bit is 1 when its
1-rail exceeds half the rail level; the margin is the distance from that level; a slot whose rails
are all below a quarter of the level was never written).

The lab never invents these records: with engine="interp" there is no `ModelTrace`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwengpu.compiler.memory import VALUE_L
from qwengpu.compiler.placement import read_rails
from qwengpu.machine.simulator import LANE_BARRIER, LANE_EPOCH, LANE_RUN, MachineState  # noqa: F401 (the record's state)


@dataclass
class Field:
    """Bits lo .. lo+width-1 of a word, in value head `head`, dual-rail from value column `column`."""
    head: int
    lo: int
    width: int
    column: int = 0


@dataclass
class MemoryMap:
    """A word memory held by one GDN layer's state (see the module docstring)."""
    name: str
    slots: list                    # a label per key row (slot index = key row)
    fields: list                   # [Field]
    width: int                     # word width in bits
    level: float = VALUE_L         # the rail level of a written bit (after SiLU)
    key_rows: list | None = None   # key row of each slot when not 0..len(slots)-1

    def rows(self) -> list[int]:
        return list(self.key_rows) if self.key_rows is not None else list(range(len(self.slots)))


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
    maps: list = field(default_factory=list)

    def decode(self) -> dict:
        """{map name: [SlotValue]}"""
        return {m.name: decode_state(self.state, m) for m in self.maps}


def decode_state(state: np.ndarray, mmap: MemoryMap) -> list[SlotValue]:
    """Every slot of `mmap` decoded from one layer's recurrent state [heads, dk, dv]
    (`qwengpu.compiler.placement.read_rails`, vectorised over slots)."""
    st = np.asarray(state, dtype=np.float64)
    rows = np.asarray(mmap.rows(), dtype=np.int64)
    n = len(rows)
    width = max((f.lo + f.width for f in mmap.fields), default=0)
    bits = np.zeros((n, width), dtype=np.int64)
    margin = np.full(n, np.inf)
    written = np.zeros(n, dtype=bool)
    for f in mmap.fields:
        b, m, w = read_rails(st[f.head][rows][:, f.column:f.column + 2 * f.width], mmap.level)
        bits[:, f.lo:f.lo + f.width] = b
        margin = np.minimum(margin, m)
        written |= w
    weights = [1 << j for j in range(width)]
    out = []
    for s in range(n):
        label = mmap.slots[s] if s < len(mmap.slots) else str(s)
        if not written[s]:
            out.append(SlotValue(s, label, None, float("inf"), []))
            continue
        bl = bits[s].tolist()
        out.append(SlotValue(s, label, sum(w for w, b in zip(weights, bl) if b), float(margin[s]), bl))
    return out


def memory_map_of(gdn_memory, port: int = 0, key_heads_before: int = 0, value_heads_per_key: int | None = None,
                  labels: list | None = None) -> MemoryMap:
    """The `MemoryMap` of a compiler `GDNMemory` (`qwengpu.compiler.memory`), read through key head
    `key_heads_before + port` of its layer (every port holds an identical copy). Value heads are
    grouped per key head (`value_heads_per_key`, default: the memory's field count)."""
    group = value_heads_per_key or len(gdn_memory.fields)
    h = key_heads_before + port
    fields = [Field(h * group + fi, f.lo, f.width, 0) for fi, f in enumerate(gdn_memory.fields)]
    slots = labels or [str(i) for i in range(gdn_memory.slots)]
    return MemoryMap(gdn_memory.name, slots, fields, gdn_memory.width)


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
class Mismatch:
    token: int                     # sequence index of the token whose pass disagrees
    position: int
    what: str                      # "pc", "mask", "register r3 of warp 0, lane 2", "memory byte 32", "token"
    expected: object
    got: object
    against: str = "simulator"     # or "interpreter"

    def __str__(self) -> str:
        return (f"position {self.position} (token {self.token}): {self.what} decodes to {self.got!r}, "
                f"the {self.against} has {self.expected!r}")


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
    `engine`, `memories` ({name: qwengpu.lab.recorder.MemoryInfo}), `prompt_len`, `taps` (the key
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
    banks (`MemoryInfo.pieces`) writes and reads through the key head of the bank its address lies
    in (the others' strengths are closed by the bank match): each token's slot is taken from the
    strongest of them."""
    info = trace.memories[name]
    li = {L: i for i, L in enumerate(trace.gdn_layers)}
    # the write strength: key weight x beta of the memory's own value heads (port 0's copy; the
    # other value heads of its key heads have no weights: beta 0.5 on zero values writes nothing)
    w_str = np.stack([trace.taps[:, li[L], h // info.group, 3] * trace.betas[:, li[L], h]
                      for L, h, _, _, _ in info.pieces], axis=1)                      # [rows, pieces]
    w_slot = np.stack([trace.taps[:, li[L], h // info.group, 2] + s0 for L, h, _, s0, _ in info.pieces], axis=1)
    write, write_slot = _strongest(w_str, w_slot)
    read, read_slot = [], []
    for keys in info.ports:
        r_str = np.stack([trace.taps[:, li[L], kh, 1] * trace.taps[:, li[L], kh, 5] for L, kh, _ in keys], axis=1)
        r_slot = np.stack([trace.taps[:, li[L], kh, 0] + s0 for L, kh, s0 in keys], axis=1)
        strength, slot = _strongest(r_str, r_slot)
        read.append(strength)
        read_slot.append(slot)
    return Selection(name, info.layer, info.slots, write_slot.astype(np.int64), np.clip(write, 0, 1),
                     np.stack(read_slot, axis=1).astype(np.int64), np.clip(np.stack(read, axis=1), 0, 1))


def _strongest(strength, slot):
    """Per row, the strength and slot of the strongest key head ([rows, heads] each -> [rows])."""
    pick = strength.argmax(axis=1)[:, None]
    return np.take_along_axis(strength, pick, 1)[:, 0], np.take_along_axis(slot, pick, 1)[:, 0]
