"""The memory views of large memories (`qwengpu.lab.memory_pages`, the inspector's memory API): a
16 KiB global launch and 4 KiB of shared memory on the interpreter, paged (the page the launch
writes, the written rows elsewhere, a page asked for by address), searched in the kernel's own
types, the latest write found; the payload per position follows the page, not the memory; and the
same pages on the compact engine's view (the machine's memory decoded from the model)."""
import json

import numpy as np
import pytest
from qwengpu_widgets import Inspector

from qwengpu.lab import trace_launch
from qwengpu.lab.memory_pages import (MAX_HITS, PAGE_ROWS, ROW_BYTES, MemoryPages, find_value, pages_of,
                                      parse_address)
from qwengpu.lab.payload import snapshot_payload

#: four threads copy one element each through shared memory, 4 KB apart in 16 KiB buffers
SCATTER = r'''
__global__ void scatter(const int *in, int *out) {
  __shared__ int s[1024];
  int i = threadIdx.x;
  s[i * 250 + 3] = in[i * 1000 + 7];
  __syncthreads();
  out[i * 1000 + 7] = s[i * 250 + 3] * 3 + 1;
}
'''
N = 4096                                            # int32 elements: 16 KiB


def scatter_spec():
    return {"kernel": "scatter", "grid": [1, 1, 1], "block": [4, 1, 1],
            "args": [{"buffer": "int32", "data": list(range(N))}, {"buffer": "int32", "data": [0] * N}]}


@pytest.fixture(scope="module")
def scatter():
    return trace_launch(SCATTER, scatter_spec(), names=["in", "out"])


def _store_position(view) -> int:
    """The position right after the store into `out` (the step that wrote it)."""
    (p,) = [p for p in range(1, len(view)) if "global:out" in pages_of(view).written(p)]
    return p


def test_find_value_in_the_kernels_types():
    ints = np.array([5, -7, 301, -7, 0x7fffffff], np.int32).tobytes()
    assert find_value(ints, "int32", "-7") == [4, 12]
    assert find_value(ints, "int32", "0xfffffff9") == [4, 12]           # a hex literal: the bit pattern
    assert find_value(ints, "int32", "0x7fffffff") == [16] and find_value(ints, "int32", "99") == []
    assert find_value(ints, "uint32", "4294967289") == [4, 12]
    floats = np.array([0.1, 1.0, np.nan, -2.5], np.float32).tobytes()
    assert find_value(floats, "float32", "0.1") == [0]                 # rounded to float32 as stored
    assert find_value(floats, "float32", "0x3f800000") == [4]          # 1.0's bits
    assert find_value(floats, "float32", "nan") == [8] and find_value(floats, "float32", "-2.5") == [12]
    # a value that is not an element of the type: its little-endian bytes, at any offset
    raw = bytes([1, 2]) + np.int32(301).tobytes() + bytes(3)
    assert find_value(raw, "uint8", "301") == [2] and find_value(raw, "uint8", "2") == [1]
    with pytest.raises(ValueError, match="not a value of int32"):
        find_value(ints, "int32", "seven")
    assert parse_address("0x5ffc") == parse_address("5ffc") == 0x5FFC
    with pytest.raises(ValueError):
        parse_address("out")


def test_pages_follow_the_writes_and_carry_the_rows_written_elsewhere(scatter):
    v = scatter
    pages = MemoryPages(v)
    p = _store_position(v)
    written = pages.written(p)["global:out"]
    assert written == [o + b for o in (28, 4028, 8028, 12028) for b in range(4)]
    page = pages.page(p, "global:out")
    assert page.follow and page.offset == 0 and page.rows == PAGE_ROWS and page.count == N * 4 // (PAGE_ROWS * ROW_BYTES)
    assert pages.page(p, "global:out", at=8030).offset == 8030 // 128 * 128 and not pages.page(p, "global:out", at=0).follow
    assert pages.page(p, "global:out", at=10 ** 9).index == page.count - 1     # clamped to the last page
    snap = v.snapshot(p)
    (out,) = [m for m in snapshot_payload(snap, v)["memory"] if m["key"] == "global:out"]
    end = v.memory_at(p)["global:out"]
    assert out["offset"] == 0 and out["hex"] == end[:128].hex() and out["changed"][:4] == [28, 29, 30, 31]
    assert [o for o, _ in out["rows"]] == [4024, 8024, 12024]                   # the rows written elsewhere
    assert all(bytes.fromhex(h) == end[o:o + ROW_BYTES] for o, h in out["rows"])
    assert np.frombuffer(bytes.fromhex(out["rows"][2][1]), np.int32)[1] == 3007 * 3 + 1
    assert set(out["changed"]) == set(written) and out["written"] == 16
    assert out["last_write"] == {"pos": p, "offset": 28}
    # a step later nothing is written: the page stays at the latest write, which stays reachable
    (after,) = [m for m in snapshot_payload(v.snapshot(p + 1), v)["memory"] if m["key"] == "global:out"]
    assert after["changed"] == [] and after["rows"] == [] and after["last_write"] == {"pos": p, "offset": 28}
    # shared memory: 4 KiB in the kernel's int32, written before the barrier
    (sp,) = [q for q in range(1, len(v)) if "shared:0" in pages.written(q)]
    assert pages.last_write(len(v) - 1, "shared:0") == (sp, 12) and pages.last_write(sp - 1, "shared:0") is None
    assert pages.region("shared:0").dtype == "int32" and pages.find(len(v) - 1, "shared:0", "3007") == [3012]


def test_the_payload_per_position_follows_the_page_not_the_memory(scatter):
    """A position's JSON: every region's page, not its 16 KiB; the page and its neighbours exact."""
    v = scatter
    for p in range(len(v)):
        paged = snapshot_payload(v.snapshot(p), v)
        whole = snapshot_payload(v.snapshot(p))                 # without the view: the snapshot's windows
        assert all(len(m["hex"]) <= 2 * PAGE_ROWS * ROW_BYTES for m in paged["memory"])
        assert len(json.dumps(paged["memory"])) < 3_000 < 24_000 < len(json.dumps(whole["memory"]))
    settings = {"global:in": {"at": 12000}, "shared:0": {"find": "3007", "hit": 0}}
    last = len(v) - 1
    mem = {m["key"]: m for m in snapshot_payload(v.snapshot(last), v, settings, rows=32)["memory"]}
    whole = v.memory_at(last)
    assert mem["global:in"]["offset"] == 12000 // 256 * 256 and not mem["global:in"]["page"]["follow"]
    assert bytes.fromhex(mem["global:in"]["hex"]) == whole["global:in"][11776:12032]
    sh = mem["shared:0"]
    assert sh["find"] == {"query": "3007", "hits": [3012], "count": 1, "error": None, "hit": 0}
    assert sh["mark"] == 3012 and sh["offset"] == 3012 // 256 * 256
    bad = snapshot_payload(v.snapshot(last), v, {"global:out": {"find": "x"}})["memory"]
    assert next(m for m in bad if m["key"] == "global:out")["find"]["error"].startswith("'x' is not a value")


def test_the_inspector_pages_finds_and_jumps(scatter):
    """The widget's Python API and the trait the page sets: the state sent changes its memory only."""
    w = Inspector(view=scatter)
    w.goto(len(w.view) - 1)
    base = w.memory_page("out")["base"]
    assert w.memory_find("out", 9022) == [base + 12028]
    out = w.memory_page("out")
    assert out["page"]["index"] == 12028 // 128 and out["mark"] == 12028 and out["find"]["hit"] == 0
    assert np.frombuffer(bytes.fromhex(out["hex"]), np.int32)[(12028 - out["offset"]) // 4] == 9022
    assert w.memory_last_write("out") == (_store_position(w.view), base + 28)
    assert w.memory_page("out")["offset"] == 0 and w.memory_page("out")["mark"] == 28
    w.memory_goto("out", f"{base + 8028:x}")              # hex, as the box takes it
    assert w.memory_page("out")["offset"] == 7936 and w.memory_pages["global:out"]["at"] == 8028
    with pytest.raises(ValueError, match="not in out"):
        w.memory_goto("out", base - 4)
    w.memory_follow("out")
    assert w.memory_pages == {"global:out": {"find": "9022"}} and w.memory_page("out")["page"]["follow"]
    regs = w.state["regs"]
    w.memory_pages = {"global:in": {"at": 16000}}                  # as the page's ▶ / go-to do
    assert w.memory_page("in")["offset"] == 16000 // 128 * 128 and w.state["regs"] == regs
    w.memory_rows = 64
    assert w.memory_page("in")["page"] == {"index": 31, "count": 32, "rows": 64, "follow": False}
    w.goto(0)                                                       # pages kept across positions
    assert w.memory_page("in")["offset"] == 15872 and w.memory_page("out")["last_write"] is None
    assert w.memory_last_write("out") is None
    assert len(json.dumps(w.state)) < 10_000


def test_hits_beyond_the_sent_ones_are_counted(scatter):
    w = Inspector(view=scatter, position=0)
    assert len(w.memory_find("out", 0)) == N
    f = w.memory_page("out")["find"]
    assert f["count"] == N and len(f["hits"]) == MAX_HITS and f["hits"][:2] == [0, 4]


RING = r'''
__global__ void ring(int *out) {
  int i = threadIdx.x;
  out[i * 60 + 5] = i + 7;
}
'''


@pytest.fixture(scope="module")
def ring_recorded():
    """ring on the compact engine, recorded live: (two views of the passes so far, as a background
    recording shows them, and the whole launch's view)."""
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)
    from qwengpu.lab.recorder import LiveRecording
    spec = {"kernel": "ring", "grid": [1, 1, 1], "block": [4, 1, 1], "args": [{"buffer": "int32", "data": [0] * 256}]}
    live = LiveRecording()
    views = []
    whole = trace_launch(RING, spec, engine="compact", names=["out"], live=live,
                         on_token=lambda i, text, state: views.append(live.view()) if i in (6, 12) else None)
    early, later = [v for v in views if v is not None]
    return early, later, whole


def test_pages_of_the_compact_engines_view(ring_recorded):
    """The machine's memory decoded from the model's state, paged as the interpreter's: the written
    offsets of each pass are those its snapshot shows, the last write and the search agree."""
    *_, v = ring_recorded
    pages = MemoryPages(v)
    last = len(v) - 1
    end = v.memory_at(last)["global:out"]
    assert np.frombuffer(end, np.int32)[[5, 65, 125, 185]].tolist() == [7, 8, 9, 10]
    assert end == v.snapshot(last).region("out").data
    wrote = [p for p in range(1, len(v)) if pages.written(p).get("global:out")]
    assert wrote and all(pages.written(p)["global:out"] == v.snapshot(p).region("out").changed for p in wrote)
    assert pages.last_write(last, "global:out") == (wrote[-1], pages.written(wrote[-1])["global:out"][0])
    w = Inspector(view=v, position=last)
    assert w.memory_find("out", 10) == [v.regions()[0].base + 185 * 4]
    page = w.memory_page("out")
    assert page["offset"] == 740 // 128 * 128 and page["mark"] == 740 and page["page"]["count"] == 8
    assert len(page["hex"]) == 256


def test_a_recordings_next_view_takes_the_write_index_over(ring_recorded):
    """A live recording shows a new view of the passes so far every second: its pages read only
    the passes the last view had not (the same pass records), and find the same writes."""
    early, later, _ = ring_recorded
    first = pages_of(early)
    first.last_write(len(early) - 1, "global:out")
    assert first._indexed == len(early) - 1
    second = pages_of(later)
    assert second._indexed == first._indexed                        # taken over, not read again
    fresh = MemoryPages(later)
    for p in range(len(later)):
        assert second.last_write(p, "global:out") == fresh.last_write(p, "global:out")
    assert any(fresh.last_write(p, "global:out") for p in range(len(later)))


def test_a_views_pages_go_with_it():
    """pages_of keeps the pages on the view: a dropped view (a live recording's previous one) is
    freed with its pages, not kept by a table."""
    import gc
    import weakref
    v = trace_launch(RING, {"kernel": "ring", "grid": [1, 1, 1], "block": [4, 1, 1],
                            "args": [{"buffer": "int32", "data": [0] * 256}]}, names=["out"])
    assert pages_of(v) is pages_of(v) and pages_of(v).last_write(len(v) - 1, "global:out") is not None
    gone = weakref.ref(v)
    del v
    gc.collect()
    assert gone() is None
