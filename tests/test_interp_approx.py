"""Approximate instructions (ex2, lg2, sin, cos, tanh, rsqrt .approx; rcp/sqrt/div .approx; div.full):
qwenGPU's one definition of each (`qwengpu.semantics.approx`), within the PTX ISA's stated error, the same
bits on the interpreter, in the machine's micro-ops and on the simulator; and the option that refuses them."""
from __future__ import annotations

import numpy as np
import pytest
import sizes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_assembler_lower import kernel
from test_softfloat import Built

from qwengpu import load_program, run
from qwengpu.assembler.softfloat import approx as sf_approx
from qwengpu.semantics import approx
from qwengpu.ptx.isa import PTXUnsupported
from qwengpu.suite import _fp

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
SCALE = max(1, int(sizes.SOAK))
FORMS = [(op, ftz) for op in sf_approx.APPROX_OPS for ftz in (False, True) if not (op == "tanh" and ftz)]
SPECIALS = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x3F800000, 0xBF800000, 1,
            0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x43000000, 0x42FE0000, 0xC3150000,
            0xC3160000, 0xC3170000, 0x43800000, 0xC3800000, 0x40490FDB, 0x43E0F0A0, 0x3C800000, 0x3C7FFFFF]


def f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32).astype(np.float64)


def bits_of(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)


def words(rng, n: int) -> np.ndarray:
    """Random bit patterns, values of every magnitude, and the specials."""
    return np.concatenate([rng.integers(0, 2 ** 32, n, dtype=np.uint64),
                           bits_of(rng.uniform(-40, 40, n)), bits_of(np.exp(rng.uniform(-90, 90, n))),
                           np.asarray(SPECIALS, dtype=np.uint64)])


# ------------------------------------------------------------------------------------------------
# the definitions against the mathematical functions: within the ISA's stated error

def test_ex2_within_half_an_ulp_and_a_bit():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-126, 128, 200_000 * SCALE), rng.uniform(-1, 1, 50_000)]).astype(np.float32)
    for ftz in (False, True):
        r = f32(approx.ex2(bits_of(x), ftz=ftz))
        ref = np.exp2(x.astype(np.float64))
        ulp = np.exp2(np.floor(np.log2(ref)) - 23)
        assert (np.abs(r - ref) / ulp).max() < 0.52          # PTX: 2 ulp (2^-22 relative)
    x = rng.uniform(-149.9, -126, 50_000).astype(np.float32)         # subnormal results
    r, ref = f32(approx.ex2(bits_of(x))), np.exp2(x.astype(np.float64))
    assert (np.abs(r - ref) / 2.0 ** -149).max() < 0.51
    assert not f32(approx.ex2(bits_of(x), ftz=True)).any()          # flushed to +0


@pytest.mark.parametrize("ftz", [False, True])
def test_error_bounds(ftz):
    rng = np.random.default_rng(1)
    n = 100_000 * SCALE

    def run_(op, x):
        return f32(approximate(op, bits_of(x), ftz))

    x = rng.uniform(-100 * np.pi, 100 * np.pi, n).astype(np.float32)
    for op, fn in (("sin", np.sin), ("cos", np.cos)):
        assert np.log2(np.abs(run_(op, x) - fn(x.astype(np.float64))).max()) < -24.5    # PTX: 2^-20.5 absolute
    x = np.exp(rng.uniform(-87, 88, n)).astype(np.float32)
    d = x.astype(np.float64)
    err = np.abs(run_("lg2", x) - np.log2(d))
    near = (d >= 0.5) & (d <= 2)
    assert np.log2(err[near].max()) < -24                            # PTX: 2^-22 absolute in [0.5, 2]
    assert np.log2((err / np.abs(np.log2(d)))[~near].max()) < -23.5  # relative elsewhere
    assert np.log2((np.abs(run_("rsqrt", x) - d ** -0.5) * d ** 0.5).max()) < -22.9
    if not ftz:
        x = np.concatenate([rng.uniform(-12, 12, n), rng.uniform(-0.05, 0.05, n)]).astype(np.float32)
        ref = np.tanh(x.astype(np.float64))
        nz = ref != 0
        assert np.log2((np.abs(run_("tanh", x) - ref)[nz] / np.abs(ref[nz])).max()) < -13   # PTX: 2^-10.987


def approximate(op, a, ftz):
    return approx.approximate(op, a, ftz=ftz)


def test_special_values():
    inf, nan = np.inf, np.nan
    x = bits_of([0.0, -0.0, inf, -inf, nan, -1.0])
    want = {"ex2": [1, 1, inf, 0, nan, 0.5], "lg2": [-inf, -inf, inf, nan, nan, nan],
            "sin": [0, -0.0, nan, nan, nan, np.sin(np.float32(-1.0))], "cos": [1, 1, nan, nan, nan, None],
            "tanh": [0, -0.0, 1, -1, nan, None], "rsqrt": [inf, -inf, 0, nan, nan, nan]}
    for op, w in want.items():
        got = approx.approximate(op, x)
        for g, v in zip(got, w):
            if v is None:
                continue
            gv = f32(g)
            if np.isnan(v):
                assert int(g) == 0x7FFFFFFF, op                    # the canonical NaN
            elif np.isinf(v):
                assert gv == v, op
            elif v == 0:
                assert gv == 0 and np.signbit(gv) == np.signbit(v), op
            else:
                assert abs(gv - v) <= abs(v) * 2.0 ** -20, op


def test_suite_oracle_ex2_is_the_same_definition():
    """The suite's oracles re-implement ex2.approx from its description (`suite._fp.ex2_approx`, Python
    integers): it agrees with `qwengpu.semantics.approx` bit for bit."""
    rng = np.random.default_rng(2)
    x = words(rng, 3000 * SCALE)
    for ftz in (False, True):
        got = approx.ex2(x, ftz=ftz)
        want = [int(np.float32(_fp.ex2_approx(v, ftz)).view(np.uint32)) for v in f32(x).astype(np.float32)]
        assert [int(g) for g in got] == want


# ------------------------------------------------------------------------------------------------
# the machine's micro-ops compute the interpreter's bits

@pytest.mark.parametrize("op, ftz", FORMS)
def test_micro_ops_equal_the_interpreter(op, ftz):
    b = Built(lambda em, a: sf_approx.approximate(em, op, a, ftz), 1)
    x = words(np.random.default_rng(3), 4000 * SCALE)
    assert np.array_equal(b.run(x)[0], approx.approximate(op, x, ftz=ftz))


@settings(max_examples=40 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FORMS), st.integers(0, 2 ** 32 - 1))
def test_micro_ops_equal_the_interpreter_one_lane(form, word):
    op, ftz = form
    b = _built(op, ftz)
    assert b.run1(word)[0] == int(approx.approximate(op, [word], ftz=ftz)[0])


_BUILT: dict = {}


def _built(op, ftz):
    if (op, ftz) not in _BUILT:
        _BUILT[op, ftz] = Built(lambda em, a: sf_approx.approximate(em, op, a, ftz), 1)
    return _BUILT[op, ftz]


def test_fixed_point_programs_cost_few_micro_ops():
    assert _built("ex2", True).n_ops < 70 and _built("sin", False).n_ops < 90 and _built("cos", True).n_ops < 90
    assert _built("lg2", True).n_ops < 90


def test_sin_and_cos_beyond_the_stated_range_stay_deterministic_and_bounded():
    x = bits_of(np.random.default_rng(6).uniform(-1e30, 1e30, 5000))
    for op in ("sin", "cos"):
        r = f32(approx.approximate(op, x))
        assert np.all(np.abs(r) <= 1.0) and np.array_equal(_built(op, False).run(x)[0], approx.approximate(op, x))


def f64_words(rng, n: int) -> np.ndarray:
    return np.concatenate([rng.integers(0, 2 ** 64, n, dtype=np.uint64),
                           np.exp(rng.uniform(-700, 700, n)).view(np.uint64),
                           (-np.exp(rng.uniform(-700, 700, n))).view(np.uint64),
                           np.float64([0, -0.0, np.inf, -np.inf, np.nan, 1, 5e-324, -5e-324, 1e308, 2.0 ** -1022,
                                       2.0 ** 1022 * 1.5]).view(np.uint64)])


@pytest.mark.parametrize("fn, ref", [(sf_approx.rcp_f64, approx.rcp_f64), (sf_approx.rsqrt_f64, approx.rsqrt_f64)])
def test_f64_forms_micro_ops_equal_the_interpreter(fn, ref):
    x = f64_words(np.random.default_rng(8), 1500 * SCALE)
    b = Built(lambda em, lo, hi: fn(em, (lo, hi)), 2)
    lo, hi = b.run(x & np.uint64(0xFFFFFFFF), x >> np.uint64(32))
    got = (np.asarray(hi, dtype=np.uint64) << np.uint64(32)) | np.broadcast_to(np.asarray(lo, dtype=np.uint64), x.shape)
    assert np.array_equal(got, ref(x))


def test_f64_forms_error():
    d = np.exp(np.random.default_rng(9).uniform(-700, 700, 100_000 * SCALE))
    r = approx.rcp_f64(d.view(np.uint64))
    assert not (r & np.uint64(0xFFFFFFFF)).any()                     # the lower word is zero
    assert np.log2(np.abs(r.view(np.float64) * d - 1).max()) <= -21
    assert np.abs(approx.rsqrt_f64(d.view(np.uint64)).view(np.float64) * np.sqrt(d) - 1).max() <= 2.0 ** -52
    flushed = approx.rcp_f64(np.float64([5e-324, -5e-324, 1e308, -1e308]).view(np.uint64)).view(np.float64)
    assert list(flushed) == [np.inf, -np.inf, 0.0, -0.0] and np.signbit(flushed[3])


# ------------------------------------------------------------------------------------------------
# one-instruction kernels: interpreter = simulator

@pytest.mark.parametrize("instr, n", [("ex2.approx.ftz.f32", 32), ("ex2.approx.f32", 32), ("rsqrt.approx.f32", 32),
                                      ("rsqrt.approx.ftz.f32", 32), ("tanh.approx.f32", 32), ("lg2.approx.f32", 8),
                                      ("lg2.approx.ftz.f32", 8), ("sin.approx.f32", 32), ("cos.approx.ftz.f32", 32),
                                      ("rcp.approx.f32", 32), ("rcp.approx.ftz.f32", 32), ("sqrt.approx.f32", 32),
                                      ("sqrt.approx.ftz.f32", 32)])
def test_one_instruction_on_the_simulator(instr, n):
    rng = np.random.default_rng(4)
    vals = [int(v) for v in words(rng, n)[:n]]
    vals[:4] = [0x3F800000, 0xC0490FDB, 0x00000001, 0x7F800000][:min(4, n)]
    check(instr, [vals])


def check(instr, inputs):
    """`instr` on len(inputs[0]) threads (one block): the interpreter and the simulator agree."""
    n = len(inputs[0])
    spec = {"grid": 1, "block": n, "args": [{"buffer": "uint32", "data": v} for v in inputs]
            + [{"buffer": "uint32", "size": n}]}
    ptx = kernel(instr, "f32", ["f32"] * len(inputs))
    want, got = run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1]
    assert np.array_equal(want, got), instr
    return want


@pytest.mark.parametrize("instr", ["rcp.approx.ftz.f64", "rsqrt.approx.f64"])
def test_f64_forms_on_the_simulator(instr):
    x = [int(v) for v in f64_words(np.random.default_rng(10), 10)[:32]]
    spec = {"grid": 1, "block": 32, "args": [{"buffer": "uint64", "data": x}, {"buffer": "uint64", "size": 32}]}
    ptx = kernel(instr, "f64", ["f64"])
    assert np.array_equal(run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1])


@pytest.mark.parametrize("instr", ["div.approx.f32", "div.approx.ftz.f32", "div.full.f32", "div.full.ftz.f32"])
def test_divisions_are_div_rn(instr):
    rng = np.random.default_rng(5)
    a, b = ([int(v) for v in words(rng, 32)[:32]] for _ in range(2))
    got = check(instr, [a, b])
    spec = {"grid": 1, "block": 32, "args": [{"buffer": "uint32", "data": a}, {"buffer": "uint32", "data": b},
                                             {"buffer": "uint32", "size": 32}]}
    rn = run(kernel(instr.replace(".approx", ".rn").replace(".full", ".rn"), "f32", ["f32", "f32"]), spec)
    assert np.array_equal(got, rn.buffers[-1])


# ------------------------------------------------------------------------------------------------
# refusing them

PTX = """.version 9.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 p)
{
.reg .f32 %f<4>;
.reg .b64 %rd<2>;
ld.param.u64 %rd1, [p];
ld.global.f32 %f1, [%rd1];
ex2.approx.ftz.f32 %f2, %f1;
div.full.f32 %f3, %f2, %f1;
st.global.f32 [%rd1], %f3;
ret;
}
"""


def test_refuse_names_every_line():
    load_program(PTX)                                          # allowed by default
    with pytest.raises(PTXUnsupported) as e:
        load_program(PTX, approx="refuse")
    msg = str(e.value)
    assert "ex2.approx.ftz.f32" in msg and "div.full.f32" in msg and "line 10" in msg and "line 11" in msg
    assert "not bit-identical to NVIDIA hardware" in msg
    with pytest.raises(PTXUnsupported):
        run(PTX, {"grid": 1, "block": 1, "args": [{"buffer": "float32", "data": [1.0]}]}, approx="refuse")
    with pytest.raises(ValueError, match="approx must be one of"):
        load_program(PTX, approx="maybe")


def test_cli_refuse(tmp_path):
    import json
    import subprocess
    import sys
    (tmp_path / "k.ptx").write_text(PTX)
    (tmp_path / "s.json").write_text(json.dumps({"grid": 1, "block": 1, "args": [{"buffer": "float32", "data": [3.0]}]}))
    argv = [sys.executable, "-m", "qwengpu", "run", str(tmp_path / "k.ptx"), "--launch", str(tmp_path / "s.json")]
    ok = subprocess.run(argv + ["--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["buffers"][0][0] == pytest.approx(8.0 / 3.0)
    no = subprocess.run(argv + ["--approx", "refuse"], capture_output=True, text=True)
    assert no.returncode != 0 and "refused" in no.stderr and "ex2.approx.ftz.f32" in no.stderr


def test_suite_kernels_match_the_mathematical_functions():
    """The approx suite kernels' outputs (the interpreter; verify checks them against the oracles bit for
    bit) are close to the functions they compute, in float64."""
    from qwengpu import suite
    for name, fn, tol in (("sigmoid", lambda x: 1 / (1 + np.exp(-x)), 2e-7),
                          ("gelu_tanh", lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), 2e-6),
                          ("softmax_expf", lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum(), 1e-6),
                          ("fast_log_rsqrt", lambda x: np.log(x) * np.sqrt(x + 1), 1e-6),
                          ("fast_sin", np.sin, 1e-6)):
        k = suite.get(name)
        x = np.asarray(k.spec().args[0].data, dtype=np.float64)
        got = run(k.ptx(), k.spec()).buffers[1].astype(np.float64)
        # absolute tolerances: 1 + tanh cancels, log 1 = 0, sin's bound is absolute
        assert np.allclose(got, fn(x), rtol=tol, atol={"gelu_tanh": 1e-6, "fast_log_rsqrt": 1e-6, "fast_sin": 2.0 ** -22}.get(name, 1e-30)), name
