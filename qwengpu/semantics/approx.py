"""Approximate PTX floating-point instructions: one deterministic definition of each.

PTX leaves the results of `ex2.approx`, `lg2.approx`, `sin/cos.approx`, `tanh.approx`,
`rsqrt.approx`, `rcp.approx`, `sqrt.approx`, `div.approx` and `div.full` to the implementation,
within stated error bounds. qwenGPU gives each one fixed definition, chosen within those bounds:
**not bit-identical to NVIDIA hardware, within the ISA's stated error** (`docs/floats.md`,
"Approximate instructions", has the table, the bounds and the measured errors). `compile(...,
approx="refuse")` (`qwengpu --no-approx`) refuses them instead.

- `rcp.approx`, `sqrt.approx`, `div.approx`, `div.full` (`.f32`, with or without `.ftz`) are the IEEE
  operations rounded to nearest (`rcp.rn`, `sqrt.rn`, `div.rn`, with the instruction's `.ftz`):
  correctly rounded, so within every bound PTX states for them. The decoder (`ptx.isa`) rewrites
  them to `.rn`, so every engine runs the IEEE operation.
- `ex2.approx{.ftz}.f32` is a fixed-point program on 32-bit words (`ex2_f32`), written **once**
  against a builder interface (Python operators `+ - & | ^ << >> ~` on values, and `sel`, `sar`,
  `lt`, `ltu`, `mulhu`, `sub`, `add64`): `NpBuilder` runs it here on numpy lanes (the
  interpreter), the assembler's soft-float `Builder` turns it into micro-ops (the machine). The
  same operations on the same words give the same bits on every engine, by construction.
- `sin.approx{.ftz}.f32` and `cos.approx{.ftz}.f32` are one fixed-point program (`sincos_fx`),
  `lg2.approx{.ftz}.f32` another (`lg2_fx`), run the same way.
- `rsqrt`, `tanh` `.approx.f32` are compositions (`rsqrt_f32`, `tanh_f32`) of correctly rounded
  f32 operations (`add mul fma div rcp sqrt`
  .rn), `ex2_f32` and integer micro-ops, written once against an "ops" interface (`alu`, `fadd`,
  `fmul`, `ffma`, `fdiv`, `frcp`, `fsqrt`, `ex2`): `NpOps` here (`floats` for the float
  operations), the assembler's emitter ops (`softfloat` routines, bit-exact with `floats`) on the
  machine.

- `rcp.approx.ftz.f64` (`rcp_f64`) is `rcp.rn.f64` rounded half up to its upper word (the lower
  word zero, subnormals flushed); `rsqrt.approx.f64` (`rsqrt_f64`) is `rcp.rn.f64(sqrt.rn.f64(a))`.
  libdevice's double-precision `tanh`, `log`, `cbrt`, `rsqrt` use them.

Forms not defined here (and refused by the decoder with a clear message): the `.f16`/`.f16x2`
forms of `ex2`/`tanh`, `rsqrt.approx.ftz.f64`, `div.approx.f64`, `rcp.approx.f64` without `.ftz`.
"""
from __future__ import annotations

import numpy as np

from .words import M32, alu_eval_lanes

F32_NAN = 0x7FFFFFFF
F32_INF = 0x7F800000


# -------------------------------------------------------------------------------------------------
# the numpy backend: 32-bit words per lane, the ALU micro-ops' semantics (`words.alu_eval_lanes`)


def _arr(x):
    if isinstance(x, Lanes):
        return x.v
    if isinstance(x, np.ndarray):
        return x.astype(np.uint64) & M32
    return np.uint64(int(x) & M32)


def _word_op(op, a, b=0, c=0, cin=0):
    return Lanes(alu_eval_lanes(op, _arr(a), _arr(b), _arr(c), cin)[0])


class Lanes:
    """A 32-bit word per lane (numpy uint64 holding values below 2^32); Python operators are the
    ALU micro-ops (ADD, AND, OR, XOR, SHL, SHR: wrapping to 32 bits, shift amounts of 32 or more
    giving 0; a - b is ADD(a, ~b, carry in 1))."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = np.asarray(v, dtype=np.uint64) & M32

    def __add__(self, o):
        return _word_op("ADD", self, o)

    __radd__ = __add__

    def __sub__(self, o):
        return _word_op("ADD", self, _arr(o) ^ M32, cin=1)

    def __rsub__(self, o):
        return _word_op("ADD", o, self.v ^ M32, cin=1)

    def __and__(self, o):
        return _word_op("AND", self, o)

    __rand__ = __and__

    def __or__(self, o):
        return _word_op("OR", self, o)

    __ror__ = __or__

    def __xor__(self, o):
        return _word_op("XOR", self, o)

    __rxor__ = __xor__

    def __invert__(self):
        return _word_op("XOR", self, M32)

    def __lshift__(self, o):
        return _word_op("SHL", self, o)

    def __rlshift__(self, o):
        return _word_op("SHL", o, self)

    def __rshift__(self, o):
        return _word_op("SHR", self, o)

    def __rrshift__(self, o):
        return _word_op("SHR", o, self)


class BuilderOps:
    """The builder interface's named operations (see the module docstring), each one ALU micro-op
    through the builder's `op(op, a, b=None, c=None)`: written once for every builder (`NpBuilder`
    here; the soft-float builder of the assembler has the same ones)."""

    def sel(self, c, a, b):
        return self.op("SEL", a, b, c)

    def sar(self, a, k):
        return self.op("SAR", a, k)

    def eq(self, a, b):
        return self.op("EQ", a, b)

    def ltu(self, a, b):
        return self.op("LTU", a, b)

    def leu(self, a, b):
        return self.op("LEU", a, b)

    def lt(self, a, b):
        return self.op("LT", a, b)

    def le(self, a, b):
        return self.op("LE", a, b)

    def mul(self, a, b):
        return self.op("MUL", a, b)

    def mulhu(self, a, b):
        return self.op("MULHU", a, b)

    def mulhs(self, a, b):
        return self.op("MULHS", a, b)

    def clz(self, a):
        return self.op("CLZ", a)


class NpBuilder(BuilderOps):
    """The builder interface on numpy lanes (see the module docstring)."""

    def __init__(self, shape=()):
        self.shape = shape

    def _v(self, x):
        return np.broadcast_to(_arr(x), self.shape) if not isinstance(x, Lanes) else x.v

    def inp(self, x) -> Lanes:
        return Lanes(x)

    def op(self, op, a, b=None, c=None):
        return Lanes(alu_eval_lanes(op, self._v(a), self._v(0 if b is None else b), self._v(0 if c is None else c))[0])

    def sub(self, a, b):
        return Lanes(self._v(a)) - Lanes(self._v(b))

    def add64(self, a, b, cin=0):
        lo, carry = alu_eval_lanes("ADD", self._v(a[0]), self._v(b[0]), 0, 1 if cin == "1" else 0)
        hi, _ = alu_eval_lanes("ADD", self._v(a[1]), self._v(b[1]), 0, carry)
        return Lanes(lo), Lanes(hi)


# -------------------------------------------------------------------------------------------------
# ex2.approx.f32: 2^x

#: 2^f = 1 + f * q(f) on [0, 1): q's coefficients (a near-minimax fit of degree 7, error below
#: 2^-32 before the fixed-point truncations), in units of 2^-31, constant term first
EX2_Q = (1488522236, 515882504, 119194075, 20655258, 2861946, 333183, 30428, 4018)


def ex2_f32(b, x, ftz: bool = False):
    """ex2.approx{.ftz}.f32 of the word x.

    |x| * 2^32 is formed exactly up to a truncation below 2^-32 (the significand shifted by its
    exponent; 64 bits), negated for x < 0, so that x = n + F / 2^32 with the integer n in the high
    word and F in [0, 2^32). 2^(F / 2^32) is a degree-8 polynomial in fixed point (Horner, each
    step one MULHU: the error stays below 2^-28 relative), rounded half up to 24 bits and scaled
    by 2^n; results below 2^-126 are subnormal (rounded half up again), or +0 with .ftz. Special
    cases: NaN -> the canonical NaN, +inf and x >= 128 -> +inf, -inf and x <= -256 -> +0, and a
    subnormal or zero x -> 1.0 (its fixed-point value is 0)."""
    s = x >> 31
    sm = b.sar(x, 31)
    ax = x & 0x7FFFFFFF
    e = ax >> 23
    m = (x & 0x7FFFFF) | 0x800000
    lo = (m << (e - 118)) | (m >> (118 - e))
    hi = m >> (150 - e)
    F, n = b.add64((lo ^ sm, hi ^ sm), (s, 0))
    h = EX2_Q[-1]
    for c in reversed(EX2_Q[:-1]):
        h = c + b.mulhu(F, h)
    p = 0x80000000 + b.mulhu(F, h)                    # 2^f * 2^31, in [2^31, 2^32)
    r = (p >> 8) + ((p >> 7) & 1)                     # rounded to 24 bits: [2^23, 2^24]
    normal = ((n + 126) << 23) + r                    # exponent field n + 127 (r's top bit adds 1)
    k = b.sub(0xFFFFFF8A, n)                          # -118 - n: the shift to units of 2^-149
    sub = (p >> k) + ((p >> (k - 1)) & 1)
    tiny = b.lt(n, 0xFFFFFF82)                        # n < -126
    out = b.sel(tiny, sub, normal)
    if ftz:
        out = b.sel(b.ltu(out, 0x800000), 0, out)
    out = b.sel(b.lt(127, n), F32_INF, out)           # n >= 128
    out = b.sel(b.ltu(0x437FFFFF, ax), F32_INF & ~sm, out)   # |x| >= 256 (and infinities)
    return b.sel(b.ltu(F32_INF, ax), F32_NAN, out)


# -------------------------------------------------------------------------------------------------
# sin.approx.f32, cos.approx.f32: fixed point

#: round(2/pi * 2^64), as (high, low) words
TWO_OVER_PI = (0xA2F9836E, 0x4E44152A)
#: sin(pi/2 r) = r * S(r^2) and cos(pi/2 r) = C(r^2) on r in [-1/2, 1/2]: near-minimax coefficients in
#: units of 2^-30, constant term first (errors before the fixed-point truncations: 2^-37, 2^-35)
SIN_FX = (1686629713, -693598665, 85569234, -5026338, 169636)
COS_FX = (1073741824, -1324675879, 272375559, -22401978, 986942, -26684)


def _horner(b, z, coeffs):
    h = coeffs[-1] & M32
    for c in reversed(coeffs[:-1]):
        h = (c & M32) + b.op("MULHS", z, h)
    return h


def _fx_to_f32(b, v):
    """The f32 nearest (ties up) to the signed fixed-point word v (units of 2^-30, |v| <= 2^30)."""
    sm = b.sar(v, 31)
    mag = b.sub(v ^ sm, sm)
    nz = b.clz(mag)
    mn = mag << nz
    packed = (b.sub(127, nz) << 23) + ((mn >> 8) + ((mn >> 7) & 1))
    return b.sel(b.eq(mag, 0), 0, packed) | (v & 0x80000000)


def sincos_fx(b, x, ftz, want_sin):
    """sin.approx / cos.approx{.ftz}.f32 of the word x, a fixed-point program (the builder interface).

    |x| (significand m, exponent e) times 2/pi (`TWO_OVER_PI`, 64 bits) is formed as an 88-bit
    product, of which the 2 quadrant bits q and the 32 fraction bits F of y = |x| 2/pi are kept
    (truncated: |x| >= 2^24 is reduced as if its exponent were 2^23's, deterministic but with no
    stated bound, as PTX states none beyond 100 pi). F as a signed word is r in [-1/2, 1/2) quarter
    periods (the quadrant n = q + F's top bit); sin(pi/2 r) = r S(r^2) and cos(pi/2 r) = C(r^2) by
    Horner in signed 32-bit fixed point (`SIN_FX`, `COS_FX`, one MULHS a step), the quadrant picks
    +-sin or +-cos, and the fixed-point value is rounded (half up) to f32, with x's sign for sin.
    |x| < 2^-12: sin = x, cos = 1. inf and NaN give the canonical NaN."""
    if ftz:
        x = b.sel(b.ltu(x & 0x7FFFFFFF, 0x800000), x & 0x80000000, x)
    ax = x & 0x7FFFFFFF
    e = ax >> 23
    m = (ax & 0x7FFFFF) | 0x800000
    t = b.sel(b.ltu(150, e), 0, b.sub(150, e))            # the product's shift, less 32
    kh, kl = TWO_OVER_PI
    p1, p2 = b.add64((b.mulhu(m, kl), b.mulhu(m, kh)), (b.mul(m, kh), 0))
    f = (p1 >> t) | (p2 << (32 - t)) | (p2 >> (t - 32))
    n = ((p2 >> t) + (f >> 31)) & 3
    z = b.op("MULHS", f, f)
    sv = b.op("MULHS", f, _horner(b, z, SIN_FX))
    cv = _horner(b, z, COS_FX)
    nsv, ncv = b.sub(0, sv), b.sub(0, cv)
    odd, hi = n & 1, n & 2
    if want_sin:
        v = b.sel(hi, b.sel(odd, ncv, nsv), b.sel(odd, cv, sv))
        out = _fx_to_f32(b, v) ^ (x & 0x80000000)
        out = b.sel(b.ltu(ax, 0x39800000), x, out)
    else:
        v = b.sel(hi, b.sel(odd, sv, ncv), b.sel(odd, nsv, cv))
        out = b.sel(b.ltu(ax, 0x39800000), F32_ONE, _fx_to_f32(b, v))
    return b.sel(b.ltu(0x7F7FFFFF, ax), F32_NAN, out)


# -------------------------------------------------------------------------------------------------
# lg2.approx.f32: fixed point

#: log2(1 + u) = u P(u) on u in [sqrt(1/2) - 1, sqrt(2) - 1]: P's near-minimax coefficients (degree 10)
#: in units of 2^-30, constant term first (error before the fixed-point truncations: 2^-32)
LG2_FX = (1549082010, -774540990, 516359558, -387271133, 309879951, -258211517, 219822676, -191720248,
          186428239, -184178726, 104039832)


def _fx_scaled_to_f32(b, v, scale):
    """The f32 nearest (ties up) to the signed word v times 2^-scale (scale a value or an int)."""
    sm = b.sar(v, 31)
    mag = b.sub(v ^ sm, sm)
    nz = b.clz(mag)
    mn = mag << nz
    packed = (b.sub(b.sub(157, nz), scale) << 23) + ((mn >> 8) + ((mn >> 7) & 1))
    return b.sel(b.eq(mag, 0), 0, packed) | (v & 0x80000000)


def lg2_fx(b, x, ftz=False):
    """lg2.approx{.ftz}.f32 of the word x, a fixed-point program (the builder interface).

    x = 2^E m with m in [sqrt(1/2), sqrt(2)) (a subnormal normalised by CLZ first); u = m - 1 as a
    signed word in units of 2^-32 (the significand shifted: no subtraction needed); log2(m) = u P(u)
    by Horner in signed 32-bit fixed point (`LG2_FX`, one MULHS a step), in units of 2^-30; E +
    log2(m) is summed in units of 2^-30 (E = 0), 2^-26 (|E| < 32) or 2^-23, and rounded half up to
    f32. lg2(+-0) = -inf, lg2(+inf) = +inf, negative operands and NaN give the canonical NaN."""
    if ftz:
        x = b.sel(b.ltu(x & 0x7FFFFFFF, 0x800000), x & 0x80000000, x)
    ax = x & 0x7FFFFFFF
    ef = ax >> 23
    frac = x & 0x7FFFFF
    sub = b.eq(ef, 0)
    sh = b.sel(sub, b.clz(frac) - 8, 0)
    m = b.sel(sub, frac << sh, frac | 0x800000)
    big = b.ltu(0xB504F3, m)                               # m > sqrt(2): halve it
    e = b.sel(sub, b.sub(0xFFFFFF82, sh), ef - 127) + big  # -126 - sh, or the exponent
    u = m << b.sub(9, big)
    h = LG2_FX[-1]
    for c in reversed(LG2_FX[:-1]):
        h = (c & M32) + b.op("MULHS", u, h)
    lg = b.op("MULHS", u, h)                               # log2(m), units of 2^-30
    small = b.ltu(e + 31, 63)                              # |E| < 32
    scale = b.sel(b.eq(e, 0), 30, b.sel(small, 26, 23))
    t = (e << scale) + b.sar(lg, b.sub(30, scale))
    out = _fx_scaled_to_f32(b, t, scale)
    out = b.sel(b.eq(ax, 0), 0xFF800000, out)
    out = b.sel(b.eq(x, F32_INF), F32_INF, out)
    return b.sel(b.ltu(0x80000000, x) | b.ltu(F32_INF, ax), F32_NAN, out)


# -------------------------------------------------------------------------------------------------
# compositions of correctly rounded f32 operations, written against the "ops" interface:
#   o.alu(op, a, b=None, c=None)  an integer micro-op (`words.alu_eval_lanes`)
#   o.fadd/fmul/fdiv(a, b, ftz), o.ffma(a, b, c, ftz), o.frcp/fsqrt(a, ftz)   IEEE .rn operations
#   o.ex2(a, ftz)                 `ex2_f32`
# values are 32-bit words (f32 bit patterns); constants are plain ints

F32_ONE = 0x3F800000
F32_NEG_TWO = 0xC0000000
#: f32(2 / ln 2) = f32(2 log2(e))
F32_2LOG2E = 0x4038AA3B


def _flush(o, a, ftz):
    """a, or a subnormal a flushed to a zero of its sign when ftz."""
    if not ftz:
        return a
    tiny = o.alu("LTU", o.alu("AND", a, 0x7FFFFFFF), 0x800000)
    return o.alu("SEL", o.alu("AND", a, 0x80000000), a, tiny)


def rsqrt_f32(o, a, ftz=False):
    """rsqrt.approx{.ftz}.f32: rcp.rn(sqrt.rn(a)). Two roundings: relative error below 2^-23
    (PTX: 2^-22.9); rsqrt(-0) = -inf, rsqrt(+inf) = +0, negative operands give NaN."""
    return o.frcp(o.fsqrt(a, ftz), ftz)


def tanh_f32(o, a):
    """tanh.approx.f32: |a| < 2^-6: a itself (relative error below 2^-13.5); otherwise
    1 - 2 / (ex2(|a| * f32(2 log2 e)) + 1) (fma for the last step), with a's sign: relative error
    below 2^-15 (PTX: 2^-10.987). NaN gives the canonical NaN; subnormals pass unchanged."""
    ax = o.alu("AND", a, 0x7FFFFFFF)
    e = o.ex2(o.fmul(ax, F32_2LOG2E, False), False)
    q = o.frcp(o.fadd(e, F32_ONE, False), False)
    r = o.ffma(q, F32_NEG_TWO, F32_ONE, False)
    r = o.alu("SEL", ax, r, o.alu("LTU", ax, 0x3C800000))
    r = o.alu("OR", r, o.alu("AND", a, 0x80000000))
    return o.alu("SEL", F32_NAN, r, o.alu("LTU", F32_INF, ax))


class NpOps:
    """The ops interface on numpy uint64 arrays of f32 bit patterns (the interpreter)."""

    def __init__(self, shape):
        self.b = NpBuilder(shape)

    def alu(self, op, a, b=None, c=None):
        return self.b.op(op, a, b, c).v

    def _f(self, x):
        return self.b._v(x).astype(np.uint64)

    def fadd(self, a, b, ftz):
        return _F().fadd(self._f(a), self._f(b), ftz=ftz).astype(np.uint64)

    def fmul(self, a, b, ftz):
        return _F().fmul(self._f(a), self._f(b), ftz=ftz).astype(np.uint64)

    def fdiv(self, a, b, ftz):
        return _F().fdiv(self._f(a), self._f(b), ftz=ftz).astype(np.uint64)

    def ffma(self, a, b, c, ftz):
        return _F().ffma(self._f(a), self._f(b), self._f(c), ftz=ftz).astype(np.uint64)

    def frcp(self, a, ftz):
        return _F().frcp(self._f(a), ftz=ftz).astype(np.uint64)

    def fsqrt(self, a, ftz):
        return _F().fsqrt(self._f(a), ftz=ftz).astype(np.uint64)

    def ex2(self, a, ftz):
        return _run(ex2_f32, self._f(a), ftz)


def _F():
    from . import floats
    return floats


# -------------------------------------------------------------------------------------------------
# the interpreter's entry points (numpy uint64 arrays of raw bits, as `floats`)


def _run(fn, a, *args):
    a = np.asarray(a, dtype=np.uint64)
    b = NpBuilder(a.shape)
    return fn(b, Lanes(a & M32), *args).v


def ex2(a, *, ftz=False):
    """ex2.approx{.ftz}.f32 of f32 bit patterns (see `ex2_f32`)."""
    return _run(ex2_f32, a, ftz)


#: PTX op -> its composite definition (op, a, ftz)
COMPOSITE = {"rsqrt": rsqrt_f32, "tanh": lambda o, a, ftz=False: tanh_f32(o, a)}
#: PTX op -> its fixed-point program on the builder interface (b, x, ftz)
FIXED_POINT = {"ex2": ex2_f32, "lg2": lg2_fx, "sin": lambda b, x, ftz=False: sincos_fx(b, x, ftz, True),
               "cos": lambda b, x, ftz=False: sincos_fx(b, x, ftz, False)}


M64 = (1 << 64) - 1


def rcp_f64(a):
    """rcp.approx.ftz.f64 of f64 bit patterns: rcp.rn.f64(a) (a subnormal a flushed to a zero of
    its sign first) rounded half up to its upper word, the lower word zero (a subnormal result
    flushed to a zero of its sign): relative error below 2^-21 (a gross approximation, as PTX
    calls it; libdevice refines it by fma)."""
    a = np.asarray(a, dtype=np.uint64)
    a = np.where(a & np.uint64(0x7FF0000000000000), a, a & np.uint64(0x8000000000000000))
    r = np.asarray(_F().frcp(a, width=64), dtype=np.uint64)
    rh = ((r >> np.uint64(32)) + ((r & np.uint64(M32)) >> np.uint64(31))) & np.uint64(M32)
    rh = np.where(rh & np.uint64(0x7FF00000), rh, rh & np.uint64(0x80000000))
    return rh << np.uint64(32)


def rsqrt_f64(a):
    """rsqrt.approx.f64: rcp.rn.f64(sqrt.rn.f64(a)) (relative error below 2^-52)."""
    F = _F()
    return np.asarray(F.frcp(F.fsqrt(np.asarray(a, dtype=np.uint64), width=64), width=64), dtype=np.uint64)


def approximate(op: str, a, *, ftz: bool = False):
    """The result bits of `op`.approx{.ftz}.f32 (op: ex2, lg2, sin, cos, tanh, rsqrt) on f32 bit
    patterns `a` (numpy array or int): the definitions above, as every engine computes them."""
    arr = np.asarray(a, dtype=np.uint64) & M32
    if op in FIXED_POINT:
        return _run(FIXED_POINT[op], arr, ftz)
    fn = COMPOSITE.get(op)
    if fn is None:
        raise ValueError(f"no approximate definition for {op!r}")
    return np.asarray(fn(NpOps(arr.shape), arr, ftz), dtype=np.uint64) & M32
