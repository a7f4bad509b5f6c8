"""The atomic unit (part of the memory unit): the old value, an adder, compares, the new value, and
the store buffer (`mbuf`)."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler import memory as M
from qwengpu.compiler.gadgets import n_gated, n_linear, n_step

from ..config import LANES
from ..format import ATOM_OPS, MEM_OPS
from .builder import Builder
from .lanes import first_lane


def adder_digits(hw: Builder, A: list, B: list, out, base: int = 0, signed_top: bool = False) -> list:
    """Neurons for the 64 (+2 signed) generate/propagate digits of A + B into out[base...]."""
    ny = []
    for kk in range(1, 33):
        lo = 8 * ((kk - 1) // 8)
        j = kk - lo
        s_ = Lin()
        for m in range(lo, kk):
            s_ = s_ + (1 << (m - lo)) * (A[m] + B[m])
        ny += n_step(s_, 1 << j, {out.feature(base + 2 * (kk - 1)): 1})
        ny += n_step(s_, (1 << j) - 1, {out.feature(base + 2 * (kk - 1) + 1): 1})
    if signed_top:
        ss = Lin()
        for m in range(24, 31):
            ss = ss + (1 << (m - 24)) * (A[m] + B[m])
        ss = ss + 128 * ((1 - A[31]) + (1 - B[31]))
        ny += n_step(ss, 256, {out.feature(base + 64): 1})
        ny += n_step(ss, 255, {out.feature(base + 65): 1})
    return ny


def carry_form(dig, base: int, kk: int, cin: Lin, signed: bool = False):
    """(form, threshold): the carry into bit kk of an addition whose digits are in dig[base:]."""
    D = lambda x: dig.f(base + 2 * (x - 1)) + dig.f(base + 2 * (x - 1) + 1)
    q = (kk - 1) // 8
    terms = [2 * cin] + [D(8 * (bb + 1)) for bb in range(q)]
    terms.append(dig.f(base + 64) + dig.f(base + 65) if (signed and kk == 32) else D(kk))
    z = Lin()
    for t_, f_ in enumerate(terms):
        z = z + (3 ** t_) * f_
    return z, (3 ** len(terms) + 1) / 2


def atomic_unit(hw: Builder):
    """The new value of an atomic, for the first active lane: old (loaded) op data; and the store
    buffer (`mbuf`): the bytes a store or atomic leaves for the MEMW tokens."""
    mi = hw.mem_info
    k = mi["k"]
    first = first_lane(hw)
    atom = mi["atom"]
    a = lambda name: atom.f(ATOM_OPS.index(name))
    old, dat, cv, sec = _first_lane_values(hw, k, first, a)
    O = [old.f(i) for i in range(32)]
    Dt = [dat.f(i) for i in range(32)]
    dig, andb, zero = _digits(hw, k, O, Dt, sec)
    sm, lg, cmp_ = _sum_compare_logic(hw, k, O, Dt, sec, dig, andb, a)
    new = _new_value(hw, k, O, Dt, cv, sm, lg, cmp_, zero, a)
    hw.mem_info["new"] = new
    _store_buffer(hw, k, first, new)


def _first_lane_values(hw: Builder, k: int, first, a):
    """C: the first lane's values; the adder's second operand per operation."""
    mi = hw.mem_info
    ld, data, cmpv = mi["ld"], mi["data"], mi["cmp"]
    # C: the first lane's values; the adder's second operand per operation
    old = hw.bits(f"a.old.{k}", 32)
    dat = hw.bits(f"a.dat.{k}", 32)
    cv = hw.bits(f"a.cmp.{k}", 32)
    sec = hw.bits(f"a.sec.{k}", 32)
    nc = []
    for l in range(LANES):
        for i in range(32):
            nc += n_gated(first.f(l), ld[l].f(i), {old.feature(i): 1})
            nc += n_gated(first.f(l), data[l].f(i), {dat.feature(i): 1})
            nc += n_gated(first.f(l), cmpv[l].f(i), {cv.feature(i): 1})
            nc += n_gated(first.f(l) + a("add") - 1, data[l].f(i), {sec.feature(i): 1})
    nc += n_gated(a("inc"), Lin.const(1), {sec.feature(0): 1})
    for i in range(32):
        nc += n_gated(a("dec"), Lin.const(1), {sec.feature(i): 1})
    hw.circ(f"atomc.{k}", [old, dat, cv, sec], nc)
    return old, dat, cv, sec


def _digits(hw: Builder, k: int, O: list, Dt: list, sec):
    """D: digits of old + sec, of old + ~dat, AND bits, old == 0."""
    dig = hw.bits(f"a.dig.{k}", 64 + 66)
    andb = hw.bits(f"a.and.{k}", 32)
    zero = hw.bits(f"a.zero.{k}", 1)
    nd = adder_digits(hw, O, [sec.f(i) for i in range(32)], dig, 0)
    nd += adder_digits(hw, O, [1 - x for x in Dt], dig, 64, signed_top=True)
    for i in range(32):
        nd += n_step(O[i] + Dt[i], 2, {andb.feature(i): 1})
    nd += n_step(-1 * sum(O, Lin()), 0, {zero.feature(0): 1})
    hw.circ(f"atomd.{k}", [dig, andb, zero], nd)
    return dig, andb, zero


def _sum_compare_logic(hw: Builder, k: int, O: list, Dt: list, sec, dig, andb, a):
    """E: the sum, the comparisons of old and data, the logic operations."""
    sm = hw.bits(f"a.sum.{k}", 32)
    lg = hw.bits(f"a.logic.{k}", 32)
    cmp_ = hw.bits(f"a.cmpres.{k}", 5)     # ge_u, gt_u, lt_u, lt_s, eq
    ne = []
    for i in range(32):
        ne += n_linear(O[i] + sec.f(i), {sm.feature(i): 1})
    for kk in range(1, 33):
        z, t = carry_form(dig, 0, kk, Lin())
        out = {sm.feature(kk - 1): -2}
        if kk < 32:
            out[sm.feature(kk)] = 1
        ne += n_step(z, t, out)
    z1, t1 = carry_form(dig, 64, 32, Lin.const(1))
    z0, t0 = carry_form(dig, 64, 32, Lin())
    zs, ts = carry_form(dig, 64, 32, Lin.const(1), signed=True)
    ne += n_step(z1, t1, {cmp_.feature(0): 1})                     # old >= dat (unsigned)
    ne += n_step(z0, t0, {cmp_.feature(1): 1})                     # old > dat
    ne += n_linear(Lin.const(1), {cmp_.feature(2): 1, cmp_.feature(3): 1})
    ne += n_step(z1, t1, {cmp_.feature(2): -1})                    # old < dat (unsigned)
    ne += n_step(zs, ts, {cmp_.feature(3): -1})                    # old < dat (signed)
    x = Lin()
    for i in range(32):
        x = x + O[i] + Dt[i] - 2 * andb.f(i)
    ne += n_step(-1 * x, 0, {cmp_.feature(4): 1})                  # old == dat
    for i in range(32):
        ne += n_gated(a("and"), andb.f(i), {lg.feature(i): 1})
        ne += n_gated(a("or"), O[i] + Dt[i] - andb.f(i), {lg.feature(i): 1})
        ne += n_gated(a("xor"), O[i] + Dt[i] - 2 * andb.f(i), {lg.feature(i): 1})
    hw.circ(f"atome.{k}", [sm, lg, cmp_], ne)
    return sm, lg, cmp_


def _new_value(hw: Builder, k: int, O: list, Dt: list, cv, sm, lg, cmp_, zero, a):
    """F: select the new value by the atomic's operation (min/max signed or not by the instruction)."""
    signed = hw.mem_info["signed"]
    new = hw.bits(f"a.new.{k}", 32)
    nf = []
    ge_u, gt_u, lt_u, lt_s, eq = (cmp_.f(i) for i in range(5))
    zr = zero.f(0)
    for i in range(32):
        S, Lg, Dv, Ov, Cv = sm.f(i), lg.f(i), Dt[i], O[i], cv.f(i)
        nf += n_gated(a("add"), S, {new.feature(i): 1})
        nf += n_gated(a("and") + a("or") + a("xor"), Lg, {new.feature(i): 1})
        nf += n_gated(a("exch"), Dv, {new.feature(i): 1})
        nf += n_gated(a("inc") - ge_u, S, {new.feature(i): 1})
        nf += n_gated(a("dec") + zr - 1, Dv, {new.feature(i): 1})
        nf += n_gated(a("dec") - zr + gt_u - 1, Dv, {new.feature(i): 1})
        nf += n_gated(a("dec") - zr - gt_u, S, {new.feature(i): 1})
        nf += n_gated(a("cas") + eq - 1, Cv, {new.feature(i): 1})
        nf += n_gated(a("cas") - eq, Ov, {new.feature(i): 1})
        for name, mine in (("min", True), ("max", False)):
            # unsigned or signed by the instruction
            for lt_bit, sg in ((lt_u, 1 - signed), (lt_s, signed)):
                take_old = (lt_bit if mine else 1 - lt_bit)
                nf += n_gated(a(name) + sg + take_old - 2, Ov, {new.feature(i): 1})
                nf += n_gated(a(name) + sg - take_old - 1, Dv, {new.feature(i): 1})
    hw.circ(f"atomf.{k}", [new], nf)
    return new


def _store_buffer(hw: Builder, k: int, first, new):
    """The bytes a store or atomic leaves for MEMW tokens (per lane; an atomic's in its first lane),
    kept in the store buffer `mbuf` (a GDN slot written by EXEC)."""
    mi = hw.mem_info
    data = mi["data"]
    mop = mi["op"]
    st, at = mop.f(MEM_OPS.index("ST")), mop.f(MEM_OPS.index("ATOM"))
    mv = hw.bits(f"mbuf.in.{k}", 32 * LANES)
    nm = []
    for l in range(LANES):
        for i in range(32):
            nm += n_gated(st, data[l].f(i), {mv.feature(32 * l + i): 1})
            nm += hw.clean_gate(at + first.f(l) - 1, new.f(i), {mv.feature(32 * l + i): 1})  # an adder's output
    hw.circ(f"mbuf.{k}", [mv], nm)
    mb = M.GDNMemory(hw.p, "mbuf", slots=1, width=32 * LANES, whole=True)
    slot = hw.p.vars["slot0"]
    mb.write(slot, mv, enable=hw.k("EXEC"))
    hw.mbuf = mb.read(slot, name="mbuf.out")
