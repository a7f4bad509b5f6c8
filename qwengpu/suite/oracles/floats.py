"""Oracles of the float kernels: f32 and f64 arithmetic, rounding modes, min/max with NaN, conversions."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._fp import canon, float_to_int, fma, int_to_float, round_op, sqrt_round
from .common import fmax, fmin, ints, oracle, u32


@oracle("f32_arith", tags={"float", "ci"}, about="f32 add/sub/mul/div (rn), neg, abs; subnormals, inf, signed zero")
def f32_arith(a, b, out):
    out = out.copy()
    with np.errstate(all="ignore"):
        for i, (x, y) in enumerate(zip(a, b)):
            out[6 * i:6 * i + 6] = [canon(x + y), canon(x - y), canon(x * y), canon(x / y), -x, abs(y)]
    return [a, b, out]


@oracle("div_loop", tags={"float", "loop", "grid"},
        about="y = x / d in a grid-stride loop, d a parameter (hoisted before the loop); zeros, subnormal, inf, NaN, overflow")
def div_loop(n, d, x, y):
    y = y.copy()
    with np.errstate(all="ignore"):
        for i in range(int(n)):
            y[i] = canon(np.float32(x[i]) / np.float32(d))
    return [None, None, x, y]


@oracle("f32_sqrt_fma", tags={"float", "ci"}, about="sqrtf, fmaf, contracted a*b+c, separately rounded mul+add")
def f32_sqrt_fma(a, b, c, out):
    out = out.copy()
    with np.errstate(all="ignore"):
        for i, (x, y, z) in enumerate(zip(a, b, c)):
            out[5 * i:5 * i + 5] = [canon(np.sqrt(abs(x))), fma(x, y, z), fma(x, y, z), canon((x * y) + z),
                                    canon(np.sqrt(x))]
    return [a, b, c, out]


@oracle("f32_minmax_nan", tags={"float", "ci"}, about="fminf/fmaxf with NaN, isnan/isinf/isfinite, ordered/unordered compares")
def f32_minmax_nan(a, b, fout, flags):
    fout, flags = fout.copy(), flags.copy()
    for i, (x, y) in enumerate(zip(a, b)):
        fout[3 * i:3 * i + 3] = [fmin(x, y), fmax(x, y), x if x > y else y]
        f = 0
        f |= 1 if np.isnan(x) else 0
        f |= 2 if np.isinf(y) else 0
        f |= 4 if np.isfinite(x) else 0
        f |= 8 if x < y else 0
        f |= 16 if x == y else 0
        f |= 32 if x != y else 0
        f |= 64 if not (x >= y) else 0
        f |= 128 if x <= y else 0
        flags[i] = f
    return [a, b, fout, flags]


@oracle("f2i_convert", tags={"convert", "float", "int64"},
        about="float->int with rn/rz/rd/ru, saturation, NaN -> 0 (s32/u32) and INT64_MIN (s64)")
def f2i_convert(a, s, u, l):
    s, u, l = s.copy(), u.copy(), l.copy()
    for i, x in enumerate(a):
        s[5 * i:5 * i + 5] = [float_to_int(x, m, 32, True) for m in ("rni", "rzi", "rmi", "rpi", "rzi")]
        u[3 * i:3 * i + 3] = [float_to_int(x, m, 32, False) for m in ("rmi", "rpi", "rni")]
        l[i] = float_to_int(x, "rni", 64, True)
    return [a, s, u, l]


@oracle("i2f_convert", tags={"convert", "float", "int64", "ci"}, about="int/uint/long long -> float with rn/rz/rm/rp")
def i2f_convert(a, b, out):
    out = out.copy()
    for i, (x, y) in enumerate(zip(ints(a), ints(b))):
        out[8 * i:8 * i + 8] = [int_to_float(x, "rn"), int_to_float(x, "rz"), int_to_float(x, "rm"),
                                int_to_float(x, "rp"), int_to_float(u32(x), "rn"), int_to_float(u32(x), "rz"),
                                int_to_float(y, "rn"), int_to_float(y, "rz")]
    return [a, b, out]


def _roundf(x: np.float32) -> np.float32:
    """C roundf: half away from zero."""
    if not np.isfinite(x):
        return x
    return np.float32(math.copysign(math.floor(abs(float(x)) + 0.5), float(x)))


@oracle("f32_rounding", tags={"convert", "float"}, about="floorf/ceilf/truncf/rintf/roundf/copysignf (cvt.r*i.f32.f32)")
def f32_rounding(a, out):
    out = out.copy()
    for i, x in enumerate(a):
        out[6 * i:6 * i + 6] = [np.floor(x), np.ceil(x), np.trunc(x), np.rint(x), _roundf(x),
                                np.copysign(np.float32(1.5), x)]
    return [a, out]


@oracle("f64_math", tags={"f64"}, about="double add/sub/mul/div/fma/sqrt/min/max (incl. subnormals, overflow)")
def f64_math(a, b, c, out):
    out = out.copy()
    with np.errstate(all="ignore"):
        for i, (x, y, z) in enumerate(zip(a, b, c)):
            out[7 * i:7 * i + 7] = [x + y, x - y, x * y, x / y, fma(x, y, z, "f64"), np.sqrt(abs(x)),
                                    max(x, z) - min(y, z)]
    return [a, b, c, out]


@oracle("f64_convert", tags={"convert", "f64"}, about="float<->double, int<->double, double->long long (saturating; NaN)")
def f64_convert(f, d, k, od, of, oi, ol):
    od, of, oi, ol = od.copy(), of.copy(), oi.copy(), ol.copy()
    with np.errstate(all="ignore"):
        for i in range(4):
            od[2 * i] = np.float64(f[i]) * 3.0
            od[2 * i + 1] = np.float64(k[i]) + 0.25
            of[i] = canon(np.float32(d[i]))          # numpy's f64->f32 cast rounds to nearest even
            oi[i] = float_to_int(d[i], "rzi", 32, True, src_f64=True)
            ol[i] = float_to_int(d[i] * 1024.0, "rzi", 64, True, src_f64=True)
    return [f, d, k, od, of, oi, ol]


def _q(v) -> Fraction:
    return Fraction(float(v))


@oracle("f32_round_modes", tags={"float"}, about="add/mul/fma/div .rz/.rp/.rm, rcp.rn/.rz, sqrt.rp/.rm, cvt.sat.f32")
def f32_round_modes(a, b, c, out):
    out = out.copy()
    for i, (x, y, z) in enumerate(zip(a, b, c)):
        s, p, f, d = _q(x) + _q(y), _q(x) * _q(y), _q(x) * _q(y) + _q(z), _q(x) / _q(y)
        sat = np.float32(0.0) if np.isnan(x) else min(max(x, np.float32(0.0)), np.float32(1.0))
        out[16 * i:16 * i + 16] = [round_op(s, "rz"), round_op(s, "rp"), round_op(s, "rm"),
                                   round_op(p, "rz"), round_op(p, "rp"), round_op(p, "rm"),
                                   round_op(f, "rz"), round_op(f, "rp"), round_op(f, "rm"),
                                   round_op(d, "rz"), round_op(d, "rp"), round_op(1 / _q(y), "rn"),
                                   round_op(1 / _q(y), "rz"), sqrt_round(abs(x), "rp"), sqrt_round(abs(z), "rm"), sat]
    return [a, b, c, out]


@oracle("half_arith", tags={"float", "half"},
        about="__half/__half2 arithmetic (add, sub, mul, fma, neg, min, compare; f16x2 mul and add)")
def half_arith(x, out):
    from fractions import Fraction

    def h(v: Fraction) -> np.float16:
        """The nearest half (ties to even): NumPy rounds a float64 to half correctly, and each value
        here is exact in float64 (a check, not an assumption)."""
        f = float(v)
        assert Fraction(f) == v, "the oracle needs the exact value in float64"
        return np.float16(f)

    out = out.copy()
    for t in range(4):
        a, b = np.float16(x[t]), np.float16(x[t + 4])          # cvt.rn.f16.f32
        A, B = Fraction(float(a)), Fraction(float(b))
        row = [h(A + B), h(A - B), h(A * B), h(A * B - A), min(a, b), 1.0 if a < b else 0.0,
               h(Fraction(float(h(A * A))) + A), h(Fraction(float(h(B * B))) + B), a]
        out[9 * t:9 * t + 9] = np.array([float(v) for v in row], dtype=np.float32)
    return [x, out]


@oracle("float_soak", tags={"float", "loop"},
        about="n steps of a logistic map per lane (mul, fma, a compare picking max or a fused accumulate; "
              "the float soak test's loop, n is an argument)")
def float_soak(out, n):
    out = out.copy()
    f = np.float32
    for t in range(len(out)):
        x, acc = fma(f(t), f(0.2), f(0.1)), f(0.0)
        for _ in range(int(n)):
            s = f(f(3.7) * x)                       # float32 products are correctly rounded
            x = fma(s, -x, s)
            acc = fmax(acc, x) if x > f(0.5) else fma(x, f(0.25), acc)
        out[t] = f(acc + x)
    return [out, n]
