// The scrubber: first, back, play/pause, step, last, the slider, jump to a position, run to a pc,
// the number format, the play speed; the keys (← → or k j, space, Home, End, b). A move is drawn at
// once where the page can (the slider, the ROM row) and asked of Python (`position`).
function scrubberView(lab) {
  const { root, $, model, M, bps, lbps, hitsAt, positions } = lab;
  const slider = $(".qg-slider"), posEl = $(".qg-pos");
  let playing = false, timer = null;
  function setPosition(p) {
    p = Math.max(0, Math.min(positions() - 1, p | 0));
    if (p === model.get("position") && p === lab.lastSent) return;
    lab.lastSent = p;
    lab.markRequest();
    slider.value = p;
    posEl.innerHTML = `<b>${p}</b> / ${positions() - 1}`;
    lab.views.rom.highlight(p);
    lab.pending = true;
    model.set("position", p);
    model.save_changes();
  }

  // the position steps start from: the one asked for while a request is in flight, else the one
  // shown (not the model's copy: a recording's view, following its last pass, may move that one
  // from Python while the user's own request is on its way)
  function here() {
    const st = model.get("state");
    if (lab.pending && lab.lastSent >= 0) return lab.lastSent;
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
      if (lab.pending) return;
      const p = here();
      if (p >= positions() - 1) { play(false); return; }
      const nxt = p + 1;
      setPosition(nxt);
      const bp = bps(), lbp = lbps();
      if (lbp.size && hitsAt(nxt).some((n) => lbp.has(n))) { play(false); return; }
      if (M()) { if (nxt < positions() - 1 && bp.has(lab.prog.exec_pc[nxt])) play(false); return; }
      const fn = lab.prog.functions[(lab.prog.step_fn || [])[nxt]];
      if (nxt < positions() - 1 && bp.has(lab.prog.step_pc[nxt]) && fn === lab.prog.kernel) play(false);
    }, 1000 / speed);
  }
  function runToPc(pc) {
    const p0 = model.get("position") | 0;
    const at = M() ? lab.prog.exec_pc : lab.prog.step_pc;
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
    if (f) { model.set("fmt", f.dataset.f); model.save_changes(); lab.renderAll(); }
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
    else if (k === "b") { const pc = (lab.prog.step_pc || [])[model.get("position") | 0]; if (pc !== undefined) lab.views.rom.toggleBreakpoint(pc); }
    else handled = false;
    if (handled) { ev.preventDefault(); ev.stopPropagation(); }
  });
  root.addEventListener("mousedown", (ev) => { if (!ev.target.closest("input, select")) root.focus({ preventScroll: true }); });
  return {
    setPosition,
    update(st) {
      slider.max = positions() - 1;
      slider.value = st.pos;
      posEl.innerHTML = `<b>${st.pos}</b> / ${positions() - 1}`;
      $(".qg-tok").value = st.pos;
      // the interpreter's unit is a step (one warp-instruction); the model's a pass (one token)
      const unit = M() ? "pass" : "step";
      if ($(".qg-toklbl").textContent !== unit) { $(".qg-toklbl").textContent = unit; $(".qg-tok").title = `jump to a ${unit} (position)`; }
      root.querySelectorAll(".qg-fmt button").forEach((b) => b.classList.toggle("on", b.dataset.f === lab.fmt()));
    },
    stop() { if (timer) clearInterval(timer); },
  };
}
VIEWS.push({
  name: "scrubber", slot: "top", order: 30, make: scrubberView,
  card: `<div class="qg-ctl" data-view="scrubber">
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
      <button class="qg-btn qg-presentbtn" title="presentation mode">present</button>
    </div>`,
});
