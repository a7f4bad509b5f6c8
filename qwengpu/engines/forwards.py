"""The forward passes a launch runs on, behind one interface (`FORWARDS`, by engine name): the
stock transformers forward (`StockForward`, "model"), the compact engine (`CompactForward`,
"compact") and its torch reference (`ReferenceForward`, "compact-ref"). Each runs B sequences:
`prefill_all` (the prompts), `step` (one token each), `state(b)` (a sequence's cache, read by
`qwengpu.runtime.readback`), `measured(b)` (the margins the run measured).
"""
from __future__ import annotations

from qwengpu.compiler.margins import FormNoise
from qwengpu.compiler.run import cache_kwarg


class StockForward:
    """The stock transformers forward on B sequences: the prompts left-padded through the chunked
    prefill path (padding masked), then one cached decode pass per token for every row (a finished
    sequence's row runs on, ignored: its results were read when it ended)."""

    def __init__(self, machine, device: str = "cpu", size: int = 1):
        import torch
        from transformers import DynamicCache
        self.torch = torch
        self.machine = machine
        self.device = device
        self.size = size
        self.model = machine.model.to(device)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.cache = DynamicCache(config=self.model.config)
        self.kw = cache_kwarg(self.model)
        lattices = getattr(machine, "lattices", None)
        self.form_noise = [FormNoise(lattices) for _ in range(size)] if lattices else None
        self.mask = None                    # [B, positions] padding mask (batches only)
        self.live = None                    # [B, T] positions of this pass that measure form noise
        self.hooks = []

    def __enter__(self):
        if self.form_noise is not None:         # the gate pre-activations of every MLP, as they are computed
            for L, layer in enumerate(self.model.model.layers):
                self.hooks.append(layer.mlp.gate_proj.register_forward_hook(
                    lambda mod, args, out, L=L: self._noise(L, out)))
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()
        self.hooks = []

    def _noise(self, L, gate):
        for b in range(self.size):
            if self.live is None:
                self.form_noise[b](L, gate[b])
            elif self.live[b].any():
                self.form_noise[b](L, gate[b][self.live[b]])

    def _run(self, ids, mask):
        with self.torch.no_grad():
            kw = {} if mask is None else {"attention_mask": mask.to(self.device)}
            out = self.model(input_ids=ids.to(self.device), use_cache=True, **kw, **{self.kw: self.cache})
        return out.logits[:, -1].float()

    def prefill_all(self, id_lists: list):
        """Each sequence's prompt; returns the logits after each [B, vocab]."""
        torch = self.torch
        if self.size == 1:
            return self._run(torch.tensor(id_lists), None)
        T = max(len(x) for x in id_lists)
        ids = torch.zeros((self.size, T), dtype=torch.long)
        self.mask = torch.zeros((self.size, T), dtype=torch.long)
        for b, x in enumerate(id_lists):
            ids[b, T - len(x):] = torch.tensor(x)
            self.mask[b, T - len(x):] = 1
        self.live = self.mask.bool()
        try:
            return self._run(ids, self.mask)
        finally:
            self.live = None

    def step(self, tokens: list):
        """One decode pass for every row; rows whose token is None (ended) get token 0 and are not
        measured. Returns logits [B, vocab]."""
        torch = self.torch
        ids = torch.tensor([[0 if t is None else t] for t in tokens])
        if self.mask is not None:
            self.mask = torch.cat([self.mask, torch.ones((self.size, 1), dtype=torch.long)], dim=1)
        self.live = torch.tensor([[t is not None] for t in tokens])
        try:
            return self._run(ids, self.mask)
        finally:
            self.live = None

    def state(self, b: int):
        """Sequence b's state, as a cache (`get_recurrent_state(layer)` -> [1, hv, dk, dv])."""
        return self.cache if self.size == 1 else _RowOf(self.cache, b)

    def measured(self, b: int) -> dict:
        """Sequence b's measured margins: the form noise (hooks on every MLP's gate projection)."""
        if self.form_noise is None:
            return {}
        return {"form_noise": self.form_noise[b].worst, "form_noise_at": self.form_noise[b].where}


class _RowOf:
    """One row of a batched cache, read like a cache of one sequence."""

    def __init__(self, cache, row: int):
        self.cache, self.row = cache, row

    def get_recurrent_state(self, layer: int):
        return self.cache.get_recurrent_state(layer)[self.row:self.row + 1]


class CompactForward:
    """The compact engine (`qwengpu.engines.compact.CompactEngine`): the decode path over the
    weights' exact sparsity, B sequences stepped together, margins measured inside its loop."""

    def __init__(self, machine, device: str = "cpu", size: int = 1):
        self.engine = machine.compact_engine()
        self.batch = self.engine.new_batch(size)
        self.probed = bool(getattr(machine, "probes", None))
        self.lattices = bool(getattr(machine, "lattices", None))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def prefill_all(self, id_lists: list):
        import torch
        return torch.stack([self.engine.forward(ids, st).clone() for ids, st in zip(id_lists, self.batch.states)])

    def step(self, tokens: list):
        if len(tokens) == 1:                    # one sequence: the same loop without the batch's bookkeeping
            return self.engine.step(tokens[0], self.batch.states[0])[None]
        return self.engine.step_batch(tokens, self.batch)

    def state(self, b: int):
        return self.batch.states[b]

    def measured(self, b: int) -> dict:
        """Sequence b's measured margins: residual code margin, form noise and where it peaked."""
        st, out = self.batch.states[b], {}
        if self.probed:
            out["residual_margin"] = 0.5 - st.residual_worst
        if self.lattices:
            out["form_noise"] = st.noise_worst
            out["form_noise_at"] = self.engine.noise_where(st)
        return out


class ReferenceForward:
    """The compact engine's reference (`qwengpu.engines.reference.ReferenceEngine`, `--engine compact-ref`): the
    same function in torch, margins measured by hooks, sequences run one after another; kept to
    check and time the compact engine."""

    def __init__(self, machine, device: str = "cpu", size: int = 1):
        import torch
        self.torch = torch
        self.reference = machine.reference_engine()
        self.states = [self.reference.new_state() for _ in range(size)]
        self.threads = torch.get_num_threads()
        self.probes = {k: torch.tensor(fs) for k, fs in (getattr(machine, "probes", None) or {}).items()}
        self.worst = [0.0] * size    # largest distance of a probed feature from its 0/1 code
        lattices = getattr(machine, "lattices", None)
        self.form_noise = [FormNoise(lattices) for _ in range(size)] if lattices else None

    def _hooks(self, b):
        def measure(sublayer, h):
            idx = self.probes.get(sublayer)
            if idx is not None:
                x = h[:, idx]
                self.worst[b] = max(self.worst[b], float((x - x.round()).abs().max()))
        return (measure if self.probes else None), (self.form_noise[b] if self.form_noise else None)

    def __enter__(self):
        # its operations are tiny: one thread beats a contended pool by ~20x
        self.torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        self.torch.set_num_threads(self.threads)

    def prefill_all(self, id_lists: list, chunk: int = 256):
        out = []
        for b, ids in enumerate(id_lists):
            for i in range(0, len(ids), chunk):
                logits = self.reference.forward(ids[i:i + chunk], self.states[b], *self._hooks(b))
            out.append(logits)
        return self.torch.stack(out)

    def step(self, tokens: list):
        out = self.torch.zeros((len(tokens), self.reference.lm_head.shape[0]))
        for b, tok in enumerate(tokens):
            if tok is not None:
                out[b] = self.reference.step(tok, self.states[b], *self._hooks(b))
        return out

    def state(self, b: int):
        return self.states[b]

    def measured(self, b: int) -> dict:
        out = {}
        if self.probes:
            out["residual_margin"] = 0.5 - self.worst[b]
        if self.form_noise is not None:
            out["form_noise"], out["form_noise_at"] = self.form_noise[b].worst, self.form_noise[b].where
        return out


FORWARDS = {"model": StockForward, "compact": CompactForward, "compact-ref": ReferenceForward}


def best_device() -> str:
    """cuda, then mps, then cpu: where the stock forward runs by default."""
    import torch
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"
