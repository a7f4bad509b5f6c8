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
    from .demo import demo_program
    from .splice import import_circuit
    from .target import target_for_base
    return import_circuit(program)(target_for_base(base)) if program else demo_program()


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file())


def _in_child(func: str, *args: str, what: str) -> dict:
    """Run `qwengpu.splice.bench.<func>(*args)` in a child process (a clean memory state, and its
    peak RSS measurable apart from this process) and return the JSON line it prints last."""
    p = subprocess.run([sys.executable, "-c", f"import sys; from qwengpu.splice.bench import {func}; "
                        f"{func}(*sys.argv[1:])", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _write_base(base: Path, text: dict | None = None, vision: dict | None = None):
    """A random checkpoint of Qwen3.5-2B's true shapes (or `text` / `vision`): bf16, multimodal
    layout, tied embeddings, MTP head, a byte-level BPE tokenizer of vocab - 256 entries (learnt
    from the shipped corpus, then filler entries: it encodes text, so `qwengpu kl` runs on it)."""
    from . import fixtures
    text = text or fixtures.qwen35_2b_text_config()
    fixtures.write_random_base(base, text, vision or fixtures.qwen35_2b_vision_config(),
                               tied=True, mtp=True, dtype="bfloat16", tokenizer="sized-bpe",
                               tokenizer_size=text["vocab_size"] - 256, extra_text_config={"mamba_ssm_dtype": "float32"})


def _build_child(base: str, out: str, program: str | None):
    """Run in the child process: build and print a JSON line."""
    from .splice import build, import_circuit
    prog = None
    if program:
        prog = import_circuit(program)
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
    return out


def _throughput_child(args_json: str):
    """Run in a child process (a clean memory state per model): print the figures as JSON."""
    import torch
    a = json.loads(args_json)
    print(json.dumps(_throughput(a["model"], a["text"], a["gpu"], a["decode"], getattr(torch, a["dtype"]))))


def _throughput_isolated(model_dir, ids_text, ids_gpu, decode, dtype="float32") -> dict:
    arg = json.dumps({"model": str(model_dir), "text": ids_text, "gpu": ids_gpu, "decode": decode, "dtype": dtype})
    return _in_child("_throughput_child", arg, what="throughput run")


def bench_splice(workdir: str | None = None, keep: bool = False, program: str | None = None,
                 prefill: int = 256, decode: int = 16, check: bool = True, base_throughput: bool = True,
                 log=print) -> dict:
    """Build the GPU into a random Qwen3.5-2B-shaped checkpoint and measure; returns the figures."""
    import torch

    from qwengpu.compiler import compile_program

    from .demo import demo_sequence
    from .splice import read_meta
    from .spliced import check_program, gpu_ids
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
        _write_base(base)
        figures["base"] = {"bytes": _dir_bytes(base), "write_s": time.perf_counter() - t0}
        log(f"  {figures['base']['bytes'] / 2**30:.2f} GiB in {figures['base']['write_s']:.0f} s")

        log("qwengpu build (child process) ...")
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.perf_counter()
        child = _in_child("_build_child", str(base), str(out), program or "", what="build")
        wall = time.perf_counter() - t0
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
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


# ---------------------------------------------------------------------------------------------
# the real machine in the 2B geometry

#: kernels run through the machine's GPU layers in the benchmark (TINY assembles them all)
MACHINE_KERNELS = ("dot", "atomic_inc_dec", "shift_clamp", "switch_sparse", "syncwarp")


def _verify_rows(m, kernels: str, engine: str) -> list[dict]:
    """`qwengpu.verify.verify_kernel` on each of the comma-separated kernels (oracle, simulator
    token stream, states checked after every pass)."""
    from qwengpu.suite import get
    from qwengpu.verify import verify_kernel
    rows = []
    for name in [k for k in kernels.split(",") if k]:
        r = verify_kernel(get(name), engine, machine=m, progress=False, check_states=True,
                          **({"device": "cpu"} if engine == "model" else {}))
        rows.append({"kernel": r.name, "exact": r.exact, "detail": r.detail, "tokens": r.tokens or 0,
                     "seconds": r.seconds, "margins": r.margins})
    return rows


def _machine_build_child(base: str, out: str, machine: str, kernels: str, write: str = ""):
    """Run in the child process: compile the machine for the base, splice it (without writing
    unless `write`), run kernels through its GPU layers (compact engine); print JSON."""
    from qwengpu.machine.config import config_named
    from qwengpu.runtime.checkpoint import machine_of

    from .machine_splice import compile_for_base
    from .splice import read_checkpoint, splice
    from .target import target_for_base
    ck = read_checkpoint(base)
    t0 = time.perf_counter()
    compiled = compile_for_base(target_for_base(ck), machine)
    compile_s = time.perf_counter() - t0
    rep = splice(ck, compiled, out, progress=False, dry_run=not write)
    runs = _verify_rows(machine_of(config_named(machine), compiled), kernels, "compact")
    print(json.dumps({
        "compile_s": compile_s, "splice_s": rep.seconds, "gpu_layers": rep.gpu_layers, "width": rep.width,
        "bytes": rep.bytes_written, "shards": rep.shards, "vocab": rep.vocab_size,
        "gdn_layers": sum(1 for t in compiled.schedule.layer_types if t == "linear_attention"),
        "memory_key_heads": compiled.machine_meta["fit"]["memory_key_heads"],
        "gpu_nonzero": compiled.report["nonzero"], "layer_types": list(compiled.schedule.layer_types),
        "base_layers": rep.base_layers, "intermediate": compiled.config.intermediate_size, "runs": runs}))


def _machine_whole_child(out: str, kernels: str, threads: str):
    """Run in a child process: the written spliced checkpoint loaded whole by stock transformers
    (`AutoModelForCausalLM`, fp32: the base layers and the GPU layers), kernels through its
    forward on `threads` threads (states checked); print JSON with the load time and peak RSS."""
    import torch

    from .machine_splice import open_spliced_machine
    torch.set_num_threads(int(threads))
    t0 = time.perf_counter()
    m = open_spliced_machine(out)
    model = m.model                                       # loads the checkpoint
    res = {"load_s": time.perf_counter() - t0, "params": sum(p.numel() for p in model.parameters()),
           "layers": model.config.num_hidden_layers, "width": model.config.hidden_size,
           "class": type(model).__name__, "threads": int(threads)}
    res["runs"] = _verify_rows(m, kernels, "model")
    res["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(res))


def _machine_stock_child(base: str, machine: str, kernels: str):
    """Run in a child process: the machine compiled for the base's layer geometry alone (dense
    fp32), kernels through the stock transformers forward on one thread; print JSON. These are
    the spliced model's GPU layers at their true shapes, small enough to load where the whole
    spliced checkpoint is not."""
    import torch

    from .machine_splice import compile_for_base_geometry
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    m = compile_for_base_geometry(base, machine, dense=True)
    out = {"compile_s": time.perf_counter() - t0, "params": sum(p.numel() for p in m.model.parameters()),
           "layers": m.compiled.config.num_hidden_layers, "width": m.compiled.config.hidden_size}
    out["runs"] = _verify_rows(m, kernels, "model")
    print(json.dumps(out))


def _decode_cost_child(args_json: str):
    """Run in a child process: seconds per cached decode step of one GDN layer, one attention layer
    and the unembedding, at a config's true shapes (random weights: the cost is the shapes'), and
    the estimate for a stack of `linear` + `full` layers; print JSON."""
    import torch
    from transformers import DynamicCache, Qwen3_5ForCausalLM, Qwen3_5TextConfig
    a = json.loads(args_json)
    torch.manual_seed(0)
    d = dict(a["config"], num_hidden_layers=2, layer_types=["linear_attention", "full_attention"], vocab_size=1024,
             tie_word_embeddings=False)
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**d))
    model = model.to_empty(device="cpu").eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    spent = {0: 0.0, 1: 0.0}
    starts = {}
    for i, layer in enumerate(model.model.layers):
        layer.register_forward_pre_hook(lambda mod, args, i=i: starts.__setitem__(i, time.perf_counter()))
        layer.register_forward_hook(lambda mod, args, out, i=i: spent.__setitem__(i, spent[i] + time.perf_counter() - starts[i]))
    steps = a["steps"]
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model(input_ids=torch.arange(32)[None], cache=cache, use_cache=True)
        model(input_ids=torch.tensor([[5]]), cache=cache, use_cache=True)                 # warm-up
        spent.update({0: 0.0, 1: 0.0})
        for t in range(steps):
            model(input_ids=torch.tensor([[t + 7]]), cache=cache, use_cache=True)
        head = torch.empty(a["vocab"], d["hidden_size"]).normal_(0, 0.02)
        x = torch.randn(1, d["hidden_size"])
        x @ head.T
        t0 = time.perf_counter()
        for _ in range(steps):
            x @ head.T
        t_head = (time.perf_counter() - t0) / steps
    t_lin, t_full = spent[0] / steps, spent[1] / steps
    per_token = a["linear"] * t_lin + a["full"] * t_full + t_head
    print(json.dumps({"linear_layer_s": t_lin, "full_layer_s": t_full, "unembedding_s": t_head,
                      "linear_layers": a["linear"], "full_layers": a["full"], "decode_s_per_token": per_token,
                      "decode_tok_s": 1.0 / per_token}))


def _decode_cost(config: dict, linear: int, full: int, vocab: int, steps: int = 6) -> dict:
    arg = json.dumps({"config": config, "linear": linear, "full": full, "vocab": vocab, "steps": steps})
    return _in_child("_decode_cost_child", arg, what="decode timing")


def bench_splice_machine(machine: str = "tiny", workdir: str | None = None, keep: bool = False,
                         kernels=MACHINE_KERNELS, stock_kernels=("dot",), base_throughput: bool = True, log=print,
                         text_config: dict | None = None, vision_config: dict | None = None,
                         write: bool = False, whole_kernels=("dot",), threads=(1, 2)) -> dict:
    """The real machine spliced into a random Qwen3.5-2B-shaped checkpoint: build figures, the
    launches' exactness through its GPU layers, and fp32 decode speed. Returns the figures.

    The spliced checkpoint of TINY in this geometry is ~10 B parameters (its ~46 GPU layers have
    the base's full layer shape, an MLP of 6144 and 16 GDN heads of 128 x 128 each, mostly zeros):
    tens of GiB that neither this machine's disk budget nor its 24 GiB of memory hold. So the
    splice is a dry run (every output tensor computed, sizes counted, nothing written), the
    launches run on the compact engine over the compiled GPU layers (the spliced model's, with
    the base's features in front), `stock_kernels` run through the stock transformers forward
    of the GPU layers compiled alone (dense fp32, the base's layer geometry without its features:
    ~12 GiB for TINY in the 2B), and the whole spliced model's speed is estimated from timed
    decode steps of one GDN and one attention layer of the spliced shapes plus the unembedding.
    `text_config` / `vision_config`: other base shapes (the tests use small ones).

    `write=True` writes the spliced checkpoint instead of a dry run and then loads it whole with
    stock transformers (`AutoModelForCausalLM`, fp32) in a child process per thread count in
    `threads`, running `whole_kernels` through the whole model's forward: its size on disk, load
    time, peak RSS and decode tokens/s. Where the checkpoint fits (TINY in the 2B: ~16 GiB in fp32)."""
    import torch

    from .checkpoint import read_checkpoint
    root = Path(workdir or tempfile.mkdtemp(prefix="qwengpu-bench-machine-"))
    root.mkdir(parents=True, exist_ok=True)
    base, out = root / "base", root / "spliced"
    if base.exists():
        shutil.rmtree(base)
    figures: dict = {"machine": {"cpus": os.cpu_count(), "torch": torch.__version__,
                                 "threads": torch.get_num_threads(), "load_average": os.getloadavg()},
                     "gpu": machine, "shape": "Qwen3.5-2B" if text_config is None else "custom"}
    try:
        log("writing a random Qwen3.5-2B-shaped base (bf16, multimodal layout, MTP head) ...")
        t0 = time.perf_counter()
        _write_base(base, text_config, vision_config)
        figures["base"] = {"bytes": _dir_bytes(base), "write_s": time.perf_counter() - t0}
        log(f"  {figures['base']['bytes'] / 2**30:.2f} GiB in {figures['base']['write_s']:.0f} s")
        how = "written" if write else "dry run"
        log(f"compile machine {machine} for the base + splice ({how}) + kernels on its GPU layers (child) ...")
        t0 = time.perf_counter()
        child = _in_child("_machine_build_child", str(base), str(out), machine, ",".join(kernels),
                          "write" if write else "", what="machine build")
        wall = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        figures["build"] = {"wall_s": wall, "peak_rss_bytes": peak, **child}
        log(f"  compile {child['compile_s']:.0f} s, splice ({how}) {child['splice_s']:.0f} s, "
            f"{child['gpu_layers']} GPU layers ({child['gdn_layers']} GDN), width {child['width']}, "
            f"{child['bytes'] / 2**30:.1f} GiB, peak RSS {peak / 2**30:.2f} GiB")
        for r in child["runs"]:
            log(f"  {r['kernel']}: exact={r['exact']} {r['tokens']} tokens in {r['seconds']:.1f} s")
        if write:
            figures["written"] = {"bytes": _dir_bytes(out), "loads": []}
            log(f"  written: {figures['written']['bytes'] / 2**30:.2f} GiB on disk")
            for n in threads:
                log(f"the whole spliced checkpoint through stock transformers, fp32, {n} thread(s) (child) ...")
                w = _in_child("_machine_whole_child", str(out), ",".join(whole_kernels), str(n),
                              what="whole-model run")
                figures["written"]["loads"].append(w)
                log(f"  {w['class']}: {w['layers']} layers, width {w['width']}, {w['params'] / 1e9:.2f} B "
                    f"parameters, loaded in {w['load_s']:.0f} s, peak RSS {w['peak_rss_bytes'] / 2**30:.2f} GiB")
                for r in w["runs"]:
                    log(f"  {r['kernel']}: exact={r['exact']} {r['tokens']} tokens in {r['seconds']:.1f} s")
            stock_kernels = ()                            # the whole model ran them: no GPU-only run
        if stock_kernels:
            log("the GPU layers alone, dense fp32, through stock transformers (child) ...")
            figures["stock"] = _in_child("_machine_stock_child", str(base), machine, ",".join(stock_kernels),
                                         what="stock forward run")
            for r in figures["stock"]["runs"]:
                log(f"  {r['kernel']}: exact={r['exact']} {r['tokens']} tokens in {r['seconds']:.1f} s")
        ck = read_checkpoint(base)
        tc = ck.hf_text_config().to_dict()
        keep_keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                     "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim", "rms_norm_eps", "rope_parameters",
                     "max_position_embeddings", "attn_output_gate")
        cfg = {k: tc[k] for k in keep_keys if k in tc}
        n_lin = sum(1 for t in tc["layer_types"] if t == "linear_attention")
        n_full = len(tc["layer_types"]) - n_lin
        log("fp32 decode cost at the true shapes (timed layers, child processes) ...")
        figures["base"]["decode"] = _decode_cost(cfg, n_lin, n_full, ck.vocab_size)
        gl = child["layer_types"]
        g_lin = sum(1 for t in gl if t == "linear_attention")
        figures["spliced"] = {"bytes": child["bytes"],
                              "decode": _decode_cost(dict(cfg, hidden_size=child["width"]), n_lin + g_lin,
                                                     n_full + len(gl) - g_lin, child["vocab"])}
        log(f"  base {figures['base']['decode']['decode_tok_s']:.2f} tok/s, spliced "
            f"{figures['spliced']['decode']['decode_tok_s']:.3f} tok/s (estimated)")
        if base_throughput:
            log("tokens/s of the base model, measured (fp32, stock transformers, own process) ...")
            g = torch.Generator().manual_seed(0)
            ids = torch.randint(10, ck.vocab_size - 256, (64,), generator=g).tolist()
            figures["base"]["fp32"] = _throughput_isolated(base, ids, None, 8)
            log("  " + ", ".join(f"{k} {v:.3g}" for k, v in figures["base"]["fp32"].items()))
    finally:
        if not keep and workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    return figures


def print_machine_figures(f: dict):
    gib = 2 ** 30
    b, s, bu = f["base"], f["spliced"], f["build"]
    print(f"{f.get('shape', 'Qwen3.5-2B')} geometry (random weights), machine {f['gpu']} spliced in")
    print(f"  base checkpoint      {b['bytes'] / gib:7.2f} GiB (bf16)")
    how = "written" if f.get("written") else "computed by a dry-run splice (not written)"
    print(f"  spliced checkpoint   {s['bytes'] / gib:7.2f} GiB, {how}: "
          f"{bu['gpu_layers']} GPU layers ({bu['gdn_layers']} GDN) + {bu['base_layers']}, width {bu['width']}, vocabulary {bu['vocab']}")
    print(f"  machine memories     {bu['memory_key_heads']} GDN key heads (banked, spread over layers)")
    print(f"  build time           {bu['wall_s']:7.1f} s in all (compile {bu['compile_s']:.1f} s, splice "
          f"{bu['splice_s']:.1f} s, and the kernels)")
    print(f"  build peak memory    {bu['peak_rss_bytes'] / gib:7.2f} GiB RSS")
    for r in bu["runs"]:
        mg = r["margins"]
        print(f"  {r['kernel']:16} exact={r['exact']}  {r['tokens']} tokens, {r['tokens'] / r['seconds']:.1f} tok/s "
              f"(compact engine, GPU layers), logit gap {mg.get('logit_gap', float('nan')):.2f}, residual "
              f"{mg.get('residual', float('nan')):.3f}, form noise {mg.get('form_noise', float('nan')):.3f}")
    for w in (f.get("written") or {}).get("loads", []):
        print(f"  whole checkpoint     {w['class']} (stock transformers, fp32, {w['threads']} thread(s)): {w['layers']} "
              f"layers, {w['params'] / 1e9:.2f} B parameters, loaded in {w['load_s']:.0f} s, peak RSS "
              f"{w['peak_rss_bytes'] / gib:.2f} GiB")
        for r in w["runs"]:
            print(f"  {r['kernel']:16} exact={r['exact']}  {r['tokens']} tokens in {r['seconds']:.1f} s "
                  f"({r['tokens'] / r['seconds']:.2f} tok/s: prompt prefill + cached decode), logit gap "
                  f"{r['margins'].get('logit_gap', float('nan')):.2f}")
    st = f.get("stock")
    if st:
        print(f"  GPU layers alone     {st['layers']} layers, width {st['width']}, {st['params'] / 1e9:.2f} B parameters "
              f"dense fp32 (compiled in {st['compile_s']:.0f} s), through stock transformers:")
        for r in st["runs"]:
            print(f"  {r['kernel']:16} exact={r['exact']}  {r['tokens']} tokens in {r['seconds']:.1f} s (one thread, "
                  f"prompt prefill + cached decode), logit gap {r['margins'].get('logit_gap', float('nan')):.2f}")
    for name, d in (("base", b["decode"]), ("spliced", s["decode"])):
        print(f"  {name:8} fp32 decode {d['decode_tok_s']:.3f} tok/s estimated ({d['linear_layers']} GDN layers x "
              f"{d['linear_layer_s'] * 1e3:.0f} ms + {d['full_layers']} attention x {d['full_layer_s'] * 1e3:.0f} ms "
              f"+ unembedding {d['unembedding_s'] * 1e3:.0f} ms)")
    if b.get("fp32"):
        ratio = b["fp32"]["decode_text_tok_s"] / b["decode"]["decode_tok_s"]
        print(f"  base     fp32 decode {b['fp32']['decode_text_tok_s']:.3f} tok/s measured (whole model): "
              f"{ratio:.2f}x the estimate; the spliced model's estimate x {ratio:.2f} = "
              f"{s['decode']['decode_tok_s'] * ratio:.3f} tok/s")
