"""The lab's data layer: a launch replayed into a snapshot per position.

    from qwengpu.lab import trace_launch
    view = trace_launch(ptx, spec)                      # the reference interpreter: LaunchView
    snap = view.snapshot(13)                            # after 13 warp-instructions
    view = trace_launch(ptx, spec, engine="compact")    # the model's forward passes: MachineView
    snap = view.snapshot(5)                             # after 6 passes, decoded from the model's state

The widgets (`qwengpu_widgets.Inspector`) and the static HTML export draw these snapshots.
"""
from qwengpu.machine.tokens import parse_token

from .machine_view import BundleView, MachineReg, MachineSnapshot, MachineView
from .record import (DEFAULT_SELECTIONS, GDNState, LayerInfo, MachineState, Mismatch, ModelRecord, ModelTrace, RegCheck,
                     Selection, decode_state, memory_role, recurrent_state, selection_of, slot_label)
from .recorder import record_launch
from .trace import trace_launch
from .values import fmt, fmt_all
from .view import (EngineUnavailable, Instruction, LaunchView, MemoryRegion, MemoryView, Operand, RegRow, Snapshot,
                   interp_view)

__all__ = ["trace_launch", "record_launch", "interp_view", "DEFAULT_SELECTIONS", "LaunchView", "Snapshot", "RegRow", "Operand", "Instruction",
           "MemoryRegion", "MemoryView", "MachineView", "MachineSnapshot", "MachineReg", "BundleView",
           "EngineUnavailable", "ModelTrace", "ModelRecord", "MachineState", "GDNState",
           "LayerInfo", "Mismatch", "RegCheck", "Selection", "decode_state", "memory_role", "recurrent_state", "selection_of", "slot_label", "parse_token",
           "fmt", "fmt_all"]
