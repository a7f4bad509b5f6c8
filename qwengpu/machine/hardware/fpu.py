"""The float unit (an FPU slot): f32 fused multiply-add in every rounding mode with .ftz and .sat
(add, sub and mul are FMAs with a fixed operand), compares, min and max, each in one pass.

It runs beside the other units: it reads the read ports of the first two ALU slots near the top of
the network and its result goes only to the carry buffer, so its 16 MLP levels cost width, not
layers. It has one datapath, not one per lane: the EXEC pass runs it for the first served lane and
an FPU token's pass for each further lane (`float_lane`), so the width is one lane's. The
datapath (docs/float_units.md has the argument for each step):

    L1   the operands from the read ports they are on, as clean bits, and per operand class flags
         (zero after .ftz, NaN, inf, exponent != 0); L2 the signs of the product and the addend
    L2-5 the 24x24 significand product in carry-save form (base-8 column sums, two carry-save
         rounds, digit bits); beside it the addend aligned to the product in a 77-bit window
         (a shift by the exponent difference in two stages, bits shifted out kept as a sticky bit
         at position 0; an addend far above the product puts the product in that sticky bit)
    L6-9 a 3:2 compressor, the window adder with both carries in (the sum, and the sum minus one,
         whose complement is the magnitude when the addend was larger), the magnitude selected
    L10-12 the result's lowest significand position q = max(lead - 23, subnormal floor) as codes
         read straight off the magnitude (no leading-zero count is held), the exponent K from q,
         the 24 significand bits and the round bit by a two-stage shift, the sticky bit
    L13-16 rounding (the increment's carries for rn/rp/rm), the exponent field (thermometer of
         the biased exponent, plus the significand's carry), overflow, then the cases (NaN, inf,
         largest finite, zero, .ftz flush, .sat clamp) and the result word.
The compare, min and max path (c2-c7) shares the cleaned operands; its word joins the result at L16."""
from __future__ import annotations

from dataclasses import dataclass

from qwengpu.compiler import Lin
from qwengpu.compiler.gadgets import form_bound, n_gated, n_linear, n_product, n_step

from ..config import ALU, FPU, LANES
from ..format import FPU_OPCODES, fpu_port_slots, sources_for
from ..image import PORTS
from ..uops import FPU_COMPARES, FPU_ROUNDINGS
from .builder import Builder, Unit
from .lanes import first_lane
from .multiplier import carry_save, digit_bits
from .regfile import ports_of
from .rom import segment

#: the alignment window: positions 0 (sticky) .. 76; the product's bits sit at 4..51
WINDOW = 77
P_AT = 4
#: the addend's placement u = exponent difference + 27 runs over 0..76 (76: at the top)
U_TOP = 76
#: the ops the circuits implement (the rest of `FPU_OPS` is soft-float on this machine)
CIRCUIT_OPS = ("FADD", "FSUB", "FMUL", "FFMA", "FSETP", "FMIN", "FMAX", "I2F")
#: I2F's operands as exponent fields: X's low 23 bits at 2^0 (field 149, hidden bit 0: X = lo23),
#: Z's high bits at 2^23 (field 172; Z's effective exponent adds 1 as an addend's does)
I2F_X_FIELD = 149
I2F_Z_FIELD = 172
NAN = 0x7FFFFFFF
INF = 0x7F800000
MAXF = 0x7F7FFFFF
ONE = 0x3F800000


@dataclass
class FpuControl:
    """The decoded bundle segment of the float unit: opcode, rounding and compare one-hots, flags."""
    op: object            # onehot var over FPU_OPCODES
    rnd: object           # onehot var over FPU_ROUNDINGS
    cmp: object           # onehot var over FPU_COMPARES
    ftz: Lin
    sat: Lin
    nan: Lin
    signed: Lin           # I2F's integer is s32 (else u32)

    def o(self, name: str) -> Lin:
        return self.op.f(FPU_OPCODES.index(name))

    def r(self, name: str) -> Lin:
        return self.rnd.f(FPU_ROUNDINGS.index(name))

    def c(self, name: str) -> Lin:
        return self.cmp.f(FPU_COMPARES.index(name))


def fpu(hw: Builder, k: int):
    """The float unit in slot k: its fields in the segment of the first ALU slot, its operands
    chosen among the read ports of the first two ALU slots (`format.fpu_port_slots`), a datapath
    per lane; returns its `Unit` (the caller puts it in `hw.units` at slot k)."""
    home = fpu_port_slots(hw.cfg)
    segname = f"s{home[0]}"
    seg = segment(hw, segname)
    lines = [ports_of(hw, j, PORTS[ALU])[p] for j in home for p in range(PORTS[ALU])]
    field = lambda n: hw.field_forms(seg, segname, f"f_{n}")[0]
    decode = lambda n, count: hw.decode_field(seg, segname, f"f_{n}", count, f"f{n}.{k}")
    # the one-bit modifiers copied out of the segment with the decoders, so that the segment's
    # word is not held through the datapath for the levels that read them
    mods = hw.bits(f"fmod.{k}", 3)
    hw.circ(f"fmod.{k}", [mods], [nr for i, n in enumerate(("ftz", "sat", "nan"))
                                   for nr in n_step(field(n), 1, {mods.feature(i): 1})])
    signed = hw.bits(f"fsigned.{k}", 1)  # its own variable: read at L1 only, so it dies there
    hw.circ(f"fsigned.{k}", [signed], n_step(field("signed"), 1, {signed.feature(0): 1}))
    ctl = FpuControl(op=decode("op", len(FPU_OPCODES)), rnd=decode("rnd", len(FPU_ROUNDINGS)),
                     cmp=decode("compare", len(FPU_COMPARES)), ftz=mods.f(0), sat=mods.f(1), nan=mods.f(2),
                     signed=signed.f(0))
    opts = sources_for(hw.cfg, k, "a")
    sel = {n: decode(n, len(opts)) for n in ("a", "b", "c")}
    fl = hw.fpu_lane = float_lane(hw)
    hw.fpu_slot = k
    choices = {n: [(sel[n].f(i) + fl.f(l) - 1, lines[i][l]) for i, o in enumerate(opts) if o[0] == "sport"
                   for l in range(LANES)] for n in sel}
    word = fpu_lane(hw, f"{k}.0", choices, ctl)
    unit = Unit(FPU, k)
    # the carry buffer takes the word into every lane's entry: the EXEC pass's is the first
    # served lane's, each FPU pass rewrites its own lane's entry (`carries.carry_buffer`)
    unit.lo = [word] * LANES
    unit.hi = [None] * LANES
    return unit


def float_lane(hw: Builder):
    """One-hot of the lane the unit's one datapath runs this pass: the first lane of an EXEC's
    mask, or an FPU token's lane (none on other passes)."""
    first = first_lane(hw)
    fl = hw.bits("fpu.lane", LANES)
    n = []
    for l in range(LANES):
        n += n_step(hw.k("EXEC") + first.f(l), 2, {fl.feature(l): 1})
        if l:
            n += n_step(hw.k("FPU") + hw.t_lane.f(l), 2, {fl.feature(l): 1})
    hw.circ("fpu.lane", [fl], n)
    return fl


class _Level:
    """One MLP level of a lane's datapath: its output variables and neurons."""

    def __init__(self, hw: Builder, name: str):
        self.hw, self.name, self.vars, self.neurons = hw, name, [], []

    def bits(self, tag: str, n: int):
        v = self.hw.bits(f"{self.name}.{tag}", n)
        self.vars.append(v)
        return v

    def number(self, tag: str, lo: int, hi: int):
        v = self.hw.p.number_var(f"{self.name}.{tag}", lo, hi)
        self.vars.append(v)
        return v

    def flag(self, tag: str):
        return self.bits(tag, 1)

    def step(self, form: Lin, t: float, out: dict, cond: Lin | None = None):
        """out * [form >= t] (when cond, a clean 0/1 form, is 1). The condition switches the step off
        by a shift just past the form's range: a larger one would scale the condition's fp32 noise
        into the threshold."""
        if cond is None:
            self.neurons += n_step(form, t, out)
        else:
            self.neurons += self.hw.gstep(form, t, cond, out, form_bound(self.hw.p, form) + abs(t) + 2)

    def all_of(self, literals: list, out: dict, extra: Lin | None = None):
        """out * [every literal (a clean 0/1 form) is 1, and extra >= 0] (extra: a small integer
        form, checked only when the literals hold)."""
        n = len(literals)
        form = sum(literals, Lin()) - n
        if extra is None:
            self.step(form, 0, out)
        else:
            self.step(8 * form + extra, 0, out)

    def gated(self, cond: Lin, value: Lin, out: dict):
        self.neurons += n_gated(cond, value, out)

    def done(self):
        """One circuit per group of outputs that share neurons: the compiler may then place each
        group late, next to its readers (a wide code read several levels on is made there)."""
        group = {v.name: i for i, v in enumerate(self.vars)}

        def find(i):
            while group[self.vars[i].name] != i:
                i = group[self.vars[i].name]
            return i
        for nr in self.neurons:
            roots = sorted({find(group[f[0]]) for f in nr.down})
            for r in roots[1:]:
                group[self.vars[r].name] = roots[0]
        parts: dict = {}
        for i, v in enumerate(self.vars):
            parts.setdefault(find(i), []).append(v)
        if len(parts) == 1:
            self.hw.circ(self.name, self.vars, self.neurons)
        else:
            self.hw.circ_groups(self.name, list(parts.values()), self.neurons)


def _value(bits: list) -> Lin:
    return sum(((1 << i) * b for i, b in enumerate(bits)), Lin())


def _parity_steps(lv: _Level, form: Lin, top: int, out_feature, cond: Lin):
    """out += parity of `form` (an integer in 0..top) when cond."""
    for t in range(1, top + 1):
        lv.step(form, t, {out_feature: 1 if t % 2 else -1}, cond)


def _carry_chunks(lv: _Level, terms: list, props: list, out: dict, cond: Lin | None = None):
    """out * [carry] from group digits (least significant first; 2 generates, 1 propagates, 0
    kills; `props` the propagate flags): the highest digit that is not 1 is 2. The digits are
    taken four at a time from the top: a chunk carries by itself, or every chunk above it
    propagates and it carries (exclusive steps; a form weighs a digit by at most 3^4 + veto)."""
    chunks = [list(range(i, min(i + 4, len(terms)))) for i in range(0, len(terms), 4)]
    for ci, chunk in enumerate(chunks):
        z = sum(((3 ** t) * terms[j] for t, j in enumerate(chunk)), Lin())
        thr = (3 ** len(chunk) + 1) / 2
        above = [j for later in chunks[ci + 1:] for j in later]
        veto = sum((props[j] for j in above), Lin()) - len(above)
        lv.step(z + (3 ** len(chunk) + 1) * veto, thr, out, cond)


class _Lane:
    """One lane's datapath (the module docstring's levels)."""

    def __init__(self, hw: Builder, tag: str, choices: dict, ctl: FpuControl):
        self.hw, self.tag, self.ctl, self.choices = hw, tag, ctl, choices
        o = ctl.o
        self.yb = o("FFMA") + o("FMUL") + o("FSETP") + o("FMIN") + o("FMAX")      # Y is b
        self.addsub = o("FADD") + o("FSUB")                                       # Y is 1.0, Z is +-b
        self.zc = o("FFMA")                                                       # Z is c
        self.zb = self.addsub
        self.zi = o("I2F")                                                        # X, Z: the integer's parts
        self.arith = o("FADD") + o("FSUB") + o("FMUL") + o("FFMA") + o("I2F")

    def level(self, n: int) -> _Level:
        return _Level(self.hw, f"fpu{n}.{self.tag}")

    # -- L1: clean operands, classes, signs --------------------------------------------------

    def clean(self):
        """L1: a, b, c from the read ports their selectors choose, as clean bits routed to the
        datapath's operands (X = a; Y = b for fma/mul/compares, else 1.0 below; Z = c for fma, +-b
        for add/sub), and each operand's class flags."""
        c, lv = self.ctl, self.level(1)
        X, Y, Z = lv.bits("x", 32), lv.bits("y", 32), lv.bits("z", 32)
        cls = lv.bits("cls", 12)           # per operand X, Y, Z: exponent != 0, exponent 255, NaN, zero
        ar = lv.flag("ar")                 # an arithmetic op (the cases at L15 read it: the op's
        lv.step(self.arith, 1, {ar.feature(0): 1})     # one-hot need not be held that long)
        routes = [("a", X, 0, 1 - self.zi), ("b", Y, 1, self.yb), ("b", Z, 2, self.zb), ("c", Z, 2, self.zc)]
        for name, var, n, cond in routes:
            for sel, P in self.choices[name]:
                on = sel if cond is None else sel + cond - 1
                for i in range(32):
                    lv.neurons += n_step(64 * on + P[i], 65, {var.feature(i): 1})
                e = sum(P[23:31], Lin())
                f = sum(P[0:23], Lin())
                lv.step(e, 1, {cls.feature(4 * n): 1}, on)
                lv.step(e, 8, {cls.feature(4 * n + 1): 1}, on)
                lv.step(24 * e + f, 193, {cls.feature(4 * n + 2): 1}, on)
                lv.step(23 * c.ftz - 24 * e - f, 0, {cls.feature(4 * n + 3): 1}, on)
        ng = _integer_routes(self, lv, X, Z, cls)
        lv.done()
        self.ng = ng.f(0)
        self.arith = ar.f(0)
        self.X = [X.f(i) for i in range(32)]
        self.Y = [Y.f(i) for i in range(32)]
        self.Z = [Z.f(i) for i in range(32)]
        f = lambda n, j: cls.f(4 * n + j)
        self.enz = [f(n, 0) for n in range(3)]
        self.nan = [f(n, 2) for n in range(3)]
        self.inf = [f(n, 1) - f(n, 2) for n in range(3)]
        # zero after .ftz; an absent addend (mul, compares) is zero too
        self.zf = [f(0, 3), f(1, 3), f(2, 3) + 1 - self.zb - self.zc - self.zi]
        # significands (hidden bit from the exponent; Y = 1.0 for add/sub and I2F) and effective exponents
        one = self.addsub + self.zi
        self.Xm = self.X[:23] + [self.enz[0]]
        self.Ym = self.Y[:23] + [self.enz[1] + one]
        self.Zm = self.Z[:23] + [self.enz[2]]
        self.Xe = _value(self.X[23:31]) + 1 - self.enz[0]
        self.Ye = _value(self.Y[23:31]) + 126 * one + 1 - self.enz[1]
        self.Ze = _value(self.Z[23:31]) + self.zb + self.zc + self.zi - self.enz[2]

    # -- L2-L5: the product (carry-save), the aligned addend ------------------------------------

    def product(self):
        """M1: base-8 column sums of the 24x24 product; M2-M4: carry-save to two bit vectors."""
        hw, k = self.hw, f"f{self.tag}"
        dig = lambda M, p: sum(((1 << i) * M[3 * p + i] for i in range(3)), Lin())
        cols = 16
        tmax = [0] * cols
        for p in range(8):
            for q in range(8):
                tmax[p + q] += 49
        tmax[7] += 4                       # I2F's + 1 at X's lowest bit (Y = 1.0: 2^23, digit 4 of column 7)
        T = [hw.p.number_var(f"fT.{self.tag}.{s}", 0, max(tmax[s], 1)) for s in range(cols)]
        n1 = n_linear(4 * self.ng, {T[7].feature(0): 1})
        for p in range(8):
            for q in range(8):
                n1 += n_product(dig(self.Xm, p), dig(self.Ym, q), {T[p + q].feature(0): 1})
        hw.circ(f"fpu2m.{self.tag}", T, n1)
        V, vmax = carry_save(hw, k, "", T, [max(t, 1) for t in tmax], tag="f")
        self.Px, self.Py = digit_bits(hw, k, "", V, vmax, nbits=48, tag="f")

    def align(self):
        """L2: the placement thermometer of u = the exponent difference + 27; L3: with a zero
        product the addend goes to the top, a zero (or absent) addend below the window; L4: the
        fine shift (by u mod 8) and the sticky bit of what falls below the window; L5: the coarse
        shift (by 8 (u div 8)), inverted for an effective subtraction."""
        lv = self.level(2)
        u = self.Ze - self.Xe - self.Ye + 177
        tu = lv.bits("tu", U_TOP + 2)
        for t in range(U_TOP + 2):
            lv.step(u, t, {tu.feature(t): 1})
        zlow = lv.bits("zlow", 24)
        for t in range(24):
            lv.step(sum(self.Zm[:t + 1], Lin()), 1, {zlow.feature(t): 1})
        fl = lv.bits("fl", 6)              # product zero, inv (inf*0), product inf; the signs: product, addend, subtraction
        lv.step(self.zf[0] + self.zf[1], 1, {fl.feature(0): 1})
        lv.step(self.inf[0] + self.zf[1], 2, {fl.feature(1): 1})
        lv.step(self.zf[0] + self.inf[1], 2, {fl.feature(1): 1})
        lv.step(self.inf[0] + self.inf[1], 1, {fl.feature(2): 1})
        X31, Y31, Z31, fsub = self.X[31], self.Y[31], self.Z[31], self.ctl.o("FSUB")
        _parity_steps(lv, X31 + Y31, 2, fl.feature(3), None)
        _parity_steps(lv, Z31 + fsub, 2, fl.feature(4), None)
        _parity_steps(lv, X31 + Y31 + Z31 + fsub, 4, fl.feature(5), self.zb + self.zc + self.zi)
        lv.done()
        self.pz, self.invmul, self.pinf, self.sp, self.sz, self.esub = (fl.f(i) for i in range(6))
        # L3: the placement used; inf - inf; the sign of an exact zero
        lv = self.level(3)
        th = lv.bits("th", U_TOP + 2)
        for t in range(U_TOP + 2):
            lv.step(tu.f(t) + self.pz - 2 * self.zf[2], 1, {th.feature(t): 1})
        fl3 = lv.bits("fl", 2)
        lv.step(self.inf[0] + self.inf[1] + 2 * self.inf[2] + 2 * self.esub, 5, {fl3.feature(0): 1})
        lv.gated(1 - self.esub, self.sp, {fl3.feature(1): 1})
        lv.gated(self.esub, self.ctl.r("rm"), {fl3.feature(1): 1})
        lv.done()
        self.infsub, self.zsign = fl3.f(0), fl3.f(1)
        th = [th.f(t) for t in range(U_TOP + 2)]
        oh = [th[v] - th[v + 1] for v in range(U_TOP)] + [th[U_TOP]]
        self.above = th[U_TOP + 1]
        # L4: the fine shift, the sticky bits, the exponent of window position 0
        lv = self.level(4)
        ZA = lv.bits("za", 31)
        for r in range(8):
            fine = sum((oh[v] for v in range(r, U_TOP + 1, 8)), Lin())
            for i in range(24):
                lv.gated(fine, self.Zm[i], {ZA.feature(i + r): 1})
        fl4 = lv.bits("fl", 4)             # addend sticky, product sticky, product in the window, NaN result
        lv.gated(1 - th[0] - self.zf[2], Lin.const(1), {fl4.feature(0): 1})
        for v in range(24):
            lv.gated(oh[v], zlow.f(23 - v), {fl4.feature(0): 1})
        lv.step(self.above - self.pz, 1, {fl4.feature(1): 1})
        lv.step(-1 * self.above - self.pz, 0, {fl4.feature(2): 1})
        lv.step(self.nan[0] + self.nan[1] + self.nan[2] + self.invmul + self.infsub, 1, {fl4.feature(3): 1})
        e0 = lv.number("e0", -120, 420)    # the biased exponent of window position 0, + 203
        lv.gated(1 - self.above, self.Xe + self.Ye - 101, {e0.feature(0): 1})
        lv.gated(self.above, self.Ze, {e0.feature(0): 1})
        lv.done()
        self.stz, self.pst, self.plive, self.nan_out = fl4.f(0), fl4.f(1), fl4.f(2), fl4.f(3)
        self.e0 = e0.f(0)
        # L5: the coarse shift; the window's addend bits (inverted for a subtraction)
        lv = self.level(5)
        zw = lv.bits("zw", WINDOW)
        es = self.esub
        for w in range(WINDOW):            # a subtraction's window starts all ones (~0) ...
            lv.gated(es, Lin.const(1), {zw.feature(w): 1})
        lv.gated(1 - es, self.stz, {zw.feature(0): 1})        # ... and the addend's bits flip it
        lv.gated(es, self.stz, {zw.feature(0): -1})
        for c in range(10):
            coarse = sum((oh[v] for v in range(8 * c, min(8 * c + 8, U_TOP + 1))), Lin())
            for w in range(1, WINDOW):
                j = w + 23 - 8 * c
                if 0 <= j < 31:
                    lv.gated(coarse - es, ZA.f(j), {zw.feature(w): 1})
                    lv.gated(coarse + es - 1, ZA.f(j), {zw.feature(w): -1})
        fl5 = lv.bits("fl", 2)             # special inf, its sign
        lv.step(self.pinf + self.inf[2] - 2 * self.nan_out, 1, {fl5.feature(0): 1})
        lv.step(self.pinf + self.sp, 2, {fl5.feature(1): 1})
        lv.step(self.sz - self.pinf, 1, {fl5.feature(1): 1})
        lv.done()
        self.Zw = [zw.f(w) for w in range(WINDOW)]
        self.inf_out, self.inf_sign = fl5.f(0), fl5.f(1)

    # -- L6-L9: the sum and its magnitude ----------------------------------------------------------

    def add(self):
        lv = self.level(6)
        S = lv.bits("s", WINDOW)
        Cy = lv.bits("c", WINDOW + 1)
        plive = self.plive
        s_forms = [None] * WINDOW
        for w in range(WINDOW):
            z = self.Zw[w]
            if P_AT <= w < P_AT + 48:
                t = self.Px.f(w - P_AT) + self.Py.f(w - P_AT) + z + 3 * plive
                lv.step(t, 4, {S.feature(w): 1})
                lv.step(t, 5, {S.feature(w): -1, Cy.feature(w + 1): 1})
                lv.step(t, 6, {S.feature(w): 1})
                lv.gated(1 - plive, z, {S.feature(w): 1})
                s_forms[w] = S.f(w)
            elif w == 0:
                t = self.pst + z
                lv.step(t, 1, {S.feature(0): 1})
                lv.step(t, 2, {S.feature(0): -1, Cy.feature(1): 1})
                s_forms[w] = S.f(0)
            else:
                s_forms[w] = z
        lv.done()
        c_forms = [Lin()] + [Cy.f(w) for w in range(1, WINDOW)]
        # L7: byte-group digits of S + Cy
        lv = self.level(7)
        dig = lv.bits("d", 2 * WINDOW)
        for kk in range(1, WINDOW + 1):
            lo = 8 * ((kk - 1) // 8)
            j = kk - lo
            sm = sum(((1 << (m - lo)) * (s_forms[m] + c_forms[m]) for m in range(lo, kk)), Lin())
            lv.step(sm, 1 << j, {dig.feature(2 * (kk - 1)): 1})
            lv.step(sm, (1 << j) - 1, {dig.feature(2 * (kk - 1) + 1): 1})
        lv.done()
        D = lambda x: dig.f(2 * (x - 1)) + dig.f(2 * (x - 1) + 1)
        Pr = lambda x: dig.f(2 * (x - 1) + 1) - dig.f(2 * (x - 1))
        # L8: the sums with carry in 0 (s2) and 1 (s1); ge: the carry out of s1 (P >= Z)
        lv = self.level(8)
        s1, s2 = lv.bits("s1", WINDOW), lv.bits("s2", WINDOW + 1)
        ge = lv.flag("ge")
        for w in range(WINDOW):
            lv.neurons += n_linear(s_forms[w] + c_forms[w], {s1.feature(w): 1, s2.feature(w): 1})
        lv.neurons += n_linear(Lin.const(1), {s1.feature(0): 1})
        for kk in range(1, WINDOW + 1):
            q = (kk - 1) // 8
            for cin, sv in ((0, s2), (1, s1)):
                terms = [Lin.const(2 * cin)] + [D(8 * (b + 1)) for b in range(q)] + [D(kk)]
                props = [Lin.const(0)] + [Pr(8 * (b + 1)) for b in range(q)] + [Pr(kk)]
                out = {sv.feature(kk - 1): -2}
                if kk < WINDOW:
                    out[sv.feature(kk)] = 1
                elif cin == 0:
                    out[s2.feature(WINDOW)] = 1
                else:
                    out[ge.feature(0)] = 1
                _carry_chunks(lv, terms, props, out)
        lv.done()
        # L9: the magnitude (clean bits) and the sign of a non-zero result; thresholds of e0
        lv = self.level(9)
        M = lv.bits("m", WINDOW + 1)
        es, g = self.esub, ge.f(0)
        for w in range(WINDOW + 1):
            self_add = s2.f(w)
            lv.neurons += self.hw.clean_gate(1 - es, self_add, {M.feature(w): 1})
            if w < WINDOW:
                lv.neurons += self.hw.clean_gate(es + g - 1, s1.f(w), {M.feature(w): 1})
                lv.neurons += self.hw.clean_gate(es - g, 1 - s2.f(w), {M.feature(w): 1})
        rs = lv.flag("rs")
        lv.gated(1 - es, self.sp, {rs.feature(0): 1})
        lv.step(self.sp + g, 2, {rs.feature(0): 1}, es)
        lv.step(-1 * (self.sp + g), 0, {rs.feature(0): 1}, es)
        te = lv.bits("te", 104)            # te[t + 24] = [e0 >= t]: thresholds on a form of hundreds,
        for t in range(-24, 80):           # taken once each, so that q's codes below add clean steps
            lv.step(self.e0, t, {te.feature(t + 24): 1})
        lv.done()
        self.M = [M.f(w) for w in range(WINDOW + 1)]
        self.rs = rs.f(0)
        self.te = te

    # -- L10-L12: normalisation --------------------------------------------------------------------

    def normalise(self):
        n = WINDOW + 1                     # 78 magnitude bits
        M, te = self.M, self.te
        # L10: q = 54 - min(lzc, e0), clamped to -24..79, as s = q + 24 = 8c + r: one-hots of c and r
        # (each threshold [q >= v] adds to the two codes it moves); lo; whether the magnitude is zero
        lv = self.level(10)
        qc, qr = lv.bits("qc", 13), lv.bits("qr", 8)
        lv.neurons += n_linear(Lin.const(1), {qc.feature(0): 1, qr.feature(0): 1})       # [q >= -24]
        for v in range(-23, 80):
            s_ = v + 24
            out = {qr.feature(s_ % 8): 1, qr.feature((s_ - 1) % 8): -1}
            if s_ % 8 == 0:
                out.update({qc.feature(s_ // 8): 1, qc.feature(s_ // 8 - 1): -1})
            # [q >= v]: lzc <= 54 - v (one of the top 55 - v bits is set), or e0 <= 54 - v
            top = sum(M[n - (55 - v):], Lin()) if 55 - v > 0 else Lin()
            lv.step(top + (1 - te.f(55 - v + 24)), 1, out)
        lo = lv.bits("lo", n)              # lo[t]: some bit 0..t is set
        for t in range(n):
            lv.step(sum(M[:t + 1], Lin()), 1, {lo.feature(t): 1})
        mz = lv.flag("mz")                 # the magnitude is zero
        lv.step(-1 * sum(M, Lin()), 0, {mz.feature(0): 1})
        lv.done()
        self.mz = mz.f(0)
        # L11: K = max(e0 - lzc, 0) = e0 - 54 + q (q's top clamp only where e0 < -25: K = 0) as bits
        # (capped at 254) and [K >= 1], [K >= 255]; the coarse shift by 8c; the sticky bit's
        # candidates lo[8c - 26 + r], one per r
        lv = self.level(11)
        kb = lv.bits("k", 10)
        kf = self.e0 - 78 + sum((8 * c * qc.f(c) for c in range(1, 13)), Lin()) + sum((r * qr.f(r) for r in range(1, 8)), Lin())
        for t in range(1, 256):
            out = {kb.feature(i): ((t >> i) & 1) - (((t - 1) >> i) & 1) for i in range(8)
                   if t < 255 and ((t >> i) & 1) != (((t - 1) >> i) & 1)}
            if t == 1:
                out[kb.feature(8)] = 1
            if t == 255:
                out[kb.feature(9)] = 1
            lv.step(kf, t, out)
        T = lv.bits("t", 32)
        lc = lv.bits("lc", 8)
        for c in range(13):
            for i in range(32):
                j = 8 * c - 25 + i
                if 0 <= j < n:
                    lv.gated(qc.f(c), M[j], {T.feature(i): 1})
            for r in range(8):
                j = 8 * c + r - 26
                if j >= 0:
                    lv.gated(qc.f(c), lo.f(min(j, n - 1)), {lc.feature(r): 1})
        lv.done()
        self.kbits, self.kge1 = [kb.f(i) for i in range(8)], kb.f(8)
        self.kform = _value(self.kbits) + 255 * kb.f(9)     # = K where the thresholds (>= 127) look
        # L12: fine shift by r: R[0] is the round bit, R[1..24] the significand; the sticky bit
        lv = self.level(12)
        R = lv.bits("r", 25)
        st = lv.flag("st")
        for r in range(8):
            for j in range(25):
                if r + j < 32:
                    lv.gated(qr.f(r), T.f(r + j), {R.feature(j): 1})
            lv.gated(qr.f(r), lc.f(r), {st.feature(0): 1})
        lv.done()
        self.rb, self.st = R.f(0), st.f(0)
        self.m = [R.f(j + 1) for j in range(24)]

    # -- L13-L16: rounding, exponent, cases, the word ------------------------------------------------

    def finish(self):
        c = self.ctl
        lv = self.level(13)
        car = lv.bits("car", 25)           # car[j]: the increment carries into significand bit j
        rb, st, m, rs = self.rb, self.st, self.m, self.rs
        for j in range(25):
            ones = sum(m[:j], Lin()) - j
            lv.step(2 * rb + st + m[0] - 3 + 5 * ones, 0, {car.feature(j): 1}, c.r("rn"))
            lv.step(rb + st - 2 * rs - 1 + 3 * ones, 0, {car.feature(j): 1}, c.r("rp"))
            lv.step(rb + st + 2 * rs - 3 + 4 * ones, 0, {car.feature(j): 1}, c.r("rm"))
        lv.done()
        mr = [m[j] + car.f(j) - 2 * car.f(j + 1) for j in range(23)]
        h = m[23] + car.f(23)                              # the significand's carry into the exponent
        h_bits = [m[23] + car.f(23) - 2 * car.f(24), car.f(24)]
        # L14: the exponent field F = K + h, overflow, the flags the cases need
        lv = self.level(14)
        kap = lv.bits("kap", 9)
        kb = self.kbits
        for i in range(1, 9):              # the carry into bit i: h's bits below i plus K's
            h_low = h_bits[0] if i == 1 else h
            lv.step(h_low + sum(((1 << j) * kb[j] for j in range(i)), Lin()), 1 << i, {kap.feature(i): 1})
        fl = lv.bits("fl", 6)              # overflow, to infinity, F >= 128, F >= 127, fraction != 0, ftz flush
        lv.step(self.kform + h, 255, {fl.feature(0): 1})
        lv.neurons += n_linear(c.r("rn"), {fl.feature(1): 1})
        lv.step(1 - rs, 1, {fl.feature(1): 1}, c.r("rp"))
        lv.step(rs, 1, {fl.feature(1): 1}, c.r("rm"))
        lv.step(self.kform + h, 128, {fl.feature(2): 1})
        lv.step(self.kform + h, 127, {fl.feature(3): 1})
        lv.step(sum(mr, Lin()), 1, {fl.feature(4): 1})
        lv.step(c.ftz - self.kge1 - h, 1, {fl.feature(5): 1})
        lv.done()
        kp = [Lin()] + [kap.f(i) for i in range(1, 9)]
        F = [kb[i] + (h_bits[i] if i < 2 else Lin()) + kp[i] - 2 * kp[i + 1] for i in range(8)]
        ovf, to_inf, f128, f127, fnz, flush = (fl.f(i) for i in range(6))
        big = 2 * f128 + f127 + fnz - 2                    # >= 0: the result is above 1.0
        # L15: the cases of an arithmetic result (exclusive flags)
        lv = self.level(15)
        g = lv.bits("g", 6)                # finite, NaN, inf, largest finite, one, sign
        N, I, Z = self.nan_out, self.inf_out, self.mz
        ar, sat = self.arith, c.sat
        fin = [ar, 1 - N, 1 - I, 1 - Z, 1 - ovf, 1 - flush]
        lv.all_of(fin + [1 - sat], {g.feature(0): 1})
        lv.all_of(fin + [sat, 1 - rs], {g.feature(0): 1}, extra=-1 - big)
        lv.all_of([ar, N, 1 - sat], {g.feature(1): 1})
        lv.all_of([ar, 1 - N, I, 1 - sat], {g.feature(2): 1})
        lv.all_of([ar, 1 - N, 1 - I, 1 - Z, ovf, to_inf, 1 - sat], {g.feature(2): 1})
        lv.all_of([ar, 1 - N, 1 - I, 1 - Z, ovf, 1 - to_inf, 1 - sat], {g.feature(3): 1})
        lv.all_of([ar, sat, 1 - N, I, 1 - self.inf_sign], {g.feature(4): 1})
        lv.all_of([ar, sat, 1 - N, 1 - I, 1 - Z, ovf, 1 - rs], {g.feature(4): 1})
        lv.all_of(fin + [sat, 1 - rs], {g.feature(4): 1}, extra=big)
        lv.all_of([ar, 1 - sat, 1 - N, I, self.inf_sign], {g.feature(5): 1})
        lv.all_of([ar, 1 - sat, 1 - N, 1 - I, Z, self.zsign], {g.feature(5): 1})
        lv.all_of([ar, 1 - sat, 1 - N, 1 - I, 1 - Z, rs], {g.feature(5): 1})
        lv.done()
        self.g, self.finite = g, [mr[i] if i < 23 else F[i - 23] for i in range(31)]

    def word(self, other: list):
        """L16: the result word: the finite result's bits, the constant cases, and `other` (the
        compare / min / max path's word, zero for arithmetic) folded in, so that one 32-bit word is
        all the datapath holds until the carry buffer takes it."""
        g = self.g
        lv = self.level(16)
        w = lv.bits("w", 32)
        consts = {g.f(1): NAN, g.f(2): INF, g.f(3): MAXF, g.f(4): ONE}
        for i in range(32):
            if i < 31:
                lv.gated(g.f(0), self.finite[i], {w.feature(i): 1})
            f = other[i] + (g.f(5) if i == 31 else Lin())
            for flag, value in consts.items():
                if (value >> i) & 1:
                    f = f + flag
            lv.neurons += n_linear(f, {w.feature(i): 1})
        lv.done()
        return [w.f(i) for i in range(32)]


# -- I2F's routes, and the compares, min and max: functions of a lane's cleaned operands ---------

def _integer_routes(ln: _Lane, lv: _Level, X, Z, cls):
    """I2F's routes at L1: the integer n as an FMA X * 1.0 + Z of two exact parts, so that the
    datapath rounds it once like any sum. Non-negative n: X = n's bits 0..22 (at 2^0), Z = its
    bits 23..31 (at 2^23). Negative n (s32): |n| = ~n + 1, so X and Z take ~n's bits, both signs
    are negative, and the + 1 enters the product's column of X's lowest bit (`ng`, read at L2).
    X's and Z's exponent fields are constants (`I2F_X_FIELD`, `I2F_Z_FIELD`); their class
    flags are all 0 but zero."""
    sg, zi = ln.ctl.signed, ln.zi
    ng = lv.flag("ng")
    for i in range(8):                 # the constant exponent fields
        if (I2F_X_FIELD >> i) & 1:
            lv.step(zi, 1, {X.feature(23 + i): 1})
        if (I2F_Z_FIELD >> i) & 1:
            lv.step(zi, 1, {Z.feature(23 + i): 1})
    for sel, P in ln.choices["a"]:
        on = sel + zi - 1
        n31 = P[31]
        for var, lo, hi in ((X, 0, 23), (Z, 23, 31)):
            for i in range(lo, hi):    # n's bit, complemented for a negative s32
                lv.neurons += n_step(64 * on + 2 * P[i] - sg - n31, 65, {var.feature(i - lo): 1})
                lv.neurons += n_step(64 * on + sg + n31 - P[i], 66, {var.feature(i - lo): 1})
        lv.neurons += n_step(64 * on + n31 - sg, 65, {Z.feature(8): 1})          # u32's bit 31
        lv.neurons += n_step(64 * on + sg + n31, 66, {X.feature(31): 1, ng.feature(0): 1})
        lv.neurons += n_step(64 * on + sg + n31, 66, {Z.feature(31): 1})
        low, high = sum(P[0:23], Lin()), sum(P[23:31], Lin())
        lv.step(1 - 2 * low - sg - n31, 0, {cls.feature(3): 1}, on)              # X = 0: no + 1 either
        lv.neurons += n_step(64 * on + 16 * sg + 16 * n31 + high, 104, {cls.feature(11): 1})   # ~n's high part 0
        lv.neurons += n_step(64 * on - 16 * n31 - high, 64, {cls.feature(11): 1})  # n's high part 0
    return ng


def _compare_path(ln: _Lane) -> list:
    """L2: |a| vs |b| digits; L3: >= and > (carry outs); L4: magnitudes after .ftz; L5: the
    orders; L6: the compare's result and min/max's choice; L7: min/max's word."""
    c = ln.ctl
    X, Y = ln.X, ln.Y
    lv = ln.level("c2")
    dig = lv.bits("d", 8)
    groups = [(0, 8), (8, 16), (16, 24), (24, 31)]
    for gi, (a, b) in enumerate(groups):
        s_ = sum(((1 << (m - a)) * (X[m] + 1 - Y[m]) for m in range(a, b)), Lin())
        lv.step(s_, 1 << (b - a), {dig.feature(2 * gi): 1})
        lv.step(s_, (1 << (b - a)) - 1, {dig.feature(2 * gi + 1): 1})
    sgn = lv.bits("s", 2)              # signs of non-zero (after .ftz) a and b
    lv.step(X[31] - ln.zf[0], 1, {sgn.feature(0): 1})
    lv.step(Y[31] - ln.zf[1], 1, {sgn.feature(1): 1})
    un = lv.flag("un")
    lv.step(ln.nan[0] + ln.nan[1], 1, {un.feature(0): 1})
    lv.done()
    D = [dig.f(2 * i) + dig.f(2 * i + 1) for i in range(4)]
    P = [dig.f(2 * i + 1) - dig.f(2 * i) for i in range(4)]
    lv = ln.level("c3")
    cmp3 = lv.bits("g", 2)             # |a| >= |b|, |a| > |b|
    _carry_chunks(lv, [Lin.const(2)] + D, [Lin()] + P, {cmp3.feature(0): 1})
    _carry_chunks(lv, [Lin()] + D, [Lin()] + P, {cmp3.feature(1): 1})
    lv.done()
    ge_ab, gt_ab = cmp3.f(0), cmp3.f(1)
    za, zb = ln.zf[0], ln.zf[1]
    lv = ln.level("c4")
    mg = lv.bits("m", 2)               # |a| < |b|, |a| > |b| (a flushed operand is 0)
    lv.step(za - zb, 1, {mg.feature(0): 1})
    lv.step(-1 * za - zb - ge_ab, 0, {mg.feature(0): 1})
    lv.step(zb - za, 1, {mg.feature(1): 1})
    lv.step(-1 * za - zb + gt_ab, 1, {mg.feature(1): 1})
    lv.done()
    ltm, gtm = mg.f(0), mg.f(1)
    sa_, sb_ = sgn.f(0), sgn.f(1)
    sa, sb = X[31], Y[31]
    lv = ln.level("c5")
    od = lv.bits("o", 3)               # a < b, a > b (numbers), min/max picks a
    for (x, y, lt, gt, f_) in ((sa_, sb_, ltm, gtm, 0), (sb_, sa_, gtm, ltm, 1)):
        lv.step(x - y, 1, {od.feature(f_): 1})
        lv.step(-1 * x - y + lt, 1, {od.feature(f_): 1})
        lv.step(x + y + gt, 3, {od.feature(f_): 1})
    for (op, lt, gt) in (("FMIN", ltm, gtm), ("FMAX", gtm, ltm)):
        first, second = (sa, sb) if op == "FMIN" else (sb, sa)
        lv.step(first - second, 1, {od.feature(2): 1}, c.o(op))
        lv.step(-1 * sa - sb + lt, 1, {od.feature(2): 1}, c.o(op))
        lv.step(sa + sb + gt, 3, {od.feature(2): 1}, c.o(op))
    lv.done()
    lt, gt = od.f(0), od.f(1)
    eq = 1 - lt - gt
    u = un.f(0)
    lv = ln.level("c6")
    res = lv.bits("r", 4)              # compare true, min/max: a, b, canonical NaN
    forms = {"eq": (eq - u, 1), "ne": (lt + gt - u, 1), "lt": (lt - u, 1), "le": (1 - gt - u, 1),
             "gt": (gt - u, 1), "ge": (1 - lt - u, 1), "equ": (eq + u, 1), "neu": (lt + gt + u, 1),
             "ltu": (lt + u, 1), "leu": (1 - gt + u, 1), "gtu": (gt + u, 1), "geu": (1 - lt + u, 1),
             "num": (1 - u, 1), "nan": (u, 1)}
    for name, (form, t) in forms.items():
        lv.step(form, t, {res.feature(0): 1}, c.c(name) + c.o("FSETP") - 1)
    mm = c.o("FMIN") + c.o("FMAX")
    an, bn, pa, nf = ln.nan[0], ln.nan[1], od.f(2), c.nan
    lv.all_of([mm, 1 - an, 1 - bn, pa], {res.feature(1): 1})
    lv.all_of([mm, 1 - an, bn, 1 - nf], {res.feature(1): 1})
    lv.all_of([mm, 1 - an, 1 - bn, 1 - pa], {res.feature(2): 1})
    lv.all_of([mm, an, 1 - bn, 1 - nf], {res.feature(2): 1})
    lv.all_of([mm, an, bn], {res.feature(3): 1})
    lv.all_of([mm, nf, an, 1 - bn], {res.feature(3): 1})
    lv.all_of([mm, nf, 1 - an, bn], {res.feature(3): 1})
    lv.done()
    sel_a, sel_b, sel_n = res.f(1), res.f(2), res.f(3)
    lv = ln.level("c7")
    mw = lv.bits("w", 32)
    for i in range(32):
        lv.gated(sel_a - (za if i < 31 else 0), X[i], {mw.feature(i): 1})
        lv.gated(sel_b - (zb if i < 31 else 0), Y[i], {mw.feature(i): 1})
    lv.done()
    word = []
    for i in range(32):
        f = mw.f(i) + ((NAN >> i) & 1) * sel_n
        if i == 0:
            f = f + res.f(0)
        word.append(f)
    return word


def fpu_lane(hw: Builder, tag: str, choices: dict, ctl: FpuControl):
    """One lane of the float unit: `choices` gives each operand ("a", "b", "c") as a list of
    (selector, 32 bit forms of a read port): the selected port is the operand, none selected
    reads zero. Returns the result word (a view: 32 bit forms)."""
    ln = _Lane(hw, tag, choices, ctl)
    ln.clean()
    ln.product()
    ln.align()
    ln.add()
    ln.normalise()
    ln.finish()
    return hw.view(f"fpu.{tag}", ln.word(_compare_path(ln)))
