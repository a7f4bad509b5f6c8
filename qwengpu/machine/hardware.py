"""The machine as circuits: a compiler `Program` whose forward passes run the token protocol of
`qwengpu.machine.simulator` for one `MachineConfig`. See docs/machine.md for the map.

Sections (top to bottom of the network):

- tokens: the vocabulary and what each token's embedding carries.
- control state (`ctl`, one GDN slot): the current pc/mask (written by EXEC), warp, block,
  barrier epoch, and the prompt's write cursor (AT).
- program ROM: one GDN copy per bundle segment, read just before its unit needs it.
- launch tables: per-warp thread ids and present lanes, per-block ctaid, launch constants.
- register file: one GDN copy per unit (its read ports), all written by CARRY tokens.
- units: ALU slots (operand multiplexer, two arithmetic levels), the memory unit (addresses,
  pending addresses for MEMW, line memory, load byte selection, atomics), the cross-lane unit.
- control: next lane states, the lane table, the warp summary, the next control token.
- emitter: which token comes out: a carry byte, a memory byte, or the control token.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.compiler import Lin, Program
from qwengpu.compiler import gadgets as G
from qwengpu.compiler import memory as M
from qwengpu.compiler.gadgets import n_gated, n_linear, n_product, n_step
from qwengpu.compiler.program import topo_order
from qwengpu.compiler.run import emitted

from .config import ALU, LANES, MEM, XLANE, MachineConfig
from .format import (
    ALU_OPCODES,
    ATOM_OPS,
    BLOCK_BITS,
    EPOCH_BITS,
    MAX_PC_BITS,
    MEM_OPS,
    REG_BITS,
    SHFL_MODES,
    SPACES,
    TERM_KINDS,
    VOTE_MODES,
    WARP_BITS,
    XLANE_OPS,
    WordFormat,
    sources_for,
)
from .image import PORTS
from .layout import LINE, LINES, REGIONS
from .tokens import ends_launch, token_text

KINDS = ["GO", "BLOCK", "WARP", "EXEC", "CARRY", "MEMW", "RELEASE", "HALT", "FAULT", "AT", "W"]
OUT_KINDS = ["EXEC", "CARRY", "MEMW", "WARP", "BLOCK", "RELEASE", "HALT", "FAULT"]
LTAB_BYTES = 2 * LANES                  # tid.x/y/z per lane (5 bits each: blocks have <= 32 threads)
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


def _bits_of(x: int, n: int) -> list[int]:
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


class Hardware:
    def __init__(self, cfg: MachineConfig, partial: bool = False):
        self.cfg = cfg
        if not 8 <= cfg.pc_bits <= MAX_PC_BITS:
            raise ValueError(f"pc_bits must be 8..{MAX_PC_BITS} (the control word holds that many)")
        self.pcb = cfg.pc_bits
        self.fmt = WordFormat(cfg)
        self.J = cfg.carry_slots
        self.p = Program(f"qwengpu-{cfg.name}")
        self.units: list[Unit] = []
        self.spaces = [s.name for s in self.fmt.segments] + ["mem", "ltab", "btab", "conf"]
        self.F = max([s.nbytes for s in self.fmt.segments] + [MEM_FIELDS, LTAB_BYTES, BTAB_BYTES, CONF_BYTES])
        self.inputs()
        self.vocabulary()
        self.control_state()
        self.prompt_enables()
        self.tables()
        self.register_write()
        self.early()
        self.mem_info = None
        for k, kind in enumerate(cfg.slots):
            if kind == ALU:
                self.alu(k)
            elif kind == MEM:
                self.mem(k)
            else:
                self.xlane(k)
        if not partial:
            if self.mem_info is None:
                raise ValueError("the machine needs a memory slot")
            self.lane_states()
            self.carry_buffer()
            self.faults()
            self.control()
            self.emitter()

    # -- helpers ---------------------------------------------------------------------------------------

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

    # -- tokens ----------------------------------------------------------------------------------------

    def inputs(self):
        p = self.p
        self.kind = p.input_bits("kind", len(KINDS))                 # one bit per token kind
        self.t_pc = p.input_bits("t_pc", self.pcb)
        self.t_mask = p.input_bits("t_mask", LANES)
        self.t_j = p.input_bits("t_j", self.J)
        self.t_byte = p.input_bits("t_byte", 4)
        self.t_ls = p.input_bits("t_ls", LANES + 1)                  # a lane, or all (bit 4)
        self.t_lane = p.input_bits("t_lane", LANES)
        self.t_v = p.input_bits("t_v", 8)
        self.t_warp = p.input_bits("t_warp", WARP_BITS)
        self.t_block = p.input_bits("t_block", BLOCK_BITS)
        self.t_epoch = p.input_bits("t_epoch", EPOCH_BITS)
        self.t_space = p.input_bits("t_space", 4)
        self.t_addr = p.input_bits("t_addr", self.pcb)          # AT cursor: a ROM bundle, line, block ...
        self.t_f = p.input_bits("t_f", self.F)
        self.t_pos = p.input_bits("t_pos", 7)                      # CARRY/MEMW: place in the pass order

    def k(self, name: str) -> Lin:
        return self.kind.f(KINDS.index(name))

    def vocabulary(self):
        p = self.p
        kb = lambda name: 1 << KINDS.index(name)
        self.tok: dict = {}
        self.tok["GO"] = p.token(token_text(("GO",)), kind=kb("GO"))
        for b in range(1, 1 << BLOCK_BITS):
            self.tok[("BLOCK", b)] = p.token(token_text(("BLOCK", b)), kind=kb("BLOCK"), t_block=b)
        for w in range(1 << WARP_BITS):
            self.tok[("WARP", w)] = p.token(token_text(("WARP", w)), kind=kb("WARP"), t_warp=w)
        for pc in range(1 << self.pcb):
            for m in range(1, 1 << LANES):
                self.tok[("EXEC", pc, m)] = p.token(token_text(("EXEC", pc, m)), kind=kb("EXEC"), t_pc=pc, t_mask=m)
        for j in range(self.J):
            for b in range(4):
                for ls in range(LANES + 1):
                    name = "all" if ls == LANES else ls
                    for v in range(256):
                        self.tok[("CARRY", j, b, name, v)] = p.token(
                            token_text(("CARRY", j, b, name, v)), kind=kb("CARRY"), t_j=1 << j, t_byte=1 << b,
                            t_ls=1 << ls, t_v=v, t_pos=carry_pos(j, b, ls))
        for l in range(LANES):
            for b in range(4):
                for v in range(256):
                    self.tok[("MEMW", l, b, v)] = p.token(token_text(("MEMW", l, b, v)), kind=kb("MEMW"),
                                                          t_lane=1 << l, t_byte=1 << b, t_v=v,
                                                          t_pos=memw_pos(self.J, l, b))
        for e in range(1 << EPOCH_BITS):
            self.tok[("RELEASE", e)] = p.token(token_text(("RELEASE", e)), kind=kb("RELEASE"), t_epoch=e)
        self.tok["HALT"] = p.token(token_text(("HALT",)), kind=kb("HALT"))
        for fk in range(4):
            for l in range(LANES):
                self.tok[("FAULT", fk, l)] = p.token(token_text(("FAULT", fk, l)), kind=kb("FAULT"), t_lane=1 << l,
                                                     t_byte=1 << fk)
        for si, space in enumerate(self.spaces):
            n = {"ltab": 1 << WARP_BITS, "conf": 1, "mem": LINES, "btab": 1 << BLOCK_BITS}.get(space, 1 << self.pcb)
            for a in range(n):
                self.tok[("AT", space, a)] = p.token(token_text(("AT", space, a)), kind=kb("AT"), t_space=si, t_addr=a)
        for f in range(self.F):
            for v in range(256):
                self.tok[("W", f, v)] = p.token(token_text(("W", f, v)), kind=kb("W"), t_f=1 << f, t_v=v)

    # -- control state and the prompt's write cursor ---------------------------------------------------------

    def control_state(self):
        p = self.p
        t = lambda v, n: [v.f(i) for i in range(v.size)] + [Lin()] * (n - v.size)
        t_pad = lambda fs, n: fs + [Lin()] * (n - len(fs))
        # pc bits 8.. sit above the mask (bits 12..15), address bits 8.. above the space (36..39):
        # each in the byte its token kind writes
        lo8 = lambda v: [v.f(i) for i in range(8)]
        hi = lambda v: [v.f(i) for i in range(8, v.size)]
        forms = (lo8(self.t_pc) + t(self.t_mask, 4) + t_pad(hi(self.t_pc), 4) + t(self.t_warp, 8) + t(self.t_block, 8)
                 + t(self.t_space, 4) + t_pad(hi(self.t_addr), 4) + lo8(self.t_addr) + t(self.t_epoch, 8))
        value = self.view("ctl.in", forms)
        slot = p.view("slot0", "onehot", [Lin.const(1)], lambda: 0, [])
        ctl = M.GDNMemory(p, "ctl", slots=1, width=56, field_bits=8)
        start = self.k("BLOCK") + self.k("GO")
        ctl.write(slot, value, field_enable=[self.k("EXEC"), self.k("EXEC"), self.k("WARP") + start, start,
                                             self.k("AT"), self.k("AT"), self.k("RELEASE") + start])
        r = ctl.read(slot, name="ctl.out")
        self.c_pc = self.view("c_pc", [r.f(i) for i in range(8)] + [r.f(12 + i) for i in range(self.pcb - 8)])
        self.c_mask = self.view("c_mask", [r.f(8 + i) for i in range(LANES)])
        self.c_warp = self.view("c_warp", [r.f(16 + i) for i in range(WARP_BITS)])
        self.c_block = self.view("c_block", [r.f(24 + i) for i in range(BLOCK_BITS)])
        self.c_space = self.view("c_space", [r.f(32 + i) for i in range(4)])
        self.c_addr = self.view("c_addr", [r.f(40 + i) for i in range(8)])
        self.c_addr_rom = self.view("c_addr_rom", [r.f(40 + i) for i in range(8)] + [r.f(36 + i) for i in range(self.pcb - 8)])
        self.c_epoch = self.view("c_epoch", [r.f(48 + i) for i in range(EPOCH_BITS)])

    def prompt_enables(self):
        """we[space][byte]: a W token writes byte `byte` of the AT cursor's target."""
        self.we = {}
        self.we_any = {}
        neurons = []
        nbytes = {s.name: s.nbytes for s in self.fmt.segments}
        nbytes.update(mem=MEM_FIELDS, ltab=LTAB_BYTES, btab=BTAB_BYTES, conf=CONF_BYTES)
        outs = []
        for si, space in enumerate(self.spaces):
            n = nbytes[space]
            v = self.bits(f"we.{space}", n)
            anyv = self.bits(f"we.{space}.any", 1)
            outs += [v, anyv]
            self.we[space] = v
            self.we_any[space] = anyv
            sm = match([self.c_space.f(i) for i in range(4)], si)
            for f in range(n):
                neurons += n_step(self.k("W") + self.t_f.f(f) + sm, 6, {v.feature(f): 1})
            neurons += n_step(self.k("W") + sm, 5, {anyv.feature(0): 1})
        self.circ("prompt.enables", outs, neurons)

    def rom(self, segname: str):
        """The bundle segment `segname` of the current bundle (read from its own ROM copy)."""
        seg = self.fmt.segment(segname)
        n = seg.nbytes
        mem = M.GDNMemory(self.p, f"rom.{segname}", slots=1 << self.pcb, width=8 * n, field_bits=8)
        mem.write(self.c_addr_rom, self.view(f"rom.{segname}.in", [self.t_v.f(i % 8) for i in range(8 * n)]),
                  field_enable=[self.we[segname].f(f) for f in range(n)])
        out = mem.read(self.c_pc, name=f"seg.{segname}")
        mem.late = True
        return out

    def tables(self):
        p = self.p
        addr3 = self.view("c_addr3", [self.c_addr.f(i) for i in range(WARP_BITS)])
        lt = M.GDNMemory(p, "ltab", slots=1 << WARP_BITS, width=8 * LTAB_BYTES, field_bits=8)
        lt.write(addr3, self.view("ltab.in", [self.t_v.f(i % 8) for i in range(8 * LTAB_BYTES)]),
                 field_enable=[self.we["ltab"].f(f) for f in range(LTAB_BYTES)])
        self.ltab = lt.read(self.c_warp, name="ltab.out")
        bt = M.GDNMemory(p, "btab", slots=1 << BLOCK_BITS, width=8 * BTAB_BYTES, field_bits=8)
        bt.write(self.c_addr, self.view("btab.in", [self.t_v.f(i % 8) for i in range(8 * BTAB_BYTES)]),
                 field_enable=[self.we["btab"].f(f) for f in range(BTAB_BYTES)])
        self.btab = bt.read(self.c_block, name="btab.out")
        slot = p.vars["slot0"]
        cf = M.GDNMemory(p, "conf", slots=1, width=8 * CONF_BYTES, field_bits=8)
        cf.write(slot, self.view("conf.in", [self.t_v.f(i % 8) for i in range(8 * CONF_BYTES)]),
                 field_enable=[self.we["conf"].f(f) for f in range(CONF_BYTES)])
        self.conf = cf.read(slot, name="conf.out")
        self.lastblock = self.view("c_lastblock", [self.conf.f(i) for i in range(BLOCK_BITS)])
        self.entry = self.view("c_entry", [self.conf.f(8 + i) for i in range(8)] + [self.conf.f(24 + i) for i in range(self.pcb - 8)])
        self.nthreads = self.view("c_nthreads", [self.conf.f(16 + i) for i in range(6)])
        # special values per lane (forms; only the bits that can be non-zero)
        self.special_forms = {}
        for l in range(LANES):
            for c, name in enumerate(("tid.x", "tid.y", "tid.z")):
                base = 16 * l + 5 * c
                self.special_forms[(name, l)] = [self.ltab.f(base + i) for i in range(5)]
            for c, name in enumerate(("ctaid.x", "ctaid.y", "ctaid.z")):
                self.special_forms[(name, l)] = [self.btab.f(8 * c + i) for i in range(8)]
            self.special_forms[("laneid", l)] = [Lin.const(b) for b in _bits_of(l, 2)]
            self.special_forms[("warpid", l)] = [self.c_warp.f(i) for i in range(WARP_BITS)]
            masks = {"eq": 1 << l, "lt": (1 << l) - 1, "le": (1 << (l + 1)) - 1,
                     "gt": 15 & ~((1 << (l + 1)) - 1), "ge": 15 & ~((1 << l) - 1)}
            for kname, m in masks.items():
                self.special_forms[(f"lanemask_{kname}", l)] = [Lin.const(b) for b in _bits_of(m, 4)]

    def register_write(self):
        """What a CARRY token writes: the register (from the bundle's tail) and the lane/byte enables."""
        self.tail = self.rom("tail")
        creg = self.bits("creg", REG_BITS)
        neurons = []
        for j in range(self.J):
            regf = self.field_forms(self.tail, "tail", f"c{j}_reg")
            for i in range(REG_BITS):
                neurons += n_gated(self.t_j.f(j), regf[i], {creg.feature(i): 1})
        cwe = self.bits("cwe", 4 * LANES)
        for l in range(LANES):
            for b in range(4):
                out = {cwe.feature(4 * l + b): 1}
                neurons += n_step(self.k("CARRY") + self.t_byte.f(b) + self.t_ls.f(l), 3, out)
                neurons += n_step(self.k("CARRY") + self.t_byte.f(b) + self.t_ls.f(LANES) + self.c_mask.f(l), 4, out)
        self.circ("carry.target", [creg, cwe], neurons)
        self.rkey = self.view("rkey", [self.c_warp.f(i) for i in range(WARP_BITS)] + [creg.f(i) for i in range(REG_BITS)])
        self.cwe = cwe

    def regfile(self, k: int, seg, nports: int) -> list:
        """Unit k's register read ports: port lines (per port, 4 lanes x 32 bits) = register + immediate."""
        mem = M.GDNMemory(self.p, f"reg.{k}", slots=1 << (WARP_BITS + REG_BITS), width=32 * LANES, field_bits=8)
        mem.write(self.rkey, self.view(f"reg.{k}.in", [self.t_v.f(i % 8) for i in range(32 * LANES)]),
                  field_enable=[self.cwe.f(i) for i in range(4 * LANES)])
        lines = []
        segname = f"s{k}"
        for p_ in range(nports):
            addr = self.view(f"reg.{k}.q{p_}", [self.c_warp.f(i) for i in range(WARP_BITS)]
                             + self.field_forms(seg, segname, f"p{p_}_reg"))
            en = self.field_forms(seg, segname, f"p{p_}_en")[0]
            r = mem.read(addr, name=f"reg.{k}.r{p_}", enable=en)
            imm = self.field_forms(seg, segname, f"p{p_}_imm")
            lines.append([[r.f(32 * l + i) + imm[i] for i in range(32)] for l in range(LANES)])
        mem.late = True
        return lines

    # -- operand multiplexers ------------------------------------------------------------------------

    def source_forms(self, k: int, opt: tuple, lane: int, ports) -> list | None:
        """32 bit forms of source option `opt` for `lane` (None: all zero)."""
        inv = opt[-1] == "inv"
        kind = opt[0]
        if kind in ("port", "tport"):
            forms = ports[opt[1]][lane]
        elif kind == "zero":
            return [Lin.const(1)] * 32 if inv else None
        elif kind in ("slot", "slothi"):
            u = self.units[opt[1]]
            var = (u.lo if kind == "slot" else u.hi)[lane]
            if var is None:
                return [Lin.const(1)] * 32 if inv else None
            forms = [var.f(i) for i in range(var.size)] + [Lin()] * (32 - var.size)
        elif kind == "special":
            f = self.special_forms[(opt[1], lane)]
            forms = list(f) + [Lin()] * (32 - len(f))
        else:
            raise ValueError(opt)
        return [1 - x for x in forms] if inv else forms

    def mux(self, k: int, name: str, sel, opts: list, ports, outs: list, nbits: int = 32) -> list:
        """Neurons for outs[lane] (bits var) = the selected option (sel: onehot var over opts).

        A result forwarded from an earlier slot of the same bundle is re-thresholded (`clean_gate`):
        the adder's digit forms weigh a bit by up to 128, the multiplier's column sums by thousands."""
        neurons = []
        for oi, opt in enumerate(opts):
            forwarded = opt[0] in ("slot", "slothi")
            for l in range(LANES):
                forms = self.source_forms(k, opt, l, ports)
                if forms is None:
                    continue
                for i in range(nbits):
                    if not forms[i].terms:
                        continue
                    if forwarded:
                        neurons += self.clean_gate(sel.f(oi), forms[i], {outs[l].feature(i): 1})
                    else:
                        neurons += n_gated(sel.f(oi), forms[i], {outs[l].feature(i): 1})
        return neurons

    def decode_field(self, seg, segname, fname, count, name):
        v = self.field_view(seg, segname, fname)
        return G.decode(self.p, v, count, name=name)

    # -- ALU slot ------------------------------------------------------------------------------------

    def alu(self, k: int):
        cfg = self.cfg
        segname = f"s{k}"
        seg = self.rom(segname)
        ports = self.regfile(k, seg, PORTS[ALU])
        opts = {n: sources_for(cfg, k, n) for n in ("a", "b", "c", "cin")}
        op = self.decode_field(seg, segname, "op", len(ALU_OPCODES), f"op.{k}")
        sel = {n: self.decode_field(seg, segname, n, len(opts[n]), f"sel.{k}.{n}") for n in opts}
        a = [self.bits(f"a.{k}.{l}", 32) for l in range(LANES)]
        b = [self.bits(f"b.{k}.{l}", 32) for l in range(LANES)]
        c = [self.bits(f"c.{k}.{l}", 1) for l in range(LANES)]
        cin = [self.bits(f"cin.{k}.{l}", 1) for l in range(LANES)]
        neurons = self.mux(k, "a", sel["a"], opts["a"], ports, a)
        neurons += self.mux(k, "b", sel["b"], opts["b"], ports, b)
        for oi, opt in enumerate(opts["c"]):         # SEL's condition: the source is non-zero
            for l in range(LANES):
                forms = self.source_forms(k, opt, l, ports)
                if forms is not None:
                    neurons += n_step(64 * sel["c"].f(oi) + sum(forms, Lin()), 65, {c[l].feature(0): 1})
        for oi, o in enumerate(opts["cin"]):
            for l in range(LANES):
                if o == ("1",):
                    neurons += n_gated(sel["cin"].f(oi), Lin.const(1), {cin[l].feature(0): 1})
                elif o == ("flag",) and k > 0 and self.units[k - 1].flag:
                    neurons += n_gated(sel["cin"].f(oi), self.units[k - 1].flag[l].f(0), {cin[l].feature(0): 1})
        self.circ_groups(f"mux.{k}", [[a[l], b[l], c[l], cin[l]] for l in range(LANES)], neurons)
        o = lambda name: op.f(ALU_OPCODES.index(name))
        shifter = cfg.shifters is None or k in cfg.shifters
        bitcount = cfg.bitcount is None or k in cfg.bitcount
        unit = Unit(ALU, k)
        for l in range(LANES):
            A = [a[l].f(i) for i in range(32)]
            B = [b[l].f(i) for i in range(32)]
            # level 1: adder digits, AND bits, shift amount, leading-zero prefixes
            dig = self.bits(f"dig.{k}.{l}", 66)
            andb = self.bits(f"and.{k}.{l}", 32)
            outs = [dig, andb]
            ny = []
            for kk in range(1, 33):
                lo = 8 * ((kk - 1) // 8)
                j = kk - lo
                s = Lin()
                for m in range(lo, kk):
                    s = s + (1 << (m - lo)) * (A[m] + B[m])
                ny += n_step(s, 1 << j, {dig.feature(2 * (kk - 1)): 1})
                ny += n_step(s, (1 << j) - 1, {dig.feature(2 * (kk - 1) + 1): 1})
            ss = Lin()
            for m in range(24, 31):
                ss = ss + (1 << (m - 24)) * (A[m] + B[m])
            ss = ss + 128 * ((1 - A[31]) + (1 - B[31]))        # signed compare: sign bits flipped
            ny += n_step(ss, 256, {dig.feature(64): 1})
            ny += n_step(ss, 255, {dig.feature(65): 1})
            for i in range(32):
                ny += n_step(A[i] + B[i], 2, {andb.feature(i): 1})
            amt = None
            if shifter:
                amt = self.bits(f"amt.{k}.{l}", 33)
                outs.append(amt)
                high = Lin()
                for i in range(5, 32):
                    high = high + B[i]
                for kk in range(32):
                    ny += n_step(match(B[:5], kk) - 5 * high, 5, {amt.feature(kk): 1})
                ny += n_step(high, 1, {amt.feature(32): 1})
            zpre = None
            if bitcount:
                zpre = self.bits(f"clzp.{k}.{l}", 32)
                outs.append(zpre)
                acc = Lin()
                for t in range(1, 33):
                    acc = acc + A[32 - t]
                    ny += n_step(-1 * acc, 0, {zpre.feature(t - 1): 1})
            self.circ(f"alu1.{k}.{l}", outs, ny)
            # level 2: results, gated by the opcode
            r = self.bits(f"r.{k}.{l}", 32)
            fl = self.bits(f"flag.{k}.{l}", 1)
            nx = []
            D = lambda x: dig.f(2 * (x - 1)) + dig.f(2 * (x - 1) + 1)
            Ds = dig.f(64) + dig.f(65)
            cn = cin[l].f(0)

            def carry(kk, signed=False):
                q = (kk - 1) // 8
                terms = [2 * cn] + [D(8 * (bb + 1)) for bb in range(q)]
                terms.append(Ds if (signed and kk == 32) else D(kk))
                z = Lin()
                for t_, f_ in enumerate(terms):
                    z = z + (3 ** t_) * f_
                return z, (3 ** len(terms) + 1) / 2

            add = o("ADD")
            for i in range(32):
                nx += n_gated(add, A[i] + B[i], {r.feature(i): 1})
            nx += n_gated(add, cn, {r.feature(0): 1})
            for kk in range(1, 33):
                z, t = carry(kk)
                out = {r.feature(kk - 1): -2}
                if kk < 32:
                    out[r.feature(kk)] = 1
                else:
                    out[fl.feature(0)] = 1
                nx += self.gstep(z, t, add, out)
            for name, signed in (("LTU", False), ("LEU", False), ("LT", True), ("LE", True)):
                z, t = carry(32, signed)
                nx += n_gated(o(name), Lin.const(1), {r.feature(0): 1})
                nx += self.gstep(z, t, o(name), {r.feature(0): -1})
            xor = Lin()
            for i in range(32):
                xor = xor + A[i] + B[i] - 2 * andb.f(i)
            nx += self.gstep(-1 * xor, 0, o("EQ"), {r.feature(0): 1})
            for i in range(32):
                nx += n_gated(o("AND"), andb.f(i), {r.feature(i): 1})
                nx += n_gated(o("OR"), A[i] + B[i] - andb.f(i), {r.feature(i): 1})
                nx += n_gated(o("XOR"), A[i] + B[i] - 2 * andb.f(i), {r.feature(i): 1})
                nx += n_gated(o("MOV"), A[i], {r.feature(i): 1})
                nx += n_gated(o("SEL") + c[l].f(0) - 1, A[i], {r.feature(i): 1})
                nx += n_gated(o("SEL") - c[l].f(0), B[i], {r.feature(i): 1})
            if shifter:
                for i in range(32):
                    for kk in range(33):
                        if kk <= i:
                            nx += n_gated(o("SHL") + amt.f(kk) - 1, A[i - kk], {r.feature(i): 1})
                        if kk < 32 and i + kk <= 31:
                            nx += n_gated(o("SHR") + o("SAR") + amt.f(kk) - 1, A[i + kk], {r.feature(i): 1})
                    thermo = Lin()
                    for kk in range(max(1, 32 - i), 33):
                        thermo = thermo + amt.f(kk)
                    nx += n_gated(o("SAR") + thermo - 1, A[31], {r.feature(i): 1})
            if bitcount:
                for name, count in (("CLZ", sum((zpre.f(t) for t in range(32)), Lin())),
                                    ("POPC", sum(A, Lin()))):
                    for bit in range(6):
                        w = 1 << bit
                        for rr in range(1, 33 // w + 2):
                            lo_t = (2 * rr - 1) * w
                            hi_t = 2 * rr * w
                            if lo_t <= 32:
                                nx += self.gstep(count, lo_t, o(name), {r.feature(bit): 1})
                            if hi_t <= 32:
                                nx += self.gstep(count, hi_t, o(name), {r.feature(bit): -1})
                for i in range(32):
                    nx += n_gated(o("BREV"), A[31 - i], {r.feature(i): 1})
            self.circ(f"alu2.{k}.{l}", [r, fl], nx)
            if k in cfg.multipliers:
                mr = self.multiplier(k, l, A, B, o)
                r = self.view(f"rm.{k}.{l}", [r.f(i) + mr.f(i) for i in range(32)])
            unit.lo.append(r)
            unit.hi.append(None)
            unit.flag.append(fl)
        self.units.append(unit)


    # -- multiplier (an ALU slot's MUL / MULHU / MULHS) ---------------------------------------------------

    def multiplier(self, k: int, l: int, A: list, B: list, o) -> "object":
        """The 64-bit product of two 32-bit operands (signed or unsigned), exactly, in six levels:
        nibble products summed per base-16 column (SwiGLU products), two rounds of carry-save
        digit reduction, the bits of the remaining digits, then one 64-bit addition."""
        mul, mulh = o("MUL"), o("MULHU") + o("MULHS")
        hs = o("MULHS")
        # M0: re-threshold the operand bits. A result forwarded from an earlier slot of the bundle
        # carries fp32 noise of ~1e-3 per bit (its carry steps sum terms of ~1e4); the column sums
        # below weigh each bit by up to ~3600, which would turn that noise into a wrong digit.
        clean = self.bits(f"mop.{k}.{l}", 64)
        n0 = []
        for i in range(32):
            n0 += n_step(A[i], 1, {clean.feature(i): 1})
            n0 += n_step(B[i], 1, {clean.feature(32 + i): 1})
        self.circ(f"mul0.{k}.{l}", [clean], n0)
        A = [clean.f(i) for i in range(32)]
        B = [clean.f(32 + i) for i in range(32)]
        nib = lambda X, p: sum(((1 << i) * X[4 * p + i] for i in range(4)), Lin())
        # M1: column sums T_s = sum_{p+q=s} a_p b_q (+ the signed correction for MULHS:
        # -2^32 (a31 b + b31 a) == 2^32 (a31 (~b + 1) + b31 (~a + 1)) mod 2^64)
        T = [self.p.number_var(f"mT.{k}.{l}.{s}", 0, 2048) for s in range(16)]
        n1 = []
        for p_ in range(8):
            for q in range(8):
                if p_ + q < 16:
                    n1 += n_product(nib(A, p_), nib(B, q), {T[p_ + q].feature(0): 1})
        for q in range(8):
            n1 += n_gated(hs + A[31] - 1, 15 - nib(B, q), {T[8 + q].feature(0): 1})
            n1 += n_gated(hs + B[31] - 1, 15 - nib(A, q), {T[8 + q].feature(0): 1})
        n1 += n_gated(hs + A[31] - 1, Lin.const(1), {T[8].feature(0): 1})
        n1 += n_gated(hs + B[31] - 1, Lin.const(1), {T[8].feature(0): 1})
        self.circ(f"mul1.{k}.{l}", T, n1)
        # M2: move multiples of 256 two columns up (U_s <= 255 + 7)
        U = [self.p.number_var(f"mU.{k}.{l}.{s}", 0, 300) for s in range(16)]
        n2 = []
        for s in range(16):
            n2 += n_linear(T[s].f(0), {U[s].feature(0): 1})
            for m in range(1, 8):
                out = {U[s].feature(0): -256}
                if s + 2 < 16:
                    out[U[s + 2].feature(0)] = 1
                n2 += n_step(T[s].f(0), 256 * m, out)
        self.circ(f"mul2.{k}.{l}", U, n2)
        # M3: move multiples of 16 one column up (V_s <= 15 + 16)
        V = [self.p.number_var(f"mV.{k}.{l}.{s}", 0, 31) for s in range(16)]
        n3 = []
        for s in range(16):
            n3 += n_linear(U[s].f(0), {V[s].feature(0): 1})
            for m in range(1, 17):
                out = {V[s].feature(0): -16}
                if s + 1 < 16:
                    out[V[s + 1].feature(0)] = 1
                n3 += n_step(U[s].f(0), 16 * m, out)
        self.circ(f"mul3.{k}.{l}", V, n3)
        # M4: the bits of each digit V_s (< 32): bits 0-3 are X's, bit 4 is Y's (one column up)
        X = self.bits(f"mX.{k}.{l}", 64)
        Y = self.bits(f"mY.{k}.{l}", 64)
        n4 = []
        for s in range(16):
            for v in range(1, 32):
                for bit in range(5):
                    d = ((v >> bit) & 1) - (((v - 1) >> bit) & 1)
                    if not d:
                        continue
                    if bit < 4:
                        n4 += n_step(V[s].f(0), v, {X.feature(4 * s + bit): d})
                    elif s + 1 < 16:
                        n4 += n_step(V[s].f(0), v, {Y.feature(4 * s + 4): d})
        self.circ(f"mul4.{k}.{l}", [X, Y], n4)
        # M5, M6: X + Y (64 bits); MUL keeps the low word, MULHU/MULHS the high word
        Xf = [X.f(i) for i in range(64)]
        Yf = [Y.f(i) for i in range(64)]
        dig = self.bits(f"mdig.{k}.{l}", 128)
        n5 = []
        for kk in range(1, 65):
            lo = 8 * ((kk - 1) // 8)
            j = kk - lo
            s_ = sum(((1 << (m - lo)) * (Xf[m] + Yf[m]) for m in range(lo, kk)), Lin())
            n5 += n_step(s_, 1 << j, {dig.feature(2 * (kk - 1)): 1})
            n5 += n_step(s_, (1 << j) - 1, {dig.feature(2 * (kk - 1) + 1): 1})
        self.circ(f"mul5.{k}.{l}", [dig], n5)
        mr = self.bits(f"mr.{k}.{l}", 32)
        n6 = []
        D = lambda x: dig.f(2 * (x - 1)) + dig.f(2 * (x - 1) + 1)
        for i in range(32):
            n6 += n_gated(mul, Xf[i] + Yf[i], {mr.feature(i): 1})
            n6 += n_gated(mulh, Xf[32 + i] + Yf[32 + i], {mr.feature(i): 1})
        for kk in range(1, 65):
            q = (kk - 1) // 8
            terms = [D(8 * (bb + 1)) for bb in range(q)] + [D(kk)]
            z = sum(((3 ** t_) * f_ for t_, f_ in enumerate(terms)), Lin())
            t = (3 ** len(terms) + 1) / 2
            big = 2.0 * 3 ** len(terms)
            if kk <= 32:
                out = {mr.feature(kk - 1): -2}
                if kk < 32:
                    out[mr.feature(kk)] = 1
                n6 += self.gstep(z, t, mul, out, big)
            if kk >= 32:
                out = {mr.feature(kk - 33): -2} if kk > 32 else {}
                if kk < 64:
                    out[mr.feature(kk - 32)] = 1
                n6 += self.gstep(z, t, mulh, out, big)
        self.circ(f"mul6.{k}.{l}", [mr], n6)
        return mr

    # -- memory unit ---------------------------------------------------------------------------------

    def first_lane(self):
        """One-hot of the lowest lane of the EXEC mask (computed once)."""
        if not hasattr(self, "first"):
            f = self.bits("first", LANES)
            neurons = []
            for l in range(LANES):
                form = self.c_mask.f(l)
                for m in range(l):
                    form = form - self.c_mask.f(m)
                neurons += n_step(form, 1, {f.feature(l): 1})
            self.circ("first.lane", [f], neurons)
            self.first = f
        return self.first

    def line_forms(self, space: str, addr: list, lane: int) -> list[Lin]:
        """The 8 bits of the machine line of an address in `space` (bit selection, no arithmetic)."""
        first, lines, bits, base = REGIONS[space]
        if space == "global":
            return [addr[4 + i] for i in range(7)] + [Lin()]
        if space == "shared":
            return [addr[4 + i] for i in range(6)] + [Lin(), Lin.const(1)]
        if space == "const":
            return [addr[4 + i] for i in range(5)] + [Lin.const(1)] * 3
        # local: line 192 + 2 * thread + address bit 4; thread = 4 * warp + lane
        lb = _bits_of(lane, 2)
        return [addr[4], Lin.const(lb[0]), Lin.const(lb[1]), self.c_warp.f(0), self.c_warp.f(1), Lin(),
                Lin.const(1), Lin.const(1)]

    def window_violation(self, space: str, addr: list, ahi: list) -> Lin:
        """A form that is 0 exactly when the address lies in the space's window."""
        v = Lin()
        for f in ahi:
            v = v + f
        must1 = []
        if space == "global":
            must0 = [11] + list(range(13, 32))
            must1 = [12]
        elif space == "shared":
            must0 = list(range(10, 32))
        elif space == "local":
            must0 = list(range(5, 32))
            v = v + self.c_warp.f(2)              # threads 16.. have no local memory
        else:
            must0 = list(range(9, 32))
        for i in must0:
            v = v + addr[i]
        for i in must1:
            v = v + (1 - addr[i])
        return v

    def mem(self, k: int):
        p = self.p
        cfg = self.cfg
        segname = f"s{k}"
        seg = self.rom(segname)
        ports = self.regfile(k, seg, PORTS[MEM])
        names = ["addr_lo", "addr_hi", "data_lo", "cmp_lo"]
        opts = {n: sources_for(cfg, k, n) for n in names}
        sel = {n: self.decode_field(seg, segname, n, len(opts[n]), f"sel.{k}.{n}") for n in names}
        mop = self.decode_field(seg, segname, "op", len(MEM_OPS), f"mop.{k}")
        width = self.decode_field(seg, segname, "width", 4, f"width.{k}")
        align = self.decode_field(seg, segname, "align", 5, f"align.{k}")
        space = self.decode_field(seg, segname, "space", len(SPACES), f"space.{k}")
        atom = self.decode_field(seg, segname, "atom", len(ATOM_OPS), f"atomop.{k}")
        first = self.first_lane()
        vals = {n: [self.bits(f"{n}.{k}.{l}", 32) for l in range(LANES)] for n in names}
        neurons = []
        for n in names:
            neurons += self.mux(k, n, sel[n], opts[n], ports, vals[n])
        self.circ_groups(f"mux.{k}", [[vals[n][l] for n in names] for l in range(LANES)], neurons)
        addr, ahi, data, cmpv = (vals[n] for n in names)
        # pending addresses: the EXEC pass's addresses, which the passes after it (MEMW) still
        # need after carries have rewritten the registers they came from
        pa = M.GDNMemory(p, "pa", slots=1, width=32 * LANES, field_bits=8)
        slot = p.vars["slot0"]
        pa.write(slot, self.view("pa.in", [addr[l].f(i) for l in range(LANES) for i in range(32)]),
                 field_enable=[self.k("EXEC")] * (4 * LANES))
        par = pa.read(slot, name="pa.out")
        self.pa = par
        A = [[par.f(32 * l + i) for i in range(32)] for l in range(LANES)]
        # level A: lines, offsets, faults; the MEMW write line and byte
        mline = [self.bits(f"mline.{k}.{l}", 8) for l in range(LANES)]
        off = [self.bits(f"off.{k}.{l}", 16) for l in range(LANES)]
        bad = [self.bits(f"badaddr.{k}.{l}", 2) for l in range(LANES)]   # misaligned, outside window
        wline = self.bits(f"wline.{k}", 8)
        head = self.bits(f"whead.{k}", LINE)
        na = []
        for l in range(LANES):
            for si, sp in enumerate(SPACES):
                forms = self.line_forms(sp, A[l], l)
                for b in range(8):
                    if forms[b].terms:
                        na += n_gated(space.f(si), forms[b], {mline[l].feature(b): 1})
                        na += n_gated(self.t_lane.f(l) + space.f(si) - 1, forms[b], {wline.feature(b): 1})
                na += n_step(128 * space.f(si) + self.window_violation(sp, A[l], [ahi[l].f(i) for i in range(32)]), 129,
                             {bad[l].feature(1): 1})
            for o in range(16):
                na += n_step(match(A[l][:4], o), 4, {off[l].feature(o): 1})
            for q in range(1, 5):
                low = Lin()
                for i in range(q):
                    low = low + A[l][i]
                na += n_step(8 * align.f(q) + low, 9, {bad[l].feature(0): 1})
            for b in range(4):
                for j in range(b, LINE):
                    na += n_step(self.k("MEMW") + self.t_lane.f(l) + self.t_byte.f(b) + match(A[l][:4], j - b),
                                 7, {head.feature(j): 1})
        for b in range(8):
            na += n_gated(self.we_any["mem"].f(0), self.c_addr.f(b), {wline.feature(b): 1})
        self.circ(f"mema.{k}", mline + off + bad + [wline, head], na)
        # the line memory: 16 data bytes and 16 validity bits per line
        mem = M.GDNMemory(p, "mem", slots=LINES, width=8 * MEM_FIELDS, field_bits=8)
        mem.write(wline, self.view("mem.in", [self.t_v.f(i % 8) for i in range(8 * MEM_FIELDS)]),
                  field_enable=[head.f(j) + self.we["mem"].f(j) for j in range(LINE)]
                  + [self.we["mem"].f(LINE), self.we["mem"].f(LINE + 1)])
        lines = [mem.read(mline[l], name=f"line.{k}.{l}") for l in range(LANES)]
        self.memory = mem
        # level B: load byte selection and validity
        ld = [self.bits(f"ld.{k}.{l}", 32) for l in range(LANES)]
        inval = self.bits(f"inval.{k}", LANES)
        nb = []
        wsizes = [1, 2, 4]
        for l in range(LANES):
            L = lines[l]
            for wi, w in enumerate(wsizes):
                for o in range(0, LINE, w):
                    cond = off[l].f(o) + width.f(wi) - 1
                    for m in range(w):
                        for bit in range(8):
                            nb += n_gated(cond, L.f(8 * (o + m) + bit), {ld[l].feature(8 * m + bit): 1})
                    missing = Lin()
                    for m in range(w):
                        missing = missing + (1 - L.f(8 * LINE + o + m))
                    nb += n_step(8 * (off[l].f(o) + width.f(wi)) + missing, 17, {inval.feature(l): 1})
        self.circ(f"memb.{k}", ld + [inval], nb)
        # level C: faults (an active lane -- for an atomic, the first lane -- of a memory op whose
        # address is misaligned, outside its window, or not allocated)
        flt = self.bits(f"fault.{k}", LANES)
        memop = 1 - mop.f(MEM_OPS.index("NONE"))
        op_atom = mop.f(MEM_OPS.index("ATOM"))
        nc = []
        for l in range(LANES):
            y = bad[l].f(0) + bad[l].f(1) + inval.f(l)
            nc += n_step(4 * self.c_mask.f(l) + 4 * (memop - op_atom) + y, 9, {flt.feature(l): 1})
            nc += n_step(4 * first.f(l) + 4 * op_atom + y, 9, {flt.feature(l): 1})
        self.circ(f"memc.{k}", [flt], nc)
        self.mem_info = dict(k=k, op=mop, width=width, atom=atom, data=data, cmp=cmpv, ld=ld, fault=flt,
                             bad=bad, signed=self.field_forms(seg, segname, "signed")[0])
        unit = Unit(MEM, k, lo=ld, hi=[None] * LANES)
        self.units.append(unit)
        self.atomic_unit()

    def adder_digits(self, A: list, B: list, out, base: int = 0, signed_top: bool = False) -> list:
        """Neurons for the 64 (+2 signed) generate/propagate digits of A + B into out[base...]."""
        ny = []
        for kk in range(1, 33):
            lo = 8 * ((kk - 1) // 8)
            j = kk - lo
            s_ = Lin()
            for m in range(lo, kk):
                s_ = s_ + (1 << (m - lo)) * (A[m] + B[m])
            ny += n_step(s_, 1 << j, {out.feature(base + 2 * (kk - 1)): 1})
            ny += n_step(s_, (1 << j) - 1, {out.feature(base + 2 * (kk - 1) + 1): 1})
        if signed_top:
            ss = Lin()
            for m in range(24, 31):
                ss = ss + (1 << (m - 24)) * (A[m] + B[m])
            ss = ss + 128 * ((1 - A[31]) + (1 - B[31]))
            ny += n_step(ss, 256, {out.feature(base + 64): 1})
            ny += n_step(ss, 255, {out.feature(base + 65): 1})
        return ny

    @staticmethod
    def carry_form(dig, base: int, kk: int, cin: Lin, signed: bool = False):
        """(form, threshold): the carry into bit kk of an addition whose digits are in dig[base:]."""
        D = lambda x: dig.f(base + 2 * (x - 1)) + dig.f(base + 2 * (x - 1) + 1)
        q = (kk - 1) // 8
        terms = [2 * cin] + [D(8 * (bb + 1)) for bb in range(q)]
        terms.append(dig.f(base + 64) + dig.f(base + 65) if (signed and kk == 32) else D(kk))
        z = Lin()
        for t_, f_ in enumerate(terms):
            z = z + (3 ** t_) * f_
        return z, (3 ** len(terms) + 1) / 2

    def atomic_unit(self):
        """The new value of an atomic, for the first active lane: old (loaded) op data."""
        mi = self.mem_info
        k = mi["k"]
        first = self.first_lane()
        atom = mi["atom"]
        a = lambda name: atom.f(ATOM_OPS.index(name))
        ld, data, cmpv = mi["ld"], mi["data"], mi["cmp"]
        # C: the first lane's values; the adder's second operand per operation
        old = self.bits(f"a.old.{k}", 32)
        dat = self.bits(f"a.dat.{k}", 32)
        cv = self.bits(f"a.cmp.{k}", 32)
        sec = self.bits(f"a.sec.{k}", 32)
        nc = []
        for l in range(LANES):
            for i in range(32):
                nc += n_gated(first.f(l), ld[l].f(i), {old.feature(i): 1})
                nc += n_gated(first.f(l), data[l].f(i), {dat.feature(i): 1})
                nc += n_gated(first.f(l), cmpv[l].f(i), {cv.feature(i): 1})
                nc += n_gated(first.f(l) + a("add") - 1, data[l].f(i), {sec.feature(i): 1})
        nc += n_gated(a("inc"), Lin.const(1), {sec.feature(0): 1})
        for i in range(32):
            nc += n_gated(a("dec"), Lin.const(1), {sec.feature(i): 1})
        self.circ(f"atomc.{k}", [old, dat, cv, sec], nc)
        O = [old.f(i) for i in range(32)]
        Dt = [dat.f(i) for i in range(32)]
        # D: digits of old + sec, of old + ~dat, AND bits, old == 0
        dig = self.bits(f"a.dig.{k}", 64 + 66)
        andb = self.bits(f"a.and.{k}", 32)
        zero = self.bits(f"a.zero.{k}", 1)
        nd = self.adder_digits(O, [sec.f(i) for i in range(32)], dig, 0)
        nd += self.adder_digits(O, [1 - x for x in Dt], dig, 64, signed_top=True)
        for i in range(32):
            nd += n_step(O[i] + Dt[i], 2, {andb.feature(i): 1})
        nd += n_step(-1 * sum(O, Lin()), 0, {zero.feature(0): 1})
        self.circ(f"atomd.{k}", [dig, andb, zero], nd)
        # E: the sum, comparisons, logic
        sm = self.bits(f"a.sum.{k}", 32)
        lg = self.bits(f"a.logic.{k}", 32)
        cmp_ = self.bits(f"a.cmpres.{k}", 5)     # ge_u, gt_u, lt_u, lt_s, eq
        ne = []
        for i in range(32):
            ne += n_linear(O[i] + sec.f(i), {sm.feature(i): 1})
        for kk in range(1, 33):
            z, t = self.carry_form(dig, 0, kk, Lin())
            out = {sm.feature(kk - 1): -2}
            if kk < 32:
                out[sm.feature(kk)] = 1
            ne += n_step(z, t, out)
        z1, t1 = self.carry_form(dig, 64, 32, Lin.const(1))
        z0, t0 = self.carry_form(dig, 64, 32, Lin())
        zs, ts = self.carry_form(dig, 64, 32, Lin.const(1), signed=True)
        ne += n_step(z1, t1, {cmp_.feature(0): 1})                     # old >= dat (unsigned)
        ne += n_step(z0, t0, {cmp_.feature(1): 1})                     # old > dat
        ne += n_linear(Lin.const(1), {cmp_.feature(2): 1, cmp_.feature(3): 1})
        ne += n_step(z1, t1, {cmp_.feature(2): -1})                    # old < dat (unsigned)
        ne += n_step(zs, ts, {cmp_.feature(3): -1})                    # old < dat (signed)
        x = Lin()
        for i in range(32):
            x = x + O[i] + Dt[i] - 2 * andb.f(i)
        ne += n_step(-1 * x, 0, {cmp_.feature(4): 1})                  # old == dat
        for i in range(32):
            ne += n_gated(a("and"), andb.f(i), {lg.feature(i): 1})
            ne += n_gated(a("or"), O[i] + Dt[i] - andb.f(i), {lg.feature(i): 1})
            ne += n_gated(a("xor"), O[i] + Dt[i] - 2 * andb.f(i), {lg.feature(i): 1})
        self.circ(f"atome.{k}", [sm, lg, cmp_], ne)
        # F: select the new value
        new = self.bits(f"a.new.{k}", 32)
        signed = mi["signed"]
        nf = []
        ge_u, gt_u, lt_u, lt_s, eq = (cmp_.f(i) for i in range(5))
        zr = zero.f(0)
        for i in range(32):
            S, Lg, Dv, Ov, Cv = sm.f(i), lg.f(i), Dt[i], O[i], cv.f(i)
            nf += n_gated(a("add"), S, {new.feature(i): 1})
            nf += n_gated(a("and") + a("or") + a("xor"), Lg, {new.feature(i): 1})
            nf += n_gated(a("exch"), Dv, {new.feature(i): 1})
            nf += n_gated(a("inc") - ge_u, S, {new.feature(i): 1})
            nf += n_gated(a("dec") + zr - 1, Dv, {new.feature(i): 1})
            nf += n_gated(a("dec") - zr + gt_u - 1, Dv, {new.feature(i): 1})
            nf += n_gated(a("dec") - zr - gt_u, S, {new.feature(i): 1})
            nf += n_gated(a("cas") + eq - 1, Cv, {new.feature(i): 1})
            nf += n_gated(a("cas") - eq, Ov, {new.feature(i): 1})
            for name, mine in (("min", True), ("max", False)):
                # unsigned or signed by the instruction
                for lt_bit, sg in ((lt_u, 1 - signed), (lt_s, signed)):
                    take_old = (lt_bit if mine else 1 - lt_bit)
                    nf += n_gated(a(name) + sg + take_old - 2, Ov, {new.feature(i): 1})
                    nf += n_gated(a(name) + sg - take_old - 1, Dv, {new.feature(i): 1})
        self.circ(f"atomf.{k}", [new], nf)
        self.mem_info["new"] = new
        # the bytes a store or atomic leaves for MEMW tokens (per lane; an atomic's in its first lane)
        mop = mi["op"]
        st, at = mop.f(MEM_OPS.index("ST")), mop.f(MEM_OPS.index("ATOM"))
        mv = self.bits(f"mbuf.in.{k}", 32 * LANES)
        nm = []
        for l in range(LANES):
            for i in range(32):
                nm += n_gated(st, data[l].f(i), {mv.feature(32 * l + i): 1})
                nm += self.clean_gate(at + first.f(l) - 1, new.f(i), {mv.feature(32 * l + i): 1})  # an adder's output
        self.circ(f"mbuf.{k}", [mv], nm)
        mb = M.GDNMemory(self.p, "mbuf", slots=1, width=32 * LANES, field_bits=8)
        slot = self.p.vars["slot0"]
        mb.write(slot, mv, field_enable=[self.k("EXEC")] * (4 * LANES))
        self.mbuf = mb.read(slot, name="mbuf.out")

    # -- cross-lane unit -----------------------------------------------------------------------------

    def xlane(self, k: int):
        """shfl.sync (up/down/bfly/idx with clamp and segment), vote.sync, activemask."""
        cfg = self.cfg
        segname = f"s{k}"
        seg = self.rom(segname)
        ports = self.regfile(k, seg, PORTS[XLANE])
        names = ["a", "bsrc", "csrc"]
        opts = {n: sources_for(cfg, k, n) for n in names}
        sel = {n: self.decode_field(seg, segname, n, len(opts[n]), f"sel.{k}.{n}") for n in names}
        xop = self.decode_field(seg, segname, "op", len(XLANE_OPS), f"xop.{k}")
        mode = self.decode_field(seg, segname, "mode", 4, f"xmode.{k}")
        widths = {"a": 32, "bsrc": 5, "csrc": 13}
        vals = {n: [self.bits(f"x{n}.{k}.{l}", widths[n]) for l in range(LANES)] for n in names}
        neurons = []
        for n in names:
            neurons += self.mux(k, n, sel[n], opts[n], ports, vals[n], nbits=widths[n])
        self.circ_groups(f"mux.{k}", [[vals[n][l] for n in names] for l in range(LANES)], neurons)
        a, bv, cv = vals["a"], vals["bsrc"], vals["csrc"]
        mask = [self.c_mask.f(l) for l in range(LANES)]
        # X1: the highest lane a lane may read (max_lane) and the idx source lane, bit by bit;
        # the vote bits of the active lanes
        mlb = [self.bits(f"xmax.{k}.{l}", 5) for l in range(LANES)]
        jb = [self.bits(f"xidx.{k}.{l}", 5) for l in range(LANES)]
        vb = self.bits(f"xvote.{k}", LANES)
        n1 = []
        for l in range(LANES):
            lb = _bits_of(l, 5)
            for i in range(5):
                seg_i = cv[l].f(8 + i)
                for src_, out in ((cv[l].f(i), mlb[l]), (bv[l].f(i), jb[l])):
                    if lb[i]:
                        n1 += n_step(seg_i + src_, 1, {out.feature(i): 1})
                    else:
                        n1 += n_step(src_ - seg_i, 1, {out.feature(i): 1})
            n1 += n_step(a[l].f(0) + mask[l], 2, {vb.feature(l): 1})
        self.circ(f"xl1.{k}", mlb + jb + [vb], n1)
        # X2: which lane each lane reads (at most one), and the vote results
        cond = [self.bits(f"xsrc.{k}.{l}", LANES) for l in range(LANES)]
        vr = self.bits(f"xvr.{k}", 3)                    # any, all, uni
        n2 = []
        shfl = xop.f(XLANE_OPS.index("SHFL"))
        for l in range(LANES):
            ml = sum(((1 << i) * mlb[l].f(i) for i in range(5)), Lin())
            bsrc = [bv[l].f(i) for i in range(5)]
            for j in range(LANES):
                for mi, m in enumerate(SHFL_MODES):
                    if m == "up":
                        if j > l:
                            continue
                        mt, ok = match(bsrc, l - j), j - ml
                    elif m == "down":
                        if j < l:
                            continue
                        mt, ok = match(bsrc, j - l), ml - j
                    elif m == "bfly":
                        mt, ok = match(bsrc, l ^ j), ml - j
                    else:
                        mt, ok = match([jb[l].f(i) for i in range(5)], j), ml - j
                    n2 += n_step(512 * (shfl + mode.f(mi)) + 32 * mt + ok, 1024 + 160, {cond[l].feature(j): 1})
        cnt = sum((vb.f(l) for l in range(LANES)), Lin())
        nact = sum(mask, Lin())
        n2 += n_step(cnt, 1, {vr.feature(0): 1})
        n2 += n_step(cnt - nact, 0, {vr.feature(1): 1, vr.feature(2): 1})
        n2 += n_step(-1 * cnt, 0, {vr.feature(2): 1})
        self.circ(f"xl2.{k}", cond + [vr], n2)
        # X3: the results
        vote = xop.f(XLANE_OPS.index("VOTE"))
        am = xop.f(XLANE_OPS.index("ACTIVEMASK"))
        unit = Unit(XLANE, k)
        for l in range(LANES):
            r = self.bits(f"xr.{k}.{l}", 32)
            n3 = []
            took = sum((cond[l].f(j) for j in range(LANES)), Lin())
            for i in range(32):
                for j in range(LANES):
                    n3 += n_gated(cond[l].f(j), a[j].f(i), {r.feature(i): 1})
                n3 += n_gated(shfl - took, a[l].f(i), {r.feature(i): 1})
            for i in range(LANES):
                n3 += n_gated(vote + mode.f(VOTE_MODES.index("ballot")) - 1, vb.f(i), {r.feature(i): 1})
                n3 += n_gated(am, mask[i], {r.feature(i): 1})
            for vi, vm in enumerate(("any", "all", "uni")):
                n3 += n_gated(vote + mode.f(VOTE_MODES.index(vm)) - 1, vr.f(vi), {r.feature(0): 1})
            self.circ(f"xl3.{k}.{l}", [r], n3)
            unit.lo.append(r)
            unit.hi.append(self.view(f"xok.{k}.{l}", [took]))
        self.units.append(unit)

    # -- terminator and lane states ----------------------------------------------------------------------

    def lane_states(self):
        """The next pc and state of the lanes the pass served, and the lane table (every warp's
        lanes' pc, RUN / WAIT / epoch parity) that the control reads. GO and BLOCK reset it."""
        p = self.p
        tail = self.tail
        first = self.first_lane()
        mi = self.mem_info
        atom = mi["op"].f(MEM_OPS.index("ATOM")) if mi else Lin()
        term = self.decode_field(tail, "tail", "term", len(TERM_KINDS), "term")
        tk = lambda name: term.f(TERM_KINDS.index(name))
        # the terminator's register port, and whether each lane's predicate is non-zero
        mem = M.GDNMemory(p, "reg.term", slots=1 << (WARP_BITS + REG_BITS), width=32 * LANES, field_bits=8)
        mem.write(self.rkey, self.view("reg.term.in", [self.t_v.f(i % 8) for i in range(32 * LANES)]),
                  field_enable=[self.cwe.f(i) for i in range(4 * LANES)])
        addr = self.view("reg.term.q", [self.c_warp.f(i) for i in range(WARP_BITS)]
                         + self.field_forms(tail, "tail", "tp_reg"))
        r = mem.read(addr, name="reg.term.r", enable=self.field_forms(tail, "tail", "tp_en")[0])
        mem.late = True
        tports = [[[r.f(32 * l + i) for i in range(32)] for l in range(LANES)]]
        nslots = len(self.cfg.slots)
        opts = sources_for(self.cfg, nslots, "pred")
        psel = self.decode_field(tail, "tail", "pred", len(opts), "psel")
        nz = self.bits("pred.nz", LANES)
        done = self.bits("done", LANES)
        cw = self.cw
        en = self.bits("lanes.en", 8 * LANES)
        n1 = []
        for l in range(LANES):
            for oi, opt in enumerate(opts):
                forms = self.source_forms(nslots, opt, l, tports)
                if forms is None:
                    continue
                s = sum(forms, Lin())
                n1 += n_step(64 * psel.f(oi) + s, 65, {nz.feature(l): 1})
            # served lanes: all of the mask, but an atomic serves only the first
            n1 += n_step(2 * self.c_mask.f(l) + (1 - atom) + first.f(l), 3, {done.feature(l): 1})
            for w in range(8):
                n1 += n_step(2 * (self.k("EXEC") + cw.f(w) + self.c_mask.f(l)) + (1 - atom) + first.f(l), 7,
                             {en.feature(LANES * w + l): 1})
        self.circ("term.pred", [nz, done, en], n1)
        self.done = done
        # next pc / state per lane (EXEC), and the fresh state of every lane (GO / BLOCK)
        start = self.k("GO") + self.k("BLOCK")
        t1 = self.field_forms(tail, "tail", "t1")
        t2 = self.field_forms(tail, "tail", "t2")
        npc = [self.bits(f"lanes.pc.{l}", self.pcb) for l in range(LANES)]
        nst = [self.bits(f"lanes.st.{w}.{l}", 3) for w in range(8) for l in range(LANES)]
        n2 = []
        for l in range(LANES):
            for i in range(self.pcb):
                o = {npc[l].feature(i): 1}
                n2 += n_gated(self.k("EXEC") + tk("jump") + tk("barrier") - 1, t1[i], o)
                n2 += n_gated(self.k("EXEC") + tk("branch") + nz.f(l) - 2, t1[i], o)
                n2 += n_gated(self.k("EXEC") + tk("branch") - nz.f(l) - 1, t2[i], o)
                n2 += n_gated(self.k("EXEC") + tk("exit") - 1, self.c_pc.f(i), o)
                n2 += n_gated(start, self.entry.f(i), o)
        nth = sum(((1 << i) * self.nthreads.f(i) for i in range(6)), Lin())
        for w in range(8):
            for l in range(LANES):
                st = nst[LANES * w + l]
                n2 += n_step(self.k("EXEC") + tk("jump") + tk("branch"), 2, {st.feature(0): 1})
                n2 += n_step(self.k("EXEC") + tk("barrier"), 2, {st.feature(1): 1})
                n2 += n_step(self.k("EXEC") + tk("barrier") + self.c_epoch.f(0), 3, {st.feature(2): 1})
                n2 += n_step(64 * start + nth, 64 + LANES * w + l + 1, {st.feature(0): 1})
        self.circ("lanes.next", npc + nst, n2)
        lpc = M.GDNMemory(p, "lanes.pc", slots=1, width=self.pcb * 8 * LANES, field_bits=self.pcb)
        lst = M.GDNMemory(p, "lanes.st", slots=1, width=3 * 8 * LANES, field_bits=3)
        slot = p.vars["slot0"]
        fe = [en.f(i) + start for i in range(8 * LANES)]
        lpc.write(slot, self.view("lanes.pc.in", [npc[i % LANES].f(b) for i in range(8 * LANES) for b in range(self.pcb)]),
                  field_enable=fe)
        lst.write(slot, self.view("lanes.st.in", [nst[i].f(b) for i in range(8 * LANES) for b in range(3)]),
                  field_enable=fe)
        self.lpc = lpc.read(slot, name="lanes.pc.out")
        self.lst = lst.read(slot, name="lanes.st.out")

    # -- carried values ------------------------------------------------------------------------------

    def carry_buffer(self):
        """The values the pass's carries write back (EXEC), kept for the CARRY passes after it,
        and the registers they go to as they are now (a register file copy with a port per carry)."""
        p = self.p
        tail = self.tail
        opts = []
        for u in self.units:
            opts.append((u.k, 0))
            if u.kind in (MEM, XLANE):
                opts.append((u.k, 1))
        cvs = [self.bits(f"cbuf.in.{j}", 32 * LANES) for j in range(self.J)]
        neurons = []
        for j in range(self.J):
            slot_sel = self.decode_field(tail, "tail", f"c{j}_slot", len(self.cfg.slots), f"cslot.{j}")
            hi = self.field_forms(tail, "tail", f"c{j}_hi")[0]
            for (k, part) in opts:
                u = self.units[k]
                cond = slot_sel.f(k) + (hi if part else 1 - hi) - 1
                for l in range(LANES):
                    var = u.hi[l] if part else u.lo[l]
                    if var is None:
                        continue
                    for i in range(var.size):
                        neurons += self.clean_gate(cond, var.f(i), {cvs[j].feature(32 * l + i): 1})
        self.circ_groups("cbuf.mux", [[v] for v in cvs], neurons)
        cv = self.view("cbuf.in", [v.f(i) for v in cvs for i in range(32 * LANES)])
        mem = M.GDNMemory(p, "cbuf", slots=1, width=32 * LANES * self.J, field_bits=8)
        slot = p.vars["slot0"]
        mem.write(slot, cv, field_enable=[self.k("EXEC")] * (4 * LANES * self.J))
        self.cbuf = mem.read(slot, name="cbuf.out")
        # the carried registers' current values
        rf = M.GDNMemory(p, "reg.emit", slots=1 << (WARP_BITS + REG_BITS), width=32 * LANES, field_bits=8)
        rf.write(self.rkey, self.view("reg.emit.in", [self.t_v.f(i % 8) for i in range(32 * LANES)]),
                 field_enable=[self.cwe.f(i) for i in range(4 * LANES)])
        self.cold = []
        for j in range(self.J):
            addr = self.view(f"reg.emit.q{j}", [self.c_warp.f(i) for i in range(WARP_BITS)]
                             + self.field_forms(tail, "tail", f"c{j}_reg"))
            self.cold.append(rf.read(addr, name=f"reg.emit.r{j}"))
        rf.late = True

    # -- control: the next EXEC / WARP / RELEASE / BLOCK / HALT ----------------------------------------

    def early(self):
        """Values the control and the emitter need that depend only on the control state."""
        self.cw = G.decode(self.p, self.c_warp, 8, name="cw")
        nb = self.bits("next.block", BLOCK_BITS)
        ne = self.bits("next.epoch", EPOCH_BITS)
        blast = self.bits("more.blocks", 1)
        n = []
        for v, c, bits in ((nb, self.c_block, BLOCK_BITS), (ne, self.c_epoch, EPOCH_BITS)):
            for i in range(bits):           # x + 1: bit i flips when every lower bit is 1
                low = sum((c.f(m) for m in range(i)), Lin())
                n += n_linear(c.f(i), {v.feature(i): 1})
                n += n_step(low + c.f(i), i + 1, {v.feature(i): -1})
                n += n_step(low - c.f(i), i, {v.feature(i): 1})
        diff = sum(((1 << i) * (self.lastblock.f(i) - self.c_block.f(i)) for i in range(BLOCK_BITS)), Lin())
        n += n_step(diff, 1, {blast.feature(0): 1})
        self.circ("control.early", [nb, ne, blast], n)
        self.next_block, self.next_epoch, self.more_blocks = nb, ne, blast

    def control(self):
        lpc, lst, cw = self.lpc, self.lst, self.cw
        par = self.c_epoch.f(0)
        run = self.bits("c.run", 8 * LANES)
        wait = self.bits("c.wait", 8 * LANES)
        pcc = [self.bits(f"c.pc.{l}", self.pcb) for l in range(LANES)]
        n1 = []
        for i in range(8 * LANES):
            R, W, P = lst.f(3 * i), lst.f(3 * i + 1), lst.f(3 * i + 2)
            n1 += n_linear(R, {run.feature(i): 1})
            n1 += n_step(W + P - par, 2, {run.feature(i): 1})       # waited at an earlier epoch
            n1 += n_step(W + par - P, 2, {run.feature(i): 1})
            n1 += n_step(W + P + par, 3, {wait.feature(i): 1})
            n1 += n_step(W - P - par, 1, {wait.feature(i): 1})
        for w in range(8):
            for l in range(LANES):
                for b in range(self.pcb):
                    n1 += n_gated(cw.f(w), lpc.f(self.pcb * (LANES * w + l) + b), {pcc[l].feature(b): 1})
        self.circ("control.1", [run, wait] + pcc, n1)
        runc = self.bits("c.runc", LANES)
        anyrun = self.bits("c.anyrun", 8)
        anywait = self.bits("c.anywait", 1)
        n2 = []
        for l in range(LANES):
            for w in range(8):
                n2 += n_gated(cw.f(w), run.f(LANES * w + l), {runc.feature(l): 1})
        for w in range(8):
            n2 += n_step(sum((run.f(LANES * w + l) for l in range(LANES)), Lin()), 1, {anyrun.feature(w): 1})
        n2 += n_step(sum((wait.f(i) for i in range(8 * LANES)), Lin()), 1, {anywait.feature(0): 1})
        self.circ("control.2", [runc, anyrun, anywait], n2)
        le = self.bits("c.le", LANES * LANES)
        nw = self.bits("c.nextwarp", 8)
        cur = self.bits("c.cur", 1)
        n3 = []
        val = lambda l: sum(((1 << b) * pcc[l].f(b) for b in range(self.pcb)), Lin())
        for l in range(LANES):
            for m in range(LANES):
                if m != l:
                    n3 += n_step(val(m) - val(l) + (1 << self.pcb) * (1 - runc.f(m)), 0, {le.feature(LANES * l + m): 1})
        for c in range(8):
            for w2 in range(8):
                if w2 == c:
                    continue
                between = [(c + d) % 8 for d in range(1, (w2 - c) % 8)]
                form = 8 * cw.f(c) + 8 * anyrun.f(w2) - sum((anyrun.f(x) for x in between), Lin())
                n3 += n_step(form, 16, {nw.feature(w2): 1})
        n3 += n_step(sum((runc.f(l) for l in range(LANES)), Lin()), 1, {cur.feature(0): 1})
        self.circ("control.3", [le, nw, cur], n3)
        ismin = self.bits("c.exec.mask", LANES)
        ck = self.bits("c.kind", 5)                      # EXEC, WARP, RELEASE, BLOCK, HALT
        n4 = []
        for l in range(LANES):
            s = sum((le.f(LANES * l + m) for m in range(LANES) if m != l), Lin())
            n4 += n_step(8 * runc.f(l) + s, 8 + LANES - 1, {ismin.feature(l): 1})
        ar = sum((anyrun.f(w) for w in range(8)), Lin())
        n4 += n_linear(cur.f(0), {ck.feature(0): 1})
        n4 += n_step(ar - 8 * cur.f(0), 1, {ck.feature(1): 1})
        n4 += n_step(anywait.f(0) - 8 * ar, 1, {ck.feature(2): 1})
        n4 += n_step(self.more_blocks.f(0) - anywait.f(0) - ar, 1, {ck.feature(3): 1})
        n4 += n_step(1 - self.more_blocks.f(0) - anywait.f(0) - ar, 1, {ck.feature(4): 1})
        self.circ("control.4", [ismin, ck], n4)
        fmin = self.bits("c.exec.first", LANES)
        n5 = []
        for l in range(LANES):
            n5 += n_step(ismin.f(l) - sum((ismin.f(m) for m in range(l)), Lin()), 1, {fmin.feature(l): 1})
        self.circ("control.5", [fmin], n5)
        self.ctl = dict(pcc=pcc, ismin=ismin, kind=ck, first=fmin, nextwarp=nw)

    # -- emitter: which token comes out ---------------------------------------------------------------------

    def faults(self):
        """The first faulting lane of an EXEC pass and whether its fault is a misalignment."""
        mi = self.mem_info
        flt, bad = mi["fault"], mi["bad"]
        ffl = self.bits("f.lane", LANES)
        fx = self.bits("f.any", 2)                        # a fault this pass, misaligned
        n = []
        for l in range(LANES):
            before = sum((flt.f(m) for m in range(l)), Lin())
            n += n_step(flt.f(l) - before, 1, {ffl.feature(l): 1})
            n += n_step(flt.f(l) - before + bad[l].f(0), 2, {fx.feature(1): 1})
        n += n_step(self.k("EXEC") + sum((flt.f(l) for l in range(LANES)), Lin()) - 1, 1, {fx.feature(0): 1})
        self.circ("fault.first", [ffl, fx], n)
        self.fault = dict(lane=ffl, any=fx)

    def emitter(self):
        J = self.J
        mi = self.mem_info
        cb, mb = self.cbuf, self.mbuf
        done = self.done
        P = sum(((1 << i) * self.t_pos.f(i) for i in range(7)), Lin())
        pass_kind = self.k("EXEC") + self.k("CARRY") + self.k("MEMW")
        # E0: which lanes' memory writes a store / atomic makes, an atomic's partial pass, first done lane
        op = mi["op"]
        st, at = op.f(MEM_OPS.index("ST")), op.f(MEM_OPS.index("ATOM"))
        first = self.first_lane()
        e0 = self.bits("e.lanes", 2 * LANES + 1)        # memw lane, first done lane, partial
        n0 = []
        for l in range(LANES):
            n0 += n_step(st + self.c_mask.f(l), 2, {e0.feature(l): 1})
            n0 += n_step(at + first.f(l), 2, {e0.feature(l): 1})
            n0 += n_step(done.f(l) - sum((done.f(m) for m in range(l)), Lin()), 1, {e0.feature(LANES + l): 1})
        n0 += n_step(8 * at + sum((self.c_mask.f(l) for l in range(LANES)), Lin()), 10, {e0.feature(2 * LANES): 1})
        self.circ("emit.0", [e0], n0)
        partial = e0.f(2 * LANES)
        # E1: changed bytes (of done lanes), differing pairs, eligibility
        NC = 4 * J * (LANES + 1) + 4 * LANES
        chd = self.bits("e.changed", J * 4 * LANES)
        pdiff = self.bits("e.pairs", J * 4 * 6)
        mch = self.bits("e.mchanged", 4 * LANES)
        elig = self.bits("e.elig", NC)
        n1 = []
        nbyte = lambda j, l, b: [cb.f(32 * (LANES * j + l) + 8 * b + i) for i in range(8)]
        obyte = lambda j, l, b: [self.cold[j].f(32 * l + 8 * b + i) for i in range(8)]
        val8 = lambda bits: sum(((1 << i) * x for i, x in enumerate(bits)), Lin())
        pairs = [(l, m) for l in range(LANES) for m in range(l + 1, LANES)]
        for j in range(J):
            for b in range(4):
                for l in range(LANES):
                    d = val8(nbyte(j, l, b)) - val8(obyte(j, l, b))
                    g = 256 * (done.f(l) - 1)
                    o = {chd.feature(LANES * (4 * j + b) + l): 1}
                    n1 += n_step(d + g, 1, o)
                    n1 += n_step(-1 * d + g, 1, o)
                for pi, (l, m) in enumerate(pairs):
                    d = val8(nbyte(j, l, b)) - val8(nbyte(j, m, b))
                    g = 256 * (done.f(l) + done.f(m) - 2)
                    o = {pdiff.feature(6 * (4 * j + b) + pi): 1}
                    n1 += n_step(d + g, 1, o)
                    n1 += n_step(-1 * d + g, 1, o)
        for l in range(LANES):
            for b in range(4):
                d = val8([mb.f(32 * l + 8 * b + i) for i in range(8)]) - val8([mi["ld"][l].f(8 * b + i) for i in range(8)])
                o = {mch.feature(4 * l + b): 1}
                n1 += n_step(d, 1, o)
                n1 += n_step(-1 * d, 1, o)
        for c in range(NC):
            n1 += n_step(c + 1 - P + 128 * pass_kind, 129, {elig.feature(c): 1})
        self.circ("emit.1", [chd, pdiff, mch, elig], n1)
        # E2: valid candidates, in pass order
        valid = self.bits("e.valid", NC)
        n2 = []
        width = mi["width"]
        for j in range(J):
            en = self.field_forms(self.tail, "tail", f"c{j}_en")[0]
            for b in range(4):
                pd = sum((pdiff.f(6 * (4 * j + b) + pi) for pi in range(6)), Lin())
                chs = sum((chd.f(LANES * (4 * j + b) + l) for l in range(LANES)), Lin())
                for ls in range(LANES + 1):
                    c = carry_pos(j, b, ls) - 1
                    if ls == LANES:
                        form = 128 * (en + (1 - partial) + elig.f(c)) - 128 * pd + chs
                    else:
                        form = 128 * (en + chd.f(LANES * (4 * j + b) + ls) + elig.f(c)) + pd + partial
                    n2 += n_step(form, 385, {valid.feature(c): 1})
        for l in range(LANES):
            for b in range(4):
                c = memw_pos(J, l, b) - 1
                bw = sum((width.f(wi) for wi, size in enumerate((1, 2, 4)) if b < size), Lin())
                n2 += n_step(e0.f(l) + bw + mch.f(4 * l + b) + elig.f(c), 4, {valid.feature(c): 1})
        self.circ("emit.2", [valid], n2)
        # E3: the first valid candidate
        firstc = self.bits("e.first", NC)
        n3 = []
        for c in range(NC):
            before = sum((valid.f(x) for x in range(c)), Lin())
            n3 += n_step(128 * valid.f(c) - before, 128, {firstc.feature(c): 1})
        self.circ("emit.3", [firstc], n3)
        self.output(firstc, e0)

    def output(self, firstc, e0):
        """The output variables the rules read: kind (one bit per OUT_KINDS), A (value / pc /
        warp / block / epoch), B (lanes: mask, lane, or 4 = all), C (carry 4j+byte, byte, fault kind)."""
        J = self.J
        kind = self.bits("out.kind", len(OUT_KINDS))
        A = self.bits("out.a", max(8, self.pcb))             # a byte, or a pc
        B = self.bits("out.b", 4)
        C = self.bits("out.c", 4)
        ko = lambda name: {kind.feature(OUT_KINDS.index(name)): 1}
        fx, fmis = self.fault["any"].f(0), self.fault["any"].f(1)
        ffl = self.fault["lane"]
        NCC = 4 * J * (LANES + 1)
        NC = firstc.size
        carry = sum((firstc.f(c) for c in range(NCC)), Lin())
        memw = sum((firstc.f(c) for c in range(NCC, NC)), Lin())
        cand = carry + memw
        n = []
        n += n_linear(fx, ko("FAULT"))
        n += n_step(carry - fx, 1, ko("CARRY"))
        n += n_step(memw - fx, 1, ko("MEMW"))
        ck = self.ctl["kind"]
        quiet = cand + fx                                 # 1 when a candidate or a fault speaks
        for ci, name in enumerate(("EXEC", "WARP", "RELEASE", "BLOCK", "HALT")):
            n += n_step(ck.f(ci) - quiet, 1, ko(name))

        def const(cond, value, var, nbits):
            out = []
            for i in range(nbits):
                if (value >> i) & 1:
                    out += n_gated(cond, Lin.const(1), {var.feature(i): 1})
            return out

        cb, mb = self.cbuf, self.mbuf
        for j in range(J):
            for b in range(4):
                for ls in range(LANES + 1):
                    c = carry_pos(j, b, ls) - 1
                    g = firstc.f(c) - fx
                    n += const(g, ls, B, 4)
                    n += const(g, 4 * j + b, C, 4)
                    for l in ([ls] if ls < LANES else range(LANES)):
                        cond = g if ls < LANES else g + e0.f(LANES + l) - 1
                        for i in range(8):
                            n += n_gated(cond, cb.f(32 * (LANES * j + l) + 8 * b + i), {A.feature(i): 1})
        for l in range(LANES):
            for b in range(4):
                c = memw_pos(J, l, b) - 1
                g = firstc.f(c) - fx
                n += const(g, l, B, 4)
                n += const(g, b, C, 4)
                for i in range(8):
                    n += n_gated(g, mb.f(32 * l + 8 * b + i), {A.feature(i): 1})
        # faults: lane and kind (read 0, write 1, misaligned 2, atomic 3)
        op = self.mem_info["op"]
        stw = op.f(MEM_OPS.index("ST")) + op.f(MEM_OPS.index("ATOM"))
        atw = op.f(MEM_OPS.index("ATOM"))
        for l in range(LANES):
            n += const(fx + ffl.f(l) - 1, l, B, 4)
        n += n_step(fx + stw - fmis, 2, {C.feature(0): 1})
        n += n_step(fx + fmis, 2, {C.feature(1): 1})
        n += n_step(fx + atw - fmis, 2, {C.feature(1): 1})
        # control tokens
        pcc, ismin, fmin, nw = self.ctl["pcc"], self.ctl["ismin"], self.ctl["first"], self.ctl["nextwarp"]
        ex = ck.f(0) - quiet
        for l in range(LANES):
            for i in range(self.pcb):
                n += n_gated(ex + fmin.f(l) - 1, pcc[l].f(i), {A.feature(i): 1})
            n += n_gated(ex, ismin.f(l), {B.feature(l): 1})
        for w in range(8):
            n += const(ck.f(1) - quiet + nw.f(w) - 1, w, A, 8)
        for i in range(EPOCH_BITS):
            n += n_gated(ck.f(2) - quiet, self.next_epoch.f(i), {A.feature(i): 1})
        for i in range(BLOCK_BITS):
            n += n_gated(ck.f(3) - quiet, self.next_block.f(i), {A.feature(i): 1})
        self.circ("emit.out", [kind, A, B, C], n)
        self.out = dict(kind=kind, A=A, B=B, C=C)
        self.rules()

    def rules(self):
        p = self.p
        kind, A, B, C = (self.out[x] for x in ("kind", "A", "B", "C"))
        kw = lambda name: (kind, 1 << OUT_KINDS.index(name), KIND_WEIGHT)
        for key, tok in self.tok.items():
            if not isinstance(key, tuple):
                key = (key,)
            name = key[0]
            if name == "EXEC":
                p.emit_when(tok, [kw("EXEC"), (A, key[1]), (B, key[2])])
            elif name == "CARRY":
                _, j, b, ls, v = key
                p.emit_when(tok, [kw("CARRY"), (A, v), (B, LANES if ls == "all" else ls), (C, 4 * j + b)])
            elif name == "MEMW":
                _, l, b, v = key
                p.emit_when(tok, [kw("MEMW"), (A, v), (B, l), (C, b)])
            elif name in ("WARP", "BLOCK", "RELEASE"):
                p.emit_when(tok, [kw(name), (A, key[1])])
            elif name == "HALT":
                p.emit_when(tok, [kw("HALT")])
            elif name == "FAULT":
                _, fk, l = key
                p.emit_when(tok, [kw("FAULT"), (B, l), (C, fk)])


def reference_tokens(hw: Hardware, prompt: list, max_tokens: int = 10_000) -> list:
    """The tokens the circuits generate after `prompt`, from their reference semantics (every
    neuron at its ideal value, exact Python, no model): the oracle for what the weights compute."""
    order = topo_order(hw.p)
    state: dict = {}

    def step(text):
        env = {"@token": hw.p.token_by_text[text]}
        for node in order:
            node.evaluate(env, state)
        return env

    for t in prompt[:-1]:
        step(t)
    env = step(prompt[-1])
    out = []
    while len(out) < max_tokens:
        tok = emitted(hw.p, env)
        out.append(tok)
        if ends_launch(tok):
            break
        env = step(tok)
    return out
