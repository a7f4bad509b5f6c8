"""qwenGPU: a 4-lane SIMT GPU compiled into the weights of a Qwen3.5 language model.

The pipeline flows one way: CUDA --nvcc--> PTX --frontend--> kernel IR --assembler--> program image
--runtime--> model forward passes --decoder--> results. The reference interpreter beside it defines
the semantics every engine is tested against.
"""
from .api import load_program, run, run_many
from .cuda import compile_cuda
from .launch import LaunchResult, LaunchSpec


def build_gpu(target="compact", out=None, **options):
    """The GPU compiled into a Qwen3.5 checkpoint (see `qwengpu.runtime.checkpoint.build_gpu`)."""
    from .runtime.checkpoint import build_gpu as _build
    return _build(target, out, **options)


__version__ = "0.1.0"
__all__ = ["compile_cuda", "load_program", "run", "run_many", "build_gpu", "LaunchSpec", "LaunchResult", "__version__"]
