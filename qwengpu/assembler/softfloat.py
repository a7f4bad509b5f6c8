"""Soft floating point: PTX float instructions as straight-line sequences of 32-bit micro-ops.

Every routine takes an `Emitter` (`qwengpu.assembler.emit`) and operand `Src`s -- 32-bit words; an
f64 value is a (lo, hi) pair, an f16 value the low 16 bits of a word -- and returns result `Src`s.
The sequences are branch-free (SEL instead of branches) and bit-exact with the reference
semantics in `qwengpu.interp.floats` for every input: NaNs (f32 results use the canonical NaN
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
    f64:  add64/sub64/mul64/div64(em, a, b, rnd="rn"), fma64(em, a, b, c, rnd="rn"),
          rcp64/sqrt64(em, a, rnd="rn"), min64/max64(em, a, b), abs64/neg64(em, a),
          copysign64(em, a, b), compare64(em, op, a, b), testp64(em, op, a)
    COST: routine -> micro-op count with the default modifiers (built on first access)

Unsupported combinations raise SoftFloatError (a ValueError).

Routines are built with a small builder (`Builder`) that folds constants, drops identities, shares
common subexpressions and removes dead micro-ops before anything reaches the emitter, so the
mode-generic code below costs only what a mode really needs. Carry-flag pairs stay adjacent and
are never chained.
"""
from __future__ import annotations

from qwengpu.machine.uops import M32, Imm, Src, src

from .simplify import Operand, Sym, simplify

S31 = 0x80000000
ABS = 0x7FFFFFFF
F32_INF = 0x7F800000
F32_NAN = 0x7FFFFFFF
F32_MAX = 0x7F7FFFFF
F32_ONE = 0x3F800000
F64_NAN_HI = 0xFFF80000          # floats.F64_CANONICAL_NAN = 0xFFF8000000000000

FROUND = ("rn", "rz", "rm", "rp")
IROUND = ("rni", "rzi", "rmi", "rpi")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge",
               "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
TESTP_OPS = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")


class SoftFloatError(ValueError):
    """A type/modifier combination these routines do not implement (or PTX does not allow)."""


# =============================================================================================
# the builder

_COMMUTATIVE = {"ADD", "AND", "OR", "XOR", "MUL", "MULHU", "MULHS", "EQ"}


class Value:
    """A 32-bit value under construction: node `n` of builder `b`, optionally bit-inverted."""
    __slots__ = ("b", "n", "inv")

    def __init__(self, b, n, inv=False):
        self.b, self.n, self.inv = b, n, inv

    def key(self):
        return (self.n, self.inv)

    def __invert__(self):
        return Value(self.b, self.n, not self.inv)

    def __and__(self, o):
        return self.b.op("AND", self, o)

    __rand__ = __and__

    def __or__(self, o):
        return self.b.op("OR", self, o)

    __ror__ = __or__

    def __xor__(self, o):
        return self.b.op("XOR", self, o)

    __rxor__ = __xor__

    def __add__(self, o):
        return self.b.op("ADD", self, o)

    __radd__ = __add__

    def __sub__(self, o):
        return self.b.sub(self, o)

    def __rsub__(self, o):
        return self.b.sub(o, self)

    def __lshift__(self, o):
        return self.b.op("SHL", self, o)

    def __rshift__(self, o):
        return self.b.op("SHR", self, o)

    def __rlshift__(self, o):
        return self.b.op("SHL", o, self)

    def __rrshift__(self, o):
        return self.b.op("SHR", o, self)

    def __repr__(self):
        return ("~" if self.inv else "") + f"n{self.n}"


class Word(int):
    """A 32-bit constant under construction (an immediate operand, or a folded value): Python
    arithmetic on it wraps to 32 bits as the machine's does (`(k << 9) >> 5` keeps only the low
    word), and it combines with a `Value` by building the op."""
    __slots__ = ()

    def __invert__(self):
        return Word(~int(self) & M32)

    def __neg__(self):
        return Word(-int(self) & M32)


def _wrap(f):
    def op(self, o):
        if not isinstance(o, int):
            return NotImplemented
        return Word(f(int(self), int(o) & M32) & M32)
    return op


for _name, _f in {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "rsub": lambda a, b: b - a,
                  "mul": lambda a, b: a * b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
                  "xor": lambda a, b: a ^ b, "lshift": lambda a, b: a << b if b < 32 else 0,
                  "rshift": lambda a, b: a >> b, "rlshift": lambda a, b: b << a if a < 32 else 0,
                  "rrshift": lambda a, b: b >> a}.items():
    setattr(Word, f"__{_name}__", _wrap(_f))
for _name in ("add", "mul", "and", "or", "xor"):
    setattr(Word, f"__r{_name}__", getattr(Word, f"__{_name}__"))


def _inv(x):
    return (x ^ M32) if isinstance(x, int) else ~x


class Builder:
    """Builds one routine: constant folding, identities, CSE, dead-code removal."""

    def __init__(self):
        self.nodes = []          # [op, a, b, c, cin, sets_flag] or ["IN", Src]
        self.cse = {}

    # -- inputs / outputs ------------------------------------------------------------------
    def inp(self, s):
        s = src(s)
        if isinstance(s.value, Imm):
            v = s.value.value
            return Word((v ^ M32) if s.inv else v)
        self.nodes.append(["IN", s])
        return Value(self, len(self.nodes) - 1)

    def emit(self, em, outs):
        """Emit the live ops through `em.alu`; returns the outputs as Srcs."""
        live = set()
        n = len(self.nodes)
        for o in outs:
            if isinstance(o, Value):
                live.add(o.n)
        for i in range(n - 1, -1, -1):
            node = self.nodes[i]
            if i not in live or node[0] == "IN":
                continue
            for x in node[1:4]:
                if isinstance(x, Value):
                    live.add(x.n)
            if node[4] == "flag":
                live.add(i - 1)
        mapped = {}
        for i, node in enumerate(self.nodes):
            if i not in live:
                continue
            if node[0] == "IN":
                mapped[i] = node[1]
                continue
            op, a, b, c, cin, sf = node
            if sf and not (i + 1 < n and i + 1 in live and self.nodes[i + 1][4] == "flag"):
                sf = False
            args = [None if x is None else self._src(x, mapped) for x in (a, b, c)]
            mapped[i] = em.alu(op, args[0], args[1], args[2], cin=cin, sets_flag=sf)
        return tuple(self._src(o, mapped) for o in outs)

    @staticmethod
    def _src(x, mapped):
        if isinstance(x, int):
            return src(int(x) & M32)          # a plain int: Word's wrapping stays in the builder
        s = mapped[x.n]
        return Src(s.value, s.inv ^ x.inv)

    # -- ops -----------------------------------------------------------------------------------
    def op(self, op, a, b=None, c=None, cin="0", sets_flag=False):
        if isinstance(a, int):
            a &= M32
        if isinstance(b, int):
            b &= M32
        if isinstance(c, int):
            c &= M32
        if cin != "flag" and not sets_flag:
            r = self._simplify(op, a, b, c, cin)
            if r is not None:
                return Word(r & M32) if isinstance(r, int) else r
        if cin == "flag":
            prev = self.nodes[-1] if self.nodes else None
            assert prev is not None and prev[5], "a flag consumer must follow its producer"
        if op in _COMMUTATIVE and not (isinstance(a, int) and isinstance(b, int)):
            ka, kb = self._k(a), self._k(b)
            # canonical order (for sharing); an inverted operand goes second (free there)
            if (ka > kb and not (isinstance(b, Value) and b.inv and not (isinstance(a, Value) and a.inv))) \
                    or (isinstance(a, Value) and a.inv and not (isinstance(b, Value) and b.inv)):
                a, b = b, a
        key = (op, self._k(a), self._k(b), self._k(c), cin)
        if cin != "flag" and not sets_flag and key in self.cse:
            return self.cse[key]
        self.nodes.append([op, a, b, c, cin, sets_flag])
        v = Value(self, len(self.nodes) - 1)
        if cin != "flag" and not sets_flag:
            self.cse[key] = v
        return v

    @staticmethod
    def _k(x):
        if x is None:
            return (0,)
        if isinstance(x, int):
            return (1, x)
        return (2, x.n, x.inv)

    def _simplify(self, op, a, b, c, cin):
        """The algebra's answer (`qwengpu.assembler.simplify`, every identity) as a value of this
        builder, or None."""
        args = {"a": a, "b": b, "c": c}
        sym = (lambda x: x if x is None or isinstance(x, int) else Sym(x.n, x.inv))
        r = simplify(op, sym(a), sym(b), sym(c), cin, full=True,
                     is01=lambda s: self.is01(Value(self, s.key, s.inv)))
        if r is None or isinstance(r, int):
            return r

        def value(x):
            if isinstance(x, Operand):
                return _inv(args[x.name]) if x.inv else args[x.name]
            return x
        if isinstance(r, Operand):
            return value(r)
        out = self.op(r.op, *(value(x) for x in r.args))
        return _inv(out) if r.inv else out

    def is01(self, v):
        if isinstance(v, int):
            return v in (0, 1)
        if v.inv:
            return False
        node = self.nodes[v.n]
        return node[0] in ("EQ", "LTU", "LEU", "LT", "LE") or (
            node[0] in ("AND",) and any(x == 1 for x in node[1:3]))

    # -- conveniences --------------------------------------------------------------------------
    def sub(self, a, b):
        """a - b."""
        if isinstance(b, int):
            return self.op("ADD", a, (-b) & M32)
        return self.op("ADD", a, _inv(b), cin="1")

    def sel(self, c, a, b):
        """c != 0 ? a : b."""
        return self.op("SEL", a, b, c)

    def sar(self, a, k):
        return self.op("SAR", a, k)

    def eq(self, a, b):
        return self.op("EQ", a, b)

    def ltu(self, a, b):
        return self.op("LTU", a, b)

    def leu(self, a, b):
        return self.op("LEU", a, b)

    def lt(self, a, b):
        return self.op("LT", a, b)

    def le(self, a, b):
        return self.op("LE", a, b)

    def mul(self, a, b):
        return self.op("MUL", a, b)

    def mulhu(self, a, b):
        return self.op("MULHU", a, b)

    def clz(self, a):
        return self.op("CLZ", a)

    def not01(self, a):
        """1 - a for a 0/1 value."""
        return self.op("XOR", a, 1)

    def flag_add(self, a, b, cin="0"):
        """An ADD that sets the carry flag for the next op (`add_cin`)."""
        return self.op("ADD", a, b, cin=cin, sets_flag=True)

    def add_cin(self, a, b):
        """a + b + the carry flag of the op just built (must follow `flag_add`)."""
        return self.op("ADD", a, b, cin="flag")

    def add64(self, a, b, cin="0"):
        """(lo, hi) + (lo, hi) (+ 1 with cin="1"); operands must be built already."""
        lo = self.op("ADD", a[0], b[0], cin=cin, sets_flag=True)
        hi = self.op("ADD", a[1], b[1], cin="flag")
        return lo, hi

    def sub64(self, a, b):
        return self.add64(a, (_inv(b[0]), _inv(b[1])), cin="1")


def _run(em, build, *srcs):
    """Build a routine: `build(b, *inputs)` returns a value or a tuple of values."""
    b = Builder()
    ins = [b.inp(s) for s in srcs]
    out = build(b, *ins)
    if not isinstance(out, tuple):
        return b.emit(em, (out,))[0]
    return b.emit(em, out)


# =============================================================================================
# f32: bit operations, compare, testp, min/max

def _check_mode(rnd, allowed, what):
    r = "rn" if rnd is None else str(rnd).lstrip(".").lower()
    if r not in allowed:
        raise SoftFloatError(f"{what}: rounding mode {rnd!r} not in {allowed}")
    return r


def _flush32(b, x):
    """.ftz input: subnormal -> zero of the same sign."""
    return b.sel(x & F32_INF, x, x & S31)


def _isnan32(b, x):
    """0/1: x is a NaN."""
    return b.ltu(0xFF000000, x << 1)


def _sat32(b, r, one=F32_ONE, inf=F32_INF):
    """.sat: clamp to [+0, 1]; NaN and negative numbers (-0 too) give +0 (f16: one=0x3C00,
    inf=0x7C00 on the low half)."""
    r1 = b.sel(b.ltu(one, r), one, r)
    return b.sel(b.ltu(inf, r), 0, r1)


def _abs32(b, a, ftz=False):
    m = a & ABS
    if ftz:
        m = b.sel(a & F32_INF, m, 0)
    return b.sel(b.ltu(F32_INF, m), F32_NAN, m)


def _neg32(b, a, ftz=False):
    if ftz:
        a = _flush32(b, a)
    return b.sel(_isnan32(b, a), F32_NAN, a ^ S31)


def abs(em, a, ftz=False):   # noqa: A001 - PTX name
    """abs{.ftz}.f32: clear the sign; a NaN gives the canonical NaN."""
    return _run(em, lambda b, a: _abs32(b, a, ftz), a)


def neg(em, a, ftz=False):
    """neg{.ftz}.f32: flip the sign; a NaN gives the canonical NaN."""
    return _run(em, lambda b, a: _neg32(b, a, ftz), a)


def copysign(em, a, b):
    """copysign.f32 d, a, b: the sign of a with the rest of b (PTX operand order)."""
    return _run(em, lambda bl, a, b: b ^ ((a ^ b) & S31), a, b)


def _ukey(b, x, inf):
    """Unsigned order key: inf + x (x >= 0) or inf - |x| (x < 0): finite and infinite values map
    in order onto [0, 2*inf] with -0 == +0, every NaN above 2*inf."""
    return b.sel(x >> 31, b.sub(S31 + inf, x), x + inf)


def _compare_keys(b, op, ka, kb, top):
    """setp on unsigned keys (non-NaN in [0, top], NaN above)."""
    ok_a = b.leu(ka, top)
    ok_b = b.leu(kb, top)
    nan_a = b.ltu(top, ka)
    nan_b = b.ltu(top, kb)
    if op == "eq":
        return b.eq(ka, kb) & ok_a
    if op == "ne":
        return b.sel(b.eq(ka, kb), 0, ok_b) & ok_a
    if op == "lt":
        return b.ltu(ka, kb) & ok_b
    if op == "le":
        return b.leu(ka, kb) & ok_b
    if op == "gt":
        return b.ltu(kb, ka) & ok_a
    if op == "ge":
        return b.leu(kb, ka) & ok_a
    if op == "equ":
        return b.sel(b.eq(ka, kb), 1, nan_a | nan_b)
    if op == "neu":
        return b.sel(b.eq(ka, kb), nan_a, 1)
    if op == "ltu":
        return b.ltu(ka, kb) | nan_a
    if op == "leu":
        return b.leu(ka, kb) | nan_a
    if op == "gtu":
        return b.ltu(kb, ka) | nan_b
    if op == "geu":
        return b.leu(kb, ka) | nan_b
    raise SoftFloatError(f"setp: unknown comparison {op!r}")


def _compare32(b, op, a, c, ftz, inf=F32_INF):
    op = str(op).lstrip(".").lower()
    if op not in COMPARE_OPS:
        raise SoftFloatError(f"setp: unknown comparison {op!r}")
    if op in ("num", "nan"):
        na = b.ltu(inf << 1, a << 1)
        nc = b.ltu(inf << 1, c << 1)
        return (na | nc) if op == "nan" else b.not01(na | nc)
    if ftz:
        a, c = _flush32(b, a), _flush32(b, c)
    return _compare_keys(b, op, _ukey(b, a, inf), _ukey(b, c, inf), 2 * inf)


def compare(em, op, a, b, ftz=False):
    """setp.op{.ftz}.f32 -> 0/1, for every op in COMPARE_OPS (ordered ones are false on NaN,
    the u-suffixed ones true; num/nan test for NaNs)."""
    return _run(em, lambda bl, a, c: _compare32(bl, op, a, c, ftz), a, b)


def _testp32(b, op, a):
    op = str(op).lstrip(".").lower()
    a2 = a << 1
    if op == "finite":
        return b.ltu(a2, 0xFF000000)
    if op == "infinite":
        return b.eq(a2, 0xFF000000)
    if op == "number":
        return b.leu(a2, 0xFF000000)
    if op == "notanumber":
        return b.ltu(0xFF000000, a2)
    if op == "subnormal":
        return b.ltu(a2 - 1, 0x00FFFFFF)
    if op == "normal":                      # zero counts as normal
        return b.sel(a2, b.ltu(a2 - 0x01000000, 0xFE000000), 1)
    raise SoftFloatError(f"testp: unknown property {op!r}")


def testp(em, op, a):
    """testp.op.f32 -> 0/1 (op in TESTP_OPS; zero counts as normal)."""
    return _run(em, lambda b, a: _testp32(b, op, a), a)


def _minmax32(b, a, c, is_max, ftz, nan, fmt_nan=F32_NAN, inf2=0xFF000000):
    if ftz:
        a, c = _flush32(b, a), _flush32(b, c)
    if not is_max and not nan and fmt_nan == F32_NAN:
        # min: a NaN becomes the canonical NaN, the largest pattern as a signed int, which the
        # order below never picks over a number (and two NaNs give the canonical one)
        a = b.sel(b.ltu(inf2, a << 1), F32_NAN, a)
        c = b.sel(b.ltu(inf2, c << 1), F32_NAN, c)
        return b.sel(b.lt(a, c) ^ b.lt(a & c, 0), a, c)
    # non-NaN order: signed-int order, reversed when both are negative (-0 < +0 falls out)
    lt = b.lt(c, a) if is_max else b.lt(a, c)
    both_neg = b.lt(a & c, 0)
    r = b.sel(lt ^ both_neg, a, c)
    na = b.ltu(inf2, a << 1)
    nc = b.ltu(inf2, c << 1)
    if nan:
        return b.sel(na | nc, fmt_nan, r)
    r = b.sel(na, c, r)
    return b.sel(nc, b.sel(na, fmt_nan, a), r)


def min(em, a, b, ftz=False, nan=False):   # noqa: A001 - PTX name
    """min{.ftz}{.NaN}.f32 (-0 < +0; one NaN -> the other operand; .NaN -> canonical NaN)."""
    return _run(em, lambda bl, a, c: _minmax32(bl, a, c, False, ftz, nan), a, b)


def max(em, a, b, ftz=False, nan=False):   # noqa: A001 - PTX name
    """max{.ftz}{.NaN}.f32."""
    return _run(em, lambda bl, a, c: _minmax32(bl, a, c, True, ftz, nan), a, b)


# =============================================================================================
# f32 rounding: a significand n with its leading bit at bit 30 (or lower for a subnormal result)
# and 7 bits below the last kept bit; ek = biased exponent - 1, so that
#     packed = (ek << 23) + (n >> 7 rounded)
# (the leading bit adds the missing 1 to the exponent field; a rounding carry out of the
# significand moves into the exponent by itself, subnormal -> normal included).

def _round30(b, n, mode, sign, inexact=False, sh=7):
    """n >> sh rounded per `mode` (n < 2^31; n's bit 0 is a sticky bit). `sign`: bit 31 = result
    sign. inexact=True: the value is known to lie strictly above n (never exactly on it)."""
    if mode == "rz":
        return n >> sh
    if mode == "rn":
        # round half to even: (n + half - 1 + L) >> sh, L = bit sh of n (through the carry flag)
        t = n << (31 - sh)
        b.flag_add(t, t)
        return b.add_cin(n, (1 << (sh - 1)) - (0 if inexact else 1)) >> sh
    # directed: add 2^sh - 1 when rounding away from zero
    away = b.sar(sign, 31) if mode == "rm" else ~b.sar(sign, 31)
    return (n + (away & ((1 << sh) - 1))) >> sh


def _pack32(b, ek, rd, mode, sign, mbits=23, inf=F32_INF, sbit=S31):
    """(ek << mbits) + rd with overflow to infinity or the largest finite value, plus the sign
    (bit 31 of `sign`, placed at `sbit`). Needs (ek << mbits) + rd < 2^32."""
    p = (ek << mbits) + rd
    ov = b.leu(inf, p)
    if mode == "rn":
        ovv = inf
    elif mode == "rz":
        ovv = inf - 1
    else:
        neg = sign >> 31
        ovv = b.sub(inf, neg) if mode == "rp" else (inf - 1) + neg
    p = b.sel(ov, ovv, p)
    if sbit == S31:
        return p | (sign & S31)
    return p | ((sign >> 31) << (sbit.bit_length() - 1))


def _denorm(b, n, ek):
    """Subnormal results: if ek < 0 shift n right by -ek (keeping a sticky bit) and set ek = 0."""
    ekc = ek & ~b.sar(ek, 31)
    sh = ekc - ek
    n1 = n >> sh
    lost = b.ltu(n1 << sh, n)
    return n1 | lost, ekc


def _ftz_out32(b, r):
    """.ftz on a result: exponent field 0 -> zero of the same sign."""
    return b.sel(r & F32_INF, r, r & S31)


# ---------------------------------------------------------------------------------------------
# add / sub

def _add32(b, a, c, mode, ftz, sat, negate=False):
    if negate:
        c = c ^ S31
    a2, c2 = a << 1, c << 1
    sw = b.ltu(a2, c2)                       # |a| < |c|: x is the larger magnitude
    x = b.sel(sw, c, a)
    x2 = b.sel(sw, c2, a2)
    y2 = b.sel(sw, a2, c2)
    ex = x2 >> 24
    ey = y2 >> 24
    d = ex - ey
    # significands with the hidden bit at 29 (6 guard bits); a subnormal uses exponent 0 and a
    # doubled significand (f << 7), which keeps ex/ey the raw fields
    vx = (x2 << 5) & 0x1FFFFFC0
    vy = (y2 << 5) & 0x1FFFFFC0
    if ftz:                                  # a subnormal input counts as zero
        mx = b.sel(ex, vx | 0x20000000, 0)
        my = b.sel(ey, vy | 0x20000000, 0)
    else:
        mx = vx + b.sel(ex, 0x20000000, vx)
        my = vy + b.sel(ey, 0x20000000, vy)
    # align y with a sticky bit
    t = my >> d
    t = t | b.ltu(t << d, my)
    # effective subtraction: r = mx - t  as  ~(~mx + t)
    m = b.sar(a ^ c, 31)
    r = (((mx ^ m) + t) ^ m)
    # normalise to bit 30; stop at the subnormal boundary (ek >= 0)
    k = b.clz((r << 1) | (S31 >> ex))
    n = r << k
    ek = ex - k
    sign = x
    rd = _round30(b, n, mode, sign)
    res = _pack32(b, ek, rd, mode, sign)
    # exact zero (cancellation or two zeros), infinities and NaNs
    zero = (a | c) & S31 if mode == "rm" else (a & c) & S31
    sp = b.leu(0xFF000000, x2)
    xs = b.sel(b.eq(x2, 0xFF000000), x, F32_NAN)
    res = b.sel(sp, xs, res)
    res = b.sel(r, res, b.sel(sp, F32_NAN, zero))
    if ftz:
        res = _ftz_out32(b, res)
    if sat:
        res = _sat32(b, res)
    return res


def add(em, a, b, rnd="rn", ftz=False, sat=False):
    """add{.rnd}{.ftz}{.sat}.f32 (rnd: rn rz rm rp)."""
    mode = _check_mode(rnd, FROUND, "add.f32")
    return _run(em, lambda bl, a, c: _add32(bl, a, c, mode, ftz, sat), a, b)


def sub(em, a, b, rnd="rn", ftz=False, sat=False):
    """sub{.rnd}{.ftz}{.sat}.f32: a - b."""
    mode = _check_mode(rnd, FROUND, "sub.f32")
    return _run(em, lambda bl, a, c: _add32(bl, a, c, mode, ftz, sat, negate=True), a, b)


# ---------------------------------------------------------------------------------------------
# mul

def _special_mul32(b, a, c, sign):
    """(is_special, value) for a*c when an operand is zero, infinite or NaN."""
    x, y = a & ABS, c & ABS
    sw = b.ltu(x, y)
    big = b.sel(sw, y, x)
    small = b.sel(sw, x, y)
    q = b.sel(small, F32_INF, 0)
    sp = b.leu(q, big)                       # small == 0 or big >= inf
    nan = b.ltu(b.sel(small, F32_INF, F32_INF - 1), big)   # NaN operand or 0 * inf
    return sp, b.sel(nan, F32_NAN, q | sign)


def _mul32(b, a, c, mode, ftz, sat):
    if ftz:
        a, c = _flush32(b, a), _flush32(b, c)
    ea = a & F32_INF
    ec = c & F32_INF
    # significands: a with its leading bit at 31, c at 30; a subnormal uses exponent 0 and a
    # doubled significand
    va = a << 9
    ma = b.sel(ea, (va >> 1) | S31, va)
    vc = (c << 9) >> 2
    mc = vc + b.sel(ec, 0x40000000, vc)
    hi = b.mulhu(ma, mc)
    lo = b.mul(ma, mc)
    # normalise the 64-bit product to bit 62 (bit 30 of the high word)
    zc = b.clz(hi)
    z = zc - 1
    n = (hi << z) | (lo >> b.sub(33, zc))
    n = n | b.ltu(0, lo << z)
    ek = ((ea + ec) >> 23) - 126 - zc
    n, ek = _denorm(b, n, ek)
    sign = a ^ c
    rd = _round30(b, n, mode, sign)
    res = _pack32(b, ek, rd, mode, sign)
    sp, sv = _special_mul32(b, a, c, sign & S31)
    res = b.sel(sp, sv, res)
    if ftz:
        res = _ftz_out32(b, res)
    if sat:
        res = _sat32(b, res)
    return res


def mul(em, a, b, rnd="rn", ftz=False, sat=False):
    """mul{.rnd}{.ftz}{.sat}.f32."""
    mode = _check_mode(rnd, FROUND, "mul.f32")
    return _run(em, lambda bl, a, c: _mul32(bl, a, c, mode, ftz, sat), a, b)


# ---------------------------------------------------------------------------------------------
# fma

def _fma32(b, a, bb, c, mode, ftz, sat):
    if ftz:
        a, bb, c = _flush32(b, a), _flush32(b, bb), _flush32(b, c)
    sp = a ^ bb                               # product sign (bit 31)
    ea, eb, ec = a & F32_INF, bb & F32_INF, c & F32_INF
    va = a << 9
    ma = b.sel(ea, (va >> 1) | S31, va)      # leading bit 31 (raw convention for subnormals)
    vb = (bb << 9) >> 5
    mb = vb + b.sel(eb, 0x08000000, vb)      # leading bit 27
    vc = c << 9
    mc = b.sel(ec, (vc >> 1) | S31, vc)      # leading bit 31
    ph = b.mulhu(ma, mb)                      # P = ma*mb < 2^60, value P * 2^(ea+eb-312)
    pl = b.mul(ma, mb)
    # c = (mc:0) * 2^-ng in units of P; a zero product puts c in charge (ng very negative)
    ecs = ec >> 23
    eab = b.sel(b.sel(ma, mb, 0), (ea + eb) >> 23, (-(1 << 20)) & M32)
    ng = (eab - ecs) - 122
    # 64-bit window: P's leading bit at 58 or 59, c's at 63-ng. c may sit at most at 61 (the
    # sum stays below 2^63); when c would be higher it goes to 61 and P moves right by 2-ng,
    # and c then exceeds P by two binades at least (no deep cancellation, so P's low word is
    # only a sticky bit: it lies entirely below c's last bit)
    shc2 = b.sel(b.lt(ng, 2), 2, ng)
    shp = shc2 - ng
    shc = b.sel(b.ltu(63, shc2), 63, shc2)   # c entirely below the window -> sticky only
    # c placed: (ch:cl) = (mc:0) >> shc, lost bits -> sticky in bit 0
    ch = mc >> shc
    cl = (mc << (32 - shc)) | (mc >> (shc - 32))
    cl = cl | b.ltu(0, mc << (64 - shc))
    # P placed: shifted right only when c dominates, and then its low word is only sticky
    p32 = ph | b.ltu(0, pl)
    px = b.sel(shp, p32, ph)
    ph2 = px >> shp
    pl2 = b.sel(shp, b.ltu(ph2 << shp, px), pl)
    # signed sum: T = (P ^ m) + C, m = all ones for an effective subtraction
    m = b.sar(sp ^ c, 31)
    tl, th = b.add64((pl2 ^ m, ph2 ^ m), (cl, ch))
    # |P -/+ C|: add -> T;  sub -> ~T if T < 0 (P >= C) else T + 1
    n_ = b.sar(th, 31)
    k = m & ~n_                               # sub and C > P: result sign flips, add 1
    rl, rh = b.add64((tl ^ n_, th ^ n_), (~k, ~k), cin="1")
    sign = sp ^ k
    # normalise |R| (< 2^63) so the high word has its leading bit at 30
    hz = b.eq(rh, 0)
    h1 = b.sel(hz, rl >> 1, rh)
    l1 = b.sel(hz, rl << 31, rl)
    zc = b.clz(h1)
    z = zc - 1
    n = (h1 << z) | (l1 >> (32 - z))
    n = n | b.ltu(0, l1 << z)
    # ek = biased exponent - 1 = ea+eb-124 + shp - (z + 31*hz) = ecs-2 + shc2 - (z + 31*hz)
    ek = (ecs + shc2) - (zc + b.sel(hz, 32, 1))
    n, ek = _denorm(b, n, ek)
    rd = _round30(b, n, mode, sign)
    res = _pack32(b, ek, rd, mode, sign)
    # exact zero result (R may be a lone sticky bit: a tiny P squashed next to c = 0)
    zero = (sp | c) & S31 if mode == "rm" else (sp & c) & S31
    res = b.sel(rh | rl, res, zero)
    # infinities and NaNs
    x, y, zc = a & ABS, bb & ABS, c & ABS
    sw = b.ltu(x, y)
    big = b.sel(sw, y, x)
    small = b.sel(sw, x, y)
    pnan = b.ltu(b.sel(small, F32_INF, F32_INF - 1), big)   # NaN operand or 0 * inf
    pinf = b.leu(F32_INF, big)
    infs = (sp & S31) | F32_INF
    val = b.sel(pinf, infs, c)
    nan = pnan | b.ltu(F32_INF, zc) | b.eq(val ^ c, S31)
    spv = b.sel(nan, F32_NAN, val)
    res = b.sel(pinf | b.leu(F32_INF, zc), spv, res)
    if ftz:
        res = _ftz_out32(b, res)
    if sat:
        res = _sat32(b, res)
    return res


def fma(em, a, b, c, rnd="rn", ftz=False, sat=False):
    """fma.rnd{.ftz}{.sat}.f32 (= mad.rnd.f32): a*b+c rounded once."""
    mode = _check_mode(rnd, FROUND, "fma.f32")
    return _run(em, lambda bl, a, bb, c: _fma32(bl, a, bb, c, mode, ftz, sat), a, b, c)


# ---------------------------------------------------------------------------------------------
# div / rcp

def _unpack_norm32(b, x, e23):
    """Normalised significand (leading bit at 31; 0 for a zero) and biased exponent (below 1
    for a subnormal) of a finite x: value = m * 2^(e - 158)."""
    v = x << 9
    u = b.sel(e23, (v >> 1) | S31, v)        # a subnormal: exponent 0, significand doubled
    z = b.clz(u)
    return u << z, (e23 >> 23) - z, z


# linear seed for 2^63/m: (c0 - 2x) * 2^31 with x = m/2^32, c0 = sqrt(48) - 4 (error < 7.2%)
_RCP_C0 = int((48 ** 0.5 - 4) * 2 ** 31) & M32


def _recip32(b, m):
    """R <= 2^63/m (m in [2^31, 2^32)), relative error < 2^-29.2: a linear seed, one Newton step
    y*(2 - x*y) and two y + y*(1 - x*y), every rounding downwards. Checked exhaustively for all
    2^23 significands (tests/test_softfloat.py::test_recip32_exhaustive)."""
    r = b.sub(_RCP_C0, m)
    p = b.mulhu(m, r)
    r = b.mulhu(r, ~p) << 1                  # ~p = 2^32 - 1 - p <= (2 - x*y) * 2^31
    for _ in range(2):
        p = b.mulhu(m, r)
        r = r + b.mulhu(r, (~p) << 1)        # (~p) << 1 = 2^32 - 2 - 2p <= (1 - x*y) * 2^32
    return r


def _special_div32(b, a, c, sign):
    """(is_special, value) for a/c when an operand is zero, infinite or NaN."""
    x, y = a & ABS, c & ABS
    gt = b.ltu(y, x)
    big = b.sel(gt, x, y)
    small = b.sel(gt, y, x)
    sp = b.leu(b.sel(small, F32_INF, 0), big)     # a zero, or an infinity/NaN
    # given sp: 0/0, inf/inf and NaNs give NaN (x == y or a NaN); else x > y: inf, x < y: 0
    nan = b.eq(x, y) | b.ltu(F32_INF, big)
    return sp, b.sel(nan, F32_NAN, b.sel(gt, sign | F32_INF, sign))


def _div32(b, a, c, mode, ftz):
    if ftz:
        a, c = _flush32(b, a), _flush32(b, c)
    sign = (a ^ c) & S31
    ea23, ec23 = a & F32_INF, c & F32_INF
    ma, ea, _ = _unpack_norm32(b, a, ea23)
    mc, ec, _ = _unpack_norm32(b, c, ec23)
    # quotient: A' = ma * 2^u in [mc, 2 mc); Q = floor(A' * 2^25 / mc) in [2^25, 2^26)
    u = b.ltu(ma, mc)
    r = _recip32(b, mc)
    q0 = b.mulhu(ma >> (6 - u), r)           # Q - 1 <= q0 <= Q (r's error < 2^-29, Q < 2^26)
    d24 = mc >> 8
    rem = (ma << (u + 17)) - b.mul(q0, d24)  # exact: A'*2^25 - q0*d in [0, 2d)
    up = b.leu(d24, rem)
    q = q0 + up
    sticky = b.ltu(b.sel(up, d24, 0), rem)
    n = (q << 5) | sticky
    ek = (ea - ec) - u + 126
    n, ek = _denorm(b, n, ek)
    rd = _round30(b, n, mode, sign)
    res = _pack32(b, ek, rd, mode, sign)
    sp, sv = _special_div32(b, a, c, sign)
    res = b.sel(sp, sv, res)
    if ftz:
        res = _ftz_out32(b, res)
    return res


def div(em, a, b, rnd="rn", ftz=False):
    """div.rnd{.ftz}.f32 (IEEE, correctly rounded: rn rz rm rp)."""
    mode = _check_mode(rnd, FROUND, "div.f32")
    return _run(em, lambda bl, a, c: _div32(bl, a, c, mode, ftz), a, b)


def rcp(em, a, rnd="rn", ftz=False):
    """rcp.rnd{.ftz}.f32: correctly rounded 1/a."""
    mode = _check_mode(rnd, FROUND, "rcp.f32")
    return _run(em, lambda bl, a: _div32(bl, F32_ONE, a, mode, ftz), a)


# ---------------------------------------------------------------------------------------------
# sqrt

# quadratic seed for 1/sqrt(x), x in [1/2, 1): c0 - x*(k1 - c2*x) (relative error < 2^-8.2)
_RSQ_C2 = int(0.83542149 * 2 ** 31)
_RSQ_K1 = int(2.06613124 * 2 ** 31) & M32
_RSQ_K0 = int(2.23390533 * 2 ** 31) & M32
_RSQRT_HALF = int(2 ** 32 / 2 ** 0.5)          # floor(2^32 / sqrt 2)


def _rsqrt32(b, m):
    """Y <= 2^31/sqrt(m/2^32) for m in [2^31, 2^32): quadratic seed and two Newton steps
    y*(3 - x*y^2)/2, every rounding downwards (checked exhaustively in the tests)."""
    y = b.sub(_RSQ_K0, b.mulhu(m, b.sub(_RSQ_K1, b.mulhu(m, _RSQ_C2))))
    for _ in range(2):
        p = b.mulhu(m, b.mulhu(y, y))          # x*y^2 * 2^30 (rounded down twice)
        y = b.mulhu(y, ~p + 0xBFFFFFFF) << 1   # 1.5*2^31 - p - 2 <= (3 - x*y^2)/2 * 2^31
    return y


def _isqrt26(b, m, par):
    """(S0, radicand mod 2^32): S0 = S or S - 1, S = floor(sqrt(m*2^(19+par))) in [2^25, 2^26)
    for a normalised m (leading bit 31)."""
    y = _rsqrt32(b, m)
    g = b.mulhu(m, y)                          # sqrt(m/2^32) * 2^31
    s0 = b.sel(par, g, b.mulhu(g, _RSQRT_HALF)) >> 5
    return s0, m << (par + 19)


def _sqrt32(b, a, mode, ftz):
    if ftz:
        a = _flush32(b, a)
    ea23 = a & F32_INF
    m, ea, _ = _unpack_norm32(b, a, ea23)
    par = ~ea & 1                              # radicand m * 2^par: even total exponent
    s0, x = _isqrt26(b, m, par)
    rem = x - b.mul(s0, s0)                    # exact, in [0, 2(2S+1))
    t = s0 << 1
    up = b.ltu(t, rem)                         # (S0+1)^2 <= radicand
    s = s0 + up
    n = s << 5
    if mode == "rp":                           # (rm = rz for a non-negative result)
        n = n | b.ltu(b.sel(up, t | 1, 0), rem)
    # rn: a square root is never exactly halfway between two floats (the square of a 25-bit
    # odd significand has more than 24 bits), so the round bit alone decides: rounding as if
    # sticky were set is exact. rz needs no sticky at all.
    ek = (ea + 125) >> 1
    rd = _round30(b, n, mode, 0, inexact=True)
    res = (ek << 23) + rd
    # +-0 -> itself, +inf -> +inf, anything else special (negative, NaN) -> NaN
    sp = b.leu(0x7F7FFFFF, a - 1)
    keep = b.eq(a << 1, 0) | b.eq(a, F32_INF)
    return b.sel(sp, b.sel(keep, a, F32_NAN), res)


def sqrt(em, a, rnd="rn", ftz=False):
    """sqrt.rnd{.ftz}.f32 (IEEE, correctly rounded)."""
    mode = _check_mode(rnd, FROUND, "sqrt.f32")
    return _run(em, lambda b, a: _sqrt32(b, a, mode, ftz), a)


# =============================================================================================
# conversions

INT_TYPES = {}
for _w in (8, 16, 32, 64):
    INT_TYPES[f"u{_w}"] = (_w, False)
    INT_TYPES[f"b{_w}"] = (_w, False)
    INT_TYPES[f"s{_w}"] = (_w, True)
FLOAT_TYPES = ("f16", "f32", "f64")


def _f32_to_int(b, x, dw, signed, irnd):
    """cvt.irnd.{s,u}dw.f32: round to an integer, clamp to the destination range; NaN -> 0
    (1 << 63 for a 64-bit destination). Returns a tuple of words."""
    x2 = x << 1
    e = x2 >> 24
    m = (x << 8) | S31                        # a subnormal keeps a (wrong) hidden bit: it is
    sh = 158 - e                              # still below 1/2 and rounds like any tiny value
    if dw == 64:
        lo = (m << (e - 158)) | (m >> sh)     # m * 2^(e-158): integer part (64 bits)
        hi = m >> (190 - e)
    else:
        lo, hi = m >> sh, None
    # rounding: frac = the bits below the integer part, left-aligned (0 once x >= 2^31)
    if irnd == "rni":
        frac = m << (e - 126)
        lo = lo + b.ltu(S31, frac + (lo & 1))  # frac has 8 trailing zeros: no wrap
    elif irnd in ("rpi", "rmi"):
        # only x of the rounding direction's sign, nonzero and below 2^31 can move
        if irnd == "rpi":
            cond = b.ltu(x - 1, 0x4F000000 - 1) if dw == 64 else b.lt(0, x)
        else:
            cond = b.ltu(x - 0x80000001, 0x4F000000 - 1) if dw == 64 else b.ltu(S31, x)
        mm = b.sel(cond, m, 0)
        lo = lo + b.ltu((m >> sh) << sh, mm)
    s = b.sar(x, 31)
    if dw == 64:
        if signed:
            nan = b.ltu(0xFF000000, x2)
            s = b.sel(nan, M32, s)            # NaN -> -2^63, like a negative overflow
            lo, hi = b.add64((lo ^ s, hi ^ s), (~s, ~s), cin="1")
            fits = b.ltu(x2, 190 << 24)
            return b.sel(fits, lo, ~s), b.sel(fits, hi, 0x7FFFFFFF ^ s)
        neg = b.ltu(F32_INF, x)               # negative or +NaN
        ov = b.leu(191 << 24, x2)
        lo = b.sel(ov, M32, lo)
        hi = b.sel(ov, M32, hi)
        nanh = b.sel(b.ltu(0xFF000000, x2), S31, 0)
        return b.sel(neg, 0, lo), b.sel(neg, nanh, hi)
    if signed:
        r = (lo ^ s) - s
        r = b.sel(b.leu(158 << 24, x2), 0x7FFFFFFF ^ s, r)
        r = b.sel(b.ltu(0xFF000000, x2), 0, r)
        if dw < 32:
            lim = (1 << (dw - 1)) - 1
            r = b.sel(b.lt(lim, r), lim, r)
            r = b.sel(b.lt(r, -lim - 1), (-lim - 1) & M32, r)
            r = r & ((1 << dw) - 1)
        return (r,)
    r = b.sel(b.leu(159 << 24, x2), M32, lo)
    r = b.sel(b.ltu(F32_INF, x), 0, r)        # negative (rounds to <= 0) or NaN
    if dw < 32:
        r = b.sel(b.ltu((1 << dw) - 1, r), (1 << dw) - 1, r)
    return (r,)


def _norm_pair(b, lo, hi):
    """A nonzero 64-bit magnitude as (n, k): n = its top bits with the leading one at bit 30
    and a sticky bit 0, k = its number of bits (value = n * 2^(k - 31) up to the sticky)."""
    hz = b.eq(hi, 0)
    h1 = b.sel(hz, lo, hi)
    l1 = b.sel(hz, 0, lo)
    zc = b.clz(h1)
    n = (h1 << zc) | (l1 >> (32 - zc))
    j = n | b.ltu(0, l1 << zc)
    return (j >> 1) | (j & 1), b.sub(b.sel(hz, 32, 64), zc)


def _int_to_f32(b, parts, sw, signed, mode):
    """cvt.rnd.f32.{s,u}sw: exact integer -> f32 rounded per mode (never overflows)."""
    x = parts[0]
    if sw < 32:
        x = b.sar(x << (32 - sw), 32 - sw) if signed else x & ((1 << sw) - 1)
    if sw == 64:
        lo, hi = x, parts[1]
        if signed:
            s = b.sar(hi, 31)
            lo, hi = b.add64((lo ^ s, hi ^ s), (~s, ~s), cin="1")
            sign = s
        else:
            sign = 0
        n, k = _norm_pair(b, lo, hi)
        nz = lo | hi
    else:
        if signed:
            s = b.sar(x, 31)
            mag = (x ^ s) - s
            sign = s
        else:
            mag, sign = x, 0
        z = b.clz(mag)
        n31 = mag << z
        # bit 0 of n31 can only be set when z == 0, i.e. mag >= 2^31: u32 only (s32: 2^31 even)
        n = (n31 >> 1) | (n31 & 1) if not signed else n31 >> 1
        k = 32 - z
        nz = mag
    # value = n * 2^(k - 31); n's leading bit 30 -> biased exponent k + 126, ek = k + 125
    rd = _round30(b, n, mode, sign)
    res = ((k + 125) << 23) + rd
    if not isinstance(sign, int):
        res = res | (sign & S31)
    return b.sel(nz, res, 0)


def _rint32(b, x, irnd):
    """cvt.irnd.f32.f32: round to an integral value (keeps the sign of zero); NaN -> canonical."""
    ax = x & ABS
    e = ax >> 23
    low = M32 >> (e - 118)                    # the fraction bits below the units bit (e >= 127)
    if irnd == "rzi":
        r = x & ~low
    elif irnd == "rni":
        t = (x >> 1) << (e - 118)             # bit 31 = the units bit (0 once x is integral)
        half = low >> 1
        b.flag_add(t, t)
        r = b.add_cin(x, half) & ~low         # + half - 1 + units bit: ties to even
    else:
        away = b.sar(x, 31) if irnd == "rmi" else b.sar(~x, 31)
        r = (x + (low & away)) & ~low
    # |x| < 1: +-0 or +-1
    if irnd == "rni":
        one = b.ltu(0x3F000000, ax)
    elif irnd == "rzi":
        one = 0
    elif irnd == "rpi":
        one = b.lt(0, x)
    else:
        one = b.ltu(S31, x)
    small = (x & S31) | b.sel(one, F32_ONE, 0)
    r = b.sel(b.ltu(ax, F32_ONE), small, r)
    return b.sel(b.ltu(F32_INF, ax), F32_NAN, r)


def _f32_to_f64(b, x):
    """cvt.f64.f32: exact; a NaN keeps its sign and payload (shifted), not quieted."""
    a = x & ABS
    e = a >> 23
    # subnormal: normalise to a pattern with exponent field 1 - k (possibly negative)
    k = b.clz(a) - 8
    sub = (a << k) - (k << 23)
    p = b.sel(e, a, sub)
    bias = b.sel(b.leu(F32_INF, a), (2047 - 255) << 20, (1023 - 127) << 20)
    hi = (b.sar(p, 3) + bias) | (x & S31)
    lo = p << 29
    return b.sel(a, lo, 0), b.sel(a, hi, x & S31)


def _f64_to_f32(b, lo, hi, mode):
    """cvt.rnd.f32.f64."""
    ah = hi & ABS
    e = ah >> 20
    n = ((hi << 10) & 0x3FFFFC00) | 0x40000000 | (lo >> 22)
    n = n | b.ltu(0, lo << 10)
    ek = e - 897
    ek = b.sel(b.lt(ek, 256), ek, 256)       # keep (ek << 23) from wrapping
    n, ek = _denorm(b, n, ek)
    rd = _round30(b, n, mode, hi)
    res = _pack32(b, ek, rd, mode, hi)
    res = b.sel(ah | lo, res, hi & S31)      # +-0 (an f64 subnormal is a tiny nonzero)
    # inf / NaN
    nan = b.ltu(0x7FF00000, ah | b.ltu(0, lo))
    spv = b.sel(nan, F32_NAN, (hi & S31) | F32_INF)
    return b.sel(b.leu(0x7FF00000, ah), spv, res)


def _f16_to_f32(b, x):
    """cvt.f32.f16: exact; a NaN gives the canonical f32 NaN."""
    h = x << 16                               # drop anything above bit 15
    a = (h << 1) >> 17                        # |x| as 15 bits
    e = a >> 10
    k = b.clz(a) - 21                         # subnormal: normalise to bit 10
    sub = (a << k) - (k << 10)
    p = b.sel(e, a, sub)
    r = ((b.sar(p << 16, 3) + ((127 - 15) << 23)) | (h & S31))
    r = b.sel(a, r, h & S31)
    inf = b.leu(0x7C00, a)
    spv = b.sel(b.eq(a, 0x7C00), (h & S31) | F32_INF, F32_NAN)
    return b.sel(inf, spv, r)


def _f32_to_f16(b, x, mode):
    """cvt.rnd.f16.f32: the f16 bits in the low half, zero above."""
    ax = x & ABS
    e = ax >> 23
    n = ((x << 7) & 0x3FFFFF80) | 0x40000000
    ek = e - 113
    ek = b.sel(b.lt(ek, 32), ek, 32)
    n, ek = _denorm(b, n, ek)
    rd = _round30(b, n, mode, x, sh=20)
    res = _pack32(b, ek, rd, mode, x, mbits=10, inf=0x7C00, sbit=0x8000)
    sg = (x >> 16) & 0x8000
    res = b.sel(ax, res, sg)
    spv = b.sel(b.ltu(F32_INF, ax), 0x7FFF, sg | 0x7C00)
    return b.sel(b.leu(F32_INF, ax), spv, res)


def cvt(em, a_parts, dst_type, src_type, rnd=None, sat=False, ftz=False):
    """cvt{.rnd}{.ftz}{.sat}.dst.src -> tuple of Src (one word, or (lo, hi) for 64-bit types).

    a_parts: the source as a tuple of words ((lo, hi) for 64-bit types; an f16 or a narrow
    integer in the low bits of one word -- garbage above its width is ignored). A result
    narrower than 32 bits comes zero-extended (the caller sign-extends a signed one).
    Supported: f32 <-> {s,u,b}{8,16,32,64}, f32 -> f32 (rni rzi rmi rpi, or none with
    .ftz/.sat), f32 <-> f64, f16 <-> f32, f64 <-> integers, f64 -> f64 (rni ...).
    """
    d = str(dst_type).lstrip(".").lower()
    s = str(src_type).lstrip(".").lower()
    r = None if rnd is None else str(rnd).lstrip(".").lower()
    parts = tuple(a_parts) if isinstance(a_parts, (tuple, list)) else (a_parts,)
    name = f"cvt.{r}.{d}.{s}"

    def run(build, n):
        return _run(em, lambda bl, *xs: build(bl, *xs), *parts[:n])

    if d in INT_TYPES and s == "f32":
        if r not in IROUND:
            raise SoftFloatError(f"{name}: float -> int needs rni/rzi/rmi/rpi")
        dw, dsg = INT_TYPES[d]

        def build(bl, x):
            return _f32_to_int(bl, _flush32(bl, x) if ftz else x, dw, dsg, r)
        out = run(build, 1)
        return out if isinstance(out, tuple) else (out,)
    if s in INT_TYPES and d == "f32":
        if r not in FROUND:
            raise SoftFloatError(f"{name}: int -> float needs rn/rz/rm/rp")
        sw, ssg = INT_TYPES[s]

        def build(bl, *xs):
            res = _int_to_f32(bl, xs, sw, ssg, r)
            # (an integer never gives a subnormal: .ftz has nothing to do)
            return _sat32(bl, res) if sat else res
        return (run(build, 2 if sw == 64 else 1),)
    if d == "f32" and s == "f32":
        if r is not None and r not in IROUND:
            raise SoftFloatError(f"{name}: same-size float cvt only takes rni/rzi/rmi/rpi")

        def build(bl, x):
            if ftz:
                x = _flush32(bl, x)
            if r is not None:
                x = _rint32(bl, x, r)
            elif ftz:
                x = bl.sel(_isnan32(bl, x), F32_NAN, x)
            return _sat32(bl, x) if sat else x
        return (run(build, 1),)
    if d == "f64" and s == "f32":
        if r is not None:
            raise SoftFloatError(f"{name}: widening float cvt takes no rounding modifier")
        if sat:
            raise SoftFloatError(f"{name}: .sat on an f64 result is not supported here")
        return run(lambda bl, x: _f32_to_f64(bl, _flush32(bl, x) if ftz else x), 1)
    if d == "f32" and s == "f64":
        if r not in FROUND:
            raise SoftFloatError(f"{name}: narrowing float cvt needs rn/rz/rm/rp")

        def build(bl, lo, hi):
            res = _f64_to_f32(bl, lo, hi, r)
            if ftz:
                res = _ftz_out32(bl, res)
            return _sat32(bl, res) if sat else res
        return (run(build, 2),)
    if d == "f32" and s == "f16":
        if r is not None:
            raise SoftFloatError(f"{name}: widening float cvt takes no rounding modifier")

        def build(bl, x):
            res = _f16_to_f32(bl, x)
            if ftz:
                res = _ftz_out32(bl, res)
            return _sat32(bl, res) if sat else res
        return (run(build, 1),)
    if d == "f16" and s == "f32":
        if r not in FROUND:
            raise SoftFloatError(f"{name}: narrowing float cvt needs rn/rz/rm/rp")

        def build(bl, x):
            res = _f32_to_f16(bl, _flush32(bl, x) if ftz else x, r)
            return _sat32(bl, res, 0x3C00, 0x7C00) if sat else res
        return (run(build, 1),)
    return _cvt64(em, parts, d, s, r, sat, ftz, name)


def _rint64(b, lo, hi, irnd):
    """cvt.irnd.f64.f64: round to an integral value (keeps the sign of zero); a NaN passes
    unchanged. With f = 1075 - e fraction bits below the units bit (1 <= f <= 52 when
    1 <= |x| < 2^52), the pattern arithmetic of `_rint32` on the pair: add (half - 1 + the units
    bit) or (the mask, away from zero), clear the mask; carries reach the exponent by themselves."""
    ah = hi & ABS
    e = ah >> 20
    f = 1075 - e
    nlow0 = M32 << f                          # the f low bits (f in 1..52) are (~nlow0, low1)
    low1 = M32 >> (64 - f)
    if irnd == "rni":
        half = (~(M32 << (f - 1)), M32 >> (65 - f))                    # 2^(f-1) - 1
        unit = ((lo >> f) | (hi >> (f - 32))) & 1                      # the units bit
        t = b.add64(b.add64((lo, hi), half), (unit, 0))
    elif irnd == "rmi":
        neg = b.sar(hi, 31)
        t = b.add64((lo, hi), (~nlow0 & neg, low1 & neg))
    elif irnd == "rpi":                       # (every inverted operand second, or one inversion)
        nonneg_not = b.sar(hi, 31)
        t = b.add64((lo, hi), (~(nlow0 | nonneg_not), low1 & ~nonneg_not))
    else:
        t = (lo, hi)
    r = (t[0] & nlow0, t[1] & ~low1)
    # |x| < 1: +-0 or +-1
    nonzero = b.ltu(0, ah | lo)
    if irnd == "rni":
        one = b.ltu(0x3FE00000, ah) | (b.eq(ah, 0x3FE00000) & b.ltu(0, lo))   # |x| > 1/2
    elif irnd == "rzi":
        one = 0
    elif irnd == "rpi":
        one = nonzero & b.sar(~hi, 31)
    else:
        one = nonzero & b.sar(hi, 31)
    small_hi = (hi & S31) | b.sel(one, 0x3FF00000, 0)
    small = b.ltu(ah, 0x3FF00000)
    big = b.leu(0x43300000, ah)                # |x| >= 2^52, infinities and NaNs: unchanged
    return (b.sel(big, lo, b.sel(small, 0, r[0])), b.sel(big, hi, b.sel(small, small_hi, r[1])))


def _cvt64(em, parts, d, s, r, sat, ftz, name):
    if ftz or sat:
        raise SoftFloatError(f"{name}: .ftz/.sat need an f32 side")
    if d == "f64" and s == "f64":
        if r is None:
            return tuple(parts[:2])
        if r not in IROUND:
            raise SoftFloatError(f"{name}: same-size float cvt only takes rni/rzi/rmi/rpi")
        return _run(em, lambda b, lo, hi: _rint64(b, lo, hi, r), *parts[:2])
    if d in INT_TYPES and s == "f64":
        if r not in IROUND:
            raise SoftFloatError(f"{name}: float -> int needs rni/rzi/rmi/rpi")
        dw, dsg = INT_TYPES[d]
        out = _run(em, lambda b, lo, hi: _f64_to_int(b, lo, hi, dw, dsg, r), *parts[:2])
        return out if isinstance(out, tuple) else (out,)
    if s in INT_TYPES and d == "f64":
        if r not in FROUND:
            raise SoftFloatError(f"{name}: int -> float needs rn/rz/rm/rp")
        sw, ssg = INT_TYPES[s]
        return _run(em, lambda b, *xs: _int_to_f64(b, xs, sw, ssg, r), *parts[:2 if sw == 64 else 1])
    raise SoftFloatError(f"{name}: conversion not supported by softfloat")


# =============================================================================================
# f64 on (lo, hi) pairs. NaN operands propagate unchanged (the first NaN operand), a NaN made
# by an invalid operation is F64_CANONICAL_NAN = 0xFFF8000000000000; no .ftz/.sat.

F64_INF_HI = 0x7FF00000


def _isnan64(b, lo, hi):
    """0/1: (lo, hi) is a NaN."""
    return b.ltu(F64_INF_HI, (hi & ABS) | b.ltu(0, lo))


def _run64(em, build, *pairs):
    """Routine on f64 operands given as (lo, hi) pairs; returns one pair or one word."""
    flat = [x for p in pairs for x in p]

    def wrapped(b, *xs):
        ps = [(xs[2 * i], xs[2 * i + 1]) for i in range(len(pairs))]
        return build(b, *ps)
    return _run(em, wrapped, *flat)


def abs64(em, a):
    """abs.f64: clear the sign; a NaN passes through unchanged."""
    def build(b, a):
        lo, hi = a
        return lo, b.sel(_isnan64(b, lo, hi), hi, hi & ABS)
    return _run64(em, build, a)


def neg64(em, a):
    """neg.f64: flip the sign; a NaN passes through unchanged."""
    def build(b, a):
        lo, hi = a
        return lo, b.sel(_isnan64(b, lo, hi), hi, hi ^ S31)
    return _run64(em, build, a)


def copysign64(em, a, b):
    """copysign.f64 d, a, b: the sign of a with the rest of b."""
    return _run64(em, lambda bl, a, c: (c[0], c[1] ^ ((a[1] ^ c[1]) & S31)), a, b)


def _ukey64(b, lo, hi):
    """64-bit unsigned order key: finite and infinite values in order on [0, (0xFFE00000, 0)]
    with -0 == +0; NaNs above (like _ukey for f32, the magnitude offset by the infinity)."""
    s = b.sar(hi, 31)
    # positive: x + inf;  negative: inf - |x|  ==  (~x + 1) + inf - 2^63 (mod 2^64)
    th = (hi ^ s) + (0x7FF00000 ^ (s & S31))
    tl = lo ^ s
    return b.add64((tl, th), (~s, ~s), cin="1")


def _ltu64(b, a, c):
    return b.ltu(a[1], c[1]) | (b.eq(a[1], c[1]) & b.ltu(a[0], c[0]))


def _leu64(b, a, c):
    return b.ltu(a[1], c[1]) | (b.eq(a[1], c[1]) & b.leu(a[0], c[0]))


def _eq64(b, a, c):
    return b.eq(a[1], c[1]) & b.eq(a[0], c[0])


def _compare64(b, op, a, c):
    op = str(op).lstrip(".").lower()
    if op not in COMPARE_OPS:
        raise SoftFloatError(f"setp: unknown comparison {op!r}")
    if op in ("num", "nan"):
        n = _isnan64(b, *a) | _isnan64(b, *c)
        return n if op == "nan" else b.not01(n)
    ka, kc = _ukey64(b, *a), _ukey64(b, *c)

    def ok(k):                                # k <= (0xFFE00000, 0): not a NaN
        return b.ltu(k[1], 0xFFE00000 + b.eq(k[0], 0))

    def bad(k):
        return b.not01(ok(k))
    if op == "eq":
        return _eq64(b, ka, kc) & ok(ka)
    if op == "ne":
        return b.sel(_eq64(b, ka, kc), 0, ok(kc)) & ok(ka)
    if op == "lt":
        return _ltu64(b, ka, kc) & ok(kc)
    if op == "le":
        return _leu64(b, ka, kc) & ok(kc)
    if op == "gt":
        return _ltu64(b, kc, ka) & ok(ka)
    if op == "ge":
        return _leu64(b, kc, ka) & ok(ka)
    if op == "equ":
        return b.sel(_eq64(b, ka, kc), 1, bad(ka) | bad(kc))
    if op == "neu":
        return b.sel(_eq64(b, ka, kc), bad(ka), 1)
    if op == "ltu":
        return _ltu64(b, ka, kc) | bad(ka)
    if op == "leu":
        return _leu64(b, ka, kc) | bad(ka)
    if op == "gtu":
        return _ltu64(b, kc, ka) | bad(kc)
    return _leu64(b, kc, ka) | bad(kc)           # geu


def compare64(em, op, a, b):
    """setp.op.f64 on (lo, hi) pairs -> 0/1."""
    return _run64(em, lambda bl, a, c: _compare64(bl, op, a, c), a, b)


def _testp64(b, op, lo, hi):
    op = str(op).lstrip(".").lower()
    h2 = hi << 1
    if op == "finite":
        return b.ltu(h2, 0xFFE00000)
    if op == "infinite":
        return b.eq(h2, 0xFFE00000) & b.eq(lo, 0)
    if op == "number":
        return b.ltu(h2, 0xFFE00000 + b.eq(lo, 0))
    if op == "notanumber":
        return b.ltu(0xFFE00000, h2 | b.ltu(0, lo))
    if op == "subnormal":
        return b.ltu(h2, 0x00200000) & b.ltu(0, h2 | lo)
    if op == "normal":
        return b.sel(h2 | lo, b.ltu(h2 - 0x00200000, 0xFFC00000), 1)
    raise SoftFloatError(f"testp: unknown property {op!r}")


def testp64(em, op, a):
    """testp.op.f64 -> 0/1."""
    return _run64(em, lambda b, a: _testp64(b, op, *a), a)


def _minmax64(b, a, c, is_max):
    def okey(lo, hi):                          # ones'-complement order key: -0 < +0
        s = b.sar(hi, 31)
        return lo ^ s, hi ^ (s | S31)
    ka, kc = okey(*a), okey(*c)
    pick_a = _ltu64(b, kc, ka) if is_max else _ltu64(b, ka, kc)
    lo = b.sel(pick_a, a[0], c[0])
    hi = b.sel(pick_a, a[1], c[1])
    na, nc = _isnan64(b, *a), _isnan64(b, *c)
    lo, hi = b.sel(na, c[0], lo), b.sel(na, c[1], hi)
    return b.sel(nc, a[0], lo), b.sel(nc, a[1], hi)       # both NaN: a


def min64(em, a, b):
    """min.f64 (-0 < +0; one NaN -> the other; two NaNs -> a)."""
    return _run64(em, lambda bl, a, c: _minmax64(bl, a, c, False), a, b)


def max64(em, a, b):
    """max.f64."""
    return _run64(em, lambda bl, a, c: _minmax64(bl, a, c, True), a, b)


def _round_pack64(b, sh, sl, x, ek, mode, sign):
    """f64 rounding and packing. (sh:sl) = the significand truncated to 53 bits (hidden bit at
    bit 20 of sh, or below for a subnormal), x = the bits below (bit 31 = round bit, the rest
    sticky, jammed), ek = biased exponent - 1 >= 0 with (ek << 20) + sh < 2^32; sign in bit 31.
    Overflow gives infinity or the largest finite value per mode."""
    if mode == "rz":
        up = 0
    elif mode == "rn":
        up = b.ltu(S31, x | (sl & 1))         # x > 1/2, or = 1/2 and odd
    else:
        neg = sign >> 31
        up = b.ltu(0, x) & (neg if mode == "rm" else b.not01(neg))
    rl, rh = b.add64((sl, sh), (up, 0))
    ph = (ek << 20) + rh
    ov = b.leu(F64_INF_HI, ph)
    if mode == "rn":
        ovh, ovl = F64_INF_HI, 0
    elif mode == "rz":
        ovh, ovl = F64_INF_HI - 1, M32
    else:
        neg = sign >> 31
        inf = b.not01(neg) if mode == "rp" else neg        # 1: overflow to infinity
        ovh = b.sub(F64_INF_HI, b.not01(inf))
        ovl = b.sub(0, b.not01(inf))
    ph = b.sel(ov, ovh, ph)
    rl = b.sel(ov, ovl, rl)
    return rl, ph | (sign & S31)


def _f64_sig_top(b, lo, hi):
    """The significand of a normal f64 with its leading bit at bit 31 of the first word:
    (Mh, Ml) = (1.f) * 2^63 as two words (hidden bit forced)."""
    return (hi << 11) | S31 | (lo >> 21), lo << 11


def _f64_to_int(b, lo, hi, dw, signed, irnd):
    """cvt.irnd.{s,u}dw.f64: round, clamp; NaN -> 1 << (dw - 1)."""
    h2 = hi << 1
    e = h2 >> 21
    mh, ml = _f64_sig_top(b, lo, hi)          # value = M * 2^(e - 1086)
    nan = _isnan64(b, lo, hi)
    if irnd in ("rpi", "rmi"):
        nz = hi | b.ltu(0, lo)
        cond = b.lt(0, nz) if irnd == "rpi" else b.ltu(S31, nz)   # nonzero, rounding direction
    if dw == 64:
        s = 1086 - e
        ql = (ml >> s) | (mh << (32 - s)) | (mh >> (s - 32))
        qh = mh >> s
        fw = (mh << (64 - s)) | (ml >> (s - 32)) | (ml << (32 - s))   # fraction, left-aligned
        st = b.ltu(0, ml << (64 - s))
        if irnd == "rni":
            up = b.ltu(S31, fw | st | (ql & 1))
        elif irnd in ("rpi", "rmi"):
            up = b.ltu(0, fw | st | b.ltu(64, s)) & cond      # s > 64: 0 < |x| < 1/2
        else:
            up = 0
        ql, qh = b.add64((ql, qh), (up, 0))
        sg = b.sar(hi, 31)
        if signed:
            sg = b.sel(nan, M32, sg)          # NaN -> -2^63, like a negative overflow
            ql, qh = b.add64((ql ^ sg, qh ^ sg), (~sg, ~sg), cin="1")
            fits = b.ltu(h2, 1086 << 21)
            return b.sel(fits, ql, ~sg), b.sel(fits, qh, 0x7FFFFFFF ^ sg)
        ov = b.leu(1087 << 21, h2)
        ql, qh = b.sel(ov, M32, ql), b.sel(ov, M32, qh)
        ql, qh = b.sel(b.lt(hi, 0), 0, ql), b.sel(b.lt(hi, 0), 0, qh)
        return b.sel(nan, 0, ql), b.sel(nan, S31, qh)
    sh = 1054 - e
    q0 = mh >> sh
    q = q0
    if irnd == "rni":
        fw = (mh << (e - 1022)) | (ml >> sh)
        st = b.ltu(0, ml << (e - 1022))
        q = q0 + b.ltu(S31, fw | st | (q0 & 1))
    elif irnd in ("rpi", "rmi"):
        inexact = b.ltu((q0 << sh), mh) | b.ltu(0, ml)
        q = q0 + (inexact & cond)
    sg = b.sar(hi, 31)
    if signed:
        sg = b.sel(nan, M32, sg)
        r = (q ^ sg) - sg
        ov = b.leu(1054 << 21, h2)
        if irnd != "rzi":                     # just below 2^31, rounded up to it
            ov = ov | b.lt(r & ~sg, 0)
        r = b.sel(ov, 0x7FFFFFFF ^ sg, r)
        if dw < 32:
            lim = (1 << (dw - 1)) - 1
            r = b.sel(b.lt(lim, r), lim, r)
            r = b.sel(b.lt(r, -lim - 1), (-lim - 1) & M32, r)
            r = r & ((1 << dw) - 1)
        return (r,)
    ov = b.leu(1055 << 21, h2)
    if irnd != "rzi":                         # just below 2^32, rounded up to it (wraps to 0)
        ov = ov | b.ltu(q, q0)
    r = b.sel(ov, M32, q)
    r = b.sel(b.lt(hi, 0), 0, r)
    if dw < 32:
        r = b.sel(b.ltu((1 << dw) - 1, r), (1 << dw) - 1, r)
    return (b.sel(nan, 1 << (dw - 1), r),)


def _int_to_f64(b, parts, sw, signed, mode):
    """cvt.rnd.f64.{s,u}sw: exact for 32-bit sources, rounded for 64-bit ones."""
    x = parts[0]
    if sw < 32:
        x = b.sar(x << (32 - sw), 32 - sw) if signed else x & ((1 << sw) - 1)
    if sw < 64:
        if signed:
            s = b.sar(x, 31)
            mag = (x ^ s) - s
        else:
            mag, s = x, 0
        z = b.clz(mag)
        n = mag << z                          # leading bit 31 -> f64 hidden bit (hi bit 20)
        hi = ((n >> 11) + ((1053 - z) << 20)) | (s & S31)
        return b.sel(mag, n << 21, 0), b.sel(mag, hi, 0)
    lo, hi = x, parts[1]
    if signed:
        s = b.sar(hi, 31)
        lo, hi = b.add64((lo ^ s, hi ^ s), (~s, ~s), cin="1")
    else:
        s = 0
    hz = b.eq(hi, 0)
    h1 = b.sel(hz, lo, hi)
    l1 = b.sel(hz, 0, lo)
    zc = b.clz(h1)
    nh = (h1 << zc) | (l1 >> (32 - zc))       # leading bit 31
    nl = l1 << zc
    k = b.sub(b.sel(hz, 32, 64), zc)          # number of bits
    sh, sl, gx = nh >> 11, (nl >> 11) | (nh << 21), nl << 21
    rl, rh = _round_pack64(b, sh, sl, gx, k + 1021, mode, s)
    nz = lo | hi
    return b.sel(nz, rl, 0), b.sel(nz, rh, 0)


F64_CNAN = (0, F64_NAN_HI)                   # 0xFFF8000000000000


def _sig64(b, lo, h, e):
    """Significand of |x| (h = high word without the sign, e = its exponent field) with the
    hidden bit at bit 61 (bit 29 of the high word) and 9 guard bits; subnormal: no hidden bit
    (its exponent counts as 1)."""
    return (lo << 9), ((h << 12) >> 3) | (lo >> 23) | b.sel(e, 0x20000000, 0)


def _shr64_jam(b, lo, hi, d):
    """(lo, hi) >> d for any d >= 0 with the lost bits jammed into bit 0 (hi < 2^31)."""
    d = b.sel(b.ltu(63, d), 63, d)
    big = b.ltu(31, d)
    h0 = b.sel(big, 0, hi)
    l0 = b.sel(big, hi, lo)
    s0 = b.sel(big, lo, 0)
    k = d & 31
    th = h0 >> k
    tl = (l0 >> k) | (h0 << (32 - k))
    lost = (l0 << (32 - k)) | s0
    return tl | b.ltu(0, lost), th


def _add64(b, a, c, mode, negate=False):
    al, ah = a
    cl, ch0 = c
    ch = ch0 ^ S31 if negate else ch0
    aa, ca = ah & ABS, ch & ABS
    sw = _ltu64(b, (al, aa), (cl, ca))       # |a| < |c|: x is the larger magnitude
    xl, xh = b.sel(sw, cl, al), b.sel(sw, ca, aa)
    yl, yh = b.sel(sw, al, cl), b.sel(sw, aa, ca)
    xs = b.sel(sw, ch, ah)
    ex, ey = xh >> 20, yh >> 20
    exe, eye = b.sel(ex, ex, 1), b.sel(ey, ey, 1)
    mxl, mxh = _sig64(b, xl, xh, ex)
    myl, myh = _sig64(b, yl, yh, ey)
    tl, th = _shr64_jam(b, myl, myh, exe - eye)
    # effective subtraction: r = ~(~mx + t)
    m = b.sar(ah ^ ch, 31)
    rl, rh = b.add64((mxl ^ m, mxh ^ m), (tl, th))
    rl, rh = rl ^ m, rh ^ m
    # r < 2^63: normalise to bit 62, stopping at the subnormal boundary (ek = exe - k >= 0)
    z = b.sel(rh, b.clz(rh), b.clz(rl) + 32) - 1
    k = b.sel(b.ltu(z, exe), z, exe)
    nh = (rh << k) | (rl >> (32 - k)) | (rl << (k - 32))
    nl = rl << k
    sh, sl, gx = nh >> 10, (nl >> 10) | (nh << 22), nl << 22
    ek = exe - k
    lo, hi = _round_pack64(b, sh, sl, gx, ek, mode, xs)
    # exact zero
    zs = (ah | ch) & S31 if mode == "rm" else (ah & ch) & S31
    nz = rh | rl
    lo, hi = b.sel(nz, lo, 0), b.sel(nz, hi, zs)
    # infinities: x is inf or NaN; inf - inf (r == 0) -> canonical NaN
    sp = b.leu(F64_INF_HI, xh)
    lo = b.sel(sp, b.sel(nz, xl, 0), lo)
    hi = b.sel(sp, b.sel(nz, xs, F64_NAN_HI), hi)
    # NaN operands propagate (the first one, c un-negated)
    na = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    nc = b.ltu(F64_INF_HI, (ch0 & ABS) | b.ltu(0, cl))
    nn = na | nc
    lo = b.sel(nn, b.sel(na, al, cl), lo)
    hi = b.sel(nn, b.sel(na, ah, ch0), hi)
    return lo, hi


def add64(em, a, b, rnd="rn"):
    """add{.rnd}.f64 on (lo, hi) pairs."""
    mode = _check_mode(rnd, FROUND, "add.f64")
    return _run64(em, lambda bl, a, c: _add64(bl, a, c, mode), a, b)


def sub64(em, a, b, rnd="rn"):
    """sub{.rnd}.f64: a - b (a NaN b is returned un-negated)."""
    mode = _check_mode(rnd, FROUND, "sub.f64")
    return _run64(em, lambda bl, a, c: _add64(bl, a, c, mode, negate=True), a, b)


def _shl64(b, lo, hi, k):
    """(lo, hi) << k for 0 <= k < 64."""
    shl = lambda x, y: b.op("SHL", x, y)            # machine semantics for constants too
    return shl(lo, k), shl(hi, k) | b.op("SHR", lo, b.sub(32, k)) | shl(lo, b.sub(k, 32))


def _unpack_norm64(b, lo, hi):
    """Finite nonzero f64 -> (ml, mh, e): the significand normalised with its leading bit at
    bit 52 (bit 20 of mh) and the exponent (below 1 for a subnormal): value = m * 2^(e-1075).
    Returns also the exponent field."""
    ex = (hi << 1) >> 21
    h0 = (hi & 0xFFFFF) | b.sel(ex, 0x100000, 0)
    z = b.sel(h0, b.clz(h0), b.clz(lo) + 32) - 11          # 0 for a normal number
    ml, mh = _shl64(b, lo, h0, z)
    return ml, mh, b.sel(ex, ex, 1) - z, ex


def _finish64(b, nl, nh, ek, mode, sign):
    """n = (nl, nh): significand with its leading bit at 62 (or lower, denormalised) and 10
    bits below the last kept one, sticky in bit 0; ek = biased exponent - 1 (may be < 0 or
    very large). Denormalise, round, pack."""
    ekc = ek & ~b.sar(ek, 31)
    ekc = b.sel(b.lt(ekc, 2047), ekc, 2047)              # overflows anyway
    nl, nh = _shr64_jam(b, nl, nh, ekc - ek)
    sh, sl, gx = nh >> 10, (nl >> 10) | (nh << 22), nl << 22
    return _round_pack64(b, sh, sl, gx, ekc, mode, sign)


def _mul64(b, a, c, mode):
    al, ah = a
    cl, ch = c
    sign = ah ^ ch
    xl, xh, ex, fa = _unpack_norm64(b, al, ah)
    yl, yh, ey, fc = _unpack_norm64(b, cl, ch)
    # 106-bit product of two 53-bit significands (high words < 2^21)
    hh_l, hh_h = b.mul(xh, yh), b.mulhu(xh, yh)
    hl_l, hl_h = b.mul(xh, yl), b.mulhu(xh, yl)
    lh_l, lh_h = b.mul(xl, yh), b.mulhu(xl, yh)
    ll_l, ll_h = b.mul(xl, yl), b.mulhu(xl, yl)
    m_l, m_h = b.add64((hl_l, hl_h), (lh_l, lh_h))        # < 2^54
    w1, t = b.add64((ll_h, m_h), (m_l, 0))
    w2, w3 = b.add64((hh_l, hh_h), (t, 0))                # P = w3:w2:w1:ll_l, 2^104 <= P < 2^106
    cc = w3 >> 9                                          # leading bit 105
    u = 10 + cc
    v = 22 - cc
    nh = (w3 << v) | (w2 >> u)
    nl = (w2 << v) | (w1 >> u)
    nl = nl | b.ltu(0, (w1 << v) | ll_l)
    ek = (ex + ey + cc) - 1024
    lo, hi = _finish64(b, nl, nh, ek, mode, sign)
    # zeros, infinities, NaNs
    aa, ca = ah & ABS, ch & ABS
    nz = b.sel(aa | al, ca | cl, 0)                       # both nonzero
    lo, hi = b.sel(nz, lo, 0), b.sel(nz, hi, sign & S31)
    inf = b.leu(F64_INF_HI, aa) | b.leu(F64_INF_HI, ca)
    lo = b.sel(inf, 0, lo)
    hi = b.sel(inf, b.sel(nz, (sign & S31) | F64_INF_HI, F64_NAN_HI), hi)
    na = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    nc = b.ltu(F64_INF_HI, ca | b.ltu(0, cl))
    nn = na | nc
    lo = b.sel(nn, b.sel(na, al, cl), lo)
    hi = b.sel(nn, b.sel(na, ah, ch), hi)
    return lo, hi


def mul64(em, a, b, rnd="rn"):
    """mul{.rnd}.f64 on (lo, hi) pairs."""
    mode = _check_mode(rnd, FROUND, "mul.f64")
    return _run64(em, lambda bl, a, c: _mul64(bl, a, c, mode), a, b)


# =============================================================================================
# micro-op counts

def _cost_table():
    from .emit import Recorder

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


def _mulq64(b, q, lo, hi):
    """q * (lo, hi) mod 2^64 for a 32-bit q."""
    return b.mul(q, lo), b.mulhu(q, lo) + b.mul(q, hi)


def _shl64c(b, lo, hi, k):
    """(lo, hi) << k mod 2^64, constant 0 < k < 32."""
    return lo << k, (hi << k) | (lo >> (32 - k))


def _special_div64(b, a, c, sign, res):
    """Zeros, infinities and NaNs of a / c, over the finite result `res`."""
    al, ah = a
    cl, ch = c
    aa, ca = ah & ABS, ch & ABS
    az = b.eq(aa | al, 0)
    cz = b.eq(ca | cl, 0)
    ai = b.leu(F64_INF_HI, aa)
    ci = b.leu(F64_INF_HI, ca)
    # inf/x or x/0 -> inf; 0/x or x/inf -> 0; 0/0, inf/inf -> NaN
    inf = ai | cz
    zero = az | ci
    lo = b.sel(inf | zero, 0, res[0])
    hi = b.sel(inf, (sign & S31) | F64_INF_HI, b.sel(zero, sign & S31, res[1]))
    inv = (az & cz) | (ai & ci)
    lo, hi = b.sel(inv, 0, lo), b.sel(inv, F64_NAN_HI, hi)
    na = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    nc = b.ltu(F64_INF_HI, ca | b.ltu(0, cl))
    nn = na | nc
    return b.sel(nn, b.sel(na, al, cl), lo), b.sel(nn, b.sel(na, ah, ch), hi)


def _div64(b, a, c, mode):
    al, ah = a
    cl, ch = c
    sign = ah ^ ch
    xl, xh, ea, _ = _unpack_norm64(b, al, ah)           # A: leading bit 52
    yl, yh, ec, _ = _unpack_norm64(b, cl, ch)           # B
    x2l, x2h = _shl64c(b, xl, xh, 1)                    # A2 = 2A in [2^53, 2^54)
    d = (yh << 11) | (yl >> 21)                          # top 32 bits of B
    r = _recip32(b, d) - 2                               # <= 2^63/(d+1) <= 2^84/B
    # digit 1: q1 = floor(A2 * 2^26 / B) in [2^26, 2^28); estimate from the top 32 bits of A2
    q = b.mulhu((x2h << 10) | (x2l >> 22), r) >> 4       # q1 - 1 <= q <= q1
    tl, th = _shl64c(b, x2l, x2h, 26)
    pl, ph = _mulq64(b, q, yl, yh)
    rl, rh = b.sub64((tl, th), (pl, ph))                 # exact, in [0, 2B)
    up = _leu64(b, (yl, yh), (rl, rh))
    q1 = q + up
    rl, rh = b.sub64((rl, rh), (b.sel(up, yl, 0), b.sel(up, yh, 0)))
    # digit 2: q2 = floor(r1 * 2^27 / B) in [0, 2^27)
    q = b.mulhu((rh << 10) | (rl >> 22), r) >> 3         # q2 - 1 <= q <= q2
    tl, th = _shl64c(b, rl, rh, 27)
    pl, ph = _mulq64(b, q, yl, yh)
    rl, rh = b.sub64((tl, th), (pl, ph))
    up = _leu64(b, (yl, yh), (rl, rh))
    q2 = q + up
    sticky = _ltu64(b, (b.sel(up, yl, 0), b.sel(up, yh, 0)), (rl, rh))
    # Q = q1 * 2^27 + q2 in [2^53, 2^55): to n with the leading bit at 62
    ql, qh = (q1 << 27) | q2, q1 >> 5
    top = qh >> 22                                       # Q >= 2^54
    s = 9 - top
    nh = (qh << s) | (ql >> (32 - s))
    nl = (ql << s) | sticky
    # value = Q * 2^(ea - ec - 54) ; n = Q * 2^s  -> ek = ea - ec + 1022 - 53 + 62 - ... :
    ek = (ea - ec) + (1022 - 1) + top
    res = _finish64(b, nl, nh, ek, mode, sign)
    return _special_div64(b, a, c, sign, res)


def div64(em, a, b, rnd="rn"):
    """div.rnd.f64 on (lo, hi) pairs (IEEE, correctly rounded)."""
    mode = _check_mode(rnd, FROUND, "div.f64")
    return _run64(em, lambda bl, a, c: _div64(bl, a, c, mode), a, b)


def rcp64(em, a, rnd="rn"):
    """rcp.rnd.f64: correctly rounded 1/a."""
    mode = _check_mode(rnd, FROUND, "rcp.f64")
    return _run64(em, lambda bl, a: _div64(bl, (0, 0x3FF00000), a, mode), a)


def _sqrt64(b, a, mode):
    al, ah = a
    ml, mh, e, _ = _unpack_norm64(b, al, ah)             # M: leading bit 52
    par = ~e & 1                                         # Z = M * 2^(2+par): even exponent
    k = par + 2
    zl = ml << k
    zh = (mh << k) | (ml >> (32 - k))                    # Z in [2^54, 2^56)
    zw = (zh << 8) | (zl >> 24)                          # Z >> 24
    y = _rsqrt32(b, (mh << 11) | (ml >> 21)) - 1         # <= 2^31 / sqrt(M / 2^53)
    # yz <= 2^31 / sqrt(Z / 2^56) (relative error < 2^-28.75 + 2 * 2^-31 < 2^-28.19)
    yz = b.sel(par, y, y + b.mulhu(y, 0x6A09E667))       # (sqrt 2 - 1) * 2^32
    # digit 1: s1 = floor(sqrt(Z)) in [2^27, 2^28), remainder r1 = Z - s1^2 in [0, 2 s1]
    s = b.mulhu(zw, yz) >> 3                             # s1 - 2 <= s <= s1
    r1 = zl - b.mul(s, s)                                # exact: the true value is < 2^31
    for _ in range(2):
        t = s << 1
        up = b.ltu(t, r1)
        s = s + up
        r1 = b.sel(up, r1 + ~t, r1)                      # r1 - (2s + 1)
    s1 = s
    # digit 2: S = s1 * 2^27 + s2 = floor(sqrt(Z * 2^54)); s2 - 1 <= v <= s2 (see docs)
    v = b.mulhu(r1, yz) >> 1
    sl, sh = (s1 << 27) | v, s1 >> 5
    # exact remainder X - S0^2 (mod 2^64; the true value is in [0, 2(2S+1)))
    pl = b.mul(sl, sl)
    ph = b.mulhu(sl, sl) + (b.mul(sl, sh) << 1)
    rl, rh = b.sub64((0, zl << 22), (pl, ph))
    tl, th = sl << 1, (sh << 1) | (sl >> 31)             # 2 S0
    up = _ltu64(b, (tl, th), (rl, rh))
    sl, sh = b.add64((sl, sh), (up, 0))                  # S in [2^54, 2^55)
    # S = 53 significand bits + 2 more; the rest (the remainder) is the sticky bit
    if mode == "rp":
        sticky = _ltu64(b, (b.sel(up, tl | 1, 0), b.sel(up, th, 0)), (rl, rh))
    else:
        sticky = 1          # rn: a square root is never exactly halfway (rz = rm: unused)
    gx = (sl << 30) | sticky
    sig_l, sig_h = (sl >> 2) | (sh << 30), sh >> 2
    ek = (e + 1021) >> 1
    lo, hi = _round_pack64(b, sig_h, sig_l, gx, ek, mode, 0)
    # +-0 and NaN -> themselves, +inf -> +inf, other negatives -> canonical NaN
    aa = ah & ABS
    nan = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    keep = nan | b.eq(aa | al, 0) | (b.eq(ah, F64_INF_HI) & b.eq(al, 0))
    neg = b.lt(ah, 0)
    lo = b.sel(keep, al, b.sel(neg, 0, lo))
    hi = b.sel(keep, ah, b.sel(neg, F64_NAN_HI, hi))
    return lo, hi


def sqrt64(em, a, rnd="rn"):
    """sqrt.rnd.f64 on a (lo, hi) pair (IEEE, correctly rounded)."""
    mode = _check_mode(rnd, FROUND, "sqrt.f64")
    return _run64(em, lambda bl, a: _sqrt64(bl, a, mode), a)


def _raw64(b, lo, hi):
    """Raw significand (hidden bit only if normal; leading bit <= 52) and exponent max(e, 1)."""
    ex = (hi << 1) >> 21
    return lo, (hi & 0xFFFFF) | b.sel(ex, 0x100000, 0), b.sel(ex, ex, 1)


def _mul53(b, xl, xh, yl, yh):
    """4-word product of two 2-word significands whose middle partial products sum below 2^64."""
    hh_l, hh_h = b.mul(xh, yh), b.mulhu(xh, yh)
    m_l, m_h = b.add64((b.mul(xh, yl), b.mulhu(xh, yl)), (b.mul(xl, yh), b.mulhu(xl, yh)))
    ll_l, ll_h = b.mul(xl, yl), b.mulhu(xl, yl)
    w1, t = b.add64((ll_h, m_h), (m_l, 0))
    w2, w3 = b.add64((hh_l, hh_h), (t, 0))
    return ll_l, w1, w2, w3


def _fma64(b, a, bb, c, mode):
    al, ah = a
    bl, bh = bb
    cl, ch = c
    sp = ah ^ bh                                          # product sign (bit 31)
    xl, xh, ea = _raw64(b, al, ah)
    yl, yh, eb = _raw64(b, bl, bh)
    zl, zh, ec = _raw64(b, cl, ch)
    # P = (A << 9) * (B << 8): exact, below 2^123, lowest possible bit 17
    p0, p1, p2, p3 = _mul53(b, *_shl64c(b, xl, xh, 9), *_shl64c(b, yl, yh, 8))
    # window (128 bits, unit 2^(ea+eb-2167)): c's leading bit would be at 1144+ec-ea-eb; it may
    # be at most at 124 (the sum stays below 2^126). Higher: c at 124, P moves right by g
    # (then c > 4P: P's two low words lie below c's last bit and the rounding point).
    eab = b.sel(b.sel(xl | xh, yl | yh, 0), ea + eb, (-(1 << 20)) & M32)   # zero P: c rules
    g = (ec - eab) + 1020
    r = b.sel(b.lt(g, 0), 0 - g, 0)                       # c's right shift from bit 124
    sh_p = r + g                                          # P's right shift
    # c at 124, shifted right by r (any amount) into 4 words, sticky in bit 0
    c3, c2 = (zh << 8) | (zl >> 24), zl << 8
    rc = b.sel(b.ltu(127, r), 127, r)                    # beyond: c is a sticky bit only
    k = rc & 31
    q = rc >> 5
    y3 = c3 >> k
    y2 = (c2 >> k) | (c3 << (32 - k))
    y1 = c2 << (32 - k)
    q1, q2, q3 = b.eq(q, 1), b.eq(q, 2), b.eq(q, 3)
    w3 = b.sel(q, 0, y3)
    w2 = b.sel(q, b.sel(q1, y3, 0), y2)
    w1 = b.sel(q, b.sel(q1, y2, b.sel(q2, y3, 0)), y1)
    w0 = b.sel(q1, y1, b.sel(q2, y2, b.sel(q3, y3, 0)))
    w0 = w0 | b.ltu(0, b.sel(q2, y1, b.sel(q3, y2 | y1, 0)))
    # P placed: shifted only when c dominates, its low words then a sticky bit
    px = b.sel(sh_p, p2 | b.ltu(0, p1 | p0), p2)
    p2, p3 = _shr64_jam(b, px, p3, sh_p)
    p1, p0 = b.sel(sh_p, 0, p1), b.sel(sh_p, 0, p0)
    # signed sum T = (P ^ m) + C over four words
    m = b.sar(sp ^ ch, 31)
    x0, x1, x2, x3 = p0 ^ m, p1 ^ m, p2 ^ m, p3 ^ m
    s0, s1 = b.add64((x0, x1), (w0, w1))
    cy = _ltu64(b, (s0, s1), (x0, x1))
    s2, s3 = b.add64((x2, x3), (w2, w3))
    s2, s3 = b.add64((s2, s3), (cy, 0))
    # |R| = (T ^ n) - k  (k = m & ~n: subtraction with C > P; the sign flips)
    n_ = b.sar(s3, 31)
    kk = m & ~n_
    t0, t1 = b.add64((s0 ^ n_, s1 ^ n_), (kk & 1, 0))
    cy = kk & b.eq(t0 | t1, 0) & 1                       # the +1 carried out of the low half
    t2, t3 = b.add64((s2 ^ n_, s3 ^ n_), (cy, 0))
    sign = sp ^ kk
    nz = t0 | t1 | t2 | t3
    # normalise: word shifts (64, then 32), CLZ, top 64 bits + sticky, halve to bit 62
    z64 = b.eq(t3 | t2, 0)
    t3, t2, t1, t0 = b.sel(z64, t1, t3), b.sel(z64, t0, t2), b.sel(z64, 0, t1), b.sel(z64, 0, t0)
    z32 = b.eq(t3, 0)
    t3, t2, t1, t0 = b.sel(z32, t2, t3), b.sel(z32, t1, t2), b.sel(z32, t0, t1), b.sel(z32, 0, t0)
    z = b.clz(t3)
    nh = (t3 << z) | (t2 >> (32 - z))
    nl = (t2 << z) | (t1 >> (32 - z))
    st = nl | b.ltu(0, (t1 << z) | t0)
    nl, nh = (st >> 1) | (nh << 31) | (st & 1), nh >> 1
    ek = (ec + r) + 2 - z - b.sel(z64, 64, 0) - b.sel(z32, 32, 0)
    lo, hi = _finish64(b, nl, nh, ek, mode, sign)
    # exact zero: +0 (-0 in rm) unless both addends are -0-like
    zs = (sp | ch) & S31 if mode == "rm" else (sp & ch) & S31
    lo, hi = b.sel(nz, lo, 0), b.sel(nz, hi, zs)
    # infinities and NaNs
    aa, ba, ca = ah & ABS, bh & ABS, ch & ABS
    pinf = b.leu(F64_INF_HI, aa) | b.leu(F64_INF_HI, ba)
    cinf = b.leu(F64_INF_HI, ca)
    infs = (sp & S31) | F64_INF_HI
    vlo, vhi = b.sel(pinf, 0, cl), b.sel(pinf, infs, ch)
    zero_ab = b.eq(aa | al, 0) | b.eq(ba | bl, 0)
    invalid = (pinf & zero_ab) | (pinf & b.eq(ch, infs ^ S31) & b.eq(cl, 0))
    vlo, vhi = b.sel(invalid, 0, vlo), b.sel(invalid, F64_NAN_HI, vhi)
    spc = pinf | cinf
    lo, hi = b.sel(spc, vlo, lo), b.sel(spc, vhi, hi)
    na = b.ltu(F64_INF_HI, aa | b.ltu(0, al))
    nb = b.ltu(F64_INF_HI, ba | b.ltu(0, bl))
    nc = b.ltu(F64_INF_HI, ca | b.ltu(0, cl))
    nlo = b.sel(na, al, b.sel(nb, bl, cl))
    nhi = b.sel(na, ah, b.sel(nb, bh, ch))
    nn = na | nb | nc
    return b.sel(nn, nlo, lo), b.sel(nn, nhi, hi)


def fma64(em, a, b, c, rnd="rn"):
    """fma.rnd.f64 on (lo, hi) pairs: a*b+c rounded once."""
    mode = _check_mode(rnd, FROUND, "fma.f64")
    return _run64(em, lambda bl, a, bb, c: _fma64(bl, a, bb, c, mode), a, b, c)
