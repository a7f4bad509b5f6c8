"""Attention of every GPU layer: which earlier tokens the current token's output draws on.

    from qwengpu.lab.attention import gdn_weights, layer_attention, attention_window
    w = gdn_weights(view.trace, t)          # [GDN layers, value heads, t + 1]: every GDN layer at token t
    a = layer_attention(view.trace, t, L)   # [heads, t + 1]: layer L (GDN: per key head; softmax: per head)
    m = attention_window(view.trace, t, L)  # [heads, rows, cols]: the same over recent tokens (a heatmap)

A **Gated DeltaNet** layer has no attention matrix of its own, but its delta rule unrolls into one.
Per value head, with keys k and queries q l2-normalised, write strengths β and decays α = exp(g):

    S_t = α_t S_{t-1} (I - β_t k_t k_tᵀ) + β_t v_t k_tᵀ,        o_t = S_t q_t
        = Σ_{s ≤ t} β_s v_s · k_sᵀ [Π_{r=s+1..t} α_r (I - β_r k_r k_rᵀ)] q_t

so the output at token t is a weighted sum of the values written at tokens s ≤ t, with weight

    A[t, s] = β_s · k_sᵀ Π_{r=s+1..t} α_r (I - β_r k_r k_rᵀ) · q_t

— the query·key overlap, times the decay products, times the erasures by later writes to the same
key, times that token's write strength β_s; β_s v_s is the value the write puts in, so the lab
also scales by |v_s| over the head's largest |v| in the run (a write of a zero value, which some
heads make with β = 0.5, puts nothing in and shows 0). A memory read draws on the last write to the
slot it reads; a slot overwritten since (β = 1) has weight 0.

The machine's keys and queries are one-hot (SiLU of ±40, then l2-norm: the other entries are
~1e-16), so each is kept as its top entry (slot, weight) (the recorder's taps) and the product
reduces to scalars per slot: A[t, s] = qw_t kw_s β_s |v_s|/max|v| [slot_s = slot_t] Π α_r
Π_{later writes r to that slot} (1 - β_r kw_r²). `trace.sparse_error` is the largest distance of any recorded q or k from
its top entry, so the reduction's error is known (`attention_error`). The 1/√dk scale of q and the
read-out's RMSNorm are left out: they scale a head's row as a whole.

A **softmax attention** layer shows its softmax weights: recorded from the stock forward when a
layer attends (`trace.attention`); the machine's attention layers have no heads compiled into them
(q_proj = k_proj = 0, zero output projection), so every score is 0 and the weights are uniform,
1 / (t + 1), over the causal window — shown as such, with the note that nothing reaches the residual.
"""
from __future__ import annotations

import numpy as np

#: rows (consumed tokens) and columns (earlier tokens) of the heatmap over recent tokens
WINDOW_ROWS = 24
WINDOW_COLS = 48


def _gdn_index(trace, layer: int) -> int:
    return list(trace.gdn_layers).index(layer)


def gdn_weights(trace, t: int, layers=None, start: int = 0) -> np.ndarray:
    """[len(layers), value heads, t + 1 - start]: the unrolled delta rule's weight of every earlier
    token's write (s = start..t) in the output of token `t` (a row of the recorded token table: the
    prompt, then the generated tokens), for the GDN layers `layers` (default: all, in
    `trace.gdn_layers` order). Only tokens start..t enter (a write's erasures come after it).
    Computed for the key heads that can draw on anything: a query now, and a write to its slot in
    the window (the others' weights are 0)."""
    taps, betas = trace.taps, trace.betas
    decays = getattr(trace, "decays", None)
    idx = np.asarray([_gdn_index(trace, L) for L in layers] if layers is not None else range(taps.shape[1]), np.int64)
    hk, hv = taps.shape[2], betas.shape[2]
    group = hv // hk
    out = np.zeros((len(idx), hv, t + 1 - start), np.float32)
    past = taps[start:t + 1] if layers is None else taps[start:t + 1][:, idx]    # [T, G, hk, 6] (all: a view)
    now = past[-1]                                      # [G, hk, 6]
    ks, kws, bmax = past[..., 2], past[..., 3], past[..., 4]     # [T, G, hk] each
    hit = (ks == now[None, ..., 0]) & (kws != 0) & (bmax > 0)     # a write to the slot read now
    gi, ki = np.nonzero(hit.any(0) & (now[..., 1] != 0))
    if not len(gi):
        return out
    gv = np.repeat(gi, group)                           # the active key heads' value heads
    hi = (ki[:, None] * group + np.arange(group)).reshape(-1)
    li = idx[gv]
    kv = hi // group
    qw = now[gv, kv, 1]                                 # [A]
    same = hit[:, gv, kv]                               # [T, A]
    kw = kws[:, gv, kv]
    beta = betas[start:t + 1][:, li, hi]
    value = _value_scale(trace)[start:t + 1][:, li, hi]
    alpha = np.exp(decays[start:t + 1][:, li, hi]) if decays is not None and len(decays) else np.ones_like(beta)
    factor = alpha * np.where(same, 1.0 - beta * kw * kw, 1.0)   # token r's effect on every earlier write
    rev = np.cumprod(factor[::-1], axis=0)[::-1]        # rev[s] = Π_{r=s..t}
    later = np.concatenate([rev[1:], np.ones_like(rev[:1])])     # Π_{r=s+1..t}
    out[gv, hi] = (qw[None] * kw * beta * value * same * later).T
    return out


def _value_scale(trace) -> np.ndarray:
    """[rows, G, hv]: each write's value norm |v_s| over its head's largest in the run (0..1; 1 where
    not recorded): a write of a zero value puts nothing in, whatever its β."""
    got = getattr(trace, "_value_scale", None)
    if got is None:
        vn = getattr(trace, "vnorms", None)
        if vn is None or not len(vn):
            got = np.ones_like(trace.betas)
        else:
            top = vn.max(0, keepdims=True)
            got = np.where(top > 0, vn / np.where(top > 0, top, 1), 0).astype(np.float32)
        trace._value_scale = got
    return got


def attention_error(trace) -> float:
    """The largest distance of a recorded query or key from its top entry (0 for exact one-hot
    keys): a bound on what the one-hot reduction of `gdn_weights` leaves out, per unit of weight."""
    return float(getattr(trace, "sparse_error", 0.0))


def layer_kind(trace, layer: int) -> str:
    return trace.layers[layer].kind


def is_base_layer(trace, layer: int) -> bool:
    """A spliced checkpoint's own layer (after the GPU's): switched off on GPU tokens."""
    return getattr(trace.layers[layer], "part", "gpu") == "base"


def head_count(trace, layer: int) -> int:
    """Heads a layer's attention is shown with: key heads of a GDN layer, query heads of a softmax one."""
    if layer in trace.gdn_layers or (is_base_layer(trace, layer) and layer_kind(trace, layer) == "linear_attention"):
        return int(trace.taps.shape[2])
    att = getattr(trace, "attention", {}) or {}
    if layer in att and att[layer]:
        return int(np.asarray(att[layer][0]).shape[0])
    return int(getattr(trace, "attn_heads", 1))


def layer_attention(trace, t: int, layer: int, by: str = "key", start: int = 0) -> np.ndarray:
    """[heads, t + 1 - start]: layer `layer`'s weights over tokens start..t for the output of token
    `t`. GDN: per key head, the largest weight among its value heads (`by="value"`: per value
    head); softmax attention: per head, recorded or (no heads compiled in) uniform. A spliced
    checkpoint's base layer: 0 (its gates are switched off on GPU tokens, so its output draws on
    nothing: `trace.activity` measures it; on text tokens it is the base's and not decoded here)."""
    if is_base_layer(trace, layer):
        return np.zeros((head_count(trace, layer), t + 1 - start), np.float32)
    if layer in trace.gdn_layers:
        w = gdn_weights(trace, t, [layer], start)[0]     # [hv, T]
        if by == "value":
            return w
        hk = trace.taps.shape[2]
        return w.reshape(hk, -1, w.shape[-1]).max(1)
    att = getattr(trace, "attention", {}) or {}
    if layer in att and t < len(att[layer]):
        row = np.asarray(att[layer][t], np.float32)
        return row[:, start:t + 1]
    return np.full((head_count(trace, layer), t + 1 - start), 1.0 / (t + 1), np.float32)


def attention_window(trace, t: int, layer: int, rows: int = WINDOW_ROWS, cols: int = WINDOW_COLS):
    """(matrix [heads, n_rows, n_cols], first row token, first column token): `layer_attention` for
    the consumed tokens t - rows + 1 .. t (rows) over the tokens t - cols + 1 .. t (columns)."""
    r0, c0 = max(0, t - rows + 1), max(0, t - cols + 1)
    n_r, n_c = t - r0 + 1, t - c0 + 1
    if layer in trace.gdn_layers and r0 >= c0:
        return _gdn_window(trace, t, layer, r0, c0), r0, c0
    out = np.zeros((head_count(trace, layer), n_r, n_c), np.float32)
    for i, u in enumerate(range(r0, t + 1)):
        if u < c0:
            continue
        seg = layer_attention(trace, u, layer, start=c0)
        out[:, i, :seg.shape[1]] = seg
    return out, r0, c0


def _gdn_window(trace, t: int, layer: int, r0: int, c0: int) -> np.ndarray:
    """`gdn_weights` of one layer for the rows r0..t over the columns c0..t at once (r0 >= c0),
    as [key heads, rows, cols] (max over each key head's value heads)."""
    li = _gdn_index(trace, layer)
    taps = trace.taps[c0:t + 1, li]                      # [W, hk, 6]
    hk, hv = taps.shape[1], trace.betas.shape[2]
    ch = np.arange(hv) // (hv // hk)
    W = t + 1 - c0
    rows = np.arange(r0 - c0, W)                          # the rows' positions in the window
    qs, qw = taps[rows, :, 0][:, ch], taps[rows, :, 1][:, ch]           # [R, hv]
    ks, kw = taps[:, :, 2][:, ch], taps[:, :, 3][:, ch]                 # [W, hv]
    beta = trace.betas[c0:t + 1, li]
    value = _value_scale(trace)[c0:t + 1, li]
    decays = getattr(trace, "decays", None)
    alpha = np.exp(decays[c0:t + 1, li]) if decays is not None and len(decays) else np.ones_like(beta)
    same = ks[None] == qs[:, None]                        # [R, W, hv]
    factor = alpha[None] * np.where(same, 1.0 - (beta * kw * kw)[None], 1.0)
    after = np.arange(W)[None, :] > rows[:, None]         # tokens after the row's own: no effect
    factor[after] = 1.0
    rev = np.cumprod(factor[:, ::-1], axis=1)[:, ::-1]
    later = np.concatenate([rev[:, 1:], np.ones_like(rev[:, :1])], axis=1)
    w = qw[:, None] * (kw * beta * value)[None] * same * later
    w[after] = 0.0
    return np.transpose(w.reshape(len(rows), W, hk, -1).max(3), (2, 0, 1)).astype(np.float32)


def layers_overview(trace, t: int, start: int = 0) -> np.ndarray:
    """[layers, t + 1 - start]: every layer's largest weight (over its heads) on each token
    start..t for the output of token `t` — the minimap of which tokens each GPU layer draws on now."""
    out = np.zeros((len(trace.layers), t + 1 - start), np.float32)
    if len(trace.gdn_layers):
        w = gdn_weights(trace, t, start=start)           # [G, hv, T]
        out[list(trace.gdn_layers)] = w.max(1)
    for L in range(len(trace.layers)):
        if L not in trace.gdn_layers:
            out[L] = layer_attention(trace, t, L, start=start).max(0)
    return out


def strongest_sources(trace, t: int) -> dict:
    """{layer: (source token [heads], weight [heads])} for every GPU layer at token `t`: the earlier
    token each head draws on most (GDN: per key head), and with what weight."""
    out = {}
    if len(trace.gdn_layers):
        w = gdn_weights(trace, t)                        # [G, hv, T]
        hk = trace.taps.shape[2]
        w = w.reshape(w.shape[0], hk, -1, t + 1).max(2)  # [G, hk, T]
        for i, L in enumerate(trace.gdn_layers):
            out[int(L)] = (w[i].argmax(-1), w[i].max(-1))
    for L in range(len(trace.layers)):
        if L not in out:
            a = layer_attention(trace, t, L)
            out[L] = (a.argmax(-1), a.max(-1))
    return out


__all__ = ["gdn_weights", "attention_error", "layer_attention", "attention_window", "strongest_sources", "layers_overview",
           "head_count", "layer_kind", "is_base_layer", "WINDOW_ROWS", "WINDOW_COLS"]
