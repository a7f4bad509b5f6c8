"""The interpreter's handlers of memory instructions: cvta, ld/ldu, st and atom/red, on the windows
and memories of `qwengpu.semantics.launch_model` (faults as `MemoryFault`)."""
from __future__ import annotations

from qwengpu.ptx.ir import Sym, Vec
from qwengpu.semantics import integers as alu
from qwengpu.semantics.faults import ExecutionFault, MemoryFault
from qwengpu.semantics.launch_model import GENERIC_WINDOWS, LANES, WINDOW_SIZE

from .lanes import floats, is_signed, lanes_of, to_numpy, type_bits
from .memory import check_alignment


def h_cvta(it, warp, frame, ins, info, ex):
    d, a = ins.operands
    v = it.read(warp, frame, a, info.type)
    sp = info.space
    out = []
    for i in range(LANES):
        x = v[i]
        if sp == "global":
            out.append(x)
        elif "to" in info.flags:
            base = GENERIC_WINDOWS.get(sp)
            if base is None:
                raise ExecutionFault(f"cvta.to.{sp} is not supported")
            if ex >> i & 1 and not base <= x < base + WINDOW_SIZE:
                raise MemoryFault(f"cvta.to.{sp} of 0x{x:x}, which is not a {sp} address",
                                  address=x).locate(lane=i)
            out.append(x - base if base <= x < base + WINDOW_SIZE else 0)
        else:
            base = GENERIC_WINDOWS.get(sp)
            if base is None:
                raise ExecutionFault(f"cvta.{sp} is not supported")
            out.append(x + base)
    it.write_reg(frame, d, out, ex, info.type)


def h_ld(it, warp, frame, ins, info, ex):
    d, a = ins.operands
    t = info.type
    size = max(1, type_bits(t) // 8)
    regs = list(d.items) if isinstance(d, Vec) else [d]
    if len(regs) != info.vec:
        raise ExecutionFault(f"{ins.opcode} needs {info.vec} destination registers")
    values = [[0] * LANES for _ in regs]
    if info.space == "param":
        if not isinstance(a.base, Sym):
            raise ExecutionFault("ld.param through a register address is not supported")
        store = it.param_var(frame, a.base.name, a.offset + size * info.vec)
        for i in lanes_of(ex):
            for k in range(len(regs)):
                off = a.offset + k * size
                if off + size > len(store[i]):
                    raise MemoryFault(f"ld.param beyond parameter {a.base.name} (offset {off})",
                                      address=off).locate(lane=i)
                values[k][i] = int.from_bytes(store[i][off:off + size], "little")
    else:
        addrs = it.addresses(frame, a, ex)
        for i in lanes_of(ex):
            check_alignment(addrs[i], size * info.vec, info.space or "generic") if info.vec > 1 else None
            for k in range(len(regs)):
                try:
                    values[k][i] = it.mem_read(info.space, addrs[i] + k * size, size, i)
                except MemoryFault as e:
                    raise e.locate(lane=i)
    for r, v in zip(regs, values):
        if r is not None:
            it.write_reg(frame, r, v, ex, t)


def h_st(it, warp, frame, ins, info, ex):
    a, s = ins.operands
    t = info.type
    size = max(1, type_bits(t) // 8)
    srcs = list(s.items) if isinstance(s, Vec) else [s]
    values = [it.read(warp, frame, o, t) for o in srcs]
    if info.space == "param":
        if not isinstance(a.base, Sym):
            raise ExecutionFault("st.param through a register address is not supported")
        store = it.param_var(frame, a.base.name, a.offset + size * len(srcs))
        for i in lanes_of(ex):
            for k in range(len(srcs)):
                off = a.offset + k * size
                if off + size > len(store[i]):
                    store[i].extend(bytes(off + size - len(store[i])))
                store[i][off:off + size] = values[k][i].to_bytes(size, "little")
        return
    addrs = it.addresses(frame, a, ex)
    for i in lanes_of(ex):
        if info.vec > 1:
            check_alignment(addrs[i], size * info.vec, info.space or "generic")
        for k in range(len(srcs)):
            try:
                it.mem_write(info.space, addrs[i] + k * size, size, values[k][i], i)
            except MemoryFault as e:
                raise e.locate(lane=i)


def h_atom(it, warp, frame, ins, info, ex):
    ops = ins.operands
    is_red = ins.op == "red"
    a = ops[0] if is_red else ops[1]
    srcs = ops[1:] if is_red else ops[2:]
    t = info.type
    w = type_bits(t)
    size = w // 8
    b = it.read(warp, frame, srcs[0], t)
    c = it.read(warp, frame, srcs[1], t) if len(srcs) > 1 else None
    addrs = it.addresses(frame, a, ex)
    out = [0] * LANES
    F = None
    for i in lanes_of(ex):          # lanes in order: the machine's defined atomic order
        try:
            old = it.mem_read(info.space, addrs[i], size, i)
        except MemoryFault as e:
            if e.kind == "read":           # an atomic's access faults as an atomic (the machine's kind)
                e.kind = "atomic"
                e.reason = e.reason.replace(" read ", " atomic ", 1)
            raise e.locate(lane=i)
        o = info.boolop
        s = is_signed(t)
        if o == "add":
            if t in ("f32", "f64"):
                F = F or floats()
                new = int(F.fadd(to_numpy([old]), to_numpy([b[i]]), width=w, ftz=(t == "f32"))[0])
            else:
                new = alu.wrap(old + b[i], w)
        elif o == "min":
            new = alu.minimum(old, b[i], w, s)
        elif o == "max":
            new = alu.maximum(old, b[i], w, s)
        elif o == "inc":
            new = 0 if old >= b[i] else old + 1
        elif o == "dec":
            new = b[i] if (old == 0 or old > b[i]) else old - 1
        elif o == "and":
            new = old & b[i]
        elif o == "or":
            new = old | b[i]
        elif o == "xor":
            new = old ^ b[i]
        elif o == "exch":
            new = b[i]
        elif o == "cas":
            new = c[i] if old == b[i] else old
        else:
            raise ExecutionFault(f"no semantics for {ins.opcode}")
        it.mem_write(info.space, addrs[i], size, new, i)
        out[i] = old
    if not is_red:
        it.write_reg(frame, ops[0], out, ex, t)
