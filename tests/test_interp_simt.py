"""SIMT execution of the reference interpreter: divergence, reconvergence, calls, barriers, faults."""
import pytest
from ptxkit import kernel

from qwengpu import run
from qwengpu.interp.interpreter import StepLimitExceeded
from qwengpu.semantics.faults import ExecutionFault, MemoryFault
from qwengpu.ptx.isa import ModuleUnsupported, PTXUnsupported
from qwengpu.ptx.parser import PTXSyntaxError

TID = "mov.u32 %r1, %tid.x;\nld.param.u64 %rd1, [out];\nmul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\n"


def launch(body, block=4, grid=1, size=None, data=None, trace=False, **kw):
    args = [{"buffer": "int32", "data": data} if data is not None else
            {"buffer": "int32", "size": size or block * grid}]
    return run(kernel(TID + body), {"grid": grid, "block": block, "args": args}, trace=trace, **kw)


def test_if_else_diverges_and_reconverges():
    body = """
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra EVEN;
    mov.u32 %r3, 100;
    bra.uni JOIN;
EVEN:
    mov.u32 %r3, 200;
JOIN:
    add.u32 %r3, %r3, %r1;
    st.global.u32 [%rd3], %r3;
    ret;
"""
    res = launch(body, trace=True)
    assert res.buffers[0].tolist() == [200, 101, 202, 103]
    # the join point runs once with all four lanes
    join = [s for s in res.trace.steps if s.text.startswith("add.u32")]
    assert len(join) == 1 and join[0].active == 0b1111
    assert [s.active for s in res.trace.steps if s.text.startswith("mov.u32 %r3, 100")] == [0b1010]
    assert [s.active for s in res.trace.steps if s.text.startswith("mov.u32 %r3, 200")] == [0b0101]


def test_loop_with_divergent_trip_counts_and_break():
    # each lane sums 1..(tid+1) but breaks when the sum exceeds 4
    body = """
    mov.u32 %r4, 0;
    mov.u32 %r5, 1;
LOOP:
    add.u32 %r4, %r4, %r5;
    setp.gt.u32 %p2, %r4, 4;
    @%p2 bra DONE;
    add.u32 %r5, %r5, 1;
    setp.le.u32 %p1, %r5, %r1;
    @%p1 bra LOOP;
    setp.eq.u32 %p3, %r1, 0;
    @%p3 bra LOOP;
DONE:
    st.global.u32 [%rd3], %r4;
    ret;
"""
    # lane 0: trip forever until sum>4: 1,2(1+... no: r5 increments only when not broken
    res = launch(body, trace=True)
    # lane0: 1 ->(r5=2, 2<=0 no; tid==0 -> loop) 3 ->(r5=3) 6>4 break => 6
    # lane1: 1 -> r5=2, 2<=1 no, tid!=0 -> exit loop => 1
    # lane2: 1 -> r5=2 <=2 loop: 3 -> r5=3, 3<=2 no => 3
    # lane3: 1, 3, 6>4 => 6
    assert res.buffers[0].tolist() == [6, 1, 3, 6]
    stores = [s for s in res.trace.steps if s.text.startswith("st.global")]
    assert len(stores) == 1 and stores[0].active == 0b1111


def test_a_dead_end_in_a_loop_does_not_move_its_reconvergence():
    """An infinite loop no lane reaches (nvcc emits `L: bra.uni L;`) inside a loop with divergent
    trip counts: the lanes still reconverge at the loop's exit, so the shuffle after it reads every
    lane's new value (found by `qwengpu fuzz --mix float`, kernel 5106: the exit was the function's
    end, and lanes that left the loop early shuffled stale registers)."""
    body = """
    mov.u32 %r2, 0;
    setp.eq.u32 %p3, %r1, 7;
LOOP:
    add.u32 %r2, %r2, 1;
    @%p3 bra DEAD;
    setp.lt.u32 %p1, %r2, %r1;
    @%p1 bra LOOP;
    add.u32 %r3, %r2, 10;
    shfl.sync.idx.b32 %r4, %r3, 3, 31, 15;
    add.u32 %r4, %r4, %r2;
    st.global.u32 [%rd3], %r4;
    ret;
DEAD:
    bra.uni DEAD;
"""
    res = launch(body, trace=True)
    assert res.buffers[0].tolist() == [14, 14, 15, 16]      # lane 3's 3 + 10, plus each lane's trips
    shuffles = [s for s in res.trace.steps if s.text.startswith("shfl")]
    assert len(shuffles) == 1 and shuffles[0].active == 0b1111


def test_early_return_inside_divergent_code():
    body = """
    setp.lt.u32 %p1, %r1, 2;
    @%p1 bra SKIP;
    mov.u32 %r6, 7;
    st.global.u32 [%rd3], %r6;
    ret;
SKIP:
    mov.u32 %r6, 9;
    st.global.u32 [%rd3], %r6;
    ret;
"""
    assert launch(body).buffers[0].tolist() == [9, 9, 7, 7]


def test_nested_divergence():
    body = """
    mov.u32 %r7, 0;
    and.b32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra ODD;
    and.b32 %r2, %r1, 2;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra TWO;
    mov.u32 %r7, 10;
    bra.uni EJOIN;
TWO:
    mov.u32 %r7, 20;
EJOIN:
    add.u32 %r7, %r7, 1;
    bra.uni JOIN;
ODD:
    mov.u32 %r7, 30;
JOIN:
    st.global.u32 [%rd3], %r7;
    ret;
"""
    assert launch(body).buffers[0].tolist() == [11, 30, 21, 30]


def test_multi_warp_block_barrier_and_shared_memory():
    # 8 threads = 2 warps: each writes tid to shared, barrier, then reads the mirror element
    ptx = kernel("""
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, sh;
    add.u32 %r4, %r3, %r2;
    st.shared.u32 [%r4], %r1;
    bar.sync 0;
    sub.u32 %r5, 7, %r1;
    shl.b32 %r5, %r5, 2;
    add.u32 %r5, %r3, %r5;
    ld.shared.u32 %r6, [%r5];
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
    ret;
""", regs=".shared .align 4 .b8 sh[32];")
    res = run(ptx, {"grid": 1, "block": 8, "args": [{"buffer": "int32", "size": 8}]})
    assert res.buffers[0].tolist() == [7, 6, 5, 4, 3, 2, 1, 0]


def test_grid_of_blocks_and_special_registers():
    ptx = kernel("""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    mov.u32 %r5, %laneid;
    mov.u32 %r6, %warpid;
    mad.lo.u32 %r7, %r6, 100, %r5;
    mov.u32 %r8, %nctaid.x;
    mad.lo.u32 %r7, %r8, 1000, %r7;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r7;
    ret;
""")
    res = run(ptx, {"grid": 2, "block": 6, "args": [{"buffer": "int32", "size": 12}]})
    assert res.buffers[0].tolist() == [2000, 2001, 2002, 2003, 2100, 2101] * 2


def test_shfl_clamps_out_of_range_lanes():
    ptx = kernel("""
    mov.u32 %r1, %tid.x;
    mul.lo.u32 %r2, %r1, 10;
    shfl.sync.up.b32 %r3|%p1, %r2, 1, 7168, 15;
    shfl.sync.down.b32 %r4|%p2, %r2, 2, 7199, 15;
    shfl.sync.idx.b32 %r5, %r2, 3, 7199, 15;
    shfl.sync.bfly.b32 %r6, %r2, 1, 7199, 15;
    add.u32 %r7, %r3, %r4;
    mad.lo.u32 %r7, %r5, 1000, %r7;
    mad.lo.u32 %r7, %r6, 100000, %r7;
    selp.u32 %r8, 1, 0, %p1;
    selp.u32 %r9, 2, 0, %p2;
    add.u32 %r8, %r8, %r9;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r7, %r8};
    ret;
""")
    res = run(ptx, {"grid": 1, "block": 4, "args": [{"buffer": "uint32", "size": 8}]})
    out = res.buffers[0].reshape(4, 2)
    # up by 1: lane0 keeps its own (0), others get lane-1; down by 2: lanes 2,3 keep their own
    up = [0, 0, 10, 20]
    down = [20, 30, 20, 30]
    assert out[:, 0].tolist() == [up[i] + down[i] + 30 * 1000 + [10, 0, 30, 20][i] * 100000 for i in range(4)]
    assert out[:, 1].tolist() == [0 + 2, 1 + 2, 1 + 0, 1 + 0]


def test_device_function_call_with_divergent_return():
    ptx = """.version 9.0
.target sm_75
.address_size 64
.func (.param .b32 rv) f(.param .b32 x)
{
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u32 %r1, [x];
    setp.gt.u32 %p1, %r1, 1;
    @%p1 bra BIG;
    st.param.b32 [rv], 5;
    ret;
BIG:
    mul.lo.u32 %r2, %r1, %r1;
    st.param.b32 [rv], %r2;
    ret;
}
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    {
    .param .b32 p0;
    st.param.b32 [p0], %r1;
    .param .b32 r0;
    call.uni (r0), f, (p0);
    ld.param.b32 %r2, [r0];
    }
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""
    res = run(ptx, {"grid": 1, "block": 4, "args": [{"buffer": "int32", "size": 4}]})
    assert res.buffers[0].tolist() == [5, 5, 4, 9]


def test_out_of_bounds_store_is_a_fault_naming_lane_and_address():
    body = "add.s64 %rd4, %rd3, 12;\nst.global.u32 [%rd4], %r1;\nret;"
    with pytest.raises(MemoryFault) as e:
        launch(body)
    msg = str(e.value)
    assert "out-of-bounds global write" in msg and "lane 1" in msg and "0x1010" in msg
    assert "line" in msg and "st.global.u32" in msg
    assert e.value.lane == 1 and e.value.address == 0x1010


def test_misaligned_access_is_a_fault():
    body = "add.s64 %rd4, %rd3, 2;\nst.global.u32 [%rd4], %r1;\nret;"
    with pytest.raises(MemoryFault, match="misaligned"):
        launch(body)


def test_null_pointer_is_a_fault():
    body = "mov.u64 %rd4, 0;\nld.global.u32 %r2, [%rd4];\nret;"
    with pytest.raises(MemoryFault, match="0x0"):
        launch(body)


def test_runaway_loop_hits_the_step_limit():
    body = "L:\nadd.u32 %r2, %r2, 1;\nbra.uni L;\nret;"
    with pytest.raises(StepLimitExceeded, match="step limit of 500"):
        launch(body, max_steps=500)


def test_trap_is_a_fault():
    with pytest.raises(ExecutionFault, match="trap"):
        launch("trap;\nret;")


def test_unsupported_instruction_names_line_and_construct():
    with pytest.raises(PTXUnsupported) as e:
        launch("ex2.approx.f16 %rs1, %rs2;\nret;")
    assert "ex2.approx.f16" in str(e.value) and e.value.line is not None


def test_all_unsupported_constructs_are_listed_at_once():
    with pytest.raises(ModuleUnsupported) as e:
        launch("ex2.approx.f16 %rs1, %rs2;\nfoo.b32 %r1, %r2;\nret;")
    assert len(e.value.errors) == 2


def test_malformed_ptx_names_the_line():
    with pytest.raises(PTXSyntaxError) as e:
        run(kernel("mov.u32 %r1, ;\nret;"), {"grid": 1, "block": 1, "args": [{"buffer": "int32", "size": 1}]})
    assert e.value.line == 15 or "line" in str(e.value)


def test_uninitialised_register_reads_zero():
    res = launch("st.global.u32 [%rd3], %r9;\nret;", data=[5, 5, 5, 5])
    assert res.buffers[0].tolist() == [0, 0, 0, 0]


def test_vote_and_activemask_in_divergent_code():
    body = """
    setp.lt.u32 %p1, %r1, 3;
    @!%p1 bra OUT;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p2, %r2, 0;
    vote.sync.ballot.b32 %r3, %p2, -1;
    activemask.b32 %r4;
    vote.sync.any.pred %p3, %p2, %r4;
    vote.sync.all.pred %p4, %p2, %r4;
    selp.u32 %r5, 1, 0, %p3;
    selp.u32 %r6, 2, 0, %p4;
    add.u32 %r5, %r5, %r6;
    mad.lo.u32 %r5, %r4, 10, %r5;
    mad.lo.u32 %r5, %r3, 1000, %r5;
    st.global.u32 [%rd3], %r5;
OUT:
    ret;
"""
    res = launch(body)
    # active lanes 0,1,2; even lanes 0 and 2 -> ballot 0b101; any true, all false
    assert res.buffers[0].tolist() == [5 * 1000 + 7 * 10 + 1] * 3 + [0]
