"""Soft floating point: PTX float instructions as straight-line sequences of 32-bit micro-ops.

Every routine takes an `Emitter` (`qwengpu.machine.emit`) and operand `Src`s -- 32-bit words; an
f64 value is a (lo, hi) pair, an f16 value the low 16 bits of a word -- and returns result `Src`s.
The sequences are branch-free (SEL instead of branches) and bit-exact with the reference
semantics in `qwengpu.interp.floats` for every input: NaNs (f32 results use the canonical NaN
0x7FFFFFFF), infinities, signed zeros, subnormals, overflow, ties, every rounding mode, .ftz and
.sat. docs/softfloat.md has the algorithms, the correctness arguments and the micro-op counts
(`COST`).

Routines are built with a small builder (`_B`) that folds constants, drops identities, shares
common subexpressions and removes dead micro-ops before anything reaches the emitter, so the
mode-generic code below costs only what a mode really needs.
"""
from __future__ import annotations

from .isa import ALU_OPS, M32, Imm, Src, alu_eval, src

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


# =============================================================================================
# the builder

_COMMUTATIVE = {"ADD", "AND", "OR", "XOR", "MUL", "MULHU", "MULHS", "EQ"}


class V:
    """A 32-bit value under construction: node `n` of builder `b`, optionally bit-inverted."""
    __slots__ = ("b", "n", "inv")

    def __init__(self, b, n, inv=False):
        self.b, self.n, self.inv = b, n, inv

    def key(self):
        return (self.n, self.inv)

    def __invert__(self):
        return V(self.b, self.n, not self.inv)

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

    def __repr__(self):
        return ("~" if self.inv else "") + f"n{self.n}"


def _inv(x):
    return (x ^ M32) if isinstance(x, int) else ~x


class _B:
    """Builds one routine: constant folding, identities, CSE, dead-code removal."""

    def __init__(self):
        self.nodes = []          # [op, a, b, c, cin, sets_flag] or ["IN", Src]
        self.cse = {}

    # -- inputs / outputs ------------------------------------------------------------------
    def inp(self, s):
        s = src(s)
        if isinstance(s.value, Imm):
            v = s.value.value
            return (v ^ M32) if s.inv else v
        self.nodes.append(["IN", s])
        return V(self, len(self.nodes) - 1)

    def emit(self, em, outs):
        """Emit the live ops through `em.alu`; returns the outputs as Srcs."""
        live = set()
        n = len(self.nodes)
        for o in outs:
            if isinstance(o, V):
                live.add(o.n)
        for i in range(n - 1, -1, -1):
            node = self.nodes[i]
            if i not in live or node[0] == "IN":
                continue
            for x in node[1:4]:
                if isinstance(x, V):
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
            if sf and not (i + 1 < n and i + 1 in live and self.nodes[i + 1][4] == "flag"):
                sf = False
            args = [None if x is None else self._src(x, mapped) for x in (a, b, c)]
            mapped[i] = em.alu(op, args[0], args[1], args[2], cin=cin, sets_flag=sf)
        return tuple(self._src(o, mapped) for o in outs)

    @staticmethod
    def _src(x, mapped):
        if isinstance(x, int):
            return src(x & M32)
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
                return r
        if cin == "flag":
            prev = self.nodes[-1] if self.nodes else None
            assert prev is not None and prev[5], "a flag consumer must follow its producer"
        if op in _COMMUTATIVE and not (isinstance(a, int) and isinstance(b, int)):
            ka, kb = self._k(a), self._k(b)
            if ka > kb:
                a, b = b, a
        key = (op, self._k(a), self._k(b), self._k(c), cin)
        if cin != "flag" and not sets_flag and key in self.cse:
            return self.cse[key]
        self.nodes.append([op, a, b, c, cin, sets_flag])
        v = V(self, len(self.nodes) - 1)
        if cin != "flag" and not sets_flag:
            self.cse[key] = v
        return v

    @staticmethod
    def _k(x):
        if x is None:
            return (0,)
        if isinstance(x, int):
            return (1, x)
        return (2, x.n, x.inv)

    def _simplify(self, op, a, b, c, cin):
        ints = [x for x in (a, b, c) if x is not None]
        nsrc = ALU_OPS[op]
        if all(isinstance(x, int) for x in ints[:nsrc]):
            return alu_eval(op, a or 0, b or 0, c or 0, int(cin))[0]
        same = isinstance(a, V) and isinstance(b, V) and a.n == b.n
        comp = same and a.inv != b.inv
        same = same and a.inv == b.inv
        if op == "AND":
            if a == 0 or b == 0 or comp:
                return 0
            if a == M32:
                return b
            if b == M32 or same:
                return a
        elif op == "OR":
            if a == M32 or b == M32 or comp:
                return M32
            if a == 0:
                return b
            if b == 0 or same:
                return a
        elif op == "XOR":
            if same:
                return 0
            if comp:
                return M32
            if a == 0:
                return b
            if b == 0:
                return a
            if a == M32:
                return ~b
            if b == M32:
                return ~a
            if isinstance(a, V) and a.inv:
                return ~self.op("XOR", ~a, b)
            if isinstance(b, V) and b.inv:
                return ~self.op("XOR", a, ~b)
        elif op == "ADD":
            if cin == "0":
                if a == 0:
                    return b
                if b == 0:
                    return a
                if comp:
                    return M32
            else:
                if a == M32:
                    return b
                if b == M32:
                    return a
                if comp:
                    return 0
        elif op in ("SHL", "SHR"):
            if b == 0:
                return a
            if a == 0 or (isinstance(b, int) and b >= 32):
                return 0
        elif op == "SAR":
            if b == 0:
                return a
            if isinstance(b, int) and b > 31:
                return self.op("SAR", a, 31)
        elif op == "SEL":
            if isinstance(c, int):
                return a if c else b
            if isinstance(a, int) and isinstance(b, int) and a == b:
                return a
            if isinstance(a, V) and isinstance(b, V) and a.key() == b.key():
                return a
            if a == 1 and b == 0 and isinstance(c, V) and self.is01(c):
                return c
        elif op == "EQ":
            if same:
                return 1
            if comp:
                return 0
        elif op == "LTU":
            if b == 0 or same:
                return 0
            if a == M32:
                return 0
        elif op == "LEU":
            if a == 0 or b == M32 or same:
                return 1
        elif op in ("LT", "LE") and same:
            return int(op == "LE")
        elif op == "MUL":
            if a == 0 or b == 0:
                return 0
            if a == 1:
                return b
            if b == 1:
                return a
        elif op in ("MULHU",):
            if a in (0, 1) or b in (0, 1):
                return 0
        elif op == "MOV":
            return a
        return None

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

    def sel(self, c, a, b):
        """c != 0 ? a : b."""
        return self.op("SEL", a, b, c)

    def sar(self, a, k):
        return self.op("SAR", a, k)

    def eq(self, a, b):
        return self.op("EQ", a, b)

    def ltu(self, a, b):
        return self.op("LTU", a, b)

    def leu(self, a, b):
        return self.op("LEU", a, b)

    def lt(self, a, b):
        return self.op("LT", a, b)

    def le(self, a, b):
        return self.op("LE", a, b)

    def mul(self, a, b):
        return self.op("MUL", a, b)

    def mulhu(self, a, b):
        return self.op("MULHU", a, b)

    def clz(self, a):
        return self.op("CLZ", a)

    def not01(self, a):
        """1 - a for a 0/1 value."""
        return self.op("XOR", a, 1)

    def flag_add(self, a, b, cin="0"):
        """An ADD that sets the carry flag for the next op (`add_cin`)."""
        return self.op("ADD", a, b, cin=cin, sets_flag=True)

    def add_cin(self, a, b):
        """a + b + the carry flag of the op just built (must follow `flag_add`)."""
        return self.op("ADD", a, b, cin="flag")

    def add64(self, a, b):
        lo = self.op("ADD", a[0], b[0], sets_flag=True)
        hi = self.op("ADD", a[1], b[1], cin="flag")
        return lo, hi

    def sub64(self, a, b):
        lo = self.op("ADD", a[0], _inv(b[0]), cin="1", sets_flag=True)
        hi = self.op("ADD", a[1], _inv(b[1]), cin="flag")
        return lo, hi


def _run(em, build, *srcs):
    """Build a routine: `build(b, *inputs)` returns a value or a tuple of values."""
    b = _B()
    ins = [b.inp(s) for s in srcs]
    out = build(b, *ins)
    if not isinstance(out, tuple):
        return b.emit(em, (out,))[0]
    return b.emit(em, out)
