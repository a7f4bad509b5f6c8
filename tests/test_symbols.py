"""`__constant__` and `__device__` variables set from the launch spec (`"symbols"`, what
cudaMemcpyToSymbol does) and read back by name in the result, alike on every engine; the refusals
name the spec's field."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import qwengpu
from qwengpu import suite
from qwengpu.launch import LaunchError, LaunchSpec
from qwengpu.runtime.prompt import prompt_tokens
from qwengpu.assembler import assemble
from qwengpu.semantics.faults import MemoryFault
from qwengpu.semantics.symbols import apply_symbols, module_symbols
from qwengpu.verify import check_result, compare_symbols

# a `.const` table with an initialiser, `.global` variables (a counter, a table, a pointer whose
# initialiser is another variable's address, a float), and a `.shared` and a function-scope name
# for the refusals. Thread t writes scale * coef[t] to out[t] and adds coef[t] to *where (= &hits);
# thread 0 writes 77 to the table's second word.
PTX = """
.version 7.0
.target sm_75
.address_size 64

.const .align 4 .b8 coef[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};
.global .align 4 .u32 hits;
.global .align 4 .b8 table[8];
.global .align 8 .u64 where = generic(hits);
.global .align 4 .f32 scale = 0f3FC00000;
.shared .align 4 .b8 pool[16];
.global .align 1 .b8 $str[4] = {104, 105, 10, 0};

.visible .entry k(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    .local .align 4 .b8 frame[8];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    mov.u64 %rd3, coef;
    add.s64 %rd4, %rd3, %rd2;
    ld.const.u32 %r2, [%rd4];
    ld.global.f32 %f1, [scale];
    cvt.rn.f32.u32 %f2, %r2;
    mul.rn.f32 %f3, %f1, %f2;
    add.s64 %rd5, %rd1, %rd2;
    st.global.f32 [%rd5], %f3;
    ld.global.u64 %rd6, [where];
    atom.add.u32 %r3, [%rd6], %r2;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 st.global.u32 [table+4], 77;
    ret;
}
"""

MACHINE_ENGINES = ("interp", "sim")


def spec(symbols=None) -> dict:
    d = {"kernel": "k", "grid": 1, "block": 4, "args": [{"buffer": "float32", "size": 4}]}
    if symbols is not None:
        d["symbols"] = symbols
    return d


SET = {"coef": {"dtype": "uint32", "data": [10, 20]},        # a partial fill: coef[2:] keep the PTX's 3, 4
       "hits": {"dtype": "uint32", "data": [5]},
       "table": {"dtype": "int32"},                           # no data: only the dtype it reads back in
       "scale": {"dtype": "float32", "data": ["0x40000000"]}}  # a bit pattern (2.0)


@pytest.mark.parametrize("engine", MACHINE_ENGINES)
def test_symbols_are_set_before_the_launch_and_read_back_by_name(engine):
    r = qwengpu.run(PTX, spec(SET), engine=engine)
    assert r.buffers[0].tolist() == [20.0, 40.0, 6.0, 8.0]
    s = r.symbols
    assert list(s) == ["coef", "hits", "table", "where", "scale"]       # declaration order, no `$str`
    assert s["coef"].dtype == np.uint32 and s["coef"].tolist() == [10, 20, 3, 4]
    assert s["hits"].tolist() == [5 + 10 + 20 + 3 + 4]
    assert s["table"].dtype == np.int32 and s["table"].tolist() == [0, 77]
    assert s["scale"].dtype == np.float32 and s["scale"].tolist() == [2.0]
    assert s["where"].dtype == np.uint64


@pytest.mark.parametrize("engine", MACHINE_ENGINES)
def test_without_symbols_the_result_reads_each_variable_in_its_declared_type(engine):
    r = qwengpu.run(PTX, spec(), engine=engine)
    s = r.symbols
    assert s["coef"].dtype == np.uint8 and s["coef"].tolist() == [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]
    assert s["hits"].dtype == np.uint32 and s["hits"].tolist() == [10]
    assert s["table"].dtype == np.uint8 and s["table"].tolist() == [0, 0, 0, 0, 77, 0, 0, 0]
    assert s["scale"].tolist() == [1.5]
    # `where` holds the address of `hits`, the same on every engine
    assert s["where"].tolist() == [qwengpu.run(PTX, spec(), engine="interp").symbols["where"][0]]


@pytest.mark.parametrize("engine", MACHINE_ENGINES)
def test_setting_a_pointer_replaces_its_initialiser_address(engine):
    """`where` is initialised with `hits`'s address; the spec's 0 replaces it, so the atomic faults at 0."""
    with pytest.raises(MemoryFault, match="at 0x0"):
        qwengpu.run(PTX, spec({"where": {"dtype": "uint64", "data": [0]}}), engine=engine)


def test_the_interpreter_and_the_simulator_give_the_same_symbols():
    got = {e: qwengpu.run(PTX, spec(SET), engine=e).symbols for e in MACHINE_ENGINES}
    assert got["interp"].keys() == got["sim"].keys()
    for name in got["interp"]:
        assert got["interp"][name].tobytes() == got["sim"][name].tobytes()
        assert got["interp"][name].dtype == got["sim"][name].dtype


def test_the_spec_and_the_result_carry_symbols_through_json():
    sp = LaunchSpec.from_json(json.dumps(spec(SET)))
    assert LaunchSpec.from_json(sp.to_json()).to_json() == sp.to_json()
    assert sp.to_json()["symbols"]["scale"] == {"dtype": "float32", "data": [2.0]}
    assert sp.to_json()["symbols"]["table"] == {"dtype": "int32"}
    out = qwengpu.run(PTX, sp).to_json()
    assert out["symbols"]["coef"] == [10, 20, 3, 4] and out["symbols"]["scale"] == [2.0]


def test_the_cli_runs_a_spec_with_symbols(tmp_path):
    (tmp_path / "k.ptx").write_text(PTX)
    (tmp_path / "k.json").write_text(json.dumps(spec(SET)))
    p = subprocess.run([sys.executable, "-m", "qwengpu", "run", str(tmp_path / "k.ptx"), "--launch",
                        str(tmp_path / "k.json"), "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["symbols"]["hits"] == [42]
    p = subprocess.run([sys.executable, "-m", "qwengpu", "run", str(tmp_path / "k.ptx"), "--launch",
                        str(tmp_path / "k.json")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "coef: uint32[4] = [10 20  3  4]" in p.stdout and "hits: uint32[1] = [42]" in p.stdout


# -- refusals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("symbols, message", [
    ([], r"symbols must be an object"),
    ({"hits": 5}, r"symbols\.hits must be an object"),
    ({"hits": {"data": [1]}}, r"symbols\.hits\.dtype: missing \(one of int8"),
    ({"hits": {"dtype": "float16", "data": [1]}}, r"symbols\.hits\.dtype: unknown dtype 'float16'"),
    ({"hits": {"dtype": "uint32", "value": 1}}, r"symbols\.hits: unknown keys value"),
    ({"hits": {"dtype": "uint32", "data": 1}}, r"symbols\.hits\.data must be a list"),
    ({"hits": {"dtype": "uint32", "data": [-1]}}, r"symbols\.hits\.data\[0\]: -1 does not fit in uint32"),
    ({"hits": {"dtype": "uint8", "data": [1, "0x100"]}}, r"symbols\.hits\.data\[1\]: '0x100' does not fit"),
])
def test_a_malformed_symbols_entry_is_refused_naming_its_field(symbols, message):
    with pytest.raises(LaunchError, match=message):
        LaunchSpec.from_json(spec(symbols))


@pytest.mark.parametrize("symbols, message", [
    ({"counter": {"dtype": "uint32", "data": [1]}},
     r"symbols\.counter: the module has no variable counter \(the module's \.global and \.const variables: "
     r"coef \(\.const, 16 bytes\), hits \(\.global, 4 bytes\), table \(\.global, 8 bytes\), "
     r"where \(\.global, 8 bytes\), scale \(\.global, 4 bytes\)\)"),
    ({"pool": {"dtype": "uint32"}}, r"symbols\.pool: pool is a \.shared variable; a launch spec sets \.global "
                                    r"\(__device__\) and \.const \(__constant__\) variables \(the module's"),
    ({"frame": {"dtype": "uint32"}}, r"symbols\.frame: frame is a \.local variable of function k; a launch "
                                     r"spec sets module-scope variables"),
    ({"k": {"dtype": "uint32"}}, r"symbols\.k: k is a function, not a variable"),
    ({"coef": {"dtype": "float32", "data": [1, 2, 3, 4, 5]}},
     r"symbols\.coef\.data: 5 float32 values are 20 bytes; coef holds 16 \(\.const \.b8 coef\[16\]: at most 4 float32\)"),
    ({"hits": {"dtype": "uint64"}}, r"symbols\.hits\.dtype: uint64 \(8 bytes\) does not divide the 4 bytes of "
                                    r"hits \(\.global \.u32 hits\)"),
    ({"hits": {"dtype": "int16"}, "coef": {"dtype": "float64", "data": [1.0, 2.0, 3.0]}},
     r"symbols\.coef\.data: 3 float64 values are 24 bytes; coef holds 16 \(\.const \.b8 coef\[16\]: at most 2 float64\)"),
])
@pytest.mark.parametrize("engine", MACHINE_ENGINES)
def test_a_symbol_the_module_cannot_take_is_refused_alike_by_every_engine(symbols, message, engine):
    with pytest.raises(LaunchError, match=message):
        qwengpu.run(PTX, spec(symbols), engine=engine)


@pytest.mark.parametrize("engine", MACHINE_ENGINES)
def test_any_dtype_that_divides_the_variable_is_taken(engine):
    r = qwengpu.run(PTX, spec({"table": {"dtype": "float64"}, "hits": {"dtype": "int16", "data": [-2]}}),
                    engine=engine)
    assert r.symbols["table"].dtype == np.float64 and r.symbols["table"].shape == (1,)
    assert r.symbols["hits"].tolist() == [8, 1]          # the word 0x0000fffe (-2 in its low half) plus 10


def test_string_literals_and_the_printf_buffer_are_not_symbols():
    module = qwengpu.load_program(PTX)
    assert "$str" in module.vars and "$str" not in [v.name for v in module_symbols(module)]
    with pytest.raises(LaunchError, match=r"symbols\.\$str: \$str has no size a launch spec can fill"):
        qwengpu.run(PTX, spec({"$str": {"dtype": "uint8", "data": [1]}}))


def test_a_spec_made_in_python_holds_symbol_values():
    from qwengpu.launch import SymbolValue
    sp = LaunchSpec("k", (1, 1, 1), (4, 1, 1), LaunchSpec.from_json(spec()).args,
                    symbols={"hits": SymbolValue("uint32", np.array([3], dtype=np.uint32))})
    assert qwengpu.run(PTX, sp).symbols["hits"].tolist() == [13]
    with pytest.raises(LaunchError, match="symbols must map variable names to SymbolValue"):
        LaunchSpec("k", (1, 1, 1), (4, 1, 1), symbols={"hits": {"dtype": "uint32", "data": [3]}})


# -- the prompt -------------------------------------------------------------------------------------

def _prompt(symbols=None) -> list:
    module = qwengpu.load_program(PTX)
    sp = LaunchSpec.from_json(spec(symbols))
    return prompt_tokens(assemble(module, sp), module, sp)


def test_a_symbol_costs_prompt_tokens_for_its_non_zero_bytes_only():
    base = _prompt()
    assert _prompt({"hits": {"dtype": "uint32", "data": [0]}}) == base         # zeros where zero is the default
    assert len(_prompt({"hits": {"dtype": "uint32", "data": [0x01000200]}})) == len(base) + 2
    # coef's PTX initialiser is 1, 2, 3, 4: setting its first word to 0 removes that byte's token
    assert len(_prompt({"coef": {"dtype": "uint32", "data": [0]}})) == len(base) - 1


def test_applying_symbols_twice_is_applying_them_once():
    module = qwengpu.load_program(PTX)
    sp = LaunchSpec.from_json(spec(SET))
    once = apply_symbols(module, sp)
    assert apply_symbols(once, sp).vars == once.vars
    assert apply_symbols(module, LaunchSpec.from_json(spec())) is module


# -- the suite kernel and verify ---------------------------------------------------------------------

def test_the_convolution_row_kernel_sets_its_filter_and_reads_its_counter_back():
    k = suite.get("conv_row_const")
    sp = k.spec()
    assert sp.symbols["c_row_filter"].data.dtype == np.float32
    want = k.expected_symbols()
    assert want["g_apron_zeros"].tolist() == [1004]          # 1000 from the spec, 4 apron loads beyond the row
    r = qwengpu.run(k.ptx(), sp)
    assert check_result(k, "interp", r, 0.0).exact
    # a filter set otherwise changes the results the oracle expects
    sp2 = k.spec()
    sp2.symbols["c_row_filter"].data[:] = [0, 0, 1, 0, 0]
    r2 = qwengpu.run(k.ptx(), sp2)
    assert r2.buffers[1][:14].tolist() == sp2.args[0].data[:14].tolist()
    assert [x.tolist() for x in k.expected(sp2) if x is not None] == [b.tolist() for b in r2.buffers if b is not None]


def test_verify_finds_a_wrong_symbol():
    k = suite.get("conv_row_const")
    r = qwengpu.run(k.ptx(), k.spec())
    r.symbols["g_apron_zeros"] = np.array([1003], dtype=np.uint32)
    row = check_result(k, "interp", r, 0.0)
    assert not row.exact and row.detail.startswith("oracle: symbol g_apron_zeros index 0: got") and "(0x3eb)" in row.detail
    assert row.checked == ["oracle", "symbols"]
    assert compare_symbols({}, {"x": np.zeros(1)}, True) == "symbol x not read back (the result has none)"


def test_qwengpu_verify_checks_the_kernels_symbols():
    p = subprocess.run([sys.executable, "-m", "qwengpu", "verify", "conv_row_const", "--engine", "sim", "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)["kernels"][0]
    assert row["name"] == "conv_row_const" and row["exact"] and row["checked"] == ["oracle", "symbols"]


# -- the lab ---------------------------------------------------------------------------------------

def test_the_labs_views_start_from_the_specs_values():
    """The interpreter's view and the model's recording show the spec's values from the first
    position on (the PTX initialiser's only where the spec leaves a byte alone)."""
    from qwengpu.lab.view import interp_view
    first = interp_view(PTX, spec(SET)).memory_at(0)
    assert first["global:hits"] == (5).to_bytes(4, "little")
    assert first["global:scale"] == np.float32(2.0).tobytes()
    from qwengpu.lab.recorder import record_launch
    view = record_launch(PTX, spec(SET), engine="compact")
    assert view.snapshot(0).region("global:hits").data == (5).to_bytes(4, "little")
    assert view.snapshot(len(view) - 1).region("global:hits").data == (5 + 10 + 20 + 3 + 4).to_bytes(4, "little")
