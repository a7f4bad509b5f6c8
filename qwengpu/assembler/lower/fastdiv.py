"""Division by a divisor known in advance on the float unit: the divisor's part hoisted where one
register (or an immediate) divides more than once in a block, or divides in a loop that does not
write it (computed in the loop's preheader, `loopdiv`), each division then a range check
and a short sequence (`softfloat.unit.fast_quotient`: three unit ops in rn, four in rz, rm, rp),
the full division as a shared routine for the lanes outside its range (docs/softfloat.md, "A
divisor known in advance")."""
from __future__ import annotations

import dataclasses

from qwengpu.machine.uops import M32, Imm, Src, VReg, src

from ..softfloat import unit as sf_unit


class FastDivisionOps:
    """The `Lowerer`'s methods for a division by a hoisted divisor (`FloatOps.float_div` asks
    `unit_fast_divisor` first)."""

    def unit_fast_divisor(self, ctx, ins, c: Src, ftz: bool, rnd: str) -> tuple | None:
        """(yh, -c, lo, width, yl) of `softfloat.unit.fast_divisor(c)` when c is a hoisted divisor:
        computed in the preheader of a loop that does not write it (`LoopDivisorOps.enter_loop`), or
        at the first of two or more divisions by one register in a block (`_divides_again`), shared
        by the next while the register is not written again; yl (None until then) at the first
        division in a directed mode. None where c divides once (the short
        path's divisor part costs more than the sequence's, `unit_divisor`). An immediate divisor's
        part is folded (`constant_fast_divisor`), so one division by it is short too."""
        if isinstance(c.value, Imm):
            return constant_fast_divisor(c.value.value ^ (M32 if c.inv else 0), rnd)
        looped = self.loop_divisor(ctx)          # computed in its loop's preheader (`LoopDivisorOps`)
        if looped is not None:
            return looped
        blk = self.cur
        cache = getattr(self, "_fast_divisors", None)
        if cache is None or cache[0] is not blk:
            cache = self._fast_divisors = (blk, {})
        hit = cache[1].get((c, ftz))
        if hit is not None and self._unwritten(c, blk, hit[1]):
            parts = hit[0]
        elif self._divides_again(ctx, ins, ftz):
            parts = self.soft(ins, sf_unit.fast_divisor, self.em(ctx), c) + (None,)
        else:
            return None
        if rnd != "rn" and parts[4] is None:
            parts = parts[:4] + (self.soft(ins, sf_unit.fast_low, self.em(ctx), parts[0], parts[1]),)
        cache[1][(c, ftz)] = (parts, hit[1] if hit is not None and parts is hit[0] else len(blk.ops))
        return parts

    @staticmethod
    def _unwritten(c: Src, blk, start: int) -> bool:
        return not (isinstance(c.value, VReg) and any(c.value in op.writes() for op in blk.ops[start:]))

    @staticmethod
    def _divides_again(ctx, ins, ftz: bool) -> bool:
        """Whether a later div.f32 in this block (no label, branch, guard or call before it)
        divides by ins's divisor (a register, before anything writes it, or the same immediate),
        with the same .ftz. A guess that only decides whether to hoist: `_unwritten` checks the
        micro-ops before a hoisted part is used."""
        fn, divisor = ctx["fn"], str(ins.operands[2])      # a register's name or an immediate's text
        labels = set(fn.labels.values())
        for pc in range(ctx["pc"] + 1, len(fn.body)):
            nxt = fn.body[pc]
            if pc in labels or nxt.guard is not None or nxt.op in BLOCK_ENDS:
                return False
            info = nxt.info
            if nxt.op == "div" and getattr(info, "type", None) == "f32" and bool(info.ftz) == bool(ftz) \
                    and str(nxt.operands[2]) == divisor:
                return True
            if nxt.operands and str(nxt.operands[0]) == divisor:
                return False
        return False

    def unit_fast_division(self, ctx, ins, a: Src, c: Src, fast: tuple, rnd: str, ftz: bool):
        """a / c by a hoisted divisor: the short path (`softfloat.unit.fast_quotient`, three unit ops
        in rn, four in rz, rm, rp) for the lanes where `fast_check` holds, the full division for the
        others (a branch: a warp whose lanes all pass runs the short path only); the hoisted parts
        stay shared after it."""
        yh, neg_c, lo, width, yl = fast
        ok = self.soft(ins, sf_unit.fast_check, self.em(ctx), a, lo, width)
        before, cache = self.cur, getattr(self, "_fast_divisors", None)
        hoisted = cache[1] if cache is not None and cache[0] is before else {}
        short, full, join = (self.fresh_label(n) for n in ("div_short", "div_full", "div_join"))
        self.end(("branch", ok, True, short, full))
        self.start(short)
        self.put(ctx, ins, "f32", self.soft(ins, sf_unit.fast_quotient, self.em(ctx), a, yh, neg_c, rnd, yl=yl))
        self._write_in_place()
        self.end(("jump", join))
        self.start(full)                 # rare: one shared copy of the whole division, called
        self.put(ctx, ins, "f32", self.shared_call(ctx, ins, sf_unit.div, (a, c), (rnd,), ftz=ftz))
        self.end(("jump", join))
        self.start(join)
        dest = self.reg(ctx, ins.operands[0].name)[0]
        self._fast_divisors = (self.cur, {k: (p, 0) for k, (p, start) in hoisted.items()
                                          if k[0].value != dest and self._unwritten(k[0], before, start)})

    def _write_in_place(self):
        """The block's last op `MOV d, t`, t written in the block by one op and read only there:
        that op writes d instead. (A register written on both sides of a branch is not
        copy-propagated, and the copy would be a bundle of its own, its carries paid twice.)"""
        ops = self.cur.ops
        mov = ops[-1] if ops else None
        if mov is None or mov.kind != "alu" or mov.op != "MOV" or mov.a.inv or not isinstance(mov.a.value, VReg):
            return
        t = mov.a.value
        makers = [k for k, op in enumerate(ops[:-1]) if t in op.writes()]
        if len(makers) == 1 and not any(t in op.reads() for op in ops[:-1]) and ops[makers[0]].dst == (t,):
            ops[makers[0]] = dataclasses.replace(ops[makers[0]], dst=mov.dst)
            ops.pop()


def constant_fast_divisor(c: int, rnd: str) -> tuple | None:
    """The short division's hoisted part of an immediate divisor c (f32 bits) as immediates,
    computed by the same routines evaluated at assembly time (`emit.Recorder.evaluate`: the ALU's
    and `uops.fpu_eval`'s semantics): (yh, -c, lo, width, yl), yl None in rn; None where c is
    outside the short path's range (its window is empty: the sequence then)."""
    from ..emit import Recorder
    rec = Recorder()
    x = rec.input()
    parts = sf_unit.fast_divisor(rec.emitter(), x)
    yh, neg_c, lo, width = (rec.evaluate({x.value: c}, p) for p in parts)
    if width == 0:
        return None
    yl = None
    if rnd != "rn":
        r2 = Recorder()
        h, n = r2.input(), r2.input()
        yl = src(Imm(r2.evaluate({h.value: yh, n.value: neg_c}, sf_unit.fast_low(r2.emitter(), h, n))))
    return tuple(src(Imm(v)) for v in (yh, neg_c, lo, width)) + (yl,)


#: PTX instructions after which the lowering starts a new block (`_divides_again` stops there)
BLOCK_ENDS = frozenset({"bra", "brx", "ret", "exit", "call", "bar", "barrier"})

