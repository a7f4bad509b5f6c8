"""`MachineView`: a launch recorded from the model (`qwengpu.lab.recorder.record_launch`), one
position per forward pass, every value decoded from the model's own state.

    view = trace_launch(ptx, spec, engine="compact")
    s = view.snapshot(10)
    s.input, s.token               # the token the pass consumed, the token it emitted
    s.pc, s.bundle.ptx             # the bundle of the last EXEC and its PTX instructions
    s.reg("%r2").values            # a physical register of the focus warp, by the PTX register it holds
    view.selection("rom.s0")       # which slot each token's key / query selects in a memory
    view.gdn_state(10, "mem")      # the raw recurrent state holding a memory, and its decoding
    view.consistency               # model = simulator (every token), model = interpreter (memory, registers)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwengpu.compiler.placement import MemoryPlacement
from qwengpu.machine.config import LANES
from qwengpu.machine.tokens import IN_PASS, PASS_KINDS, parse_token, token_kind, token_text
from qwengpu.runtime.statecheck import ReferenceRun, compare_states

from .checks import micro_loop_pcs, ptx_aliases, register_histories
from .passes import PassLabel, pass_label, served_lanes, token_ptx_pcs
from .record import LANE_BARRIER, LANE_EPOCH, LANE_RUN, GDNState, Mismatch, RegCheck, Selection, selection_of
from .source import SourceLines
from .values import pretty_text
from .view import MemoryRegion, MemoryView, ShownState


@dataclass
class BundleView:
    """One bundle of the program image as the lab shows it."""
    pc: int
    label: str
    ops: list                      # [(unit, text)] per occupied unit
    ptx: list                      # [(PTX pc, source line, text)] of the instructions it runs
    carries: list                  # [(carry slot, physical register, what it holds)]
    ports: list                    # [(unit, [port text])]
    term: str


@dataclass
class MachineReg:
    """A physical register of the focus warp: its value in every lane and what it holds."""
    reg: int
    labels: list                   # per lane: the PTX register (or virtual register) last carried in
    values: list                   # per lane, from the model's register file copy `reg.emit`
    written: bool
    changed: int = 0               # lanes this position's consumed token changed
    checks: list = field(default_factory=lambda: [None] * LANES)   # per lane: interpreter check here

    @property
    def name(self) -> str:
        return f"r{self.reg}"

    @property
    def label(self) -> str:
        seen = [x for x in dict.fromkeys(self.labels) if x]
        return " / ".join(seen)

    @property
    def type(self) -> str:
        return "b32"


@dataclass
class MachineSnapshot(ShownState):
    """The machine after one forward pass, decoded from the model."""
    position: int
    positions: int
    index: int                     # the emitted token's sequence index
    input: str                     # the token this pass consumed
    token: str                     # the token it emitted
    pc: int
    mask: int
    warp: int
    block: int
    epoch: int
    in_pass: bool                  # the pass consumed an EXEC, CARRY or MEMW: bundle pc is being run
    bundle: BundleView
    lane_state: list               # focus warp, after the pass (the lane table): ready | waiting | barrier | exited | absent
    lane_pc: list
    tids: list
    lanes: list                    # every present warp: [(warp, [(pc, state) per lane])]
    regs: list                     # [MachineReg]
    memory: list                   # [MemoryView]
    margin: float
    margins: dict
    consistent: bool | None        # this position's state = the simulator's (None: not compared)
    first_mismatch: Mismatch | None
    checks: list                   # RegChecks made at this position
    finished: bool = False
    fault: str | None = None
    label: PassLabel | None = None  # what this pass did and what it emitted (`qwengpu.lab.passes`)

    @property
    def active(self) -> int:
        """The lanes the bundle in flight runs for (its EXEC's mask; 0 between bundles). A lane
        the bundle's terminator ends is already `exited` in `lane_state`, the lane table after the
        pass, while its carries and writes are still to come."""
        return self.mask if self.in_pass else 0

    def reg(self, name: str) -> MachineReg:
        """A register by physical name ("r3") or by the PTX register it holds ("%r2")."""
        for r in self.regs:
            if r.name == name or name in r.labels:
                return r
        raise KeyError(f"no register {name} in warp {self.warp} at position {self.position}")


def _itemsize(dtype) -> int:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return 1


class _ChecksMixin:
    """The cross-checks of a recorded launch (`qwengpu.lab.checks`): against the simulator at every
    token, against the interpreter where comparable."""

    def _micro_loop_pcs(self) -> set:
        return micro_loop_pcs(self.image, self.kernel_fn)

    def check(self, max_tokens: int, partial: bool = False, reference: ReferenceRun | None = None):
        """Compare the records with the simulator (every token) and the interpreter (see
        `qwengpu.lab.checks`); fills `trace.consistency`, `trace.mismatches`, `trace.reg_checks`.
        `partial`: the passes recorded so far of a launch still running (`LiveRecording.view`):
        compared with the simulator and the interpreter's registers; the final memory and the
        result buffers wait for the end (`consistency["exact"]` is None while nothing differs).
        `reference`: the simulator's run to compare with, kept by a recording between its views."""
        trace = self.trace
        recs = trace.records
        reference = reference or ReferenceRun(self.image, self.module, self.spec, max_tokens)
        ref_tokens, ref_states, ref_errors = reference.upto(len(recs))
        mism: list = []
        used = self.image.config.max_warps * LANES
        compared = 0
        for i, rec in enumerate(recs):
            if i >= len(ref_states):
                mism.append(Mismatch(rec.index, i, "token", None, rec.text))
                break
            # the pass that emits <fault>: the circuits still write the served lanes' next pc and
            # state, the simulator stops at the fault; the launch ends there, so its lane table is
            # not compared (everything else is)
            faulting = token_kind(rec.text) == "FAULT"
            mism += compare_states(i, rec.index, rec.machine, ref_states[i], 0 if faulting else used)
            compared = i + 1
            want = token_text(ref_tokens[i])
            if want != rec.text:
                mism.append(Mismatch(rec.index, i, "token", want, rec.text))
                break
        self._compared = compared
        tokens_equal = compared == len(recs) and (partial or len(ref_tokens) == len(recs)) and \
            not any(m.what == "token" for m in mism)
        sim = {"tokens_equal": tokens_equal, "positions": compared,
               "mismatches": len(mism), "replay_errors": list(ref_errors)}
        # the interpreter: final memory and buffers, carried registers
        interp, checks = self._check_interpreter(mism, partial)
        trace.mismatches = mism
        trace.reg_checks = checks
        self._checks_at = {}
        for c in checks:
            self._checks_at.setdefault(c.position, []).append(c)
        margins = [r.margin for r in recs]
        extra = self.result.extra if self.result is not None else {}
        exact = tokens_equal and not mism and not ref_errors and interp["ok"]
        trace.consistency = {
            "simulator": sim, "interpreter": interp, "partial": partial,
            "exact": (None if exact else False) if partial else exact,
            "min_code_margin": min(margins) if margins else None,
            "min_logit_gap": extra.get("min_logit_gap"),
            "raw_state_exact": trace.raw_exact,
        }

    def _check_interpreter(self, mism: list, partial: bool = False):
        """The model against the interpreter, where comparable: the final global memory, the result
        buffers, and the carried registers against each lane's history of the PTX register they
        hold (see `qwengpu.lab.recorder`)."""
        recs = self.trace.records
        ref = self.reference
        out = {"memory": None, "buffers": None, "registers": 0, "register_mismatches": 0,
               "registers_compared": True, "note": ""}
        if recs and not partial:
            out["memory"] = self._final_memory_matches(mism)
        if self.result is not None and ref.result is not None:
            ok = all((a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
                     for a, b in zip(self.result.buffers, ref.result.buffers))
            out["buffers"] = ok
            if not ok:
                mism.append(Mismatch(recs[-1].index, len(recs) - 1, "result buffers", "interpreter's", "differ",
                                     "interpreter"))
        elif self.fault is not None:
            out["buffers"] = ref.fault is not None
            out["note"] = "both faulted" if ref.fault is not None else "the model faulted, the interpreter did not"
        checks: list = []
        if any(ins.op == "call" for ins in self.kernel_fn.body):
            out["registers_compared"] = False
            out["note"] = "registers not compared: the kernel calls device functions (inlined under other names)"
        else:
            checks = self._register_checks(mism)
            out["registers"] = sum(c.ok is not None for c in checks)
            out["register_mismatches"] = sum(c.ok is False for c in checks)
            out["intermediate"] = sum(c.ok is None for c in checks)
        out["ok"] = bool(out["memory"] is not False and out["buffers"] is not False and not out["register_mismatches"])
        return out, checks

    def _final_memory_matches(self, mism: list) -> bool:
        """Final global memory, byte for byte."""
        recs = self.trace.records
        final = recs[-1].machine
        want = self.reference.memory_at(self.reference.n_steps)
        ok = True
        for r in self._regions:
            if r.space != "global":
                continue
            m = self._maddr(r)
            got = final.memory[m:m + r.size]
            exp = want.get(r.key)
            if exp is not None and bytes(got) != bytes(exp):
                ok = False
                i = next(k for k in range(r.size) if got[k] != exp[k])
                mism.append(Mismatch(recs[-1].index, len(recs) - 1, f"final {r.name}[byte {i}] at 0x{r.base + i:x}",
                                     exp[i], got[i], "interpreter"))
        return ok

    def _register_checks(self, mism: list) -> list:
        """Every carried register whose virtual register the lowering ties to a PTX register, per
        served lane, matched in order against that lane's history of the PTX register."""
        recs = self.trace.records
        ref = self.reference
        H = register_histories(ref, self.kernel)
        checks: list = []
        cursor: dict = {}
        pending: list = []
        toks = self.trace.tokens
        n = len(recs)
        for t, rec in enumerate(recs):
            tok = parse_token(toks[rec.index - 1])
            if tok[0] != "EXEC":
                continue
            # records t, t+1, ... emit the pass's carries and stores; record c emits the control
            # token: its state has consumed all of them
            c = t
            while c < n and token_kind(recs[c].text) in IN_PASS:
                c += 1
            if c >= n or token_kind(recs[c].text) == "FAULT":
                continue
            ms = recs[c].machine
            b = self.image.bundles[tok[1]]
            warp, block = recs[t].machine.warp, recs[t].machine.block
            for j, (v, (slot, part)) in enumerate(b.carries):
                alias = self.aliases.get(v)
                if alias is None:
                    continue
                name, half = alias
                typ = self.kernel_fn.regs.get(name)
                if typ is None:
                    continue
                bits = 1 if typ == "pred" else {"b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16,
                                                 "f16": 16}.get(typ, 32)
                mask = (1 << bits) - 1
                r = b.carry_regs[j]
                for lane in served_lanes(b, tok[2]):
                    got = ms.regs.get((warp, r), [0] * LANES)[lane] & mask
                    hist = H.get((block, warp, lane, name), [(0, None, -1)])
                    key = (block, warp, lane, name, half)
                    k0 = cursor.get(key, 0)
                    found = None
                    for k in range(k0, len(hist)):
                        val = (hist[k][0] >> (32 * half)) & 0xFFFFFFFF & mask
                        if val == got and (k == k0 or hist[k][1] == b.slots[slot].op.ptx_pc):
                            found = k
                            break
                    ok = found is not None
                    if ok:
                        cursor[key] = found
                    chk = RegCheck(c, warp, block, r, lane, name, half, got, ok, hist[found][2] if ok else None)
                    checks.append(chk)
                    exp = (hist[k0][0] >> (32 * half)) & mask if k0 < len(hist) else None
                    pending.append((chk, key, b.slots[slot].op.ptx_pc, exp))
        self._mark_intermediate(pending, mism)
        return checks

    def _mark_intermediate(self, pending: list, mism: list):
        """A value carried inside a lowering loop (a CAS loop, an atomic served lane by lane) that
        a later carry of the same PTX instruction replaces is intermediate: not compared. The
        other failed checks are mismatches."""
        recs = self.trace.records
        micro = self._micro_loop_pcs()
        later: dict = {}
        for i in range(len(pending) - 1, -1, -1):
            chk, key, ptx_pc, exp = pending[i]
            if not chk.ok and ptx_pc in micro and (key, ptx_pc) in later:
                chk.ok = None
            later[(key, ptx_pc)] = i
        for chk, key, ptx_pc, exp in pending:
            if chk.ok is False:
                rec = recs[chk.position]
                mism.append(Mismatch(rec.index, chk.position, f"{chk.name}{'.hi' if chk.half else ''} (r{chk.reg} of "
                                     f"warp {chk.warp}) lane {chk.lane}", exp, chk.value, "interpreter"))


def _lane_word(present: bool, st: int, epoch_now: bool = True) -> str:
    """A lane's state word from the model's lane state (the lane table's, in every panel)."""
    if not present:
        return "absent"
    if st & LANE_BARRIER:
        return "barrier" if epoch_now else "ready"
    if st & LANE_RUN:
        return "ready"
    return "exited"


class MachineView(_ChecksMixin, SourceLines):
    """Per-position machine state of a launch recorded from the model (see the module docstring)."""

    def __init__(self, module, spec, kernel_fn, image, trace, reference, result, fault, machine, names=None):
        self.module, self.spec, self.kernel_fn, self.image = module, spec, kernel_fn, image
        self.trace = trace
        self.model = trace                     # the interface LaunchView users know
        self.reference = reference             # the interpreter's LaunchView
        self.result, self.fault, self.machine = result, fault, machine
        self.engine = trace.engine
        self.arg_names = list(names) if names else None
        self._bundles: dict = {}
        self._gdn_cache: dict = {}
        self._labels_cache: dict = {}
        self._parse()

    # -- public ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.trace.records)

    @property
    def kernel(self) -> str:
        return self.kernel_fn.name

    @property
    def consistency(self) -> dict:
        return self.trace.consistency

    def regions(self) -> list[MemoryRegion]:
        return list(self._regions)

    def find_pc(self, pc: int, start: int = 0) -> int | None:
        """The next position after `start` whose pass ran (consumed the EXEC of) bundle `pc`."""
        for t in range(start + 1, len(self)):
            if self._exec_pc[t] == pc:
                return t
        return None

    def next_break(self, start: int, breakpoints) -> int:
        bps = set(breakpoints)
        for t in range(start + 1, len(self)):
            if self._exec_pc[t] in bps:
                return t
        return len(self) - 1

    def continue_text(self, text, new_tokens: int = 0) -> list[int]:
        """Text after the launch, in the same context (a launch recorded on the stock forward of a
        spliced checkpoint, `engine="model"`): the model consumes the launch's last token, then
        `text` (a string or token ids of the checkpoint's vocabulary), then generates `new_tokens`
        tokens greedily; returns their ids (`view.machine.tokenizer.decode(ids)`). The recorded
        context is copied first: every call starts right after the launch."""
        import copy

        import torch

        from qwengpu.compiler.run import cache_kwarg

        from .text import prefix_tokens
        if getattr(self.trace, "context", None) is None:
            raise ValueError("continue_text needs a launch recorded on the stock forward of a spliced checkpoint "
                             "(engine='model', machine/model = the checkpoint)")
        model = self.machine.model
        cache = copy.deepcopy(self.trace.context)
        ids = [self.machine.token_id(self.trace.records[-1].text)] + prefix_tokens(self.machine, text)[0]
        kw = cache_kwarg(model)
        out = []
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids], device=model.device), use_cache=True, **{kw: cache}).logits
            for _ in range(new_tokens):
                nxt = int(logits[0, -1].argmax())
                out.append(nxt)
                logits = model(input_ids=torch.tensor([[nxt]], device=model.device), use_cache=True,
                               **{kw: cache}).logits
        return out

    def selection(self, memory: str) -> Selection:
        """`qwengpu.lab.record.Selection` of a memory: what its key heads select, every consumed token."""
        got = self._gdn_cache.get(("sel", memory))
        if got is None:
            got = self._gdn_cache[("sel", memory)] = selection_of(self.trace, memory)
        return got

    def gdn_state(self, position: int, memory: str) -> GDNState:
        """The raw recurrent state holding `memory` after pass `position`, as one block [fields,
        slots, value dim]: field f's row of slot s is the row of the value head (port 0's copy) and
        layer of the piece holding it (`MemoryPlacement.pieces`; a memory in banks or spread over
        layers is put together), rebuilt from the state after the prompt and the rows every pass
        wrote, with the placement that decodes it (field f in head f)."""
        pl = self.trace.memories[memory]
        spans = {span: f for f, span in enumerate(pl.spans)}
        key = ("raw", memory)
        cached = self._gdn_cache.get(key)
        if cached is None:
            base = self.trace.base_raw
            block = np.zeros((len(spans), pl.slots, base[pl.layer].shape[-1]), np.float32)
            for L, h, lo, w, s0, n in pl.all_pieces():
                block[spans[(lo, w)], s0:s0 + n] = base[L][h, :n]
            cached = [0, block]
        t0, block = cached
        layers = set(pl.layers)

        def apply(t, new: bool):
            for L, hh, rr, old, nw in self.trace.updates[t]:
                if L not in layers:
                    continue
                vals = nw if new else old
                for k, h in enumerate(hh):
                    pc = pl.piece_at(L, int(h))
                    if pc is not None and rr[k] < pc[5]:
                        block[spans[(pc[2], pc[3])], pc[4] + rr[k]] = vals[k]
        while t0 < position:
            t0 += 1
            apply(t0, True)
        while t0 > position:
            apply(t0, False)
            t0 -= 1
        cached[0] = t0
        self._gdn_cache[key] = cached
        shown = MemoryPlacement(memory, pl.layer, [(f, lo, w) for (lo, w), f in spans.items()], pl.slots)
        return GDNState(pl.layer, block.copy(), [shown])

    def bundle(self, pc: int) -> BundleView:
        got = self._bundles.get(pc)
        if got is None:
            got = self._bundles[pc] = self._bundle_view(pc)
        return got

    def snapshot(self, position: int) -> MachineSnapshot:
        n = len(self)
        if not 0 <= position < n:
            raise IndexError(f"position {position} out of range 0..{n - 1}")
        t = position
        rec = self.trace.records[t]
        ms = rec.machine
        prev = self.trace.records[t - 1].machine if t > 0 else None
        w = ms.warp
        # registers of the focus warp
        labels = self._labels[t]
        checks = {}
        for c in self._checks_at.get(t, []):
            checks[(c.warp, c.reg, c.lane)] = c.ok
        regs = []
        for r in range(self.image.nregs):
            vals = ms.regs.get((w, r))
            pv = prev.regs.get((w, r)) if prev is not None else None
            cur = list(vals) if vals is not None else [0] * LANES
            old = list(pv) if pv is not None else [0] * LANES
            changed = sum(1 << l for l in range(LANES) if prev is not None and cur[l] != old[l])
            regs.append(MachineReg(r, list(labels.get((w, r), [""] * LANES)), cur, vals is not None, changed,
                                   [checks.get((w, r, l)) for l in range(LANES)]))
        # lanes
        # lanes: one word per lane, the lane table after the pass, the same in every panel
        in_pass = self._in_pass[t]
        lanes = [(ww, self.lane_words(t, ww)) for ww in range(self.warps)]
        lane_pc = [pc for pc, _ in lanes[w][1]] if w < len(lanes) else [0] * LANES
        lane_state = [word for _, word in lanes[w][1]] if w < len(lanes) else ["absent"] * LANES
        memory = self._memory_views(ms, prev, rec)
        sim_bad = [m for m in self.trace.mismatches if m.position == t and m.against == "simulator"]
        compared = t < self._compared
        finished = (t == n - 1 and token_kind(rec.text) == "HALT") or token_kind(rec.text) == "FAULT"
        return MachineSnapshot(
            position=t, positions=n, index=rec.index, input=self.trace.tokens[rec.index - 1], token=rec.text,
            pc=ms.pc, mask=ms.mask, warp=w, block=ms.block, epoch=ms.epoch, in_pass=in_pass,
            bundle=self.bundle(ms.pc) if ms.pc < len(self.image.bundles) else self.bundle(0),
            lane_state=lane_state, lane_pc=lane_pc, tids=self.reference._tids(w), lanes=lanes, regs=regs,
            memory=memory, margin=rec.margin, margins=dict(rec.margins),
            consistent=(not sim_bad) if compared else None,
            first_mismatch=self.trace.first_mismatch(t), checks=self._checks_at.get(t, []),
            finished=finished, fault=self._fault_text() if self.fault is not None and t == n - 1 else None,
            label=self.pass_label(t))

    def _fault_text(self) -> str:
        """The fault, and the CUDA line of its instruction (the interpreter's, which faulted at the
        same place, when the model's does not say)."""
        where = self.cuda_where(self.fault)
        if where is None and getattr(self.reference, "fault", None) is not None:
            where = self.cuda_where(self.reference.fault)
        return str(self.fault) + (f"\n    at {where}" if where else "")

    @property
    def warps(self) -> int:
        """Warps in a block."""
        return (self.spec.threads_per_block + LANES - 1) // LANES

    def lane_words(self, position: int, warp: int) -> list[tuple[int, str]]:
        """Warp `warp`'s lanes after pass `position`, from the lane table the model holds: (next
        pc, state) per lane; state: `ready` (runs when the warp runs next: at the warp's lowest pc),
        `waiting` (diverged: at a higher pc, runs after the others reconverge with it),
        `barrier` (waits at a barrier), `exited`, `absent` (no thread)."""
        ms = self.trace.records[position].machine
        row = [ms.lanes[warp * LANES + l] for l in range(LANES)]
        present = [warp * LANES + l < self.spec.threads_per_block for l in range(LANES)]
        # a lane at a barrier waits while its epoch bit is the machine's epoch's parity; after the
        # release (the epoch moved on) it is runnable again, as the simulator's `runnable` says
        words = [_lane_word(p, st, bool(st & LANE_EPOCH) == bool(ms.epoch & 1)) for (pc, st), p in zip(row, present)]
        running = [pc for (pc, _), word in zip(row, words) if word == "ready"]
        low = min(running) if running else None
        return [(pc, "waiting" if word == "ready" and pc != low else word) for (pc, _), word in zip(row, words)]

    def ptx_lines_at(self, position: int) -> list[int]:
        """The PTX lines pass `position` belongs to (its bundle's, a carry's instruction, a store)."""
        body = self.kernel_fn.body
        return [body[p].line for p in self._pass_ptx[position] if p is not None and 0 <= p < len(body)]

    def cuda_lines(self, position: int) -> list[int]:
        """`SourceLines.cuda_lines`, kept on the pass's record (a recording's views share them)."""
        d = self.trace.records[position].derived
        got = d.get("cuda")
        if got is None or got[0] is not self.source:
            got = d["cuda"] = (self.source, SourceLines.cuda_lines(self, position))
        return got[1]

    def line_hit(self, position: int, lines: list, before: list) -> list:
        """A CUDA line is hit (a breakpoint on it stops here) at every pass that runs a bundle
        holding it: one pass per execution of the bundle, as bundle breakpoints."""
        return lines if self._exec_pc[position] is not None else []

    def pass_label(self, position: int) -> PassLabel:
        """What pass `position` did and what it emitted (`qwengpu.lab.passes.PassLabel`)."""
        got = self._labels_cache.get(position)
        if got is None:
            got = self._labels_cache[position] = pass_label(self, position)
        return got

    def register_name(self, vreg) -> str:
        """The PTX register a virtual register of the image holds (`%r2`, `%rd4.lo`), or `vN`."""
        return self._vname(vreg)

    def memory_at(self, position: int) -> dict:
        """{region key: bytes} of every region after pass `position` (as `LaunchView.memory_at`)."""
        ms = self.trace.records[position].machine
        return {r.key: bytes(ms.memory[self._maddr(r):self._maddr(r) + r.size]) for r in self._regions}

    def written_offsets(self, position: int) -> dict:
        """{region key: byte offsets (an int array)} pass `position` changed (none at position 0)."""
        if position <= 0:
            return {}
        now, before = self.memory_at(position), self.memory_at(position - 1)
        return {k: np.flatnonzero(np.frombuffer(now[k], np.uint8) != np.frombuffer(before[k], np.uint8))
                for k in now}

    def written_bytes(self, position: int) -> list[str]:
        """The bytes of the launch's buffers (and shared memory) pass `position` changed, as
        `out[0] byte 0` (element and byte of the buffer's own type)."""
        offsets, out = self.written_offsets(position), []
        for r in self._regions:
            size = _itemsize(r.dtype)
            out += [f"{r.name}[{i // size}] byte {i % size}" if size > 1 else f"{r.name}[{i}]"
                    for i in offsets.get(r.key, ())]
        return out

    # -- construction ------------------------------------------------------------------------------

    def _parse(self):
        """Per position: the bundle being run, the warp of the last EXEC, and what each physical
        register holds (from the bundles' carries)."""
        recs = self.trace.records
        toks = self.trace.tokens
        self._exec_pc = [None] * len(recs)
        self._exec_warp = [0] * len(recs)
        self._in_pass = [False] * len(recs)
        self._pass_ptx = [[] for _ in recs]
        self._labels = []
        labels: dict = {}
        ew = 0
        bundles = self.image.bundles
        for t, rec in enumerate(recs):
            tok = parse_token(toks[rec.index - 1])
            self._pass_ptx[t] = token_ptx_pcs(bundles, tok, rec.machine.pc)
            if tok[0] == "EXEC":
                self._exec_pc[t] = tok[1]
                ew = rec.machine.warp
                b = self.image.bundles[tok[1]]
                served = served_lanes(b, tok[2])
                labels = dict(labels)
                for j, (v, _) in enumerate(b.carries):
                    key = (ew, b.carry_regs[j])
                    cur = list(labels.get(key, [""] * LANES))
                    for l in served:
                        cur[l] = self._vname(v)
                    labels[key] = cur
            self._exec_warp[t] = ew
            self._in_pass[t] = tok[0] in PASS_KINDS
            self._labels.append(labels)
        self._build_regions()

    @property
    def aliases(self) -> dict:
        got = getattr(self, "_aliases_cache", None)
        if got is None:
            try:
                got = ptx_aliases(self.module, self.spec, self.kernel_fn, self.image.layout)
            except Exception:                 # the lowering is re-run only to name registers
                got = {}
            self._aliases_cache = got
        return got

    def _vname(self, v) -> str:
        a = self.aliases.get(v)
        if a is None:
            return f"v{v.id}"
        name, half = a
        wide = self.kernel_fn.regs.get(name, "b32") in ("b64", "u64", "s64", "f64")
        return name + ((".hi" if half else ".lo") if wide else "")

    def _build_regions(self):
        lay = self.image.layout
        regs = []
        for r in self.reference.regions():
            if r.space == "global" and r.size:
                regs.append(r)
        self._shared_size = lay.shared_size
        if lay.shared_size:
            regs.append(MemoryRegion("shared", "shared", "shared", 0, lay.shared_size, self.reference._shared_dtype,
                                     (), list(self.reference._shared_vars)))
        self._regions = regs

    def _maddr(self, r: MemoryRegion) -> int:
        return self.image.layout.machine_address(r.space, r.base, 0)

    def _memory_views(self, ms, prev, rec) -> list:
        out = []
        for r in self._regions:
            m = self._maddr(r)
            data = bytes(ms.memory[m:m + r.size])
            changed = []
            if prev is not None:                # compared as arrays: a 16 KiB region is 16K bytes a pass
                old = bytes(prev.memory[m:m + r.size])
                changed = np.flatnonzero(np.frombuffer(data, np.uint8) != np.frombuffer(old, np.uint8)).tolist()
            region = r
            if r.space == "shared":
                region = MemoryRegion(r.key, f"shared (block {ms.block})", "shared", 0, r.size, r.dtype, (ms.block,),
                                      r.variables)
            out.append(MemoryView(region, 0, data, changed, {}, {}))
        return out

    def _bundle_view(self, pc: int) -> BundleView:
        b = self.image.bundles[pc]
        fn = self.kernel_fn
        unit_names = self.image.config.slots
        dst_name = {}
        ops = []
        for k, so in enumerate(b.slots):
            if so is None:
                continue
            op = so.op
            dsts = [self._vname(d) for d in op.dst if d is not None]
            for d in dsts[:1]:
                dst_name[k] = d

            def src(s, k=k):
                if s.kind in ("port", "tport", "sport"):     # sport: another slot's port (the float unit's)
                    j, p = s.index if s.kind == "sport" else (k, s.index)
                    ent = b.ports[j][p] if j < len(b.ports) and p < len(b.ports[j]) else None
                    txt = (f"r{ent[1]}" if ent[0] == "reg" else f"#{ent[1]:#x}") if ent else f"port{p}"
                elif s.kind in ("slot", "slothi", "flag"):
                    txt = {"slot": "", "slothi": "hi ", "flag": "flag "}[s.kind] + dst_name.get(s.index, f"u{s.index}")
                elif s.kind == "imm":
                    txt = f"#{s.index:#x}"
                elif s.kind == "zero":
                    txt = "0"
                else:
                    txt = f"%{s.index}"
                return ("~" if s.inv else "") + txt

            args = []
            for name, s in so.srcs.items():
                t = src(s)
                args.append(t if name in ("a", "b", "c") else f"{name}={t}")
            extra = op.extra.get("mode") or op.extra.get("atom") or ""
            if op.kind == "mem":
                extra = f"{op.extra.get('space', '')}.{op.extra.get('width', '')}B" + (f" {op.extra['atom']}" if op.extra.get("atom") else "")
            elif op.kind == "fpu":                          # its modifiers as PTX spells them
                ex = op.extra
                extra = ".".join(m for m in (ex.get("compare"), ex.get("rnd"), "ftz" if ex.get("ftz") else None,
                                             "sat" if ex.get("sat") else None, "NaN" if ex.get("nan") else None) if m)
            text = f"{op.op}{(' ' + extra) if extra else ''} {', '.join(dsts) or '—'} ← {', '.join(args)}"
            ops.append((f"{k}:{unit_names[k] if k < len(unit_names) else '?'}", text))
        ptx = []
        for p in sorted(set(b.ptx_pcs)):
            if 0 <= p < len(fn.body):
                ins = fn.body[p]
                ptx.append((p, ins.line, pretty_text(ins.text)))
        carries = [(j, r, self._vname(b.carries[j][0])) for j, r in enumerate(b.carry_regs)]
        t = b.term
        if t[0] == "jump":
            term = f"jump → {t[1]}"
        elif t[0] == "branch":
            term = f"branch: {'' if t[1] else '!'}{b.term_src} ? {t[2]} : {t[3]}"
        elif t[0] == "barrier":
            term = f"barrier → {t[1]}"
        else:
            term = "exit"
        ports = []
        for k, ps in enumerate(b.ports):
            if ps:
                ports.append((k, [f"r{x}" if kind == "reg" else f"#{x:#x}" for kind, x in ps]))
        return BundleView(pc, b.label, ops, ptx, carries, ports, term)
