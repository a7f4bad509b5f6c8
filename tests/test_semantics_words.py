"""The ALU micro-ops' one definition (`qwengpu.semantics.words`), on numpy lanes and on one lane,
against a plain-Python transcription of each op (the scalar definition the machine had before the
two were merged), on edge words and random ones."""
import numpy as np
import pytest

from qwengpu.machine import uops
from qwengpu.semantics import words
from qwengpu.semantics.words import ALU_OPS, M32, alu_eval, alu_eval_lanes


def _s(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


#: op -> (a, b, c, cin) -> (result, carry), on Python ints
REFERENCE = {
    "MOV": lambda a, b, c, cin: (a, 0),
    "ADD": lambda a, b, c, cin: ((a + b + cin) & M32, (a + b + cin) >> 32),
    "AND": lambda a, b, c, cin: (a & b, 0),
    "OR": lambda a, b, c, cin: (a | b, 0),
    "XOR": lambda a, b, c, cin: (a ^ b, 0),
    "SHL": lambda a, b, c, cin: ((a << b) & M32 if b < 32 else 0, 0),
    "SHR": lambda a, b, c, cin: (a >> b if b < 32 else 0, 0),
    "SAR": lambda a, b, c, cin: ((_s(a) >> min(b, 31)) & M32, 0),
    "SEL": lambda a, b, c, cin: (a if c else b, 0),
    "EQ": lambda a, b, c, cin: (int(a == b), 0),
    "LTU": lambda a, b, c, cin: (int(a < b), 0),
    "LEU": lambda a, b, c, cin: (int(a <= b), 0),
    "LT": lambda a, b, c, cin: (int(_s(a) < _s(b)), 0),
    "LE": lambda a, b, c, cin: (int(_s(a) <= _s(b)), 0),
    "MUL": lambda a, b, c, cin: ((a * b) & M32, 0),
    "MULHU": lambda a, b, c, cin: ((a * b) >> 32, 0),
    "MULHS": lambda a, b, c, cin: (((_s(a) * _s(b)) >> 32) & M32, 0),
    "CLZ": lambda a, b, c, cin: (32 - a.bit_length(), 0),
    "POPC": lambda a, b, c, cin: (bin(a).count("1"), 0),
    "BREV": lambda a, b, c, cin: (int(format(a, "032b")[::-1], 2), 0),
}

EDGES = [0, 1, 2, 31, 32, 33, 63, 64, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, M32, 0x12345678, 0xDEADBEEF]


def _operands(n=400, seed=0):
    rng = np.random.default_rng(seed)
    grid = np.array(np.meshgrid(EDGES, EDGES, [0, 1, M32], [0, 1]), dtype=np.uint64).reshape(4, -1)
    rand = np.stack([rng.integers(0, 1 << 32, n, dtype=np.uint64), rng.integers(0, 1 << 32, n, dtype=np.uint64),
                     rng.integers(0, 1 << 32, n, dtype=np.uint64), rng.integers(0, 2, n, dtype=np.uint64)])
    small = rand.copy()
    small[1] %= 70                      # shift amounts around 32
    return np.concatenate([grid, rand, small], axis=1)


def test_every_alu_op_has_its_semantics_and_the_machine_uses_them():
    assert set(REFERENCE) == set(ALU_OPS)
    assert uops.ALU_OPS is ALU_OPS and uops.alu_eval is alu_eval and uops.alu_eval_lanes is alu_eval_lanes
    with pytest.raises(ValueError, match="unknown ALU op"):
        alu_eval("NOPE", 1, 2)


@pytest.mark.parametrize("op", sorted(ALU_OPS))
def test_lanes_and_one_lane_agree_with_the_reference(op):
    a, b, c, cin = _operands()
    cin = cin if op == "ADD" else np.zeros_like(cin)
    r, f = alu_eval_lanes(op, a, b, c, cin)
    want = [REFERENCE[op](int(x), int(y), int(z), int(k)) for x, y, z, k in zip(a, b, c, cin)]
    assert [int(x) for x in r] == [w[0] for w in want]
    assert [int(x) for x in f] == [w[1] for w in want]
    for i in range(0, len(a), 37):
        assert alu_eval(op, int(a[i]), int(b[i]), int(c[i]), int(cin[i])) == want[i]


def test_broadcasting_and_python_ints():
    """Python ints (masked to a word) broadcast against arrays, as the builders pass constants."""
    r, _ = alu_eval_lanes("ADD", np.array([1, 2, 3], dtype=np.uint64), -1)
    assert r.tolist() == [0, 1, 2]
    assert words.alu_eval("SHL", 1, 31) == (0x80000000, 0)
