"""CUDA C++ -> PTX with nvcc, cached by content hash.

nvcc is looked up in this order: `$QWENGPU_NVCC` (path to the nvcc binary), `$CUDA_HOME/bin/nvcc`,
`nvcc` on `PATH`, then the PyPI wheels (`pip install 'qwengpu[nvcc]'`, which pins
nvidia-cuda-nvcc with nvidia-nvvm, nvidia-cuda-crt and nvidia-cuda-runtime of one release).
`.ptx` input never needs nvcc.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

#: flags every kernel is compiled with (the suite's committed PTX records the same)
DEFAULT_FLAGS = ("-O3",)
DEFAULT_ARCH = "sm_75"

INSTALL_HINT = (
    "nvcc (the CUDA compiler) was not found. Install it with\n"
    "    pip install 'qwengpu[nvcc]'\n"
    "(the nvidia-cuda-nvcc wheel), or install the CUDA toolkit and set CUDA_HOME, or point\n"
    "QWENGPU_NVCC at an nvcc binary. PTX files (.ptx) run without nvcc."
)


class NvccNotFound(RuntimeError):
    pass


class CudaCompileError(RuntimeError):
    """nvcc rejected the source; the message carries nvcc's diagnostics."""


def _wheel_nvcc() -> Path | None:
    try:
        import nvidia  # namespace package of the nvidia-* wheels
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for cand in (Path(root) / "cuda_nvcc" / "bin" / "nvcc", Path(root) / "cu13" / "bin" / "nvcc"):
            if cand.is_file():
                return cand
    return None


def find_nvcc() -> Path:
    """The nvcc binary to use, or `NvccNotFound` with installation instructions."""
    env = os.environ.get("QWENGPU_NVCC")
    if env:
        p = Path(env)
        if p.is_file():
            return p
        raise NvccNotFound(f"QWENGPU_NVCC={env} does not exist.\n" + INSTALL_HINT)
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and (Path(home) / "bin" / "nvcc").is_file():
        return Path(home) / "bin" / "nvcc"
    on_path = shutil.which("nvcc")
    if on_path:
        return Path(on_path)
    wheel = _wheel_nvcc()
    if wheel:
        return wheel
    raise NvccNotFound(INSTALL_HINT)


def nvcc_version(nvcc: Path | None = None) -> str:
    nvcc = nvcc or find_nvcc()
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def cache_dir() -> Path:
    d = Path(os.environ.get("QWENGPU_CACHE", Path.home() / ".cache" / "qwengpu")) / "ptx"
    d.mkdir(parents=True, exist_ok=True)
    return d


def compile_cuda(source: str | os.PathLike, arch: str = DEFAULT_ARCH, flags=DEFAULT_FLAGS,
                 use_cache: bool = True) -> str:
    """Compile CUDA C++ to PTX text.

    `source` is CUDA source text or a path to a `.cu` file; a path to a `.ptx` file is returned
    as is (no nvcc needed). Results are cached under `$QWENGPU_CACHE` (default
    `~/.cache/qwengpu`) by a hash of the source, arch, flags and nvcc version.
    """
    text = None
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                           and source.endswith((".cu", ".ptx")) and len(source) < 4096):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        if path.suffix == ".ptx":
            return path.read_text()
        text = path.read_text()
    else:
        text = str(source)
    nvcc = find_nvcc()
    version = nvcc_version(nvcc)
    key = hashlib.sha256("\0".join([text, arch, *flags, version]).encode()).hexdigest()[:24]
    cached = cache_dir() / f"{key}.ptx"
    if use_cache and cached.is_file():
        return cached.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.cu"
        out = Path(tmp) / "kernel.ptx"
        src.write_text(text)
        cmd = [str(nvcc), "-ptx", f"-arch={arch}", *flags, "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CudaCompileError(f"nvcc failed ({' '.join(cmd[1:-3])}):\n{proc.stderr.strip()}")
        ptx = out.read_text()
    if use_cache:
        tmpfile = cached.with_suffix(f".{os.getpid()}.tmp")
        tmpfile.write_text(ptx)
        tmpfile.replace(cached)
    return ptx
