"""Register spilling (`qwengpu.assembler.spill`): programs with more live values than the machine
has registers run on the simulator exactly as on the reference interpreter."""
import numpy as np
import pytest
import sizes
from hypothesis import HealthCheck, given, settings
from ptxkit import HEADER
from randprog import inputs_for, launch, programs

from qwengpu import run
from qwengpu.api import load_program
from qwengpu.assembler import AssemblerError, assemble
from qwengpu.assembler.spill import spill_slots
from qwengpu.launch import LaunchSpec
from qwengpu.machine.config import COMPACT

LIVE = 40            # data registers of the random programs: more than the machine's 32


def slots(ptx: str, spec: dict) -> int:
    return spill_slots(assemble(load_program(ptx), LaunchSpec.from_json(spec)))


@settings(max_examples=sizes.scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(prog=programs(size=5, data=LIVE), data=inputs_for(LIVE))
def test_random_programs_with_many_live_values(prog, data):
    ptx, body = prog
    spec = launch(data, data=LIVE)
    want = run(ptx, spec).buffers[-1]
    got = run(ptx, spec, engine="sim").buffers[-1]
    assert np.array_equal(want, got), "\n".join(body)
    assert slots(ptx, spec) > 0


def reversed_copy(n: int) -> str:
    """A kernel loading n words per thread, then storing them in reverse order: n values live
    at once. Threads are numbered x + ntid.x * y (2-D blocks)."""
    lines = [f".reg .b32 %r<{n + 8}>;", ".reg .b64 %rd<8>;",
             "mov.u32 %r0, %tid.x;", "mov.u32 %r1, %tid.y;", "mov.u32 %r2, %ntid.x;",
             "mad.lo.u32 %r0, %r1, %r2, %r0;", "cvt.u64.u32 %rd0, %r0;",
             "ld.param.u64 %rd1, [in];", f"mad.lo.u64 %rd1, %rd0, {4 * n}, %rd1;",
             "ld.param.u64 %rd2, [out];", f"mad.lo.u64 %rd2, %rd0, {4 * n}, %rd2;"]
    lines += [f"ld.global.u32 %r{i + 8}, [%rd1+{4 * i}];" for i in range(n)]
    lines += [f"st.global.u32 [%rd2+{4 * i}], %r{n + 7 - i};" for i in range(n)] + ["ret;"]
    return (f"{HEADER}.visible .entry k(.param .u64 in, .param .u64 out, .param .u64 pad)\n{{\n"
            + "\n".join(lines) + "\n}\n")


def reversed_launch(n: int, block: tuple, pad: int = 4) -> dict:
    threads = block[0] * block[1]
    data = [(7919 * i + 13) % 2**32 for i in range(n * threads)]
    return {"grid": 1, "block": list(block), "args": [{"buffer": "uint32", "data": data},
                                                       {"buffer": "uint32", "size": n * threads},
                                                       {"buffer": "uint8", "size": pad}]}


@pytest.mark.parametrize("block,n", [((4, 1), 44), ((2, 2), 44), ((2, 3), 36)])
def test_spills_in_one_and_two_dimensional_blocks(block, n):
    ptx, spec = reversed_copy(n), reversed_launch(n, block)
    got = run(ptx, spec, engine="sim").buffers[1]
    want = np.array(spec["args"][0]["data"], dtype=np.uint32).reshape(-1, n)[:, ::-1].reshape(-1)
    assert np.array_equal(got, want)
    assert run(ptx, spec).buffers[1].tolist() == want.tolist()
    assert slots(ptx, spec) >= n - COMPACT.registers


def test_a_program_within_the_registers_spills_nothing():
    ptx, spec = reversed_copy(20), reversed_launch(20, (4, 1))
    assert slots(ptx, spec) == 0


def test_a_spill_area_that_does_not_fit_is_refused_naming_the_limit():
    n = 44
    spec = reversed_launch(n, (4, 1), pad=2048 - 2 * 4 * 4 * n - 32)    # the window's last bytes taken
    with pytest.raises(AssemblerError, match=r"spilling \d+ registers needs \d+ bytes of global memory "
                                             r"\(4 threads x \d+ bytes\); the machine's global window has"):
        assemble(load_program(reversed_copy(n)), LaunchSpec.from_json(spec))


def test_the_suite_kernel_live48_spills():
    from qwengpu import suite
    k = suite.get("live48")
    assert spill_slots(assemble(load_program(k.ptx_path.read_text()), k.spec())) >= 48 - COMPACT.registers
