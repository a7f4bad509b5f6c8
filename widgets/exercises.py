"""GPU exercises for a classroom, each checked on the machine: the student's CUDA is compiled, run
on the machine's token-level simulator (`engine="sim"`: the machine's own steps, in milliseconds;
`engine="compact"` runs the same launches through the model's forward passes) and compared with
the exercise's oracle on several launches; the check says what is wrong in the student's terms.

    %load_ext qwengpu_widgets
    %%exercise add_ten
    __global__ void add_ten(const int *a, int *out) {
        out[threadIdx.x] = a[threadIdx.x] + 10;
    }

or from Python: `check("add_ten", source)` (a `Verdict`: `.passed`, `.problems`). The exercises are
here (`EXERCISES`, `exercise(name)`); their templates and solutions are not: the notebooks in
`notebooks/exercises/` hold the templates, `notebooks/exercises/solutions/` the teacher's copies.

What a check looks at, in order: nvcc's errors and unsupported constructs (at the cell line), the
exercise's requirements on the code (shared memory, a barrier, a shuffle, no atomics, ...), every
launch — a fault names the thread, the buffer and the CUDA line; a launch that does not end says
so; wrong elements are listed with what was expected — and, where the exercise asks for it, the
warps' divergence (on the reference interpreter's trace: the SIMT stack the machine keeps too).
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

#: steps (tokens on the model engines) a checked launch may take: far above every solution, so a
#: launch that reaches it is a loop that does not end or a barrier some threads never reach
MAX_STEPS = 20_000

#: the engines that run the model's forward passes (a check on them shows no progress bar)
MODEL_ENGINES = ("compact", "compact-ref", "model")


@dataclass(frozen=True)
class Requirement:
    """A property of the student's code besides its results: `pattern` (a regular expression on
    the PTX instructions, comments and line info left out) must occur (`present`) or must not."""
    what: str                   # "uses shared memory", said when it fails
    pattern: str
    present: bool = True
    advice: str = ""

    def problem(self, ptx_code: str) -> str | None:
        found = re.search(self.pattern, ptx_code, re.M) is not None
        if found == self.present:
            return None
        return f"the kernel must {self.what}" + (f": {self.advice}" if self.advice else "")


SHARED = Requirement("use shared memory (`__shared__`)", r"^\s*(?:@!?%p\d+\s+)?(?:ld|st|atom|red)\.shared")
BARRIER = Requirement("wait for the whole block with `__syncthreads()`", r"^\s*bar(?:rier)?\.(?:sync|cta)")
SHUFFLE = Requirement("exchange values between lanes with a shuffle (`__shfl_down_sync`, `__shfl_sync`, ...)",
                      r"^\s*(?:@!?%p\d+\s+)?shfl\.")
ATOMIC = Requirement("update the bins with an atomic (`atomicAdd`)", r"^\s*(?:@!?%p\d+\s+)?(?:atom|red)\.")
NO_ATOMIC = Requirement("not use atomics (this exercise is about doing without them)",
                        r"^\s*(?:@!?%p\d+\s+)?(?:atom|red)\.", present=False)
NO_SHARED = Requirement("not use shared memory (the values travel between lanes in registers)",
                        r"^\s*(?:@!?%p\d+\s+)?(?:ld|st|atom|red)\.shared", present=False)


@dataclass(frozen=True)
class Case:
    """One launch of an exercise: its spec (`qwengpu.run`'s dict), the arguments' names and the
    buffers it must leave (argument index -> expected elements)."""
    spec: dict
    names: tuple
    expected: dict


@dataclass(frozen=True)
class Exercise:
    """A GPU exercise: what to write (`task`, markdown), the launches that check it (`cases()`),
    requirements on the code, and advice the check gives for the usual mistakes: `on_fault` when a
    launch faults, `on_wrong` when results are wrong, `uniform` when no warp may diverge."""
    name: str
    topic: str
    title: str
    task: str
    cases: Callable[[], list]
    requires: tuple = ()
    on_fault: str = ""
    on_wrong: str = ""
    uniform: bool = False

    def check(self, source: str, engine: str = "sim", first_line: int = 1) -> "Verdict":
        """Compile `source`, check the requirements, run every case on `engine`; `first_line`: the
        cell line of the source's first line (2 under `%%exercise`), for the line numbers said."""
        return _check(self, source, engine, first_line)

    def _repr_markdown_(self) -> str:
        return f"**{self.title}** (`{self.name}`, {self.topic})\n\n{self.task}"


@dataclass
class Verdict:
    """What a check found: `passed`, the `problems` (each a sentence for the student) and, per
    launch that ran to its end, the tokens the machine took (one forward pass each on the model)."""
    exercise: str
    passed: bool
    problems: list = field(default_factory=list)
    tokens: list = field(default_factory=list)
    engine: str = "sim"

    def summary(self) -> str:
        if self.passed:
            runs = len(self.tokens)
            return (f"✓ {self.exercise}: correct on {runs} launch{'es' if runs != 1 else ''} on the machine "
                    f"({self.engine}: {', '.join(map(str, self.tokens))} "
                    f"{'steps' if self.engine == 'interp' else 'tokens'})")
        return f"✗ {self.exercise}: not yet\n" + "\n".join(f"  - {p}" for p in self.problems)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        if self.passed:
            return (f'<div class="qg-verdict" data-passed="1" style="border-left:4px solid #2b8a3e;padding:6px 10px;'
                    f'background:#ebfbee;font:13px system-ui,sans-serif">{html.escape(self.summary())}</div>')
        items = "".join(f"<li>{html.escape(p)}</li>" for p in self.problems)
        return (f'<div class="qg-verdict" data-passed="0" style="border-left:4px solid #e03131;padding:6px 10px;'
                f'background:#fff5f5;font:13px system-ui,sans-serif"><b>✗ {html.escape(self.exercise)}: not yet</b>'
                f'<ul style="margin:4px 0 0 0;padding-left:20px">{items}</ul></div>')


class ExerciseNotSolved(Exception):
    """A failed check under `%%exercise`: raised so that running a notebook stops there (and a
    notebook of solutions run by a test fails); shown as the verdict, without a traceback."""

    def __init__(self, verdict: Verdict):
        self.verdict = verdict
        super().__init__(verdict.summary())

    def _render_traceback_(self) -> list:
        return ["\x1b[31m" + line + "\x1b[0m" for line in self.verdict.summary().splitlines()]


# -- the checking --------------------------------------------------------------------------------------

#: nvcc's `-lineinfo` debug string section (the names of inlined functions, e.g. `atomicAdd`): no
#: instructions, and not PTX the frontend reads
_DEBUG_SECTION = re.compile(r"^\s*\.section\s+\.debug\w*\s*\{.*?^\s*\}", re.S | re.M)


def _code_lines(ptx: str) -> str:
    """The PTX's instructions and declarations: no comments, no line info."""
    out = []
    for line in ptx.splitlines():
        s = line.split("//", 1)[0].strip()
        if s and not s.startswith((".loc", ".file")):
            out.append(s)
    return "\n".join(out)


def _cuda_lines(ptx: str) -> dict:
    """PTX line -> the CUDA source line it came from (nvcc's `.loc 1 N` before it)."""
    out, loc = {}, None
    for n, line in enumerate(ptx.splitlines(), start=1):
        s = line.strip()
        if s.startswith(".loc"):
            parts = s.split()
            if len(parts) > 2 and parts[1] == "1":
                loc = int(parts[2])
        elif s and not s.startswith("//"):
            out[n] = loc
    return out


def _thread_of(spec, block: int, warp: int, lane: int) -> str:
    """How a student names a thread: its threadIdx (and blockIdx when there are several blocks)."""
    bx, by, _ = spec.block
    t = warp * 4 + lane
    tid = f"threadIdx.x = {t}" if by == 1 else f"threadIdx = ({t % bx}, {t // bx % by})"
    gx, gy, _ = spec.grid
    if gx * gy == 1:
        return f"thread {tid}"
    bid = f"blockIdx.x = {block}" if gy == 1 else f"blockIdx = ({block % gx}, {block // gx})"
    return f"thread {tid} of block {bid}"


def _where_address(spec, names, address: int) -> str:
    """An address against the launch's buffers: inside one, or how far past/before the nearest."""
    regions = [(names[i], base, spec.args[i].data.nbytes, spec.args[i].data.dtype.itemsize)
               for i, base in enumerate(spec.buffer_addresses()) if base is not None]
    for name, base, size, item in regions:
        if base <= address < base + size:
            return f"inside `{name}` (element {(address - base) // item})"
    name, base, size, item = min(regions, key=lambda r: min(abs(address - r[1]), abs(address - (r[1] + r[2]))))
    if address >= base + size:
        return (f"`{name}[{(address - base) // item}]`, past the end of `{name}` ({size // item} elements, "
                f"0x{base:x}..0x{base + size - 1:x})")
    return f"address 0x{address:x}, before the start of `{name}` (0x{base:x})"


def _fault_problem(ex: Exercise, e, spec, names, module, ptx) -> str:
    kind = getattr(e, "kind", None)
    if kind is None:                                   # a step limit: not a fault of the program
        return (f"the launch did not end within {MAX_STEPS} steps: a loop that never exits, or a "
                "`__syncthreads()` that some threads never reach")
    where = []
    if e.block is not None and e.warp is not None and e.lane is not None:
        where.append(_thread_of(spec, e.block, e.warp, e.lane))
    line = None
    if e.pc is not None and e.kernel:
        try:
            line = _cuda_lines(ptx).get(module.kernel(e.kernel).body[e.pc].line)
        except (KeyError, IndexError):
            line = None
    what = {"write": "wrote", "read": "read", "atomic": "updated atomically"}.get(kind)
    if what and e.address is not None:
        text = f"{' '.join(where) or 'a thread'} {what} {_where_address(spec, names, e.address)}"
    else:
        text = f"{e.reason}" + (f" ({' '.join(where)})" if where else "")
    if line is not None:
        text += f", at line {line} of the kernel"
    return text + (f". {ex.on_fault}" if ex.on_fault else "")


def _format(v) -> str:
    return repr(float(v)) if isinstance(v, (float, np.floating)) else str(int(v))


def _wrong_problem(ex: Exercise, case: Case, got: list) -> str | None:
    """The first buffer that differs from the expected one, said element by element."""
    for i, want in case.expected.items():
        have = np.asarray(got[i])
        want = np.asarray(want, dtype=have.dtype)
        bad = np.flatnonzero(have != want)
        if not len(bad):
            continue
        name = case.names[i]
        shown = ", ".join(f"{name}[{j}] = {_format(have[j])} (expected {_format(want[j])})" for j in bad[:4])
        more = f" and {len(bad) - 4} more" if len(bad) > 4 else ""
        initial = case.spec["args"][i].get("data")
        untouched = initial is None and not have[bad].any()
        inputs = ", ".join(f"{case.names[k]} = {a['data']}" for k, a in enumerate(case.spec["args"])
                           if k not in case.expected and "data" in a)
        scalars = ", ".join(f"{case.names[k]} = {a['value']}" for k, a in enumerate(case.spec["args"]) if "scalar" in a)
        launch = f"grid {case.spec['grid']}, block {case.spec['block']}"
        text = (f"with {inputs}{', ' + scalars if scalars else ''} ({launch}): {shown}{more}"
                + (" — still 0: never written?" if untouched else ""))
        return text + (f". {ex.on_wrong}" if ex.on_wrong else "")
    return None


def _divergence_problem(module, spec, ptx) -> str | None:
    """The first step at which some of a warp's live lanes wait while the others run (the SIMT
    stack holds lanes that the step does not run: masked off by divergence), on the reference
    interpreter's trace."""
    import qwengpu
    r = qwengpu.run(module, spec, engine="interp", trace=True, max_steps=MAX_STEPS)
    lines = _cuda_lines(ptx)
    for s in r.trace.steps:
        live = 0
        for _, mask, _ in s.stack:
            live |= mask
        waiting = live & ~s.active
        if s.active and waiting:
            fn = module.functions.get(s.function)
            line = lines.get(fn.body[s.pc].line) if fn is not None and s.pc < len(fn.body) else None
            lanes = lambda m: ", ".join(str(lane) for lane in range(4) if m >> lane & 1)
            return (f"warp {s.warp} of block {s.block} diverges" + (f" at line {line}" if line else "")
                    + f": lanes {lanes(s.active)} run while lanes {lanes(waiting)} wait — its lanes took "
                    "different paths, and the warp runs the paths one after the other")
    return None


def _check(ex: Exercise, source: str, engine: str, first_line: int) -> Verdict:
    import qwengpu
    from qwengpu.launch import LaunchSpec

    from .magic import CudaCellError, compile_cell
    verdict = Verdict(ex.name, False, engine=engine)
    try:                                          # with line info: faults and divergence name CUDA lines
        ptx = _DEBUG_SECTION.sub("", qwengpu.compile_cuda(source, flags=("-O3", "-lineinfo")))
        module = qwengpu.load_program(ptx)
    except Exception as e:
        if type(e).__name__ not in ("CudaCompileError", "PTXSyntaxError", "PTXUnsupported") \
                and not hasattr(e, "construct"):
            raise
        try:
            compile_cell(source)                  # the same error, at its cell line
            err = CudaCellError("compile", str(e).splitlines()[-1] if str(e) else type(e).__name__)
        except CudaCellError as cell_error:
            err = cell_error
        line = f"line {err.line - 2 + first_line}: " if err.line else ""
        verdict.problems.append(f"it does not compile: {line}{err.message}"
                                + (f"\n      {err.text.strip()}" if err.text else ""))
        return verdict
    code = _code_lines(ptx)
    verdict.problems += [p for p in (r.problem(code) for r in ex.requires) if p]
    kernels = module.kernels
    if len(kernels) != 1:
        verdict.problems.append(f"write exactly one kernel (`__global__` function); this source has {len(kernels)}")
        return verdict
    cases = ex.cases()
    if len(kernels[0].params) != len(cases[0].names):
        verdict.problems.append(f"the kernel takes {len(kernels[0].params)} parameter(s); the exercise launches it with "
                                f"{len(cases[0].names)}: {', '.join(cases[0].names)}")
        return verdict
    for case in cases:
        spec = LaunchSpec.from_json(case.spec)
        try:
            r = qwengpu.run(module, spec, engine=engine, max_steps=MAX_STEPS,
                            **({"progress": False} if engine in MODEL_ENGINES else {}))
        except Exception as e:
            if not hasattr(e, "reason"):          # not an ExecutionFault: a launch the kernel cannot take
                verdict.problems.append(f"the launch failed: {type(e).__name__}: {e} (does the kernel take the "
                                        f"arguments {', '.join(case.names)}?)")
                return verdict
            verdict.problems.append(_fault_problem(ex, e, spec, case.names, module, ptx))
            return verdict
        wrong = _wrong_problem(ex, case, r.buffers)
        if wrong:
            verdict.problems.append(wrong)
            return verdict
        verdict.tokens.append(r.tokens if r.tokens is not None else r.steps)
    if ex.uniform and not verdict.problems:
        diverges = _divergence_problem(module, LaunchSpec.from_json(cases[0].spec), ptx)
        if diverges:
            verdict.problems.append(diverges + ". Make every warp take one path: choose which element each "
                                    "thread handles so that the branch is the same for the 4 lanes of a warp")
    verdict.passed = not verdict.problems
    return verdict


# -- the exercises -------------------------------------------------------------------------------------

def _ints(n: int, seed: int, low: int = -50, high: int = 50) -> list:
    return [int(v) for v in np.random.default_rng(seed).integers(low, high, n)]


def _buf(data) -> dict:
    return {"buffer": "int32", "data": [int(v) for v in data]}


def _zeros(n: int) -> dict:
    return {"buffer": "int32", "size": n}


def _int(v: int) -> dict:
    return {"scalar": "int32", "value": int(v)}


def _i32(values) -> np.ndarray:
    """Expected int32 results, wrapping as the machine's 32-bit arithmetic does."""
    return np.asarray(values, dtype=np.int64).astype(np.int32)


def _add_ten_cases():
    return [Case({"grid": 1, "block": 4, "args": [_buf(a), _zeros(4)]}, ("a", "out"), {1: _i32(np.add(a, 10))})
            for a in ([0, 1, 2, 3], _ints(4, 1))]


def _zip_cases():
    out = []
    for a, b in (([1, 2, 3, 4], [10, 20, 30, 40]), (_ints(4, 2), _ints(4, 3))):
        out.append(Case({"grid": 1, "block": 4, "args": [_buf(a), _buf(b), _zeros(4)]}, ("a", "b", "out"),
                        {2: _i32(np.add(a, b))}))
    return out


def _guard_cases():
    out = []
    for n, block in ((5, 8), (3, 4), (8, 8)):
        a = _ints(n, 10 + n, -20, 20)
        out.append(Case({"grid": 1, "block": block, "args": [_buf(a), _zeros(n), _int(n)]}, ("a", "out", "n"),
                        {1: _i32(np.square(a))}))
    return out


def _blocks_cases():
    out = []
    for n, grid in ((10, 3), (16, 4), (5, 2)):
        a = _ints(n, 20 + n)
        out.append(Case({"grid": grid, "block": 4, "args": [_buf(a), _zeros(n), _int(n)]}, ("a", "out", "n"),
                        {1: _i32(np.add(a, 10))}))
    return out


def _transpose_cases():
    out = []
    for rows, cols in ((3, 4), (4, 2), (4, 4)):
        a = np.arange(rows * cols).reshape(rows, cols) + 1
        out.append(Case({"grid": 1, "block": [4, 4], "args": [_buf(a.ravel()), _zeros(rows * cols), _int(rows), _int(cols)]},
                        ("a", "out", "rows", "cols"), {1: _i32(a.T.ravel())}))
    return out


def _reverse_cases():
    return [Case({"grid": 1, "block": 8, "args": [_buf(a), _zeros(8)]}, ("a", "out"), {1: _i32(a[::-1])})
            for a in (list(range(1, 9)), _ints(8, 30))]


def _block_sum_cases():
    out = []
    for seed in (40, 41):
        a = np.array(_ints(16, seed))
        out.append(Case({"grid": 2, "block": 8, "args": [_buf(a), _zeros(2)]}, ("a", "out"),
                        {1: _i32(a.reshape(2, 8).sum(axis=1))}))
    return out


def _scan_cases():
    return [Case({"grid": 1, "block": 8, "args": [_buf(a), _zeros(8)]}, ("a", "out"), {1: _i32(np.cumsum(a))})
            for a in ([1] * 8, _ints(8, 50, 0, 20))]


def _uniform_reference(x: np.ndarray, reps: int) -> np.ndarray:
    out = []
    for i, v in enumerate(x.tolist()):
        for _ in range(reps):
            v = (v * 3 + 1) if i % 2 == 0 else (v // 2 if v >= 0 else -((-v) // 2))
        out.append(v)
    return _i32(out)


def _uniform_cases():
    out = []
    for seed, reps in ((60, 3), (61, 2)):
        x = np.array(_ints(8, seed, 0, 100))
        out.append(Case({"grid": 1, "block": 8, "args": [_buf(x), _zeros(8), _int(reps)]}, ("x", "out", "reps"),
                        {1: _uniform_reference(x, reps)}))
    return out


def _histogram_cases():
    out = []
    for seed in (70, 71):
        x = np.random.default_rng(seed).integers(0, 4, 16)
        out.append(Case({"grid": 2, "block": 8, "args": [_buf(x), _zeros(4)]}, ("x", "bins"),
                        {1: _i32(np.bincount(x, minlength=4))}))
    return out


def _warp_sum_cases():
    out = []
    for a in (list(range(1, 9)), _ints(8, 80)):
        out.append(Case({"grid": 1, "block": 8, "args": [_buf(a), _zeros(2)]}, ("a", "out"),
                        {1: _i32(np.reshape(a, (2, 4)).sum(axis=1))}))
    return out


def _rotate_cases():
    out = []
    for a in (list(range(10, 18)), _ints(8, 90)):
        w = np.reshape(a, (2, 4))
        out.append(Case({"grid": 1, "block": 8, "args": [_buf(a), _zeros(8)]}, ("a", "out"),
                        {1: _i32(np.roll(w, -1, axis=1).ravel())}))
    return out


EXERCISES: dict = {e.name: e for e in [
    Exercise("add_ten", "indexing", "1 · Map",
             "Every thread adds 10 to one element: `out[i] = a[i] + 10`, where `i` is the thread's index in "
             "its block (`threadIdx.x`). One block of 4 threads, 4 elements.",
             _add_ten_cases),
    Exercise("zip_add", "indexing", "2 · Zip",
             "Add two arrays element by element: `out[i] = a[i] + b[i]`. One block of 4 threads.",
             _zip_cases),
    Exercise("guard", "guards", "3 · Guard",
             "Square `n` elements: `out[i] = a[i] * a[i]`. The block may have **more threads than elements** "
             "(8 threads for 5 elements): a thread whose element does not exist must do nothing.",
             _guard_cases,
             on_fault="There are more threads than elements: guard the work with `if (i < n)`."),
    Exercise("blocks", "indexing", "4 · Blocks",
             "Add 10 to `n` elements with **several blocks** of 4 threads (3 blocks for 10 elements). A thread's "
             "element is its index in the whole grid: `blockIdx.x * blockDim.x + threadIdx.x`. Guard it.",
             _blocks_cases,
             on_fault="The last block has threads past the end: guard with `if (i < n)`.",
             on_wrong="Every block has its own `threadIdx.x` = 0..3: the grid-wide index needs `blockIdx.x` and "
                      "`blockDim.x` too."),
    Exercise("transpose", "2D indexing", "5 · Transpose",
             "`a` is a matrix of `rows` x `cols` ints, row after row. Write its transpose to `out` (`cols` x `rows`): "
             "`out[x][y] = a[y][x]`. One block of 4 x 4 threads: thread (`threadIdx.x`, `threadIdx.y`) = "
             "(column x, row y) of `a`; some threads have no element.",
             _transpose_cases,
             on_fault="Some threads lie outside the matrix: guard with `if (x < cols && y < rows)`.",
             on_wrong="Element (row y, column x) of `a` is `a[y * cols + x]`; of `out` (cols x rows) "
                      "it is row x, column y: `out[x * rows + y]`."),
    Exercise("shared_reverse", "shared memory", "6 · Reverse through shared memory",
             "Reverse 8 elements with one block of 8 threads (**two warps**): each thread reads its own element "
             "`a[i]` into a shared array, and then writes `out[i] = tile[7 - i]`.",
             _reverse_cases, requires=(SHARED, BARRIER),
             on_wrong="A warp may run ahead of the other: warp 0 read `tile[7..4]` before warp 1 had written "
                      "them. Wait until the whole tile is written."),
    Exercise("block_sum", "reductions", "7 · Block sum",
             "Each block of 8 threads sums its 8 elements of `a` and writes the sum to `out[blockIdx.x]`. Use "
             "a tree in shared memory: 8 → 4 → 2 → 1 partial sums, with a barrier after each round. "
             "No atomics.",
             _block_sum_cases, requires=(SHARED, BARRIER, NO_ATOMIC),
             on_wrong="Each round must see the partial sums of the previous one: `__syncthreads()` between the "
                      "rounds, outside any `if`."),
    Exercise("prefix_sum", "reductions", "8 · Prefix sum",
             "Write the inclusive prefix sum `out[i] = a[0] + ... + a[i]` of 8 elements with one block of 8 "
             "threads (Hillis–Steele: in round `off = 1, 2, 4`, every `i >= off` adds `s[i - off]`).",
             _scan_cases, requires=(SHARED, BARRIER),
             on_wrong="In a round, a thread may read `s[i - off]` after another warp already updated it: read "
                      "the value into a register, `__syncthreads()`, then write, then `__syncthreads()` again."),
    Exercise("uniform_branches", "divergence", "9 · Branches without divergence",
             "Element `i` of `x` (8 of them) is transformed `reps` times: even `i` by `v = 3 * v + 1`, odd `i` by "
             "`v = v / 2`. The result must be the same as the template's, but **no warp may diverge**: "
             "choose which element each thread handles so that all 4 lanes of a warp take the same branch.",
             _uniform_cases, uniform=True),
    Exercise("histogram", "atomics", "10 · Histogram",
             "Count the values of `x` (16 values in 0..3, two blocks of 8 threads) into `bins[4]`.",
             _histogram_cases, requires=(ATOMIC,),
             on_wrong="Threads that add to the same bin at the same time read the same old count and each "
                      "write count + 1: updates are lost. `atomicAdd` makes each update whole."),
    Exercise("warp_sum", "shuffles", "11 · Warp sum with shuffles",
             "Each warp (4 lanes) sums its 4 elements of `a` and lane 0 writes the sum to `out[warp]`: the "
             "values move between lanes in registers with `__shfl_down_sync(0xf, v, offset)` — no shared "
             "memory, no atomics.",
             _warp_sum_cases, requires=(SHUFFLE, NO_SHARED, NO_ATOMIC),
             on_wrong="Offsets 2 then 1: after `v += __shfl_down_sync(0xf, v, 2)` lane 0 holds a[0] + a[2], "
                      "lane 1 a[1] + a[3]."),
    Exercise("rotate", "shuffles", "12 · Rotate within a warp",
             "Each lane writes its right neighbour's element (lane 3 takes lane 0's): `out[i] = a[4 * warp + "
             "(lane + 1) % 4]`. Each thread loads only its own `a[i]`; the value comes from the neighbour "
             "with `__shfl_sync`.",
             _rotate_cases,
             requires=(SHUFFLE, NO_SHARED,
                       Requirement("load only its own element (one load of `a`)",
                                   r"\A(?![\s\S]*ld\.global[\s\S]*ld\.global)[\s\S]*ld\.global",
                                   advice="read `a[i]` once and take the neighbour's value from its lane")),
             on_wrong="`__shfl_sync(0xf, v, src)` gives every lane the `v` of lane `src`."),
]}


def exercise(name: str) -> Exercise:
    """The exercise called `name` (one of `EXERCISES`)."""
    try:
        return EXERCISES[name]
    except KeyError:
        raise KeyError(f"no exercise {name!r} (there are: {', '.join(EXERCISES)})") from None


def check(name: str, source: str, engine: str = "sim") -> Verdict:
    """Check the CUDA `source` for the exercise `name` on the machine (`Exercise.check`)."""
    return exercise(name).check(source, engine=engine)


def run_exercise_cell(line: str, cell: str) -> Verdict:
    """`%%exercise NAME [--engine E]` on `cell`: the verdict when the check passes; raises
    `ExerciseNotSolved` (shown as the verdict) when it does not."""
    parts = line.split()
    if not parts:
        raise ValueError(f"%%exercise NAME: which exercise? ({', '.join(EXERCISES)})")
    engine = "sim"
    if "--engine" in parts:
        at = parts.index("--engine")
        engine = parts[at + 1] if at + 1 < len(parts) else engine
        parts = parts[:at] + parts[at + 2:]
    verdict = exercise(parts[0]).check(cell, engine=engine, first_line=2)
    if not verdict.passed:
        raise ExerciseNotSolved(verdict)
    return verdict


def load_ipython_extension(ipython):
    """Registers the `%%exercise NAME` cell magic (`%load_ext qwengpu_widgets` does, with `%%cuda`)."""
    def exercise(line, cell):
        return run_exercise_cell(line, cell)
    exercise.__doc__ = __doc__
    ipython.register_magic_function(exercise, magic_kind="cell", magic_name="exercise")


__all__ = ["EXERCISES", "Exercise", "Case", "Requirement", "Verdict", "ExerciseNotSolved", "exercise", "check",
           "run_exercise_cell", "load_ipython_extension", "MAX_STEPS"]
