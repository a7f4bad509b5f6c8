"""A warp's state in the interpreter: its lanes (thread ids, exited lanes), its call frames, each with
a SIMT stack of (pc, lane mask, reconvergence pc) entries, its registers and parameters, and each
lane's local memory."""
from __future__ import annotations

from dataclasses import dataclass

from qwengpu.ptx.ir import Function
from qwengpu.semantics.launch_model import LANES, LOCAL_BYTES

from .memory import FlatMemory


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
