// The warp in focus: what runs next (the interpreter's next instruction with its operands per lane;
// a model engine's pass in words and the bundle in flight), the register table (lanes as columns,
// changed cells yellow, masked lanes grey) and, on a model engine, the lane table of every warp.
function warpView(lab) {
  const { $, M, fmt } = lab;
  function renderNext(st) {  // the interpreter: the next instruction, its operands per lane
    const f = FMT_INDEX[fmt()];
    const n = st.next;
    $(".qg-warpsub").textContent = `block ${st.block} · warp ${st.warp}` + (st.depth ? ` · in ${st.function} (depth ${st.depth})` : "");
    const nx = $(".qg-next");
    if (n) {
      nx.className = "qg-next" + (n.faults ? " faults" : "");
      let rows = "";
      for (const o of n.ops) {
        if (o.r === "dst" || o.r === "call") continue;
        let cells = "";
        if (o.v) {
          for (let l = 0; l < 4; l++) {
            const v = o.v[l];
            const a = o.a ? o.a[l] : null;
            const txt = v === null || v === undefined ? "·" : (o.r === "guard" ? (v[0] === "1" ? "true" : "false") : v[o.r === "addr" ? 0 : f]);
            cells += `<td class="qg-mono" title="${a ? esc(a) : ""}">${esc(txt)}${a ? `<div class="qg-lbl">${esc(a)}</div>` : ""}</td>`;
          }
        } else cells = `<td colspan="4" class="qg-lbl">${esc(o.n || "")}</td>`;
        rows += `<tr><td class="qg-mono">${esc(o.t)}</td><td class="role">${esc(o.r)}${o.n && o.v ? " · " + esc(o.n) : ""}</td>${cells}</tr>`;
      }
      if (n.shfl) {                        // a shuffle: the lane each lane reads
        rows += `<tr class="qg-shfl"><td class="qg-mono">lane</td><td class="role">reads</td>` +
          n.shfl.map((s, l) => `<td class="qg-mono">${s === null ? "·" : s === l ? `${l} (itself)` : `← lane ${s}`}</td>`).join("") + `</tr>`;
      }
      nx.innerHTML = `<div class="qg-meta">next · pc ${n.pc} · line ${n.line} · lanes ${maskDots(n.active)} executing ${maskDots(n.executed)}${n.faults ? ' · <b style="color:#d6336c">faults</b>' : ""}</div>
        <div class="qg-ins">${esc(n.text)}</div>${rows ? `<table class="qg-tbl">${rows}</table>` : ""}`;
    } else {
      nx.className = "qg-next";
      nx.innerHTML = `<div class="qg-meta">${st.fault ? "the launch faulted" : "launch finished"}</div><div class="qg-ins">${st.last ? "last: " + esc(st.last.text) : ""}</div>`;
    }
  }

  // a pass in words: what its consumed token makes it do, and what it emitted
  function passHTML(st) {
    const w = st.what;
    if (!w) return `<div class="qg-meta">pass ${st.pos}: ${esc(st.input)} → ${esc(st.token)}</div>`;
    return `<div class="qg-pass"><span class="qg-kind k-${w.kind.replace(/ /g, "-")}">${esc(w.kind)}</span> ${esc(w.text)}</div>
      <div class="qg-meta">then: <span class="qg-kind k-${w.then_kind.replace(/ /g, "-")}">${esc(w.then_kind)}</span> ${esc(w.then)}</div>
      <div class="qg-meta">pass ${st.pos} consumed <span class="qg-mono">${esc(st.input)}</span> → emitted <span class="qg-mono">${esc(st.token)}</span></div>`;
  }
  // a lane's word (the lane table after the pass) and, while a bundle is in flight, whether it runs for the lane
  function laneWord(st, l, s) {
    const run = st.in_pass && ((st.running >> l) & 1);
    return `<span class="qg-ls ${s}">${s}</span>${run ? `<span class="qg-run" title="the bundle in flight (bundle ${st.pc}) runs for this lane">▸ runs</span>` : ""}`;
  }
  function renderPass(st) {  // a model engine: the pass in words and the bundle in flight
    $(".qg-warpsub").textContent = `block ${st.block} · warp ${st.warp} · registers from GDN memory reg.emit`;
    const b = (lab.prog.bundles || [])[st.pc];
    const nx = $(".qg-next");
    nx.className = "qg-next";
    if (b) {
      let rows = "";
      for (const [u, t] of b.ops) rows += `<tr><td class="role">${esc(u)}</td><td class="qg-mono">${esc(t)}</td></tr>`;
      for (const [j, r, n] of b.carries) rows += `<tr><td class="role">carry ${j}</td><td class="qg-mono">r${r} ← ${esc(n)}</td></tr>`;
      nx.innerHTML = passHTML(st) + (st.in_pass
        ? `<div class="qg-meta">bundle ${b.pc} in flight · lanes ${maskDots(st.running)} · ${esc(b.term)}</div><table class="qg-tbl">${rows}</table>`
        : `<div class="qg-meta">between bundles: no bundle in flight</div>`);
    } else nx.innerHTML = passHTML(st);
  }

  // the register table, one path for both engines: the interpreter's registers are PTX registers
  // (type, pointers), a model engine's physical ones (the PTX register carried in, ✓/✗ against the
  // interpreter); a lane's word heads its column
  function renderRegisters(st) {
    const f = FMT_INDEX[fmt()], machine = M();
    const ls = st.lane_state || [];
    let h = `<thead><tr><th>reg</th>`;
    for (let l = 0; l < 4; l++) {
      const t = st.tids[l];
      h += `<th>lane ${l}<span class="qg-tid">${t ? "tid " + t.join(",") : "—"}</span>${machine ? laneWord(st, l, ls[l]) : `<span class="qg-ls ${ls[l]}">${ls[l]}</span>`}</th>`;
    }
    h += `</tr></thead><tbody>`;
    for (const r of st.regs) {
      h += `<tr class="${r.w ? "" : "unw"}" data-reg="${esc(r.n)}"><td class="rn">${esc(r.n)}<span class="qg-ty">${machine ? esc(r.l) : "." + r.t}</span></td>`;
      for (let l = 0; l < 4; l++) {
        const off = machine ? ls[l] === "exited" || ls[l] === "absent" : ls[l] !== "active" && ls[l] !== "guarded";
        const cls = (off ? "off " : "") + ((r.c >> l) & 1 ? "chg" : "");
        let mark = "", title = "";
        if (machine) {
          const k = r.k[l];
          mark = k === null ? "" : (k ? '<span class="qg-ok" title="= the interpreter\'s PTX register">✓</span>' : '<span class="qg-no" title="differs from the interpreter">✗</span>');
        } else if (r.p[l]) {
          mark = '<span class="qg-pt">↗</span>';
          title = ` title="points into ${esc(r.p[l])}"`;
        }
        h += `<td class="${cls}" data-lane="${l}"${title}>${mark}${esc(r.v[l][f])}</td>`;
      }
      h += `</tr>`;
    }
    $(".qg-regs").innerHTML = h + "</tbody>";
  }

  function renderLanes(st) {  // a model engine: the lane table of every warp
    let lt = `<h4 style="margin-top:6px">Lanes <span class="qg-sub">lane table lanes</span></h4><table class="qg-tbl qg-lanes"><tr><th>warp</th>`;
    for (let l = 0; l < 4; l++) lt += `<th>lane ${l}</th>`;
    lt += `</tr>`;
    for (const [w, row] of st.lanes) {
      lt += `<tr class="${w === st.warp ? "qg-top" : ""}"><td class="qg-mono">${w}</td>`;
      row.forEach(([pc, s], l) => { lt += `<td class="qg-mono">pc ${pc} ${w === st.warp ? laneWord(st, l, s) : `<span class="qg-ls ${s}">${s}</span>`}</td>`; });
      lt += `</tr>`;
    }
    lt += `</table>`;
    const c = st.checks || {};
    if (c.ok || c.bad) lt += `<div class="qg-note">carried registers checked here against the interpreter: ${c.ok} ✓${c.bad ? `, ${c.bad} ✗` : ""} (${esc((c.names || []).join(", "))})</div>`;
    let box = $(".qg-lanesbox");
    if (!box) {
      box = document.createElement("div");
      box.className = "qg-lanesbox";
      $(".qg-regwrap").after(box);
    }
    box.innerHTML = lt;
  }

  return {
    update(st) {
      if (M()) renderPass(st); else renderNext(st);
      renderRegisters(st);
      if (M()) renderLanes(st);
    },
  };
}
VIEWS.push({
  name: "warp", slot: "grid", order: 30, make: warpView,
  card: `<div class="qg-card qg-col-warp" data-view="warp">
        <h4>Warp <span class="qg-sub qg-warpsub"></span></h4>
        <div class="qg-next"></div>
        <div class="qg-regwrap"><table class="qg-regs"></table></div>
      </div>`,
});
