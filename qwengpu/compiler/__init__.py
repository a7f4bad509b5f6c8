"""The transformer compiler: circuits -> stock Qwen3.5 layers and weights. Knows nothing of PTX.

    from qwengpu.compiler import Program, compile_program, gadgets, memory
"""
from . import gadgets, memory
from .compiling import Compiled, Target, compile_program
from .core import ANCHOR, CompileError, Lin, Var
from .program import Program, View
from .run import compare, evaluate, run_model

__all__ = ["Program", "View", "Var", "Lin", "Target", "Compiled", "compile_program", "compare",
           "evaluate", "run_model", "gadgets", "memory", "CompileError", "ANCHOR"]
