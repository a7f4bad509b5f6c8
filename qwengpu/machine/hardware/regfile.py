"""The register file: what CARRY tokens write (`register_write`) and one GDN copy per unit, a key head
per read port (`regfile`).

A CARRY token brings one byte (of one lane, or of all lanes). The byte lands in the staging copy
(`reg.stage`, one value head per byte field: a partial write), whose read in the same layer is the
carried register's whole new value (`hw.rnew`); every other copy is written whole with it, so each
takes one value head per 64 bits instead of one per byte (`GDNMemory.whole`)."""
from __future__ import annotations

from qwengpu.compiler import memory as M
from qwengpu.compiler.gadgets import n_gated, n_step

from ..config import LANES
from ..format import REG_BITS
from .builder import Builder
from .rom import rom, segment


def register_write(hw: Builder):
    """What a CARRY token writes: the register (from the bundle's tail) and the lane/byte enables."""
    hw.tail = rom(hw, "tail")
    creg = hw.bits("creg", REG_BITS)
    neurons = []
    for j in range(hw.J):
        regf = hw.field_forms(hw.tail, "tail", f"c{j}_reg")
        for i in range(REG_BITS):
            neurons += n_gated(hw.t_j.f(j), regf[i], {creg.feature(i): 1})
    cwe = hw.bits("cwe", 4 * LANES)
    for l in range(LANES):
        for b in range(4):
            out = {cwe.feature(4 * l + b): 1}
            neurons += n_step(hw.k("CARRY") + hw.t_byte.f(b) + hw.t_ls.f(l), 3, out)
            neurons += n_step(hw.k("CARRY") + hw.t_byte.f(b) + hw.t_ls.f(LANES) + hw.c_mask.f(l), 4, out)
    hw.circ("carry.target", [creg, cwe], neurons)
    hw.rkey = hw.view("rkey", [hw.c_warp.f(i) for i in range(hw.warp_bits)] + [creg.f(i) for i in range(REG_BITS)])
    hw.cwe = cwe
    stage = M.GDNMemory(hw.p, "reg.stage", slots=1 << (hw.warp_bits + REG_BITS), width=32 * LANES, field_bits=8)
    stage.write(hw.rkey, hw.view("reg.stage.in", [hw.t_v.f(i % 8) for i in range(32 * LANES)]),
                field_enable=[cwe.f(i) for i in range(4 * LANES)])
    hw.rnew = stage.read(hw.rkey, name="reg.new")


def register_copy(hw: Builder, name: str):
    """A register file copy, written whole at every CARRY with the carried register's new value."""
    mem = M.GDNMemory(hw.p, name, slots=1 << (hw.warp_bits + REG_BITS), width=32 * LANES, whole=True)
    mem.write(hw.rkey, hw.rnew, enable=hw.k("CARRY"))
    return mem


def regfile(hw: Builder, k: int, seg, nports: int) -> list:
    """Unit k's register read ports: port lines (per port, 4 lanes x 32 bits) = register + immediate."""
    mem = register_copy(hw, f"reg.{k}")
    lines = []
    segname = f"s{k}"
    for p_ in range(nports):
        addr = hw.view(f"reg.{k}.q{p_}", [hw.c_warp.f(i) for i in range(hw.warp_bits)]
                         + hw.field_forms(seg, segname, f"p{p_}_reg"))
        en = hw.field_forms(seg, segname, f"p{p_}_en")[0]
        r = mem.read(addr, name=f"reg.{k}.r{p_}", enable=en)
        imm = hw.field_forms(seg, segname, f"p{p_}_imm")
        lines.append([[r.f(32 * l + i) + imm[i] for i in range(32)] for l in range(LANES)])
    mem.late = True
    return lines


def ports_of(hw: Builder, k: int, nports: int) -> list:
    """Slot k's register read ports (`regfile`), built once: the float unit reads the ports of
    the ALU slots it shares them with."""
    if k not in hw.unit_ports:
        hw.unit_ports[k] = regfile(hw, k, segment(hw, f"s{k}"), nports)
    return hw.unit_ports[k]
