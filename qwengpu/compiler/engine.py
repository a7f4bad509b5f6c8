"""The compact engine: a compiled model's forward passes, run over the sparsity its weights have
exactly, in numba-compiled loops.

It computes the stock Qwen3.5 forward (zero-centred RMSNorm, GDN with its causal conv, SiLU,
l2-normed keys and queries, the gated delta rule, gated RMSNorm, SwiGLU, the LM head) in float32,
a prompt in blocks of tokens (the products over the block, the conv and the delta rule token after
token: bit for bit the token-by-token run) and each generated token in one pass, and skips only
work whose result is exactly known:

- **Sparse weights.** Every matrix is kept by columns (CSC), and a column whose input is 0 is
  skipped: each output still sums its non-zero terms in increasing column order, the order of a
  sequential dense sum, so skipping adds nothing but exact zeros.
- **Exactly sparse keys and queries.** The compiler places a GDN memory's off slots at a
  pre-activation of -112 (`memory.KEY_OFF`), where SiLU is exactly -0 in fp32. The delta rule then
  reads and writes only the rows where the key is non-zero, and the read-out sums only the rows
  where the query is: every skipped term is an exact zero. The engine finds the non-zero entries
  on every token, so a head whose keys are dense is still computed right (only slower).
- **Constant parts.** A channel whose projection row is empty is 0 at every token; a head without
  decay (`exp(A_log) == 0`, the machine's) keeps its state as it is.

What it does not reproduce bit for bit is the stock forward's summation order inside the norms
and the chunked prefill, nor the vectorised `exp` of torch (it uses the C library's): those are
fp32 rounding differences, and the decisions have margins far above them. `tests/test_engine.py`
checks it against the stock forward (prefill and decode) and against the reference engine
(`qwengpu.compiler.fast`, `--engine compact-ref`) token by token, with decoded states.

Products whose input is tiny (a subnormal SiLU tail) are computed by hand, bit for bit the float32
product, without the CPU's ~150-cycle subnormal assist (`_tiny_product`).

The engine keeps no Python per layer: `forward` runs a whole chunk of tokens in one compiled call,
and measures the run's margins (the residual code margin of probed 0/1 features, the form noise of
every MLP gate against its lattice) inside it. Hooks (`hidden_hook`, `gate_hook`, `gdn_hook`) are
served from per-token captures when given.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

try:
    import numba
    from llvmlite import ir as llvm_ir
    from numba import njit
    from numba.core import types as nb_types
    from numba.extending import intrinsic
except ImportError:                                   # pragma: no cover - numba is a model dependency
    numba = None

    def intrinsic(f):
        return f

    def njit(*a, **k):
        def wrap(f):
            def missing(*args, **kw):
                raise ImportError("the compact engine needs numba: pip install 'qwengpu[model]'")
            return missing
        return wrap(a[0]) if a and callable(a[0]) else wrap

F32 = np.float32
ONE = np.float32(1.0)
ZERO = np.float32(0.0)

#: the smallest normal float32: a product (or a factor) below it costs the CPU a microcode assist
#: (~150 cycles); `_tiny_product` gives such products exactly, cheaply (`_tiny_thresholds`)
SMALLEST_NORMAL = 2.0 ** -126
SCALE_UP = 2.0 ** 149                  # a float32 subnormal times this is its integer mantissa
SCALE_DOWN = 2.0 ** -149

#: what a forward call captures for the hooks (bit flags)
CAP_HIDDEN, CAP_GATES, CAP_GDN = 1, 2, 4


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


@dataclass
class EngineState:
    """The cached state of a run: per GDN layer its conv window (the last kernel - 1 inputs, a ring)
    and its recurrent state; the run's measured margins."""
    recurrent: np.ndarray        # [G, hv, dk, dv]
    conv: np.ndarray             # [G, kernel - 1, C]
    gdn_layers: tuple
    length: int = 0
    residual_worst: float = 0.0  # largest distance of a probed feature from its 0/1 code
    noise_worst: float = 0.0     # largest form noise, in lattice spacings
    noise_at: tuple = (-1, -1)   # (layer, neuron) where it was

    def get_recurrent_state(self, layer: int):
        """Same accessor as a transformers cache: [1, hv, dk, dv] (a view, no copy)."""
        import torch
        return torch.from_numpy(self.recurrent[self.gdn_layers.index(layer)]).unsqueeze(0)

    def recurrent_array(self, layer: int) -> np.ndarray:
        """[hv, dk, dv]: the state of GDN layer `layer` as a NumPy view."""
        return self.recurrent[self.gdn_layers.index(layer)]


# ------------------------------------------------------------------------------------------------
# compiled kernels


@intrinsic
def _f32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the int32 `bits`."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.FloatType())
    return nb_types.float32(nb_types.int32), codegen


@njit(cache=True, error_model="numpy", inline="always")
def _tiny_product(w, xs):
    """fl32(w * x), the float32 product, for an input x given as xs = float64(x) * 2^149, without
    the CPU's subnormal assist: the exact product in float64, rounded to nearest even on the
    subnormal grid (2^-149) by hand when it is below 2^-126, else by one conversion."""
    p = np.float64(w) * xs                       # exact: 24 + 24 significant bits
    if abs(p) < 8388608.0:                       # 2^23 grid steps: a subnormal float32 (or 0)
        bits = np.int32(np.rint(abs(p)))         # a tie goes to the even mantissa, as the FPU does
        if p < 0:
            bits = bits | np.int32(-2147483648)  # the sign bit (-0 for an underflow to 0)
        return _f32_from_bits(bits)
    return F32(p * SCALE_DOWN)


@njit(cache=True, error_model="numpy", inline="always")
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


@njit(cache=True, error_model="numpy", inline="always")
def _tiny_column(W, k, xj, y):
    """y += column k times a tiny input xj (0 < |xj| < ctiny[k]): `_spmv`'s terms, each product by
    `_tiny_product` (bit for bit the float32 product)."""
    xs = np.float64(xj) * SCALE_UP
    for p in range(W.cstart[k], W.cstart[k + 1]):
        r = W.row0[p]
        n = W.slen[p]
        d = W.soff[p]
        if d < 0:
            v = _tiny_product(W.sval[p], xs)
            for i in range(r, r + n):
                y[i] += v
        else:
            for i in range(n):
                y[r + i] += _tiny_product(W.dense[d + i], xs)


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (float64)."""
    def codegen(context, builder, signature, args):
        f64 = llvm_ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [f64], fnty=llvm_ir.FunctionType(f64, [f64] * 3))
        return builder.call(fn, args)
    return nb_types.float64(nb_types.float64, nb_types.float64, nb_types.float64), codegen


@intrinsic
def _f64_from_bits(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.DoubleType())
    return nb_types.float64(nb_types.uint64), codegen


@intrinsic
def _bits_of_f64(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.IntType(64))
    return nb_types.uint64(nb_types.float64), codegen


def _exp2_table() -> np.ndarray:
    """2^(i/32) rounded to float64, less i << 47 (the exponent `_expf` adds back), i = 0..31."""
    from decimal import Decimal, getcontext
    getcontext().prec = 50
    return np.array([np.float64(float(Decimal(2) ** (Decimal(i) / 32))).view(np.uint64) - np.uint64(i << 47)
                     for i in range(32)], np.uint64)


# the C library's float32 exp (glibc's, which numba calls for np.exp): exp(x) = 2^(k/32) 2^(r/32)
# with k = round(x 32 / ln 2), the cubic in r and the product in float64, rounded once to float32
EXP2_TABLE = _exp2_table()
EXP_INV_LN2_N = float.fromhex("0x1.71547652b82fep+0") * 32
EXP_SHIFT = float.fromhex("0x1.8p+52")           # adding it rounds to an integer, kept in the low bits
EXP_C0 = float.fromhex("0x1.c6af84b912394p-5") / 32 ** 3
EXP_C1 = float.fromhex("0x1.ebfce50fac4f3p-3") / 32 ** 2
EXP_C2 = float.fromhex("0x1.62e42ff0c52d6p-1") / 32
EXP_OVERFLOW = F32(float.fromhex("0x1.62e42ep6"))  # above it exp overflows float32


@njit(cache=True, error_model="numpy", inline="always")
def _expf(x):
    """The C library's float32 exp, bit for bit, for x in [-17, 89] (SiLU's range), as straight-line
    code that vectorises (a call to the library does not): glibc's algorithm with the fused
    multiply-adds of its FMA build, which the dynamic linker picks on this CPU. Checked against
    numba's np.exp (the library's) on every float32 of [-17, 88.72] (`tests/test_engine.py`
    samples it)."""
    xd = np.float64(x)
    kd = _fma(EXP_INV_LN2_N, xd, EXP_SHIFT)
    ki = _bits_of_f64(kd)
    kd -= EXP_SHIFT
    r = _fma(EXP_INV_LN2_N, xd, -kd)
    s = _f64_from_bits(EXP2_TABLE[ki & np.uint64(31)] + (ki << np.uint64(47)))
    y = _fma(_fma(EXP_C0, r, EXP_C1), r * r, _fma(EXP_C2, r, 1.0))
    e = F32(y * s)
    return F32(np.inf) if x > EXP_OVERFLOW else e


@njit(cache=True, error_model="numpy", inline="always")
def _silu(x):
    """x / (1 + exp(-x)) in float32, branch-free so that loops over it vectorise."""
    e = _expf(min(max(-x, F32(-17.0)), F32(89.0)))      # clamped: exp's range (the ends are selected below)
    v = x / (ONE + e)
    # x >= 17: 1 + exp(-x) rounds to 1 (SiLU(x) == x); x <= -89: exp(-x) overflows (-0); +-0: itself
    return x if (x == 0 or x >= F32(17.0)) else (x * ZERO if x <= F32(-89.0) else v)


@njit(cache=True, error_model="numpy", inline="always")
def _sigmoid(x):
    return ONE / (ONE + np.exp(-x))


@njit(cache=True, error_model="numpy", inline="always")
def _rms(h, eps):
    """1 / sqrt(mean(h^2) + eps). The squares are summed in float64: a residual carries hundreds of
    features of ~1e-19 (SiLU's tails), whose fp32 squares are subnormal and cost a microcode assist
    each (~100 cycles); their sum is far below the fp32 rounding of the O(1) features' sum."""
    n = h.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    i = 0
    while i + 4 <= n:
        a0 = np.float64(h[i])
        a1 = np.float64(h[i + 1])
        a2 = np.float64(h[i + 2])
        a3 = np.float64(h[i + 3])
        s0 += a0 * a0
        s1 += a1 * a1
        s2 += a2 * a2
        s3 += a3 * a3
        i += 4
    while i < n:
        a0 = np.float64(h[i])
        s0 += a0 * a0
        i += 1
    return ONE / np.sqrt(F32((s0 + s1) + (s2 + s3)) / F32(n) + eps)


@njit(cache=True, error_model="numpy", inline="always")
def _norm_into(W, m, h, w1, eps, x):
    """x = RMSNorm(h) (zero-centred weight w1 = 1 + w), on the columns matrix m reads. A subnormal
    feature (a SiLU tail) is multiplied by `_tiny_product`, bit for bit, without the assist."""
    r = _rms(h, eps)
    for k in range(W.mcol[m], W.mcol[m + 1]):
        c = W.colidx[k]
        hc = h[c]
        if hc != 0 and abs(hc) < SMALLEST_NORMAL:
            t = _tiny_product(r, np.float64(hc) * SCALE_UP)
            x[c] = _tiny_product(w1[c], np.float64(t) * SCALE_UP)
        else:
            x[c] = hc * r * w1[c]


@njit(cache=True, error_model="numpy", inline="always")
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
            np.zeros(_most_lattices(W), np.float64))      # dist: one layer's gates' distances from their lattices


@njit(cache=True, error_model="numpy")
def _most_lattices(W):
    most = 0
    for L in range(W.fstart.shape[0] - 1):
        most = max(most, W.fstart[L + 1] - W.fstart[L])
    return most


@njit(cache=True, error_model="numpy", inline="always")
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


@njit(cache=True, error_model="numpy", inline="always")
def _delta_rule(W, g, y, o, pos, S_all, ring, sc, cap_flags, cap_gdn, t):
    """GDN layer g on one token from its projections y (q, k, v, z, b, a): the conv, the gated
    delta rule on the state, the gated RMSNorm; the read-out into o. Leaves its scratch at zero
    (y is the caller's)."""
    hk, hv, dk, dv, kernel = W.dims[3], W.dims[4], W.dims[5], W.dims[6], W.dims[9]
    mixed, qu, qn, kn, nq, nk, nzq, nzk = sc[2:10]
    beta, decay, kv, delta = sc[11:15]
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
        if mixed[c] != 0 and c < 2 * kd:
            if c < kd:
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
        beta[v] = _sigmoid(y[C + vd + v])
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
                o[v * dv + j] = (W.gnorm[g, j] * (o[v * dv + j] * r)) * _silu(y[C + v * dv + j])
    if cap_flags & CAP_GDN:
        cg = cap_gdn[t, g]
        cg[0, :kd] = qu
        cg[1, :kd] = kn
        cg[2, :vd] = mixed[2 * kd:]
        cg[3, :hv] = beta
        cg[4, :hv] = decay
        cg[5, :vd] = y[C:C + vd]
    # back to zeros for the next layer: the live channels, the normed q and k
    for p in range(W.lchan[g], W.lchan[g + 1]):
        mixed[W.chan[p]] = ZERO
    for a in range(hk):
        for n in range(nq[a]):
            qu[a * dk + nzq[a, n]] = ZERO
            qn[a * dk + nzq[a, n]] = ZERO
        for n in range(nk[a]):
            kn[a * dk + nzk[a, n]] = ZERO


@njit(cache=True, error_model="numpy", inline="always")
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


@njit(cache=True, error_model="numpy", inline="always")
def _silu_off(x):
    """`_silu` for scalar code whose inputs are mostly 0 or off (<= -89: a memory's off keys), which
    skip the exp."""
    if x == 0:
        return x
    if x <= F32(-89.0):
        return x * ZERO
    return _silu(x)


@njit(cache=True, error_model="numpy", inline="always")
def _activations(y, act, inter):
    """act = silu(gate) * up for every neuron, gate = y[:inter], up = y[inter:2 inter]: a neuron
    without weights gets silu(0) * 0 = 0, an input the down product skips; so does one whose up is
    0, whatever its gate. Every entry is rewritten, so act needs no clearing."""
    for i in range(inter):
        act[i] = _silu(y[i]) * y[inter + i]


@njit(cache=True, error_model="numpy", inline="always")
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


@njit(cache=True, error_model="numpy", inline="always")
def _embed(W, tok, h):
    h[:] = ZERO
    for p in range(W.estart[tok], W.estart[tok + 1]):
        h[W.ecols[p]] = W.evals[p]


@njit(cache=True, error_model="numpy", inline="always")
def _logits(W, h, x, logits):
    m = W.lm_mat[0]
    _norm_into(W, m, h, W.final_norm, W.eps[0], x)
    logits[:] = ZERO
    if W.lm_codes.shape[0] == 0:
        _spmv(W, m, x, logits)
    else:
        _lm_by_codes(W, m, x, logits)


@njit(cache=True, error_model="numpy", inline="always")
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
            prods[c] = _tiny_product(w, xs) if tiny else w * xj
        codes = W.lm_codes[j]
        for r in range(logits.shape[0]):
            logits[r] += prods[codes[r]]


@njit(cache=True, error_model="numpy", nogil=True)      # other threads run meanwhile (the lab's page)
def _forward(W, tokens, h, recurrent, conv_state, length0, margins, cap_flags, cap_hidden, cap_gates,
             cap_gdn, logits):
    """Run `tokens` through the model, token after token, from the state (recurrent, conv_state,
    length0); the last token's logits into `logits`, its final residual in `h`. margins: [residual
    worst, noise worst, noise layer, noise neuron] (updated). Captures for hooks when `cap_flags`
    asks: the residual after every sublayer [T, 2L, width], the MLP gates [T, L, inter], the GDN
    inputs [T, G, 6, max(hk dk, hv dv)] (l2-normed q and k, v, beta, decay, z)."""
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
def _step_batch(W, tokens, h, recurrent, conv_state, lengths, margins, logits):
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


@njit(cache=True, error_model="numpy", inline="always")
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


@njit(cache=True, error_model="numpy", inline="always")
def _mixer_block(W, L, g, H, n, pos0, S_all, ring, sc, bs, no4):
    """The GDN mixer of layer L on a block of n tokens: the projections as block products, the
    conv and the delta rule token after token."""
    X, Y, O, V = bs[0], bs[1], bs[2], bs[4]
    m = W.mix_mat[L]
    for t in range(n):
        _norm_into(W, m, H[t], W.in_norm[L], W.eps[0], X[:, t])
    _spmm(W, m, X, Y, n, V)
    for t in range(n):
        _delta_rule(W, g, Y[:, t], O[:, t], pos0 + t, S_all, ring, sc, 0, no4, 0)
    for p in range(W.mrow[m], W.mrow[m + 1]):
        Y[W.rowlist[p], :n] = ZERO
    mo = W.out_mat[L]
    _spmm(W, mo, O, Y, n, V)
    for t in range(n):
        _add_rows(W, mo, H[t], Y[:, t])


@njit(cache=True, error_model="numpy", inline="always")
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
            a[t] = _silu(g[t]) * u[t]
    for p in range(W.mrow[m], W.mrow[m + 1]):
        Y[W.rowlist[p], :n] = ZERO
    md = W.down_mat[L]
    _spmm(W, md, A, Y, n, V)
    for t in range(n):
        _add_rows(W, md, H[t], Y[:, t])


@njit(cache=True, error_model="numpy", nogil=True)      # other threads run meanwhile (the lab's page)
def _prefill(W, tokens, h, recurrent, conv_state, length0, margins, logits, block):
    """`_forward` without captures, `block` tokens at a time through each layer: the products over
    the block, the recurrences in token order. Bit for bit `_forward`'s results: every token's
    arithmetic is the same, and the margins are merged in token order (the first place of the
    largest form noise is the one a token-by-token run records)."""
    sc = _scratch(W)
    bs = _block_scratch(W, block)
    H = np.zeros((block, W.dims[0]), np.float32)
    block_margins = np.zeros((block, 4), np.float64)
    no4 = np.zeros((0, 0, 0, 0), np.float32)
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
                _mixer_block(W, L, g, H, n, length0 + b0, recurrent[g], conv_state[g], sc, bs, no4)
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


@njit(cache=True, error_model="numpy", inline="always")
def _probe(W, sub, h, margins):
    for p in range(W.pstart[sub], W.pstart[sub + 1]):
        v = h[W.pfeat[p]]
        d = abs(v - np.rint(v))
        margins[0] = max(margins[0], d)


@njit(cache=True, error_model="numpy", inline="always")
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


# ------------------------------------------------------------------------------------------------
# building the packed weights


class _Packer:
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


def _code_table(rows, cols, vals, n_rows: int):
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


def _triples(m):
    """(rows, cols, vals) NumPy triples of a SparseMatrix or a dense 2-D tensor."""
    import torch
    if isinstance(m, torch.Tensor):
        r, c = torch.nonzero(m, as_tuple=True)
        return r.numpy(), c.numpy(), m[r, c].float().numpy()
    return m.rows.numpy(), m.cols.numpy(), m.vals.numpy()


def _stack(parts):
    """Row-stack several (rows, cols, vals, nrows) matrices into one."""
    rows, cols, vals, off = [], [], [], 0
    for r, c, v, n in parts:
        rows.append(r + off)
        cols.append(c)
        vals.append(v)
        off += n
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


class SparseEngine:
    """The compact engine on a compiled model (built from the reference engine's sparse copy,
    `qwengpu.compiler.fast.FastModel`, which reads the checkpoint)."""

    def __init__(self, fast, probes: dict | None = None, lattices: dict | None = None, lm_table: bool = True):
        """`fast`: a FastModel; `probes`: {sublayer: 0/1-coded residual features} whose distance
        from their code the run measures; `lattices`: `margins.gate_lattices` (form noise);
        `lm_table`: run the LM head by codes where its columns allow (`_code_table`; the same
        logits bit for bit, faster), else by segments."""
        self.config = fast.config
        self.width = fast.width
        self.kinds = [lay.kind for lay in fast.layers]
        nL = len(fast.layers)
        gdn_layers = [L for L, lay in enumerate(fast.layers) if lay.gdn is not None]
        self.gdn_layers = tuple(gdn_layers)
        g0 = fast.layers[gdn_layers[0]].gdn if gdn_layers else None
        hk, hv, dk, dv = (g0.hk, g0.hv, g0.dk, g0.dv) if g0 else (1, 1, 1, 1)
        kernel = g0.conv.shape[1] if g0 else 4
        self.hk, self.hv, self.dk, self.dv, self.kernel = hk, hv, dk, dv, kernel
        inter = max((lay.gate.shape[0] for lay in fast.layers), default=1)
        vocab = fast.lm_head.shape[0]
        P = _Packer()
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
        in_norm = np.zeros((nL, self.width), np.float32)
        post_norm = np.zeros((nL, self.width), np.float32)
        for L, lay in enumerate(fast.layers):
            in_norm[L] = ONE + lay.in_norm.numpy().astype(np.float32)
            post_norm[L] = ONE + lay.post_norm.numpy().astype(np.float32)
            if lay.gdn is not None:
                g = lay.gdn
                gi = gdn_layers.index(L)
                gdn_of[L] = gi
                parts = []
                for m, n in ((g.qkv, C), (g.z, vd), (g.b, hv), (g.a, hv)):
                    r, c, v = _triples(m)
                    parts.append((r, c, v, n))
                r, c, v = _stack(parts)
                mix[L] = P.add(r, c, v)
                chan.extend(np.unique(_triples(g.qkv)[0]).tolist())
                lchan.append(len(chan))
                cw = g.conv.numpy().astype(np.float32)
                conv[gi] = cw
                plain[gi] = np.all(cw[:, :-1] == 0, axis=1).astype(np.int8)
                dscale[gi] = np.exp(g.a_log.numpy().astype(np.float32))
                dt_bias[gi] = g.dt_bias.numpy().astype(np.float32)
                gnorm[gi] = g.norm_w.numpy().astype(np.float32)
                outm[L] = P.add(*_triples(g.out))
            if lay.down.nnz:
                gr, gc, gv = _triples(lay.gate)
                ur, uc, uv = _triples(lay.up)
                I = lay.gate.shape[0]
                gu[L] = P.add(*_stack([(gr, gc, gv, inter), (ur, uc, uv, I)]))
                dr, dc, dv_ = _triples(lay.down)
                down[L] = P.add(dr, dc, dv_)
        if any(gu[L] >= 0 and fast.layers[L].gate.shape[0] != inter for L in range(nL)):
            raise ValueError("layers of different MLP widths")
        # the fused gate/up rows: gate at [0, inter), up at [inter, 2 inter)
        lm = P.add(*_triples(fast.lm_head))
        packed = P.arrays()
        lm_codes, lm_vals = _code_table(*_triples(fast.lm_head), vocab) if lm_table else \
            (np.zeros((0, 0), np.uint8), np.zeros((0, 0), np.float32))
        order = np.argsort(fast.embed_rows.numpy(), kind="stable")
        erows = fast.embed_rows.numpy()[order]
        estart = np.searchsorted(erows, np.arange(vocab + 1)).astype(np.int64)
        probes = probes or {}
        pstart, pfeat = [0], []
        for sub in range(2 * nL):
            pfeat.extend(probes.get(sub, []))
            pstart.append(len(pfeat))
        fstart, fidx, foff, fper = [0], [], [], []
        self.noise_names = {}
        for L in range(nL):
            d = (lattices or {}).get(L)
            if d is not None:
                for j, (i, off, per, node) in enumerate(zip(d["index"], d["offset"], d["period"], d["node"])):
                    fidx.append(i)
                    foff.append(off)
                    fper.append(per)
                    self.noise_names[(L, i)] = d["names"][node]
            fstart.append(len(fidx))
        self.W = Weights(
            *packed,
            estart, fast.embed_cols.numpy()[order].astype(np.int32), fast.embed_vals.numpy()[order].astype(np.float32),
            in_norm, post_norm, mix, outm, gdn_of, gu, down,
            conv, plain, np.array(lchan, np.int64), np.array(chan, np.int64), dscale, dt_bias, gnorm,
            ONE + fast.final_norm.numpy().astype(np.float32), np.array([lm], np.int64), lm_codes, lm_vals,
            np.array([self.width, inter, vocab, hk, hv, dk, dv, nL, G, kernel], np.int64),
            np.array([fast.eps], np.float32),
            np.array(pstart, np.int64), np.array(pfeat, np.int64),
            np.array(fstart, np.int64), np.array(fidx, np.int64), np.array(foff, np.float64),
            1.0 / np.array(fper, np.float64))
        self.inter, self.vocab = inter, vocab
        self.nnz = int(packed[4].sum())           # the entries of every segment

    def add_input_row(self, cols, vals) -> int:
        """Append an embedding row (a token that is only ever input, e.g. a base model's text token
        run through a spliced model's GPU layers); returns its id."""
        cols = np.asarray(cols, np.int32)
        W = self.W
        k = len(W.estart) - 1
        self.W = W._replace(estart=np.append(W.estart, W.estart[-1] + len(cols)),
                            ecols=np.concatenate([W.ecols, cols]),
                            evals=np.concatenate([W.evals, np.asarray(vals, np.float32)]))
        return k

    # -- running --------------------------------------------------------------------------------

    def new_state(self) -> EngineState:
        G = len(self.gdn_layers)
        C = 2 * self.hk * self.dk + self.hv * self.dv
        return EngineState(np.zeros((G, self.hv, self.dk, self.dv), np.float32),
                           np.zeros((G, self.kernel - 1, C), np.float32), self.gdn_layers)

    def forward(self, token_ids, state: EngineState, hidden_hook=None, gate_hook=None, gdn_hook=None,
                block: int = BLOCK):
        """Forward passes for consecutive tokens (a prompt); returns the last token's logits (a
        torch tensor). Without hooks the tokens go through each layer `block` at a time (the
        projections and the MLP as products over the block, the conv and the delta rule token
        after token); the results are bit for bit those of `block=1`, token after token.
        `hidden_hook(sublayer, h [1, width])` sees the residual after every sublayer (2L: after
        the mixer of layer L, 2L+1: after its MLP), `gate_hook(L, g [1, inter])` every MLP's gate
        pre-activations, `gdn_hook(L, GDNInputs)` every GDN layer's normalised queries and keys,
        values, write strengths, decays and output gates, token by token."""
        import torch
        tokens = np.asarray(list(token_ids), dtype=np.int64)
        if tokens.size and (tokens.min() < 0 or tokens.max() >= len(self.W.estart) - 1):
            raise ValueError(f"token id outside the vocabulary (0..{len(self.W.estart) - 2})")
        logits = np.zeros(self.vocab, np.float32)
        h = np.zeros(self.width, np.float32)
        margins = np.array([state.residual_worst, state.noise_worst, *state.noise_at], np.float64)
        hooks = (hidden_hook, gate_hook, gdn_hook)
        if not any(hooks) and block > 1 and len(tokens) > 1:
            _prefill(self.W, tokens, h, state.recurrent, state.conv, state.length, margins, logits,
                     min(block, len(tokens)))
        elif not any(hooks):
            empty = np.zeros((0, 0, 0), np.float32)
            _forward(self.W, tokens, h, state.recurrent, state.conv, state.length, margins, 0, empty, empty,
                     np.zeros((0, 0, 0, 0), np.float32), logits)
        else:
            flags = (CAP_HIDDEN if hidden_hook else 0) | (CAP_GATES if gate_hook else 0) | (CAP_GDN if gdn_hook else 0)
            nL, G = len(self.kinds), len(self.gdn_layers)
            ch = np.zeros((1, 2 * nL, self.width) if hidden_hook else (0, 0, 0), np.float32)
            cg = np.zeros((1, nL, self.inter) if gate_hook else (0, 0, 0), np.float32)
            big = max(self.hk * self.dk, self.hv * self.dv)
            cd = np.zeros((1, G, 6, big) if gdn_hook else (0, 0, 0, 0), np.float32)
            for i, tok in enumerate(tokens):
                _forward(self.W, tokens[i:i + 1], h, state.recurrent, state.conv, state.length + i, margins, flags,
                         ch, cg, cd, logits)
                if hidden_hook:
                    for s in range(2 * nL):
                        hidden_hook(s, torch.from_numpy(ch[0, s:s + 1].copy()))
                if gate_hook:
                    for L in range(nL):
                        if self.W.down_mat[L] >= 0:
                            gate_hook(L, torch.from_numpy(cg[0, L:L + 1].copy()))
                if gdn_hook:
                    for gi, L in enumerate(self.gdn_layers):
                        gdn_hook(L, self._gdn_inputs(cd[0, gi]))
        state.length += len(tokens)
        state.residual_worst, state.noise_worst = float(margins[0]), float(margins[1])
        state.noise_at = (int(margins[2]), int(margins[3]))
        return torch.from_numpy(logits)

    def step(self, token_id: int, state: EngineState, hidden_hook=None, gate_hook=None, gdn_hook=None):
        """One forward pass for one token (the decode path); returns its logits."""
        return self.forward([token_id], state, hidden_hook, gate_hook, gdn_hook)

    def new_batch(self, size: int) -> EngineBatch:
        """States for `size` sequences in one block (`step_batch` runs them together)."""
        return EngineBatch(self, size)

    def step_batch(self, tokens, batch: EngineBatch):
        """One forward pass for each sequence of the batch whose token is not None; returns the
        logits [B, vocab] (rows of sequences that sat out are stale)."""
        import torch
        B = len(batch.states)
        ids = np.array([-1 if t is None else int(t) for t in tokens], np.int64)
        if len(ids) != B:
            raise ValueError(f"{len(ids)} tokens for a batch of {B}")
        if (ids >= len(self.W.estart) - 1).any() or (ids < -1).any():
            raise ValueError(f"token id outside the vocabulary (0..{len(self.W.estart) - 2})")
        lengths = np.array([st.length for st in batch.states], np.int64)
        margins = np.array([[st.residual_worst, st.noise_worst, *st.noise_at] for st in batch.states], np.float64)
        _step_batch(self.W, ids, batch.h, batch.recurrent, batch.conv, lengths, margins, batch.logits)
        for b, st in enumerate(batch.states):
            if ids[b] >= 0:
                st.length = int(lengths[b])
                st.residual_worst, st.noise_worst = float(margins[b, 0]), float(margins[b, 1])
                st.noise_at = (int(margins[b, 2]), int(margins[b, 3]))
        return torch.from_numpy(batch.logits)

    def _gdn_inputs(self, c) -> GDNInputs:
        kd, vd, hv = self.hk * self.dk, self.hv * self.dv, self.hv
        return GDNInputs(c[0, :kd].reshape(1, self.hk, self.dk).copy(), c[1, :kd].reshape(1, self.hk, self.dk).copy(),
                         c[2, :vd].reshape(1, hv, self.dv).copy(), c[3, :hv][None].copy(), c[4, :hv][None].copy(),
                         c[5, :vd].reshape(1, hv, self.dv).copy())

    def noise_where(self, state: EngineState) -> str | None:
        """The node of the largest form noise of the run (None before any)."""
        return self.noise_names.get(state.noise_at)


class EngineBatch:
    """The states of B sequences in one block of memory; `states[b]` is sequence b's own state (a
    view), which `SparseEngine.forward` runs alone (a prompt) and `step_batch` together."""

    def __init__(self, engine: SparseEngine, size: int):
        G = len(engine.gdn_layers)
        C = 2 * engine.hk * engine.dk + engine.hv * engine.dv
        self.recurrent = np.zeros((size, G, engine.hv, engine.dk, engine.dv), np.float32)
        self.conv = np.zeros((size, G, engine.kernel - 1, C), np.float32)
        self.h = np.zeros((size, engine.width), np.float32)
        self.logits = np.zeros((size, engine.vocab), np.float32)
        self.states = [EngineState(self.recurrent[b], self.conv[b], engine.gdn_layers) for b in range(size)]


@dataclass
class GDNInputs:
    """One GDN layer's inputs to the delta rule at one token (NumPy, leading axis: tokens)."""
    q: np.ndarray        # [T, hk, dk] l2-normalised queries (before the 1/sqrt(dk) scale)
    k: np.ndarray        # [T, hk, dk] l2-normalised keys
    v: np.ndarray        # [T, hv, dv] values (after SiLU)
    beta: np.ndarray     # [T, hv] write strengths
    decay: np.ndarray    # [T, hv] log decay (0: none)
    z: np.ndarray        # [T, hv, dv] output gate pre-activations
