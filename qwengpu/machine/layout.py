"""The machine's memory map for one launch.

Registers hold the same addresses the reference interpreter uses (global buffers from 0x1000,
shared/local/const as offsets in their own spaces), so per-step register values compare directly.
The memory unit maps (space, address, thread) to a *machine line* (16 bytes) by selecting address
bits -- no addition -- so a GDN key can be a linear function of the address bits:

    global   lines   0..127   address 0x1000..0x17FF   (2 KiB)
    shared   lines 128..191   address 0..0x3FF         (1 KiB, one block at a time)
    local    lines 192..223   thread t < 16, address 0..31 (32 bytes per thread)
    const    lines 224..255   address 0..0x1FF         (512 bytes)

A validity bitmap (one bit per machine byte) marks which bytes belong to an allocation, so an
out-of-bounds access faults exactly where the interpreter's does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.launch import GLOBAL_BASE

LINE = 16
LINES = 256
MEMORY_BYTES = LINE * LINES

#: space -> (first machine line, lines, address bits used, address offset)
REGIONS = {
    "global": (0, 128, 11, GLOBAL_BASE),
    "shared": (128, 64, 10, 0),
    "local": (192, 32, 5, 0),
    "const": (224, 32, 9, 0),
}
LOCAL_THREADS = 16
LOCAL_BYTES = 32


@dataclass
class MachineLayout:
    buffer_addresses: list
    global_vars: dict
    global_end: int
    const_vars: dict
    const_size: int
    shared_vars: dict
    shared_size: int
    local_vars: dict            # function -> {var: offset within the frame}
    local_size: dict            # function -> frame size
    local_stride: int
    threads: int
    valid: bytearray = field(default_factory=lambda: bytearray(MEMORY_BYTES))

    def machine_address(self, space: str, addr: int, thread: int) -> int | None:
        """The machine byte address, or None when the address lies outside the space's window."""
        first, lines, bits, base = REGIONS[space]
        off = addr - base
        if off < 0 or off >> bits:
            return None
        if space == "local":
            if thread >= LOCAL_THREADS:
                return None
            return (first + 2 * thread) * LINE + off
        return first * LINE + off

    def is_valid(self, maddr: int, size: int) -> bool:
        return all(self.valid[maddr + k] for k in range(size)) if maddr + size <= MEMORY_BYTES else False

    @property
    def end(self) -> int:
        return MEMORY_BYTES


