"""`qwengpu.fuzz`: random CUDA kernels, the host C++ oracle that runs their threads one by one, and
a fixed-seed slice of the fuzzer on the interpreter, the simulator and the compact engine."""
import json

import numpy as np
import pytest

from qwengpu import fuzz as fz
from qwengpu.fuzz.generator import FuzzKernel, Stmt, generate
from qwengpu.fuzz.host import find_host_compiler, host_program, missing_tools
from qwengpu.fuzz.reduce import reduce_body, size

needs_tools = pytest.mark.skipif(missing_tools() is not None, reason=f"fuzzer: {missing_tools()}")

#: the CI slice: kernels 0..29 of this seed on interp and sim, one of them (one block of 4 threads,
#: 433 tokens) on the compact engine, short for CI (the warp-switch fault of blocks of 8 that the
#: long run found has its own model test: `fuzz_shared_8` in tests/test_machine_model.py)
SEED, COUNT, COMPACT_KERNEL = 11, 30, 22


def test_the_same_seed_and_index_give_the_same_kernel():
    a, b, c = generate(3, 7), generate(3, 7), generate(3, 8)
    assert a.source() == b.source() and a.name == "fz_3_7"
    assert all(a.inputs[k].tobytes() == b.inputs[k].tobytes() for k in a.inputs)
    assert a.source() != c.source().replace("fz_3_8", "fz_3_7")


def test_the_float_mix_makes_float_the_common_type_and_keeps_the_default_kernels():
    """`mix="float"` (the float unit's run) weighs the types toward float; the default mix draws
    exactly the kernels it drew before mixes existed (seed 3, kernel 7's text is pinned by hash)."""
    import hashlib
    assert hashlib.sha256(generate(3, 7).source().encode()).hexdigest()[:16] == "a6cf03ba26a41a63"
    def float_share(mix):
        lines = [ln.strip() for i in range(40) for ln in generate(9, i, mix).source().splitlines()]
        assigned = [ln[0] for ln in lines if len(ln) > 3 and ln[1].isdigit() and " = " in ln
                    and ln[0] in "iulqf" and not ln.startswith(("i0 = ii", "f0 = fi"))]
        return sum(t == "f" for t in assigned) / len(assigned)
    assert float_share("float") > 0.45 > 0.3 > float_share("all")
    k = generate(3, 7, "float")
    assert k.name == "fzf_3_7" and k.seed == "3:7:float" and k.source() == generate(3, 7, "float").source()
    with pytest.raises(ValueError, match="unknown type mix 'ints'"):
        generate(3, 7, "ints")


def test_generated_kernels_cover_the_subset():
    text = "".join(generate(5, i).source() for i in range(60))
    for construct in ("__syncthreads()", "__shfl_sync", "__shfl_xor_sync", "atomicAdd", "atomicMax", "for (",
                      "if (", "break;", "fmaf(", "sqrtf(", "fz_div_l", "fz_f2i", " / "):
        assert construct in text, construct


def _kernel(body: list, block: int = 4) -> FuzzKernel:
    n = block
    return FuzzKernel(seed="test", name="fz_test", grid=1, block=block, body=body,
                      inputs={"ii": np.arange(3 * n, dtype=np.int32) * 7 - 5,
                              "il": np.arange(2 * n, dtype=np.int64) - 3,
                              "fi": np.linspace(-2, 2, 3 * n).astype(np.float32)},
                      acc=np.zeros(6, dtype=np.uint32))


@needs_tools
def test_the_host_oracle_runs_barriers_shuffles_and_atomics_thread_by_thread():
    body = [Stmt("line", "sh_i[t] = i0;\n__syncthreads();\ni1 = sh_i[(t + 1) % 4];\n__syncthreads();"),
            Stmt("line", "u1 = (unsigned)__shfl_xor_sync(0xfu, i0, 1, 4);"),
            Stmt("line", "u0 = __shfl_up_sync(0xfu, (unsigned)t, 1, 4);"),
            Stmt("if", "t < 2", [Stmt("line", "atomicAdd(&acc[0], (unsigned)t + 1u);")],
                 [Stmt("line", "atomicMax(&acc[4], (unsigned)i0);")])]
    k = _kernel(body)
    ii, il, fi, oi, ol, of, acc = fz.run_host([k])["fz_test"]
    i0 = k.inputs["ii"][0::3]
    oi = oi.reshape(4, 4)                                                 # i0 i1 u0 u1 per thread
    assert oi[:, 0].tolist() == i0.tolist()
    assert oi[:, 1].tolist() == np.roll(i0, -1).tolist()                  # the neighbour's value, after the barrier
    assert oi[:, 2].tolist() == [0, 0, 1, 2]                              # up 1: lane 0 keeps its own
    assert oi[:, 3].tolist() == i0[[1, 0, 3, 2]].tolist()                 # xor 1
    assert acc[0] == 1 + 2 and acc[4] == max(int(v) & 0xFFFFFFFF for v in i0[2:])
    assert of.tolist() == fi.reshape(4, 3)[:, :2].ravel().tolist()        # untouched floats pass through


@needs_tools
def test_the_host_oracle_keeps_ieee_signed_zeros():
    """0 - (float)t is +0.0 for t = 0 (GCC folds it into -(float)t without -frounding-math;
    found by `qwengpu fuzz --seed 2026`, kernel 1410)."""
    k = _kernel([Stmt("line", "f0 = 0.0f - (float)t;")])
    f0 = fz.run_host([k])["fz_test"][5].reshape(4, 2)[:, 0]
    assert f0.view(np.uint32)[0] == 0 and f0[1:].tolist() == [-1.0, -2.0, -3.0]


@needs_tools
def test_generated_kernels_have_no_undefined_behaviour(tmp_path):
    """The host program of a batch, built with UBSan, reports nothing (safe math, in-range shifts,
    conversions and indices)."""
    import subprocess
    ks = [generate(2, i) for i in range(25)]
    src, exe = tmp_path / "ub.cpp", tmp_path / "ub"
    src.write_text(host_program(ks))
    cxx = find_host_compiler()
    subprocess.run([cxx, "-std=c++17", "-O0", "-fsanitize=undefined,float-cast-overflow",
                    "-fno-sanitize-recover=all", "-o", str(exe), str(src)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stderr[-2000:]
    assert run.stdout.count("== fz_2_") == 25


@needs_tools
def test_a_fixed_seed_slice_agrees_with_the_host_on_interp_and_sim(tmp_path):
    report = fz.fuzz(seed=SEED, count=COUNT, out_dir=tmp_path)
    assert not report.failures, [(f.name, f.engine, f.detail) for f in report.failures]
    for engine in ("interp", "sim"):
        assert report.checked[engine] + report.did_not_fit[engine] == COUNT
    assert report.checked["interp"] == COUNT and report.checked["sim"] >= COUNT - 3
    assert not any(tmp_path.iterdir())


@needs_tools
def test_a_sample_agrees_with_the_host_on_the_compact_engine():
    report = fz.fuzz(seed=SEED, count=1, start=COMPACT_KERNEL, engines=(), compact_every=COMPACT_KERNEL)
    assert not report.failures, [(f.name, f.detail) for f in report.failures]
    assert report.checked["compact"] == 1


@needs_tools
def test_a_disagreement_is_written_with_its_kernel_and_a_reduced_form(tmp_path, monkeypatch):
    """An engine that gets one output wrong: the fuzzer reports it, and the reducer keeps only the
    statements the wrong output still shows through."""
    import qwengpu.api as api
    real_run = api.run

    def wrong_interp(program, launch, **kw):
        res = real_run(program, launch, **kw)
        if kw.get("engine") == "interp":
            res.buffers[4] = res.buffers[4] + 1                 # every `ol` word off by one
        return res
    monkeypatch.setattr(api, "run", wrong_interp)
    report = fz.fuzz(seed=SEED, count=1, engines=("interp",), out_dir=tmp_path)
    (f,) = report.failures
    assert f.engine == "interp" and "arg 4" in f.detail
    d = tmp_path / f.name
    assert {p.name for p in d.iterdir()} == {"kernel.cu", "reduced.cu", "launch.json", "disagreement.txt"}
    assert json.loads((d / "launch.json").read_text())["kernel"] == f.name
    assert size(generate(SEED, 0).body) > 0 and f.reduced.count(";") < f.source.count(";")
    assert "__global__" in (d / "reduced.cu").read_text()


def test_the_reducer_deletes_every_statement_the_failure_does_not_need():
    body = [Stmt("line", "a;"), Stmt("if", "c", [Stmt("line", "b;"), Stmt("line", "bad;")], [Stmt("line", "d;")]),
            Stmt("for", "int k = 0; k < 2; ++k", [Stmt("line", "e;")])]

    def has_bad(b):
        return any(s.text == "bad;" or has_bad(s.body) or has_bad(s.orelse) for s in b)
    assert [(s.kind, s.text) for s in reduce_body(body, has_bad)] == [("line", "bad;")]


@needs_tools
def test_a_batch_a_compiler_rejects_is_reported_not_raised(monkeypatch):
    import qwengpu.fuzz.generator as gen
    monkeypatch.setattr(gen, "_initial", lambda ty, k: "no_such_name")
    report = fz.fuzz(seed=SEED, count=2, batch=2)
    (f,) = report.failures
    assert f.engine == "compile" and f.name == f"fz_{SEED}_0..fz_{SEED}_1" and "no_such_name" in f.source
    assert report.checked == {"interp": 0, "sim": 0}


def test_missing_tools_names_what_the_fuzzer_lacks(monkeypatch, tmp_path):
    for var in ("CXX", "QWENGPU_NVCC", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "a host C++ compiler" in missing_tools() and missing_tools().endswith("not found")


def test_large_sizes_use_a_courses_memories_and_blocks_and_leave_the_small_kernels_as_they_were():
    """`sizes="large"` (a machine that holds them, `sizes_for`): blocks of up to 64 threads, the 4 KiB
    shared table, the 256-byte local array, the 16 KiB global table; "small" draws what it drew."""
    from qwengpu.fuzz.generator import SIZES, launch_bytes, sizes_for
    from qwengpu.machine.config import BUILTIN, COMPACT_FPU_COURSE, TINY
    assert generate(3, 7, sizes="small").source() == generate(3, 7).source()
    ks = [generate(5, i, sizes="large") for i in range(60)]
    assert ks[0].name == "fzl_5_0" and ks[0].seed == "5:0:large" and ks[0].sizes == "large"
    assert {k.block for k in ks} == {4, 16, 32, 64}
    text = "".join(k.source() for k in ks)
    for construct in ("__shared__ int sh_w[1024];", "int loc[64];", "gt[", "sh_w[(t * 16 + ", "sh_w[((unsigned)",
                      "loc[((unsigned)"):
        assert construct in text, construct
    k = ks[0]
    assert len(k.inputs["ii"]) == 3 * k.threads + 4096
    assert launch_bytes(SIZES["large"]) == {"global": 26656, "shared": 4608, "local": 256, "threads": 64}
    assert (sizes_for(COMPACT_FPU_COURSE), sizes_for(BUILTIN), sizes_for(TINY)) == ("large", "small", "small")
    with pytest.raises(ValueError, match="unknown sizes 'huge'"):
        generate(3, 7, sizes="huge")


@needs_tools
def test_large_kernels_have_no_undefined_behaviour(tmp_path):
    """UBSan on the host program of large kernels (the tables' indices stay in bounds)."""
    import subprocess
    ks = [generate(2, i, sizes="large") for i in range(12)]
    src, exe = tmp_path / "ub.cpp", tmp_path / "ub"
    src.write_text(host_program(ks))
    subprocess.run([find_host_compiler(), "-std=c++17", "-O0", "-fsanitize=undefined,float-cast-overflow,bounds",
                    "-fno-sanitize-recover=all", "-o", str(exe), str(src)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stderr[-2000:]


@needs_tools
def test_large_kernels_agree_with_the_host_on_the_course_machines_simulator():
    """`--machine compact-fpu-course` draws large kernels (its memories, blocks of 64) by itself."""
    report = fz.fuzz(seed=SEED, count=6, batch=6, geometry="compact-fpu-course")
    assert report.sizes == "large" and report.to_json()["sizes"] == "large"
    assert not report.failures, [(f.name, f.engine, f.detail) for f in report.failures]
    assert report.checked == {"interp": 6, "sim": 6}
    assert "large sizes on compact-fpu-course" in report.summary()
