"""The reference interpreter's memories: global memory as regions of buffers and variables, flat
memories for shared, const and local memory. Where things lie is `qwengpu.semantics.launch_model`;
every access is bounds- and alignment-checked, and a violation raises `MemoryFault`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qwengpu.launch import LaunchSpec
from qwengpu.ptx.ir import Module
from qwengpu.semantics.faults import MemoryFault
from qwengpu.semantics.launch_model import GlobalLayout, global_layout


@dataclass
class Region:
    name: str
    base: int
    data: bytearray

    @property
    def end(self) -> int:
        return self.base + len(self.data)


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
