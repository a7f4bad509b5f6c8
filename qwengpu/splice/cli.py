"""Command-line subcommands of the splicer, for `qwengpu.cli` to mount:

    qwengpu build [--target compact-fpu] [--out DIR] [--overwrite]    the stand-alone machine checkpoint
    qwengpu build --base PATH --out DIR [--machine compact-fpu|compact|tiny | --program MODULE:FUNC] [--mtp widen|drop]
                  [--overwrite]
    qwengpu kl --base PATH --model DIR [--text FILE] [--dtype float32|bfloat16] [--json]
    qwengpu bench-splice [--workdir DIR] [--keep] [--machine tiny|compact|compact-fpu [--write]] [--json]
    qwengpu splice-size [--machine compact-fpu] [--widest N] [--json]       layers, widths, GiB before writing

`add_parsers(subparsers)` adds them; each sets `func` to a `cmd_*` taking the parsed args and
returning an exit status.
"""
from __future__ import annotations

import json
import sys

from qwengpu.machine.config import BUILTIN


def cmd_build(args) -> int:
    if not args.base:
        if args.machine:
            raise ValueError("--machine splices the machine into --base; without a base use --target")
        return cmd_build_machine(args)
    if not args.out:
        raise ValueError("--out is required with --base")
    from .splice import build, import_circuit
    if args.machine and args.program:
        raise ValueError("--machine and --program are alternatives")
    prog = import_circuit(args.program) if args.program else None
    if not args.program:                  # the machine by default: the built-in one, the whole suite
        from .machine_splice import compile_for_base
        machine = args.machine or BUILTIN.name
        prog = lambda target: compile_for_base(target, machine)            # noqa: E731
    rep = build(args.base, args.out, prog, mtp=args.mtp, overwrite=args.overwrite, progress=not args.quiet)
    if args.json:
        print(json.dumps(rep.__dict__, default=str))
    else:
        print(rep.summary())
    return 0


def cmd_build_machine(args) -> int:
    """Without --base: build the stand-alone machine checkpoint (cached, or at --out)."""
    from qwengpu.runtime.checkpoint import build_gpu
    m = build_gpu(args.config, args.out, progress=not args.quiet, dense=not args.compact_only, overwrite=args.overwrite)
    if args.json:
        print(json.dumps({"path": str(m.path), **m.report}))
    else:
        r = m.report
        print(f"machine {m.config.name} at {m.path}: {r['layers']} layers, hidden {r['hidden']}, MLP "
              f"{r['intermediate']}, vocabulary {r['vocab']}, {r['parameters'] / 1e6:.0f}M parameters")
    return 0


def cmd_kl(args) -> int:
    from pathlib import Path

    from .kl import measure_kl
    for option, folder in (("--base", args.base), ("--model", args.model)):
        if not Path(folder).is_dir():    # else transformers reads the path as a hub repo id and says so
            raise FileNotFoundError(f"{option} {folder}: no such folder (a checkpoint's folder: config.json, *.safetensors)")
    text = open(args.text, encoding="utf-8").read() if args.text else None
    rep = measure_kl(args.base, args.model, text, dtype=args.dtype, base_dtype=args.base_dtype,
                     segment=args.segment, with_launch=not args.no_launch, max_tokens=args.max_tokens)
    if args.json:
        print(json.dumps(rep.to_json()))
    else:
        print(rep.summary())
    return 0


def cmd_bench_splice(args) -> int:
    from .bench import bench_splice, bench_splice_machine, print_figures, print_machine_figures
    log = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print
    if args.machine:
        if args.program:
            raise ValueError("--machine and --program are alternatives")
        f = bench_splice_machine(args.machine, args.workdir, keep=args.keep, base_throughput=not args.no_base, log=log,
                                 write=args.write, threads=tuple(int(t) for t in args.threads.split(",")))
        print(json.dumps(f, default=str)) if args.json else print_machine_figures(f)
        return 0
    f = bench_splice(args.workdir, keep=args.keep, program=args.program, prefill=args.prefill,
                     decode=args.decode, check=not args.no_check, base_throughput=not args.no_base, log=log)
    if args.json:
        print(json.dumps(f, default=str))
    else:
        print_figures(f)
    return 0


def cmd_splice_size(args) -> int:
    from dataclasses import asdict

    from qwengpu.machine.config import config_named, config_with

    from .size import splice_size
    r = splice_size(config_with(config_named(args.machine), args.set or []), widest=args.widest)
    if args.json:
        print(json.dumps(asdict(r)))
    else:
        print(r.summary())
    return 0


#: the machines a splice takes (`machine.config.config_named`)
MACHINES = ["tiny", "compact", "compact-fpu"]


def add_parsers(sub) -> None:
    b = sub.add_parser("build", help="build the machine checkpoint; with --base, splice it into a Qwen3.5 checkpoint")
    b.add_argument("--base", help="folder of a Qwen3.5 checkpoint (config.json, *.safetensors)")
    b.add_argument("--out", help="output folder (without --base: default the cache)")
    b.add_argument("--target", "--config", dest="config", default=BUILTIN.name,
                   help=f"machine geometry without --base: {BUILTIN.name} (default, the built-in one), compact or tiny")
    b.add_argument("--compact-only", action="store_true",
                   help="without --base: only the compact engine's sparse weights, no stock checkpoint")
    b.add_argument("--program", help="MODULE:FUNC giving another GPU program for a target (e.g. the stand-in, "
                   "qwengpu.splice.demo:standin)")
    b.add_argument("--machine", choices=MACHINES,
                   help=f"with --base: the machine (the SIMT GPU) to splice, default {BUILTIN.name}; refused, with what it "
                        "needs, when the base's layer geometry cannot hold it")
    b.add_argument("--mtp", choices=["widen", "drop"], default="widen", help="the base's MTP head (default: widen)")
    b.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty output folder (without --base: one that holds no machine build; a "
                        "previous build is always replaced)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_build)

    k = sub.add_parser("kl", help="KL(base || spliced) on a text corpus")
    k.add_argument("--base", required=True)
    k.add_argument("--model", required=True, help="the spliced checkpoint")
    k.add_argument("--text", help="a UTF-8 text file (default: the shipped corpus)")
    k.add_argument("--dtype", default="float32", help="float32 (default) or bfloat16")
    k.add_argument("--base-dtype", default=None, help="the base's dtype (default: --dtype)")
    k.add_argument("--segment", type=int, default=1024, help="tokens per context (default 1024)")
    k.add_argument("--max-tokens", type=int, default=None)
    k.add_argument("--no-launch", action="store_true", help="skip the after-a-launch measurement")
    k.add_argument("--json", action="store_true")
    k.set_defaults(func=cmd_kl)

    s = sub.add_parser("bench-splice", help="build into a random Qwen3.5-2B-shaped checkpoint and measure")
    s.add_argument("--workdir", help="where to write the checkpoints (default: a temporary folder)")
    s.add_argument("--keep", action="store_true", help="keep the checkpoints")
    s.add_argument("--program", help="MODULE:FUNC giving the GPU program for a target")
    s.add_argument("--machine", choices=MACHINES,
                   help="splice the machine (the SIMT GPU): dry-run splice, kernels on its GPU layers, "
                        "estimated decode speed")
    s.add_argument("--write", action="store_true",
                   help="with --machine: write the spliced checkpoint and run dot through the whole of it "
                        "(AutoModelForCausalLM, fp32): size, load time, peak RSS, tokens/s")
    s.add_argument("--threads", default="1,2", help="with --write: torch thread counts to run it with (default 1,2)")
    s.add_argument("--prefill", type=int, default=256)
    s.add_argument("--decode", type=int, default=16)
    s.add_argument("--no-check", action="store_true", help="skip the GPU exactness check")
    s.add_argument("--no-base", action="store_true", help="skip the base model's tokens/s")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_bench_splice)

    z = sub.add_parser("splice-size", help="a machine compiled for Qwen3.5-2B's shapes: GPU layers, spliced width, "
                                            "fp32 size, the widest residual boundaries and what is live there")
    z.add_argument("--machine", choices=MACHINES, default=BUILTIN.name)
    z.add_argument("--set", action="append", metavar="FIELD=VALUE",
                   help="change a field of the machine's geometry (repeatable), e.g. --set global_bytes=16384 "
                        "--set max_warps=16 (docs/memory_sizes.md)")
    z.add_argument("--widest", type=int, default=3, help="how many of the widest sublayer boundaries to list")
    z.add_argument("--json", action="store_true")
    z.set_defaults(func=cmd_splice_size)
