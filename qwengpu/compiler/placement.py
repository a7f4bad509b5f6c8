"""Where a GDN node sits in the model's weights, and how its state is read back.

- *Key heads*: a memory takes one key head per (read port, chunk of fields, bank): its fields in
  chunks of the value heads a key head has (`field_chunks`), its slots in banks of the key head
  dimension (`key_banks`); `key_units` lists them in head order, `layer_heads` assigns the heads of
  one layer (the one assignment the weights and `Compiled.placement` both follow).
- *Placement*: `MemoryPlacement` names the layer and value heads of every field of a compiled
  memory (or its pieces over layers and banks), and its key heads per read port: the one layout
  the runtime, verify and the lab read the model with.
- *Reading back*: `read_rails` is the one decoder of dual-rail words (the circuits' rule);
  `decode_words` reads a memory's fields from the model's recurrent states with it, vectorised,
  and `decode_memory` gives them as {slot: word}.
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
    and bank (None in metadata written before they were recorded).

    The one layout of a memory in the model: the runtime, verify and the lab read it through the
    properties below (derived, never saved: `to_json` holds the fields above only)."""
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
        """(layer, value head, first bit, width, first slot, slots) of every piece of port 0's copy."""
        if self.pieces is not None:
            return [tuple(pc) for pc in self.pieces]
        return [(self.layer, h, lo, w, 0, self.slots) for h, lo, w in self.fields]

    @property
    def spans(self) -> list[tuple[int, int]]:
        """(first bit, width) of the word's fields, in bit order (a field of `decode_words`' rows)."""
        return sorted({(lo, w) for _, _, lo, w, _, _ in self.all_pieces()})

    @property
    def width(self) -> int:
        """Bits of a word."""
        return sum(w for _, w in self.spans)

    @property
    def banks(self) -> int:
        """Banks of key heads its slots are held in (1: every slot in one key head)."""
        return len({pc[4] for pc in self.all_pieces()})

    @property
    def heads(self) -> list[int]:
        """The value heads of port 0's copy, in the order of `all_pieces`."""
        return [pc[1] for pc in self.all_pieces()]

    @property
    def where(self) -> str:
        """Its layers as runs: "L18", "L15-17", "L1-2, L5-7"."""
        runs: list = []
        for L in self.layers:
            if runs and runs[-1][1] == L - 1:
                runs[-1][1] = L
            else:
                runs.append([L, L])
        return ", ".join(f"L{a}" if a == b else f"L{a}-{b}" for a, b in runs)

    def port_keys(self) -> list[list[tuple[int, int, int]]]:
        """Per read port, its key heads: [(layer, key head, first slot)], one per chunk of fields
        and bank; every port's copy holds the same words."""
        if self.keys is None:
            raise ValueError(f"the placement of {self.name} does not name its key heads (metadata of an older "
                             "qwengpu): build the machine or splice the checkpoint again")
        ports = 1 + max(p for _, _, p, _ in self.keys)
        return [[(L, kh, s0) for L, kh, p, s0 in self.keys if p == port] for port in range(ports)]

    def piece_at(self, layer: int, head: int) -> tuple | None:
        """The piece held by value head `head` of `layer` (None: not one of this memory's)."""
        index = self.__dict__.get("_piece_at")
        if index is None:
            index = self.__dict__["_piece_at"] = {(pc[0], pc[1]): pc for pc in self.all_pieces()}
        return index.get((layer, head))

    def slots_of_rows(self, layer: int, heads, rows) -> set:
        """The slots that rows `rows` of value heads `heads` of `layer` hold."""
        out = set()
        for h, r in zip(heads, rows):
            pc = self.piece_at(layer, int(h))
            if pc is not None and r < pc[5]:
                out.add(pc[4] + int(r))
        return out

    def rail(self, slot: int, bit: int) -> tuple[int, int, int, int]:
        """Where bit `bit` of slot `slot`'s word is held (port 0's copy): (layer, value head, key
        row, column of its 1-rail; its 0-rail is the next column)."""
        for L, h, lo, w, s0, n in self.all_pieces():
            if s0 <= slot < s0 + n and lo <= bit < lo + w:
                return L, h, slot - s0, 2 * (bit - lo)
        raise ValueError(f"{self.name} has no bit {bit} of slot {slot} ({self.slots} slots of {self.width} bits)")

    def blocks(self) -> dict:
        """{(layer, width, first slot, slots): [(value head, span index)]}: the pieces read in one
        numpy index by `decode_words`."""
        index = {s: i for i, s in enumerate(self.spans)}
        out: dict = {}
        for L, h, lo, w, s0, n in self.all_pieces():
            out.setdefault((L, w, s0, n), []).append((h, index[(lo, w)]))
        return out

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


def decode_words(state, placement: MemoryPlacement, slots=None, per_slot: bool = False):
    """Every field of every slot of a memory, read from the recurrent states [value heads, key dim,
    value dim] that hold it with `read_rails` (as the circuits read: a bit is its 1-rail against half
    the rail level; an unwritten slot holds only ~1e-16 crosstalk), vectorised over the pieces of
    one layer, width and bank. Returns (values [spans, slots] uint64, written [slots] bool, margin:
    the smallest distance of a 1-rail from the decision level).

    `state`: the state of the memory's layer, {layer: state}, or a function of the layer (a memory
    spread over several layers needs one of the last two). `slots`: only these slots (the columns,
    in this order); `per_slot`: the margin of each slot [slots] instead of the smallest."""
    import numpy as np
    if callable(state):
        get = state
    elif isinstance(state, dict):
        get = state.__getitem__
    elif len(placement.layers) > 1:
        raise ValueError(f"{placement.name} spans layers {placement.layers}: pass state as {{layer: state}} "
                         "or a function of the layer")
    else:
        get = (lambda _layer: state)
    want = np.arange(placement.slots) if slots is None else np.asarray(list(slots), dtype=np.int64)
    ns = len(want)
    vals = np.zeros((len(placement.spans), ns), dtype=np.uint64)     # a field holds up to 64 bits
    written = np.zeros(ns, dtype=bool)
    margin = np.full(ns, np.inf)
    states: dict = {}
    for (L, w, s0, n), hf in placement.blocks().items():
        cols = np.nonzero((want >= s0) & (want < s0 + n))[0]
        if not len(cols):
            continue
        if L not in states:                     # read only the layers a wanted slot lies in
            states[L] = np.asarray(get(L))
        heads = [h for h, _ in hf]
        if slots is None:                                            # every slot: the bank's rows
            rows = states[L][heads, :n, :2 * w]
        else:
            rows = states[L][np.ix_(heads, want[cols] - s0)][..., :2 * w]
        bits, m, wr = read_rails(rows)                               # [k, cols, w], [k, cols] x2
        vals[np.ix_([f for _, f in hf], cols)] = (bits.astype(np.uint64) << np.arange(w, dtype=np.uint64)).sum(
            -1, dtype=np.uint64)
        written[cols] |= wr.any(axis=0)
        margin[cols] = np.minimum(margin[cols], m.min(axis=0))
    return vals, written, (margin if per_slot else float(margin.min(initial=np.inf)))


def words_of(vals, written, placement: MemoryPlacement, slots=None) -> dict:
    """{slot: word} of the written slots, from `decode_words`' values (`slots`: the slots it read,
    when not all)."""
    import numpy as np
    spans = placement.spans
    out = {}
    for i in np.nonzero(written)[0]:
        w = 0
        for f, (lo, _) in enumerate(spans):
            w |= int(vals[f, i]) << lo
        out[int(i) if slots is None else int(list(slots)[i])] = w
    return out


def decode_memory(state, placement: MemoryPlacement, slots=None) -> tuple[dict, float]:
    """({slot: word} of the written slots, code margin) of a memory (`decode_words`, its values as
    integers)."""
    if slots is not None:
        slots = list(slots)
    vals, written, margin = decode_words(state, placement, slots)
    return words_of(vals, written, placement, slots), margin


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
