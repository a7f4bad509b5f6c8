"""numba's cache (the compact engine's compiled functions) goes under the qwengpu cache folder, not
next to the source: importing qwengpu sets `NUMBA_CACHE_DIR` unless the user did."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: a cached numba function in a module of its own folder (like qwengpu/engines/kernels.py), compiled
#: after qwengpu was imported (`numba_first`: numba imported before qwengpu)
CHILD = """
import sys
if sys.argv[1] == "numba_first":
    import numba
import qwengpu
sys.path.insert(0, sys.argv[2])
import cached_twice
print(cached_twice.twice(21))
"""
MODULE = """
from numba import njit

@njit(cache=True)
def twice(x):
    return 2 * x
"""


def _run(tmp_path, order, **env):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "cached_twice.py").write_text(MODULE)
    base = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    r = subprocess.run([sys.executable, "-c", CHILD, order, str(src)], capture_output=True, text=True, timeout=120,
                       env={**base, "PYTHONPATH": str(ROOT), **env})
    assert r.returncode == 0 and r.stdout.strip() == "42", r.stderr[-2000:]
    return src


def _cache_files(folder: Path) -> list:
    return [p for p in folder.rglob("*") if p.suffix in (".nbi", ".nbc")]


def test_numba_caches_under_the_qwengpu_cache_folder(tmp_path):
    for order in ("qwengpu_first", "numba_first"):
        cache = tmp_path / f"cache-{order}"
        src = _run(tmp_path, order, QWENGPU_CACHE=str(cache))
        assert _cache_files(cache / "numba"), order
        assert not _cache_files(src), order                   # nothing beside the source


def test_a_numba_cache_folder_of_the_users_own_is_kept(tmp_path):
    mine = tmp_path / "mine"
    _run(tmp_path, "qwengpu_first", QWENGPU_CACHE=str(tmp_path / "cache"), NUMBA_CACHE_DIR=str(mine))
    assert _cache_files(mine) and not (tmp_path / "cache" / "numba").exists()
