"""Tests for qwengpu.semantics.floats: bit-exact PTX floating-point semantics.

Three kinds of check:
* fast path (numpy) == exact path (Python ints), on random and special bit patterns;
* exact path == an independent oracle: numpy binary32/binary64 for rn add/sub/mul/div/sqrt,
  and, for every rounding mode, exact Fraction arithmetic rounded by a small rounding helper
  written here (not shared with the module);
* hand-written cases with known NVIDIA results.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sizes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwengpu.semantics import floats as F

# `pytest --soak 50` multiplies the example counts for a long soak run (tests/sizes.py).
_SCALE = max(1, int(sizes.SOAK))
SETTINGS = settings(max_examples=100 * _SCALE, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=60 * _SCALE, deadline=None,
               suppress_health_check=[HealthCheck.too_slow])

MODES = ("rn", "rz", "rm", "rp")
IMODES = ("rni", "rzi", "rmi", "rpi")
LAYOUT = {16: (5, 10), 32: (8, 23), 64: (11, 52)}


def U(*xs):
    return np.array(xs, dtype=np.uint64)


def H(arr):
    return [int(v) for v in np.asarray(arr).ravel()]


def f32(x):
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def f64(x):
    return int(np.array([x], dtype=np.float64).view(np.uint64)[0])


def f16(x):
    return int(np.array([x], dtype=np.float16).view(np.uint16)[0])


# ----------------------------------------------------------------------------------------
# independent oracle: bits <-> Fraction, and rounding of a Fraction to a format

class L:
    def __init__(self, w):
        self.w = w
        self.eb, self.mb = LAYOUT[w]
        self.bias = 2 ** (self.eb - 1) - 1
        self.emin = 1 - self.bias
        self.emax = self.bias
        self.sign = 1 << (w - 1)
        self.inf = ((1 << self.eb) - 1) << self.mb
        self.maxfin = self.inf - 1
        self.cnan = {16: 0x7FFF, 32: 0x7FFFFFFF, 64: 0xFFF8000000000000}[w]


def odec(bits, w):
    """-> ('nan'|'inf'|'zero', sign) or ('num', Fraction)."""
    lay = L(w)
    s = bits >> (w - 1) & 1
    e = bits >> lay.mb & ((1 << lay.eb) - 1)
    m = bits & ((1 << lay.mb) - 1)
    if e == (1 << lay.eb) - 1:
        return ("nan" if m else "inf", s)
    if e == 0 and m == 0:
        return ("zero", s)
    if e == 0:
        v = Fraction(m) * Fraction(2) ** (lay.emin - lay.mb)
    else:
        v = Fraction(m + (1 << lay.mb)) * Fraction(2) ** (e - lay.bias - lay.mb)
    return ("num", -v if s else v)


def oround(x, w, mode):
    """Round a nonzero Fraction to format w (IEEE, gradual underflow)."""
    lay = L(w)
    neg = x < 0
    ax = -x if neg else x
    e = ax.numerator.bit_length() - ax.denominator.bit_length()
    while Fraction(2) ** e > ax:
        e -= 1
    while Fraction(2) ** (e + 1) <= ax:
        e += 1
    q = max(e, lay.emin) - lay.mb
    t = ax / Fraction(2) ** q
    fl = t.numerator // t.denominator
    rest = t - fl
    if mode == "rn":
        n = fl + (1 if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and fl % 2) else 0)
    elif mode == "rz":
        n = fl
    elif mode == "rm":
        n = fl + (1 if neg and rest else 0)
    else:
        n = fl + (1 if (not neg) and rest else 0)
    sbit = lay.sign if neg else 0
    v = n * Fraction(2) ** q
    if v >= Fraction(2) ** (lay.emax + 1):
        big = {"rn": True, "rz": False, "rm": neg, "rp": not neg}[mode]
        return sbit | (lay.inf if big else lay.maxfin)
    if n == 0:
        return sbit
    if v < Fraction(2) ** lay.emin:
        return sbit | int(v / Fraction(2) ** (lay.emin - lay.mb))
    e2 = e if v < Fraction(2) ** (e + 1) else e + 1
    frac = v / Fraction(2) ** e2 - 1
    return sbit | ((e2 + lay.bias) << lay.mb) | int(frac * 2 ** lay.mb)


def onan(w, *ops):
    lay = L(w)
    if w == 64:
        for o in ops:
            if odec(o, w)[0] == "nan":
                return o
    return lay.cnan


def oinf(w, s):
    return L(w).inf | (L(w).sign if s else 0)


def ozero(w, s):
    return L(w).sign if s else 0


def val(d):
    return Fraction(0) if d[0] == "zero" else d[1]


def o_fma(a, b, c, w, mode):
    da, db, dc = odec(a, w), odec(b, w), odec(c, w)
    if "nan" in (da[0], db[0], dc[0]):
        return onan(w, a, b, c)
    sa = da[1] < 0 if da[0] == "num" else da[1]
    sb = db[1] < 0 if db[0] == "num" else db[1]
    sc = dc[1] < 0 if dc[0] == "num" else dc[1]
    sp = bool(sa) ^ bool(sb)
    if da[0] == "inf" or db[0] == "inf":
        if da[0] == "zero" or db[0] == "zero":
            return L(w).cnan
        if dc[0] == "inf" and bool(sc) != sp:
            return L(w).cnan
        return oinf(w, sp)
    if dc[0] == "inf":
        return oinf(w, sc)
    x = val(da) * val(db) + val(dc)
    if x == 0:
        pz = da[0] == "zero" or db[0] == "zero"
        if pz and dc[0] == "zero" and sp == bool(sc):
            return ozero(w, sp)
        return ozero(w, mode == "rm")
    return oround(x, w, mode)


def o_add(a, b, w, mode, sub=False):
    lay = L(w)
    one = lay.bias << lay.mb
    db = odec(b, w)
    if db[0] == "nan":
        return onan(w, a, b)
    nb = b ^ lay.sign if sub else b
    r = o_fma(a, one, nb, w, mode)
    if odec(a, w)[0] == "nan":
        return onan(w, a, b)
    return r


def o_mul(a, b, w, mode):
    da, db = odec(a, w), odec(b, w)
    if "nan" in (da[0], db[0]):
        return onan(w, a, b)
    s = (da[1] < 0 if da[0] == "num" else da[1]) ^ (db[1] < 0 if db[0] == "num" else db[1])
    if "inf" in (da[0], db[0]):
        return L(w).cnan if "zero" in (da[0], db[0]) else oinf(w, s)
    x = val(da) * val(db)
    return ozero(w, s) if x == 0 else oround(x, w, mode)


def o_div(a, b, w, mode):
    da, db = odec(a, w), odec(b, w)
    if "nan" in (da[0], db[0]):
        return onan(w, a, b)
    s = (da[1] < 0 if da[0] == "num" else da[1]) ^ (db[1] < 0 if db[0] == "num" else db[1])
    if da[0] == "inf":
        return L(w).cnan if db[0] == "inf" else oinf(w, s)
    if db[0] == "inf":
        return ozero(w, s)
    if db[0] == "zero":
        return L(w).cnan if da[0] == "zero" else oinf(w, s)
    if da[0] == "zero":
        return ozero(w, s)
    return oround(val(da) / val(db), w, mode)


def flush(bits, w):
    lay = L(w)
    return bits & lay.sign if (bits & lay.inf) == 0 else bits


# ----------------------------------------------------------------------------------------
# strategies

def specials(w):
    lay = L(w)
    s = lay.sign
    one = lay.bias << lay.mb
    lst = [0, s, lay.inf, s | lay.inf, lay.inf | (1 << (lay.mb - 1)), lay.cnan,
           lay.inf | 1, s | lay.inf | 1, (1 << w) - 1, 1, s | 1, (1 << lay.mb) - 1,
           s | ((1 << lay.mb) - 1), 1 << lay.mb, s | (1 << lay.mb), lay.maxfin, s | lay.maxfin,
           one, s | one, one + 1, one - 1, s | (one + 1), 2 * one if w != 16 else 0x4000,
           (lay.bias - lay.mb - 1) << lay.mb, (lay.bias + lay.mb + 1) << lay.mb,
           (lay.bias + 1) << lay.mb | ((1 << lay.mb) - 1), 1 << (lay.mb - 1),
           lay.maxfin - 1, (lay.inf - (1 << lay.mb)) | 1]
    return [x & ((1 << w) - 1) for x in lst]


def fbits(w):
    lay = L(w)
    full = st.integers(0, (1 << w) - 1)
    near = st.builds(lambda s, e, m: (s << (w - 1)) | (e << lay.mb) | m,
                     st.integers(0, 1), st.integers(lay.bias - 3, lay.bias + 3),
                     st.one_of(st.integers(0, (1 << lay.mb) - 1),
                               st.sampled_from([0, 1, 2, 3, (1 << lay.mb) - 1,
                                                1 << (lay.mb - 1), (1 << (lay.mb - 1)) + 1])))
    edge = st.builds(lambda s, e, m: (s << (w - 1)) | (e << lay.mb) | m,
                     st.integers(0, 1),
                     st.sampled_from([0, 1, 2, lay.mb, (1 << lay.eb) - 3, (1 << lay.eb) - 2]),
                     st.integers(0, (1 << lay.mb) - 1))
    return st.one_of(full, st.sampled_from(specials(w)), near, edge)


@st.composite
def lanes(draw, w, k):
    """k operand arrays of equal length; a few lanes carry garbage above the width."""
    n = draw(st.integers(1, 6))
    arrs = []
    for _ in range(k):
        vals = []
        for _ in range(n):
            v = draw(fbits(w))
            if w < 64 and draw(st.integers(0, 7)) == 0:
                v |= draw(st.integers(1, (1 << (64 - w)) - 1)) << w
            vals.append(v)
        arrs.append(np.array(vals, dtype=np.uint64))
    return arrs


def low(arr, w):
    return [int(v) & ((1 << w) - 1) for v in arr]


def both_paths(fn, *args, **kw):
    fast = fn(*args, **kw)
    with F.exact_only():
        exact = fn(*args, **kw)
    assert H(fast) == H(exact), (H(fast), H(exact))
    return exact


def check_width(out, w):
    assert np.asarray(out).dtype == np.uint64
    assert all(v >> w == 0 for v in H(out))


WIDTH = st.sampled_from([16, 32, 64])
WIDTH_NO16 = st.sampled_from([32, 64])
MODE = st.sampled_from(MODES)


# ----------------------------------------------------------------------------------------
# arithmetic vs oracle, fast vs exact

@SETTINGS
@given(st.data())
def test_add_sub_mul(data):
    w = data.draw(WIDTH)
    mode = "rn" if w == 16 else data.draw(MODE)
    op = data.draw(st.sampled_from(["add", "sub", "mul"]))
    a, b = data.draw(lanes(w, 2))
    fn = {"add": F.fadd, "sub": F.fsub, "mul": F.fmul}[op]
    out = both_paths(fn, a, b, width=w, rnd=mode)
    check_width(out, w)
    for x, y, r in zip(low(a, w), low(b, w), H(out)):
        if op == "mul":
            want = o_mul(x, y, w, mode)
        else:
            want = o_add(x, y, w, mode, sub=op == "sub")
        assert r == want, (op, w, mode, hex(x), hex(y), hex(r), hex(want))


@SETTINGS
@given(st.data())
def test_fma(data):
    w = data.draw(WIDTH)
    mode = "rn" if w == 16 else data.draw(MODE)
    a, b, c = data.draw(lanes(w, 3))
    out = both_paths(F.ffma, a, b, c, width=w, rnd=mode)
    check_width(out, w)
    for x, y, z, r in zip(low(a, w), low(b, w), low(c, w), H(out)):
        want = o_fma(x, y, z, w, mode)
        assert r == want, (w, mode, hex(x), hex(y), hex(z), hex(r), hex(want))


@st.composite
def fma_near_ties(draw):
    """f32 triples whose exact a*b+c lies at or next to an f32 rounding boundary."""
    ma = draw(st.integers(1 << 23, (1 << 24) - 1))
    mb = draw(st.integers(1 << 23, (1 << 24) - 1))
    ea = draw(st.integers(-30, 30))
    eb = draw(st.integers(-30, 30))
    a = Fraction(ma) * Fraction(2) ** (ea - 23)
    b = Fraction(mb) * Fraction(2) ** (eb - 23)
    p = a * b
    # c cancels the top of the product, or is tiny (below the f32 ulp of p)
    kind = draw(st.sampled_from(["cancel", "tiny", "half"]))
    ep = p.numerator.bit_length() - p.denominator.bit_length()
    if kind == "cancel":
        c = -Fraction(round(p * 2 ** (23 - ep))) / 2 ** (23 - ep)
    elif kind == "tiny":
        c = Fraction(draw(st.integers(1 << 23, (1 << 24) - 1))) * \
            Fraction(2) ** (ep - 23 - draw(st.integers(25, 60)))
    else:
        c = Fraction(2) ** (ep - 24)
    if draw(st.booleans()):
        c = -c
    bits = [f32(float(v)) for v in (a, b, c)]
    return bits


@SETTINGS
@given(st.lists(fma_near_ties(), min_size=1, max_size=6))
def test_fma_f32_near_ties(triples):
    a, b, c = (np.array(col, dtype=np.uint64) for col in zip(*triples))
    for mode in MODES:
        out = both_paths(F.ffma, a, b, c, width=32, rnd=mode)
        for x, y, z, r in zip(H(a), H(b), H(c), H(out)):
            assert r == o_fma(x, y, z, 32, mode), (mode, hex(x), hex(y), hex(z))


@SETTINGS
@given(st.data())
def test_div_rcp(data):
    w = data.draw(WIDTH_NO16)
    mode = data.draw(MODE)
    a, b = data.draw(lanes(w, 2))
    out = both_paths(F.fdiv, a, b, width=w, rnd=mode)
    rc = both_paths(F.frcp, b, width=w, rnd=mode)
    check_width(out, w)
    one = L(w).bias << L(w).mb
    for x, y, r, q in zip(low(a, w), low(b, w), H(out), H(rc)):
        assert r == o_div(x, y, w, mode), (w, mode, hex(x), hex(y), hex(r))
        assert q == o_div(one, y, w, mode), (w, mode, hex(y), hex(q))


def next_up(bits, w):
    """Next representable value above a non-negative finite value."""
    return bits + 1


@SETTINGS
@given(st.data())
def test_sqrt(data):
    w = data.draw(WIDTH_NO16)
    mode = data.draw(MODE)
    (a,) = data.draw(lanes(w, 1))
    out = both_paths(F.fsqrt, a, width=w, rnd=mode)
    check_width(out, w)
    lay = L(w)
    for x, r in zip(low(a, w), H(out)):
        d = odec(x, w)
        if d[0] == "nan":
            assert r == onan(w, x)
        elif d[0] == "zero":
            assert r == x
        elif d[0] == "inf":
            assert r == (lay.inf if not d[1] else lay.cnan)
        elif d[1] < 0:
            assert r == lay.cnan
        else:
            # bracket check: r is a finite positive value, lo = r, hi = next value
            v = d[1]
            rv = odec(r, w)[1]
            up = odec(next_up(r, w), w)
            upv = up[1] if up[0] == "num" else None
            dn = odec(r - 1, w)
            dnv = dn[1] if dn[0] == "num" else Fraction(0)
            if mode in ("rz", "rm"):
                assert rv * rv <= v and (upv is None or upv * upv > v)
            elif mode == "rp":
                assert rv * rv >= v and dnv * dnv < v
            else:
                hi_mid = (rv + upv) / 2 if upv is not None else None
                lo_mid = (rv + dnv) / 2
                assert hi_mid is None or v <= hi_mid * hi_mid
                assert v >= lo_mid * lo_mid
                if hi_mid is not None and v == hi_mid * hi_mid:
                    assert r % 2 == 0
                if v == lo_mid * lo_mid:
                    assert r % 2 == 0


def _np_ref(op, x, y, w):
    dt = {32: np.float32, 64: np.float64}[w]
    ut = {32: np.uint32, 64: np.uint64}[w]
    fx = np.array(x, dtype=np.uint64).astype(ut).view(dt)
    fy = np.array(y, dtype=np.uint64).astype(ut).view(dt)
    with np.errstate(all="ignore"):
        r = {"add": fx + fy, "sub": fx - fy, "mul": fx * fy, "div": fx / fy,
             "sqrt": np.sqrt(fx)}[op]
    return r


@SETTINGS
@given(st.data())
def test_exact_path_matches_numpy_rn(data):
    w = data.draw(WIDTH_NO16)
    op = data.draw(st.sampled_from(["add", "sub", "mul", "div", "sqrt"]))
    a, b = data.draw(lanes(w, 2))
    with F.exact_only():
        if op == "sqrt":
            out = F.fsqrt(a, width=w, rnd="rn")
        else:
            out = {"add": F.fadd, "sub": F.fsub, "mul": F.fmul, "div": F.fdiv}[op](
                a, b, width=w, rnd="rn")
    ref = _np_ref(op, low(a, w), low(b, w), w)
    for r, f in zip(H(out), ref):
        if np.isnan(f):
            assert odec(r, w)[0] == "nan"
        else:
            assert r == int(np.array([f]).view({32: np.uint32, 64: np.uint64}[w])[0])


@SETTINGS
@given(st.data())
def test_ftz_sat(data):
    w = data.draw(st.sampled_from([16, 32]))
    op = data.draw(st.sampled_from(["add", "sub", "mul", "fma"]))
    mode = "rn" if w == 16 else data.draw(MODE)
    ftz = data.draw(st.booleans())
    sat = data.draw(st.booleans())
    a, b, c = data.draw(lanes(w, 3))
    if op == "fma":
        out = both_paths(F.ffma, a, b, c, width=w, rnd=mode, ftz=ftz, sat=sat)
    else:
        fn = {"add": F.fadd, "sub": F.fsub, "mul": F.fmul}[op]
        out = both_paths(fn, a, b, width=w, rnd=mode, ftz=ftz, sat=sat)
    lay = L(w)
    one = lay.bias << lay.mb
    for x, y, z, r in zip(low(a, w), low(b, w), low(c, w), H(out)):
        if ftz:
            x, y, z = flush(x, w), flush(y, w), flush(z, w)
        if op == "fma":
            want = o_fma(x, y, z, w, mode)
        elif op == "mul":
            want = o_mul(x, y, w, mode)
        else:
            want = o_add(x, y, w, mode, sub=op == "sub")
        if ftz:
            want = flush(want, w)
        if sat:
            d = odec(want, w)
            if d[0] == "nan" or want >> (w - 1):
                want = 0
            elif want > one:
                want = one
        assert r == want, (op, w, mode, ftz, sat, hex(x), hex(y), hex(z), hex(r), hex(want))


@FEW
@given(st.data())
def test_div_sqrt_ftz(data):
    mode = data.draw(MODE)
    a, b = data.draw(lanes(32, 2))
    out = both_paths(F.fdiv, a, b, width=32, rnd=mode, ftz=True)
    sq = both_paths(F.fsqrt, a, width=32, rnd=mode, ftz=True)
    for x, y, r, s in zip(low(a, 32), low(b, 32), H(out), H(sq)):
        assert r == flush(o_div(flush(x, 32), flush(y, 32), 32, mode), 32)
        fx = flush(x, 32)
        if odec(fx, 32)[0] == "zero":
            assert s == fx


# ----------------------------------------------------------------------------------------
# min / max / abs / neg / copysign / compare / testp

def okey(bits, w):
    d = odec(bits, w)
    if d[0] == "zero":
        return (Fraction(0), d[1] == 0)      # -0 < +0
    if d[0] == "inf":
        return (Fraction(10) ** 400 * (-1 if d[1] else 1), 0)
    return (d[1], 0)


@FEW
@given(st.data())
def test_min_max(data):
    w = data.draw(WIDTH)
    ftz = data.draw(st.booleans()) and w != 64
    nan = data.draw(st.booleans()) and w != 64
    a, b = data.draw(lanes(w, 2))
    mn = both_paths(F.fmin, a, b, width=w, ftz=ftz, nan=nan)
    mx = both_paths(F.fmax, a, b, width=w, ftz=ftz, nan=nan)
    lay = L(w)
    for x, y, r1, r2 in zip(low(a, w), low(b, w), H(mn), H(mx)):
        if ftz:
            x, y = flush(x, w), flush(y, w)
        xn, yn = odec(x, w)[0] == "nan", odec(y, w)[0] == "nan"
        if xn or yn:
            if nan:
                want_min = want_max = lay.cnan
            elif xn and yn:
                want_min = want_max = x if w == 64 else lay.cnan
            else:
                want_min = want_max = y if xn else x
        else:
            want_min = x if okey(x, w) < okey(y, w) else y
            want_max = x if okey(x, w) > okey(y, w) else y
        assert (r1, r2) == (want_min, want_max), (w, hex(x), hex(y), hex(r1), hex(r2))


@FEW
@given(st.data())
def test_abs_neg_copysign(data):
    w = data.draw(WIDTH)
    ftz = data.draw(st.booleans()) and w != 64
    a, b = data.draw(lanes(w, 2))
    ab = F.fabs(a, width=w, ftz=ftz)
    ng = F.fneg(a, width=w, ftz=ftz)
    lay = L(w)
    for x, r1, r2 in zip(low(a, w), H(ab), H(ng)):
        if ftz:
            x = flush(x, w)
        if odec(x, w)[0] == "nan":
            want = x if w == 64 else lay.cnan
            assert r1 == want and r2 == want
        else:
            assert r1 == x & ~lay.sign and r2 == x ^ lay.sign
    if w != 16:
        cs = F.fcopysign(a, b, width=w)
        for x, y, r in zip(low(a, w), low(b, w), H(cs)):
            assert r == (x & lay.sign) | (y & ~lay.sign & ((1 << w) - 1))


@FEW
@given(st.data())
def test_compare(data):
    w = data.draw(WIDTH)
    ftz = data.draw(st.booleans()) and w != 64
    a, b = data.draw(lanes(w, 2))
    for op in F.COMPARE_OPS:
        r = F.fcompare(op, a, b, width=w, ftz=ftz)
        assert r.dtype == bool
        for x, y, got in zip(low(a, w), low(b, w), r.tolist()):
            if ftz:
                x, y = flush(x, w), flush(y, w)
            dx, dy = odec(x, w), odec(y, w)
            unord = dx[0] == "nan" or dy[0] == "nan"
            if op == "num":
                want = not unord
            elif op == "nan":
                want = unord
            elif unord:
                want = op.endswith("u")
            else:
                vx, vy = okey(x, w)[0], okey(y, w)[0]
                want = {"eq": vx == vy, "ne": vx != vy, "lt": vx < vy, "le": vx <= vy,
                        "gt": vx > vy, "ge": vx >= vy}[op[:2]]
            assert got == want, (op, hex(x), hex(y))


@FEW
@given(st.data())
def test_testp(data):
    w = data.draw(WIDTH_NO16)
    (a,) = data.draw(lanes(w, 1))
    for x in low(a, w):
        d = odec(x, w)
        lay = L(w)
        sub = d[0] == "num" and (x & lay.inf) == 0
        want = {"finite": d[0] in ("num", "zero"), "infinite": d[0] == "inf",
                "number": d[0] != "nan", "notanumber": d[0] == "nan",
                "normal": d[0] == "zero" or (d[0] == "num" and not sub), "subnormal": sub}
        for op, wv in want.items():
            assert bool(F.ftestp(op, U(x), width=w)[0]) == wv, (op, hex(x))


# ----------------------------------------------------------------------------------------
# cvt

def o_cvt_f2f(x, dw, sw, mode, ftz):
    if ftz and sw == 32:
        x = flush(x, sw)
    d = odec(x, sw)
    if d[0] == "nan":
        if dw != 64:
            out = L(dw).cnan
        else:
            sl = L(sw)
            out = (x >> (sw - 1) << 63) | 0x7FF0000000000000 | \
                  ((x & ((1 << sl.mb) - 1)) << (52 - sl.mb))
    elif d[0] == "inf":
        out = oinf(dw, d[1])
    elif d[0] == "zero":
        out = ozero(dw, d[1])
    else:
        out = oround(d[1], dw, mode)
    if ftz and dw == 32:
        out = flush(out, dw)
    return out


def o_int_round(v, irnd):
    fl = math.floor(v)
    rest = v - fl
    if irnd == "rzi":
        return math.trunc(v)
    if irnd == "rmi":
        return fl
    if irnd == "rpi":
        return math.ceil(v)
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and fl % 2):
        return fl + 1
    return fl


@SETTINGS
@given(st.data())
def test_cvt_float_float(data):
    sw = data.draw(WIDTH)
    dw = data.draw(WIDTH)
    ftz = data.draw(st.booleans()) and 32 in (sw, dw)
    sat = data.draw(st.booleans())
    (a,) = data.draw(lanes(sw, 1))
    dt, stp = f"f{dw}", f"f{sw}"
    if dw == sw:
        irnd = data.draw(st.sampled_from(IMODES))
        out = both_paths(F.cvt, a, dt, stp, rnd=irnd, ftz=ftz, sat=sat)
        for x, r in zip(low(a, sw), H(out)):
            if ftz and sw == 32:
                x = flush(x, sw)
            d = odec(x, sw)
            if d[0] == "nan":
                want = x if sw == 64 else L(sw).cnan
            elif d[0] in ("zero", "inf"):
                want = x
            else:
                n = o_int_round(d[1], irnd)
                want = ozero(sw, d[1] < 0) if n == 0 else oround(Fraction(n), sw, "rn")
            if sat:
                want = _osat(want, sw)
            assert r == want, (irnd, hex(x), hex(r), hex(want))
        return
    mode = data.draw(MODE) if dw < sw else None
    out = both_paths(F.cvt, a, dt, stp, rnd=mode, ftz=ftz, sat=sat)
    check_width(out, dw)
    for x, r in zip(low(a, sw), H(out)):
        want = o_cvt_f2f(x, dw, sw, mode or "rn", ftz)
        if sat:
            want = _osat(want, dw)
        assert r == want, (dt, stp, mode, ftz, sat, hex(x), hex(r), hex(want))


def _osat(bits, w):
    lay = L(w)
    one = lay.bias << lay.mb
    if odec(bits, w)[0] == "nan" or bits >> (w - 1):
        return 0
    return min(bits, one)


INT_T = ["u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"]


def _irange(t):
    w = int(t[1:])
    return (-(1 << (w - 1)), (1 << (w - 1)) - 1) if t[0] == "s" else (0, (1 << w) - 1)


@SETTINGS
@given(st.data())
def test_cvt_float_int(data):
    sw = data.draw(WIDTH)
    dt = data.draw(st.sampled_from(INT_T))
    irnd = data.draw(st.sampled_from(IMODES))
    ftz = data.draw(st.booleans()) and sw == 32
    (a,) = data.draw(lanes(sw, 1))
    out = both_paths(F.cvt, a, dt, f"f{sw}", rnd=irnd, ftz=ftz)
    dw = int(dt[1:])
    lo, hi = _irange(dt)
    check_width(out, dw)
    for x, r in zip(low(a, sw), H(out)):
        if ftz:
            x = flush(x, sw)
        d = odec(x, sw)
        if d[0] == "nan":
            want = (1 << (dw - 1)) if (sw == 64 or dw == 64) else 0
        elif d[0] == "inf":
            want = (lo if d[1] else hi) & ((1 << dw) - 1)
        elif d[0] == "zero":
            want = 0
        else:
            want = min(max(o_int_round(d[1], irnd), lo), hi) & ((1 << dw) - 1)
        assert r == want, (dt, sw, irnd, hex(x), hex(r), hex(want))


def ints(t):
    w = int(t[1:])
    return st.one_of(st.integers(0, (1 << w) - 1),
                     st.sampled_from([0, 1, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1,
                                      (1 << min(w, 24)) + 1, (1 << min(w, 53)) + 1,
                                      (1 << (w - 1)) + 1]),
                     st.integers(0, (1 << w) - 1).map(lambda v: v | (1 << (w - 1)))
                     ).map(lambda v: v & ((1 << w) - 1))


@SETTINGS
@given(st.data())
def test_cvt_int_float(data):
    st_ = data.draw(st.sampled_from(INT_T))
    dw = data.draw(WIDTH)
    mode = data.draw(MODE)
    ftz = data.draw(st.booleans()) and dw == 32
    sat = data.draw(st.booleans())
    sw = int(st_[1:])
    vals = data.draw(st.lists(ints(st_), min_size=1, max_size=6))
    garb = [v | ((data.draw(st.integers(0, 255)) << sw) if sw < 64 else 0) for v in vals]
    out = both_paths(F.cvt, np.array(garb, dtype=np.uint64), f"f{dw}", st_, rnd=mode,
                     ftz=ftz, sat=sat)
    for x, r in zip(vals, H(out)):
        v = x - (1 << sw) if st_[0] == "s" and x >> (sw - 1) else x
        want = 0 if v == 0 else oround(Fraction(v), dw, mode)
        if sat:
            want = _osat(want, dw)
        assert r == want, (st_, dw, mode, x, hex(r), hex(want))


@SETTINGS
@given(st.data())
def test_cvt_int_int(data):
    st_ = data.draw(st.sampled_from(INT_T + ["b32"]))
    dt = data.draw(st.sampled_from(INT_T + ["b16"]))
    sw = int(st_[1:])
    dw = int(dt[1:])
    slo, shi = _irange(st_ if st_[0] != "b" else "u" + st_[1:])
    dlo, dhi = _irange(dt if dt[0] != "b" else "u" + dt[1:])
    sat_ok = not (dlo <= slo and shi <= dhi)
    sat = data.draw(st.booleans())
    vals = data.draw(st.lists(ints(st_), min_size=1, max_size=6))
    arr = np.array([v | (((0xAB << sw) & ((1 << 64) - 1)) if sw < 64 else 0) for v in vals],
                   dtype=np.uint64)
    if sat and not sat_ok:
        with pytest.raises(F.UnsupportedFloatOp):
            F.cvt(arr, dt, st_, sat=True)
        return
    out = both_paths(F.cvt, arr, dt, st_, sat=sat)
    check_width(out, dw)
    for x, r in zip(vals, H(out)):
        v = x - (1 << sw) if st_[0] == "s" and x >> (sw - 1) else x
        if sat:
            v = min(max(v, dlo), dhi)
        assert r == v & ((1 << dw) - 1), (dt, st_, sat, x, r)


# ----------------------------------------------------------------------------------------
# hand-written cases with known hardware results

def test_fma_known():
    a, b, c = 0x3F800001, 0x3F7FFFFE, 0xBF800000          # (1+2^-23)(1-2^-23) - 1
    assert H(F.ffma(U(a), U(b), U(c))) == [f32(-(2.0 ** -46))] == [0xA8800000]
    with F.exact_only():
        assert H(F.ffma(U(a), U(b), U(c))) == [0xA8800000]
    # double rounding trap: (1+2^-12)^2 + 2^-80 is just above an f32 midpoint
    a = f32(1 + 2.0 ** -12)
    t = f32(2.0 ** -80)
    assert H(F.ffma(U(a, a), U(a, a), U(t, t ^ 0x80000000))) == [0x3F801001, 0x3F801000]
    # ... the naive f64 product+sum then f32 rounding would give 0x3F801000 for the first
    naive = np.float32(np.float64(1 + 2.0 ** -12) ** 2 + 2.0 ** -80)
    assert int(np.array([naive]).view(np.uint32)[0]) == 0x3F801000
    # f64: fma(1+2^-52, 1-2^-52, -1) = -2^-104
    assert H(F.ffma(U(f64(1 + 2.0 ** -52)), U(f64(1 - 2.0 ** -52)), U(f64(-1.0)),
                    width=64)) == [f64(-(2.0 ** -104))]


def test_nan_rules():
    inf, zero = 0x7F800000, 0
    assert H(F.fmul(U(zero, 0x80000000), U(inf, inf))) == [0x7FFFFFFF] * 2
    assert H(F.fadd(U(inf), U(0xFF800000))) == [0x7FFFFFFF]
    assert H(F.fadd(U(0xFFC01234), U(f32(1.0)))) == [0x7FFFFFFF]       # payload dropped
    assert H(F.ffma(U(zero), U(inf), U(f32(1.0)))) == [0x7FFFFFFF]
    assert H(F.fsqrt(U(f32(-1.0)))) == [0x7FFFFFFF]
    assert H(F.fdiv(U(zero), U(zero))) == [0x7FFFFFFF]
    # f16 canonical NaN
    assert H(F.fmul(U(0), U(0x7C00), width=16)) == [0x7FFF]
    # f64: payloads propagate, generated NaN is the f64 default NaN
    p = 0x7FF0000000001234
    assert H(F.fadd(U(p), U(f64(1.0)), width=64)) == [p]
    assert H(F.fadd(U(f64(1.0)), U(0xFFF8000000000042), width=64)) == [0xFFF8000000000042]
    assert H(F.fmul(U(0), U(0x7FF0000000000000), width=64)) == [F.F64_CANONICAL_NAN]
    assert H(F.fsub(U(0x7FF0000000000000), U(0x7FF0000000000000), width=64)) == \
        [F.F64_CANONICAL_NAN]
    assert H(F.fsqrt(U(f64(-2.0)), width=64)) == [F.F64_CANONICAL_NAN]
    assert H(F.ffma(U(p), U(0x7FF8000000000007), U(f64(1.0)), width=64)) == [p]


def test_zero_signs_per_mode():
    x = f32(1.5)
    nx = x ^ 0x80000000
    want = {"rn": 0, "rz": 0, "rm": 0x80000000, "rp": 0}
    for m, z in want.items():
        assert H(F.fadd(U(x), U(nx), rnd=m)) == [z], m
        assert H(F.fsub(U(x), U(x), rnd=m)) == [z], m
        assert H(F.ffma(U(f32(1.0)), U(x), U(nx), rnd=m)) == [z], m
        assert H(F.fadd(U(0x80000000), U(0x80000000), rnd=m)) == [0x80000000]
        assert H(F.fadd(U(0x80000000), U(0), rnd=m)) == [z]
        # exact zero product plus zero keeps the common sign
        assert H(F.ffma(U(0x80000000), U(x), U(0x80000000), rnd=m)) == [0x80000000]
    assert H(F.fadd(U(f64(2.0)), U(f64(-2.0)), width=64, rnd="rm")) == [1 << 63]


def test_min_max_known():
    nan = 0x7FC00000
    one = f32(1.0)
    assert H(F.fmin(U(nan, one), U(one, nan))) == [one, one]
    assert H(F.fmax(U(nan, one), U(one, nan))) == [one, one]
    assert H(F.fmin(U(0x80000000, 0), U(0, 0x80000000))) == [0x80000000, 0x80000000]
    assert H(F.fmax(U(0x80000000, 0), U(0, 0x80000000))) == [0, 0]
    assert H(F.fmin(U(nan), U(one), nan=True)) == [0x7FFFFFFF]
    assert H(F.fmin(U(nan), U(0xFFC00001))) == [0x7FFFFFFF]
    assert H(F.fmin(U(0x0000_0001), U(0x8000_0000), ftz=True)) == [0x80000000]
    assert H(F.fmax(U(f16(-2.0)), U(f16(3.0)), width=16)) == [f16(3.0)]
    assert H(F.fmin(U(0x7E00), U(0x7C01), width=16)) == [0x7FFF]
    assert H(F.fmin(U(f64(-0.0)), U(f64(0.0)), width=64)) == [f64(-0.0)]


def test_cvt_known():
    c = F.cvt
    assert H(c(U(f32(1e20)), "s32", "f32", rnd="rzi")) == [0x7FFFFFFF]
    assert H(c(U(f32(-1e20)), "s32", "f32", rnd="rzi")) == [0x80000000]
    assert H(c(U(0x7FC00000), "s32", "f32", rnd="rzi")) == [0]
    assert H(c(U(0x7FC00000), "u16", "f32", rnd="rni")) == [0]
    assert H(c(U(0x7FC00000), "s64", "f32", rnd="rzi")) == [1 << 63]
    assert H(c(U(0x7FF8000000000000), "s32", "f64", rnd="rzi")) == [0x80000000]
    assert H(c(U(0x7FF8000000000000), "u64", "f64", rnd="rzi")) == [1 << 63]
    assert H(c(U(f32(2.5), f32(3.5), f32(-2.5), f32(0.5)), "s32", "f32", rnd="rni")) == \
        [2, 4, (-2) & 0xFFFFFFFF, 0]
    assert H(c(U(f32(-1.5)), "u32", "f32", rnd="rni")) == [0]
    assert H(c(U(f32(-0.75)), "s32", "f32", rnd="rmi")) == [0xFFFFFFFF]
    assert H(c(U(f32(-0.75)), "s32", "f32", rnd="rpi")) == [0]
    assert H(c(U(f32(1e10)), "u32", "f32", rnd="rzi")) == [0xFFFFFFFF]
    assert H(c(U(0xFF800000), "u8", "f32", rnd="rzi")) == [0]
    assert H(c(U(0x7F800000), "s8", "f32", rnd="rzi")) == [0x7F]
    assert H(c(U(16777217), "f32", "s32", rnd="rn")) == [f32(16777216.0)]
    assert H(c(U(0xFFFFFFFF), "f32", "u32", rnd="rz")) == [f32(4294967040.0)]
    assert H(c(U(0xFFFFFFFF), "f32", "u32", rnd="rn")) == [f32(4294967296.0)]
    assert H(c(U(0xFFFFFFFF), "f32", "s32", rnd="rn")) == [f32(-1.0)]
    assert H(c(U((1 << 64) - 1), "f64", "u64", rnd="rz")) == [f64(2.0 ** 64 - 2048)]
    assert H(c(U(f32(1e6)), "f16", "f32", rnd="rn")) == [0x7C00]
    assert H(c(U(f32(1e6)), "f16", "f32", rnd="rz")) == [0x7BFF]
    assert H(c(U(f32(65520.0)), "f16", "f32", rnd="rn")) == [0x7C00]
    assert H(c(U(f32(65519.0)), "f16", "f32", rnd="rn")) == [0x7BFF]
    assert H(c(U(f32(-1e6)), "f16", "f32", rnd="rm")) == [0xFC00]
    assert H(c(U(f32(-1e6)), "f16", "f32", rnd="rp")) == [0xFBFF]
    assert H(c(U(0x7FC00000), "f16", "f32", rnd="rn")) == [0x7FFF]
    assert H(c(U(0x7E00), "f32", "f16")) == [0x7FFFFFFF]
    assert H(c(U(f16(1.5)), "f32", "f16")) == [f32(1.5)]
    assert H(c(U(1), "f32", "f16")) == [f32(2.0 ** -24)]            # f16 subnormal widens
    assert H(c(U(f64(1e300)), "f32", "f64", rnd="rn")) == [0x7F800000]
    assert H(c(U(f64(1e300)), "f32", "f64", rnd="rz")) == [0x7F7FFFFF]
    assert H(c(U(f64(1e-50)), "f32", "f64", rnd="rp")) == [1]
    assert H(c(U(f64(1e-50)), "f32", "f64", rnd="rp", ftz=True)) == [0]
    assert H(c(U(f32(1.0) + 1), "f64", "f32")) == [f64(1.0 + 2.0 ** -23)]
    assert H(c(U(1), "f64", "f32", ftz=True)) == [0]
    assert H(c(U(0x80000001), "f64", "f32")) == [f64(-(2.0 ** -149))]
    # round to integral in place
    assert H(c(U(f32(2.5), f32(-0.3), f32(1e30), 0x7FC00000), "f32", "f32", rnd="rni")) == \
        [f32(2.0), 0x80000000, f32(1e30), 0x7FFFFFFF]
    assert H(c(U(0x80000001), "f32", "f32", rnd="rmi")) == [f32(-1.0)]
    assert H(c(U(0x80000001), "f32", "f32", rnd="rmi", ftz=True)) == [0x80000000]
    assert H(c(U(f64(-2.5)), "f64", "f64", rnd="rpi")) == [f64(-2.0)]
    assert H(c(U(f16(2.5)), "f16", "f16", rnd="rzi")) == [f16(2.0)]
    # .sat on float destinations
    assert H(c(U(f32(3.0), f32(-3.0), 0x7FC00000, 0x80000000, f32(0.25)), "f32", "f32",
               sat=True)) == [f32(1.0), 0, 0, 0, f32(0.25)]
    assert H(c(U(5), "f32", "s32", rnd="rn", sat=True)) == [f32(1.0)]
    # int <-> int
    assert H(c(U(0xFF), "u32", "s8")) == [0xFFFFFFFF]
    assert H(c(U(0xFF), "s32", "u8")) == [0xFF]
    assert H(c(U(200), "s8", "s32")) == [0xC8]
    assert H(c(U(300, (-500) & 0xFFFFFFFF, (-5) & 0xFFFFFFFF), "s8", "s32", sat=True)) == \
        [0x7F, 0x80, 0xFB]
    assert H(c(U((-5) & 0xFFFFFFFF), "u8", "s32", sat=True)) == [0]
    assert H(c(U(0xFFFFFFFF), "s32", "u32", sat=True)) == [0x7FFFFFFF]
    assert H(c(U(0xDEADBEEF00000080), "s64", "s8")) == [0xFFFFFFFFFFFFFF80]
    assert H(c(U(0xDEADBEEF00000080), "u64", "u32")) == [0x80]
    assert H(c(U((1 << 64) - 1), "u32", "s64", sat=True)) == [0]
    assert H(c(U(1 << 63), "s64", "u64", sat=True)) == [(1 << 63) - 1]


def test_ftz_and_sat_known():
    sub = 0x00000005
    nsub = 0x80000005
    assert H(F.fadd(U(sub, nsub), U(0, 0))) == [sub, nsub]
    assert H(F.fadd(U(sub, nsub), U(0, 0), ftz=True)) == [0, 0]    # -0 + +0 = +0 (rn)
    assert H(F.fadd(U(nsub), U(0x80000000), ftz=True)) == [0x80000000]
    tiny = f32(2.0 ** -80)
    assert H(F.fmul(U(tiny), U(tiny ^ 0x80000000))) == [0x80000000]  # underflow to -0
    small = f32(2.0 ** -63)
    assert H(F.fmul(U(small), U(small), ftz=True)) == [0x00800000]     # 2^-126 is normal
    assert H(F.fmul(U(f32(2.0 ** -100)), U(f32(2.0 ** -30)))) == [0x00080000]   # 2^-130
    assert H(F.fmul(U(f32(-(2.0 ** -100))), U(f32(2.0 ** -30)), ftz=True)) == [0x80000000]
    # a result that rounds up to the smallest normal is not flushed
    x = f32(1.0 - 2.0 ** -24)
    assert H(F.fmul(U(x), U(f32(2.0 ** -126)), ftz=True, rnd="rp")) == [0x00800000]
    assert H(F.fmul(U(x), U(f32(2.0 ** -126)), ftz=True, rnd="rz")) == [0]
    assert H(F.fadd(U(f32(0.5)), U(f32(0.75)), sat=True)) == [f32(1.0)]
    assert H(F.fadd(U(f32(-2.0)), U(f32(1.0)), sat=True)) == [0]
    assert H(F.fmul(U(0), U(0x7F800000), sat=True)) == [0]
    assert H(F.fmul(U(0x80000000), U(f32(1.0)), sat=True)) == [0]
    assert H(F.ffma(U(f32(0.5)), U(f32(0.5)), U(f32(0.25)), sat=True)) == [f32(0.5)]
    assert H(F.fadd(U(f16(0.75)), U(f16(0.75)), width=16, sat=True)) == [f16(1.0)]
    assert H(F.fabs(U(nsub), ftz=True)) == [0]
    assert H(F.fneg(U(sub), ftz=True)) == [0x80000000]
    assert H(F.fdiv(U(f32(1.0)), U(f32(2.0 ** 127)), ftz=True)) == [0]
    assert H(F.fdiv(U(f32(1.0)), U(f32(2.0 ** 127)))) == [0x00400000]
    assert H(F.frcp(U(sub), ftz=True)) == [0x7F800000]
    assert H(F.frcp(U(nsub), ftz=True)) == [0xFF800000]


def test_compare_known():
    nan = 0x7FC00000
    one = f32(1.0)
    assert F.fcompare("ne", U(nan), U(one)).tolist() == [False]
    assert F.fcompare("neu", U(nan), U(one)).tolist() == [True]
    assert F.fcompare("eq", U(nan), U(nan)).tolist() == [False]
    assert F.fcompare("equ", U(nan), U(nan)).tolist() == [True]
    assert F.fcompare("eq", U(0x80000000), U(0)).tolist() == [True]
    assert F.fcompare("lt", U(0x80000000), U(0)).tolist() == [False]
    assert F.fcompare("eq", U(1), U(0)).tolist() == [False]
    assert F.fcompare("eq", U(1), U(0x80000000), ftz=True).tolist() == [True]
    assert F.fcompare("num", U(one, nan), U(one, one)).tolist() == [True, False]
    assert F.fcompare("nan", U(one, nan), U(one, one)).tolist() == [False, True]
    assert F.fcompare("gt", U(0x7F800000), U(0x7F7FFFFF)).tolist() == [True]
    assert F.fcompare("lt", U(f64(-1.0)), U(f64(2.0)), width=64).tolist() == [True]


def test_testp_known():
    vals = U(0, 0x80000000, 1, 0x7F800000, 0x7FC00000, f32(1.0))
    assert F.ftestp("normal", vals).tolist() == [True, True, False, False, False, True]
    assert F.ftestp("subnormal", vals).tolist() == [False, False, True, False, False, False]
    assert F.ftestp("finite", vals).tolist() == [True, True, True, False, False, True]
    assert F.ftestp("infinite", vals).tolist() == [False, False, False, True, False, False]
    assert F.ftestp("notanumber", vals).tolist() == [False] * 4 + [True, False]
    assert F.ftestp("number", vals).tolist() == [True] * 4 + [False, True]


def test_copysign_operand_order():
    # PTX: copysign d, a, b copies the sign of a onto b
    assert H(F.fcopysign(U(f32(-1.0)), U(f32(2.0)))) == [f32(-2.0)]
    assert H(F.fcopysign(U(f32(1.0)), U(f32(-2.0)))) == [f32(2.0)]
    assert H(F.fcopysign(U(f64(-0.0)), U(0x7FF8000000000001), width=64)) == \
        [0xFFF8000000000001]


def test_abs_neg_nan():
    assert H(F.fabs(U(0xFFC00001))) == [0x7FFFFFFF]
    assert H(F.fneg(U(0x7FC00001))) == [0x7FFFFFFF]
    assert H(F.fabs(U(0xFFF0000000000001), width=64)) == [0xFFF0000000000001]
    assert H(F.fneg(U(0x7FF0000000000001), width=64)) == [0x7FF0000000000001]
    assert H(F.fneg(U(f64(2.0)), width=64)) == [f64(-2.0)]
    assert H(F.fabs(U(f16(-2.0)), width=16)) == [f16(2.0)]


def test_rcp_sqrt_specials():
    assert H(F.frcp(U(0, 0x80000000, 0x7F800000, 0xFF800000))) == \
        [0x7F800000, 0xFF800000, 0, 0x80000000]
    assert H(F.fsqrt(U(0x80000000, 0, 0x7F800000, 0xFF800000))) == \
        [0x80000000, 0, 0x7F800000, 0x7FFFFFFF]
    assert H(F.fsqrt(U(f32(2.0)), rnd="rz")) == [0x3FB504F3]
    assert H(F.fsqrt(U(f32(2.0)), rnd="rp")) == [0x3FB504F4]
    assert H(F.fdiv(U(f32(1.0)), U(f32(3.0)), rnd="rz")) == [0x3EAAAAAA]
    assert H(F.fdiv(U(f32(1.0)), U(f32(3.0)), rnd="rn")) == [0x3EAAAAAB]
    assert H(F.fdiv(U(f32(-1.0)), U(f32(3.0)), rnd="rm")) == [0xBEAAAAAB]
    assert H(F.fadd(U(0x7F7FFFFF), U(0x7F7FFFFF), rnd="rz")) == [0x7F7FFFFF]
    assert H(F.fadd(U(0x7F7FFFFF), U(0x7F7FFFFF), rnd="rm")) == [0x7F7FFFFF]
    assert H(F.fadd(U(0xFF7FFFFF), U(0xFF7FFFFF), rnd="rm")) == [0xFF800000]
    assert H(F.fadd(U(0xFF7FFFFF), U(0xFF7FFFFF), rnd="rp")) == [0xFF7FFFFF]


def test_masking_and_shapes():
    g = 0xDEADBEEF << 32
    a = U(g | f32(1.5), g | f32(-2.0))
    b = U(f32(2.0), g | f32(0.25))
    assert H(F.fadd(a, b)) == [f32(3.5), f32(-1.75)]
    assert H(F.fadd(a, f32(1.0))) == [f32(2.5), f32(-1.0)]        # scalar broadcast
    r = F.fmul(U(0xFFFF0000 | f16(1.5)), U(f16(2.0)), width=16)
    assert H(r) == [f16(3.0)]
    assert F.fadd(a, b).dtype == np.uint64
    with pytest.raises(TypeError):
        F.fadd(np.array([1.5], dtype=np.float32), b[:1])         # values, not bits
    assert H(F.fadd([f32(1.0)], [f32(2.0)])) == [f32(3.0)]       # plain lists work


def test_fast_paths_active():
    # the host FPU must not flush subnormals, or numpy fast paths are (safely) disabled
    from qwengpu.semantics.float_exact import fast_paths_on
    assert fast_paths_on()
    with F.exact_only():
        assert not fast_paths_on()


def test_rejects_illegal_combinations():
    E = F.UnsupportedFloatOp
    one = U(f32(1.0))
    with pytest.raises(E):
        F.cvt(one, "f32", "s32")                         # int->float needs .rn etc
    with pytest.raises(E):
        F.cvt(one, "s32", "f32")                         # float->int needs .rni etc
    with pytest.raises(E):
        F.cvt(one, "s32", "f32", rnd="rn")
    with pytest.raises(E):
        F.cvt(one, "f32", "s32", rnd="rni")
    with pytest.raises(E):
        F.cvt(one, "f16", "f32")                         # narrowing needs a rounding
    with pytest.raises(E):
        F.cvt(one, "f64", "f32", rnd="rn")               # widening takes none
    with pytest.raises(E):
        F.cvt(one, "f32", "f32", rnd="rn")
    with pytest.raises(E):
        F.cvt(one, "s32", "s16", sat=True)               # saturation impossible
    with pytest.raises(E):
        F.cvt(one, "u32", "s32", rnd="rn")
    with pytest.raises(E):
        F.cvt(one, "f64", "f16", ftz=True)               # .ftz needs an .f32 side
    with pytest.raises(E):
        F.cvt(one, "bf16", "f32", rnd="rn")
    with pytest.raises(E):
        F.fadd(one, one, width=64, ftz=True)
    with pytest.raises(E):
        F.fmul(one, one, width=64, sat=True)
    with pytest.raises(E):
        F.fadd(one, one, width=16, rnd="rz")
    with pytest.raises(E):
        F.fdiv(one, one, width=16)
    with pytest.raises(E):
        F.ffma(one, one, one, rnd=None)
    with pytest.raises(E):
        F.fdiv(one, one, rnd=None)
    with pytest.raises(E):
        F.fadd(one, one, rnd="rna")
    with pytest.raises(E):
        F.fmin(one, one, width=64, nan=True)
    with pytest.raises(E):
        F.fcompare("lg", one, one)
    with pytest.raises(E):
        F.ftestp("zero", one)
    with pytest.raises(E):
        F.fadd(one, one, width=8)
    assert issubclass(E, ValueError)
    # add/sub/mul default to .rn when no modifier is given
    assert H(F.fadd(one, one, rnd=None)) == [f32(2.0)]


def test_no_approx_ops_exported():
    for name in ("ex2", "lg2", "sin", "cos", "rsqrt", "tanh", "fex2", "flg2", "fsin", "fcos",
                 "frsqrt", "div_approx", "rcp_approx"):
        assert not hasattr(F, name)
