"""`qwengpu kl` fits the machine the checkpoint is made for: one model alive at a time, the base's
logits kept on disk rather than in memory, the comparison in blocks of rows, and the same figures
as the whole-tensor computation.

The pair: a random text-layout base with a 32k word-level vocabulary (so the logits, not the
weights, dominate memory, as in the 2B where they are 248k wide) and the stand-in GPU spliced in.
"""
import gc
import json
import math
import os
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch

import qwengpu
from qwengpu.compiler import compile_program
from qwengpu.splice import fixtures, read_checkpoint, read_meta, splice, target_for_base
from qwengpu.splice.demo import demo_program
from qwengpu.splice.kl import measure_kl
from qwengpu.splice.spliced import gpu_ids

VOCAB = 32768
SEGMENT = 1024                  # kl's default
PREFIX = 48                     # measure_kl's default launch position


@pytest.fixture(scope="module")
def pair(module_tmp):
    root = module_tmp("kl_memory")
    base = fixtures.write_random_base(root / "base", fixtures.tiny_text_config(VOCAB, 64), tied=True,
                                      tokenizer="wordlevel", tokenizer_size=VOCAB, head_std=0.3)
    ck = read_checkpoint(base)
    splice(ck, compile_program(demo_program(attention=True, context=256), target_for_base(ck)), root / "out",
           progress=False)
    return base, root / "out"


def _ids(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(16, VOCAB, (n,), generator=g).tolist()


def _whole_tensor_figures(base_dir, model_dir, ids, segment):
    """The figures computed the direct way: both models' logits over whole segments, in float64."""
    from transformers import AutoModelForCausalLM
    launch = gpu_ids(read_meta(model_dir), read_meta(model_dir)["gpu"]["sample_launch"])
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).eval()
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    V = base.config.vocab_size
    segs = [ids[i:i + segment] for i in range(0, len(ids), segment)]
    text, after, first, rest, inserted = ([] for _ in range(5))

    def kl(lp_base, logits):
        pb, lp = lp_base.double().log_softmax(-1), logits.double().log_softmax(-1)
        return (pb.exp() * (pb - lp[:, :V])).sum(-1), lp[:, V:].exp().sum(-1)

    with torch.no_grad():
        for i, s in enumerate(segs):
            ref = base(input_ids=torch.tensor([s])).logits[0].float()
            text.append(kl(ref, model(input_ids=torch.tensor([s])).logits[0]))
            a = kl(ref[PREFIX:], model(input_ids=torch.tensor([s[:PREFIX] + launch + s[PREFIX:]])).logits[0]
                   [PREFIX + len(launch):])
            after.append(a)
            first.append((a[0][:3], a[1][:3]))
            rest.append((a[0][3:], a[1][3:]))
            other = segs[(i + 1) % len(segs)]
            filler = (other * (len(launch) // len(other) + 1))[:len(launch)]
            out = base(input_ids=torch.tensor([s[:PREFIX] + filler + s[PREFIX:]])).logits[0]
            inserted.append(kl(ref[PREFIX:], out[PREFIX + len(filler):]))

    def stats(parts):
        k = torch.cat([p[0] for p in parts]).clamp_min(0.0)
        m = torch.cat([p[1] for p in parts])
        return {"tokens": k.numel(), "mean": float(k.mean()), "max": float(k.max()),
                "gpu_mass_mean": float(m.mean()), "gpu_mass_max": float(m.max())}
    return {"text": stats(text), "after_launch": stats(after), "after_launch_first": stats(first),
            "after_launch_rest": stats(rest), "after_text_insert": stats(inserted)}


def test_kl_figures_equal_the_whole_tensor_computation(pair):
    base, out = pair
    ids = _ids(2 * 256 + 150)                   # three segments, the last one short
    rep = measure_kl(base, out, ids=ids, segment=256).to_json()
    want = _whole_tensor_figures(base, out, ids, 256)
    assert rep["after_launch"]["mean"] > 1e-6     # a figure well above rounding is compared too
    for part, figures in want.items():
        for name, value in figures.items():
            assert math.isclose(rep[part][name], value, rel_tol=1e-9, abs_tol=1e-15), (part, name, rep[part], value)


def test_the_base_is_freed_and_its_logits_are_not_in_memory_when_the_spliced_model_loads(pair, monkeypatch):
    """Every model loaded is dead when the next one loads, and the tensors alive then hold nothing
    proportional to tokens x vocabulary (before: the base's fp32 logits of the whole text)."""
    from transformers import AutoModelForCausalLM
    base, out = pair
    ids = _ids(2 * 256)
    loaded, held_at_load = [], []
    load = AutoModelForCausalLM.from_pretrained

    def tracking_load(path, *args, **kw):
        assert all(r() is None for r in loaded), f"{path}: loaded while an earlier model is still alive"
        held_at_load.append(sum(t.numel() * t.element_size() for t in gc.get_objects()
                                if isinstance(t, torch.Tensor) and not t.is_meta))
        model = load(path, *args, **kw)
        loaded.append(weakref.ref(model))
        return model
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", tracking_load)
    held_before = sum(t.numel() * t.element_size() for t in gc.get_objects() if isinstance(t, torch.Tensor))
    rep = measure_kl(base, out, ids=ids, segment=256)
    assert len(loaded) == 2 and rep.text.tokens == len(ids)
    assert all(r() is None for r in loaded), "a model outlives measure_kl"
    logits_bytes = len(ids) * VOCAB * 4
    # a few float64 figures per token at most, nothing vocabulary-wide
    assert held_at_load[1] - held_before <= 64 * len(ids), (held_at_load[1] - held_before, logits_bytes)


def test_cli_kl_peak_memory_is_one_model_plus_one_forwards_logits(pair, tmp_path):
    """Through the command line, in a child process, on one segment: the peak RSS above the
    imports' stays within the larger model, two forwards' logits and the comparison's blocks
    (before: whole-segment float64 temporaries besides, ~3x more here). The launch's forward is
    left out (--no-launch) for time: it is compared the same way, and what it keeps is tested
    above."""
    from qwengpu.splice import kl
    base, out = pair
    words = tmp_path / "words.txt"
    words.write_text(" ".join(f"w{i}" for i in _ids(SEGMENT, seed=1)))
    child = (
        "import resource, sys, json\n"
        "import torch, transformers, transformers.models.qwen3_5.modeling_qwen3_5\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "from qwengpu.cli import main\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "rc = main(sys.argv[1:])\n"
        "print(json.dumps({'rc': rc, 'before_kib': before,"
        " 'peak_kib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))\n")
    root = str(Path(qwengpu.__file__).parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [root, os.environ.get("PYTHONPATH")] if p))
    r = subprocess.run([sys.executable, "-c", child, "kl", "--base", str(base), "--model", str(out),
                        "--text", str(words), "--no-launch", "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    rep, mem = json.loads(lines[-2]), json.loads(lines[-1])
    assert mem["rc"] == 0 and rep["text"]["tokens"] == SEGMENT and rep["text"]["max"] <= 1e-6
    model_bytes = max(sum(f.stat().st_size for f in d.glob("*.safetensors")) for d in (base, out))
    width = json.loads((out / "config.json").read_text())["vocab_size"]     # the base's and the GPU's tokens
    blocks = 5 * (64 << 20)                     # a few float64 blocks of the comparison at a time
    budget = model_bytes + 2 * SEGMENT * width * 4 + blocks + (160 << 20)
    grown = (mem["peak_kib"] - mem["before_kib"]) * 1024
    assert grown <= budget, f"peak RSS grew by {grown / 2**20:.0f} MiB, budget {budget / 2**20:.0f} MiB"
    assert kl.BLOCK_ELEMENTS * 8 <= 64 << 20


def test_too_little_room_for_the_base_logits_is_said_before_the_forwards(pair, tmp_path, monkeypatch):
    import shutil
    base, out = pair
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1 << 20))
    with pytest.raises(OSError, match=r"0\.00 GiB free, the base's logits need 0\.07 GiB .*TMPDIR") as e:
        measure_kl(base, out, ids=_ids(600), segment=256, workdir=tmp_path)
    assert str(tmp_path) in str(e.value)
    assert list(tmp_path.iterdir()) == []           # the temporary folder is gone
