"""Random PTX programs for differential tests (hypothesis strategies).

A program works on 8 data registers per lane (%r1..%r8, loaded from the lane's 8 input words, stored
at the end): straight-line integer operations, if/else on a lane-dependent predicate (divergence and
reconvergence) and loops with a data-dependent trip count of 0-3 (nested up to depth 2).
"""
from __future__ import annotations

from hypothesis import strategies as st
from ptxkit import HEADER

DATA = 8
BINARY = ["add.u32", "sub.u32", "mul.lo.u32", "and.b32", "or.b32", "xor.b32", "min.u32", "max.s32",
          "mul.hi.u32", "mul.hi.s32", "min.s32", "max.u32"]
SHIFTS = ["shl.b32", "shr.u32", "shr.s32"]
COMPARES = ["eq", "ne", "lt", "le", "gt", "ge"]

def registers(data: int = DATA):
    return st.integers(1, data).map(lambda i: f"%r{i}")


reg = registers()
imm32 = st.one_of(st.integers(0, 9), st.integers(0, 2**32 - 1)).map(str)


@st.composite
def operation(draw, reg=reg) -> list[str]:
    kind = draw(st.sampled_from(["binary", "binary", "binary", "shift", "select", "mad"]))
    d, a = draw(reg), draw(reg)
    if kind == "binary":
        return [f"{draw(st.sampled_from(BINARY))} {d}, {a}, {draw(st.one_of(reg, imm32))};"]
    if kind == "shift":
        return [f"{draw(st.sampled_from(SHIFTS))} {d}, {a}, {draw(st.one_of(reg, st.integers(0, 40).map(str)))};"]
    if kind == "mad":
        return [f"mad.lo.u32 {d}, {a}, {draw(reg)}, {draw(st.one_of(reg, imm32))};"]
    cmp, t = draw(st.sampled_from(COMPARES)), draw(st.sampled_from(["u32", "s32"]))
    return [f"setp.{cmp}.{t} %p3, {a}, {draw(reg)};", f"selp.b32 {d}, {draw(reg)}, {draw(reg)}, %p3;"]


class _Labels:
    def __init__(self):
        self.n = 0

    def new(self) -> int:
        self.n += 1
        return self.n


def _block(draw, labels: _Labels, depth: int, size: int, data: int = DATA) -> list[str]:
    reg = registers(data)
    out = []
    for _ in range(draw(st.integers(1, size))):
        kind = draw(st.sampled_from(["op", "op", "op", "if", "loop"] if depth < 2 else ["op"]))
        if kind == "op":
            out += draw(operation(reg))
        elif kind == "if":
            n = labels.new()
            cmp, t = draw(st.sampled_from(COMPARES)), draw(st.sampled_from(["u32", "s32"]))
            out += [f"setp.{cmp}.{t} %p1, {draw(reg)}, {draw(st.one_of(reg, imm32))};", f"@%p1 bra ELSE{n};"]
            out += _block(draw, labels, depth + 1, 3, data)
            if draw(st.booleans()):
                out += [f"bra.uni END{n};", f"ELSE{n}:"] + _block(draw, labels, depth + 1, 3, data) + [f"END{n}:"]
            else:
                out += [f"ELSE{n}:"]
        else:                                      # 0-3 iterations, the counter out of the data registers' way
            n, c = labels.new(), f"%r{data + 2 + depth}"
            out += [f"and.b32 {c}, {draw(reg)}, 3;", f"LOOP{n}:", f"setp.eq.u32 %p2, {c}, 0;", f"@%p2 bra DONE{n};"]
            out += _block(draw, labels, depth + 1, 3, data)
            out += [f"sub.u32 {c}, {c}, 1;", f"bra.uni LOOP{n};", f"DONE{n}:"]
    return out


@st.composite
def programs(draw, size: int = 6, branches: bool = True, data: int = DATA):
    """(ptx, body lines): a kernel `k(in, out)` running a random body on every lane over `data`
    registers (all live from the first load to the last store)."""
    labels = _Labels()
    body = _block(draw, labels, 0 if branches else 2, size, data)
    lines = [".reg .pred %p<4>;", f".reg .b32 %r<{data + 8}>;", ".reg .b64 %rd<8>;", "mov.u32 %r0, %tid.x;",
             "cvt.u64.u32 %rd0, %r0;", "ld.param.u64 %rd1, [in];", f"mad.lo.u64 %rd1, %rd0, {4 * data}, %rd1;",
             "ld.param.u64 %rd2, [out];", f"mad.lo.u64 %rd2, %rd0, {4 * data}, %rd2;"]
    lines += [f"ld.global.u32 %r{i + 1}, [%rd1+{4 * i}];" for i in range(data)]
    lines += body
    lines += [f"st.global.u32 [%rd2+{4 * i}], %r{i + 1};" for i in range(data)] + ["ret;"]
    ptx = f"{HEADER}.visible .entry k(.param .u64 in, .param .u64 out)\n{{\n" + "\n".join(lines) + "\n}\n"
    return ptx, body


def launch(inputs: list[int], lanes: int = 4, data: int = DATA) -> dict:
    return {"grid": 1, "block": lanes, "args": [{"buffer": "uint32", "data": inputs},
                                                {"buffer": "uint32", "size": lanes * data}]}


def inputs_for(data: int = DATA, lanes: int = 4):
    """Input words for `lanes` lanes of a program over `data` registers."""
    return st.lists(st.one_of(st.integers(0, 9), st.integers(0, 2**32 - 1)), min_size=lanes * data,
                    max_size=lanes * data)


inputs = inputs_for()
