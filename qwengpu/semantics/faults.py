"""What a fault of a launch is, the same on every engine (the interpreter, the simulator, the model):
its kind, the message, and where it happened (kernel, pc, lane, address, line)."""
from __future__ import annotations


#: what a launch's fault is (`ExecutionFault.kind`), the same on every engine: a memory access
#: out of bounds (`read`, `write`, `atomic`), a `misaligned` access, a `barrier` executed by only
#: some live lanes of a warp, a call `stack` overflow, a `brx.idx` index past its table (`branch`),
#: a `trap`/`brkpt`
FAULT_KINDS = ("read", "write", "misaligned", "atomic", "barrier", "stack", "branch", "trap")


class ExecutionFault(RuntimeError):
    """A fault inside a launch. The message names kernel, pc, lane and address where relevant;
    `kind` (one of `FAULT_KINDS`, None for errors that are not faults of the program, such as a
    step limit) says what it is."""

    def __init__(self, message: str, *, kernel: str | None = None, pc: int | None = None,
                 line: int | None = None, text: str | None = None, lane: int | None = None,
                 address: int | None = None, block: int | None = None, warp: int | None = None,
                 kind: str | None = None):
        self.kernel, self.pc, self.line, self.lane, self.address = kernel, pc, line, lane, address
        self.block, self.warp, self.text = block, warp, text
        self.kind = kind
        self.reason = message
        super().__init__(message)

    def locate(self, **where) -> "ExecutionFault":
        for k, v in where.items():
            if getattr(self, k, None) is None:
                setattr(self, k, v)
        parts = [f"kernel {self.kernel}" if self.kernel else None,
                 f"block {self.block}" if self.block is not None else None,
                 f"warp {self.warp}" if self.warp is not None else None,
                 f"lane {self.lane}" if self.lane is not None else None,
                 f"pc {self.pc}" if self.pc is not None else None,
                 f"line {self.line}" if self.line is not None else None]
        where_s = ", ".join(p for p in parts if p)
        msg = f"{self.reason} ({where_s})"
        if self.text:
            msg += f"\n    {self.text.strip()}"
        self.args = (msg,)
        return self


class MemoryFault(ExecutionFault):
    pass
