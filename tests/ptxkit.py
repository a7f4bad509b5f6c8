"""Helpers for tests: build tiny PTX kernels around one instruction and run them on the interpreter."""
from __future__ import annotations

import numpy as np

from qwengpu import run

HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"

_REG = {"pred": "%p", "b16": "%rs", "u16": "%rs", "s16": "%rs", "f16": "%h",
        "b32": "%r", "u32": "%r", "s32": "%r", "f32": "%f",
        "b64": "%rd", "u64": "%rd", "s64": "%rd", "f64": "%fd"}
_NP = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_BITS = {"b16": 16, "u16": 16, "s16": 16, "f16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32,
         "b64": 64, "u64": 64, "s64": 64, "f64": 64}


def kernel(body: str, params: str = ".param .u64 out", regs: str = "", name: str = "k") -> str:
    """A PTX module with one kernel; `regs` adds declarations (a standard set is always there)."""
    std = (".reg .pred %p<8>;\n.reg .b16 %rs<8>;\n.reg .b32 %r<16>;\n.reg .f32 %f<16>;\n"
           ".reg .b64 %rd<16>;\n.reg .f64 %fd<8>;\n")
    return f"{HEADER}.visible .entry {name}({params})\n{{\n{std}{regs}\n{body}\n}}\n"


def unary_or_binary(instr: str, dst_type: str, src_types: list[str], inputs: list[list[int]]):
    """Run `instr d, a[, b[, c]]` on 4 lanes; inputs are raw bit patterns per source per lane.

    Each source is loaded from its own buffer (as raw bits of its type); the result is stored as
    raw bits of `dst_type` (predicates as 0/1 u32)."""
    n = len(src_types)
    params = ", ".join([f".param .u64 in{k}" for k in range(n)] + [".param .u64 out"])
    lines = ["mov.u32 %r10, %tid.x;", "cvt.u64.u32 %rd10, %r10;"]
    srcs = []
    for k, t in enumerate(src_types):
        bits = _BITS.get(t, 32)
        size = bits // 8
        lines += [f"ld.param.u64 %rd{k}, [in{k}];", f"mad.lo.u64 %rd{k}, %rd10, {size}, %rd{k};"]
        if t == "pred":
            lines += [f"ld.global.u32 %r{11 + k}, [%rd{k}];", f"setp.ne.u32 %p{k + 1}, %r{11 + k}, 0;"]
            srcs.append(f"%p{k + 1}")
        else:
            reg = f"{_REG[t]}{k + 1}"
            lines.append(f"ld.global.b{bits} {reg}, [%rd{k}];")
            srcs.append(reg)
    dbits = 32 if dst_type == "pred" else _BITS[dst_type]
    lines += ["ld.param.u64 %rd8, [out];", f"mad.lo.u64 %rd8, %rd10, {dbits // 8}, %rd8;"]
    dreg = "%p7" if dst_type == "pred" else f"{_REG[dst_type]}7"
    lines.append(f"{instr} {dreg}, {', '.join(srcs)};")
    if dst_type == "pred":
        lines += ["selp.u32 %r9, 1, 0, %p7;", "st.global.u32 [%rd8], %r9;"]
    else:
        lines.append(f"st.global.b{dbits} [%rd8], {dreg};")
    lines.append("ret;")
    ptx = kernel("\n".join(lines), params=params)
    args = []
    for t, vals in zip(src_types, inputs):
        bits = 32 if t == "pred" else _BITS[t]
        args.append({"buffer": f"uint{bits}", "data": [int(v) & ((1 << bits) - 1) for v in vals]})
    args.append({"buffer": f"uint{dbits}", "size": 4})
    res = run(ptx, {"grid": 1, "block": 4, "args": args})
    return [int(x) for x in res.buffers[-1]]


def f32_bits(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def bits_f32(b: int) -> float:
    return float(np.array([b], dtype=np.uint32).view(np.float32)[0])


def atomic_kernel(instr: str, t: str, naddr: int, guard: bool, cas: bool = False) -> str:
    """Every thread does `instr` on word gid % naddr of buffer `mem` (8-byte slots) with its own
    operand(s) from `vals` (and `cmps`), optionally only the odd lanes; the old values go to
    `out` (0 where a lane did not run; none for red)."""
    w = int(t[1:])
    r = {32: "%r", 64: "%rd"}[w]
    red = instr.startswith("red")
    ops = [f"{r}3"] + ([f"{r}4"] if cas else [])
    body = [".reg .pred %p<4>;", ".reg .b32 %r<16>;", ".reg .b64 %rd<24>;",
            "mov.u32 %r10, %tid.x;", "mov.u32 %r11, %ctaid.x;", "mov.u32 %r12, %ntid.x;",
            "mad.lo.s32 %r10, %r11, %r12, %r10;", "cvt.u64.u32 %rd10, %r10;",
            "and.b32 %r13, %r10, 1;", "setp.eq.u32 %p1, %r13, 1;",
            f"rem.u32 %r14, %r10, {naddr};", "cvt.u64.u32 %rd11, %r14;",
            "ld.param.u64 %rd12, [mem];", "mad.lo.u64 %rd12, %rd11, 8, %rd12;",
            "ld.param.u64 %rd13, [vals];", f"mad.lo.u64 %rd13, %rd10, {w // 8}, %rd13;",
            f"ld.global.b{w} {r}3, [%rd13];",
            "ld.param.u64 %rd14, [cmps];", f"mad.lo.u64 %rd14, %rd10, {w // 8}, %rd14;",
            f"ld.global.b{w} {r}4, [%rd14];", f"mov.b{w} {r}5, 0;"]
    g = "@%p1 " if guard else ""
    if red:
        body.append(f"{g}{instr} [%rd12], {', '.join(ops)};")
    else:
        body.append(f"{g}{instr} {r}5, [%rd12], {', '.join(ops)};")
    body += ["ld.param.u64 %rd20, [out];", f"mad.lo.u64 %rd20, %rd10, {w // 8}, %rd20;",
             f"st.global.b{w} [%rd20], {r}5;", "ret;"]
    return (f"{HEADER}.visible .entry k(.param .u64 mem, .param .u64 vals, .param .u64 cmps, .param .u64 out)\n"
            "{\n" + "\n".join(body) + "\n}\n")


def check_atomic(instr: str, t: str, init: list, vals: list, cmps: list, guard: bool = False,
                 blocks: int = 2):
    """The atomic on the interpreter and the simulator: the memory and the old values must agree."""
    w = int(t[1:])
    n = len(vals)
    slots = [x for v in init for x in ((v & 0xFFFFFFFF, v >> 32) if w == 64 else (v, 0))]
    spec = {"grid": blocks, "block": n // blocks,
            "args": [{"buffer": "uint32", "data": slots}, {"buffer": f"uint{w}", "data": vals},
                     {"buffer": f"uint{w}", "data": cmps}, {"buffer": f"uint{w}", "size": n}]}
    ptx = atomic_kernel(instr, t, len(init), guard, cas=".cas" in instr)
    want, got = run(ptx, spec).buffers, run(ptx, spec, engine="sim").buffers
    for k in (0, 3):
        assert np.array_equal(want[k], got[k]), f"{instr}: buffer {k}: sim {got[k]} interp {want[k]}"
