"""How the interpreter reads and writes a warp's operands, lane by lane: registers (raw bits masked to
the instruction's type), special registers, symbols' addresses, generic addresses resolved through
the windows to a memory, loads, stores and parameter space. `Interpreter` has these methods; the
handlers (`arithmetic`, `memory_ops`, `warp_ops`) call them.
"""
from __future__ import annotations

from qwengpu.ptx.ir import Addr, Imm, Neg, Reg, Special, Sym
from qwengpu.semantics import integers as alu
from qwengpu.semantics.faults import ExecutionFault, MemoryFault
from qwengpu.semantics.floats import float_bits
from qwengpu.semantics.launch_model import FULL, GENERIC_WINDOWS, LANES, LOCAL_BYTES, WINDOW_SIZE

from .lanes import is_signed, type_bits
from .memory import check_alignment
from .warps import Frame, Warp


class OperandAccess:
    """The operand and memory access methods of `Interpreter` (its state: `spec`, `prog`, `gmem`,
    `const`, `warps`, `ctaid`, the shared memory of the running block)."""

    def _special(self, warp: Warp, name: str) -> list[int]:
        base, _, comp = name.partition(".")
        idx = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        if name == "WARP_SZ":
            return [LANES] * LANES
        if base == "%tid":
            return [t[idx] for t in warp.tids]
        if base == "%ntid":
            return [self.spec.block[idx]] * LANES
        if base == "%ctaid":
            return [self.ctaid[idx]] * LANES
        if base == "%nctaid":
            return [self.spec.grid[idx]] * LANES
        if base == "%laneid":
            return list(range(LANES))
        if base == "%warpid":
            return [warp.index] * LANES
        if base == "%nwarpid":
            return [len(self.warps)] * LANES
        if base.startswith("%lanemask_"):
            kind = base[len("%lanemask_"):]
            f = {"eq": lambda i: 1 << i, "lt": lambda i: (1 << i) - 1, "le": lambda i: (1 << (i + 1)) - 1,
                 "gt": lambda i: FULL & ~((1 << (i + 1)) - 1), "ge": lambda i: FULL & ~((1 << i) - 1)}[kind]
            return [f(i) for i in range(LANES)]
        if base in ("%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
            return [self.steps] * LANES
        if base in ("%smid", "%gridid"):
            return [0] * LANES
        if base == "%nsmid":
            return [1] * LANES
        if base == "%dynamic_smem_size":
            return [self.spec.shared_bytes] * LANES
        if base in ("%total_smem_size", "%aggr_smem_size"):
            return [self.dyn_shared_base + self.spec.shared_bytes] * LANES
        raise ExecutionFault(f"unsupported special register {name}")

    def read(self, warp: Warp, frame: Frame, o, t: str) -> list[int]:
        """Source operand -> raw bits per lane, masked to the width of type `t`."""
        w = type_bits(t)
        m = alu.mask(w)
        if isinstance(o, Reg):
            v = frame.regs.get(o.name)
            return [x & m for x in v] if v is not None else [0] * LANES
        if isinstance(o, Imm):
            if o.bits is not None:
                if t in ("f32", "f64", "f16") and o.width != w:
                    # a float literal of the other width: convert exactly as PTX does (by value)
                    return [float_bits(o.value, w)] * LANES
                return [o.bits & m] * LANES
            if isinstance(o.value, float) or (t in ("f32", "f64", "f16") and not isinstance(o.value, int)):
                return [float_bits(float(o.value), w)] * LANES
            if t in ("f32", "f64", "f16"):
                return [float_bits(float(o.value), w)] * LANES
            return [o.value & m] * LANES
        if isinstance(o, Special):
            return [x & m for x in self._special(warp, o.name)]
        if isinstance(o, Neg):
            v = self.read(warp, frame, o.reg, "pred")
            return [1 - (x & 1) for x in v]
        if isinstance(o, Sym):
            return [a & m for a in self._symbol_address(frame, o.name)]
        if isinstance(o, Addr) and isinstance(o.base, Sym):
            return [(a + o.offset) & m for a in self._symbol_address(frame, o.base.name)]
        raise ExecutionFault(f"unsupported operand {o}")

    def _symbol_address(self, frame: Frame, name: str) -> list[int]:
        """The address a symbol denotes in its own state space (what `mov` gives)."""
        if name in self.layout.var_addresses:
            return [self.layout.var_addresses[name]] * LANES
        if name in self.prog.shared_offsets:
            return [self.prog.shared_offsets[name]] * LANES
        if name in self.prog.dynamic_shared:
            return [self.dyn_shared_base] * LANES
        if name in self.prog.const_offsets:
            return [self.prog.const_offsets[name]] * LANES
        offs = self.prog.local_offsets.get(frame.fn.name, {})
        if name in offs:
            return [frame.local_base + offs[name]] * LANES
        raise ExecutionFault(f"taking the address of {name} is not supported")

    def write_reg(self, frame: Frame, o, values: list[int], mask: int, t: str):
        if o is None:
            return
        if not isinstance(o, Reg):
            raise ExecutionFault(f"destination {o} is not a register")
        rt = frame.fn.regs.get(o.name, t)
        if rt == "pred" or t == "pred":
            vals = [v & 1 for v in values]
        else:
            w, rw = type_bits(t), type_bits(rt)
            vals = [alu.extend(v, w, rw, is_signed(t)) if rw > w else v & alu.mask(rw) for v in values]
        old = frame.regs.get(o.name)
        if old is None:
            old = [0] * LANES
        new = [vals[i] if mask >> i & 1 else old[i] for i in range(LANES)]
        frame.regs[o.name] = new
        if self._step is not None:
            self._step.reg_writes[o.name] = list(new)
            self._step.reg_write_mask |= mask

    # -- memory --------------------------------------------------------------------------------------

    def _resolve(self, space: str | None, addr: int, lane: int):
        """(memory object, space name, offset) for an address in `space` (None = generic)."""
        if space is None:
            for sp, base in GENERIC_WINDOWS.items():
                if base <= addr < base + WINDOW_SIZE:
                    return self._resolve(sp, addr - base, lane)
            space = "global"
        if space == "global":
            return self.gmem, "global", addr
        if space == "shared":
            return self.shared, "shared", addr
        if space == "local":
            # the thread's local memory is its live frames (the kernel's depot, each callee's above
            # it, each padded to 16 bytes): an access beyond the innermost frame faults
            frame = self.warp.frames[-1]
            mem = self.warp.locals[lane]
            mem.limit = min(LOCAL_BYTES, frame.local_base + self.prog.local_size.get(frame.fn.name, 0))
            return mem, "local", addr
        if space == "const":
            return self.const, "const", addr
        raise ExecutionFault(f"unsupported state space {space}")

    def addresses(self, frame: Frame, a: Addr, lanes: int) -> list[int]:
        if a.base is None:
            base = [0] * LANES
        elif isinstance(a.base, Reg):
            base = frame.regs.get(a.base.name, [0] * LANES)
        else:
            base = self._symbol_address(frame, a.base.name)
        return [(b + a.offset) & 0xFFFFFFFFFFFFFFFF for b in base]

    def mem_read(self, space, addr, size, lane):
        mem, sp, off = self._resolve(space, addr, lane)
        check_alignment(off if sp != "global" else addr, size, sp)
        try:
            return mem.read(off, size)
        except MemoryFault as e:
            raise e.locate(lane=lane)

    def mem_write(self, space, addr, size, value, lane):
        mem, sp, off = self._resolve(space, addr, lane)
        if sp == "const":
            raise MemoryFault(f"write to const memory at 0x{addr:x}", address=addr, kind="write")
        check_alignment(off if sp != "global" else addr, size, sp)
        try:
            mem.write(off, size, value)
        except MemoryFault as e:
            raise e.locate(lane=lane)
        if self._step is not None:
            self._step.mem_writes.append((sp, off, size, lane, value & alu.mask(8 * size)))

    def param_var(self, frame: Frame, name: str, size_hint: int):
        store = frame.params.get(name)
        if store is None:
            var = frame.fn.vars.get(name)
            size = var.size if var is not None and var.size else size_hint
            for p in list(frame.fn.params) + list(frame.fn.returns):
                if p.name == name:
                    size = p.size
            store = [bytearray(size) for _ in range(LANES)]
            frame.params[name] = store
        return store

