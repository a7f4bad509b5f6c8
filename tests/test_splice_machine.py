"""The real machine (the SIMT GPU) spliced into a Qwen3.5 checkpoint.

Two small random bases get the TINY machine spliced in by the command line (`qwengpu build --base
.. --machine tiny`, in a child process: the compile's memory is not this process's):

- text layout, in Qwen3.5's own GDN shape class (`fitting_text_config()`: one value head per key
  head, key heads of 128 dims as in Qwen3.5-2B, so the machine's 256-slot memories are banked and
  spread over layers);
- multimodal layout, with 18 value heads per key head (`fitting_text_config(grouped=True)`).

Launches run through the spliced checkpoints: the stock transformers forward (decode after a text
prefix, and the chunked prefill path) and the compact engine on its GPU layers, against the token
simulator and the kernels' oracles. TINY compiled for Qwen3.5-2B's true layer geometry runs a
launch exactly; a geometry that cannot hold the machine is refused with what it lacks.
"""
import gc
import json
import os
import subprocess
import sys

import pytest
import torch
import transformers  # noqa: F401

from qwengpu import run, suite  # noqa: E402
from qwengpu.cli import main  # noqa: E402
from qwengpu.splice import SpliceError, fixtures, read_meta, target_for_base  # noqa: E402
from qwengpu.splice.machine_splice import compile_for_base, fitting_text_config, machine_fit, open_spliced_machine  # noqa: E402
from qwengpu.verify import compare_buffers  # noqa: E402

V = 416
PREFIX = 40
MAX = 200          # generated tokens at most (dot: 23): a wrong machine fails fast instead of looping


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: on a busy 2-core box two threads contend with other processes and a
    stock forward pass varies 10x (measured: decode 0.25 s/token on one thread, 1-4 s on two)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _build(base, out):
    """`qwengpu build --base BASE --out OUT --machine tiny` in a child process."""
    r = subprocess.run([sys.executable, "-m", "qwengpu", "build", "--base", str(base), "--out", str(out),
                        "--machine", "tiny", "--quiet", "--json"], capture_output=True, text=True,
                       env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def spliced(module_tmp):
    """Text layout (Qwen3_5ForCausalLM), tied embeddings, fp32, small embeddings (RMS 3e-3)."""
    root = module_tmp("splice_machine")
    base = fixtures.write_random_base(root / "base", fitting_text_config("tiny", V), tied=True,
                                      final_norm_mean=60.0, embed_std=0.003)
    report = _build(base, root / "out")
    return base, root / "out", report, open_spliced_machine(root / "out")


@pytest.fixture(scope="module")
def spliced_mm(module_tmp, spliced):
    """Multimodal layout (Qwen3_5ForConditionalGeneration): bf16 on disk, untied, vision tower, MTP."""
    spliced[3]._model = None                 # one dense model in memory at a time
    gc.collect()
    root = module_tmp("splice_machine_mm")
    base = fixtures.write_random_base(root / "base", fitting_text_config("tiny", V, grouped=True),
                                      fixtures.tiny_vision_config(),
                                      tied=False, head_std=0.3, embed_std=0.003, dtype="bfloat16")
    report = _build(base, root / "out")
    return base, root / "out", report, open_spliced_machine(root / "out")


def _dot():
    k = suite.get("dot")
    return k, k.ptx(), k.spec()


def _sim(machine, name="dot"):
    k = suite.get(name)
    return run(k.ptx(), k.spec(), engine="sim", config=machine.config).extra["generated"]


def _text_ids(base, n):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(base))(fixtures.corpus_text()).input_ids[:n]


def test_qwen35_2b_geometry_holds_the_machine_and_runs_a_launch_exactly():
    """TINY compiled for Qwen3.5-2B's true layer geometry (16 GDN key heads and 16 value heads of
    128, MLP 6144, 8 attention heads of 256): its memories take the key heads `machine_fit`
    counts, banked and spread over GDN layers; the dot launch is exact on the compact engine,
    states checked."""
    from qwengpu.compiler.compiling import _group_dk
    from qwengpu.compiler.placement import key_heads
    from qwengpu.splice.machine_splice import compile_for_base_geometry
    fit = machine_fit(fixtures.qwen35_2b_text_config(), "tiny")
    assert fit.fits, fit.problems
    m = compile_for_base_geometry(fixtures.qwen35_2b_text_config(), "tiny")   # stand-alone: no base features
    heads = sum(key_heads(mem, *_group_dk(m.compiled.target)) for mem in m.compiled.program.memories)
    assert fit.needs()["memory_key_heads"] == heads
    cfg = m.compiled.config
    assert (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
            cfg.linear_value_head_dim, cfg.intermediate_size) == (16, 16, 128, 128, 6144)
    # 256-slot memories on key heads of 128 are banked; the register staging copy (32 key heads)
    # is spread over two layers
    assert m.placements["mem"].pieces is not None and len(m.placements["reg.stage"].layers) > 1
    k, ptx, spec = _dot()
    r = run(ptx, spec, engine="compact", machine=m, progress=False, max_steps=MAX, check_states=True)
    assert compare_buffers(r.buffers, k.expected(), nan_equal=True) is None
    assert r.extra["generated"] == _sim(m) and r.buffers[2][0] == 32
    assert r.extra["min_logit_gap"] > 8 and r.extra["memory_margin"] > 8


def test_a_geometry_that_cannot_hold_the_machine_is_refused(tmp_path, capsys):
    cfg = fixtures.tiny_text_config(V)
    cfg.update(linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=96, linear_value_head_dim=1)
    fit = machine_fit(cfg, "tiny")
    msg = fit.message()
    assert "linear_value_head_dim 1 < 2" in msg and "linear_key_head_dim 96 is not a power of two" in msg
    assert "intermediate_size 128 < 1760" in msg
    with pytest.raises(SpliceError, match="does not fit"):
        compile_for_base(target_for_base(cfg), "tiny")
    # the command line refuses it before compiling anything
    base = fixtures.write_random_base(tmp_path / "b2", cfg, tokenizer="none")
    assert main(["build", "--base", str(base), "--out", str(tmp_path / "o"), "--machine", "tiny", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "does not fit" in err and "linear_value_head_dim 1" in err and not (tmp_path / "o").exists()


def test_the_spliced_checkpoint(spliced):
    base, out, rep, m = spliced
    meta = read_meta(out)
    assert rep["gpu_layers"] == m.gpu_layers > 0 and rep["base_layers"] == 4
    assert m.token_offset == V and rep["vocab_size"] == V + len(m.tokens) and m.config.name == "tiny"
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["num_hidden_layers"] == m.gpu_layers + 4 and cfg["hidden_size"] == rep["width"]
    # every memory lives in one of the GPU layers (first in the stack), a GDN layer
    assert set(m.placements) == set(meta["machine"]["placements"]) and "mem" in m.placements
    for p in m.placements.values():
        assert all(L < m.gpu_layers and cfg["layer_types"][L] == "linear_attention" for L in p.layers)
    # one value head per key head and 256-slot memories on key heads of 128: banked, spread over layers
    assert m.placements["mem"].pieces is not None and len(m.placements["mem"].layers) > 1
    assert meta["gpu"]["sample_launch"][-1] == "<halt>"


def test_compact_engine_runs_launches_exactly(spliced):
    from qwengpu.verify import verify
    base, out, rep, m = spliced
    k, ptx, spec = _dot()
    res = run(ptx, spec, engine="compact", machine=m, progress=False, max_steps=MAX, check_states=True)
    assert res.extra["generated"] == _sim(m) and res.buffers[2][0] == 32
    assert res.extra["min_logit_gap"] > 8 and res.extra["memory_margin"] > 8
    report = verify(engine="compact", names=["atomic_inc_dec"], machine=m, progress=False)
    assert report.all_exact, [(r.name, r.detail) for r in report.rows]


def test_stock_forward_decode_after_a_text_prefix(spliced):
    """The whole spliced checkpoint through transformers (AutoModelForCausalLM): 40 text tokens,
    then the launch in the same context (chunked prefill, then one cached decode pass per token)."""
    base, out, rep, m = spliced
    k, ptx, spec = _dot()
    prefix = _text_ids(base, PREFIX)
    assert len(prefix) == PREFIX and max(prefix) < V
    res = run(ptx, spec, engine="model", machine=m, device="cpu", progress=False, max_steps=MAX, prefix_ids=prefix)
    assert type(m.model).__name__ == "Qwen3_5ForCausalLM"
    assert res.extra["generated"] == _sim(m) and res.extra["prefix_tokens"] == PREFIX
    assert compare_buffers(res.buffers, k.expected(), nan_equal=True) is None
    assert res.extra["min_logit_gap"] > 8 and res.extra["memory_margin"] > 8


@pytest.mark.parametrize("prefix", [0, PREFIX])
def test_stock_prefill_path(spliced, prefix):
    """The whole sequence (text prefix, prompt, generated tokens) in one chunked-prefill forward
    (text and GPU tokens in the same GDN chunks): every generated token is the model's top
    prediction, with the compiled logit gap."""
    from qwengpu.runtime.run import _check_prefill
    base, out, rep, m = spliced
    sim = run(*_dot()[1:], engine="sim", config=m.config)
    exact, gap = _check_prefill(m.model, m, sim.extra["prompt"], sim.extra["generated"], "cpu",
                                _text_ids(base, prefix) if prefix else None)
    assert exact and gap > 8


def test_compact_engine_after_a_text_prefix(spliced):
    base, out, rep, m = spliced
    k, ptx, spec = _dot()
    res = run(ptx, spec, engine="compact", machine=m, progress=False, max_steps=MAX,
              prefix_ids=_text_ids(base, PREFIX))
    assert res.extra["generated"] == _sim(m) and res.buffers[2][0] == 32


def test_tokenizer_round_trip_of_gpu_tokens(spliced):
    from transformers import AutoTokenizer
    base, out, rep, m = spliced
    sim = run(*_dot()[1:], engine="sim", config=m.config)
    texts = sim.extra["prompt"] + sim.extra["generated"]
    tok = m.tokenizer
    ids = tok("".join(texts), add_special_tokens=False).input_ids
    assert ids == [m.token_id(t) for t in texts] and min(ids) >= V
    assert tok.decode(ids) == "".join(texts)
    assert [m.text(i) for i in ids] == texts
    text = fixtures.corpus_text()[:2000]
    assert tok(text).input_ids == AutoTokenizer.from_pretrained(str(base))(text).input_ids


def test_language_behaviour_is_preserved(spliced):
    from qwengpu.splice.kl import measure_kl
    base, out, rep, m = spliced
    m._model = None                     # one dense model in memory at a time
    gc.collect()
    r = measure_kl(base, out, max_tokens=512, segment=256, baseline=False)
    assert r.text.tokens >= 500 and r.text.max <= 1e-6, r.summary()
    print(r.summary())
    assert r.text.gpu_mass_max < 1e-30
    assert r.after_launch is not None and r.after_launch.gpu_mass_max < 1e-30 and r.launch_tokens > 60


def test_cli_verify_and_run_with_model(spliced, tmp_path, capsys):
    base, out, rep, m = spliced
    assert main(["verify", "dot", "--engine", "compact", "--model", str(out)]) == 0
    assert "verify compact: 1/1 exact" in capsys.readouterr().out
    k, ptx, spec = _dot()
    (tmp_path / "dot.ptx").write_text(ptx)
    (tmp_path / "dot.json").write_text(json.dumps(spec.to_json()))
    assert main(["run", str(tmp_path / "dot.ptx"), "--launch", str(tmp_path / "dot.json"), "--engine", "compact",
                 "--model", str(out), "--max-steps", str(MAX), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["tokens"] == len(_sim(m)) and res["buffers"][2] == [32]
    # the stock forward, a launch at the start of a context (decode path)
    assert main(["run", str(tmp_path / "dot.ptx"), "--launch", str(tmp_path / "dot.json"), "--engine", "model",
                 "--device", "cpu", "--model", str(out), "--max-steps", str(MAX), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["buffers"][2] == [32]
    assert main(["verify", "dot", "--model", str(out)]) == 2          # --model needs a model engine
    assert "apply to the model engines" in capsys.readouterr().err


def test_multimodal_layout(spliced_mm):
    """The published layout: the machine runs exactly (stock decode after a text prefix, compact
    engine) and text keeps the base's distributions."""
    from transformers import AutoModelForImageTextToText

    from qwengpu.splice.kl import measure_kl
    base, out, rep, m = spliced_mm
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_5" and cfg["vision_config"]["out_hidden_size"] == rep["width"]
    assert rep["mtp"] == "widened" and m.token_offset == V
    k, ptx, spec = _dot()
    res = run(ptx, spec, engine="model", machine=m, device="cpu", progress=False, max_steps=MAX,
              prefix_ids=_text_ids(base, PREFIX))
    assert res.extra["generated"] == _sim(m) and res.buffers[2][0] == 32 and res.extra["min_logit_gap"] > 8
    res = run(ptx, spec, engine="compact", machine=m, progress=False, max_steps=MAX)
    assert res.extra["generated"] == _sim(m) and res.buffers[2][0] == 32
    m._model = None
    gc.collect()
    r = measure_kl(base, out, max_tokens=256, segment=256, baseline=False)
    assert r.text.max <= 1e-6 and r.text.gpu_mass_max < 1e-30, r.summary()
    print(r.summary())
    vlm = AutoModelForImageTextToText.from_pretrained(str(out), dtype=torch.float32)
    assert type(vlm).__name__ == "Qwen3_5ForConditionalGeneration"


def test_machine_splice_benchmark_on_small_shapes(tmp_path, capsys):
    """`qwengpu bench-splice --machine tiny` (the real run uses Qwen3.5-2B's shapes: a 4 GiB base
    and a dry-run splice, docs/splice.md) on a small base of the same GDN shape class:
    build figures from the dry run, kernels exact through the GPU layers, decode estimates."""
    from qwengpu.splice.bench import bench_splice_machine, print_machine_figures
    f = bench_splice_machine("tiny", str(tmp_path), kernels=("dot",), log=lambda *a, **k: None,
                             text_config=fitting_text_config("tiny", V), vision_config=fixtures.tiny_vision_config())
    b = f["build"]
    assert not (tmp_path / "spliced").exists()                     # a dry run: nothing written
    heads = machine_fit(fitting_text_config("tiny", V), "tiny").needs()["memory_key_heads"]
    assert b["bytes"] > 1e9 and b["gpu_layers"] > b["gdn_layers"] > 0 and b["memory_key_heads"] == heads > 100
    assert [(r["kernel"], r["exact"]) for r in b["runs"]] == [("dot", True)]
    for d in (f["base"]["decode"], f["spliced"]["decode"]):
        assert d["decode_tok_s"] > 0 and d["linear_layer_s"] > 0
    assert f["spliced"]["decode"]["linear_layers"] == b["gdn_layers"] + 2
    assert f["base"]["fp32"]["decode_text_tok_s"] > 0
    st = f["stock"]                                                 # the GPU layers alone, stock forward
    assert [(r["kernel"], r["exact"]) for r in st["runs"]] == [("dot", True)]
    assert st["layers"] == b["gpu_layers"] and st["params"] > 1e8
    print_machine_figures(f)
    out = capsys.readouterr().out
    assert "dry-run splice" in out and "through stock transformers" in out and "exact=True" in out


def test_build_splices_the_builtin_machine_unless_told_otherwise(tmp_path, monkeypatch, capsys):
    """`qwengpu build --base` compiles the built-in machine (COMPACT with the float unit) for the base
    (the whole suite); `--machine tiny` and `--program` choose otherwise. The compile is intercepted:
    this checks the choice only."""
    import qwengpu.splice.machine_splice as ms
    asked = []

    def compile_stub(target, machine):
        asked.append(machine)
        raise SpliceError("stop here")
    monkeypatch.setattr(ms, "compile_for_base", compile_stub)
    base = fixtures.write_random_base(tmp_path / "b", fitting_text_config("compact", V), tokenizer="none")
    for extra, want in (([], "compact-fpu"), (["--machine", "compact"], "compact"), (["--machine", "tiny"], "tiny")):
        assert main(["build", "--base", str(base), "--out", str(tmp_path / want), "--quiet", *extra]) == 2
        assert asked[-1] == want and "stop here" in capsys.readouterr().err
