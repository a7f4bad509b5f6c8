"""The inspector without a kernel: the widget's own script (`qwengpu_widgets.bundle`) driven by
payloads carried in the page, in place of the kernel's widget model.

Two users, one renderer: the widget's `text/html` fallback (`render_html`: the current position,
shown by nbconvert exports, notebooks opened without their widget state, renderers that do not run
widgets) and the exported launch (`qwengpu_widgets.export`: every position, so it plays and scrubs
from a `file://` URL). Both show exactly what the live widget shows, minus the kernel round trips.
A renderer that runs no scripts (JupyterLab on an untrusted notebook) shows the one line of text
the fragment starts with.
"""
from __future__ import annotations

import base64
import html
import json

from .bundle import page_script, stylesheet

#: the payload keys sent as bytes (base64 in the page)
BYTE_KEYS = ("gdn", "attn", "latt")

# The stand-in for the widget model: `get`/`set`/`save_changes`/`on` over the page's values; a
# position change loads that position's frame (the nearest one carried, for a fallback that holds
# only its own). `layers` (exports of the model engines): every layer's attention card, gzipped,
# unpacked by the browser's DecompressionStream, so a click on a layer picks it as in the widget.
_DRIVER = """
(function (box) {
  const DATA = JSON.parse(box.querySelector("script.qg-data").textContent);
  const b64 = (s) => { const t = atob(s || ""); const a = new Uint8Array(t.length); for (let i = 0; i < t.length; i++) a[i] = t.charCodeAt(i); return a; };
  const vals = Object.assign({ progress: 1, recording: {} }, DATA.values);
  const at = DATA.at;                       // the positions whose frames the page carries
  const handlers = {};
  const fire = (k) => (handlers["change:" + k] || []).forEach((cb) => cb());
  const nearest = (p) => { let i = 0; while (i + 1 < at.length && at[i + 1] <= p) i++; return i; };
  let LAYERS = null;
  function layerView(i, L) {
    const lm = LAYERS && LAYERS.meta[i] && LAYERS.meta[i][L];
    if (!lm) return false;
    const [ovOff, ovLen] = LAYERS.ov[i], [off, len] = lm.at;
    const out = new Uint8Array(ovLen + len);
    out.set(LAYERS.bytes.subarray(ovOff, ovOff + ovLen), 0);
    out.set(LAYERS.bytes.subarray(off, off + len), ovLen);
    vals.latt = out;
    vals.latt_meta = Object.assign({}, DATA.frames[i].latt_meta, lm.meta);
    return true;
  }
  function load(p) {
    const i = nearest(p), f = DATA.frames[i];
    vals.position = at[i];
    for (const [k, v] of Object.entries(f)) vals[k] = DATA.bytes.includes(k) ? b64(v) : v;
    layerView(i, vals.layer);
  }
  let pending = new Set();
  const model = {
    get: (k) => vals[k],
    set: (k, v) => { vals[k] = v; pending.add(k); },
    save_changes: () => {
      if (pending.has("layer")) {
        pending.delete("layer");
        if (layerView(nearest(vals.position | 0), vals.layer)) { fire("latt"); fire("latt_meta"); }
      }
      const keys = [...pending]; pending = new Set();
      for (const k of keys) {
        if (k === "position") setTimeout(() => { load(vals.position | 0); Object.keys(DATA.frames[0]).forEach(fire); }, 0);
        else fire(k);
      }
    },
    on: (evt, cb) => { (handlers[evt] = handlers[evt] || []).push(cb); },
    off: () => {}, send: () => {},
  };
  async function start() {
    if (DATA.layers) {
      const gz = new Blob([b64(DATA.layers.gz)]).stream().pipeThrough(new DecompressionStream("gzip"));
      LAYERS = Object.assign({}, DATA.layers, { bytes: new Uint8Array(await new Response(gz).arrayBuffer()) });
    }
    load(DATA.values.position | 0);
    const el = box.querySelector(".qg-root");
    el.textContent = "";
    window.__qgInspector.render({ model, el });
  }
  start();
})(document.currentScript.parentElement);
"""


def frame(program: dict, state: dict, **parts) -> dict:
    """One position's payload as the page carries it: `state` and the other traits the widget
    sends per position (`gdn`, `attn`, `latt` as bytes; `attn_meta`, `latt_meta`)."""
    out = {"state": state}
    for k, v in parts.items():
        out[k] = base64.b64encode(bytes(v)).decode() if k in BYTE_KEYS else v
    return out


def page_fragment(values: dict, frames: list, positions: list, layers: dict | None = None) -> str:
    """A `<div>` that draws the inspector from `frames` (the payloads of `positions`) with the
    widget's own script and stylesheet. `values`: the other traits (program, position, fmt, ...)."""
    prog = values.get("program") or {}
    data = {"values": {"exported": True, **values}, "frames": frames, "at": positions, "bytes": list(BYTE_KEYS)}
    if layers is not None:
        data["layers"] = layers
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    where = f"position {values.get('position', 0)} of {prog.get('positions', 1) - 1}"
    summary = (f"qwenGPU inspector · {prog.get('kernel_name') or prog.get('kernel', '')} · "
               f"{prog.get('engine', 'interp')} · {where} (drawn by the widget's script: run or trust the notebook to see it)")
    script = page_script().replace("</script", "<\\/script")     # the script's own text never ends the element
    return (f'<div class="qg-fallback"><style>{stylesheet()}</style><div class="qg-root">{html.escape(summary)}</div>\n'
            f'<script type="application/json" class="qg-data">{payload}</script>\n'
            f"<script>{script}</script>\n<script>{_DRIVER}</script></div>")


def render_html(program: dict, state: dict, fmt: str = "hex", attn: bytes = b"", gdn: bytes = b"",
                attn_meta: list | None = None, latt: bytes = b"", latt_meta: dict | None = None,
                **values) -> str:
    """The inspector at `state`'s position as an HTML fragment that needs no kernel: the payloads
    (`qwengpu.lab.payload`) and the widget's script, which draws them as the live widget does.
    `values`: other traits the page reads (breakpoints, line_breakpoints, layer, gdn_memory, ...)."""
    pos = state.get("pos", 0) if state else 0
    f = frame(program, state or {}, gdn=gdn, attn=attn, attn_meta=attn_meta or [], latt=latt, latt_meta=latt_meta or {})
    return page_fragment({"program": program, "position": pos, "fmt": fmt, **values}, [f], [pos])


__all__ = ["render_html", "page_fragment", "frame", "BYTE_KEYS"]
