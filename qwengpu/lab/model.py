"""What the model engine hands the lab: one `ModelRecord` per token, and how the lab decodes it.

The model engine (`qwengpu.run(..., engine="model", trace=True)`, not built yet) runs the launch's
forward passes once and returns, in `LaunchResult.extra["model_trace"]`, a `ModelTrace`:

    ModelTrace(
        tokens=[...],                       # every token's text: the prompt, then the generated ones
        layers=[LayerInfo(index, kind, role), ...],   # the GPU layers ("full_attention" or
                                                      # "linear_attention") and what each holds
        records=[ModelRecord(...), ...],    # one per token, in order (prompt tokens included)
    )

    ModelRecord(
        index=7, token=1234, text="<step>",
        position=3,            # the LaunchView position this token brings the machine to (after
                               # machine step position-1); None for a prompt token
        machine=MachineState(pc=..., active=..., regs={"%r1": [v0, v1, v2, v3]}, memory={addr: byte}),
                               # what the model's state decodes to after this token (None: not decoded)
        attention={L: array[heads, index + 1]},   # this token's attention weights (its query row)
                               # in every full-attention GPU layer L, over positions 0..index
        gdn={L: GDNState(...)},  # the raw recurrent state of the GDN layers that hold machine state
    )

    GDNState(layer=L, state=array[value_heads, key_dim, value_dim],   # cache.get_recurrent_state(L)[0]
             maps=[MemoryMap(name="registers", slots=["%r1 l0", ...], fields=[Field(head, lo, width)],
                             width=32)])

A `MemoryMap` says how to read a word memory out of the state (the layout `qwengpu.compiler.memory.
GDNMemory` writes): slot s is key row s; field f of the word sits in value head `fields[f].head`,
columns `column + 2j` (the "1" rail) and `column + 2j + 1` (the "0" rail) for bit `lo + j`. A bit is
1 when its 1-rail exceeds its 0-rail; a slot whose rails are all ~0 was never written.
`decode_state` gives every slot's word and the smallest rail gap (the code margin).

The lab never invents these records: with engine="interp" there is no `ModelTrace` and the
model-only views say so.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: a slot whose largest rail is below this fraction of the map's rail level reads as unwritten
EMPTY_FRACTION = 0.25


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
    level: float = 32.0            # the rail level of a written bit (VALUE_L after SiLU)
    key_rows: list | None = None   # key row of each slot when not 0..len(slots)-1

    def rows(self) -> list[int]:
        return list(self.key_rows) if self.key_rows is not None else list(range(len(self.slots)))


@dataclass
class SlotValue:
    slot: int
    label: str
    value: int | None              # None: never written
    margin: float                  # smallest |rail1 - rail0| over the word's bits (inf if empty)
    bits: list = field(default_factory=list)   # per bit: 1, 0


@dataclass
class GDNState:
    layer: int
    state: np.ndarray              # [value_heads, key_dim, value_dim]
    maps: list = field(default_factory=list)

    def decode(self) -> dict:
        """{map name: [SlotValue]}"""
        return {m.name: decode_state(self.state, m) for m in self.maps}


def decode_word(state: np.ndarray, row: int, fields: list, level: float = 32.0):
    """(value or None, margin, bits) of the word at key row `row`."""
    state = np.asarray(state, dtype=np.float64)
    value, margin, bits, peak = 0, float("inf"), {}, 0.0
    for f in fields:
        for j in range(f.width):
            one = float(state[f.head, row, f.column + 2 * j])
            zero = float(state[f.head, row, f.column + 2 * j + 1])
            peak = max(peak, abs(one), abs(zero))
            b = 1 if one > zero else 0
            bits[f.lo + j] = b
            value |= b << (f.lo + j)
            margin = min(margin, abs(one - zero))
    if peak < EMPTY_FRACTION * level:
        return None, float("inf"), []
    width = max(bits) + 1 if bits else 0
    return value, margin, [bits.get(i, 0) for i in range(width)]


def decode_state(state: np.ndarray, mmap: MemoryMap) -> list[SlotValue]:
    """Every slot of `mmap` decoded from one layer's recurrent state [heads, dk, dv]."""
    out = []
    for s, row in enumerate(mmap.rows()):
        v, m, bits = decode_word(state, row, mmap.fields, mmap.level)
        label = mmap.slots[s] if s < len(mmap.slots) else str(s)
        out.append(SlotValue(s, label, v, m, bits))
    return out


def memory_map_of(gdn_memory, port: int = 0, key_heads_before: int = 0, value_heads_per_key: int | None = None,
                  labels: list | None = None) -> MemoryMap:
    """The `MemoryMap` of a compiler `GDNMemory` (`qwengpu.compiler.memory`), read through key head
    `key_heads_before + port` of its layer (every port holds an identical copy). Value heads are
    grouped per key head (`value_heads_per_key`, default: the memory's field count)."""
    from qwengpu.compiler.memory import VALUE_L
    group = value_heads_per_key or len(gdn_memory.fields)
    h = key_heads_before + port
    fields = [Field(h * group + fi, f.lo, f.width, 0) for fi, f in enumerate(gdn_memory.fields)]
    slots = labels or [str(i) for i in range(gdn_memory.slots)]
    return MemoryMap(gdn_memory.name, slots, fields, gdn_memory.width, level=VALUE_L)


def recurrent_state(cache, layer: int, batch: int = 0) -> np.ndarray:
    """A GDN layer's recurrent state [value_heads, key_dim, value_dim] from a transformers cache
    (`DynamicCache` after a forward pass with `use_cache=True`)."""
    s = cache.get_recurrent_state(layer)
    if s is None:
        raise ValueError(f"layer {layer} has no recurrent state in this cache (not a GDN layer, or no "
                         f"forward pass has run)")
    return s[batch].detach().float().cpu().numpy()


@dataclass
class MachineState:
    """What the model's state decodes to after one token. Every part is optional (None / empty =
    not decoded); the consistency check compares only what is given."""
    pc: int | None = None              # the next pc
    active: int | None = None          # the next active mask
    block: int | None = None
    warp: int | None = None
    regs: dict = field(default_factory=dict)      # name -> [raw per lane] (lane None: not decoded)
    memory: dict = field(default_factory=dict)    # global byte address -> byte


@dataclass
class ModelRecord:
    index: int                     # token index in the sequence (prompt included)
    token: int                     # token id
    text: str
    position: int | None = None    # LaunchView position after this token (None: prompt token)
    machine: MachineState | None = None
    attention: dict = field(default_factory=dict)   # layer -> [heads, index + 1]
    gdn: dict = field(default_factory=dict)         # layer -> GDNState


@dataclass
class LayerInfo:
    index: int
    kind: str                      # "full_attention" | "linear_attention"
    role: str = ""                 # what it does for the machine ("fetch", "registers", ...)


@dataclass
class Mismatch:
    token: int
    position: int
    what: str                      # "pc", "active", "reg %r3 lane 2", "mem 0x1020"
    expected: object
    got: object

    def __str__(self) -> str:
        return (f"token {self.token} (position {self.position}): {self.what} decodes to {self.got!r}, "
                f"the interpreter has {self.expected!r}")


@dataclass
class ModelSnapshot:
    """The model-only parts of a snapshot."""
    record: ModelRecord | None
    tokens: list                   # token texts of the attention window
    window_start: int
    attention: dict                # layer -> uint8 array [heads, w, w] (rows: queries, cols: keys)
    attention_scale: dict          # layer -> max weight in the window (uint8 255 = this)
    gdn: dict                      # layer -> {"state": GDNState, "decoded": {map: [SlotValue]}}
    consistent: bool | None        # None: nothing decoded at this position
    checked: int                   # positions checked up to here
    first_mismatch: Mismatch | None


class ModelTrace:
    """All tokens of one model-engine launch (see the module docstring)."""

    window = 48                    # tokens of attention shown around the selected one

    def __init__(self, tokens: list, records: list, layers: list | None = None):
        self.tokens = list(tokens)
        self.records = list(records)
        self.layers = list(layers or [])
        self._by_position = {r.position: r for r in self.records if r.position is not None}
        self.mismatches: list[Mismatch] = []
        self.checked_positions: list[int] = []

    def record_at(self, position: int) -> ModelRecord | None:
        return self._by_position.get(position)

    def attach(self, view):
        """Check every decoded record against the reference interpreter at the same position."""
        self.mismatches = []
        self.checked_positions = []
        for r in self.records:
            if r.position is None or r.machine is None:
                continue
            self.checked_positions.append(r.position)
            self.mismatches += compare_machine(view, r)

    def first_mismatch(self, upto: int | None = None) -> Mismatch | None:
        ms = [m for m in self.mismatches if upto is None or m.position <= upto]
        return min(ms, key=lambda m: m.position) if ms else None

    def snapshot(self, view, position: int) -> ModelSnapshot:
        rec = self.record_at(position)
        idx = rec.index if rec is not None else None
        if idx is None:
            before = [r for r in self.records if r.position is not None and r.position <= position]
            idx = before[-1].index if before else (len(self.records) - 1 if position > 0 else 0)
        start = max(0, idx + 1 - self.window)
        toks = self.tokens[start:idx + 1]
        att, scale = {}, {}
        layers = sorted({L for r in self.records for L in r.attention})
        for L in layers:
            rows = []
            heads = None
            for k in range(start, idx + 1):
                r = self.records[k] if k < len(self.records) else None
                w = None if r is None else r.attention.get(L)
                if w is not None:
                    w = np.asarray(w, dtype=np.float64)
                    heads = w.shape[0]
                rows.append(w)
            if heads is None:
                continue
            mat = np.zeros((heads, len(rows), len(rows)))
            for qi, w in enumerate(rows):
                if w is None:
                    continue
                seg = w[:, start:start + qi + 1]
                mat[:, qi, :seg.shape[1]] = seg
            top = float(mat.max()) or 1.0
            att[L] = np.clip(np.round(mat / top * 255), 0, 255).astype(np.uint8)
            scale[L] = top
        gdn = {}
        src = rec
        if src is None or not src.gdn:
            cands = [r for r in self.records if r.gdn and r.index <= idx]
            src = cands[-1] if cands else None
        if src is not None:
            for L, g in src.gdn.items():
                gdn[L] = {"state": g, "decoded": g.decode()}
        checked = [p for p in self.checked_positions if p <= position]
        first = self.first_mismatch(position)
        consistent = None
        if rec is not None and rec.machine is not None:
            consistent = not any(m.position == position for m in self.mismatches)
        return ModelSnapshot(rec, toks, start, att, scale, gdn, consistent, len(checked), first)


def compare_machine(view, rec: ModelRecord) -> list[Mismatch]:
    """The decoded machine state of one record against the interpreter at the same position."""
    out = []
    t = rec.position
    m = rec.machine
    snap = view.snapshot(t)
    if m.pc is not None and m.pc != snap.pc:
        out.append(Mismatch(rec.index, t, "pc", snap.pc, m.pc))
    if m.active is not None and m.active != snap.active:
        out.append(Mismatch(rec.index, t, "active mask", snap.active, m.active))
    if m.block is not None and m.block != snap.block:
        out.append(Mismatch(rec.index, t, "block", snap.block, m.block))
    if m.warp is not None and m.warp != snap.warp:
        out.append(Mismatch(rec.index, t, "warp", snap.warp, m.warp))
    regs = {r.name: r for r in snap.regs}
    for name, vals in m.regs.items():
        r = regs.get(name)
        for lane, v in enumerate(vals):
            if v is None:
                continue
            want = r.values[lane] if r is not None else 0
            if v != want:
                out.append(Mismatch(rec.index, t, f"reg {name} lane {lane}", want, v))
    if m.memory:
        mem = view.memory_at(t)
        for addr, byte in sorted(m.memory.items()):
            want = None
            for reg in view.regions():
                if reg.space == "global" and reg.base <= addr < reg.base + reg.size:
                    want = mem[reg.key][addr - reg.base]
            if want != byte:
                out.append(Mismatch(rec.index, t, f"mem 0x{addr:x}", want, byte))
    return out
