"""An ALU slot: operand multiplexers, then two levels: adder digits, AND bits, shift amounts and
leading-zero prefixes; then the results gated by the opcode (ADD with base-3 carry lookahead,
compares through the carry out, logic, SEL, barrel shifts, CLZ/POPC/BREV)."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler.gadgets import n_gated, n_step

from ..config import ALU, LANES
from ..format import ALU_OPCODES, sources_for
from ..image import PORTS
from .builder import Builder, Unit, match
from .multiplier import multiplier
from .operands import mux, source_forms
from .regfile import ports_of
from .rom import segment


def alu(hw: Builder, k: int):
    """The ALU in slot k: its operands, then per lane the two levels (and the multiplier when the
    slot has one); leaves the results and carry flags in `hw.units`."""
    cfg = hw.cfg
    op, c, cin, a, b = _operands(hw, k)
    o = lambda name: op.f(ALU_OPCODES.index(name))
    shifter = cfg.shifters is None or k in cfg.shifters
    bitcount = cfg.bitcount is None or k in cfg.bitcount
    unit = Unit(ALU, k)
    for l in range(LANES):
        A = [a[l].f(i) for i in range(32)]
        B = [b[l].f(i) for i in range(32)]
        dig, andb, amt, zpre = _level1(hw, k, l, A, B, shifter, bitcount)
        r = hw.bits(f"r.{k}.{l}", 32)
        fl = hw.bits(f"flag.{k}.{l}", 1)
        nx = _adder_results(hw, A, B, cin[l].f(0), dig, o, r, fl)
        nx += _logic_results(A, B, c[l].f(0), andb, o, r, hw)
        if shifter:
            nx += _shift_results(A, amt, o, r)
        if bitcount:
            nx += _count_results(hw, A, zpre, o, r)
        hw.circ(f"alu2.{k}.{l}", [r, fl], nx)
        if k in cfg.multipliers:
            mr = multiplier(hw, k, l, A, B, o)
            r = hw.view(f"rm.{k}.{l}", [r.f(i) + mr.f(i) for i in range(32)])
        unit.lo.append(r)
        unit.hi.append(None)
        unit.flag.append(fl)
    hw.units.append(unit)


def _operands(hw: Builder, k: int):
    """The slot's ROM segment and register ports, its decoded opcode and source selections, and
    the operand multiplexers: a and b (32 bits), SEL's condition c and the carry in (1 bit) per lane."""
    cfg = hw.cfg
    segname = f"s{k}"
    seg = segment(hw, segname)
    ports = ports_of(hw, k, PORTS[ALU])
    opts = {n: sources_for(cfg, k, n) for n in ("a", "b", "c", "cin")}
    op = hw.decode_field(seg, segname, "op", len(ALU_OPCODES), f"op.{k}")
    sel = {n: hw.decode_field(seg, segname, n, len(opts[n]), f"sel.{k}.{n}") for n in opts}
    a = [hw.bits(f"a.{k}.{l}", 32) for l in range(LANES)]
    b = [hw.bits(f"b.{k}.{l}", 32) for l in range(LANES)]
    c = [hw.bits(f"c.{k}.{l}", 1) for l in range(LANES)]
    cin = [hw.bits(f"cin.{k}.{l}", 1) for l in range(LANES)]
    neurons = mux(hw, k, "a", sel["a"], opts["a"], ports, a)
    neurons += mux(hw, k, "b", sel["b"], opts["b"], ports, b)
    for oi, opt in enumerate(opts["c"]):         # SEL's condition: the source is non-zero
        for l in range(LANES):
            forms = source_forms(hw, k, opt, l, ports)
            if forms is not None:
                neurons += n_step(64 * sel["c"].f(oi) + sum(forms, Lin()), 65, {c[l].feature(0): 1})
    for oi, o in enumerate(opts["cin"]):
        for l in range(LANES):
            if o == ("1",):
                neurons += n_gated(sel["cin"].f(oi), Lin.const(1), {cin[l].feature(0): 1})
            elif o == ("flag",) and k > 0 and hw.units[k - 1].flag:
                neurons += n_gated(sel["cin"].f(oi), hw.units[k - 1].flag[l].f(0), {cin[l].feature(0): 1})
    hw.circ_groups(f"mux.{k}", [[a[l], b[l], c[l], cin[l]] for l in range(LANES)], neurons)
    return op, c, cin, a, b


def _level1(hw: Builder, k: int, l: int, A: list, B: list, shifter: bool, bitcount: bool):
    """Level 1 of lane l: adder digits (byte-wise generate/propagate, and the signed top byte), AND
    bits, the shift amount (one-hot, 32 = out of range), leading-zero prefixes."""
    dig = hw.bits(f"dig.{k}.{l}", 66)
    andb = hw.bits(f"and.{k}.{l}", 32)
    outs = [dig, andb]
    ny = []
    for kk in range(1, 33):
        lo = 8 * ((kk - 1) // 8)
        j = kk - lo
        s = Lin()
        for m in range(lo, kk):
            s = s + (1 << (m - lo)) * (A[m] + B[m])
        ny += n_step(s, 1 << j, {dig.feature(2 * (kk - 1)): 1})
        ny += n_step(s, (1 << j) - 1, {dig.feature(2 * (kk - 1) + 1): 1})
    ss = Lin()
    for m in range(24, 31):
        ss = ss + (1 << (m - 24)) * (A[m] + B[m])
    ss = ss + 128 * ((1 - A[31]) + (1 - B[31]))        # signed compare: sign bits flipped
    ny += n_step(ss, 256, {dig.feature(64): 1})
    ny += n_step(ss, 255, {dig.feature(65): 1})
    for i in range(32):
        ny += n_step(A[i] + B[i], 2, {andb.feature(i): 1})
    amt = None
    if shifter:
        amt = hw.bits(f"amt.{k}.{l}", 33)
        outs.append(amt)
        high = Lin()
        for i in range(5, 32):
            high = high + B[i]
        for kk in range(32):
            ny += n_step(match(B[:5], kk) - 5 * high, 5, {amt.feature(kk): 1})
        ny += n_step(high, 1, {amt.feature(32): 1})
    zpre = None
    if bitcount:
        zpre = hw.bits(f"clzp.{k}.{l}", 32)
        outs.append(zpre)
        acc = Lin()
        for t in range(1, 33):
            acc = acc + A[32 - t]
            ny += n_step(-1 * acc, 0, {zpre.feature(t - 1): 1})
    hw.circ(f"alu1.{k}.{l}", outs, ny)
    return dig, andb, amt, zpre


def _adder_results(hw: Builder, A: list, B: list, cn: Lin, dig, o, r, fl) -> list:
    """ADD (base-3 carry lookahead over the byte digits; the carry out into the flag) and the
    compares, read from the carry out of bit 31."""
    nx = []
    D = lambda x: dig.f(2 * (x - 1)) + dig.f(2 * (x - 1) + 1)
    Ds = dig.f(64) + dig.f(65)

    def carry(kk, signed=False):
        q = (kk - 1) // 8
        terms = [2 * cn] + [D(8 * (bb + 1)) for bb in range(q)]
        terms.append(Ds if (signed and kk == 32) else D(kk))
        z = Lin()
        for t_, f_ in enumerate(terms):
            z = z + (3 ** t_) * f_
        return z, (3 ** len(terms) + 1) / 2

    add = o("ADD")
    for i in range(32):
        nx += n_gated(add, A[i] + B[i], {r.feature(i): 1})
    nx += n_gated(add, cn, {r.feature(0): 1})
    for kk in range(1, 33):
        z, t = carry(kk)
        out = {r.feature(kk - 1): -2}
        if kk < 32:
            out[r.feature(kk)] = 1
        else:
            out[fl.feature(0)] = 1
        nx += hw.gstep(z, t, add, out)
    for name, signed in (("LTU", False), ("LEU", False), ("LT", True), ("LE", True)):
        z, t = carry(32, signed)
        nx += n_gated(o(name), Lin.const(1), {r.feature(0): 1})
        nx += hw.gstep(z, t, o(name), {r.feature(0): -1})
    return nx


def _logic_results(A: list, B: list, cond: Lin, andb, o, r, hw: Builder) -> list:
    """EQ (no differing bit), AND, OR, XOR from the AND bits, MOV, and SEL on its condition."""
    nx = []
    xor = Lin()
    for i in range(32):
        xor = xor + A[i] + B[i] - 2 * andb.f(i)
    nx += hw.gstep(-1 * xor, 0, o("EQ"), {r.feature(0): 1})
    for i in range(32):
        nx += n_gated(o("AND"), andb.f(i), {r.feature(i): 1})
        nx += n_gated(o("OR"), A[i] + B[i] - andb.f(i), {r.feature(i): 1})
        nx += n_gated(o("XOR"), A[i] + B[i] - 2 * andb.f(i), {r.feature(i): 1})
        nx += n_gated(o("MOV"), A[i], {r.feature(i): 1})
        nx += n_gated(o("SEL") + cond - 1, A[i], {r.feature(i): 1})
        nx += n_gated(o("SEL") - cond, B[i], {r.feature(i): 1})
    return nx


def _shift_results(A: list, amt, o, r) -> list:
    """The barrel shifter: SHL, SHR and SAR by the one-hot amount (SAR fills with the sign)."""
    nx = []
    for i in range(32):
        for kk in range(33):
            if kk <= i:
                nx += n_gated(o("SHL") + amt.f(kk) - 1, A[i - kk], {r.feature(i): 1})
            if kk < 32 and i + kk <= 31:
                nx += n_gated(o("SHR") + o("SAR") + amt.f(kk) - 1, A[i + kk], {r.feature(i): 1})
        thermo = Lin()
        for kk in range(max(1, 32 - i), 33):
            thermo = thermo + amt.f(kk)
        nx += n_gated(o("SAR") + thermo - 1, A[31], {r.feature(i): 1})
    return nx


def _count_results(hw: Builder, A: list, zpre, o, r) -> list:
    """CLZ and POPC (each result bit from thresholds on the count) and BREV."""
    nx = []
    for name, count in (("CLZ", sum((zpre.f(t) for t in range(32)), Lin())),
                        ("POPC", sum(A, Lin()))):
        for bit in range(6):
            w = 1 << bit
            for rr in range(1, 33 // w + 2):
                lo_t = (2 * rr - 1) * w
                hi_t = 2 * rr * w
                if lo_t <= 32:
                    nx += hw.gstep(count, lo_t, o(name), {r.feature(bit): 1})
                if hi_t <= 32:
                    nx += hw.gstep(count, hi_t, o(name), {r.feature(bit): -1})
    for i in range(32):
        nx += n_gated(o("BREV"), A[31 - i], {r.feature(i): 1})
    return nx
