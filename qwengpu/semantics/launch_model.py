"""A launch as every engine sees it: warps of `LANES` threads, the step limit, the generic address
windows, and where each state space's variables, the buffers and the kernel parameters lie.

Global memory is byte addressed and little-endian; it holds the launch's buffers (at the addresses
`LaunchSpec.buffer_addresses()` gives) followed by the module's `.global` variables (`global_layout`).
Shared memory is per block, laid out for the kernel launched (`kernel_shared_variables`), local
memory per thread (a stack of function frames), const memory per module. Generic addresses map
state spaces into one 64-bit space by windows (`GENERIC_WINDOWS`). The interpreter and the
assembler both lay a module out with `ModuleAnalysis` and check a launch with
`check_kernel_limits` before allocating anything.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qwengpu.launch import (BUFFER_ALIGN, CUDA_LIMITS, GLOBAL_BASE, MAX_GLOBAL_BYTES, LaunchError, LaunchSpec,
                            check_shared_bytes)
from qwengpu.ptx.cfg import immediate_postdominators
from qwengpu.ptx.ir import Addr, ArgList, Function, Label, Module, Neg, Pair, Sym, Variable, Vec

#: a warp's lanes: the reference semantics' warp width, which the machine's circuits are built for
LANES = 4
#: every lane of a warp
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


#: generic-address windows of the non-global state spaces (global addresses map to themselves)
SHARED_WINDOW = 0x1_0000_0000
LOCAL_WINDOW = 0x2_0000_0000
CONST_WINDOW = 0x3_0000_0000
WINDOW_SIZE = 0x1_0000_0000
GENERIC_WINDOWS = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "const": CONST_WINDOW}

#: bytes of local memory (the per-thread stack) each thread may use: the interpreter's limit, below
#: CUDA's (`CUDA_LIMITS.local_bytes_per_thread`); an access beyond it faults
LOCAL_BYTES = 1 << 16


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
    shared memory, the block's; and the variables the spec's `"symbols"` set (`check_symbols`)."""
    from qwengpu.semantics.symbols import check_symbols
    spec.check()
    check_module_limits(module)
    check_symbols(module, spec)
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


def kernel_param_bytes(kernel: Function, spec: LaunchSpec, buffer_addresses: list[int | None]) -> dict[str, bytes]:
    """{parameter name: its bytes} of a kernel's parameters for a launch: a buffer's address (8 bytes,
    little-endian; `global_layout`'s `buffer_addresses`) or a scalar argument's bytes."""
    out = {}
    for p, a, addr in zip(kernel.params, spec.args, buffer_addresses):
        out[p.name] = addr.to_bytes(8, "little") if a.is_buffer else np.array([a.value], dtype=a.value.dtype).tobytes()
    return out


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
