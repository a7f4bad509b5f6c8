// The CUDA source beside the PTX (a kernel compiled with nvcc's line info): the current line and
// its PTX rows highlighted, a click runs to a line, the gutter sets a breakpoint on it.
function sourceView(lab) {
  const { root, $, model, lbps, linesAt, hitsAt, lineColour, positions } = lab;
  const rom = $(".qg-rom");
  let srcProg = null, srcScrolls = null;     // the program the source panel (or its note) was built for
  function buildSource() {
    const src = lab.prog.source;
    srcProg = lab.prog;
    root.classList.toggle("qg-hassrc", !!src);
    $(".qg-col-src").style.display = src ? "" : "none";
    const note = $(".qg-srcnote");
    note.style.display = src ? "none" : "";
    note.textContent = src ? "" : (lab.prog.source_note || "");
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
    if (srcProg !== lab.prog) buildSource();
    if (!lab.prog.source) return;
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
    for (let t = p0 + 1; t < positions(); t++) if (hitsAt(t).includes(n)) { lab.setPosition(t); return; }
    root.classList.add("qg-nohit"); setTimeout(() => root.classList.remove("qg-nohit"), 300);
  }
  $(".qg-src").addEventListener("click", (ev) => {
    const g = ev.target.closest("[data-lbp]");
    if (g) { toggleLineBreakpoint(+g.dataset.lbp); return; }
    const r = ev.target.closest(".qg-srow.used");
    if (r) runToLine(+r.dataset.line);
  });
  model.on("change:line_breakpoints", () => { srcProg = null; highlightSource(model.get("position") | 0); });
  return { highlight: highlightSource, update() {} };
}
VIEWS.push({
  name: "source", slot: "grid", order: 10, make: sourceView,
  card: `<div class="qg-card qg-col-src" data-view="source" style="display:none">
        <h4>CUDA <span class="qg-sub qg-srcname"></span></h4>
        <div class="qg-src"></div>
        <div class="qg-lbl qg-srccap">the current line and its PTX lines highlighted; click a line to run to it, its gutter for a breakpoint</div>
      </div>`,
});
