"""Reading a local Qwen3.5 checkpoint in the official layout, without loading its weights.

Two layouts are accepted:

- **multimodal** (what Qwen publishes: `Qwen3_5ForConditionalGeneration`, config `model_type`
  "qwen3_5" with a `text_config` and a `vision_config`): text weights under
  `model.language_model.*`, the vision tower under `model.visual.*`, `lm_head.weight` (absent
  when the embeddings are tied), and a multi-token-prediction head under `mtp.*`;
- **text** (`Qwen3_5ForCausalLM.save_pretrained`, `model_type` "qwen3_5_text"): `model.*` and
  `lm_head.weight`.

Weights are `*.safetensors`, one file or shards with `model.safetensors.index.json`. Tensors are
read one at a time (`safetensors.safe_open`), so nothing here needs the model's memory.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


class NotQwen35Error(ValueError):
    """The folder is not a dense Qwen3.5 checkpoint in a layout the splicer reads."""


@dataclass
class BaseCheckpoint:
    path: Path
    config: dict                 # config.json as written (unknown keys preserved)
    layout: str                  # "multimodal" | "text"
    weight_map: dict             # tensor name -> shard file name
    prefix: str                  # text weights: "model.language_model." or "model."

    # -- configuration --------------------------------------------------------------------------

    @property
    def text_config(self) -> dict:
        return self.config["text_config"] if self.layout == "multimodal" else self.config

    @property
    def vision_config(self) -> dict | None:
        return self.config.get("vision_config") if self.layout == "multimodal" else None

    def hf_text_config(self):
        """The text config parsed by transformers (defaults and legacy keys resolved)."""
        from transformers import Qwen3_5TextConfig
        d = {k: v for k, v in self.text_config.items() if k not in ("model_type", "transformers_version")}
        return Qwen3_5TextConfig(**d)

    @property
    def hidden(self) -> int:
        return int(self.text_config["hidden_size"])

    @property
    def vocab_size(self) -> int:
        return int(self.text_config["vocab_size"])

    @property
    def num_layers(self) -> int:
        return int(self.text_config["num_hidden_layers"])

    @property
    def tied(self) -> bool:
        """Whether lm_head is the embedding matrix (no `lm_head.weight` stored)."""
        return "lm_head.weight" not in self.weight_map

    @property
    def dtype(self) -> str | None:
        return self.config.get("dtype") or self.config.get("torch_dtype") or self.text_config.get("dtype")

    # -- weights -----------------------------------------------------------------------------------

    @property
    def shards(self) -> list[str]:
        seen = []
        for f in self.weight_map.values():
            if f not in seen:
                seen.append(f)
        return sorted(seen)

    def names_in(self, shard: str) -> list[str]:
        return [k for k, f in self.weight_map.items() if f == shard]

    def open(self, shard: str):
        from safetensors import safe_open
        return safe_open(str(self.path / shard), framework="pt")

    def tensor(self, name: str):
        with self.open(self.weight_map[name]) as f:
            return f.get_tensor(name)

    def total_bytes(self) -> int:
        return sum(os.path.getsize(self.path / s) for s in self.shards)

    def mtp_names(self) -> list[str]:
        return [k for k in self.weight_map if k.startswith("mtp.")]

    def describe(self) -> dict:
        return {"path": str(self.path), "layout": self.layout, "model_type": self.config.get("model_type"),
                "hidden": self.hidden, "layers": self.num_layers, "vocab_size": self.vocab_size,
                "tied_embeddings": self.tied, "shards": len(self.shards), "mtp_tensors": len(self.mtp_names()),
                "vision": self.layout == "multimodal", "dtype": self.dtype}


def read_checkpoint(path) -> BaseCheckpoint:
    """Read config and weight index of a local Qwen3.5 checkpoint; refuse anything else clearly."""
    path = Path(path)
    if not path.is_dir():
        raise NotQwen35Error(f"{path}: not a folder (expected a local checkpoint folder with config.json "
                             "and *.safetensors)")
    cfg_path = path / "config.json"
    if not cfg_path.exists():
        raise NotQwen35Error(f"{path}: no config.json - not a Hugging Face checkpoint folder")
    config = json.loads(cfg_path.read_text())
    mt = config.get("model_type")
    archs = config.get("architectures") or []
    if mt == "qwen3_5_moe" or mt == "qwen3_5_moe_text" or any("Moe" in a for a in archs):
        raise NotQwen35Error(f"{path}: a Qwen3.5 mixture-of-experts checkpoint (model_type {mt!r}); the "
                             "splicer supports the dense Qwen3.5 models only (model_type 'qwen3_5' or "
                             "'qwen3_5_text')")
    if mt == "qwen3_5":
        layout = "multimodal"
        if not isinstance(config.get("text_config"), dict):
            raise NotQwen35Error(f"{path}: model_type 'qwen3_5' without a text_config")
        tmt = config["text_config"].get("model_type", "qwen3_5_text")
        if tmt != "qwen3_5_text":
            raise NotQwen35Error(f"{path}: text_config has model_type {tmt!r}, expected 'qwen3_5_text'")
    elif mt == "qwen3_5_text":
        layout = "text"
    else:
        raise NotQwen35Error(
            f"{path}: not a Qwen3.5 checkpoint (config.json has model_type {mt!r}"
            + (f", architectures {archs}" if archs else "")
            + "); the splicer needs a dense Qwen3.5 model: model_type 'qwen3_5' "
              "(Qwen3_5ForConditionalGeneration, as published) or 'qwen3_5_text' (Qwen3_5ForCausalLM)")
    if (path / INDEX).exists():
        index = json.loads((path / INDEX).read_text())
        weight_map = dict(index["weight_map"])
        missing = sorted({f for f in weight_map.values() if not (path / f).exists()})
        if missing:
            raise NotQwen35Error(f"{path}: the index names shards that are not there: {missing[:3]}")
    elif (path / SINGLE).exists():
        from safetensors import safe_open
        with safe_open(str(path / SINGLE), framework="pt") as f:
            weight_map = {k: SINGLE for k in f.keys()}
    else:
        bins = [p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth")]
        raise NotQwen35Error(f"{path}: no *.safetensors weights" + (f" (found {bins[:3]}: convert them to "
                             "safetensors first)" if bins else ""))
    if any(k.startswith("model.language_model.") for k in weight_map):
        prefix = "model.language_model."
    elif any(k.startswith("model.layers.") for k in weight_map):
        prefix = "model."
    else:
        raise NotQwen35Error(f"{path}: no text decoder weights (model.language_model.layers.* or model.layers.*)")
    if prefix + "embed_tokens.weight" not in weight_map:
        raise NotQwen35Error(f"{path}: no {prefix}embed_tokens.weight")
    return BaseCheckpoint(path, config, layout, weight_map, prefix)
