"""Launch specifications: what a kernel is launched with, and where its buffers live.

A launch spec is the JSON object of the CLI contract::

    {"kernel": "dot", "grid": 1, "block": 4,
     "args": [{"buffer": "int32", "data": [1, 2, 3, 4]},
              {"buffer": "float32", "size": 8},
              {"scalar": "uint32", "value": 7}]}

A struct passed by value (`.param .align N .b8 p[SIZE]`) is `{"struct": "HEX"}`: its SIZE bytes
in memory order as hex digits (e.g. `"0300000000f9ff02"` for an 8-byte struct), any size.

`grid` and `block` (both required) are an int or `[x, y, z]`. An optional `"shared_bytes"` gives
the size of dynamic shared memory (`extern __shared__`). An optional `"symbols"` sets the module's
`__constant__` (`.const`) and `__device__` (`.global`) variables by name before the launch, as
`cudaMemcpyToSymbol` does: `{"symbols": {"c_filter": {"dtype": "float32", "data": [0.25, 0.5, 0.25]}}}`
fills the variable's first bytes (the rest keeps its PTX initialiser, zero without one); an entry
with a dtype and no data only says how the result reads it back (`LaunchResult.symbols`). The
variable's name, size and space are checked against the module when a launch runs
(`qwengpu.semantics.symbols`). Float data may use the strings "nan",
"inf", "-inf"; any element may be a string "0x..." giving its raw bit pattern (at most the dtype's
width). A value the dtype cannot hold (an int out of range, a float beyond float32's range, a bit
pattern wider than the dtype) is refused, naming the argument and the element.

CUDA's launch limits (`CUDA_LIMITS`: block and grid dimensions, threads per block, shared memory)
are checked here and by `check_kernel_limits`, which every engine calls: a launch CUDA refuses is
refused by every engine with the same `LaunchError` (`docs/limits.md`).

Every engine places the buffers at the same global addresses (`GLOBAL_BASE`, 16-byte aligned, in
argument order), so per-step register values (pointers included) can be compared across engines.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DTYPES = {
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
    "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "float32": np.float32, "float64": np.float64,
}

#: the global address of the first buffer; address 0 stays unmapped so a null pointer faults
GLOBAL_BASE = 0x1000
BUFFER_ALIGN = 16


class LaunchError(ValueError):
    """A malformed launch spec, or one that does not fit the kernel."""


@dataclass(frozen=True)
class CudaLimits:
    """CUDA's limits for compute capability 9.0 (the target nvcc 13 compiles for; the CUDA C++
    Programming Guide's table of technical specifications). Every engine refuses a launch beyond
    them, with the same message."""
    threads_per_block: int = 1024
    block_dims: tuple = (1024, 1024, 64)
    grid_dims: tuple = ((1 << 31) - 1, 65535, 65535)
    #: static `__shared__` per kernel (ptxas refuses more)
    static_shared_bytes: int = 48 * 1024
    #: static + dynamic shared memory of a launch: 48 KiB unless the kernel opts in with
    #: cudaFuncAttributeMaxDynamicSharedMemorySize, which a launch spec cannot say
    shared_bytes: int = 48 * 1024
    #: the module's `.const` variables together (ptxas refuses more)
    const_bytes: int = 64 * 1024
    #: local memory (the stack) per thread
    local_bytes_per_thread: int = 512 * 1024


CUDA_LIMITS = CudaLimits()

#: qwenGPU's own bound on global memory (the launch's buffers and the module's `.global` variables
#: together): CUDA's is the device's memory; this keeps a small spec from allocating gigabytes
MAX_GLOBAL_BYTES = 1 << 28


def _dim3(v, what: str) -> tuple[int, int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v]
    if (not isinstance(v, (list, tuple)) or not 1 <= len(v) <= 3
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
        raise LaunchError(f"{what} must be an int or a list of 1-3 ints, got {v!r}")
    v = list(v) + [1] * (3 - len(v))
    if any(x < 1 for x in v):
        raise LaunchError(f"{what} dimensions must be >= 1, got {v!r}")
    return tuple(v)


def check_dims(grid: tuple, block: tuple):
    """CUDA's limits on a launch's shape (`CUDA_LIMITS`), as every engine refuses it."""
    lim = CUDA_LIMITS
    for what, dims, most in (("block", block, lim.block_dims), ("grid", grid, lim.grid_dims)):
        for axis, n, m in zip("xyz", dims, most):
            if n > m:
                raise LaunchError(f"{what} {axis} of {n} exceeds CUDA's limit of {m} "
                                  f"(CUDA limits {what} dimensions to {list(most)})")
    threads = block[0] * block[1] * block[2]
    if threads > lim.threads_per_block:
        raise LaunchError(f"a block of {threads} threads exceeds CUDA's limit of {lim.threads_per_block} "
                          f"threads per block")


def check_shared_bytes(static: int, dynamic: int, kernel: str | None = None):
    """CUDA's shared memory limits: static `__shared__` of a kernel, and static + dynamic of a launch."""
    lim = CUDA_LIMITS
    who = f"kernel {kernel}" if kernel else "the kernel"
    if static > lim.static_shared_bytes:
        raise LaunchError(f"{who} declares {static} bytes of static shared memory; CUDA allows at most "
                          f"{lim.static_shared_bytes}")
    # dynamic shared memory starts 16-byte aligned after the static variables (on every engine)
    total = (static + 15) // 16 * 16 + dynamic if dynamic else static
    if total > lim.shared_bytes:
        raise LaunchError(f"{who} with shared_bytes {dynamic} needs {total} bytes of shared memory "
                          f"({static} static, {dynamic} dynamic); CUDA allows at most "
                          f"{lim.shared_bytes} per block (a launch spec cannot opt in to more)")


def check_step_limit(max_steps) -> int | None:
    """A step limit as given to `run`, `run_many` or `--max-steps`: None (the engine's default for
    the launch) or a positive int."""
    if max_steps is None:
        return None
    if isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral) or max_steps <= 0:
        raise LaunchError(f"max_steps (--max-steps) must be a positive number of steps, got {max_steps!r}; "
                          f"leave it out for the engine's default")
    return int(max_steps)


def _element(x, dtype: np.dtype):
    """One JSON element -> a value of `dtype` (raw "0x..." bit patterns and nan/inf allowed)."""
    if isinstance(x, str):
        s = x.strip().lower()
        if s.startswith("0x") or s.startswith("-0x"):
            try:
                bits = int(s, 16)
            except ValueError:
                raise LaunchError(f"cannot read {x!r} as a hex bit pattern ({dtype.name})") from None
            width = dtype.itemsize * 8
            # a bit pattern of at most the dtype's width (a negative one as two's complement)
            if not -(1 << (width - 1)) <= bits < (1 << width):
                raise LaunchError(f"{x!r} does not fit in {dtype.name}'s {width} bits")
            raw = np.array([bits & ((1 << width) - 1)], dtype=f"u{dtype.itemsize}")
            return raw.view(dtype)[0]
        if s in ("nan", "inf", "-inf", "+inf") and dtype.kind == "f":
            return dtype.type(float(s))
        raise LaunchError(f"cannot read {x!r} as {dtype.name}")
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise LaunchError(f"cannot read {x!r} as {dtype.name}")
    if dtype.kind in "iu":
        if isinstance(x, float):
            if not x.is_integer():
                raise LaunchError(f"{x!r} is not an integer ({dtype.name})")
            x = int(x)
        info = np.iinfo(dtype)
        if not info.min <= x <= info.max:
            raise LaunchError(f"{x} does not fit in {dtype.name}")
        return dtype.type(x)
    try:
        f = float(x)
    except OverflowError:
        f = float("inf")
    with np.errstate(over="ignore"):
        v = dtype.type(f)
    explicit_inf = isinstance(x, (float, np.floating)) and np.isinf(x)      # float("inf") is an infinity
    if np.isinf(v) and not explicit_inf:        # a finite number beyond the dtype's range
        raise LaunchError(f"{x!r} is beyond {dtype.name}'s range (largest finite "
                          f"{np.finfo(dtype).max!r}); write \"inf\" or \"-inf\" for an infinity")
    return v


@dataclass
class Arg:
    """One kernel argument: a device buffer (with its initial contents) or a scalar (a struct
    passed by value is a scalar of dtype "struct" whose value is its bytes, a numpy void)."""
    kind: str                      # "buffer" | "scalar"
    dtype: str
    data: np.ndarray | None = None   # buffer contents
    value: object = None             # scalar value (numpy scalar; np.void for a struct)

    @property
    def is_buffer(self) -> bool:
        return self.kind == "buffer"

    def to_json(self) -> dict:
        if self.is_buffer:
            return {"buffer": self.dtype, "data": values_to_json(self.data)}
        if self.dtype == "struct":
            return {"struct": self.value.tobytes().hex()}
        return {"scalar": self.dtype, "value": values_to_json(np.array([self.value]))[0]}


@dataclass
class SymbolValue:
    """A module variable's value from the launch spec's `"symbols"`: its elements (`data`, None
    when the spec only names the dtype the result reads it back in) in `dtype`."""
    dtype: str
    data: np.ndarray | None = None

    def to_json(self) -> dict:
        d = {"dtype": self.dtype}
        if self.data is not None:
            d["data"] = values_to_json(self.data)
        return d


@dataclass
class LaunchSpec:
    kernel: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list[Arg] = field(default_factory=list)
    shared_bytes: int = 0
    #: {variable name: its value}: the module's `.const`/`.global` variables set before the launch
    symbols: dict[str, SymbolValue] = field(default_factory=dict)

    def __post_init__(self):
        self.check()

    def check(self):
        """CUDA's limits on the launch alone (its shape, its dynamic shared memory): every engine
        checks them again before running (`qwengpu.semantics.launch_model.check_kernel_limits`), in case
        the spec was changed after it was made."""
        check_dims(self.grid, self.block)
        if isinstance(self.shared_bytes, bool) or not isinstance(self.shared_bytes, int) or self.shared_bytes < 0:
            raise LaunchError(f"shared_bytes must be a non-negative int (bytes of dynamic shared memory), "
                              f"got {self.shared_bytes!r}")
        check_shared_bytes(0, self.shared_bytes, self.kernel)
        if not isinstance(self.symbols, dict) or not all(
                isinstance(k, str) and isinstance(v, SymbolValue) for k, v in self.symbols.items()):
            raise LaunchError("symbols must map variable names to SymbolValue (from_json reads them from "
                              '{NAME: {"dtype": DTYPE, "data": [...]}})')

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @classmethod
    def from_json(cls, obj) -> "LaunchSpec":
        """Read a spec from a dict, a JSON string or a path to a JSON file."""
        if isinstance(obj, Path) or (isinstance(obj, str) and not obj.lstrip().startswith("{")):
            try:
                obj = json.loads(Path(obj).read_text())
            except FileNotFoundError:
                raise LaunchError(f"launch spec file not found: {obj}") from None
            except json.JSONDecodeError as e:
                raise LaunchError(f"launch spec is not valid JSON: {e}") from None
        elif isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as e:
                raise LaunchError(f"launch spec is not valid JSON: {e}") from None
        if not isinstance(obj, dict):
            raise LaunchError("a launch spec is a JSON object")
        unknown = set(obj) - {"kernel", "grid", "block", "args", "shared_bytes", "symbols"}
        if unknown:
            raise LaunchError(f"unknown launch spec keys: {', '.join(sorted(unknown))}")
        if not isinstance(obj.get("args", []), list):
            raise LaunchError("args must be a list")
        if not isinstance(obj.get("kernel"), (str, type(None))):
            raise LaunchError(f"kernel must be a kernel's name, got {obj['kernel']!r}")
        args, global_bytes = [], 0
        for k, a in enumerate(obj.get("args", [])):
            if not isinstance(a, dict):
                raise LaunchError(f"args[{k}] must be an object")
            if "buffer" in a:
                dt = a["buffer"]
                if dt not in DTYPES:
                    raise LaunchError(f"args[{k}]: unknown dtype {dt!r} (one of {', '.join(DTYPES)})")
                npdt = np.dtype(DTYPES[dt])
                if "data" in a:
                    data = _elements(a["data"], npdt, f"args[{k}].data")
                elif "size" in a:
                    if isinstance(a["size"], bool) or not isinstance(a["size"], int) or a["size"] < 0:
                        raise LaunchError(f"args[{k}].size must be a non-negative int")
                    if a["size"] * npdt.itemsize > MAX_GLOBAL_BYTES:
                        raise LaunchError(f"args[{k}]: a buffer of {a['size']} {dt} is "
                                          f"{a['size'] * npdt.itemsize} bytes; qwenGPU's global memory "
                                          f"holds at most {MAX_GLOBAL_BYTES}")
                    data = np.zeros(a["size"], dtype=npdt)
                else:
                    raise LaunchError(f"args[{k}]: a buffer needs 'data' or 'size'")
                global_bytes += data.nbytes
                if global_bytes > MAX_GLOBAL_BYTES:
                    raise LaunchError(f"args[{k}]: the buffers up to this one need {global_bytes} bytes; "
                                      f"qwenGPU's global memory holds at most {MAX_GLOBAL_BYTES}")
                args.append(Arg("buffer", dt, data=data))
            elif "scalar" in a:
                dt = a["scalar"]
                if dt not in DTYPES:
                    raise LaunchError(f"args[{k}]: unknown dtype {dt!r}")
                if "value" not in a:
                    raise LaunchError(f"args[{k}]: a scalar needs 'value'")
                try:
                    args.append(Arg("scalar", dt, value=_element(a["value"], np.dtype(DTYPES[dt]))))
                except LaunchError as e:
                    raise LaunchError(f"args[{k}]: {e}") from None
            elif "struct" in a:
                args.append(Arg("scalar", "struct", value=struct_value(a["struct"], f"args[{k}].struct")))
            else:
                raise LaunchError(f"args[{k}] needs 'buffer', 'scalar' or 'struct'")
        for key in ("grid", "block"):
            if key not in obj:
                raise LaunchError(f"the launch spec needs {key!r} (an int or [x, y, z])")
        return cls(kernel=obj.get("kernel"), grid=_dim3(obj["grid"], "grid"), block=_dim3(obj["block"], "block"),
                   args=args, shared_bytes=obj.get("shared_bytes", 0), symbols=_symbols(obj.get("symbols", {})))

    def to_json(self) -> dict:
        d = {"kernel": self.kernel, "grid": list(self.grid), "block": list(self.block),
             "args": [a.to_json() for a in self.args]}
        if self.shared_bytes:
            d["shared_bytes"] = self.shared_bytes
        if self.symbols:
            d["symbols"] = {name: v.to_json() for name, v in self.symbols.items()}
        return d

    def buffer_addresses(self) -> list[int | None]:
        """The global address of each buffer argument (None for scalars): the shared layout."""
        addr, out = GLOBAL_BASE, []
        for a in self.args:
            if a.is_buffer:
                out.append(addr)
                addr += max(a.data.nbytes, 1)
                addr = (addr + BUFFER_ALIGN - 1) // BUFFER_ALIGN * BUFFER_ALIGN
            else:
                out.append(None)
        return out


def _elements(data, dtype: np.dtype, what: str) -> np.ndarray:
    """A JSON list of elements (`_element`'s forms) as an array of `dtype`; refusals name `what[j]`."""
    if not isinstance(data, list):
        raise LaunchError(f"{what} must be a list")
    values = []
    for j, x in enumerate(data):
        try:
            values.append(_element(x, dtype))
        except LaunchError as e:
            raise LaunchError(f"{what}[{j}]: {e}") from None
    return np.array(values, dtype=dtype)


def _symbols(obj) -> dict[str, SymbolValue]:
    """The spec's `"symbols"`: {name: {"dtype": DTYPE, "data": [...]}} (data optional). What only
    the module can tell (the name, the variable's size) is checked when the launch runs."""
    if not isinstance(obj, dict):
        raise LaunchError('symbols must be an object {NAME: {"dtype": DTYPE, "data": [...]}}')
    out, total = {}, 0
    for name, entry in obj.items():
        what = f"symbols.{name}"
        if not isinstance(entry, dict):
            raise LaunchError(f'{what} must be an object {{"dtype": DTYPE, "data": [...]}}')
        unknown = set(entry) - {"dtype", "data"}
        if unknown:
            raise LaunchError(f"{what}: unknown keys {', '.join(sorted(unknown))} (a symbol has 'dtype' and 'data')")
        dt = entry.get("dtype")
        if dt not in DTYPES:
            raise LaunchError(f"{what}.dtype: " + ("missing" if dt is None else f"unknown dtype {dt!r}")
                              + f" (one of {', '.join(DTYPES)})")
        data = None
        if "data" in entry:
            data = _elements(entry["data"], np.dtype(DTYPES[dt]), f"{what}.data")
            total += data.nbytes
            if total > MAX_GLOBAL_BYTES:
                raise LaunchError(f"{what}.data: the symbols up to this one hold {total} bytes; qwenGPU's "
                                  f"memory holds at most {MAX_GLOBAL_BYTES}")
        out[name] = SymbolValue(dt, data)
    return out


def struct_value(hex_bytes, what: str = "struct") -> np.void:
    """A struct argument's bytes (hex digits in memory order) as a numpy void scalar."""
    try:
        raw = bytes.fromhex(hex_bytes) if isinstance(hex_bytes, str) else None
    except ValueError:
        raw = None
    if not raw:
        raise LaunchError(f"{what} must be a non-empty string of hex digits (the struct's bytes in memory "
                          f"order), got {hex_bytes!r}")
    return np.void(raw)


def values_to_json(arr: np.ndarray) -> list:
    """Array -> JSON list; non-finite floats become the strings "nan", "inf", "-inf"."""
    out = []
    for x in arr.tolist():
        if isinstance(x, float) and not np.isfinite(x):
            out.append("nan" if np.isnan(x) else ("inf" if x > 0 else "-inf"))
        else:
            out.append(x)
    return out


@dataclass
class LaunchResult:
    """What an engine returns: final buffer contents (None for scalar args) and counts."""
    kernel: str
    engine: str
    buffers: list[np.ndarray | None]
    steps: int
    tokens: int | None = None
    lane_instructions: int = 0
    trace: object = None
    extra: dict = field(default_factory=dict)
    #: the kernel's printf output (`qwengpu.semantics.printf.PrintfOutput`), None when it has no printf
    printf: object = None
    #: {name: final contents} of the module's `.global` and `.const` variables after the launch
    #: (`qwengpu.semantics.symbols.module_symbols`), each in the dtype the spec's `"symbols"` gives
    #: it, else its declared PTX type (`.b8` arrays as uint8)
    symbols: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        d = {"kernel": self.kernel, "engine": self.engine,
             "buffers": [None if b is None else values_to_json(b) for b in self.buffers],
             "steps": self.steps, "tokens": self.tokens}
        if self.symbols:
            d["symbols"] = {name: values_to_json(v) for name, v in self.symbols.items()}
        if self.printf is not None:
            d["printf"] = {"records": [[t, s] for t, s in self.printf.records], "dropped": self.printf.dropped}
        if self.margins():
            d["margins"] = self.margins()
        return d

    def margins(self) -> dict:
        """A model engine's smallest decision margins over the launch: logit gap, memory code
        margin (of 16), residual code margin (of 0.5, compact engine), and the largest form noise
        (the measured error of the integer forms behind the MLP gates; the design assumes <= 0.1)."""
        keys = {"min_logit_gap": "logit_gap", "memory_margin": "memory", "residual_margin": "residual",
                "form_noise": "form_noise"}
        return {name: float(self.extra[k]) for k, name in keys.items() if self.extra.get(k) is not None}


def margin_text(m: dict) -> str:
    """`LaunchResult.margins()` for people: what `qwengpu run`, `demo` and `verify` print."""
    fmt = [("logit_gap", "logit gap {:.2f}"), ("residual", "residual code margin {:.5f}"),
           ("form_noise", "form noise {:.4f}"), ("memory", "memory code margin {:.2f}")]
    return ", ".join(f.format(m[k]) for k, f in fmt if m.get(k) is not None)
