"""The inspector widget through its public API (no browser): traits, stepping, breakpoints, formats,
the payload it sends per position (the interpreter's, and a model engine's panels), and its
kernel-less fallback (also in an nbconvert export): the payload and the widget's own script, which
tests/test_browser.py runs in Chromium."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from qwengpu_widgets import Inspector

from qwengpu import suite
from qwengpu.lab import trace_launch

ROOT = Path(__file__).resolve().parent.parent


def fallback_data(html: str) -> list[dict]:
    """The payloads each kernel-less inspector in `html` carries (its `qg-data` script)."""
    return [json.loads(m.replace("<\\/", "</")) for m in
            re.findall(r'<script[^>]*class="qg-data"[^>]*>(.*?)</script>', html, re.S)]   # any attribute order (nbconvert's)


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
    assert [v[2] for v in st["regs"][0]["v"]] and fallback_data(w.to_html())[0]["values"]["fmt"] == "float"


def test_mimebundle_has_a_static_fallback():
    w = dot_inspector(position=14)
    data, meta = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    html = data["text/html"]
    assert html.count('<div class="qg-fallback">') == 1 and "<style>" in html and "window.__qgInspector" in html
    assert "export default" not in html                      # the module's script, as a page's classic script
    (page,) = fallback_data(html)
    assert page["at"] == [14] and page["values"]["position"] == 14 and page["values"]["program"] == w.program
    assert page["frames"][0]["state"] == w.state             # drawn by the widget's script (tests/test_browser.py)
    assert "qwenGPU inspector · dot · interp · position 14 of 15" in html   # the line a script-less renderer shows


@pytest.fixture(scope="module")
def dot_model():
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)
    k = suite.get("dot")
    return trace_launch(k.ptx(), k.spec(), engine="compact", names=["a", "b", "out"])


def test_model_panels_render_from_the_model(dot_model):
    """On a model engine the payload carries the machine decoded from the model's state, every GPU
    layer's read/write pattern, one memory's raw GDN state and the cross-checks; the static HTML
    draws them."""
    w = Inspector(view=dot_model, position=10)
    p = w.program
    assert p["mode"] == "machine" and p["has_model"] and p["engine"] == "compact" and p["positions"] == 19
    assert p["consistency"]["exact"] and p["first_mismatch"] is None
    assert [b["pc"] for b in p["bundles"]] == [0, 1, 2] and p["exec_pc"][:2] == [-1, 0]
    mems = {m["name"]: m for m in p["memories"]}
    assert mems["rom.s0"]["used"] == [0, 1, 2] and mems["mem"]["labels"][mems["mem"]["used"].index(2)] == "0x1020"
    st = w.state
    assert st["input"] == "<carry 0 0 3 0c>" and st["token"] == "<exec 2 1111>" and st["consistent"]
    r1 = next(r for r in st["regs"] if r["n"] == "r1")
    assert r1["l"] == "%r4" and [v[1] for v in r1["v"]] == ["2", "6", "12", "12"] and r1["k"] == [1, 1, 1, 1]
    sel = {m["name"]: m for m in st["sel"]["mems"]}
    assert set(sel) == {"ctl", "rom.s0", "reg.0", "mem", "reg.emit", "lanes"}
    assert sel["reg.emit"]["w"][-1] == [8, 255]          # this pass's carry writes warp 0's r1
    assert sel["rom.s0"]["r"][-1] == [[1, 255]]         # ... and the fetch read bundle 1
    g = st["gdn"]
    assert g["memory"] == "reg.emit" and len(w.gdn) == g["rows"] * g["cols"]
    assert [s["slot"] for s in g["slots"]] == [0, 8] and g["slots"][1]["value"] == "00000002 00000006 0000000c 0000000c"
    assert g["slots"][1]["changed"] and len(json.dumps(st)) < 20_000
    w.gdn_memory = "mem"
    assert w.state["gdn"]["memory"] == "mem" and len(w.gdn) == w.state["gdn"]["rows"] * w.state["gdn"]["cols"]
    w.step(8)
    assert w.state["pos"] == 18 and w.state["finished"]
    out = next(m for m in w.state["memory"] if m["name"] == "out")
    assert out["hex"] == "20000000" and out["changed"] == [0]
    assert w.state["what"]["text"].startswith("memory write byte 0 of lane 3") and w.state["what"]["then_kind"] == "halt"
    (page,) = fallback_data(w.to_html())                 # drawn in Chromium by tests/test_browser.py
    assert page["frames"][0]["state"] == w.state and len(page["frames"][0]["latt"]) > 0
    w.goto(0)                                            # the start: no bundle has run, bundle 0 is next
    assert w.state["what"]["kind"] == "block start" and w.state["what"]["bundle"] is None
    assert w.state["what"]["then"].startswith("execute bundle 0")
    w.goto(18)
    w.run_to_pc(1)                                       # no later pass runs bundle 1: stay
    assert w.position == 18
    w.goto(0).run_to_pc(1)
    assert w.position == 6 and w.snapshot.input == "<exec 1 1111>"


def test_nbconvert_export_shows_the_fallback(tmp_path):
    """The static export (no widget state: its renderer would come from a CDN) carries the widget's
    kernel-less fallback: the payload and the widget's script."""
    out = tmp_path / "01.html"
    r = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--execute", "--to", "html",
                        "--ExecutePreprocessor.store_widget_state=False", "--output", str(out),
                        str(ROOT / "notebooks" / "01_quickstart.ipynb")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    html = out.read_text()
    (page,) = fallback_data(html)                          # one inspector
    prog = page["values"]["program"]
    assert "atomicAdd(out, a[i] * b[i]);" in "".join(prog["source"]["lines"])   # 01 opens the CUDA source
    assert prog["timeline"]["positions"] == prog["positions"] and page["frames"][0]["state"]["regs"]
    assert html.count("window.__qgInspector = { render }") == 1
    assert "data:image/png;base64" in html                # the matplotlib figure


def test_one_script_of_views_and_the_presentation_mode():
    """The widget's script is joined from its parts (every `view_*.js` registers one panel); the
    kernel-less page runs the same text; `presentation` goes to the page (None: as the browser last
    had it), to the fallback and to an export."""
    from qwengpu_widgets.bundle import module_script, page_script, script_parts
    parts = [p.name for p in script_parts()]
    assert parts[0] == "inspector_base.js" and parts[-1] == "inspector.js" and len(parts) >= 11
    for p in script_parts()[1:-1]:
        assert p.name.startswith("view_") and p.read_text().count("VIEWS.push({") == 1, p.name
    assert Inspector._esm == module_script() and module_script().strip().endswith("export default { render };")
    assert all(p.read_text() in page_script() for p in script_parts()[:-1])
    w = dot_inspector()
    assert w.presentation is None
    w = dot_inspector(presentation=True, position=3)
    assert w.presentation is True and fallback_data(w.to_html())[0]["values"]["presentation"] is True
    from qwengpu_widgets.export import export_html
    (page,) = fallback_data(export_html(w))
    assert page["values"]["presentation"] is True and page["at"] == list(range(16))
