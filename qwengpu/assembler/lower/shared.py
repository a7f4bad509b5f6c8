"""Shared soft-float subroutines: when a kernel's inlined float routines do not fit the ROM, each
(routine, rounding, flags) is emitted once and called.

A call moves the operands into the routine's input registers, sets its return-site number and
jumps to it; the routine returns through a branch tree on that number (as out-of-line functions
do, `calls`), and the caller copies the result out. The routine is a leaf: it writes only its own
registers, so nothing is saved. Calls with an immediate operand stay inlined (the routines fold
immediates). Used as the assembler's fallback for programs larger than the ROM
(`pipeline.assemble`): a call costs more tokens than the inlined routine (the copies, the branch
tree's passes), so programs that fit keep their routines inlined; and for a rarely taken path,
where ROM matters more than its tokens (`shared_call`: the full division beside a hoisted
divisor's short one).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.machine.uops import Imm, Src, alu, src

from ..emit import Emitter


@dataclass
class SharedRoutine:
    fn: object
    consts: tuple
    kw: dict
    inputs: list          # per operand: a VReg, or a (lo, hi) pair of VRegs
    outputs: object       # a VReg, or a (lo, hi) pair
    site: object          # the return-site number's VReg
    entry: str
    ret_label: str
    sites: list = field(default_factory=list)
    pc: int = 0


def _parts(x) -> list:
    return list(x) if isinstance(x, tuple) else [x]


def _is_immediate(x) -> bool:
    return any(isinstance(p, Src) and isinstance(p.value, Imm) for p in _parts(x))


class SharedRoutineOps:
    """Calls to shared soft-float routines (methods of a `Lowerer`)."""

    share_routines = False

    def routine(self, ctx, ins, fn, operands: tuple, consts: tuple = (), **kw):
        """fn(em, *operands, *consts, **kw): inlined, or a call to the shared copy."""
        if not self.share_routines:
            return self.soft(ins, fn, self.em(ctx), *operands, *consts, **kw)
        return self.shared_call(ctx, ins, fn, operands, consts, **kw)

    def shared_call(self, ctx, ins, fn, operands: tuple, consts: tuple = (), **kw):
        """A call to the shared copy of fn(em, *operands, *consts, **kw) (inlined where an operand
        is immediate): what `routine` does short of ROM, and what a rarely taken path uses
        anyway (`FastDivisionOps.unit_fast_division`'s full division)."""
        if any(_is_immediate(x) for x in operands):
            return self.soft(ins, fn, self.em(ctx), *operands, *consts, **kw)
        shapes = tuple(isinstance(x, tuple) for x in operands)
        key = (fn, consts, tuple(sorted(kw.items())), shapes)       # the function itself: names can repeat
        if not hasattr(self, "shared"):
            self.shared = {}
        r = self.shared.get(key)
        if r is None:
            # the result's shape: emit once into a scratch list (the body is emitted later)
            probe = self.soft(ins, fn, Emitter(self.new, [], ctx["pc"]), *operands, *consts, **kw)
            name = fn.__qualname__
            inputs = [(self.new(f"{name}.in"), self.new(f"{name}.in.hi")) if s else self.new(f"{name}.in")
                      for s in shapes]
            outputs = (self.new(f"{name}.out"), self.new(f"{name}.out.hi")) if isinstance(probe, tuple) \
                else self.new(f"{name}.out")
            label = self.fresh_label(f"routine_{name}")
            r = SharedRoutine(fn, consts, kw, inputs, outputs, self.new(f"{name}.site"), label + "/entry",
                              label + "/return", pc=ctx["pc"])
            self.shared[key] = r
        pc = ctx["pc"]
        temps = []
        for x, reg in zip(operands, r.inputs):
            for part, rp in zip(_parts(x), _parts(reg)):
                t = self.new("routine.arg")
                self.emit(alu("MOV", t, part, ptx_pc=pc))
                temps.append((rp, t))
        for rp, t in temps:
            self.emit(alu("MOV", rp, src(t), ptx_pc=pc))
        self.emit(alu("MOV", r.site, len(r.sites), ptx_pc=pc))
        ret = self.fresh_label(f"routine_{fn.__qualname__}_site")
        r.sites.append(ret)
        self.end(("jump", r.entry))
        self.start(ret)
        outs = []
        for o in _parts(r.outputs):
            d = self.new("routine.result")
            self.emit(alu("MOV", d, src(o), ptx_pc=pc))
            outs.append(src(d))
        return tuple(outs) if isinstance(r.outputs, tuple) else outs[0]

    def lower_shared_routines(self):
        """The routines' bodies, their returns, and a second definition of their outputs at the
        entry (see `calls.insert_call_frames`: copy propagation must not read a later call's
        result for an earlier one)."""
        routines = list(getattr(self, "shared", {}).values())
        if not routines:
            return
        entry = next(b for b in self.blocks if b.label == "entry")
        entry.ops = [alu("MOV", o, 0, ptx_pc=0) for r in routines for o in _parts(r.outputs)] + entry.ops
        for r in routines:
            self.start(r.entry)
            em = Emitter(self.new, self.cur.ops, r.pc)
            ins = [(src(x[0]), src(x[1])) if isinstance(x, tuple) else src(x) for x in r.inputs]
            res = r.fn(em, *ins, *r.consts, **r.kw)
            for o, v in zip(_parts(r.outputs), _parts(res)):
                self.emit(alu("MOV", o, v, ptx_pc=r.pc))
            self.end(("jump", r.ret_label))
            self.start(r.ret_label)
            head = self.cur
            head.term = ("jump", self._site_tree(r, 0, len(r.sites)))
            self.cur = None

    def _site_tree(self, r: SharedRoutine, lo: int, hi: int) -> str:
        if hi - lo == 1:
            return r.sites[lo]
        here, mid = self.fresh_label("routine_ret"), (lo + hi) // 2
        self.start(here)
        p = self.new("routine.ret")
        self.emit(alu("LTU", p, src(r.site), mid, ptx_pc=r.pc))
        block = self.cur
        left, right = self._site_tree(r, lo, mid), self._site_tree(r, mid, hi)
        block.term = ("branch", src(p), True, left, right)
        self.cur = None
        return here
