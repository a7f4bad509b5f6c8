"""Oracles of the math-function kernels (the approximate instructions, by qwenGPU's definitions:
`docs/floats.md`)."""
from __future__ import annotations

import math

import numpy as np

from .._fp import ex2_approx, fma, fma_mode, sqrt_round
from .common import M32, oracle


def f32_bits(v: int) -> np.float32:
    return np.array([v & M32], dtype=np.uint32).view(np.float32)[0]


def bits_f32(x) -> int:
    return int(np.float32(x).view(np.uint32))


def _fsat(x):
    """cvt.sat.f32.f32: clamp to [0, 1], NaN to 0."""
    x = np.float32(x)
    return np.float32(0.0) if np.isnan(x) or x <= 0 else np.float32(1.0) if x >= 1 else x


def expf_parts(x):
    """libdevice's expf as nvcc 13 emits it (-O3, sm_75): (2^r by ex2.approx.ftz, 2^j as a bit pattern),
    whose product is expf(x): j = round(x log2 e) through an fma.rm trick, r = x log2 e - j in two fmas."""
    x = np.float32(x)
    t = _fsat(fma(x, f32_bits(0x3BBB989D), np.float32(0.5)))
    j = fma_mode(t, np.float32(252.0), f32_bits(0x4B400001), "rm")
    r = fma(x, f32_bits(0x3FB8AA3B), -(j + f32_bits(0xCB40007F)))
    r = fma(x, f32_bits(0x32A57060), r)
    return ex2_approx(r, ftz=True), f32_bits(bits_f32(j) << 23)


def expf(x):
    e, s = expf_parts(x)
    return np.float32(e * s)


def tanhf(x):
    """libdevice's tanhf as nvcc 13 emits it: |x| >= 0.6: 1 - 2 / (2^(2|x| log2 e) + 1) with ex2.approx.ftz
    and rcp.approx.ftz (qwenGPU: rcp.rn), 1 from |x| >= 9.0109, with x's sign; else an odd polynomial."""
    x = np.float32(x)
    ax = np.float32(abs(x))
    e = ex2_approx(np.float32(ax * f32_bits(0x4038AA3B)), ftz=True)
    big = fma(np.float32(1.0) / np.float32(e + np.float32(1.0)), np.float32(-2.0), np.float32(1.0))
    big = np.float32(1.0) if ax >= f32_bits(0x41102CB4) else big
    big = np.float32(math.copysign(float(big), float(x)))
    x2 = np.float32(x * x)
    p = fma(f32_bits(0x3C80F082), x2, f32_bits(0xBD563CAE))
    p = fma(p, x2, f32_bits(0x3E085941))
    p = fma(p, x2, f32_bits(0xBEAAA9ED))
    p = fma(p, x2, np.float32(0.0))
    small = fma(p, x, x)
    return big if ax >= f32_bits(0x3F19999A) else small


@oracle("softmax_expf", tags={"float", "shared", "approx"},
        about="softmax of 8 floats with expf (ex2.approx.ftz), 8 threads, max and sum through shared memory")
def softmax_expf(x, y):
    x = x.astype(np.float32)
    m = x[0]
    for v in x[1:]:
        m = max(m, v)
    e = [expf(np.float32(v - m)) for v in x]
    p = [np.float32(e[2 * k] + e[2 * k + 1]) for k in range(4)]
    total = np.float32(np.float32(p[0] + p[1]) + np.float32(p[2] + p[3]))
    return [x, np.array([np.float32(v / total) for v in e], dtype=np.float32)]


@oracle("sigmoid", tags={"float", "grid", "approx"}, about="1 / (1 + expf(-x)) over 8 floats (ex2.approx.ftz)")
def sigmoid(x, y):
    out = []
    for v in x.astype(np.float32):
        e, s = expf_parts(-v)
        out.append(np.float32(1.0) / fma(e, s, np.float32(1.0)))
    return [x, np.array(out, dtype=np.float32)]


@oracle("gelu_tanh", tags={"float", "grid", "approx"},
        about="GELU (tanh form) over 8 floats: tanhf (ex2.approx.ftz, rcp.approx.ftz)")
def gelu_tanh(x, y):
    out = []
    for v in x.astype(np.float32):
        u = fma(v, np.float32(v * np.float32(v * f32_bits(0x3D372713))), v)
        u = np.float32(u * f32_bits(0x3F4C422A))
        out.append(np.float32(np.float32(v * np.float32(0.5)) * np.float32(tanhf(u) + np.float32(1.0))))
    return [x, np.array(out, dtype=np.float32)]


# qwenGPU's definitions of lg2.approx and sin.approx (docs/floats.md, "Approximate instructions"), re-implemented
# here on Python integers from their description
LG2_COEFFS = (1549082010, -774540990, 516359558, -387271133, 309879951, -258211517, 219822676, -191720248,
              186428239, -184178726, 104039832)


def _fixed_to_f32(v: int, scale: int) -> np.float32:
    """v * 2^-scale rounded half up to f32 (|v| < 2^31)."""
    mag = abs(v)
    if mag == 0:
        return np.float32(0.0)
    nz = 32 - mag.bit_length()
    mn = mag << nz
    out = ((157 - nz - scale) << 23) + (mn >> 8) + ((mn >> 7) & 1)
    return f32_bits(out | (0x80000000 if v < 0 else 0))


def lg2_approx(x):
    """lg2.approx.f32 for positive finite x: x = 2^E m, m in [sqrt(1/2), sqrt(2)); u = m - 1 in units of
    2^-32; log2 m = u P(u) by fixed-point Horner (floor of each signed product / 2^32), units of 2^-30;
    E + log2 m in units of 2^-30 (E = 0), 2^-26 (|E| < 32) or 2^-23 (truncated), rounded half up."""
    bits = bits_f32(x)
    if not 0 < bits < 0x7F800000:
        raise ValueError("lg2_approx: the oracle takes positive finite operands only")
    ef, frac = bits >> 23, bits & 0x7FFFFF
    if ef == 0:
        sh = 24 - frac.bit_length()
        m, e = frac << sh, -126 - sh
    else:
        m, e = frac | 0x800000, ef - 127
    big = m > 0xB504F3
    e += big
    u = (m << (9 - big)) - (1 << 32)
    h = LG2_COEFFS[-1]
    for c in reversed(LG2_COEFFS[:-1]):
        h = c + _mulhs(u, h)
    lg = _mulhs(u, h)
    scale = 30 if e == 0 else 26 if abs(e) < 32 else 23
    return _fixed_to_f32((e << scale) + (lg >> (30 - scale)), scale)


def _mulhs(a: int, b: int) -> int:
    """The high word of the signed 64-bit product of two signed 32-bit words."""
    return (a * b) >> 32


def sin_approx(x):
    """sin.approx.f32 (qwenGPU's definition, docs/floats.md) on Python integers: y = |x| 2/pi from the
    64-bit constant, truncated to 2 quadrant and 32 fraction bits; r = the fraction as a signed word;
    r S(r^2) and C(r^2) by fixed-point Horner (floor of each signed product / 2^32); the quadrant's
    +-sin/+-cos rounded half up to f32, with x's sign."""
    bits = bits_f32(x)
    ax = bits & 0x7FFFFFFF
    if ax > 0x7F7FFFFF:
        return f32_bits(0x7FFFFFFF)
    if ax < 0x39800000:
        return np.float32(x)
    e, m = ax >> 23, (ax & 0x7FFFFF) | 0x800000
    y = m * 0xA2F9836E4E44152A >> (182 - min(e, 150))          # quadrant bits and 32 fraction bits
    f = y & 0xFFFFFFFF
    r = f - (1 << 32) if f >> 31 else f
    n = ((y >> 32) + (f >> 31)) & 3
    z = _mulhs(r, r)
    h = 169636
    for c in (-5026338, 85569234, -693598665, 1686629713):
        h = c + _mulhs(z, h)
    sv = _mulhs(r, h)
    h = -26684
    for c in (986942, -22401978, 272375559, -1324675879, 1073741824):
        h = c + _mulhs(z, h)
    v = (sv, h, -sv, -h)[n]
    mag = abs(v)
    if mag == 0:
        out = 0
    else:
        nz = 32 - mag.bit_length()
        mn = mag << nz
        out = ((127 - nz) << 23) + (mn >> 8) + ((mn >> 7) & 1)
    out |= (0x80000000 if v < 0 else 0)
    return f32_bits(out ^ (bits & 0x80000000))


@oracle("fast_log_rsqrt", tags={"float", "grid", "approx"},
        about="__fdividef(__logf(x), rsqrtf(x + 1)) with --use_fast_math: lg2/rsqrt/div .approx.ftz")
def fast_log_rsqrt(x, y):
    out = []
    for v in x.astype(np.float32):
        num = np.float32(lg2_approx(v) * f32_bits(0x3F317218))
        rs = np.float32(np.float32(1) / np.float32(np.sqrt(np.float32(v + np.float32(1)))))
        out.append(np.float32(num / rs))
    return [x, np.array(out, dtype=np.float32)]


@oracle("fast_sin", tags={"float", "grid", "approx"}, about="__sinf over 8 floats up to 300 (sin.approx.f32)")
def fast_sin(x, y):
    return [x, np.array([sin_approx(v) for v in x.astype(np.float32)], dtype=np.float32)]


_LOGF_POLY = (0x3E1039F6, 0xBDF8CDCC, 0x3E0F2955, 0xBE2AD8B9, 0x3E4CED0B, 0xBE7FFF22, 0x3EAAAA78, 0xBF000000)


def logf(x):
    """libdevice's logf as nvcc 13 emits it (-O3, sm_75): x = 2^e m with m in [2/3, 4/3) taken
    from the bit pattern (a subnormal scaled by 2^23 first), log(m) = t + t^2 P(t) (t = m - 1,
    Horner in fmas), + e ln 2; infinities, NaN and negatives through fma(x, inf, inf), zero -> -inf."""
    x = np.float32(x)
    tiny = x < f32_bits(0x00800000)
    m = np.float32(x * np.float32(8388608.0)) if tiny else x
    e0 = f32_bits(0xC1B80000) if tiny else np.float32(0.0)        # -23
    bits = bits_f32(m)
    k = (bits - 0x3F2AAAAB) & 0xFF800000
    f = f32_bits((bits - k) & M32)
    e = fma(np.float32(k - (1 << 32) if k >> 31 else k), f32_bits(0x34000000), e0)
    t = np.float32(f - np.float32(1.0))
    p = fma(f32_bits(0xBE055027), t, f32_bits(_LOGF_POLY[0]))
    for c in _LOGF_POLY[1:]:
        p = fma(p, t, f32_bits(c))
    r = fma(e, f32_bits(0x3F317218), fma(np.float32(t * p), t, t))
    if not bits < 0x7F800000:
        r = fma(m, np.float32(np.inf), np.float32(np.inf))
    return np.float32(-np.inf) if m == 0 else r


def _normal_cdf(d):
    """black_scholes.cu's normal_cdf: Abramowitz & Stegun 26.2.17 in the kernel's f32 steps."""
    one = np.float32(1.0)
    k = np.float32(one / fma(f32_bits(0x3E6D3389), np.float32(abs(d)), one))
    p = fma(f32_bits(0x3FAA466F), k, f32_bits(0xBFE91EEA))
    for c in (0x3FE40778, 0xBEB68F87, 0x3EA385FA):
        p = fma(p, k, f32_bits(c))
    p = np.float32(p * k)
    density = np.float32(f32_bits(0x3ECC422A) * expf(np.float32(np.float32(np.float32(-0.5) * d) * d)))
    tail = np.float32(density * p)
    return np.float32(one - tail) if d > 0 else tail


@oracle("black_scholes", tags={"float", "grid", "approx", "algo", "divergence", "loop", "heavy"},
        about="Black-Scholes call and put prices of 16 options: logf, sqrtf, expf, divisions, a polynomial "
              "cumulative normal",
        max_steps=300_000)   # soft-float COMPACT: 157,886 tokens (the float unit's machine: ~19,000)
def black_scholes(price, strike, years, call, put, rate, vol):
    rate, vol = np.float32(rate), np.float32(vol)
    calls, puts = [], []
    for s, x, t in zip(price.astype(np.float32), strike.astype(np.float32), years.astype(np.float32)):
        vol_root_t = np.float32(vol * sqrt_round(t))
        drift = fma(np.float32(np.float32(0.5) * vol), vol, rate)
        d1 = np.float32(fma(drift, t, logf(np.float32(s / x))) / vol_root_t)
        d2 = np.float32(d1 - vol_root_t)
        n1, n2 = _normal_cdf(d1), _normal_cdf(d2)
        discounted = np.float32(x * expf(np.float32(-rate * t)))
        calls.append(fma(s, n1, -np.float32(discounted * n2)))
        puts.append(fma(discounted, np.float32(1.0 - n2), -np.float32(s * np.float32(1.0 - n1))))
    return [price, strike, years, np.array(calls, dtype=np.float32), np.array(puts, dtype=np.float32), None, None]
