"""The emission helpers every integer routine is written with: constant folding and trivial identities
(`emit_op`, on `qwengpu.assembler.simplify`), dead-value removal (`public_routine`), carry pairs
(`add_pair`) and the 64-bit add, subtract, negate, compare and select they build.
"""
from __future__ import annotations

import functools

from qwengpu.machine.uops import M32, Imm, Src, VReg, src

from ..emit import Emitter
from ..simplify import Operand, Sym, simplify


def const_value(x) -> int | None:
    """The value of an immediate operand (inversion applied), else None."""
    x = src(x)
    if isinstance(x.value, Imm):
        v = x.value.value
        return (~v & M32) if x.inv else v
    return None


def _sym(x: Src):
    """A `Src` as the simplifier sees it: its constant, or the register it reads."""
    k = const_value(x)
    return k if k is not None else Sym(x.value, x.inv)


def emit_op(em: Emitter, op: str, a, b=None, c=None, cin: str = "0") -> Src:
    """Emit one ALU op (no carry flag out), folding constants and trivial identities
    (`qwengpu.assembler.simplify`)."""
    srcs = {"a": src(a), "b": None if b is None else src(b), "c": None if c is None else src(c)}
    r = simplify(op, *(None if x is None else _sym(x) for x in srcs.values()), cin=cin)
    if isinstance(r, int):
        return src(Imm(r))
    if isinstance(r, Operand):
        return srcs[r.name]
    return em.alu(op, srcs["a"], srcs["b"], srcs["c"], cin=cin)


def _roots(x, out: set):
    if isinstance(x, Src):
        if isinstance(x.value, VReg):
            out.add(x.value)
    elif isinstance(x, tuple):
        for y in x:
            _roots(y, out)


def public_routine(fn):
    """Public routines drop what they emitted but do not use (values made dead by constant
    folding, e.g. the branch a SEL with an immediate condition does not take)."""
    @functools.wraps(fn)
    def wrapper(em, *args, **kw):
        start = len(em.out)
        result = fn(em, *args, **kw)
        ops = em.out[start:]
        live: set = set()
        _roots(result, live)
        keep = [False] * len(ops)
        for i in range(len(ops) - 1, -1, -1):
            op = ops[i]
            if op.dst[0] in live or (op.sets_flag and i + 1 < len(ops) and keep[i + 1]
                                     and ops[i + 1].cin == "flag"):
                keep[i] = True
                for r in op.reads():
                    live.add(r)
        if not all(keep):
            ops = [op for op, k in zip(ops, keep) if k]
            for i, op in enumerate(ops):          # a carry nobody reads any more
                if op.sets_flag and not (i + 1 < len(ops) and ops[i + 1].cin == "flag"):
                    op.sets_flag = False
            em.out[start:] = ops
        return result
    return wrapper


def add_pair(em: Emitter, a0, b0, a1, b1, cin0: str = "0") -> tuple:
    """(a0 + b0 + cin0) and (a1 + b1 + carry out of the first): a flag pair, folded if possible."""
    k0, k1 = const_value(a0), const_value(b0)
    if k0 is not None and k1 is not None:
        t = k0 + k1 + int(cin0)
        return src(Imm(t & M32)), emit_op(em, "ADD", a1, b1, cin=str(t >> 32))
    if cin0 == "0" and (k0 == 0 or k1 == 0):
        return (src(b0) if k0 == 0 else src(a0)), emit_op(em, "ADD", a1, b1)
    lo = em.alu("ADD", a0, b0, cin=cin0, sets_flag=True)
    hi = em.alu("ADD", a1, b1, cin="flag")
    return lo, hi


def inverted(x) -> Src:
    return src(x, True)


def as_pair(x) -> tuple:
    lo, hi = x
    return src(lo), src(hi)


def add32(em, a, b, cin="0"):
    return emit_op(em, "ADD", a, b, cin=cin)


def sub32(em, a, b):
    """a - b (mod 2^32)."""
    return emit_op(em, "ADD", a, inverted(b), cin="1")


@public_routine
def add64(em, a, b) -> tuple:
    a, b = as_pair(a), as_pair(b)
    return add_pair(em, a[0], b[0], a[1], b[1])


@public_routine
def sub64(em, a, b) -> tuple:
    a, b = as_pair(a), as_pair(b)
    return add_pair(em, a[0], inverted(b[0]), a[1], inverted(b[1]), cin0="1")


@public_routine
def neg64(em, a) -> tuple:
    """-a (mod 2^64)."""
    a = as_pair(a)
    return add_pair(em, inverted(a[0]), 0, inverted(a[1]), 0, cin0="1")


def lt64(em, a, b, signed: bool) -> Src:
    """1 if a < b (64-bit) else 0: the low words decide when the high words are equal."""
    a, b = as_pair(a), as_pair(b)
    lo = emit_op(em, "LTU", a[0], b[0])
    le = emit_op(em, "LE" if signed else "LEU", a[1], b[1])
    lt = emit_op(em, "LT" if signed else "LTU", a[1], b[1])
    return emit_op(em, "SEL", le, lt, lo)


def le64(em, a, b, signed: bool) -> Src:
    """1 if a <= b (64-bit) else 0."""
    a, b = as_pair(a), as_pair(b)
    lo = emit_op(em, "LEU", a[0], b[0])
    le = emit_op(em, "LE" if signed else "LEU", a[1], b[1])
    lt = emit_op(em, "LT" if signed else "LTU", a[1], b[1])
    return emit_op(em, "SEL", le, lt, lo)


def sel64(em, c, a, b) -> tuple:
    a, b = as_pair(a), as_pair(b)
    return emit_op(em, "SEL", a[0], b[0], c), emit_op(em, "SEL", a[1], b[1], c)
