"""The isolation arithmetic of a splice: how a base model of width H and the GPU share one
residual stream of width W without disturbing each other.

Residual layout (width W = H + K + 1 + the GPU's dedicated features):

    [0, H)            text tokens: the base model's features, scaled by ALPHA (a power of two:
                      exact); GPU tokens: the GPU's shared features (`sharing`)
    [H, H + K)        the *text indicator*: constants c_1..c_K on every text/image token, 0 on GPU
                      tokens (K = INDICATOR_DIMS)
    H + K             the GPU's anchor (2**40 on GPU tokens, 0 on text), then its dedicated features

On a text token the anchor and the dedicated dims are exactly 0; on a GPU token the indicator is.

**Why the base model is unchanged on text (the RMSNorm identity).** A base layer's norm computes
y = x / sqrt(mean_H(x^2) + eps) * (1 + w). In the splice the same layer sees [ALPHA*x, c, 0...] of
width W, so mean_W = (ALPHA^2 * S + C2) / W with S = sum(x^2) and C2 = sum(c_k^2). Choosing

    C2 = (ALPHA^2 * H - W) * eps

gives mean_W + eps = (ALPHA^2 * H / W) * (S / H + eps) for *every* S, so the normalized base
features are x * sqrt(W / H) / sqrt(S / H + eps), and the norm weight

    1 + w' = (1 + w) * sqrt(H / W)

restores y exactly (to fp32 rounding): eps is honoured, not approximated. Every matrix that
writes the residual (o_proj, out_proj, down_proj, the embeddings, the vision merger) is scaled by
ALPHA, which is a power of two, so bf16 weights stay bit-exact. ALPHA is the smallest power of two
>= 2 with ALPHA^2 * H >= W + H. The c_k are bf16-representable and chosen greedily (largest first,
rounded down) so that their squares sum to C2 to ~2^-24 relative: a bf16 embedding matrix holds
them exactly.

**Why GPU tokens are invisible to the base layers.** The base layers read the anchor to switch
off, on GPU tokens only, the attention output gate, the GDN output gate and every MLP gate (exact
zeros), the GDN write strength beta (0: no write) and the GDN decay (exp(g) = 1): every base
sublayer adds exactly 0 to a GPU token, whose shared features the base norms see divided by the
anchor's RMS (~1e-11 per unit).

**Why GPU layers are invisible on text.** On text they see the base's features in the shared
dims, so they read the first indicator dim to switch off every sublayer there: MLP gates, GDN
output gates, beta, decays and attention output gates that read a shared dim (and every beta and
attention gate), each row with a weight from a bound (`gpu_off_weight`) that holds for any text
of base RMS up to R_INPUT and keeps every pre-activation finite. Text cannot reach a launch
between tokens either: the features that conv back taps, attention keys and the unembedding read
are dedicated (0 on text).

**GPU tokens get ~0 probability on text**: the logits of GPU tokens read the (normalized) first
indicator dim with a large negative weight; the base tokens' logits read the anchor with a large
negative weight, so on GPU positions only GPU tokens compete. The final norm leaves GPU dims
un-normalized (scale 1/s), so lm_head's GPU rows are small multiples of the compiled logit scale
and a bf16 lm_head holds them exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from qwengpu.compiler.core import ANCHOR

#: indicator dims (4 bf16 components reach ~2^-24 relative precision in the sum of squares)
INDICATOR_DIMS = 4
#: pre-activation that switches a gate off exactly (sigmoid(-1e4) == 0, silu == -0, softplus == 0)
OFF = -1.0e4
#: largest text-residual RMS for which the off-switches and penalties are guaranteed (beyond
#: it they weaken gradually): at the GPU layers' inputs (embedding / vision merger outputs) ...
R_INPUT = 1.0e3
#: ... and at the final norm
R_FINAL = 1.0e4
#: GPU-token logit on text at R_FINAL (typical text: -1e8 and below)
GPU_LOGIT_ON_TEXT = -1.0e4
#: base-token logit on GPU positions
BASE_LOGIT_ON_GPU = -1.0e5
#: a tied splice (one matrix for the embedding and the unembedding, `Geometry.tied_penalty`): the
#: GPU tokens' logit on text whose final-norm RMS is R_TIED (lower on quieter text: -1e4 at RMS 10)
R_TIED = 1.0e3
GPU_LOGIT_ON_TEXT_TIED = -1.0e2
#: ... the final norm's scale on the second indicator dim, which carries that penalty: small, so
#: the final hidden state (which the MTP head normalizes again) hardly changes
TIED_INDICATOR_SCALE = 2.0 ** -5
#: ... the logit every GPU token gets on GPU positions from the tied head's bias feature (text
#: tokens get ~0 there)
GPU_LOGIT_ON_GPU_TIED = 2.0 ** 14
#: ... and the scale of the head's part of a tied row (the final norm undoes it on the head's
#: dims): the embedding writes it into the head's features, layer 0's MLP erases it to ~1e-7 of
#: itself, and what is left multiplies the rows' constants in every logit, so it is kept small
TIED_HEAD_SCALE = 2.0 ** -16
#: the final norm scales the indicator by this (keeps it negligible in the final hidden state,
#: which the MTP head normalizes again); 2^-7 is the smallest power of two whose zero-centred
#: weight (2^-7 - 1) bf16 holds exactly
FINAL_INDICATOR_SCALE = 2.0 ** -7


def _bf16_floor(x: float) -> float:
    """The largest bf16 value <= x (x > 0): fp32 bits with the low 16 cleared."""
    bits = int(np.array(x, dtype=np.float32).view(np.uint32)) & 0xFFFF0000
    v = float(np.array(bits, dtype=np.uint32).view(np.float32))
    if v > x:
        v = float(np.array(bits - 0x10000, dtype=np.uint32).view(np.float32))
    return v


@dataclass
class Geometry:
    """The splice's constants for a base of width `hidden` and a spliced stream of width `width`."""
    hidden: int
    width: int
    eps: float
    alpha: float = 0.0
    indicator: list = field(default_factory=list)   # c_1..c_K
    gpu_width: int = 0                               # the compiled GPU's width (its norms' divisor)

    def __post_init__(self):
        H, W = self.hidden, self.width
        if W < H + INDICATOR_DIMS + 1:
            raise ValueError(f"spliced width {W} leaves no room for the indicator and the anchor "
                             f"after {H} base features")
        if not self.gpu_width:
            self.gpu_width = W
        if not self.alpha:
            a = 2.0
            while a * a * H < W + H:
                a *= 2.0
            self.alpha = a
        if not self.indicator:
            # the first two share the sum of squares (the second carries a tied splice's GPU-token
            # penalty, `tied_penalty`), the last two make up the rest
            need = (self.alpha ** 2 * H - W) * self.eps
            cs = []
            rest = need
            for k in range(INDICATOR_DIMS):
                share = rest / 2 if k == 0 else rest
                c = _bf16_floor(math.sqrt(share)) if share > 0 else 0.0
                cs.append(c)
                rest -= c * c
            self.indicator = cs

    # -- layout ----------------------------------------------------------------------------------

    @property
    def ind(self) -> int:
        """The first indicator dim."""
        return self.hidden

    @property
    def anchor(self) -> int:
        return self.hidden + INDICATOR_DIMS

    @property
    def c2(self) -> float:
        return float(sum(c * c for c in self.indicator))

    @property
    def c2_target(self) -> float:
        return (self.alpha ** 2 * self.hidden - self.width) * self.eps

    @property
    def norm_factor(self) -> float:
        """(1 + w') / (1 + w) for every base RMSNorm over the residual."""
        return math.sqrt(self.hidden / self.width)

    @property
    def mtp_scale(self) -> float:
        """The MTP head's residual scale: its input projection cannot make a constant, so its
        residual carries no indicator and uses sqrt(W/H) (then C2 = 0 in the identity)."""
        return math.sqrt(self.width / self.hidden)

    # -- rescaled norms ----------------------------------------------------------------------------

    def base_norm(self, w, extra: dict | None = None) -> np.ndarray:
        """A base RMSNorm weight (length H, zero-centred) widened to W: base dims rescaled,
        others 1 + w = 1 (w = 0) unless given in `extra` {dim: scale}."""
        w = np.asarray(w, dtype=np.float64)
        out = np.zeros(self.width)
        out[:self.hidden] = (1.0 + w) * self.norm_factor - 1.0
        for d, scale in (extra or {}).items():
            out[d] = scale - 1.0
        return out

    # -- normalized constants ------------------------------------------------------------------------

    def indicator_normed(self, r: float, k: int = 0) -> float:
        """Indicator dim k (the first by default) after a norm with scale 1 on it, for a text token
        whose base residual has RMS r (in base units): c_k / (ALPHA sqrt(H/W) sqrt(r^2 + eps))."""
        return self.indicator[k] / (self.alpha * self.norm_factor * math.sqrt(r * r + self.eps))

    def anchor_normed(self) -> float:
        """The anchor after a norm with scale 1 on it, on a GPU token (the anchor dominates)."""
        return ANCHOR / math.sqrt(ANCHOR * ANCHOR / self.width + self.eps)

    # -- the GPU layers ------------------------------------------------------------------------------

    @property
    def gpu_norm_weight(self) -> float:
        """1 + w of every GPU-layer RMSNorm: the compiled weights assume the compiled width's mean
        square, the spliced stream divides by its own width, so sqrt(W_compiled / W) restores the
        compiled normalized values (the eps term moves by a relative 1e-27: the anchor dominates)."""
        return math.sqrt(self.gpu_width / self.width)

    def gpu_anchor_normed(self) -> float:
        """The anchor after a GPU layer's norm, on a GPU token: the compiled value."""
        from qwengpu.compiler.compiling import norm_scale
        return ANCHOR * norm_scale(self.gpu_width, self.eps)

    def gpu_indicator_normed(self, r: float) -> float:
        """The first indicator dim after a GPU layer's norm, on a text token of base RMS r."""
        return self.gpu_norm_weight * self.indicator_normed(r)

    @property
    def gpu_text_feature_bound(self) -> float:
        """The largest |value| any dim can have after a GPU layer's norm on a text token, for every
        text: |x_d| <= sqrt(sum x^2) = sqrt(W) RMS(x)."""
        return math.sqrt(self.width) * self.gpu_norm_weight

    def gpu_off_weight(self, reach: float) -> float:
        """Weight on the first indicator column that puts a GPU pre-activation at <= OFF on every
        text token of base RMS <= R_INPUT, for a row whose shared-dim weights have L1 norm `reach`
        (its text pre-activation without the switch is at most reach * the feature bound)."""
        return (OFF - reach * self.gpu_text_feature_bound) / self.gpu_indicator_normed(R_INPUT)

    def gpu_off_magnitude(self, weight: float, reach: float) -> float:
        """The largest |pre-activation| a switched row can reach on text (any RMS): must stay far
        below fp32's 3.4e38 (silu(-inf) and inf * 0 are NaN)."""
        return abs(weight) * self.gpu_text_feature_bound + reach * self.gpu_text_feature_bound

    def anchor_off_weight(self) -> float:
        """Weight on the anchor column that gives OFF on GPU tokens (base layers)."""
        return OFF / self.anchor_normed()

    def gpu_logit_weight(self) -> float:
        """lm_head weight of GPU tokens on the first indicator dim (after the final norm, which
        scales the indicator by FINAL_INDICATOR_SCALE)."""
        return GPU_LOGIT_ON_TEXT / (FINAL_INDICATOR_SCALE * self.indicator_normed(R_FINAL))

    def tied_penalty(self) -> float:
        """A tied splice's GPU rows hold this (negative) on the second indicator dim: with the final
        norm's TIED_INDICATOR_SCALE there, a GPU token's logit on text of final RMS R_TIED is
        GPU_LOGIT_ON_TEXT_TIED (the rows are the GPU tokens' embeddings too: this value rides in the
        GPU's residual, 1e-4 of the anchor, where no GPU layer reads it)."""
        return GPU_LOGIT_ON_TEXT_TIED / (TIED_INDICATOR_SCALE * self.indicator_normed(R_TIED, k=1))

    def final_gpu_scale(self) -> float:
        """The final norm's scale on the GPU's dedicated dims: it undoes the normalization, so the
        final hidden state holds the GPU's raw feature values (the anchor: 2**40)."""
        from qwengpu.compiler.compiling import norm_scale
        return 1.0 / norm_scale(self.width, self.eps)

    def gpu_unembedding_scale(self) -> float:
        """lm_head's GPU rows are the compiled unembedding times this (the compiled norm scale,
        which the compiled rows divide by): small multiples of the logit scale, exact in bf16."""
        from qwengpu.compiler.compiling import norm_scale
        return norm_scale(self.gpu_width, self.eps)

    def base_logit_weight(self) -> float:
        """lm_head weight of base tokens on the anchor column (the anchor is 2**40 after the
        final norm on GPU tokens)."""
        return BASE_LOGIT_ON_GPU / ANCHOR

    def describe(self) -> dict:
        return {"hidden": self.hidden, "width": self.width, "gpu_width": self.gpu_width, "alpha": self.alpha,
                "indicator": self.indicator, "indicator_dims": list(range(self.ind, self.anchor)),
                "anchor_dim": self.anchor, "norm_factor": self.norm_factor, "eps": self.eps,
                "c2_relative_error": abs(self.c2 - self.c2_target) / self.c2_target,
                "final_indicator_scale": FINAL_INDICATOR_SCALE, "gpu_norm_weight": self.gpu_norm_weight}
