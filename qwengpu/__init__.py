"""qwenGPU: a 4-lane SIMT GPU compiled into the weights of a Qwen3.5 language model.

The pipeline flows one way: CUDA --nvcc--> PTX --frontend--> kernel IR --assembler--> program image
--runtime--> model forward passes --decoder--> results. The reference interpreter beside it defines
the semantics every engine is tested against.
"""
from .cuda import compile_cuda
from .launch import LaunchResult, LaunchSpec
from .program import load_program, run

__version__ = "0.1.0"
__all__ = ["compile_cuda", "load_program", "run", "LaunchSpec", "LaunchResult", "__version__"]
