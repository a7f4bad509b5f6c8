"""A tiny micro-op emitter used by lowering routines (soft-float and friends), and a straight-line
evaluator for testing them without the rest of the machine.

Routines written against `Emitter` use ALU micro-ops (`qwengpu.machine.uops.ALU_OPS`) and, on a
machine with a float unit, its micro-ops (`FPU_OPS`); they must be straight-line (use SEL instead of
branches).
"""
from __future__ import annotations

from qwengpu.machine.uops import ALU_OPS, M32, Imm, MicroOp, Src, VReg, alu, alu_eval, alu_eval_lanes, fpu, fpu_eval, fpu_eval_lanes, src


class Emitter:
    """Emits ALU micro-ops into a list; `alu()` returns the result as a source operand."""

    def __init__(self, new_reg, out: list, ptx_pc: int = -1):
        self.new_reg = new_reg          # () -> VReg
        self.out = out
        self.ptx_pc = ptx_pc

    def alu(self, op: str, a, b=None, c=None, cin: str = "0", sets_flag: bool = False) -> Src:
        if op not in ALU_OPS:
            raise ValueError(f"unknown ALU op {op}")
        r = self.new_reg()
        self.out.append(alu(op, r, a, b, c, cin=cin, sets_flag=sets_flag, ptx_pc=self.ptx_pc))
        return src(r)

    def fpu(self, op: str, a, b=None, c=None, **mods) -> Src:
        """A float-unit micro-op (`uops.fpu`: its modifiers rnd, ftz, sat, compare, nan, signed)."""
        def port_value(x):         # its ports read registers and immediates: copy anything else
            x = x if x is None or isinstance(x, Src) else src(x)
            if x is not None and not isinstance(x.value, Imm) and (x.inv or not isinstance(x.value, VReg)):
                return self.alu("MOV", x)
            return x
        r = self.new_reg()
        self.out.append(fpu(op, r, port_value(a), port_value(b), port_value(c), ptx_pc=self.ptx_pc, **mods))
        return src(r)

    def add64(self, a: tuple, b: tuple, sub: bool = False) -> tuple:
        """64-bit add (or a - b) of (lo, hi) pairs; the carry flag stays inside the pair."""
        lo = self.alu("ADD", a[0], src(b[0], sub), cin="1" if sub else "0", sets_flag=True)
        hi = self.alu("ADD", a[1], src(b[1], sub), cin="flag")
        return lo, hi


class Recorder:
    """An Emitter target for tests: numbered virtual registers, then `evaluate`."""

    def __init__(self):
        self.ops: list[MicroOp] = []
        self.n = 0

    def new_reg(self) -> VReg:
        self.n += 1
        return VReg(self.n)

    def emitter(self) -> Emitter:
        return Emitter(self.new_reg, self.ops)

    def input(self) -> Src:
        return src(self.new_reg())

    def evaluate(self, inputs: dict, result: Src) -> int:
        """Run the recorded ops on one lane: inputs {VReg: value}; returns `result`'s value."""
        env = dict(inputs)
        flag = 0

        def val(s):
            if s is None:
                return 0
            v = s.value
            x = v.value if isinstance(v, Imm) else env.get(v, 0)
            return (~x & M32) if s.inv else x & M32

        for op in self.ops:
            if op.kind == "fpu":
                env[op.dst[0]] = fpu_eval(op.op, op.extra, val(op.a), val(op.b), val(op.c))
                continue
            cin = {"0": 0, "1": 1}.get(op.cin, flag)
            r, f = alu_eval(op.op, val(op.a), val(op.b), val(op.c), cin)
            env[op.dst[0]] = r
            if op.sets_flag:
                flag = f
        return val(result)

    def evaluate_lanes(self, inputs: dict, results) -> list:
        """`evaluate` on many lanes at once (numpy uint64 arrays of 32-bit words, one element a
        lane): inputs {VReg: array}; returns the values of `results` (a sequence of Srcs). For
        checking routines on millions of operands; `evaluate` is the one-lane definition."""
        import numpy as np
        n = len(next(iter(inputs.values())))
        env = {k: np.asarray(v, dtype=np.uint64) & M32 for k, v in inputs.items()}
        flag = np.zeros(n, dtype=np.uint64)

        def val(s):
            if s is None:
                return np.zeros(n, dtype=np.uint64)
            v = s.value
            x = np.full(n, v.value, dtype=np.uint64) if isinstance(v, Imm) else env[v]
            return x ^ M32 if s.inv else x

        for op in self.ops:
            a, b, c = val(op.a), val(op.b), val(op.c)
            if op.kind == "fpu":
                env[op.dst[0]] = fpu_eval_lanes(op.op, op.extra, a, b, c)
                continue
            cin = {"0": np.uint64(0), "1": np.uint64(1)}.get(op.cin, flag)
            r, f = alu_eval_lanes(op.op, a, b, c, cin)
            env[op.dst[0]] = r
            if op.sets_flag:
                flag = f
        return [val(s) for s in results]


