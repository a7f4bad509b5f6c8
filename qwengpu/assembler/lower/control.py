"""Control flow: branches, indexed branches (brx.idx), returns, calls (inlined; recursive ones in
`calls`), barriers (bar.sync,
bar.red through shared memory), membar."""
from __future__ import annotations

from qwengpu.ptx.cfg import divergent_barriers
from qwengpu.machine.uops import Imm, MicroOp, Special, alu, src
from qwengpu.ptx.ir import ArgList, Label

from .core import AssemblerError


class ControlOps:
    """The `op_*` / `float_*` methods of a `Lowerer` for these instructions."""

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
        undefined): it loads from above the 4 GiB line at the index, reported as the
        interpreter's fault (kind `branch`)."""
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
        self.emit(MicroOp("mem", "LD", (self.new("brx.range"), None), extra={
            "space": "global", "width": 1, "signed": False, "addr": (idx, src(Imm(1))),
            "align": 1, "trap": "branch"}, ptx_pc=ctx["pc"]))
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

    def barrier_prologue(self, ctx):
        """A kernel with a block barrier that only some live lanes of a warp may reach
        (`cfg.divergent_barriers`; every barrier of a device function) marks each live lane in a
        pinned register (`alive`: bit `laneid` while the lane runs, 0 once it exited; a lane never
        present stays 0), so that the barrier can tell a divergent warp (live lanes elsewhere) from
        one whose other lanes exited. Barriers outside divergent code need no check."""
        self.checked_barriers = {}
        for f in self.module.functions.values():
            if f.declared_only:
                continue
            bars = {pc for pc, ins in enumerate(f.body)
                    if ins.op in ("bar", "barrier") and getattr(ins.info, "mode", None) != "warp"}
            if bars:
                self.checked_barriers[f.name] = divergent_barriers(f) if f is self.kernel else bars
        if not any(self.checked_barriers.values()):
            return
        self.alive = self.new("warp.alive")
        self.specials.add("laneid")
        self.emit(alu("SHL", self.alive, 1, Special("laneid"), ptx_pc=0))

    def barrier_epilogue(self):
        """Every exit clears its lanes' mark (the write is carried: the mark is live at exits)."""
        if self.alive is None:
            return
        for b in self.blocks:
            if b.term[0] == "exit":
                b.ops.append(alu("MOV", self.alive, 0, ptx_pc=b.ops[-1].ptx_pc if b.ops else 0))

    def divergent_barrier_check(self, ctx):
        """The interpreter's rule: a barrier executed by only some live lanes of a warp faults.
        The lanes' marks, read across the warp with shfl.idx (the cross-lane unit reads every
        lane's register, running or not), must all be lanes of the active mask; else the lowest
        active lane loads from above the 4 GiB line, which faults, reported as a barrier fault."""
        pc = ctx["pc"]
        live = None
        for j in range(4):
            r, p = self.new(), self.new()
            self.emit(MicroOp("xlane", "SHFL", (r, p), a=src(self.alive), extra={
                "mode": "idx", "bsrc": (src(Imm(j)),), "csrc": (src(Imm(0x1F)),)}, ptx_pc=pc))
            live = src(r) if live is None else self.em(ctx).alu("OR", live, src(r))
        act = self.new()
        self.emit(MicroOp("xlane", "ACTIVEMASK", (act,), ptx_pc=pc))
        same = self.em(ctx).alu("EQ", live, src(act))
        ok, fault = self.fresh_label("barrier_converged"), self.fresh_label("divergent_barrier")
        self.end(("branch", same, True, ok, fault))
        self.start(fault)
        self.emit(MicroOp("mem", "LD", (self.new("divergent"), None), extra={
            "space": "global", "width": 1, "signed": False, "addr": (src(Imm(0)), src(Imm(1))),
            "align": 1, "trap": "barrier"}, ptx_pc=pc))
        self.end(("exit",))
        self.start(ok)

    def op_bar(self, ctx, ins, info):
        if info.mode == "warp":
            return                       # bar.warp.sync: lanes of a warp run together already
        if ctx["pc"] in self.checked_barriers.get(ctx["fn"].name, ()):
            self.divergent_barrier_check(ctx)
        if info.mode == "red":
            self.bar_red_op(ctx, ins, info)
            return
        nxt = self.fresh_label("after_bar")
        self.end(("barrier", nxt))
        self.start(nxt)

    op_barrier = op_bar

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

    op_nanosleep = op_membar

    op_fence = op_membar

    def op_call(self, ctx, ins, info):
        ops = ins.operands
        fi = next(i for i, o in enumerate(ops) if isinstance(o, Label))
        rets = ops[0].items if fi > 0 and isinstance(ops[0], ArgList) else ()
        args = ops[fi + 1].items if fi + 1 < len(ops) and isinstance(ops[fi + 1], ArgList) else ()
        callee = self.module.functions[ops[fi].name]
        if callee.name in self.recursive:
            self.call_out_of_line(ctx, ins, callee, rets, args)
            return
        depth = ctx.get("depth", 0)
        if depth > 16:
            raise AssemblerError("inlined calls nest deeper than 16", ins)
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
