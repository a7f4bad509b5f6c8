"""Register spilling: when a program needs more physical registers than the machine has, some
virtual registers live in memory instead, loaded before each use and stored after each definition.

The loop: schedule; if register allocation fails, pick victims among the values live where the
pressure is highest -- the ones whose next use is furthest away (Belady) -- and schedule again.
A victim computed from launch constants alone is recomputed at each use instead (no memory).

Spill slots are 32-bit words in the global window, after the launch's own data (the machine's
local window is 32 bytes for at most 16 threads, `qwengpu.machine.layout`: too small for a spill
area). Slot `s` of thread `t` (linear id in the block) is at `base + 4 * (s * T + t)`, so the
address is `(t << 2) + constant`: two ALU ops ahead of the memory unit. Blocks run one at a time,
so one area per block's threads suffices. Nothing else addresses that memory, so the
interpreter's results are unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.launch import GLOBAL_BASE
from qwengpu.machine.config import MachineConfig
from qwengpu.machine.image import Image
from qwengpu.machine.layout import LINE
from qwengpu.machine.uops import Imm, MicroOp, Special, Src, VReg, alu, src

from .lower import AssemblerError, Block, MicroProgram
from .schedule import RegisterPressure, port_regs, rematerializable, schedule

#: rounds of spilling before giving up (each round reschedules the whole program)
MAX_ROUNDS = 64
#: a spilled value loaded at most this many micro-ops earlier in the same block is used again
#: (a soft-float routine reads an operand several times) instead of loaded again
REUSE_WINDOW = 96


@dataclass
class SpillPlan:
    """Which virtual registers live in memory (`slots`: vreg -> slot) or are recomputed at use."""
    slots: dict = field(default_factory=dict)
    remat: set = field(default_factory=set)

    def __len__(self) -> int:
        return len(self.slots) + len(self.remat)


def schedule_with_spills(prog: MicroProgram, cfg: MachineConfig, threads: int, block: tuple) -> Image:
    """`schedule(prog, cfg)`, spilling registers to memory until the program fits the register file.

    A program that spills is spilled twice: reusing a loaded value within `REUSE_WINDOW` micro-ops
    of the same block (fewer loads, but the reused values hold registers and cost carries), and
    loading at every use; the one with fewer bundles wins (ties: loads at every use)."""
    try:
        reused = _spill_rounds(_copy(prog), cfg, threads, block, REUSE_WINDOW)
    except AssemblerError:
        reused = None
    if reused is not None and not len(reused[1]):
        return reused[0]                      # it fits without spilling
    try:
        fresh = _spill_rounds(_copy(prog), cfg, threads, block, 0)
    except AssemblerError:
        if reused is None:
            raise
        fresh = None
    better = fresh is None or (reused is not None and len(reused[0].bundles) < len(fresh[0].bundles))
    image, plan = reused if better else fresh
    if plan.slots:
        _reserve(image.layout, len(plan.slots), threads)
    return image


def _copy(prog: MicroProgram) -> MicroProgram:
    """A copy whose blocks the scheduler may change (it threads jumps and merges blocks in place)."""
    return MicroProgram([Block(b.label, list(b.ops), b.term) for b in prog.blocks], prog.entry, prog.nregs,
                        prog.kernel, prog.layout, prog.specials, prog.pinned)


def _spill_rounds(prog: MicroProgram, cfg: MachineConfig, threads: int, block: tuple, window: int) -> tuple:
    """(image, SpillPlan) of `prog` spilled round by round until it fits."""
    plan, remat = SpillPlan(), rematerializable(prog)
    for _ in range(MAX_ROUNDS):
        cur, temps = (prog, set()) if not len(plan) else _apply(prog, plan, remat, threads, block, window)
        try:
            image = schedule(cur, cfg)
        except RegisterPressure as e:
            victims = _victims(e, prog, plan, temps, remat)
            if not victims:
                raise AssemblerError(
                    f"the program needs {e.needed} registers per thread even after spilling "
                    f"{len(plan.slots)} values to memory and recomputing {len(plan.remat)}; the machine "
                    f"has {cfg.registers} (what is left live at once cannot be spilled: loaded "
                    f"operands, carry pairs and predicated writes)") from None
            for v in victims:
                if v in remat:
                    plan.remat.add(v)
                else:
                    plan.slots[v] = len(plan.slots)
            continue
        return image, plan
    raise AssemblerError(f"the program needs more than {cfg.registers} registers per thread; spilling "
                         f"{len(plan)} values in {MAX_ROUNDS} rounds did not make it fit")


def spill_slots(image: Image) -> int:
    """How many words per thread an assembled program keeps in memory for spilled registers."""
    return len({so.op.extra["spill"] for b in image.bundles for so in b.slots
                if so is not None and "spill" in so.op.extra})


def _area(layout, nslots: int, threads: int) -> tuple[int, int]:
    """(base address, bytes) of the spill area after the launch's global data."""
    base = (layout.global_end + LINE - 1) // LINE * LINE
    return base, 4 * nslots * threads


def _reserve(layout, nslots: int, threads: int):
    base, size = _area(layout, nslots, threads)
    window = layout.window_end("global")
    if base + size > window:
        raise AssemblerError(
            f"spilling {nslots} registers needs {size} bytes of global memory ({threads} threads x "
            f"{4 * nslots} bytes); the machine's global window has {max(0, window - base)} bytes free "
            f"after the launch's data (of {window - GLOBAL_BASE})")
    for k in range(size):
        layout.valid[layout.machine_address("global", base + k, 0)] = 1


def _victims(e: RegisterPressure, prog: MicroProgram, plan: SpillPlan, temps: set, remat: dict) -> list:
    """The values to spill next: at the bundle boundary with the most live values, the ones whose
    next use is furthest (in bundle order), as many as the allocation overflowed by."""
    bundles = e.bundles
    spillable = _spillable(prog) - temps - set(plan.slots) - plan.remat
    worst = max(range(len(bundles)), key=lambda i: len(bundles[i].live_in | bundles[i].live_out))
    live = [v for v in (bundles[worst].live_in | bundles[worst].live_out) if v in spillable]
    uses = [port_regs(b) for b in bundles]
    n = len(bundles)

    def next_use(v) -> int:
        for d in range(1, n + 1):
            if v in uses[(worst + d) % n]:
                return d
        return n + 1

    live.sort(key=lambda v: (v in remat, next_use(v), v.id), reverse=True)
    return live[:max(1, e.needed - e.registers)]


def _spillable(prog: MicroProgram) -> set:
    """Registers of the program that may live in memory: not written by a predicated op (whose
    write keeps the old value in lanes that skip it)."""
    out, guarded = set(), set()
    for blk in prog.blocks:
        for op in blk.ops:
            out |= set(op.writes()) | set(op.reads())
            if op.guard is not None:
                guarded |= set(op.writes())
        t = blk.term
        if t[0] == "branch" and isinstance(t[1].value, VReg):
            out.add(t[1].value)
    return out - guarded - prog.pinned     # a pinned register is read by other lanes: never in memory


def _apply(prog: MicroProgram, plan: SpillPlan, remat: dict, threads: int, block: tuple, window: int):
    """A copy of `prog` with loads before uses and stores after definitions of the spilled
    registers, and recomputation for the rematerialised ones; also the new temporaries. A value
    loaded (or stored) at most `window` micro-ops earlier in the same block is reused."""
    nv = [prog.nregs]
    temps: set = set()

    def fresh(name: str) -> VReg:
        nv[0] += 1
        v = VReg(nv[0], name)
        temps.add(v)
        return v

    base, _ = _area(prog.layout, len(plan.slots), threads)
    tid4 = None
    blocks = []
    if block[1] * block[2] > 1:
        # a 2-D/3-D block: the linear thread id times 4, computed once
        tid4 = fresh("spill.tid4")
        bx, by = block[0], block[1]
        lin = [alu("MUL", (t1 := fresh("spill.t")), Special("tid.z"), by),
               alu("ADD", (t2 := fresh("spill.t")), Special("tid.y"), src(t1)),
               alu("MUL", (t3 := fresh("spill.t")), src(t2), bx),
               alu("ADD", (t4 := fresh("spill.t")), Special("tid.x"), src(t3)),
               alu("SHL", tid4, src(t4), 2)]
    else:
        lin = []

    def address(slot: int, pc: int) -> tuple[list, Src]:
        off = base + 4 * slot * threads
        if tid4 is not None:
            a = fresh("spill.a")
            return [alu("ADD", a, src(tid4), off, ptx_pc=pc)], src(a)
        t, a = fresh("spill.t4"), fresh("spill.a")
        return [alu("SHL", t, Special("tid.x"), 2, ptx_pc=pc), alu("ADD", a, src(t), off, ptx_pc=pc)], src(a)

    def reload(v: VReg, pc: int) -> tuple[list, VReg]:
        if v in plan.remat:
            env, ops = {}, []
            for dep in remat[v]:
                d = fresh("remat")
                c = _rename(dep, env)
                c.dst = (d,)
                c.ptx_pc = pc
                env[dep.dst[0]] = d
                ops.append(c)
            return ops, env[v]
        t = fresh(f"reload.{v.name}")
        ops, a = address(plan.slots[v], pc)
        ops.append(MicroOp("mem", "LD", (t, None), extra={"space": "global", "width": 4, "signed": False,
                                                          "addr": (a, src(Imm(0))), "align": 4,
                                                          "spill": plan.slots[v]}, ptx_pc=pc))
        return ops, t

    def store(t: VReg, v: VReg, pc: int) -> list:
        ops, a = address(plan.slots[v], pc)
        ops.append(MicroOp("mem", "ST", (), extra={"space": "global", "width": 4, "addr": (a, src(Imm(0))),
                                                   "data": (src(t), None), "align": 4, "spill": plan.slots[v]},
                           ptx_pc=pc))
        return ops

    spilled = set(plan.slots) | plan.remat
    for blk in prog.blocks:
        out = list(lin) if blk.label == prog.entry else []
        ops, i = blk.ops, 0
        avail: dict = {}        # spilled register -> (the temporary holding it, op index)
        while i < len(ops):
            group = [ops[i]]
            if ops[i].sets_flag and i + 1 < len(ops) and ops[i + 1].cin == "flag":
                group.append(ops[i + 1])
            i += len(group)
            pc = group[0].ptx_pc
            env: dict = {}
            for op in group:
                for v in op.reads():
                    if v in spilled and v not in env:
                        if v in avail and i - avail[v][1] <= window:
                            env[v] = avail[v][0]
                            continue
                        load, env[v] = reload(v, pc)
                        avail[v] = (env[v], i)
                        out += load
            after = []
            new_group = []
            for op in group:
                c = _rename(op, env)
                dst = []
                for d in c.dst:
                    if d is not None and d in spilled:
                        if d in plan.remat:
                            dst.append(d)      # its one definition stays (nothing reads it now)
                            continue
                        t = fresh(f"spill.{d.name}")
                        after += store(t, d, c.ptx_pc)
                        dst.append(t)
                        env[d] = t             # a later op of the same pair reads the new value
                        avail[d] = (t, i)
                    else:
                        dst.append(d)
                c.dst = tuple(dst)
                new_group.append(c)
            out += new_group + after
        term = blk.term
        if term[0] == "branch" and isinstance(term[1].value, VReg) and term[1].value in spilled:
            v = term[1].value
            if v in avail and len(ops) - avail[v][1] <= window:
                t = avail[v][0]
            else:
                load, t = reload(v, ops[-1].ptx_pc if ops else -1)
                out += load
            term = ("branch", Src(t, term[1].inv)) + term[2:]
        blocks.append(Block(blk.label, out, term))
    return MicroProgram(blocks, prog.entry, nv[0], prog.kernel, prog.layout, prog.specials, prog.pinned), temps


def _rename(op: MicroOp, env: dict) -> MicroOp:
    """A copy of `op` reading env[v] wherever it read v."""
    def f(s):
        if s is None or not isinstance(s.value, VReg) or s.value not in env:
            return s
        return Src(env[s.value], s.inv)
    extra = dict(op.extra)
    for k in ("addr", "data", "cmp", "bsrc", "csrc"):
        if extra.get(k):
            extra[k] = tuple(f(x) for x in extra[k])
    if extra.get("keep") is not None:
        extra["keep"] = env.get(extra["keep"], extra["keep"])
    return MicroOp(op.kind, op.op, op.dst, f(op.a), f(op.b), f(op.c), op.cin, op.sets_flag, extra,
                   op.ptx_pc, f(op.guard))
