"""Attention gadgets (qwengpu.compiler.attention): exact hard attention in stock full-attention layers.

* the reference evaluator's semantics == an independent oracle written here (no model);
* the model == the reference evaluator on every variable at every position, in the chunked prefill
  path and the cached one-token decode path (`run.compare`), on random token sequences, short and
  long (>= 300 tokens), for the compact target and for the Qwen3.5-2B attention geometry;
* every head's guaranteed margin is >= MARGIN and the margins measured from the model's own q/k
  agree with the designs;
* the positional score profiles (recency, offset ladders) checked by brute force over the window.
"""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwengpu.compiler import CompileError, Program, compare, compile_program, evaluate
from qwengpu.compiler import attention as A
from qwengpu.compiler.compiling import Target

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
MODEL = settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))

N_KIND = 10           # tokens 0..9 satisfy the kind condition, the rest do not
OFFSETS = {"g1": 1, "g3": 3, "p13": 13, "p64": 64}


def _program():
    prog = Program("attn")
    w = prog.input_bits("w", 1)
    qc = prog.input_bits("qc", 1)
    val = prog.input_bits("val", 5)
    key = prog.input_bits("key", 3)
    qry = prog.input_bits("qry", 3)
    hot = prog.input_onehot("hot", 4)
    qhot = prog.input_onehot("qhot", 4)
    rng = random.Random(11)
    for i in range(40):
        prog.token(f"t{i}", w=int(i < N_KIND), qc=int(rng.random() < 0.85), val=rng.randrange(32),
                   key=rng.randrange(8), qry=rng.randrange(8), hot=rng.randrange(4), qhot=rng.randrange(4))
    out = {}
    out["recent"] = A.most_recent(prog, w, qc, val, name="recent")
    out["recent_not"] = A.most_recent(prog, 1 - w.f(0), None, val, name="recent_not")
    out["lookup"], out["lookup_found"] = A.lookup(prog, key, qry, val, name="lookup", kind_cond=w, found=True)
    out["lookup_hot"] = A.lookup(prog, hot, qhot, key, name="lookup_hot", query_cond=qc)
    out["g1"], out["g3"] = A.gather(prog, {1: val, 3: hot}, name="g")
    out["p13"] = A.previous_token(prog, key, back=13, name="p13")
    out["p64"] = A.previous_token(prog, val, back=64, name="p64")
    return prog, out


def _oracle(prog, tokens):
    """The gadgets' semantics, written out directly from the tokens' input values."""
    vals = [dict({"w": 0, "qc": 0, "val": 0, "key": 0, "qry": 0, "hot": 0, "qhot": 0},
                 **prog.token_by_text[t].values) for t in tokens]
    rows = []
    for t, x in enumerate(vals):
        def last(pred):
            js = [j for j in range(t + 1) if pred(vals[j])]
            return js[-1] if js else None
        r = {}
        j = last(lambda y: y["w"] == 1)
        r["recent"] = vals[j]["val"] if (j is not None and x["qc"]) else 0
        j = last(lambda y: y["w"] == 0)
        r["recent_not"] = vals[j]["val"] if j is not None else 0
        j = last(lambda y: y["w"] == 1 and y["key"] == x["qry"])
        r["lookup"] = vals[j]["val"] if j is not None else 0
        r["lookup_found"] = int(j is not None)
        j = last(lambda y: y["hot"] == x["qhot"])
        r["lookup_hot"] = vals[j]["key"] if (j is not None and x["qc"]) else 0
        r["g1"] = vals[max(t - 1, 0)]["val"]
        r["g3"] = vals[max(t - 3, 0)]["hot"]
        r["p13"] = vals[max(t - 13, 0)]["key"]
        r["p64"] = vals[max(t - 64, 0)]["val"]
        rows.append(r)
    return rows


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The models here are tiny: one thread is faster and steady when the machine is busy."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


PROG, OUT = _program()
TOKENS = [t.text for t in PROG.tokens]
_CACHE = {}


def _compiled(which: str):
    if which not in _CACHE:
        if which == "compact":
            target = Target.compact()
        elif which == "gqa":
            # every gadget's head in one layer, all eight sharing one key/value head
            target = Target.compact(attn_heads=8, attn_kv_heads=1)
        else:
            # the attention geometry of Qwen3.5-2B (8 query heads, 2 kv heads, head_dim 256,
            # rope_theta 1e7, partial rotary 0.25, 3 GDN + 1 full-attention layer pattern); the
            # residual, MLP and (inert) GDN widths are sized to the program to keep the test fast
            target = dataclasses.replace(Target.qwen35_2b(), hidden=None, intermediate=None,
                                         linear_key_heads=None, linear_value_heads=None,
                                         linear_key_dim=None, linear_value_dim=None)
        _CACHE[which] = compile_program(PROG, target)
    return _CACHE[which]


def _seq(seed: int, density: float, n: int) -> list[str]:
    rng = random.Random(seed)
    return [TOKENS[rng.randrange(N_KIND)] if rng.random() < density else TOKENS[rng.randrange(N_KIND, len(TOKENS))]
            for _ in range(n)]


short_seqs = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=40)
densities = st.sampled_from([0.0, 0.005, 0.02, 0.1, 0.5, 1.0])


def _check(c, tokens, mode):
    res = compare(c, tokens, mode)
    assert res.exact, (mode, res.mismatches[:5])
    assert res.checked == len(tokens) * len([v for v in PROG.residual_vars if v.producer is not PROG.embed])
    assert res.min_code_margin > 0.49
    return res


# ---------------------------------------------------------------------------------------------
# semantics


@FAST
@given(st.integers(0, 2 ** 31), densities, st.integers(1, 160))
def test_reference_is_the_oracle(seed, density, n):
    tokens = _seq(seed, density, n)
    ref = evaluate(PROG, tokens)
    for env, want in zip(ref, _oracle(PROG, tokens)):
        for name, value in want.items():
            assert env[OUT[name].name] == value, name


# ---------------------------------------------------------------------------------------------
# model == reference


@MODEL
@given(short_seqs)
def test_compact_short_sequences(tokens):
    c = _compiled("compact")
    for mode in ("prefill", "decode"):
        _check(c, tokens, mode)


@LONG
@given(st.integers(0, 2 ** 31), densities, st.integers(300, 320))
def test_compact_long_sequences(seed, density, n):
    c = _compiled("compact")
    tokens = _seq(seed, density, n)
    for mode in ("prefill", "decode"):
        _check(c, tokens, mode)


def test_compact_far_match():
    """One kind token at position 0 and 900 others: every later position reaches back to it."""
    c = _compiled("compact")
    tokens = [TOKENS[3]] + _seq(5, 0.0, 899)
    _check(c, tokens, "prefill")


@LONG
@given(st.integers(0, 2 ** 31), densities)
def test_qwen35_2b_geometry(seed, density):
    c = _compiled("2b")
    assert c.config.head_dim == 256 and c.config.num_attention_heads == 8
    assert c.config.num_key_value_heads == 2
    tokens = _seq(seed, density, 300)
    _check(c, tokens, "prefill")
    _check(c, tokens, "decode")


@LONG
@given(st.integers(0, 2 ** 31), densities, st.integers(1, 300))
def test_shared_kv_head(seed, density, n):
    c = _compiled("gqa")
    assert len({n.layer for n in PROG.nodes if isinstance(n, A.AttnNode)}) == 1
    tokens = _seq(seed, density, n)
    for mode in ("prefill", "decode"):
        _check(c, tokens, mode)


# ---------------------------------------------------------------------------------------------
# margins


@pytest.mark.parametrize("which", ["compact", "2b", "gqa"])
def test_margins(which):
    c = _compiled(which)
    ds = A.designs(c)
    assert set(ds) == {n.name for n in PROG.nodes if isinstance(n, A.AttnNode)}
    for heads in ds.values():
        for d in heads:
            assert d["guaranteed_margin"] >= A.MARGIN - 1e-6
            assert d["design_margin"] - 2 * d["fp32_error"] >= A.MARGIN - 1e-6
    tokens = _seq(3, 0.05, 300)
    measured = A.measure_margins(c, tokens, "prefill")
    for name, m in measured.items():
        design = min(d["design_margin"] for d in ds[name])
        err = max(d["fp32_error"] for d in ds[name])
        assert m >= A.MARGIN, (name, m)
        assert m >= design - 2 * err, (name, m, design)
    # the decode path sees the same scores
    decoded = A.measure_margins(c, tokens[:100], "decode")
    for name, m in decoded.items():
        assert m >= A.MARGIN, (name, m)


def test_recency_margin_is_tight_at_the_window_edge():
    """With a context of exactly the sequence length and the only kind token at position 0, the
    last query's gap between that key and the current token is the design margin itself."""
    prog = Program("edge")
    w = prog.input_bits("w", 1)
    val = prog.input_bits("val", 3)
    prog.token("k", w=1, val=5)
    prog.token("x", w=0, val=2)
    A.most_recent(prog, w, None, val, name="r", context=256)
    c = compile_program(prog)
    tokens = ["k"] + ["x"] * 255
    res = compare(c, tokens, "prefill")
    assert res.exact, res.mismatches[:5]
    design = A.designs(c)["r.attn"][0]
    measured = A.measure_margins(c, tokens)["r.attn"]
    assert abs(measured - design["design_margin"]) <= 2 * design["fp32_error"] + 0.5
    assert measured >= A.MARGIN


# ---------------------------------------------------------------------------------------------
# score profiles, by brute force


def _freqs(theta: float, head_dim: int) -> np.ndarray:
    """The rotary inverse frequencies exactly as transformers computes them (fp32)."""
    import torch
    dim = int(head_dim * 0.25)
    return (1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))).double().numpy()


GEOMETRIES = {"compact": (2.0 ** 32, 128), "qwen3.5-2b": (1e7, 256)}


@FAST
@given(st.sampled_from(sorted(GEOMETRIES)), st.integers(1, 64), st.sampled_from([80, 300, 1024, 4096]))
def test_offset_profile(geometry, back, context):
    freqs = _freqs(*GEOMETRIES[geometry])
    m = 32.0
    rot, info = A.offset_profile(freqs, back, context, m)
    n = max(context, back + 1)
    f = A._pos_score(rot, freqs, np.arange(n, dtype=np.float64))
    # query t sees keys D = 0..t; it must pick D = min(t, back) with a gap >= m
    for t in range(n):
        row = f[:t + 1]
        want = min(t, back)
        others = np.delete(row, want)
        if len(others):
            assert row[want] - others.max() >= m * (1 - 1e-9), (t, want)
    assert min(info["peak_gap"], info["min_rise"]) >= m * (1 - 1e-9)


@FAST
@given(st.sampled_from(sorted(GEOMETRIES)), st.integers(2, 8192))
def test_recency_profile(geometry, context):
    freqs = _freqs(*GEOMETRIES[geometry])
    m = 32.0
    rot, info = A.recency_profile(freqs, context, m)
    f = A._pos_score(rot, freqs, np.arange(context, dtype=np.float64))
    assert (f[:-1] - f[1:]).min() >= m * (1 - 1e-9)
    assert info["spread"] == pytest.approx(f.max() - f.min())


# ---------------------------------------------------------------------------------------------
# limits and errors


def test_errors():
    prog = Program("bad")
    v = prog.input_bits("v", 2)
    h = prog.input_onehot("h", 3)
    prog.token("a", v=1, h=2)
    with pytest.raises(CompileError):
        A.most_recent(prog, v.f(0), None, h)                 # onehot values have no empty value
    with pytest.raises(CompileError):
        A.gather(prog, {0: v})                               # offsets start at 1
    with pytest.raises(CompileError):
        A.lookup(prog, v, h, v)                              # key and query codes differ
    A.gather(prog, {1: v, 2: v, 3: v}, name="three")         # three heads: the compact target has two
    with pytest.raises(CompileError, match="heads"):
        compile_program(prog)


def test_limits_are_reported():
    freqs = _freqs(*GEOMETRIES["compact"])
    with pytest.raises(CompileError, match="context"):
        A._finish(lambda m: _offset_plan(freqs, 1000, 4096, m), freqs, 128, 4096)
    with pytest.raises(CompileError, match="context"):
        A._finish(lambda m: _recency_plan(freqs, 1 << 16, m), freqs, 128, 1 << 16)


def _offset_plan(freqs, back, context, m):
    rot, info = A.offset_profile(freqs, back, context, m)
    return A.HeadPlan(rot, [], [], {"design_margin": min(info["peak_gap"], info["min_rise"])})


def _recency_plan(freqs, context, m):
    rot, info = A.recency_profile(freqs, context, m)
    M = info["spread"] + m
    return A.HeadPlan(rot, [(None, None, M, 1.0)], [], {"design_margin": min(info["min_step"], m)})


def test_kind_condition_must_be_binary():
    prog = Program("k")
    v = prog.input_bits("v", 2)
    prog.token("a", v=3)
    A.most_recent(prog, v.f(0) + v.f(1), None, v)
    with pytest.raises(CompileError, match="0/1"):
        evaluate(prog, ["a"])
