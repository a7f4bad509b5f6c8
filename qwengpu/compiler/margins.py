"""Decision margins: static ones from the design (every build), measured ones from a run.

Every nonlinearity the compiler places runs saturated. In fp32, SiLU(x) == x exactly for
x >= 17 (sigmoid(x) rounds to 1.0 from 16.64 on) and |SiLU(x)| <= 7.1e-7 for x <= -17; the
sigmoids of GDN write enables and attention output gates are 1.0 / below 4.2e-8 there. The
*static margin* of a pre-activation is its worst-case distance from 0 over every input the
compiler knows, in units of that saturation point: `(D - E) / 17`, safe bound 1.

- D: the smallest |value| over the ideal inputs (bits and one-hot features 0/1, numbers integers
  in [lo, hi]; the values lie on the lattice `const + g Z`, g the gcd of the coefficients, within
  the interval bound). Linear and product gates must be positive: D is their smallest value.
- E = TAU * slope + (nnz + 4) u sum|terms| + rel_norm sum|terms|: the integer form behind the
  pre-activation known to +-TAU = 0.1 (the circuits' premise, docs/compiler.md "Exactness"),
  times the pre-activation per unit of that form (step 120, gated 64, product 1, linear 0; GDN
  keys 152, values and output gates 64, write enables 80; attention output gates 80); the fp32
  rounding of the projection (weight, normalised input, product, and a sum of nnz terms;
  u = 2^-24); the RMSNorm's drift from the non-anchor features (~1e-20 in practice).

Linear, gated and product neurons have D = 32 (product: a + K >= 32), step pairs D = 44 (an
integer form, the threshold halfway between integers, +-16 between the two neurons of a pair),
GDN keys 40 (their off slots sit at -112, where SiLU is exactly 0), values and gates 32, write
enables 40; attention heads are built to a guaranteed score
gap of 32 (`attention.MARGIN`).

Per kind:

- MLP neurons (`linear`, `step`, `gated`, `product`, hand-made `other`, and `erase`);
- GDN memories and `previous` (`gdn.key` for keys and queries, `gdn.value`, `gdn.beta`,
  `gdn.gate`), and `gdn.rail`: READ_TOL over a bound of the error of a word read back, relative
  to its rail: `16 u + (dk - 1) e^-Dq + 2 T e^-Dk + 2 T e^-Dbeta + e^-Dv + e^-Dz` (rounding, the
  off-slot query components, the off-slot key components of T = 2^20 writes, the leak of T
  disabled writes, the off rail and the closed gate; D: the pre-activations' D - E), so >= 1
  means a read stays within READ_TOL = 0.1 / 4096 of its code (a 12-bit form over such bits
  stays within TAU) for 2^20 tokens;
- attention: `attention.score`, each head's guaranteed score gap over `attention.MARGIN` (32;
  exactly 1 by construction), and `attention.gate`, its output-gate pre-activations.

`static_margins(compiled)` aggregates them per kind, per node (a primitive instance) and per
primitive (`Node.primitive`); `compile_program` stores that in `report["margins"]` and raises
`CompileError` naming the nodes when one is below the bound (`Target(check_margins=False)` only
reports). Output precision (how close a neuron's output is to its code) is not part of the static
margin: `run.measure_margins` measures it.
"""
from __future__ import annotations

import math
from fractions import Fraction

from .attention import GATE_ON, MARGIN, AttnNode, assign_heads
from .core import ANCHOR, ANCHOR_FEATURE, CompileError, Lin
from .gadgets import GATE_B, STEP_A
from .memory import BETA_L, KEY_OFF, KEY_ON, KEY_SLOPE, VALUE_L, Z_ON, Previous, key_form

U32 = 2.0 ** -24
#: pre-activation distance from 0 at which SiLU / sigmoid are exact (or off) in fp32
SILU_SAFE = 17.0
#: how far the integer form behind a pre-activation may be off, in units of its lattice spacing
TAU = 0.1
#: the largest error of a word read back from a GDN memory, relative to its rail (a bit with that
#: error keeps a 12-bit form, the largest a threshold takes, within TAU)
READ_TOL = TAU / 4096
#: tokens over which a GDN memory's crosstalk is bounded
GDN_TOKENS = 1 << 20
#: safe bound of every margin ratio
BOUND = 1.0

def _slopes():
    return {"linear": 0.0, "erase": 0.0, "step": STEP_A, "gated": GATE_B, "product": 1.0}


#: neuron shapes whose gate must be positive (a linear or product SiLU must be in its linear range)
_ONE_SIDED = {"linear", "product", "erase"}


class _Ranges:
    """(lo, hi, scale) of residual features, by variable name (cached)."""

    def __init__(self, prog):
        self.prog = prog
        self.cache = {}

    def __call__(self, name):
        r = self.cache.get(name)
        if r is None:
            v = self.prog.vars.get(name)
            lo, hi = v.feature_range() if v is not None else (0.0, 1.0)
            r = (lo, hi, max(1.0, abs(lo), abs(hi)))
            self.cache[name] = r
        return r


def _gcd(coefs: list[float]) -> float | None:
    """The gcd of the coefficients (None: not rational with a small denominator)."""
    g = 0
    if all(c.is_integer() for c in coefs):
        for c in coefs:
            g = math.gcd(g, int(abs(c)))
        return float(g)
    fr = []
    for c in coefs:
        f = Fraction(c).limit_denominator(1 << 20)
        if abs(float(f) - c) > 1e-12 * max(1.0, abs(c)):
            return None
        fr.append(abs(f))
    den = 1
    for f in fr:
        den = den * f.denominator // math.gcd(den, f.denominator)
    for f in fr:
        g = math.gcd(g, int(f * den))
    return g / den


def preactivation(form: Lin, ranges, one_sided: bool = False, rel_norm: float = 0.0,
                  slope: float | None = None) -> tuple[float, float]:
    """(D, E) of a pre-activation form: D its smallest |value| (one-sided: its smallest value)
    over the known inputs, E the worst-case error bound (see the module docstring). `slope`:
    the pre-activation per unit of the integer form behind it (None: the lattice spacing)."""
    c0 = lo = hi = total = 0.0
    nnz = 0
    coefs = []
    for k, c in form.terms.items():
        if k == ANCHOR_FEATURE:
            c0 += c
            continue
        a, b, sc = ranges(k[0])
        x1, x2 = c * a, c * b
        if x1 <= x2:
            lo += x1
            hi += x2
        else:
            lo += x2
            hi += x1
        total += abs(c) * max(abs(a), abs(b))
        nnz += 1
        coefs.append(c)
    L, H = c0 + lo, c0 + hi
    total += abs(c0)
    g = _gcd(coefs) if coefs else 0.0
    err = U32 * (nnz + 4) * total + rel_norm * total
    if coefs:                          # a constant has no input to be off
        if slope is None:
            slope = g if g is not None else max(abs(c) for c in coefs)
        err += TAU * slope
    if one_sided:
        return L, err
    if L > 0:
        d = L
    elif H < 0:
        d = -H
    elif g is None:
        d = 0.0
    else:
        n = math.floor(-c0 / g)
        v1 = c0 + n * g
        d = min(abs(v1), abs(v1 + g))
    return d, err


def ratio(d: float, e: float) -> float:
    return (d - e) / SILU_SAFE


class _Acc:
    """Accumulates margin entries per kind, node and primitive."""

    def __init__(self):
        self.kinds: dict = {}
        self.nodes: dict = {}
        self.low: list = []

    def add(self, kind: str, node: str, primitive: str, r: float, detail: str = "", layer=None):
        k = self.kinds.get(kind)
        if k is None:
            self.kinds[kind] = {"min": r, "node": node, "count": 1}
        else:
            k["count"] += 1
            if r < k["min"]:
                k["min"], k["node"] = r, node
        n = self.nodes.get(node)
        if n is None:
            self.nodes[node] = {"min": r, "kind": kind, "primitive": primitive, "layer": layer}
        elif r < n["min"]:
            n["min"], n["kind"] = r, kind
        if r < BOUND - 1e-9:
            self.low.append((r, node, kind, detail))


def _rel_norm(prog) -> float:
    """A bound of the RMSNorm's relative drift: the non-anchor features' squares against the
    anchor's (every residual variable at its largest magnitude at once)."""
    s = 0.0
    for v in prog.residual_vars:
        lo, hi = v.feature_range()
        s += v.size * max(lo * lo, hi * hi)
    return s / (2 * ANCHOR * ANCHOR)


def static_margins(compiled, erase_at: dict | None = None) -> dict:
    """The static margin report of a compiled program (see the module docstring):
    {"bound", "min", "node", "kinds": {kind: {min, node, count}}, "primitives": {primitive:
    {min, node, nodes}}, "nodes": {node: {min, kind, primitive, layer}}, "low": [...]}."""
    prog = compiled.program
    sched = compiled.schedule
    ranges = _Ranges(prog)
    slopes = _slopes()
    rel = _rel_norm(prog)
    acc = _Acc()
    # MLP neurons
    for L in range(sched.layers):
        for node in sched.mlp.get(L, []):
            prim = node.primitive or "circuit"
            per: dict = {}
            for nr in node.neurons:
                shape = nr.shape or "other"
                d, e = preactivation(nr.gate, ranges, shape in _ONE_SIDED, rel, slopes.get(shape))
                r = ratio(d, e)
                if r < per.get(shape, (math.inf,))[0]:
                    per[shape] = (r, f"pre-activation {d:.4g} - error {e:.3g}")
            for shape, (r, detail) in per.items():
                acc.add(shape, node.name, prim, r, detail, L)
        if (erase_at or {}).get(L):
            d, e = preactivation(Lin.const(32.0), ranges, True, rel)
            acc.add("erase", f"erase@{L}", "erase", ratio(d, e), f"{len(erase_at[L])} neurons", L)
    # GDN memories and previous()
    dk = compiled.config.linear_key_head_dim
    for L, nodes in sched.mixers.items():
        for node in nodes:
            if node.kind == "gdn":
                _gdn(node, ranges, rel, dk, acc, L)
    # attention heads
    designs = compiled.report.get("attention")
    if designs:
        for name, heads in designs.items():
            for h in heads:
                acc.add("attention.score", name, _primitive_of(prog, name),
                        h["guaranteed_margin"] / MARGIN, f"guaranteed score margin {h['guaranteed_margin']:.4g}",
                        h["layer"])
        for L, nodes in sched.mixers.items():
            attn = [n for n in nodes if isinstance(n, AttnNode)]
            if not attn:
                continue
            for node, plan, _hi in assign_heads(attn, compiled.config):
                if plan.outputs:
                    worst = min(ratio(*preactivation(g, ranges, False, rel, 2 * GATE_ON))
                                for _v, g, _f, _c in plan.outputs)
                    acc.add("attention.gate", node.name, node.primitive, worst, "output gate", L)
    prims: dict = {}
    for name, n in acc.nodes.items():
        p = prims.get(n["primitive"])
        if p is None:
            prims[n["primitive"]] = {"min": n["min"], "node": name, "nodes": 1}
        else:
            p["nodes"] += 1
            if n["min"] < p["min"]:
                p["min"], p["node"] = n["min"], name
    worst = min(acc.nodes.items(), key=lambda kv: kv[1]["min"], default=(None, {"min": math.inf}))
    return {"bound": BOUND, "tau": TAU, "min": worst[1]["min"], "node": worst[0], "kinds": acc.kinds,
            "primitives": prims, "nodes": acc.nodes,
            "low": [{"node": n, "kind": k, "margin": r, "detail": d} for r, n, k, d in sorted(acc.low)]}


def _primitive_of(prog, node_name: str) -> str:
    for n in prog.nodes:
        if n.name == node_name:
            return n.primitive or "circuit"
    return "circuit"


def _gdn(node, ranges, rel, dk, acc, layer):
    """A GDN memory's (or previous()'s) pre-activations and its rail bound."""

    worst = {}

    slopes = {"key": KEY_SLOPE, "query": KEY_SLOPE, "gdn.value": 2 * VALUE_L, "gdn.beta": 2 * BETA_L,
              "gdn.gate": 2 * Z_ON}

    off_error = 0.0          # the largest error of a key or query form (its off slots sit <= -KEY_OFF)

    def see(kind, form):
        nonlocal off_error
        d, e = preactivation(form, ranges, False, rel, slopes[kind])
        if d - e < worst.get(kind, math.inf):
            worst[kind] = d - e
        if kind in ("key", "query"):
            off_error = max(off_error, e)

    def addr_forms(addr):
        n = addr.size if addr.kind == "onehot" else (1 << addr.size)
        return [key_form(addr, i) for i in range(min(n, dk))] + ([Lin.const(-KEY_OFF)] if n < dk else [])

    if isinstance(node, Previous):
        see("key", Lin.const(KEY_ON))
        see("key", Lin.const(-KEY_OFF))
        worst["query"] = worst["key"]
        for i in range(node.var.size):
            see("gdn.value", VALUE_L * (2 * node.var.f(i) - 1))
        see("gdn.beta", Lin.const(BETA_L))
        see("gdn.gate", Lin.const(Z_ON))
    else:
        for w in node.writes:
            for f in addr_forms(w.addr):
                see("key", f)
            for i in range(w.value.size):
                see("gdn.value", VALUE_L * (2 * w.value.f(i) - 1))
            for fi in range(len(node.fields)):
                en = node.field_enables(w)[fi] if w.field_enable is not None else w.enable
                see("gdn.beta", 2 * BETA_L * en - BETA_L)
        if not node.writes:
            see("gdn.beta", Lin.const(-BETA_L))
        for r in node.reads:
            for f in addr_forms(r.addr):
                see("query", f)
            see("gdn.gate", Lin.const(Z_ON) if r.enable is None else 2 * Z_ON * r.enable - Z_ON)
    k, q = worst.pop("key", math.inf), worst.pop("query", math.inf)
    worst["gdn.key"] = min(k, q)
    # crosstalk comes from the off slots' components: SiLU of at most -(KEY_OFF - error)
    k = q = KEY_OFF - off_error
    for kind, de in worst.items():
        if de == math.inf:
            continue
        acc.add(kind, node.name, node.primitive, de / SILU_SAFE, f"pre-activation margin {de:.4g}", layer)
    T = GDN_TOKENS
    dev = (16 * U32 + (dk - 1) * _exp(-q) + 2 * T * _exp(-k) + 2 * T * _exp(-worst.get("gdn.beta", math.inf))
           + _exp(-worst.get("gdn.value", math.inf)) + _exp(-worst.get("gdn.gate", math.inf)))
    acc.add("gdn.rail", node.name, node.primitive, READ_TOL / dev, f"read error bound {dev:.3g} x the rail", layer)


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


def check(report: dict):
    """Raise CompileError when a static margin is below the safe bound (naming the nodes)."""
    low = report.get("low") or []
    if not low:
        return
    lines = [f"{x['node']} ({x['kind']}): margin {x['margin']:.3g} < {BOUND:g}"
             + (f" [{x['detail']}]" if x["detail"] else "") for x in low[:5]]
    more = f" (and {len(low) - 5} more)" if len(low) > 5 else ""
    raise CompileError("decision margins below the fp32 safe bound (pre-activation >= "
                       f"{SILU_SAFE:g} after the worst-case error): " + "; ".join(lines) + more)


# ---------------------------------------------------------------------------------------------
# measured: how far a run's gate pre-activations are from their lattice (the premise, measured)


def gate_lattices(compiled) -> dict:
    """{layer: {"index", "offset", "period", "node", "names"}}: for every MLP neuron whose gate is a
    form of residual features, its place in the layer's MLP and the lattice its ideal value lies on
    (`offset + period Z`: the form's constant and the gcd of its coefficients). A run's distance from
    that lattice, in lattice spacings, is the measured error of the integer form behind the gate:
    the static margin's premise is that it stays within TAU (`form_noise`). Erase neurons (constant
    gates) come after these and are not listed."""
    out = {}
    sched = compiled.schedule
    for L in range(sched.layers):
        idx, off, per, node_of, names = [], [], [], [], []
        k = 0
        for node in sched.mlp.get(L, []):
            for nr in node.neurons:
                coefs = [c for f, c in nr.gate.terms.items() if f != ANCHOR_FEATURE]
                g = _gcd(coefs) if coefs else None
                if g:
                    idx.append(k)
                    off.append(float(nr.gate.terms.get(ANCHOR_FEATURE, 0.0)))
                    per.append(float(g))
                    node_of.append(len(names))
                k += 1
            names.append(node.name)
        if idx:
            out[L] = {"index": idx, "offset": off, "period": per, "node": node_of, "names": names}
    return out


class FormNoise:
    """The largest distance of measured gate pre-activations from their lattices over a run (in
    lattice spacings; the design's premise: <= TAU), and the node where it was. Feed it each
    layer's gate pre-activations [T, intermediate] (`ReferenceEngine.forward(gate_hook=...)`, or a hook
    on a stock model's `mlp.gate_proj`)."""

    def __init__(self, lattices: dict):
        import torch
        self.lattices = {int(L): (torch.tensor(d["index"]), torch.tensor(d["offset"], dtype=torch.float64),
                                  torch.tensor(d["period"], dtype=torch.float64), d["node"], d["names"])
                         for L, d in lattices.items()}
        self.worst = 0.0
        self.where = None

    def __call__(self, layer: int, gate):
        lat = self.lattices.get(layer)
        if lat is None:
            return
        idx, off, per, node_of, names = lat
        x = (gate.detach().reshape(-1, gate.shape[-1]).cpu()[:, idx].double() - off) / per
        d = (x - x.round()).abs().max(dim=0).values
        j = int(d.argmax())
        if float(d[j]) > self.worst:
            self.worst = float(d[j])
            self.where = names[node_of[j]]
