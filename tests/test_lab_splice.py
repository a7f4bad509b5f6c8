"""The lab on a spliced checkpoint: a small random Qwen3.5 base (the grouped geometry of
`fitting_text_config`, the smallest that holds TINY: 29 GPU layers, 4 base layers, ~3 GB written)
with the TINY machine spliced in by `qwengpu build --base .. --machine tiny`. The inspector opens it
(`Inspector(..., model=DIR)`): text prefix -> launch -> text in one context on the stock forward,
the machine decoded from the GPU layers' states (memories in many layers), every GPU layer's
attention, the base layers measured idle on every GPU token; and on the compact engine."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from qwengpu import suite
from qwengpu.compiler.placement import decode_memory
from qwengpu.lab import trace_launch
from qwengpu.lab.attention import layer_attention, layers_overview
from qwengpu.lab.payload import layer_attention_payload
from qwengpu.lab.recorder import prefix_tokens
from qwengpu.runtime.readback import MachineReader
from qwengpu.splice import fixtures
from qwengpu.splice.machine_splice import fitting_text_config, open_spliced_machine
from qwengpu_widgets import Inspector

V = 416
PREFIX = "Tables, numbers and prose: "
AFTER = " and then the text goes on"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: the stock forward's tiny ops on a busy box (see test_splice_machine)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def checkpoint(module_tmp):
    """(base folder, spliced folder): TINY spliced into a random text-layout base, by the CLI in a
    child process (the compile's memory is not this process's)."""
    root = module_tmp("lab_splice")
    base = fixtures.write_random_base(root / "base", fitting_text_config("tiny", V, grouped=True), tied=True,
                                      final_norm_mean=60.0, embed_std=0.003)
    r = subprocess.run([sys.executable, "-m", "qwengpu", "build", "--base", str(base), "--out", str(root / "out"),
                        "--machine", "tiny", "--quiet", "--json"], capture_output=True, text=True,
                       env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
    assert r.returncode == 0, r.stderr[-3000:]
    return base, root / "out"


@pytest.fixture(scope="module")
def insp(checkpoint):
    k = suite.get("dot")
    return Inspector(k.ptx(), k.spec(), engine="model", model=checkpoint[1], prefix=PREFIX, names=["a", "b", "out"])


def test_the_inspector_opens_a_spliced_checkpoint(insp, checkpoint):
    view, tr = insp.view, insp.view.trace
    m = view.machine
    assert tr.engine == "model" and view.consistency["exact"], view.consistency
    assert tr.prefix_len == len(prefix_tokens(m, PREFIX)[0]) > 0
    assert tr.tokens[:tr.prefix_len] == [m.tokenizer.decode([i]) for i in prefix_tokens(m, PREFIX)[0]]
    # the machine's memories sit in many GPU layers; each is decoded from its own layer's state
    assert len({info.layer for info in tr.memories.values()}) > 5
    assert all(info.layer < m.gpu_layers for info in tr.memories.values())
    insp.goto(len(view) - 1)
    out = insp.snapshot.region("out")
    assert int.from_bytes(out.data[:4], "little") == 32
    # the lab's decoding of every memory (the raw block it rebuilds, the record's machine state)
    # equals the compiler's decoder on the model's final states
    state, last = tr.context, len(view) - 1
    assert MachineReader(m.placements).state(state) == tr.records[last].machine
    for name, pl in tr.memories.items():
        raw = state.get_recurrent_state(pl.layer)[0].float().numpy()
        got = {d.slot: d.value for d in view.gdn_state(last, name).decode()[name] if d.value is not None}
        assert got == decode_memory(raw, m.placements[name])[0], name
    # the GDN panel shows a memory of a late GPU layer
    insp.gdn_memory = "reg.emit"
    assert insp.state["gdn"]["layer"] == tr.memories["reg.emit"].layer > 20 and insp.gdn


def test_base_layers_are_idle_during_the_launch(insp):
    tr = insp.view.trace
    m = insp.view.machine
    n, total = m.gpu_layers, len(tr.layers)
    assert [L.part for L in tr.layers] == ["gpu"] * n + ["base"] * (total - n) and total - n == 4
    act = tr.activity                              # [tokens, layers]: max |change to the residual|
    launch = slice(tr.prefix_len, None)
    assert act.shape == (len(tr.tokens) - 1, total)
    assert (act[launch, n:] == 0).all()            # base layers add exactly 0 to every GPU token
    assert (act[:tr.prefix_len, :n] == 0).all()    # and the GPU layers exactly 0 to text
    assert (act[:tr.prefix_len, n:] > 0).all() and act[launch, :n].max() > 0.5
    assert all("idle during the launch" in L.role for L in tr.layers[n:])
    t = len(tr.tokens) - 2
    assert not layer_attention(tr, t, n).any() and not layers_overview(tr, t)[n:].any()
    insp.show_layer(n)
    meta = insp.latt_meta
    assert meta["parts"][n] == "base" and meta["activity"][n] == 0.0 and "idle on this token" in meta["note"]
    assert meta["kinds"][n] == "gdn"                      # drawn "L{n} Δ base": the first base layer, after the GPU's


def test_every_gpu_layer_draws_on_the_launch_only(insp):
    """After a text prefix, the GPU layers' attention on the launch's tokens is the machine's: a
    read draws with weight 1 on one earlier write; the text tokens (beta 0) are drawn on with 0."""
    tr = insp.view.trace
    t = len(tr.tokens) - 2
    w = layers_overview(tr, t)
    assert not w[tr.gdn_layers, :tr.prefix_len].any()
    # the GPU's attention layers have no heads compiled in: uniform over the whole context, text too
    attn = [L.index for L in tr.layers if L.part == "gpu" and L.kind == "full_attention"]
    assert np.allclose(w[attn], 1.0 / (t + 1))
    assert np.isclose(w.max(), 1.0, atol=1e-3)
    assert tr.sparse_error == 0.0                  # text rows (no write, no read) are not counted
    for position in (0, 5, len(insp.view) - 1):
        meta, data = layer_attention_payload(insp.view, position, tr.memories["mem"].layer)
        assert meta["nlayers"] == len(tr.layers) and len(data) > 0


def test_text_after_the_launch_in_the_same_context(insp):
    """text -> launch -> text: after the recorded launch the model goes on with text in the same
    context (its cache), as the whole sequence through the chunked prefill path does, and emits
    text tokens only."""
    view, tr = insp.view, insp.view.trace
    m = view.machine
    got = view.continue_text(AFTER, new_tokens=6)
    assert got == view.continue_text(AFTER, new_tokens=6)            # the recorded context is not consumed
    assert len(got) == 6 and max(got) < m.token_offset
    whole = prefix_tokens(m, PREFIX)[0] + [m.token_id(x) for x in tr.tokens[tr.prefix_len:]] + prefix_tokens(m, AFTER)[0]
    with torch.no_grad():
        ref = m.model.generate(torch.tensor([whole]), max_new_tokens=6, do_sample=False)[0, len(whole):].tolist()
    assert got == ref


def test_the_compact_engine_on_a_spliced_checkpoint(checkpoint):
    k = suite.get("dot")
    m = open_spliced_machine(checkpoint[1])
    view = trace_launch(k.ptx(), k.spec(), engine="compact", machine=m, names=["a", "b", "out"])
    tr = view.trace
    assert view.consistency["exact"] and tr.activity is None and tr.context is None
    assert [L.part for L in tr.layers].count("base") == 4
    assert all("not run by the compact engine" in L.role for L in tr.layers if L.part == "base")
    assert int.from_bytes(view.snapshot(len(view) - 1).region("out").data[:4], "little") == 32
    with pytest.raises(ValueError, match="stock forward of a spliced checkpoint"):
        view.continue_text("more")


def test_a_prefix_needs_text_tokens(checkpoint):
    m = open_spliced_machine(checkpoint[1])
    with pytest.raises(ValueError, match="not text tokens"):
        prefix_tokens(m, [m.token_offset + 1])
    assert prefix_tokens(m, None) == ([], [])
    meta = json.loads((checkpoint[1] / "qwengpu.json").read_text())
    with pytest.raises(ValueError, match="a spliced checkpoint"):
        prefix_tokens(type("NoText", (), {"token_offset": 0})(), "text")
    assert meta["gpu"]["token_offset"] == V
    with pytest.raises(TypeError, match="model= .* or machine="):
        Inspector("x", {}, engine="model", model=checkpoint[1], machine=m)


def test_text_that_tokenizes_to_nothing_is_refused():
    """A tokenizer that gives no tokens (transformers 5 loads the bench's word-level stand-in as
    Qwen3_5Tokenizer, a BPE without merges) would make an empty prefix, or a continuation that
    goes on from the launch's last GPU token: refused, saying why."""
    from types import SimpleNamespace

    class Nothing:
        def __call__(self, text, add_special_tokens=False):
            return SimpleNamespace(input_ids=[])

        def decode(self, ids):
            return f"<{ids[0]}>"

    m = SimpleNamespace(token_offset=V, tokenizer=Nothing())
    with pytest.raises(ValueError, match="gives no tokens for 'some text'.*token ids"):
        prefix_tokens(m, "some text")
    assert prefix_tokens(m, "  ") == ([], [])                  # blank text is no text
    assert prefix_tokens(m, [1, 2]) == ([1, 2], ["<1>", "<2>"])   # ids still work


def test_the_cuda_magic_opens_a_spliced_checkpoint(checkpoint):
    """`%%cuda ... --model DIR --prefix TEXT`: the cell's kernel on the spliced checkpoint."""
    from qwengpu_widgets.magic import run_cell
    src = ("__global__ void dot(const int *a, const int *b, int *out) {\n"
           "    atomicAdd(out, a[threadIdx.x] * b[threadIdx.x]);\n}\n")
    ns = {}
    insp = run_cell(f"--block 4 --args a:int32[1,2,3,4] b:int32[2,3,4,3] out:int32(1) --engine compact "
                    f"--model {checkpoint[1]} --prefix 'Text first: '", src, ns)
    assert ns["insp"] is insp and insp.view.consistency["exact"], getattr(insp, "message", insp)
    assert insp.view.trace.prefix_len > 0 and insp.latt_meta["parts"].count("base") == 4
    assert int.from_bytes(insp.view.snapshot(len(insp.view) - 1).region("out").data[:4], "little") == 32
