"""The micro-op algebra, in one place: constant folding and the identities of the ALU ops.

Three clients ask it the same question -- "does `op(a, b, c)` need a micro-op?" -- on their own
operand representations:

- the integer routines (`intcode._op`) on `Src` operands, as they emit;
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


def simplify(op: str, a, b=None, c=None, cin: str = "0", *, full: bool = False, is01=None):
    """The value of ALU op `op` without a micro-op, when the algebra gives one (see the module
    docstring for the operands and the answers). `cin` "flag" ops are never simplified."""
    if cin == "flag":
        return None
    k = fold(op, a, b, c, cin)
    if k is not None:
        return k
    A, B = Operand("a"), Operand("b")
    same = isinstance(a, Sym) and isinstance(b, Sym) and a.key == b.key
    comp = full and same and a.inv != b.inv
    same = same and a.inv == b.inv
    inv_a = isinstance(a, Sym) and a.inv
    inv_b = isinstance(b, Sym) and b.inv
    if op == "MOV":
        return A
    if op == "AND":
        if a == 0 or b == 0 or comp:
            return 0
        if a == M32:
            return B
        if b == M32 or same:
            return A
    elif op == "OR":
        if a == M32 or b == M32 or comp:
            return M32
        if a == 0:
            return B
        if b == 0 or same:
            return A
    elif op == "XOR":
        if same:
            return 0
        if comp:
            return M32
        if a == 0:
            return B
        if b == 0:
            return A
        if full:
            if a == M32:
                return Operand("b", True)
            if b == M32:
                return Operand("a", True)
            if inv_a:                                   # ~x ^ y == ~(x ^ y)
                return Rebuild("XOR", (Operand("a", True), B), True)
            if inv_b:
                return Rebuild("XOR", (A, Operand("b", True)), True)
    elif op == "ADD":
        if cin == "0":
            if a == 0:
                return B
            if b == 0:
                return A
            if comp:
                return M32
        elif full:
            if a == M32:
                return B
            if b == M32:
                return A
            if comp:
                return 0
    elif op in ("SHL", "SHR"):
        if b == 0:
            return A
        if a == 0 or (isinstance(b, int) and b >= 32):
            return 0
        if full and op == "SHL" and inv_a and isinstance(b, int):
            # only the second operand is inverted for free on the machine
            return Rebuild("MUL", (A, 1 << b))
    elif op == "SAR":
        if b == 0 or a in (0, M32):
            return A
        if full:
            if isinstance(b, int) and b > 31:
                return Rebuild("SAR", (A, 31))
            if inv_a:                                   # sar(~x) == ~sar(x)
                return Rebuild("SAR", (Operand("a", True), B), True)
    elif op == "SEL":
        if isinstance(c, int):
            return A if c else B
        if (isinstance(a, int) and a == b) or same:
            return A
        if a == 1 and b == 0 and isinstance(c, Sym) and is01 is not None and is01(c):
            return Operand("c")
    elif op == "MUL":
        if a == 0 or b == 0:
            return 0
        if a == 1:
            return B
        if b == 1:
            return A
    elif op == "MULHU":
        if a in (0, 1) or b in (0, 1):
            return 0
    elif op == "MULHS":
        if a == 0 or b == 0:
            return 0
    elif not full:
        return None
    elif op == "EQ":
        if same:
            return 1
        if comp:
            return 0
    elif op == "LTU":
        if b == 0 or same or a == M32:
            return 0
    elif op == "LEU":
        if a == 0 or b == M32 or same:
            return 1
    elif op in ("LT", "LE"):
        if same:
            return int(op == "LE")
    return None
