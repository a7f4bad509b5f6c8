"""qwenGPU: a 4-lane SIMT GPU compiled into the weights of a Qwen3.5 language model.

The pipeline flows one way: CUDA --nvcc--> PTX --frontend--> kernel IR --assembler--> program image
--runtime--> model forward passes --decoder--> results. The reference interpreter beside it defines
the semantics every engine is tested against.
"""
import os
import sys
from pathlib import Path

from .api import load_program, run, run_many
from .cuda import compile_cuda
from .launch import LaunchResult, LaunchSpec


def _keep_numba_cache_out_of_the_source() -> None:
    """numba's `cache=True` (the compact engine) writes its compiled functions next to their source
    by default: into a checkout's own `qwengpu/compiler/__pycache__`. Point it at the qwengpu cache
    folder (`$QWENGPU_CACHE/numba`, default `~/.cache/qwengpu/numba`) unless the user chose one
    (`NUMBA_CACHE_DIR`). The package's import runs before the engine's module decorates anything;
    numba, when imported already, takes it through its config (it reads the variable at import)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    folder = Path(os.environ.get("QWENGPU_CACHE", Path.home() / ".cache" / "qwengpu")) / "numba"
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    config = sys.modules.get("numba.core.config")
    if config is not None:
        config.CACHE_DIR = str(folder)


_keep_numba_cache_out_of_the_source()        # before anything imports the compact engine (all lazily)


def build_gpu(target="compact", out=None, **options):
    """The GPU compiled into a Qwen3.5 checkpoint (see `qwengpu.runtime.checkpoint.build_gpu`)."""
    from .runtime.checkpoint import build_gpu as _build
    return _build(target, out, **options)


__version__ = "0.1.0"
__all__ = ["compile_cuda", "load_program", "run", "run_many", "build_gpu", "LaunchSpec", "LaunchResult", "__version__"]
