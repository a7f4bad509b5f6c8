"""The compact engine's weights: every matrix of a compiled model packed into shared flat arrays
by columns (CSC, runs of equal values kept as runs, short runs as dense segments), the LM head by
codes where its columns allow, and the per-layer parameters (`pack`, `Weights`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .floats import ONE, SMALLEST_NORMAL


class Weights(NamedTuple):
    """Every matrix of the model as CSC pieces in shared flat arrays, and per-layer parameters."""
    # matrices: matrix m's non-empty columns are colidx[mcol[m]:mcol[m+1]]; column k's entries are
    # the segments [cstart[k], cstart[k + 1]) of consecutive rows (row0, slen): a run of one value
    # sval (soff -1) or values dense[soff:soff + slen]; the rows matrix m writes are
    # rowlist[mrow[m]:mrow[m+1]]
    mcol: np.ndarray
    colidx: np.ndarray
    cstart: np.ndarray
    row0: np.ndarray
    slen: np.ndarray
    sval: np.ndarray
    soff: np.ndarray
    dense: np.ndarray
    mrow: np.ndarray
    rowlist: np.ndarray
    ctiny: np.ndarray            # [columns] an input below this (non-zero) takes the hand-rounded products
    # embedding rows by token: cols/vals[estart[t]:estart[t + 1]]
    estart: np.ndarray
    ecols: np.ndarray
    evals: np.ndarray
    # per layer (-1: absent)
    in_norm: np.ndarray          # [L, width] 1 + w
    post_norm: np.ndarray        # [L, width] 1 + w
    mix_mat: np.ndarray          # [L] the fused q, k, v, z, b, a projection
    out_mat: np.ndarray          # [L]
    gdn_of: np.ndarray           # [L] index into the GDN arrays
    gu_mat: np.ndarray           # [L] the fused gate, up projection
    down_mat: np.ndarray         # [L]
    # per GDN layer
    conv: np.ndarray             # [G, C, 4]
    conv_plain: np.ndarray       # [G, C] 1 where the conv is the identity on the current token
    lchan: np.ndarray            # [G + 1] live channels (non-empty projection rows) of GDN layer g:
    chan: np.ndarray             #   chan[lchan[g]:lchan[g + 1]]
    decay_scale: np.ndarray      # [G, hv] exp(A_log)
    dt_bias: np.ndarray          # [G, hv]
    gnorm: np.ndarray            # [G, dv]
    final_norm: np.ndarray       # [width] 1 + w
    lm_mat: np.ndarray           # [1]
    # the LM head by codes when each of its columns has few distinct values (else [0, 0]): column j's
    # entry in row r is lm_vals[j, lm_codes[j, r]], code 0 none
    lm_codes: np.ndarray         # [columns, vocab] uint8
    lm_vals: np.ndarray          # [columns, values + 1] float32
    dims: np.ndarray             # width, inter, vocab, hk, hv, dk, dv, layers, gdn layers, kernel
    eps: np.ndarray              # [1] rms eps
    # margins measured in the run: residual probes per sublayer, MLP gate lattices per layer
    pstart: np.ndarray           # [2L + 1] into pfeat
    pfeat: np.ndarray
    fstart: np.ndarray           # [L + 1] into fidx/foff/finv
    fidx: np.ndarray
    foff: np.ndarray             # float64
    finv: np.ndarray             # float64: 1 / period



class Packer:
    """Collects matrices (COO triples) into the shared arrays, column by column: a column of long
    runs of equal values on consecutive rows keeps them as runs, one of short runs keeps its
    consecutive rows as dense segments (vectorised either way; the order of each row's sum is
    the same)."""

    #: a column whose runs are shorter than this on average is stored dense
    DENSE_BELOW = 6.0

    def __init__(self):
        self.mcol, self.mrow = [0], [0]
        self.colidx, self.cstart, self.row0, self.slen, self.sval, self.soff = [], [], [], [], [], []
        self.rowlist, self.dense = [], []
        self.n_seg = self.n_cols = self.n_rows = self.n_dense = 0

    def add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> int:
        keep = vals != 0
        rows, cols, vals = rows[keep].astype(np.int64), cols[keep].astype(np.int64), vals[keep].astype(np.float32)
        order = np.lexsort((rows, cols))                 # by column, then row
        rows, cols, vals = rows[order], cols[order], vals[order]
        n = len(rows)
        newcol = np.ones(n, bool)
        newcol[1:] = cols[1:] != cols[:-1]
        gap = newcol.copy()                              # a new column or a row gap
        gap[1:] |= rows[1:] != rows[:-1] + 1
        run = gap.copy()                                 # ... or a new value
        run[1:] |= vals[1:] != vals[:-1]
        col_of = np.cumsum(newcol) - 1                   # the entry's column, 0..
        per_col = np.bincount(col_of, minlength=int(newcol.sum()))
        runs_per_col = np.bincount(col_of, weights=run, minlength=len(per_col))
        dense_col = per_col < self.DENSE_BELOW * runs_per_col
        starts = np.flatnonzero(np.where(dense_col[col_of], gap, run))
        lens = np.diff(np.append(starts, n))
        dense_seg = dense_col[col_of[starts]] & (lens > 1)
        in_dense = np.repeat(dense_seg, lens)
        offs = np.cumsum(np.where(dense_seg, lens, 0)) - np.where(dense_seg, lens, 0) + self.n_dense
        seg_col = col_of[starts]
        first_seg = np.searchsorted(seg_col, np.arange(len(per_col)))
        self.colidx.append(cols[newcol].astype(np.int32))
        self.cstart.append(first_seg + self.n_seg)
        self.row0.append(rows[starts].astype(np.int32))
        self.slen.append(lens.astype(np.int32))
        self.sval.append(np.where(dense_seg, np.float32(0), vals[starts]).astype(np.float32))
        self.soff.append(np.where(dense_seg, offs, -1).astype(np.int64))
        self.dense.append(vals[in_dense])
        self.n_dense += int(in_dense.sum())
        self.n_seg += len(starts)
        urows = np.unique(rows).astype(np.int32)
        self.rowlist.append(urows)
        self.n_cols += len(per_col)
        self.n_rows += len(urows)
        self.mcol.append(self.n_cols)
        self.mrow.append(self.n_rows)
        return len(self.mcol) - 2

    def arrays(self):
        cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)
        cstart, slen, sval = np.append(cat(self.cstart, np.int64), self.n_seg), cat(self.slen, np.int32), \
            cat(self.sval, np.float32)
        soff, dense = cat(self.soff, np.int64), cat(self.dense, np.float32)
        return (np.array(self.mcol, np.int64), cat(self.colidx, np.int32), cstart, cat(self.row0, np.int32), slen,
                sval, soff, dense, np.array(self.mrow, np.int64), cat(self.rowlist, np.int32),
                _tiny_thresholds(cstart, sval, soff, dense))


def _tiny_thresholds(cstart, sval, soff, dense) -> np.ndarray:
    """Per column: the input magnitude below which one of its products (or the input itself) may
    be subnormal, where the CPU would take a microcode assist; a smaller non-zero input takes
    `_tiny_column`'s hand-rounded products. Either path gives the float32 products exactly, so this
    only chooses the faster one: 2^-125 / (the column's smallest |weight|), and at least 2^-125
    (a subnormal input), each with a factor 2 to spare for rounding."""
    if len(cstart) == 1:
        return np.zeros(0, np.float32)
    seg_min = np.abs(sval).astype(np.float64)
    is_dense = soff >= 0
    if is_dense.any():
        # the dense segments' values lie one after another in segment order, so each reduceat span
        # is exactly one segment's values (the last one's up to the end of `dense`)
        seg_min[is_dense] = np.minimum.reduceat(np.abs(dense).astype(np.float64), soff[is_dense])
    col_min = np.minimum.reduceat(seg_min, cstart[:-1])     # every packed column has a segment
    with np.errstate(divide="ignore", over="ignore"):
        limit = np.maximum(2.0 * SMALLEST_NORMAL, 2.0 * SMALLEST_NORMAL / col_min)
    return limit.astype(np.float32)          # beyond float32's range: inf (every input by hand)


def code_table(rows, cols, vals, n_rows: int):
    """A matrix with few distinct values per column as codes: ([columns, n_rows] uint8 codes,
    [columns, values + 1] float32 values), the non-empty columns in increasing order, code 0 for no
    entry; ([0, 0], [0, 0]) when a column has more than 255 distinct values (or a non-finite one)."""
    keep = vals != 0
    rows, cols, vals = rows[keep].astype(np.int64), cols[keep].astype(np.int64), vals[keep].astype(np.float32)
    if not np.isfinite(vals).all():
        return np.zeros((0, 0), np.uint8), np.zeros((0, 0), np.float32)
    ucols, col_of = np.unique(cols, return_inverse=True)
    tables = [np.unique(vals[col_of == j]) for j in range(len(ucols))]
    width = max((len(t) for t in tables), default=0)
    if width > 255:
        return np.zeros((0, 0), np.uint8), np.zeros((0, 0), np.float32)
    codes = np.zeros((len(ucols), n_rows), np.uint8)
    table = np.zeros((len(ucols), width + 1), np.float32)
    for j, t in enumerate(tables):
        at = col_of == j
        table[j, 1:len(t) + 1] = t
        codes[j, rows[at]] = np.searchsorted(t, vals[at]) + 1
    return codes, table


def triples(m):
    """(rows, cols, vals) NumPy triples of a SparseMatrix or a dense 2-D tensor."""
    import torch
    if isinstance(m, torch.Tensor):
        r, c = torch.nonzero(m, as_tuple=True)
        return r.numpy(), c.numpy(), m[r, c].float().numpy()
    return m.rows.numpy(), m.cols.numpy(), m.vals.numpy()


def stack(parts):
    """Row-stack several (rows, cols, vals, nrows) matrices into one."""
    rows, cols, vals, off = [], [], [], 0
    for r, c, v, n in parts:
        rows.append(r + off)
        cols.append(c)
        vals.append(v)
        off += n
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


class Packed(NamedTuple):
    """A model packed for the compact engine: its weights and the geometry the engine runs with."""
    weights: Weights
    kinds: list                  # every layer's type
    gdn_layers: tuple            # the GDN layers, in order
    hk: int
    hv: int
    dk: int
    dv: int
    kernel: int                  # the conv's kernel size
    inter: int                   # the MLP width
    vocab: int
    noise_names: dict            # (layer, neuron) -> the circuit node whose form noise it measures


def pack(reference, probes: dict | None = None, lattices: dict | None = None, lm_table: bool = True) -> Packed:
    """Pack a reference engine's sparse weights (`CompactEngine` takes its arguments)."""
    width = reference.width
    kinds = [lay.kind for lay in reference.layers]
    nL = len(reference.layers)
    gdn_layers = [L for L, lay in enumerate(reference.layers) if lay.gdn is not None]
    g0 = reference.layers[gdn_layers[0]].gdn if gdn_layers else None
    hk, hv, dk, dv = (g0.hk, g0.hv, g0.dk, g0.dv) if g0 else (1, 1, 1, 1)
    kernel = g0.conv.shape[1] if g0 else 4
    inter = max((lay.gate.shape[0] for lay in reference.layers), default=1)
    vocab = reference.lm_head.shape[0]
    P = Packer()
    kd, vd = hk * dk, hv * dv
    C = 2 * kd + vd
    G = len(gdn_layers)
    mix = np.full(nL, -1, np.int64)
    outm = np.full(nL, -1, np.int64)
    gu = np.full(nL, -1, np.int64)
    down = np.full(nL, -1, np.int64)
    gdn_of = np.full(nL, -1, np.int64)
    conv = np.zeros((G, C, kernel), np.float32)
    plain = np.ones((G, C), np.int8)
    lchan, chan = [0], []
    dscale = np.zeros((G, hv), np.float32)
    dt_bias = np.zeros((G, hv), np.float32)
    gnorm = np.zeros((G, dv), np.float32)
    in_norm = np.zeros((nL, width), np.float32)
    post_norm = np.zeros((nL, width), np.float32)
    for L, lay in enumerate(reference.layers):
        in_norm[L] = ONE + lay.in_norm.numpy().astype(np.float32)
        post_norm[L] = ONE + lay.post_norm.numpy().astype(np.float32)
        if lay.gdn is not None:
            g = lay.gdn
            gi = gdn_layers.index(L)
            gdn_of[L] = gi
            parts = []
            for m, n in ((g.qkv, C), (g.z, vd), (g.b, hv), (g.a, hv)):
                r, c, v = triples(m)
                parts.append((r, c, v, n))
            r, c, v = stack(parts)
            mix[L] = P.add(r, c, v)
            chan.extend(np.unique(triples(g.qkv)[0]).tolist())
            lchan.append(len(chan))
            cw = g.conv.numpy().astype(np.float32)
            conv[gi] = cw
            plain[gi] = np.all(cw[:, :-1] == 0, axis=1).astype(np.int8)
            dscale[gi] = np.exp(g.a_log.numpy().astype(np.float32))
            dt_bias[gi] = g.dt_bias.numpy().astype(np.float32)
            gnorm[gi] = g.norm_w.numpy().astype(np.float32)
            outm[L] = P.add(*triples(g.out))
        if lay.down.nnz:
            gr, gc, gv = triples(lay.gate)
            ur, uc, uv = triples(lay.up)
            I = lay.gate.shape[0]
            gu[L] = P.add(*stack([(gr, gc, gv, inter), (ur, uc, uv, I)]))
            dr, dc, dv_ = triples(lay.down)
            down[L] = P.add(dr, dc, dv_)
    if any(gu[L] >= 0 and reference.layers[L].gate.shape[0] != inter for L in range(nL)):
        raise ValueError("layers of different MLP widths")
    # the fused gate/up rows: gate at [0, inter), up at [inter, 2 inter)
    lm = P.add(*triples(reference.lm_head))
    packed = P.arrays()
    lm_codes, lm_vals = code_table(*triples(reference.lm_head), vocab) if lm_table else \
        (np.zeros((0, 0), np.uint8), np.zeros((0, 0), np.float32))
    order = np.argsort(reference.embed_rows.numpy(), kind="stable")
    erows = reference.embed_rows.numpy()[order]
    estart = np.searchsorted(erows, np.arange(vocab + 1)).astype(np.int64)
    probes = probes or {}
    pstart, pfeat = [0], []
    for sub in range(2 * nL):
        pfeat.extend(probes.get(sub, []))
        pstart.append(len(pfeat))
    fstart, fidx, foff, fper = [0], [], [], []
    noise_names = {}
    for L in range(nL):
        d = (lattices or {}).get(L)
        if d is not None:
            for j, (i, off, per, node) in enumerate(zip(d["index"], d["offset"], d["period"], d["node"])):
                fidx.append(i)
                foff.append(off)
                fper.append(per)
                noise_names[(L, i)] = d["names"][node]
        fstart.append(len(fidx))
    weights = Weights(
        *packed,
        estart, reference.embed_cols.numpy()[order].astype(np.int32), reference.embed_vals.numpy()[order].astype(np.float32),
        in_norm, post_norm, mix, outm, gdn_of, gu, down,
        conv, plain, np.array(lchan, np.int64), np.array(chan, np.int64), dscale, dt_bias, gnorm,
        ONE + reference.final_norm.numpy().astype(np.float32), np.array([lm], np.int64), lm_codes, lm_vals,
        np.array([width, inter, vocab, hk, hv, dk, dv, nL, G, kernel], np.int64),
        np.array([reference.eps], np.float32),
        np.array(pstart, np.int64), np.array(pfeat, np.int64),
        np.array(fstart, np.int64), np.array(fidx, np.int64), np.array(foff, np.float64),
        1.0 / np.array(fper, np.float64))
    return Packed(weights, kinds, tuple(gdn_layers), hk, hv, dk, dv, kernel, inter, vocab, noise_names)
