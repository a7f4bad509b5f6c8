"""Token-level simulator of the machine: one forward pass per call, driven by the previous token,
exactly as the model runs. It is the specification the circuits are built against (`docs/machine.md`)
and is itself tested against the reference interpreter.

Tokens (every generated token is one forward pass):

    GO / BLOCK(b)            start block b: every present lane fresh at the entry bundle, warp 0
    WARP(w)                  continue with warp w
    EXEC(pc, mask)           run bundle pc for the lanes in mask of the current warp
    FPU(lane)                the float unit (one datapath) runs the bundle's float op for one
                             more lane; it changes no architectural state
    CARRY(j, byte, lanes, v) write byte `byte` of the j-th register the last bundle carries:
                             lanes = one lane, or "all" lanes of the EXEC mask (when equal)
    MEMW(lane, byte, v)      write a byte of the memory a store/atomic of the last bundle changed
    HALT                     the launch is over
    FAULT(kind, lane)        a memory fault; the address is in the model's state

A pass that runs a bundle (EXEC) decides everything the following passes emit: the float unit's
further lanes (when the bundle carries its result), the changed bytes
of its carried registers (in order j, byte, then "all" or each changed lane), the changed bytes of
memory (lane, byte), then the control token. Control: the lanes of the current warp with the
lowest pc run next; when none can, the next warp (cyclically) that can; when none can but some
wait at a barrier, the barrier opens; when every lane has exited, the next block or HALT.

The simulator commits a pass's register and memory writes when it runs the EXEC; the model writes
them byte by byte as it consumes the CARRY and MEMW tokens. `held_state()` is the state *as the
model holds it* after the last consumed token (the lab checks the model's decoded state against it
at every token).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwengpu.semantics.faults import ExecutionFault, MemoryFault
from qwengpu.semantics.shuffle import shuffle_source
from qwengpu.launch import LaunchSpec

from .config import FPU, LANES
from .image import Image, Source
from .uops import M32, alu_eval_lanes, fpu_eval

RUN, BARRIER, EXITED = 0, 1, 2
FAULT_KINDS = ["read", "write", "misaligned", "atomic"]


class MachineStepLimit(ExecutionFault):
    pass


def step_limit_message(max_tokens: int, tokens: list, block_threads: int) -> str:
    """Why the token limit stopped a launch, from its generated tokens (tuples): a block of several
    warps whose current warp ran alone for the last half of the launch (no warp switch, barrier
    release or new block) is most likely spinning on a flag another warp of its block would set,
    which never runs (a block's warps run one at a time, each until a barrier or its exit, as in the
    interpreter); otherwise a loop that runs too long."""
    limit = f"token limit of {max_tokens} reached"
    tail = tokens[len(tokens) // 2:]
    if -(-block_threads // LANES) > 1 and tail and not any(t[0] in ("WARP", "RELEASE", "BLOCK") for t in tail):
        warp = next((t[1] for t in reversed(tokens) if t[0] == "WARP"), 0)
        return (f"{limit}: warp {warp} ran alone for the last {len(tail)} tokens while other warps of its block "
                f"waited to run. A block's warps run one at a time, each until a barrier or its exit, so a warp "
                f"spinning on another warp's write (a flag, a lock) never sees it; order them with "
                f"__syncthreads() (raising max_steps will not help). Or a runaway loop?")
    return f"{limit} (a runaway loop?)"


@dataclass
class PassRecord:
    """One EXEC pass and the tokens it decided."""
    token_index: int
    block: int
    warp: int
    pc: int
    mask: int
    tokens: list
    writes: dict = field(default_factory=dict)   # physical reg -> [value per lane] after the pass
    stores: dict = field(default_factory=dict)   # machine address -> byte the pass's MEMW tokens wrote
    ptx_pcs: list = field(default_factory=list)


#: lane state bits of a lane-table entry (`lanes`): running, waiting at a barrier, the barrier
#: epoch's parity (an exited or absent lane is 0)
LANE_RUN, LANE_BARRIER, LANE_EPOCH = 1, 2, 4


def lane_code(state: int, epoch: int) -> int:
    """A lane's (RUN | BARRIER | EXITED, epoch) as the lane table's state bits."""
    if state == RUN:
        return LANE_RUN
    if state == BARRIER:
        return LANE_BARRIER | (LANE_EPOCH if epoch & 1 else 0)
    return 0


@dataclass
class MachineState:
    """The machine's architectural state as the model's GDN states hold it after one consumed
    token (`Simulator.held_state`; the lab decodes the same from the model)."""
    pc: int = 0                    # the bundle of the last EXEC
    mask: int = 0                  # its lanes
    warp: int = 0
    block: int = 0
    epoch: int = 0
    lanes: list = field(default_factory=list)      # per warp x lane (index 4w + l): (next pc, state bits)
    regs: dict = field(default_factory=dict)       # (warp, physical register) -> [value per lane]
    memory: bytes = b""                            # the machine memory (256 lines x 16 bytes)

    @property
    def active(self) -> int:
        return self.mask


@dataclass
class SimResult:
    buffers: list
    tokens: list                  # every generated token
    passes: list                  # PassRecord per EXEC
    memory: bytes
    registers: dict               # (warp, reg) -> lanes (final)
    fault: ExecutionFault | None = None

    @property
    def token_count(self) -> int:
        return len(self.tokens)


def _sx(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class Simulator:
    def __init__(self, image: Image, module, spec: LaunchSpec, max_tokens: int = 200_000):
        self.image = image
        self.module = module
        self.spec = spec
        self.lay = image.layout
        self.cfg = image.config
        self.max_tokens = max_tokens
        self.memory = initial_memory(image, module, spec)
        self.nthreads = spec.threads_per_block
        self.nwarps = (self.nthreads + LANES - 1) // LANES
        if self.nwarps > self.cfg.max_warps:
            raise ExecutionFault(f"a block of {self.nthreads} threads needs {self.nwarps} warps; the machine "
                                 f"runs {self.cfg.max_warps}")
        self.nblocks = spec.blocks
        self.tokens: list = []
        self.passes: list[PassRecord] = []
        self.regs: dict = {}
        self.pending: list = []
        # the state as the model holds it (`held_state`): the last EXEC, and the registers and
        # memory the CARRY and MEMW tokens consumed so far have written
        self.last_writes: list = []          # the last EXEC's stores: (lane, address, size, value)
        self.held_exec = (0, 0, 0, [])       # (pc, mask, warp, stores) of the last EXEC
        self.held_regs: dict = {}
        self.held_memory = bytearray(self.memory)

    def present(self, warp: int, lane: int) -> bool:
        return warp * LANES + lane < self.nthreads

    # -- specials -------------------------------------------------------------------------------------

    def special(self, name: str, warp: int, lane: int) -> int:
        tid = warp * LANES + lane
        bx, by, bz = self.spec.block
        if name.startswith("tid."):
            return {"tid.x": tid % bx, "tid.y": (tid // bx) % by, "tid.z": tid // (bx * by)}[name]
        if name.startswith("ctaid."):
            return self.ctaid["xyz".index(name[-1])]
        if name == "laneid":
            return lane
        if name == "warpid":
            return warp
        if name.startswith("lanemask_"):
            k = name[len("lanemask_"):]
            full = (1 << LANES) - 1
            return {"eq": 1 << lane, "lt": (1 << lane) - 1, "le": (1 << (lane + 1)) - 1,
                    "gt": full & ~((1 << (lane + 1)) - 1), "ge": full & ~((1 << lane) - 1)}[k]
        raise ExecutionFault(f"unknown special {name}")

    # -- the launch: one pass per token --------------------------------------------------------------

    def run(self) -> SimResult:
        self.fault = None
        tok = ("GO",)
        while True:
            tok = self.step(tok)
            self.tokens.append(tok)
            if tok[0] in ("HALT", "FAULT"):
                break
            if len(self.tokens) >= self.max_tokens:
                threads = self.spec.block[0] * self.spec.block[1] * self.spec.block[2]
                raise MachineStepLimit(step_limit_message(self.max_tokens, self.tokens, threads),
                                       kernel=self.image.kernel).locate()
        buffers = read_buffers(self.image, self.spec, self.memory)
        if self.fault is not None:
            raise self.fault
        return SimResult(buffers, self.tokens, self.passes, bytes(self.memory), dict(self.regs))

    def step(self, tok: tuple) -> tuple:
        """Process one forward pass whose input token is `tok`; return the token it emits."""
        kind = tok[0]
        if kind in ("GO", "BLOCK"):
            b = tok[1] if kind == "BLOCK" else 0
            self.block = b
            gx, gy, _ = self.spec.grid
            self.ctaid = (b % gx, (b // gx) % gy, b // (gx * gy))
            self.warp = 0
            self.epoch = 0
            self.lanes = {(w, l): (self.image.entry, RUN if self.present(w, l) else EXITED, 0)
                          for w in range(self.cfg.max_warps) for l in range(LANES)}
            return self.control()           # registers keep their values across blocks
        if kind == "WARP":
            self.warp = tok[1]
            return self.control()
        if kind == "RELEASE":
            self.epoch = tok[1]                 # the barrier opens: waiting lanes may run
            return self.control()
        if kind == "EXEC":
            self.pending = self.execute(tok[1], tok[2])
            self.held_exec = (tok[1], tok[2], self.warp, list(self.last_writes))
        elif kind == "FPU":                        # the float unit's result for one more lane:
            pass                                   # held in the carry buffer, no machine state
        elif kind == "CARRY":                      # applied when the EXEC pass decided it; the
            self._hold_carry(*tok[1:])             # model writes it now
        elif kind == "MEMW":
            self._hold_memw(*tok[1:])
        else:
            raise ExecutionFault(f"unexpected token {tok}")
        return self.pending.pop(0)

    # -- the state as the model holds it, token by token ---------------------------------------------

    def _hold_carry(self, j: int, byte: int, lane, v: int):
        """CARRY: one byte of the register carry slot j of the last EXEC writes, in `lane` or in
        all lanes of its mask."""
        pc, mask, warp, _ = self.held_exec
        key = (warp, self.image.bundles[pc].carry_regs[j])
        cur = list(self.held_regs.get(key, [0] * LANES))          # copied: snapshots share the lists
        for l in ([l for l in range(LANES) if mask >> l & 1] if lane == "all" else [lane]):
            cur[l] = (cur[l] & ~(0xFF << (8 * byte)) & M32) | (v << (8 * byte))
        self.held_regs[key] = cur

    def _hold_memw(self, lane: int, byte: int, v: int):
        """MEMW: one byte of the memory word lane `lane`'s store (or atomic) of the last EXEC addressed."""
        addr = next((a for (wl, a, _, _) in self.held_exec[3] if wl == lane), None)
        if addr is None:
            raise ExecutionFault(f"MEMW for lane {lane} without a pending store")
        self.held_memory[addr + byte] = v

    def held_state(self) -> MachineState:
        """The state the model holds after the last consumed token: pc and mask of the last EXEC,
        warp, block, epoch, every lane of every warp slot (`lane_code`), the registers and the
        memory as the consumed CARRY and MEMW tokens left them."""
        lanes = []
        for w in range(1 << self.cfg.warp_bits):
            for l in range(LANES):
                pc, st, ep = self.lanes[(w, l)] if w < self.cfg.max_warps else (0, EXITED, 0)
                lanes.append((pc, lane_code(st, ep)))
        pc, mask, _, _ = self.held_exec
        return MachineState(pc, mask, self.warp, self.block, self.epoch, lanes, dict(self.held_regs),
                            bytes(self.held_memory))

    # -- control -------------------------------------------------------------------------------------

    def runnable(self, w: int, l: int) -> bool:
        pc, st, ep = self.lanes[(w, l)]
        return st == RUN or (st == BARRIER and ep != self.epoch)

    def waiting(self, w: int, l: int) -> bool:
        pc, st, ep = self.lanes[(w, l)]
        return st == BARRIER and ep == self.epoch

    def control(self) -> tuple:
        """The control token after the current state: EXEC for the current warp, another warp,
        a barrier release, the next block, or HALT."""
        w = self.warp
        run = [l for l in range(LANES) if self.runnable(w, l)]
        if run:
            pc = min(self.lanes[(w, l)][0] for l in run)
            return ("EXEC", pc, sum(1 << l for l in run if self.lanes[(w, l)][0] == pc))
        order = [(w + k) % self.nwarps for k in range(1, self.nwarps + 1)]
        for w2 in order:
            if any(self.runnable(w2, l) for l in range(LANES)):
                return ("WARP", w2)
        if any(self.waiting(w2, l) for w2 in range(self.nwarps) for l in range(LANES)):
            return ("RELEASE", (self.epoch + 1) % 16)  # every live lane waits: the barrier opens
        if self.block + 1 < self.nblocks:
            return ("BLOCK", self.block + 1)
        return ("HALT",)

    # -- one bundle ----------------------------------------------------------------------------------

    def _value(self, s: Source, warp: int, lane: int, ports, results, flags, his=None) -> int:
        k = s.kind
        if k in ("port", "tport"):
            v = ports[s.index][lane]
        elif k == "slot":
            v = results[s.index][lane]
        elif k == "slothi":
            v = his[s.index][lane]
        elif k == "flag":
            v = flags[s.index][lane]
        elif k == "zero":
            v = 0
        elif k == "imm":
            v = s.index
        else:
            v = self.special(s.index, warp, lane)
        return (~v & M32) if s.inv else v & M32

    def _port_lines(self, entries, warp):
        out = []
        for kind, x in entries:
            if kind == "reg":
                out.append(list(self.regs.get((warp, x), [0] * LANES)))
            elif kind == "imm":
                out.append([x] * LANES)
            else:
                out.append([0] * LANES)
        return out

    def execute(self, pc: int, mask: int) -> list:
        """Run bundle `pc` for the lanes in `mask` of the current warp: every unit in slot order
        (each reads the results of the units above it), then the tokens the pass decides: the
        changed bytes of its carries, of its stores, and the control token."""
        warp = self.warp
        b = self.image.bundles[pc]
        rec = PassRecord(len(self.tokens), self.block, warp, pc, mask, [("EXEC", pc, mask)],
                         ptx_pcs=list(b.ptx_pcs))
        lanes = [l for l in range(LANES) if mask >> l & 1]
        term_ports = [list(self.regs.get((warp, r), [0] * LANES)) if r is not None else [0] * LANES
                      for r in b.term_port_regs]
        n = len(b.slots)
        results = [[0] * LANES for _ in range(n)]
        his = [[0] * LANES for _ in range(n)]
        flags = [[0] * LANES for _ in range(n)]
        ran = self._units(b, warp, lanes, mask, results, his, flags, rec)
        if ran is None:                       # a memory fault: the pass emits FAULT
            return rec.tokens[-1:]
        served, memw = ran
        done = [l for l in lanes if served >> l & 1]
        out = self._float_lanes(b, done)
        out += self._carries(b, warp, done, served != mask, results, his, rec)
        out += self._stores(memw, rec)
        self._next_lane_states(b, pc, warp, done, term_ports, results, flags, his)
        out.append(self.control())
        rec.tokens += out
        self.passes.append(rec)
        return out

    def _units(self, b, warp: int, lanes: list, mask: int, results, his, flags, rec):
        """Every unit of the bundle on every lane (the passes commit the active ones): (lanes
        served, stores), or None when the memory unit faults (its FAULT token recorded)."""
        slot_ports = [self._port_lines(ps, warp) for ps in b.ports]
        served = mask
        memw = []
        self.last_writes = []
        for k, so in enumerate(b.slots):
            if so is None:
                continue
            op = so.op
            ports = slot_ports[k]
            val = (lambda name, l, ports=ports, so=so:
                   self._value(so.srcs[name], warp, l, ports, results, flags, his))
            if op.kind == "alu":                # the units compute every lane; passes commit active ones
                fixed_cin = {"0": 0, "1": 1}.get(op.cin)
                words = [[val(n, l) & M32 if n == "a" or n in so.srcs else 0 for l in range(LANES)]
                         for n in ("a", "b", "c")]
                cin = [fixed_cin if fixed_cin is not None else val("cin", l) for l in range(LANES)]
                r, f = alu_eval_lanes(op.op, *(np.array(w, dtype=np.uint64) for w in words),
                                      np.array(cin, dtype=np.uint64))
                results[k][:] = [int(x) for x in r]
                flags[k][:] = [int(x) for x in f]
            elif op.kind == "fpu":                # its operands: other slots' read ports
                for l in range(LANES):
                    abc = [slot_ports[s.index[0]][s.index[1]][l] if s.kind == "sport" else 0
                           for s in (so.srcs.get(n, Source("zero")) for n in ("a", "b", "c"))]
                    results[k][l] = fpu_eval(op.op, op.extra, *abc)
            elif op.kind == "mem":
                try:
                    served, memw = self._memory(so, warp, lanes, val, results[k])
                    self.last_writes = memw
                except MemoryFault as e:
                    self.fault = e.locate(kernel=self.image.kernel, block=self.block, warp=warp, pc=op.ptx_pc)
                    tok = ("FAULT", FAULT_KINDS.index(e.token_kind), e.lane)
                    rec.tokens.append(tok)
                    self.passes.append(rec)
                    return None
            else:
                cross_lane_unit(so, lanes, mask, val, results[k], his[k])
        return served, memw

    def _float_lanes(self, b, done: list) -> list:
        """FPU tokens: the float unit has one datapath, which the EXEC pass runs for the first
        served lane; when the bundle carries its result, one pass per further served lane runs it
        again (before any carry changes a register it reads)."""
        if not any(self.cfg.slots[slot] == FPU for _, (slot, _) in b.carries):
            return []
        return [("FPU", l) for l in done[1:]]

    def _carries(self, b, warp: int, done: list, partial: bool, results, his, rec) -> list:
        """CARRY tokens: the changed bytes of each carried register (one "all" token when every
        served lane gets the same byte), the registers committed."""
        out = []
        for j, (v, (slot, part)) in enumerate(b.carries):
            r = b.carry_regs[j]
            new = his[slot] if part else results[slot]
            old = self.regs.get((warp, r), [0] * LANES)
            for byte in range(4):
                nb = {l: (new[l] >> (8 * byte)) & 0xFF for l in done}
                changed = [l for l in done if nb[l] != (old[l] >> (8 * byte)) & 0xFF]
                if not changed:
                    continue
                if len(set(nb.values())) == 1 and not partial:
                    out.append(("CARRY", j, byte, "all", nb[done[0]]))
                else:
                    out += [("CARRY", j, byte, l, nb[l]) for l in changed]
            cur = list(old)
            for l in done:
                cur[l] = new[l]
            self.regs[(warp, r)] = cur
            rec.writes[r] = cur
        return out

    def _stores(self, memw: list, rec) -> list:
        """MEMW tokens: the changed bytes of every store in lane order (a byte two lanes store to
        compares against the memory as the earlier lane left it), the memory committed."""
        out = []
        for (l, maddr, size, new) in memw:
            old = int.from_bytes(self.memory[maddr:maddr + size], "little")
            for byte in range(size):
                nb = (new >> (8 * byte)) & 0xFF
                if nb != (old >> (8 * byte)) & 0xFF:
                    out.append(("MEMW", l, byte, nb))
                    rec.stores[maddr + byte] = nb
            self.memory[maddr:maddr + size] = new.to_bytes(size, "little")
        return out

    def _next_lane_states(self, b, pc: int, warp: int, done: list, term_ports, results, flags, his):
        """The terminator: the next pc and state of every served lane."""
        t = b.term
        for l in done:
            if t[0] == "jump":
                self.lanes[(warp, l)] = (t[1], RUN, 0)
            elif t[0] == "branch":
                p = self._value(b.term_src, warp, l, term_ports, results, flags, his)
                self.lanes[(warp, l)] = (t[2] if bool(p) == t[1] else t[3], RUN, 0)
            elif t[0] == "barrier":
                self.lanes[(warp, l)] = (t[1], BARRIER, self.epoch)
            else:
                self.lanes[(warp, l)] = (pc, EXITED, 0)

    # -- memory unit ---------------------------------------------------------------------------------

    def _maddr(self, space, lo, hi, warp, lane, size, kind, align=None):
        addr = (hi << 32) | lo
        if addr % (align or size):
            raise _fault("misaligned", f"misaligned {space} access of {size} bytes at 0x{addr:x}", lane, addr)
        m = None if hi else self.lay.machine_address(space, lo, warp * LANES + lane)
        if m is None or not self.lay.is_valid(m, size):
            raise _fault(kind, f"out-of-bounds {space} {kind} of {size} bytes at 0x{addr:x}", lane, addr)
        return m

    def _memory(self, so, warp, lanes, val, out):
        """Loads read; stores and atomics leave their new bytes to MEMW tokens. Returns
        (served lanes, [(lane, machine address, size, new value)])."""
        op = so.op
        ex = op.extra
        size = ex["width"]
        space = ex["space"]
        kind = {"LD": "read", "ST": "write", "ATOM": "atomic"}[op.op]
        addrs = {}
        for l in (lanes if op.op != "ATOM" else lanes[:1]):
            lo = val("addr_lo", l)
            hi = val("addr_hi", l) if "addr_hi" in so.srcs else 0
            try:
                addrs[l] = self._maddr(space, lo, hi, warp, l, size, kind, ex.get("align", size))
            except MemoryFault:
                trap = trap_fault(ex, (hi << 32) | lo, l)
                if trap is None:
                    raise
                raise trap from None
        mask = sum(1 << l for l in lanes)
        if op.op == "LD":
            for l in lanes:
                out[l] = int.from_bytes(self.memory[addrs[l]:addrs[l] + size], "little") & M32
            return mask, []
        if op.op == "ST":
            writes = []
            for l in lanes:
                v = val("data_lo", l) & ((1 << (8 * size)) - 1)
                writes.append((l, addrs[l], size, v))
            return mask, writes
        # an atomic serves the first active lane; the others replay the bundle
        l = lanes[0]
        bits = 8 * size
        m = (1 << bits) - 1
        old = int.from_bytes(self.memory[addrs[l]:addrs[l] + size], "little")
        b = val("data_lo", l) & m
        c = val("cmp_lo", l) & m if "cmp_lo" in so.srcs else 0
        new = atomic_result(ex["atom"], old, b, c, bits, ex.get("signed"))
        out[l] = old & M32
        return 1 << l, [(l, addrs[l], size, new & m)]



def initial_memory(image: Image, module, spec: LaunchSpec) -> bytearray:
    """The machine memory at launch: argument buffers, initialised globals (the spec's symbols
    over their initialisers), constants."""
    from qwengpu.semantics.launch_model import ModuleAnalysis, relocated_initialisers
    from qwengpu.semantics.symbols import apply_symbols
    module = apply_symbols(module, spec)
    lay = image.layout
    analysis = ModuleAnalysis(module, module.kernel(image.kernel))
    # the interpreter's addresses: global variables at the same addresses, const and shared in windows
    globals_, ci = relocated_initialisers(analysis, lay.global_vars)
    memory = bytearray(lay.end)
    for a, addr in zip(spec.args, lay.buffer_addresses):
        if addr is not None and a.data.nbytes:
            lay.put(memory, "global", addr, a.data.tobytes())
    for name, addr in lay.global_vars.items():
        lay.put(memory, "global", addr, globals_[name])
    if ci:
        lay.put(memory, "const", 0, ci)
    return memory


def read_buffers(image: Image, spec: LaunchSpec, memory) -> list:
    """The argument buffers as the launch left them in machine memory."""
    buffers = []
    for a, addr in zip(spec.args, image.layout.buffer_addresses):
        if addr is None:
            buffers.append(None)
        else:
            raw = image.layout.get(memory, "global", addr, a.data.nbytes)
            buffers.append(np.frombuffer(raw, dtype=a.data.dtype).copy())
    return buffers

def stack_overflow_message(extra: dict, address: int) -> str | None:
    """The fault message of the load a call site makes when its frame does not fit the call stack
    (`assembler.lower.calls`; the address's low word is the lane's call depth); None for any other
    access."""
    if "stack_overflow" not in extra:
        return None
    words, stack = extra["stack_overflow"]
    return (f"call stack overflow: a call at depth {address & M32} needs {words} more words; "
            f"the machine's call stack holds {stack} words per thread")


def trap_fault(extra: dict, address: int, lane: int) -> MemoryFault | None:
    """The fault a lowered check reports through its faulting load (a load from above the 4 GiB
    line, FAULT kind `read`): a call stack overflow (`assembler.lower.calls`; the address's low word
    is the lane's call depth), a divergent barrier or a `brx.idx` index past its table (its low
    word; `assembler.lower.control`), a local access past the live frames (its offset;
    `assembler.lower.memory_ops`), as the interpreter reports them (kind, lane, the address where
    there is one); None for any other access."""
    msg = stack_overflow_message(extra, address)
    if msg is not None:
        e = MemoryFault(msg, lane=lane, kind="stack")
    elif extra.get("trap") == "barrier":
        e = MemoryFault("bar.sync executed by only some lanes of a warp (divergent barrier)", lane=lane,
                        kind="barrier")
    elif extra.get("trap") == "local":
        kind, size = extra["access"]
        e = MemoryFault(f"out-of-bounds local {kind} of {size} bytes at 0x{address & M32:x}", lane=lane,
                        address=address & M32, kind=kind)
    elif extra.get("trap") == "branch":
        e = MemoryFault(f"brx.idx index {address & M32} out of range", lane=lane, kind="branch")
    else:
        return None
    e.token_kind = "read"
    return e


def _fault(kind: str, message: str, lane: int, address: int) -> MemoryFault:
    e = MemoryFault(message, lane=lane, address=address, kind=kind)
    e.token_kind = kind
    return e


def atomic_result(o: str, old: int, b: int, c: int, bits: int, s) -> int:
    """The new value an atomic `o` (add, min, max, inc, dec, and, or, xor, exch, cas; `s`: signed)
    stores over the `bits`-bit word `old`, with operand b (and cas's compare value c)."""
    if o == "add":
        new = (old + b) & ((1 << bits) - 1)
    elif o in ("min", "max"):
        x, y = (_sx(old, bits), _sx(b, bits)) if s else (old, b)
        new = old if (x <= y) == (o == "min") else b
    elif o == "inc":
        new = 0 if old >= b else old + 1
    elif o == "dec":
        new = b if (old == 0 or old > b) else old - 1
    elif o == "and":
        new = old & b
    elif o == "or":
        new = old | b
    elif o == "xor":
        new = old ^ b
    elif o == "exch":
        new = b
    elif o == "cas":
        new = c if old == b else old
    else:
        raise ExecutionFault(f"atomic {o} is not supported by the machine")
    return new


def cross_lane_unit(so, lanes, mask, val, out, out_hi):
    """The cross-lane unit (ACTIVEMASK, VOTE, SHFL) on a warp's active `lanes`: results in `out`,
    SHFL's in-range flags in `out_hi`."""
    op = so.op
    if op.op == "ACTIVEMASK":
        for l in lanes:
            out[l] = mask
        return
    if op.op == "VOTE":
        p = {l: val("a", l) & 1 for l in lanes}
        mode = op.extra["mode"]
        if mode == "ballot":
            r = sum(p[l] << l for l in lanes)
        elif mode == "any":
            r = int(any(p.values()))
        elif mode == "all":
            r = int(all(p.values()))
        else:
            r = int(len(set(p.values())) <= 1)
        for l in lanes:
            out[l] = r
        return
    if op.op == "SHFL":
        a = {l: val("a", l) for l in range(LANES)}
        mode = op.extra["mode"]
        for lane in lanes:
            j, ok = shuffle_source(mode, lane, val("bsrc", lane), val("csrc", lane))
            out[lane] = a[j]
            out_hi[lane] = int(ok)
        return
    raise ExecutionFault(f"cross-lane op {op.op} is not supported by the machine")
