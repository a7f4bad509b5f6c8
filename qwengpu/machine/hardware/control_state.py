"""The control state (`ctl`, one GDN slot: pc, mask, warp, block, epoch, the prompt's write cursor) and
the prompt's write enables (which byte of which memory a W token writes)."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler import memory as M
from qwengpu.compiler.gadgets import n_step

from ..config import LANES
from ..format import BLOCK_BITS, EPOCH_BITS
from .builder import BTAB_BYTES, CONF_BYTES, MEM_FIELDS, Builder, match


def control_state(hw: Builder):
    p = hw.p
    t = lambda v, n: [v.f(i) for i in range(v.size)] + [Lin()] * (n - v.size)
    t_pad = lambda fs, n: fs + [Lin()] * (n - len(fs))
    # pc bits 8.. sit above the mask (bits 12..15), address bits 8.. above the space (36..39):
    # each in the byte its token kind writes
    lo8 = lambda v: [v.f(i) for i in range(8)]
    hi = lambda v: [v.f(i) for i in range(8, v.size)]
    forms = (lo8(hw.t_pc) + t(hw.t_mask, 4) + t_pad(hi(hw.t_pc), 4) + t(hw.t_warp, 8) + t(hw.t_block, 8)
             + t(hw.t_space, 4) + t_pad(hi(hw.t_addr), 4) + lo8(hw.t_addr) + t(hw.t_epoch, 8))
    value = hw.view("ctl.in", forms)
    slot = p.view("slot0", "onehot", [Lin.const(1)], lambda: 0, [])
    ctl = M.GDNMemory(p, "ctl", slots=1, width=56, field_bits=8)
    start = hw.k("BLOCK") + hw.k("GO")
    ctl.write(slot, value, field_enable=[hw.k("EXEC"), hw.k("EXEC"), hw.k("WARP") + start, start,
                                         hw.k("AT"), hw.k("AT"), hw.k("RELEASE") + start])
    r = ctl.read(slot, name="ctl.out")
    hw.c_pc = hw.view("c_pc", [r.f(i) for i in range(8)] + [r.f(12 + i) for i in range(hw.pcb - 8)])
    hw.c_mask = hw.view("c_mask", [r.f(8 + i) for i in range(LANES)])
    hw.c_warp = hw.view("c_warp", [r.f(16 + i) for i in range(hw.warp_bits)])
    hw.c_block = hw.view("c_block", [r.f(24 + i) for i in range(BLOCK_BITS)])
    hw.c_space = hw.view("c_space", [r.f(32 + i) for i in range(4)])
    hw.c_addr = hw.view("c_addr", [r.f(40 + i) for i in range(8)])
    hw.c_addr_rom = hw.view("c_addr_rom", [r.f(40 + i) for i in range(8)] + [r.f(36 + i) for i in range(hw.pcb - 8)])
    nb = hw.memory_map.line_bits            # a memory line: the cursor's bits 8.. too, when there are more lines
    hw.c_line = hw.c_addr if nb <= 8 else hw.view("c_line", [r.f(40 + i) for i in range(8)]
                                                  + [r.f(36 + i) for i in range(nb - 8)])
    hw.c_epoch = hw.view("c_epoch", [r.f(48 + i) for i in range(EPOCH_BITS)])


def prompt_enables(hw: Builder):
    """we[space][byte]: a W token writes byte `byte` of the AT cursor's target."""
    hw.we = {}
    hw.we_any = {}
    neurons = []
    nbytes = {s.name: s.nbytes for s in hw.fmt.segments}
    nbytes.update(mem=MEM_FIELDS, ltab=hw.ltab_bytes, btab=BTAB_BYTES, conf=CONF_BYTES)
    outs = []
    for si, space in enumerate(hw.spaces):
        n = nbytes[space]
        v = hw.bits(f"we.{space}", n)
        anyv = hw.bits(f"we.{space}.any", 1)
        outs += [v, anyv]
        hw.we[space] = v
        hw.we_any[space] = anyv
        sm = match([hw.c_space.f(i) for i in range(4)], si)
        for f in range(n):
            neurons += n_step(hw.k("W") + hw.t_f.f(f) + sm, 6, {v.feature(f): 1})
        neurons += n_step(hw.k("W") + sm, 5, {anyv.feature(0): 1})
    hw.circ("prompt.enables", outs, neurons)
