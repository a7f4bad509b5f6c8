"""Shared soft-float routines (`qwengpu.assembler.lower.shared`): a program whose inlined float
routines exceed the ROM calls one copy of each instead; simulator against interpreter, bit for bit.
On COMPACT, whose f32 arithmetic is routines (the built-in machine's float unit runs it in one pass)."""
import numpy as np
import sizes
from hypothesis import given, settings
from hypothesis import strategies as st
from ptxkit import HEADER

from qwengpu import run, suite
from qwengpu.api import load_program
from qwengpu.assembler import assemble
from qwengpu.launch import LaunchSpec
from qwengpu.machine.config import COMPACT

OPS = ["fma.rn.f32 {d}, {a}, {b}, {c};", "fma.rz.ftz.f32 {d}, {a}, {b}, {c};", "add.rz.f32 {d}, {a}, {b};",
       "sub.rp.f32 {d}, {a}, {b};", "mul.rm.f32 {d}, {a}, {b};", "div.rn.f32 {d}, {a}, {b};",
       "sqrt.rn.f32 {d}, {a};", "rcp.rn.f32 {d}, {a};"]
reg = st.integers(1, 4).map(lambda i: f"%f{i}")
op = st.tuples(st.sampled_from(OPS), reg, reg, reg, reg).map(lambda t: t[0].format(d=t[1], a=t[2], b=t[3], c=t[4]))


def kernel(then: list[str], other: list[str], tail: list[str]) -> str:
    """Four floats per lane; lanes 0-1 run `then`, lanes 2-3 `other` (calls from different sites
    at once), then every lane `tail`; one f64 addition keeps a pair-valued routine in use."""
    lines = [".reg .pred %p<2>;", ".reg .f32 %f<8>;", ".reg .f64 %fd<4>;", ".reg .b64 %rd<8>;", ".reg .b32 %r<4>;",
             "mov.u32 %r1, %tid.x;", "mul.wide.u32 %rd1, %r1, 16;", "ld.param.u64 %rd2, [in];",
             "add.u64 %rd3, %rd2, %rd1;"]
    lines += [f"ld.global.f32 %f{i + 1}, [%rd3+{4 * i}];" for i in range(4)]
    lines += ["setp.lt.u32 %p1, %r1, 2;", "@%p1 bra THEN;"] + other + ["bra.uni END;", "THEN:"] + then + ["END:"]
    lines += tail
    lines += ["cvt.f64.f32 %fd1, %f1;", "cvt.f64.f32 %fd2, %f2;", "add.rn.f64 %fd3, %fd1, %fd2;",
              "add.rn.f64 %fd3, %fd3, %fd1;", "cvt.rn.f32.f64 %f1, %fd3;"]
    lines += ["ld.param.u64 %rd4, [out];", "add.u64 %rd5, %rd4, %rd1;"]
    lines += [f"st.global.f32 [%rd5+{4 * i}], %f{i + 1};" for i in range(4)] + ["ret;"]
    return f"{HEADER}.visible .entry k(.param .u64 in, .param .u64 out)\n{{\n" + "\n".join(lines) + "\n}\n"


def routine_entries(ptx: str, spec: dict) -> int:
    img = assemble(load_program(ptx), LaunchSpec.from_json(spec), config=COMPACT)
    return len({b.label for b in img.bundles if b.label.startswith("routine_") and b.label.endswith("/entry")})


floats = st.lists(st.one_of(st.floats(0.25, 4, width=32), st.floats(-1e6, 1e6, width=32),
                            st.sampled_from([0.0, -0.0, 1.0, float("inf"), float("nan"), 1e-40])),
                  min_size=16, max_size=16)


@settings(max_examples=sizes.scaled(3), deadline=None)
@given(then=st.lists(op, min_size=10, max_size=12), other=st.lists(op, min_size=10, max_size=12),
       tail=st.lists(op, min_size=6, max_size=8), data=floats)
def test_programs_beyond_the_rom_call_shared_routines(then, other, tail, data):
    ptx = kernel(then, other, tail)
    spec = {"grid": 1, "block": 4, "args": [{"buffer": "float32", "data": ["nan" if x != x else x for x in data]},
                                            {"buffer": "float32", "size": 16}]}
    want = run(ptx, spec).buffers[1].view(np.uint32)
    got = run(ptx, spec, engine="sim", config=COMPACT).buffers[1].view(np.uint32)
    assert np.array_equal(want, got), "\n".join(then + ["--"] + other + ["--"] + tail)
    assert routine_entries(ptx, spec) >= 2          # an f32 routine and the f64 addition


def test_programs_that_fit_keep_their_routines_inlined():
    ptx = kernel(["add.rn.f32 %f1, %f2, %f3;"], ["mul.rn.f32 %f1, %f2, %f3;"], [])
    spec = {"grid": 1, "block": 4, "args": [{"buffer": "float32", "data": [1.5] * 16},
                                            {"buffer": "float32", "size": 16}]}
    assert routine_entries(ptx, spec) == 0


def test_the_suite_matrix_multiply_fits_with_one_shared_fma():
    k = suite.get("matmul_tile4")
    img = assemble(load_program(k.ptx_path.read_text()), k.spec(), config=COMPACT)
    entries = [b.label for b in img.bundles if b.label.startswith("routine_") and b.label.endswith("/entry")]
    assert len(entries) == 1 and "fma" in entries[0]
    assert len(img.bundles) <= img.config.rom_bundles // 2
