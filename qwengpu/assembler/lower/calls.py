"""Calls that are not inlined: recursive device functions run on a call stack in memory.

A function that can reach itself through calls is lowered once, out of line. Its parameters,
return values and return-site number are fixed virtual registers; a call site

    check:  the frame fits the stack, else fault (`stack_overflow` on the load)
    push:   save the caller's values the callee may overwrite (live after the call), sp += frame
    call:   parameters, return-site number k, depth + 1; jump to the function's entry
    ...     the function returns through a branch tree on the return-site number (the machine
            has no indirect jump): one leaf per call site of that function
    site k: restore the saved values, sp -= frame, depth - 1; read the return values

Which values to save is decided after the whole kernel is lowered (`insert_call_frames`): at each
call site, the registers live after the call (liveness with each call as an edge to its return
site) that belong to out-of-line code. The kernel's own registers are never overwritten by
a callee, so calls from the kernel save nothing.

The stack lives in the global window after the launch's data, one word column per thread: word
`w` of thread `t` is at `base + 4 * (w * T + t)`, `sp` holds the address of the thread's next free
word, so a frame's word `j` is at `sp + 4 * T * j`: one addition ahead of the memory unit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.machine.layout import LINE
from qwengpu.machine.uops import M32, Imm, MicroOp, Special, VReg, alu, src
from qwengpu.ptx.ir import Function, Label, Module

from .core import AssemblerError, Block

#: the call stack takes at most this share of the global window left after the launch's data
#: (the rest is for spilled registers)
STACK_SHARE = 2
#: and at most this many words per thread
STACK_WORDS = 256


def _callees(module: Module) -> dict:
    return {name: {ins.operands[i].name for ins in f.body if ins.op == "call"
                   for i in range(len(ins.operands)) if isinstance(ins.operands[i], Label)}
            for name, f in module.functions.items()}


def reachable_functions(module: Module, start: str) -> set[str]:
    """Names of the functions `start` calls, directly or not (and itself)."""
    calls, seen, todo = _callees(module), set(), [start]
    while todo:
        g = todo.pop()
        if g not in seen and g in calls:
            seen.add(g)
            todo += calls[g]
    return seen


def recursive_functions(module: Module) -> set[str]:
    """Names of the functions that can reach themselves through calls."""
    calls = _callees(module)
    out = set()
    for start in calls:
        seen, todo = set(), list(calls[start])
        while todo:
            g = todo.pop()
            if g == start:
                out.add(start)
                break
            if g in seen or g not in calls:
                continue
            seen.add(g)
            todo += calls[g]
    return out


@dataclass
class OutOfLine:
    """An out-of-line function's fixed registers and call sites."""
    fn: Function
    entry: str
    ret_label: str
    params: list          # per parameter: (lo VReg, hi VReg | None, size)
    rets: list            # per return value: (lo VReg, hi VReg | None, size)
    site: VReg            # the return-site number
    sites: list = field(default_factory=list)   # return-site labels, by number


@dataclass
class CallSite:
    pc: int               # the call's PTX instruction
    check: str            # block: the overflow check (filled in by insert_call_frames)
    push: str             # block: saves, sp and depth, parameters, jump to the entry
    ret: str              # block: restores, sp and depth, then the caller goes on
    callee: OutOfLine


class CallOps:
    """Out-of-line functions and their call sites (methods of a `Lowerer`)."""

    def calls_prologue(self, ctx):
        """At the kernel's entry: the stack pointer and depth, when out-of-line functions exist."""
        self.ool: dict[str, OutOfLine] = {}
        self.call_sites: list[CallSite] = []
        self.ool_ids: set = set()         # ids of the registers out-of-line code may write
        self.pending_ool: list[OutOfLine] = []
        self.return_blocks: set = set()
        self.recursive = recursive_functions(self.module) & reachable_functions(self.module, self.kernel.name)
        if not self.recursive:
            return
        lay, threads = self.layout, self.spec.threads_per_block
        base = (lay.global_end + LINE - 1) // LINE * LINE
        window = lay.window_end("global")
        words = min(STACK_WORDS, (window - base) // STACK_SHARE // (4 * threads))
        if words < 2:
            raise AssemblerError(f"recursive functions need a call stack of at least 2 words per thread "
                                 f"({8 * threads} bytes for {threads} threads, in half of the free memory); the "
                                 f"machine's global window has {max(0, window - base)} bytes free after the "
                                 f"launch's data")
        for k in range(4 * words * threads):
            lay.valid[lay.machine_address("global", base + k, 0)] = 1
        lay.global_end = base + 4 * words * threads
        self.stack = (base, words, threads)
        self.sp, self.depth = self.new("sp"), self.new("call.depth")
        self.emit(alu("ADD", self.sp, self.thread_word_offset(0), base, ptx_pc=0))
        self.emit(alu("MOV", self.depth, 0, ptx_pc=0))

    def thread_word_offset(self, pc: int):
        """4 x the thread's linear index in its block (a Src)."""
        bx, by, bz = self.spec.block
        if by * bz == 1:
            t = self.new("tid4")
            self.emit(alu("SHL", t, Special("tid.x"), 2, ptx_pc=pc))
            self.specials.add("tid.x")
            return src(t)
        self.specials.update(("tid.x", "tid.y", "tid.z"))
        t1, t2, t3, t4, t5 = (self.new("tid") for _ in range(5))
        self.emit(alu("MUL", t1, Special("tid.z"), by, ptx_pc=pc))
        self.emit(alu("ADD", t2, Special("tid.y"), src(t1), ptx_pc=pc))
        self.emit(alu("MUL", t3, src(t2), bx, ptx_pc=pc))
        self.emit(alu("ADD", t4, Special("tid.x"), src(t3), ptx_pc=pc))
        self.emit(alu("SHL", t5, src(t4), 2, ptx_pc=pc))
        return src(t5)

    def out_of_line(self, f: Function, ins) -> OutOfLine:
        if f.name in self.ool:
            return self.ool[f.name]
        for p in f.params + f.returns:
            if p.size not in (1, 2, 4, 8):
                raise AssemblerError(f"recursive function {f.name}: parameter {p.name} of {p.size} bytes "
                                     "(only scalars up to 64 bits are passed on the machine's call stack)", ins)
        if self.layout.local_size.get(f.name, 0):
            raise AssemblerError(f"recursive function {f.name} uses .local memory (a frame per call), which "
                                 "the machine's call stack does not hold", ins)

        def regs(p):
            lo = self.new(f"{f.name}.{p.name}")
            hi = self.new(f"{f.name}.{p.name}.hi") if p.size == 8 else None
            self.ool_ids.update(r.id for r in (lo, hi) if r is not None)
            return lo, hi, p.size

        o = OutOfLine(f, f"{f.name}@ool/entry", f"{f.name}@ool/return", [regs(p) for p in f.params],
                      [regs(p) for p in f.returns], self.new(f"{f.name}.site"))
        self.ool_ids.add(o.site.id)
        self.ool[f.name] = o
        self.pending_ool.append(o)
        return o

    def lower_out_of_line(self):
        """The bodies of the out-of-line functions called so far (and of those they call), then
        their returns."""
        done = []
        while self.pending_ool:
            o = self.pending_ool.pop(0)
            self.lower_body(o)
            done.append(o)
        for o in done:
            self.lower_return(o)

    def lower_body(self, o: OutOfLine):
        first = self.nv
        params = {p.name: ("slots", {0: (src(lo), src(hi) if hi is not None else None, size)})
                  for p, (lo, hi, size) in zip(o.fn.params, o.params)}
        ctx = {"fn": o.fn, "regs": {}, "params": params, "pc": 0, "ret_label": o.ret_label, "local_base": 0,
               "prefix": f"{o.fn.name}@ool/", "depth": 0, "ool": o}
        self.start(o.entry)
        ctx["entry_block"] = self.cur
        self.lower_function(ctx)
        if self.cur is not None:
            self.end(("jump", o.ret_label))
        self.ool_ids.update(range(first + 1, self.nv + 1))

    def lower_return(self, o: OutOfLine):
        """The return: a branch tree on the return-site number (the machine has no indirect jump)."""
        ctx = {"pc": 0}
        self.start(o.ret_label)

        def tree(lo: int, hi: int) -> str:
            if hi - lo == 1:
                return o.sites[lo]
            here, mid = self.fresh_label("ret_tree"), (lo + hi) // 2
            self.start(here)
            p = self.em(ctx).alu("LTU", src(o.site), mid)
            block = self.cur
            left, right = tree(lo, mid), tree(mid, hi)
            block.term = ("branch", p, True, left, right)
            self.return_blocks.add(here)
            self.cur = None
            return here

        self.return_blocks.add(o.ret_label)
        head = self.cur
        head.term = ("jump", tree(0, len(o.sites)))
        self.cur = None

    def store_return_value(self, ctx, name: str, off: int, lo, hi) -> bool:
        """`st.param` into a return value of an out-of-line function: straight into its register."""
        o = ctx.get("ool")
        if o is None:
            return False
        for p, (rlo, rhi, _) in zip(o.fn.returns, o.rets):
            if p.name == name:
                if off:
                    raise AssemblerError(f"{o.fn.name}: a return value stored in parts is not supported")
                self.emit(alu("MOV", rlo, lo, ptx_pc=ctx["pc"]))
                if rhi is not None:
                    self.emit(alu("MOV", rhi, hi if hi is not None else src(Imm(0)), ptx_pc=ctx["pc"]))
                return True
        return False

    def call_out_of_line(self, ctx, ins, callee: Function, rets, args):
        o = self.out_of_line(callee, ins)
        k = len(o.sites)
        check, push, ret = (self.fresh_label(f"call_{callee.name}_{x}") for x in ("check", "push", "site"))
        o.sites.append(ret)
        pc = ctx["pc"]
        self.call_sites.append(CallSite(pc, check, push, ret, o))
        values = []
        for a_sym, (lo, hi, size) in zip(args, o.params):
            pv = ctx["params"].get(a_sym.name)
            if pv is None:
                raise AssemblerError(f"call argument {a_sym.name} was not stored", ins)
            if pv[0] == "const":
                v = int.from_bytes(pv[1][:size], "little")
                values.append((lo, src(Imm(v & 0xFFFFFFFF)), hi, src(Imm(v >> 32))))
            else:
                if 0 not in pv[1]:
                    raise AssemblerError(f"call argument {a_sym.name} was not stored whole", ins)
                vlo, vhi, _ = pv[1][0]
                values.append((lo, vlo, hi, vhi if vhi is not None else src(Imm(0))))
        self.end(("jump", check))
        self.start(check)
        self.end(("jump", push))
        self.start(push)
        # the arguments are read before anything of the callee's is overwritten
        tmp = []
        for lo, vlo, hi, vhi in values:
            t = self.new("arg")
            self.emit(alu("MOV", t, vlo, ptx_pc=pc))
            tmp.append((lo, t))
            if hi is not None:
                th = self.new("arg.hi")
                self.emit(alu("MOV", th, vhi, ptx_pc=pc))
                tmp.append((hi, th))
        for r, t in tmp:
            self.emit(alu("MOV", r, src(t), ptx_pc=pc))
        self.emit(alu("MOV", o.site, k, ptx_pc=pc))
        self.emit(alu("ADD", self.depth, src(self.depth), 1, ptx_pc=pc))
        self.end(("jump", o.entry))
        self.start(ret)
        self.emit(alu("ADD", self.depth, src(self.depth), M32, ptx_pc=pc))
        for r_sym, (lo, hi, size) in zip(rets, o.rets):
            ctx["params"][r_sym.name] = ("slots", {0: (src(lo), src(hi) if hi is not None else None, size)})

    def insert_call_frames(self):
        """Saves and restores at every call site of an out-of-line function (see the module doc)."""
        if not self.call_sites:
            return
        by_label = {b.label: b for b in self.blocks}
        # a second definition of each return register, at the entry (where it is dead), keeps the
        # optimizer from reading it in place of the caller's copy: `a = f(x); b = f(y)` would
        # read f(y) for a (global copy propagation takes only single-definition sources)
        entry = by_label["entry"]
        entry.ops = [alu("MOV", r, 0, ptx_pc=0) for o in self.ool.values() for part in o.rets for r in part[:2]
                     if r is not None] + entry.ops
        # a value saved at a call site is read there: it may be live across an earlier call
        saves: dict = {s.push: set() for s in self.call_sites}
        while True:
            live_in = _live_in_with_calls(self.blocks, {s.push: s.ret for s in self.call_sites}, self.return_blocks,
                                          saves)
            new = {}
            for s in self.call_sites:
                own = {r for r in s.callee.rets for r in r[:2] if r is not None}
                new[s.push] = {v for v in live_in[s.ret] if v.id in self.ool_ids and v not in own}
            if new == saves:
                break
            saves = new
        base, words, threads = self.stack
        col = 4 * threads
        for s in self.call_sites:
            save = sorted(saves[s.push], key=lambda v: v.id)
            check, push, ret = by_label[s.check], by_label[s.push], by_label[s.ret]
            n = len(save)
            if not n:
                continue
            end = self.new("sp.next")
            check.ops = [alu("ADD", end, src(self.sp), col * n, ptx_pc=s.pc)]
            fits = self.new("fits")
            check.ops.append(alu("LTU", fits, src(end), base + col * (words + 1), ptx_pc=s.pc))
            fault = self.fresh_label("stack_overflow")
            check.term = ("branch", src(fits), True, push.label, fault)
            blk = Block(fault)
            # a byte load from above the 4 GiB line faults (the address names the depth)
            blk.ops = [MicroOp("mem", "LD", (self.new("overflow"), None), extra={
                "space": "global", "width": 1, "signed": False, "addr": (src(self.depth), src(Imm(1))),
                "align": 1, "stack_overflow": (n, words)}, ptx_pc=s.pc)]
            blk.term = ("exit",)
            self.blocks.append(blk)
            stores = []
            for j, v in enumerate(save):
                a = self.new("frame")
                stores += [alu("ADD", a, src(self.sp), col * j, ptx_pc=s.pc),
                           MicroOp("mem", "ST", (), extra={"space": "global", "width": 4, "addr": (src(a), src(Imm(0))),
                                                           "data": (src(v), None), "align": 4}, ptx_pc=s.pc)]
            push.ops = stores + [alu("MOV", self.sp, src(end), ptx_pc=s.pc)] + push.ops
            restores = [alu("ADD", self.sp, src(self.sp), -col * n & M32, ptx_pc=s.pc)]
            for j, v in enumerate(save):
                a = self.new("frame")
                restores += [alu("ADD", a, src(self.sp), col * j, ptx_pc=s.pc),
                             MicroOp("mem", "LD", (v, None), extra={"space": "global", "width": 4, "signed": False,
                                                                    "addr": (src(a), src(Imm(0))), "align": 4},
                                     ptx_pc=s.pc)]
            ret.ops = restores + ret.ops


def _live_in_with_calls(blocks: list, call_edges: dict, return_blocks: set, saves: dict) -> dict:
    """{label: registers live at the block's start}, each call (its push block) an edge straight to
    its return site and the functions' returns (their branch trees) without edges to the return
    sites: what a caller needs after a call. `saves`: the registers each push block reads before
    anything else."""
    use, kill, succ = {}, {}, {}
    sites = set(call_edges.values())
    for b in blocks:
        u, k = set(), set()
        for op in b.ops:
            u |= {r for r in op.reads() if r not in k}
            if op.guard is None:
                k |= set(op.writes())
        t = b.term
        if t[0] == "branch" and isinstance(t[1].value, VReg) and t[1].value not in k:
            u.add(t[1].value)
        use[b.label], kill[b.label] = u | saves.get(b.label, set()), k
        if b.label in call_edges:
            succ[b.label] = [call_edges[b.label]]
        else:
            succ[b.label] = [t[1]] if t[0] in ("jump", "barrier") else [t[3], t[4]] if t[0] == "branch" else []
            if b.label in return_blocks:
                succ[b.label] = [x for x in succ[b.label] if x not in sites]
    live_in = {b.label: set() for b in blocks}
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            out = set()
            for s in succ[b.label]:
                out |= live_in.get(s, set())
            i = use[b.label] | (out - kill[b.label])
            if i != live_in[b.label]:
                live_in[b.label] = i
                changed = True
    return live_in
