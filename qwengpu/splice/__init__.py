"""Splicing the GPU into a real Qwen3.5 checkpoint (see docs/splice.md).

    from qwengpu.splice import build, splice, target_for_base, measure_kl
    build("Qwen3.5-2B/", "out/")                       # compile the GPU for the base and splice it
    measure_kl("Qwen3.5-2B/", "out/")                  # language behaviour, base vs spliced
    feature_map(compiled)                              # which GPU features share the base's dims
    splice_machine(base, "out/", "tiny")               # the real machine (SIMT GPU), where the geometry fits
    m = open_spliced_machine("out/")                   # run_on_model(..., machine=m, prefix_ids=...)
"""
from .checkpoint import BaseCheckpoint, NotQwen35Error, read_checkpoint
from .geometry import Geometry
from .sharing import FeatureMap, feature_map
from .splice import SpliceError, SpliceReport, build, read_meta, splice
from .target import target_for_base

__all__ = ["BaseCheckpoint", "NotQwen35Error", "read_checkpoint", "Geometry", "FeatureMap", "feature_map",
           "SpliceError", "SpliceReport",
           "build", "read_meta", "splice", "target_for_base", "measure_kl", "load_spliced", "check_program",
           "machine_fit", "splice_machine", "open_spliced_machine"]


def __getattr__(name):
    if name == "measure_kl":
        from .kl import measure_kl
        return measure_kl
    if name in ("load_spliced", "check_program"):
        from . import spliced
        return getattr(spliced, name)
    if name in ("machine_fit", "splice_machine", "open_spliced_machine"):
        from . import machine_splice
        return getattr(machine_splice, name)
    raise AttributeError(name)
