"""The warp and lane timeline (`qwengpu.lab.timeline`): every warp's lanes at every position, on
the interpreter (divergence, guards, barriers of the suite's kernels, checked against the
snapshots' own lane words) and in the payload and static HTML the inspector draws."""
from qwengpu import suite
from qwengpu.lab import trace_launch
from qwengpu.lab.payload import program_payload
from qwengpu.lab.timeline import STATES, timeline

#: the interpreter snapshot's word for the focus warp's lanes, as the timeline names them
SAME = {"active": "running", "guarded": "guarded", "waiting": "diverged", "exited": "exited", "absent": "absent"}


def view_of(name):
    k = suite.get(name)
    return trace_launch(k.ptx(), k.spec())


def test_divergence_and_reconvergence():
    v = view_of("nested_divergence")
    tl = timeline(v)
    assert tl.positions == len(v) and tl.warps == 2 and tl.unit == "step"
    assert tl.row(16, 0) == ["guarded", "running", "guarded", "running"]     # @%p4 bra: lanes 1, 3 take it
    assert tl.row(17, 0) == ["running", "diverged", "running", "diverged"]   # lanes 0, 2 first
    assert tl.row(17, 1) == ["ready"] * 4                                     # warp 1 waits for its turn
    assert tl.row(34, 0) == ["running"] * 4                                   # reconverged at pc 34
    assert (17, "diverged", 0, "warp 0 diverges: lanes 1, 3 wait for the others") in tl.events
    assert (34, "reconverged", 0, "warp 0 reconverges: its live lanes run together again") in tl.events
    for t in range(v.n_steps):                    # the focus warp as the snapshot says, at every step
        s = v.snapshot(t)
        assert tl.row(t, s.warp) == [SAME[x] for x in s.lane_state], t
    assert tl.row(len(v) - 1, 0) == ["exited"] * 4


def test_barriers_wait_and_open():
    """shared_reduce: warp 0 waits at `bar.sync` while warp 1 runs up to it; the barrier opens when
    the last warp arrives (both ready again); block 1 starts over."""
    v = view_of("shared_reduce")
    tl = timeline(v)
    assert tl.row(15, 0) == ["barrier"] * 4 and tl.row(15, 1) == ["running"] * 4
    assert tl.row(30, 0) == ["running"] * 4 and tl.row(30, 1) == ["ready"] * 4    # warp 1 arrived last: open
    kinds = [(t, k, w) for t, k, w, _ in tl.events]
    assert (15, "barrier", 0) in kinds and (30, "release", 0) in kinds
    assert not any(k == "barrier" and w == 1 and t == 30 for t, k, w in kinds)
    first_b1 = tl.blocks.index(1)
    assert tl.row(first_b1, 0) == ["running"] * 4 and tl.row(first_b1 - 1, 0) == ["exited"] * 4
    p = program_payload(v)["timeline"]
    assert p["states"] == list(STATES) and p["positions"] == len(v) and len(p["codes"]) == len(v) * 8
    assert p["codes"][15 * 8:16 * 8] == "55551111" and p["blocks"][first_b1] == 1


def test_the_inspector_draws_it():
    from qwengpu_widgets import Inspector
    k = suite.get("nested_divergence")
    w = Inspector(k.ptx(), k.spec(), position=17)
    tl = w.program["timeline"]                  # what the card draws (in a browser: tests/test_browser.py)
    assert tl["positions"] == w.program["positions"] == 220 and tl["unit"] == "step"
    assert any(t <= 17 and text.startswith("warp 0 diverges: lanes 1, 3") for t, _, _, text in tl["events"])


def test_barriers_on_the_model():
    """shared_reduce on the compact engine: a lane at a barrier waits while its epoch is the
    machine's; after the `<release>` pass it is ready again (the lane table keeps its barrier bit
    with the old epoch), as on the interpreter."""
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)
    k = suite.get("shared_reduce")
    v = trace_launch(k.ptx(), k.spec(), engine="compact")
    tl = timeline(v)
    release = next(t for t in range(len(v)) if v.snapshot(t).label.kind == "barrier release")
    assert tl.row(release - 1, 0) == ["barrier"] * 4                  # warp 0 waited ...
    assert tl.row(release, 0) == ["ready"] * 4 and tl.row(release, 1) == ["ready"] * 4   # ... until the release
    assert v.snapshot(release).lane_state == ["ready"] * 4
    shared = v.snapshot(release).region("shared").region     # by its space, in the kernel's element type
    assert (shared.dtype, shared.size) == ("int32", 32)
    kinds = {(k, w) for _, k, w, _ in tl.events}
    assert {("barrier", 0), ("release", 0), ("barrier", 1), ("release", 1), ("diverged", 0)} <= kinds


def test_shuffles_lane_to_lane_and_atomics_serialised():
    """Every shuffle of the suite's shuffle kernels: each destination lane's result (the
    interpreter's, a step later) is its source lane's value; modes up, down, bfly, idx. An atomic
    of several lanes: its lanes in the order served, with what each wrote (dot: 2, 8, 20, 32)."""
    from qwengpu.lab.exchanges import shuffle_sources
    seen = set()
    for name in ("shfl_xor_reduce", "shfl_up_down", "shfl_idx", "shfl_64"):
        k = suite.get(name)
        v = trace_launch(k.ptx(), k.spec())
        tl = timeline(v)
        shuffles = [x for x in tl.exchanges if x.kind == "shuffle"]
        assert shuffles and len(shuffles) == sum(s.text.startswith("shfl") for s in v.steps), name
        for x in shuffles:
            ins = v.snapshot(x.position).next
            a = [o for o in ins.operands if o.role == "src"][0].values
            dst = ins.operands[0].text
            after = v.snapshot(x.position + 1).reg(dst).values
            for src, d in x.lanes:
                assert after[d] == a[src], (name, x.position, src, d)
            seen.add(x.words.split("(")[1].split(")")[0])
            assert (x.position, "shuffle", x.warp, x.words) in tl.events
    assert seen == {"up", "down", "bfly", "idx"}
    assert shuffle_sources("bfly", [1] * 4, [0x1F] * 4, 0b0101) == [1, None, 3, None]
    assert shuffle_sources("up", [1] * 4, [0] * 4, 0b1111) == [0, 0, 1, 2]      # lane 0 has no lane below: itself
    k = suite.get("dot")
    v = trace_launch(k.ptx(), k.spec())
    (x,) = timeline(v).exchanges
    assert (x.position, x.kind, x.lanes) == (13, "atomic", [0, 1, 2, 3]) and "writing 2, 8, 20, 32 in turn" in x.words
    p = program_payload(v)["timeline"]
    assert p["exchanges"] == [[13, "atomic", 0, [0, 1, 2, 3]]]


def test_an_atomic_on_the_model_serves_one_lane_a_pass():
    """dot's atomicAdd on the compact engine: four execute passes of the atomic bundle, serving
    lanes 0, 1, 2, 3 one after another (the exchanges carry the lanes served so far)."""
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)
    k = suite.get("dot")
    v = trace_launch(k.ptx(), k.spec(), engine="compact")
    xs = timeline(v).exchanges
    assert [x.lanes for x in xs] == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]] and {x.kind for x in xs} == {"atomic"}
    for x in xs:
        assert v.pass_label(x.position).kind == "execute" and v.pass_label(x.position).lanes[0] == x.lanes[-1]
    assert "serves lane 3 (4 of 4: one lane a pass)" in xs[-1].words
