"""One self-contained HTML file per launch, for slides: the live inspector without a kernel.

    from qwengpu_widgets import Inspector
    insp = Inspector(ptx, spec, engine="compact")
    insp.export_html("dot.html")          # opens from file://, plays and scrubs; no server, no CDN

`Inspector.export_html` returns the file's path (`ExportedHTML`, a `pathlib.Path` that a notebook
shows as a link to the file, with its size): as a cell's last line it shows the link, not the file.

The file carries the widget's own script and stylesheet inline (`qwengpu_widgets.bundle`: the same
script the live widget runs) and every position's payload (what the kernel would send:
`qwengpu.lab.payload`), and drives the script with a stand-in for the widget model that looks
positions up instead of asking Python (`qwengpu_widgets.static`, shared with the widget's
kernel-less fallback). Everything
the live widget shows per position is there — registers, ROM, memory, the model's layers, and the
attention card of every layer (`layers="all"`, the default on the model engines: each layer's
weights at every position, uint8 and gzipped — mostly zeros, ~25 KB for dot's 44 layers x 19
positions — unpacked by the browser's `DecompressionStream`), so a click on any layer picks it as
in the live widget; picking another memory for the GDN panel needs the kernel: in the file the
picker is disabled and says so (`exported` in the values the page reads).
"""
from __future__ import annotations

import base64
import gzip
import html
import os
import re
from pathlib import Path

from .static import frame, page_fragment

#: positions an export carries at most (a payload is ~30 KB on the model engines)
MAX_POSITIONS = 2000

#: the layer-specific fields of `layer_attention_payload`'s meta (the rest is the same for every layer)
_LAYER_FIELDS = ("layer", "kind", "heads", "head_unit", "note", "top", "r0", "w0", "rows", "cols")


def _every_layer(view) -> dict:
    """Every layer's attention card at every position: the overview bytes once per position, then
    per (position, layer) the layer's own bytes (per head now, heatmap over recent tokens) and meta
    fields; all the bytes gzipped as one blob, with (offset, length) of each part."""
    from qwengpu.lab.payload import layer_attention_payload
    blob = bytearray()
    ov, metas = [], []
    for p in range(len(view)):
        row = []
        for L in range(len(view.trace.layers)):
            meta, data = layer_attention_payload(view, p, L)
            split = meta["nlayers"] * meta["n"]
            if L == 0:
                ov.append([len(blob), split])
                blob += data[:split]
            row.append({"at": [len(blob), len(data) - split], "meta": {k: meta[k] for k in _LAYER_FIELDS}})
            blob += data[split:]
        metas.append(row)
    return {"gz": base64.b64encode(gzip.compress(bytes(blob), mtime=0)).decode(), "ov": ov, "meta": metas}


class ExportedHTML(type(Path())):
    """The path of an exported launch; a notebook shows it as a link to the file (relative to the
    notebook's folder, where JupyterLab opens it) with its size."""

    def _repr_html_(self) -> str:
        try:
            href = os.path.relpath(self)
        except ValueError:                     # another drive (Windows)
            href = str(self)
        href = href if not href.startswith("..") else self.resolve().as_uri()
        size = self.stat().st_size if self.exists() else 0
        return (f'<a class="qg-exported" href="{html.escape(Path(href).as_posix() if not href.startswith("file:") else href)}" '
                f'target="_blank">{html.escape(self.name)}</a> <span style="color:#868e96">({size / 1024:.0f} KB: '
                "a self-contained page; it plays from the file, with no kernel or server)</span>")


def default_export_name(insp) -> str:
    """`KERNEL.html` in the working folder (the notebook's), KERNEL the demangled kernel name."""
    name = insp.program.get("kernel_name") or insp.program.get("kernel") or "launch"
    return re.sub(r"[^\w.-]+", "_", name).strip("_.") + ".html"


def export_html(insp, path=None, title: str | None = None, layers: str | None = "all") -> str:
    """The inspector `insp` (a `qwengpu_widgets.Inspector`) as one self-contained HTML file: every
    position's payload and the widget's script; written to `path` if given, returned as text.
    `layers="all"` (model engines): every layer's attention card is in the file, picked by a click
    as in the live widget; `layers=None`: only the layer shown now (a smaller file)."""
    n = len(insp.view)
    if n > MAX_POSITIONS:
        raise ValueError(f"{n} positions: an export carries at most {MAX_POSITIONS} (slides of a shorter launch)")
    frames = []
    for p in range(n):
        if insp.machine_mode:
            _snap, state, gdn, att, meta, latt, lmeta = insp._machine_payload(p)
            frames.append(frame(insp.program, state, gdn=gdn, attn=att, attn_meta=meta, latt=latt, latt_meta=lmeta))
        else:
            from qwengpu.lab.payload import snapshot_payload
            frames.append(frame(insp.program, snapshot_payload(insp.view.snapshot(p), insp.view)))
    values = {"program": insp.program, "position": insp.position, "fmt": insp.fmt, "breakpoints": list(insp.breakpoints),
              "line_breakpoints": list(insp.line_breakpoints), "layer": insp.layer, "gdn_memory": insp.gdn_memory,
              "selections": list(insp.selections), "presentation": insp.presentation}
    if layers not in ("all", None):
        raise ValueError(f"layers: 'all' or None, not {layers!r}")
    every = _every_layer(insp.view) if layers == "all" and insp.machine_mode else None
    name = title or f"qwenGPU · {insp.program.get('kernel_name', '')} · {insp.program.get('engine', '')}"
    text = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(name)}</title>'
            f'<style>body{{font-family:system-ui,sans-serif;margin:16px;background:#fff}}</style></head>'
            f"<body>{page_fragment(values, frames, list(range(n)), every)}</body></html>\n")
    if path is not None:
        Path(path).write_text(text)
    return text


__all__ = ["export_html", "ExportedHTML", "default_export_name", "MAX_POSITIONS"]
