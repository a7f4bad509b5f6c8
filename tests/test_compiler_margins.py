"""Decision margins (qwengpu.compiler.margins, run.measure_margins, python -m qwengpu.compiler.report):

* every build reports its static margins per kind, node and primitive, all above the fp32 bound for
  the test programs, and an unsafe construction is refused with a CompileError naming the node;
* the measured margins (stock model vs reference evaluator) are exact and near-perfect in fp32;
* bf16, measured: which primitives stay exact and which do not.
"""
from __future__ import annotations

import random

import pytest

from qwengpu.compiler import CompileError, Program, Target, compile_program, gadgets, memory
from qwengpu.compiler import attention as A
from qwengpu.compiler import margins as MG
from qwengpu.compiler import report as R
from qwengpu.compiler.run import measure_margins
from qwengpu.engines import compact_engine

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

#: attention heads are built to exactly the bound (a guaranteed score gap of 32, to rounding)
SAFE = MG.BOUND - 1e-9


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _program():
    rng = random.Random(3)
    prog = Program("mixed")
    a = prog.input_bits("a", 16)
    b = prog.input_bits("b", 16)
    x = prog.input_bits("x", 4)
    addr = prog.input_onehot("addr", 8)
    w = prog.input_bits("w", 1)
    for i in range(48):
        prog.token(f"t{i}", a=rng.randrange(1 << 16), b=rng.randrange(1 << 16), x=rng.randrange(16),
                   addr=rng.randrange(8), w=int(i < 6))
    s = gadgets.add(prog, a, b)
    gadgets.sub(prog, a, b, carry_out=True)
    gadgets.bitwise(prog, "xor", s, b)
    oh = gadgets.decode(prog, x)
    gadgets.lut(prog, oh, [(7 * i) % 16 for i in range(16)], 4)
    gadgets.mux(prog, w, [a, b])
    gadgets.multiply(prog, x, prog.slice(a, 0, 8))
    gadgets.compare(prog, prog.slice(a, 0, 8), prog.slice(b, 0, 8))
    m = memory.GDNMemory(prog, "ram", slots=8, width=16, field_bits=8)
    m.write(addr, s)
    m.read(addr)
    memory.previous(prog, a, 2)
    A.most_recent(prog, w, None, prog.slice(a, 0, 4), name="recent")
    return prog


PROG = _program()
_CACHE = {}


def _compiled():
    if "c" not in _CACHE:
        _CACHE["c"] = compile_program(PROG)
    return _CACHE["c"]


def test_static_margins_are_reported_and_safe():
    rep = _compiled().report["margins"]
    assert rep["bound"] == MG.BOUND == 1.0
    assert rep["min"] >= SAFE and not rep["low"]
    kinds = rep["kinds"]
    for k in ("linear", "step", "gated", "product", "gdn.key", "gdn.value", "gdn.beta", "gdn.gate",
              "gdn.rail", "attention.score", "attention.gate"):
        assert k in kinds and kinds[k]["min"] >= SAFE, k
    # the shapes' design values: linear 32/17, step (44 - 12 - rounding)/17, product (64 - 0.1)/17
    assert kinds["linear"]["min"] == pytest.approx(32 / 17, rel=1e-4)
    assert 1.8 < kinds["step"]["min"] < (44 - 12) / 17
    assert kinds["product"]["min"] == pytest.approx(63.9 / 17, rel=1e-4)
    assert kinds["attention.score"]["min"] == pytest.approx(1.0, abs=1e-6)
    prims = rep["primitives"]
    for p in ("add", "sub", "bitwise", "decode", "lut", "mux", "multiply", "compare", "memory",
              "previous", "most_recent"):
        assert prims[p]["min"] >= SAFE, p
    # one entry per node (primitive instance), each above the bound
    names = {n.name for n in PROG.nodes if n.layer is not None}
    assert names <= set(rep["nodes"])
    assert all(v["min"] >= SAFE for v in rep["nodes"].values())


def test_lattice_distance():
    r = MG._Ranges(PROG)
    a = PROG.vars["a"]
    # 120 (f - t + 1/2) + 16 on an integer form: the values ..., -44, 76, ...: 44 from zero
    d, e = MG.preactivation(120 * (a.f(0) + a.f(1) - 1.5) + 16, r, slope=120)
    assert d == pytest.approx(44) and e == pytest.approx(12, abs=0.01)
    # a form whose coefficients are multiples of 3: the lattice spacing is 3
    d, _ = MG.preactivation(3 * a.f(0) + 3 * a.f(1) - 4, r)
    assert d == pytest.approx(1)
    d, _ = MG.preactivation(a.f(0) + 0.5 * a.f(1) - 0.25, r)
    assert d == pytest.approx(0.25)


def test_a_threshold_on_a_wide_form_is_refused_naming_the_node():
    """n_step without the program skips the 2^12 form limit: the margin check catches it."""
    prog = Program("wide")
    a = prog.input_bits("a", 21)
    prog.token("x", a=5)
    out = prog.bits_var("big", 1)
    prog.circuit("wide_threshold", [out], gadgets.n_step(a.value_lin(), 1 << 20, {out.feature(0): 1.0}))
    with pytest.raises(CompileError, match="wide_threshold.*step"):
        compile_program(prog)
    c = compile_program(prog, Target(check_margins=False))       # reported, not refused
    low = c.report["margins"]["low"]
    assert low and low[0]["node"] == "wide_threshold" and low[0]["margin"] < 0


def test_a_product_outside_the_linear_range_is_refused_naming_the_node():
    prog = Program("prod")
    a = prog.input_bits("a", 4)
    b = prog.input_bits("b", 4)
    prog.token("x", a=3, b=4)
    out = prog.number_var("p", -1500, 0)
    # a - 100 is negative: K = 64 (a_min claimed 0) leaves the gate at a - 36 < 0
    prog.circuit("bad_product", [out], gadgets.n_product(a.value_lin() - 100, b.value_lin(), {out.feature(0): 1.0}))
    with pytest.raises(CompileError, match="bad_product.*product"):
        compile_program(prog)
    ok = Program("prod_ok")
    a = ok.input_bits("a", 4)
    b = ok.input_bits("b", 4)
    ok.token("x", a=3, b=4)
    out = ok.number_var("p", -1500, 0)
    ok.circuit("good_product", [out], gadgets.n_product(a.value_lin() - 100, b.value_lin(),
                                                       {out.feature(0): 1.0}, a_min=-100))
    assert compile_program(ok).report["margins"]["nodes"]["good_product"]["min"] >= SAFE


def test_measured_margins_fp32():
    c = _compiled()
    rng = random.Random(5)
    toks = [t.text for t in PROG.tokens]
    seq = [rng.choice(toks) for _ in range(150)]
    for mode in ("prefill", "decode"):
        m = measure_margins(c, seq, mode)
        assert m["exact"], m["mismatches"][:3]
        assert m["min_code_margin"] > 0.49
        assert set(m["kinds"]) == {"bits", "onehot", "number"}
        for p in ("add", "sub", "bitwise", "decode", "lut", "mux", "multiply", "compare", "memory",
                  "previous", "most_recent", "memory state"):
            assert m["primitives"][p]["min"] > 0.49, p
        assert m["memories"]["ram"]["exact"] and m["memories"]["ram"]["min"] > 0.4999
        assert m["attention"]["recent.attn"]["ratio"] >= 1.0
        assert m["max_rel_dev"] < 1e-2


def _row(name, tokens=120):
    case = next(c for c in R.cases(tokens) if c.name == name)
    return R.run_case(case, bf16=True)


@pytest.mark.parametrize("name", ["bitwise", "lut", "mux", "GDN memory write/read", "previous-token conv"])
def test_bf16_stays_exact(name):
    """Measured: these primitives stay exact with the checkpoint loaded in bf16 (their forms are
    0/1 codes with small coefficients; GDN states are kept in fp32 by the kernels)."""
    row = _row(name)
    assert row["fp32"]["exact"] and row["bf16"]["exact"], row["bf16"]
    assert row["static"] >= SAFE


@pytest.mark.parametrize("name", ["add", "compare", "multiply/product", "attention previous/offset"])
def test_bf16_breaks(name):
    """Measured: bf16 breaks the primitives whose weights or values need more than bf16's 8-bit
    significand (thresholds on multi-bit forms, numbers up to 2^16, rotary offset ladders)."""
    row = _row(name)
    assert row["fp32"]["exact"]
    assert not row["bf16"]["exact"] and row["bf16"]["code_margin"] < 0


def test_report_command(capsys):
    assert R.main(["--only", "lut", "--only", "erase", "--no-bf16", "--no-decode", "--tokens", "40"]) == 0
    out = capsys.readouterr().out
    assert "| lut |" in out and "| erase |" in out


def test_form_noise_is_measured_on_every_gate_and_catches_a_perturbation():
    """`gate_lattices` + `FormNoise`: a run's MLP gate pre-activations, measured against the lattice
    their ideal values lie on. On a clean run the integer forms behind them are within ~1e-3 of
    their lattice (the static margins' premise is 0.1); a gate pushed 0.3 of a spacing off is
    reported with its node. (The compact engine runs GDN and MLP layers: no attention here.)"""
    rng = random.Random(3)
    prog = Program("noise")
    a, b, x = prog.input_bits("a", 16), prog.input_bits("b", 16), prog.input_bits("x", 4)
    addr = prog.input_onehot("addr", 8)
    for i in range(32):
        prog.token(f"t{i}", a=rng.randrange(1 << 16), b=rng.randrange(1 << 16), x=rng.randrange(16),
                   addr=rng.randrange(8))
    s = gadgets.add(prog, a, b)
    gadgets.compare(prog, prog.slice(a, 0, 8), prog.slice(b, 0, 8))
    gadgets.multiply(prog, x, prog.slice(s, 0, 8))
    m = memory.GDNMemory(prog, "ram", slots=8, width=16, field_bits=8)
    m.write(addr, s)
    gadgets.mux(prog, prog.slice(a, 0, 1), [m.read(addr), b])
    c = compile_program(prog, Target(require_attention=False))
    lat = MG.gate_lattices(c)
    probed = sum(len(d["index"]) for d in lat.values())
    gated = sum(1 for ns in c.schedule.mlp.values() for n in ns for nr in n.neurons if nr.shape in ("step", "gated"))
    assert probed >= gated > 0
    ids = [rng.choice(prog.tokens).id for _ in range(150)]
    engine = compact_engine(c)
    noise = MG.FormNoise(lat)
    engine.forward(ids, engine.new_state(), gate_hook=noise)
    assert 0 <= noise.worst < 0.01 and noise.where in {n.name for ns in c.schedule.mlp.values() for n in ns}
    L = min(lat)
    k, period = lat[L]["index"][0], lat[L]["period"][0]
    victim = lat[L]["names"][lat[L]["node"][0]]

    def push(layer, g):
        if layer == L:
            g[:, k] += 0.3 * period
        noise(layer, g)

    noise = MG.FormNoise(lat)
    engine.forward(ids[:20], engine.new_state(), gate_hook=push)
    assert noise.worst == pytest.approx(0.3, abs=0.02) and noise.where == victim
