"""What the lab's recorder keeps of the model's recurrent states between passes (`recorder`): the
rows it last saw (`RowLog`: the state after the prompt, then every row a pass moved), the
buffers of the compiled loop that takes a pass's moved rows (`TakenRows`,
`compiled.take_moved_rows`) and those rows by pass (`PassRows`)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RowLog:
    """The recurrent states of every GDN layer [G, hv, dk, dv] as the recorder last saw them, kept as
    rows: the state after the prompt by its non-zero rows, then every row a pass moved, as moved. It
    holds what a copy of the states kept up to date would hold, without copying them (a copy of
    the ~230 MB costs more than a pass). Rows are compared by their bits: a -0.0 is kept."""

    def __init__(self, stacked: np.ndarray, touched: np.ndarray | None = None):
        """`touched` [G, hv, dk] bool: the rows the compiled loop wrote since the states were made
        (zeros), `_Taps.touched_rows`; the others are still +0.0, and only these are read."""
        self.shape = stacked.shape
        G, hv, dk, dv = stacked.shape
        if touched is not None:
            where = np.nonzero(touched)
            where = tuple(a[nonzero_rows(stacked[where])] for a in where)
        else:
            found = [np.nonzero(nonzero_rows(layer)) for layer in stacked]   # a layer at a time
            where = (np.concatenate([np.full(len(h), g, np.int64) for g, (h, _) in enumerate(found)]),
                     np.concatenate([h for h, _ in found]), np.concatenate([r for _, r in found]))
        self.base = (where, stacked[where])                                   # the state after the prompt
        # (g, h, r) -> its row in `values`; row 0 is zeros, the row of every (g, h, r) not kept, so
        # that a fresh map is zeros (pages the system supplies when first written, not filled)
        self.row_at = np.zeros((G, hv, dk), np.int32)
        self.row_at[where] = np.arange(1, len(where[0]) + 1)
        self.values = np.zeros((max(64, 2 * len(where[0]) + 1), dv), stacked.dtype)
        self.count = len(where[0]) + 1
        self.values[1:self.count] = self.base[1]

    def reserve(self, n: int):
        """Room in `values` for n more rows."""
        if self.count + n > len(self.values):
            grown = np.zeros((2 * (self.count + n), self.shape[-1]), self.values.dtype)
            grown[:self.count] = self.values[:self.count]
            self.values = grown

    def _dense(self, g: int, where, values) -> np.ndarray:
        out = np.zeros(self.shape[1:], np.float32)
        sel = where[0] == g
        out[where[1][sel], where[2][sel]] = values[sel]
        return out

    def base_layer(self, g: int) -> np.ndarray:
        """GDN layer g's state after the prompt [hv, dk, dv]."""
        return self._dense(g, *self.base)

    def error(self, states: list, touched: np.ndarray | None = None) -> float:
        """The largest difference between the rows kept and `states` (every layer's, in order): on
        the rows kept, value against value; elsewhere (rows kept as 0) the largest |value| of the
        rows that are not all zeros (`touched`, as in `__init__`: of the rows the compiled loop
        wrote; the others are +0.0). One read of each state, not a rebuilt copy."""
        worst = 0.0
        for g, state in enumerate(states):
            kept = self.row_at[g] > 0                                         # [hv, dk]
            h, r = np.nonzero(kept)
            on_kept = np.abs(self.values[self.row_at[g][h, r]] - state[h, r]).max() if len(h) else np.float32(0)
            others = (touched[g] if touched is not None else nonzero_rows(state)) & ~kept
            elsewhere = np.abs(state[others]).max() if others.any() else np.float32(0)
            worst = max(worst, float(np.max([on_kept, elsewhere])))        # a NaN anywhere: NaN, as one max
        return worst


def nonzero_rows(state: np.ndarray) -> np.ndarray:
    """[..., rows] bool: the rows of `state` [..., rows, dv] (float32) with a bit set (a -0.0
    counts), read as whole words: pairs of values where the row allows."""
    words = state.view(np.int64) if state.shape[-1] % 2 == 0 and state.flags.c_contiguous else state.view(np.int32)
    return words.any(-1)


class TakenRows:
    """The buffers of `compiled.take_moved_rows`, made once per recording: the moved rows it writes
    out, and the memories' pieces by (GDN layer index, value head) as flat arrays (`pieces_at`)
    with the slots it marks and lists (`marked_slots.MarkedSlots` reads and unmarks them)."""

    def __init__(self, shape: tuple, gdn_layers: list, placements: dict, pieces_at: dict):
        G, hv, _, dv = shape
        self.at = np.zeros((G * hv, 3), np.int64)
        self.old = np.zeros((G * hv, dv), np.float32)
        self.new = np.zeros((G * hv, dv), np.float32)
        self.gdn_layers = gdn_layers
        self.names = list(placements)
        index = {name: m for m, name in enumerate(self.names)}
        pieces = [pieces_at.get((L, h), ()) for L in gdn_layers for h in range(hv)]
        self.piece_start = np.cumsum([0] + [len(p) for p in pieces]).astype(np.int64)
        flat = [pc for p in pieces for pc in p]
        self.piece_mem = np.array([index[name] for name, _, _ in flat], np.int64)
        self.piece_s0 = np.array([s0 for _, s0, _ in flat], np.int64)
        self.piece_n = np.array([n for _, _, n in flat], np.int64)
        room = max([info.slots for info in placements.values()] + [s0 + n for _, s0, n in flat])
        self.slot_marks = np.zeros((len(self.names), room), np.bool_)
        self.marked = np.zeros((len(self.names), room), np.int64)     # each memory's marked slots, listed
        self.marked_n = np.zeros(len(self.names), np.int64)

    def taken(self, n: int) -> "PassRows":
        """The first n moved rows written out, copied (the buffers are the next pass's)."""
        return PassRows(self.gdn_layers, self.at[:n].copy(), self.old[:n].copy(), self.new[:n].copy())


class PassRows(Sequence):
    """The rows one pass moved, as [(GDN layer, value heads, rows, old values, new values)], one
    entry per layer in layer order: kept as the compiled loop wrote them (`TakenRows.at`: layer
    index, head, row per moved row) and split by layer when first read (a view asks for few
    passes; a recording makes one per pass)."""

    def __init__(self, gdn_layers: list, at: np.ndarray, old: np.ndarray, new: np.ndarray):
        self.gdn_layers, self.at, self.old, self.new = gdn_layers, at, old, new
        self._split = None

    def _entries(self) -> list:
        if self._split is None:
            at, n = self.at, len(self.at)
            if n == 0:
                self._split = []
                return self._split
            g = at[:, 0]
            cuts = (np.flatnonzero(np.diff(g)) + 1).tolist()
            self._split = [(self.gdn_layers[g[a]], at[a:b, 1], at[a:b, 2], self.old[a:b], self.new[a:b])
                           for a, b in zip([0, *cuts], [*cuts, n])]
        return self._split

    def __getitem__(self, i):
        return self._entries()[i]

    def __len__(self) -> int:
        return len(self._entries())
