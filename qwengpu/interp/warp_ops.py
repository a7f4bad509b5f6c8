"""The interpreter's handlers of cross-lane instructions: shfl.sync, vote.sync and match.sync, with
their member masks checked against the executing lanes."""
from __future__ import annotations

from qwengpu.ptx.ir import Pair
from qwengpu.semantics.launch_model import FULL, LANES
from qwengpu.semantics.shuffle import shuffle_source

from .lanes import lanes_of


def _member_mask(it, warp, frame, o, ex: int) -> int:
    """The membermask operand (read from an executing lane: it is warp-uniform by contract)."""
    v = it.read(warp, frame, o, "b32")
    return v[lanes_of(ex)[0]] & FULL


def h_shfl(it, warp, frame, ins, info, ex):
    d, a, b, c, mm = ins.operands
    av = it.read(warp, frame, a, "b32")
    bv = it.read(warp, frame, b, "b32")
    cv = it.read(warp, frame, c, "b32")
    out = [0] * LANES
    pred = [0] * LANES
    for lane in lanes_of(ex):
        j, ok = shuffle_source(info.mode, lane, bv[lane], cv[lane])
        out[lane] = av[j]
        pred[lane] = int(ok)
    if isinstance(d, Pair):
        it.write_reg(frame, d.first, out, ex, "b32")
        it.write_reg(frame, d.second, pred, ex, "pred")
    else:
        it.write_reg(frame, d, out, ex, "b32")


def h_vote(it, warp, frame, ins, info, ex):
    d, a, mm = ins.operands
    members = _member_mask(it, warp, frame, mm, ex) & ex
    p = [x & 1 for x in it.read(warp, frame, a, "pred")]
    lanes = lanes_of(members)
    if info.mode == "ballot":
        v = sum(p[i] << i for i in lanes)
        it.write_reg(frame, d, [v] * LANES, ex, "b32")
        return
    if info.mode == "any":
        r = int(any(p[i] for i in lanes))
    elif info.mode == "all":
        r = int(all(p[i] for i in lanes))
    else:
        r = int(len({p[i] for i in lanes}) <= 1)
    it.write_reg(frame, d, [r] * LANES, ex, "pred")


def h_match(it, warp, frame, ins, info, ex):
    d, a, mm = ins.operands
    members = _member_mask(it, warp, frame, mm, ex) & ex
    v = it.read(warp, frame, a, info.type)
    lanes = lanes_of(members)
    if info.mode == "any":
        out = [sum(1 << j for j in lanes if v[j] == v[i]) for i in range(LANES)]
        it.write_reg(frame, d, out, ex, "b32")
        return
    same = len({v[j] for j in lanes}) <= 1
    out = [members if same else 0] * LANES
    if isinstance(d, Pair):
        it.write_reg(frame, d.first, out, ex, "b32")
        it.write_reg(frame, d.second, [int(same)] * LANES, ex, "pred")
    else:
        it.write_reg(frame, d, out, ex, "b32")
