"""f32 div, rcp and sqrt as short sequences on the float unit (issue 22), for machines whose unit
has FFMA and FMUL (`UNIT_OPS`): the same results as the soft-float routines (`f32.div`, `rcp`,
`sqrt`), bit for bit, for every operand, rounding mode and `.ftz`.

The float unit does the arithmetic in round-to-nearest on normalised operands, where nothing
overflows or underflows; integer micro-ops do the rest, as in the soft-float routines, with which
these share their parts (`f32.unpack_norm32`, the special cases, `denorm`/`round30`/`pack32`):

* the operands' significands as f32 values in [1, 2) (subnormals normalised by `CLZ`), the result's
  exponent, the special cases (zeros, infinities, NaN: the interpreter's canonical NaN);
* a seed by integer arithmetic on the bit pattern (`DIV_SEED`, `RSQRT_SEED`), refined on the unit
  until the approximation q1 of the significand's quotient or root X in [1, 2) is *faithful*:
  |q1 - X| < u = 2^-23 (one of the two floats around X);
* an exact remainder from one more FFMA (r = A - B*q1, or q1*q1 - M), whose sign says on which
  side of q1 X lies, and whose size against B*u/2 (q1*u) on which side of the midpoint:
  W = 4 q1/u + d, d in {0, +-1, +-3}, is X rounded to odd at u/4 (d odd: strictly between
  two multiples of u/2). Every rounding breakpoint of the result -- a float or a midpoint of the
  u-grid, or of the coarser grid of a subnormal result -- is a multiple of u/2, so rounding W in
  any mode at u or coarser is rounding X (docs/softfloat.md, "Sequences on the float unit");
* that rounding, subnormal results and overflow by the soft-float path (`denorm`, `round30`,
  `pack32`).

A quotient of two 24-bit significands is never a midpoint of the u-grid and a square root never
is, so |r| = B*u/2 (|d| = q1*u for the root, tested with the strictness the multiples of 2^-46
allow) cannot decide a tie wrongly. docs/softfloat.md has the error bounds of each step; `check`
runs the sequences against the interpreter on millions of operands
(`python -m qwengpu.assembler.softfloat.unit`).
"""
from __future__ import annotations

from .builder import ABS, F32_INF, F32_NAN, F32_ONE, FROUND, S31, routine
from .f32 import special_div32, unpack_norm32, check_mode, denorm, flush32, ftz_out32, pack32, round30

#: the float-unit micro-ops the sequences need
UNIT_OPS = frozenset({"FFMA", "FMUL"})

#: y0 = DIV_SEED - bits(B) ~ 1/B for B in [1, 2): relative error below 0.0506 (2^-4.30) over every
#: significand (the best such constant, searched exhaustively; `tests/test_unit_sequences.py`)
DIV_SEED = 0x7EF31200
#: g0 = RSQRT_SEED - bits(M)/2 ~ 1/sqrt(M) for M in [1, 4): relative error below 0.0343 (2^-4.87)
RSQRT_SEED = 0x5F376400

F32_HALF = 0x3F000000
_RN = {"rnd": "rn"}


def has_sequences(fpu_ops) -> bool:
    """Whether a float unit with `fpu_ops` runs these sequences."""
    return UNIT_OPS <= set(fpu_ops)


def _ffma(b, x, y, z):
    return b.fpu("FFMA", x, y, z, **_RN)


def _rounded(b, w, ek, mode, sign):
    """The f32 word of W * 2^(ek - 126 - 25) (W in [2^25, 2^26), its bit 0 a sticky bit) in `mode`:
    subnormal results, overflow and the sign as the soft-float routines do."""
    n, ek = denorm(b, w << 5, ek)
    return pack32(b, ek, round30(b, n, mode, sign), mode, sign)


def _div_unit32(b, a, c, mode, ftz, unit_dividend=False):
    if ftz:
        a, c = flush32(b, a), flush32(b, c)
    sign = (a ^ c) & S31
    ma, ea, _ = unpack_norm32(b, a, a & F32_INF)
    mc, ec, _ = unpack_norm32(b, c, c & F32_INF)
    u = b.ltu(ma, mc)                                # A = 2^u * a's significand in [B, 2B): X = A/B in [1, 2)
    big_b = ((mc << 1) >> 9) | F32_ONE               # B in [1, 2) (garbage for a zero: a special case)
    big_a = (((ma << 1) >> 9) | F32_ONE) + (u << 23)
    neg_b = big_b | S31
    y0 = b.sub(DIV_SEED, big_b)                      # 1 - B*y0 = e, |e| < 2^-4.3
    e = _ffma(b, neg_b, y0, F32_ONE)
    t = _ffma(b, e, e, e)
    y = _ffma(b, y0, t, y0)                          # y0 (1 + e + e^2): B*y = 1 - e^3, |e^3| < 2^-12.9
    q0 = y + (u << 23) if unit_dividend else b.fpu("FMUL", big_a, y, **_RN)    # 1.0 / B: A*y is exact
    r0 = _ffma(b, neg_b, q0, big_a)
    q1 = _ffma(b, r0, y, q0)                         # faithful: |q1 - X| < 2^-24.8 + u/2
    r1 = _ffma(b, neg_b, q1, big_a)                  # A - B*q1, exact; its sign is X - q1's
    mag = r1 & ABS
    d = b.ltu(0, mag) + (b.ltu(big_b - (24 << 23), mag) << 1)     # |X - q1| beyond u/2: |r1| > B*u/2
    n = (q1 - F32_HALF) << 2                         # q1/u * 4 (q1 in [1, 2])
    w = b.sel(r1 >> 31, b.sub(n, d), n + d)
    res = _rounded(b, w, (ea - ec) - u + 126, mode, sign)
    sp, sv = special_div32(b, a, c, sign)
    res = b.sel(sp, sv, res)
    return ftz_out32(b, res) if ftz else res


def _sqrt_unit32(b, a, mode, ftz):
    if ftz:
        a = flush32(b, a)
    m, ea, _ = unpack_norm32(b, a, a & F32_INF)
    par = ~ea & 1                                    # M = 2^par * a's significand in [1, 4): an even exponent
    big_m = (((m << 1) >> 9) | F32_ONE) + (par << 23)
    neg_m = big_m | S31
    g0 = b.sub(RSQRT_SEED, big_m >> 1)               # ~ 1/sqrt(M), relative error < 2^-4.87
    nh0 = (g0 - (1 << 23)) | S31                     # -g0/2
    s0 = b.fpu("FMUL", big_m, g0, **_RN)
    e0 = _ffma(b, s0, nh0, F32_HALF)                 # Goldschmidt: s1 ~ sqrt(M), -nh1 ~ 1/(2 sqrt(M))
    s1 = _ffma(b, s0, e0, s0)                        # (relative errors ~1.5 e0^2 < 2^-9.2)
    nh1 = _ffma(b, nh0, e0, nh0)
    t1 = _ffma(b, s1, s1, neg_m)                     # s - (s^2 - M) * h, twice: error * 2^-9.2 + s's own
    s2 = _ffma(b, t1, nh1, s1)
    t2 = _ffma(b, s2, s2, neg_m)
    s3 = _ffma(b, t2, nh1, s2)                       # faithful: |s3 - X| < 2^-25.6 + u/2
    dd = _ffma(b, s3, s3, neg_m)                     # s3^2 - M: exact where it is below 2^-22
    mag = dd & ABS
    su = s3 - (23 << 23)                             # s3 * u
    nz = b.ltu(0, mag)
    n = (s3 - F32_HALF) << 2
    # X above s3 (dd < 0): beyond the midpoint iff M - s3^2 > s3*u; below: iff s3^2 - M >= s3*u
    above = n + (nz + (b.ltu(su, mag) << 1))
    below = b.sub(n, nz + (b.leu(su, mag) << 1))
    w = b.sel(dd >> 31, above, below)
    ek = (ea + 125) >> 1                             # a root is never subnormal and never overflows
    res = (ek << 23) + round30(b, w << 5, mode, 0)
    # +-0 -> itself, +inf -> +inf, anything else special (negative, NaN) -> NaN
    sp = b.leu(0x7F7FFFFF, a - 1)
    keep = b.eq(a << 1, 0) | b.eq(a, F32_INF)
    return b.sel(sp, b.sel(keep, a, F32_NAN), res)


def div(em, a, b, rnd="rn", ftz=False):
    """div.rnd{.ftz}.f32 on the float unit (`f32.div`'s results)."""
    mode = check_mode(rnd, FROUND, "div.f32")
    return routine(em, lambda bl, a, c: _div_unit32(bl, a, c, mode, ftz), a, b)


def rcp(em, a, rnd="rn", ftz=False):
    """rcp.rnd{.ftz}.f32 on the float unit (`f32.rcp`'s results)."""
    mode = check_mode(rnd, FROUND, "rcp.f32")
    return routine(em, lambda bl, a: _div_unit32(bl, F32_ONE, a, mode, ftz, unit_dividend=True), a)


def sqrt(em, a, rnd="rn", ftz=False):
    """sqrt.rnd{.ftz}.f32 on the float unit (`f32.sqrt`'s results)."""
    mode = check_mode(rnd, FROUND, "sqrt.f32")
    return routine(em, lambda bl, a: _sqrt_unit32(bl, a, mode, ftz), a)


# ---------------------------------------------------------------------------------------------
# the check against the interpreter (`python -m qwengpu.assembler.softfloat.unit`)

SEQUENCES = {"div": (div, 2), "rcp": (rcp, 1), "sqrt": (sqrt, 1)}


def run_lanes(op: str, rnd: str, ftz: bool, *operands):
    """The sequence `op` (div, rcp, sqrt) built once and run on numpy arrays of f32 bit patterns,
    one element a lane (`emit.Recorder.evaluate_lanes`: ALU ops and `uops.fpu_eval`'s semantics)."""
    from ..emit import Recorder
    fn, nin = SEQUENCES[op]
    rec = Recorder()
    ins = [rec.input() for _ in range(nin)]
    out = fn(rec.emitter(), *ins, rnd=rnd, ftz=ftz)
    return rec.evaluate_lanes({s.value: x for s, x in zip(ins, operands)}, [out])[0]


def reference(op: str, rnd: str, ftz: bool, *operands):
    """The interpreter's result (`qwengpu.interp.floats`)."""
    from qwengpu.interp import floats as F
    fn = {"div": F.fdiv, "rcp": F.frcp, "sqrt": F.fsqrt}[op]
    return fn(*operands, width=32, rnd=rnd, ftz=ftz).astype("uint64")


def hard_operands(op: str, n: int, rng):
    """n operand tuples (arrays of f32 bit patterns) for `op`, a mix of: random bit patterns,
    random normal values of every exponent, subnormals, specials, and the hard cases -- quotients
    near the overflow and underflow thresholds, divisors that are powers of two (exact subnormal
    ties), a == b, exact quotients, quotients and roots within 2^-40 of a midpoint, exact squares."""
    import numpy as np

    def bits(k):
        return rng.integers(0, 1 << 32, k, dtype=np.uint64)

    def normal(k, lo=1, hi=254):
        return (rng.integers(0, 2, k, dtype=np.uint64) << np.uint64(31)) | \
            (rng.integers(lo, hi + 1, k, dtype=np.uint64) << np.uint64(23)) | rng.integers(0, 1 << 23, k, dtype=np.uint64)

    def f32(x):
        with np.errstate(over="ignore"):
            return np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)

    def sig(k, width):           # odd integers of exactly `width` bits
        return (rng.integers(0, 1 << (width - 1), k, dtype=np.uint64) | np.uint64(1 << (width - 1))) | np.uint64(1)

    k = n // 8
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FFFFFFF, 0xFFC00001, 1, 0x80000001,
                         0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x3F800000, 0xBF800000, 0x00400000], dtype=np.uint64)
    if op == "div":
        parts = [(bits(k), bits(k)), (normal(k), normal(k)), (normal(k, 0, 0), normal(k)), (normal(k), normal(k, 0, 0))]
        a = normal(k, 100, 154)                                   # near the thresholds: |ea - eb| ~ 127, 149
        bexp = (a >> np.uint64(23) & np.uint64(0xFF)).astype(np.int64) + rng.choice([-151, -150, -149, -127, -126, -125,
                                                                               126, 127, 128], k)
        bb = normal(k, 1, 1) & np.uint64(0x807FFFFF) | (np.clip(bexp, 0, 254).astype(np.uint64) << np.uint64(23))
        parts.append((a, bb))
        a = normal(k, 1, 60)                                      # powers of two: exact (subnormal) ties
        parts.append((np.concatenate([a[: k // 2], normal(k - k // 2, 0, 0)]),
                      rng.integers(1, 254, k, dtype=np.uint64) << np.uint64(23) | (bits(k) & np.uint64(S31))))
        x = normal(k)                                             # a == b, exact quotients
        w = rng.integers(1, 24, k)
        q = np.array([int(rng.integers(0, 1 << int(24 - v))) | 1 for v in w], dtype=np.float64)
        bs = np.array([float(int(rng.integers(0, 1 << int(v))) | (1 << int(v) - 1)) for v in w])
        scale = np.ldexp(1.0, rng.integers(-60, 60, k))
        parts.append((np.concatenate([x[: k // 4], f32(bs[k // 4:] * q[k // 4:] * scale[k // 4:])]),
                      np.concatenate([x[: k // 4], f32(bs[k // 4:] * scale[k // 4:])])))
        bm = sig(k, 24).astype(np.float64)                        # near midpoints: a = RN(b * m), m 25 bits odd
        m = sig(k, 25).astype(np.float64)
        e = rng.integers(-40, 40, k)
        a = f32(np.ldexp(bm * m, e - 48))
        parts.append((a, f32(np.ldexp(bm, -23))))
        rest = n - sum(len(p[0]) for p in parts)
        grid = np.array(np.meshgrid(specials, specials)).reshape(2, -1)
        parts.append((np.concatenate([grid[0], bits(rest)])[:rest], np.concatenate([grid[1], bits(rest)])[:rest]))
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(2))
    parts = [bits(3 * k), normal(k), normal(k, 0, 0), normal(k, 1, 3), normal(k, 250, 254)]
    if op == "sqrt":                                              # exact squares and roots near midpoints
        # M = s (s - u) with s, s - u floats (|s^2 - M| = s*u exactly): 1 + u and 4 - 2u in every binade pair
        edge = np.array([0x3F800001, 0x407FFFFF], dtype=np.uint64)
        parts.append((edge[:, None] + (np.arange(-63, 64, dtype=np.int64) * (2 << 23)).astype(np.uint64)).reshape(-1))
        s = sig(k, 12).astype(np.float64)
        parts.append(f32(np.ldexp(s * s, rng.integers(-140, 100, k))))
        m = sig(k, 25).astype(np.float64)
        parts.append(f32(np.ldexp(m * m, rng.integers(-120, 80, k) * 2)))
    else:
        parts.append(rng.integers(1, 254, k, dtype=np.uint64) << np.uint64(23))
        parts.append(normal(k, 252, 254))
    parts.append(specials)
    x = np.concatenate(parts)
    return (np.concatenate([x, bits(max(0, n - len(x)))])[:n],)


def check(n: int = 1_000_000, seed: int = 1, ops=("div", "rcp", "sqrt"), out=print) -> int:
    """Every sequence in every rounding mode, with and without .ftz, on n operand tuples each
    (`hard_operands`) against the interpreter. Returns the number of mismatches (0)."""
    import numpy as np
    bad = 0
    for op in ops:
        for rnd in FROUND:
            for ftz in (False, True):
                rng = np.random.default_rng([seed, FROUND.index(rnd), ftz, len(op)])
                xs = hard_operands(op, n, rng)
                got, want = run_lanes(op, rnd, ftz, *xs), reference(op, rnd, ftz, *xs)
                wrong = np.nonzero(got != want)[0]
                bad += len(wrong)
                example = "" if not len(wrong) else "  e.g. " + ", ".join(
                    f"{op}({', '.join(hex(int(x[i])) for x in xs)}) = {int(got[i]):#x}, want {int(want[i]):#x}"
                    for i in wrong[:3])
                out(f"{op}.{rnd}{'.ftz' if ftz else ''}.f32: {len(xs[0])} operands, {len(wrong)} mismatches{example}")
    return bad


if __name__ == "__main__":
    import argparse
    import sys
    ap = argparse.ArgumentParser(description="check the float unit's div/rcp/sqrt sequences against the interpreter")
    ap.add_argument("-n", type=int, default=1_000_000, help="operand tuples per operation, mode and .ftz")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", nargs="*", default=["div", "rcp", "sqrt"])
    args = ap.parse_args()
    sys.exit(1 if check(args.n, args.seed, tuple(args.ops)) else 0)
