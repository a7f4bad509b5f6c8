"""The machine's tokens, written and parsed in one place.

The simulator speaks tuples, the model's vocabulary is words; `token_text` and `parse_token` map
one to the other (and back: `parse_token(token_text(t)) == t`):

    ("GO",)                     <go>                  the launch starts (the prompt's last token)
    ("EXEC", pc, mask)          <exec 12 1011>        run bundle pc for the lanes in mask (lane 0 last)
    ("FPU", l)                  <fpu 2>               the float unit computes lane l of the last EXEC's
                                                      bundle (the EXEC pass computed its first lane)
    ("CARRY", j, byte, l, v)    <carry 0 1 all 3f>    byte of the register carry slot j writes, for
                                                      lane l or "all" lanes of the mask
    ("MEMW", l, byte, v)        <memw 2 0 ff>         a byte of lane l's store (or atomic)
    ("WARP", w) / ("BLOCK", b) / ("RELEASE", e)       <warp 1>, <block 3>, <release 5>
    ("HALT",)                   <halt>                the launch is over
    ("FAULT", kind, l)          <fault 1 2>           lane l faulted (`simulator.FAULT_KINDS[kind]`)
    ("AT", space, addr)         <at mem 3>            the prompt: where the next W tokens write
    ("W", byte, v)              <w 16 ff>             the prompt: one byte

`docs/machine.md` ("The token protocol") says what each does to the machine's state.
"""
from __future__ import annotations

#: the tokens a bundle's pass consumes: its EXEC, then the float unit's lanes, its carries, its
#: memory writes (`IN_PASS`: those after the EXEC); the pass ends with the control token
PASS_KINDS = ("EXEC", "FPU", "CARRY", "MEMW")
IN_PASS = ("FPU", "CARRY", "MEMW")


def token_text(tok: tuple) -> str:
    """The vocabulary word of a machine token."""
    kind = tok[0]
    if kind == "EXEC":
        return f"<exec {tok[1]} {tok[2]:04b}>"
    if kind == "CARRY":
        return f"<carry {tok[1]} {tok[2]} {tok[3]} {tok[4]:02x}>"
    if kind == "FPU":
        return f"<fpu {tok[1]}>"
    if kind == "MEMW":
        return f"<memw {tok[1]} {tok[2]} {tok[3]:02x}>"
    if kind in ("WARP", "BLOCK", "RELEASE"):
        return f"<{kind.lower()} {tok[1]}>"
    if kind == "HALT":
        return "<halt>"
    if kind == "GO":
        return "<go>"
    if kind == "FAULT":
        return f"<fault {tok[1]} {tok[2]}>"
    if kind == "AT":
        return f"<at {tok[1]} {tok[2]}>"
    if kind == "W":
        return f"<w {tok[1]} {tok[2]:02x}>"
    raise ValueError(f"not a machine token: {tok}")


def parse_token(text: str) -> tuple:
    """A machine token's word as the simulator's tuple (`<exec 2 1110>` -> ("EXEC", 2, 14))."""
    body = text.strip("<>").split()
    kind = body[0].upper()
    if kind == "EXEC":
        return ("EXEC", int(body[1]), int(body[2], 2))
    if kind == "CARRY":
        return ("CARRY", int(body[1]), int(body[2]), body[3] if body[3] == "all" else int(body[3]), int(body[4], 16))
    if kind == "MEMW":
        return ("MEMW", int(body[1]), int(body[2]), int(body[3], 16))
    if kind in ("WARP", "BLOCK", "RELEASE", "FPU"):
        return (kind, int(body[1]))
    if kind == "FAULT":
        return ("FAULT", int(body[1]), int(body[2]))
    if kind == "AT":
        return ("AT", body[1], int(body[2]))
    if kind == "W":
        return ("W", int(body[1]), int(body[2], 16))
    return (kind,)


def token_kind(text: str) -> str:
    """The kind of a machine token's word, as `parse_token` names it ("EXEC", "CARRY", "FAULT", ...)."""
    return text.strip("<>").split(maxsplit=1)[0].upper()


def ends_launch(text: str) -> bool:
    """Does this generated word end the launch (`<halt>` or a fault)?"""
    return text == "<halt>" or text.startswith("<fault")
