"""The machine (the SIMT GPU of `qwengpu.machine`) spliced into a Qwen3.5 checkpoint, and launches
run through the spliced checkpoint.

    from qwengpu.splice.machine_splice import splice_machine, open_spliced_machine, machine_fit
    machine_fit("base/", "tiny")                    # does the base's layer geometry hold the machine?
    splice_machine("base/", "out/", "tiny")         # compile the machine for the base + splice it
    m = open_spliced_machine("out/")                # a qwengpu.runtime.checkpoint.Machine
    qwengpu.run(ptx, spec, engine="model", machine=m, prefix_ids=text_ids)   # or engine="compact"
    compile_for_base_geometry("base/", "tiny")      # the GPU layers alone, at the base's layer shapes

`qwengpu build --base PATH --out DIR --machine tiny|compact` (or `--program
qwengpu.splice.machine_splice:tiny`) does the same from the command line; `qwengpu verify|run --model DIR`
runs launches through the result.

**Why the geometry matters.** Every decoder layer of a model shares one config, so the machine's
GPU layers are compiled with the base's layer geometry (`target_for_base`). A machine memory is a
set of GDN key heads: its slots are a key head's dimensions, each field of b bits takes one value
head (2 b <= linear_value_head_dim: two rails per bit) and, since the write enable (beta) is per
value head, a field is the write granule; the fields of one read port share a key head when the
base has several value heads per key head. A memory with more slots than a key head is split into
banks and one needing more key heads than a layer has is spread over GDN layers (the compiler's
fixed-geometry placement), so Qwen3.5's own shape (one value head per key head, key heads of 128)
holds the machine as depth. `machine_fit` checks the hard limits (value head width, a power-of-two
key dim for banked binary addresses, the MLP) before compiling and names what does not fit.

**Launches.** The GPU layers are the spliced model's first layers, so the compiled memory
placements (layer, value heads) are the spliced model's, and GPU token k has id `base vocab + k`:
`SplicedMachine` is a `Machine` with those ids, usable by `run_on_model` with the stock forward
(`forward="model"`, the whole spliced checkpoint through transformers) or the compact engine
(`forward="compact"`). The compact engine runs the GPU layers only (sparse, from the checkpoint's
safetensors), the base layers left out: on GPU tokens every base layer adds exactly 0 (its gates
are switched off by the anchor, docs/splice.md), so the GPU tokens' logits are the full model's;
a text prefix goes through the GPU layers too (where every sublayer is switched off on text: it
writes nothing), and the logits it returns at text positions are not the base model's (base
tokens get -inf).
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from qwengpu.machine.config import BUILTIN, MachineConfig, config_named
from qwengpu.runtime.checkpoint import Machine

from .splice import SpliceError, read_meta

#: the kernel whose launch (prompt + generated tokens) is recorded as the sample launch
SAMPLE_KERNEL = "dot"


# ---------------------------------------------------------------------------------------------
# does the machine fit a base?


@dataclass
class MemoryNeed:
    name: str
    slots: int
    ports: int
    granules: tuple            # widths of its write granules (a whole memory: one, its word)
    whole: bool

    def fields(self, value_bits: int) -> int:
        """Fields (value heads) at `value_bits` bits per value head, as the compiler lays it out."""
        if self.whole:
            return math.ceil(sum(self.granules) / value_bits)
        return sum(math.ceil(g / value_bits) for g in self.granules)


@dataclass
class MachineFit:
    """What the machine's circuits need from a layer geometry, and what the base has."""
    machine: str
    base: dict                 # the base's layer geometry (Target fields)
    memories: list             # [MemoryNeed]
    largest_circuit: tuple     # (name, neurons) of the widest MLP circuit
    attention_nodes: int
    problems: list = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.problems

    def key_heads(self, ratio: int, key_dim: int, value_dim: int) -> int:
        """Key heads all memories take together at `ratio` value heads per key head, key heads of
        `key_dim` dimensions (banks of key_dim slots) and value heads of `value_dim` (two rails a bit)."""
        return sum(m.ports * math.ceil(m.fields(max(1, value_dim // 2)) / ratio) * math.ceil(m.slots / key_dim)
                   for m in self.memories)

    def needs(self) -> dict:
        b = self.base
        r = max(1, (b["linear_value_heads"] or 1) // (b["linear_key_heads"] or 1))
        return {"linear_value_head_dim": 2,
                "memory_key_heads": self.key_heads(r, b["linear_key_dim"] or max(m.slots for m in self.memories),
                                                   b["linear_value_dim"] or 2),
                "intermediate_size_at_least": self.largest_circuit[1]}

    def message(self) -> str:
        n = self.needs()
        b = self.base
        return (f"machine {self.machine} does not fit this base's layer geometry (every layer of a model shares "
                f"one config, so the GPU layers must use the base's: {b['linear_key_heads']} GDN key heads and "
                f"{b['linear_value_heads']} value heads per layer, key dim {b['linear_key_dim']}, value dim "
                f"{b['linear_value_dim']}, MLP {b['intermediate']}):\n  - " + "\n  - ".join(self.problems)
                + f"\n  it needs linear_value_head_dim >= {n['linear_value_head_dim']} (two rails per bit), "
                f"a power-of-two linear_key_head_dim when a memory with binary addresses has more "
                f"slots than a key head (banks), and intermediate_size > {n['intermediate_size_at_least']} plus room "
                f"to erase dead variables; its memories take {n['memory_key_heads']} key heads in all, spread over "
                f"as many GDN layers as they need. See docs/splice.md, 'The real machine'.")


@functools.lru_cache(maxsize=None)
def _machine_needs(cfg: MachineConfig) -> tuple[list, tuple, int]:
    from qwengpu.machine.hardware import Hardware
    return _program_needs(Hardware(cfg).p)


def _program_needs(prog) -> tuple[list, tuple, int]:
    mems = [MemoryNeed(m.name, int(m.slots), int(m.ports), tuple(g.width for g in m.granules), bool(m.whole))
            for m in prog.memories]
    mlp = [(n.name, len(n.neurons)) for n in prog.nodes if n.kind == "mlp"]
    attn = sum(1 for n in prog.nodes if n.kind == "attn")
    return mems, max(mlp, key=lambda x: x[1], default=("-", 0)), attn


def machine_fit(base, machine="tiny", program=None) -> MachineFit:
    """Check the machine's memories and circuits against a base's layer geometry (a checkpoint
    path, a `BaseCheckpoint`, a config dict or a compiler `Target`)."""
    from qwengpu.compiler import Target

    from .target import target_for_base
    cfg = config_named(machine)
    t = base if isinstance(base, Target) else target_for_base(base)
    mems, largest, attn = _machine_needs(cfg) if program is None else _program_needs(program)
    geo = {k: getattr(t, k) for k in ("linear_key_heads", "linear_value_heads", "linear_key_dim", "linear_value_dim",
                                      "intermediate", "attn_heads", "head_dim")}
    fit = MachineFit(cfg.name, geo, mems, largest, attn)
    hk, hv, dk, dv = t.linear_key_heads, t.linear_value_heads, t.linear_key_dim, t.linear_value_dim
    p = fit.problems
    # memories larger than a key head are banked, and those needing more key heads than a layer
    # has are spread over layers (the compiler's `_spread_units`); every memory is laid out in
    # fields as wide as a value head holds (a write granule wider than that spans several)
    if dv < 2:
        p.append(f"linear_value_head_dim {dv} < 2: a value head holds no bit (two rails per bit)")
    if dk & (dk - 1) and any(m.slots > dk for m in mems):
        p.append(f"linear_key_head_dim {dk} is not a power of two, and memories larger than a key head are "
                 f"banked by their address bits")
    if hv % hk:
        p.append(f"linear_num_value_heads {hv} is not a multiple of linear_num_key_heads {hk}")
    if t.intermediate is not None and largest[1] > t.intermediate:
        p.append(f"intermediate_size {t.intermediate} < {largest[1]} neurons of the circuit {largest[0]}")
    return fit


# ---------------------------------------------------------------------------------------------
# compiling the machine for a base


def sample_launch(config: MachineConfig) -> list[str]:
    """The dot-product launch on `config`: its prompt then the tokens the machine generates."""
    from qwengpu.api import load_program
    from qwengpu.assembler import assemble
    from qwengpu.runtime.run import run_on_simulator
    from qwengpu.runtime.prompt import prompt_tokens
    from qwengpu.suite import get
    k = get(SAMPLE_KERNEL)
    module, spec = load_program(k.ptx()), k.spec()
    img = assemble(module, spec, config=config)
    return prompt_tokens(img, module, spec) + run_on_simulator(module, spec, config=config).extra["generated"]


def compile_for_base(target, machine="tiny"):
    """The machine compiled with the base's geometry (`target = target_for_base(base)`), with
    the metadata the splice records (`machine_meta`: config, placements, source hash) and a sample
    launch. Refuses with `SpliceError` (what does not fit, what is needed) before compiling when the
    geometry cannot hold it."""
    from qwengpu.compiler import CompileError, compile_program
    from qwengpu.machine.hardware import Hardware
    from qwengpu.runtime.checkpoint import source_hash
    cfg = config_named(machine)
    hw = Hardware(cfg)
    fit = machine_fit(target, cfg, hw.p)
    if not fit.fits:
        raise SpliceError(fit.message())
    try:
        compiled = compile_program(hw.p, target, dense=False)    # sparse: the splice expands one tensor at a time
    except CompileError as e:
        narrow = f" (the base's MLP, intermediate_size {target.intermediate}, is too narrow)" if "MLP" in str(e) else ""
        fit.problems.append(f"the compiler: {e}{narrow}")
        raise SpliceError(fit.message()) from e
    compiled.machine_meta = {
        "config": asdict(cfg),
        "source_hash": source_hash(cfg, {}),
        "placements": {m.name: compiled.placement(m).to_json() for m in hw.p.memories},
        "fit": fit.needs(),
    }
    compiled.sample_launch = sample_launch(cfg)
    return compiled


def compile_for_base_geometry(base, machine="tiny", dense: bool = False):
    """The machine compiled stand-alone for the base's layer geometry (`target_for_base` without
    the base's features in front): the GPU layers a splice would add, at their true shapes, as a
    `Machine` that runs on its own (where the whole spliced checkpoint is too large to load)."""
    import dataclasses

    from qwengpu.runtime.checkpoint import compile_machine

    from .target import target_for_base
    t = dataclasses.replace(target_for_base(base), offset=0, require_attention=True)
    return compile_machine(config_named(machine), dense=dense, **{f.name: getattr(t, f.name) for f in dataclasses.fields(t)})


def _qwen35_2b():
    from .fixtures import qwen35_2b_text_config
    return qwen35_2b_text_config()


#: named base geometries for `machine_for_geometry` (`qwengpu verify --geometry NAME`): their text configs
GEOMETRIES = {"qwen3.5-2b": _qwen35_2b}


def machine_for_geometry(geometry, machine=BUILTIN.name):
    """`machine` compiled stand-alone for a base's true layer geometry (`compile_for_base_geometry`):
    `geometry` is a name in GEOMETRIES (Qwen3.5-2B's shapes, nothing downloaded) or a base
    checkpoint's directory. The suite and random programs run on it where the whole spliced
    checkpoint is too large to write or load."""
    import os
    if geometry in GEOMETRIES:
        base = GEOMETRIES[geometry]()
    elif os.path.isdir(geometry):
        base = geometry
    else:
        raise ValueError(f"unknown geometry {geometry!r}: a base checkpoint's directory or one of "
                         f"{', '.join(GEOMETRIES)}")
    return compile_for_base_geometry(base, machine)


def tiny(target):
    """`--program qwengpu.splice.machine_splice:tiny`: the TINY machine compiled for `target`."""
    return compile_for_base(target, "tiny")


def compact(target):
    """`--program qwengpu.splice.machine_splice:compact`: COMPACT (float as soft-float routines) compiled for `target`."""
    return compile_for_base(target, "compact")


def builtin(target):
    """`--program qwengpu.splice.machine_splice:builtin`: the built-in machine (COMPACT with the float unit)
    compiled for `target`."""
    return compile_for_base(target, BUILTIN)


def splice_machine(base, out_dir, machine="tiny", **kw):
    """Compile `machine` (a name or a MachineConfig) for the base's geometry and splice it in
    (`splice` options in `kw`). Returns the `SpliceReport`."""
    from .splice import build
    cfg = config_named(machine)
    return build(base, out_dir, lambda target: compile_for_base(target, cfg), **kw)


# ---------------------------------------------------------------------------------------------
# running launches through a spliced checkpoint


def _safetensors_index(path: Path) -> dict:
    idx = path / "model.safetensors.index.json"
    if idx.exists():
        return json.loads(idx.read_text())["weight_map"]
    from safetensors import safe_open
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        return {k: "model.safetensors" for k in f.keys()}


class SplicedCompact:
    """The compact engine on a spliced checkpoint's GPU layers (see the module doc): the same
    interface as the engine (`new_state`, `forward`, `step`), in the spliced model's token ids;
    logits over the whole vocabulary, base tokens at -inf. `reference`: the reference engine
    (`ReferenceEngine`, `--engine compact-ref`) instead of `CompactEngine`."""

    def __init__(self, path, meta: dict, cache: bool = True, reference: bool = False):
        import torch
        from safetensors import safe_open
        from transformers import Qwen3_5TextConfig

        from qwengpu.engines.compact import CompactEngine
        from qwengpu.compiler.sparse import SparseMatrix
        from qwengpu.engines.reference import ReferenceEngine
        from qwengpu.runtime.checkpoint import engine_file
        path = Path(path)
        self.path = path
        self.offset = int(meta["gpu"]["token_offset"])
        self.g = len(meta["gpu"]["tokens"])
        self.vocab = self.offset + self.g
        self.n = int(meta["gpu"]["layers"])
        cfg = json.loads((path / "config.json").read_text())
        tc = dict(cfg.get("text_config", cfg)) if cfg.get("model_type") == "qwen3_5" else dict(cfg)
        self.prefix = "model.language_model." if cfg.get("model_type") == "qwen3_5" else "model."
        self.wmap = _safetensors_index(path)
        f = path / engine_file().replace("compact_engine", "compact_gpu_layers")
        if cache and f.exists():
            self.weights = torch.load(f, weights_only=False)
        else:
            tc = {k: v for k, v in tc.items() if k not in ("model_type", "transformers_version")}
            tc.update(num_hidden_layers=self.n, layer_types=list(tc["layer_types"][:self.n]), vocab_size=self.g,
                      mtp_num_hidden_layers=0)
            config = Qwen3_5TextConfig(**tc)
            P = self.prefix
            sd = {}
            by_shard: dict = {}
            for k, shard in self.wmap.items():
                if k.startswith(P + "layers."):
                    L = int(k[len(P) + 7:].split(".", 1)[0])
                    if L < self.n:
                        by_shard.setdefault(shard, []).append(k)
            for shard, names in sorted(by_shard.items()):
                with safe_open(str(path / shard), framework="pt") as fh:
                    for k in names:
                        t = fh.get_tensor(k).float()
                        # copies: a tensor viewing the file would keep its mapping alive
                        sd["model." + k[len(P):]] = SparseMatrix(t) if t.dim() == 2 else t.clone()
            sd["model.embed_tokens.weight"] = self._rows(P + "embed_tokens.weight", self.offset, self.vocab)
            head = "lm_head.weight" if "lm_head.weight" in self.wmap else P + "embed_tokens.weight"    # tied
            sd["lm_head.weight"] = self._rows(head, self.offset, self.vocab)
            sd["model.norm.weight"] = self._rows(P + "norm.weight", None, None)
            self.weights = ReferenceEngine.from_state_dict(config, sd)
            if cache:
                try:
                    torch.save(self.weights, f)
                except OSError:
                    pass
        self.engine = self.weights if reference else CompactEngine(self.weights)
        self.text_rows: dict = {}          # text token id -> local row (appended after the GPU tokens)

    def _rows(self, name: str, lo, hi):
        from safetensors import safe_open
        with safe_open(str(self.path / self.wmap[name]), framework="pt") as fh:
            if lo is None:
                return fh.get_tensor(name).float().clone()
            return fh.get_slice(name)[lo:hi].float().clone()

    def _local(self, tok: int) -> int:
        """The engine's row of a spliced-model token id (text rows are read when first seen)."""
        import torch
        if self.offset <= tok < self.vocab:
            return tok - self.offset
        if not 0 <= tok < self.offset:
            raise ValueError(f"token id {tok} is outside the spliced vocabulary (0..{self.vocab - 1})")
        k = self.text_rows.get(tok)
        if k is None:
            row = self._rows(self.prefix + "embed_tokens.weight", tok, tok + 1)[0]
            cols = torch.nonzero(row, as_tuple=True)[0]
            k = self.engine.add_input_row(cols, row[cols])
            self.text_rows[tok] = k
        return k

    def _global(self, logits):
        import torch
        out = torch.full((self.vocab,), float("-inf"))
        out[self.offset:] = logits
        return out

    def new_state(self):
        return self.engine.new_state()

    def forward(self, token_ids: list, state, hidden_hook=None, gate_hook=None):
        return self._global(self.engine.forward([self._local(t) for t in token_ids], state, hidden_hook, gate_hook))

    def step(self, token_id: int, state, hidden_hook=None, gate_hook=None):
        return self._global(self.engine.step(self._local(token_id), state, hidden_hook, gate_hook))

    def new_batch(self, size: int):
        return self.engine.new_batch(size)

    def step_batch(self, tokens, batch):
        """`CompactEngine.step_batch` in the spliced model's ids: logits [B, whole vocabulary]."""
        import torch
        logits = self.engine.step_batch([None if t is None else self._local(t) for t in tokens], batch)
        out = torch.full((len(tokens), self.vocab), float("-inf"))
        out[:, self.offset:] = logits[:, :self.g]
        return out

    def noise_where(self, state):
        return self.engine.noise_where(state)


@dataclass
class SplicedMachine(Machine):
    """A `Machine` whose model is a spliced checkpoint: GPU token k is id `token_offset + k`;
    `model` is the whole spliced checkpoint (AutoModelForCausalLM, fp32), `compact_engine()` the compact
    engine on its GPU layers (`SplicedCompact`)."""
    token_offset: int = 0
    gpu_layers: int = 0
    meta: dict = field(default_factory=dict, repr=False)

    def token_id(self, text: str) -> int:
        return self.token_offset + super().token_id(text)

    def text(self, token_id: int) -> str:
        k = token_id - self.token_offset
        if 0 <= k < len(self.tokens):
            return self.tokens[k]
        return f"<text {token_id}>"          # a base token where a GPU token was due: a mismatch

    def compact_engine(self):
        if getattr(self, "_compact", None) is None:
            self._compact = SplicedCompact(self.path, self.meta)
        return self._compact

    def reference_engine(self):
        if getattr(self, "_reference", None) is None:
            self._reference = SplicedCompact(self.path, self.meta, reference=True)
        return self._reference

    @property
    def tokenizer(self):
        if getattr(self, "_tokenizer", None) is None:
            from transformers import AutoTokenizer
            self._tokenizer = AutoTokenizer.from_pretrained(self.path)
        return self._tokenizer


def open_spliced_machine(model_dir, check_source: bool = True) -> SplicedMachine:
    """The machine inside a spliced checkpoint (`splice_machine` / `qwengpu build --base .. --machine
    ..`), for `run_on_model(..., machine=m)` and `qwengpu verify|run --model DIR`. `check_source`
    refuses a checkpoint built from other circuits than this version of qwengpu's."""
    from qwengpu.compiler.placement import MemoryPlacement
    from qwengpu.runtime.checkpoint import source_hash
    path = Path(model_dir)
    meta = read_meta(path)
    mm = meta.get("machine")
    if not mm:
        raise ValueError(f"{path}: the spliced GPU is not the machine (program {meta['gpu']['program']!r}); "
                         "splice it with `qwengpu build --base PATH --out DIR --machine tiny`")
    config = MachineConfig.from_dict(mm["config"])
    if check_source and mm.get("source_hash") != source_hash(config, {}):
        raise ValueError(f"the machine in {path} was built from other circuits than this version of qwengpu's; "
                         f"splice it again (`qwengpu build --base BASE --out {path} --machine {config.name} "
                         "--overwrite`)")
    placements = {n: MemoryPlacement.from_json(p) for n, p in mm["placements"].items()}
    report = {"layers": meta["gpu"]["layers"], "width": meta["gpu"]["width"],
              "base_layers": meta["layers"]["base"][1] - meta["layers"]["base"][0],
              "vocab": meta["gpu"]["token_offset"] + len(meta["gpu"]["tokens"])}
    return SplicedMachine(config, path, list(meta["gpu"]["tokens"]), placements, report,
                          token_offset=int(meta["gpu"]["token_offset"]), gpu_layers=int(meta["gpu"]["layers"]),
                          meta=meta)


# ---------------------------------------------------------------------------------------------
# a base geometry the machine fits (tests, docs)


def fitting_text_config(machine="tiny", vocab: int = 416, hidden: int = 64, layers: int = 4,
                        grouped: bool = False) -> dict:
    """A small Qwen3.5 text config whose layer geometry holds `machine` (for random test bases).

    Default: Qwen3.5's own GDN shape class, one value head per key head and key heads of 128
    dims (as Qwen3.5-2B), with 32 key heads per layer (the 2B has 16: twice as many keeps the
    GPU's layer count down) and value heads of 16 dims (8-bit fields): the machine's 256-slot
    memories are banked over two key heads and spread over layers. `grouped=True`: 4 key heads of
    256 dims with 18 value heads each (r = 18: a memory's fields share its key head; `mem`, 18
    fields x 4 ports, fills a layer). MLP 2560 either way, or more where the machine's widest circuit
    with an eighth of the MLP beside it for erases (the scheduler's last resort) needs it (COMPACT's
    widest has 1,760 neurons: 2560; the float unit's 2,632: 3072)."""
    widest = _machine_needs(config_named(machine))[1][1]
    from .fixtures import tiny_text_config
    c = tiny_text_config(vocab, hidden)
    if grouped:
        c.update(linear_num_key_heads=4, linear_num_value_heads=72, linear_key_head_dim=256, linear_value_head_dim=16)
    else:
        c.update(linear_num_key_heads=32, linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=16)
    c.update(intermediate_size=max(2560, -(-widest * 8 // 7 // 256) * 256), num_hidden_layers=layers,
             layer_types=(["linear_attention", "full_attention"] * layers)[:layers])
    return c
