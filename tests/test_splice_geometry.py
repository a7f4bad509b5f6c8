"""The machine compiled stand-alone for a base's true layer geometry (`machine_for_geometry`,
`qwengpu verify --geometry`): the GPU layers a splice would add, run without the base, for bases
whose whole spliced checkpoint is too large to write or load here."""
import pytest

from qwengpu import run, suite
from qwengpu.cli import main
from qwengpu.machine.config import BUILTIN
from qwengpu.splice import fixtures
from qwengpu.splice.machine_splice import GEOMETRIES, fitting_text_config, machine_for_geometry
from qwengpu.verify import compare_buffers

V = 416


def test_a_machine_for_a_base_directory_takes_its_layer_shapes_and_runs_exactly(tmp_path):
    base = fixtures.write_random_base(tmp_path / "b", fitting_text_config("tiny", V, grouped=True), tokenizer="none")
    m = machine_for_geometry(str(base), "tiny")
    cfg = m.compiled.config
    assert (cfg.linear_num_key_heads, cfg.linear_key_head_dim, cfg.intermediate_size) == (4, 256, 2560)
    k = suite.get("dot")
    res = run(k.ptx(), k.spec(), engine="compact", machine=m, check_states=True, progress=False)
    assert compare_buffers(res.buffers, k.expected(), nan_equal=True) is None and res.extra["states_checked"] > 0


def test_verify_on_compact_for_a_base_geometry_from_the_command_line(tmp_path, capsys):
    base = fixtures.write_random_base(tmp_path / "b", fitting_text_config(BUILTIN.name, V), tokenizer="none")
    assert main(["verify", "dot", "--engine", "compact", "--check-states", "--geometry", str(base)]) == 0
    assert "verify compact: 1/1 exact" in capsys.readouterr().out


def test_geometry_errors_say_what_is_wrong(tmp_path, capsys):
    assert "qwen3.5-2b" in GEOMETRIES
    with pytest.raises(ValueError, match="unknown geometry 'qwen9'.*qwen3.5-2b"):
        machine_for_geometry("qwen9")
    assert main(["verify", "dot", "--engine", "compact", "--geometry", "qwen9"]) == 2
    assert "unknown geometry 'qwen9'" in capsys.readouterr().err
    assert main(["verify", "dot", "--geometry", "qwen3.5-2b"]) == 2             # interp has no machine
    assert "--geometry apply to the model engines" in capsys.readouterr().err
    assert main(["verify", "dot", "--engine", "compact", "--geometry", "qwen3.5-2b", "--model", str(tmp_path)]) == 2
    assert "give neither --geometry nor --machine" in capsys.readouterr().err
