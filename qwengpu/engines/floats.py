"""Exact float32 arithmetic for the compact engine's numba loops: the products, exp, SiLU and
RMSNorm's scale that the stock forward computes, bit for bit where the CPU would take another path.

- `tiny_product`: fl32(w * x) for a subnormal input (a SiLU tail), without the CPU's ~150-cycle
  microcode assist: the exact product in float64 rounded by hand on the subnormal grid.
- `expf`: the C library's float32 exp (glibc's, which numba calls for np.exp), bit for bit, as
  straight-line code that vectorises; `silu` and `sigmoid` on it.
- `rms`: 1 / sqrt(mean(h^2) + eps), the squares summed in float64.

`njit` is numba's (or, without numba, a stand-in that says how to install it when called).
"""
from __future__ import annotations

import numpy as np

try:
    import numba
    from llvmlite import ir as llvm_ir
    from numba import njit
    from numba.core import types as nb_types
    from numba.extending import intrinsic
except ImportError:                                   # pragma: no cover - numba is a model dependency
    numba = None

    def intrinsic(f):
        return f

    def njit(*a, **k):
        def wrap(f):
            def missing(*args, **kw):
                raise ImportError("the compact engine needs numba: pip install 'qwengpu[model]'")
            return missing
        return wrap(a[0]) if a and callable(a[0]) else wrap

F32 = np.float32
ONE = np.float32(1.0)
ZERO = np.float32(0.0)

#: the smallest normal float32: a product (or a factor) below it costs the CPU a microcode assist
#: (~150 cycles); `tiny_product` gives such products exactly, cheaply (`_tiny_thresholds`)
SMALLEST_NORMAL = 2.0 ** -126
SCALE_UP = 2.0 ** 149                  # a float32 subnormal times this is its integer mantissa
SCALE_DOWN = 2.0 ** -149


@intrinsic
def _f32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the int32 `bits`."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.FloatType())
    return nb_types.float32(nb_types.int32), codegen


@njit(cache=True, error_model="numpy", inline="always")
def tiny_product(w, xs):
    """fl32(w * x), the float32 product, for an input x given as xs = float64(x) * 2^149, without
    the CPU's subnormal assist: the exact product in float64, rounded to nearest even on the
    subnormal grid (2^-149) by hand when it is below 2^-126, else by one conversion."""
    p = np.float64(w) * xs                       # exact: 24 + 24 significant bits
    if abs(p) < 8388608.0:                       # 2^23 grid steps: a subnormal float32 (or 0)
        bits = np.int32(np.rint(abs(p)))         # a tie goes to the even mantissa, as the FPU does
        if p < 0:
            bits = bits | np.int32(-2147483648)  # the sign bit (-0 for an underflow to 0)
        return _f32_from_bits(bits)
    return F32(p * SCALE_DOWN)




@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (float64)."""
    def codegen(context, builder, signature, args):
        f64 = llvm_ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [f64], fnty=llvm_ir.FunctionType(f64, [f64] * 3))
        return builder.call(fn, args)
    return nb_types.float64(nb_types.float64, nb_types.float64, nb_types.float64), codegen


@intrinsic
def _f64_from_bits(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.DoubleType())
    return nb_types.float64(nb_types.uint64), codegen


@intrinsic
def _bits_of_f64(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.IntType(64))
    return nb_types.uint64(nb_types.float64), codegen


def _exp2_table() -> np.ndarray:
    """2^(i/32) rounded to float64, less i << 47 (the exponent `expf` adds back), i = 0..31."""
    from decimal import Decimal, getcontext
    getcontext().prec = 50
    return np.array([np.float64(float(Decimal(2) ** (Decimal(i) / 32))).view(np.uint64) - np.uint64(i << 47)
                     for i in range(32)], np.uint64)


# the C library's float32 exp (glibc's, which numba calls for np.exp): exp(x) = 2^(k/32) 2^(r/32)
# with k = round(x 32 / ln 2), the cubic in r and the product in float64, rounded once to float32
EXP2_TABLE = _exp2_table()
EXP_INV_LN2_N = float.fromhex("0x1.71547652b82fep+0") * 32
EXP_SHIFT = float.fromhex("0x1.8p+52")           # adding it rounds to an integer, kept in the low bits
EXP_C0 = float.fromhex("0x1.c6af84b912394p-5") / 32 ** 3
EXP_C1 = float.fromhex("0x1.ebfce50fac4f3p-3") / 32 ** 2
EXP_C2 = float.fromhex("0x1.62e42ff0c52d6p-1") / 32
EXP_OVERFLOW = F32(float.fromhex("0x1.62e42ep6"))  # above it exp overflows float32


@njit(cache=True, error_model="numpy", inline="always")
def expf(x):
    """The C library's float32 exp, bit for bit, for x in [-17, 89] (SiLU's range), as straight-line
    code that vectorises (a call to the library does not): glibc's algorithm with the fused
    multiply-adds of its FMA build, which the dynamic linker picks on this CPU. Checked against
    numba's np.exp (the library's) on every float32 of [-17, 88.72] (`tests/test_engines.py`
    samples it)."""
    xd = np.float64(x)
    kd = _fma(EXP_INV_LN2_N, xd, EXP_SHIFT)
    ki = _bits_of_f64(kd)
    kd -= EXP_SHIFT
    r = _fma(EXP_INV_LN2_N, xd, -kd)
    s = _f64_from_bits(EXP2_TABLE[ki & np.uint64(31)] + (ki << np.uint64(47)))
    y = _fma(_fma(EXP_C0, r, EXP_C1), r * r, _fma(EXP_C2, r, 1.0))
    e = F32(y * s)
    return F32(np.inf) if x > EXP_OVERFLOW else e


@njit(cache=True, error_model="numpy", inline="always")
def silu(x):
    """x / (1 + exp(-x)) in float32, branch-free so that loops over it vectorise."""
    e = expf(min(max(-x, F32(-17.0)), F32(89.0)))      # clamped: exp's range (the ends are selected below)
    v = x / (ONE + e)
    # x >= 17: 1 + exp(-x) rounds to 1 (SiLU(x) == x); x <= -89: exp(-x) overflows (-0); +-0: itself
    return x if (x == 0 or x >= F32(17.0)) else (x * ZERO if x <= F32(-89.0) else v)


@njit(cache=True, error_model="numpy", inline="always")
def sigmoid(x):
    return ONE / (ONE + np.exp(-x))


@njit(cache=True, error_model="numpy", inline="always")
def rms(h, eps):
    """1 / sqrt(mean(h^2) + eps). The squares are summed in float64: a residual carries hundreds of
    features of ~1e-19 (SiLU's tails), whose fp32 squares are subnormal and cost a microcode assist
    each (~100 cycles); their sum is far below the fp32 rounding of the O(1) features' sum."""
    n = h.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    i = 0
    while i + 4 <= n:
        a0 = np.float64(h[i])
        a1 = np.float64(h[i + 1])
        a2 = np.float64(h[i + 2])
        a3 = np.float64(h[i + 3])
        s0 += a0 * a0
        s1 += a1 * a1
        s2 += a2 * a2
        s3 += a3 * a3
        i += 4
    while i < n:
        a0 = np.float64(h[i])
        s0 += a0 * a0
        i += 1
    return ONE / np.sqrt(F32((s0 + s1) + (s2 + s3)) / F32(n) + eps)
