"""Warp-level instructions: shfl, vote, match, activemask (the cross-lane unit)."""
from __future__ import annotations

from qwengpu.machine.uops import Imm, MicroOp, Src, src
from qwengpu.ptx.ir import Pair

from .core import type_bits


class WarpOps:
    """The `op_*` / `float_*` methods of a `Lowerer` for these instructions."""

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
        w = type_bits(info.type)
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
