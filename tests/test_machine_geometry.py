"""The memory map and the threads per block as geometry (`MachineConfig`'s sizes and `max_warps`,
`qwengpu.machine.layout.MemoryMap`): the built-in map; a larger one's faults at its window edges,
equal to the interpreter's on the simulator and to the simulator's on a compiled machine; blocks of
64 and 128 threads; the refusals naming the geometry's sizes."""
import dataclasses

import pytest
from ptxkit import kernel

from qwengpu import load_program, run
from qwengpu.assembler import AssemblerError, assemble
from qwengpu.launch import GLOBAL_BASE, LaunchSpec
from qwengpu.machine.config import (BUILTIN, COMPACT, COMPACT_FPU, COMPACT_FPU_COURSE, CONFIGS, SIM, TINY,
                                    config_named, config_with)
from qwengpu.machine.layout import memory_map
from qwengpu.runtime.checkpoint import compile_machine
from qwengpu.semantics.faults import ExecutionFault

#: a geometry with every window larger than the built-in one's, the global one past 4 KiB (rotated:
#: its window [0x1000, 0x3000) is not a multiple of its size), local memory for every thread
WIDE = {"global_bytes": 8192, "shared_bytes": 2048, "local_bytes": 64, "local_threads": 32, "const_bytes": 1024}


def test_the_built_in_machines_keep_their_memory_map():
    for cfg in (COMPACT, TINY, SIM):
        mm = memory_map(cfg)
        assert {s: (r.first, r.lines, r.bits) for s, r in mm.regions.items()} == {
            "global": (0, 128, 11), "shared": (128, 64, 10), "local": (192, 32, 5), "const": (224, 32, 9)}
        assert (mm.lines, mm.line_bits, cfg.memory_bytes) == (256, 8, 4096)


def test_a_larger_map_places_regions_largest_first_and_rotates_the_global_window():
    mm = memory_map(config_with(TINY, WIDE))
    assert {s: (r.first, r.lines) for s, r in mm.regions.items()} == {
        "global": (0, 512), "shared": (512, 128), "local": (640, 128), "const": (768, 64)}
    assert (mm.lines, mm.line_bits) == (1024, 10) and mm.line_address(832) is None
    # 0x1000.. lands on line 256, the window's top 4 KiB on lines 0..255
    assert mm.machine_address("global", GLOBAL_BASE, 0) == 256 * 16
    assert mm.machine_address("global", 0x2FFC, 0) == 0xFFC
    assert mm.machine_address("global", 0x3000, 0) is None and mm.machine_address("global", 0xFFC, 0) is None
    assert mm.line_address(0) == ("global", 0x2000, 0) and mm.line_address(256) == ("global", 0x1000, 0)
    assert mm.machine_address("local", 60, 31) == (640 + 31 * 4) * 16 + 60
    assert mm.line_address(640 + 31 * 4 + 3) == ("local", 48, 31)


@pytest.mark.parametrize("settings, message", [
    ({"global_bytes": 3000}, "global_bytes must be a power of two"),
    ({"local_threads": 64}, "local_threads (64) exceeds the threads of a block (32)"),
    ({"global_bytes": 1 << 16}, "the memory map needs 4224 lines"),
])
def test_geometries_the_circuits_cannot_select_are_refused(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config_with(TINY, settings)


def test_settings_parse_and_name_the_geometry():
    cfg = config_with(COMPACT, ["global_bytes=0x4000", "shared_bytes=4096"])
    assert (cfg.global_bytes, cfg.shared_bytes, cfg.name) == (16384, 4096, "compact[global_bytes=16384,shared_bytes=4096]")
    with pytest.raises(ValueError, match="not a field"):
        config_with(COMPACT, ["memory=1"])


def _edge_kernel(space: str, size: int) -> str:
    """Every lane writes then reads the word at 4*t of a `space` array of `size` bytes (global:
    the `in` buffer), lane 2 at 4*t + k bytes."""
    decl = {"shared": f".shared .align 4 .b8 arr[{size}];", "local": f".local .align 4 .b8 arr[{size}];",
            "const": f".const .align 4 .b8 arr[{size}];", "global": ""}[space]
    if space == "global":
        base = "ld.param.u64 %rd1, [in];"
    else:
        base = "mov.u64 %rd1, arr;"
    store = "" if space == "const" else f"st.{space}.u32 [%rd4], %r2;"
    body = f"""
    {base}
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [k];
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p1, %r2, 2;
    selp.b32 %r3, %r1, 0, %p1;
    mul.wide.u32 %rd3, %r2, 4;
    cvt.s64.s32 %rd5, %r3;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd4, %rd4, %rd5;
    {store}
    ld.{space}.u32 %r5, [%rd4];
    add.s64 %rd6, %rd2, %rd3;
    st.global.u32 [%rd6], %r5;
    ret;"""
    if space == "local":                # a function's own
        return kernel(body, ".param .u64 in, .param .u64 out, .param .u32 k", regs=decl, name="edge")
    src = kernel(body, ".param .u64 in, .param .u64 out, .param .u32 k", name="edge")
    return src.replace(".visible .entry", decl + "\n.visible .entry", 1)


def _spec(space: str, size: int, k: int) -> LaunchSpec:
    n_in = (size - 16) // 4 if space == "global" else 4     # global: `in` and `out` fill the window
    return LaunchSpec.from_json({"kernel": "edge", "grid": 1, "block": 4, "args": [
        {"buffer": "uint32", "data": list(range(n_in))}, {"buffer": "uint32", "size": 4},
        {"scalar": "uint32", "value": k & 0xFFFFFFFF}]})


def _outcome(program, spec, engine, **kw):
    try:
        r = run(program, spec, engine=engine, **kw)
    except ExecutionFault as e:
        return ("fault", e.kind, e.lane, e.address)
    return ("ok", [int(x) for x in r.buffers[1]])


# lane 2's byte offset k: the window's last word (in bounds), one word past its end, one word
# before its start, and (global) at 0x5000, past the window's next multiple
EDGES = [("global", 8192, (8192 - 16) - 12), ("global", 8192, 8192 - 16 - 8 + 16), ("global", 8192, -12),
         ("global", 8192, 0x5000 - GLOBAL_BASE - 8),
         ("shared", 2048, 2048 - 12), ("shared", 2048, 2048 - 8), ("shared", 2048, -12),
         ("local", 64, 64 - 12), ("local", 64, 64 - 8), ("local", 64, -12),
         ("const", 1024, 1024 - 12), ("const", 1024, 1024 - 8)]


@pytest.mark.parametrize("space, size, k", EDGES)
def test_faults_at_a_larger_geometrys_window_edges_equal_the_interpreters(space, size, k):
    cfg = config_with(COMPACT, WIDE)
    program = load_program(_edge_kernel(space, size))
    spec = _spec(space, size, k)
    want = _outcome(program, spec, "interp")
    assert want[0] == ("ok" if k == size - 16 * (space == "global") - 12 else "fault")
    assert _outcome(program, spec, "sim", config=cfg) == want


def test_refusals_name_the_geometrys_sizes():
    cfg = config_with(TINY, WIDE)
    program = load_program(_edge_kernel("global", 16384))
    with pytest.raises(AssemblerError, match="the machine has 8192"):
        assemble(program, _spec("global", 16384, 0), config=cfg)
    program = load_program(_edge_kernel("local", 128))
    with pytest.raises(AssemblerError, match="the machine has 64"):
        assemble(program, _spec("local", 128, 0), config=cfg)
    with pytest.raises(AssemblerError, match="the machine has 32$"):
        assemble(load_program(_edge_kernel("local", 64)), _spec("local", 64, 0), config=TINY)


_STORE = """
    mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r9, %ntid.x;
    mad.lo.u32 %r3, %r2, %r9, %r1;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r3, 4; add.s64 %rd3, %rd1, %rd2;
    mad.lo.u32 %r4, %r2, 100, %r1;
    st.global.u32 [%rd3], %r4;
    bar.sync 0;"""
_BINS = """
    and.b32 %r5, %r3, 7; mul.wide.u32 %rd4, %r5, 4;
    ld.param.u64 %rd5, [bins]; add.s64 %rd6, %rd5, %rd4;
    atom.global.add.u32 %r6, [%rd6], %r3;"""
#: every thread stores tid.x + 100 * tid.y at its linear index; then, past a barrier, adds its
#: index into one of 8 bins (atomics over every warp of the block)
BLOCK_KERNEL = kernel(_STORE + _BINS + "\n    ret;", ".param .u64 out, .param .u64 bins", name="k")


def _block_spec(block, grid=1):
    n = block[0] * block[1]
    return LaunchSpec.from_json({"kernel": "k", "grid": grid, "block": list(block) + [1], "args": [
        {"buffer": "uint32", "size": n}, {"buffer": "uint32", "size": 8}]})


@pytest.mark.parametrize("warps, block", [(16, (16, 4)), (32, (8, 16))])
def test_blocks_of_64_and_128_threads_run_exact_on_the_simulator(warps, block):
    program, spec = load_program(BLOCK_KERNEL), _block_spec(block, grid=2)
    want = run(program, spec, engine="interp").buffers
    got = run(program, spec, engine="sim", config=config_with(COMPACT, {"max_warps": warps})).buffers
    assert [b.tolist() for b in got] == [b.tolist() for b in want]
    with pytest.raises(AssemblerError, match=f"a block of {block[0] * block[1]} threads needs more than the "
                                             "machine's 8 warps of 4 lanes"):
        run(program, spec, engine="sim", config=COMPACT)


@pytest.fixture(scope="module")
def wide_machine():
    """TINY compiled (sparse weights, the compact engine) with the larger map and 16 warps: ~10 s."""
    return compile_machine(config_with(TINY, dict(WIDE, max_warps=16)), dense=False)


def _engine_outcome(program, spec, engine, **kw):
    try:
        r = run(program, spec, engine=engine, **kw)
    except ExecutionFault as e:
        return ("fault", e.kind, e.lane, e.address)
    return ("ok", [None if b is None else b.tolist() for b in r.buffers], r.extra["generated"])


# lane 2 at 0x3000, one past the rotated global window, whose line is 0x1000's (valid: only the
# window says no); in bounds; past its local frame's 64 bytes; a block of 64 threads over 16 warps
# (tid.x 6 bits, warp 4 bits, a barrier, atomics from every warp)
@pytest.mark.parametrize("case", ["global_edge", "global_in", "local_edge", "block_64"])
def test_the_compiled_machine_runs_a_larger_geometry_as_the_simulator_does(wide_machine, case):
    program, spec = {"global_edge": (_edge_kernel("global", 64), _spec("global", 32, 0x3000 - GLOBAL_BASE - 8)),
                     "global_in": (_edge_kernel("global", 64), _spec("global", 32, 4)),
                     "local_edge": (_edge_kernel("local", 64), _spec("local", 32, 64 - 8)),
                     "block_64": (BLOCK_KERNEL, _block_spec((16, 4)))}[case]
    program = load_program(program)
    want = _engine_outcome(program, spec, "sim", config=wide_machine.config)
    assert want[0] == ("fault" if case.endswith("edge") else "ok")
    assert _engine_outcome(program, spec, "compact", machine=wide_machine, progress=False, check_states=True) == want


def test_warps_must_be_a_power_of_two_the_tokens_hold():
    for bad in (12, 64):
        with pytest.raises(ValueError, match="max_warps must be a power of two, 2..32"):
            config_with(COMPACT, {"max_warps": bad})


def test_the_course_machine_is_compact_fpu_with_a_courses_sizes():
    """Issue 26's minimums (global >= 16 KiB, shared >= 4 KiB, local >= 256 B for every thread of a
    64-thread block, const >= 4 KiB, 64 threads), the rest compact-fpu's; loadable by name."""
    cfg = config_named("compact-fpu-course")
    assert cfg is COMPACT_FPU_COURSE is CONFIGS["compact-fpu-course"] and BUILTIN is COMPACT_FPU
    assert (cfg.global_bytes, cfg.shared_bytes, cfg.local_bytes, cfg.local_threads, cfg.const_bytes,
            cfg.max_threads) == (32768, 8192, 256, 64, 4096, 64)
    sizes = {"max_warps": 16, "global_bytes": 32768, "shared_bytes": 8192, "local_bytes": 256,
             "local_threads": 64, "const_bytes": 4096}
    assert cfg == dataclasses.replace(config_with(COMPACT_FPU, sizes), name="compact-fpu-course")
    mm = memory_map(cfg)
    assert {s: r.lines for s, r in mm.regions.items()} == {"global": 2048, "shared": 512, "local": 1024, "const": 256}
    assert mm.lines == 4096          # the prompt cursor's limit: 3,840 of its lines used


# the course machine's window edges: the last word in bounds and one word past the end, in every space
COURSE_EDGES = [("shared", 8192, 8192 - 12), ("shared", 8192, 8192 - 8), ("local", 256, 256 - 12),
                ("local", 256, 256 - 8), ("const", 4096, 4096 - 12), ("const", 4096, 4096 - 8),
                ("global", 32768, 32768 - 16 - 12), ("global", 32768, 32768 - 16 - 8 + 16)]


@pytest.mark.parametrize("space, size, k", COURSE_EDGES)
def test_the_course_machines_window_edges_fault_where_the_interpreters_do(space, size, k):
    program, spec = load_program(_edge_kernel(space, size)), _spec(space, size, k)
    want = _outcome(program, spec, "interp")
    assert want[0] == ("ok" if k == size - 16 * (space == "global") - 12 else "fault")
    assert _outcome(program, spec, "sim", config="compact-fpu-course") == want
