"""Run a compiled program: the reference evaluator, and the model through the stock HF forward.

`evaluate(prog, tokens)` gives every variable's value at every position (exact Python).
`run_model(compiled, tokens, mode)` runs the model in the chunked prefill path or the cached
one-token decode path and decodes every variable from the final residual stream, with margins.
`compare(compiled, tokens)` checks the model against the reference on every variable;
`measure_margins(compiled, tokens)` also measures the decision margins per variable kind,
primitive and node (code margins, GDN memory states, attention score gaps).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import MARGIN, AttnNode
from .attention import measure_margins as attention_margins
from .core import CompileError, EmbedNode, evaluate_view
from .memory import VALUE_L, GDNMemory
from .placement import decode_memory
from .program import Program, topo_order


def evaluate(prog: Program, tokens: list[str], order=None) -> list[dict]:
    """Reference values of every residual variable per position, plus the emitted token."""
    return _reference(prog, tokens, order, emit=True)[0]


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
    cache: object = None          # the model's cache after the last token (GDN states)

    def at(self, sublayer: int) -> np.ndarray:
        return self.hidden if sublayer >= len(self.sublayers) else self.sublayers[sublayer]


def cache_kwarg(model) -> str:
    import inspect
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def text_model(model):
    """The Qwen3_5TextModel inside a causal LM (or inside a multimodal model's `language_model`)."""
    m = model.model
    return getattr(m, "language_model", m)


def run_layers(model, ids: list[int], mode: str = "prefill", layers: int | None = None, start: int = 0,
               device="cpu") -> ModelRun:
    """Run token ids through a stock Qwen3.5 model (chunked prefill, or one token at a time through
    the cache) and capture the residual stream after every sublayer of its first `layers` decoder
    layers (all by default), from position `start` on: the one harness of hooks the compiler's
    checks and a spliced checkpoint's (`qwengpu.splice.spliced`) read the residual with."""
    import torch
    from transformers import DynamicCache
    ids = torch.tensor([list(ids)], device=device)
    tm = text_model(model)
    layers = len(tm.layers) if layers is None else layers
    captured: dict = {}
    hooks = [tm.norm.register_forward_pre_hook(lambda m, a: captured.setdefault("final", []).append(a[0].detach()))]
    for L, layer in enumerate(tm.layers[:layers]):
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(
            lambda m, a, L=L: captured.setdefault(2 * L, []).append(a[0].detach())))
        hooks.append(layer.register_forward_hook(
            lambda m, a, out, L=L: captured.setdefault(2 * L + 1, []).append(
                (out[0] if isinstance(out, tuple) else out).detach())))
    try:
        with torch.no_grad():
            if mode == "prefill":
                out = model(input_ids=ids, use_cache=True)
                cache = getattr(out, "past_key_values", None)
                logits = out.logits[0]
                cat = {k: v[0][0] for k, v in captured.items()}
            elif mode == "decode":
                cache = DynamicCache(config=model.config)
                kw = cache_kwarg(model)
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
    subs = [cat[k][start:].float().cpu().numpy() for k in range(2 * layers)]
    return ModelRun(cat["final"][start:].float().cpu().numpy(), logits[start:].float().cpu().numpy(), subs, cache)


def run_model(compiled, tokens: list[str], mode: str = "prefill", model=None, device="cpu") -> ModelRun:
    """Run the compiled model on a token sequence (`run_layers`: every sublayer captured)."""
    return run_layers(model or compiled.model(), [compiled.token_id(t) for t in tokens], mode, device=device)


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


def _reference(prog: Program, tokens: list[str], order=None, emit: bool = False) -> tuple[list[dict], dict]:
    """Reference values per position (with the emitted token if `emit`) and the final node
    states (memories)."""
    order = order or topo_order(prog)
    state: dict = {}
    out = []
    for text in tokens:
        env = {"@token": prog.token_by_text[text]}
        for node in order:
            node.evaluate(env, state)
        if emit:
            env["@emit"] = emitted(prog, env)
        out.append(env)
    return out, state


def _worse(d: dict, key, margin: float, who: str, rel: float | None = None, **extra):
    e = d.get(key)
    if e is None:
        e = d[key] = {"min": margin, "at": who, "max_rel_dev": rel if rel is not None else 0.0, **extra}
    elif margin < e["min"]:
        e["min"], e["at"] = margin, who
    if rel is not None and rel > e["max_rel_dev"]:
        e["max_rel_dev"] = rel


def measure_margins(compiled, tokens: list[str], mode: str = "prefill", model=None) -> dict:
    """Run the stock model (prefill or decode; `model` may be a bf16 copy) and measure every
    decision margin against the reference evaluator:

    - every residual variable at every position (where it is written): its *code margin*
      0.5 - (largest distance of a feature from its ideal code) (decoding is exact iff > 0) and
      that distance relative to the feature's scale max(1, |lo|, |hi|) (`max_rel_dev`, against
      `margins.EPS`), grouped by variable kind, by the producing node's primitive and by node;
    - every GDN memory's final state (`build.decode_memory`): its words against the reference,
      the code margin of its rails (in units of the rail level: ideal 0.5);
    - every attention node's smallest score gap (`attention.measure_margins`), and its ratio to
      `attention.MARGIN`;
    - the logit gap of the output rules.

    Returns {"exact", "mismatches" (first 20: (position, variable, expected, got)), "checked",
    "min_code_margin", "max_rel_dev", "kinds", "primitives", "nodes", "memories", "attention",
    "logit_gap"}; "kinds"/"primitives"/"nodes" map to {"min", "at", "max_rel_dev"}."""
    prog = compiled.program
    ref, state = _reference(prog, tokens)
    run = run_model(compiled, tokens, mode, model)
    kinds, prims, nodes = {}, {}, {}
    mism, checked = [], 0
    worst_rel = (0.0, None)
    for v in prog.residual_vars:
        if isinstance(v.producer, EmbedNode) or v.producer is None:
            continue
        idx = [compiled.layout.dims[(v.name, i)] for i in range(v.size)]
        H = run.at(compiled.layout.born.get(v.name, 10 ** 9))[:, idx].astype(np.float64)
        ideal = np.array([v.encode(evaluate_view(v, env)) for env in ref], dtype=np.float64)
        dev = np.abs(H - ideal).max(axis=1)
        scale = max(1.0, abs(v.lo), abs(v.hi)) if v.kind == "number" else 1.0
        md = float(dev.max()) if len(dev) else 0.0
        margin, rel = 0.5 - md, md / scale
        checked += len(dev)
        for pos in np.nonzero(~(dev < 0.5))[0][:max(0, 20 - len(mism))]:
            mism.append((int(pos), v.name, evaluate_view(v, ref[pos]), v.decode(H[pos])[0]))
        node = v.producer
        prim = getattr(node, "primitive", None) or ("circuit" if node.kind == "mlp" else node.kind)
        _worse(kinds, v.kind, margin, v.name, rel)
        _worse(prims, prim, margin, node.name, rel)
        _worse(nodes, node.name, margin, v.name, rel, primitive=prim)
        if rel > worst_rel[0]:
            worst_rel = (rel, v.name)
    memories = {}
    for mem in prog.memories:
        if not isinstance(mem, GDNMemory) or run.cache is None:
            continue
        pl = compiled.placement(mem)
        words, m = decode_memory(lambda L: run.cache.get_recurrent_state(L)[0].detach().float().cpu().numpy(), pl)
        want = {s: w for s, w in state.get(mem.name, {}).items()}
        ok = all(words.get(s, 0) == w for s, w in want.items()) and set(words) <= set(want) | set(mem.init)
        if not ok:
            bad = sorted(s for s in set(words) | set(want) if words.get(s, 0) != want.get(s, 0))
            mism.append((len(tokens) - 1, f"memory {mem.name}", {s: want.get(s) for s in bad[:3]},
                         {s: words.get(s) for s in bad[:3]}))
        margin = m / VALUE_L
        memories[mem.name] = {"min": margin, "max_rel_dev": 0.5 - margin, "exact": ok}
        _worse(prims, "memory state", margin, mem.name, 0.5 - margin)
    attention = {}
    if any(isinstance(n, AttnNode) for n in prog.nodes):
        for name, gap in attention_margins(compiled, tokens, mode, model).items():
            attention[name] = {"gap": gap, "ratio": gap / MARGIN}
    gap = None
    if prog.rules:
        gap = float("inf")
        for pos, env in enumerate(ref):
            want = compiled.token_id(emitted(prog, env))
            row = run.logits[pos]
            top = int(np.argmax(row))
            if top != want:
                mism.append((pos, "@emit", prog.tokens[want].text, prog.tokens[top].text))
            gap = min(gap, float(row[want] - np.delete(row, want).max()))
    allm = [e["min"] for e in kinds.values()] + [e["min"] for e in memories.values()]
    return {"exact": not mism, "mismatches": mism[:20], "checked": checked,
            "min_code_margin": min(allm, default=0.5), "max_rel_dev": worst_rel[0],
            "max_rel_dev_at": worst_rel[1], "kinds": kinds, "primitives": prims, "nodes": nodes,
            "memories": memories, "attention": attention, "logit_gap": gap}
