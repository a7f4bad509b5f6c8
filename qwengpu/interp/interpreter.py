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

import struct
from dataclasses import dataclass, field

import numpy as np

from qwengpu.launch import LaunchResult, LaunchSpec, check_step_limit
from qwengpu.ptx.ir import (TYPE_BITS, Addr, ArgList, Function, Imm, Instr, Label, Module, Neg, Pair, Reg, Special, Sym,
                            Vec)
from qwengpu.ptx.isa import validate_module

from . import alu
from .cfg import immediate_postdominators
from .memory import (CONST_WINDOW, GENERIC_WINDOWS, LOCAL_BYTES, SHARED_WINDOW, WINDOW_SIZE, ExecutionFault, FlatMemory,
                     MemoryFault, buffers_to_global, check_alignment, check_kernel_limits, kernel_shared_variables,
                     layout_variables, read_back, shared_end)

LANES = 4
FULL = (1 << LANES) - 1
#: the default step limit: this many steps, or `STEPS_PER_WARP` for each warp of the launch when
#: that is more (a launch's legitimate work grows with its warps; a runaway loop still stops)
DEFAULT_MAX_STEPS = 2_000_000
STEPS_PER_WARP = 200_000


def launch_warps(spec: LaunchSpec) -> int:
    """The warps a launch runs: every block's threads in warps of `LANES`."""
    return spec.blocks * -(-spec.threads_per_block // LANES)


def default_max_steps(spec: LaunchSpec) -> int:
    """The interpreter's step limit for `spec` when none is given."""
    return max(DEFAULT_MAX_STEPS, STEPS_PER_WARP * launch_warps(spec))


class StepLimitExceeded(ExecutionFault):
    pass


def _floats():
    from . import floats
    return floats


def _approx():
    from . import approx
    return approx


def _bits(t: str) -> int:
    return 1 if t == "pred" else TYPE_BITS[t]


def _signed(t: str) -> bool:
    return t[0] == "s"


def float_bits(x: float, width: int) -> int:
    if width == 32:
        return struct.unpack("<I", struct.pack("<f", x))[0]
    if width == 64:
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    return int(np.array([x], dtype=np.float16).view(np.uint16)[0])


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
# machine state


@dataclass
class Entry:
    pc: int
    mask: int
    rpc: int | None


@dataclass
class Frame:
    fn: Function
    stack: list[Entry]
    regs: dict
    params: dict                  # name -> [bytearray per lane]
    local_base: int
    entry_mask: int
    call_pc: int = -1
    ret_vars: tuple = ()
    returned: int = 0


class Warp:
    def __init__(self, block_linear: int, index: int, present: int, tids: list[tuple[int, int, int]]):
        self.block = block_linear
        self.index = index
        self.present = present
        self.tids = tids
        self.frames: list[Frame] = []
        self.exited = 0
        self.state = "ready"
        self.locals = [FlatMemory("local", 0, limit=LOCAL_BYTES) for _ in range(LANES)]
        self.bar_red = None

    @property
    def live(self) -> int:
        return self.present & ~self.exited


class ModuleAnalysis:
    """Per-module precomputation: reconvergence points, shared/const/local layouts. Shared memory
    is laid out for `kernel` (only the variables it reaches: `kernel_shared_variables`)."""

    def __init__(self, module: Module, kernel: Function | None = None):
        self.module = module
        self.ipdom = {name: immediate_postdominators(fn) for name, fn in module.functions.items()
                      if not fn.declared_only}
        every = [v for v in module.vars.values() if v.space == "shared"] + [
            v for fn in module.functions.values() for v in fn.vars.values() if v.space == "shared"]
        shared = every if kernel is None else kernel_shared_variables(module, kernel)
        static = [v for v in shared if not v.extern]
        self.shared_offsets = layout_variables(static)
        self.static_shared = shared_end(static, self.shared_offsets)
        self.dynamic_shared = [v.name for v in shared if v.extern]
        const_vars = [v for v in module.vars.values() if v.space == "const"]
        self.const_offsets = layout_variables(const_vars)
        size = max([self.const_offsets[v.name] + (v.size or 0) for v in const_vars], default=0)
        init = bytearray(size)
        for v in const_vars:
            if v.init:
                o = self.const_offsets[v.name]
                init[o:o + len(v.init)] = v.init
        self.const_init = bytes(init)
        self.local_offsets = {}
        self.local_size = {}
        for name, fn in module.functions.items():
            lv = [v for v in fn.vars.values() if v.space == "local"]
            offs = layout_variables(lv)
            self.local_offsets[name] = offs
            sz = max([offs[v.name] + (v.size or 0) for v in lv], default=0)
            self.local_size[name] = (sz + 15) // 16 * 16


# ---------------------------------------------------------------------------------------------
# the interpreter


class Interpreter:
    def __init__(self, module: Module, spec: LaunchSpec, kernel: str | None = None,
                 max_steps: int | None = None, trace: bool = False):
        validate_module(module)
        self.module = module
        self.spec = spec
        self.kernel = module.kernel(kernel if kernel is not None else spec.kernel)
        check_kernel_limits(module, spec, self.kernel)      # before anything is allocated
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
        self.kernel_params = self._kernel_param_bytes()
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

    def _kernel_param_bytes(self) -> dict:
        out = {}
        addrs = self.layout.buffer_addresses
        for p, a, addr in zip(self.kernel.params, self.spec.args, addrs):
            if a.is_buffer:
                raw = addr.to_bytes(8, "little")
            else:
                raw = np.array([a.value], dtype=a.value.dtype).tobytes()
            out[p.name] = raw
        return out

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
                            trace=self.trace if self.record else None, printf=self._printf())

    def _printf(self):
        """The printf output, formatted from the buffer in global memory (None without printf)."""
        from .printf import PRINTF_BYTES, printf_buffer_address, printf_output
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
                    self._write_reg(w.frames[-1], dest, [result] * LANES, mask, "u32")
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

    # -- operands ------------------------------------------------------------------------------------

    def _special(self, warp: Warp, name: str) -> list[int]:
        base, _, comp = name.partition(".")
        idx = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        if name == "WARP_SZ":
            return [LANES] * LANES
        if base == "%tid":
            return [t[idx] for t in warp.tids]
        if base == "%ntid":
            return [self.spec.block[idx]] * LANES
        if base == "%ctaid":
            return [self.ctaid[idx]] * LANES
        if base == "%nctaid":
            return [self.spec.grid[idx]] * LANES
        if base == "%laneid":
            return list(range(LANES))
        if base == "%warpid":
            return [warp.index] * LANES
        if base == "%nwarpid":
            return [len(self.warps)] * LANES
        if base.startswith("%lanemask_"):
            kind = base[len("%lanemask_"):]
            f = {"eq": lambda i: 1 << i, "lt": lambda i: (1 << i) - 1, "le": lambda i: (1 << (i + 1)) - 1,
                 "gt": lambda i: FULL & ~((1 << (i + 1)) - 1), "ge": lambda i: FULL & ~((1 << i) - 1)}[kind]
            return [f(i) for i in range(LANES)]
        if base in ("%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
            return [self.steps] * LANES
        if base in ("%smid", "%gridid"):
            return [0] * LANES
        if base == "%nsmid":
            return [1] * LANES
        if base == "%dynamic_smem_size":
            return [self.spec.shared_bytes] * LANES
        if base in ("%total_smem_size", "%aggr_smem_size"):
            return [self.dyn_shared_base + self.spec.shared_bytes] * LANES
        raise ExecutionFault(f"unsupported special register {name}")

    def _read(self, warp: Warp, frame: Frame, o, t: str) -> list[int]:
        """Source operand -> raw bits per lane, masked to the width of type `t`."""
        w = _bits(t)
        m = alu.mask(w)
        if isinstance(o, Reg):
            v = frame.regs.get(o.name)
            return [x & m for x in v] if v is not None else [0] * LANES
        if isinstance(o, Imm):
            if o.bits is not None:
                if t in ("f32", "f64", "f16") and o.width != w:
                    # a float literal of the other width: convert exactly as PTX does (by value)
                    return [float_bits(o.value, w)] * LANES
                return [o.bits & m] * LANES
            if isinstance(o.value, float) or (t in ("f32", "f64", "f16") and not isinstance(o.value, int)):
                return [float_bits(float(o.value), w)] * LANES
            if t in ("f32", "f64", "f16"):
                return [float_bits(float(o.value), w)] * LANES
            return [o.value & m] * LANES
        if isinstance(o, Special):
            return [x & m for x in self._special(warp, o.name)]
        if isinstance(o, Neg):
            v = self._read(warp, frame, o.reg, "pred")
            return [1 - (x & 1) for x in v]
        if isinstance(o, Sym):
            return [a & m for a in self._symbol_address(frame, o.name)]
        if isinstance(o, Addr) and isinstance(o.base, Sym):
            return [(a + o.offset) & m for a in self._symbol_address(frame, o.base.name)]
        raise ExecutionFault(f"unsupported operand {o}")

    def _symbol_address(self, frame: Frame, name: str) -> list[int]:
        """The address a symbol denotes in its own state space (what `mov` gives)."""
        if name in self.layout.var_addresses:
            return [self.layout.var_addresses[name]] * LANES
        if name in self.prog.shared_offsets:
            return [self.prog.shared_offsets[name]] * LANES
        if name in self.prog.dynamic_shared:
            return [self.dyn_shared_base] * LANES
        if name in self.prog.const_offsets:
            return [self.prog.const_offsets[name]] * LANES
        offs = self.prog.local_offsets.get(frame.fn.name, {})
        if name in offs:
            return [frame.local_base + offs[name]] * LANES
        raise ExecutionFault(f"taking the address of {name} is not supported")

    def _write_reg(self, frame: Frame, o, values: list[int], mask: int, t: str):
        if o is None:
            return
        if not isinstance(o, Reg):
            raise ExecutionFault(f"destination {o} is not a register")
        rt = frame.fn.regs.get(o.name, t)
        if rt == "pred" or t == "pred":
            vals = [v & 1 for v in values]
        else:
            w, rw = _bits(t), _bits(rt)
            vals = [alu.extend(v, w, rw, _signed(t)) if rw > w else v & alu.mask(rw) for v in values]
        old = frame.regs.get(o.name)
        if old is None:
            old = [0] * LANES
        new = [vals[i] if mask >> i & 1 else old[i] for i in range(LANES)]
        frame.regs[o.name] = new
        if self._step is not None:
            self._step.reg_writes[o.name] = list(new)
            self._step.reg_write_mask |= mask

    # -- memory --------------------------------------------------------------------------------------

    def _resolve(self, space: str | None, addr: int, lane: int):
        """(memory object, space name, offset) for an address in `space` (None = generic)."""
        if space is None:
            for sp, base in GENERIC_WINDOWS.items():
                if base <= addr < base + WINDOW_SIZE:
                    return self._resolve(sp, addr - base, lane)
            space = "global"
        if space == "global":
            return self.gmem, "global", addr
        if space == "shared":
            return self.shared, "shared", addr
        if space == "local":
            # the thread's local memory is its live frames (the kernel's depot, each callee's above
            # it, each padded to 16 bytes): an access beyond the innermost frame faults
            frame = self.warp.frames[-1]
            mem = self.warp.locals[lane]
            mem.limit = min(LOCAL_BYTES, frame.local_base + self.prog.local_size.get(frame.fn.name, 0))
            return mem, "local", addr
        if space == "const":
            return self.const, "const", addr
        raise ExecutionFault(f"unsupported state space {space}")

    def _addresses(self, frame: Frame, a: Addr, lanes: int) -> list[int]:
        if a.base is None:
            base = [0] * LANES
        elif isinstance(a.base, Reg):
            base = frame.regs.get(a.base.name, [0] * LANES)
        else:
            base = self._symbol_address(frame, a.base.name)
        return [(b + a.offset) & 0xFFFFFFFFFFFFFFFF for b in base]

    def _mem_read(self, space, addr, size, lane):
        mem, sp, off = self._resolve(space, addr, lane)
        check_alignment(off if sp != "global" else addr, size, sp)
        try:
            return mem.read(off, size)
        except MemoryFault as e:
            raise e.locate(lane=lane)

    def _mem_write(self, space, addr, size, value, lane):
        mem, sp, off = self._resolve(space, addr, lane)
        if sp == "const":
            raise MemoryFault(f"write to const memory at 0x{addr:x}", address=addr, kind="write")
        check_alignment(off if sp != "global" else addr, size, sp)
        try:
            mem.write(off, size, value)
        except MemoryFault as e:
            raise e.locate(lane=lane)
        if self._step is not None:
            self._step.mem_writes.append((sp, off, size, lane, value & alu.mask(8 * size)))

    def _param_var(self, frame: Frame, name: str, size_hint: int):
        store = frame.params.get(name)
        if store is None:
            var = frame.fn.vars.get(name)
            size = var.size if var is not None and var.size else size_hint
            for p in list(frame.fn.params) + list(frame.fn.returns):
                if p.name == name:
                    size = p.size
            store = [bytearray(size) for _ in range(LANES)]
            frame.params[name] = store
        return store

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
                                     lane=(_lanes(ex) or [None])[0], kind="barrier")
            if info.mode == "red":
                pred = ins.operands[-1]
                vals = self._read(warp, frame, pred, "pred")
                votes = [vals[i] & 1 for i in range(LANES) if ex >> i & 1]
                warp.bar_red = (info.boolop, ins.operands[0], votes, ex)
            warp.state = "barrier"
            return
        top.pc = pc + 1
        if ex == 0:
            return
        handler = _HANDLERS.get(op)
        if handler is None:
            raise ExecutionFault(f"no semantics for {ins.opcode}")
        handler(self, warp, frame, ins, info, ex)

    def _branch(self, warp, frame, top, ins, pc, mask, ex):
        fn = frame.fn
        if ins.op == "bra":
            targets = {fn.labels[ins.operands[0].name]: ex}
        else:
            idx = self._read(warp, frame, ins.operands[0], "u32")
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
            raise ExecutionFault("call depth exceeds 64 (recursion?)", lane=_lanes(ex)[0], kind="stack")
        params = {}
        for a, p in zip(args, callee.params):
            if isinstance(a, Sym):
                src = self._param_var(frame, a.name, p.size)
                params[p.name] = [bytearray(src[i][:p.size].ljust(p.size, b"\0")) for i in range(LANES)]
            else:
                vals = self._read(warp, frame, a, p.type)
                params[p.name] = [bytearray((vals[i] & alu.mask(8 * p.size)).to_bytes(p.size, "little"))
                                  for i in range(LANES)]
        base = frame.local_base + self.prog.local_size.get(frame.fn.name, 0)
        ret_vars = tuple(r.name for r in rets)
        warp.frames.append(Frame(callee, [Entry(0, ex, None)], {}, params, base, ex, pc, ret_vars))


# ---------------------------------------------------------------------------------------------
# handlers: (interp, warp, frame, ins, info, lanes)


def _lanes(mask: int):
    return [i for i in range(LANES) if mask >> i & 1]


def _np(vals: list[int]) -> np.ndarray:
    return np.array(vals, dtype=np.uint64)


def _from_np(arr) -> list[int]:
    return [int(x) for x in np.asarray(arr).tolist()]


def _float_args(info):
    return dict(width=_bits(info.type))


def h_arith(it: Interpreter, warp, frame, ins, info, ex):
    op = ins.op
    t = info.type
    if t in ("f32", "f64", "f16", "f16x2"):
        return h_float(it, warp, frame, ins, info, ex)
    w = _bits(t)
    s = _signed(t)
    srcs = [it._read(warp, frame, o, t) for o in ins.operands[1:]]
    cc = frame.regs.get("%%cc", [0] * LANES)
    out = [0] * LANES
    newcc = list(cc)
    for i in _lanes(ex):
        a = srcs[0][i]
        b = srcs[1][i] if len(srcs) > 1 else 0
        if op == "add":
            r = alu.add(a, b, w, s, info.sat)
            if "cc" in info.flags:
                newcc[i] = (a + b) >> w
        elif op == "addc":
            r = alu.wrap(a + b + cc[i], w)
            if "cc" in info.flags:
                newcc[i] = (a + b + cc[i]) >> w
        elif op == "sub":
            r = alu.sub(a, b, w, s, info.sat)
            if "cc" in info.flags:
                newcc[i] = 1 if a < b else 0
        elif op == "subc":
            r = alu.wrap(a - b - cc[i], w)
            if "cc" in info.flags:
                newcc[i] = 1 if a < b + cc[i] else 0
        elif op == "mul":
            r = alu.mul(a, b, w, s, info.mode)
        elif op == "mad":
            p = alu.mul(a, b, w, s, info.mode)
            ow = 2 * w if info.mode == "wide" else w
            c = srcs[2][i] if info.mode != "wide" else it._read(warp, frame, ins.operands[3], _wide(t))[i]
            if info.sat:     # mad.hi.sat.s32
                total = alu.sx(p, w) + alu.sx(c, w)
                r = alu.wrap(max(-(1 << 31), min((1 << 31) - 1, total)), w)
            else:
                r = alu.wrap(p + c, ow)
            if "cc" in info.flags:
                newcc[i] = (p + c) >> ow
        elif op == "madc":
            p = alu.mul(a, b, w, s, info.mode or "lo")
            r = alu.wrap(p + srcs[2][i] + cc[i], w)
            if "cc" in info.flags:
                newcc[i] = (p + srcs[2][i] + cc[i]) >> w
        elif op == "mul24":
            r = alu.mul24(a, b, s, info.mode)
        elif op == "mad24":
            r = alu.wrap(alu.mul24(a, b, s, info.mode) + srcs[2][i], 32)
        elif op == "div":
            r = alu.div(a, b, w, s)
        elif op == "rem":
            r = alu.rem(a, b, w, s)
        elif op == "abs":
            r = alu.absolute(a, w)
        elif op == "neg":
            r = alu.neg(a, w)
        elif op == "min":
            r = alu.minimum(a, b, w, s)
        elif op == "max":
            r = alu.maximum(a, b, w, s)
        elif op == "sad":
            r = alu.sad(a, b, srcs[2][i], w, s)
        else:
            raise ExecutionFault(f"no semantics for {ins.opcode}")
        out[i] = r
    if "cc" in info.flags:
        frame.regs["%%cc"] = [newcc[i] if ex >> i & 1 else cc[i] for i in range(LANES)]
    dt = _wide(t) if info.mode == "wide" else t
    it._write_reg(frame, ins.operands[0], out, ex, dt)


def _wide(t: str) -> str:
    return t[0] + str(2 * int(t[1:]))


def h_float(it: Interpreter, warp, frame, ins, info, ex):
    t = info.type
    srcs = [_np(it._read(warp, frame, o, t)) for o in ins.operands[1:]]
    if t == "f16x2":        # each half on its own: the low halves, then the high ones
        lo = _float_op(ins, info, "f16", [x & 0xFFFF for x in srcs])
        hi = _float_op(ins, info, "f16", [(x >> 16) & 0xFFFF for x in srcs])
        out = [int(a) | int(b) << 16 for a, b in zip(np.asarray(lo).tolist(), np.asarray(hi).tolist())]
    else:
        out = _from_np(_float_op(ins, info, t, srcs))
    it._write_reg(frame, ins.operands[0], out, ex, t)


def _float_op(ins, info, t: str, srcs: list):
    """The float operation `ins` on type `t` over each lane's operands (`srcs`: one array each)."""
    F = _floats()
    w = _bits(t)
    op = ins.op
    kw = dict(width=w, ftz=info.ftz)
    rnd = info.rnd or "rn"
    if op == "add":
        r = F.fadd(srcs[0], srcs[1], rnd=rnd, sat=info.sat, **kw)
    elif op == "sub":
        r = F.fsub(srcs[0], srcs[1], rnd=rnd, sat=info.sat, **kw)
    elif op == "mul":
        r = F.fmul(srcs[0], srcs[1], rnd=rnd, sat=info.sat, **kw)
    elif op in ("fma", "mad"):
        r = F.ffma(srcs[0], srcs[1], srcs[2], rnd=rnd, sat=info.sat, **kw)
    elif op == "div":
        r = F.fdiv(srcs[0], srcs[1], rnd=rnd, **kw)
    elif op == "rcp" and info.mode == "approx64":
        r = _approx().rcp_f64(srcs[0])
    elif op == "rcp":
        r = F.frcp(srcs[0], rnd=rnd, **kw)
    elif op == "sqrt":
        r = F.fsqrt(srcs[0], rnd=rnd, **kw)
    elif op == "min":
        r = F.fmin(srcs[0], srcs[1], nan="NaN" in info.flags, **kw)
    elif op == "max":
        r = F.fmax(srcs[0], srcs[1], nan="NaN" in info.flags, **kw)
    elif op == "abs":
        r = F.fabs(srcs[0], **kw)
    elif op == "neg":
        r = F.fneg(srcs[0], **kw)
    else:
        raise ExecutionFault(f"no semantics for {ins.opcode}")
    return r


def h_approx(it: Interpreter, warp, frame, ins, info, ex):
    """ex2, lg2, sin, cos, tanh, rsqrt .approx: qwenGPU's definitions (`approx`)."""
    t = info.type
    a = _np(it._read(warp, frame, ins.operands[1], t))
    r = _approx().rsqrt_f64(a) if t == "f64" else _approx().approximate(ins.op, a, ftz=info.ftz)
    it._write_reg(frame, ins.operands[0], _from_np(r), ex, t)


def h_bits(it: Interpreter, warp, frame, ins, info, ex):
    op = ins.op
    t = info.type
    w = _bits(t)
    ops = ins.operands
    out = [0] * LANES
    dt = t
    if op in ("and", "or", "xor", "not", "cnot"):
        srcs = [it._read(warp, frame, o, t) for o in ops[1:]]
        m = alu.mask(w)
        for i in _lanes(ex):
            a = srcs[0][i]
            if op == "and":
                r = a & srcs[1][i]
            elif op == "or":
                r = a | srcs[1][i]
            elif op == "xor":
                r = a ^ srcs[1][i]
            elif op == "not":
                r = ~a & m
            else:
                r = 1 if a == 0 else 0
            out[i] = r
    elif op in ("shl", "shr"):
        a = it._read(warp, frame, ops[1], t)
        n = it._read(warp, frame, ops[2], "u32")
        for i in _lanes(ex):
            out[i] = alu.shl(a[i], n[i], w) if op == "shl" else alu.shr(a[i], n[i], w, _signed(t))
    elif op == "shf":
        a = it._read(warp, frame, ops[1], "b32")
        b = it._read(warp, frame, ops[2], "b32")
        n = it._read(warp, frame, ops[3], "u32")
        for i in _lanes(ex):
            out[i] = alu.shf(a[i], b[i], n[i], info.mode == "l", "clamp" in info.flags)
    elif op in ("popc", "clz", "brev", "bfind"):
        a = it._read(warp, frame, ops[1], t)
        for i in _lanes(ex):
            if op == "popc":
                out[i] = alu.popc(a[i], w)
            elif op == "clz":
                out[i] = alu.clz(a[i], w)
            elif op == "brev":
                out[i] = alu.brev(a[i], w)
            else:
                out[i] = alu.bfind(a[i], w, _signed(t), "shiftamt" in info.flags)
        if op != "brev":
            dt = "u32"
    elif op == "bfe":
        a = it._read(warp, frame, ops[1], t)
        p = it._read(warp, frame, ops[2], "u32")
        ln = it._read(warp, frame, ops[3], "u32")
        for i in _lanes(ex):
            out[i] = alu.bfe(a[i], p[i], ln[i], w, _signed(t))
    elif op == "bfi":
        a = it._read(warp, frame, ops[1], t)
        b = it._read(warp, frame, ops[2], t)
        p = it._read(warp, frame, ops[3], "u32")
        ln = it._read(warp, frame, ops[4], "u32")
        for i in _lanes(ex):
            out[i] = alu.bfi(a[i], b[i], p[i], ln[i], w)
    elif op == "prmt":
        a, b, c = (it._read(warp, frame, o, "b32") for o in ops[1:4])
        for i in _lanes(ex):
            out[i] = alu.prmt(a[i], b[i], c[i], info.mode)
    elif op == "lop3":
        a, b, c, imm = (it._read(warp, frame, o, "b32") for o in ops[1:5])
        for i in _lanes(ex):
            out[i] = alu.lop3(a[i], b[i], c[i], imm[i] & 0xFF)
    elif op in ("dp4a", "dp2a"):
        a, b, c = (it._read(warp, frame, o, "b32") for o in ops[1:4])
        for i in _lanes(ex):
            if op == "dp4a":
                out[i] = alu.dp4a(a[i], b[i], c[i], info.type == "s32", info.src_type == "s32")
            else:
                out[i] = alu.dp2a(a[i], b[i], c[i], info.type == "s32", info.src_type == "s32",
                                  info.mode == "hi")
        dt = "u32" if info.type == "u32" and info.src_type == "u32" else "s32"
    it._write_reg(frame, ops[0], out, ex, dt)


def _compare(it, warp, frame, info, a_op, b_op, t) -> list[int]:
    a = it._read(warp, frame, a_op, t)
    b = it._read(warp, frame, b_op, t)
    if t in ("f32", "f64", "f16"):
        F = _floats()
        r = F.fcompare(info.cmp, _np(a), _np(b), width=_bits(t), ftz=info.ftz)
        return [int(x) for x in np.asarray(r).tolist()]
    w = _bits(t)
    return [int(alu.compare(info.cmp, a[i], b[i], w, _signed(t))) for i in range(LANES)]


def _combine(boolop, t: list[int], c: list[int]) -> list[int]:
    if boolop == "and":
        return [x & y for x, y in zip(t, c)]
    if boolop == "or":
        return [x | y for x, y in zip(t, c)]
    return [x ^ y for x, y in zip(t, c)]


def h_setp(it: Interpreter, warp, frame, ins, info, ex):
    ops = ins.operands
    if ins.op == "setp":
        r = _compare(it, warp, frame, info, ops[1], ops[2], info.type)
        nr = [1 - x for x in r]
        if info.boolop:
            c = [x & 1 for x in it._read(warp, frame, ops[3], "pred")]
            r, nr = _combine(info.boolop, r, c), _combine(info.boolop, nr, c)
        dst = ops[0]
        if isinstance(dst, Pair):
            it._write_reg(frame, dst.first, r, ex, "pred")
            it._write_reg(frame, dst.second, nr, ex, "pred")
        else:
            it._write_reg(frame, dst, r, ex, "pred")
        return
    # set.cmp.dtype.stype
    r = _compare(it, warp, frame, info, ops[1], ops[2], info.src_type)
    if info.boolop:
        c = [x & 1 for x in it._read(warp, frame, ops[3], "pred")]
        r = _combine(info.boolop, r, c)
    one = 0x3F800000 if info.type == "f32" else 0xFFFFFFFF
    it._write_reg(frame, ops[0], [one if x else 0 for x in r], ex, info.type)


def h_selp(it: Interpreter, warp, frame, ins, info, ex):
    ops = ins.operands
    a = it._read(warp, frame, ops[1], info.type)
    b = it._read(warp, frame, ops[2], info.type)
    if ins.op == "selp":
        c = it._read(warp, frame, ops[3], "pred")
        out = [a[i] if c[i] & 1 else b[i] for i in range(LANES)]
    else:
        c = it._read(warp, frame, ops[3], info.src_type)
        if info.src_type == "s32":
            sel = [alu.sx(x, 32) >= 0 for x in c]
        else:
            F = _floats()
            zero = _np([0] * LANES)
            sel = [bool(x) for x in np.asarray(F.fcompare("ge", _np(c), zero, width=32, ftz=info.ftz)).tolist()]
        out = [a[i] if sel[i] else b[i] for i in range(LANES)]
    it._write_reg(frame, ops[0], out, ex, info.type)


def h_mov(it: Interpreter, warp, frame, ins, info, ex):
    d, a = ins.operands
    t = info.type
    if isinstance(d, Vec):        # unpack: mov.b64 {lo, hi}, x
        n = len(d.items)
        ew = _bits(t) // n
        v = it._read(warp, frame, a, t)
        for k, r in enumerate(d.items):
            if r is not None:
                it._write_reg(frame, r, [(x >> (ew * k)) & alu.mask(ew) for x in v], ex, f"b{ew}")
        return
    if isinstance(a, Vec):        # pack: mov.b64 x, {lo, hi}
        n = len(a.items)
        ew = _bits(t) // n
        parts = [it._read(warp, frame, r, f"b{ew}") if r is not None else [0] * LANES for r in a.items]
        v = [sum(parts[k][i] << (ew * k) for k in range(n)) for i in range(LANES)]
        it._write_reg(frame, d, v, ex, t)
        return
    if isinstance(a, Label):
        raise ExecutionFault("taking the address of a function is not supported")
    it._write_reg(frame, d, it._read(warp, frame, a, t), ex, t)


def h_cvt(it: Interpreter, warp, frame, ins, info, ex):
    d, a = ins.operands
    dt, st = info.type, info.src_type
    v = it._read(warp, frame, a, st)
    if dt[0] in "usb" and st[0] in "usb":
        sw, dw = _bits(st), _bits(dt)
        out = []
        for x in v:
            val = alu.sx(x, sw) if _signed(st) else x
            if info.sat:
                lo, hi = (-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if _signed(dt) else (0, (1 << dw) - 1)
                val = max(lo, min(hi, val))
            out.append(alu.wrap(val, dw))
        it._write_reg(frame, d, out, ex, dt)
        return
    F = _floats()
    r = F.cvt(_np(v), dt, st, rnd=info.rnd, sat=info.sat, ftz=info.ftz)
    it._write_reg(frame, d, _from_np(r), ex, dt)


def h_cvta(it: Interpreter, warp, frame, ins, info, ex):
    d, a = ins.operands
    v = it._read(warp, frame, a, info.type)
    sp = info.space
    out = []
    for i in range(LANES):
        x = v[i]
        if sp == "global":
            out.append(x)
        elif "to" in info.flags:
            base = GENERIC_WINDOWS.get(sp)
            if base is None:
                raise ExecutionFault(f"cvta.to.{sp} is not supported")
            if ex >> i & 1 and not base <= x < base + WINDOW_SIZE:
                raise MemoryFault(f"cvta.to.{sp} of 0x{x:x}, which is not a {sp} address",
                                  address=x).locate(lane=i)
            out.append(x - base if base <= x < base + WINDOW_SIZE else 0)
        else:
            base = GENERIC_WINDOWS.get(sp)
            if base is None:
                raise ExecutionFault(f"cvta.{sp} is not supported")
            out.append(x + base)
    it._write_reg(frame, d, out, ex, info.type)


def h_ld(it: Interpreter, warp, frame, ins, info, ex):
    d, a = ins.operands
    t = info.type
    size = max(1, _bits(t) // 8)
    regs = list(d.items) if isinstance(d, Vec) else [d]
    if len(regs) != info.vec:
        raise ExecutionFault(f"{ins.opcode} needs {info.vec} destination registers")
    values = [[0] * LANES for _ in regs]
    if info.space == "param":
        if not isinstance(a.base, Sym):
            raise ExecutionFault("ld.param through a register address is not supported")
        store = it._param_var(frame, a.base.name, a.offset + size * info.vec)
        for i in _lanes(ex):
            for k in range(len(regs)):
                off = a.offset + k * size
                if off + size > len(store[i]):
                    raise MemoryFault(f"ld.param beyond parameter {a.base.name} (offset {off})",
                                      address=off).locate(lane=i)
                values[k][i] = int.from_bytes(store[i][off:off + size], "little")
    else:
        addrs = it._addresses(frame, a, ex)
        for i in _lanes(ex):
            check_alignment(addrs[i], size * info.vec, info.space or "generic") if info.vec > 1 else None
            for k in range(len(regs)):
                try:
                    values[k][i] = it._mem_read(info.space, addrs[i] + k * size, size, i)
                except MemoryFault as e:
                    raise e.locate(lane=i)
    for r, v in zip(regs, values):
        if r is not None:
            it._write_reg(frame, r, v, ex, t)


def h_st(it: Interpreter, warp, frame, ins, info, ex):
    a, s = ins.operands
    t = info.type
    size = max(1, _bits(t) // 8)
    srcs = list(s.items) if isinstance(s, Vec) else [s]
    values = [it._read(warp, frame, o, t) for o in srcs]
    if info.space == "param":
        if not isinstance(a.base, Sym):
            raise ExecutionFault("st.param through a register address is not supported")
        store = it._param_var(frame, a.base.name, a.offset + size * len(srcs))
        for i in _lanes(ex):
            for k in range(len(srcs)):
                off = a.offset + k * size
                if off + size > len(store[i]):
                    store[i].extend(bytes(off + size - len(store[i])))
                store[i][off:off + size] = values[k][i].to_bytes(size, "little")
        return
    addrs = it._addresses(frame, a, ex)
    for i in _lanes(ex):
        if info.vec > 1:
            check_alignment(addrs[i], size * info.vec, info.space or "generic")
        for k in range(len(srcs)):
            try:
                it._mem_write(info.space, addrs[i] + k * size, size, values[k][i], i)
            except MemoryFault as e:
                raise e.locate(lane=i)


def h_atom(it: Interpreter, warp, frame, ins, info, ex):
    ops = ins.operands
    is_red = ins.op == "red"
    a = ops[0] if is_red else ops[1]
    srcs = ops[1:] if is_red else ops[2:]
    t = info.type
    w = _bits(t)
    size = w // 8
    b = it._read(warp, frame, srcs[0], t)
    c = it._read(warp, frame, srcs[1], t) if len(srcs) > 1 else None
    addrs = it._addresses(frame, a, ex)
    out = [0] * LANES
    F = None
    for i in _lanes(ex):          # lanes in order: the machine's defined atomic order
        try:
            old = it._mem_read(info.space, addrs[i], size, i)
        except MemoryFault as e:
            if e.kind == "read":           # an atomic's access faults as an atomic (the machine's kind)
                e.kind = "atomic"
                e.reason = e.reason.replace(" read ", " atomic ", 1)
            raise e.locate(lane=i)
        o = info.boolop
        s = _signed(t)
        if o == "add":
            if t in ("f32", "f64"):
                F = F or _floats()
                new = int(F.fadd(_np([old]), _np([b[i]]), width=w, ftz=(t == "f32"))[0])
            else:
                new = alu.wrap(old + b[i], w)
        elif o == "min":
            new = alu.minimum(old, b[i], w, s)
        elif o == "max":
            new = alu.maximum(old, b[i], w, s)
        elif o == "inc":
            new = 0 if old >= b[i] else old + 1
        elif o == "dec":
            new = b[i] if (old == 0 or old > b[i]) else old - 1
        elif o == "and":
            new = old & b[i]
        elif o == "or":
            new = old | b[i]
        elif o == "xor":
            new = old ^ b[i]
        elif o == "exch":
            new = b[i]
        elif o == "cas":
            new = c[i] if old == b[i] else old
        else:
            raise ExecutionFault(f"no semantics for {ins.opcode}")
        it._mem_write(info.space, addrs[i], size, new, i)
        out[i] = old
    if not is_red:
        it._write_reg(frame, ops[0], out, ex, t)


def _member_mask(it, warp, frame, o, ex: int) -> int:
    """The membermask operand (read from an executing lane: it is warp-uniform by contract)."""
    v = it._read(warp, frame, o, "b32")
    return v[_lanes(ex)[0]] & FULL


def h_shfl(it: Interpreter, warp, frame, ins, info, ex):
    d, a, b, c, mm = ins.operands
    av = it._read(warp, frame, a, "b32")
    bv = it._read(warp, frame, b, "b32")
    cv = it._read(warp, frame, c, "b32")
    out = [0] * LANES
    pred = [0] * LANES
    for lane in _lanes(ex):
        bval = bv[lane] & 0x1F
        cval = cv[lane] & 0x1F
        seg = (cv[lane] >> 8) & 0x1F
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if info.mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif info.mode == "down":
            j = lane + bval
            ok = j <= max_lane
        elif info.mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        if not 0 <= j < LANES:             # lanes 4..31 do not exist in a 4-lane warp
            ok = False
        if not ok:
            j = lane
        out[lane] = av[j]
        pred[lane] = int(ok)
    if isinstance(d, Pair):
        it._write_reg(frame, d.first, out, ex, "b32")
        it._write_reg(frame, d.second, pred, ex, "pred")
    else:
        it._write_reg(frame, d, out, ex, "b32")


def h_vote(it: Interpreter, warp, frame, ins, info, ex):
    d, a, mm = ins.operands
    members = _member_mask(it, warp, frame, mm, ex) & ex
    p = [x & 1 for x in it._read(warp, frame, a, "pred")]
    lanes = _lanes(members)
    if info.mode == "ballot":
        v = sum(p[i] << i for i in lanes)
        it._write_reg(frame, d, [v] * LANES, ex, "b32")
        return
    if info.mode == "any":
        r = int(any(p[i] for i in lanes))
    elif info.mode == "all":
        r = int(all(p[i] for i in lanes))
    else:
        r = int(len({p[i] for i in lanes}) <= 1)
    it._write_reg(frame, d, [r] * LANES, ex, "pred")


def h_match(it: Interpreter, warp, frame, ins, info, ex):
    d, a, mm = ins.operands
    members = _member_mask(it, warp, frame, mm, ex) & ex
    v = it._read(warp, frame, a, info.type)
    lanes = _lanes(members)
    if info.mode == "any":
        out = [sum(1 << j for j in lanes if v[j] == v[i]) for i in range(LANES)]
        it._write_reg(frame, d, out, ex, "b32")
        return
    same = len({v[j] for j in lanes}) <= 1
    out = [members if same else 0] * LANES
    if isinstance(d, Pair):
        it._write_reg(frame, d.first, out, ex, "b32")
        it._write_reg(frame, d.second, [int(same)] * LANES, ex, "pred")
    else:
        it._write_reg(frame, d, out, ex, "b32")


def h_misc(it: Interpreter, warp, frame, ins, info, ex):
    op = ins.op
    if op == "activemask":
        it._write_reg(frame, ins.operands[0], [ex] * LANES, ex, "b32")
    elif op in ("membar", "fence", "nanosleep"):
        return
    elif op == "trap":
        raise ExecutionFault("trap executed", lane=_lanes(ex)[0], kind="trap")
    elif op == "brkpt":
        raise ExecutionFault("brkpt executed", lane=_lanes(ex)[0], kind="trap")
    elif op == "copysign":
        F = _floats()
        a = _np(it._read(warp, frame, ins.operands[1], info.type))
        b = _np(it._read(warp, frame, ins.operands[2], info.type))
        it._write_reg(frame, ins.operands[0], _from_np(F.fcopysign(a, b, width=_bits(info.type))), ex, info.type)
    elif op == "testp":
        F = _floats()
        a = _np(it._read(warp, frame, ins.operands[1], info.type))
        r = F.ftestp(info.mode, a, width=_bits(info.type))
        it._write_reg(frame, ins.operands[0], [int(x) for x in np.asarray(r).tolist()], ex, "pred")
    else:
        raise ExecutionFault(f"no semantics for {ins.opcode}")


_HANDLERS = {}
for _op in ("add", "sub", "mul", "mad", "mul24", "mad24", "div", "rem", "abs", "neg", "min", "max",
            "sad", "addc", "subc", "madc", "fma", "sqrt", "rcp"):
    _HANDLERS[_op] = h_arith
for _op in ("fma", "sqrt", "rcp"):
    _HANDLERS[_op] = h_float
for _op in ("and", "or", "xor", "not", "cnot", "shl", "shr", "shf", "popc", "clz", "brev", "bfind",
            "bfe", "bfi", "prmt", "lop3", "dp4a", "dp2a"):
    _HANDLERS[_op] = h_bits
for _op in ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt"):
    _HANDLERS[_op] = h_approx
_HANDLERS.update({"setp": h_setp, "set": h_setp, "selp": h_selp, "slct": h_selp, "mov": h_mov,
                  "cvt": h_cvt, "cvta": h_cvta, "ld": h_ld, "ldu": h_ld, "st": h_st, "atom": h_atom,
                  "red": h_atom, "shfl": h_shfl, "vote": h_vote, "match": h_match, "activemask": h_misc,
                  "membar": h_misc, "fence": h_misc, "nanosleep": h_misc, "trap": h_misc,
                  "brkpt": h_misc, "copysign": h_misc, "testp": h_misc})


def interpret(module: Module, spec: LaunchSpec, kernel: str | None = None,
              max_steps: int | None = None, trace: bool = False) -> LaunchResult:
    """Run one launch on the reference interpreter."""
    return Interpreter(module, spec, kernel=kernel, max_steps=max_steps, trace=trace).run()
