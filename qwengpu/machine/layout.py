"""The machine's memory map (`MemoryMap`, from a `MachineConfig`'s sizes) and a launch laid out on it
(`MachineLayout`).

Registers hold the same addresses the reference interpreter uses (global buffers from 0x1000,
shared/local/const as offsets in their own spaces), so per-step register values compare directly.
The memory unit maps (space, address, thread) to a *machine line* (16 bytes) by selecting address
bits -- no addition -- so a GDN key can be a linear function of the address bits. Each space is a
region of lines, every size a power of two; the regions are placed largest first, so each starts at
a multiple of its size and its line number is its first line's high bits over the selected bits.
The built-in machines' map (the default sizes):

    global   lines   0..127   address 0x1000..0x17FF   (2 KiB)
    shared   lines 128..191   address 0..0x3FF         (1 KiB, one block at a time)
    local    lines 192..223   thread t < 16, address 0..31 (32 bytes per thread)
    const    lines 224..255   address 0..0x1FF         (512 bytes)

The global window starts at GLOBAL_BASE whatever its size; its line is the address's bits 4.. modulo
the window (a window larger than 4 KiB is rotated: 0x1000 is not a multiple of it, so its top
4 KiB land on its first lines). A local line is the address's bits 4.. over the thread's lane and
warp bits.

A validity bitmap (one bit per machine byte) marks which bytes belong to an allocation, so an
out-of-bounds access faults exactly where the interpreter's does.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from qwengpu.launch import GLOBAL_BASE
from qwengpu.semantics.launch_model import LANES

LINE = 16
#: the prompt's write cursor holds a line number in 12 bits (`format.CTL_FIELDS` addr, addr_hi)
MAX_LINE_BITS = 12
SPACES = ("global", "shared", "local", "const")


@dataclass(frozen=True)
class Region:
    """A space's lines: the first machine line, how many, the address bits the window spans (for
    local: per thread), and the address the window starts at."""
    first: int
    lines: int
    bits: int
    base: int


def _log2(n: int, what: str, least: int) -> int:
    if n < least or n & (n - 1):
        raise ValueError(f"{what} must be a power of two of at least {least} (got {n})")
    return n.bit_length() - 1


class MemoryMap:
    """Where each space lies in the machine's line memory, from a geometry's sizes."""

    def __init__(self, global_bytes: int, shared_bytes: int, local_bytes: int, local_threads: int,
                 const_bytes: int, threads: int):
        sizes = {"global": _log2(global_bytes, "global_bytes", LINE),
                 "shared": _log2(shared_bytes, "shared_bytes", LINE),
                 "local": _log2(local_bytes, "local_bytes", LINE),
                 "const": _log2(const_bytes, "const_bytes", LINE)}
        self.local_bytes = local_bytes
        self.local_threads = local_threads
        self.local_thread_bits = _log2(local_threads, "local_threads", LANES) - 2
        if local_threads > threads:
            raise ValueError(f"local_threads ({local_threads}) exceeds the threads of a block ({threads})")
        lines = {s: (1 << b) // LINE for s, b in sizes.items()}
        lines["local"] *= local_threads
        self.regions: dict[str, Region] = {}
        first = 0
        for s in sorted(SPACES, key=lambda s: -lines[s]):      # largest first: each aligned to its size
            self.regions[s] = Region(first, lines[s], sizes[s], GLOBAL_BASE if s == "global" else 0)
            first += lines[s]
        self.line_bits = max(1, (first - 1).bit_length())
        if self.line_bits > MAX_LINE_BITS:
            raise ValueError(f"the memory map needs {first} lines of {LINE} bytes; the machine addresses at most "
                             f"{1 << MAX_LINE_BITS} (the prompt's cursor holds {MAX_LINE_BITS} bits)")
        self.regions = {s: self.regions[s] for s in SPACES}
        # the line memory's slots: a power of two, as a key made from an address's bits spans them all
        self.lines = 1 << self.line_bits

    @property
    def bytes(self) -> int:
        """The machine memory's bytes: its lines (the regions', rounded up to a power of two) x 16."""
        return self.lines * LINE

    def window(self, space: str) -> int:
        """The bytes a space's addresses reach (local: per thread)."""
        return 1 << self.regions[space].bits

    def machine_address(self, space: str, addr: int, thread: int) -> int | None:
        """The machine byte address, or None when the address lies outside the space's window."""
        r = self.regions[space]
        off = addr - r.base
        if off < 0 or off >> r.bits:
            return None
        sel = addr & ((1 << r.bits) - 1)        # the selected bits (global: modulo the window)
        if space == "local":
            if thread >= self.local_threads:
                return None
            return (r.first << 4) + (thread << r.bits) + sel
        return (r.first << 4) + sel

    def line_address(self, line: int) -> tuple[str, int, int] | None:
        """(space, address of the line's first byte, thread) of a machine line; None for a line of
        no space (past the regions, up to the power of two)."""
        for space, r in self.regions.items():
            if r.first <= line < r.first + r.lines:
                off = (line - r.first) * LINE
                if space == "local":
                    return space, off & ((1 << r.bits) - 1), off >> r.bits
                if space == "global":
                    lo = r.base & ((1 << r.bits) - 1)       # the window's first byte (rotated)
                    return space, r.base + ((off - lo) & ((1 << r.bits) - 1)), 0
                return space, off, 0
        return None

    def describe(self) -> str:
        return ", ".join(f"{s} {self.window(s)} B" + (f"/thread (threads 0-{self.local_threads - 1})" if s == "local"
                                                       else "") for s in SPACES)


@lru_cache(maxsize=None)
def _memory_map(global_bytes, shared_bytes, local_bytes, local_threads, const_bytes, threads) -> MemoryMap:
    return MemoryMap(global_bytes, shared_bytes, local_bytes, local_threads, const_bytes, threads)


def memory_map(cfg) -> MemoryMap:
    """The memory map of a `MachineConfig` (its sizes; refuses one the circuits cannot build)."""
    return _memory_map(cfg.global_bytes, cfg.shared_bytes, cfg.local_bytes, cfg.local_threads, cfg.const_bytes,
                       cfg.max_warps * LANES)


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
    memory: MemoryMap           # the machine's memory map (`memory_map(config)`)
    valid: bytearray = None

    def __post_init__(self):
        if self.valid is None:
            self.valid = bytearray(self.memory.bytes)

    def machine_address(self, space: str, addr: int, thread: int) -> int | None:
        """The machine byte address, or None when the address lies outside the space's window."""
        return self.memory.machine_address(space, addr, thread)

    def window_end(self, space: str) -> int:
        """The first address past a space's window (global: from GLOBAL_BASE)."""
        r = self.memory.regions[space]
        return r.base + (1 << r.bits)

    def is_valid(self, maddr: int, size: int) -> bool:
        return all(self.valid[maddr + k] for k in range(size)) if maddr + size <= self.end else False

    def put(self, memory: bytearray, space: str, addr: int, data: bytes, thread: int = 0):
        """Writes `data` at a space's address into a machine memory image (byte by byte: a rotated
        global window is not contiguous)."""
        for k, v in enumerate(data):
            memory[self.machine_address(space, addr + k, thread)] = v

    def get(self, memory, space: str, addr: int, n: int, thread: int = 0) -> bytes:
        """`n` bytes at a space's address from a machine memory image."""
        return bytes(memory[self.machine_address(space, addr + k, thread)] for k in range(n))

    @property
    def end(self) -> int:
        return self.memory.bytes
