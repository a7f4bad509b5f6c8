"""The launch tables: per-warp thread ids (`ltab`), per-block ctaid (`btab`), the launch constants
(`conf`), and the special registers read from them."""
from __future__ import annotations

from qwengpu.compiler import Lin
from qwengpu.compiler import memory as M

from ..config import LANES
from ..format import BLOCK_BITS
from .builder import BTAB_BYTES, CONF_BYTES, Builder, bits_of


def tables(hw: Builder):
    p = hw.p
    addr3 = hw.view("c_addr3", [hw.c_addr.f(i) for i in range(hw.warp_bits)])
    lt = M.GDNMemory(p, "ltab", slots=1 << hw.warp_bits, width=8 * hw.ltab_bytes, field_bits=8)
    lt.write(addr3, hw.view("ltab.in", [hw.t_v.f(i % 8) for i in range(8 * hw.ltab_bytes)]),
             field_enable=[hw.we["ltab"].f(f) for f in range(hw.ltab_bytes)])
    hw.ltab = lt.read(hw.c_warp, name="ltab.out")
    bt = M.GDNMemory(p, "btab", slots=1 << BLOCK_BITS, width=8 * BTAB_BYTES, field_bits=8)
    bt.write(hw.c_addr, hw.view("btab.in", [hw.t_v.f(i % 8) for i in range(8 * BTAB_BYTES)]),
             field_enable=[hw.we["btab"].f(f) for f in range(BTAB_BYTES)])
    hw.btab = bt.read(hw.c_block, name="btab.out")
    slot = p.vars["slot0"]
    cf = M.GDNMemory(p, "conf", slots=1, width=8 * CONF_BYTES, field_bits=8)
    cf.write(slot, hw.view("conf.in", [hw.t_v.f(i % 8) for i in range(8 * CONF_BYTES)]),
             field_enable=[hw.we["conf"].f(f) for f in range(CONF_BYTES)])
    hw.conf = cf.read(slot, name="conf.out")
    hw.lastblock = hw.view("c_lastblock", [hw.conf.f(i) for i in range(BLOCK_BITS)])
    hw.entry = hw.view("c_entry", [hw.conf.f(8 + i) for i in range(8)] + [hw.conf.f(24 + i) for i in range(hw.pcb - 8)])
    hw.nthreads = hw.view("c_nthreads", [hw.conf.f(16 + i) for i in range(hw.cfg.max_threads.bit_length())])
    # special values per lane (forms; only the bits that can be non-zero)
    hw.special_forms = {}
    tb = hw.cfg.tid_bits
    for l in range(LANES):
        for c, name in enumerate(("tid.x", "tid.y", "tid.z")):
            base = 8 * hw.cfg.ltab_lane_bytes * l + tb * c
            hw.special_forms[(name, l)] = [hw.ltab.f(base + i) for i in range(tb)]
        for c, name in enumerate(("ctaid.x", "ctaid.y", "ctaid.z")):
            hw.special_forms[(name, l)] = [hw.btab.f(8 * c + i) for i in range(8)]
        hw.special_forms[("laneid", l)] = [Lin.const(b) for b in bits_of(l, 2)]
        hw.special_forms[("warpid", l)] = [hw.c_warp.f(i) for i in range(hw.warp_bits)]
        masks = {"eq": 1 << l, "lt": (1 << l) - 1, "le": (1 << (l + 1)) - 1,
                 "gt": 15 & ~((1 << (l + 1)) - 1), "ge": 15 & ~((1 << l) - 1)}
        for kname, m in masks.items():
            hw.special_forms[(f"lanemask_{kname}", l)] = [Lin.const(b) for b in bits_of(m, 4)]
