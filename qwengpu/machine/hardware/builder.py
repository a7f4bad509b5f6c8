"""The shared builder of the circuits: the compiler `Program` they are written into, the machine's
geometry, and the helpers every unit uses (variables, circuits, gated steps, ROM fields)."""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.compiler import Lin, Program
from qwengpu.compiler import gadgets as G
from qwengpu.compiler.gadgets import n_step

from ..config import LANES, MachineConfig
from ..format import MAX_PC_BITS, WordFormat
from ..layout import LINE, memory_map

KINDS = ["GO", "BLOCK", "WARP", "EXEC", "CARRY", "MEMW", "RELEASE", "HALT", "FAULT", "AT", "W"]
OUT_KINDS = ["EXEC", "CARRY", "MEMW", "WARP", "BLOCK", "RELEASE", "HALT", "FAULT"]
#: the token kind a machine with a float unit adds (appended, so the others keep their bits)
FPU_KIND = "FPU"
BTAB_BYTES = 3                          # ctaid.x/y/z (8 bits each: grids have <= 256 blocks)
CONF_BYTES = 4                          # last block, entry bundle (low byte), threads per block, entry (high bits)
MEM_FIELDS = LINE + 2                   # 16 data bytes, 16 validity bits
BIG = 2048.0                            # switches a gated threshold off (forms stay < 4096)
KIND_WEIGHT = 100.0                     # the output kind dominates every other logit term


def carry_pos(j: int, b: int, ls: int) -> int:
    """Place of CARRY(j, byte b, lane-or-all ls) in a pass's output order (1-based; EXEC is 0)."""
    return 1 + (4 * j + b) * (LANES + 1) + ls


def memw_pos(J: int, lane: int, b: int) -> int:
    return 1 + 4 * J * (LANES + 1) + 4 * lane + b


def bits_of(x: int, n: int) -> list[int]:
    return [(x >> i) & 1 for i in range(n)]


def match(var_forms: list[Lin], value: int) -> Lin:
    """Number of bits of `var_forms` that agree with `value` (a linear form)."""
    m = Lin()
    for i, f in enumerate(var_forms):
        m = m + (f if (value >> i) & 1 else 1 - f)
    return m


@dataclass
class Unit:
    """What a unit leaves for the units below it."""
    kind: str
    k: int
    lo: list = field(default_factory=list)     # per lane: result var (32 bits)
    hi: list = field(default_factory=list)     # per lane: second result (MEM/XLANE) or None
    flag: list = field(default_factory=list)   # per lane: carry flag (ALU)


class Builder:
    """The circuits of one `MachineConfig` under construction (`Hardware` builds them unit by unit);
    the units leave the variables later units read as attributes."""

    def __init__(self, cfg: MachineConfig):
        self.cfg = cfg
        if not 8 <= cfg.pc_bits <= MAX_PC_BITS:
            raise ValueError(f"pc_bits must be 8..{MAX_PC_BITS} (the control word holds that many)")
        self.pcb = cfg.pc_bits
        self.memory_map = memory_map(cfg)
        self.warps = cfg.max_warps
        self.warp_bits = cfg.warp_bits
        self.ltab_bytes = LANES * cfg.ltab_lane_bytes     # tid.x/y/z of a warp's lanes
        # the prompt's cursor (`t_addr`): a ROM bundle, a memory line, a block ...
        self.addr_bits = max(self.pcb, self.memory_map.line_bits)
        self.fmt = WordFormat(cfg)
        self.J = cfg.carry_slots
        self.p = Program(f"qwengpu-{cfg.name}")
        self.units: list[Unit] = []
        self.spaces = [s.name for s in self.fmt.segments] + ["mem", "ltab", "btab", "conf"]
        self.F = max([s.nbytes for s in self.fmt.segments] + [MEM_FIELDS, self.ltab_bytes, BTAB_BYTES, CONF_BYTES])
        self.mem_info = None
        self.segments: dict = {}          # segment name -> its word this pass (`rom.segment`)
        self.unit_ports: dict = {}        # slot -> its read ports (`regfile.ports_of`)
        self.fpu_slot: int | None = None  # the float unit's slot, once built (`fpu.fpu`)
        extra = [FPU_KIND] if cfg.has_fpu else []
        self.kinds = KINDS + extra            # the input tokens' kinds (one bit each)
        self.out_kinds = OUT_KINDS + extra    # the output kinds the emitter decides between

    def bits(self, name, n):
        return self.p.bits_var(name, n)

    def circ(self, name, outputs, neurons):
        return self.p.circuit(name, outputs, neurons)

    def circ_groups(self, name, groups: list, neurons):
        """One circuit per group of output variables (e.g. per lane), so that the compiler can
        spread them over layers; every neuron writes into exactly one group."""
        where = {v.name: g for g, vs in enumerate(groups) for v in vs}
        parts = [[] for _ in groups]
        for nr in neurons:
            gs = {where[f[0]] for f in nr.down}
            if len(gs) != 1:
                raise ValueError(f"{name}: a neuron writes into several groups")
            parts[gs.pop()].append(nr)
        for g, (vs, ns) in enumerate(zip(groups, parts)):
            self.p.circuit(f"{name}.{g}", vs, ns)

    def view(self, name, forms):
        return self.p.linview(name, forms)

    def gstep(self, form: Lin, t: float, cond: Lin | None, out: dict, big: float = BIG) -> list:
        """coef*[form >= t] when cond (a clean 0/1 form) is 1, else 0 (`big` > |form| + |t|)."""
        if cond is not None:
            form = form + big * (cond - 1)
        return n_step(form, t, out)

    @staticmethod
    def clean_gate(cond: Lin, bit: Lin, out: dict) -> list:
        """coef*bit when cond (a clean 0/1 form) is 1, else 0, re-thresholded: a step on 64*cond + bit,
        so the output is an exact 0/1 even when `bit` arrives with fp32 noise (a unit's result: its
        lookahead steps sum terms of ~1e5, leaving up to ~4e-3), where a gate would pass the noise on."""
        return n_step(64 * cond + bit, 65, out)

    def field_forms(self, segvar, segname: str, fname: str) -> list[Lin]:
        seg = self.fmt.segment(segname)
        f = seg.field(fname)
        base = f.offset - 8 * seg.first_byte
        return [segvar.f(base + i) for i in range(f.bits)]

    def field_view(self, segvar, segname, fname, name=None):
        return self.view(name or self.p.fresh(f"{segname}.{fname}"), self.field_forms(segvar, segname, fname))

    def k(self, name: str) -> Lin:
        return self.kind.f(self.kinds.index(name))

    def decode_field(self, seg, segname, fname, count, name):
        v = self.field_view(seg, segname, fname)
        return G.decode(self.p, v, count, name=name)
