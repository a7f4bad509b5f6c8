"""What one ALU micro-op computes on 32-bit words: the one definition of the machine's integer
micro-ops (`ALU_OPS`, in opcode order, re-exported by `machine.uops`: the circuits implement exactly
this, the simulator and the assembler's folding run it), and the language the approximate instructions'
fixed-point programs are written in (`approx`: the interpreter runs them through it too).

It is written on numpy arrays of words (uint64 holding values below 2^32, one element a lane),
because the approximate definitions and the routine checks run it on many lanes at once;
`alu_eval` is the same function on one lane.
"""
from __future__ import annotations

import numpy as np

M32 = 0xFFFFFFFF
_M32 = np.uint64(M32)

#: ALU micro-ops: name -> number of sources (a, b, c), in opcode order (the bundle word encodes an
#: ALU op by its place here: `machine.format.ALU_OPCODES`); `alu_eval_lanes` below is their semantics
ALU_OPS = {
    "MOV": 1,
    "ADD": 2,       # a + b + cin (cin: 0, 1 or the carry flag of the previous unit)
    "AND": 2, "OR": 2, "XOR": 2,
    "SHL": 2, "SHR": 2, "SAR": 2,       # shift a by b (amounts >= 32: 0 / sign)
    "SEL": 3,       # c != 0 ? a : b
    "EQ": 2, "LTU": 2, "LEU": 2,        # 1 if a == b / a < b / a <= b (unsigned) else 0
    "LT": 2, "LE": 2,                   # signed
    "MUL": 2,       # (a * b) mod 2^32
    "MULHU": 2, "MULHS": 2,             # high 32 bits of the 64-bit product
    "CLZ": 1, "POPC": 1, "BREV": 1,
}


def _signed(a):
    """The words as signed 32-bit integers (int64)."""
    return a.astype(np.int64) - ((a >> np.uint64(31)) << np.uint64(32)).astype(np.int64)


def _bit(cond):
    return cond.astype(np.uint64)


def _shift_amount(b):
    return np.minimum(b, np.uint64(31))


def _clz(a):
    n = np.zeros(a.shape, dtype=np.uint64)
    x = a.copy()
    for k in (16, 8, 4, 2, 1):
        top = (x >> np.uint64(32 - k)) == 0
        n = np.where(top, n + np.uint64(k), n)
        x = np.where(top, (x << np.uint64(k)) & _M32, x)
    return np.where(a == 0, np.uint64(32), n)


def _popc(a):
    x = a - ((a >> np.uint64(1)) & np.uint64(0x55555555))
    x = (x & np.uint64(0x33333333)) + ((x >> np.uint64(2)) & np.uint64(0x33333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F)
    return ((x * np.uint64(0x01010101)) & _M32) >> np.uint64(24)


def _brev(a):
    x = a
    for shift, mask in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF), (16, 0x0000FFFF)):
        s, m = np.uint64(shift), np.uint64(mask)
        x = ((x >> s) & m) | ((x & m) << s)
    return x & _M32


#: op -> its result on words a, b, c (every op but ADD, whose carry `alu_eval_lanes` adds)
_RESULTS = {
    "MOV": lambda a, b, c: a,
    "AND": lambda a, b, c: a & b,
    "OR": lambda a, b, c: a | b,
    "XOR": lambda a, b, c: a ^ b,
    "SHL": lambda a, b, c: np.where(b < 32, (a << _shift_amount(b)) & _M32, np.uint64(0)),      # amounts >= 32: 0
    "SHR": lambda a, b, c: np.where(b < 32, a >> _shift_amount(b), np.uint64(0)),
    "SAR": lambda a, b, c: (_signed(a) >> _shift_amount(b).astype(np.int64)).astype(np.uint64) & _M32,
    "SEL": lambda a, b, c: np.where(c != 0, a, b),
    "EQ": lambda a, b, c: _bit(a == b),
    "LTU": lambda a, b, c: _bit(a < b),
    "LEU": lambda a, b, c: _bit(a <= b),
    "LT": lambda a, b, c: _bit(_signed(a) < _signed(b)),
    "LE": lambda a, b, c: _bit(_signed(a) <= _signed(b)),
    "MUL": lambda a, b, c: (a * b) & _M32,                 # a * b < 2^64: exact in uint64
    "MULHU": lambda a, b, c: (a * b) >> np.uint64(32),
    "MULHS": lambda a, b, c: ((_signed(a) * _signed(b)) >> 32).astype(np.uint64) & _M32,    # |a b| <= 2^62
    "CLZ": lambda a, b, c: _clz(a),
    "POPC": lambda a, b, c: _popc(a),
    "BREV": lambda a, b, c: _brev(a),
}

def _words(x):
    """x as uint64 words (a Python int masked to 32 bits first)."""
    if isinstance(x, int):
        x &= M32
    elif isinstance(x, np.ndarray) and x.dtype == np.uint64:
        return x & _M32
    return np.asarray(x, dtype=np.uint64) & _M32


def alu_eval_lanes(op: str, a, b=0, c=0, cin=0):
    """(results, carry flags) of an ALU micro-op on arrays of words (ints broadcast): ADD is
    a + b + cin (cin 0 or 1 per lane), its carry the 33rd bit; every other op's carry is 0."""
    a, b, c, cin = _words(a), _words(b), _words(c), _words(cin)
    if op == "ADD":
        t = a + b + cin
        return t & _M32, t >> np.uint64(32)
    fn = _RESULTS.get(op)
    if fn is None:
        raise ValueError(f"unknown ALU op {op}")
    shape = a.shape if a.shape == b.shape == c.shape == cin.shape else np.broadcast_shapes(a.shape, b.shape, c.shape,
                                                                                           cin.shape)
    r = np.asarray(fn(a, b, c), dtype=np.uint64)
    return (r if r.shape == shape else np.broadcast_to(r, shape)), np.zeros(shape, dtype=np.uint64)


def alu_eval(op: str, a: int, b: int = 0, c: int = 0, cin: int = 0) -> tuple[int, int]:
    """(result, carry flag) of an ALU micro-op on one lane's 32-bit words: `alu_eval_lanes`."""
    r, f = alu_eval_lanes(op, np.uint64(a & M32), np.uint64(b & M32), np.uint64(c & M32), np.uint64(cin))
    return int(r), int(f)
