"""Random straight-line and branching programs (hypothesis): the machine's simulator and the model's
compact engine against the reference interpreter, bit for bit, with the model's registers checked
against the simulator's after every pass.

Four programs run on the model (each takes a few seconds; `pytest --soak N` runs 4N); the simulator
runs ten times as many. With `--runslow`, random programs also run on COMPACT compiled for
Qwen3.5-2B's true layer geometry (`machine_for_geometry`: a compile of a few minutes).
"""
import functools

import numpy as np
import pytest
import sizes
from hypothesis import HealthCheck, given, settings
from randprog import inputs, launch, programs

from qwengpu import run
from qwengpu.machine.config import BUILTIN
from qwengpu.runtime.checkpoint import load_machine

MODEL_EXAMPLES = sizes.scaled(4)
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]


@functools.cache
def compact():
    """The built-in machine (not a fixture: hypothesis would print its 37k-token vocabulary)."""
    return load_machine(BUILTIN, progress=False)


@functools.cache
def compact_2b():
    """COMPACT in Qwen3.5-2B's layer geometry: the GPU layers its splice adds, run on their own."""
    from qwengpu.splice.machine_splice import machine_for_geometry
    return machine_for_geometry("qwen3.5-2b")


@settings(max_examples=10 * MODEL_EXAMPLES, deadline=None, suppress_health_check=SLOW)
@given(prog=programs(), data=inputs)
def test_random_programs_on_the_simulator(prog, data):
    ptx, body = prog
    want = run(ptx, launch(data)).buffers[-1]
    got = run(ptx, launch(data), engine="sim").buffers[-1]
    assert np.array_equal(want, got), "\n".join(body)


@settings(max_examples=MODEL_EXAMPLES, deadline=None, suppress_health_check=SLOW)
@given(prog=programs(size=4), data=inputs)
def test_random_programs_on_the_model(prog, data):
    check_on_model(prog, data, compact())


def check_on_model(prog, data, machine):
    """The compact engine on `machine` against the simulator's tokens, the interpreter's buffers
    and, after every pass, the simulator's registers."""
    ptx, body = prog
    want = run(ptx, launch(data)).buffers[-1]
    sim = run(ptx, launch(data), engine="sim")
    res = run(ptx, launch(data), engine="compact", machine=machine, check_states=True, progress=False)
    assert res.extra["generated"] == sim.extra["generated"], "\n".join(body)
    assert np.array_equal(want, res.buffers[-1]), "\n".join(body)
    assert res.extra["states_checked"] == sum(t.startswith("<exec") for t in sim.extra["generated"])


@settings(max_examples=MODEL_EXAMPLES, deadline=None, suppress_health_check=SLOW)
@given(prog=programs(size=8, branches=False), data=inputs)
def test_random_straight_line_programs_on_the_model(prog, data):
    ptx, body = prog
    want = run(ptx, launch(data)).buffers[-1]
    res = run(ptx, launch(data), engine="compact", machine=compact(), check_states=True, progress=False)
    assert np.array_equal(want, res.buffers[-1]), "\n".join(body)


@pytest.mark.slow
@settings(max_examples=4 * MODEL_EXAMPLES, deadline=None, suppress_health_check=SLOW)
@given(prog=programs(size=6), data=inputs)
def test_random_programs_in_the_2b_geometry(prog, data):
    check_on_model(prog, data, compact_2b())
