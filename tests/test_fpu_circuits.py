"""The float unit's circuits (`qwengpu.machine.hardware.fpu`), one lane on its own: every neuron at
its ideal value (the compiler's reference evaluation, which also checks that every variable is a
clean code) against the unit's definition, `uops.fpu_eval` (the interpreter's float semantics).

Operands are drawn to reach every path of the datapath: specials, subnormals with and without
.ftz, ties and near-ties (short significands), products and addends at every exponent distance
(the addend far below, inside, far above the window, cancellation), overflow and underflow in every
rounding mode, .sat around 1.0. The compiled weights are checked end to end by the suite on the
machine that has the unit (tests/test_machine_model.py)."""
from __future__ import annotations

import random
import struct

import pytest
import sizes
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from qwengpu.compiler.core import EmbedNode, evaluate_view
from qwengpu.compiler.program import topo_order
from qwengpu.machine.config import COMPACT_FPU
from qwengpu.machine.format import FPU_OPCODES
from qwengpu.machine.hardware.builder import Builder
from qwengpu.machine.hardware.fpu import CIRCUIT_OPS, FpuControl, fpu_lane
from qwengpu.machine.uops import FPU_COMPARES, FPU_ROUNDINGS, fpu_eval

ARITH = ("FADD", "FSUB", "FMUL", "FFMA")


class Lane:
    """One lane of the unit in a program of its own: operand words and the segment's fields as
    inputs, the result word as output."""

    def __init__(self):
        hw = Builder(COMPACT_FPU)
        p = hw.p
        a, b, c = (p.input_bits(n, 32) for n in "abc")
        op = p.input_onehot("op", len(FPU_OPCODES))
        rnd = p.input_onehot("rnd", len(FPU_ROUNDINGS))
        cmp = p.input_onehot("cmp", len(FPU_COMPARES))
        fl = p.input_bits("fl", 4)
        sel = p.input_bits("sel", 3)       # each operand's port selector (all on: one port each)
        ctl = FpuControl(op, rnd, cmp, fl.f(0), fl.f(1), fl.f(2), fl.f(3))
        choices = {n: [(sel.f(i), [x.f(j) for j in range(32)])] for i, (n, x) in enumerate(zip("abc", (a, b, c)))}
        self.out = fpu_lane(hw, "t", choices, ctl)
        self.order = [n for n in topo_order(p) if not isinstance(n, EmbedNode)]
        self.neurons = sum(len(getattr(n, "neurons", ())) for n in self.order)

    def __call__(self, op: str, a: int, b: int, c: int, mods: dict) -> int:
        env = {"a": a, "b": b, "c": c, "op": FPU_OPCODES.index(op),
               "rnd": FPU_ROUNDINGS.index(mods.get("rnd", "rn")),
               "cmp": FPU_COMPARES.index(mods.get("compare", "eq")),
               "fl": int(bool(mods.get("ftz"))) | int(bool(mods.get("sat"))) << 1 | int(bool(mods.get("nan"))) << 2
                     | int(bool(mods.get("signed"))) << 3,
               "sel": 7}
        state: dict = {}
        for node in self.order:
            node.evaluate(env, state)
        return evaluate_view(self.out, env)


@pytest.fixture(scope="module")
def lane():
    return Lane()


def examples(n: int):
    return settings(max_examples=max(1, int(n * sizes.SOAK)), deadline=None, derandomize=True, database=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def word(sign: int, exp: int, frac: int) -> int:
    return (sign << 31) | (exp << 23) | frac


def significand(rng: random.Random) -> int:
    k = rng.random()
    if k < 0.3:
        return rng.getrandbits(23)
    if k < 0.5:                                       # short: exact ties when aligned
        return rng.getrandbits(rng.randrange(1, 6)) << rng.randrange(0, 19)
    if k < 0.7:                                       # all ones below: carries through the significand
        return (1 << 23) - 1 - rng.getrandbits(rng.randrange(1, 4))
    return rng.choice([0, 1, 1 << 22, (1 << 23) - 1])


SPECIAL_EXPONENTS = (0, 0, 1, 254, 255, 255)


def integer(rng: random.Random) -> int:
    """A 32-bit word for I2F: small and large magnitudes, ties and near-ties at 24 bits, the
    extremes of s32 and u32, and words whose low or high part is all zeros or all ones."""
    k = rng.random()
    if k < 0.25:
        return rng.getrandbits(32)
    if k < 0.45:                                      # a few significant bits anywhere: ties when rounded
        return (rng.getrandbits(rng.randrange(1, 27)) << rng.randrange(0, 8)) & 0xFFFFFFFF
    if k < 0.6:                                       # negative s32 of every size
        return (-(rng.getrandbits(rng.randrange(1, 32)) + 1)) & 0xFFFFFFFF
    if k < 0.75:                                      # low or high part all ones / zeros
        hi, lo = rng.choice([0, 0x1FF, rng.getrandbits(9)]), rng.choice([0, 0x7FFFFF, rng.getrandbits(23)])
        return (hi << 23) | lo
    return rng.choice([0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x00FFFFFF, 0x01000001, 0xFF000001,
                       0x7FFFFFC0, 0x7FFFFF80, 0xFFFFFF80, 0x80000001])


def operands(rng: random.Random, op: str) -> tuple[int, int, int]:
    """a, b, c with the addend's exponent near, inside or beyond the product's (or a's)."""
    if op == "I2F":
        return integer(rng), 0, 0
    def exponent():
        return rng.choice(SPECIAL_EXPONENTS) if rng.random() < 0.15 else rng.randrange(0, 256)
    ea = exponent()
    eb = rng.randrange(max(0, 100 - ea), min(256, 300 - ea)) if rng.random() < 0.7 else exponent()
    a = word(rng.getrandbits(1), ea, significand(rng))
    b = word(rng.getrandbits(1), eb, significand(rng))
    ep = ea + eb - 127 if op in ("FFMA", "FMUL") else ea
    d = rng.choice([0, 0, 1, -1, 2, -2, 24, -24, 26, -26, 49, 50, rng.randrange(-30, 30), rng.randrange(-80, 80)])
    c = word(rng.getrandbits(1), min(255, max(0, ep + d)), significand(rng))
    if rng.random() < 0.1:
        c = word(rng.getrandbits(1), rng.choice(SPECIAL_EXPONENTS), rng.choice([0, 1, 1 << 22]))
    if op in ("FADD", "FSUB"):
        return a, c, 0
    return a, b, c if op == "FFMA" else 0


def modifiers(rng: random.Random, op: str) -> dict:
    if op == "I2F":
        return {"rnd": rng.choice(FPU_ROUNDINGS), "ftz": rng.random() < 0.3, "sat": rng.random() < 0.2,
                "signed": rng.random() < 0.6}
    if op in ARITH:
        return {"rnd": rng.choice(FPU_ROUNDINGS), "ftz": rng.random() < 0.3, "sat": rng.random() < 0.2}
    if op == "FSETP":
        return {"compare": rng.choice(FPU_COMPARES), "ftz": rng.random() < 0.3}
    return {"ftz": rng.random() < 0.3, "nan": rng.random() < 0.3}


def check(lane, op, a, b, c, mods):
    got, want = lane(op, a, b, c, mods), fpu_eval(op, mods, a, b, c)
    assert got == want, f"{op} {mods} a={a:#x} b={b:#x} c={c:#x}: circuits {got:#x}, definition {want:#x}"


@pytest.mark.parametrize("op", CIRCUIT_OPS)
@examples(6)
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_random_operands_give_the_definitions_bits(lane, op, seed):
    rng = random.Random(seed)
    for _ in range(40):
        a, b, c = operands(rng, op)
        check(lane, op, a, b, c, modifiers(rng, op))


@pytest.mark.parametrize("rnd", FPU_ROUNDINGS)
def test_edges_of_the_datapath(lane, rnd):
    """Hand-picked cases: exact zeros and their signs, cancellation to a subnormal, the largest
    finite value and overflow, the smallest subnormal, ties, NaN and infinity rules, .sat at 1."""
    big, tiny, one = 0x7F7FFFFF, 0x00000001, f32(1.0)
    cases = [
        ("FADD", one, 0x80000000 | one, 0), ("FSUB", one, one, 0), ("FADD", 0x80000000, 0x80000000, 0),
        ("FADD", 0, 0x80000000, 0), ("FFMA", f32(2.0), f32(3.0), f32(-6.0)), ("FMUL", 0x80000000, one, 0),
        ("FADD", big, big, 0), ("FMUL", big, f32(2.0), 0), ("FADD", big, 0x73800000, 0),
        ("FMUL", tiny, f32(0.5), 0), ("FMUL", tiny, f32(1.5), 0), ("FMUL", 0x00800000, f32(0.5), 0),
        ("FADD", f32(1.0), f32(2.0 ** -24), 0), ("FADD", f32(1.0), f32(3 * 2.0 ** -24), 0),
        ("FSUB", f32(1.0), f32(2.0 ** -25), 0), ("FFMA", f32(1.0 + 2 ** -23), f32(1.0 - 2 ** -23), f32(-1.0)),
        ("FMUL", 0x7F800000, 0, 0), ("FADD", 0x7F800000, 0xFF800000, 0), ("FFMA", 0x7F800000, one, 0xFF800000),
        ("FFMA", 0, 0x7F800000, 0x7FC00000), ("FADD", 0x7FC12345, one, 0), ("FMUL", 0xFF800000, f32(-2.0), 0),
        ("FFMA", f32(1e-30), f32(1e-30), f32(1e30)), ("FFMA", f32(1e30), f32(1e30), f32(-1e-30)),
        ("FFMA", f32(3.0), f32(5.0), f32(-15.0)), ("FFMA", 0x00400000, f32(2.0), 0x80800000),
    ]
    for op, a, b, c in cases:
        for ftz in (False, True):
            for sat in (False, True):
                check(lane, op, a, b, c, {"rnd": rnd, "ftz": ftz, "sat": sat})
    for sat_case in (f32(1.0), f32(1.0 + 2 ** -23), f32(0.99999994), 0x80000000, 0x7F800000, 0xFF800000):
        check(lane, "FMUL", sat_case, one, 0, {"rnd": rnd, "sat": True})


def test_int_to_float_on_its_edges(lane):
    """I2F (X * 1.0 + Z of the integer's two parts, rounded once): zero, +-1, the extremes of s32
    and u32, exact 24-bit values, ties and near-ties above 2^24 (both parts non-zero), a negative
    s32 whose complement's low part is all ones (the + 1 carries into the high part), every
    rounding mode, signed and unsigned, .sat."""
    words = [0, 1, 2, 0xFFFFFFFF, 0xFFFFFFFE, 0x80000000, 0x80000001, 0x7FFFFFFF, 0x00FFFFFF, 0x01000000,
             0x01000001, 0x01000002, 0x01000003, 0x02000006, 0xFE000003, 0xFEFFFFFF, 0xFF800000, 0xFF800001,
             0x007FFFFF, 0x00800000, 0x00800001, 0xFF7FFFFF, 0x7FFFFFC0, 0x7FFFFF80, 0x7FFFFF7F, 0x12345678]
    for w in words:
        for rnd in FPU_ROUNDINGS:
            for signed in (False, True):
                check(lane, "I2F", w, 0, 0, {"rnd": rnd, "signed": signed})
                check(lane, "I2F", w, 0, 0, {"rnd": rnd, "signed": signed, "sat": True, "ftz": True})


def test_compares_min_max_on_every_pair_of_specials(lane):
    """Zeros of both signs, subnormals (flushed or not), normals, infinities, NaNs: every pair, every
    compare and min/max mode (the .ftz variants on a cycle through the pairs)."""
    values = [0, 0x80000000, 1, 0x80000001, 0x007FFFFF, f32(1.0), f32(-1.0), f32(2.0), 0x7F800000, 0xFF800000,
              0x7FC00000, 0xFFC00001]
    for i, a in enumerate(values):
        for j, b in enumerate(values):
            ftz = (i + j) % 3 == 0
            for cmp in FPU_COMPARES:
                check(lane, "FSETP", a, b, 0, {"compare": cmp, "ftz": ftz})
            for op in ("FMIN", "FMAX"):
                check(lane, op, a, b, 0, {"ftz": ftz, "nan": (i * j) % 2 == 1})


def test_the_lane_is_a_few_thousand_neurons(lane):
    """The unit's width per lane (docs/float_units.md records it): a regression guard."""
    assert 5000 < lane.neurons < 8000
