"""The multiplier of an ALU slot (MUL / MULHU / MULHS): operands re-thresholded, digit products
summed per base-8 column (SwiGLU products), two carry-save digit reductions, a 64-bit addition."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler.gadgets import n_gated, n_linear, n_product, n_step

from .builder import Builder

#: base-8 digits of a 32-bit operand (the top one holds bits 30-31) and columns of the 64-bit product
DIGITS = 11
COLUMNS = 22


def _digit_max(p: int) -> int:
    return 7 if p < DIGITS - 1 else 3


def multiplier(hw: Builder, k: int, l: int, A: list, B: list, o) -> "object":
    """The 64-bit product of two 32-bit operands (signed or unsigned), exactly, in six levels:
    digit products summed per base-8 column (SwiGLU products), two rounds of carry-save
    digit reduction, the bits of the remaining digits, then one 64-bit addition.

    Base 8, not 16: a carry-save step is a threshold on a column sum whose outputs are weighted by
    the radix moved; far above its threshold both SiLUs of the step are linear, and their fp32
    rounding (relative to the sum's magnitude) is what survives the subtraction. Base-16 columns
    sum to 2,048 with outputs weighted by 256 (~1/16 of a digit per rounding, 0.19 measured); base-8
    columns sum to ~550 with outputs weighted by 64 (~1/128 per rounding)."""
    A, B = _clean_operands(hw, k, l, A, B)
    T, tmax = _column_sums(hw, k, l, A, B, o("MULHS"))
    V, vmax = carry_save(hw, k, l, T, tmax)
    X, Y = digit_bits(hw, k, l, V, vmax)
    return _add64(hw, k, l, X, Y, o("MUL"), o("MULHU") + o("MULHS"))


def _clean_operands(hw: Builder, k: int, l: int, A: list, B: list):
    """M0: re-threshold the operand bits. A result forwarded from an earlier slot of the bundle
    carries fp32 noise of ~1e-3 per bit (its carry steps sum terms of ~1e4); the column sums
    below weigh each bit by up to ~500, which would turn that noise into a wrong digit."""
    clean = hw.bits(f"mop.{k}.{l}", 64)
    n0 = []
    for i in range(32):
        n0 += n_step(A[i], 1, {clean.feature(i): 1})
        n0 += n_step(B[i], 1, {clean.feature(32 + i): 1})
    hw.circ(f"mul0.{k}.{l}", [clean], n0)
    return [clean.f(i) for i in range(32)], [clean.f(32 + i) for i in range(32)]


def _column_sums(hw: Builder, k: int, l: int, A: list, B: list, hs: Lin):
    """M1: column sums T_s = sum_{p+q=s} a_p b_q over base-8 digits (+ the signed correction for
    MULHS: -2^32 (a31 b + b31 a) == 2^32 (a31 (~b + 1) + b31 (~a + 1)) mod 2^64, and 2^32 is 4
    in column 10). Returns the columns and each one's largest value."""
    dig = lambda X, p: sum(((1 << i) * X[3 * p + i] for i in range(3) if 3 * p + i < 32), Lin())
    tmax = [0] * COLUMNS
    for p_ in range(DIGITS):
        for q in range(DIGITS):
            if p_ + q < COLUMNS:
                tmax[p_ + q] += _digit_max(p_) * _digit_max(q)
    for q in range(DIGITS):
        tmax[10 + q] += 2 * 4 * _digit_max(q)
    tmax[10] += 2 * 4
    T = [hw.p.number_var(f"mT.{k}.{l}.{s}", 0, tmax[s]) for s in range(COLUMNS)]
    n1 = []
    for p_ in range(DIGITS):
        for q in range(DIGITS):
            if p_ + q < COLUMNS:
                n1 += n_product(dig(A, p_), dig(B, q), {T[p_ + q].feature(0): 1})
    for q in range(DIGITS):
        n1 += n_gated(hs + A[31] - 1, _digit_max(q) - dig(B, q), {T[10 + q].feature(0): 4})
        n1 += n_gated(hs + B[31] - 1, _digit_max(q) - dig(A, q), {T[10 + q].feature(0): 4})
    n1 += n_gated(hs + A[31] - 1, Lin.const(1), {T[10].feature(0): 4})
    n1 += n_gated(hs + B[31] - 1, Lin.const(1), {T[10].feature(0): 4})
    hw.circ(f"mul1.{k}.{l}", T, n1)
    return T, tmax


def carry_save(hw: Builder, k: int, l: int, T: list, tmax: list, tag: str = "m"):
    """M2: move multiples of 64 two columns up (U_s <= 63 + 8); M3: multiples of 8 one column
    up (V_s <= 7 + 9). Columns above the last are dropped (the product is taken mod 8^columns).
    `tag` names the variables (the float unit builds its own)."""
    U, umax = _carry_up(hw, T, tmax, 64, 2, f"{tag}U.{k}.{l}", f"{tag}ul2.{k}.{l}")
    return _carry_up(hw, U, umax, 8, 1, f"{tag}V.{k}.{l}", f"{tag}ul3.{k}.{l}")


def _carry_up(hw: Builder, src: list, smax: list, unit: int, shift: int, var: str, circuit: str):
    """One carry-save step: column s keeps src[s] mod `unit` and sends src[s] // unit to column
    s + `shift` (dropped past the last). Returns the new columns and their maxima."""
    columns = len(src)
    vmax = [unit - 1 + (smax[s - shift] // unit if s >= shift else 0) for s in range(columns)]
    V = [hw.p.number_var(f"{var}.{s}", 0, vmax[s]) for s in range(columns)]
    ns = []
    for s in range(columns):
        ns += n_linear(src[s].f(0), {V[s].feature(0): 1})
        for m in range(1, smax[s] // unit + 1):
            out = {V[s].feature(0): -unit}
            if s + shift < columns:
                out[V[s + shift].feature(0)] = 1
            ns += n_step(src[s].f(0), unit * m, out)
    hw.circ(circuit, V, ns)
    return V, vmax


def digit_bits(hw: Builder, k: int, l: int, V: list, vmax: list, nbits: int = 64, tag: str = "m"):
    """M4: the bits of each digit V_s (<= 16): bits 0-2 are X's, bits 3-4 are Y's (one column
    up); bits from `nbits` up are dropped."""
    X = hw.bits(f"{tag}X.{k}.{l}", nbits)
    Y = hw.bits(f"{tag}Y.{k}.{l}", nbits)
    n4 = []
    for s in range(len(V)):
        for v in range(1, vmax[s] + 1):
            for bit in range(5):
                d = ((v >> bit) & 1) - (((v - 1) >> bit) & 1)
                pos = 3 * s + bit
                if not d or pos >= nbits:
                    continue
                target = X if bit < 3 else Y
                n4 += n_step(V[s].f(0), v, {target.feature(pos): d})
    hw.circ(f"{tag}ul4.{k}.{l}", [X, Y], n4)
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
