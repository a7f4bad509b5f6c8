"""Per-opcode edge cases of the reference interpreter, through the public `run` API."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from ptxkit import bits_f32, f32_bits, unary_or_binary

INT_MIN = 0x80000000
M32 = 0xFFFFFFFF


def op(instr, dst, srcs, *inputs):
    return unary_or_binary(instr, dst, srcs, [list(v) for v in inputs])


def s32(x):
    return x - (1 << 32) if x >> 31 else x


def test_signed_division_edges():
    got = op("div.s32", "s32", ["s32", "s32"], [INT_MIN, 7, -7 & M32, 5], [M32, 0, 2, -2 & M32])
    # INT_MIN / -1 wraps to INT_MIN; x / 0 = -1 (all ones); division truncates toward zero
    assert got == [INT_MIN, M32, -3 & M32, -2 & M32]
    got = op("rem.s32", "s32", ["s32", "s32"], [INT_MIN, 7, -7 & M32, 5], [M32, 0, 2, -2 & M32])
    assert got == [0, 7, -1 & M32, 1]


def test_unsigned_division_by_zero():
    assert op("div.u32", "u32", ["u32", "u32"], [5, 0, M32, 9], [0, 0, 1, 4]) == [M32, M32, M32, 2]
    assert op("rem.u32", "u32", ["u32", "u32"], [5, 0, M32, 9], [0, 0, 1, 4]) == [5, 0, 0, 1]


def test_abs_neg_of_int_min():
    assert op("abs.s32", "s32", ["s32"], [INT_MIN, M32, 5, 0]) == [INT_MIN, 1, 5, 0]
    assert op("neg.s32", "s32", ["s32"], [INT_MIN, 1, 0, M32]) == [INT_MIN, M32, 0, 1]


def test_shift_counts_at_and_beyond_width():
    assert op("shl.b32", "b32", ["b32", "u32"], [1, 1, 1, M32], [31, 32, 1000, 0]) == [1 << 31, 0, 0, M32]
    assert op("shr.u32", "u32", ["u32", "u32"], [M32] * 4, [31, 32, 33, 0]) == [1, 0, 0, M32]
    assert op("shr.s32", "s32", ["s32", "u32"], [INT_MIN, INT_MIN, 0x40000000, M32], [31, 100, 40, 3]) == \
        [M32, M32, 0, M32]


def test_clz_popc_bfind_brev_of_zero_and_extremes():
    assert op("clz.b32", "u32", ["b32"], [0, 1, M32, 0x00010000]) == [32, 31, 0, 15]
    assert op("popc.b32", "u32", ["b32"], [0, 1, M32, 0xF0F0]) == [0, 1, 32, 8]
    assert op("bfind.u32", "u32", ["u32"], [0, 1, M32, 0x00010000]) == [M32, 0, 31, 16]
    assert op("bfind.s32", "u32", ["s32"], [0, M32, INT_MIN, 0x7FFFFFFF]) == [M32, M32, 30, 30]
    assert op("bfind.shiftamt.u32", "u32", ["u32"], [0, 1, M32, 0x00010000]) == [M32, 31, 0, 15]
    assert op("brev.b32", "b32", ["b32"], [0, 1, M32, 0x12345678]) == [0, 1 << 31, M32, 0x1E6A2C48]


def test_bfe_bfi():
    # bfe.u32 d, a, pos, len; bfe.s32 sign-extends the field
    got = op("bfe.u32", "u32", ["u32", "u32", "u32"], [0xABCD1234] * 4, [4, 28, 0, 8], [8, 8, 0, 40])
    assert got == [0x23, 0xA, 0, 0x00ABCD12]
    got = op("bfe.s32", "s32", ["s32", "u32", "u32"], [0xABCD1234] * 4, [28, 4, 0, 40], [4, 4, 0, 8])
    assert got == [0xFFFFFFFA, 3, 0, M32]
    got = op("bfi.b32", "b32", ["b32", "b32", "u32", "u32"], [0xF] * 4, [0] * 4, [0, 4, 30, 0], [4, 2, 4, 0])
    assert got == [0xF, 0x30, 0xC0000000, 0]


def test_prmt_modes():
    a, b = 0x33221100, 0x77665544
    assert op("prmt.b32", "b32", ["b32", "b32", "b32"], [a] * 4, [b] * 4, [0x3210, 0x7654, 0x0000, 0x8888]) == \
        [a, b, 0, 0]
    assert op("prmt.b32", "b32", ["b32", "b32", "b32"], [0x80] * 4, [0] * 4, [0x8888, 0x0008, 0x1, 0x0]) == \
        [M32, 0x808080FF, 0x80808000, 0x80808080]
    assert op("prmt.b32.f4e", "b32", ["b32", "b32", "b32"], [a] * 4, [b] * 4, [0, 1, 2, 3]) == \
        [0x33221100, 0x44332211, 0x55443322, 0x66554433]
    assert op("prmt.b32.ecr", "b32", ["b32", "b32", "b32"], [a] * 4, [b] * 4, [0, 1, 2, 3]) == \
        [0x00000000, 0x11111100, 0x22221100, 0x33221100]


def test_funnel_shift():
    assert op("shf.l.wrap.b32", "b32", ["b32", "b32", "u32"], [0x80000000] * 4, [1] * 4, [1, 33, 0, 32]) == \
        [3, 3, 1, 1]
    assert op("shf.r.clamp.b32", "b32", ["b32", "b32", "u32"], [0] * 4, [0xF0] * 4, [4, 32, 40, 0]) == \
        [0, 0xF0, 0xF0, 0]


def test_mul_hi_wide_and_mad():
    assert op("mul.hi.u32", "u32", ["u32", "u32"], [M32, 1 << 16, 3, 0], [M32, 1 << 16, 5, 7]) == \
        [M32 - 1, 1, 0, 0]
    assert op("mul.hi.s32", "s32", ["s32", "s32"], [M32, INT_MIN, 3, 0], [M32, 2, 5, 7]) == [0, M32, 0, 0]
    got = op("mul.wide.s32", "s64", ["s32", "s32"], [M32, INT_MIN, 3, 0x7FFFFFFF], [2, INT_MIN, 5, 2])
    assert got == [(-2) & (2**64 - 1), 1 << 62, 15, 0xFFFFFFFE]


def test_setp_with_nan_ordered_and_unordered():
    nan = 0x7FC00000
    one = f32_bits(1.0)
    a, b = [nan, one, nan, one], [one, nan, nan, one]
    assert op("setp.ne.f32", "pred", ["f32", "f32"], a, b) == [0, 0, 0, 0]
    assert op("setp.neu.f32", "pred", ["f32", "f32"], a, b) == [1, 1, 1, 0]
    assert op("setp.eq.f32", "pred", ["f32", "f32"], a, b) == [0, 0, 0, 1]
    assert op("setp.nan.f32", "pred", ["f32", "f32"], a, b) == [1, 1, 1, 0]
    assert op("setp.lt.f32", "pred", ["f32", "f32"], a, b) == [0, 0, 0, 0]
    assert op("setp.geu.f32", "pred", ["f32", "f32"], a, b) == [1, 1, 1, 1]


def test_fma_is_correctly_rounded_not_double_rounded():
    e = 2.0 ** -23
    a, b, c = f32_bits(1 + e), f32_bits(1 - e), f32_bits(-1.0)
    got = op("fma.rn.f32", "f32", ["f32", "f32", "f32"], [a] * 4, [b] * 4, [c] * 4)
    assert bits_f32(got[0]) == -(2.0 ** -46)
    # a case where f64 product + add then rounding to f32 double-rounds
    x, y, z = f32_bits(1 + 2 ** -12), f32_bits(1 + 2 ** -12), f32_bits(2 ** -48)
    got = op("fma.rn.f32", "f32", ["f32", "f32", "f32"], [x] * 4, [y] * 4, [z] * 4)
    # exact: 1 + 2^-11 + 2^-24 + 2^-48 -> rounds up to 1 + 2^-11 + 2^-23
    assert got[0] == f32_bits(1 + 2 ** -11 + 2 ** -23)


def test_float_division_sqrt_correctly_rounded():
    a = [f32_bits(1.0), f32_bits(2.0), f32_bits(-0.0), f32_bits(10.0)]
    b = [f32_bits(3.0), f32_bits(0.0), f32_bits(5.0), f32_bits(3.0)]
    got = op("div.rn.f32", "f32", ["f32", "f32"], a, b)
    want = (np.array([1, 2, -0.0, 10], np.float32) / np.array([3, 0, 5, 3], np.float32)).view(np.uint32)
    assert got == [int(x) for x in want]
    got = op("sqrt.rn.f32", "f32", ["f32"], [f32_bits(2.0), f32_bits(-1.0), f32_bits(0.0), f32_bits(1e30)])
    assert bits_f32(got[0]) == float(np.sqrt(np.float32(2.0)))
    assert got[1] == 0x7FFFFFFF          # canonical NaN
    assert got[3] == int(np.sqrt(np.float32(1e30)).view(np.uint32))


def test_cvt_float_to_int_saturates_and_nan_is_zero():
    vals = [f32_bits(1e20), f32_bits(-1e20), 0x7FC00000, f32_bits(-2.5)]
    assert op("cvt.rzi.s32.f32", "s32", ["f32"], vals) == [0x7FFFFFFF, INT_MIN, 0, -2 & M32]
    assert op("cvt.rni.s32.f32", "s32", ["f32"], vals) == [0x7FFFFFFF, INT_MIN, 0, -2 & M32]
    assert op("cvt.rzi.u32.f32", "u32", ["f32"], vals) == [M32, 0, 0, 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, M32), min_size=8, max_size=8))
def test_integer_ops_match_numpy(xs):
    a, b = xs[:4], xs[4:]
    na, nb = np.array(a, np.uint32), np.array(b, np.uint32)
    assert op("add.s32", "s32", ["s32", "s32"], a, b) == [int(x) for x in na + nb]
    assert op("mul.lo.s32", "s32", ["s32", "s32"], a, b) == [int(x) for x in na * nb]
    assert op("xor.b32", "b32", ["b32", "b32"], a, b) == [int(x) for x in na ^ nb]
    assert op("min.s32", "s32", ["s32", "s32"], a, b) == \
        [int(x) for x in np.minimum(na.view(np.int32), nb.view(np.int32)).view(np.uint32)]
    assert op("max.u32", "u32", ["u32", "u32"], a, b) == [int(x) for x in np.maximum(na, nb)]
    nz = [y or 1 for y in b]
    q = [int(np.trunc(s32(x) / s32(y))) & M32 if not (x == INT_MIN and y == M32) else INT_MIN
         for x, y in zip(a, nz)]
    # exact integer truncating division (avoid float rounding for large values)
    q = [((abs(s32(x)) // abs(s32(y))) * (1 if (s32(x) < 0) == (s32(y) < 0) else -1)) & M32 for x, y in zip(a, nz)]
    assert op("div.s32", "s32", ["s32", "s32"], a, nz) == q


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=8, max_size=8))
def test_float_add_mul_match_numpy(xs):
    a = np.array(xs[:4], np.float32)
    b = np.array(xs[4:], np.float32)
    bits = lambda arr: [int(x) for x in arr.view(np.uint32)]
    with np.errstate(all="ignore"):
        s, p = a + b, a * b
    got_s = op("add.rn.f32", "f32", ["f32", "f32"], bits(a), bits(b))
    got_p = op("mul.rn.f32", "f32", ["f32", "f32"], bits(a), bits(b))
    for g, w in zip(got_s + got_p, list(s) + list(p)):
        if np.isnan(w):
            assert g == 0x7FFFFFFF
        else:
            assert g == int(np.float32(w).view(np.uint32))


def _half_ref(op_name, a_bits, b_bits):
    """add/mul of two halves, correctly rounded: both are exact in float64, and NumPy rounds a
    float64 to half correctly (ties to even)."""
    a, b = (np.array([x], dtype=np.uint16).view(np.float16)[0].astype(np.float64) for x in (a_bits, b_bits))
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.float16(a + b if op_name == "add" else a * b)
    return int(np.array([r]).view(np.uint16)[0])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 0xFFFF), min_size=8, max_size=8), st.sampled_from(["add", "mul"]))
def test_f16_and_f16x2_add_mul_round_correctly(halves, op_name):
    a, b = halves[:4], halves[4:]
    got = op(f"{op_name}.f16", "b16", ["b16", "b16"], a, b)
    for x, y, g in zip(a, b, got):
        want = _half_ref(op_name, x, y)
        nan = (want & 0x7C00) == 0x7C00 and want & 0x3FF
        assert (g & 0x7C00 == 0x7C00 and g & 0x3FF) if nan else g == want, (hex(x), hex(y), hex(g), hex(want))
    # f16x2: the same per half, the low halves from `a`, the high ones from `b`
    pairs = [x | y << 16 for x, y in zip(a, b)]
    got2 = op(f"{op_name}.rn.f16x2", "b32", ["b32", "b32"], pairs, pairs[::-1])
    for k, g in enumerate(got2):
        for half, (x, y) in ((g & 0xFFFF, (a[k], a[3 - k])), (g >> 16, (b[k], b[3 - k]))):
            want = _half_ref(op_name, x, y)
            if not ((want & 0x7C00) == 0x7C00 and want & 0x3FF):
                assert half == want


def test_f16_fma_neg_min_and_compare():
    one, two, half_ulp = 0x3C00, 0x4000, 0x1000            # 1.0, 2.0, 2**-11
    # fma rounds once: 1 * 2**-11 + 1 is a tie that rounds to even (1.0); 1*1 + 2 = 3; -0 * 0 + 0 = +0
    got = op("fma.rn.f16", "b16", ["b16"] * 3, [one, one, 0x8000, one], [half_ulp, one, 0, 0x3C01], [one, two, 0, one])
    assert got[:3] == [one, 0x4200, 0] and got[3] == 0x4000      # 1 * (1 + 2**-10) + 1 = 2 + 2**-10 -> 2.0 (tie, even)
    assert op("neg.f16", "b16", ["b16"], [one, 0x8000, 0x7C00, 0]) == [0xBC00, 0, 0xFC00, 0x8000]
    assert op("min.f16", "b16", ["b16", "b16"], [one, 0xBC00, 0x7E00, two], [two, one, one, 0x7E00]) == \
        [one, 0xBC00, one, two]
    assert op("setp.lt.f16", "pred", ["b16", "b16"], [one, two, 0x7E00, 0x8000], [two, one, one, 0]) == [1, 0, 0, 0]


def test_half_forms_that_ptx_lacks_are_refused():
    import pytest

    from qwengpu.ptx.isa import PTXUnsupported
    for bad, nsrc in (("div.rn.f16", 2), ("sqrt.rn.f16", 1), ("add.rz.f16", 2)):
        with pytest.raises(PTXUnsupported, match="f16"):
            op(bad, "b16", ["b16"] * nsrc, *[[0] * 4] * nsrc)
