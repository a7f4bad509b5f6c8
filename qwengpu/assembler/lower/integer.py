"""Integer and bit instructions: add/sub/mul/mad (carry chains, 64-bit pairs), div/rem, min/max,
logic, shifts, bit fields, permutes, lop3, dp4a (most as `intcode` routines)."""
from __future__ import annotations

from qwengpu.machine.uops import M32, Imm, Src, VReg, alu, src

from .. import intcode as ic
from ..emit import Emitter
from .core import AssemblerError, type_bits


class IntegerOps:
    """The `op_*` / `float_*` methods of a `Lowerer` for these instructions."""

    def op_add(self, ctx, ins, info):
        t = info.type
        w = type_bits(t)
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
        self.put(ctx, ins, t, sat_add(em, a, b, sub) if info.sat else em.alu("ADD", a, src(b, sub), cin=str(int(sub))))

    op_sub = op_add

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
        into the flag for .cc; 32 or 64 bits (a 64-bit value: two words, the carry rippling)."""
        if info.type not in ("u32", "s32", "u64", "s64"):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        em = self.em(ctx)
        carry = src(self.cc(ctx)) if ins.op in ("addc", "subc", "madc") else src(Imm(0))
        pairs = zip(x, y) if isinstance(x, tuple) else [(x, y)]
        out = []
        for xi, yi in pairs:
            # as 64-bit sums of zero-extended words: the high word collects the carry (or -borrow)
            r, k = (ic.sub64 if sub else ic.add64)(em, (xi, src(Imm(0))), (yi, src(Imm(0))))
            r, k = (ic.sub64 if sub else ic.add64)(em, (r, k), (carry, src(Imm(0))))
            out.append(r)
            carry = em.alu("AND", k, 1)
        if "cc" in info.flags:
            self.emit(alu("MOV", self.cc(ctx), carry, ptx_pc=ctx["pc"]))
        self.put(ctx, ins, info.type, tuple(out) if len(out) == 2 else out[0])

    def op_neg(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1, extend=False)
        em = self.em(ctx)
        self.put(ctx, ins, t, ic.neg64(em, a) if type_bits(t) == 64 else em.alu("ADD", 0, src(a, True), cin="1"))

    def op_abs(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1)
        if type_bits(t) == 64:
            self.put(ctx, ins, t, ic.abs64(self.em(ctx), a))
            return
        em = self.em(ctx)
        self.put(ctx, ins, t, em.alu("SEL", em.alu("ADD", 0, src(a, True), cin="1"), a, em.alu("LT", a, 0)))

    def product(self, ctx, ins, t: str, mode: str, a, b):
        """mul.{lo,hi,wide} of operands read by `ints`: a Src, or a (lo, hi) pair for 64-bit
        results (mul.wide.{u,s}32 and 64-bit types)."""
        w, signed, em = type_bits(t), t[0] == "s", self.em(ctx)
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
        return t[0] + str(2 * type_bits(t)) if mode == "wide" else t

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
        self.put(ctx, ins, rt, self.add64(ctx, p, c) if type_bits(rt) == 64 else
                 sat_add(em, p, c, False) if info.sat else em.alu("ADD", p, c))

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
        fn = DIVREM.get((ins.op, t[0], min(64, max(32, type_bits(t)))))
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
        if type_bits(t) == 64:
            self.put(ctx, ins, t, (ic.min64 if ins.op == "min" else ic.max64)(em, a, b, signed))
            return
        lt = em.alu("LT" if signed else "LTU", a, b)
        self.put(ctx, ins, t, em.alu("SEL", a, b, lt) if ins.op == "min" else em.alu("SEL", b, a, lt))

    op_max = op_min

    def op_and(self, ctx, ins, info):
        t = info.type
        name = {"and": "AND", "or": "OR", "xor": "XOR"}[ins.op]
        if type_bits(t) == 64:
            a = self.value(ctx, ins.operands[1], t, ins)
            b = self.value(ctx, ins.operands[2], t, ins)
            lo, hi = self.new(), self.new()
            self.emit(alu(name, lo, a[0], b[0], ptx_pc=ctx["pc"]))
            self.emit(alu(name, hi, a[1], b[1], ptx_pc=ctx["pc"]))
            self.write(ctx, ins.operands[0], src(lo), src(hi), t, ins)
            return
        self._result(ctx, ins, t, self._binary32(ctx, ins, info, name))

    op_xor = op_and

    op_or = op_and

    def op_not(self, ctx, ins, info):
        t = info.type
        if t == "pred":
            a, _ = self.value(ctx, ins.operands[1], t, ins)
            r = self.new()
            self.emit(alu("XOR", r, a, 1, ptx_pc=ctx["pc"]))
            self.write(ctx, ins.operands[0], src(r), None, t, ins)
            return
        if type_bits(t) == 64:
            a = self.value(ctx, ins.operands[1], t, ins)
            self.write(ctx, ins.operands[0], src(a[0], True), src(a[1], True), t, ins)
            return
        a, _ = self.value(ctx, ins.operands[1], t, ins)
        self._result(ctx, ins, t, src(a, True))

    def op_cnot(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1)
        em = self.em(ctx)
        if type_bits(t) == 64:
            self.put(ctx, ins, t, (em.alu("EQ", em.alu("OR", a[0], a[1]), 0), src(Imm(0))))
            return
        self.put(ctx, ins, t, em.alu("EQ", a, 0))

    def op_shl(self, ctx, ins, info):
        t = info.type
        w = type_bits(t)
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
        if type_bits(t) == 64:
            fn = {"popc": ic.popc64, "clz": ic.clz64, "brev": ic.brev64}[ins.op]
            self.put(ctx, ins, t if ins.op == "brev" else "u32", fn(em, a))
            return
        r = em.alu({"popc": "POPC", "clz": "CLZ", "brev": "BREV"}[ins.op], a)
        self.put(ctx, ins, t if ins.op == "brev" else "u32", r)

    op_brev = op_popc

    op_clz = op_popc

    def op_bfind(self, ctx, ins, info):
        t = info.type
        a, = self.ints(ctx, ins, t, 1)
        self.put(ctx, ins, "u32", ic.bfind(self.em(ctx), a, width=type_bits(t), signed=t[0] == "s",
                                            shiftamt="shiftamt" in info.flags))

    def op_bfe(self, ctx, ins, info):
        t = info.type
        fn = BFE.get((t[0], type_bits(t)))
        if fn is None:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        a, = self.ints(ctx, ins, t, 1)
        pos, length = self.u32(ctx, ins, 2, 3)
        self.put(ctx, ins, t, fn(self.em(ctx), a, pos, length))

    def op_bfi(self, ctx, ins, info):
        t = info.type
        if type_bits(t) not in (32, 64):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine yet", ins)
        a, b = self.ints(ctx, ins, t, 1, 2)
        pos, length = self.u32(ctx, ins, 3, 4)
        fn = ic.bfi_b64 if type_bits(t) == 64 else ic.bfi_b32
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
        self.put(ctx, ins, "b32", lop3(self.em(ctx), a, b, c, (~lut.value.value if lut.inv else lut.value.value) & 0xFF))

    def op_dp4a(self, ctx, ins, info):
        """dp4a/dp2a: c + the products of a's bytes (dp2a: halfwords) and b's bytes, each extended
        by its operand's signedness (the sum modulo 2^32 does not depend on c's)."""
        a, b, c = self.u32(ctx, ins, 1, 2, 3)
        em = self.em(ctx)
        aw = 8 if ins.op == "dp4a" else 16
        boff = 2 if ins.op == "dp2a" and info.mode == "hi" else 0
        acc = c
        for i in range(32 // aw):
            x = bit_field(em, a, aw * i, aw, info.type == "s32")
            y = bit_field(em, b, 8 * (i + boff), 8, info.src_type == "s32")
            acc = em.alu("ADD", acc, em.alu("MUL", x, y))
        self.put(ctx, ins, "b32", acc)

    op_dp2a = op_dp4a


def sat_add(em: Emitter, a: Src, b: Src, sub: bool) -> Src:
    """a + b (a - b) clamped to the signed 32-bit range: on overflow a and b (a and ~b) agree in
    sign and the sum does not, and the result saturates towards a's sign; 8 ops."""
    b = src(b, sub)
    r = em.alu("ADD", a, b, cin=str(int(sub)))
    over = em.alu("SHR", em.alu("AND", em.alu("XOR", a, r), em.alu("XOR", b, r)), 31)
    return em.alu("SEL", em.alu("XOR", em.alu("SAR", a, 31), 0x7FFFFFFF), r, over)


def bit_field(em: Emitter, x: Src, pos: int, width: int, signed: bool) -> Src:
    """Bits [pos, pos + width) of x, zero- or sign-extended (immediate position and width)."""
    if signed:
        return em.alu("SAR", em.alu("SHL", x, 32 - pos - width), 32 - width) if pos + width < 32 else \
            em.alu("SAR", x, pos)
    if pos + width == 32:
        return em.alu("SHR", x, pos)
    return em.alu("AND", em.alu("SHR", x, pos) if pos else x, (1 << width) - 1)


def lop2(em: Emitter, b: Src, c: Src, t: int) -> Src:
    """The bitwise function of (b, c) with truth table t (bit 2b + c): one op or none."""
    if t & 8:                                      # f(1, 1) = 1: the complement of one below
        return src(lop2(em, b, c, t ^ 0xF), True)
    if t == 0:
        return src(Imm(0))
    return {0b0001: lambda: src(em.alu("OR", b, c), True), 0b0010: lambda: em.alu("AND", c, src(b, True)),
            0b0011: lambda: src(b, True), 0b0100: lambda: em.alu("AND", b, src(c, True)),
            0b0101: lambda: src(c, True), 0b0110: lambda: em.alu("XOR", b, c),
            0b0111: lambda: src(em.alu("AND", b, c), True)}[t]()


def lop3(em: Emitter, a: Src, b: Src, c: Src, lut: int) -> Src:
    """lop3: the bitwise function of (a, b, c) with truth table `lut` (bit 4a + 2b + c), as
    g0 ^ (g1 & a) with g0 = f(0, b, c) and g1 = f(0, b, c) ^ f(1, b, c): at most 4 ops."""
    g0 = lop2(em, b, c, lut & 0xF)
    g1 = lop2(em, b, c, (lut ^ (lut >> 4)) & 0xF)
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


#: div/rem by (op, signedness letter, width): narrower types are extended to 32 bits first
DIVREM = {("div", "u", 32): ic.div_u32, ("div", "s", 32): ic.div_s32,
           ("rem", "u", 32): ic.rem_u32, ("rem", "s", 32): ic.rem_s32,
           ("div", "u", 64): ic.div_u64, ("div", "s", 64): ic.div_s64,
           ("rem", "u", 64): ic.rem_u64, ("rem", "s", 64): ic.rem_s64}


#: bfe by (signedness letter, width)
BFE = {("u", 32): ic.bfe_u32, ("s", 32): ic.bfe_s32, ("u", 64): ic.bfe_u64, ("s", 64): ic.bfe_s64}
