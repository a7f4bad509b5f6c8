"""Control: runnable and waiting lanes, the current warp's min-pc mask, the next warp, release, next
block, HALT."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler import gadgets as G
from qwengpu.compiler.gadgets import n_gated, n_linear, n_step

from ..config import LANES
from ..format import BLOCK_BITS, EPOCH_BITS
from .builder import Builder


def early(hw: Builder):
    """Values the control and the emitter need that depend only on the control state."""
    hw.cw = G.decode(hw.p, hw.c_warp, hw.warps, name="cw")
    nb = hw.bits("next.block", BLOCK_BITS)
    ne = hw.bits("next.epoch", EPOCH_BITS)
    blast = hw.bits("more.blocks", 1)
    n = []
    for v, c, bits in ((nb, hw.c_block, BLOCK_BITS), (ne, hw.c_epoch, EPOCH_BITS)):
        for i in range(bits):           # x + 1: bit i flips when every lower bit is 1
            low = sum((c.f(m) for m in range(i)), Lin())
            n += n_linear(c.f(i), {v.feature(i): 1})
            n += n_step(low + c.f(i), i + 1, {v.feature(i): -1})
            n += n_step(low - c.f(i), i, {v.feature(i): 1})
    diff = sum(((1 << i) * (hw.lastblock.f(i) - hw.c_block.f(i)) for i in range(BLOCK_BITS)), Lin())
    n += n_step(diff, 1, {blast.feature(0): 1})
    hw.circ("control.early", [nb, ne, blast], n)
    hw.next_block, hw.next_epoch, hw.more_blocks = nb, ne, blast


def control(hw: Builder):
    lpc, lst, cw = hw.lpc, hw.lst, hw.cw
    W = hw.warps
    par = hw.c_epoch.f(0)
    run = hw.bits("c.run", W * LANES)
    wait = hw.bits("c.wait", W * LANES)
    pcc = [hw.bits(f"c.pc.{l}", hw.pcb) for l in range(LANES)]
    n1 = []
    for i in range(W * LANES):
        R, Wt, P = lst.f(3 * i), lst.f(3 * i + 1), lst.f(3 * i + 2)
        n1 += n_linear(R, {run.feature(i): 1})
        n1 += n_step(Wt + P - par, 2, {run.feature(i): 1})       # waited at an earlier epoch
        n1 += n_step(Wt + par - P, 2, {run.feature(i): 1})
        n1 += n_step(Wt + P + par, 3, {wait.feature(i): 1})
        n1 += n_step(Wt - P - par, 1, {wait.feature(i): 1})
    for w in range(W):
        for l in range(LANES):
            for b in range(hw.pcb):
                n1 += n_gated(cw.f(w), lpc.f(hw.pcb * (LANES * w + l) + b), {pcc[l].feature(b): 1})
    hw.circ("control.1", [run, wait] + pcc, n1)
    runc = hw.bits("c.runc", LANES)
    anyrun = hw.bits("c.anyrun", W)
    anywait = hw.bits("c.anywait", 1)
    n2 = []
    for l in range(LANES):
        for w in range(W):
            n2 += n_gated(cw.f(w), run.f(LANES * w + l), {runc.feature(l): 1})
    for w in range(W):
        n2 += n_step(sum((run.f(LANES * w + l) for l in range(LANES)), Lin()), 1, {anyrun.feature(w): 1})
    n2 += n_step(sum((wait.f(i) for i in range(W * LANES)), Lin()), 1, {anywait.feature(0): 1})
    hw.circ("control.2", [runc, anyrun, anywait], n2)
    le = hw.bits("c.le", LANES * LANES)
    nw = hw.bits("c.nextwarp", W)
    cur = hw.bits("c.cur", 1)
    n3 = []
    val = lambda l: sum(((1 << b) * pcc[l].f(b) for b in range(hw.pcb)), Lin())
    for l in range(LANES):
        for m in range(LANES):
            if m != l:
                n3 += n_step(val(m) - val(l) + (1 << hw.pcb) * (1 - runc.f(m)), 0, {le.feature(LANES * l + m): 1})
    for c in range(W):
        for w2 in range(W):
            if w2 == c:
                continue
            between = [(c + d) % W for d in range(1, (w2 - c) % W)]
            form = 8 * cw.f(c) + 8 * anyrun.f(w2) - sum((anyrun.f(x) for x in between), Lin())
            n3 += n_step(form, 16, {nw.feature(w2): 1})
    n3 += n_step(sum((runc.f(l) for l in range(LANES)), Lin()), 1, {cur.feature(0): 1})
    hw.circ("control.3", [le, nw, cur], n3)
    ismin = hw.bits("c.exec.mask", LANES)
    ck = hw.bits("c.kind", 5)                      # EXEC, WARP, RELEASE, BLOCK, HALT
    n4 = []
    for l in range(LANES):
        s = sum((le.f(LANES * l + m) for m in range(LANES) if m != l), Lin())
        n4 += n_step(8 * runc.f(l) + s, 8 + LANES - 1, {ismin.feature(l): 1})
    ar = sum((anyrun.f(w) for w in range(W)), Lin())
    n4 += n_linear(cur.f(0), {ck.feature(0): 1})
    n4 += n_step(ar - W * cur.f(0), 1, {ck.feature(1): 1})      # no warp switch while the current one runs
    n4 += n_step(anywait.f(0) - 8 * ar, 1, {ck.feature(2): 1})
    n4 += n_step(hw.more_blocks.f(0) - anywait.f(0) - ar, 1, {ck.feature(3): 1})
    n4 += n_step(1 - hw.more_blocks.f(0) - anywait.f(0) - ar, 1, {ck.feature(4): 1})
    hw.circ("control.4", [ismin, ck], n4)
    fmin = hw.bits("c.exec.first", LANES)
    n5 = []
    for l in range(LANES):
        n5 += n_step(ismin.f(l) - sum((ismin.f(m) for m in range(l)), Lin()), 1, {fmin.feature(l): 1})
    hw.circ("control.5", [fmin], n5)
    hw.ctl = dict(pcc=pcc, ismin=ismin, kind=ck, first=fmin, nextwarp=nw)
