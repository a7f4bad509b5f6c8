"""A reference forward of Qwen3.5's multi-token-prediction head (`mtp.*`), for checking that a
splice keeps it consistent. transformers does not run it (it ignores `mtp.*` when loading); this
follows the serving engines' Qwen3.5 MTP module:

    x = fc(concat(pre_fc_norm_embedding(embed(token t+1)), pre_fc_norm_hidden(h_t)))
    x = decoder_layer(x)            # one gated full-attention Qwen3.5 layer (causal over the draft)
    logits = lm_head(norm(x))       # predicts token t+2

where h_t is the main model's final hidden state (after its final norm).
"""
from __future__ import annotations

import copy


def mtp_logits(model_dir, hidden, next_ids):
    """Logits of the MTP head of the checkpoint at `model_dir` for hidden states `hidden`
    [T, width] (the main model's last_hidden_state) and the following tokens `next_ids` [T]."""
    import torch
    from transformers.models.qwen3_5.modeling_qwen3_5 import (Qwen3_5DecoderLayer, Qwen3_5RMSNorm,
                                                              Qwen3_5TextRotaryEmbedding)

    from .checkpoint import read_checkpoint
    ck = read_checkpoint(model_dir)
    names = ck.mtp_names()
    if not names:
        raise ValueError(f"{model_dir}: no mtp.* tensors")
    t = {k: ck.tensor(k).float() for k in names}
    tc = ck.hf_text_config()
    embed = ck.tensor(ck.prefix + "embed_tokens.weight").float()
    lm = ck.tensor("lm_head.weight").float() if "lm_head.weight" in ck.weight_map else embed
    H, eps = tc.hidden_size, tc.rms_norm_eps
    cfg = copy.deepcopy(tc)
    cfg.num_hidden_layers = 1
    cfg.layer_types = ["full_attention"]
    cfg._attn_implementation = "sdpa"
    layer = Qwen3_5DecoderLayer(cfg, 0)
    layer.load_state_dict({k[len("mtp.layers.0."):]: v for k, v in t.items() if k.startswith("mtp.layers.0.")})

    def norm(name):
        n = Qwen3_5RMSNorm(H, eps)
        n.weight.data = t[name]
        return n
    rope = Qwen3_5TextRotaryEmbedding(cfg)
    with torch.no_grad():
        e = embed[torch.as_tensor(next_ids)]
        x = torch.cat([norm("mtp.pre_fc_norm_embedding.weight")(e),
                       norm("mtp.pre_fc_norm_hidden.weight")(hidden.float())], -1) @ t["mtp.fc.weight"].T
        x = x[None]
        pos = torch.arange(x.shape[1])[None]
        x = layer(x, position_embeddings=rope(x, pos), attention_mask=None, position_ids=pos)
        return norm("mtp.norm.weight")(x[0]) @ lm.T
