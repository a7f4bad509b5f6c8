"""The attention of every GPU layer (`qwengpu.lab.attention`): the delta rule unrolled, checked
against a dense recurrence, and on the model: a memory read draws on the last write to its slot."""
from types import SimpleNamespace

import time
from pathlib import Path

import numpy as np
import pytest

from qwengpu import suite
from qwengpu.lab import trace_launch
from qwengpu.lab.attention import (attention_error, attention_window, gdn_weights, head_count, layer_attention,
                                   layer_kind, layers_overview, strongest_sources)
from qwengpu.lab.payload import layer_attention_payload
from qwengpu.lab.record import selection_of


def _synthetic(T=40, hk=2, group=3, dk=5, dv=4, seed=0):
    """A trace of one GDN layer with one-hot keys and queries (some zero, some scaled), random write
    strengths, decays and values, and the dense delta-rule outputs o_t = S_t q_t."""
    rng = np.random.default_rng(seed)
    hv = hk * group
    qs, ks = rng.integers(0, dk, (T, hk)), rng.integers(0, dk, (T, hk))
    qw = rng.choice([0.0, 0.6, 1.0], (T, hk))
    kw = rng.choice([0.0, 0.8, 1.0], (T, hk), p=[0.1, 0.3, 0.6])
    beta = rng.choice([0.0, 0.5, 1.0, 0.3], (T, hv))
    decay = rng.choice([0.0, -0.1], (T, hv))
    v = rng.normal(size=(T, hv, dv)).astype(np.float32)
    v[rng.random((T, hv)) < 0.2] = 0                       # writes of a zero value
    taps = np.zeros((T, 1, hk, 6), np.float32)
    taps[:, 0, :, 0], taps[:, 0, :, 1], taps[:, 0, :, 2], taps[:, 0, :, 3] = qs, qw, ks, kw
    taps[:, 0, :, 4] = beta.reshape(T, hk, group).max(-1)  # each key head's largest write strength
    trace = SimpleNamespace(taps=taps, betas=beta[:, None].astype(np.float32), decays=decay[:, None].astype(np.float32),
                            vnorms=np.linalg.norm(v, axis=-1)[:, None].astype(np.float32), gdn_layers=[0],
                            layers=[SimpleNamespace(kind="linear_attention", role="")], sparse_error=0.0)
    S = np.zeros((hv, dv, dk))
    outs = []
    for t in range(T):
        for h in range(hv):
            c = h // group
            k = np.zeros(dk)
            k[ks[t, c]] = kw[t, c]
            q = np.zeros(dk)
            q[qs[t, c]] = qw[t, c]
            a = np.exp(decay[t, h])
            S[h] = a * S[h] @ (np.eye(dk) - beta[t, h] * np.outer(k, k)) + beta[t, h] * np.outer(v[t, h], k)
        outs.append(np.stack([S[h] @ _q(qs[t, h // group], qw[t, h // group], dk) for h in range(hv)]))
    return trace, v, np.stack(outs)


def _q(slot, w, dk):
    q = np.zeros(dk)
    q[slot] = w
    return q


def test_gdn_weights_unroll_the_delta_rule():
    """sum_s A[t, s] * v_s / |v_s| * max|v| is the layer's output S_t q_t, for every token and head."""
    trace, v, outs = _synthetic()
    vmax = np.linalg.norm(v, axis=-1).max(0)                  # [hv]
    unit = np.where(np.linalg.norm(v, axis=-1, keepdims=True) > 0, v / np.maximum(
        np.linalg.norm(v, axis=-1, keepdims=True), 1e-30), 0)
    for t in range(len(outs)):
        A = gdn_weights(trace, t)[0]                          # [hv, t + 1]
        got = np.einsum("hs,shd->hd", A, unit[:t + 1]) * vmax[:, None]
        np.testing.assert_allclose(got, outs[t], atol=1e-5)
    per_key = layer_attention(trace, 7, 0)
    assert per_key.shape == (2, 8) and np.allclose(per_key, gdn_weights(trace, 7)[0].reshape(2, 3, 8).max(1))
    assert layer_attention(trace, 7, 0, by="value").shape == (6, 8)
    assert attention_error(trace) == 0.0 and head_count(trace, 0) == 2 and layer_kind(trace, 0) == "linear_attention"


def machine_layers() -> int:
    """The built-in machine's layer count (every one of them must have a view)."""
    from qwengpu.machine.config import BUILTIN
    from qwengpu.runtime.checkpoint import load_machine
    return load_machine(BUILTIN, progress=False).report["layers"]


@pytest.fixture(scope="module")
def dot_model():
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)
    k = suite.get("dot")
    return trace_launch(k.ptx(), k.spec(), engine="compact", names=["a", "b", "out"])


def test_a_read_draws_on_the_last_write_to_its_slot(dot_model):
    """On the model: wherever a memory's first read port reads a slot, the GDN attention of each of
    its fields' value heads puts weight 1 on the last token that wrote that field of the slot (a
    token writes some fields of a word: its own value heads' β), and no weight on the writes the
    delta rule overwrote."""
    tr = dot_model.trace
    assert attention_error(tr) < 1e-6                         # the keys and queries are one-hot
    checked = 0
    for name, info in tr.memories.items():
        sel = selection_of(tr, name)
        li = tr.gdn_layers.index(info.layer)
        for t in range(tr.prompt_len - 1, len(tr.taps)):
            if sel.read[t, 0] < 0.5:
                continue
            slot = sel.read_slot[t, 0]
            rows = layer_attention(tr, t, info.layer, by="value")
            for h in info.heads:
                c = h // tr.group
                writes = [s for s in range(t + 1) if tr.taps[s, li, c, 2] == slot and tr.taps[s, li, c, 3] > 0.5
                          and tr.betas[s, li, h] > 0.5 and tr.vnorms[s, li, h] > 0]
                if not writes:
                    continue
                row = rows[h]
                assert int(row.argmax()) == writes[-1] and row.max() > 0.99, (name, t, h)
                assert all(row[s] < 1e-6 for s in writes[:-1])
                checked += 1
    assert checked > 100


def test_every_gpu_layer_has_a_view(dot_model):
    tr = dot_model.trace
    t = tr.prompt_len - 1 + 10
    NL = machine_layers()
    over = layers_overview(tr, t)
    assert over.shape == (len(tr.layers), t + 1) == (NL, t + 1)
    src = strongest_sources(tr, t)
    assert sorted(src) == list(range(NL))
    inert = next(L for L in range(NL) if L not in tr.gdn_layers)
    a = layer_attention(tr, t, inert)                         # no heads compiled in: uniform softmax
    assert np.allclose(a, 1 / (t + 1)) and a.shape[0] == head_count(tr, inert)
    m, r0, c0 = attention_window(tr, t, tr.gdn_layers[0], rows=5, cols=9)
    assert m.shape == (head_count(tr, tr.gdn_layers[0]), 5, 9) and (r0, c0) == (t - 4, t - 8)
    assert np.allclose(m[:, -1], layer_attention(tr, t, tr.gdn_layers[0])[:, c0:])
    meta, data = layer_attention_payload(dot_model, 10, inert)
    assert meta["layer"] == inert and "uniform" in meta["note"] and meta["nlayers"] == NL
    assert len(data) == NL * meta["n"] + meta["heads"] * meta["n"] + meta["heads"] * meta["rows"] * meta["cols"]


def test_inspector_shows_every_layer_and_follows_the_scrubber(dot_model):
    from qwengpu_widgets import Inspector
    from qwengpu_widgets.inspector import STYLE_ID
    w = Inspector(view=dot_model, position=5)
    assert w._anywidget_id == STYLE_ID != "qwengpu_widgets.inspector.Inspector"   # a stylesheet per CSS version
    L = w.layer
    assert L == tr_layer(dot_model, "reg.emit") and w.latt_meta["layer"] == L
    seen = set()
    for layer in range(machine_layers()):
        w.show_layer(layer)
        assert w.latt_meta["layer"] == layer and w.layer_attention.shape[1] == w.latt_meta["t"] + 1
        seen.add(w.latt_meta["kind"])
    assert seen == {"linear_attention", "full_attention"}
    w.show_layer(tr_layer(dot_model, "rom.s0"))
    meta = w.latt_meta                                   # the card's payload: the overview names every layer
    assert meta["layer"] == w.layer and meta["nlayers"] == machine_layers() == len(meta["kinds"])
    assert [k == "gdn" for k in meta["kinds"]] == [L in dot_model.trace.gdn_layers for L in range(machine_layers())]
    assert meta["head_unit"] == "key head" and len(w.latt) == meta["nlayers"] * meta["n"] + meta["heads"] * (meta["n"] + meta["rows"] * meta["cols"])
    before = bytes(w.latt)
    w.step()
    assert w.latt_meta["t"] == dot_model.trace.prompt_len - 1 + 6 and bytes(w.latt) != before


def tr_layer(view, memory):
    return view.trace.memories[memory].layer


def test_background_recording_progress_and_cancel():
    """`Inspector(..., background=True)` returns at once and records in a thread, reporting passes
    as it goes (`recording`); `cancel()` stops it at the next pass."""
    from qwengpu_widgets import Inspector
    k = suite.get("dot")
    w = Inspector(k.ptx(), k.spec(), engine="compact", background=True, names=["a", "b", "out"], position=18)
    assert w.program["mode"] == "recording" and w.recording["status"] == "recording"
    w.wait(300)
    assert w.recording["status"] == "done" and w.recording["passes"] == 19
    assert w.program["mode"] == "machine" and w.position == 18
    assert w.snapshot.region("out").data == (32).to_bytes(4, "little") and w.latt_meta["nlayers"] == machine_layers()
    c = Inspector(k.ptx(), k.spec(), engine="compact", background=True).cancel().wait(300)
    assert c.recording["status"] == "cancelled" and c.program["mode"] == "recording"
    i = Inspector(k.ptx(), k.spec(), background=True).wait(60)          # the interpreter, in the background too
    assert i.recording["status"] == "done" and i.program.get("mode") != "recording" and len(i.view) == 16


def test_a_recording_is_viewed_while_it_runs(dot_model):
    """`LiveRecording.view()`: the passes recorded so far, from another thread, checked against
    the simulator as far as they go; they are the whole recording's first passes."""
    import threading

    from qwengpu.lab.recorder import LiveRecording, record_launch
    k = suite.get("dot")
    live, at_10, go_on = LiveRecording(), threading.Event(), threading.Event()

    def pause(i, text, state):
        if i == 10:                       # passes 0..9 are recorded: hold the recording here
            at_10.set()
            go_on.wait(60)

    assert live.view() is None and live.passes == 0
    done = {}
    th = threading.Thread(target=lambda: done.setdefault("view", record_launch(
        k.ptx(), k.spec(), names=["a", "b", "out"], on_token=pause, live=live)))
    th.start()
    assert at_10.wait(300)
    part = live.view()
    go_on.set()
    th.join(300)
    assert live.expected == 19 and len(part) == 10 and part.trace.raw_exact is None
    c = part.consistency
    assert c["partial"] and c["exact"] is None and c["simulator"]["positions"] == 10
    assert c["interpreter"]["memory"] is None and c["interpreter"]["registers"] > 0
    whole = done["view"]
    assert whole.consistency["exact"] and not whole.consistency["partial"]
    for t in (0, 5, 9):
        a, b = part.snapshot(t), whole.snapshot(t)
        assert (a.pc, a.token, a.lane_pc) == (b.pc, b.token, b.lane_pc)
        assert [r.values for r in a.regs] == [r.values for r in b.regs]
        assert [m.data for m in a.memory] == [m.data for m in b.memory]
    assert (part.trace.taps == whole.trace.taps[:len(part.trace.taps)]).all()
    assert len(part.trace.taps) == part.trace.prompt_len + 9


def test_a_background_recording_is_scrubbed_while_it_runs(monkeypatch):
    """`Inspector(..., background=True)` on a model engine shows the passes recorded so far (about
    once a second; here at every pass) and lets them be scrubbed; the user's position stays when
    the whole launch arrives (the page follows the last pass itself: tests/test_browser.py)."""
    import qwengpu_widgets.inspector as inspector
    from qwengpu_widgets import Inspector
    monkeypatch.setattr(inspector, "PARTIAL_EVERY", 0.0)
    k = suite.get("switch_sparse")                          # 87 passes
    w = Inspector(k.ptx(), k.spec(), engine="compact", background=True, position=5)
    seen = set()
    t0 = time.monotonic()
    while w.recording["status"] == "recording" and time.monotonic() - t0 < 300:
        if w.program.get("mode") == "machine" and w.program["consistency"]["partial"]:
            seen.add(w.positions)
            if len(seen) >= 2:
                break
        time.sleep(0.01)
    assert len(seen) >= 2 and w.recording["status"] == "recording", (seen, w.recording)
    assert w.recording["expected"] == 87 and w.recording["passes"] > 0
    w.goto(0)
    w.step()
    assert w.position == 1 and w.snapshot.position == 1 and w.state["pos"] == 1
    w.back()
    assert w.positions < 87 and w.state["positions"] == w.positions
    w.wait(300)
    assert w.recording["status"] == "done" and w.positions == 87 and w.position == 0     # where the user left it
    assert w.program["consistency"]["exact"] and not w.program["consistency"]["partial"]


def test_a_cancelled_recording_counts_the_passes_it_shows(monkeypatch):
    """After a cancel the recording's pass count is the view's (the token in flight when the
    cancel came is not a pass recorded)."""
    import qwengpu_widgets.inspector as inspector
    from qwengpu_widgets import Inspector
    monkeypatch.setattr(inspector, "PARTIAL_EVERY", 0.0)
    k = suite.get("switch_sparse")
    w = Inspector(k.ptx(), k.spec(), engine="compact", background=True)
    t0 = time.monotonic()
    while w.recording["status"] == "recording" and w.recording.get("passes", 0) < 4 and time.monotonic() - t0 < 300:
        time.sleep(0.01)
    w.cancel()
    assert w.recording["status"] in ("cancelling", "cancelled")      # said at once, before the thread stops
    w.wait(300)
    n = w.recording["passes"]
    assert w.recording["status"] == "cancelled" and 0 < n < 87
    assert w.positions == n and w.recording["error"] == f"cancelled after {n} passes"


def test_export_html_carries_every_position(dot_model, tmp_path, monkeypatch):
    import json
    import re

    from qwengpu_widgets import Inspector
    from qwengpu_widgets.export import MAX_POSITIONS, export_html
    w = Inspector(view=dot_model, position=3)
    written = w.export_html(tmp_path / "dot.html")
    text = written.read_text()
    assert written == tmp_path / "dot.html" and text == export_html(w)
    # as a cell's last line: a link to the file, not the file's text
    assert "qg-exported" in written._repr_html_() and "dot.html</a>" in written._repr_html_()
    assert len(written._repr_html_()) < 500
    monkeypatch.chdir(tmp_path)
    assert Inspector(view=dot_model).export_html() == Path("dot.html") and Path("dot.html").exists()
    assert 'href="dot.html"' in Inspector(view=dot_model).export_html()._repr_html_()
    data = json.loads(re.search(r'<script type="application/json" class="qg-data">(.*?)</script>', text, re.S).group(1))
    assert len(data["frames"]) == 19 and data["values"]["position"] == 3 and MAX_POSITIONS >= 19
    assert data["values"]["exported"] is True          # the page disables the memory picker and says why
    assert data["frames"][18]["state"]["pos"] == 18 and data["frames"][5]["latt_meta"]["nlayers"] == machine_layers()
    assert "export default" not in text and "window.__qgInspector = { render }" in text
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text   # no CDN
    # every layer's attention card at every position, as the kernel would send it when picked
    import base64
    import gzip
    lay = data["layers"]
    blob = gzip.decompress(base64.b64decode(lay["gz"]))
    assert len(lay["meta"]) == 19 and all(len(row) == machine_layers() for row in lay["meta"])
    for pos, L in ((0, 0), (7, dot_model.trace.memories["mem"].layer), (18, machine_layers() - 1)):
        meta, want = layer_attention_payload(dot_model, pos, L)
        (o, n), ent = lay["ov"][pos], lay["meta"][pos][L]
        a, m = ent["at"]
        assert blob[o:o + n] + blob[a:a + m] == want
        assert {**data["frames"][pos]["latt_meta"], **ent["meta"]} == json.loads(json.dumps(meta))
    small = export_html(w, layers=None)
    got = json.loads(re.search(r'<script type="application/json" class="qg-data">(.*?)</script>', small, re.S).group(1))
    assert "layers" not in got and len(small) < len(text)
    with pytest.raises(ValueError, match="layers"):
        export_html(w, layers="some")
