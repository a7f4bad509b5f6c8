"""Raw bit patterns shown three ways (hex, dec, float), and readable names for PTX symbols.

Registers are raw bit patterns (`docs/interpreter.md`): the lab never stores a typed value, it
formats the bits of a register of declared type `t` when it shows them.
"""
from __future__ import annotations

import math
import re
import struct

import numpy as np

from qwengpu.ptx.ir import TYPE_BITS

FORMATS = ("hex", "dec", "float")


def type_width(t: str) -> int:
    """Bits held by a register of declared type `t` (`pred` counts as 1)."""
    return 1 if t == "pred" else TYPE_BITS.get(t, 64)


def fmt_hex(bits: int, width: int) -> str:
    if width == 1:
        return str(bits & 1)
    return f"0x{bits & ((1 << width) - 1):x}"


def fmt_dec(bits: int, width: int, signed: bool = True) -> str:
    """Two's complement decimal (signed) of the low `width` bits; a predicate is 0/1."""
    if width == 1:
        return str(bits & 1)
    v = bits & ((1 << width) - 1)
    if signed and v >> (width - 1):
        v -= 1 << width
    return str(v)


def _short_float(x: float, single: bool) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if single:
        s = np.format_float_positional(np.float32(x), unique=True, trim="-") if 1e-4 <= abs(x) < 1e7 or x == 0 \
            else np.format_float_scientific(np.float32(x), unique=True, trim="-")
    else:
        s = repr(float(x)) if 1e-4 <= abs(x) < 1e15 or x == 0 else f"{x:.17g}"
    return s


def fmt_float(bits: int, width: int) -> str:
    """The bits as an IEEE float of their width (f16, f32, f64); a predicate as true/false."""
    if width == 1:
        return "true" if bits & 1 else "false"
    if width == 16:
        return _short_float(float(np.array([bits & 0xFFFF], dtype=np.uint16).view(np.float16)[0]), True)
    if width <= 32:
        return _short_float(struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0], True)
    return _short_float(struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0], False)


def fmt_all(bits: int, t: str) -> dict:
    """{"hex", "dec", "float"} strings of a raw value of type `t`."""
    w = type_width(t)
    return {"hex": fmt_hex(bits, w), "dec": fmt_dec(bits, w, signed=not t.startswith("u")),
            "float": fmt_float(bits, w)}


def fmt(bits: int, t: str, how: str = "hex") -> str:
    if how not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {how!r}")
    return fmt_all(bits, t)[how]


def reg_sort_key(name: str):
    """Natural order: %p1 < %p2 < %r1 < %r10 < %rd1 (prefix, then number)."""
    m = re.match(r"^(%?[A-Za-z_$.]*?)(\d*)$", name)
    if not m:
        return (name, 0)
    return (m.group(1), int(m.group(2)) if m.group(2) else -1)


def pretty_symbol(name: str) -> str:
    """A readable name for a mangled PTX symbol.

    `_Z3dotPKiS0_Pi_param_2` -> `param_2`; `_ZZ13shared_reducePKiPiE1s` (a function-local static)
    -> `s`; anything else unchanged."""
    m = re.match(r"^(_Z\w+?)_param_(\d+)$", name)
    if m:
        return f"param_{m.group(2)}"
    m = re.match(r"^_ZZ.*E(\d+)(\w+)$", name)
    if m:
        n = int(m.group(1))
        return m.group(2)[:n] or name
    return name


_MANGLED = re.compile(r"_Z\w+")


def pretty_text(text: str) -> str:
    """An instruction's text with mangled symbols shortened (`[_Z3dotPKiS0_Pi_param_0]` ->
    `[param_0]`) and tabs as spaces."""
    return _MANGLED.sub(lambda m: pretty_symbol(m.group(0)), text.strip().replace("\t", " "))
