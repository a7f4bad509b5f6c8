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


@dataclass
class Row:
    name: str
    exact: bool
    detail: str = ""
    steps: int = 0
    tokens: int | None = None
    seconds: float = 0.0
    checked: list = field(default_factory=list)   # what was compared: "oracle", "golden"
    margins: dict = field(default_factory=dict)   # model engines: smallest logit gap, memory and residual code margins

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

    def smallest_margins(self) -> dict:
        """{margin: (worst value, kernel)}: the smallest of each margin, the largest form noise."""
        out = {}
        for r in self.rows:
            for k, v in r.margins.items():
                sign = -1 if k == "form_noise" else 1          # a noise is worse when larger
                if k not in out or sign * v < sign * out[k][0]:
                    out[k] = (v, r.name)
        return out

    def summary_line(self) -> str:
        line = f"verify {self.engine}: {self.passed}/{len(self.rows)} exact"
        small = self.smallest_margins()
        if small:
            label = {"logit_gap": "logit gap {:.2f}", "memory": "memory code {:.2f}", "residual": "residual code {:.5f}",
                     "form_noise": "largest form noise {:.4f} (premise <= 0.1)"}
            line += "; smallest margins: " + ", ".join(label.get(k, k + " {}").format(v) + f" ({name})"
                                                        for k, (v, name) in small.items())
        return line

    def to_json(self) -> dict:
        return {"engine": self.engine, "passed": self.passed, "total": len(self.rows),
                "kernels": [{"name": r.name, "exact": r.exact, "detail": r.detail, "steps": r.steps,
                             "tokens": r.tokens, "seconds": round(r.seconds, 4), "checked": r.checked,
                             "margins": r.margins}
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


def verify_kernel(kernel, engine: str = "interp", **options) -> Row:
    from .api import run
    t0 = time.perf_counter()
    try:
        res = run(kernel.ptx(), kernel.spec(), engine=engine, **options)
    except Exception as e:   # a fault or an unsupported construct is a failure of this kernel
        return Row(kernel.name, False, f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)
    dt = time.perf_counter() - t0
    row = Row(kernel.name, True, steps=res.steps, tokens=res.tokens, seconds=dt)
    d = compare_buffers(res.buffers, kernel.expected(), nan_equal=True)
    row.checked.append("oracle")
    if d:
        row.exact, row.detail = False, f"oracle: {d}"
        return row
    if engine in ("model", "compact"):
        row.margins = res.margins()
        # the machine's token stream must be the simulator's, token for token
        m = options.get("machine")
        sim = run(kernel.ptx(), kernel.spec(), engine="sim",
                  **({"config": m.config} if m is not None else {})).extra["generated"]
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


def verify(engine: str = "interp", names=None, progress: bool = True, **options) -> Report:
    from . import suite
    ks = [suite.get(n) for n in names] if names else suite.kernels()
    if engine in ("model", "compact"):
        options.setdefault("progress", False)
    rows = []
    for k in tqdm(ks, desc=f"verify {engine}", disable=not progress, leave=False):
        rows.append(verify_kernel(k, engine, **options))
    return Report(engine, rows)
