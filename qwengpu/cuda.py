"""CUDA C++ -> PTX with nvcc, cached by a hash of the preprocessed source.

nvcc is looked up in this order: `$QWENGPU_NVCC` (path to the nvcc binary), `$CUDA_HOME/bin/nvcc`,
`nvcc` on `PATH`, then the PyPI wheels (`pip install 'qwengpu[nvcc]'`, which pins
nvidia-cuda-nvcc with nvidia-nvvm, nvidia-cuda-crt and nvidia-cuda-runtime of one release).
`.ptx` input never needs nvcc.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import sys
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


#: the first line of a PTX cache entry: the sha256 of the PTX below it (a truncated or altered
#: entry is recompiled, never returned)
CACHE_HEADER = "// qwengpu ptx cache sha256 "
#: how a CUDA source given as text is named in nvcc's diagnostics (it is compiled from a temporary file)
TEXT_SOURCE_NAME = "<CUDA source>"


def _read_cached(entry: Path) -> str | None:
    """The PTX of a cache entry, or None (with a note naming it) when it is missing or corrupt."""
    if not entry.is_file():
        return None
    raw = entry.read_bytes()
    header, _, body = raw.partition(b"\n")
    if header.startswith(CACHE_HEADER.encode()) and header[len(CACHE_HEADER):].decode("ascii", "replace") \
            == hashlib.sha256(body).hexdigest():
        return body.decode("utf-8")
    print(f"qwengpu: the cached PTX {entry} is corrupt (truncated or altered); recompiling", file=sys.stderr)
    return None


def _write_cached(entry: Path, ptx: str) -> None:
    body = ptx.encode("utf-8")
    tmp = entry.with_name(f".{entry.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        tmp.write_bytes(f"{CACHE_HEADER}{hashlib.sha256(body).hexdigest()}\n".encode() + body)
        tmp.replace(entry)                # atomic: a reader sees a whole entry or none
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def compile_cuda(source: str | os.PathLike, arch: str = DEFAULT_ARCH, flags=DEFAULT_FLAGS,
                 use_cache: bool = True) -> str:
    """Compile CUDA C++ to PTX text.

    `source` is CUDA source text or a path to a `.cu` file; a path to a `.ptx` file is returned
    as is (no nvcc needed). A file is compiled where it is, so its relative `#include`s resolve
    as nvcc resolves them and nvcc's diagnostics name it; text is compiled from a temporary file,
    named `<CUDA source>` in the diagnostics. Results are cached under `$QWENGPU_CACHE` (default
    `~/.cache/qwengpu`) by a hash of the preprocessed source (`nvcc -E`: the text of every header
    it includes, so a changed header recompiles), arch, flags and nvcc version; each entry carries
    the sha256 of its PTX, and one that does not match it is recompiled.
    """
    path = None
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                           and source.endswith((".cu", ".ptx")) and len(source) < 4096):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        if path.suffix == ".ptx":
            try:
                return path.read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: not PTX text (byte {e.start} is not UTF-8)") from None
    nvcc = find_nvcc()
    version = nvcc_version(nvcc)
    with tempfile.TemporaryDirectory(prefix="qwengpu-nvcc-") as tmp:
        if path is None:
            src, shown = Path(tmp) / "kernel.cu", TEXT_SOURCE_NAME
            src.write_text(str(source), encoding="utf-8")
        else:
            src, shown = path.resolve(), str(path)

        def nvcc_run(mode: str, *output: str) -> bytes:
            options = [mode, f"-arch={arch}", *flags]
            proc = subprocess.run([str(nvcc), *options, *output, str(src)], capture_output=True)
            if proc.returncode != 0:       # the user's name for the file, not the path given to nvcc
                diagnostics = proc.stderr.decode("utf-8", "replace").replace(str(src), shown).strip()
                raise CudaCompileError(f"nvcc failed on {shown} ({' '.join(options)}):\n{diagnostics}")
            return proc.stdout

        if use_cache:
            # the key: the device pass's preprocessed text (every included header's content, as compiled)
            preprocessed = nvcc_run("-E").replace(str(src).encode(), b"<source>")
            key = hashlib.sha256(b"\0".join([preprocessed, *(x.encode() for x in (arch, *flags, version))]))
            cached = cache_dir() / f"{key.hexdigest()[:24]}.ptx"
            hit = _read_cached(cached)
            if hit is not None:
                return hit
        out = Path(tmp) / "kernel.ptx"
        nvcc_run("-ptx", "-o", str(out))
        ptx = out.read_text(encoding="utf-8")
    if use_cache:
        _write_cached(cached, ptx)
    return ptx
