"""The `qwengpu` command line (also `python -m qwengpu`).

    qwengpu run FILE.cu|FILE.ptx --launch SPEC.json [--kernel NAME] [--engine interp|sim|compact|model]
                [--device cpu|cuda|mps] [--check-states] [--model DIR] [--json]
    qwengpu verify [--engine interp] [--device D] [--check-states] [--batch N | --jobs N] [--model DIR | --geometry G] [--json] [KERNEL ...]
    qwengpu bench [--engine interp|compact,compact-ref] [--batch 1,2,4] [--json F] [--plot F.png] [KERNEL ...]
    qwengpu demo [--engine compact|model|sim|interp] [--device D]
    qwengpu build [--target compact|tiny] [--out DIR] [--compact-only] [--overwrite]
    qwengpu fuzz [--seed S] [--count N] [--start I] [--engines interp,sim] [--compact-every K] [--out DIR] [--json F] [--machine M] [--sizes small|large] [--faults]
    qwengpu compile FILE.cu [-o FILE.ptx] [--arch sm_75] [--overwrite]
    qwengpu soak [--tokens 1000000] [--window 10000] [--kernel lcg_soak|float_soak] [--machine NAME]
                 [--json F] [--plot F.png]
    qwengpu lab [--dir DIR] [--port 8888] [--ip 127.0.0.1] [--token T | --no-token] [--no-build] [--no-browser]
                [-- JUPYTER_OPTION ...]

Errors go to stderr as one line with a non-zero exit status; `--debug` (anywhere on the line)
prints the traceback too.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from . import __version__
from .launch import margin_text
from .api import MODEL_ENGINES
from .api import BUILTIN_MACHINE


def _engines():
    from .api import ENGINES
    return ENGINES


def _int_at_least(least: int, what: str):
    """An argparse type: an int >= `least` (a count or size below it would check nothing)."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if n < least:
            raise argparse.ArgumentTypeError(f"expected {what}, got {n}")
        return n
    return parse


_positive_int = _int_at_least(1, "a positive integer")
_non_negative_int = _int_at_least(0, "a non-negative integer")


def _engine_list(text: str) -> tuple:
    """argparse type: comma-separated engine names, each one qwenGPU has."""
    engines = tuple(e for e in text.split(",") if e)
    unknown = [e for e in engines if e not in _engines()]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown engine {', '.join(map(repr, unknown))} "
                                         f"(available: {', '.join(_engines())})")
    return engines


def _print_result(res, spec, as_json: bool):
    if as_json:
        print(json.dumps(res.to_json()))
        return
    print(f"kernel {res.kernel} on {res.engine}: {res.steps} steps"
          + (f", {res.tokens} tokens" if res.tokens is not None else "")
          + f", {res.lane_instructions} lane-instructions")
    if res.margins():
        print(f"  smallest margins: {margin_text(res.margins())}")
    for i, (a, b) in enumerate(zip(spec.args, res.buffers)):
        if b is None:
            shown = a.value.tobytes().hex() if a.dtype == "struct" else a.value
            print(f"  arg {i}: scalar {a.dtype} = {shown}")
        else:
            shown = np.array2string(b, threshold=64, max_line_width=100)
            print(f"  arg {i}: {a.dtype}[{len(b)}] = {shown}")
    for name, v in res.symbols.items():
        print(f"  {name}: {v.dtype}[{len(v)}] = {np.array2string(v, threshold=64, max_line_width=100)}")
    if res.printf is not None:
        print("printf output (per thread, in the order each printed):")
        print("\n".join("  " + line for line in res.printf.text().splitlines()) or "  (none)")


def _model_options(args, open_machine: bool = True) -> dict:
    """--device, --check-states, --model, --geometry and --machine: options of the machine engines
    (`open_machine=False`: the machine is made elsewhere, e.g. in each worker process). --machine
    also chooses the simulator's geometry."""
    machine = getattr(args, "machine", None)
    if machine is not None and args.engine == "interp":
        raise ValueError("--machine applies to the machine engines (sim and the model engines), not the interpreter")
    if args.engine not in MODEL_ENGINES:
        if any(getattr(args, a, None) for a in ("device", "check_states", "model", "geometry")):
            raise ValueError(f"--device, --check-states, --model and --geometry apply to the model engines, not {args.engine!r}")
        return {"config": machine} if machine is not None else {}
    opts = {"device": args.device}
    if getattr(args, "check_states", False):
        opts["check_states"] = True
    factory = _machine_factory(args)
    if factory is not None and open_machine:
        opts["machine"] = factory()
    return opts


def _machine_factory(args):
    """--model DIR, --geometry G and --machine NAME as a picklable callable that makes the machine
    (worker processes call it too); None for the built-in machine."""
    import functools
    model, geometry = getattr(args, "model", None), getattr(args, "geometry", None)
    machine = getattr(args, "machine", None)
    if model and (geometry or machine):
        raise ValueError("--model's checkpoint holds its machine: give neither --geometry nor --machine with it")
    if not (model or geometry or machine):
        return None
    from .splice.machine_splice import machine_for_geometry, open_spliced_machine
    if model:
        return functools.partial(open_spliced_machine, model)
    if geometry:
        return functools.partial(machine_for_geometry, geometry, machine or BUILTIN_MACHINE)
    from .api import default_machine
    return functools.partial(default_machine, args.engine, machine=machine)


def cmd_run(args) -> int:
    from .api import run
    from .launch import LaunchSpec
    spec = LaunchSpec.from_json(args.launch)
    res = run(args.file, spec, engine=args.engine, kernel=args.kernel, max_steps=args.max_steps,
              approx=args.approx, **_model_options(args))
    _print_result(res, spec, args.json)
    return 0


def default_jobs(args) -> int:
    """`verify --jobs`'s default: a model engine's kernels shared out to one process per CPU core
    (at most one per kernel); 1 for the other engines, with --batch, or with --model (each
    process would load the checkpoint)."""
    from .suite import kernels
    if args.engine not in MODEL_ENGINES or args.batch > 1 or getattr(args, "model", None):
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, len(args.kernels or kernels())))


def cmd_verify(args) -> int:
    from .verify import verify
    if args.engine not in MODEL_ENGINES and (args.batch > 1 or (args.jobs or 1) > 1):
        raise ValueError(f"--batch and --jobs apply to the model engines ({', '.join(MODEL_ENGINES)}), "
                         f"not {args.engine!r}")
    if args.batch > 1 and (args.jobs or 1) > 1:
        raise ValueError("--batch runs the kernels in batches in one process, --jobs one by one in processes: give one")
    if args.jobs is None:
        args.jobs = default_jobs(args)
    factory = _machine_factory(args) if args.jobs > 1 else None     # each worker process makes its machine
    report = verify(engine=args.engine, names=args.kernels or None, progress=not args.json, batch_size=args.batch,
                    jobs=args.jobs, machine_factory=factory, **_model_options(args, open_machine=factory is None))
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        for row in report.rows:
            status = "exact" if row.exact else f"REFUSED by the machine: {row.detail}" if row.refused else \
                f"MISMATCH: {row.detail}"
            margins = row.margin_text()
            print(f"  {row.name:<28} {status}" + (f"  ({margins})" if margins and row.exact else ""))
    print(report.summary_line(), file=sys.stderr if args.json else sys.stdout)
    return report.exit_status


def cmd_bench(args) -> int:
    from .bench import bench, plot, write_json
    engines = args.engine.split(",")
    opts = {}
    for e in engines:
        args.engine = e
        opts.update(_model_options(args))
    repeat = args.repeat if args.repeat is not None else (1 if any(e in MODEL_ENGINES for e in engines) else 3)
    batches = [int(x) for x in args.batch.split(",")] if args.batch else None
    record = None
    if args.record:
        from .lab import trace_launch as record
    report = bench(engine=engines, names=args.kernels or None, repeat=repeat, batches=batches,
                   record=record, **opts)
    if args.json:
        write_json(report, args.json)
        print(f"figures: {args.json}")
    if args.plot:
        plot(report, args.plot)
        print(f"plot: {args.plot}")
    return 0


def cmd_bench_ops(args) -> int:
    from .opbench import OPS, bench_ops, op_named, write_json
    if args.chain < 1:
        raise ValueError(f"--chain must be at least 1, not {args.chain}")
    ops = [op_named(n) for n in args.ops] if args.ops else list(OPS)
    if args.machine is not None and args.engine != "sim":
        raise ValueError("--machine applies to the sim engine (the model engines run the built-in machine)")
    rows = bench_ops(ops, engine=args.engine, chain=args.chain, **_model_options(args))
    if args.json:
        write_json(rows, args.json)
        print(f"figures: {args.json}")
    return 0 if all(r.get("exact") or r.get("refused") for r in rows) else 1


def cmd_demo(args) -> int:
    from .api import run
    from .suite import get
    k = get("dot")
    spec = k.spec()
    a, b = spec.args[0].data, spec.args[1].data
    print(f"dot product of {a.tolist()} and {b.tolist()} on 4 lanes (atomicAdd of a[i]*b[i]), engine {args.engine}")
    t0 = time.perf_counter()
    opts = {} if args.engine in ("interp", "sim") else {"progress": True, **_model_options(args)}
    res = run(k.ptx(), spec, engine=args.engine, **opts)
    dt = time.perf_counter() - t0
    if "generated" in res.extra:
        print(f"  prompt: {len(res.extra['prompt'])} tokens (program ROM, memory, launch tables) then <go>")
        print(f"  generated: {' '.join(res.extra['generated'])}")
    print(f"  result {int(res.buffers[2][0])} in {res.steps} steps"
          + (f", {res.tokens} tokens" if res.tokens is not None else "") + f" ({dt:.2f} s)")
    if res.margins():
        print(f"  smallest margins: {margin_text(res.margins())}")
    return 0


def cmd_soak(args) -> int:
    from .soak import plot, soak
    rep = soak(tokens=args.tokens, window=args.window, progress=not args.quiet, kernel=args.kernel,
               machine=args.machine)
    w = rep.worst()
    print(f"soak: {rep.kernel} with a loop of {rep.loop_count:,}: {rep.tokens:,} tokens in {rep.seconds:.0f} s "
          f"({rep.tokens_per_s:.0f} tokens/s) on the {rep.engine} engine; "
          + ("exact (the interpreter's and the oracle's result)" if rep.exact else f"NOT EXACT: {rep.detail}"))
    print(f"  over the run: {margin_text(w)}; per window of {rep.window:,} tokens in "
          + (args.json or "the JSON (--json)"))
    if args.json:
        import json as _json
        with open(args.json, "w") as f:
            _json.dump(rep.to_json(), f)
    if args.plot:
        plot(rep, args.plot)
        print(f"  plot: {args.plot}")
    return 0 if rep.exact else 1


def cmd_lab(args) -> int:
    from .lab.server import run_lab
    return run_lab(args.dir, port=args.port, ip=args.ip, token="" if args.no_token else args.token,
                   build=not args.no_build, extra=args.jupyter_args)


def cmd_compile(args) -> int:
    from pathlib import Path

    from .cuda import compile_cuda
    out = Path(args.output) if args.output else None
    if out is not None:              # checked before compiling: a refused -o loses nothing
        if out.exists() and Path(args.file).exists() and os.path.samefile(out, args.file):
            raise ValueError(f"-o {out} is the input file: refusing to write PTX over the CUDA source")
        if out.is_dir():
            raise ValueError(f"-o {out} is a folder; give a file name (e.g. {out / Path(args.file).with_suffix('.ptx').name})")
        if out.exists() and out.suffix != ".ptx" and not args.overwrite:
            raise ValueError(f"-o {out} exists and is not a .ptx file: refusing to replace it (pass --overwrite)")
    ptx = compile_cuda(args.file, arch=args.arch)
    if out is None:
        sys.stdout.write(ptx)
        return 0
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:                             # whole or not at all: a failed write leaves the old file
        tmp.write_text(ptx)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return 0


def cmd_fuzz(args) -> int:
    from .fuzz import fuzz
    engines = args.engines
    if not engines and not args.compact_every:
        raise ValueError("--engines names no engine and --compact-every is 0: nothing would be checked")
    if args.faults:
        from .fuzz.faults import fuzz_faults
        rep = fuzz_faults(seed=args.seed, count=args.count, start=args.start,
                          engines=tuple(e for e in engines if e != "interp"),
                          log=None if args.quiet else (lambda line: print(line, flush=True)))
        for name, engine, ref, got, _ in rep.failures:
            print(f"  {name} on {engine}: interp {ref}, {engine} {got}")
        print(rep.summary())
        return 0 if not rep.failures else 1

    def log(line):
        print(line, flush=True)
    report = fuzz(seed=args.seed, count=args.count, start=args.start, engines=engines,
                  compact_every=args.compact_every, batch=args.batch, out_dir=args.out, reduce=args.reduce,
                  log=None if args.quiet else log, geometry=args.machine, mix=args.mix, sizes=args.sizes)
    for f in report.failures:
        print(f"  {f.name} (seed {f.seed}) on {f.engine}: {f.detail}" + (f" [{f.directory}]" if f.directory else ""))
    print(report.summary())
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report.to_json(), fh, indent=1)
    return 0 if not report.failures else 1


def _model_arguments(p, checks: bool = True) -> None:
    p.add_argument("--device", default=None, help="torch device of the model engine: cpu, cuda, mps "
                   "(default: the best available; the compact engine runs on the CPU)")
    p.add_argument("--machine", default=None, help="the machine's geometry: compact-fpu (the built-in one, with the float unit, "
                   "docs/float_units.md), compact (float as soft-float routines), compact-fpu-course (a course's "
                   "memory sizes and 64 threads a block, docs/memory_sizes.md), tiny; sim and the model engines")
    if checks:
        p.add_argument("--check-states", action="store_true",
                       help="model engines: compare the registers in the model's state with the simulator's after every pass")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qwengpu", description="A SIMT GPU compiled into a Qwen3.5 model.")
    p.add_argument("--version", action="version", version=f"qwengpu {__version__}")
    p.add_argument("--debug", action="store_true", help="on an error, print the traceback (anywhere on the line)")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run one kernel launch")
    r.add_argument("file", help="a .cu or .ptx file")
    r.add_argument("--launch", required=True, help="launch spec JSON file")
    r.add_argument("--kernel", help="kernel name (default: the spec's, or the only kernel)")
    r.add_argument("--engine", default="interp", choices=_engines(), help="execution engine (default: interp)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--max-steps", type=int, default=None, help="step limit (runaway loops stop here)")
    r.add_argument("--approx", choices=("allow", "refuse"), default="allow",
                   help="approximate instructions (ex2.approx, sin.approx, div.full ...): run them by "
                        "qwenGPU's definitions, within the ISA's stated error but not bit-identical to "
                        "NVIDIA hardware (allow, the default), or refuse them naming each line (refuse)")
    _model_arguments(r)
    r.add_argument("--model", help="a spliced checkpoint (qwengpu build --base .. --machine ..) to run on")
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("verify", help="run the kernel suite against its oracles",
                       epilog="exit status: 0 every kernel exact; 1 a kernel wrong (a mismatch or a fault); "
                              "3 none wrong, but the machine refused some programs (a construct it lacks "
                              "or a capacity limit: listed apart)")
    v.add_argument("kernels", nargs="*", help="suite kernels (default: all)")
    v.add_argument("--engine", default="interp", choices=_engines())
    v.add_argument("--json", action="store_true")
    v.add_argument("--batch", type=_positive_int, default=1, help="model engines: run the kernels in batches of N (run_many)")
    v.add_argument("--jobs", type=_positive_int, default=None,
                   help="model engines: share the kernels out to N processes (default: one per CPU core, at "
                        "most one per kernel; 1 with --batch, or with --model, whose checkpoint each process "
                        "would load)")
    _model_arguments(v)
    v.add_argument("--model", help="a spliced checkpoint (qwengpu build --base .. --machine ..) to run on")
    v.add_argument("--geometry", help="run on COMPACT compiled for a base's true layer shapes: qwen3.5-2b, or a "
                   "base checkpoint's directory (the GPU layers a splice adds, without the base)")
    v.set_defaults(func=cmd_verify)

    b = sub.add_parser("bench", help="throughput figures per suite kernel")
    b.add_argument("kernels", nargs="*")
    b.add_argument("--engine", default="interp",
                   help="an engine, or several side by side: compact,compact-ref (default: interp)")
    b.add_argument("--repeat", type=int, default=None, help="best of N runs per kernel (default: 3; 1 on the model)")
    b.add_argument("--batch", help="also run the selection as batches of these sizes (run_many), e.g. 1,2,4,8")
    b.add_argument("--json", help="write the figures to this JSON file")
    b.add_argument("--plot", help="write a plot (PNG) of tokens/s per kernel and against batch size")
    b.add_argument("--record", action="store_true",
                   help="model engines: also record each launch as the lab does (recorded passes/s beside the bare run's)")
    _model_arguments(b, checks=False)
    b.set_defaults(func=cmd_bench)

    bo = sub.add_parser("bench-ops", help="tokens and bundles per warp operation (int, f32, f64, math functions)")
    bo.add_argument("ops", nargs="*", help="operations by name (default: all; e.g. f32_add f32_fma)")
    bo.add_argument("--engine", default="sim", help="a machine engine: sim (default), compact, compact-ref, model")
    bo.add_argument("--chain", type=int, default=16, help="dependent operations per chain (default 16)")
    bo.add_argument("--json", help="write the rows to this JSON file")
    _model_arguments(bo, checks=False)
    bo.set_defaults(func=cmd_bench_ops)

    d = sub.add_parser("demo", help="the dot-product demo on the built-in machine")
    d.add_argument("--engine", default="compact",
                   help="compact (default: the model's weights, compact engine), model (the stock "
                        "transformers forward), sim, interp")
    _model_arguments(d, checks=False)
    d.set_defaults(func=cmd_demo)

    so = sub.add_parser("soak", help="one long launch on the compact engine: exact? margins over the run")
    so.add_argument("--tokens", type=int, default=1_000_000, help="at least this many generated tokens (default 1M)")
    so.add_argument("--window", type=int, default=10_000, help="margins per window of this many tokens")
    so.add_argument("--json", help="write the report (per-window margins) to this JSON file")
    so.add_argument("--plot", help="write the margins per window to this PNG")
    so.add_argument("--quiet", action="store_true", help="no progress bar")
    so.add_argument("--kernel", choices=["lcg_soak", "float_soak"], default="lcg_soak",
                    help="the loop: integer LCG steps (default) or a float logistic map (the float unit's ops)")
    so.add_argument("--machine", default=BUILTIN_MACHINE,
                    help="the machine's geometry: compact-fpu (the built-in one, with the float unit), compact "
                         "(float as soft-float routines)")
    so.set_defaults(func=cmd_soak)

    lb = sub.add_parser("lab", help="JupyterLab on the tutorial notebooks (prints the URL; no browser needed)")
    lb.add_argument("--dir", help="the notebook folder (default: the repository's notebooks/)")
    lb.add_argument("--port", type=int, default=8888)
    lb.add_argument("--ip", default="127.0.0.1", help="address to serve on (0.0.0.0: reachable from other hosts)")
    lb.add_argument("--token", default=None, help="the server's token (default: a random one, printed in the URL)")
    lb.add_argument("--no-token", action="store_true", help="serve without a token (local use only)")
    lb.add_argument("--no-build", action="store_true",
                    help="do not load or build the built-in machine first (nor warm its compact engine)")
    lb.add_argument("--no-browser", action="store_true",
                    help="accepted as `jupyter lab` takes it: qwengpu lab never opens a browser (it prints the URL)")
    lb.add_argument("jupyter_args", nargs="*", metavar="-- JUPYTER_OPTION",
                    help="options after `--` go to jupyter lab as they are, e.g. -- --LabApp.expose_app_in_browser=True")
    lb.set_defaults(func=cmd_lab)

    fz = sub.add_parser("fuzz", help="random CUDA kernels on the engines against a host C++ oracle (needs nvcc and c++)")
    fz.add_argument("--seed", type=_non_negative_int, default=0, help="the run's seed (kernel I of seed S is always the same)")
    fz.add_argument("--count", type=_positive_int, default=100, help="how many kernels")
    fz.add_argument("--start", type=_non_negative_int, default=0, help="index of the first kernel")
    fz.add_argument("--engines", type=_engine_list, default=("interp", "sim"), help="engines checked on every kernel (default: interp,sim)")
    fz.add_argument("--compact-every", type=_non_negative_int, default=0, metavar="K",
                    help="also run every K-th kernel (index %% K == 0) on the compact engine (default 0: none)")
    fz.add_argument("--batch", type=_positive_int, default=40, help="kernels per nvcc and host-compiler call")
    fz.add_argument("--out", default="fuzz-failures", help="directory for disagreements (default: fuzz-failures)")
    fz.add_argument("--reduce", type=_non_negative_int, default=10, help="reduce the first N disagreements (default 10)")
    fz.add_argument("--json", help="write the report to this JSON file")
    fz.add_argument("--quiet", action="store_true", help="no progress lines")
    fz.add_argument("--machine", default=None, help="the geometry sim and compact run (default: the built-in "
                    "compact-fpu; compact runs float as soft-float routines)")
    fz.add_argument("--mix", choices=("all", "float"), default="all",
                    help="the generator's types: all alike (default) or mostly float (the float unit's run)")
    fz.add_argument("--sizes", choices=("small", "large"), default=None,
                    help="the kernels' sizes: small (blocks of 4 or 8 threads, the built-in machine's) or large "
                         "(blocks of up to 64 threads, 4 KiB of shared, 256 B of local a thread, a 16 KiB "
                         "global table: --machine compact-fpu-course); default: the largest the machine holds")
    fz.add_argument("--faults", action="store_true",
                    help="kernels that may fault: the engines must agree with the interpreter on the buffers or "
                         "on the fault's kind, lane and address (no host oracle)")
    fz.set_defaults(func=cmd_fuzz)

    c = sub.add_parser("compile", help="CUDA -> PTX with nvcc")
    c.add_argument("file")
    c.add_argument("-o", "--output", help="the PTX file to write (default: stdout); never the input, and an "
                   "existing file that is not a .ptx only with --overwrite")
    c.add_argument("--arch", default="sm_75")
    c.add_argument("--overwrite", action="store_true", help="replace an existing -o file that is not a .ptx")
    c.set_defaults(func=cmd_compile)

    from .splice.cli import add_parsers as add_splice_parsers
    add_splice_parsers(sub)          # build, kl, bench-splice
    return p


def _close_progress_bars() -> None:
    """Close the progress bars a failure left open (verify's, a model's load, a launch's tokens):
    the error message then starts a line of its own instead of being glued onto a bar."""
    from tqdm import tqdm
    for bar in list(getattr(tqdm, "_instances", ())):     # tqdm's registry of open bars
        bar.close()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv                  # accepted after the subcommand too
    args = build_parser().parse_args((["--debug"] if debug else []) + [a for a in argv if a != "--debug"])
    try:
        return args.func(args)
    except KeyboardInterrupt:
        _close_progress_bars()
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:   # every failure: a clear message on stderr, non-zero exit
        _close_progress_bars()
        if args.debug:
            import traceback
            traceback.print_exc()
        name = type(e).__name__
        print(f"qwengpu {args.command}: {name}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
