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

from qwengpu.cli import main
from qwengpu.machine.config import TINY
from qwengpu.runtime.checkpoint import (MACHINE_FILE, CorruptBuild, cached_build_path, fast_file, load_machine,
                                        open_machine, verify_build)

REPO = Path(__file__).resolve().parent.parent

#: a child process: load the TINY machine from $QWENGPU_CACHE (building it when missing) and run
#: the suite's dot on its compact engine; prints the result
LAUNCH = """
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
    assert verify_build(out)["files"][fast_file()]["size"] == (out / fast_file()).stat().st_size


# -- item 6: a corrupt build is named (a user's folder) ---------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated engine weights", "empty tokenizer", "truncated metadata",
                                    "unreadable weights of a build without records"])
def test_a_corrupt_build_is_named(built, tmp_path, damage):
    out = tmp_path / "machine"
    shutil.copytree(built[0], out)
    meta = out / MACHINE_FILE
    if damage == "truncated engine weights":
        bad = out / fast_file()
        bad.write_bytes(bad.read_bytes()[:1000])
    elif damage == "empty tokenizer":
        bad = out / "tokenizer.json"
        bad.write_bytes(b"")
    elif damage == "truncated metadata":
        bad = meta
        bad.write_bytes(meta.read_bytes()[:5000])
    else:                          # metadata as qwengpu wrote it before builds recorded their files
        bad = out / fast_file()
        meta.write_text(json.dumps({k: v for k, v in json.loads(meta.read_text()).items() if k != "files"}))
        bad.write_bytes(b"")
    with pytest.raises(CorruptBuild) as e:
        load_machine(TINY, path=out, progress=False).fast()
    assert e.value.file == bad and str(bad) in str(e.value)
    assert f"--out {out}" in str(e.value)                        # and how to rebuild it


# -- items 2 and 6: concurrent first launches, a killed build, a corrupt cache ----------------------------------


def test_concurrent_first_launches_share_one_build_after_a_killed_one(tmp_path):
    cache = tmp_path / "cache"
    final = cached_build_path(TINY)
    final = cache / final.name
    killed = _launch(cache)
    deadline = time.monotonic() + 240
    while not list(cache.glob(f".{final.name}.partial-*")):               # writing its files: kill it there
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
    weights = final / fast_file()
    weights.write_bytes(weights.read_bytes()[:-1])
    m = load_machine(TINY, progress=False)
    err = capsys.readouterr().err
    assert f"{weights}: " in err and "rebuilding" in err
    assert m.path == final and verify_build(final) and open_machine(final).records == m.records
