"""`Program`: the graph builder every circuit is written against.

    prog = Program("alu")
    a = prog.input_bits("a", 8); b = prog.input_bits("b", 8)
    prog.token("x", a=3, b=4)                 # vocabulary entries set input values
    s = gadgets.add(prog, a, b)               # gadgets add nodes and return new variables
    prog.emit_when("sum_is_7", [(s, 7)])      # output rules: which token the model emits

Variables are SSA: each is written by exactly one node. A *view* is a variable with no residual
features of its own: its features are linear forms of other variables' features (bit slices,
constant shifts, complements), so it costs nothing.
"""
from __future__ import annotations

from typing import Callable

from .core import CompileError, EmbedNode, Lin, MLPNode, Neuron, Node, OutputRule, Token, Var, View, evaluate_view


class Program:
    def __init__(self, name: str = "program"):
        self.name = name
        self.vars: dict[str, Var] = {}
        self.nodes: list[Node] = []
        self.tokens: list[Token] = []
        self.token_by_text: dict[str, Token] = {}
        self.rules: list[OutputRule] = []
        self.embed = EmbedNode("embed", [], [])
        self.nodes.append(self.embed)
        self.memories = []
        self._counter = 0

    # -- names ---------------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        self._counter += 1
        name = f"{base}#{self._counter}"
        return name

    def _register(self, v: Var) -> Var:
        if v.name in self.vars:
            raise CompileError(f"duplicate variable name {v.name}")
        self.vars[v.name] = v
        return v

    def var(self, name: str, kind: str, size: int, lo: int = 0, hi: int = 1) -> Var:
        """A new (unwritten) variable."""
        return self._register(Var(name, kind, size, lo, hi))

    def bits_var(self, name: str, n: int) -> Var:
        return self.var(name, "bits", n)

    def onehot_var(self, name: str, n: int) -> Var:
        return self.var(name, "onehot", n)

    def number_var(self, name: str, lo: int, hi: int) -> Var:
        return self.var(name, "number", 1, lo, hi)

    # -- inputs and vocabulary ---------------------------------------------------------------------

    def _input(self, v: Var) -> Var:
        v.producer = self.embed
        self.embed.outputs.append(v)
        return v

    def input_bits(self, name: str, n: int) -> Var:
        return self._input(self.bits_var(name, n))

    def input_onehot(self, name: str, n: int) -> Var:
        return self._input(self.onehot_var(name, n))

    def input_number(self, name: str, lo: int, hi: int) -> Var:
        return self._input(self.number_var(name, lo, hi))

    def token(self, text: str, **values) -> Token:
        """Add a vocabulary entry whose embedding sets the given input variables (others: 0)."""
        if text in self.token_by_text:
            raise CompileError(f"duplicate token {text!r}")
        for k, v in values.items():
            var = self.vars.get(k)
            if var is None or var.producer is not self.embed:
                raise CompileError(f"token {text!r} sets {k}, which is not an input variable")
            var.encode(v)        # range check
        t = Token(len(self.tokens), text, dict(values))
        self.tokens.append(t)
        self.token_by_text[text] = t
        return t

    def emit_when(self, token: Token | str, conditions: list):
        """The model emits `token` when all (var, value[, weight]) conditions hold. Rules must be
        exclusive; a weight scales a condition's share of the logit (default 1)."""
        if isinstance(token, str):
            token = self.token_by_text[token]
        conds = []
        for c in conditions:
            v, val = c[0], c[1]
            v.encode(val)
            conds.append((v, val, c[2] if len(c) > 2 else 1.0))
        self.rules.append(OutputRule(token, conds))

    # -- nodes ---------------------------------------------------------------------------------------

    def add_node(self, node: Node) -> Node:
        for v in node.inputs:
            if v.name not in self.vars:
                raise CompileError(f"{node.name}: input {v.name} does not belong to this program")
        self.nodes.append(node)
        return node

    def mlp(self, name: str, inputs: list[Var], outputs: list[Var], neurons: list[Neuron],
            fn: Callable, about: str = "", checks=None, primitive: str | None = None) -> MLPNode:
        real_inputs = []
        for v in inputs:
            real_inputs += self.sources(v)
        node = MLPNode(name, _dedup(real_inputs), outputs, neurons, fn, about, checks, args=list(inputs))
        if primitive is not None:
            node.primitive = primitive
        return self.add_node(node)

    def linview(self, name: str, forms: list[Lin], kind: str = "bits") -> View:
        """A view whose bits are linear forms of residual features; its reference value comes
        from evaluating the forms on the sources' ideal features."""
        names = sorted({n for f in forms for n in f.vars()})
        sources = [self.vars[n] for n in names]

        def fn(*vals):
            feats = {}
            for v, x in zip(sources, vals):
                for i, y in enumerate(v.encode(x)):
                    feats[(v.name, i)] = y
            out = 0
            for i, f in enumerate(forms):
                y = f.evaluate(feats)
                if abs(y - round(y)) > 1e-6 or round(y) not in (0, 1):
                    raise CompileError(f"view {name} bit {i} is not a clean bit ({y})")
                out |= int(round(y)) << i
            return out
        return self.view(name, kind, list(forms), fn, sources)

    def circuit(self, name: str, outputs: list[Var], neurons: list[Neuron], about: str = "") -> MLPNode:
        """An MLP level given by its neurons; inputs are the variables its forms read, and the
        reference value of each output comes from the neurons' ideal semantics."""
        seen, inputs = set(), []
        for nr in neurons:
            for form in (nr.gate, nr.up):
                for vname in sorted(form.vars()):
                    if vname not in seen:
                        seen.add(vname)
                        inputs.append(self.vars[vname])
        node = MLPNode(name, inputs, outputs, neurons, None, about)
        return self.add_node(node)

    def output_sources(self) -> set[str]:
        """The residual variables the output rules read (live to the end of the pass)."""
        return {s.name for r in self.rules for c in r.conditions for s in self.sources(c[0])}

    def sources(self, v: Var) -> list[Var]:
        """The residual variables a (possibly view) variable reads."""
        if isinstance(v, View):
            out = []
            for s in v.sources:
                out += self.sources(s)
            return out
        return [v]

    def view(self, name: str, kind: str, forms: list[Lin], fn: Callable, sources: list[Var],
             lo: int = 0, hi: int = 1) -> View:
        return self._register(View(name, kind, forms, fn, sources, lo, hi))

    # -- convenience views ---------------------------------------------------------------------

    def slice(self, v: Var, lo: int, hi: int, name: str | None = None) -> View:
        """Bits lo..hi-1 of a bits variable."""
        if v.kind != "bits":
            raise CompileError("slice needs a bits variable")
        return self.view(name or self.fresh(f"{v.name}[{lo}:{hi}]"), "bits",
                         [v.f(i) for i in range(lo, hi)], lambda x: (x >> lo) & ((1 << (hi - lo)) - 1), [v])

    def concat(self, parts: list[Var], name: str | None = None) -> View:
        """Bits of `parts` in order, least significant first."""
        forms, widths = [], []
        for p in parts:
            if p.kind != "bits":
                raise CompileError("concat needs bits variables")
            forms += [p.f(i) for i in range(p.size)]
            widths.append(p.size)

        def fn(*vals):
            out, sh = 0, 0
            for val, w in zip(vals, widths):
                out |= int(val) << sh
                sh += w
            return out
        return self.view(name or self.fresh("concat"), "bits", forms, fn, list(parts))

    def invert(self, v: Var, name: str | None = None) -> View:
        """Bitwise NOT of a bits variable (1 - bit)."""
        m = (1 << v.size) - 1
        return self.view(name or self.fresh(f"~{v.name}"), "bits", [1 - v.f(i) for i in range(v.size)],
                         lambda x: ~int(x) & m, [v])

    def const_bits(self, value: int, n: int, name: str | None = None) -> View:
        return self.view(name or self.fresh(f"const{value}"), "bits",
                         [Lin.const(float((value >> i) & 1)) for i in range(n)], lambda: value, [])

    def shift_const(self, v: Var, k: int, n: int | None = None, name: str | None = None) -> View:
        """v << k (k may be negative: logical right shift), truncated to n bits (default v's)."""
        n = v.size if n is None else n
        forms = []
        for i in range(n):
            j = i - k
            forms.append(v.f(j) if 0 <= j < v.size else Lin())
        m = (1 << n) - 1
        return self.view(name or self.fresh(f"{v.name}<<{k}"), "bits", forms,
                         lambda x: ((int(x) << k) if k >= 0 else (int(x) >> -k)) & m, [v])

    # -- queries ---------------------------------------------------------------------------------------

    def form_value(self, form: Lin, env: dict) -> float:
        """The value of a linear form in an environment of variable values (`evaluate`'s): each
        feature it reads is its variable's encoded value; the anchor's terms are its constant."""
        vals = {}
        for (name, i) in form.terms:
            if name.startswith("@"):
                continue
            v = self.vars[name]
            vals[(name, i)] = v.encode(evaluate_view(v, env))[i]
        return form.evaluate(vals)

    @property
    def residual_vars(self) -> list[Var]:
        return [v for v in self.vars.values() if not isinstance(v, View)]

    def describe(self) -> str:
        lines = [f"program {self.name}: {len(self.residual_vars)} variables, {len(self.nodes)} nodes, "
                 f"{len(self.tokens)} tokens"]
        for n in self.nodes:
            lines.append(f"  {n.kind:5} L{n.layer} {n.name}: {', '.join(v.name for v in n.inputs)} -> "
                         f"{', '.join(v.name for v in n.outputs)}")
        return "\n".join(lines)


def _dedup(vs: list[Var]) -> list[Var]:
    seen, out = set(), []
    for v in vs:
        if v.name not in seen:
            seen.add(v.name)
            out.append(v)
    return out


def topo_order(prog: Program) -> list[Node]:
    order, state = [], {}

    def visit(n: Node, stack):
        s = state.get(id(n))
        if s == 2:
            return
        if s == 1:
            raise CompileError("dependency cycle through " + " -> ".join(x.name for x in stack + [n]))
        state[id(n)] = 1
        for v in n.inputs:
            if v.producer is None:
                raise CompileError(f"{n.name} reads {v.name}, which nothing writes")
            if v.producer is not n:
                visit(v.producer, stack + [n])
        state[id(n)] = 2
        order.append(n)

    for n in prog.nodes:
        visit(n, [])
    return order
