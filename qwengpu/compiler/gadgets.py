"""MLP gadgets: exact computations on bit, one-hot and number codes, one SwiGLU level per node.

Four neuron shapes do all the work (each exact up to e^-32-sized terms):

- `linear(form)`: silu(32)*form/32 - writes a linear form (silu(32) == 32 in fp32).
- `step(form, t)`: two neurons, silu(A(f-t+1/2)+C) - silu(A(f-t+1/2)-C) = 2C*[f >= t] for an
  integer-valued form f known to within +-0.1 (A=120, C=16: both arguments >= 32 past the
  threshold, <= -32 before it).
- `gated(cond, value)`: silu(64*cond-32)*value/32 = cond*value for a clean 0/1 condition.
- `product(a, b)`: silu(a+K)*b - silu(K)*b = a*b, for a >= 17-K (the SiLU's exactly-linear range).

Thresholds are only ever taken of small integer forms (|f| <= 2^12 by construction, checked) so
that fp32 rounding of the form stays far inside the +-0.1 tolerance.
"""
from __future__ import annotations

from .core import ANCHOR_FEATURE, CompileError, Lin, Neuron, Var
from .program import Program, View

LIN_K = 32.0
STEP_A = 120.0
STEP_C = 16.0
GATE_B = 64.0
PROD_K = 64.0
#: largest |form| a threshold may see (keeps fp32 rounding error << the 0.1 tolerance)
STEP_LIMIT = 2.0 ** 12


def form_bound(prog: Program, form: Lin) -> float:
    """The largest |form| over its variables' ranges (bits and one-hots in [0, 1])."""
    ranges = {}
    for (name, i) in form.terms:
        if name == ANCHOR_FEATURE[0]:
            continue
        v = prog.vars.get(name)
        ranges[(name, i)] = v.feature_range() if v is not None else (0.0, 1.0)
    return form.bound(ranges)


# ---------------------------------------------------------------------------------------------
# neuron shapes


def n_linear(form: Lin, out: dict) -> list[Neuron]:
    return [Neuron(Lin.const(LIN_K), form / LIN_K, dict(out), ("linear", form), "linear")]


def n_step(form: Lin, t: float, out: dict, prog: Program | None = None) -> list[Neuron]:
    """Adds coef*[form >= t] to each (feature: coef) of `out`."""
    if prog is not None:
        b = form_bound(prog, form) + abs(t)
        if b > STEP_LIMIT:
            raise CompileError(f"threshold on a form of magnitude up to {b:g} (> {STEP_LIMIT:g}): "
                               "split it into smaller digits")
    arg = STEP_A * (form - (t - 0.5))
    up = Lin.const(1.0)
    scale = 1.0 / (2 * STEP_C)
    n1 = Neuron(arg + STEP_C, up, {k: c * scale for k, c in out.items()}, shape="step")
    n2 = Neuron(arg - STEP_C, up, {k: -c * scale for k, c in out.items()}, shape="step")
    # ideal: the pair gives coef*[form >= t]; carried by the first neuron with unit coefficients
    n1.ideal = ("pairstep", form, t, dict(out))
    return [n1, n2]


def n_gated(cond: Lin, value: Lin, out: dict) -> list[Neuron]:
    """Adds coef*cond*value (cond a clean 0/1 form; a form <= 0 also switches it off)."""
    return [Neuron(GATE_B * cond - GATE_B / 2, value / (GATE_B / 2), dict(out), ("gated", cond, value), "gated")]


def n_product(a: Lin, b: Lin, out: dict, a_min: float = 0.0) -> list[Neuron]:
    """Adds coef*a*b (exact while a + K stays in SiLU's linear range)."""
    k = max(PROD_K, 32.0 - a_min)
    return [Neuron(a + k, b, dict(out), ("product", a, b), "product"),
            Neuron(Lin.const(k), -1 * b, dict(out), shape="product")]


# ---------------------------------------------------------------------------------------------
# small helpers


def _bits_out(v: Var, i: int, c: float = 1.0) -> dict:
    return {v.feature(i): c}


def materialize(prog: Program, v: Var, name: str | None = None) -> Var:
    """A residual copy of a (view) variable."""
    out = prog.var(name or prog.fresh(f"{v.name}.m"), v.kind, v.size, v.lo, v.hi)
    neurons = []
    for i in range(v.size):
        neurons += n_linear(v.f(i), _bits_out(out, i))
    prog.mlp(prog.fresh("copy"), [v], [out], neurons, lambda x: x, about=f"copy {v.name}", primitive="copy")
    return out


def const_var(prog: Program, value: int, n: int, name: str | None = None) -> View:
    return prog.const_bits(value, n, name)


# ---------------------------------------------------------------------------------------------
# boolean and code conversions (one level)


def bitwise(prog: Program, op: str, a: Var, b: Var, name: str | None = None) -> Var:
    """and / or / xor / andn (a & ~b) of two bits variables of equal width."""
    if a.size != b.size:
        raise CompileError(f"bitwise {op}: widths {a.size} and {b.size} differ")
    n = a.size
    out = prog.bits_var(name or prog.fresh(op), n)
    neurons = []
    for i in range(n):
        s = a.f(i) + b.f(i)
        if op == "and":
            neurons += n_step(s, 2, _bits_out(out, i))
        elif op == "or":
            neurons += n_step(s, 1, _bits_out(out, i))
        elif op == "xor":       # a + b - 2*[a+b >= 2]
            neurons += n_linear(s, _bits_out(out, i))
            neurons += n_step(s, 2, _bits_out(out, i, -2.0))
        elif op == "andn":
            neurons += n_step(a.f(i) - b.f(i), 1, _bits_out(out, i))
        else:
            raise CompileError(f"unknown bitwise op {op}")
    fns = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
           "andn": lambda x, y: x & ~y & ((1 << n) - 1)}
    prog.mlp(prog.fresh(op), [a, b], [out], neurons, fns[op], about=f"{op} of {n} bits", primitive="bitwise")
    return out


def threshold(prog: Program, form: Lin, t: float, args: list[Var], fn, name: str | None = None) -> Var:
    """A bit: [form >= t] for an integer-valued form over `args` (fn: the reference)."""
    out = prog.bits_var(name or prog.fresh("thr"), 1)
    prog.mlp(prog.fresh("thr"), args, [out], n_step(form, t, _bits_out(out, 0), prog), fn,
             primitive="compare")
    return out


def compare(prog: Program, a: Var, b: Var, name: str | None = None) -> Var:
    """A bit: [a >= b] (unsigned) in one level, for bits variables of up to 11 bits (the form
    a - b stays within the step's limit; wider operands: `sub(..., carry_out=True)`)."""
    if a.size > 11 or b.size > 11:
        raise CompileError("compare: operands wider than 11 bits need sub(..., carry_out=True)")
    return threshold(prog, _value(a) - _value(b), 0, [a, b], lambda x, y: int(x >= y), name)


def _value(v: Var) -> Lin:
    """The numeric value of a bits or number variable (views included) as a linear form."""
    if v.kind == "number":
        return v.f(0)
    if v.kind != "bits":
        raise CompileError(f"{v.name}: a number or bits variable is needed")
    out = Lin()
    for i in range(v.size):
        out = out + float(1 << i) * v.f(i)
    return out


def multiply(prog: Program, a: Var, b: Var, name: str | None = None) -> Var:
    """a * b as a number, one `product` neuron pair (a, b: bits variables of up to 8 bits, or
    numbers; |a * b| <= 2^16): the product shape is exact while a + K stays in SiLU's linear
    range, which K = 64 - min(a) guarantees."""
    def rng(v):
        return (v.lo, v.hi) if v.kind == "number" else (0, (1 << v.size) - 1)
    (alo, ahi), (blo, bhi) = rng(a), rng(b)
    ends = [x * y for x in (alo, ahi) for y in (blo, bhi)]
    if max(abs(e) for e in ends) > 1 << 16:
        raise CompileError("multiply: the product may exceed 2^16")
    out = prog.number_var(name or prog.fresh("mul"), min(ends), max(ends))
    neurons = n_product(_value(a), _value(b), {out.feature(0): 1.0}, a_min=float(alo))
    prog.mlp(prog.fresh("mul"), [a, b], [out], neurons, lambda x, y: int(x) * int(y),
             about="product", primitive="multiply")
    return out


def decode(prog: Program, v: Var, values: int | None = None, name: str | None = None) -> Var:
    """bits -> onehot(2^n) (or onehot(values) when the value is known to be < values)."""
    n = v.size
    count = values or (1 << n)
    out = prog.onehot_var(name or prog.fresh(f"dec({v.name})"), count)
    neurons = []
    for m in range(count):
        match = Lin()
        for i in range(n):
            match = match + (v.f(i) if (m >> i) & 1 else 1 - v.f(i))
        neurons += n_step(match, n, _bits_out(out, m), prog)
    prog.mlp(prog.fresh("decode"), [v], [out], neurons, lambda x: int(x), about=f"decode {n} bits",
             primitive="decode")
    return out


def lut(prog: Program, key: Var, table: list[int], out_bits: int, name: str | None = None,
        primitive: str = "lut") -> Var:
    """out = table[key] for a onehot key (linear: one neuron per output bit)."""
    if key.kind != "onehot" or len(table) != key.size:
        raise CompileError("lut needs a onehot key and one table entry per value")
    out = prog.bits_var(name or prog.fresh("lut"), out_bits)
    neurons = []
    for j in range(out_bits):
        form = Lin({key.feature(m): 1.0 for m in range(key.size) if (table[m] >> j) & 1})
        if form.terms:
            neurons += n_linear(form, _bits_out(out, j))
    prog.mlp(prog.fresh("lut"), [key], [out], neurons, lambda k: table[int(k)], about="table lookup",
             primitive=primitive)
    return out


def encode(prog: Program, key: Var, bits: int | None = None, name: str | None = None) -> Var:
    """onehot -> bits."""
    n = bits or max(1, (key.size - 1).bit_length())
    return lut(prog, key, list(range(key.size)), n, name, primitive="encode")


def mux(prog: Program, sel: Var, options: list[Var], name: str | None = None) -> Var:
    """options[sel] for a onehot selector (or a 1-bit selector with two options)."""
    if sel.kind == "bits" and sel.size == 1:
        conds = [1 - sel.f(0), sel.f(0)]
    elif sel.kind == "onehot":
        conds = [sel.f(i) for i in range(sel.size)]
    else:
        raise CompileError("mux needs a onehot or 1-bit selector")
    if len(options) != len(conds):
        raise CompileError(f"mux: {len(conds)} selector values, {len(options)} options")
    width = options[0].size
    kind = options[0].kind
    out = prog.var(name or prog.fresh("mux"), kind, width)
    neurons = []
    for c, opt in zip(conds, options):
        for i in range(width):
            f = opt.f(i)
            if f.terms:
                neurons += n_gated(c, f, _bits_out(out, i))
    prog.mlp(prog.fresh("mux"), [sel] + list(options), [out], neurons,
             lambda s, *opts: opts[int(s)], about=f"{len(options)}-way select", primitive="mux")
    return out


# ---------------------------------------------------------------------------------------------
# addition (two levels): byte-wise generate/propagate digits, then base-3 carry lookahead


def add(prog: Program, a: Var, b: Var, cin: Var | int = 0, name: str | None = None,
        carry_out: bool = False, invert_b: bool = False, primitive: str = "add"):
    """(a + b + cin) mod 2^n, optionally with the carry out: two MLP levels.

    Level 1 computes, for every bit position k, the in-byte digit of the carry into k:
    G = [partial sum >= 2^j] (generate) and P = [partial sum >= 2^j - 1] (propagate or
    generate), plus the same for whole bytes. Level 2 finds each carry as one threshold over the
    base-3 number of digits (2 = generate, 1 = propagate, 0 = kill): the carry is set iff the most
    significant non-propagate digit generates. Sum bits are then linear: a + b + c_k - 2 c_(k+1).
    `invert_b` adds ~b instead of b (for subtraction).
    """
    n = a.size
    af = [a.f(i) for i in range(n)]
    bf = [(1 - b.f(i)) if invert_b else b.f(i) for i in range(b.size)]
    if len(bf) != n:
        raise CompileError(f"add: widths {n} and {len(bf)} differ")
    cin_form = Lin.const(float(cin)) if isinstance(cin, int) else cin.f(0)
    cin_args = [] if isinstance(cin, int) else [cin]
    base = name or prog.fresh("add")
    # level 1: digits for every position 1..n (position k = carry into bit k)
    dig = prog.bits_var(f"{base}.gp", 2 * n)
    neurons = []
    for k in range(1, n + 1):
        j = k - 8 * ((k - 1) // 8)       # bits of the current byte below k (1..8)
        lo = 8 * ((k - 1) // 8)
        s = Lin()
        for m in range(lo, k):
            s = s + (1 << (m - lo)) * (af[m] + bf[m])
        neurons += n_step(s, 1 << j, _bits_out(dig, 2 * (k - 1)), prog)           # G
        neurons += n_step(s, (1 << j) - 1, _bits_out(dig, 2 * (k - 1) + 1), prog)  # P
    mask = (1 << n) - 1

    def ref_digits(x, y, *rest):
        yv = _b_value(y, invert_b, n)
        out = 0
        for k in range(1, n + 1):
            lo = 8 * ((k - 1) // 8)
            j = k - lo
            s = ((x >> lo) & ((1 << j) - 1)) + ((yv >> lo) & ((1 << j) - 1))
            out |= int(s >= (1 << j)) << (2 * (k - 1))
            out |= int(s >= (1 << j) - 1) << (2 * (k - 1) + 1)
        return out
    prog.mlp(f"{base}.L1", [a, b], [dig], neurons, ref_digits, about="adder digits", primitive=primitive)

    # level 2: carries by base-3 lookahead, then sum bits
    out = prog.bits_var(f"{base}.sum", n)
    cout = prog.bits_var(f"{base}.cout", 1) if carry_out else None

    def digit(k: int) -> Lin:       # 2G + E = G + P for position k
        return dig.f(2 * (k - 1)) + dig.f(2 * (k - 1) + 1)

    def carry_form(k: int) -> tuple[Lin, float]:
        # base-3 digits from least significant: cin (0 or 2), whole bytes below bit k's byte,
        # then the in-byte digit of the bits of that byte below k
        q = (k - 1) // 8
        terms = [2 * cin_form] + [digit(8 * (bb + 1)) for bb in range(q)] + [digit(k)]
        z = Lin()
        for t, form in enumerate(terms):
            z = z + (3 ** t) * form
        return z, (3 ** len(terms) + 1) / 2

    neurons = []
    carries = {}
    for k in range(1, n + 1):
        z, t = carry_form(k)
        carries[k] = (z, t)
    for k in range(n):
        neurons += n_linear(af[k] + bf[k], _bits_out(out, k))
        if k == 0:
            neurons += n_linear(cin_form, _bits_out(out, 0)) if cin_form.terms else []
        else:
            z, t = carries[k]
            neurons += n_step(z, t, _bits_out(out, k), prog)
        z, t = carries[k + 1]
        neurons += n_step(z, t, _bits_out(out, k, -2.0), prog)
    if cout is not None:
        z, t = carries[n]
        neurons += n_step(z, t, _bits_out(cout, 0), prog)

    def ref_sum(x, y, digits, *c):
        cv = int(c[0]) if c else int(cin)
        total = x + _b_value(y, invert_b, n) + cv
        return (total & mask, total >> n) if carry_out else total & mask
    prog.mlp(f"{base}.L2", [a, b, dig] + cin_args, [out] + ([cout] if cout else []), neurons, ref_sum,
             about="adder carries and sum", primitive=primitive)
    return (out, cout) if carry_out else out


def _b_value(y: int, invert: bool, n: int) -> int:
    """The value the adder's second operand really has (b itself, or its complement)."""
    return (~int(y)) & ((1 << n) - 1) if invert else int(y)


def sub(prog: Program, a: Var, b: Var, name: str | None = None, carry_out: bool = False):
    """(a - b) mod 2^n as a + ~b + 1; the carry out is 1 when a >= b (unsigned)."""
    return add(prog, a, b, cin=1, name=name, carry_out=carry_out, invert_b=True, primitive="sub")
