// Attention of every GPU layer (model engines). Overview: rows = layers, columns = tokens, each
// layer's largest weight (over heads) on each token for the current token's output; the picked
// layer per head now, and as a heatmap over recent tokens. A click on a layer picks it. A long
// launch's overview is squeezed; the window of its last ZOOM tokens (the current one last) is drawn
// beside it at a readable size with the tokens' texts. Every cell is hoverable (value, layer or head,
// tokens).
const ZOOM = 32;
function attentionView(lab) {
  const { root, $, model, M } = lab;
  const tip = $(".qg-tip");
  let geo = {};           // the drawn grids' geometry, for hover and clicks: {ov, zoom, row, heads: [...]}, and what they show
  let bigHead = null;     // the head whose heatmap is enlarged, with token labels on its axes (a click on it)
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
    const big = lab.present(), zoom = n > ZOOM * 1.5 ? ZOOM : 0;
    const py = big ? 9 : 10, px = Math.max(1, Math.min(8, Math.floor((zoom ? (big ? 300 : 360) : 560) / Math.max(1, n))));
    const tok = (c) => (lab.prog.tokens || [])[c] ?? c;
    const names = $(".qg-ovnames");
    if (names.childElementCount !== nL || names.dataset.py !== String(py)) {
      names.dataset.py = py;
      let h = "";
      for (let L = 0; L < nL; L++) h += `<div class="qg-ovname${isBase(L) ? " qg-base" : ""}" data-layer="${L}" style="height:${py}px" title="${esc(lab.prog.layers && lab.prog.layers[L] ? lab.prog.layers[L].role : "")}">L${L} ${meta.kinds[L] === "gdn" ? "Δ" : "A"}${isBase(L) ? " base" : ""}</div>`;
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
      ctx.fillText(idle(L) === false ? "base: active (text)" : act ? "base: idle (adds exactly 0)" : "base: not run", 3, L * py + py - 2);
    }
    ctx.strokeStyle = "#f59f00"; ctx.lineWidth = 1.5; ctx.strokeRect(0.75, meta.layer * py + 0.75, cv.width - 1.5, py - 1.5);
    if (zoom) { ctx.strokeStyle = "#5f3dc4"; ctx.lineWidth = 1; ctx.strokeRect((n - zoom) * px + 0.5, 0.5, zoom * px - 1, nL * py - 1); }
    geo.ov = { left: 0, top: 0, px, py, rows: nL, cols: n };
    const layerName = (L) => `L${L} ${meta.kinds[L] === "gdn" ? "Δ" : "A"}`;
    geo.describe = (L, c) => `${layerName(L)}${isBase(L) ? " base" : ""} · token ${meta.c0 + c} ${tok(meta.c0 + c)}: ${(b[L * n + c] / 255).toFixed(3)} (the largest over its heads)`;
    const zcv = $(".qg-ovzoom");
    zcv.style.display = zoom ? "" : "none";
    if (zoom) {                                  // the last ZOOM tokens at a readable size, labelled
      const z0 = n - zoom, zpx = big ? 12 : 11;
      geo.zoom = labelledGrid(zcv, nL, zoom, (L, c) => b[L * n + z0 + c] / 255, (L) => meta.kinds[L] === "gdn" ? gdnRamp : attnRamp,
        zpx, py, { colLabel: (c) => tok(meta.c0 + z0 + c), bottom: 54, font: big ? 11 : 9 });
      geo.z0 = z0;
      const zc = zcv.getContext("2d");
      for (let L = 0; L < nL; L++) if (isBase(L)) {            // as in the overview: a base layer greyed
        zc.fillStyle = idle(L) === false ? "#ffe8cc" : "#e9ecef"; zc.fillRect(0, L * py, zoom * zpx, py);
      }
      zc.strokeStyle = "#f59f00"; zc.lineWidth = 1.5; zc.strokeRect(0.75, meta.layer * py + 0.75, zoom * zpx - 1.5, py - 1.5);
    }
    $(".qg-ovcap").textContent = `rows: layers 0..${nL - 1}; columns: tokens ${meta.c0}..${meta.c0 + n - 1} (the current one last)` +
      (zoom ? `; right: the last ${zoom} (tokens ${meta.c0 + n - zoom}..${meta.c0 + n - 1}) zoomed` : "") + "; darker = drawn on more; hover a cell for its value";
    // the selected layer
    const cm = ramp(meta.kinds[meta.layer]);
    const sel = root.querySelector(".qg-lsel");
    const shape = `${meta.layer}/${H}`;
    if (sel.dataset.shape !== shape) {          // the layer's skeleton: rebuilt only when another layer is picked
      let h = `<div class="qg-lseltitle"><b>L${meta.layer}</b> ${meta.kind === "linear_attention" ? "Gated DeltaNet" : "softmax attention"} · ${esc((lab.prog.layers && lab.prog.layers[meta.layer] || {}).role || "")}</div>
        <div class="qg-lbl qg-lnote"></div><div class="qg-lbl qg-lrowcap"></div><canvas class="qg-lrowcv"></canvas><table class="qg-tbl qg-ltop">`;
      for (let hd = 0; hd < H; hd++) h += `<tr data-head="${hd}"><td>${meta.head_unit} ${hd}</td><td></td><td></td></tr>`;
      h += `</table><div class="qg-lbl qg-lwincap"></div><div class="qg-heads">`;
      for (let hd = 0; hd < H; hd++) h += `<div class="qg-hm qg-lhm" data-head="${hd}"><canvas></canvas><span>${meta.head_unit} ${hd}</span></div>`;
      sel.innerHTML = h + `</div>`;
      sel.dataset.shape = shape;
      bigHead = null;
    }
    sel.querySelector(".qg-lnote").textContent = meta.note + (meta.error ? ` · one-hot reduction error ≤ ${meta.error.toExponential(1)}` : "");
    sel.querySelector(".qg-lrowcap").textContent = `now, per ${meta.head_unit} (rows), over tokens ${meta.c0}..${meta.c0 + n - 1}:`;
    sel.querySelector(".qg-lwincap").textContent = `over recent tokens: rows = tokens ${meta.r0}..${meta.t} (output), columns = tokens ${meta.w0}..${meta.t} (written); hover a cell, click a head to enlarge it with its tokens`;
    const trs = sel.querySelectorAll(".qg-ltop tr");
    meta.top.forEach(([s0, w, tok], hd) => {
      const td = trs[hd].children;
      td[1].innerHTML = w > 0 ? `token ${s0} <span class="qg-mono">${esc(tok)}</span>` : "—";
      td[2].textContent = w > 0 ? w.toFixed(3) : "";
    });
    const rpx = Math.max(1, Math.min(8, Math.floor(400 / Math.max(1, n))));
    paintGrid(sel.querySelector(".qg-lrowcv"), H, n, (hd, c) => b[o1 + hd * n + c] / 255, () => cm, rpx, 8);
    geo.row = { left: 0, top: 0, px: rpx, py: 8, rows: H, cols: n };
    geo.rowDescribe = (hd, c) => `${meta.head_unit} ${hd} · token ${meta.c0 + c} ${tok(meta.c0 + c)}: ${(b[o1 + hd * n + c] / 255).toFixed(3)}`;
    // per head over recent tokens: labelled axes (output tokens left, written tokens below) when
    // the cells are large enough to read them; a click enlarges a head to that size
    const small = Math.max(2, Math.floor((big ? 132 : 96) / Math.max(1, C)));
    geo.heads = [];
    sel.querySelectorAll(".qg-lhm").forEach((box) => {
      const hd = +box.dataset.head, base = o2 + hd * R * C, enlarged = hd === bigHead;
      const hpx = enlarged ? Math.max(7, Math.floor((sel.clientWidth - 86) / Math.max(1, C))) : small;   // the card's width
      box.classList.toggle("qg-bighead", enlarged);
      geo.heads[hd] = labelledGrid(box.querySelector("canvas"), R, C, (r, c) => b[base + r * C + c] / 255, () => cm, hpx, hpx,
        hpx >= 7 ? { rowLabel: (r) => tok(meta.r0 + r), colLabel: (c) => tok(meta.w0 + c), left: 80, bottom: 66, font: big ? 11 : 9 } : {});
    });
    geo.headDescribe = (hd, r, c) => `${meta.head_unit} ${hd}: output token ${meta.r0 + r} ${tok(meta.r0 + r)} ← written token ${meta.w0 + c} ${tok(meta.w0 + c)}: ${(b[o2 + hd * R * C + r * C + c] / 255).toFixed(3)}`;
  }
  hoverCells($(".qg-ovcv"), tip, () => geo.ov, ({ r, c }) => geo.describe && geo.describe(r, c));
  hoverCells($(".qg-ovzoom"), tip, () => geo.zoom, ({ r, c }) => geo.describe && geo.describe(r, geo.z0 + c));
  // the picked layer's canvases are rebuilt with its skeleton: one listener on their box
  $(".qg-lsel").addEventListener("mousemove", (ev) => {
    const cv = ev.target.closest("canvas");
    if (!cv) return;
    let text = null;
    if (cv.classList.contains("qg-lrowcv")) { const at = geo.row && cellAt(cv, geo.row, ev); text = at && geo.rowDescribe(at.r, at.c); }
    else {
      const box = cv.closest(".qg-lhm"), hd = box ? +box.dataset.head : -1, g = geo.heads && geo.heads[hd];
      const at = g && cellAt(cv, g, ev);
      text = at && geo.headDescribe(hd, at.r, at.c);
    }
    showTip(tip, ev, text, cv);
  });
  $(".qg-lsel").addEventListener("mouseleave", () => { tip.style.display = "none"; });
  $(".qg-lsel").addEventListener("click", (ev) => {
    const box = ev.target.closest(".qg-lhm");
    if (!box) return;
    bigHead = +box.dataset.head === bigHead ? null : +box.dataset.head;
    renderLayerAttention();
  });
  function pickLayer(L) {
    if (L === model.get("layer")) return;
    lab.markRequest();
    model.set("layer", L); model.save_changes();
  }
  $(".qg-ovnames").addEventListener("click", (ev) => { const d = ev.target.closest("[data-layer]"); if (d) pickLayer(+d.dataset.layer); });
  for (const [sel, g] of [[".qg-ovcv", "ov"], [".qg-ovzoom", "zoom"]]) $(sel).addEventListener("click", (ev) => {
    const at = geo[g] && cellAt(ev.currentTarget, geo[g], ev);
    if (at) pickLayer(at.r);
  });
  model.on("change:latt_meta", () => {     // a layer picked: only the attention card redraws
    queueMicrotask(() => {                   // (after the message's other changes: a new state redrew it all)
      if (!M() || model.get("latt_meta") === lattDrawn) return;
      renderLayerAttention();
      lab.requestDone();
    });
  });
  return {
    update() {
      if (!M()) { $(".qg-latt").style.display = "none"; return; }
      const t1 = performance.now();
      renderLayerAttention();
      root.dataset.renderAttention = (performance.now() - t1).toFixed(1);
    },
  };
}
VIEWS.push({
  name: "attention", slot: "below", order: 20, make: attentionView,
  card: `<div class="qg-card qg-latt" data-view="attention" style="display:none"><h4>Attention · every GPU layer <span class="qg-sub qg-lattsub"></span></h4>
      <div class="qg-lattgrid"><div class="qg-ov"><div class="qg-ovnames"></div><div><div class="qg-ovpair"><canvas class="qg-ovcv"></canvas><canvas class="qg-ovzoom" style="display:none"></canvas></div><div class="qg-lbl qg-ovcap"></div></div></div>
      <div class="qg-lsel"></div></div></div>`,
});
