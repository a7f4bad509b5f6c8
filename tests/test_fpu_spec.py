"""The float unit's specification (docs/float_units.md): its micro-ops, how the assembler packs them
(no forwarding in or out: the unit runs beside the others), their encoding, and what they cost on
the simulator of the machine that has one (`COMPACT_FPU`)."""
from __future__ import annotations

import pytest

from qwengpu import load_program, suite
from qwengpu.assembler import assemble
from qwengpu.cli import main
from qwengpu.machine.config import COMPACT, COMPACT_FPU, FPU
from qwengpu.machine.format import encode_image
from qwengpu.machine.uops import FPU_OPS, fpu, fpu_eval
from qwengpu.opbench import OPS, measure

HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"


def f32(x: float) -> int:
    import struct
    return struct.unpack("<I", struct.pack("<f", x))[0]


def test_micro_ops_check_their_modifiers():
    with pytest.raises(ValueError, match="rounding"):
        fpu("FADD", None, 1, 2)                         # arithmetic names its rounding
    with pytest.raises(ValueError, match="rounding"):
        fpu("F2I", None, 1, rnd="rn")                   # float -> int rounds to an integer
    with pytest.raises(ValueError, match="compare"):
        fpu("FSETP", None, 1, 2, compare="less")
    with pytest.raises(ValueError, match="takes 3 sources"):
        fpu("FFMA", None, 1, 2, rnd="rn")
    with pytest.raises(ValueError, match="unknown"):
        fpu("FDIV", None, 1, 2, rnd="rn")


def test_semantics_are_the_interpreters():
    assert fpu_eval("FADD", {"rnd": "rn"}, f32(1.5), f32(2.25)) == f32(3.75)
    assert fpu_eval("FSUB", {"rnd": "rn"}, f32(1.0), f32(1.0)) == 0
    assert fpu_eval("FSUB", {"rnd": "rm"}, f32(1.0), f32(1.0)) == 0x80000000     # -0 rounding down
    assert fpu_eval("FMUL", {"rnd": "rz", "sat": True}, f32(3.0), f32(0.5)) == f32(1.0)
    assert fpu_eval("FFMA", {"rnd": "rn"}, f32(2.0), f32(3.0), f32(-6.0)) == 0
    assert fpu_eval("FADD", {"rnd": "rn"}, 0x7F800000, 0xFF800000) == 0x7FFFFFFF   # the canonical NaN
    assert fpu_eval("FSETP", {"compare": "ltu"}, 0x7FC00000, f32(1.0)) == 1
    assert fpu_eval("FMIN", {"nan": True}, 0x7FC00001, f32(1.0)) == 0x7FFFFFFF
    assert fpu_eval("I2F", {"rnd": "rn", "signed": True}, 0xFFFFFFFF) == f32(-1.0)
    assert fpu_eval("F2I", {"rnd": "rzi", "signed": True}, f32(-2.75)) == 0xFFFFFFFE
    assert fpu_eval("F2I", {"rnd": "rni"}, f32(1e20)) == 0xFFFFFFFF                 # u32 clamps
    assert fpu_eval("FRND", {"rnd": "rmi"}, f32(-0.5)) == f32(-1.0)


CHAIN = HEADER + """
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
    .reg .f32 %f<8>; .reg .pred %p<2>; .reg .b64 %rd<4>; .reg .b32 %r<4>;
    ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd1, %rd1, %rd3; add.s64 %rd2, %rd2, %rd3;
    ld.global.f32 %f1, [%rd1];
    add.rn.f32 %f2, %f1, %f1;
    mul.rn.f32 %f3, %f2, %f1;
    setp.lt.f32 %p1, %f3, %f1;
    @%p1 bra DONE;
    fma.rn.f32 %f3, %f3, %f3, %f1;
DONE:
    st.global.f32 [%rd2], %f3;
    ret;
}
"""


def test_the_float_unit_neither_forwards_nor_takes_forwarded_values():
    """A float op reads the register file (its result is carried before anything uses it), so a
    dependent op is in a later bundle; a float compare's predicate is carried, then branched on."""
    module = load_program(CHAIN)
    spec = {"grid": 1, "block": 4, "args": [{"buffer": "float32", "data": [1, -2, 0.5, 3]},
                                            {"buffer": "float32", "size": 4}]}
    from qwengpu.launch import LaunchSpec
    img = assemble(module, LaunchSpec.from_json(spec), config=COMPACT_FPU)
    k = COMPACT_FPU.slots.index(FPU)
    fpu_bundles = [b for b in img.bundles if b.slots[k] is not None]
    assert [b.slots[k].op.op for b in fpu_bundles] == ["FADD", "FMUL", "FSETP", "FFMA"]
    for b in img.bundles:
        so = b.slots[k]
        if so is not None:                 # read ports of the first two ALU slots, never a result
            assert all(s.kind in ("sport", "zero") for s in so.srcs.values()), so.srcs
            assert all(s.index[0] in (0, 1) for s in so.srcs.values() if s.kind == "sport")
        for other in b.ops():
            assert all(s.kind != "slot" or s.index != k for s in other.srcs.values())
        assert b.term_src is None or b.term_src.kind != "slot" or b.term_src.index != k
    from qwengpu import run
    want = run(CHAIN, spec).buffers[1]
    got = run(CHAIN, spec, engine="sim", config=COMPACT_FPU).buffers[1]
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["f32_arith", "f32_round_modes", "matmul_tile4", "softmax_expf", "f32_minmax_nan"])
def test_suite_kernels_encode_for_the_machine_with_a_float_unit(name):
    """The bundle words hold every float-unit op and modifier the suite uses."""
    k = suite.get(name)
    img = assemble(load_program(k.ptx()), k.spec(), config=COMPACT_FPU)
    assert any(so is not None and so.op.kind == "fpu" for b in img.bundles for so in b.slots)
    words = encode_image(img)
    assert len(words) == len(img.bundles)


def test_every_float_unit_op_is_used_by_the_suite():
    """Each micro-op of the machine's float unit appears in some suite kernel's image (so the
    suite exercises it on every engine)."""
    seen = set()
    for name in ["f32_arith", "f32_round_modes", "f32_minmax_nan", "f2i_convert", "i2f_convert", "f32_rounding",
                 "f32_sqrt_fma", "saxpy"]:
        k = suite.get(name)
        img = assemble(load_program(k.ptx()), k.spec(), config=COMPACT_FPU)
        seen |= {so.op.op for b in img.bundles for so in b.slots if so is not None and so.op.kind == "fpu"}
    assert seen == set(COMPACT_FPU.fpu_ops) and seen <= set(FPU_OPS)


@pytest.mark.parametrize("slug", ["f32_add", "f32_sub", "f32_mul", "f32_fma", "f32_compare"])
def test_a_float_op_costs_what_its_result_costs(slug):
    """Issue 22's bounds on the machine with a float unit: one bundle plus the result's carries."""
    op = next(o for o in OPS if o.slug == slug)
    row = measure(op, "sim", config=COMPACT_FPU)
    assert row["exact"]
    assert row["tokens_per_op"] <= op.target
    soft = measure(op, "sim", config=COMPACT)
    assert soft["exact"] and soft["tokens_per_op"] > 10 * row["tokens_per_op"] or slug == "f32_compare"


def test_bench_ops_takes_a_machine(capsys):
    assert main(["bench-ops", "f32_add", "--machine", "compact-fpu"]) == 0
    out = capsys.readouterr().out
    assert "meets target" in out and "machine compact-fpu" in out
    assert main(["verify", "dot", "--engine", "interp", "--machine", "compact-fpu"]) != 0
    assert "--machine applies to the machine engines" in capsys.readouterr().err
    assert main(["bench-ops", "f32_add", "--machine", "nope"]) != 0
    assert "unknown machine 'nope'" in capsys.readouterr().err
