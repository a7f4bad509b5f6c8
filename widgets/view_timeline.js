// Warps & lanes over time: rows = every warp's lanes (the running block's), columns = the positions
// around the current one (the whole launch when it fits), ▼ where a warp diverges, ▲ where it
// reconverges (purple: barrier wait and release); hover names a lane's state, a click goes there.
function timelineView(lab) {
  const { root, $, positions } = lab;
  const TL_COLOURS = { absent: "#ffffff", running: "#2f9e44", guarded: "#b2f2bb", ready: "#a5d8ff", diverged: "#ff922b",
    barrier: "#845ef7", exited: "#dee2e6" };
  const TL_WORDS = { absent: "no thread", running: "runs", guarded: "on the path, guard false", ready: "ready (waits for its warp's turn)",
    diverged: "diverged (masked off)", barrier: "waits at a barrier", exited: "exited" };
  const TL = { cell: 8, row: 9, gap: 7, left: 34, top: 14 };
  const EXCHANGE = { shuffle: "#0b7285", atomic: "#c2255c" };
  let tlGeo = null, tlAvail = 0;      // the width it may take: read once (a layout read per key costs ms)
  window.addEventListener("resize", () => { tlAvail = 0; });
  function renderTimeline(p) {
    const tl = lab.prog.timeline, card = $(".qg-tl");
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
      if (t < start || t >= start + width || EXCHANGE[kind]) continue;
      const x = TL.left + (t - start) * cell + cell / 2, y = TL.top + w * (tl.lanes * TL.row + TL.gap);
      ctx.fillStyle = mark[kind] || "#868e96";
      ctx.beginPath();
      if (kind === "reconverged" || kind === "release") { ctx.moveTo(x - 3, y - 1); ctx.lineTo(x + 3, y - 1); ctx.lineTo(x, y - 6); }
      else { ctx.moveTo(x - 3, y - 6); ctx.lineTo(x + 3, y - 6); ctx.lineTo(x, y - 1); }
      ctx.fill();
    }
    drawExchanges(ctx, tl, start, width, cell);
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
      `<span>▼ diverges · ▲ reconverges · <b style="color:#845ef7">▼▲</b> barrier wait / release</span>` +
      (tl.exchanges && tl.exchanges.length ? `<span><b style="color:${EXCHANGE.shuffle}">◆</b> shuffle: a line from the lane read to the lane reading · <b style="color:${EXCHANGE.atomic}">◆</b> atomic: its lanes served 1, 2, … in turn</span>` : "");
  }
  // the interpreter's lanes that meet: a shuffle as a line from each source lane's row to the row of
  // the lane reading it (a dot at the reader), an atomic as the order its lanes were served (1, 2, ...)
  function drawExchanges(ctx, tl, start, width, cell) {
    const band = tl.lanes * TL.row + TL.gap;
    for (const [t, kind, w, lanes] of tl.exchanges || []) {
      if (t < start || t >= start + width) continue;
      const x0 = TL.left + (t - start) * cell, y0 = TL.top + w * band, mid = (l) => y0 + l * TL.row + (TL.row - 1) / 2;
      ctx.fillStyle = EXCHANGE[kind];
      ctx.beginPath(); ctx.moveTo(x0 + cell / 2, y0 - 7); ctx.lineTo(x0 + cell / 2 + 3, y0 - 4); ctx.lineTo(x0 + cell / 2, y0 - 1);
      ctx.lineTo(x0 + cell / 2 - 3, y0 - 4); ctx.fill();                       // a diamond above the warp
      if (kind === "shuffle") {
        ctx.strokeStyle = EXCHANGE.shuffle; ctx.lineWidth = 1.25;
        for (const [s, d] of lanes) {
          if (s === d) continue;
          ctx.beginPath(); ctx.moveTo(x0 + 0.5, mid(s)); ctx.lineTo(x0 + cell - 1.5, mid(d)); ctx.stroke();
          ctx.beginPath(); ctx.arc(x0 + cell - 1.5, mid(d), 1.6, 0, 2 * Math.PI); ctx.fill();
        }
      } else if (cell >= 7) {
        // the interpreter serves them all in the step; the model one a pass (the lanes served so
        // far come with it: the newest is this pass's)
        const shown = tl.unit === "pass" ? [lanes.length - 1] : lanes.map((_, k) => k);
        ctx.font = `bold ${Math.min(9, cell)}px sans-serif`; ctx.textAlign = "center";
        for (const k of shown) {
          const y = y0 + lanes[k] * TL.row;
          ctx.fillStyle = EXCHANGE.atomic; ctx.fillRect(x0, y, Math.max(1, cell - 1), TL.row - 1);
          ctx.fillStyle = "#fff"; ctx.fillText(String(k + 1), x0 + cell / 2, mid(lanes[k]) + 0.5);
        }
        ctx.textAlign = "left";
      }
    }
  }
  function exchangeAt(t, w) {
    const x = (lab.prog.timeline.exchanges || []).find((e) => e[0] === t && e[2] === w);
    if (!x) return "";
    return x[1] === "shuffle" ? ` · shuffle: ${x[3].map(([s, d]) => `${d} ← ${s}`).join(", ")}`
      : lab.prog.timeline.unit === "pass" ? ` · atomic: serves lane ${x[3][x[3].length - 1]} (${x[3].length} so far, one a pass)`
      : ` · atomic: lanes ${x[3].join(", ")} one after another`;
  }
  function tlAt(ev) {
    const tl = lab.prog.timeline, cv = $(".qg-tlcv");
    if (!tl || !tlGeo) return null;
    const r = cv.getBoundingClientRect();
    const x = (ev.clientX - r.left) * (cv.width / r.width), y = (ev.clientY - r.top) * (cv.height / r.height);
    const i = Math.floor((x - TL.left) / tlGeo.cell);
    if (i < 0 || i >= tlGeo.width) return null;
    const band = tl.lanes * TL.row + TL.gap, w = Math.floor((y - TL.top) / band), l = Math.floor(((y - TL.top) % band) / TL.row);
    return { t: tlGeo.start + i, w: w >= 0 && w < tl.warps && l < tl.lanes ? w : null, l };
  }
  $(".qg-tlcv").addEventListener("mousemove", (ev) => {
    const tl = lab.prog.timeline, at = tlAt(ev);
    if (!at || at.w === null) { $(".qg-tlcv").title = ""; return; }
    const c = tl.codes.charCodeAt(at.t * tlGeo.per + at.w * tl.lanes + at.l) - 48;
    $(".qg-tlcv").title = `${tl.unit} ${at.t} · block ${tl.blocks[at.t]} · warp ${at.w} lane ${at.l}: ${TL_WORDS[tl.states[c]]}${exchangeAt(at.t, at.w)}`;
  });
  $(".qg-tlcv").addEventListener("click", (ev) => { const at = tlAt(ev); if (at) lab.setPosition(at.t); });
  return { update(st) { renderTimeline(st.pos); } };
}
VIEWS.push({
  name: "timeline", slot: "below", order: 10, make: timelineView,
  card: `<div class="qg-card qg-tl" data-view="timeline" style="display:none"><h4>Warps &amp; lanes <span class="qg-sub qg-tlsub"></span></h4>
      <div class="qg-tlwrap"><canvas class="qg-tlcv"></canvas></div>
      <div class="qg-tlinfo qg-lbl"></div><div class="qg-tllegend"></div></div>`,
});
