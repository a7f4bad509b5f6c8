"""A launch recorded from the model's own forward passes, one record per generated token.

    from qwengpu.lab import trace_launch
    view = trace_launch(ptx, spec, engine="compact")   # or "model": the stock transformers forward
    s = view.snapshot(5)                # after the 6th forward pass: its input token, what it emitted,
    s.pc, s.mask, s.regs, s.memory      # and the machine decoded from the model's GDN states
    view.trace.consistency              # model = simulator at every token? = interpreter?

How a launch is recorded (`record_launch`):

1. `qwengpu.run(..., on_token=...)` runs the forward passes (the compact engine or the stock
   transformers model). After every pass the recorder decodes, *from the model's recurrent states*,
   the control word (`ctl`: pc, mask, warp, block, epoch), the lane table (`lanes`),
   the register file copy `reg.emit` and the machine memory `mem`, and notes the code margin of
   every memory, with the compiler's decoder (`qwengpu.compiler.placement.read_rails`: a bit is its
   1-rail against half the rail level), vectorised.
   Only the slots of the rows a pass moved are decoded again; the other memories keep what the
   previous pass decoded.
2. Taps record, for every token the model consumes (the prompt included), which slot each key
   head's query and key select — computed from the model's own projections of that token (q, k:
   SiLU then L2-norm; beta; the output gate) — the "attention" of a GPU layer. On the compact
   engine they come from its compiled loop, which reduces the rows to what the taps keep
   (`CompactEngine.forward_captured(taps=True)`: the prompt in blocks, as the bare run; numpy's
   reductions bit for bit) and names the state row each value head's update changed; on the
   stock model from forward hooks.
3. The raw recurrent state of every GDN layer is kept as the state after the prompt plus, per pass,
   the rows the pass wrote (rows of the key the pass selected whose values moved by more than
   `ROW_EPS`; crosstalk below that is not kept). On the compact engine the recorder keeps them as
   rows (`kept_rows.RowLog`), never copying the whole states. `MachineView.gdn_state(position, memory)` rebuilds
   a memory's raw block from them; at the end the rebuilt states are compared with the model's
   final states (`trace.raw_exact`).
4. Consistency, two ways (`ModelTrace.consistency`):
   * **model = simulator, per token** (`qwengpu.lab.checks`). The token-level simulator (the
     machine's specification, itself tested against the interpreter) is driven with its own tokens;
     after each consumed token it gives the state the model must hold (`Simulator.held_state`:
     EXEC sets pc/mask and the lanes, CARRY writes one register byte, MEMW one memory byte, ...).
     Each record's decoded state must equal it: pc,
     mask, warp, block, epoch, all 32 lanes' pc and state, every register of every warp, all 4096
     memory bytes; and the token streams must be identical.
   * **model = interpreter, where comparable.** Final global memory and the result buffers, byte
     for byte. Registers: a bundle's carry writes a virtual register; when the unoptimised lowering
     copies that virtual register into a PTX register (`mov %r2, v22`) or the virtual register *is*
     the PTX register, the carried value is that PTX register's value (lo/hi half, masked to its
     width). For each such carry and served lane, the value the model holds after the carry tokens
     is matched against that lane's history of the PTX register in the interpreter's trace, in
     order: it must equal a value written there by the same PTX instruction at or after the previous
     match, or the current value (a no-op write, e.g. a select whose guard was false). Matching is
     per lane and in program order, so it does not depend on how the two engines schedule warps;
     it is weaker than "same step" (the machine does not keep every PTX register) and is reported
     as such. Kernels with calls are not compared (inlined registers).

Nothing here invents a value: every number shown for the model comes from the model's state or its
projections; the simulator and the interpreter are only compared against.
"""
from __future__ import annotations

import gc
import threading
import time
from collections.abc import Mapping

import numpy as np

import qwengpu
from qwengpu.assembler import assemble
from qwengpu.compiler.memory import VALUE_L, Z_ON
from qwengpu.compiler.placement import WRITTEN_FRACTION, MemoryPlacement, words_of
from qwengpu.semantics.faults import ExecutionFault
from qwengpu.launch import LaunchSpec
from qwengpu.machine.config import BUILTIN
from qwengpu.machine.tokens import token_kind
from qwengpu.runtime.checkpoint import load_machine
from qwengpu.runtime.run import DEFAULT_MAX_TOKENS
from qwengpu.runtime.prompt import prompt_tokens
from qwengpu.machine.format import ctl_fields
from qwengpu.machine.layout import LINE
from qwengpu.machine.simulator import MachineState
from qwengpu.runtime.readback import lane_table_of, lanes_of, memory_of, registers_of, state_of_words, warp_bits_of
from qwengpu.runtime.statecheck import ReferenceRun

from .buffers import Rows, give_back_buffer, reused_buffer
from .kept_rows import PassRows, RowLog, TakenRows
from .marked_slots import MarkedSlots
from .machine_view import MachineView
from .text import prefix_tokens
from .record import LayerInfo, ModelRecord, ModelTrace
from .view import interp_view

#: a raw-state row is kept when a pass moved one of its values by more than this
ROW_EPS = 1e-3
ROW_EPS32 = np.float32(ROW_EPS)       # as numpy compares a float32 row with ROW_EPS (NEP 50)

#: tokens the compact engine runs per captured call (a prompt in blocks; ~70 KB of taps a token)
CAPTURE_CHUNK = 64
#: captured tokens kept before they are put into the taps together (a generated token comes alone)
PENDING_TOKENS = 64


def memory_placements(machine) -> dict:
    """{name: MemoryPlacement} of every memory of a built machine (`qwengpu.compiler.placement`: its
    pieces and key heads), refused when its metadata predates the key heads."""
    for pl in machine.placements.values():
        pl.port_keys()                      # raises for metadata of an older qwengpu
    return dict(machine.placements)


# ---------------------------------------------------------------------------------------------
# taps: what each GDN key head selects, from the model's own projections


class _Taps:
    """Per consumed token and GDN layer: each key head's query slot and weight, key slot and weight,
    the largest write strength (beta) of its value heads, and its read gate (silu(z) / Z_ON)."""

    def __init__(self, layers: list[int], hk: int, dk: int, group: int):
        self.layers = layers
        self.index = {L: i for i, L in enumerate(layers)}
        self.hk, self.dk, self.group = hk, dk, group
        hv = hk * group
        self.rows = Rows((len(layers), hk, 6))     # per consumed token: [nL, hk, 6]
        self.betas = Rows((len(layers), hv))       # ... every value head's write strength
        self.decays = Rows((len(layers), hv))      # ... every value head's log decay
        self.vnorms = Rows((len(layers), hv))      # ... |v| of every value head's value
        self.sparse_error = 0.0        # largest |q - its top entry| or |k - its top entry| seen (one-hot: 0)
        # the compact engine's marks of the last consumed token: (the row each value head's update
        # may have moved [nL, hv] (-1 none, -2 several), whether a decay moved them all [nL, hv], a
        # bound on the terms the update added to its row [nL, hv]); None: unknown
        self.written = None
        self.pending = None            # a compact recording's captures not yet put (`_CompactTap`)
        self.touched = None            # the compact engine's: every row its loop wrote [nL, hv, dk] (`_CompactTap`)
        self._cur = None
        self._beta = None
        self._decay = None
        self._vnorm = None
        self.attention: dict = {}      # layer -> list of [heads, keys] per consumed token

    def begin(self, T: int):
        """The next T consumed tokens' rows (zeros) are the ones `put` fills."""
        self._cur = self.rows.add(T)
        self._beta = self.betas.add(T)
        self._decay = self.decays.add(T)
        self._vnorm = self.vnorms.add(T)

    def last_key_slots(self) -> np.ndarray:
        """The slot each key head's key selects at the last consumed token [nL, hk]."""
        if self.pending is not None and self.pending.last is not None:
            return self.pending.last
        return self._cur[-1][:, :, 2]

    def _settled(self):
        """The taps with every captured token put (`pending`: a compact recording's captures
        waiting to be put, a chunk of tokens at once)."""
        if self.pending is not None:
            self.pending.flush()
        return self

    def put(self, L: int, q, k, beta, gate, decay=None, v=None):
        """q, k [T, hk, dk] (normalised), beta [T, hv], gate [T, hk], decay [T, hv] (log; None: 0),
        v [T, hv, dv] (None: unknown, taken as unit norm); numpy arrays or torch tensors. In numpy:
        these arrays are tiny, and a torch op on them costs more than the engine's whole pass."""
        q, k, beta, gate, decay, v = (None if x is None else _numpy(x)[:, None] for x in (q, k, beta, gate, decay, v))
        i = self.index[L]
        self.put_layers(slice(i, i + 1), q, k, beta, gate, decay, v)

    def put_layers(self, layers: slice, q, k, beta, gate, decay=None, v=None):
        """`put` for consecutive GDN layers at once (numpy, a layer axis after the tokens': q, k
        [T, n, hk, dk], beta [T, n, hv], ...): numpy's reductions of the rows (`reduce_rows`),
        then `put_reduced`."""
        self.put_reduced(layers, *reduce_rows(q, k, v), beta, gate, decay)

    def put_reduced(self, layers: slice, qs, qw, qsq, ks, kw, ksq, vsq, beta, gate, decay=None):
        """The taps of consecutive GDN layers from their rows' reductions (`reduce_rows`: the top
        entry's index and value and the sum of squares of every key head's q and k [T, n, hk],
        every value head's |v|^2 [T, n, hv] or None: unknown, taken as 1), beta [T, n, hv], the
        read gate [T, n, hk] and the log decay [T, n, hv] (None: 0). The compact engine's compiled
        loop reduces them itself (`CompactEngine.forward_captured(taps=True)`), bit for bit."""
        c = self._cur[:, layers]
        c[..., 0] = qs
        c[..., 1] = qw
        c[..., 2] = ks
        c[..., 3] = kw
        c[..., 4] = beta.reshape(*beta.shape[:2], self.hk, self.group).max(-1)
        c[..., 5] = gate
        self._beta[:, layers] = beta
        if decay is not None:
            self._decay[:, layers] = decay
        self._vnorm[:, layers] = 1.0 if vsq is None else np.sqrt(vsq)
        # how far q and k are from one-hot (their top entry), on the tokens where the layer writes
        # (beta > 0) or reads (gate != 0): elsewhere (a GPU layer on a spliced checkpoint's text) a
        # key or query of any shape has weight exactly 0
        live = (beta > 0).any(-1) | (gate != 0).any(-1)          # [T, n]
        if qs.size and live.any():
            for sq, w in ((qsq, qw), (ksq, kw)):
                err = float(np.sqrt(np.maximum(sq - w * w, 0)[live].max()))
                self.sparse_error = max(self.sparse_error, err)

    def put_captured(self, cap, gate):
        """`put_reduced` of every layer from a chunk of the compact engine's captures (cap [n, G,
        TAP_FIELDS, hv], `begin(n)` called) and their read gates [n, G, hk], in one compiled loop
        (`compiled.put_taps`): the same values."""
        from qwengpu.engines import kernels as K

        from .compiled import put_taps
        fields = np.array([K.TAP_QS, K.TAP_QW, K.TAP_QSQ, K.TAP_KS, K.TAP_KW, K.TAP_KSQ, K.TAP_BETA, K.TAP_DECAY,
                           K.TAP_VSQ], np.int64)
        for err in put_taps(cap, gate, self._cur, self._beta, self._decay, self._vnorm, fields).tolist():
            if err >= 0:                   # a NaN is ignored, as max(error, nan) ignores it
                self.sparse_error = max(self.sparse_error, err)

    def touched_rows(self) -> np.ndarray | None:
        """`touched`, with every captured token's marks in it."""
        return self._settled().touched

    def table(self) -> np.ndarray:
        return self._settled().rows.table()

    def beta_table(self) -> np.ndarray:
        return self._settled().betas.table()

    def decay_table(self) -> np.ndarray:
        return self._settled().decays.table()

    def vnorm_table(self) -> np.ndarray:
        return self._settled().vnorms.table()

    def sparse_error_now(self) -> float:
        return self._settled().sparse_error


def reduce_rows(q, k, v=None):
    """What the taps keep of every key head's query and key rows q, k [..., hk, dk] (numpy) and
    of every value head's value v [..., hv, dv] (or None): (q's top entry's index, its value, q's
    sum of squares, the same of k, |v|^2 or None), numpy's reductions (`np.argmax`, the float32
    pairwise sum of `(x * x).sum(-1)`)."""
    qs, ks = q.argmax(-1), k.argmax(-1)
    qw = np.take_along_axis(q, qs[..., None], -1)[..., 0]
    kw = np.take_along_axis(k, ks[..., None], -1)[..., 0]
    return qs, qw, (q * q).sum(-1), ks, kw, (k * k).sum(-1), None if v is None else (v * v).sum(-1)


def _numpy(x):
    """A torch tensor's values as a float32 numpy array (numpy arrays and None pass)."""
    if x is None or isinstance(x, np.ndarray):
        return x
    return x.detach().float().cpu().numpy()


def _select(q, k, hk, dk):
    import torch
    T = q.shape[0]
    q = q.reshape(T, hk, dk)
    k = k.reshape(T, hk, dk)
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    return q, k


class _CompactTap:
    """Taps on the compact engine: its `forward` is replaced for the run (an instance attribute,
    removed afterwards) by `forward_captured(taps=True)`, which runs the tokens in compiled chunks
    and reduces every GDN layer's queries, keys and values to what the taps keep inside its loop
    (the top entries, sums of squares, write strengths, decays and output gates: numpy's
    reductions of the rows a hooked run sees, bit for bit); `put` takes a chunk's layers all at
    once, in numpy. (`kernels`, which imports numba, is imported by its methods: the lab imports
    without it.)"""

    def __init__(self, engine, taps: _Taps):
        self.engine, self.taps = engine, taps
        self.buffer = None              # the captures' buffer, made at the first pass, kept for the run
        self.pending = None             # captured tokens not yet put into the taps [PENDING_TOKENS, ...]
        self.count = 0
        self.last = None                # the last captured token's key slots [G, hk]
        self.lock = threading.Lock()    # a live recording's views put the pending tokens from another thread

    def install(self):
        from qwengpu.engines import kernels as K
        engine = self.engine
        tap = self

        def forward(token_ids, state, hidden_hook=None, gate_hook=None, gdn_hook=None, block=None):
            if hidden_hook or gate_hook or gdn_hook:
                raise ValueError("the compact engine of a recording runs with the recorder's captures, no other hooks")
            if tap.buffer is None:
                tap.buffer = reused_buffer((CAPTURE_CHUNK, len(engine.gdn_layers), K.TAP_FIELDS, engine.hv))
            return engine.forward_captured(token_ids, state, tap.put, chunk=CAPTURE_CHUNK, buffer=tap.buffer,
                                           taps=True)

        engine.forward = forward

    def remove(self):
        """The engine's own forward back; the pending captures put and the buffers kept for the next
        recording (`buffers.reused_buffer`)."""
        self.engine.__dict__.pop("forward", None)
        with self.lock:
            self._flush()
            for buf in (self.buffer, self.pending):
                if buf is not None:
                    give_back_buffer(buf)
            self.buffer = self.pending = None

    def put(self, cap):
        """A chunk's taps [n, G, TAP_FIELDS, hv] (`CompactEngine.forward_captured(taps=True)`),
        kept until `PENDING_TOKENS` are waiting (or a view asks: `_Taps._settled`), then put
        together: the taps' numpy work on one token costs as much as on a chunk."""
        from qwengpu.engines import kernels as K
        with self.lock:
            n = len(cap)
            if self.pending is None:
                self.pending = reused_buffer((max(PENDING_TOKENS, CAPTURE_CHUNK), *cap.shape[1:]))
                self.taps.pending = self
            if self.count + n > len(self.pending):
                self._flush()
            self.pending[self.count:self.count + n] = cap
            self.count += n
            self.last = cap[-1, :, K.TAP_KS, :self.engine.hk].copy()
            self.taps.written = (cap[-1, :, K.TAP_WROW].astype(np.int64), cap[-1, :, K.TAP_DECAY] != 0,
                                 cap[-1, :, K.TAP_WMAX].copy())

    def _touch(self, cap):
        """Mark in `taps.touched` the rows the tokens' updates moved (`kernels.TAP_WROW`; several, or
        a decay: all the head's rows), from a new state (zeros) on. Done for the pending tokens
        together (`_flush`): `touched` is read after the taps are settled (`_Taps.touched_rows`)."""
        from qwengpu.engines import kernels as K
        from .compiled import mark_touched
        e = self.engine
        if self.taps.touched is None:
            self.taps.touched = np.zeros((len(e.gdn_layers), e.hv, e.dk), np.bool_)
        mark_touched(cap[:, :, K.TAP_WROW], cap[:, :, K.TAP_DECAY], self.taps.touched)

    def flush(self):
        with self.lock:
            self._flush()

    def _flush(self):
        from qwengpu.engines import kernels as K
        if not self.count:
            return
        cap, self.count = self.pending[:self.count], 0
        self._touch(cap)
        self.taps.begin(cap.shape[0])
        hk = self.engine.hk
        z = cap[:, :, K.TAP_Z, :hk].astype(np.float64)
        gate = (z * 0.5 * (1.0 + np.tanh(z / 2)) / Z_ON).astype(np.float32)    # silu, overflow-free
        self.taps.put_captured(cap, gate)


class _ModelHooks:
    """Torch hooks installed on a stock model; `remove` takes them all off."""
    handles: list

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []


class _StockTap(_ModelHooks):
    """Taps on the stock transformers model: forward pre-hooks on every GDN mixer (its input is the
    normed residual) and, for attention layers that attend, forward hooks keeping their weights."""

    def __init__(self, model, taps: _Taps, attending: list[int]):
        import torch
        self.torch = torch
        self.model, self.taps = model, taps
        self.handles = []
        self.attending = attending

    def install(self):
        layers = self.model.model.layers
        if self.taps.layers:        # hooks run in registration order: `begin` first
            first = layers[self.taps.layers[0]].linear_attn
            self.handles.append(first.register_forward_pre_hook(self._begin, with_kwargs=True))
        for L in self.taps.layers:
            self.handles.append(layers[L].linear_attn.register_forward_pre_hook(self._gdn_hook(L), with_kwargs=True))
        for L in self.attending:
            self.handles.append(layers[L].self_attn.register_forward_hook(self._attn_hook(L)))


    def _begin(self, module, args, kwargs):
        x = kwargs.get("hidden_states", args[0] if args else None)
        self.taps.begin(x.shape[1])

    def _gdn_hook(self, L):
        def hook(module, args, kwargs):
            torch = self.torch
            x = kwargs.get("hidden_states", args[0] if args else None)[0].float()
            kd = module.key_dim
            with torch.no_grad():
                w = module.in_proj_qkv.weight[:2 * kd].float()
                mixed = torch.nn.functional.silu((x @ w.t()) * module.conv1d.weight[:2 * kd, 0, -1].float())
                q, k = _select(mixed[:, :kd], mixed[:, kd:], module.num_k_heads, module.head_k_dim)
                wv = module.in_proj_qkv.weight[2 * kd:].float()
                v = torch.nn.functional.silu((x @ wv.t()) * module.conv1d.weight[2 * kd:, 0, -1].float())
                v = v.reshape(v.shape[0], module.num_v_heads, module.head_v_dim)
                beta = (x @ module.in_proj_b.weight.float().t()).sigmoid()
                group = module.num_v_heads // module.num_k_heads
                zrows = module.in_proj_z.weight[torch.arange(module.num_k_heads) * group * module.head_v_dim].float()
                gate = torch.nn.functional.silu(x @ zrows.t()) / Z_ON
                a = x @ module.in_proj_a.weight.float().t()
                decay = -module.A_log.float().exp() * torch.nn.functional.softplus(a + module.dt_bias.float())
            self.taps.put(L, q, k, beta, gate, decay, v)
        return hook

    def _attn_hook(self, L):
        def hook(module, args, out):
            w = out[1] if isinstance(out, tuple) and len(out) > 1 else None
            if w is not None:
                for row in w[0].detach().float().transpose(0, 1).numpy():      # [T, heads, keys]
                    self.taps.attention.setdefault(L, []).append(row)
        return hook


# ---------------------------------------------------------------------------------------------
# recording


def record_launch(program, launch, *, engine: str = "compact", machine=None, kernel: str | None = None,
                  max_tokens: int | None = None, names: list | None = None, progress: bool = False,
                  on_token=None, prefix=None, live: "LiveRecording | None" = None):
    """Run one launch through the model (`engine`: "compact" or "model") and record it token by
    token; returns a `qwengpu.lab.MachineView` (see the module docstring).

    `on_token(index, text, state)`, if given, is called after every pass *before* the lab reads the
    state (the runtime's hook): what it changes in the state (a fault injected into a GDN memory) is
    what the lab decodes and what the next pass computes with.

    `machine` may be a spliced checkpoint's machine (`qwengpu.splice.machine_splice.open_spliced_machine`): the GPU
    layers are recorded as on the built-in machine, and on the stock forward every layer's
    contribution to each token's residual too (`trace.activity`: the base layers add exactly 0 to a
    GPU token). `prefix`: text (or token ids) of the checkpoint's own vocabulary run in the same
    context before the launch (`MachineView.continue_text` goes on after it).

    `live`: a `LiveRecording` that another thread may ask, while this runs, for a view of the
    passes recorded so far (the inspector's scrubbing during a recording)."""
    if engine not in ("compact", "model"):
        raise ValueError(f"record_launch runs the model: engine 'compact' or 'model', not {engine!r}")
    spec = launch if isinstance(launch, LaunchSpec) else LaunchSpec.from_json(launch)
    module = qwengpu.load_program(program)      # the spec's symbols: the machine's initial memory applies them
    machine = machine or load_machine(BUILTIN, dense=engine == "model", progress=progress)
    fn = module.kernel(kernel if kernel is not None else spec.kernel)
    image = assemble(module, spec, kernel, machine.config)
    prompt = prompt_tokens(image, module, spec)
    ref_view = interp_view(module, spec, kernel=kernel, names=names)           # the interpreter
    max_tokens = max_tokens or DEFAULT_MAX_TOKENS
    prefix_ids, prefix_texts = prefix_tokens(machine, prefix)

    geo = _ModelGeometry(machine, engine)
    placements = memory_placements(machine)
    taps = _Taps(geo.gdn_layers, geo.hk, geo.dk, geo.group)
    tap = _CompactTap(geo.engine, taps) if engine == "compact" else _StockTap(geo.model, taps, geo.attending)
    activity = _ActivityTap(geo.model) if engine == "model" else None
    rec = _PassRecorder(machine, geo, placements, taps, len(prefix_ids) + len(prompt), on_token)
    t_start = time.perf_counter()
    if live is not None:
        live._start(dict(engine=engine, tokens=prefix_texts + prompt, rec=rec, geo=geo, placements=placements, taps=taps,
                         activity=activity, t_start=t_start, module=module, spec=spec, fn=fn, image=image,
                         ref_view=ref_view, machine=machine, names=names, max_tokens=max_tokens))
    fault = None
    result = None
    tap.install()
    if activity is not None:
        activity.install()
    frozen = _freeze_heap()
    try:
        try:
            result = qwengpu.run(module, spec, engine=engine, kernel=kernel, machine=machine, on_token=rec,
                                 progress=progress, max_steps=max_tokens, prefix_ids=prefix_ids or None)
        except ExecutionFault as e:
            if not rec.records or token_kind(rec.records[-1].text) != "FAULT":
                raise
            fault = e
    finally:
        if frozen:
            gc.unfreeze()
        tap.remove()
        if activity is not None:
            activity.remove()
    trace = _trace(engine, prefix_texts + prompt, rec, geo, placements, taps, time.perf_counter() - t_start, activity)
    rec.release()
    trace.prefix_len = len(prefix_ids)
    trace.context = rec.last_state if engine == "model" else None
    view = MachineView(module, spec, fn, image, trace, ref_view, result, fault, machine, names)
    view.check(max_tokens)
    return view


def _freeze_heap() -> bool:
    """Move every object alive now out of the garbage collector's reach for the run (`gc.freeze`),
    so that its collections of the oldest generation scan only what the recording makes, not the
    machine, torch and the notebook (~300,000 objects: 100-250 ms a collection, at random points
    of a launch). Not when something else froze objects (a server before forking): its freeze is
    left as it is. Returns whether it froze (`gc.unfreeze` after the run)."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


class _ModelGeometry:
    """The layers of the model a launch runs on: their kinds, the GDN layers and their head
    geometry, the attention layers that attend (none in the machine: their output projections are
    zero)."""

    def __init__(self, machine, engine: str):
        self.engine = self.model = None
        # a spliced checkpoint: the GPU's layers first, then the base's (`qwengpu.splice`)
        self.gpu_count = int(getattr(machine, "gpu_layers", 0) or 0) or None
        if engine == "compact":
            engine = machine.compact_engine()
            engine = self.engine = getattr(engine, "engine", engine)   # a spliced checkpoint's: its GPU layers' engine
            self.kinds = list(engine.kinds)
            self.gdn_layers = list(engine.gdn_layers)
            self.hk, self.hv, self.dk = engine.hk, engine.hv, engine.dk
            self.attending: list = []
            if self.gpu_count is not None:
                cfg = _checkpoint_text_config(machine)
                self.kinds = list(cfg["layer_types"])             # the base's layers too (not run here)
                self.attn_heads = int(cfg.get("num_attention_heads", 1) or 1)
            else:
                cfg = getattr(machine.reference_engine(), "config", None)
                self.attn_heads = int(getattr(cfg, "num_attention_heads", 1) or 1)
        else:
            model = self.model = machine.model
            cfg = model.config
            self.kinds = list(cfg.layer_types)
            gpu = range(self.gpu_count or len(self.kinds))
            self.gdn_layers = [L for L in gpu if self.kinds[L] == "linear_attention"]
            self.hk, self.hv, self.dk = cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim
            self.attn_heads = int(cfg.num_attention_heads)
            self.attending = [L for L in gpu if self.kinds[L] == "full_attention"
                              and bool(model.model.layers[L].self_attn.o_proj.weight.detach().abs().max() > 0)]
        self.group = self.hv // self.hk

    def is_base(self, layer: int) -> bool:
        """A spliced checkpoint's own (base) layer, not one of the GPU's."""
        return self.gpu_count is not None and layer >= self.gpu_count


def _checkpoint_text_config(machine) -> dict:
    """The text config of a spliced checkpoint (its `config.json`; a multimodal one's `text_config`)."""
    import json
    from pathlib import Path
    cfg = json.loads((Path(machine.path) / "config.json").read_text())
    return cfg.get("text_config", cfg) if cfg.get("model_type") == "qwen3_5" else cfg


class _ActivityTap(_ModelHooks):
    """Forward hooks on every decoder layer of the stock model: per token, the largest change the
    layer makes to the residual stream (max |output - input|). A layer that is switched off on a
    token (a spliced base layer on a GPU token, a GPU layer on text) changes it by exactly 0."""

    def __init__(self, model):
        self.model = model
        self.rows: list = []              # per forward call: [T, layers]
        self.handles: list = []

    def install(self):
        layers = self.model.model.layers
        self.handles.append(layers[0].register_forward_pre_hook(self._begin, with_kwargs=True))
        for L, layer in enumerate(layers):
            self.handles.append(layer.register_forward_hook(self._hook(L), with_kwargs=True))


    def _begin(self, module, args, kwargs):
        x = kwargs.get("hidden_states", args[0] if args else None)
        self.rows.append(np.zeros((x.shape[1], len(self.model.model.layers)), np.float32))
        self._input = x

    def _hook(self, L):
        def hook(module, args, kwargs, out):
            x = kwargs.get("hidden_states", args[0] if args else None)
            y = out[0] if isinstance(out, tuple) else out
            self.rows[-1][:, L] = (y[0] - x[0]).detach().abs().amax(-1).float().cpu().numpy()
        return hook

    def table(self) -> np.ndarray:
        return np.concatenate(self.rows) if self.rows else np.zeros((0, len(self.model.model.layers)), np.float32)


class _PassRecorder:
    """The runtime's `on_token` hook: after every pass (after the user's hook, which may change the
    state), the machine state decoded from the model's GDN states, every memory's margin, and the
    raw state rows the pass moved."""
    decoded = ("ctl", "lanes", "reg.emit", "mem")

    def __init__(self, machine, geo: _ModelGeometry, placements: dict, taps, prompt_len: int, user_hook):
        self.machine, self.geo, self.placements, self.taps = machine, geo, placements, taps
        self.prompt_len, self.user_hook = prompt_len, user_hook
        self.records: list = []
        self.last_state = None
        self.prev_raw: dict = {}
        self.base_raw: dict = {}
        self._last = {}                    # the last pass's states: all layers' array, or {layer: state}
        self.updates: list = []
        self.rows: RowLog | None = None     # the compact engine's: its states kept as rows
        self.drift = None                    # ... and a bound on each row's distance from them (`compiled.take_moved_rows`)
        self.heads = np.arange(geo.hv)
        self.head_keys = self.heads // geo.group      # each value head's key head
        self.slot_margin: dict = {}        # memory -> [slots]: each slot's code margin now (the stock forward's; `slots_now`)
        self.words: dict = {}              # decoded memory -> (values [fields, slots], written [slots]) now
        self.word_dicts: dict = {}         # decoded memory -> {slot: word} now
        self.margin: dict = {}             # memory -> its code margin now
        self.decoders: dict = {}           # memory -> its _SlotDecoder
        self.spans: dict = {}              # decoded memory -> its fields' first bits (`MemoryPlacement.spans`)
        # (GDN layer, value head) -> [(memory, first slot, slots)]: the piece of each memory it holds
        # (`MemoryPlacement.piece_at`), looked up for every moved row
        self.pieces_at: dict = {}
        for name, info in placements.items():
            for (L, h), pc in {(pc[0], pc[1]): pc for pc in info.all_pieces()}.items():
                self.pieces_at.setdefault((L, h), []).append((name, pc[4], pc[5]))
        self.taken = None                  # the compiled loop's buffers (`kept_rows.TakenRows`), made at the first pass
        self.slots_now = None              # ... and the memories' slots it reads (`MarkedSlots`)

    def __call__(self, i, text, state):
        if self.user_hook is not None:
            self.user_hook(i, text, state)
        self.last_state = state
        stacked = _stacked_states(state, self.geo.gdn_layers)
        if stacked is not None:
            self._last = stacked
            changed = self._read_stacked(i, stacked)
        else:
            raws = {L: state.get_recurrent_state(L)[0].detach().float().cpu().numpy() for L in self.geo.gdn_layers}
            self._last = raws
            changed = self._read_layers(i, raws)
        prev = self.records[-1].machine if self.records else None
        self.records.append(ModelRecord(index=self.prompt_len + i, token=self.machine.token_id(text), text=text,
                                        position=i, machine=_machine_state(self.word_dicts, self.placements, prev, changed),
                                        margins=dict(self.margin)))

    def release(self):
        """The launch recorded: the buffers only the passes used kept for the next recording."""
        if self.drift is not None:
            give_back_buffer(self.drift)
            self.drift = None

    @property
    def last_raw(self) -> dict:
        """{GDN layer: its state [hv, dk, dv]} after the last pass."""
        last = self._last
        return last if isinstance(last, dict) else dict(zip(self.geo.gdn_layers, last))

    def _read_stacked(self, i: int, stacked) -> dict:
        """The compact engine's pass: its moved rows taken and the slots they hold decoded, each
        in one compiled call (`compiled.take_moved_rows`, `MarkedSlots.read`); returns the
        memories read, {memory: its slots read (sorted) or True (all)}."""
        if i == 0:                          # the state as rows, not copied (a copy costs as much as a pass)
            # the rows the engine wrote; a user's hook may have changed any: all read then
            self.rows = RowLog(stacked, self.taps.touched_rows() if self.user_hook is None else None)
            self.drift = reused_buffer(stacked.shape[:3], np.float64, zeroed=True)   # how far each row may be from its kept row
            self.base_raw = _LayerStates(self.geo.gdn_layers, self.rows.base_layer)
            self.taken = TakenRows(stacked.shape, self.geo.gdn_layers, self.placements, self.pieces_at)
            self.slots_now = MarkedSlots(self.taken, self.placements, self.geo.gdn_layers)
            self.updates.append([])
        else:
            self.updates.append(self._take_moved_rows(stacked))
        every = i == 0 or self.user_hook is not None      # a user's hook may have changed any row
        if every:
            self.slots_now.mark_all()
        changed = {}
        now = self.slots_now
        hits = now.read(stacked)
        lowest = now.lowest.tolist()
        for m, name, slots in hits:
            changed[name] = True if every else slots
            self.margin[name] = lowest[m]
            if name in self.decoded:
                self.word_dicts[name] = self._words_of(name, self.placements[name], *now.words(m), changed[name])
        return changed

    def _read_layers(self, i: int, raws: dict) -> dict:
        """A pass of the stock forward: its moved rows and the slots they hold, layer by layer;
        returns the memories read, {memory: its slots read (sorted) or True (all)}."""
        if i == 0:
            for L in self.geo.gdn_layers:
                self.base_raw[L] = raws[L].copy()
                self.prev_raw[L] = raws[L].copy()
            self.updates.append([])
            moved = None
        else:
            upd, touched = self._moved_layer_rows(raws)     # touched: memory -> the slots of the moved rows
            self.updates.append(upd)
            # a pass writes the rows its keys select; a user's hook may have changed any row
            moved = upd if self.user_hook is None else None
        changed = {}
        for name, info in self.placements.items():
            if moved is not None and name not in touched:
                continue                               # as the previous pass left it
            read = self._decode(name, info, raws, None if moved is None else touched[name])
            if read is False:
                continue
            changed[name] = read
            self.margin[name] = float(self.slot_margin[name].min(initial=np.inf))
            if name in self.decoded:
                self.word_dicts[name] = self._words_of(name, info, *self.words[name], read)
        return changed

    def _words_of(self, name: str, info: MemoryPlacement, vals, written, read) -> dict:
        """`words_of` of a decoded memory's words now ({slot: word} of its written slots, in slot
        order) from its values [fields, slots] and written flags: made afresh after every slot was
        read (`read` True), else the previous pass's with the slots read (`read`, sorted) replaced."""
        spans = self.spans.get(name)
        if spans is None:
            spans = self.spans[name] = [lo for lo, _ in info.spans]
        if read is True:
            return words_of(vals, written, info)
        now = dict(self.word_dicts[name])
        added = False
        for s in read:
            if written[s]:
                w = 0
                for f, lo in enumerate(spans):
                    w |= int(vals[f, s]) << lo
                added = added or s not in now
                now[s] = w
            else:
                now.pop(s, None)
        return dict(sorted(now.items())) if added else now      # a slot replaced keeps its place

    def _decode(self, name: str, info: MemoryPlacement, raws: dict, slots):
        """Keep a memory's decoded words (the decoded memories) and per-slot margins up to date:
        all slots at the first pass (or after a user's hook: `slots` None), then only `slots`, those
        of the rows the pass moved (`_moved_rows`: every other row is as the previous pass left it,
        to ROW_EPS). Returns what it read: True (every slot), the slots (sorted), or False (none:
        all is as the previous pass left it)."""
        decoder = self.decoders.get(name)
        if decoder is None:
            decoder = self.decoders[name] = _SlotDecoder(info)
        if slots is None or name not in self.slot_margin:
            vals, written, margin = decoder(raws, np.arange(info.slots))       # `decode_words` of every slot
            self.slot_margin[name] = margin
            if name in self.decoded:
                self.words[name] = (vals, written)
            return True
        if not slots:
            return False
        slots = sorted(slots)
        vals, written, margin = decoder(raws, slots)
        self.slot_margin[name][slots] = margin
        if name in self.decoded:
            old_vals, old_written = self.words[name]
            new_vals, new_written = old_vals.copy(), old_written.copy()     # records keep their own
            new_vals[:, slots] = vals
            new_written[slots] = written
            self.words[name] = (new_vals, new_written)
        return slots

    def _take_moved_rows(self, stacked) -> PassRows:
        """The rows this pass's keys selected, where a value moved, from every layer's state as one
        array (the compact engine's), in one compiled loop (`compiled.take_moved_rows`), which also
        marks the memory slots they hold (`MarkedSlots`)."""
        rows_ = self.taps.last_key_slots().astype(np.int64)[:, self.head_keys]      # [G, hv]
        marks = self.taps.written
        every = self.user_hook is not None or marks is None
        if every:
            marks = (np.zeros((0, 0), np.int64), np.zeros((0, 0), np.bool_), np.zeros((0, 0), np.float32))
        t = self.taken
        self.rows.reserve(rows_.size)
        from .compiled import take_moved_rows
        n, self.rows.count = take_moved_rows(stacked, rows_, self.rows.row_at, self.rows.values, self.rows.count,
                                             ROW_EPS32, self.drift, *marks, every, t.at, t.old, t.new,
                                             t.piece_start, t.piece_mem, t.piece_s0, t.piece_n, t.slot_marks,
                                             t.marked, t.marked_n)
        return t.taken(n)

    def _moved_layer_rows(self, raws: dict) -> tuple:
        """`_take_moved_rows` layer by layer (the stock forward's states): the moved rows, kept with
        old and new values, per GDN layer in layer order, and {memory: the slots of those rows,
        sorted}."""
        heads, group, taps = self.heads, self.geo.group, self.taps
        upd = []
        slots = taps.last_key_slots()           # the consumed token's key slots [nL, hk]
        for L in self.geo.gdn_layers:
            rows_ = slots[taps.index[L]].astype(np.int64)[heads // group]
            new = raws[L][heads, rows_]
            old = self.prev_raw[L][heads, rows_]
            moved = np.abs(new - old).max(-1) > ROW_EPS
            if moved.any():
                hh, rr = heads[moved], rows_[moved]
                upd.append((L, hh, rr, old[moved].copy(), new[moved].copy()))
                self.prev_raw[L][hh, rr] = new[moved]
        touched: dict = {}
        for L, hh, rr, _, _ in upd:
            for h, r in zip(hh.tolist(), rr.tolist()):
                for name, s0, n in self.pieces_at.get((L, h), ()):
                    if r < n:                          # `MemoryPlacement.slots_of_rows`
                        touched.setdefault(name, set()).add(s0 + r)
        return upd, {name: sorted(slots) for name, slots in touched.items()}


class _SlotDecoder:
    """`decode_words(state, placement, slots=..., per_slot=True)` of one memory with its pieces
    grouped once (`MemoryPlacement.blocks`), not on every pass, and each block's rows read by one
    compiled loop (`compiled.read_block`: `read_rails` on them, value for value, NaNs as numpy treats
    them): the same results."""

    def __init__(self, placement: MemoryPlacement):
        self.spans = len(placement.spans)
        self.blocks = [(L, w, s0, n, np.array([h for h, _ in hf], np.int64), np.array([f for _, f in hf], np.int64))
                       for (L, w, s0, n), hf in placement.blocks().items()]

    def __call__(self, state: dict, slots: list):
        want = np.asarray(slots, dtype=np.int64)
        vals = np.zeros((self.spans, len(want)), dtype=np.uint64)
        written = np.zeros(len(want), dtype=bool)
        margin = np.full(len(want), np.inf)
        from .compiled import read_block
        for L, w, s0, n, heads, fields in self.blocks:
            read_block(state[L], heads, fields, s0, n, w, want, vals, written, margin, VALUE_L, WRITTEN_FRACTION * VALUE_L)
        return vals, written, margin


def _machine_state(words: dict, placements: dict, prev, changed: dict):
    """`state_of_words(words, placements)`, taking from `prev` (the previous pass's) the parts of
    the memories not in `changed` ({memory: its slots read, sorted, or True: all}; the others'
    words are as they were), and for the registers and the memory the previous pass's with the
    slots read replaced."""
    if prev is None or all(changed.get(n) is True for n in ("lanes", "reg.emit", "mem")):
        return state_of_words(words, placements)
    wb = warp_bits_of(placements)
    ctl = ctl_fields(words["ctl"].get(0, 0))
    lanes = prev.lanes if "lanes" not in changed else \
        lane_table_of(words["lanes"].get(0, 0), placements["lanes"].width, wb)
    regs = prev.regs if "reg.emit" not in changed else _registers_now(words["reg.emit"], prev.regs,
                                                                      changed["reg.emit"], wb)
    memory = prev.memory if "mem" not in changed else _memory_now(words["mem"], prev.memory, changed["mem"],
                                                                  placements["mem"].slots)
    return MachineState(lanes=lanes, regs=regs, memory=memory, **ctl)


def _registers_now(words: dict, prev: dict, read, wb: int) -> dict:
    """`registers_of(words)`: `prev` with the registers of the slots read replaced (its order kept:
    made afresh where a register appears, as `registers_of` orders them by slot)."""
    if read is True:
        return registers_of(words, wb)
    regs = dict(prev)
    low = (1 << wb) - 1
    for s in read:
        key = (s & low, s >> wb)
        w = words.get(s)
        if w is None:
            regs.pop(key, None)
        elif key in regs:
            regs[key] = lanes_of(w)
        else:
            return registers_of(words, wb)
    return regs


def _memory_now(words: dict, prev: bytes, read, lines: int) -> bytes:
    """`memory_of(words, lines)`: `prev` with the lines of the slots read rewritten."""
    if read is True:
        return memory_of(words, lines)
    mem = bytearray(prev)
    for line in read:
        w = words.get(line, 0)
        mem[line * LINE:(line + 1) * LINE] = (w & ((1 << (8 * LINE)) - 1)).to_bytes(LINE, "little")
    return bytes(mem)


class _LayerStates(Mapping):
    """{GDN layer: its state [hv, dk, dv]}, each built when first asked for (`make(index)`)."""

    def __init__(self, layers: list, make):
        self._index = {L: i for i, L in enumerate(layers)}
        self._make = make
        self._built: dict = {}

    def __getitem__(self, layer):
        got = self._built.get(layer)
        if got is None:
            got = self._built[layer] = self._make(self._index[layer])
        return got

    def __iter__(self):
        return iter(self._index)

    def __len__(self):
        return len(self._index)


def _stacked_states(state, gdn_layers: list):
    """Every GDN layer's recurrent state as one array [G, hv, dk, dv] when the state keeps them so
    (the compact engine's `EngineState`, its layers in this order), else None."""
    arr = getattr(state, "recurrent", None)
    if isinstance(arr, np.ndarray) and tuple(getattr(state, "gdn_layers", ())) == tuple(gdn_layers):
        return arr
    return None


class LiveRecording:
    """A launch being recorded (`record_launch(..., live=LiveRecording())`), seen from another
    thread: `passes` recorded so far, `expected` (the simulator's count of the passes the launch
    takes, known before the model runs), and `view()`, a `MachineView` of the passes recorded so
    far, checked against the simulator and the interpreter's registers as far as they go."""

    def __init__(self):
        self._parts: dict | None = None
        self.expected: int | None = None
        self.source = None              # the launch's CudaSource (set by trace_launch), for its views

    def _start(self, parts: dict):
        from qwengpu.machine.simulator import Simulator
        sim = Simulator(parts["image"], parts["module"], parts["spec"], max_tokens=parts["max_tokens"])
        try:
            sim.run()
        except Exception:            # a launch that faults (or runs away) still has its passes so far
            pass
        self.expected = len(sim.tokens)
        # the views' checks: one simulator run, extended as the passes come (not rerun per view)
        self._reference = ReferenceRun(parts["image"], parts["module"], parts["spec"], parts["max_tokens"])
        self._parts = parts

    @property
    def passes(self) -> int:
        return len(self._parts["rec"].records) if self._parts is not None else 0

    def view(self):
        """The passes recorded so far as a `MachineView` (None before the first)."""
        p = self._parts
        n = self.passes
        if p is None or n == 0:
            return None
        trace = _trace(p["engine"], p["tokens"], p["rec"], p["geo"], p["placements"], p["taps"],
                       time.perf_counter() - p["t_start"], p["activity"], upto=n)
        view = MachineView(p["module"], p["spec"], p["fn"], p["image"], trace, p["ref_view"], None, None, p["machine"],
                           p["names"])
        view.check(p["max_tokens"], partial=True, reference=self._reference)
        view.source = self.source
        return view


def _trace(engine: str, prompt: list, rec: _PassRecorder, geo: _ModelGeometry, placements: dict, taps,
           seconds: float, activity=None, upto: int | None = None) -> ModelTrace:
    """The `ModelTrace` of a recorded launch; the raw states rebuilt from the kept rows are compared
    with the model's final states (`raw_exact`). `upto`: the first `upto` passes of a recording
    still running (its tables as far as they are complete; `raw_exact` None)."""
    n = len(rec.records) if upto is None else upto
    rows = rec.prompt_len + n - 1                  # tokens consumed by pass n - 1
    records = rec.records[:n]
    if upto is None and rec.rows is not None:
        raw_error = rec.rows.error([rec.last_raw[L] for L in geo.gdn_layers],
                                   taps.touched_rows() if rec.user_hook is None else None)
    elif upto is None:
        raw_error = max((float(np.abs(rec.prev_raw[L] - rec.last_raw[L]).max()) for L in geo.gdn_layers),
                        default=0.0)
    else:
        raw_error = None
    act = activity.table()[:rows] if activity is not None else None
    launch_rows = slice(rec.prompt_len - 1, None)          # the rows of the launch's consumed tokens
    layers = []
    holders: dict = {}                             # layer -> the memories it holds
    for name, info in placements.items():
        for L in info.layers:
            holders.setdefault(L, []).append(name)
    for L, kind in enumerate(geo.kinds):
        held = holders.get(L, [])
        if geo.is_base(L):
            if act is None:
                role = "base layer: not run by the compact engine (it adds exactly 0 to a GPU token, docs/splice.md)"
            else:
                most = float(act[launch_rows, L].max()) if len(act) else 0.0
                role = ("base layer: idle during the launch (adds exactly 0 to every GPU token)" if most == 0.0
                        else f"base layer: adds up to {most:.3g} to a GPU token")
            layers.append(LayerInfo(L, kind, role, part="base"))
            continue
        if kind == "linear_attention":
            role = ", ".join(held) if held else "copies from earlier tokens"
        else:
            role = "attends" if L in geo.attending else "inert (zero output projection): its MLP only"
        layers.append(LayerInfo(L, kind, role))
    trace = ModelTrace(prompt + [r.text for r in records], records, layers)
    trace.activity = act
    trace.engine = engine
    trace.memories = placements
    trace.group = geo.group
    trace.gdn_layers = geo.gdn_layers
    trace.taps = taps.table()[:rows]
    trace.betas = taps.beta_table()[:rows]
    trace.decays = taps.decay_table()[:rows]
    trace.vnorms = taps.vnorm_table()[:rows]
    trace.sparse_error = taps.sparse_error_now()
    trace.attn_heads = geo.attn_heads
    trace.attention = dict(taps.attention)
    trace.base_raw = rec.base_raw
    trace.updates = rec.updates[:n]
    trace.raw_error = raw_error
    trace.raw_exact = None if raw_error is None else raw_error <= ROW_EPS
    trace.seconds = seconds
    return trace
