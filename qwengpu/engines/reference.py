"""The compact engine's reference (`--engine compact-ref`): the stock Qwen3.5 decode path (one
token per forward pass, cached state) with sparse weights, in torch.

A compiled model is >99.8% zeros, so a sparse matrix-vector product does the work of the dense
one at a fraction of the cost. The arithmetic follows `transformers`' Qwen3.5 modules step by step
(zero-centred RMSNorm, GDN with causal conv update, l2-normed keys and queries, the gated delta
rule, gated RMSNorm, SwiGLU), in float32. Full-attention layers must be inert (zero output
projection): the compiled machine never attends, and such a layer adds exactly zero.

It is not claimed bit-identical to the dense path (sums run in a different order); what is
checked (`tests/test_engines.py`, `qwengpu bench`) is that it predicts the same tokens with the
same margins and decodes the same states, over whole launches. The compact engine
(`qwengpu.engines.compact.CompactEngine`) is built from its weights and checked against it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from qwengpu.compiler.sparse import SparseMatrix


def _sparse(w):
    return w if isinstance(w, SparseMatrix) or w.dim() != 2 else SparseMatrix(w)


@dataclass
class _GDN:
    qkv: object
    z: object
    b: object
    a: object
    out: object
    conv: torch.Tensor          # [channels, kernel]
    a_log: torch.Tensor
    dt_bias: torch.Tensor
    norm_w: torch.Tensor
    hk: int
    hv: int
    dk: int
    dv: int
    taps: bool                  # does any channel read earlier tokens?


@dataclass
class _Layer:
    kind: str
    in_norm: torch.Tensor
    post_norm: torch.Tensor
    gate: object
    up: object
    down: object
    gdn: _GDN | None = None


@dataclass
class ReferenceState:
    """The cached state of a run: per GDN layer its conv window and recurrent state."""
    conv: dict = field(default_factory=dict)       # layer -> [channels, kernel - 1]
    recurrent: dict = field(default_factory=dict)  # layer -> [hv, dk, dv]
    length: int = 0

    def get_recurrent_state(self, layer: int):
        """Same accessor as a transformers cache: [1, hv, dk, dv]."""
        return self.recurrent[layer].unsqueeze(0)


class ReferenceEngine:
    """A sparse copy of a `Qwen3_5ForCausalLM` for the decode path."""

    def __init__(self, model):
        """From a `Qwen3_5ForCausalLM`."""
        self._load(model.config, {k: v for k, v in model.state_dict().items()})

    @classmethod
    def from_state_dict(cls, config, sd: dict) -> "ReferenceEngine":
        """From a config and a state dict whose matrices may be dense or sparse CSR."""
        self = cls.__new__(cls)
        self._load(config, sd)
        return self

    def _load(self, cfg, sd: dict):
        self.config = cfg
        self.eps = cfg.rms_norm_eps
        w = lambda k: sd[k].detach().float()
        emb = _sparse(sd["model.embed_tokens.weight"])               # rows read one token at a time
        order = torch.argsort(emb.rows, stable=True)
        self.embed_rows = emb.rows[order]
        self.embed_cols, self.embed_vals = emb.cols[order], emb.vals[order]
        self.embed_start = torch.searchsorted(self.embed_rows, torch.arange(cfg.vocab_size + 1))
        self.width = cfg.hidden_size
        self.final_norm = w("model.norm.weight")
        self.lm_head = _sparse(sd["lm_head.weight"])
        self.layers: list[_Layer] = []
        for L in range(cfg.num_hidden_layers):
            kind = cfg.layer_types[L]
            p = f"model.layers.{L}."
            lay = _Layer(kind, w(p + "input_layernorm.weight"), w(p + "post_attention_layernorm.weight"),
                         _sparse(sd[p + "mlp.gate_proj.weight"]), _sparse(sd[p + "mlp.up_proj.weight"]),
                         _sparse(sd[p + "mlp.down_proj.weight"]))
            if kind == "linear_attention":
                q = p + "linear_attn."
                conv = w(q + "conv1d.weight").squeeze(1)
                ident = torch.zeros_like(conv)
                ident[:, -1] = 1
                hv = cfg.linear_num_value_heads
                lay.gdn = _GDN(_sparse(sd[q + "in_proj_qkv.weight"]), _sparse(sd[q + "in_proj_z.weight"]),
                               _sparse(sd[q + "in_proj_b.weight"]), _sparse(sd[q + "in_proj_a.weight"]),
                               _sparse(sd[q + "out_proj.weight"]), conv, w(q + "A_log"), w(q + "dt_bias"),
                               w(q + "norm.weight"), cfg.linear_num_key_heads, hv, cfg.linear_key_head_dim,
                               cfg.linear_value_head_dim, bool((conv != ident).any()))
            else:
                nz = _sparse(sd[p + "self_attn.o_proj.weight"]).nnz
                if nz:
                    raise NotImplementedError(f"layer {L} attends (non-zero output projection); the compact "
                                              "engine runs inert attention layers only")
            self.layers.append(lay)

    def add_input_row(self, cols, vals) -> int:
        """Append an embedding row (a token that is only ever input, e.g. a base model's text token
        run through a spliced model's GPU layers); returns its id."""
        cols = torch.as_tensor(cols)
        k = len(self.embed_start) - 1
        self.embed_rows = torch.cat([self.embed_rows, torch.full((len(cols),), k, dtype=self.embed_rows.dtype)])
        self.embed_cols = torch.cat([self.embed_cols, cols.to(self.embed_cols.dtype)])
        self.embed_vals = torch.cat([self.embed_vals, torch.as_tensor(vals).to(self.embed_vals.dtype)])
        self.embed_start = torch.cat([self.embed_start, self.embed_start[-1:] + len(cols)])
        return k

    def new_state(self) -> ReferenceState:
        s = ReferenceState()
        for L, lay in enumerate(self.layers):
            if lay.gdn is not None:
                g = lay.gdn
                s.conv[L] = torch.zeros(g.conv.shape[0], g.conv.shape[1] - 1)
                s.recurrent[L] = torch.zeros(g.hv, g.dk, g.dv)
        return s

    def _norm(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + w)

    def _gdn(self, g: _GDN, x, L: int, state: ReferenceState):
        """The GDN mixer on positions x [T, width] (projections batched, the recurrence in order)."""
        T = x.shape[0]
        qkv = g.qkv @ x                                                        # [T, channels]
        z = (g.z @ x).reshape(T, g.hv, g.dv)
        b = g.b @ x
        a = g.a @ x
        window = torch.cat([state.conv[L], qkv.t()], dim=1)                    # [channels, 3 + T]
        K = g.conv.shape[1]
        state.conv[L] = window[:, -(K - 1):].clone()
        if g.taps:
            mixed = sum(window[:, j:j + T] * g.conv[:, j:j + 1] for j in range(K)).t()
        else:
            mixed = qkv * g.conv[:, -1]
        mixed = torch.nn.functional.silu(mixed)
        kd = g.hk * g.dk
        q = mixed[:, :kd].reshape(T, g.hk, g.dk)
        k = mixed[:, kd:2 * kd].reshape(T, g.hk, g.dk)
        v = mixed[:, 2 * kd:].reshape(T, g.hv, g.dv)
        beta = b.sigmoid()
        decay = -g.a_log.exp() * torch.nn.functional.softplus(a + g.dt_bias)   # [T, hv]
        if g.hv != g.hk:
            q = q.repeat_interleave(g.hv // g.hk, dim=1)
            k = k.repeat_interleave(g.hv // g.hk, dim=1)
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        q = q / (g.dk ** 0.5)
        S = state.recurrent[L]
        decays = bool((decay != 0).any())
        o = torch.empty(T, g.hv, g.dv)
        for t in range(T):
            if decays:
                S = S * decay[t].exp()[:, None, None]
            kt = k[t]
            kv_mem = torch.bmm(kt.unsqueeze(1), S).squeeze(1)                   # [hv, dv]
            delta = (v[t] - kv_mem) * beta[t].unsqueeze(-1)
            S.baddbmm_(kt.unsqueeze(-1), delta.unsqueeze(1))                    # in place: no copy
            o[t] = torch.bmm(q[t].unsqueeze(1), S).squeeze(1)
        state.recurrent[L] = S
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + self.eps)
        o = g.norm_w * o * torch.nn.functional.silu(z)
        return g.out @ o.reshape(T, -1)

    @torch.no_grad()
    def forward(self, token_ids: list, state: ReferenceState, hidden_hook=None, gate_hook=None) -> torch.Tensor:
        """Forward passes for consecutive tokens (layer by layer, the recurrences in token order);
        returns the last token's logits. `hidden_hook(sublayer, h)` sees the residual [T, width]
        after every sublayer (2L: after the mixer of layer L, 2L+1: after its MLP);
        `gate_hook(L, g)` the MLP's gate pre-activations [T, intermediate] of every layer."""
        T = len(token_ids)
        h = torch.zeros(T, self.width)
        for t, tok in enumerate(token_ids):
            lo, hi = int(self.embed_start[tok]), int(self.embed_start[tok + 1])
            h[t, self.embed_cols[lo:hi]] = self.embed_vals[lo:hi]
        for L, lay in enumerate(self.layers):
            if lay.gdn is not None:
                h = h + self._gdn(lay.gdn, self._norm(h, lay.in_norm), L, state)
            if hidden_hook is not None:
                hidden_hook(2 * L, h)
            if lay.down.nnz:
                x = self._norm(h, lay.post_norm)
                g = lay.gate @ x
                if gate_hook is not None:
                    gate_hook(L, g)
                h = h + lay.down @ (torch.nn.functional.silu(g) * (lay.up @ x))
            if hidden_hook is not None:
                hidden_hook(2 * L + 1, h)
        state.length += T
        return self.lm_head @ self._norm(h[-1:], self.final_norm)[0]

    def step(self, token_id: int, state: ReferenceState, hidden_hook=None, gate_hook=None) -> torch.Tensor:
        """One forward pass for one token (the decode path); returns its logits."""
        return self.forward([token_id], state, hidden_hook, gate_hook)
