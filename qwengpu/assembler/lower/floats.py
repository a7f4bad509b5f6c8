"""Floating point: every float instruction as a `softfloat` routine (f32, f64, f16 conversions),
including the conversions softfloat does not have, composed from its routines (`convert`)."""
from __future__ import annotations

from qwengpu.machine.uops import Src, VReg

from .. import softfloat as sf
from ..softfloat import approx as sf_approx
from ..softfloat import unit as sf_unit
from .core import AssemblerError, type_bits


class FloatOps:
    """The `op_*` / `float_*` methods of a `Lowerer` for these instructions. On a machine with a
    float unit (`fpu`), f32 arithmetic, compares, min/max and the int/f32 conversions are its
    micro-ops, and f32 div, rcp, sqrt (and rsqrt.approx, their composition) are sequences on it
    (`softfloat.unit`) when it has FFMA and FMUL; everything else stays soft-float
    (docs/float_units.md lists which)."""

    fpu = frozenset()          # the machine's float-unit micro-ops

    def floats(self, ctx, ins, t: str, *idx) -> list:
        """Operands `idx` of `ins` read as float type t: (lo, hi) pairs for f64, else a word."""
        out = []
        for k in idx:
            lo, hi = self.value(ctx, ins.operands[k], t, ins)
            out.append((lo, hi) if t == "f64" else lo)
        return out

    @staticmethod
    def soft(ins, fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except sf.SoftFloatError as e:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine ({e})", ins) from None

    @staticmethod
    def f64_plain(ins, info):
        """f64 takes neither .ftz nor .sat (PTX; the interpreter refuses them too)."""
        if info.type == "f64" and (info.ftz or info.sat):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (.ftz/.sat on .f64 "
                                 "is not PTX)", ins)
        if info.type not in ("f32", "f64"):
            raise AssemblerError(f"`{ins.opcode}` (floating point) is not supported by the machine", ins)

    def float_add(self, ctx, ins, info):
        """add/sub/mul/div.{rnd}{.ftz}{.sat}.{f32,f64} (no modifier: .rn); add/sub/mul on halves."""
        t = info.type
        if t in HALVES:
            fn = {"add": sf.add16, "sub": sf.sub16, "mul": sf.mul16}[ins.op]
            self.halves(ctx, ins, 2, fn, ftz=info.ftz, sat=info.sat)
            return
        self.f64_plain(ins, info)
        a, b = self.floats(ctx, ins, t, 1, 2)
        if t == "f32" and FPU_ARITH.get(ins.op) in self.fpu:
            self.put(ctx, ins, t, self.em(ctx).fpu(FPU_ARITH[ins.op], a, b, rnd=info.rnd or "rn", ftz=info.ftz,
                                                   sat=info.sat))
            return
        fn = FARITH[(ins.op, t == "f64")]
        kw = {} if t == "f64" else {"ftz": info.ftz} if ins.op == "div" else {"ftz": info.ftz, "sat": info.sat}
        if ins.op == "div" and info.sat:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (div takes no .sat)", ins)
        if ins.op == "div" and t == "f32" and sf_unit.has_sequences(self.fpu):
            if self.share_routines:            # short of ROM: one shared copy of the whole division
                self.put(ctx, ins, t, self.routine(ctx, ins, sf_unit.div, (a, b), (info.rnd or "rn",), ftz=info.ftz))
                return
            fast = self.unit_fast_divisor(ctx, ins, b, info.ftz, info.rnd or "rn")      # `FastDivisionOps`
            if fast is not None:
                self.unit_fast_division(ctx, ins, a, b, fast, info.rnd or "rn", info.ftz)
                return
            parts = self.unit_divisor(ctx, ins, b, info.ftz)
            self.put(ctx, ins, t, self.routine(ctx, ins, sf_unit.quotient, (a, b) + parts, (info.rnd or "rn",),
                                               ftz=info.ftz))
            return
        self.put(ctx, ins, t, self.routine(ctx, ins, fn, (a, b), (info.rnd or "rn",), **kw))

    float_sub = float_mul = float_div = float_add

    def unit_divisor(self, ctx, ins, c: Src, ftz: bool) -> tuple:
        """`softfloat.unit.divisor(c)`, computed once per block for the divisions by one operand
        while its register is not written again: `x / b` repeated pays for b's reciprocal once."""
        blk = self.cur
        cache = getattr(self, "_divisors", None)
        if cache is None or cache[0] is not blk:
            cache = self._divisors = (blk, {})
        hit = cache[1].get((c, ftz))
        if hit is not None:
            parts, start = hit
            if not (isinstance(c.value, VReg) and any(c.value in op.writes() for op in blk.ops[start:])):
                return parts
        parts = self.soft(ins, sf_unit.divisor, self.em(ctx), c, ftz=ftz)    # inline: three results
        cache[1][(c, ftz)] = (parts, len(blk.ops))
        return parts

    def float_fma(self, ctx, ins, info):
        """fma/mad.rnd{.ftz}{.sat}.{f32,f64} (mad.f64 without a rounding: .rn, as interpreted)."""
        t = info.type
        if t in HALVES:
            self.halves(ctx, ins, 3, sf.fma16, ftz=info.ftz, sat=info.sat)
            return
        self.f64_plain(ins, info)
        a, b, c = self.floats(ctx, ins, t, 1, 2, 3)
        rnd = info.rnd or "rn"
        if t == "f32" and "FFMA" in self.fpu:
            self.put(ctx, ins, t, self.em(ctx).fpu("FFMA", a, b, c, rnd=rnd, ftz=info.ftz, sat=info.sat))
            return
        r = self.routine(ctx, ins, sf.fma64, (a, b, c), (rnd,)) if t == "f64" else \
            self.routine(ctx, ins, sf.fma, (a, b, c), (rnd,), ftz=info.ftz, sat=info.sat)
        self.put(ctx, ins, t, r)

    float_mad = float_fma

    def halves(self, ctx, ins, n: int, fn, cheap: bool = False, **kw):
        """An .f16 or .f16x2 instruction with `n` sources: fn(em, *f16 words, **kw) (`softfloat.f16`)
        on the one half, or on each of the two (each half alone, as PTX defines .f16x2); a routine
        that is not `cheap` may be shared (`routine`)."""
        words = [self.value(ctx, ins.operands[k], "b32", ins)[0] for k in range(1, n + 1)]

        def half(shift):
            em = self.em(ctx)                   # a shared routine's call ends the block: a new emitter
            xs = tuple(em.alu("AND", em.alu("SHR", w, shift) if shift else w, 0xFFFF) for w in words)
            return self.soft(ins, fn, em, *xs, **kw) if cheap else self.routine(ctx, ins, fn, xs, **kw)

        t = ins.info.type
        if t == "f16":
            self.put(ctx, ins, t, half(0))
            return
        lo, hi = half(0), half(16)
        em = self.em(ctx)
        self.put(ctx, ins, t, em.alu("OR", lo, em.alu("SHL", hi, 16)))

    def float_rcp(self, ctx, ins, info):
        """rcp.rnd{.ftz}.{f32,f64}, sqrt.rnd{.ftz}.{f32,f64}."""
        t = info.type
        self.f64_plain(ins, info)
        if info.sat:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine ({ins.op} takes no .sat)", ins)
        a, = self.floats(ctx, ins, t, 1)
        em, rnd = self.em(ctx), info.rnd or "rn"
        if info.mode == "approx64":                       # rcp.approx.ftz.f64 (`softfloat.approx`)
            self.put(ctx, ins, t, self.soft(ins, sf_approx.rcp_f64, em, a))
            return
        if t == "f64":
            r = self.routine(ctx, ins, sf.rcp64 if ins.op == "rcp" else sf.sqrt64, (a,), (rnd,))
        else:
            lib = sf_unit if sf_unit.has_sequences(self.fpu) else sf
            r = self.routine(ctx, ins, lib.rcp if ins.op == "rcp" else lib.sqrt, (a,), (rnd,), ftz=info.ftz)
        self.put(ctx, ins, t, r)

    float_sqrt = float_rcp

    def op_ex2(self, ctx, ins, info):
        """ex2/lg2/sin/cos/tanh/rsqrt .approx{.ftz}.f32: `qwengpu.semantics.approx`'s definitions
        (`softfloat.approx`), the interpreter's bits by construction."""
        if info.type == "f64" and ins.op == "rsqrt":
            a, = self.floats(ctx, ins, "f64", 1)
            self.put(ctx, ins, "f64", self.soft(ins, sf_approx.rsqrt_f64, self.em(ctx), a))
            return
        if info.type != "f32":
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (only .f32)", ins)
        a, = self.floats(ctx, ins, "f32", 1)
        if ins.op == "rsqrt" and sf_unit.has_sequences(self.fpu):
            # rsqrt.approx is rcp.rn(sqrt.rn(x)) (`semantics.approx.rsqrt_f32`): both on the unit
            root = self.routine(ctx, ins, sf_unit.sqrt, (a,), ("rn",), ftz=info.ftz)
            self.put(ctx, ins, "f32", self.routine(ctx, ins, sf_unit.rcp, (root,), ("rn",), ftz=info.ftz))
            return
        self.put(ctx, ins, "f32", self.soft(ins, sf_approx.approximate, self.em(ctx), ins.op, a, info.ftz))

    op_lg2 = op_sin = op_cos = op_tanh = op_rsqrt = op_ex2

    def float_min(self, ctx, ins, info):
        """min/max{.ftz}{.NaN}.{f32,f64}."""
        t = info.type
        nan = "NaN" in info.flags
        if t in HALVES:
            self.halves(ctx, ins, 2, sf.min16 if ins.op == "min" else sf.max16, ftz=info.ftz, nan=nan)
            return
        self.f64_plain(ins, info)
        a, b = self.floats(ctx, ins, t, 1, 2)
        em = self.em(ctx)
        if t == "f64":
            if nan:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (.NaN on .f64 is "
                                     "not PTX)", ins)
            r = self.soft(ins, sf.min64 if ins.op == "min" else sf.max64, em, a, b)
        elif ("FMIN" if ins.op == "min" else "FMAX") in self.fpu:
            r = em.fpu("FMIN" if ins.op == "min" else "FMAX", a, b, ftz=info.ftz, nan=nan)
        else:
            r = self.soft(ins, sf.min if ins.op == "min" else sf.max, em, a, b, ftz=info.ftz, nan=nan)
        self.put(ctx, ins, t, r)

    float_max = float_min

    def float_abs(self, ctx, ins, info):
        """abs/neg{.ftz}.{f32,f64} (an f32 NaN gives the canonical NaN, an f64 NaN passes)."""
        t = info.type
        if t in HALVES:
            self.halves(ctx, ins, 1, sf.abs16 if ins.op == "abs" else sf.neg16, cheap=True, ftz=info.ftz)
            return
        self.f64_plain(ins, info)
        a, = self.floats(ctx, ins, t, 1)
        em = self.em(ctx)
        if t == "f64":
            r = self.soft(ins, sf.abs64 if ins.op == "abs" else sf.neg64, em, a)
        else:
            r = self.soft(ins, sf.abs if ins.op == "abs" else sf.neg, em, a, ftz=info.ftz)
        self.put(ctx, ins, t, r)

    float_neg = float_abs

    def float_copysign(self, ctx, ins, info):
        """copysign.{f32,f64} d, a, b: the sign of a, the rest of b."""
        t = info.type
        self.f64_plain(ins, info)
        a, b = self.floats(ctx, ins, t, 1, 2)
        self.put(ctx, ins, t, self.soft(ins, sf.copysign64 if t == "f64" else sf.copysign, self.em(ctx), a, b))

    def float_testp(self, ctx, ins, info):
        """testp.mode.{f32,f64} -> a predicate."""
        t = info.type
        self.f64_plain(ins, info)
        a, = self.floats(ctx, ins, t, 1)
        r = self.soft(ins, sf.testp64 if t == "f64" else sf.testp, self.em(ctx), info.mode, a)
        self.write(ctx, ins.operands[0], r, None, "pred", ins)

    def float_compare(self, ctx, ins, cmp: str, t: str, a_op, b_op, ftz: bool) -> Src:
        """setp/set/slct comparison of two floats -> a 0/1 word."""
        if t == "f16":
            em = self.em(ctx)
            a, b = (em.alu("AND", self.value(ctx, o, "b16", ins)[0], 0xFFFF) for o in (a_op, b_op))
            return self.soft(ins, sf.compare16, em, cmp, a, b, ftz=ftz)
        if t not in ("f32", "f64"):
            raise AssemblerError(f"`{ins.opcode}` (floating point) is not supported by the machine", ins)
        if t == "f64" and ftz:
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (.ftz on .f64 is not PTX)", ins)
        em = self.em(ctx)
        if t == "f64":
            a, b = self.value(ctx, a_op, t, ins), self.value(ctx, b_op, t, ins)
            return self.soft(ins, sf.compare64, em, cmp, a, b)
        a, b = self.value(ctx, a_op, t, ins)[0], self.value(ctx, b_op, t, ins)[0]
        if "FSETP" in self.fpu:
            return em.fpu("FSETP", a, b, compare=cmp, ftz=ftz)
        return self.soft(ins, sf.compare, em, cmp, a, b, ftz=ftz)

    def float_cvt(self, ctx, ins, info):
        """cvt between floats and integers and between float widths: the soft-float routines, and
        what the interpreter also does through them (`convert`); other forms are refused."""
        dt, st = info.type, info.src_type
        dw = type_bits(dt)
        lo, hi = self.value(ctx, ins.operands[1], st, ins)
        parts = (lo, hi) if type_bits(st) == 64 else (lo,)
        if info.ftz and "f32" not in (dt, st):
            raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (.ftz needs an .f32 side)", ins)
        out = self.convert(ctx, ins, parts, dt, st, info.rnd, info.sat, info.ftz)
        if dw == 64:
            self.write(ctx, ins.operands[0], out[0], out[1], dt, ins)
            return
        x = out[0]
        if dw < 32 and dt[0] == "s":
            x = self._narrow(x, dw, True, ctx)            # the routine zero-extends
        self.write(ctx, ins.operands[0], x, None, dt, ins, signed_ext=dt[0] == "s")

    def convert(self, ctx, ins, parts: tuple, dt: str, st: str, rnd, sat: bool, ftz: bool) -> tuple:
        """The conversion of `parts` (a word, or a (lo, hi) pair) from st to dt. Beyond what
        `softfloat.cvt` implements:
        * f16 sources go through f32 (exact), except that an f16 NaN widened to f64 keeps its
          sign and payload (as the interpreter's);
        * f16 results from f64 round to odd in f32 first (truncate, then set the last bit if
          anything was lost): f32 has 24 bits, at least two more than f16's 11, so rounding that
          once more to f16 in any mode is exact (Boldo & Melquiond). Integers go through f32
          truncated: one that f32 does not hold exactly (|x| >= 2^24) is far beyond f16's range;
        * .sat on an f64 result clamps the f64 value ([+0, 1], NaN and negatives to +0)."""
        def soft(p, d, s_, r=None, sat_=False, ftz_=False):
            return self.soft(ins, sf.cvt, self.em(ctx), p, d, s_, rnd=r, sat=sat_, ftz=ftz_)

        if dt == st and rnd is None and not ftz and not sat:
            return parts                                   # cvt.f64.f64 (.f32, .f16) with no modifier
        unit = self.fpu_convert(ctx, parts, dt, st, rnd, sat, ftz)
        if unit is not None:
            return unit
        if dt[0] in "usb" and sat:
            sat = False                                    # float -> integer clamps anyway
        if dt == "f64" and sat:
            return self.sat64(ctx, self.convert(ctx, ins, parts, dt, st, rnd, False, ftz))
        if st == "f16" and dt not in ("f32", "f16"):
            if dt == "f64" and rnd is not None or dt != "f64" and rnd not in sf.IROUND:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (rounding modifier)", ins)
            x32 = soft(parts, "f32", "f16")
            out = soft(x32, dt, "f32", rnd)
            if dt == "f64":                                # an f16 NaN keeps its sign and payload
                em, x = self.em(ctx), parts[0]
                nan = em.alu("LTU", 0x7C00, em.alu("AND", x, 0x7FFF))
                nan_hi = em.alu("OR", em.alu("OR", em.alu("SHL", em.alu("AND", x, 0x3FF), 10), 0x7FF00000),
                                em.alu("SHL", em.alu("AND", x, 0x8000), 16))
                out = (em.alu("SEL", 0, out[0], nan), em.alu("SEL", nan_hi, out[1], nan))
            return out
        if dt == "f16" and st == "f16":
            if rnd is None and sat:                        # .sat alone: clamp through f32 (exact)
                return soft(soft(parts, "f32", "f16", sat_=True), "f16", "f32", "rn")
            if rnd not in sf.IROUND:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (rounding modifier)", ins)
            x32 = soft(soft(parts, "f32", "f16"), "f32", "f32", rnd)     # integral f16 values fit f16
            return soft(x32, "f16", "f32", "rn", sat)
        if dt == "f16" and st != "f32":
            if rnd not in sf.FROUND:
                raise AssemblerError(f"`{ins.opcode}` is not supported by the machine (rounding modifier)", ins)
            y = soft(parts, "f32", st, "rz")
            if st == "f64":
                back = soft(y, "f64", "f32")
                em = self.em(ctx)
                lost = em.alu("OR", em.alu("XOR", back[0], parts[0]), em.alu("XOR", back[1], parts[1]))
                y = (em.alu("OR", y[0], em.alu("LTU", 0, lost)),)
            return soft(y, "f16", "f32", rnd, sat)
        return soft(parts, dt, st, rnd, sat, ftz)

    def fpu_convert(self, ctx, parts: tuple, dt: str, st: str, rnd, sat: bool, ftz: bool) -> tuple | None:
        """The float unit's conversions: f32 <- s32/u32 (I2F), s32/u32 <- f32 (F2I, which clamps:
        PTX's float -> integer saturates anyway), f32 <- f32 rounded to an integer (FRND); None
        for every other conversion (soft-float)."""
        if not self.fpu:
            return None
        em = self.em(ctx)
        if dt == "f32" and st in ("s32", "u32") and rnd in sf.FROUND and "I2F" in self.fpu:
            return (em.fpu("I2F", parts[0], rnd=rnd, ftz=ftz, sat=sat, signed=st == "s32"),)
        if st == "f32" and dt in ("s32", "u32") and rnd in sf.IROUND and "F2I" in self.fpu:
            return (em.fpu("F2I", parts[0], rnd=rnd, ftz=ftz, signed=dt == "s32"),)
        if st == dt == "f32" and rnd in sf.IROUND and "FRND" in self.fpu:
            return (em.fpu("FRND", parts[0], rnd=rnd, ftz=ftz, sat=sat),)
        return None

    def sat64(self, ctx, x: tuple) -> tuple:
        """.sat on an f64 value: NaN and negative values (-0 too) give +0, values above 1 give 1."""
        em = self.em(ctx)
        lo, hi = x
        ah = em.alu("AND", hi, 0x7FFFFFFF)
        above1 = em.alu("OR", em.alu("LTU", 0x3FF00000, hi), em.alu("AND", em.alu("EQ", hi, 0x3FF00000),
                                                                    em.alu("LTU", 0, lo)))
        nan = em.alu("OR", em.alu("LTU", 0x7FF00000, ah), em.alu("AND", em.alu("EQ", ah, 0x7FF00000),
                                                                em.alu("LTU", 0, lo)))
        zero = em.alu("OR", em.alu("SHR", hi, 31), nan)
        lo = em.alu("SEL", 0, em.alu("SEL", 0, lo, above1), zero)
        hi = em.alu("SEL", 0, em.alu("SEL", 0x3FF00000, hi, above1), zero)
        return lo, hi


HALVES = ("f16", "f16x2")


#: the float unit's micro-op of each f32 arithmetic instruction
FPU_ARITH = {"add": "FADD", "sub": "FSUB", "mul": "FMUL"}

#: soft-float arithmetic by (PTX op, f64?)
FARITH = {("add", False): sf.add, ("sub", False): sf.sub, ("mul", False): sf.mul,
           ("add", True): sf.add64, ("sub", True): sf.sub64, ("mul", True): sf.mul64,
           ("div", False): sf.div, ("div", True): sf.div64}
