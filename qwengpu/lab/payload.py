"""Snapshots as small JSON-ready dicts: what the inspector widget sends per position, and what the
static HTML export draws. Values are formatted here (hex, dec, float) so the browser only looks up.

`program_payload(view)` is sent once per launch (disassembly, per-step pcs for breakpoints);
`snapshot_payload(snap)` once per position (a few KB); `attention_bytes(snap)` carries the model's
attention windows as uint8 (empty on the interpreter).
"""
from __future__ import annotations

import numpy as np

from qwengpu.ptx.ir import demangled_name

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
        "has_model": view.model is not None,
        "layers": [{"index": L.index, "kind": L.kind, "role": L.role} for L in view.model.layers]
        if view.model is not None else [],
    }


def snapshot_payload(snap: Snapshot) -> dict:
    regs = []
    for r in snap.regs:
        regs.append({"n": r.name, "t": r.type, "w": r.written, "c": r.changed,
                     "v": [_triple(v, r.type) for v in r.values],
                     "p": list(r.pointers)})
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
               "active": n.active, "executed": n.executed, "faults": n.faults, "ops": ops}
    memory = []
    for m in snap.memory:
        r = m.region
        memory.append({"key": r.key, "name": r.name, "space": r.space, "base": r.base, "size": r.size,
                       "dtype": r.dtype, "offset": m.offset, "hex": m.data.hex(),
                       "changed": list(m.changed),
                       "ptr": {str(k): _group_labels(v) for k, v in m.pointers.items()},
                       "acc": {str(k): _group_labels(v) for k, v in m.access.items()},
                       "vars": [list(v) for v in r.variables]})
    out = {
        "pos": snap.position, "positions": snap.positions, "block": snap.block, "warp": snap.warp,
        "function": snap.function, "depth": snap.depth, "call_stack": snap.call_stack,
        "lane_state": snap.lane_state,
        "tids": [list(t) if t is not None else None for t in snap.tids],
        "regs": regs, "stack": [[pc, m, rpc] for pc, m, rpc in snap.stack], "next": nxt,
        "last": snap.last, "memory": memory, "fault": snap.fault, "finished": snap.finished,
        "model": model_payload(snap.model) if snap.model is not None else None,
    }
    return out


def model_payload(ms) -> dict:
    layers = []
    for L in sorted(ms.attention):
        a = ms.attention[L]
        layers.append({"layer": int(L), "heads": int(a.shape[0]), "n": int(a.shape[1]),
                       "scale": float(ms.attention_scale[L])})
    gdn = []
    for L in sorted(ms.gdn):
        g = ms.gdn[L]
        st = g["state"]
        maps = []
        for m in st.maps:
            slots = g["decoded"][m.name]
            maps.append({"name": m.name, "width": m.width,
                         "heads": sorted({f.head for f in m.fields}),
                         "slots": [{"label": s.label, "row": row,
                                    "value": None if s.value is None else _triple(s.value, _word_type(m.width)),
                                    "margin": None if s.value is None else round(float(s.margin), 3)}
                                   for s, row in zip(slots, m.rows())]})
        shape = list(np.asarray(st.state).shape)
        gdn.append({"layer": int(L), "shape": shape, "maps": maps,
                    "absmax": float(np.abs(st.state).max()) if np.asarray(st.state).size else 0.0})
    fm = ms.first_mismatch
    return {"consistent": ms.consistent, "checked": ms.checked,
            "first_mismatch": None if fm is None else {"token": fm.token, "position": fm.position,
                                                        "what": fm.what, "expected": repr(fm.expected),
                                                        "got": repr(fm.got), "text": str(fm)},
            "tokens": list(ms.tokens), "window_start": ms.window_start, "layers": layers, "gdn": gdn,
            "token": None if ms.record is None else {"index": ms.record.index, "text": ms.record.text}}


def _word_type(width: int) -> str:
    return {1: "pred", 8: "b8", 16: "b16", 32: "b32", 64: "b64"}.get(width, "b64")


def attention_bytes(snap: Snapshot) -> bytes:
    """The attention windows of every layer, uint8, concatenated in layer order ([heads, n, n] each)."""
    ms = snap.model
    if ms is None:
        return b""
    return b"".join(np.ascontiguousarray(ms.attention[L]).tobytes() for L in sorted(ms.attention))


def gdn_bytes(snap: Snapshot, layer: int, head: int) -> tuple[bytes, dict]:
    """One GDN head's raw state [dk, dv] quantised to int8 around 0 (scale = |max|), for a heatmap."""
    ms = snap.model
    if ms is None or layer not in ms.gdn:
        return b"", {}
    st = np.asarray(ms.gdn[layer]["state"].state, dtype=np.float64)
    if not 0 <= head < st.shape[0]:
        return b"", {}
    m = st[head]
    top = float(np.abs(m).max()) or 1.0
    q = np.clip(np.round(m / top * 127), -127, 127).astype(np.int8)
    return q.tobytes(), {"layer": layer, "head": head, "rows": int(m.shape[0]), "cols": int(m.shape[1]),
                         "scale": top}


__all__ = ["program_payload", "snapshot_payload", "attention_bytes", "gdn_bytes", "type_width"]
