"""`LaunchView`: one launch, replayed into a snapshot per position, for the lab's views.

A launch of N machine steps has N + 1 *positions*: position t is the machine after t steps (one
step = one warp-instruction = one generated token on the model engine). At position t

- the *next* instruction is step t (its warp is the warp in focus, its pc is the current pc, its
  source operands are resolved against the registers as they are now);
- the *last* step is t - 1: the registers and memory bytes it wrote are the "changed" cells.

The view is built once from the reference interpreter's trace (`qwengpu.interp` records, per step,
the full per-lane values of every register written and every memory write); after that
`snapshot(t)` is a lookup: register files are kept per step (copy-on-write), memory is kept as
checkpoints every `CHECKPOINT` positions plus the few writes after one.

    view = trace_launch(ptx, spec)                  # engine="interp"
    s = view.snapshot(13)
    s.regs[0].name, s.regs[0].values, s.regs[0].changed
    s.next.text, [o.text for o in s.next.operands]
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import qwengpu
from qwengpu.interp.interpreter import Interpreter
from qwengpu.launch import LaunchResult, LaunchSpec
from qwengpu.ptx.ir import Addr, ArgList, Function, Imm, Label, Module, Neg, Pair, Reg, Special, Sym, Vec
from qwengpu.semantics.faults import ExecutionFault
from qwengpu.semantics.symbols import apply_symbols
from qwengpu.semantics.launch_model import (CONST_WINDOW, LANES, LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE, global_layout,
                                            layout_variables)

from .source import SourceLines
from .values import fmt_all, pretty_symbol, pretty_text, reg_sort_key, shared_element_type, type_width

CHECKPOINT = 64
#: the largest memory window a snapshot carries per region (bytes)
MAX_WINDOW = 4096


class EngineUnavailable(RuntimeError):
    """The requested engine cannot run here (the model engines need torch and transformers)."""


# ---------------------------------------------------------------------------------------------
# snapshot records


@dataclass
class RegRow:
    """One register of the focus warp's current frame, all lanes."""
    name: str
    type: str                      # declared type (b32, f32, pred, ...)
    values: list[int]              # raw bits per lane (an unwritten register reads 0)
    written: bool                  # written at least once in this frame
    changed: int = 0               # lanes written by the last step (highlight)
    pointers: list = field(default_factory=list)   # per lane: region name the value points into, or None

    def formatted(self, how: str = "hex") -> list[str]:
        return [fmt_all(v, self.type)[how] for v in self.values]


@dataclass
class Operand:
    """One operand of the next instruction, resolved per lane."""
    text: str
    role: str                      # dst | src | addr | guard | target | param | call
    type: str | None = None
    values: list | None = None     # raw bits per lane (None for lanes that do not execute)
    addresses: list | None = None  # per lane: (region name, offset, address) or None
    note: str = ""                 # e.g. "pc 25" for a branch target, a param's meaning


@dataclass
class Instruction:
    """The next instruction (step `index`), with its operands resolved."""
    index: int
    pc: int
    line: int
    text: str
    function: str
    active: int
    executed: int
    operands: list[Operand]
    faults: bool = False           # this step raised the launch's fault


@dataclass
class MemoryRegion:
    """A memory the lab shows: a global buffer or variable, a block's shared memory, or a thread's
    local memory. `base` is its address in its own space (global addresses are absolute)."""
    key: str
    name: str
    space: str                     # global | shared | local
    base: int
    size: int
    dtype: str = "uint8"           # element type for the decoded row view
    owner: tuple = ()              # (block,) for shared, (block, warp, lane) for local
    variables: list = field(default_factory=list)   # (name, offset, size) inside the region


@dataclass
class MemoryView:
    region: MemoryRegion
    offset: int                    # window start (bytes from region.base)
    data: bytes                    # the window's bytes
    changed: list[int]             # offsets (from region.base) the last step wrote
    pointers: dict                 # offset -> ["%rd8 l0", ...]: registers pointing here
    access: dict                   # offset -> ["ld l2", ...]: what the next instruction touches


class ShownState:
    """What a position of either view shows alike (a `Snapshot` of the interpreter, a
    `MachineSnapshot` of the model): its registers (`regs`, rows with `name` and `changed`) and its
    memory (`memory`, `MemoryView`s)."""
    regs: list
    memory: list

    @property
    def changed_regs(self) -> dict:
        """{register: lane mask} written by the last step or pass."""
        return {r.name: r.changed for r in self.regs if r.changed}

    def region(self, name: str) -> MemoryView:
        """The region shown under `name` (its name, its key, or a space: "shared", "local")."""
        for m in self.memory:
            if m.region.name == name or m.region.key == name:
                return m
        for m in self.memory:
            if m.region.space == name:
                return m
        raise KeyError(f"no memory region {name}")


@dataclass
class Snapshot(ShownState):
    """The machine at one position, as the lab shows it."""
    position: int
    positions: int
    block: int
    warp: int
    function: str
    depth: int
    call_stack: list[str]
    lane_state: list[str]          # per lane: active | guarded | waiting | exited | absent
    tids: list[tuple]              # per lane: threadIdx (x, y, z)
    regs: list[RegRow]
    stack: list[tuple]             # SIMT stack (pc, mask, rpc), bottom first, top = the next pc
    next: Instruction | None       # None when the launch has finished
    last: dict | None              # the step just taken: index, block, warp, pc, text
    memory: list[MemoryView]
    fault: str | None = None       # the launch's fault, once at (or right before) it
    finished: bool = False

    @property
    def pc(self) -> int | None:
        return self.next.pc if self.next else None

    @property
    def active(self) -> int:
        return self.next.active if self.next else 0

    def reg(self, name: str) -> RegRow:
        for r in self.regs:
            if r.name == name:
                return r
        raise KeyError(f"no register {name} in {self.function}")


# ---------------------------------------------------------------------------------------------
# replay


@dataclass
class _FrameState:
    fid: int
    function: str
    regs: dict
    written: frozenset = frozenset()


class _ReplayMixin:
    """The interpreter's trace replayed: the registers each function mentions, the memory regions,
    the memory per position (checkpoints and the writes since), the threads of a warp."""

    def _regs_of(self, fn: Function) -> list[str]:
        """The registers a function's body mentions, in natural order."""
        got = self._fn_regs.get(fn.name)
        if got is None:
            used = set()

            def walk(o):
                if isinstance(o, Reg):
                    used.add(o.name)
                elif isinstance(o, (Vec, ArgList)):
                    for i in o.items:
                        if i is not None:
                            walk(i)
                elif isinstance(o, Pair):
                    walk(o.first)
                    walk(o.second)
                elif isinstance(o, Neg):
                    walk(o.reg)
                elif isinstance(o, Addr) and isinstance(o.base, Reg):
                    used.add(o.base.name)

            for ins in fn.body:
                for o in ins.operands:
                    walk(o)
                if ins.guard is not None:
                    used.add(ins.guard.reg.name)
            got = sorted((r for r in used if r in fn.regs), key=reg_sort_key)
            self._fn_regs[fn.name] = got
        return got

    def _addr_regs_of(self, fn: Function) -> dict:
        """{register: state space} for registers used as the base of a memory operand."""
        got = self._addr_regs.get(fn.name)
        if got is None:
            got = {}
            for ins in fn.body:
                info = ins.info
                space = getattr(info, "space", None)
                if ins.op not in ("ld", "ldu", "st", "atom", "red"):
                    continue
                for o in ins.operands:
                    if isinstance(o, Addr) and isinstance(o.base, Reg):
                        got.setdefault(o.base.name, space or "generic")
            self._addr_regs[fn.name] = got
        return got

    def _present(self, warp: int) -> int:
        n = self.spec.threads_per_block - warp * LANES
        return (1 << max(0, min(LANES, n))) - 1

    def _tids(self, warp: int) -> list[tuple]:
        nx, ny, nz = self.spec.block
        out = []
        for lane in range(LANES):
            k = warp * LANES + lane
            if k >= nx * ny * nz:
                out.append(None)
            else:
                out.append((k % nx, (k // nx) % ny, k // (nx * ny)))
        return out

    def _ctaid(self, block: int) -> tuple:
        gx, gy, _ = self.spec.grid
        return (block % gx, (block // gx) % gy, block // (gx * gy))

    def _build_regions(self):
        lay = global_layout(self.spec, self.module)
        self._layout = lay
        regs: dict[str, MemoryRegion] = {}
        params = self.kernel_fn.params
        for i, (a, addr) in enumerate(zip(self.spec.args, lay.buffer_addresses)):
            if addr is None:
                continue
            name = self.arg_names[i] if self.arg_names and i < len(self.arg_names) else f"arg{i}"
            regs[f"global:{name}"] = MemoryRegion(f"global:{name}", name, "global", addr, a.data.nbytes,
                                                  a.dtype, variables=[(pretty_symbol(params[i].name), 0,
                                                                       a.data.nbytes)])
        for vname, addr in lay.var_addresses.items():
            v = self.module.vars[vname]
            regs[f"global:{vname}"] = MemoryRegion(f"global:{vname}", pretty_symbol(vname), "global", addr,
                                                   v.size or 0, _dtype_of(v.type))
        # shared memory: static variables, then dynamic (extern) shared, 16-byte aligned
        shared_vars = [v for v in self.module.vars.values() if v.space == "shared" and not v.extern]
        for fn in self.module.functions.values():
            shared_vars += [v for v in fn.vars.values() if v.space == "shared" and not v.extern]
        offs = layout_variables(shared_vars)
        end = max([offs[v.name] + (v.size or 0) for v in shared_vars], default=0)
        dyn_base = (end + 15) // 16 * 16
        self._shared_offsets = offs
        self._shared_size = dyn_base + self.spec.shared_bytes
        svars = [(pretty_symbol(v.name), offs[v.name], v.size or 0) for v in shared_vars]
        externs = [v for v in list(self.module.vars.values()) +
                   [v for fn in self.module.functions.values() for v in fn.vars.values()]
                   if v.space == "shared" and v.extern]
        for v in externs:
            svars.append((pretty_symbol(v.name), dyn_base, self.spec.shared_bytes))
        self._shared_vars = svars
        # the kernel's own element type (nvcc declares shared arrays as bytes): int32[4], not uint8[16]
        self._shared_dtype = shared_element_type(self.module, shared_vars, self._shared_size)
        blocks = sorted({s.block for s in self.steps})
        if self._shared_size:
            for b in blocks:
                regs[f"shared:{b}"] = MemoryRegion(f"shared:{b}", f"shared (block {b})" if len(blocks) > 1
                                                   else "shared", "shared", 0, self._shared_size,
                                                   self._shared_dtype, (b,), svars)
        local_end: dict = {}
        for s in self.steps:
            for sp, off, size, lane, _ in s.mem_writes:
                if sp == "local":
                    k = (s.block, s.warp, lane)
                    local_end[k] = max(local_end.get(k, 0), off + size)
        for (b, w, lane), e in sorted(local_end.items()):
            key = f"local:{b}.{w}.{lane}"
            regs[key] = MemoryRegion(key, f"local (block {b}, warp {w}, lane {lane})", "local", 0,
                                     (e + 15) // 16 * 16, "uint8", (b, w, lane))
        self._regions = regs
        self._global_keys = [k for k, r in regs.items() if r.space == "global"]

    def _initial_memory(self) -> dict:
        mem = {}
        for i, (a, addr) in enumerate(zip(self.spec.args, self._layout.buffer_addresses)):
            if addr is not None:
                name = self.arg_names[i] if self.arg_names and i < len(self.arg_names) else f"arg{i}"
                mem[f"global:{name}"] = bytearray(a.data.tobytes())
        for vname in self._layout.var_addresses:
            v = self.module.vars[vname]
            mem[f"global:{vname}"] = bytearray(v.init or bytes(v.size or 0))
        for k, r in self._regions.items():
            if r.space in ("shared", "local"):
                mem[k] = bytearray(r.size)
        return mem

    def _apply_writes(self, mem: dict, s):
        for sp, off, size, lane, value in s.mem_writes:
            key, o = self._locate_write(sp, off, s.block, s.warp, lane)
            if key is None:
                continue
            mem[key][o:o + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")

    def _locate_write(self, space, off, block, warp, lane):
        if space == "global":
            for k in self._global_keys:
                r = self._regions[k]
                if r.base <= off < r.base + max(r.size, 1):
                    return k, off - r.base
            return None, 0
        if space == "shared":
            k = f"shared:{block}"
            return (k, off) if k in self._regions else (None, 0)
        if space == "local":
            k = f"local:{block}.{warp}.{lane}"
            return (k, off) if k in self._regions else (None, 0)
        return None, 0

    def _replay(self):
        n = len(self.steps)
        warps: dict = {}
        fid = 0
        before, after, callstack = [], [], []
        mem = self._initial_memory()
        self._checkpoints = [{k: bytes(v) for k, v in mem.items()}]
        bar_red_waiting: dict = {}
        self._pcs = np.zeros(n, dtype=np.int32)
        progress = self._progress
        for i, s in enumerate(self.steps):
            key = (s.block, s.warp)
            frames = warps.get(key)
            if frames is None:
                fid += 1
                frames = warps[key] = [_FrameState(fid, self.kernel_fn.name, {})]
            while len(frames) > s.depth + 1:
                frames.pop()
            while len(frames) < s.depth + 1:
                fid += 1
                frames.append(_FrameState(fid, s.function, {}))
            if frames[-1].function != s.function:
                fid += 1
                frames[-1] = _FrameState(fid, s.function, {})
            top = frames[-1]
            before.append(top)
            callstack.append(tuple(f.function for f in frames))
            self._pcs[i] = s.pc
            writes = dict(s.reg_writes)
            op = s.text.strip().split(None, 1)[0] if s.text.strip() else ""
            is_bar_red = op.startswith(("bar.red", "barrier.red"))
            if is_bar_red and writes:
                # a barrier release writes the reduction into every waiting warp of the block (the
                # trace records it once, under the releasing step)
                dest = next(iter(writes))
                m = s.reg_write_mask
                lane0 = next((lane for lane in range(LANES) if m >> lane & 1), None)
                result = writes[dest][lane0] if lane0 is not None else 0
                for (b, w), ex in list(bar_red_waiting.items()):
                    if b != s.block or (b, w) == key:
                        continue
                    ofs = warps[(b, w)][-1]
                    regs = dict(ofs.regs)
                    old = regs.get(dest, [0] * LANES)
                    regs[dest] = [result if ex >> lane & 1 else old[lane] for lane in range(LANES)]
                    warps[(b, w)][-1] = _FrameState(ofs.fid, ofs.function, regs, ofs.written | {dest})
                    del bar_red_waiting[(b, w)]
                ex = s.executed
                old = top.regs.get(dest, [0] * LANES)
                writes[dest] = [result if ex >> lane & 1 else old[lane] for lane in range(LANES)]
                bar_red_waiting.pop(key, None)
            elif is_bar_red:
                bar_red_waiting[key] = s.executed
            if writes:
                regs = dict(top.regs)
                regs.update({k: list(v) for k, v in writes.items()})
                top = _FrameState(top.fid, top.function, regs, top.written | frozenset(writes))
                frames[-1] = top
            after.append(top)
            self._apply_writes(mem, s)
            if (i + 1) % CHECKPOINT == 0:
                self._checkpoints.append({k: bytes(v) for k, v in mem.items()})
            if progress is not None and (i % 1024 == 0 or i == n - 1):
                progress(i + 1, n)
        self._before, self._after, self._callstack = before, after, callstack

    def _memory(self, position: int) -> dict:
        c = position // CHECKPOINT
        mem = {k: bytearray(v) for k, v in self._checkpoints[c].items()}
        for s in self.steps[c * CHECKPOINT:position]:
            self._apply_writes(mem, s)
        return mem


class _ResolveMixin:
    """An instruction's operands resolved per lane against a position's state: registers, specials,
    symbols, memory operands (region, offset, address), pointers, and the memory views."""

    def _special(self, name: str, block: int, warp: int) -> list[int]:
        base, _, comp = name.partition(".")
        idx = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        tids = [t or (0, 0, 0) for t in self._tids(warp)]
        if name == "WARP_SZ":
            return [LANES] * LANES
        if base == "%tid":
            return [t[idx] for t in tids]
        if base == "%ntid":
            return [self.spec.block[idx]] * LANES
        if base == "%ctaid":
            return [self._ctaid(block)[idx]] * LANES
        if base == "%nctaid":
            return [self.spec.grid[idx]] * LANES
        if base == "%laneid":
            return list(range(LANES))
        if base == "%warpid":
            return [warp] * LANES
        if base == "%nwarpid":
            return [(self.spec.threads_per_block + LANES - 1) // LANES] * LANES
        return None

    def _symbol(self, name: str):
        """(value, note) for a symbol operand, where the lab knows it."""
        for i, p in enumerate(self.kernel_fn.params):
            if p.name == name:
                a = self.spec.args[i]
                if a.is_buffer:
                    return self._layout.buffer_addresses[i], f"&{self._arg_name(i)}"
                if a.dtype == "struct":             # a struct by value: its address is not a value
                    return None, f"{self._arg_name(i)} = struct 0x{a.value.tobytes().hex()}"
                raw = int(np.array([a.value], dtype=a.value.dtype).view(f"u{a.value.dtype.itemsize}")[0])
                return raw, f"{self._arg_name(i)} = {a.value}"
        if name in self._layout.var_addresses:
            return self._layout.var_addresses[name], f"&{pretty_symbol(name)} (global)"
        if name in self._shared_offsets:
            return self._shared_offsets[name], f"&{pretty_symbol(name)} (shared)"
        return None, ""

    def _arg_name(self, i: int) -> str:
        return self.arg_names[i] if self.arg_names and i < len(self.arg_names) else f"arg{i}"

    def _read(self, o, frame: _FrameState, block: int, warp: int):
        if isinstance(o, Reg):
            return frame.regs.get(o.name, [0] * LANES)
        if isinstance(o, Imm):
            return [o.bits if o.bits is not None else (o.value if isinstance(o.value, int) else 0)] * LANES
        if isinstance(o, Special):
            return self._special(o.name, block, warp)
        if isinstance(o, Neg):
            return [1 - (v & 1) for v in frame.regs.get(o.reg.name, [0] * LANES)]
        return None

    def _locate(self, space: str | None, addr: int, block: int, warp: int, lane: int):
        """(region key, offset) of an address in `space` (None or "generic": generic addressing)."""
        if space in (None, "generic"):
            if SHARED_WINDOW <= addr < SHARED_WINDOW + WINDOW_SIZE:
                space, addr = "shared", addr - SHARED_WINDOW
            elif LOCAL_WINDOW <= addr < LOCAL_WINDOW + WINDOW_SIZE:
                space, addr = "local", addr - LOCAL_WINDOW
            elif CONST_WINDOW <= addr < CONST_WINDOW + WINDOW_SIZE:
                return None, 0
            else:
                space = "global"
        if space == "global":
            for k in self._global_keys:
                r = self._regions[k]
                if r.base <= addr < r.base + r.size:
                    return k, addr - r.base
            return None, 0
        if space == "shared":
            k = f"shared:{block}"
            if k in self._regions and 0 <= addr < self._regions[k].size:
                return k, addr
            return None, 0
        if space == "local":
            k = f"local:{block}.{warp}.{lane}"
            if k in self._regions and 0 <= addr < self._regions[k].size:
                return k, addr
        return None, 0

    def _pointee(self, value: int, rtype: str, space: str | None, block: int, warp: int, lane: int):
        """The region a register value points into: registers used as an address base (in their
        instruction's space), and 64-bit registers holding a global address."""
        if space is None and type_width(rtype) != 64:
            return None
        key, off = self._locate(space if space else "global", value, block, warp, lane)
        if key is None:
            return None
        return self._regions[key].name

    def _instruction(self, i: int, frame: _FrameState) -> Instruction:
        s = self.steps[i]
        fn = self.function(s.function)
        ins = fn.body[s.pc]
        info = ins.info
        ops: list[Operand] = []
        ex = s.executed

        def lane_vals(vals):
            if vals is None:
                return None
            return [int(v) if ex >> lane & 1 else None for lane, v in enumerate(vals)]

        if ins.guard is not None:
            g = frame.regs.get(ins.guard.reg.name, [0] * LANES)
            ops.append(Operand(str(ins.guard), "guard", "pred",
                               [(g[lane] & 1) if s.active >> lane & 1 else None for lane in range(LANES)]))
        op = ins.op
        typ = getattr(info, "type", None)
        src_type = getattr(info, "src_type", None) or typ
        space = getattr(info, "space", None)
        operands = list(ins.operands)
        if op in ("bra", "brx"):
            for o in operands:
                if isinstance(o, Label) and o.name in fn.labels:
                    ops.append(Operand(str(o), "target", note=f"pc {fn.labels[o.name]}"))
                elif isinstance(o, Reg):
                    ops.append(Operand(str(o), "src", fn.regs.get(o.name, "b32"), lane_vals(frame.regs.get(o.name, [0] * LANES))))
            return Instruction(i, s.pc, s.line, pretty_text(s.text), s.function, s.active,
                               s.executed, ops, self._faults(i))
        if op == "call":
            ops.append(Operand(" ".join(str(o) for o in operands), "call"))
            return Instruction(i, s.pc, s.line, pretty_text(s.text), s.function, s.active,
                               s.executed, ops, self._faults(i))
        if op in ("st", "red"):
            dsts, srcs = [], operands
        elif op in ("bar", "barrier", "ret", "exit", "membar", "fence"):
            dsts, srcs = [], operands
        else:
            dsts, srcs = operands[:1], operands[1:]
        for d in dsts:
            items = d.items if isinstance(d, Vec) else ((d.first, d.second) if isinstance(d, Pair) else (d,))
            for it in items:
                if it is not None:
                    ops.append(Operand(str(it), "dst", fn.regs.get(getattr(it, "name", ""), typ)))
        for k, o in enumerate(srcs):
            if isinstance(o, Addr):
                ops.append(self._addr_operand(o, space, op, frame, s, ex, fn))
                continue
            items = o.items if isinstance(o, Vec) else (o,)
            for it in items:
                if it is None:
                    continue
                t = src_type
                if op in ("selp", "slct") and k == 2:
                    t = "pred"
                if isinstance(it, Reg):
                    t = fn.regs.get(it.name, t or "b32")
                    ops.append(Operand(str(it), "src", t, lane_vals(self._read(it, frame, s.block, s.warp))))
                elif isinstance(it, (Imm, Special, Neg)):
                    vals = self._read(it, frame, s.block, s.warp)
                    role = "src"
                    ops.append(Operand(str(it), role, t or "b32", lane_vals(vals)))
                elif isinstance(it, Sym):
                    v, note = self._symbol(it.name)
                    ops.append(Operand(pretty_symbol(it.name), "param", "b64",
                                       lane_vals([v] * LANES) if v is not None else None, note=note))
                else:
                    ops.append(Operand(str(it), "src", t))
        return Instruction(i, s.pc, s.line, pretty_text(s.text), s.function, s.active,
                           s.executed, ops, self._faults(i))

    def _faults(self, i: int) -> bool:
        return self.fault is not None and i == self.n_steps - 1

    def _addr_operand(self, o: Addr, space, op, frame, s, ex, fn) -> Operand:
        if space == "param" and isinstance(o.base, Sym):
            v, note = self._symbol(o.base.name)
            text = f"[{pretty_symbol(o.base.name)}{'+' + str(o.offset) if o.offset else ''}]"
            return Operand(text, "param", "b64", [v if ex >> lane & 1 else None for lane in range(LANES)]
                           if v is not None else None, note=note or "parameter")
        if o.base is None:
            base = [0] * LANES
        elif isinstance(o.base, Reg):
            base = frame.regs.get(o.base.name, [0] * LANES)
        else:
            v, _ = self._symbol(o.base.name)
            base = [v or 0] * LANES
        addrs = []
        for lane in range(LANES):
            if not ex >> lane & 1:
                addrs.append(None)
                continue
            a = (base[lane] + o.offset) & 0xFFFFFFFFFFFFFFFF
            key, off = self._locate(space, a, s.block, s.warp, lane)
            addrs.append((self._regions[key].name if key else None, off, a))
        return Operand(str(o), "addr", "b64", [a[2] if a else None for a in addrs], addrs,
                       note=space or "generic")

    def _memory_views(self, t: int, mem: dict, fs, regs: list[RegRow], nxt: Instruction | None):
        last = self.steps[t - 1] if t > 0 else None
        changed: dict = {}
        if last is not None:
            for sp, off, size, lane, _ in last.mem_writes:
                key, o = self._locate_write(sp, off, last.block, last.warp, lane)
                if key is not None:
                    changed.setdefault(key, set()).update(range(o, o + size))
        pointers: dict = {}
        fn = self.function(fs.function)
        spaces = self._addr_regs_of(fn)
        active_or_waiting = 0
        for _, m, _ in (fs.stack if nxt is not None else ()):
            active_or_waiting |= m
        for r in regs:
            sp = spaces.get(r.name)
            if sp is None and type_width(r.type) != 64:
                continue
            for lane, v in enumerate(r.values):
                if not active_or_waiting >> lane & 1 or not r.written:
                    continue
                key, o = self._locate(sp or "global", v, fs.block, fs.warp, lane)
                if key is not None:
                    pointers.setdefault(key, {}).setdefault(o, []).append(f"{r.name} l{lane}")
        access: dict = {}
        if nxt is not None:
            size = 4
            ins = self.function(nxt.function).body[nxt.pc]
            typ = getattr(ins.info, "type", None)
            if typ:
                size = max(1, type_width(typ) // 8) * max(1, getattr(ins.info, "vec", 1))
            verb = {"ld": "load", "ldu": "load", "st": "store", "atom": "atomic", "red": "atomic"}.get(ins.op, ins.op)
            for o in nxt.operands:
                if o.role != "addr" or not o.addresses:
                    continue
                for lane, a in enumerate(o.addresses):
                    if a is None or a[0] is None:
                        continue
                    key = next(k for k, r in self._regions.items() if r.name == a[0])
                    for b in range(a[1], a[1] + size):
                        access.setdefault(key, {}).setdefault(b, []).append(f"{verb} l{lane}")
        views = []
        for key, r in self._regions.items():
            if r.space == "shared" and r.owner[0] != fs.block:
                continue
            if r.space == "local" and r.owner[:2] != (fs.block, fs.warp):
                continue
            data = mem[key]
            start = 0
            if len(data) > MAX_WINDOW:
                focus = sorted(changed.get(key, ())) or sorted(access.get(key, {})) or [0]
                start = max(0, min(focus[0] // 16 * 16 - 256, len(data) - MAX_WINDOW))
            win = bytes(data[start:start + MAX_WINDOW])
            views.append(MemoryView(r, start, win, sorted(changed.get(key, ())), pointers.get(key, {}),
                                    access.get(key, {})))
        return views


class LaunchView(_ReplayMixin, _ResolveMixin, SourceLines):
    """Per-position machine state of one launch (see the module docstring)."""

    def __init__(self, module: Module, spec: LaunchSpec, trace, *, kernel: str | None = None,
                 result: LaunchResult | None = None, fault: Exception | None = None,
                 engine: str = "interp", names: list | None = None, progress=None):
        self.module = module
        self.spec = spec
        self.kernel_fn: Function = module.kernel(kernel if kernel is not None else spec.kernel)
        self.steps = list(trace.steps)
        self.result = result
        self.fault = fault
        self.engine = engine
        self.model = None                  # model records live in MachineView (engine "compact"/"model")
        self.arg_names = list(names) if names else None
        self._progress = progress
        self._fn_regs = {}
        self._addr_regs = {}
        self._build_regions()
        self._replay()

    # -- public ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        """The number of positions (steps + 1)."""
        return len(self.steps) + 1

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def kernel(self) -> str:
        return self.kernel_fn.name

    def function(self, name: str) -> Function:
        return self.module.functions[name]

    def find_pc(self, pc: int, start: int = 0, *, forward: bool = True, function: str | None = None,
                block: int | None = None, warp: int | None = None) -> int | None:
        """The nearest position after (before) `start` whose next instruction is at `pc`."""
        fn = function or self.kernel
        rng = range(start + 1, self.n_steps) if forward else range(min(start, self.n_steps) - 1, -1, -1)
        for t in rng:
            s = self.steps[t]
            if s.pc == pc and s.function == fn and (block is None or s.block == block) \
                    and (warp is None or s.warp == warp):
                return t
        return None

    def next_break(self, start: int, breakpoints, function: str | None = None) -> int:
        """Where play stops: the first position after `start` whose next pc is a breakpoint, else
        the end."""
        bps = set(breakpoints)
        fn = function or self.kernel
        for t in range(start + 1, self.n_steps):
            s = self.steps[t]
            if s.pc in bps and s.function == fn:
                return t
        return self.n_steps

    def ptx_lines_at(self, position: int) -> list[int]:
        """The PTX line of the instruction next at `position` (none at the end)."""
        return [self.steps[position].line] if position < len(self.steps) else []

    def line_hit(self, position: int, lines: list, before: list) -> list:
        """A CUDA line is hit where it starts: the next instruction is on it and the one before
        was not (a line of several instructions stops once per entry)."""
        return [n for n in lines if n not in before]

    def disassembly(self, function: str | None = None) -> list[dict]:
        """The function's body: one row per pc with its labels, text and source line."""
        fn = self.function(function or self.kernel)
        labels = {}
        for name, pc in fn.labels.items():
            labels.setdefault(pc, []).append(name)
        return [{"pc": pc, "labels": labels.get(pc, []), "text": pretty_text(ins.text),
                 "line": ins.line} for pc, ins in enumerate(fn.body)]

    def regions(self) -> list[MemoryRegion]:
        return list(self._regions.values())

    def memory_at(self, position: int) -> dict:
        """{region key: bytes} of every region after `position` steps."""
        return {k: bytes(v) for k, v in self._memory(position).items()}

    def registers_at(self, position: int, block: int, warp: int) -> dict:
        """The current-frame registers of warp (block, warp) after `position` steps:
        {name: [raw per lane]} (written registers only)."""
        last = None
        for t in range(min(position, self.n_steps) - 1, -1, -1):
            s = self.steps[t]
            if s.block == block and s.warp == warp:
                last = t
                break
        if last is None:
            return {}
        return {k: list(v) for k, v in self._after[last].regs.items()}

    def snapshot(self, position: int) -> Snapshot:
        """The machine after `position` steps (0 <= position <= n_steps)."""
        n = self.n_steps
        if not 0 <= position <= n:
            raise IndexError(f"position {position} out of range 0..{n}")
        if n == 0:
            raise ValueError("the launch ran no step")
        t = position
        finished = t == n
        focus_i = t if not finished else n - 1
        fs = self.steps[focus_i]
        frame = self._before[focus_i] if not finished else self._after[n - 1]
        last = self.steps[t - 1] if t > 0 else None
        # registers of the focus frame; highlight what the last step wrote into this frame
        changed_by_last = {}
        if last is not None and self._after[t - 1].fid == frame.fid:
            changed_by_last = {name: last.reg_write_mask or last.executed for name in last.reg_writes}
        fn = self.function(fs.function)
        regs = []
        pointer_targets = self._addr_regs_of(fn)
        for name in self._regs_of(fn):
            vals = frame.regs.get(name, [0] * LANES)
            rt = fn.regs.get(name, "b32")
            ptrs = [self._pointee(v, rt, pointer_targets.get(name), fs.block, fs.warp, lane)
                    for lane, v in enumerate(vals)]
            regs.append(RegRow(name, rt, list(vals), name in frame.written, changed_by_last.get(name, 0), ptrs))
        # lanes
        present = self._present(fs.warp)
        stack = list(fs.stack) if not finished else []
        alive = 0
        for _, m, _ in stack:
            alive |= m
        lane_state = []
        for lane in range(LANES):
            bit = 1 << lane
            if not present & bit:
                lane_state.append("absent")
            elif finished:
                lane_state.append("exited")
            elif fs.active & bit:
                lane_state.append("active" if fs.executed & bit else "guarded")
            elif alive & bit:
                lane_state.append("waiting")
            else:
                lane_state.append("exited")
        nxt = None if finished else self._instruction(focus_i, frame)
        mem = self._memory(t)
        memory = self._memory_views(t, mem, fs, regs, nxt)
        fault = None
        if self.fault is not None and t >= n - 1:
            fault = str(self.fault)
            where = self.cuda_where(self.fault)
            if where:
                fault += f"\n    at {where}"
        lastd = None
        if last is not None:
            lastd = {"index": last.index, "block": last.block, "warp": last.warp, "pc": last.pc,
                     "function": last.function, "text": pretty_text(last.text),
                     "executed": last.executed, "line": last.line,
                     "mem_writes": len(last.mem_writes)}
        snap = Snapshot(position=t, positions=len(self), block=fs.block, warp=fs.warp, function=fs.function,
                        depth=fs.depth, call_stack=list(self._callstack[focus_i]), lane_state=lane_state,
                        tids=self._tids(fs.warp), regs=regs, stack=stack, next=nxt, last=lastd,
                        memory=memory, fault=fault, finished=finished)
        return snap


def _dtype_of(ptx_type: str) -> str:
    return {"b8": "uint8", "u8": "uint8", "s8": "int8", "b16": "uint16", "u16": "uint16", "s16": "int16",
            "b32": "uint32", "u32": "uint32", "s32": "int32", "f32": "float32", "b64": "uint64",
            "u64": "uint64", "s64": "int64", "f64": "float64"}.get(ptx_type, "uint8")


# ---------------------------------------------------------------------------------------------
# building a view


def interp_view(program, launch, *, kernel: str | None = None, max_steps: int | None = None,
                names: list | None = None, progress=None) -> LaunchView:
    """Run one launch on the reference interpreter with a per-step trace and build its `LaunchView`
    (one position per warp-instruction). A launch that faults still gives a view: its last step is
    the faulting one and `view.fault` holds the `ExecutionFault`."""
    spec = launch if isinstance(launch, LaunchSpec) else LaunchSpec.from_json(launch)
    module = apply_symbols(qwengpu.load_program(program), spec)     # the view's first memory holds them too
    it = Interpreter(module, spec, kernel=kernel, max_steps=max_steps or 200_000, trace=True)
    fault = None
    result = None
    try:
        result = it.run()
    except ExecutionFault as e:
        fault = e
    if not it.trace.steps:
        if fault is not None:
            raise fault
    return LaunchView(module, spec, it.trace, kernel=kernel, result=result, fault=fault, engine="interp",
                      names=names, progress=progress if callable(progress) else None)
