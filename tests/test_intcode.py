"""Bit-exactness of the straight-line integer routines (`qwengpu.assembler.intcode`) against the
reference semantics (`qwengpu.semantics.integers`).

Three layers:
* hypothesis: random and edge values, each example run through `Recorder.evaluate` (the
  reference single-lane evaluator of recorded micro-op sequences);
* bulk: the same recorded sequence evaluated on numpy arrays (`np_eval`, a vectorised
  `Recorder.evaluate`, itself checked against `Recorder.evaluate`) over large random and edge
  grids;
* exhaustive (`pytest --runslow`): the 32-bit reciprocal over all 2^31 normalised divisors,
  the property the division proof rests on (docs/intcode.md), and every 16-bit immediate prmt
  selector.

`pytest --soak N` multiplies the bulk sample sizes and the hypothesis example counts (tests/sizes.py).
"""
from __future__ import annotations

import numpy as np
import pytest
import sizes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qwengpu.assembler.intcode as ic
from qwengpu.assembler.emit import Recorder
from qwengpu.semantics import integers as alu
from qwengpu.machine.uops import ALU_OPS, M32, Imm, src

SCALE = sizes.SOAK
EXHAUSTIVE = sizes.RUNSLOW
M64 = (1 << 64) - 1
U = np.uint64
MASK = U(M32)


def n_bulk(base: int) -> int:
    return max(16, int(base * SCALE))


def hyp(base: int = 60):
    return settings(max_examples=max(10, int(base * SCALE)), deadline=None,
                    suppress_health_check=list(HealthCheck))


# ---------------------------------------------------------------------------------------------
# vectorised evaluation of a recorded sequence


def np_eval(ops, inputs: dict, n: int) -> dict:
    """Recorder.evaluate on arrays: inputs {VReg: uint64 array of 32-bit values}."""
    env = {k: (np.asarray(v, dtype=U) & MASK) * np.ones(n, dtype=U) for k, v in inputs.items()}
    flag = np.zeros(n, dtype=U)
    zeros = np.zeros(n, dtype=U)

    def val(s):
        if s is None:
            return zeros
        v = s.value
        x = np.full(n, v.value, dtype=U) if isinstance(v, Imm) else env.get(v, zeros)
        return (x ^ MASK) if s.inv else x

    def signed(x):
        return x.astype(np.int64) - ((x >> U(31)) << U(32)).astype(np.int64)

    for op in ops:
        a, b, c = val(op.a), val(op.b), val(op.c)
        cin = flag if op.cin == "flag" else U(int(op.cin))
        o = op.op
        f = zeros
        if o == "ADD":
            t = a + b + cin
            r, f = t & MASK, t >> U(32)
        elif o == "AND":
            r = a & b
        elif o == "OR":
            r = a | b
        elif o == "XOR":
            r = a ^ b
        elif o == "SHL":
            r = np.where(b < 32, (a << np.minimum(b, U(63))) & MASK, U(0))
        elif o == "SHR":
            r = np.where(b < 32, a >> np.minimum(b, U(63)), U(0))
        elif o == "SAR":
            r = (signed(a) >> np.minimum(b, U(31)).astype(np.int64)).astype(U) & MASK
        elif o == "SEL":
            r = np.where(c != 0, a, b)
        elif o == "EQ":
            r = (a == b).astype(U)
        elif o == "LTU":
            r = (a < b).astype(U)
        elif o == "LEU":
            r = (a <= b).astype(U)
        elif o == "LT":
            r = (signed(a) < signed(b)).astype(U)
        elif o == "LE":
            r = (signed(a) <= signed(b)).astype(U)
        elif o == "MUL":
            r = (a * b) & MASK
        elif o == "MULHU":
            r = (a * b) >> U(32)
        elif o == "MULHS":
            r = ((signed(a) * signed(b)) >> np.int64(32)).astype(U) & MASK
        elif o == "CLZ":
            r = (32 - np.frexp(a.astype(np.float64))[1]).astype(U)
        elif o == "POPC":
            r = np.bitwise_count(a).astype(U)
        elif o == "BREV":
            r = np.zeros(n, dtype=U)
            for i in range(32):
                r |= ((a >> U(i)) & U(1)) << U(31 - i)
        elif o == "MOV":
            r = a
        else:
            raise ValueError(o)
        env[op.dst[0]] = r
        if op.sets_flag:
            flag = f
    return env


def np_val(env: dict, s, n: int) -> np.ndarray:
    """The value of operand s after np_eval."""
    s = src(s)
    v = s.value
    x = np.full(n, v.value, dtype=U) if isinstance(v, Imm) else env[v]
    return (x ^ MASK) if s.inv else x


class Seq:
    """A recorded routine with 32-bit and 64-bit inputs; evaluates one example or arrays."""

    def __init__(self, fn, widths, *args, **kw):
        self.rec = Recorder()
        em = self.rec.emitter()
        self.ins = []
        ops_in = []
        for w in widths:
            if w == 64:
                pair = (self.rec.input(), self.rec.input())
                self.ins.extend(pair)
                ops_in.append(pair)
            else:
                x = self.rec.input()
                self.ins.append(x)
                ops_in.append(x)
        self.widths = widths
        self.out = fn(em, *ops_in, *args, **kw)

    @property
    def ops(self):
        return self.rec.ops

    def _split(self, values):
        out = {}
        k = 0
        for w, v in zip(self.widths, values):
            if w == 64:
                out[self.ins[k].value] = v & M32 if isinstance(v, int) else (np.asarray(v, dtype=U) & MASK)
                out[self.ins[k + 1].value] = v >> 32 if isinstance(v, int) else (np.asarray(v, dtype=U) >> U(32))
                k += 2
            else:
                out[self.ins[k].value] = v
                k += 1
        return out

    def one(self, *values) -> int:
        """Evaluate with Recorder.evaluate (the reference evaluator)."""
        inputs = self._split([int(v) for v in values])
        if isinstance(self.out, tuple):
            lo = self.rec.evaluate(inputs, self.out[0])
            hi = self.rec.evaluate(inputs, self.out[1])
            return lo | (hi << 32)
        return self.rec.evaluate(inputs, self.out)

    def many(self, *arrays) -> np.ndarray:
        n = len(arrays[0])
        env = np_eval(self.rec.ops, self._split([np.asarray(a, dtype=U) for a in arrays]), n)
        if isinstance(self.out, tuple):
            return np_val(env, self.out[0], n) | (np_val(env, self.out[1], n) << U(32))
        return np_val(env, self.out, n)


def check_structure(ops):
    """ALU micro-ops only; carry flags in pairs (producer, then at once its only consumer)."""
    for i, op in enumerate(ops):
        assert op.kind == "alu" and op.op in ALU_OPS
        if op.cin == "flag":
            assert i > 0 and ops[i - 1].sets_flag and not op.sets_flag, ops[i - 1:i + 1]
        if op.sets_flag:
            assert i + 1 < len(ops) and ops[i + 1].cin == "flag", ops[i:i + 2]


# ---------------------------------------------------------------------------------------------
# values

E32 = sorted({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 20, 31, 32, 33, 63, 64, 65,
              0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x10001, 0x55555555, 0xAAAAAAAA, 0x7FFFFFFE,
              0x7FFFFFFF, 0x80000000, 0x80000001, 0xC0000000, 0xFFFFFFFE, 0xFFFFFFFF, 3 << 30,
              0xFFFF0000, 0x12345678, 0xDEADBEEF}
             | {(1 << k) + d & M32 for k in range(32) for d in (-1, 0, 1)}
             | {-v & M32 for v in range(1, 21)})
DIVISORS32 = sorted(set(range(1, 21)) | {-v & M32 for v in range(1, 21)} | set(E32))


def st32():
    return st.one_of(st.sampled_from(E32), st.integers(0, M32),
                     st.integers(0, 40).map(lambda k: k & M32))


def st_divisor32():
    return st.one_of(st.sampled_from(DIVISORS32), st.integers(0, M32),
                     st.integers(0, 31).flatmap(lambda k: st.integers(0, (1 << k) | 1)))


def near_multiples32(rng, n):
    """Dividends within a few units of a multiple of the divisor (the corrections' edge)."""
    b = rng.integers(1, 1 << 32, n, dtype=U) >> rng.integers(0, 32, n, dtype=U)
    b = np.maximum(b, U(1))
    q = rng.integers(0, 1 << 32, n, dtype=U) // b
    a = (q * b + rng.integers(-3, 4, n).astype(np.int64).astype(U)) & MASK
    return a, b


def s32(v):
    return v - (1 << 32) if v >> 31 else v


# ---------------------------------------------------------------------------------------------
# the evaluator itself


def test_np_eval_matches_recorder():
    rng = np.random.default_rng(0)
    rec = Recorder()
    em = rec.emitter()
    xs = [rec.input() for _ in range(3)]
    vals = list(xs)
    names = sorted(ALU_OPS)
    for k in range(400):
        op = names[k % len(names)]
        a, b, c = (vals[int(i)] for i in rng.integers(0, len(vals), 3))
        inv = rng.integers(0, 2, 3)
        a, b, c = src(a, bool(inv[0])), src(b, bool(inv[1])), src(c, bool(inv[2]))
        if op == "ADD" and k % 3 == 0:
            lo = em.alu("ADD", a, b, cin="1", sets_flag=True)
            vals.append(lo)
            vals.append(em.alu("ADD", c, b, cin="flag"))
            continue
        if op in ("SHL", "SHR", "SAR") and k % 2:
            b = src(Imm(int(rng.integers(0, 70))))
        n = ALU_OPS[op]
        vals.append(em.alu(op, a, b if n > 1 else None, c if n > 2 else None))
    samples = [rng.integers(0, 1 << 32, 3) for _ in range(20)] + [[0, M32, 1 << 31]]
    arrays = [np.array([s[i] for s in samples], dtype=U) for i in range(3)]
    env = np_eval(rec.ops, {x.value: arr for x, arr in zip(xs, arrays)}, len(samples))
    for j, s in enumerate(samples):
        inputs = {x.value: int(v) for x, v in zip(xs, s)}
        for v in vals[3:]:
            assert rec.evaluate(inputs, v) == int(np_val(env, v, len(samples))[j])


# ---------------------------------------------------------------------------------------------
# 32-bit division

DIV32 = {
    "div_u32": (ic.div_u32, lambda a, b: alu.div(a, b, 32, False)),
    "rem_u32": (ic.rem_u32, lambda a, b: alu.rem(a, b, 32, False)),
    "div_s32": (ic.div_s32, lambda a, b: alu.div(a, b, 32, True)),
    "rem_s32": (ic.rem_s32, lambda a, b: alu.rem(a, b, 32, True)),
}
_SEQ = {}


def seq(name, fn, widths, *args, **kw) -> Seq:
    key = (name, tuple(widths), args, tuple(sorted(kw.items())))
    if key not in _SEQ:
        _SEQ[key] = Seq(fn, widths, *args, **kw)
        check_structure(_SEQ[key].ops)
    return _SEQ[key]


@pytest.mark.parametrize("name", sorted(DIV32))
@hyp(150)
@given(a=st32(), b=st_divisor32())
def test_div32_hypothesis(name, a, b):
    fn, ref = DIV32[name]
    assert seq(name, fn, [32, 32]).one(a, b) == ref(a, b)


def _div32_bulk_inputs(rng, n):
    e = np.array(DIVISORS32, dtype=U)
    a1 = np.repeat(np.array(E32, dtype=U), len(e))
    b1 = np.tile(e, len(E32))
    a2, b2 = near_multiples32(rng, n)
    a3 = rng.integers(0, 1 << 32, n, dtype=U)
    b3 = rng.integers(0, 1 << 32, n, dtype=U) >> rng.integers(0, 32, n, dtype=U)
    a4 = rng.integers(0, 1 << 32, n, dtype=U)
    b4 = rng.integers(1, 21, n, dtype=U)
    b4 = np.where(rng.integers(0, 2, n) == 1, (-b4.astype(np.int64)).astype(U) & MASK, b4)
    return np.concatenate([a1, a2, a3, a4]), np.concatenate([b1, b2, b3, b4])


def _ref32_vec(name, A, B):
    if name.endswith("u32"):
        Bz = np.where(B == 0, U(1), B)
        if name.startswith("div"):
            return np.where(B == 0, MASK, A // Bz)
        return np.where(B == 0, A, A % Bz)
    sa = A.astype(np.int64) - ((A >> U(31)) << U(32)).astype(np.int64)
    sb = B.astype(np.int64) - ((B >> U(31)) << U(32)).astype(np.int64)
    sbz = np.where(sb == 0, 1, sb)
    if name.startswith("div"):
        q = np.abs(sa) // np.abs(sbz)
        out = np.where((sa < 0) != (sbz < 0), -q, q)
        out = np.where(sb == 0, -1, out)
    else:
        r = np.abs(sa) % np.abs(sbz)
        out = np.where(sa < 0, -r, r)
        out = np.where(sb == 0, sa, out)
    return out.astype(U) & MASK


@pytest.mark.parametrize("name", sorted(DIV32))
def test_div32_bulk(name):
    rng = np.random.default_rng(hash(name) & 0xFFFF)
    fn, ref = DIV32[name]
    A, B = _div32_bulk_inputs(rng, n_bulk(1 << 17))
    got = seq(name, fn, [32, 32]).many(A, B)
    exp = _ref32_vec(name, A, B)
    # the vectorised reference agrees with alu on a sample
    for i in range(0, len(A), max(1, len(A) // 300)):
        assert int(exp[i]) == ref(int(A[i]), int(B[i]))
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(hex(int(A[i])), hex(int(B[i])), hex(int(got[i])), hex(int(exp[i]))) for i in bad[:8]]


def test_divrem32_pairs():
    rng = np.random.default_rng(7)
    A, B = _div32_bulk_inputs(rng, n_bulk(1 << 14))
    for fn, names in ((ic.divrem_u32, ("div_u32", "rem_u32")), (ic.divrem_s32, ("div_s32", "rem_s32"))):
        s = Seq(lambda em, a, b: fn(em, a, b)[0], [32, 32])
        t = Seq(lambda em, a, b: fn(em, a, b)[1], [32, 32])
        assert np.array_equal(s.many(A, B), _ref32_vec(names[0], A, B))
        assert np.array_equal(t.many(A, B), _ref32_vec(names[1], A, B))


# ---------------------------------------------------------------------------------------------
# the reciprocal the 32-bit division rests on


def _recip_errors(d: np.ndarray):
    """R = 2^64 - d * Yc (exact, int64) for the recorded reciprocal, Yc = 2^32 + y."""
    s = Seq(lambda em, x: ic.division._recip32(em, x), [32])
    y = s.many(d)
    hi = (d * y) >> U(32)
    lo = (d * y) & MASK
    rh = np.int64(1 << 32) - d.astype(np.int64) - hi.astype(np.int64)
    return rh * (1 << 32) - lo.astype(np.int64)


def _check_recip(d):
    """T - 6 < Yc < T + 1 (T = 2^64/d), i.e. -d < R < 6d; and the two tight divisors."""
    R = _recip_errors(d)
    di = d.astype(np.int64)
    bad = np.nonzero(~((R > -di) & (R < 6 * di)))[0]
    assert len(bad) == 0, [(hex(int(d[i])), int(R[i]) / int(d[i])) for i in bad[:5]]


def test_recip32_bound_sampled():
    rng = np.random.default_rng(3)
    d = np.concatenate([rng.integers(1 << 31, 1 << 32, n_bulk(1 << 17), dtype=U),
                        np.array([1 << 31, (1 << 31) + 1, 3 << 30, M32, M32 - 1], dtype=U),
                        (rng.integers(1 << 15, 1 << 16, 4096, dtype=U) << U(16))])
    _check_recip(d)
    R = _recip_errors(np.array([1 << 31, 3 << 30], dtype=U))
    assert R[0] <= 2 * (1 << 31) and R[1] <= 4 * (3 << 30)


@pytest.mark.slow               # 5-8 minutes
def test_recip32_bound_exhaustive():
    chunk = 1 << 23
    for lo in range(1 << 31, 1 << 32, chunk):
        _check_recip(np.arange(lo, lo + chunk, dtype=U))


def test_recip32_tight_divisors():
    """The two divisors whose quotients need the most precision (b = 2^j and 3 * 2^j):
    Yc = 2^33 - 2 exactly at d = 2^31 (so the halved multiplier loses nothing), and
    Yc >= T - 4/3 at d = 3 * 2^30."""
    s = Seq(lambda em, x: ic.division._recip32(em, x), [32])
    assert s.one(1 << 31) == (1 << 32) - 2
    R = _recip_errors(np.array([3 << 30], dtype=U))
    assert 0 <= R[0] <= (3 << 30) * 4 // 3


# ---------------------------------------------------------------------------------------------
# helpers for the other routines

E64 = sorted({0, 1, 2, 3, 5, 7, 10, 16, 17, M32 - 1, M32, 1 << 32, (1 << 32) + 1, (1 << 32) - 1,
              (1 << 63) - 1, 1 << 63, (1 << 63) + 1, M64, M64 - 1, 0xFFFFFFFF00000000,
              0x00000001FFFFFFFF, 0x123456789ABCDEF0, 0x8000000080000000, 0x7FFFFFFF7FFFFFFF}
             | {(1 << k) + d & M64 for k in range(64) for d in (-1, 0, 1)}
             | {-v & M64 for v in range(1, 21)})


def st64():
    return st.one_of(st.sampled_from(E64), st.integers(0, M64),
                     st.integers(0, 64).flatmap(lambda k: st.integers(0, (1 << k) - 1 if k else 0)),
                     st.integers(-40, 40).map(lambda v: v & M64))


def st_amount():
    """Shift amounts, bit positions and lengths: small, near the widths, low-8-bit aliases, huge."""
    return st.one_of(st.integers(0, 70), st.sampled_from([127, 128, 255, 256, 257, 288, 300, 511,
                                                          0x7FFFFFFF, 0x80000000, M32]),
                     st.integers(0, M32))


def rand64(rng, n):
    x = rng.integers(0, 1 << 63, n, dtype=U) * U(2) + rng.integers(0, 2, n, dtype=U)
    return x >> rng.integers(0, 64, n, dtype=U)


def rand32(rng, n):
    return rng.integers(0, 1 << 32, n, dtype=U) >> rng.integers(0, 32, n, dtype=U)


def amounts(rng, n):
    a = rng.integers(0, 71, n, dtype=U)
    b = rng.choice(np.array([127, 128, 255, 256, 257, 300, 0x80000000, M32], dtype=U), n)
    c = rng.integers(0, 1 << 32, n, dtype=U)
    k = rng.integers(0, 4, n)
    return np.where(k < 2, a, np.where(k == 2, b, c))


def bulk_check(name, fn, widths, ref, arrays, *args, **kw):
    s = seq(name, fn, widths, *args, **kw)
    got = s.many(*arrays)
    bad = []
    for i in range(len(arrays[0])):
        vals = [int(x[i]) for x in arrays]
        exp = ref(*vals)
        if int(got[i]) != exp:
            bad.append((name, [hex(v) for v in vals], hex(int(got[i])), hex(exp)))
            if len(bad) > 5:
                break
    assert not bad, bad


def imm(v):
    return src(Imm(v & M32))


def imm64(v):
    return imm(v), imm(v >> 32)


# ---------------------------------------------------------------------------------------------
# 32-bit division by immediates

K32 = sorted({0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 25, 60, 100, 641, 1000, 6700417,
              1000000007, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xC0000000, M32, M32 - 1,
              0xFFFFFFF9, 0xFFFFFFFD} | {1 << k for k in range(32)} | {(1 << k) + 1 & M32 for k in range(32)}
             | {(1 << k) - 1 for k in range(1, 33)} | {-v & M32 for v in range(1, 21)})


@pytest.mark.parametrize("name", sorted(DIV32))
def test_div32_by_immediate(name):
    fn, ref = DIV32[name]
    rng = np.random.default_rng(11)
    worst = 0
    for k in K32 + [int(v) for v in rng.integers(0, 1 << 32, n_bulk(40))]:
        s = Seq(lambda em, a: fn(em, a, imm(k)), [32])
        check_structure(s.ops)
        worst = max(worst, len(s.ops))
        A = np.concatenate([rng.integers(0, 1 << 32, n_bulk(2000), dtype=U),
                            np.array(E32, dtype=U),
                            (np.arange(-3, 4, dtype=np.int64).astype(U) + U((M32 // max(k, 1)) * k)) & MASK,
                            (np.arange(-3, 4, dtype=np.int64).astype(U) + U(k * 12345 & M32)) & MASK])
        got = s.many(A)
        exp = _ref32_vec(name, A, np.full(len(A), k, dtype=U))
        bad = np.nonzero(got != exp)[0]
        assert len(bad) == 0, (hex(k), [(hex(int(A[i])), hex(int(got[i])), hex(int(exp[i]))) for i in bad[:5]])
    assert worst <= (5 if name.startswith("div") else 7)


@hyp(100)
@given(a=st32(), b=st_divisor32())
def test_div32_by_immediate_hypothesis(a, b):
    for name, (fn, ref) in DIV32.items():
        assert Seq(lambda em, x: fn(em, x, imm(b)), [32]).one(a) == ref(a, b)


# ---------------------------------------------------------------------------------------------
# 64-bit multiplication and division

MUL64 = {
    "mullo_u64": (ic.mullo_u64, lambda a, b: alu.mul(a, b, 64, False, "lo")),
    "mulhi_u64": (ic.mulhi_u64, lambda a, b: alu.mul(a, b, 64, False, "hi")),
    "mulhi_s64": (ic.mulhi_s64, lambda a, b: alu.mul(a, b, 64, True, "hi")),
}
DIV64 = {
    "div_u64": (ic.div_u64, lambda a, b: alu.div(a, b, 64, False)),
    "rem_u64": (ic.rem_u64, lambda a, b: alu.rem(a, b, 64, False)),
    "div_s64": (ic.div_s64, lambda a, b: alu.div(a, b, 64, True)),
    "rem_s64": (ic.rem_s64, lambda a, b: alu.rem(a, b, 64, True)),
    "divrem_u64.q": (lambda em, a, b: ic.divrem_u64(em, a, b)[0], lambda a, b: alu.div(a, b, 64, False)),
    "divrem_u64.r": (lambda em, a, b: ic.divrem_u64(em, a, b)[1], lambda a, b: alu.rem(a, b, 64, False)),
    "divrem_s64.q": (lambda em, a, b: ic.divrem_s64(em, a, b)[0], lambda a, b: alu.div(a, b, 64, True)),
    "divrem_s64.r": (lambda em, a, b: ic.divrem_s64(em, a, b)[1], lambda a, b: alu.rem(a, b, 64, True)),
}


def st_divisor64():
    return st.one_of(st64(), st.integers(1, 20), st.integers(-20, -1).map(lambda v: v & M64),
                     st.integers(1, M32), st.integers(0, 63).map(lambda k: 1 << k))


@pytest.mark.parametrize("name", sorted(MUL64))
@hyp(150)
@given(a=st64(), b=st64())
def test_mul64_hypothesis(name, a, b):
    fn, ref = MUL64[name]
    assert seq(name, fn, [64, 64]).one(a, b) == ref(a, b)


@pytest.mark.parametrize("name", sorted(MUL64))
def test_mul64_bulk(name):
    rng = np.random.default_rng(21)
    fn, ref = MUL64[name]
    n = n_bulk(1 << 13)
    e = np.array(E64, dtype=U)
    A = np.concatenate([rand64(rng, n), np.repeat(e, len(e))])
    B = np.concatenate([rand64(rng, n), np.tile(e, len(e))])
    bulk_check(name, fn, [64, 64], ref, [A, B])


@pytest.mark.parametrize("name", sorted(DIV64))
@hyp(100)
@given(a=st64(), b=st_divisor64())
def test_div64_hypothesis(name, a, b):
    fn, ref = DIV64[name]
    assert seq(name, fn, [64, 64]).one(a, b) == ref(a, b)


def _div64_inputs(rng, n):
    e = np.array(E64, dtype=U)
    a1, b1 = np.repeat(e, len(e)), np.tile(e, len(e))
    a2, b2 = rand64(rng, n), rand64(rng, n)                        # any magnitudes
    a3 = rand64(rng, n)
    b3 = rng.integers(1, 1 << 32, n, dtype=U) >> rng.integers(0, 32, n, dtype=U)   # b1 == 0
    b3 = np.maximum(b3, U(1))
    # dividends within a few units of a multiple of the divisor
    b4 = np.maximum(rand64(rng, n), U(1))
    q4 = rand64(rng, n) // b4
    a4 = q4 * b4 + rng.integers(-3, 4, n).astype(np.int64).astype(U)
    b5 = rng.integers(1, 21, n).astype(np.int64)
    b5 = np.where(rng.integers(0, 2, n) == 1, -b5, b5).astype(U)    # small, both signs
    a5 = rand64(rng, n)
    return np.concatenate([a1, a2, a3, a4, a5]), np.concatenate([b1, b2, b3, b4, b5])


@pytest.mark.parametrize("name", sorted(DIV64))
def test_div64_bulk(name):
    rng = np.random.default_rng(31)
    fn, ref = DIV64[name]
    A, B = _div64_inputs(rng, n_bulk(1 << 12))
    bulk_check(name, fn, [64, 64], ref, [A, B])


K64 = sorted({0, 1, 2, 3, 7, 10, 1000, 641, 6700417, 1000000007, M32, 1 << 32, (1 << 32) + 1,
              (1 << 63) - 1, 1 << 63, (1 << 63) + 1, 3 << 62, M64, M64 - 1, M64 - 9,
              0x123456789ABCDEF, 10 ** 18} | {1 << k for k in range(0, 64, 7)}
             | {(1 << k) + 1 for k in range(1, 64, 5)} | {-v & M64 for v in range(1, 8)})


@pytest.mark.parametrize("name", ["div_u64", "rem_u64", "div_s64", "rem_s64"])
def test_div64_by_immediate(name):
    fn, ref = DIV64[name]
    rng = np.random.default_rng(41)
    ks = K64 + [int(v) for v in rand64(rng, n_bulk(12))]
    for k in ks:
        s = Seq(lambda em, a: fn(em, a, imm64(k)), [64])
        check_structure(s.ops)
        assert len(s.ops) <= 45
        A = np.concatenate([rand64(rng, n_bulk(300)), np.array(E64, dtype=U),
                            (np.arange(-2, 3, dtype=np.int64).astype(U) + U((M64 // max(k, 1)) * k))])
        got = s.many(A)
        for i in range(len(A)):
            assert int(got[i]) == ref(int(A[i]), k), (name, hex(k), hex(int(A[i])), hex(int(got[i])))


def test_nr64_reciprocal_bound():
    """The 64-bit reciprocal: 2^128/D - 76 < Yc <= 2^128/D (the division needs < 2^32)."""
    rng = np.random.default_rng(51)
    n = n_bulk(4000)
    D = np.concatenate([rng.integers(1 << 63, M64, n, dtype=U, endpoint=True),
                        rng.integers(1 << 31, 1 << 32, n, dtype=U) << U(32),
                        np.array([1 << 63, (1 << 63) + 1, M64, 3 << 62, M32 << 32], dtype=U)])
    s = Seq(lambda em, d: ic.division._nr64(em, d, ic.division._recip32(em, d[1])), [64])
    Y = s.many(D)
    for d, y in zip(D.tolist(), Y.tolist()):
        yc = (1 << 64) + y
        assert d * yc <= 1 << 128 < d * (yc + 76), hex(d)


# ---------------------------------------------------------------------------------------------
# 64-bit shifts and small ops

SHIFT64 = {
    "shl64": (ic.shl64, lambda a, n: alu.shl(a, n, 64)),
    "shr64": (ic.shr64, lambda a, n: alu.shr(a, n, 64, False)),
    "sar64": (ic.sar64, lambda a, n: alu.shr(a, n, 64, True)),
}


@pytest.mark.parametrize("name", sorted(SHIFT64))
@hyp(150)
@given(a=st64(), n=st_amount())
def test_shift64_hypothesis(name, a, n):
    fn, ref = SHIFT64[name]
    assert seq(name, fn, [64, 32]).one(a, n) == ref(a, n)


@pytest.mark.parametrize("name", sorted(SHIFT64))
def test_shift64_bulk_and_immediate(name):
    fn, ref = SHIFT64[name]
    rng = np.random.default_rng(61)
    n = n_bulk(1 << 12)
    e = np.array(E64, dtype=U)
    amts = np.array(list(range(0, 71)) + [127, 128, 255, 256, 300, 0x80000000, M32], dtype=U)
    A = np.concatenate([rand64(rng, n), np.repeat(e, len(amts))])
    N = np.concatenate([amounts(rng, n), np.tile(amts, len(e))])
    bulk_check(name, fn, [64, 32], ref, [A, N])
    for k in amts.tolist():
        s = Seq(lambda em, a: fn(em, a, imm(k)), [64])
        assert len(s.ops) <= 4
        got = s.many(A[:512])
        assert [int(v) for v in got] == [ref(int(x), k) for x in A[:512]]


SMALL64 = {
    "abs64": (ic.abs64, [64], lambda a: alu.absolute(a, 64)),
    "neg64": (ic.neg64, [64], lambda a: alu.neg(a, 64)),
    "clz64": (ic.clz64, [64], lambda a: alu.clz(a, 64)),
    "popc64": (ic.popc64, [64], lambda a: alu.popc(a, 64)),
    "brev64": (ic.brev64, [64], lambda a: alu.brev(a, 64)),
    "min64.u": (lambda em, a, b: ic.min64(em, a, b, False), [64, 64], lambda a, b: alu.minimum(a, b, 64, False)),
    "min64.s": (lambda em, a, b: ic.min64(em, a, b, True), [64, 64], lambda a, b: alu.minimum(a, b, 64, True)),
    "max64.u": (lambda em, a, b: ic.max64(em, a, b, False), [64, 64], lambda a, b: alu.maximum(a, b, 64, False)),
    "max64.s": (lambda em, a, b: ic.max64(em, a, b, True), [64, 64], lambda a, b: alu.maximum(a, b, 64, True)),
}
for _w in (32, 64):
    for _sg in (False, True):
        for _sa in (False, True):
            SMALL64[f"bfind.{'s' if _sg else 'u'}{_w}{'.shiftamt' if _sa else ''}"] = (
                lambda em, a, w=_w, sg=_sg, sa=_sa: ic.bfind(em, a, w, sg, sa), [_w],
                lambda a, w=_w, sg=_sg, sa=_sa: alu.bfind(a, w, sg, sa))
        SMALL64[f"sad.{'s' if _sg else 'u'}{_w}"] = (
            lambda em, a, b, c, sg=_sg: ic.sad(em, a, b, c, sg), [_w] * 3,
            lambda a, b, c, w=_w, sg=_sg: alu.sad(a, b, c, w, sg))


def _small_values(rng, w, n):
    if w == 64:
        e = np.array(E64, dtype=U)
        return np.concatenate([rand64(rng, n), e, rng.choice(e, n)])
    e = np.array(E32, dtype=U)
    return np.concatenate([rand32(rng, n), e, rng.choice(e, n)])


@pytest.mark.parametrize("name", sorted(SMALL64))
def test_small_ops(name):
    fn, widths, ref = SMALL64[name]
    rng = np.random.default_rng(71)
    n = n_bulk(1 << 11)
    arrays = [_small_values(rng, widths[0], n) for _ in widths]
    if len(widths) > 1:             # equal operands too
        arrays[1][: n // 8] = arrays[0][: n // 8]
    bulk_check(name, fn, widths, ref, arrays)


@pytest.mark.parametrize("name", sorted(SMALL64))
@hyp(40)
@given(data=st.data())
def test_small_ops_hypothesis(name, data):
    fn, widths, ref = SMALL64[name]
    vals = [data.draw(st64() if w == 64 else st32()) for w in widths]
    assert seq(name, fn, widths).one(*vals) == ref(*vals)


# ---------------------------------------------------------------------------------------------
# bit fields

BF = {
    "bfe_u32": (ic.bfe_u32, [32, 32, 32], lambda a, p, n: alu.bfe(a, p, n, 32, False)),
    "bfe_s32": (ic.bfe_s32, [32, 32, 32], lambda a, p, n: alu.bfe(a, p, n, 32, True)),
    "bfe_u64": (ic.bfe_u64, [64, 32, 32], lambda a, p, n: alu.bfe(a, p, n, 64, False)),
    "bfe_s64": (ic.bfe_s64, [64, 32, 32], lambda a, p, n: alu.bfe(a, p, n, 64, True)),
    "bfi_b32": (ic.bfi_b32, [32, 32, 32, 32], lambda a, b, p, n: alu.bfi(a, b, p, n, 32)),
    "bfi_b64": (ic.bfi_b64, [64, 64, 32, 32], lambda a, b, p, n: alu.bfi(a, b, p, n, 64)),
}


def st_field():
    return st.one_of(st.integers(0, 40), st.integers(0, 70),
                     st.sampled_from([255, 256, 257, 288, 300, 511, 0x1FF, 0x80000003, M32]),
                     st.integers(0, M32))


@pytest.mark.parametrize("name", sorted(BF))
@hyp(150)
@given(data=st.data())
def test_bitfield_hypothesis(name, data):
    fn, widths, ref = BF[name]
    vals = [data.draw(st64() if w == 64 else st32()) for w in widths[:-2]]
    vals += [data.draw(st_field()), data.draw(st_field())]
    assert seq(name, fn, widths).one(*vals) == ref(*vals)


def _fields(rng, n):
    grid = np.array(list(range(0, 41)) + [63, 64, 65, 70, 255, 256, 257, 300, 0x1FF, M32], dtype=U)
    k = rng.integers(0, 3, n)
    return np.where(k == 0, rng.choice(grid, n), np.where(k == 1, rng.integers(0, 80, n, dtype=U),
                                                           rng.integers(0, 1 << 32, n, dtype=U)))


@pytest.mark.parametrize("name", sorted(BF))
def test_bitfield_bulk(name):
    fn, widths, ref = BF[name]
    rng = np.random.default_rng(81)
    n = n_bulk(1 << 12)
    vals = [_small_values(rng, w, n)[:n] for w in widths[:-2]]
    # every (pos, len) pair of the small grid, plus random ones
    g = np.array(list(range(0, 41)) + [63, 64, 65, 255, 256, 300], dtype=U)
    P = np.concatenate([np.repeat(g, len(g)), _fields(rng, n)])
    L = np.concatenate([np.tile(g, len(g)), _fields(rng, n)])
    m = len(P)
    vals = [np.resize(v, m) for v in vals]
    bulk_check(name, fn, widths, ref, vals + [P, L])


@pytest.mark.parametrize("name", sorted(BF))
def test_bitfield_immediate(name):
    """Immediate positions and lengths fold: the 32-bit extracts cost at most 3 ops."""
    fn, widths, ref = BF[name]
    rng = np.random.default_rng(91)
    vals = [_small_values(rng, w, 64)[:64] for w in widths[:-2]]
    for p in [0, 1, 7, 8, 15, 16, 31, 32, 33, 40, 63, 64, 255, 256 + 3]:
        for ln in [0, 1, 5, 8, 16, 24, 31, 32, 33, 40, 64, 65, 255, 256 + 2]:
            s = Seq(lambda em, *xs: fn(em, *xs, imm(p), imm(ln)), widths[:-2])
            if name in ("bfe_u32", "bfe_s32"):
                assert len(s.ops) <= 3
            got = s.many(*vals)
            for i in range(len(vals[0])):
                assert int(got[i]) == ref(*[int(v[i]) for v in vals], p, ln), (name, p, ln)


# ---------------------------------------------------------------------------------------------
# funnel shift

SHF = {f"shf.{'l' if left else 'r'}.{'clamp' if clamp else 'wrap'}": (left, clamp)
       for left in (True, False) for clamp in (False, True)}


@pytest.mark.parametrize("name", sorted(SHF))
@hyp(100)
@given(a=st32(), b=st32(), n=st_amount())
def test_shf_hypothesis(name, a, b, n):
    left, clamp = SHF[name]
    assert seq(name, ic.shf, [32, 32, 32], left, clamp).one(a, b, n) == alu.shf(a, b, n, left, clamp)


@pytest.mark.parametrize("name", sorted(SHF))
def test_shf_bulk_and_immediate(name):
    left, clamp = SHF[name]
    rng = np.random.default_rng(101)
    n = n_bulk(1 << 12)
    A, B = rand32(rng, n), rand32(rng, n)
    bulk_check(name, ic.shf, [32, 32, 32], lambda a, b, k: alu.shf(a, b, k, left, clamp),
               [A, B, amounts(rng, n)], left, clamp)
    for k in list(range(0, 70)) + [255, 256, M32]:
        s = Seq(lambda em, a, b: ic.shf(em, a, b, imm(k), left, clamp), [32, 32])
        assert len(s.ops) <= 3
        got = s.many(A[:256], B[:256])
        assert [int(v) for v in got] == [alu.shf(int(x), int(y), k, left, clamp) for x, y in zip(A[:256], B[:256])]


# ---------------------------------------------------------------------------------------------
# byte permute

PRMT_VALUES = [0x80808080, 0x7F7F7F7F, 0xFF00FF00, 0x00FF00FF, 0, M32, 0x7F80FF01, 0x12345678,
               0x89ABCDEF, 0x80000000, 0x00000080]


@pytest.mark.parametrize("mode", ic.PRMT_MODES)
@hyp(150)
@given(a=st32(), b=st32(), c=st.one_of(st.integers(0, M32), st.integers(0, 0xFFFF)))
def test_prmt_hypothesis(mode, a, b, c):
    assert seq(f"prmt.{mode}", ic.prmt, [32, 32, 32], mode).one(a, b, c) == alu.prmt(a, b, c, mode)


@pytest.mark.parametrize("mode", ic.PRMT_MODES)
def test_prmt_bulk(mode):
    rng = np.random.default_rng(111)
    n = n_bulk(1 << 12)
    v = np.array(PRMT_VALUES, dtype=U)
    A = np.concatenate([rng.integers(0, 1 << 32, n, dtype=U), np.repeat(v, len(v))])
    B = np.concatenate([rng.integers(0, 1 << 32, n, dtype=U), np.tile(v, len(v))])
    C = rng.integers(0, 1 << 32, len(A), dtype=U)
    bulk_check(f"prmt.{mode}", ic.prmt, [32, 32, 32], lambda a, b, c: alu.prmt(a, b, c, mode), [A, B, C], mode)


@pytest.mark.parametrize("mode", ic.PRMT_MODES)
def test_prmt_immediate(mode):
    """The selector folded at assembly time; for the default mode every 16-bit selector under
    --runslow (or --soak 8 and more), else a sample."""
    rng = np.random.default_rng(121)
    v = np.array(PRMT_VALUES, dtype=U)
    A = np.concatenate([rng.integers(0, 1 << 32, 21, dtype=U), np.repeat(v, len(v))])
    B = np.concatenate([rng.integers(0, 1 << 32, 21, dtype=U), np.tile(v, len(v))])
    if mode is None:
        if EXHAUSTIVE or SCALE >= 8:
            sels = range(1 << 16)
        else:
            sels = sorted({0x3210, 0x5410, 0x7632, 0x0123, 0x4321, 0x1032, 0x89AB, 0xCDEF, 0x8888,
                           0xFFFF, 0x7654, 0x0000, 0x3333, 0x8421, 0x89AC, 0x8880, 0x9910,
                           0xBA98, 0x0008, 0x8000, 0xAA98, 0x1111}
                          | {int(x) for x in rng.integers(0, 1 << 16, n_bulk(600))})
    else:
        sels = [0, 1, 2, 3, 0xFFFFFFFC, 0x12345677, M32]
    worst = 0
    for c in sels:
        s = Seq(lambda em, a, b: ic.prmt(em, a, b, imm(c), mode), [32, 32])
        check_structure(s.ops)
        worst = max(worst, len(s.ops))
        got = s.many(A, B)
        for i in range(len(A)):
            assert int(got[i]) == alu.prmt(int(A[i]), int(B[i]), c, mode), (mode, hex(c))
    assert worst <= 15
    if mode is None:
        assert measure_imm_prmt(0x3210) == 0 and measure_imm_prmt(0x5410) == 3
        assert measure_imm_prmt(0x8880) == 2 and measure_imm_prmt(0x9910) == 2


def measure_imm_prmt(c, mode=None):
    return ic.measure(lambda em, a, b: ic.prmt(em, a, b, imm(c), mode), [32, 32])


# ---------------------------------------------------------------------------------------------
# structure and costs


def test_costs_are_measured_counts():
    assert ic.COST == ic._costs()
    assert ic.COST["div_u32"] == 27 and ic.COST["rem_u32"] == 27
    assert ic.COST["div_u64"] <= 95 and ic.COST["mulhi_u64"] == 15 and ic.COST["shl64"] == 8
    for name, n in ic.COST.items():
        assert n > 0, name


def test_all_routines_alu_only_and_carry_pairs():
    for (name, widths, args, kw), s in list(_SEQ.items()):
        check_structure(s.ops)
    for fn, widths, args in [(ic.divrem_u32, [32, 32], ()), (ic.divrem_s32, [32, 32], ()),
                             (ic.divrem_u64, [64, 64], ()), (ic.divrem_s64, [64, 64], ()),
                             (ic.prmt, [32, 32, 32], ("b4e",))]:
        check_structure(Seq(fn, widths, *args).ops)
