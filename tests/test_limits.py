"""Limits (issue 23, items 5, 9, 10, 11, 12): CUDA's refused alike by every engine, the machine's as
capacity, qwenGPU's own bounds on what a small input may allocate or run, and docs/limits.md."""
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import qwengpu
from qwengpu.api import default_machine, load_program, machine_refusals
from qwengpu.semantics.faults import ExecutionFault
from qwengpu.launch import LaunchError
from qwengpu.ptx.parser import PTXSyntaxError

ROOT = Path(__file__).resolve().parent.parent


def _ptx(body: str, decls: str = "", version: str = "9.0", regs: str = ".reg .b32 %r<4>;") -> str:
    return f""".version {version}
.target sm_90
.address_size 64
{decls}
.visible .entry k(.param .u64 out)
{{
 {regs}
 .reg .b64 %rd<4>;
 ld.param.u64 %rd1, [out];
 cvta.to.global.u64 %rd2, %rd1;
{body}
 ret;
}}
"""


STORE_TID = " mov.u32 %r1, %tid.x;\n st.global.u32 [%rd2], %r1;\n"


def _spec(**kw) -> dict:
    return {"kernel": "k", "grid": 1, "block": 4, "args": [{"buffer": "uint32", "size": 4}], **kw}


def _refusals(program, spec, engines) -> set:
    """The messages each engine refuses with (one message when they agree)."""
    out = set()
    for engine in engines:
        opts = {"machine": default_machine(engine, progress=False), "progress": False} \
            if engine == "compact" else {}
        with pytest.raises(LaunchError) as e:
            qwengpu.run(program, spec, engine=engine, **opts)
        out.add(str(e.value))
    return out


# -- item 5: CUDA's limits, refused alike; nothing allocated without bound ---------------------------

def test_static_shared_beyond_cuda_is_refused_alike_by_interp_sim_and_compact():
    ptx = _ptx(" mov.u64 %rd3, big;\n st.shared.u32 [%rd3], %r1;\n" + STORE_TID, decls=".shared .align 4 .b8 big[65536];")
    (msg,) = _refusals(ptx, _spec(), ["interp", "sim", "compact"])
    assert msg == "kernel k declares 65536 bytes of static shared memory; CUDA allows at most 49152"


def test_a_gigabyte_of_static_shared_is_refused_without_allocating_it():
    ptx = _ptx(" mov.u64 %rd3, big;\n st.shared.u32 [%rd3], %r1;\n" + STORE_TID,
               decls=".shared .align 4 .b8 big[1073741824];")
    (msg,) = _refusals(ptx, _spec(), ["interp", "sim"])
    assert "1073741824 bytes of static shared memory; CUDA allows at most 49152" in msg


def test_shared_bytes_beyond_cuda_is_refused_even_without_extern_shared():
    with pytest.raises(LaunchError, match="shared_bytes 1000000000 needs 1000000000 bytes of shared memory"):
        qwengpu.run(_ptx(STORE_TID), _spec(shared_bytes=10**9))
    for bad in (1e9, "64", True, -1):
        with pytest.raises(LaunchError, match="shared_bytes must be a non-negative int"):
            qwengpu.run(_ptx(STORE_TID), _spec(shared_bytes=bad))


def test_static_and_dynamic_shared_together_are_held_to_cudas_48_kib():
    ptx = _ptx(" mov.u64 %rd3, s;\n st.shared.u32 [%rd3], %r1;\n" + STORE_TID, decls=".shared .align 4 .b8 s[40000];")
    with pytest.raises(LaunchError, match=r"needs 49184 bytes of shared memory \(40000 static, 9184 dynamic\)"):
        qwengpu.run(ptx, _spec(shared_bytes=9184))
    # CUDA-legal: the interpreter runs it, the machine refuses it as capacity (its window is 1 KiB)
    assert list(qwengpu.run(ptx, _spec(shared_bytes=9152)).buffers[0]) == [3, 0, 0, 0]   # the last lane stored
    with pytest.raises(machine_refusals(), match="does not fit the machine's shared window"):
        qwengpu.run(ptx, _spec(shared_bytes=9152), engine="sim")


def test_block_shape_beyond_cuda_is_refused_alike():
    for block, msg in (([1, 1, 65], "block z of 65 exceeds CUDA's limit of 64"),
                       ([2048, 1, 1], "block x of 2048 exceeds CUDA's limit of 1024"),
                       ([64, 32, 1], "a block of 2048 threads exceeds CUDA's limit of 1024 threads per block")):
        with pytest.raises(LaunchError, match=msg):
            qwengpu.run(_ptx(STORE_TID), _spec(block=block))
        with pytest.raises(LaunchError, match=msg):
            qwengpu.run(_ptx(STORE_TID), _spec(block=block), engine="sim")


def test_a_spec_changed_after_it_was_read_is_checked_again_by_the_engine():
    spec = qwengpu.LaunchSpec.from_json(_spec())
    spec.block = (1, 1, 65)
    (msg,) = _refusals(_ptx(STORE_TID), spec, ["interp", "sim"])
    assert msg.startswith("block z of 65 exceeds CUDA's limit of 64")


def test_huge_register_declaration_is_refused_naming_its_line():
    ptx = _ptx(STORE_TID, regs=".reg .b32 %r<100000000>;")
    with pytest.raises(PTXSyntaxError, match=r"line 7: %r<100000000> declares more registers than qwenGPU accepts"):
        load_program(ptx)


def test_huge_const_and_global_variables_and_buffers_are_refused():
    const = _ptx(STORE_TID, decls=".const .align 4 .b8 table[1000000];")
    with pytest.raises(LaunchError, match="line 4: .const table ends at byte 1000000; CUDA's constant memory holds 65536"):
        qwengpu.run(const, _spec())
    glob = _ptx(STORE_TID, decls=".global .align 4 .b8 heap[4000000000];")
    with pytest.raises(LaunchError, match="line 4: .global heap brings the module's global variables to 4000000000"):
        qwengpu.run(glob, _spec())
    with pytest.raises(LaunchError, match=r"args\[0\]: a buffer of 1000000000 float64 is 8000000000 bytes"):
        qwengpu.run(_ptx(STORE_TID), _spec(args=[{"buffer": "float64", "size": 10**9}]))


# -- item 9: lenient input refused, naming the argument, the field or the line -------------------------

def test_out_of_range_values_in_a_spec_are_refused_naming_the_element():
    def spec(dtype, data):
        return _spec(args=[{"buffer": "uint32", "size": 4}, {"buffer": dtype, "data": data}])

    with pytest.raises(LaunchError, match=r"args\[1\]\.data\[1\]: '0x1ffffffff' does not fit in int32's 32 bits"):
        qwengpu.LaunchSpec.from_json(spec("int32", [1, "0x1ffffffff"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # no NumPy overflow warning either
        with pytest.raises(LaunchError, match=r"args\[1\]\.data\[2\]: 1e\+39 is beyond float32's range"):
            qwengpu.LaunchSpec.from_json(spec("float32", [1.0, 2.0, 1e39]))
        with pytest.raises(LaunchError, match=r"args\[1\]\.data\[0\]: .* is beyond float64's range"):
            qwengpu.LaunchSpec.from_json(spec("float64", [10**400]))
    # what stays accepted: full-width patterns, negative ones, infinities written as such
    ok = qwengpu.LaunchSpec.from_json(spec("int32", ["0xffffffff", "-0x1", 7]))
    assert list(ok.args[1].data) == [-1, -1, 7]
    assert np.isinf(qwengpu.LaunchSpec.from_json(spec("float32", ["inf"])).args[1].data[0])
    data = qwengpu.LaunchSpec.from_json(spec("float32", [float("inf"), -np.inf, np.float64("inf")])).args[1].data
    assert np.isinf(data).all() and list(np.sign(data)) == [1, -1, 1]    # a Python or NumPy infinity is one


def test_grid_and_block_are_required_ints_not_booleans():
    with pytest.raises(LaunchError, match=r"grid must be an int or a list of 1-3 ints, got True"):
        qwengpu.run(_ptx(STORE_TID), _spec(grid=True))
    for missing in ("grid", "block"):
        spec = _spec()
        del spec[missing]
        with pytest.raises(LaunchError, match=f"the launch spec needs '{missing}'"):
            qwengpu.run(_ptx(STORE_TID), spec)


def test_oversized_immediates_are_refused_naming_the_line():
    for body, line, msg in ((" mov.u32 %r1, 0x1ffffffff;\n", 11, "immediate 8589934591 does not fit the 32-bit operand"),
                            (" add.s32 %r1, %r1, -5000000000;\n", 11, "immediate -5000000000 does not fit the 32-bit"),
                            (" add.s64 %rd3, %rd2, 0x10000000000000000;\n", 11, r"immediate \d+ does not fit the 64-bit operand")):
        with pytest.raises(PTXSyntaxError, match=f"line {line}: {msg}"):
            load_program(_ptx(body + STORE_TID))
    load_program(_ptx(" mov.u32 %r1, 0xffffffff;\n add.s32 %r1, %r1, -2147483648;\n" + STORE_TID))


def test_ptx_versions_beyond_the_known_range_are_refused_naming_the_line():
    with pytest.raises(PTXSyntaxError, match=r"line 1: PTX version 99\.9 is not supported \(accepted: 1\.0 to 9\.x"):
        load_program(_ptx(STORE_TID, version="99.9"))
    with pytest.raises(PTXSyntaxError, match="line 1: malformed PTX version 'x'"):
        load_program(_ptx(STORE_TID, version="x"))
    assert load_program(_ptx(STORE_TID, version="8.5")).version == "8.5"


# -- items 10, 11: the step limit -------------------------------------------------------------------


def test_matrix_mul_sample_runs_within_the_default_token_limit():
    """The suite's matmul_tile4 (the shape of NVIDIA's matrixMul sample: 4x4 tiles in shared memory)
    on 8x16 times 16x8 on COMPACT, whose float is soft-float: 106,531 tokens, past the old fixed default of
    100,000 (the built-in machine's float unit runs it in ~11,600)."""
    from qwengpu import suite
    h, w, n = 8, 16, 8
    a = (np.arange(h * w) % 7 - 3).astype(np.float32)
    b = (np.arange(w * n) % 5 - 2).astype(np.float32) * 0.5
    spec = {"grid": [n // 4, h // 4], "block": [4, 4],
            "args": [{"buffer": "float32", "size": h * n}, {"buffer": "float32", "data": a.tolist()},
                     {"buffer": "float32", "data": b.tolist()}, {"scalar": "int32", "value": w},
                     {"scalar": "int32", "value": n}]}
    res = qwengpu.run(suite.get("matmul_tile4").ptx(), spec, engine="sim", config="compact")
    assert res.tokens > 100_000
    np.testing.assert_array_equal(res.buffers[0], (a.reshape(h, w) @ b.reshape(w, n)).reshape(-1))


FOREVER = _ptx("L:\n add.u32 %r1, %r1, 1;\n bra.uni L;\n")


def test_while_one_still_stops_with_a_clear_message():
    with pytest.raises(ExecutionFault, match=r"step limit of 5000 steps exceeded \(a runaway loop\? raise max_steps\)"):
        qwengpu.run(FOREVER, _spec(block=1), max_steps=5000)
    with pytest.raises(ExecutionFault, match=r"token limit of 100000 reached \(a runaway loop\?\)"):
        qwengpu.run(FOREVER, _spec(block=1), engine="sim")          # the default, for one warp


def test_a_warp_spinning_on_another_warps_flag_is_named_as_such():
    src = r"""
    __global__ void spin(volatile int *flag, int *out) {
      if (threadIdx.x >= 4) *flag = 1;             // warp 1 sets the flag ...
      else { while (*flag == 0) {} out[threadIdx.x] = 1; }   // ... warp 0, run first, waits for it
    }"""
    spec = {"grid": 1, "block": 8, "args": [{"buffer": "int32", "size": 1}, {"buffer": "int32", "size": 8}]}
    with pytest.raises(ExecutionFault) as e:
        qwengpu.run(src, spec, max_steps=3000)
    msg = str(e.value)
    assert "warp 0 spins in a loop reading global memory" in msg and "warp(s) 1 of its block" in msg
    assert "raising max_steps will not help" in msg and "raise max_steps)" not in msg
    for engine in ("sim", "compact"):               # the machine engines say the same from their tokens
        with pytest.raises(ExecutionFault) as e:
            qwengpu.run(src, spec, engine=engine, max_steps=600, **({"progress": False} if engine == "compact" else {}))
        msg = str(e.value)
        assert "token limit of 600 reached: warp 0 ran alone" in msg and "other warps of its block" in msg, msg
        assert "raising max_steps will not help" in msg


def test_a_long_loop_in_a_one_warp_block_is_still_called_a_runaway_loop():
    spec = {"grid": 1, "block": 4, "args": [{"buffer": "int32", "size": 1}, {"buffer": "int32", "size": 8}]}
    src = "__global__ void spin1(volatile int *flag, int *out) { while (*flag == 0) {} out[threadIdx.x] = 1; }"
    with pytest.raises(ExecutionFault, match=r"token limit of 600 reached \(a runaway loop\?\)"):
        qwengpu.run(src, spec, engine="sim", max_steps=600)


def test_non_positive_step_limits_are_refused_by_the_api_and_the_cli(tmp_path):
    for bad in (0, -5, True, 2.5):
        with pytest.raises(LaunchError, match=f"max_steps \\(--max-steps\\) must be a positive number of steps, got {bad!r}"):
            qwengpu.run(_ptx(STORE_TID), _spec(), max_steps=bad)
    with pytest.raises(LaunchError, match="got 0"):
        qwengpu.run_many(_ptx(STORE_TID), [_spec()], engine="interp", max_steps=0)
    assert qwengpu.run(_ptx(STORE_TID), _spec(), max_steps=np.int64(50)).steps <= 50     # any integer type
    prog, launch = tmp_path / "k.ptx", tmp_path / "k.json"
    prog.write_text(_ptx(STORE_TID))
    launch.write_text(json.dumps(_spec()))
    for bad in ("-5", "0"):
        out = subprocess.run([sys.executable, "-m", "qwengpu", "run", str(prog), "--launch", str(launch),
                              "--max-steps", bad], capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 2 and f"must be a positive number of steps, got {int(bad)}" in out.stderr


# -- item 12: shared memory laid out per kernel -----------------------------------------------------

TWO_KERNELS = r"""
extern "C" __global__ void first(int *out) {
  __shared__ int a[160];                                   // 640 bytes
  a[threadIdx.x] = threadIdx.x + 1; __syncthreads(); out[threadIdx.x] = a[3 - threadIdx.x];
}
extern "C" __global__ void second(int *out) {
  __shared__ int b[160];                                   // 640 more: 1280 together, past the 1 KiB window
  b[threadIdx.x] = 10 * threadIdx.x; __syncthreads(); out[threadIdx.x] = b[3 - threadIdx.x];
}"""


def test_shared_memory_is_laid_out_for_the_launched_kernel_only():
    spec = {"kernel": "second", "grid": 1, "block": 4, "args": [{"buffer": "int32", "size": 4}]}
    for engine in ("interp", "sim"):
        assert list(qwengpu.run(TWO_KERNELS, spec, engine=engine).buffers[0]) == [30, 20, 10, 0]
    spec["kernel"] = "first"
    assert list(qwengpu.run(TWO_KERNELS, spec, engine="sim").buffers[0]) == [4, 3, 2, 1]


# -- the page ---------------------------------------------------------------------------------------

def test_limits_page_is_what_the_code_writes():
    from qwengpu.limits import limits_page
    assert (ROOT / "docs" / "limits.md").read_text() == limits_page(), \
        "docs/limits.md is stale: python -m qwengpu.limits > docs/limits.md"


def test_the_limits_page_gives_each_named_machines_sizes():
    """The sizes table comes from the geometries: the course machine holds issue 26's minimums."""
    from qwengpu.limits import sizes_rows
    from qwengpu.machine.config import COMPACT_FPU_COURSE
    rows = {r[0].split("`")[1]: r for r in sizes_rows()}
    assert rows["compact-fpu"][1:6] == ("32", "2 KiB", "1 KiB", "32 B (threads 0-15)", "512 B")
    course = rows["compact-fpu-course"]
    assert course[1:6] == ("64", "32 KiB", "8 KiB", "256 B", "4 KiB")
    assert int(course[1]) == COMPACT_FPU_COURSE.max_threads >= 64


def test_machine_sizes_through_the_api():
    """`qwengpu.api.machine_sizes`: what a machine holds for a launch, by name or geometry."""
    from qwengpu.api import machine_sizes
    from qwengpu.machine.config import BUILTIN
    assert machine_sizes("compact-fpu-course") == {"threads": 64, "global": 32768, "shared": 8192, "const": 4096,
                                                   "local": 256, "local_threads": 64}
    assert machine_sizes() == machine_sizes(BUILTIN) == {"threads": 32, "global": 2048, "shared": 1024,
                                                         "const": 512, "local": 32, "local_threads": 16}
