"""The engines that run a compiled model's forward passes, apart from the stock transformers model:

- the compact engine (`compact.CompactEngine`, `--engine compact`): numba loops over the weights'
  exact sparsity (its parts: `packing` packs the weights, `kernels` runs the passes on them,
  `floats` does the float32 arithmetic the stock forward does, bit for bit where the CPU would
  take another path);
- its reference (`reference.ReferenceEngine`, `--engine compact-ref`): the same function in torch,
  kept to check and time the compact engine;
- `forwards`: the stock forward and both engines behind one interface, as a launch runs them.

They know no PTX and no machine: a compiled model's weights in (`qwengpu.compiler`), logits and GDN
states out (`docs/engine.md`).

    from qwengpu.engines import compact_engine
    engine = compact_engine(compile_program(prog, dense=False))
    state = engine.new_state(); logits = engine.forward(token_ids, state)
"""
from __future__ import annotations


def reference_engine(compiled):
    """The reference engine (`reference.ReferenceEngine`) on a compiled program's weights (dense or
    sparse: `compile_program(..., dense=False)`)."""
    from .reference import ReferenceEngine
    return ReferenceEngine.from_state_dict(compiled.config, compiled.state_dict)


def compact_engine(compiled, probes: dict | None = None, lattices: dict | None = None):
    """The compact engine (`compact.CompactEngine`) on a compiled program's weights; `probes` and
    `lattices` as `CompactEngine` takes them (the margins its runs measure)."""
    from .compact import CompactEngine
    return CompactEngine(reference_engine(compiled), probes, lattices)


__all__ = ["reference_engine", "compact_engine"]
