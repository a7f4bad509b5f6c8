"""Extending the base tokenizer with the GPU's tokens, leaving every existing id and the chat
template unchanged.

GPU token i gets id `base vocab_size + i`. The base's tokenizer usually has fewer entries than
the model's (padded) vocab_size; `tokenizers` numbers added tokens consecutively, so the gap is
filled with reserved special tokens `<|qwengpu_reserved_N|>` (never produced by encoding ordinary
text), and the result is checked by reloading.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

RESERVED = "<|qwengpu_reserved_{}|>"

#: files that are weights or that the splicer writes itself
_OWN = {"config.json", "model.safetensors", "model.safetensors.index.json", "qwengpu.json"}


def copy_side_files(base: Path, out: Path) -> list[str]:
    """Copy everything that is not a weight file or the config (tokenizer, chat template,
    processor and generation configs, README, license ...)."""
    copied = []
    for p in sorted(base.iterdir()):
        if p.is_dir() or p.name in _OWN or p.suffix in (".safetensors", ".bin", ".pt", ".pth", ".gguf"):
            continue
        if p.name.startswith("."):
            continue
        shutil.copy2(p, out / p.name)
        copied.append(p.name)
    return copied


def _entry(id_: int, text: str, special: bool) -> dict:
    return {"id": id_, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def extend_tokenizer(out: Path, texts: list[str], first_id: int, special: bool = False) -> dict:
    """Add `texts` as tokens first_id, first_id+1, ... to the tokenizer files already copied
    into `out`. Returns a summary. Raises when a text is already a token."""
    from tokenizers import Tokenizer
    tj_path = out / "tokenizer.json"
    if not tj_path.exists():
        raise FileNotFoundError(f"{out.name}: the base has no tokenizer.json (a fast tokenizer is needed "
                                "to add the GPU tokens)")
    tj = json.loads(tj_path.read_text(encoding="utf-8"))
    tok = Tokenizer.from_str(json.dumps(tj))
    size = tok.get_vocab_size(with_added_tokens=True)
    vocab = tok.get_vocab(with_added_tokens=True)
    size = max(size, max(vocab.values(), default=-1) + 1)
    clash = [t for t in texts if t in vocab]
    if clash:
        raise ValueError(f"GPU token texts already in the base tokenizer: {clash[:5]}")
    if len(set(texts)) != len(texts):
        raise ValueError("GPU token texts are not distinct")
    if size > first_id:
        raise ValueError(f"the tokenizer has {size} entries, more than the model's vocab_size {first_id}")
    added = tj.setdefault("added_tokens", [])
    reserved = []
    for i in range(size, first_id):
        t = RESERVED.format(i)
        added.append(_entry(i, t, True))
        reserved.append(t)
    for k, t in enumerate(texts):
        added.append(_entry(first_id + k, t, special))
    tj_path.write_text(json.dumps(tj, ensure_ascii=False, indent=2), encoding="utf-8")
    # check the ids tokenizers really assigns
    tok2 = Tokenizer.from_file(str(tj_path))
    for k, t in enumerate(texts):
        got = tok2.token_to_id(t)
        if got != first_id + k:
            raise RuntimeError(f"tokenizer assigned id {got} to {t!r}, expected {first_id + k}")
    # transformers' own record of added tokens, when the base has one
    tc_path = out / "tokenizer_config.json"
    if tc_path.exists():
        tc = json.loads(tc_path.read_text(encoding="utf-8"))
        dec = tc.get("added_tokens_decoder")
        if isinstance(dec, dict):
            for e in added[len(added) - len(reserved) - len(texts):]:
                dec[str(e["id"])] = {k: e[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                       "single_word", "special")}
            tc_path.write_text(json.dumps(tc, ensure_ascii=False, indent=2), encoding="utf-8")
    at_path = out / "added_tokens.json"
    if at_path.exists():
        at = json.loads(at_path.read_text(encoding="utf-8"))
        for i, t in enumerate(reserved):
            at[t] = size + i
        for k, t in enumerate(texts):
            at[t] = first_id + k
        at_path.write_text(json.dumps(at, ensure_ascii=False, indent=2), encoding="utf-8")
    return {"base_entries": size, "reserved": len(reserved), "gpu_tokens": len(texts),
            "first_gpu_id": first_id, "special": special}
