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


#: the element type a memory card decodes shared memory as, by the PTX type of the kernel's shared
#: loads, stores and atomics: nvcc declares every `__shared__` array as bytes (`.b8 s[16]`) and moves
#: a C `int` with `.u32` (its signedness lives in the arithmetic), so 32-bit integers show as int32
_ELEMENT_OF_ACCESS = {"b8": "uint8", "u8": "uint8", "s8": "int8", "b16": "int16", "u16": "int16", "s16": "int16",
                      "b32": "int32", "u32": "int32", "s32": "int32", "f32": "float32", "b64": "int64",
                      "u64": "int64", "s64": "int64", "f64": "float64"}
_TYPED_DECLARATION = {"b16": "int16", "u16": "uint16", "s16": "int16", "b32": "int32", "u32": "uint32", "s32": "int32",
                      "f32": "float32", "b64": "int64", "u64": "uint64", "s64": "int64", "f64": "float64"}


def shared_element_type(module, declared: list, size: int) -> str:
    """The element type of a kernel's shared memory as the kernel uses it (`size` bytes): the
    declared type when its variables are declared with one wider than a byte, else the one element
    type of every shared access in the module (`ld`/`st`/`atom`/`red .shared`: `.u32`, `.s32` and
    `.b32` are all int32); bytes (`uint8`) when they mix element types or do not divide the size."""
    types = {v.type for v in declared}
    if len(types) == 1 and next(iter(types)) in _TYPED_DECLARATION:
        return _TYPED_DECLARATION[next(iter(types))]
    used = {_ELEMENT_OF_ACCESS.get(ins.info.type) for fn in module.functions.values() for ins in fn.body
            if ins.op in ("ld", "st", "atom", "red") and getattr(ins.info, "space", None) == "shared"
            and getattr(ins.info, "type", None)}
    element = next(iter(used)) if len(used) == 1 else None
    if element is None or size % np.dtype(element).itemsize:
        return "uint8"
    return element
