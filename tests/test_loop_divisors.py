"""A loop's division by a divisor the loop does not write (`qwengpu.assembler.lower.loopdiv`): the
divisor's part of the short division computed once in the loop's preheader, each iteration's
division then the short path (or the shared full division for lanes out of its window), against
the interpreter on `compact-fpu`'s simulator; the loops that must not hoist (the divisor written
in the loop, guarded or not, a side entry, a call), nested loops, divergent loops."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwengpu import load_program, run
from qwengpu.assembler import assemble
from qwengpu.assembler.lower.loopdiv import loop_divisors, loops, written
from qwengpu.assembler.softfloat import unitcheck
from qwengpu.launch import LaunchSpec
from qwengpu.machine.config import COMPACT_FPU
from qwengpu.ptx.cfg import operand_registers

HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"
LANES = 8                     # two warps
MOST = 4                      # iterations of the longest lane
SETTINGS = settings(max_examples=2, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FORMS = [f"div.{r}{f}.f32" for r in ("rn", "rz", "rm", "rp") for f in ("", ".ftz")] + ["div.full.f32",
                                                                                      "div.approx.ftz.f32"]


def loop_kernel(body: str, before: str = "") -> str:
    """`for (j = 0; j < cnt[i]; j++) { q = x[j * ntid + i] / d; y[...] = q; s += q; }` with the
    division (and whatever else) in `body` (q is %f4, the element %f1, s %f3); the divisor is %f2
    (the lane's own, loaded before the loop) or %f8 (the kernel parameter d); `before` runs
    before the loop. s is stored to sum[i]."""
    return (f"{HEADER}.visible .entry k(.param .u64 x, .param .u64 dd, .param .u64 cnt, .param .u64 y, "
            ".param .u64 sum, .param .f32 d)\n{\n"
            ".reg .f32 %f<48>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<16>;\n.reg .pred %p<8>;\n"
            "mov.u32 %r1, %tid.x;\nmov.u32 %r9, %ntid.x;\nmul.wide.u32 %rd9, %r1, 4;\n"
            "ld.param.u64 %rd2, [dd]; add.u64 %rd2, %rd2, %rd9; ld.global.f32 %f2, [%rd2];\n"
            "ld.param.f32 %f8, [d];\n"
            "ld.param.u64 %rd3, [cnt]; add.u64 %rd3, %rd3, %rd9; ld.global.u32 %r3, [%rd3];\n"
            "ld.param.u64 %rd1, [x];\nld.param.u64 %rd4, [y];\nmov.f32 %f3, 0f00000000;\n"
            f"mov.u32 %r2, 0;\n{before}\nsetp.eq.u32 %p1, %r3, 0;\n@%p1 bra DONE;\n"
            "LOOP:\nmad.lo.u32 %r4, %r2, %r9, %r1;\nmul.wide.u32 %rd5, %r4, 4;\n"
            "add.u64 %rd6, %rd1, %rd5;\nld.global.f32 %f1, [%rd6];\n"
            f"{body}\n"
            "add.f32 %f3, %f3, %f4;\nadd.u64 %rd7, %rd4, %rd5;\nst.global.f32 [%rd7], %f4;\n"
            "add.u32 %r2, %r2, 1;\nsetp.lt.u32 %p2, %r2, %r3;\n@%p2 bra LOOP;\n"
            "DONE:\nld.param.u64 %rd8, [sum]; add.u64 %rd8, %rd8, %rd9; st.global.f32 [%rd8], %f3;\nret;\n}\n")


def launch(x, dd, counts, d: int) -> dict:
    words = lambda v: {"buffer": "uint32", "data": [int(w) for w in v]}
    return {"grid": 1, "block": LANES, "args": [words(x), words(dd), words(counts),
                                                 {"buffer": "uint32", "size": LANES * MOST},
                                                 {"buffer": "uint32", "size": LANES},
                                                 {"scalar": "float32", "value": f"0x{int(d):08x}"}]}


def operands(seed: int):
    """Dividends and divisors from `unitcheck.hard_operands` (in the short path's window and out
    of it: zeros, subnormals, infinities, NaNs, huge and tiny quotients), mixed within each
    warp; a parameter divisor from the same; trip counts 0..MOST per lane (the loop diverges)."""
    rng = np.random.default_rng(seed)
    a, b = unitcheck.hard_operands("fastdiv", 4000, rng)
    inside, outside = rng.choice(2000, LANES * MOST), 2000 + rng.choice(2000, LANES * MOST)
    pick = np.where(rng.random(LANES * MOST) < 0.6, inside, outside)
    specials = np.array([0, 0x80000000, 0x7F800000, 0x7FC00000, 1, 0x00800000, 0x7F7FFFFF], dtype=np.uint64)
    dd = b[pick[:LANES]]
    dd[rng.choice(LANES, 2, replace=False)] = rng.choice(specials, 2)
    d = b[pick[0]] if seed % 3 else rng.choice(specials)
    counts = rng.integers(0, MOST + 1, LANES)
    counts[0] = MOST
    return a[pick], dd, counts, d


def check(ptx: str, spec: dict):
    want, got = run(ptx, spec), run(ptx, spec, engine="sim", config=COMPACT_FPU)
    for k in (3, 4):
        assert np.array_equal(want.buffers[k], got.buffers[k]), (k, [hex(int(v)) for v in want.buffers[k]],
                                                                 [hex(int(v)) for v in got.buffers[k]])


def unit_ops(ptx: str, spec: dict) -> int:
    img = assemble(load_program(ptx), LaunchSpec.from_json(spec), config=COMPACT_FPU)
    return sum(1 for bl in img.bundles for s in bl.slots if s is not None and s.op.kind == "fpu")


# unit ops of one division: the sequence; hoisted, the divisor's part (6, yl 2 more), the short
# quotient (3, 4 in rz, rm, rp) and the shared full division (9); the loop's `s += q` is one more
SEQUENCE, FAST_PART, LOW_PART, FULL = 9, 6, 2, 9


@pytest.mark.parametrize("divisor", ["%f2", "%f8"], ids=["loaded before the loop", "kernel parameter"])
@pytest.mark.parametrize("form", FORMS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_a_loops_division_by_an_invariant_divisor_is_short_and_exact(form, divisor, seed):
    ptx = loop_kernel(f"{form} %f4, %f1, {divisor};")
    spec = launch(*operands(seed))
    check(ptx, spec)
    directed = form.split(".")[1] in ("rz", "rm", "rp")
    assert unit_ops(ptx, spec) == FAST_PART + (LOW_PART if directed else 0) + (4 if directed else 3) + FULL + 1


@pytest.mark.parametrize("write", [
    "add.f32 %f2, %f2, 0f3F800000;",                                     # after the division
    "setp.gt.f32 %p3, %f1, 0f00000000;\n@%p3 mov.f32 %f2, %f1;",         # guarded
    "mov.b64 %rd10, {%f5, %f2};\nmov.b64 {%f5, %f2}, %rd10;",            # one half of a pair
], ids=["written", "guarded write", "pair"])
def test_a_divisor_written_in_the_loop_keeps_the_sequence(write):
    ptx = loop_kernel(f"div.rn.f32 %f4, %f1, %f2;\n{write}")
    spec = launch(*operands(7))
    check(ptx, spec)
    assert unit_ops(ptx, spec) == SEQUENCE + 1 + ("add.f32" in write) + ("setp" in write)
    assert not loop_divisors(load_program(ptx).kernel("k")).divisions


NESTED = """mov.u32 %r6, 0;
INNER:
div.rm.f32 %f5, %f1, {d};
add.f32 %f1, %f5, 0f3F800000;
add.u32 %r6, %r6, 1;
setp.lt.u32 %p4, %r6, 3;
@%p4 bra INNER;
mov.f32 %f4, %f1;
{write}"""


@pytest.mark.parametrize("write", ["", "mul.f32 %f2, %f2, 0f3FC00000;"], ids=["invariant", "written outside"])
def test_nested_loops_hoist_to_the_outermost_loop_that_does_not_write_the_divisor(write):
    """An inner loop of three divisions inside the loop over the elements: a divisor neither
    writes is hoisted to the outer loop's preheader (once per launch); one the outer loop writes,
    to the inner loop's (once per element)."""
    ptx = loop_kernel(NESTED.format(d="%f2", write=write))
    fn = load_program(ptx).kernel("k")
    found = loops(fn)
    outer, inner = sorted(found)
    assert found[outer] > found[inner] and outer < inner
    plan = loop_divisors(fn)
    (pc, (head, reg)), = plan.divisions.items()
    assert reg == "%f2" and head == (inner if write else outer)
    assert plan.loops[head].divisors == (("%f2", True),)
    assert ("%f2" in written(fn, outer, found[outer])) == bool(write)
    for seed in (1, 2):
        check(ptx, launch(*operands(seed)))


def test_loops_that_do_not_hoist():
    """A loop entered past its header (a side entry) or holding a call keeps the sequence."""
    side = loop_kernel("div.rn.f32 %f4, %f1, %f2;\nMID:", before="@%p1 bra MID;")
    assert not loop_divisors(load_program(side).kernel("k")).divisions
    check(side, launch(*operands(3)))
    call = loop_kernel("div.rn.f32 %f4, %f1, %f2;\ncall.uni twice, (%f4);")
    call = call.replace(".visible .entry", ".func twice(.param .f32 v)\n{\nret;\n}\n.visible .entry")
    assert not loops(load_program(call).kernel("k"))
    assert loop_divisors(load_program(loop_kernel("div.rn.f32 %f4, %f1, %f2;")).kernel("k")).divisions


def test_the_registers_an_instruction_may_write():
    """`operand_registers` of a first operand: a register, a vector's items, a pair, an address's base."""
    body = load_program(loop_kernel("div.rn.f32 %f4, %f1, %f2;\nsetp.gt.f32 %p5|%p6, %f4, %f1;\n"
                                    "mov.b64 {%f5, %f2}, %rd10;")).kernel("k").body
    first = {str(ins): operand_registers(ins.operands[0]) for ins in body if ins.operands}
    assert first["div.rn.f32 %f4, %f1, %f2"] == ["%f4"]
    assert first["setp.gt.f32 %p5|%p6, %f4, %f1"] == ["%p5", "%p6"]
    assert first["mov.b64 {%f5, %f2}, %rd10"] == ["%f5", "%f2"]
    assert [operand_registers(ins.operands[0]) for ins in body if ins.op == "st"][0] == ["%rd7"]


def test_divisions_outside_loops_stay_as_they_are():
    ptx = loop_kernel("mov.f32 %f4, %f1;", before="div.rn.f32 %f3, %f2, %f8;")
    assert not loop_divisors(load_program(ptx).kernel("k")).divisions
    assert unit_ops(ptx, launch(*operands(5))) == SEQUENCE + 1


def test_two_divisors_and_two_divisions_by_one_register():
    """Each divisor of a loop gets its part once; two divisions by one register share it (and one
    shared full division per mode serves the lanes out of the window)."""
    body = "div.rp.f32 %f4, %f1, %f2;\ndiv.rn.f32 %f6, %f1, %f8;\ndiv.rn.f32 %f7, %f6, %f2;\nadd.f32 %f4, %f4, %f7;"
    ptx = loop_kernel(body)
    spec = launch(*operands(11))
    check(ptx, spec)
    plan = loop_divisors(load_program(ptx).kernel("k"))
    (loop,) = plan.loops.values()
    assert loop.divisors == (("%f2", True), ("%f8", False))
    assert unit_ops(ptx, spec) == 2 * FAST_PART + LOW_PART + 4 + 3 + 3 + FULL * 2 + 2


def chain_kernel(body: str) -> str:
    """`a = x[i]; for (k = 0; k < 16; k++) body; x[i] = a` (a is %f1, the divisor %f2 = d[i])."""
    return (f"{HEADER}.visible .entry k(.param .u64 x, .param .u64 dd)\n{{\n"
            ".reg .f32 %f<8>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<8>;\n.reg .pred %p<4>;\n"
            "mov.u32 %r1, %tid.x;\nmul.wide.u32 %rd3, %r1, 4;\n"
            "ld.param.u64 %rd1, [x]; add.u64 %rd1, %rd1, %rd3; ld.global.f32 %f1, [%rd1];\n"
            "ld.param.u64 %rd2, [dd]; add.u64 %rd2, %rd2, %rd3; ld.global.f32 %f2, [%rd2];\n"
            f"mov.u32 %r2, 0;\nLOOP:\n{body}\nadd.u32 %r2, %r2, 1;\nsetp.lt.u32 %p1, %r2, 16;\n@%p1 bra LOOP;\n"
            "st.global.f32 [%rd1], %f1;\nret;\n}\n")


def test_the_short_path_runs_in_every_iteration():
    """16 iterations of `a = a / d` on one warp whose operands stay in the window: each division
    costs what the short path costs (~52 tokens in the benchmark's chain, the full sequence
    ~340), and the divisor's part is paid once."""
    x = np.array([1.2345678, 1.5, -1.75, 1.0], dtype=np.float32).view(np.uint32)
    d = np.array([0.9071068, 1.1, 0.97, -1.03], dtype=np.float32).view(np.uint32)
    spec = {"grid": 1, "block": 4, "args": [{"buffer": "uint32", "data": [int(v) for v in z]} for z in (x, d)]}

    def tokens(body):
        ptx = chain_kernel(body)
        want, got = run(ptx, spec), run(ptx, spec, engine="sim", config=COMPACT_FPU)
        assert np.array_equal(want.buffers[0], got.buffers[0])
        return len(got.extra["generated"])
    per_division = (tokens("div.rn.f32 %f1, %f1, %f2;") - tokens("mov.f32 %f1, %f1;")) / 16
    assert per_division < 100, per_division


def test_a_program_the_hoisting_pushes_past_the_rom_keeps_the_sequence():
    """470 bundles of fma before the loop: the program fits the 512-bundle ROM with the loop's
    division as the sequence (507 bundles) but not hoisted (the preheader, the check and the shared
    full division: 527), so `assemble` lowers it again without hoisting (not with shared
    routines, which would make every division a call); still exact."""
    from qwengpu.assembler.pipeline import machine_layout, optimize, lower
    from qwengpu.assembler.schedule import RomOverflow
    from qwengpu.assembler.spill import schedule_with_spills
    ptx = loop_kernel("div.rn.f32 %f4, %f1, %f2;", before="fma.rn.f32 %f3, %f3, %f1, %f2;\n" * 470)
    spec = launch(*operands(7))
    module, launch_spec = load_program(ptx), LaunchSpec.from_json(spec)
    prog = lower(module, launch_spec, module.kernel("k"), machine_layout(module, launch_spec, "k", COMPACT_FPU),
                 fpu_ops=COMPACT_FPU.fpu_ops)
    assert prog.loops_hoisted == 1
    with pytest.raises(RomOverflow):
        schedule_with_spills(optimize(prog, {"tid.x": (0, LANES - 1)}), COMPACT_FPU, LANES, (LANES, 1, 1))
    assert unit_ops(ptx, spec) == 470 + SEQUENCE + 1
    check(ptx, spec)


@pytest.mark.parametrize("form", ["div.rn.f32", "div.rp.ftz.f32"])
def test_a_hoisted_program_that_spills_is_exact(form):
    """14 products live across the loop with the hoisted parts: more than the 32 registers
    (`spill`), and kept so (the short path saves more than the reloads cost)."""
    from qwengpu.assembler.spill import spill_slots
    live = [f"%f{20 + k}" for k in range(14)]
    before = "\n".join(f"add.f32 {r}, %f2, 0f{0x3F800000 + k * 0x10000:08X};" for k, r in enumerate(live))
    body = f"{form} %f4, %f1, %f2;\n" + "\n".join(f"mul.f32 {r}, {r}, %f4;" for r in live)
    ptx = loop_kernel(body + "\n" + "\n".join(f"add.f32 %f4, %f4, {r};" for r in live), before=before)
    spec = launch(*operands(13))
    check(ptx, spec)
    img = assemble(load_program(ptx), LaunchSpec.from_json(spec), config=COMPACT_FPU)
    assert spill_slots(img) > 0
    directed = ".rp" in form
    assert unit_ops(ptx, spec) == FAST_PART + LOW_PART * directed + 3 + directed + FULL + 3 * len(live) + 1
