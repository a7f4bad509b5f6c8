"""`target_for_base`: the compiler target that makes a GPU fit a base model's layers."""
from __future__ import annotations

from qwengpu.compiler import Target

from .geometry import INDICATOR_DIMS


def _text_config(base):
    """A transformers Qwen3_5TextConfig from a path, a BaseCheckpoint, a config dict or object."""
    from transformers import Qwen3_5TextConfig

    from .checkpoint import BaseCheckpoint, read_checkpoint
    if isinstance(base, (str, bytes)) or hasattr(base, "__fspath__"):
        base = read_checkpoint(base)
    if isinstance(base, BaseCheckpoint):
        return base.hf_text_config()
    if isinstance(base, dict):
        d = base.get("text_config", base) if base.get("model_type") == "qwen3_5" else base
        d = {k: v for k, v in d.items() if k not in ("model_type", "transformers_version")}
        return Qwen3_5TextConfig(**d)
    return getattr(base, "text_config", None) or base


def target_for_base(base) -> Target:
    """The geometry of the base's decoder layers, so GPU layers can sit in the same stack.

    Every decoder layer of a model shares one config, so the GPU layers get the base's head
    counts and sizes, MLP width, RoPE and eps. `offset` reserves the base's hidden size plus the
    text-indicator dims (see `geometry`); the GPU's anchor follows them. `require_attention` is
    off: the base's own full-attention layers satisfy transformers' cache. `tied_head`: the GPU's
    unembedding can share its rows with the embedding (a base that ties them stays tied).
    """
    tc = _text_config(base)
    rope = dict(getattr(tc, "rope_parameters", None) or {})
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"base uses rope_type {rope.get('rope_type')!r}; GPU layers need the default RoPE")
    if getattr(tc, "linear_conv_kernel_dim", 4) != 4:
        raise ValueError("the GPU's GDN gadgets need linear_conv_kernel_dim = 4")
    if getattr(tc, "hidden_act", "silu") != "silu":
        raise ValueError("the GPU's MLP gadgets need hidden_act = silu")
    theta = rope.get("rope_theta", getattr(tc, "rope_theta", 10_000.0))
    prf = rope.get("partial_rotary_factor", getattr(tc, "partial_rotary_factor", 0.25))
    return Target(
        name=f"splice:{tc.hidden_size}",
        hidden=None,
        intermediate=int(tc.intermediate_size),
        layer_types=None,
        linear_key_heads=int(tc.linear_num_key_heads),
        linear_value_heads=int(tc.linear_num_value_heads),
        linear_key_dim=int(tc.linear_key_head_dim),
        linear_value_dim=int(tc.linear_value_head_dim),
        attn_heads=int(tc.num_attention_heads),
        attn_kv_heads=int(tc.num_key_value_heads),
        head_dim=int(getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads),
        partial_rotary_factor=float(prf),
        rope_theta=float(theta),
        rms_norm_eps=float(tc.rms_norm_eps),
        offset=int(tc.hidden_size) + INDICATOR_DIMS,
        require_attention=False,
        tied_head=True,
    )
