"""The float unit's div, rcp and sqrt sequences (`softfloat.unit`) against the interpreter on
millions of operands: `python -m qwengpu.assembler.softfloat.unitcheck [-n N] [--seed S] [--ops ...]`
(every rounding mode, with and without .ftz; exit status 1 on any mismatch). The sequences are
built once and run on numpy lanes (`emit.Recorder.evaluate_lanes`: the ALU's semantics and
`uops.fpu_eval`'s); `hard_operands` makes the operands."""
from __future__ import annotations

from .builder import FROUND, S31
from .unit import FAST_DIVISOR, FAST_SPAN, div, fast_div, rcp, sqrt

#: op -> (sequence, inputs); `fastdiv` is the division by a hoisted divisor (its short path where
#: it holds, else `div`), built as one straight-line model of what the lowering emits
SEQUENCES = {"div": (div, 2), "rcp": (rcp, 1), "sqrt": (sqrt, 1), "fastdiv": (fast_div, 2)}


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
    """The interpreter's result (`qwengpu.semantics.floats`)."""
    from qwengpu.semantics import floats as F
    fn = {"div": F.fdiv, "rcp": F.frcp, "sqrt": F.fsqrt, "fastdiv": F.fdiv}[op]
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

    if op == "fastdiv":
        return _fast_operands(n, rng)
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


def _fast_operands(n: int, rng):
    """Operands for the short division: `div`'s hard operands (half of them), and the same
    significands and signs moved into the short path's window -- the divisor's exponent within
    +-(FAST_DIVISOR + 1), the dividend's within +-(FAST_SPAN + 1) of it, the window's edges
    (both sides) often -- which keeps a == b, exact quotients, powers-of-two divisors and
    near-midpoint quotients as they were; and the significand pairs the rn proof checks apart."""
    import numpy as np
    half = n // 2
    a0, b0 = hard_operands("div", n - half, rng)
    a1, b1 = hard_operands("div", half, rng)
    frac = np.uint64(0x807FFFFF)
    edge_b = rng.choice([-FAST_DIVISOR - 1, -FAST_DIVISOR, FAST_DIVISOR, FAST_DIVISOR + 1], half)
    eb = np.where(rng.random(half) < 0.25, edge_b, rng.integers(-FAST_DIVISOR, FAST_DIVISOR + 1, half))
    edge_d = rng.choice([-FAST_SPAN - 1, -FAST_SPAN, FAST_SPAN, FAST_SPAN + 1], half)
    keep = (a1 >> np.uint64(23) & np.uint64(0xFF)).astype(np.int64) - (b1 >> np.uint64(23) & np.uint64(0xFF)).astype(np.int64)
    d = np.where(rng.random(half) < 0.25, edge_d, np.where(np.abs(keep) <= FAST_SPAN, keep,
                                                            rng.integers(-FAST_SPAN, FAST_SPAN + 1, half)))
    ea = np.clip(eb + d + 127, 1, 254).astype(np.uint64)
    b1 = b1 & frac | ((eb + 127).astype(np.uint64) << np.uint64(23))
    a1 = a1 & frac | (ea << np.uint64(23))
    # the significand pairs the rn proof leaves to a check (docs/softfloat.md): (1, 2 - u),
    # (2 - 3u, 2 - 2u), (2 - 3u, 2 - u), (2 - 2u, 2 - u), and the largest significands, at random
    # exponents and signs in the window
    pairs = np.array([(0, 0x7FFFFF), (0x7FFFFD, 0x7FFFFE), (0x7FFFFD, 0x7FFFFF), (0x7FFFFE, 0x7FFFFF),
                      (0x7FFFFF, 0x7FFFFF), (0x7FFFFC, 0x7FFFFF), (0x7FFFFF, 0x7FFFFE)], dtype=np.uint64)
    m = min(half, 64 * len(pairs))
    pick = pairs[np.arange(m) % len(pairs)]
    eb = rng.integers(-FAST_DIVISOR, FAST_DIVISOR + 1, m)
    ea = eb + rng.integers(-FAST_SPAN, FAST_SPAN + 1, m)
    signs = rng.integers(0, 4, m).astype(np.uint64)
    a1[:m] = pick[:, 0] | ((ea + 127).astype(np.uint64) << np.uint64(23)) | (signs & np.uint64(1)) << np.uint64(31)
    b1[:m] = pick[:, 1] | ((eb + 127).astype(np.uint64) << np.uint64(23)) | (signs >> np.uint64(1)) << np.uint64(31)
    return np.concatenate([a0, a1]), np.concatenate([b0, b1])


def check(n: int = 1_000_000, seed: int = 1, ops=("div", "rcp", "sqrt", "fastdiv"), out=print) -> int:
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
    ap.add_argument("--ops", nargs="*", default=["div", "rcp", "sqrt", "fastdiv"])
    args = ap.parse_args()
    sys.exit(1 if check(args.n, args.seed, tuple(args.ops)) else 0)
