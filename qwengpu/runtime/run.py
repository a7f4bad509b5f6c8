"""Run a launch on the machine: the token simulator, or the model's own forward passes.

    assemble -> prompt tokens -> forward passes (one generated token each) -> decode the results

On the model the prompt goes through the chunked prefill path, every generated token through the
cached one-token decode path (`check_prefill` then re-runs the whole sequence through the chunked
path and checks it predicts the same tokens). Results are read from the model's state: the global
memory from the memory layer's GDN state, a fault's address from the pending-address memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.semantics.launch_model import launch_warps
from qwengpu.semantics.faults import ExecutionFault, MemoryFault
from qwengpu.semantics.printf import machine_printf
from qwengpu.semantics.symbols import symbols_from_machine
from qwengpu.launch import LaunchResult, LaunchSpec, check_step_limit

from qwengpu.assembler import assemble
from qwengpu.engines.forwards import FORWARDS, best_device
from qwengpu.machine.config import BUILTIN, MachineConfig, config_named
from qwengpu.machine.simulator import (FAULT_KINDS, MachineStepLimit, Simulator, read_buffers,
                                      step_limit_message, trap_fault)
from qwengpu.machine.tokens import ends_launch, parse_token, token_kind, token_text

from .prompt import prompt_tokens
from .statecheck import StateCheck

#: the default token limit: this many generated tokens, or `TOKENS_PER_WARP` for each warp of the
#: launch when that is more (a launch's legitimate work grows with its warps: NVIDIA's matrixMul
#: sample on 8x8 matrices in 4x4 tiles, 16 warps, needs 109,898 tokens); a runaway loop still stops
DEFAULT_MAX_TOKENS = 100_000
TOKENS_PER_WARP = 25_000


def default_max_tokens(spec: LaunchSpec) -> int:
    """The machine engines' token limit for `spec` when none is given."""
    return max(DEFAULT_MAX_TOKENS, TOKENS_PER_WARP * launch_warps(spec))


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
        tok = parse_token(t)
        if tok[0] == "EXEC":
            n += len(image.bundles[tok[1]].ptx_pcs) * bin(tok[2]).count("1")
    return n


def run_on_simulator(module, spec: LaunchSpec, kernel: str | None = None, config: MachineConfig | str = BUILTIN,
                     max_tokens: int | None = None) -> LaunchResult:
    """One launch on the token simulator of the machine `config` (a geometry or its name)."""
    img = assemble(module, spec, kernel, config_named(config, "machine"))     # refuses bad "symbols" first
    res = Simulator(img, module, spec, max_tokens=check_step_limit(max_tokens) or default_max_tokens(spec)).run()
    texts = [token_text(t) for t in res.tokens]
    return LaunchResult(img.kernel, "sim", res.buffers, steps=len(res.passes), tokens=len(texts),
                        lane_instructions=_lane_instructions(img, texts),
                        extra={"prompt": prompt_tokens(img, module, spec), "generated": texts, "image": img},
                        printf=machine_printf(module, spec, img.layout, res.memory),
                        symbols=symbols_from_machine(module, spec, img.layout, res.memory))


def _device_for(forward: str, device: str | None) -> str:
    if forward != "model":
        if device not in (None, "cpu"):
            raise ValueError(f"the compact engine runs on the CPU only (asked for {device!r}); "
                             "use engine='model' for other devices")
        return "cpu"
    return device or best_device()


class _Launch:
    """One launch of a batch: its program image and prompt, the tokens it generates, its checks,
    and what it leaves in the model's state when it ends."""

    def __init__(self, machine, module, spec, kernel, max_tokens, check_states, on_token, prefix):
        self.img = assemble(module, spec, kernel, machine.config)         # refuses bad "symbols" first
        self.machine, self.module, self.spec = machine, module, spec
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
        from qwengpu.engines.kernels import top2
        tok, gap = top2(logits)
        text = self.machine.text(tok)
        self.stream.generated.append(text)
        self.stream.gaps.append(gap)
        try:
            for h in self.hooks:
                h(len(self.stream.generated) - 1, text, state)
            if ends_launch(text):
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
        memory, margin = self.machine.reader.memory(state)
        pending = self.machine.reader.pending_addresses(state) if token_kind(self.stream.generated[-1]) == "FAULT" else None
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
        if token_kind(gen[-1]) == "FAULT":
            raise _model_fault(self.img, gen, gen[-1], pending)
        return LaunchResult(self.img.kernel, forward, read_buffers(self.img, self.spec, memory),
                            steps=sum(token_kind(t) == "EXEC" for t in gen), tokens=len(gen),
                            lane_instructions=_lane_instructions(self.img, gen), extra=extra,
                            printf=machine_printf(self.module, self.spec, self.img.layout, memory),
                            symbols=symbols_from_machine(self.module, self.spec, self.img.layout, memory))


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
    machine = machine or load_machine(BUILTIN, dense=forward == "model", progress=progress)
    kernels = kernels or [None] * B
    prefix_ids = prefix_ids or [None] * B
    launches = [_Launch(machine, m, sp, k, max_tokens, check_states,
                        None if on_token is None else (lambda i, t, st, b=b: on_token(b, i, t, st)), pre)
                for b, (m, sp, k, pre) in enumerate(zip(modules, specs, kernels, prefix_ids))]
    name = launches[0].img.kernel if B == 1 else f"{B} launches"
    # the bar runs up to the token limit, so it shows how near a long launch is to being stopped; it
    # names the prompt's length before the prefill starts (a prompt's cost grows with what the launch writes)
    limit = sum(ln.max_tokens for ln in launches)
    bar = tqdm(desc=f"{name} on the {forward} (prompt {sum(len(ln.prompt_ids()) for ln in launches):,} tokens, "
                    f"token limit {limit:,})", unit="tok", total=limit, disable=not progress)
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
    machine = machine or load_machine(BUILTIN, dense=forward == "model", progress=progress)
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
    _, kind_i, lane = parse_token(last)
    kind = FAULT_KINDS[kind_i]
    pc = block = warp = 0
    for t in generated:
        tok = parse_token(t)
        if tok[0] == "EXEC":
            pc = tok[1]
        elif tok[0] == "BLOCK":
            block, warp = tok[1], 0
        elif tok[0] == "WARP":
            warp = tok[1]
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
