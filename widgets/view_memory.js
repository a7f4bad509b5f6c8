// Memory as hex dumps with the elements decoded in the buffer's type (global buffers per argument,
// shared memory, local memory where written): bytes the last step wrote, bytes registers point to,
// bytes the next instruction touches.
function memoryView(lab) {
  const { $ } = lab;
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
  return { update: renderMemory };
}
VIEWS.push({
  name: "memory", slot: "grid", order: 40, make: memoryView,
  card: `<div class="qg-card qg-col-mem" data-view="memory">
        <h4>Memory <span class="qg-sub">hex dump</span></h4>
        <div class="qg-memwrap"></div>
        <div class="qg-legend"><span><i style="background:var(--qg-chg)"></i>written by the last step</span>
          <span><i style="box-shadow:inset 0 -2px 0 var(--qg-ptr)"></i>a register points here</span>
          <span><i style="outline:1.5px dashed var(--qg-acc);outline-offset:-2px"></i>the next instruction accesses</span></div>
      </div>`,
});
