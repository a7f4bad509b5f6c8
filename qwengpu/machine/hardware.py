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
from qwengpu.compiler.gadgets import n_gated, n_linear, n_step

from .config import ALU, MEM, XLANE, MachineConfig
from .format import (ALU_OPCODES, ATOM_OPS, BLOCK_BITS, EPOCH_BITS, LANES, MEM_OPS, PC_BITS, REG_BITS,
                     SHFL_MODES, SPACES, SPECIALS, TERM_KINDS, VOTE_MODES, WARP_BITS, XLANE_OPS, WordFormat,
                     sources_for)
from .layout import LINE, LINES, LOCAL_THREADS, REGIONS
from .schedule import PORTS

KINDS = ["GO", "BLOCK", "WARP", "EXEC", "CARRY", "MEMW", "RELEASE", "HALT", "FAULT", "AT", "W"]
OUT_KINDS = ["EXEC", "CARRY", "MEMW", "WARP", "BLOCK", "RELEASE", "HALT", "FAULT"]
LTAB_BYTES = 3 * 2 * LANES + 1          # tid.x/y/z per lane (16 bits each), present lanes
BTAB_BYTES = 3 * 2                      # ctaid.x/y/z (16 bits each)
CONF_BYTES = 3                          # last block, entry bundle, warps per block
MEM_FIELDS = LINE + 2                   # 16 data bytes, 16 validity bits
BIG = 2048.0                            # switches a gated threshold off (forms stay < 4096)
KIND_WEIGHT = 100.0                     # the output kind dominates every other logit term


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
        for k, kind in enumerate(cfg.slots):
            if kind == ALU:
                self.alu(k)
            elif kind == MEM:
                self.mem(k)
            else:
                self.xlane(k)
        if not partial:
            self.control()
            self.emitter()

    # -- helpers ---------------------------------------------------------------------------------------

    def bits(self, name, n):
        return self.p.bits_var(name, n)

    def circ(self, name, outputs, neurons):
        return self.p.circuit(name, outputs, neurons)

    def view(self, name, forms):
        return self.p.linview(name, forms)

    def gstep(self, form: Lin, t: float, cond: Lin | None, out: dict) -> list:
        """coef*[form >= t] when cond (a clean 0/1 form) is 1, else 0."""
        if cond is not None:
            form = form + BIG * (cond - 1)
        return n_step(form, t, out)

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
        self.t_pc = p.input_bits("t_pc", PC_BITS)
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
        self.t_addr = p.input_bits("t_addr", 8)
        self.t_f = p.input_bits("t_f", self.F)

    def k(self, name: str) -> Lin:
        return self.kind.f(KINDS.index(name))

    def vocabulary(self):
        p = self.p
        kb = lambda name: 1 << KINDS.index(name)
        self.tok: dict = {}
        self.tok["GO"] = p.token("<go>", kind=kb("GO"))
        for b in range(1, 1 << BLOCK_BITS):
            self.tok[("BLOCK", b)] = p.token(f"<block {b}>", kind=kb("BLOCK"), t_block=b)
        for w in range(1 << WARP_BITS):
            self.tok[("WARP", w)] = p.token(f"<warp {w}>", kind=kb("WARP"), t_warp=w)
        for pc in range(1 << PC_BITS):
            for m in range(1, 1 << LANES):
                self.tok[("EXEC", pc, m)] = p.token(f"<exec {pc} {m:04b}>", kind=kb("EXEC"), t_pc=pc, t_mask=m)
        for j in range(self.J):
            for b in range(4):
                for ls in range(LANES + 1):
                    name = "all" if ls == LANES else ls
                    for v in range(256):
                        self.tok[("CARRY", j, b, name, v)] = p.token(
                            f"<carry {j} {b} {name} {v:02x}>", kind=kb("CARRY"), t_j=1 << j, t_byte=1 << b,
                            t_ls=1 << ls, t_v=v)
        for l in range(LANES):
            for b in range(4):
                for v in range(256):
                    self.tok[("MEMW", l, b, v)] = p.token(f"<memw {l} {b} {v:02x}>", kind=kb("MEMW"),
                                                          t_lane=1 << l, t_byte=1 << b, t_v=v)
        for e in range(1 << EPOCH_BITS):
            self.tok[("RELEASE", e)] = p.token(f"<release {e}>", kind=kb("RELEASE"), t_epoch=e)
        self.tok["HALT"] = p.token("<halt>", kind=kb("HALT"))
        for fk in range(4):
            for l in range(LANES):
                self.tok[("FAULT", fk, l)] = p.token(f"<fault {fk} {l}>", kind=kb("FAULT"), t_lane=1 << l,
                                                     t_byte=1 << fk)
        for si, space in enumerate(self.spaces):
            n = 1 << 8 if space not in ("ltab", "conf") else (1 << WARP_BITS if space == "ltab" else 1)
            for a in range(n):
                self.tok[("AT", space, a)] = p.token(f"<at {space} {a}>", kind=kb("AT"), t_space=si, t_addr=a)
        for f in range(self.F):
            for v in range(256):
                self.tok[("W", f, v)] = p.token(f"<w {f} {v:02x}>", kind=kb("W"), t_f=1 << f, t_v=v)

    # -- control state and the prompt's write cursor ---------------------------------------------------------

    def control_state(self):
        p = self.p
        z = [Lin()] * 8
        t = lambda v, n: [v.f(i) for i in range(v.size)] + [Lin()] * (n - v.size)
        forms = (t(self.t_pc, 8) + t(self.t_mask, 8) + t(self.t_warp, 8) + t(self.t_block, 8)
                 + t(self.t_space, 8) + t(self.t_addr, 8) + t(self.t_epoch, 8))
        value = self.view("ctl.in", forms)
        slot = p.view("slot0", "onehot", [Lin.const(1)], lambda: 0, [])
        ctl = M.GDNMemory(p, "ctl", slots=1, width=56, field_bits=8)
        start = self.k("BLOCK") + self.k("GO")
        ctl.write(slot, value, field_enable=[self.k("EXEC"), self.k("EXEC"), self.k("WARP") + start, start,
                                             self.k("AT"), self.k("AT"), self.k("RELEASE") + start])
        r = ctl.read(slot, name="ctl.out")
        sl = lambda lo, n: self.view(f"c_{lo}", [r.f(lo + i) for i in range(n)])
        self.c_pc = self.view("c_pc", [r.f(i) for i in range(PC_BITS)])
        self.c_mask = self.view("c_mask", [r.f(8 + i) for i in range(LANES)])
        self.c_warp = self.view("c_warp", [r.f(16 + i) for i in range(WARP_BITS)])
        self.c_block = self.view("c_block", [r.f(24 + i) for i in range(BLOCK_BITS)])
        self.c_space = self.view("c_space", [r.f(32 + i) for i in range(4)])
        self.c_addr = self.view("c_addr", [r.f(40 + i) for i in range(8)])
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
        mem = M.GDNMemory(self.p, f"rom.{segname}", slots=1 << PC_BITS, width=8 * n, field_bits=8)
        mem.write(self.c_addr, self.view(f"rom.{segname}.in", [self.t_v.f(i % 8) for i in range(8 * n)]),
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
        self.entry = self.view("c_entry", [self.conf.f(8 + i) for i in range(PC_BITS)])
        self.nwarps = self.view("c_nwarps", [self.conf.f(16 + i) for i in range(4)])
        self.present = self.view("c_present", [self.ltab.f(8 * (LTAB_BYTES - 1) + i) for i in range(LANES)])
        # special values per lane (forms; only the bits that can be non-zero)
        self.special_forms = {}
        for l in range(LANES):
            for c, name in enumerate(("tid.x", "tid.y", "tid.z")):
                base = 8 * (2 * (3 * l + c))
                self.special_forms[(name, l)] = [self.ltab.f(base + i) for i in range(16)]
            for c, name in enumerate(("ctaid.x", "ctaid.y", "ctaid.z")):
                self.special_forms[(name, l)] = [self.btab.f(16 * c + i) for i in range(16)]
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
            forms = [var.f(i) for i in range(var.size)] + [Lin()] * (32 - var.size)
        elif kind == "special":
            f = self.special_forms[(opt[1], lane)]
            forms = list(f) + [Lin()] * (32 - len(f))
        else:
            raise ValueError(opt)
        return [1 - x for x in forms] if inv else forms

    def mux(self, k: int, name: str, sel, opts: list, ports, outs: list, nbits: int = 32) -> list:
        """Neurons for outs[lane] (bits var) = the selected option (sel: onehot var over opts)."""
        neurons = []
        for oi, opt in enumerate(opts):
            for l in range(LANES):
                forms = self.source_forms(k, opt, l, ports)
                if forms is None:
                    continue
                for i in range(nbits):
                    if forms[i].terms:
                        neurons += n_gated(sel.f(oi), forms[i], {outs[l].feature(i): 1})
        return neurons

    def decode_field(self, seg, segname, fname, count, name):
        v = self.field_view(seg, segname, fname)
        return G.decode(self.p, v, count, name=name)

    # -- ALU slot ------------------------------------------------------------------------------------

    def alu(self, k: int):
        p = self.p
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
        neurons += self.mux(k, "c", sel["c"], opts["c"], ports, c, nbits=1)
        for oi, o in enumerate(opts["cin"]):
            for l in range(LANES):
                if o == ("1",):
                    neurons += n_gated(sel["cin"].f(oi), Lin.const(1), {cin[l].feature(0): 1})
                elif o == ("flag",) and k > 0 and self.units[k - 1].flag:
                    neurons += n_gated(sel["cin"].f(oi), self.units[k - 1].flag[l].f(0), {cin[l].feature(0): 1})
        self.circ(f"mux.{k}", a + b + c + cin, neurons)
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
            unit.lo.append(r)
            unit.hi.append(None)
            unit.flag.append(fl)
        self.units.append(unit)

    # -- memory unit ---------------------------------------------------------------------------------

    def mem(self, k: int):
        raise NotImplementedError("memory unit")

    def xlane(self, k: int):
        raise NotImplementedError("cross-lane unit")

    def control(self):
        raise NotImplementedError("control unit")

    def emitter(self):
        raise NotImplementedError("emitter")
