"""The memory unit: pending addresses (`pa`), machine lines by bit selection, alignment, window and
validity faults, the line memory (`mem`, a read port per lane), byte selection for loads."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler import memory as M
from qwengpu.compiler.gadgets import n_gated, n_step

from ..config import LANES, MEM
from ..format import ATOM_OPS, MEM_OPS, SPACES, sources_for
from ..image import PORTS
from ..layout import LINE
from .atomic import atomic_unit
from .builder import MEM_FIELDS, Builder, Unit, bits_of, match
from .lanes import first_lane
from .operands import mux
from .regfile import regfile
from .rom import rom


def line_forms(hw: Builder, space: str, addr: list, lane: int) -> list[Lin]:
    """The bits of the machine line of an address in `space` (`layout.MemoryMap`): bit selection,
    no arithmetic. The address's bits 4.. of the window (global: modulo the window), for local over
    the thread's lane and warp bits, then the region's first line's bits above them."""
    mm = hw.memory_map
    r = mm.regions[space]
    forms = [addr[4 + i] for i in range(r.bits - 4)]
    if space == "local":                    # thread = 4 * warp + lane
        forms += [Lin.const(b) for b in bits_of(lane, 2)] + [hw.c_warp.f(i) for i in range(mm.local_thread_bits)]
    const = lambda b: Lin.const(1) if b else Lin()
    return forms + [const((r.first >> i) & 1) for i in range(len(forms), mm.line_bits)]


def window_faults(hw: Builder, space: str, addr: list, ahi: list) -> list[Lin]:
    """Forms, at most one of them >= 1 (the others <= 0), and one exactly when the address lies
    outside the space's window. A window is its address bits' high bits matching a pattern --
    global windows of up to 4 KiB (GLOBAL_BASE is a multiple of them), shared, const, local (and the
    thread's warp bits above the threads with local memory) -- except a global window larger than
    4 KiB: [0x1000, 0x1000 + 2^g) takes the address's bit g to tell a low address (bits 12..g-1 must
    not all be zero) from a high one (they must), three exclusive cases."""
    mm = hw.memory_map
    r = mm.regions[space]
    v = Lin()
    for f in ahi:
        v = v + f
    if space == "local":                    # threads local_threads.. have no local memory
        for i in range(mm.local_thread_bits, hw.warp_bits):
            v = v + hw.c_warp.f(i)
    g = r.bits
    if space == "global" and r.base % (1 << g):
        high = v
        for i in range(g + 1, 32):
            high = high + addr[i]
        b = r.base.bit_length() - 1         # GLOBAL_BASE = 2^b
        mid = Lin()
        for i in range(b, g):
            mid = mid + addr[i]
        big = 64                            # > the bits of `mid`: any high bit switches the others off
        return [high,                                               # 2^(g+1) and beyond
                1 - addr[g] - mid - big * high,                      # below GLOBAL_BASE
                mid + (g - b) * (addr[g] - 1) - big * high]          # 2^g + GLOBAL_BASE and beyond
    pattern = r.base >> g
    must0 = [i for i in range(g, 32) if not (pattern >> (i - g)) & 1]
    must1 = [i for i in range(g, 32) if (pattern >> (i - g)) & 1]
    for i in must0:
        v = v + addr[i]
    for i in must1:
        v = v + (1 - addr[i])
    return [v]


def mem(hw: Builder, k: int):
    """The memory unit in slot k: its operands, the pending addresses, level A (lines, offsets,
    faults of the address; the MEMW write line and byte), the line memory, level B (load bytes,
    validity), level C (faults); then the atomic unit."""
    seg, segname, f, (addr, ahi, data, cmpv) = _operands(hw, k)
    A = _pending_addresses(hw, addr)
    mline, off, bad, wline, head = _addresses(hw, k, A, ahi, f["space"], f["align"])
    lines = _line_memory(hw, k, mline, wline, head)
    ld, inval = _loads(hw, k, lines, off, f["width"])
    flt = _faults(hw, k, f["mop"], bad, inval)
    # the atomic's signedness, decoded on its own: read straight from the segment, it would keep
    # the whole segment word in the residual until the atomic unit's last level
    signed = hw.decode_field(seg, segname, "signed", 2, f"signed.{k}").f(1)
    hw.mem_info = dict(k=k, op=f["mop"], width=f["width"], atom=f["atom"], data=data, cmp=cmpv, ld=ld, fault=flt,
                       bad=bad, signed=signed)
    unit = Unit(MEM, k, lo=ld, hi=[None] * LANES)
    hw.units.append(unit)
    atomic_unit(hw)


def _operands(hw: Builder, k: int):
    """The slot's ROM segment, register ports, decoded fields and operand multiplexers (address lo
    and hi, data, compare value per lane)."""
    cfg = hw.cfg
    segname = f"s{k}"
    seg = rom(hw, segname)
    ports = regfile(hw, k, seg, PORTS[MEM])
    names = ["addr_lo", "addr_hi", "data_lo", "cmp_lo"]
    opts = {n: sources_for(cfg, k, n) for n in names}
    sel = {n: hw.decode_field(seg, segname, n, len(opts[n]), f"sel.{k}.{n}") for n in names}
    f = {"mop": hw.decode_field(seg, segname, "op", len(MEM_OPS), f"mop.{k}"),
         "width": hw.decode_field(seg, segname, "width", 4, f"width.{k}"),
         "align": hw.decode_field(seg, segname, "align", 5, f"align.{k}"),
         "space": hw.decode_field(seg, segname, "space", len(SPACES), f"space.{k}"),
         "atom": hw.decode_field(seg, segname, "atom", len(ATOM_OPS), f"atomop.{k}")}
    first_lane(hw)
    vals = {n: [hw.bits(f"{n}.{k}.{l}", 32) for l in range(LANES)] for n in names}
    neurons = []
    for n in names:
        neurons += mux(hw, k, n, sel[n], opts[n], ports, vals[n])
    hw.circ_groups(f"mux.{k}", [[vals[n][l] for n in names] for l in range(LANES)], neurons)
    return seg, segname, f, tuple(vals[n] for n in names)


def _pending_addresses(hw: Builder, addr: list) -> list:
    """The EXEC pass's addresses, which the passes after it (MEMW) still need after carries have
    rewritten the registers they came from (`pa`, one GDN slot); per lane, 32 address bit forms."""
    p = hw.p
    pa = M.GDNMemory(p, "pa", slots=1, width=32 * LANES, whole=True)
    slot = p.vars["slot0"]
    pa.write(slot, hw.view("pa.in", [addr[l].f(i) for l in range(LANES) for i in range(32)]), enable=hw.k("EXEC"))
    par = pa.read(slot, name="pa.out")
    hw.pa = par
    return [[par.f(32 * l + i) for i in range(32)] for l in range(LANES)]


def _addresses(hw: Builder, k: int, A: list, ahi: list, space, align):
    """Level A: lines, offsets, faults; the MEMW write line and byte."""
    nb = hw.memory_map.line_bits
    mline = [hw.bits(f"mline.{k}.{l}", nb) for l in range(LANES)]
    off = [hw.bits(f"off.{k}.{l}", 16) for l in range(LANES)]
    bad = [hw.bits(f"badaddr.{k}.{l}", 2) for l in range(LANES)]   # misaligned, outside window
    wline = hw.bits(f"wline.{k}", nb)
    head = hw.bits(f"whead.{k}", LINE)
    na = []
    for l in range(LANES):
        for si, sp in enumerate(SPACES):
            forms = line_forms(hw, sp, A[l], l)
            for b in range(nb):
                if forms[b].terms:
                    na += n_gated(space.f(si), forms[b], {mline[l].feature(b): 1})
                    na += n_gated(hw.t_lane.f(l) + space.f(si) - 1, forms[b], {wline.feature(b): 1})
            for outside in window_faults(hw, sp, A[l], [ahi[l].f(i) for i in range(32)]):
                na += n_step(128 * space.f(si) + outside, 129, {bad[l].feature(1): 1})
        for o in range(16):
            na += n_step(match(A[l][:4], o), 4, {off[l].feature(o): 1})
        for q in range(1, 5):
            low = Lin()
            for i in range(q):
                low = low + A[l][i]
            na += n_step(8 * align.f(q) + low, 9, {bad[l].feature(0): 1})
        for b in range(4):
            for j in range(b, LINE):
                na += n_step(hw.k("MEMW") + hw.t_lane.f(l) + hw.t_byte.f(b) + match(A[l][:4], j - b),
                             7, {head.feature(j): 1})
    for b in range(nb):
        na += n_gated(hw.we_any["mem"].f(0), hw.c_line.f(b), {wline.feature(b): 1})
    hw.circ(f"mema.{k}", mline + off + bad + [wline, head], na)
    return mline, off, bad, wline, head


def _line_memory(hw: Builder, k: int, mline: list, wline, head) -> list:
    """The line memory (`mem`): 16 data bytes and 16 validity bits per line, a read port per lane.
    A MEMW (or a prompt W) brings one byte: it lands in the staging copy (`mem.stage`, a value head
    per byte), whose read is the written line's whole new value; the copy the lanes read is
    written whole with it."""
    p = hw.p
    stage = M.GDNMemory(p, "mem.stage", slots=hw.memory_map.lines, width=8 * MEM_FIELDS, field_bits=8)
    stage.write(wline, hw.view("mem.stage.in", [hw.t_v.f(i % 8) for i in range(8 * MEM_FIELDS)]),
                field_enable=[head.f(j) + hw.we["mem"].f(j) for j in range(LINE)]
                + [hw.we["mem"].f(LINE), hw.we["mem"].f(LINE + 1)])
    new = stage.read(wline, name="mem.new")
    mem = M.GDNMemory(p, "mem", slots=hw.memory_map.lines, width=8 * MEM_FIELDS, whole=True)
    mem.write(wline, new, enable=hw.k("MEMW") + hw.we_any["mem"].f(0))
    lines = [mem.read(mline[l], name=f"line.{k}.{l}") for l in range(LANES)]
    hw.memory = mem
    return lines


def _loads(hw: Builder, k: int, lines: list, off: list, width):
    """Level B: load byte selection and validity."""
    ld = [hw.bits(f"ld.{k}.{l}", 32) for l in range(LANES)]
    inval = hw.bits(f"inval.{k}", LANES)
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
    hw.circ(f"memb.{k}", ld + [inval], nb)
    return ld, inval


def _faults(hw: Builder, k: int, mop, bad: list, inval):
    """Level C: faults (an active lane -- for an atomic, the first lane -- of a memory op whose
    address is misaligned, outside its window, or not allocated)."""
    first = first_lane(hw)
    flt = hw.bits(f"fault.{k}", LANES)
    memop = 1 - mop.f(MEM_OPS.index("NONE"))
    op_atom = mop.f(MEM_OPS.index("ATOM"))
    nc = []
    for l in range(LANES):
        y = bad[l].f(0) + bad[l].f(1) + inval.f(l)
        nc += n_step(4 * hw.c_mask.f(l) + 4 * (memop - op_atom) + y, 9, {flt.feature(l): 1})
        nc += n_step(4 * first.f(l) + 4 * op_atom + y, 9, {flt.feature(l): 1})
    hw.circ(f"memc.{k}", [flt], nc)
    return flt
