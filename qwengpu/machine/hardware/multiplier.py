"""The multiplier of an ALU slot (MUL / MULHU / MULHS): operands re-thresholded, nibble products
summed per base-16 column (SwiGLU products), two carry-save digit reductions, a 64-bit addition."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler.gadgets import n_gated, n_linear, n_product, n_step

from .builder import Builder


def multiplier(hw: Builder, k: int, l: int, A: list, B: list, o) -> "object":
    """The 64-bit product of two 32-bit operands (signed or unsigned), exactly, in six levels:
    nibble products summed per base-16 column (SwiGLU products), two rounds of carry-save
    digit reduction, the bits of the remaining digits, then one 64-bit addition."""
    A, B = _clean_operands(hw, k, l, A, B)
    T = _column_sums(hw, k, l, A, B, o("MULHS"))
    V = _carry_save(hw, k, l, T)
    X, Y = _digit_bits(hw, k, l, V)
    return _add64(hw, k, l, X, Y, o("MUL"), o("MULHU") + o("MULHS"))


def _clean_operands(hw: Builder, k: int, l: int, A: list, B: list):
    """M0: re-threshold the operand bits. A result forwarded from an earlier slot of the bundle
    carries fp32 noise of ~1e-3 per bit (its carry steps sum terms of ~1e4); the column sums
    below weigh each bit by up to ~3600, which would turn that noise into a wrong digit."""
    clean = hw.bits(f"mop.{k}.{l}", 64)
    n0 = []
    for i in range(32):
        n0 += n_step(A[i], 1, {clean.feature(i): 1})
        n0 += n_step(B[i], 1, {clean.feature(32 + i): 1})
    hw.circ(f"mul0.{k}.{l}", [clean], n0)
    return [clean.f(i) for i in range(32)], [clean.f(32 + i) for i in range(32)]


def _column_sums(hw: Builder, k: int, l: int, A: list, B: list, hs: Lin) -> list:
    """M1: column sums T_s = sum_{p+q=s} a_p b_q (+ the signed correction for MULHS:
    -2^32 (a31 b + b31 a) == 2^32 (a31 (~b + 1) + b31 (~a + 1)) mod 2^64)."""
    nib = lambda X, p: sum(((1 << i) * X[4 * p + i] for i in range(4)), Lin())
    T = [hw.p.number_var(f"mT.{k}.{l}.{s}", 0, 2048) for s in range(16)]
    n1 = []
    for p_ in range(8):
        for q in range(8):
            if p_ + q < 16:
                n1 += n_product(nib(A, p_), nib(B, q), {T[p_ + q].feature(0): 1})
    for q in range(8):
        n1 += n_gated(hs + A[31] - 1, 15 - nib(B, q), {T[8 + q].feature(0): 1})
        n1 += n_gated(hs + B[31] - 1, 15 - nib(A, q), {T[8 + q].feature(0): 1})
    n1 += n_gated(hs + A[31] - 1, Lin.const(1), {T[8].feature(0): 1})
    n1 += n_gated(hs + B[31] - 1, Lin.const(1), {T[8].feature(0): 1})
    hw.circ(f"mul1.{k}.{l}", T, n1)
    return T


def _carry_save(hw: Builder, k: int, l: int, T: list) -> list:
    """M2: move multiples of 256 two columns up (U_s <= 255 + 7); M3: multiples of 16 one column
    up (V_s <= 15 + 16)."""
    U = [hw.p.number_var(f"mU.{k}.{l}.{s}", 0, 300) for s in range(16)]
    n2 = []
    for s in range(16):
        n2 += n_linear(T[s].f(0), {U[s].feature(0): 1})
        for m in range(1, 8):
            out = {U[s].feature(0): -256}
            if s + 2 < 16:
                out[U[s + 2].feature(0)] = 1
            n2 += n_step(T[s].f(0), 256 * m, out)
    hw.circ(f"mul2.{k}.{l}", U, n2)
    V = [hw.p.number_var(f"mV.{k}.{l}.{s}", 0, 31) for s in range(16)]
    n3 = []
    for s in range(16):
        n3 += n_linear(U[s].f(0), {V[s].feature(0): 1})
        for m in range(1, 17):
            out = {V[s].feature(0): -16}
            if s + 1 < 16:
                out[V[s + 1].feature(0)] = 1
            n3 += n_step(U[s].f(0), 16 * m, out)
    hw.circ(f"mul3.{k}.{l}", V, n3)
    return V


def _digit_bits(hw: Builder, k: int, l: int, V: list):
    """M4: the bits of each digit V_s (< 32): bits 0-3 are X's, bit 4 is Y's (one column up)."""
    X = hw.bits(f"mX.{k}.{l}", 64)
    Y = hw.bits(f"mY.{k}.{l}", 64)
    n4 = []
    for s in range(16):
        for v in range(1, 32):
            for bit in range(5):
                d = ((v >> bit) & 1) - (((v - 1) >> bit) & 1)
                if not d:
                    continue
                if bit < 4:
                    n4 += n_step(V[s].f(0), v, {X.feature(4 * s + bit): d})
                elif s + 1 < 16:
                    n4 += n_step(V[s].f(0), v, {Y.feature(4 * s + 4): d})
    hw.circ(f"mul4.{k}.{l}", [X, Y], n4)
    return X, Y


def _add64(hw: Builder, k: int, l: int, X, Y, mul: Lin, mulh: Lin):
    """M5, M6: X + Y (64 bits); MUL keeps the low word, MULHU/MULHS the high word."""
    Xf = [X.f(i) for i in range(64)]
    Yf = [Y.f(i) for i in range(64)]
    dig = hw.bits(f"mdig.{k}.{l}", 128)
    n5 = []
    for kk in range(1, 65):
        lo = 8 * ((kk - 1) // 8)
        j = kk - lo
        s_ = sum(((1 << (m - lo)) * (Xf[m] + Yf[m]) for m in range(lo, kk)), Lin())
        n5 += n_step(s_, 1 << j, {dig.feature(2 * (kk - 1)): 1})
        n5 += n_step(s_, (1 << j) - 1, {dig.feature(2 * (kk - 1) + 1): 1})
    hw.circ(f"mul5.{k}.{l}", [dig], n5)
    mr = hw.bits(f"mr.{k}.{l}", 32)
    n6 = []
    D = lambda x: dig.f(2 * (x - 1)) + dig.f(2 * (x - 1) + 1)
    for i in range(32):
        n6 += n_gated(mul, Xf[i] + Yf[i], {mr.feature(i): 1})
        n6 += n_gated(mulh, Xf[32 + i] + Yf[32 + i], {mr.feature(i): 1})
    P = lambda x: dig.f(2 * (x - 1) + 1) - dig.f(2 * (x - 1))       # group x propagates
    for kk in range(1, 65):
        q = (kk - 1) // 8
        terms = [D(8 * (bb + 1)) for bb in range(q)] + [D(kk)]
        outs = []
        if kk <= 32:
            out = {mr.feature(kk - 1): -2}
            if kk < 32:
                out[mr.feature(kk)] = 1
            outs.append((mul, out))
        if kk >= 32:
            out = {mr.feature(kk - 33): -2} if kk > 32 else {}
            if kk < 64:
                out[mr.feature(kk - 32)] = 1
            outs.append((mulh, out))
        for cond, out in outs:
            n6 += _carry_steps(hw, terms, [P(8 * (bb + 1)) for bb in range(q)] + [P(kk)], cond, out)
    hw.circ(f"mul6.{k}.{l}", [mr], n6)
    return mr


def _carry_steps(hw: Builder, terms: list, props: list, cond: Lin, out: dict) -> list:
    """out * [carry] from the group digits `terms` (least significant first; 2 generates, 1
    propagates, 0 kills): carry iff the highest digit that is not 1 is 2, i.e. the base-3 form
    sum 3^t D_t is above 11..1. Up to 4 digits that form is one step; above, the 32-bit halves are
    split (a form of 3^9 would carry the digits' fp32 noise times 6561 into the threshold): either
    the high digits carry by themselves, or they all propagate and the low four carry: two
    exclusive steps whose forms weigh a digit by at most 82."""
    def base3(ds):
        return sum(((3 ** t_) * d for t_, d in enumerate(ds)), Lin()), (3 ** len(ds) + 1) / 2
    if len(terms) <= 4:
        z, t = base3(terms)
        return hw.gstep(z, t, cond, out, 2.0 * 3 ** len(terms))
    lo, hi = terms[:4], terms[4:]
    z_hi, t_hi = base3(hi)
    z_lo, t_lo = base3(lo)
    K = 3 ** 4 + 1                      # > the low form's range: one non-propagating high digit vetoes
    all_prop = sum(props[4:], Lin()) - len(hi)
    neurons = hw.gstep(z_hi, t_hi, cond, out, 2.0 * 3 ** len(hi))
    neurons += hw.gstep(z_lo + K * all_prop, t_lo, cond, out, 2.0 * (3 ** 4 + K * len(hi)))
    return neurons
