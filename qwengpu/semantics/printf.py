"""The text of a launch's `printf`s, formatted from the printf buffer it left in global memory
(`qwengpu.ptx.printf`: every engine fills the buffer with the same PTX, so one formatter serves all).

`printf_output(module, spec, buffer)` -> `PrintfOutput`: `records` as (linear global thread id,
text) in the order the threads appended them, `by_thread()` grouping them per thread in program
order, `text()` the lines as the CLI shows them, and `dropped`: the bytes of records that did not
fit the buffer (then `text()` ends with a message saying so).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.launch import LaunchSpec
from qwengpu.ptx.ir import Module
from qwengpu.ptx.printf import PRINTF_BYTES, PRINTF_VAR

__all__ = ["PRINTF_BYTES", "PrintfOutput", "format_one", "machine_printf", "printf_buffer_address", "printf_output"]

from .launch_model import global_layout


@dataclass
class PrintfOutput:
    records: list = field(default_factory=list)       # (thread, text), in buffer order
    dropped: int = 0                                    # bytes of records that did not fit

    def by_thread(self) -> dict:
        """thread -> its texts, in the order it printed them."""
        out: dict = {}
        for t, s in self.records:
            out.setdefault(t, []).append(s)
        return out

    def text(self) -> str:
        """Each thread's output in thread order, every line prefixed with `[thread N] `."""
        lines = []
        for t, texts in sorted(self.by_thread().items()):
            for line in "".join(texts).splitlines():
                lines.append(f"[thread {t}] {line}")
        if self.dropped:
            lines.append(f"printf: output truncated: {self.dropped} bytes of records did not fit the "
                         f"{PRINTF_BYTES - 4}-byte printf buffer")
        return "\n".join(lines)

    def __bool__(self) -> bool:
        return bool(self.records or self.dropped)


def _string(module: Module, spec: LaunchSpec, addr: int) -> str:
    """The NUL-terminated string at global address `addr` (a module constant)."""
    lay = global_layout(spec, module)
    for name, base in lay.var_addresses.items():
        v = module.vars[name]
        if v.init is not None and base <= addr < base + (v.size or 0):
            return v.init[addr - base:].split(b"\0")[0].decode("latin-1")
    return f"(string at {addr:#x})"


def format_one(module: Module, spec: LaunchSpec, fmt: bytes, conversions, args: bytes) -> str:
    """C's printf of `fmt` with the packed arguments `args` (see `qwengpu.ptx.printf`)."""
    import re
    import struct

    from qwengpu.ptx.printf import CONVERSION

    out, k, pos = [], 0, 0
    text = fmt.decode("latin-1")
    for m in CONVERSION.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        flags, width, prec, length, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        c = conversions[k]
        k += 1
        raw = int.from_bytes(args[c.offset:c.offset + c.size], "little")
        spec_ = "%" + flags + (width or "") + ("." + prec if prec is not None else "")
        if conv in "di":
            bits = 8 if length == "hh" else 16 if length == "h" else 8 * c.size
            v = raw & ((1 << bits) - 1)
            v -= (v >> (bits - 1)) << bits
            out.append((spec_ + "d") % v)
        elif conv in "uxXo":
            bits = 8 if length == "hh" else 16 if length == "h" else 8 * c.size
            v = raw & ((1 << bits) - 1)
            if conv == "o" and "#" in flags:            # C: a leading 0, not Python's 0o
                out.append((spec_.replace("#", "") + "s") % ("0" + format(v, "o") if v else "0"))
            elif conv in "xX" and "#" in flags and v == 0:
                out.append((spec_.replace("#", "") + conv) % 0)
            else:
                out.append((spec_ + ("d" if conv == "u" else conv)) % v)
        elif conv == "c":
            out.append((spec_ + "c") % chr(raw & 0xFF))
        elif conv in "fFeEgG":
            out.append((spec_ + conv) % struct.unpack("<d", raw.to_bytes(8, "little"))[0])
        elif conv == "s":
            out.append((spec_ + "s") % _string(module, spec, raw))
        elif conv == "p":
            out.append((re.sub(r"\.\d*", "", spec_) + "s") % f"{raw:#x}")
    out.append(text[pos:])
    return "".join(out)


def printf_output(module: Module, spec: LaunchSpec, buffer: bytes) -> PrintfOutput:
    """The records of the printf buffer (`PRINTF_BYTES` bytes, as the launch left it), formatted."""
    res = PrintfOutput()
    if not module.printf_calls or buffer is None:
        return res
    asked = int.from_bytes(buffer[0:4], "little")
    off = 0
    while off + 8 <= min(asked, PRINTF_BYTES - 4):
        idx = int.from_bytes(buffer[4 + off:8 + off], "little") - 1      # 0: nothing written here
        if not 0 <= idx < len(module.printf_calls):
            break
        call = module.printf_calls[idx]
        size = 8 + call.arg_bytes
        if off + size > PRINTF_BYTES - 4:
            break
        thread = int.from_bytes(buffer[8 + off:12 + off], "little")
        args = bytes(buffer[12 + off:12 + off + call.arg_bytes])
        res.records.append((thread, format_one(module, spec, call.fmt, call.conversions, args)))
        off += size
    res.dropped = max(0, asked - off)
    return res


def printf_buffer_address(module: Module, spec: LaunchSpec) -> int | None:
    """The global address of the printf buffer, or None when the module does not print."""
    if PRINTF_VAR not in module.vars:
        return None
    return global_layout(spec, module).var_addresses[PRINTF_VAR]


def machine_printf(module: Module, spec: LaunchSpec, layout, memory) -> PrintfOutput | None:
    """The printf output from a machine's memory (`layout`: the image's `MachineLayout`)."""
    addr = printf_buffer_address(module, spec)
    if addr is None:
        return None
    m = layout.machine_address("global", addr, 0)
    return printf_output(module, spec, bytes(memory[m:m + PRINTF_BYTES]))
