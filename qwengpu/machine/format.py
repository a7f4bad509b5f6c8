"""The program image as the model holds it: the bundle word format, and the token vocabulary.

A bundle word is a sequence of bit fields, grouped into one *segment* per unit (its op, operand
selectors and register ports) plus a tail (write-backs and the terminator). Each segment is a whole
number of bytes: the unit's circuit reads its own segment from its own ROM copy. The prompt writes
the ROM one byte per token (`W(byte, value)` after `AT(ROM, bundle)`).

Operand selectors index a per-position list of *sources* (`sources_for`); the same lists drive the
encoder here and the multiplexers in the circuits, so they cannot disagree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .config import ALU, FPU, LANES, MEM, XLANE, MachineConfig
from .image import PORTS, Bundle, Image, Source
from .uops import ALU_OPS, FPU_COMPARES, FPU_OPS, FPU_ROUNDINGS

MAX_PC_BITS = 12         # ROM: up to 4096 bundles (MachineConfig.pc_bits; the control word's layout)


WARP_BITS = 3            # 8 warps per block: the built-in machines' (`MachineConfig.warp_bits`)
REG_BITS = 5             # 32 physical registers per warp
BLOCK_BITS = 8           # 256 blocks per grid
LINE_BITS = 8            # memory: 256 lines of 16 bytes
EPOCH_BITS = 4
VALUE_BITS = 8           # every token carries one byte


def lane_entry(table: int, i: int, width: int, warp_bits: int = WARP_BITS) -> tuple[int, int]:
    """(next pc, state) of lane-table entry i (warp * LANES + lane) of the `lanes` word of a machine
    of 2**warp_bits warps: each entry is the pc's bits, then 3 state bits."""
    F = width // (LANES << warp_bits)
    e = (table >> (F * i)) & ((1 << F) - 1)
    return e & ((1 << (F - 3)) - 1), e >> (F - 3)


# -- the control word (`ctl` memory): its fields by name -------------------------------------------
# The circuits (`hardware/control_state.py`) lay the word out a byte per token kind that writes it;
# every reader of the word (the runtime's machine state, the lab) takes its fields from here.

#: field -> (first bit, width) of each part of the control word. The pc's bits 8.. sit above the mask
#: (`pc_hi`), the prompt cursor's address bits 8.. above its space (`addr_hi`).
CTL_FIELDS = {"pc_lo": (0, 8), "mask": (8, LANES), "pc_hi": (12, MAX_PC_BITS - 8), "warp": (16, 8),
              "block": (24, BLOCK_BITS), "space": (32, 4), "addr_hi": (36, 4), "addr": (40, 8),
              "epoch": (48, EPOCH_BITS)}


def ctl_field(word: int, name: str) -> int:
    """Field `name` of `CTL_FIELDS` from a control word."""
    lo, width = CTL_FIELDS[name]
    return (word >> lo) & ((1 << width) - 1)


def ctl_pc(word: int) -> int:
    """The pc in the control word: bits 0..7, then bits 12..15 (above the mask)."""
    return ctl_field(word, "pc_lo") | ctl_field(word, "pc_hi") << 8


def ctl_fields(word: int) -> dict:
    """The architectural fields of a control word: pc, mask, warp, block, epoch."""
    return {"pc": ctl_pc(word), **{n: ctl_field(word, n) for n in ("mask", "warp", "block", "epoch")}}

SPECIALS = ["tid.x", "tid.y", "tid.z", "ctaid.x", "ctaid.y", "ctaid.z", "laneid", "warpid",
            "lanemask_eq", "lanemask_lt", "lanemask_le", "lanemask_gt", "lanemask_ge"]

#: the ALU operations the circuits implement, by opcode number (the micro-ISA's list, `uops.ALU_OPS`)
ALU_OPCODES = list(ALU_OPS)
#: the float unit's operations by opcode number (`uops.FPU_OPS`); F2I/FRND's roundings rni..rpi
#: share the codes of rn..rp
FPU_OPCODES = list(FPU_OPS)
FPU_SOURCES = ["a", "b", "c"]
MEM_OPS = ["NONE", "LD", "ST", "ATOM"]
ATOM_OPS = ["add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"]
SPACES = ["global", "shared", "local", "const"]
XLANE_OPS = ["NONE", "SHFL", "VOTE", "ACTIVEMASK"]
SHFL_MODES = ["up", "down", "bfly", "idx"]
VOTE_MODES = ["any", "all", "uni", "ballot"]
TERM_KINDS = ["exit", "jump", "branch", "barrier"]


def _bits_for(n: int) -> int:
    return max(1, (n - 1).bit_length())


def sources_for(cfg: MachineConfig, k: int, name: str) -> list[tuple]:
    """The ordered source options of operand `name` of the unit in slot k (`name` "pred" with
    k = len(slots) is the terminator's predicate)."""
    kinds = list(cfg.slots)
    earlier = []
    for j in range(min(k, len(kinds))):
        if kinds[j] == FPU:             # the float unit runs beside the others: nothing reads it in its pass
            continue
        earlier.append(("slot", j))
        if kinds[j] in (MEM, XLANE):
            earlier.append(("slothi", j))
    if name == "pred":
        return [("tport", 0)] + earlier
    kind = kinds[k]
    nports = PORTS[kind]
    if kind == FPU:                     # any read port of the first two ALU slots (read near the top)
        return [("sport", j, p) for j in fpu_port_slots(cfg) for p in range(PORTS[ALU])] + [("zero",)]
    if kind == ALU:
        if name == "a":
            return ([("port", p) for p in range(nports)] + [("zero",), ("zero", "inv")] + earlier
                    + [("special", s) for s in SPECIALS])
        if name == "b":
            out = [("port", p) for p in range(nports)] + [("port", p, "inv") for p in range(nports)]
            out += [("zero",), ("zero", "inv")] + earlier + [e + ("inv",) for e in earlier]
            return out
        if name == "c":
            return [("port", p) for p in range(nports)] + earlier
        if name == "cin":
            return [("0",), ("1",), ("flag",)]
    return [("port", p) for p in range(nports)] + [("zero",)] + earlier


def fpu_port_slots(cfg: MachineConfig) -> tuple:
    """The slots whose read ports the float unit shares (the first two ALU slots), and whose
    bundle segment (the first of them) holds its fields."""
    return tuple(k for k, kind in enumerate(cfg.slots) if kind == ALU)[:2]


def source_key(s: Source) -> tuple:
    """A Source as an entry of `sources_for` lists."""
    inv = ("inv",) if s.inv else ()
    if s.kind == "sport":
        return ("sport",) + tuple(s.index)
    if s.kind in ("port", "tport"):
        return (s.kind, s.index) + inv
    if s.kind == "zero":
        return ("zero",) + inv
    if s.kind in ("slot", "slothi"):
        return (s.kind, s.index) + inv
    if s.kind == "special":
        return ("special", s.index)
    if s.kind == "flag":
        return ("flag",)
    raise ValueError(f"source {s} has no encoding")


@dataclass
class Field:
    name: str
    bits: int
    offset: int = 0          # bit offset within the bundle word


@dataclass
class Segment:
    name: str                # "s0", "s1", ..., "tail"
    fields: list = field(default_factory=list)
    first_byte: int = 0
    nbytes: int = 0

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name}.{name}")


MEM_SOURCES = ["addr_lo", "addr_hi", "data_lo", "data_hi", "cmp_lo", "cmp_hi"]
XLANE_SOURCES = ["a", "bsrc", "csrc"]


class WordFormat:
    """Bit layout of a bundle word for one machine configuration."""

    def __init__(self, cfg: MachineConfig):
        self.cfg = cfg
        self.segments: list[Segment] = []
        byte = 0
        fpu_home = fpu_port_slots(cfg)[0] if cfg.has_fpu else None
        for k, kind in enumerate(cfg.slots):
            if kind == FPU:
                continue                     # its fields ride in the segment of the slot whose ports it reads
            seg = Segment(f"s{k}")
            f = seg.fields
            if kind == ALU:
                f.append(Field("op", _bits_for(len(ALU_OPCODES))))
                for n in ("a", "b", "c", "cin"):
                    f.append(Field(n, _bits_for(len(sources_for(cfg, k, n)))))
            elif kind == MEM:
                f += [Field("op", 2), Field("width", 2), Field("align", 3), Field("signed", 1), Field("space", 2),
                      Field("atom", _bits_for(len(ATOM_OPS)))]
                for n in MEM_SOURCES:
                    f.append(Field(n, _bits_for(len(sources_for(cfg, k, n)))))
            elif kind == XLANE:
                f += [Field("op", 2), Field("mode", 2)]
                for n in XLANE_SOURCES:
                    f.append(Field(n, _bits_for(len(sources_for(cfg, k, n)))))
            if k == fpu_home:
                kf = cfg.slots.index(FPU)
                f += [Field("f_op", _bits_for(len(FPU_OPCODES))), Field("f_rnd", 2), Field("f_ftz", 1),
                      Field("f_sat", 1), Field("f_compare", _bits_for(len(FPU_COMPARES))), Field("f_nan", 1),
                      Field("f_signed", 1)]
                for n in FPU_SOURCES:
                    f.append(Field(f"f_{n}", _bits_for(len(sources_for(cfg, kf, n)))))
            for p in range(PORTS[kind]):
                f += [Field(f"p{p}_en", 1), Field(f"p{p}_reg", REG_BITS), Field(f"p{p}_imm", 32)]
            self._place(seg, byte)
            byte += seg.nbytes
            self.segments.append(seg)
        tail = Segment("tail")
        for j in range(cfg.carry_slots):
            tail.fields += [Field(f"c{j}_en", 1), Field(f"c{j}_reg", REG_BITS),
                            Field(f"c{j}_slot", _bits_for(len(cfg.slots))), Field(f"c{j}_hi", 1)]
        tail.fields += [Field("term", 2), Field("want", 1), Field("t1", cfg.pc_bits), Field("t2", cfg.pc_bits),
                        Field("pred", _bits_for(len(sources_for(cfg, len(cfg.slots), "pred")))),
                        Field("tp_en", 1), Field("tp_reg", REG_BITS)]
        self._place(tail, byte)
        byte += tail.nbytes
        self.segments.append(tail)
        self.nbytes = byte

    @staticmethod
    def _place(seg: Segment, first_byte: int):
        bit = 8 * first_byte
        for f in seg.fields:
            f.offset = bit
            bit += f.bits
        seg.first_byte = first_byte
        seg.nbytes = (bit - 8 * first_byte + 7) // 8

    def segment(self, name: str) -> Segment:
        return next(s for s in self.segments if s.name == name)

    # -- encoding ---------------------------------------------------------------------------------

    def encode(self, b: Bundle) -> bytes:
        """The bytes of bundle `b`'s word."""
        values: dict[tuple[str, str], int] = {}
        cfg = self.cfg
        for k, kind in enumerate(cfg.slots):
            seg = f"s{k}"
            so = b.slots[k]
            ports = b.ports[k] if k < len(b.ports) else []
            for p, entry in enumerate(ports):
                if entry[0] == "reg":
                    values[(seg, f"p{p}_en")] = 1
                    values[(seg, f"p{p}_reg")] = entry[1]
                else:
                    values[(seg, f"p{p}_imm")] = entry[1] & 0xFFFFFFFF
            if so is None:
                continue
            op = so.op
            if kind == ALU:
                values[(seg, "op")] = ALU_OPCODES.index(op.op) if op.op in ALU_OPCODES else _unsupported(op)
                srcs = dict(so.srcs)
                cin = {"0": 0, "1": 1, "flag": 2}[op.cin]
                if op.cin == "flag" and (srcs.get("cin") is None or srcs["cin"].index != k - 1):
                    # the encoding has no flag source: the ALU reads the carry of slot k - 1
                    raise ValueError(f"bundle slot {k}: carry flag from slot {srcs.get('cin')}, not slot {k - 1}")
                if op.op in ("LTU", "LT", "LEU", "LE"):
                    # the circuit compares through the adder's carry out: a + ~b + 1 carries iff
                    # a >= b (LTU/LT give its complement); a + ~b carries iff a > b (LEU/LE)
                    bs = srcs["b"]
                    srcs["b"] = Source(bs.kind, bs.index, not bs.inv)
                    cin = 1 if op.op in ("LTU", "LT") else 0
                for n in ("a", "b", "c"):
                    if n in srcs:
                        values[(seg, n)] = _index(cfg, k, n, srcs[n])
                values[(seg, "cin")] = cin
            elif kind == MEM:
                ex = op.extra
                values[(seg, "op")] = MEM_OPS.index(op.op)
                values[(seg, "width")] = {1: 0, 2: 1, 4: 2, 8: 3}[ex["width"]]
                values[(seg, "align")] = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}[ex.get("align", ex["width"])]
                values[(seg, "signed")] = int(bool(ex.get("signed")))
                values[(seg, "space")] = SPACES.index(ex["space"])
                if op.op == "ATOM":
                    values[(seg, "atom")] = ATOM_OPS.index(ex["atom"])
                for n in MEM_SOURCES:
                    if n in so.srcs:
                        values[(seg, n)] = _index(cfg, k, n, so.srcs[n])
                    else:
                        values[(seg, n)] = sources_for(cfg, k, n).index(("zero",))
            elif kind == XLANE:
                values[(seg, "op")] = XLANE_OPS.index(op.op)
                if op.op == "SHFL":
                    values[(seg, "mode")] = SHFL_MODES.index(op.extra["mode"])
                elif op.op == "VOTE":
                    values[(seg, "mode")] = VOTE_MODES.index(op.extra["mode"])
                for n in XLANE_SOURCES:
                    if n in so.srcs:
                        values[(seg, n)] = _index(cfg, k, n, so.srcs[n])
            elif kind == FPU:
                ex = op.extra
                seg = f"s{fpu_port_slots(cfg)[0]}"
                values[(seg, "f_op")] = FPU_OPCODES.index(op.op)
                values[(seg, "f_rnd")] = FPU_ROUNDINGS.index(ex.get("rnd", "rn").removesuffix("i"))
                values[(seg, "f_ftz")] = int(bool(ex.get("ftz")))
                values[(seg, "f_sat")] = int(bool(ex.get("sat")))
                values[(seg, "f_compare")] = FPU_COMPARES.index(ex.get("compare", "eq"))
                values[(seg, "f_nan")] = int(bool(ex.get("nan")))
                values[(seg, "f_signed")] = int(bool(ex.get("signed")))
                for n in FPU_SOURCES:
                    values[(seg, f"f_{n}")] = _index(cfg, k, n, so.srcs[n]) if n in so.srcs else \
                        sources_for(cfg, k, n).index(("zero",))
        for j, (reg, (slot, part)) in enumerate(zip(b.carry_regs, (s for _, s in b.carries))):
            values[("tail", f"c{j}_en")] = 1
            values[("tail", f"c{j}_reg")] = reg
            values[("tail", f"c{j}_slot")] = slot
            values[("tail", f"c{j}_hi")] = part
        t = b.term
        values[("tail", "term")] = TERM_KINDS.index(t[0])
        if t[0] in ("jump", "barrier"):
            values[("tail", "t1")] = t[1]
        elif t[0] == "branch":
            # the circuit takes t1 when the predicate is non-zero
            values[("tail", "t1")], values[("tail", "t2")] = (t[2], t[3]) if t[1] else (t[3], t[2])
            values[("tail", "pred")] = _index(cfg, len(cfg.slots), "pred", b.term_src)
            if b.term_port_regs and b.term_port_regs[0] is not None:
                values[("tail", "tp_en")] = 1
                values[("tail", "tp_reg")] = b.term_port_regs[0]
        word = 0
        for seg in self.segments:
            for f in seg.fields:
                v = values.get((seg.name, f.name), 0)
                if v >> f.bits:
                    raise ValueError(f"bundle {b.index}: {seg.name}.{f.name} = {v} does not fit {f.bits} bits")
                word |= v << f.offset
        return word.to_bytes(self.nbytes, "little")

    def decode_field(self, word: bytes, seg: str, name: str) -> int:
        f = self.segment(seg).field(name)
        return (int.from_bytes(word, "little") >> f.offset) & ((1 << f.bits) - 1)


def _unsupported(op):
    raise ValueError(f"micro-op {op.op} has no circuit")


def _index(cfg, k, name, s: Source) -> int:
    key = source_key(s)
    opts = sources_for(cfg, k, name)
    if key not in opts:
        raise ValueError(f"slot {k} operand {name}: source {key} is not wired in this machine")
    return opts.index(key)


def _immediate(s: Source | None, ports) -> int | None:
    if s is None:
        return None
    if s.kind == "zero":
        return 0
    if s.kind == "port":
        entry = ports[s.index]
        if entry[0] == "imm":
            return entry[1]
    return None


def encode_image(img: Image) -> list[bytes]:
    fmt = WordFormat(img.config)
    return [fmt.encode(b) for b in img.bundles]
