"""`qwengpu bench-ops`: tokens and bundles per warp operation, from dependent chains."""
import json
import shutil

import pytest

from qwengpu import opbench
from qwengpu.cli import main


def test_cli_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "ops.json"
    assert main(["bench-ops", "int_mad", "f32_add", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tokens/op" in text and "f32 add" in text and "int a*b+c" in text
    rows = json.loads(out.read_text())["rows"]
    assert [r["op"] for r in rows] == ["int a*b+c", "f32 add"]
    for r in rows:
        assert r["exact"] and r["engine"] == "sim" and r["chain"] == opbench.CHAIN
        # every result changes bytes of all 4 lanes: at least a bundle and some carries per op
        assert r["bundles_per_op"] >= 1 and r["carries_per_op"] >= 4
        assert r["tokens_per_op"] == pytest.approx((r["tokens_chain"] - r["tokens_empty"]) / r["chain"])


def test_a_row_the_rom_cannot_hold_is_reported_with_the_machine_reason():
    row = opbench.measure(opbench.op_named("f32_exp_mul"))
    if row["refused"]:
        assert "ROM" in row["refused"] and "bundles" in row["refused"]
    else:
        assert row["exact"] and row["tokens_per_op"] > 0


def test_every_row_has_two_kernels_in_the_shipped_ptx():
    module = opbench.chain_module()
    names = set(module.kernels) if isinstance(module.kernels, dict) else {k.name for k in module.kernels}
    for op in opbench.OPS:
        assert {op.kernel(0), op.kernel(opbench.CHAIN)} <= names


def test_unknown_operation_and_bad_chain_are_refused(capsys):
    assert main(["bench-ops", "f32_bogus"]) == 2
    assert "no operation 'f32_bogus'" in capsys.readouterr().err
    assert main(["bench-ops", "f32_add", "--chain", "0"]) == 2
    assert main(["bench-ops", "--engine", "interp"]) == 2


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH: cannot compare the shipped PTX")
def test_shipped_ptx_is_nvccs_output_of_the_generated_source():
    assert opbench.regenerate(check=True), "run `python -m qwengpu.opbench --regenerate`"


def test_a_row_may_keep_its_loop_and_take_d_as_a_kernel_parameter():
    """`f32 div loop`: the chain stays a loop (`#pragma unroll 1`) whose divisor d is a kernel
    parameter; its division takes the short path in every iteration (the divisor's part computed
    before the loop, `loopdiv`), under the issue's bound with the loop's own counter and branch."""
    op = opbench.op_named("f32_div_loop")
    source = opbench.cuda_source()
    kernel = source[source.index(f"void {op.kernel(opbench.CHAIN)}("):]
    kernel = kernel[:kernel.index("\n}")]
    assert "float *out, float d)" in kernel and "#pragma unroll 1\n" in kernel and "d = in[" not in kernel
    assert opbench.launch_spec(op)["args"][2] == {"scalar": "float32", "value": op.inputs[3]}
    row = opbench.measure(op)
    assert row["exact"] and row["tokens_per_op"] <= op.target, row
