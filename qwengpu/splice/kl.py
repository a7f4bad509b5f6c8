"""Language behaviour of a spliced checkpoint against its base: per-token KL(base || spliced).

On every position of a text corpus (the shipped `corpus.txt` by default: prose, dialogue, code,
tables and numbers), in segments of `segment` tokens each starting a fresh context:

- **text**: KL(base || spliced) of the next-token distributions (over the base vocabulary; the
  spliced model's log-probabilities include the GPU tokens' share), and the probability mass the
  spliced model puts on GPU tokens;
- **after a launch**: the same for the spliced model fed `prefix` text tokens, then a GPU launch
  (`sample_launch` from qwengpu.json, or `launch`), then the rest of the segment, against the
  base fed the text alone. This is not zero: the base layers' attention sees the launch as
  positions with zero keys (each adds exp(0) to a softmax denominator), their causal convolutions
  see zeros where the previous text would be, and RoPE positions move on by the launch's length.
  It does not depend on which GPU tokens were used (base layers only see the anchor on them).

A baseline puts the launch in perspective: the base model's own KL when as many unrelated text
tokens (from the next segment) are inserted at the same place.

The base model runs first and its logits are kept (positions x vocabulary, fp32);
then it is freed and the spliced model runs, so peak memory is one model plus those.
"""
from __future__ import annotations

import gc
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class KLStats:
    tokens: int
    mean: float
    max: float
    gpu_mass_mean: float
    gpu_mass_max: float


@dataclass
class KLReport:
    base: str
    model: str
    dtype: str
    base_dtype: str
    segments: int
    text: KLStats
    after_launch: KLStats | None = None
    after_launch_first: KLStats | None = None      # the first 3 text tokens after each launch
    after_launch_rest: KLStats | None = None       # the others
    after_text_insert: KLStats | None = None       # baseline: the base model with as many unrelated
                                                   # text tokens inserted instead of the launch
    launch_tokens: int = 0
    seconds: float = 0.0
    notes: list = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        def line(label, s):
            return (f"  {label:<26} {s.tokens:6d} tokens  KL mean {s.mean:.3e}  max {s.max:.3e}  "
                    f"GPU-token mass mean {s.gpu_mass_mean:.3e}  max {s.gpu_mass_max:.3e}")
        out = [f"KL(base || spliced), base {self.base_dtype}, spliced {self.dtype}, {self.segments} segments:",
               line("text", self.text)]
        if self.after_launch is not None:
            out.append(line(f"after a {self.launch_tokens}-token launch", self.after_launch))
            out.append(line("  first 3 tokens after it", self.after_launch_first))
            out.append(line("  the rest", self.after_launch_rest))
        if self.after_text_insert is not None:
            out.append(line("baseline: text inserted", self.after_text_insert))
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)


def _stats(kls, masses) -> KLStats:
    import torch
    if not kls:
        return KLStats(0, 0.0, 0.0, 0.0, 0.0)
    k = torch.cat(kls).clamp_min(0.0)
    m = torch.cat(masses)
    return KLStats(int(k.numel()), float(k.mean()), float(k.max()), float(m.mean()), float(m.max()))


def _dtype(d):
    import torch
    if d is None or isinstance(d, torch.dtype):
        return d
    return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
            "float16": torch.float16, "fp16": torch.float16}[str(d)]


def measure_kl(base_dir, model_dir, text: str | None = None, *, dtype="float32", base_dtype=None,
               segment: int = 1024, prefix: int = 48, launch: list[str] | None = None, with_launch: bool = True,
               max_tokens: int | None = None, baseline: bool = True, ids: list[int] | None = None,
               progress: bool = False) -> KLReport:
    """KL(base || spliced) on `text` (default: the shipped corpus), or on token `ids` when given;
    see the module doc."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .fixtures import corpus_text
    from .splice import META, read_meta
    t0 = time.perf_counter()
    dt = _dtype(dtype)
    bdt = _dtype(base_dtype) or dt
    if text is None and ids is None:
        text = corpus_text()
    meta = read_meta(model_dir) if (Path(model_dir) / META).exists() else None
    notes = []
    given = ids is not None
    if given:
        ids = list(ids)
    else:
        tok = AutoTokenizer.from_pretrained(str(base_dir))
        ids = tok(text).input_ids
    if not given and (Path(model_dir) / "tokenizer.json").exists():
        ids2 = AutoTokenizer.from_pretrained(str(model_dir))(text).input_ids
        if ids2 != ids:
            notes.append("the spliced tokenizer encodes the text differently from the base's")
    if max_tokens:
        ids = ids[:max_tokens]
    segs = [ids[i:i + segment] for i in range(0, len(ids), segment)]
    segs = [s for s in segs if len(s) > 1]
    if not segs:                     # nothing to measure: say why instead of a report of 0 tokens
        raise ValueError(f"no text to measure: {len(ids)} token(s)"
                         + ("" if given else f" from the base's tokenizer ({type(tok).__name__}) for {len(text)} "
                            "characters") + "; give a text it tokenizes (--text), or token ids (measure_kl(ids=...))")

    launch_ids = []
    if meta is not None and with_launch:
        from .spliced import gpu_ids
        launch_ids = gpu_ids(meta, launch if launch is not None else meta["gpu"]["sample_launch"])
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=bdt).eval()
    V = base.config.vocab_size
    ref, kl_b, m_b = [], [], []
    with torch.no_grad():
        for i, s in enumerate(segs):
            ref.append(base(input_ids=torch.tensor([s])).logits[0].float())    # kept as the model's fp32 logits
            if baseline and launch_ids and len(s) > prefix + 1:
                other = segs[(i + 1) % len(segs)] if len(segs) > 1 else s[::-1]
                filler = (other * (len(launch_ids) // max(1, len(other)) + 1))[:len(launch_ids)]
                out = base(input_ids=torch.tensor([s[:prefix] + filler + s[prefix:]])).logits[0]
                lb = ref[-1][prefix:].double().log_softmax(-1)
                lo = out[prefix + len(filler):].double().log_softmax(-1)
                kl_b.append((lb.exp() * (lb - lo)).sum(-1))
                m_b.append(torch.zeros(lb.shape[0], dtype=torch.float64))
    del base
    gc.collect()

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dt).eval()
    kl_t, m_t, kl_a, m_a, kl_f, m_f, kl_r, m_r = ([] for _ in range(8))

    def compare(logits, lp_base):
        lp = logits.double().log_softmax(-1)
        pb = lp_base.double().log_softmax(-1)
        kl = (pb.exp() * (pb - lp[:, :V])).sum(-1)
        mass = lp[:, V:].exp().sum(-1) if lp.shape[1] > V else torch.zeros(lp.shape[0], dtype=torch.float64)
        return kl, mass

    with torch.no_grad():
        for s, lp_base in zip(segs, ref):
            out = model(input_ids=torch.tensor([s])).logits[0]
            k, m = compare(out, lp_base)
            kl_t.append(k)
            m_t.append(m)
            if launch_ids and len(s) > prefix + 1:
                x = s[:prefix] + launch_ids + s[prefix:]
                out = model(input_ids=torch.tensor([x])).logits[0]
                after = out[prefix + len(launch_ids):]         # predictions made at text positions after it
                k, m = compare(after, lp_base[prefix:])
                kl_a.append(k)
                m_a.append(m)
                kl_f.append(k[:3])
                m_f.append(m[:3])
                kl_r.append(k[3:])
                m_r.append(m[3:])
    del model
    gc.collect()
    rep = KLReport(str(base_dir), str(model_dir), str(dt).replace("torch.", ""), str(bdt).replace("torch.", ""),
                   len(segs), _stats(kl_t, m_t), launch_tokens=len(launch_ids),
                   seconds=time.perf_counter() - t0, notes=notes)
    if kl_a:
        rep.after_launch = _stats(kl_a, m_a)
        rep.after_launch_first = _stats(kl_f, m_f)
        rep.after_launch_rest = _stats(kl_r, m_r)
    if kl_b:
        rep.after_text_insert = _stats(kl_b, m_b)
    return rep
