"""Every memory's slots that a pass's moved rows hold, decoded in one compiled call
(`compiled.read_marked`): the recorder's reading of the compact engine's states after each pass,
with each memory's decoded words, written flags and per-slot margins kept in place between passes."""
from __future__ import annotations

import numpy as np

from qwengpu.compiler.memory import VALUE_L
from qwengpu.compiler.placement import WRITTEN_FRACTION

from .kept_rows import TakenRows


class MarkedSlots:
    """The memories' decoded slots now, by memory index (`names`, the placements' order):
    `words(m)` (values [fields, slots] uint64, written [slots]), `slot_margin(m)` [slots] and
    `lowest[m]`, views of one array each, rewritten where a pass's marks say (`TakenRows.marked`,
    set by `compiled.take_moved_rows`, or `mark_all`)."""

    def __init__(self, taken: TakenRows, placements: dict, gdn_layers: list):
        self.taken = taken
        self.names = taken.names
        index = {L: g for g, L in enumerate(gdn_layers)}
        infos = [placements[name] for name in self.names]
        self.slots = np.array([info.slots for info in infos], np.int64)
        self.col0 = np.concatenate([[0], np.cumsum(self.slots)[:-1]]).astype(np.int64)
        fields = max(len(info.spans) for info in infos)
        total = int(self.slots.sum())
        self.vals = np.zeros((fields, total), np.uint64)
        self.written = np.zeros(total, np.bool_)
        self.margin = np.full(total, np.inf)
        self.lowest = np.full(len(self.names), np.inf)
        mem_blocks, g, w, s0, n, heads_at, heads, flds = [0], [], [], [], [], [0], [], []
        for info in infos:
            for (L, width, first, count), hf in info.blocks().items():
                g.append(index[L])
                w.append(width)
                s0.append(first)
                n.append(count)
                heads += [h for h, _ in hf]
                flds += [f for _, f in hf]
                heads_at.append(len(heads))
            mem_blocks.append(len(g))
        self.tables = tuple(np.array(x, np.int64) for x in (mem_blocks, g, w, s0, n, heads_at, heads, flds))
        self.spans = [len(info.spans) for info in infos]
        self.views = [(self.vals[:f, a:a + n], self.written[a:a + n])
                      for f, a, n in zip(self.spans, self.col0.tolist(), self.slots.tolist())]

    def mark_all(self):
        """Every slot of every memory to be read (the first pass, or a user's hook that may have
        changed any row)."""
        t = self.taken
        for m, count in enumerate(self.slots.tolist()):
            t.marked[m, :count] = np.arange(count)
            t.marked_n[m] = count

    def read(self, stacked: np.ndarray) -> list:
        """Read the marked slots from the states [G, hv, dk, dv]; returns [(memory index, memory,
        its slots read, sorted)] of the memories with any, in placement order, their marks
        cleared; each memory's smallest margin is then in `lowest`."""
        from .compiled import read_marked
        t = self.taken
        read_marked(stacked, t.marked, t.marked_n, t.slot_marks, *self.tables, self.col0, self.slots, self.vals,
                    self.written, self.margin, self.lowest, VALUE_L, WRITTEN_FRACTION * VALUE_L)
        out = []
        for m, k in enumerate(t.marked_n.tolist()):
            if k:
                out.append((m, self.names[m], t.marked[m, :k].tolist()))
        t.marked_n[:] = 0
        return out

    def words(self, m: int) -> tuple:
        """Memory m's (values [fields, slots], written [slots]) now: views, rewritten by `read`."""
        return self.views[m]

    def slot_margin(self, m: int) -> np.ndarray:
        a = int(self.col0[m])
        return self.margin[a:a + int(self.slots[m])]
