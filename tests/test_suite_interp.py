"""The reference interpreter is exact on every suite kernel (against its NumPy oracle)."""
import pytest

from qwengpu import suite
from qwengpu.verify import verify_kernel


@pytest.mark.parametrize("name", [k.name for k in suite.kernels()])
def test_interpreter_matches_oracle(name):
    row = verify_kernel(suite.get(name), engine="interp")
    assert row.exact, row.detail


def test_trace_records_every_step():
    k = suite.get("dot")
    from qwengpu import run
    res = run(k.ptx(), k.spec(), trace=True)
    assert len(res.trace.steps) == res.steps
    atom = [s for s in res.trace.steps if s.text.startswith("atom")]
    assert len(atom) == 1 and len(atom[0].mem_writes) == 4
