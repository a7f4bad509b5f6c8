"""Kernel IR + launch -> program image: lowering, packing into bundles, register allocation."""
from __future__ import annotations

from qwengpu.launch import LaunchSpec
from qwengpu.machine.config import BUILTIN, MachineConfig
from qwengpu.machine.image import Image
from qwengpu.ptx.ir import Module

from .launch_layout import machine_layout
from .lower import AssemblerError, lower
from .optimize import optimize
from .schedule import RomOverflow
from .spill import schedule_with_spills


def assemble(module: Module, spec: LaunchSpec, kernel: str | None = None,
             config: MachineConfig = BUILTIN) -> Image:
    """The program image of one launch of `kernel` on a machine of geometry `config`."""
    fn = module.kernel(kernel if kernel is not None else spec.kernel)
    lay = machine_layout(module, spec, fn.name, config)
    bx, by, bz = spec.block
    gx, gy, gz = spec.grid
    nwarps = (spec.threads_per_block + 3) // 4
    specials = {"tid.x": (0, bx - 1), "tid.y": (0, by - 1), "tid.z": (0, bz - 1),
                "ctaid.x": (0, gx - 1), "ctaid.y": (0, gy - 1), "ctaid.z": (0, gz - 1),
                "laneid": (0, 3), "warpid": (0, nwarps - 1)}
    prog = optimize(lower(module, spec, fn, lay, fpu_ops=config.fpu_ops), specials)
    try:
        return schedule_with_spills(prog, config, spec.threads_per_block, (bx, by, bz))
    except RomOverflow as inlined:
        # too large with every float routine inlined: call shared copies instead (`lower/shared.py`)
        lay = machine_layout(module, spec, fn.name, config)
        prog = optimize(lower(module, spec, fn, lay, share_routines=True, fpu_ops=config.fpu_ops), specials)
        try:
            return schedule_with_spills(prog, config, spec.threads_per_block, (bx, by, bz))
        except RomOverflow as shared:
            raise RomOverflow(f"{inlined} (with shared float routines: {shared})") from None


__all__ = ["assemble", "AssemblerError", "Image"]
