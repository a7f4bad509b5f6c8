"""Bad input is refused with one clear message naming the argument, and arguments that mean
nothing are refused rather than quietly checking nothing (issue 23, items 7, 8 and 10):

- `run_many`: `return_exceptions` holds for every launch's failure (its spec, its program, the
  machine refusing it), a `kernels` list must have one name per launch, `batch_size` is positive;
- the CLI: `fuzz` and `verify` refuse counts, sizes, seeds and engines that mean nothing
  (argparse's exit status 2, one line), `run` never compiles a file name as CUDA, `kl` names a
  missing folder; an error never lands on a progress bar's line;
- the frontend names texture instructions, cooperative groups' grid sync and an empty module;
  a launch spec's unreadable element names its argument.
"""
import pytest

import qwengpu
from qwengpu import suite
from qwengpu.cli import main
from qwengpu.launch import LaunchError

DOT = suite.get("dot")
BAD_SPEC = {"grid": 1, "block": 4, "args": [{"buffer": "int32", "data": ["0xzz"]}]}


# ---- run_many (item 7) ----

@pytest.fixture(scope="module")
def tiny():
    from qwengpu.machine.config import TINY
    from qwengpu.runtime.checkpoint import compile_machine
    return compile_machine(TINY, dense=False)


def test_run_many_returns_a_bad_spec_as_its_entry_on_every_engine(tiny):
    for engine, opts in (("interp", {}), ("compact", {"machine": tiny, "progress": False})):
        out = qwengpu.run_many(DOT.ptx(), [BAD_SPEC, DOT.spec()], engine=engine, return_exceptions=True, **opts)
        assert isinstance(out[0], LaunchError) and "launches[0]" in str(out[0]) and "args[0]" in str(out[0])
        assert out[1].buffers[2][0] == 32
    with pytest.raises(LaunchError, match=r"launches\[0\]"):
        qwengpu.run_many(DOT.ptx(), [BAD_SPEC, DOT.spec()], engine="interp")


def test_run_many_returns_the_machines_refusal_as_its_entry_and_runs_the_rest(tiny):
    from qwengpu.api import machine_refusals
    crc = suite.get("crc32")                   # more than the tiny machine's bundles hold
    out = qwengpu.run_many([DOT.ptx(), crc.ptx(), DOT.ptx()], [DOT.spec(), crc.spec(), DOT.spec()],
                           engine="compact", machine=tiny, progress=False, return_exceptions=True)
    assert isinstance(out[1], machine_refusals())
    assert out[0].buffers[2][0] == 32 and out[2].buffers[2][0] == 32
    with pytest.raises(machine_refusals()):
        qwengpu.run_many([DOT.ptx(), crc.ptx()], [DOT.spec(), crc.spec()], engine="compact", machine=tiny,
                         progress=False)


def test_run_many_returns_a_program_that_does_not_load_as_its_entry():
    out = qwengpu.run_many([DOT.ptx(), "missing.ptx"], [DOT.spec(), DOT.spec()], engine="interp",
                           return_exceptions=True)
    assert out[0].buffers[2][0] == 32 and isinstance(out[1], FileNotFoundError)


@pytest.mark.parametrize("engine", ["interp", "compact"])
def test_run_many_refuses_a_kernels_list_of_the_wrong_length(engine, tiny):
    for kernels in (["dot"], ["dot", "dot", "dot"]):
        with pytest.raises(ValueError, match="kernel names for 2 launches"):
            qwengpu.run_many(DOT.ptx(), [DOT.spec(), DOT.spec()], engine=engine, kernels=kernels, machine=tiny)


@pytest.mark.parametrize("size", [-1, 0, 1.5, True])
def test_run_many_refuses_a_batch_size_that_is_not_positive(size, tiny):
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        qwengpu.run_many(DOT.ptx(), [DOT.spec()], engine="compact", batch_size=size, machine=tiny)


# ---- the command line (items 8, 10) ----

def refused(capsys, *argv) -> str:
    """Run the CLI; it must refuse with exit status 2, printing nothing on stdout; returns stderr."""
    try:
        status = main(list(argv))
    except SystemExit as e:               # argparse's refusal
        status = e.code
    out, err = capsys.readouterr()
    assert status == 2 and not out.strip(), (status, out, err)
    return err.strip()


@pytest.mark.parametrize("argv, says", [
    (["--count", "-3"], "argument --count: expected a positive integer, got -3"),
    (["--count", "0"], "argument --count: expected a positive integer, got 0"),
    (["--batch", "-1"], "argument --batch: expected a positive integer, got -1"),
    (["--batch", "0"], "argument --batch: expected a positive integer, got 0"),
    (["--seed", "-1"], "argument --seed: expected a non-negative integer, got -1"),
    (["--start", "-2"], "argument --start: expected a non-negative integer, got -2"),
    (["--compact-every", "-1"], "argument --compact-every: expected a non-negative integer, got -1"),
    (["--engines", "interp,bogus"], "argument --engines: unknown engine 'bogus' (available: interp, sim,"),
    (["--engines", ","], "--engines names no engine and --compact-every is 0"),
])
def test_fuzz_refuses_arguments_that_check_nothing(capsys, argv, says):
    assert says in refused(capsys, "fuzz", "--quiet", *argv)


def test_fuzz_api_refuses_them_too():
    from qwengpu.fuzz import fuzz
    for kwargs, says in (({"seed": -1}, "seed must be an int >= 0"), ({"batch": 0}, "batch must be an int >= 1"),
                         ({"count": -3}, "count must be an int >= 1"), ({"engines": ("bogus",)}, "unknown engine")):
        with pytest.raises(ValueError, match=says):
            fuzz(**kwargs)


def test_fuzz_refuses_a_cxx_that_names_no_compiler(capsys, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-qwengpu")
    assert "$CXX='no-such-compiler-qwengpu' not found" in refused(capsys, "fuzz", "--count", "1", "--quiet")


def test_verify_refuses_an_unknown_engine_and_model_options_elsewhere(capsys):
    assert "argument --engine: invalid choice: 'bogus'" in refused(capsys, "verify", "--engine", "bogus", "dot")
    assert "argument --batch: expected a positive integer, got -1" in refused(capsys, "verify", "--batch", "-1", "dot")
    assert "argument --jobs: expected a positive integer, got 0" in refused(capsys, "verify", "--jobs", "0", "dot")
    assert "--batch and --jobs apply to the model engines" in refused(capsys, "verify", "--batch", "4", "dot")
    assert "--batch and --jobs apply to the model engines" in refused(capsys, "verify", "--jobs", "2", "dot")
    assert "give one" in refused(capsys, "verify", "--engine", "compact", "--batch", "2", "--jobs", "2", "dot")


def test_run_refuses_an_unknown_engine(capsys, tmp_path):
    ptx, launch = _dot_files(tmp_path)
    assert "argument --engine: invalid choice: 'bogus'" in refused(capsys, "run", ptx, "--launch", launch,
                                                                   "--engine", "bogus")


def _dot_files(tmp_path, spec=None):
    import json
    (tmp_path / "dot.ptx").write_text(DOT.ptx())
    (tmp_path / "launch.json").write_text(json.dumps(spec or DOT.spec().to_json()))
    return str(tmp_path / "dot.ptx"), str(tmp_path / "launch.json")


def test_run_never_compiles_a_file_name_as_cuda(capsys, tmp_path, monkeypatch):
    import qwengpu.api
    monkeypatch.setattr(qwengpu.api, "compile_cuda", lambda *a, **k: pytest.fail("compiled a file name as CUDA"))
    _, launch = _dot_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert refused(capsys, "run", "notes.txt", "--launch", launch) == "qwengpu run: FileNotFoundError: no such file: notes.txt"
    (tmp_path / "notes.txt").write_text(DOT.ptx())
    assert refused(capsys, "run", "notes.txt", "--launch", launch).endswith(
        "notes.txt: a program file is .cu (CUDA) or .ptx (PTX), not '.txt'")


@pytest.mark.parametrize("spec, says", [
    ({"grid": 1, "block": 4, "args": [{"buffer": "int32", "data": [1, "0xzz"]}]},
     "LaunchError: args[0].data[1]: cannot read '0xzz' as a hex bit pattern (int32)"),
    ({"grid": 1, "block": 4, "args": [{"scalar": "uint32", "value": "0xg"}]},
     "LaunchError: args[0]: cannot read '0xg' as a hex bit pattern (uint32)"),
    ({"grid": 1, "block": 4, "shared_bytes": "abc", "args": []}, "shared_bytes must be a non-negative int (bytes of "
     "dynamic shared memory), got 'abc'"),
    ({"grid": 1, "block": 4, "shared_bytes": -100, "args": []}, "shared_bytes must be a non-negative int (bytes of dynamic shared memory), got -100"),
])
def test_run_names_the_launch_spec_value_it_cannot_read(capsys, tmp_path, spec, says):
    ptx, launch = _dot_files(tmp_path, spec)
    assert says in refused(capsys, "run", ptx, "--launch", launch)


def test_kl_says_the_base_folder_does_not_exist(capsys, tmp_path):
    line = refused(capsys, "kl", "--base", str(tmp_path / "nonexistent"), "--model", str(tmp_path))
    assert line.startswith("qwengpu kl: FileNotFoundError: --base ") and "nonexistent: no such folder" in line


def test_an_error_starts_its_own_line_after_a_progress_bar(capsys, monkeypatch):
    import qwengpu.verify

    def fail(*args, **kwargs):
        raise RuntimeError("boom")
    monkeypatch.setattr(qwengpu.verify, "verify_kernel", fail)
    assert main(["verify", "dot"]) == 2
    err = capsys.readouterr().err
    assert "verify interp" in err                               # a bar was drawn
    assert err.rstrip("\n").split("\n")[-1].split("\r")[-1] == "qwengpu verify: RuntimeError: boom"


# ---- the frontend's messages (item 10) ----

HEAD = ".version 7.0\n.target sm_75\n.address_size 64\n"
TEXTURE = HEAD + """.visible .entry k(.param .u64 t, .param .u64 out) {
  .reg .f32 %f<5>;
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [t];
  mov.u32 %r1, 0;
  tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r1}];
  ret;
}
"""
GRID_SYNC = HEAD + """.visible .entry k(.param .u64 out) {
  .reg .b32 %r<3>;
  mov.u32 %r1, %envreg2;
  mov.u32 %r2, %envreg1;
  ret;
}
"""


def test_texture_instructions_are_refused_by_name(capsys, tmp_path):
    (tmp_path / "tex.ptx").write_text(TEXTURE)
    _, launch = _dot_files(tmp_path, {"grid": 1, "block": 1, "args": [{"scalar": "uint64", "value": 0},
                                                                     {"buffer": "float32", "size": 4}]})
    err = refused(capsys, "run", str(tmp_path / "tex.ptx"), "--launch", launch)
    assert "line 10: texture and surface instructions (`tex.1d.v4.f32.s32`) are not supported" in err


def test_cooperative_groups_grid_sync_is_refused_by_name():
    with pytest.raises(ValueError) as e:
        qwengpu.load_program(GRID_SYNC)
    assert "line 6: %envreg2 (an environment register, read by cooperative groups' grid-wide sync" in str(e.value)
    assert "line 7: %envreg1" in str(e.value)


def test_an_empty_module_says_it_has_no_kernel(capsys, tmp_path):
    _, launch = _dot_files(tmp_path)
    for text in ("", HEAD):
        (tmp_path / "cut.ptx").write_text(text)
        assert refused(capsys, "run", str(tmp_path / "cut.ptx"), "--launch", launch) == (
            "qwengpu run: KernelNotFound: the module has no kernel (no .entry function): is the PTX empty or cut short?")
