"""Where a GDN node sits in the model's weights, and how its state is read back.

- *Key heads*: a memory takes one key head per (read port, chunk of fields, bank): its fields in
  chunks of the value heads a key head has (`field_chunks`), its slots in banks of the key head
  dimension (`key_banks`); `key_units` lists them in head order, `layer_heads` assigns the heads of
  one layer (the one assignment the weights and `Compiled.placement` both follow).
- *Placement*: `MemoryPlacement` names the layer and value heads of every field of a compiled
  memory (or its pieces over layers and banks).
- *Reading back*: `read_rails` is the one decoder of dual-rail words (the circuits' rule), and
  `decode_memory` reads a memory's words from the model's recurrent state with it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .core import Node
from .memory import VALUE_L


def field_chunks(node: Node, group: int) -> list[list[int]]:
    """A memory's fields split into groups of at most `group` (one key head each, same keys)."""
    n = len(getattr(node, "fields", [0]))
    return [list(range(i, min(i + group, n))) for i in range(0, n, group)]


def key_banks(node: Node, dk: int | None) -> int:
    """Key heads one (port, field chunk) of a memory spans: its slots in banks of `dk` (the key
    head dimension). Bank b holds slots [b dk, (b + 1) dk); a key or query whose slot lies in
    another bank is ~0 after SiLU and the L2 norm, and beta and the output gate of the bank are
    also closed by the address's bank match, so the banks' reads add up to the word."""
    if node.kind != "gdn" or not dk:
        return 1
    return max(1, -(-node.slots // dk))


def key_units(node: Node, group: int | None, dk: int | None = None) -> list[tuple[int, int, int]]:
    """(port, field chunk, bank) of every key head a GDN node takes, in head order."""
    chunks = len(field_chunks(node, group)) if group is not None else 1
    return [(p, c, b) for p in range(node.ports) for c in range(chunks) for b in range(key_banks(node, dk))]


def key_heads(node: Node, group: int | None = None, dk: int | None = None) -> int:
    ports = node.ports if hasattr(node, "ports") else 1
    if node.kind != "gdn" or group is None:
        return ports
    return len(key_units(node, group, dk))


def layer_units(node: Node, layer: int, group: int, dk: int | None) -> list[tuple[int, int, int]]:
    """The units of a GDN node held by `layer` (a memory too large for one layer is split over
    several: `node.unit_layers`, one layer per unit)."""
    units = key_units(node, group, dk)
    spread = getattr(node, "unit_layers", None)
    if spread is None:
        return units if node.layer == layer else []
    return [u for u, L in zip(units, spread) if L == layer]


def layer_heads(nodes, layer: int, group: int, dk: int | None):
    """(node, (port, chunk, bank), key head) of every GDN unit `layer` holds, in head order: the
    one head assignment the weights and `Compiled.placement` both follow."""
    head = 0
    for node in nodes:
        if node.kind != "gdn":
            continue
        for unit in layer_units(node, layer, group, dk):
            yield node, unit, head
            head += 1


@dataclass
class MemoryPlacement:
    """A word memory's place in the model: GDN layer, (value head, first bit, width) per field.
    A memory spread over several layers or key-head banks (a base model's fixed geometry) has
    `pieces` instead: (layer, value head, first bit, width, first slot, slots) each. `keys`: the
    key heads of every read port, (layer, key head, port, first slot) each, one per chunk of fields
    and bank (None in metadata written before they were recorded)."""
    name: str
    layer: int
    fields: list
    slots: int
    pieces: list | None = None
    keys: list | None = None

    @property
    def layers(self) -> list[int]:
        return sorted({pc[0] for pc in self.all_pieces()})

    def all_pieces(self) -> list[tuple]:
        if self.pieces is not None:
            return [tuple(pc) for pc in self.pieces]
        return [(self.layer, h, lo, w, 0, self.slots) for h, lo, w in self.fields]

    def to_json(self) -> dict:
        d = {"name": self.name, "layer": self.layer, "fields": [list(f) for f in self.fields], "slots": self.slots}
        if self.pieces is not None:
            d["pieces"] = [list(pc) for pc in self.pieces]
        if self.keys is not None:
            d["keys"] = [list(k) for k in self.keys]
        return d

    @staticmethod
    def from_json(d: dict) -> "MemoryPlacement":
        pieces, keys = d.get("pieces"), d.get("keys")
        return MemoryPlacement(d["name"], d["layer"], [tuple(f) for f in d["fields"]], d["slots"],
                               [tuple(pc) for pc in pieces] if pieces is not None else None,
                               [tuple(k) for k in keys] if keys is not None else None)


def decode_memory(state, placement: MemoryPlacement, slots=None) -> tuple[dict, float]:
    """({slot: word} of the written slots, code margin) of a memory, from the recurrent state
    [value heads, key dim, value dim] of its layer (or `state(layer)` for each layer of a memory
    spread over several). Bits are read as the circuits read them (`memory.read_rails`: the 1-rail
    against half the rail level; an unwritten field holds only ~1e-16 crosstalk and reads 0); the
    margin is the smallest distance of a 1-rail from that level."""
    import numpy as np
    pieces = placement.all_pieces()
    if callable(state):
        get = state
    elif len({pc[0] for pc in pieces}) > 1:
        raise ValueError(f"{placement.name} spans layers {placement.layers}: pass state as a function of the layer")
    else:
        get = (lambda _layer: state)
    states = {L: get(L) for L in {pc[0] for pc in pieces}}      # read only the rows each piece holds
    want = np.arange(placement.slots) if slots is None else np.asarray(list(slots), dtype=np.int64)
    words = [0] * len(want)
    written = np.zeros(len(want), dtype=bool)
    margin = float("inf")
    for layer, head, lo, width, s0, n in pieces:
        idx = np.nonzero((want >= s0) & (want < s0 + n))[0]
        if not len(idx):
            continue
        bits, m, w = read_rails(np.asarray(states[layer][head])[want[idx] - s0, 0:2 * width])
        margin = min(margin, float(m.min()))
        written[idx] |= w
        for i in np.nonzero(bits.any(axis=1))[0]:
            packed = np.packbits(bits[i], bitorder="little").tobytes()
            words[idx[i]] |= int.from_bytes(packed, "little") << lo
    return {int(s): words[i] for i, s in enumerate(want) if written[i]}, margin


#: a slot is *written* when one of its rails is above this fraction of VALUE_L. Every written bit
#: has one rail at VALUE_L (its 1-rail or its 0-rail), an unwritten slot holds only crosstalk (~1e-16
#: of it; the `gdn.rail` margin bounds the leak). A quarter is below the bits' own decision level
#: (half of VALUE_L): a slot that decodes a 1 bit is always written, and a written rail can lose
#: three quarters of its level before the slot reads as empty.
WRITTEN_FRACTION = 0.25


def read_rails(rails, level: float = VALUE_L):
    """Dual-rail words read as the circuits read them, the one decoder of GDN memory states.
    `rails` [..., 2w]: bit j's 1-rail at column 2j, its 0-rail at 2j + 1. Returns (bits [..., w]
    bool: the 1-rail above half the level; margin [...]: the smallest distance of a 1-rail from
    that level; written [...] bool: a rail above `WRITTEN_FRACTION` of the level)."""
    import numpy as np
    r = np.asarray(rails, dtype=np.float64)
    one = r[..., 0::2]
    bits = one > level / 2
    margin = np.abs(one - level / 2).min(axis=-1, initial=np.inf)
    written = np.abs(r).max(axis=-1, initial=0.0) > WRITTEN_FRACTION * level
    return bits, margin, written
