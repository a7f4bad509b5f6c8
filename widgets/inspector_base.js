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
function drawMatrix(canvas, rows, cols, get, cmap, px) {
  canvas.width = cols * px; canvas.height = rows * px;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(cols, rows);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
    const [R, G, B] = cmap(get(r, c)); const k = (r * cols + c) * 4;
    img.data[k] = R; img.data[k + 1] = G; img.data[k + 2] = B; img.data[k + 3] = 255;
  }
  const off = document.createElement("canvas"); off.width = cols; off.height = rows;
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
  const off = document.createElement("canvas"); off.width = img.width; off.height = img.height;
  off.getContext("2d").putImageData(img, 0, 0);
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, cols * px, rows * py);
  return ctx;
}
