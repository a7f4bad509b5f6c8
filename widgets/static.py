"""The inspector without a browser kernel: the current position drawn as self-contained HTML.

Used as the widget's `text/html` fallback (nbconvert exports, notebooks opened without a kernel,
renderers that do not run widgets). It draws the same payload the live widget gets, with the same
CSS; heatmaps become inline PNG images.
"""
from __future__ import annotations

import base64
import html
import struct
import zlib
from pathlib import Path

import numpy as np

_CSS = (Path(__file__).resolve().parent / "inspector.css").read_text()
_FMT = {"hex": 0, "dec": 1, "float": 2}
ROW = 8          # bytes per hex-dump row


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def png_data_uri(rgb: np.ndarray, scale: int = 1) -> str:
    """An RGB uint8 image [h, w, 3] as a PNG data URI (nearest-neighbour upscaled by `scale`)."""
    a = np.asarray(rgb, dtype=np.uint8)
    if scale > 1:
        a = a.repeat(scale, 0).repeat(scale, 1)
    h, w, _ = a.shape
    raw = b"".join(b"\x00" + a[r].tobytes() for r in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _seq_cmap(t: np.ndarray) -> np.ndarray:
    t = np.clip(t, 0, 1)[..., None]
    a, b, c = np.array([255, 255, 255]), np.array([61, 90, 254]), np.array([20, 20, 90])
    lo = a + (b - a) * (t / 0.5)
    hi = b + (c - b) * ((t - 0.5) / 0.5)
    return np.where(t < 0.5, lo, hi).round().astype(np.uint8)


def _div_cmap(t: np.ndarray) -> np.ndarray:
    t = np.clip(t, -1, 1)[..., None]
    w = np.array([255, 255, 255])
    neg, pos = np.array([43, 108, 176]), np.array([214, 51, 108])
    out = np.where(t < 0, w + (neg - w) * (-t), w + (pos - w) * t)
    return out.round().astype(np.uint8)


def _mask(m: int) -> str:
    return '<span class="qg-mask">' + "".join(
        '<span class="on">●</span>' if m >> i & 1 else '<span class="off">○</span>' for i in range(4)) + "</span>"


def render_html(program: dict, state: dict, fmt: str = "hex", attn: bytes = b"", gdn: bytes = b"",
                gdn_meta: list | None = None) -> str:
    """The inspector at `state`'s position as static HTML (a `<div class="qg-insp">` with its CSS)."""
    f = _FMT.get(fmt, 0)
    st = state
    if not st:
        return "<div>qwenGPU inspector (no state)</div>"
    ls = st["lane_state"]
    parts = [f"<style>{_CSS}</style>", '<div class="qg-insp qg-static">']
    # header
    mp = st.get("model")
    if not program.get("has_model") or not mp:
        cons = '<span class="qg-badge ref">no model: interpreter state</span>'
    elif mp.get("first_mismatch"):
        cons = f'<span class="qg-badge bad">✗ mismatch at token {mp["first_mismatch"]["token"]}</span>'
    else:
        cons = f'<span class="qg-badge ok">✓ model = interpreter ({mp["checked"]} steps)</span>'
    engine = "model engine" if program.get("engine") == "model" else "reference interpreter"
    last = f' · last: <b class="qg-mono">{_e(st["last"]["text"])}</b>' if st.get("last") else ""
    parts.append(f'<div class="qg-head"><div class="qg-title">qwenGPU · <span class="qg-kern" title="{_e(program.get("kernel", ""))}">{_e(program.get("kernel_name", program.get("kernel", "")))}'
                 f'</span></div><span class="qg-badge engine">{engine}</span>{cons}'
                 f'{"<span class=qg-badge fault>fault</span>" if program.get("fault") else ""}'
                 f'<div class="qg-where">position <b>{st["pos"]}</b> / {st["positions"] - 1} · block <b>{st["block"]}</b>'
                 f' · warp <b>{st["warp"]}</b>{last}</div></div>')
    parts.append('<div class="qg-static-note">Static view of one position (no live kernel): run the notebook '
                 'to scrub, step and set breakpoints.</div>')
    parts.append('<div class="qg-grid">')
    # ROM
    dis = program.get("disassembly", {}).get(st["function"], [])
    pc = st["next"]["pc"] if st.get("next") else None
    ppc = st["last"]["pc"] if st.get("last") and st["last"]["function"] == st["function"] else None
    bps = set()
    rows = []
    for r in dis:
        for lab in r["labels"]:
            rows.append(f'<div class="qg-lab">{_e(lab)}:</div>')
        cls = "cur" if r["pc"] == pc else ("prev" if r["pc"] == ppc else "")
        rows.append(f'<div class="qg-row {cls}"><span class="qg-gut {"bp" if r["pc"] in bps else ""}">●</span>'
                    f'<span class="qg-pcn">{r["pc"]}</span><span>{_e(r["text"])}</span></div>')
    stack = ['<h4 style="margin-top:6px">SIMT stack <span class="qg-sub">top = running</span></h4>'
             '<table class="qg-tbl"><tr><th>pc</th><th>lanes</th><th>reconverge</th></tr>']
    for i, (spc, m, rpc) in reversed(list(enumerate(st["stack"]))):
        top = ' class="qg-top"' if i == len(st["stack"]) - 1 else ""
        stack.append(f'<tr{top}><td class="qg-mono">{spc}</td><td>{_mask(m)}</td>'
                     f'<td class="qg-mono">{"exit" if rpc is None else rpc}</td></tr>')
    stack.append("</table>")
    parts.append(f'<div class="qg-card"><h4>ROM <span class="qg-sub">{_e(st["function"])}</span></h4>'
                 f'<div class="qg-rom">{"".join(rows)}</div><div class="qg-stack">{"".join(stack)}</div></div>')
    # warp
    n = st.get("next")
    w = [f'<div class="qg-card"><h4>Warp <span class="qg-sub">block {st["block"]} · warp {st["warp"]}</span></h4>']
    if n:
        ops = []
        for o in n["ops"]:
            if o["r"] in ("dst", "call"):
                continue
            if o["v"]:
                cells = ""
                for lane in range(4):
                    v = o["v"][lane]
                    a = o["a"][lane] if o["a"] else None
                    txt = "·" if v is None else (("true" if v[0] == "1" else "false") if o["r"] == "guard"
                                                 else v[0 if o["r"] == "addr" else f])
                    cells += f'<td class="qg-mono">{_e(txt)}{f"<div class=qg-lbl>{_e(a)}</div>" if a else ""}</td>'
            else:
                cells = f'<td colspan="4" class="qg-lbl">{_e(o["n"])}</td>'
            ops.append(f'<tr><td class="qg-mono">{_e(o["t"])}</td><td class="role">{_e(o["r"])}</td>{cells}</tr>')
        w.append(f'<div class="qg-next{" faults" if n["faults"] else ""}"><div class="qg-meta">next · pc {n["pc"]} · '
                 f'line {n["line"]} · lanes {_mask(n["active"])} executing {_mask(n["executed"])}</div>'
                 f'<div class="qg-ins">{_e(n["text"])}</div>'
                 f'{"<table class=qg-tbl>" + "".join(ops) + "</table>" if ops else ""}</div>')
    else:
        w.append(f'<div class="qg-next"><div class="qg-meta">{"the launch faulted" if st.get("fault") else "launch finished"}'
                 f'</div></div>')
    head = "".join(f'<th>lane {lane}<span class="qg-tid">{"tid " + ",".join(map(str, st["tids"][lane])) if st["tids"][lane] else "—"}'
                   f'</span><span class="qg-ls {ls[lane]}">{ls[lane]}</span></th>' for lane in range(4))
    body = []
    for r in st["regs"]:
        cells = ""
        for lane in range(4):
            off = ls[lane] not in ("active", "guarded")
            chg = r["c"] >> lane & 1
            cls = ("off " if off else "") + ("chg" if chg else "")
            p = r["p"][lane]
            tip = f' title="points into {_e(p)}"' if p else ""
            mark = '<span class="qg-pt">↗</span>' if p else ""
            cells += f'<td class="{cls}"{tip}>{mark}{_e(r["v"][lane][f])}</td>'
        body.append(f'<tr class="{"" if r["w"] else "unw"}"><td class="rn">{_e(r["n"])}<span class="qg-ty">.{r["t"]}'
                    f'</span></td>{cells}</tr>')
    w.append(f'<div class="qg-regwrap"><table class="qg-regs"><thead><tr><th>reg</th>{head}</tr></thead>'
             f'<tbody>{"".join(body)}</tbody></table></div></div>')
    parts.append("".join(w))
    # memory
    mem = ['<div class="qg-card"><h4>Memory <span class="qg-sub">hex dump</span></h4><div class="qg-memwrap">']
    for m in st["memory"]:
        data = bytes.fromhex(m["hex"])
        chg = set(m["changed"])
        dt = np.dtype(m["dtype"])
        vars_ = (" · " + ", ".join(_e(v[0]) for v in m["vars"])) if m["vars"] else ""
        mem.append(f'<div class="qg-region"><div class="qg-rt"><b>{_e(m["name"])}</b> <span>{m["space"]} '
                   f'0x{m["base"]:x} · {m["dtype"]}[{m["size"] // dt.itemsize}]{vars_}</span></div><div class="qg-hex">')
        for row in range(0, len(data), ROW):
            line = [f'<span class="a">{m["base"] + m["offset"] + row:05x}</span>']
            for k in range(ROW):
                i = row + k
                if i >= len(data):
                    line.append("   ")
                    continue
                o = m["offset"] + i
                ptr, acc = m["ptr"].get(str(o)), m["acc"].get(str(o))
                cls = "b" + (" z" if data[i] == 0 else "") + (" chg" if o in chg else "") + \
                    (" ptr" if ptr else "") + (" acc" if acc else "")
                title = " · ".join(x for x in ["← " + ", ".join(ptr) if ptr else "",
                                               "next: " + ", ".join(acc) if acc else ""] if x)
                tip = f' title="{_e(title)}"' if title else ""
                line.append(f'<span class="{cls}"{tip}>{data[i]:02x}</span>' + ("  " if k == 3 else " "))
            seg = data[row:row + ROW]
            usable = len(seg) // dt.itemsize * dt.itemsize
            vals = np.frombuffer(seg[:usable], dtype=dt.newbyteorder("<")) if usable else []
            dec = " ".join(_e(repr(v.item()) if dt.kind == "f" else v.item()) for v in vals)
            line.append(f'<span class="d">{dec}</span>\n')
            mem.append("".join(line))
        mem.append("</div></div>")
    mem.append("</div></div>")
    parts.append("".join(mem))
    parts.append("</div>")
    # GPU layers
    lay = ['<div class="qg-card qg-layers"><h4>GPU layers</h4>']
    if not program.get("has_model") or not mp:
        lay.append('<div class="qg-placeholder"><b>No model in this launch.</b> It ran on the reference interpreter '
                   '(<code>engine="interp"</code>); with the model engine this panel shows each GPU layer\'s attention '
                   'heads and the DeltaNet state that holds the machine.</div>')
    else:
        off = 0
        for L in mp["layers"]:
            size = L["heads"] * L["n"] * L["n"]
            a = np.frombuffer(attn[off:off + size], dtype=np.uint8).reshape(L["heads"], L["n"], L["n"]) \
                if len(attn) >= off + size else None
            off += size
            imgs = ""
            if a is not None:
                sc = max(2, 72 // max(1, L["n"]))
                imgs = "".join(f'<div class="qg-hm"><img src="{png_data_uri(_seq_cmap(a[h] / 255.0), sc)}">'
                               f'<span>head {h}</span></div>' for h in range(L["heads"]))
            lay.append(f'<div class="qg-lrow"><div class="qg-lname">L{L["layer"]}<div class="qg-lbl">attention</div></div>'
                       f'<div class="qg-heads">{imgs}</div></div>')
        goff = 0
        metas = {g["layer"]: g for g in (gdn_meta or [])}
        for g in mp["gdn"]:
            img = ""
            gm = metas.get(g["layer"])
            if gm:
                size = gm["rows"] * gm["cols"]
                q = np.frombuffer(gdn[goff:goff + size], dtype=np.int8).reshape(gm["rows"], gm["cols"])
                goff += size
                img = f'<img src="{png_data_uri(_div_cmap(q / 127.0), max(2, 180 // max(q.shape)))}">'
            tables = ""
            for m in g["maps"]:
                rows_ = "".join(f'<tr><td>{_e(s["label"])}</td><td>{_e(s["value"][f]) if s["value"] else "empty"}</td>'
                                f'<td>{"" if s["margin"] is None else s["margin"]}</td></tr>' for s in m["slots"])
                tables += (f'<table class="qg-tbl qg-dec"><tr><th colspan="3">{_e(m["name"])}</th></tr>'
                           f'<tr><th>slot</th><th>value</th><th>margin</th></tr>{rows_}</table>')
            lay.append(f'<div class="qg-lrow"><div class="qg-lname">L{g["layer"]}<div class="qg-lbl">DeltaNet</div></div>'
                       f'<div class="qg-gdn">{img}{tables}</div></div>')
        if mp.get("first_mismatch"):
            lay.append(f'<div class="qg-mismatch">first mismatch: {_e(mp["first_mismatch"]["text"])}</div>')
    lay.append("</div>")
    parts.append("".join(lay))
    if st.get("fault"):
        parts.append(f'<div class="qg-fault">{"fault: " if st["finished"] else "the next step faults: "}{_e(st["fault"])}</div>')
    parts.append("</div>")
    return "".join(parts)
