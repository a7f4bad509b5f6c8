"""The Python entry points: load a program (CUDA, PTX or IR) and run a launch on an engine."""
from __future__ import annotations

import os
from pathlib import Path

from .cuda import compile_cuda
from .launch import LaunchResult, LaunchSpec
from .ptx.ir import Module
from .ptx.isa import validate_module
from .ptx.parser import parse_ptx

ENGINES = ("interp", "sim", "model", "compact")


def _looks_like_ptx(text: str) -> bool:
    return ".entry" in text and (".version" in text or ".target" in text)


def load_program(program) -> Module:
    """A validated kernel IR module from a `Module`, PTX text, CUDA source text, or a path to a
    `.ptx`/`.cu` file (CUDA needs nvcc; PTX never does)."""
    if isinstance(program, Module):
        return validate_module(program)
    if isinstance(program, os.PathLike) or (isinstance(program, str) and "\n" not in program
                                            and program.endswith((".cu", ".ptx"))):
        path = Path(program)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        text = path.read_text() if path.suffix == ".ptx" else compile_cuda(path)
    else:
        text = program if _looks_like_ptx(program) else compile_cuda(program)
    return validate_module(parse_ptx(text))


def run(program, launch, *, engine: str = "interp", kernel: str | None = None,
        max_steps: int | None = None, trace: bool = False, **options) -> LaunchResult:
    """Run one launch of `program` (see `load_program`) with `launch` (a `LaunchSpec`, a dict in
    the CLI's JSON format, a JSON string or a path) on `engine`: "interp" (the reference
    interpreter), "sim" (the machine's token-level simulator) or "model" (the model's stock
    forward passes; options: machine, check_prefill, progress, device, on_token) or "compact" (the
    same weights through the compact sparse engine; same options). `max_steps` bounds
    interpreter steps, or generated tokens on the machine."""
    module = load_program(program)
    spec = launch if isinstance(launch, LaunchSpec) else LaunchSpec.from_json(launch)
    if engine == "interp":
        from .interp.interpreter import DEFAULT_MAX_STEPS, interpret
        if options:
            raise TypeError(f"unexpected options for the interpreter: {', '.join(options)}")
        return interpret(module, spec, kernel=kernel, max_steps=max_steps or DEFAULT_MAX_STEPS, trace=trace)
    if engine == "sim":
        from .runtime.engines import DEFAULT_MAX_TOKENS, run_on_simulator
        return run_on_simulator(module, spec, kernel=kernel, max_tokens=max_steps or DEFAULT_MAX_TOKENS, **options)
    if engine in ("model", "compact"):
        from .runtime.engines import DEFAULT_MAX_TOKENS, run_on_model
        return run_on_model(module, spec, kernel=kernel, max_tokens=max_steps or DEFAULT_MAX_TOKENS,
                            forward=engine, **options)
    raise ValueError(f"unknown engine {engine!r} (available: {', '.join(ENGINES)})")
