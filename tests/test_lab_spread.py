"""The lab on a machine whose memories are split: TINY compiled for a base's fixed GDN geometry
(`fitting_text_config`'s default: key heads of 128 dims, as Qwen3.5-2B's), where a memory of more
than 128 slots is held in banks of key heads and a large one over several layers
(`qwengpu.compiler.placement.key_banks`). The recorder, the decoded views, the slot selections, the
raw GDN block and the inspector put the pieces together; every word equals the compiler's decoder
(`decode_memory`) on the model's own states."""
import numpy as np
import pytest

from qwengpu import suite
from qwengpu.compiler.placement import decode_memory
from qwengpu.lab import slot_label, trace_launch
from qwengpu.lab.payload import gdn_payload, selection_payload
from qwengpu.runtime.readback import MachineReader
from qwengpu.splice import fixtures
from qwengpu.splice.machine_splice import fitting_text_config, machine_for_geometry
from qwengpu_widgets import Inspector

V = 416


@pytest.fixture(scope="module")
def machine(module_tmp):
    base = fixtures.write_random_base(module_tmp("spread") / "b", fitting_text_config("tiny", V), tokenizer="none")
    return machine_for_geometry(str(base), "tiny")


@pytest.fixture(scope="module")
def dot(machine):
    k = suite.get("dot")
    return trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine, names=["a", "b", "out"])


def _spread(placements):
    banked = [n for n, pl in placements.items() if pl.banks > 1]
    layered = [n for n, pl in placements.items() if len(pl.layers) > 1]
    return banked, layered


def test_the_geometry_splits_memories_over_banks_and_layers(machine):
    placements = machine.placements
    banked, layered = _spread(placements)
    assert "mem" in banked and layered, (banked, layered)
    for name in banked + layered:
        pl = placements[name]
        assert pl.pieces is not None
        # every bit of every slot sits in exactly one piece (port 0's copy)
        cover = np.zeros((pl.slots, pl.width), int)
        for L, h, lo, w, s0, n in pl.all_pieces():
            cover[s0:s0 + n, lo:lo + w] += 1
        assert (cover == 1).all(), name
        # every port has a key head for every bank
        for keys in pl.port_keys():
            assert {s0 for _, _, s0 in keys} == {pc[4] for pc in pl.all_pieces()}
    assert placements["mem"].where.startswith("L") and "-" in placements[layered[0]].where
    assert placements["mem"].rail(200, 5)[2] == 200 - 128          # slot 200's bit 5: row 72 of the second bank


def test_a_launch_is_recorded_exactly_and_decoded_as_the_compiler_decodes(dot, machine):
    """Every memory's words after the last pass, as the lab decodes them (the recorder's machine
    state and the raw block it rebuilds), equal the compiler's decoder on the model's own final
    states (the runtime's reader of the machine state, for the record's state); the
    recorder's incremental decoding (only the slots a pass moved) equals a full decode after every
    pass (a user's hook turns the increments off)."""
    tr = dot.trace
    assert dot.consistency["exact"] and tr.raw_exact, dot.consistency
    final = {}

    def keep(index, text, state):
        final.clear()
        final.update({L: state.get_recurrent_state(L)[0].float().numpy().copy() for L in tr.gdn_layers})

    k = suite.get("dot")
    full = trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine, names=["a", "b", "out"], on_token=keep)
    assert full.consistency["exact"]
    assert [r.machine for r in full.trace.records] == [r.machine for r in tr.records]
    last = len(dot) - 1
    assert MachineReader(machine.placements).state(final) == tr.records[last].machine
    for name in tr.memories:
        want = decode_memory(lambda L: final[L], machine.placements[name])[0]
        assert {d.slot: d.value for d in dot.gdn_state(last, name).decode()[name] if d.value is not None} == want, name
    assert int.from_bytes(dot.snapshot(last).region("out").data[:4], "little") == 32


def test_selections_name_the_slot_in_its_bank(dot):
    """mem (256 lines in two banks of 128 slots): every line a token writes holds a word at the end,
    and reads select lines that were written, whichever bank's key head holds them."""
    tr = dot.trace
    s = dot.selection("mem")
    info = tr.memories["mem"]
    written = set(s.write_slot[s.write > 0.5].tolist())
    read = set(s.read_slot[s.read > 0.5].tolist())
    assert written and read and max(written | read) < info.slots
    final = {d.slot for d in dot.gdn_state(len(dot) - 1, "mem").decode()["mem"] if d.value is not None}
    assert written <= final and read <= final
    sp = selection_payload(dot, len(dot) - 1, ["mem", "reg.emit"])
    assert [m["where"] for m in sp["mems"]] == [info.where, tr.memories["reg.emit"].where]


def test_shared_memory_lines_live_in_the_second_bank(machine):
    """Shared memory is lines 128..191 of mem: its second bank's key heads. A reduction through it
    is recorded exactly, its stores select lines of that bank and the decoded memory holds them."""
    k = suite.get("shared_reduce")
    view = trace_launch(k.ptx(), k.spec(), engine="compact", machine=machine)
    assert view.consistency["exact"], view.consistency
    s = view.selection("mem")
    high = {x for x in s.write_slot[s.write > 0.5].tolist() if x >= 128}
    assert high and all(slot_label("mem", x).startswith("shared") for x in high)
    words = {d.slot for d in view.gdn_state(len(view) - 1, "mem").decode()["mem"] if d.value is not None}
    assert high <= words


def test_the_raw_block_puts_banks_and_layers_together(dot):
    tr = dot.trace
    banked, layered = _spread(tr.memories)
    for name in {"mem", *layered}:
        info = tr.memories[name]
        g = gdn_payload(dot, len(dot) - 1, name)
        assert g["where"] == info.where and g["fields"] == len(info.spans)
        assert g["banks"] == info.banks
        block = dot.gdn_state(len(dot) - 1, name).state
        assert block.shape[:2] == (len(info.spans), info.slots)
        for L, h, lo, w, s0, n in info.all_pieces()[:3]:      # a piece's rows are its head's rows in its layer
            f = info.spans.index((lo, w))
            base = tr.base_raw[L][h, :n]
            assert np.array_equal(dot.gdn_state(0, name).state[f, s0:s0 + n], base)
        # stepping back and forth gives the same block
        assert np.array_equal(dot.gdn_state(3, name).state, dot.gdn_state(3, name).state)
        again = dot.gdn_state(len(dot) - 1, name).state
        assert np.array_equal(block, again)


def test_the_inspector_shows_a_spread_memory(dot):
    insp = Inspector(view=dot)
    insp.gdn_memory = "mem"
    insp.goto(len(dot) - 1)
    g = insp.state["gdn"]
    assert g["memory"] == "mem" and g["banks"] == 2 and insp.gdn
    assert g["where"] == dot.trace.memories["mem"].where      # the panel's label ("L15-17"); drawn as in tests/test_browser.py
