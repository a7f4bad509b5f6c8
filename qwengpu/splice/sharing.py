"""Where each GPU feature lives in the spliced residual: in one of the base's dims (*shared*) or in
a dim of its own after the anchor (*dedicated*).

Text and GPU tokens never hold values at the same position, so most GPU variables can live in
the base's dims 0..H-1: on a GPU token those dims hold the GPU's values (the base layers are
switched off there by the anchor), on a text token the base's features (the GPU layers are
switched off there by the indicator). A feature must be dedicated (exactly 0 on text) when a
text token's value in it would reach a GPU token or a logit without passing a switched sublayer:

- `lm_head`: the features the GPU's unembedding reads (the GPU tokens' logits on text);
- `conv`: the features read by a GDN conv channel with a back tap (a launch right after text
  would convolve the text tokens' channel values);
- `key`: the features a GPU attention layer's keys read (a GPU query scores text keys; the
  splice makes text keys score -1e6 with the indicator, which needs them 0 elsewhere).

Everything else is shared, in compiled order, until the base's H dims are used up; the rest is
dedicated too (`overflow`). The anchor keeps its own dim (H + INDICATOR_DIMS).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .geometry import INDICATOR_DIMS

_GDN_QKV = re.compile(r"^model\.layers\.(\d+)\.linear_attn\.in_proj_qkv\.weight$")
_ATTN_K = re.compile(r"^model\.layers\.(\d+)\.self_attn\.k_proj\.weight$")

#: compiled tensors whose columns are residual features (readers) ...
READERS = ("linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight",
           "linear_attn.in_proj_a.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
           "self_attn.v_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight")
#: ... whose rows are (writers) ...
WRITERS = ("linear_attn.out_proj.weight", "self_attn.o_proj.weight", "mlp.down_proj.weight")
#: ... and the RMSNorm weights over the residual
NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight")


def _nonzero_cols(v, rows=None) -> set:
    """Columns with a non-zero entry (in `rows` only, when given) of a dense tensor or a
    qwengpu.compiler.sparse.SparseMatrix."""
    import torch
    if isinstance(v, torch.Tensor):
        t = v if rows is None else v[list(rows)]
        return set(torch.nonzero(t.reshape(t.shape[0], -1) != 0, as_tuple=True)[1].tolist())
    cols = v.cols
    if rows is not None:
        mask = torch.zeros(v.shape[0], dtype=torch.bool)
        mask[list(rows)] = True
        cols = cols[mask[v.rows]]
    return set(cols.tolist())


@dataclass
class FeatureMap:
    """Compiled residual dim -> spliced residual dim, for a GPU compiled with `target_for_base`
    (its anchor at H + INDICATOR_DIMS, its variables after it)."""
    hidden: int
    compiled_width: int
    width: int                               # the spliced residual's width
    to_spliced: np.ndarray                   # [compiled_width] int64, -1 where the GPU has no feature
    dedicated: dict = field(default_factory=dict)     # compiled dim -> why ("lm_head", "conv", "key", "overflow")

    @property
    def anchor(self) -> int:
        return self.hidden + INDICATOR_DIMS

    @property
    def used(self) -> np.ndarray:
        """The compiled dims the GPU uses (the anchor and its variables' features)."""
        return np.nonzero(self.to_spliced >= 0)[0]

    @property
    def shared(self) -> int:
        return int(np.sum((self.to_spliced >= 0) & (self.to_spliced < self.hidden)))

    def counts(self) -> dict:
        why: dict = {}
        for r in self.dedicated.values():
            why[r] = why.get(r, 0) + 1
        return {"shared": self.shared, "dedicated": len(self.dedicated), "dedicated_because": why,
                "compiled_width": self.compiled_width, "width": self.width}

    def to_json(self) -> dict:
        used = self.used
        return {"compiled_dims": used.tolist(), "spliced_dims": self.to_spliced[used].tolist(), **self.counts()}

    # -- moving tensors into the spliced layout ----------------------------------------------------

    def columns(self, t):
        """A dense [rows, compiled_width] tensor as [rows, width] (features moved to their dims)."""
        import torch
        used = torch.from_numpy(self.used)
        out = torch.zeros((t.shape[0], self.width), dtype=t.dtype)
        out[:, torch.from_numpy(self.to_spliced[self.used])] = t[:, used]
        self._check_rest(t, used, 1)
        return out

    def rows(self, t):
        """A dense [compiled_width, cols] tensor as [width, cols]."""
        return self.columns(t.T).T.contiguous()

    def vector(self, t):
        """A residual-length vector in compiled dims as one in spliced dims (0 elsewhere)."""
        return self.columns(t.reshape(1, -1))[0]

    def compiled_vector(self, x):
        """A spliced residual vector (numpy) back in compiled dims (0 where the GPU has none)."""
        out = np.zeros(self.compiled_width, dtype=np.asarray(x).dtype)
        out[self.used] = np.asarray(x)[self.to_spliced[self.used]]
        return out

    def _check_rest(self, t, used, dim):
        import torch
        rest = torch.ones(t.shape[dim], dtype=torch.bool)
        rest[used] = False
        if bool((t[:, rest] != 0).any()):
            raise ValueError("a compiled tensor has weights at residual dims the GPU's layout does not use")


def feature_map(compiled, hidden: int | None = None) -> FeatureMap:
    """The spliced layout of `compiled` (compiled with `target_for_base(base)`, so its anchor is at
    `hidden + INDICATOR_DIMS`): which features share the base's dims, which are dedicated and why."""
    H = compiled.target.offset - INDICATOR_DIMS if hidden is None else hidden
    anchor = H + INDICATOR_DIMS
    if compiled.target.offset != anchor:
        raise ValueError(f"the GPU's anchor is at {compiled.target.offset}, not at {anchor} (compile it with "
                         "target_for_base(base))")
    Wc = compiled.layout.width
    used = sorted(set(compiled.layout.dims.values()))
    if used[0] != anchor:
        raise ValueError("the GPU has features before its anchor")
    sd = compiled.state_dict
    dedicated: dict = {}

    def need(cols, why):
        for c in sorted(cols):
            if c != anchor and c not in dedicated:
                dedicated[c] = why

    need(_nonzero_cols(sd["lm_head.weight"]), "lm_head")
    for key, v in sd.items():
        m = _GDN_QKV.match(key)
        if m:
            conv = sd[f"model.layers.{m.group(1)}.linear_attn.conv1d.weight"]
            back = np.nonzero((conv[:, 0, :-1] != 0).any(dim=1).numpy())[0]     # the current tap is the last
            if len(back):
                need(_nonzero_cols(v, back), "conv")
        elif _ATTN_K.match(key):
            need(_nonzero_cols(v), "key")
    to = np.full(Wc, -1, dtype=np.int64)
    shared = [d for d in used[1:] if d not in dedicated]
    for d in shared[H:]:
        dedicated[d] = "overflow"
    for i, d in enumerate(shared[:H]):
        to[d] = i
    to[anchor] = anchor
    for i, d in enumerate(sorted(dedicated)):
        to[d] = anchor + 1 + i
    return FeatureMap(H, Wc, anchor + 1 + len(dedicated), to, dedicated)
