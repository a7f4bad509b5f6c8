// qwenGPU register inspector: the widget's render (anywidget ESM; the last part of the script that
// `qwengpu_widgets.bundle` joins after `inspector_base.js` and the `view_*.js` panels). It lays the
// panels' cards out, gives them one context (`lab`) and redraws them all when a position arrives.
// The same script draws the static export and the kernel-less fallback, driven by a stand-in model.
// Presentation mode (the `presentation` trait, the header's button; remembered by the browser):
// larger type, the scrubber and header kept in view, the current layer's attention right under
// them, so that the scrubber and the layer fit one 1280x720 screen. Every card folds by its title
// (remembered too).

const SLOTS = ["top", "grid", "below", "end"];
const STORE = "qwengpu.inspector.";     // localStorage keys: the mode and the folded cards, per browser
function stored(key, otherwise) {
  try { const v = localStorage.getItem(STORE + key); return v === null ? otherwise : JSON.parse(v); } catch (e) { return otherwise; }
}
function store(key, value) {
  try { localStorage.setItem(STORE + key, JSON.stringify(value)); } catch (e) { /* a page without storage: not remembered */ }
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "qg-insp";
  root.tabIndex = 0;
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const cards = (slot) => VIEWS.filter((v) => v.slot === slot).sort((a, b) => a.order - b.order).map((v) => v.card).join("\n");
  root.innerHTML = `<div class="qg-top">${cards("top")}</div>
    <div class="qg-grid">${cards("grid")}</div>
    ${cards("below")}
    <div class="qg-faultbox" style="display:none"></div>
    ${cards("end")}
    <div class="qg-foot"><kbd>←</kbd> <kbd>→</kbd> step · <kbd>space</kbd> play · <kbd>Home</kbd>/<kbd>End</kbd> · <kbd>b</kbd> breakpoint at pc · click the ROM gutter to toggle breakpoints · click a card's title to fold it</div>
    <div class="qg-tip" style="display:none"></div>`;
  el.appendChild(root);
  const $ = (s) => root.querySelector(s);
  // a static export (qwengpu_widgets.export) carries the raw state of the memory picked when it was
  // written, at every position: another memory needs the kernel, so the picker is off and says why
  const exported = !!model.get("exported");
  const asLines = (x) => Array.isArray(x) ? x : (x === undefined || x < 0 ? [] : [x]);
  // a colour per CUDA line, shared by the line and its PTX rows (Compiler Explorer's colouring)
  const PALETTE = ["#4dabf7", "#69db7c", "#ffa94d", "#da77f2", "#ff8787", "#3bc9db", "#ffd43b", "#9775fa", "#a9e34b", "#f783ac"];
  let tReq = 0;           // when the page asked for what it waits for (key or click → redrawn)

  // what every view may read or call
  const lab = {
    root, $, model, exported,
    prog: model.get("program") || {},
    views: {},
    pending: false,       // a position asked of Python and not drawn yet
    lastSent: -1,
    pickerNote: (m) => `this export carries the raw state of ${m} only: picking another memory needs the kernel ` +
      "(pick it in the live widget, or set insp.gdn_memory, then export again)",
    M: () => lab.prog.mode === "machine",
    present: () => root.classList.contains("qg-present"),
    fmt: () => model.get("fmt") || "hex",
    bps: () => new Set(model.get("breakpoints") || []),
    lbps: () => new Set(model.get("line_breakpoints") || []),
    positions: () => lab.prog.positions || 1,
    // CUDA lines: per position as a list (the interpreter sends one number, -1 for none)
    linesAt: (p) => asLines((lab.prog.step_lines || [])[p]),
    hitsAt: (p) => asLines((lab.prog.line_hits || [])[p]),
    lineColour: (n) => PALETTE[((n % PALETTE.length) + PALETTE.length) % PALETTE.length],
    clAttr(ptxLine) {
      const s = lab.prog.source, n = s ? s.ptx[String(ptxLine)] : undefined;
      return n === undefined ? "" : ` data-cl="${n}" style="--qg-cl:${lab.lineColour(n)}" title="CUDA line ${n}"`;
    },
    setPosition: (p) => lab.views.scrubber.setPosition(p),
    markRequest() { tReq = performance.now(); },
    // the request drawn: key/click -> redrawn, measured in the page (the browser test reads it)
    requestDone() { if (tReq) { root.dataset.latency = (performance.now() - tReq).toFixed(1); tReq = 0; } },
    renderAll,
  };
  const order = SLOTS.flatMap((s) => VIEWS.filter((v) => v.slot === s).sort((a, b) => a.order - b.order));
  for (const v of order) lab.views[v.name] = v.make(lab);

  function renderAll() {
    // one message may carry a new program and a state of it (a recording's next view): its
    // change events come in the message's key order, so take the program the state belongs to
    const p = model.get("program") || {};
    if (p !== lab.prog) {
      // a recording's next view: a position at the last pass follows the new last pass
      const atLast = lab.prog.positions && !lab.pending && (model.get("state") || {}).pos === lab.prog.positions - 1;
      const grew = p.positions > (lab.prog.positions || 0);
      lab.prog = p;
      lab.views.rom.newProgram();
      if (atLast && grew && (model.get("recording") || {}).status === "recording") setTimeout(() => lab.setPosition(lab.positions() - 1), 0);
    }
    lab.views.head.renderRecording();
    const st = model.get("state");
    if (!st || st.pos === undefined) return;
    root.classList.toggle("qg-machine", lab.M());
    for (const v of order) lab.views[v.name].update(st);
    root.dataset.pos = st.pos;
  }

  root.addEventListener("mousedown", (ev) => { if (!ev.target.closest("input, select")) root.focus({ preventScroll: true }); });

  // presentation mode: the trait when Python set it, else what this browser last used (told to Python)
  function applyPresentation() {
    let on = model.get("presentation");
    if (on === null || on === undefined) {
      on = !!stored("presentation", false);
      model.set("presentation", on); model.save_changes();
    }
    root.classList.toggle("qg-present", !!on);
    const btn = $(".qg-presentbtn");
    btn.classList.toggle("on", !!on);
    btn.title = on ? "presentation mode is on: click for the full layout" : "presentation mode: larger type, the scrubber and the current layer on one 1280x720 screen";
  }
  $(".qg-presentbtn").addEventListener("click", () => {
    const on = !lab.present();
    store("presentation", on);
    model.set("presentation", on); model.save_changes();
    applyPresentation(); renderAll();
  });
  model.on("change:presentation", () => {
    const on = model.get("presentation");
    if (on === null || on === undefined || on === lab.present()) return;
    store("presentation", !!on);
    applyPresentation(); renderAll();
  });
  // folding a card by its title (a click on the title, not on its controls)
  const folded = new Set(stored("folded", []));
  root.querySelectorAll(".qg-card[data-view]").forEach((c) => c.classList.toggle("qg-folded", folded.has(c.dataset.view)));
  root.addEventListener("click", (ev) => {
    const h = ev.target.closest(".qg-card > h4");
    if (!h || ev.target.closest("button, select, input")) return;
    const card = h.parentElement, name = card.dataset.view;
    const now = card.classList.toggle("qg-folded");
    if (now) folded.add(name); else folded.delete(name);
    store("folded", [...folded]);
    if (!now) renderAll();                  // drawn again at its size (canvases measured while folded are not)
  });
  applyPresentation();
  function onState() {
    lab.pending = false;
    const t0 = performance.now();
    renderAll();
    root.dataset.render = (performance.now() - t0).toFixed(1);
    lab.requestDone();
  }
  model.on("change:program", renderAll);       // renderAll takes the new program (and follows a recording)
  model.on("change:state", onState);
  model.on("change:fmt", renderAll);
  model.on("change:attn_meta", () => { if (lab.M()) renderAll(); });
  renderAll();
  return () => lab.views.scrubber.stop();
}

export default { render };
