"""PTX text -> kernel IR (`qwengpu.ptx.ir.Module`).

A small tokenizer and a recursive-descent parser for the PTX that nvcc emits for ordinary kernels.
Every error is a `PTXSyntaxError` naming the line and the construct. Checking that each
instruction is one the machine supports is a separate pass (`qwengpu.ptx.isa`).
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from .ir import (TYPE_BITS, Addr, ArgList, Function, Guard, Imm, Instr, Label, Module, Neg, Pair, Param, Reg, Special,
                 Sym, Variable, Vec)


#: the PTX ISA versions accepted: 1.0 up to 9.x (nvcc 13 writes `.version 9.0`); a later version
#: may hold constructs this parser has never seen, so it is refused naming the line
PTX_VERSIONS = ((1, 0), (9, 99))
#: registers one function may declare (`.reg .b32 %r<N>` and the like, together): far more than
#: nvcc declares for any kernel qwenGPU can run, and a bound on what a short file can allocate
MAX_REGISTERS = 1 << 18


class PTXSyntaxError(ValueError):
    """Malformed or unsupported PTX; the message names the line and the construct."""

    def __init__(self, message: str, line: int | None = None, text: str | None = None):
        self.line = line
        self.construct = text
        where = f"line {line}: " if line else ""
        shown = f"\n    {text.strip()}" if text else ""
        super().__init__(f"{where}{message}{shown}")


SPECIAL_REGS = {
    "%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid",
    "%gridid", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt",
    "%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi",
    "%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size", "%envreg", "%pm",
}

#: the special registers that come numbered: %envreg0..31, %pm0..7
NUMBERED_SPECIAL_REGS = {"%envreg", "%pm"}
#: texture and surface instructions: their operands are not parsed, `isa.validate_module` refuses them
TEXTURE_OPS = {"tex", "tld4", "txq", "suld", "sust", "sured", "suq", "istypep"}

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<fhex>0[fF][0-9a-fA-F]{8}(?![0-9a-zA-Z_$]))
  | (?P<dhex>0[dD][0-9a-fA-F]{16}(?![0-9a-zA-Z_$]))
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<hex>0[xX][0-9a-fA-F]+[uU]?)
  | (?P<bin>0[bB][01]+[uU]?)
  | (?P<oct>0[0-7]+[uU]?)
  | (?P<dec>[0-9]+[uU]?)
  | (?P<ident>[A-Za-z_$%.][A-Za-z0-9_$%.]*)
  | (?P<punct>[{}()\[\],;:|!@+\-=<>*])
""", re.VERBOSE | re.DOTALL)


@dataclass
class Tok:
    kind: str
    text: str
    line: int


def tokenize(source: str) -> list[Tok]:
    toks: list[Tok] = []
    line, pos, n = 1, 0, len(source)
    while pos < n:
        m = _TOKEN.match(source, pos)
        if m is None:
            bad = source[pos:pos + 20].split("\n")[0]
            raise PTXSyntaxError(f"unexpected character {source[pos]!r}", line, bad)
        kind = m.lastgroup
        text = m.group()
        if kind == "nl":
            line += 1
        elif kind == "bcomment":
            line += text.count("\n")
        elif kind not in ("ws", "lcomment"):
            toks.append(Tok(kind, text, line))
        pos = m.end()
    toks.append(Tok("eof", "", line))
    return toks


def _int_literal(tok: Tok) -> int:
    t = tok.text.rstrip("uU")
    if tok.kind == "hex":
        return int(t, 16)
    if tok.kind == "bin":
        return int(t[2:], 2)
    if tok.kind == "oct":
        return int(t, 8)
    return int(t)


# Directives that only carry debug or tuning information: skipped.
_LINE_DIRECTIVES = {".file", ".loc"}
_PERF_DIRECTIVES = {".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".maxnctapersm",
                    ".noreturn", ".explicitcluster", ".reqnctapercluster", ".maxclusterrank",
                    ".pragma", ".abi_preserve", ".abi_preserve_control"}
_SPACES = {".global", ".shared", ".const", ".local", ".param", ".tex"}


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.lines = source.split("\n")
        self.toks = tokenize(source)
        self.i = 0
        self.module = Module(source=source)

    # -- token helpers -------------------------------------------------------------------------

    def peek(self, k: int = 0) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.peek().text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Tok:
        t = self.peek()
        if t.text != text:
            self.error(f"expected {what or repr(text)}, found {t.text or 'end of file'!r}", t)
        return self.next()

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def error(self, message: str, tok: Tok | None = None):
        tok = tok or self.peek()
        raise PTXSyntaxError(message, tok.line, self.line_text(tok.line))

    def skip_line(self, line: int):
        while self.peek().kind != "eof" and self.peek().line == line:
            self.next()

    def ident(self, what: str) -> Tok:
        t = self.peek()
        if t.kind != "ident":
            self.error(f"expected {what}, found {t.text or 'end of file'!r}", t)
        return self.next()

    def int_value(self, what: str = "an integer") -> int:
        neg = self.accept("-")
        t = self.peek()
        if t.kind not in ("dec", "hex", "oct", "bin"):
            self.error(f"expected {what}, found {t.text!r}", t)
        self.next()
        v = _int_literal(t)
        return -v if neg else v

    # -- module level --------------------------------------------------------------------------

    def parse(self) -> Module:
        m = self.module
        while self.peek().kind != "eof":
            t = self.peek()
            if t.text == ".version":
                self.next()
                v = self.next()
                found = re.fullmatch(r"(\d+)\.(\d+)", v.text)
                if not found:
                    self.error(f"malformed PTX version {v.text!r} (expected MAJOR.MINOR, e.g. 9.0)", v)
                first, last = PTX_VERSIONS
                if not first <= (int(found[1]), int(found[2])) <= last:
                    self.error(f"PTX version {v.text} is not supported (accepted: {first[0]}.{first[1]} to "
                               f"{last[0]}.x; nvcc 13 writes 9.0)", v)
                m.version = v.text
            elif t.text == ".target":
                self.next()
                parts = [self.ident("a target").text]
                while self.accept(","):
                    parts.append(self.ident("a target option").text)
                m.target = ", ".join(parts)
            elif t.text == ".address_size":
                self.next()
                m.address_size = self.int_value()
                if m.address_size != 64:
                    self.error("only .address_size 64 is supported", t)
            elif t.text in _LINE_DIRECTIVES:
                self.next()
                self.skip_line(t.line)
            elif t.text == ".pragma":
                self.next()
                self.next()
                self.expect(";")
            elif t.text == ".section":
                self.error("debug sections (.section) are not supported: compile without -G", t)
            else:
                self.module_declaration()
        return m

    def module_declaration(self):
        start = self.peek()
        linkage = set()
        while self.peek().text in (".visible", ".extern", ".weak", ".common"):
            linkage.add(self.next().text)
        t = self.peek()
        if t.text == ".entry":
            self.next()
            self.function(is_entry=True, linkage=linkage, start=start)
        elif t.text == ".func":
            self.next()
            self.function(is_entry=False, linkage=linkage, start=start)
        elif t.text in _SPACES:
            var = self.variable(extern=".extern" in linkage)
            self.module.vars[var.name] = var
        else:
            self.error(f"unsupported module-level construct {t.text!r}", t)

    # -- declarations ----------------------------------------------------------------------------

    def variable(self, extern: bool = False, names=None) -> Variable:
        """`.space [.align N] [.vN] .type name[dims] [= init];` (the space token is next)."""
        space_tok = self.next()
        space = space_tok.text[1:]
        if space == "tex":
            self.error("texture variables (.tex) are not supported", space_tok)
        align, vec, typ = None, 1, None
        while True:
            t = self.peek()
            if t.text == ".align":
                self.next()
                align = self.int_value("an alignment")
            elif t.text in (".v2", ".v4", ".v8"):
                self.next()
                vec = int(t.text[2:])
            elif t.text.startswith(".") and t.text[1:] in TYPE_BITS:
                self.next()
                typ = t.text[1:]
            elif t.text in (".ptr", ".global", ".shared", ".local", ".const") and space == "param":
                self.next()
            else:
                break
        if typ is None:
            self.error("variable declaration without a type", space_tok)
        name_tok = self.ident("a variable name")
        elem = max(1, TYPE_BITS[typ] // 8) * vec
        dims: list[int | None] = []
        while self.accept("["):
            if self.accept("]"):
                dims.append(None)
            else:
                dims.append(self.int_value("an array size"))
                self.expect("]")
        init = None
        relocs: list[tuple[int, str]] = []
        count = 1
        unknown = False
        for d in dims:
            if d is None:
                unknown = True
            else:
                count *= d
        if self.accept("="):
            values = self.initializer()
            if unknown and len(dims) == 1:
                count, unknown = len(values), False
            init, relocs = self.encode_init(values, typ, count * vec, name_tok)
        self.expect(";")
        size = None if unknown else elem * count
        if init is not None and size is not None and len(init) < size:
            init = init + bytes(size - len(init))
        return Variable(name=name_tok.text if names is None else names(name_tok.text), space=space,
                        type=typ, size=size, align=align or max(1, TYPE_BITS[typ] // 8),
                        init=init, relocs=tuple(relocs), extern=extern, line=space_tok.line)

    def initializer(self) -> list:
        if self.accept("{"):
            vals: list = []
            if not self.at("}"):
                while True:
                    sub = self.initializer()
                    vals.extend(sub)
                    if not self.accept(","):
                        break
            self.expect("}")
            return vals
        t = self.peek()
        if t.kind == "ident":
            self.next()
            # generic(sym) / sym: an address constant
            if t.text == "generic" and self.accept("("):
                name = self.ident("a symbol").text
                self.expect(")")
                return [("sym", name)]
            return [("sym", t.text)]
        return [self.scalar_literal()]

    def scalar_literal(self):
        neg = self.accept("-")
        t = self.next()
        if t.kind == "fhex":
            v = Imm(struct.unpack("<f", struct.pack("<I", int(t.text[2:], 16)))[0], int(t.text[2:], 16), 32)
        elif t.kind == "dhex":
            v = Imm(struct.unpack("<d", struct.pack("<Q", int(t.text[2:], 16)))[0], int(t.text[2:], 16), 64)
        elif t.kind == "float":
            v = Imm(float(t.text))
        elif t.kind in ("dec", "hex", "oct", "bin"):
            v = Imm(_int_literal(t))
        else:
            self.error(f"expected a literal, found {t.text!r}", t)
        if neg:
            if v.bits is not None:
                sign = 1 << (v.width - 1)
                v = Imm(-v.value, v.bits ^ sign, v.width)
            else:
                v = Imm(-v.value)
        return v

    def encode_init(self, values: list, typ: str, count: int, tok: Tok):
        if len(values) > count:
            self.error(f"initializer has {len(values)} values for {count} elements", tok)
        width = max(1, TYPE_BITS[typ] // 8)
        out = bytearray()
        relocs = []
        for v in values:
            if isinstance(v, tuple):
                relocs.append((len(out), v[1]))
                out += bytes(width)
                continue
            if v.bits is not None and v.width == width * 8:
                raw = v.bits
            elif typ in ("f32", "f64") or isinstance(v.value, float):
                fmt = "<f" if width == 4 else "<d"
                raw = int.from_bytes(struct.pack(fmt, float(v.value)), "little") if width in (4, 8) else int(v.value)
            else:
                raw = int(v.value) & ((1 << (8 * width)) - 1)
            out += raw.to_bytes(width, "little")
        return bytes(out), relocs

    def param_list(self, names=None) -> list[Param]:
        params: list[Param] = []
        self.expect("(")
        if self.accept(")"):
            return params
        while True:
            t = self.expect(".param", "a .param declaration")
            align, typ, vec, ptr_space = None, None, 1, None
            while True:
                p = self.peek()
                if p.text == ".align":
                    self.next()
                    align = self.int_value()
                elif p.text == ".ptr":
                    self.next()
                elif p.text in (".global", ".shared", ".local", ".const"):
                    ptr_space = self.next().text[1:]
                elif p.text in (".v2", ".v4"):
                    self.next()
                    vec = int(p.text[2:])
                elif p.text.startswith(".") and p.text[1:] in TYPE_BITS:
                    self.next()
                    typ = p.text[1:]
                else:
                    break
            if typ is None:
                self.error("parameter without a type", t)
            name = self.ident("a parameter name").text
            count = 1
            if self.accept("["):
                count = self.int_value()
                self.expect("]")
            size = max(1, TYPE_BITS[typ] // 8) * vec * count
            params.append(Param(name, typ, size, align or max(1, TYPE_BITS[typ] // 8), ptr_space, t.line))
            if not self.accept(","):
                break
        self.expect(")")
        return params

    # -- functions -----------------------------------------------------------------------------

    def function(self, is_entry: bool, linkage: set, start: Tok):
        returns: list[Param] = []
        if not is_entry and self.at("("):
            returns = self.param_list()
        name = self.ident("a function name").text
        params = self.param_list() if self.at("(") else []
        fn = Function(name=name, is_entry=is_entry, params=params, returns=returns,
                      visible=".visible" in linkage, line=start.line)
        while self.peek().text in _PERF_DIRECTIVES:
            d = self.next()
            vals = []
            if d.text != ".noreturn":
                while self.peek().kind in ("dec", "hex") or self.at(","):
                    t = self.next()
                    if t.text != ",":
                        vals.append(_int_literal(t))
            fn.directives[d.text[1:]] = vals
        if self.accept(";"):
            fn.declared_only = True
            if name not in self.module.functions:
                self.module.functions[name] = fn
            return
        self.expect("{", "a function body")
        _Body(self, fn).parse()
        self.module.functions[name] = fn

    def resolve(self):
        """Turn identifiers into Reg / Sym / Label now that every declaration is known."""
        m = self.module
        for fn in m.functions.values():
            for ins in fn.body:
                ins.operands = tuple(self._resolve_op(o, fn, ins) for o in ins.operands)
                if ins.guard is not None and ins.guard.reg.name not in fn.regs:
                    raise PTXSyntaxError(f"guard {ins.guard.reg} is not a declared predicate", ins.line, ins.text)

    def _resolve_op(self, o, fn: Function, ins: Instr):
        if isinstance(o, _Name):
            n = o.name
            if n in fn.regs:
                return Reg(n)
            if n in fn.labels or n in fn.branch_targets:
                return Label(n)
            if (n in fn.vars or n in self.module.vars
                    or any(q.name == n for q in fn.params) or any(q.name == n for q in fn.returns)):
                return Sym(n)
            if n in self.module.functions:
                return Label(n)
            if n in ("WARP_SZ",):
                return Special(n)
            raise PTXSyntaxError(f"undeclared name {n!r}", ins.line, ins.text)
        if isinstance(o, Vec):
            return Vec(tuple(None if x is None else self._resolve_op(x, fn, ins) for x in o.items))
        if isinstance(o, ArgList):
            return ArgList(tuple(self._resolve_op(x, fn, ins) for x in o.items))
        if isinstance(o, Addr) and isinstance(o.base, _Name):
            base = self._resolve_op(o.base, fn, ins)
            if isinstance(base, Label):
                raise PTXSyntaxError(f"{o.base.name!r} is not an addressable name", ins.line, ins.text)
            return Addr(base, o.offset)
        if isinstance(o, Pair):
            return Pair(self._resolve_op(o.first, fn, ins), self._resolve_op(o.second, fn, ins))
        if isinstance(o, Neg) and isinstance(o.reg, _Name):
            return Neg(self._resolve_op(o.reg, fn, ins))
        return o


@dataclass(frozen=True)
class _Name:
    """An identifier whose meaning (register, symbol, label) is resolved after parsing."""
    name: str


class _Body:
    """Parses one function body: declarations, labels, nested `{ }` scopes and instructions."""

    def __init__(self, p: _Parser, fn: Function):
        self.p = p
        self.fn = fn
        self.scopes: list[dict[str, str]] = [{}]
        self.scope_counter = 0
        self.pending_labels: list[str] = []

    def scoped(self, name: str) -> str:
        for s in reversed(self.scopes):
            if name in s:
                return s[name]
        return name

    def declare(self, name: str) -> str:
        """Names declared in a nested scope get a unique suffix so scopes never collide."""
        if len(self.scopes) == 1:
            self.scopes[0][name] = name
            return name
        unique = f"{name}@{self.scope_counter}"
        self.scopes[-1][name] = unique
        return unique

    def parse(self):
        p, fn = self.p, self.fn
        depth = 1
        while True:
            t = p.peek()
            if t.kind == "eof":
                p.error(f"end of file inside the body of {fn.name}", t)
            if t.text == "}":
                p.next()
                depth -= 1
                if depth == 0:
                    break
                self.scopes.pop()
                continue
            if t.text == "{":
                p.next()
                depth += 1
                self.scope_counter += 1
                self.scopes.append({})
                continue
            if t.text in _LINE_DIRECTIVES:
                p.next()
                p.skip_line(t.line)
                continue
            if t.text == ".pragma":
                p.next()
                p.next()
                p.expect(";")
                continue
            if t.text == ".reg":
                self.reg_decl()
                continue
            if t.text in (".local", ".shared", ".param", ".const", ".global"):
                var = p.variable(names=self.declare)
                fn.vars[var.name] = var
                continue
            if t.text == ".callprototype":
                p.error("indirect calls (.callprototype) are not supported", t)
            if t.kind == "ident" and p.peek(1).text == ":" and not t.text.startswith("%"):
                p.next()
                p.next()
                if p.at(".branchtargets"):
                    p.next()
                    targets = [p.ident("a label").text]
                    while p.accept(","):
                        targets.append(p.ident("a label").text)
                    p.expect(";")
                    fn.branch_targets[t.text] = tuple(targets)
                    continue
                if t.text in fn.labels:
                    p.error(f"label {t.text} defined twice", t)
                fn.labels[t.text] = len(fn.body)
                continue
            if t.text.startswith(".") and t.text not in (".",):
                p.error(f"unsupported directive {t.text!r} in a function body", t)
            self.instruction()
        # labels at the very end point one past the last instruction
        return fn

    def reg_decl(self):
        p = self.p
        p.next()
        t = p.peek()
        vec = 1
        if t.text in (".v2", ".v4"):
            p.next()
            vec = int(t.text[2:])
            t = p.peek()
        if not (t.text.startswith(".") and t.text[1:] in TYPE_BITS):
            p.error("register declaration without a type", t)
        typ = p.next().text[1:]
        if vec != 1:
            p.error("vector registers (.reg .vN) are not supported", t)
        while True:
            name = p.ident("a register name").text
            if p.accept("<"):
                n = p.int_value("a register count")
                p.expect(">")
                if len(self.fn.regs) + n > MAX_REGISTERS:
                    p.error(f"{name}<{n}> declares more registers than qwenGPU accepts in one function "
                            f"({MAX_REGISTERS} together)", t)
                for k in range(n):
                    self.fn.regs[self.declare(f"{name}{k}")] = typ
            else:
                self.fn.regs[self.declare(name)] = typ
            if not p.accept(","):
                break
        p.expect(";")

    def instruction(self):
        p = self.p
        first = p.peek()
        line = first.line
        guard = None
        if p.accept("@"):
            neg = p.accept("!")
            g = p.ident("a guard predicate")
            guard = Guard(Reg(self.scoped(g.text)), neg)
        optok = p.ident("an instruction")
        if optok.text.startswith("%"):
            p.error(f"expected an instruction, found {optok.text!r}", optok)
        parts = optok.text.split(".")
        op, mods = parts[0], tuple(x for x in parts[1:])
        if "" in mods:
            p.error(f"malformed opcode {optok.text!r}", optok)
        operands = []
        if op in TEXTURE_OPS:      # operands like [tex, {x, y}]: kept unparsed; validation names the construct
            while p.peek().text not in (";", ""):
                p.next()
        elif not p.at(";"):
            while True:
                operands.append(self.operand(op))
                if not p.accept(","):
                    break
        end = p.peek()
        if end.text != ";":
            raise PTXSyntaxError(f"expected ';' at the end of the instruction, found {end.text or 'end of file'!r}",
                                 line, p.line_text(line))
        p.next()
        text = "\n".join(p.line_text(k).strip() for k in range(line, end.line + 1))
        self.fn.body.append(Instr(op, mods, tuple(operands), guard, line, text))

    def operand(self, op: str):
        p = self.p
        t = p.peek()
        if t.text == "{":
            p.next()
            items = []
            while True:
                if p.peek().text == "_":
                    p.next()
                    items.append(None)
                else:
                    items.append(self.operand(op))
                if not p.accept(","):
                    break
            p.expect("}")
            return Vec(tuple(items))
        if t.text == "(":
            p.next()
            items = []
            if not p.at(")"):
                while True:
                    items.append(self.operand(op))
                    if not p.accept(","):
                        break
            p.expect(")")
            return ArgList(tuple(items))
        if t.text == "[":
            return self.address()
        if t.text == "!":
            p.next()
            r = p.ident("a predicate")
            return Neg(_Name(self.scoped(r.text)))
        if t.text == "-" or t.kind in ("dec", "hex", "oct", "bin", "fhex", "dhex", "float"):
            return p.scalar_literal()
        if t.kind == "ident":
            p.next()
            name = t.text
            if name.startswith("%"):
                base = name.split(".")[0]
                if base in SPECIAL_REGS or base.rstrip("0123456789") in NUMBERED_SPECIAL_REGS:
                    return Special(name)
            if name == "WARP_SZ":
                return Special(name)
            res = _Name(self.scoped(name))
            if p.at("|"):
                p.next()
                second = p.ident("a predicate")
                return Pair(res, _Name(self.scoped(second.text)))
            if p.at("+") and op not in ("ld", "st"):
                p.next()
                off = p.int_value("an offset")
                return Addr(res, off)   # `sym+4` as an address constant
            return res
        p.error(f"unexpected {t.text!r} in an operand", t)

    def address(self):
        p = self.p
        p.expect("[")
        base = None
        offset = 0
        t = p.peek()
        if t.kind == "ident":
            p.next()
            base = _Name(self.scoped(t.text))
            if p.accept("+"):
                offset = p.int_value("an address offset")
            elif p.at("-"):
                offset = p.int_value("an address offset")
        else:
            offset = p.int_value("an address")
        p.expect("]", "']' closing the address")
        return Addr(base, offset)


def parse_ptx(source: str) -> Module:
    """Parse PTX text into a `Module`. Raises `PTXSyntaxError` naming the line on bad input.

    The result is only syntactically checked; `qwengpu.ptx.isa.validate_module` then checks
    that every instruction is one qwenGPU supports.
    """
    p = _Parser(source)
    p.parse()
    p.resolve()
    return p.module
