"""The kernel IR: a typed, position-carrying form of a PTX module.

The frontend (`qwengpu.ptx.parser`) produces it from nvcc's PTX text; the reference interpreter
executes it and the assembler lowers it. Every node keeps the source line it came from, so any later
error can name the line and the construct.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# types

#: width in bits of every PTX fundamental type the IR knows
TYPE_BITS = {
    "pred": 1,
    "b8": 8, "u8": 8, "s8": 8,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64,
}
SIGNED = {"s8", "s16", "s32", "s64"}
FLOATS = {"f16", "bf16", "f32", "f64"}


def type_bits(t: str) -> int:
    return TYPE_BITS[t]


def is_signed(t: str) -> bool:
    return t in SIGNED


def is_float(t: str) -> bool:
    return t in FLOATS


# ---------------------------------------------------------------------------------------------
# operands


@dataclass(frozen=True)
class Reg:
    """A virtual register (`%r3`, `%rd1`, `%p2`, or a scoped name such as `temp`)."""
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Special:
    """A special register: `%tid.x`, `%laneid`, `%warpid`, `WARP_SZ`, ..."""
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Imm:
    """An immediate. `value` is a Python int for integer literals; for float literals written in
    PTX's exact hex forms (`0f3F800000`, `0d...`) `bits` holds the raw pattern and `width` 32/64."""
    value: int | float
    bits: int | None = None
    width: int | None = None

    def __str__(self) -> str:
        if self.bits is not None:
            return f"0{'f' if self.width == 32 else 'd'}{self.bits:0{self.width // 4}X}"
        return str(self.value)


@dataclass(frozen=True)
class Sym:
    """The address of a named variable or a function/label (`mov.u64 %rd1, shmem;`)."""
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Addr:
    """A memory operand `[base+offset]`; base is a register, a symbol or None (absolute)."""
    base: Reg | Sym | None
    offset: int = 0

    def __str__(self) -> str:
        if self.base is None:
            return f"[{self.offset}]"
        if self.offset:
            return f"[{self.base}{'+' if self.offset > 0 else ''}{self.offset}]"
        return f"[{self.base}]"


@dataclass(frozen=True)
class Vec:
    """A vector operand `{%r1, %r2}`; `None` entries are the sink `_`."""
    items: tuple

    def __str__(self) -> str:
        return "{" + ", ".join("_" if i is None else str(i) for i in self.items) + "}"


@dataclass(frozen=True)
class Pair:
    """The `%p|%q` destination of setp (predicate and its complement)."""
    first: Reg
    second: Reg

    def __str__(self) -> str:
        return f"{self.first}|{self.second}"


@dataclass(frozen=True)
class Label:
    """A branch target or a call target."""
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Neg:
    """A negated predicate source (`!%p` as a source operand of selp-like boolean ops)."""
    reg: Reg

    def __str__(self) -> str:
        return f"!{self.reg}"


@dataclass(frozen=True)
class ArgList:
    """The parenthesised argument list of `call` (`(retval0)` or `(param0, param1)`)."""
    items: tuple

    def __str__(self) -> str:
        return "(" + ", ".join(str(i) for i in self.items) + ")"


Operand = Reg | Special | Imm | Sym | Addr | Vec | Pair | Label | Neg | ArgList


# ---------------------------------------------------------------------------------------------
# instructions and declarations


@dataclass(frozen=True)
class Guard:
    reg: Reg
    negated: bool = False

    def __str__(self) -> str:
        return f"@{'!' if self.negated else ''}{self.reg}"


@dataclass
class Instr:
    """One PTX instruction.

    `op` is the opcode (`add`, `setp`, `ld`, ...); `mods` are the dot-suffixes in source order
    (`("wide", "s32")` for `mul.wide.s32`); `operands` in source order (destination first).
    `line` and `text` locate it in the PTX source.
    """
    op: str
    mods: tuple[str, ...]
    operands: tuple
    guard: Guard | None = None
    line: int = 0
    text: str = ""
    info: object = None     # the decoded modifiers (`qwengpu.ptx.isa.OpInfo`), set by validation

    @property
    def opcode(self) -> str:
        """The full dotted opcode, e.g. `mul.wide.s32`."""
        return ".".join((self.op,) + self.mods)

    def __str__(self) -> str:
        g = f"{self.guard} " if self.guard else ""
        ops = ", ".join(str(o) for o in self.operands)
        return f"{g}{self.opcode} {ops}".rstrip()


@dataclass
class Variable:
    """A `.global/.shared/.local/.const/.param` variable.

    `size` is in bytes (None for an `extern` array of unknown size, i.e. dynamic shared memory);
    `init` is the initial content as bytes (zero-filled where PTX gives no initialiser);
    `relocs` lists (byte offset, symbol) for initialisers that hold another variable's address.
    """
    name: str
    space: str
    type: str
    size: int | None
    align: int
    init: bytes | None = None
    relocs: tuple = ()
    extern: bool = False
    line: int = 0


@dataclass
class Param:
    """A kernel or function parameter (in `.param` space)."""
    name: str
    type: str
    size: int
    align: int
    ptr_space: str | None = None    # `.ptr.global` etc. where nvcc annotates it
    line: int = 0


@dataclass
class Function:
    """An `.entry` (kernel) or `.func` (device function).

    `body` is the flat instruction list; `labels` maps a label to the index of the instruction that
    follows it; `regs` maps every declared register to its type; `vars` are the function-scope
    `.local/.shared/.param` declarations (call-sequence `.param`s included, by their scoped name).
    """
    name: str
    is_entry: bool
    params: list[Param]
    returns: list[Param]
    regs: dict[str, str] = field(default_factory=dict)
    vars: dict[str, Variable] = field(default_factory=dict)
    body: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    branch_targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    visible: bool = False
    declared_only: bool = False
    line: int = 0
    directives: dict = field(default_factory=dict)   # .maxntid, .reqntid, ... (informational)


class KernelNotFound(KeyError):
    """No kernel of that name, or no single kernel to take: its message is shown as it is
    (a KeyError's would be quoted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass
class Module:
    version: str | None = None
    target: str | None = None
    address_size: int = 64
    vars: dict[str, Variable] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    source: str = ""
    #: the printf call sites `qwengpu.ptx.printf.expand_printf` replaced (record index = list index)
    printf_calls: list = field(default_factory=list)

    @property
    def kernels(self) -> list[Function]:
        return [f for f in self.functions.values() if f.is_entry and not f.declared_only]

    def kernel(self, name: str | None = None) -> Function:
        """The kernel named `name` (mangled or not), or the only kernel when `name` is None."""
        ks = self.kernels
        if not ks:
            raise KernelNotFound("the module has no kernel (no .entry function): is the PTX empty or cut short?")
        if name is None:
            if len(ks) > 1:
                raise KernelNotFound(f"the module has {len(ks)} kernels ({', '.join(k.name for k in ks)}); name one "
                                     "(the launch spec's \"kernel\", or --kernel)")
            return ks[0]
        for k in ks:
            if k.name == name:
                return k
        matches = [k for k in ks if demangled_name(k.name) == name]
        if len(matches) == 1:
            return matches[0]
        raise KernelNotFound(f"no kernel named {name!r}; the module has: {', '.join(k.name for k in ks)}")


def demangled_name(mangled: str) -> str:
    """The plain name of an Itanium-mangled function (`_Z3dotPiS_S_` -> `dot`), else the name."""
    if not mangled.startswith("_Z"):
        return mangled
    i = 2
    if i < len(mangled) and mangled[i] == "N":   # nested names: take the last component
        i += 1
        last = None
        while i < len(mangled) and mangled[i].isdigit():
            j = i
            while mangled[j].isdigit():
                j += 1
            n = int(mangled[i:j])
            last = mangled[j:j + n]
            i = j + n
        return last or mangled
    j = i
    while j < len(mangled) and mangled[j].isdigit():
        j += 1
    if j == i:
        return mangled
    n = int(mangled[i:j])
    return mangled[j:j + n]
