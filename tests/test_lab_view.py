"""The lab's data layer (`qwengpu.lab`): snapshots checked by hand against the suite's dot,
nested_divergence and shared_reduce launches, the replay against the interpreter's live state on the
whole suite, faults, and the model-side record format (decoded from a real compiled GDN memory)."""
import numpy as np
import pytest

from qwengpu import suite
from qwengpu.interp.interpreter import Interpreter
from qwengpu.lab import (EngineUnavailable, Field, GDNState, LaunchView, MachineState, MemoryMap, ModelRecord,
                         ModelTrace, decode_state, fmt_all, trace_launch)
from qwengpu.ptx.parser import parse_ptx
from qwengpu.ptx.isa import validate_module


def view_of(name, **kw):
    k = suite.get(name)
    return trace_launch(k.ptx(), k.spec(), **kw)


# -- dot: one warp, straight line ---------------------------------------------------------------


def test_dot_positions_and_registers():
    v = view_of("dot", names=["a", "b", "out"])
    assert v.n_steps == 15 and len(v) == 16
    s0 = v.snapshot(0)
    assert s0.pc == 0 and s0.changed_regs == {} and s0.last is None
    assert s0.lane_state == ["active"] * 4 and s0.tids == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]
    assert all(not r.written and r.values == [0, 0, 0, 0] for r in s0.regs)
    assert [r.name for r in s0.regs] == ["%r1", "%r2", "%r3", "%r4", "%r5", "%rd1", "%rd2", "%rd3", "%rd4",
                                        "%rd5", "%rd6", "%rd7", "%rd8", "%rd9"]
    s1 = v.snapshot(1)                       # ld.param.u64 %rd1, [param_0] ran
    assert s1.changed_regs == {"%rd1": 0b1111}
    assert s1.reg("%rd1").values == [0x1000] * 4 and s1.reg("%rd1").pointers == ["a"] * 4
    s9 = v.snapshot(9)                       # next: ld.global.u32 %r2, [%rd8]
    assert s9.next.text == "ld.global.u32  %r2, [%rd8];"
    addr = [o for o in s9.next.operands if o.role == "addr"][0]
    assert addr.addresses == [("a", 0, 0x1000), ("a", 4, 0x1004), ("a", 8, 0x1008), ("a", 12, 0x100C)]
    a = s9.region("a")
    assert sorted(a.access) == list(range(16))          # the 4 words the load touches
    assert a.pointers[4] == ["%rd8 l1"]
    s13 = v.snapshot(13)                     # next: the atomic add; %r4 = a[i]*b[i]
    assert s13.reg("%r4").values == [2, 6, 12, 12]
    src = [o for o in s13.next.operands if o.text == "%r4"][0]
    assert src.values == [2, 6, 12, 12]
    s14 = v.snapshot(14)
    assert s14.changed_regs == {"%r5": 0b1111}
    assert s14.reg("%r5").values == [0, 2, 8, 20]        # old values, lane by lane
    out = s14.region("out")
    assert out.changed == [0, 1, 2, 3] and np.frombuffer(out.data, np.int32)[0] == 32
    end = v.snapshot(15)
    assert end.finished and end.next is None and end.lane_state == ["exited"] * 4
    assert v.memory_at(15)["global:out"] == np.int32(32).tobytes()


def test_formats():
    assert fmt_all(0xFFFFFE40, "b32") == {"hex": "0xfffffe40", "dec": "-448", "float": "nan"} or \
        fmt_all(0xFFFFFE40, "b32")["dec"] == "-448"
    assert fmt_all(0x3F800000, "f32") == {"hex": "0x3f800000", "dec": "1065353216", "float": "1"}
    assert fmt_all(0xFFFFFFFF, "u32")["dec"] == "4294967295"
    assert fmt_all(1, "pred") == {"hex": "1", "dec": "1", "float": "true"}
    assert fmt_all(0x4000000000000000, "f64")["float"] == "2.0"


# -- nested_divergence: masks and the SIMT stack ------------------------------------------------


def test_nested_divergence_branch_and_reconvergence():
    v = view_of("nested_divergence")
    assert v.n_steps == 219
    s = v.snapshot(16)                       # @%p4 bra $L__BB0_3: lanes 1, 3 (even values) take it
    assert s.pc == 16 and s.next.executed == 0b1010
    assert s.lane_state == ["guarded", "active", "guarded", "active"]
    guard = s.next.operands[0]
    assert guard.role == "guard" and guard.values == [0, 1, 0, 1]
    s = v.snapshot(17)                       # diverged: lanes 0, 2 run first (lowest pc on top)
    assert s.stack == [(34, 15, None), (18, 10, 34), (17, 5, 34)]
    assert s.lane_state == ["active", "waiting", "active", "waiting"]
    s = v.snapshot(26)                       # selp wrote %r18 in lanes 0, 2 only
    assert s.changed_regs == {"%r18": 0b0101}
    assert s.reg("%r18").values == [1, 0, 3, 0]
    t = v.find_pc(34, 17)                    # reconvergence: the whole warp at pc 34 again
    assert t == 34 and v.snapshot(t).lane_state == ["active"] * 4 and len(v.snapshot(t).stack) == 1
    assert v.next_break(0, [34]) == 34 and v.next_break(34, [34]) > 34
    s = v.snapshot(120)
    assert s.warp == 1 and s.tids[0] == (4, 0, 0)


# -- shared_reduce: shared memory per block, barriers, two warps ---------------------------------


def test_shared_reduce_shared_memory():
    v = view_of("shared_reduce", names=["x", "out"])
    s = v.snapshot(13)                       # next: st.shared.u32 [%r3], %r6 (warp 0)
    sh = s.region("shared")
    assert sh.region.size == 32 and sh.region.variables == [("s", 0, 32)]
    assert sorted(sh.access) == list(range(16)) and sh.pointers[4] == ["%r3 l1"]
    s = v.snapshot(14)
    assert s.region("shared").changed == list(range(16))
    assert np.frombuffer(s.region("shared").data, np.int32)[:4].tolist() == [213, 4, -448, 380]
    s = v.snapshot(15)                       # warp 0 waits at bar.sync; warp 1 runs
    assert (s.warp, s.pc) == (1, 0)
    s = v.snapshot(32)                       # after the first tree step's loads
    assert s.warp == 0 and s.stack == [(21, 15, None), (17, 15, 21)]
    # block 1 starts with its own (zeroed) shared memory
    first_b1 = next(i for i, st in enumerate(v.steps) if st.block == 1)
    s = v.snapshot(first_b1)
    assert s.block == 1 and s.region("shared").data == bytes(32)
    end = v.memory_at(v.n_steps)
    assert np.frombuffer(end["global:out"], np.int32).tolist() == suite.get("shared_reduce").expected()[1].tolist()


# -- the replay equals the interpreter's live state, whole suite ----------------------------------


class _Spy(Interpreter):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.seen = []

    def _execute(self, warp, frame, top, ins, pc, mask, ex):
        self.seen.append({k: list(v) for k, v in frame.regs.items()})
        return super()._execute(warp, frame, top, ins, pc, mask, ex)


def test_replay_matches_live_interpreter_on_the_suite():
    checked = 0
    for k in suite.kernels():
        m = validate_module(parse_ptx(k.ptx()))
        spec = k.spec()
        it = _Spy(m, spec, trace=True)
        res = it.run()
        v = LaunchView(m, spec, it.trace, result=res)
        for i, want in enumerate(it.seen):
            assert v._before[i].regs == want, (k.name, i, v.steps[i].text)
        end = v.memory_at(v.n_steps)
        for j, buf in enumerate(res.buffers):
            if buf is not None:
                assert end[f"global:arg{j}"] == buf.tobytes(), (k.name, j)
        for t in range(0, len(v), max(1, len(v) // 5)):
            v.snapshot(t)
        checked += 1
    assert checked == len(suite.kernels()) >= 49


# -- faults ---------------------------------------------------------------------------------------


def test_a_faulting_launch_keeps_its_trace():
    k = suite.get("dot")
    spec = k.spec()
    spec.args[2].data = np.zeros(0, np.int32)      # `out` has no element: the atomic add faults
    v = trace_launch(k.ptx(), spec)
    assert v.fault is not None and v.result is None
    s = v.snapshot(v.n_steps - 1)
    assert s.next.faults and s.fault and "atom" in s.next.text
    assert v.snapshot(v.n_steps).finished


def test_model_engine_is_a_clear_error_until_it_exists():
    k = suite.get("dot")
    with pytest.raises(EngineUnavailable, match="model engine"):
        trace_launch(k.ptx(), k.spec(), engine="model")
    with pytest.raises(ValueError):
        trace_launch(k.ptx(), k.spec(), engine="gpu")


# -- the model-side record format --------------------------------------------------------------


def _encode_words(words: dict, rows: int, width: int, level: float = 32.0) -> np.ndarray:
    """A [1, rows, 2*width] state holding words dual-rail (what GDNMemory writes): test input for the
    decoder, not model output."""
    s = np.zeros((1, rows, 2 * width))
    for slot, w in words.items():
        for j in range(width):
            s[0, slot, 2 * j + (0 if w >> j & 1 else 1)] = level
    return s


def test_decode_dual_rail_state():
    state = _encode_words({0: 0xA5, 3: 0x7E}, 4, 8)
    mm = MemoryMap("ram", ["s0", "s1", "s2", "s3"], [Field(0, 0, 8)], 8)
    dec = decode_state(state, mm)
    assert [d.value for d in dec] == [0xA5, None, None, 0x7E]
    assert dec[0].margin == 32.0 and dec[1].margin == float("inf")
    # two fields in two value heads (a 16-bit word as bytes)
    st = np.concatenate([_encode_words({1: 0x34}, 2, 8), _encode_words({1: 0x12}, 2, 8)])
    mm2 = MemoryMap("w16", ["a", "b"], [Field(0, 0, 8), Field(1, 8, 8)], 16)
    assert [d.value for d in decode_state(st, mm2)] == [None, 0x1234]


def test_consistency_check_and_model_snapshot():
    v = view_of("dot")
    st = v.snapshot(14)
    good = MachineState(pc=st.pc, active=15, regs={"%r5": [0, 2, 8, 20]}, memory={0x1020: 32})
    bad = MachineState(pc=13, regs={"%r4": [2, 6, 12, 13]})
    att = {1: np.full((2, 15), 1 / 15)}
    recs = [ModelRecord(i, i, f"t{i}", position=i + 1 if i < 15 else None) for i in range(15)]
    for r in recs:
        r.attention = {1: np.full((2, r.index + 1), 1 / (r.index + 1))}
    recs[13].machine = good
    recs[13].gdn = {0: GDNState(0, _encode_words({0: 32}, 4, 8), [MemoryMap("out", ["w0", "w1", "w2", "w3"],
                                                                            [Field(0, 0, 8)], 8)])}
    mt = ModelTrace([f"t{i}" for i in range(15)], recs)
    v2 = LaunchView(v.module, v.spec, type("T", (), {"steps": v.steps})(), model=mt)
    ms = v2.snapshot(14).model
    assert ms.consistent is True and ms.first_mismatch is None and ms.checked == 1
    assert ms.attention[1].shape == (2, 14, 14) and ms.attention[1].dtype == np.uint8
    assert ms.gdn[0]["decoded"]["out"][0].value == 32
    recs[12].machine = bad                    # position 13: %r4 is [2, 6, 12, 12]
    v3 = LaunchView(v.module, v.spec, type("T", (), {"steps": v.steps})(), model=ModelTrace(mt.tokens, recs))
    ms = v3.snapshot(14).model
    assert ms.first_mismatch is not None and ms.first_mismatch.what == "reg %r4 lane 3"
    assert ms.first_mismatch.position == 13 and ms.first_mismatch.got == 13 and ms.consistent is True
    assert v3.snapshot(5).model.first_mismatch is None      # not yet reached
    assert v3.snapshot(13).model.consistent is False
    del att


def test_decoder_reads_a_real_gdn_memory():
    """Write words through a real compiled Qwen3.5 GDN layer and read its recurrent state back."""
    import torch
    from qwengpu.compiler import Program, compile_program, memory
    from qwengpu.lab import memory_map_of, recurrent_state

    prog = Program("ram")
    addr = prog.input_onehot("addr", 8)
    val = prog.input_bits("val", 8)
    we = prog.input_bits("we", 1)
    words = {3: 0xA5, 5: 0x3C, 0: 0x01}
    seq = []
    for slot, w in [(3, 0x11), (5, 0x3C), (0, 0x01), (3, 0xA5)]:
        prog.token(f"w{slot}={w}", addr=slot, val=w, we=1)
        seq.append(f"w{slot}={w}")
    prog.token("nop", addr=6, val=0xFF, we=0)
    seq.append("nop")
    ram = memory.GDNMemory(prog, "ram", slots=8, width=8)
    ram.write(addr, val, enable=we)
    ram.read(addr, name="rd")
    c = compile_program(prog)
    model = c.model()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[c.token_id(t) for t in seq]]), use_cache=True)
    state = recurrent_state(out.past_key_values, ram.layer)
    dec = decode_state(state, memory_map_of(ram))
    assert {d.slot: d.value for d in dec if d.value is not None} == words
    assert min(d.margin for d in dec if d.value is not None) > 16
