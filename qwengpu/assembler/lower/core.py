"""The lowering's core: blocks and virtual registers, operands (registers, immediates, specials,
symbols), results, the walk over a function's instructions and the dispatch to the `op_*` /
`float_*` method of each instruction (the mixins of `qwengpu.assembler.lower`)."""
from __future__ import annotations

import functools

from dataclasses import dataclass, field

from qwengpu.launch import LaunchSpec
from qwengpu.machine.uops import M32, Imm, MicroOp, Special, Src, VReg, alu, src
from qwengpu.ptx.ir import TYPE_BITS, Addr, Function, Instr, Module, Neg, Reg, Sym
from qwengpu.ptx.ir import Imm as PImm
from qwengpu.ptx.ir import Special as PSpecial
from qwengpu.semantics.launch_model import kernel_param_bytes

from .. import intcode as ic
from ..emit import Emitter

FLOATS = ("f16", "f32", "f64")


def _reads(s, reg) -> bool:
    """Whether operand `s` (a Src) reads virtual register `reg`."""
    return isinstance(s, Src) and s.value == reg


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
    #: registers that keep their value for the whole launch in every lane, exited lanes included
    #: (live at every exit; never spilled): the warp's live-lane marks (`ControlOps.op_bar`)
    pinned: set = field(default_factory=set)
    #: loops whose preheader computes a divisor's part (`LoopDivisorOps`): 0 lowers as without them
    loops_hoisted: int = 0

    def block(self, label: str) -> Block:
        for b in self.blocks:
            if b.label == label:
                return b
        raise KeyError(label)


def type_bits(t: str) -> int:
    return 1 if t == "pred" else TYPE_BITS[t]


def float_literal(o: PImm, w: int, ins: Instr) -> int:
    """The bits of an immediate read as a w-bit float, as the interpreter reads it: an exact hex
    literal of the same width as is, anything else (the other width, a decimal or integer
    literal) converted by value."""
    from qwengpu.semantics.floats import float_bits
    if o.bits is not None and o.width == w:
        return o.bits & ((1 << w) - 1)
    try:
        return float_bits(float(o.value), w)
    except (OverflowError, ValueError) as e:
        raise AssemblerError(f"the literal {o} does not convert to .f{w}: {e}", ins)


class LowererCore:
    """What every kind of instruction builds on (see the module docstring)."""

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
            hi = self.new(name + ".hi") if type_bits(t) == 64 else None
            m[name] = (lo, hi)
        return m[name]

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

    def value(self, ctx, o, t: str, ins: Instr) -> tuple:
        """(lo Src, hi Src or None) of a source operand read as type t."""
        w = type_bits(t)
        if isinstance(o, Reg):
            lo, hi = self.reg(ctx, o.name)
            if w == 64:
                if hi is None:
                    # a 32-bit register read as 64 bits (relaxed typing): zero-extend
                    return src(lo), src(Imm(0))
                return src(lo), src(hi)
            return src(lo), None
        if isinstance(o, PImm):
            if t in FLOATS:
                v = float_literal(o, w, ins)
                return src(Imm(v & M32)), (src(Imm(v >> 32)) if w == 64 else None)
            if o.bits is not None:
                if o.width == 64:
                    return src(Imm(o.bits & M32)), src(Imm(o.bits >> 32))
                return src(Imm(o.bits)), (src(Imm(0)) if w == 64 else None)
            if isinstance(o.value, float):
                raise AssemblerError("decimal float literals are not supported by the machine", ins)
            if t == "pred":           # `mov.pred %p, -1`: a predicate holds 0 or 1 (`not.pred` is XOR 1)
                return src(Imm(int(o.value != 0))), None
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
        if dhi is not None and hi is not None and _reads(hi, dlo):
            # the pair is a parallel copy: hi is the register's old low half (a 64-bit shift by 32
            # folds to that), so hi lands first; a swap of the halves (a rotation by 32) keeps it aside
            if _reads(lo, dhi):
                kept = self.new()
                self.emit(alu("MOV", kept, hi, ptx_pc=pc))
                hi = src(kept)
            else:
                self.emit(alu("MOV", dhi, hi, ptx_pc=pc))
                self.emit(alu("MOV", dlo, lo, ptx_pc=pc))
                return
        self.emit(alu("MOV", dlo, lo, ptx_pc=pc))
        if dhi is not None:
            if hi is None:
                if signed_ext:
                    self.emit(alu("SAR", dhi, src(dlo), 31, ptx_pc=pc))
                else:
                    self.emit(alu("MOV", dhi, 0, ptx_pc=pc))
            else:
                self.emit(alu("MOV", dhi, hi, ptx_pc=pc))

    def run(self) -> MicroProgram:
        ctx = {"fn": self.kernel, "regs": {}, "params": self.kernel_params(), "pc": 0,
               "ret_label": None, "ret_vars": {}, "local_base": 0, "prefix": ""}
        entry = "entry"
        self.start(entry)
        ctx["entry_block"] = self.cur
        self.bar_red = None
        self.alive = None
        self.calls_prologue(ctx)
        self.barrier_prologue(ctx)
        if any(ins.op in ("bar", "barrier") and getattr(ins.info, "mode", None) == "red"
               for f in self.module.functions.values() for ins in f.body):
            self.bar_red_prologue(ctx)
        self.lower_function(ctx)
        if self.cur is not None:
            self.end(("exit",))
        self.lower_out_of_line()
        self.insert_call_frames()
        self.lower_shared_routines()
        self.barrier_epilogue()
        return MicroProgram(self.blocks, entry, self.nv, self.kernel.name, self.layout, self.specials,
                            {self.alive} if self.alive is not None else set(), getattr(self, "loops_hoisted", 0))

    def kernel_params(self) -> dict:
        """{parameter: ("const", its bytes)}: the kernel's parameters are constants of the program."""
        return {name: ("const", raw) for name, raw in kernel_param_bytes(self.kernel, self.spec,
                                                                     self.layout.buffer_addresses).items()}

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
                self.enter_loop(ctx, pc)             # a hoisted loop's preheader (`LoopDivisorOps`)
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
        body = self.loop_body_label(ctx, pc)         # a back edge skips its loop's preheader
        if body is not None:
            return body
        first = [n for n, p in fn.labels.items() if p == pc][0]
        return ctx["prefix"] + first

    FLOAT_CAPABLE = {"add", "sub", "mul", "mad", "div", "abs", "neg", "min", "max", "fma", "sqrt", "rcp",
                     "setp", "set", "selp", "copysign", "testp", "atom", "red", "cvt"}

    def lower(self, ctx, ins: Instr):
        info = ins.info
        op = ins.op
        h = getattr(self, "op_" + op, None)
        floaty = any(t in ("f16", "f16x2", "f32", "f64") for t in (getattr(info, "type", None), getattr(info, "src_type", None)))
        if floaty and op in self.FLOAT_CAPABLE and op not in ("selp",):
            h = getattr(self, "float_" + op, None)
            if h is None:
                raise AssemblerError(f"`{ins.opcode}` (floating point) is not supported by the machine yet", ins)
        if h is None:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        if op in ("ld", "st", "atom", "red") and getattr(info, "space", "") is None:
            h = functools.partial(self.generic_access, handler=h)
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
        w = type_bits(t)
        if w < 32 and w > 1:
            lo = self._narrow(lo, w, False, ctx)
        self.write(ctx, ins.operands[0], lo, hi, t, ins)

    def em(self, ctx) -> Emitter:
        return Emitter(self.new, self.cur.ops, ctx["pc"])

    def ints(self, ctx, ins, t: str, *idx, extend: bool = True) -> list:
        """Operands `idx` of `ins` read as integer type t: (lo, hi) pairs for 64-bit types, else a
        32-bit Src, extended from a narrower type's width by its signedness (`extend=False`: left
        as they are, for operations whose low bits depend only on the operands' low bits)."""
        w, out = type_bits(t), []
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

    def _mem(self, ctx, kind: str, space: str, addr: tuple, dst=None, **extra) -> MicroOp:
        op = MicroOp("mem", kind, (dst, None) if dst is not None else (), extra={
            "space": space, "width": 4, "addr": addr, "signed": False, "align": 4, **extra}, ptx_pc=ctx["pc"])
        self.emit(op)
        return op

    def address(self, ctx, a: Addr, space: str | None, ins) -> tuple:
        """(space, lo Src, hi Src) of an address operand, after the machine's space mapping."""
        if space is None:                       # generic: one space per copy (`MemoryOps.generic_access`)
            return ctx["generic"]
        return (space, *self.address_value(ctx, a, ins))

    def address_value(self, ctx, a: Addr, ins) -> tuple:
        """(lo Src, hi Src) of an address operand: its register or symbol plus its offset."""
        if isinstance(a.base, Reg):
            lo, hi = self.value(ctx, a.base, "u64", ins)
            if a.offset:
                lo, hi = self.add64(ctx, (lo, hi), (src(Imm(a.offset & M32)), src(Imm((a.offset >> 32) & M32))))
        else:
            addr = 0 if a.base is None else self.symbol_address(ctx, a.base.name, ins)
            addr += a.offset
            lo, hi = src(Imm(addr & M32)), src(Imm((addr >> 32) & M32))
        return lo, hi
