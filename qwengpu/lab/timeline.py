"""Every warp of the block, lane by lane, over the whole launch: the warp and lane timeline.

    tl = timeline(view)            # a LaunchView (interpreter steps) or a MachineView (passes)
    tl.state(t, warp, lane)        # "running", "guarded", "ready", "diverged", "barrier", "exited", "absent"
    tl.events                      # [(position, kind, warp, words)]: diverged, reconverged, barrier wait, release
                                   # (and on the interpreter shuffle, atomic)
    tl.exchanges                   # the interpreter's shuffles (lane -> lane) and serialised atomics

One code per lane and position (`STATES`), for the warps of the block running at that position
(blocks run one after another on every engine):

- `running`: the lane executes this step (interpreter: the warp-instruction's active lanes whose
  guard holds; model: the lanes of the bundle in flight, for all its passes — its execute, its
  carries and memory writes);
- `guarded`: (interpreter) on the warp's path at this step, its guard false;
- `ready`: alive and at its warp's next pc, waiting for its warp's turn;
- `diverged`: alive but masked off by divergence (at another pc than the lanes that run next);
- `barrier`: waiting at a barrier for the other warps of the block;
- `exited`, `absent` (no thread: the block is not a multiple of the warp size).

On the interpreter a warp's lanes come from the SIMT stack of its next step (alive = the union of
the stack's masks, ready = the top entry's mask) and a warp whose last step was a barrier waits
until its next; on the model engines from the lane table the model holds after each pass
(`MachineView.lane_words`). `events` mark where a warp's lanes split (`diverged`) and come back
together (`reconverged`), where a warp starts waiting at a barrier (`barrier`) and where the
barrier opens for it (`release`). On the interpreter `exchanges` (`qwengpu.lab.exchanges`) add
the lanes that meet: a shuffle's source lane for each lane (`shuffle`), the lanes an atomic serves
one after another (`atomic`), each also an event in words.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwengpu.machine.config import LANES

from .exchanges import exchanges, machine_exchanges

STATES = ("absent", "running", "guarded", "ready", "diverged", "barrier", "exited")
CODE = {name: i for i, name in enumerate(STATES)}
_WORD = {"ready": CODE["ready"], "waiting": CODE["diverged"], "barrier": CODE["barrier"], "exited": CODE["exited"],
         "absent": CODE["absent"]}


@dataclass
class Timeline:
    """Lane states of every warp of the running block at every position (see the module docstring)."""
    codes: np.ndarray              # uint8 [positions, warps, LANES], indices into STATES
    blocks: list                   # per position: the block running
    focus: list                    # per position: the warp in focus (the one stepping / in flight)
    events: list = field(default_factory=list)     # (position, kind, warp, words)
    exchanges: list = field(default_factory=list)  # `qwengpu.lab.exchanges.Exchange`s (interpreter)
    unit: str = "step"             # "step" (interpreter) or "pass" (model engines)

    @property
    def positions(self) -> int:
        return self.codes.shape[0]

    @property
    def warps(self) -> int:
        return self.codes.shape[1]

    def state(self, position: int, warp: int, lane: int) -> str:
        return STATES[int(self.codes[position, warp, lane])]

    def row(self, position: int, warp: int) -> list[str]:
        return [STATES[int(c)] for c in self.codes[position, warp]]

    def window(self, position: int, width: int) -> tuple[int, int]:
        """The [start, stop) of `width` positions around `position` (the whole launch if shorter)."""
        n = self.positions
        if n <= width:
            return 0, n
        start = min(max(0, position - width // 2), n - width)
        return start, start + width


def timeline(view) -> Timeline:
    """The `Timeline` of a `LaunchView` or a `MachineView` (computed once, kept on the view)."""
    got = getattr(view, "_timeline", None)
    if got is not None and got.positions == len(view):
        return got
    from .machine_view import MachineView
    tl = _machine_timeline(view) if isinstance(view, MachineView) else _interp_timeline(view)
    _mark_events(tl)
    tl.exchanges = machine_exchanges(view) if isinstance(view, MachineView) else exchanges(view)
    if tl.exchanges:
        tl.events = sorted(tl.events + [(x.position, x.kind, x.warp, x.words) for x in tl.exchanges],
                           key=lambda e: (e[0], e[2]))
    view._timeline = tl
    return tl


def _warps(spec) -> int:
    return (spec.threads_per_block + LANES - 1) // LANES


def _machine_timeline(view) -> Timeline:
    n, W = len(view), _warps(view.spec)
    blocks, focus, rows = [], [], []
    for t in range(n):
        rec = view.trace.records[t]
        ms = rec.machine
        row = rec.derived.get("timeline")       # a pass's row depends on that pass only: kept on its record
        if row is None or row.shape[0] != W:
            row = np.zeros((W, LANES), np.uint8)
            for w in range(W):
                row[w] = [_WORD[word] for _, word in view.lane_words(t, w)]
            if view._in_pass[t]:
                w = view._exec_warp[t]
                for lane in range(LANES):
                    if ms.mask >> lane & 1 and row[w, lane] != CODE["absent"]:
                        row[w, lane] = CODE["running"]
            rec.derived["timeline"] = row
        rows.append(row)
        blocks.append(int(ms.block))
        focus.append(int(ms.warp))
    codes = np.stack(rows) if rows else np.zeros((0, W, LANES), np.uint8)
    return Timeline(codes, blocks, focus, unit="pass")


def _interp_timeline(view) -> Timeline:
    steps = view.steps
    n, W = len(view), _warps(view.spec)
    codes = np.zeros((n, W, LANES), np.uint8)
    present = [[w * LANES + lane < view.spec.threads_per_block for lane in range(LANES)] for w in range(W)]
    blocks = [s.block for s in steps] + [steps[-1].block if steps else 0]
    focus = [s.warp for s in steps] + [steps[-1].warp if steps else 0]
    # per warp: its next step at or after each position (in the running block)
    next_at = np.full((n, W), -1, np.int64)
    nxt: dict = {}
    for t in range(n - 1, -1, -1):
        if t < len(steps):
            nxt[(steps[t].block, steps[t].warp)] = t
        for w in range(W):
            next_at[t, w] = nxt.get((blocks[t], w), -1)
    # the warps waiting at a barrier: a warp's barrier step adds it; when every warp of the block
    # that has steps left waits, the barrier opens (all ready again)
    at_bar = np.zeros((n, W), bool)
    waiting: set = set()
    for t in range(len(steps)):
        s = steps[t]
        if t and steps[t - 1].block != s.block:
            waiting = set()
        if s.text.split(None, 1)[0].startswith(("bar.", "barrier.")):
            waiting.add(s.warp)
            going = {w for w in range(W) if next_at[t + 1, w] >= 0} if t + 1 < n else set()
            if going <= waiting:
                waiting = set()
        for w in waiting:
            at_bar[t + 1, w] = True
    rows: dict = {}                  # (warp, next step, runs now, at a barrier) -> the lanes' codes

    def lanes_of(w, k, now, bar):
        if k < 0:
            return [CODE["exited"] if present[w][lane] else CODE["absent"] for lane in range(LANES)]
        s = steps[k]
        alive = 0
        for _, m, _ in s.stack:
            alive |= m
        out = []
        for lane in range(LANES):
            bit = 1 << lane
            if not present[w][lane]:
                code = "absent"
            elif not alive & bit:
                code = "exited"
            elif now and s.active & bit:
                code = "running" if s.executed & bit else "guarded"
            elif s.active & bit:
                code = "barrier" if bar else "ready"
            else:
                code = "diverged"
            out.append(CODE[code])
        return out
    for t in range(n):
        for w in range(W):
            k = int(next_at[t, w])
            key = (w, k, k == t, bool(at_bar[t, w]) and k != t)
            row = rows.get(key)
            if row is None:
                row = rows[key] = lanes_of(w, *key[1:])
            codes[t, w] = row
    return Timeline(codes, blocks, focus, unit="step")


def _mark_events(tl: Timeline):
    """Where a warp's lanes split and come back together, and where it starts waiting at a barrier
    and the barrier opens for it (vectorised: a launch of many thousand positions is redrawn while
    it records)."""
    n = tl.positions
    if n == 0:
        return
    blocks = np.asarray(tl.blocks[:n])
    new_block = np.ones(n, bool)
    new_block[1:] = blocks[1:] != blocks[:-1]
    for kind_on, kind_off, code in (("diverged", "reconverged", CODE["diverged"]), ("barrier", "release", CODE["barrier"])):
        on = (tl.codes == code).any(axis=2)                      # [positions, warps]
        before = np.zeros_like(on)
        before[1:] = on[:-1]
        before[new_block] = False                                # a block starts afresh
        for t, w in zip(*np.nonzero(on & ~before)):
            if kind_on == "diverged":
                lanes = [lane for lane in range(LANES) if tl.codes[t, w, lane] == code]
                words = (f"warp {w} diverges: lane{'s' if len(lanes) > 1 else ''} {', '.join(map(str, lanes))} "
                         f"wait{'' if len(lanes) > 1 else 's'} for the others")
            else:
                words = f"warp {w} waits at a barrier"
            tl.events.append((int(t), kind_on, int(w), words))
        for t, w in zip(*np.nonzero(~on & before)):
            words = (f"warp {w} reconverges: its live lanes run together again" if kind_off == "reconverged"
                     else f"the barrier opens for warp {w}")
            tl.events.append((int(t), kind_off, int(w), words))
    tl.events.sort(key=lambda e: (e[0], e[2]))
