"""Run a compiled program: the reference evaluator, and the model through the stock HF forward.

`evaluate(prog, tokens)` gives every variable's value at every position (exact Python).
`run_model(compiled, tokens, mode)` runs the model in the chunked prefill path or the cached
one-token decode path and decodes every variable from the final residual stream, with margins.
`generate(compiled, prompt, n)` runs closed-loop generation with `model.generate()`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core import CompileError, EmbedNode
from .program import Program, evaluate_view


def evaluate(prog: Program, tokens: list[str], order=None) -> list[dict]:
    """Reference values of every residual variable per position, plus the emitted token."""
    from .build import _topo
    order = order or _topo(prog)
    state: dict = {}
    out = []
    for text in tokens:
        env = {"@token": prog.token_by_text[text]}
        for node in order:
            node.evaluate(env, state)
        env["@emit"] = emitted(prog, env)
        out.append(env)
    return out


def emitted(prog: Program, env: dict) -> str | None:
    """The token whose output rule holds (None when the program has no rules)."""
    if not prog.rules:
        return None
    hits = [r.token.text for r in prog.rules
            if all(evaluate_view(c[0], env) == c[1] for c in r.conditions)]
    if len(hits) != 1:
        raise CompileError(f"output rules must select exactly one token; {len(hits)} hold: {hits}")
    return hits[0]


@dataclass
class ModelRun:
    hidden: np.ndarray            # [positions, width]: the residual before the final norm
    logits: np.ndarray            # [positions, vocab]
    sublayers: list               # residual after every sublayer: [2L] after mixer L, [2L+1] after layer L

    def at(self, sublayer: int) -> np.ndarray:
        return self.hidden if sublayer >= len(self.sublayers) else self.sublayers[sublayer]


def _cache_kwarg(model) -> str:
    import inspect
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def run_model(compiled, tokens: list[str], mode: str = "prefill", model=None, device="cpu") -> ModelRun:
    """Run the model on a token sequence (chunked prefill, or one token at a time through the
    cache) and capture the residual stream after every sublayer."""
    import torch
    from transformers import DynamicCache
    model = model or compiled.model()
    ids = torch.tensor([[compiled.token_id(t) for t in tokens]], device=device)
    layers = model.model.layers
    nsub = 2 * len(layers)
    captured: dict = {}

    def grab(k):
        def f(*args):
            x = args[1][0] if len(args) == 2 else args[2]
            captured.setdefault(k, []).append(x.detach())
        return f

    hooks = [model.model.norm.register_forward_pre_hook(lambda m, a: captured.setdefault("final", []).append(a[0].detach()))]
    for L, layer in enumerate(layers):
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(
            lambda m, a, L=L: captured.setdefault(2 * L, []).append(a[0].detach())))
        hooks.append(layer.register_forward_hook(
            lambda m, a, out, L=L: captured.setdefault(2 * L + 1, []).append(
                (out[0] if isinstance(out, tuple) else out).detach())))
    try:
        with torch.no_grad():
            if mode == "prefill":
                out = model(input_ids=ids)
                logits = out.logits[0]
                cat = {k: v[0][0] for k, v in captured.items()}
            elif mode == "decode":
                cache = DynamicCache(config=model.config)
                kw = _cache_kwarg(model)
                lg = []
                for t in range(ids.shape[1]):
                    out = model(input_ids=ids[:, t:t + 1], use_cache=True, **{kw: cache})
                    lg.append(out.logits[0, -1])
                logits = torch.stack(lg)
                cat = {k: torch.cat([x[0] for x in v]) for k, v in captured.items()}
            else:
                raise ValueError(f"mode must be prefill or decode, not {mode!r}")
    finally:
        for h in hooks:
            h.remove()
    subs = [cat[k].float().cpu().numpy() for k in range(nsub)]
    return ModelRun(cat["final"].float().cpu().numpy(), logits.float().cpu().numpy(), subs)


@dataclass
class Comparison:
    mismatches: list             # (position, variable, expected, got)
    min_code_margin: float
    min_logit_gap: float | None
    checked: int

    @property
    def exact(self) -> bool:
        return not self.mismatches


def compare(compiled, tokens: list[str], mode: str = "prefill", model=None, variables=None) -> Comparison:
    """Model vs reference evaluator on every residual variable at every position."""
    prog = compiled.program
    ref = evaluate(prog, tokens)
    run = run_model(compiled, tokens, mode, model)
    names = variables or [v.name for v in prog.residual_vars if not isinstance(v.producer, EmbedNode)]
    mism, margin, checked = [], 1.0, 0
    for pos, env in enumerate(ref):
        for name in names:
            var = prog.vars[name]
            got, m = compiled.decode(run.at(compiled.layout.born.get(name, 10 ** 9))[pos], var)
            margin = min(margin, m)
            checked += 1
            if got != env[name]:
                mism.append((pos, name, env[name], got))
    gap = None
    if prog.rules:
        gap = float("inf")
        for pos, env in enumerate(ref):
            want = compiled.token_id(env["@emit"])
            row = run.logits[pos]
            top = int(np.argmax(row))
            if top != want:
                mism.append((pos, "@emit", env["@emit"], prog.tokens[top].text))
            others = np.delete(row, want)
            gap = min(gap, float(row[want] - others.max()))
    return Comparison(mism, margin, gap, checked)
