"""The kernel suite's catalog: every kernel has source, PTX, a launch spec and an oracle, and they agree."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from qwengpu import suite
from qwengpu.launch import LaunchSpec
from qwengpu.ptx.ir import demangled_name
from qwengpu.suite import KERNEL_DIR
from qwengpu.suite.oracles import ORACLES

ALL = suite.kernels()
NAMES = [k.name for k in ALL]
ENTRY_RE = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)")
HAS_NVCC = shutil.which("nvcc") is not None


def _same_nvcc() -> bool:
    from qwengpu.cuda import nvcc_version
    from qwengpu.suite.regenerate import recorded_nvcc_version
    return nvcc_version() == recorded_nvcc_version()


def _stems(ext: str) -> set[str]:
    return {p.stem for p in KERNEL_DIR.glob(f"*.{ext}")}


def test_every_kernel_has_all_its_files_and_an_oracle():
    cu, ptx, js = _stems("cu"), _stems("ptx"), _stems("json")
    orcs = set(ORACLES)
    assert cu == ptx, f"cu without ptx: {sorted(cu - ptx)}; ptx without cu: {sorted(ptx - cu)}"
    assert cu == js, f"cu without json: {sorted(cu - js)}; json without cu: {sorted(js - cu)}"
    assert cu == orcs, f"cu without oracle: {sorted(cu - orcs)}; oracle without cu: {sorted(orcs - cu)}"


def test_suite_size():
    assert len(ALL) >= 49


def test_loader_api():
    assert NAMES == sorted(NAMES)
    k = suite.get("dot")
    assert k.name == "dot" and k.cu_path.suffix == ".cu" and k.ptx_path.is_file() and k.spec_path.is_file()
    assert "ci" in k.tags and k.about
    assert all("ci" in k.tags for k in suite.kernels("ci"))
    assert 0 < len(suite.kernels("ci")) < len(ALL)
    with pytest.raises(KeyError):
        suite.get("no_such_kernel")


def test_dot_demo_expects_32():
    exp = suite.get("dot").expected()
    assert exp[2].tolist() == [32]


@pytest.mark.parametrize("name", NAMES)
def test_source_has_a_header_comment(name):
    first = suite.get(name).source().lstrip().splitlines()[0]
    assert first.startswith("//") and name in first, f"{name}.cu should open with '// {name}: what it exercises'"


@pytest.mark.parametrize("name", NAMES)
def test_spec_parses_and_names_a_kernel_of_its_ptx(name):
    k = suite.get(name)
    spec = LaunchSpec.from_json(k.spec_path)
    assert spec.kernel, "the spec must name its kernel"
    entries = ENTRY_RE.findall(k.ptx())
    assert entries, "no .entry in the PTX"
    assert spec.kernel in entries or spec.kernel in [demangled_name(e) for e in entries], \
        f"{spec.kernel!r} is not among the PTX entries {entries}"
    assert spec.args, "a kernel without arguments cannot produce results"
    if k.machine is None:
        assert 1 <= spec.threads_per_block <= 16, "keep launches small (<= 16 threads per block)"
        assert spec.blocks <= 4, "keep launches small (<= 4 blocks)"
    else:       # a course kernel: the sizes its machine exists for, still small
        from qwengpu.machine.config import config_named
        assert 1 <= spec.threads_per_block <= config_named(k.machine).max_threads
        assert spec.blocks <= 8, "keep launches small (<= 8 blocks)"


@pytest.mark.parametrize("name", NAMES)
def test_oracle_returns_one_entry_per_arg_with_matching_dtype_and_shape(name):
    k = suite.get(name)
    spec = k.spec()
    exp = k.expected()
    assert len(exp) == len(spec.args)
    for i, (a, e) in enumerate(zip(spec.args, exp)):
        if a.is_buffer:
            assert isinstance(e, np.ndarray), f"arg {i}: a buffer's expected contents must be an array"
            assert e.dtype == a.data.dtype and e.shape == a.data.shape, f"arg {i}"
        else:
            assert e is None, f"arg {i}: scalars have no expected contents"
    # the oracle must not modify the spec's initial data in place
    spec2 = k.spec()
    assert all(np.array_equal(x.data.view(np.uint8), y.data.view(np.uint8))
               for x, y in zip(spec.args, spec2.args) if x.is_buffer)


@pytest.mark.parametrize("name", NAMES)
def test_oracle_changes_some_output(name):
    """A kernel whose expected results equal its inputs tests nothing."""
    k = suite.get(name)
    spec = k.spec()
    exp = k.expected()
    assert any(e is not None and not np.array_equal(a.data.view(np.uint8), e.view(np.uint8))
               for a, e in zip(spec.args, exp))


def test_jump_table_kernel_has_brx_idx():
    assert "brx.idx" in suite.get("switch_jumptable").ptx()


def test_nvcc_txt_records_the_command():
    text = (KERNEL_DIR / "NVCC.txt").read_text()
    assert "nvcc -ptx -arch=sm_75 -O3" in text and "nvcc --version" in text


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not on PATH: cannot check the committed PTX against a fresh compile")
@pytest.mark.parametrize("name", NAMES)
def test_committed_ptx_equals_a_fresh_compile(name):
    from qwengpu.suite.regenerate import compile_kernel
    if not _same_nvcc():
        pytest.skip("this nvcc differs from the one recorded in kernels/NVCC.txt (its PTX would differ)")
    k = suite.get(name)
    assert compile_kernel(k.cu_path) == k.ptx(), \
        f"{name}.ptx is stale: run `python -m qwengpu.suite.regenerate {name}`"


def test_a_struct_argument_is_its_bytes():
    """`{"struct": HEX}`: a struct by value of any size, its bytes in memory order; it round-trips
    through JSON and a malformed one names the argument."""
    import pytest

    from qwengpu.launch import LaunchError, LaunchSpec
    spec = LaunchSpec.from_json({"grid": 1, "block": 4, "args": [{"struct": "0102030405060708090a0b0c"}]})
    a = spec.args[0]
    assert (a.kind, a.dtype, a.value.tobytes()) == ("scalar", "struct", bytes(range(1, 13)))
    assert LaunchSpec.from_json(spec.to_json()).args[0].value.tobytes() == a.value.tobytes()
    assert spec.buffer_addresses() == [None]
    for bad in ("", "xyz", "123", 5):
        with pytest.raises(LaunchError, match=r"args\[0\]\.struct must be a non-empty string of hex digits"):
            LaunchSpec.from_json({"args": [{"struct": bad}]})


@pytest.mark.parametrize("name", [n for n in NAMES if ORACLES[n].symbols])
def test_a_symbols_oracle_expects_variables_of_its_module_in_the_dtype_they_are_read_in(name):
    """An oracle of module variables (`oracle(..., symbols=True)`) names variables the result reads
    back, each with the shape and dtype it is read back in (the spec's dtype, else the declared one)."""
    import qwengpu
    from qwengpu.semantics.symbols import module_symbols, symbol_dtype
    k = suite.get(name)
    spec = k.spec()
    variables = {v.name: v for v in module_symbols(qwengpu.load_program(k.ptx()))}
    want = k.expected_symbols()
    assert want and set(want) <= set(variables)
    for n, arr in want.items():
        dt = symbol_dtype(variables[n], spec)
        assert arr.dtype == dt and arr.shape == (variables[n].size // dt.itemsize,), n
