"""The Python entry points: load a program (CUDA, PTX or IR) and run a launch on an engine."""
from __future__ import annotations

import os
from pathlib import Path

from .cuda import compile_cuda
from .runtime import BUILTIN_MACHINE, machine_sizes  # noqa: F401 (the api's, for fuzz and users)
from .launch import LaunchError, LaunchResult, LaunchSpec, check_step_limit
from .ptx.ir import Module
from .ptx.isa import validate_module
from .ptx.parser import parse_ptx

ENGINES = ("interp", "sim", "model", "compact", "compact-ref")
#: the engines that run the model's forward passes (the stock forward and the compact engines)
MODEL_ENGINES = ("model", "compact", "compact-ref")


def _looks_like_ptx(text: str) -> bool:
    return ".entry" in text and (".version" in text or ".target" in text)


#: what `load_program(..., approx=)` accepts: "allow" runs the approximate instructions (`ex2.approx`,
#: `sin.approx`, `div.full` ...) by qwenGPU's definitions (`qwengpu.semantics.approx`: within the ISA's
#: stated error, not bit-identical to NVIDIA hardware); "refuse" rejects them, naming each line
APPROX_POLICIES = ("allow", "refuse")


#: the file suffixes `load_program` reads: PTX, and CUDA (compiled with nvcc)
PROGRAM_SUFFIXES = (".ptx", ".cu")


def load_program(program, *, approx: str = "allow") -> Module:
    """A validated kernel IR module from a `Module`, PTX text, CUDA source text, or a path to a
    `.ptx`/`.cu` file (CUDA needs nvcc; PTX never does). A one-line string with no brace or
    semicolon is a path, never compiled as CUDA: a missing file or another suffix is refused.
    `approx="refuse"` rejects approximate instructions (for results that must match NVIDIA
    hardware bit for bit)."""
    if approx not in APPROX_POLICIES:
        raise ValueError(f"approx must be one of {', '.join(APPROX_POLICIES)}, not {approx!r}")
    allow = approx == "allow"
    if isinstance(program, Module):
        return validate_module(program, approx=allow)
    if isinstance(program, str) and "\n" not in program and not any(c in program for c in "{};"):
        program = Path(program)    # one line without a brace or a semicolon holds no kernel: a file name
    if isinstance(program, os.PathLike):
        path = Path(program)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        if path.suffix not in PROGRAM_SUFFIXES:
            raise ValueError(f"{path}: a program file is .cu (CUDA) or .ptx (PTX), not "
                             + (f"{path.suffix!r}" if path.suffix else "a file without a suffix"))
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
        from .runtime.run import run_on_simulator
        return run_on_simulator(module, spec, kernel=kernel, max_tokens=max_steps, **options)
    if engine in MODEL_ENGINES:
        from .runtime.run import run_on_model
        return run_on_model(module, spec, kernel=kernel, max_tokens=max_steps, forward=engine, **options)
    raise ValueError(f"unknown engine {engine!r} (available: {', '.join(ENGINES)})")


def default_machine(engine: str = "compact", progress: bool = True, machine: str = BUILTIN_MACHINE):
    """A built-in machine an engine runs (built into the cache on first use): the compact
    engines' sparse weights, or with them the stock checkpoint for engine "model". `machine`: the
    geometry by name (the built-in compact-fpu, with the float unit; compact, whose float is soft-float
    routines; tiny)."""
    from .runtime.checkpoint import load_machine
    return load_machine(machine, dense=engine == "model", progress=progress)


def run_many(programs, launches, *, engine: str = "compact", kernels: list | None = None,
             max_steps: int | None = None, batch_size: int | None = None, return_exceptions: bool = False,
             **options) -> list:
    """Run many launches: `programs` is one program for every launch or a list with one per launch
    (see `load_program`), `launches` a list of launch specs, `kernels` (optional) a kernel name per
    launch. On the model engines ("model", "compact", "compact-ref") the launches run as batches
    of `batch_size` (a positive int; default: all of them) through the model's forward passes,
    each result identical to its single run; on "interp" and "sim" one after another. A launch
    that fails (its spec or program refused, the machine refusing the program, a fault): with
    `return_exceptions` its entry is the exception and the others run, else the first failure is
    raised. Options as for `run` (machine, device, check_states, progress, ...)."""
    check_step_limit(max_steps)
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (available: {', '.join(ENGINES)})")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int (or None: every launch in one batch), not {batch_size!r}")
    launches = list(launches)
    n = len(launches)
    if isinstance(programs, (list, tuple)) and len(programs) != n:
        raise ValueError(f"{len(programs)} programs for {n} launches")
    kernels = list(kernels) if kernels is not None else [None] * n
    if len(kernels) != n:
        raise ValueError(f"{len(kernels)} kernel names for {n} launches")
    out: list = [None] * n                         # a result or (with return_exceptions) an exception

    def failed(i: int, e: Exception) -> None:
        if not return_exceptions:
            raise e
        out[i] = e

    specs: list = [None] * n
    for i, s in enumerate(launches):
        try:
            specs[i] = s if isinstance(s, LaunchSpec) else LaunchSpec.from_json(s)
        except LaunchError as e:
            failed(i, LaunchError(f"launches[{i}]: {e}"))
    modules: list = [None] * n
    loaded: dict = {}                               # id(program) -> its module or the exception loading it
    for i in range(n):
        p = programs[i] if isinstance(programs, (list, tuple)) else programs
        if id(p) not in loaded:
            try:
                loaded[id(p)] = load_program(p)
            except Exception as e:
                loaded[id(p)] = e
        if out[i] is not None:
            continue
        if isinstance(loaded[id(p)], Exception):
            failed(i, loaded[id(p)])
        else:
            modules[i] = loaded[id(p)]
    todo = [i for i in range(n) if out[i] is None]
    if not todo:
        return out
    if engine not in MODEL_ENGINES:
        for i in todo:
            try:
                out[i] = run(modules[i], specs[i], engine=engine, kernel=kernels[i], max_steps=max_steps, **options)
            except Exception as e:
                failed(i, e)
        return out
    from .runtime.run import run_batch_on_model
    if options.get("machine") is None:            # load once for every batch
        options["machine"] = default_machine(engine, options.get("progress", True))
    size = batch_size or max(1, len(todo))

    def batch(indices: list) -> None:
        try:
            results = run_batch_on_model([modules[i] for i in indices], [specs[i] for i in indices],
                                         [kernels[i] for i in indices], max_tokens=max_steps,
                                         forward=engine, return_exceptions=return_exceptions, **options)
        except Exception as e:
            if not return_exceptions:
                raise
            if len(indices) == 1:
                out[indices[0]] = e
                return
            # a launch the machine refuses (a construct it lacks, a capacity limit) stops its batch
            # before any pass: halve the batch until it stands alone, the others still run in batches
            batch(indices[:len(indices) // 2])
            batch(indices[len(indices) // 2:])
            return
        for i, r in zip(indices, results):
            out[i] = r

    for lo in range(0, len(todo), size):
        batch(todo[lo:lo + size])
    return out


def machine_refusals() -> tuple:
    """The exceptions with which a machine refuses a program before running it: a construct it
    lacks or a capacity limit (ROM, registers, blocks, memory windows), each naming the line or
    the limit. `qwengpu verify` lists these kernels apart from wrong ones."""
    from .runtime.prompt import AssemblerError
    return (AssemblerError,)
