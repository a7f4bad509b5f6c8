"""The independent oracle: fuzz kernels compiled by the host C++ compiler and run thread by thread.

Nothing of qwenGPU takes part: the kernel text (with the prelude) goes to `c++`, whose program runs
each launch block by block, thread by thread (`prelude.HOST_RUNNER`), and prints every output
buffer as hex words. Floats follow IEEE single precision: `-ffp-contract=off` (no fused
multiply-add the source does not write; nvcc gets `-fmad=false`), no fast-math, and no folds that
assume the rounding mode (`-frounding-math`: GCC's `0 - x -> -x` is wrong for x = +0).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..cuda import compile_cuda
from .generator import OUTPUTS, FuzzKernel, words_per_thread
from .prelude import HOST_RUNNER, PRELUDE

#: `-frounding-math`: GCC 12 otherwise folds `0.0f - (float)i` into `-(float)i`, which is -0.0 where
#: IEEE gives +0.0 (i == 0); the program still runs in round-to-nearest, the folds are what it stops
HOST_FLAGS = ("-std=c++17", "-O1", "-ffp-contract=off", "-fno-fast-math", "-frounding-math", "-w")
NVCC_FLAGS = ("-O3", "-fmad=false")


class HostCompilerNotFound(RuntimeError):
    pass


def find_host_compiler() -> str:
    """The host C++ compiler: `$CXX` when set (refused when it names no program: a silent fallback
    would check against another compiler than the one asked for), else c++, g++ or clang++ on PATH."""
    cxx = os.environ.get("CXX")
    if cxx:
        if not shutil.which(cxx):
            raise HostCompilerNotFound(f"the host C++ compiler $CXX={cxx!r} is not found (unset CXX to use c++ on PATH)")
        return shutil.which(cxx)
    for cand in ("c++", "g++", "clang++"):
        if shutil.which(cand):
            return shutil.which(cand)
    raise HostCompilerNotFound("no host C++ compiler (c++, g++ or clang++) on PATH; set CXX")


def missing_tools() -> str | None:
    """What the fuzzer lacks on this machine (nvcc as `qwengpu.cuda.find_nvcc` finds it, a host
    C++ compiler), or None when it can run."""
    from qwengpu.cuda import NvccNotFound, find_nvcc
    missing = []
    try:
        find_nvcc()
    except NvccNotFound:
        missing.append("nvcc")
    try:
        find_host_compiler()
    except HostCompilerNotFound:
        cxx = os.environ.get("CXX")
        missing.append(f"the host C++ compiler $CXX={cxx!r}" if cxx else "a host C++ compiler")
    return " and ".join(missing) + " not found" if missing else None


def cuda_source(kernels: list[FuzzKernel], bodies: list | None = None) -> str:
    """One CUDA translation unit holding every kernel (one nvcc call for a batch)."""
    bodies = bodies or [None] * len(kernels)
    return PRELUDE + "\n".join(k.source(b) for k, b in zip(kernels, bodies))


def compile_ptx(kernels: list[FuzzKernel], bodies: list | None = None) -> str:
    """PTX for every kernel of the batch, from one nvcc call."""
    return compile_cuda(cuda_source(kernels, bodies), flags=NVCC_FLAGS, use_cache=False)


def _words(a: np.ndarray) -> str:
    bits = a.view(f"u{a.dtype.itemsize}")
    return ", ".join(f"{int(x):#x}u" + ("ll" if a.dtype.itemsize == 8 else "") for x in bits) or "0"


def host_program(kernels: list[FuzzKernel], bodies: list | None = None) -> str:
    """The host C++ program: the kernels, then per kernel its data and a launch printing its outputs."""
    bodies = bodies or [None] * len(kernels)
    parts = [PRELUDE, *(k.source(b) for k, b in zip(kernels, bodies)), HOST_RUNNER]
    main = ["int main() {"]
    for k in kernels:
        n = k.threads
        ns = f"data_{k.name}"
        decl = [f"namespace {ns} {{"]
        for name, ctype in (("ii", "int"), ("il", "i64"), ("fi", "float")):
            arr = k.inputs[name]
            word = "unsigned" if arr.dtype.itemsize == 4 else "u64"
            decl.append(f"static const {word} {name}_bits[] = {{{_words(arr)}}};")
            decl.append(f"static {ctype} {name}[{len(arr)}];")
        for buf, types, dt in OUTPUTS:
            ctype = {"int32": "int", "int64": "i64", "float32": "float"}[dt]
            decl.append(f"static {ctype} {buf}[{n * words_per_thread(types)}];")
        decl.append(f"static unsigned acc[] = {{{_words(k.acc)}}};")
        decl.append(f"static void body() {{ {k.name}(ii, il, fi, oi, ol, of, acc); }}")
        decl.append("}")
        parts.append("\n".join(decl))
        main.append(f"    std::memcpy({ns}::ii, {ns}::ii_bits, sizeof {ns}::ii);")
        main.append(f"    std::memcpy({ns}::il, {ns}::il_bits, sizeof {ns}::il);")
        main.append(f"    std::memcpy({ns}::fi, {ns}::fi_bits, sizeof {ns}::fi);")
        main.append(f"    fz_launch({ns}::body, {k.grid}, {k.block});")
        main.append(f'    std::printf("== {k.name}\\n");')
        for buf, _, dt in OUTPUTS:
            main.append(f'    fz_print("{buf}", {ns}::{buf}, sizeof {ns}::{buf}, {np.dtype(dt).itemsize});')
        main.append(f'    fz_print("acc", {ns}::acc, sizeof {ns}::acc, 4);')
    main += ["    return 0;", "}"]
    return "\n".join(parts + ["\n".join(main)]) + "\n"


def run_host(kernels: list[FuzzKernel], bodies: list | None = None, timeout: float = 120) -> dict:
    """{kernel name: [expected final contents of every launch argument]} from the host program
    (inputs as they were; outputs and the accumulator as the host computed them)."""
    cxx = find_host_compiler()
    with tempfile.TemporaryDirectory(prefix="qwengpu-fuzz-") as tmp:
        src, exe = Path(tmp) / "fuzz_host.cpp", Path(tmp) / "fuzz_host"
        src.write_text(host_program(kernels, bodies))
        proc = subprocess.run([cxx, *HOST_FLAGS, "-o", str(exe), str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"the host compiler failed:\n{proc.stderr[-4000:]}")
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout)
        if run.returncode != 0:
            raise RuntimeError(f"the host program failed ({run.returncode}): {run.stderr.strip()}")
    out, cur = {}, None
    by_name = {k.name: k for k in kernels}
    for line in run.stdout.splitlines():
        if line.startswith("== "):
            cur = line[3:]
            out[cur] = {}
            continue
        name, *words = line.split()
        out[cur][name] = [int(w, 16) for w in words]
    results = {}
    for name, bufs in out.items():
        k = by_name[name]
        row = [k.inputs["ii"], k.inputs["il"], k.inputs["fi"]]
        for buf, _, dt in OUTPUTS:
            width = np.dtype(dt).itemsize
            row.append(np.array(bufs[buf], dtype=f"u{width}").view(dt))
        row.append(np.array(bufs["acc"], dtype=np.uint32))
        results[name] = row
    return results
