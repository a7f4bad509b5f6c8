"""Hashes of the machine's behaviour, for a refactor that must change nothing (docs/contributing.md).

    python tests/fingerprint.py [PART ...]      # parts: compact tiny compact-2b tiny-2b suite (default: all)

Prints one line per part, `PART sha256`, and, per part, the hashes of its pieces on stderr (to find
what changed when a part differs). A machine part hashes what `compile_machine(config, dense=False)`
builds: every tensor of the sparse weights, the memory placements (`to_json`), the token texts, the
residual probes and the gate lattices; `-2b` is the same machine compiled stand-alone for
Qwen3.5-2B's layer geometry (`machine_for_geometry`). `suite` hashes every suite kernel's prompt and
generated token stream and final buffers on the simulator, for COMPACT and TINY (a kernel a machine
refuses hashes its error). Run it at the base commit and at the refactored one: the lines must be
equal.
"""
from __future__ import annotations

import hashlib
import json
import sys

import numpy as np


def _tensor_bytes(v) -> bytes:
    """A canonical byte string of a weight: a sparse matrix's (row, column, value) triples in row-major
    order, or a dense tensor's shape and float32 values."""
    import torch
    if isinstance(v, torch.Tensor):
        a = v.detach().float().contiguous().numpy()
        return repr(a.shape).encode() + a.tobytes()
    rows, cols, vals = (np.asarray(x) for x in (v.rows, v.cols, v.vals))
    order = np.lexsort((cols, rows))
    return (repr(tuple(v.shape)).encode() + rows[order].astype(np.int64).tobytes()
            + cols[order].astype(np.int64).tobytes() + vals[order].astype(np.float32).tobytes())


def _digest(data) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()


def machine_pieces(machine) -> dict:
    """{piece: sha256} of a compiled machine (see the module's docstring)."""
    sd = machine.compiled.state_dict
    weights = hashlib.sha256()
    for k in sorted(sd):
        weights.update(k.encode() + _tensor_bytes(sd[k]))
    return {
        "weights": weights.hexdigest(),
        "placements": _digest({n: p.to_json() for n, p in sorted(machine.placements.items())}),
        "tokens": _digest(machine.tokens),
        "probes": _digest({str(k): v for k, v in (machine.probes or {}).items()}),
        "lattices": _digest({str(k): repr(v) for k, v in (machine.lattices or {}).items()}),
        "report": _digest(machine.report),
    }


def suite_pieces() -> dict:
    """{kernel/machine: sha256} of every suite kernel's run on the simulator."""
    from qwengpu.api import load_program, run
    from qwengpu.machine.config import COMPACT, TINY
    from qwengpu.suite import kernels
    out = {}
    for k in kernels():
        module = load_program(k.ptx())
        for config in (COMPACT, TINY):
            try:
                r = run(module, k.spec(), engine="sim", config=config)
                seen = {"prompt": r.extra["prompt"], "generated": r.extra["generated"],
                        "buffers": [np.asarray(b).tobytes().hex() if b is not None else None for b in r.buffers],
                        "printf": r.printf}
            except Exception as e:             # a kernel this machine refuses: its error is the behaviour
                seen = {"error": f"{type(e).__name__}: {e}"}
            out[f"{k.name}/{config.name}"] = _digest(seen)
    return out


def part_pieces(part: str) -> dict:
    from qwengpu.machine.config import config_named
    if part == "suite":
        return suite_pieces()
    name, _, geometry = part.partition("-")
    if geometry:
        from qwengpu.splice.machine_splice import machine_for_geometry
        return machine_pieces(machine_for_geometry("qwen3.5-" + geometry, name))
    from qwengpu.runtime.checkpoint import compile_machine
    return machine_pieces(compile_machine(config_named(name), dense=False))


PARTS = ("compact", "tiny", "compact-2b", "tiny-2b", "suite")


def main(argv: list[str]) -> None:
    for part in argv or PARTS:
        if part not in PARTS:
            raise SystemExit(f"unknown part {part!r}: one of {', '.join(PARTS)}")
        pieces = part_pieces(part)
        for k, v in pieces.items():
            print(f"  {part} {k} {v}", file=sys.stderr)
        print(part, _digest(pieces), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
