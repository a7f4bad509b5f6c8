"""`qwengpu soak`: one long launch on the compact engine, its result checked against the
interpreter, its margins followed over the whole run.

The launch is a suite kernel whose second argument is a loop count: `lcg_soak` (32-bit LCG steps
on 4 lanes: multiplier, adder, selects; the default) or `float_soak` (a logistic map in f32: the
float unit's multiplies, FMAs, compares and max on `--machine compact-fpu`), with its loop count
chosen so that the machine generates at least `tokens` tokens. Every `window` generated tokens the run records the smallest logit gap, the memory code
margin, the residual code margin and the largest form noise of that window, so a drift shows where
it starts (the reference system's engines were seen to diverge at token 1.67 M).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field


@dataclass
class SoakReport:
    kernel: str
    engine: str
    tokens: int
    loop_count: int
    seconds: float
    exact: bool                          # buffers == the interpreter's == the oracle's
    detail: str
    window: int
    windows: list = field(default_factory=list)   # per window: {"end", "logit_gap", "memory", "residual", "form_noise"}

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def worst(self) -> dict:
        """Over the whole run: the smallest of each margin, the largest form noise."""
        out = {}
        for key in ("logit_gap", "memory", "residual"):
            vals = [w[key] for w in self.windows if w.get(key) is not None]
            if vals:
                out[key] = min(vals)
        noise = [w["form_noise"] for w in self.windows if w.get("form_noise") is not None]
        if noise:
            out["form_noise"] = max(noise)
        return out

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "engine": self.engine, "tokens": self.tokens, "loop_count": self.loop_count,
                "seconds": round(self.seconds, 2), "tokens_per_s": round(self.tokens_per_s, 1), "exact": self.exact,
                "detail": self.detail, "window": self.window, "worst": self.worst(), "windows": self.windows}


#: the suite kernels made for soaking: (out, loop count)
SOAK_KERNELS = ("lcg_soak", "float_soak")


def loop_count_for(tokens: int, config=None, kernel: str = "lcg_soak") -> int:
    """The loop count of `kernel` whose launch generates at least `tokens` tokens (the token count
    is linear in it, measured on the simulator at two small counts)."""
    from . import suite
    from .api import run
    k = suite.get(kernel)
    opts = {} if config is None else {"config": config}

    def count(n):
        spec = k.spec()
        spec.args[1].value = spec.args[1].value.__class__(n)
        return run(k.ptx(), spec, engine="sim", **opts).tokens

    a, b = count(16), count(32)                          # multiples of nvcc's 4-fold unrolling
    per = (b - a) / 16
    n = max(16, 16 + int(math.ceil((tokens - a) / per / 4)) * 4)
    return n + 4 * max(1, n // 400)                      # 1% more: the count is not quite linear


def soak(tokens: int = 1_000_000, window: int = 10_000, machine=None, progress: bool = True,
         kernel: str = "lcg_soak") -> SoakReport:
    """Run `kernel` (one of `SOAK_KERNELS`) for at least `tokens` generated tokens on the compact
    engine; `machine`: a built machine or a geometry's name (default the built-in one)."""
    import numpy as np

    from . import suite
    from .machine.config import BUILTIN
    from .runtime.checkpoint import load_machine
    from .runtime.run import run_on_model
    from .api import load_program, run
    from .verify import compare_buffers
    if kernel not in SOAK_KERNELS:
        raise ValueError(f"soak runs {', '.join(SOAK_KERNELS)}, not {kernel!r}")
    if machine is None or isinstance(machine, str):
        machine = load_machine(machine or BUILTIN, progress=progress)
    k = suite.get(kernel)
    n = loop_count_for(tokens, machine.config, kernel)
    spec = k.spec()
    spec.args[1].value = spec.args[1].value.__class__(n)
    module = load_program(k.ptx())
    windows: list = []

    def on_token(i, text, state):
        if (i + 1) % window:
            return
        _, mem_margin = machine.reader.memory(state)
        windows.append({"end": i + 1, "memory": mem_margin,
                        "residual": 0.5 - state.residual_worst if machine.probes else None,
                        "form_noise": state.noise_worst if machine.lattices else None})
        state.residual_worst = state.noise_worst = 0.0       # the next window measures afresh

    t0 = time.perf_counter()
    res = run_on_model(module, spec, machine=machine, forward="compact", max_tokens=2 * tokens + 10 * window,
                       progress=progress, on_token=on_token)
    dt = time.perf_counter() - t0
    gaps = np.asarray(res.extra["logit_gaps"])
    start = 0
    for w in windows:
        w["logit_gap"] = float(gaps[start:w["end"]].min())
        start = w["end"]
    if start < len(gaps):                                  # the last, partial window
        windows.append({"end": len(gaps), "logit_gap": float(gaps[start:].min()), "memory": res.extra["memory_margin"],
                        "residual": res.extra.get("residual_margin"), "form_noise": res.extra.get("form_noise")})
    interp = run(module, spec, engine="interp")
    detail = compare_buffers(res.buffers, interp.buffers, nan_equal=False) or \
        compare_buffers(res.buffers, k.expected(spec), nan_equal=False)
    return SoakReport(kernel, "compact", res.tokens, n, dt, detail is None, detail or "", window, windows)


def plot(report: SoakReport, path) -> None:
    """The margins' minima (form noise: maxima) per window against generated tokens."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ends = [w["end"] for w in report.windows]
    series = [("logit_gap", "smallest logit gap"), ("memory", "memory code margin (of 16)"),
              ("residual", "residual code margin (of 0.5)"), ("form_noise", "largest form noise (premise <= 0.1)")]
    fig, axes = plt.subplots(len(series), 1, figsize=(11, 9), sharex=True)
    for ax, (key, label) in zip(axes, series):
        pts = [(e, w[key]) for e, w in zip(ends, report.windows) if w.get(key) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ".-", ms=3)
        if key == "form_noise":
            ax.axhline(0.1, color="r", lw=0.8, ls="--")
        ax.set_ylabel(label, fontsize=8)
    axes[-1].set_xlabel("generated tokens")
    axes[0].set_title(f"qwengpu soak: {report.kernel}, {report.tokens:,} tokens on the {report.engine} engine, "
                      f"{'exact' if report.exact else 'NOT EXACT'} ({report.tokens_per_s:.0f} tokens/s); "
                      f"per window of {report.window:,}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
