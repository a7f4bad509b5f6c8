"""Straight-line integer routines over the micro-ISA: division, 64-bit arithmetic, bit fields,
permutes (see docs/intcode.md for the algorithms, the correctness arguments and the costs).

Every routine takes an `Emitter` and operands as `Src` (32-bit) or `(lo, hi)` tuples of `Src`
(64-bit), emits ALU micro-ops only (branch-free: SEL instead of branches), and returns `Src` /
tuples. Results are bit-exact with `qwengpu.semantics.integers` for every input.

Operands that are immediates (`Imm`) are folded at assembly time: an op whose operands are all
constants is computed here and never emitted, and trivial identities (x|0, x<<0, SEL on a
constant condition, ...) are simplified. So a routine called with constant shift amounts, bit
positions or permute selectors costs only what depends on the register operands.

Carry chains are pairs only: a flag producer is immediately followed by its single consumer,
which never sets the flag itself (the bundle packer keeps exactly such pairs together).
"""
from __future__ import annotations

from qwengpu.semantics.integers import PRMT_MODES

from ..emit import Recorder
from .bits import bfe_s32, bfe_s64, bfe_u32, bfe_u64, bfi_b32, bfi_b64, prmt, shf
from .division import (div_s32, div_s64, div_u32, div_u64, divrem_s32, divrem_s64, divrem_u32, divrem_u64, rem_s32,
                       rem_s64, rem_u32, rem_u64)
from .folding import add64, neg64, sub64
from .wide import (abs64, bfind, brev64, clz64, max64, min64, mulhi_s64, mulhi_u64, mullo_u64, popc64, sad, sar64,
                   shl64, shr64)

__all__ = [
    "div_u32", "div_s32", "rem_u32", "rem_s32", "divrem_u32", "divrem_s32",
    "div_u64", "div_s64", "rem_u64", "rem_s64", "divrem_u64", "divrem_s64",
    "mulhi_u64", "mulhi_s64", "mullo_u64", "add64", "sub64", "neg64",
    "shl64", "shr64", "sar64",
    "bfe_u32", "bfe_s32", "bfe_u64", "bfe_s64", "bfi_b32", "bfi_b64",
    "prmt", "PRMT_MODES", "shf", "bfind", "sad",
    "min64", "max64", "abs64", "clz64", "popc64", "brev64",
    "COST", "measure",
]


# ---------------------------------------------------------------------------------------------
# micro-op counts


def measure(fn, widths, *args, **kw) -> int:
    """Micro-ops `fn(em, *inputs, *args, **kw)` emits for register inputs of the given widths
    (32 or 64); arguments in `args` may be immediates (`src(Imm(v))`)."""
    rec = Recorder()
    em = rec.emitter()
    ins = [(rec.input(), rec.input()) if w == 64 else rec.input() for w in widths]
    fn(em, *ins, *args, **kw)
    return len(rec.ops)


def _costs() -> dict:
    w2, w3 = [32, 32], [32, 32, 32]
    d2 = [64, 64]
    out = {}
    for name in ("div_u32", "rem_u32", "divrem_u32", "div_s32", "rem_s32", "divrem_s32"):
        out[name] = measure(globals()[name], w2)
    for name in ("div_u64", "rem_u64", "divrem_u64", "div_s64", "rem_s64", "divrem_s64",
                 "mulhi_u64", "mulhi_s64", "mullo_u64"):
        out[name] = measure(globals()[name], d2)
    for name in ("shl64", "shr64", "sar64"):
        out[name] = measure(globals()[name], [64, 32])
    for name in ("bfe_u32", "bfe_s32"):
        out[name] = measure(globals()[name], w3)
    for name in ("bfe_u64", "bfe_s64"):
        out[name] = measure(globals()[name], [64, 32, 32])
    out["bfi_b32"] = measure(bfi_b32, [32] * 4)
    out["bfi_b64"] = measure(bfi_b64, [64, 64, 32, 32])
    for mode in PRMT_MODES:
        out["prmt" + ("." + mode if mode else "")] = measure(prmt, w3, mode)
    for left in (True, False):
        for clamp in (False, True):
            out[f"shf.{'l' if left else 'r'}.{'clamp' if clamp else 'wrap'}"] = measure(shf, w3, left, clamp)
    for w in (32, 64):
        for sg in (False, True):
            for sa in (False, True):
                out[f"bfind.{'s' if sg else 'u'}{w}{'.shiftamt' if sa else ''}"] = measure(bfind, [w], w, sg, sa)
            out[f"sad.{'s' if sg else 'u'}{w}"] = measure(sad, [w] * 3, sg)
    for name in ("min64", "max64"):
        for sg in (False, True):
            out[f"{name}.{'s' if sg else 'u'}"] = measure(globals()[name], d2, sg)
    for name in ("abs64", "neg64", "clz64", "popc64", "brev64"):
        out[name] = measure(globals()[name], [64])
    return out


#: routine (with its PTX variant) -> micro-ops emitted for register operands
COST = _costs()
