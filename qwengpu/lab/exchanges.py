"""Lanes that meet: shuffles (which lane each lane reads) and atomics (the lanes an atomic serves
one after another), per interpreter step, for the warp and lane timeline.

    shuffle_sources("bfly", b, c, executing)   # [source lane per lane] (None: the lane does not run)
    exchanges(view)                            # [Exchange]: every shuffle and atomic of a LaunchView
    machine_exchanges(view)                    # [Exchange]: a MachineView's atomics, one lane a pass

A shuffle's source lane follows the PTX ISA's definition of `shfl.sync` (mode up / down / bfly /
idx, lane operand `b`, clamp and segment mask `c`), on this machine's 4-lane warps: a source
outside the segment or the warp reads the lane itself (its predicate false).
`tests/test_lab_timeline.py` checks it against the reference interpreter: every destination
lane's result is the source lane's value. An atomic (`atom`, `red`) of several lanes is applied
lane after lane in lane order: on the interpreter in one step (its memory writes in that order say
what each lane left), on the model one pass serves one lane and the bundle runs again for the
others — there each execute pass of an atomic is an exchange whose lanes are those served so far.
"""
from __future__ import annotations

from dataclasses import dataclass

from qwengpu.machine.config import LANES
from qwengpu.machine.tokens import parse_token
from qwengpu.semantics.shuffle import shuffle_source

from .passes import is_atomic, mask_lanes, served_lanes


@dataclass
class Exchange:
    position: int                  # the step that does it (the position before it: its instruction is next)
    kind: str                      # "shuffle" | "atomic"
    warp: int
    lanes: list                    # shuffle: [[source, destination], ...]; atomic: the lanes in the order served
    words: str


def shuffle_sources(mode: str, b: list, c: list, executing: int) -> list:
    """The lane each executing lane reads in `shfl.sync.MODE d, a, b, c, membermask` (`b`, `c`:
    the operands' values per lane); None for a lane that does not execute."""
    out: list = []
    for lane in range(LANES):
        if not executing >> lane & 1:
            out.append(None)
            continue
        out.append(shuffle_source(mode, lane, b[lane], c[lane])[0])
    return out


def _mode(ins) -> str:
    op = ins.text.split(None, 1)[0]
    return next((m for m in ("up", "down", "bfly", "idx") if f".{m}" in op), "idx")


def sources_of(ins) -> list | None:
    """The source lane per lane of a snapshot's next instruction (`qwengpu.lab.view.Instruction`,
    its operands resolved per lane) when it is a shuffle; None otherwise."""
    srcs = [o for o in ins.operands if o.role == "src"]
    if not ins.text.startswith("shfl") or len(srcs) < 3 or srcs[1].values is None or srcs[2].values is None:
        return None
    return shuffle_sources(_mode(ins), srcs[1].values, srcs[2].values, ins.executed)


def _shuffle(view, t: int, step) -> Exchange | None:
    ins = view.snapshot(t).next
    sources = sources_of(ins)
    if sources is None:
        return None
    mode = _mode(ins)
    pairs = [[s, d] for d, s in enumerate(sources) if s is not None]
    moved = ", ".join(f"{d} ← {s}" for s, d in pairs)
    return Exchange(t, "shuffle", step.warp, pairs, f"warp {step.warp} shuffles ({mode}): lane {moved}")


def _atomic(step, t: int) -> Exchange | None:
    order: list = []
    values: list = []
    for _space, _addr, _size, lane, value in step.mem_writes:
        if lane not in order:
            order.append(lane)
        values.append(value)
    if len(order) < 2:
        return None
    op = step.text.split(None, 1)[0]
    return Exchange(t, "atomic", step.warp, order,
                    f"warp {step.warp}: {op} serialised, lane {', '.join(map(str, order))} one after another "
                    f"(writing {', '.join(map(str, values))} in turn)")


def exchanges(view) -> list[Exchange]:
    """Every shuffle and every atomic of several lanes in a `LaunchView`, in step order."""
    out = []
    for t, step in enumerate(view.steps):
        op = step.text.split(None, 1)[0]
        got = _shuffle(view, t, step) if op.startswith("shfl") else \
            _atomic(step, t) if op.startswith(("atom", "red")) else None
        if got is not None:
            out.append(got)
    return out


def machine_exchanges(view) -> list[Exchange]:
    """A `MachineView`'s atomics: every execute pass of an atomic bundle, with the lanes served
    so far (the first served in the pass that replays it for all, ... the last in its own)."""
    out: list = []
    bundles, toks = view.image.bundles, view.trace.tokens
    group = None                                  # (bundle, warp, its lanes, served so far)
    for t, rec in enumerate(view.trace.records):
        pc = view._exec_pc[t]
        if pc is None or not is_atomic(bundles[pc]):
            continue
        mask = parse_token(toks[rec.index - 1])[2]
        served = served_lanes(bundles[pc], mask)
        if not served:
            continue
        lane = served[0]
        warp = view._exec_warp[t]
        if group is None or group[:2] != (pc, warp) or lane in group[3]:
            group = (pc, warp, mask_lanes(mask), [])
        group[3].append(lane)
        k, of = len(group[3]), len(group[2])
        out.append(Exchange(t, "atomic", warp, list(group[3]),
                            f"warp {warp}: the atomic of bundle {pc} serves lane {lane} ({k} of {of}: one lane a pass)"))
    return out


__all__ = ["Exchange", "exchanges", "machine_exchanges", "shuffle_sources", "sources_of"]
