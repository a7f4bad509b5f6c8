"""f32 div, rcp, sqrt (and rsqrt.approx) as sequences on the float unit (`softfloat.unit`): the
seeds' error bounds, the sequences against the interpreter (a few hundred operands per mode here;
`python -m qwengpu.assembler.softfloat.unitcheck` checks millions), the lowering on a machine with the
unit (the simulator of `compact-fpu` against the interpreter), and the fallback to soft-float on a
unit without FFMA."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwengpu import run
from qwengpu.assembler import softfloat as sf
from qwengpu.assembler.emit import Recorder
from qwengpu.assembler.softfloat import unit, unitcheck
from qwengpu.machine.config import COMPACT_FPU
from qwengpu.machine.uops import fpu_eval

MODES = ("rn", "rz", "rm", "rp")
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"


def test_reciprocal_of_a_normal_divisor_over_every_significand():
    """`unit._recip_normal32` (the short division's hoisted yh) is rcp.rn's result for every
    significand (and a fifth of them at the ends of its range and next to 1), both signs."""
    from qwengpu.semantics import floats as F
    rec = Recorder()
    x = rec.input()
    out = sf.builder.routine(rec.emitter(), unit._recip_normal32, x)
    every = np.arange(1 << 23, dtype=np.uint64)
    for field, sign, f in ((127, 1, every), (1, 0, every[::5]), (128, 0, every[1::5]), (252, 1, every[2::5])):
        c = f | np.uint64(field << 23) | np.uint64(sign << 31)
        got = rec.evaluate_lanes({x.value: c}, [out])[0]
        assert np.array_equal(got, F.frcp(c, width=32, rnd="rn", ftz=False).astype("uint64"))


def test_seeds_error_bounds_over_every_significand():
    f = np.arange(1 << 23, dtype=np.int64)
    b_bits = 0x3F800000 + f
    b = b_bits.astype(np.uint32).view(np.float32).astype(np.float64)
    y0 = ((unit.DIV_SEED - b_bits) & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
    err = np.abs(y0 * b - 1).max()
    assert err < 0.0506 and err ** 3 < 2 ** -12.9          # the cubic step leaves |1 - B y| < 2^-12.9
    m_bits = np.concatenate([b_bits, b_bits + (1 << 23)])  # M in [1, 4)
    m = m_bits.astype(np.uint32).view(np.float32).astype(np.float64)
    g0 = ((unit.RSQRT_SEED - (m_bits >> 1)) & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
    assert np.abs(g0 * np.sqrt(m) - 1).max() < 0.0343


def test_lane_evaluator_is_the_one_lane_definition():
    """`Recorder.evaluate_lanes` (numpy, used for the big check) computes what `evaluate`
    (`alu_eval`, `fpu_eval`) computes, lane by lane."""
    rng = np.random.default_rng(5)
    for op, rnd in (("div", "rn"), ("sqrt", "rp"), ("rcp", "rm")):
        fn, nin = unitcheck.SEQUENCES[op]
        rec = Recorder()
        ins = [rec.input() for _ in range(nin)]
        out = fn(rec.emitter(), *ins, rnd=rnd, ftz=False)
        xs = [rng.integers(0, 1 << 32, 40, dtype=np.uint64) for _ in ins]
        lanes = rec.evaluate_lanes({s.value: x for s, x in zip(ins, xs)}, [out])[0]
        one = [rec.evaluate({s.value: int(x[i]) for s, x in zip(ins, xs)}, out) for i in range(40)]
        assert [int(v) for v in lanes] == one


def test_sequences_use_the_unit_and_few_micro_ops():
    for op, (fn, nin) in unitcheck.SEQUENCES.items():
        rec = Recorder()
        fn(rec.emitter(), *[rec.input() for _ in range(nin)], rnd="rn")
        kinds = [o.kind for o in rec.ops]
        # fastdiv: the divisor's reciprocal (6), the short quotient (3 in rn), the sequence (9)
        assert kinds.count("fpu") == {"div": 9, "rcp": 8, "sqrt": 9, "fastdiv": 18}[op]
        assert all(o.extra.get("rnd") == "rn" for o in rec.ops if o.kind == "fpu")


@pytest.mark.parametrize("op", ["div", "rcp", "sqrt"])
@pytest.mark.parametrize("rnd", MODES)
@pytest.mark.parametrize("ftz", [False, True])
def test_sequences_match_the_interpreter_on_hard_operands(op, rnd, ftz):
    """A few hundred operands of every kind `hard_operands` makes (random patterns, subnormals,
    specials, thresholds, powers of two, exact quotients, near-midpoints)."""
    rng = np.random.default_rng([7, len(op), MODES.index(rnd), ftz])
    xs = unitcheck.hard_operands(op, 400, rng)
    got, want = unitcheck.run_lanes(op, rnd, ftz, *xs), unitcheck.reference(op, rnd, ftz, *xs)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), [(tuple(hex(int(x[i])) for x in xs), hex(int(got[i])), hex(int(want[i]))) for i in bad[:4]]


@SETTINGS
@given(a=st.integers(0, 2**32 - 1), b=st.integers(0, 2**32 - 1), rnd=st.sampled_from(MODES), ftz=st.booleans())
def test_division_sequence_one_lane(a, b, rnd, ftz):
    """The one-lane definition (`fpu_eval` for the unit's ops) against the interpreter."""
    rec = Recorder()
    x, y = rec.input(), rec.input()
    out = unit.div(rec.emitter(), x, y, rnd=rnd, ftz=ftz)
    want = int(unitcheck.reference("div", rnd, ftz, np.array([a], dtype=np.uint64), np.array([b], dtype=np.uint64))[0])
    assert rec.evaluate({x.value: a, y.value: b}, out) == want


def test_fpu_eval_lanes_is_fpu_eval_per_lane():
    from qwengpu.machine.uops import fpu_eval_lanes
    rng = np.random.default_rng(9)
    a, b, c = (rng.integers(0, 1 << 32, 30, dtype=np.uint64) for _ in range(3))
    for op, mods in (("FFMA", {"rnd": "rz"}), ("FMUL", {"rnd": "rn", "ftz": True}), ("FADD", {"rnd": "rp", "sat": True}),
                     ("FSETP", {"compare": "ltu"}), ("FMAX", {"nan": True})):
        got = fpu_eval_lanes(op, mods, a, b, c)
        assert [int(v) for v in got] == [fpu_eval(op, mods, int(a[i]), int(b[i]), int(c[i])) for i in range(30)]


# ---------------------------------------------------------------------------------------------
# the lowering on the simulator


def _kernel(instr: str, nin: int) -> str:
    loads = "\n".join(f"ld.param.u64 %rd{k + 1}, [in{k}]; add.u64 %rd{k + 1}, %rd{k + 1}, %rd9; "
                      f"ld.global.f32 %f{k + 1}, [%rd{k + 1}];" for k in range(nin))
    params = ", ".join([f".param .u64 in{k}" for k in range(nin)] + [".param .u64 out"])
    srcs = ", ".join(f"%f{k + 1}" for k in range(nin))
    return (f"{HEADER}.visible .entry k({params})\n{{\n.reg .f32 %f<8>;\n.reg .b32 %r<4>;\n.reg .b64 %rd<12>;\n"
            "mov.u32 %r1, %tid.x;\nmul.wide.u32 %rd9, %r1, 4;\n"
            f"{loads}\n{instr} %f7, {srcs};\n"
            "ld.param.u64 %rd8, [out]; add.u64 %rd8, %rd8, %rd9; st.global.f32 [%rd8], %f7;\nret;\n}\n")


def _check_on_simulator(instr: str, inputs: list, config=COMPACT_FPU):
    n = len(inputs[0])
    args = [{"buffer": "uint32", "data": [int(v) for v in x]} for x in inputs] + [{"buffer": "uint32", "size": n}]
    spec = {"grid": 1, "block": n, "args": args}
    ptx = _kernel(instr, len(inputs))
    want = run(ptx, spec).buffers[-1]
    got = run(ptx, spec, engine="sim", config=config).buffers[-1]
    bad = [i for i in range(n) if want[i] != got[i]]
    assert not bad, [(instr, [hex(int(x[i])) for x in inputs], hex(int(got[i])), hex(int(want[i]))) for i in bad[:4]]


FORMS = [(f"{op}.{r}{f}.f32", n) for op, n in (("div", 2), ("rcp", 1), ("sqrt", 1)) for r in MODES
         for f in ("", ".ftz")] + [
    ("div.full.f32", 2), ("div.approx.f32", 2), ("div.approx.ftz.f32", 2), ("rcp.approx.f32", 1),
    ("rcp.approx.ftz.f32", 1), ("sqrt.approx.f32", 1), ("sqrt.approx.ftz.f32", 1), ("rsqrt.approx.f32", 1),
    ("rsqrt.approx.ftz.f32", 1)]


@pytest.mark.parametrize("instr,nin", FORMS, ids=[f[0] for f in FORMS])
@settings(max_examples=1, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1))
def test_lowered_sequences_on_the_simulator(instr, nin, seed):
    """Each form on 16 lanes of `compact-fpu`'s simulator: hard operands (`hard_operands`, mixed)."""
    op = instr.split(".")[0]
    op = {"rsqrt": "sqrt"}.get(op, op)
    xs = unitcheck.hard_operands(op, 64, np.random.default_rng(seed))
    pick = np.random.default_rng(seed + 1).choice(len(xs[0]), 16, replace=False)
    _check_on_simulator(instr, [x[pick] for x in xs])


def test_lowering_uses_the_sequences_only_on_a_unit_with_ffma():
    from qwengpu import load_program
    from qwengpu.assembler import assemble
    from qwengpu.launch import LaunchSpec
    module = load_program(_kernel("div.rn.f32", 2))
    spec = LaunchSpec.from_json({"grid": 1, "block": 4, "args": [{"buffer": "uint32", "size": 4}] * 3})
    no_fma = dataclasses.replace(COMPACT_FPU, name="fpu-no-fma",
                                 fpu_ops=tuple(o for o in COMPACT_FPU.fpu_ops if o != "FFMA"))

    def unit_ops(config):
        img = assemble(module, spec, config=config)
        return sum(1 for b in img.bundles for s in b.slots if s is not None and s.op.kind == "fpu")
    assert unit_ops(COMPACT_FPU) == 9
    assert unit_ops(no_fma) == 0
    assert unit.has_sequences(COMPACT_FPU.fpu_ops) and not unit.has_sequences(no_fma.fpu_ops)
    x = np.array([0x3F800000, 0x00000003, 0x7F7FFFFF, 0x40490FDB], dtype=np.uint64)
    _check_on_simulator("div.rn.f32", [x, x[::-1].copy()], config=no_fma)
    assert sf.div is not unit.div


def test_divisions_by_one_register_share_its_reciprocal_until_it_is_written():
    """The first two divisions by %f2 share its hoisted part (`FastDivisionOps.unit_fast_divisor`: the
    reciprocal of a normal divisor, `_recip_normal32`, once) and take the short path (3 unit ops each in
    rn; one shared copy of the whole division for lanes out of its window); after %f2 is
    written the third, the last by it, is the sequence again (`unit_divisor`), and every result
    is the interpreter's."""
    from qwengpu import load_program
    from qwengpu.assembler import assemble
    from qwengpu.launch import LaunchSpec
    body = ("div.rn.f32 %f3, %f1, %f2;\ndiv.rn.f32 %f4, %f3, %f2;\nadd.rn.f32 %f2, %f2, %f1;\n"
            "div.rn.f32 %f5, %f4, %f2;\nadd.rn.f32 %f7, %f5, %f4;\n//")
    ptx = _kernel(body, 2).replace(" %f7, %f1, %f2;", ";")
    n = 16
    rng = np.random.default_rng(3)
    a = np.concatenate([unitcheck.hard_operands("div", 64, rng)[0][:8], rng.integers(0, 1 << 32, 8, dtype=np.uint64)])
    b = np.concatenate([rng.integers(0x3E000000, 0x41000000, 8, dtype=np.uint64), a[:8][::-1]])
    spec = {"grid": 1, "block": n, "args": [{"buffer": "uint32", "data": [int(v) for v in x]} for x in (a, b)]
            + [{"buffer": "uint32", "size": n}]}
    want = run(ptx, spec).buffers[-1]
    got = run(ptx, spec, engine="sim", config=COMPACT_FPU).buffers[-1]
    assert np.array_equal(want, got)
    img = assemble(load_program(ptx), LaunchSpec.from_json(spec), config=COMPACT_FPU)
    ops = [s.op.op for bl in img.bundles for s in bl.slots if s is not None and s.op.kind == "fpu"]
    assert len(ops) == 6 + 2 * 3 + 9 + (3 + 6) + 2


def test_many_divisions_share_one_copy_when_the_rom_is_short():
    """30 divisions by changing divisors do not fit the ROM inlined: the whole division becomes one
    shared routine (`FloatOps.float_add` with `share_routines`), still exact."""
    from qwengpu import load_program
    from qwengpu.assembler import assemble
    from qwengpu.launch import LaunchSpec
    steps = "\n".join("div.rn.f32 %f1, %f2, %f1;\nadd.rn.f32 %f2, %f2, %f1;" for _ in range(30))
    ptx = _kernel(steps + "\nmov.f32 %f7, %f1;\n//", 2).replace(" %f7, %f1, %f2;", ";")
    rng = np.random.default_rng(11)
    a, b = (rng.integers(0x3F000000, 0x40800000, 8, dtype=np.uint64) for _ in range(2))
    spec = {"grid": 1, "block": 8, "args": [{"buffer": "uint32", "data": [int(v) for v in x]} for x in (a, b)]
            + [{"buffer": "uint32", "size": 8}]}
    img = assemble(load_program(ptx), LaunchSpec.from_json(spec), config=COMPACT_FPU)
    assert len(img.bundles) <= COMPACT_FPU.rom_bundles and any("routine" in bl.label for bl in img.bundles)
    assert np.array_equal(run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim", config=COMPACT_FPU).buffers[-1])


# ---------------------------------------------------------------------------------------------
# division by a hoisted divisor: the short path (four unit ops) where `fast_check` holds


def _in_window(draw_sign, frac, eb, d):
    """An f32 pattern with sign, fraction, and unbiased exponent eb + d (clipped to normal)."""
    return (draw_sign << 31) | (min(max(eb + d + 127, 1), 254) << 23) | frac


@SETTINGS
@given(sa=st.integers(0, 1), sb=st.integers(0, 1), fa=st.integers(0, (1 << 23) - 1), fb=st.integers(0, (1 << 23) - 1),
       eb=st.integers(-unit.FAST_DIVISOR - 2, unit.FAST_DIVISOR + 2), d=st.integers(-unit.FAST_SPAN - 2, unit.FAST_SPAN + 2),
       kind=st.sampled_from(["any", "a == b", "b power of two", "exact", "random bits"]),
       rnd=st.sampled_from(MODES), ftz=st.booleans(), r=st.integers(0, 2**32 - 1))
def test_short_division_one_lane(sa, sb, fa, fb, eb, d, kind, rnd, ftz, r):
    """`unit.fast_div` (the short path where `fast_check` holds, else `div`; `fpu_eval` for the
    unit's ops) against the interpreter, around the window's edges: a == b, powers of two,
    exact quotients (a = b * q with q of few bits), random patterns."""
    b = _in_window(sb, fb, eb, 0)
    a = _in_window(sa, fa, eb, d)
    if kind == "a == b":
        a = b ^ (sa << 31)
    elif kind == "b power of two":
        b &= 0xFF800000
    elif kind == "exact":
        q = float(np.float32(1 + (r & 0xFF) / 256) * np.float32(2.0) ** (d // 4))
        bv = np.uint32(b).view(np.float32)
        a = int(np.float32(bv * np.float32(q)).view(np.uint32))
    elif kind == "random bits":
        a = r
    rec = Recorder()
    x, y = rec.input(), rec.input()
    out = unit.fast_div(rec.emitter(), x, y, rnd=rnd, ftz=ftz)
    want = int(unitcheck.reference("div", rnd, ftz, np.array([a], dtype=np.uint64), np.array([b], dtype=np.uint64))[0])
    assert rec.evaluate({x.value: a, y.value: b}, out) == want


@pytest.mark.parametrize("rnd", MODES)
@pytest.mark.parametrize("ftz", [False, True])
def test_short_division_on_hard_operands(rnd, ftz):
    """`unitcheck`'s operands for the short division (half `div`'s, half moved into the window:
    a == b, exact quotients, powers of two, near-midpoints, the window's edges), and at least a
    third of them take the short path (the check is not vacuous)."""
    rng = np.random.default_rng([8, MODES.index(rnd), ftz])
    a, b = unitcheck.hard_operands("fastdiv", 2000, rng)
    got, want = unitcheck.run_lanes("fastdiv", rnd, ftz, a, b), unitcheck.reference("fastdiv", rnd, ftz, a, b)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), [(hex(int(a[i])), hex(int(b[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:4]]
    rec = Recorder()
    x, y = rec.input(), rec.input()
    em = rec.emitter()
    yh, neg_c, lo, width = unit.fast_divisor(em, y)
    ok = unit.fast_check(em, x, lo, width)
    yl = None if rnd == "rn" else unit.fast_low(em, yh, neg_c)
    short = unit.fast_quotient(em, x, yh, neg_c, rnd=rnd, yl=yl)
    ok_l, short_l = rec.evaluate_lanes({x.value: a, y.value: b}, [ok, short])
    taken = ok_l.astype(bool)
    assert taken.sum() > len(a) // 3 and np.array_equal(short_l[taken], want[taken])


def test_directed_short_division_needs_its_low_part():
    """Without yl (q0 = RN(a*yh), Markstein's premise unmet) the step is wrong in rz and rm even
    for a == b (x / x = 1 - 2^-24 for b = 0x3F801467): why rz, rm, rp take four unit ops."""
    b = 0x3F801467
    rec = Recorder()
    x, y = rec.input(), rec.input()

    def three_ops(bl, a, c):
        yh, neg_c, lo, width = unit._fast_divisor32(bl, c)
        q0 = bl.fpu("FMUL", a, yh, rnd="rn")
        return bl.fpu("FFMA", bl.fpu("FFMA", neg_c, q0, a, rnd="rn"), yh, q0, rnd="rz")
    out = sf.builder.routine(rec.emitter(), three_ops, x, y)
    assert rec.evaluate({x.value: b, y.value: b}, out) == 0x3F7FFFFF
    four = unit.fast_div(rec.emitter(), x, y, rnd="rz")
    assert rec.evaluate({x.value: b, y.value: b}, four) == 0x3F800000


@pytest.mark.parametrize("rnd", MODES)
def test_short_division_unit_ops(rnd):
    rec = Recorder()
    em = rec.emitter()
    x, yh, yl, nc = (rec.input() for _ in range(4))
    unit.fast_quotient(em, x, yh, nc, rnd=rnd, yl=None if rnd == "rn" else yl)
    fpu = [o for o in rec.ops if o.kind == "fpu"]
    if rnd == "rn":
        assert [o.op for o in fpu] == ["FMUL", "FFMA", "FFMA"]
    else:
        assert [o.op for o in fpu] == ["FMUL", "FFMA", "FFMA", "FFMA"]
        with pytest.raises(ValueError):
            unit.fast_quotient(em, x, yh, nc, rnd=rnd)
    assert [o.extra.get("rnd") for o in fpu] == ["rn"] * (len(fpu) - 1) + [rnd]
    assert not any(o.extra.get("ftz") for o in fpu)


@pytest.mark.parametrize("form", [f"div.{r}{f}.f32" for r in MODES for f in ("", ".ftz")] + ["div.full.f32"])
def test_divisions_by_a_hoisted_divisor_on_the_simulator(form):
    """Three divisions by %f2 (the first hoists it: `FastDivisionOps.unit_fast_divisor`), on 16 lanes whose
    operands are in the window, out of it (subnormal, huge, zero, infinite, NaN) or mixed within
    the warp (both paths run), against the interpreter."""
    body = (f"{form} %f3, %f1, %f2;\n{form} %f4, %f3, %f2;\nadd.rn.f32 %f5, %f4, %f1;\n"
            f"{form} %f6, %f5, %f2;\nmov.f32 %f7, %f6;\n//")
    ptx = _kernel(body, 2).replace(" %f7, %f1, %f2;", ";")
    rng = np.random.default_rng(len(form))
    a, b = unitcheck.hard_operands("fastdiv", 4000, rng)
    a, b = np.concatenate([a[2000:2008], a[:8]]), np.concatenate([b[2000:2008], b[:8]])
    for lanes in (slice(0, 8), slice(0, 16)):
        x, y = a[lanes], b[lanes]
        spec = {"grid": 1, "block": len(x), "args": [{"buffer": "uint32", "data": [int(v) for v in z]} for z in (x, y)]
                + [{"buffer": "uint32", "size": len(x)}]}
        assert np.array_equal(run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim", config=COMPACT_FPU).buffers[-1])


def test_a_divisor_used_once_keeps_the_sequence():
    """One division by a register (or one before the register is written) does not hoist: the
    short path's divisor part costs more than the sequence's."""
    from qwengpu import load_program
    from qwengpu.assembler import assemble
    from qwengpu.launch import LaunchSpec

    def unit_ops(body):
        ptx = _kernel(body, 2).replace(" %f7, %f1, %f2;", ";")
        spec = LaunchSpec.from_json({"grid": 1, "block": 4, "args": [{"buffer": "uint32", "size": 4}] * 3})
        img = assemble(load_program(ptx), spec, config=COMPACT_FPU)
        return [s.op.op for bl in img.bundles for s in bl.slots if s is not None and s.op.kind == "fpu"]
    once = unit_ops("div.rn.f32 %f3, %f1, %f2;\nmov.f32 %f7, %f3;\n//")
    written = unit_ops("div.rn.f32 %f3, %f1, %f2;\nadd.rn.f32 %f2, %f2, %f1;\ndiv.rn.f32 %f4, %f3, %f2;\n"
                       "mov.f32 %f7, %f4;\n//")
    twice = unit_ops("div.rn.f32 %f3, %f1, %f2;\ndiv.rn.f32 %f4, %f3, %f2;\nmov.f32 %f7, %f4;\n//")
    assert len(once) == 9 and len(written) == 2 * 9 + 1
    # hoisted: the divisor's reciprocal (6), two short quotients (2 * 3), one shared copy of the
    # whole division (9) for the lanes out of the window
    assert len(twice) == 6 + 2 * 3 + 9
    # rz: e and yl are hoisted too, and the short quotient takes four
    rz = unit_ops("div.rz.f32 %f3, %f1, %f2;\ndiv.rz.f32 %f4, %f3, %f2;\nmov.f32 %f7, %f4;\n//")
    assert len(rz) == 6 + 2 + 2 * 4 + 9


def test_reduced_precision_exhaustive_check_against_rationals():
    """`divexhaustive` (every pair of p-bit significands, int64 arithmetic) agrees with an
    independent check in exact rationals at p = 5, and says what docs/softfloat.md reports at
    p = 5..8: the four-op form right in every mode, the three-op form right in rn only."""
    from fractions import Fraction as Q

    from qwengpu.assembler.softfloat import divexhaustive as dx

    def rnd(x, p, mode):
        if x < 0:
            return -rnd(-x, p, {"rm": "rp", "rp": "rm"}.get(mode, mode))
        if x == 0:
            return x
        e = x.numerator.bit_length() - x.denominator.bit_length()
        e -= Q(2) ** e > x
        w = Q(2) ** (e - p + 1)
        n, f = divmod(x / w, 1)
        up = {"rn": f > Q(1, 2) or (f == Q(1, 2) and n % 2 == 1), "rz": False, "rm": False, "rp": f > 0}[mode]
        return (n + up) * w

    p = 5
    want = {"three": dict.fromkeys(dx.MODES, 0), "four": dict.fromkeys(dx.MODES, 0)}
    for b in range(1 << (p - 1), 1 << p):
        B = Q(b, 1 << (p - 1))
        yh = rnd(1 / B, p, "rn")
        yl = 1 / B - yh and rnd(1 / B - yh, p, "rn")
        for a in range(1 << (p - 1), 1 << p):
            A = Q(a, 1 << (p - 1))
            for form, q0 in (("three", rnd(A * yh, p, "rn")),
                             ("four", rnd(A * yh + (yl and rnd(A * yl, p, "rn")), p, "rn"))):
                r = rnd(A - B * q0, p, "rn")
                for mode in dx.MODES:
                    want[form][mode] += rnd(q0 + r * yh, p, mode) != rnd(A / B, p, mode)
    assert {form: dx.wrong(p, form) for form in dx.FORMS} == want
    for p in (6, 7, 8):
        assert dx.wrong(p, "four") == dict.fromkeys(dx.MODES, 0)
        three = dx.wrong(p, "three")
        assert three["rn"] == three["rp"] == 0 and three["rz"] == three["rm"] > 0
    # f32's precision, a sample of the dividends (the command runs all 2^23)
    assert dx.every_dividend(0x3FFFFFFF, "rn", step=4099) == dx.every_dividend(0x3F801467, "rz", step=4099) == 0
    with pytest.raises(ValueError):
        dx.every_dividend(0x7F000000, "rn", step=4099)      # 2^127: outside the window


@pytest.mark.parametrize("body", [
    "div.rn.f32 %f3, %f1, 0f40400000;\ndiv.rn.f32 %f4, %f3, 0f40400000;\ndiv.rm.f32 %f5, %f2, 0f40400000;\n"
    "add.f32 %f6, %f3, %f4;\nadd.f32 %f7, %f6, %f5;",                       # an immediate divisor
    "div.rn.f32 %f3, 0f3F800000, %f2;\ndiv.rz.f32 %f4, 0f40000000, %f2;\nadd.f32 %f7, %f3, %f4;",  # immediate dividends
    "div.rn.f32 %f3, %f1, %f2;\ndiv.rn.f32 %f2, %f3, %f2;\ndiv.rn.f32 %f4, %f3, %f2;\nadd.f32 %f7, %f4, %f2;",  # b = a / b
    "div.rp.f32 %f1, %f1, %f2;\ndiv.rp.f32 %f1, %f1, %f2;\ndiv.rn.f32 %f1, %f1, %f2;\nmov.f32 %f7, %f1;",  # a = a / b
    "div.rz.ftz.f32 %f3, %f1, 0f3DCCCCCD;\ndiv.rp.f32 %f4, %f2, 0fC2F60000;\nadd.f32 %f7, %f3, %f4;",  # one each
    "setp.lt.f32 %p1, %f1, %f2;\nmov.f32 %f3, %f1;\n@%p1 div.rn.f32 %f3, %f1, %f2;\ndiv.rn.f32 %f4, %f3, %f2;\n"
    "div.rn.f32 %f5, %f4, %f2;\n@!%p1 div.rm.f32 %f5, %f5, %f2;\nmov.f32 %f7, %f5;",   # guarded divisions
], ids=["immediate divisor", "immediate dividends", "b = a / b", "a = a / b", "one division by an immediate",
        "guarded"])
def test_hoisted_divisor_forms_on_the_simulator(body):
    """Divisions that hoist (or not) around immediates, registers that are both dividend or divisor
    and result, and guarded divisions, on 16 lanes in and out of the window, against the
    interpreter."""
    ptx = _kernel(body + "\n//", 2).replace(" %f7, %f1, %f2;", ";")
    ptx = ptx.replace(".reg .b32 %r<4>;", ".reg .b32 %r<4>;\n.reg .pred %p<2>;")
    a, b = unitcheck.hard_operands("fastdiv", 4000, np.random.default_rng(4))
    x, y = np.concatenate([a[2000:2012], a[:4]]), np.concatenate([b[2000:2012], b[:4]])
    spec = {"grid": 1, "block": 16, "args": [{"buffer": "uint32", "data": [int(v) for v in z]} for z in (x, y)]
            + [{"buffer": "uint32", "size": 16}]}
    assert np.array_equal(run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim", config=COMPACT_FPU).buffers[-1])


def test_an_immediate_divisor_is_folded():
    """An immediate divisor's hoisted part is computed at assembly time (`constant_fast_divisor`:
    yh is rcp.rn's result), so one division by it is already short; out of the short path's range
    (zero, infinity, NaN, subnormal, |c| >= 2^41) the sequence stays."""
    from qwengpu import load_program
    from qwengpu.assembler import assemble
    from qwengpu.assembler.lower.fastdiv import constant_fast_divisor
    from qwengpu.launch import LaunchSpec
    from qwengpu.semantics import floats as F
    three = 0x40400000
    yh, neg_c, lo, width, yl = constant_fast_divisor(three, "rz")
    assert yh.value.value == int(F.frcp(np.array([three], dtype=np.uint64), width=32, rnd="rn", ftz=False)[0])
    assert neg_c.value.value == three | 0x80000000 and width.value.value and yl is not None
    assert constant_fast_divisor(three, "rn")[4] is None
    for c in (0, 0x80000000, 0x7F800000, 0x7FC00000, 0x00000001, 0x54000000, 0x2A000000):
        assert constant_fast_divisor(c, "rn") is None, hex(c)

    def unit_ops(divisor):
        ptx = _kernel(f"div.rn.f32 %f3, %f1, {divisor};\nmov.f32 %f7, %f3;\n//", 2).replace(" %f7, %f1, %f2;", ";")
        spec = LaunchSpec.from_json({"grid": 1, "block": 4, "args": [{"buffer": "uint32", "size": 4}] * 3})
        img = assemble(load_program(ptx), spec, config=COMPACT_FPU)
        return len([s for bl in img.bundles for s in bl.slots if s is not None and s.op.kind == "fpu"])
    assert unit_ops("0f40400000") == 3 + 9          # the short path, and the shared full division
    assert unit_ops("0f00000000") == 9              # a zero divisor: the sequence
