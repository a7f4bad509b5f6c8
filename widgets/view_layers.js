// GPU layers: on a model engine, per memory the slots its key heads select over the recent tokens
// (writes red, reads blue), the raw GDN state of one memory (a picker) beside its decoded words, any
// softmax attention, and the cross-check table; on the interpreter, a note that no model ran (or the
// interpreter-side model record: heads and DeltaNet states, a head enlarged with token labels).
function layersView(lab) {
  const { $, model, fmt, exported, pickerNote } = lab;
  let bigSel = null;      // {layer, head}
  let locked = null;      // {r, c}
  function renderLayers(st) {
    const body = $(".qg-layerbody");
    const mp = st.model;
    if (!lab.prog.has_model || !mp) {
      $(".qg-layersub").textContent = "engine: " + (lab.prog.engine || "interp");
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
    for (const m of lab.prog.memories || []) metas[m.name] = m;
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
      for (const m of lab.prog.memories || []) opts += `<option value="${esc(m.name)}"${m.name === g.memory ? " selected" : ""}>${esc(m.where)} ${esc(m.name)}</option>`;
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
    const c = lab.prog.consistency || {};
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
        const label = new Map(g.slots.map((s) => [s.slot, s.label]));
        hoverCells(cv, $(".qg-tip"), () => ({ left: 0, top: 0, px, py, rows: show, cols: g.cols }), ({ r, c }) =>
          `slot ${r}${label.has(r) ? ` (${label.get(r)})` : ""} · column ${c} (value head ${Math.floor(c / (g.cols / g.fields))}): ≈ ${(q[r * g.cols + c] / 127 * g.scale).toFixed(2)}`);
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
  return { update(st) { if (lab.M()) renderMachineLayers(st); else renderLayers(st); } };
}
VIEWS.push({
  name: "layers", slot: "below", order: 30, make: layersView,
  card: `<div class="qg-card qg-layers" data-view="layers"><h4>GPU layers <span class="qg-sub qg-layersub"></span></h4><div class="qg-layerbody"></div></div>`,
});
