// The header: the kernel, the engine, the consistency badge (model = simulator = interpreter, or
// the first mismatch), where the launch is; a background recording's progress and cancel button;
// the fault (or first mismatch) box under the panels.
function headView(lab) {
  const { root, $, model, positions } = lab;
  function machineBadge(st) {
    const c = lab.prog.consistency || {};
    const fm = st.first_mismatch;
    if (fm) return ["bad", `✗ mismatch at pass ${fm.position}`, fm.text];
    const sim = c.simulator || {}, it = c.interpreter || {};
    const rec = (model.get("recording") || {}).status;
    if (c.partial && c.exact === null && rec === "cancelled") return ["ref", `cancelled: model = simulator over the ${sim.positions} passes recorded (${it.registers || 0} registers)`, "the launch did not end, so its final memory and buffers were not compared"];
    if (c.partial && c.exact === null) return ["ref", `recording: model = simulator so far (${sim.positions} passes, ${it.registers || 0} registers)`, "the final memory and buffers are compared when the launch ends"];
    if (c.exact) return ["ok", `✓ model = simulator (${sim.positions} passes) = interpreter (${it.registers || 0} registers, memory)`, ""];
    if (lab.prog.first_mismatch) return ["ref", `= simulator so far (a mismatch at pass ${lab.prog.first_mismatch.position})`, lab.prog.first_mismatch.text];
    return ["ref", "not fully compared", ""];
  }
  function renderBadge(st) {
    const [cls, text, title] = machineBadge(st);
    const cons = $(".qg-cons");
    cons.className = `qg-badge qg-cons ${cls}`; cons.textContent = text; cons.title = title;
  }
  function renderMachineHead(st) {
    $(".qg-kern").textContent = lab.prog.kernel_name || lab.prog.kernel || "";
    $(".qg-kern").title = lab.prog.kernel || "";
    $(".qg-badge.engine").textContent = ENGINES[lab.prog.engine] || lab.prog.engine;
    renderBadge(st);
    $(".qg-faultb").style.display = lab.prog.fault ? "" : "none";
    const w = st.what;
    $(".qg-where").innerHTML = `pass <b>${st.pos}</b> · ${w ? `<b>${esc(w.text)}</b>` : `<b class="qg-mono">${esc(st.input)}</b> → <b class="qg-mono">${esc(st.token)}</b>`} · block <b>${st.block}</b> · warp <b>${st.warp}</b>`;
    $(".qg-fn").textContent = "bundles (ROM slots) and their PTX";
    root.querySelector(".qg-col-mem h4 .qg-sub").textContent = "decoded from GDN memory mem";
    const fb = $(".qg-faultbox");
    if (st.fault) { fb.style.display = ""; fb.className = "qg-fault qg-faultbox"; fb.textContent = "fault: " + st.fault; }
    else if (st.first_mismatch) { fb.style.display = ""; fb.className = "qg-fault qg-faultbox"; fb.textContent = "first mismatch: " + st.first_mismatch.text; }
    else fb.style.display = "none";
  }

  function renderHead(st) {
    $(".qg-kern").textContent = lab.prog.kernel_name || lab.prog.kernel || "";
    $(".qg-kern").title = lab.prog.kernel || "";
    const eng = $(".qg-badge.engine");
    eng.textContent = lab.prog.engine === "model" ? "model engine" : "reference interpreter";
    const cons = $(".qg-cons");
    const mp = st.model;
    if (!lab.prog.has_model || !mp) { cons.className = "qg-badge qg-cons ref"; cons.textContent = "no model: interpreter state"; cons.title = ""; }
    else if (mp.first_mismatch) { cons.className = "qg-badge qg-cons bad"; cons.textContent = `✗ mismatch at token ${mp.first_mismatch.token}`; cons.title = mp.first_mismatch.text; }
    else if (mp.checked) { cons.className = "qg-badge qg-cons ok"; cons.textContent = `✓ model = interpreter (${mp.checked} steps)`; cons.title = ""; }
    else { cons.className = "qg-badge qg-cons ref"; cons.textContent = "nothing decoded yet"; cons.title = ""; }
    $(".qg-faultb").style.display = lab.prog.fault ? "" : "none";
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
    root.classList.toggle("qg-recording", lab.prog.mode === "recording");   // nothing recorded yet: the bar only
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
    const shown = lab.prog.mode === "machine" ? ` · showing passes 0..${positions() - 1}: scrub them while it records` : "";
    const st = model.get("state");
    if (lab.prog.mode === "machine" && st && st.pos !== undefined) renderBadge(st);   // the badge follows the recording's status
    $(".qg-rectext").textContent = r.status === "cancelling" ? `cancelling… the recording stops at its next pass (${n} so far)`
      : r.status === "cancelled" ? `recording cancelled${lab.prog.mode === "machine" ? ` · the ${positions()} passes recorded are shown` : ` (${r.error || ""})`}`
      : r.status === "failed" ? `recording failed: ${r.error || ""}`
      : `recording the launch on the ${eng}… ${n}${of ? ` of ${of}` : ""} pass${(of || n) === 1 ? "" : "es"}${of ? " (the simulator's count)" : " so far"}${r.token ? ` · last token ${r.token}` : ""}${shown}`
        + (n === 0 && r.engine === "compact" ? " · starting the engine: the first launch in a kernel loads it, a few seconds (numba compiles it once after an install, ~80 s, unless qwengpu lab's warm-up did)" : "");
  }
  $(".qg-cancel").addEventListener("click", () => { cancelAsked = true; renderRecording(); model.send({ cancel: true }); });
  function onProgress() {
    const p = model.get("progress");
    const bar = $(".qg-progress");
    bar.style.display = p > 0 && p < 1 ? "" : "none";
    bar.firstElementChild.style.width = `${Math.round(p * 100)}%`;
  }
  model.on("change:progress", onProgress);
  model.on("change:recording", renderRecording);
  onProgress();
  return {
    renderRecording,
    update(st) { if (lab.M()) renderMachineHead(st); else renderHead(st); },
  };
}
VIEWS.push({
  name: "head", slot: "top", order: 10, make: headView,
  card: `<div class="qg-progress" style="display:none"><div style="width:0%"></div></div>
    <div class="qg-rec" style="display:none"><span class="qg-spin"></span><div class="qg-recbar"><div></div></div><span class="qg-rectext"></span><button class="qg-btn qg-cancel" title="stop the recording">cancel</button></div>
    <div class="qg-head" data-view="head">
      <div class="qg-title">qwenGPU · <span class="qg-kern"></span></div>
      <span class="qg-badge engine"></span><span class="qg-badge qg-cons"></span><span class="qg-badge fault qg-faultb" style="display:none">fault</span>
      <div class="qg-where"></div>
    </div>`,
});
