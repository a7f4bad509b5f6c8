"""PTX kernel IR -> micro-ops on 32-bit virtual registers, one basic block at a time.

The lowering knows the launch: kernel parameters become constants (buffer addresses, scalar
values), device functions are inlined (recursive ones run out of line on a call stack: `calls`), `.local` accesses get a per-thread base. 64-bit PTX registers
are (lo, hi) pairs of virtual registers; predicates are 0/1 words. Each micro-op remembers the PTX
instruction it came from (`ptx_pc`), which the lab and the traces use.

The lowering is one class, `Lowerer`, put together from a core (`core.LowererCore`: blocks,
registers, operands, the walk and the dispatch) and one mixin per kind of instruction, each in its
own module: `calls`, `shared`, `integer`, `compare`, `moves`, `memory_ops`, `floats`, `fastdiv`, `loopdiv`, `control`, `warp`. Adding an
instruction is adding an `op_<name>` (or `float_<name>`) method to the mixin of its kind.
"""
from __future__ import annotations

from qwengpu.launch import LaunchSpec
from qwengpu.ptx.ir import Function, Module

from .calls import CallOps
from .compare import CompareOps
from .control import ControlOps
from .core import AssemblerError, Block, LowererCore, MicroProgram
from .fastdiv import FastDivisionOps
from .floats import FloatOps
from .integer import IntegerOps
from .loopdiv import LoopDivisorOps
from .memory_ops import MemoryOps
from .moves import MoveOps
from .shared import SharedRoutineOps
from .warp import WarpOps

__all__ = ["AssemblerError", "Block", "MicroProgram", "Lowerer", "lower"]


class Lowerer(LowererCore, CallOps, SharedRoutineOps, IntegerOps, CompareOps, MoveOps, MemoryOps, FloatOps, FastDivisionOps, LoopDivisorOps,
               ControlOps, WarpOps):
    """PTX instructions of one kernel (device functions inlined) -> micro-ops in basic blocks."""


def lower(module: Module, spec: LaunchSpec, kernel: Function, layout, share_routines: bool = False,
          fpu_ops: tuple = (), hoist_loop_divisors: bool = True) -> MicroProgram:
    """`share_routines`: float routines emitted once and called (`shared`), for programs that do
    not fit the ROM with them inlined; `fpu_ops`: the machine's float-unit micro-ops (the f32
    instructions they cover become them instead of soft-float routines); `hoist_loop_divisors`: a
    loop's division by a register the loop does not write takes the short path, the divisor's part
    computed before the loop (`loopdiv`)."""
    lw = Lowerer(module, spec, kernel, layout)
    lw.share_routines = share_routines
    lw.fpu = frozenset(fpu_ops)
    lw.hoist_loop_divisors = hoist_loop_divisors
    return lw.run()
