"""Recursive device functions on the machine (`qwengpu.assembler.lower.calls`): out of line, on a
call stack in memory; the simulator against the reference interpreter."""
import numpy as np
import pytest
import sizes
from hypothesis import given, settings
from hypothesis import strategies as st
from ptxkit import HEADER

from qwengpu import run, suite
from qwengpu.api import load_program
from qwengpu.assembler import AssemblerError, assemble
from qwengpu.semantics.faults import MemoryFault
from qwengpu.launch import LaunchSpec

# is_even / is_odd call each other: mutual recursion, one call site each plus the kernel's two
# (the first call's result must survive the second)
PARITY = HEADER + """
.func (.param .b32 r) is_odd(.param .b32 n);
.func (.param .b32 r) is_even(.param .b32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [n];
    setp.eq.u32 %p1, %r1, 0;
    mov.u32 %r3, 1;
    @%p1 bra DONE;
    add.u32 %r2, %r1, -1;
    {
    .param .b32 a;
    st.param.b32 [a], %r2;
    .param .b32 b;
    call.uni (b), is_odd, (a);
    ld.param.b32 %r3, [b];
    }
DONE:
    st.param.b32 [r], %r3;
    ret;
}
.func (.param .b32 r) is_odd(.param .b32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [n];
    setp.eq.u32 %p1, %r1, 0;
    mov.u32 %r3, 0;
    @%p1 bra DONE;
    add.u32 %r2, %r1, -1;
    {
    .param .b32 a;
    st.param.b32 [a], %r2;
    .param .b32 b;
    call.uni (b), is_even, (a);
    ld.param.b32 %r3, [b];
    }
DONE:
    st.param.b32 [r], %r3;
    ret;
}
.visible .entry parity(.param .u64 in, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r1, %r2, %r3, %r1;
    mul.wide.u32 %rd1, %r1, 4;
    ld.param.u64 %rd2, [in];
    add.u64 %rd3, %rd2, %rd1;
    ld.global.u32 %r4, [%rd3];
    {
    .param .b32 a;
    st.param.b32 [a], %r4;
    .param .b32 b;
    call.uni (b), is_even, (a);
    ld.param.b32 %r5, [b];
    }
    add.u32 %r7, %r4, 1;
    {
    .param .b32 a;
    st.param.b32 [a], %r7;
    .param .b32 b;
    call.uni (b), is_even, (a);
    ld.param.b32 %r6, [b];
    }
    mad.lo.u32 %r6, %r5, 1000, %r6;
    add.u32 %r6, %r6, %r4;
    ld.param.u64 %rd4, [out];
    add.u64 %rd5, %rd4, %rd1;
    st.global.u32 [%rd5], %r6;
    ret;
}
.visible .entry plain(.param .u64 in, .param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [in];
    ld.global.u32 %r1, [%rd1];
    ld.param.u64 %rd2, [out];
    st.global.u32 [%rd2], %r1;
    ret;
}
"""


def parity_launch(ns: list[int], block) -> dict:
    return {"kernel": "parity", "grid": 1, "block": list(block), "args": [{"buffer": "uint32", "data": ns},
                                                                           {"buffer": "uint32", "size": len(ns)}]}


@pytest.mark.parametrize("block", [(4, 1), (2, 2)])
def test_mutual_recursion(block):
    ns = [0, 7, 12, 3]
    spec = parity_launch(ns, block)
    want = [1000 * (n % 2 == 0) + (n % 2 == 1) + n for n in ns]
    assert run(PARITY, spec).buffers[1].tolist() == want
    assert run(PARITY, spec, engine="sim").buffers[1].tolist() == want


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@settings(max_examples=sizes.scaled(6), deadline=None)
@given(st.lists(st.integers(0, 9), min_size=4, max_size=4))
def test_fibonacci_with_any_depths_per_lane(ns):
    k = suite.get("fib_recursive")
    spec = {"grid": 1, "block": 4, "args": [{"buffer": "int32", "data": ns}, {"buffer": "int32", "size": 4}]}
    got = run(k.ptx_path.read_text(), spec, engine="sim").buffers[1]
    assert got.tolist() == [fib(n) for n in ns]
    assert np.array_equal(got, run(k.ptx_path.read_text(), spec).buffers[1])


def test_stack_overflow_faults_naming_the_lane_and_depth():
    k = suite.get("factorial_recursive")
    spec = {"grid": 1, "block": 4, "args": [{"buffer": "uint32", "data": [3, 4, 60, 5]},
                                            {"buffer": "uint64", "size": 4}, {"buffer": "uint32", "size": 4}]}
    with pytest.raises(MemoryFault, match=r"call stack overflow: a call at depth \d+ needs \d+ more words; the "
                                          r"machine's call stack holds \d+ words per thread \(.*lane 2"):
        run(k.ptx_path.read_text(), spec, engine="sim")


def test_a_recursive_function_with_local_memory_is_refused():
    ptx = HEADER + """
.func (.param .b32 r) f(.param .b32 n)
{
    .local .align 4 .b8 buf[8];
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [n];
    st.local.u32 [buf], %r1;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    add.u32 %r2, %r1, -1;
    {
    .param .b32 a;
    st.param.b32 [a], %r2;
    .param .b32 b;
    call.uni (b), f, (a);
    ld.param.b32 %r1, [b];
    }
DONE:
    st.param.b32 [r], %r1;
    ret;
}
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, 3;
    {
    .param .b32 a;
    st.param.b32 [a], %r1;
    .param .b32 b;
    call.uni (b), f, (a);
    ld.param.b32 %r2, [b];
    }
    ld.param.u64 %rd1, [out];
    st.global.u32 [%rd1], %r2;
    ret;
}
"""
    spec = LaunchSpec.from_json({"grid": 1, "block": 1, "args": [{"buffer": "uint32", "size": 1}]})
    with pytest.raises(AssemblerError, match="recursive function f uses .local memory"):
        assemble(load_program(ptx), spec)


def test_non_recursive_calls_stay_inlined():
    k = suite.get("device_calls")
    img = assemble(load_program(k.ptx_path.read_text()), k.spec())
    assert not any("@ool/" in b.label for b in img.bundles)
    fibk = suite.get("fib_recursive")
    img = assemble(load_program(fibk.ptx_path.read_text()), fibk.spec())
    assert any("@ool/" in b.label for b in img.bundles)


def test_a_kernel_that_calls_no_recursive_function_gets_no_stack():
    from qwengpu.assembler.launch_layout import machine_layout
    mod = load_program(PARITY)
    spec = LaunchSpec.from_json(parity_launch([1, 2, 3, 4], (4, 1)) | {"kernel": "plain"})
    data_end = machine_layout(mod, spec, "plain").global_end
    assert assemble(mod, spec, kernel="plain").layout.global_end == data_end
    assert assemble(mod, spec, kernel="parity").layout.global_end > data_end


def test_no_room_for_a_call_stack_is_refused_naming_the_limit():
    spec = parity_launch([1, 2, 3, 4], (4, 1))
    spec["args"][0]["data"] = list(range(500))         # 2000 of the window's 2048 bytes
    with pytest.raises(AssemblerError, match=r"recursive functions need a call stack of at least 2 words per "
                                             r"thread \(32 bytes for 4 threads.*window has \d+ bytes free"):
        assemble(load_program(PARITY), LaunchSpec.from_json(spec))

