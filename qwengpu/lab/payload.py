"""Snapshots as small JSON-ready dicts: what the inspector widget sends per position, and what the
static HTML export draws. Values are formatted here (hex, dec, float) so the browser only looks up.

Interpreter (`LaunchView`): `program_payload(view)` once per launch (disassembly, per-step pcs for
breakpoints), `snapshot_payload(snap, view)` once per position (a few KB).

Model engines (`MachineView`): `machine_program_payload(view)` once (bundles with their PTX lines,
per-position pcs, token texts, layers, memories, the consistency summary), then per position
`machine_snapshot_payload(view, snap)` (registers, lanes, memory, the slot selections of a window of
tokens, the decoded GDN memory) and `machine_gdn_bytes` (the raw state block as int8 bytes).

Memory on both: a page of each region, the rows the position wrote and what a search found
(`memory_payload`, `qwengpu.lab.memory_pages`): the payload follows the page, not the memory's size.
"""
from __future__ import annotations

import numpy as np

from qwengpu.machine.config import LANES
from qwengpu.machine.format import WARP_BITS, ctl_fields
from qwengpu.ptx.ir import demangled_name
from qwengpu.runtime.readback import lane_table_of

from .exchanges import sources_of
from .memory_pages import PAGE_ROWS, pages_of
from .record import DEFAULT_SELECTIONS, memory_role, slot_label
from .timeline import STATES, timeline
from .values import fmt_all, type_width
from .view import LaunchView, Snapshot


def _lanes_label(lanes: list[int]) -> str:
    if not lanes:
        return ""
    if lanes == list(range(lanes[0], lanes[-1] + 1)) and len(lanes) > 2:
        return f"l{lanes[0]}-{lanes[-1]}"
    return "l" + ",".join(str(x) for x in lanes)


def _group_labels(labels: list[str]) -> list[str]:
    """["%rd3 l0", "%rd3 l1", "%rd7 l2"] -> ["%rd3 l0,1", "%rd7 l2"]"""
    by: dict = {}
    for lab in labels:
        name, _, lane = lab.rpartition(" l")
        if not name:
            by.setdefault(lab, [])
            continue
        by.setdefault(name, []).append(int(lane))
    return [f"{n} {_lanes_label(sorted(ls))}".strip() for n, ls in by.items()]


def _triple(v: int | None, t: str):
    if v is None:
        return None
    f = fmt_all(int(v), t)
    return [f["hex"], f["dec"], f["float"]]


def program_payload(view: LaunchView) -> dict:
    fns = sorted({s.function for s in view.steps} | {view.kernel})
    fidx = {f: i for i, f in enumerate(fns)}
    spec = view.spec
    return {
        "kernel": view.kernel,
        "kernel_name": demangled_name(view.kernel),
        "engine": view.engine,
        "positions": len(view),
        "lanes": 4,
        "grid": list(spec.grid),
        "block": list(spec.block),
        "functions": fns,
        "disassembly": {f: view.disassembly(f) for f in fns},
        "step_pc": [int(s.pc) for s in view.steps],
        "step_fn": [fidx[s.function] for s in view.steps],
        "step_warp": [int(s.warp) for s in view.steps],
        "step_block": [int(s.block) for s in view.steps],
        "fault": str(view.fault) if view.fault is not None else None,
        "has_model": False,
        "layers": [],
        **source_payload(view),
        **timeline_payload(view),
    }


#: the most lane-positions the timeline carries (one character each); a longer launch's timeline
#: covers its first positions
MAX_TIMELINE = 1 << 20
#: the most timeline events sent
MAX_EVENTS = 4000


def timeline_payload(view) -> dict:
    """The warp and lane timeline (`qwengpu.lab.timeline`) once per launch: one character per
    lane and position ('0'..'6', indices into `states`; position-major, then warp, then lane),
    the running block per position, and the events."""
    tl = timeline(view)
    per = tl.warps * LANES
    n = min(tl.positions, max(1, MAX_TIMELINE // max(1, per)))
    codes = (tl.codes[:n].reshape(n, per) + ord("0")).astype(np.uint8).tobytes().decode("ascii")
    return {"timeline": {"states": list(STATES), "warps": tl.warps, "lanes": LANES, "unit": tl.unit,
                         "positions": n, "codes": codes, "blocks": [int(b) for b in tl.blocks[:n]],
                         "events": [[int(t), k, w, text] for t, k, w, text in tl.events if t < n][:MAX_EVENTS],
                         "exchanges": [[x.position, x.kind, x.warp, x.lanes] for x in tl.exchanges if x.position < n][:MAX_EVENTS]}}


#: what the source panel says when a launch has no CUDA source
NO_SOURCE = ("no CUDA source: this kernel came as PTX (shipped, or compiled without nvcc's -lineinfo); "
             "the PTX is the source")


def source_payload(view) -> dict:
    """The launch's CUDA source for the source panel (`qwengpu.lab.source`): its lines as numbered
    for the user, PTX line -> CUDA line, and per position the CUDA lines it is at (`step_lines`)
    and the lines a breakpoint stops at (`line_hits`); the interpreter's (one instruction a
    position) as one number, -1 for none, a pass's as a list."""
    src = view.source
    if src is None:
        return {"source": None, "source_note": NO_SOURCE}
    one = isinstance(view, LaunchView)

    def pack(lines):
        return (lines[0] if lines else -1) if one else lines
    shown = {}
    for fn in view.module.functions.values():
        for ins in fn.body:
            ln = src.line_of_ptx(ins.line)
            if ln is not None:
                shown[str(ins.line)] = ln
    return {"source": {"name": src.name, "first_line": src.first_line, "lines": list(src.lines), "ptx": shown},
            "step_lines": [pack(view.cuda_lines(t)) for t in range(len(view))],
            "line_hits": [pack(h) for h in view.line_hits()]}


# What the interpreter's and the model's snapshots both show, formatted on one path: a register
# row (name, type, written, lanes changed, the values as hex/dec/float) and the memory hex dumps.

def _register_row(name: str, ptx_type: str, written: bool, changed: int, values) -> dict:
    return {"n": name, "t": ptx_type, "w": written, "c": changed, "v": [_triple(v, ptx_type) for v in values]}


def memory_payload(view, snap, settings: dict | None = None, rows: int = PAGE_ROWS) -> list[dict]:
    """The memory card's regions at a snapshot of `view`: per region a page of `rows` rows (the one
    `settings[key]["at"]` holds, else the one the launch shows), the rows the position wrote, the
    registers pointing in and the next instruction's accesses on them (the interpreter's; a model
    engine has none of these two), the latest write and what `settings[key]["find"]` found
    (`qwengpu.lab.memory_pages.MemoryPages.payload`)."""
    return pages_of(view).payload(snap.position, snap.memory, settings, rows)


def _memory_payload(views) -> list[dict]:
    """`MemoryView`s (`qwengpu.lab.view`) whole, for a snapshot given without its view: bytes as
    hex, the bytes the last step wrote, registers pointing in and the next instruction's
    accesses."""
    out = []
    for m in views:
        r = m.region
        out.append({"key": r.key, "name": r.name, "space": r.space, "base": r.base, "size": r.size,
                    "dtype": r.dtype, "offset": m.offset, "hex": m.data.hex(), "changed": list(m.changed),
                    "ptr": {str(k): _group_labels(v) for k, v in m.pointers.items()},
                    "acc": {str(k): _group_labels(v) for k, v in m.access.items()},
                    "vars": [list(v) for v in r.variables]})
    return out


def snapshot_payload(snap: Snapshot, view: LaunchView | None = None, memory: dict | None = None,
                     rows: int = PAGE_ROWS) -> dict:
    """A position of the interpreter's view; with the `view`, its memory paged (`memory_payload`:
    `memory` the page's settings per region), else the snapshot's windows whole."""
    regs = [{**_register_row(r.name, r.type, r.written, r.changed, r.values), "p": list(r.pointers)} for r in snap.regs]
    nxt = None
    if snap.next is not None:
        ops = []
        for o in snap.next.operands:
            vals = None
            if o.values is not None:
                t = o.type or "b32"
                if o.role in ("addr", "param"):
                    t = "b64"
                vals = [_triple(v, t) if v is not None else None for v in o.values]
            addrs = None
            if o.addresses is not None:
                addrs = [None if a is None else
                         (f"{a[0]}+{a[1]}" if a[0] is not None else f"unmapped 0x{a[2]:x}")
                         for a in o.addresses]
            ops.append({"t": o.text, "r": o.role, "n": o.note, "v": vals, "a": addrs})
        n = snap.next
        nxt = {"index": n.index, "pc": n.pc, "line": n.line, "text": n.text, "function": n.function,
               "active": n.active, "executed": n.executed, "faults": n.faults, "ops": ops,
               "shfl": sources_of(n)}
    memory = memory_payload(view, snap, memory, rows) if view is not None else _memory_payload(snap.memory)
    out = {
        "pos": snap.position, "positions": snap.positions, "block": snap.block, "warp": snap.warp,
        "function": snap.function, "depth": snap.depth, "call_stack": snap.call_stack,
        "lane_state": snap.lane_state,
        "tids": [list(t) if t is not None else None for t in snap.tids],
        "regs": regs, "stack": [[pc, m, rpc] for pc, m, rpc in snap.stack], "next": nxt,
        "last": snap.last, "memory": memory, "fault": snap.fault, "finished": snap.finished,
        "model": None,
    }
    return out


# ---------------------------------------------------------------------------------------------
# the model engines (MachineView): one position per forward pass

#: consumed tokens shown in the slot-selection heatmaps
SELECTION_WINDOW = 48


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not np.isfinite(x) else float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    return str(x)


def machine_program_payload(view) -> dict:
    """Sent once per launch: the bundles, per-position pcs, the token texts, layers and memories."""
    tr = view.trace
    bundles = []
    for pc in range(len(view.image.bundles)):
        b = view.bundle(pc)
        bundles.append({"pc": b.pc, "label": b.label, "ptx": [list(p) for p in b.ptx], "ops": [list(o) for o in b.ops],
                        "carries": [list(c) for c in b.carries], "term": b.term})
    recs = tr.records
    spec = view.spec
    return {
        "mode": "machine",
        "engine": view.engine,
        "kernel": view.kernel,
        "kernel_name": demangled_name(view.kernel),
        "positions": len(view),
        "lanes": 4,
        "grid": list(spec.grid),
        "block": list(spec.block),
        "nregs": int(view.image.nregs),
        "bundles": bundles,
        "step_pc": [int(r.machine.pc) for r in recs],
        "exec_pc": [-1 if p is None else int(p) for p in view._exec_pc],
        "step_warp": [int(r.machine.warp) for r in recs],
        "step_block": [int(r.machine.block) for r in recs],
        "tokens": list(tr.tokens),
        "prompt_len": int(tr.prompt_len),
        "fault": str(view.fault) if view.fault is not None else None,
        "has_model": True,
        "layers": [{"index": L.index, "kind": L.kind, "role": L.role, "part": getattr(L, "part", "gpu")}
                   for L in tr.layers],
        "prefix_len": int(getattr(tr, "prefix_len", 0)),
        "memories": [_memory_meta(view, m) for m in sorted(tr.memories.values(), key=lambda m: (m.layer, m.name))],
        "selections_default": list(_default_selections()),
        "consistency": _jsonable(tr.consistency),
        "first_mismatch": _mismatch(tr.first_mismatch()),
        "seconds": round(float(getattr(tr, "seconds", 0.0)), 2),
        **source_payload(view),
        **timeline_payload(view),
    }


def _mismatch(fm) -> dict | None:
    if fm is None:
        return None
    return {"token": fm.token, "position": fm.position, "what": fm.what, "expected": repr(fm.expected),
            "got": repr(fm.got), "against": fm.against, "text": str(fm)}


def _default_selections():
    return DEFAULT_SELECTIONS


#: a slot counts as used by a launch when some token selects it with at least this strength
USED = 0.5


def _memory_meta(view, m) -> dict:
    """A memory once per launch: where it lives, and the slots the launch selects (the columns of
    its selection heatmap) with their labels."""
    s = view.selection(m.name)
    used = set(s.write_slot[s.write >= USED].tolist())
    for p in range(s.read_slot.shape[1]):
        used |= set(s.read_slot[s.read[:, p] >= USED, p].tolist())
    used = sorted(int(x) for x in used if 0 <= x < m.slots)
    return {"name": m.name, "layer": m.layer, "where": m.where, "slots": m.slots, "width": m.width,
            "ports": len(m.port_keys()), "role": memory_role(m.name), "used": used,
            "labels": [slot_label(m.name, x, view.image.layout.memory, view.image.config.warp_bits) for x in used]}


def _word_text(memory: str, word: int, width: int, warp_bits: int = WARP_BITS) -> str:
    """A memory word as the lab shows it in the GDN panel."""
    if memory.startswith("reg.") or memory in ("cbuf", "pa", "mbuf"):
        lanes = [(word >> (32 * i)) & 0xFFFFFFFF for i in range((width + 31) // 32)]
        return " ".join(f"{v:08x}" for v in lanes)
    if memory == "mem":
        data = (word & ((1 << 128) - 1)).to_bytes(16, "little")
        valid = word >> 128
        return f"{data.hex(' ')} · valid {valid:016b}"[::1]
    if memory == "ctl":
        c = ctl_fields(word)
        return f"pc {c['pc']} · mask {c['mask']:04b} · warp {c['warp']} · block {c['block']} · epoch {c['epoch']}"
    if memory == "lanes":
        return " ".join(f"{pc}:{st}" for pc, st in lane_table_of(word, width, warp_bits))
    return f"0x{word:0{(width + 3) // 4}x}"


def machine_snapshot_payload(view, snap, gdn_memory: str | None = None, selections=None,
                             memory: dict | None = None, rows: int = PAGE_ROWS) -> dict:
    """One position of a MachineView: a few KB of JSON (the GDN raw state travels as bytes: see
    `machine_gdn_bytes`)."""
    regs = [{**_register_row(r.name, "b32", r.written, r.changed, r.values), "l": r.label,
             "k": [None if c is None else int(c) for c in r.checks]} for r in snap.regs]
    memory = memory_payload(view, snap, memory, rows)
    checks = snap.checks
    out = {
        "mode": "machine", "pos": snap.position, "positions": snap.positions, "index": snap.index,
        "input": snap.input, "token": snap.token, "pc": snap.pc, "mask": snap.mask, "warp": snap.warp,
        "block": snap.block, "epoch": snap.epoch, "in_pass": snap.in_pass, "running": snap.active,
        "what": pass_label_payload(snap.label),
        "lane_state": snap.lane_state, "lane_pc": snap.lane_pc,
        "tids": [list(t) if t is not None else None for t in snap.tids],
        "lanes": [[w, [[pc, st] for pc, st in row]] for w, row in snap.lanes],
        "regs": regs, "memory": memory,
        "margin": None if not np.isfinite(snap.margin) else round(float(snap.margin), 3),
        "consistent": snap.consistent,
        "first_mismatch": _mismatch(snap.first_mismatch),
        "checks": {"ok": sum(c.ok is True for c in checks), "bad": sum(c.ok is False for c in checks),
                   "names": sorted({f"{c.name}{'.hi' if c.half else ''}" for c in checks})},
        "finished": snap.finished, "fault": snap.fault,
        "sel": selection_payload(view, snap.position, selections),
        "gdn": gdn_payload(view, snap.position, gdn_memory) if gdn_memory else None,
    }
    return out


def pass_label_payload(label) -> dict | None:
    """A pass in words (`qwengpu.lab.passes.PassLabel`)."""
    if label is None:
        return None
    return {"kind": label.kind, "text": label.text, "then_kind": label.then_kind, "then": label.then,
            "bundle": label.bundle, "lanes": list(label.lanes), "ptx": [list(p) for p in label.ptx],
            "cuda": [list(c) for c in label.cuda]}


def selection_payload(view, position: int, memories=None) -> dict:
    """The slot selections of `memories` over the consumed tokens up to this pass's (a window)."""
    tr = view.trace
    cur = tr.prompt_len - 1 + position               # the consumed token's row
    start = max(0, cur + 1 - SELECTION_WINDOW)
    mems = []
    for name in (memories or DEFAULT_SELECTIONS):
        if name not in tr.memories:
            continue
        s = view.selection(name)
        rows = slice(start, cur + 1)
        w = np.stack([s.write_slot[rows], np.round(s.write[rows].astype(np.float64) * 255)], -1).astype(np.int64).tolist()
        r = np.stack([s.read_slot[rows], np.round(s.read[rows].astype(np.float64) * 255)], -1).astype(np.int64).tolist()
        info = tr.memories[name]
        mems.append({"name": name, "layer": info.layer, "where": info.where, "slots": info.slots,
                     "ports": len(info.port_keys()), "role": memory_role(name), "w": w, "r": r})
    return {"start": start, "cur": cur - start, "tokens": tr.tokens[start:cur + 1], "mems": mems}


def _shown_rows(dec) -> int:
    """Rows (slots) of a memory the GDN panel shows: up to the last written one, at least 8."""
    written = [d.slot for d in dec if d.value is not None]
    return min(len(dec), max(written + [7]) + 1)


def gdn_payload(view, position: int, memory: str) -> dict:
    """The decoded side of the GDN panel: written slots of `memory` after this pass (the raw block,
    `machine_gdn_bytes`, has `rows` x `cols` values: its first `rows` slots)."""
    tr = view.trace
    info = tr.memories[memory]
    g = view.gdn_state(position, memory)
    dec = g.decode()[memory]
    st = g.state[:, :_shown_rows(dec)]
    changed = set()
    for L, hh, rr, _, _ in tr.updates[position]:
        changed |= info.slots_of_rows(L, hh, rr)
    slots = [{"slot": d.slot, "label": d.label, "value": _word_text(memory, d.value, info.width, view.image.config.warp_bits),
              "margin": round(float(d.margin), 3), "changed": d.slot in changed}
             for d in dec if d.value is not None]
    return {"memory": memory, "layer": info.layer, "where": info.where, "role": memory_role(memory), "heads": info.heads,
            "banks": info.banks,
            "rows": int(st.shape[1]), "fields": int(st.shape[0]), "cols": int(st.shape[0] * st.shape[2]),
            "scale": float(np.abs(st).max()) if st.size else 0.0, "slots": slots,
            "margin": round(float(tr.records[position].margins.get(memory, float("nan"))), 3)}


def machine_gdn_bytes(view, position: int, memory: str) -> bytes:
    """The raw state block holding `memory` (rows: its first slots up to the last written one,
    columns: its value heads' dual-rail columns side by side) as int8 around 0 (scale: |max|)."""
    g = view.gdn_state(position, memory)
    st = g.state[:, :_shown_rows(g.decode()[memory])]      # [fields, shown slots, 2w]
    m = np.transpose(st, (1, 0, 2)).reshape(st.shape[1], -1)
    top = float(np.abs(m).max()) or 1.0
    return np.clip(np.round(m / top * 127), -127, 127).astype(np.int8).tobytes()


def attention_payload(view, position: int) -> tuple[list, bytes]:
    """Softmax attention of the layers that attend (recorded on the stock engine; the machine's own
    attention layers are inert and record nothing): per layer [heads, n, n] uint8 over the window."""
    tr = view.trace
    att = getattr(tr, "attention", {}) or {}
    cur = tr.prompt_len - 1 + position
    start = max(0, cur + 1 - SELECTION_WINDOW)
    meta, chunks = [], []
    for L in sorted(att):
        rows = att[L][start:cur + 1]
        if not rows:
            continue
        heads = rows[0].shape[0]
        n = len(rows)
        mat = np.zeros((heads, n, n))
        for qi, w in enumerate(rows):
            seg = np.asarray(w)[:, start:start + qi + 1]
            mat[:, qi, :seg.shape[1]] = seg
        top = float(mat.max()) or 1.0
        chunks.append(np.clip(np.round(mat / top * 255), 0, 255).astype(np.uint8).tobytes())
        meta.append({"layer": int(L), "heads": heads, "n": n, "scale": top})
    return meta, b"".join(chunks)


#: tokens (columns) of the all-layers overview: the whole context up to this many, else the latest
OVERVIEW_COLS = 512


def _u8(a) -> bytes:
    return np.clip(np.round(np.asarray(a, np.float64) * 255), 0, 255).astype(np.uint8).tobytes()


def layer_attention_payload(view, position: int, layer: int) -> tuple[dict, bytes]:
    """The attention of every GPU layer for the token pass `position` consumed
    (`qwengpu.lab.attention`), as (meta, bytes): the overview [layers, n] (each layer's largest
    weight over its heads on each earlier token), the selected `layer` per head [heads, n] and its
    heatmap over recent tokens [heads, rows, cols]; weights 0..1 as uint8 (255 = 1)."""
    from .attention import attention_error, attention_window, is_base_layer, layer_attention, layers_overview
    tr = view.trace
    t = tr.prompt_len - 1 + position
    layer = int(layer) if 0 <= int(layer) < len(tr.layers) else int(tr.gdn_layers[0])
    c0 = max(0, t + 1 - OVERVIEW_COLS)
    over = layers_overview(tr, t, c0)
    per_head = layer_attention(tr, t, layer, start=c0)
    win, r0, w0 = attention_window(tr, t, layer)
    heads = per_head.shape[0]
    top = []
    for h in range(heads):
        s = int(per_head[h].argmax())
        top.append([c0 + s, round(float(per_head[h, s]), 4), tr.tokens[c0 + s]])
    gdn = layer in tr.gdn_layers
    kind = tr.layers[layer].kind
    act = getattr(tr, "activity", None)
    now = act[t] if act is not None and t < len(act) else None
    if is_base_layer(tr, layer):
        moved = None if now is None else float(now[layer])
        note = ("a base layer of the spliced checkpoint, " + (
            "not run by the compact engine: its gates are switched off on GPU tokens, so it adds exactly 0"
            if moved is None else "idle on this token: it adds exactly 0 to the residual (its gates are "
            "switched off by the GPU token's anchor), so its output draws on nothing" if moved == 0.0
            else f"active on this token (it changes the residual by up to {moved:.3g}); its attention is the "
            "base's, not decoded here"))
    elif gdn:
        note = ("delta rule unrolled: q·k overlap × decay products × later erasures × β·|v| "
                "(per key head: the largest over its value heads)")
    elif getattr(tr, "attention", {}).get(layer):
        note = "softmax weights, recorded from the stock forward"
    else:
        note = f"softmax weights: no heads compiled in (scores 0), so uniform 1/{t + 1}; zero output projection: nothing reaches the residual"
    meta = {"t": t, "token": tr.tokens[t], "c0": c0, "n": int(over.shape[1]), "nlayers": len(tr.layers),
            "kinds": ["gdn" if L.kind == "linear_attention" else "attn" for L in tr.layers],
            "roles": [L.role for L in tr.layers], "parts": [getattr(L, "part", "gpu") for L in tr.layers],
            "activity": None if now is None else [float(x) for x in now],
            "layer": layer, "kind": kind, "heads": heads, "head_unit": "key head" if gdn else "head", "note": note,
            "top": top, "r0": r0, "w0": w0, "rows": int(win.shape[1]), "cols": int(win.shape[2]),
            "error": attention_error(tr)}
    return meta, _u8(over) + _u8(per_head) + _u8(win)


__all__ = ["memory_payload", "layer_attention_payload", "program_payload", "snapshot_payload", "type_width", "machine_program_payload",
           "machine_snapshot_payload", "selection_payload", "gdn_payload", "machine_gdn_bytes", "attention_payload"]
