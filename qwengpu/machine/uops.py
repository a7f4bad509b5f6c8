"""The machine's micro-ISA: what one functional unit does to 4 lanes of 32-bit words.

PTX instructions are lowered (`qwengpu.assembler.lower`) to micro-ops on 32-bit virtual registers;
64-bit values are (lo, hi) pairs, predicates are 0/1 words. The machine executes micro-ops, never
PTX. Every micro-op is a pure function of its operands (per lane) except the memory, cross-lane and
control ops, which the bundle's fixed units handle.

Operands are virtual registers, 32-bit immediates or special values, each optionally inverted
(bitwise NOT) -- a free transformation at the operand multiplexer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# the ALU micro-ops' semantics (the circuits implement exactly this): one definition, on numpy lanes,
# shared with the approximate instructions' definitions
from qwengpu.semantics.words import ALU_OPS as ALU_OPS
from qwengpu.semantics.words import M32 as M32
from qwengpu.semantics.words import alu_eval as alu_eval
from qwengpu.semantics.words import alu_eval_lanes as alu_eval_lanes

#: float-unit micro-ops on f32 words: name -> number of sources, in opcode order (`fpu_eval` below is
#: their semantics: the interpreter's, `docs/floats.md`). Modifiers ride in `MicroOp.extra`: "rnd"
#: (rn rz rm rp; F2I/FRND: rni rzi rmi rpi), "ftz", "sat", "compare" (one of `FPU_COMPARES`),
#: "nan" (min/max .NaN), "signed" (I2F/F2I's integer side: s32 or u32)
FPU_OPS = {
    "FADD": 2, "FSUB": 2, "FMUL": 2, "FFMA": 3,
    "FSETP": 2, "FMIN": 2, "FMAX": 2,
    "I2F": 1, "F2I": 1, "FRND": 1,
}
FPU_ROUNDINGS = ("rn", "rz", "rm", "rp")
FPU_COMPARES = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")


@dataclass(frozen=True)
class VReg:
    id: int
    name: str = ""

    def __repr__(self) -> str:
        return f"v{self.id}" + (f"({self.name})" if self.name else "")


@dataclass(frozen=True)
class Imm:
    value: int

    def __post_init__(self):
        object.__setattr__(self, "value", self.value & M32)

    def __repr__(self) -> str:
        return f"#{self.value:#x}"


@dataclass(frozen=True)
class Special:
    """A per-lane launch value: tid.x/y/z (per warp), ctaid.x/y/z (per block), laneid, warpid."""
    name: str

    def __repr__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True)
class Src:
    """An operand: a value, possibly bitwise inverted."""
    value: object          # VReg | Imm | Special
    inv: bool = False

    def __repr__(self) -> str:
        return ("~" if self.inv else "") + repr(self.value)


def src(x, inv: bool = False) -> Src:
    if isinstance(x, Src):
        return Src(x.value, x.inv ^ inv)
    if isinstance(x, int):
        return Src(Imm(x), inv)
    return Src(x, inv)


@dataclass
class MicroOp:
    """One micro-op. `kind`: "alu", "fpu", "mem", "xlane", "ctl". Fields are used per kind.

    alu:  op, dst, a, b, c, cin ("0", "1", "flag"), sets_flag (carry out kept for the next unit)
    fpu:  op (`FPU_OPS`), dst, a, b, c, extra: the modifiers (rnd, ftz, sat, compare, nan, signed)
    mem:  op (LD/ST/ATOM), space, width (bytes: 1,2,4,8), signed, dst (lo, hi), addr (lo, hi),
          data (lo, hi), cmp (lo, hi) for CAS, atom op
    xlane: op (SHFL/VOTE/ACTIVEMASK/MATCH), ...
    ctl:  op (BRA/EXIT/BAR), target label, pred (a Src), negate
    """
    kind: str
    op: str
    dst: tuple = ()
    a: Src | None = None
    b: Src | None = None
    c: Src | None = None
    cin: str = "0"
    sets_flag: bool = False
    extra: dict = field(default_factory=dict)
    ptx_pc: int = -1               # the PTX instruction this came from
    guard: Src | None = None       # execute only in lanes where guard != 0

    def reads(self) -> list:
        out = []
        for s in (self.a, self.b, self.c, self.guard):
            if s is not None and isinstance(s.value, VReg):
                out.append(s.value)
        for k in ("addr", "data", "cmp", "bsrc", "csrc"):
            for s in self.extra.get(k, ()) or ():
                if s is not None and isinstance(s.value, VReg):
                    out.append(s.value)
        if self.kind == "alu" and self.extra.get("keep") is not None:
            out.append(self.extra["keep"])
        return out

    def writes(self) -> list:
        return [d for d in self.dst if d is not None]

    def __repr__(self) -> str:
        g = f"@{self.guard} " if self.guard is not None else ""
        d = ",".join(repr(x) for x in self.dst)
        args = ", ".join(repr(x) for x in (self.a, self.b, self.c) if x is not None)
        ex = f" {self.extra}" if self.extra else ""
        cin = f" cin={self.cin}" if self.op == "ADD" and self.cin != "0" else ""
        return f"{g}{self.op} {d} <- {args}{cin}{ex}"


def alu(op: str, dst, a, b=None, c=None, cin: str = "0", sets_flag: bool = False, ptx_pc: int = -1) -> MicroOp:
    return MicroOp("alu", op, (dst,), src(a), None if b is None else src(b), None if c is None else src(c),
                   cin=cin, sets_flag=sets_flag, ptx_pc=ptx_pc)


def fpu(op: str, dst, a, b=None, c=None, ptx_pc: int = -1, **mods) -> MicroOp:
    """A float-unit micro-op; `mods`: its modifiers (`FPU_OPS`), checked here."""
    if op not in FPU_OPS:
        raise ValueError(f"unknown float-unit op {op}")
    rnd = mods.get("rnd")
    allowed = tuple(r + "i" for r in FPU_ROUNDINGS) if op in ("F2I", "FRND") else FPU_ROUNDINGS
    if rnd is not None and rnd not in allowed or op in ("FADD", "FSUB", "FMUL", "FFMA", "I2F", "F2I", "FRND") \
            and rnd is None:
        raise ValueError(f"{op}: rounding {rnd!r} (one of {', '.join(allowed)})")
    if op == "FSETP" and mods.get("compare") not in FPU_COMPARES:
        raise ValueError(f"FSETP: compare {mods.get('compare')!r}")
    srcs = [None if x is None else src(x) for x in (a, b, c)]
    if sum(x is not None for x in srcs) != FPU_OPS[op]:
        raise ValueError(f"{op} takes {FPU_OPS[op]} sources")
    return MicroOp("fpu", op, (dst,), *srcs, extra={k: v for k, v in mods.items() if v}, ptx_pc=ptx_pc)


def fpu_eval(op: str, mods: dict, a: int, b: int = 0, c: int = 0) -> int:
    """The f32 result word (or 0/1 for FSETP) of a float-unit micro-op on one lane: the reference
    interpreter's float semantics (`qwengpu.semantics.floats`), so the machine and the oracle share
    one definition."""
    import numpy as np
    r = fpu_eval_lanes(op, mods, *(np.array([x & M32], dtype=np.uint64) for x in (a, b, c)))
    return int(r[0])


def fpu_eval_lanes(op: str, mods: dict, a, b, c):
    """`fpu_eval` on numpy arrays of words (one per lane): the interpreter's float functions
    take arrays."""
    import numpy as np

    from qwengpu.semantics import floats as F  # the shared definitions (imported late: heavy)
    rnd, ftz, sat = mods.get("rnd"), bool(mods.get("ftz")), bool(mods.get("sat"))
    if op in ("FADD", "FSUB", "FMUL"):
        r = {"FADD": F.fadd, "FSUB": F.fsub, "FMUL": F.fmul}[op](a, b, width=32, rnd=rnd, ftz=ftz, sat=sat)
    elif op == "FFMA":
        r = F.ffma(a, b, c, width=32, rnd=rnd, ftz=ftz, sat=sat)
    elif op == "FSETP":
        r = F.fcompare(mods["compare"], a, b, width=32, ftz=ftz)
    elif op in ("FMIN", "FMAX"):
        r = (F.fmin if op == "FMIN" else F.fmax)(a, b, width=32, ftz=ftz, nan=bool(mods.get("nan")))
    elif op == "I2F":
        r = F.cvt(a, "f32", "s32" if mods.get("signed") else "u32", rnd=rnd, ftz=ftz, sat=sat)
    elif op == "F2I":
        r = F.cvt(a, "s32" if mods.get("signed") else "u32", "f32", rnd=rnd, ftz=ftz)
    elif op == "FRND":
        r = F.cvt(a, "f32", "f32", rnd=rnd, ftz=ftz, sat=sat)
    else:
        raise ValueError(f"unknown float-unit op {op}")
    return np.asarray(r, dtype=np.uint64).reshape(-1) & M32
