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
fp32 rounding differences, and the decisions have margins far above them. `tests/test_engines.py`
checks it against the stock forward (prefill and decode) and against the reference engine
(`qwengpu.engines.reference`, `--engine compact-ref`) token by token, with decoded states.

Products whose input is tiny (a subnormal SiLU tail) are computed by hand, bit for bit the float32
product, without the CPU's ~150-cycle subnormal assist (`tiny_product`).

The engine keeps no Python per layer: `forward` runs a whole chunk of tokens in one compiled call,
and measures the run's margins (the residual code margin of probed 0/1 features, the form noise of
every MLP gate against its lattice) inside it. Hooks (`hidden_hook`, `gate_hook`, `gdn_hook`) are
served from per-token captures when given.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import kernels
from .kernels import BLOCK, CAP_GATES, CAP_GDN, CAP_HIDDEN, CAP_TAPS, TAP_FIELDS
from .packing import pack


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


class CompactEngine:
    """The compact engine on a compiled model (built from its reference engine's sparse copy of the
    weights, `qwengpu.engines.reference.ReferenceEngine`, which reads the checkpoint)."""

    def __init__(self, reference, probes: dict | None = None, lattices: dict | None = None, lm_table: bool = True):
        """`reference`: a ReferenceEngine; `probes`: {sublayer: 0/1-coded residual features} whose
        distance from their code the run measures; `lattices`: `margins.gate_lattices` (form noise);
        `lm_table`: run the LM head by codes where its columns allow (`packing.code_table`; the same
        logits bit for bit, faster), else by segments."""
        p = pack(reference, probes, lattices, lm_table)
        self.W, self.config, self.width, self.kinds = p.weights, reference.config, reference.width, p.kinds
        self.gdn_layers = p.gdn_layers
        self.hk, self.hv, self.dk, self.dv, self.kernel = p.hk, p.hv, p.dk, p.dv, p.kernel
        self.inter, self.vocab, self.noise_names = p.inter, p.vocab, p.noise_names
        self.nnz = int(self.W.slen.sum())           # the entries of every segment

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
        tokens, logits, h, margins = self._begin(token_ids, state)
        hooks = (hidden_hook, gate_hook, gdn_hook)
        if not any(hooks) and block > 1 and len(tokens) > 1:
            kernels.prefill_blocks(self.W, tokens, h, state.recurrent, state.conv, state.length, margins, logits,
                     min(block, len(tokens)), 0, np.zeros((0, 0, 0, 0), np.float32))
        elif not any(hooks):
            empty = np.zeros((0, 0, 0), np.float32)
            kernels.forward_tokens(self.W, tokens, h, state.recurrent, state.conv, state.length, margins, 0, empty, empty,
                     np.zeros((0, 0, 0, 0), np.float32), logits)
        else:
            flags = (CAP_HIDDEN if hidden_hook else 0) | (CAP_GATES if gate_hook else 0) | (CAP_GDN if gdn_hook else 0)
            nL, G = len(self.kinds), len(self.gdn_layers)
            ch = np.zeros((1, 2 * nL, self.width) if hidden_hook else (0, 0, 0), np.float32)
            cg = np.zeros((1, nL, self.inter) if gate_hook else (0, 0, 0), np.float32)
            big = max(self.hk * self.dk, self.hv * self.dv)
            cd = np.zeros((1, G, 6, big) if gdn_hook else (0, 0, 0, 0), np.float32)
            for i, tok in enumerate(tokens):
                kernels.forward_tokens(self.W, tokens[i:i + 1], h, state.recurrent, state.conv, state.length + i, margins, flags,
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
        self._end(state, len(tokens), margins)
        return torch.from_numpy(logits)

    def forward_captured(self, token_ids, state: EngineState, on_gdn, chunk: int = BLOCK, buffer=None,
                         taps: bool = False):
        """`forward` that hands every GDN layer's inputs to `on_gdn(cap)` (the lab's taps), `chunk`
        tokens at a time: `cap` [n, G, 6, max(hk dk, hv dv)] holds per token and GDN layer the rows
        `gdn_hook` gets as `GDNInputs` (l2-normed q, l2-normed k, v, beta, decay, z; a buffer reused
        by the next chunk). One compiled call per chunk, a prompt in blocks as `forward` runs it
        (bit for bit its results, and those of a hooked run); no Python per token or layer.
        `taps`: instead of those rows, what the lab's taps reduce them to, computed in the loop
        (`cap` [n, G, TAP_FIELDS, hv], `kernels.CAP_TAPS`: per key head its query's and key's top
        entry and sum of squares and its output gate, per value head beta, decay, |v|^2 and the
        state row its update changed; numpy's reductions of the same rows, bit for bit).
        `buffer`: an array of at least `chunk` such rows to capture into (a caller's, kept between
        calls: a fresh one costs page faults on every pass). Returns the last logits."""
        import torch
        tokens, logits, h, margins = self._begin(token_ids, state)
        if taps:
            shape, flags = (len(self.gdn_layers), TAP_FIELDS, self.hv), CAP_TAPS
        else:
            shape, flags = (len(self.gdn_layers), 6, max(self.hk * self.dk, self.hv * self.dv)), CAP_GDN
        if buffer is not None and (buffer.shape[1:] != shape or len(buffer) < min(chunk, len(tokens))):
            raise ValueError(f"a capture buffer of {buffer.shape} for chunks of {chunk} x {shape}")
        cap = buffer if buffer is not None else np.zeros((min(chunk, len(tokens)), *shape), np.float32)
        none3 = np.zeros((0, 0, 0), np.float32)
        for t0 in range(0, len(tokens), chunk):
            part = tokens[t0:t0 + chunk]
            if len(part) > 1:
                kernels.prefill_blocks(self.W, part, h, state.recurrent, state.conv, state.length + t0, margins, logits,
                                       min(BLOCK, len(part)), flags, cap)
            else:
                kernels.forward_tokens(self.W, part, h, state.recurrent, state.conv, state.length + t0, margins,
                                       flags, none3, none3, cap, logits)
            on_gdn(cap[:len(part)])
        self._end(state, len(tokens), margins)
        return torch.from_numpy(logits)

    def _begin(self, token_ids, state: EngineState):
        """A forward's tokens (checked against the vocabulary), its logits and residual buffers, and
        the state's margins as the compiled loop updates them."""
        tokens = np.asarray(list(token_ids), dtype=np.int64)
        if tokens.size and (tokens.min() < 0 or tokens.max() >= len(self.W.estart) - 1):
            raise ValueError(f"token id outside the vocabulary (0..{len(self.W.estart) - 2})")
        margins = np.array([state.residual_worst, state.noise_worst, *state.noise_at], np.float64)
        return tokens, np.zeros(self.vocab, np.float32), np.zeros(self.width, np.float32), margins

    @staticmethod
    def _end(state: EngineState, n: int, margins):
        """The state after `n` tokens: its length and the margins the loop found."""
        state.length += n
        state.residual_worst, state.noise_worst = float(margins[0]), float(margins[1])
        state.noise_at = (int(margins[2]), int(margins[3]))

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
        kernels.step_batch(self.W, ids, batch.h, batch.recurrent, batch.conv, lengths, margins, batch.logits)
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
    view), which `CompactEngine.forward` runs alone (a prompt) and `step_batch` together."""

    def __init__(self, engine: CompactEngine, size: int):
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
