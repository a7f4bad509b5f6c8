"""The compiler's core vocabulary: residual variables, linear forms, neurons and graph nodes.

A `Program` is a dataflow graph evaluated once per token. Every variable owns a named subspace of
the residual stream (its *features*) and is written exactly once (SSA); its encoding says how the
features hold its value:

- `bits(n)`   n features in {0, 1}, value = sum(bit_i << i)
- `onehot(n)` n features, exactly one is 1, value = its index
- `number(lo, hi)` one feature holding an integer in [lo, hi]

Every token's residual also carries the *anchor*: one feature of magnitude `ANCHOR` (2**40) that
dominates the sum of squares, so every RMSNorm divides by the same constant whatever the other
features hold (their squares are below the anchor square's rounding unit). A linear form's constant
term reads the anchor.

Nodes are evaluated by the reference evaluator (`Node.evaluate`, exact Python on discrete values)
and emitted as weights (`qwengpu.compiler.compiling`). Tests compare the two value by value.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

ANCHOR = 2.0 ** 40
ANCHOR_FEATURE = ("@anchor", 0)


class CompileError(ValueError):
    pass


# ---------------------------------------------------------------------------------------------
# linear forms over residual features


class Lin:
    """A linear form: {feature: coefficient}; the anchor feature stands for the constant 1."""
    __slots__ = ("terms",)

    def __init__(self, terms: dict | None = None):
        self.terms = {k: float(v) for k, v in (terms or {}).items() if v != 0}

    @staticmethod
    def const(c: float) -> "Lin":
        return Lin({ANCHOR_FEATURE: c})

    def __add__(self, other) -> "Lin":
        if isinstance(other, (int, float)):
            other = Lin.const(other)
        out = dict(self.terms)
        for k, v in other.terms.items():
            out[k] = out.get(k, 0.0) + v
        return Lin(out)

    __radd__ = __add__

    def __sub__(self, other) -> "Lin":
        return self + (-1) * (other if isinstance(other, Lin) else Lin.const(other))

    def __rsub__(self, other) -> "Lin":
        return (-1) * self + other

    def __mul__(self, c: float) -> "Lin":
        return Lin({k: v * c for k, v in self.terms.items()})

    __rmul__ = __mul__

    def __neg__(self) -> "Lin":
        return self * -1

    def __truediv__(self, c: float) -> "Lin":
        return self * (1.0 / c)

    def evaluate(self, values: dict) -> float:
        """Value given feature values ({feature: value}); the anchor counts as 1."""
        total = 0.0
        for k, v in self.terms.items():
            total += v * (1.0 if k == ANCHOR_FEATURE else values[k])
        return total

    def vars(self) -> set[str]:
        return {k[0] for k in self.terms if k != ANCHOR_FEATURE}

    def bound(self, ranges: dict) -> float:
        """Largest |value| over feature ranges {feature: (lo, hi)} (for precision checks)."""
        total = 0.0
        for k, v in self.terms.items():
            if k == ANCHOR_FEATURE:
                total += abs(v)
            else:
                lo, hi = ranges.get(k, (0.0, 1.0))
                total += max(abs(v * lo), abs(v * hi))
        return total

    def __repr__(self) -> str:
        return "Lin(" + " + ".join(f"{v:g}*{k[0]}[{k[1]}]" for k, v in self.terms.items()) + ")"


# ---------------------------------------------------------------------------------------------
# variables


@dataclass(eq=False)
class Var:
    """A residual variable. `kind` is "bits", "onehot" or "number"."""
    name: str
    kind: str
    size: int                      # number of features
    lo: int = 0                    # value range (numbers)
    hi: int = 1
    producer: "Node | None" = None

    # -- features --------------------------------------------------------------------------------

    def f(self, i: int = 0) -> Lin:
        """The linear form reading feature i."""
        if not 0 <= i < self.size:
            raise IndexError(f"{self.name} has {self.size} features, not {i}")
        return Lin({(self.name, i): 1.0})

    def feature(self, i: int = 0) -> tuple:
        return (self.name, i)

    def __getitem__(self, i: int) -> Lin:
        return self.f(i)

    @property
    def bits(self) -> int:
        return self.size

    def value_lin(self, lo: int = 0, hi: int | None = None) -> Lin:
        """Linear form of the numeric value (bits lo..hi-1 of a bits var, weighted 2^(i-lo))."""
        if self.kind == "number":
            return self.f(0)
        if self.kind == "onehot":
            return Lin({(self.name, i): float(i) for i in range(self.size)})
        hi = self.size if hi is None else hi
        return Lin({(self.name, i): float(1 << (i - lo)) for i in range(lo, hi)})

    def feature_range(self) -> tuple[float, float]:
        if self.kind == "number":
            return (float(self.lo), float(self.hi))
        return (0.0, 1.0)

    # -- values ----------------------------------------------------------------------------------

    def encode(self, value: int) -> list[float]:
        """The ideal feature values holding `value`."""
        if self.kind == "bits":
            v = int(value)
            if v < 0 or v >> self.size:
                raise ValueError(f"{self.name}: {value} does not fit in {self.size} bits")
            return [float((v >> i) & 1) for i in range(self.size)]
        if self.kind == "onehot":
            if not 0 <= value < self.size:
                raise ValueError(f"{self.name}: {value} out of range for onehot({self.size})")
            out = [0.0] * self.size
            out[int(value)] = 1.0
            return out
        if not self.lo <= value <= self.hi:
            raise ValueError(f"{self.name}: {value} outside [{self.lo}, {self.hi}]")
        return [float(value)]

    def decode(self, feats) -> tuple[int, float]:
        """(value, margin) from (approximate) feature values; margin = distance to ambiguity."""
        feats = [float(x) for x in feats]
        if self.kind == "bits":
            v = 0
            margin = 0.5
            for i, x in enumerate(feats):
                b = 1 if x > 0.5 else 0
                v |= b << i
                margin = min(margin, abs(x - 0.5))
            return v, margin
        if self.kind == "onehot":
            idx = max(range(self.size), key=lambda i: feats[i])
            others = [x for i, x in enumerate(feats) if i != idx]
            margin = min(feats[idx] - 0.5, 0.5 - max(others, default=0.0))
            return idx, margin
        x = feats[0]
        r = int(round(x))
        return r, 0.5 - abs(x - r)

    def __repr__(self) -> str:
        return f"Var({self.name}, {self.kind}[{self.size}])"


# ---------------------------------------------------------------------------------------------
# neurons (one SwiGLU hidden unit) and nodes


@dataclass
class Neuron:
    """out += silu(gate) * up, added to residual features with coefficients `down`.

    `ideal` says what the neuron is meant to compute, for the reference evaluator:
    ("linear", form), ("step", form, t) (the first neuron of a pair carries the pair's ideal
    [form >= t]; the second ("none",)), ("gated", cond, value), ("product", a, b) (first of a
    pair), or ("none",). `shape` names the gadget shape it belongs to ("linear", "step",
    "gated", "product"; "" for a hand-made neuron), for the margin report."""
    gate: Lin
    up: Lin
    down: dict                     # feature -> coefficient
    ideal: tuple = ("none",)
    shape: str = ""

    def ideal_value(self, feats: dict) -> float:
        k = self.ideal[0]
        if k == "linear":
            return self.ideal[1].evaluate(feats)
        if k == "step":
            return 1.0 if self.ideal[1].evaluate(feats) >= self.ideal[2] - 1e-9 else 0.0
        if k == "gated":
            c = self.ideal[1].evaluate(feats)
            if c > 1 + 1e-6:
                raise CompileError(f"a gated neuron's condition reached {c} (> 1): the gate would scale its value")
            c = 1.0 if c > 1 - 1e-6 else 0.0        # conditions <= 0 switch the neuron off
            return c * self.ideal[2].evaluate(feats)
        if k == "product":
            return self.ideal[1].evaluate(feats) * self.ideal[2].evaluate(feats)
        return 0.0


class Node:
    """A graph node: computes its output variables from input variables at one sublayer kind.

    `kind` is "mlp" (one SwiGLU level), "gdn" or "attn" (a token mixer). `evaluate(env, state)`
    computes the outputs' discrete values for one token (state persists across tokens).
    """
    kind = "mlp"
    #: the gadget this node belongs to (add, lut, memory, ...), for the margin report; None =
    #: a hand-made circuit
    primitive: str | None = None

    def __init__(self, name: str, inputs: list[Var], outputs: list[Var], about: str = ""):
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.about = about
        for v in outputs:
            if v.producer is not None:
                raise CompileError(f"variable {v.name} is written twice ({v.producer.name}, {name})")
            v.producer = self
        self.layer: int | None = None      # assigned by the scheduler
        self.min_layer = 0
        self.late = False                  # mixer nodes: place just before the first reader

    def evaluate(self, env: dict, state: dict):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class MLPNode(Node):
    """One MLP level: a set of neurons, with a reference function giving the intended values."""
    kind = "mlp"

    def __init__(self, name, inputs, outputs, neurons: list[Neuron], fn: Callable, about: str = "",
                 checks: list | None = None, args: list | None = None):
        super().__init__(name, inputs, outputs, about)
        self.neurons = neurons
        self.fn = fn
        self.args = args if args is not None else inputs   # what fn takes (views allowed)
        self.checks = checks or []      # (description, Lin, tolerance): precision-sensitive forms

    def evaluate(self, env, state):
        if self.fn is None:
            return self._evaluate_ideal(env)
        vals = self.fn(*[evaluate_view(v, env) for v in self.args])
        if len(self.outputs) == 1:
            vals = (vals,)
        for v, x in zip(self.outputs, vals):
            env[v.name] = int(x)


    def _evaluate_ideal(self, env):
        """Outputs from the neurons' ideal semantics (for circuits without a hand-written
        reference): every input feature at its ideal value, every neuron at its ideal output."""
        feats = {}
        for v in self.inputs:
            for i, x in enumerate(v.encode(env[v.name])):
                feats[(v.name, i)] = x
        acc = {}
        for nr in self.neurons:
            if nr.ideal[0] == "pairstep":
                _, form, t, out = nr.ideal
                if form.evaluate(feats) >= t - 1e-9:
                    for f, c in out.items():
                        acc[f] = acc.get(f, 0.0) + c
                continue
            y = nr.ideal_value(feats)
            if y:
                for f, c in nr.down.items():
                    acc[f] = acc.get(f, 0.0) + c * y
        for v in self.outputs:
            vals = [acc.get((v.name, i), 0.0) for i in range(v.size)]
            env[v.name], margin = v.decode(vals)
            if margin < 0.49:
                raise CompileError(f"{self.name}: {v.name} is not a clean code ({vals})")


class EmbedNode(Node):
    """Variables set by the token embedding (the program's inputs)."""
    kind = "embed"

    def evaluate(self, env, state):
        tok = env["@token"]
        for v in self.outputs:
            env[v.name] = tok.values.get(v.name, 0)


# ---------------------------------------------------------------------------------------------
# tokens


@dataclass
class Token:
    """A vocabulary entry: its string and the input-variable values its embedding carries."""
    id: int
    text: str
    values: dict = field(default_factory=dict)


@dataclass
class OutputRule:
    """Token `token` is emitted when every (var, value) condition holds (and scores win)."""
    token: Token
    conditions: list           # [(Var, int)]


class View(Var):
    """A variable whose features are linear forms of other variables' features."""

    def __init__(self, name: str, kind: str, forms: list[Lin], fn: Callable, sources: list[Var],
                 lo: int = 0, hi: int = 1):
        super().__init__(name, kind, len(forms), lo, hi)
        self.forms = forms
        self.fn = fn
        self.sources = sources

    def f(self, i: int = 0) -> Lin:
        return self.forms[i]


def evaluate_view(v: Var, env: dict):
    """Value of a (possibly view) variable in an environment of residual values."""
    if isinstance(v, View):
        return v.fn(*[evaluate_view(s, env) for s in v.sources])
    return env[v.name]
