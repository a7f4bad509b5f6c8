// qwenGPU register inspector: what every view shares (the first part of the widget's script;
// `qwengpu_widgets.bundle` joins it, the `view_*.js` panels and `inspector.js` into one module).
// Python sends the program once (`program`) and the current position only (`state`, small JSON;
// `attn`/`gdn`/`latt` as bytes); scrubbing sets `position`. Rendering is string templates into
// fixed containers: a keypress redraws in a few ms.

// The panels, each registered by its own `view_*.js` file:
//   { name, slot: "top" | "grid" | "below" | "end", order, card: its skeleton HTML, make(lab) -> view }
// a view is { update(st) } (called at every redraw, in slot and order) plus what other views call.
const VIEWS = [];
const ENGINES = { compact: "compact engine", model: "stock transformers forward" };

const FMT_INDEX = { hex: 0, dec: 1, float: 2 };
const ROW = 8;   // bytes per hex-dump row
const ICON = {
  first: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M3 3h2v10H3zM13 3v10L6 8z" fill="currentColor"/></svg>',
  back: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M11 3v10L4 8z" fill="currentColor"/></svg>',
  play: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M5 3v10l8-5z" fill="currentColor"/></svg>',
  step: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M4 3v10l7-5zM11 3h2v10h-2z" fill="currentColor"/></svg>',
  last: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M3 3v10l7-5zM11 3h2v10h-2z" fill="currentColor"/><path d="M7 3v10l0 0z" fill="currentColor"/></svg>',
  pause: '<svg viewBox="0 0 16 16" width="14" height="14"><path d="M4 3h3v10H4zM9 3h3v10H9z" fill="currentColor"/></svg>',
};


function esc(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
function maskDots(m, n = 4) {
  let s = "";
  for (let i = 0; i < n; i++) s += (m >> i) & 1 ? '<span class="on">●</span>' : '<span class="off">○</span>';
  return `<span class="qg-mask">${s}</span>`;
}
function bytesOf(v) {
  if (!v) return new Uint8Array(0);
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (v.buffer) return new Uint8Array(v.buffer, v.byteOffset || 0, v.byteLength);
  return new Uint8Array(0);
}
const DT = {
  int8: [1, "getInt8"], uint8: [1, "getUint8"], int16: [2, "getInt16"], uint16: [2, "getUint16"],
  int32: [4, "getInt32"], uint32: [4, "getUint32"], float32: [4, "getFloat32"], float64: [8, "getFloat64"],
  int64: [8, "getBigInt64"], uint64: [8, "getBigUint64"],
};
function fmtElem(dv, off, dtype) {
  const d = DT[dtype] || DT.uint8;
  const v = dv[d[1]](off, true);
  if (dtype === "float32") return Number.isInteger(v) ? v.toFixed(1) : String(Math.fround(v).toPrecision(7)).replace(/0+$/, "").replace(/\.$/, ".0");
  return String(v);
}
// colour maps
function viridisLike(t) {   // 0..1 -> [r,g,b] (white -> indigo)
  const a = [255, 255, 255], b = [61, 90, 254], c = [20, 20, 90];
  if (t < 0.5) { const u = t / 0.5; return a.map((x, i) => Math.round(x + (b[i] - x) * u)); }
  const u = (t - 0.5) / 0.5; return b.map((x, i) => Math.round(x + (c[i] - x) * u));
}
function diverging(t) {     // -1..1 -> blue / white / red
  const w = [255, 255, 255];
  const tgt = t < 0 ? [43, 108, 176] : [214, 51, 108];
  const u = Math.min(1, Math.abs(t));
  return w.map((x, i) => Math.round(x + (tgt[i] - x) * u));
}
// two canvases kept for drawing in steps (a redraw draws dozens of heatmaps: allocating a canvas
// each time costs more than drawing them)
const SCRATCH = [];
function scratch(i, w, h) {
  const c = SCRATCH[i] || (SCRATCH[i] = document.createElement("canvas"));
  if (c.width !== w) c.width = w;
  if (c.height !== h) c.height = h;
  return c;
}
function drawMatrix(canvas, rows, cols, get, cmap, px) {
  canvas.width = cols * px; canvas.height = rows * px;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(cols, rows);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
    const [R, G, B] = cmap(get(r, c)); const k = (r * cols + c) * 4;
    img.data[k] = R; img.data[k + 1] = G; img.data[k + 2] = B; img.data[k + 3] = 255;
  }
  const off = scratch(0, cols, rows);
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, cols * px, rows * px);
  return ctx;
}

// rows x cols cells, color per cell (cmap(row)(value)), drawn as one image scaled px x py
function paintGrid(canvas, rows, cols, get, cmapOf, px, py) {
  canvas.width = Math.max(1, cols * px); canvas.height = Math.max(1, rows * py);
  const img = new ImageData(Math.max(1, cols), Math.max(1, rows));
  for (let r = 0; r < rows; r++) {
    const cm = cmapOf(r);
    for (let c = 0; c < cols; c++) {
      const v = get(r, c), k = (r * cols + c) * 4;
      const [R, G, B] = v ? cm(v) : [255, 255, 255];
      img.data[k] = R; img.data[k + 1] = G; img.data[k + 2] = B; img.data[k + 3] = 255;
    }
  }
  const off = scratch(0, img.width, img.height);
  off.getContext("2d").putImageData(img, 0, 0);
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, cols * px, rows * py);
  return ctx;
}

// a grid with labelled axes: cells px × py from (left, 0), `rowLabel(r)` left of each row and
// `colLabel(c)` under each column (rotated; every `every`-th when they would overlap); returns the
// geometry `cellAt` reads back
function labelledGrid(canvas, rows, cols, get, cmapOf, px, py, opts = {}) {
  const left = opts.rowLabel ? (opts.left || 60) : 0, bottom = opts.colLabel ? (opts.bottom || 54) : 0;
  const font = opts.font || 10;
  if (!left && !bottom) { paintGrid(canvas, rows, cols, get, cmapOf, px, py); return { left, top: 0, px, py, rows, cols }; }
  const grid = scratch(1, Math.max(1, cols * px), Math.max(1, rows * py));
  paintGrid(grid, rows, cols, get, cmapOf, px, py);
  canvas.width = left + grid.width; canvas.height = grid.height + bottom;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.drawImage(grid, left, 0);
  ctx.font = `${font}px sans-serif`; ctx.fillStyle = "#495057"; ctx.textBaseline = "middle";
  if (opts.rowLabel) {
    const every = Math.max(1, Math.ceil((font + 1) / py));
    ctx.textAlign = "right";
    for (let r = 0; r < rows; r += every) ctx.fillText(String(opts.rowLabel(r)).slice(0, 10), left - 3, r * py + py / 2);
  }
  if (opts.colLabel) {
    const every = Math.max(1, Math.ceil((font + 1) / px));
    ctx.textAlign = "right";
    for (let c = cols - 1; c >= 0; c -= every) {     // the last column (the current token) always labelled
      ctx.save(); ctx.translate(left + c * px + px / 2, grid.height + 3); ctx.rotate(-Math.PI / 3);
      ctx.fillText(String(opts.colLabel(c)).slice(0, 10), 0, 0); ctx.restore();
    }
  }
  return { left, top: 0, px, py, rows, cols };
}
// the cell under the mouse ({r, c}), or null; the canvas may be drawn scaled
function cellAt(canvas, geo, ev) {
  const b = canvas.getBoundingClientRect();
  const x = (ev.clientX - b.left) * (canvas.width / b.width) - geo.left, y = (ev.clientY - b.top) * (canvas.height / b.height) - geo.top;
  const r = Math.floor(y / geo.py), c = Math.floor(x / geo.px);
  return x >= 0 && y >= 0 && r < geo.rows && c < geo.cols ? { r, c } : null;
}
// every heatmap cell hoverable: `describe(cell)` gives the tip's text (null: none) for the cell
// under the mouse; one floating tip per inspector (`.qg-tip`), placed beside the pointer
function hoverCells(canvas, tip, geoOf, describe) {
  canvas.addEventListener("mousemove", (ev) => {
    const geo = geoOf(), at = geo && cellAt(canvas, geo, ev);
    showTip(tip, ev, at && describe(at), canvas);
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
}
// the tip beside the pointer with `text` (none: hidden); the canvas keeps it (`data-hover`) for tests
function showTip(tip, ev, text, canvas) {
  if (!text) { tip.style.display = "none"; return; }
  tip.textContent = text;
  tip.style.display = "";
  const host = tip.offsetParent || document.body, hb = host.getBoundingClientRect();
  tip.style.left = `${ev.clientX - hb.left + 14}px`; tip.style.top = `${ev.clientY - hb.top + 14}px`;
  canvas.dataset.hover = text;
}
