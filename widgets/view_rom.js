// The ROM: on the interpreter the PTX of the function running (the current and previous pc, the
// SIMT stack under it); on a model engine the bundles with their PTX (the pass's bundle and, inside
// it, the PTX lines of the pass). Breakpoints in the gutter.
function romView(lab) {
  const { root, $, model, M, bps, positions, clAttr } = lab;
  const rom = $(".qg-rom");
  let romFn = null;
  function buildRom(fn) {
    romFn = fn;
    if (M()) { buildBundles(); return; }
    const rows = (lab.prog.disassembly || {})[fn] || [];
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
    lab.views.source.highlight(p);
  }
  function highlightRomRows(p) {
    if (M()) { highlightBundle(p); return; }
    const fnIdx = (lab.prog.step_fn || [])[p];
    const fn = fnIdx !== undefined ? lab.prog.functions[fnIdx] : romFn || lab.prog.kernel;
    if (fn !== romFn) buildRom(fn);
    rom.querySelectorAll(".qg-row.cur, .qg-row.prev, .qg-row.faulty").forEach((e) => e.classList.remove("cur", "prev", "faulty"));
    const pc = (lab.prog.step_pc || [])[p];
    const ppc = p > 0 ? lab.prog.step_pc[p - 1] : undefined;
    if (ppc !== undefined && lab.prog.functions[lab.prog.step_fn[p - 1]] === fn) {
      const e = rom.querySelector(`.qg-row[data-pc="${ppc}"]`); if (e) e.classList.add("prev");
    }
    if (pc !== undefined) {
      const e = rom.querySelector(`.qg-row[data-pc="${pc}"]`);
      if (e) {
        e.classList.add(lab.prog.fault && p === positions() - 2 ? "faulty" : "cur");
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

  // model engines: the bundles (ROM slots), each with the PTX instructions it runs
  function buildBundles() {
    const bp = bps();
    let h = "";
    for (const b of lab.prog.bundles || []) {
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
    let pc = w ? w.bundle : (lab.prog.step_pc || [])[p];
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
  model.on("change:breakpoints", () => { romFn = null; highlightRom(model.get("position") | 0); });
  return {
    highlight: highlightRom,
    toggleBreakpoint,
    newProgram() { romFn = null; },
    update(st) {
      highlightRom(st.pos);
      if (M()) $(".qg-stack").innerHTML = "";
      else renderStack(st);
    },
  };
}
VIEWS.push({
  name: "rom", slot: "grid", order: 20, make: romView,
  card: `<div class="qg-card qg-col-rom" data-view="rom">
        <h4>ROM <span class="qg-sub qg-fn"></span></h4>
        <div class="qg-srcnote" style="display:none"></div>
        <div class="qg-rom"></div>
        <div class="qg-stack"></div>
      </div>`,
});
