"""Exact IEEE-754 helpers for the suite's oracles (rounding of exact rationals, fma, conversions).

NumPy's float32/float64 add, sub, mul, div and sqrt are correctly rounded (round to nearest even), so the
oracles use them directly; everything else that rounds (fma, int<->float conversions with a rounding mode,
float->int with saturation) goes through exact `Fraction` arithmetic here.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

#: the NaN NVIDIA GPUs produce for any f32 operation whose result is NaN
CANONICAL_NAN_F32 = np.array([0x7FFFFFFF], dtype=np.uint32).view(np.float32)[0]
CANONICAL_NAN_F64 = np.array([0x7FFFFFFFFFFFFFFF], dtype=np.uint64).view(np.float64)[0]

_FORMATS = {"f32": (24, -126, 127), "f64": (53, -1022, 1023)}


def canon(x, fmt: str = "f32"):
    """`x` (a scalar or array) with every NaN replaced by the GPU's canonical NaN."""
    nan = CANONICAL_NAN_F32 if fmt == "f32" else CANONICAL_NAN_F64
    if np.ndim(x) == 0:
        return nan if np.isnan(x) else x
    x = np.array(x, copy=True)
    x[np.isnan(x)] = nan
    return x


def round_exact(q: Fraction, mode: str = "rn", fmt: str = "f32", negative_zero: bool = False):
    """The exact rational `q` rounded to the float format `fmt` with rounding `mode` (rn, rz, rm, rp).

    Handles subnormals and overflow (to inf or to the largest finite value, as the mode says).
    `negative_zero` gives the sign of an exactly-zero `q`. Returns np.float32 / np.float64.
    """
    p, emin, emax = _FORMATS[fmt]
    cast = np.float32 if fmt == "f32" else np.float64
    q = Fraction(q)
    if q == 0:
        return cast(-0.0 if negative_zero else 0.0)
    sign = -1 if q < 0 else 1
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - (p - 1))
    n = a / quantum
    floor = n.numerator // n.denominator
    rem = n - floor
    if mode == "rn":
        up = rem > Fraction(1, 2) or (rem == Fraction(1, 2) and floor % 2 == 1)
    elif mode == "rz":
        up = False
    elif mode == "rp":
        up = rem > 0 and sign > 0
    elif mode == "rm":
        up = rem > 0 and sign < 0
    else:
        raise ValueError(mode)
    mag = (floor + (1 if up else 0)) * quantum
    largest = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if mag > largest:
        to_inf = mode == "rn" or (mode == "rp" and sign > 0) or (mode == "rm" and sign < 0)
        return cast(sign * math.inf) if to_inf else cast(sign * float(largest))
    if mag == 0:
        return cast(-0.0 if sign < 0 else 0.0)
    return cast(sign * float(mag))     # exact: mag is representable in the format


def fma(a, b, c, fmt: str = "f32"):
    """Fused multiply-add a*b+c with a single rounding (round to nearest even)."""
    cast = np.float32 if fmt == "f32" else np.float64
    a, b, c = cast(a), cast(b), cast(c)
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        with np.errstate(all="ignore"):
            r = np.float64(a) * np.float64(b) + np.float64(c) if fmt == "f32" else a * b + c
        return canon(cast(r), fmt)
    prod = Fraction(float(a)) * Fraction(float(b))
    exact = prod + Fraction(float(c))
    if exact == 0:
        prod_neg = (math.copysign(1.0, float(a)) * math.copysign(1.0, float(b))) < 0
        c_neg = math.copysign(1.0, float(c)) < 0
        # an exact zero sum is -0 only when both addends are zeros of negative sign
        return cast(-0.0) if (prod == 0 and prod_neg and c_neg) else cast(0.0)
    return round_exact(exact, "rn", fmt)


def int_to_float(v: int, mode: str = "rn", fmt: str = "f32"):
    """cvt.<mode>.f32/f64.<int>: an integer rounded to the float format."""
    return round_exact(Fraction(int(v)), mode, fmt)


def float_to_int(x, mode: str, bits: int, signed: bool, src_f64: bool = False) -> int:
    """cvt.<mode>i.<s|u><bits>.<f32|f64>: round to an integer, saturate to the range, NaN per PTX.

    PTX: NaN gives 0, except from .f64 sources or to 64-bit destinations, where it gives 1 << (bits-1).
    """
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    x = float(x)
    if math.isnan(x):
        if src_f64 or bits == 64:
            return lo if signed else 1 << (bits - 1)
        return 0
    if math.isinf(x):
        return hi if x > 0 else lo
    q = Fraction(x)
    if mode == "rni":
        r = round(q)          # Fraction.__round__ rounds half to even
    elif mode == "rzi":
        r = math.trunc(q)
    elif mode == "rmi":
        r = math.floor(q)
    elif mode == "rpi":
        r = math.ceil(q)
    else:
        raise ValueError(mode)
    return min(max(int(r), lo), hi)


def round_op(exact: Fraction, mode: str, fmt: str = "f32"):
    """An exactly computed nonzero-or-zero result rounded with `mode`; an exact zero is +0 (-0 in rm)."""
    if exact == 0:
        cast = np.float32 if fmt == "f32" else np.float64
        return cast(-0.0 if mode == "rm" else 0.0)
    return round_exact(exact, mode, fmt)


def sqrt_round(x, mode: str = "rn"):
    """sqrt.<mode>.f32 of a finite non-negative f32 `x`, exactly rounded."""
    x = np.float32(x)
    if x == 0:
        return x
    q = Fraction(float(x))
    c = np.float32(math.sqrt(float(x)))          # within an ulp or so; fix it up exactly below
    up, down = np.float32(np.inf), np.float32(0)
    while Fraction(float(c)) ** 2 > q:
        c = np.nextafter(c, down)
    while Fraction(float(np.nextafter(c, up))) ** 2 <= q:
        c = np.nextafter(c, up)
    # now c <= sqrt(x) < next(c)
    if Fraction(float(c)) ** 2 == q or mode in ("rz", "rm"):
        return c
    n = np.nextafter(c, up)
    if mode == "rp":
        return n
    mid = (Fraction(float(c)) + Fraction(float(n))) / 2     # rn: compare x with the midpoint squared
    if mid ** 2 < q:
        return n
    if mid ** 2 > q:
        return c
    return c if (int(c.view(np.uint32)) & 1) == 0 else n


#: qwenGPU's definition of ex2.approx.f32 (docs/floats.md, "Approximate instructions"): 2^(F / 2^32) on
#: [0, 1) is 2^31 + Horner(F) in 32-bit fixed point with these coefficients (units of 2^-31, constant first)
EX2_COEFFS = (1488522236, 515882504, 119194075, 20655258, 2861946, 333183, 30428, 4018)


def ex2_approx(x, ftz: bool = False):
    """ex2.approx{.ftz}.f32 by qwenGPU's definition, re-implemented on Python integers from its
    description (independently of `qwengpu.semantics.approx`): x = n + F / 2^32 with x * 2^32 truncated
    toward zero, F in [0, 2^32); 2^(F / 2^32) by the fixed-point Horner scheme (each step the high word
    of a 32 x 32-bit product), rounded half up to 24 bits, scaled by 2^n (subnormal results rounded
    half up from the same fixed-point value; flushed to +0 with .ftz)."""
    bits = int(np.float32(x).view(np.uint32))
    ax = bits & 0x7FFFFFFF
    if ax > 0x7F800000:
        return CANONICAL_NAN_F32
    if ax >= 0x43800000:                                  # |x| >= 256, infinities
        return np.float32(0.0) if bits >> 31 else np.float32(np.inf)
    X = Fraction(float(np.float32(x))) * 2 ** 32
    X = math.floor(X) if X >= 0 else -math.floor(-X)      # truncated toward zero
    n, F = X >> 32, X & 0xFFFFFFFF
    h = EX2_COEFFS[-1]
    for c in reversed(EX2_COEFFS[:-1]):
        h = (c + (F * h >> 32)) & 0xFFFFFFFF
    p = (0x80000000 + (F * h >> 32)) & 0xFFFFFFFF        # 2^(F/2^32) * 2^31
    if n >= 128:
        return np.float32(np.inf)
    if n >= -126:
        out = (((n + 126) << 23) + (p >> 8) + ((p >> 7) & 1)) & 0xFFFFFFFF
    else:
        k = -118 - n                                      # units of 2^-149
        out = (p >> k if k < 32 else 0) + ((p >> (k - 1)) & 1 if k - 1 < 32 else 0)
    if ftz and out < 0x800000:
        out = 0
    return np.array([out], dtype=np.uint32).view(np.float32)[0]


def fma_mode(a, b, c, mode: str):
    """fma.{rn,rz,rm,rp}.f32 of finite operands (exact, then rounded once in `mode`)."""
    exact = Fraction(float(np.float32(a))) * Fraction(float(np.float32(b))) + Fraction(float(np.float32(c)))
    return round_exact(exact, mode, "f32")
