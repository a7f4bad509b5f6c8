"""The lab's data layer (`qwengpu.lab`): snapshots checked by hand against the suite's dot,
nested_divergence and shared_reduce launches, the replay against the interpreter's live state on the
whole suite, faults, engine errors; the model engines' views (dot on the built-in machine's compact
engine: state decoded from the model's GDN memories, checked against the simulator and the
interpreter at every pass, the layers' read/write pattern, a corrupted state flagged); the GDN
decoder on a real compiled GDN memory."""
import numpy as np
import pytest

from qwengpu import suite
from qwengpu.compiler.placement import MemoryPlacement
from qwengpu.interp.interpreter import Interpreter
from qwengpu.lab import (EngineUnavailable, LaunchView, MachineView, decode_state, fmt_all,
                         trace_launch)
from qwengpu.ptx.isa import validate_module
from qwengpu.ptx.parser import parse_ptx


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


def test_engine_errors(monkeypatch):
    k = suite.get("dot")
    with pytest.raises(ValueError, match="unknown engine"):
        trace_launch(k.ptx(), k.spec(), engine="gpu")
    with pytest.raises(TypeError, match="model engines"):
        trace_launch(k.ptx(), k.spec(), machine=object())
    import sys
    monkeypatch.setitem(sys.modules, "torch", None)          # `import torch` raises ImportError
    with pytest.raises(EngineUnavailable, match="needs torch"):
        trace_launch(k.ptx(), k.spec(), engine="compact")


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
    ram = MemoryPlacement("ram", 0, [(0, 0, 8)], 4)
    dec = decode_state(state, ram, ["s0", "s1", "s2", "s3"])
    assert [d.value for d in dec] == [0xA5, None, None, 0x7E] and dec[3].label == "s3"
    assert dec[0].bits == [1, 0, 1, 0, 0, 1, 0, 1]
    assert dec[0].margin == 16.0 and dec[1].margin == float("inf")      # the 1-rail against half the level
    # two fields in two value heads (a 16-bit word as bytes)
    st = np.concatenate([_encode_words({1: 0x34}, 2, 8), _encode_words({1: 0x12}, 2, 8)])
    w16 = MemoryPlacement("w16", 0, [(0, 0, 8), (1, 8, 8)], 2)
    assert [d.value for d in decode_state(st, w16)] == [None, 0x1234]


# -- the model engines: the dot product through the built-in machine's forward passes --------------


@pytest.fixture(scope="module")
def dot_model():
    """dot on the compact engine of the built-in machine (cached under ~/.cache/qwengpu)."""
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)

    from qwengpu.machine.config import BUILTIN
    from qwengpu.runtime.checkpoint import load_machine
    machine = load_machine(BUILTIN, progress=False)
    layers = sorted({pl.layer for pl in machine.placements.values()})
    k = suite.get("dot")
    last = {}

    def keep_states(index, text, state):          # the model's raw states after the last pass
        for L in layers:
            last[L] = state.get_recurrent_state(L)[0].float().numpy().copy()

    v = trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine, names=["a", "b", "out"],
                     on_token=keep_states)
    v.test_final_states = last
    return v


def test_model_decoding_equals_the_compilers(dot_model):
    """Every memory the lab decodes (from the raw rows it kept per pass) equals what the compiler's
    own `decode_memory` reads from the model's final recurrent states, with its `placements`."""
    from qwengpu.compiler.placement import decode_memory
    v = dot_model
    last = v.test_final_states
    assert last, "no recurrent state captured"
    t = len(v) - 1
    for name, pl in v.machine.placements.items():
        want, margin = decode_memory(last[pl.layer], pl)
        got = {d.slot: d.value for d in v.gdn_state(t, name).decode()[name] if d.value is not None}
        assert got == want, name
        assert margin > 15 and abs(margin - v.trace.records[t].margins[name]) < 1e-3, name
    regs = decode_memory(last[v.machine.placements["reg.emit"].layer], v.machine.placements["reg.emit"])[0]
    assert [(regs[8] >> (32 * l)) & 0xFFFFFFFF for l in range(4)] == v.snapshot(t).reg("%r4").values


def test_model_trace_of_dot_agrees_with_simulator_and_interpreter(dot_model):
    v = dot_model
    assert isinstance(v, MachineView) and v.engine == "compact" and len(v) == 19
    c = v.consistency
    assert c["exact"] and c["raw_state_exact"] and c["min_code_margin"] > 15 and c["min_logit_gap"] > 15.9
    assert c["simulator"] == {"tokens_equal": True, "positions": 19, "mismatches": 0, "replay_errors": []}
    it = c["interpreter"]
    assert it["memory"] and it["buffers"] and it["registers"] == 8 and it["register_mismatches"] == 0
    assert all(v.snapshot(t).consistent for t in range(len(v)))
    assert v.trace.first_mismatch() is None
    # the passes: EXEC of bundle 0, four carries of %r2 (a[tid]), bundle 1, four carries of %r4, the atomic adds
    s5 = v.snapshot(5)
    assert s5.input == "<carry 0 0 3 04>" and s5.token == "<exec 1 1111>" and s5.pc == 0
    assert s5.reg("%r2").values == [1, 2, 3, 4] and s5.changed_regs == {"r0": 0b1000}
    assert [c.ok for c in s5.checks] == [True] * 4 and {c.name for c in s5.checks} == {"%r2"}
    s10 = v.snapshot(10)
    assert s10.reg("%r4").values == [2, 6, 12, 12] and s10.bundle.carries == [(0, 1, "%r4")]
    assert "mul.lo.s32" in " ".join(t for _, _, t in v.bundle(1).ptx)
    # memory decoded from the model's GDN memory `mem`, against the interpreter's final memory
    want = v.reference.memory_at(v.reference.n_steps)
    last = v.snapshot(18)
    assert last.finished and last.token == "<halt>"
    assert np.frombuffer(last.region("out").data, np.int32).tolist() == [32]
    assert bytes(last.region("out").data) == bytes(want["global:out"])
    assert np.frombuffer(v.snapshot(12).region("out").data, np.int32).tolist() == [2]     # lane 0's add
    # the raw GDN state holding the register file, decoded: warp 0's r1 is slot 8
    g = v.gdn_state(10, "reg.emit")
    word = {d.slot: d.value for d in g.decode()["reg.emit"] if d.value is not None}[8]
    assert [(word >> (32 * l)) & 0xFFFFFFFF for l in range(4)] == [2, 6, 12, 12]
    assert v.gdn_state(5, "reg.emit").decode()["reg.emit"][8].value is None    # r1 not written yet


def test_model_read_write_pattern_of_dot(dot_model):
    """The GDN layers' key/query selections, from the model's own projections: the fetch reads ROM
    slot pc at every pass of bundle pc; the carries write the register file's slot; stores write
    memory line 2 (0x1020, `out`)."""
    v = dot_model
    row = v.trace.prompt_len - 1                   # the row of the token pass 0 consumed (<go>)
    rom = v.selection("rom.s0")
    for t in range(1, len(v)):
        pc = v._exec_pc[t] if v._exec_pc[t] is not None else None
        if pc is not None:
            assert rom.read_slot[row + t, 0] == pc and rom.read[row + t, 0] > 0.99
    reg = v.selection("reg.emit")
    assert reg.write_slot[row + 2:row + 6].tolist() == [0] * 4 and (reg.write[row + 2:row + 6] > 0.99).all()
    assert reg.write_slot[row + 7:row + 11].tolist() == [8] * 4 and (reg.write[row + 7:row + 11] > 0.99).all()
    assert (reg.write[row + 11:] < 0.01).all() and (reg.write[row:row + 2] < 0.01).all()
    mem = v.selection("mem")
    stores = [t for t in range(len(v)) if v.snapshot(t).input.startswith("<memw")]
    assert stores == [12, 14, 16, 18]
    assert all(mem.write_slot[row + t] == 2 and mem.write[row + t] > 0.99 for t in stores)
    assert all(mem.write[row + t] < 0.01 for t in range(len(v)) if t not in stores)
    W, R = mem.matrix(slice(row, row + len(v)))
    assert W.shape == (19, 256) and W[12, 2] > 0.99 and R[11, 2] > 0.99


def test_passes_say_what_they_are(dot_model):
    """Every pass of dot labelled by what its consumed token makes it do (and what it emitted), with
    the PTX it belongs to; the lanes in one word each, the same in the register header and the lane
    table (the lane table the model holds after the pass)."""
    from qwengpu.lab.payload import machine_snapshot_payload
    v = dot_model
    kinds = [v.snapshot(t).label.kind for t in range(len(v))]
    assert kinds == ["block start", "execute"] + ["carry"] * 4 + ["execute"] + ["carry"] * 4 + \
        ["execute", "memory write"] * 4
    s0 = v.snapshot(0)                           # consumed <go>: no bundle has run yet
    assert s0.label.bundle is None and s0.active == 0 and s0.label.ptx == []
    assert s0.label.text.startswith("block start: block 0") and s0.label.then == "execute bundle 0 for lanes 0, 1, 2, 3"
    assert s0.lane_state == ["ready"] * 4
    s2 = v.snapshot(2)                           # the first carry: %r2 of lane 0, from the load
    assert s2.label.text == "carry byte 0 of r0 (%r2) for lane 0: 01" and s2.label.bundle == 0
    assert [(p, text.split()[0]) for p, _, text in s2.label.ptx] == [(9, "ld.global.u32")]
    assert s2.changed_regs == {"r0": 0b0001}
    s13 = v.snapshot(13)                         # the atomic replayed for lanes 1-3, serving lane 1
    assert s13.label.kind == "execute" and s13.label.lanes == [1, 2, 3]
    assert "the atomic serves lane 1" in s13.label.text
    assert s13.label.then == "memory write byte 0 of lane 1's store: 08"
    assert s13.active == 0b1110                  # the lanes bundle 2 runs for; lane 1 has exited after it
    assert s13.lane_state == ["exited", "exited", "ready", "ready"]
    s12 = v.snapshot(12)
    assert s12.label.kind == "memory write" and s12.label.text.endswith("→ out[0] byte 0")
    assert [text.split()[0] for _, _, text in s12.label.ptx] == ["atom.global.add.u32"]
    assert v.snapshot(18).label.then_kind == "halt"
    for t in range(len(v)):                      # one word per lane, in every panel
        s = v.snapshot(t)
        assert s.lane_state == [word for _, word in s.lanes[s.warp][1]], t
        assert str(s.label).startswith(f"pass {t}: ")
    # a machine with a float unit runs it again for each further lane: an <fpu l> pass
    from qwengpu.lab.passes import describe_token
    kind, words, bundle, lanes, _ = describe_token(v, "<fpu 2>", 1, 0)
    assert (kind, bundle, lanes) == ("float unit", 1, [2]) and words.startswith("float unit: bundle 1's float operation for lane 2")
    st = machine_snapshot_payload(v, s13)
    assert st["what"]["kind"] == "execute" and st["what"]["lanes"] == [1, 2, 3] and st["running"] == 0b1110
    assert st["lane_state"] == ["exited", "exited", "ready", "ready"]


def test_a_faulting_launch_on_the_model():
    """`out` has no element: the atomic faults in the model too; the view keeps every pass up to the
    <fault> token and agrees with the simulator and the interpreter (both faulted)."""
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)
    k = suite.get("dot")
    spec = k.spec()
    spec.args[2].data = np.zeros(0, np.int32)
    v = trace_launch(k.ptx(), spec, engine="compact", names=["a", "b", "out"])
    assert len(v) == 12 and "out-of-bounds global atomic" in str(v.fault)
    last = v.snapshot(11)
    assert last.input == "<exec 2 1111>" and last.token == "<fault 3 0>" and last.finished and last.fault
    assert last.label.then_kind == "fault" and "out-of-bounds global atomic" in last.label.then
    c = v.consistency
    assert c["exact"] and c["interpreter"]["note"] == "both faulted"
    assert c["simulator"]["tokens_equal"] and c["simulator"]["mismatches"] == 0


def test_lowering_loops_are_found_for_the_register_check():
    """The interpreter check skips values carried inside a loop the lowering made of one PTX
    instruction (a retry's old value in a CAS loop) when a later carry of that instruction replaces
    them; user loops are not such loops."""
    from qwengpu import load_program
    from qwengpu.assembler import assemble
    from qwengpu.lab.checks import micro_loop_pcs
    from qwengpu.machine.config import BUILTIN

    def loops(name):
        k = suite.get(name)
        m, spec = load_program(k.ptx()), k.spec()
        fn = m.kernel(spec.kernel)
        return {fn.body[p].text.split()[0] for p in micro_loop_pcs(assemble(m, spec, None, BUILTIN), fn)}

    assert loops("atomic_float_add") == {"atom.global.add.f32"}
    assert loops("collatz") == set() and loops("dot") == set()


def test_a_corrupted_state_shows_up_as_a_mismatch():
    """Flip one bit of %r2 (a[0] = 1 -> 3) in every register-file copy after the carries wrote it:
    the lab decodes the corrupted state, the check against the simulator flags it at that pass,
    and the model then computes with it (the product and the final memory differ from the
    interpreter's)."""
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)

    from qwengpu.compiler.memory import VALUE_L
    k = suite.get("dot")
    hit = []

    def corrupt(index, text, state):
        if index != 5:
            return
        for name, info in infos.items():
            if not name.startswith("reg."):
                continue
            L, h, row, col = info.rail(0, 1)                                  # bit 1 of lane 0 of slot 0 (r0)
            st = state.get_recurrent_state(L)
            st[0, h, row, col] = VALUE_L                                      # 1-rail on
            st[0, h, row, col + 1] = 0.0                                      # 0-rail off
            hit.append(name)

    from qwengpu.machine.config import BUILTIN
    from qwengpu.runtime.checkpoint import load_machine
    machine = load_machine(BUILTIN, progress=False)
    infos = machine.placements
    v = trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine, on_token=corrupt, names=["a", "b", "out"])
    assert "reg.emit" in hit and len(hit) >= 2
    c = v.consistency
    assert not c["exact"]
    fm = v.trace.first_mismatch()
    assert fm.position == 5 and fm.what == "register r0 of warp 0, lane 0" and (fm.expected, fm.got) == (1, 3)
    assert v.snapshot(4).consistent is True and v.snapshot(5).consistent is False
    assert v.snapshot(5).reg("%r2").values == [3, 2, 3, 4]
    assert v.snapshot(5).first_mismatch == fm and v.snapshot(4).first_mismatch is None
    assert c["interpreter"]["memory"] is False                  # out = 3*2 + 6 + 12 + 12 = 36, not 32
    assert np.frombuffer(v.snapshot(len(v) - 1).region("out").data, np.int32).tolist() == [36]
    assert any(m.against == "interpreter" and "out" in m.what for m in v.trace.mismatches)


def test_decoder_reads_a_real_gdn_memory():
    """Write words through a real compiled Qwen3.5 GDN layer and read its recurrent state back."""
    import torch

    from qwengpu.compiler import Program, compile_program, memory
    from qwengpu.lab import recurrent_state

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
    dec = decode_state(state, c.placement(ram))
    assert {d.slot: d.value for d in dec if d.value is not None} == words
    assert min(d.margin for d in dec if d.value is not None) > 15.9        # of 16: the 1-rail against half the level


def test_shared_memory_in_the_kernels_own_element_type():
    """nvcc declares a `__shared__ int s[8]` as bytes (`.b8 s[32]`): the memory card decodes it as
    the kernel uses it (its shared loads, stores and atomics), int32[8]; floats as float32; a
    kernel that moves bytes, or mixes element types, as bytes."""
    from qwengpu.lab.payload import snapshot_payload
    want = {"shared_reduce": ("int32", 32), "atomics_shared": ("int32", 32), "matmul_tile4": ("float32", 128),
            "byte_shared": ("uint8", 16), "atomics_shared_more": ("uint8", 64)}
    for name, (dtype, size) in want.items():
        k = suite.get(name)
        v = trace_launch(k.ptx(), k.spec())
        (shared, *_) = [r for r in v.regions() if r.space == "shared"]
        assert (shared.dtype, shared.size) == (dtype, size), name
    k = suite.get("shared_reduce")
    v = trace_launch(k.ptx(), k.spec())
    st = snapshot_payload(v.snapshot(len(v) - 1))
    (mem,) = [m for m in st["memory"] if m["space"] == "shared"]
    assert mem["dtype"] == "int32" and mem["size"] // 4 == 8
