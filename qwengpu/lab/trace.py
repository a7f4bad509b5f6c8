"""The lab's front door: one launch traced on an engine, as a view with a snapshot per position."""
from __future__ import annotations

from qwengpu.launch import LaunchSpec

from .recorder import record_launch
from .source import load_with_source
from .view import EngineUnavailable, interp_view


def trace_launch(program, launch, *, engine: str = "interp", kernel: str | None = None,
                 max_steps: int | None = None, names: list | None = None, progress=None, machine=None,
                 on_token=None, prefix=None, live=None, source=None):
    """Run one launch with a per-step trace and build its view.

    `engine="interp"` runs the reference interpreter and gives a `LaunchView` (one position per
    warp-instruction). A launch that faults still gives a view: its last step is the faulting one and
    `view.fault` holds the `ExecutionFault`.

    `engine="compact"` (the compact engine) or `engine="model"` (the stock transformers forward) runs
    the launch through the model's forward passes and gives a `qwengpu.lab.MachineView`: one position
    per forward pass, the machine decoded from the model's own state after it, checked against the
    simulator and the interpreter (`qwengpu.lab.recorder`). `machine`: a built machine (default: the
    built-in machine, built on first use); `max_steps` bounds the generated tokens;
    `on_token(index, text, state)` runs after every pass before the lab reads the state (it may
    change it: fault injection, see `record_launch`). `machine` may be a spliced checkpoint's
    (`qwengpu.splice.machine_splice.open_spliced_machine`) and `prefix` text run before the launch in its context;
    `live` a `qwengpu.lab.recorder.LiveRecording` (views of the passes so far, from another thread).

    CUDA (text or a `.cu` file) is compiled with nvcc's line info, and the view's `source` is its
    `qwengpu.lab.source.CudaSource` (the CUDA line of every PTX instruction); PTX with line info
    whose source file is readable gets one too; shipped PTX has none (`view.source` is None).
    `source`: a `CudaSource` to use instead (the `%%cuda` magic's cell).
    """
    module, found = load_with_source(program)
    source = source if source is not None else found
    spec = launch if isinstance(launch, LaunchSpec) else LaunchSpec.from_json(launch)
    if engine in ("model", "compact"):
        try:
            import torch  # noqa: F401
        except ImportError as e:
            raise EngineUnavailable(f"the {engine} engine needs torch and transformers: "
                                    f"pip install -e '.[model]' ({e})") from None
        if live is not None:
            live.source = source
        try:
            view = record_launch(module, spec, engine=engine, machine=machine, kernel=kernel, max_tokens=max_steps,
                                 names=names, progress=bool(progress), on_token=on_token, prefix=prefix, live=live)
        except ValueError as e:          # the machine's assembler refuses a PTX line: say its CUDA line too
            where = source.where(getattr(e, "line", None)) if source is not None else None
            if where and e.args and isinstance(e.args[0], str):
                e.args = (f"{e.args[0]}\n    at {where}",) + e.args[1:]
                e.cuda_line = source.line_of_ptx(e.line)
            raise
        view.source = source
        return view
    if engine != "interp":
        raise ValueError(f"unknown engine {engine!r} (the lab knows 'interp', 'compact' and 'model')")
    if machine is not None or on_token is not None or prefix is not None or live is not None:
        raise TypeError("machine=, on_token=, prefix= and live= are for the model engines ('compact', 'model')")
    view = interp_view(module, spec, kernel=kernel, max_steps=max_steps, names=names, progress=progress)
    view.source = source
    return view
