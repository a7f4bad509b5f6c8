"""`qwengpu bench`: throughput of an engine on the kernel suite (figures, not tests)."""
from __future__ import annotations

import statistics
import time

from .assembler import AssemblerError


def bench(engine: str = "interp", names=None, repeat: int = 3, out=print, **options) -> list[dict]:
    """One row per kernel: steps, lane-instructions (the interpreter's count), tokens per launch,
    tokens per lane-instruction, seconds (best of `repeat`), lane-instructions/s, tokens/s."""
    from . import suite
    from .api import load_program, run
    if engine in ("model", "compact"):
        options.setdefault("progress", False)
        if options.get("machine") is None:         # load once: the timings are of launches, not loads
            from .runtime.checkpoint import load_machine
            options["machine"] = load_machine(dense=engine == "model")
    ks = [suite.get(n) for n in names] if names else suite.kernels()
    rows = []
    out(f"{'kernel':<26} {'steps':>7} {'lane-ins':>9} {'tokens':>7} {'tok/lane-ins':>12} "
        f"{'seconds':>8} {'lane-ins/s':>11} {'tokens/s':>9}")
    for k in ks:
        module = load_program(k.ptx())
        spec = k.spec()
        best = None
        # the workload in lane-instructions is the interpreter's count (a machine engine's bundles
        # and replays are its cost, not extra work)
        work = run(module, spec, engine="interp").lane_instructions if engine != "interp" else None
        try:
            for _ in range(max(1, repeat)):
                t0 = time.perf_counter()
                res = run(module, spec, engine=engine, **options)
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
        except AssemblerError as e:               # the machine refuses it (the verify command lists why)
            out(f"{k.name:<26} not supported by the machine: {str(e).splitlines()[0][:80]}")
            continue
        tok = res.tokens
        if work is not None:
            res.lane_instructions = work
        row = {"kernel": k.name, "steps": res.steps, "lane_instructions": res.lane_instructions,
               "tokens": tok, "seconds": best, "lane_instructions_per_s": res.lane_instructions / best,
               "tokens_per_s": (tok / best) if tok else None,
               "tokens_per_lane_instruction": (tok / res.lane_instructions) if tok else None}
        rows.append(row)
        out(f"{k.name:<26} {res.steps:>7} {res.lane_instructions:>9} {tok if tok is not None else '-':>7} "
            f"{(f'{tok / res.lane_instructions:.3f}' if tok else '-'):>12} {best:>8.4f} "
            f"{res.lane_instructions / best:>11.0f} {(f'{tok / best:.1f}' if tok else '-'):>9}")
    if not rows:
        return rows
    total_li = sum(r["lane_instructions"] for r in rows)
    total_s = sum(r["seconds"] for r in rows)
    out(f"total: {len(rows)} kernels, {total_li} lane-instructions in {total_s:.3f} s = "
        f"{total_li / total_s:.0f} lane-instructions/s on engine {engine}")
    tpl = [r["tokens_per_lane_instruction"] for r in rows if r["tokens_per_lane_instruction"]]
    if tpl:
        out(f"median tokens per lane-instruction: {statistics.median(tpl):.3f}")
    return rows
