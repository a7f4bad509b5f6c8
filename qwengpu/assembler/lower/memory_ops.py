"""Memory instructions: ld (parameters folded to constants), st, atomics (a CAS loop, or one lane
at a time for what the atomic unit does not do), on the machine's memory map."""
from __future__ import annotations

from qwengpu.semantics.launch_model import GENERIC_WINDOWS
from qwengpu.machine.uops import M32, Imm, MicroOp, Src, alu, src
from qwengpu.ptx.ir import Addr, Vec

from .. import intcode as ic
from .. import softfloat as sf
from .core import AssemblerError, type_bits


class MemoryOps:
    """The `op_*` / `float_*` methods of a `Lowerer` for these instructions."""

    def generic_access(self, ctx, ins, info, handler):
        """ld/st/atom/red with no state space: the address's window (its high word: `cvta`,
        `GENERIC_WINDOWS`) picks the space at run time, a branch to one copy of the access per
        space; an address in no window is a global one (and faults there if it is out of bounds)."""
        a = ins.operands[0] if ins.op in ("st", "red") else ins.operands[1]
        lo, hi = self.address_value(ctx, a, ins)
        join = self.fresh_label("generic_join")
        for space in ("shared", "local", "const"):
            here, rest = self.fresh_label(f"generic_{space}"), self.fresh_label("generic_next")
            self.end(("branch", self.em(ctx).alu("EQ", hi, GENERIC_WINDOWS[space] >> 32), True, here, rest))
            self.start(here)
            ctx["generic"] = (space, lo, src(Imm(0)))
            handler(ctx, ins, info)
            if self.cur is not None:
                self.end(("jump", join))
            self.start(rest)
        ctx["generic"] = ("global", lo, hi)
        handler(ctx, ins, info)
        ctx["generic"] = None
        if self.cur is not None:
            self.end(("jump", join))
        self.start(join)

    def local_frame_check(self, ctx, space: str, lo: Src, size: int, count: int, kind: str):
        """A local access must lie in the thread's live frames (the interpreter's rule): up to the
        current function's frame, `local_base` + its size. The layout marks every function's frame
        valid (`launch_layout`), so where the live frames end lower -- in a caller after an inlined
        callee with locals returned -- each of the `count` elements is checked here: an aligned
        one past the frames loads from above the 4 GiB line, reported as the interpreter's fault
        (`trap: local`, the offset as address). A misaligned access is left to the memory unit."""
        if space != "local":
            return
        top = ctx["local_base"] + self.layout.local_size.get(ctx["fn"].name, 0)
        if top >= self.layout.local_stride:
            return
        pc = ctx["pc"]
        for k in range(count):
            em = self.em(ctx)
            at = lo if k == 0 else em.alu("ADD", lo, k * size)
            inside = em.alu("LTU", em.alu("ADD", at, size), top + 1)
            misaligned = em.alu("LTU", 0, em.alu("AND", lo, size * count - 1))
            ok, bad = self.fresh_label("local_in_frame"), self.fresh_label("local_past_frame")
            self.end(("branch", em.alu("OR", inside, misaligned), True, ok, bad))
            self.start(bad)
            self.emit(MicroOp("mem", "LD", (self.new("past.frame"), None), extra={
                "space": "global", "width": 1, "signed": False, "addr": (at, src(Imm(1))), "align": 1,
                "trap": "local", "access": (kind, size)}, ptx_pc=pc))
            self.end(("exit",))
            self.start(ok)

    def op_ld(self, ctx, ins, info):
        d, a = ins.operands
        t = info.type
        if t in ("f32", "f64", "f16") and False:
            pass
        regs = list(d.items) if isinstance(d, Vec) else [d]
        size = max(1, type_bits(t) // 8)
        if info.space == "param":
            self.param_load(ctx, ins, a, regs, t, size)
            return
        space, lo, hi = self.address(ctx, a, info.space, ins)
        self.local_frame_check(ctx, space, lo, size, len(regs), "read")
        # the machine loads 1, 2 or 4 bytes, zero-extended: wider loads are split into words,
        # signed narrow loads extended by shifts
        words = []
        for k in range(len(regs)):
            for half in range(2 if size == 8 else 1):
                words.append((k, half, k * size + 4 * half))
        got = {}
        for k, half, off in words:
            alo, ahi = (lo, hi) if off == 0 else self.add64(ctx, (lo, hi), (src(Imm(off)), src(Imm(0))))
            d = self.new()
            self.emit(MicroOp("mem", "LD", (d, None), extra={
                "space": space, "width": min(size, 4), "signed": False, "addr": (alo, ahi),
                "align": size * len(regs) if off == 0 else min(size, 4)}, ptx_pc=ctx["pc"]))
            got[(k, half)] = src(d)
        for k, r in enumerate(regs):
            if r is None:
                continue
            lo_v = got[(k, 0)]
            if size < 4 and t[0] == "s":
                lo_v = self._narrow(lo_v, 8 * size, True, ctx)
            self.write(ctx, r, lo_v, got[(k, 1)] if size == 8 else None, t, ins, signed_ext=t[0] == "s")

    op_ldu = op_ld

    def param_load(self, ctx, ins, a: Addr, regs, t, size):
        name = a.base.name
        pv = ctx["params"].get(name)
        if pv is None:
            raise AssemblerError(f"unknown parameter {name}", ins)
        for k, r in enumerate(regs):
            off = a.offset + k * size
            if pv[0] == "const":
                raw = pv[1]
                if off + size > len(raw):
                    raise AssemblerError(f"ld.param beyond parameter {name}", ins)
                v = int.from_bytes(raw[off:off + size], "little")
                if t[0] == "s" and size < 8:
                    if v >> (8 * size - 1):
                        v -= 1 << (8 * size)
                    v &= (1 << 64) - 1
                if r is not None:
                    lo, hi = src(Imm(v & M32)), src(Imm(v >> 32))
                    self.write(ctx, r, lo, hi if size == 8 or type_bits(ctx["fn"].regs.get(r.name, "b32")) == 64 else None,
                               t, ins)
            else:
                slots = pv[1]           # byte offset -> (lo Src, hi Src, size)
                if off not in slots:
                    raise AssemblerError(f"parameter {name}+{off} was not stored", ins)
                lo, hi, _ = slots[off]
                if r is not None:
                    if size < 4:
                        lo = self._narrow(lo, 8 * size, t[0] == "s", ctx)
                    self.write(ctx, r, lo, hi if size == 8 else None, t, ins, signed_ext=t[0] == "s")

    def op_st(self, ctx, ins, info):
        a, s = ins.operands
        t = info.type
        srcs = list(s.items) if isinstance(s, Vec) else [s]
        size = max(1, type_bits(t) // 8)
        if info.space == "param":
            name = a.base.name
            slots = ctx["params"].setdefault(name, ("slots", {}))[1]
            for k, o in enumerate(srcs):
                lo, hi = self.value(ctx, o, t, ins)
                if not self.store_return_value(ctx, name, a.offset + k * size, lo, hi):
                    slots[a.offset + k * size] = (lo, hi, size)
            return
        space, lo, hi = self.address(ctx, a, info.space, ins)
        self.local_frame_check(ctx, space, lo, size, len(srcs), "write")
        for k, o in enumerate(srcs):
            vlo, vhi = self.value(ctx, o, t, ins)
            for half, part in enumerate([vlo, vhi] if size == 8 else [vlo]):
                off = k * size + 4 * half
                alo, ahi = (lo, hi) if off == 0 else self.add64(ctx, (lo, hi), (src(Imm(off)), src(Imm(0))))
                self.emit(MicroOp("mem", "ST", (), extra={
                    "space": space, "width": min(size, 4), "addr": (alo, ahi), "data": (part, None),
                    "align": size * len(srcs) if off == 0 else min(size, 4)}, ptx_pc=ctx["pc"]))

    def op_atom(self, ctx, ins, info):
        is_red = ins.op == "red"
        a = ins.operands[0] if is_red else ins.operands[1]
        srcs = ins.operands[1:] if is_red else ins.operands[2:]
        t, o = info.type, info.boolop
        if t in ("f32", "f64") and o == "exch":
            t = "b" + t[1:]                     # an exchange moves bits
        size = type_bits(t) // 8
        space, lo, hi = self.address(ctx, a, info.space, ins)
        self.local_frame_check(ctx, space, lo, size, 1, "atomic")
        b = self.value(ctx, srcs[0], t, ins)
        c = self.value(ctx, srcs[1], t, ins) if len(srcs) > 1 else (None, None)
        if t == "f32":
            d = self.atom_cas_loop(ctx, space, (lo, hi), b[0], lambda em, old: sf.add(em, old, b[0], "rn", ftz=True))
            if not is_red:
                self.write(ctx, ins.operands[0], d, None, t, ins)
            return
        if size == 8:
            d = self.atom64(ctx, ins, space, (lo, hi), o, t, b, c)
            if not is_red:
                self.write(ctx, ins.operands[0], d[0], d[1], t, ins)
            return
        dlo = self.new()
        self.emit(MicroOp("mem", "ATOM", (dlo, None), extra={
            "space": space, "width": size, "addr": (lo, hi), "data": b, "cmp": c,
            "atom": o, "signed": t[0] == "s", "align": size}, ptx_pc=ctx["pc"]))
        if not is_red:
            self.write(ctx, ins.operands[0], src(dlo), None, t, ins)

    op_red = float_atom = float_red = op_atom

    def atom_cas_loop(self, ctx, space: str, addr: tuple, b: Src, update) -> Src:
        """The old 32-bit word at addr after atomically replacing it by update(em, old)."""
        old = self.new("atom.old")
        self._mem(ctx, "LD", space, addr, old)
        loop, done = self.fresh_label("atom_cas"), self.fresh_label("atom_done")
        self.end(("jump", loop))
        self.start(loop)
        new = update(self.em(ctx), src(old))
        r = self.new("atom.seen")
        self._mem(ctx, "ATOM", space, addr, r, data=(src(old), None), cmp=(new, None), atom="cas")
        em = self.em(ctx)
        ok = em.alu("EQ", src(r), src(old))
        self.emit(alu("MOV", old, src(r), ptx_pc=ctx["pc"]))
        self.end(("branch", ok, False, loop, done))
        self.start(done)
        return src(old)

    def atom64(self, ctx, ins, space: str, addr: tuple, o: str, t: str, b: tuple, c: tuple) -> tuple:
        """A 64-bit atomic (see above); returns the old value as a (lo, hi) pair."""
        addr_hi = self.add64(ctx, addr, (src(Imm(4)), src(Imm(0))))
        if o in ("add", "and", "or", "xor", "exch") and t != "f64":
            dlo, dhi = self.new(), self.new()
            self._mem(ctx, "ATOM", space, addr, dlo, data=(b[0], None), atom=o, align=8)
            bh = b[1]
            if o == "add":                      # the low word's carry
                em = self.em(ctx)
                carry = em.alu("LTU", em.alu("ADD", src(dlo), b[0]), src(dlo))
                bh = em.alu("ADD", b[1], carry)
            self._mem(ctx, "ATOM", space, addr_hi, dhi, data=(bh, None), atom=o)
            return src(dlo), src(dhi)
        if o not in ("add", "min", "max", "cas"):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine", ins)
        olo, ohi = self.new("atom.old"), self.new("atom.old.hi")

        def body():
            self._mem(ctx, "LD", space, addr, olo, align=8)
            self._mem(ctx, "LD", space, addr_hi, ohi)
            old, em = (src(olo), src(ohi)), self.em(ctx)
            if o == "add":
                new = sf.add64(em, old, b, "rn")
            elif o == "cas":
                same = em.alu("AND", em.alu("EQ", old[0], b[0]), em.alu("EQ", old[1], b[1]))
                new = (em.alu("SEL", c[0], old[0], same), em.alu("SEL", c[1], old[1], same))
            else:
                new = (ic.min64 if o == "min" else ic.max64)(em, old, b, t[0] == "s")
            self._mem(ctx, "ST", space, addr, data=(new[0], None), align=8)
            self._mem(ctx, "ST", space, addr_hi, data=(new[1], None))
        self.one_lane_at_a_time(ctx, ins, body)
        return src(olo), src(ohi)

    def one_lane_at_a_time(self, ctx, ins, body):
        """Run body() for the current lanes one after the other, in lane order."""
        pc = ctx["pc"]
        j = self.new("lane.j")
        self.emit(alu("MOV", j, 0, ptx_pc=pc))
        head, turn, nxt, done = (self.fresh_label(x) for x in ("lanes", "lane_turn", "lane_next", "lanes_done"))
        self.end(("jump", head))
        self.start(head)
        mine = self.em(ctx).alu("EQ", self.special("%laneid", ins), src(j))
        self.end(("branch", mine, True, turn, nxt))
        self.start(turn)
        body()
        self.end(("jump", nxt))
        self.start(nxt)
        self.emit(alu("ADD", j, src(j), 1, ptx_pc=pc))
        more = self.em(ctx).alu("LTU", src(j), 4)
        self.end(("branch", more, True, head, done))
        self.start(done)
