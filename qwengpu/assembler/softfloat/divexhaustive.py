"""The short division by a hoisted divisor (`unit.fast_quotient`) at reduced precision, on every
pair of p-bit significands: `python -m qwengpu.assembler.softfloat.divexhaustive [P ...]` (default
5..12); and at f32's precision on every dividend significand for given divisors (`--divisor HEX
...`: the short path itself, built and run on numpy lanes against the interpreter). Evidence beside the proofs in docs/softfloat.md ("Division by a divisor known in advance"):
the proofs are precision-generic, so a form wrong at some small p is wrong as an algorithm.

For A = a 2^(1-p), B = b 2^(1-p) in [1, 2) (every a, b in [2^(p-1), 2^p)), with yh = RN(1/B):

* `three`: q0 = RN(A yh), r = RN(A - B q0), o(q0 + r yh)  (the lowering's rn form);
* `four`:  yl = RN(1/B - yh), q0 = RN(A yh + RN(A yl)), r = RN(A - B q0), o(q0 + r yh)  (rz, rm, rp);

each against o(A/B) for o in rn, rz, rm, rp (the earlier steps round to nearest, as the unit's
ops do). Negative operands mirror positive ones (rm <-> rp) and exponents only scale, so this
covers every quotient in the short path's window at precision p. Exact integer arithmetic: each
value is an int64 at a known power-of-two scale, which bounds p at 12."""
from __future__ import annotations

import numpy as np

MODES = ("rn", "rz", "rm", "rp")
FORMS = ("three", "four")
MAX_P = 12


def _bit_length(m):
    _, e = np.frexp(m.astype(np.float64))
    e = e.astype(np.int64)
    return e - ((m >> np.maximum(e - 1, 0)) == 0)          # float64 may round up past 2^k


def round_p(n, p: int, mode: str, sticky=None):
    """Integers n (any sign) rounded to p significant bits, at n's scale; `sticky`: the true value
    lies strictly beyond n by less than one unit (away from zero), n having at least p + 2 bits."""
    n = np.asarray(n, dtype=np.int64)
    neg = n < 0
    m = np.abs(n)
    k = np.maximum(np.where(m != 0, _bit_length(np.where(m != 0, m, 1)), 0) - p, 0)
    q = m >> k
    rem = m - (q << k)
    if sticky is not None:
        rem, k2 = rem * 2 + sticky, k + 1                  # the sticky bit one place further down
    else:
        k2 = k
    half = np.where(k2 > 0, np.int64(1) << np.maximum(k2 - 1, 0), 0)
    if mode == "rn":
        up = (rem > half) | ((rem == half) & (rem > 0) & ((q & 1) == 1))
    elif mode == "rz":
        up = np.zeros_like(neg)
    else:
        up = (rem > 0) & ((mode == "rp") != neg)
    out = (q + up.astype(np.int64)) << k
    return np.where(neg, -out, out)


def round_ratio(num, den: int, p: int, mode: str):
    """num / den (num any sign, den > 0, the quotient of at least p + 2 bits) rounded to p bits."""
    num = np.asarray(num, dtype=np.int64)
    q = np.abs(num) // den
    return round_p(np.sign(num) * q, p, mode, sticky=(np.abs(num) - q * den) != 0)


def wrong(p: int, form: str) -> dict:
    """{mode: number of significand pairs whose result differs from o(A/B)} at precision p."""
    if not 3 <= p <= MAX_P or form not in FORMS:
        raise ValueError(f"p in 3..{MAX_P}, form in {FORMS}")
    sig = np.arange(1 << (p - 1), 1 << p, dtype=np.int64)
    bad = dict.fromkeys(MODES, 0)
    for b in map(int, sig):
        a = sig
        m = int(round_ratio(np.array([1 << (3 * p - 1)]), b, p, "rn")[0]) >> p    # yh = m 2^-p
        if form == "four":
            d = (1 << (2 * p - 1)) - m * b                  # 1/B - yh = d / (b 2^p)
            yl = int(round_ratio(np.array([d << (3 * p)]), b, p, "rn")[0]) if d else 0    # scale 2^-4p
            c = round_p(a * yl, p, "rn")                    # RN(A yl), scale 2^(1-5p)
            q0 = round_p(a * m * (1 << (3 * p)) + c, p, "rn") >> (3 * p)    # scale 2^(1-2p)
        else:
            q0 = round_p(a * m, p, "rn")                    # RN(A yh), scale 2^(1-2p)
        r = round_p(a * (1 << (2 * p - 1)) - b * q0, p, "rn")               # scale 2^(2-3p)
        t = q0 * (1 << (2 * p - 1)) + r * m                 # q0 + r yh, scale 2^(2-4p)
        for mode in MODES:
            want = round_ratio(a * (1 << (4 * p - 2)), b, p, mode)
            bad[mode] += int(np.sum(round_p(t, p, mode) != want))
    return bad


def every_dividend(c: int, mode: str, step: int = 1) -> int:
    """How many of the 2^23 dividends in [1, 2) (every `step`-th) the short path
    (`unit._fast_quotient32`, its divisor part from `_fast_divisor32`) divides by the f32 c (bits,
    in its window) other than the interpreter does, in `mode`."""
    from qwengpu.semantics import floats as F

    from ..emit import Recorder
    from . import unit
    from .builder import routine

    def build(bl, a, d):
        yh, neg_d, lo, width = unit._fast_divisor32(bl, d)
        yl = None if mode == "rn" else unit._fast_low32(bl, yh, neg_d)
        return unit._fast_quotient32(bl, a, yh, neg_d, mode, yl), unit._fast_check32(bl, a, lo, width)
    rec = Recorder()
    x, y = rec.input(), rec.input()
    q, ok = routine(rec.emitter(), build, x, y)
    a = np.arange(0, 1 << 23, step, dtype=np.uint64) | np.uint64(0x3F800000)
    cs = np.full(a.shape, c, dtype=np.uint64)
    got, inside = rec.evaluate_lanes({x.value: a, y.value: cs}, [q, ok])
    if not inside.all():
        raise ValueError(f"{c:#x}: [1, 2) / c is outside the short path's window")
    return int(np.sum(got != F.fdiv(a, cs, width=32, rnd=mode, ftz=False).astype(np.uint64)))


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="the short division, exhaustively at reduced precision")
    ap.add_argument("p", nargs="*", type=int, help=f"precisions (default 5..{MAX_P})")
    ap.add_argument("--divisor", nargs="*", default=[], help="f32 divisors (hex bits): every dividend in [1, 2)")
    ap.add_argument("--modes", nargs="*", default=list(MODES))
    args = ap.parse_args()
    for c in (int(x, 16) for x in args.divisor):
        for mode in args.modes:
            print(f"f32 c = {c:#010x}  {mode}  2^23 dividends  wrong: {every_dividend(c, mode)}", flush=True)
    for p in args.p or ([] if args.divisor else range(5, MAX_P + 1)):
        for form in FORMS:
            print(f"p = {p:2d}  {form:5s}  {(1 << (p - 1)) ** 2:>9,} pairs  wrong: {wrong(p, form)}", flush=True)
