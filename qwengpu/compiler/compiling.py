"""Compile a `Program` into a stock `Qwen3_5ForCausalLM`: schedule -> layout -> weights.

- **Schedule**: every node gets the earliest sublayer after its inputs exist. Sublayer 2L is layer
  L's token mixer (GDN or full attention), 2L+1 its MLP. Capacity limits of the target (neurons per
  MLP, key heads per GDN layer) push nodes to later layers.
- **Layout**: the anchor, then every residual variable's features, in creation order.
- **Weights**: the norm scale is a compile-time constant (the anchor dominates every RMS), folded
  into every projection that reads the residual.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from . import attention, margins
from .attention import emit_attention, rope_inv_freq
from .core import ANCHOR, ANCHOR_FEATURE, CompileError, EmbedNode, Lin, Node
from .gadgets import n_linear
from .memory import BETA_L, KEY_OFF, KEY_ON, VALUE_L, Z_ON, Previous, bank_match, key_form
from .narrow import narrow
from .placement import MemoryPlacement, field_chunks, key_banks, key_heads, key_units, layer_heads, layer_units
from .program import Program, topo_order


@dataclass
class Target:
    """The geometry to compile for. `None` fields are sized to fit the program (compact)."""
    name: str = "compact"
    hidden: int | None = None
    intermediate: int | None = None
    layer_types: list[str] | None = None       # a fixed pattern, repeated; None = chosen per layer
    linear_key_heads: int | None = None
    linear_value_heads: int | None = None
    linear_key_dim: int | None = None
    linear_value_dim: int | None = None
    attn_heads: int = 2
    attn_kv_heads: int = 2
    head_dim: int = 128
    partial_rotary_factor: float = 0.25
    rope_theta: float = 65536.0 ** 2        # inv_freq quarters per rotary pair at rotary dim 32
    rms_norm_eps: float = 1e-6
    min_layers: int = 0
    offset: int = 0                          # leading residual features left to others (a base model)
    require_attention: bool = True           # a stand-alone model needs one full-attention layer
    inert_mixer: str = "full_attention"      # mixer type of layers whose mixer does nothing
    reuse: bool = True                       # erase dead variables and reuse their residual features
    max_group: int = 16                      # value heads per key head, when sized to fit
    mlp_budget: int | None = None            # soft MLP width: spread circuits over layers to stay under it
    gdn_head_budget: int | None = None       # soft GDN key heads per layer (spreads memories over layers)
    check_margins: bool = True               # refuse a build whose static margins are below the fp32 bound
    narrow: bool = True                      # move nodes within their slack to narrow the residual (`narrow`)
    tied_head: bool = False                  # the unembedding's inputs on features of their own all pass, its
                                             # constants on a bias feature: a row can be both (`_add_tied_head`)

    @staticmethod
    def compact(**kw) -> "Target":
        return Target(**kw)

    @staticmethod
    def qwen35_2b() -> "Target":
        """The layer geometry of Qwen3.5-2B (24 layers: 3 linear + 1 full attention, repeated)."""
        return Target(name="qwen3.5-2b", hidden=2048, intermediate=6144,
                      layer_types=["linear_attention"] * 3 + ["full_attention"],
                      linear_key_heads=16, linear_value_heads=16, linear_key_dim=128,
                      linear_value_dim=128, attn_heads=8, attn_kv_heads=2, head_dim=256,
                      partial_rotary_factor=0.25, rope_theta=10_000_000.0)


@dataclass
class Schedule:
    layers: int
    layer_types: list[str]
    mlp: dict = field(default_factory=dict)      # layer -> [MLPNode]
    mixers: dict = field(default_factory=dict)   # layer -> [Node]
    available: dict = field(default_factory=dict)  # var name -> sublayer index after which it exists
    first_write: dict = field(default_factory=dict)  # var name -> first sublayer writing part of it
                                                     # (a memory spread over layers), when earlier


def _mixer_type(node: Node) -> str:
    return "linear_attention" if node.kind == "gdn" else "full_attention"


def schedule(prog: Program, target: Target, mlp_cap: int | None = None, erase_room: dict | None = None) -> Schedule:
    """`mlp_cap`: neurons per MLP the circuits may take (default the target's MLP width), the
    rest left to the erases of dead variables; `erase_room`: layer -> neurons more to leave free
    there for them."""
    for n in prog.nodes:
        if hasattr(n, "unit_layers"):
            del n.unit_layers
    full_cap = mlp_cap or target.intermediate or target.mlp_budget
    room = erase_room or {}

    def cap_at(L):                          # neurons the circuits may take in layer L's MLP
        return full_cap - room.get(L, 0) if full_cap else full_cap
    avail: dict[str, int] = {}
    layer_types: dict[int, str] = {}
    mlp: dict[int, list] = {}
    mixers: dict[int, list] = {}
    mlp_load: dict[int, int] = {}
    heads_load: dict[int, int] = {}
    first_write: dict[str, int] = {}
    for node in topo_order(prog):
        if isinstance(node, EmbedNode):
            for v in node.outputs:
                avail[v.name] = -1
            continue
        ready = max([avail[v.name] for v in node.inputs], default=-1)
        if node.kind == "mlp":
            layer = (ready + 1) // 2 if ready >= 0 else 0          # first MLP sublayer 2L+1 > ready
            if 2 * layer + 1 <= ready:
                layer += 1
            layer = max(layer, node.min_layer)
            n = len(node.neurons)
            cap = cap_at(layer)
            while cap and mlp_load.get(layer, 0) + n > cap:
                if n > full_cap:
                    if not target.intermediate or (n <= target.intermediate and not mlp_load.get(layer, 0)):
                        break                   # a soft budget: an oversized circuit gets a layer of its own
                    raise CompileError(f"{node.name} needs {n} neurons; the target's MLP has "
                                       f"{target.intermediate}")
                if not mlp_load.get(layer, 0) and target.mlp_budget and not target.intermediate:
                    break
                layer += 1
                cap = cap_at(layer)
            mlp.setdefault(layer, []).append(node)
            mlp_load[layer] = mlp_load.get(layer, 0) + n
            sub = 2 * layer + 1
        else:
            layer = (ready + 2) // 2 if ready >= 0 else 0          # first mixer sublayer > ready
            if 2 * layer <= ready:
                layer += 1
            layer = max(layer, node.min_layer)
            want = _mixer_type(node)
            group = _group_dk(target)[0]
            kh = key_heads(node, group, target.linear_key_dim)
            if (node.kind == "gdn" and target.linear_key_heads and kh > target.linear_key_heads
                    and not target.layer_types):
                layer = _spread_units(node, layer, group, target, layer_types, mixers, heads_load)
                for v in node.outputs:
                    avail[v.name] = 2 * layer
                    first_write[v.name] = 2 * node.unit_layers[0]
                continue
            while True:
                if target.layer_types:
                    t = target.layer_types[layer % len(target.layer_types)]
                else:
                    t = layer_types.get(layer, want)
                cap = target.linear_key_heads if want == "linear_attention" else target.attn_heads
                fits = cap is None or heads_load.get(layer, 0) + kh <= cap
                if cap is None and want == "linear_attention" and target.gdn_head_budget:
                    fits = heads_load.get(layer, 0) + kh <= target.gdn_head_budget or not heads_load.get(layer, 0)
                if t == want and fits:
                    break
                if cap is not None and kh > cap:
                    raise CompileError(f"{node.name} needs {kh} heads; the target has {cap} per layer")
                layer += 1
            layer_types[layer] = want
            mixers.setdefault(layer, []).append(node)
            heads_load[layer] = heads_load.get(layer, 0) + kh
            sub = 2 * layer
        node.layer = layer
        for v in node.outputs:
            avail[v.name] = sub
    _delay_late_nodes(prog, mixers, avail, layer_types, target, heads_load)
    _sink_nodes(prog, mlp, mlp_load, mixers, heads_load, avail, layer_types, target, cap_at)
    if target.narrow:
        state = SimpleNamespace(mlp=mlp, mixers=mixers, available=avail, first_write=first_write, types=layer_types)
        narrow(prog, state, target, lambda n: key_heads(n, *_group_dk(target)), cap_at)
    last = max(list(mlp) + list(mixers) + [0])
    n_layers = max(last + 1, target.min_layers)
    types = []
    for layer in range(n_layers):
        if target.layer_types:
            types.append(target.layer_types[layer % len(target.layer_types)])
        else:
            # a layer with no token mixer of its own gets the cheaper (inert) attention mixer
            types.append(layer_types.get(layer, target.inert_mixer))
    if target.require_attention and "full_attention" not in types:
        # transformers' cache needs one full-attention layer: add an inert one at the end
        types.append("full_attention")
        n_layers += 1
    return Schedule(n_layers, types, mlp, mixers, avail, first_write)


def _sink_nodes(prog: Program, mlp: dict, mlp_load: dict, mixers: dict, heads_load: dict, avail: dict,
                layer_types: dict, target: "Target", cap_at):
    """Move nodes placed as early as possible down towards their first reader when that narrows
    the residual: a node whose outputs outweigh the inputs it is the last reader of (moving it
    lengthens those) goes to the latest layer before its first reader that has room. Consumers
    first, so a chain (a memory read just in time, then the decoders of its word) moves together;
    memories move only when marked `late` and their write inputs come from another late memory or
    are lighter than what they read."""
    readers: dict = {}
    for n in prog.nodes:
        if n.layer is not None:
            for v in n.inputs:
                readers.setdefault(v.name, set()).add(n)
    def sub(n):            # where n reads its inputs: a memory spread over layers, at its first
        layers = getattr(n, "unit_layers", None)
        return 2 * min(layers) if layers else 2 * n.layer + (1 if n.kind == "mlp" else 0)

    def saved_area(node, here, new):
        """Residual features x sublayers the move saves: its outputs are born later, and every
        input it would now be the last reader of lives longer (inputs of a mixer that come from
        a late memory are not counted: that memory follows it down)."""
        saved = sum(v.size for v in node.outputs) * (new - here)
        for v in node.inputs:
            if node.kind != "mlp" and getattr(v.producer, "late", False):
                continue
            others = max((sub(r) for r in readers[v.name] if r is not node), default=-1)
            saved -= v.size * (max(others, new) - max(others, here))
        return saved
    kept = prog.output_sources()
    for node in reversed(topo_order(prog)):
        if node.layer is None or isinstance(node, EmbedNode) or getattr(node, "unit_layers", None):
            continue
        if node.kind != "mlp" and not getattr(node, "late", False):
            continue
        if any(v.name in kept for v in node.outputs):
            continue
        uses = [sub(r) for v in node.outputs for r in readers.get(v.name, ())]
        if not uses:
            continue
        first = min(uses)
        latest = (first - 2) // 2 if node.kind == "mlp" else (first - 1) // 2
        if latest <= node.layer:
            continue
        here = sub(node)
        if node.kind == "mlp":
            n = len(node.neurons)
            L = latest
            while L > node.layer and cap_at(L) and mlp_load.get(L, 0) + n > cap_at(L):
                L -= 1
            if L <= node.layer or saved_area(node, here, 2 * L + 1) <= 0:
                continue
            mlp[node.layer].remove(node)
            mlp_load[node.layer] -= n
            mlp.setdefault(L, []).append(node)
            mlp_load[L] = mlp_load.get(L, 0) + n
            node.layer = L
        else:
            want = _mixer_type(node)
            kh = key_heads(node, *_group_dk(target))
            cap = target.linear_key_heads or target.gdn_head_budget
            L = latest
            while L > node.layer:
                t = target.layer_types[L % len(target.layer_types)] if target.layer_types else layer_types.get(L, want)
                if t == want and (not cap or heads_load.get(L, 0) + kh <= cap):
                    break
                L -= 1
            if L <= node.layer or saved_area(node, here, 2 * L) <= 0:
                continue
            mixers[node.layer].remove(node)
            heads_load[node.layer] -= kh
            if not mixers[node.layer] and not target.layer_types:
                layer_types.pop(node.layer, None)           # nothing left to mix there: inert
            mixers.setdefault(L, []).append(node)
            heads_load[L] = heads_load.get(L, 0) + kh
            layer_types[L] = want
            node.layer = L
        for v in node.outputs:
            avail[v.name] = sub(node)


def _spread_units(node, layer, group, target, layer_types, mixers, heads_load) -> int:
    """Place a memory with more key heads than a layer has over consecutive GDN layers from
    `layer` on, filling each layer's free key heads (a fixed geometry, e.g. a base model's). Every
    unit gets the write and its own query, so the parts are independent; the word is complete
    after the last part's layer. Returns that layer."""
    cap = target.linear_key_heads
    spread = []
    L = layer
    for _unit in key_units(node, group, target.linear_key_dim):
        while layer_types.get(L, "linear_attention") != "linear_attention" or heads_load.get(L, 0) >= cap:
            L += 1
        spread.append(L)
        heads_load[L] = heads_load.get(L, 0) + 1
        layer_types[L] = "linear_attention"
        if node not in mixers.setdefault(L, []):
            mixers[L].append(node)
    node.unit_layers = spread
    node.layer = spread[-1]
    return node.layer


def _group_dk(target: "Target") -> tuple:
    """The value heads per key head and the key dimension the target's GDN layers have."""
    group = ((target.linear_value_heads // target.linear_key_heads)
             if target.linear_key_heads and target.linear_value_heads else target.max_group)
    return group, target.linear_key_dim


def _delay_late_nodes(prog: Program, mixers: dict, avail: dict, layer_types: dict, target: "Target",
                      heads_load: dict):
    """Move mixer nodes marked `late` to the last layer before their first reader (memories read
    just in time keep their outputs out of the residual until they are needed)."""
    consumers: dict = {}
    for n in prog.nodes:
        if n.layer is None:
            continue
        sub = 2 * n.layer + (1 if n.kind == "mlp" else 0)
        for v in n.inputs:
            consumers.setdefault(v.name, []).append(sub)
    for n in reversed(prog.nodes):
        if not getattr(n, "late", False) or n.kind == "mlp" or n.layer is None:
            continue
        first_use = min([u for v in n.outputs for u in consumers.get(v.name, [])], default=None)
        if first_use is None or getattr(n, "unit_layers", None):
            continue                        # spread over several layers: stays where it was placed
        want = _mixer_type(n)
        kh = key_heads(n, *_group_dk(target))
        # key heads a layer may take: the geometry's (a fixed target), else the soft budget
        cap = target.linear_key_heads or target.gdn_head_budget
        target_layer = (first_use - 1) // 2 if first_use % 2 == 1 else first_use // 2 - 1
        while target_layer > n.layer:
            if target.layer_types:
                t = target.layer_types[target_layer % len(target.layer_types)]
            else:
                t = layer_types.get(target_layer, want)
            room = not cap or want != "linear_attention" or heads_load.get(target_layer, 0) + kh <= cap
            if t == want and room:
                break
            target_layer -= 1
        if target_layer > n.layer:
            heads_load[n.layer] = heads_load.get(n.layer, 0) - kh
            heads_load[target_layer] = heads_load.get(target_layer, 0) + kh
            mixers[n.layer].remove(n)
            n.layer = target_layer
            mixers.setdefault(target_layer, []).append(n)
            layer_types[target_layer] = want
            for v in n.outputs:
                avail[v.name] = 2 * target_layer


@dataclass
class Layout:
    dims: dict            # feature -> residual index
    width: int
    born: dict = field(default_factory=dict)     # var name -> sublayer after which it holds its value
    erased: dict = field(default_factory=dict)   # var name -> sublayer (an MLP) after which it is dead
    kept: set = field(default_factory=set)       # vars kept to the end (outputs)
    erase: dict = field(default_factory=dict)    # var name -> [(feature, last MLP sublayer that may
                                                 # erase it)]: the features a later variable reuses

    def index(self, feature) -> int:
        return self.dims[feature]


FINAL = 10 ** 9


def layout(prog: Program, sched: "Schedule | None" = None, min_width: int = 0, offset: int = 0,
           reuse: bool = True, keep: set | None = None, reserve: set | None = None) -> Layout:
    """Residual features for every variable: the anchor at `offset`, then each variable gets
    features that are free when it is written. A variable dies after its last reader; the MLP of
    that reader's layer erases it (writes minus its value), and later variables reuse its features."""
    dims = {ANCHOR_FEATURE: offset}
    rvars = prog.residual_vars
    if sched is None or not reuse:
        k = offset + 1
        for v in rvars:
            for i in range(v.size):
                dims[(v.name, i)] = k
                k += 1
        born = {v.name: (sched.available.get(v.name, -1) if sched else -1) for v in rvars}
        return Layout(dims, max((k + 7) // 8 * 8, min_width), born, {}, set())
    keep = set(keep or ()) | prog.output_sources()
    last: dict = {}
    for n in prog.nodes:
        if n.layer is None:
            continue
        sub = 2 * n.layer + (1 if n.kind == "mlp" else 0)
        for v in n.inputs:
            last[v.name] = max(last.get(v.name, -1), sub)
    born, erased = {}, {}
    for v in rvars:
        b = sched.available.get(v.name, -1)
        born[v.name] = b
        if v.name in keep:
            continue
        u = last.get(v.name)
        if u is None:                     # never read: erase at the first MLP after it is written
            u = b + 1
        erased[v.name] = u if u % 2 == 1 else u + 1
    # allocate in order of birth; a feature freed by an erase at sublayer e may be written by a
    # variable born at sublayer >= e (the same MLP adds the new value and removes the old)
    free: list[tuple] = []                  # (free from sublayer, feature index, var, its feature)
    erase: dict = {}
    k = offset + 1
    first_write = sched.first_write
    reserve = set(reserve or ())
    for v in sorted((v for v in rvars if v.name in reserve), key=lambda v: v.name):
        for i in range(v.size):             # features of their own from the embedding on, never reused
            dims[(v.name, i)] = k
            k += 1
    for v in sorted(rvars, key=lambda v: (first_write.get(v.name, born[v.name]), v.name)):
        if v.name in reserve:
            continue
        b = first_write.get(v.name, born[v.name])      # its features must be free from the first write
        usable = [f for f in free if f[0] <= b and (f[0] < b or b % 2 == 1)]
        usable.sort()
        got = []
        for f in usable[:v.size]:
            free.remove(f)
            got.append(f[1])
            # reused: the old value must go, by an MLP from f[0] up to the writer's sublayer b
            erase.setdefault(f[2], []).append((f[3], b if b % 2 == 1 else b - 1))
        while len(got) < v.size:
            got.append(k)
            k += 1
        for i, d in enumerate(got):
            dims[(v.name, i)] = d
        if v.name in erased:
            free += [(erased[v.name], d, v.name, i) for i, d in enumerate(got)]
    width = max((k + 7) // 8 * 8, min_width)
    return Layout(dims, width, born, erased, keep, {n: sorted(fs) for n, fs in erase.items()})


@dataclass
class Compiled:
    """A compiled program: the HF config and weights plus everything needed to read them."""
    program: Program
    target: Target
    schedule: Schedule
    layout: Layout
    config: object
    state_dict: dict
    report: dict

    def model(self, dtype=None):
        import torch
        if any(not isinstance(v, torch.Tensor) for v in self.state_dict.values()):
            raise CompileError("this program was compiled with dense=False (compact engine only)")
        from transformers import Qwen3_5ForCausalLM
        with torch.device("meta"):
            m = Qwen3_5ForCausalLM(self.config)
        m = m.to_empty(device="cpu")
        missing, unexpected = m.load_state_dict(self.state_dict, strict=False, assign=True)
        missing = [k for k in missing if not k.endswith("inv_freq")]
        if missing or unexpected:
            raise CompileError(f"weights do not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
        m.model.rotary_emb.inv_freq = m.model.rotary_emb.original_inv_freq = rope_inv_freq(self.config)
        m.eval()
        if dtype is not None:
            m = m.to(dtype)
        return m

    def token_id(self, text: str) -> int:
        return self.program.token_by_text[text].id

    def placement(self, memory) -> "MemoryPlacement":
        """Where a `GDNMemory` lives in the model: its layer and, for its first port, the value
        head of each field (see `decode_memory`); a memory spread over layers or banks lists its
        pieces instead."""
        cfg = self.config
        group = cfg.linear_num_value_heads // cfg.linear_num_key_heads
        dk = cfg.linear_key_head_dim
        banked = dk if self.target.linear_key_dim else None
        slots = memory.slots
        chunks = field_chunks(memory, group)
        pieces, keys = [], []
        for L in sorted(set(getattr(memory, "unit_layers", None) or [memory.layer])):
            for node, (port, ci, bank), head in layer_heads(self.schedule.mixers.get(L, []), L, group, banked):
                if node is not memory:
                    continue
                keys.append((L, head, port, bank * dk))
                if port == 0:
                    for slot, fi in enumerate(chunks[ci]):
                        f = node.fields[fi]
                        pieces.append((L, head * group + slot, f.lo, f.width, bank * dk, min(dk, slots - bank * dk)))
        if not pieces:
            raise CompileError(f"{memory.name} is not a memory of layer {memory.layer}")
        keys.sort(key=lambda k: (k[2], k[3], k[0], k[1]))          # by port, then bank, in head order
        if len({pc[0] for pc in pieces}) == 1 and all(pc[4] == 0 for pc in pieces):
            return MemoryPlacement(memory.name, pieces[0][0], [pc[1:4] for pc in pieces], memory.slots, keys=keys)
        return MemoryPlacement(memory.name, pieces[0][0], [], memory.slots, pieces, keys)

    def decode(self, hidden_row, var) -> tuple[int, float]:
        """(value, margin) of a residual variable from one residual-stream vector."""
        idx = [self.layout.dims[(var.name, i)] for i in range(var.size)]
        return var.decode([float(hidden_row[i]) for i in idx])


def norm_scale(width: int, eps: float) -> float:
    """What RMSNorm multiplies every feature by (the anchor dominates the mean square)."""
    return 1.0 / math.sqrt(ANCHOR * ANCHOR / width + eps)


class _SparseSink(dict):
    """A state dict that stores every matrix as a sparse CSR tensor as soon as it is emitted (the
    compact engine's build: memory for one layer's dense matrices at a time)."""

    def __setitem__(self, key, value):
        import torch

        from .sparse import SparseMatrix
        t = torch.from_numpy(np.ascontiguousarray(np.asarray(value, dtype=np.float32)))
        super().__setitem__(key, SparseMatrix(t) if t.dim() == 2 else t)


def compile_program(prog: Program, target: Target | None = None, dense: bool = True) -> Compiled:
    """Compile `prog` for `target`, pass by pass: schedule and layout, the model's geometry, the
    weights, the report and the static margins. With dense=False the weights are kept as sparse
    tensors (`sparse.SparseMatrix`): enough for the compact engine (`qwengpu.engines.compact_engine`),
    not for `Compiled.model()`."""
    target = target or Target.compact()
    if target.tied_head:
        _add_tied_head(prog)
    _lay_out_memories(prog, target)
    sched, lay, erase_at = _schedule_and_layout(prog, target)
    if target.hidden and lay.width > target.hidden:
        raise CompileError(f"the program needs a residual of {lay.width} features; the target has {target.hidden}")
    width = target.hidden or lay.width
    lay.width = width
    geo = _gdn_geometry(sched, target)
    inter = _mlp_width(sched, erase_at, target)
    config = _hf_config(prog, sched, target, width, inter, geo)
    state = _emit_weights(prog, sched, lay, erase_at, config, geo, inter, dense)
    compiled = Compiled(prog, target, sched, lay, config, state, _report(sched, width, inter, geo, config, state))
    report = compiled.report
    if any(n.kind == "attn" for ns in sched.mixers.values() for n in ns):
        report["attention"] = attention.designs(compiled)
        report["min_attention_margin"] = attention.min_guaranteed_margin(compiled)
    report["margins"] = margins.static_margins(compiled, erase_at)
    if target.check_margins:
        margins.check(report["margins"])
    return compiled


def _lay_out_memories(prog: Program, target: Target):
    """Every memory's fields (value heads) as wide as a value head holds (half its dims: bits are
    dual-rail): the target's, or, where the target sizes the value heads to fit, the widest write
    granule of a partially written memory. A whole memory's word is only laid out
    in them; a partial memory's granule wider than that spans several fields with one enable."""
    mems = prog.memories
    if target.linear_value_dim:
        bits = target.linear_value_dim // 2
    else:
        bits = max([g.width for m in mems if not m.whole for g in m.granules] + [8])
    for m in mems:
        m.lay_out(bits)


def _schedule_and_layout(prog: Program, target: Target):
    """Schedule, layout and the erases of dead variables. A fixed MLP width: when the erases do not
    fit beside the circuits, schedule again leaving room for them in the MLPs that overflowed
    (a few rounds), then, if that does not settle, a growing share of every MLP."""
    head = _head_vars(prog) if target.tied_head else set()

    def attempt(cap=None, room=None):
        sched = schedule(prog, target, cap, room)
        lay = layout(prog, sched, target.hidden or 0, target.offset, reuse=target.reuse, keep=head, reserve=head)
        erase_at = _place_erases(prog, sched, lay)
        if head:
            _erase_echo(prog, sched, head, erase_at)
        return sched, lay, erase_at, _mlp_neurons(sched, erase_at)
    sched, lay, erase_at, load = attempt()
    if not target.intermediate or not target.reuse or max(load) <= target.intermediate:
        return sched, lay, erase_at
    room: dict = {}
    for _ in range(6):
        for L, n in enumerate(load):
            if n > target.intermediate:
                room[L] = room.get(L, 0) + n - target.intermediate + 16
        sched, lay, erase_at, load = attempt(room=room)
        if max(load) <= target.intermediate:
            return sched, lay, erase_at
    for reserve in (8, 4, 3, 2):
        sched, lay, erase_at, load = attempt(cap=target.intermediate - target.intermediate // reserve)
        if max(load) <= target.intermediate:
            break
    return sched, lay, erase_at


#: the tied head's bias feature: 1 on every GPU token from layer 0's MLP on
BIAS = "out.bias"


def _add_tied_head(prog: Program):
    """The bias feature the unembedding's constants multiply (instead of the anchor, which every
    GPU token's embedding sets to the same 2^40): written 1 by layer 0's MLP."""
    if BIAS not in prog.vars:
        b = prog.bits_var(BIAS, 1)
        prog.circuit("bias", [b], n_linear(Lin.const(1.0), {b.feature(0): 1.0}))


def _head_vars(prog: Program) -> set:
    """The variables the unembedding reads: the output rules' and the bias."""
    return {BIAS} | prog.output_sources()


def _erase_echo(prog: Program, sched: Schedule, head: set, erase_at: dict):
    """A tied row is a GPU token's embedding and its unembedding at once, so its embedding also
    writes the unembedding's weights into the head's features (the *echo*): layer 0's MLP erases
    them (nothing reads those features before: they are reserved, written later)."""
    for name in sorted(head):
        if sched.available.get(name, 1) < 1:
            raise CompileError(f"{name} is read by the unembedding and holds a value before layer 0's MLP (a "
                               "token input, or written by layer 0's token mixer): a tied head erases its echo there")
        v = prog.vars[name]
        erase_at.setdefault(0, []).extend((v, i) for i in range(v.size))


@dataclass
class _GDNGeometry:
    group: int                     # value heads per key head
    dk: int
    dv: int
    banked: int | None             # a fixed key dim: larger memories in banks of it
    hk: int
    hv: int


def _gdn_geometry(sched: Schedule, target: Target) -> _GDNGeometry:
    """GDN geometry: one key head per port (chunk, bank), value heads per key head = max fields of
    a memory; checked against a fixed target geometry."""
    gdn_nodes = list({id(n): n for ns in sched.mixers.values() for n in ns if n.kind == "gdn"}.values())
    if target.linear_key_heads and target.linear_value_heads:
        group = target.linear_value_heads // target.linear_key_heads
    else:
        group = min(max([len(n.fields) for n in gdn_nodes], default=1), target.max_group)
    dk = target.linear_key_dim or max([_pow2(n.slots) for n in gdn_nodes] + [8])
    dv = target.linear_value_dim or max([2 * f.width for n in gdn_nodes for f in n.fields] + [8])
    banked = dk if target.linear_key_dim else None     # a fixed key dim: larger memories in banks
    for n in gdn_nodes:
        if n.slots > dk and banked is None:
            raise CompileError(f"{n.name}: {n.slots} slots exceed the key head dimension {dk}")
        if n.slots > dk and dk & (dk - 1) and any(a.addr.kind == "bits" for a in n.writes + n.reads):
            raise CompileError(f"{n.name}: binary addresses over banks need a power-of-two key head dimension, not {dk}")

    def heads_in(L):
        return sum(len(layer_units(n, L, group, banked)) for n in sched.mixers.get(L, []) if n.kind == "gdn")
    hk = target.linear_key_heads or max([heads_in(L) for L in range(sched.layers)] + [1])
    hv = target.linear_value_heads or hk * group
    for L in range(sched.layers):
        if heads_in(L) > hk:
            raise CompileError(f"layer {L} needs {heads_in(L)} key heads; the target has {hk}")
    for n in gdn_nodes:
        for f in n.fields:
            if 2 * f.width > dv:
                raise CompileError(f"{n.name}: a {f.width}-bit field needs {2 * f.width} value dims; heads have {dv}")
    return _GDNGeometry(group, dk, dv, banked, hk, hv)


def _mlp_width(sched: Schedule, erase_at: dict, target: Target) -> int:
    inter = target.intermediate or max(_mlp_neurons(sched, erase_at) + [8])
    if target.intermediate and max(_mlp_neurons(sched, erase_at)) > target.intermediate:
        raise CompileError("erasing dead variables overflows an MLP of the target")
    return (inter + 7) // 8 * 8


def _hf_config(prog: Program, sched: Schedule, target: Target, width: int, inter: int, geo: _GDNGeometry):
    from transformers import Qwen3_5TextConfig
    return Qwen3_5TextConfig(
        vocab_size=max(len(prog.tokens), 2), hidden_size=width, intermediate_size=inter,
        num_hidden_layers=sched.layers, layer_types=sched.layer_types,
        num_attention_heads=target.attn_heads, num_key_value_heads=target.attn_kv_heads,
        head_dim=target.head_dim, linear_num_key_heads=geo.hk, linear_num_value_heads=geo.hv,
        linear_key_head_dim=geo.dk, linear_value_head_dim=geo.dv, linear_conv_kernel_dim=4,
        rms_norm_eps=target.rms_norm_eps, tie_word_embeddings=False, max_position_embeddings=1 << 20,
        rope_parameters={"rope_type": "default", "rope_theta": target.rope_theta,
                         "partial_rotary_factor": target.partial_rotary_factor},
        pad_token_id=None, bos_token_id=None, eos_token_id=None,
    )


def _emit_weights(prog: Program, sched: Schedule, lay: Layout, erase_at: dict, config, geo: _GDNGeometry,
                  inter: int, dense: bool) -> dict:
    """Every weight of the model as float32 tensors (sparse ones with dense=False): embeddings (the
    anchor and the input values), per layer the norms, the MLP and the token mixer, the final norm
    and the unembedding. The norm scale is a compile-time constant, folded into the projections."""
    import torch
    width, vocab = lay.width, config.vocab_size
    s = norm_scale(width, config.rms_norm_eps)
    sd = {} if dense else _SparseSink()
    f32 = np.float32

    def row(form: Lin, scale: float = 1.0) -> np.ndarray:
        r = np.zeros(width, dtype=np.float64)
        for feat, c in form.terms.items():
            r[lay.dims[feat]] += c / ANCHOR if feat == ANCHOR_FEATURE else c
        return r * scale

    sd["model.embed_tokens.weight"] = _embeddings(prog, lay, vocab, width)
    for L in range(sched.layers):
        p = f"model.layers.{L}."
        sd[p + "input_layernorm.weight"] = np.zeros(width)
        sd[p + "post_attention_layernorm.weight"] = np.zeros(width)
        gate, up, down = _mlp_weights(sched, erase_at, L, lay, inter, width, row, s)
        sd[p + "mlp.gate_proj.weight"] = gate
        sd[p + "mlp.up_proj.weight"] = up
        sd[p + "mlp.down_proj.weight"] = down
        if sched.layer_types[L] == "linear_attention":
            _emit_gdn(sd, p + "linear_attn.", sched.mixers.get(L, []), L, geo.banked, width, geo.hk, geo.hv, geo.dk,
                      geo.dv, row, s, lay)
        else:
            _emit_attention(sd, p + "self_attn.", sched.mixers.get(L, []), config, width, row, s, lay)
    sd["model.norm.weight"] = np.zeros(width)
    sd["lm_head.weight"] = _emit_unembedding(prog, lay, width, vocab, s, lay.dims.get((BIAS, 0)))
    state = {}
    for k in list(sd):                      # float32 tensors sharing the arrays' memory
        v = dict.pop(sd, k)
        state[k] = v if not isinstance(v, np.ndarray) else torch.from_numpy(np.ascontiguousarray(v, dtype=f32))
    return state


def _embeddings(prog: Program, lay: Layout, vocab: int, width: int) -> np.ndarray:
    """Every token's embedding: the anchor and its input values."""
    emb = np.zeros((vocab, width), dtype=np.float32)
    for t in prog.tokens:
        emb[t.id, lay.dims[ANCHOR_FEATURE]] = ANCHOR
        for vname, val in t.values.items():
            var = prog.vars[vname]
            for i, x in enumerate(var.encode(val)):
                emb[t.id, lay.dims[(vname, i)]] = x
    return emb


def _mlp_weights(sched: Schedule, erase_at: dict, L: int, lay: Layout, inter: int, width: int, row, s: float):
    """Layer L's MLP: its circuits' neurons, then the erases placed there."""
    f32 = np.float32
    gate = np.zeros((inter, width), dtype=f32)
    up = np.zeros((inter, width), dtype=f32)
    down = np.zeros((width, inter), dtype=f32)
    k = 0
    neurons = [nr for node in sched.mlp.get(L, []) for nr in node.neurons]
    for var, i in erase_at.get(L, []):
        neurons += gadgets_erase(var, i)
    for nr in neurons:
        gate[k] = row(nr.gate, 1.0 / s)
        up[k] = row(nr.up, 1.0 / s)
        for feat, c in nr.down.items():
            down[lay.dims[feat], k] += c
        k += 1
    return gate, up, down


def _report(sched: Schedule, width: int, inter: int, geo: _GDNGeometry, config, state: dict) -> dict:
    import torch
    return {"layers": sched.layers, "layer_types": sched.layer_types, "width": width,
            "intermediate": inter, "linear_heads": (geo.hk, geo.hv, geo.dk, geo.dv), "vocab": config.vocab_size,
            "parameters": int(sum(math.prod(v.shape) for v in state.values())),
            "nonzero": int(sum(v.nnz if not isinstance(v, torch.Tensor) else int((v != 0).sum())
                               for v in state.values())),
            "neurons": {L: sum(len(n.neurons) for n in ns) for L, ns in sched.mlp.items()}}


def _mlp_neurons(sched: Schedule, erase_at: dict) -> list[int]:
    """Neurons each layer's MLP needs: its circuits plus the erases placed there."""
    return [sum(len(n.neurons) for n in sched.mlp.get(L, [])) + len(erase_at.get(L, [])) for L in range(sched.layers)]


def _place_erases(prog: Program, sched: Schedule, lay: Layout) -> dict:
    """layer -> [(var, feature)] its MLP erases: each erase goes to the least loaded MLP between
    the variable's death and the reuse of its feature (keeps the widest MLP narrow)."""
    load = {L: sum(len(n.neurons) for n in sched.mlp.get(L, [])) for L in range(sched.layers)}
    items = []
    for vname, feats in lay.erase.items():
        first = (lay.erased[vname] - 1) // 2
        for i, last_sub in feats:
            items.append((max(first, (last_sub - 1) // 2) - first, first, (last_sub - 1) // 2, vname, i))
    out: dict = {}
    for _, first, last, vname, i in sorted(items):
        L = min(range(first, max(first, last) + 1), key=lambda x: (load[x], x))
        load[L] += 1
        out.setdefault(L, []).append((prog.vars[vname], i))
    return out


def gadgets_erase(var, i):
    return n_linear(-1 * var.f(i), {var.feature(i): 1.0})


def _pow2(n: int) -> int:
    return 1 << max(3, (n - 1).bit_length())


def _emit_gdn(sd, p, nodes, layer, banked, width, hk, hv, dk, dv, row, s, lay):
    group = hv // hk
    q = np.zeros((hk * dk, width), dtype=np.float32)
    kk = np.zeros((hk * dk, width), dtype=np.float32)
    v = np.zeros((hv * dv, width), dtype=np.float32)
    z = np.zeros((hv * dv, width), dtype=np.float32)
    b = np.zeros((hv, width))
    a = np.zeros((hv, width))
    conv = np.zeros((2 * hk * dk + hv * dv, 1, 4))
    conv[:, 0, 3] = 1.0                       # identity on the current token
    out = np.zeros((width, hv * dv), dtype=np.float32)
    a_log = np.full(hv, -1e4)                 # exp(A_log) = 0: no decay
    keyrows: dict = {}                        # (node, port, bank) -> rows of its query and key
    for node, (port, ci, bank), h in layer_heads(nodes, layer, group, banked):
        chunks = field_chunks(node, group)
        banks = key_banks(node, banked)
        acc_w = None if isinstance(node, Previous) or not node.writes else node.writes[0]
        acc_r = None if isinstance(node, Previous) or not node.reads else node.reads[port]
        off = bank * dk
        if (id(node), port, bank) in keyrows:
            qrows, krows = keyrows[(id(node), port, bank)]
        elif isinstance(node, Previous):
            # constant slot 0; the value is this channel's input `back` tokens ago
            qrows = [row(Lin.const(KEY_ON if i == 0 else -KEY_OFF), 1 / s) for i in range(dk)]
            krows = qrows
        else:
            qrows = [row(key_form(acc_r.addr, off + i), 1 / s) if acc_r is not None else row(Lin.const(-KEY_OFF), 1 / s)
                     for i in range(dk)]
            krows = [row(key_form(acc_w.addr, off + i), 1 / s) if acc_w is not None else row(Lin.const(-KEY_OFF), 1 / s)
                     for i in range(dk)]
        keyrows[(id(node), port, bank)] = qrows, krows
        # a bank closes its beta and output gate unless the address lies in it
        w_match = bank_match(acc_w.addr, bank, dk) if banks > 1 and acc_w is not None else None
        r_match = bank_match(acc_r.addr, bank, dk) if banks > 1 and acc_r is not None else None
        q[h * dk:(h + 1) * dk] = qrows
        kk[h * dk:(h + 1) * dk] = krows
        for slot, fi in enumerate(chunks[ci]):
            fld = node.fields[fi]
            vh = h * group + slot
            base = vh * dv
            src = node.var if isinstance(node, Previous) else (acc_w.value if acc_w else None)
            for j in range(fld.width):
                bit = fld.lo + j
                if src is not None:
                    form = VALUE_L * (2 * src.f(bit) - 1)
                    v[base + 2 * j] = row(form, 1 / s)
                    v[base + 2 * j + 1] = row(-1 * form, 1 / s)
                if isinstance(node, Previous):
                    ch = 2 * hk * dk + base
                    conv[ch + 2 * j, 0, :] = 0
                    conv[ch + 2 * j + 1, 0, :] = 0
                    conv[ch + 2 * j, 0, 3 - node.back] = 1.0
                    conv[ch + 2 * j + 1, 0, 3 - node.back] = 1.0
            # beta: write enable of this field
            if isinstance(node, Previous):
                b[vh] = row(Lin.const(BETA_L), 1 / s)
            elif acc_w is not None:
                en = node.field_enables(acc_w)[fi] if acc_w.field_enable is not None else acc_w.enable
                if w_match is not None:
                    en = en + w_match - 1
                b[vh] = row(2 * BETA_L * en - BETA_L, 1 / s)
            else:
                b[vh] = row(Lin.const(-BETA_L), 1 / s)
            # read enable through the output gate; output: the positive rail of each bit
            ren = acc_r.enable if acc_r is not None and acc_r.enable is not None else None
            if r_match is not None:
                ren = r_match if ren is None else ren + r_match - 1
            zform = Lin.const(Z_ON) if ren is None else 2 * Z_ON * ren - Z_ON
            z[base:base + dv] = row(zform, 1 / s)
            outvar = node.outputs[0] if isinstance(node, Previous) else (acc_r.out if acc_r else None)
            if outvar is not None:
                on_scale = Z_ON * math.sqrt(dv / fld.width)   # normalized on-rail * silu(z)
                for j in range(fld.width):
                    out[lay.dims[(outvar.name, fld.lo + j)], base + 2 * j] = 1.0 / on_scale
    sd[p + "in_proj_qkv.weight"] = np.concatenate([q, kk, v])
    sd[p + "in_proj_z.weight"] = z
    sd[p + "in_proj_b.weight"] = b
    sd[p + "in_proj_a.weight"] = a
    sd[p + "conv1d.weight"] = conv
    sd[p + "dt_bias"] = np.zeros(hv)
    sd[p + "A_log"] = a_log
    sd[p + "norm.weight"] = np.ones(dv)
    sd[p + "out_proj.weight"] = out


def _emit_attention(sd, p, nodes, config, width, row, s, lay):
    emit_attention(sd, p, nodes, config, width, row, s, lay)


def _emit_unembedding(prog: Program, lay: Layout, width: int, vocab: int, s_final: float,
                      bias: int | None = None) -> np.ndarray:
    """Logits: each rule scores +1 per matching bit / onehot value, -1 per mismatching bit; a
    token without a rule scores very low. The winner's logit is the number of conditions' bits.
    The constants are on the anchor, or on the `bias` dim (a tied head's, worth 1)."""
    W = np.zeros((vocab, width), dtype=np.float32)
    ruled = set()
    anchor = lay.dims[ANCHOR_FEATURE]
    for rule in prog.rules:
        # the form sum(weight * (2 f - 1) per set bit / chosen value, weight * (1 - 2 f) per clear
        # bit), accumulated straight into the row (tens of thousands of rules: no Lin objects)
        t = rule.token.id
        ruled.add(t)
        row = np.zeros(width)
        const = 0.0
        for var, val, weight in rule.conditions:
            if var.kind == "bits":
                for i, bit in enumerate(var.encode(val)):
                    const += _add_feature(row, lay, var, i, 2 * weight if bit else -2 * weight)
                    const += -weight if bit else weight
            elif var.kind == "onehot":
                var.encode(val)                   # range check
                const += _add_feature(row, lay, var, int(val), 2 * weight)
                const -= weight
            else:
                raise CompileError("output rules read bits or onehot variables")
        if bias is None:
            row[anchor] += const / ANCHOR
        else:
            row[bias] += const
        W[t] = row * (LOGIT_SCALE / s_final)
    for t in range(vocab):
        if t not in ruled:
            if bias is None:
                W[t, anchor] = -1e4 * LOGIT_SCALE / (ANCHOR * s_final)
            else:
                W[t, bias] = -1e4 * LOGIT_SCALE / s_final
    return W


LOGIT_SCALE = 8.0


def _add_feature(row: np.ndarray, lay: Layout, var, i: int, c: float) -> float:
    """row += c * (feature i of var); returns the constant part (a view's feature is a linear form
    of other variables' features, possibly with a constant)."""
    d = lay.dims.get((var.name, i))
    if d is not None:
        row[d] += c
        return 0.0
    const = 0.0
    for feat, k in var.f(i).terms.items():
        if feat == ANCHOR_FEATURE:
            const += c * k
        else:
            row[lay.dims[feat]] += c * k
    return const


def _row(form: Lin, lay: Layout, width: int) -> np.ndarray:
    r = np.zeros(width)
    for feat, c in form.terms.items():
        r[lay.dims[feat]] += c / ANCHOR if feat == ANCHOR_FEATURE else c
    return r
