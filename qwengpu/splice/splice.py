"""`splice`: write a base Qwen3.5 checkpoint widened with a compiled GPU in front of its layers.

    report = splice("Qwen3.5-2B/", compiled, "out/")      # compiled for target_for_base(base)
    report = build("Qwen3.5-2B/", "out/", program)       # compile + splice

The output is an ordinary Qwen3.5 checkpoint in the base's own layout (text or multimodal): the
GPU's layers first, then the base's layers, residual width W = H + 5 + the GPU's dedicated
features (most GPU features share the base's dims: `sharing`), vocabulary `base vocab_size + GPU
tokens`, the tokenizer extended with the GPU tokens, and `qwengpu.json` describing the splice
(geometry, GPU token ids, the spliced layout for decoding). It loads with
stock transformers (`AutoModelForCausalLM`, and `AutoModelForImageTextToText` for the multimodal
layout). The arithmetic that keeps text and GPU apart is in `geometry`.

Weights stream: one base tensor at a time is read, transformed and added to the current output
part, which is written once it reaches `max_shard_bytes`; the GPU layers go first, one layer at a
time. Base tensors keep their
dtype (their values are copied, zero-padded or scaled by a power of two: exact in bf16); the
rescaled norm weights, the GPU layers and anything whose new values a narrower dtype cannot hold
exactly are stored in fp32. config.json says float32, so a plain `from_pretrained` loads the exact
fp32 model (see docs/splice.md for bf16).
"""
from __future__ import annotations

import copy
import importlib
import json
import math
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qwengpu.compiler.compiling import BIAS
from qwengpu.compiler.core import ANCHOR

from .checkpoint import BaseCheckpoint, read_checkpoint
from .geometry import (FINAL_INDICATOR_SCALE, GPU_LOGIT_ON_GPU_TIED, INDICATOR_DIMS, R_INPUT, TIED_HEAD_SCALE,
                       TIED_INDICATOR_SCALE, Geometry)
from .sharing import NORMS as _GPU_NORMS
from .sharing import READERS as _GPU_READERS
from .sharing import WRITERS as _GPU_WRITERS
from .sharing import feature_map
from .target import target_for_base

META = "qwengpu.json"

_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
_MTP_LAYER = re.compile(r"^mtp\.layers\.(\d+)\.(.+)$")

# base decoder-layer tensors, by what the splice does to them
_NORMS = {"input_layernorm.weight", "post_attention_layernorm.weight"}
_READ = {"linear_attn.in_proj_qkv.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
         "mlp.up_proj.weight"}
_READ_OFF = {"linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight",
             "mlp.gate_proj.weight"}
_WRITE = {"linear_attn.out_proj.weight", "self_attn.o_proj.weight", "mlp.down_proj.weight"}
_SAME = {"linear_attn.conv1d.weight", "linear_attn.dt_bias", "linear_attn.A_log", "linear_attn.norm.weight",
         "self_attn.q_norm.weight", "self_attn.k_norm.weight"}
_MTP_TOP = {"mtp.fc.weight", "mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight"}
_MTP_LAYER_KNOWN = _NORMS | {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                             "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                             "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}


#: score of a text key for a GPU attention query
TEXT_KEY_SCORE = -1.0e6
#: the largest |pre-activation| a switched GPU row may reach on text (fp32 overflows at 3.4e38;
#: silu(-inf) and inf * 0 would be NaN)
MAX_TEXT_PREACTIVATION = 1.0e30


#: disk space left free when writing a part (the build stops with a clear error before that)
DISK_RESERVE = 1 << 30


class SpliceError(ValueError):
    pass


@dataclass
class SpliceReport:
    out_dir: str
    base: dict
    geometry: dict
    gpu_layers: int
    base_layers: int
    width: int
    vocab_size: int
    gpu_token_offset: int
    gpu_tokens: int
    mtp: str
    shards: int
    bytes_written: int
    seconds: float
    compile_seconds: float | None = None
    notes: list = field(default_factory=list)
    tokenizer: dict | None = None
    features: dict | None = None          # FeatureMap.counts(): shared / dedicated GPU features

    def summary(self) -> str:
        lines = [f"spliced {self.base['path']} ({self.base['layout']}, hidden {self.base['hidden']}, "
                 f"{self.base_layers} layers) -> {self.out_dir}",
                 f"  {self.gpu_layers} GPU layers + {self.base_layers} base layers, width {self.width}, "
                 f"vocab {self.vocab_size} (GPU tokens {self.gpu_token_offset}..{self.vocab_size - 1})"
                 + (f"\n  GPU features: {self.features['shared']} in the base's dims, {self.features['dedicated']} "
                    f"dedicated {self.features['dedicated_because']} (compiled width {self.features['compiled_width']})"
                    if self.features else ""),
                 f"  alpha {self.geometry['alpha']:g}, indicator dims {self.geometry['indicator_dims']}, "
                 f"anchor dim {self.geometry['anchor_dim']}, MTP head: {self.mtp}",
                 f"  {self.shards} shards, {self.bytes_written / 2**20:.1f} MiB in {self.seconds:.1f} s"
                 + (f" (+ compile {self.compile_seconds:.1f} s)" if self.compile_seconds is not None else "")]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# tensor helpers


def _torch():
    import torch
    return torch


def _store(values, dtype):
    """A tensor of `values` (float64 numpy or torch) in `dtype` when that holds them exactly, else
    in fp32 (which the splice's numbers need at most)."""
    torch = _torch()
    t = values if isinstance(values, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(values))
    t64 = t.to(torch.float64)
    if dtype in (torch.float32, torch.float64):
        return t64.to(dtype)
    cand = t64.to(dtype)
    if torch.equal(cand.to(torch.float64), t64):
        return cand
    return t64.to(torch.float32)


def _round_to(x: float, dtype) -> float:
    """x rounded to `dtype` (for switch constants, whose exact value does not matter)."""
    torch = _torch()
    return float(torch.tensor(x, dtype=torch.float64).to(dtype).to(torch.float64))


def _pad_cols(t, width: int):
    torch = _torch()
    out = torch.zeros((t.shape[0], width), dtype=t.dtype)
    out[:, :t.shape[1]] = t
    return out


def _pad_rows(t, width: int, scale: float = 1.0):
    torch = _torch()
    out = torch.zeros((width,) + tuple(t.shape[1:]), dtype=t.dtype)
    out[:t.shape[0]] = t * scale if scale != 1.0 else t
    return out


# ---------------------------------------------------------------------------------------------
# the splice


def wide_dtype(rows, dt, tol: float = 0.0):
    """`dt` when it holds the GPU rows (float64) exactly (or, with `tol`, to within that relative
    error: the compiler's own fp32 rounding of values meant to be round), else fp32."""
    torch = _torch()
    if dt in (torch.float32, torch.float64):
        return dt
    cand = rows.to(dt).to(torch.float64)
    err = ((cand - rows).abs() / rows.abs().clamp_min(1e-300)).max() if rows.numel() else 0.0
    return dt if float(err) <= tol else torch.float32


class _Splicer:
    def __init__(self, ck: BaseCheckpoint, compiled, out: Path, mtp: str, token_texts: list[str]):
        self.ck = ck
        self.c = compiled
        self.H = ck.hidden
        tc = ck.hf_text_config()
        self.tc = tc
        self.check()
        self.fm = feature_map(compiled, self.H)
        self.W = self.fm.width
        self.geo = Geometry(self.H, self.W, float(tc.rms_norm_eps), gpu_width=self.fm.compiled_width)
        self.max_text_preactivation = 0.0
        self.n_gpu = compiled.schedule.layers
        self.n_base = ck.num_layers
        self.V = ck.vocab_size
        self.g = len(compiled.program.tokens)
        self.texts = token_texts
        self.P = ck.prefix
        self.notes: list[str] = []
        self.csd = compiled.state_dict        # dense tensors, or sparse (a compact-engine build): `gpu`
        self.head_dim = int(tc.head_dim)
        self.n_heads = int(tc.num_attention_heads)
        self.mtp_mode = self._mtp_plan(mtp)
        # a base that ties its embeddings stays tied when the GPU's unembedding can share rows
        # with its embedding (compiled with a tied head: `target_for_base`)
        self.bias = compiled.layout.dims.get((BIAS, 0))
        self.tied = ck.tied and self.bias is not None
        self.head_dims = sorted(int(self.fm.to_spliced[d]) for d, why in self.fm.dedicated.items() if why == "lm_head")

    # -- checks ------------------------------------------------------------------------------------

    def check(self):
        tc, c = self.tc, self.c
        want = target_for_base(self.ck)
        got = c.target
        fields = ["intermediate", "linear_key_heads", "linear_value_heads", "linear_key_dim", "linear_value_dim",
                  "attn_heads", "attn_kv_heads", "head_dim", "partial_rotary_factor", "rope_theta", "rms_norm_eps",
                  "offset"]
        bad = [f"{f}: compiled {getattr(got, f)!r}, base needs {getattr(want, f)!r}"
               for f in fields if getattr(got, f) != getattr(want, f)]
        if bad:
            raise SpliceError("the GPU was not compiled for this base (compile it with "
                              "target_for_base(base)): " + "; ".join(bad))
        cc = c.config
        if cc.intermediate_size != tc.intermediate_size:
            raise SpliceError(f"GPU MLP width {cc.intermediate_size} != base intermediate_size {tc.intermediate_size}")
        if getattr(tc, "attention_bias", False):
            raise SpliceError("the base has attention biases; the splice needs bias-free layers (as Qwen3.5 has)")
        if self.ck.layout == "multimodal":
            vc = self.ck.vision_config or {}
            ohs = vc.get("out_hidden_size", self.H)
            if ohs != self.H:
                raise SpliceError(f"vision merger writes {ohs} features, text hidden size is {self.H}")

    def _mtp_plan(self, mode: str) -> str:
        names = self.ck.mtp_names()
        if not names:
            return "absent"
        if mode == "drop":
            self.notes.append(f"MTP head dropped on request ({len(names)} mtp.* tensors; "
                              "mtp_num_hidden_layers set to 0)")
            return "dropped"
        unknown = []
        for n in names:
            m = _MTP_LAYER.match(n)
            if n in _MTP_TOP or (m and m.group(2) in _MTP_LAYER_KNOWN):
                continue
            unknown.append(n)
        if unknown:
            self.notes.append(f"MTP head dropped: tensors the splicer does not know how to widen "
                              f"({unknown[:3]}...); mtp_num_hidden_layers set to 0")
            return "dropped"
        return "widened"

    # -- per-tensor transforms -----------------------------------------------------------------------

    def base_layer(self, idx: int, rest: str, t) -> dict:
        torch = _torch()
        g, W = self.geo, self.W
        name = f"{self.P}layers.{idx + self.n_gpu}.{rest}"
        if rest in _NORMS:
            return {name: _store(g.base_norm(t.double().numpy()), torch.float32)}
        if rest in _READ:
            return {name: _pad_cols(t, W)}
        if rest in _READ_OFF:
            out = _pad_cols(t, W)
            out[:, g.anchor] = g.anchor_off_weight()       # GPU tokens: z, MLP gate -> silu = 0, beta = 0, decay = 1
            return {name: out}
        if rest == "self_attn.q_proj.weight":
            out = _pad_cols(t, W)
            hd = self.head_dim
            for h in range(self.n_heads):                  # gate half of each head: sigmoid -> 0
                out[h * 2 * hd + hd:(h + 1) * 2 * hd, g.anchor] = g.anchor_off_weight()
            return {name: out}
        if rest in _WRITE:
            return {name: _pad_rows(t, W, g.alpha)}
        if rest in _SAME:
            return {name: t}
        raise SpliceError(f"unexpected base tensor {self.P}layers.{idx}.{rest}: the splicer does not know "
                          "how to keep it consistent")

    def gpu(self, key: str):
        """A compiled tensor, dense fp32 (a compact-engine build's sparse matrices are expanded one
        at a time, so a large GPU never needs its dense weights in memory all at once)."""
        torch = _torch()
        v = self.csd[key]
        if isinstance(v, torch.Tensor):
            return v.detach().to(torch.float32)
        out = torch.zeros(v.shape, dtype=torch.float32)          # a qwengpu.compiler.sparse.SparseMatrix
        out[v.rows, v.cols] = v.vals
        return out

    def gpu_spliced(self, key: str):
        """A compiled tensor in the spliced layout: residual features moved to their dims (see
        `sharing`), GPU-layer norms rescaled to the spliced width."""
        t = self.gpu(key)
        sub = key.split(".", 3)[-1] if key.startswith("model.layers.") else key
        if sub in _GPU_READERS or key in ("model.embed_tokens.weight", "lm_head.weight"):
            return self.fm.columns(t)
        if sub in _GPU_WRITERS:
            return self.fm.rows(t)
        if sub in _GPU_NORMS:
            return ((1.0 + self.fm.vector(t.double())) * self.geo.gpu_norm_weight - 1.0).float()
        return t

    def gpu_rows(self, key: str):
        return self.gpu_spliced(key)[:self.g].double()

    def _switch_off_on_text(self, t, rows=None, always: bool = False):
        """Put an indicator column on `rows` of a GPU reader (all rows by default) that drives each
        pre-activation to <= OFF on text (`geometry.gpu_off_weight`, from the row's weights on the
        base's dims, where text has its features); rows that read none of them are 0 on text
        already and are left alone unless `always`. The indicator is 0 on GPU tokens: their
        computation is the compiled one."""
        g = self.geo
        sl = slice(None) if rows is None else rows
        reach = t[sl, :self.H].double().abs().sum(dim=1)
        torch = _torch()
        w = torch.tensor([g.gpu_off_weight(float(r)) for r in reach], dtype=torch.float64)
        on = torch.ones_like(reach, dtype=torch.bool) if always else reach > 0
        if bool(on.any()):
            col = t[sl, g.ind].clone()
            col[on] = w[on].to(t.dtype)
            t[sl, g.ind] = col
            worst = max(g.gpu_off_magnitude(float(w[i]), float(reach[i])) for i in torch.nonzero(on)[:, 0].tolist())
            self.max_text_preactivation = max(self.max_text_preactivation, worst)
            if worst > MAX_TEXT_PREACTIVATION:
                raise SpliceError(f"a GPU pre-activation could reach {worst:.3g} on text, too close to fp32's range")
        return t

    def embed(self, t) -> dict:
        """[V + g, W]: text rows (ALPHA * e, indicator, 0), GPU rows (the compiled embedding; tied:
        plus the GPU's unembedding rows, `tied_gpu_rows`). Built in the storage dtype (no float64
        copy of the matrix)."""
        torch = _torch()
        g, W, H, V = self.geo, self.W, self.H, self.V
        rows = self.gpu_rows("model.embed_tokens.weight")
        if self.tied:
            rows = rows + self.tied_gpu_rows(t.dtype)
        dt = wide_dtype(rows, t.dtype, tol=2.0 ** -20 if self.tied else 0.0)
        e = torch.zeros((V + self.g, W), dtype=dt)
        e[:V, :H] = t.to(dt) * g.alpha if dt == t.dtype else t.double().mul(g.alpha).to(dt)
        for k, c in enumerate(g.indicator):
            e[:V, g.ind + k] = c
        e[V:] = rows.to(dt)
        out = {self.P + "embed_tokens.weight": e}
        if self.ck.tied and not self.tied:
            out.update(self.lm_head(t))
        return out

    def tied_gpu_rows(self, dtype):
        """What a tied row adds to a GPU token's embedding to be its unembedding too: the compiled
        unembedding (rule weights on the head's features, the rule's constant on the bias feature,
        whose echo layer 0's MLP erases), GPU_LOGIT_ON_GPU_TIED on the bias feature (every GPU
        token's lead over text on GPU positions), all x TIED_HEAD_SCALE (the final norm undoes it),
        and the penalty on the second indicator dim (its deficit on text)."""
        g = self.geo
        u = self.gpu_unembedding()
        u[:, self.bias_dim] += GPU_LOGIT_ON_GPU_TIED
        u *= TIED_HEAD_SCALE
        u[:, g.ind + 1] = _round_to(g.tied_penalty(), dtype)
        return u

    def gpu_unembedding(self):
        """The compiled unembedding's rows in the spliced layout, rescaled for the final norm's
        GPU-dim scale (float64)."""
        return self.gpu_rows("lm_head.weight") * self.geo.gpu_unembedding_scale()

    @property
    def bias_dim(self) -> int:
        return int(self.fm.to_spliced[self.bias])

    def lm_head(self, t) -> dict:
        """[V + g, W]: base rows (the base's, reading the anchor with a large negative weight),
        GPU rows (the compiled unembedding rescaled for the final norm's GPU-dim scale, reading
        the indicator with a large negative weight)."""
        torch = _torch()
        g, W, H, V = self.geo, self.W, self.H, self.V
        u = self.gpu_unembedding()
        # the "never" logits of tokens no output rule emits (a constant whose exact value does not
        # matter) may be rounded to the storage dtype; a ruled token's anchor weight (its rule's
        # constant, large for rules with many conditions) must stay exact
        ruled = torch.zeros(self.g, dtype=torch.bool)
        ruled[[r.token.id for r in self.c.program.rules if r.token.id < self.g]] = True
        switch = ~ruled & (u[:, g.anchor].abs() * ANCHOR >= 1e3)
        u[switch, g.anchor] = torch.tensor([_round_to(float(x), t.dtype) for x in u[switch, g.anchor]],
                                           dtype=torch.float64)
        u[:, g.ind] = _round_to(g.gpu_logit_weight(), t.dtype)
        dt = wide_dtype(u, t.dtype, tol=2.0 ** -20)      # multiples of the logit scale, up to fp32 noise
        m = torch.zeros((V + self.g, W), dtype=dt)
        m[:V, :H] = t.to(dt)
        m[:V, g.anchor] = _round_to(g.base_logit_weight(), dt)
        m[V:] = u.to(dt)
        return {"lm_head.weight": m}

    def final_norm(self, t) -> dict:
        """Base dims rescaled (tied: also divided by ALPHA, the text rows' scale), the indicator
        x FINAL_INDICATOR_SCALE, the GPU's dedicated dims and anchor un-normalized. Tied: only the
        head's dims (the unembedding's features and the bias) un-normalized, every other GPU dim
        and the anchor 0 (the rows hold the embedding there), the second indicator dim
        x TIED_INDICATOR_SCALE (the GPU tokens' penalty on text)."""
        torch = _torch()
        g = self.geo
        w = np.full(self.W, g.final_gpu_scale() - 1.0)
        w[:self.H] = g.base_norm(t.double().numpy())[:self.H]
        for k in range(INDICATOR_DIMS):
            w[g.ind + k] = FINAL_INDICATOR_SCALE - 1.0
        if self.tied:
            w[:self.H] = (1.0 + w[:self.H]) / g.alpha - 1.0
            w[g.anchor:] = -1.0
            w[self.head_dims] = g.final_gpu_scale() / TIED_HEAD_SCALE - 1.0
            w[g.ind + 1] = TIED_INDICATOR_SCALE - 1.0
        return {self.P + "norm.weight": _store(w, torch.float32)}

    def visual(self, name: str, t) -> dict:
        g, W = self.geo, self.W
        if name == "model.visual.merger.linear_fc2.weight":
            return {name: _pad_rows(t, W, g.alpha)}
        if name == "model.visual.merger.linear_fc2.bias":
            torch = _torch()
            b = torch.zeros(W, dtype=torch.float64)
            b[:self.H] = t.double() * g.alpha
            for k, c in enumerate(g.indicator):
                b[g.ind + k] = c
            return {name: _store(b, t.dtype)}
        return {name: t}

    def mtp(self, name: str, t) -> dict:
        torch = _torch()
        g, W, H = self.geo, self.W, self.H
        if self.mtp_mode != "widened":
            return {}
        gamma = g.mtp_scale
        if name == "mtp.fc.weight":
            if tuple(t.shape) != (H, 2 * H):
                raise SpliceError(f"mtp.fc.weight has shape {tuple(t.shape)}, expected {(H, 2 * H)}")
            f = torch.zeros((W, 2 * W), dtype=torch.float64)
            f[:H, :H] = t[:, :H].double() * gamma
            f[:H, W:W + H] = t[:, H:].double() * gamma
            f[g.ind, W + g.ind] = 1.0          # carries the (tiny) hidden-state indicator: GPU tokens stay unlikely
            if self.tied:
                f[g.ind + 1, W + g.ind + 1] = 1.0     # the tied rows' penalty reads the second one
            return {name: _store(f, torch.float32)}
        if name in ("mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight"):
            return {name: _store(g.base_norm(t.double().numpy()), torch.float32)}
        m = _MTP_LAYER.match(name)
        rest = m.group(2)
        if rest in _NORMS:
            return {name: _store(g.base_norm(t.double().numpy()), torch.float32)}
        if rest in ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                    "mlp.gate_proj.weight", "mlp.up_proj.weight"):
            return {name: _pad_cols(t, W)}
        if rest in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            return {name: _store(_pad_rows(t.double(), W, gamma), torch.float32)}
        return {name: t}

    def transform(self, name: str, t) -> dict:
        P = self.P
        if name.endswith("rotary_emb.inv_freq"):        # a buffer some old saves include: recomputed
            return {}
        if name.startswith(P) and not name.startswith("model.visual."):
            rest = name[len(P):]
            m = _LAYER.match(rest)
            if m:
                return self.base_layer(int(m.group(1)), m.group(2), t)
            if rest == "embed_tokens.weight":
                return self.embed(t)
            if rest == "norm.weight":
                return self.final_norm(t)
            raise SpliceError(f"unexpected text tensor {name}")
        if name == "lm_head.weight":
            return self.lm_head(t)
        if name.startswith("model.visual."):
            return self.visual(name, t)
        if name.startswith("mtp."):
            return self.mtp(name, t)
        raise SpliceError(f"unexpected tensor {name}: the splicer does not know how to keep it consistent")

    def gpu_layers(self):
        """The compiled GPU's decoder layers, renamed into the stack, plus their text switches:
        yields {name: tensor} one layer at a time, in the spliced layout."""
        types = self.c.schedule.layer_types
        hd = self.head_dim
        for L in range(self.n_gpu):
            pre = f"model.layers.{L}."
            out = {}
            for key in self.csd:
                if not key.startswith(pre):
                    continue
                sub = key[len(pre):]
                t = self.gpu_spliced(key)
                if sub == "linear_attn.in_proj_b.weight":
                    self._switch_off_on_text(t, always=True)          # text: beta = 0 (no write)
                elif sub in ("linear_attn.in_proj_z.weight", "mlp.gate_proj.weight"):
                    self._switch_off_on_text(t)                       # text: silu(z), silu(gate) = -0
                elif sub == "linear_attn.in_proj_a.weight":
                    self._switch_off_on_text(t)                       # text: decay exp(g) = 1
                elif sub == "self_attn.q_proj.weight":
                    gate = [r for h in range(self.n_heads) for r in range(h * 2 * hd + hd, (h + 1) * 2 * hd)]
                    self._switch_off_on_text(t, gate, always=True)    # text: output gate sigmoid = 0
                out[f"{self.P}layers.{L}.{sub}"] = t
            if types[L] == "full_attention":
                self._exclude_text_keys(out, f"{self.P}layers.{L}.self_attn.", L)
            yield out

    def _exclude_text_keys(self, sd: dict, p: str, L: int):
        """Make text positions invisible to the GPU's attention heads (score -1e6): in each used
        key head, a free pass-through dim reads the text indicator (on text, the only nonzero key
        dim, so k_norm lifts it to sqrt(hd) * (1 + k_norm weight)); every active query head of the
        group puts a constant on that dim. GPU keys are 0 there, so GPU-GPU scores do not change.
        Without it a text key scores 0, which a compiled head may or may not beat."""
        import torch
        g = self.geo
        tc = self.tc
        hd, nh, kvh = self.head_dim, self.n_heads, int(tc.num_key_value_heads)
        q, k = sd[p + "q_proj.weight"], sd[p + "k_proj.weight"]
        qn, kn = sd[p + "q_norm.weight"].double(), sd[p + "k_norm.weight"].double()
        rot = int(hd * float((tc.rope_parameters or {}).get("partial_rotary_factor", 0.25)))
        group = nh // kvh
        an = g.gpu_anchor_normed()
        if bool((k[:, :self.H] != 0).any()):
            raise SpliceError(f"GPU attention layer {L} reads keys from the base's dims (they must be dedicated)")
        eps = float(tc.rms_norm_eps)
        for kv in range(kvh):
            heads = [h for h in range(kv * group, (kv + 1) * group)
                     if q[h * 2 * hd:h * 2 * hd + hd].abs().sum() > 0]
            if not heads:
                continue
            free = [d for d in range(hd - 1, rot - 1, -1)
                    if k[kv * hd + d].abs().sum() == 0 and all(q[h * 2 * hd + d].abs().sum() == 0 for h in heads)]
            if not free:
                self.notes.append(f"GPU attention layer {L}, key head {kv}: no free key dim to hide text positions")
                continue
            d = free[0]
            kscale = 1.0 + float(kn[d])
            if kscale <= 0:
                self.notes.append(f"GPU attention layer {L}, key head {kv}: k_norm weight 0 on the free dim")
                continue
            kappa = 1e3 / g.gpu_indicator_normed(R_INPUT)    # text key's raw value on d (>= 1e3)
            k[kv * hd + d, g.ind] = kappa
            k_text = math.sqrt(hd) * kscale                    # after k_norm (the only nonzero dim)
            for h in heads:
                # the query's raw q on GPU tokens is dominated by its largest dim (the head anchor)
                raw = q[h * 2 * hd:h * 2 * hd + hd, g.anchor].double() * an
                a_q = float(raw.abs().max())
                qscale = float(torch.sqrt(torch.tensor(a_q * a_q / hd + eps)))
                q_after = (1.0 + float(qn[d])) / qscale          # q after q_norm per unit of raw q
                want = TEXT_KEY_SCORE * math.sqrt(hd) / (k_text * q_after)   # raw q on d
                q[h * 2 * hd + d, g.anchor] = want / an
        sd[p + "q_proj.weight"], sd[p + "k_proj.weight"] = q, k

    # -- config --------------------------------------------------------------------------------------

    def config(self) -> dict:
        cfg = copy.deepcopy(self.ck.config)
        tc = cfg["text_config"] if self.ck.layout == "multimodal" else cfg
        tc["hidden_size"] = self.W
        tc["num_hidden_layers"] = self.n_gpu + self.n_base
        tc["layer_types"] = list(self.c.schedule.layer_types) + list(self.tc.layer_types)
        tc.pop("full_attention_interval", None)
        tc["vocab_size"] = self.V + self.g
        tc["tie_word_embeddings"] = self.tied
        cfg["tie_word_embeddings"] = self.tied
        if self.mtp_mode == "dropped" and "mtp_num_hidden_layers" in tc:
            tc["mtp_num_hidden_layers"] = 0
        if self.ck.layout == "multimodal":
            cfg["vision_config"]["out_hidden_size"] = self.W
        for d in (cfg, tc, cfg.get("vision_config") if self.ck.layout == "multimodal" else None):
            if not isinstance(d, dict):
                continue
            for k in ("dtype", "torch_dtype"):
                if k in d:
                    d[k] = "float32"
        cfg["dtype"] = "float32"
        return cfg


def _layout_json(compiled, fm) -> dict:
    """Every GPU variable's dims in the spliced residual."""
    prog = compiled.program
    return {v.name: [int(fm.to_spliced[compiled.layout.dims[(v.name, i)]]) for i in range(v.size)]
            for v in prog.residual_vars}


def splice(base, compiled, out_dir, *, token_texts: list[str] | None = None, mtp: str = "widen",
           sample_launch: list[str] | None = None, special_tokens: bool = False, overwrite: bool = False,
           max_shard_bytes: int = 1 << 30, progress: bool = True, dry_run: bool = False) -> SpliceReport:
    """Splice `compiled` (compiled with `target_for_base(base)`) into the checkpoint at `base`
    and write the result to `out_dir`.

    token_texts: the tokenizer strings of the GPU tokens (default: the program's token texts;
    they must not already be tokens of the base). mtp: "widen" (keep the MTP head, widened
    consistently) or "drop". sample_launch: a GPU token sequence (program texts) recorded in
    qwengpu.json for measurements (default: the program's first tokens). Output shards are cut
    at `max_shard_bytes` (a single larger tensor gets a shard of its own). `dry_run`: compute
    every output tensor but write nothing (the report's size and time figures without the disk
    space: the benchmark on geometries whose checkpoint does not fit this machine).
    """
    from tqdm.auto import tqdm

    from .tokenizer import copy_side_files, extend_tokenizer
    t0 = time.perf_counter()
    ck = base if isinstance(base, BaseCheckpoint) else read_checkpoint(base)
    prog = compiled.program
    texts = list(token_texts) if token_texts is not None else [t.text for t in prog.tokens]
    if len(texts) != len(prog.tokens):
        raise SpliceError(f"{len(texts)} token texts for {len(prog.tokens)} GPU tokens")
    if mtp not in ("widen", "drop"):
        raise SpliceError(f"mtp must be 'widen' or 'drop', not {mtp!r}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not dry_run:
        if not overwrite:
            raise SpliceError(f"{out} exists and is not empty (pass overwrite=True)")
        shutil.rmtree(out)
    if not dry_run:
        out.mkdir(parents=True, exist_ok=True)
    sp = _Splicer(ck, compiled, out, mtp, texts)
    n_tensors = len(ck.weight_map) + sum(1 for k in sp.csd if k.startswith("model.layers."))
    bar = tqdm(total=n_tensors, desc="splicing", unit="tensor", disable=not progress)
    writer = _ShardWriter(out, max_shard_bytes, dry_run)
    for layer in sp.gpu_layers():
        writer.add(layer, together=True)
        bar.update(len(layer))
    writer.flush()                      # the GPU layers' shards come first
    for shard in ck.shards:
        bar.set_postfix_str(shard)
        with ck.open(shard) as f:
            for name in ck.names_in(shard):
                writer.add(sp.transform(name, f.get_tensor(name)))
                bar.update(1)
    writer.flush()
    bar.close()
    n = len(writer.parts)
    if dry_run:
        return SpliceReport(str(out), ck.describe(), sp.geo.describe(), sp.n_gpu, sp.n_base, sp.W, sp.V + sp.g,
                            sp.V, sp.g, sp.mtp_mode, n, writer.total_bytes, time.perf_counter() - t0, None,
                            sp.notes + ["dry run: nothing written"], None, sp.fm.counts())
    writer.finish()
    (out / "config.json").write_text(json.dumps(sp.config(), indent=2, sort_keys=True))
    copy_side_files(ck.path, out)
    tok_summary = None
    if (out / "tokenizer.json").exists():
        tok_summary = extend_tokenizer(out, texts, sp.V, special=special_tokens)
    else:
        sp.notes.append("the base has no tokenizer.json: GPU token ids are "
                        f"{sp.V}..{sp.V + sp.g - 1}, without tokenizer strings")
    if sample_launch is None:
        sample_launch = getattr(compiled, "sample_launch", None) or [t.text for t in prog.tokens[:32]]
    (out / META).write_text(json.dumps(_meta(ck, sp, compiled, texts, sample_launch, tok_summary), indent=2))
    return SpliceReport(str(out), ck.describe(), sp.geo.describe(), sp.n_gpu, sp.n_base, sp.W, sp.V + sp.g,
                        sp.V, sp.g, sp.mtp_mode, n, writer.total_bytes, time.perf_counter() - t0, None, sp.notes,
                        tok_summary, sp.fm.counts())


class _ShardWriter:
    """Tensors into safetensors shards of at most `max_shard_bytes` (a larger tensor gets a shard
    of its own), written as `part-N` files and renamed `model-i-of-n` at the end, with the index.
    A shard that would fill the disk stops the splice and removes what it wrote; `dry_run` counts
    the sizes and writes nothing."""

    def __init__(self, out: Path, max_shard_bytes: int, dry_run: bool):
        self.out, self.max_shard_bytes, self.dry_run = out, max_shard_bytes, dry_run
        self.parts: list[tuple[str, list[str]]] = []
        self.total_bytes = 0
        self.pending: dict = {}

    @staticmethod
    def nbytes(ts: dict) -> int:
        return sum(v.numel() * v.element_size() for v in ts.values())

    def add(self, tensors: dict, together: bool = False):
        """Add tensors to the current shard, starting a new one when they would overflow it
        (`together`: all of them in one shard, as a GPU layer is written)."""
        if together:
            if self.pending and self.nbytes(self.pending) + self.nbytes(tensors) > self.max_shard_bytes:
                self.flush()
            self.pending.update(tensors)
            return
        for k, v in tensors.items():
            if self.pending and self.nbytes(self.pending) + v.numel() * v.element_size() > self.max_shard_bytes:
                self.flush()
            self.pending[k] = v

    def flush(self):
        from safetensors.torch import save_file
        tensors = self.pending
        if not tensors:
            return
        out = self.out
        tmp = f"part-{len(self.parts):05d}.safetensors"
        size = self.nbytes(tensors)
        if not self.dry_run:
            free = shutil.disk_usage(out).free
            if free < size + DISK_RESERVE:
                shutil.rmtree(out, ignore_errors=True)          # no half-written checkpoint left behind
                raise SpliceError(f"not enough disk space at {out}: {(self.total_bytes + size) / 2**30:.1f} GiB of the "
                                  f"spliced checkpoint so far (the GPU layers first) and {free / 2**30:.1f} GiB free; "
                                  f"nothing was kept. `splice(..., dry_run=True)` (or `qwengpu bench-splice "
                                  f"--machine`) reports the full size without writing")
            save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / tmp), metadata={"format": "pt"})
        self.total_bytes += size
        self.parts.append((tmp, list(tensors)))
        self.pending = {}

    def finish(self):
        """The shards' final names and the index."""
        n = len(self.parts)
        weight_map: dict[str, str] = {}
        for i, (tmp, names) in enumerate(self.parts):
            final = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
            os.replace(self.out / tmp, self.out / final)
            for k in names:
                weight_map[k] = final
        (self.out / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": self.total_bytes}, "weight_map": dict(sorted(weight_map.items()))}, indent=2))


def _meta(ck, sp, compiled, texts: list, sample_launch: list, tok_summary) -> dict:
    """What `qwengpu.json` records: the base, the geometry, the layers, the GPU program and its
    tokens and layout, the MTP mode, the machine (when the GPU is one), notes, the tokenizer."""
    prog = compiled.program
    return {
        "format": 1,
        "base": ck.describe(),
        "geometry": sp.geo.describe(),
        "layers": {"gpu": [0, sp.n_gpu], "base": [sp.n_gpu, sp.n_gpu + sp.n_base]},
        "gpu": {"program": prog.name, "layers": sp.n_gpu, "layer_types": list(compiled.schedule.layer_types),
                "width": sp.W, "token_offset": sp.V, "tokens": [t.text for t in prog.tokens],
                "token_strings": texts, "sample_launch": list(sample_launch), "layout": _layout_json(compiled, sp.fm),
                "compiled_width": sp.fm.compiled_width, "features": sp.fm.to_json(),
                "max_text_preactivation": sp.max_text_preactivation,
                "report": json.loads(json.dumps(compiled.report, default=str))},
        "mtp": sp.mtp_mode,
        "machine": getattr(compiled, "machine_meta", None),     # the machine's config and memories (machine_splice.py)
        "notes": sp.notes,
        "tokenizer": tok_summary,
    }


#: the GPU program `build` uses when given none: "MODULE:FUNC" with FUNC(target) -> Program or
#: Compiled (the machine sets this; $QWENGPU_PROGRAM overrides it); None = the stand-in
DEFAULT_PROGRAM: str | None = None


def import_circuit(spec: str):
    """`MODULE:FUNC` -> FUNC, a callable taking the compiler Target and returning a Program (or a
    Compiled); a Program object named by `MODULE:NAME` is wrapped."""
    mod, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"--program wants MODULE:FUNC, not {spec!r}")
    obj = getattr(importlib.import_module(mod), name)
    if callable(obj) and not hasattr(obj, "residual_vars"):
        return obj
    return lambda target: obj


def build(base, out_dir, program=None, **kw) -> SpliceReport:
    """Compile `program` for the base's geometry and splice it in.

    program: a `Program`, a `Compiled` (compiled with `target_for_base(base)`), or a callable
    `target -> Program | Compiled` (for machines that size themselves to the target); None uses
    DEFAULT_PROGRAM / $QWENGPU_PROGRAM, else the stand-in (`demo.demo_program`).
    """
    from qwengpu.compiler import compile_program

    from .demo import demo_program
    ck = read_checkpoint(base)
    target = target_for_base(ck)
    t0 = time.perf_counter()
    notes = []
    if program is None:
        spec = os.environ.get("QWENGPU_PROGRAM") or DEFAULT_PROGRAM
        if spec:
            program = import_circuit(spec)
        else:
            program = demo_program()
            notes.append("no GPU program given: spliced the stand-in (memory + adder) program")
    if callable(program) and not hasattr(program, "residual_vars") and not hasattr(program, "state_dict"):
        program = program(target)
    compiled = program if hasattr(program, "state_dict") else compile_program(program, target)
    ct = time.perf_counter() - t0
    rep = splice(ck, compiled, out_dir, **kw)
    rep.compile_seconds = ct
    rep.notes = notes + rep.notes
    return rep


def read_meta(model_dir) -> dict:
    p = Path(model_dir) / META
    if not p.exists():
        raise FileNotFoundError(f"{model_dir}: no {META} (not a spliced qwenGPU checkpoint)")
    return json.loads(p.read_text())
