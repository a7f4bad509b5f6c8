"""The suite's `black_scholes` kernel (issue 22): its oracle is the interpreter's result bit for bit,
its prices are within an L1 bound of a double-precision Black-Scholes, it fits the 512-bundle ROM
of both machines, and the machine with the float unit runs it exactly (the soft-float machine's
engine check is the suite's)."""
from __future__ import annotations

import math

import numpy as np

from qwengpu import load_program, run, suite
from qwengpu.assembler import assemble
from qwengpu.machine.config import COMPACT, COMPACT_FPU
from qwengpu.suite.oracles.approx import logf

KERNEL = suite.get("black_scholes")


def _reference(spec):
    """Call and put prices in double precision (the exact normal distribution, erfc)."""
    s, x, t = (spec.args[k].data.astype(np.float64) for k in range(3))
    r, v = float(spec.args[5].value), float(spec.args[6].value)
    cdf = np.vectorize(lambda z: 0.5 * math.erfc(-z / math.sqrt(2)))
    d1 = (np.log(s / x) + (r + 0.5 * v * v) * t) / (v * np.sqrt(t))
    d2 = d1 - v * np.sqrt(t)
    call = s * cdf(d1) - x * np.exp(-r * t) * cdf(d2)
    return call, call - s + x * np.exp(-r * t)


def test_oracle_is_the_interpreter_and_near_the_double_precision_prices():
    spec = KERNEL.spec()
    want = KERNEL.expected()
    got = run(KERNEL.ptx(), spec).buffers
    for k in (3, 4):
        assert np.array_equal(want[k].view(np.uint32), got[k].view(np.uint32))
    call, put = _reference(spec)
    l1 = np.abs(got[3] - call).sum() + np.abs(got[4] - put).sum()
    assert l1 < 2e-4, l1                      # 32 prices summing to ~365: measured 7.0e-5
    assert np.all(got[3] > 0) and np.all(got[4] > 0)


def test_fits_both_machines_and_runs_exactly_with_the_float_unit():
    module = load_program(KERNEL.ptx())
    assert len(assemble(module, KERNEL.spec(), config=COMPACT_FPU).bundles) <= COMPACT_FPU.rom_bundles
    assert len(assemble(module, KERNEL.spec(), config=COMPACT).bundles) <= COMPACT.rom_bundles
    res = run(KERNEL.ptx(), KERNEL.spec(), engine="sim", config=COMPACT_FPU)
    want = KERNEL.expected()
    for k in (3, 4):
        assert np.array_equal(want[k].view(np.uint32), res.buffers[k].view(np.uint32))


def test_logf_oracle_is_the_interpreters_logf():
    """The oracle's libdevice logf against the interpreter running nvcc's logf, on every kind of
    operand the kernel's path handles (normal, subnormal, zero, infinity, NaN, negative)."""
    ptx = KERNEL.ptx()
    assert "lg2.approx" not in ptx                       # logf is libdevice's polynomial, not __logf
    xs = np.array([1.0, 0.5, 2.0, 0.6667, 1.3333, 3e-39, 1e-45, 0.0, -0.0, np.inf, -1.0, 7.5, 1e30, 1e-30,
                   np.nan], dtype=np.float32)
    # the kernel's logf: from its first `setp.lt.f32` (on the quotient) to the `selp` of the -inf case
    body = ptx[ptx.index("\tsetp.lt.f32"):ptx.index("\tsqrt.rn.f32")]
    operand = body.split(",")[1].strip()
    tail = ptx[ptx.index("\tsetp.eq.f32"):]
    tail = tail[:tail.index("\n", tail.index("selp.f32")) + 1]
    out = tail.split("selp.f32")[1].split(",")[0].strip()
    src = (".version 9.0\n.target sm_75\n.address_size 64\n.visible .entry k(.param .u64 a, .param .u64 b) {\n"
           ".reg .f32 %f<200>; .reg .b32 %r<20>; .reg .b64 %rd<8>; .reg .pred %p<8>;\n"
           "ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b]; mov.u32 %r19, %tid.x; mul.wide.u32 %rd3, %r19, 4;\n"
           f"add.u64 %rd1, %rd1, %rd3; add.u64 %rd2, %rd2, %rd3; ld.global.f32 {operand}, [%rd1];\n"
           + body + tail + f"st.global.f32 [%rd2], {out};\nret;\n}}\n")
    spec = {"grid": 1, "block": len(xs), "args": [{"buffer": "float32", "data": [float(v) for v in xs]},
                                                  {"buffer": "float32", "size": len(xs)}]}
    got = run(src, spec).buffers[1]
    want = np.array([logf(v) for v in xs], dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (got, want)


def test_the_suite_gives_the_soft_float_machine_the_tokens_it_needs(monkeypatch):
    """On COMPACT (soft-float) the kernel takes ~158,000 tokens, over the runtime's default limit
    for its 4 warps: the suite declares a budget, and verify runs the kernel with it (unless told
    otherwise); the interpreter, which counts steps, is not given it."""
    import qwengpu.api
    from qwengpu.runtime.run import default_max_tokens
    from qwengpu.verify import verify_kernel
    assert KERNEL.max_steps and KERNEL.max_steps > default_max_tokens(KERNEL.spec())
    seen = []

    def fake_run(ptx, spec, engine="interp", **options):
        seen.append((engine, options.get("max_steps")))
        raise RuntimeError("not run")
    monkeypatch.setattr(qwengpu.api, "run", fake_run)
    verify_kernel(KERNEL, "sim")
    verify_kernel(KERNEL, "compact", max_steps=500_000)
    verify_kernel(KERNEL, "interp")
    assert seen == [("sim", KERNEL.max_steps), ("compact", 500_000), ("interp", None)]
