"""The recorder's compiled loops (`qwengpu.lab.recorder`), in their own module so that importing
the lab does not import numba: the comparison of a pass's changed rows with the rows kept
(`take_moved_rows`), the reading of a memory's slots (`read_block`) and of every memory's marked
slots at once (`read_marked`), the rows the compiled loop wrote (`mark_touched`) and the taps of a
chunk of captures (`put_taps`), each the numpy code it replaces value for value
(`tests/test_lab_recording.py`)."""
from __future__ import annotations

import numpy as np

from qwengpu.engines.floats import njit


@njit(cache=True, error_model="numpy", nogil=True)
def take_moved_rows(stacked, rows, row_at, values, count, eps, drift, written, decayed, term, every, out_at,
                    out_old, out_new, piece_start, piece_mem, piece_s0, piece_n, slot_marks, marked, marked_n):
    """The rows a pass moved, taken in one compiled loop: for every value head h of GDN layer g (in
    that order), whether its row r = rows[g, h] of `stacked` [G, hv, dk, dv] moved from the row
    kept for it (`kept_rows.RowLog`: values[row_at[g, h, r]], row 0 of `values` zeros for a row not
    kept) by more than `eps` (float32): `np.abs(new - old).max(-1) > eps` as numpy computes it (a
    NaN in the difference: its max is NaN, not moved), without copies.

    A moved row is written out (out_at[n] = g, h, r; out_old[n], out_new[n] its kept and its new
    values) and kept (a row not kept yet takes values[count], count + 1; `values` must have room
    for G * hv more), and the slots it holds of each memory are marked: for each piece p of (g, h)
    (`piece_start[g * hv + h]` .. the next: memory piece_mem[p], its first slot piece_s0[p], its
    rows piece_n[p]; `MemoryPlacement.slots_of_rows`) slot_marks[memory, s0 + r], and a slot not
    marked yet is listed: marked[memory, marked_n[memory]], marked_n[memory] + 1 (`read_marked`
    reads and unmarks them). Returns (rows moved, count).

    Only rows that may have moved by more than `eps` are compared. `drift` [G, hv, dk] (float64)
    bounds how far each row is from its kept row: 0 for the state after the prompt (kept whole),
    the difference found when a row was compared and not moved (rounded up), 0 once kept; each
    pass adds to the row an update may have moved (`written` [G, hv]: the row, -1 none, -2 several)
    twice a bound on its terms (`term` [G, hv]: a value of a sum moves by at most twice the term
    added, the sum's rounding being at most the term), rounded up, and makes it infinite where the bound
    is unknown (several rows, a decay: `decayed` [G, hv], a NaN term). A row whose bound is at most
    `eps` differs from its kept row by at most `eps` in the reals, so by float32's rounding (which
    is monotone, `eps` a float32) its compared difference is too: it is not moved, as a comparison
    would find. `every`: compare every selected row (a user's hook may have changed any), the
    bounds unused."""
    G, hv = rows.shape
    n = 0
    up = 1.0 + 2.0 ** -50                  # a float64 sum rounded down by at most 2^-53, times this: above the sum
    for g in range(G):
        for h in range(hv):
            r = rows[g, h]
            if not every:
                w = written[g, h]
                if w == -2 or decayed[g, h]:
                    drift[g, h, :] = np.inf
                elif w >= 0:
                    t = np.float64(term[g, h])
                    drift[g, h, w] = np.inf if t != t else (drift[g, h, w] + 2.0 * t) * up
                if not drift[g, h, r] > eps:
                    continue
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
                # as far as it is now: the float32 difference rounded up (a NaN: unknown)
                drift[g, h, r] = np.inf if top != top else np.float64(top) * (1.0 + 2.0 ** -23)
                continue
            drift[g, h, r] = 0.0
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
                    m = piece_mem[p]
                    s = piece_s0[p] + r
                    if not slot_marks[m, s]:
                        slot_marks[m, s] = True
                        marked[m, marked_n[m]] = s
                        marked_n[m] += 1
            n += 1
    return n, count


@njit(cache=True, error_model="numpy", nogil=True)
def _read_rails(row, w, half, written_level):
    """One state row's w rail pairs (1-rail, 0-rail) as `read_rails` reads them, in float64: (the
    word: bit j set where its 1-rail is above `half`, the smallest |1-rail - half| over the row's
    rails that are not NaN, whether one of them is NaN, whether a rail's |value| is above
    `written_level` with no NaN among them)."""
    word = np.uint64(0)
    low = np.inf
    low_nan = False
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
    return word, low, low_nan, (not top_nan) and top > written_level


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
            word, row_low, row_nan, row_written = _read_rails(S[heads[k], r], w, half, written_level)
            vals[fields[k], c] = word
            low = min(low, row_low)
            low_nan = low_nan or row_nan
            any_written = any_written or row_written
        if any_written:
            written[c] = True
        m = margin[c]
        margin[c] = np.nan if (low_nan or m != m) else min(m, low)


@njit(cache=True, error_model="numpy", nogil=True)
def read_marked(stacked, marked, marked_n, slot_marks, mem_blocks, blk_g, blk_w, blk_s0, blk_n, blk_heads_at, blk_heads,
                blk_fields, col0, slots, vals, written, margin, lowest, level, written_level):
    """Every memory's marked slots (`take_moved_rows`: marked[m, :marked_n[m]]) read from the states
    `stacked` [G, hv, dk, dv] as `read_block` reads them, all memories in one call: memory m's blocks
    mem_blocks[m] .. mem_blocks[m + 1] (each `MemoryPlacement.blocks` entry: GDN layer index blk_g,
    width blk_w, first slot blk_s0, slots blk_n, its (value head, field) pairs blk_heads_at[b] ..
    blk_heads_at[b + 1] of blk_heads and blk_fields); a slot s of memory m is column col0[m] + s of
    vals [fields, columns] (uint64), written and margin, rewritten from zeros, False and inf. Each
    listed memory's marked slots are sorted in place, unmarked in slot_marks, and its smallest
    margin over its `slots[m]` slots put in lowest[m] (NaN if one is NaN: numpy's min)."""
    half = level / 2
    for m in range(marked_n.shape[0]):
        k = marked_n[m]
        if k == 0:
            continue
        marked[m, :k] = np.sort(marked[m, :k])
        for c in range(k):
            s = marked[m, c]
            slot_marks[m, s] = False
            col = col0[m] + s
            vals[:, col] = 0
            any_written = False
            low_all = np.inf
            nan_all = False
            for b in range(mem_blocks[m], mem_blocks[m + 1]):
                r = s - blk_s0[b]
                if r < 0 or r >= blk_n[b]:
                    continue
                S = stacked[blk_g[b]]
                w = blk_w[b]
                low = np.inf
                low_nan = False
                for kk in range(blk_heads_at[b], blk_heads_at[b + 1]):
                    word, row_low, row_nan, row_written = _read_rails(S[blk_heads[kk], r], w, half, written_level)
                    vals[blk_fields[kk], col] = word
                    low = min(low, row_low)
                    low_nan = low_nan or row_nan
                    any_written = any_written or row_written
                if low_nan or nan_all:
                    nan_all = True
                else:
                    low_all = min(low_all, low)
            written[col] = any_written
            margin[col] = np.nan if nan_all else low_all
        lo = np.inf
        for s in range(slots[m]):
            x = margin[col0[m] + s]
            if x != x:
                lo = x
                break
            if x < lo:
                lo = x
        lowest[m] = lo


@njit(cache=True, error_model="numpy", nogil=True)
def mark_touched(wrow, decay, touched):
    """Mark in touched [G, hv, dk] the rows some tokens' updates moved: wrow [n, G, hv] (float32:
    the row a value head's update moved, -1 none, -2 several: all its rows), decay [n, G, hv] (a
    non-zero log decay moved all its rows)."""
    n, G, hv = wrow.shape
    whole = np.zeros((G, hv), np.bool_)          # heads marked whole in this call
    for t in range(n):
        for g in range(G):
            for h in range(hv):
                if whole[g, h]:
                    continue
                w = np.int64(wrow[t, g, h])
                if w >= 0:
                    touched[g, h, w] = True
                if w == -2 or decay[t, g, h] != 0:
                    touched[g, h, :] = True
                    whole[g, h] = True


@njit(cache=True, error_model="numpy", nogil=True)
def put_taps(cap, gate, cur, betas, decays, vnorms, fields):
    """`recorder._Taps.put_reduced` of a chunk of the compact engine's captures, value for value:
    cap [n, G, TAP_FIELDS, hv] (`fields`: the indices of TAP_QS, TAP_QW, TAP_QSQ, TAP_KS, TAP_KW,
    TAP_KSQ, TAP_BETA, TAP_DECAY, TAP_VSQ), gate [n, G, hk] into cur [n, G, hk, 6] (q's top entry's
    index and value, k's, the largest beta of the key head's value heads, the gate), betas,
    decays [n, G, hv] and vnorms = sqrt(|v|^2). Returns, for the queries and for the keys, the
    largest distance of a live token's row from its top entry, sqrt(max(|x|^2 - top^2, 0)) in
    float32 (a token is live in a layer where a beta is > 0 or a gate != 0): -1 where no token is
    live, NaN where one of them is NaN (numpy's max; the caller ignores it, as `max(error, nan)`
    does)."""
    n, G, _, hv = cap.shape
    hk = gate.shape[2]
    group = hv // hk
    f_qs, f_qw, f_qsq, f_ks, f_kw, f_ksq, f_beta, f_decay, f_vsq = fields
    worst = np.full(2, np.float32(-1.0))          # queries, keys
    nan = np.zeros(2, np.bool_)
    for t in range(n):
        for g in range(G):
            live = False
            for h in range(hv):
                b = cap[t, g, f_beta, h]
                betas[t, g, h] = b
                decays[t, g, h] = cap[t, g, f_decay, h]
                vnorms[t, g, h] = np.sqrt(cap[t, g, f_vsq, h])
                if b > 0:
                    live = True
            for a in range(hk):
                c = cur[t, g, a]
                c[0] = cap[t, g, f_qs, a]
                c[1] = cap[t, g, f_qw, a]
                c[2] = cap[t, g, f_ks, a]
                c[3] = cap[t, g, f_kw, a]
                top = cap[t, g, f_beta, a * group]
                for j in range(1, group):
                    x = cap[t, g, f_beta, a * group + j]
                    if top == top and (x > top or x != x):     # numpy's max: a NaN wins
                        top = x
                c[4] = top
                c[5] = gate[t, g, a]
                if gate[t, g, a] != 0:
                    live = True
            if not live:
                continue
            for a in range(hk):
                for e in range(2):
                    w = cap[t, g, f_qw if e == 0 else f_kw, a]
                    d = cap[t, g, f_qsq if e == 0 else f_ksq, a] - w * w
                    if d != d:
                        nan[e] = True
                        continue
                    if d < 0:
                        d = np.float32(0.0)
                    if d > worst[e]:
                        worst[e] = d
    out = np.empty(2)
    for e in range(2):
        out[e] = np.nan if nan[e] else (-1.0 if worst[e] < 0 else np.float64(np.sqrt(worst[e])))
    return out
