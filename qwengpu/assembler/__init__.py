"""The assembler: kernel IR -> the machine's program image (`pipeline.assemble`, a list of passes).

    lower       PTX instructions -> micro-ops (`lower`; integer routines `intcode`, soft floating point
                `softfloat`, both emitted through `emit` and folded by `simplify`)
    optimize    constant and copy propagation, strength reduction, value ranges, legalisation
    schedule    micro-ops -> bundles: packing, liveness, carries, register allocation
"""
from .lower import AssemblerError
from .pipeline import assemble

__all__ = ["assemble", "AssemblerError"]
