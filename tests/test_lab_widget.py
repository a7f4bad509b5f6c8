"""The inspector widget through its public API (no browser): traits, stepping, breakpoints, formats,
the payload it sends per position, and its static HTML fallback (also in an nbconvert export)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from qwengpu import suite
from qwengpu.lab import Field, GDNState, LaunchView, MemoryMap, ModelRecord, ModelTrace, trace_launch
from widgets import Inspector, render_html

ROOT = Path(__file__).resolve().parent.parent


def dot_inspector(**kw):
    k = suite.get("dot")
    return Inspector(k.ptx(), k.spec(), names=["a", "b", "out"], **kw)


def test_stepping_updates_the_synced_state():
    w = dot_inspector(position=13)
    assert w.program["positions"] == 16 and w.program["kernel_name"] == "dot"
    assert w.program["step_pc"] == list(range(15))
    assert w.state["pos"] == 13 and w.state["next"]["text"].startswith("atom.global.add.u32")
    w.step()
    st = w.state
    assert st["pos"] == 14 and st["last"]["pc"] == 13
    r5 = next(r for r in st["regs"] if r["n"] == "%r5")
    assert r5["c"] == 0b1111 and [v[1] for v in r5["v"]] == ["0", "2", "8", "20"]
    out = next(m for m in st["memory"] if m["name"] == "out")
    assert out["changed"] == [0, 1, 2, 3] and out["hex"] == "20000000"
    w.back(14)
    assert w.position == 0 and w.state["last"] is None
    w.goto(999)
    assert w.position == 15 and w.state["finished"] and w.state["next"] is None
    assert len(json.dumps(w.state)) < 20_000          # one position: a few KB


def test_breakpoints_play_and_run_to_pc():
    w = dot_inspector()
    w.toggle_breakpoint(9).toggle_breakpoint(12)
    assert w.breakpoints == [9, 12]
    w.play()
    assert w.position == 9 and w.snapshot.pc == 9
    w.play()
    assert w.position == 12
    w.toggle_breakpoint(12)
    w.play()
    assert w.position == 15
    w.goto(0).run_to_pc(13)
    assert w.position == 13
    w.run_to_pc(3)                                    # no later position at pc 3: stay
    assert w.position == 13


def test_divergence_payload_greys_lanes():
    k = suite.get("nested_divergence")
    w = Inspector(k.ptx(), k.spec(), position=18)
    st = w.state
    assert st["lane_state"] == ["active", "waiting", "active", "waiting"]
    assert st["stack"] == [[34, 15, None], [18, 10, 34], [25, 5, 34]]
    w.fmt = "float"
    html = w.to_html()
    assert html.count('class="off') >= 2 * len(st["regs"])
    assert "waiting" in html


def test_mimebundle_has_a_static_fallback():
    w = dot_inspector(position=14)
    data, meta = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    html = data["text/html"]
    assert '<div class="qg-insp qg-static">' in html and "<style>" in html
    assert html.count('<td class="chg"') == 4               # %r5, four lanes
    assert "atom.global.add.u32" in html and "No model in this launch" in html


def test_model_panels_render_from_records():
    """With a ModelTrace, the payload carries attention bytes and GDN decodings (format test: the
    records here are built by hand, the model engine will produce them)."""
    v = trace_launch(suite.get("dot").ptx(), suite.get("dot").spec())
    recs = []
    for i in range(15):
        r = ModelRecord(i, i, f"t{i}", position=i + 1)
        r.attention = {2: np.eye(i + 1)[[i]].repeat(2, 0)}          # each head attends to itself
        st = np.zeros((1, 4, 16))
        st[0, 0, 0::2] = 32.0 if i >= 13 else 0.0
        st[0, 0, 1::2] = 0.0 if i >= 13 else 0.0
        r.gdn = {0: GDNState(0, st, [MemoryMap("out", ["w0", "w1", "w2", "w3"], [Field(0, 0, 8)], 8)])}
        recs.append(r)
    mv = LaunchView(v.module, v.spec, type("T", (), {"steps": v.steps})(), model=ModelTrace(
        [f"t{i}" for i in range(15)], recs))
    w = Inspector(view=mv, position=14)
    assert w.program["has_model"]
    mp = w.state["model"]
    assert mp["layers"] == [{"layer": 2, "heads": 2, "n": 14, "scale": 1.0}]
    assert len(w.attn) == 2 * 14 * 14
    a = np.frombuffer(w.attn, np.uint8).reshape(2, 14, 14)
    assert (a[0] == np.eye(14, dtype=np.uint8) * 255).all()
    assert mp["gdn"][0]["maps"][0]["slots"][0]["value"][0] == "0xff"
    assert w.gdn_meta == [{"layer": 0, "head": 0, "rows": 4, "cols": 16, "scale": 32.0}]
    html = render_html(w.program, w.state, attn=w.attn, gdn=w.gdn, gdn_meta=w.gdn_meta)
    assert html.count("data:image/png;base64,") == 3      # two heads + one GDN state


def test_nbconvert_export_shows_the_fallback(tmp_path):
    """The static export (no widget state: its renderer would come from a CDN) shows the HTML views."""
    out = tmp_path / "01.html"
    r = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--execute", "--to", "html",
                        "--ExecutePreprocessor.store_widget_state=False", "--output", str(out),
                        str(ROOT / "notebooks" / "01_quickstart.ipynb")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    html = out.read_text()
    assert html.count('<div class="qg-insp qg-static">') == 1
    assert 'class="qg-regs"' in html and 'class="qg-rom"' in html and 'class="qg-hex"' in html
    assert "data:image/png;base64" in html                # the matplotlib figure
