"""The transformer compiler: every gadget, through the stock HF forward, against the reference
evaluator, in the chunked prefill path (sequences longer than one 64-token chunk) and the cached
one-token decode path."""
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwengpu.compiler import Program, Target, compare, compile_program, gadgets, memory
from qwengpu.compiler.core import CompileError
from qwengpu.compiler.placement import key_heads

FAST = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(compiled, tokens, modes=("prefill", "decode")):
    margins = []
    for mode in modes:
        r = compare(compiled, tokens, mode)
        assert r.exact, f"{mode}: {r.mismatches[:5]}"
        assert r.min_code_margin > 0.45, f"{mode}: margin {r.min_code_margin}"
        margins.append(r.min_code_margin)
        if r.min_logit_gap is not None:
            assert r.min_logit_gap > 1.0
    return min(margins)


def random_tokens(prog, n, rng, **ranges):
    out = []
    for i in range(n):
        vals = {k: rng.randrange(lo, hi) for k, (lo, hi) in ranges.items()}
        out.append(prog.token(f"t{i}", **vals).text)
    return out


@FAST
@given(st.integers(0, 2 ** 32 - 1), st.sampled_from([8, 16, 32]))
def test_add_sub_compare_bitwise(seed, n):
    rng = random.Random(seed)
    prog = Program("alu")
    a = prog.input_bits("a", n)
    b = prog.input_bits("b", n)
    c = prog.input_bits("c", 1)
    toks = random_tokens(prog, 70, rng, a=(0, 1 << n), b=(0, 1 << n), c=(0, 2))
    # edge values
    for i, (x, y) in enumerate([(0, 0), ((1 << n) - 1, 1), ((1 << n) - 1, (1 << n) - 1), (1 << (n - 1), 1 << (n - 1))]):
        toks.append(prog.token(f"e{i}", a=x, b=y, c=i % 2).text)
    gadgets.add(prog, a, b, cin=c, carry_out=True)
    gadgets.sub(prog, a, b, carry_out=True)
    for op in ("and", "or", "xor", "andn"):
        gadgets.bitwise(prog, op, a, b)
    compiled = compile_program(prog)
    check(compiled, toks)


@FAST
@given(st.integers(0, 2 ** 32 - 1))
def test_decode_lut_mux_encode(seed):
    rng = random.Random(seed)
    prog = Program("codes")
    x = prog.input_bits("x", 4)
    s = prog.input_onehot("s", 3)
    p = prog.input_bits("p", 8)
    q = prog.input_bits("q", 8)
    toks = random_tokens(prog, 80, rng, x=(0, 16), s=(0, 3), p=(0, 256), q=(0, 256))
    oh = gadgets.decode(prog, x)
    table = [rng.randrange(256) for _ in range(16)]
    gadgets.lut(prog, oh, table, 8)
    gadgets.encode(prog, oh, 4)
    gadgets.mux(prog, s, [p, q, prog.invert(p)])
    gadgets.mux(prog, prog.slice(x, 0, 1), [p, q])
    compiled = compile_program(prog)
    check(compiled, toks)


@FAST
@given(st.integers(0, 2 ** 32 - 1))
def test_gdn_memory_ports_fields_and_previous(seed):
    rng = random.Random(seed)
    prog = Program("ram")
    addr = prog.input_onehot("addr", 16)
    r1 = prog.input_onehot("r1", 16)
    r2 = prog.input_onehot("r2", 16)
    val = prog.input_bits("val", 32)
    we = prog.input_bits("we", 1)
    be = prog.input_bits("be", 4)
    toks = random_tokens(prog, 140, rng, addr=(0, 16), r1=(0, 16), r2=(0, 16), val=(0, 1 << 32),
                         we=(0, 2), be=(0, 16))
    en = gadgets.bitwise(prog, "and", prog.concat([we] * 4), be)
    m = memory.GDNMemory(prog, "ram", slots=16, width=32, field_bits=8)
    m.write(addr, val, field_enable=[en.f(i) for i in range(4)])
    m.read(r1)
    m.read(r2)
    memory.previous(prog, val, 1)
    memory.previous(prog, val, 3)
    compiled = compile_program(prog)
    margin = check(compiled, toks)
    assert margin > 0.49


def test_read_after_write_in_the_same_token_and_read_enable():
    prog = Program("raw")
    addr = prog.input_onehot("addr", 8)
    val = prog.input_bits("val", 8)
    ren = prog.input_bits("ren", 1)
    toks = [prog.token(f"t{i}", addr=i % 8, val=(37 * i) % 256, ren=i % 2).text for i in range(20)]
    m = memory.GDNMemory(prog, "m", slots=8, width=8)
    m.write(addr, val)
    m.read(addr, enable=ren.f(0))
    check(compile_program(prog), toks)


def test_variables_are_erased_and_features_reused():
    prog = Program("chain")
    a = prog.input_bits("a", 8)
    b = prog.input_bits("b", 8)
    toks = [prog.token(f"t{i}", a=(i * 13) % 256, b=(i * 7 + 3) % 256).text for i in range(10)]
    x = a
    for _ in range(6):                      # a chain: each sum is dead once the next exists
        x = gadgets.add(prog, x, b)
    reused = compile_program(prog)
    flat = compile_program(prog, Target(reuse=False))
    assert reused.layout.width < flat.layout.width
    check(reused, toks)


def test_output_rules_and_closed_loop_generate(tmp_path):
    """A composite program: an 8-bit counter in a GDN register that the model advances itself,
    saved with save_pretrained, reloaded with AutoModelForCausalLM and run with generate()."""
    import torch
    from transformers import AutoModelForCausalLM
    prog = Program("counter")
    n = prog.input_bits("n", 8)          # the counter value carried by the token
    one = prog.const_bits(1, 8)
    nxt = gadgets.add(prog, n, one)
    for v in range(256):
        prog.token(f"<n{v}>", n=v)
    for v in range(256):
        prog.emit_when(f"<n{v}>", [(nxt, v)])
    compiled = compile_program(prog)
    check(compiled, [f"<n{v}>" for v in range(0, 256, 3)])
    model = compiled.model()
    model.save_pretrained(tmp_path)
    again = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
    start = torch.tensor([[compiled.token_id("<n250>")]])
    out = again.generate(start, max_new_tokens=10, do_sample=False)
    got = [compiled.program.tokens[i].text for i in out[0].tolist()]
    assert got == [f"<n{(250 + k) % 256}>" for k in range(11)]


def test_thresholds_on_large_forms_are_refused():
    prog = Program("big")
    a = prog.input_bits("a", 20)
    with pytest.raises(CompileError, match="magnitude"):
        gadgets.threshold(prog, a.value_lin(), 1 << 19, [a], lambda x: int(x >= 1 << 19))


def test_qwen35_2b_geometry_compiles_exactly():
    prog = Program("geom")
    addr = prog.input_onehot("addr", 16)
    val = prog.input_bits("val", 16)
    toks = [prog.token(f"t{i}", addr=(5 * i) % 16, val=(977 * i) % 65536).text for i in range(30)]
    s = gadgets.add(prog, val, prog.const_bits(12345, 16))
    m = memory.GDNMemory(prog, "m", slots=16, width=16)     # one field: the 2B geometry has 1 value head per key head
    m.write(addr, s)
    m.read(addr)
    t = Target.qwen35_2b()
    t.hidden = None
    t.intermediate = None
    compiled = compile_program(prog, t)
    assert compiled.config.linear_num_key_heads == 16 and compiled.config.linear_key_head_dim == 128
    check(compiled, toks)


def test_binary_addresses_many_fields_and_late_reads():
    """A memory addressed by binary bits (keys from match counts), with more fields than value
    heads per key head (split over key heads sharing the keys), read late (just in time)."""
    rng = random.Random(7)
    prog = Program("wide")
    wa = prog.input_bits("wa", 5)
    ra = prog.input_bits("ra", 5)
    val = prog.input_bits("val", 48)
    fe = prog.input_bits("fe", 6)
    toks = random_tokens(prog, 90, rng, wa=(0, 32), ra=(0, 32), val=(0, 1 << 48), fe=(0, 64))
    m = memory.GDNMemory(prog, "wide", slots=32, width=48, field_bits=8)
    m.write(wa, val, field_enable=[fe.f(i) for i in range(6)])
    r = m.read(ra)
    m.late = True
    # a chain of MLP work before the read is needed
    x = gadgets.add(prog, val, val)
    x = gadgets.add(prog, x, val)
    gadgets.bitwise(prog, "xor", x, r)
    compiled = compile_program(prog, Target(max_group=4))
    assert compiled.config.linear_num_value_heads // compiled.config.linear_num_key_heads == 4
    assert m.layer > 0
    check(compiled, toks)


@FAST
@given(st.integers(0, 2 ** 32 - 1))
def test_memories_larger_than_a_layer_are_banked_and_spread_over_layers(seed):
    """A fixed geometry like a base model's (1 value head per key head, small key heads, few key
    heads per layer): memories with more slots than a key head are split into banks, and memories
    needing more key heads than a layer has are spread over several GDN layers; reads, writes,
    field enables, read enables and the decoded final state stay exact."""
    rng = random.Random(seed)
    prog = Program("banked")
    wa = prog.input_onehot("wa", 20)
    ra = prog.input_onehot("ra", 20)
    ba = prog.input_bits("ba", 5)
    bb = prog.input_bits("bb", 5)
    val = prog.input_bits("val", 24)
    fe = prog.input_bits("fe", 3)
    ren = prog.input_bits("ren", 1)
    toks = random_tokens(prog, 150, rng, wa=(0, 20), ra=(0, 20), ba=(0, 32), bb=(0, 32), val=(0, 1 << 24),
                         fe=(0, 8), ren=(0, 2))
    onehot = memory.GDNMemory(prog, "onehot", slots=20, width=24, field_bits=8)
    onehot.write(wa, val, field_enable=[fe.f(i) for i in range(3)])
    onehot.read(ra)
    onehot.read(wa, enable=ren.f(0))
    binary = memory.GDNMemory(prog, "binary", slots=32, width=16, field_bits=8)
    binary.write(ba, gadgets.add(prog, prog.slice(val, 0, 16), prog.const_bits(77, 16)))
    binary.read(bb)
    t = Target(linear_key_heads=2, linear_value_heads=2, linear_key_dim=8, linear_value_dim=16)
    compiled = compile_program(prog, t)
    assert len(set(onehot.unit_layers)) >= 3          # 2 ports x 3 fields x 3 banks = 18 heads
    pl = compiled.placement(binary)
    assert pl.pieces is not None and {pc[4] for pc in pl.pieces} == {0, 8, 16, 24}
    check(compiled, toks)


def test_whole_memories_take_a_value_head_per_word_and_move_late_in_a_fixed_geometry():
    """A `whole` memory is written with one enable; the compiler lays its word out in fields as
    wide as the target's value heads hold (here 32 bits: one key head per port instead of one per
    byte), and a late one in a fixed geometry (key heads per layer fixed) still moves to the last
    GDN layer with room before its reader. Exact in both paths."""
    rng = random.Random(3)
    prog = Program("whole")
    wa = prog.input_onehot("wa", 8)
    ra = prog.input_onehot("ra", 8)
    val = prog.input_bits("val", 32)
    we = prog.input_bits("we", 1)
    toks = random_tokens(prog, 80, rng, wa=(0, 8), ra=(0, 8), val=(0, 1 << 32), we=(0, 2))
    m = memory.GDNMemory(prog, "w", slots=8, width=32, whole=True)
    with pytest.raises(CompileError, match="written whole"):
        m.write(wa, val, field_enable=[we.f(0)] * 4)
    m.write(wa, val, enable=we.f(0))
    r = m.read(ra)
    m.late = True
    x = gadgets.add(prog, val, val)
    x = gadgets.add(prog, x, val)
    gadgets.bitwise(prog, "xor", x, r)
    t = Target(linear_key_heads=2, linear_value_heads=2, linear_key_dim=8, linear_value_dim=64)
    compiled = compile_program(prog, t)
    assert [f.width for f in m.fields] == [32]
    assert key_heads(m, 1, 8) == 1                      # 1 port x 1 field x 1 bank (was 4 byte fields)
    assert m.layer > 0                                  # moved towards its reader
    check(compiled, toks)


def test_a_write_granule_wider_than_a_value_head_spans_fields_written_by_its_one_enable():
    """A partially written memory's write granule (here 12 bits, one enable each) wider than the
    target's value heads hold (8 bits) spans two fields, both written by the granule's enable:
    a partial write still changes only its granule. Exact in both paths."""
    rng = random.Random(5)
    prog = Program("granules")
    wa = prog.input_onehot("wa", 4)
    ra = prog.input_onehot("ra", 4)
    val = prog.input_bits("val", 24)
    en = prog.input_bits("en", 2)
    toks = random_tokens(prog, 80, rng, wa=(0, 4), ra=(0, 4), val=(0, 1 << 24), en=(0, 4))
    m = memory.GDNMemory(prog, "g", slots=4, width=24, field_bits=12)
    with pytest.raises(CompileError, match="2 fields need 2 enables"):
        m.write(wa, val, field_enable=[en.f(0)] * 4)
    m.write(wa, val, field_enable=[en.f(0), en.f(1)])
    r = m.read(ra)
    gadgets.bitwise(prog, "xor", r, val)
    t = Target(linear_key_heads=8, linear_value_heads=8, linear_key_dim=4, linear_value_dim=16)
    compiled = compile_program(prog, t)
    assert [(f.lo, f.width) for f in m.fields] == [(0, 8), (8, 4), (12, 8), (20, 4)]
    assert [str(e) for e in m.field_enables(m.writes[0])] == [str(en.f(0))] * 2 + [str(en.f(1))] * 2
    check(compiled, toks)


def test_a_node_whose_outputs_outweigh_its_inputs_moves_down_to_its_first_reader():
    """The decoder of a 3-bit input (8 one-hot outputs) is ready at layer 0 but read only after a
    chain of additions: the scheduler sinks it to the layer just before its reader, so its 8
    features are not held across the chain. Exact in both paths."""
    rng = random.Random(6)
    prog = Program("sink")
    sel = prog.input_bits("sel", 3)
    val = prog.input_bits("val", 16)
    toks = random_tokens(prog, 60, rng, sel=(0, 8), val=(0, 1 << 16))
    d = gadgets.decode(prog, sel, name="d")
    y = gadgets.add(prog, val, val)
    y = gadgets.add(prog, y, val)
    y = gadgets.add(prog, y, val)
    gadgets.mux(prog, d, [y, val] * 4, name="out")
    compiled = compile_program(prog, Target())
    dec = d.producer
    reader = next(n for n in prog.nodes if d in n.inputs)
    assert reader.layer >= 3 and dec.layer == reader.layer - 1, (dec.layer, reader.layer)
    check(compiled, toks)


def test_the_narrowing_pass_reads_a_memory_just_before_its_word_is_needed():
    """A memory read whose 32-bit word is used only after a chain of additions, written with
    values that stay live anyway: the scheduler reads it at once (it is not marked late), the
    narrowing pass moves it down to the layer before its reader, so the word is not held across
    the chain. The residual is narrower, and the program is exact in both paths."""
    def build():
        rng = random.Random(7)
        prog = Program("narrow")
        wa = prog.input_bits("wa", 2)
        ra = prog.input_bits("ra", 2)
        val = prog.input_bits("val", 32)
        toks = random_tokens(prog, 60, rng, wa=(0, 4), ra=(0, 4), val=(0, 1 << 32))
        m = memory.GDNMemory(prog, "m", slots=4, width=32)
        m.write(wa, val)
        word = m.read(ra, name="word")
        y = gadgets.add(prog, val, val)
        y = gadgets.add(prog, y, val)
        y = gadgets.add(prog, y, val)
        gadgets.bitwise(prog, "xor", word, gadgets.bitwise(prog, "and", y, val))
        return prog, toks, word
    prog, _, word = build()
    wide = compile_program(prog, Target(narrow=False))
    held = wide.layout.erased["word"] - wide.schedule.available["word"]
    prog, toks, word = build()
    narrow = compile_program(prog, Target())
    reader = min(n.layer for n in prog.nodes if n.layer is not None and word in n.inputs)
    assert word.producer.layer == reader - 1 or word.producer.layer == reader
    assert narrow.layout.erased["word"] - narrow.schedule.available["word"] < held
    assert narrow.layout.width < wide.layout.width, (narrow.layout.width, wide.layout.width)
    check(narrow, toks)


def test_a_tied_head_keeps_its_features_erases_their_echo_and_puts_constants_on_the_bias():
    """`Target(tied_head=True)`: the output rules' variables and the bias feature have residual
    features no other variable uses; layer 0's MLP erases what a tied embedding would echo into
    them and writes the bias 1; the unembedding's constants sit on the bias, not the anchor. With
    every GPU token's embedding carrying its own unembedding row (a tied matrix), the program is
    still exact."""
    from qwengpu.compiler.compiling import BIAS, norm_scale
    from qwengpu.compiler.core import ANCHOR_FEATURE
    from qwengpu.splice.demo import demo_program, demo_sequence
    prog = demo_program(n_tokens=16)
    compiled = compile_program(prog, Target(tied_head=True))
    lay = compiled.layout
    head = {BIAS} | prog.output_sources()
    head_dims = {lay.dims[(n, i)] for n in head for i in range(prog.vars[n].size)}
    others = {d for (n, i), d in ((k, v) for k, v in lay.dims.items() if isinstance(k, tuple)) if n not in head}
    assert head_dims and not head_dims & others
    lm = compiled.state_dict["lm_head.weight"]
    anchor, bias = lay.index(ANCHOR_FEATURE), lay.dims[(BIAS, 0)]
    assert not lm[:, anchor].any() and lm[:, bias].any()
    emb = compiled.state_dict["model.embed_tokens.weight"]
    # a tied row: the embedding echoes the unembedding (in the splice's units: the rows times the
    # compiled norm scale, which the final norm undoes there)
    emb += lm * (norm_scale(compiled.config.hidden_size, compiled.config.rms_norm_eps) * 2.0 ** -4)
    check(compiled, demo_sequence(prog, 40))


def test_a_tied_head_refuses_rules_that_read_a_token_input_directly():
    """A tied embedding echoes the unembedding into the features the rules read; an input read
    by a rule holds its value there from the embedding on, so the echo cannot be erased: refused
    with the reason."""
    prog = Program("echo")
    x = prog.input_bits("x", 2)
    texts = [prog.token(f"t{i}", x=i).text for i in range(4)]
    prog.emit_when(texts[1], [(x, 1)])
    with pytest.raises(CompileError, match="x is read by the unembedding and holds a value before layer 0's MLP"):
        compile_program(prog, Target(tied_head=True))
    compile_program(prog, Target())                  # untied: fine


def test_a_64_bit_field_decodes_whole():
    """A value head of 128 dims holds a 64-bit field (the 2B geometry's register words): every bit,
    the top one too, comes back (an int64 accumulation once turned such words into -1)."""
    import numpy as np

    from qwengpu.compiler.memory import VALUE_L
    from qwengpu.compiler.placement import MemoryPlacement, decode_memory
    words = [0xFFFFFFFFFFFFFFFB, 1 << 63, 0x0123456789ABCDEF]
    state = np.zeros((1, len(words), 128), dtype=np.float32)
    for slot, word in enumerate(words):
        for bit in range(64):
            state[0, slot, 2 * bit + (0 if word >> bit & 1 else 1)] = VALUE_L
    got, margin = decode_memory(state, MemoryPlacement("m", 0, [(0, 0, 64)], len(words)))
    assert got == dict(enumerate(words)) and margin > 0
