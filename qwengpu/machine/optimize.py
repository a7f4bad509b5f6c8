"""Micro-op clean-up before packing: constant and copy propagation, constant folding, dead code.

Launch constants (parameters, buffer addresses, block sizes) make much of a kernel's PTX constant
work; folding it here is what keeps bundles short and carries few.
"""
from __future__ import annotations

from .isa import ALU_OPS, Imm, MicroOp, Special, Src, VReg, alu_eval, src
from .lower import Block, MicroProgram

_PURE = set(ALU_OPS)


def _subst(s: Src | None, env: dict) -> Src | None:
    if s is None or not isinstance(s.value, VReg):
        return s
    r = env.get(s.value)
    if r is None:
        return s
    return Src(r.value, r.inv ^ s.inv)


def _map_srcs(op: MicroOp, f):
    op.a, op.b, op.c, op.guard = f(op.a), f(op.b), f(op.c), f(op.guard)
    for k in ("addr", "data", "cmp", "bsrc", "csrc"):
        if op.extra.get(k):
            op.extra[k] = tuple(f(x) for x in op.extra[k])


def _fold(op: MicroOp) -> MicroOp:
    """An ALU op whose sources are all immediates becomes a MOV of the result."""
    if op.kind != "alu" or op.op == "MOV" or op.cin == "flag":
        return op
    vals = []
    for s in (op.a, op.b, op.c):
        if s is None:
            vals.append(0)
        elif isinstance(s.value, Imm):
            vals.append((~s.value.value if s.inv else s.value.value) & 0xFFFFFFFF)
        else:
            return op
    cin = int(op.cin) if op.cin in ("0", "1") else 0
    r, flag = alu_eval(op.op, vals[0], vals[1], vals[2], cin)
    if op.sets_flag:
        return op                  # the flag is still needed by the next op
    return MicroOp("alu", "MOV", op.dst, src(Imm(r)), ptx_pc=op.ptx_pc)


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


def optimize(prog: MicroProgram) -> MicroProgram:
    for _ in range(8):
        changed = False
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
                dead = op.kind == "alu" and all(d not in used for d in op.writes())
                if dead and not op.sets_flag:
                    changed = True
                    continue
                keep.append(op)
            b.ops = keep
        if not changed:
            break
    return prog
