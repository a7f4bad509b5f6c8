"""`printf` in kernels: each call to `vprintf` becomes plain PTX that appends a record to a buffer in
global memory, as CUDA's own printf does (the host formats the records after the launch).

nvcc compiles `printf(fmt, args...)` to `call.uni (retval), vprintf, (param0, param1)` with the
format string's address in param0 (a `.global` string constant) and in param1 the generic address of
the arguments packed in local memory (naturally aligned; `float`s promoted to `double`), or 0. The
module pass `expand_printf` (run by `qwengpu.ptx.isa.validate_module`) replaces every such call by:

    off = atom.global.add.u32 [PRINTF_VAR], R        R = 8 + the argument bytes (a multiple of 4)
    if off <= PRINTF_BYTES - 4 - R:                  the record fits
        PRINTF_VAR[4 + off ..] = call index + 1, linear global thread id, the argument words
    retval = 0

and adds the buffer `PRINTF_VAR` (`PRINTF_BYTES` bytes: a 4-byte counter of the record bytes asked
for, then the records) to the module's `.global` variables. Every engine runs the same PTX, so the
buffer's bytes are the same on every engine (the interpreter's, the simulator's, the model's);
`qwengpu.semantics.printf.printf_output` formats them. A record that does not fit is dropped and
counted: the output ends with a message saying how much was lost.

The format string must be a constant the pass can find (`mov`/`cvta.global` of a `.global` array
before the call, as nvcc emits it); conversions: `%d %i %u %x %X %o %c %s %f %F %e %E %g %G %p %%`
with flags `-+ #0`, a width, a precision, and the lengths `hh h l ll z j t` (no `*` widths, no `%n`,
no long double).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .ir import Addr, ArgList, Guard, Imm, Instr, Label, Module, Reg, Special, Sym, Variable
from .parser import PTXSyntaxError

#: the name of the printf buffer among the module's `.global` variables
PRINTF_VAR = "__qwengpu_printf"
#: its size in bytes: a 4-byte counter, then the records (of the machine's 2 KiB of global memory)
PRINTF_BYTES = 512

CONVERSION = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d*|\*))?(hh|h|ll|l|z|j|t|L)?([diuxXocsfFeEgGpn%])")


@dataclass(frozen=True)
class Conversion:
    """One `%` conversion of a format string: where its argument lies in the packed arguments."""
    flags: str
    width: int | None
    precision: int | None
    length: str
    conv: str
    offset: int
    size: int


@dataclass(frozen=True)
class PrintfCall:
    """A call site: its format (bytes up to the NUL), the conversions, the record's argument bytes."""
    index: int
    fmt: bytes
    conversions: tuple
    arg_bytes: int
    line: int


class PrintfError(PTXSyntaxError):
    """A printf the machine cannot run (named by its line)."""


def parse_format(fmt: str, line: int = 0, text: str = "") -> tuple[tuple, int]:
    """(the conversions with their argument offsets, the argument bytes rounded up to 4)."""
    out, off = [], 0
    for m in CONVERSION.finditer(fmt):
        flags, width, prec, length, conv = m.groups()
        if conv == "%":
            continue
        if width == "*" or prec == "*":
            raise PrintfError("printf: `*` widths and precisions are not supported", line, text)
        if conv == "n":
            raise PrintfError("printf: %n is not supported", line, text)
        if length == "L":
            raise PrintfError("printf: long double (%L...) is not supported", line, text)
        if conv in "fFeEgG" or conv in "sp" or length in ("l", "ll", "z", "j", "t"):
            size = 8
        else:
            size = 4
        off = (off + size - 1) // size * size
        out.append(Conversion(flags, int(width) if width else None,
                              (int(prec) if prec else 0) if prec is not None else None, length or "", conv,
                              off, size))
        off += size
    return tuple(out), (off + 3) // 4 * 4


def _defining(body: list, before: int, reg: Reg):
    """The last instruction before index `before` that writes `reg`."""
    for k in range(before - 1, -1, -1):
        ins = body[k]
        if ins.operands and ins.operands[0] == reg and not (ins.op == "st"):
            return k, ins
    return None, None


def _format_symbol(body: list, k: int, o, call: Instr) -> str:
    """The `.global` variable whose address reaches operand `o` (at instruction k) through
    mov/cvta.global, as nvcc passes a printf format."""
    for _ in range(8):
        if isinstance(o, Sym):
            return o.name
        if not isinstance(o, Reg):
            break
        k, ins = _defining(body, k, o)
        if ins is None or ins.op not in ("mov", "cvta") or len(ins.operands) != 2:
            break
        if ins.op == "cvta" and "global" not in ins.mods:
            break
        o = ins.operands[1]
    raise PrintfError("printf: the format is not a constant string this pass can find", call.line, call.text)


def _arguments_address(body: list, k: int, o) -> tuple:
    """(base, offset, state space) of the argument buffer: nvcc passes `%SP + c` (generic, with
    `cvta.local %SP, %SPL`): followed back to the local address (`%SPL + c`, or the depot symbol), so
    that the copy is an `ld.local` (the machine has no generic loads). Otherwise the generic pointer."""
    base, off, space = o, 0, None
    for _ in range(8):
        if not isinstance(base, Reg):
            break
        j, ins = _defining(body, k, base)
        if ins is None:
            break
        if ins.op == "add" and len(ins.operands) == 3 and isinstance(ins.operands[2], Imm) \
                and isinstance(ins.operands[2].value, int):
            base, off, k = ins.operands[1], off + ins.operands[2].value, j
        elif ins.op == "cvta" and "local" in ins.mods and "to" not in ins.mods and space is None:
            base, space, k = ins.operands[1], "local", j
        elif ins.op == "mov" and isinstance(ins.operands[1], Sym) and space == "local":
            return ins.operands[1], off, space
        else:
            break
    if space == "local":
        return base, off, space
    return o, 0, None


def _names(o) -> list[str]:
    return [getattr(x, "name", str(x)) for x in (o.items if isinstance(o, ArgList) else ())]


def calls_vprintf(module: Module) -> bool:
    return any(ins.op == "call" and any(isinstance(o, Label) and o.name == "vprintf" for o in ins.operands)
               for fn in module.functions.values() for ins in fn.body)


def _stored(body: list, i: int, name: str):
    """(index, value operand) of the last `st.param [name]` before the call at i."""
    for k in range(i - 1, -1, -1):
        ins = body[k]
        if ins.op == "st" and "param" in ins.mods and isinstance(ins.operands[0], Addr) \
                and getattr(ins.operands[0].base, "name", None) == name:
            return k, ins.operands[1]
    return None, None


def expand_printf(module: Module) -> list[PrintfCall]:
    """Replace every call to `vprintf` by the record-appending PTX above (in place), add the buffer
    variable, and return the call sites (their index is the record's first word). Idempotent: a
    module without vprintf calls is left as it is; the call sites are kept on the module."""
    calls: list[PrintfCall] = list(module.printf_calls)
    if not calls_vprintf(module):
        return calls
    if PRINTF_VAR not in module.vars:
        module.vars[PRINTF_VAR] = Variable(PRINTF_VAR, "global", "b8", PRINTF_BYTES, 4, bytes(PRINTF_BYTES))
    for fn in module.functions.values():
        if fn.declared_only:
            continue
        body, new, where, added = fn.body, [], {}, {}
        for i, ins in enumerate(body):
            where[i] = len(new)
            lab = next((o for o in ins.operands if isinstance(o, Label)), None)
            if ins.op != "call" or lab is None or lab.name != "vprintf":
                new.append(ins)
                continue
            if ins.guard is not None:
                raise PrintfError("printf: a predicated call to vprintf", ins.line, ins.text)
            lists = [o for o in ins.operands if isinstance(o, ArgList)]
            args = _names(lists[-1]) if lists else []
            rets = _names(lists[0]) if len(lists) == 2 else []
            if len(args) != 2:
                raise PrintfError("printf: vprintf takes two arguments", ins.line, ins.text)
            k0, fmt_op = _stored(body, i, args[0])
            k1, arg_op = _stored(body, i, args[1])
            if fmt_op is None or arg_op is None:
                raise PrintfError("printf: vprintf's arguments were not stored", ins.line, ins.text)
            var = module.vars.get(_format_symbol(body, k0, fmt_op, ins))
            if var is None or var.space not in ("global", "const") or var.init is None:
                raise PrintfError("printf: the format is not a constant string", ins.line, ins.text)
            fmt = var.init.split(b"\0")[0]
            convs, nbytes = parse_format(fmt.decode("latin-1"), ins.line, ins.text)
            if nbytes and isinstance(arg_op, Imm):
                raise PrintfError("printf: arguments without an argument buffer", ins.line, ins.text)
            call = PrintfCall(len(calls), fmt, convs, nbytes, ins.line)
            calls.append(call)
            skip = f"$__printf_skip{call.index}"
            new += _record_code(fn, call, _arguments_address(body, k1, arg_op), ins, skip)
            added[skip] = len(new)
            if rets:                                      # vprintf's return value: 0
                new.append(Instr("st", ("param", "b32"), (Addr(Sym(rets[0]), 0), Imm(0)), None, ins.line, ins.text))
        where[len(body)] = len(new)
        fn.labels = {**{name: where[idx] for name, idx in fn.labels.items()}, **added}
        fn.body = new
    module.printf_calls = calls
    return calls


def _record_code(fn, call: PrintfCall, args: tuple, at: Instr, skip: str) -> list[Instr]:
    """The PTX of one printf call site (see the module docstring)."""
    n = call.index
    r = [f"%__pf{n}_{k}" for k in range(8)]
    for k, t in enumerate(("u32", "u32", "u32", "u32", "u64", "u64", "pred", "u32")):
        fn.regs[r[k]] = t
    g0, g1, g2, g3, base, rec, full, word = (Reg(x) for x in r)
    size = 8 + call.arg_bytes

    def mk(op, mods, *ops, guard=None):
        return Instr(op, tuple(mods.split(".")) if mods else (), tuple(ops), Guard(guard) if guard else None,
                     at.line, at.text)

    code = []
    # the linear global thread id: (ctaid linear) * threads per block + (tid linear)
    code += [mk("mov", "u32", g0, Special("%tid.z")), mk("mov", "u32", g1, Special("%ntid.y")),
             mk("mov", "u32", g2, Special("%tid.y")), mk("mad", "lo.u32", g0, g0, g1, g2),
             mk("mov", "u32", g1, Special("%ntid.x")), mk("mov", "u32", g2, Special("%tid.x")),
             mk("mad", "lo.u32", g0, g0, g1, g2),
             mk("mov", "u32", g3, Special("%ctaid.z")), mk("mov", "u32", g1, Special("%nctaid.y")),
             mk("mov", "u32", g2, Special("%ctaid.y")), mk("mad", "lo.u32", g3, g3, g1, g2),
             mk("mov", "u32", g1, Special("%nctaid.x")), mk("mov", "u32", g2, Special("%ctaid.x")),
             mk("mad", "lo.u32", g3, g3, g1, g2),
             mk("mov", "u32", g1, Special("%ntid.x")), mk("mov", "u32", g2, Special("%ntid.y")),
             mk("mul", "lo.u32", g1, g1, g2), mk("mov", "u32", g2, Special("%ntid.z")),
             mk("mul", "lo.u32", g1, g1, g2), mk("mad", "lo.u32", g0, g3, g1, g0)]
    code += [mk("mov", "u64", base, Sym(PRINTF_VAR)),
             mk("atom", "global.add.u32", word, Addr(base), Imm(size)),
             mk("setp", "gt.u32", full, word, Imm(PRINTF_BYTES - 4 - size)),
             mk("bra", "", Label(skip), guard=full),
             mk("cvt", "u64.u32", rec, word), mk("add", "u64", rec, base, rec),
             mk("st", "global.u32", Addr(rec, 4), Imm(call.index + 1)),
             mk("st", "global.u32", Addr(rec, 8), g0)]
    base, off, space = args
    for k in range(0, call.arg_bytes, 4):
        code += [mk("ld", f"{space}.u32" if space else "u32", word, Addr(base, off + k)),
                 mk("st", "global.u32", Addr(rec, 12 + k), word)]
    return code
