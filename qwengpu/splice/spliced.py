"""Running a spliced checkpoint: load it with stock transformers, run GPU token sequences through
it (after an optional text prefix, in the chunked prefill path or the cached one-token decode
path) and check every GPU variable against the compiler's reference evaluator.

The GPU's variables are decoded from the residual stream after the sublayer that writes them (the
compiler reuses the features of dead variables), at their spliced dims (`sharing.feature_map`:
most share the base's dims); the GPU layers are the spliced model's first layers, so sublayer
numbers agree.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .sharing import feature_map
from .splice import read_meta


def load_spliced(model_dir, dtype=None, multimodal: bool = False):
    """(model, meta): the spliced checkpoint through AutoModelForCausalLM (or, with `multimodal`,
    AutoModelForImageTextToText), in fp32 unless `dtype` says otherwise."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    meta = read_meta(model_dir)
    cls = AutoModelForImageTextToText if multimodal else AutoModelForCausalLM
    model = cls.from_pretrained(str(model_dir), dtype=dtype or torch.float32)
    model.eval()
    return model, meta


def text_model(model):
    """The Qwen3_5TextModel inside a causal-LM or a conditional-generation model."""
    m = model.model
    return getattr(m, "language_model", m)


@dataclass
class GPURun:
    hidden: np.ndarray        # [positions, width] residual before the final norm (from `start` on)
    logits: np.ndarray        # [positions, vocab]
    sublayers: list           # residual after every sublayer of the first layers: [2L] after mixer L,
                              # [2L+1] after layer L (from `start` on)

    def at(self, sublayer: int) -> np.ndarray:
        return self.hidden if sublayer >= len(self.sublayers) else self.sublayers[sublayer]


def run_tokens(model, ids: list[int], start: int, mode: str = "prefill", layers: int = 0) -> GPURun:
    """Run `ids` through the model; return the residual before the final norm, the logits and the
    residual after every sublayer of the first `layers` decoder layers, from position `start` on."""
    import torch
    from transformers import DynamicCache
    tm = text_model(model)
    captured: dict = {}
    hooks = [tm.norm.register_forward_pre_hook(
        lambda m, a: captured.setdefault("final", []).append(a[0].detach()))]
    for L, layer in enumerate(tm.layers[:layers]):
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(
            lambda m, a, L=L: captured.setdefault(2 * L, []).append(a[0].detach())))
        hooks.append(layer.register_forward_hook(
            lambda m, a, out, L=L: captured.setdefault(2 * L + 1, []).append(
                (out[0] if isinstance(out, tuple) else out).detach())))
    x = torch.tensor([ids])
    try:
        with torch.no_grad():
            if mode == "prefill":
                logits = model(input_ids=x).logits[0]
                cat = {k: v[0][0] for k, v in captured.items()}
            elif mode == "decode":
                cache = DynamicCache(config=model.config)
                lg = []
                for t in range(x.shape[1]):
                    out = model(input_ids=x[:, t:t + 1], cache=cache, use_cache=True)
                    cache = out.cache
                    lg.append(out.logits[0, -1])
                logits = torch.stack(lg)
                cat = {k: torch.cat([r[0] for r in v]) for k, v in captured.items()}
            else:
                raise ValueError(f"mode must be prefill or decode, not {mode!r}")
    finally:
        for h in hooks:
            h.remove()
    subs = [cat[k][start:].float().numpy() for k in range(2 * layers)]
    return GPURun(cat["final"][start:].float().numpy(), logits[start:].float().numpy(), subs)


@dataclass
class GPUCheck:
    mismatches: list          # (position, variable, expected, got)
    min_code_margin: float
    min_logit_gap: float | None
    checked: int

    @property
    def exact(self) -> bool:
        return not self.mismatches


def check_program(model, compiled, tokens: list[str], token_offset: int, prefix_ids: list[int] | None = None,
                  mode: str = "prefill") -> GPUCheck:
    """Run the program's token sequence (texts) through a spliced model, after `prefix_ids` (text),
    and compare every computed variable and every emitted token with the reference evaluator."""
    from qwengpu.compiler.core import EmbedNode
    from qwengpu.compiler.run import evaluate
    prog = compiled.program
    ref = evaluate(prog, tokens)
    prefix = list(prefix_ids or [])
    ids = prefix + [token_offset + compiled.token_id(t) for t in tokens]
    run = run_tokens(model, ids, len(prefix), mode, layers=compiled.schedule.layers)
    fm = feature_map(compiled)
    born = getattr(compiled.layout, "born", {}) or {}
    names = [v.name for v in prog.residual_vars if not isinstance(v.producer, EmbedNode)]
    mism, margin, checked = [], 1.0, 0
    for pos, env in enumerate(ref):
        for name in names:
            var = prog.vars[name]
            got, m = compiled.decode(fm.compiled_vector(run.at(born.get(name, 10 ** 9))[pos]), var)
            margin = min(margin, m)
            checked += 1
            if got != env[name]:
                mism.append((pos, name, env[name], got))
    gap = None
    if prog.rules:
        gap = float("inf")
        for pos, env in enumerate(ref):
            want = token_offset + compiled.token_id(env["@emit"])
            row = run.logits[pos]
            top = int(np.argmax(row))
            if top != want:
                mism.append((pos, "@emit", env["@emit"], top))
            gap = min(gap, float(row[want] - np.delete(row, want).max()))
    return GPUCheck(mism, margin, gap, checked)


def gpu_ids(meta: dict, texts: list[str]) -> list[int]:
    """Token ids of GPU tokens (program texts) in a spliced checkpoint."""
    index = {t: i for i, t in enumerate(meta["gpu"]["tokens"])}
    off = meta["gpu"]["token_offset"]
    return [off + index[t] for t in texts]
