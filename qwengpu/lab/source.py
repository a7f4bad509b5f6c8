"""The CUDA source of a launch, tied to its PTX through nvcc's line info.

`nvcc -lineinfo` writes, before the PTX instructions of each source line, a directive
`.loc FILE LINE COLUMN` (with `inlined_at FILE LINE COLUMN` when the code comes from a function
inlined there, such as `atomicAdd` from CUDA's headers) and, at the end, `.file FILE "path"`. The
lab compiles CUDA with it (`load_with_source`: the same instructions as without it, plus the
directives) and reads the map PTX line -> CUDA line back (`line_info`); shipped PTX (the suite's
kernels, a `.ptx` file compiled without it) has no CUDA source, and the views say so.

    program, source = load_with_source(cuda_text)          # (Module, CudaSource)
    source.line_of_ptx(instr.line)                          # the CUDA line an instruction came from
    source.text(4), source.ptx_lines(4)                     # a CUDA line's text and its PTX lines

Line numbers are the ones the user sees: a file's own, or a `%%cuda` cell's (the `%%cuda` line is
line 1, the source starts on line 2: `first_line=2`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

#: nvcc's `-lineinfo` string section (the names of inlined functions): data, not instructions
_DEBUG_STR = re.compile(r"^\s*\.section\s+\.debug_str\s*\{.*?^\s*\}", re.S | re.M)
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*?\binlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')


def strip_debug_strings(ptx: str) -> str:
    """PTX without nvcc's `.section .debug_str` (which the frontend does not read), the line
    numbers of everything else kept (the section is at the end)."""
    return _DEBUG_STR.sub("", ptx)


def line_info(ptx: str) -> tuple[dict, dict]:
    """({file index: path}, {PTX line: (file index, source line)}) from nvcc's `.loc`/`.file`
    directives: every instruction line after a `.loc` gets its location (code inlined from another
    file gets the place it was inlined at); `.loc F 0 0` (code of no one line) and lines before the
    first `.loc` get none."""
    files, where = {}, {}
    loc = None
    for n, line in enumerate(ptx.splitlines(), start=1):
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        m = _LOC.match(s)
        if m:
            f, ln = int(m.group(1)), int(m.group(2))
            if m.group(4) is not None:
                f, ln = int(m.group(4)), int(m.group(5))
            loc = (f, ln) if ln > 0 else None
            continue
        m = _FILE.match(s)
        if m:
            files[int(m.group(1))] = m.group(2)
            continue
        if loc is not None and not s.startswith((".", "}", "{", "$")):
            where[n] = loc
    return files, where


@dataclass
class CudaSource:
    """A kernel's CUDA source and which PTX lines each of its lines became."""
    name: str                      # the file, or "<CUDA source>" / "cell" for text
    lines: list                    # the source's lines
    ptx_to_line: dict              # PTX line -> source line (the file's own numbering, from 1)
    first_line: int = 1            # the number shown for the source's first line (a %%cuda cell: 2)
    _by_line: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        by: dict = {}
        for p, ln in sorted(self.ptx_to_line.items()):
            by.setdefault(ln, []).append(p)
        self._by_line = by

    def shown(self, line: int) -> int:
        """A source line (from 1) as numbered for the user."""
        return line + self.first_line - 1

    def line_of_ptx(self, ptx_line: int) -> int | None:
        """The CUDA line (as numbered for the user) a PTX line came from, or None."""
        ln = self.ptx_to_line.get(ptx_line)
        return None if ln is None else self.shown(ln)

    def text(self, line: int) -> str:
        """The text of a CUDA line (as numbered for the user)."""
        k = line - self.first_line
        return self.lines[k] if 0 <= k < len(self.lines) else ""

    def ptx_lines(self, line: int) -> list[int]:
        """The PTX lines a CUDA line (as numbered for the user) became."""
        return list(self._by_line.get(line - self.first_line + 1, []))

    def where(self, ptx_line: int | None) -> str | None:
        """'CUDA line 4: atomicAdd(out, a[i] * b[i]);' for a PTX line, or None."""
        ln = self.line_of_ptx(ptx_line) if ptx_line is not None else None
        if ln is None:
            return None
        return f"CUDA line {ln}: {self.text(ln).strip()}"

    @property
    def numbers(self) -> list[int]:
        """Every line's number as shown."""
        return [self.shown(i) for i in range(1, len(self.lines) + 1)]


def source_of(ptx: str, text: str | None = None, name: str = "<CUDA source>", first_line: int = 1) -> CudaSource | None:
    """The `CudaSource` of PTX compiled with `-lineinfo` from `text` (None: read from the main
    file `.file` names, if it is there). None when the PTX has no line info (shipped PTX) or no
    source text is to be had."""
    files, where = line_info(ptx)
    if not where:
        return None
    counts: dict = {}
    for f, _ in where.values():
        counts[f] = counts.get(f, 0) + 1
    main = max(counts, key=counts.get)          # the kernel's file: most instructions come from it
    if text is None:
        path = files.get(main)
        if not path or not os.path.isfile(path):
            return None
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        name = path
    return CudaSource(name, text.splitlines(), {p: ln for p, (f, ln) in where.items() if f == main}, first_line)


class SourceLines:
    """The CUDA lines of a view's positions (mixed into `LaunchView` and `MachineView`, which
    give `ptx_lines_at(position)` and `line_hit`). `source` is the launch's `CudaSource` (None:
    shipped PTX, no CUDA source)."""

    source: CudaSource | None = None

    def cuda_lines(self, position: int) -> list[int]:
        """The CUDA lines (as numbered for the user) position `position` is at: the interpreter's
        next instruction's; a pass's PTX instructions' (`PassLabel.ptx`)."""
        src = self.source
        if src is None:
            return []
        return sorted({src.line_of_ptx(p) for p in self.ptx_lines_at(position)} - {None})

    def line_hits(self) -> list[list[int]]:
        """Per position, the CUDA lines a breakpoint on which stops there (`line_hit`)."""
        got = getattr(self, "_line_hits", None)
        if got is None or len(got) != len(self):
            got, before = [], []
            for t in range(len(self)):
                now = self.cuda_lines(t)
                got.append(self.line_hit(t, now, before))
                before = now
            self._line_hits = got
        return got

    def find_line(self, line: int, start: int = 0) -> int | None:
        """The first position after `start` where CUDA line `line` executes (a breakpoint on it
        would stop there), or None."""
        hits = self.line_hits()
        for t in range(start + 1, len(self)):
            if line in hits[t]:
                return t
        return None

    def cuda_where(self, fault) -> str | None:
        """'CUDA line 4: ...' of a fault (its PTX line), or None."""
        if self.source is None or fault is None:
            return None
        return self.source.where(getattr(fault, "line", None))


#: nvcc's flags for the lab: the usual ones (`qwengpu.cuda.DEFAULT_FLAGS`) plus line info, which
#: adds directives and no instructions
def lab_flags() -> tuple:
    import inspect

    import qwengpu
    usual = inspect.signature(qwengpu.compile_cuda).parameters["flags"].default   # the lab sits above nvcc's wrapper
    return tuple(usual) + ("-lineinfo",)


def compile_with_lines(source, **kw) -> str:
    """CUDA source text or a `.cu` path compiled to PTX with line info (`qwengpu.compile_cuda`,
    cached like any compile), the debug string section left out."""
    import qwengpu
    return strip_debug_strings(qwengpu.compile_cuda(source, flags=lab_flags(), **kw))


def _is_ptx(text: str) -> bool:
    """PTX text, by the test `qwengpu.load_program` makes (an entry and a version or target)."""
    return ".entry" in text and (".version" in text or ".target" in text)


def _is_path(program) -> bool:
    return isinstance(program, os.PathLike) or (isinstance(program, str) and "\n" not in program
                                                 and not any(c in program for c in "{};"))


def load_with_source(program, *, cell: bool = False):
    """(validated Module, CudaSource or None) for the lab: CUDA text or a `.cu` file compiled with
    line info; PTX text, a `.ptx` file or a Module as they are (their `.loc` directives, if any,
    give the source when the file they name is readable). `cell`: the text is a `%%cuda` cell's
    body (numbered from 2)."""
    import qwengpu
    from qwengpu.ptx.ir import Module
    if isinstance(program, Module):
        return qwengpu.load_program(program), source_of(program.source)
    if _is_path(program):
        path = Path(program)
        if path.suffix == ".cu" and path.is_file():
            ptx = compile_with_lines(path)
            return qwengpu.load_program(ptx), source_of(ptx, path.read_text(encoding="utf-8"), str(path))
        if path.suffix == ".ptx" and path.is_file():
            ptx = strip_debug_strings(path.read_text(encoding="utf-8"))
            return qwengpu.load_program(ptx), source_of(ptx)
        return qwengpu.load_program(program), None      # its own error for a missing file
    if _is_ptx(program):
        ptx = strip_debug_strings(program)
        return qwengpu.load_program(ptx), source_of(ptx)
    ptx = compile_with_lines(program)
    return qwengpu.load_program(ptx), source_of(ptx, program, "cell" if cell else "<CUDA source>", 2 if cell else 1)
