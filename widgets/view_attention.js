// Attention of every GPU layer (model engines). Overview: rows = layers, columns = tokens, each
// layer's largest weight (over heads) on each token for the current token's output; the picked
// layer per head now, and as a heatmap over recent tokens. A click on a layer picks it.
function attentionView(lab) {
  const { root, $, model, M } = lab;
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
      ctx.fillText(idle(L) === false ? "base: active (text)" : act ? "base: idle (adds exactly 0)" : "base: not run", 3, L * py + 8);
    }
    ctx.strokeStyle = "#f59f00"; ctx.lineWidth = 1.5; ctx.strokeRect(0.75, meta.layer * py + 0.75, cv.width - 1.5, py - 1.5);
    $(".qg-ovcap").textContent = `rows: layers 0..${nL - 1}; columns: tokens ${meta.c0}..${meta.c0 + n - 1} (the current one last); darker = drawn on more`;
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
    lab.markRequest();
    model.set("layer", L); model.save_changes();
  }
  $(".qg-ovnames").addEventListener("click", (ev) => { const d = ev.target.closest("[data-layer]"); if (d) pickLayer(+d.dataset.layer); });
  $(".qg-ovcv").addEventListener("click", (ev) => {
    const cv = ev.currentTarget, r = cv.getBoundingClientRect();
    const L = Math.floor((ev.clientY - r.top) * (cv.height / r.height) / 10);
    if (L >= 0 && L < (model.get("latt_meta") || {}).nlayers) pickLayer(L);
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
      <div class="qg-lattgrid"><div class="qg-ov"><div class="qg-ovnames"></div><div><canvas class="qg-ovcv" title="click a layer"></canvas><div class="qg-lbl qg-ovcap"></div></div></div>
      <div class="qg-lsel"></div></div></div>`,
});
