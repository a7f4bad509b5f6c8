"""The CUDA source beside the PTX (`qwengpu.lab.source`): nvcc's line info read back, the CUDA
line of every position on the interpreter and of every pass on the compact engine, breakpoints on
CUDA lines, faults and refusals naming the CUDA line, shipped PTX without a source. The tests that
compile CUDA need nvcc (skipped only where it is absent; CI has it)."""
import pytest

from qwengpu import suite
from qwengpu.lab import trace_launch
from qwengpu.lab.payload import NO_SOURCE, machine_program_payload, program_payload
from qwengpu.lab.source import CudaSource, line_info, load_with_source, source_of, strip_debug_strings


def _has_nvcc() -> bool:
    from qwengpu.cuda import NvccNotFound, find_nvcc
    try:
        find_nvcc()
        return True
    except NvccNotFound:
        return False


needs_nvcc = pytest.mark.skipif(not _has_nvcc(), reason="nvcc is not installed on this machine")

#: even lanes add a product atomically, odd lanes store a difference: two CUDA lines, divergent
KERNEL = """__global__ void mix(const int *a, const int *b, int *out) {
    int i = threadIdx.x;
    if (i % 2 == 0)
        atomicAdd(out, a[i] * b[i]);
    else
        out[1 + i / 2] = a[i] - b[i];
}
"""
SPEC = {"grid": 1, "block": 4, "args": [{"buffer": "int32", "data": [1, 2, 3, 4]},
                                        {"buffer": "int32", "data": [2, 3, 4, 3]}, {"buffer": "int32", "size": 3}]}

LINEINFO_PTX = """.version 9.0
.target sm_75
.address_size 64
.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .b32 \t%r<3>;
\t.loc\t1 1 0
\tld.param.u64 \t%rd1, [k_param_0];
\t.loc\t1 0 0
\tmov.u32 \t%r1, %tid.x;
\t.loc\t1 3 5
\tadd.s32 \t%r2, %r1, 1;
\t.loc\t2 107 3, function_name $L__info_string0, inlined_at 1 4 9
\tatom.global.add.u32 \t%r2, [%rd1], %r2;
$L__BB0_1:
\tret;
}
\t.file\t1 "/nowhere/k.cu"
\t.file\t2 "/usr/local/cuda/include/device_atomic_functions.hpp"
\t.section\t.debug_str
\t{
$L__info_string0:
.b8 97,0
\t}
"""


def test_line_info_reads_nvccs_directives():
    """`.loc F L C` gives the lines after it; code inlined from a header gets the line it was
    inlined at; `.loc 1 0 0` (no one line) gives none; the debug strings are left out."""
    files, where = line_info(LINEINFO_PTX)
    assert files == {1: "/nowhere/k.cu", 2: "/usr/local/cuda/include/device_atomic_functions.hpp"}
    assert where == {10: (1, 1), 14: (1, 3), 16: (1, 4), 18: (1, 4)}
    assert ".section" not in strip_debug_strings(LINEINFO_PTX)
    text = "__global__ void k(int *p) {\n  int i = threadIdx.x;\n  i += 1;\n  atomicAdd(p, i);\n}\n"
    src = source_of(LINEINFO_PTX, text, "cell", first_line=2)       # a %%cuda cell: line 1 is the magic
    assert isinstance(src, CudaSource) and src.line_of_ptx(16) == 5 and src.line_of_ptx(12) is None
    assert src.text(5).strip() == "atomicAdd(p, i);" and src.ptx_lines(5) == [16, 18]
    assert src.where(14) == "CUDA line 4: i += 1;" and src.numbers == [2, 3, 4, 5, 6]
    assert source_of(LINEINFO_PTX) is None                          # the file it names is not there


def test_shipped_ptx_has_no_source():
    """The suite's kernels come as PTX: no CUDA source, and the payload says so instead."""
    k = suite.get("dot")
    v = trace_launch(k.ptx(), k.spec())
    assert v.source is None and v.cuda_lines(3) == [] and v.find_line(3) is None
    p = program_payload(v)
    assert p["source"] is None and p["source_note"] == NO_SOURCE and "step_lines" not in p
    from qwengpu_widgets import Inspector
    assert Inspector(view=v).program["source_note"] == NO_SOURCE          # the ROM card's note (browser test)


@needs_nvcc
def test_cuda_lines_of_the_interpreters_steps(tmp_path):
    """CUDA text is compiled with line info: every step is at a CUDA line; a breakpoint on a line
    stops where it starts (once per entry); a .cu file gives the same, named by its path."""
    from qwengpu_widgets import Inspector
    v = trace_launch(KERNEL, SPEC, names=["a", "b", "out"])
    assert v.source is not None and v.source.name == "<CUDA source>" and v.source.first_line == 1
    lines = [v.cuda_lines(t) for t in range(len(v))]
    assert {n for ls in lines for n in ls} == {1, 2, 3, 4, 6, 7}
    first4 = v.find_line(4)                                      # the even lanes' atomicAdd
    assert "mul.lo" in v.steps[first4].text and v.find_line(4, first4) is None
    first6 = v.find_line(6)                                      # the odd lanes' store runs first
    assert first6 < first4 and "sub.s32" in v.steps[first6].text
    hits = v.line_hits()
    assert sum(4 in h for h in hits) == 1 and all(len(h) <= 1 for h in hits)
    p = program_payload(v)
    assert p["source"]["lines"][3].strip() == "atomicAdd(out, a[i] * b[i]);"
    assert p["step_lines"][first4] == 4 and p["line_hits"][first4] == 4
    assert set(p["source"]["ptx"].values()) == {1, 2, 3, 4, 6, 7}
    # the widget: run to a line, a line breakpoint stops play there, its payload marks the line
    w = Inspector(view=v)
    assert w.run_to_line(4).position == first4
    w.goto(0).toggle_line_breakpoint(6)
    assert w.line_breakpoints == [6] and w.play().position == first6
    assert w.program["step_lines"][w.position] == 6
    cu = tmp_path / "mix.cu"
    cu.write_text(KERNEL)
    assert trace_launch(str(cu), SPEC).source.name == str(cu)


@needs_nvcc
def test_faults_and_refusals_name_the_cuda_line(monkeypatch):
    """A fault names its CUDA line beside the PTX line; so does a PTX line the machine's assembler
    refuses."""
    from qwengpu.assembler.lower.core import AssemblerError
    from qwengpu.lab import trace as trace_module
    spec = {**SPEC, "args": SPEC["args"][:2] + [{"buffer": "int32", "size": 0}]}
    v = trace_launch(KERNEL, spec)
    last = v.snapshot(len(v) - 1)
    assert v.fault is not None and "CUDA line 6: out[1 + i / 2] = a[i] - b[i];" in last.fault
    module, source = load_with_source(KERNEL)
    atom = next(ins for ins in module.kernel().body if ins.op == "atom")

    def refuse(*args, **kw):
        raise AssemblerError("`atom` is not supported by the machine yet", atom)
    monkeypatch.setattr(trace_module, "record_launch", refuse)
    with pytest.raises(AssemblerError) as e:
        trace_launch(KERNEL, SPEC, engine="compact")
    assert f"line {atom.line}:" in str(e.value) and "at CUDA line 4: atomicAdd(out, a[i] * b[i]);" in str(e.value)
    assert e.value.cuda_line == 4


@needs_nvcc
def test_cuda_lines_of_the_models_passes():
    """On the compact engine each pass belongs to CUDA lines through its PTX (an execute: its
    bundle's; a carry: the instruction that computed the value; a memory write: the store); a
    breakpoint on a line stops at the passes that run a bundle holding it; a `%%cuda` cell numbers
    its lines from 2 and its faults name the cell line."""
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)

    from qwengpu_widgets import run_cell
    insp = run_cell("--grid 1 --block 4 --engine compact --args a:int32[1,2,3,4] b:int32[2,3,4,3] out:int32(3)",
                    KERNEL)
    v = insp.view
    assert v.consistency["exact"] and v.source.first_line == 2
    atomic = [t for t in range(len(v)) if v.snapshot(t).label.kind == "execute" and
              any("atom" in text for _, _, text in v.snapshot(t).label.ptx)]
    assert atomic and all((5, "atomicAdd(out, a[i] * b[i]);") in v.snapshot(t).label.cuda for t in atomic)
    writes = [t for t in range(len(v)) if v.snapshot(t).label.kind == "memory write"]
    assert writes and all(v.cuda_lines(t) in ([5], [7]) for t in writes)
    first = v.find_line(5)                   # the bundle of the product (mul.lo) comes first
    assert first <= atomic[0] and v.snapshot(first).label.kind == "execute" and 5 in v.cuda_lines(first)
    assert all(5 in v.line_hits()[t] for t in atomic) and not any(v.line_hits()[t] for t in writes)
    assert "CUDA line 5" in str(v.snapshot(atomic[0]).label)
    p = machine_program_payload(v)
    assert p["step_lines"][atomic[0]] == v.cuda_lines(atomic[0]) and 5 in p["line_hits"][atomic[0]]
    assert insp.goto(0).run_to_line(5).position == first
    # the warp and lane timeline of this divergent kernel: the even and odd lanes split and rejoin,
    # and every pass's row of the warp is what the lane table and the bundle in flight say
    from qwengpu.lab.timeline import timeline
    tl = timeline(v)
    kinds = [k for _, k, _, _ in tl.events]
    assert tl.unit == "pass" and "diverged" in kinds and "reconverged" in kinds
    word = {"ready": "ready", "waiting": "diverged", "barrier": "barrier", "exited": "exited", "absent": "absent"}
    for t in range(len(v)):
        s = v.snapshot(t)
        assert tl.row(t, s.warp) == ["running" if s.active >> lane & 1 else word[s.lane_state[lane]]
                                     for lane in range(4)], t
    bad = run_cell("--grid 1 --block 4 --engine compact --args a:int32[1,2,3,4] b:int32[2,3,4,3] out:int32(0)",
                   KERNEL)
    assert "CUDA line 7: out[1 + i / 2] = a[i] - b[i];" in bad.view.snapshot(len(bad.view) - 1).fault
