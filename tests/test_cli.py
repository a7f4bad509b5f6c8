"""The command-line contract: `qwengpu run/verify/demo/bench`, JSON output, errors on stderr."""
import json
import subprocess
import sys

import pytest

from qwengpu import suite
from qwengpu.fuzz.host import missing_tools


def cli(*args):
    return subprocess.run([sys.executable, "-m", "qwengpu", *args], capture_output=True, text=True)


def test_run_json_contract(tmp_path):
    k = suite.get("dot")
    p = cli("run", str(k.ptx_path), "--launch", str(k.spec_path), "--engine", "interp", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out) == {"kernel", "engine", "buffers", "steps", "tokens"}
    assert out["buffers"] == [[1, 2, 3, 4], [2, 3, 4, 3], [32]]
    assert out["engine"] == "interp" and out["tokens"] is None and out["steps"] == 15


def test_run_readable_summary():
    k = suite.get("dot")
    p = cli("run", str(k.ptx_path), "--launch", str(k.spec_path))
    assert p.returncode == 0 and "[32]" in p.stdout


def test_scalar_args_print_null_and_floats_as_numbers(tmp_path):
    k = suite.get("saxpy")
    p = cli("run", str(k.ptx_path), "--launch", str(k.spec_path), "--json")
    out = json.loads(p.stdout)
    spec = k.spec()
    for a, b in zip(spec.args, out["buffers"]):
        assert (b is None) == (not a.is_buffer)


def test_errors_go_to_stderr_with_nonzero_exit(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kernel": "dot", "grid": 1, "block": 4, "args": []}')
    p = cli("run", str(suite.get("dot").ptx_path), "--launch", str(bad))
    assert p.returncode != 0 and "takes 3 parameters" in p.stderr and p.stdout == ""
    p = cli("run", "/nonexistent.ptx", "--launch", str(bad))
    assert p.returncode != 0 and "no such file" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1     # one clear line


def test_debug_shows_the_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kernel": "dot", "grid": 1, "block": 4, "args": []}')
    for argv in (["--debug", "run"], ["run", "--debug"]):           # before or after the subcommand
        p = cli(*argv, str(suite.get("dot").ptx_path), "--launch", str(bad))
        assert p.returncode == 2 and "Traceback (most recent call last)" in p.stderr
        assert p.stderr.strip().splitlines()[-1].startswith("qwengpu run: ")


def test_fault_reports_lane_and_address(tmp_path):
    spec = tmp_path / "s.json"
    # the dot kernel reading past the end of a 2-element buffer
    spec.write_text(json.dumps({"kernel": "dot", "grid": 1, "block": 4, "args": [
        {"buffer": "int32", "data": [1, 2]}, {"buffer": "int32", "data": [1, 2, 3, 4]},
        {"buffer": "int32", "size": 1}]}))
    p = cli("run", str(suite.get("dot").ptx_path), "--launch", str(spec))
    assert p.returncode != 0
    assert "out-of-bounds global read" in p.stderr and "lane 2" in p.stderr


def test_verify_prints_summary_line():
    p = cli("verify", "dot", "int_arith")
    assert p.returncode == 0
    assert p.stdout.strip().splitlines()[-1] == "verify interp: 2/2 exact"


def test_verify_reports_refused_programs_apart():
    """A program the machine does not take (TINY, the test fixture, lacks the units gelu_tanh's
    bundles need) is listed as refused, not as a wrong result; the exit status says which."""
    from qwengpu.machine.config import TINY
    from qwengpu.verify import verify
    report = verify("sim", names=["dot", "gelu_tanh"], progress=False, config=TINY)
    assert [r.name for r in report.refused] == ["gelu_tanh"] and not report.wrong
    assert report.refused[0].detail.startswith("AssemblerError") and report.exit_status == 3
    assert report.summary_line().startswith("verify sim: 1/2 exact (0 wrong, 1 refused by the machine: gelu_tanh)")
    assert report.to_json()["refused"] == ["gelu_tanh"]
    wrong = verify("sim", names=["dot"], progress=False, config=TINY)
    wrong.rows[0].exact = False
    assert wrong.exit_status == 1 and verify("interp", names=["dot"], progress=False).exit_status == 0


def test_verify_shares_a_model_engine_out_to_the_cores(monkeypatch):
    import os

    from qwengpu.cli import build_parser, default_jobs
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    parse = build_parser().parse_args
    assert default_jobs(parse(["verify", "--engine", "compact"])) == 3
    assert default_jobs(parse(["verify", "--engine", "compact", "dot", "gcd"])) == 2
    assert default_jobs(parse(["verify", "--engine", "compact", "--batch", "4"])) == 1
    assert default_jobs(parse(["verify", "--engine", "compact", "--model", "DIR"])) == 1
    assert default_jobs(parse(["verify"])) == 1                       # the interpreter: in this process


def test_demo_prints_result():
    p = cli("demo")
    assert p.returncode == 0 and "result 32" in p.stdout


def test_bench_counts_cpu_seconds():
    """`qwengpu bench` on a model engine: beside wall seconds, the CPU seconds of the same run and
    tokens per CPU-second, per kernel and in total (the honest figure on shared cores); `record`:
    the launch recorded by the lab too."""
    from qwengpu.bench import bench
    from qwengpu.lab import trace_launch
    from qwengpu.machine.config import TINY
    from qwengpu.runtime.checkpoint import compile_machine
    lines = []
    report = bench(engine="compact", names=["dot", "syncwarp"], repeat=1, out=lines.append,
                   machine=compile_machine(TINY, dense=False), record=trace_launch)
    rows, total = report["engines"]["compact"]["rows"], report["engines"]["compact"]["summary"]
    for r in rows:
        assert 0 < r["cpu_seconds"] and r["tokens_per_cpu_s"] == r["tokens"] / r["cpu_seconds"]
        # --record: the same launch recorded as the lab records it, timed beside the bare run
        assert r["record_seconds"] > 0 and r["record_passes_per_s"] == r["passes"] / r["record_seconds"]
        assert any(line.startswith(r["kernel"]) and "recorded (the lab)" in line for line in lines)
    assert total["cpu_seconds"] == sum(r["cpu_seconds"] for r in rows)
    assert total["tokens_per_cpu_s"] == total["tokens"] / total["cpu_seconds"]
    assert any(line.startswith("  CPU time compact:") and "tokens per CPU-second" in line for line in lines)


@pytest.mark.skipif(missing_tools() is not None, reason=f"fuzzer: {missing_tools()}")
def test_fuzz_runs_a_seed_and_writes_its_report(tmp_path):
    rep = tmp_path / "fuzz.json"
    p = cli("fuzz", "--seed", "5", "--count", "6", "--batch", "3", "--out", str(tmp_path / "failures"),
            "--json", str(rep))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "6 kernels" in p.stdout and "0 disagreement(s)" in p.stdout
    out = json.loads(rep.read_text())
    assert out["count"] == 6 and out["failures"] == []
    assert out["checked"]["interp"] == 6 and out["checked"]["sim"] + out["did_not_fit"]["sim"] == 6
