"""`qwengpu verify`: every suite kernel on an engine against its NumPy oracle (and recorded
hardware goldens where present).

Comparison is bit-exact, with one allowance for oracles only: NumPy does not reproduce the GPU's
canonical NaN payload, so against an oracle any NaN matches any NaN. Hardware goldens and
engine-vs-interpreter comparisons allow nothing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from .api import MODEL_ENGINES, machine_refusals


@dataclass
class Row:
    name: str
    exact: bool
    detail: str = ""
    steps: int = 0
    tokens: int | None = None
    seconds: float = 0.0
    checked: list = field(default_factory=list)   # what was compared: "oracle", "symbols", "golden"
    margins: dict = field(default_factory=dict)   # model engines: smallest logit gap, memory and residual code margins
    noise_at: str | None = None                   # the circuit node of the largest form noise
    refused: bool = False                         # the machine would not take the program (capacity, construct)

    def margin_text(self) -> str:
        from .launch import margin_text
        return margin_text(self.margins)


@dataclass
class Report:
    engine: str
    rows: list[Row]

    @property
    def passed(self) -> int:
        return sum(r.exact for r in self.rows)

    @property
    def all_exact(self) -> bool:
        return self.passed == len(self.rows)

    @property
    def refused(self) -> list:
        """The rows whose program the machine refused before running (`qwengpu.api.machine_refusals`), not wrong results."""
        return [r for r in self.rows if r.refused]

    @property
    def wrong(self) -> list:
        """The rows that ran (or faulted) and did not match."""
        return [r for r in self.rows if not r.exact and not r.refused]

    @property
    def exit_status(self) -> int:
        """`qwengpu verify`'s: 0 all exact, 1 a kernel wrong, 3 none wrong but some refused."""
        return 1 if self.wrong else 3 if self.refused else 0

    def smallest_margins(self) -> dict:
        """{margin: (worst value, kernel)}: the smallest of each margin, the largest form noise
        (its kernel named with the circuit node where it peaked)."""
        out = {}
        for r in self.rows:
            for k, v in r.margins.items():
                sign = -1 if k == "form_noise" else 1          # a noise is worse when larger
                if k not in out or sign * v < sign * out[k][0]:
                    out[k] = (v, f"{r.name} at {r.noise_at}" if k == "form_noise" and r.noise_at else r.name)
        return out

    def summary_line(self) -> str:
        line = f"verify {self.engine}: {self.passed}/{len(self.rows)} exact"
        if self.refused:
            line += (f" ({len(self.wrong)} wrong, {len(self.refused)} refused by the machine: "
                     + ", ".join(r.name for r in self.refused) + ")")
        small = self.smallest_margins()
        if small:
            label = {"logit_gap": "logit gap {:.2f}", "memory": "memory code {:.2f}", "residual": "residual code {:.5f}",
                     "form_noise": "largest form noise {:.4f} (premise <= 0.1)"}
            line += "; smallest margins: " + ", ".join(label.get(k, k + " {}").format(v) + f" ({name})"
                                                        for k, (v, name) in small.items())
        return line

    def to_json(self) -> dict:
        return {"engine": self.engine, "passed": self.passed, "total": len(self.rows),
                "wrong": [r.name for r in self.wrong], "refused": [r.name for r in self.refused],
                "kernels": [{"name": r.name, "exact": r.exact, "refused": r.refused, "detail": r.detail, "steps": r.steps,
                             "tokens": r.tokens, "seconds": round(r.seconds, 4), "checked": r.checked,
                             "margins": r.margins, **({"form_noise_at": r.noise_at} if r.noise_at else {})}
                            for r in self.rows]}


def first_difference(got: np.ndarray, want: np.ndarray, nan_equal: bool) -> str | None:
    """None when equal (bit-exact; NaN==NaN when `nan_equal`), else where they first differ."""
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if got.dtype != want.dtype:
        want = want.astype(got.dtype)
    gb = got.view(f"u{got.dtype.itemsize}")
    wb = want.view(f"u{want.dtype.itemsize}")
    diff = gb != wb
    if nan_equal and got.dtype.kind == "f":
        diff &= ~(np.isnan(got) & np.isnan(want))
    if not diff.any():
        return None
    i = int(np.flatnonzero(diff)[0])
    return f"index {i}: got {got[i]!r} (0x{int(gb[i]):x}), expected {want[i]!r} (0x{int(wb[i]):x})"


def compare_buffers(got: list, want: list, nan_equal: bool) -> str | None:
    for k, (g, w) in enumerate(zip(got, want)):
        if w is None or g is None:
            continue
        d = first_difference(np.asarray(g), np.asarray(w), nan_equal)
        if d:
            return f"arg {k} {d}"
    return None


def compare_symbols(got: dict, want: dict, nan_equal: bool) -> str | None:
    """None when every variable of `want` ({name: array}) is in `got` with the same contents."""
    for name, w in want.items():
        if name not in got:
            return f"symbol {name} not read back (the result has {', '.join(got) or 'none'})"
        d = first_difference(np.asarray(got[name]), np.asarray(w), nan_equal)
        if d:
            return f"symbol {name} {d}"
    return None


#: the machines kernels that name their own geometry run on, loaded once per process:
#: {(stock checkpoint?, geometry name): Machine}
_OWN_MACHINES: dict = {}


def own_machine_options(kernel, engine: str, options: dict) -> dict:
    """`options` with the machine `kernel` names (`SuiteKernel.machine`: a geometry larger than the
    built-in one) where the caller named none: the simulator's `config`, or the model engines'
    `machine` (built into the cache on first use). A machine the caller names is kept: a kernel
    it cannot hold is refused, with the assembler's message."""
    name = getattr(kernel, "machine", None)
    if name is None or engine == "interp":
        return options
    if engine == "sim":
        return options if options.get("config") is not None else {**options, "config": name}
    if options.get("machine") is not None:
        return options
    from .api import default_machine
    key = (engine == "model", name)
    if key not in _OWN_MACHINES:
        _OWN_MACHINES[key] = default_machine(engine, False, machine=name)
    return {**options, "machine": _OWN_MACHINES[key]}


def verify_kernel(kernel, engine: str = "interp", **options) -> Row:
    """One suite kernel on `engine`, checked against its oracle (and, on the model engines, the
    simulator's token stream; hardware goldens where recorded). A kernel that names its machine
    runs on it unless `options` name one (`own_machine_options`)."""
    from .api import run
    options = own_machine_options(kernel, engine, options)
    if kernel.max_steps and engine != "interp":
        options.setdefault("max_steps", kernel.max_steps)
    t0 = time.perf_counter()
    try:
        res = run(kernel.ptx(), kernel.spec(), engine=engine, **options)
    except Exception as e:   # a fault or an unsupported construct is a failure of this kernel
        res = e
    return check_result(kernel, engine, res, time.perf_counter() - t0, options.get("machine"))


def check_result(kernel, engine: str, res, seconds: float, machine=None) -> Row:
    """A Row for `res`, the LaunchResult (or the exception) of `kernel` on `engine`."""
    from .api import run
    if isinstance(res, Exception):
        return Row(kernel.name, False, f"{type(res).__name__}: {res}", seconds=seconds,
                   refused=isinstance(res, machine_refusals()))
    row = Row(kernel.name, True, steps=res.steps, tokens=res.tokens, seconds=seconds)
    d = compare_buffers(res.buffers, kernel.expected(), nan_equal=True)
    row.checked.append("oracle")
    want_symbols = kernel.expected_symbols() if hasattr(kernel, "expected_symbols") else None
    if not d and want_symbols is not None:          # the module variables the oracle gives ("symbols")
        row.checked.append("symbols")
        d = compare_symbols(res.symbols, want_symbols, nan_equal=True)
    if d:
        row.exact, row.detail = False, f"oracle: {d}"
        return row
    want = kernel.expected_printf() if hasattr(kernel, "expected_printf") else None
    if want is not None:
        row.checked.append("printf")
        got = res.printf.text() if res.printf is not None else ""
        if got != want:
            i = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            row.exact, row.detail = False, f"printf output differs at character {i}: {got[i:i + 40]!r}"
            return row
    if engine in MODEL_ENGINES:
        row.margins = res.margins()
        row.noise_at = res.extra.get("form_noise_at")
        # the machine's token stream must be the simulator's, token for token
        sim = run(kernel.ptx(), kernel.spec(), engine="sim",
                  **({"config": machine.config} if machine is not None else {})).extra["generated"]
        row.checked.append("simulator")
        got = res.extra["generated"]
        if got != sim:
            i = next((j for j, (a, b) in enumerate(zip(got, sim)) if a != b), min(len(got), len(sim)))
            row.exact, row.detail = False, f"token {i}: {got[i:i + 1]} where the simulator has {sim[i:i + 1]}"
            return row
    golden = kernel.golden() if hasattr(kernel, "golden") else None
    if golden is not None:
        row.checked.append("golden")
        d = compare_buffers(res.buffers, golden, nan_equal=False)
        if d:
            row.exact, row.detail = False, f"hardware golden: {d}"
    return row


_WORKER: dict = {}


def _worker_init(engine: str, options: dict, machine_factory, own_machines: bool):
    import torch
    torch.set_num_threads(1)
    _WORKER.update(engine=engine, options=dict(options), factory=machine_factory, own=own_machines)


def _worker_verify(name: str) -> Row:
    from . import suite
    kernel = suite.get(name)
    opts = _WORKER["options"]
    if _WORKER["own"] and kernel.machine is not None:     # its own machine (`own_machine_options`)
        return verify_kernel(kernel, _WORKER["engine"], **{"progress": False, **opts, "machine": None})
    if opts.get("machine") is None:                  # once per worker process
        opts["machine"] = _WORKER["factory"]()
    return verify_kernel(kernel, _WORKER["engine"], **{"progress": False, **opts})


def _verify_in_processes(engine: str, ks: list, jobs: int, progress: bool, options: dict, machine_factory) -> list:
    """The kernels shared out to `jobs` worker processes (each makes the machine once with
    `machine_factory`, a picklable callable), longest programs first."""
    import functools
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from .api import default_machine
    own = machine_factory is None and options.get("machine") is None    # no machine named: each kernel's own
    options.pop("machine", None)
    factory = machine_factory or functools.partial(default_machine, engine, False)
    order = sorted(ks, key=lambda k: -k.ptx_path.stat().st_size)      # big programs run long: start them first
    rows = {}
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                             initargs=(engine, options, factory, own)) as pool:
        futures = {pool.submit(_worker_verify, k.name): k.name for k in order}
        for fut in tqdm(futures, desc=f"verify {engine} ({jobs} processes)", disable=not progress, leave=False):
            rows[futures[fut]] = fut.result()
    return [rows[k.name] for k in ks]


def verify(engine: str = "interp", names=None, progress: bool = True, batch_size: int = 1, jobs: int = 1,
           machine_factory=None, **options) -> Report:
    """Every kernel (or `names`) on `engine` against its oracle. On the model engines the kernels
    run through `run_many` in batches of `batch_size` (a kernel's seconds: its batch's time shared
    by generated tokens), or, with `jobs` > 1, one by one in that many processes, each making its
    machine with `machine_factory` (default: the built-in machine)."""
    from . import suite
    from .api import default_machine, run_many
    ks = [suite.get(n) for n in names] if names else suite.kernels()
    if engine in MODEL_ENGINES and jobs > 1:
        return Report(engine, _verify_in_processes(engine, ks, jobs, progress, dict(options), machine_factory))
    if engine not in MODEL_ENGINES:
        return Report(engine, [verify_kernel(k, engine, **options)
                               for k in tqdm(ks, desc=f"verify {engine}", disable=not progress, leave=False)])
    options.setdefault("progress", False)
    named = options.get("machine")
    builtin = None
    rows = []
    bar = tqdm(total=len(ks), desc=f"verify {engine}", disable=not progress, leave=False)
    for chunk in _batches(ks, max(1, batch_size), by_machine=named is None):
        if named is None and chunk[0].machine is not None:     # the machine these kernels name
            options = own_machine_options(chunk[0], engine, {**options, "machine": None})
        else:
            if named is None and builtin is None:
                builtin = default_machine(engine, progress)
            options = {**options, "machine": named or builtin}
        t0 = time.perf_counter()
        try:
            results = run_many([k.ptx() for k in chunk], [k.spec() for k in chunk], engine=engine,
                               return_exceptions=True, **options)
        except Exception as e:             # a kernel the machine cannot take fails before the batch runs
            if len(chunk) > 1:
                results = []
                for k in chunk:
                    try:
                        results += run_many([k.ptx()], [k.spec()], engine=engine, return_exceptions=True, **options)
                    except Exception as e1:
                        results.append(e1)
            else:
                results = [e]
        dt = time.perf_counter() - t0
        total = sum(getattr(r, "tokens", 0) or 0 for r in results) or 1
        for k, r in zip(chunk, results):
            share = dt * (getattr(r, "tokens", 0) or 0) / total if len(chunk) > 1 else dt
            rows.append(check_result(k, engine, r, share, options.get("machine")))
            bar.update(1)
    bar.close()
    return Report(engine, rows)


def _batches(ks: list, size: int, by_machine: bool) -> list:
    """`ks` in runs of at most `size` kernels; with `by_machine`, each run's kernels name the same
    machine (`SuiteKernel.machine`), so that a batch runs on one."""
    out = []
    for k in ks:
        if out and len(out[-1]) < size and (not by_machine or out[-1][0].machine == k.machine):
            out[-1].append(k)
        else:
            out.append([k])
    return out
