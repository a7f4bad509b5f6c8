"""The recorder's compiled loops (`qwengpu.lab.recorder`), in their own module so that importing
the lab does not import numba: the comparison of a pass's changed rows with the rows kept
(`take_moved_rows`) and the reading of a memory's moved slots (`read_block`), each the numpy code it
replaces value for value (`tests/test_lab_recording.py`)."""
from __future__ import annotations

import numpy as np

from qwengpu.engines.floats import njit


@njit(cache=True, error_model="numpy", nogil=True)
def take_moved_rows(stacked, rows, row_at, values, count, eps, dirty, written, decayed, every, out_at, out_old,
                    out_new, piece_start, piece_mem, piece_s0, piece_n, slot_marks, mem_hit):
    """The rows a pass moved, taken in one compiled loop: for every value head h of GDN layer g (in
    that order), whether its row r = rows[g, h] of `stacked` [G, hv, dk, dv] moved from the row
    kept for it (`kept_rows.RowLog`: values[row_at[g, h, r]], row 0 of `values` zeros for a row not
    kept) by more than `eps` (float32): `np.abs(new - old).max(-1) > eps` as numpy computes it (a
    NaN in the difference: its max is NaN, not moved), without copies.

    A moved row is written out (out_at[n] = g, h, r; out_old[n], out_new[n] its kept and its new
    values) and kept (a row not kept yet takes values[count], count + 1; `values` must have room
    for G * hv more), and the slots it holds of each memory are marked: for each piece p of (g, h)
    (`piece_start[g * hv + h]` .. the next: memory piece_mem[p], its first slot piece_s0[p], its
    rows piece_n[p]; `MemoryPlacement.slots_of_rows`) slot_marks[memory, s0 + r] and mem_hit[memory].
    Returns (rows moved, count).

    Only rows marked in `dirty` [G, hv, dk] are compared (then unmarked): this pass's marks come
    from the compiled loop (`written` [G, hv]: the row its update moved, -1 none, -2 several: all
    marked; `decayed` [G, hv]: a decay moved every row). A row the model has not changed since it
    was last compared (or since the state after the prompt, kept whole) still differs from its
    kept row as it did then: by at most `eps`, or not at all once kept. `every`: compare every
    selected row (a user's hook may have changed any), marks unused."""
    G, hv = rows.shape
    n = 0
    for g in range(G):
        for h in range(hv):
            r = rows[g, h]
            if not every:
                w = written[g, h]
                if w == -2 or decayed[g, h]:
                    dirty[g, h, :] = True
                elif w >= 0:
                    dirty[g, h, w] = True
                if not dirty[g, h, r]:
                    continue
                dirty[g, h, r] = False
            new = stacked[g, h, r]
            k = row_at[g, h, r]
            top = np.float32(0.0)
            for j in range(new.shape[0]):
                d = abs(new[j] - values[k, j])
                if d != d:
                    top = d
                    break
                if d > top:
                    top = d
            if not top > eps:
                continue
            out_at[n, 0] = g
            out_at[n, 1] = h
            out_at[n, 2] = r
            out_old[n, :] = values[k]
            out_new[n, :] = new
            if k == 0:
                k = count
                count += 1
                row_at[g, h, r] = k
            values[k, :] = new
            for p in range(piece_start[g * hv + h], piece_start[g * hv + h + 1]):
                if r < piece_n[p]:
                    slot_marks[piece_mem[p], piece_s0[p] + r] = True
                    mem_hit[piece_mem[p]] = True
            n += 1
    return n, count


@njit(cache=True, error_model="numpy", nogil=True)
def read_block(S, heads, fields, s0, n, w, want, vals, written, margin, level, written_level):
    """One block of a memory's pieces (value heads `heads` of state S [hv, dk, dv], holding fields
    `fields` of slots s0 .. s0 + n - 1 in rows 0 .. n - 1, w bits each) read at the wanted slots in
    it, as `decode_words` reads them with `read_rails`, in float64: a bit is its 1-rail above half
    `level`; the margin, the smallest distance of a 1-rail from that level (a NaN: NaN, as numpy's
    min and minimum); written, a rail above `written_level` (a NaN rail: numpy's max is NaN, not
    written). Fields into vals[field, column] (a later head of the same field wins, as numpy's
    assignment), written ORed, margin the minimum with what is there."""
    half = level / 2
    for c in range(want.shape[0]):
        r = want[c] - s0
        if r < 0 or r >= n:
            continue
        any_written = False
        low = np.inf
        low_nan = False
        for k in range(heads.shape[0]):
            row = S[heads[k], r]
            word = np.uint64(0)
            top = 0.0
            top_nan = False
            for j in range(w):
                one = np.float64(row[2 * j])
                zero = np.float64(row[2 * j + 1])
                if one > half:
                    word |= np.uint64(1) << np.uint64(j)
                d = abs(one - half)
                if d != d:
                    low_nan = True
                elif d < low:
                    low = d
                for x in (abs(one), abs(zero)):
                    if x != x:
                        top_nan = True
                    elif x > top:
                        top = x
            vals[fields[k], c] = word
            if not top_nan and top > written_level:
                any_written = True
        if any_written:
            written[c] = True
        m = margin[c]
        margin[c] = np.nan if (low_nan or m != m) else min(m, low)
