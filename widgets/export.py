"""One self-contained HTML file per launch, for slides: the live inspector without a kernel.

    from qwengpu_widgets import Inspector
    insp = Inspector(ptx, spec, engine="compact")
    insp.export_html("dot.html")          # opens from file://, plays and scrubs; no server, no CDN

The file carries the widget's own script and stylesheet (`inspector.js`, `inspector.css`) inline and
every position's payload (what the kernel would send: `qwengpu.lab.payload`), and drives the script
with a stand-in for the widget model that looks positions up instead of asking Python. Everything
the live widget shows per position is there — registers, ROM, memory, the model's layers and the
attention card for the layer shown when exporting; picking another layer or memory needs the kernel.
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path

_HERE = Path(__file__).resolve().parent

#: positions an export carries at most (a payload is ~30 KB on the model engines)
MAX_POSITIONS = 2000

_DRIVER = """
(function () {
  const DATA = JSON.parse(document.getElementById("qg-data").textContent);
  const b64 = (s) => { const t = atob(s || ""); const a = new Uint8Array(t.length); for (let i = 0; i < t.length; i++) a[i] = t.charCodeAt(i); return a; };
  const vals = Object.assign({ progress: 1, recording: {} }, DATA.values);
  const handlers = {};
  const fire = (k) => (handlers["change:" + k] || []).forEach((cb) => cb());
  function load(p) {
    const f = DATA.frames[p];
    vals.position = p;
    for (const [k, v] of Object.entries(f)) vals[k] = DATA.bytes.includes(k) ? b64(v) : v;
  }
  let pending = new Set();
  const model = {
    get: (k) => vals[k],
    set: (k, v) => { vals[k] = v; pending.add(k); },
    save_changes: () => {
      const keys = [...pending]; pending = new Set();
      for (const k of keys) {
        if (k === "position") {
          setTimeout(() => { load(Math.max(0, Math.min(DATA.frames.length - 1, vals.position | 0))); Object.keys(DATA.frames[0]).forEach(fire); }, 0);
        } else fire(k);
      }
    },
    on: (evt, cb) => { (handlers[evt] = handlers[evt] || []).push(cb); },
    off: () => {}, send: () => {},
  };
  load(DATA.values.position | 0);
  window.__qgInspector.render({ model, el: document.getElementById("qg-root") });
})();
"""


def export_html(insp, path=None, title: str | None = None) -> str:
    """The inspector `insp` (a `qwengpu_widgets.Inspector`) as one self-contained HTML file: every
    position's payload and the widget's script; written to `path` if given, returned as text."""
    n = len(insp.view)
    if n > MAX_POSITIONS:
        raise ValueError(f"{n} positions: an export carries at most {MAX_POSITIONS} (slides of a shorter launch)")
    frames = []
    keep = insp.position
    for p in range(n):
        if insp.machine_mode:
            _snap, state, gdn, att, meta, latt, lmeta = insp._machine_payload(p)
            frames.append({"state": state, "gdn": base64.b64encode(gdn).decode(), "attn": base64.b64encode(att).decode(),
                           "attn_meta": meta, "latt": base64.b64encode(latt).decode(), "latt_meta": lmeta})
        else:
            from qwengpu.lab.payload import snapshot_payload
            frames.append({"state": snapshot_payload(insp.view.snapshot(p))})
    data = {"frames": frames, "bytes": ["gdn", "attn", "latt"],
            "values": {"program": insp.program, "position": keep, "fmt": insp.fmt,
                       "breakpoints": list(insp.breakpoints), "layer": insp.layer, "gdn_memory": insp.gdn_memory,
                       "selections": list(insp.selections)}}
    js = (_HERE / "inspector.js").read_text().replace("export default { render };", "window.__qgInspector = { render };")
    css = (_HERE / "inspector.css").read_text()
    name = title or f"qwenGPU · {insp.program.get('kernel_name', '')} · {insp.program.get('engine', '')}"
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    text = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(name)}</title>'
            f'<style>body{{font-family:system-ui,sans-serif;margin:16px;background:#fff}}\n{css}</style></head>'
            f'<body><div id="qg-root"></div>\n<script id="qg-data" type="application/json">{payload}</script>\n'
            f"<script>{js}</script>\n<script>{_DRIVER}</script></body></html>\n")
    if path is not None:
        Path(path).write_text(text)
    return text


__all__ = ["export_html", "MAX_POSITIONS"]
