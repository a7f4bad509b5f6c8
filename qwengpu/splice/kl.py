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

Memory: one model at a time, and nothing the size of the corpus times the vocabulary in memory.
The base model runs first; its fp32 logits go to a temporary file (positions x base vocabulary x
4 bytes: ~1 GB per 1,000 tokens of a 248k vocabulary; in `workdir`, default the system's temporary
folder, $TMPDIR: put it on disk, not a RAM-backed tmpfs) and it is freed before the spliced model is loaded. The spliced model's logits are then
compared with the base's read back a block of rows at a time, so the float64 work stays small (the
same per-row arithmetic as on whole tensors, so the same numbers). Peak memory is the larger model,
plus one forward's logits (segment x vocabulary, fp32), plus small blocks.
"""
from __future__ import annotations

import gc
import shutil
import tempfile
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


# elements per float64 temporary in the comparison (64 MB): a block of rows of the vocabulary
BLOCK_ELEMENTS = 1 << 23


def _block_rows(width: int) -> int:
    return max(1, BLOCK_ELEMENTS // max(1, width))


class _LogitFile:
    """fp32 logits rows (positions x vocabulary) appended to a file and read back by row ranges,
    with plain reads (no mapping), so only the rows asked for are in memory."""

    def __init__(self, path: Path, width: int):
        self.path, self.width, self.rows = path, width, 0
        self._f = open(path, "w+b")

    def append(self, logits) -> int:
        """Writes the rows of a (rows x width) tensor; returns the index of its first row."""
        import torch
        a = logits.detach().to(torch.float32).contiguous().numpy()
        if a.ndim != 2 or a.shape[1] != self.width:
            raise ValueError(f"logits of shape {a.shape} for a file of rows of {self.width}")
        self._f.seek(self.rows * self.width * 4)
        self._f.write(memoryview(a).cast("B"))          # straight from the tensor's memory, no copy
        first, self.rows = self.rows, self.rows + a.shape[0]
        return first

    def read(self, first: int, count: int):
        import numpy as np
        import torch
        a = np.empty((count, self.width), dtype=np.float32)
        self._f.seek(first * self.width * 4)
        if self._f.readinto(memoryview(a).cast("B")) != a.nbytes:
            raise OSError(f"{self.path}: rows {first}..{first + count} not all there")
        return torch.from_numpy(a)

    def rows_from(self, first: int) -> _Rows:
        return _Rows(self, first)

    def close(self) -> None:
        self._f.close()


class _Rows:
    """The rows of a `_LogitFile` from `first` on, sliced like a tensor (`rows[a:b]`)."""

    def __init__(self, store: _LogitFile, first: int):
        self.store, self.first = store, first

    def __getitem__(self, rows: slice):
        return self.store.read(self.first + rows.start, rows.stop - rows.start)


def _compare(logits, base, vocab: int):
    """KL(base || model) over the first `vocab` entries and the model's mass beyond them, per row:
    `logits` (rows x model vocabulary, any float dtype); `base[a:b]` gives the base's logits of
    rows a..b (a tensor, or `_Rows` of the file). In blocks of rows, so the float64 temporaries stay small; each row's arithmetic
    is the whole-tensor one's."""
    import torch
    n, width = logits.shape
    step = _block_rows(max(width, vocab))
    kls, masses = [], []
    for a in range(0, n, step):
        b = min(n, a + step)
        lp = logits[a:b].double().log_softmax(-1)
        pb = base[a:b].double().log_softmax(-1)
        kls.append((pb.exp() * (pb - lp[:, :vocab])).sum(-1))
        masses.append(lp[:, vocab:].exp().sum(-1) if width > vocab else torch.zeros(b - a, dtype=torch.float64))
        del lp, pb
    if not kls:
        return torch.zeros(0, dtype=torch.float64), torch.zeros(0, dtype=torch.float64)
    return torch.cat(kls), torch.cat(masses)


def _dtype(d):
    import torch
    if d is None or isinstance(d, torch.dtype):
        return d
    return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
            "float16": torch.float16, "fp16": torch.float16}[str(d)]


def measure_kl(base_dir, model_dir, text: str | None = None, *, dtype="float32", base_dtype=None,
               segment: int = 1024, prefix: int = 48, launch: list[str] | None = None, with_launch: bool = True,
               max_tokens: int | None = None, baseline: bool = True, ids: list[int] | None = None,
               progress: bool = False, workdir=None) -> KLReport:
    """KL(base || spliced) on `text` (default: the shipped corpus), or on token `ids` when given;
    see the module doc. `workdir`: where the base's logits are kept meanwhile (default: the
    system's temporary folder, $TMPDIR; 4 bytes x base vocabulary per token, checked first)."""
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
    with tempfile.TemporaryDirectory(prefix="qwengpu-kl-", dir=workdir) as tmp:
        base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=bdt).eval()
        V = base.config.vocab_size
        need = sum(len(s) for s in segs) * V * 4
        free = shutil.disk_usage(tmp).free
        if free < need:          # said now rather than after the base's forwards
            raise OSError(f"{tmp}: {free / 2**30:.2f} GiB free, the base's logits need {need / 2**30:.2f} GiB "
                          f"({sum(len(s) for s in segs)} tokens x {V} x 4 bytes); set TMPDIR (measure_kl: "
                          "workdir=) to a folder with room, or measure fewer tokens (--max-tokens)")
        store = _LogitFile(Path(tmp) / "base-logits.f32", V)
        try:
            first_rows, kl_b, m_b = [], [], []
            with torch.no_grad():
                for i, s in enumerate(segs):
                    ref = base(input_ids=torch.tensor([s])).logits[0].float()   # the model's fp32 logits
                    first_rows.append(store.append(ref))
                    if baseline and launch_ids and len(s) > prefix + 1:
                        other = segs[(i + 1) % len(segs)] if len(segs) > 1 else s[::-1]
                        filler = (other * (len(launch_ids) // max(1, len(other)) + 1))[:len(launch_ids)]
                        out = base(input_ids=torch.tensor([s[:prefix] + filler + s[prefix:]])).logits[0]
                        k, _ = _compare(out[prefix + len(filler):], ref[prefix:], V)
                        kl_b.append(k)
                        m_b.append(torch.zeros(k.shape[0], dtype=torch.float64))
                        del out
                    del ref
            del base                 # freed before the spliced model is loaded: one model at a time
            gc.collect()

            model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dt).eval()
            kl_t, m_t, kl_a, m_a, kl_f, m_f, kl_r, m_r = ([] for _ in range(8))
            with torch.no_grad():
                for s, r0 in zip(segs, first_rows):
                    out = model(input_ids=torch.tensor([s])).logits[0]
                    k, m = _compare(out, store.rows_from(r0), V)
                    del out
                    kl_t.append(k)
                    m_t.append(m)
                    if launch_ids and len(s) > prefix + 1:
                        x = s[:prefix] + launch_ids + s[prefix:]
                        out = model(input_ids=torch.tensor([x])).logits[0]
                        after = out[prefix + len(launch_ids):]    # predictions made at text positions after it
                        k, m = _compare(after, store.rows_from(r0 + prefix), V)
                        del out, after
                        kl_a.append(k)
                        m_a.append(m)
                        kl_f.append(k[:3])
                        m_f.append(m[:3])
                        kl_r.append(k[3:])
                        m_r.append(m[3:])
            del model
            gc.collect()
        finally:
            store.close()
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
