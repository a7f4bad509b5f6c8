"""Bit-exactness of the straight-line integer routines (`qwengpu.machine.intcode`) against the
reference semantics (`qwengpu.interp.alu`).

Three layers:
* hypothesis: random and edge values, each example run through `Recorder.evaluate` (the
  reference single-lane evaluator of recorded micro-op sequences);
* bulk: the same recorded sequence evaluated on numpy arrays (`np_eval`, a vectorised
  `Recorder.evaluate`, itself checked against `Recorder.evaluate`) over large random and edge
  grids;
* exhaustive (INTCODE_EXHAUSTIVE=1): the 32-bit reciprocal over all 2^31 normalised divisors,
  the property the division proof rests on (docs/intcode.md).

INTCODE_SCALE (default 1) multiplies the bulk sample sizes and the hypothesis example counts.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qwengpu.machine.intcode as ic
from qwengpu.interp import alu
from qwengpu.machine.emit import Recorder
from qwengpu.machine.isa import ALU_OPS, M32, Imm, src

SCALE = float(os.environ.get("INTCODE_SCALE", "1"))
EXHAUSTIVE = os.environ.get("INTCODE_EXHAUSTIVE", "") not in ("", "0")
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
    env["__val__"] = val
    return env


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
        val = env["__val__"]
        if isinstance(self.out, tuple):
            return val(src(self.out[0])) | (val(src(self.out[1])) << U(32))
        return val(src(self.out))


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
    val = env["__val__"]
    for j, s in enumerate(samples):
        inputs = {x.value: int(v) for x, v in zip(xs, s)}
        for v in vals[3:]:
            assert rec.evaluate(inputs, v) == int(val(v)[j])


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
    s = Seq(lambda em, x: ic._recip32(em, x), [32])
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


@pytest.mark.skipif(not EXHAUSTIVE, reason="set INTCODE_EXHAUSTIVE=1 (about 5 minutes)")
def test_recip32_bound_exhaustive():
    chunk = 1 << 23
    for lo in range(1 << 31, 1 << 32, chunk):
        _check_recip(np.arange(lo, lo + chunk, dtype=U))
