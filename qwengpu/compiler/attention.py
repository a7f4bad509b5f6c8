"""Attention gadgets: exact hard attention from stock gated full-attention layers.

Three gadgets, each a node of kind "attn" whose `ports` (query heads) the scheduler counts against
`Target.attn_heads`:

- `most_recent(prog, kind_cond, query_cond, value)`: `value` of the most recent earlier-or-current
  token whose `kind_cond` holds (0 where there is none, or where `query_cond` is 0);
- `lookup(prog, key, query, value)`: `value` of the most recent earlier-or-current token whose `key`
  equals this token's `query` (content addressed; 0 where there is none);
- `previous_token(prog, value, back)` / `gather(prog, {back: value, ...})`: `value` from exactly
  `back` tokens earlier, clamped at the first token (a token t < back reads token 0).

How a head is made exact (the math is in docs/compiler_attention.md):

* **Norms are constant scales.** q_norm/k_norm are per-head RMSNorms whose weight (1 + w) is shared
  by all heads. Every active q (k) head carries one *anchor* dimension holding 2**40, which dominates
  the head's sum of squares, so the norm divides by the same constant at every token; the anchor's
  own weight is 1 + w = 0 so it never reaches the score. The remaining weights (1 + w) fold the
  constant back in: after the norms, q = q_proj (times sqrt(head_dim)) and k = k_proj, so a score
  is exactly the dot product of the two projections' design vectors.
* **Positions come from RoPE.** Every key carries the constant pair (1, 0) on every rotary
  frequency; a query head puts a pair (a, b) on frequency w and so adds a cos(w D) - b sin(w D) to
  the score of a key D tokens back. A *recency* head uses one low frequency, phase-centred so the
  score falls by at least the margin per token over the whole context; an *offset* head uses a
  ladder of frequencies sum_i c_i cos(w_i (D - back)), peaked at D = back and rising monotonically
  over D < back.
* **Content from the pass-through dims.** A key dimension holds a 0/1 form (the kind condition) or
  a key's bits as +-1 (or its one-hot); the query's coefficient makes a mismatch cost M, more than
  the whole recency spread plus the margin.
* **Values and the output gate.** v_proj reads the value's features (the anchor-free residual read
  `row(form, 1/s)`); each head's output gate is sigmoid(+-40) per dimension, which is exactly 1 or
  ~4e-18 in fp32, so a query-side condition can switch each output dimension on or off. That makes
  `query_cond`, and lets a lookup compute its mismatch count (attended key XOR query) in the gate.
  o_proj writes the head's value dims into the output variables' residual features.
* **Margins.** Each head's design margin (the smallest score gap between the intended key and any
  other, over every query position up to `context` tokens) is computed in float64 from the target's
  own fp32 rotary frequencies; a worst-case fp32 error bound of the score computation is subtracted
  to give the *guaranteed* margin, which is at least MARGIN = 32 (so every other key's softmax weight
  is below context * e^-32, < 1e-10 at 4096 tokens). `designs(compiled)` reports them;
  `measure_margins(compiled, tokens)` measures the real ones from the model's own q/k.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .core import CompileError, Lin, Node, Var, evaluate_view
from .gadgets import n_gated
from .program import Program, topo_order

#: guaranteed score margin (after the fp32 error bound) between the intended key and any other
MARGIN = 32.0
#: output-gate pre-activation: sigmoid(40) == 1.0 and sigmoid(-40) ~ 4e-18 in fp32
GATE_ON = 40.0
#: the per-head anchor that makes q_norm / k_norm constant scales
HEAD_ANCHOR = 2.0 ** 40
#: fp32 unit roundoff
U32 = 2.0 ** -24
#: default context (tokens) over which the margins are guaranteed
CONTEXT = 4096


# ---------------------------------------------------------------------------------------------
# head plans: what one query head contributes to a layer's weights


@dataclass
class HeadPlan:
    """One query head: its score vector and its outputs.

    score(query t, key j) = sum_i a_i cos(w_i D) - b_i sin(w_i D) + sum qform(t) * kform(j),
    with D = t - j. Outputs: (vform over the key token, gate form over the query token,
    residual feature, coefficient)."""
    rot: dict                                   # frequency index -> (a, b)
    content: list = field(default_factory=list)  # (kform, qform, |q| bound, |k| bound)
    outputs: list = field(default_factory=list)  # (vform, gate, feature, coef)
    design: dict = field(default_factory=dict)


def _pos_score(rot: dict, freqs: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The positional part of a score at key distances `delta` (float64)."""
    out = np.zeros(len(delta))
    for i, (a, b) in rot.items():
        out += a * np.cos(freqs[i] * delta) - b * np.sin(freqs[i] * delta)
    return out


def recency_profile(freqs: np.ndarray, context: int, m: float) -> tuple[dict, dict]:
    """A score B cos(w D + phi) falling by >= m per token for D in [0, context - 1].

    w is the rotary frequency that maximises the smallest step 2 sin(w/2) cos(w (N-2)/2); phi
    centres the window [phi, phi + w (N-1)] on pi/2, the steepest part of the cosine."""
    n = max(int(context), 2)
    best = None
    for i, w in enumerate(freqs):
        if w * (n - 1) >= math.pi:
            continue
        g = 2 * math.sin(w / 2) * math.cos(w * max(n - 2, 0) / 2)
        if best is None or g > best[0]:
            best = (g, i, float(w))
    if best is None:
        raise CompileError(f"no rotary frequency is slow enough for a {context}-token recency "
                           f"window (lowest {float(min(freqs)):.3g} rad/token)")
    g, i, w = best
    B = m / g
    phi = (math.pi - w * (n - 1)) / 2
    rot = {i: (B * math.cos(phi), B * math.sin(phi))}
    d = np.arange(n, dtype=np.float64)
    f = _pos_score(rot, freqs, d)
    steps = f[:-1] - f[1:]
    info = {"frequency": w, "frequency_index": i, "amplitude": B,
            "spread": float(f.max() - f.min()), "min_step": float(steps.min()) if len(steps) else math.inf}
    return rot, info


def offset_profile(freqs: np.ndarray, back: int, context: int, m: float) -> tuple[dict, dict]:
    """A ladder sum_i c_i cos(w_i (D - back)), D in [0, context - 1]: the key exactly `back`
    tokens back beats every other by >= m, and over D <= back the score rises by >= m per token
    (so a token t < back attends to token 0).

    Top rung: the fastest w with w*back <= pi and c = m / (1 - cos w) (the step next to the
    peak, and every step over D < back, is >= m). Lower rungs, down to the first w with
    w*(N-1-back) <= pi, each with c = m / (1 - cos(pi/rho)) (rho: the largest ratio of adjacent
    rungs): for any distance d > pi/w_top from the peak some rung has w d in (pi/rho, pi]."""
    order = sorted(range(len(freqs)), key=lambda i: -freqs[i])
    tops = [i for i in order if freqs[i] * back <= math.pi]
    if not tops:
        raise CompileError(f"no rotary frequency is slow enough for an offset of {back}")
    dmax = max(int(context) - 1 - back, 0)
    used = [tops[0]]
    for i in order[order.index(tops[0]) + 1:]:
        if freqs[used[-1]] * dmax <= math.pi:
            break
        used.append(i)
    if freqs[used[-1]] * dmax > math.pi:
        raise CompileError(f"no rotary frequency is slow enough for a {context}-token window")
    rho = max([freqs[a] / freqs[b] for a, b in zip(used, used[1:])] + [1.0])
    c_low = m / (1 - math.cos(math.pi / rho)) if len(used) > 1 else 0.0
    w_top = float(freqs[used[0]])
    c_top = max(m / (1 - math.cos(w_top)), c_low)
    rot = {}
    for i in used:
        c = c_top if i == used[0] else c_low
        w = float(freqs[i])
        rot[i] = (c * math.cos(w * back), -c * math.sin(w * back))
    d = np.arange(0, max(int(context), back + 1), dtype=np.float64)
    f = _pos_score(rot, freqs, d)
    peak = f[back]
    after = f[back + 1:]
    # over D <= back the score must *increase* towards larger D (older keys): f(D+1) >= f(D) + m
    rise = f[1:back + 1] - f[:back]
    info = {"rungs": [float(freqs[i]) for i in used], "rung_indices": used,
            "amplitudes": [c_top] + [c_low] * (len(used) - 1),
            "peak_gap": float((peak - after).min()) if len(after) else math.inf,
            "min_rise": float(rise.min()) if len(rise) else math.inf,
            "spread": float(f.max() - f.min())}
    return rot, info


def _error_bound(plan: HeadPlan, freqs: np.ndarray, context: int) -> tuple[float, float]:
    """(worst-case fp32 error of one score, largest |score term sum|).

    The score is a dot product over the head's nonzero dimensions (n_nz of them) of factors
    carrying a few roundings each (projection, norm scale, rotation): error <= (n_nz + 16) u
    sum|q_d k_d|, plus the rotary angle error: fl(position * w) is off by up to u w P, for each
    side, so a rung of size c moves by up to c u (8 + 4 w P)."""
    total = 0.0
    rope = 0.0
    n_nz = 0
    for i, (a, b) in plan.rot.items():
        c = math.hypot(a, b)
        total += math.sqrt(2) * c
        rope += c * U32 * (8 + 4 * float(freqs[i]) * context)
        n_nz += 2
    for _k, _q, qb, kb in plan.content:
        total += qb * kb
        n_nz += 1
    return U32 * (n_nz + 16) * total + rope, total


def _finish(plan_fn, freqs, hd, context):
    """Plan at unit margin, bound the fp32 error, and re-plan at the margin that leaves MARGIN."""
    unit = plan_fn(1.0)
    e1, _ = _error_bound(unit, freqs, context)
    if 1 - 2 * e1 < 0.5:
        raise CompileError(f"a {context}-token context needs scores too large for fp32 "
                           f"(error bound {e1:.3g} per unit of margin); shorten the context")
    m = MARGIN / (1 - 2 * e1)
    plan = plan_fn(m)
    err, total = _error_bound(plan, freqs, context)
    plan.design.update({"fp32_error": err, "guaranteed_margin": plan.design["design_margin"] - 2 * err,
                        "score_scale": total, "context": context})
    return plan


# ---------------------------------------------------------------------------------------------
# nodes


def _bit(prog: Program, form: Lin | None, env: dict, what: str) -> int:
    if form is None:
        return 1
    x = prog.form_value(form, env)
    b = int(round(x))
    if b not in (0, 1) or abs(x - b) > 1e-6:
        raise CompileError(f"{what} must be a 0/1 form; it is {x}")
    return b


def _gate(cond: Lin | None) -> Lin:
    """Output-gate pre-activation: +40 where cond holds (or always), -40 where it is 0."""
    return Lin.const(GATE_ON) if cond is None else 2 * GATE_ON * cond - GATE_ON


class AttnNode(Node):
    """A node computed by query heads of one full-attention layer."""
    kind = "attn"

    def __init__(self, prog: Program, name: str, args: list, forms: list, outputs: list[Var],
                 context: int, about: str = ""):
        inputs = []
        for v in args:
            if v is not None:
                inputs += prog.sources(v)
        for f in forms:
            if f is not None:
                inputs += [prog.vars[n] for n in sorted(f.vars())]
        seen, uniq = set(), []
        for v in inputs:
            if v.name not in seen:
                seen.add(v.name)
                uniq.append(v)
        super().__init__(name, uniq, outputs, about)
        self.prog = prog
        self.context = int(context)
        if self.context < 1:
            raise CompileError("context must be >= 1 token")
        prog.add_node(self)

    @property
    def ports(self) -> int:
        raise NotImplementedError

    def plans(self, freqs: np.ndarray, hd: int) -> list[HeadPlan]:
        raise NotImplementedError

    def targets(self, state: dict) -> list[list[int]]:
        """Per head, per position: the key position the head must attend to (reference)."""
        return state[self.name]["targets"]


class Recent(AttnNode):
    """The most recent earlier-or-current token whose kind condition holds and (optionally)
    whose key equals this token's query: one head. Outputs `raw` (its value, gated by the
    query condition), `kind` (its kind condition, gated) and, with a key, `miss` (the number of
    key bits that differ from the query, i.e. 0 when it is a real match)."""

    def __init__(self, prog, name, value: Var, kind_cond: Lin | None, query_cond: Lin | None,
                 key: Var | None, query: Var | None, context: int):
        if value.kind != "bits":
            raise CompileError(f"{name}: the value must be a bits variable (0 is the empty result)")
        if (key is None) != (query is None):
            raise CompileError(f"{name}: a lookup needs both a key and a query")
        if key is not None:
            if key.kind not in ("bits", "onehot") or key.kind != query.kind or key.size != query.size:
                raise CompileError(f"{name}: key and query must be bits or onehot of the same size")
        raw = prog.bits_var(f"{name}.raw", value.size)
        kindv = prog.bits_var(f"{name}.kind", 1)
        outs = [raw, kindv]
        miss = None
        if key is not None:
            nmax = key.size if key.kind == "bits" else 1
            miss = prog.number_var(f"{name}.miss", 0, nmax)
            outs.append(miss)
        super().__init__(prog, name, [value, key, query], [kind_cond, query_cond], outs, context,
                         about="most recent" + (" match" if key is not None else ""))
        self.value, self.kind_cond, self.query_cond = value, kind_cond, query_cond
        self.key, self.query = key, query
        self.raw, self.kindv, self.miss = raw, kindv, miss
        self.primitive = "lookup" if key is not None else "most_recent"

    @property
    def ports(self) -> int:
        return 1

    def _cost(self, rec, qval) -> int:
        kind, kval = rec[0], rec[1]
        cost = 1 - kind
        if self.key is not None:
            cost += _mismatch(self.key.kind, kval, qval)
        return cost

    def evaluate(self, env, state):
        st = state.setdefault(self.name, {"hist": [], "targets": [[]]})
        kind = _bit(self.prog, self.kind_cond, env, f"{self.name}: kind_cond")
        kval = evaluate_view(self.key, env) if self.key is not None else None
        qval = evaluate_view(self.query, env) if self.query is not None else None
        st["hist"].append((kind, kval, evaluate_view(self.value, env)))
        hist = st["hist"]
        t = len(hist) - 1
        best = min(range(t + 1), key=lambda j: (self._cost(hist[j], qval), t - j))
        st["targets"][0].append(best)
        on = _bit(self.prog, self.query_cond, env, f"{self.name}: query_cond")
        env[self.raw.name] = hist[best][2] if on else 0
        env[self.kindv.name] = hist[best][0] if on else 0
        if self.miss is not None:
            env[self.miss.name] = _mismatch(self.key.kind, hist[best][1], qval)

    def plans(self, freqs, hd):
        key, query = self.key, self.query
        n = key.size if key is not None else 0

        def make(m):
            rot, info = recency_profile(freqs, self.context, m)
            M = info["spread"] + m
            content = []
            if self.kind_cond is not None:
                content.append((self.kind_cond, Lin.const(M), M, 1.0))
            if key is not None and key.kind == "bits":
                for i in range(n):
                    content.append((2 * key.f(i) - 1, M * query.f(i) - M / 2, M / 2, 1.0))
            elif key is not None:
                # a one-hot query has one nonzero coefficient: its |q||k| bound is counted once
                for i in range(n):
                    content.append((key.f(i), M * query.f(i), M if i == 0 else 0.0, 1.0))
            gate = _gate(self.query_cond)
            outputs = [(self.value.f(i), gate, self.raw.feature(i), 1.0) for i in range(self.value.size)]
            outputs.append((self.kind_cond if self.kind_cond is not None else Lin.const(1.0), gate,
                            self.kindv.feature(0), 1.0))
            if key is not None:
                for i in range(n):
                    off = GATE_ON - 2 * GATE_ON * query.f(i)      # on where the query bit is 0
                    outputs.append((key.f(i), off, self.miss.feature(0), 1.0))
                    if key.kind == "bits":
                        outputs.append((1 - key.f(i), -1 * off, self.miss.feature(0), 1.0))
            # tiers: a key that fails the kind condition or mismatches loses M - spread >= m
            design = {"kind": "recency", **info, "mismatch_penalty": M,
                      "design_margin": min(info["min_step"], M - info["spread"])}
            return HeadPlan(rot, content, outputs, design)
        return [_finish(make, freqs, hd, self.context)]


def _mismatch(kind: str, a: int, b: int) -> int:
    if kind == "bits":
        return bin(int(a) ^ int(b)).count("1")
    return int(int(a) != int(b))


class Gather(AttnNode):
    """Values from fixed offsets back: one head per (offset, value)."""

    def __init__(self, prog, name, items: list, context: int):
        outs = []
        for k, (back, v) in enumerate(items):
            if not isinstance(back, int) or back < 1:
                raise CompileError(f"{name}: offsets must be integers >= 1, not {back!r}")
            if back >= context:
                raise CompileError(f"{name}: offset {back} does not fit a {context}-token context")
            outs.append(prog.var(f"{name}.{k}@{back}", v.kind, v.size, v.lo, v.hi))
        super().__init__(prog, name, [v for _, v in items], [], outs, context,
                         about="tokens " + ", ".join(str(b) for b, _ in items) + " back")
        self.items = list(items)
        self.primitive = "gather" if len(self.items) > 1 else "previous_token"

    @property
    def ports(self) -> int:
        return len(self.items)

    def evaluate(self, env, state):
        st = state.setdefault(self.name, {"hist": [], "targets": [[] for _ in self.items]})
        st["hist"].append([evaluate_view(v, env) for _, v in self.items])
        t = len(st["hist"]) - 1
        for h, ((back, _v), out) in enumerate(zip(self.items, self.outputs)):
            j = max(t - back, 0)
            st["targets"][h].append(j)
            env[out.name] = st["hist"][j][h]

    def plans(self, freqs, hd):
        out = []
        for (back, v), o in zip(self.items, self.outputs):
            def make(m, back=back, v=v, o=o):
                rot, info = offset_profile(freqs, back, self.context, m)
                outputs = [(v.f(i), Lin.const(GATE_ON), o.feature(i), 1.0) for i in range(v.size)]
                design = {"kind": "offset", "back": back, **info,
                          "design_margin": min(info["peak_gap"], info["min_rise"])}
                return HeadPlan(rot, [], outputs, design)
            out.append(_finish(make, freqs, hd, self.context))
        return out


# ---------------------------------------------------------------------------------------------
# builders


def _zero_fallback(prog: Program, node: Recent, name: str, found: bool):
    """One MLP level: value = raw when the attended token really qualifies, else 0."""
    cond = node.kindv.f(0) - (node.miss.f(0) if node.miss is not None else Lin())
    out = prog.bits_var(name, node.value.size)
    outs = [out]
    fv = None
    neurons = []
    for i in range(node.value.size):
        neurons += n_gated(cond, node.raw.f(i), {out.feature(i): 1.0})
    if found:
        fv = prog.bits_var(f"{name}.found", 1)
        outs.append(fv)
        neurons += n_gated(cond, Lin.const(1.0), {fv.feature(0): 1.0})
    args = [node.raw, node.kindv] + ([node.miss] if node.miss is not None else [])

    def fn(raw, kind, miss=0):
        ok = int(kind) - int(miss) >= 1
        return (int(raw) if ok else 0, int(ok)) if found else (int(raw) if ok else 0)
    prog.mlp(prog.fresh(f"{name}.zero"), args, outs, neurons, fn, about="empty result -> 0",
             primitive=node.primitive)
    return (out, fv) if found else out


def most_recent(prog: Program, kind_cond: Lin | Var, query_cond: Lin | Var | None, value: Var,
                name: str | None = None, context: int = CONTEXT, found: bool = False):
    """At every token: `value` at the most recent earlier-or-current token whose `kind_cond`
    (a 0/1 form over that token) holds; 0 when no such token exists or when `query_cond` (a 0/1
    form over this token, None = always) is 0. One attention head, then one MLP level (in the
    same layer) that zeroes the empty case. With `found=True` returns (value, found bit)."""
    name = name or prog.fresh("recent")
    node = Recent(prog, name + ".attn", value, _as_form(kind_cond), _as_form(query_cond), None, None,
                  context)
    return _zero_fallback(prog, node, name, found)


def lookup(prog: Program, key: Var, query: Var, value: Var, name: str | None = None,
           kind_cond: Lin | Var | None = None, query_cond: Lin | Var | None = None,
           context: int = CONTEXT, found: bool = False):
    """At every token: `value` at the most recent earlier-or-current token whose `key` equals this
    token's `query` (and whose `kind_cond` holds, when given); 0 when there is none or when
    `query_cond` is 0. Keys are bits or onehot variables. One head, then one MLP level."""
    name = name or prog.fresh("lookup")
    node = Recent(prog, name + ".attn", value, _as_form(kind_cond), _as_form(query_cond), key, query,
                  context)
    return _zero_fallback(prog, node, name, found)


def gather(prog: Program, values_by_offset, name: str | None = None, context: int = CONTEXT) -> list[Var]:
    """A multi-token record: for each (offset, value) the value `offset` tokens back (clamped at
    the first token), one head each, all in one layer. `values_by_offset` is a dict
    {offset: Var} or a list of (offset, Var). Returns the outputs in the same order."""
    items = list(values_by_offset.items()) if isinstance(values_by_offset, dict) else list(values_by_offset)
    if not items:
        raise CompileError("gather needs at least one (offset, value)")
    node = Gather(prog, name or prog.fresh("gather"), items, context)
    return list(node.outputs)


def previous_token(prog: Program, value: Var, back: int = 1, name: str | None = None,
                   context: int = CONTEXT) -> Var:
    """`value` exactly `back` tokens earlier; the first `back` tokens read token 0's value."""
    return gather(prog, [(back, value)], name or prog.fresh(f"back{back}({value.name})"), context)[0]


def _as_form(x) -> Lin | None:
    if x is None or isinstance(x, Lin):
        return x
    if isinstance(x, Var):
        if x.size != 1:
            raise CompileError(f"{x.name}: a condition must be a 1-bit variable or a 0/1 form")
        return x.f(0)
    raise CompileError(f"a condition must be a Lin form or a 1-bit variable, not {type(x).__name__}")


# ---------------------------------------------------------------------------------------------
# emission


def rotary_frequencies(config) -> np.ndarray:
    """The model's own fp32 inverse frequencies (as float64), one per rotary pair."""
    return rope_inv_freq(config).double().numpy()


def assign_heads(nodes, config) -> list[tuple]:
    """[(node, head plan, query head index)] for one layer's attention nodes, in order."""
    h, hd = config.num_attention_heads, config.head_dim
    freqs = rotary_frequencies(config)
    out = []
    for node in nodes:
        if not isinstance(node, AttnNode):
            raise CompileError(f"{node.name} is not an attention gadget")
        for plan in node.plans(freqs, hd):
            out.append((node, plan, len(out)))
    if len(out) > h:
        raise CompileError(f"the layer's attention gadgets need {len(out)} heads; it has {h}")
    return out


def _fkey(form: Lin) -> tuple:
    return tuple(sorted(form.terms.items()))


def emit_attention(sd, p, nodes, config, width, row, s, lay):
    h, kvh, hd = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    q = np.zeros((h * hd * 2, width))
    k = np.zeros((kvh * hd, width))
    v = np.zeros((kvh * hd, width))
    o = np.zeros((width, h * hd))
    qn = np.zeros(hd)
    kn = np.zeros(hd)
    if nodes:
        heads = assign_heads(nodes, config)
        rot = len(rotary_frequencies(config)) * 2
        half = rot // 2
        anchor = rot                          # the head anchor dim (a pass-through dim)
        first = rot + 1                       # content dims start here
        group = h // kvh
        kdims = [dict() for _ in range(kvh)]     # per kv head: form key -> dim
        vdims = [dict() for _ in range(kvh)]
        used_kv = set()

        def kdim(g, form):
            d = kdims[g].setdefault(_fkey(form), first + len(kdims[g]))
            if d >= hd:
                raise CompileError(f"kv head {g}: key content needs more than {hd - first} dims")
            k[g * hd + d] = row(form, 1 / s)
            return d

        vcount = [0] * kvh

        def vdim(g, form, gate, gates):
            # heads of a group share value dims; within one head a dim has one gate, so a value
            # read under two different gates takes two dims
            dims = vdims[g].setdefault(_fkey(form), [])
            for d in dims:
                if gates.get(d, _fkey(gate)) == _fkey(gate):
                    break
            else:
                d = vcount[g]
                vcount[g] += 1
                if d >= hd:
                    raise CompileError(f"kv head {g}: values need more than {hd} dims")
                dims.append(d)
                v[g * hd + d] = row(form, 1 / s)
            gates[d] = _fkey(gate)
            return d

        for node, plan, hi in heads:
            g = hi // group
            if g not in used_kv:
                used_kv.add(g)
                for i in range(half):
                    k[g * hd + i] = row(Lin.const(1.0), 1 / s)     # key pair (1, 0) per frequency
                k[g * hd + anchor] = row(Lin.const(HEAD_ANCHOR), 1 / s)
            base = hi * 2 * hd
            for i, (a, b) in plan.rot.items():
                q[base + i] = row(Lin.const(a), 1 / s)
                q[base + half + i] = row(Lin.const(b), 1 / s)
            q[base + anchor] = row(Lin.const(HEAD_ANCHOR), 1 / s)
            for kform, qform, _qb, _kb in plan.content:
                d = kdim(g, kform)
                q[base + d] = row(qform, 1 / s)
            gates = {}
            for vform, gate, feat, coef in plan.outputs:
                d = vdim(g, vform, gate, gates)
                q[base + hd + d] = row(gate, 1 / s)
                o[lay.dims[feat], hi * hd + d] += coef
        # after the norms: q = q_proj * sqrt(hd), k = k_proj; the 1/sqrt(hd) scaling then makes
        # the score exactly q_proj . k_proj. The anchor dims are dropped (1 + w = 0).
        qn[:] = HEAD_ANCHOR - 1.0
        kn[:] = HEAD_ANCHOR / math.sqrt(hd) - 1.0
        qn[anchor] = -1.0
        kn[anchor] = -1.0
    sd[p + "q_proj.weight"] = q
    sd[p + "k_proj.weight"] = k
    sd[p + "v_proj.weight"] = v
    sd[p + "o_proj.weight"] = o
    sd[p + "q_norm.weight"] = qn
    sd[p + "k_norm.weight"] = kn


# ---------------------------------------------------------------------------------------------
# reports and measurements


def designs(compiled) -> dict:
    """{node name: [per-head design dict]} for a compiled program: design margin (float64, over the
    whole context), worst-case fp32 score error, guaranteed margin, frequencies, amplitudes."""
    out = {}
    for L, nodes in compiled.schedule.mixers.items():
        attn = [n for n in nodes if isinstance(n, AttnNode)]
        if not attn:
            continue
        for node, plan, hi in assign_heads(attn, compiled.config):
            out.setdefault(node.name, []).append({"layer": L, "head": hi, **plan.design})
    return out


def min_guaranteed_margin(compiled) -> float | None:
    ms = [d["guaranteed_margin"] for ds in designs(compiled).values() for d in ds]
    return min(ms) if ms else None


def reference_targets(prog: Program, tokens: list[str]) -> dict:
    """{node name: per head, per position, the key position it must attend to}."""
    order = topo_order(prog)
    state: dict = {}
    for text in tokens:
        env = {"@token": prog.token_by_text[text]}
        for node in order:
            node.evaluate(env, state)
    return {n.name: n.targets(state) for n in prog.nodes if isinstance(n, AttnNode)}


def attention_scores(compiled, tokens: list[str], mode: str = "prefill", model=None) -> dict:
    """{layer: fp32 scores [heads, queries, keys]} recomputed from the model's own modules and
    the inputs its attention layers really received (prefill, or the cached decode path)."""
    import torch
    from transformers import DynamicCache
    from transformers.models.qwen3_5.modeling_qwen3_5 import apply_rotary_pos_emb
    model = model or compiled.model()
    layers = sorted(L for L, ns in compiled.schedule.mixers.items()
                    if any(isinstance(n, AttnNode) for n in ns))
    seen = {L: [] for L in layers}
    hooks = []
    for L in layers:
        mod = model.model.layers[L].self_attn

        def hook(m, args, kwargs, L=L):
            hs = kwargs.get("hidden_states", args[0] if args else None)
            cos, sin = kwargs["position_embeddings"]
            seen[L].append((hs.detach(), cos.detach(), sin.detach()))
        hooks.append(mod.register_forward_pre_hook(hook, with_kwargs=True))
    ids = torch.tensor([[compiled.token_id(t) for t in tokens]])
    try:
        with torch.no_grad():
            if mode == "prefill":
                model(input_ids=ids)
            elif mode == "decode":
                cache = DynamicCache(config=model.config)        # updated in place
                for t in range(ids.shape[1]):
                    model(input_ids=ids[:, t:t + 1], cache=cache, use_cache=True)
            else:
                raise ValueError(f"mode must be prefill or decode, not {mode!r}")
    finally:
        for hk in hooks:
            hk.remove()
    out = {}
    cfg = compiled.config
    H, KV, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    with torch.no_grad():
        for L in layers:
            hs = torch.cat([x[0] for x in seen[L]], dim=1)
            cos = torch.cat([x[1] for x in seen[L]], dim=1)
            sin = torch.cat([x[2] for x in seen[L]], dim=1)
            mod = model.model.layers[L].self_attn
            T = hs.shape[1]
            qs, _gate = torch.chunk(mod.q_proj(hs).view(1, T, H, 2 * hd), 2, dim=-1)
            qs = mod.q_norm(qs).transpose(1, 2)
            ks = mod.k_norm(mod.k_proj(hs).view(1, T, KV, hd)).transpose(1, 2)
            qs, ks = apply_rotary_pos_emb(qs, ks, cos, sin)
            ks = ks.repeat_interleave(H // KV, dim=1)
            out[L] = (torch.matmul(qs, ks.transpose(-1, -2)) * mod.scaling)[0].float().numpy()
    return out


def measure_margins(compiled, tokens: list[str], mode: str = "prefill", model=None) -> dict:
    """{node name: the smallest measured score gap (target key minus best other key) over every
    head and query position} (positions with a single key have no gap and are skipped)."""
    scores = attention_scores(compiled, tokens, mode, model)
    targets = reference_targets(compiled.program, tokens)
    out = {}
    for L, nodes in compiled.schedule.mixers.items():
        attn = [n for n in nodes if isinstance(n, AttnNode)]
        if not attn:
            continue
        per_node = {}
        for node, plan, hi in assign_heads(attn, compiled.config):
            per_node.setdefault(node.name, []).append(hi)
        for node in attn:
            best = math.inf
            for hpos, hi in enumerate(per_node[node.name]):
                S = scores[L][hi]
                for t, j in enumerate(targets[node.name][hpos]):
                    if t == 0:
                        continue
                    row_ = S[t, :t + 1].astype(np.float64)
                    others = np.delete(row_, j)
                    best = min(best, float(row_[j] - others.max()))
            out[node.name] = best
    return out


def rope_inv_freq(config):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding
    inv, _ = Qwen3_5TextRotaryEmbedding.compute_default_rope_parameters(config)
    return inv
