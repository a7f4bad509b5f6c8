"""Kernel IR + launch -> program image: lowering, packing into bundles, register allocation."""
from __future__ import annotations

from qwengpu.launch import LaunchSpec
from qwengpu.ptx.ir import Module

from .config import COMPACT, MachineConfig
from .layout import machine_layout
from .lower import AssemblerError, lower
from .optimize import optimize
from .schedule import Image, schedule


def assemble(module: Module, spec: LaunchSpec, kernel: str | None = None,
             config: MachineConfig = COMPACT) -> Image:
    """The program image of one launch of `kernel` on a machine of geometry `config`."""
    fn = module.kernel(kernel if kernel is not None else spec.kernel)
    lay = machine_layout(module, spec, fn.name)
    prog = optimize(lower(module, spec, fn, lay))
    return schedule(prog, config)


__all__ = ["assemble", "AssemblerError", "Image"]
