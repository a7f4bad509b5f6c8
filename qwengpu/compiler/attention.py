"""Attention gadgets (full-attention layers with hard, exact attention). Filled in below."""
from __future__ import annotations

import numpy as np


def emit_attention(sd, p, nodes, config, width, row, s, lay):
    h, kvh, hd = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    sd[p + "q_proj.weight"] = np.zeros((h * hd * 2, width))
    sd[p + "k_proj.weight"] = np.zeros((kvh * hd, width))
    sd[p + "v_proj.weight"] = np.zeros((kvh * hd, width))
    sd[p + "o_proj.weight"] = np.zeros((width, h * hd))
    sd[p + "q_norm.weight"] = np.zeros(hd)
    sd[p + "k_norm.weight"] = np.zeros(hd)
    if nodes:
        raise NotImplementedError("attention gadgets")
