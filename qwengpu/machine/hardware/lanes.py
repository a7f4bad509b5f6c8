"""Lanes: the first lane of the EXEC mask, and the terminator: the branch predicate, the next pc and
state of the served lanes, written into the lane table (`lanes`: a pc and a state per warp and lane)."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler import memory as M
from qwengpu.compiler.gadgets import n_gated, n_step

from ..config import LANES
from ..format import MEM_OPS, TERM_KINDS, sources_for
from .builder import Builder
from .operands import source_forms
from .regfile import register_copy


def first_lane(hw: Builder):
    """One-hot of the lowest lane of the EXEC mask (computed once)."""
    if not hasattr(hw, "first"):
        f = hw.bits("first", LANES)
        neurons = []
        for l in range(LANES):
            form = hw.c_mask.f(l)
            for m in range(l):
                form = form - hw.c_mask.f(m)
            neurons += n_step(form, 1, {f.feature(l): 1})
        hw.circ("first.lane", [f], neurons)
        hw.first = f
    return hw.first


def lane_states(hw: Builder):
    """The next pc and state of the lanes the pass served, and the lane table (every warp's
    lanes' pc, RUN / WAIT / epoch parity) that the control reads. GO and BLOCK reset it."""
    p = hw.p
    tail = hw.tail
    first = first_lane(hw)
    mi = hw.mem_info
    atom = mi["op"].f(MEM_OPS.index("ATOM")) if mi else Lin()
    term = hw.decode_field(tail, "tail", "term", len(TERM_KINDS), "term")
    tk = lambda name: term.f(TERM_KINDS.index(name))
    # the terminator's register port, and whether each lane's predicate is non-zero
    mem = register_copy(hw, "reg.term")
    addr = hw.view("reg.term.q", [hw.c_warp.f(i) for i in range(hw.warp_bits)]
                     + hw.field_forms(tail, "tail", "tp_reg"))
    r = mem.read(addr, name="reg.term.r", enable=hw.field_forms(tail, "tail", "tp_en")[0])
    mem.late = True
    tports = [[[r.f(32 * l + i) for i in range(32)] for l in range(LANES)]]
    nslots = len(hw.cfg.slots)
    opts = sources_for(hw.cfg, nslots, "pred")
    psel = hw.decode_field(tail, "tail", "pred", len(opts), "psel")
    nz = hw.bits("pred.nz", LANES)
    done = hw.bits("done", LANES)
    cw = hw.cw
    W = hw.warps
    en = hw.bits("lanes.en", W * LANES)
    n1 = []
    for l in range(LANES):
        for oi, opt in enumerate(opts):
            forms = source_forms(hw, nslots, opt, l, tports)
            if forms is None:
                continue
            s = sum(forms, Lin())
            n1 += n_step(64 * psel.f(oi) + s, 65, {nz.feature(l): 1})
        # served lanes: all of the mask, but an atomic serves only the first
        n1 += n_step(2 * hw.c_mask.f(l) + (1 - atom) + first.f(l), 3, {done.feature(l): 1})
        for w in range(W):
            n1 += n_step(2 * (hw.k("EXEC") + cw.f(w) + hw.c_mask.f(l)) + (1 - atom) + first.f(l), 7,
                         {en.feature(LANES * w + l): 1})
    hw.circ("term.pred", [nz, done, en], n1)
    hw.done = done
    # next pc / state per lane (EXEC), and the fresh state of every lane (GO / BLOCK)
    start = hw.k("GO") + hw.k("BLOCK")
    t1 = hw.field_forms(tail, "tail", "t1")
    t2 = hw.field_forms(tail, "tail", "t2")
    npc = [hw.bits(f"lanes.pc.{l}", hw.pcb) for l in range(LANES)]
    nst = [hw.bits(f"lanes.st.{w}.{l}", 3) for w in range(W) for l in range(LANES)]
    n2 = []
    for l in range(LANES):
        for i in range(hw.pcb):
            o = {npc[l].feature(i): 1}
            n2 += n_gated(hw.k("EXEC") + tk("jump") + tk("barrier") - 1, t1[i], o)
            n2 += n_gated(hw.k("EXEC") + tk("branch") + nz.f(l) - 2, t1[i], o)
            n2 += n_gated(hw.k("EXEC") + tk("branch") - nz.f(l) - 1, t2[i], o)
            n2 += n_gated(hw.k("EXEC") + tk("exit") - 1, hw.c_pc.f(i), o)
            n2 += n_gated(start, hw.entry.f(i), o)
    nth = sum(((1 << i) * hw.nthreads.f(i) for i in range(hw.nthreads.size)), Lin())
    big = max(64, 2 * hw.cfg.max_threads)      # switches the fresh state off when no GO/BLOCK: > the threads
    for w in range(W):
        for l in range(LANES):
            st = nst[LANES * w + l]
            n2 += n_step(hw.k("EXEC") + tk("jump") + tk("branch"), 2, {st.feature(0): 1})
            n2 += n_step(hw.k("EXEC") + tk("barrier"), 2, {st.feature(1): 1})
            n2 += n_step(hw.k("EXEC") + tk("barrier") + hw.c_epoch.f(0), 3, {st.feature(2): 1})
            n2 += n_step(big * start + nth, big + LANES * w + l + 1, {st.feature(0): 1})
    hw.circ("lanes.next", npc + nst, n2)
    # one lane-table entry per warp and lane: its next pc and state, a write granule of its own
    F = hw.pcb + 3
    table = M.GDNMemory(p, "lanes", slots=1, width=F * W * LANES, field_bits=F)
    slot = p.vars["slot0"]
    fe = [en.f(i) + start for i in range(W * LANES)]
    table.write(slot, hw.view("lanes.in", [f for i in range(W * LANES)
                                           for f in [npc[i % LANES].f(b) for b in range(hw.pcb)]
                                           + [nst[i].f(b) for b in range(3)]]), field_enable=fe)
    out = table.read(slot, name="lanes.out")
    hw.lpc = hw.view("lanes.pc", [out.f(F * i + b) for i in range(W * LANES) for b in range(hw.pcb)])
    hw.lst = hw.view("lanes.st", [out.f(F * i + hw.pcb + b) for i in range(W * LANES) for b in range(3)])
