"""Floating-point PTX on the machine (`qwengpu.assembler.lower` with the routines of
`qwengpu.assembler.softfloat`), checked end to end: one-instruction kernels run on the reference interpreter and on
the token simulator (`engine="sim"`: lower, optimise, pack, simulate), results compared bit for bit.
Operands are drawn from hypothesis seeds (random patterns mixed with zeros, infinities, NaNs,
subnormals, extreme exponents, short significands that make ties, small integers and halves, related
pairs that cancel); every suite kernel with floats must match the oracle on the simulator.

`pytest --soak N` multiplies the hypothesis example counts (tests/sizes.py).
"""
from __future__ import annotations

import random
import zlib

import numpy as np
import pytest
import sizes
from ptxkit import check_atomic
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from qwengpu import load_program, run, suite
from qwengpu.assembler import AssemblerError, assemble
from qwengpu.assembler import softfloat as sf
from qwengpu.assembler.emit import Recorder
from qwengpu.assembler.lower import Lowerer
from qwengpu.machine.config import COMPACT, COMPACT_FPU
from qwengpu.machine.simulator import Simulator
from qwengpu.machine.uops import M32, Imm, src
from qwengpu.verify import compare_buffers

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SCALE = sizes.SOAK
HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"
GLOBAL_BYTES = 2048                       # the built-in machine's global memory
MODES = ("rn", "rz", "rm", "rp")
IMODES = ("rni", "rzi", "rmi", "rpi")


def examples(n: int):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=True, database=None,
                    phases=(Phase.explicit, Phase.generate),     # a failing seed is reported as is
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example])


def bits(t: str) -> int:
    return 1 if t == "pred" else 32 if t == "f16x2" else int(t[1:])


# ---------------------------------------------------------------------------------------------
# kernels around one instruction

#: register prefix and declared type by PTX type
REGS = {"f16": ("%h", "f16"), "f16x2": ("%r", "b32"), "f32": ("%f", "f32"), "f64": ("%fd", "f64"), "pred": ("%p", "pred"),
        8: ("%rs", "b16"), 16: ("%rs", "b16"), 32: ("%r", "b32"), 64: ("%rd", "b64")}


def reg(t: str, k: int) -> str:
    return REGS.get(t, REGS[bits(t) if t != "pred" else "pred"])[0] + str(k)


def storage(t: str) -> int:
    """Bytes a value of type t takes in its buffer (8-bit integers and predicates: 2 and 4)."""
    return 4 if t == "pred" else max(2, bits(t) // 8)


def kernel(instr: str, dst: str, operands: list) -> str:
    """`instr d, <operands>` per thread. An operand is a type (a register loaded from its own
    buffer, indexed by the global thread id) or `imm:<literal>` (written as is). A predicate
    result is stored as a 0/1 word; `instr` may contain `{p}` for a per-lane predicate (odd lanes)."""
    loaded = [t for t in operands if not t.startswith("imm:")]
    params = ", ".join([f".param .u64 in{k}" for k in range(len(loaded))] + [".param .u64 out"])
    body = [".reg .pred %p<8>;", ".reg .f16 %h<8>;", ".reg .f32 %f<8>;", ".reg .f64 %fd<8>;",
            ".reg .b16 %rs<8>;", ".reg .b32 %r<16>;", ".reg .b64 %rd<24>;",
            "mov.u32 %r10, %tid.x;", "mov.u32 %r11, %ctaid.x;", "mov.u32 %r12, %ntid.x;",
            "mad.lo.s32 %r10, %r11, %r12, %r10;", "cvt.u64.u32 %rd10, %r10;",
            "and.b32 %r13, %r10, 1;", "setp.eq.u32 %p6, %r13, 1;"]
    names, k = [], 0
    for t in operands:
        if t.startswith("imm:"):
            names.append(t[4:].format(p="%p6"))
            continue
        w = storage(t)
        body += [f"ld.param.u64 %rd{11 + k}, [in{k}];", f"mad.lo.u64 %rd{11 + k}, %rd10, {w}, %rd{11 + k};",
                 f"ld.global.b{8 * w} {reg(t, k + 1)}, [%rd{11 + k}];"]
        names.append(reg(t, k + 1))
        k += 1
    dw = storage(dst)
    body += ["ld.param.u64 %rd20, [out];", f"mad.lo.u64 %rd20, %rd10, {dw}, %rd20;",
             f"{instr.format(p='%p6')} {reg(dst, 7)}, {', '.join(names)};"]
    if dst == "pred":
        body += ["selp.u32 %r7, 1, 0, %p7;", "st.global.b32 [%rd20], %r7;"]
    else:
        body += [f"st.global.b{8 * dw} [%rd20], {reg(dst, 7)};"]
    return f"{HEADER}.visible .entry k({params})\n{{\n" + "\n".join(body + ["ret;"]) + "\n}\n"


def lanes_for(dst: str, operands: list) -> int:
    per = storage(dst) + sum(storage(t) for t in operands if not t.startswith("imm:"))
    return 64 if 64 * per + 64 <= GLOBAL_BYTES else 32


def check_ptx(ptx: str, spec: dict, what: str, inputs: list):
    """The simulator's results on the built-in machine (soft-float) and on the machine with a float
    unit (`COMPACT_FPU`) must be the interpreter's, bit for bit."""
    want = run(ptx, spec).buffers[-1]
    for config in (COMPACT, COMPACT_FPU):
        got = run(ptx, spec, engine="sim", config=config).buffers[-1]
        if not np.array_equal(want, got):
            n = len(want)
            bad = [i for i in range(n) if want[i] != got[i]][:6]
            rows = [f"  lane {i}: inputs {[hex(int(v[i])) for v in inputs]} -> sim {int(got[i]):#x}, "
                    f"interp {int(want[i]):#x}" for i in bad]
            raise AssertionError(f"{what} differs on {config.name}:\n" + "\n".join(rows))


def check(instr: str, dst: str, operands: list, inputs: list):
    """Run on the interpreter and on the simulator; the results must be identical."""
    n = len(inputs[0]) if inputs else lanes_for(dst, operands)
    loaded = [t for t in operands if not t.startswith("imm:")]
    args = [{"buffer": f"uint{8 * storage(t)}", "data": [int(v) & ((1 << bits(t)) - 1) for v in vals]}
            for t, vals in zip(loaded, inputs)]
    args.append({"buffer": f"uint{8 * storage(dst)}", "size": n})
    spec = {"grid": n // 32, "block": 32, "args": args}
    check_ptx(kernel(instr, dst, operands), spec, f"{instr} ({', '.join(operands)})", inputs)


# ---------------------------------------------------------------------------------------------
# operand values

FMT = {16: (5, 10), 32: (8, 23), 64: (11, 52)}


def pattern(w: int, sign: int, exp: int, frac: int) -> int:
    e, m = FMT[w]
    return (sign << (w - 1)) | (exp << m) | (frac & ((1 << m) - 1))


def specials(w: int) -> list[int]:
    e, m = FMT[w]
    emax = (1 << e) - 1
    bias = emax >> 1
    out = [pattern(w, 0, 0, 0), pattern(w, 0, 0, 1), pattern(w, 0, 0, 2), pattern(w, 0, 0, (1 << m) - 1),
           pattern(w, 0, 0, 1 << (m - 1)), pattern(w, 0, 1, 0), pattern(w, 0, 1, 1), pattern(w, 0, emax - 1, (1 << m) - 1),
           pattern(w, 0, emax - 1, 0), pattern(w, 0, emax, 0), pattern(w, 0, emax, 1), pattern(w, 0, emax, 1 << (m - 1)),
           pattern(w, 0, emax, (1 << m) - 1), pattern(w, 0, bias, 0), pattern(w, 0, bias, 1), pattern(w, 0, bias - 1, (1 << m) - 1),
           pattern(w, 0, bias - 1, 0), pattern(w, 0, bias + 1, 0), pattern(w, 0, bias + 1, 1 << (m - 1)),
           pattern(w, 0, bias + m, 0), pattern(w, 0, bias + m + 1, 1), pattern(w, 0, bias + m - 1, (1 << m) - 1)]
    return out + [x | (1 << (w - 1)) for x in out]


def fvalue(rng: random.Random, w: int) -> int:
    """A bit pattern of a w-bit float: a special, anything, any exponent (or one near 1) with an
    edge or short significand (ties), a small integer or half."""
    e, m = FMT[w]
    emax = (1 << e) - 1
    bias = emax >> 1
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(specials(w))
    if kind == 1:
        return rng.getrandbits(w)
    if kind == 5:
        dtype, udtype = {16: (np.float16, np.uint16), 32: (np.float32, np.uint32), 64: (np.float64, np.uint64)}[w]
        return int(np.array([rng.randint(-600, 600) / 4], dtype=dtype).view(udtype)[0])
    frac = rng.choice([rng.getrandbits(m), rng.choice([0, 1, 2, 3, (1 << m) - 1, (1 << m) - 2, 1 << (m - 1)]),
                       rng.getrandbits(6) << (m - 6), (rng.randint(1, 7) << (m - 3)) | 1])
    exp = rng.randint(0, emax) if kind == 2 else rng.randint(max(0, bias - 40), min(emax, bias + 70))
    return pattern(w, rng.getrandbits(1), exp, frac)


def related(rng: random.Random, w: int, a: int, other: int) -> int:
    """A second operand made from the first: itself, its negation, a neighbour, the same
    exponent (cancellation), or (mostly) independent."""
    how = rng.randrange(10)
    if how == 0:
        return a
    if how == 1:
        return a ^ (1 << (w - 1))
    if how == 2:
        return (a + rng.randint(-2, 2)) & ((1 << w) - 1)
    if how == 3:
        fm = (1 << FMT[w][1]) - 1
        return ((a & ~fm) | (other & fm)) ^ (other & (1 << (w - 1)))
    return other


def ivalue(rng: random.Random, t: str) -> int:
    """An integer of type t: an edge (around 2^k), anything, small, or k * 2^j (+ a half unit:
    conversion ties)."""
    w = bits(t)
    kind = rng.randrange(4)
    if kind == 0:
        k = rng.randint(0, w)
        v = rng.choice([1 << k, (1 << k) - 1, (1 << k) + 1]) * rng.choice([1, -1])
    elif kind == 1:
        v = rng.getrandbits(w)
    elif kind == 2:
        v = rng.randint(-100, 100)
    else:
        j = rng.randint(0, max(0, w - 25))
        v = rng.randint(1, (1 << 25) - 1) << j
        v = (v + rng.choice([0, 1 << max(0, j - 1)])) * rng.choice([1, -1])
    return v & ((1 << w) - 1)


def lanes(seed: int, operands: list, n: int, relate: bool = True) -> list[list[int]]:
    """n lanes of values for the loaded operands of `operands` (seeded by hypothesis)."""
    rng = random.Random(seed)
    loaded = [t for t in operands if not t.startswith("imm:")]
    cols = [[] for _ in loaded]
    for _ in range(n):
        first = None
        for k, t in enumerate(loaded):
            if t == "f16x2":               # two halves, each its own value
                v = fvalue(rng, 16) | fvalue(rng, 16) << 16
                if first is not None and relate and loaded[0] == t:
                    v = related(rng, 16, first & 0xFFFF, v & 0xFFFF) | related(rng, 16, first >> 16, v >> 16) << 16
                first = v if first is None else first
            elif t[0] == "f":
                v = fvalue(rng, bits(t))
                if first is not None and relate and loaded[0] == t:
                    v = related(rng, bits(t), first, v)
                first = v if first is None else first
            else:
                v = ivalue(rng, t)
            cols[k].append(v)
    return cols


# ---------------------------------------------------------------------------------------------
# the forms

F = lambda *ts: list(ts)          # noqa: E731


def arith_forms():
    out = []
    for op in ("add", "sub", "mul"):
        for r in MODES:
            out.append((f"{op}.{r}.f32", "f32", F("f32", "f32")))
            out.append((f"{op}.{r}.f64", "f64", F("f64", "f64")))
        out += [(f"{op}.f32", "f32", F("f32", "f32")), (f"{op}.rn.ftz.f32", "f32", F("f32", "f32")),
                (f"{op}.rz.sat.f32", "f32", F("f32", "f32")), (f"{op}.rm.ftz.sat.f32", "f32", F("f32", "f32")),
                (f"{op}.f64", "f64", F("f64", "f64"))]
    for r in MODES:
        out += [(f"fma.{r}.f32", "f32", F("f32", "f32", "f32")), (f"fma.{r}.f64", "f64", F("f64", "f64", "f64")),
                (f"div.{r}.f32", "f32", F("f32", "f32")), (f"div.{r}.f64", "f64", F("f64", "f64")),
                (f"sqrt.{r}.f32", "f32", F("f32")), (f"sqrt.{r}.f64", "f64", F("f64")),
                (f"rcp.{r}.f32", "f32", F("f32")), (f"rcp.{r}.f64", "f64", F("f64"))]
    out += [("fma.rn.ftz.f32", "f32", F("f32", "f32", "f32")), ("fma.rp.sat.f32", "f32", F("f32", "f32", "f32")),
            ("fma.rz.ftz.sat.f32", "f32", F("f32", "f32", "f32")), ("mad.f32", "f32", F("f32", "f32", "f32")),
            ("mad.rm.ftz.f32", "f32", F("f32", "f32", "f32")), ("mad.rn.f64", "f64", F("f64", "f64", "f64")),
            ("mad.f64", "f64", F("f64", "f64", "f64")),
            ("div.rn.ftz.f32", "f32", F("f32", "f32")), ("div.rp.ftz.f32", "f32", F("f32", "f32")),
            ("sqrt.rn.ftz.f32", "f32", F("f32")), ("sqrt.rz.ftz.f32", "f32", F("f32")),
            ("rcp.rn.ftz.f32", "f32", F("f32")), ("rcp.rm.ftz.f32", "f32", F("f32"))]
    return out


def simple_forms():
    out = []
    for op in ("min", "max"):
        out += [(f"{op}.f32", "f32", F("f32", "f32")), (f"{op}.ftz.f32", "f32", F("f32", "f32")),
                (f"{op}.NaN.f32", "f32", F("f32", "f32")), (f"{op}.ftz.NaN.f32", "f32", F("f32", "f32")),
                (f"{op}.f64", "f64", F("f64", "f64"))]
    for op in ("abs", "neg"):
        out += [(f"{op}.f32", "f32", F("f32")), (f"{op}.ftz.f32", "f32", F("f32")), (f"{op}.f64", "f64", F("f64"))]
    out += [("copysign.f32", "f32", F("f32", "f32")), ("copysign.f64", "f64", F("f64", "f64"))]
    return out


def half_forms():
    """.f16 and .f16x2 arithmetic (through f32 on the machine: `softfloat.f16`)."""
    out = []
    for t in ("f16", "f16x2"):
        for op in ("add", "sub", "mul"):
            out += [(f"{op}.{t}", t, F(t, t)), (f"{op}.rn.ftz.{t}", t, F(t, t)), (f"{op}.sat.{t}", t, F(t, t))]
        out += [(f"fma.rn.{t}", t, F(t, t, t)), (f"fma.rn.ftz.sat.{t}", t, F(t, t, t)),
                (f"neg.{t}", t, F(t)), (f"abs.ftz.{t}", t, F(t))]
        for op in ("min", "max"):
            out += [(f"{op}.{t}", t, F(t, t)), (f"{op}.ftz.NaN.{t}", t, F(t, t))]
    out += [("fma.rn.sat.f16", "f16", F("f16", "f16", "f16")), ("abs.f16", "f16", F("f16")),
            ("neg.ftz.f16", "f16", F("f16"))]
    out += [(f"setp.{c}.f16", "pred", F("f16", "f16")) for c in ("eq", "ne", "lt", "geu", "nan", "num")]
    out += [("setp.lt.ftz.f16", "pred", F("f16", "f16")), ("setp.le.and.f16", "pred", F("f16", "f16", "imm:{p}"))]
    return out


CMPS = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
TESTS = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")


def compare_forms():
    out = []
    for c in CMPS:
        out += [(f"setp.{c}.f32", "pred", F("f32", "f32")), (f"setp.{c}.f64", "pred", F("f64", "f64"))]
    out += [(f"setp.{c}.ftz.f32", "pred", F("f32", "f32")) for c in ("eq", "lt", "geu", "nan")]
    out += [("setp.lt.and.f32", "pred", F("f32", "f32", "imm:{p}")), ("setp.neu.or.f64", "pred", F("f64", "f64", "imm:{p}")),
            ("setp.ge.xor.ftz.f32", "pred", F("f32", "f32", "imm:!{p}"))]
    out += [(f"testp.{m}.f32", "pred", F("f32")) for m in TESTS]
    out += [(f"testp.{m}.f64", "pred", F("f64")) for m in TESTS]
    out += [("set.lt.f32.f32", "f32", F("f32", "f32")), ("set.gtu.u32.f32", "u32", F("f32", "f32")),
            ("set.eq.ftz.f32.f32", "f32", F("f32", "f32")), ("set.ne.s32.f64", "s32", F("f64", "f64")),
            ("set.le.and.f32.f64", "f32", F("f64", "f64", "imm:{p}")),
            ("slct.f32.f32", "f32", F("f32", "f32", "f32")), ("slct.ftz.b32.f32", "b32", F("b32", "b32", "f32")),
            ("slct.f32.s32", "f32", F("f32", "f32", "s32")),
            ("selp.f32", "f32", F("f32", "f32", "imm:{p}")), ("selp.f64", "f64", F("f64", "f64", "imm:{p}"))]
    return out


INT_NAMES = ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64")


def cvt_forms():
    out = []
    for t in INT_NAMES:
        for r in IMODES:
            out.append((f"cvt.{r}.{t}.f32", t, F("f32")))
        out += [(f"cvt.rni.{t}.f64", t, F("f64")), (f"cvt.rzi.{t}.f64", t, F("f64"))]
        for r in MODES:
            out.append((f"cvt.{r}.f32.{t}", "f32", F(t)))
        out += [(f"cvt.rn.f64.{t}", "f64", F(t)), (f"cvt.rm.f64.{t}", "f64", F(t))]
    out += [(f"cvt.{r}.s32.f64", "s32", F("f64")) for r in ("rmi", "rpi")]
    out += [(f"cvt.{r}.u64.f64", "u64", F("f64")) for r in ("rmi", "rpi")]
    out += [(f"cvt.{r}.f64.s64", "f64", F("s64")) for r in ("rz", "rp")]
    out += [("cvt.rzi.ftz.s32.f32", "s32", F("f32")), ("cvt.rni.sat.u8.f32", "u8", F("f32")),
            ("cvt.rn.sat.f32.s32", "f32", F("s32")), ("cvt.rz.sat.f32.u64", "f32", F("u64"))]
    for r in IMODES:
        out += [(f"cvt.{r}.f32.f32", "f32", F("f32")), (f"cvt.{r}.ftz.f32.f32", "f32", F("f32"))]
    out += [("cvt.ftz.f32.f32", "f32", F("f32")), ("cvt.sat.f32.f32", "f32", F("f32")),
            ("cvt.rni.sat.f32.f32", "f32", F("f32")), ("cvt.ftz.sat.f32.f32", "f32", F("f32")),
            ("cvt.f32.f32", "f32", F("f32")), ("cvt.f64.f64", "f64", F("f64")),
            ("cvt.f64.f32", "f64", F("f32")), ("cvt.ftz.f64.f32", "f64", F("f32")),
            ("cvt.f32.f16", "f32", F("f16")), ("cvt.ftz.f32.f16", "f32", F("f16")), ("cvt.sat.f32.f16", "f32", F("f16"))]
    for r in MODES:
        out += [(f"cvt.{r}.f32.f64", "f32", F("f64")), (f"cvt.{r}.f16.f32", "f16", F("f32")),
                (f"cvt.{r}.f16.f64", "f16", F("f64")), (f"cvt.{r}.f16.s32", "f16", F("s32")),
                (f"cvt.{r}.f16.u64", "f16", F("u64"))]
    for r in IMODES:
        out += [(f"cvt.{r}.f64.f64", "f64", F("f64")), (f"cvt.{r}.f16.f16", "f16", F("f16")),
                (f"cvt.{r}.s32.f16", "s32", F("f16")), (f"cvt.{r}.u8.f16", "u8", F("f16"))]
    out += [("cvt.f64.f16", "f64", F("f16")), ("cvt.rzi.s64.f16", "s64", F("f16")), ("cvt.rn.f16.s16", "f16", F("s16")),
            ("cvt.rn.f16.u8", "f16", F("u8")), ("cvt.rz.f16.s64", "f16", F("s64")), ("cvt.rm.sat.f16.f64", "f16", F("f64")),
            ("cvt.sat.f64.f32", "f64", F("f32")), ("cvt.rn.sat.f64.s32", "f64", F("s32")),
            ("cvt.rni.sat.f64.f64", "f64", F("f64")), ("cvt.sat.f64.f64", "f64", F("f64")), ("cvt.sat.f64.f16", "f64", F("f16")),
            ("cvt.ftz.sat.f64.f32", "f64", F("f32")), ("cvt.sat.f16.f16", "f16", F("f16")),
            ("cvt.rpi.sat.s16.f64", "s16", F("f64")), ("cvt.rni.sat.u32.f32", "u32", F("f32"))]
    out += [("cvt.rn.ftz.f32.f64", "f32", F("f64")), ("cvt.rz.sat.f32.f64", "f32", F("f64")),
            ("cvt.rn.ftz.f16.f32", "f16", F("f32")), ("cvt.rn.sat.f16.f32", "f16", F("f32")),
            ("cvt.rp.ftz.sat.f16.f32", "f16", F("f32"))]
    return out


def immediate_forms():
    """Float literals (hex of either width, decimal, integer) as operands."""
    return [("add.rn.f32", "f32", F("f32", "imm:0f3F800000")), ("mul.rz.f32", "f32", F("imm:0f40490FDB", "f32")),
            ("fma.rn.f32", "f32", F("f32", "imm:0f3E800000", "f32")), ("sub.rn.f32", "f32", F("f32", "imm:1.5")),
            ("mul.rn.f64", "f64", F("f64", "imm:0d400921FB54442D18")), ("add.rm.f64", "f64", F("imm:0d3FF0000000000000", "f64")),
            ("div.rn.f32", "f32", F("imm:0f3F800000", "f32")), ("div.rn.f32", "f32", F("f32", "imm:0f40400000")),
            ("div.rp.f64", "f64", F("f64", "imm:0d4008000000000000")), ("max.f32", "f32", F("f32", "imm:0f00000000")),
            ("min.f64", "f64", F("imm:0dFFF0000000000000", "f64")), ("setp.lt.f32", "pred", F("f32", "imm:0f3F000000")),
            ("setp.geu.f64", "pred", F("imm:0d0000000000000000", "f64")), ("copysign.f32", "f32", F("imm:0fBF800000", "f32")),
            ("add.rn.f32", "f32", F("f32", "imm:0d3FF8000000000000")), ("mul.rn.f64", "f64", F("f64", "imm:0f40000000")),
            ("fma.rz.f64", "f64", F("imm:0d3FE0000000000000", "f64", "imm:0dBFF0000000000000"))]


ALL_FORMS = arith_forms() + simple_forms() + half_forms() + compare_forms() + cvt_forms()
#: the most used forms get more examples
CORE = {"add.rn.f32", "sub.rn.f32", "mul.rn.f32", "fma.rn.f32", "div.rn.f32", "sqrt.rn.f32", "add.rn.f64",
        "mul.rn.f64", "fma.rn.f64", "div.rn.f64", "sqrt.rn.f64", "setp.lt.f32", "cvt.rni.s32.f32", "cvt.rn.f32.s32",
        "cvt.rn.f32.f64", "cvt.f64.f32", "fma.rn.f16", "fma.rn.f16x2", "add.f16x2"}


def run_form(seed, instr, dst, operands):
    relate = not instr.startswith(("slct", "cvt", "selp")) or instr.startswith("slct.f32.f32")
    seed ^= zlib.crc32(f"{instr} {operands}".encode())      # every form its own values
    check(instr, dst, operands, lanes(seed, operands, lanes_for(dst, operands), relate))


@pytest.mark.parametrize("instr,dst,operands", ALL_FORMS, ids=[f"{f[0]}:{','.join(f[2])}" for f in ALL_FORMS])
@examples(1)
@given(seed=st.integers(0, 2**32 - 1))
def test_float_form(seed, instr, dst, operands):
    run_form(seed, instr, dst, operands)


CORE_FORMS = [f for f in ALL_FORMS if f[0] in CORE]


@pytest.mark.parametrize("instr,dst,operands", CORE_FORMS, ids=[f[0] for f in CORE_FORMS])
@examples(4)
@given(seed=st.integers(0, 2**32 - 1))
def test_core_forms_more_examples(seed, instr, dst, operands):
    run_form(seed, instr, dst, operands)


IMM_FORMS = immediate_forms()


@pytest.mark.parametrize("instr,dst,operands", IMM_FORMS, ids=[f"{f[0]}:{','.join(f[2])}" for f in IMM_FORMS])
@examples(1)
@given(seed=st.integers(0, 2**32 - 1))
def test_float_immediates(seed, instr, dst, operands):
    run_form(seed, instr, dst, operands)


@examples(30)
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_random_immediate_operands(seed, data):
    """One operand of an arithmetic instruction an immediate (any pattern: specials, subnormals,
    ties): the routines fold it, and must still compute what the interpreter does."""
    instr, dst, operands = data.draw(st.sampled_from(
        [f for f in arith_forms() + simple_forms() if len(f[2]) >= 2] +
        [(f"setp.{c}.f32", "pred", F("f32", "f32")) for c in ("lt", "equ", "ge")] +
        [("setp.ltu.f64", "pred", F("f64", "f64"))]))
    k = data.draw(st.integers(0, len(operands) - 1))
    w = bits(operands[k])
    v = fvalue(random.Random(seed), w)
    ops = list(operands)
    ops[k] = f"imm:0{'f' if w == 32 else 'd'}{v:0{w // 4}X}"
    run_form(seed, instr, dst, ops)


# The routines fold immediate operands at assembly time (the builder computes with 32-bit
# wrapping); the folded sequence must compute what the all-register one does.

def _routines():
    out = []
    for r in MODES:
        out += [(f"add.{r}", lambda em, a, b, r=r: sf.add(em, a, b, r), (32, 32)),
                (f"mul.{r}", lambda em, a, b, r=r: sf.mul(em, a, b, r), (32, 32)),
                (f"fma.{r}", lambda em, a, b, c, r=r: sf.fma(em, a, b, c, r), (32, 32, 32)),
                (f"div.{r}", lambda em, a, b, r=r: sf.div(em, a, b, r), (32, 32)),
                (f"sqrt.{r}", lambda em, a, r=r: sf.sqrt(em, a, r), (32,)),
                (f"add64.{r}", lambda em, a, b, r=r: sf.add64(em, a, b, r), (64, 64)),
                (f"mul64.{r}", lambda em, a, b, r=r: sf.mul64(em, a, b, r), (64, 64)),
                (f"fma64.{r}", lambda em, a, b, c, r=r: sf.fma64(em, a, b, c, r), (64, 64, 64)),
                (f"div64.{r}", lambda em, a, b, r=r: sf.div64(em, a, b, r), (64, 64)),
                (f"sqrt64.{r}", lambda em, a, r=r: sf.sqrt64(em, a, r), (64,))]
    out += [("sub.rn.ftz.sat", lambda em, a, b: sf.sub(em, a, b, "rn", ftz=True, sat=True), (32, 32)),
            ("fma.rm.ftz.sat", lambda em, a, b, c: sf.fma(em, a, b, c, "rm", ftz=True, sat=True), (32, 32, 32)),
            ("sub64.rz", lambda em, a, b: sf.sub64(em, a, b, "rz"), (64, 64)),
            ("min.NaN", lambda em, a, b: sf.min(em, a, b, nan=True), (32, 32)),
            ("max.ftz", lambda em, a, b: sf.max(em, a, b, ftz=True), (32, 32)),
            ("min64", sf.min64, (64, 64)), ("max64", sf.max64, (64, 64)),
            ("copysign", sf.copysign, (32, 32)), ("copysign64", sf.copysign64, (64, 64)),
            ("cvt.rni.s32.f32", lambda em, a: sf.cvt(em, (a,), "s32", "f32", "rni"), (32,)),
            ("cvt.rn.f32.f64", lambda em, a: sf.cvt(em, a, "f32", "f64", "rn"), (64,)),
            ("cvt.f64.f32", lambda em, a: sf.cvt(em, (a,), "f64", "f32"), (32,)),
            ("cvt.rn.f16.f32", lambda em, a: sf.cvt(em, (a,), "f16", "f32", "rn"), (32,)),
            ("cvt.rni.f64.f64", lambda em, a: sf.cvt(em, a, "f64", "f64", "rni"), (64,)),
            ("cvt.rpi.f64.f64", lambda em, a: sf.cvt(em, a, "f64", "f64", "rpi"), (64,))]
    out += [(f"compare.{c}", lambda em, a, b, c=c: sf.compare(em, c, a, b), (32, 32)) for c in CMPS[::3]]
    out += [(f"compare64.{c}", lambda em, a, b, c=c: sf.compare64(em, c, a, b), (64, 64)) for c in CMPS[1::3]]
    return out


ROUTINES = _routines()


def _evaluate(fn, widths, values, imm_mask):
    """Record fn with the operands of imm_mask as immediates, evaluate it on `values`."""
    rec = Recorder()
    em = rec.emitter()
    env, args = {}, []
    for w, v, m in zip(widths, values, imm_mask):
        words = [v & M32, v >> 32] if w == 64 else [v]
        parts = []
        for x in words:
            if m:
                parts.append(src(Imm(x)))
            else:
                r = rec.input()
                env[r.value] = x
                parts.append(r)
        args.append(tuple(parts) if w == 64 else parts[0])
    out = fn(em, *args)
    outs = out if isinstance(out, tuple) else (out,)
    assert all(type(o.value.value) is int for o in outs if isinstance(o.value, Imm))
    assert all(type(x.value.value) is int for op in rec.ops for x in (op.a, op.b, op.c)
               if x is not None and isinstance(x.value, Imm)), "an immediate that is not a plain int"
    return tuple(rec.evaluate(env, o) for o in outs)


@pytest.mark.parametrize("name,fn,widths", ROUTINES, ids=[r[0] for r in ROUTINES])
@examples(6)
@given(seed=st.integers(0, 2**32 - 1))
def test_folded_immediates_compute_the_same(name, fn, widths, seed):
    rng = random.Random(seed)
    for _ in range(6):
        values = [fvalue(rng, w) for w in widths]
        if len(widths) > 1 and rng.randrange(3) == 0:
            values[1] = related(rng, widths[0], values[0], values[1]) if widths[0] == widths[1] else values[1]
        mask = [rng.randrange(2) for _ in widths]
        if not any(mask):
            mask[rng.randrange(len(widths))] = 1
        want = _evaluate(fn, widths, values, [0] * len(widths))
        got = _evaluate(fn, widths, values, mask)
        assert got == want, f"{name} {[hex(v) for v in values]} immediates {mask}: {got} != {want}"


# ---------------------------------------------------------------------------------------------
# float atomics (atom.add.f32: a compare-and-swap loop; f64: one lane at a time)


@pytest.mark.parametrize("guard", [False, True], ids=["all", "odd-lanes"])
@pytest.mark.parametrize("instr,t", [("atom.global.add.f32", "f32"), ("red.global.add.f32", "f32"),
                                     ("atom.global.add.f64", "f64"), ("red.global.add.f64", "f64"),
                                     ("atom.global.exch.f32", "f32"), ("atom.global.exch.f64", "f64")])
@examples(2)
@given(seed=st.integers(0, 2**32 - 1))
def test_float_atomics(instr, t, guard, seed):
    """32 threads (2 blocks of 4 warps) adding to 1-3 addresses: float addition is not
    associative, so the order (lanes in order, warps in order) shows in the bits; subnormals (.ftz
    for f32), NaNs and infinities too."""
    rng = random.Random(seed)
    w = bits(t)
    init = [fvalue(rng, w) for _ in range(rng.randint(1, 3))]
    vals = [fvalue(rng, w) if rng.randrange(4) else rng.choice([0x3F800000, 0x3EAAAAAB, 0x4B800001]) if w == 32
            else fvalue(rng, w) for _ in range(32)]
    check_atomic(instr, t, init, vals, [0] * 32, guard)


# Conversions the lowering (`assembler.lower.floats`) composes from softfloat routines (f16 through f32, round-to-odd for f16
# results of f64, .sat on f64 results) and f64 round-to-integral: bulk checks at the micro-op level.

class _Composer:
    """Just enough of the lowering to run `Lowerer.convert` into a Recorder."""
    soft = staticmethod(Lowerer.soft)
    convert = Lowerer.convert
    fpu_convert = Lowerer.fpu_convert
    sat64 = Lowerer.sat64
    fpu = frozenset()

    def __init__(self, rec):
        self.rec = rec

    def em(self, ctx):
        return self.rec.emitter()


COMPOSED = [("f16", "f64", r) for r in MODES] + [("f16", t, r) for t in ("s32", "u32", "s64", "u64") for r in MODES] + \
    [("f64", "f16", None), ("s32", "f16", "rni"), ("u64", "f16", "rmi"), ("f16", "f16", "rni"), ("f16", "f16", "rpi"),
     ("f64", "f64", "sat"), ("f64", "s32", "sat"), ("f64", "f32", "sat")] + [("f64", "f64", r) for r in IMODES]


def _composed_inputs(rng, st: str, n: int) -> list[int]:
    """Values around the f16 range: integers 2^11..2^17 (ties and near-ties of f16), f64 values
    at f16 rounding boundaries (+- a few units of f64 or f32), and the usual mix."""
    out = []
    for _ in range(n):
        k = rng.randrange(3)
        if st[0] in "su":
            w = bits(st)
            if k == 0:
                v = rng.randint(1 << 11, 1 << 17) * rng.choice([1, -1] if st[0] == "s" else [1])
            elif k == 1:
                j = rng.randint(0, w - 12)
                v = ((rng.randint(1 << 10, 1 << 11) * 2 + 1) << j) + rng.randint(-2, 2)    # near ties
            else:
                v = ivalue(rng, st)
            out.append(v & ((1 << w) - 1))
        elif st == "f64":
            if k < 2:                                # a boundary between two f16 values, nudged
                e = rng.randint(-30, 17)
                m = rng.randint(1 << 10, 1 << 11) * 2 + 1
                x = np.float64(m) * np.float64(2.0) ** (e - 11)
                v = int(np.array([x], dtype=np.float64).view(np.uint64)[0])
                v = (v + rng.choice([0, 0, 1, -1, 1 << 29, -(1 << 29), rng.randint(-1000, 1000)])) ^ (rng.getrandbits(1) << 63)
            else:
                v = fvalue(rng, 64)
            out.append(v & ((1 << 64) - 1))
        else:
            out.append(fvalue(rng, bits(st)))
    return out


@pytest.mark.parametrize("dt,st,rnd", COMPOSED, ids=[f"{d}.{s}.{r}" for d, s, r in COMPOSED])
def test_composed_conversions_bulk(dt, st, rnd):
    from qwengpu.semantics import floats as FL
    sat = rnd == "sat"
    rnd = None if sat else rnd
    if sat and st[0] in "su":
        rnd = "rn"
    rec = Recorder()
    ins = [rec.input() for _ in range(2 if bits(st) == 64 else 1)]
    out = _Composer(rec).convert({}, None, tuple(ins), dt, st, rnd, sat, False)
    rng = random.Random(zlib.crc32(f"{dt}{st}{rnd}{sat}".encode()))
    xs = _composed_inputs(rng, st, 1500)
    want = FL.cvt(np.array(xs, dtype=np.uint64), dt, st, rnd=rnd, sat=sat)
    for x, wv in zip(xs, want):
        env = {ins[0].value: x & M32} | ({ins[1].value: x >> 32} if len(ins) == 2 else {})
        words = [rec.evaluate(env, o) for o in out]
        got = words[0] | (words[1] << 32 if len(words) == 2 else 0)
        assert got == int(wv), f"cvt{'.' + rnd if rnd else ''}{'.sat' if sat else ''}.{dt}.{st} {x:#x}: {got:#x} != {int(wv):#x}"


# ---------------------------------------------------------------------------------------------
# refusals


def assemble_ptx(ptx: str, spec: dict):
    return run(ptx, spec, engine="sim")


@pytest.mark.parametrize("instr,dst,operands", [
    ("cvt.ftz.f64.f16", "f64", F("f16")), ("cvt.rn.f16.f16", "f16", F("f16")), ("cvt.rn.s32.f16", "s32", F("f16")),
    ("cvt.rni.f16.f64", "f16", F("f64")), ("cvt.rn.f64.f64", "f64", F("f64")),
])
def test_unsupported_float_forms_name_the_line(instr, dst, operands):
    """Forms PTX does not define (the interpreter refuses them when it runs them): an
    AssemblerError naming the line and the form."""
    n = 32
    spec = {"grid": 1, "block": 32, "args": [{"buffer": f"uint{8 * storage(t)}", "size": n} for t in operands] +
            [{"buffer": f"uint{8 * storage(dst)}", "size": n}]}
    ptx = kernel(instr, dst, operands)
    with pytest.raises(Exception, match=r"cvt"):
        run(ptx, spec)
    with pytest.raises(AssemblerError, match=rf"line \d+: `{instr.replace('.', '[.]')}` is not supported by the machine"):
        assemble_ptx(ptx, spec)


@pytest.mark.parametrize("instr,operands", [("ex2.approx.f32", F("f32")), ("rcp.approx.f32", F("f32")),
                                             ("sqrt.approx.ftz.f32", F("f32")), ("rsqrt.approx.f32", F("f32")),
                                             ("sin.approx.f32", F("f32")), ("lg2.approx.f32", F("f32")),
                                             ("div.approx.f32", F("f32", "f32")), ("div.full.f32", F("f32", "f32")),
                                             ("rcp.approx.ftz.f64", F("f64")), ("rsqrt.approx.f64", F("f64"))])
def test_approximate_instructions_are_refused_on_request(instr, operands):
    """Approximate forms are qwenGPU's definitions (tests/test_interp_approx.py); `approx="refuse"` refuses
    them when the PTX is read (the line and the construct named), for the interpreter and the
    machine alike."""
    ptx = kernel(instr, operands[0], operands)
    spec = {"grid": 1, "block": 32, "args": [{"buffer": f"uint{bits(t)}", "size": 32} for t in operands + [operands[0]]]}
    for engine in ({}, {"engine": "sim"}):
        with pytest.raises(Exception, match=r"line \d+.*approximate instruction .* refused") as e:
            run(ptx, spec, approx="refuse", **engine)
        assert instr in str(e.value)


@pytest.mark.parametrize("instr,operands", [("div.f32", F("f32", "f32")), ("div.approx.f64", F("f64", "f64")),
                                             ("rcp.approx.f64", F("f64"))])
def test_forms_without_a_definition_are_refused(instr, operands):
    """div.f32 without a rounding is not PTX; div.approx.f64 and rcp.approx.f64 (without .ftz) have no
    definition here."""
    ptx = kernel(instr, operands[0], operands)
    spec = {"grid": 1, "block": 32, "args": [{"buffer": f"uint{bits(t)}", "size": 32} for t in operands + [operands[0]]]}
    for engine in ({}, {"engine": "sim"}):
        with pytest.raises(Exception, match=r"line \d+.*(approximate|rounding modifier)") as e:
            run(ptx, spec, **engine)
        assert instr.split(".")[0] in str(e.value)


# ---------------------------------------------------------------------------------------------
# the suite's float kernels


FLOAT_KERNELS = ["atomic_float_add", "const_mem", "device_calls", "f2i_convert", "f32_arith", "f32_minmax_nan",
                 "f32_round_modes", "f32_rounding", "f32_sqrt_fma", "f64_convert", "f64_math", "i2f_convert",
                 "matvec", "saxpy", "shared_minmax16", "struct_param", "vector_load"]


@pytest.mark.parametrize("config", [COMPACT, COMPACT_FPU], ids=lambda c: c.name)
@pytest.mark.parametrize("name", FLOAT_KERNELS)
def test_suite_float_kernel_exact(name, config):
    """Every float kernel fits the built-in machine (the largest, f64_math, in 398 of its 512
    bundles) and the machine with a float unit, and gives the oracle's results on its simulator."""
    k = suite.get(name)
    module, spec = load_program(k.ptx()), k.spec()
    img = assemble(module, spec, config=config)
    res = Simulator(img, module, spec).run()
    diffs = compare_buffers(res.buffers, k.expected(), nan_equal=False)
    assert not diffs, f"{name}: {diffs}"
