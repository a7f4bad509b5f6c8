"""The launch prompt: the tokens that load a program image and a launch into the machine's state.

    <at s0 0> <w 0 1f> <w 3 02> ...     ROM: one AT per bundle segment, one W per non-zero byte
    <at mem 3> <w 0 05> ... <w 16 ff>   memory lines: data bytes, then the validity bits
    <at ltab 0> <w 0 00> ...            per warp: thread ids of its lanes, present lanes
    <at btab 1> <w 0 01> ...            per block: ctaid
    <at conf 0> <w 0 ..> ...            last block, entry bundle, threads per block
    <go>                                the launch starts; every token after it is generated

Unwritten state reads as zero, so zero bytes are skipped. The launch spec's `"symbols"` reach memory
as their variables' initialisers (the simulator's `initial_memory` applies them), so a variable
costs tokens as a buffer does: its valid bits, and only its non-zero bytes.
"""
from __future__ import annotations

import numpy as np

from qwengpu.assembler.launch_layout import check_launch_shape
from qwengpu.assembler.lower import AssemblerError
from qwengpu.launch import LaunchSpec
from qwengpu.machine.config import LANES
from qwengpu.machine.format import REG_BITS, WordFormat
from qwengpu.machine.image import Image
from qwengpu.machine.layout import LINE
from qwengpu.machine.simulator import initial_memory
from qwengpu.machine.tokens import token_text


def check_fits(image: Image, spec: LaunchSpec):
    """A clear error when the launch exceeds what the compiled machine holds."""
    rom = image.config.rom_bundles
    if len(image.bundles) > rom:
        raise AssemblerError(f"the program needs {len(image.bundles)} bundles; the machine's ROM holds {rom}")
    if image.nregs > 1 << REG_BITS:
        raise AssemblerError(f"the program needs {image.nregs} registers per warp; the machine has {1 << REG_BITS}")
    check_launch_shape(spec, image.config)
    # thread ids are held in `tid_bits` and block ids in 8 (the limits above keep them there)


def prompt_tokens(image: Image, module, spec: LaunchSpec) -> list[str]:
    check_fits(image, spec)
    fmt = WordFormat(image.config)
    out: list[str] = []

    def put(space: str, addr: int, data: bytes):
        ws = [token_text(("W", f, v)) for f, v in enumerate(data) if v]
        if ws:
            out.append(token_text(("AT", space, addr)))
            out.extend(ws)

    for b in image.bundles:
        word = fmt.encode(b)
        for seg in fmt.segments:
            put(seg.name, b.index, word[seg.first_byte:seg.first_byte + seg.nbytes])
    memory = initial_memory(image, module, spec)
    lines = image.layout.memory.lines
    valid = image.layout.valid
    # each line's valid bits as a 16-bit word, all lines at once (a loop over every byte of every
    # line cost a few ms a launch)
    bits = (np.frombuffer(bytes(valid[:lines * LINE]), np.uint8).reshape(lines, LINE).astype(np.int64)
            << np.arange(LINE)).sum(1).tolist()
    for line in range(lines):
        put("mem", line, bytes(memory[line * LINE:(line + 1) * LINE]) + bits[line].to_bytes(2, "little"))
    bx, by, bz = spec.block
    n = spec.threads_per_block
    tb, lane_bytes = image.config.tid_bits, image.config.ltab_lane_bytes
    for w in range((n + LANES - 1) // LANES):
        row = bytearray()
        for l in range(LANES):          # tid.x, tid.y, tid.z: tid_bits each (5 to blocks of 32 threads)
            t = w * LANES + l
            x, y, z = (t % bx, (t // bx) % by, t // (bx * by)) if t < n else (0, 0, 0)
            row += (x | y << tb | z << 2 * tb).to_bytes(lane_bytes, "little")
        put("ltab", w, bytes(row))
    gx, gy, gz = spec.grid
    for blk in range(spec.blocks):
        put("btab", blk, bytes([blk % gx, (blk // gx) % gy, blk // (gx * gy)]))
    put("conf", 0, bytes([spec.blocks - 1, image.entry & 0xFF, n, image.entry >> 8]))
    out.append(token_text(("GO",)))
    return out
