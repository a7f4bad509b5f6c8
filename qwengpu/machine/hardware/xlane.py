"""The cross-lane unit: shfl (up/down/bfly/idx, clamp and segment masks) as a per-lane source-lane
one-hot, vote (any/all/uni/ballot), activemask."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler.gadgets import n_gated, n_step

from ..config import LANES, XLANE
from ..format import SHFL_MODES, VOTE_MODES, XLANE_OPS, sources_for
from ..image import PORTS
from .builder import Builder, Unit, bits_of, match
from .operands import mux
from .regfile import regfile
from .rom import rom


def xlane(hw: Builder, k: int):
    """shfl.sync (up/down/bfly/idx with clamp and segment), vote.sync, activemask."""
    cfg = hw.cfg
    segname = f"s{k}"
    seg = rom(hw, segname)
    ports = regfile(hw, k, seg, PORTS[XLANE])
    names = ["a", "bsrc", "csrc"]
    opts = {n: sources_for(cfg, k, n) for n in names}
    sel = {n: hw.decode_field(seg, segname, n, len(opts[n]), f"sel.{k}.{n}") for n in names}
    xop = hw.decode_field(seg, segname, "op", len(XLANE_OPS), f"xop.{k}")
    mode = hw.decode_field(seg, segname, "mode", 4, f"xmode.{k}")
    widths = {"a": 32, "bsrc": 5, "csrc": 13}
    vals = {n: [hw.bits(f"x{n}.{k}.{l}", widths[n]) for l in range(LANES)] for n in names}
    neurons = []
    for n in names:
        neurons += mux(hw, k, n, sel[n], opts[n], ports, vals[n], nbits=widths[n])
    hw.circ_groups(f"mux.{k}", [[vals[n][l] for n in names] for l in range(LANES)], neurons)
    a, bv, cv = vals["a"], vals["bsrc"], vals["csrc"]
    mask = [hw.c_mask.f(l) for l in range(LANES)]
    # X1: the highest lane a lane may read (max_lane) and the idx source lane, bit by bit;
    # the vote bits of the active lanes
    mlb = [hw.bits(f"xmax.{k}.{l}", 5) for l in range(LANES)]
    jb = [hw.bits(f"xidx.{k}.{l}", 5) for l in range(LANES)]
    vb = hw.bits(f"xvote.{k}", LANES)
    n1 = []
    for l in range(LANES):
        lb = bits_of(l, 5)
        for i in range(5):
            seg_i = cv[l].f(8 + i)
            for src_, out in ((cv[l].f(i), mlb[l]), (bv[l].f(i), jb[l])):
                if lb[i]:
                    n1 += n_step(seg_i + src_, 1, {out.feature(i): 1})
                else:
                    n1 += n_step(src_ - seg_i, 1, {out.feature(i): 1})
        n1 += n_step(a[l].f(0) + mask[l], 2, {vb.feature(l): 1})
    hw.circ(f"xl1.{k}", mlb + jb + [vb], n1)
    # X2: which lane each lane reads (at most one), and the vote results
    cond = [hw.bits(f"xsrc.{k}.{l}", LANES) for l in range(LANES)]
    vr = hw.bits(f"xvr.{k}", 3)                    # any, all, uni
    n2 = []
    shfl = xop.f(XLANE_OPS.index("SHFL"))
    for l in range(LANES):
        ml = sum(((1 << i) * mlb[l].f(i) for i in range(5)), Lin())
        bsrc = [bv[l].f(i) for i in range(5)]
        for j in range(LANES):
            for mi, m in enumerate(SHFL_MODES):
                if m == "up":
                    if j > l:
                        continue
                    mt, ok = match(bsrc, l - j), j - ml
                elif m == "down":
                    if j < l:
                        continue
                    mt, ok = match(bsrc, j - l), ml - j
                elif m == "bfly":
                    mt, ok = match(bsrc, l ^ j), ml - j
                else:
                    mt, ok = match([jb[l].f(i) for i in range(5)], j), ml - j
                n2 += n_step(512 * (shfl + mode.f(mi)) + 32 * mt + ok, 1024 + 160, {cond[l].feature(j): 1})
    cnt = sum((vb.f(l) for l in range(LANES)), Lin())
    nact = sum(mask, Lin())
    n2 += n_step(cnt, 1, {vr.feature(0): 1})
    n2 += n_step(cnt - nact, 0, {vr.feature(1): 1, vr.feature(2): 1})
    n2 += n_step(-1 * cnt, 0, {vr.feature(2): 1})
    hw.circ(f"xl2.{k}", cond + [vr], n2)
    # X3: the results
    vote = xop.f(XLANE_OPS.index("VOTE"))
    am = xop.f(XLANE_OPS.index("ACTIVEMASK"))
    unit = Unit(XLANE, k)
    for l in range(LANES):
        r = hw.bits(f"xr.{k}.{l}", 32)
        n3 = []
        took = sum((cond[l].f(j) for j in range(LANES)), Lin())
        for i in range(32):
            for j in range(LANES):
                n3 += n_gated(cond[l].f(j), a[j].f(i), {r.feature(i): 1})
            n3 += n_gated(shfl - took, a[l].f(i), {r.feature(i): 1})
        for i in range(LANES):
            n3 += n_gated(vote + mode.f(VOTE_MODES.index("ballot")) - 1, vb.f(i), {r.feature(i): 1})
            n3 += n_gated(am, mask[i], {r.feature(i): 1})
        for vi, vm in enumerate(("any", "all", "uni")):
            n3 += n_gated(vote + mode.f(VOTE_MODES.index(vm)) - 1, vr.f(vi), {r.feature(0): 1})
        hw.circ(f"xl3.{k}.{l}", [r], n3)
        unit.lo.append(r)
        unit.hi.append(hw.view(f"xok.{k}.{l}", [took]))
    hw.units.append(unit)
