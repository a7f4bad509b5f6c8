"""The machine with the float unit (`COMPACT_FPU`) compiled into weights: float kernels run exactly on
the compact engine with the model's registers checked against the simulator after every pass, the
token stream identical to the simulator's, and far fewer tokens than the soft-float machine."""
from __future__ import annotations

import pytest
from prefill import same_run

from qwengpu import load_program, run, suite
from qwengpu.machine.config import COMPACT_FPU
from qwengpu.runtime.checkpoint import load_machine
from qwengpu.verify import verify_kernel


@pytest.fixture(scope="module")
def fpu_machine():
    """Built into the cache on first use, as `qwengpu verify --machine compact-fpu` does."""
    return load_machine(COMPACT_FPU, progress=False)


@pytest.mark.parametrize("name", ["saxpy", "f32_minmax_nan", "matvec", "struct_param"])
def test_float_kernels_are_exact_on_the_weights(fpu_machine, name):
    row = verify_kernel(suite.get(name), "compact", machine=fpu_machine, check_states=True)
    assert row.exact, row.detail
    assert "simulator" in row.checked
    assert row.margins["logit_gap"] > 15 and row.margins["form_noise"] < 0.1


def test_the_float_unit_costs_its_results_carries(fpu_machine):
    """saxpy's float work (a mul and an add per element) on the unit: under a fifth of the
    soft-float machine's tokens, on the weights."""
    k = suite.get("saxpy")
    module, spec = load_program(k.ptx()), k.spec()
    on_unit = run(module, spec, engine="compact", machine=fpu_machine, progress=False)
    soft = run(module, spec, engine="sim", config="compact")     # the soft-float machine
    assert on_unit.tokens * 5 < soft.tokens
    assert on_unit.buffers[-1].tobytes() == soft.buffers[-1].tobytes()


def test_the_lab_names_a_float_op_with_its_modifiers_and_registers(fpu_machine):
    """The inspector's bundle view: the unit's op with its PTX modifiers, its operands as the
    registers on the ALU ports it shares."""
    from qwengpu.lab.recorder import record_launch
    k = suite.get("saxpy")
    view = record_launch(k.ptx(), k.spec(), engine="compact", machine=fpu_machine)
    texts = [text for pc in range(len(view.image.bundles)) for unit, text in view.bundle(pc).ops if unit.endswith("fpu")]
    assert texts and any(t.startswith(("FMUL rn ", "FFMA rn ", "FADD rn ")) for t in texts), texts
    assert all("port" not in t and "←" in t for t in texts), texts
    # the unit's further lanes are passes of their own, labelled with the float instruction
    labels = [view.snapshot(t).label for t in range(len(view))]
    fpu = [lb for lb in labels if lb.kind == "float unit"]
    assert fpu and all(lb.lanes and lb.lanes[0] > 0 for lb in fpu)
    assert all(text.split()[0].startswith(("fma.", "mul.", "add.")) for lb in fpu for _, _, text in lb.ptx)
    # each of the unit's passes says its lane's result as a float, read from the model's registers:
    # saxpy's one unit op (an FFMA) gives each thread's output
    said = [lb.text.split("the float unit: ")[1] for lb in labels if "the float unit: " in lb.text]
    assert len(said) >= len(fpu) and all(" = " in t and " for lane " in t for t in said)
    values = [t.split(" = ")[1].split(" for lane ")[0] for t in said]
    out = run(load_program(k.ptx()), k.spec(), engine="sim").buffers[-1]
    assert values == [str(v) for v in out[:len(values)]] and len(values) == 10, (values, out)


def test_a_float_soak_runs_exactly_on_the_unit(fpu_machine):
    """`qwengpu soak --kernel float_soak --machine compact-fpu`, short: the logistic map's muls,
    FMAs, compares and max on the unit for the tokens asked, exact, margins in every window."""
    from qwengpu.soak import soak
    rep = soak(tokens=1000, window=500, machine=fpu_machine, progress=False, kernel="float_soak")
    assert rep.exact, rep.detail
    assert rep.tokens >= 1000 and rep.kernel == "float_soak"
    assert all(w["logit_gap"] > 8 and w["form_noise"] < 0.1 for w in rep.windows)


@pytest.mark.parametrize("name, block", [("saxpy", 7), ("i2f_convert", 16)])
def test_a_block_prefill_is_the_token_by_token_run_on_the_unit(fpu_machine, name, block):
    """The prefill path on the unit's weights: a launch's tokens (its `<fpu l>` passes, and for
    i2f_convert the unit's I2F, included) fed in blocks give bit for bit the logits, states and
    margins of the run token after token."""
    engine = fpu_machine.compact_engine()
    r = run(suite.get(name).ptx(), suite.get(name).spec(), engine="sim", config=COMPACT_FPU)
    tokens = r.extra["prompt"] + r.extra["generated"]
    assert any(t.startswith("<fpu") for t in tokens)
    same_run(engine, [fpu_machine.token_id(t) for t in tokens], block)
