"""PTX kernel IR -> micro-ops on 32-bit virtual registers, one basic block at a time.

The lowering knows the launch: kernel parameters become constants (buffer addresses, scalar
values), device functions are inlined, `.local` accesses get a per-thread base. 64-bit PTX registers
are (lo, hi) pairs of virtual registers; predicates are 0/1 words. Each micro-op remembers the PTX
instruction it came from (`ptx_pc`), which the lab and the traces use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.interp.memory import GENERIC_WINDOWS
from qwengpu.launch import LaunchSpec
from qwengpu.machine.uops import M32, Imm, MicroOp, Special, Src, VReg, alu, src
from qwengpu.ptx.ir import TYPE_BITS, Addr, ArgList, Function, Instr, Label, Module, Neg, Pair, Reg, Sym, Vec
from qwengpu.ptx.ir import Imm as PImm
from qwengpu.ptx.ir import Special as PSpecial

from . import intcode as ic
from . import softfloat as sf
from .emit import Emitter

#: div/rem by (op, signedness letter, width): narrower types are extended to 32 bits first
_DIVREM = {("div", "u", 32): ic.div_u32, ("div", "s", 32): ic.div_s32,
           ("rem", "u", 32): ic.rem_u32, ("rem", "s", 32): ic.rem_s32,
           ("div", "u", 64): ic.div_u64, ("div", "s", 64): ic.div_s64,
           ("rem", "u", 64): ic.rem_u64, ("rem", "s", 64): ic.rem_s64}
_FLOATS = ("f16", "f32", "f64")
#: soft-float arithmetic by (PTX op, f64?)
_FARITH = {("add", False): sf.add, ("sub", False): sf.sub, ("mul", False): sf.mul,
           ("add", True): sf.add64, ("sub", True): sf.sub64, ("mul", True): sf.mul64,
           ("div", False): sf.div, ("div", True): sf.div64}
#: bfe by (signedness letter, width)
_BFE = {("u", 32): ic.bfe_u32, ("s", 32): ic.bfe_s32, ("u", 64): ic.bfe_u64, ("s", 64): ic.bfe_s64}


class AssemblerError(ValueError):
    """The program does not fit the machine or uses what it does not support (names the line)."""

    def __init__(self, message: str, instr: Instr | None = None):
        self.line = instr.line if instr is not None else None
        where = f"line {instr.line}: " if instr is not None else ""
        shown = f"\n    {instr.text.strip()}" if instr is not None and instr.text else ""
        super().__init__(f"{where}{message}{shown}")


@dataclass
class Block:
    label: str
    ops: list = field(default_factory=list)
    # terminator: ("jump", label) | ("branch", pred Src, negate, taken label, fallthrough label)
    #             | ("exit",) | ("barrier", label)
    term: tuple = ("exit",)


@dataclass
class MicroProgram:
    blocks: list[Block]
    entry: str
    nregs: int
    kernel: str
    layout: object = None
    specials: set = field(default_factory=set)

    def block(self, label: str) -> Block:
        for b in self.blocks:
            if b.label == label:
                return b
        raise KeyError(label)


def _bits(t: str) -> int:
    return 1 if t == "pred" else TYPE_BITS[t]


class _Lowerer:
    def __init__(self, module: Module, spec: LaunchSpec, kernel: Function, layout):
        self.module = module
        self.spec = spec
        self.kernel = kernel
        self.layout = layout
        self.nv = 0
        self.blocks: list[Block] = []
        self.cur: Block | None = None
        self.label_counter = 0
        self.specials: set = set()

    # -- registers -------------------------------------------------------------------------------

    def new(self, name: str = "") -> VReg:
        self.nv += 1
        return VReg(self.nv, name)

    def reg(self, ctx, name: str) -> tuple:
        """(lo, hi) vregs of a PTX register (hi None for <= 32-bit registers)."""
        m = ctx["regs"]
        if name not in m:
            t = ctx["fn"].regs.get(name)
            if t is None:
                raise AssemblerError(f"undeclared register {name}")
            lo = self.new(name)
            hi = self.new(name + ".hi") if _bits(t) == 64 else None
            m[name] = (lo, hi)
        return m[name]

    # -- blocks --------------------------------------------------------------------------------

    def fresh_label(self, base: str) -> str:
        self.label_counter += 1
        return f"{base}~{self.label_counter}"

    def start(self, label: str):
        b = Block(label)
        self.blocks.append(b)
        self.cur = b

    def emit(self, op: MicroOp):
        self.cur.ops.append(op)

    def end(self, term: tuple):
        self.cur.term = term
        self.cur = None

    # -- operands ------------------------------------------------------------------------------

    def value(self, ctx, o, t: str, ins: Instr) -> tuple:
        """(lo Src, hi Src or None) of a source operand read as type t."""
        w = _bits(t)
        if isinstance(o, Reg):
            lo, hi = self.reg(ctx, o.name)
            if w == 64:
                if hi is None:
                    # a 32-bit register read as 64 bits (relaxed typing): zero-extend
                    return src(lo), src(Imm(0))
                return src(lo), src(hi)
            return src(lo), None
        if isinstance(o, PImm):
            if t in _FLOATS:
                v = _float_literal(o, w, ins)
                return src(Imm(v & M32)), (src(Imm(v >> 32)) if w == 64 else None)
            if o.bits is not None:
                if o.width == 64:
                    return src(Imm(o.bits & M32)), src(Imm(o.bits >> 32))
                return src(Imm(o.bits)), (src(Imm(0)) if w == 64 else None)
            if isinstance(o.value, float):
                raise AssemblerError("decimal float literals are not supported by the machine", ins)
            v = o.value & ((1 << 64) - 1)
            return src(Imm(v & M32)), (src(Imm(v >> 32)) if w == 64 else None)
        if isinstance(o, PSpecial):
            return self.special(o.name, ins), (src(Imm(0)) if w == 64 else None)
        if isinstance(o, Neg):
            lo, _ = self.value(ctx, o.reg, "pred", ins)
            r = self.new("!p")
            self.emit(alu("XOR", r, lo, 1, ptx_pc=ctx["pc"]))
            return src(r), None
        if isinstance(o, (Sym, Addr)):
            name = o.name if isinstance(o, Sym) else o.base.name
            off = 0 if isinstance(o, Sym) else o.offset
            addr = self.symbol_address(ctx, name, ins) + off
            return src(Imm(addr & M32)), (src(Imm(addr >> 32)) if w == 64 else None)
        raise AssemblerError(f"operand {o} is not supported by the machine", ins)

    def special(self, name: str, ins: Instr) -> Src:
        base, _, comp = name.partition(".")
        idx = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        if name == "WARP_SZ":
            return src(Imm(4))
        if base == "%ntid":
            return src(Imm(self.spec.block[idx]))
        if base == "%nctaid":
            return src(Imm(self.spec.grid[idx]))
        if base in ("%tid", "%ctaid"):
            s = Special(base[1:] + "." + "xyz"[idx])
            self.specials.add(s.name)
            return src(s)
        if base in ("%laneid", "%warpid"):
            self.specials.add(base[1:])
            return src(Special(base[1:]))
        if base in ("%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge"):
            self.specials.add(base[1:])
            return src(Special(base[1:]))
        if base == "%nwarpid":
            return src(Imm((self.spec.threads_per_block + 3) // 4))
        if base in ("%smid", "%gridid"):
            return src(Imm(0))
        if base == "%nsmid":
            return src(Imm(1))
        if base == "%dynamic_smem_size":
            return src(Imm(self.spec.shared_bytes))
        raise AssemblerError(f"special register {name} is not supported by the machine", ins)

    def symbol_address(self, ctx, name: str, ins: Instr) -> int:
        lay = self.layout
        if name in lay.global_vars:
            return lay.global_vars[name]
        if name in lay.shared_vars:
            return lay.shared_vars[name]
        if name in lay.const_vars:
            return lay.const_vars[name]
        fn = ctx["fn"].name
        if name in lay.local_vars.get(fn, {}):
            return ctx["local_base"] + lay.local_vars[fn][name]
        raise AssemblerError(f"taking the address of {name} is not supported by the machine", ins)

    def write(self, ctx, o, lo, hi, t: str, ins: Instr, signed_ext: bool = False):
        """Write (lo Src, hi Src|None) of type t into destination register o."""
        if o is None:
            return
        if not isinstance(o, Reg):
            raise AssemblerError(f"destination {o} is not a register", ins)
        dlo, dhi = self.reg(ctx, o.name)
        pc = ctx["pc"]
        self.emit(alu("MOV", dlo, lo, ptx_pc=pc))
        if dhi is not None:
            if hi is None:
                if signed_ext:
                    self.emit(alu("SAR", dhi, src(dlo), 31, ptx_pc=pc))
                else:
                    self.emit(alu("MOV", dhi, 0, ptx_pc=pc))
            else:
                self.emit(alu("MOV", dhi, hi, ptx_pc=pc))

    # -- lowering ------------------------------------------------------------------------------------

    def run(self) -> MicroProgram:
        ctx = {"fn": self.kernel, "regs": {}, "params": self.kernel_params(), "pc": 0,
               "ret_label": None, "ret_vars": {}, "local_base": 0, "prefix": ""}
        entry = "entry"
        self.start(entry)
        ctx["entry_block"] = self.cur
        self.bar_red = None
        if any(ins.op in ("bar", "barrier") and getattr(ins.info, "mode", None) == "red"
               for f in self.module.functions.values() for ins in f.body):
            self.bar_red_prologue(ctx)
        self.lower_function(ctx)
        if self.cur is not None:
            self.end(("exit",))
        return MicroProgram(self.blocks, entry, self.nv, self.kernel.name, self.layout, self.specials)

    def kernel_params(self) -> dict:
        out = {}
        addrs = self.layout.buffer_addresses
        for p, a, addr in zip(self.kernel.params, self.spec.args, addrs):
            if a.is_buffer:
                raw = addr.to_bytes(8, "little")
            else:
                import numpy as np
                raw = np.array([a.value], dtype=a.value.dtype).tobytes()
            out[p.name] = ("const", raw)
        return out

    def lower_function(self, ctx):
        fn: Function = ctx["fn"]
        labels_at: dict[int, list[str]] = {}
        for name, pc in fn.labels.items():
            labels_at.setdefault(pc, []).append(name)
        prefix = ctx["prefix"]
        for pc, ins in enumerate(fn.body):
            if pc in labels_at:
                lab = prefix + labels_at[pc][0]
                if self.cur is not None:
                    self.end(("jump", lab))
                self.start(lab)
                for extra in labels_at[pc][1:]:
                    # alias labels jump to the first
                    pass
            if self.cur is None:
                self.start(self.fresh_label(prefix + "dead"))
            ctx["pc"] = pc
            self.lower(ctx, ins)
        n = len(fn.body)
        if n in labels_at:
            lab = prefix + labels_at[n][0]
            if self.cur is not None:
                self.end(("jump", lab))
            self.start(lab)
        # falling off the end is a return
        if self.cur is not None:
            if ctx["ret_label"]:
                self.end(("jump", ctx["ret_label"]))
            else:
                self.end(("exit",))

    def label_of(self, ctx, name: str) -> str:
        fn = ctx["fn"]
        pc = fn.labels[name]
        first = [n for n, p in fn.labels.items() if p == pc][0]
        return ctx["prefix"] + first

    FLOAT_CAPABLE = {"add", "sub", "mul", "mad", "div", "abs", "neg", "min", "max", "fma", "sqrt", "rcp",
                     "setp", "set", "selp", "copysign", "testp", "atom", "red", "cvt"}

    def lower(self, ctx, ins: Instr):
        info = ins.info
        op = ins.op
        h = getattr(self, "op_" + op, None)
        floaty = any(t in ("f16", "f32", "f64") for t in (getattr(info, "type", None), getattr(info, "src_type", None)))
        if floaty and op in self.FLOAT_CAPABLE and op not in ("selp",):
            h = getattr(self, "float_" + op, None)
            if h is None:
                raise AssemblerError(f"`{ins.opcode}` (floating point) is not supported by the machine yet", ins)
        if h is None:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        if ins.guard is not None and op not in ("bra", "ret", "exit"):
            # predicated instruction: lower into its own block pair
            g, _ = self.value(ctx, ins.guard.reg, "pred", ins)
            skip = self.fresh_label("skip")
            body = self.fresh_label("pred")
            self.end(("branch", g, not ins.guard.negated, body, skip))
            self.start(body)
            h(ctx, ins, info)
            if self.cur is not None:
                self.end(("jump", skip))
            self.start(skip)
            return
        h(ctx, ins, info)

    # -- integer arithmetic --------------------------------------------------------------------------------

    def _binary32(self, ctx, ins, info, opname, swap=False):
        t = info.type
        a, _ = self.value(ctx, ins.operands[1], t, ins)
        b, _ = self.value(ctx, ins.operands[2], t, ins)
        r = self.new()
        self.emit(alu(opname, r, b if swap else a, a if swap else b, ptx_pc=ctx["pc"]))
        return src(r)

    def _narrow(self, s: Src, w: int, signed: bool, ctx) -> Src:
        """Truncate/extend a 32-bit value to a w-bit type's canonical register contents."""
        if w >= 32:
            return s
        if isinstance(s.value, Imm):              # immediates stay immediates (routines fold them)
            v = (~s.value.value if s.inv else s.value.value) & ((1 << w) - 1)
            return src(Imm(v - (1 << w) if signed and v >> (w - 1) else v))
        r = self.new()
        if signed:
            t = self.new()
            self.emit(alu("SHL", t, s, 32 - w, ptx_pc=ctx["pc"]))
            self.emit(alu("SAR", r, src(t), 32 - w, ptx_pc=ctx["pc"]))
        else:
            self.emit(alu("AND", r, s, (1 << w) - 1, ptx_pc=ctx["pc"]))
        return src(r)

    def _result(self, ctx, ins, t, lo, hi=None):
        w = _bits(t)
        if w < 32 and w > 1:
            lo = self._narrow(lo, w, False, ctx)
        self.write(ctx, ins.operands[0], lo, hi, t, ins)

    # Most integer instructions are routines of `intcode` (straight-line micro-op sequences, exact
    # for every input, folding immediate operands): `ints` reads the operands, `put` writes the
    # result, and `em` hands the routine an Emitter appending to the current block.

    def em(self, ctx) -> Emitter:
        return Emitter(self.new, self.cur.ops, ctx["pc"])

    def ints(self, ctx, ins, t: str, *idx, extend: bool = True) -> list:
        """Operands `idx` of `ins` read as integer type t: (lo, hi) pairs for 64-bit types, else a
        32-bit Src, extended from a narrower type's width by its signedness (`extend=False`: left
        as they are, for operations whose low bits depend only on the operands' low bits)."""
        w, out = _bits(t), []
        for k in idx:
            lo, hi = self.value(ctx, ins.operands[k], t, ins)
            out.append((lo, hi) if w == 64 else self._narrow(lo, w, t[0] == "s", ctx) if extend else lo)
        return out

    def u32(self, ctx, ins, *idx) -> list:
        """Operands `idx` read as u32 (shift amounts, bit positions and lengths, selectors)."""
        return [self.value(ctx, ins.operands[k], "u32", ins)[0] for k in idx]

    def put(self, ctx, ins, t: str, r):
        """Write a result (a Src, or a (lo, hi) pair for 64-bit types) as type t."""
        if isinstance(r, tuple):
            self.write(ctx, ins.operands[0], r[0], r[1], t, ins)
        else:
            self._result(ctx, ins, t, r)

    def add64(self, ctx, a: tuple, b: tuple, sub: bool = False) -> tuple:
        return (ic.sub64 if sub else ic.add64)(self.em(ctx), a, b)

    def op_add(self, ctx, ins, info):
        t = info.type
        w = _bits(t)
        sub = ins.op in ("sub", "subc")
        if "cc" in info.flags or ins.op in ("addc", "subc"):
            self.carry_chain(ctx, ins, info, *self.ints(ctx, ins, t, 1, 2), sub)
            return
        if info.sat and t != "s32":
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        a, b = self.ints(ctx, ins, t, 1, 2, extend=False)
        if w == 64:
            self.put(ctx, ins, t, self.add64(ctx, a, b, sub))
            return
        em = self.em(ctx)
        self.put(ctx, ins, t, _sat_add(em, a, b, sub) if info.sat else em.alu("ADD", a, src(b, sub), cin=str(int(sub))))

    op_addc = op_subc = op_add

    def cc(self, ctx) -> VReg:
        """The carry flag of the PTX carry chains (add.cc, addc, ...): a 0/1 register per function,
        0 on entry (as in the interpreter)."""
        if ctx.get("cc") is None:
            ctx["cc"] = self.new("%cc")
            ctx["entry_block"].ops.insert(0, alu("MOV", ctx["cc"], 0, ptx_pc=ctx["pc"]))
        return ctx["cc"]

    def carry_chain(self, ctx, ins, info, x, y, sub: bool):
        """x + y (x - y) plus (minus) the carry flag for addc/subc/madc, the carry (borrow) out
        into the flag for .cc; 32-bit only."""
        if info.type not in ("u32", "s32"):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        em = self.em(ctx)
        cin = src(self.cc(ctx)) if ins.op in ("addc", "subc", "madc") else src(Imm(0))
        # as 64-bit sums of zero-extended words: the high word collects the carries (or -borrows)
        r, k = (ic.sub64 if sub else ic.add64)(em, (x, src(Imm(0))), (y, src(Imm(0))))
        r, k = (ic.sub64 if sub else ic.add64)(em, (r, k), (cin, src(Imm(0))))
        if "cc" in info.flags:
            self.emit(alu("AND", self.cc(ctx), k, 1, ptx_pc=ctx["pc"]))
        self.put(ctx, ins, info.type, r)

    op_sub = op_add

    def op_neg(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1, extend=False)
        em = self.em(ctx)
        self.put(ctx, ins, t, ic.neg64(em, a) if _bits(t) == 64 else em.alu("ADD", 0, src(a, True), cin="1"))

    def op_abs(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1)
        if _bits(t) == 64:
            self.put(ctx, ins, t, ic.abs64(self.em(ctx), a))
            return
        em = self.em(ctx)
        self.put(ctx, ins, t, em.alu("SEL", em.alu("ADD", 0, src(a, True), cin="1"), a, em.alu("LT", a, 0)))

    def product(self, ctx, ins, t: str, mode: str, a, b):
        """mul.{lo,hi,wide} of operands read by `ints`: a Src, or a (lo, hi) pair for 64-bit
        results (mul.wide.{u,s}32 and 64-bit types)."""
        w, signed, em = _bits(t), t[0] == "s", self.em(ctx)
        if w == 64:
            if mode == "wide":
                raise AssemblerError(f"`{ins.opcode}` is not a PTX instruction", ins)
            if mode == "lo":
                return ic.mullo_u64(em, a, b)
            return (ic.mulhi_s64 if signed else ic.mulhi_u64)(em, a, b)
        hi_op = "MULHS" if signed else "MULHU"
        if w == 32:
            if mode == "lo":
                return em.alu("MUL", a, b)
            if mode == "hi":
                return em.alu(hi_op, a, b)
            return em.alu("MUL", a, b), em.alu(hi_op, a, b)
        p = em.alu("MUL", a, b)                    # narrow operands, extended: exact in 32 bits
        if mode == "hi":
            return em.alu("SAR" if signed else "SHR", p, w)
        return p

    @staticmethod
    def _product_type(t: str, mode: str) -> str:
        return t[0] + str(2 * _bits(t)) if mode == "wide" else t

    def op_mul(self, ctx, ins, info):
        t, mode = info.type, info.mode or "lo"
        a, b = self.ints(ctx, ins, t, 1, 2, extend=mode != "lo")
        self.put(ctx, ins, self._product_type(t, mode), self.product(ctx, ins, t, mode, a, b))

    def op_mad(self, ctx, ins, info):
        t, mode = info.type, info.mode or "lo"
        if info.sat and (t != "s32" or mode == "wide"):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        rt = self._product_type(t, mode)
        a, b = self.ints(ctx, ins, t, 1, 2, extend=mode != "lo")
        c, = self.ints(ctx, ins, rt, 3, extend=False)
        p = self.product(ctx, ins, t, mode, a, b)
        if "cc" in info.flags or ins.op == "madc":
            if mode == "wide":
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
            self.carry_chain(ctx, ins, info, p, c, False)
            return
        em = self.em(ctx)
        self.put(ctx, ins, rt, self.add64(ctx, p, c) if _bits(rt) == 64 else
                 _sat_add(em, p, c, False) if info.sat else em.alu("ADD", p, c))

    op_madc = op_mad

    def op_mul24(self, ctx, ins, info):
        """mul24/mad24: the product of the low 24 bits (sign-extended for .s32); .lo: its low 32
        bits, .hi: bits 47..16."""
        t, mode = info.type, info.mode or "lo"
        a, b = self.ints(ctx, ins, t, 1, 2)
        a, b = self._narrow(a, 24, t[0] == "s", ctx), self._narrow(b, 24, t[0] == "s", ctx)
        em = self.em(ctx)
        r = em.alu("MUL", a, b)
        if mode == "hi":
            h = em.alu("MULHS" if t[0] == "s" else "MULHU", a, b)
            r = em.alu("OR", em.alu("SHR", r, 16), em.alu("SHL", h, 16))
        if ins.op == "mad24":
            if info.sat:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
            r = em.alu("ADD", r, self.ints(ctx, ins, t, 3)[0])
        self.put(ctx, ins, t, r)

    op_mad24 = op_mul24

    def op_div(self, ctx, ins, info):
        t = info.type
        fn = _DIVREM.get((ins.op, t[0], min(64, max(32, _bits(t)))))
        if fn is None:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        a, b = self.ints(ctx, ins, t, 1, 2)
        self.put(ctx, ins, t, fn(self.em(ctx), a, b))

    op_rem = op_div

    def op_sad(self, ctx, ins, info):
        t = info.type
        a, b, c = self.ints(ctx, ins, t, 1, 2, 3)
        self.put(ctx, ins, t, ic.sad(self.em(ctx), a, b, c, signed=t[0] == "s"))

    def op_min(self, ctx, ins, info):
        t = info.type
        signed = t[0] == "s"
        a, b = self.ints(ctx, ins, t, 1, 2)
        em = self.em(ctx)
        if _bits(t) == 64:
            self.put(ctx, ins, t, (ic.min64 if ins.op == "min" else ic.max64)(em, a, b, signed))
            return
        lt = em.alu("LT" if signed else "LTU", a, b)
        self.put(ctx, ins, t, em.alu("SEL", a, b, lt) if ins.op == "min" else em.alu("SEL", b, a, lt))

    op_max = op_min

    # -- bits ----------------------------------------------------------------------------------

    def op_and(self, ctx, ins, info):
        t = info.type
        name = {"and": "AND", "or": "OR", "xor": "XOR"}[ins.op]
        if _bits(t) == 64:
            a = self.value(ctx, ins.operands[1], t, ins)
            b = self.value(ctx, ins.operands[2], t, ins)
            lo, hi = self.new(), self.new()
            self.emit(alu(name, lo, a[0], b[0], ptx_pc=ctx["pc"]))
            self.emit(alu(name, hi, a[1], b[1], ptx_pc=ctx["pc"]))
            self.write(ctx, ins.operands[0], src(lo), src(hi), t, ins)
            return
        self._result(ctx, ins, t, self._binary32(ctx, ins, info, name))

    op_or = op_and
    op_xor = op_and

    def op_not(self, ctx, ins, info):
        t = info.type
        if t == "pred":
            a, _ = self.value(ctx, ins.operands[1], t, ins)
            r = self.new()
            self.emit(alu("XOR", r, a, 1, ptx_pc=ctx["pc"]))
            self.write(ctx, ins.operands[0], src(r), None, t, ins)
            return
        if _bits(t) == 64:
            a = self.value(ctx, ins.operands[1], t, ins)
            self.write(ctx, ins.operands[0], src(a[0], True), src(a[1], True), t, ins)
            return
        a, _ = self.value(ctx, ins.operands[1], t, ins)
        self._result(ctx, ins, t, src(a, True))

    def op_cnot(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1)
        em = self.em(ctx)
        if _bits(t) == 64:
            self.put(ctx, ins, t, (em.alu("EQ", em.alu("OR", a[0], a[1]), 0), src(Imm(0))))
            return
        self.put(ctx, ins, t, em.alu("EQ", a, 0))

    def op_shl(self, ctx, ins, info):
        t = info.type
        w = _bits(t)
        signed = ins.op == "shr" and t[0] == "s"
        a, = self.ints(ctx, ins, t, 1, extend=ins.op == "shr")    # shr shifts in the type's bits only
        n, = self.u32(ctx, ins, 2)
        em = self.em(ctx)
        if w == 64:
            fn = ic.shl64 if ins.op == "shl" else ic.sar64 if signed else ic.shr64
            self.put(ctx, ins, t, fn(em, a, n))
            return
        # 32-bit shifts give 0 (or the sign) for amounts past 31, which is right for narrower
        # types too once their value is extended
        self.put(ctx, ins, t, em.alu("SHL" if ins.op == "shl" else "SAR" if signed else "SHR", a, n))

    op_shr = op_shl

    def op_shf(self, ctx, ins, info):
        a, b, n = self.u32(ctx, ins, 1, 2, 3)
        self.put(ctx, ins, "b32", ic.shf(self.em(ctx), a, b, n, left=info.mode == "l",
                                          clamp="clamp" in info.flags))

    def op_popc(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1)
        em = self.em(ctx)
        if _bits(t) == 64:
            fn = {"popc": ic.popc64, "clz": ic.clz64, "brev": ic.brev64}[ins.op]
            self.put(ctx, ins, t if ins.op == "brev" else "u32", fn(em, a))
            return
        r = em.alu({"popc": "POPC", "clz": "CLZ", "brev": "BREV"}[ins.op], a)
        self.put(ctx, ins, t if ins.op == "brev" else "u32", r)

    op_clz = op_popc
    op_brev = op_popc

    def op_bfind(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1)
        self.put(ctx, ins, "u32", ic.bfind(self.em(ctx), a, width=_bits(t), signed=t[0] == "s",
                                            shiftamt="shiftamt" in info.flags))

    def op_bfe(self, ctx, ins, info):
        t = info.type
        fn = _BFE.get((t[0], _bits(t)))
        if fn is None:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        a, = self.ints(ctx, ins, t, 1)
        pos, length = self.u32(ctx, ins, 2, 3)
        self.put(ctx, ins, t, fn(self.em(ctx), a, pos, length))

    def op_bfi(self, ctx, ins, info):
        t = info.type
        if _bits(t) not in (32, 64):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        a, b = self.ints(ctx, ins, t, 1, 2)
        pos, length = self.u32(ctx, ins, 3, 4)
        fn = ic.bfi_b64 if _bits(t) == 64 else ic.bfi_b32
        self.put(ctx, ins, t, fn(self.em(ctx), a, b, pos, length))

    def op_prmt(self, ctx, ins, info):
        if info.mode not in ic.PRMT_MODES:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        a, b, c = self.u32(ctx, ins, 1, 2, 3)
        self.put(ctx, ins, "b32", ic.prmt(self.em(ctx), a, b, c, mode=info.mode))

    def op_lop3(self, ctx, ins, info):
        a, b, c, lut = self.u32(ctx, ins, 1, 2, 3, 4)
        if not isinstance(lut.value, Imm):
            raise AssemblerError("lop3 needs an immediate truth table", ins)
        self.put(ctx, ins, "b32", _lop3(self.em(ctx), a, b, c, (~lut.value.value if lut.inv else lut.value.value) & 0xFF))

    def op_dp4a(self, ctx, ins, info):
        """dp4a/dp2a: c + the products of a's bytes (dp2a: halfwords) and b's bytes, each extended
        by its operand's signedness (the sum modulo 2^32 does not depend on c's)."""
        a, b, c = self.u32(ctx, ins, 1, 2, 3)
        em = self.em(ctx)
        aw = 8 if ins.op == "dp4a" else 16
        boff = 2 if ins.op == "dp2a" and info.mode == "hi" else 0
        acc = c
        for i in range(32 // aw):
            x = _field(em, a, aw * i, aw, info.type == "s32")
            y = _field(em, b, 8 * (i + boff), 8, info.src_type == "s32")
            acc = em.alu("ADD", acc, em.alu("MUL", x, y))
        self.put(ctx, ins, "b32", acc)

    op_dp2a = op_dp4a

    # -- compare / select ------------------------------------------------------------------------------

    def compare(self, ctx, ins, cmp: str, t: str, a_op, b_op, ftz: bool = False) -> Src:
        pc = ctx["pc"]
        if t in _FLOATS:
            return self.float_compare(ctx, ins, cmp, t, a_op, b_op, ftz)
        w = _bits(t)
        signed = t[0] == "s"
        if cmp in ("lo", "ls", "hi", "hs"):
            signed = False
            cmp = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}[cmp]
        if w == 64:
            a = self.value(ctx, a_op, t, ins)
            b = self.value(ctx, b_op, t, ins)
            return self.compare64(ctx, cmp, a, b, signed)
        a, _ = self.value(ctx, a_op, t, ins)
        b, _ = self.value(ctx, b_op, t, ins)
        if w < 32:
            a, b = self._narrow(a, w, signed, ctx), self._narrow(b, w, signed, ctx)
        r = self.new()
        lt, le = ("LT", "LE") if signed else ("LTU", "LEU")
        table = {"eq": ("EQ", a, b, False), "ne": ("EQ", a, b, True), "lt": (lt, a, b, False),
                 "le": (le, a, b, False), "gt": (lt, b, a, False), "ge": (le, b, a, False)}
        name, x, y, negate = table[cmp]
        self.emit(alu(name, r, x, y, ptx_pc=pc))
        if negate:
            r2 = self.new()
            self.emit(alu("XOR", r2, src(r), 1, ptx_pc=pc))
            return src(r2)
        return src(r)

    def compare64(self, ctx, cmp, a, b, signed) -> Src:
        pc = ctx["pc"]
        e_lo, e_hi, r = self.new(), self.new(), self.new()
        if cmp in ("eq", "ne"):
            self.emit(alu("EQ", e_lo, a[0], b[0], ptx_pc=pc))
            self.emit(alu("EQ", e_hi, a[1], b[1], ptx_pc=pc))
            self.emit(alu("AND", r, src(e_lo), src(e_hi), ptx_pc=pc))
            if cmp == "ne":
                r2 = self.new()
                self.emit(alu("XOR", r2, src(r), 1, ptx_pc=pc))
                return src(r2)
            return src(r)
        if cmp in ("gt", "ge"):
            a, b = b, a
            cmp = "lt" if cmp == "gt" else "le"
        # a < b  <=>  hi_a < hi_b or (hi_a == hi_b and lo_a < lo_b (unsigned))
        lo_cmp = "LTU" if cmp == "lt" else "LEU"
        hlt, heq, llt, t = self.new(), self.new(), self.new(), self.new()
        self.emit(alu("LT" if signed else "LTU", hlt, a[1], b[1], ptx_pc=pc))
        self.emit(alu("EQ", heq, a[1], b[1], ptx_pc=pc))
        self.emit(alu(lo_cmp, llt, a[0], b[0], ptx_pc=pc))
        self.emit(alu("AND", t, src(heq), src(llt), ptx_pc=pc))
        self.emit(alu("OR", r, src(hlt), src(t), ptx_pc=pc))
        return src(r)

    def op_setp(self, ctx, ins, info):
        r = self.compare(ctx, ins, info.cmp, info.type, ins.operands[1], ins.operands[2], info.ftz)
        nr = None
        pc = ctx["pc"]
        dst = ins.operands[0]
        if isinstance(dst, Pair):
            n = self.new()
            self.emit(alu("XOR", n, r, 1, ptx_pc=pc))
            nr = src(n)
        if info.boolop:
            c, _ = self.value(ctx, ins.operands[3], "pred", ins)
            name = info.boolop.upper()
            x = self.new()
            self.emit(alu(name, x, r, c, ptx_pc=pc))
            if nr is not None:
                y = self.new()
                self.emit(alu(name, y, nr, c, ptx_pc=pc))
                nr = src(y)
            r = src(x)
        if isinstance(dst, Pair):
            self.write(ctx, dst.first, r, None, "pred", ins)
            self.write(ctx, dst.second, nr, None, "pred", ins)
        else:
            self.write(ctx, dst, r, None, "pred", ins)

    def op_set(self, ctx, ins, info):
        r = self.compare(ctx, ins, info.cmp, info.src_type, ins.operands[1], ins.operands[2], info.ftz)
        if info.boolop:
            c, _ = self.value(ctx, ins.operands[3], "pred", ins)
            x = self.new()
            self.emit(alu(info.boolop.upper(), x, r, c, ptx_pc=ctx["pc"]))
            r = src(x)
        m = self.new()
        if info.type == "f32":                    # 1.0f or 0
            self.emit(alu("SEL", m, 0x3F800000, 0, r, ptx_pc=ctx["pc"]))
        else:                                     # 0 - r: all ones or 0
            self.emit(alu("ADD", m, 0, src(r, True), cin="1", ptx_pc=ctx["pc"]))
        self.write(ctx, ins.operands[0], src(m), None, info.type, ins)

    float_setp = op_setp
    float_set = op_set

    def op_selp(self, ctx, ins, info):
        """selp d, a, b, p (p ? a : b) and slct d, a, b, c (c >= 0 ? a : b, c an s32)."""
        t = info.type
        em = self.em(ctx)
        if ins.op == "selp":
            c, _ = self.value(ctx, ins.operands[3], "pred", ins)
        elif info.src_type == "s32":
            c = em.alu("LE", 0, self.u32(ctx, ins, 3)[0])
        else:                                     # slct.*.f32: c >= 0 (NaN: b)
            c = self.float_compare(ctx, ins, "ge", "f32", ins.operands[3], PImm(0), info.ftz)
        a = self.value(ctx, ins.operands[1], t, ins)
        b = self.value(ctx, ins.operands[2], t, ins)
        hi = em.alu("SEL", a[1], b[1], c) if _bits(t) == 64 else None
        self.write(ctx, ins.operands[0], em.alu("SEL", a[0], b[0], c), hi, t, ins)

    op_slct = op_selp

    # -- moves and conversions -------------------------------------------------------------------------

    def op_mov(self, ctx, ins, info):
        t = info.type
        d, a = ins.operands
        pc = ctx["pc"]
        if isinstance(d, Vec):        # unpack
            w = _bits(t) // len(d.items)
            if w == 32 and _bits(t) == 64:
                lo, hi = self.value(ctx, a, t, ins)
                for part, r in zip((lo, hi), d.items):
                    if r is not None:
                        self.write(ctx, r, part, None, "b32", ins)
                return
            if w == 16 and _bits(t) == 32:
                x, _ = self.value(ctx, a, t, ins)
                for k, r in enumerate(d.items):
                    if r is not None:
                        y = self.new()
                        if k == 0:
                            self.emit(alu("AND", y, x, 0xFFFF, ptx_pc=pc))
                        else:
                            self.emit(alu("SHR", y, x, 16, ptx_pc=pc))
                        self.write(ctx, r, src(y), None, "b16", ins)
                return
            raise AssemblerError("this vector mov is not supported by the machine yet", ins)
        if isinstance(a, Vec):        # pack
            w = _bits(t) // len(a.items)
            parts = [self.value(ctx, r, f"b{w}", ins)[0] if r is not None else src(Imm(0)) for r in a.items]
            if w == 32 and _bits(t) == 64:
                self.write(ctx, d, parts[0], parts[1], t, ins)
                return
            if w == 16 and _bits(t) == 32:
                lo = self._narrow(parts[0], 16, False, ctx)
                hi_s = self.new()
                self.emit(alu("SHL", hi_s, parts[1], 16, ptx_pc=pc))
                r = self.new()
                self.emit(alu("OR", r, lo, src(hi_s), ptx_pc=pc))
                self.write(ctx, d, src(r), None, t, ins)
                return
            raise AssemblerError("this vector mov is not supported by the machine yet", ins)
        lo, hi = self.value(ctx, a, t, ins)
        self.write(ctx, d, lo, hi, t, ins)

    def op_cvt(self, ctx, ins, info):
        dt, st = info.type, info.src_type
        if dt in ("f32", "f64", "f16") or st in ("f32", "f64", "f16"):
            raise AssemblerError("floating-point conversions are not supported by the machine yet", ins)
        sw, dw = _bits(st), _bits(dt)
        signed = st[0] == "s"
        if sw == 64:
            lo, hi = self.value(ctx, ins.operands[1], st, ins)
        else:
            lo, _ = self.value(ctx, ins.operands[1], st, ins)
            lo = self._narrow(lo, sw, signed, ctx)
            hi = None
        if info.sat:
            lo, hi = self.saturate(ctx, (lo, hi), sw, signed, dt)
        if dw == 64:
            if sw == 64:
                self.write(ctx, ins.operands[0], lo, hi, dt, ins)
            else:
                h = self.new()
                if signed:
                    self.emit(alu("SAR", h, lo, 31, ptx_pc=ctx["pc"]))
                    self.write(ctx, ins.operands[0], lo, src(h), dt, ins)
                else:
                    self.write(ctx, ins.operands[0], lo, src(Imm(0)), dt, ins)
            return
        out = self._narrow(lo, dw, dt[0] == "s", ctx) if dw < 32 else lo
        self.write(ctx, ins.operands[0], out, None, dt, ins)

    def saturate(self, ctx, v: tuple, sw: int, signed: bool, dt: str) -> tuple:
        """cvt.sat between integer types: v, a (lo, hi) pair (hi None below 64 bits) of a source of
        width sw, clamped to dt's range (only the bounds inside the source's range cost ops)."""
        dw = _bits(dt)
        dlo, dhi = (-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if dt[0] == "s" else (0, (1 << dw) - 1)
        slo, shi = (-(1 << (sw - 1)), (1 << (sw - 1)) - 1) if signed else (0, (1 << sw) - 1)
        em = self.em(ctx)
        if v[1] is None:
            x, lt = v[0], "LT" if signed else "LTU"
            if dhi < shi:
                x = em.alu("SEL", dhi & M32, x, em.alu(lt, dhi & M32, x))
            if dlo > slo:
                x = em.alu("SEL", dlo & M32, x, em.alu(lt, x, dlo & M32))
            return x, None

        def pair(k):
            return src(Imm(k & M32)), src(Imm((k >> 32) & M32))
        if dhi < shi:
            v = ic.min64(em, v, pair(dhi), signed)
        if dlo > slo:
            v = ic.max64(em, v, pair(dlo), signed)
        return v

    def op_cvta(self, ctx, ins, info):
        """cvta: a generic address is the space's address plus its window base (the interpreter's
        GENERIC_WINDOWS: shared 1 << 32, local 2 << 32, const 3 << 32; global 0), so only the high
        word changes. cvta.to takes the low word (an address outside the window faults in the
        interpreter; here it just loses its high word)."""
        lo, hi = self.value(ctx, ins.operands[1], info.type, ins)
        if info.space == "global" or info.type == "u32":        # 32-bit: the bases' low words are 0
            self.write(ctx, ins.operands[0], lo, hi, info.type, ins)
            return
        base = GENERIC_WINDOWS.get(info.space)
        if base is None:
            raise AssemblerError(f"cvta for {info.space} is not supported by the machine", ins)
        if "to" in info.flags:
            self.write(ctx, ins.operands[0], lo, src(Imm(0)), info.type, ins)
            return
        self.write(ctx, ins.operands[0], lo, self.em(ctx).alu("ADD", hi, base >> 32), info.type, ins)

    # -- memory ----------------------------------------------------------------------------------------

    def address(self, ctx, a: Addr, space: str | None, ins) -> tuple:
        """(space, lo Src, hi Src) of an address operand, after the machine's space mapping."""
        if space is None:
            raise AssemblerError("generic addressing (ld/st without a state space) is not supported by "
                                 "the machine yet", ins)
        if isinstance(a.base, Reg):
            lo, hi = self.value(ctx, a.base, "u64", ins)
            if a.offset:
                lo, hi = self.add64(ctx, (lo, hi), (src(Imm(a.offset & M32)), src(Imm((a.offset >> 32) & M32))))
        else:
            addr = 0 if a.base is None else self.symbol_address(ctx, a.base.name, ins)
            addr += a.offset
            lo, hi = src(Imm(addr & M32)), src(Imm((addr >> 32) & M32))
        return space, lo, hi

    def op_ld(self, ctx, ins, info):
        d, a = ins.operands
        t = info.type
        if t in ("f32", "f64", "f16") and False:
            pass
        regs = list(d.items) if isinstance(d, Vec) else [d]
        size = max(1, _bits(t) // 8)
        if info.space == "param":
            self.param_load(ctx, ins, a, regs, t, size)
            return
        space, lo, hi = self.address(ctx, a, info.space, ins)
        # the machine loads 1, 2 or 4 bytes, zero-extended: wider loads are split into words,
        # signed narrow loads extended by shifts
        words = []
        for k in range(len(regs)):
            for half in range(2 if size == 8 else 1):
                words.append((k, half, k * size + 4 * half))
        got = {}
        for k, half, off in words:
            alo, ahi = (lo, hi) if off == 0 else self.add64(ctx, (lo, hi), (src(Imm(off)), src(Imm(0))))
            d = self.new()
            self.emit(MicroOp("mem", "LD", (d, None), extra={
                "space": space, "width": min(size, 4), "signed": False, "addr": (alo, ahi),
                "align": size * len(regs) if off == 0 else min(size, 4)}, ptx_pc=ctx["pc"]))
            got[(k, half)] = src(d)
        for k, r in enumerate(regs):
            if r is None:
                continue
            lo_v = got[(k, 0)]
            if size < 4 and t[0] == "s":
                lo_v = self._narrow(lo_v, 8 * size, True, ctx)
            self.write(ctx, r, lo_v, got[(k, 1)] if size == 8 else None, t, ins, signed_ext=t[0] == "s")

    op_ldu = op_ld

    def param_load(self, ctx, ins, a: Addr, regs, t, size):
        name = a.base.name
        pv = ctx["params"].get(name)
        if pv is None:
            raise AssemblerError(f"unknown parameter {name}", ins)
        for k, r in enumerate(regs):
            off = a.offset + k * size
            if pv[0] == "const":
                raw = pv[1]
                if off + size > len(raw):
                    raise AssemblerError(f"ld.param beyond parameter {name}", ins)
                v = int.from_bytes(raw[off:off + size], "little")
                if t[0] == "s" and size < 8:
                    if v >> (8 * size - 1):
                        v -= 1 << (8 * size)
                    v &= (1 << 64) - 1
                if r is not None:
                    lo, hi = src(Imm(v & M32)), src(Imm(v >> 32))
                    self.write(ctx, r, lo, hi if size == 8 or _bits(ctx["fn"].regs.get(r.name, "b32")) == 64 else None,
                               t, ins)
            else:
                slots = pv[1]           # byte offset -> (lo Src, hi Src, size)
                if off not in slots:
                    raise AssemblerError(f"parameter {name}+{off} was not stored", ins)
                lo, hi, _ = slots[off]
                if r is not None:
                    if size < 4:
                        lo = self._narrow(lo, 8 * size, t[0] == "s", ctx)
                    self.write(ctx, r, lo, hi if size == 8 else None, t, ins, signed_ext=t[0] == "s")

    def op_st(self, ctx, ins, info):
        a, s = ins.operands
        t = info.type
        srcs = list(s.items) if isinstance(s, Vec) else [s]
        size = max(1, _bits(t) // 8)
        if info.space == "param":
            name = a.base.name
            slots = ctx["params"].setdefault(name, ("slots", {}))[1]
            for k, o in enumerate(srcs):
                lo, hi = self.value(ctx, o, t, ins)
                slots[a.offset + k * size] = (lo, hi, size)
            return
        space, lo, hi = self.address(ctx, a, info.space, ins)
        for k, o in enumerate(srcs):
            vlo, vhi = self.value(ctx, o, t, ins)
            for half, part in enumerate([vlo, vhi] if size == 8 else [vlo]):
                off = k * size + 4 * half
                alo, ahi = (lo, hi) if off == 0 else self.add64(ctx, (lo, hi), (src(Imm(off)), src(Imm(0))))
                self.emit(MicroOp("mem", "ST", (), extra={
                    "space": space, "width": min(size, 4), "addr": (alo, ahi), "data": (part, None),
                    "align": size * len(srcs) if off == 0 else min(size, 4)}, ptx_pc=ctx["pc"]))

    def op_atom(self, ctx, ins, info):
        is_red = ins.op == "red"
        a = ins.operands[0] if is_red else ins.operands[1]
        srcs = ins.operands[1:] if is_red else ins.operands[2:]
        t, o = info.type, info.boolop
        if t in ("f32", "f64") and o == "exch":
            t = "b" + t[1:]                     # an exchange moves bits
        size = _bits(t) // 8
        space, lo, hi = self.address(ctx, a, info.space or "global", ins)
        b = self.value(ctx, srcs[0], t, ins)
        c = self.value(ctx, srcs[1], t, ins) if len(srcs) > 1 else (None, None)
        if t == "f32":
            d = self.atom_cas_loop(ctx, space, (lo, hi), b[0], lambda em, old: sf.add(em, old, b[0], "rn", ftz=True))
            if not is_red:
                self.write(ctx, ins.operands[0], d, None, t, ins)
            return
        if size == 8:
            d = self.atom64(ctx, ins, space, (lo, hi), o, t, b, c)
            if not is_red:
                self.write(ctx, ins.operands[0], d[0], d[1], t, ins)
            return
        dlo = self.new()
        self.emit(MicroOp("mem", "ATOM", (dlo, None), extra={
            "space": space, "width": size, "addr": (lo, hi), "data": b, "cmp": c,
            "atom": o, "signed": t[0] == "s", "align": size}, ptx_pc=ctx["pc"]))
        if not is_red:
            self.write(ctx, ins.operands[0], src(dlo), None, t, ins)

    # Atomics the memory unit does not do itself (it does 32-bit integer ones):
    # * atom.add.f32 is a compare-and-swap loop around the soft-float add (.ftz, .rn, as PTX
    #   defines it): the unit serves one lane per pass, so each round one more lane succeeds and
    #   the lanes add in lane order, as in the interpreter;
    # * 64-bit add/and/or/xor/exch are two 32-bit atomics (the low word's carry goes into the
    #   high word's addend); min/max/cas and f64 add are a load, the operation and a store done
    #   by one lane at a time (a loop over the lane index). The machine switches warps only when
    #   no lane of the current one can run, so nothing else touches memory in between.

    def _mem(self, ctx, kind: str, space: str, addr: tuple, dst=None, **extra) -> MicroOp:
        op = MicroOp("mem", kind, (dst, None) if dst is not None else (), extra={
            "space": space, "width": 4, "addr": addr, "signed": False, "align": 4, **extra}, ptx_pc=ctx["pc"])
        self.emit(op)
        return op

    def atom_cas_loop(self, ctx, space: str, addr: tuple, b: Src, update) -> Src:
        """The old 32-bit word at addr after atomically replacing it by update(em, old)."""
        old = self.new("atom.old")
        self._mem(ctx, "LD", space, addr, old)
        loop, done = self.fresh_label("atom_cas"), self.fresh_label("atom_done")
        self.end(("jump", loop))
        self.start(loop)
        new = update(self.em(ctx), src(old))
        r = self.new("atom.seen")
        self._mem(ctx, "ATOM", space, addr, r, data=(src(old), None), cmp=(new, None), atom="cas")
        em = self.em(ctx)
        ok = em.alu("EQ", src(r), src(old))
        self.emit(alu("MOV", old, src(r), ptx_pc=ctx["pc"]))
        self.end(("branch", ok, False, loop, done))
        self.start(done)
        return src(old)

    def atom64(self, ctx, ins, space: str, addr: tuple, o: str, t: str, b: tuple, c: tuple) -> tuple:
        """A 64-bit atomic (see above); returns the old value as a (lo, hi) pair."""
        addr_hi = self.add64(ctx, addr, (src(Imm(4)), src(Imm(0))))
        if o in ("add", "and", "or", "xor", "exch") and t != "f64":
            dlo, dhi = self.new(), self.new()
            self._mem(ctx, "ATOM", space, addr, dlo, data=(b[0], None), atom=o, align=8)
            bh = b[1]
            if o == "add":                      # the low word's carry
                em = self.em(ctx)
                carry = em.alu("LTU", em.alu("ADD", src(dlo), b[0]), src(dlo))
                bh = em.alu("ADD", b[1], carry)
            self._mem(ctx, "ATOM", space, addr_hi, dhi, data=(bh, None), atom=o)
            return src(dlo), src(dhi)
        if o not in ("add", "min", "max", "cas"):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine", ins)
        olo, ohi = self.new("atom.old"), self.new("atom.old.hi")

        def body():
            self._mem(ctx, "LD", space, addr, olo, align=8)
            self._mem(ctx, "LD", space, addr_hi, ohi)
            old, em = (src(olo), src(ohi)), self.em(ctx)
            if o == "add":
                new = sf.add64(em, old, b, "rn")
            elif o == "cas":
                same = em.alu("AND", em.alu("EQ", old[0], b[0]), em.alu("EQ", old[1], b[1]))
                new = (em.alu("SEL", c[0], old[0], same), em.alu("SEL", c[1], old[1], same))
            else:
                new = (ic.min64 if o == "min" else ic.max64)(em, old, b, t[0] == "s")
            self._mem(ctx, "ST", space, addr, data=(new[0], None), align=8)
            self._mem(ctx, "ST", space, addr_hi, data=(new[1], None))
        self.one_lane_at_a_time(ctx, ins, body)
        return src(olo), src(ohi)

    def one_lane_at_a_time(self, ctx, ins, body):
        """Run body() for the current lanes one after the other, in lane order."""
        pc = ctx["pc"]
        j = self.new("lane.j")
        self.emit(alu("MOV", j, 0, ptx_pc=pc))
        head, turn, nxt, done = (self.fresh_label(x) for x in ("lanes", "lane_turn", "lane_next", "lanes_done"))
        self.end(("jump", head))
        self.start(head)
        mine = self.em(ctx).alu("EQ", self.special("%laneid", ins), src(j))
        self.end(("branch", mine, True, turn, nxt))
        self.start(turn)
        body()
        self.end(("jump", nxt))
        self.start(nxt)
        self.emit(alu("ADD", j, src(j), 1, ptx_pc=pc))
        more = self.em(ctx).alu("LTU", src(j), 4)
        self.end(("branch", more, True, head, done))
        self.start(done)

    op_red = float_atom = float_red = op_atom

    # -- floating point -----------------------------------------------------------------------------
    # Every float instruction is a routine of `softfloat` (straight-line micro-ops, bit-exact with
    # `qwengpu.interp.floats`): `floats` reads the operands (an f64 value is a (lo, hi) pair),
    # `soft` runs a routine and turns what it does not implement into an AssemblerError.

    def floats(self, ctx, ins, t: str, *idx) -> list:
        """Operands `idx` of `ins` read as float type t: (lo, hi) pairs for f64, else a word."""
        out = []
        for k in idx:
            lo, hi = self.value(ctx, ins.operands[k], t, ins)
            out.append((lo, hi) if t == "f64" else lo)
        return out

    @staticmethod
    def soft(ins, fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except sf.SoftFloatError as e:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine ({e})", ins) from None

    @staticmethod
    def f64_plain(ins, info):
        """f64 takes neither .ftz nor .sat (PTX; the interpreter refuses them too)."""
        if info.type == "f64" and (info.ftz or info.sat):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (.ftz/.sat on .f64 "
                                 "is not PTX)", ins)
        if info.type not in ("f32", "f64"):
            raise AssemblerError(f"`{ins.opcode}` (floating point) is not supported by the machine", ins)

    def float_add(self, ctx, ins, info):
        """add/sub/mul/div.{rnd}{.ftz}{.sat}.{f32,f64} (no modifier: .rn)."""
        t = info.type
        self.f64_plain(ins, info)
        a, b = self.floats(ctx, ins, t, 1, 2)
        fn = _FARITH[(ins.op, t == "f64")]
        kw = {} if t == "f64" else {"ftz": info.ftz} if ins.op == "div" else {"ftz": info.ftz, "sat": info.sat}
        if ins.op == "div" and info.sat:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (div takes no .sat)", ins)
        self.put(ctx, ins, t, self.soft(ins, fn, self.em(ctx), a, b, info.rnd or "rn", **kw))

    float_sub = float_mul = float_div = float_add

    def float_fma(self, ctx, ins, info):
        """fma/mad.rnd{.ftz}{.sat}.{f32,f64} (mad.f64 without a rounding: .rn, as interpreted)."""
        t = info.type
        self.f64_plain(ins, info)
        a, b, c = self.floats(ctx, ins, t, 1, 2, 3)
        em, rnd = self.em(ctx), info.rnd or "rn"
        r = self.soft(ins, sf.fma64, em, a, b, c, rnd) if t == "f64" else \
            self.soft(ins, sf.fma, em, a, b, c, rnd, ftz=info.ftz, sat=info.sat)
        self.put(ctx, ins, t, r)

    float_mad = float_fma

    def float_rcp(self, ctx, ins, info):
        """rcp.rnd{.ftz}.{f32,f64}, sqrt.rnd{.ftz}.{f32,f64}."""
        t = info.type
        self.f64_plain(ins, info)
        if info.sat:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine ({ins.op} takes no .sat)", ins)
        a, = self.floats(ctx, ins, t, 1)
        em, rnd = self.em(ctx), info.rnd or "rn"
        if t == "f64":
            r = self.soft(ins, sf.rcp64 if ins.op == "rcp" else sf.sqrt64, em, a, rnd)
        else:
            r = self.soft(ins, sf.rcp if ins.op == "rcp" else sf.sqrt, em, a, rnd, ftz=info.ftz)
        self.put(ctx, ins, t, r)

    float_sqrt = float_rcp

    def float_min(self, ctx, ins, info):
        """min/max{.ftz}{.NaN}.{f32,f64}."""
        t = info.type
        self.f64_plain(ins, info)
        nan = "NaN" in info.flags
        a, b = self.floats(ctx, ins, t, 1, 2)
        em = self.em(ctx)
        if t == "f64":
            if nan:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (.NaN on .f64 is "
                                     "not PTX)", ins)
            r = self.soft(ins, sf.min64 if ins.op == "min" else sf.max64, em, a, b)
        else:
            r = self.soft(ins, sf.min if ins.op == "min" else sf.max, em, a, b, ftz=info.ftz, nan=nan)
        self.put(ctx, ins, t, r)

    float_max = float_min

    def float_abs(self, ctx, ins, info):
        """abs/neg{.ftz}.{f32,f64} (an f32 NaN gives the canonical NaN, an f64 NaN passes)."""
        t = info.type
        self.f64_plain(ins, info)
        a, = self.floats(ctx, ins, t, 1)
        em = self.em(ctx)
        if t == "f64":
            r = self.soft(ins, sf.abs64 if ins.op == "abs" else sf.neg64, em, a)
        else:
            r = self.soft(ins, sf.abs if ins.op == "abs" else sf.neg, em, a, ftz=info.ftz)
        self.put(ctx, ins, t, r)

    float_neg = float_abs

    def float_copysign(self, ctx, ins, info):
        """copysign.{f32,f64} d, a, b: the sign of a, the rest of b."""
        t = info.type
        self.f64_plain(ins, info)
        a, b = self.floats(ctx, ins, t, 1, 2)
        self.put(ctx, ins, t, self.soft(ins, sf.copysign64 if t == "f64" else sf.copysign, self.em(ctx), a, b))

    def float_testp(self, ctx, ins, info):
        """testp.mode.{f32,f64} -> a predicate."""
        t = info.type
        self.f64_plain(ins, info)
        a, = self.floats(ctx, ins, t, 1)
        r = self.soft(ins, sf.testp64 if t == "f64" else sf.testp, self.em(ctx), info.mode, a)
        self.write(ctx, ins.operands[0], r, None, "pred", ins)

    def float_compare(self, ctx, ins, cmp: str, t: str, a_op, b_op, ftz: bool) -> Src:
        """setp/set/slct comparison of two floats -> a 0/1 word."""
        if t not in ("f32", "f64"):
            raise AssemblerError(f"`{ins.opcode}` (floating point) is not supported by the machine", ins)
        if t == "f64" and ftz:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (.ftz on .f64 is not PTX)", ins)
        em = self.em(ctx)
        if t == "f64":
            a, b = self.value(ctx, a_op, t, ins), self.value(ctx, b_op, t, ins)
            return self.soft(ins, sf.compare64, em, cmp, a, b)
        a, b = self.value(ctx, a_op, t, ins)[0], self.value(ctx, b_op, t, ins)[0]
        return self.soft(ins, sf.compare, em, cmp, a, b, ftz=ftz)

    def float_cvt(self, ctx, ins, info):
        """cvt between floats and integers and between float widths: the soft-float routines, and
        what the interpreter also does through them (`convert`); other forms are refused."""
        dt, st = info.type, info.src_type
        dw = _bits(dt)
        lo, hi = self.value(ctx, ins.operands[1], st, ins)
        parts = (lo, hi) if _bits(st) == 64 else (lo,)
        if info.ftz and "f32" not in (dt, st):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (.ftz needs an .f32 side)", ins)
        out = self.convert(ctx, ins, parts, dt, st, info.rnd, info.sat, info.ftz)
        if dw == 64:
            self.write(ctx, ins.operands[0], out[0], out[1], dt, ins)
            return
        x = out[0]
        if dw < 32 and dt[0] == "s":
            x = self._narrow(x, dw, True, ctx)            # the routine zero-extends
        self.write(ctx, ins.operands[0], x, None, dt, ins, signed_ext=dt[0] == "s")

    def convert(self, ctx, ins, parts: tuple, dt: str, st: str, rnd, sat: bool, ftz: bool) -> tuple:
        """The conversion of `parts` (a word, or a (lo, hi) pair) from st to dt. Beyond what
        `softfloat.cvt` implements:
        * f16 sources go through f32 (exact), except that an f16 NaN widened to f64 keeps its
          sign and payload (as the interpreter's);
        * f16 results from f64 round to odd in f32 first (truncate, then set the last bit if
          anything was lost): f32 has 24 bits, at least two more than f16's 11, so rounding that
          once more to f16 in any mode is exact (Boldo & Melquiond). Integers go through f32
          truncated: one that f32 does not hold exactly (|x| >= 2^24) is far beyond f16's range;
        * .sat on an f64 result clamps the f64 value ([+0, 1], NaN and negatives to +0)."""
        def soft(p, d, s_, r=None, sat_=False, ftz_=False):
            return self.soft(ins, sf.cvt, self.em(ctx), p, d, s_, rnd=r, sat=sat_, ftz=ftz_)

        if dt == st and rnd is None and not ftz and not sat:
            return parts                                   # cvt.f64.f64 (.f32, .f16) with no modifier
        if dt[0] in "usb" and sat:
            sat = False                                    # float -> integer clamps anyway
        if dt == "f64" and sat:
            return self.sat64(ctx, self.convert(ctx, ins, parts, dt, st, rnd, False, ftz))
        if st == "f16" and dt not in ("f32", "f16"):
            if dt == "f64" and rnd is not None or dt != "f64" and rnd not in sf.IROUND:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (rounding modifier)", ins)
            x32 = soft(parts, "f32", "f16")
            out = soft(x32, dt, "f32", rnd)
            if dt == "f64":                                # an f16 NaN keeps its sign and payload
                em, x = self.em(ctx), parts[0]
                nan = em.alu("LTU", 0x7C00, em.alu("AND", x, 0x7FFF))
                nan_hi = em.alu("OR", em.alu("OR", em.alu("SHL", em.alu("AND", x, 0x3FF), 10), 0x7FF00000),
                                em.alu("SHL", em.alu("AND", x, 0x8000), 16))
                out = (em.alu("SEL", 0, out[0], nan), em.alu("SEL", nan_hi, out[1], nan))
            return out
        if dt == "f16" and st == "f16":
            if rnd is None and sat:                        # .sat alone: clamp through f32 (exact)
                return soft(soft(parts, "f32", "f16", sat_=True), "f16", "f32", "rn")
            if rnd not in sf.IROUND:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (rounding modifier)", ins)
            x32 = soft(soft(parts, "f32", "f16"), "f32", "f32", rnd)     # integral f16 values fit f16
            return soft(x32, "f16", "f32", "rn", sat)
        if dt == "f16" and st != "f32":
            if rnd not in sf.FROUND:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (rounding modifier)", ins)
            y = soft(parts, "f32", st, "rz")
            if st == "f64":
                back = soft(y, "f64", "f32")
                em = self.em(ctx)
                lost = em.alu("OR", em.alu("XOR", back[0], parts[0]), em.alu("XOR", back[1], parts[1]))
                y = (em.alu("OR", y[0], em.alu("LTU", 0, lost)),)
            return soft(y, "f16", "f32", rnd, sat)
        return soft(parts, dt, st, rnd, sat, ftz)

    def sat64(self, ctx, x: tuple) -> tuple:
        """.sat on an f64 value: NaN and negative values (-0 too) give +0, values above 1 give 1."""
        em = self.em(ctx)
        lo, hi = x
        ah = em.alu("AND", hi, 0x7FFFFFFF)
        above1 = em.alu("OR", em.alu("LTU", 0x3FF00000, hi), em.alu("AND", em.alu("EQ", hi, 0x3FF00000),
                                                                    em.alu("LTU", 0, lo)))
        nan = em.alu("OR", em.alu("LTU", 0x7FF00000, ah), em.alu("AND", em.alu("EQ", ah, 0x7FF00000),
                                                                em.alu("LTU", 0, lo)))
        zero = em.alu("OR", em.alu("SHR", hi, 31), nan)
        lo = em.alu("SEL", 0, em.alu("SEL", 0, lo, above1), zero)
        hi = em.alu("SEL", 0, em.alu("SEL", 0x3FF00000, hi, above1), zero)
        return lo, hi

    # -- control --------------------------------------------------------------------------------------

    def op_bra(self, ctx, ins, info):
        target = self.label_of(ctx, ins.operands[0].name)
        nxt = self.fresh_label("fall")
        if ins.guard is None:
            self.end(("jump", target))
        else:
            g, _ = self.value(ctx, ins.guard.reg, "pred", ins)
            self.end(("branch", g, not ins.guard.negated, target, nxt))
            self.start(nxt)

    def op_brx(self, ctx, ins, info):
        """brx.idx i, table: a binary tree of branches on i (depth log2 of the table's length). An
        index past the table makes the lane fault (the interpreter faults; PTX leaves it
        undefined): it loads from global address 0, which is never mapped."""
        idx, = self.u32(ctx, ins, 0)
        fn = ctx["fn"]
        names = fn.branch_targets.get(ins.operands[1].name)
        if not names:
            raise AssemblerError(f"brx.idx with unknown target list {ins.operands[1].name}", ins)
        targets = [self.label_of(ctx, n) for n in names]
        bad = self.fresh_label("brx_range")

        def tree(lo: int, hi: int) -> str:
            if hi - lo == 1:
                return targets[lo]
            here, mid = self.fresh_label("brx"), (lo + hi) // 2
            self.start(here)
            p = self.em(ctx).alu("LTU", idx, mid)
            block = self.cur
            left, right = tree(lo, mid), tree(mid, hi)
            block.term = ("branch", p, True, left, right)
            self.cur = None
            return here

        ok = self.em(ctx).alu("LTU", idx, len(targets))
        entry = self.cur
        root = tree(0, len(targets))
        entry.term = ("branch", ok, True, root, bad)
        self.start(bad)
        self._mem(ctx, "LD", "global", (src(Imm(0)), src(Imm(0))), self.new())
        self.end(("exit",))

    def op_ret(self, ctx, ins, info):
        nxt = self.fresh_label("after_ret")
        if ctx["ret_label"] is None or ins.op == "exit":
            term = ("exit",)
        else:
            term = ("jump", ctx["ret_label"])
        if ins.guard is not None:
            g, _ = self.value(ctx, ins.guard.reg, "pred", ins)
            body = self.fresh_label("ret")
            self.end(("branch", g, not ins.guard.negated, body, nxt))
            self.start(body)
            self.end(term)
        else:
            self.end(term)
        self.start(nxt)

    op_exit = op_ret

    def op_bar(self, ctx, ins, info):
        if info.mode == "warp":
            return                       # bar.warp.sync: lanes of a warp run together already
        if info.mode == "red":
            self.bar_red_op(ctx, ins, info)
            return
        nxt = self.fresh_label("after_bar")
        self.end(("barrier", nxt))
        self.start(nxt)

    op_barrier = op_bar

    # bar.red: three counter words in shared memory after the kernel's own (the machine has no
    # reduction at its barrier). Instance k of a bar.red in a thread (every thread runs the same
    # sequence) counts into word k % 3: each lane clears word (k + 1) % 3, adds its vote atomically
    # (popc, or: p; and: !p), passes the barrier and reads the sum. Word (k + 1) % 3 was last read
    # in instance k - 2, which every thread finished before barrier k - 1, and is next added to
    # after barrier k. Word 0 is cleared before a barrier at the kernel's entry (shared memory
    # keeps its contents from block to block). `self.bar_red`: (counter base, rotation register).

    def bar_red_prologue(self, ctx):
        lay = self.layout
        base = (lay.shared_size + 3) // 4 * 4
        for k in range(12):
            m = lay.machine_address("shared", base + k, 0)
            if m is None:
                raise AssemblerError("bar.red needs 12 bytes of shared memory after the kernel's own; "
                                     "the machine's shared window is full")
            lay.valid[m] = 1
        lay.shared_size = base + 12
        rot = self.new("bar.red.k")
        self.bar_red = (base, rot)
        self.emit(alu("MOV", rot, 0, ptx_pc=0))
        self.emit(MicroOp("mem", "ST", (), extra={"space": "shared", "width": 4, "addr": (src(Imm(base)), src(Imm(0))),
                                                  "data": (src(Imm(0)), None), "align": 4}, ptx_pc=0))
        nxt = self.fresh_label("bar_red_ready")
        self.end(("barrier", nxt))
        self.start(nxt)

    def bar_red_op(self, ctx, ins, info):
        base, rot = self.bar_red
        pc = ctx["pc"]
        p, _ = self.value(ctx, ins.operands[-1], "pred", ins)
        em = self.em(ctx)
        nxt = em.alu("SEL", 0, em.alu("ADD", src(rot), 1), em.alu("EQ", src(rot), 2))
        here = em.alu("ADD", em.alu("SHL", src(rot), 2), base)
        self._mem(ctx, "ST", "shared", (em.alu("ADD", em.alu("SHL", nxt, 2), base), src(Imm(0))), data=(src(Imm(0)), None))
        vote = em.alu("XOR", p, 1) if info.boolop == "and" else p
        self._mem(ctx, "ATOM", "shared", (here, src(Imm(0))), self.new(), data=(vote, None), atom="add")
        self.emit(alu("MOV", rot, nxt, ptx_pc=pc))
        after = self.fresh_label("after_bar_red")
        self.end(("barrier", after))
        self.start(after)
        total = self.new("bar.red.sum")
        self._mem(ctx, "LD", "shared", (here, src(Imm(0))), total)
        em = self.em(ctx)
        r = {"popc": src(total), "and": em.alu("EQ", src(total), 0), "or": em.alu("LTU", 0, src(total))}[info.boolop]
        self.write(ctx, ins.operands[0], r, None, "u32" if info.boolop == "popc" else "pred", ins)

    def op_membar(self, ctx, ins, info):
        return

    op_fence = op_membar
    op_nanosleep = op_membar

    def op_call(self, ctx, ins, info):
        ops = ins.operands
        fi = next(i for i, o in enumerate(ops) if isinstance(o, Label))
        rets = ops[0].items if fi > 0 and isinstance(ops[0], ArgList) else ()
        args = ops[fi + 1].items if fi + 1 < len(ops) and isinstance(ops[fi + 1], ArgList) else ()
        callee = self.module.functions[ops[fi].name]
        depth = ctx.get("depth", 0)
        if depth > 16:
            raise AssemblerError("call depth exceeds 16 (recursion is not supported by the machine)", ins)
        params = {}
        for a_sym, p in zip(args, callee.params):
            pv = ctx["params"].get(a_sym.name)
            if pv is None:
                raise AssemblerError(f"call argument {a_sym.name} was not stored", ins)
            params[p.name] = pv
        ret_label = self.fresh_label(f"ret_{callee.name}")
        local_base = ctx["local_base"] + self.layout.local_size.get(ctx["fn"].name, 0)
        sub = {"fn": callee, "regs": {}, "params": params, "pc": 0, "ret_label": ret_label,
               "local_base": local_base, "prefix": f"{callee.name}@{self.label_counter}/", "depth": depth + 1}
        self.label_counter += 1
        self.end(("jump", sub["prefix"] + "entry"))
        self.start(sub["prefix"] + "entry")
        sub["entry_block"] = self.cur
        self.lower_function(sub)
        self.start(ret_label)
        for r_sym, p in zip(rets, callee.returns):
            pv = sub["params"].get(p.name)
            if pv is None:
                raise AssemblerError(f"{callee.name} does not store its return value {p.name}", ins)
            ctx["params"][r_sym.name] = pv

    # -- warp-level ---------------------------------------------------------------------------------------

    def op_shfl(self, ctx, ins, info):
        d, a, b, c, mm = ins.operands
        x, _ = self.value(ctx, a, "b32", ins)
        bv, _ = self.value(ctx, b, "b32", ins)
        cv, _ = self.value(ctx, c, "b32", ins)
        r, p = self.new(), self.new()
        self.emit(MicroOp("xlane", "SHFL", (r, p), a=x, extra={"mode": info.mode, "bsrc": (bv,), "csrc": (cv,)},
                          ptx_pc=ctx["pc"]))
        if isinstance(d, Pair):
            self.write(ctx, d.first, src(r), None, "b32", ins)
            self.write(ctx, d.second, src(p), None, "pred", ins)
        else:
            self.write(ctx, d, src(r), None, "b32", ins)

    def op_match(self, ctx, ins, info):
        """match.{any,all}.sync: every lane reads each lane's value with shfl.idx (the warp has
        four lanes). The members are the membermask's active lanes; .all compares with the lowest
        member's value (ctz = clz of the bit-reversed mask), as the interpreter does."""
        d, a, mm = ins.operands
        pc = ctx["pc"]
        w = _bits(info.type)
        x = self.value(ctx, a, info.type, ins)
        words = [x[0]] + ([x[1]] if w == 64 else [])
        m, _ = self.value(ctx, mm, "b32", ins)
        act = self.new()
        self.emit(MicroOp("xlane", "ACTIVEMASK", (act,), ptx_pc=pc))
        em = self.em(ctx)
        members = em.alu("AND", m, src(act))

        def shfl(v: Src, lane: Src) -> Src:
            r, p = self.new(), self.new()
            self.emit(MicroOp("xlane", "SHFL", (r, p), a=v, extra={"mode": "idx", "bsrc": (lane,),
                                                                   "csrc": (src(Imm(0x1F)),)}, ptx_pc=pc))
            return src(r)

        def equal(lane: Src, ref: list) -> Src:
            eq = [em.alu("EQ", shfl(v, lane), r) for v, r in zip(words, ref)]
            return eq[0] if len(eq) == 1 else em.alu("AND", eq[0], eq[1])

        if info.mode == "any":
            out = None
            for j in range(4):
                bit = em.alu("SHL", equal(src(Imm(j)), words), j)
                out = bit if out is None else em.alu("OR", out, bit)
            self.write(ctx, d, em.alu("AND", out, members), None, "b32", ins)
            return
        first = em.alu("CLZ", em.alu("BREV", members))
        ref = [shfl(v, first) for v in words]
        same = None
        for j in range(4):
            ok = em.alu("OR", equal(src(Imm(j)), ref), src(em.alu("AND", em.alu("SHR", members, j), 1), True))
            same = ok if same is None else em.alu("AND", same, ok)
        same = em.alu("AND", same, 1)
        res = em.alu("SEL", members, 0, same)
        if isinstance(d, Pair):
            self.write(ctx, d.first, res, None, "b32", ins)
            self.write(ctx, d.second, same, None, "pred", ins)
        else:
            self.write(ctx, d, res, None, "b32", ins)

    def op_vote(self, ctx, ins, info):
        d, a, mm = ins.operands
        x, _ = self.value(ctx, a, "pred", ins)
        r = self.new()
        self.emit(MicroOp("xlane", "VOTE", (r,), a=x, extra={"mode": info.mode}, ptx_pc=ctx["pc"]))
        self.write(ctx, d, src(r), None, "b32" if info.mode == "ballot" else "pred", ins)

    def op_activemask(self, ctx, ins, info):
        r = self.new()
        self.emit(MicroOp("xlane", "ACTIVEMASK", (r,), ptx_pc=ctx["pc"]))
        self.write(ctx, ins.operands[0], src(r), None, "b32", ins)


def _float_literal(o: PImm, w: int, ins: Instr) -> int:
    """The bits of an immediate read as a w-bit float, as the interpreter reads it: an exact hex
    literal of the same width as is, anything else (the other width, a decimal or integer
    literal) converted by value."""
    from qwengpu.interp.interpreter import float_bits
    if o.bits is not None and o.width == w:
        return o.bits & ((1 << w) - 1)
    try:
        return float_bits(float(o.value), w)
    except (OverflowError, ValueError) as e:
        raise AssemblerError(f"the literal {o} does not convert to .f{w}: {e}", ins)


def _sat_add(em: Emitter, a: Src, b: Src, sub: bool) -> Src:
    """a + b (a - b) clamped to the signed 32-bit range: on overflow a and b (a and ~b) agree in
    sign and the sum does not, and the result saturates towards a's sign; 8 ops."""
    b = src(b, sub)
    r = em.alu("ADD", a, b, cin=str(int(sub)))
    over = em.alu("SHR", em.alu("AND", em.alu("XOR", a, r), em.alu("XOR", b, r)), 31)
    return em.alu("SEL", em.alu("XOR", em.alu("SAR", a, 31), 0x7FFFFFFF), r, over)


def _field(em: Emitter, x: Src, pos: int, width: int, signed: bool) -> Src:
    """Bits [pos, pos + width) of x, zero- or sign-extended (immediate position and width)."""
    if signed:
        return em.alu("SAR", em.alu("SHL", x, 32 - pos - width), 32 - width) if pos + width < 32 else \
            em.alu("SAR", x, pos)
    if pos + width == 32:
        return em.alu("SHR", x, pos)
    return em.alu("AND", em.alu("SHR", x, pos) if pos else x, (1 << width) - 1)


def _lop2(em: Emitter, b: Src, c: Src, t: int) -> Src:
    """The bitwise function of (b, c) with truth table t (bit 2b + c): one op or none."""
    if t & 8:                                      # f(1, 1) = 1: the complement of one below
        return src(_lop2(em, b, c, t ^ 0xF), True)
    if t == 0:
        return src(Imm(0))
    return {0b0001: lambda: src(em.alu("OR", b, c), True), 0b0010: lambda: em.alu("AND", c, src(b, True)),
            0b0011: lambda: src(b, True), 0b0100: lambda: em.alu("AND", b, src(c, True)),
            0b0101: lambda: src(c, True), 0b0110: lambda: em.alu("XOR", b, c),
            0b0111: lambda: src(em.alu("AND", b, c), True)}[t]()


def _lop3(em: Emitter, a: Src, b: Src, c: Src, lut: int) -> Src:
    """lop3: the bitwise function of (a, b, c) with truth table `lut` (bit 4a + 2b + c), as
    g0 ^ (g1 & a) with g0 = f(0, b, c) and g1 = f(0, b, c) ^ f(1, b, c): at most 4 ops."""
    g0 = _lop2(em, b, c, lut & 0xF)
    g1 = _lop2(em, b, c, (lut ^ (lut >> 4)) & 0xF)
    if isinstance(g1.value, Imm):
        k = ~g1.value.value if g1.inv else g1.value.value
        if k & M32 == 0:
            return g0
        t = a                                      # g1 all ones
    else:
        t = em.alu("AND", g1, a)
    if isinstance(g0.value, Imm):
        return src(t, bool((~g0.value.value if g0.inv else g0.value.value) & 1))
    return em.alu("XOR", g0, t)


def lower(module: Module, spec: LaunchSpec, kernel: Function, layout) -> MicroProgram:
    return _Lowerer(module, spec, kernel, layout).run()
