"""The micro-op algebra, in one place: constant folding and the identities of the ALU ops.

Three clients ask it the same question -- "does `op(a, b, c)` need a micro-op?" -- on their own
operand representations:

- the integer routines (`intcode.folding.emit_op`) on `Src` operands, as they emit;
- the soft-float builder (`softfloat.Builder`) on the values of the routine it builds (which
  tracks bit inversion symbolically and can build a replacement op);
- the optimiser (`optimize`) on whole micro-ops after propagating constants (`fold` only).

Each passes its operands as `int` (a 32-bit constant) or `Sym(key, inv)` (a value, identified by
`key`, possibly bit-inverted) and maps the answer back. `simplify` answers with

    int                              the result is this constant
    Operand("a" | "b" | "c", inv)    the result is that operand (inverted when inv)
    Rebuild(op, args, inv)           the result is another op on the operands (args name them or
                                     are constants; inverted when inv)
    None                             the op is needed

Two rule sets. Every client gets constant folding and the identities of an operand that is 0,
all-ones or equal to the other (`x & 0`, `x | x`, `x << 0`, `SEL` on a constant condition ...).
`full=True` adds what needs a builder or was written with one: complements (`x & ~x`), carry-in
1 (`x + ~0 + 1`), compares of equal or extreme operands, and answers that are an inverted operand
or a rebuilt op (the soft-float builder holds inversion symbolically and legalises it when it
emits). The integer routines keep the first set: their costs (docs/intcode.md) and the code they
give for constant operands are measured with it. Facts about a value the rules cannot see (is it
0/1?) come through `is01`.
"""
from __future__ import annotations

from dataclasses import dataclass

from qwengpu.machine.uops import ALU_OPS, M32, alu_eval


@dataclass(frozen=True)
class Sym:
    """A non-constant operand: `key` identifies the value, `inv` says it is read bit-inverted."""
    key: object
    inv: bool = False


@dataclass(frozen=True)
class Operand:
    name: str                      # "a", "b" or "c"
    inv: bool = False


@dataclass(frozen=True)
class Rebuild:
    op: str
    args: tuple                    # per source: an Operand, an int or None
    inv: bool = False


def fold(op: str, a, b=None, c=None, cin: str = "0") -> int | None:
    """The constant result of `op` when its sources are all constants (`cin` "0"/"1"), else None."""
    if cin not in ("0", "1"):
        return None
    srcs = [x for x in (a, b, c) if x is not None][:ALU_OPS[op]]
    if not all(isinstance(x, int) for x in srcs):
        return None
    return alu_eval(op, int(a or 0) & M32, int(b or 0) & M32, int(c or 0) & M32, int(cin))[0]


@dataclass(frozen=True)
class _Args:
    """The operands of one question, and what the rules ask of them."""
    a: object
    b: object
    c: object
    cin: str
    full: bool
    same: bool                     # a and b are the same value, read the same way
    comp: bool                     # a and b are complements (full rules only)
    inv_a: bool
    inv_b: bool


def simplify(op: str, a, b=None, c=None, cin: str = "0", *, full: bool = False, is01=None):
    """The value of ALU op `op` without a micro-op, when the algebra gives one (see the module
    docstring for the operands and the answers). `cin` "flag" ops are never simplified."""
    if cin == "flag":
        return None
    k = fold(op, a, b, c, cin)
    if k is not None:
        return k
    same = isinstance(a, Sym) and isinstance(b, Sym) and a.key == b.key
    x = _Args(a, b, c, cin, full, same and a.inv == b.inv, full and same and a.inv != b.inv,
              isinstance(a, Sym) and a.inv, isinstance(b, Sym) and b.inv)
    if op == "SEL":
        return _sel(x, is01)
    rule = _RULES.get(op)
    if rule is None or (op in _FULL_ONLY and not full):
        return None
    return rule(x)


A, B = Operand("a"), Operand("b")


def _mov(x: _Args):
    return A


def _and(x: _Args):
    if x.a == 0 or x.b == 0 or x.comp:
        return 0
    if x.a == M32:
        return B
    if x.b == M32 or x.same:
        return A
    return None


def _or(x: _Args):
    if x.a == M32 or x.b == M32 or x.comp:
        return M32
    if x.a == 0:
        return B
    if x.b == 0 or x.same:
        return A
    return None


def _xor(x: _Args):
    if x.same:
        return 0
    if x.comp:
        return M32
    if x.a == 0:
        return B
    if x.b == 0:
        return A
    if x.full:
        if x.a == M32:
            return Operand("b", True)
        if x.b == M32:
            return Operand("a", True)
        if x.inv_a:                                   # ~x ^ y == ~(x ^ y)
            return Rebuild("XOR", (Operand("a", True), B), True)
        if x.inv_b:
            return Rebuild("XOR", (A, Operand("b", True)), True)
    return None


def _add(x: _Args):
    if x.cin == "0":
        if x.a == 0:
            return B
        if x.b == 0:
            return A
        if x.comp:
            return M32
    elif x.full:                                      # carry in 1: x + ~0 + 1 == x
        if x.a == M32:
            return B
        if x.b == M32:
            return A
        if x.comp:
            return 0
    return None


def _shl_shr(x: _Args, op: str):
    if x.b == 0:
        return A
    if x.a == 0 or (isinstance(x.b, int) and x.b >= 32):
        return 0
    if x.full and op == "SHL" and x.inv_a and isinstance(x.b, int):
        # only the second operand is inverted for free on the machine
        return Rebuild("MUL", (A, 1 << x.b))
    return None


def _sar(x: _Args):
    if x.b == 0 or x.a in (0, M32):
        return A
    if x.full:
        if isinstance(x.b, int) and x.b > 31:
            return Rebuild("SAR", (A, 31))
        if x.inv_a:                                   # sar(~x) == ~sar(x)
            return Rebuild("SAR", (Operand("a", True), B), True)
    return None


def _sel(x: _Args, is01):
    if isinstance(x.c, int):
        return A if x.c else B
    if (isinstance(x.a, int) and x.a == x.b) or x.same:
        return A
    if x.a == 1 and x.b == 0 and isinstance(x.c, Sym) and is01 is not None and is01(x.c):
        return Operand("c")
    return None


def _mul(x: _Args):
    if x.a == 0 or x.b == 0:
        return 0
    if x.a == 1:
        return B
    if x.b == 1:
        return A
    return None


def _mulhu(x: _Args):
    return 0 if x.a in (0, 1) or x.b in (0, 1) else None


def _mulhs(x: _Args):
    return 0 if x.a == 0 or x.b == 0 else None


def _eq(x: _Args):
    if x.same:
        return 1
    return 0 if x.comp else None


def _ltu(x: _Args):
    return 0 if x.b == 0 or x.same or x.a == M32 else None


def _leu(x: _Args):
    return 1 if x.a == 0 or x.b == M32 or x.same else None


def _lt_le(x: _Args, op: str):
    return int(op == "LE") if x.same else None


_RULES = {"MOV": _mov, "AND": _and, "OR": _or, "XOR": _xor, "ADD": _add,
          "SHL": lambda x: _shl_shr(x, "SHL"), "SHR": lambda x: _shl_shr(x, "SHR"), "SAR": _sar,
          "MUL": _mul, "MULHU": _mulhu, "MULHS": _mulhs, "EQ": _eq, "LTU": _ltu, "LEU": _leu,
          "LT": lambda x: _lt_le(x, "LT"), "LE": lambda x: _lt_le(x, "LE")}
#: compares of equal or extreme operands: written for the soft-float builder only (`full`)
_FULL_ONLY = {"EQ", "LTU", "LEU", "LT", "LE"}
