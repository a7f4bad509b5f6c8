"""`qwengpu fuzz`: random CUDA kernels checked against an oracle that owes nothing to qwenGPU.

Each kernel (`generator.generate(seed, index)`) is compiled twice from the same text: by nvcc to
PTX (`-O3 -fmad=false`, a batch of kernels per call) for the engines, and by the host C++ compiler
into a program that runs its threads one by one (`host.run_host`). The interpreter and the
simulator must give the host's buffers on every kernel; the compact engine (the model's weights)
on every `compact_every`-th. A disagreement is written to `out_dir` with the kernel's source,
seed, launch and a reduced form (`reduce.reduce_body`).

    from qwengpu.fuzz import fuzz
    report = fuzz(seed=1, count=100)
    assert not report.failures
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..api import BUILTIN_MACHINE
from .generator import MIXES, SIZES, FuzzKernel, generate, sizes_for
from .host import compile_ptx, cuda_source, missing_tools, run_host
from .prelude import PRELUDE
from .reduce import reduce_body, size

#: what a kernel may do on an engine without it being a disagreement: not fit the machine (its ROM,
#: or the global memory window its spilled registers need), as (exception name, message fragment)
DOES_NOT_FIT = (("RomOverflow", ""), ("AssemblerError", "global window"))


@dataclass
class Failure:
    name: str
    seed: str
    engine: str
    detail: str
    source: str
    reduced: str | None = None
    directory: str | None = None


@dataclass
class FuzzReport:
    seed: int
    count: int
    engines: tuple
    compact_every: int
    mix: str = "all"
    machine: str = BUILTIN_MACHINE
    sizes: str = "small"
    checked: dict = field(default_factory=dict)        # engine -> kernels compared with the host
    did_not_fit: dict = field(default_factory=dict)    # engine -> kernels the machine could not hold
    failures: list = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [f"{e} {self.checked.get(e, 0)} agreed" + (f" ({self.did_not_fit[e]} did not fit the machine)"
                                                         if self.did_not_fit.get(e) else "")
                 for e in self.checked]
        what = ("" if self.mix == "all" else f", {self.mix} mix") + ("" if self.sizes == "small" else
                                                                    f", {self.sizes} sizes on {self.machine}")
        return (f"fuzz seed {self.seed}{what}: {self.count} kernels in {self.seconds:.0f} s; " + ", ".join(parts)
                + f"; {len(self.failures)} disagreement(s)")

    def to_json(self) -> dict:
        return {"seed": self.seed, "count": self.count, "engines": list(self.engines),
                "compact_every": self.compact_every, "mix": self.mix, "machine": self.machine,
                "sizes": self.sizes, "checked": self.checked, "did_not_fit": self.did_not_fit,
                "seconds": round(self.seconds, 1),
                "failures": [{"name": f.name, "seed": f.seed, "engine": f.engine, "detail": f.detail,
                              "directory": f.directory} for f in self.failures]}


def _check(module_or_ptx, k: FuzzKernel, engine: str, want: list, options: dict) -> str | None:
    """None when `engine` gives the host's buffers; "fit: ..." when the machine cannot hold the
    program; else the disagreement."""
    from ..api import run
    from ..verify import compare_buffers
    try:
        res = run(module_or_ptx, k.spec(), engine=engine, kernel=k.name, **options)
    except Exception as e:        # a fault or an unsupported construct is a disagreement too
        if any(type(e).__name__ == name and part in str(e) for name, part in DOES_NOT_FIT):
            return f"fit: {e}"
        return f"{type(e).__name__}: {e}"
    return compare_buffers(res.buffers, want, nan_equal=True)


def _only(module, name: str):
    """The batch's module with one kernel (and every device function): the engines analyse a
    whole module per launch, so a batch's other kernels would only cost time."""
    import dataclasses
    fns = {n: f for n, f in module.functions.items() if not f.is_entry or f.name == name}
    return dataclasses.replace(module, functions=fns)


def _reduce(k: FuzzKernel, engine: str, options: dict, max_tries: int) -> list:
    def still_fails(body):
        try:
            want = run_host([k], [body])[k.name]
            ptx = compile_ptx([k], [body])
        except Exception:             # the cut broke the kernel (a loop variable gone, ...)
            return False
        got = _check(ptx, k, engine, want, options)
        return got is not None and not got.startswith("fit: ")
    return reduce_body(k.body, still_fails, max_tries)


def _write_failure(out_dir: Path, f: Failure, k: FuzzKernel, reduced_body: list | None) -> None:
    d = out_dir / k.name
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.cu").write_text(f"// qwengpu fuzz kernel {k.seed} ({k.name})\n" + cuda_source([k]))
    (d / "launch.json").write_text(json.dumps(k.spec().to_json()))
    if reduced_body is not None:
        (d / "reduced.cu").write_text(f"// reduced from {k.name}: {size(reduced_body)} of {size(k.body)} "
                                      "statements\n" + PRELUDE + k.source(reduced_body))
    (d / "disagreement.txt").write_text(f"seed {k.seed}, kernel {k.name}, engine {f.engine}\n{f.detail}\n")
    f.directory = str(d)


def _check_arguments(seed, count, start, engines, compact_every, batch, reduce) -> None:
    """Refuse what would check nothing or name no kernel (`fz_-1_0` is not a C identifier)."""
    from ..api import ENGINES
    for name, value, least in (("seed", seed, 0), ("count", count, 1), ("start", start, 0),
                               ("compact_every", compact_every, 0), ("batch", batch, 1), ("reduce", reduce, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise ValueError(f"unknown engine {', '.join(map(repr, unknown))} (available: {', '.join(ENGINES)})")
    if not engines and not compact_every:
        raise ValueError("no engine to check (engines is empty and compact_every is 0)")
    missing = missing_tools()
    if missing:
        raise RuntimeError(f"the fuzzer cannot run: {missing}")


def fuzz(seed: int = 0, count: int = 100, *, engines=("interp", "sim"), compact_every: int = 0,
         batch: int = 40, out_dir=None, reduce: int = 10, reduce_tries: int = 300, machine=None,
         log: Callable[[str], None] | None = None, start: int = 0, geometry: str | None = None,
         mix: str = "all", sizes: str | None = None) -> FuzzReport:
    """Kernels `start` .. `start+count-1` of seed `seed`, each on `engines` and (every
    `compact_every`-th, when > 0) on the compact engine with `machine` (default: the built-in
    one, or the geometry named by `geometry`, which the simulator then runs too: "compact-fpu"
    puts the float unit under test), against the host oracle. `mix` weighs the generator's types
    (`generator.MIXES`: "float" makes most assignments and comparisons float). `sizes` (`generator.SIZES`;
    default: the largest the machine holds, `sizes_for`): "large" kernels use a course's memories and
    blocks of up to 64 threads (`--machine compact-fpu-course`). Disagreements go to `out_dir` (when given); the first `reduce`
    of them reduced (each reduction compiles and runs the kernel up to `reduce_tries` times)."""
    _check_arguments(seed, count, start, engines, compact_every, batch, reduce)
    t0 = time.perf_counter()
    if mix not in MIXES:
        raise ValueError(f"unknown type mix {mix!r} (known: {', '.join(MIXES)})")
    if sizes is None:
        sizes = sizes_for(machine.config if machine is not None else geometry or BUILTIN_MACHINE)
    if sizes not in SIZES:
        raise ValueError(f"unknown sizes {sizes!r} (known: {', '.join(SIZES)})")
    report = FuzzReport(seed=seed, count=count, engines=tuple(engines), compact_every=compact_every, mix=mix,
                        machine=geometry or BUILTIN_MACHINE, sizes=sizes)
    all_engines = list(engines) + (["compact"] if compact_every > 0 else [])
    for e in all_engines:
        report.checked[e], report.did_not_fit[e] = 0, 0
    for lo in range(start, start + count, batch):
        ks = [generate(seed, i, mix, sizes) for i in range(lo, min(lo + batch, start + count))]
        from ..api import load_program
        try:
            host = run_host(ks)
            ptx = compile_ptx(ks)
        except Exception as e:    # the generator wrote something a compiler rejects: its bug, reported
            f = Failure(f"{ks[0].name}..{ks[-1].name}", ks[0].seed, "compile", f"{type(e).__name__}: {e}",
                        cuda_source(ks))
            report.failures.append(f)
            if log:
                log(f"COMPILE FAILURE for kernels {f.name}: {f.detail[:2000]}")
            continue
        try:
            program = load_program(ptx)
        except Exception:       # one kernel's construct the frontend refuses: each on its own then
            program = None
        for k in ks:
            index = int(k.name.rsplit("_", 1)[1])
            todo = list(engines) + (["compact"] if compact_every > 0 and index % compact_every == 0 else [])
            for engine in todo:
                options = {"config": geometry} if engine == "sim" and geometry else {}
                if engine == "compact":
                    if machine is None:
                        from ..api import default_machine
                        machine = default_machine("compact", progress=False, machine=geometry or BUILTIN_MACHINE)
                    options = {"machine": machine, "progress": False}
                src = _only(program, k.name) if program is not None else compile_ptx([k])
                detail = _check(src, k, engine, host[k.name], options)
                if detail is None:
                    report.checked[engine] += 1
                    continue
                if detail.startswith("fit: "):
                    report.did_not_fit[engine] += 1
                    continue
                f = Failure(k.name, k.seed, engine, detail, k.source())
                reduced = _reduce(k, engine, options, reduce_tries) if len(report.failures) < reduce else None
                if reduced is not None:
                    f.reduced = k.source(reduced)
                if out_dir is not None:
                    _write_failure(Path(out_dir), f, k, reduced)
                report.failures.append(f)
                if log:
                    log(f"DISAGREEMENT {k.name} on {engine}: {detail}" + (f" -> {f.directory}" if f.directory else ""))
        if log:
            report.seconds = time.perf_counter() - t0
            log(f"{min(lo + batch, start + count) - start}/{count} kernels: " + report.summary())
    report.seconds = time.perf_counter() - t0
    return report


__all__ = ["fuzz", "FuzzReport", "Failure", "generate", "FuzzKernel", "run_host", "compile_ptx"]
