"""A small stand-in GPU for splicing: a word memory, an adder and a previous-token copy.

The real machine is built elsewhere; `splice` and its tests are generic over any `Compiled`
program, and use this one (exact on its own, every residual variable checkable) until the machine
drops in. Every token is both an input and a possible output: it writes `val` at slot `addr` when
`we`, reads the slot back, adds `val` to the word read, and the model emits the token whose
`sel` field equals the low bits of that sum.
"""
from __future__ import annotations

import random

from qwengpu.compiler import Program, gadgets, memory


def demo_program(slots: int = 8, width: int = 8, n_tokens: int = 48, seed: int = 0,
                 name: str = "standin", attention: bool = False, context: int = 4096) -> Program:
    """The stand-in program. Token texts are `<|gpu:k|>`; token k is emitted when the sum's low
    b bits equal k (2^b <= n_tokens). With `attention`, it also uses the compiler's attention
    gadgets: the value of the most recent writing token, and the value two tokens back (their
    margins hold over `context` tokens)."""
    rng = random.Random(seed)
    prog = Program(name)
    addr = prog.input_onehot("addr", slots)
    val = prog.input_bits("val", width)
    we = prog.input_bits("we", 1)
    sel_bits = max(1, min(width, (n_tokens.bit_length() - 1)))
    texts = []
    for k in range(n_tokens):
        low = k % (1 << sel_bits)
        v = (rng.randrange(1 << width) & ~((1 << sel_bits) - 1)) | low
        t = prog.token(f"<|gpu:{k}|>", addr=rng.randrange(slots), val=v, we=int(rng.random() < 0.6))
        texts.append(t.text)
    mem = memory.GDNMemory(prog, "ram", slots=slots, width=width)
    mem.write(addr, val, enable=we)
    word = mem.read(addr, name="word")
    total = gadgets.add(prog, word, val, name="sum")
    memory.previous(prog, val, 1, name="prev_val")
    if attention:
        from qwengpu.compiler import attention as att
        att.most_recent(prog, we, None, val, name="last_written", context=context)
        att.previous_token(prog, val, 2, name="val_back2", context=context)
    low = prog.slice(total, 0, sel_bits, name="sum_low")
    for k in range(1 << sel_bits):
        prog.emit_when(texts[k], [(low, k)])
    return prog


def demo_sequence(prog: Program, length: int, seed: int = 1) -> list[str]:
    """A random token sequence for `prog` (token texts)."""
    rng = random.Random(seed)
    return [rng.choice(prog.tokens).text for _ in range(length)]


def standin(target=None) -> Program:
    """`build`'s program hook form (target -> Program) of the stand-in."""
    return demo_program()
