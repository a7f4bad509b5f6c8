"""`qwengpu splice-size`: a machine compiled for Qwen3.5-2B's shapes, measured before anything is
written: layers, widths, the text model's fp32 size, the widest residual boundaries."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from qwengpu.cli import main  # noqa: E402
from qwengpu.splice import fixtures  # noqa: E402
from qwengpu.splice.size import text_model_gib  # noqa: E402


def test_splice_size_reports_the_machine_in_the_2b_shapes(capsys):
    assert main(["splice-size", "--machine", "tiny", "--widest", "2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["gpu_layers"] == len(r["layer_types"]) and set(r["layer_types"]) <= {"linear_attention", "full_attention"}
    assert 2048 + 5 <= r["width"] <= r["compiled_width"]
    # the residual is as wide as its widest boundary: the profile's maximum fits the compiled width
    # after the base's dims, and the listed boundaries are the widest, largest variables first
    assert max(r["profile"]) <= r["compiled_width"] - 2048
    (s0, live0, top0), (s1, live1, _) = r["widest"]
    assert live0 == r["profile"][s0] == max(r["profile"]) and live1 <= live0
    assert [n for n, _ in top0] == sorted((n for n, _ in top0), reverse=True)
    # the size is the parameter count of those shapes: one more dim of W costs what a layer's rows do
    base = fixtures.qwen35_2b_text_config()
    assert r["text_gib"] == pytest.approx(text_model_gib(base, r["layer_types"], r["width"], r["gpu_tokens"]))
    assert text_model_gib(base, r["layer_types"], r["width"] + 1, r["gpu_tokens"]) > r["text_gib"]


def test_text_model_size_of_known_shapes():
    """COMPACT's published figure: 32 GDN + 12 attention GPU layers on the 2B, W 2,236, 42,546 GPU
    tokens is 18.2 GiB (docs/splice.md)."""
    kinds = ["linear_attention"] * 32 + ["full_attention"] * 12
    assert text_model_gib(fixtures.qwen35_2b_text_config(), kinds, 2236, 42546) == pytest.approx(18.22, abs=0.01)


def test_splice_size_set_refuses_what_is_no_geometry_before_compiling(capsys):
    """`--set FIELD=VALUE` changes a field of the geometry (`config_with`); a name that is no field,
    or a size the memory map cannot select by address bits, is refused before anything compiles."""
    assert main(["splice-size", "--machine", "tiny", "--set", "memory=1"]) != 0
    assert "'memory' is not a field of a machine's geometry" in capsys.readouterr().err
    assert main(["splice-size", "--machine", "tiny", "--set", "global_bytes=3000"]) != 0
    assert "global_bytes must be a power of two" in capsys.readouterr().err
