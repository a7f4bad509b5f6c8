"""Soft floating point: PTX float instructions as straight-line sequences of 32-bit micro-ops.

Every routine takes an `Emitter` (`qwengpu.assembler.emit`) and operand `Src`s -- 32-bit words; an
f64 value is a (lo, hi) pair, an f16 value the low 16 bits of a word -- and returns result `Src`s.
The sequences are branch-free (SEL instead of branches) and bit-exact with the reference
semantics in `qwengpu.semantics.floats` for every input: NaNs (f32 results use the canonical NaN
0x7FFFFFFF), infinities, signed zeros, subnormals, overflow, ties, every rounding mode, .ftz and
.sat. docs/softfloat.md has the algorithms, the correctness arguments and the micro-op counts
(`COST`).

API (every routine returns Src results; f64 operands and results are (lo, hi) pairs):

    f32:  add/sub/mul(em, a, b, rnd="rn", ftz=False, sat=False)
          fma(em, a, b, c, rnd="rn", ftz=False, sat=False)
          div(em, a, b, rnd="rn", ftz=False), rcp(em, a, rnd="rn", ftz=False)
          sqrt(em, a, rnd="rn", ftz=False)
          min/max(em, a, b, ftz=False, nan=False), abs/neg(em, a, ftz=False), copysign(em, a, b)
          compare(em, op, a, b, ftz=False) -> 0/1 (op in COMPARE_OPS), testp(em, op, a) -> 0/1
    cvt:  cvt(em, a_parts, dst_type, src_type, rnd=None, sat=False, ftz=False) -> tuple
    f16:  add16/sub16/mul16(em, a, b, ftz=False, sat=False), fma16(em, a, b, c, ftz=False, sat=False),
          min16/max16(em, a, b, ftz=False, nan=False), abs16/neg16(em, a, ftz=False),
          compare16(em, op, a, b, ftz=False) (all .rn, through f32: `f16`)
    f64:  add64/sub64/mul64/div64(em, a, b, rnd="rn"), fma64(em, a, b, c, rnd="rn"),
          rcp64/sqrt64(em, a, rnd="rn"), min64/max64(em, a, b), abs64/neg64(em, a),
          copysign64(em, a, b), compare64(em, op, a, b), testp64(em, op, a)
    COST: routine -> micro-op count with the default modifiers (built on first access)

Unsupported combinations raise SoftFloatError (a ValueError).

Routines are built with a small builder (`Builder`) that folds constants, drops identities, shares
common subexpressions and removes dead micro-ops before anything reaches the emitter, so the
mode-generic code below costs only what a mode really needs. Carry-flag pairs stay adjacent and
are never chained.

The package: `builder` (the builder and shared constants), `f32`, `convert`, `f64`, `f16`; this module
re-exports every routine and builds `COST`.
"""
from __future__ import annotations

from .builder import (ABS, COMPARE_OPS, F32_INF, F32_MAX, F32_NAN, F32_ONE, F64_NAN_HI, FROUND, IROUND, S31, TESTP_OPS,
                      Builder, SoftFloatError, Value, Word, routine)
from .convert import FLOAT_TYPES, INT_TYPES, cvt
from .f16 import abs16, add16, compare16, fma16, max16, min16, mul16, neg16, sub16
from .f32 import (abs, add, check_mode, compare, copysign, denorm, div, flush32, fma, ftz_out32, isnan32, max, min, mul,
                  neg, pack32, rcp, recip32, round30, rsqrt32, sat32, sqrt, sub, testp)
from .f64 import (F64_CNAN, F64_INF_HI, abs64, add64, compare64, copysign64, div64, f64_to_int, fma64, int_to_f64,
                  max64, min64, mul64, neg64, rcp64, sqrt64, sub64, testp64)

__all__ = ['abs16', 'add16', 'compare16', 'fma16', 'max16', 'min16', 'mul16', 'neg16', 'sub16', 'ABS', 'Builder', 'COMPARE_OPS', 'F32_INF', 'F32_MAX', 'F32_NAN', 'F32_ONE', 'F64_CNAN', 'F64_INF_HI', 'F64_NAN_HI', 'FLOAT_TYPES', 'FROUND', 'INT_TYPES', 'IROUND', 'S31', 'SoftFloatError', 'TESTP_OPS', 'Value', 'Word', 'abs', 'abs64', 'add', 'add64', 'check_mode', 'compare', 'compare64', 'copysign', 'copysign64', 'cvt', 'denorm', 'div', 'div64', 'f64_to_int', 'flush32', 'fma', 'fma64', 'ftz_out32', 'int_to_f64', 'isnan32', 'max', 'max64', 'min', 'min64', 'mul', 'mul64', 'neg', 'neg64', 'pack32', 'rcp', 'rcp64', 'recip32', 'round30', 'routine', 'rsqrt32', 'sat32', 'sqrt', 'sqrt64', 'sub', 'sub64', 'testp', 'testp64', "COST"]


# micro-op counts

def _cost_table():
    from ..emit import Recorder

    def count(build, nin):
        rec = Recorder()
        em = rec.emitter()
        ins = [rec.input() for _ in range(nin)]
        build(em, *ins)
        return len(rec.ops)

    t = {}
    one = {"abs": abs, "neg": neg, "sqrt": sqrt, "rcp": rcp}
    for name, fn in one.items():
        t[name] = count(fn, 1)
    for name, fn in {"add": add, "sub": sub, "mul": mul, "div": div, "min": min, "max": max,
                     "copysign": copysign}.items():
        t[name] = count(fn, 2)
    t["fma"] = count(fma, 3)
    for op in COMPARE_OPS:
        t[f"compare.{op}"] = count(lambda em, a, c, op=op: compare(em, op, a, c), 2)
    for op in TESTP_OPS:
        t[f"testp.{op}"] = count(lambda em, a, op=op: testp(em, op, a), 1)
    cvts = [("s32", "f32", "rzi"), ("s32", "f32", "rni"), ("u32", "f32", "rzi"),
            ("s64", "f32", "rzi"), ("u64", "f32", "rzi"), ("f32", "s32", "rn"),
            ("f32", "u32", "rn"), ("f32", "s64", "rn"), ("f32", "u64", "rn"),
            ("f32", "f32", "rni"), ("f32", "f32", "rzi"), ("f32", "f32", "rmi"),
            ("f64", "f32", None), ("f32", "f64", "rn"), ("f32", "f16", None),
            ("f16", "f32", "rn"), ("s32", "f64", "rzi"), ("s32", "f64", "rni"),
            ("s64", "f64", "rzi"), ("f64", "s32", "rn"), ("f64", "u32", "rn"),
            ("f64", "s64", "rn"), ("f64", "u64", "rn"), ("f64", "f64", "rni"), ("f64", "f64", "rzi"),
            ("f64", "f64", "rmi")]
    for d, s, r in cvts:
        nin = 2 if s in ("f64", "s64", "u64") else 1
        t[f"cvt.{r + '.' if r else ''}{d}.{s}"] = count(
            lambda em, *x, d=d, s=s, r=r: cvt(em, x, d, s, rnd=r), nin)
    for name, fn in {"abs64": abs64, "neg64": neg64}.items():
        t[name] = count(lambda em, lo, hi, fn=fn: fn(em, (lo, hi)), 2)
    for name, fn in {"add64": add64, "sub64": sub64, "mul64": mul64, "min64": min64,
                     "max64": max64, "copysign64": copysign64}.items():
        t[name] = count(lambda em, a, b_, c, d, fn=fn: fn(em, (a, b_), (c, d)), 4)
    for op in COMPARE_OPS:
        t[f"compare64.{op}"] = count(
            lambda em, a, b_, c, d, op=op: compare64(em, op, (a, b_), (c, d)), 4)
    for op in TESTP_OPS:
        t[f"testp64.{op}"] = count(lambda em, lo, hi, op=op: testp64(em, op, (lo, hi)), 2)
    for name in ("div64", "fma64", "rcp64", "sqrt64"):
        fn = globals().get(name)
        if fn is not None:
            nin = {"div64": 4, "fma64": 6, "rcp64": 2, "sqrt64": 2}[name]

            def call(em, *w, fn=fn, nin=nin):
                return fn(em, *[(w[2 * i], w[2 * i + 1]) for i in range(nin // 2)])
            t[name] = count(call, nin)
    return t


_COST = None


def __getattr__(name):
    """COST: routine -> micro-ops with the default modifiers (rn, no .ftz/.sat), built on first
    use with a Recorder."""
    global _COST
    if name == "COST":
        if _COST is None:
            _COST = _cost_table()
        return _COST
    raise AttributeError(name)
