"""The carry buffer (`cbuf`): the values a bundle's carries write, captured at EXEC, and the current
values to compare against."""
from __future__ import annotations

from qwengpu.compiler import memory as M
from qwengpu.compiler.gadgets import n_step

from ..config import LANES, MEM, XLANE
from .builder import Builder
from .regfile import register_copy


def carry_buffer(hw: Builder):
    """The values the pass's carries write back (EXEC), kept for the CARRY passes after it,
    and the registers they go to as they are now (a register file copy with a port per carry)."""
    p = hw.p
    tail = hw.tail
    opts = []
    for u in hw.units:
        opts.append((u.k, 0))
        if u.kind in (MEM, XLANE):
            opts.append((u.k, 1))
    cvs = [hw.bits(f"cbuf.in.{j}", 32 * LANES) for j in range(hw.J)]
    neurons = []
    slot_sels = []
    for j in range(hw.J):
        slot_sel = hw.decode_field(tail, "tail", f"c{j}_slot", len(hw.cfg.slots), f"cslot.{j}")
        slot_sels.append(slot_sel)
        hi = hw.field_forms(tail, "tail", f"c{j}_hi")[0]
        for (k, part) in opts:
            u = hw.units[k]
            cond = slot_sel.f(k) + (hi if part else 1 - hi) - 1
            for l in range(LANES):
                var = u.hi[l] if part else u.lo[l]
                if var is None:
                    continue
                for i in range(var.size):
                    neurons += hw.clean_gate(cond, var.f(i), {cvs[j].feature(32 * l + i): 1})
    hw.circ_groups("cbuf.mux", [[v] for v in cvs], neurons)
    cv = hw.view("cbuf.in", [v.f(i) for v in cvs for i in range(32 * LANES)])
    slot = p.vars["slot0"]
    hw.cslot = slot_sels
    fk = hw.fpu_slot
    if fk is None:
        mem = M.GDNMemory(p, "cbuf", slots=1, width=32 * LANES * hw.J, whole=True)
        mem.write(slot, cv, enable=hw.k("EXEC"))
    else:
        # an entry per carry and lane: EXEC writes them all; an FPU pass only its lane's entry of
        # the carry that takes the float unit's result (the datapath ran that lane)
        mem = M.GDNMemory(p, "cbuf", slots=1, width=32 * LANES * hw.J, field_bits=32)
        fw = hw.bits("cbuf.fpu", LANES * hw.J)
        n = [nr for j in range(hw.J) for l in range(LANES)
             for nr in n_step(hw.k("FPU") + hw.fpu_lane.f(l) + slot_sels[j].f(fk), 3, {fw.feature(LANES * j + l): 1})]
        hw.circ("cbuf.fpu", [fw], n)
        mem.write(slot, cv, field_enable=[hw.k("EXEC") + fw.f(g) for g in range(LANES * hw.J)])
    hw.cbuf = mem.read(slot, name="cbuf.out")
    # the carried registers' current values
    rf = register_copy(hw, "reg.emit")
    hw.cold = []
    for j in range(hw.J):
        addr = hw.view(f"reg.emit.q{j}", [hw.c_warp.f(i) for i in range(hw.warp_bits)]
                         + hw.field_forms(tail, "tail", f"c{j}_reg"))
        hw.cold.append(rf.read(addr, name=f"reg.emit.r{j}"))
    rf.late = True
