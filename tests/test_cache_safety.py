"""Nothing lost, caches never trusted wrongly (issue 23): `qwengpu build` and `qwengpu compile`
never replace a user's files unasked; concurrent first launches share one build of the machine; a
build killed mid-way leaves nothing a later run trusts; a truncated or altered build or PTX cache
file is named and rebuilt (or refused, for a user's folder); the PTX cache key covers every header.

The builds are of the small TINY machine, compact engine only: one into a user's folder (a module
fixture, copied for the corruption tests), one killed mid-way and one by three processes at once,
one after a corrupted cache entry.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import qwengpu
from qwengpu.cli import main
from qwengpu.cuda import CudaCompileError
from qwengpu.machine.config import TINY
from qwengpu.runtime.checkpoint import (MACHINE_FILE, CorruptBuild, cached_build_path, engine_file, load_machine,
                                        open_machine, verify_build)

REPO = Path(__file__).resolve().parent.parent
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed on this machine")

#: a child process: load the TINY machine from $QWENGPU_CACHE (building it when missing) and run
#: the suite's dot on its compact engine; prints the result
LAUNCH = """
import qwengpu
from qwengpu import suite
from qwengpu.machine.config import TINY
from qwengpu.runtime.checkpoint import load_machine
k = suite.get("dot")
machine = load_machine(TINY, progress=True)
res = qwengpu.run(k.ptx(), k.spec(), engine="compact", machine=machine, progress=False)
print("RESULT", int(res.buffers[2][0]), int(k.expected()[2][0]))
"""


def _launch(cache: Path) -> subprocess.Popen:
    env = {**os.environ, "QWENGPU_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", LAUNCH], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- item 1: `build --out` and `compile -o` lose nothing ---------------------------------------------------------


def _user_folder(tmp_path) -> tuple[Path, dict]:
    """A user's non-empty folder `out`, and a `out.partial` of theirs beside it."""
    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "thesis.tex").write_text("three years of work")
    partial = tmp_path / "out.partial"
    partial.mkdir()
    (partial / "draft.txt").write_text("mine too")
    return out, {"out": _files(out), "partial": _files(partial)}


@pytest.fixture(scope="module")
def built(module_tmp):
    """A TINY build (compact engine only) made by `qwengpu build --overwrite` over a user's folder,
    with the folder's and its `.partial` neighbour's contents before."""
    out, before = _user_folder(module_tmp("user"))
    rc = main(["build", "--target", "tiny", "--compact-only", "--out", str(out), "--overwrite", "--quiet"])
    return out, before, rc


def test_build_refuses_a_users_non_empty_folder(tmp_path, capsys):
    out, before = _user_folder(tmp_path)
    assert main(["build", "--target", "tiny", "--compact-only", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(out) in err and "--overwrite" in err and "no machine build" in err
    assert _files(out) == before["out"] and _files(tmp_path / "out.partial") == before["partial"]


def test_build_refuses_a_file_and_the_current_folder_even_with_overwrite(tmp_path, monkeypatch, capsys):
    f = tmp_path / "model.bin"
    f.write_text("x")
    assert main(["build", "--target", "tiny", "--compact-only", "--out", str(f), "--overwrite"]) == 2
    assert "is a file" in capsys.readouterr().err and f.read_text() == "x"
    out, before = _user_folder(tmp_path)
    monkeypatch.chdir(out / "notes")
    assert main(["build", "--target", "tiny", "--compact-only", "--out", str(out), "--overwrite"]) == 2
    assert "holds the current directory" in capsys.readouterr().err and _files(out) == before["out"]


def test_build_overwrite_replaces_the_folder_but_not_its_partial_neighbour(built):
    out, before, rc = built
    assert rc == 0
    assert (out / MACHINE_FILE).is_file() and not (out / "notes").exists()
    assert _files(out.parent / "out.partial") == before["partial"]             # not ours: untouched
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".out.partial")] == []
    assert verify_build(out)["files"][engine_file()]["size"] == (out / engine_file()).stat().st_size


@needs_nvcc
def test_compile_never_writes_over_its_input_or_a_foreign_file(tmp_path, capsys):
    src = tmp_path / "k.cu"
    text = "__global__ void twice(int *x) { x[threadIdx.x] *= 2; }\n"
    src.write_text(text)
    assert main(["compile", str(src), "-o", str(src)]) == 2
    assert "is the input file" in capsys.readouterr().err and src.read_text() == text
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me")
    assert main(["compile", str(src), "-o", str(notes)]) == 2
    assert "--overwrite" in capsys.readouterr().err and notes.read_text() == "keep me"
    assert main(["compile", str(src), "-o", str(notes), "--overwrite"]) == 0
    assert ".entry _Z5twicePi" in notes.read_text()
    old = tmp_path / "k.ptx"
    old.write_text("stale")
    assert main(["compile", str(src), "-o", str(old)]) == 0                   # a .ptx is recompiled over
    assert ".entry _Z5twicePi" in old.read_text()


# -- item 3: the PTX cache sees headers; nvcc runs in the file's own folder ---------------------------------------


@needs_nvcc
def test_a_changed_header_recompiles_and_relative_includes_resolve(tmp_path, monkeypatch):
    monkeypatch.setenv("QWENGPU_CACHE", str(tmp_path / "cache"))
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "factor.h").write_text("#define FACTOR 3\n")
    src = tmp_path / "scale.cu"
    src.write_text('#include "inc/factor.h"\n__global__ void scale(int *x) { x[threadIdx.x] *= FACTOR; }\n')
    launch = {"grid": 1, "block": 4, "args": [{"buffer": "int32", "data": [1, 2, 3, 4]}]}
    assert qwengpu.run(str(src), launch).buffers[0].tolist() == [3, 6, 9, 12]
    (tmp_path / "inc" / "factor.h").write_text("#define FACTOR 5\n")            # the .cu unchanged
    assert qwengpu.run(str(src), launch).buffers[0].tolist() == [5, 10, 15, 20]
    assert len(list((tmp_path / "cache" / "ptx").glob("*.ptx"))) == 2


@needs_nvcc
def test_nvcc_diagnostics_name_the_users_file(tmp_path, monkeypatch):
    monkeypatch.setenv("QWENGPU_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "broken.cu"
    src.write_text("__global__ void broken(int *x) {\n  x[0] = ;\n}\n")
    with pytest.raises(CudaCompileError) as e:
        qwengpu.compile_cuda(src)
    assert f"{src}(2): error" in str(e.value) and "kernel.cu" not in str(e.value) and "/tmp/qwengpu-nvcc" not in str(e.value)
    with pytest.raises(CudaCompileError) as e:                                   # text: no temporary path either
        qwengpu.compile_cuda("__global__ void broken(int *x) {\n  x[0] = ;\n}\n")
    assert "<CUDA source>(2): error" in str(e.value) and "kernel.cu" not in str(e.value)


@needs_nvcc
def test_a_latin1_source_compiles(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("QWENGPU_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "latin.cu"
    src.write_bytes("// d\xe9calage: multiplie par deux\n__global__ void twice(int *x) { x[threadIdx.x] *= 2; }\n"
                    .encode("latin-1"))
    assert main(["compile", str(src), "-o", str(tmp_path / "latin.ptx")]) == 0, capsys.readouterr().err
    assert ".entry _Z5twicePi" in (tmp_path / "latin.ptx").read_text()


@needs_nvcc
def test_a_truncated_ptx_cache_entry_is_recompiled(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("QWENGPU_CACHE", str(tmp_path / "cache"))
    src = "__global__ void twice(int *x) { x[threadIdx.x] *= 2; }\n"
    ptx = qwengpu.compile_cuda(src)
    (entry,) = (tmp_path / "cache" / "ptx").glob("*.ptx")
    entry.write_bytes(entry.read_bytes()[:len(entry.read_bytes()) // 2])
    assert qwengpu.compile_cuda(src) == ptx
    assert f"{entry} is corrupt" in capsys.readouterr().err
    assert qwengpu.compile_cuda(src) == ptx and capsys.readouterr().err == ""    # rewritten whole


# -- item 6: a corrupt build is named (a user's folder) ---------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated engine weights", "empty tokenizer", "truncated metadata",
                                    "unreadable weights of a build without records"])
def test_a_corrupt_build_is_named(built, tmp_path, damage):
    out = tmp_path / "machine"
    shutil.copytree(built[0], out)
    meta = out / MACHINE_FILE
    if damage == "truncated engine weights":
        bad = out / engine_file()
        bad.write_bytes(bad.read_bytes()[:1000])
    elif damage == "empty tokenizer":
        bad = out / "tokenizer.json"
        bad.write_bytes(b"")
    elif damage == "truncated metadata":
        bad = meta
        bad.write_bytes(meta.read_bytes()[:5000])
    else:                          # metadata as qwengpu wrote it before builds recorded their files
        bad = out / engine_file()
        meta.write_text(json.dumps({k: v for k, v in json.loads(meta.read_text()).items() if k != "files"}))
        bad.write_bytes(b"")
    with pytest.raises(CorruptBuild) as e:
        load_machine(TINY, path=out, progress=False).compact_engine()
    assert e.value.file == bad and str(bad) in str(e.value)
    assert f"--out {out}" in str(e.value)                        # and how to rebuild it


# -- items 2 and 6: concurrent first launches, a killed build, a corrupt cache ----------------------------------


def test_concurrent_first_launches_share_one_build_after_a_killed_one(built, tmp_path):
    # the compact engine's numba code compiled (and cached on disk) here first: the children then
    # load it instead of compiling it three times at once (minutes on 2 cores in a fresh checkout)
    from qwengpu import suite
    k = suite.get("dot")
    qwengpu.run(k.ptx(), k.spec(), engine="compact", machine=open_machine(built[0]), progress=False)
    cache = tmp_path / "cache"
    final = cached_build_path(TINY)
    final = cache / final.name
    killed = _launch(cache)
    deadline = time.monotonic() + 240
    while not list(cache.glob(f"*{final.name}.partial*")):                # writing its files: kill it there
        assert killed.poll() is None and time.monotonic() < deadline, killed.communicate()
        time.sleep(0.005)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    assert not final.exists()                                            # nothing a later run could trust
    procs = [_launch(cache) for _ in range(3)]
    outs = [p.communicate(timeout=400) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        result = [line.split() for line in out.splitlines() if line.startswith("RESULT")]
        assert result and result[0][1] == result[0][2], out
    assert sum("building machine tiny" in err for _, err in outs) == 1         # one build, the others waited
    verify_build(final)
    assert sorted(p.name for p in cache.iterdir() if p.name.startswith(".")) == [f".{final.name}.lock"]


def test_a_corrupt_cached_build_is_named_and_rebuilt(built, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("QWENGPU_CACHE", str(tmp_path))
    final = cached_build_path(TINY)
    shutil.copytree(built[0], final)
    assert load_machine(TINY, progress=False).path == final          # the copy is a valid cached build
    weights = final / engine_file()
    weights.write_bytes(weights.read_bytes()[:-1])
    m = load_machine(TINY, progress=False)
    err = capsys.readouterr().err
    assert f"{weights}: " in err and "rebuilding" in err
    assert m.path == final and verify_build(final) and open_machine(final).records == m.records
