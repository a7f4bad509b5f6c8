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
from qwengpu.interp.memory import ExecutionFault, MemoryFault
from qwengpu.launch import LaunchResult, LaunchSpec

from qwengpu.assembler import assemble
from qwengpu.machine.config import COMPACT, MachineConfig
from qwengpu.machine.simulator import FAULT_KINDS, MachineStepLimit, Simulator, initial_memory, read_buffers
from qwengpu.machine.tokens import token_text

from .prompt import prompt_tokens

DEFAULT_MAX_TOKENS = 100_000
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


def run_on_simulator(module, spec: LaunchSpec, kernel: str | None = None, config: MachineConfig = COMPACT,
                     max_tokens: int = DEFAULT_MAX_TOKENS) -> LaunchResult:
    img = assemble(module, spec, kernel, config)
    res = Simulator(img, module, spec, max_tokens=max_tokens).run()
    texts = [token_text(t) for t in res.tokens]
    return LaunchResult(img.kernel, "sim", res.buffers, steps=len(res.passes), tokens=len(texts),
                        lane_instructions=_lane_instructions(img, texts),
                        extra={"prompt": prompt_tokens(img, module, spec), "generated": texts, "image": img})


class StockForward:
    """The stock transformers forward: chunked prefill of the prompt, then cached decode."""

    def __init__(self, machine, device: str = "cpu"):
        import torch
        from transformers import DynamicCache
        self.torch = torch
        self.machine = machine
        self.device = device
        self.model = machine.model.to(device)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.state = DynamicCache(config=self.model.config)
        from qwengpu.compiler.run import cache_kwarg as _cache_kwarg
        self.kw = _cache_kwarg(self.model)
        lattices = getattr(machine, "lattices", None)
        self.form_noise = FormNoise(lattices) if lattices else None
        self.hooks = []

    def __enter__(self):
        if self.form_noise is not None:         # the gate pre-activations of every MLP, as they are computed
            for L, layer in enumerate(self.model.model.layers):
                self.hooks.append(layer.mlp.gate_proj.register_forward_hook(
                    lambda mod, args, out, L=L: self.form_noise(L, out)))
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()
        self.hooks = []

    def prefill(self, ids: list):
        with self.torch.no_grad():
            out = self.model(input_ids=self.torch.tensor([ids], device=self.device), use_cache=True,
                             **{self.kw: self.state})
        return out.logits[0, -1].float()

    def step(self, token: int):
        with self.torch.no_grad():
            out = self.model(input_ids=self.torch.tensor([[token]], device=self.device), use_cache=True,
                             **{self.kw: self.state})
        return out.logits[0, -1].float()


class CompactForward:
    """The compact engine (`qwengpu.compiler.fast`): the decode path with sparse weights."""

    def __init__(self, machine, device: str = "cpu"):
        import torch
        self.torch = torch
        self.fast = machine.fast()
        self.state = self.fast.new_state()
        self.threads = torch.get_num_threads()
        self.probes = {k: torch.tensor(fs) for k, fs in (getattr(machine, "probes", None) or {}).items()}
        self.worst = 0.0             # largest distance of a probed feature from its 0/1 code
        self.hook = self._measure if self.probes else None
        lattices = getattr(machine, "lattices", None)
        self.form_noise = FormNoise(lattices) if lattices else None

    def _measure(self, sublayer, h):
        idx = self.probes.get(sublayer)
        if idx is not None:
            x = h[:, idx]
            self.worst = max(self.worst, float((x - x.round()).abs().max()))

    @property
    def residual_margin(self) -> float | None:
        return 0.5 - self.worst if self.probes else None

    def __enter__(self):
        # its operations are tiny: one thread beats a contended pool by ~20x
        self.torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        self.torch.set_num_threads(self.threads)

    def prefill(self, ids: list, chunk: int = 256):
        for i in range(0, len(ids), chunk):
            logits = self.fast.forward(ids[i:i + chunk], self.state, hidden_hook=self.hook,
                                       gate_hook=self.form_noise)
        return logits

    def step(self, token: int):
        return self.fast.step(token, self.state, hidden_hook=self.hook, gate_hook=self.form_noise)


FORWARDS = {"model": StockForward, "compact": CompactForward}


def best_device() -> str:
    """cuda, then mps, then cpu: where the stock forward runs by default."""
    import torch
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _device_for(forward: str, device: str | None) -> str:
    if forward == "compact":
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


def run_on_model(module, spec: LaunchSpec, kernel: str | None = None, machine=None, max_tokens: int = DEFAULT_MAX_TOKENS,
                 check_prefill: bool = False, check_states: bool = False, progress: bool = True,
                 device: str | None = None, on_token=None, forward: str = "model",
                 prefix_ids: list | None = None) -> LaunchResult:
    """Run the launch through the model's forward passes (`forward`: "model" = the stock
    transformers forward on `device` (default: cuda, mps or cpu, the best there is), "compact" =
    the compact engine on the same weights, CPU only). `on_token(index, text, state)` is called
    after every generated token's pass (the lab records states with it). `check_states` compares
    the registers decoded from the model's state with the simulator's after every pass;
    `check_prefill` re-runs the whole sequence through the chunked prefill path. `prefix_ids`:
    model token ids (text, on a spliced checkpoint) run in the same context before the prompt."""

    from .checkpoint import load_machine
    device = _device_for(forward, device)
    machine = machine or load_machine(COMPACT, dense=forward == "model", progress=progress)
    img = assemble(module, spec, kernel, machine.config)
    prompt = prompt_tokens(img, module, spec)
    check = StateCheck(machine, img, module, spec, max_tokens) if check_states else None
    hooks = [h for h in (check, on_token) if h is not None]

    def each_token(i, text, state):
        for h in hooks:
            h(i, text, state)

    with FORWARDS[forward](machine, device) as fw:
        stream = _generate(fw, machine, img, prompt, max_tokens, progress, each_token if hooks else None, forward,
                           list(prefix_ids or []))
    memory, margin = machine.memory_image(fw.state)
    extra = {"prompt": prompt, "generated": stream.generated, "min_logit_gap": stream.min_gap,
             "memory_margin": margin, "image": img, "forward": forward, "device": device}
    if getattr(fw, "residual_margin", None) is not None:
        extra["residual_margin"] = fw.residual_margin
    if getattr(fw, "form_noise", None) is not None:
        extra["form_noise"], extra["form_noise_at"] = fw.form_noise.worst, fw.form_noise.where
    if check is not None:
        extra["states_checked"] = check.checked
        extra["memory_checked"] = check.memory_checked
    if prefix_ids:
        extra["prefix_tokens"] = len(prefix_ids)
    last = stream.generated[-1]
    if last.startswith("<fault"):
        raise _model_fault(img, stream.generated, last, machine.pending_addresses(fw.state))
    if check_prefill:
        extra["prefill_exact"], extra["prefill_min_gap"] = _check_prefill(machine.model, machine, prompt,
                                                                          stream.generated, device, prefix_ids)
        if not extra["prefill_exact"]:
            raise ExecutionFault("the chunked prefill path disagrees with the decode path", kernel=img.kernel)
    return LaunchResult(img.kernel, "model" if forward == "model" else forward, read_buffers(img, spec, memory),
                        steps=sum(t.startswith("<exec") for t in stream.generated), tokens=len(stream.generated),
                        lane_instructions=_lane_instructions(img, stream.generated), extra=extra)


def _generate(fw, machine, img, prompt, max_tokens, progress, on_token, forward, prefix=()) -> TokenStream:
    import torch
    from tqdm.auto import tqdm
    stream = TokenStream(prompt)
    bar = tqdm(desc=f"{img.kernel} on the {forward}", unit="tok", disable=not progress)
    logits = fw.prefill(list(prefix) + [machine.token_id(t) for t in prompt])
    while True:
        top = torch.topk(logits, 2)
        tok = int(top.indices[0])
        text = machine.text(tok)
        stream.generated.append(text)
        stream.gaps.append(float(top.values[0] - top.values[1]))
        bar.update(1)
        if on_token is not None:
            on_token(len(stream.generated) - 1, text, fw.state)
        if text in FINAL or text.startswith("<fault"):
            break
        if len(stream.generated) >= max_tokens:
            bar.close()
            raise MachineStepLimit(f"token limit of {max_tokens} reached (a runaway loop?)", kernel=img.kernel).locate()
        logits = fw.step(tok)
    bar.close()
    return stream


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
    if kind == "misaligned":
        msg = f"misaligned {space} access of {size} bytes at 0x{addr:x}"
    else:
        msg = f"out-of-bounds {space} {kind} of {size} bytes at 0x{addr:x}"
    e = MemoryFault(msg, lane=lane, address=addr)
    e.kind = kind
    return e.locate(kernel=img.kernel, block=block, warp=warp, pc=op.ptx_pc)
