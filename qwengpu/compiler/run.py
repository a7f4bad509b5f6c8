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
            if all(evaluate_view(v, env) == val for v, val in r.conditions)]
    if len(hits) != 1:
        raise CompileError(f"output rules must select exactly one token; {len(hits)} hold: {hits}")
    return hits[0]


@dataclass
class ModelRun:
    hidden: np.ndarray            # [positions, width]: the residual before the final norm
    logits: np.ndarray            # [positions, vocab]


def run_model(compiled, tokens: list[str], mode: str = "prefill", model=None, device="cpu") -> ModelRun:
    import torch
    from transformers import DynamicCache
    model = model or compiled.model()
    ids = torch.tensor([[compiled.token_id(t) for t in tokens]], device=device)
    captured = []
    hook = model.model.norm.register_forward_pre_hook(lambda m, a: captured.append(a[0].detach()))
    try:
        with torch.no_grad():
            if mode == "prefill":
                out = model(input_ids=ids)
                logits = out.logits[0]
                hidden = captured[0][0]
            elif mode == "decode":
                cache = DynamicCache(config=model.config)
                rows, lg = [], []
                for t in range(ids.shape[1]):
                    out = model(input_ids=ids[:, t:t + 1], past_key_values=cache, use_cache=True)
                    cache = out.past_key_values
                    rows.append(captured[-1][0, -1])
                    lg.append(out.logits[0, -1])
                hidden = torch.stack(rows)
                logits = torch.stack(lg)
            else:
                raise ValueError(f"mode must be prefill or decode, not {mode!r}")
    finally:
        hook.remove()
    return ModelRun(hidden.float().cpu().numpy(), logits.float().cpu().numpy())


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
            got, m = compiled.decode(run.hidden[pos], var)
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
