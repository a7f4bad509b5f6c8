"""The reference interpreter: executes a validated PTX kernel on 4-lane warps, exactly.

Model (see docs/interpreter.md):
- A grid runs block by block (x fastest). A block's threads form warps of `LANES` = 4 in linear
  thread order; the warps of a block run one at a time, each until it reaches a barrier or exits.
- Each warp keeps a stack of call frames; each frame a SIMT stack of (pc, lane mask, reconvergence
  pc) entries. A divergent branch reconverges at its immediate post-dominator.
- Registers are raw bit patterns (Python ints per lane); every instruction interprets them by its
  type suffix. An unwritten register reads as 0.
- One *step* is one warp-instruction issued. `max_steps` bounds a launch (default:
  `default_max_steps`, which grows with the launch's warps).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwengpu.launch import LaunchResult, LaunchSpec, check_step_limit
from qwengpu.ptx.ir import ArgList, Instr, Label, Module, Sym
from qwengpu.ptx.isa import validate_module
from qwengpu.semantics import integers as alu
from qwengpu.semantics.faults import ExecutionFault
from qwengpu.semantics.launch_model import (CONST_WINDOW, LANES, SHARED_WINDOW, ModuleAnalysis, check_kernel_limits,
                                            default_max_steps, kernel_param_bytes)
from qwengpu.semantics.symbols import apply_symbols, read_symbols

from .arithmetic import h_approx, h_arith, h_bits, h_cvt, h_float, h_misc, h_mov, h_selp, h_setp
from .lanes import lanes_of
from .memory import FlatMemory, buffers_to_global, read_back
from .memory_ops import h_atom, h_cvta, h_ld, h_st
from .operands import OperandAccess
from .warp_ops import h_match, h_shfl, h_vote
from .warps import Entry, Frame, Warp


class StepLimitExceeded(ExecutionFault):
    pass


# ---------------------------------------------------------------------------------------------
# trace records


@dataclass
class Step:
    """One warp-instruction: where it ran, which lanes, and what it wrote."""
    index: int
    block: int
    warp: int
    function: str
    pc: int
    active: int                   # lanes executing at this pc (SIMT mask)
    executed: int                 # lanes whose guard was true
    line: int
    text: str
    reg_writes: dict = field(default_factory=dict)   # name -> [value per lane] (only written lanes meaningful)
    reg_write_mask: int = 0
    mem_writes: list = field(default_factory=list)   # (space, address, size, lane, value)
    depth: int = 0                # call depth
    stack: tuple = ()             # the frame's SIMT stack before the step: ((pc, mask, rpc), ...)


@dataclass
class Trace:
    steps: list[Step] = field(default_factory=list)
    kernel: str = ""

    def __len__(self) -> int:
        return len(self.steps)


# ---------------------------------------------------------------------------------------------
# the interpreter


class Interpreter(OperandAccess):
    def __init__(self, module: Module, spec: LaunchSpec, kernel: str | None = None,
                 max_steps: int | None = None, trace: bool = False):
        validate_module(module)
        self.spec = spec
        self.kernel = module.kernel(kernel if kernel is not None else spec.kernel)
        check_kernel_limits(module, spec, self.kernel)      # before anything is allocated
        module = self.module = apply_symbols(module, spec)  # the spec's "symbols" as initialisers
        self.prog = ModuleAnalysis(module, self.kernel)
        self.max_steps = check_step_limit(max_steps) or default_max_steps(spec)
        self.record = trace
        self.trace = Trace(kernel=self.kernel.name)
        self.steps = 0
        self.lane_instructions = 0
        self._check_args()
        self.gmem, self.layout = buffers_to_global(spec, module)
        self._apply_relocations()
        self.const = FlatMemory("const", len(self.prog.const_init), init=self.prog.const_init)
        self.kernel_params = kernel_param_bytes(self.kernel, spec, self.layout.buffer_addresses)
        self._step: Step | None = None

    # -- setup -----------------------------------------------------------------------------------

    def _check_args(self):
        params = self.kernel.params
        if len(params) != len(self.spec.args):
            raise ExecutionFault(f"kernel {self.kernel.name} takes {len(params)} parameters, the launch "
                                 f"gives {len(self.spec.args)} arguments", kernel=self.kernel.name).locate()
        for i, (p, a) in enumerate(zip(params, self.spec.args)):
            if a.is_buffer and p.size != 8:
                raise ExecutionFault(f"argument {i} is a buffer but parameter {p.name} is .{p.type} "
                                     f"({p.size} bytes), not a pointer", kernel=self.kernel.name).locate()
            if not a.is_buffer and np.dtype(a.value.dtype).itemsize != p.size:
                raise ExecutionFault(f"argument {i} is a {a.dtype} scalar but parameter {p.name} has "
                                     f"{p.size} bytes", kernel=self.kernel.name).locate()

    def _apply_relocations(self):
        for v in self.module.vars.values():
            for off, sym in v.relocs:
                target = self._static_symbol_address(sym)
                if v.space == "global":
                    self.gmem.write(self.layout.var_addresses[v.name] + off, 8, target)
                elif v.space == "const":
                    o = self.prog.const_offsets[v.name] + off
                    b = bytearray(self.prog.const_init)
                    b[o:o + 8] = target.to_bytes(8, "little")
                    self.prog.const_init = bytes(b)

    def _static_symbol_address(self, name: str) -> int:
        """Generic address of a module-level variable (for initialisers holding addresses)."""
        if name in self.layout.var_addresses:
            return self.layout.var_addresses[name]
        if name in self.prog.const_offsets:
            return CONST_WINDOW + self.prog.const_offsets[name]
        if name in self.prog.shared_offsets:
            return SHARED_WINDOW + self.prog.shared_offsets[name]
        raise ExecutionFault(f"initialiser refers to {name}, which has no address").locate(kernel=self.kernel.name)

    # -- running -----------------------------------------------------------------------------------

    def run(self) -> LaunchResult:
        gx, gy, gz = self.spec.grid
        for bz in range(gz):
            for by in range(gy):
                for bx in range(gx):
                    self._run_block((bx, by, bz))
        return LaunchResult(kernel=self.kernel.name, engine="interp",
                            buffers=read_back(self.gmem, self.spec, self.layout), steps=self.steps,
                            tokens=None, lane_instructions=self.lane_instructions,
                            trace=self.trace if self.record else None, printf=self._printf(),
                            symbols=read_symbols(self.module, self.spec, self._variable_bytes))

    def _variable_bytes(self, v) -> bytes:
        """A module `.global` or `.const` variable's bytes as the launch left them."""
        if v.space == "const":
            off = self.prog.const_offsets[v.name]
            return bytes(self.const.data[off:off + v.size])
        addr = self.layout.var_addresses[v.name]
        r = self.gmem.region(addr, v.size)
        return bytes(r.data[addr - r.base:addr - r.base + v.size])

    def _printf(self):
        """The printf output, formatted from the buffer in global memory (None without printf)."""
        from qwengpu.semantics.printf import PRINTF_BYTES, printf_buffer_address, printf_output
        addr = printf_buffer_address(self.module, self.spec)
        if addr is None:
            return None
        r = self.gmem.region(addr, PRINTF_BYTES)
        return printf_output(self.module, self.spec, bytes(r.data[addr - r.base:addr - r.base + PRINTF_BYTES]))

    def _run_block(self, ctaid):
        bx, by, bz = ctaid
        gx, gy, _ = self.spec.grid
        self.block_linear = bx + by * gx + bz * gx * gy
        self.ctaid = ctaid
        nx, ny, nz = self.spec.block
        threads = [(x, y, z) for z in range(nz) for y in range(ny) for x in range(nx)]
        shared_size = self.prog.static_shared
        self.dyn_shared_base = (shared_size + 15) // 16 * 16
        self.shared = FlatMemory("shared", self.dyn_shared_base + self.spec.shared_bytes)
        warps = []
        for w in range(0, len(threads), LANES):
            tids = threads[w:w + LANES]
            present = (1 << len(tids)) - 1
            warp = Warp(self.block_linear, w // LANES, present, tids + [(0, 0, 0)] * (LANES - len(tids)))
            params = {name: [bytearray(raw) for _ in range(LANES)] for name, raw in self.kernel_params.items()}
            warp.frames.append(Frame(self.kernel, [Entry(0, present, None)], {}, params, 0, present))
            warps.append(warp)
        self.warps = warps
        while True:
            progressed = False
            for warp in warps:
                if warp.state == "ready":
                    self._run_warp(warp)
                    progressed = True
            live = [w for w in warps if w.state != "done"]
            if not live:
                break
            if all(w.state == "barrier" for w in live):
                self._release_barrier(live)
            elif not progressed:
                raise ExecutionFault("deadlock: warps wait at different barriers").locate(
                    kernel=self.kernel.name, block=self.block_linear)

    def _release_barrier(self, live):
        red = [w.bar_red for w in live if w.bar_red is not None]
        if red:
            op = red[0][0]
            votes = [v for w in live for v in (w.bar_red[2] if w.bar_red else [])]
            if op == "popc":
                result = sum(votes)
            elif op == "and":
                result = int(all(votes))
            else:
                result = int(any(votes))
            for w in live:
                if w.bar_red is not None:
                    _, dest, _, mask = w.bar_red
                    self.write_reg(w.frames[-1], dest, [result] * LANES, mask, "u32")
        for w in live:
            w.state = "ready"
            w.bar_red = None

    def _run_warp(self, warp: Warp):
        self.warp = warp
        while warp.state == "ready":
            self._step_warp(warp)

    # -- one step ----------------------------------------------------------------------------------

    def _fault(self, e: ExecutionFault, warp: Warp, frame: Frame, pc: int, ins: Instr | None):
        raise e.locate(kernel=self.kernel.name, block=warp.block, warp=warp.index, pc=pc,
                       line=ins.line if ins else None, text=ins.text if ins else None)

    def _step_warp(self, warp: Warp):
        frame = warp.frames[-1]
        stack = frame.stack
        while True:
            if not stack:
                self._finish_frame(warp)
                return
            top = stack[-1]
            top.mask &= ~warp.exited & ~frame.returned
            if top.mask == 0 or (top.rpc is not None and top.pc == top.rpc):
                stack.pop()
                continue
            if top.pc >= len(frame.fn.body):       # fell off the end: an implicit ret
                frame.returned |= top.mask
                continue
            break
        pc = top.pc
        ins = frame.fn.body[pc]
        if self.steps >= self.max_steps:
            self._fault(StepLimitExceeded(self._step_limit_reason(warp, frame, pc)), warp, frame, pc, ins)
        self.steps += 1
        mask = top.mask
        self.lane_instructions += bin(mask).count("1")
        execm = mask
        if ins.guard is not None:
            g = frame.regs.get(ins.guard.reg.name, [0] * LANES)
            gm = sum(1 << i for i in range(LANES) if (g[i] & 1) != ins.guard.negated)
            execm = mask & gm
        if self.record:
            self._step = Step(self.steps - 1, warp.block, warp.index, frame.fn.name, pc, mask, execm,
                              ins.line, ins.text, depth=len(warp.frames) - 1,
                              stack=tuple((e.pc, e.mask, e.rpc) for e in stack))
            self.trace.steps.append(self._step)
        else:
            self._step = None
        try:
            self._execute(warp, frame, top, ins, pc, mask, execm)
        except ExecutionFault as e:
            self._fault(e, warp, frame, pc, ins)

    def _step_limit_reason(self, warp: Warp, frame: Frame, pc: int) -> str:
        """Why the step limit stopped the launch: a warp spinning on memory that a warp of its block
        which has not run yet would write (the warps of a block run one at a time), or else a loop
        that runs too long."""
        limit = f"step limit of {self.max_steps} steps exceeded"
        waiting = [w.index for w in self.warps if w is not warp and w.state != "done"]
        body = frame.fn.body
        # the innermost loop around pc: the nearest backward branch at or after pc that jumps to or before it
        loop = next(((frame.fn.labels[o.name], j) for j in range(pc, len(body)) if body[j].op == "bra"
                     for o in body[j].operands if isinstance(o, Label) and frame.fn.labels.get(o.name, pc + 1) <= pc),
                    None)
        if waiting and loop is not None:
            spaces = sorted({ins.info.space or "generic" for ins in body[loop[0]:loop[1] + 1]
                             if ins.op in ("ld", "atom") and ins.info.space in (None, "shared", "global")})
            if spaces:
                lines = f"lines {body[loop[0]].line}-{body[loop[1]].line}"
                return (f"{limit}: warp {warp.index} spins in a loop reading {' and '.join(spaces)} memory "
                        f"({lines}) while warp(s) {', '.join(map(str, waiting))} of its block have not run to "
                        f"a barrier or exit. The interpreter (like the machine) runs a block's warps one at a "
                        f"time, each until a barrier or its exit, so a warp waiting for another warp's write "
                        f"(a flag, a lock) never sees it; order them with __syncthreads() (raising max_steps "
                        f"will not help)")
        return f"{limit} (a runaway loop? raise max_steps)"

    def _finish_frame(self, warp: Warp):
        done = warp.frames.pop()
        if not warp.frames:
            warp.state = "done"
            return
        caller = warp.frames[-1]
        lanes = done.entry_mask & ~warp.exited
        # copy-out of return values
        for dst, src in zip(done.ret_vars, done.fn.returns):
            store = done.params.get(src.name)
            if store is None:
                continue
            tgt = caller.params.setdefault(dst, [bytearray(len(store[0])) for _ in range(LANES)])
            for i in range(LANES):
                if lanes >> i & 1:
                    tgt[i][:] = store[i]
        caller.stack[-1].pc = done.call_pc + 1

    # -- instruction semantics ---------------------------------------------------------------------

    def _execute(self, warp: Warp, frame: Frame, top: Entry, ins: Instr, pc: int, mask: int, ex: int):
        op = ins.op
        info = ins.info
        if op in ("bra", "brx"):
            self._branch(warp, frame, top, ins, pc, mask, ex)
            return
        if op == "call":
            if ex and ex != mask:
                raise ExecutionFault("a guarded call that only some lanes take is not supported")
            if ex:
                top.pc = pc          # advanced past the call when the callee returns
                self._call(warp, frame, ins, ex, pc)
            else:
                top.pc = pc + 1
            return
        if op in ("ret", "exit"):
            top.pc = pc + 1
            if op == "exit" or len(warp.frames) == 1:
                warp.exited |= ex
            else:
                frame.returned |= ex
            return
        if op == "bar" or op == "barrier":
            top.pc = pc + 1
            if info.mode == "warp" or ex == 0:       # a guard false in every lane: no lane runs it
                return
            if ex != warp.live:
                raise ExecutionFault("bar.sync executed by only some lanes of a warp (divergent barrier)",
                                     lane=(lanes_of(ex) or [None])[0], kind="barrier")
            if info.mode == "red":
                pred = ins.operands[-1]
                vals = self.read(warp, frame, pred, "pred")
                votes = [vals[i] & 1 for i in range(LANES) if ex >> i & 1]
                warp.bar_red = (info.boolop, ins.operands[0], votes, ex)
            warp.state = "barrier"
            return
        top.pc = pc + 1
        if ex == 0:
            return
        handler = HANDLERS.get(op)
        if handler is None:
            raise ExecutionFault(f"no semantics for {ins.opcode}")
        handler(self, warp, frame, ins, info, ex)

    def _branch(self, warp, frame, top, ins, pc, mask, ex):
        fn = frame.fn
        if ins.op == "bra":
            targets = {fn.labels[ins.operands[0].name]: ex}
        else:
            idx = self.read(warp, frame, ins.operands[0], "u32")
            names = fn.branch_targets[ins.operands[1].name]
            targets = {}
            for i in range(LANES):
                if ex >> i & 1:
                    if idx[i] >= len(names):
                        raise ExecutionFault(f"brx.idx index {idx[i]} out of range", lane=i, kind="branch")
                    t = fn.labels[names[idx[i]]]
                    targets[t] = targets.get(t, 0) | (1 << i)
        rest = mask & ~ex
        if rest:
            targets[pc + 1] = targets.get(pc + 1, 0) | rest
        if len(targets) == 1:
            top.pc = next(iter(targets))
            return
        r = self.prog.ipdom[fn.name][pc]
        if top.rpc == r:
            top.pc = r
            top.mask = 0           # this entry is replaced by the paths below (same reconvergence)
            frame.stack.pop()
        else:
            top.pc = r
        # fall-through path runs last; targets in pc order, lowest on top
        order = sorted(targets.items(), key=lambda kv: -kv[0])
        for tpc, m in order:
            if tpc != r:
                frame.stack.append(Entry(tpc, m, r))

    def _call(self, warp, frame, ins, ex, pc):
        ops = ins.operands
        fi = next(i for i, o in enumerate(ops) if isinstance(o, Label))
        rets = ops[0].items if fi > 0 and isinstance(ops[0], ArgList) else ()
        args = ops[fi + 1].items if fi + 1 < len(ops) and isinstance(ops[fi + 1], ArgList) else ()
        callee = self.module.functions[ops[fi].name]
        if len(args) != len(callee.params) or len(rets) != len(callee.returns):
            raise ExecutionFault(f"call to {callee.name} with {len(args)} arguments and {len(rets)} "
                                 f"results; it takes {len(callee.params)} and returns {len(callee.returns)}")
        if len(warp.frames) > 64:
            raise ExecutionFault("call depth exceeds 64 (recursion?)", lane=lanes_of(ex)[0], kind="stack")
        params = {}
        for a, p in zip(args, callee.params):
            if isinstance(a, Sym):
                src = self.param_var(frame, a.name, p.size)
                params[p.name] = [bytearray(src[i][:p.size].ljust(p.size, b"\0")) for i in range(LANES)]
            else:
                vals = self.read(warp, frame, a, p.type)
                params[p.name] = [bytearray((vals[i] & alu.mask(8 * p.size)).to_bytes(p.size, "little"))
                                  for i in range(LANES)]
        base = frame.local_base + self.prog.local_size.get(frame.fn.name, 0)
        ret_vars = tuple(r.name for r in rets)
        warp.frames.append(Frame(callee, [Entry(0, ex, None)], {}, params, base, ex, pc, ret_vars))


#: which handler runs each opcode (`arithmetic`, `memory_ops`, `warp_ops`); branches, calls, barriers
#: and exits are `Interpreter._execute`'s own
HANDLERS = {}
for _op in ("add", "sub", "mul", "mad", "mul24", "mad24", "div", "rem", "abs", "neg", "min", "max",
            "sad", "addc", "subc", "madc", "fma", "sqrt", "rcp"):
    HANDLERS[_op] = h_arith
for _op in ("fma", "sqrt", "rcp"):
    HANDLERS[_op] = h_float
for _op in ("and", "or", "xor", "not", "cnot", "shl", "shr", "shf", "popc", "clz", "brev", "bfind",
            "bfe", "bfi", "prmt", "lop3", "dp4a", "dp2a"):
    HANDLERS[_op] = h_bits
for _op in ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt"):
    HANDLERS[_op] = h_approx
HANDLERS.update({"setp": h_setp, "set": h_setp, "selp": h_selp, "slct": h_selp, "mov": h_mov,
                 "cvt": h_cvt, "cvta": h_cvta, "ld": h_ld, "ldu": h_ld, "st": h_st, "atom": h_atom,
                 "red": h_atom, "shfl": h_shfl, "vote": h_vote, "match": h_match, "activemask": h_misc,
                 "membar": h_misc, "fence": h_misc, "nanosleep": h_misc, "trap": h_misc,
                 "brkpt": h_misc, "copysign": h_misc, "testp": h_misc})


def interpret(module: Module, spec: LaunchSpec, kernel: str | None = None,
              max_steps: int | None = None, trace: bool = False) -> LaunchResult:
    """Run one launch on the reference interpreter."""
    return Interpreter(module, spec, kernel=kernel, max_steps=max_steps, trace=trace).run()
