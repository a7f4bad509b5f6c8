"""Module variables set from the launch spec and read back after the launch: what
`cudaMemcpyToSymbol` and `cudaMemcpyFromSymbol` do for `__constant__` (`.const`) and `__device__`
(`.global`) variables.

    module = apply_symbols(module, spec)      # the spec's "symbols" become the variables' initialisers
    ...the launch runs...
    result.symbols = read_symbols(module, spec, lambda v: the variable's bytes)

Setting a variable is giving it a new initialiser, so every engine loads it where it loads a PTX
initialiser today: the interpreter's memories, and on the machine the launch prompt (only the
non-zero bytes cost tokens, as for buffers). A spec fills a variable from its first byte; the bytes
after the spec's data keep the PTX initialiser (zero without one). `apply_symbols` is idempotent,
so a layer that applies it again (the prompt, after the runtime) loads the same bytes.

A result reads back every variable `module_symbols` lists, in the dtype the spec's entry gives it,
else in its declared PTX type (nvcc declares arrays as `.b8`, so a `__device__ float t[4]` reads back
as 16 uint8 unless the spec says "float32").
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from qwengpu.launch import DTYPES, LaunchError, LaunchSpec
from qwengpu.ptx.ir import Module, Variable
from qwengpu.ptx.printf import PRINTF_VAR

#: the state spaces a launch spec may set by name
SYMBOL_SPACES = ("global", "const")

#: a PTX type's letter -> the numpy kind its values read back as (`.b` bit types as unsigned)
_KINDS = {"b": "u", "u": "u", "s": "i", "f": "f"}


def module_symbols(module: Module) -> list[Variable]:
    """The variables a launch spec may set and a result reads back, in declaration order: the
    module-scope `.global` and `.const` variables of known size. Left out: qwenGPU's printf buffer
    and nvcc's string literals (`$str`, `$str$1`, ...), which no CUDA code can name."""
    return [v for v in module.vars.values()
            if v.space in SYMBOL_SPACES and v.size and not v.extern
            and v.name != PRINTF_VAR and not v.name.startswith("$")]


def declared_dtype(v: Variable) -> np.dtype:
    """The numpy dtype of a variable's declared PTX element type (`.b32` -> uint32, `.f32` -> float32)."""
    kind, bits = _KINDS.get(v.type[:1]), v.type[1:]
    if kind is None or not bits.isdigit():
        return np.dtype(np.uint8)
    return np.dtype(f"{kind}{int(bits) // 8}")


def _declaration(v: Variable) -> str:
    n = v.size // max(1, declared_dtype(v).itemsize)
    return f".{v.space} .{v.type} {v.name}" + (f"[{n}]" if n > 1 or v.type == "b8" else "")


def _names(symbols: list[Variable]) -> str:
    return ", ".join(f"{v.name} (.{v.space}, {v.size} bytes)" for v in symbols) or "none"


def _variable(module: Module, name: str) -> Variable:
    """The variable `symbols.NAME` names, or the refusal that says what NAME is instead."""
    symbols = module_symbols(module)
    for v in symbols:
        if v.name == name:
            return v
    what = f"symbols.{name}"
    listing = f"the module's .global and .const variables: {_names(symbols)}"
    v = module.vars.get(name)
    if v is not None and v.space not in SYMBOL_SPACES:
        raise LaunchError(f"{what}: {name} is a .{v.space} variable; a launch spec sets .global (__device__) "
                          f"and .const (__constant__) variables ({listing})")
    if v is not None:
        raise LaunchError(f"{what}: {name} has no size a launch spec can fill ({listing})")
    if name in module.functions:
        raise LaunchError(f"{what}: {name} is a function, not a variable ({listing})")
    for fn in module.functions.values():
        if name in fn.vars:
            raise LaunchError(f"{what}: {name} is a .{fn.vars[name].space} variable of function {fn.name}; "
                              f"a launch spec sets module-scope variables ({listing})")
    raise LaunchError(f"{what}: the module has no variable {name} ({listing})")


def symbol_dtype(v: Variable, spec: LaunchSpec) -> np.dtype:
    """The dtype `v` is set and read back in: the spec's, else its declared type."""
    entry = spec.symbols.get(v.name)
    return np.dtype(DTYPES[entry.dtype]) if entry is not None else declared_dtype(v)


def check_symbols(module: Module, spec: LaunchSpec) -> dict[str, Variable]:
    """{name: variable} of the spec's symbols, after the refusals every engine gives alike: a name
    that is not one of `module_symbols`, a dtype that does not divide the variable's size, more
    data than the variable holds. Each refusal names the spec's field (`symbols.NAME...`)."""
    out = {}
    for name, entry in spec.symbols.items():
        v = _variable(module, name)
        dt = np.dtype(DTYPES[entry.dtype])
        if v.size % dt.itemsize:
            raise LaunchError(f"symbols.{name}.dtype: {entry.dtype} ({dt.itemsize} bytes) does not divide "
                              f"the {v.size} bytes of {name} ({_declaration(v)})")
        if entry.data is not None and entry.data.nbytes > v.size:
            raise LaunchError(f"symbols.{name}.data: {len(entry.data)} {entry.dtype} values are "
                              f"{entry.data.nbytes} bytes; {name} holds {v.size} ({_declaration(v)}: at most "
                              f"{v.size // dt.itemsize} {entry.dtype})")
        out[name] = v
    return out


def apply_symbols(module: Module, spec: LaunchSpec) -> Module:
    """`module` with the spec's symbols as its variables' initialisers (the same module when the
    spec sets none). The data replaces the initialiser's first bytes; an address the initialiser
    held there (a relocation) goes with the bytes it lay in."""
    targets = check_symbols(module, spec)
    changed = {}
    for name, v in targets.items():
        data = spec.symbols[name].data
        if data is None or not len(data):
            continue
        raw = data.tobytes()
        init = bytearray(v.init or bytes(v.size))
        init[:len(raw)] = raw
        relocs = tuple((off, sym) for off, sym in v.relocs if off >= len(raw))
        changed[name] = replace(v, init=bytes(init), relocs=relocs)
    if not changed:
        return module
    return replace(module, vars={name: changed.get(name, v) for name, v in module.vars.items()})


def read_symbols(module: Module, spec: LaunchSpec, read) -> dict[str, np.ndarray]:
    """{name: contents} of every `module_symbols` variable, `read(variable)` giving its bytes,
    decoded in `symbol_dtype`."""
    return {v.name: np.frombuffer(bytes(read(v)), dtype=symbol_dtype(v, spec)).copy()
            for v in module_symbols(module)}


def symbols_from_machine(module: Module, spec: LaunchSpec, layout, memory) -> dict[str, np.ndarray]:
    """`read_symbols` from a machine's memory (`layout`: the image's `MachineLayout`, whose
    `global_vars` give a `.global` variable's address and `const_vars` a `.const` one's offset)."""
    def read(v: Variable) -> bytes:
        addr = layout.global_vars[v.name] if v.space == "global" else layout.const_vars[v.name]
        m = layout.machine_address(v.space, addr, 0)
        return memory[m:m + v.size]
    return read_symbols(module, spec, read)
