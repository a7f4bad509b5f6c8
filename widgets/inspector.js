// qwenGPU register inspector (anywidget ESM). Python sends the program once (`program`) and the
// current position only (`state`, small JSON; `attn`/`gdn` as bytes); scrubbing sets `position`.
// Rendering is string templates into fixed containers: a keypress redraws in a few ms.

const FMT_INDEX = { hex: 0, dec: 1, float: 2 };
const ROW = 8;   // bytes per hex-dump row
const ICON = {
  first: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M3 3h2v10H3zM13 3v10L6 8z" fill="currentColor"/></svg>',
  back: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M11 3v10L4 8z" fill="currentColor"/></svg>',
  play: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M5 3v10l8-5z" fill="currentColor"/></svg>',
  step: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M4 3v10l7-5zM11 3h2v10h-2z" fill="currentColor"/></svg>',
  last: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M3 3v10l7-5zM11 3h2v10h-2z" fill="currentColor"/><path d="M7 3v10l0 0z" fill="currentColor"/></svg>',
  pause: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M4 3h3v10H4zM9 3h3v10H9z" fill="currentColor"/></svg>',
};


function esc(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
function maskDots(m, n = 4) {
  let s = "";
  for (let i = 0; i < n; i++) s += (m >> i) & 1 ? '<span class="on">●</span>' : '<span class="off">○</span>';
  return `<span class="qg-mask">${s}</span>`;
}
function bytesOf(v) {
  if (!v) return new Uint8Array(0);
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (v.buffer) return new Uint8Array(v.buffer, v.byteOffset || 0, v.byteLength);
  return new Uint8Array(0);
}
const DT = {
  int8: [1, "getInt8"], uint8: [1, "getUint8"], int16: [2, "getInt16"], uint16: [2, "getUint16"],
  int32: [4, "getInt32"], uint32: [4, "getUint32"], float32: [4, "getFloat32"], float64: [8, "getFloat64"],
  int64: [8, "getBigInt64"], uint64: [8, "getBigUint64"],
};
function fmtElem(dv, off, dtype) {
  const d = DT[dtype] || DT.uint8;
  const v = dv[d[1]](off, true);
  if (dtype === "float32") return Number.isInteger(v) ? v.toFixed(1) : String(Math.fround(v).toPrecision(7)).replace(/0+$/, "").replace(/\.$/, ".0");
  return String(v);
}
// colour maps
function viridisLike(t) {   // 0..1 -> [r,g,b] (white -> indigo)
  const a = [255, 255, 255], b = [61, 90, 254], c = [20, 20, 90];
  if (t < 0.5) { const u = t / 0.5; return a.map((x, i) => Math.round(x + (b[i] - x) * u)); }
  const u = (t - 0.5) / 0.5; return b.map((x, i) => Math.round(x + (c[i] - x) * u));
}
function diverging(t) {     // -1..1 -> blue / white / red
  const w = [255, 255, 255];
  const tgt = t < 0 ? [43, 108, 176] : [214, 51, 108];
  const u = Math.min(1, Math.abs(t));
  return w.map((x, i) => Math.round(x + (tgt[i] - x) * u));
}
function drawMatrix(canvas, rows, cols, get, cmap, px) {
  canvas.width = cols * px; canvas.height = rows * px;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(cols, rows);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
    const [R, G, B] = cmap(get(r, c)); const k = (r * cols + c) * 4;
    img.data[k] = R; img.data[k + 1] = G; img.data[k + 2] = B; img.data[k + 3] = 255;
  }
  const off = document.createElement("canvas"); off.width = cols; off.height = rows;
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, cols * px, rows * px);
  return ctx;
}

// rows x cols cells, color per cell (cmap(row)(value)), drawn as one image scaled px x py
function paintGrid(canvas, rows, cols, get, cmapOf, px, py) {
  canvas.width = Math.max(1, cols * px); canvas.height = Math.max(1, rows * py);
  const img = new ImageData(Math.max(1, cols), Math.max(1, rows));
  for (let r = 0; r < rows; r++) {
    const cm = cmapOf(r);
    for (let c = 0; c < cols; c++) {
      const v = get(r, c), k = (r * cols + c) * 4;
      const [R, G, B] = v ? cm(v) : [255, 255, 255];
      img.data[k] = R; img.data[k + 1] = G; img.data[k + 2] = B; img.data[k + 3] = 255;
    }
  }
  const off = document.createElement("canvas"); off.width = img.width; off.height = img.height;
  off.getContext("2d").putImageData(img, 0, 0);
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, cols * px, rows * py);
  return ctx;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "qg-insp";
  root.tabIndex = 0;
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  root.innerHTML = `
    <div class="qg-progress" style="display:none"><div style="width:0%"></div></div>
    <div class="qg-rec" style="display:none"><span class="qg-spin"></span><div class="qg-recbar"><div></div></div><span class="qg-rectext"></span><button class="qg-btn qg-cancel" title="stop the recording">cancel</button></div>
    <div class="qg-head">
      <div class="qg-title">qwenGPU · <span class="qg-kern"></span></div>
      <span class="qg-badge engine"></span><span class="qg-badge qg-cons"></span><span class="qg-badge fault qg-faultb" style="display:none">fault</span>
      <div class="qg-where"></div>
    </div>
    <div class="qg-ctl">
      <button class="qg-btn" data-act="first" title="first position (Home)">${ICON.first}</button>
      <button class="qg-btn" data-act="back" title="step back (←)">${ICON.back}</button>
      <button class="qg-btn qg-play" data-act="play" title="play / pause (space); stops at breakpoints">${ICON.play}</button>
      <button class="qg-btn" data-act="step" title="step (→)">${ICON.step}</button>
      <button class="qg-btn" data-act="last" title="last position (End)">${ICON.last}</button>
      <input class="qg-slider" type="range" min="0" value="0" step="1" aria-label="position">
      <span class="qg-pos"></span>
      <span class="qg-lbl qg-toklbl">step</span><input class="qg-num qg-tok" type="number" min="0" title="jump to a step (position)">
      <span class="qg-lbl">pc</span><input class="qg-num qg-pcin" type="number" min="0" title="run to the next time this pc is next">
      <button class="qg-btn" data-act="topc" title="run to pc">run to pc</button>
      <span class="qg-seg qg-fmt"><button data-f="hex">hex</button><button data-f="dec">dec</button><button data-f="float">float</button></span>
      <select class="qg-speed" title="play speed (steps per second)"><option value="4">4/s</option><option value="10" selected>10/s</option><option value="30">30/s</option></select>
    </div>
    <div class="qg-grid">
      <div class="qg-card qg-col-src" style="display:none">
        <h4>CUDA <span class="qg-sub qg-srcname"></span></h4>
        <div class="qg-src"></div>
        <div class="qg-lbl qg-srccap">the current line and its PTX lines highlighted; click a line to run to it, its gutter for a breakpoint</div>
      </div>
      <div class="qg-card qg-col-rom">
        <h4>ROM <span class="qg-sub qg-fn"></span></h4>
        <div class="qg-srcnote" style="display:none"></div>
        <div class="qg-rom"></div>
        <div class="qg-stack"></div>
      </div>
      <div class="qg-card qg-col-warp">
        <h4>Warp <span class="qg-sub qg-warpsub"></span></h4>
        <div class="qg-next"></div>
        <div class="qg-regwrap"><table class="qg-regs"></table></div>
      </div>
      <div class="qg-card qg-col-mem">
        <h4>Memory <span class="qg-sub">hex dump</span></h4>
        <div class="qg-memwrap"></div>
        <div class="qg-legend"><span><i style="background:var(--qg-chg)"></i>written by the last step</span>
          <span><i style="box-shadow:inset 0 -2px 0 var(--qg-ptr)"></i>a register points here</span>
          <span><i style="outline:1.5px dashed var(--qg-acc);outline-offset:-2px"></i>the next instruction accesses</span></div>
      </div>
    </div>
    <div class="qg-card qg-tl" style="display:none"><h4>Warps &amp; lanes <span class="qg-sub qg-tlsub"></span></h4>
      <div class="qg-tlwrap"><canvas class="qg-tlcv"></canvas></div>
      <div class="qg-tlinfo qg-lbl"></div><div class="qg-tllegend"></div></div>
    <div class="qg-card qg-latt" style="display:none"><h4>Attention · every GPU layer <span class="qg-sub qg-lattsub"></span></h4>
      <div class="qg-lattgrid"><div class="qg-ov"><div class="qg-ovnames"></div><div><canvas class="qg-ovcv" title="click a layer"></canvas><div class="qg-lbl qg-ovcap"></div></div></div>
      <div class="qg-lsel"></div></div></div>
    <div class="qg-card qg-layers"><h4>GPU layers <span class="qg-sub qg-layersub"></span></h4><div class="qg-layerbody"></div></div>
    <div class="qg-faultbox" style="display:none"></div>
    <div class="qg-foot"><kbd>←</kbd> <kbd>→</kbd> step · <kbd>space</kbd> play · <kbd>Home</kbd>/<kbd>End</kbd> · <kbd>b</kbd> breakpoint at pc · click the ROM gutter to toggle breakpoints</div>`;
  el.appendChild(root);
  const $ = (s) => root.querySelector(s);
  // a static export (qwengpu_widgets.export) carries the raw state of the memory picked when it was
  // written, at every position: another memory needs the kernel, so the picker is off and says why
  const exported = !!model.get("exported");
  const pickerNote = (m) => `this export carries the raw state of ${m} only: picking another memory needs the kernel ` +
    "(pick it in the live widget, or set insp.gdn_memory, then export again)";
  const slider = $(".qg-slider"), posEl = $(".qg-pos"), rom = $(".qg-rom");
  let prog = model.get("program") || {};
  let playing = false, timer = null, pending = false, lastSent = -1, tReq = 0;
  let romFn = null;
  let bigSel = null;      // {layer, head}
  let locked = null;      // {r, c}

  function M() { return prog.mode === "machine"; }
  function fmt() { return model.get("fmt") || "hex"; }
  function bps() { return new Set(model.get("breakpoints") || []); }
  function lbps() { return new Set(model.get("line_breakpoints") || []); }
  // CUDA lines: per position as a list (the interpreter sends one number, -1 for none)
  const asLines = (x) => Array.isArray(x) ? x : (x === undefined || x < 0 ? [] : [x]);
  function linesAt(p) { return asLines((prog.step_lines || [])[p]); }
  function hitsAt(p) { return asLines((prog.line_hits || [])[p]); }
  // a colour per CUDA line, shared by the line and its PTX rows (Compiler Explorer's colouring)
  const PALETTE = ["#4dabf7", "#69db7c", "#ffa94d", "#da77f2", "#ff8787", "#3bc9db", "#ffd43b", "#9775fa", "#a9e34b", "#f783ac"];
  function lineColour(n) { return PALETTE[((n % PALETTE.length) + PALETTE.length) % PALETTE.length]; }
  function cudaOf(ptxLine) { const s = prog.source; return s ? s.ptx[String(ptxLine)] : undefined; }
  function clAttr(ptxLine) {
    const n = cudaOf(ptxLine);
    return n === undefined ? "" : ` data-cl="${n}" style="--qg-cl:${lineColour(n)}" title="CUDA line ${n}"`;
  }
  function positions() { return prog.positions || 1; }

  function setPosition(p) {
    p = Math.max(0, Math.min(positions() - 1, p | 0));
    if (p === model.get("position") && p === lastSent) return;
    lastSent = p;
    tReq = performance.now();
    slider.value = p;
    posEl.innerHTML = `<b>${p}</b> / ${positions() - 1}`;
    highlightRom(p);
    pending = true;
    model.set("position", p);
    model.save_changes();
  }

  // ---------------- CUDA source ----------------
  let srcProg = null, srcScrolls = null;     // the program the source panel (or its note) was built for
  function buildSource() {
    const src = prog.source;
    srcProg = prog;
    root.classList.toggle("qg-hassrc", !!src);
    $(".qg-col-src").style.display = src ? "" : "none";
    const note = $(".qg-srcnote");
    note.style.display = src ? "none" : "";
    note.textContent = src ? "" : (prog.source_note || "");
    if (!src) return;
    $(".qg-srcname").textContent = src.name;
    const used = new Set(Object.values(src.ptx));
    const bp = lbps();
    let h = "";
    src.lines.forEach((text, i) => {
      const n = i + src.first_line;
      const u = used.has(n);
      h += `<div class="qg-srow${u ? " used" : ""}" data-line="${n}"${u ? ` style="--qg-cl:${lineColour(n)}"` : ""}><span class="qg-gut${bp.has(n) ? " bp" : ""}" data-lbp="${n}" title="breakpoint on line ${n}">●</span><span class="qg-ln">${n}</span><span class="qg-stext">${esc(text) || " "}</span></div>`;
    });
    $(".qg-src").innerHTML = h;
    srcScrolls = null;                 // known at the first highlight (one layout read, not one per key)
  }
  function highlightSource(p) {
    if (srcProg !== prog) buildSource();
    if (!prog.source) return;
    const cur = new Set(linesAt(p));
    const box = $(".qg-src");
    box.querySelectorAll(".qg-srow.cur").forEach((e) => e.classList.remove("cur"));
    rom.querySelectorAll(".qg-row.src").forEach((e) => e.classList.remove("src"));
    for (const n of cur) {
      const e = box.querySelector(`.qg-srow[data-line="${n}"]`);
      if (e) {
        e.classList.add("cur");
        if (srcScrolls === null) srcScrolls = box.scrollHeight > box.clientHeight + 2;
        if (srcScrolls) {                // a long source: keep the line in view
          const top = e.offsetTop, bottom = top + e.offsetHeight;
          if (top < box.scrollTop + 10 || bottom > box.scrollTop + box.clientHeight - 10) box.scrollTop = Math.max(0, top - 40);
        }
      }
      rom.querySelectorAll(`.qg-row[data-cl="${n}"]`).forEach((r) => r.classList.add("src"));
    }
    root.dataset.cudaLines = [...cur].join(",");
  }
  function toggleLineBreakpoint(n) {
    const s = lbps();
    if (s.has(n)) s.delete(n); else s.add(n);
    model.set("line_breakpoints", [...s].sort((a, b) => a - b));
    model.save_changes();
    $(".qg-src").querySelectorAll(`[data-lbp="${n}"]`).forEach((g) => g.classList.toggle("bp", s.has(n)));
  }
  function runToLine(n) {
    const p0 = model.get("position") | 0;
    for (let t = p0 + 1; t < positions(); t++) if (hitsAt(t).includes(n)) { setPosition(t); return; }
    root.classList.add("qg-nohit"); setTimeout(() => root.classList.remove("qg-nohit"), 300);
  }
  $(".qg-src").addEventListener("click", (ev) => {
    const g = ev.target.closest("[data-lbp]");
    if (g) { toggleLineBreakpoint(+g.dataset.lbp); return; }
    const r = ev.target.closest(".qg-srow.used");
    if (r) runToLine(+r.dataset.line);
  });

  // ---------------- ROM ----------------
  function buildRom(fn) {
    romFn = fn;
    if (M()) { buildBundles(); return; }
    const rows = (prog.disassembly || {})[fn] || [];
    const bp = bps();
    let h = "";
    for (const r of rows) {
      for (const l of r.labels) h += `<div class="qg-lab">${esc(l)}:</div>`;
      h += `<div class="qg-row" data-pc="${r.pc}" title="line ${r.line}"${clAttr(r.line)}><span class="qg-gut ${bp.has(r.pc) ? "bp" : ""}" data-bp="${r.pc}">●</span><span class="qg-pcn">${r.pc}</span><span>${esc(r.text)}</span></div>`;
    }
    rom.innerHTML = h;
  }
  function highlightRom(p) {
    highlightRomRows(p);
    highlightSource(p);
  }
  function highlightRomRows(p) {
    if (M()) { highlightBundle(p); return; }
    const fnIdx = (prog.step_fn || [])[p];
    const fn = fnIdx !== undefined ? prog.functions[fnIdx] : romFn || prog.kernel;
    if (fn !== romFn) buildRom(fn);
    rom.querySelectorAll(".qg-row.cur, .qg-row.prev, .qg-row.faulty").forEach((e) => e.classList.remove("cur", "prev", "faulty"));
    const pc = (prog.step_pc || [])[p];
    const ppc = p > 0 ? prog.step_pc[p - 1] : undefined;
    if (ppc !== undefined && prog.functions[prog.step_fn[p - 1]] === fn) {
      const e = rom.querySelector(`.qg-row[data-pc="${ppc}"]`); if (e) e.classList.add("prev");
    }
    if (pc !== undefined) {
      const e = rom.querySelector(`.qg-row[data-pc="${pc}"]`);
      if (e) {
        e.classList.add(prog.fault && p === positions() - 2 ? "faulty" : "cur");
        const top = e.offsetTop, bottom = top + e.offsetHeight;
        if (top < rom.scrollTop + 20 || bottom > rom.scrollTop + rom.clientHeight - 20)
          rom.scrollTop = Math.max(0, top - rom.clientHeight / 2);
      }
    }
  }
  rom.addEventListener("click", (ev) => {
    const g = ev.target.closest("[data-bp]");
    if (!g) return;
    toggleBreakpoint(+g.dataset.bp);
  });
  function toggleBreakpoint(pc) {
    const s = bps();
    if (s.has(pc)) s.delete(pc); else s.add(pc);
    model.set("breakpoints", [...s].sort((a, b) => a - b));
    model.save_changes();
    rom.querySelectorAll(`[data-bp="${pc}"]`).forEach((g) => g.classList.toggle("bp", s.has(pc)));
  }

  // ---------------- warp ----------------
  function renderWarp(st) {
    const f = FMT_INDEX[fmt()];
    const ls = st.lane_state || [];
    const n = st.next;
    $(".qg-warpsub").textContent = `block ${st.block} · warp ${st.warp}` + (st.depth ? ` · in ${st.function} (depth ${st.depth})` : "");
    const nx = $(".qg-next");
    if (n) {
      nx.className = "qg-next" + (n.faults ? " faults" : "");
      let rows = "";
      for (const o of n.ops) {
        if (o.r === "dst" || o.r === "call") continue;
        let cells = "";
        if (o.v) {
          for (let l = 0; l < 4; l++) {
            const v = o.v[l];
            const a = o.a ? o.a[l] : null;
            const txt = v === null || v === undefined ? "·" : (o.r === "guard" ? (v[0] === "1" ? "true" : "false") : v[o.r === "addr" ? 0 : f]);
            cells += `<td class="qg-mono" title="${a ? esc(a) : ""}">${esc(txt)}${a ? `<div class="qg-lbl">${esc(a)}</div>` : ""}</td>`;
          }
        } else cells = `<td colspan="4" class="qg-lbl">${esc(o.n || "")}</td>`;
        rows += `<tr><td class="qg-mono">${esc(o.t)}</td><td class="role">${esc(o.r)}${o.n && o.v ? " · " + esc(o.n) : ""}</td>${cells}</tr>`;
      }
      nx.innerHTML = `<div class="qg-meta">next · pc ${n.pc} · line ${n.line} · lanes ${maskDots(n.active)} executing ${maskDots(n.executed)}${n.faults ? ' · <b style="color:#d6336c">faults</b>' : ""}</div>
        <div class="qg-ins">${esc(n.text)}</div>${rows ? `<table class="qg-tbl">${rows}</table>` : ""}`;
    } else {
      nx.className = "qg-next";
      nx.innerHTML = `<div class="qg-meta">${st.fault ? "the launch faulted" : "launch finished"}</div><div class="qg-ins">${st.last ? "last: " + esc(st.last.text) : ""}</div>`;
    }
    let h = `<thead><tr><th>reg</th>`;
    for (let l = 0; l < 4; l++) {
      const t = st.tids[l];
      h += `<th>lane ${l}<span class="qg-tid">${t ? "tid " + t.join(",") : "—"}</span><span class="qg-ls ${ls[l]}">${ls[l]}</span></th>`;
    }
    h += `</tr></thead><tbody>`;
    for (const r of st.regs) {
      h += `<tr class="${r.w ? "" : "unw"}" data-reg="${esc(r.n)}"><td class="rn">${esc(r.n)}<span class="qg-ty">.${r.t}</span></td>`;
      for (let l = 0; l < 4; l++) {
        const off = ls[l] !== "active" && ls[l] !== "guarded";
        const chg = (r.c >> l) & 1;
        const p = r.p[l];
        const cls = (off ? "off " : "") + (chg ? "chg" : "");
        h += `<td class="${cls}" data-lane="${l}"${p ? ` title="points into ${esc(p)}"` : ""}>${p ? '<span class="qg-pt">↗</span>' : ""}${esc(r.v[l][f])}</td>`;
      }
      h += `</tr>`;
    }
    $(".qg-regs").innerHTML = h + "</tbody>";
  }

  function renderStack(st) {
    let h = `<h4 style="margin-top:6px">SIMT stack <span class="qg-sub">top = running</span></h4><table class="qg-tbl"><tr><th>pc</th><th>lanes</th><th>reconverge</th></tr>`;
    const s = st.stack || [];
    for (let i = s.length - 1; i >= 0; i--) {
      const [pc, m, rpc] = s[i];
      h += `<tr class="${i === s.length - 1 ? "qg-top" : ""}"><td class="qg-mono">${pc}</td><td>${maskDots(m)}</td><td class="qg-mono">${rpc === null ? "exit" : rpc}</td></tr>`;
    }
    if (!s.length) h += `<tr><td colspan="3" class="qg-lbl">empty (warp done)</td></tr>`;
    h += `</table>`;
    if (st.call_stack && st.call_stack.length > 1) h += `<div class="qg-note">calls: ${st.call_stack.map(esc).join(" → ")}</div>`;
    $(".qg-stack").innerHTML = h;
  }

  // ---------------- memory ----------------
  function renderMemory(st) {
    let h = "";
    for (const m of st.memory) {
      const n = m.hex.length / 2;
      const bytes = new Uint8Array(n);
      for (let i = 0; i < n; i++) bytes[i] = parseInt(m.hex.substr(2 * i, 2), 16);
      const dv = new DataView(bytes.buffer);
      const chg = new Set(m.changed);
      const esz = (DT[m.dtype] || DT.uint8)[0];
      const vars = m.vars.length ? " · " + m.vars.map((v) => esc(v[0])).join(", ") : "";
      h += `<div class="qg-region" data-region="${esc(m.key)}"><div class="qg-rt"><b>${esc(m.name)}</b> <span>${m.space} 0x${m.base.toString(16)} · ${m.dtype}[${Math.floor(m.size / esz)}]${vars}${m.size > n ? ` · bytes ${m.offset}..${m.offset + n}` : ""}</span></div><div class="qg-hex">`;
      for (let row = 0; row < n; row += ROW) {
        const addr = m.base + m.offset + row;
        h += `<span class="a">${addr.toString(16).padStart(5, "0")}</span>`;
        let dec = "";
        for (let k = 0; k < ROW; k++) {
          const i = row + k;
          if (i >= n) { h += "   "; continue; }
          const o = m.offset + i;
          const ptr = m.ptr[o], acc = m.acc[o];
          let cls = "b" + (bytes[i] === 0 ? " z" : "") + (chg.has(o) ? " chg" : "") + (ptr ? " ptr" : "") + (acc ? " acc" : "");
          const title = [ptr ? "← " + ptr.join(", ") : "", acc ? "next: " + acc.join(", ") : ""].filter(Boolean).join(" · ");
          h += `<span class="${cls}"${title ? ` title="${esc(title)}"` : ""}>${bytes[i].toString(16).padStart(2, "0")}</span>` + (k === 3 ? "  " : " ");
        }
        for (let e = row; e < Math.min(row + ROW, n); e += esz) {
          if (e + esz > n) break;
          let ec = false;
          for (let b = 0; b < esz; b++) if (chg.has(m.offset + e + b)) ec = true;
          dec += `<span class="e${ec ? " chg" : ""}">${esc(fmtElem(dv, e, m.dtype))}</span> `;
        }
        h += `<span class="d">${dec}</span>\n`;
      }
      h += `</div></div>`;
    }
    $(".qg-memwrap").innerHTML = h || `<div class="qg-lbl">no memory regions</div>`;
  }

  // ---------------- GPU layers ----------------
  function renderLayers(st) {
    const body = $(".qg-layerbody");
    const mp = st.model;
    if (!prog.has_model || !mp) {
      $(".qg-layersub").textContent = "engine: " + (prog.engine || "interp");
      body.innerHTML = `<div class="qg-placeholder"><b>No model in this launch.</b> It ran on the reference interpreter (<code>engine="interp"</code>): the registers, ROM and memory above are the interpreter's own state. When a launch runs on the model engine, this panel shows, per GPU layer, each attention head's pattern over the tokens and the raw Gated DeltaNet state that holds the machine, side by side with what it decodes to; the badge above then compares that decoding with the interpreter at every step.</div>`;
      return;
    }
    const tok = mp.token ? `token ${mp.token.index} “${esc(mp.token.text)}”` : "";
    $(".qg-layersub").textContent = `${tok} · window from token ${mp.window_start}`;
    const att = bytesOf(model.get("attn"));
    let off = 0;
    let h = "";
    const mats = [];
    for (const L of mp.layers) {
      const size = L.heads * L.n * L.n;
      mats.push({ L, data: att.subarray(off, off + size) });
      off += size;
      h += `<div class="qg-lrow"><div class="qg-lname">L${L.layer}<div class="qg-lbl">attention</div></div><div class="qg-heads">`;
      for (let hd = 0; hd < L.heads; hd++) h += `<div class="qg-hm" data-layer="${L.layer}" data-head="${hd}"><canvas></canvas><span>head ${hd}</span></div>`;
      h += `</div></div>`;
    }
    for (const g of mp.gdn) {
      h += `<div class="qg-lrow"><div class="qg-lname">L${g.layer}<div class="qg-lbl">DeltaNet</div></div><div class="qg-gdn" data-gdn="${g.layer}"><div><canvas class="qg-gdncv"></canvas><div class="qg-lbl qg-gdncap"></div></div>`;
      for (const m of g.maps) {
        h += `<table class="qg-tbl qg-dec"><tr><th colspan="3">${esc(m.name)} · ${m.width}-bit words</th></tr><tr><th>slot</th><th>value</th><th>margin</th></tr>`;
        for (const s of m.slots) h += `<tr><td>${esc(s.label)}</td><td>${s.value ? esc(s.value[FMT_INDEX[fmt()]]) : '<span class="qg-lbl">empty</span>'}</td><td>${s.margin === null ? "" : s.margin}</td></tr>`;
        h += `</table>`;
      }
      h += `</div></div>`;
    }
    h += `<div class="qg-bigslot"></div>`;
    body.innerHTML = h;
    for (const { L, data } of mats) {
      const n = L.n, px = Math.max(2, Math.floor(72 / Math.max(1, n)));
      body.querySelectorAll(`.qg-hm[data-layer="${L.layer}"]`).forEach((box) => {
        const hd = +box.dataset.head;
        drawMatrix(box.querySelector("canvas"), n, n, (r, c) => data[hd * n * n + r * n + c] / 255, viridisLike, px);
        box.addEventListener("click", () => { bigSel = { layer: L.layer, head: hd }; locked = null; renderBig(mp, mats); });
      });
    }
    const gbytes = bytesOf(model.get("gdn"));
    const gmeta = model.get("gdn_meta") || [];
    let goff = 0;
    for (const gm of gmeta) {
      const size = gm.rows * gm.cols;
      const q = new Int8Array(gbytes.buffer, gbytes.byteOffset + goff, size);
      goff += size;
      const box = body.querySelector(`[data-gdn="${gm.layer}"]`);
      if (!box) continue;
      const px = Math.max(2, Math.floor(180 / Math.max(gm.rows, gm.cols)));
      drawMatrix(box.querySelector("canvas"), gm.rows, gm.cols, (r, c) => q[r * gm.cols + c] / 127, diverging, px);
      box.querySelector(".qg-gdncap").textContent = `head ${gm.head}: keys (slots) × values (dual-rail bit pairs), |max| ${gm.scale.toFixed(1)}`;
    }
    if (bigSel) renderBig(mp, mats);
  }
  function renderBig(mp, mats) {
    const slot = $(".qg-bigslot");
    if (!slot) return;
    const m = mats.find((x) => x.L.layer === bigSel.layer);
    if (!m) { slot.innerHTML = ""; return; }
    const n = m.L.n, hd = bigSel.head;
    const px = Math.max(6, Math.floor(360 / Math.max(1, n)));
    slot.innerHTML = `<div class="qg-big"><div><canvas></canvas></div><div class="qg-info"><div><b>layer ${m.L.layer} · head ${hd}</b> <button class="qg-btn qg-close" title="close">✕</button></div>
      <div class="qg-lbl">rows: queries (tokens), columns: keys; hover to focus, click to lock</div><div class="qg-hover"></div>
      <div class="qg-lockline" style="display:none"><span class="qg-lock"></span> <button class="qg-btn qg-unlock">unlock</button></div></div></div>`;
    const cv = slot.querySelector("canvas");
    const tokens = mp.tokens;
    const get = (r, c) => m.data[hd * n * n + r * n + c] / 255;
    const margin = 70;
    const draw = (fr, fc) => {
      const ctx = drawMatrix(cv, n, n, get, viridisLike, px);
      // axes with token labels
      const W = n * px, full = document.createElement("canvas");
      full.width = W + margin; full.height = W + margin;
      const c2 = full.getContext("2d");
      c2.fillStyle = "#fff"; c2.fillRect(0, 0, full.width, full.height);
      c2.drawImage(cv, margin, 0);
      c2.font = `${Math.min(11, px)}px monospace`; c2.fillStyle = "#495057"; c2.textBaseline = "middle";
      for (let i = 0; i < n; i++) {
        const t = String(tokens[i] ?? i).slice(0, 9);
        c2.textAlign = "right"; c2.fillText(t, margin - 3, i * px + px / 2);
        c2.save(); c2.translate(margin + i * px + px / 2, W + 3); c2.rotate(Math.PI / 3); c2.textAlign = "left"; c2.fillText(t, 0, 0); c2.restore();
      }
      if (fr !== null) {
        c2.strokeStyle = locked ? "#5f3dc4" : "#d9480f"; c2.lineWidth = 1.5;
        c2.strokeRect(margin, fr * px, W, px); c2.strokeRect(margin + fc * px, 0, px, W);
      }
      cv.width = full.width; cv.height = full.height;
      cv.getContext("2d").drawImage(full, 0, 0);
      void ctx;
    };
    const cell = (ev) => {
      const r = cv.getBoundingClientRect();
      const x = (ev.clientX - r.left) * (cv.width / r.width) - margin, y = (ev.clientY - r.top) * (cv.height / r.height);
      const c = Math.floor(x / px), rr = Math.floor(y / px);
      return rr >= 0 && rr < n && c >= 0 && c < n ? { r: rr, c } : null;
    };
    const info = (p) => p ? `query “${esc(tokens[p.r])}” (${mp.window_start + p.r}) → key “${esc(tokens[p.c])}” (${mp.window_start + p.c}): ${(get(p.r, p.c) * m.L.scale).toFixed(3)}` : "";
    draw(locked ? locked.r : null, locked ? locked.c : null);
    const hover = slot.querySelector(".qg-hover"), lockline = slot.querySelector(".qg-lockline");
    const showLock = () => {
      lockline.style.display = locked ? "" : "none";
      if (locked) slot.querySelector(".qg-lock").innerHTML = "🔒 " + info(locked);
    };
    showLock();
    cv.addEventListener("mousemove", (ev) => {
      if (locked) return;
      const p = cell(ev);
      draw(p ? p.r : null, p ? p.c : null);
      hover.innerHTML = info(p);
    });
    cv.addEventListener("click", (ev) => { const p = cell(ev); if (p) { locked = p; draw(p.r, p.c); hover.innerHTML = ""; showLock(); } });
    slot.querySelector(".qg-unlock").addEventListener("click", () => { locked = null; draw(null, null); showLock(); });
    slot.querySelector(".qg-close").addEventListener("click", () => { bigSel = null; locked = null; slot.innerHTML = ""; });
  }

  // ---------------- model engines: one position per forward pass ----------------
  const ENGINES = { compact: "compact engine", model: "stock transformers forward" };
  function buildBundles() {
    const bp = bps();
    let h = "";
    for (const b of prog.bundles || []) {
      h += `<div class="qg-lab">${esc(b.label)}</div>`;
      h += `<div class="qg-row" data-pc="${b.pc}"><span class="qg-gut ${bp.has(b.pc) ? "bp" : ""}" data-bp="${b.pc}">●</span><span class="qg-pcn">${b.pc}</span><span>${esc(b.term)}</span></div>`;
      for (const [p, line, text] of b.ptx) h += `<div class="qg-row qg-ptx" data-bpc="${b.pc}" data-ptxpc="${p}" title="PTX line ${line}"${clAttr(line)}><span></span><span class="qg-pcn">${p}</span><span>${esc(text)}</span></div>`;
    }
    rom.innerHTML = h;
    romFn = "__bundles__";
  }
  // the pass's bundle and the PTX instructions it belongs to (a carry: the one that computed the
  // value; a memory write: the store); between bundles, the bundle that runs next
  function highlightBundle(p) {
    if (romFn !== "__bundles__") buildBundles();
    rom.querySelectorAll(".cur, .prev, .inb, .nxt").forEach((e) => e.classList.remove("cur", "prev", "inb", "nxt"));
    const st = model.get("state") || {};
    const w = st.pos === p ? st.what : null;
    let pc = w ? w.bundle : (prog.step_pc || [])[p];
    let cls = "cur";
    if (w && (pc === null || pc === undefined)) {
      const m = /^execute bundle (\d+)/.exec(w.then || "");
      pc = m ? +m[1] : null;
      cls = "nxt";
    }
    if (pc === null || pc === undefined) return;
    const mine = new Set(((w && cls === "cur") ? w.ptx : []).map((x) => x[0]));
    rom.querySelectorAll(`[data-pc="${pc}"]`).forEach((e) => e.classList.add(cls));
    rom.querySelectorAll(`[data-bpc="${pc}"]`).forEach((e) => e.classList.add(cls === "cur" && !mine.has(+e.dataset.ptxpc) ? "inb" : cls));
    const e = rom.querySelector(`.qg-row[data-pc="${pc}"]`);
    if (e) {
      const top = e.offsetTop, bottom = top + e.offsetHeight;
      if (top < rom.scrollTop + 20 || bottom > rom.scrollTop + rom.clientHeight - 20) rom.scrollTop = Math.max(0, top - 30);
    }
  }
  // a pass in words: what its consumed token makes it do, and what it emitted
  function passHTML(st) {
    const w = st.what;
    if (!w) return `<div class="qg-meta">pass ${st.pos}: ${esc(st.input)} → ${esc(st.token)}</div>`;
    return `<div class="qg-pass"><span class="qg-kind k-${w.kind.replace(/ /g, "-")}">${esc(w.kind)}</span> ${esc(w.text)}</div>
      <div class="qg-meta">then: <span class="qg-kind k-${w.then_kind.replace(/ /g, "-")}">${esc(w.then_kind)}</span> ${esc(w.then)}</div>
      <div class="qg-meta">pass ${st.pos} consumed <span class="qg-mono">${esc(st.input)}</span> → emitted <span class="qg-mono">${esc(st.token)}</span></div>`;
  }
  // a lane's word (the lane table after the pass) and, while a bundle is in flight, whether it runs for the lane
  function laneWord(st, l, s) {
    const run = st.in_pass && ((st.running >> l) & 1);
    return `<span class="qg-ls ${s}">${s}</span>${run ? `<span class="qg-run" title="the bundle in flight (bundle ${st.pc}) runs for this lane">▸ runs</span>` : ""}`;
  }
  function renderMachineWarp(st) {
    const f = FMT_INDEX[fmt()];
    const ls = st.lane_state || [];
    $(".qg-warpsub").textContent = `block ${st.block} · warp ${st.warp} · registers from GDN memory reg.emit`;
    const b = (prog.bundles || [])[st.pc];
    const nx = $(".qg-next");
    nx.className = "qg-next";
    if (b) {
      let rows = "";
      for (const [u, t] of b.ops) rows += `<tr><td class="role">${esc(u)}</td><td class="qg-mono">${esc(t)}</td></tr>`;
      for (const [j, r, n] of b.carries) rows += `<tr><td class="role">carry ${j}</td><td class="qg-mono">r${r} ← ${esc(n)}</td></tr>`;
      nx.innerHTML = passHTML(st) + (st.in_pass
        ? `<div class="qg-meta">bundle ${b.pc} in flight · lanes ${maskDots(st.running)} · ${esc(b.term)}</div><table class="qg-tbl">${rows}</table>`
        : `<div class="qg-meta">between bundles: no bundle in flight</div>`);
    } else nx.innerHTML = passHTML(st);
    let h = `<thead><tr><th>reg</th>`;
    for (let l = 0; l < 4; l++) {
      const t = st.tids[l];
      h += `<th>lane ${l}<span class="qg-tid">${t ? "tid " + t.join(",") : "—"}</span>${laneWord(st, l, ls[l])}</th>`;
    }
    h += `</tr></thead><tbody>`;
    for (const r of st.regs) {
      h += `<tr class="${r.w ? "" : "unw"}" data-reg="${esc(r.n)}"><td class="rn">${esc(r.n)}<span class="qg-ty">${esc(r.l)}</span></td>`;
      for (let l = 0; l < 4; l++) {
        const off = ls[l] === "exited" || ls[l] === "absent";
        const chg = (r.c >> l) & 1;
        const k = r.k[l];
        const mark = k === null ? "" : (k ? '<span class="qg-ok" title="= the interpreter\'s PTX register">✓</span>' : '<span class="qg-no" title="differs from the interpreter">✗</span>');
        h += `<td class="${(off ? "off " : "") + (chg ? "chg" : "")}" data-lane="${l}">${mark}${esc(r.v[l][f])}</td>`;
      }
      h += `</tr>`;
    }
    $(".qg-regs").innerHTML = h + "</tbody>";
    let lt = `<h4 style="margin-top:6px">Lanes <span class="qg-sub">lane table lanes</span></h4><table class="qg-tbl qg-lanes"><tr><th>warp</th>`;
    for (let l = 0; l < 4; l++) lt += `<th>lane ${l}</th>`;
    lt += `</tr>`;
    for (const [w, row] of st.lanes) {
      lt += `<tr class="${w === st.warp ? "qg-top" : ""}"><td class="qg-mono">${w}</td>`;
      row.forEach(([pc, s], l) => { lt += `<td class="qg-mono">pc ${pc} ${w === st.warp ? laneWord(st, l, s) : `<span class="qg-ls ${s}">${s}</span>`}</td>`; });
      lt += `</tr>`;
    }
    lt += `</table>`;
    const c = st.checks || {};
    if (c.ok || c.bad) lt += `<div class="qg-note">carried registers checked here against the interpreter: ${c.ok} ✓${c.bad ? `, ${c.bad} ✗` : ""} (${esc((c.names || []).join(", "))})</div>`;
    let box = $(".qg-lanesbox");
    if (!box) {
      box = document.createElement("div");
      box.className = "qg-lanesbox";
      $(".qg-regwrap").after(box);
    }
    box.innerHTML = lt;
    $(".qg-stack").innerHTML = "";
  }
  // a memory's read/write pattern: rows = the slots the launch uses, columns = tokens (current last)
  function drawSelection(canvas, meta, m) {
    const cols = new Map(meta.used.map((s, i) => [s, i]));
    const n = m.w.length, rows = Math.max(1, meta.used.length);
    const W = new Float32Array(rows * n), R = new Float32Array(rows * n);
    m.w.forEach(([slot, v], t) => { if (cols.has(slot)) W[cols.get(slot) * n + t] = v / 255; });
    m.r.forEach((ports, t) => { for (const [slot, v] of ports) if (cols.has(slot)) { const k = cols.get(slot) * n + t; R[k] = Math.max(R[k], v / 255); } });
    const px = Math.max(2, Math.min(10, Math.floor(480 / Math.max(1, n)))), py = Math.max(3, Math.min(12, Math.floor(96 / rows)));
    canvas.width = n * px; canvas.height = rows * py;
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
    for (let r = 0; r < rows; r++) for (let t = 0; t < n; t++) {
      const w = W[r * n + t], rd = R[r * n + t];
      if (!w && !rd) continue;
      const col = [255, 255, 255].map((x, i) => x - (x - [214, 51, 108][i]) * w);
      const f = w > 0.05 ? 0.5 : 1;
      const c2 = col.map((x, i) => Math.max(0, Math.round(x - (255 - [43, 108, 176][i]) * rd * f)));
      ctx.fillStyle = `rgb(${c2[0]},${c2[1]},${c2[2]})`;
      ctx.fillRect(t * px, r * py, px, py);
    }
    ctx.strokeStyle = "#f59f00"; ctx.lineWidth = 1.5; ctx.strokeRect((n - 1) * px + 0.75, 0.75, px - 1.5, rows * py - 1.5);
    return { px, py, n, rows };
  }
  function renderMachineLayers(st) {
    const body = $(".qg-layerbody");
    const sel = st.sel || { mems: [], tokens: [] };
    $(".qg-layersub").textContent = `writes (key × β) red, reads (query × gate) blue · columns: tokens ${sel.start}..${sel.start + sel.tokens.length - 1}, the current one last (outlined)`;
    const metas = {};
    for (const m of prog.memories || []) metas[m.name] = m;
    let h = "";
    for (const m of sel.mems) {
      const meta = metas[m.name];
      if (!meta) continue;
      const lab = new Map(meta.used.map((s, i) => [s, meta.labels[i]]));
      const cw = m.w[m.w.length - 1], cr = m.r[m.r.length - 1] || [];
      const now = [];
      if (cw && cw[1] >= 128) now.push(`writes ${esc(lab.get(cw[0]) ?? cw[0])} (β·k ${(cw[1] / 255).toFixed(2)})`);
      const reads = [...new Set(cr.filter(([, v]) => v >= 128).map(([s]) => lab.get(s) ?? s))];
      if (reads.length) now.push("reads " + reads.map(esc).join(", "));
      h += `<div class="qg-lrow" data-mem="${esc(m.name)}"><div class="qg-lname">${esc(m.where)}<div class="qg-lbl">${esc(m.name)}</div></div><div class="qg-hm qg-sel"><canvas></canvas><span>slots used: ${meta.used.length} of ${m.slots}</span></div><div class="qg-lbl" style="max-width:420px">${esc(m.role)}<br>this pass: ${now.join("; ") || "—"}<div class="qg-hover"></div></div></div>`;
    }
    const g = st.gdn;
    if (g) {
      let opts = "";
      for (const m of prog.memories || []) opts += `<option value="${esc(m.name)}"${m.name === g.memory ? " selected" : ""}>${esc(m.where)} ${esc(m.name)}</option>`;
      let rows = "";
      for (const s of g.slots) rows += `<tr class="${s.changed ? "qg-chgrow" : ""}"><td>${esc(s.label)}</td><td>${esc(s.value)}</td><td>${s.margin}</td></tr>`;
      h += `<div class="qg-lrow qg-gdnrow"><div class="qg-lname">${esc(g.where)}<div class="qg-lbl">${esc(g.memory)}</div></div><div class="qg-gdn"><div>${exported ? `<select class="qg-memsel" disabled title="${esc(pickerNote(g.memory))}">${opts}</select><div class="qg-lbl qg-static-why">${esc(pickerNote(g.memory))}</div>` : `<select class="qg-memsel" title="the memory whose raw GDN state is shown">${opts}</select>`}<br><canvas class="qg-gdncv"></canvas><div class="qg-lbl">raw state: rows = slots (keys${g.banks > 1 ? `; ${g.banks} banks of key heads put together` : ""}), columns = value heads × dual-rail bit pairs; |max| ${g.scale.toFixed(1)}</div></div>
        <table class="qg-tbl qg-dec"><tr><th>slot</th><th>decoded word</th><th>margin</th></tr>${rows || '<tr><td colspan="3" class="qg-lbl">no slot written</td></tr>'}</table></div></div>`;
    }
    const am = model.get("attn_meta") || [];
    for (const L of am) {
      h += `<div class="qg-lrow"><div class="qg-lname">L${L.layer}<div class="qg-lbl">attention</div></div><div class="qg-heads">`;
      for (let hd = 0; hd < L.heads; hd++) h += `<div class="qg-hm" data-layer="${L.layer}" data-head="${hd}"><canvas></canvas><span>head ${hd}</span></div>`;
      h += `</div></div>`;
    }
    const c = prog.consistency || {};
    if (c.simulator) {
      const sim = c.simulator, it = c.interpreter || {};
      const yes = (v) => v === true ? "equal" : v === false ? "DIFFERS" : "not compared";
      const num = (x) => x === null || x === undefined ? "—" : (+x).toFixed(3).replace(/\.?0+$/, "");
      h += `<table class="qg-tbl qg-checks"><tr><th>model = simulator</th><td>tokens ${sim.tokens_equal ? "equal" : "differ"}; state after every pass compared at ${sim.positions} passes, ${sim.mismatches} mismatches</td></tr>
        <tr><th>model = interpreter</th><td>final memory ${yes(it.memory)}, result buffers ${yes(it.buffers)}, ${it.registers || 0} carried registers (${it.register_mismatches || 0} differ)${it.note ? "; " + esc(it.note) : ""}</td></tr>
        <tr><th>margins</th><td>smallest code margin ${num(c.min_code_margin)} (of 16), smallest logit gap ${num(c.min_logit_gap)}</td></tr></table>`;
    }
    if (st.first_mismatch) h += `<div class="qg-mismatch">first mismatch: ${esc(st.first_mismatch.text)}</div>`;
    body.innerHTML = h;
    for (const m of sel.mems) {
      const row = body.querySelector(`.qg-lrow[data-mem="${m.name}"]`);
      const meta = metas[m.name];
      if (!row || !meta) continue;
      const cv = row.querySelector("canvas");
      const geo = drawSelection(cv, meta, m);
      const hover = row.querySelector(".qg-hover");
      cv.addEventListener("mousemove", (ev) => {
        const r = cv.getBoundingClientRect();
        const t = Math.floor((ev.clientX - r.left) * (cv.width / r.width) / geo.px), k = Math.floor((ev.clientY - r.top) * (cv.height / r.height) / geo.py);
        if (t < 0 || t >= geo.n || k < 0 || k >= geo.rows) { hover.textContent = ""; return; }
        const slot = meta.used[k], w = m.w[t], rd = (m.r[t] || []).filter(([s]) => s === slot).map(([, v]) => v);
        hover.textContent = `token ${sel.start + t} ${sel.tokens[t]} · slot ${meta.labels[k]}: write ${w[0] === slot ? (w[1] / 255).toFixed(2) : "0"}, read ${rd.length ? (Math.max(...rd) / 255).toFixed(2) : "0"}`;
      });
      cv.addEventListener("mouseleave", () => { hover.textContent = ""; });
    }
    if (g) {
      const gb = bytesOf(model.get("gdn"));
      if (gb.length === g.rows * g.cols) {
        const q = new Int8Array(gb.buffer, gb.byteOffset, gb.length);
        const show = Math.min(g.rows, Math.max(8, ...g.slots.map((s) => s.slot + 1)));
        const py = Math.max(2, Math.min(8, Math.floor(160 / show))), px = Math.max(1, Math.min(4, Math.floor(512 / g.cols)));
        const cv = body.querySelector(".qg-gdncv");
        paintGrid(cv, show, g.cols, (r, c2) => q[r * g.cols + c2] / 127, () => diverging, px, py);
      }
      if (!exported) body.querySelector(".qg-memsel").addEventListener("change", (ev) => { model.set("gdn_memory", ev.target.value); model.save_changes(); });
    }
    const att = bytesOf(model.get("attn"));
    let off = 0;
    for (const L of am) {
      const n = L.n, px = Math.max(2, Math.floor(72 / Math.max(1, n)));
      body.querySelectorAll(`.qg-hm[data-layer="${L.layer}"]`).forEach((box) => {
        const hd = +box.dataset.head, base = off + hd * n * n;
        drawMatrix(box.querySelector("canvas"), n, n, (r, c2) => att[base + r * n + c2] / 255, viridisLike, px);
      });
      off += L.heads * n * n;
    }
  }
  // ---------------- attention of every GPU layer ----------------
  // overview: rows = layers, columns = tokens, each layer's largest weight (over heads) on each token
  // for the current token's output; the selected layer per head, and as a heatmap over recent tokens
  function ramp(kind) { return kind === "gdn" ? viridisLike : (t) => { const v = Math.round(255 - 150 * t); return [v, v - 10 < 0 ? 0 : v - 10, v]; }; }
  let lattDrawn = null;
  function renderLayerAttention() {
    const card = $(".qg-latt");
    const meta = model.get("latt_meta") || {};
    lattDrawn = model.get("latt_meta");
    if (!M() || meta.n === undefined) { card.style.display = "none"; return; }
    card.style.display = "";
    const b = bytesOf(model.get("latt"));
    const nL = meta.nlayers, n = meta.n, H = meta.heads, R = meta.rows, C = meta.cols;
    const o1 = nL * n, o2 = o1 + H * n;
    if (b.length !== o2 + H * R * C) return;
    card.dataset.layer = meta.layer; card.dataset.t = meta.t;
    const parts = meta.parts || [], nBase = parts.filter((x) => x === "base").length;
    const act = meta.activity, isBase = (L) => parts[L] === "base";
    const idle = (L) => act ? act[L] === 0 : null;
    const baseNow = !nBase ? "" : act ? ` + ${nBase} base layers (${parts.map((x, L) => x === "base" && idle(L)).filter(Boolean).length} idle on this token)` : ` + ${nBase} base layers (not run by the compact engine)`;
    $(".qg-lattsub").textContent = `the output of token ${meta.t} ${meta.token} draws on tokens ${meta.c0}..${meta.c0 + n - 1} · ${nL - nBase} GPU layers (Δ Gated DeltaNet, A softmax attention)${baseNow} · click a layer`;
    const py = 10, px = Math.max(1, Math.min(8, Math.floor(560 / Math.max(1, n))));
    const names = $(".qg-ovnames");
    if (names.childElementCount !== nL) {
      let h = "";
      for (let L = 0; L < nL; L++) h += `<div class="qg-ovname${isBase(L) ? " qg-base" : ""}" data-layer="${L}" style="height:${py}px" title="${esc(prog.layers && prog.layers[L] ? prog.layers[L].role : "")}">L${L} ${meta.kinds[L] === "gdn" ? "Δ" : "A"}${isBase(L) ? " base" : ""}</div>`;
      names.innerHTML = h;
    }
    names.querySelectorAll(".qg-ovname").forEach((d) => {
      const L = +d.dataset.layer;
      d.classList.toggle("on", L === meta.layer);
      if (isBase(L)) d.classList.toggle("qg-idle", idle(L) !== false);
    });
    const cv = $(".qg-ovcv");
    const gdnRamp = ramp("gdn"), attnRamp = ramp("attn");
    const ctx = paintGrid(cv, nL, n, (L, c) => b[L * n + c] / 255, (L) => meta.kinds[L] === "gdn" ? gdnRamp : attnRamp, px, py);
    for (let L = 0; L < nL; L++) if (isBase(L)) {    // a base layer: grey while idle (it adds exactly 0 here)
      ctx.fillStyle = idle(L) === false ? "#ffe8cc" : "#e9ecef"; ctx.fillRect(0, L * py, cv.width, py);
      ctx.fillStyle = "#868e96"; ctx.font = "8px sans-serif";
      ctx.fillText(idle(L) === false ? "base: active (text)" : act ? "base: idle (adds exactly 0)" : "base: not run", 3, L * py + 8);
    }
    ctx.strokeStyle = "#f59f00"; ctx.lineWidth = 1.5; ctx.strokeRect(0.75, meta.layer * py + 0.75, cv.width - 1.5, py - 1.5);
    $(".qg-ovcap").textContent = `rows: layers 0..${nL - 1}; columns: tokens ${meta.c0}..${meta.c0 + n - 1} (the current one last); darker = drawn on more`;
    // the selected layer
    const cm = ramp(meta.kinds[meta.layer]);
    const sel = root.querySelector(".qg-lsel");
    const shape = `${meta.layer}/${H}`;
    if (sel.dataset.shape !== shape) {          // the layer's skeleton: rebuilt only when another layer is picked
      let h = `<div class="qg-lseltitle"><b>L${meta.layer}</b> ${meta.kind === "linear_attention" ? "Gated DeltaNet" : "softmax attention"} · ${esc((prog.layers && prog.layers[meta.layer] || {}).role || "")}</div>
        <div class="qg-lbl qg-lnote"></div><div class="qg-lbl qg-lrowcap"></div><canvas class="qg-lrowcv"></canvas><table class="qg-tbl qg-ltop">`;
      for (let hd = 0; hd < H; hd++) h += `<tr data-head="${hd}"><td>${meta.head_unit} ${hd}</td><td></td><td></td></tr>`;
      h += `</table><div class="qg-lbl qg-lwincap"></div><div class="qg-heads">`;
      for (let hd = 0; hd < H; hd++) h += `<div class="qg-hm qg-lhm" data-head="${hd}"><canvas></canvas><span>${meta.head_unit} ${hd}</span></div>`;
      sel.innerHTML = h + `</div>`;
      sel.dataset.shape = shape;
    }
    sel.querySelector(".qg-lnote").textContent = meta.note + (meta.error ? ` · one-hot reduction error ≤ ${meta.error.toExponential(1)}` : "");
    sel.querySelector(".qg-lrowcap").textContent = `now, per ${meta.head_unit} (rows), over tokens ${meta.c0}..${meta.c0 + n - 1}:`;
    sel.querySelector(".qg-lwincap").textContent = `over recent tokens: rows = tokens ${meta.r0}..${meta.t} (output), columns = tokens ${meta.w0}..${meta.t} (written)`;
    const trs = sel.querySelectorAll(".qg-ltop tr");
    meta.top.forEach(([s0, w, tok], hd) => {
      const td = trs[hd].children;
      td[1].innerHTML = w > 0 ? `token ${s0} <span class="qg-mono">${esc(tok)}</span>` : "—";
      td[2].textContent = w > 0 ? w.toFixed(3) : "";
    });
    const rpx = Math.max(1, Math.min(8, Math.floor(400 / Math.max(1, n))));
    paintGrid(sel.querySelector(".qg-lrowcv"), H, n, (hd, c) => b[o1 + hd * n + c] / 255, () => cm, rpx, 8);
    const hpx = Math.max(2, Math.floor(96 / Math.max(1, C)));
    sel.querySelectorAll(".qg-lhm").forEach((box) => {
      const hd = +box.dataset.head, base = o2 + hd * R * C;
      paintGrid(box.querySelector("canvas"), R, C, (r, c) => b[base + r * C + c] / 255, () => cm, hpx, hpx);
    });
  }
  function pickLayer(L) {
    if (L === model.get("layer")) return;
    tReq = performance.now();
    model.set("layer", L); model.save_changes();
  }
  $(".qg-ovnames").addEventListener("click", (ev) => { const d = ev.target.closest("[data-layer]"); if (d) pickLayer(+d.dataset.layer); });
  $(".qg-ovcv").addEventListener("click", (ev) => {
    const cv = ev.currentTarget, r = cv.getBoundingClientRect();
    const L = Math.floor((ev.clientY - r.top) * (cv.height / r.height) / 10);
    if (L >= 0 && L < (model.get("latt_meta") || {}).nlayers) pickLayer(L);
  });

  function machineBadge(st) {
    const c = prog.consistency || {};
    const fm = st.first_mismatch;
    if (fm) return ["bad", `✗ mismatch at pass ${fm.position}`, fm.text];
    const sim = c.simulator || {}, it = c.interpreter || {};
    const rec = (model.get("recording") || {}).status;
    if (c.partial && c.exact === null && rec === "cancelled") return ["ref", `cancelled: model = simulator over the ${sim.positions} passes recorded (${it.registers || 0} registers)`, "the launch did not end, so its final memory and buffers were not compared"];
    if (c.partial && c.exact === null) return ["ref", `recording: model = simulator so far (${sim.positions} passes, ${it.registers || 0} registers)`, "the final memory and buffers are compared when the launch ends"];
    if (c.exact) return ["ok", `✓ model = simulator (${sim.positions} passes) = interpreter (${it.registers || 0} registers, memory)`, ""];
    if (prog.first_mismatch) return ["ref", `= simulator so far (a mismatch at pass ${prog.first_mismatch.position})`, prog.first_mismatch.text];
    return ["ref", "not fully compared", ""];
  }
  function renderBadge(st) {
    const [cls, text, title] = machineBadge(st);
    const cons = $(".qg-cons");
    cons.className = `qg-badge qg-cons ${cls}`; cons.textContent = text; cons.title = title;
  }
  function renderMachineHead(st) {
    $(".qg-kern").textContent = prog.kernel_name || prog.kernel || "";
    $(".qg-kern").title = prog.kernel || "";
    $(".qg-badge.engine").textContent = ENGINES[prog.engine] || prog.engine;
    renderBadge(st);
    $(".qg-faultb").style.display = prog.fault ? "" : "none";
    const w = st.what;
    $(".qg-where").innerHTML = `pass <b>${st.pos}</b> · ${w ? `<b>${esc(w.text)}</b>` : `<b class="qg-mono">${esc(st.input)}</b> → <b class="qg-mono">${esc(st.token)}</b>`} · block <b>${st.block}</b> · warp <b>${st.warp}</b>`;
    $(".qg-fn").textContent = "bundles (ROM slots) and their PTX";
    root.querySelector(".qg-col-mem h4 .qg-sub").textContent = "decoded from GDN memory mem";
    const fb = $(".qg-faultbox");
    if (st.fault) { fb.style.display = ""; fb.className = "qg-fault qg-faultbox"; fb.textContent = "fault: " + st.fault; }
    else if (st.first_mismatch) { fb.style.display = ""; fb.className = "qg-fault qg-faultbox"; fb.textContent = "first mismatch: " + st.first_mismatch.text; }
    else fb.style.display = "none";
  }

  // ---------------- header ----------------
  function renderHead(st) {
    $(".qg-kern").textContent = prog.kernel_name || prog.kernel || "";
    $(".qg-kern").title = prog.kernel || "";
    const eng = $(".qg-badge.engine");
    eng.textContent = prog.engine === "model" ? "model engine" : "reference interpreter";
    const cons = $(".qg-cons");
    const mp = st.model;
    if (!prog.has_model || !mp) { cons.className = "qg-badge qg-cons ref"; cons.textContent = "no model: interpreter state"; cons.title = ""; }
    else if (mp.first_mismatch) { cons.className = "qg-badge qg-cons bad"; cons.textContent = `✗ mismatch at token ${mp.first_mismatch.token}`; cons.title = mp.first_mismatch.text; }
    else if (mp.checked) { cons.className = "qg-badge qg-cons ok"; cons.textContent = `✓ model = interpreter (${mp.checked} steps)`; cons.title = ""; }
    else { cons.className = "qg-badge qg-cons ref"; cons.textContent = "nothing decoded yet"; cons.title = ""; }
    $(".qg-faultb").style.display = prog.fault ? "" : "none";
    const last = st.last ? ` · last: <b class="qg-mono">${esc(st.last.text)}</b>` : "";
    $(".qg-where").innerHTML = `block <b>${st.block}</b> · warp <b>${st.warp}</b>${last}`;
    $(".qg-fn").textContent = st.function;
    const fb = $(".qg-faultbox");
    if (st.fault) { fb.style.display = ""; fb.className = "qg-fault qg-faultbox"; fb.textContent = (st.finished ? "fault: " : "the next step faults: ") + st.fault; }
    else fb.style.display = "none";
    const mm = mp && mp.first_mismatch;
    if (mm) { fb.style.display = ""; fb.className = "qg-fault qg-faultbox"; fb.textContent = "first mismatch: " + mm.text; }
  }

  // a launch recorded in the background (Inspector(..., background=True)): its progress, and cancel
  let cancelAsked = false;       // the cancel button was pressed: shown at once, before Python answers
  function renderRecording() {
    const r0 = model.get("recording") || {};
    const r = cancelAsked && r0.status === "recording" ? Object.assign({}, r0, { status: "cancelling" }) : r0;
    root.classList.toggle("qg-recording", prog.mode === "recording");   // nothing recorded yet: the bar only
    const on = !!r.status && r.status !== "done";
    const box = $(".qg-rec");
    box.style.display = on ? "" : "none";
    if (!on) return;
    const eng = ENGINES[r.engine] || r.engine || "";
    const n = r.passes || 0, of = r.expected;
    box.dataset.status = r.status;
    box.dataset.passes = n;
    $(".qg-cancel").style.display = r.status === "recording" ? "" : "none";
    $(".qg-recbar").style.display = of && r.status === "recording" ? "" : "none";
    if (of) $(".qg-recbar").firstElementChild.style.width = `${Math.min(100, 100 * n / of).toFixed(2)}%`;
    const shown = prog.mode === "machine" ? ` · showing passes 0..${positions() - 1}: scrub them while it records` : "";
    const st = model.get("state");
    if (prog.mode === "machine" && st && st.pos !== undefined) renderBadge(st);   // the badge follows the recording's status
    $(".qg-rectext").textContent = r.status === "cancelling" ? `cancelling… the recording stops at its next pass (${n} so far)`
      : r.status === "cancelled" ? `recording cancelled${prog.mode === "machine" ? ` · the ${positions()} passes recorded are shown` : ` (${r.error || ""})`}`
      : r.status === "failed" ? `recording failed: ${r.error || ""}`
      : `recording the launch on the ${eng}… ${n}${of ? ` of ${of}` : ""} pass${(of || n) === 1 ? "" : "es"}${of ? " (the simulator's count)" : " so far"}${r.token ? ` · last token ${r.token}` : ""}${shown}`
        + (n === 0 && r.engine === "compact" ? " · starting the engine: the first launch in a kernel loads it, a few seconds (numba compiles it once after an install, ~80 s, unless qwengpu lab's warm-up did)" : "");
  }
  $(".qg-cancel").addEventListener("click", () => { cancelAsked = true; renderRecording(); model.send({ cancel: true }); });

  function renderAll() {
    // one message may carry a new program and a state of it (a recording's next view): its
    // change events come in the message's key order, so take the program the state belongs to
    const p = model.get("program") || {};
    if (p !== prog) {
      // a recording's next view: a position at the last pass follows the new last pass
      const atLast = prog.positions && !pending && (model.get("state") || {}).pos === prog.positions - 1;
      const grew = p.positions > (prog.positions || 0);
      prog = p; romFn = null;
      if (atLast && grew && (model.get("recording") || {}).status === "recording") setTimeout(() => setPosition(positions() - 1), 0);
    }
    renderRecording();
    const st = model.get("state");
    if (!st || st.pos === undefined) return;
    slider.max = positions() - 1;
    slider.value = st.pos;
    posEl.innerHTML = `<b>${st.pos}</b> / ${positions() - 1}`;
    $(".qg-tok").value = st.pos;
    root.classList.toggle("qg-machine", M());
    // the interpreter's unit is a step (one warp-instruction); the model's a pass (one token)
    const unit = M() ? "pass" : "step";
    if ($(".qg-toklbl").textContent !== unit) { $(".qg-toklbl").textContent = unit; $(".qg-tok").title = `jump to a ${unit} (position)`; }
    if (M()) {
      renderMachineHead(st);
      highlightRom(st.pos);
      renderMachineWarp(st);
      renderMemory(st);
      renderMachineLayers(st);
      const t1 = performance.now();
      renderLayerAttention();
      root.dataset.renderAttention = (performance.now() - t1).toFixed(1);
    } else {
      renderHead(st);
      highlightRom(st.pos);
      renderWarp(st);
      renderStack(st);
      renderMemory(st);
      renderLayers(st);
    }
    renderTimeline(st.pos);
    root.querySelectorAll(".qg-fmt button").forEach((b) => b.classList.toggle("on", b.dataset.f === fmt()));
    root.dataset.pos = st.pos;
  }

  // ---------------- warp and lane timeline ----------------
  // rows: every warp's lanes (the running block's), columns: positions around the current one
  const TL_COLOURS = { absent: "#ffffff", running: "#2f9e44", guarded: "#b2f2bb", ready: "#a5d8ff", diverged: "#ff922b",
    barrier: "#845ef7", exited: "#dee2e6" };
  const TL_WORDS = { absent: "no thread", running: "runs", guarded: "on the path, guard false", ready: "ready (waits for its warp's turn)",
    diverged: "diverged (masked off)", barrier: "waits at a barrier", exited: "exited" };
  const TL = { cell: 8, row: 9, gap: 7, left: 34, top: 14 };
  let tlGeo = null, tlAvail = 0;      // the width it may take: read once (a layout read per key costs ms)
  window.addEventListener("resize", () => { tlAvail = 0; });
  function renderTimeline(p) {
    const tl = prog.timeline, card = $(".qg-tl");
    if (!tl || !tl.positions) { card.style.display = "none"; return; }
    if (card.style.display) { card.style.display = ""; tlAvail = 0; }
    const cv = $(".qg-tlcv"), per = tl.warps * tl.lanes, n = tl.positions;
    if (!tlAvail) tlAvail = $(".qg-tlwrap").clientWidth || 900;
    const avail = Math.max(200, tlAvail - TL.left - 4);
    const cell = Math.max(3, Math.min(14, Math.floor(avail / Math.max(1, n))));
    const width = Math.min(n, Math.floor(avail / cell));
    let start = Math.min(Math.max(0, p - (width >> 1)), Math.max(0, n - width));
    const rows = tl.warps * (tl.lanes * TL.row + TL.gap);
    cv.width = TL.left + width * cell + 2; cv.height = TL.top + rows + 2;
    const ctx = cv.getContext("2d");
    ctx.clearRect(0, 0, cv.width, cv.height);
    ctx.font = "9px sans-serif"; ctx.textBaseline = "middle";
    for (let w = 0; w < tl.warps; w++) {
      const y0 = TL.top + w * (tl.lanes * TL.row + TL.gap);
      ctx.fillStyle = "#495057"; ctx.fillText(`w${w}`, 2, y0 + 4);
      for (let l = 0; l < tl.lanes; l++) {
        const y = y0 + l * TL.row;
        ctx.fillStyle = "#adb5bd"; ctx.fillText(`l${l}`, 18, y + TL.row / 2);
        for (let i = 0; i < width; i++) {
          const t = start + i, c = tl.codes.charCodeAt(t * per + w * tl.lanes + l) - 48;
          ctx.fillStyle = TL_COLOURS[tl.states[c]] || "#fff";
          ctx.fillRect(TL.left + i * cell, y, Math.max(1, cell - (cell > 4 ? 1 : 0)), TL.row - 1);
        }
      }
    }
    // events above the rows, block starts as lines, the current position outlined
    const mark = { diverged: "#ff922b", reconverged: "#2f9e44", barrier: "#845ef7", release: "#845ef7" };
    for (const [t, kind, w] of tl.events) {
      if (t < start || t >= start + width) continue;
      const x = TL.left + (t - start) * cell + cell / 2, y = TL.top + w * (tl.lanes * TL.row + TL.gap);
      ctx.fillStyle = mark[kind] || "#868e96";
      ctx.beginPath();
      if (kind === "reconverged" || kind === "release") { ctx.moveTo(x - 3, y - 1); ctx.lineTo(x + 3, y - 1); ctx.lineTo(x, y - 6); }
      else { ctx.moveTo(x - 3, y - 6); ctx.lineTo(x + 3, y - 6); ctx.lineTo(x, y - 1); }
      ctx.fill();
    }
    for (let i = 1; i < width; i++) {
      const t = start + i;
      if (tl.blocks[t] !== tl.blocks[t - 1]) {
        ctx.fillStyle = "#212529"; ctx.fillRect(TL.left + i * cell - 1, 0, 2, cv.height);
        ctx.fillText(`block ${tl.blocks[t]}`, TL.left + i * cell + 2, 5);
      }
    }
    if (p >= start && p < start + width) {
      ctx.strokeStyle = "#1d2230"; ctx.lineWidth = 1.5;
      ctx.strokeRect(TL.left + (p - start) * cell - 0.5, TL.top - 2, cell, rows - TL.gap + 3);
    }
    tlGeo = { start, width, cell, per };
    const units = tl.unit === "pass" ? "passes" : "steps";
    $(".qg-tlsub").textContent = `block ${tl.blocks[Math.min(p, n - 1)]} · ${units} ${start}..${start + width - 1} of ${n}${n < positions() ? ` (the first ${n} of ${positions()})` : ""} · the current ${tl.unit} outlined; click to go there`;
    const near = tl.events.filter(([t]) => t <= p).slice(-3).map(([t, , , text]) => `${tl.unit} ${t}: ${esc(text)}`);
    $(".qg-tlinfo").innerHTML = near.length ? "last events · " + near.join(" · ") : "no divergence or barrier yet";
    root.dataset.tlCodes = p < n ? tl.codes.substr(p * per, per) : "";
    if (!$(".qg-tllegend").innerHTML) $(".qg-tllegend").innerHTML = tl.states.filter((k) => k !== "absent").map((k) =>
      `<span><i style="background:${TL_COLOURS[k]}"></i>${esc(TL_WORDS[k])}</span>`).join("") +
      `<span>▼ diverges · ▲ reconverges · <b style="color:#845ef7">▼▲</b> barrier wait / release</span>`;
  }
  function tlAt(ev) {
    const tl = prog.timeline, cv = $(".qg-tlcv");
    if (!tl || !tlGeo) return null;
    const r = cv.getBoundingClientRect();
    const x = (ev.clientX - r.left) * (cv.width / r.width), y = (ev.clientY - r.top) * (cv.height / r.height);
    const i = Math.floor((x - TL.left) / tlGeo.cell);
    if (i < 0 || i >= tlGeo.width) return null;
    const band = tl.lanes * TL.row + TL.gap, w = Math.floor((y - TL.top) / band), l = Math.floor(((y - TL.top) % band) / TL.row);
    return { t: tlGeo.start + i, w: w >= 0 && w < tl.warps && l < tl.lanes ? w : null, l };
  }
  $(".qg-tlcv").addEventListener("mousemove", (ev) => {
    const tl = prog.timeline, at = tlAt(ev);
    if (!at || at.w === null) { $(".qg-tlcv").title = ""; return; }
    const c = tl.codes.charCodeAt(at.t * tlGeo.per + at.w * tl.lanes + at.l) - 48;
    $(".qg-tlcv").title = `${tl.unit} ${at.t} · block ${tl.blocks[at.t]} · warp ${at.w} lane ${at.l}: ${TL_WORDS[tl.states[c]]}`;
  });
  $(".qg-tlcv").addEventListener("click", (ev) => { const at = tlAt(ev); if (at) setPosition(at.t); });

  // ---------------- controls ----------------
  // the position steps start from: the one asked for while a request is in flight, else the one
  // shown (not the model's copy: a recording's view, following its last pass, may move that one
  // from Python while the user's own request is on its way)
  function here() {
    const st = model.get("state");
    if (pending && lastSent >= 0) return lastSent;
    return st && st.pos !== undefined ? st.pos : (model.get("position") | 0);
  }
  function stepBy(d) { setPosition(here() + d); }
  function play(on) {
    playing = on;
    $(".qg-play").classList.toggle("on", on);
    $(".qg-play").innerHTML = on ? ICON.pause : ICON.play;
    if (timer) { clearInterval(timer); timer = null; }
    if (!on) return;
    const speed = +$(".qg-speed").value || 10;
    timer = setInterval(() => {
      if (pending) return;
      const p = here();
      if (p >= positions() - 1) { play(false); return; }
      const nxt = p + 1;
      setPosition(nxt);
      const bp = bps(), lbp = lbps();
      if (lbp.size && hitsAt(nxt).some((n) => lbp.has(n))) { play(false); return; }
      if (M()) { if (nxt < positions() - 1 && bp.has(prog.exec_pc[nxt])) play(false); return; }
      const fn = prog.functions[(prog.step_fn || [])[nxt]];
      if (nxt < positions() - 1 && bp.has(prog.step_pc[nxt]) && fn === prog.kernel) play(false);
    }, 1000 / speed);
  }
  function runToPc(pc) {
    const p0 = model.get("position") | 0;
    const at = M() ? prog.exec_pc : prog.step_pc;
    for (let t = p0 + 1; t < positions() - (M() ? 0 : 1); t++) if (at[t] === pc) { setPosition(t); return; }
    root.classList.add("qg-nohit"); setTimeout(() => root.classList.remove("qg-nohit"), 300);
  }
  root.querySelector(".qg-ctl").addEventListener("click", (ev) => {
    const b = ev.target.closest("[data-act]");
    if (b) {
      const a = b.dataset.act;
      if (a === "first") setPosition(0);
      else if (a === "last") setPosition(positions() - 1);
      else if (a === "back") stepBy(-1);
      else if (a === "step") stepBy(1);
      else if (a === "play") play(!playing);
      else if (a === "topc") runToPc(+$(".qg-pcin").value);
      return;
    }
    const f = ev.target.closest("[data-f]");
    if (f) { model.set("fmt", f.dataset.f); model.save_changes(); renderAll(); }
  });
  slider.addEventListener("input", () => setPosition(+slider.value));
  $(".qg-tok").addEventListener("change", (ev) => setPosition(+ev.target.value));
  $(".qg-pcin").addEventListener("keydown", (ev) => { if (ev.key === "Enter") runToPc(+ev.target.value); ev.stopPropagation(); });
  $(".qg-tok").addEventListener("keydown", (ev) => ev.stopPropagation());
  root.addEventListener("keydown", (ev) => {
    const k = ev.key;
    let handled = true;
    if (k === "ArrowRight" || k === "j") stepBy(1);
    else if (k === "ArrowLeft" || k === "k") stepBy(-1);
    else if (k === " ") play(!playing);
    else if (k === "Home") setPosition(0);
    else if (k === "End") setPosition(positions() - 1);
    else if (k === "b") { const pc = (prog.step_pc || [])[model.get("position") | 0]; if (pc !== undefined) toggleBreakpoint(pc); }
    else handled = false;
    if (handled) { ev.preventDefault(); ev.stopPropagation(); }
  });
  root.addEventListener("mousedown", (ev) => { if (!ev.target.closest("input, select")) root.focus({ preventScroll: true }); });

  function onProgram() { renderAll(); }        // renderAll takes the new program (and follows a recording)
  function onState() {
    pending = false;
    const t0 = performance.now();
    renderAll();
    root.dataset.render = (performance.now() - t0).toFixed(1);
    // key/click -> redrawn, measured in the page (the browser test reads it)
    if (tReq) { root.dataset.latency = (performance.now() - tReq).toFixed(1); tReq = 0; }
  }
  function onProgress() {
    const p = model.get("progress");
    const bar = $(".qg-progress");
    bar.style.display = p > 0 && p < 1 ? "" : "none";
    bar.firstElementChild.style.width = `${Math.round(p * 100)}%`;
  }
  model.on("change:program", onProgram);
  model.on("change:state", onState);
  model.on("change:fmt", renderAll);
  model.on("change:progress", onProgress);
  model.on("change:recording", renderRecording);
  model.on("change:breakpoints", () => { romFn = null; highlightRom(model.get("position") | 0); });
  model.on("change:line_breakpoints", () => { srcProg = null; highlightSource(model.get("position") | 0); });
  model.on("change:attn_meta", () => { if (M()) renderAll(); });
  model.on("change:latt_meta", () => {     // a layer picked: only the attention card redraws
    queueMicrotask(() => {                   // (after the message's other changes: a new state redrew it all)
      if (!M() || model.get("latt_meta") === lattDrawn) return;
      renderLayerAttention();
      if (tReq) { root.dataset.latency = (performance.now() - tReq).toFixed(1); tReq = 0; }
    });
  });
  onProgress();
  renderAll();
  return () => { if (timer) clearInterval(timer); };
}

export default { render };
