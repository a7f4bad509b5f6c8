"""Random Qwen3.5 checkpoints in the official layouts, for tests and the benchmark (no weights can
be downloaded here).

`write_random_base(path, text, vision=None, ...)` streams random tensors of the right names and
shapes into sharded safetensors (one shard in memory at a time), with config.json, generation
config and a tokenizer: the multimodal layout (`Qwen3_5ForConditionalGeneration`, text weights
under `model.language_model.*`, `model.visual.*`, an `mtp.*` head) when `vision` is given, else
the text layout (`Qwen3_5ForCausalLM`). Norm weights are random too (not the zero init), so a
splice that mishandles them shows.
"""
from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|image_pad|>", "<|video_pad|>"]


def corpus_text() -> str:
    from importlib.resources import files
    return files("qwengpu.splice").joinpath("corpus.txt").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# tokenizers


def _wrap(tok, path: Path):
    from transformers import PreTrainedTokenizerFast
    ft = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    ft.chat_template = CHAT_TEMPLATE
    ft.save_pretrained(str(path))
    return ft


def write_bpe_tokenizer(path, vocab_size: int = 400, text: str | None = None):
    """A byte-level BPE tokenizer trained on `text` (default: the shipped corpus)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text or corpus_text()], trainer)
    return _wrap(tok, Path(path))


def write_sized_bpe_tokenizer(path, size: int, trained: int = 1000, text: str | None = None):
    """A byte-level BPE tokenizer of `size` entries: `trained` entries (at most `size`) learnt from `text` (default:
    the shipped corpus), then unreachable filler entries up to `size` (`<|filler_N|>`, no merge
    makes them). A stand-in with a real-sized vocabulary that still encodes text: transformers 5
    loads a Qwen3.5 checkpoint's tokenizer as `Qwen3_5Tokenizer`, a BPE built from the file's vocab
    and merges, under which a word-level tokenizer encodes every text to nothing."""
    import json

    from tokenizers import Tokenizer
    path = Path(path)
    write_bpe_tokenizer(path, min(trained, size), text)
    f = path / "tokenizer.json"
    doc = json.loads(f.read_text())
    vocab = doc["model"]["vocab"]
    taken = set(vocab.values()) | {t["id"] for t in doc.get("added_tokens", [])}
    nxt = 0
    for i in range(size - len(taken)):
        while nxt in taken:
            nxt += 1
        vocab[f"<|filler_{i}|>"] = nxt
        nxt += 1
    f.write_text(json.dumps(doc, ensure_ascii=False))
    Tokenizer.from_file(str(f))           # still loads
    return path


def write_wordlevel_tokenizer(path, size: int):
    """A word-level tokenizer with `size` entries (specials first, then w0, w1, ...): a stand-in
    with a real-sized vocabulary."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    vocab["[UNK]"] = len(vocab)
    for i in range(size - len(vocab)):
        vocab[f"w{i}"] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    for t in SPECIALS:
        from tokenizers import AddedToken
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)])
    return _wrap(tok, Path(path))


# ---------------------------------------------------------------------------------------------
# random weights


def _init(name: str, shape, gen, final_norm_mean: float, embed_std: float, head_std: float):
    import torch

    def randn(std, mean=0.0):
        return torch.randn(shape, generator=gen) * std + mean
    if name.endswith("A_log"):
        return torch.empty(shape).uniform_(1.0, 16.0, generator=gen).log()
    if name.endswith("dt_bias"):
        return randn(0.3, 1.0)
    if name.endswith("conv1d.weight"):
        return randn(0.3)
    if name.endswith("linear_attn.norm.weight"):           # RMSNormGated: plain (not zero-centred) scale
        return randn(0.2, 1.0)
    if name.startswith("model.visual.") and ("norm" in name):
        return randn(0.1, 1.0) if name.endswith("weight") else randn(0.05)
    if name.endswith("embed_tokens.weight"):
        return randn(embed_std)
    if name == "lm_head.weight":
        return randn(head_std)
    if name.endswith("model.norm.weight") or name.endswith("language_model.norm.weight") or name == "mtp.norm.weight":
        return randn(0.3, final_norm_mean)
    if name.endswith("norm.weight"):                          # zero-centred RMSNorms: 1 + w
        return randn(0.3)
    if name.endswith(".bias"):
        return randn(0.02)
    return randn(0.02)


def _mtp_shapes(tc) -> dict:
    H, I = tc.hidden_size, tc.intermediate_size
    hd, nh, kv = tc.head_dim, tc.num_attention_heads, tc.num_key_value_heads
    p = "mtp.layers.0."
    return {"mtp.fc.weight": (H, 2 * H), "mtp.norm.weight": (H,), "mtp.pre_fc_norm_embedding.weight": (H,),
            "mtp.pre_fc_norm_hidden.weight": (H,), p + "input_layernorm.weight": (H,),
            p + "post_attention_layernorm.weight": (H,), p + "self_attn.q_proj.weight": (nh * hd * 2, H),
            p + "self_attn.k_proj.weight": (kv * hd, H), p + "self_attn.v_proj.weight": (kv * hd, H),
            p + "self_attn.o_proj.weight": (H, nh * hd), p + "self_attn.q_norm.weight": (hd,),
            p + "self_attn.k_norm.weight": (hd,), p + "mlp.gate_proj.weight": (I, H),
            p + "mlp.up_proj.weight": (I, H), p + "mlp.down_proj.weight": (H, I)}


def write_random_base(path, text: dict, vision: dict | None = None, *, tied: bool = True, mtp: bool = True,
                      dtype="float32", seed: int = 0, shard_bytes: int = 2 << 30, tokenizer: str = "bpe",
                      tokenizer_size: int | None = None, final_norm_mean: float = 0.0, embed_std: float = 0.02,
                      head_std: float = 0.02, progress: bool = False, extra_text_config: dict | None = None) -> Path:
    """Write a random Qwen3.5 checkpoint. `text`/`vision`: Qwen3_5TextConfig / Qwen3_5VisionConfig
    keyword arguments. The multimodal layout when `vision` is given."""
    import torch
    from safetensors.torch import save_file
    from tqdm.auto import tqdm
    from transformers import Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    dname = str(dt).replace("torch.", "")
    tcfg = dict(text, tie_word_embeddings=tied)
    if vision is not None:
        ids = {"image_token_id": 5, "video_token_id": 6, "vision_start_token_id": 3, "vision_end_token_id": 4}
        vcfg = dict(vision, out_hidden_size=text["hidden_size"])
        config = Qwen3_5Config(text_config=tcfg, vision_config=vcfg, tie_word_embeddings=tied, **ids)
        cls = Qwen3_5ForConditionalGeneration
        tc = config.text_config
    else:
        config = Qwen3_5TextConfig(**tcfg)
        cls = Qwen3_5ForCausalLM
        tc = config
    with torch.device("meta"):
        model = cls(config)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if tied:
        shapes.pop("lm_head.weight", None)
    if mtp and vision is not None:
        shapes.update(_mtp_shapes(tc))
    gen = torch.Generator().manual_seed(seed)
    shards, cur, size = [], {}, 0
    bar = tqdm(total=len(shapes), desc="random base", unit="tensor", disable=not progress)
    for name, shape in shapes.items():
        t = _init(name, shape, gen, final_norm_mean, embed_std, head_std).to(dt).contiguous()
        nbytes = t.numel() * t.element_size()
        if cur and size + nbytes > shard_bytes:
            shards.append(cur)
            save_file(cur, str(path / f"tmp-{len(shards):05d}.safetensors"), metadata={"format": "pt"})
            cur, size = {}, 0
        cur[name] = t
        size += nbytes
        bar.update(1)
    if cur:
        shards.append(cur)
        save_file(cur, str(path / f"tmp-{len(shards):05d}.safetensors"), metadata={"format": "pt"})
    bar.close()
    n = len(shards)
    weight_map, total = {}, 0
    for i, sh in enumerate(shards):
        final = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        (path / f"tmp-{i + 1:05d}.safetensors").rename(path / final)
        for k, v in sh.items():
            weight_map[k] = final
            total += v.numel() * v.element_size()
        sh.clear()
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                   "weight_map": weight_map}, indent=2))
    cfg = config.to_dict()
    cfg["architectures"] = [cls.__name__]
    cfg["dtype"] = dname
    if vision is not None:
        cfg["text_config"]["dtype"] = dname
        cfg["text_config"]["mtp_num_hidden_layers"] = 1 if mtp else 0
        cfg["text_config"]["mtp_use_dedicated_embeddings"] = False
        cfg["text_config"].update(extra_text_config or {})
    else:
        cfg.update(extra_text_config or {})
    (path / "config.json").write_text(json.dumps(cfg, indent=2, default=str))
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": 2, "pad_token_id": 0}))
    if tokenizer == "bpe":
        write_bpe_tokenizer(path, tokenizer_size or max(300, tc.vocab_size - 16))
    elif tokenizer == "sized-bpe":
        write_sized_bpe_tokenizer(path, tokenizer_size or tc.vocab_size - 256)
    elif tokenizer == "wordlevel":
        write_wordlevel_tokenizer(path, tokenizer_size or tc.vocab_size - 256)
    return path


# ---------------------------------------------------------------------------------------------
# the shapes used by the tests and the benchmark


def tiny_text_config(vocab: int = 416, hidden: int = 64) -> dict:
    return dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=128, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2,
                linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                 "mrope_section": [1, 1, 0], "mrope_interleaved": True},
                max_position_embeddings=4096)


def tiny_vision_config() -> dict:
    return dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=4, temporal_patch_size=2,
                spatial_merge_size=2, num_position_embeddings=16)


def qwen35_2b_text_config() -> dict:
    """Qwen3.5-2B's text geometry (24 layers, 3 GDN + 1 gated attention, repeated)."""
    return dict(vocab_size=248320, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24,
                num_attention_heads=8, num_key_value_heads=2, head_dim=256, linear_num_key_heads=16,
                linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
                linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=262144,
                rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                                 "mrope_section": [11, 11, 10], "mrope_interleaved": True})


def qwen35_2b_vision_config() -> dict:
    """A vision tower of Qwen3.5's published family shape (24 blocks of width 1024)."""
    return dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, patch_size=16,
                temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=2304)
