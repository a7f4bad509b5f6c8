"""The machine's lowering of integer PTX (`qwengpu.assembler.lower` with the routines of
`qwengpu.assembler.intcode`), checked end to end: small kernels run on the token simulator (`engine="sim"`: assemble,
optimise, pack, simulate) must write exactly what the reference interpreter writes. Also: the packer
respects the carry limit, and every suite kernel the machine accepts gives the oracle's results.

`pytest --soak N` multiplies the hypothesis example counts (tests/sizes.py).
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import sizes
from ptxkit import check_atomic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwengpu import load_program, run, suite
from qwengpu.assembler import AssemblerError, assemble
from qwengpu.assembler import intcode as ic
from qwengpu.assembler.emit import Recorder
from qwengpu.assembler.lower import Block, MicroProgram
from qwengpu.assembler.schedule import schedule
from qwengpu.semantics.faults import ExecutionFault
from qwengpu.machine.config import COMPACT, COMPACT_FPU, SIM
from qwengpu.machine.simulator import Simulator
from qwengpu.machine.uops import MicroOp, src
from qwengpu.verify import compare_buffers

#: tests that compile CUDA (CI has nvcc, so they run there)
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed on this machine")

SCALE = sizes.SOAK
HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"
REG = {8: "%rs", 16: "%rs", 32: "%r", 64: "%rd"}
GLOBAL_BYTES = 2048                       # the built-in machine's global memory


def examples(n: int):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def bits(t: str) -> int:
    return int(t[1:])


# ---------------------------------------------------------------------------------------------
# kernels around one instruction


def kernel(instr: str, dst: str, operands: list) -> str:
    """`instr d, <operands>` per thread: an operand is a type (a register loaded from its own
    buffer, indexed by the global thread id) or a string (an immediate, written as is); the
    result is stored to the last buffer."""
    loaded = [t for t in operands if not t.startswith("imm:")]
    params = ", ".join([f".param .u64 in{k}" for k in range(len(loaded))] + [".param .u64 out"])
    body = [".reg .b16 %rs<8>;", ".reg .b32 %r<16>;", ".reg .b64 %rd<24>;",
            "mov.u32 %r10, %tid.x;", "mov.u32 %r11, %ctaid.x;", "mov.u32 %r12, %ntid.x;",
            "mad.lo.s32 %r10, %r11, %r12, %r10;", "cvt.u64.u32 %rd10, %r10;"]
    names, k = [], 0
    for t in operands:
        if t.startswith("imm:"):
            names.append(t[4:])
            continue
        w = bits(t)
        body += [f"ld.param.u64 %rd{11 + k}, [in{k}];", f"mad.lo.u64 %rd{11 + k}, %rd10, {w // 8}, %rd{11 + k};",
                 f"ld.global.b{w} {REG[w]}{k + 1}, [%rd{11 + k}];"]
        names.append(f"{REG[w]}{k + 1}")
        k += 1
    dw = bits(dst)
    body += ["ld.param.u64 %rd20, [out];", f"mad.lo.u64 %rd20, %rd10, {dw // 8}, %rd20;",
             f"{instr} {REG[dw]}7, {', '.join(names)};", f"st.global.b{dw} [%rd20], {REG[dw]}7;", "ret;"]
    return f"{HEADER}.visible .entry k({params})\n{{\n" + "\n".join(body) + "\n}\n"


def lanes_for(dst: str, operands: list) -> int:
    per = bits(dst) // 8 + sum(bits(t) // 8 for t in operands if not t.startswith("imm:"))
    return 64 if 64 * per + 64 <= GLOBAL_BYTES else 32


def check(instr: str, dst: str, operands: list, inputs: list):
    """Run on the interpreter and on the simulator; the results must be identical."""
    n = len(inputs[0]) if inputs else lanes_for(dst, operands)
    loaded = [t for t in operands if not t.startswith("imm:")]
    args = [{"buffer": f"uint{bits(t)}", "data": [int(v) for v in vals]} for t, vals in zip(loaded, inputs)]
    args.append({"buffer": f"uint{bits(dst)}", "size": n})
    spec = {"grid": n // 32, "block": 32, "args": args}
    ptx = kernel(instr, dst, operands)
    want = run(ptx, spec).buffers[-1]
    got = run(ptx, spec, engine="sim").buffers[-1]
    if not np.array_equal(want, got):
        bad = [i for i in range(n) if want[i] != got[i]][:5]
        rows = [f"  lane {i}: inputs {[hex(int(v[i])) for v in inputs]} -> sim {int(got[i]):#x}, "
                f"interp {int(want[i]):#x}" for i in bad]
        raise AssertionError(f"{instr} ({', '.join(operands)}) differs:\n" + "\n".join(rows))


# ---------------------------------------------------------------------------------------------
# operand values: edges, magnitudes of every size, small numbers, related pairs


def edges(w: int) -> list[int]:
    m = (1 << w) - 1
    out = {0, 1, 2, 3, m, m - 1, 1 << (w - 1), (1 << (w - 1)) - 1, (1 << (w - 1)) + 1}
    for k in range(w):
        out |= {1 << k, (1 << k) - 1, ((1 << k) + 1) & m, (-(1 << k)) & m}
    return sorted(out)


def values(rng, w: int, n: int) -> list[int]:
    m = (1 << w) - 1
    e = edges(w)
    out = []
    for _ in range(n):
        kind = rng.integers(0, 4)
        if kind == 0:
            v = e[rng.integers(0, len(e))]
        elif kind == 1:
            v = int(rng.integers(0, 1 << 62)) << 2 | int(rng.integers(0, 4))
        elif kind == 2:
            k = int(rng.integers(0, w + 1))
            v = int(rng.integers(0, 1 << 62)) & ((1 << k) - 1) if k < 62 else int(rng.integers(0, 1 << 62)) << (k - 62)
            v = -v if rng.integers(0, 2) else v
        else:
            v = int(rng.integers(-20, 21))
        out.append(v & m)
    return out


def amounts(rng, n: int) -> list[int]:
    """Shift amounts, bit positions and lengths: mostly small, some around 64, 128, 256, huge."""
    pool = list(range(0, 70)) + [127, 128, 129, 255, 256, 257, 300, 511, 0x80000000, 0xFFFFFFFF]
    return [pool[rng.integers(0, len(pool))] if rng.integers(0, 5) else int(rng.integers(0, 1 << 32))
            for _ in range(n)]


def inputs_for(operands: list, roles: str, seed: int, n: int) -> list[list[int]]:
    """Inputs per loaded operand; roles, one letter each: `v` a value, `n` an amount, `q` a
    dividend (half of them within 3 of a small multiple of the next operand)."""
    rng = np.random.default_rng(seed)
    loaded = [t for t in operands if not t.startswith("imm:")]
    out = []
    for t, r in zip(loaded, roles):
        out.append(amounts(rng, n) if r == "n" else values(rng, bits(t), n))
    if "q" in roles:                       # dividends close to multiples of the divisor
        i = roles.index("q")
        w = bits(loaded[i])
        for j in range(n):
            if rng.integers(0, 2):
                b = out[i + 1][j]
                out[i][j] = (b * int(rng.integers(0, 9)) + int(rng.integers(-3, 4))) & ((1 << w) - 1)
    return out


# ---------------------------------------------------------------------------------------------
# the instruction families (register operands)

T = lambda *ts: list(ts)          # noqa: E731

FAMILIES = [
    # division: dividend (near multiples of the divisor), divisor
    *[(f"{op}.{s}{w}", f"{s}{w}", T(f"{s}{w}", f"{s}{w}"), "qv")
      for op in ("div", "rem") for s in "us" for w in (16, 32, 64)],
    # multiplication
    ("mul.hi.u64", "u64", T("u64", "u64"), "vv"), ("mul.hi.s64", "s64", T("s64", "s64"), "vv"),
    ("mul.lo.u64", "u64", T("u64", "u64"), "vv"), ("mul.lo.s64", "s64", T("s64", "s64"), "vv"),
    ("mul.hi.u16", "u16", T("u16", "u16"), "vv"), ("mul.hi.s16", "s16", T("s16", "s16"), "vv"),
    ("mul.wide.s16", "s32", T("s16", "s16"), "vv"),
    ("mad.lo.s64", "s64", T("s64", "s64", "s64"), "vvv"), ("mad.hi.u64", "u64", T("u64", "u64", "u64"), "vvv"),
    ("mad.hi.s64", "s64", T("s64", "s64", "s64"), "vvv"), ("mad.hi.u32", "u32", T("u32", "u32", "u32"), "vvv"),
    ("mad.hi.s32", "s32", T("s32", "s32", "s32"), "vvv"), ("mad.lo.u16", "u16", T("u16", "u16", "u16"), "vvv"),
    ("mad.wide.u16", "u32", T("u16", "u16", "u32"), "vvv"),
    ("mul24.lo.u32", "u32", T("u32", "u32"), "vv"), ("mul24.hi.u32", "u32", T("u32", "u32"), "vv"),
    ("mul24.lo.s32", "s32", T("s32", "s32"), "vv"), ("mul24.hi.s32", "s32", T("s32", "s32"), "vv"),
    ("mad24.hi.s32", "s32", T("s32", "s32", "s32"), "vvv"), ("mad24.lo.u32", "u32", T("u32", "u32", "u32"), "vvv"),
    ("add.sat.s32", "s32", T("s32", "s32"), "vv"), ("sub.sat.s32", "s32", T("s32", "s32"), "vv"),
    # 64-bit shifts by a register amount
    ("shl.b64", "b64", T("b64", "u32"), "vn"), ("shr.u64", "u64", T("u64", "u32"), "vn"),
    ("shr.s64", "s64", T("s64", "u32"), "vn"), ("shr.s16", "s16", T("s16", "u32"), "vn"),
    # bit fields, permutes, funnel shifts
    ("bfe.u32", "u32", T("u32", "u32", "u32"), "vnn"), ("bfe.s32", "s32", T("s32", "u32", "u32"), "vnn"),
    ("bfe.u64", "u64", T("u64", "u32", "u32"), "vnn"), ("bfe.s64", "s64", T("s64", "u32", "u32"), "vnn"),
    ("bfi.b32", "b32", T("b32", "b32", "u32", "u32"), "vvnn"), ("bfi.b64", "b64", T("b64", "b64", "u32", "u32"), "vvnn"),
    *[(f"prmt.b32{m}", "b32", T("b32", "b32", "b32"), "vvv") for m in ("", ".f4e", ".b4e", ".rc8", ".ecl", ".ecr", ".rc16")],
    *[(f"shf.{d}.{c}.b32", "b32", T("b32", "b32", "u32"), "vvn") for d in "lr" for c in ("wrap", "clamp")],
    # bfind, sad, small 64-bit operations
    *[(f"bfind{sa}.{t}", "u32", T(t), "v") for sa in ("", ".shiftamt") for t in ("u32", "s32", "u64", "s64")],
    *[(f"sad.{t}", t, T(t, t, t), "vvv") for t in ("u16", "s16", "u32", "s32", "u64", "s64")],
    *[(f"{op}.{t}", t, T(t, t), "vv") for op in ("min", "max") for t in ("u64", "s64")],
    ("abs.s64", "s64", T("s64"), "v"), ("neg.s64", "s64", T("s64"), "v"), ("abs.s16", "s16", T("s16"), "v"),
    ("clz.b64", "u32", T("b64"), "v"), ("popc.b64", "u32", T("b64"), "v"), ("brev.b64", "b64", T("b64"), "v"),
    ("cnot.b64", "b64", T("b64"), "v"), ("cnot.b16", "b16", T("b16"), "v"),
    # dot products, selects
    *[(f"dp4a.{x}.{y}", "u32", T("u32", "u32", "u32"), "vvv") for x in ("u32", "s32") for y in ("u32", "s32")],
    ("dp2a.lo.s32.u32", "s32", T("s32", "u32", "s32"), "vvv"), ("dp2a.hi.u32.s32", "u32", T("u32", "s32", "u32"), "vvv"),
    ("slct.b32.s32", "b32", T("b32", "b32", "s32"), "vvv"), ("slct.u64.s32", "u64", T("u64", "u64", "s32"), "vvv"),
    # saturating integer conversions
    *[(f"cvt.sat.{d}.{s}", d, T(s), "v") for d, s in [
        ("u8", "s32"), ("s8", "u16"), ("s16", "s32"), ("u16", "s64"), ("s32", "u32"), ("u32", "s32"), ("s32", "s64"),
        ("u32", "u64"), ("s32", "u64"), ("u64", "s64"), ("s64", "u64"), ("u64", "s16"), ("s8", "s64"), ("u16", "u32")]],
]


@pytest.mark.parametrize("instr,dst,operands,roles", FAMILIES, ids=[f[0] for f in FAMILIES])
@examples(3)
@given(seed=st.integers(0, 2**32 - 1))
def test_register_operands(instr, dst, operands, roles, seed):
    check(instr, dst, operands, inputs_for(operands, roles, seed, lanes_for(dst, operands)))


# ---------------------------------------------------------------------------------------------
# immediate operands (folded at assembly time: magic-number division, constant shifts, fields,
# selectors)


def imm_divisors(w: int, signed: bool) -> list[int]:
    out = [0, 1, 2, 3, 5, 6, 7, 10, 12, 25, 641, 1000, 0x7FFFFFFF, 1 << (w - 1), (1 << w) - 1]
    if signed:
        out += [-1, -2, -3, -7, -8, -10, -(1 << (w - 2)), -(1 << (w - 1)) + 1]
    if w == 64:
        out += [1 << 32, 3 << 32, (1 << 32) + 1, 0xFFFFFFFF, 10 ** 12, 0x123456789, (1 << 63) - 25]
    return out


def imm(v: int) -> str:
    return f"imm:{v}" if v < 0 else f"imm:{v:#x}"


DIV_IMM = [(f"{op}.{s}{w}", f"{s}{w}", d) for op in ("div", "rem") for s in "us" for w in (16, 32, 64)
           for d in imm_divisors(w, s == "s") if -(1 << (w - 1)) <= d < (1 << w)]


@pytest.mark.parametrize("instr,t,d", DIV_IMM, ids=[f"{i}/{d}" for i, _, d in DIV_IMM])
def test_division_by_immediates(instr, t, d):
    ops = [t, imm(d)]
    n = lanes_for(t, ops)
    rng = np.random.default_rng(abs(d) % 997)
    a = values(rng, bits(t), n)
    m = (1 << bits(t)) - 1
    if d:                                  # half the dividends within 3 of a multiple of d
        a[::2] = [(d * int(rng.integers(-9, 10)) + int(rng.integers(-3, 4))) & m for _ in a[::2]]
    check(instr, t, ops, [a])


@examples(60)
@given(data=st.data())
def test_immediate_operands(data):
    """Shift amounts, positions, lengths, selectors and other operands given as immediates."""
    case = data.draw(st.sampled_from([
        ("shl.b64", "b64", ["b64", "n"]), ("shr.u64", "u64", ["u64", "n"]), ("shr.s64", "s64", ["s64", "n"]),
        ("bfe.u32", "u32", ["u32", "n", "n"]), ("bfe.s32", "s32", ["s32", "n", "n"]),
        ("bfe.u64", "u64", ["u64", "n", "n"]), ("bfe.s64", "s64", ["s64", "n", "n"]),
        ("bfe.s64", "s64", ["s64", "u32", "n"]), ("bfe.u32", "u32", ["u32", "n", "u32"]),
        ("bfi.b32", "b32", ["b32", "b32", "n", "n"]), ("bfi.b64", "b64", ["b64", "b64", "n", "n"]),
        ("prmt.b32", "b32", ["b32", "b32", "sel"]), ("prmt.b32.b4e", "b32", ["b32", "b32", "sel"]),
        ("prmt.b32.ecl", "b32", ["b32", "b32", "sel"]), ("prmt.b32", "b32", ["b32", "imm32", "sel"]),
        ("shf.l.wrap.b32", "b32", ["b32", "b32", "n"]), ("shf.r.clamp.b32", "b32", ["b32", "b32", "n"]),
        ("mul.hi.s32", "s32", ["s32", "imm32"]), ("mul.hi.u32", "u32", ["u32", "imm32"]),
        ("mul.hi.s64", "s64", ["s64", "imm64"]), ("mul.hi.u64", "u64", ["imm64", "u64"]),
        ("mul.lo.s64", "s64", ["s64", "imm64"]), ("sad.s32", "s32", ["s32", "imm32", "s32"]),
        ("min.s64", "s64", ["s64", "imm64"]), ("max.u64", "u64", ["imm64", "u64"]),
        ("add.sat.s32", "s32", ["s32", "imm32"]), ("sub.sat.s32", "s32", ["imm32", "s32"]),
    ]))
    instr, dst, spec = case
    amount = st.one_of(st.integers(0, 70), st.sampled_from([127, 255, 256, 257, 0xFFFFFFFF]))
    word = {32: st.one_of(st.sampled_from(edges(32)), st.integers(0, (1 << 32) - 1)),
            64: st.one_of(st.sampled_from(edges(64)), st.integers(0, (1 << 64) - 1))}
    ops = []
    for s in spec:
        if s == "n":
            ops.append(f"imm:{data.draw(amount)}")
        elif s == "sel":
            ops.append(f"imm:{data.draw(st.integers(0, 0xFFFF)):#x}")
        elif s.startswith("imm"):
            ops.append(f"imm:{data.draw(word[int(s[3:])]):#x}")
        else:
            ops.append(s)
    loaded = [t for t in ops if not t.startswith("imm:")]
    check(instr, dst, ops, inputs_for(ops, "v" * len(loaded), data.draw(st.integers(0, 2**32 - 1)),
                                      lanes_for(dst, ops)))


def test_lop3_every_truth_table():
    """All 256 lop3 functions, 8 per kernel, on 32 lanes of (a, b, c)."""
    rng = np.random.default_rng(3)
    ins = [values(rng, 32, 32) for _ in range(3)]
    ins[0][:8] = [0] * 4 + [0xFFFFFFFF] * 4                 # every bit combination
    ins[1][:8] = [0, 0, 0xFFFFFFFF, 0xFFFFFFFF] * 2
    ins[2][:8] = [0, 0xFFFFFFFF] * 4
    for first in range(0, 256, 8):
        body = [".reg .b32 %r<24>;", ".reg .b64 %rd<24>;", "mov.u32 %r10, %tid.x;", "cvt.u64.u32 %rd10, %r10;"]
        for k in range(3):
            body += [f"ld.param.u64 %rd{k}, [in{k}];", f"mad.lo.u64 %rd{k}, %rd10, 4, %rd{k};",
                     f"ld.global.b32 %r{k}, [%rd{k}];"]
        body += ["ld.param.u64 %rd5, [out];", "mad.lo.u64 %rd5, %rd10, 32, %rd5;"]
        for j in range(8):
            body += [f"lop3.b32 %r5, %r0, %r1, %r2, {first + j:#x};", f"st.global.b32 [%rd5+{4 * j}], %r5;"]
        ptx = (f"{HEADER}.visible .entry k(.param .u64 in0, .param .u64 in1, .param .u64 in2, .param .u64 out)\n"
               "{\n" + "\n".join(body + ["ret;"]) + "\n}\n")
        spec = {"grid": 1, "block": 32, "args": [{"buffer": "uint32", "data": v} for v in ins] +
                [{"buffer": "uint32", "size": 256}]}
        want, got = run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1]
        assert np.array_equal(want, got), f"lop3 tables {first:#x}..{first + 7:#x}"


def check_body(body: list[str], n_in: int, n_out: int, inputs: list[list[int]]):
    """A kernel loading u32 inputs into %r1..%r{n_in}, running `body`, storing %r20.. (n_out
    words per thread); interpreter and simulator must agree."""
    n = len(inputs[0])
    lines = [".reg .pred %p<4>;", ".reg .b32 %r<32>;", ".reg .b64 %rd<24>;", "mov.u32 %r0, %tid.x;",
             "cvt.u64.u32 %rd0, %r0;", "and.b32 %r9, %r0, 1;", "setp.eq.u32 %p1, %r9, 1;"]
    for k in range(n_in):
        lines += [f"ld.param.u64 %rd{k + 1}, [in{k}];", f"mad.lo.u64 %rd{k + 1}, %rd0, 4, %rd{k + 1};",
                  f"ld.global.u32 %r{k + 1}, [%rd{k + 1}];"]
    lines += body + ["ld.param.u64 %rd20, [out];", f"mad.lo.u64 %rd20, %rd0, {4 * n_out}, %rd20;"]
    lines += [f"st.global.u32 [%rd20+{4 * j}], %r{20 + j};" for j in range(n_out)] + ["ret;"]
    params = ", ".join([f".param .u64 in{k}" for k in range(n_in)] + [".param .u64 out"])
    ptx = f"{HEADER}.visible .entry k({params})\n{{\n" + "\n".join(lines) + "\n}\n"
    spec = {"grid": 1, "block": n, "args": [{"buffer": "uint32", "data": v} for v in inputs] +
            [{"buffer": "uint32", "size": n * n_out}]}
    want, got = run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1]
    assert np.array_equal(want, got), "\n".join(body)


CHAINS = {
    "add96": ["add.cc.u32 %r20, %r1, %r4;", "addc.cc.u32 %r21, %r2, %r5;", "addc.cc.s32 %r22, %r3, %r6;",
              "addc.u32 %r23, 0, 0;"],
    "sub96": ["sub.cc.u32 %r20, %r1, %r4;", "subc.cc.u32 %r21, %r2, %r5;", "subc.cc.u32 %r22, %r3, %r6;",
              "subc.u32 %r23, 0, 0;"],
    "mad64": ["mad.lo.cc.u32 %r20, %r1, %r4, %r3;", "madc.hi.u32 %r21, %r1, %r4, %r6;",
              "mad.hi.cc.u32 %r22, %r2, %r5, %r3;", "addc.u32 %r23, %r6, 7;"],
    "guarded": ["add.cc.u32 %r20, %r1, %r4;", "@%p1 addc.cc.u32 %r21, %r2, %r5;", "mov.u32 %r22, 0;",
                "@!%p1 sub.cc.u32 %r22, %r3, %r6;", "addc.u32 %r23, %r1, 0;"],
    "add128": ["mov.b64 %rd10, {%r1, %r2};", "mov.b64 %rd11, {%r4, %r5};", "mov.b64 %rd12, {%r3, %r6};",
               "add.cc.u64 %rd13, %rd10, %rd11;", "addc.cc.s64 %rd14, %rd12, %rd10;", "addc.cc.u32 %r22, %r3, 0;",
               "addc.u64 %rd15, %rd14, %rd11;", "mov.b64 {%r20, %r21}, %rd13;", "mov.b64 {%r23, %r24}, %rd15;",
               "xor.b32 %r23, %r23, %r24;"],
    "sub128": ["mov.b64 %rd10, {%r1, %r2};", "mov.b64 %rd11, {%r4, %r5};", "mov.b64 %rd12, {%r3, %r6};",
               "sub.cc.u64 %rd13, %rd10, %rd11;", "subc.cc.u64 %rd14, %rd12, %rd10;", "sub.cc.u32 %r22, %r3, %r6;",
               "subc.cc.s64 %rd15, %rd14, %rd11;", "subc.u32 %r25, 0, 0;", "mov.b64 {%r20, %r21}, %rd13;",
               "mov.b64 {%r23, %r24}, %rd15;", "xor.b32 %r23, %r23, %r24;", "xor.b32 %r22, %r22, %r25;"],
    "mad_sat": ["mad.hi.sat.s32 %r20, %r1, %r4, %r2;", "mad.lo.sat.s32 %r21, %r1, %r4, %r5;",
                "add.sat.s32 %r22, %r3, %r6;", "sub.sat.s32 %r23, %r3, %r6;"],
}


@pytest.mark.parametrize("name", list(CHAINS))
@examples(4)
@given(seed=st.integers(0, 2**32 - 1))
def test_carry_chains(name, seed):
    rng = np.random.default_rng(seed)
    check_body(CHAINS[name], 6, 4, [values(rng, 32, 32) for _ in range(6)])


def test_mul_hi_s32_by_int_min():
    """MULHS by 0x80000000 (= -2^31) is not a shift (strength reduction must leave it)."""
    check("mul.hi.s32", "s32", ["s32", "imm:0x80000000"], [values(np.random.default_rng(1), 32, 64)])
    check("mul.hi.u32", "u32", ["u32", "imm:0x80000000"], [values(np.random.default_rng(2), 32, 64)])


def test_unsupported_constructs_name_the_line():
    """A construct the interpreter runs and the machine does not (`mad.wide` with a carry-out)."""
    ptx = kernel("mad.wide.cc.u32", "u64", ["u32", "u32", "u64"])
    spec = {"grid": 1, "block": 32, "args": [{"buffer": "uint32", "size": 32}] * 2 + [{"buffer": "uint64", "size": 32}] * 2}
    run(ptx, spec)
    with pytest.raises(AssemblerError, match=r"line \d+: `mad.wide.cc.u32` is not supported by the machine yet"):
        run(ptx, spec, engine="sim")


# ---------------------------------------------------------------------------------------------
# 64-bit atomics (two 32-bit atomics, or one lane at a time)


ATOM64 = ["atom.global.add.u64", "atom.global.and.b64", "atom.global.or.b64", "atom.global.xor.b64",
          "atom.global.exch.b64", "atom.global.min.s64", "atom.global.max.s64", "atom.global.min.u64",
          "atom.global.max.u64", "atom.global.cas.b64", "red.global.add.u64", "red.global.max.s64"]


@pytest.mark.parametrize("guard", [False, True], ids=["all", "odd-lanes"])
@pytest.mark.parametrize("instr", ATOM64)
@examples(2)
@given(seed=st.integers(0, 2**32 - 1))
def test_atomics_64bit(instr, guard, seed):
    """32 threads (2 blocks, 4 warps each) on 3 addresses: the final memory and every lane's old
    value must be the interpreter's (lanes in order, warps in order)."""
    rng = np.random.default_rng(seed)
    init = values(rng, 64, 3)
    vals = values(rng, 64, 32)
    if "cas" in instr:                     # compare values that hit: the start or an earlier value
        pool = init + vals
        cmps = [pool[int(rng.integers(0, 3 + i))] if rng.integers(0, 3) else values(rng, 64, 1)[0]
                for i in range(32)]
    else:
        cmps = values(rng, 64, 32)
    check_atomic(instr, "u64", init, vals, cmps, guard)


# ---------------------------------------------------------------------------------------------
# brx.idx (a binary tree of branches)


def brx_kernel(n: int, guard: bool) -> str:
    """out[gid] = f_k(x) with k = idx[gid] through a table of n targets (some shared)."""
    table = [f"$T{k % max(1, n - 1)}" for k in range(n)]
    body = [".reg .pred %p<4>;", ".reg .b32 %r<16>;", ".reg .b64 %rd<24>;",
            "mov.u32 %r10, %tid.x;", "mov.u32 %r11, %ctaid.x;", "mov.u32 %r12, %ntid.x;",
            "mad.lo.s32 %r10, %r11, %r12, %r10;", "cvt.u64.u32 %rd10, %r10;",
            "and.b32 %r13, %r10, 1;", "setp.eq.u32 %p1, %r13, 1;",
            "ld.param.u64 %rd11, [idx];", "mad.lo.u64 %rd11, %rd10, 4, %rd11;", "ld.global.u32 %r1, [%rd11];",
            "mov.u32 %r5, 1000;", f"$tab: .branchtargets {', '.join(table)};",
            f"{'@%p1 ' if guard else ''}brx.idx %r1, $tab;", "add.s32 %r5, %r5, 1;", "bra.uni $done;"]
    for k in range(max(1, n - 1)):
        body += [f"$T{k}:", f"mad.lo.s32 %r5, %r1, {k + 3}, {17 * k};", "bra.uni $done;"]
    body += ["$done:", "ld.param.u64 %rd20, [out];", "mad.lo.u64 %rd20, %rd10, 4, %rd20;",
             "st.global.u32 [%rd20], %r5;", "ret;"]
    return (f"{HEADER}.visible .entry k(.param .u64 idx, .param .u64 out)\n{{\n" + "\n".join(body) + "\n}\n")


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("guard", [False, True], ids=["all", "odd-lanes"])
def test_brx_idx(n, guard):
    rng = np.random.default_rng(n)
    idx = [int(x) for x in rng.integers(0, n, 64)]
    spec = {"grid": 2, "block": 32, "args": [{"buffer": "uint32", "data": idx}, {"buffer": "uint32", "size": 64}]}
    ptx = brx_kernel(n, guard)
    want, got = run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1]
    assert np.array_equal(want, got)


def test_brx_idx_out_of_range_faults():
    spec = {"grid": 1, "block": 32, "args": [{"buffer": "uint32", "data": [1] * 31 + [7]},
                                             {"buffer": "uint32", "size": 32}]}
    ptx = brx_kernel(5, False)
    with pytest.raises(ExecutionFault, match="out of range"):
        run(ptx, spec)
    with pytest.raises(ExecutionFault, match=r"warp 7, lane 3, pc 11"):      # the brx.idx, lane 3
        run(ptx, spec, engine="sim")


# ---------------------------------------------------------------------------------------------
# cvta: generic addresses of local, shared and const variables


def test_cvta_generic_addresses():
    """cvta.{local,shared,const} gives the interpreter's generic address (window base + offset),
    cvta.to.* takes it back, and accesses through the converted addresses hit the variables."""
    body = [".local .align 4 .b8 loc[16];", ".shared .align 4 .b8 sh[64];",
            ".reg .b32 %r<16>;", ".reg .b64 %rd<24>;", "mov.u32 %r1, %tid.x;", "cvt.u64.u32 %rd1, %r1;",
            "ld.param.u64 %rd20, [out];", "mad.lo.u64 %rd20, %rd1, 40, %rd20;"]
    for k, (space, var) in enumerate((("local", "loc"), ("shared", "sh"), ("const", "tab"))):
        body += [f"mov.u64 %rd2, {var};", f"add.u64 %rd2, %rd2, {4 * k};", f"cvta.{space}.u64 %rd3, %rd2;",
                 f"st.global.u64 [%rd20+{8 * k}], %rd3;", f"cvta.to.{space}.u64 %rd4, %rd3;"]
        if space == "shared":
            body += ["mul.wide.u32 %rd5, %r1, 4;", "add.u64 %rd4, %rd4, %rd5;"]
        if space != "const":
            body += ["add.u32 %r2, %r1, 100;", f"st.{space}.u32 [%rd4], %r2;"]
        body += [f"ld.{space}.u32 %r3, [%rd4];", f"st.global.u32 [%rd20+{24 + 4 * k}], %r3;"]
    body += ["mov.u32 %r4, sh;", "cvta.shared.u32 %r5, %r4;", "st.global.u32 [%rd20+36], %r5;", "ret;"]
    ptx = (f"{HEADER}.const .align 4 .b32 tab[4] = {{11, 22, 33, 44}};\n"
           ".visible .entry k(.param .u64 out)\n{\n" + "\n".join(body) + "\n}\n")
    spec = {"grid": 1, "block": 8, "args": [{"buffer": "uint32", "size": 80}]}
    want, got = run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1]
    assert np.array_equal(want, got), (want, got)
    assert want[1] == 2 and want[3] == 1 and want[5] == 3                # the windows' high words


# ---------------------------------------------------------------------------------------------
# match.sync (four shfl.idx per word)


def match_kernel(instr: str, t: str, mask: str, guard: bool, pair: bool) -> str:
    w = bits(t)
    r = REG[w]
    dst = "%r5|%p2" if pair else "%r5"
    body = [".reg .pred %p<4>;", ".reg .b16 %rs<8>;", ".reg .b32 %r<16>;", ".reg .b64 %rd<24>;",
            "mov.u32 %r10, %tid.x;", "cvt.u64.u32 %rd10, %r10;", "and.b32 %r13, %r10, 5;",
            "setp.ne.u32 %p1, %r13, 0;", "ld.param.u64 %rd11, [vals];", f"mad.lo.u64 %rd11, %rd10, {w // 8}, %rd11;",
            f"ld.global.b{w} {r}1, [%rd11];", "ld.param.u64 %rd12, [masks];", "mad.lo.u64 %rd12, %rd10, 4, %rd12;",
            "ld.global.u32 %r2, [%rd12];", "mov.u32 %r5, 77;", "mov.u32 %r6, 2;", "setp.eq.u32 %p2, %r6, 3;",
            f"{'@%p1 ' if guard else ''}{instr} {dst}, {r}1, {mask};", "selp.u32 %r6, 1, 0, %p2;",
            "ld.param.u64 %rd20, [out];", "mad.lo.u64 %rd20, %rd10, 8, %rd20;",
            "st.global.u32 [%rd20], %r5;", "st.global.u32 [%rd20+4], %r6;", "ret;"]
    return (f"{HEADER}.visible .entry k(.param .u64 vals, .param .u64 masks, .param .u64 out)\n{{\n"
            + "\n".join(body) + "\n}\n")


@pytest.mark.parametrize("instr,t,pair", [("match.any.sync.b32", "b32", False), ("match.any.sync.b64", "b64", False),
                                          ("match.all.sync.b32", "b32", True), ("match.all.sync.b32", "b32", False),
                                          ("match.all.sync.b64", "b64", True)])
@pytest.mark.parametrize("mask", ["0xF", "0xFFFFFFFF", "0x6", "%r2"])
@pytest.mark.parametrize("guard", [False, True], ids=["all", "some-lanes"])
def test_match_sync(instr, t, pair, mask, guard):
    """Few distinct values (so lanes match, and whole warps agree), the member mask as an
    immediate or a (warp-uniform) register, some lanes inactive."""
    rng = np.random.default_rng(len(instr) + len(mask) + guard)
    n = 64
    w = bits(t)
    vals = [[5, 5, 5, 5][i % 4] if i < 8 else int(rng.integers(0, 3)) << (w - 2) | int(rng.integers(0, 2))
            for i in range(n)]
    masks = [[0xF, 0x3, 0xA, 0x0, 0x9, 0xFFFFFFFF][(i // 4) % 6] for i in range(n)]
    spec = {"grid": 2, "block": 32, "args": [{"buffer": f"uint{w}", "data": vals}, {"buffer": "uint32", "data": masks},
                                             {"buffer": "uint32", "size": 2 * n}]}
    ptx = match_kernel(instr, t, mask, guard, pair)
    want, got = run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1]
    assert np.array_equal(want, got), (want, got)


# ---------------------------------------------------------------------------------------------
# bar.red (counters in shared memory, rotated over three words)


def test_bar_red():
    """bar.red.popc/and/or in a loop (more instances than counter words; 16 in all, so a block
    ends with word 0 holding a count), with a kernel shared array beside the counters, three
    blocks (shared memory keeps its contents between blocks), and a warp that exits before the
    loop (it does not vote)."""
    body = [".shared .align 4 .b8 sh[64];", ".reg .pred %p<8>;", ".reg .b32 %r<24>;", ".reg .b64 %rd<8>;",
            "mov.u32 %r1, %tid.x;", "mov.u32 %r2, %ctaid.x;", "mad.lo.s32 %r3, %r2, 16, %r1;",
            "cvt.u64.u32 %rd1, %r3;", "ld.param.u64 %rd2, [vals];", "mad.lo.u64 %rd2, %rd1, 4, %rd2;",
            "ld.global.u32 %r4, [%rd2];", "ld.param.u64 %rd3, [out];", "mad.lo.u64 %rd3, %rd1, 16, %rd3;",
            "mul.wide.u32 %rd4, %r1, 4;", "mov.u64 %rd5, sh;", "add.u64 %rd5, %rd5, %rd4;",
            "st.shared.u32 [%rd5], %r4;", "setp.ge.u32 %p7, %r1, 12;", "@%p7 bra $out;",
            "mov.u32 %r10, 0;", "mov.u32 %r11, 0;", "mov.u32 %r12, 0;", "mov.u32 %r13, 0;",
            "$loop:", "shr.u32 %r5, %r4, %r13;", "and.b32 %r5, %r5, 1;", "setp.ne.u32 %p1, %r5, 0;",
            "bar.red.popc.u32 %r6, 0, %p1;", "add.s32 %r10, %r10, %r6;",
            "and.b32 %r7, %r4, 3;", "setp.ne.u32 %p2, %r7, %r13;",
            "bar.red.and.pred %p3, 0, %p2;", "selp.u32 %r8, 1, 0, %p3;", "mad.lo.s32 %r11, %r11, 2, %r8;",
            "bar.red.or.pred %p4, 1, 12, !%p1;", "selp.u32 %r9, 1, 0, %p4;", "mad.lo.s32 %r12, %r12, 2, %r9;",
            "add.s32 %r13, %r13, 1;", "setp.lt.u32 %p5, %r13, 5;", "@%p5 bra $loop;",
            "setp.ne.u32 %p6, %r4, 0;", "bar.red.popc.u32 %r15, 0, %p6;", "ld.shared.u32 %r14, [%rd5];",
            "add.s32 %r14, %r14, %r15;",
            "st.global.u32 [%rd3], %r10;", "st.global.u32 [%rd3+4], %r11;", "st.global.u32 [%rd3+8], %r12;",
            "st.global.u32 [%rd3+12], %r14;", "$out:", "ret;"]
    ptx = (f"{HEADER}.visible .entry k(.param .u64 vals, .param .u64 out)\n{{\n" + "\n".join(body) + "\n}\n")
    rng = np.random.default_rng(5)
    vals = [int(x) for x in rng.integers(0, 64, 48)]
    spec = {"grid": 3, "block": 16, "args": [{"buffer": "uint32", "data": vals}, {"buffer": "uint32", "size": 192}]}
    want, got = run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1]
    assert np.array_equal(want, got), (want, got)
    assert len(set(want[::4].tolist())) > 2 and len(set(want[1::4].tolist())) > 1


# ---------------------------------------------------------------------------------------------
# the packer keeps within the carry limit


ROUTINES = [("div_u32", (32, 32)), ("div_s32", (32, 32)), ("rem_s32", (32, 32)), ("div_u64", (64, 64)),
            ("div_s64", (64, 64)), ("rem_s64", (64, 64)), ("mulhi_u64", (64, 64)), ("mulhi_s64", (64, 64)),
            ("bfe_u64", (64, 32, 32)), ("bfe_s64", (64, 32, 32)), ("bfi_b64", (64, 64, 32, 32)),
            ("prmt", (32, 32, 32)), ("sar64", (64, 32)), ("sad", (64, 64, 64))]


def routine_program(name: str, widths) -> MicroProgram:
    """One block: the routine on register inputs, every result word stored (so all are live)."""
    rec = Recorder()
    em = rec.emitter()
    args = [rec.input() if w == 32 else (rec.input(), rec.input()) for w in widths]
    res = getattr(ic, name)(em, *args)
    words = list(res) if isinstance(res, tuple) else [res]
    ops = list(rec.ops) + [MicroOp("mem", "ST", (), extra={"space": "global", "width": 4, "addr": (src(4 * k), src(0)),
                                                           "data": (x, None), "align": 4})
                           for k, x in enumerate(words)]
    return MicroProgram([Block("entry", ops, ("exit",))], "entry", rec.n + 1, "k")


@pytest.mark.parametrize("cfg", [SIM, COMPACT], ids=["SIM", "COMPACT"])
@pytest.mark.parametrize("name,widths", ROUTINES, ids=[r[0] for r in ROUTINES])
def test_packer_respects_carry_limit(cfg, name, widths):
    img = schedule(routine_program(name, widths), cfg)
    assert all(len(b.carries) <= cfg.carry_slots for b in img.bundles)


# ---------------------------------------------------------------------------------------------
# the suite


#: the kernels of the built-in machine's sizes (those that name a larger machine: tests/test_suite_course.py)
SUITE = [k.name for k in suite.kernels() if k.machine is None]


def test_suite_kernels_the_machine_accepts_are_exact():
    """Every suite kernel assembles under COMPACT or fails with a clear "not supported" error, and
    the ones that assemble give the oracle's results on the simulator."""
    accepted, refused = [], {}
    for name in SUITE:
        k = suite.get(name)
        module, spec = load_program(k.ptx()), k.spec()
        try:
            img = assemble(module, spec, config=COMPACT)
        except AssemblerError as e:
            assert "not supported" in str(e), f"{name}: {e}"
            refused[name] = str(e).splitlines()[0]
            continue
        res = Simulator(img, module, spec).run()
        diffs = compare_buffers(res.buffers, k.expected(), nan_equal=True)
        assert not diffs, f"{name}: {diffs}"
        accepted.append(name)
    # the integer kernels (division, 64-bit arithmetic, bit fields, permutes, ...) are all in
    for name in ("int_divrem", "int64_arith", "int_mulhi", "int_minmax", "int_intrinsics", "bit_count",
                 "bitfield_asm", "bitwise", "byte_perm", "funnel_shift", "gcd", "shifts", "predication", "vote"):
        assert name in accepted or name not in SUITE, f"{name}: {refused.get(name)}"
    # and the float kernels (soft floating point, `assembler.softfloat`), float and 64-bit atomics
    for name in ("const_mem", "f2i_convert", "f32_arith", "f32_minmax_nan", "f32_rounding", "f32_sqrt_fma",
                 "f64_convert", "i2f_convert", "matvec", "saxpy", "shared_minmax16", "struct_param", "vector_load",
                 "atomic_float_add", "atomic64", "atomics_shared_more", "switch_jumptable", "device_calls", "match_sync", "syncthreads_reduce"):
        assert name in accepted or name not in SUITE, f"{name}: {refused.get(name)}"


def test_a_program_larger_than_the_rom_names_the_limit():
    """COMPACT's ROM holds 512 bundles (pc_bits 9): a chain of 2400 dependent operations does not
    fit its four ALU slots per bundle."""
    from ptxkit import kernel

    from qwengpu.launch import LaunchSpec
    body = "ld.param.u64 %rd1, [out];\nld.global.u32 %r1, [%rd1];\nmov.u32 %r2, %r1;\n"
    body += "xor.b32 %r2, %r2, %r1;\nadd.u32 %r2, %r2, %r1;\n" * 1200 + "st.global.u32 [%rd1], %r2;\nret;"
    spec = {"grid": 1, "block": 1, "args": [{"buffer": "uint32", "size": 1}]}
    with pytest.raises(AssemblerError, match=r"the program needs \d+ bundles; the machine's ROM holds 512"):
        assemble(load_program(kernel(body)), LaunchSpec.from_json(spec), config=COMPACT)
    assert COMPACT.rom_bundles == 512


def test_a_select_on_an_inverted_register():
    """Division by `~x` (found by `qwengpu fuzz`): the lowering tests the divisor against 0 with a
    SEL whose condition is the inverted register, and ~x != 0 is not x == 0. The assembler used to
    answer an inverted SEL condition by swapping the two choices."""
    xs = [0xFFFFFFFF, 0, 1, 5, 0x80000000, 0x7FFFFFFF, 0xFFFFFFFE, 12345]
    ns = [7, 100, 0xFFFFFFFF, 0x80000000, 3, 0, 99, 0xDEADBEEF]
    check_body(["not.b32 %r5, %r1;", "div.u32 %r20, %r2, %r5;", "rem.u32 %r21, %r2, %r5;",
                "div.s32 %r22, %r2, %r5;", "setp.ne.u32 %p2, %r5, 0;", "selp.b32 %r23, %r2, %r1, %p2;"],
               2, 4, [xs, ns])


def test_a_branch_on_an_inverted_register():
    """A branch on `~x != 0` is a branch on `x != ~0`, not on `x == 0`: the assembler used to turn
    a branch on an inverted register into the opposite branch on the register."""
    xs = [0xFFFFFFFF, 0, 1, 5, 0x80000000, 0x7FFFFFFF, 0xFFFFFFFE, 12345]
    check_body(["not.b32 %r5, %r1;", "mov.u32 %r20, 1;", "setp.ne.u32 %p2, %r5, 0;", "@%p2 bra $SKIP;",
                "mov.u32 %r20, 2;", "$SKIP:", "setp.eq.u32 %p3, %r5, 0;", "mov.u32 %r21, 3;", "@%p3 bra $OUT;",
                "mov.u32 %r21, 4;", "$OUT:"], 1, 2, [xs])


@pytest.mark.parametrize("op", ["shl.b64", "shr.b64", "shr.s64"])
@pytest.mark.parametrize("amount", [32, 0, 31, 33, 63])
def test_a_64_bit_register_shifted_in_place(op, amount):
    """`shl.b64 %rd, %rd, 32` (found by `qwengpu fuzz` on a merge variable nvcc shifts in place):
    the shift folds to hi = the old lo and lo = 0, and the register's lo used to be written first,
    so hi read the new 0. Straight-line and on one side of a divergent branch."""
    xs = [0x89ABCDEF, 0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x12345678, 0xDEADBEEF]
    ys = [0x01234567, 0xFFFFFFFF, 0x80000000, 0, 1, 0x7FFFFFFF, 0xCAFEF00D, 0x0BADF00D]
    check_body(["mov.b64 %rd10, {%r1, %r2};", "mov.b64 %rd11, %rd10;",
                f"{op} %rd10, %rd10, {amount};", "@%p1 bra $SKIP;", f"{op} %rd11, %rd11, {amount};", "$SKIP:",
                "mov.b64 {%r20, %r21}, %rd10;", "mov.b64 {%r22, %r23}, %rd11;"], 2, 4, [xs, ys])


# ---------------------------------------------------------------------------------------------
# generic addressing: the window of a generic address picks the space at run time


GENERIC = """{header}
.const .align 4 .b32 table[4] = {{7, 11, 13, 17}};
.visible .entry k(.param .u64 out)
{{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<24>;
.shared .align 4 .b32 sh[8];
.local .align 4 .b32 loc[2];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd1, %r1, 4;
mov.u64 %rd2, sh;
cvta.shared.u64 %rd3, %rd2;
add.u64 %rd4, %rd3, %rd1;
mov.u64 %rd5, loc;
cvta.local.u64 %rd6, %rd5;
mov.u64 %rd7, table;
cvta.const.u64 %rd8, %rd7;
add.u64 %rd9, %rd8, %rd1;
ld.param.u64 %rd10, [out];
cvta.to.global.u64 %rd11, %rd10;
mad.lo.u64 %rd12, %rd1, 4, %rd11;
add.u32 %r2, %r1, 100;
st.u32 [%rd4], %r2;
st.u32 [%rd6+4], %r1;
bar.sync 0;
atom.add.u32 %r3, [%rd3], 1;
setp.eq.u32 %p1, %r1, 2;
@%p1 st.u32 [%rd12+12], %r1;
ld.u32 %r4, [%rd4];
ld.u32 %r5, [%rd6+4];
ld.u32 %r6, [%rd9];
bar.sync 0;
ld.u32 %r7, [%rd3];
st.u32 [%rd12], %r4;
st.u32 [%rd12+4], %r5;
st.u32 [%rd12+8], %r6;
@!%p1 st.u32 [%rd12+12], %r7;
red.add.u32 [%rd12+12], %r3;
ret;
}}
"""


def test_generic_addressing_on_every_space():
    """Generic ld/st/atom/red (no state space) on shared, local, const and global addresses,
    one guarded: the simulator computes what the interpreter does."""
    ptx = GENERIC.format(header=HEADER)
    spec = {"grid": 1, "block": 4, "args": [{"buffer": "uint32", "size": 16}]}
    want, got = run(ptx, spec).buffers[-1], run(ptx, spec, engine="sim").buffers[-1]
    assert np.array_equal(want, got), (want, got)
    assert [list(want[k:k + 3]) for k in (0, 4)] == [[104, 0, 7], [101, 1, 11]]     # sh[0] took 4 atomic adds


@needs_nvcc
@pytest.mark.parametrize("config", [COMPACT, COMPACT_FPU], ids=lambda c: c.name)
def test_an_immediate_zero_in_an_alus_third_operand_takes_a_port(config):
    """An ALU's c operand has no wired zero: an immediate 0 there (here from a u64 -> f32
    conversion of a constant, found by `qwengpu fuzz --mix float`, kernel 4412) reads a port like
    any immediate; the machine refused to encode the program before."""
    src = r'''
__global__ void zero_c(const unsigned long long *q, const float *f, float *out) {
    unsigned long long v = q[0] * 0ull + 3764948337711784077ull;
    out[0] = sqrtf((float)v) > f[0] ? f[1] : f[0];
}
'''
    import qwengpu
    ptx = qwengpu.compile_cuda(src)
    spec = {"grid": 1, "block": 1, "args": [{"buffer": "uint64", "data": [5]},
                                            {"buffer": "float32", "data": [1.0, 2.0]}, {"buffer": "float32", "size": 1}]}
    assert run(ptx, spec, engine="sim", config=config).buffers[2].tolist() == [2.0]
