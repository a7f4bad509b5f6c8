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


ALL_NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))


def test_notebooks_are_in_the_form_jupyterlab_saves():
    """Opened and saved in JupyterLab (or autosaved), a committed notebook stays as it is: the kernelspec
    is ipykernel's and no number changes on its way through JavaScript (the browser test opens and
    saves them for real)."""
    from qwengpu.lab.notebook_form import saved_form
    off = [str(p.relative_to(ROOT)) for p in ALL_NOTEBOOKS if saved_form(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")]
    assert not off, f"rewrite them: python -m qwengpu.lab.notebook_form {' '.join(off)}"
    assert not [p for p in ALL_NOTEBOOKS if ".ipynb_checkpoints" in p.parts]


def test_saved_form_writes_numbers_as_javascript_returns_them():
    import json

    from qwengpu.lab.notebook_form import KERNELSPEC, saved_form
    nb = {"cells": [], "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                       "widgets": {"v": [1.0, -0.0, 2.5, 1e21, 5e-05, 16.0, 3]}}}
    out = json.loads(saved_form(json.dumps(nb)))
    assert out["metadata"]["kernelspec"] == KERNELSPEC
    v = out["metadata"]["widgets"]["v"]
    assert v == [1, 0, 2.5, 1e21, 5e-05, 16, 3]
    assert [type(x) for x in v] == [int, int, float, float, float, int, int]
    assert saved_form(saved_form(json.dumps(nb))) == saved_form(json.dumps(nb))


def test_the_classroom_notebooks_keep_their_answers_to_themselves():
    """05 and the student exercise notebooks are committed without outputs, and 05's prediction is blank."""
    import nbformat
    for path in [ROOT / "notebooks" / "05_classroom.ipynb", *sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb"))]:
        nb = nbformat.read(path, as_version=4)
        assert not [c.id for c in nb.cells if c.cell_type == "code" and (c.outputs or c.execution_count)], path.name
        assert "widgets" not in nb.metadata, path.name
    prediction = [c.source for c in nbformat.read(ROOT / "notebooks" / "05_classroom.ipynb", as_version=4).cells
                  if "my_x =" in c.source and c.cell_type == "code"][0]
    assert "my_x = None" in prediction and "my_diverges = None" in prediction


def test_the_notebooks_with_the_inspector_carry_no_stale_widget_outputs():
    """01, 03, 06 and 07 open the inspector: committed without outputs or saved widget state (a saved
    widget output is the static HTML of the widget version that ran it)."""
    import nbformat
    for name in ("01_quickstart", "03_simt_divergence", "06_inside_the_model", "07_spliced_model"):
        nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        assert "Inspector" in "".join(c.source for c in nb.cells), name
        assert not [c.id for c in nb.cells if c.cell_type == "code" and (c.outputs or c.execution_count)], name
        assert "widgets" not in nb.metadata, name
