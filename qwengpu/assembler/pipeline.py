"""Kernel IR + launch -> program image: lowering, packing into bundles, register allocation."""
from __future__ import annotations

from qwengpu.launch import LaunchSpec
from qwengpu.machine.config import BUILTIN, MachineConfig
from qwengpu.machine.image import Image
from qwengpu.ptx.ir import Module

from .launch_layout import machine_layout
from .lower import AssemblerError, MicroProgram, lower
from .optimize import optimize
from .schedule import RomOverflow
from .spill import schedule_with_spills


def assemble(module: Module, spec: LaunchSpec, kernel: str | None = None,
             config: MachineConfig = BUILTIN) -> Image:
    """The program image of one launch of `kernel` on a machine of geometry `config`."""
    fn = module.kernel(kernel if kernel is not None else spec.kernel)
    bx, by, bz = spec.block
    gx, gy, gz = spec.grid
    nwarps = (spec.threads_per_block + 3) // 4
    specials = {"tid.x": (0, bx - 1), "tid.y": (0, by - 1), "tid.z": (0, bz - 1),
                "ctaid.x": (0, gx - 1), "ctaid.y": (0, gy - 1), "ctaid.z": (0, gz - 1),
                "laneid": (0, 3), "warpid": (0, nwarps - 1)}

    def lowered(share: bool = False, hoist: bool = True) -> MicroProgram:
        lay = machine_layout(module, spec, fn.name, config)
        return optimize(lower(module, spec, fn, lay, share_routines=share, fpu_ops=config.fpu_ops,
                              hoist_loop_divisors=hoist), specials)

    def fit(prog: MicroProgram) -> Image:
        return schedule_with_spills(prog, config, spec.threads_per_block, (bx, by, bz))

    try:
        return _hoisted_or_plain(lowered, fit)
    except RomOverflow as inlined:
        # too large with every float routine inlined: call shared copies instead (`lower/shared.py`)
        try:
            return fit(lowered(share=True))
        except RomOverflow as shared:
            raise RomOverflow(f"{inlined} (with shared float routines: {shared})") from None


def _hoisted_or_plain(lowered, fit) -> Image:
    """The program with its loops' divisors hoisted (`lower.loopdiv`), or, where that does not fit
    the machine (its ROM, its registers even after spilling, the spill area), the program lowered
    without it (each iteration's division the sequence, as before). A hoisted program that spills
    is kept: the parts live across the loop, but a division's short path saves more than the
    reloads cost (docs/float_units.md, "A divisor known in advance")."""
    prog = lowered()
    if not prog.loops_hoisted:
        return fit(prog)
    try:
        return fit(prog)
    except AssemblerError:
        return fit(lowered(hoist=False))


__all__ = ["assemble", "AssemblerError", "Image"]
