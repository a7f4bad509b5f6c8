"""The course machine (`compact-fpu-course`, docs/memory_sizes.md) and the suite kernels that need
it: named by their oracles, run on it by `qwengpu verify` unless another machine is named, refused
by the built-in machine with its "does not fit" messages, exact on the interpreter and the
simulator here and on the compact engine (its weights, states checked) under --runslow."""
import pytest

from qwengpu import suite
from qwengpu.machine.config import BUILTIN, COMPACT_FPU_COURSE, config_with
from qwengpu.verify import verify

COURSE = [k.name for k in suite.kernels() if k.machine is not None]


def test_the_course_kernels_name_the_course_machine():
    assert sorted(COURSE) == ["histogram64_shared", "matmul_tile8x8", "scalar_prod_shared", "vector_add_512"]
    for name in COURSE:
        k = suite.get(name)
        assert k.machine == "compact-fpu-course" and "course" in k.tags
        assert k.spec().threads_per_block == 64


def test_verify_runs_each_course_kernel_on_its_machine_on_the_simulator():
    report = verify("sim", names=COURSE, progress=False)
    assert report.all_exact, [(r.name, r.detail) for r in report.rows if not r.exact]
    assert report.exit_status == 0


def test_the_built_in_machine_refuses_the_course_kernels_saying_what_does_not_fit():
    report = verify("sim", names=COURSE, progress=False, config=BUILTIN)
    assert [r.name for r in report.refused] == sorted(COURSE) and not report.wrong and report.exit_status == 3
    for r in report.rows:
        assert "a block of 64 threads needs more than the machine's 8 warps of 4 lanes" in r.detail, r.detail
    # with 64 threads but the built-in memory map: the memory that does not fit is named
    threads_only = config_with(BUILTIN, {"max_warps": 16})
    rows = {r.name: r for r in verify("sim", names=COURSE, progress=False, config=threads_only).rows}
    assert all(r.refused for r in rows.values())
    assert "the launch needs 6144 bytes of global memory; the machine has 2048" in rows["vector_add_512"].detail
    assert "the launch needs 3168 bytes of global memory; the machine has 2048" in rows["histogram64_shared"].detail
    assert "bytes of global memory; the machine has 2048" in rows["scalar_prod_shared"].detail
    assert "the launch needs 3072 bytes of global memory; the machine has 2048" in rows["matmul_tile8x8"].detail
    # and with room for its data, the histogram's 4 KiB of shared counters do not fit the built-in 1 KiB
    room = config_with(BUILTIN, {"max_warps": 16, "global_bytes": 4096})
    row, = verify("sim", names=["histogram64_shared"], progress=False, config=room).rows
    assert row.refused and "shared memory of 4096 bytes does not fit the machine's shared window" in row.detail


def test_the_cli_runs_a_course_kernel_on_its_machine_and_refuses_it_on_a_named_one():
    from qwengpu.cli import main
    assert main(["verify", "--engine", "sim", "vector_add_512"]) == 0
    assert main(["verify", "--engine", "sim", "--machine", "compact-fpu-course", "vector_add_512", "dot"]) == 0
    assert main(["verify", "--engine", "sim", "--machine", "compact-fpu", "vector_add_512"]) == 3


@pytest.fixture(scope="module")
def course_machine():
    """The course machine's compact engine, from the cache (built there on first use: ~1-2 minutes)."""
    from qwengpu.runtime.checkpoint import load_machine
    return load_machine(COMPACT_FPU_COURSE, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", COURSE)
def test_the_course_kernels_are_exact_on_the_course_machines_weights(course_machine, name):
    from qwengpu.verify import verify_kernel
    row = verify_kernel(suite.get(name), "compact", machine=course_machine, progress=False, check_states=True)
    assert row.exact, row.detail
    assert row.checked == ["oracle", "simulator"]


def test_verify_gives_a_model_engine_each_kernels_own_machine(monkeypatch):
    """No machine named: batches never mix machines, the course kernels run on the course machine
    (loaded once), the rest on the built-in one; a named machine runs them all."""
    import qwengpu.api as api
    import qwengpu.verify as verify_module
    asked, ran = [], []

    def fake_default_machine(engine="compact", progress=True, machine="compact-fpu"):
        asked.append(machine)
        return f"<{machine}>"

    def fake_run_many(programs, specs, engine, return_exceptions, machine, **kw):
        ran.append((len(programs), machine))
        return [RuntimeError("not run")] * len(programs)
    monkeypatch.setattr(api, "default_machine", fake_default_machine)
    monkeypatch.setattr(api, "run_many", fake_run_many)
    monkeypatch.setattr(verify_module, "_OWN_MACHINES", {})
    names = ["dot", "vector_add_512", "matmul_tile8x8", "saxpy", "histogram64_shared"]
    verify("compact", names=names, progress=False, batch_size=4)
    assert ran == [(1, "<compact-fpu>"), (2, "<compact-fpu-course>"), (1, "<compact-fpu>"), (1, "<compact-fpu-course>")]
    assert sorted(asked) == ["compact-fpu", "compact-fpu-course"]
    ran.clear()
    verify("compact", names=names, progress=False, batch_size=4, machine="<named>")
    assert ran == [(4, "<named>"), (1, "<named>")]
