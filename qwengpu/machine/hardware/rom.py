"""The program ROM: one GDN memory per bundle segment, keyed by pc, read just before its unit needs it."""
from __future__ import annotations

from qwengpu.compiler import memory as M

from .builder import Builder


def rom(hw: Builder, segname: str):
    """The bundle segment `segname` of the current bundle (read from its own ROM copy)."""
    seg = hw.fmt.segment(segname)
    n = seg.nbytes
    mem = M.GDNMemory(hw.p, f"rom.{segname}", slots=1 << hw.pcb, width=8 * n, field_bits=8)
    mem.write(hw.c_addr_rom, hw.view(f"rom.{segname}.in", [hw.t_v.f(i % 8) for i in range(8 * n)]),
              field_enable=[hw.we[segname].f(f) for f in range(n)])
    out = mem.read(hw.c_pc, name=f"seg.{segname}")
    mem.late = True
    return out
