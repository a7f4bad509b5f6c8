"""The compact engine (`qwengpu.engines.compact.CompactEngine`) is the stock Qwen3.5 forward:

- on random Qwen3.5 models (dense keys, decaying heads, conv taps: every general path) and on
  compiled circuits, its logits follow the stock forward's, in the chunked prefill path and the
  cached decode path, within fp32 summation-order noise;
- on the machine, against the reference compact engine (`ReferenceEngine`) token by token: the same
  tokens, the same states, the same hooks' views;
- a prompt run as blocks of tokens (`forward(..., block=B)`) is bit for bit the same run token
  after token: logits, states, conv windows and margins;
- products with tiny inputs (subnormal results), which it computes by hand to spare the CPU's
  microcode assists, are bit for bit the float32 products;
- a batch of sequences stepped together gives every sequence exactly its own run;
- `run_many` gives each launch what its single run gives, on both model paths.
"""
import random

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from numba import njit
from prefill import same_run

import qwengpu
from qwengpu import suite
from qwengpu.compiler import Program, compile_program, gadgets, memory
from qwengpu.engines import compact_engine, reference_engine
from qwengpu.engines.compact import CompactEngine
from qwengpu.engines.floats import SCALE_UP, expf, silu, tiny_product
from qwengpu.engines.kernels import top2
from qwengpu.engines.reference import ReferenceEngine
from qwengpu.machine.config import TINY
from qwengpu.runtime.checkpoint import compile_machine

FAST = settings(max_examples=5, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture])


def _random_qwen(seed: int, hk=2, hv=4, dk=16, dv=8, layers=4, width=48, vocab=64):
    """A random Qwen3.5 text model: GDN layers with dense keys, decays and conv taps, and inert
    full-attention layers (the compact engine runs models whose attention layers add nothing)."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    torch.manual_seed(seed)
    types = ["linear_attention", "linear_attention", "full_attention", "linear_attention"][:layers]
    cfg = Qwen3_5TextConfig(vocab_size=vocab, hidden_size=width, intermediate_size=64, num_hidden_layers=layers,
                            layer_types=types, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                            linear_num_key_heads=hk, linear_num_value_heads=hv, linear_key_head_dim=dk,
                            linear_value_head_dim=dv, linear_conv_kernel_dim=4, tie_word_embeddings=False)
    model = Qwen3_5ForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for L, layer in enumerate(model.model.layers):
            for p in layer.parameters():
                if p.dim() >= 1:
                    p.normal_(0, 0.3)
            if types[L] == "full_attention":
                layer.self_attn.o_proj.weight.zero_()
            else:
                layer.linear_attn.A_log.uniform_(-3, 0.5)           # decays: exp(g) < 1
        model.model.embed_tokens.weight.normal_(0, 1)
        model.lm_head.weight.normal_(0, 0.3)
    return model


def _stock_logits(model, ids, mode):
    from transformers import DynamicCache
    with torch.no_grad():
        if mode == "prefill":
            return model(input_ids=torch.tensor([ids])).logits[0]
        cache, out = DynamicCache(config=model.config), []
        for t in ids:
            out.append(model(input_ids=torch.tensor([[t]]), use_cache=True, cache=cache).logits[0, -1])
        return torch.stack(out)


def _engine_logits(engine, ids):
    st_ = engine.new_state()
    return torch.stack([engine.step(t, st_).clone() for t in ids]), st_


@FAST
@given(st.integers(0, 2 ** 31 - 1))
@example(47112)
def test_random_qwen35_models_match_the_stock_forward(seed):
    """General weights: keys dense after SiLU, decaying heads, a causal conv over earlier tokens.
    The engine is as close to the stock forward as its two paths (decode, prefill) are to each
    other: on some models (seed 47112) fp32 rounding through the decaying heads puts those 1.2e-4
    apart, ten times the relative 2e-5 that holds for most."""
    model = _random_qwen(seed)
    ids = random.Random(seed).choices(range(64), k=40)
    engine = CompactEngine(ReferenceEngine(model))
    got, state = _engine_logits(engine, ids)
    scale = float(got.abs().max())
    stock = {mode: _stock_logits(model, ids, mode) for mode in ("decode", "prefill")}
    paths = float((stock["decode"] - stock["prefill"]).abs().max())
    for mode, want in stock.items():
        assert float((got - want).abs().max()) <= max(2e-5 * max(1.0, scale), 2 * paths), mode
    ref = ReferenceEngine(model)
    rs = ref.new_state()
    for t in ids:
        ref.step(t, rs)
    for L in engine.gdn_layers:
        np.testing.assert_allclose(state.recurrent_array(L), rs.recurrent[L].numpy(), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def tiny():
    return compile_machine(TINY, dense=False)


@FAST
@given(st.integers(0, 2 ** 31 - 1), st.integers(2, 40))
def test_a_block_prefill_is_the_token_by_token_run_on_random_models(seed, block):
    """Dense keys, decays and conv taps over earlier tokens: a prompt in blocks (the last one
    partial) is bit for bit the run token after token, and follows the stock prefill."""
    model = _random_qwen(seed)
    ids = random.Random(seed).choices(range(64), k=37)
    engine = CompactEngine(ReferenceEngine(model))
    got = same_run(engine, ids, block)
    want = _stock_logits(model, ids, "prefill")[-1]
    assert float((got - want).abs().max()) <= 2e-5 * max(1.0, float(got.abs().max()))


@FAST
@given(st.integers(0, 2 ** 31 - 1), st.integers(1, 20))
def test_a_captured_run_is_the_hooked_run(seed, chunk):
    """`forward_captured` (the lab's taps: a prompt in blocks, `chunk` tokens a call) gives the
    hooked run's GDN inputs, logits, states and margins, bit for bit, then steps on as it does."""
    model = _random_qwen(seed)
    ids = random.Random(seed).choices(range(64), k=23)
    engine = CompactEngine(ReferenceEngine(model))
    hooked, captured = [], []
    s1, s2 = engine.new_state(), engine.new_state()
    G, C = len(engine.gdn_layers), max(engine.hk * engine.dk, engine.hv * engine.dv)
    buffer = np.zeros((chunk, G, 6, C), np.float32)      # the caller's, reused by every chunk and call
    for part in (ids, ids[:1]):             # the prompt, then one decode step
        want = engine.forward(part, s1, gdn_hook=lambda L, g: hooked.append(g))
        got = engine.forward_captured(part, s2, lambda cap: captured.append(cap.copy()), chunk=chunk, buffer=buffer)
        assert torch.equal(got, want)
    assert np.array_equal(s1.recurrent, s2.recurrent) and np.array_equal(s1.conv, s2.conv)
    assert (s1.length, s1.residual_worst, s1.noise_worst, s1.noise_at) == \
        (s2.length, s2.residual_worst, s2.noise_worst, s2.noise_at)
    cap = np.concatenate(captured)                       # [tokens, G, 6, C]
    assert cap.shape[:2] == (len(ids) + 1, G)
    kd, vd, hv = engine.hk * engine.dk, engine.hv * engine.dv, engine.hv
    for i, g in enumerate(hooked):
        row = cap[i // G, i % G]
        for field, n, x in ((0, kd, g.q), (1, kd, g.k), (2, vd, g.v), (3, hv, g.beta), (4, hv, g.decay), (5, vd, g.z)):
            assert np.array_equal(row[field, :n], x.reshape(-1)), field


@pytest.mark.parametrize("seed, dk, chunk", [(0, 16, 5), (1, 160, 16)])
def test_a_run_capturing_the_taps_reduces_the_hooked_runs_rows_as_numpy_does(seed, dk, chunk):
    """`forward_captured(taps=True)` (the lab's taps reduced inside the compiled loop): the same
    logits and states as the hooked run, and per token and GDN layer numpy's reductions of the
    hooked run's rows, bit for bit: every key head's top entry of q and k (index, value) and
    their sums of squares (numpy's pairwise float32 sum; dense random keys, rows of 16 and of 160:
    longer than numpy's 128-term blocks), the output gate of its first value head, every value
    head's beta, decay and |v|^2."""
    from qwengpu.engines import kernels
    model = _random_qwen(seed, dk=dk)
    ids = random.Random(seed).choices(range(64), k=21)
    engine = CompactEngine(ReferenceEngine(model))
    hooked, captured = [], []
    s1, s2 = engine.new_state(), engine.new_state()
    for part in (ids, ids[:1]):
        want = engine.forward(part, s1, gdn_hook=lambda L, g: hooked.append(g))
        got = engine.forward_captured(part, s2, lambda cap: captured.append(cap.copy()), chunk=chunk, taps=True)
        assert torch.equal(got, want)
    assert np.array_equal(s1.recurrent, s2.recurrent) and (s1.noise_worst, s1.noise_at) == (s2.noise_worst, s2.noise_at)
    cap = np.concatenate(captured)
    G, hk, group = len(engine.gdn_layers), engine.hk, engine.hv // engine.hk
    assert cap.shape == (len(ids) + 1, G, kernels.TAP_FIELDS, engine.hv)
    for i, g in enumerate(hooked):
        row = cap[i // G, i % G]
        q, k, v = g.q[0], g.k[0], g.v[0]
        qs, ks = q.argmax(-1), k.argmax(-1)
        for field, want in ((kernels.TAP_QS, qs), (kernels.TAP_QW, q[np.arange(hk), qs]), (kernels.TAP_QSQ, (q * q).sum(-1)),
                            (kernels.TAP_KS, ks), (kernels.TAP_KW, k[np.arange(hk), ks]), (kernels.TAP_KSQ, (k * k).sum(-1)),
                            (kernels.TAP_Z, g.z[0, ::group, 0]), (kernels.TAP_BETA, g.beta[0]),
                            (kernels.TAP_DECAY, g.decay[0]), (kernels.TAP_VSQ, (v * v).sum(-1))):
            assert np.array_equal(row[field, :len(want)], want), field


def test_a_run_capturing_the_taps_names_the_rows_each_update_moved():
    """`forward_captured(taps=True)`'s TAP_WROW: per token and value head, the one state row its
    update changed (-1: none changed), or -2 (several may have); without decays (a decay moves
    every row) on dense random keys and on keys made one-hot. TAP_WMAX bounds how far that row's
    values moved: by at most twice it (0 where none moved)."""
    from qwengpu.engines import kernels
    ids = random.Random(3).choices(range(64), k=12)
    seen = {-2: 0, -1: 0, "one": 0}
    for one_hot in (False, True):
        model = _random_qwen(3, dk=8)
        with torch.no_grad():
            for layer in model.model.layers:
                if hasattr(layer, "linear_attn"):
                    gdn = layer.linear_attn
                    gdn.A_log.fill_(-float("inf"))          # no decay
                    if one_hot:                            # each key head's first channel only
                        kd, dk = gdn.key_dim, gdn.head_k_dim
                        for c in range(kd, 2 * kd):
                            if (c - kd) % dk:
                                gdn.in_proj_qkv.weight[c].zero_()
        engine = CompactEngine(ReferenceEngine(model))
        state = engine.new_state()
        for tok in ids:
            before = state.recurrent.copy()
            caps = []
            engine.forward_captured([tok], state, lambda cap: caps.append(cap.copy()), taps=True)
            changed = (before != state.recurrent).any(-1)             # [G, hv, dk]
            for g in range(changed.shape[0]):
                for v in range(changed.shape[1]):
                    w = int(caps[0][0, g, kernels.TAP_WROW, v])
                    term = float(caps[0][0, g, kernels.TAP_WMAX, v])
                    rows = set(np.nonzero(changed[g, v])[0])
                    if w == -1:
                        assert not rows and term == 0, (g, v)
                        seen[-1] += 1
                    elif w >= 0:
                        assert rows <= {w}, (g, v, w, rows)
                        moved = np.abs(state.recurrent[g, v, w].astype(np.float64) - before[g, v, w]).max()
                        assert term > 0 and moved <= 2 * term, (g, v, moved, term)
                        seen["one"] += 1
                    else:
                        assert w == -2
                        seen[-2] += 1
    assert seen[-2] and seen["one"], seen


@pytest.mark.parametrize("n", [1, 7, 8, 64, 129, 512, 1000])
def test_the_compiled_sum_of_squares_is_numpys(n):
    """`kernels._pairwise_squares`, the taps' sums of squares in the compiled loop: numpy's float32
    `(x * x).sum()` bit for bit (its pairwise summation), on rows of every length class."""
    from qwengpu.engines.kernels import _pairwise_squares
    rng = np.random.default_rng(n)
    for _ in range(200):
        x = (rng.standard_normal(n + 3) * rng.uniform(1e-3, 1e3)).astype(np.float32)
        x[rng.random(n + 3) < 0.4] = 0
        assert _pairwise_squares(x, 3, n) == (x[3:] * x[3:]).sum()


@FAST
@given(st.sampled_from(["dot", "syncwarp", "switch_sparse", "shift_clamp", "atomic_inc_dec", "grid_2d"]),
       st.integers(2, 33), st.integers(0, 60))
def test_a_block_prefill_is_the_token_by_token_run_on_the_machine(tiny, name, block, start):
    """A launch's prompt and generated tokens, from a state already part-way through (the blocks'
    positions continue the state's), in blocks: bit for bit the run token after token."""
    engine = tiny.compact_engine()
    r = qwengpu.run(suite.get(name).ptx(), suite.get(name).spec(), engine="sim", config=TINY)
    ids = [tiny.token_id(t) for t in r.extra["prompt"] + r.extra["generated"]]
    same_run(engine, ids[start:], block, head=ids[:start])


@pytest.mark.parametrize("name", ["dot", "shift_clamp"])
def test_the_lm_head_by_codes_is_the_lm_head_by_segments(tiny, name):
    """The LM head run by codes (few distinct weights per column) gives the logits of the
    segment-by-segment product bit for bit, on every pass of a launch; so does a random model's
    dense head (all its weights distinct)."""
    ref = tiny.reference_engine()
    by_codes = CompactEngine(ref, tiny.probes, tiny.lattices)
    by_segments = CompactEngine(ref, tiny.probes, tiny.lattices, lm_table=False)
    assert by_codes.W.lm_codes.shape[0] > 0 and by_segments.W.lm_codes.shape[0] == 0
    r = qwengpu.run(suite.get(name).ptx(), suite.get(name).spec(), engine="sim", config=TINY)
    ids = [tiny.token_id(t) for t in r.extra["prompt"] + r.extra["generated"]]
    a, b = _engine_logits(by_codes, ids)[0], _engine_logits(by_segments, ids)[0]
    assert np.array_equal(a.numpy().view(np.int32), b.numpy().view(np.int32))
    fast = ReferenceEngine(_random_qwen(3))
    a = _engine_logits(CompactEngine(fast), list(range(40)))[0]
    b = _engine_logits(CompactEngine(fast, lm_table=False), list(range(40)))[0]
    assert np.array_equal(a.numpy().view(np.int32), b.numpy().view(np.int32))


def _memory_program(seed):
    """Circuits with a GDN memory (one-hot and binary addresses), adders and products: the
    compiler's exactly sparse keys, queries and write enables."""
    rng = random.Random(seed)
    prog = Program("engine")
    a = prog.input_bits("a", 8)
    b = prog.input_bits("b", 8)
    addr = prog.input_bits("addr", 3)
    hot = prog.input_onehot("slot", 4)
    s = gadgets.add(prog, a, b)
    gadgets.multiply(prog, prog.slice(a, 0, 4), prog.slice(b, 0, 4))
    ram = memory.GDNMemory(prog, "ram", slots=8, width=8, field_bits=4)
    ram.write(addr, s)
    r = ram.read(addr)
    tab = memory.GDNMemory(prog, "tab", slots=4, width=8)
    tab.write(hot, r, enable=prog.slice(a, 0, 1))
    gadgets.mux(prog, prog.slice(b, 0, 1), [tab.read(hot), a])
    tokens = [prog.token(f"t{i}", a=rng.randrange(256), b=rng.randrange(256), addr=rng.randrange(8),
                         slot=rng.randrange(4)).text for i in range(60)]
    return prog, tokens


@FAST
@given(st.integers(0, 2 ** 31 - 1))
def test_compiled_circuits_match_the_stock_forward_and_the_reference_engine(seed):
    prog, tokens = _memory_program(seed)
    c = compile_program(prog)
    model = c.model()
    ids = [c.token_id(t) for t in tokens]
    engine = compact_engine(c)
    got, state = _engine_logits(engine, ids)
    ref = reference_engine(c)
    rs = ref.new_state()
    want_ref = torch.stack([ref.step(t, rs).clone() for t in ids])
    # the same arithmetic but for the C library's exp against torch's (an ulp, here and there)
    assert float((got - want_ref).abs().max()) <= 1e-5
    for L in engine.gdn_layers:
        np.testing.assert_allclose(state.recurrent_array(L), rs.recurrent[L].numpy(), rtol=1e-6, atol=1e-12)
    for mode in ("decode", "prefill"):
        want = _stock_logits(model, ids, mode)
        assert (got.argmax(-1) == want.argmax(-1)).all(), mode
        assert float((got - want).abs().max()) < 1e-3, mode


def test_keys_and_queries_are_exactly_sparse():
    """The compiler's off slots give SiLU exactly 0, so every key and query has one non-zero
    entry: the engine touches one row per head."""
    prog, tokens = _memory_program(1)
    c = compile_program(prog)
    engine = compact_engine(c)
    seen = []
    state = engine.new_state()
    for t in tokens[:20]:
        engine.step(c.token_id(t), state, gdn_hook=lambda L, g: seen.append(g))
    assert seen
    for g in seen:
        for x in (g.q, g.k):
            nz = (x != 0).sum(-1)
            assert set(np.unique(nz)) <= {0, 1}


def test_hooks_see_what_the_reference_engine_sees():
    prog, tokens = _memory_program(2)
    c = compile_program(prog)
    ids = [c.token_id(t) for t in tokens[:12]]
    views = []
    for engine in (compact_engine(c), reference_engine(c)):
        hid, gates = {}, {}
        engine.forward(ids, engine.new_state(),
                       hidden_hook=lambda s, h: hid.setdefault(s, []).append(h.clone()),
                       gate_hook=lambda L, g: gates.setdefault(L, []).append(g.clone()))
        views.append(({s: torch.cat(v) for s, v in hid.items()}, {L: torch.cat(v) for L, v in gates.items()}))
    (h1, g1), (h2, g2) = views
    assert h1.keys() == h2.keys() and g1.keys() == g2.keys()
    for s in h1:
        assert torch.allclose(h1[s], h2[s], atol=1e-5)
    for L in g1:
        assert torch.allclose(g1[L], g2[L], atol=1e-4)


def test_machine_tokens_states_and_margins_match_the_reference_engine(tiny):
    k = suite.get("dot")
    new = qwengpu.run(k.ptx(), k.spec(), engine="compact", machine=tiny, progress=False, check_states=True)
    ref = qwengpu.run(k.ptx(), k.spec(), engine="compact-ref", machine=tiny, progress=False, check_states=True)
    assert new.extra["generated"] == ref.extra["generated"]
    assert new.extra["states_checked"] == ref.extra["states_checked"] == new.steps
    assert all((a == b).all() for a, b in zip(new.buffers, ref.buffers) if a is not None)
    m1, m2 = new.margins(), ref.margins()
    assert m1.keys() == m2.keys() >= {"logit_gap", "memory", "residual", "form_noise"}
    for key in m1:
        assert m1[key] == pytest.approx(m2[key], abs=1e-4)
    assert new.extra["form_noise_at"] == ref.extra["form_noise_at"]


@FAST
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30))
def test_a_batch_steps_every_sequence_exactly_as_alone(tiny, order):
    """Sequences stepped together, some sitting out some steps, give bit for bit their own runs."""
    engine = tiny.compact_engine()
    kernels = ["dot", "syncwarp", "switch_sparse", "shift_clamp"]
    streams = []
    for name in kernels:
        r = qwengpu.run(suite.get(name).ptx(), suite.get(name).spec(), engine="sim", config=TINY)
        streams.append([tiny.token_id(t) for t in r.extra["prompt"] + r.extra["generated"]])
    batch = engine.new_batch(len(kernels))
    for b, s in enumerate(streams):
        engine.forward(s[:40], batch.states[b])
    pos = [40] * len(kernels)
    alone = [engine.new_state() for _ in kernels]
    for b, s in enumerate(streams):
        engine.forward(s[:40], alone[b])
    for b in order:                       # the sequences that step this time: b and every one after it
        toks = [streams[j][pos[j]] if j >= b else None for j in range(len(kernels))]
        logits = engine.step_batch(toks, batch).clone()
        for j in range(b, len(kernels)):
            want = engine.step(streams[j][pos[j]], alone[j])
            assert torch.equal(logits[j], want)
            pos[j] += 1
    for b in range(len(kernels)):
        assert np.array_equal(batch.recurrent[b], alone[b].recurrent)
        assert batch.states[b].length == alone[b].length


def test_run_many_gives_each_launch_its_single_run(tiny):
    names = ["dot", "syncwarp", "switch_sparse", "atomic_inc_dec", "early_return", "grid_2d"]
    ks = [suite.get(n) for n in names]
    single = [qwengpu.run(k.ptx(), k.spec(), engine="compact", machine=tiny, progress=False) for k in ks]
    batch = qwengpu.run_many([k.ptx() for k in ks], [k.spec() for k in ks], engine="compact", machine=tiny,
                             progress=False, check_states=True)
    for a, b in zip(single, batch):
        assert a.extra["generated"] == b.extra["generated"]
        assert all((x == y).all() for x, y in zip(a.buffers, b.buffers) if x is not None)
        assert a.margins() == b.margins()
        assert b.extra["states_checked"] == b.steps


def test_run_many_returns_or_raises_a_failing_launch(tiny):
    from qwengpu.semantics.faults import MemoryFault
    bad = "__global__ void oob(int *x) { x[threadIdx.x + 1000000] = 1; }"
    ok = suite.get("dot")
    launches = [ok.spec(), {"grid": 1, "block": 4, "args": [{"buffer": "int32", "size": 4}]}]
    out = qwengpu.run_many([ok.ptx(), qwengpu.compile_cuda(bad)], launches, engine="compact", machine=tiny,
                           progress=False, return_exceptions=True)
    assert out[0].buffers[2][0] == 32 and isinstance(out[1], MemoryFault)
    with pytest.raises(MemoryFault):
        qwengpu.run_many([ok.ptx(), qwengpu.compile_cuda(bad)], launches, engine="compact", machine=tiny,
                         progress=False)


def test_run_many_on_the_stock_forward_left_pads_a_batch(tmp_path):
    """The stock transformers forward with a batch dimension (prompts of different lengths,
    left-padded; sequences ending at different tokens)."""
    machine = qwengpu.build_gpu("tiny", out=tmp_path / "tiny", progress=False)
    names = ["dot", "syncwarp"]
    ks = [suite.get(n) for n in names]
    batch = qwengpu.run_many([k.ptx() for k in ks], [k.spec() for k in ks], engine="model", machine=machine,
                             progress=False, device="cpu", check_states=True)
    for k, res in zip(ks, batch):
        sim = qwengpu.run(k.ptx(), k.spec(), engine="sim", config=TINY)
        assert res.extra["generated"] == sim.extra["generated"]
        assert res.extra["states_checked"] == res.steps
        assert res.extra["min_logit_gap"] > 8
        assert all((x == y).all() for x, y in zip(res.buffers, sim.buffers) if x is not None)
    # each sequence measures its own form noise (dot's smallest). TINY's emitter forms reach
    # ~0.145 since whole-word memories (docs/machine.md, "Numerical noise"): above the 0.1 premise
    # COMPACT keeps (0.05), within the steps' tolerance (0.225)
    assert batch[0].extra["form_noise"] < batch[1].extra["form_noise"] < 0.2


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.integers(-149, 20), st.integers(-60, 60))
def test_tiny_products_are_the_float32_products(bits, x_exp, w_exp):
    """`tiny_product(w, x * 2^149)` == float32 w * x, sign of zero and ties included, for any
    input (a column takes it for inputs below its `ctiny` threshold, which depends on its weights:
    subnormal or not) and weights small and large."""
    rng = np.random.default_rng(bits)
    x = np.float32(rng.uniform(1, 2) * 2.0 ** x_exp * rng.choice([-1, 1]))
    ws = rng.uniform(1, 2, 64).astype(np.float32) * np.float32(2.0 ** w_exp) * rng.choice([-1, 1], 64)
    ws[:4] = [1.5, -0.5, 3.0, 0.75]                  # ties on the subnormal grid for odd mantissas
    xs = np.float64(x) * SCALE_UP
    with np.errstate(under="ignore", over="ignore"):
        want = (ws * x).astype(np.float32)
    got = np.array([tiny_product(w, xs) for w in ws], np.float32)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


@njit
def _library_silu(xs, out_exp, out_silu):
    """The C library's expf (numba calls it for np.exp on a float32) and SiLU with it, in float32."""
    for i in range(xs.shape[0]):
        x = xs[i]
        out_exp[i] = np.exp(-x)
        if x >= np.float32(17.0) or x == 0:
            out_silu[i] = x
        elif x <= np.float32(-89.0):
            out_silu[i] = x * np.float32(0.0)
        else:
            out_silu[i] = x / (np.float32(1.0) + np.exp(-x))


@njit
def _engine_silu(xs, out_exp, out_silu):
    for i in range(xs.shape[0]):
        x = xs[i]
        out_exp[i] = expf(min(max(-x, np.float32(-17.0)), np.float32(89.0)))
        out_silu[i] = silu(x)


def test_the_engines_exp_and_silu_are_the_c_librarys():
    """`expf` (glibc's algorithm as straight-line code, so that SiLU loops vectorise) is bit for bit
    the C library's expf on SiLU's range [-17, 89] (every float32 of it was compared once, off
    line; here a random sample and the edges), and `silu` is x / (1 + exp(-x)) with it, the ends
    included (SiLU(x) = x from 17 up, -0 from -89 down, +-0 itself)."""
    rng = np.random.default_rng(0)
    edges = np.array([0.0, -0.0, 17.0, np.nextafter(17, 0), -17.0, -89.0, np.nextafter(-89, 0), -88.72283935546875,
                      np.nextafter(-88.72283935546875, -100), -88.8, 1e-30, -1e-30, 1e-42, -1e-42, 1e30, -1e30,
                      np.inf, -np.inf], np.float32)
    xs = np.concatenate([edges, rng.uniform(-89, 17, 200_000).astype(np.float32),
                         (rng.uniform(-1, 1, 100_000) * 2.0 ** rng.integers(-149, 4, 100_000)).astype(np.float32)])
    want_exp, want_silu = np.zeros_like(xs), np.zeros_like(xs)
    got_exp, got_silu = np.zeros_like(xs), np.zeros_like(xs)
    _library_silu(xs, want_exp, want_silu)
    _engine_silu(xs, got_exp, got_silu)
    in_range = (xs > -89) & (xs < 17)
    assert np.array_equal(got_exp[in_range].view(np.int32), want_exp[in_range].view(np.int32))
    assert np.array_equal(got_silu.view(np.int32), want_silu.view(np.int32))


def test_top2():
    x = torch.tensor([1.0, 5.0, 3.0, 5.0, -2.0])
    assert top2(x) == (1, 0.0)                   # the first of equals, as argmax
    assert top2(torch.tensor([0.5, -1.0, 2.5])) == (2, 2.0)
    assert top2(x.double()) == (1, 0.0)          # not float32: torch.topk


def test_soak_runs_a_long_launch_exactly_and_follows_its_margins(tmp_path, capsys):
    """`qwengpu soak` on a short run: the loop count reaches the token count, the result is the
    interpreter's, every window has its margins, and the plot and JSON are written."""
    import json

    from qwengpu.cli import main
    code = main(["soak", "--tokens", "3000", "--window", "1000", "--quiet", "--json", str(tmp_path / "s.json"),
                 "--plot", str(tmp_path / "s.png")])
    out = capsys.readouterr().out
    assert code == 0 and "exact" in out
    rep = json.loads((tmp_path / "s.json").read_text())
    assert rep["exact"] and rep["tokens"] >= 3000
    assert [w["end"] for w in rep["windows"]][:3] == [1000, 2000, 3000]
    for w in rep["windows"]:
        assert w["logit_gap"] > 8 and w["memory"] > 8 and w["residual"] > 0.4 and 0 < w["form_noise"] < 0.25
    assert (tmp_path / "s.png").stat().st_size > 10_000
