"""Splicing the GPU into Qwen3.5 checkpoints: small random bases in both official layouts.

The GPU here is the stand-in program (GDN memory, adder, previous-token copy, attention gadgets),
compiled for each base with `target_for_base`; everything is generic over the compiled program.
"""
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from qwengpu.compiler import Target, compile_program  # noqa: E402
from qwengpu.splice import NotQwen35Error, SpliceError, fixtures, read_checkpoint, read_meta, splice, target_for_base  # noqa: E402
from qwengpu.splice.demo import demo_program, demo_sequence  # noqa: E402
from qwengpu.splice.geometry import INDICATOR_DIMS, Geometry  # noqa: E402
from qwengpu.splice.kl import measure_kl  # noqa: E402
from qwengpu.splice.spliced import check_program, run_tokens  # noqa: E402

H = 64
V = 416


def _program():
    return demo_program(attention=True, context=256)


@pytest.fixture(scope="module")
def text_case(module_tmp):
    """Text layout (Qwen3_5ForCausalLM), tied embeddings, fp32, many small shards; tiny embeddings
    (RMS ~ 3e-3, so eps matters in the first norms) and a large final norm (peaked logits)."""
    root = module_tmp("splice_text")
    base = fixtures.write_random_base(root / "base", fixtures.tiny_text_config(V, H), tied=True,
                                      final_norm_mean=60.0, embed_std=0.003, shard_bytes=60_000)
    ck = read_checkpoint(base)
    compiled = compile_program(_program(), target_for_base(ck))
    rep = splice(ck, compiled, root / "out", progress=False)
    return base, root / "out", compiled, rep


@pytest.fixture(scope="module")
def mm_case(module_tmp):
    """Multimodal layout (Qwen3_5ForConditionalGeneration): bf16 on disk, untied lm_head, vision
    tower, MTP head."""
    root = module_tmp("splice_mm")
    base = fixtures.write_random_base(root / "base", fixtures.tiny_text_config(V, H), fixtures.tiny_vision_config(),
                                      tied=False, head_std=0.3, embed_std=0.003, dtype="bfloat16",
                                      shard_bytes=200_000)
    ck = read_checkpoint(base)
    compiled = compile_program(_program(), target_for_base(ck))
    rep = splice(ck, compiled, root / "out", progress=False)
    return base, root / "out", compiled, rep


def _causal(path, dtype=torch.float32):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).eval()


def _corpus_ids(base, n=None):
    from transformers import AutoTokenizer
    ids = AutoTokenizer.from_pretrained(str(base))(fixtures.corpus_text()).input_ids
    return ids[:n] if n else ids


# ---------------------------------------------------------------------------------------------
# reading checkpoints


def _write_config(path, cfg):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def test_refuses_what_is_not_a_dense_qwen35(tmp_path):
    with pytest.raises(NotQwen35Error, match="model_type 'llama'"):
        read_checkpoint(_write_config(tmp_path / "llama", {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(NotQwen35Error, match="mixture-of-experts"):
        read_checkpoint(_write_config(tmp_path / "moe", {"model_type": "qwen3_5_moe"}))
    with pytest.raises(NotQwen35Error, match="no config.json"):
        read_checkpoint(tmp_path)
    with pytest.raises(NotQwen35Error, match="safetensors"):
        read_checkpoint(_write_config(tmp_path / "noweights", {"model_type": "qwen3_5_text"}))


def test_reads_both_official_layouts(text_case, mm_case):
    t = read_checkpoint(text_case[0])
    assert (t.layout, t.prefix, t.tied, len(t.shards) > 5) == ("text", "model.", True, True)
    m = read_checkpoint(mm_case[0])
    assert (m.layout, m.prefix, m.tied) == ("multimodal", "model.language_model.", False)
    assert any(k.startswith("model.visual.") for k in m.weight_map) and len(m.mtp_names()) == 15


def test_target_for_base_takes_the_base_geometry(mm_case):
    t = target_for_base(mm_case[0])
    assert (t.intermediate, t.linear_key_heads, t.linear_value_heads, t.linear_key_dim, t.linear_value_dim) == \
        (128, 2, 4, 16, 16)
    assert (t.attn_heads, t.attn_kv_heads, t.head_dim, t.rope_theta, t.partial_rotary_factor) == \
        (4, 2, 16, 10000.0, 0.25)
    assert t.offset == H + INDICATOR_DIMS and t.require_attention is False and t.rms_norm_eps == 1e-6


def test_a_gpu_compiled_for_another_geometry_is_refused(text_case, tmp_path):
    compiled = compile_program(demo_program(), Target.compact())
    with pytest.raises(SpliceError, match="target_for_base"):
        splice(text_case[0], compiled, tmp_path / "x", progress=False)


# ---------------------------------------------------------------------------------------------
# the isolation arithmetic


@pytest.mark.parametrize("hidden,width", [(64, 104), (2048, 2400), (1024, 4100)])
def test_rmsnorm_identity_holds_for_every_scale(hidden, width):
    g = Geometry(hidden, width, 1e-6)
    assert math.log2(g.alpha) == int(math.log2(g.alpha)) and g.alpha ** 2 * hidden >= width + hidden
    assert all(float(torch.tensor(c).to(torch.bfloat16)) == c for c in g.indicator)
    assert abs(g.c2 - g.c2_target) <= 1e-6 * g.c2_target
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.3, hidden)
    for rms in (1e-4, 1e-3, 3e-2, 1.0, 300.0):      # r^2 from 1e-8 (far below eps) upwards
        x = rng.normal(0, rms, hidden)
        y = x / np.sqrt(np.mean(x * x) + g.eps) * (1 + w)
        z = np.zeros(width)
        z[:hidden] = g.alpha * x
        z[g.ind:g.ind + INDICATOR_DIMS] = g.indicator
        w2 = g.base_norm(w)
        y2 = (z / np.sqrt(np.mean(z * z) + g.eps) * (1 + w2))[:hidden]
        assert np.max(np.abs(y2 - y)) <= 1e-6 * np.max(np.abs(y))


# ---------------------------------------------------------------------------------------------
# the spliced checkpoints


def test_reloads_with_stock_classes(text_case, mm_case):
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    for case in (text_case, mm_case):
        out, rep = case[1], case[3]
        m = _causal(out)
        assert type(m).__name__ == "Qwen3_5ForCausalLM" and m.dtype == torch.float32
        assert m.config.hidden_size == rep.width and m.config.vocab_size == V + rep.gpu_tokens
        assert m.config.num_hidden_layers == rep.gpu_layers + 4
        idx = json.loads((out / "model.safetensors.index.json").read_text())
        assert all((out / f).exists() for f in set(idx["weight_map"].values()))
    mm = AutoModelForImageTextToText.from_pretrained(str(mm_case[1]), dtype=torch.float32)
    assert type(mm).__name__ == "Qwen3_5ForConditionalGeneration"
    assert mm.config.vision_config.out_hidden_size == mm_case[3].width
    assert AutoModelForCausalLM.from_pretrained(str(mm_case[1])).dtype == torch.float32   # config says fp32


@pytest.mark.parametrize("case", ["text_case", "mm_case"])
def test_language_behaviour_is_preserved(case, request):
    base, out, compiled, rep = request.getfixturevalue(case)
    r = measure_kl(base, out, segment=512, baseline=False)    # the whole shipped corpus
    assert r.text.tokens >= 8000
    assert r.text.mean <= 1e-8 and r.text.max <= 1e-6, r.summary()
    assert r.text.gpu_mass_max < 1e-30
    # after a launch: measured (not zero: see docs/splice.md); GPU tokens stay impossible on text
    assert r.after_launch is not None and r.after_launch.gpu_mass_max < 1e-30
    assert math.isfinite(r.after_launch.mean)


@pytest.mark.parametrize("case", ["text_case", "mm_case"])
@pytest.mark.parametrize("mode", ["prefill", "decode"])
@pytest.mark.parametrize("prefix", [0, 40])
def test_gpu_is_exact_inside_the_spliced_model(case, mode, prefix, request):
    base, out, compiled, rep = request.getfixturevalue(case)
    model = _causal(out)
    seq = demo_sequence(compiled.program, 32, seed=prefix + 1)
    pre = _corpus_ids(base, prefix) if prefix else []
    r = check_program(model, compiled, seq, rep.gpu_token_offset, pre, mode)
    assert r.exact, r.mismatches[:5]
    assert r.min_code_margin > 0.4 and r.min_logit_gap > 8


@pytest.mark.parametrize("case", ["text_case", "mm_case"])
def test_every_sublayer_adds_exactly_zero_across_the_split(case, request):
    """GPU features share the base's dims, so the two sides are kept apart by the switches alone:
    every GPU sublayer adds exactly 0 to a text token, every base sublayer exactly 0 to a GPU
    token (text, a launch, text, a launch in one context). The dedicated GPU dims and the anchor
    stay exactly 0 on text, the indicator exactly 0 on GPU tokens (a tied splice: but the second
    dim, which holds the same penalty on every GPU token, read by no GPU layer)."""
    base, out, compiled, rep = request.getfixturevalue(case)
    model = _causal(out)
    text = _corpus_ids(base, 30)
    launch = [rep.gpu_token_offset + compiled.token_id(t) for t in demo_sequence(compiled.program, 20)]
    ids = text + launch + text[:10] + launch[:8]
    n = rep.gpu_layers
    run = run_tokens(model, ids, 0, "prefill", layers=n + 4)
    with torch.no_grad():
        before = model.get_input_embeddings()(torch.tensor(ids)).numpy()
    is_text = np.array([i < V for i in ids])
    anchor = H + INDICATOR_DIMS
    tied = model.config.tie_word_embeddings
    assert tied == (case == "text_case")
    assert rep.width < compiled.layout.width and rep.features["shared"] > 0
    for sub in range(2 * (n + 4)):                   # GPU layers first, then the base's
        after = run.sublayers[sub]
        if sub < 2 * n:
            assert np.array_equal(after[is_text], before[is_text]), f"GPU sublayer {sub} changed a text token"
        else:
            assert np.array_equal(after[~is_text], before[~is_text]), f"base sublayer {sub} changed a GPU token"
        assert np.all(after[is_text][:, anchor:] == 0)
        ind = after[~is_text][:, H:anchor]
        if tied:
            assert np.all(ind[:, [0, 2, 3]] == 0) and np.all(ind[:, 1] == ind[0, 1]) and ind[0, 1] < 0
        else:
            assert np.all(ind == 0)
        assert np.all(np.isfinite(after))
        before = after
    assert np.all(run.hidden[is_text][:, anchor:] == 0)


def test_feature_map_shares_what_text_cannot_leak_through(text_case):
    """The features the GPU's unembedding, its conv back taps and its attention keys read are
    dedicated; the rest live in the base's dims; the checkpoint's GPU tensors agree."""
    from safetensors import safe_open

    from qwengpu.splice import feature_map
    base, out, compiled, rep = text_case
    fm = feature_map(compiled)
    n_gpu_features = len(set(compiled.layout.dims.values())) - 1          # less the anchor
    assert fm.shared + len(fm.dedicated) == n_gpu_features and fm.width == H + INDICATOR_DIMS + 1 + len(fm.dedicated)
    assert {"lm_head", "conv", "key"} <= set(fm.dedicated.values()) and rep.features == fm.counts()
    assert read_meta(out)["gpu"]["features"]["spliced_dims"] == fm.to_spliced[fm.used].tolist()
    idx = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]

    def tensor(name):
        with safe_open(str(out / idx[name]), framework="pt") as f:
            return f.get_tensor(name)
    if "lm_head.weight" in idx:
        assert not tensor("lm_head.weight")[V:, :H].any()
    else:       # tied: on the base's dims a GPU row holds only its embedding (the inputs shared there)
        emb = fm.columns(compiled.state_dict["model.embed_tokens.weight"].float())
        assert torch.equal(tensor("model.embed_tokens.weight")[V:, :H].float(), emb[:, :H])
    types = compiled.schedule.layer_types
    for L in range(rep.gpu_layers):
        p = f"model.layers.{L}."
        if types[L] == "full_attention":
            assert not tensor(p + "self_attn.k_proj.weight")[:, :H].any()
        else:
            back = tensor(p + "linear_attn.conv1d.weight")[:, 0, :-1].ne(0).any(dim=1)
            assert not tensor(p + "linear_attn.in_proj_qkv.weight")[back][:, :H].any()
    # a base too narrow for every shareable feature: the rest overflows into dedicated dims
    narrow = compile_program(_program(), target_for_base(fixtures.tiny_text_config(V, 16)))
    fm16 = feature_map(narrow)
    assert fm16.shared == 16 and "overflow" in fm16.dedicated.values()
    assert fm16.width == 16 + INDICATOR_DIMS + 1 + len(fm16.dedicated)


def test_gpu_switches_hold_for_any_text_up_to_the_bound(text_case):
    """Every switched GPU row, on a text token of any scale up to R_INPUT (and far below eps):
    pre-activation <= OFF, finite, and its gate exactly 0 (silu, sigmoid)."""
    from qwengpu.splice.geometry import OFF, R_INPUT
    base, out, compiled, rep = text_case
    model = _causal(out)
    g = Geometry(H, rep.width, 1e-6, gpu_width=compiled.layout.width)
    rng = np.random.default_rng(1)
    layers = model.model.layers
    hd = model.config.head_dim
    for r in (1e-5, 1e-2, 1.0, R_INPUT):
        x = torch.zeros(rep.width, dtype=torch.float64)
        x[:H] = torch.from_numpy(g.alpha * rng.normal(0, r, H))
        x[g.ind:g.ind + INDICATOR_DIMS] = torch.tensor(g.indicator)
        for L in range(rep.gpu_layers):
            lay = layers[L]
            xn = x / torch.sqrt(torch.mean(x * x) + 1e-6)
            pre = []
            inn = xn * (1 + lay.input_layernorm.weight.double())
            post = xn * (1 + lay.post_attention_layernorm.weight.double())
            gate = lay.mlp.gate_proj.weight.double()
            pre.append((gate @ post)[gate[:, :H].ne(0).any(dim=1)])
            if hasattr(lay, "linear_attn"):
                pre.append(lay.linear_attn.in_proj_b.weight.double() @ inn)
                z = lay.linear_attn.in_proj_z.weight.double()
                pre.append((z @ inn)[z[:, :H].ne(0).any(dim=1)])
            else:
                q = (lay.self_attn.q_proj.weight.double() @ inn).view(-1, 2 * hd)
                pre.append(q[:, hd:].reshape(-1))
            pre = torch.cat(pre)
            assert pre.max() <= OFF and torch.isfinite(pre).all() and pre.abs().max() < 1e30
            unswitched = lay.mlp.up_proj.weight.double() @ post      # multiplies the -0 gates: finite
            if hasattr(lay, "linear_attn"):
                unswitched = torch.cat([unswitched, lay.linear_attn.in_proj_qkv.weight.double() @ inn])
            else:
                unswitched = torch.cat([unswitched, lay.self_attn.v_proj.weight.double() @ inn])
            assert unswitched.float().isfinite().all()
            assert torch.all(torch.nn.functional.silu(pre.float()) == 0)
            assert torch.all(torch.sigmoid(pre.float()) == 0)


def test_tokenizer_round_trip(text_case, mm_case):
    from transformers import AutoTokenizer
    text = fixtures.corpus_text()
    for base, out, compiled, rep in (text_case, mm_case):
        tb, ts = AutoTokenizer.from_pretrained(str(base)), AutoTokenizer.from_pretrained(str(out))
        assert ts(text).input_ids == tb(text).input_ids                 # existing ids unchanged
        assert len(ts) == V + rep.gpu_tokens
        texts = [t.text for t in compiled.program.tokens]
        ids = ts("".join(texts), add_special_tokens=False).input_ids
        assert ids == [V + i for i in range(len(texts))]                # GPU token k has id V + k
        assert ts.decode(ids) == "".join(texts)
        msgs = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}]
        assert ts.apply_chat_template(msgs, tokenize=False) == tb.apply_chat_template(msgs, tokenize=False)
        assert read_meta(out)["gpu"]["token_offset"] == V


def test_vision_tower_outputs_are_unchanged(mm_case):
    from transformers import AutoModelForImageTextToText
    base, out, compiled, rep = mm_case
    mb = AutoModelForImageTextToText.from_pretrained(str(base), dtype=torch.float32).eval()
    ms = AutoModelForImageTextToText.from_pretrained(str(out), dtype=torch.float32).eval()
    g = Geometry(H, rep.width, 1e-6)
    pix = torch.randn(16, 3 * 2 * 4 * 4, generator=torch.Generator().manual_seed(0))
    grid = torch.tensor([[1, 4, 4]])
    with torch.no_grad():
        vb, vs = mb.model.visual(pix, grid_thw=grid), ms.model.visual(pix, grid_thw=grid)
    assert torch.equal(vb.last_hidden_state, vs.last_hidden_state)
    assert torch.equal(vs.pooler_output[:, :H], g.alpha * vb.pooler_output)          # alpha = 2: exact
    assert torch.equal(vs.pooler_output[:, H:H + INDICATOR_DIMS],
                       torch.tensor(g.indicator).expand(vs.pooler_output.shape[0], -1))
    assert torch.all(vs.pooler_output[:, H + INDICATOR_DIMS:] == 0)
    # an image in the prompt: same next-token distributions
    ids = _corpus_ids(base, 40)
    ids = ids[:20] + [3] + [5] * 4 + [4] + ids[20:]                  # vision_start, 4 image pads, vision_end
    tt = torch.tensor([[1 if i == 5 else 0 for i in ids]])
    kw = dict(input_ids=torch.tensor([ids]), pixel_values=pix, image_grid_thw=grid, mm_token_type_ids=tt)
    with torch.no_grad():
        pb = mb(**kw).logits[0].double().log_softmax(-1)
        ps = ms(**kw).logits[0].double().log_softmax(-1)
    kl = (pb.exp() * (pb - ps[:, :V])).sum(-1)
    assert kl.max() <= 1e-6 and ps[:, V:].exp().sum(-1).max() < 1e-30


def test_mtp_head_is_widened_consistently(mm_case, tmp_path):
    from qwengpu.splice.mtp import mtp_logits
    base, out, compiled, rep = mm_case
    assert rep.mtp == "widened"
    ids = _corpus_ids(base, 120)
    with torch.no_grad():
        hb = _causal(base).model(torch.tensor([ids])).last_hidden_state[0]
        hs = _causal(out).model(torch.tensor([ids])).last_hidden_state[0]
    pb = mtp_logits(base, hb[:-1], ids[1:]).double().log_softmax(-1)
    ps = mtp_logits(out, hs[:-1], ids[1:]).double().log_softmax(-1)
    kl = (pb.exp() * (pb - ps[:, :V])).sum(-1)
    assert kl.max() <= 1e-6 and ps[:, V:].exp().sum(-1).max() < 1e-20
    # or dropped, with a note and a config that says so
    rep2 = splice(base, compiled, tmp_path / "nomtp", mtp="drop", progress=False)
    assert rep2.mtp == "dropped" and any("MTP" in n for n in rep2.notes)
    assert not read_checkpoint(tmp_path / "nomtp").mtp_names()
    cfg = json.loads((tmp_path / "nomtp" / "config.json").read_text())
    assert cfg["text_config"]["mtp_num_hidden_layers"] == 0


def test_bf16_keeps_language_within_bf16_noise(text_case):
    """Documented, measured: in bf16 the base's own rounding dominates (GPU launches need fp32)."""
    base, out, compiled, rep = text_case
    noise = measure_kl(base, base, dtype="bfloat16", base_dtype="float32", with_launch=False, max_tokens=1024)
    r = measure_kl(base, out, dtype="bfloat16", with_launch=False, max_tokens=1024)
    assert r.text.gpu_mass_max < 1e-20
    assert r.text.mean <= 3 * noise.text.mean


def test_kl_refuses_a_text_it_cannot_measure(text_case, tmp_path):
    """Nothing to measure (a text the tokenizer gives fewer than two tokens for) is an error that
    says so, not a report of 0 tokens."""
    base, out, compiled, rep = text_case
    with pytest.raises(ValueError, match="no text to measure: 1 token.*tokenizer.*--text"):
        measure_kl(base, out, text="a", with_launch=False)
    with pytest.raises(ValueError, match="no text to measure: 0 token"):
        measure_kl(base, out, ids=[], with_launch=False)


def test_cli_subcommands(text_case, tmp_path, capsys):
    import argparse

    from qwengpu.splice.cli import add_parsers
    p = argparse.ArgumentParser()
    add_parsers(p.add_subparsers(dest="command", required=True))
    a = p.parse_args(["build", "--base", str(text_case[0]), "--out", str(tmp_path / "o"), "--quiet",
                      "--program", "qwengpu.splice.demo:standin"])
    assert a.func(a) == 0 and "GPU layers" in capsys.readouterr().out
    a = p.parse_args(["kl", "--base", str(text_case[0]), "--model", str(tmp_path / "o"), "--max-tokens", "300",
                      "--json"])
    assert a.func(a) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["text"]["max"] <= 1e-6 and rep["after_launch"]["tokens"] > 0


def test_tokenizer_extension_keeps_transformers_records_consistent(text_case, tmp_path):
    """Official tokenizer_config.json files list added tokens in `added_tokens_decoder`; the new
    tokens are recorded there too, and the reloaded tokenizer agrees with tokenizer.json."""
    import shutil

    from transformers import AutoTokenizer

    from qwengpu.splice.tokenizer import extend_tokenizer
    base = text_case[0]
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(base / f, tmp_path / f)
    tc = json.loads((tmp_path / "tokenizer_config.json").read_text())
    tc["added_tokens_decoder"] = {"0": {"content": "<|endoftext|>", "lstrip": False, "normalized": False,
                                        "rstrip": False, "single_word": False, "special": True}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tc))
    summary = extend_tokenizer(tmp_path, ["<|a|>", "<|b|>"], V)
    assert summary["reserved"] == V - summary["base_entries"]
    dec = json.loads((tmp_path / "tokenizer_config.json").read_text())["added_tokens_decoder"]
    assert dec[str(V)]["content"] == "<|a|>" and dec[str(V + 1)]["content"] == "<|b|>"
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    assert tok.convert_tokens_to_ids(["<|a|>", "<|b|>"]) == [V, V + 1] and len(tok) == V + 2
    with pytest.raises(ValueError, match="already in the base tokenizer"):
        extend_tokenizer(tmp_path, ["<|a|>"], V + 2)


def test_a_dry_run_splice_computes_everything_and_writes_nothing(mm_case, tmp_path):
    """`dry_run=True` (the benchmark on checkpoints too large to write here): the same tensors,
    shards and bytes as the real splice, and no output folder."""
    base, out, compiled, rep = mm_case
    dry = splice(base, compiled, tmp_path / "dry", progress=False, dry_run=True)
    assert not (tmp_path / "dry").exists()
    assert (dry.bytes_written, dry.shards, dry.width, dry.gpu_layers, dry.vocab_size) == \
        (rep.bytes_written, rep.shards, rep.width, rep.gpu_layers, rep.vocab_size)
    on_disk = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    n_tensors = len(json.loads((out / "model.safetensors.index.json").read_text())["weight_map"])
    # + the safetensors headers: a JSON entry per tensor (name, dtype, shape, offsets)
    assert 0 < dry.bytes_written <= on_disk < dry.bytes_written + 256 * n_tensors
    assert any("dry run" in n for n in dry.notes)


def test_a_full_disk_stops_the_splice_with_a_clear_error_and_no_partial_output(text_case, tmp_path, monkeypatch):
    import importlib
    splice_module = importlib.import_module("qwengpu.splice.splice")
    base, out, compiled, rep = text_case
    monkeypatch.setattr(splice_module, "DISK_RESERVE", 1 << 60)       # as if the disk were full
    with pytest.raises(SpliceError, match="not enough disk space"):
        splice(base, compiled, tmp_path / "full", progress=False)
    assert not (tmp_path / "full").exists()


def test_sized_bpe_stand_in_encodes_text_as_a_qwen35_tokenizer(tmp_path):
    """The 2B benchmark's base tokenizer: real-sized, and it encodes text under the class transformers
    5 gives a Qwen3.5 checkpoint (a word-level stand-in encodes every text to nothing there)."""
    import json

    from transformers import AutoTokenizer

    from qwengpu.splice.fixtures import write_sized_bpe_tokenizer
    write_sized_bpe_tokenizer(tmp_path, 5000)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5"}))
    tok = AutoTokenizer.from_pretrained(tmp_path)
    ids = tok("The quick brown fox jumps over 1,234 lazy dogs.")["input_ids"]
    assert len(tok) == 5000 and 5 < len(ids) and max(ids) < 1000
    assert tok.decode(ids) == "The quick brown fox jumps over 1,234 lazy dogs."
