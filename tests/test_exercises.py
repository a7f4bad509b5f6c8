"""The GPU exercises (`qwengpu_widgets.exercises`, `notebooks/exercises/`): every template fails its
check and says why, every solution passes it on the machine, the solution notebooks run under nbmake,
and the checks' messages name what a student needs (the element, the thread, the buffer, the line)."""
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from qwengpu_widgets.exercises import EXERCISES, ExerciseNotSolved, check, exercise, run_exercise_cell

ROOT = Path(__file__).resolve().parent.parent
STUDENT = sorted((ROOT / "notebooks" / "exercises").glob("[0-9][0-9]_*.ipynb"))
SOLUTIONS = sorted((ROOT / "notebooks" / "exercises" / "solutions").glob("[0-9][0-9]_*.ipynb"))


def _exercise_cells(paths) -> dict:
    """name -> the CUDA source of its `%%exercise NAME` cell, over the notebooks `paths`."""
    out = {}
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            first, _, body = cell.source.partition("\n")
            if cell.cell_type == "code" and first.startswith("%%exercise "):
                name = first.split()[1]
                assert name not in out, f"{name} twice"
                out[name] = body
    return out


TEMPLATES = _exercise_cells(STUDENT)
SOLVED = _exercise_cells(SOLUTIONS)


def test_every_exercise_has_a_template_and_a_solution():
    assert len(EXERCISES) >= 10
    assert set(TEMPLATES) == set(SOLVED) == set(EXERCISES)
    assert {e.topic for e in EXERCISES.values()} >= {"indexing", "guards", "shared memory", "reductions", "divergence",
                                                     "atomics", "shuffles"}
    assert [p.name for p in STUDENT] == [p.name for p in SOLUTIONS]


def test_notebooks_are_committed_without_outputs_and_alike():
    """No answers in the student notebooks' outputs; a solution notebook is its student notebook with
    the exercise cells filled in (the same cells, text and order otherwise)."""
    for student, solved in zip(STUDENT, SOLUTIONS):
        a, b = nbformat.read(student, as_version=4), nbformat.read(solved, as_version=4)
        for nb in (a, b):
            for c in nb.cells:
                assert c.cell_type != "code" or (not c.outputs and c.execution_count is None), (student.name, c.id)
        assert [c.cell_type for c in a.cells] == [c.cell_type for c in b.cells]
        for ca, cb in zip(a.cells, b.cells):
            if ca.source.startswith("%%exercise"):
                assert ca.source.splitlines()[0] == cb.source.splitlines()[0]
            elif ca is not a.cells[0] and ca is not a.cells[-1]:       # the title and the closing line differ
                assert ca.source == cb.source, (student.name, ca.id)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_template_fails_and_the_solution_passes(name):
    unsolved = check(name, TEMPLATES[name])
    assert not unsolved.passed and unsolved.problems, name
    assert "not yet" in repr(unsolved) and 'data-passed="0"' in unsolved._repr_html_()
    solved = check(name, SOLVED[name])
    assert solved.passed, f"{name}: {solved}"
    assert solved.tokens and all(t > 0 for t in solved.tokens)
    assert 'data-passed="1"' in solved._repr_html_()


@pytest.mark.timeout(300)
def test_solution_notebooks_run_under_nbmake(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pytest", "--nbmake", "--nbmake-timeout=200", "-q", "-p", "no:cacheprovider",
                        "--rootdir", str(tmp_path), *map(str, SOLUTIONS)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=280)
    assert r.returncode == 0 and f"{len(SOLUTIONS)} passed" in r.stdout, (r.stdout + r.stderr)[-4000:]


def test_the_checks_say_what_is_wrong():
    # the guard template: the thread past the end, the buffer, the element and the line
    v = check("guard", TEMPLATES["guard"])
    assert "thread threadIdx.x = 5" in v.problems[0] and "`a[5]`, past the end of `a` (5 elements" in v.problems[0]
    assert "at line 3 of the kernel" in v.problems[0] and "if (i < n)" in v.problems[0]
    # a race between warps: the wrong elements, with the input and the launch
    v = check("shared_reverse", TEMPLATES["shared_reverse"])
    assert any("out[0] = 0 (expected 8)" in p and "never written?" in p for p in v.problems), v.problems
    assert any("__syncthreads()" in p for p in v.problems)
    # divergence, on the interpreter's SIMT stack, at the branch's line
    v = check("uniform_branches", TEMPLATES["uniform_branches"])
    assert len(v.problems) == 1 and "warp 0 of block 0 diverges at line 4" in v.problems[0], v.problems
    # requirements on the code
    v = check("warp_sum", SOLVED["warp_sum"].replace("__shfl_down_sync(0xf, v, offset)", "0"))
    assert any("shuffle" in p for p in v.problems)
    # nvcc's error at its line (of the cell under %%exercise: the magic's line is line 1)
    typo = SOLVED["add_ten"].replace("a[i] + 10;", "a[i] + 10")
    assert "line 4: expected a \";\"" in check("add_ten", typo).problems[0]
    assert "line 5: expected a \";\"" in exercise("add_ten").check(typo, first_line=2).problems[0]
    # a launch that does not end; the wrong parameters; two kernels
    endless = "__global__ void add_ten(const int *a, int *out) { while (a[0] < 100) out[threadIdx.x] += 1; }"
    assert "did not end within" in check("add_ten", endless).problems[0]
    assert "takes 1 parameter(s)" in check("add_ten", "__global__ void add_ten(int *out) { }").problems[0]
    assert "exactly one kernel" in check("add_ten", SOLVED["add_ten"] + "\n__global__ void k() { }").problems[0]
    with pytest.raises(KeyError, match="no exercise 'nope'"):
        exercise("nope")


def test_the_cell_magic_raises_without_a_traceback():
    with pytest.raises(ExerciseNotSolved) as e:
        run_exercise_cell("add_ten", TEMPLATES["add_ten"])
    lines = e.value._render_traceback_()
    assert "not yet" in lines[0] and "expected 10" in lines[1]
    assert run_exercise_cell("add_ten --engine interp", SOLVED["add_ten"]).passed


def test_a_check_runs_in_the_model_too():
    """`engine="compact"`: the same launches through the model's forward passes (the built-in machine)."""
    v = check("warp_sum", SOLVED["warp_sum"], engine="compact")
    assert v.passed and v.engine == "compact" and "(compact: " in repr(v)
    assert v.tokens == check("warp_sum", SOLVED["warp_sum"]).tokens      # the simulator's token count, exactly
    assert not check("histogram", TEMPLATES["histogram"], engine="compact").passed
