"""The PTX subset qwenGPU supports: decoding of opcode modifiers into a typed `OpInfo`.

`decode(instr)` reads an `Instr`'s dotted modifiers (`ld.global.nc.v4.f32`) into named fields and
checks operand counts; anything outside the supported subset raises `PTXUnsupported` naming the
line and the construct. `validate_module` runs it over a whole module and reports every problem at
once. Engines (the interpreter, the assembler) consume `OpInfo`, never the raw modifier strings.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import TYPE_BITS, Addr, Function, Imm, Instr, Label, Module, Special
from .printf import expand_printf
from .parser import TEXTURE_OPS, PTXSyntaxError

INT_TYPES = {"b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"}
FLOAT_TYPES = {"f16", "f32", "f64"}
#: half-precision arithmetic types: f16, and f16x2 (two halves in 32 bits, each computed alone)
HALF_TYPES = {"f16", "f16x2"}
#: the float operations that exist on half types (PTX has no f16 div, sqrt or rcp)
HALF_OPS = {"add", "sub", "mul", "fma", "neg", "abs", "min", "max"}
CMP_INT = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}
CMP_FLOAT = {"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}
BOOL_OPS = {"and", "or", "xor"}
ROUND_F = {"rn", "rz", "rm", "rp"}
ROUND_I = {"rni", "rzi", "rmi", "rpi"}
SPACES = {"global", "shared", "local", "param", "const"}
# cache / ordering / scope qualifiers of memory instructions: no effect on a single-issue machine
MEMORY_QUALIFIERS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "volatile", "relaxed", "acquire",
                     "release", "acq_rel", "weak", "gpu", "cta", "sys", "L1::no_allocate",
                     "L2::64B", "L2::128B", "L2::256B", "aligned", "uni", "sync"}
#: approximate instructions (`qwengpu.semantics.approx` defines them; `OpInfo.flags` holds "approx")
APPROX_OPS = {"ex2", "lg2", "sin", "cos", "tanh", "rsqrt"}


class PTXUnsupported(PTXSyntaxError):
    """Well-formed PTX that qwenGPU does not support (the message says which construct)."""


@dataclass
class OpInfo:
    """An instruction's modifiers, decoded. Fields not meaningful for an op stay at defaults."""
    op: str
    type: str | None = None          # the operation type (`.s32`, `.f32`, ...)
    src_type: str | None = None      # second type: cvt/set/slct source type, cvta size
    space: str | None = None         # memory state space; None = generic addressing
    vec: int = 1                     # ld/st/mov vector width
    cmp: str | None = None           # setp/set comparison
    boolop: str | None = None        # setp/set combining op, atom/red op, vote mode, bar.red op
    rnd: str | None = None           # rounding modifier
    ftz: bool = False
    sat: bool = False
    mode: str | None = None          # mul/mad lo|hi|wide, shfl mode, shf l|r, prmt mode, ...
    flags: frozenset = field(default_factory=frozenset)   # other modifiers (cc, uni, wrap, clamp, to, ...)


def _fail(instr: Instr, what: str):
    raise PTXUnsupported(f"unsupported {what} in `{instr.opcode}`", instr.line, instr.text)


def _split(instr: Instr, allowed_flags=frozenset()):
    """Split modifiers into types (in order) and other tokens; ignore memory qualifiers."""
    types, rest = [], []
    for m in instr.mods:
        if m in TYPE_BITS:
            types.append(m)
        elif m in MEMORY_QUALIFIERS:
            continue
        else:
            rest.append(m)
    return types, rest


def _one_type(instr: Instr, types: list, allowed: set) -> str:
    if len(types) != 1:
        _fail(instr, "type suffix" if types else "instruction without a type suffix")
    if types[0] not in allowed:
        _fail(instr, f"type .{types[0]}")
    return types[0]


def _nops(instr: Instr, *counts: int):
    if len(instr.operands) not in counts:
        want = " or ".join(str(c) for c in counts)
        raise PTXUnsupported(f"`{instr.opcode}` takes {want} operands, got {len(instr.operands)}",
                             instr.line, instr.text)


def _take(rest: list, options: set):
    for r in list(rest):
        if r in options:
            rest.remove(r)
            return r
    return None


def _no_rest(instr: Instr, rest: list):
    if rest:
        _fail(instr, "modifier " + ", ".join("." + r for r in rest))


ARITH_INT = INT_TYPES - {"b8", "u8", "s8"}


def _d_int_arith(instr):
    types, rest = _split(instr)
    op = instr.op
    info = OpInfo(op)
    if op in ("mul", "mad"):
        info.mode = _take(rest, {"lo", "hi", "wide"})
        if types and types[0] in FLOAT_TYPES | HALF_TYPES:
            return _d_float(instr)
        if info.mode is None:
            _fail(instr, "integer mul/mad without .lo/.hi/.wide")
        info.type = _one_type(instr, types, {"u16", "u32", "u64", "s16", "s32", "s64"})
        if info.mode == "wide" and info.type.endswith("64"):
            _fail(instr, ".wide on a 64-bit type")
        if _take(rest, {"cc"}):
            info.flags = frozenset({"cc"})
        if op == "mad" and _take(rest, {"sat"}):
            info.sat = True
        _nops(instr, 3 if op == "mul" else 4)
    elif op in ("mul24", "mad24"):
        info.mode = _take(rest, {"lo", "hi"})
        if info.mode is None:
            _fail(instr, f"{op} without .lo/.hi")
        info.type = _one_type(instr, types, {"u32", "s32"})
        _nops(instr, 3 if op == "mul24" else 4)
    else:
        if types and types[0] in FLOAT_TYPES | HALF_TYPES:
            return _d_float(instr)
        info.type = _one_type(instr, types, ARITH_INT)
        if op in ("add", "sub", "addc", "subc") and _take(rest, {"cc"}):
            info.flags = frozenset({"cc"})
        if op in ("add", "sub") and _take(rest, {"sat"}):
            if info.type != "s32":
                _fail(instr, ".sat (only add/sub.sat.s32)")
            info.sat = True
        if op in ("madc",):
            info.mode = _take(rest, {"lo", "hi"})
        nsrc = {"abs": 1, "neg": 1, "sad": 3, "madc": 3}.get(op, 2)
        _nops(instr, nsrc + 1)
    _no_rest(instr, rest)
    return info


def _d_float(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    info.type = _one_type(instr, types, {"f32", "f64"} | (HALF_TYPES if instr.op in HALF_OPS else set()))
    info.rnd = _take(rest, ROUND_F)
    if info.type in HALF_TYPES and info.rnd not in (None, "rn"):
        _fail(instr, f"rounding .{info.rnd} on .{info.type} (only .rn)")
    approx = _take(rest, {"approx", "full"})
    info.ftz = bool(_take(rest, {"ftz"}))
    if approx:
        # div.approx/div.full/rcp.approx/sqrt.approx .f32: defined as the .rn operation
        # (`qwengpu.semantics.approx`); the f64 forms (rcp.approx.ftz.f64) are not defined
        if instr.op not in ("div", "rcp", "sqrt") or info.rnd is not None or \
                (approx == "full" and instr.op != "div"):
            _fail(instr, f"approximate form .{approx}")
        if instr.op == "rcp" and info.type == "f64" and approx == "approx" and info.ftz:
            info.mode = "approx64"          # rcp.approx.ftz.f64: `qwengpu.semantics.approx.rcp_f64`
            info.ftz = False                # (its flushing is part of that definition)
        elif info.type != "f32":
            _fail(instr, f"approximate form .{approx} on .{info.type} (only .f32 and rcp.approx.ftz.f64 "
                         "have a definition)")
        info.rnd = "rn"
        info.flags = frozenset({"approx", approx})
    info.sat = bool(_take(rest, {"sat"}))
    if _take(rest, {"NaN"}):
        info.flags = info.flags | {"NaN"}
    if instr.op in ("div", "sqrt", "rcp") and info.rnd is None:
        _fail(instr, f"{instr.op} without an IEEE rounding modifier (approximate form)")
    if instr.op == "fma" and info.rnd is None:
        _fail(instr, "fma without a rounding modifier")
    if instr.op == "mad" and info.rnd is None and info.type == "f32":
        info.rnd = "rn"       # mad.f32 (no rounding) is fma.rn on sm_20+
    _no_rest(instr, rest)
    n = {"abs": 1, "neg": 1, "sqrt": 1, "rcp": 1, "fma": 3, "mad": 3}.get(instr.op, 2)
    _nops(instr, n + 1)
    return info


def _d_approx(instr):
    """ex2, lg2, sin, cos, tanh, rsqrt (.approx): `qwengpu.semantics.approx` defines their results."""
    types, rest = _split(instr)
    op = instr.op
    info = OpInfo(op, flags=frozenset({"approx"}))
    if not _take(rest, {"approx"}):
        _fail(instr, f"{op} without .approx")
    info.ftz = bool(_take(rest, {"ftz"}))
    allowed = {"f32"}
    if op in ("ex2", "tanh"):
        allowed |= {"f16", "f16x2"}
    if op == "rsqrt":
        allowed |= {"f64"}
    info.type = _one_type(instr, types, allowed)
    if info.type == "f64" and info.ftz:
        _fail(instr, "rsqrt.approx.ftz.f64 (only rsqrt.approx.f64 has a definition)")
    if info.type not in ("f32", "f64"):
        _fail(instr, f"{op}.approx.{info.type} (only the .f32 form has a definition)")
    if op == "tanh" and info.ftz:
        _fail(instr, ".ftz on tanh.approx")
    _no_rest(instr, rest)
    _nops(instr, 2)
    return info


def _d_bitop(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    op = instr.op
    if op in ("and", "or", "xor", "not", "cnot"):
        info.type = _one_type(instr, types, {"b16", "b32", "b64", "pred", "u16", "u32", "u64", "s16", "s32", "s64"})
        _nops(instr, 2 if op in ("not", "cnot") else 3)
    elif op == "shl":
        info.type = _one_type(instr, types, {"b16", "b32", "b64"})
        _nops(instr, 3)
    elif op == "shr":
        info.type = _one_type(instr, types, {"b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64"})
        _nops(instr, 3)
    elif op == "shf":
        info.mode = _take(rest, {"l", "r"})
        kind = _take(rest, {"wrap", "clamp"})
        if info.mode is None or kind is None:
            _fail(instr, "shf without .l/.r and .wrap/.clamp")
        info.flags = frozenset({kind})
        info.type = _one_type(instr, types, {"b32"})
        _nops(instr, 4)
    elif op in ("popc", "clz", "brev"):
        info.type = _one_type(instr, types, {"b32", "b64"})
        _nops(instr, 2)
    elif op == "bfind":
        if _take(rest, {"shiftamt"}):
            info.flags = frozenset({"shiftamt"})
        info.type = _one_type(instr, types, {"u32", "s32", "u64", "s64"})
        _nops(instr, 2)
    elif op == "bfe":
        info.type = _one_type(instr, types, {"u32", "s32", "u64", "s64"})
        _nops(instr, 4)
    elif op == "bfi":
        info.type = _one_type(instr, types, {"b32", "b64"})
        _nops(instr, 5)
    elif op == "prmt":
        info.mode = _take(rest, {"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"})
        info.type = _one_type(instr, types, {"b32"})
        _nops(instr, 4)
    elif op == "lop3":
        info.type = _one_type(instr, types, {"b32"})
        _nops(instr, 5)
    elif op in ("dp4a", "dp2a"):
        if len(types) != 2 or any(t not in ("u32", "s32") for t in types):
            _fail(instr, "dp4a/dp2a types")
        info.type, info.src_type = types
        if op == "dp2a":
            info.mode = _take(rest, {"lo", "hi"})
            if info.mode is None:
                _fail(instr, "dp2a without .lo/.hi")
        _nops(instr, 4)
    _no_rest(instr, rest)
    return info


def _d_minmax(instr):
    types, rest = _split(instr)
    if types and types[0] in FLOAT_TYPES | HALF_TYPES:
        return _d_float(instr)
    info = OpInfo(instr.op, type=_one_type(instr, types, ARITH_INT))
    _no_rest(instr, rest)
    _nops(instr, 3)
    return info


def _d_setp(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    op = instr.op
    if op == "setp":
        info.type = _one_type(instr, types, INT_TYPES | {"f16", "f32", "f64"} - {"b8", "u8", "s8"})
    elif op == "set":
        if len(types) != 2:
            _fail(instr, "set without destination and source types")
        info.src_type = types[1]
        info.type = types[0]
        if info.type not in ("u32", "s32", "f32") or info.src_type not in (INT_TYPES | {"f32", "f64"}):
            _fail(instr, "set types")
    cmps = CMP_FLOAT if (info.src_type or info.type) in FLOAT_TYPES else CMP_INT
    info.cmp = _take(rest, cmps)
    if info.cmp is None:
        _fail(instr, "comparison")
    info.boolop = _take(rest, BOOL_OPS)
    info.ftz = bool(_take(rest, {"ftz"}))
    _no_rest(instr, rest)
    _nops(instr, 4 if info.boolop else 3)
    return info


def _d_selp(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    if instr.op == "selp":
        info.type = _one_type(instr, types, INT_TYPES | {"f32", "f64"} - {"b8", "u8", "s8"})
    else:   # slct.dtype.stype
        if len(types) != 2 or types[1] not in ("s32", "f32"):
            _fail(instr, "slct types")
        info.type, info.src_type = types
        info.ftz = bool(_take(rest, {"ftz"}))
    _no_rest(instr, rest)
    _nops(instr, 4)
    return info


def _d_mov(instr):
    types, rest = _split(instr)
    info = OpInfo("mov", type=_one_type(instr, types, set(TYPE_BITS) - {"f16x2", "bf16x2", "bf16"}))
    v = _take(rest, {"v2", "v4"})
    if v:
        _fail(instr, "vector mov")
    _no_rest(instr, rest)
    _nops(instr, 2)
    return info


def _d_cvt(instr):
    types, rest = _split(instr)
    info = OpInfo("cvt")
    if len(types) != 2:
        _fail(instr, "cvt without destination and source types")
    info.type, info.src_type = types
    for t in types:
        if t not in INT_TYPES | FLOAT_TYPES:
            _fail(instr, f"cvt type .{t}")
    info.rnd = _take(rest, ROUND_F | ROUND_I)
    info.ftz = bool(_take(rest, {"ftz"}))
    info.sat = bool(_take(rest, {"sat"}))
    _no_rest(instr, rest)
    _nops(instr, 2)
    return info


def _d_cvta(instr):
    types, rest = _split(instr)
    info = OpInfo("cvta")
    if _take(rest, {"to"}):
        info.flags = frozenset({"to"})
    info.space = _take(rest, {"global", "shared", "local", "const", "param"})
    if info.space is None:
        _fail(instr, "cvta without a state space")
    info.type = _one_type(instr, types, {"u32", "u64"})
    _no_rest(instr, rest)
    _nops(instr, 2)
    return info


def _d_ldst(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    info.space = _take(rest, SPACES)
    v = _take(rest, {"v2", "v4"})
    info.vec = int(v[1]) if v else 1
    if instr.op in ("ld", "ldu") and rest and rest[0] in ("global", "shared"):
        pass
    info.type = _one_type(instr, types, INT_TYPES | {"f32", "f64", "f16"})
    _no_rest(instr, rest)
    _nops(instr, 2)
    if instr.op in ("ld", "ldu"):
        if not isinstance(instr.operands[1], Addr):
            _fail(instr, "load source (not an address)")
    elif not isinstance(instr.operands[0], Addr):
        _fail(instr, "store destination (not an address)")
    if instr.op == "ldu" and info.space not in (None, "global"):
        _fail(instr, "ldu state space")
    return info


ATOM_OPS = {"add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"}


def _d_atom(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    info.space = _take(rest, {"global", "shared"})
    info.boolop = _take(rest, ATOM_OPS)
    if info.boolop is None:
        _fail(instr, "atomic operation")
    if _take(rest, {"noftz"}):
        pass
    info.type = _one_type(instr, types, {"b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64"})
    if info.type in ("f32", "f64") and info.boolop not in ("add", "exch"):
        _fail(instr, f"atomic .{info.boolop} on floats")
    if info.boolop in ("inc", "dec") and info.type != "u32":
        _fail(instr, f"atom.{info.boolop} on .{info.type}")
    _no_rest(instr, rest)
    if instr.op == "atom":
        _nops(instr, 4 if info.boolop == "cas" else 3)
    else:
        if info.boolop == "cas":
            _fail(instr, "red.cas")
        _nops(instr, 2)
    return info


def _d_branch(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    if instr.op == "bra":
        _nops(instr, 1)
        if not isinstance(instr.operands[0], Label):
            _fail(instr, "indirect branch target")
    elif instr.op == "brx":
        if not _take(rest, {"idx"}):
            _fail(instr, "brx without .idx")
        _nops(instr, 2)
        if not isinstance(instr.operands[1], Label):
            _fail(instr, "brx.idx target list")
    elif instr.op == "call":
        ops = instr.operands
        fn = [o for o in ops if isinstance(o, Label)]
        if len(fn) != 1:
            _fail(instr, "indirect call (call through a register)")
        if _take(rest, {"tail"}):
            _fail(instr, "call.tail")
    elif instr.op in ("ret", "exit"):
        _nops(instr, 0)
    _no_rest(instr, rest)
    return info


def _d_bar(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    op = instr.op
    if op == "bar" and _take(rest, {"warp"}):
        info.mode = "warp"
        _nops(instr, 1)
    else:
        red = _take(rest, {"red"})
        arrive = _take(rest, {"arrive"})
        if arrive:
            _fail(instr, "bar.arrive (producer/consumer barriers)")
        if red:
            info.mode = "red"
            info.boolop = _take(rest, {"popc", "and", "or"})
            if info.boolop is None:
                _fail(instr, "bar.red operation")
            info.type = _one_type(instr, types, {"u32", "pred"})
            _nops(instr, 3, 4)
        else:
            info.mode = "sync"
            _nops(instr, 1, 2)
    _no_rest(instr, rest)
    return info


def _warp_op(instr, modes: set, allowed: set, nops: int, pre_volta: bool = True, mode: str | None = None):
    """A warp-wide op (`shfl`, `vote`, `match`): its mode (`mode` when the caller knows it), .sync
    (the pre-Volta forms without it are refused), one type of `allowed`, `nops` operands."""
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    info.mode = _take(rest, modes) if mode is None else mode
    if info.mode is None:
        _fail(instr, f"{instr.op} mode")
    if "sync" not in instr.mods:
        _fail(instr, f"{instr.op} without .sync" + (" (pre-Volta form)" if pre_volta else ""))
    info.type = _one_type(instr, types, allowed)
    _no_rest(instr, rest)
    _nops(instr, nops)
    return info


def _d_shfl(instr):
    return _warp_op(instr, {"up", "down", "bfly", "idx"}, {"b32"}, 5)


def _d_vote(instr):
    return _warp_op(instr, {"any", "all", "uni", "ballot"}, {"pred", "b32"}, 3,
                    mode="uni" if "uni" in instr.mods else None)


def _d_match(instr):
    return _warp_op(instr, {"any", "all"}, {"b32", "b64"}, 3, pre_volta=False)


def _d_simple(instr):
    types, rest = _split(instr)
    info = OpInfo(instr.op)
    op = instr.op
    if op == "activemask":
        info.type = _one_type(instr, types, {"b32"})
        _nops(instr, 1)
    elif op in ("membar", "fence"):
        rest = [r for r in rest if r not in ("gl", "sys", "cta", "sc", "acq_rel", "proxy", "alias")]
        _nops(instr, 0)
    elif op == "nanosleep":
        _nops(instr, 1)
    elif op in ("trap", "brkpt"):
        _nops(instr, 0)
    elif op in ("copysign",):
        info.type = _one_type(instr, types, {"f32", "f64"})
        _nops(instr, 3)
    elif op == "testp":
        info.mode = _take(rest, {"finite", "infinite", "number", "notanumber", "normal", "subnormal"})
        if info.mode is None:
            _fail(instr, "testp mode")
        info.type = _one_type(instr, types, {"f32", "f64"})
        _nops(instr, 2)
    elif op == "prefetch" or op == "prefetchu":
        rest = []
    _no_rest(instr, rest)
    return info


DECODERS = {
    "add": _d_int_arith, "sub": _d_int_arith, "mul": _d_int_arith, "mad": _d_int_arith,
    "mul24": _d_int_arith, "mad24": _d_int_arith, "div": _d_int_arith, "rem": _d_int_arith,
    "abs": _d_int_arith, "neg": _d_int_arith, "sad": _d_int_arith,
    "addc": _d_int_arith, "subc": _d_int_arith, "madc": _d_int_arith,
    "min": _d_minmax, "max": _d_minmax,
    "fma": _d_float, "sqrt": _d_float, "rcp": _d_float,
    "ex2": _d_approx, "lg2": _d_approx, "sin": _d_approx, "cos": _d_approx, "tanh": _d_approx,
    "rsqrt": _d_approx,
    "and": _d_bitop, "or": _d_bitop, "xor": _d_bitop, "not": _d_bitop, "cnot": _d_bitop,
    "shl": _d_bitop, "shr": _d_bitop, "shf": _d_bitop, "popc": _d_bitop, "clz": _d_bitop,
    "brev": _d_bitop, "bfind": _d_bitop, "bfe": _d_bitop, "bfi": _d_bitop, "prmt": _d_bitop,
    "lop3": _d_bitop, "dp4a": _d_bitop, "dp2a": _d_bitop,
    "setp": _d_setp, "set": _d_setp, "selp": _d_selp, "slct": _d_selp,
    "mov": _d_mov, "cvt": _d_cvt, "cvta": _d_cvta,
    "ld": _d_ldst, "ldu": _d_ldst, "st": _d_ldst,
    "atom": _d_atom, "red": _d_atom,
    "bra": _d_branch, "brx": _d_branch, "call": _d_branch, "ret": _d_branch, "exit": _d_branch,
    "bar": _d_bar, "barrier": _d_bar,
    "shfl": _d_shfl, "vote": _d_vote, "match": _d_match,
    "activemask": _d_simple, "membar": _d_simple, "fence": _d_simple, "nanosleep": _d_simple,
    "trap": _d_simple, "brkpt": _d_simple, "copysign": _d_simple, "testp": _d_simple,
}

# Ops that may be written with a float type and go to the float decoder.
_FLOAT_CAPABLE = {"add", "sub", "mul", "mad", "div", "abs", "neg", "min", "max"}


def decode(instr: Instr) -> OpInfo:
    """Decode `instr`'s modifiers, or raise `PTXUnsupported` naming the line and the construct."""
    op = instr.op
    if op in TEXTURE_OPS:
        raise PTXUnsupported(f"texture and surface instructions (`{instr.opcode}`) are not supported: the "
                             "machine has no texture units; pass the data as a global pointer", instr.line, instr.text)
    dec = DECODERS.get(op)
    if dec is None:
        raise PTXUnsupported(f"unsupported instruction `{instr.opcode}`", instr.line, instr.text)
    if op in _FLOAT_CAPABLE and any(m in FLOAT_TYPES for m in instr.mods):
        return _d_float(instr)
    return dec(instr)


class ModuleUnsupported(PTXUnsupported):
    """Several unsupported constructs; `errors` lists each one."""

    def __init__(self, errors: list[PTXSyntaxError]):
        self.errors = errors
        lines = "\n".join(str(e) for e in errors)
        ValueError.__init__(self, f"{len(errors)} unsupported construct(s):\n{lines}")
        self.line = errors[0].line
        self.construct = errors[0].construct


APPROX_REFUSED = ("approximate instruction `{}` refused: its result is qwenGPU's definition (within the "
                  "ISA's stated error, not bit-identical to NVIDIA hardware); allow approximate "
                  "instructions to run it")


def _immediate_widths(ins: Instr):
    """(operand, bits) of each integer immediate operand and the width it must fit: the
    instruction's integer type (a cvt's source type; a wide multiply-add's addend twice it), else
    64 bits (PTX integer literals are 64-bit)."""
    info = ins.info
    typ = info.src_type if info.op == "cvt" else info.type
    width = TYPE_BITS[typ] if typ in INT_TYPES else 64
    for k, o in enumerate(ins.operands):
        if isinstance(o, Imm) and o.bits is None and isinstance(o.value, int):
            yield o, (2 * width if info.mode == "wide" and k == 3 else width)


def check_immediates(ins: Instr) -> list[PTXSyntaxError]:
    """An integer immediate wider than its operand is refused (ptxas would keep its low bits)."""
    return [PTXUnsupported(f"immediate {o.value} does not fit the {w}-bit operand of `{ins.opcode}` "
                           f"(from {-(1 << (w - 1))} to {(1 << w) - 1})", ins.line, ins.text)
            for o, w in _immediate_widths(ins) if not -(1 << (w - 1)) <= o.value < (1 << w)]


def validate_function(fn: Function, module: Module, approx: bool = True) -> list[PTXSyntaxError]:
    errors: list[PTXSyntaxError] = []
    for ins in fn.body:
        try:
            ins.info = decode(ins)
        except PTXSyntaxError as e:
            errors.append(e)
            continue
        errors += check_immediates(ins)
        if not approx and "approx" in ins.info.flags:
            errors.append(PTXUnsupported(APPROX_REFUSED.format(ins.opcode), ins.line, ins.text))
        for o in ins.operands:
            if isinstance(o, Special) and o.name.startswith("%envreg"):
                errors.append(PTXUnsupported(
                    f"{o.name} (an environment register, read by cooperative groups' grid-wide sync, "
                    "this_grid().sync()) is not supported: the machine has no grid-wide synchronisation",
                    ins.line, ins.text))
            if isinstance(o, Special) and o.name.startswith("%pm"):
                errors.append(PTXUnsupported(f"performance-monitor register {o.name} is not supported",
                                             ins.line, ins.text))
            if isinstance(o, Label) and ins.op not in ("bra", "call", "brx"):
                errors.append(PTXUnsupported(f"label {o} used as a value", ins.line, ins.text))
            if isinstance(o, Label) and ins.op == "bra" and o.name not in fn.labels:
                errors.append(PTXUnsupported(f"branch to unknown label {o}", ins.line, ins.text))
            if isinstance(o, Label) and ins.op == "call":
                callee = module.functions.get(o.name)
                if callee is None or callee.declared_only:
                    errors.append(PTXUnsupported(f"call to {o} whose body is not in this module",
                                                 ins.line, ins.text))
            if isinstance(o, Label) and ins.op == "brx" and o.name not in fn.branch_targets:
                errors.append(PTXUnsupported(f"brx.idx with unknown target list {o}", ins.line, ins.text))
    return errors


def validate_module(module: Module, approx: bool = True) -> Module:
    """Decode every instruction of every defined function (attaching `instr.info`); raise one
    `ModuleUnsupported` listing every unsupported construct, if any. `approx=False` refuses the
    approximate instructions too (for hardware bit-exactness: `qwengpu.semantics.approx` defines
    them within the ISA's stated error, not as NVIDIA hardware computes them)."""
    errors: list[PTXSyntaxError] = []
    try:
        expand_printf(module)                       # vprintf calls -> PTX appending to a buffer
    except PTXSyntaxError as e:
        errors.append(e)
    for fn in module.functions.values():
        if not fn.declared_only:
            errors += validate_function(fn, module, approx)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ModuleUnsupported(errors)
    return module


# -- the supported subset, as docs/ir.md lists it ------------------------------------------------------

#: the supported instructions by group: (group, its opcodes, the forms they take). Every opcode of
#: `DECODERS` is in a group and every group's opcodes decode, and docs/ir.md's table is
#: `supported_table()` (`tests/test_ptx_frontend.py` checks all three and prints the table when the
#: page differs).
SUPPORTED = (
    ("integer", ("add", "sub", "addc", "subc", "mul", "mad", "madc", "mul24", "mad24", "div", "rem", "abs", "neg",
                 "min", "max", "sad", "dp4a", "dp2a"),
     "add/sub (.cc, .sat.s32), addc/subc, mul/mad (.lo/.hi/.wide, .cc), madc, mul24/mad24, div, rem, abs, neg, "
     "min, max, sad, dp4a, dp2a"),
    ("bits", ("and", "or", "xor", "not", "cnot", "shl", "shr", "shf", "popc", "clz", "brev", "bfind", "bfe", "bfi",
              "prmt", "lop3"),
     "and, or, xor, not, cnot, shl, shr, shf (.l/.r .wrap/.clamp), popc, clz, brev, bfind (.shiftamt), bfe, bfi, "
     "prmt (all modes), lop3"),
    ("compare/select", ("setp", "set", "selp", "slct"),
     "setp (all comparisons, .and/.or/.xor, `p|q`), set, selp, slct"),
    ("float (f32, f64)", ("add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "min", "max", "abs", "neg",
                          "copysign", "testp"),
     "add, sub, mul, fma, mad.f32, div.rn/rz/rm/rp, rcp.rn..., sqrt.rn..., min, max (.NaN), abs, neg, copysign, "
     "testp; .ftz, .sat"),
    ("half (f16, f16x2; the machine through f32: `softfloat.f16`)", tuple(sorted(HALF_OPS)) + ("setp",),
     "add, sub, mul (.rn), fma.rn, neg, abs, min, max (.NaN), setp.f16; .ftz, .sat. An f16x2 operation computes "
     "each half on its own (`qwengpu.semantics.floats` at width 16, correctly rounded)"),
    ("approximate (f32; `.ftz`)", tuple(sorted(APPROX_OPS)) + ("rcp", "sqrt", "div"),
     "ex2, lg2, sin, cos, tanh, rsqrt `.approx`; rcp/sqrt/div `.approx`, `div.full`; `rcp.approx.ftz.f64`, "
     "`rsqrt.approx.f64`: qwenGPU's definitions, within the ISA's stated error, not bit-identical to NVIDIA "
     "hardware (`docs/floats.md`, \"Approximate instructions\"); `approx=\"refuse\"` rejects them"),
    ("conversion", ("cvt", "cvta", "mov"),
     "cvt (all integer and float pairs incl. f16, rounding modes, .sat, .ftz), cvta (to/from global, shared, "
     "local, const), mov (incl. vector pack/unpack, symbols, special registers)"),
    ("memory", ("ld", "ldu", "st", "atom", "red"),
     "ld/ldu/st (global, shared, local, const, param, generic; .v2/.v4; cache and ordering qualifiers ignored), "
     "atom/red (add, min, max, inc, dec, and, or, xor, exch, cas; 32/64-bit; f32/f64 add)"),
    ("control", ("bra", "brx", "call", "ret", "exit", "trap", "brkpt"),
     "bra (.uni), brx.idx, call.uni (direct), ret, exit, trap, brkpt; `call vprintf` (printf: rewritten into "
     "plain PTX by `qwengpu.ptx.printf.expand_printf`, below)"),
    ("warp / block", ("shfl", "vote", "match", "activemask", "bar", "barrier", "membar", "fence", "nanosleep"),
     "shfl.sync (up/down/bfly/idx), vote.sync (any/all/uni/ballot), match.sync (any/all), activemask, "
     "bar.sync/barrier.sync, bar.red (popc/and/or), bar.warp.sync, membar/fence, nanosleep"),
)


def supported_table() -> str:
    """docs/ir.md's table of the supported instructions, from `SUPPORTED`."""
    rows = ["| group | instructions |", "|---|---|"]
    rows += [f"| {group} | {forms} |" for group, _, forms in SUPPORTED]
    return "\n".join(rows) + "\n"
