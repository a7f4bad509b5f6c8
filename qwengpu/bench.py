"""`qwengpu bench`: throughput of engines on the kernel suite (figures, not tests).

Per kernel and engine: steps, lane-instructions (the interpreter's count), generated tokens,
tokens per lane-instruction, seconds (best of `repeat`, the whole launch: prompt and generation),
lane-instructions/s, tokens/s (generated) and passes/s (every forward pass: prompt + generated),
and the CPU seconds of the same run (this process's, all threads): tokens per CPU-second is the
honest figure on a machine whose cores other work shares.
Several engines run side by side in one command (`--engine compact,compact-ref`). `batches`
runs the selection through `run_many` in batches of B for each B (throughput against B).
`write_json` and `plot` keep the figures.
"""
from __future__ import annotations

import platform
import statistics
import time
from datetime import datetime, timezone

from .assembler import AssemblerError
from .api import MODEL_ENGINES


def _machine_for(engine: str, options: dict) -> dict:
    opts = dict(options)
    if engine in MODEL_ENGINES:
        opts.setdefault("progress", False)
        if opts.get("machine") is None:          # load once: the timings are of launches, not loads
            from .runtime.checkpoint import load_machine
            opts["machine"] = load_machine(dense=engine == "model", progress=False)
    else:
        opts.pop("machine", None)
        opts.pop("device", None)
        opts.pop("progress", None)
    return opts


def bench_engine(engine: str, kernels, repeat: int, options: dict, out=print, record=None) -> list[dict]:
    """One row per kernel on one engine (kernels the machine cannot assemble are listed, not timed).
    `record(module, spec, engine=, machine=)` (the model engines): the launch also recorded by it,
    timed (the CLI passes the lab's `trace_launch`: taps, decoding, the interpreter's trace and the
    checks included; the lab sits above this module), each recording right after a bare run, so
    that both see the machine in the same state (its speed drifts by tens of percent over a
    minute on a shared VM), the best of each kept."""
    from .api import load_program, run
    opts = _machine_for(engine, options)
    recording = record is not None and engine in MODEL_ENGINES
    if engine in MODEL_ENGINES and kernels:       # load the engine's (and the recorder's) compiled code before timing
        from . import suite
        warm = (suite.get("dot").ptx(), suite.get("dot").spec())
        run(*warm, engine=engine, **opts)
        if recording:
            record(*warm, engine=engine, machine=opts["machine"])
    rows = []
    for k in kernels:
        module, spec = load_program(k.ptx()), k.spec()
        work = run(module, spec, engine="interp").lane_instructions
        best = cpu = res = rec = None
        try:
            for _ in range(max(1, repeat)):
                t0, c0 = time.perf_counter(), time.process_time()
                res = run(module, spec, engine=engine, **opts)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                if best is None or dt < best:
                    best, cpu = dt, dc
                if recording:
                    took = _timed(lambda: record(module, spec, engine=engine, machine=opts["machine"]))
                    rec = took if rec is None else min(rec, took)
        except AssemblerError as e:               # the machine refuses it (`qwengpu verify` says why)
            out(f"{k.name:<26} {engine}: not supported by the machine: {str(e).splitlines()[0][:70]}")
            continue
        tok = res.tokens
        passes = (tok + len(res.extra["prompt"])) if tok is not None else None
        recorded = {"record_seconds": rec, "record_passes_per_s": passes / rec if passes else None} if recording else {}
        rows.append({**recorded, "kernel": k.name, "engine": engine, "steps": res.steps, "lane_instructions": work,
                     "tokens": tok, "passes": passes, "seconds": best, "cpu_seconds": cpu,
                     "lane_instructions_per_s": work / best,
                     "tokens_per_s": tok / best if tok else None, "passes_per_s": passes / best if passes else None,
                     "tokens_per_cpu_s": tok / cpu if tok and cpu else None,
                     "tokens_per_lane_instruction": tok / work if tok and work else None})
    return rows


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_batches(engine: str, kernels, sizes, options: dict) -> list[dict]:
    """The selection through `run_many` in batches of each size: generated tokens and forward
    passes per second of the whole selection."""
    from .api import load_program, run_many
    opts = _machine_for(engine, options)
    progs, specs = [], []
    for k in kernels:
        try:
            from .assembler import assemble
            m = load_program(k.ptx())
            assemble(m, k.spec(), config=opts["machine"].config)
        except AssemblerError:
            continue
        progs.append(m)
        specs.append(k.spec())
    rows = []
    for size in sizes:
        t0 = time.perf_counter()
        res = run_many(progs, specs, engine=engine, batch_size=size, **opts)
        dt = time.perf_counter() - t0
        tok = sum(r.tokens for r in res)
        passes = tok + sum(len(r.extra["prompt"]) for r in res)
        rows.append({"engine": engine, "batch": size, "launches": len(res), "tokens": tok, "passes": passes,
                     "seconds": dt, "tokens_per_s": tok / dt, "passes_per_s": passes / dt})
    return rows


def summary(rows: list[dict]) -> dict:
    """Totals of one engine's rows: tokens/s = all generated tokens over all seconds (wall), and
    per CPU-second."""
    sec = sum(r["seconds"] for r in rows)
    cpu = sum(r["cpu_seconds"] for r in rows)
    tok = sum(r["tokens"] or 0 for r in rows)
    passes = sum(r["passes"] or 0 for r in rows)
    li = sum(r["lane_instructions"] for r in rows)
    tpl = [r["tokens_per_lane_instruction"] for r in rows if r["tokens_per_lane_instruction"]]
    return {"kernels": len(rows), "seconds": sec, "cpu_seconds": cpu, "tokens": tok, "passes": passes,
            "lane_instructions": li,
            "tokens_per_s": tok / sec if sec and tok else None, "passes_per_s": passes / sec if sec and passes else None,
            "tokens_per_cpu_s": tok / cpu if cpu and tok else None,
            "passes_per_cpu_s": passes / cpu if cpu and passes else None,
            "lane_instructions_per_s": li / sec if sec else None,
            "median_tokens_per_lane_instruction": statistics.median(tpl) if tpl else None}


def bench(engine: str = "interp", names=None, repeat: int = 3, out=print, batches=None, record=None,
          **options) -> dict:
    """`engine`: one engine or several (a list, or "a,b"); returns {"engines": {engine: {"rows",
    "summary"}}, "batches": [...], "host", "date"} and prints the table. `record`: a recorder (the
    lab's `trace_launch`) each launch on a model engine is also recorded with (its passes/s
    printed beside the bare run's)."""
    from . import suite
    engines = engine.split(",") if isinstance(engine, str) else list(engine)
    ks = [suite.get(n) for n in names] if names else suite.kernels()
    report = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "host": {"machine": platform.machine(), "processor": platform.processor() or platform.machine(),
                       "python": platform.python_version()},
              "engines": {}, "batches": []}
    for e in engines:
        rows = bench_engine(e, ks, repeat, options, out, record=record)
        report["engines"][e] = {"rows": rows, "summary": summary(rows)}
    _print_table(report, out)
    for e in engines:
        for r in report["engines"][e]["rows"]:
            if r.get("record_seconds"):
                out(f"{r['kernel']:<26} {e} recorded (the lab): {r['record_passes_per_s']:.0f} passes/s "
                    f"against {r['passes_per_s']:.0f} bare ({r['record_seconds'] / r['seconds']:.1f}x its time)")
    for e in engines:
        if batches and e in MODEL_ENGINES:
            report["batches"] += bench_batches(e, ks, batches, options)
    for b in report["batches"]:
        out(f"{b['engine']} batch {b['batch']:>3}: {b['launches']} launches, {b['tokens']} tokens in "
            f"{b['seconds']:.1f} s = {b['tokens_per_s']:.0f} tokens/s ({b['passes_per_s']:.0f} passes/s)")
    return report


def _print_table(report: dict, out) -> None:
    engines = list(report["engines"])
    by = {e: {r["kernel"]: r for r in report["engines"][e]["rows"]} for e in engines}
    names = list(dict.fromkeys(k for e in engines for k in by[e]))
    head = f"{'kernel':<26} {'steps':>6} {'lane-ins':>9} {'tokens':>7} {'tok/li':>7}"
    for e in engines:
        head += f" {e + ' s':>13} {'tok/s':>8}"
    out(head)
    for n in names:
        first = next(by[e][n] for e in engines if n in by[e])
        tok = first["tokens"]
        ratio = f"{tok / first['lane_instructions']:.3f}" if tok else "-"
        line = (f"{n:<26} {first['steps']:>6} {first['lane_instructions']:>9} {tok if tok is not None else '-':>7} "
                f"{ratio:>7}")
        for e in engines:
            r = by[e].get(n)
            rate = f"{r['tokens_per_s']:.1f}" if r and r["tokens_per_s"] else "-"
            line += f" {r['seconds']:>13.4f} {rate:>8}" if r else f" {'-':>13} {'-':>8}"
        out(line)
    for e in engines:
        s = report["engines"][e]["summary"]
        if not s["kernels"]:
            continue
        line = (f"total {e}: {s['kernels']} kernels, {s['lane_instructions']} lane-instructions in "
                f"{s['seconds']:.3f} s = {s['lane_instructions_per_s']:.0f} lane-instructions/s")
        if s["tokens_per_s"]:
            line += (f", {s['tokens']} tokens = {s['tokens_per_s']:.1f} tokens/s "
                     f"({s['passes']} forward passes = {s['passes_per_s']:.1f} passes/s)")
        out(line)
        if s["tokens_per_cpu_s"]:
            out(f"  CPU time {e}: {s['cpu_seconds']:.3f} s = {s['tokens_per_cpu_s']:.1f} tokens per CPU-second "
                f"({s['passes_per_cpu_s']:.1f} passes per CPU-second)")
        if s["median_tokens_per_lane_instruction"]:
            out(f"median tokens per lane-instruction ({e}): {s['median_tokens_per_lane_instruction']:.3f}")
    if len(engines) == 2 and all(report["engines"][e]["summary"]["tokens_per_s"] for e in engines):
        a, b = (report["engines"][e]["summary"]["tokens_per_s"] for e in engines)
        out(f"{engines[0]} / {engines[1]}: {a / b:.1f}x the tokens/s")


def write_json(report: dict, path) -> None:
    import json
    from pathlib import Path
    Path(path).write_text(json.dumps(report, indent=1))


def plot(report: dict, path) -> None:
    """tokens/s per kernel, engine against engine (log scale), and throughput against batch size."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    engines = [e for e in report["engines"] if any(r["tokens_per_s"] for r in report["engines"][e]["rows"])]
    has_batches = bool(report["batches"])
    fig, axes = plt.subplots(1, 2 if has_batches else 1, figsize=(16 if has_batches else 12, 6),
                             gridspec_kw={"width_ratios": [3, 1]} if has_batches else None, squeeze=False)
    ax = axes[0][0]
    names = list(dict.fromkeys(r["kernel"] for e in engines for r in report["engines"][e]["rows"]))
    width = 0.8 / max(1, len(engines))
    for i, e in enumerate(engines):
        by = {r["kernel"]: r["tokens_per_s"] or 0 for r in report["engines"][e]["rows"]}
        ax.bar([j + i * width for j in range(len(names))], [by.get(n, 0) for n in names], width,
               label=f"{e} ({report['engines'][e]['summary']['tokens_per_s'] or 0:.0f} tokens/s overall)")
    ax.set_xticks([j + width * (len(engines) - 1) / 2 for j in range(len(names))])
    ax.set_xticklabels(names, rotation=90, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("generated tokens / s (whole launch)")
    ax.set_title(f"qwengpu bench, {report['date']}")
    ax.legend()
    if has_batches:
        bx = axes[0][1]
        for e in dict.fromkeys(b["engine"] for b in report["batches"]):
            bs = [b for b in report["batches"] if b["engine"] == e]
            bx.plot([b["batch"] for b in bs], [b["tokens_per_s"] for b in bs], "o-", label=e)
        bx.set_xscale("log", base=2)
        bx.set_xlabel("launches per batch")
        bx.set_ylabel("generated tokens / s")
        bx.set_title("throughput against batch size")
        bx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
