"""The lab's data layer: a launch replayed into a snapshot per position, independent of the engine.

    from qwengpu.lab import trace_launch
    view = trace_launch(ptx, spec)          # the reference interpreter's trace (engine="interp")
    snap = view.snapshot(13)                # the machine after 13 steps: registers, stack, memory
    snap.next.text, snap.changed_regs

The widgets (`widgets.Inspector`) and the static HTML export (`qwengpu.lab.render`) draw these
snapshots; the model engine adds `ModelRecord`s (`qwengpu.lab.model`) with the model's own state.
"""
from .model import (Field, GDNState, LayerInfo, MachineState, MemoryMap, Mismatch, ModelRecord, ModelTrace,
                    decode_state, decode_word, memory_map_of, recurrent_state)
from .values import fmt, fmt_all
from .view import (EngineUnavailable, Instruction, LaunchView, MemoryRegion, MemoryView, Operand, RegRow,
                   Snapshot, trace_launch)

__all__ = ["trace_launch", "LaunchView", "Snapshot", "RegRow", "Operand", "Instruction", "MemoryRegion",
           "MemoryView", "EngineUnavailable", "ModelTrace", "ModelRecord", "MachineState", "GDNState",
           "MemoryMap", "Field", "LayerInfo", "Mismatch", "decode_state", "decode_word", "memory_map_of",
           "recurrent_state", "fmt", "fmt_all"]
