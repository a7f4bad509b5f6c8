"""The tokens: what each token's embedding carries (`inputs`) and the vocabulary (`vocabulary`)."""
from __future__ import annotations

from ..config import LANES
from ..format import BLOCK_BITS, EPOCH_BITS
from ..tokens import token_text
from .builder import FPU_KIND, Builder, carry_pos, memw_pos


def inputs(hw: Builder):
    p = hw.p
    hw.kind = p.input_bits("kind", len(hw.kinds))                 # one bit per token kind
    hw.t_pc = p.input_bits("t_pc", hw.pcb)
    hw.t_mask = p.input_bits("t_mask", LANES)
    hw.t_j = p.input_bits("t_j", hw.J)
    hw.t_byte = p.input_bits("t_byte", 4)
    hw.t_ls = p.input_bits("t_ls", LANES + 1)                  # a lane, or all (bit 4)
    hw.t_lane = p.input_bits("t_lane", LANES)
    hw.t_v = p.input_bits("t_v", 8)
    hw.t_warp = p.input_bits("t_warp", hw.warp_bits)
    hw.t_block = p.input_bits("t_block", BLOCK_BITS)
    hw.t_epoch = p.input_bits("t_epoch", EPOCH_BITS)
    hw.t_space = p.input_bits("t_space", 4)
    hw.t_addr = p.input_bits("t_addr", hw.addr_bits)          # AT cursor: a ROM bundle, line, block ...
    hw.t_f = p.input_bits("t_f", hw.F)
    hw.t_pos = p.input_bits("t_pos", 7)                      # CARRY/MEMW: place in the pass order


def vocabulary(hw: Builder):
    p = hw.p
    kb = lambda name: 1 << hw.kinds.index(name)
    hw.tok: dict = {}
    hw.tok["GO"] = p.token(token_text(("GO",)), kind=kb("GO"))
    for b in range(1, 1 << BLOCK_BITS):
        hw.tok[("BLOCK", b)] = p.token(token_text(("BLOCK", b)), kind=kb("BLOCK"), t_block=b)
    for w in range(1 << hw.warp_bits):
        hw.tok[("WARP", w)] = p.token(token_text(("WARP", w)), kind=kb("WARP"), t_warp=w)
    for pc in range(1 << hw.pcb):
        for m in range(1, 1 << LANES):
            hw.tok[("EXEC", pc, m)] = p.token(token_text(("EXEC", pc, m)), kind=kb("EXEC"), t_pc=pc, t_mask=m)
    if FPU_KIND in hw.kinds:               # the first served lane runs in the EXEC pass
        for l in range(1, LANES):
            hw.tok[("FPU", l)] = p.token(token_text(("FPU", l)), kind=kb(FPU_KIND), t_lane=1 << l)
    for j in range(hw.J):
        for b in range(4):
            for ls in range(LANES + 1):
                name = "all" if ls == LANES else ls
                for v in range(256):
                    hw.tok[("CARRY", j, b, name, v)] = p.token(
                        token_text(("CARRY", j, b, name, v)), kind=kb("CARRY"), t_j=1 << j, t_byte=1 << b,
                        t_ls=1 << ls, t_v=v, t_pos=carry_pos(j, b, ls))
    for l in range(LANES):
        for b in range(4):
            for v in range(256):
                hw.tok[("MEMW", l, b, v)] = p.token(token_text(("MEMW", l, b, v)), kind=kb("MEMW"),
                                                      t_lane=1 << l, t_byte=1 << b, t_v=v,
                                                      t_pos=memw_pos(hw.J, l, b))
    for e in range(1 << EPOCH_BITS):
        hw.tok[("RELEASE", e)] = p.token(token_text(("RELEASE", e)), kind=kb("RELEASE"), t_epoch=e)
    hw.tok["HALT"] = p.token(token_text(("HALT",)), kind=kb("HALT"))
    for fk in range(4):
        for l in range(LANES):
            hw.tok[("FAULT", fk, l)] = p.token(token_text(("FAULT", fk, l)), kind=kb("FAULT"), t_lane=1 << l,
                                                 t_byte=1 << fk)
    for si, space in enumerate(hw.spaces):
        n = {"ltab": 1 << hw.warp_bits, "conf": 1, "mem": hw.memory_map.lines, "btab": 1 << BLOCK_BITS}.get(space, 1 << hw.pcb)
        for a in range(n):
            hw.tok[("AT", space, a)] = p.token(token_text(("AT", space, a)), kind=kb("AT"), t_space=si, t_addr=a)
    for f in range(hw.F):
        for v in range(256):
            hw.tok[("W", f, v)] = p.token(token_text(("W", f, v)), kind=kb("W"), t_f=1 << f, t_v=v)
