"""Compares and selects: setp, set, selp (integer and float compares, 64-bit ones in pairs)."""
from __future__ import annotations

from qwengpu.machine.uops import Src, alu, src
from qwengpu.ptx.ir import Imm as PImm
from qwengpu.ptx.ir import Pair

from .core import FLOATS, type_bits


class CompareOps:
    """The `op_*` / `float_*` methods of a `Lowerer` for these instructions."""

    def compare(self, ctx, ins, cmp: str, t: str, a_op, b_op, ftz: bool = False) -> Src:
        pc = ctx["pc"]
        if t in FLOATS:
            return self.float_compare(ctx, ins, cmp, t, a_op, b_op, ftz)
        w = type_bits(t)
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

    float_setp = op_setp

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
        hi = em.alu("SEL", a[1], b[1], c) if type_bits(t) == 64 else None
        self.write(ctx, ins.operands[0], em.alu("SEL", a[0], b[0], c), hi, t, ins)

    op_slct = op_selp
