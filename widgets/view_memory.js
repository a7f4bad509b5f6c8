// Memory as hex dumps with the elements decoded in the buffer's type (global buffers per argument,
// shared memory, local memory where written): bytes the last step wrote, bytes registers point to,
// bytes the next instruction touches. A region larger than a page comes a page at a time
// (`qwengpu.lab.memory_pages`): the page, plus the rows the step wrote elsewhere; page buttons,
// a hex address to jump to, a value to find (in the region's type; ◀ ▶ through the hits), the
// latest write, and "follow" (the page the launch shows: where it writes). Every control asks
// Python (the `memory_pages` trait) for the page it wants.
function memoryView(lab) {
  const { $, model } = lab;
  const wrap = $(".qg-memwrap");
  const hexOf = (s) => { const n = s.length / 2, b = new Uint8Array(n); for (let i = 0; i < n; i++) b[i] = parseInt(s.substr(2 * i, 2), 16); return b; };
  const settings = () => model.get("memory_pages") || {};
  let shown = {};                 // region key -> its payload, as last drawn

  // ask Python for a region's page: `want` ({at, mark, find, hit}) merged into the region's
  // settings; a null drops a setting (at: null follows the launch again)
  function ask(key, want) {
    const all = { ...settings() };
    const cur = { ...(all[key] || {}), ...want };
    if (want.at === null) { delete cur.mark; delete cur.hit; }
    for (const k of Object.keys(cur)) if (cur[k] === null || cur[k] === undefined || cur[k] === "") delete cur[k];
    if (Object.keys(cur).length) all[key] = cur; else delete all[key];
    lab.markRequest();
    model.set("memory_pages", all); model.save_changes();
  }
  function jump(key, offset, mark = true) { ask(key, { at: offset, mark: mark ? offset : null, hit: null }); }

  function rowHtml(m, bytes, dv, rowOff, start, n, chg, mark, esz) {
    // bytes[start .. start + n) are the region's offsets rowOff .. rowOff + n
    const addr = m.base + rowOff;
    let h = `<span class="a">${addr.toString(16).padStart(5, "0")}</span>`, dec = "";
    for (let k = 0; k < ROW; k++) {
      if (k >= n) { h += "   "; continue; }
      const o = rowOff + k, ptr = m.ptr[o], acc = m.acc[o];
      const marked = mark !== null && o >= mark && o < mark + esz;
      const cls = "b" + (bytes[start + k] === 0 ? " z" : "") + (chg.has(o) ? " chg" : "") + (ptr ? " ptr" : "") + (acc ? " acc" : "") + (marked ? " mark" : "");
      const title = [ptr ? "← " + ptr.join(", ") : "", acc ? "next: " + acc.join(", ") : ""].filter(Boolean).join(" · ");
      h += `<span class="${cls}"${title ? ` title="${esc(title)}"` : ""}>${bytes[start + k].toString(16).padStart(2, "0")}</span>` + (k === 3 ? "  " : " ");
    }
    for (let e = 0; e + esz <= n; e += esz) {
      let ec = false;
      for (let b = 0; b < esz; b++) if (chg.has(rowOff + e + b)) ec = true;
      const marked = mark !== null && rowOff + e === mark;
      dec += `<span class="e${ec ? " chg" : ""}${marked ? " mark" : ""}">${esc(fmtElem(dv, start + e, m.dtype))}</span> `;
    }
    return h + `<span class="d">${dec}</span>`;
  }

  function controls(m) {
    const pg = m.page, off = lab.exported ? ` disabled title="this export carries the page each position showed: paging and search need the kernel"` : "";
    const f = m.find, q = (settings()[m.key] || {}).find || "";
    let found = "";
    if (f) {
      const k = f.hit === null ? -1 : f.hit;
      found = f.error ? `<span class="qg-mfound bad">${esc(f.error)}</span>`
        : f.count ? `<span class="qg-mfound">${k < 0 ? "" : `${k + 1}/`}${f.count} found${f.count > f.hits.length ? ` (the first ${f.hits.length} reachable)` : ""}${k < 0 ? "" : ` · at ${(m.base + f.hits[k]).toString(16)}`}</span>
          <button data-act="hit" data-d="-1"${off} title="previous hit">◀</button><button data-act="hit" data-d="1"${off} title="next hit">▶</button>`
        : `<span class="qg-mfound bad">not found</span>`;
    }
    const lw = m.last_write;
    return `<div class="qg-mctl">
      <button data-act="page" data-d="-1"${off} title="previous page"${pg.index === 0 ? " disabled" : ""}>◀</button>
      <span class="qg-mpage">page ${pg.index + 1}/${pg.count}</span>
      <button data-act="page" data-d="1"${off} title="next page"${pg.index + 1 >= pg.count ? " disabled" : ""}>▶</button>
      <input class="qg-mgoto" placeholder="address (hex)" title="go to an address (hex, as the dump shows it); Enter" size="13"${off}>
      <input class="qg-mfind" placeholder="find ${esc(m.dtype)}" title="find a value in the region's type (42, -7, 0x2a, 1.5); Enter" size="12" value="${esc(q)}"${off}>${found}
      <button data-act="last"${off}${lw ? ` title="the latest write: at position ${lw.pos}, address ${(m.base + lw.offset).toString(16)}"` : " disabled title=\"nothing written yet\""}>last write</button>
      <button data-act="follow"${off} class="${pg.follow ? "on" : ""}" title="follow the launch: the page it writes (or reads next)">follow</button>
      <span class="qg-merr"></span></div>`;
  }

  function renderMemory(st) {
    let h = "";
    shown = {};
    for (const m of st.memory) {
      shown[m.key] = m;
      const bytes = hexOf(m.hex), n = bytes.length;
      const dv = new DataView(bytes.buffer);
      const chg = new Set(m.changed);
      const esz = (DT[m.dtype] || DT.uint8)[0];
      const mark = m.mark === undefined || m.mark === null ? null : m.mark;
      const vars = m.vars.length ? " · " + m.vars.map((v) => esc(v[0])).join(", ") : "";
      const paged = m.page && m.page.count > 1;
      h += `<div class="qg-region${paged ? " qg-paged" : ""}" data-region="${esc(m.key)}"${paged ? ` data-page="${m.page.index}"` : ""}><div class="qg-rt"><b>${esc(m.name)}</b> <span>${m.space} 0x${m.base.toString(16)} · ${m.dtype}[${Math.floor(m.size / esz)}]${vars}${m.size > n ? ` · bytes ${m.offset}..${m.offset + n}` : ""}</span></div>`;
      if (paged) h += controls(m);
      h += `<div class="qg-hex">`;
      for (let row = 0; row < n; row += ROW) h += rowHtml(m, bytes, dv, m.offset + row, row, Math.min(ROW, n - row), chg, mark, esz) + "\n";
      h += `</div>`;
      const rows = m.rows || [];
      if (rows.length) {
        h += `<div class="qg-mrows"><div class="qg-lbl">written by the last step outside this page${m.more_changed ? ` (and ${m.more_changed} more rows)` : ""}: click a row to go to its page</div><div class="qg-hex">`;
        for (const [o, hx] of rows) {
          const rb = hexOf(hx), rdv = new DataView(rb.buffer);
          h += `<span class="qg-mrow" data-off="${o}">${rowHtml(m, rb, rdv, o, 0, rb.length, chg, mark, esz)}</span>\n`;
        }
        h += `</div></div>`;
      }
      h += `</div>`;
    }
    // the inputs keep what is being typed across a redraw (a scrub while typing)
    const typing = document.activeElement && wrap.contains(document.activeElement) && document.activeElement.tagName === "INPUT"
      ? [document.activeElement.closest(".qg-region").dataset.region, document.activeElement.className, document.activeElement.value] : null;
    wrap.innerHTML = h || `<div class="qg-lbl">no memory regions</div>`;
    if (typing) {
      const el = wrap.querySelector(`.qg-region[data-region="${CSS.escape(typing[0])}"] input.${typing[1].split(" ")[0]}`);
      if (el) { el.value = typing[2]; el.focus(); }
    }
  }

  function regionOf(el) { const r = el.closest(".qg-region"); return r ? shown[r.dataset.region] : null; }
  function error(el, text) { const e = el.closest(".qg-region").querySelector(".qg-merr"); if (e) e.textContent = text; }
  wrap.addEventListener("click", (ev) => {
    const row = ev.target.closest(".qg-mrow");
    if (row) { const m = regionOf(row); if (m && !lab.exported) jump(m.key, +row.dataset.off, false); return; }
    const b = ev.target.closest("button[data-act]");
    if (!b || b.disabled) return;
    const m = regionOf(b);
    if (!m) return;
    const act = b.dataset.act, d = +(b.dataset.d || 0), size = m.page.rows * ROW;
    if (act === "page") jump(m.key, Math.max(0, Math.min(m.page.index + d, m.page.count - 1)) * size, false);
    else if (act === "follow") ask(m.key, { at: null });
    else if (act === "last" && m.last_write) jump(m.key, m.last_write.offset);
    else if (act === "hit" && m.find && m.find.hits.length) {
      const n = m.find.hits.length, k = m.find.hit === null ? (d > 0 ? 0 : n - 1) : (m.find.hit + d + n) % n;
      ask(m.key, { hit: k, at: undefined, mark: undefined });
    }
  });
  wrap.addEventListener("keydown", (ev) => {
    const el = ev.target;
    if (el.tagName !== "INPUT") return;
    ev.stopPropagation();                    // typed keys are not the scrubber's
    if (ev.key !== "Enter") return;
    const m = regionOf(el);
    if (!m) return;
    const text = el.value.trim();
    if (el.classList.contains("qg-mgoto")) {
      // an address as the dump shows it: hex, with or without 0x
      const a = /^(0x)?[0-9a-f]+$/i.test(text) ? parseInt(text.replace(/^0x/i, ""), 16) : NaN;
      if (!(a >= m.base && a < m.base + m.size)) { error(el, `${text || "?"} is not an address of ${m.name} (${m.base.toString(16)}..${(m.base + m.size - 1).toString(16)})`); return; }
      jump(m.key, a - m.base);
    } else if (el.classList.contains("qg-mfind")) {
      // Python finds the elements equal to it and shows the first one's page
      ask(m.key, { find: text || null, hit: text ? 0 : null, at: undefined, mark: undefined });
    }
  });
  return { update: renderMemory };
}
VIEWS.push({
  name: "memory", slot: "grid", order: 40, make: memoryView,
  card: `<div class="qg-card qg-col-mem" data-view="memory">
        <h4>Memory <span class="qg-sub">hex dump</span></h4>
        <div class="qg-memwrap"></div>
        <div class="qg-legend"><span><i style="background:var(--qg-chg)"></i>written by the last step</span>
          <span><i style="box-shadow:inset 0 -2px 0 var(--qg-ptr)"></i>a register points here</span>
          <span><i style="outline:1.5px dashed var(--qg-acc);outline-offset:-2px"></i>the next instruction accesses</span>
          <span><i style="background:var(--qg-mark)"></i>the address asked for (go to, find, last write)</span></div>
      </div>`,
});
