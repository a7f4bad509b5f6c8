"""Run a launch on the machine: the token simulator, or the model's own forward passes.

    assemble -> prompt tokens -> forward passes (one generated token each) -> decode the results

On the model the prompt goes through the chunked prefill path, every generated token through the
cached one-token decode path (`check_prefill` then re-runs the whole sequence through the chunked
path and checks it predicts the same tokens). Results are read from the model's state: the global
memory from the memory layer's GDN state, a fault's address from the pending-address memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.compiler.margins import FormNoise
from qwengpu.interp.interpreter import launch_warps
from qwengpu.interp.memory import ExecutionFault, MemoryFault
from qwengpu.interp.printf import machine_printf
from qwengpu.launch import LaunchResult, LaunchSpec, check_step_limit

from qwengpu.assembler import assemble
from qwengpu.machine.config import COMPACT, MachineConfig, config_named
from qwengpu.machine.simulator import (FAULT_KINDS, MachineStepLimit, Simulator, initial_memory, read_buffers,
                                      step_limit_message, trap_fault)
from qwengpu.machine.tokens import parse_token, token_text

from .prompt import prompt_tokens

#: the default token limit: this many generated tokens, or `TOKENS_PER_WARP` for each warp of the
#: launch when that is more (a launch's legitimate work grows with its warps: NVIDIA's matrixMul
#: sample on 8x8 matrices in 4x4 tiles, 16 warps, needs 109,898 tokens); a runaway loop still stops
DEFAULT_MAX_TOKENS = 100_000
TOKENS_PER_WARP = 25_000


def default_max_tokens(spec: LaunchSpec) -> int:
    """The machine engines' token limit for `spec` when none is given."""
    return max(DEFAULT_MAX_TOKENS, TOKENS_PER_WARP * launch_warps(spec))
FINAL = ("<halt>",)


@dataclass
class TokenStream:
    prompt: list
    generated: list = field(default_factory=list)
    gaps: list = field(default_factory=list)        # logit gap (winner - runner-up) per generated token

    @property
    def min_gap(self) -> float | None:
        return min(self.gaps) if self.gaps else None


def _lane_instructions(image, tokens) -> int:
    n = 0
    for t in tokens:
        if t.startswith("<exec "):
            pc, mask = t[6:-1].split()
            n += len(image.bundles[int(pc)].ptx_pcs) * mask.count("1")
    return n


def run_on_simulator(module, spec: LaunchSpec, kernel: str | None = None, config: MachineConfig | str = COMPACT,
                     max_tokens: int | None = None) -> LaunchResult:
    """One launch on the token simulator of the machine `config` (a geometry or its name)."""
    img = assemble(module, spec, kernel, config_named(config, "machine"))
    res = Simulator(img, module, spec, max_tokens=check_step_limit(max_tokens) or default_max_tokens(spec)).run()
    texts = [token_text(t) for t in res.tokens]
    return LaunchResult(img.kernel, "sim", res.buffers, steps=len(res.passes), tokens=len(texts),
                        lane_instructions=_lane_instructions(img, texts),
                        extra={"prompt": prompt_tokens(img, module, spec), "generated": texts, "image": img},
                        printf=machine_printf(module, spec, img.layout, res.memory))


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
        from qwengpu.compiler.run import cache_kwarg
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
    """The compact engine (`qwengpu.compiler.engine.SparseEngine`): the decode path over the
    weights' exact sparsity, B sequences stepped together, margins measured inside its loop."""

    def __init__(self, machine, device: str = "cpu", size: int = 1):
        self.engine = machine.fast()
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


class ReferenceCompactForward:
    """The reference compact engine (`qwengpu.compiler.fast.FastModel`, `--engine compact-ref`): the
    same function in torch, margins measured by hooks, sequences run one after another; kept to
    check and time the compact engine."""

    def __init__(self, machine, device: str = "cpu", size: int = 1):
        import torch
        self.torch = torch
        self.fast = machine.fast_reference()
        self.states = [self.fast.new_state() for _ in range(size)]
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
                logits = self.fast.forward(ids[i:i + chunk], self.states[b], *self._hooks(b))
            out.append(logits)
        return self.torch.stack(out)

    def step(self, tokens: list):
        out = self.torch.zeros((len(tokens), self.fast.lm_head.shape[0]))
        for b, tok in enumerate(tokens):
            if tok is not None:
                out[b] = self.fast.step(tok, self.states[b], *self._hooks(b))
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


FORWARDS = {"model": StockForward, "compact": CompactForward, "compact-ref": ReferenceCompactForward}


def best_device() -> str:
    """cuda, then mps, then cpu: where the stock forward runs by default."""
    import torch
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _device_for(forward: str, device: str | None) -> str:
    if forward != "model":
        if device not in (None, "cpu"):
            raise ValueError(f"the compact engine runs on the CPU only (asked for {device!r}); "
                             "use engine='model' for other devices")
        return "cpu"
    return device or best_device()


class StateCheck:
    """Compares, after every EXEC pass, the registers decoded from the model's GDN state with the
    simulator's, and after every pass that stored to memory the machine memory too (the per-step
    state the token protocol exposes), raising at the first difference."""

    def __init__(self, machine, img, module, spec, max_tokens: int):
        sim = Simulator(img, module, spec, max_tokens=max_tokens).run()
        self.machine = machine
        self.kernel = img.kernel
        self.memory = bytearray(initial_memory(img, module, spec))
        self.memory_checked = 0
        # a PassRecord's tokens are its EXEC then the tokens it decides, from generated index
        # `token_index` on, the last one the next control token; the carried registers are in the
        # state once the token before it has been read, i.e. at the pass generating it
        self.due = {p.token_index + len(p.tokens) - 2: p for p in sim.passes}
        self.expected = {}
        self.checked = 0

    def __call__(self, index: int, text: str, state):
        p = self.due.get(index)
        if p is None:
            return
        for r, v in p.writes.items():
            self.expected[(p.warp, r)] = list(v)
        got = self.machine.registers(state)
        for key, want in self.expected.items():
            # a register never written reads as 0 (a pass writing 0 to it emits no token)
            if got.get(key, [0] * len(want)) != want:
                warp, reg = key
                raise ExecutionFault(f"after the pass of bundle {p.pc} (generated token {index}) the model's "
                                     f"register r{reg} of warp {warp} is {got.get(key)}; the simulator has {want}",
                                     kernel=self.kernel)
        self.checked += 1
        if p.stores:
            for a, v in p.stores.items():
                self.memory[a] = v
            have, _ = self.machine.memory_image(state)
            if have != self.memory:
                a = next(i for i in range(len(have)) if have[i] != self.memory[i])
                raise ExecutionFault(f"after the pass of bundle {p.pc} (generated token {index}) the model's memory "
                                     f"byte at machine address 0x{a:x} is 0x{have[a]:02x}; the simulator has "
                                     f"0x{self.memory[a]:02x}", kernel=self.kernel)
            self.memory_checked += 1


class _Launch:
    """One launch of a batch: its program image and prompt, the tokens it generates, its checks,
    and what it leaves in the model's state when it ends."""

    def __init__(self, machine, module, spec, kernel, max_tokens, check_states, on_token, prefix):
        self.machine, self.module, self.spec = machine, module, spec
        self.img = assemble(module, spec, kernel, machine.config)
        self.prompt = prompt_tokens(self.img, module, spec)
        self.prefix = list(prefix or [])
        self.stream = TokenStream(self.prompt)
        self.max_tokens = check_step_limit(max_tokens) or default_max_tokens(spec)
        self.check = StateCheck(machine, self.img, module, spec, self.max_tokens) if check_states else None
        self.hooks = [h for h in (self.check, on_token) if h is not None]
        self.error = None
        self.ended = None        # (memory image, memory margin, pending addresses) read when it ended

    def prompt_ids(self) -> list:
        return self.prefix + [self.machine.token_id(t) for t in self.prompt]

    def decide(self, logits, state) -> int | None:
        """Take the winning token of `logits`; returns it, or None when the launch has ended."""
        from qwengpu.compiler.engine import top2
        tok, gap = top2(logits)
        text = self.machine.text(tok)
        self.stream.generated.append(text)
        self.stream.gaps.append(gap)
        try:
            for h in self.hooks:
                h(len(self.stream.generated) - 1, text, state)
            if text in FINAL or text.startswith("<fault"):
                self.end(state)
                return None
            if len(self.stream.generated) >= self.max_tokens:
                b = self.spec.block
                generated = [parse_token(t) for t in self.stream.generated]
                raise MachineStepLimit(step_limit_message(self.max_tokens, generated, b[0] * b[1] * b[2]),
                                       kernel=self.img.kernel).locate()
        except Exception as e:               # a failed check or a runaway loop ends this launch only
            self.error = e
            return None
        return tok

    def end(self, state):
        memory, margin = self.machine.memory_image(state)
        pending = self.machine.pending_addresses(state) if self.stream.generated[-1].startswith("<fault") else None
        self.ended = (memory, margin, pending)

    def result(self, forward: str, device: str, measured: dict) -> LaunchResult:
        if self.error is not None:
            raise self.error
        memory, margin, pending = self.ended
        gen = self.stream.generated
        import numpy as np
        extra = {"prompt": self.prompt, "generated": gen, "min_logit_gap": self.stream.min_gap,
                 "logit_gaps": np.asarray(self.stream.gaps, dtype=np.float32),
                 "memory_margin": margin, "image": self.img, "forward": forward, "device": device, **measured}
        if self.check is not None:
            extra["states_checked"] = self.check.checked
            extra["memory_checked"] = self.check.memory_checked
        if self.prefix:
            extra["prefix_tokens"] = len(self.prefix)
        if gen[-1].startswith("<fault"):
            raise _model_fault(self.img, gen, gen[-1], pending)
        return LaunchResult(self.img.kernel, forward, read_buffers(self.img, self.spec, memory),
                            steps=sum(t.startswith("<exec") for t in gen), tokens=len(gen),
                            lane_instructions=_lane_instructions(self.img, gen), extra=extra,
                            printf=machine_printf(self.module, self.spec, self.img.layout, memory))


def run_batch_on_model(modules: list, specs: list, kernels: list | None = None, machine=None,
                       max_tokens: int | None = None, check_states: bool = False, progress: bool = True,
                       device: str | None = None, forward: str = "compact", on_token=None,
                       prefix_ids: list | None = None, return_exceptions: bool = False) -> list:
    """Run B launches through the model's forward passes as one batch (`forward`: "model", the
    stock transformers forward with a batch dimension, the prompts left-padded; "compact", the
    compact engine stepping the sequences together; "compact-ref"). Each launch's result is what
    its single run gives: its own tokens, state checks and margins. A launch that faults or fails a
    check ends alone: with `return_exceptions` its entry is the exception, else the first one is
    raised after the batch. `on_token(b, index, text, state)` sees every generated token."""
    from tqdm.auto import tqdm

    from .checkpoint import load_machine
    B = len(modules)
    if len(specs) != B:
        raise ValueError(f"{B} programs for {len(specs)} launches")
    device = _device_for(forward, device)
    machine = machine or load_machine(COMPACT, dense=forward == "model", progress=progress)
    kernels = kernels or [None] * B
    prefix_ids = prefix_ids or [None] * B
    launches = [_Launch(machine, m, sp, k, max_tokens, check_states,
                        None if on_token is None else (lambda i, t, st, b=b: on_token(b, i, t, st)), pre)
                for b, (m, sp, k, pre) in enumerate(zip(modules, specs, kernels, prefix_ids))]
    name = launches[0].img.kernel if B == 1 else f"{B} launches"
    # the bar runs up to the token limit, so it shows how near a long launch is to being stopped
    limit = sum(ln.max_tokens for ln in launches)
    bar = tqdm(desc=f"{name} on the {forward} (token limit {limit:,})", unit="tok", total=limit, disable=not progress)
    with FORWARDS[forward](machine, device, B) as fw:
        logits = fw.prefill_all([ln.prompt_ids() for ln in launches])
        running = list(range(B))
        while running:
            tokens = [None] * B
            for b in running:
                tokens[b] = launches[b].decide(logits[b], fw.state(b))
            bar.update(len(running))
            running = [b for b in running if tokens[b] is not None]
            if running:
                logits = fw.step(tokens)
        measured = [fw.measured(b) for b in range(B)]
    bar.close()
    out = []
    for b, ln in enumerate(launches):
        try:
            out.append(ln.result(forward, device, measured[b]))
        except Exception as e:
            if not return_exceptions:
                raise
            out.append(e)
    return out


def run_on_model(module, spec: LaunchSpec, kernel: str | None = None, machine=None, max_tokens: int | None = None,
                 check_prefill: bool = False, check_states: bool = False, progress: bool = True,
                 device: str | None = None, on_token=None, forward: str = "model",
                 prefix_ids: list | None = None) -> LaunchResult:
    """Run the launch through the model's forward passes (`forward`: "model" = the stock
    transformers forward on `device` (default: cuda, mps or cpu, the best there is), "compact" =
    the compact engine on the same weights, CPU only, "compact-ref" = the reference compact
    engine). `on_token(index, text, state)` is called after every generated token's pass (the lab
    records states with it). `check_states` compares the registers decoded from the model's state
    with the simulator's after every pass; `check_prefill` re-runs the whole sequence through the
    chunked prefill path. `prefix_ids`: model token ids (text, on a spliced checkpoint) run in the
    same context before the prompt."""
    from .checkpoint import load_machine
    machine = machine or load_machine(COMPACT, dense=forward == "model", progress=progress)
    res = run_batch_on_model([module], [spec], [kernel], machine, max_tokens, check_states, progress, device,
                             forward, None if on_token is None else (lambda b, i, t, st: on_token(i, t, st)),
                             [prefix_ids])[0]
    if check_prefill:
        extra = res.extra
        extra["prefill_exact"], extra["prefill_min_gap"] = _check_prefill(machine.model, machine, extra["prompt"],
                                                                          extra["generated"], extra["device"],
                                                                          prefix_ids)
        if not extra["prefill_exact"]:
            raise ExecutionFault("the chunked prefill path disagrees with the decode path", kernel=res.kernel)
    return res


def _check_prefill(model, machine, prompt, generated, device, prefix=None):
    import torch
    model = model.to(device)
    prefix = list(prefix or [])
    ids = prefix + [machine.token_id(t) for t in prompt + generated]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids], device=device)).logits[0].float()
    n = len(prefix) + len(prompt)
    pred = logits[n - 1:n - 1 + len(generated)]
    top = torch.topk(pred, 2, dim=-1)
    want = torch.tensor(ids[n:], device=device)
    exact = bool((top.indices[:, 0] == want).all())
    return exact, float((top.values[:, 0] - top.values[:, 1]).min())


def _model_fault(img, generated, last, pending) -> MemoryFault:
    """The fault a FAULT token reports, with the address read from the model's state."""
    kind_i, lane = (int(x) for x in last[len("<fault "):-1].split())
    kind = FAULT_KINDS[kind_i]
    pc = block = warp = 0
    for t in generated:
        if t.startswith("<exec "):
            pc = int(t[6:-1].split()[0])
        elif t.startswith("<block "):
            block, warp = int(t[7:-1]), 0
        elif t.startswith("<warp "):
            warp = int(t[6:-1])
    b = img.bundles[pc]
    op = next(so.op for so in b.slots if so is not None and so.op.kind == "mem")
    space, size = op.extra["space"], op.extra["width"]
    addr = pending[lane]
    trap = trap_fault(op.extra, addr, lane)
    if trap is not None:
        return trap.locate(kernel=img.kernel, block=block, warp=warp, pc=op.ptx_pc)
    if kind == "misaligned":
        msg = f"misaligned {space} access of {size} bytes at 0x{addr:x}"
    else:
        msg = f"out-of-bounds {space} {kind} of {size} bytes at 0x{addr:x}"
    e = MemoryFault(msg, lane=lane, address=addr, kind=kind)
    return e.locate(kernel=img.kernel, block=block, warp=warp, pc=op.ptx_pc)
