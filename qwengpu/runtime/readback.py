"""The machine read back from the model: its architectural state, decoded from the words of the GDN
memories that hold it.

    reader = MachineReader(machine.placements)
    reader.state(cache)            # a MachineState: pc, mask, warp, block, epoch, lanes, registers, memory
    reader.memory(cache)           # (the machine memory, its code margin)

The words come from the one decoder of GDN states (`qwengpu.compiler.placement.decode_words`,
through each memory's `MemoryPlacement`); the control word's fields from `machine.format`
(`ctl_fields`), the lane table's from `lane_entry`. The runtime (results, `check_states`), verify
and the lab all read the machine here, and check it against the simulator with
`qwengpu.runtime.statecheck`.
"""
from __future__ import annotations

from qwengpu.compiler.placement import decode_words, words_of
from qwengpu.machine.config import LANES
from qwengpu.machine.format import REG_BITS, WARP_BITS, ctl_fields, lane_entry
from qwengpu.machine.layout import LINE
from qwengpu.machine.simulator import MachineState

M32 = 0xFFFFFFFF
#: the memories that hold the machine's architectural state (`MachineState`)
STATE_MEMORIES = ("ctl", "lanes", "reg.emit", "mem")


def layer_states(cache):
    """A function of the layer giving its recurrent state [value heads, key dim, value dim] as numpy
    from a transformers cache or the compact engine's state (anything with `get_recurrent_state`);
    a dict {layer: state} or a function passes through."""
    if callable(cache) or isinstance(cache, dict):
        return cache
    return lambda L: cache.get_recurrent_state(L)[0].detach().float().cpu().numpy()


def lanes_of(word: int) -> list[int]:
    """A lane-wide word (a register, a pending address) as its LANES 32-bit values."""
    return [(word >> (32 * lane)) & M32 for lane in range(LANES)]


def registers_of(words: dict, warp_bits: int = WARP_BITS) -> dict:
    """{(warp, physical register): [value per lane]} from the words of a register file copy
    (slot = warp + 2**warp_bits x register)."""
    return {(slot & ((1 << warp_bits) - 1), slot >> warp_bits): lanes_of(w) for slot, w in words.items()}


def memory_of(words: dict, lines: int) -> bytes:
    """The machine memory (`lines` x LINE bytes) from the words of `mem` (a word: a line's data
    bytes, then its valid bits)."""
    mem = bytearray(lines * LINE)
    for line, w in words.items():
        mem[line * LINE:(line + 1) * LINE] = (w & ((1 << (8 * LINE)) - 1)).to_bytes(LINE, "little")
    return bytes(mem)


def lane_table_of(word: int, width: int, warp_bits: int = WARP_BITS) -> list[tuple[int, int]]:
    """(next pc, state bits) of every warp x lane of the `lanes` word."""
    return [lane_entry(word, i, width, warp_bits) for i in range(LANES << warp_bits)]


def warp_bits_of(placements: dict) -> int:
    """A built machine's warp bits, from its register file's slots (2**(warp bits + REG_BITS))."""
    return (placements["reg.emit"].slots - 1).bit_length() - REG_BITS


def state_of_words(words: dict, placements: dict) -> MachineState:
    """The `MachineState` from the words ({slot: word}) of `STATE_MEMORIES`."""
    ctl = ctl_fields(words["ctl"].get(0, 0))
    wb = warp_bits_of(placements)
    return MachineState(lanes=lane_table_of(words["lanes"].get(0, 0), placements["lanes"].width, wb),
                        regs=registers_of(words["reg.emit"], wb),
                        memory=memory_of(words["mem"], placements["mem"].slots), **ctl)


class MachineReader:
    """Reads a built machine's state from the model's recurrent states, through its placements.
    `state` arguments: a cache (transformers' or the compact engine's), {layer: state}, or a
    function of the layer."""

    def __init__(self, placements: dict):
        self.placements = placements

    def words(self, state, name: str, slots=None) -> tuple[dict, float]:
        """({slot: word} of the written slots of memory `name`, its code margin)."""
        pl = self.placements[name]
        if slots is not None:
            slots = list(slots)
        vals, written, margin = decode_words(layer_states(state), pl, slots)
        return words_of(vals, written, pl, slots), margin

    def memory(self, state) -> tuple[bytes, float]:
        """The machine memory (LINES x LINE bytes) and its code margin."""
        words, margin = self.words(state, "mem")
        return memory_of(words, self.placements["mem"].slots), margin

    def registers(self, state) -> dict:
        """{(warp, physical register): [value per lane]} of every written register."""
        return registers_of(self.words(state, "reg.emit")[0], warp_bits_of(self.placements))

    def pending_addresses(self, state) -> list[int]:
        """The addresses of the last memory op, per lane (where a fault's address is read)."""
        return lanes_of(self.words(state, "pa")[0].get(0, 0))

    def state(self, state) -> MachineState:
        """The whole architectural state (`STATE_MEMORIES`)."""
        get = layer_states(state)
        return state_of_words({n: self.words(get, n)[0] for n in STATE_MEMORIES}, self.placements)
