"""Token-level simulator of the machine: executes a program image exactly as the model's forward
passes do, counting every token. It is the specification the circuits are built and tested
against (`docs/machine.md`), and itself tested against the reference interpreter.

Token protocol (one generated token per forward pass):

    EXEC(pc, mask)          run bundle `pc` for the lanes in `mask` of the current warp
    CARRY(j, byte, lanes, v) write byte `byte` of carried register j (lanes: one lane or all
                            active lanes) -- only bytes that change are sent
    MEMW(byte, v)           write a byte of the word an atomic changed
    WARP(w)                 switch to warp w      BLOCK(b)  start block b (sets %ctaid)
    HALT                    the launch is over    FAULT(kind, lane) + address bytes

Scheduling: the lanes of the current warp with the lowest bundle pc run together (min-pc; with
the assembler's topological block order this reconverges at immediate post-dominators). A warp
runs until none of its lanes can (exited or waiting at a barrier); warps then take turns in order;
blocks run one after another.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwengpu.interp.memory import ExecutionFault, MemoryFault
from qwengpu.launch import LaunchResult, LaunchSpec

from .isa import M32, alu_eval
from .layout import LINE
from .schedule import Image, Source

LANES = 4
EXITED = -1


class MachineStepLimit(ExecutionFault):
    pass


@dataclass
class PassRecord:
    """One EXEC pass and the tokens it caused."""
    token_index: int
    block: int
    warp: int
    pc: int
    mask: int
    tokens: list                 # token tuples emitted by this pass (EXEC first)
    writes: dict = field(default_factory=dict)   # physical reg -> [new value per lane]
    ptx_pcs: list = field(default_factory=list)


@dataclass
class SimResult:
    buffers: list
    tokens: list                  # every generated token
    passes: list                  # PassRecord per EXEC
    memory: bytes
    registers: dict               # (warp, reg) -> lanes (final)

    @property
    def token_count(self) -> int:
        return len(self.tokens)


def _sx(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class Simulator:
    def __init__(self, image: Image, module, spec: LaunchSpec, max_tokens: int = 2_000_000):
        self.image = image
        self.module = module
        self.spec = spec
        self.lay = image.layout
        self.max_tokens = max_tokens
        self.cfg = image.config
        self.memory = bytearray(self.lay.end)
        self._init_memory()
        nthreads = spec.threads_per_block
        self.nwarps = (nthreads + LANES - 1) // LANES
        if self.nwarps > self.cfg.max_warps:
            raise ExecutionFault(f"a block of {nthreads} threads needs {self.nwarps} warps; the machine "
                                 f"runs {self.cfg.max_warps}")
        if self.lay.end > self.cfg.memory_bytes:
            raise ExecutionFault(f"the launch needs {self.lay.end} bytes of machine memory; the machine "
                                 f"has {self.cfg.memory_bytes}")
        self.tokens: list = []
        self.passes: list[PassRecord] = []

    def _init_memory(self):
        from qwengpu.interp.interpreter import _Program
        for a, addr in zip(self.spec.args, self.lay.buffer_addresses):
            if addr is not None:
                raw = a.data.tobytes()
                self.memory[addr:addr + len(raw)] = raw
        for name, addr in self.lay.global_vars.items():
            v = self.module.vars[name]
            init = v.init or bytes(v.size or 0)
            self.memory[addr:addr + len(init)] = init
            for off, sym in v.relocs:
                target = self.lay.global_vars.get(sym, 0)
                self.memory[addr + off:addr + off + 8] = target.to_bytes(8, "little")
        prog = _Program(self.module)
        ci = prog.const_init
        self.memory[self.lay.const_base:self.lay.const_base + len(ci)] = ci

    # -- specials -------------------------------------------------------------------------------------

    def special(self, name: str, warp: int, lane: int) -> int:
        tid = warp * LANES + lane
        bx, by, bz = self.spec.block
        if name.startswith("tid."):
            x, y, z = tid % bx, (tid // bx) % by, tid // (bx * by)
            return {"tid.x": x, "tid.y": y, "tid.z": z}[name]
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

    # -- the launch -----------------------------------------------------------------------------------

    def run(self) -> SimResult:
        gx, gy, gz = self.spec.grid
        nthreads = self.spec.threads_per_block
        self.regs: dict = {}
        for b in range(gx * gy * gz):
            self.ctaid = (b % gx, (b // gx) % gy, b // (gx * gy))
            self.block = b
            if b > 0:
                self.emit(("BLOCK", b))
            self.regs = {}
            lane_pc = {}
            for w in range(self.nwarps):
                for l in range(LANES):
                    lane_pc[(w, l)] = self.image.entry if w * LANES + l < nthreads else EXITED
            self.lane_pc = lane_pc
            self.at_barrier: set = set()
            self._run_block()
        self.emit(("HALT",))
        buffers = []
        for a, addr in zip(self.spec.args, self.lay.buffer_addresses):
            if addr is None:
                buffers.append(None)
            else:
                raw = bytes(self.memory[addr:addr + a.data.nbytes])
                buffers.append(np.frombuffer(raw, dtype=a.data.dtype).copy())
        return SimResult(buffers, self.tokens, self.passes, bytes(self.memory), dict(self.regs))

    def emit(self, tok):
        self.tokens.append(tok)
        if len(self.tokens) > self.max_tokens:
            raise MachineStepLimit(f"token limit of {self.max_tokens} exceeded (a runaway loop?)")

    def _runnable(self, w: int) -> list[int]:
        return [l for l in range(LANES) if self.lane_pc[(w, l)] != EXITED and (w, l) not in self.at_barrier]

    def _run_block(self):
        cur = 0
        first = True
        while True:
            lanes = self._runnable(cur)
            if not lanes:
                # next warp with runnable lanes (round robin)
                nxt = None
                for k in range(1, self.nwarps + 1):
                    w = (cur + k) % self.nwarps
                    if self._runnable(w):
                        nxt = w
                        break
                if nxt is None:
                    if self.at_barrier:
                        self.at_barrier.clear()      # every live lane waits: release the barrier
                        nxt = next((w for w in range(self.nwarps) if self._runnable(w)), None)
                    if nxt is None:
                        return
                if nxt != cur or first:
                    self.emit(("WARP", nxt))
                cur = nxt
                first = False
                continue
            first = False
            pc = min(self.lane_pc[(cur, l)] for l in lanes)
            mask = sum(1 << l for l in lanes if self.lane_pc[(cur, l)] == pc)
            self._exec(cur, pc, mask)

    # -- one pass ------------------------------------------------------------------------------------

    def _value(self, s: Source, warp: int, lane: int, ports, results, flags, his=None) -> int:
        """An operand of the unit whose port lines are `ports`."""
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

    def _exec(self, warp: int, pc: int, mask: int):
        b = self.image.bundles[pc]
        rec = PassRecord(len(self.tokens), self.block, warp, pc, mask, [("EXEC", pc, mask)],
                         ptx_pcs=list(b.ptx_pcs))
        self.emit(("EXEC", pc, mask))
        lanes = [l for l in range(LANES) if mask >> l & 1]
        slot_ports = [self._port_lines(ps, warp) for ps in b.ports]
        term_ports = [list(self.regs.get((warp, r), [0] * LANES)) if r is not None else [0] * LANES
                      for r in b.term_port_regs]
        nslots = len(b.slots)
        results = [[0] * LANES for _ in range(nslots)]
        his = [[0] * LANES for _ in range(nslots)]
        flags = [[0] * LANES for _ in range(nslots)]
        served = mask
        for k, so in enumerate(b.slots):
            if so is None:
                continue
            op = so.op
            ports = slot_ports[k]
            val = lambda name, l, ports=ports, so=so: self._value(so.srcs[name], warp, l, ports, results, flags, his)
            if op.kind == "alu":
                for l in lanes:
                    a = val("a", l)
                    bb = val("b", l) if "b" in so.srcs else 0
                    c = val("c", l) if "c" in so.srcs else 0
                    cin = {"0": 0, "1": 1}.get(op.cin)
                    if cin is None:
                        cin = val("cin", l)
                    r, f = alu_eval(op.op, a, bb, c, cin)
                    results[k][l] = r
                    flags[k][l] = f
            elif op.kind == "mem":
                served = self._memory(so, warp, lanes, val, results[k], his[k], rec)
            else:
                self._xlane(so, warp, lanes, mask, val, results[k], his[k])
        # lanes the memory unit could not serve this pass replay the bundle later; after a
        # partial pass carries name their lanes one by one (an "all" carry means every lane of
        # the EXEC mask)
        partial = served != mask
        lanes = [l for l in lanes if served >> l & 1]
        # write-back: carried registers, byte-change compressed
        carry_tokens = []
        for j, (v, (slot, part)) in enumerate(b.carries):
            r = b.carry_regs[j]
            new = his[slot] if part else results[slot]
            old = self.regs.get((warp, r), [0] * LANES)
            for byte in range(4):
                nb = {l: (new[l] >> (8 * byte)) & 0xFF for l in lanes}
                ob = {l: (old[l] >> (8 * byte)) & 0xFF for l in lanes}
                changed = [l for l in lanes if nb[l] != ob[l]]
                if not changed:
                    continue
                if len(set(nb.values())) == 1 and not partial:
                    carry_tokens.append(("CARRY", j, byte, "all", nb[lanes[0]]))
                else:
                    for l in changed:
                        carry_tokens.append(("CARRY", j, byte, l, nb[l]))
            cur = list(old)
            for l in lanes:
                cur[l] = new[l]
            self.regs[(warp, r)] = cur
            rec.writes[r] = cur
        for t in carry_tokens:
            self.emit(t)
        rec.tokens += carry_tokens
        # control
        t = b.term
        if t[0] == "jump":
            for l in lanes:
                self.lane_pc[(warp, l)] = t[1]
        elif t[0] == "branch":
            _, want, taken, fall = t
            for l in lanes:
                p = self._value(b.term_src, warp, l, term_ports, results, flags, his)
                self.lane_pc[(warp, l)] = taken if bool(p) == want else fall
        elif t[0] == "barrier":
            # lanes arrive one group at a time; the barrier opens when every live lane of the
            # block waits at it (Volta-style, per thread)
            for l in lanes:
                self.lane_pc[(warp, l)] = t[1]
                self.at_barrier.add((warp, l))
        else:
            for l in lanes:
                self.lane_pc[(warp, l)] = EXITED
        self.passes.append(rec)

    def _fault(self, msg, warp, pc, lane=None, address=None, cls=ExecutionFault):
        ptx = self.image.bundles[pc].ptx_pcs
        raise cls(msg, kernel=self.image.kernel, pc=ptx[0] if ptx else None, lane=lane, address=address,
                  block=self.block, warp=warp).locate()

    # -- memory unit ---------------------------------------------------------------------------------

    def _maddr(self, space, lo, hi, warp, lane, size, kind, align) -> int:
        addr = (hi << 32) | lo
        if space == "global" and hi:
            raise MemoryFault(f"out-of-bounds global {kind} of {size} bytes at 0x{addr:x}", address=addr)
        limit = self.lay.space_limit(space)
        if space != "global" and addr + size > limit:
            raise MemoryFault(f"out-of-bounds {space} {kind} of {size} bytes at 0x{addr:x} ({space} size {limit})",
                              address=addr)
        if addr % align if align else False:
            raise MemoryFault(f"misaligned {space} access of {align} bytes at 0x{addr:x}", address=addr)
        m = self.lay.machine_address(space, addr, warp * LANES + lane)
        if not self.lay.is_valid(m, size):
            raise MemoryFault(f"out-of-bounds {space} {kind} of {size} bytes at 0x{addr:x}", address=addr)
        return m

    def _memory(self, so, warp, lanes, val, out, out_hi, rec):
        op = so.op
        ex = op.extra
        size = ex["width"]
        space = ex["space"]
        kind = {"LD": "read", "ST": "write", "ATOM": "read"}[op.op]
        pc = rec.pc
        addrs = {}
        for l in lanes:
            lo = val("addr_lo", l)
            hi = val("addr_hi", l) if "addr_hi" in so.srcs else 0
            try:
                align = ex.get("align", size) if ex.get("first", True) else size
                addrs[l] = self._maddr(space, lo, hi, warp, l, size, kind, align)
            except MemoryFault as e:
                ptx = self.image.bundles[pc].ptx_pcs
                raise e.locate(kernel=self.image.kernel, lane=l, block=self.block, warp=warp,
                               pc=op.ptx_pc)
        mask = sum(1 << l for l in lanes)
        if op.op == "LD":
            for l in lanes:
                raw = int.from_bytes(self.memory[addrs[l]:addrs[l] + size], "little")
                if size < 4 and ex.get("signed"):
                    raw = _sx(raw, 8 * size) & M32
                out[l] = raw & M32
                out_hi[l] = (raw >> 32) & M32
            return mask
        if op.op == "ST":
            # a store writes one memory line per pass: the first active lane's; the lanes whose
            # bytes lie in other lines replay the bundle
            line = addrs[lanes[0]] // LINE
            served = [l for l in lanes if addrs[l] // LINE == line and (addrs[l] + size - 1) // LINE == line]
            for l in served:
                v = val("data_lo", l) | ((val("data_hi", l) << 32) if "data_hi" in so.srcs else 0)
                self.memory[addrs[l]:addrs[l] + size] = (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            return sum(1 << l for l in served)
        self._atomic(so, warp, lanes[:1], val, addrs, out, out_hi, rec)
        return 1 << lanes[0]

    def _atomic(self, so, warp, lanes, val, addrs, out, out_hi, rec):
        ex = so.op.extra
        size = ex["width"]
        bits = 8 * size
        mask = (1 << bits) - 1
        # an atomic serves one lane per pass (the first active one); its new value is written to
        # memory by the MEMW tokens that follow the pass
        for g in [lanes]:
            start = int.from_bytes(self.memory[addrs[g[0]]:addrs[g[0]] + size], "little")
            for l in g:
                self._atomic_lane(so, l, val, addrs, out, out_hi, ex, size, bits, mask)
            final = int.from_bytes(self.memory[addrs[g[0]]:addrs[g[0]] + size], "little")
            for byte in range(size):
                nb, ob = (final >> (8 * byte)) & 0xFF, (start >> (8 * byte)) & 0xFF
                if nb != ob:
                    self.emit(("MEMW", byte, nb))
                    rec.tokens.append(("MEMW", byte, nb))

    def _atomic_lane(self, so, l, val, addrs, out, out_hi, ex, size, bits, mask):
        if True:
            old = int.from_bytes(self.memory[addrs[l]:addrs[l] + size], "little")
            b = val("data_lo", l) | ((val("data_hi", l) << 32) if "data_hi" in so.srcs else 0)
            c = 0
            if "cmp_lo" in so.srcs:
                c = val("cmp_lo", l) | ((val("cmp_hi", l) << 32) if "cmp_hi" in so.srcs else 0)
            o = ex["atom"]
            s = ex.get("signed")
            if o == "add":
                new = (old + b) & mask
            elif o in ("min", "max"):
                x, y = (_sx(old, bits), _sx(b, bits)) if s else (old, b)
                new = (old if (x <= y) == (o == "min") else b) & mask
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
                new = b & mask
            elif o == "cas":
                new = (c & mask) if old == b else old
            else:
                raise ExecutionFault(f"atomic {o} is not supported by the machine")
            self.memory[addrs[l]:addrs[l] + size] = new.to_bytes(size, "little")
            out[l] = old & M32
            out_hi[l] = (old >> 32) & M32

    # -- cross-lane unit --------------------------------------------------------------------------------

    def _xlane(self, so, warp, lanes, mask, val, out, out_hi):
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
                bval = val("bsrc", lane) & 0x1F
                cw = val("csrc", lane)
                cval, seg = cw & 0x1F, (cw >> 8) & 0x1F
                max_lane = (lane & seg) | (cval & ~seg)
                min_lane = lane & seg
                if mode == "up":
                    j, ok = lane - bval, lane - bval >= max_lane
                elif mode == "down":
                    j, ok = lane + bval, lane + bval <= max_lane
                elif mode == "bfly":
                    j, ok = lane ^ bval, (lane ^ bval) <= max_lane
                else:
                    j = min_lane | (bval & ~seg)
                    ok = j <= max_lane
                if not 0 <= j < LANES:
                    ok = False
                if not ok:
                    j = lane
                out[lane] = a[j]
                out_hi[lane] = int(ok)
            return
        raise ExecutionFault(f"cross-lane op {op.op} is not supported by the machine")
