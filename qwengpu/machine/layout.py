"""The machine's memory map for one launch.

Registers hold the same addresses the reference interpreter uses (global buffers from 0x1000,
shared/local/const as offsets in their own spaces), so per-step register values compare directly.
The memory unit maps (space, address) to one flat *machine address* space:

    global   identity: [GLOBAL_BASE, global_end)
    const    const_base + address
    shared   shared_base + address           (one block at a time)
    local    local_base + thread * local_stride + address

and a validity bitmap marks which machine bytes belong to an allocation, so out-of-bounds accesses
fault exactly where the interpreter's do.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.interp.interpreter import _Program
from qwengpu.interp.memory import global_layout
from qwengpu.launch import LaunchSpec
from qwengpu.ptx.ir import Module

LINE = 16                      # bytes per memory line (one GDN key)


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


@dataclass
class MachineLayout:
    buffer_addresses: list
    global_vars: dict
    global_end: int
    const_vars: dict
    const_base: int
    const_size: int
    shared_vars: dict
    shared_base: int
    shared_size: int
    local_vars: dict            # function -> {var: offset within the frame}
    local_size: dict            # function -> frame size
    local_base: int
    local_stride: int
    threads: int
    end: int
    valid: list = field(default_factory=list)     # (machine start, machine end) ranges

    def machine_address(self, space: str, addr: int, thread: int) -> int:
        if space == "global":
            return addr
        if space == "const":
            return self.const_base + addr
        if space == "shared":
            return self.shared_base + addr
        if space == "local":
            return self.local_base + thread * self.local_stride + addr
        raise ValueError(space)

    def space_limit(self, space: str) -> int:
        return {"const": self.const_size, "shared": self.shared_size, "local": self.local_stride}.get(space, 1 << 64)

    def is_valid(self, maddr: int, size: int) -> bool:
        for lo, hi in self.valid:
            if lo <= maddr and maddr + size <= hi:
                return True
        return False


def machine_layout(module: Module, spec: LaunchSpec, kernel_name: str) -> MachineLayout:
    prog = _Program(module)
    glay = global_layout(spec, module)
    valid = []
    for i, (a, addr) in enumerate(zip(spec.args, glay.buffer_addresses)):
        if addr is not None and a.data.nbytes:
            valid.append((addr, addr + a.data.nbytes))
    for name, addr in glay.var_addresses.items():
        v = module.vars[name]
        if v.size:
            valid.append((addr, addr + v.size))
    end = _align(max(glay.end, 0x1000), LINE)
    const_base = end
    const_size = len(prog.const_init)
    if const_size:
        valid.append((const_base, const_base + const_size))
    end = _align(const_base + const_size, LINE)
    shared_base = end
    shared_size = _align(prog.static_shared, 16) + spec.shared_bytes
    if shared_size:
        valid.append((shared_base, shared_base + shared_size))
    end = _align(shared_base + shared_size, LINE)
    # local: every function's frame stacked (inlined calls use consecutive frames)
    stride = _align(sum(prog.local_size.values()), LINE)
    local_base = end
    threads = spec.threads_per_block
    if stride:
        for t in range(threads):
            valid.append((local_base + t * stride, local_base + (t + 1) * stride))
    end = _align(local_base + threads * stride, LINE)
    shared_vars = dict(prog.shared_offsets)
    for name in prog.dynamic_shared:
        shared_vars[name] = _align(prog.static_shared, 16)
    return MachineLayout(glay.buffer_addresses, dict(glay.var_addresses), glay.end, dict(prog.const_offsets),
                         const_base, const_size, shared_vars, shared_base, shared_size,
                         dict(prog.local_offsets), dict(prog.local_size), local_base, stride, threads, end,
                         valid)
