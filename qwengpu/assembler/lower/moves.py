"""Moves and integer conversions: mov (packing and unpacking vectors), cvt between integer types
(saturation), cvta (generic addresses)."""
from __future__ import annotations

from qwengpu.semantics.launch_model import GENERIC_WINDOWS
from qwengpu.machine.uops import M32, Imm, alu, src
from qwengpu.ptx.ir import Vec

from .. import intcode as ic
from .core import AssemblerError, type_bits


class MoveOps:
    """The `op_*` / `float_*` methods of a `Lowerer` for these instructions."""

    def op_mov(self, ctx, ins, info):
        t = info.type
        d, a = ins.operands
        pc = ctx["pc"]
        if isinstance(d, Vec):        # unpack
            w = type_bits(t) // len(d.items)
            if w == 32 and type_bits(t) == 64:
                lo, hi = self.value(ctx, a, t, ins)
                for part, r in zip((lo, hi), d.items):
                    if r is not None:
                        self.write(ctx, r, part, None, "b32", ins)
                return
            if w == 16 and type_bits(t) == 32:
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
            w = type_bits(t) // len(a.items)
            parts = [self.value(ctx, r, f"b{w}", ins)[0] if r is not None else src(Imm(0)) for r in a.items]
            if w == 32 and type_bits(t) == 64:
                self.write(ctx, d, parts[0], parts[1], t, ins)
                return
            if w == 16 and type_bits(t) == 32:
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
        sw, dw = type_bits(st), type_bits(dt)
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
        dw = type_bits(dt)
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
