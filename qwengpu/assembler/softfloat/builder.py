"""The builder soft-float routines are written against (`Builder`, its values `Value`, constants
`Word`), and what every routine shares: the float constants, rounding-mode names, errors.

It folds constants, drops identities (the machine's one table of them, `qwengpu.assembler.simplify`),
shares common subexpressions and removes dead micro-ops before anything reaches the emitter, so
mode-generic code costs only what a mode really needs. Carry-flag pairs stay adjacent and are
never chained.
"""
from __future__ import annotations

from dataclasses import dataclass

from qwengpu.machine.uops import M32, Imm, Src, src
from qwengpu.semantics.approx import BuilderOps

from ..simplify import Operand, Sym, simplify

S31 = 0x80000000
ABS = 0x7FFFFFFF
F32_INF = 0x7F800000
F32_NAN = 0x7FFFFFFF
F32_MAX = 0x7F7FFFFF
F32_ONE = 0x3F800000
F64_NAN_HI = 0xFFF80000          # floats.F64_CANONICAL_NAN = 0xFFF8000000000000

FROUND = ("rn", "rz", "rm", "rp")
IROUND = ("rni", "rzi", "rmi", "rpi")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge",
               "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
TESTP_OPS = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")


class SoftFloatError(ValueError):
    """A type/modifier combination these routines do not implement (or PTX does not allow)."""


# the builder

_COMMUTATIVE = {"ADD", "AND", "OR", "XOR", "MUL", "MULHU", "MULHS", "EQ"}


class Value:
    """A 32-bit value under construction: node `n` of builder `b`, optionally bit-inverted."""
    __slots__ = ("b", "n", "inv")

    def __init__(self, b, n, inv=False):
        self.b, self.n, self.inv = b, n, inv

    def key(self):
        return (self.n, self.inv)

    def __invert__(self):
        return Value(self.b, self.n, not self.inv)

    def __and__(self, o):
        return self.b.op("AND", self, o)

    __rand__ = __and__

    def __or__(self, o):
        return self.b.op("OR", self, o)

    __ror__ = __or__

    def __xor__(self, o):
        return self.b.op("XOR", self, o)

    __rxor__ = __xor__

    def __add__(self, o):
        return self.b.op("ADD", self, o)

    __radd__ = __add__

    def __sub__(self, o):
        return self.b.sub(self, o)

    def __rsub__(self, o):
        return self.b.sub(o, self)

    def __lshift__(self, o):
        return self.b.op("SHL", self, o)

    def __rshift__(self, o):
        return self.b.op("SHR", self, o)

    def __rlshift__(self, o):
        return self.b.op("SHL", o, self)

    def __rrshift__(self, o):
        return self.b.op("SHR", o, self)

    def __repr__(self):
        return ("~" if self.inv else "") + f"n{self.n}"


class Word(int):
    """A 32-bit constant under construction (an immediate operand, or a folded value): Python
    arithmetic on it wraps to 32 bits as the machine's does (`(k << 9) >> 5` keeps only the low
    word), and it combines with a `Value` by building the op."""
    __slots__ = ()

    def __invert__(self):
        return Word(~int(self) & M32)

    def __neg__(self):
        return Word(-int(self) & M32)


def _wrap(f):
    def op(self, o):
        if not isinstance(o, int):
            return NotImplemented
        return Word(f(int(self), int(o) & M32) & M32)
    return op


for _name, _f in {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "rsub": lambda a, b: b - a,
                  "mul": lambda a, b: a * b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
                  "xor": lambda a, b: a ^ b, "lshift": lambda a, b: a << b if b < 32 else 0,
                  "rshift": lambda a, b: a >> b, "rlshift": lambda a, b: b << a if a < 32 else 0,
                  "rrshift": lambda a, b: b >> a}.items():
    setattr(Word, f"__{_name}__", _wrap(_f))
for _name in ("add", "mul", "and", "or", "xor"):
    setattr(Word, f"__r{_name}__", getattr(Word, f"__{_name}__"))


def _inv(x):
    return (x ^ M32) if isinstance(x, int) else ~x


@dataclass(frozen=True)
class UnitOp:
    """A builder node's operation when it is a float-unit micro-op: its name and modifiers."""
    op: str
    mods: tuple


class Builder(BuilderOps):
    """Builds one routine: constant folding, identities, CSE, dead-code removal (its named ALU
    operations, `sel` .. `clz`, are `BuilderOps`', shared with the interpreter's NumPy builder)."""

    def __init__(self):
        self.nodes = []          # [op, a, b, c, cin, sets_flag] or ["IN", Src]
        self.cse = {}

    # -- inputs / outputs ------------------------------------------------------------------
    def inp(self, s):
        s = src(s)
        if isinstance(s.value, Imm):
            v = s.value.value
            return Word((v ^ M32) if s.inv else v)
        self.nodes.append(["IN", s])
        return Value(self, len(self.nodes) - 1)

    def emit(self, em, outs):
        """Emit the live ops through `em.alu`; returns the outputs as Srcs."""
        live = set()
        n = len(self.nodes)
        for o in outs:
            if isinstance(o, Value):
                live.add(o.n)
        for i in range(n - 1, -1, -1):
            node = self.nodes[i]
            if i not in live or node[0] == "IN":
                continue
            for x in node[1:4]:
                if isinstance(x, Value):
                    live.add(x.n)
            if node[4] == "flag":
                live.add(i - 1)
        mapped = {}
        for i, node in enumerate(self.nodes):
            if i not in live:
                continue
            if node[0] == "IN":
                mapped[i] = node[1]
                continue
            op, a, b, c, cin, sf = node
            if isinstance(op, UnitOp):
                args = [None if x is None else self._src(x, mapped) for x in (a, b, c)]
                mapped[i] = em.fpu(op.op, *args, **dict(op.mods))
                continue
            if sf and not (i + 1 < n and i + 1 in live and self.nodes[i + 1][4] == "flag"):
                sf = False
            args = [None if x is None else self._src(x, mapped) for x in (a, b, c)]
            mapped[i] = em.alu(op, args[0], args[1], args[2], cin=cin, sets_flag=sf)
        return tuple(self._src(o, mapped) for o in outs)

    @staticmethod
    def _src(x, mapped):
        if isinstance(x, int):
            return src(int(x) & M32)          # a plain int: Word's wrapping stays in the builder
        s = mapped[x.n]
        return Src(s.value, s.inv ^ x.inv)

    # -- ops -----------------------------------------------------------------------------------
    def op(self, op, a, b=None, c=None, cin="0", sets_flag=False):
        if isinstance(a, int):
            a &= M32
        if isinstance(b, int):
            b &= M32
        if isinstance(c, int):
            c &= M32
        if cin != "flag" and not sets_flag:
            r = self._simplify(op, a, b, c, cin)
            if r is not None:
                return Word(r & M32) if isinstance(r, int) else r
        if cin == "flag":
            prev = self.nodes[-1] if self.nodes else None
            assert prev is not None and prev[5], "a flag consumer must follow its producer"
        if op in _COMMUTATIVE and not (isinstance(a, int) and isinstance(b, int)):
            ka, kb = self._k(a), self._k(b)
            # canonical order (for sharing); an inverted operand goes second (free there)
            if (ka > kb and not (isinstance(b, Value) and b.inv and not (isinstance(a, Value) and a.inv))) \
                    or (isinstance(a, Value) and a.inv and not (isinstance(b, Value) and b.inv)):
                a, b = b, a
        key = (op, self._k(a), self._k(b), self._k(c), cin)
        if cin != "flag" and not sets_flag and key in self.cse:
            return self.cse[key]
        self.nodes.append([op, a, b, c, cin, sets_flag])
        v = Value(self, len(self.nodes) - 1)
        if cin != "flag" and not sets_flag:
            self.cse[key] = v
        return v

    def fpu(self, op, a, b=None, c=None, **mods):
        """A float-unit micro-op (`uops.FPU_OPS`, modifiers as `uops.fpu`): never folded or
        simplified (its semantics are the interpreter's), only shared and, if unused, dropped."""
        unit = UnitOp(op, tuple(sorted((k, v) for k, v in mods.items() if v)))
        args = tuple(x & M32 if isinstance(x, int) else x for x in (a, b, c))
        key = (unit,) + tuple(self._k(x) for x in args)
        if key in self.cse:
            return self.cse[key]
        self.nodes.append([unit, *args, "0", False])
        v = self.cse[key] = Value(self, len(self.nodes) - 1)
        return v

    @staticmethod
    def _k(x):
        if x is None:
            return (0,)
        if isinstance(x, int):
            return (1, x)
        return (2, x.n, x.inv)

    def _simplify(self, op, a, b, c, cin):
        """The algebra's answer (`qwengpu.assembler.simplify`, every identity) as a value of this
        builder, or None."""
        args = {"a": a, "b": b, "c": c}
        sym = (lambda x: x if x is None or isinstance(x, int) else Sym(x.n, x.inv))
        r = simplify(op, sym(a), sym(b), sym(c), cin, full=True,
                     is01=lambda s: self.is01(Value(self, s.key, s.inv)))
        if r is None or isinstance(r, int):
            return r

        def value(x):
            if isinstance(x, Operand):
                return _inv(args[x.name]) if x.inv else args[x.name]
            return x
        if isinstance(r, Operand):
            return value(r)
        out = self.op(r.op, *(value(x) for x in r.args))
        return _inv(out) if r.inv else out

    def is01(self, v):
        if isinstance(v, int):
            return v in (0, 1)
        if v.inv:
            return False
        node = self.nodes[v.n]
        return node[0] in ("EQ", "LTU", "LEU", "LT", "LE") or (
            node[0] in ("AND",) and any(x == 1 for x in node[1:3]))

    # -- conveniences --------------------------------------------------------------------------
    def sub(self, a, b):
        """a - b."""
        if isinstance(b, int):
            return self.op("ADD", a, (-b) & M32)
        return self.op("ADD", a, _inv(b), cin="1")

    def not01(self, a):
        """1 - a for a 0/1 value."""
        return self.op("XOR", a, 1)

    def flag_add(self, a, b, cin="0"):
        """An ADD that sets the carry flag for the next op (`add_cin`)."""
        return self.op("ADD", a, b, cin=cin, sets_flag=True)

    def add_cin(self, a, b):
        """a + b + the carry flag of the op just built (must follow `flag_add`)."""
        return self.op("ADD", a, b, cin="flag")

    def add64(self, a, b, cin="0"):
        """(lo, hi) + (lo, hi) (+ 1 with cin="1"); operands must be built already."""
        lo = self.op("ADD", a[0], b[0], cin=cin, sets_flag=True)
        hi = self.op("ADD", a[1], b[1], cin="flag")
        return lo, hi

    def sub64(self, a, b):
        return self.add64(a, (_inv(b[0]), _inv(b[1])), cin="1")


def routine(em, build, *srcs):
    """Build a routine: `build(b, *inputs)` returns a value or a tuple of values."""
    b = Builder()
    ins = [b.inp(s) for s in srcs]
    out = build(b, *ins)
    if not isinstance(out, tuple):
        return b.emit(em, (out,))[0]
    return b.emit(em, out)
