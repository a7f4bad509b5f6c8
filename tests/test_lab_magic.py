"""The `%%cuda` cell magic (`qwengpu_widgets.magic`): the launch line, a kernel written here run and
opened in the inspector, nvcc errors and unsupported constructs at their cell line."""
import pytest

from qwengpu_widgets import CudaCellError, Inspector, load_ipython_extension, run_cell
from qwengpu_widgets.magic import compile_cell, parse_launch_line

DOT = """__global__ void dot(const int *a, const int *b, int *out) {
    int i = threadIdx.x;
    atomicAdd(out, a[i] * b[i]);
}
"""
LINE = "--grid 1 --block 4 --args a:int32[1,2,3,4] b:int32[2,3,4,3] out:int32(1)"


def test_parse_launch_line():
    spec, opts = parse_launch_line("--grid 2 --block 2,2,1 --args x:float32[1.5,2] int32(3) n:int32=7 "
                                   "--engine compact --position 3 --name view --kernel k")
    assert spec == {"grid": 2, "block": [2, 2, 1], "kernel": "k",
                    "args": [{"buffer": "float32", "data": [1.5, 2]}, {"buffer": "int32", "size": 3},
                             {"scalar": "int32", "value": 7}]}
    assert opts == {"engine": "compact", "position": 3, "name": "view", "names": ["x", "arg1", "n"],
                    "background": False}
    assert parse_launch_line("--background")[1]["background"] is True
    opts = parse_launch_line("--engine model --model /ckpt/out --prefix 'Some text: '")[1]
    assert (opts["model"], opts["prefix"], opts["engine"]) == ("/ckpt/out", "Some text: ", "model")
    assert "model" not in parse_launch_line("")[1]
    for bad in ("--args int32{1}", "--grid x", "--bogus 1"):
        with pytest.raises(CudaCellError) as e:
            parse_launch_line(bad)
        assert e.value.kind == "launch" and e.value.line == 1


def test_a_kernel_written_here_opens_in_the_inspector():
    ns = {}
    insp = run_cell(LINE + " --position 13", DOT, ns)
    assert isinstance(insp, Inspector) and ns["insp"] is insp and insp.position == 13
    insp.step()
    assert insp.snapshot.region("out").data == (32).to_bytes(4, "little")
    assert insp.program["kernel_name"].startswith("dot")


def test_nvcc_errors_name_their_cell_line():
    src = DOT.replace("a[i] * b[i]", "a[i] * c[i]")          # source line 3: cell line 4
    err = run_cell(LINE, src)
    assert isinstance(err, CudaCellError) and err.kind == "compile" and err.line == 4
    assert "c[i]" in err.text and '"c" is undefined' in err.message
    html = err._repr_html_()
    assert 'class="qg-cuda-error"' in html and 'data-line="4"' in html and "nvcc error" in html


def test_unsupported_constructs_name_their_cuda_line():
    # printf itself is supported (issue 15); a `*` width is not
    src = '#include <cstdio>\n__global__ void k(int *x) {\n    printf("%*d", 3, x[0]);\n}\n'
    with pytest.raises(CudaCellError) as e:
        compile_cell(src)
    err = e.value
    assert err.kind == "unsupported" and err.line == 4 and "printf" in err.text and "unsupported" in err.message


def test_the_extension_registers_the_magic():
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    load_ipython_extension(ip)
    out = ip.run_cell_magic("cuda", LINE + " --name v", DOT)
    assert isinstance(out, Inspector) and ip.user_ns["v"] is out
