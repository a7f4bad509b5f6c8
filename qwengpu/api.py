"""The Python entry points: load a program (CUDA, PTX or IR) and run a launch on an engine."""
from __future__ import annotations

import os
from pathlib import Path

from .cuda import compile_cuda
from .launch import LaunchResult, LaunchSpec, check_step_limit
from .ptx.ir import Module
from .ptx.isa import validate_module
from .ptx.parser import parse_ptx

ENGINES = ("interp", "sim", "model", "compact", "compact-ref")
#: the engines that run the model's forward passes (the stock forward and the compact engines)
MODEL_ENGINES = ("model", "compact", "compact-ref")


def _looks_like_ptx(text: str) -> bool:
    return ".entry" in text and (".version" in text or ".target" in text)


#: what `load_program(..., approx=)` accepts: "allow" runs the approximate instructions (`ex2.approx`,
#: `sin.approx`, `div.full` ...) by qwenGPU's definitions (`qwengpu.interp.approx`: within the ISA's
#: stated error, not bit-identical to NVIDIA hardware); "refuse" rejects them, naming each line
APPROX_POLICIES = ("allow", "refuse")


def load_program(program, *, approx: str = "allow") -> Module:
    """A validated kernel IR module from a `Module`, PTX text, CUDA source text, or a path to a
    `.ptx`/`.cu` file (CUDA needs nvcc; PTX never does). `approx="refuse"` rejects approximate
    instructions (for results that must match NVIDIA hardware bit for bit)."""
    if approx not in APPROX_POLICIES:
        raise ValueError(f"approx must be one of {', '.join(APPROX_POLICIES)}, not {approx!r}")
    allow = approx == "allow"
    if isinstance(program, Module):
        return validate_module(program, approx=allow)
    if isinstance(program, os.PathLike) or (isinstance(program, str) and "\n" not in program
                                            and program.endswith((".cu", ".ptx"))):
        path = Path(program)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        text = path.read_text() if path.suffix == ".ptx" else compile_cuda(path)
    else:
        text = program if _looks_like_ptx(program) else compile_cuda(program)
    return validate_module(parse_ptx(text), approx=allow)


def run(program, launch, *, engine: str = "interp", kernel: str | None = None,
        max_steps: int | None = None, trace: bool = False, approx: str = "allow", **options) -> LaunchResult:
    """Run one launch of `program` (see `load_program`) with `launch` (a `LaunchSpec`, a dict in
    the CLI's JSON format, a JSON string or a path) on `engine`: "interp" (the reference
    interpreter), "sim" (the machine's token-level simulator) or "model" (the model's stock
    forward passes; options: machine, check_prefill, progress, device, on_token), "compact" (the
    same weights through the compact engine; same options) or "compact-ref" (the reference compact
    engine, to check and time the compact one). `max_steps` (a positive int) bounds interpreter
    steps, or generated tokens on the machine; by default a limit that grows with the launch's warps
    (`docs/limits.md`). `approx`: as for `load_program`."""
    check_step_limit(max_steps)
    module = load_program(program, approx=approx)
    spec = launch if isinstance(launch, LaunchSpec) else LaunchSpec.from_json(launch)
    if engine == "interp":
        from .interp.interpreter import interpret
        if options:
            raise TypeError(f"unexpected options for the interpreter: {', '.join(options)}")
        return interpret(module, spec, kernel=kernel, max_steps=max_steps, trace=trace)
    if engine == "sim":
        from .runtime.engines import run_on_simulator
        return run_on_simulator(module, spec, kernel=kernel, max_tokens=max_steps, **options)
    if engine in MODEL_ENGINES:
        from .runtime.engines import run_on_model
        return run_on_model(module, spec, kernel=kernel, max_tokens=max_steps, forward=engine, **options)
    raise ValueError(f"unknown engine {engine!r} (available: {', '.join(ENGINES)})")


def default_machine(engine: str = "compact", progress: bool = True):
    """The built-in machine an engine runs (built into the cache on first use): the compact
    engines' sparse weights, or with them the stock checkpoint for engine "model"."""
    from .runtime.checkpoint import load_machine
    return load_machine(dense=engine == "model", progress=progress)


def run_many(programs, launches, *, engine: str = "compact", kernels: list | None = None,
             max_steps: int | None = None, batch_size: int | None = None, return_exceptions: bool = False,
             **options) -> list:
    """Run many launches: `programs` is one program for every launch or a list with one per launch
    (see `load_program`), `launches` a list of launch specs. On the model engines ("model",
    "compact", "compact-ref") the launches run as batches of `batch_size` (default: all of them)
    through the model's forward passes, each result identical to its single run; on "interp" and
    "sim" one after another. A launch that fails: with `return_exceptions` its entry is the
    exception, else the first failure is raised. Options as for `run` (machine, device,
    check_states, progress, ...)."""
    check_step_limit(max_steps)
    specs = [s if isinstance(s, LaunchSpec) else LaunchSpec.from_json(s) for s in launches]
    if isinstance(programs, (list, tuple)):
        if len(programs) != len(specs):
            raise ValueError(f"{len(programs)} programs for {len(specs)} launches")
        loaded: dict = {}
        modules = [loaded.setdefault(id(p), load_program(p)) for p in programs]
    else:
        modules = [load_program(programs)] * len(specs)
    kernels = list(kernels) if kernels is not None else [None] * len(specs)
    if engine not in MODEL_ENGINES:
        out = []
        for m, sp, k in zip(modules, specs, kernels):
            try:
                out.append(run(m, sp, engine=engine, kernel=k, max_steps=max_steps, **options))
            except Exception as e:
                if not return_exceptions:
                    raise
                out.append(e)
        return out
    from .runtime.engines import run_batch_on_model
    if options.get("machine") is None:            # load once for every batch
        options["machine"] = default_machine(engine, options.get("progress", True))
    size = batch_size or max(1, len(specs))
    out = []
    for i in range(0, len(specs), size):
        out += run_batch_on_model(modules[i:i + size], specs[i:i + size], kernels[i:i + size],
                                  max_tokens=max_steps, forward=engine,
                                  return_exceptions=return_exceptions, **options)
    return out


def machine_refusals() -> tuple:
    """The exceptions with which a machine refuses a program before running it: a construct it
    lacks or a capacity limit (ROM, registers, blocks, memory windows), each naming the line or
    the limit. `qwengpu verify` lists these kernels apart from wrong ones."""
    from .runtime.prompt import AssemblerError
    return (AssemblerError,)
