"""The interpreter's handlers of the instructions that compute registers from registers: integer,
float and approximate arithmetic, bit operations, compare and select, moves and conversions, and the
few with no result (membar, fence, nanosleep, trap). A handler takes (interpreter, warp, frame,
instruction, its decoded `OpInfo`, the executing lanes' mask); the semantics are
`qwengpu.semantics`' (`integers`, `floats`, `approx`).
"""
from __future__ import annotations

import numpy as np

from qwengpu.ptx.ir import Label, Pair, Vec
from qwengpu.semantics import integers as alu
from qwengpu.semantics.faults import ExecutionFault
from qwengpu.semantics.launch_model import LANES

from .lanes import approx, floats, from_numpy, is_signed, lanes_of, to_numpy, type_bits


def h_arith(it, warp, frame, ins, info, ex):
    op = ins.op
    t = info.type
    if t in ("f32", "f64", "f16", "f16x2"):
        return h_float(it, warp, frame, ins, info, ex)
    w = type_bits(t)
    s = is_signed(t)
    srcs = [it.read(warp, frame, o, t) for o in ins.operands[1:]]
    cc = frame.regs.get("%%cc", [0] * LANES)
    out = [0] * LANES
    newcc = list(cc)
    for i in lanes_of(ex):
        a = srcs[0][i]
        b = srcs[1][i] if len(srcs) > 1 else 0
        if op == "add":
            r = alu.add(a, b, w, s, info.sat)
            if "cc" in info.flags:
                newcc[i] = (a + b) >> w
        elif op == "addc":
            r = alu.wrap(a + b + cc[i], w)
            if "cc" in info.flags:
                newcc[i] = (a + b + cc[i]) >> w
        elif op == "sub":
            r = alu.sub(a, b, w, s, info.sat)
            if "cc" in info.flags:
                newcc[i] = 1 if a < b else 0
        elif op == "subc":
            r = alu.wrap(a - b - cc[i], w)
            if "cc" in info.flags:
                newcc[i] = 1 if a < b + cc[i] else 0
        elif op == "mul":
            r = alu.mul(a, b, w, s, info.mode)
        elif op == "mad":
            p = alu.mul(a, b, w, s, info.mode)
            ow = 2 * w if info.mode == "wide" else w
            c = srcs[2][i] if info.mode != "wide" else it.read(warp, frame, ins.operands[3], _wide(t))[i]
            if info.sat:     # mad.hi.sat.s32
                total = alu.sx(p, w) + alu.sx(c, w)
                r = alu.wrap(max(-(1 << 31), min((1 << 31) - 1, total)), w)
            else:
                r = alu.wrap(p + c, ow)
            if "cc" in info.flags:
                newcc[i] = (p + c) >> ow
        elif op == "madc":
            p = alu.mul(a, b, w, s, info.mode or "lo")
            r = alu.wrap(p + srcs[2][i] + cc[i], w)
            if "cc" in info.flags:
                newcc[i] = (p + srcs[2][i] + cc[i]) >> w
        elif op == "mul24":
            r = alu.mul24(a, b, s, info.mode)
        elif op == "mad24":
            r = alu.wrap(alu.mul24(a, b, s, info.mode) + srcs[2][i], 32)
        elif op == "div":
            r = alu.div(a, b, w, s)
        elif op == "rem":
            r = alu.rem(a, b, w, s)
        elif op == "abs":
            r = alu.absolute(a, w)
        elif op == "neg":
            r = alu.neg(a, w)
        elif op == "min":
            r = alu.minimum(a, b, w, s)
        elif op == "max":
            r = alu.maximum(a, b, w, s)
        elif op == "sad":
            r = alu.sad(a, b, srcs[2][i], w, s)
        else:
            raise ExecutionFault(f"no semantics for {ins.opcode}")
        out[i] = r
    if "cc" in info.flags:
        frame.regs["%%cc"] = [newcc[i] if ex >> i & 1 else cc[i] for i in range(LANES)]
    dt = _wide(t) if info.mode == "wide" else t
    it.write_reg(frame, ins.operands[0], out, ex, dt)


def _wide(t: str) -> str:
    return t[0] + str(2 * int(t[1:]))


def h_float(it, warp, frame, ins, info, ex):
    t = info.type
    srcs = [to_numpy(it.read(warp, frame, o, t)) for o in ins.operands[1:]]
    if t == "f16x2":        # each half on its own: the low halves, then the high ones
        lo = _float_op(ins, info, "f16", [x & 0xFFFF for x in srcs])
        hi = _float_op(ins, info, "f16", [(x >> 16) & 0xFFFF for x in srcs])
        out = [int(a) | int(b) << 16 for a, b in zip(np.asarray(lo).tolist(), np.asarray(hi).tolist())]
    else:
        out = from_numpy(_float_op(ins, info, t, srcs))
    it.write_reg(frame, ins.operands[0], out, ex, t)


def _float_op(ins, info, t: str, srcs: list):
    """The float operation `ins` on type `t` over each lane's operands (`srcs`: one array each)."""
    F = floats()
    w = type_bits(t)
    op = ins.op
    kw = dict(width=w, ftz=info.ftz)
    rnd = info.rnd or "rn"
    if op == "add":
        r = F.fadd(srcs[0], srcs[1], rnd=rnd, sat=info.sat, **kw)
    elif op == "sub":
        r = F.fsub(srcs[0], srcs[1], rnd=rnd, sat=info.sat, **kw)
    elif op == "mul":
        r = F.fmul(srcs[0], srcs[1], rnd=rnd, sat=info.sat, **kw)
    elif op in ("fma", "mad"):
        r = F.ffma(srcs[0], srcs[1], srcs[2], rnd=rnd, sat=info.sat, **kw)
    elif op == "div":
        r = F.fdiv(srcs[0], srcs[1], rnd=rnd, **kw)
    elif op == "rcp" and info.mode == "approx64":
        r = approx().rcp_f64(srcs[0])
    elif op == "rcp":
        r = F.frcp(srcs[0], rnd=rnd, **kw)
    elif op == "sqrt":
        r = F.fsqrt(srcs[0], rnd=rnd, **kw)
    elif op == "min":
        r = F.fmin(srcs[0], srcs[1], nan="NaN" in info.flags, **kw)
    elif op == "max":
        r = F.fmax(srcs[0], srcs[1], nan="NaN" in info.flags, **kw)
    elif op == "abs":
        r = F.fabs(srcs[0], **kw)
    elif op == "neg":
        r = F.fneg(srcs[0], **kw)
    else:
        raise ExecutionFault(f"no semantics for {ins.opcode}")
    return r


def h_approx(it, warp, frame, ins, info, ex):
    """ex2, lg2, sin, cos, tanh, rsqrt .approx: qwenGPU's definitions (`approx`)."""
    t = info.type
    a = to_numpy(it.read(warp, frame, ins.operands[1], t))
    r = approx().rsqrt_f64(a) if t == "f64" else approx().approximate(ins.op, a, ftz=info.ftz)
    it.write_reg(frame, ins.operands[0], from_numpy(r), ex, t)


def h_bits(it, warp, frame, ins, info, ex):
    op = ins.op
    t = info.type
    w = type_bits(t)
    ops = ins.operands
    out = [0] * LANES
    dt = t
    if op in ("and", "or", "xor", "not", "cnot"):
        srcs = [it.read(warp, frame, o, t) for o in ops[1:]]
        m = alu.mask(w)
        for i in lanes_of(ex):
            a = srcs[0][i]
            if op == "and":
                r = a & srcs[1][i]
            elif op == "or":
                r = a | srcs[1][i]
            elif op == "xor":
                r = a ^ srcs[1][i]
            elif op == "not":
                r = ~a & m
            else:
                r = 1 if a == 0 else 0
            out[i] = r
    elif op in ("shl", "shr"):
        a = it.read(warp, frame, ops[1], t)
        n = it.read(warp, frame, ops[2], "u32")
        for i in lanes_of(ex):
            out[i] = alu.shl(a[i], n[i], w) if op == "shl" else alu.shr(a[i], n[i], w, is_signed(t))
    elif op == "shf":
        a = it.read(warp, frame, ops[1], "b32")
        b = it.read(warp, frame, ops[2], "b32")
        n = it.read(warp, frame, ops[3], "u32")
        for i in lanes_of(ex):
            out[i] = alu.shf(a[i], b[i], n[i], info.mode == "l", "clamp" in info.flags)
    elif op in ("popc", "clz", "brev", "bfind"):
        a = it.read(warp, frame, ops[1], t)
        for i in lanes_of(ex):
            if op == "popc":
                out[i] = alu.popc(a[i], w)
            elif op == "clz":
                out[i] = alu.clz(a[i], w)
            elif op == "brev":
                out[i] = alu.brev(a[i], w)
            else:
                out[i] = alu.bfind(a[i], w, is_signed(t), "shiftamt" in info.flags)
        if op != "brev":
            dt = "u32"
    elif op == "bfe":
        a = it.read(warp, frame, ops[1], t)
        p = it.read(warp, frame, ops[2], "u32")
        ln = it.read(warp, frame, ops[3], "u32")
        for i in lanes_of(ex):
            out[i] = alu.bfe(a[i], p[i], ln[i], w, is_signed(t))
    elif op == "bfi":
        a = it.read(warp, frame, ops[1], t)
        b = it.read(warp, frame, ops[2], t)
        p = it.read(warp, frame, ops[3], "u32")
        ln = it.read(warp, frame, ops[4], "u32")
        for i in lanes_of(ex):
            out[i] = alu.bfi(a[i], b[i], p[i], ln[i], w)
    elif op == "prmt":
        a, b, c = (it.read(warp, frame, o, "b32") for o in ops[1:4])
        for i in lanes_of(ex):
            out[i] = alu.prmt(a[i], b[i], c[i], info.mode)
    elif op == "lop3":
        a, b, c, imm = (it.read(warp, frame, o, "b32") for o in ops[1:5])
        for i in lanes_of(ex):
            out[i] = alu.lop3(a[i], b[i], c[i], imm[i] & 0xFF)
    elif op in ("dp4a", "dp2a"):
        a, b, c = (it.read(warp, frame, o, "b32") for o in ops[1:4])
        for i in lanes_of(ex):
            if op == "dp4a":
                out[i] = alu.dp4a(a[i], b[i], c[i], info.type == "s32", info.src_type == "s32")
            else:
                out[i] = alu.dp2a(a[i], b[i], c[i], info.type == "s32", info.src_type == "s32",
                                  info.mode == "hi")
        dt = "u32" if info.type == "u32" and info.src_type == "u32" else "s32"
    it.write_reg(frame, ops[0], out, ex, dt)


def _compare(it, warp, frame, info, a_op, b_op, t) -> list[int]:
    a = it.read(warp, frame, a_op, t)
    b = it.read(warp, frame, b_op, t)
    if t in ("f32", "f64", "f16"):
        F = floats()
        r = F.fcompare(info.cmp, to_numpy(a), to_numpy(b), width=type_bits(t), ftz=info.ftz)
        return [int(x) for x in np.asarray(r).tolist()]
    w = type_bits(t)
    return [int(alu.compare(info.cmp, a[i], b[i], w, is_signed(t))) for i in range(LANES)]


def _combine(boolop, t: list[int], c: list[int]) -> list[int]:
    if boolop == "and":
        return [x & y for x, y in zip(t, c)]
    if boolop == "or":
        return [x | y for x, y in zip(t, c)]
    return [x ^ y for x, y in zip(t, c)]


def h_setp(it, warp, frame, ins, info, ex):
    ops = ins.operands
    if ins.op == "setp":
        r = _compare(it, warp, frame, info, ops[1], ops[2], info.type)
        nr = [1 - x for x in r]
        if info.boolop:
            c = [x & 1 for x in it.read(warp, frame, ops[3], "pred")]
            r, nr = _combine(info.boolop, r, c), _combine(info.boolop, nr, c)
        dst = ops[0]
        if isinstance(dst, Pair):
            it.write_reg(frame, dst.first, r, ex, "pred")
            it.write_reg(frame, dst.second, nr, ex, "pred")
        else:
            it.write_reg(frame, dst, r, ex, "pred")
        return
    # set.cmp.dtype.stype
    r = _compare(it, warp, frame, info, ops[1], ops[2], info.src_type)
    if info.boolop:
        c = [x & 1 for x in it.read(warp, frame, ops[3], "pred")]
        r = _combine(info.boolop, r, c)
    one = 0x3F800000 if info.type == "f32" else 0xFFFFFFFF
    it.write_reg(frame, ops[0], [one if x else 0 for x in r], ex, info.type)


def h_selp(it, warp, frame, ins, info, ex):
    ops = ins.operands
    a = it.read(warp, frame, ops[1], info.type)
    b = it.read(warp, frame, ops[2], info.type)
    if ins.op == "selp":
        c = it.read(warp, frame, ops[3], "pred")
        out = [a[i] if c[i] & 1 else b[i] for i in range(LANES)]
    else:
        c = it.read(warp, frame, ops[3], info.src_type)
        if info.src_type == "s32":
            sel = [alu.sx(x, 32) >= 0 for x in c]
        else:
            F = floats()
            zero = to_numpy([0] * LANES)
            sel = [bool(x) for x in np.asarray(F.fcompare("ge", to_numpy(c), zero, width=32, ftz=info.ftz)).tolist()]
        out = [a[i] if sel[i] else b[i] for i in range(LANES)]
    it.write_reg(frame, ops[0], out, ex, info.type)


def h_mov(it, warp, frame, ins, info, ex):
    d, a = ins.operands
    t = info.type
    if isinstance(d, Vec):        # unpack: mov.b64 {lo, hi}, x
        n = len(d.items)
        ew = type_bits(t) // n
        v = it.read(warp, frame, a, t)
        for k, r in enumerate(d.items):
            if r is not None:
                it.write_reg(frame, r, [(x >> (ew * k)) & alu.mask(ew) for x in v], ex, f"b{ew}")
        return
    if isinstance(a, Vec):        # pack: mov.b64 x, {lo, hi}
        n = len(a.items)
        ew = type_bits(t) // n
        parts = [it.read(warp, frame, r, f"b{ew}") if r is not None else [0] * LANES for r in a.items]
        v = [sum(parts[k][i] << (ew * k) for k in range(n)) for i in range(LANES)]
        it.write_reg(frame, d, v, ex, t)
        return
    if isinstance(a, Label):
        raise ExecutionFault("taking the address of a function is not supported")
    it.write_reg(frame, d, it.read(warp, frame, a, t), ex, t)


def h_cvt(it, warp, frame, ins, info, ex):
    d, a = ins.operands
    dt, st = info.type, info.src_type
    v = it.read(warp, frame, a, st)
    if dt[0] in "usb" and st[0] in "usb":
        sw, dw = type_bits(st), type_bits(dt)
        out = []
        for x in v:
            val = alu.sx(x, sw) if is_signed(st) else x
            if info.sat:
                lo, hi = (-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if is_signed(dt) else (0, (1 << dw) - 1)
                val = max(lo, min(hi, val))
            out.append(alu.wrap(val, dw))
        it.write_reg(frame, d, out, ex, dt)
        return
    F = floats()
    r = F.cvt(to_numpy(v), dt, st, rnd=info.rnd, sat=info.sat, ftz=info.ftz)
    it.write_reg(frame, d, from_numpy(r), ex, dt)


def h_misc(it, warp, frame, ins, info, ex):
    op = ins.op
    if op == "activemask":
        it.write_reg(frame, ins.operands[0], [ex] * LANES, ex, "b32")
    elif op in ("membar", "fence", "nanosleep"):
        return
    elif op == "trap":
        raise ExecutionFault("trap executed", lane=lanes_of(ex)[0], kind="trap")
    elif op == "brkpt":
        raise ExecutionFault("brkpt executed", lane=lanes_of(ex)[0], kind="trap")
    elif op == "copysign":
        F = floats()
        a = to_numpy(it.read(warp, frame, ins.operands[1], info.type))
        b = to_numpy(it.read(warp, frame, ins.operands[2], info.type))
        it.write_reg(frame, ins.operands[0], from_numpy(F.fcopysign(a, b, width=type_bits(info.type))), ex, info.type)
    elif op == "testp":
        F = floats()
        a = to_numpy(it.read(warp, frame, ins.operands[1], info.type))
        r = F.ftestp(info.mode, a, width=type_bits(info.type))
        it.write_reg(frame, ins.operands[0], [int(x) for x in np.asarray(r).tolist()], ex, "pred")
    else:
        raise ExecutionFault(f"no semantics for {ins.opcode}")
