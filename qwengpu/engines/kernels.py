"""The compact engine's forward pass, compiled by numba: every sublayer of the stock Qwen3.5
forward on the packed sparse weights (`packing.Weights`), a token at a time (`forward_tokens`,
`step_batch`: B sequences together) or a prompt in blocks of tokens (`prefill_blocks`), measuring
the run's margins inside the loop (`_probe`: residual code margin, `_noise`: form noise).

See `qwengpu.engines.compact` for what is exact and why.

The helpers are plain `njit` functions, not `inline="always"`: numba's IR-level inlining of every
helper into the three entry points doubled the first launch's compile (~100 s against ~50 s on the
2-core VM, Dec 6 2026) for no measured speed; LLVM still inlines them where it pays.
"""
from __future__ import annotations

import math

import numpy as np

from .floats import F32, ONE, SCALE_UP, SMALLEST_NORMAL, ZERO, njit, rms, sigmoid, silu, tiny_product

#: what a forward call captures for the hooks (bit flags)
CAP_HIDDEN, CAP_GATES, CAP_GDN = 1, 2, 4
#: the lab's taps instead of the GDN inputs (`CAP_TAPS`, into the same argument: [T, G, TAP_FIELDS, hv]):
#: per key head a (columns a < hk) its query's top entry (index, value) and sum of squares, the same of
#: its key, and the output gate pre-activation z of its first value head; per value head v (columns
#: v < hv) its write strength beta, log decay, the sum of squares of its value, the row of its
#: state the delta rule may have moved (`_written_row`: -1 none, -2 several; a decay moves them all)
#: and a bound on every |term| the update added to that row (each value moved by at most twice it,
#: the rounding of a sum being at most the term added; 0 where none). The reductions are
#: numpy's, bit for bit (`np.argmax`, `np.take_along_axis`, `(x * x).sum(-1)`: its pairwise summation,
#: `_pairwise_squares`) on the rows `CAP_GDN` would capture: ~70 KB a token, not ~1.4 MB.
CAP_TAPS = 8
TAP_QS, TAP_QW, TAP_QSQ, TAP_KS, TAP_KW, TAP_KSQ, TAP_Z, TAP_BETA, TAP_DECAY, TAP_VSQ, TAP_WROW, TAP_WMAX = range(12)
TAP_FIELDS = 12



@njit(cache=True, error_model="numpy")
def _spmv(W, m, x, y):
    """y += W_m x over the non-empty columns whose input is non-zero (each row sums its terms in
    increasing column order, as a sequential dense sum does)."""
    colidx, cstart, row0, slen, sval, soff, dense = W.colidx, W.cstart, W.row0, W.slen, W.sval, W.soff, W.dense
    for k in range(W.mcol[m], W.mcol[m + 1]):
        xj = x[colidx[k]]
        if xj != 0 and abs(xj) < W.ctiny[k]:
            _tiny_column(W, k, xj, y)
        elif xj != 0:
            for p in range(cstart[k], cstart[k + 1]):
                r = row0[p]
                n = slen[p]
                d = soff[p]
                if d < 0:
                    v = sval[p] * xj
                    for i in range(r, r + n):
                        y[i] += v
                else:
                    for i in range(n):
                        y[r + i] += dense[d + i] * xj


@njit(cache=True, error_model="numpy")
def _tiny_column(W, k, xj, y):
    """y += column k times a tiny input xj (0 < |xj| < ctiny[k]): `_spmv`'s terms, each product by
    `tiny_product` (bit for bit the float32 product)."""
    xs = np.float64(xj) * SCALE_UP
    for p in range(W.cstart[k], W.cstart[k + 1]):
        r = W.row0[p]
        n = W.slen[p]
        d = W.soff[p]
        if d < 0:
            v = tiny_product(W.sval[p], xs)
            for i in range(r, r + n):
                y[i] += v
        else:
            for i in range(n):
                y[r + i] += tiny_product(W.dense[d + i], xs)




@njit(cache=True, error_model="numpy")
def _norm_into(W, m, h, w1, eps, x):
    """x = RMSNorm(h) (zero-centred weight w1 = 1 + w), on the columns matrix m reads. A subnormal
    feature (a SiLU tail) is multiplied by `tiny_product`, bit for bit, without the assist."""
    r = rms(h, eps)
    for k in range(W.mcol[m], W.mcol[m + 1]):
        c = W.colidx[k]
        hc = h[c]
        if hc != 0 and abs(hc) < SMALLEST_NORMAL:
            t = tiny_product(r, np.float64(hc) * SCALE_UP)
            x[c] = tiny_product(w1[c], np.float64(t) * SCALE_UP)
        else:
            x[c] = hc * r * w1[c]


@njit(cache=True, error_model="numpy")
def _add_rows(W, m, h, y):
    """h += y on the rows matrix m writes, and y back to 0 there."""
    for p in range(W.mrow[m], W.mrow[m + 1]):
        r = W.rowlist[p]
        h[r] = h[r] + y[r]
        y[r] = ZERO


@njit(cache=True, error_model="numpy")
def _scratch(W):
    """The work buffers of a forward pass (zero; every stage leaves what it used at zero, except act
    and dist, which are rewritten before every read)."""
    width, inter, hk, hv, dk, dv = W.dims[0], W.dims[1], W.dims[3], W.dims[4], W.dims[5], W.dims[6]
    kd, vd = hk * dk, hv * dv
    R = 2 * kd + 2 * vd + 2 * hv
    return (np.zeros(width, np.float32),                  # x: the normed residual
            np.zeros(max(R, 2 * inter, width), np.float32),  # y: a projection's output
            np.zeros(2 * kd + vd, np.float32),            # mixed: q, k, v after the conv and SiLU
            np.zeros(kd, np.float32),                     # qu: l2-normed queries
            np.zeros(kd, np.float32),                     # qn: ... over sqrt(dk)
            np.zeros(kd, np.float32),                     # kn: l2-normed keys
            np.zeros(hk, np.int64), np.zeros(hk, np.int64),  # nq, nk: non-zero entries per key head
            np.zeros((hk, dk), np.int64), np.zeros((hk, dk), np.int64),  # nzq, nzk: where
            np.zeros(vd, np.float32),                     # o: the delta rule's read-out
            np.zeros(hv, np.float32), np.zeros(hv, np.float32),  # beta, decay
            np.zeros(dv, np.float32), np.zeros(dv, np.float32),  # kv, delta
            np.zeros(inter, np.float32),                  # act: the MLP's activations
            np.zeros(_most_lattices(W), np.float64),      # dist: one layer's gates' distances from their lattices
            np.zeros(hv, np.int64))                       # nv: non-zero value entries per value head (the taps')


@njit(cache=True, error_model="numpy")
def _most_lattices(W):
    most = 0
    for L in range(W.fstart.shape[0] - 1):
        most = max(most, W.fstart[L + 1] - W.fstart[L])
    return most


@njit(cache=True, error_model="numpy")
def _mixer(W, L, g, h, pos, S_all, ring, sc, cap_flags, cap_gdn, t):
    """The GDN mixer of layer L (GDN layer g) on one token: h += out(delta rule(norm(h)))."""
    x, y, o = sc[0], sc[1], sc[10]
    m = W.mix_mat[L]
    _norm_into(W, m, h, W.in_norm[L], W.eps[0], x)
    _spmv(W, m, x, y)
    _delta_rule(W, g, y, o, pos, S_all, ring, sc, cap_flags, cap_gdn, t)
    for p in range(W.mrow[m], W.mrow[m + 1]):
        y[W.rowlist[p]] = ZERO
    mo = W.out_mat[L]
    _spmv(W, mo, o, y)
    _add_rows(W, mo, h, y)


@njit(cache=True, error_model="numpy")
def _delta_rule(W, g, y, o, pos, S_all, ring, sc, cap_flags, cap_gdn, t):
    """GDN layer g on one token from its projections y (q, k, v, z, b, a): the conv, the gated
    delta rule on the state, the gated RMSNorm; the read-out into o. Leaves its scratch at zero
    (y is the caller's)."""
    hk, hv, dk, dv, kernel = W.dims[3], W.dims[4], W.dims[5], W.dims[6], W.dims[9]
    mixed, qu, qn, kn, nq, nk, nzq, nzk = sc[2:10]
    beta, decay, kv, delta = sc[11:15]
    nv = sc[17]
    eps = W.eps[0]
    kd = hk * dk
    vd = hv * dv
    C = 2 * kd + vd
    group = hv // hk
    sqrt_dk = F32(math.sqrt(dk))
    # the causal conv (a ring of the last kernel - 1 inputs) and SiLU, on live channels (in
    # increasing order), noting the non-zero queries and keys per key head as they come
    cw = W.conv[g]
    for a in range(hk):
        nq[a] = 0
        nk[a] = 0
    for v in range(hv):
        nv[v] = 0
    for p in range(W.lchan[g], W.lchan[g + 1]):
        c = W.chan[p]
        if W.conv_plain[g, c] == 1:
            val = y[c] * cw[c, kernel - 1]
        else:
            val = ZERO
            for j in range(kernel - 1):
                val += ring[(pos + j) % (kernel - 1), c] * cw[c, j]
            val += y[c] * cw[c, kernel - 1]
            ring[pos % (kernel - 1), c] = y[c]
        mixed[c] = _silu_off(val)
        if mixed[c] != 0:
            if c >= 2 * kd:
                nv[(c - 2 * kd) // dv] += 1
            elif c < kd:
                a = c // dk
                nzq[a, nq[a]] = c - a * dk
                nq[a] += 1
            else:
                a = (c - kd) // dk
                nzk[a, nk[a]] = c - kd - a * dk
                nk[a] += 1
    # l2-normed queries and keys per key head (their squares in increasing order, as a dense sum)
    for a in range(hk):
        cq = nq[a]
        ck = nk[a]
        sq = ZERO
        sk = ZERO
        for n in range(cq):
            vq = mixed[a * dk + nzq[a, n]]
            sq += vq * vq
        for n in range(ck):
            vk = mixed[kd + a * dk + nzk[a, n]]
            sk += vk * vk
        rq = ONE / np.sqrt(sq + F32(1e-6))
        rk = ONE / np.sqrt(sk + F32(1e-6))
        for n in range(cq):
            i = a * dk + nzq[a, n]
            qu[i] = mixed[i] * rq
            qn[i] = qu[i] / sqrt_dk
        for n in range(ck):
            i = a * dk + nzk[a, n]
            kn[i] = mixed[kd + i] * rk
    for v in range(hv):
        beta[v] = sigmoid(y[C + vd + v])
        sc_ = W.decay_scale[g, v]
        if sc_ != 0:
            av = y[C + vd + hv + v] + W.dt_bias[g, v]
            sp = av if av > F32(20.0) else np.log1p(np.exp(av))
            decay[v] = -sc_ * sp
        else:
            decay[v] = ZERO
    # the gated delta rule, head by head, on the rows the key and the query touch
    for v in range(hv):
        a = v // group
        S = S_all[v]
        if decay[v] != 0:
            f = np.exp(decay[v])
            for i in range(dk):
                for j in range(dv):
                    S[i, j] = S[i, j] * f
        if nk[a] > 0:
            for j in range(dv):
                kv[j] = ZERO
            for n in range(nk[a]):
                i = nzk[a, n]
                ki = kn[a * dk + i]
                for j in range(dv):
                    kv[j] += S[i, j] * ki
            bv = beta[v]
            for j in range(dv):
                delta[j] = (mixed[2 * kd + v * dv + j] - kv[j]) * bv
            for n in range(nk[a]):
                i = nzk[a, n]
                ki = kn[a * dk + i]
                for j in range(dv):
                    S[i, j] = S[i, j] + ki * delta[j]
            if cap_flags & CAP_TAPS:
                row, top = _written_row(kn, a * dk, nzk[a], nk[a], delta, dv)
                cap_gdn[t, g, TAP_WROW, v] = F32(row)
                cap_gdn[t, g, TAP_WMAX, v] = top
        elif cap_flags & CAP_TAPS:
            cap_gdn[t, g, TAP_WROW, v] = F32(-1)
            cap_gdn[t, g, TAP_WMAX, v] = ZERO
        # the read-out, then the gated RMSNorm of the head
        ss = ZERO
        for j in range(dv):
            acc = ZERO
            for n in range(nq[a]):
                i = nzq[a, n]
                acc += S[i, j] * qn[a * dk + i]
            o[v * dv + j] = acc
            ss += acc * acc
        if ss != 0:
            r = ONE / np.sqrt(ss / F32(dv) + eps)
            for j in range(dv):
                o[v * dv + j] = (W.gnorm[g, j] * (o[v * dv + j] * r)) * silu(y[C + v * dv + j])
    if cap_flags & CAP_GDN:
        cg = cap_gdn[t, g]
        cg[0, :kd] = qu
        cg[1, :kd] = kn
        cg[2, :vd] = mixed[2 * kd:]
        cg[3, :hv] = beta
        cg[4, :hv] = decay
        cg[5, :vd] = y[C:C + vd]
    if cap_flags & CAP_TAPS:
        _capture_taps(cap_gdn[t, g], qu, kn, mixed, nq, nk, nzq, nzk, nv, beta, decay, y, C, hk, hv, dk, dv)
    # back to zeros for the next layer: the live channels, the normed q and k
    for p in range(W.lchan[g], W.lchan[g + 1]):
        mixed[W.chan[p]] = ZERO
    for a in range(hk):
        for n in range(nq[a]):
            qu[a * dk + nzq[a, n]] = ZERO
            qn[a * dk + nzq[a, n]] = ZERO
        for n in range(nk[a]):
            kn[a * dk + nzk[a, n]] = ZERO


@njit(cache=True, error_model="numpy")
def _capture_taps(cg, qu, kn, mixed, nq, nk, nzq, nzk, nv, beta, decay, y, C, hk, hv, dk, dv):
    """One GDN layer's taps at one token into cg [TAP_FIELDS, hv] (`CAP_TAPS`; a value head with no
    non-zero entry, nv[v] = 0, has |v|^2 = +0.0, as the pairwise sum of its zeros)."""
    kd = hk * dk
    group = hv // hk
    for a in range(hk):
        _tap_head(cg, TAP_QS, a, qu, a * dk, dk, nzq[a, 0], nq[a])
        _tap_head(cg, TAP_KS, a, kn, a * dk, dk, nzk[a, 0], nk[a])
        cg[TAP_Z, a] = y[C + a * group * dv]
    for v in range(hv):
        cg[TAP_BETA, v] = beta[v]
        cg[TAP_DECAY, v] = decay[v]
        cg[TAP_VSQ, v] = _pairwise_squares(mixed, 2 * kd + v * dv, dv) if nv[v] else ZERO


@njit(cache=True, error_model="numpy")
def _tap_head(cg, f, a, x, lo, n, first, count):
    """Key head a's row x[lo:lo + n] (a query or a key, `count` non-zero entries, the first at
    `first`): its top entry's index and value and its sum of squares into cg[f:f + 3, a]. A row with
    one positive entry (the machine's keys and queries) or none (all zeros: a prompt's) is read
    from it; any other by numpy's reductions over the whole row."""
    if count == 0 or (count == 1 and x[lo + first] > 0):
        i = first if count else 0     # all zeros: argmax's first entry
        v = x[lo + i]
        sq = v * v
    else:
        i = _argmax(x, lo, n)
        v = x[lo + i]
        sq = _pairwise_squares(x, lo, n)
    cg[f, a] = F32(i)
    cg[f + 1, a] = v
    cg[f + 2, a] = sq


@njit(cache=True, error_model="numpy")
def _written_row(kn, lo, nz, count, delta, dv):
    """The state row a value head's delta-rule update (S[i] += ki * delta for its key's entries
    kn[lo + nz[:count]]) may have moved, and a bound on every term it added: (-1, 0) when delta is
    all zeros (each value as it was); else the entry's row (-2 when the key has several entries)
    and fl(max |ki| * max |delta|), at least every |fl(ki * delta[j])| (rounding is monotone; NaN
    where delta has a NaN). A term that underflows to 0 still names its row: a row named may
    not have moved, one not named has not."""
    dmax = ZERO
    for j in range(dv):
        d = abs(delta[j])
        if d > dmax or d != d:
            dmax = d
            if d != d:
                break
    if count == 0 or dmax == 0:
        return -1, ZERO
    kmax = ZERO
    for n in range(count):
        k = abs(kn[lo + nz[n]])
        if k > kmax or k != k:
            kmax = k
            if k != k:
                break
    return (nz[0] if count == 1 else -2), kmax * dmax


@njit(cache=True, error_model="numpy")
def _argmax(x, lo, n):
    """np.argmax(x[lo:lo + n]): the first largest entry, or the first NaN."""
    best = 0
    top = x[lo]
    if top != top:
        return 0
    for i in range(1, n):
        v = x[lo + i]
        if v != v:
            return i
        if v > top:
            top = v
            best = i
    return best


@njit(cache=True, error_model="numpy")
def _pairwise_squares(x, lo, n):
    """(x[lo:lo + n] ** 2).sum() in float32 as numpy sums it (its pairwise summation: up to 128
    terms in eight interleaved partial sums, longer runs halved at a multiple of 8), bit for bit."""
    if n < 8:
        res = ZERO
        for i in range(n):
            res += x[lo + i] * x[lo + i]
        return res
    if n <= 128:
        r0, r1, r2, r3 = x[lo] * x[lo], x[lo + 1] * x[lo + 1], x[lo + 2] * x[lo + 2], x[lo + 3] * x[lo + 3]
        r4, r5, r6, r7 = x[lo + 4] * x[lo + 4], x[lo + 5] * x[lo + 5], x[lo + 6] * x[lo + 6], x[lo + 7] * x[lo + 7]
        i = lo + 8
        end = lo + n - n % 8
        while i < end:
            r0 += x[i] * x[i]
            r1 += x[i + 1] * x[i + 1]
            r2 += x[i + 2] * x[i + 2]
            r3 += x[i + 3] * x[i + 3]
            r4 += x[i + 4] * x[i + 4]
            r5 += x[i + 5] * x[i + 5]
            r6 += x[i + 6] * x[i + 6]
            r7 += x[i + 7] * x[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < lo + n:
            res += x[i] * x[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_squares(x, lo, n2) + _pairwise_squares(x, lo + n2, n - n2)


@njit(cache=True, error_model="numpy")
def _mlp(W, L, h, sc, margins, cap_flags, cap_gates, t):
    """The SwiGLU MLP of layer L on one token: h += down(silu(gate) * up)."""
    inter = W.dims[1]
    x, y, act = sc[0], sc[1], sc[15]
    m = W.gu_mat[L]
    _norm_into(W, m, h, W.post_norm[L], W.eps[0], x)
    _spmv(W, m, x, y)
    _noise(W, L, y, margins, sc[16])
    if cap_flags & CAP_GATES:
        cap_gates[t, L] = y[:inter]
    _activations(y, act, inter)
    y[:2 * inter] = ZERO
    md = W.down_mat[L]
    _spmv(W, md, act, y)
    _add_rows(W, md, h, y)


@njit(cache=True, error_model="numpy")
def _silu_off(x):
    """`silu` for scalar code whose inputs are mostly 0 or off (<= -89: a memory's off keys), which
    skip the exp."""
    if x == 0:
        return x
    if x <= F32(-89.0):
        return x * ZERO
    return silu(x)


@njit(cache=True, error_model="numpy")
def _activations(y, act, inter):
    """act = silu(gate) * up for every neuron, gate = y[:inter], up = y[inter:2 inter]: a neuron
    without weights gets silu(0) * 0 = 0, an input the down product skips; so does one whose up is
    0, whatever its gate. Every entry is rewritten, so act needs no clearing."""
    for i in range(inter):
        act[i] = silu(y[i]) * y[inter + i]


@njit(cache=True, error_model="numpy")
def _layer(W, L, h, pos, recurrent, conv_state, sc, margins, cap_flags, cap_hidden, cap_gates, cap_gdn, t):
    """Decoder layer L on one token at position `pos` (tokens before it)."""
    g = W.gdn_of[L]
    if g >= 0:
        _mixer(W, L, g, h, pos, recurrent[g], conv_state[g], sc, cap_flags, cap_gdn, t)
    _probe(W, 2 * L, h, margins)
    if cap_flags & CAP_HIDDEN:
        cap_hidden[t, 2 * L] = h
    if W.down_mat[L] >= 0:
        _mlp(W, L, h, sc, margins, cap_flags, cap_gates, t)
    _probe(W, 2 * L + 1, h, margins)
    if cap_flags & CAP_HIDDEN:
        cap_hidden[t, 2 * L + 1] = h


@njit(cache=True, error_model="numpy")
def _embed(W, tok, h):
    h[:] = ZERO
    for p in range(W.estart[tok], W.estart[tok + 1]):
        h[W.ecols[p]] = W.evals[p]


@njit(cache=True, error_model="numpy")
def _logits(W, h, x, logits):
    m = W.lm_mat[0]
    _norm_into(W, m, h, W.final_norm, W.eps[0], x)
    logits[:] = ZERO
    if W.lm_codes.shape[0] == 0:
        _spmv(W, m, x, logits)
    else:
        _lm_by_codes(W, m, x, logits)


@njit(cache=True, error_model="numpy")
def _lm_by_codes(W, m, x, logits):
    """logits += LM head x, column after column as `_spmv` (the same products, added to each row
    in the same order), over every row: a row without an entry in the column adds -0, which
    leaves every float as it is. The column's few products are computed once, and the rows' sums
    vectorise (a gather of the products by code)."""
    k0 = W.mcol[m]
    nv = W.lm_vals.shape[1]
    prods = np.empty(nv, np.float32)
    for j in range(W.mcol[m + 1] - k0):
        xj = x[W.colidx[k0 + j]]
        if xj == 0:
            continue
        tiny = abs(xj) < W.ctiny[k0 + j]
        xs = np.float64(xj) * SCALE_UP
        prods[0] = -ZERO
        for c in range(1, nv):
            w = W.lm_vals[j, c]
            prods[c] = tiny_product(w, xs) if tiny else w * xj
        codes = W.lm_codes[j]
        for r in range(logits.shape[0]):
            logits[r] += prods[codes[r]]


@njit(cache=True, error_model="numpy", nogil=True)      # other threads run meanwhile (the lab's page)
def forward_tokens(W, tokens, h, recurrent, conv_state, length0, margins, cap_flags, cap_hidden, cap_gates,
             cap_gdn, logits):
    """Run `tokens` through the model, token after token, from the state (recurrent, conv_state,
    length0); the last token's logits into `logits`, its final residual in `h`. margins: [residual
    worst, noise worst, noise layer, noise neuron] (updated). Captures for hooks when `cap_flags`
    asks: the residual after every sublayer [T, 2L, width], the MLP gates [T, L, inter], the GDN
    inputs [T, G, 6, max(hk dk, hv dv)] (l2-normed q and k, v, beta, decay, z), or instead of them
    the lab's taps [T, G, TAP_FIELDS, hv] (`CAP_TAPS`)."""
    sc = _scratch(W)
    T = tokens.shape[0]
    for t in range(T):
        _embed(W, tokens[t], h)
        for L in range(W.dims[7]):
            _layer(W, L, h, length0 + t, recurrent, conv_state, sc, margins, cap_flags, cap_hidden, cap_gates,
                   cap_gdn, t)
    if T > 0:
        _logits(W, h, sc[0], logits)


@njit(cache=True, error_model="numpy", nogil=True)      # other threads run meanwhile (the lab's page)
def step_batch(W, tokens, h, recurrent, conv_state, lengths, margins, logits):
    """One token for each of B sequences (tokens[b] < 0: sequence b sits this step out), layer by
    layer over the batch, so that a layer's weights are read once per step; logits[b] of each."""
    sc = _scratch(W)
    B = tokens.shape[0]
    no3 = np.zeros((0, 0, 0), np.float32)
    no4 = np.zeros((0, 0, 0, 0), np.float32)
    for b in range(B):
        if tokens[b] >= 0:
            _embed(W, tokens[b], h[b])
    for L in range(W.dims[7]):
        for b in range(B):
            if tokens[b] >= 0:
                _layer(W, L, h[b], lengths[b], recurrent[b], conv_state[b], sc, margins[b], 0, no3, no3, no4, 0)
    for b in range(B):
        if tokens[b] >= 0:
            _logits(W, h[b], sc[0], logits[b])
            lengths[b] += 1


#: tokens a block prefill runs through each layer together (its buffers stay in the caches)
BLOCK = 16


@njit(cache=True, error_model="numpy")
def _block_scratch(W, nb):
    """The work buffers of a block of nb tokens, one column per token (zero, as `_scratch`)."""
    width, inter, hk, hv, dk, dv = W.dims[0], W.dims[1], W.dims[3], W.dims[4], W.dims[5], W.dims[6]
    R = 2 * hk * dk + 2 * hv * dv + 2 * hv
    return (np.zeros((max(width, inter, hv * dv), nb), np.float32),  # X: a product's inputs
            np.zeros((max(R, 2 * inter, width), nb), np.float32),    # Y: its outputs
            np.zeros((hv * dv, nb), np.float32),                     # O: the delta rule's read-outs
            np.zeros((inter, nb), np.float32),                       # A: the MLP's activations
            np.zeros(nb, np.float32))                                # V: a run's products


@njit(cache=True, error_model="numpy")
def _spmm(W, m, X, Y, n, V):
    """Y[:, :n] += W_m X[:, :n]: for each token exactly the sums of `_spmv` (the same terms in the
    same order, a term whose input is 0 skipped), the weights read once for the block. X's tiny
    inputs are consumed (set to 0: every caller rewrites or clears X after the product)."""
    colidx, cstart, row0, slen, sval, soff, dense = W.colidx, W.cstart, W.row0, W.slen, W.sval, W.soff, W.dense
    for k in range(W.mcol[m], W.mcol[m + 1]):
        xk = X[colidx[k]]
        live = False
        tiny = False
        for t in range(n):
            if xk[t] != 0:
                live = True
                if abs(xk[t]) < W.ctiny[k]:
                    tiny = True
        if not live:
            continue
        if tiny:                       # tiny inputs token by token (and consumed: set to 0), the rest as a block
            for t in range(n):
                if xk[t] != 0 and abs(xk[t]) < W.ctiny[k]:
                    _tiny_column(W, k, xk[t], Y[:, t])
                    xk[t] = ZERO
        for p in range(cstart[k], cstart[k + 1]):
            r = row0[p]
            ln = slen[p]
            d = soff[p]
            if d < 0:
                s = sval[p]
                for t in range(n):
                    V[t] = s * xk[t]
                for i in range(r, r + ln):
                    yi = Y[i]
                    for t in range(n):
                        yi[t] = yi[t] + V[t] if xk[t] != 0 else yi[t]
            else:
                for i in range(ln):
                    w = dense[d + i]
                    yi = Y[r + i]
                    for t in range(n):
                        xt = xk[t]
                        yi[t] = yi[t] + w * xt if xt != 0 else yi[t]


@njit(cache=True, error_model="numpy")
def _mixer_block(W, L, g, H, n, pos0, S_all, ring, sc, bs, cap_flags, cap_gdn, t0):
    """The GDN mixer of layer L on a block of n tokens: the projections as block products, the
    conv and the delta rule token after token (its inputs captured at rows t0.. of cap_gdn when
    cap_flags asks)."""
    X, Y, O, V = bs[0], bs[1], bs[2], bs[4]
    m = W.mix_mat[L]
    for t in range(n):
        _norm_into(W, m, H[t], W.in_norm[L], W.eps[0], X[:, t])
    _spmm(W, m, X, Y, n, V)
    for t in range(n):
        _delta_rule(W, g, Y[:, t], O[:, t], pos0 + t, S_all, ring, sc, cap_flags, cap_gdn, t0 + t)
    for p in range(W.mrow[m], W.mrow[m + 1]):
        Y[W.rowlist[p], :n] = ZERO
    mo = W.out_mat[L]
    _spmm(W, mo, O, Y, n, V)
    for t in range(n):
        _add_rows(W, mo, H[t], Y[:, t])


@njit(cache=True, error_model="numpy")
def _mlp_block(W, L, H, n, bs, block_margins, sc):
    """The SwiGLU MLP of layer L on a block of n tokens (each token's form noise into its own row
    of block_margins)."""
    inter = W.dims[1]
    X, Y, A, V = bs[0], bs[1], bs[3], bs[4]
    m = W.gu_mat[L]
    for t in range(n):
        _norm_into(W, m, H[t], W.post_norm[L], W.eps[0], X[:, t])
    _spmm(W, m, X, Y, n, V)
    for t in range(n):
        y = Y[:, t]
        _noise(W, L, y, block_margins[t], sc[16])
    for i in range(inter):            # as `_activations`, over the block's tokens
        a = A[i]
        g = Y[i]
        u = Y[inter + i]
        for t in range(n):
            a[t] = silu(g[t]) * u[t]
    for p in range(W.mrow[m], W.mrow[m + 1]):
        Y[W.rowlist[p], :n] = ZERO
    md = W.down_mat[L]
    _spmm(W, md, A, Y, n, V)
    for t in range(n):
        _add_rows(W, md, H[t], Y[:, t])


@njit(cache=True, error_model="numpy", nogil=True)      # other threads run meanwhile (the lab's page)
def prefill_blocks(W, tokens, h, recurrent, conv_state, length0, margins, logits, block, cap_flags, cap_gdn):
    """`forward_tokens`, `block` tokens at a time through each layer: the products over the block,
    the recurrences in token order. Bit for bit `forward_tokens`'s results: every token's
    arithmetic is the same, and the margins are merged in token order (the first place of the
    largest form noise is the one a token-by-token run records). Captures only the GDN inputs
    (`cap_flags` CAP_GDN: [T, G, 6, C] as `forward_tokens`) or the taps (CAP_TAPS: [T, G,
    TAP_FIELDS, hv]); 0 and an empty array: none."""
    sc = _scratch(W)
    bs = _block_scratch(W, block)
    H = np.zeros((block, W.dims[0]), np.float32)
    block_margins = np.zeros((block, 4), np.float64)
    gdn_flags = cap_flags & (CAP_GDN | CAP_TAPS)
    T = tokens.shape[0]
    n = 0
    for b0 in range(0, T, block):
        n = min(block, T - b0)
        for t in range(n):
            _embed(W, tokens[b0 + t], H[t])
            block_margins[t, 0] = 0.0
            block_margins[t, 1] = 0.0
            block_margins[t, 2] = -1.0
            block_margins[t, 3] = -1.0
        for L in range(W.dims[7]):
            g = W.gdn_of[L]
            if g >= 0:
                _mixer_block(W, L, g, H, n, length0 + b0, recurrent[g], conv_state[g], sc, bs, gdn_flags, cap_gdn, b0)
            for t in range(n):
                _probe(W, 2 * L, H[t], block_margins[t])
            if W.down_mat[L] >= 0:
                _mlp_block(W, L, H, n, bs, block_margins, sc)
            for t in range(n):
                _probe(W, 2 * L + 1, H[t], block_margins[t])
        for t in range(n):
            margins[0] = max(margins[0], block_margins[t, 0])
            if block_margins[t, 1] > margins[1]:
                margins[1] = block_margins[t, 1]
                margins[2] = block_margins[t, 2]
                margins[3] = block_margins[t, 3]
    if T > 0:
        h[:] = H[n - 1]
        _logits(W, h, sc[0], logits)


@njit(cache=True, error_model="numpy")
def _probe(W, sub, h, margins):
    for p in range(W.pstart[sub], W.pstart[sub + 1]):
        v = h[W.pfeat[p]]
        d = abs(v - np.rint(v))
        margins[0] = max(margins[0], d)


@njit(cache=True, error_model="numpy")
def _noise(W, L, gate, margins, dist):
    """The form noise of layer L's gates: each gate's distance from its lattice, in spacings (a
    vectorised pass into `dist`), then the first largest one above the run's so far."""
    f0 = W.fstart[L]
    n = W.fstart[L + 1] - f0
    for q in range(n):
        xv = (np.float64(gate[W.fidx[f0 + q]]) - W.foff[f0 + q]) * W.finv[f0 + q]
        dist[q] = abs(xv - np.rint(xv))
    for q in range(n):
        if dist[q] > margins[1]:
            margins[1] = dist[q]
            margins[2] = L
            margins[3] = W.fidx[f0 + q]


@njit(cache=True, error_model="numpy")
def _top2(logits):
    """(index of the largest logit, largest - runner-up): the first index on a tie, as argmax."""
    best = 0
    v1 = logits[0]
    v2 = -np.inf
    for i in range(1, logits.shape[0]):
        v = logits[i]
        if v > v1:
            v2 = v1
            v1 = v
            best = i
        elif v > v2:
            v2 = v
    return best, v1 - v2


def top2(logits) -> tuple[int, float]:
    """The winning token of a logits vector and its gap to the runner-up (a CPU float32 vector in
    one compiled pass; anything else through torch.topk)."""
    import torch
    if isinstance(logits, torch.Tensor) and logits.device.type == "cpu" and logits.dtype == torch.float32 \
            and logits.is_contiguous():
        i, gap = _top2(logits.numpy())
        return int(i), float(gap)
    top = torch.topk(logits, 2)
    return int(top.indices[0]), float(top.values[0] - top.values[1])
