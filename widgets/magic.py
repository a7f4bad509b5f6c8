"""`%%cuda`: a cell of CUDA source and a one-line launch, compiled, run and opened in the inspector.

    %load_ext qwengpu_widgets
    %%cuda --grid 1 --block 4 --args a:int32[1,2,3,4] b:int32[2,3,4,3] out:int32(1)
    __global__ void dot(const int *a, const int *b, int *out) {
        atomicAdd(out, a[threadIdx.x] * b[threadIdx.x]);
    }

The launch line: `--grid G` and `--block B` (a number or `x,y,z`), `--args` one item per kernel
parameter, in order — `int32[1,2,3,4]` a buffer with these elements, `int32(4)` a zeroed buffer of
4 elements, `int32=7` a scalar — each optionally named (`a:int32[...]`: the inspector's memory
labels); `--engine interp|compact|model` (default interp), `--kernel NAME` (the cell defines
several), `--position N`, `--name VAR` (the inspector is also stored in the notebook as `VAR`,
default `insp`), `--background` (the cell returns at once; the widget shows the recording's
progress, with a cancel button: `Inspector(..., background=True)`), `--model DIR` (a spliced
checkpoint's folder, for the model engines: `Inspector(..., model=DIR)`) and `--prefix TEXT` (text
run before the launch in its context). The inspector is the cell's result.

An error is the cell's result too (`CudaCellError`): nvcc's diagnostics, or a construct the PTX
frontend does not support, or a launch line it cannot read — with the line of the cell it is on
(cell lines count the `%%cuda` line as 1, as JupyterLab's line numbers do) and that line's text.
The cell is compiled with nvcc's line info (`-lineinfo`): a refused PTX construct (the frontend's,
or the machine assembler's) is traced back to its cell line, and the inspector shows the cell's
CUDA beside the PTX (`qwengpu.lab.source`).
"""
from __future__ import annotations

import argparse
import html
import re
import shlex

#: one launch argument: [name:]dtype[values] | [name:]dtype(size) | [name:]dtype=value
_ARG = re.compile(r"^(?:(?P<name>[A-Za-z_]\w*):)?(?P<dtype>[A-Za-z]\w*)"
                  r"(?:\[(?P<data>[^\]]*)\]|\((?P<size>\d+)\)|=(?P<value>\S+))$")


class CudaCellError(Exception):
    """Why a `%%cuda` cell did not launch: `kind` ("compile", "unsupported", "launch"), the cell
    line (1 = the `%%cuda` line; None when no line is known), that line's text and the message."""

    def __init__(self, kind: str, message: str, line: int | None = None, text: str = "", detail: str = ""):
        self.kind, self.message, self.line, self.text, self.detail = kind, message, line, text, detail
        where = f"line {line}: " if line else ""
        super().__init__(f"{where}{message}")

    def _repr_html_(self) -> str:
        title = {"compile": "nvcc error", "unsupported": "not supported by qwenGPU",
                 "launch": "launch line"}.get(self.kind, "error")
        where = f' <span class="qg-cuda-line" data-line="{self.line}">line {self.line}</span>' if self.line else ""
        src = (f'<pre style="margin:4px 0;padding:4px 6px;background:#fff3bf;border-radius:4px">'
               f'{self.line:>3} │ {html.escape(self.text)}</pre>') if self.line else ""
        detail = (f'<details><summary>details</summary><pre style="white-space:pre-wrap">{html.escape(self.detail)}'
                  "</pre></details>") if self.detail else ""
        return (f'<div class="qg-cuda-error" data-kind="{self.kind}" style="border-left:4px solid #e03131;'
                f'padding:6px 10px;background:#fff5f5;font:13px system-ui,sans-serif">'
                f'<b>{title}</b>{where}: {html.escape(self.message)}{src}{detail}</div>')

    def _repr_pretty_(self, p, cycle):
        p.text(f"CudaCellError: {self}")


def _numbers(text: str) -> list:
    out = []
    for tok in filter(None, (t.strip() for t in text.split(","))):
        try:
            out.append(int(tok, 0))
        except ValueError:
            out.append(float(tok))
    return out


def _dims(text: str):
    parts = [int(x) for x in text.split(",")]
    return parts[0] if len(parts) == 1 else parts


def parse_launch_line(line: str) -> tuple[dict, dict]:
    """(launch spec, options) from a `%%cuda` line: the spec `qwengpu.run` takes (`grid`, `block`,
    `args`; `kernel` if given) and {engine, position, name, names, background; model and prefix if
    given}. Raises `CudaCellError`."""
    p = argparse.ArgumentParser(prog="%%cuda", add_help=False, exit_on_error=False)
    p.add_argument("--grid", default="1")
    p.add_argument("--block", default="1")
    p.add_argument("--args", nargs="*", default=[])
    p.add_argument("--engine", default="interp")
    p.add_argument("--kernel", default=None)
    p.add_argument("--position", type=int, default=0)
    p.add_argument("--name", default="insp")
    p.add_argument("--background", action="store_true")
    p.add_argument("--model", default=None)
    p.add_argument("--prefix", default=None)
    try:
        ns, extra = p.parse_known_args(shlex.split(line))
        if extra:
            raise CudaCellError("launch", f"unknown option(s) {' '.join(extra)}", 1, "%%cuda " + line)
        spec = {"grid": _dims(ns.grid), "block": _dims(ns.block), "args": []}
    except (argparse.ArgumentError, ValueError) as e:
        raise CudaCellError("launch", str(e), 1, "%%cuda " + line) from None
    names = []
    for item in ns.args:
        m = _ARG.match(item)
        if not m:
            raise CudaCellError("launch", f"cannot read the argument {item!r}: write int32[1,2,3] (a buffer), "
                                "int32(4) (4 zeros) or int32=7 (a scalar), optionally named a:int32[...]",
                                1, "%%cuda " + line)
        names.append(m["name"] or f"arg{len(names)}")
        if m["data"] is not None:
            spec["args"].append({"buffer": m["dtype"], "data": _numbers(m["data"])})
        elif m["size"] is not None:
            spec["args"].append({"buffer": m["dtype"], "size": int(m["size"])})
        else:
            spec["args"].append({"scalar": m["dtype"], "value": _numbers(m["value"])[0]})
    if ns.kernel:
        spec["kernel"] = ns.kernel
    return spec, {"engine": ns.engine, "position": ns.position, "name": ns.name, "names": names,
                  "background": ns.background,
                  **({"model": ns.model} if ns.model else {}), **({"prefix": ns.prefix} if ns.prefix is not None else {})}


def _nvcc_errors(source: str, message: str) -> CudaCellError:
    """The first nvcc error, at its cell line (`<CUDA source>(N): error: ...`, the name
    `qwengpu.compile_cuda` gives source text, or `FILE.cu(N)`: source line N)."""
    lines = source.splitlines()
    for m in re.finditer(r"(?:\.cu|<CUDA source>)\((\d+)\): (?:catastrophic )?error: ([^\n]*)", message):
        n = int(m.group(1))
        return CudaCellError("compile", m.group(2).strip(), n + 1, lines[n - 1] if 0 < n <= len(lines) else "",
                             message)
    return CudaCellError("compile", message.splitlines()[-1] if message else "nvcc failed", None, "", message)


def compile_cell(source: str, kernel: str | None = None):
    """(the validated kernel module of a cell's CUDA source, its `qwengpu.lab.source.CudaSource`:
    compiled with nvcc's line info, numbered as cell lines), or `CudaCellError` at the cell line of
    the first problem."""
    from qwengpu.lab.source import compile_with_lines, source_of
    import qwengpu
    try:
        ptx = compile_with_lines(source)
    except Exception as e:                # qwengpu.cuda.CudaCompileError (nvcc's diagnostics)
        if type(e).__name__ != "CudaCompileError":
            raise
        raise _nvcc_errors(source, str(e)) from None
    cuda = source_of(ptx, source, "cell", first_line=2)
    try:
        module = qwengpu.load_program(ptx)
        if kernel is not None:
            module.kernel(kernel)
    except ValueError as e:
        if not hasattr(e, "construct"):   # not a qwengpu.ptx PTXSyntaxError / PTXUnsupported
            raise CudaCellError("launch", str(e)) from None
        raise _refusal(e, cuda, (e.construct or "").strip().splitlines()[0] if e.construct else "") from None
    except KeyError as e:
        raise CudaCellError("launch", str(e)) from None
    return module, cuda


def _refusal(e, cuda, construct: str = "") -> CudaCellError:
    """A construct the frontend or the machine's assembler refuses, at the cell line its PTX line
    came from (nvcc's line info), naming the PTX line too."""
    n = cuda.line_of_ptx(e.line) if cuda is not None and getattr(e, "line", None) else None
    msg = re.sub(r"^line \d+: ", "", str(e).split("\n")[0])
    if construct:
        msg = f"{msg} (PTX line {e.line}: {construct})"
    elif getattr(e, "line", None):
        msg = f"{msg} (PTX line {e.line})"
    return CudaCellError("unsupported", msg, n, cuda.text(n) if n is not None else "", str(e))


def run_cell(line: str, cell: str, namespace: dict | None = None):
    """What `%%cuda LINE` on `cell` shows: an `Inspector` on the launch (also stored in `namespace`
    under `--name`), or a `CudaCellError`."""
    from .inspector import Inspector
    try:
        spec, opts = parse_launch_line(line)
        module, cuda = compile_cell(cell, spec.get("kernel"))
        try:
            insp = Inspector(module, spec, engine=opts["engine"], kernel=spec.get("kernel"), names=opts["names"],
                             position=opts["position"], background=opts["background"], model=opts.get("model"),
                             prefix=opts.get("prefix"), source=cuda)
        except CudaCellError:
            raise
        except ValueError as e:
            if getattr(e, "line", None) is None:     # not a refusal at a PTX line (the assembler's)
                raise CudaCellError("launch", f"{type(e).__name__}: {e}", 1, "%%cuda " + line) from None
            raise _refusal(e, cuda) from None
        except Exception as e:            # a launch spec the kernel does not take, an engine error
            raise CudaCellError("launch", f"{type(e).__name__}: {e}", 1, "%%cuda " + line) from None
    except CudaCellError as err:
        return err
    if namespace is not None and opts["name"]:
        namespace[opts["name"]] = insp
    return insp


def load_ipython_extension(ipython):
    """`%load_ext qwengpu_widgets`: registers the `%%cuda` cell magic."""
    def cuda(line, cell):
        return run_cell(line, cell, ipython.user_ns)
    cuda.__doc__ = __doc__
    ipython.register_magic_function(cuda, magic_kind="cell", magic_name="cuda")


__all__ = ["CudaCellError", "parse_launch_line", "compile_cell", "run_cell", "load_ipython_extension"]
