"""The recorder's fast path (`qwengpu.lab.recorder`: the compact engine's compiled captures, the
prompt in blocks, the states kept as rows, only the moved slots decoded) against the eager one (the
engine's per-token GDN hook, full copies of the states, the compiler's `decode_words` on the moved
slots and a machine state made afresh at every pass): the same view at every pass, on the built-in
machine (dot) and on the float unit's (saxpy)."""
import json

import numpy as np
import pytest

from qwengpu import suite
from qwengpu.compiler.placement import decode_words
from qwengpu.engines import kernels
from qwengpu.engines.compact import CompactEngine
from qwengpu.lab import buffers, recorder, trace_launch
from qwengpu.lab.payload import (attention_payload, gdn_payload, layer_attention_payload, machine_gdn_bytes,
                                 machine_snapshot_payload)
from qwengpu.machine.config import COMPACT, COMPACT_FPU
from qwengpu.runtime.checkpoint import load_machine
from qwengpu.runtime.readback import state_of_words


def _hooked_capture(engine, token_ids, state, on_gdn, chunk=16, buffer=None, taps=False):
    """`forward_captured` the eager way: token after token through the engine's `gdn_hook`, each
    token's `GDNInputs` laid out as a capture row, or (`taps`) reduced to the taps by numpy
    (`recorder.reduce_rows`), as the recorder reduced them before the compiled loop did."""
    kd, vd, hv = engine.hk * engine.dk, engine.hv * engine.dv, engine.hv
    logits = None
    for tok in token_ids:
        seen = []
        logits = CompactEngine.forward(engine, [tok], state, gdn_hook=lambda L, g: seen.append(g))
        if taps:
            cap = np.zeros((1, len(engine.gdn_layers), kernels.TAP_FIELDS, hv), np.float32)
            for g, x in enumerate(seen):
                qs, qw, qsq, ks, kw, ksq, vsq = recorder.reduce_rows(x.q[0], x.k[0], x.v[0])
                for field, a in ((kernels.TAP_QS, qs), (kernels.TAP_QW, qw), (kernels.TAP_QSQ, qsq),
                                 (kernels.TAP_KS, ks), (kernels.TAP_KW, kw), (kernels.TAP_KSQ, ksq),
                                 (kernels.TAP_Z, x.z[0, ::engine.hv // engine.hk, 0]), (kernels.TAP_BETA, x.beta[0]),
                                 (kernels.TAP_DECAY, x.decay[0]), (kernels.TAP_VSQ, vsq)):
                    cap[0, g, field, :len(a)] = a
        else:
            cap = np.zeros((1, len(engine.gdn_layers), 6, max(kd, vd)), np.float32)
            for g, x in enumerate(seen):
                for field, n, a in ((0, kd, x.q), (1, kd, x.k), (2, vd, x.v), (3, hv, x.beta), (4, hv, x.decay),
                                    (5, vd, x.z)):
                    cap[0, g, field, :n] = a.reshape(-1)
        on_gdn(cap)
    return logits


def _views(view, positions, memories, layers) -> list:
    """Everything the inspector shows of these positions, as comparable text and bytes."""
    out = []
    for p in positions:
        snap = view.snapshot(p)
        shown = [machine_snapshot_payload(view, snap, "reg.emit", ["reg.emit", "mem"]), attention_payload(view, p)]
        shown += [layer_attention_payload(view, p, L) for L in layers]
        shown += [(gdn_payload(view, p, m), machine_gdn_bytes(view, p, m)) for m in memories]
        out.append(json.dumps(shown, sort_keys=True, default=lambda x: x.hex() if isinstance(x, bytes) else repr(x)))
    return out


@pytest.mark.parametrize("name, config, every", [("dot", COMPACT, 1), ("saxpy", COMPACT_FPU, 23)],
                         ids=["dot-compact", "saxpy-compact-fpu"])
def test_a_fast_recording_shows_what_the_eager_one_shows(monkeypatch, name, config, every):
    machine = load_machine(config, progress=False)
    k = suite.get(name)
    fast = trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine)
    with monkeypatch.context() as m:
        m.setattr(CompactEngine, "forward_captured", _hooked_capture)
        m.setattr(recorder, "_stacked_states", lambda state, layers: None)      # the states layer by layer, copied
        m.setattr(recorder, "_SlotDecoder", lambda info: lambda raws, slots: decode_words(raws, info, slots=slots,
                                                                                          per_slot=True))
        m.setattr(recorder, "_machine_state", lambda words, placements, prev, changed: state_of_words(words, placements))
        eager = trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine)
    a, b = fast.trace, eager.trace
    assert a.consistency["exact"] and a.raw_exact
    assert a.consistency == b.consistency and a.raw_error == b.raw_error and a.tokens == b.tokens
    for table in ("taps", "betas", "decays", "vnorms"):
        assert np.array_equal(getattr(a, table), getattr(b, table)), table
    assert a.sparse_error == b.sparse_error
    assert [(r.text, r.machine, r.margins) for r in a.records] == [(r.text, r.machine, r.margins) for r in b.records]
    for L in a.gdn_layers:
        assert np.array_equal(a.base_raw[L], b.base_raw[L]), L
    for ua, ub in zip(a.updates, b.updates, strict=True):
        assert len(ua) == len(ub) and all(x[0] == y[0] and all(np.array_equal(p, q) for p, q in zip(x[1:], y[1:]))
                                          for x, y in zip(ua, ub))
    positions = sorted(set(range(0, len(fast), every)) | {len(fast) - 1})
    memories = ["reg.emit", "mem", "ctl", "lanes"]
    layers = a.gdn_layers[::11]
    assert _views(fast, positions, memories, layers) == _views(eager, positions, memories, layers)


def test_the_slot_decoder_reads_as_decode_words():
    """The recorder's compiled slot decoder (`recorder._SlotDecoder`) on random states of the
    built-in machine's memories, rails around both decision levels, NaNs and infinities among
    them: decode_words' values, written flags and margins (NaN where it gives NaN), slot for slot."""
    from qwengpu.compiler.memory import VALUE_L
    machine = load_machine(COMPACT_FPU, progress=False)
    rng = np.random.default_rng(7)
    G = 4
    seen = {}
    for name in ("mem", "reg.emit", "lanes", "rom.s0", "ctl"):
        info = machine.placements[name]
        layers = sorted(set(info.layers))
        states = {}
        for L in layers:
            shape = (80, 512, 64)
            x = rng.choice(np.float32([0, VALUE_L, VALUE_L / 2, VALUE_L / 4, -VALUE_L, 1e-16, np.nan, np.inf]), shape,
                           p=[0.3, 0.3, 0.15, 0.1, 0.1, 0.047, 0.002, 0.001])
            states[L] = (x + rng.normal(0, 0.01, shape).astype(np.float32) * (rng.random(shape) < 0.5)).astype(np.float32)
            states[L][:, rng.random(512) < 0.3] = 0                  # slots never written
        slots = sorted(rng.choice(info.slots, min(G * 8, info.slots), replace=False).tolist())
        got = recorder._SlotDecoder(info)(states, slots)
        want = decode_words(states, info, slots=slots, per_slot=True)
        for a, b in zip(got, want):
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
        for key, hit in (("nan", np.isnan(want[2]).any()), ("number", np.isfinite(want[2]).any()),
                         ("written", want[1].any()), ("empty", not want[1].all())):
            seen[key] = seen.get(key, False) or bool(hit)
    assert all(seen.values()), seen


def _random_rails(rng, shape):
    """States of rails around both decision levels, NaNs and infinities among them, some slots
    never written (all zeros)."""
    from qwengpu.compiler.memory import VALUE_L
    x = rng.choice(np.float32([0, VALUE_L, VALUE_L / 2, VALUE_L / 4, -VALUE_L, 1e-16, np.nan, np.inf]), shape,
                   p=[0.3, 0.3, 0.15, 0.1, 0.1, 0.047, 0.002, 0.001])
    x = (x + rng.normal(0, 0.01, shape).astype(np.float32) * (rng.random(shape) < 0.5)).astype(np.float32)
    x[..., rng.random(shape[-2]) < 0.3, :] = 0
    return x


def test_the_marked_slots_read_as_decode_words():
    """Every memory's marked slots read in one compiled call (`MarkedSlots`, as the recorder reads
    the compact engine's states after each pass), twice on changing states: each memory's values,
    written flags and per-slot margins as decode_words gives them for every slot (those not read
    the second time as the first read left them), its smallest margin as numpy's min (NaN where
    one is), the slots listed sorted and unmarked."""
    from qwengpu.lab.kept_rows import TakenRows
    from qwengpu.lab.marked_slots import MarkedSlots
    machine = load_machine(COMPACT_FPU, progress=False)
    placements = {n: machine.placements[n] for n in ("mem", "reg.emit", "lanes", "ctl")}
    layers = sorted({L for info in placements.values() for L in info.layers})
    rng = np.random.default_rng(11)
    stacked = _random_rails(rng, (len(layers), 80, 512, 64))
    states = dict(zip(layers, stacked))
    taken = TakenRows(stacked.shape, layers, placements, {})
    marked = MarkedSlots(taken, placements, layers)
    marked.mark_all()
    first = marked.read(stacked)
    assert [(m, n) for m, n, _ in first] == list(enumerate(placements))
    expect = {}
    for name, info in placements.items():
        expect[name] = list(decode_words(states, info, slots=list(range(info.slots)), per_slot=True))
    stacked[:, :, rng.random(512) < 0.5] = _random_rails(rng, (len(layers), 80, 512, 64))[:, :, :1]    # rows change
    states = dict(zip(layers, stacked))
    again = {"mem": sorted(rng.choice(placements["mem"].slots, 40, replace=False).tolist()), "ctl": [0]}
    for name, slots in again.items():
        m = taken.names.index(name)
        for s_ in reversed(slots):                   # listed out of order, as the compiled loop lists them
            taken.slot_marks[m, s_] = True
            taken.marked[m, taken.marked_n[m]] = s_
            taken.marked_n[m] += 1
        now = decode_words(states, placements[name], slots=slots, per_slot=True)
        for part, new in zip(expect[name], now):
            part[..., slots] = new
    assert marked.read(stacked) == [(m, n, again[n]) for m, n in enumerate(placements) if n in again]
    assert not taken.slot_marks.any() and not taken.marked_n.any()
    seen = set()
    for m, name in enumerate(taken.names):
        vals, written = marked.words(m)
        for got, want in zip((vals, written, marked.slot_margin(m)), expect[name]):
            assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), name
        low = expect[name][2].min(initial=np.inf)
        assert np.array_equal(marked.lowest[m], low, equal_nan=True), name
        seen |= {"nan" if np.isnan(low) else "number"}
    assert seen == {"nan", "number"}


def test_the_touched_rows_are_marked_as_numpy_marks_them():
    """`compiled.mark_touched` (the rows some tokens' updates wrote: one row, several or a decay:
    all of the head's) against the numpy indexing it replaces."""
    from qwengpu.lab.compiled import mark_touched
    rng = np.random.default_rng(3)
    wrow = rng.choice(np.float32([-2, -1, 0, 3, 7, 9]), (3, 5, 6), p=[0.04, 0.6, 0.09, 0.09, 0.09, 0.09])
    decay = rng.choice(np.float32([0, -0.5]), (3, 5, 6), p=[0.95, 0.05])
    got = np.zeros((5, 6, 10), np.bool_)
    mark_touched(wrow, decay, got)
    want = np.zeros_like(got)
    w = wrow.astype(np.int64)
    t, g, h = np.nonzero(w >= 0)
    want[g, h, w[t, g, h]] = True
    g, h = np.nonzero(((w == -2) | (decay != 0)).any(0))
    want[g, h] = True
    assert np.array_equal(got, want)
    assert want.all(-1).any() and want.any(-1).any() and not want.any(-1).all()   # heads all, some, none


def test_a_passes_rows_split_by_layer():
    """`PassRows`: the moved rows of a pass as the compiled loop wrote them (layer index, head, row),
    read as one entry per GDN layer in order; none moved: no entries."""
    from qwengpu.lab.kept_rows import PassRows
    at = np.array([[0, 1, 5], [0, 3, 2], [2, 0, 7]], np.int64)
    old, new = np.arange(6.0).reshape(3, 2), -np.arange(6.0).reshape(3, 2)
    rows = PassRows([10, 12, 14], at, old, new)
    assert len(rows) == 2 and [e[0] for e in rows] == [10, 14]
    L, hh, rr, o, n = rows[0]
    assert hh.tolist() == [1, 3] and rr.tolist() == [5, 2] and np.array_equal(o, old[:2]) and np.array_equal(n, new[:2])
    assert rows[1][1].tolist() == [0] and rows[1][2].tolist() == [7]
    assert len(PassRows([10], at[:0], old[:0], new[:0])) == 0


def test_prefault_keeps_an_arrays_contents():
    """`buffers.prefault` asks the system for an array's pages (the taps' tables ahead of their
    filling): what the array holds is unchanged, written rows and untouched zeros alike, and a
    view that is not whole pages is handled (its whole pages only)."""
    import sys
    big = np.zeros((4096, 22, 80), np.float32)
    big[:7] = np.arange(7 * 22 * 80, dtype=np.float32).reshape(7, 22, 80)
    before = big.copy()
    assert buffers.prefault(big[3:2000]) is (sys.platform == "linux")
    assert buffers.prefault(big[5:5]) is False
    assert np.array_equal(big, before)
    rows = buffers.Rows((22, 80))
    for n in (64, 64, 1, 700, 64):                 # the pages of later rows asked for on another thread
        block = rows.add(n)
        assert not block.any()
        block[:] = 1
    assert rows.table().shape == (893, 22, 80) and rows.table().all()


def test_capture_buffers_are_kept_for_the_next_recording():
    """`buffers.reused_buffer` gives a finished recording's buffer of the same shape back (two kept
    at most per shape), else a new one."""
    shape = (3, 5, 7)
    first = buffers.reused_buffer(shape)
    assert first.shape == shape and first.dtype == np.float32
    buffers.give_back_buffer(first)
    assert buffers.reused_buffer(shape) is first
    made = [buffers.reused_buffer(shape) for _ in range(3)]
    for buf in made:
        buffers.give_back_buffer(buf)
    again = [buffers.reused_buffer(shape) for _ in range(3)]
    assert sum(any(a is b for b in made) for a in again) == 2
    assert buffers.reused_buffer((3, 5)).shape == (3, 5)


def test_a_recording_leaves_the_collector_as_it_found_it():
    """A recording freezes the objects alive at its start for the collector (`gc.freeze`) and
    unfreezes them after; objects someone else froze before stay frozen."""
    import gc
    machine = load_machine(COMPACT, progress=False)
    k = suite.get("dot")
    before = gc.get_freeze_count()
    during = []
    trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine,
                 on_token=lambda i, text, state: during.append(gc.get_freeze_count()))
    after = gc.get_freeze_count()
    assert after == before, (before, after)
    if before == 0:
        assert min(during) > 1000, during[:3]          # frozen for the run
    else:                                             # someone else's freeze, left alone
        assert set(during) == {before}, (before, during[:3])
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("seed", range(4))
def test_a_chunks_taps_are_put_as_numpy_puts_them(seed):
    """`_Taps.put_captured` (the compact engine's captures, one compiled loop) against
    `_Taps.put_reduced` (numpy, the stock forward's path) on random captures: dead and live tokens
    (betas 0 or not, gates 0 or not), rows off one-hot, NaNs among the betas and the squares:
    the same tables and the same sparse error."""
    G, hk, group, n = 3, 4, 2, 6
    hv = hk * group
    rng = np.random.default_rng(seed)
    cap = rng.normal(0, 1, (n, G, kernels.TAP_FIELDS, hv)).astype(np.float32)
    cap[:, :, kernels.TAP_BETA] = rng.choice(np.float32([0, 0, 0.5, 1, np.nan if seed % 2 else 0]), (n, G, hv))
    cap[:, :, kernels.TAP_VSQ] = np.abs(cap[:, :, kernels.TAP_VSQ])
    cap[:, :, kernels.TAP_QS] = rng.integers(0, 16, (n, G, hv))
    cap[:, :, kernels.TAP_KSQ] = np.where(rng.random((n, G, hv)) < 0.05 * seed, np.nan, cap[:, :, kernels.TAP_KSQ])
    gate = rng.choice(np.float32([0, 0, 0.7]), (n, G, hk))
    fast, slow = (recorder._Taps(list(range(G)), hk, 16, group) for _ in range(2))
    fast.begin(n)
    fast.put_captured(cap, gate)
    slow.begin(n)
    key = (cap[:, :, f, :hk] for f in (kernels.TAP_QS, kernels.TAP_QW, kernels.TAP_QSQ, kernels.TAP_KS, kernels.TAP_KW,
                                       kernels.TAP_KSQ))
    slow.put_reduced(slice(None), *key, cap[:, :, kernels.TAP_VSQ], cap[:, :, kernels.TAP_BETA], gate,
                     cap[:, :, kernels.TAP_DECAY])
    for table in ("table", "beta_table", "decay_table", "vnorm_table"):
        assert np.array_equal(getattr(fast, table)(), getattr(slow, table)(), equal_nan=True), table
    assert fast.sparse_error == slow.sparse_error
    assert slow.sparse_error > 0
