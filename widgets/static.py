"""The inspector without a browser kernel: the current position drawn as self-contained HTML.

Used as the widget's `text/html` fallback (nbconvert exports, notebooks opened without a kernel,
renderers that do not run widgets). It draws the same payload the live widget gets, with the same
CSS; heatmaps become inline PNG images.
"""
from __future__ import annotations

import base64
import html
import re
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


def _memory_html(memory: list, sub: str) -> str:
    """The hex dumps of a snapshot's memory regions (a card)."""
    mem = [f'<div class="qg-card"><h4>Memory <span class="qg-sub">{_e(sub)}</span></h4><div class="qg-memwrap">']
    for m in memory:
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
    return "".join(mem)


def render_html(program: dict, state: dict, fmt: str = "hex", attn: bytes = b"", gdn: bytes = b"",
                attn_meta: list | None = None, latt: bytes = b"", latt_meta: dict | None = None) -> str:
    """The inspector at `state`'s position as static HTML (a `<div class="qg-insp">` with its CSS).
    `program`/`state` are the widget's payloads (`qwengpu.lab.payload`): the interpreter's, or a
    model engine's (`program["mode"] == "machine"`, drawn by `render_machine_html`)."""
    if program.get("mode") == "machine":
        return render_machine_html(program, state, fmt, attn, gdn, attn_meta, latt, latt_meta)
    f = _FMT.get(fmt, 0)
    st = state
    if not st:
        return "<div>qwenGPU inspector (no state)</div>"
    parts = [f"<style>{_CSS}</style>", f'<div class="qg-insp qg-static{_root_class(program)}">']
    # header
    cons = '<span class="qg-badge ref">no model: interpreter state</span>'
    engine = "reference interpreter"
    last = f' · last: <b class="qg-mono">{_e(st["last"]["text"])}</b>' if st.get("last") else ""
    parts.append(f'<div class="qg-head"><div class="qg-title">qwenGPU · <span class="qg-kern" title="{_e(program.get("kernel", ""))}">{_e(program.get("kernel_name", program.get("kernel", "")))}'
                 f'</span></div><span class="qg-badge engine">{engine}</span>{cons}'
                 f'{"<span class=qg-badge fault>fault</span>" if program.get("fault") else ""}'
                 f'<div class="qg-where">position <b>{st["pos"]}</b> / {st["positions"] - 1} · block <b>{st["block"]}</b>'
                 f' · warp <b>{st["warp"]}</b>{last}</div></div>')
    parts.append('<div class="qg-static-note">Static view of one position (no live kernel): run the notebook '
                 'to scrub, step and set breakpoints.</div>')
    parts.append('<div class="qg-grid">')
    parts.append(source_card(program, st["pos"]))
    parts.append(_rom_card(program, st))
    parts.append(_warp_card(st, f))
    parts.append(_memory_html(st["memory"], "hex dump"))
    parts.append("</div>")
    parts.append(timeline_card(program, st["pos"]))
    # GPU layers
    lay = ['<div class="qg-card qg-layers"><h4>GPU layers</h4>'
           '<div class="qg-placeholder"><b>No model in this launch.</b> It ran on the reference interpreter '
           '(<code>engine="interp"</code>); with a model engine (<code>engine="compact"</code> or '
           '<code>"model"</code>) this panel shows each GPU layer\'s read/write pattern over its memory slots and '
           'the DeltaNet state that holds the machine, decoded.</div>']
    lay.append("</div>")
    parts.append("".join(lay))
    if st.get("fault"):
        parts.append(f'<div class="qg-fault">{"fault: " if st["finished"] else "the next step faults: "}{_e(st["fault"])}</div>')
    parts.append("</div>")
    return "".join(parts)


def source_card(program: dict, position: int) -> str:
    """The CUDA source card (a kernel compiled from CUDA with line info): the lines the position
    is at highlighted; empty without a source."""
    src = program.get("source")
    if not src:
        return ""
    now = (program.get("step_lines") or [])[position] if position < len(program.get("step_lines") or []) else []
    now = set(now if isinstance(now, list) else ([now] if now >= 0 else []))
    used = set(src["ptx"].values())
    rows = []
    for i, text in enumerate(src["lines"]):
        n = i + src["first_line"]
        cls = " ".join(c for c in ("used" if n in used else "", "cur" if n in now else "") if c)
        rows.append(f'<div class="qg-srow {cls}" data-line="{n}"><span class="qg-gut">●</span><span class="qg-ln">{n}</span>'
                    f'<span class="qg-stext">{_e(text) or " "}</span></div>')
    return (f'<div class="qg-card qg-col-src"><h4>CUDA <span class="qg-sub">{_e(src["name"])}</span></h4>'
            f'<div class="qg-src">{"".join(rows)}</div></div>')


#: the timeline's colours, by state (`qwengpu.lab.timeline.STATES`), as the widget draws them
TL_COLOURS = {"absent": (255, 255, 255), "running": (47, 158, 68), "guarded": (178, 242, 187), "ready": (165, 216, 255),
              "diverged": (255, 146, 43), "barrier": (132, 94, 247), "exited": (222, 226, 230)}
TL_WORDS = {"running": "runs", "guarded": "on the path, guard false", "ready": "ready (waits for its warp's turn)",
            "diverged": "diverged (masked off)", "barrier": "waits at a barrier", "exited": "exited"}


def timeline_card(program: dict, position: int, width: int = 160) -> str:
    """The warp and lane timeline around `position` as a PNG: rows = every warp's lanes, columns
    = positions (the current one marked by a dark column above and below), with the events
    near it."""
    tl = program.get("timeline")
    if not tl or not tl.get("positions"):
        return ""
    n, W, L = tl["positions"], tl["warps"], tl["lanes"]
    codes = np.frombuffer(tl["codes"].encode("ascii"), np.uint8).reshape(n, W, L) - ord("0")
    start = min(max(0, position - width // 2), max(0, n - width))
    stop = min(n, start + width)
    lut = np.array([TL_COLOURS[k] for k in tl["states"]], np.uint8)
    bands = []
    for w in range(W):
        band = lut[codes[start:stop, w, :].T]                      # [lanes, positions, 3]
        bands.append(_upscale(band, 8, 1))
        bands.append(np.full((4, stop - start, 3), 255, np.uint8))
    img = np.concatenate(bands[:-1], 0)
    mark = np.full((4, stop - start, 3), 255, np.uint8)
    if start <= position < stop:
        mark[:, position - start] = (29, 34, 48)
    img = np.concatenate([mark, img, mark], 0)
    sx = max(1, min(8, 900 // max(1, stop - start)))
    near = [f'{tl["unit"]} {t}: {_e(text)}' for t, _, _, text in tl["events"] if t <= position][-3:]
    legend = "".join(f'<span><i style="background:rgb{TL_COLOURS[k]}"></i>{_e(TL_WORDS[k])}</span>'
                     for k in tl["states"] if k != "absent")
    return (f'<div class="qg-card qg-tl"><h4>Warps &amp; lanes <span class="qg-sub">block {tl["blocks"][min(position, n - 1)]} · '
            f'{"passes" if tl["unit"] == "pass" else "steps"} {start}..{stop - 1} of {n} · rows: warp 0 lanes 0-{L - 1}, then warp 1, ...; the current '
            f'{tl["unit"]} marked above and below</span></h4>'
            f'<img class="qg-tlimg" alt="warp and lane timeline" src="{png_data_uri(_upscale(img, 1, sx))}">'
            f'<div class="qg-tlinfo qg-lbl">{"last events · " + " · ".join(near) if near else "no divergence or barrier yet"}'
            f'</div><div class="qg-tllegend">{legend}</div></div>')


def source_note(program: dict) -> str:
    """What the ROM card says when the launch has no CUDA source (shipped PTX)."""
    if program.get("source") or not program.get("source_note"):
        return ""
    return f'<div class="qg-srcnote">{_e(program["source_note"])}</div>'


def _root_class(program: dict) -> str:
    return " qg-hassrc" if program.get("source") else ""


def _rom_card(program: dict, st: dict) -> str:
    """The ROM card: the function's instructions (current and previous pc marked) and the SIMT stack."""
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
    return (f'<div class="qg-card"><h4>ROM <span class="qg-sub">{_e(st["function"])}</span></h4>{source_note(program)}'
                 f'<div class="qg-rom">{"".join(rows)}</div><div class="qg-stack">{"".join(stack)}</div></div>')


def _warp_card(st: dict, f: int) -> str:
    """The warp card: the next instruction with its operands resolved per lane, and the registers."""
    ls = st["lane_state"]
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
    return "".join(w)


# ---------------------------------------------------------------------------------------------
# the model engines: one position per forward pass, decoded from the model's state

ENGINE_NAMES = {"compact": "compact engine", "model": "stock transformers forward"}
WRITE_RGB = np.array([214, 51, 108])
READ_RGB = np.array([43, 108, 176])


def _upscale(rgb: np.ndarray, sy: int, sx: int) -> np.ndarray:
    return np.asarray(rgb).repeat(max(1, sy), 0).repeat(max(1, sx), 1)


def selection_matrix(meta: dict, sel: dict) -> np.ndarray:
    """A memory's read/write pattern over the window as RGB [used slots, tokens, 3] (time runs to
    the right, the current token last): writes red (key x beta), reads blue (query x output gate,
    the strongest port), both purple."""
    cols = {s: i for i, s in enumerate(meta["used"])}
    n = len(sel["w"])
    W = np.zeros((n, max(1, len(cols))))
    R = np.zeros_like(W)
    for t, (slot, s) in enumerate(sel["w"]):
        if slot in cols:
            W[t, cols[slot]] = s / 255
    for t, ports in enumerate(sel["r"]):
        for slot, s in ports:
            if slot in cols:
                R[t, cols[slot]] = max(R[t, cols[slot]], s / 255)
    white = np.array([255.0, 255.0, 255.0])
    rgb = white - (white - WRITE_RGB) * W[..., None]
    rgb = rgb - (white - READ_RGB) * R[..., None] * np.where(W[..., None] > 0.05, 0.5, 1.0)
    return np.clip(rgb, 0, 255).round().astype(np.uint8).transpose(1, 0, 2)


def machine_badge(program: dict, st: dict) -> tuple[str, str, str]:
    """(css class, text, title) of the consistency badge at this position."""
    c = program.get("consistency") or {}
    fm = st.get("first_mismatch")
    if fm:
        return "bad", f"✗ mismatch at pass {fm['position']}", fm["text"]
    sim, interp = c.get("simulator", {}), c.get("interpreter", {})
    if c.get("exact"):
        return ("ok", f"✓ model = simulator ({sim.get('positions', 0)} passes) = interpreter "
                f"({interp.get('registers', 0)} registers, memory)", "")
    later = program.get("first_mismatch")
    if later:
        return "ref", f"= simulator so far (a mismatch at pass {later['position']})", later["text"]
    return "ref", "not fully compared", ""


def attention_card_html(meta: dict, data: bytes) -> str:
    """The inspector's "Attention · every GPU layer" card as static HTML (`layer_attention_payload`'s
    meta and bytes): the overview of every layer over the tokens, the picked layer per head now and
    its heatmaps over recent tokens, as PNG images."""
    if not meta or meta.get("n") is None:
        return ""
    nL, n, H, R, C = meta["nlayers"], meta["n"], meta["heads"], meta["rows"], meta["cols"]
    b = np.frombuffer(data, np.uint8)
    if b.size != nL * n + H * n + H * R * C:
        return ""
    over = b[:nL * n].reshape(nL, n) / 255.0
    rows = b[nL * n:nL * n + H * n].reshape(H, n) / 255.0
    wins = b[nL * n + H * n:].reshape(H, R, C) / 255.0
    gdn = np.array([k == "gdn" for k in meta["kinds"]])[:, None, None]
    rgb = np.where(gdn, _seq_cmap(over), (255 - 150 * over[..., None]).round().astype(np.uint8))
    px = max(1, min(8, 560 // max(1, n)))
    rgb = _upscale(rgb, 8, px)
    rgb[meta["layer"] * 8:meta["layer"] * 8 + 8, :1] = rgb[meta["layer"] * 8:meta["layer"] * 8 + 8, -1:] = (245, 159, 0)
    base = [L for L, part in enumerate(meta.get("parts") or []) if part == "base"]
    rgb[[r for L in base for r in range(L * 8, L * 8 + 8)]] = (233, 236, 239)     # a base layer: grey (idle)
    names = "".join(f'<div style="height:8px">L{L} {"Δ" if k == "gdn" else "A"}{" base" if L in base else ""}</div>'
                    for L, k in enumerate(meta["kinds"]))
    unit = meta["head_unit"]
    top = "".join(f'<tr><td>{unit} {h}</td><td>{f"token {s} <span class=qg-mono>{_e(tok)}</span>" if w > 0 else "—"}'
                  f'</td><td>{f"{w:.3f}" if w > 0 else ""}</td></tr>' for h, (s, w, tok) in enumerate(meta["top"]))
    cm = _seq_cmap if meta["kind"] == "linear_attention" else (lambda x: (255 - 150 * x[..., None]).round().astype(np.uint8))
    hpx = max(2, 96 // max(1, C))
    heads = "".join(f'<div class="qg-hm"><img src="{png_data_uri(_upscale(cm(wins[h]), hpx, hpx))}">'
                    f'<span>{unit} {h}</span></div>' for h in range(H))
    kind = "Gated DeltaNet" if meta["kind"] == "linear_attention" else "softmax attention"
    return (f'<div class="qg-card qg-latt" data-layer="{meta["layer"]}" data-t="{meta["t"]}"><h4>Attention · every GPU layer '
            f'<span class="qg-sub">the output of token {meta["t"]} {_e(meta["token"])} draws on tokens {meta["c0"]}..'
            f'{meta["c0"] + n - 1} · {nL} layers (Δ Gated DeltaNet, A softmax attention)</span></h4>'
            f'<div class="qg-lattgrid"><div class="qg-ov"><div class="qg-ovnames" style="font-size:7px;line-height:8px">'
            f'{names}</div><img class="qg-ovcv" src="{png_data_uri(rgb)}"></div>'
            f'<div class="qg-lsel"><div class="qg-lseltitle"><b>L{meta["layer"]}</b> {kind}</div>'
            f'<div class="qg-lbl">{_e(meta["note"])}</div>'
            f'<img class="qg-lrowcv" src="{png_data_uri(_upscale(cm(rows), 8, max(1, min(8, 400 // max(1, n)))))}">'
            f'<table class="qg-tbl qg-ltop">{top}</table><div class="qg-lbl">over recent tokens: rows = tokens '
            f'{meta["r0"]}..{meta["t"]}, columns = tokens {meta["w0"]}..{meta["t"]}</div><div class="qg-heads">{heads}'
            f'</div></div></div></div>')


def render_machine_html(program: dict, st: dict, fmt: str = "hex", attn: bytes = b"", gdn: bytes = b"",
                        attn_meta: list | None = None, latt: bytes = b"", latt_meta: dict | None = None) -> str:
    """A model engine's position (`MachineView`) as static HTML: the bundle the pass runs, the
    registers, lanes and memory decoded from the model's GDN states, the attention of every GPU
    layer (`attention_card_html`), each memory's read/write pattern per GPU layer, one memory's raw
    state beside its decoding, and the cross-checks."""
    f = _FMT.get(fmt, 0)
    if not st:
        return "<div>qwenGPU inspector (no state)</div>"
    parts = [f"<style>{_CSS}</style>", f'<div class="qg-insp qg-static qg-machine{_root_class(program)}">']
    cls, text, title = machine_badge(program, st)
    engine = ENGINE_NAMES.get(program.get("engine"), program.get("engine", ""))
    parts.append(f'<div class="qg-head"><div class="qg-title">qwenGPU · <span class="qg-kern" title="{_e(program.get("kernel", ""))}">'
                 f'{_e(program.get("kernel_name", program.get("kernel", "")))}</span></div>'
                 f'<span class="qg-badge engine">{_e(engine)}</span>'
                 f'<span class="qg-badge qg-cons {cls}" title="{_e(title)}">{_e(text)}</span>'
                 f'{"<span class=qg-badge fault>fault</span>" if program.get("fault") else ""}'
                 f'<div class="qg-where">pass <b>{st["pos"]}</b> / {st["positions"] - 1} · '
                 f'{_pass_where(st)} · block <b>{st["block"]}</b> · warp <b>{st["warp"]}</b></div></div>')
    parts.append('<div class="qg-static-note">Static view of one forward pass (no live kernel): run the notebook '
                 'to scrub, step and set breakpoints. Every value below is decoded from the model\'s own state.</div>')
    parts.append('<div class="qg-grid">')
    parts.append(source_card(program, st["pos"]))
    parts.append(_bundles_html(program, st))
    parts.append(_machine_warp_html(st, f))
    parts.append(_memory_html(st["memory"], f"decoded from GDN memory mem ({_mem_where(program, 'mem')})"))
    parts.append("</div>")
    parts.append(timeline_card(program, st["pos"]))
    parts.append(attention_card_html(latt_meta or {}, latt))
    parts.append(_machine_layers_html(program, st, gdn))
    if st.get("fault"):
        parts.append(f'<div class="qg-fault">fault: {_e(st["fault"])}</div>')
    parts.append("</div>")
    return "".join(parts)


def _mem_where(program: dict, name: str):
    for m in program.get("memories", []):
        if m["name"] == name:
            return m["where"]
    return "?"


def _pass_where(st: dict) -> str:
    w = st.get("what")
    if not w:
        return f'<b class="qg-mono">{_e(st["input"])}</b> → <b class="qg-mono">{_e(st["token"])}</b>'
    return f'<b>{_e(w["text"])}</b>'


def pass_html(st: dict) -> str:
    """A pass in words: what its consumed token makes it do, what it emitted, the tokens."""
    w = st.get("what")
    if not w:
        return f'<div class="qg-meta">pass {st["pos"]}: {_e(st["input"])} → {_e(st["token"])}</div>'
    kind = lambda k: f'<span class="qg-kind k-{k.replace(" ", "-")}">{_e(k)}</span>'
    return (f'<div class="qg-pass">{kind(w["kind"])} {_e(w["text"])}</div>'
            f'<div class="qg-meta">then: {kind(w["then_kind"])} {_e(w["then"])}</div>'
            f'<div class="qg-meta">pass {st["pos"]} consumed <span class="qg-mono">{_e(st["input"])}</span> → emitted '
            f'<span class="qg-mono">{_e(st["token"])}</span></div>')


def _next_bundle(w: dict):
    m = re.match(r"execute bundle (\d+)", w.get("then", "")) if w else None
    return int(m.group(1)) if m else None


def _bundles_html(program: dict, st: dict) -> str:
    rows = []
    w = st.get("what")
    cur = w["bundle"] if w else (st["pc"] if st["in_pass"] else None)
    nxt = _next_bundle(w) if cur is None else None
    mine = {p for p, _, _ in w["ptx"]} if w else set()
    for b in program["bundles"]:
        cls = "cur" if b["pc"] == cur else ("nxt" if b["pc"] == nxt else "")
        rows.append(f'<div class="qg-lab">{_e(b["label"])}</div>')
        rows.append(f'<div class="qg-row {cls}" data-pc="{b["pc"]}"><span class="qg-gut">●</span>'
                    f'<span class="qg-pcn">{b["pc"]}</span><span>{_e(b["term"])}</span></div>')
        for p, line, text in b["ptx"]:
            pcls = ("cur" if p in mine or not w else "inb") if cls == "cur" else cls
            rows.append(f'<div class="qg-row qg-ptx {pcls}"><span></span><span class="qg-pcn">{p}</span>'
                        f'<span>{_e(text)}</span></div>')
    b = program["bundles"][st["pc"]] if st["pc"] < len(program["bundles"]) else None
    det = f'<div class="qg-next">{pass_html(st)}</div>'
    if b is not None and st["in_pass"]:
        ops = "".join(f'<tr><td class="role">{_e(u)}</td><td class="qg-mono">{_e(t)}</td></tr>' for u, t in b["ops"])
        car = "".join(f'<tr><td class="role">carry {j}</td><td class="qg-mono">r{r} ← {_e(n)}</td></tr>'
                      for j, r, n in b["carries"])
        det = (f'<div class="qg-next">{pass_html(st)}<div class="qg-meta">bundle {b["pc"]} in flight · lanes '
               f'{_mask(st.get("running", st["mask"]))} · {_e(b["term"])}</div>'
               f'<table class="qg-tbl">{ops}{car}</table></div>')
    return (f'<div class="qg-card qg-col-rom"><h4>Program <span class="qg-sub">bundles (ROM slots) and their PTX</span></h4>'
            f'{source_note(program)}<div class="qg-rom">{"".join(rows)}</div><div class="qg-stack">{det}</div></div>')


def _lane_word(st, lane: int, word: str) -> str:
    """A lane's word (the lane table after the pass) and, while a bundle is in flight, whether it
    runs for the lane (`st` None: another warp's lane)."""
    run = st is not None and st["in_pass"] and st.get("running", st["mask"]) >> lane & 1
    mark = (f'<span class="qg-run" title="the bundle in flight (bundle {st["pc"]}) runs for this lane">▸ runs</span>'
            if run else "")
    return f'<span class="qg-ls {word}">{word}</span>{mark}'


def _machine_warp_html(st: dict, f: int) -> str:
    ls = st["lane_state"]
    head = "".join(f'<th>lane {lane}<span class="qg-tid">{"tid " + ",".join(map(str, st["tids"][lane])) if st["tids"][lane] else "—"}'
                   f'</span>{_lane_word(st, lane, ls[lane])}</th>' for lane in range(4))
    body = []
    for r in st["regs"]:
        cells = ""
        for lane in range(4):
            off = ls[lane] in ("exited", "absent")
            chg = r["c"] >> lane & 1
            k = r["k"][lane]
            mark = "" if k is None else ('<span class="qg-ok" title="= the interpreter\'s PTX register">✓</span>' if k
                                         else '<span class="qg-no" title="differs from the interpreter">✗</span>')
            cells += f'<td class="{("off " if off else "") + ("chg" if chg else "")}">{mark}{_e(r["v"][lane][f])}</td>'
        body.append(f'<tr class="{"" if r["w"] else "unw"}"><td class="rn">{_e(r["n"])}<span class="qg-ty">{_e(r["l"])}'
                    f'</span></td>{cells}</tr>')
    lanes = ['<table class="qg-tbl qg-lanes"><tr><th>warp</th>' + "".join(f"<th>lane {i}</th>" for i in range(4)) + "</tr>"]
    for w, row in st["lanes"]:
        cur = ' class="qg-top"' if w == st["warp"] else ""
        lanes.append(f'<tr{cur}><td class="qg-mono">{w}</td>' + "".join(
            f'<td class="qg-mono">pc {pc} {_lane_word(st, lane, s) if w == st["warp"] else _lane_word(None, lane, s)}</td>'
            for lane, (pc, s) in enumerate(row)) + "</tr>")
    lanes.append("</table>")
    chk = st.get("checks") or {}
    note = ""
    if chk.get("ok") or chk.get("bad"):
        note = (f'<div class="qg-note">carried registers checked here against the interpreter: {chk["ok"]} ✓'
                f'{", " + str(chk["bad"]) + " ✗" if chk.get("bad") else ""} ({_e(", ".join(chk["names"]))})</div>')
    return (f'<div class="qg-card qg-col-warp"><h4>Warp <span class="qg-sub">block {st["block"]} · warp {st["warp"]} · '
            f'registers from GDN memory reg.emit</span></h4>'
            f'<div class="qg-regwrap"><table class="qg-regs"><thead><tr><th>reg</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>{note}'
            f'<h4 style="margin-top:8px">Lanes <span class="qg-sub">lane table lanes</span></h4>{"".join(lanes)}</div>')


def _machine_layers_html(program: dict, st: dict, gdn: bytes) -> str:
    metas = {m["name"]: m for m in program.get("memories", [])}
    out = ['<div class="qg-card qg-layers"><h4>GPU layers <span class="qg-sub">what each GDN layer\'s key heads '
           'select: writes (key × β) red, reads (query × gate) blue; rows: tokens, the current one last</span></h4>']
    sel = st.get("sel") or {}
    for m in sel.get("mems", []):
        meta = metas.get(m["name"])
        if meta is None:
            continue
        rgb = selection_matrix(meta, m)
        rgb = _upscale(rgb, max(3, min(12, 96 // max(1, rgb.shape[0]))), max(2, min(10, 480 // max(1, rgb.shape[1]))))
        cur_w = m["w"][-1] if m["w"] else None
        cur_r = m["r"][-1] if m["r"] else []
        labels = dict(zip(meta["used"], meta["labels"]))
        now = []
        if cur_w and cur_w[1] >= 128:
            now.append(f"writes {labels.get(cur_w[0], cur_w[0])} (β·k {cur_w[1] / 255:.2f})")
        reads = sorted({labels.get(s, s) for s, v in cur_r if v >= 128}, key=str)
        if reads:
            now.append("reads " + ", ".join(map(str, reads)))
        out.append(f'<div class="qg-lrow" data-mem="{_e(m["name"])}"><div class="qg-lname">{_e(m["where"])}<div class="qg-lbl">'
                   f'{_e(m["name"])}</div></div><div class="qg-hm"><img src="{png_data_uri(rgb)}" '
                   f'title="{_e(", ".join(map(str, meta["labels"])))}"><span>slots used: {len(meta["used"])} of {m["slots"]}</span></div>'
                   f'<div class="qg-lbl" style="max-width:420px">{_e(m["role"])}<br>this pass: {_e("; ".join(now) or "—")}'
                   f'</div></div>')
    g = st.get("gdn")
    if g:
        img = ""
        if gdn and g["rows"] * g["cols"] == len(gdn):
            q = np.frombuffer(gdn, dtype=np.int8).reshape(g["rows"], g["cols"])
            show = max([s["slot"] for s in g["slots"]] + [7]) + 1
            q = q[:min(show, g["rows"])]
            img = f'<img src="{png_data_uri(_upscale(_div_cmap(q / 127.0), max(2, min(8, 160 // q.shape[0])), max(1, min(4, 512 // q.shape[1]))))}">'
        banks = f"; {g['banks']} banks of key heads put together" if g.get("banks", 1) > 1 else ""
        rows = "".join(f'<tr class="{"qg-chgrow" if s["changed"] else ""}"><td>{_e(s["label"])}</td>'
                       f'<td>{_e(s["value"])}</td><td>{s["margin"]}</td></tr>' for s in g["slots"])
        out.append(f'<div class="qg-lrow qg-gdnrow"><div class="qg-lname">{_e(g["where"])}<div class="qg-lbl">{_e(g["memory"])}'
                   f'</div></div><div class="qg-gdn"><div>{img}<div class="qg-lbl">raw state: rows = slots (keys{banks}), '
                   f'columns = value heads × dual-rail bit pairs; |max| {g["scale"]:.1f}</div></div>'
                   f'<table class="qg-tbl qg-dec"><tr><th>slot</th><th>decoded word</th><th>margin</th></tr>{rows}</table>'
                   f'</div></div>')
    c = program.get("consistency") or {}
    if c:
        sim, it = c.get("simulator", {}), c.get("interpreter", {})
        out.append('<table class="qg-tbl qg-checks">'
                   f'<tr><th>model = simulator</th><td>tokens {"equal" if sim.get("tokens_equal") else "differ"}; '
                   f'state after every pass compared at {sim.get("positions")} passes, {sim.get("mismatches")} mismatches</td></tr>'
                   f'<tr><th>model = interpreter</th><td>final memory {_yes(it.get("memory"))}, result buffers '
                   f'{_yes(it.get("buffers"))}, {it.get("registers", 0)} carried registers '
                   f'({it.get("register_mismatches", 0)} differ){"; " + _e(it["note"]) if it.get("note") else ""}</td></tr>'
                   f'<tr><th>margins</th><td>smallest code margin {_num(c.get("min_code_margin"))} (of 16), smallest logit gap '
                   f'{_num(c.get("min_logit_gap"))}</td></tr></table>')
    if st.get("first_mismatch"):
        out.append(f'<div class="qg-mismatch">first mismatch: {_e(st["first_mismatch"]["text"])}</div>')
    out.append("</div>")
    return "".join(out)


def _yes(v) -> str:
    return {True: "equal", False: "DIFFERS", None: "not compared"}.get(v, str(v))


def _num(x) -> str:
    return "—" if x is None else f"{x:.3f}".rstrip("0").rstrip(".")
