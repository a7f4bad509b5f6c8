"""What a machine costs spliced into a base's shapes, before anything is written: GPU layers, the
spliced width W, the text model's fp32 size, and where the residual is widest and why.

The width is set by the features live across the widest sublayer boundary (`compiling.layout` is
an interval colouring), so the profile of live features per boundary, with the largest variables
at the widest ones, is what to read when a unit makes the machine wider (`docs/float_units.md`,
"Width"). `qwengpu splice-size --machine NAME` prints it."""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.machine.config import BUILTIN

#: the 2B's text model is tied; its base layers alternate three GDN layers and one attention layer
_FULL_EVERY = 4


@dataclass
class SpliceSize:
    machine: str
    gpu_layers: int
    layer_types: list                       # the GPU layers' types ("linear_attention", "full_attention")
    compiled_width: int
    width: int                              # the spliced residual's width W
    gpu_tokens: int
    text_gib: float                         # the text model at the spliced shapes, fp32, tied
    profile: list = field(default_factory=list)     # live residual features per sublayer boundary
    widest: list = field(default_factory=list)      # [(sublayer, live, [(features, variable), ...])]

    def summary(self) -> str:
        lines = [f"{self.machine} in the base's shapes: {self.gpu_layers} GPU layers "
                 f"({self.layer_types.count('linear_attention')} GDN + {self.layer_types.count('full_attention')} "
                 f"attention), compiled width {self.compiled_width}, spliced width W {self.width}, "
                 f"{self.gpu_tokens} GPU tokens, text model {self.text_gib:.2f} GiB in fp32 (tied)"]
        for sub, live, top in self.widest:
            lines.append(f"  sublayer {sub:3d}: {live} features live; largest: "
                         + ", ".join(f"{name} {n}" for n, name in top))
        return "\n".join(lines)


def live_profile(compiled) -> tuple[list, dict]:
    """Residual features live across each sublayer boundary of a compiled program, and per
    boundary the live variables (name -> features)."""
    lay = compiled.layout
    last = max([e for e in lay.erased.values()] + [b for b in lay.born.values()] + [0]) + 1
    live: list = [dict() for _ in range(last + 1)]
    for v in compiled.program.residual_vars:
        born = max(lay.born.get(v.name, -1), 0)
        end = lay.erased.get(v.name, last + 1)
        for s in range(born, min(end, last + 1)):
            live[s][v.name] = v.size
    return [sum(d.values()) for d in live], live


def text_model_gib(base: dict, gpu_layer_types: list, width: int, gpu_tokens: int) -> float:
    """fp32 GiB of the text model at the spliced shapes: the base's layers and the GPU's, width W,
    the base's vocabulary plus the GPU's tokens, tied (parameters counted on the meta device)."""
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    d = dict(base)
    n = d["num_hidden_layers"]
    kinds = d.get("layer_types") or ["full_attention" if (i + 1) % _FULL_EVERY == 0 else "linear_attention"
                                     for i in range(n)]
    d["layer_types"] = list(kinds) + list(gpu_layer_types)
    d["num_hidden_layers"] = len(d["layer_types"])
    d["hidden_size"] = width
    d["vocab_size"] = d["vocab_size"] + gpu_tokens
    d["tie_word_embeddings"] = True
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**d))
    return sum(p.numel() for p in model.parameters()) * 4 / 2**30


def splice_size(machine=BUILTIN.name, base: dict | None = None, widest: int = 3, top: int = 8) -> SpliceSize:
    """Compile `machine` (a name or a `MachineConfig`) for the base's geometry (default: Qwen3.5-2B's
    text config) as the splice does and measure it: layers, widths, size, the `widest` boundaries
    with their `top` variables."""
    from .fixtures import qwen35_2b_text_config
    from .machine_splice import compile_for_base
    from .sharing import feature_map
    from .target import target_for_base
    base = dict(base or qwen35_2b_text_config())
    compiled = compile_for_base(target_for_base(base), machine)
    fm = feature_map(compiled)
    kinds = list(compiled.config.layer_types)
    gpu_tokens = compiled.config.vocab_size
    profile, live = live_profile(compiled)
    order = sorted(range(len(profile)), key=lambda s: (-profile[s], s))[:widest]
    rows = [(s, profile[s], sorted(((n, name) for name, n in live[s].items()), reverse=True)[:top]) for s in order]
    name = machine if isinstance(machine, str) else machine.name
    return SpliceSize(name, len(kinds), kinds, compiled.layout.width, fm.width, gpu_tokens,
                      text_model_gib(base, kinds, fm.width, gpu_tokens), profile, rows)
