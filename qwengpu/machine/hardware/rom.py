"""The program ROM: one GDN memory per bundle segment, keyed by pc, read just before its unit needs it.

The prompt writes the ROM a byte per W token, a bundle segment at a time after its AT token. Each
segment has a one-slot staging word (`rom.<segment>.stage`, a value head per byte: cleared by every
AT, written by every W); its read is the segment word written so far, and the segment's own memory
is written whole with it (`GDNMemory.whole`), so it takes one value head per 64 bits. Both are
`late`: the pair sits just before the unit that reads the segment, so neither the word being
written nor the segment read holds residual features for long."""
from __future__ import annotations

from qwengpu.compiler import memory as M

from .builder import Builder


def rom(hw: Builder, segname: str):
    """The bundle segment `segname` of the current bundle (read from its own ROM copy)."""
    seg = hw.fmt.segment(segname)
    n = seg.nbytes
    slot = hw.p.vars["slot0"]
    stage = M.GDNMemory(hw.p, f"rom.{segname}.stage", slots=1, width=8 * n, field_bits=8)
    # W tokens carry their value in t_v, every other token 0: an AT clears the word
    stage.write(slot, hw.view(f"rom.{segname}.stage.in", [hw.t_v.f(i % 8) for i in range(8 * n)]),
                field_enable=[hw.k("AT") + hw.t_f.f(f) for f in range(n)])
    stage.late = True
    word = stage.read(slot, name=f"rom.{segname}.word")
    mem = M.GDNMemory(hw.p, f"rom.{segname}", slots=1 << hw.pcb, width=8 * n, whole=True)
    mem.write(hw.c_addr_rom, hw.view(f"rom.{segname}.in", [word.f(i) for i in range(8 * n)]),
              enable=hw.we_any[segname].f(0))
    out = mem.read(hw.c_pc, name=f"seg.{segname}")
    mem.late = True
    return out


def segment(hw: Builder, segname: str):
    """The current bundle's segment `segname`, read once (units that share a segment, the float
    unit and the first ALU slot, read the same word)."""
    if segname not in hw.segments:
        hw.segments[segname] = rom(hw, segname)
    return hw.segments[segname]
