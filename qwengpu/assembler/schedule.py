"""Micro-ops -> bundles: packing, operand routing, liveness, carries and register allocation.

Each basic block is packed greedily, in program order, into bundles: a micro-op goes into the first
free unit of its kind below every unit whose result it uses in the same bundle; its operands come
either from a register read port (a value from an earlier pass) or from an earlier unit of the same
bundle (forwarding). A bundle ends with its block's terminator. After packing, liveness across
bundle boundaries decides which writes are *carried* (kept in the register file) and which
virtual registers need a physical register.
"""
from __future__ import annotations

import heapq

from qwengpu.machine.config import ALU, FPU, MEM, XLANE, MachineConfig
from qwengpu.machine.format import fpu_port_slots, sources_for
from qwengpu.machine.image import PORTS, TERM_PORTS, Bundle, Image, SlotOp, Source
from qwengpu.machine.uops import Imm, MicroOp, Special, Src, VReg

from .lower import AssemblerError, Block, MicroProgram


def _kind(op: MicroOp) -> str:
    return {"alu": ALU, "mem": MEM, "xlane": XLANE, "fpu": FPU}[op.kind]


def _operands(op: MicroOp) -> list[tuple[str, Src]]:
    out = []
    for name in ("a", "b", "c", "guard"):
        s = getattr(op, name)
        if s is not None:
            out.append((name, s))
    for k in ("addr", "data", "cmp"):
        vals = op.extra.get(k)
        if vals:
            for part, s in zip(("lo", "hi"), vals):
                if s is not None:
                    out.append((f"{k}_{part}", s))
    for k in ("bsrc", "csrc"):
        vals = op.extra.get(k)
        if vals:
            out.append((k, vals[0]))
    return out


class _Packer:
    def __init__(self, cfg: MachineConfig, remat: dict | None = None, first_free_reg: int = 1 << 20):
        self.cfg = cfg
        self.bundles: list[Bundle] = []
        self.remat = remat or {}
        self.next_reg = first_free_reg

    def fresh(self) -> VReg:
        self.next_reg += 1
        return VReg(self.next_reg, "split")

    def new_bundle(self, label: str) -> Bundle:
        n = len(self.cfg.slots)
        b = Bundle(len(self.bundles), label, [None] * n, [], ("exit",))
        b.slot_ports = [[] for _ in range(n)]       # per slot: [("reg", VReg) | ("imm", value)]
        b.term_ports = []
        self.bundles.append(b)
        return b

    @staticmethod
    def _port(ports: list, entry, limit: int) -> int | None:
        if entry in ports:
            return ports.index(entry)
        if len(ports) >= limit:
            return None
        ports.append(entry)
        return len(ports) - 1

    def _zero_wired(self, kind: str, name: str) -> bool:
        """Whether operand `name` of a unit of `kind` can read the constant 0 without a port (an
        ALU's c cannot: an immediate 0 there takes a port like any other)."""
        k = len(self.cfg.slots) if kind == "term" else self.cfg.slots.index(kind)
        return ("zero",) in sources_for(self.cfg, k, name)

    def operand(self, b: Bundle, s: Src, ports: list, limit: int, name: str, kind: str):
        """(Source, earliest slot) of an operand for a unit whose ports are `ports`; None: no room."""
        v = s.value
        if isinstance(v, Imm):
            val = (~v.value & 0xFFFFFFFF) if s.inv else v.value
            if val == 0 and self._zero_wired(kind, name):
                return Source("zero"), -1
            k = self._port(ports, ("imm", val), limit)
            return (None, -1) if k is None else (Source("port", k), -1)
        if isinstance(v, Special):
            if kind == ALU and name == "a" and not s.inv:
                return Source("special", v.name), -1
            return None, -1
        if v in b.writes:
            j, part = b.writes[v]
            if self.cfg.slots[j] == FPU:
                return None, -1     # nothing reads the float unit's result in its pass (`_place_fpu`: nor does it forward)
            return Source("slothi" if part else "slot", j, s.inv), j
        k = self._port(ports, ("reg", v), limit)
        return (None, -1) if k is None else (Source("port", k, s.inv), -1)

    def try_place(self, b: Bundle, op: MicroOp, flag_slot: int | None) -> bool:
        kind = _kind(op)
        if op.kind == "mem" and any(so is not None and so.op.kind == "mem" for so in b.slots):
            return False
        # a write may not precede, in slot order, a forwarded read of the value it replaces;
        # keep program order for writers of the same register and for reads of it
        floor = -1
        for d in op.writes():
            if d in b.writes:
                floor = max(floor, b.writes[d][0])
            for k, so in enumerate(b.slots):
                if so is not None and any(isinstance(x.value, VReg) and x.value == d for _, x in _operands(so.op)):
                    floor = max(floor, k)
        if op.cin == "flag":
            if flag_slot is None:
                return False
            floor = max(floor, flag_slot)
        for k in range(floor + 1, len(self.cfg.slots)):
            if self.cfg.slots[k] != kind or b.slots[k] is not None:
                continue
            if kind == ALU and not self.cfg.supports(k, op.op):
                continue
            if op.cin == "flag" and k != flag_slot + 1:
                continue          # the circuits chain the carry flag from the slot just before only
            if kind == FPU:
                if not self._place_fpu(b, k, op):
                    continue
                return True
            ports = list(b.slot_ports[k])
            srcs, earliest, ok = {}, -1, True
            for name, sv in _operands(op):
                src_, at = self.operand(b, sv, ports, PORTS[kind], name, kind)
                if src_ is None:
                    ok = False
                    break
                srcs[name] = src_
                earliest = max(earliest, at)
            if not ok or earliest >= k:
                continue
            if op.cin == "flag":
                srcs["cin"] = Source("flag", flag_slot)
            b.slot_ports[k] = ports
            b.slots[k] = SlotOp(op, srcs)
            for part, d in enumerate(op.dst):
                if d is not None:
                    b.writes[d] = (k, part)
            if op.ptx_pc not in b.ptx_pcs:
                b.ptx_pcs.append(op.ptx_pc)
            return True
        return False

    def _place_fpu(self, b: Bundle, k: int, op: MicroOp) -> bool:
        """The float unit reads each operand (a register or an immediate, never a value of this
        bundle) on a read port of the first two ALU slots, shared with their own operands."""
        home = fpu_port_slots(self.cfg)
        ports = {j: list(b.slot_ports[j]) for j in home}
        srcs = {}
        for name in ("a", "b", "c"):
            s = getattr(op, name)
            if s is None:
                continue
            v = s.value
            if isinstance(v, Imm):
                entry = ("imm", (~v.value & 0xFFFFFFFF) if s.inv else v.value)
                if entry[1] == 0:
                    srcs[name] = Source("zero")
                    continue
            elif isinstance(v, VReg) and not s.inv and v not in b.writes:
                entry = ("reg", v)
            else:
                return False
            where = next(((j, ports[j].index(entry)) for j in home if entry in ports[j]), None)
            if where is None:
                j = next((j for j in home if len(ports[j]) < PORTS[ALU]), None)
                if j is None:
                    return False
                ports[j].append(entry)
                where = (j, len(ports[j]) - 1)
            srcs[name] = Source("sport", where)
        for j in home:
            b.slot_ports[j] = ports[j]
        b.slots[k] = SlotOp(op, srcs)
        b.writes[op.dst[0]] = (k, 0)
        if op.ptx_pc not in b.ptx_pcs:
            b.ptx_pcs.append(op.ptx_pc)
        return True

    def _with_remat(self, b: Bundle, group: list[MicroOp]) -> list[MicroOp]:
        """Recompute cheap launch-constant values in this bundle instead of reading them from a
        register (which would have cost a carry when they were produced)."""
        out, have = [], set(b.writes)

        def need(v):
            if v in have or v not in self.remat:
                return
            for dep in self.remat[v]:
                for r in dep.reads():
                    need(r)
                if dep.dst[0] not in have:
                    out.append(dep)
                    have.add(dep.dst[0])

        for op in group:
            for v in op.reads():
                need(v)
        return out + group

    def place_group(self, b: Bundle, group: list[MicroOp], live: set | None = None) -> bool:
        """Place `group` in `b`; with `live` (the registers live after the group), only if the bundle
        then carries at most `carry_slots` of its writes."""
        expanded = self._with_remat(b, group)
        if len(expanded) > len(group) and self._place(b, expanded, live):
            return True
        return self._place(b, group, live)

    def _place(self, b: Bundle, group: list[MicroOp], live: set | None = None) -> bool:
        saved = (list(b.slots), [list(p) for p in b.slot_ports], dict(b.writes), list(b.ptx_pcs))
        flag_slot = None
        for op in group:
            if not self.try_place(b, op, flag_slot if op.cin == "flag" else None):
                b.slots, b.slot_ports, b.writes, b.ptx_pcs = saved
                return False
            if op.sets_flag:
                flag_slot = b.writes[op.dst[0]][0]
        if live is not None and sum(v in live for v in b.writes) > self.cfg.carry_slots:
            b.slots, b.slot_ports, b.writes, b.ptx_pcs = saved
            return False
        return True

    def pack_block(self, blk: Block, live_out: set = frozenset()) -> list[Bundle]:
        """Bundles of one block; `live_out`: the registers live after it (read by later blocks).

        A bundle is closed before it would carry more registers than the machine writes back per
        pass: a register it writes counts when a later op of the block (or a later block) reads it
        before it is written again."""
        out = []
        b = self.new_bundle(blk.label)
        out.append(b)
        ops = blk.ops
        pred = blk.term[1].value if blk.term[0] == "branch" else None
        after = _live_after(ops, set(live_out) | ({pred} if isinstance(pred, VReg) else set()))
        i = 0
        while i < len(ops):
            # a carry-flag producer and its consumer are placed together (the flag lives one pass)
            group = [ops[i]]
            if ops[i].sets_flag and i + 1 < len(ops) and ops[i + 1].cin == "flag":
                group.append(ops[i + 1])
            live = after[i + len(group) - 1]
            if i + len(group) == len(ops) and pred is not None and pred not in live_out \
                    and not any(op.kind == "fpu" and pred in op.writes() for op in ops):
                live = live - {pred}      # the terminator reads it from this bundle's unit
            if not self.place_group(b, group, live):
                b = self.new_bundle(blk.label + "+")
                out.append(b)
                # an empty bundle takes the group whatever it carries (few registers: at most the
                # group's own results, which the final check counts)
                placed = self.place_group(b, group, live) or self.place_group(b, group)
                if not placed and len(group) == 1 and group[0].op == "SEL":
                    # three register operands but two ports: copy the condition first
                    sel = group[0]
                    t = self.fresh()
                    mov = MicroOp("alu", "MOV", (t,), sel.c, ptx_pc=sel.ptx_pc)
                    group = [mov, MicroOp("alu", "SEL", sel.dst, sel.a, sel.b, Src(t), ptx_pc=sel.ptx_pc)]
                    placed = self.place_group(b, group)
                    i -= 1
                if not placed:
                    raise AssemblerError(f"micro-op {group[0]} does not fit an empty bundle (needs "
                                         f"{len(_operands(group[0]))} operands)")
            i += len(group)
        # the terminator's predicate: a result of this bundle or the control unit's own port
        if blk.term[0] == "branch":
            sv = blk.term[1]
            if isinstance(sv.value, VReg) and sv.value in b.writes and self.cfg.slots[b.writes[sv.value][0]] == FPU:
                b = self.new_bundle(blk.label + "+")     # a float compare is carried, then branched on
                out.append(b)
            src_, _ = self.operand(b, sv, b.term_ports, TERM_PORTS, "pred", "term")
            if src_ is not None and src_.kind == "port":
                src_ = Source("tport", src_.index, src_.inv)
            b.term_src = src_
        return out


def _live_after(ops: list[MicroOp], live_out: set) -> list[set]:
    """For each op of a block, the registers live right after it."""
    out = [set()] * len(ops)
    live = set(live_out)
    for i in range(len(ops) - 1, -1, -1):
        out[i] = set(live)
        op = ops[i]
        if op.guard is None:
            live -= set(op.writes())
        live |= set(op.reads())
    return out


def _block_live_out(blocks: list[Block], pinned: set = frozenset()) -> dict:
    """{label: registers live at the end of the block} (block-level liveness; the `pinned`
    registers are live at every exit)."""
    use, kill = {}, {}
    for blk in blocks:
        u, k = set(), set()
        for op in blk.ops:
            u |= {r for r in op.reads() if r not in k}
            if op.guard is None:
                k |= set(op.writes())
        if blk.term[0] == "branch" and isinstance(blk.term[1].value, VReg) and blk.term[1].value not in k:
            u.add(blk.term[1].value)
        use[blk.label], kill[blk.label] = u, k
    succ = {blk.label: _block_succs(blk) for blk in blocks}
    live_in = {blk.label: set() for blk in blocks}
    live_out = {blk.label: set() for blk in blocks}
    changed = True
    while changed:
        changed = False
        for blk in reversed(blocks):
            lab = blk.label
            o = set(pinned) if blk.term[0] == "exit" else set()
            for s in succ[lab]:
                o |= live_in.get(s, set())
            i = use[lab] | (o - kill[lab])
            if o != live_out[lab] or i != live_in[lab]:
                live_out[lab], live_in[lab] = o, i
                changed = True
    return live_out


def _block_succs(b: Block) -> list[str]:
    t = b.term
    if t[0] in ("jump", "barrier"):
        return [t[1]]
    if t[0] == "branch":
        return [t[3], t[4]]
    return []


def _thread_jumps(prog: MicroProgram) -> MicroProgram:
    """Drop empty blocks that only jump elsewhere and merge straight-line block chains."""
    by_label = {b.label: b for b in prog.blocks}

    def final(label: str, seen=()) -> str:
        b = by_label[label]
        if not b.ops and b.term[0] == "jump" and label not in seen:
            return final(b.term[1], seen + (label,))
        return label

    for b in prog.blocks:
        t = b.term
        if t[0] == "jump":
            b.term = ("jump", final(t[1]))
        elif t[0] == "branch":
            b.term = ("branch", t[1], t[2], final(t[3]), final(t[4]))
        elif t[0] == "barrier":
            b.term = ("barrier", final(t[1]))
    entry = final(prog.entry)
    # reachable blocks only
    reach, stack = set(), [entry]
    while stack:
        lab = stack.pop()
        if lab in reach:
            continue
        reach.add(lab)
        t = by_label[lab].term
        stack += [x for x in (t[1:] if t[0] in ("jump", "barrier") else t[3:] if t[0] == "branch" else ())]
    preds: dict[str, int] = {}
    for lab in reach:
        t = by_label[lab].term
        targets = t[1:] if t[0] in ("jump", "barrier") else t[3:] if t[0] == "branch" else ()
        for x in targets:
            preds[x] = preds.get(x, 0) + 1
    # merge a block into its unique-predecessor jump target
    merged = True
    while merged:
        merged = False
        for lab in list(reach):
            b = by_label[lab]
            if b.term[0] == "jump":
                nxt = b.term[1]
                if nxt != lab and nxt != entry and preds.get(nxt) == 1 and nxt in reach:
                    nb = by_label[nxt]
                    b.ops = b.ops + nb.ops
                    b.term = nb.term
                    reach.discard(nxt)
                    merged = True
                    break
    blocks = [b for b in prog.blocks if b.label in reach]
    return MicroProgram(blocks, entry, prog.nregs, prog.kernel, prog.layout, prog.specials, prog.pinned)


def _order_blocks(prog: MicroProgram) -> list[Block]:
    """A topological order of the CFG without back edges in which every loop's blocks come before
    the blocks its exits lead to, so that min-pc scheduling reconverges exactly at immediate
    post-dominators: a branch's reconvergence point comes after every block of its divergent
    region, and a lane that left a loop waits at the exit until the warp's other lanes leave it
    too (were the exit before the loop's latch, it would run ahead, into a shuffle or a barrier
    its warp has not reached). Among the orders that allow, reverse post-order."""
    by_label = {b.label: b for b in prog.blocks}

    def succ(lab: str) -> list:
        t = by_label[lab].term
        if t[0] in ("jump", "barrier"):
            return [t[1]]
        if t[0] == "branch":
            return [t[4], t[3]]
        return []

    seen, post, back = {prog.entry}, [], []
    on_stack = {prog.entry}
    stack = [(prog.entry, iter(succ(prog.entry)))]
    while stack:
        lab, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            post.append(lab)
            on_stack.discard(lab)
            stack.pop()
        elif nxt in on_stack:
            back.append((lab, nxt))
        elif nxt not in seen:
            seen.add(nxt)
            on_stack.add(nxt)
            stack.append((nxt, iter(succ(nxt))))
    rpo = list(reversed(post))
    rank = {lab: i for i, lab in enumerate(rpo)}
    backs = set(back)
    after = {lab: {n for n in succ(lab) if (lab, n) not in backs} for lab in rpo}
    preds: dict = {lab: [] for lab in rpo}
    for lab in rpo:
        for n in succ(lab):
            preds[n].append(lab)
    for latch, head in back:           # the natural loop: the header and what reaches the latch without it
        body, todo = {head, latch}, [latch]
        while todo:
            for p_ in preds[todo.pop()]:
                if p_ not in body:
                    body.add(p_)
                    todo.append(p_)
        exits = {n for lab in body for n in succ(lab) if n not in body}
        for lab in body:
            after[lab] |= exits
    order = _topological(rpo, after, rank)
    return [by_label[x] for x in (order if order is not None else rpo)]


def _topological(nodes: list, after: dict, rank: dict) -> list | None:
    """`nodes` in an order where each comes before every node of its `after` set, the lowest
    `rank` first among those ready; None if the constraints have a cycle (an irreducible CFG)."""
    indeg = {n: 0 for n in nodes}
    for n in nodes:
        for m in after[n]:
            indeg[m] += 1
    ready = [(rank[n], n) for n in nodes if indeg[n] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, n = heapq.heappop(ready)
        out.append(n)
        for m in after[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                heapq.heappush(ready, (rank[m], m))
    return out if len(out) == len(nodes) else None


def schedule(prog: MicroProgram, cfg: MachineConfig) -> Image:
    prog = _thread_jumps(prog)
    blocks = _order_blocks(prog)
    packer = _Packer(cfg, rematerializable(prog), prog.nregs + 1)
    live_out = _block_live_out(blocks, prog.pinned)
    first_of: dict[str, int] = {}
    block_bundles: list[tuple[Block, list[Bundle]]] = []
    for blk in blocks:
        bs = packer.pack_block(blk, live_out[blk.label])
        first_of[blk.label] = bs[0].index
        block_bundles.append((blk, bs))
    bundles = packer.bundles
    # terminators: inner bundles fall through to the next bundle of the block
    for blk, bs in block_bundles:
        for b in bs[:-1]:
            b.term = ("jump", b.index + 1)
        last = bs[-1]
        t = blk.term
        if t[0] == "jump":
            last.term = ("jump", first_of[t[1]])
        elif t[0] == "branch":
            last.term = ("branch", t[2], first_of[t[3]], first_of[t[4]])
        elif t[0] == "barrier":
            last.term = ("barrier", first_of[t[1]])
        else:
            last.term = ("exit",)
    if len(bundles) > cfg.rom_bundles:
        raise RomOverflow(f"the program needs {len(bundles)} bundles; the machine's ROM holds {cfg.rom_bundles}")
    _carries(bundles, cfg, prog.pinned)
    reg_of, nregs = _allocate(bundles, cfg)
    for b in bundles:
        b.ports = [[(("reg", reg_of[x[1]]) if x[0] == "reg" else x) for x in ps] for ps in b.slot_ports]
        b.term_port_regs = [reg_of[x[1]] if x[0] == "reg" else None for x in b.term_ports]
        b.carry_regs = [reg_of[v] for v, _ in b.carries]
    return Image(bundles, cfg, nregs, reg_of, prog.layout, prog.kernel, entry=first_of[prog.entry])


def rematerializable(prog: MicroProgram, max_ops: int = 3) -> dict:
    """Single-definition registers computed from immediates and specials by at most `max_ops`
    pure ALU micro-ops: {vreg: [defining ops in order]}."""
    defs, count = {}, {}
    for blk in prog.blocks:
        for op in blk.ops:
            for d in op.writes():
                count[d] = count.get(d, 0) + 1
                defs[d] = op
    out = {}

    def chain(v, depth=0):
        if v in out:
            return out[v]
        op = defs.get(v)
        if op is None or count.get(v) != 1 or op.kind != "alu" or op.sets_flag or op.cin == "flag" or depth > 4:
            return None
        ops = []
        for r in op.reads():
            sub = chain(r, depth + 1)
            if sub is None:
                return None
            ops += [o for o in sub if o not in ops]
        ops.append(op)
        if len(ops) > max_ops:
            return None
        out[v] = ops
        return ops

    for v in list(defs):
        chain(v)
    return out


def _succs(b: Bundle) -> list[int]:
    t = b.term
    if t[0] in ("jump", "barrier"):
        return [t[1]]
    if t[0] == "branch":
        return [t[2], t[3]]
    return []


def port_regs(b: Bundle) -> set:
    regs = {x[1] for ps in b.slot_ports for x in ps if x[0] == "reg"}
    return regs | {x[1] for x in b.term_ports if x[0] == "reg"}


def _carries(bundles: list[Bundle], cfg: MachineConfig, pinned: set = frozenset()):
    """Liveness over bundle boundaries; a bundle carries the registers it writes that are live out
    (the `pinned` registers are live at every exit)."""
    n = len(bundles)
    uses = [port_regs(b) for b in bundles]
    defs = [set(b.writes) for b in bundles]
    live_in = [set() for _ in range(n)]
    live_out = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(n)):
            out = set(pinned) if bundles[i].term[0] == "exit" else set()
            for s in _succs(bundles[i]):
                out |= live_in[s]
            inn = uses[i] | (out - defs[i])
            if out != live_out[i] or inn != live_in[i]:
                live_out[i], live_in[i] = out, inn
                changed = True
    for i, b in enumerate(bundles):
        b.carries = sorted(((v, s) for v, s in b.writes.items() if v in live_out[i]), key=lambda x: x[1])
        b.live_out = live_out[i]
        b.live_in = live_in[i]
        if len(b.carries) > cfg.carry_slots:
            raise AssemblerError(f"bundle {i} ({b.label}) carries {len(b.carries)} registers; the machine "
                                 f"writes back {cfg.carry_slots} per pass")


class RomOverflow(AssemblerError):
    """The program needs more bundles than the machine's ROM holds."""


class RegisterPressure(AssemblerError):
    """Register allocation needs more physical registers than the machine has (`bundles`: the
    packed program, with its live sets, for the spiller to choose from)."""

    def __init__(self, needed: int, registers: int, bundles: list):
        super().__init__(f"the program needs {needed} registers per thread; the machine has {registers}")
        self.needed, self.registers, self.bundles = needed, registers, bundles


def _allocate(bundles: list[Bundle], cfg: MachineConfig) -> tuple[dict, int]:
    """Physical registers for virtual registers live across a bundle boundary (greedy colouring)."""
    regs = set()
    for b in bundles:
        regs |= port_regs(b) | {v for v, _ in b.carries}
    interfere: dict = {v: set() for v in regs}
    for b in bundles:
        live = (b.live_in | b.live_out) & regs
        for v in live:
            interfere[v] |= live - {v}
        # a carried register must not take the place of a register still read from this bundle's
        # ports later (both are live at the boundary already, covered above)
    reg_of = {}
    for v in sorted(regs, key=lambda v: (-len(interfere[v]), v.id)):
        used = {reg_of[u] for u in interfere[v] if u in reg_of}
        r = 0
        while r in used:
            r += 1
        reg_of[v] = r
    n = max(reg_of.values(), default=-1) + 1
    if n > cfg.registers:
        raise RegisterPressure(n, cfg.registers, bundles)
    return reg_of, n
