"""The splice benchmark on the real Qwen3.5-2B geometry (a command that prints figures, not a test).

No weights can be downloaded here, so it writes a random checkpoint of Qwen3.5-2B's true shapes
in the official multimodal layout (bf16, sharded, vision tower, MTP head, a 248,064-entry
tokenizer), then measures:

- **build**: `qwengpu build` of that base in a child process: wall time (compile + splice), and
  the child's peak resident memory;
- **size** of the spliced checkpoint, against the base;
- **tokens/s** of the spliced model on this machine's CPU through stock transformers in fp32:
  prefill of a text prompt, and one-token cached decode steps on text and on GPU tokens, with
  the base model's figures beside them;
- **exactness** of the GPU inside the 2B-geometry spliced model (prefill and decode, after a
  text prefix).
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _program_for(program: str | None, base):
    from .cli import load_program
    from .demo import demo_program
    from .target import target_for_base
    return load_program(program)(target_for_base(base)) if program else demo_program()


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file())


def _build_child(base: str, out: str, program: str | None):
    """Run in the child process: build and print a JSON line."""
    from .splice import build
    prog = None
    if program:
        from .cli import load_program
        prog = load_program(program)
    rep = build(base, out, prog, progress=False)
    print(json.dumps({"compile_s": rep.compile_seconds, "splice_s": rep.seconds, "gpu_layers": rep.gpu_layers,
                      "width": rep.width, "shards": rep.shards, "notes": rep.notes}))


def _throughput(model_dir: str, ids_text: list[int], ids_gpu: list[int] | None, decode: int, dtype):
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).eval()
    load_s = time.perf_counter() - t0
    out = {"load_s": load_s, "params": sum(p.numel() for p in model.parameters())}
    with torch.no_grad():
        x = torch.tensor([ids_text])
        model(input_ids=x)                               # warm-up (allocations, page cache)
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            model(input_ids=x)
            best = min(best, time.perf_counter() - t0)
        out["prefill_tok_s"] = len(ids_text) / best

        def steps(prompt, seq):
            cache = DynamicCache(config=model.config)
            model(input_ids=torch.tensor([prompt]), cache=cache, use_cache=True)
            model(input_ids=torch.tensor([[prompt[-1]]]), cache=cache, use_cache=True)     # warm-up step
            t0 = time.perf_counter()
            for tok in seq:
                model(input_ids=torch.tensor([[tok]]), cache=cache, use_cache=True)
            return len(seq) / (time.perf_counter() - t0)
        out["decode_text_tok_s"] = steps(ids_text[:32], ids_text[32:32 + decode])
        if ids_gpu:
            out["decode_gpu_tok_s"] = steps(ids_text[:32], ids_gpu[:decode])
    del model
    return out


def _throughput_child(args_json: str):
    """Run in a child process (a clean memory state per model): print the figures as JSON."""
    import torch
    a = json.loads(args_json)
    print(json.dumps(_throughput(a["model"], a["text"], a["gpu"], a["decode"], getattr(torch, a["dtype"]))))


def _throughput_isolated(model_dir, ids_text, ids_gpu, decode, dtype="float32") -> dict:
    arg = json.dumps({"model": str(model_dir), "text": ids_text, "gpu": ids_gpu, "decode": decode, "dtype": dtype})
    p = subprocess.run([sys.executable, "-c", "import sys; from qwengpu.splice.bench import _throughput_child; "
                        "_throughput_child(sys.argv[1])", arg], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"throughput run failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench_splice(workdir: str | None = None, keep: bool = False, program: str | None = None,
                 prefill: int = 256, decode: int = 16, check: bool = True, base_throughput: bool = True,
                 log=print) -> dict:
    """Build the GPU into a random Qwen3.5-2B-shaped checkpoint and measure; returns the figures."""
    import torch
    from ..compiler import compile_program
    from . import fixtures
    from .demo import demo_sequence
    from .model import check_program, gpu_ids
    from .splice import read_meta
    from .target import target_for_base
    root = Path(workdir or tempfile.mkdtemp(prefix="qwengpu-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    base, out = root / "base", root / "spliced"
    for p in (base, out):
        if p.exists():
            shutil.rmtree(p)
    figures: dict = {"machine": {"cpus": os.cpu_count(), "torch": torch.__version__,
                                 "threads": torch.get_num_threads(), "load_average": os.getloadavg()}}
    try:
        log("writing a random Qwen3.5-2B-shaped base (bf16, multimodal layout, MTP head) ...")
        t0 = time.perf_counter()
        fixtures.write_random_base(base, fixtures.qwen35_2b_text_config(), fixtures.qwen35_2b_vision_config(),
                                   tied=True, mtp=True, dtype="bfloat16", tokenizer="wordlevel",
                                   tokenizer_size=248320 - 256, extra_text_config={"mamba_ssm_dtype": "float32"})
        figures["base"] = {"bytes": _dir_bytes(base), "write_s": time.perf_counter() - t0}
        log(f"  {figures['base']['bytes'] / 2**30:.2f} GiB in {figures['base']['write_s']:.0f} s")

        log("qwengpu build (child process) ...")
        cmd = [sys.executable, "-c", "import sys; from qwengpu.splice.bench import _build_child; "
               "_build_child(sys.argv[1], sys.argv[2], sys.argv[3] or None)", str(base), str(out), program or ""]
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"build failed:\n{p.stderr[-3000:]}")
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        child = json.loads(p.stdout.strip().splitlines()[-1])
        figures["build"] = {"wall_s": wall, **child, "peak_rss_bytes": peak_kib * 1024,
                            "peak_rss_note": "" if peak_kib > before else "(ru_maxrss of an earlier child)"}
        figures["spliced"] = {"bytes": _dir_bytes(out)}
        log(f"  {wall:.0f} s (compile {child['compile_s']:.1f} s, splice {child['splice_s']:.1f} s), peak RSS "
            f"{peak_kib / 2**20:.2f} GiB, {figures['spliced']['bytes'] / 2**30:.2f} GiB written, "
            f"{child['gpu_layers']} GPU layers, width {child['width']}")

        meta = read_meta(out)
        g = torch.Generator().manual_seed(0)
        ids_text = torch.randint(10, 248000, (prefill,), generator=g).tolist()
        prog = _program_for(program, base)
        compiled = prog if hasattr(prog, "state_dict") else compile_program(prog, target_for_base(base))
        launch = demo_sequence(compiled.program, max(decode, 24))
        if base_throughput:
            log("tokens/s of the base model (fp32, stock transformers, own process) ...")
            figures["base"]["fp32"] = _throughput_isolated(base, ids_text, None, decode)
            log("  " + ", ".join(f"{k} {v:.3g}" for k, v in figures["base"]["fp32"].items()))
        log("tokens/s of the spliced model (fp32, stock transformers, own process) ...")
        figures["spliced"]["fp32"] = _throughput_isolated(out, ids_text, gpu_ids(meta, launch), decode)
        log("  " + ", ".join(f"{k} {v:.3g}" for k, v in figures["spliced"]["fp32"].items()))
        if check:
            log("GPU exactness inside the 2B-geometry model (prefill and decode, after 32 text tokens) ...")
            from transformers import AutoModelForCausalLM
            model = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
            seq = launch[:24]
            res = {}
            for mode in ("prefill", "decode"):
                r = check_program(model, compiled, seq, meta["gpu"]["token_offset"], ids_text[:32], mode)
                res[mode] = {"exact": r.exact, "checked": r.checked, "min_code_margin": r.min_code_margin,
                             "min_logit_gap": r.min_logit_gap, "mismatches": r.mismatches[:5]}
            figures["gpu_check"] = res
            log("  " + ", ".join(f"{m}: exact={v['exact']} margin={v['min_code_margin']:.3f} "
                                 f"gap={v['min_logit_gap']}" for m, v in res.items()))
            del model
    finally:
        if not keep and workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    return figures


def print_figures(f: dict):
    gib = 2 ** 30
    b, s, bu = f["base"], f["spliced"], f["build"]
    print("Qwen3.5-2B geometry (random weights), splice benchmark")
    print(f"  base checkpoint      {b['bytes'] / gib:7.2f} GiB (bf16)")
    print(f"  spliced checkpoint   {s['bytes'] / gib:7.2f} GiB ({bu['gpu_layers']} GPU layers, width {bu['width']})")
    print(f"  build time           {bu['wall_s']:7.1f} s (compile {bu['compile_s']:.1f} s, splice {bu['splice_s']:.1f} s)")
    print(f"  build peak memory    {bu['peak_rss_bytes'] / gib:7.2f} GiB RSS {bu.get('peak_rss_note', '')}")
    for name, d in (("spliced", s.get("fp32")), ("base", b.get("fp32"))):
        if d:
            line = (f"  {name:8} fp32 CPU    prefill {d['prefill_tok_s']:.1f} tok/s, decode text "
                    f"{d['decode_text_tok_s']:.2f} tok/s")
            if "decode_gpu_tok_s" in d:
                line += f", decode GPU tokens {d['decode_gpu_tok_s']:.2f} tok/s"
            print(line + f" (load {d['load_s']:.0f} s)")
    if "gpu_check" in f:
        for m, v in f["gpu_check"].items():
            print(f"  GPU exact ({m:7})   {v['exact']} ({v['checked']} values, code margin {v['min_code_margin']:.3f}, "
                  f"logit gap {v['min_logit_gap']})")
