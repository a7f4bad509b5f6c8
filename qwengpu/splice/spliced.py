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

from qwengpu.compiler.run import run_layers

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


def run_tokens(model, ids: list[int], start: int, mode: str = "prefill", layers: int = 0):
    """Run `ids` through the model; return (`qwengpu.compiler.run.ModelRun`) the residual before the
    final norm, the logits and the residual after every sublayer of the first `layers` decoder
    layers, from position `start` on (the compiler's harness, `run_layers`)."""
    return run_layers(model, ids, mode, layers, start)


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
