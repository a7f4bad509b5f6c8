"""Memories of the reference machine and the shared memory layout of a launch.

Global memory is byte addressed and little-endian; it holds the launch's buffers (at the addresses
`LaunchSpec.buffer_addresses()` gives) followed by the module's `.global` variables. Shared memory
is per block, local memory per thread (a stack of function frames), const memory per module.
Generic addresses map state spaces into one 64-bit space by windows (`GENERIC_WINDOWS`).
Every access is bounds- and alignment-checked; a violation raises `MemoryFault`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qwengpu.launch import (BUFFER_ALIGN, CUDA_LIMITS, GLOBAL_BASE, MAX_GLOBAL_BYTES, LaunchError, LaunchSpec,
                            check_shared_bytes)
from qwengpu.ptx.ir import Addr, ArgList, Function, Label, Module, Neg, Pair, Sym, Variable, Vec

#: generic-address windows of the non-global state spaces (global addresses map to themselves)
SHARED_WINDOW = 0x1_0000_0000
LOCAL_WINDOW = 0x2_0000_0000
CONST_WINDOW = 0x3_0000_0000
WINDOW_SIZE = 0x1_0000_0000
GENERIC_WINDOWS = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "const": CONST_WINDOW}

#: bytes of local memory (the per-thread stack) each thread may use: the interpreter's limit, below
#: CUDA's (`CUDA_LIMITS.local_bytes_per_thread`); an access beyond it faults
LOCAL_BYTES = 1 << 16


#: what a launch's fault is (`ExecutionFault.kind`), the same on every engine: a memory access
#: out of bounds (`read`, `write`, `atomic`), a `misaligned` access, a `barrier` executed by only
#: some live lanes of a warp, a call `stack` overflow, a `brx.idx` index past its table (`branch`),
#: a `trap`/`brkpt`
FAULT_KINDS = ("read", "write", "misaligned", "atomic", "barrier", "stack", "branch", "trap")


class ExecutionFault(RuntimeError):
    """A fault inside a launch. The message names kernel, pc, lane and address where relevant;
    `kind` (one of `FAULT_KINDS`, None for errors that are not faults of the program, such as a
    step limit) says what it is."""

    def __init__(self, message: str, *, kernel: str | None = None, pc: int | None = None,
                 line: int | None = None, text: str | None = None, lane: int | None = None,
                 address: int | None = None, block: int | None = None, warp: int | None = None,
                 kind: str | None = None):
        self.kernel, self.pc, self.line, self.lane, self.address = kernel, pc, line, lane, address
        self.block, self.warp, self.text = block, warp, text
        self.kind = kind
        self.reason = message
        super().__init__(message)

    def locate(self, **where) -> "ExecutionFault":
        for k, v in where.items():
            if getattr(self, k, None) is None:
                setattr(self, k, v)
        parts = [f"kernel {self.kernel}" if self.kernel else None,
                 f"block {self.block}" if self.block is not None else None,
                 f"warp {self.warp}" if self.warp is not None else None,
                 f"lane {self.lane}" if self.lane is not None else None,
                 f"pc {self.pc}" if self.pc is not None else None,
                 f"line {self.line}" if self.line is not None else None]
        where_s = ", ".join(p for p in parts if p)
        msg = f"{self.reason} ({where_s})"
        if self.text:
            msg += f"\n    {self.text.strip()}"
        self.args = (msg,)
        return self


class MemoryFault(ExecutionFault):
    pass


@dataclass
class Region:
    name: str
    base: int
    data: bytearray

    @property
    def end(self) -> int:
        return self.base + len(self.data)


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def layout_variables(variables: list[Variable], start: int = 0, space: str | None = None) -> dict[str, int]:
    """Offsets of variables packed in declaration order, each at its alignment."""
    out, addr = {}, start
    for v in variables:
        if space is not None and v.space != space:
            continue
        addr = _align(addr, v.align)
        out[v.name] = addr
        addr += v.size or 0
    return out


def _names(o):
    """The symbol and label names an operand mentions (its parts included)."""
    if isinstance(o, (Sym, Label)):
        yield o.name
    elif isinstance(o, Addr):
        yield from _names(o.base)
    elif isinstance(o, (Vec, ArgList)):
        for x in o.items:
            yield from _names(x)
    elif isinstance(o, Pair):
        yield from _names(o.first)
        yield from _names(o.second)
    elif isinstance(o, Neg):
        yield from _names(o.reg)


def kernel_shared_variables(module: Module, kernel: Function) -> list[Variable]:
    """The shared variables a launch of `kernel` lays out: its own, those of the functions it
    reaches (by calls or by taking their address), and the module-level ones those functions or
    the module's initialisers name, in declaration order. Another kernel's shared variables take no
    room (CUDA lays shared memory out per kernel too)."""
    used: set = {sym for v in module.vars.values() for _, sym in v.relocs}
    seen, todo = set(), [kernel.name]
    while todo:
        fn = module.functions.get(todo.pop())
        if fn is None or fn.name in seen:
            continue
        seen.add(fn.name)
        used.update(fn.vars)
        for ins in fn.body:
            for o in ins.operands:
                for name in _names(o):
                    used.add(name)
                    if name in module.functions and name not in seen:
                        todo.append(name)
    out = [v for v in module.vars.values() if v.space == "shared" and v.name in used]
    for name in module.functions:
        if name in seen:
            out += [v for v in module.functions[name].vars.values() if v.space == "shared"]
    return out


def shared_end(variables: list[Variable], offsets: dict[str, int]) -> int:
    return max([offsets[v.name] + (v.size or 0) for v in variables if not v.extern], default=0)


def check_module_limits(module: Module):
    """CUDA's limits on a module's declarations that would otherwise allocate without bound:
    `.const` bytes together (ptxas refuses beyond `CUDA_LIMITS.const_bytes`) and `.global`
    variables' bytes (qwenGPU's `MAX_GLOBAL_BYTES`). Each message names the declaration's line."""
    const = [v for v in module.vars.values() if v.space == "const"]
    offs = layout_variables(const)
    for v in const:
        if offs[v.name] + (v.size or 0) > CUDA_LIMITS.const_bytes:
            raise LaunchError(f"line {v.line}: .const {v.name} ends at byte {offs[v.name] + (v.size or 0)}; CUDA's "
                              f"constant memory holds {CUDA_LIMITS.const_bytes} bytes")
    total = 0
    for v in module.vars.values():
        if v.space == "global":
            total += v.size or 0
            if total > MAX_GLOBAL_BYTES:
                raise LaunchError(f"line {v.line}: .global {v.name} brings the module's global variables to "
                                  f"{total} bytes; qwenGPU's global memory holds at most {MAX_GLOBAL_BYTES}")


def check_kernel_limits(module: Module, spec: LaunchSpec, kernel: Function):
    """Every CUDA limit a launch of `kernel` must meet, checked the same way by every engine (the
    interpreter and the assembler call it before allocating anything): the launch's shape, the
    module's declarations, the kernel's static shared memory and, with the launch's dynamic
    shared memory, the block's."""
    spec.check()
    check_module_limits(module)
    static = [v for v in kernel_shared_variables(module, kernel) if not v.extern]
    check_shared_bytes(shared_end(static, layout_variables(static)), spec.shared_bytes, kernel.name)


@dataclass
class GlobalLayout:
    buffer_addresses: list[int | None]
    var_addresses: dict[str, int]
    end: int


def global_layout(spec: LaunchSpec, module: Module) -> GlobalLayout:
    """Where the buffers and the module's `.global` variables live (the same for every engine)."""
    check_module_limits(module)
    bufs = spec.buffer_addresses()
    end = max([a + max(spec.args[i].data.nbytes, 1) for i, a in enumerate(bufs) if a is not None],
              default=GLOBAL_BASE)
    end = _align(max(end, GLOBAL_BASE), BUFFER_ALIGN)
    gvars = [v for v in module.vars.values() if v.space == "global"]
    addrs = layout_variables(gvars, end)
    if gvars:
        last = gvars[-1]
        end = _align(addrs[last.name] + (last.size or 0), BUFFER_ALIGN)
    if end - GLOBAL_BASE > MAX_GLOBAL_BYTES:
        raise LaunchError(f"the launch's buffers and the module's .global variables need {end - GLOBAL_BASE} "
                          f"bytes; qwenGPU's global memory holds at most {MAX_GLOBAL_BYTES}")
    return GlobalLayout(bufs, addrs, end)


class GlobalMemory:
    def __init__(self):
        self.regions: list[Region] = []

    def add(self, name: str, base: int, data: bytes):
        self.regions.append(Region(name, base, bytearray(data)))

    def region(self, addr: int, size: int) -> Region | None:
        for r in self.regions:
            if r.base <= addr and addr + size <= r.end:
                return r
        return None

    def read(self, addr: int, size: int) -> int:
        r = self.region(addr, size)
        if r is None:
            raise MemoryFault(f"out-of-bounds global read of {size} bytes at 0x{addr:x}", address=addr,
                              kind="read")
        off = addr - r.base
        return int.from_bytes(r.data[off:off + size], "little")

    def write(self, addr: int, size: int, value: int):
        r = self.region(addr, size)
        if r is None:
            raise MemoryFault(f"out-of-bounds global write of {size} bytes at 0x{addr:x}", address=addr,
                              kind="write")
        off = addr - r.base
        r.data[off:off + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


class FlatMemory:
    """A zero-based byte array (shared memory of a block, local memory of a thread, const)."""

    def __init__(self, space: str, size: int, limit: int | None = None, init: bytes | None = None):
        self.space = space
        self.data = bytearray(size)
        self.limit = limit if limit is not None else size
        if init:
            self.data[:len(init)] = init

    def _check(self, addr: int, size: int, kind: str):
        if addr < 0 or addr + size > self.limit:
            raise MemoryFault(f"out-of-bounds {self.space} {kind} of {size} bytes at 0x{addr:x} "
                              f"({self.space} size {self.limit})", address=addr, kind=kind)
        if addr + size > len(self.data):
            self.data.extend(bytes(addr + size - len(self.data)))

    def read(self, addr: int, size: int) -> int:
        self._check(addr, size, "read")
        return int.from_bytes(self.data[addr:addr + size], "little")

    def write(self, addr: int, size: int, value: int):
        self._check(addr, size, "write")
        self.data[addr:addr + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def check_alignment(addr: int, size: int, space: str):
    if addr % size:
        raise MemoryFault(f"misaligned {space} access of {size} bytes at 0x{addr:x}", address=addr,
                          kind="misaligned")


def buffers_to_global(spec: LaunchSpec, module: Module) -> tuple[GlobalMemory, GlobalLayout]:
    """Global memory initialised with the launch's buffers and the module's .global variables."""
    lay = global_layout(spec, module)
    mem = GlobalMemory()
    for i, (a, addr) in enumerate(zip(spec.args, lay.buffer_addresses)):
        if addr is not None:
            mem.add(f"arg{i}", addr, a.data.tobytes())
    for name, addr in lay.var_addresses.items():
        v = module.vars[name]
        mem.add(name, addr, v.init or bytes(v.size or 0))
    return mem, lay


def read_back(mem: GlobalMemory, spec: LaunchSpec, lay: GlobalLayout) -> list[np.ndarray | None]:
    """Final contents of the buffer arguments (None for scalars)."""
    out: list[np.ndarray | None] = []
    for a, addr in zip(spec.args, lay.buffer_addresses):
        if addr is None:
            out.append(None)
            continue
        r = mem.region(addr, max(a.data.nbytes, 1)) if a.data.nbytes else None
        raw = bytes(r.data[addr - r.base: addr - r.base + a.data.nbytes]) if r else b""
        out.append(np.frombuffer(raw, dtype=a.data.dtype).copy())
    return out
