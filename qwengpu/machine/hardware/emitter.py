"""The emitter: changed bytes, uniform ('all') detection, eligibility by place, the first candidate,
fault priority, the output variables (kind, A, B, C) and the output rules the lm_head scores."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler.gadgets import n_gated, n_linear, n_step

from ..config import LANES
from ..format import BLOCK_BITS, EPOCH_BITS, MEM_OPS
from ..tokens import PASS_KINDS
from .builder import FPU_KIND, KIND_WEIGHT, Builder, carry_pos, memw_pos
from .lanes import first_lane


def faults(hw: Builder):
    """The first faulting lane of an EXEC pass and whether its fault is a misalignment."""
    mi = hw.mem_info
    flt, bad = mi["fault"], mi["bad"]
    ffl = hw.bits("f.lane", LANES)
    fx = hw.bits("f.any", 2)                        # a fault this pass, misaligned
    n = []
    for l in range(LANES):
        before = sum((flt.f(m) for m in range(l)), Lin())
        n += n_step(flt.f(l) - before, 1, {ffl.feature(l): 1})
        n += n_step(flt.f(l) - before + bad[l].f(0), 2, {fx.feature(1): 1})
    # a fault speaks on EXEC passes only; on the others the memory unit sees a stale bundle with the
    # current warp's registers, and two "faulting" lanes must not outweigh the missing EXEC
    n += n_step(LANES * (hw.k("EXEC") - 1) + sum((flt.f(l) for l in range(LANES)), Lin()), 1, {fx.feature(0): 1})
    hw.circ("fault.first", [ffl, fx], n)
    hw.fault = dict(lane=ffl, any=fx)


def emitter(hw: Builder):
    J = hw.J
    mi = hw.mem_info
    cb, mb = hw.cbuf, hw.mbuf
    done = hw.done
    P = sum(((1 << i) * hw.t_pos.f(i) for i in range(7)), Lin())
    pass_kind = sum((hw.k(name) for name in PASS_KINDS if name in hw.kinds), Lin())
    # E0: which lanes' memory writes a store / atomic makes, an atomic's partial pass, first done lane
    op = mi["op"]
    st, at = op.f(MEM_OPS.index("ST")), op.f(MEM_OPS.index("ATOM"))
    first = first_lane(hw)
    e0 = hw.bits("e.lanes", 2 * LANES + 1)        # memw lane, first done lane, partial
    n0 = []
    for l in range(LANES):
        n0 += n_step(st + hw.c_mask.f(l), 2, {e0.feature(l): 1})
        n0 += n_step(at + first.f(l), 2, {e0.feature(l): 1})
        n0 += n_step(done.f(l) - sum((done.f(m) for m in range(l)), Lin()), 1, {e0.feature(LANES + l): 1})
    n0 += n_step(8 * at + sum((hw.c_mask.f(l) for l in range(LANES)), Lin()), 10, {e0.feature(2 * LANES): 1})
    hw.circ("emit.0", [e0], n0)
    partial = e0.f(2 * LANES)
    # E1: changed bytes (of done lanes), differing pairs, eligibility
    NC = 4 * J * (LANES + 1) + 4 * LANES
    chd = hw.bits("e.changed", J * 4 * LANES)
    pdiff = hw.bits("e.pairs", J * 4 * 6)
    mch = hw.bits("e.mchanged", 4 * LANES)
    elig = hw.bits("e.elig", NC)
    n1 = []
    nbyte = lambda j, l, b: [cb.f(32 * (LANES * j + l) + 8 * b + i) for i in range(8)]
    obyte = lambda j, l, b: [hw.cold[j].f(32 * l + 8 * b + i) for i in range(8)]
    val8 = lambda bits: sum(((1 << i) * x for i, x in enumerate(bits)), Lin())
    pairs = [(l, m) for l in range(LANES) for m in range(l + 1, LANES)]
    for j in range(J):
        for b in range(4):
            for l in range(LANES):
                d = val8(nbyte(j, l, b)) - val8(obyte(j, l, b))
                g = 256 * (done.f(l) - 1)
                o = {chd.feature(LANES * (4 * j + b) + l): 1}
                n1 += n_step(d + g, 1, o)
                n1 += n_step(-1 * d + g, 1, o)
            for pi, (l, m) in enumerate(pairs):
                d = val8(nbyte(j, l, b)) - val8(nbyte(j, m, b))
                g = 256 * (done.f(l) + done.f(m) - 2)
                o = {pdiff.feature(6 * (4 * j + b) + pi): 1}
                n1 += n_step(d + g, 1, o)
                n1 += n_step(-1 * d + g, 1, o)
    for l in range(LANES):
        for b in range(4):
            d = val8([mb.f(32 * l + 8 * b + i) for i in range(8)]) - val8([mi["ld"][l].f(8 * b + i) for i in range(8)])
            o = {mch.feature(4 * l + b): 1}
            n1 += n_step(d, 1, o)
            n1 += n_step(-1 * d, 1, o)
    for c in range(NC):
        n1 += n_step(c + 1 - P + 128 * pass_kind, 129, {elig.feature(c): 1})
    hw.circ("emit.1", [chd, pdiff, mch, elig], n1)
    # E2: valid candidates, in pass order
    valid = hw.bits("e.valid", NC)
    n2 = []
    width = mi["width"]
    for j in range(J):
        en = hw.field_forms(hw.tail, "tail", f"c{j}_en")[0]
        for b in range(4):
            pd = sum((pdiff.f(6 * (4 * j + b) + pi) for pi in range(6)), Lin())
            chs = sum((chd.f(LANES * (4 * j + b) + l) for l in range(LANES)), Lin())
            for ls in range(LANES + 1):
                # the three required bits weigh w each, just more than the other terms together
                # (pd + partial, or chs), not more: every weight multiplies its bit's fp32 noise
                # (emit.1's steps on forms of up to +-255 arrive with ~1e-4), and this step's form
                # must stay within 0.1 of an integer
                w = max(len(pairs), LANES) + 2
                c = carry_pos(j, b, ls) - 1
                if ls == LANES:
                    form = w * (en + (1 - partial) + elig.f(c)) - w * pd + chs
                else:
                    form = w * (en + chd.f(LANES * (4 * j + b) + ls) + elig.f(c)) + pd + partial
                n2 += n_step(form, 3 * w + 1, {valid.feature(c): 1})
    for l in range(LANES):
        for b in range(4):
            c = memw_pos(J, l, b) - 1
            bw = sum((width.f(wi) for wi, size in enumerate((1, 2, 4)) if b < size), Lin())
            n2 += n_step(e0.f(l) + bw + mch.f(4 * l + b) + elig.f(c), 4, {valid.feature(c): 1})
    hw.circ("emit.2", [valid], n2)
    # E3: the first valid candidate
    firstc = hw.bits("e.first", NC)
    n3 = []
    for c in range(NC):
        before = sum((valid.f(x) for x in range(c)), Lin())
        n3 += n_step(128 * valid.f(c) - before, 128, {firstc.feature(c): 1})
    hw.circ("emit.3", [firstc], n3)
    output(hw, firstc, e0, float_lanes(hw))


def float_lanes(hw: Builder):
    """The next FPU token's lane (one-hot; none when no lane is left): when the bundle carries the
    float unit's result, every served lane after the one the datapath ran this pass (the first,
    on EXEC; the token's, on FPU), before any carry."""
    fk = hw.fpu_slot
    if fk is None:
        return None
    done, ran = hw.done, hw.fpu_lane          # the lane the datapath ran: EXEC's first, FPU's own
    pend = hw.bits("e.fpu", LANES)
    n = []
    for j in range(hw.J):
        carried = hw.field_forms(hw.tail, "tail", f"c{j}_en")[0] + hw.cslot[j].f(fk)
        for l in range(1, LANES):
            after = sum((ran.f(m) for m in range(l)), Lin())
            n += n_step(hw.k("EXEC") + hw.k("FPU") + carried + done.f(l) + after, 5, {pend.feature(l): 1})
    hw.circ("emit.fpu", [pend], n)
    nxt = hw.bits("e.fpu.next", LANES)
    n = []
    for l in range(1, LANES):
        n += n_step(pend.f(l) - sum((pend.f(m) for m in range(1, l)), Lin()), 1, {nxt.feature(l): 1})
    hw.circ("emit.fpu.next", [nxt], n)
    return nxt


def output(hw: Builder, firstc, e0, fnext=None):
    """The output variables the rules read: kind (one bit per `hw.out_kinds`), A (value / pc /
    warp / block / epoch), B (lanes: mask, lane, or 4 = all), C (carry 4j+byte, byte, fault kind).
    `fnext`: the next FPU lane (a machine with a float unit), which goes before every carry."""
    J = hw.J
    kind = hw.bits("out.kind", len(hw.out_kinds))
    A = hw.bits("out.a", max(8, hw.pcb))             # a byte, or a pc
    B = hw.bits("out.b", 4)
    C = hw.bits("out.c", 4)
    ko = lambda name: {kind.feature(hw.out_kinds.index(name)): 1}

    def const(cond, value, var, nbits):
        out = []
        for i in range(nbits):
            if (value >> i) & 1:
                out += n_gated(cond, Lin.const(1), {var.feature(i): 1})
        return out

    fx, fmis = hw.fault["any"].f(0), hw.fault["any"].f(1)
    ffl = hw.fault["lane"]
    NCC = 4 * J * (LANES + 1)
    NC = firstc.size
    carry = sum((firstc.f(c) for c in range(NCC)), Lin())
    memw = sum((firstc.f(c) for c in range(NCC, NC)), Lin())
    fpu = Lin() if fnext is None else sum((fnext.f(l) for l in range(LANES)), Lin())
    hush = fx + fpu                                   # a fault, or a float lane, goes first
    cand = carry + memw
    n = []
    n += n_linear(fx, ko("FAULT"))
    n += n_step(carry - hush, 1, ko("CARRY"))
    n += n_step(memw - hush, 1, ko("MEMW"))
    if fnext is not None:
        n += n_step(fpu - fx, 1, ko(FPU_KIND))
        for l in range(1, LANES):
            n += const(fnext.f(l) - fx, l, B, 4)
    ck = hw.ctl["kind"]
    quiet = cand + fx + fpu                           # 1 when a candidate, a float lane or a fault speaks
    for ci, name in enumerate(("EXEC", "WARP", "RELEASE", "BLOCK", "HALT")):
        n += n_step(ck.f(ci) - quiet, 1, ko(name))

    cb, mb = hw.cbuf, hw.mbuf
    for j in range(J):
        for b in range(4):
            for ls in range(LANES + 1):
                c = carry_pos(j, b, ls) - 1
                g = firstc.f(c) - hush
                n += const(g, ls, B, 4)
                n += const(g, 4 * j + b, C, 4)
                for l in ([ls] if ls < LANES else range(LANES)):
                    cond = g if ls < LANES else g + e0.f(LANES + l) - 1
                    for i in range(8):
                        n += n_gated(cond, cb.f(32 * (LANES * j + l) + 8 * b + i), {A.feature(i): 1})
    for l in range(LANES):
        for b in range(4):
            c = memw_pos(J, l, b) - 1
            g = firstc.f(c) - hush
            n += const(g, l, B, 4)
            n += const(g, b, C, 4)
            for i in range(8):
                n += n_gated(g, mb.f(32 * l + 8 * b + i), {A.feature(i): 1})
    # faults: lane and kind (read 0, write 1, misaligned 2, atomic 3)
    op = hw.mem_info["op"]
    stw = op.f(MEM_OPS.index("ST")) + op.f(MEM_OPS.index("ATOM"))
    atw = op.f(MEM_OPS.index("ATOM"))
    for l in range(LANES):
        n += const(fx + ffl.f(l) - 1, l, B, 4)
    n += n_step(fx + stw - fmis, 2, {C.feature(0): 1})
    n += n_step(fx + fmis, 2, {C.feature(1): 1})
    n += n_step(fx + atw - fmis, 2, {C.feature(1): 1})
    # control tokens
    pcc, ismin, fmin, nw = hw.ctl["pcc"], hw.ctl["ismin"], hw.ctl["first"], hw.ctl["nextwarp"]
    ex = ck.f(0) - quiet
    for l in range(LANES):
        for i in range(hw.pcb):
            n += n_gated(ex + fmin.f(l) - 1, pcc[l].f(i), {A.feature(i): 1})
        n += n_gated(ex, ismin.f(l), {B.feature(l): 1})
    for w in range(hw.warps):
        n += const(ck.f(1) - quiet + nw.f(w) - 1, w, A, 8)
    for i in range(EPOCH_BITS):
        n += n_gated(ck.f(2) - quiet, hw.next_epoch.f(i), {A.feature(i): 1})
    for i in range(BLOCK_BITS):
        n += n_gated(ck.f(3) - quiet, hw.next_block.f(i), {A.feature(i): 1})
    hw.circ("emit.out", [kind, A, B, C], n)
    hw.out = dict(kind=kind, A=A, B=B, C=C)
    rules(hw)


def rules(hw: Builder):
    p = hw.p
    kind, A, B, C = (hw.out[x] for x in ("kind", "A", "B", "C"))
    kw = lambda name: (kind, 1 << hw.out_kinds.index(name), KIND_WEIGHT)
    for key, tok in hw.tok.items():
        if not isinstance(key, tuple):
            key = (key,)
        name = key[0]
        if name == "EXEC":
            p.emit_when(tok, [kw("EXEC"), (A, key[1]), (B, key[2])])
        elif name == "CARRY":
            _, j, b, ls, v = key
            p.emit_when(tok, [kw("CARRY"), (A, v), (B, LANES if ls == "all" else ls), (C, 4 * j + b)])
        elif name == "MEMW":
            _, l, b, v = key
            p.emit_when(tok, [kw("MEMW"), (A, v), (B, l), (C, b)])
        elif name in ("WARP", "BLOCK", "RELEASE"):
            p.emit_when(tok, [kw(name), (A, key[1])])
        elif name == FPU_KIND:
            p.emit_when(tok, [kw(FPU_KIND), (B, key[1])])
        elif name == "HALT":
            p.emit_when(tok, [kw("HALT")])
        elif name == "FAULT":
            _, fk, l = key
            p.emit_when(tok, [kw("FAULT"), (B, l), (C, fk)])
