"""Operand multiplexers: a unit's operand from a read port, an earlier unit of the same pass (re-
thresholded: forwarded results carry fp32 noise), an immediate or a special register."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler.gadgets import n_gated

from ..config import LANES
from .builder import Builder


def source_forms(hw: Builder, k: int, opt: tuple, lane: int, ports) -> list | None:
    """32 bit forms of source option `opt` for `lane` (None: all zero)."""
    inv = opt[-1] == "inv"
    kind = opt[0]
    if kind in ("port", "tport"):
        forms = ports[opt[1]][lane]
    elif kind == "zero":
        return [Lin.const(1)] * 32 if inv else None
    elif kind in ("slot", "slothi"):
        u = hw.units[opt[1]]
        var = (u.lo if kind == "slot" else u.hi)[lane]
        if var is None:
            return [Lin.const(1)] * 32 if inv else None
        forms = [var.f(i) for i in range(var.size)] + [Lin()] * (32 - var.size)
    elif kind == "special":
        f = hw.special_forms[(opt[1], lane)]
        forms = list(f) + [Lin()] * (32 - len(f))
    else:
        raise ValueError(opt)
    return [1 - x for x in forms] if inv else forms


def mux(hw: Builder, k: int, name: str, sel, opts: list, ports, outs: list, nbits: int = 32) -> list:
    """Neurons for outs[lane] (bits var) = the selected option (sel: onehot var over opts).

    A result forwarded from an earlier slot of the same bundle is re-thresholded (`clean_gate`):
    the adder's digit forms weigh a bit by up to 128, the multiplier's column sums by thousands."""
    neurons = []
    for oi, opt in enumerate(opts):
        forwarded = opt[0] in ("slot", "slothi")
        for l in range(LANES):
            forms = source_forms(hw, k, opt, l, ports)
            if forms is None:
                continue
            for i in range(nbits):
                if not forms[i].terms:
                    continue
                if forwarded:
                    neurons += hw.clean_gate(sel.f(oi), forms[i], {outs[l].feature(i): 1})
                else:
                    neurons += n_gated(sel.f(oi), forms[i], {outs[l].feature(i): 1})
    return neurons
