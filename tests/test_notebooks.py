"""Every notebook runs top to bottom (`pytest --nbmake notebooks/`), as CI runs it: the README's
single test command collects tests/ only, so this test starts the notebook run."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.timeout(900)
def test_notebooks_run_top_to_bottom(tmp_path):
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07"]
    r = subprocess.run([sys.executable, "-m", "pytest", "--nbmake", "--nbmake-timeout=600", "-q",
                        "-p", "no:cacheprovider", "--rootdir", str(tmp_path), *map(str, NOTEBOOKS)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=880)
    tail = (r.stdout + r.stderr)[-6000:]
    assert r.returncode == 0, tail
    assert f"{len(NOTEBOOKS)} passed" in r.stdout, tail
