"""A loop's division by a loop-invariant divisor: the divisor's part of the short division
(`softfloat.unit.fast_divisor`, and `fast_low` for the directed modes) computed once, in the loop's
preheader, so that every iteration's division takes the short path (`FastDivisionOps`;
docs/float_units.md, "A divisor known in advance").

The loops are found on the PTX function: a branch to an earlier (or the same) instruction is a
back edge, its target the loop's header, and the loop is the instructions from the header to its
last back edge. A loop is used only when nothing outside that range branches into it past the
header (every entry passes the header, so the preheader runs before any iteration) and it holds no
call (conservative: an out-of-line callee's frames and return values). A divisor register is
invariant in a loop when no instruction of the range names it as a destination (guarded writes
and the partial writes of vectors and pairs included). A division hoists to the outermost such
loop that contains it: its part is then computed once for all the iterations of the loops inside."""
from __future__ import annotations

from dataclasses import dataclass

from qwengpu.machine.uops import src
from qwengpu.ptx.cfg import operand_registers, successors
from qwengpu.ptx.ir import Function, Reg

from ..softfloat import unit as sf_unit


@dataclass(frozen=True)
class HoistedLoop:
    """A loop whose preheader computes the short division's parts of `divisors`: (register, the
    directed modes' yl needed too), in order of their first division."""
    header: int
    end: int
    divisors: tuple


@dataclass(frozen=True)
class LoopDivisors:
    """The loops with hoisted divisors, by header pc, and each hoisted division's (header,
    divisor register), by its pc."""
    loops: dict
    divisions: dict


def loops(fn: Function) -> dict[int, int]:
    """{header pc: last pc} of the function's loops that every entry enters through the header
    and that hold no call."""
    succ, n = successors(fn), len(fn.body)
    last: dict[int, int] = {}
    for pc, targets in enumerate(succ):
        for t in targets:
            if t <= pc:
                last[t] = max(last.get(t, t), pc)
    out = {}
    for head, end in last.items():
        side_entry = any(head < t <= end for pc, targets in enumerate(succ) if not head <= pc <= end
                         for t in targets if t < n)
        if not side_entry and not any(fn.body[pc].op == "call" for pc in range(head, end + 1)):
            out[head] = end
    return out


def written(fn: Function, first: int, last: int) -> set[str]:
    """The registers that instructions first..last may write: every register named in a first
    operand (PTX's destination; a store's address register too, which only makes it stricter)."""
    return {r for pc in range(first, last + 1) if fn.body[pc].operands for r in operand_registers(fn.body[pc].operands[0])}




def loop_divisors(fn: Function) -> LoopDivisors:
    """Each div.f32 by a register inside a loop that does not write it, hoisted to the outermost
    such loop (`loops`; the module docstring)."""
    candidates = [pc for pc, ins in enumerate(fn.body) if ins.op == "div" and
                  getattr(ins.info, "type", None) == "f32" and isinstance(ins.operands[2], Reg)]
    found = loops(fn) if candidates else {}
    writes = {head: written(fn, head, end) for head, end in found.items()}
    plans: dict[int, dict] = {}
    divisions = {}
    for pc in candidates:
        ins = fn.body[pc]
        reg = ins.operands[2].name
        around = [h for h, e in found.items() if h <= pc <= e and reg not in writes[h]]
        if not around:
            continue
        head = max(around, key=lambda h: (found[h] - h, -h))        # the outermost
        divisions[pc] = (head, reg)
        plan = plans.setdefault(head, {})
        plan[reg] = plan.get(reg, False) or (ins.info.rnd or "rn") != "rn"
    return LoopDivisors({h: HoistedLoop(h, found[h], tuple(p.items())) for h, p in plans.items()}, divisions)


class LoopDivisorOps:
    """The `Lowerer`'s preheaders: `lower_function` calls `enter_loop` at each labelled pc and
    `label_of` asks `loop_body_label` where a back edge goes."""

    #: hoist loop-invariant divisors (`assemble` lowers again without, when that does not fit)
    hoist_loop_divisors = True
    #: preheaders made so far (`MicroProgram.loops_hoisted`)
    loops_hoisted = 0

    def enter_loop(self, ctx, pc: int):
        """At a hoisted loop's header (its label's block just started, the preheader): compute
        its divisors' parts, then start the loop's own block, which the back edges target."""
        if not (self.hoist_loop_divisors and sf_unit.has_sequences(self.fpu) and not self.share_routines):
            return
        fn = ctx["fn"]
        if not hasattr(self, "_loop_plans"):
            self._loop_plans = {}                                 # function name -> LoopDivisors
        plan = self._loop_plans.get(fn.name)
        if plan is None:
            plan = self._loop_plans[fn.name] = loop_divisors(fn)
        loop = plan.loops.get(pc)
        if loop is None:
            return
        first_use = {reg: min(p for p, (h, r) in plan.divisions.items() if h == pc and r == reg)
                     for reg, _ in loop.divisors}
        parts = ctx.setdefault("loop_divisor_parts", {})
        for reg, low in loop.divisors:
            em = self.em(dict(ctx, pc=first_use[reg]))       # the lab shows them as the division's
            c = src(self.reg(ctx, reg)[0])
            yh, neg_c, lo, width = sf_unit.fast_divisor(em, c)
            yl = sf_unit.fast_low(em, yh, neg_c) if low else None
            for p, (h, r) in plan.divisions.items():
                if h == pc and r == reg:
                    parts[p] = (yh, neg_c, lo, width, yl)
        self.loops_hoisted += 1
        body = self.fresh_label(self.cur.label + "~loop")
        ctx.setdefault("loop_bodies", {})[pc] = (body, loop.end)
        self.end(("jump", body))
        self.start(body)

    def loop_body_label(self, ctx, target: int) -> str | None:
        """The label a branch at ctx's pc to `target` goes to when it is a hoisted loop's back edge
        (the loop's block after the preheader), else None."""
        body = ctx.get("loop_bodies", {}).get(target)
        return body[0] if body is not None and target <= ctx["pc"] <= body[1] else None

    def loop_divisor(self, ctx) -> tuple | None:
        """The hoisted parts (yh, -c, lo, width, yl) of the division at ctx's pc, if its loop's
        preheader computed them."""
        return ctx.get("loop_divisor_parts", {}).get(ctx["pc"])
