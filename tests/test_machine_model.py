"""The machine in the model: the circuits' reference semantics, the stock transformers forward
(decode and chunked-prefill paths) and the compact engine, each against the token simulator and the
kernels' oracles.

The built-in machine (COMPACT with the float unit) is compiled once (sparse weights) for the compact engine; the stock
forward runs on the small TINY machine (same circuits, one ALU slot), built, saved and reloaded.
`pytest --runslow` runs every kernel on the compact engine (~30 min on 2 cores); by default a set
of kernels that exercises every unit and control path runs (the others are marked slow).
"""
import json

import pytest
from ptxkit import kernel

import qwengpu
from qwengpu import load_program, run, suite
from qwengpu.assembler import assemble
from qwengpu.semantics.faults import ExecutionFault, MemoryFault
from qwengpu.machine.config import BUILTIN, TINY
from qwengpu.machine.hardware import Hardware, reference_tokens
from qwengpu.machine.simulator import MachineStepLimit
from qwengpu.runtime.checkpoint import load_machine, open_machine
from qwengpu.runtime.run import best_device
from qwengpu.runtime.prompt import prompt_tokens
from qwengpu.verify import compare_buffers

#: kernels covering every unit (ALU ops, multiplier, memory widths and spaces, atomics, cross-lane)
#: and every control path (divergence, barriers, several warps and blocks)
CI_KERNELS = ["dot", "vote", "shfl_up_down", "shared_reduce", "nested_divergence", "atomic_exch_cas",
              "int8_int16", "bit_count", "atomic_inc_dec", "grid_2d", "break_continue", "transpose_shared",
              "last_block_reduce", "local_array", "switch_sparse", "collatz", "gcd", "int_divrem"]


def _machine_kernels():
    out = []
    for k in suite.kernels():
        try:
            assemble(load_program(k.ptx()), k.spec(), config=BUILTIN)
        except Exception:
            continue
        out.append(k.name)
    return out


SUITE = CI_KERNELS + [pytest.param(n, marks=pytest.mark.slow) for n in _machine_kernels() if n not in CI_KERNELS]


@pytest.fixture(scope="module")
def compact():
    """The built-in machine for the compact engine, from the cache (built there on first use, as
    `qwengpu demo` does)."""
    return load_machine(BUILTIN, progress=False)


@pytest.fixture(scope="module")
def tiny(module_tmp):
    path = module_tmp("machines") / "tiny"
    built = qwengpu.build_gpu("tiny", out=path, progress=False)
    assert built.report["layers"] > 0 and (path / "config.json").exists() and (path / "tokenizer.json").exists()
    return open_machine(path)                 # reloaded from disk: what a user gets


def _case(name):
    k = suite.get(name)
    return k, load_program(k.ptx()), k.spec()


def test_circuits_reference_semantics_match_the_simulator():
    hw = Hardware(TINY)
    k, m, spec = _case("dot")
    img = assemble(m, spec, config=TINY)
    want = run(m, spec, engine="sim", config=TINY).extra["generated"]
    assert reference_tokens(hw, prompt_tokens(img, m, spec)) == want


def test_stock_forward_is_exact_in_decode_and_prefill(tiny):
    k, m, spec = _case("dot")
    sim = run(m, spec, engine="sim", config=TINY)
    res = run(m, spec, engine="model", machine=tiny, check_prefill=True, progress=False)
    assert res.extra["generated"] == sim.extra["generated"]
    assert compare_buffers(res.buffers, k.expected(), nan_equal=True) is None
    assert res.buffers[2][0] == 32
    assert res.extra["prefill_exact"]
    assert res.extra["min_logit_gap"] > 8 and res.extra["prefill_min_gap"] > 8
    assert res.extra["memory_margin"] > 8
    assert 0 < res.extra["form_noise"] < 0.1          # measured through hooks on the stock MLPs


def test_symbols_set_from_the_spec_are_read_back_from_the_models_state(compact):
    """A launch spec's "symbols" go through the prompt into the model's memory, and the result reads
    the variables back from the model's state (the reader the stock forward shares): the interpreter's
    values, on the variables the spec sets (partly) and those it leaves."""
    k = suite.get("global_device_array")
    spec = k.spec().to_json()
    spec["symbols"] = {"weights": {"dtype": "int32", "data": [7, -3]}, "counter": {"dtype": "uint32", "data": [9]}}
    m = load_program(k.ptx())
    want = run(m, spec).symbols
    assert want["weights"].tolist() == [7, -3, 30, -40, 50, -60, 70, -80]
    assert want["counter"].tolist() == [9 + 1, 200 + 2, 300 + 3, 400 + 4]
    got = run(m, spec, engine="compact", machine=compact, progress=False, check_states=True)
    assert list(got.symbols) == list(want)
    assert all(got.symbols[n].dtype == want[n].dtype and got.symbols[n].tolist() == want[n].tolist() for n in want)


def test_the_progress_bar_names_the_prompts_length_before_the_launch(compact, capsys):
    k = suite.get("dot")
    res = run(k.ptx(), k.spec(), engine="compact", machine=compact, progress=True)
    err = capsys.readouterr().err
    assert f"on the compact (prompt {len(res.extra['prompt']):,} tokens, token limit 100,000)" in err


def test_saved_machine_runs_with_stock_generate(tiny):
    """AutoModelForCausalLM + AutoTokenizer + generate(): the prompt as text in, the launch's tokens
    out, stopping by itself at <halt> (the generation config's end tokens)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    k, m, spec = _case("dot")
    img = assemble(m, spec, config=TINY)
    prompt = prompt_tokens(img, m, spec)
    want = run(m, spec, engine="sim", config=TINY).extra["generated"]
    model = AutoModelForCausalLM.from_pretrained(tiny.path, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(tiny.path)
    ids = tok(" ".join(prompt), return_tensors="pt")["input_ids"]
    assert ids[0].tolist() == [tiny.token_id(t) for t in prompt]
    out = model.generate(ids, max_new_tokens=len(want) + 10, do_sample=False)
    assert tok.decode(out[0, ids.shape[1]:]) == " ".join(want)       # ... <halt>, and nothing after


def test_compact_engine_agrees_with_the_stock_forward(tiny):
    """Same logits (to fp32 rounding) at every generated position of a launch."""
    import torch
    k, m, spec = _case("dot")
    res = run(m, spec, engine="compact", machine=tiny, progress=False)
    ids = [tiny.token_id(t) for t in res.extra["prompt"] + res.extra["generated"]]
    with torch.no_grad():
        stock = tiny.model(input_ids=torch.tensor([ids])).logits[0]
    fast = tiny.compact_engine()
    st = fast.new_state()
    n = len(res.extra["prompt"])
    fast.forward(ids[:n - 1], st)
    diffs = []
    for i in range(n - 1, len(ids)):
        logits = fast.step(ids[i], st)
        diffs.append(float((logits - stock[i]).abs().max()))
    assert max(diffs) < 1e-2


@pytest.mark.parametrize("name", SUITE)
def test_compact_engine_runs_the_suite_exactly(compact, name):
    k, m, spec = _case(name)
    sim = run(m, spec, engine="sim")
    res = run(m, spec, engine="compact", machine=compact, progress=False, check_states=True)
    assert res.extra["generated"] == sim.extra["generated"]
    assert compare_buffers(res.buffers, k.expected(), nan_equal=True) is None
    assert res.extra["min_logit_gap"] > 8
    assert res.extra["memory_margin"] > 8
    assert res.extra["states_checked"] == res.steps          # registers equal after every pass
    # every 0/1-coded residual variable within 0.1 of its code where it is written (fp32 noise of the
    # lookahead steps is ~4e-3; a variable near 0.5 is a decision about to go wrong)
    assert res.extra["residual_margin"] > 0.4
    # and every MLP gate's integer form within the design's 0.1 of its lattice
    assert res.extra["form_noise"] < 0.1, (res.extra["form_noise"], res.extra["form_noise_at"])


@pytest.mark.slow
def test_the_whole_suite_in_batches_gives_each_kernel_its_single_run(compact):
    """`run_many` in batches of 4 over every suite kernel the machine takes: each launch's tokens,
    buffers and margins are its single run's (the CI-sized version: tests/test_engines.py)."""
    names = [n for n in _machine_kernels() if n != "lcg_soak"]
    for i in range(0, len(names), 4):
        ks = [suite.get(n) for n in names[i:i + 4]]
        batch = qwengpu.run_many([k.ptx() for k in ks], [k.spec() for k in ks], engine="compact", machine=compact,
                                 progress=False)
        for k, b in zip(ks, batch):
            a = run(k.ptx(), k.spec(), engine="compact", machine=compact, progress=False)
            assert a.extra["generated"] == b.extra["generated"], k.name
            assert all(x.tobytes() == y.tobytes() for x, y in zip(a.buffers, b.buffers) if x is not None), k.name  # NaN too
            assert a.margins() == b.margins(), k.name


def test_state_check_catches_a_corrupted_register_file(compact):
    """Wiping the register memory's GDN state after the first pass is caught at the next pass."""
    k, m, spec = _case("dot")
    layer = compact.placements["reg.emit"].layer

    def wipe(i, text, state):
        if i == 6:                      # after the first pass wrote r0 (tokens 1-4) and EXEC 1 came
            state.get_recurrent_state(layer).zero_()

    with pytest.raises(ExecutionFault, match="register r0 of warp 0, lane 0 is 0; the simulator has"):
        run(m, spec, engine="compact", machine=compact, progress=False, check_states=True, on_token=wipe)


def test_state_check_compares_memory_after_every_store(compact):
    """dot's atomicAdd stores through MEMW tokens: the memory decoded from the model's state is
    compared with the simulator's after each such pass; wiping the memory's state is caught."""
    k, m, spec = _case("dot")
    res = run(m, spec, engine="compact", machine=compact, progress=False, check_states=True)
    assert res.extra["memory_checked"] >= 1
    layer = compact.placements["mem"].layer

    def wipe(i, text, state):
        if text.startswith("<memw"):
            state.get_recurrent_state(layer).zero_()

    with pytest.raises(ExecutionFault, match=r"memory byte at machine address 0x[0-9a-f]+ \(line \d+\) is 0; the simulator has"):
        run(m, spec, engine="compact", machine=compact, progress=False, check_states=True, on_token=wipe)


def test_devices():
    import torch
    assert best_device() == ("cuda" if torch.cuda.is_available() else
                             "mps" if torch.backends.mps.is_available() else "cpu")
    k, m, spec = _case("dot")
    with pytest.raises(ValueError, match="compact engine runs on the CPU only"):
        run(m, spec, engine="compact", device="cuda", progress=False)


def test_cli_runs_a_launch_on_the_model(compact, tmp_path, capsys):
    """`qwengpu run FILE --launch SPEC.json --engine compact --json`: tokens generated and steps."""
    import json

    from qwengpu.cli import main
    k = suite.get("dot")
    (tmp_path / "dot.ptx").write_text(k.ptx())
    (tmp_path / "spec.json").write_text(json.dumps(k.spec().to_json()))
    assert main(["run", str(tmp_path / "dot.ptx"), "--launch", str(tmp_path / "spec.json"), "--engine", "compact",
                 "--device", "cpu", "--check-states", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["buffers"][2] == [32] and out["tokens"] == 19 and out["steps"] == 6 and out["engine"] == "compact"
    assert out["margins"]["logit_gap"] > 15.9 and out["margins"]["memory"] > 15.9 and out["margins"]["residual"] > 0.49


TID = "mov.u32 %r1, %tid.x;\nld.param.u64 %rd1, [out];\nmul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\n"


def _launch(body, **kw):
    return kernel(TID + body), {"grid": 1, "block": 4, "args": [{"buffer": "int32", "size": 4}]}


def test_out_of_bounds_store_faults_on_the_model_like_the_interpreter(compact):
    ptx, spec = _launch("add.s64 %rd4, %rd3, 12;\nst.global.u32 [%rd4], %r1;\nret;")
    with pytest.raises(MemoryFault) as ref:
        run(ptx, spec)
    with pytest.raises(MemoryFault) as got:
        run(ptx, spec, engine="compact", machine=compact, progress=False)
    assert got.value.lane == ref.value.lane == 1
    assert got.value.address == ref.value.address == 0x1010
    assert "out-of-bounds global write" in str(got.value)


def test_misaligned_load_faults_on_the_model(compact):
    ptx, spec = _launch("add.s64 %rd4, %rd3, 2;\nld.global.u32 %r2, [%rd4];\nret;")
    with pytest.raises(MemoryFault, match="misaligned"):
        run(ptx, spec, engine="compact", machine=compact, progress=False)


def test_runaway_loop_stops_at_the_token_limit(compact):
    ptx, spec = _launch("L:\nadd.u32 %r2, %r2, 1;\nbra.uni L;\nret;")
    with pytest.raises(MachineStepLimit, match="token limit of 300"):
        run(ptx, spec, engine="compact", machine=compact, progress=False, max_steps=300)


def test_every_suite_kernel_encodes_for_the_circuits():
    """The ROM encoding of every kernel the machine accepts: in particular a carry-flag consumer sits
    in the slot right after its producer (the circuits have no flag source field; a consumer placed
    further away read no carry: int_mulhi, i2f_convert, int_minmax, const_mem, atomic64 diverged on the model)."""
    for name in _machine_kernels():
        k, m, spec = _case(name)
        img = assemble(m, spec, config=BUILTIN)
        for b in img.bundles:
            for slot, so in enumerate(b.slots):
                if so is not None and so.op.kind == "alu" and so.op.cin == "flag":
                    assert so.srcs["cin"].index == slot - 1, (name, b)
        assert prompt_tokens(img, m, spec)


@pytest.mark.parametrize("body", [
    "mul.hi.s32 %r4, %r2, -1840700269;\nadd.s32 %r3, %r4, %r2;",              # MULHS -> ADD (int_divrem)
    "add.u32 %r4, %r2, 7;\nmul.hi.u32 %r5, %r4, %r4;\nadd.u32 %r3, %r5, %r4;",  # ADD -> MULHU(x, x) -> ADD (gcd)
    "mul.lo.u32 %r4, %r2, %r2;\nmul.hi.u32 %r3, %r4, -1;",                     # MUL -> MULHU
])
def test_results_forwarded_inside_a_bundle_stay_exact(compact, body):
    """A result used by a later slot of the same pass arrives with fp32 noise from its lookahead
    steps; the consumer re-thresholds it (without that, these gave 0x7fffc6 for 0xffffffc6)."""
    ptx = kernel("mov.u32 %r1, %tid.x;\nld.param.u64 %rd1, [in];\nmul.wide.u32 %rd2, %r1, 4;\n"
                 "add.s64 %rd3, %rd1, %rd2;\nld.global.u32 %r2, [%rd3];\n" + body +
                 "\nld.param.u64 %rd1, [out];\nadd.s64 %rd3, %rd1, %rd2;\nst.global.u32 [%rd3], %r3;\nret;",
                 params=".param .u64 in, .param .u64 out")
    for data in ([100, -100, 7, -7], [-1, -406, -2**31, 2**31 - 1], [1252664, 2775329, 12012077, -13]):
        spec = {"grid": 1, "block": 4, "args": [{"buffer": "int32", "data": data}, {"buffer": "int32", "size": 4}]}
        want = run(ptx, spec).buffers[1]
        got = run(ptx, spec, engine="compact", machine=compact, progress=False, check_states=True).buffers[1]
        assert list(got) == list(want), data


def test_verify_on_the_model_reports_its_smallest_margins(compact, capsys, monkeypatch):
    """`qwengpu verify --engine compact`: per kernel and over all, the smallest logit gap and the
    memory and residual code margins the run measured."""
    import qwengpu.runtime.checkpoint as model_module
    from qwengpu.cli import main
    monkeypatch.setattr(model_module, "load_machine", lambda *a, **k: compact)
    assert main(["verify", "--engine", "compact", "--check-states", "dot"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "exact  (logit gap 16.00, residual code margin 0.49" in out[0] and "form noise 0.0" in out[0]
    assert out[-1].startswith("verify compact: 1/1 exact; smallest margins: logit gap 16.00 (dot), "
                              "memory code 16.00 (dot), residual code 0.49")
    assert "largest form noise 0.0" in out[-1] and "(premise <= 0.1) (dot at " in out[-1]   # the node where it peaked
    assert main(["verify", "--engine", "compact", "--json", "dot"]) == 0
    row = json.loads(capsys.readouterr().out)["kernels"][0]
    assert row["margins"]["form_noise"] < 0.1 and isinstance(row["form_noise_at"], str) and row["form_noise_at"]


def test_the_cache_key_reads_the_circuits_and_compiler_not_the_engines(monkeypatch):
    """A build's cache key hashes every source of the packages it is built from (the circuits, their
    specification, the semantics it runs on, the compiler), found by walking them (a new module
    counts without a list to keep), and none of the engines' (a change to an engine must not rebuild
    the machine)."""
    from pathlib import Path

    from qwengpu.runtime import checkpoint as mm
    read = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or real(self))
    mm.source_hash(TINY, {})
    root = Path(mm.__file__).resolve().parent.parent
    every = {f for pkg in ("compiler", "machine", "semantics") for f in (root / pkg).rglob("*.py")}
    assert set(read) == every and (root / "machine" / "hardware" / "alu.py") in read
    assert (root / "semantics" / "words.py") in read
    assert not any("engines" in f.parts for f in read)


def test_stale_cached_builds_are_evicted(tmp_path, monkeypatch, capsys):
    """Builds from other circuits (older qwengpu versions) that no one opened for a day are
    removed; the current one, builds of the same circuits with other compiler options, other
    machines (`tiny-fpu-*` is not a build of `tiny`) and a stale build opened recently (another
    checkout's running soak may use it) stay. The notice goes to stderr (a command's stdout may be
    its JSON)."""
    import json
    import os
    import time

    from qwengpu.runtime import checkpoint as mm
    monkeypatch.setenv("QWENGPU_CACHE", str(tmp_path))
    current, old = mm.source_hash(TINY, {}), "0123456789abcdef"
    day_ago = time.time() - mm.KEEP_RECENTLY_USED_S - 60
    folders = [("tiny-" + old, "tiny", old, day_ago), ("tiny-" + current, "tiny", current, day_ago),
               ("tiny-" + "a" * 16, "tiny", current, day_ago), ("tiny-" + "b" * 16, "tiny", old, None),
               ("tiny-fpu-" + "c" * 16, "tiny-fpu", old, day_ago), ("compact-" + old, "compact", old, day_ago)]
    for name, machine, h, used in folders:
        (tmp_path / name).mkdir()
        (tmp_path / name / mm.MACHINE_FILE).write_text(json.dumps({"source_hash": h, "config": {"name": machine}}))
        if used is not None:
            os.utime(tmp_path / name / mm.MACHINE_FILE, (used, used))
    (tmp_path / ("tiny-" + "d" * 16)).mkdir()                   # no metadata: an interrupted build
    os.utime(tmp_path / ("tiny-" + "d" * 16), (day_ago, day_ago))
    (tmp_path / "tiny-x.partial").mkdir()
    removed = mm.evict_stale_builds(TINY, progress=True)
    assert sorted(p.name for p in removed) == ["tiny-" + old, "tiny-" + "d" * 16]
    out = capsys.readouterr()
    assert out.out == "" and "removed 2 cached build(s) of machine tiny" in out.err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["compact-" + old, "tiny-" + current, "tiny-" + "a" * 16, "tiny-" + "b" * 16, "tiny-fpu-" + "c" * 16,
         "tiny-x.partial"])
    # load_machine building into the cache evicts too; opening a build marks it used
    (tmp_path / ("tiny-" + old)).mkdir()
    (tmp_path / ("tiny-" + old) / mm.MACHINE_FILE).write_text(json.dumps({"source_hash": old}))
    os.utime(tmp_path / ("tiny-" + old) / mm.MACHINE_FILE, (day_ago, day_ago))
    m = mm.load_machine(TINY, progress=False)
    assert m.path.parent == tmp_path and not (tmp_path / ("tiny-" + old)).exists()
    m = mm.load_machine(TINY, progress=False)
    assert time.time() - mm.last_used(m.path) < 60
    assert mm.open_machine(m.path).path == m.path             # the mark is not a file the build's check minds


def test_a_warp_switch_after_a_store_does_not_fault(compact):
    """`fuzz_shared_8` (found by `qwengpu fuzz`): on the pass of a WARP token the memory unit sees
    the last bundle (a store) with the new warp's registers; two lanes "faulting" there made the
    model emit a FAULT where the simulator switches warps. Faults speak on EXEC passes only."""
    k, m, spec = _case("fuzz_shared_8")
    sim = run(m, spec, engine="sim")
    res = run(m, spec, engine="compact", machine=compact, progress=False, check_states=True)
    assert res.extra["generated"] == sim.extra["generated"]
    assert compare_buffers(res.buffers, k.expected(), nan_equal=True) is None
