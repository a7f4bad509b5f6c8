"""Micro-op clean-up before packing: constant and copy propagation, constant folding, dead code.

Launch constants (parameters, buffer addresses, block sizes) make much of a kernel's PTX constant
work; folding it here is what keeps bundles short and carries few.
"""
from __future__ import annotations

from qwengpu.machine.uops import ALU_OPS, Imm, MicroOp, Special, Src, VReg, src

from .lower import Block, MicroProgram
from .simplify import fold

_PURE = set(ALU_OPS)


def _subst(s: Src | None, env: dict) -> Src | None:
    if s is None or not isinstance(s.value, VReg):
        return s
    r = env.get(s.value)
    if r is None:
        return s
    return Src(r.value, r.inv ^ s.inv)


def _map_srcs(op: MicroOp, f):
    if op.kind == "fpu":            # the float unit's ports read registers and immediates only:
        g = f                       # no special registers, no inverted operands
        f = lambda s: s if (r := g(s)) is not None and (isinstance(r.value, Special) or
                                                         r.inv and not isinstance(r.value, Imm)) else r
    op.a, op.b, op.c, op.guard = f(op.a), f(op.b), f(op.c), f(op.guard)
    for k in ("addr", "data", "cmp", "bsrc", "csrc"):
        if op.extra.get(k):
            op.extra[k] = tuple(f(x) for x in op.extra[k])


def _fold(op: MicroOp) -> MicroOp:
    """An ALU op whose sources are all immediates becomes a MOV of the result (`simplify.fold`)."""
    if op.kind != "alu" or op.op == "MOV" or op.cin == "flag":
        return op
    if op.op == "SEL" and isinstance(op.c.value, Imm):
        # a constant condition picks one side (the machine cannot even read an immediate 0 there)
        k = (~op.c.value.value if op.c.inv else op.c.value.value) & 0xFFFFFFFF
        return MicroOp("alu", "MOV", op.dst, op.a if k else op.b, ptx_pc=op.ptx_pc)
    vals = []
    for s in (op.a, op.b, op.c):
        if s is None:
            vals.append(0)
        elif isinstance(s.value, Imm):
            vals.append((~s.value.value if s.inv else s.value.value) & 0xFFFFFFFF)
        else:
            return op
    if op.sets_flag:
        return op                  # the flag is still needed by the next op
    r = fold(op.op, *vals, cin=op.cin if op.cin in ("0", "1") else "0")
    return MicroOp("alu", "MOV", op.dst, src(Imm(r)), ptx_pc=op.ptx_pc)


def _strength(op: MicroOp) -> MicroOp:
    """Multiplications by powers of two become shifts."""
    if op.kind != "alu" or op.op not in ("MUL", "MULHU", "MULHS"):
        return op
    a, b = op.a, op.b
    if isinstance(a.value, Imm) and not a.inv and not isinstance(b.value, Imm):
        a, b = b, a
    if not isinstance(b.value, Imm) or b.inv:
        return op
    c = b.value.value
    if c == 0:
        return MicroOp("alu", "MOV", op.dst, src(Imm(0)), ptx_pc=op.ptx_pc)
    if c & (c - 1) or (op.op == "MULHS" and c == 0x80000000):     # signed, that one is -2^31
        return op
    k = c.bit_length() - 1
    if op.op == "MUL":
        return MicroOp("alu", "SHL", op.dst, a, src(Imm(k)), ptx_pc=op.ptx_pc)
    if k == 0:
        if op.op == "MULHU":
            return MicroOp("alu", "MOV", op.dst, src(Imm(0)), ptx_pc=op.ptx_pc)
        return MicroOp("alu", "SAR", op.dst, a, src(Imm(31)), ptx_pc=op.ptx_pc)
    return MicroOp("alu", "SHR" if op.op == "MULHU" else "SAR", op.dst, a, src(Imm(32 - k)), ptx_pc=op.ptx_pc)


FULL = (0, 0xFFFFFFFF)


def _ranges(prog: MicroProgram, specials: dict) -> dict:
    """Unsigned intervals of single-definition registers (others: the full range)."""
    defs = _defs(prog)
    rng: dict = {}

    def r(s: Src | None):
        if s is None:
            return (0, 0)
        v = s.value
        if isinstance(v, Imm):
            x = (~v.value & 0xFFFFFFFF) if s.inv else v.value
            return (x, x)
        if s.inv:
            lo, hi = r(Src(v))
            return (0xFFFFFFFF - hi, 0xFFFFFFFF - lo)
        if isinstance(v, Special):
            return specials.get(v.name, FULL)
        return rng.get(v, FULL)

    for _ in range(3):
        for b in prog.blocks:
            for op in b.ops:
                if op.kind != "alu" or defs.get(op.dst[0]) != 1:
                    continue
                a, bb = r(op.a), r(op.b)
                o = op.op
                res = FULL
                if o == "MOV":
                    res = a
                elif o == "ADD" and op.cin in ("0", "1"):
                    ci = int(op.cin)
                    if a[1] + bb[1] + ci <= 0xFFFFFFFF:
                        res = (a[0] + bb[0] + ci, a[1] + bb[1] + ci)
                elif o == "SHL" and bb[0] == bb[1] and bb[0] < 32:
                    if a[1] << bb[0] <= 0xFFFFFFFF:
                        res = (a[0] << bb[0], a[1] << bb[0])
                elif o in ("SHR",) and bb[0] == bb[1]:
                    res = (a[0] >> bb[0], a[1] >> bb[0]) if bb[0] < 32 else (0, 0)
                elif o == "SAR" and bb[0] == bb[1] and a[1] < 0x80000000:
                    res = (a[0] >> min(bb[0], 31), a[1] >> min(bb[0], 31))
                elif o == "AND":
                    res = (0, min(a[1], bb[1]))
                elif o in ("OR", "XOR"):
                    top = (1 << max(a[1], bb[1]).bit_length()) - 1
                    res = (0, top)
                elif o in ("EQ", "LTU", "LEU", "LT", "LE"):
                    res = (0, 1)
                elif o == "SEL":
                    res = (min(a[0], bb[0]), max(a[1], bb[1]))
                elif o == "MUL" and a[1] * bb[1] <= 0xFFFFFFFF:
                    res = (a[0] * bb[0], a[1] * bb[1])
                elif o == "MULHU":
                    res = ((a[0] * bb[0]) >> 32, (a[1] * bb[1]) >> 32)
                elif o == "MULHS" and a[1] < 0x80000000 and bb[1] < 0x80000000:
                    res = ((a[0] * bb[0]) >> 32, (a[1] * bb[1]) >> 32)
                elif o in ("CLZ", "POPC"):
                    res = (0, 32)
                rng[op.dst[0]] = res
    return rng


def _use_ranges(prog: MicroProgram, specials: dict) -> bool:
    """Fold ops whose result range is one value; drop carry flags that can never be set."""
    rng = _ranges(prog, specials)
    changed = False

    def r(s):
        v = s.value
        if isinstance(v, Imm):
            x = (~v.value & 0xFFFFFFFF) if s.inv else v.value
            return (x, x)
        if isinstance(v, Special) and not s.inv:
            return specials.get(v.name, FULL)
        if s.inv:
            lo, hi = r(Src(v))
            return (0xFFFFFFFF - hi, 0xFFFFFFFF - lo)
        return rng.get(v, FULL)

    for b in prog.blocks:
        ops = b.ops
        for i, op in enumerate(ops):
            if op.kind != "alu":
                continue
            if op.dst[0] in rng and op.op != "MOV":
                lo, hi = rng[op.dst[0]]
                if lo == hi and not op.sets_flag:
                    ops[i] = MicroOp("alu", "MOV", op.dst, src(Imm(lo)), ptx_pc=op.ptx_pc)
                    changed = True
                    continue
            if op.sets_flag and i + 1 < len(ops) and ops[i + 1].cin == "flag" and op.op == "ADD":
                a, bb = r(op.a), r(op.b)
                ci = int(op.cin) if op.cin in ("0", "1") else 1
                if a[1] + bb[1] + ci <= 0xFFFFFFFF:            # never carries
                    op.sets_flag = False
                    ops[i + 1].cin = "0"
                    changed = True
    return changed


def _defs(prog: MicroProgram) -> dict:
    count = {}
    for b in prog.blocks:
        for op in b.ops:
            for d in op.writes():
                count[d] = count.get(d, 0) + 1
    return count


def _term_reads(b: Block) -> list:
    if b.term[0] == "branch" and isinstance(b.term[1].value, VReg):
        return [b.term[1].value]
    return []


_COMMUTATIVE = {"ADD", "AND", "OR", "XOR", "EQ", "MUL", "MULHU", "MULHS"}


def _swappable(op: MicroOp) -> bool:
    """May a and b trade places? (ADD is commutative whatever its carry-in.)"""
    return op.op in _COMMUTATIVE and (op.cin == "0" or op.op == "ADD")


def _before(out: list, op: MicroOp, fix: MicroOp):
    """Append `fix`, an op preparing an operand of `op`, to `out`; for a carry consumer, in front
    of its producer instead, so that the pair stays adjacent."""
    if op.cin == "flag" and out and out[-1].sets_flag and not set(fix.reads()) & set(out[-1].writes()):
        out.insert(len(out) - 1, fix)
    else:
        out.append(fix)


def _legalize_specials(prog: MicroProgram):
    """The machine's units read special values (tid, ctaid, ...) only as an ALU's first operand:
    swap commutative operands, else copy the special into a register first."""
    n = [prog.nregs]

    def fresh():
        n[0] += 1
        return VReg(n[0], "special")

    for b in prog.blocks:
        out = []
        for op in b.ops:
            if op.kind == "alu" and op.b is not None and isinstance(op.b.value, Special) and \
                    _swappable(op) and not isinstance(op.a.value, Special) and not op.b.inv:
                op.a, op.b = op.b, op.a
            fixes = {}

            def fix(s, where):
                if s is None or not isinstance(s.value, Special):
                    return s
                if op.kind == "alu" and where == "a" and not s.inv:
                    return s
                if s.value not in fixes:
                    t = fresh()
                    _before(out, op, MicroOp("alu", "MOV", (t,), src(s.value), ptx_pc=op.ptx_pc))
                    fixes[s.value] = t
                return Src(fixes[s.value], s.inv)

            op.a = fix(op.a, "a")
            op.b = fix(op.b, "b")
            op.c = fix(op.c, "c")
            for k in ("addr", "data", "cmp", "bsrc", "csrc"):
                if op.extra.get(k):
                    op.extra[k] = tuple(fix(x, k) for x in op.extra[k])
            out.append(op)
        b.ops = out
        if b.term[0] == "branch" and isinstance(b.term[1].value, Special):
            t = fresh()
            b.ops.append(MicroOp("alu", "MOV", (t,), src(b.term[1].value)))
            b.term = ("branch", Src(t, b.term[1].inv)) + b.term[2:]
    prog.nregs = n[0]


def _legalize_inversions(prog: MicroProgram):
    """Only an ALU's second operand can be inverted for free: swap, or invert with XOR first."""
    n = [prog.nregs]

    def fresh():
        n[0] += 1
        return VReg(n[0], "inv")

    for b in prog.blocks:
        out = []
        for op in b.ops:
            def materialise(s):
                if s is None or not s.inv or isinstance(s.value, Imm):
                    return s
                t = fresh()
                _before(out, op, MicroOp("alu", "XOR", (t,), Src(s.value), Src(Imm(0), True), ptx_pc=op.ptx_pc))
                return src(t)
            if op.kind == "alu":
                if op.op == "MOV" and op.a.inv and not isinstance(op.a.value, Imm):
                    op = MicroOp("alu", "XOR", op.dst, Src(op.a.value), Src(Imm(0), True), ptx_pc=op.ptx_pc)
                elif op.a is not None and op.a.inv and not isinstance(op.a.value, Imm):
                    if _swappable(op) and op.b is not None and not op.b.inv:
                        op.a, op.b = op.b, op.a
                    else:
                        op.a = materialise(op.a)
                # an inverted SEL condition is materialised like any inverted operand: swapping a and b
                # instead would read ~c != 0 as c == 0, true only when c is 0 or all ones (`fuzz_inverted_divisor`)
                op.c = materialise(op.c)
            else:
                for k in ("addr", "data", "cmp", "bsrc", "csrc"):
                    if op.extra.get(k):
                        op.extra[k] = tuple(materialise(x) for x in op.extra[k])
                op.a = materialise(op.a)
            out.append(op)
        b.ops = out
        if b.term[0] == "branch" and b.term[1].inv and isinstance(b.term[1].value, VReg):
            # a branch on ~x != 0 is not the opposite branch on x (only for x in {0, ~0}): materialise
            t, r = b.term, fresh()
            b.ops.append(MicroOp("alu", "XOR", (r,), Src(t[1].value), Src(Imm(0), True)))
            b.term = ("branch", src(r)) + t[2:]
    prog.nregs = n[0]


def optimize(prog: MicroProgram, specials: dict | None = None) -> MicroProgram:
    """`specials`: known ranges of special values (e.g. {"tid.x": (0, 3)})."""
    specials = specials or {}
    for _ in range(12):
        changed = False
        for b in prog.blocks:
            for i, op in enumerate(b.ops):
                new = _strength(op)
                if new is not op:
                    b.ops[i] = new
                    changed = True
        changed |= _use_ranges(prog, specials)
        defs = _defs(prog)
        # global: single-definition MOVs of constants/specials/single-def registers
        env = {}
        for b in prog.blocks:
            for op in b.ops:
                if op.kind == "alu" and op.op == "MOV" and defs.get(op.dst[0]) == 1:
                    v = op.a.value
                    if isinstance(v, (Imm, Special)) or (isinstance(v, VReg) and defs.get(v, 0) == 1):
                        if isinstance(v, Imm) and op.a.inv:
                            env[op.dst[0]] = Src(Imm(~v.value & 0xFFFFFFFF))
                        else:
                            env[op.dst[0]] = op.a
        # resolve chains
        def resolve(s):
            seen = 0
            while s is not None and isinstance(s.value, VReg) and s.value in env and seen < 64:
                r = env[s.value]
                s = Src(r.value, r.inv ^ s.inv)
                seen += 1
            if s is not None and isinstance(s.value, Imm) and s.inv:
                s = Src(Imm(~s.value.value & 0xFFFFFFFF))
            return s
        for b in prog.blocks:
            for i, op in enumerate(b.ops):
                before = repr(op)
                _map_srcs(op, resolve)
                b.ops[i] = _fold(op)
                if repr(b.ops[i]) != before:
                    changed = True
            if b.term[0] == "branch":
                t = b.term
                ns = resolve(t[1])
                if ns != t[1]:
                    b.term = ("branch", ns) + t[2:]
                    changed = True
                if isinstance(b.term[1].value, Imm):
                    v = b.term[1].value.value
                    v = (~v & 0xFFFFFFFF) if b.term[1].inv else v
                    b.term = ("jump", b.term[3] if bool(v) == b.term[2] else b.term[4])
                    changed = True
        # local copy propagation of multiply-defined registers within a block
        for b in prog.blocks:
            local = {}
            for op in b.ops:
                _map_srcs(op, lambda s: _subst(s, local))
                for d in op.writes():
                    local.pop(d, None)
                    for k in [k for k, v in local.items() if v.value == d]:
                        local.pop(k)
                if op.kind == "alu" and op.op == "MOV" and op.dst[0] is not None and op.a.value != op.dst[0]:
                    local[op.dst[0]] = op.a
            if b.term[0] == "branch":
                t = b.term
                ns = _subst(t[1], local)
                if ns != t[1]:
                    b.term = ("branch", ns) + t[2:]
        # dead code: pure ops whose results are never read
        used = set()
        for b in prog.blocks:
            for op in b.ops:
                used |= set(op.reads())
            used |= set(_term_reads(b))
        for b in prog.blocks:
            keep = []
            for op in b.ops:
                dead = op.kind in ("alu", "fpu") and all(d not in used for d in op.writes())
                if dead and not op.sets_flag:
                    changed = True
                    continue
                keep.append(op)
            b.ops = keep
        if not changed:
            break
    _legalize_specials(prog)
    _legalize_inversions(prog)
    return prog
