"""The machine's geometry: which functional units a bundle has, in depth order, and its limits.

One forward pass executes one *bundle*: a fixed sequence of units (ALU slots, one memory slot,
ALU slots) fed by register read ports at the top, with every unit able to use the results of the
units above it in the same pass. Values that must outlive the pass are *carried*: written back into
the register file through the following tokens (`docs/machine.md`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

#: a warp's lanes: the reference semantics' warp width (`qwengpu.semantics.launch_model`), which the circuits are
#: built for (4-bit lane masks in the tokens and the control word): not a per-geometry choice
from qwengpu.semantics.launch_model import LANES as LANES

ALU = "alu"
MEM = "mem"
XLANE = "xlane"
FPU = "fpu"             # the float unit: reads the first ALU slots' ports, its result is only carried (docs/float_units.md)


@dataclass(frozen=True)
class MachineConfig:
    name: str = "compact"
    slots: tuple = (ALU, ALU, ALU, MEM, ALU, ALU, ALU, XLANE)
    reg_ports: int = 6            # register read ports (distinct registers read per pass)
    carry_slots: int = 4          # registers written back per pass
    registers: int = 64           # physical registers per warp
    max_warps: int = 8            # warps per block (blocks of up to 32 threads): a power of two, 2..32
    pc_bits: int = 8              # program counter width: the ROM holds 2**pc_bits bundles
    # the memory map (`qwengpu.machine.layout.MemoryMap`): every size a power of two, so that the
    # memory unit finds a byte's machine line by selecting address bits (no adders)
    global_bytes: int = 2048      # the global window, from GLOBAL_BASE
    shared_bytes: int = 1024      # shared memory of the running block
    local_bytes: int = 32         # local memory per thread ...
    local_threads: int = 16       # ... for the first `local_threads` threads of a block
    const_bytes: int = 512        # the constant bank
    shifters: tuple | None = None     # ALU slots with a barrel shifter (None: all)
    bitcount: tuple | None = None     # ALU slots with CLZ/POPC/BREV (None: all)
    multipliers: tuple = ()           # ALU slots with MUL/MULHU/MULHS
    fpu_ops: tuple = ()               # the float unit's micro-ops (`uops.FPU_OPS`) this machine has

    @property
    def rom_bundles(self) -> int:
        return 1 << self.pc_bits

    @property
    def has_fpu(self) -> bool:
        return FPU in self.slots

    @property
    def warp_bits(self) -> int:
        """Bits of a warp number (the tokens' and the control word's warp field)."""
        return (self.max_warps - 1).bit_length()

    @property
    def max_threads(self) -> int:
        return self.max_warps * LANES

    @property
    def tid_bits(self) -> int:
        """Bits of each of tid.x/y/z in the launch's thread table (5 up to blocks of 32 threads)."""
        return max(5, (self.max_threads - 1).bit_length())

    @property
    def ltab_lane_bytes(self) -> int:
        """Bytes of one lane's tid.x/y/z in the thread table (`ltab`)."""
        return (3 * self.tid_bits + 7) // 8

    @property
    def memory_bytes(self) -> int:
        """The machine memory's bytes: its lines (the regions', rounded up to a power of two) x 16
        (`layout.MemoryMap`)."""
        from .layout import memory_map
        return memory_map(self).bytes

    def __post_init__(self):
        if bool(self.fpu_ops) != self.has_fpu:
            raise ValueError(f"machine {self.name}: a float unit slot needs its ops (fpu_ops) and fpu_ops a float unit")
        if not 2 <= self.max_warps <= 32 or self.max_warps & (self.max_warps - 1):
            raise ValueError(f"machine {self.name}: max_warps must be a power of two, 2..32 (got {self.max_warps})")
        from .layout import memory_map
        memory_map(self)                # refuses a memory map the circuits cannot select by address bits

    def slot_kinds(self) -> list[str]:
        return list(self.slots)

    def supports(self, k: int, op: str) -> bool:
        """Can the unit in slot k run micro-op `op`?"""
        if op in ("SHL", "SHR", "SAR"):
            return self.shifters is None or k in self.shifters
        if op in ("CLZ", "POPC", "BREV"):
            return self.bitcount is None or k in self.bitcount
        if op in ("MUL", "MULHU", "MULHS"):
            return k in self.multipliers or not self.multipliers and self.name == "compact-sim"
        return True

    @classmethod
    def from_dict(cls, d: dict) -> "MachineConfig":
        """A geometry from its fields as JSON holds them (lists where it has tuples). A `memory_bytes`
        (a field of checkpoints written before the memory map was geometry) is derived now."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k != "memory_bytes"})

    def describe(self) -> str:
        return (f"machine {self.name}: bundle {' > '.join(self.slots)}, {self.reg_ports} register ports, "
                f"{self.carry_slots} carries/pass, {self.registers} registers/warp, {self.max_warps} warps/block, "
                f"{self.rom_bundles} bundles of ROM, {self.memory_bytes} bytes of memory")


#: the geometry the simulator explores freely (every ALU slot can do everything)
SIM = MachineConfig(name="compact-sim", pc_bits=9)
#: the built-in machine: two ALU slots, memory, two ALU slots, cross-lane unit
COMPACT = MachineConfig(name="compact", slots=(ALU, ALU, MEM, ALU, ALU, XLANE), registers=32, shifters=(0, 3), bitcount=(4,),
                        multipliers=(3,), pc_bits=9)

#: the built-in machine with the float unit beside its units (docs/float_units.md)
COMPACT_FPU = MachineConfig(name="compact-fpu", slots=(ALU, ALU, MEM, ALU, ALU, XLANE, FPU), registers=32,
                            shifters=(0, 3), bitcount=(4,), multipliers=(3,), pc_bits=9,
                            fpu_ops=("FADD", "FSUB", "FMUL", "FFMA", "FSETP", "FMIN", "FMAX", "I2F"))

#: the built-in machine with a course's sizes (issue 26's minimums, docs/memory_sizes.md, "A machine
#: for a course's sizes"): 64 threads per block (16 warps), global 32 KiB, shared 8 KiB, local 256 B for
#: every thread of a block, const 4 KiB -- 3,840 of the 4,096 lines the prompt's cursor can name. Named,
#: never the default: it is built stand-alone; in Qwen3.5-2B's shapes it would cost ~105 GPU layers
COMPACT_FPU_COURSE = dataclasses.replace(COMPACT_FPU, name="compact-fpu-course", max_warps=16, global_bytes=32768,
                                         shared_bytes=8192, local_bytes=256, local_threads=64, const_bytes=4096)

#: the smallest machine that runs ordinary kernels (tests build it): one ALU slot with every
#: capability, the memory unit, two carries per pass
TINY = MachineConfig(name="tiny", slots=(ALU, MEM), registers=32, carry_slots=2, shifters=(0,), bitcount=(0,),
                     multipliers=(0,))

#: the machine every engine, build, splice and the lab use when none is named: COMPACT with the float
#: unit (docs/float_units.md, "The built-in machine"); `compact` stays by name, float as soft-float routines
BUILTIN = COMPACT_FPU

#: configurations by name (`qwengpu build --config NAME`)
CONFIGS = {c.name: c for c in (SIM, COMPACT, COMPACT_FPU, COMPACT_FPU_COURSE, TINY)}


#: the fields that hold tuples (or None: every slot)
_TUPLE_FIELDS = ("slots", "shifters", "bitcount", "multipliers", "fpu_ops")


def config_with(cfg: MachineConfig, settings) -> MachineConfig:
    """`cfg` with some fields set (`qwengpu splice-size --set global_bytes=16384`): settings are
    "FIELD=VALUE" strings (integers; tuples as comma lists) or a {field: value} dict. The geometry is
    named after its base and the settings, so that no cache or report mistakes it for the base."""
    import dataclasses
    fields = {f.name: f for f in dataclasses.fields(MachineConfig)}
    if not isinstance(settings, dict):
        parsed = {}
        for item in settings:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"a setting is FIELD=VALUE (got {item!r})")
            parsed[key.strip()] = value.strip()
        settings = parsed
    out = {}
    for key, value in settings.items():
        if key not in fields or key == "name":
            raise ValueError(f"{key!r} is not a field of a machine's geometry (fields: "
                             f"{', '.join(k for k in fields if k != 'name')})")
        if isinstance(value, str):
            if key in _TUPLE_FIELDS:        # a comma list: slot numbers, or names (slots, fpu_ops)
                items = [v.strip() for v in value.split(",") if v.strip()]
                value = tuple(int(v) if v.isdigit() else v for v in items)
            else:
                value = int(value, 0)
        out[key] = value
    if not out:
        return cfg
    name = cfg.name + "[" + ",".join(f"{k}={v}" for k, v in out.items()) + "]"
    return dataclasses.replace(cfg, name=name, **out)


def config_named(machine, what: str = "machine") -> MachineConfig:
    """A machine geometry by name (`CONFIGS`), or the `MachineConfig` given; `what` names the
    argument in the error."""
    if isinstance(machine, MachineConfig):
        return machine
    if machine not in CONFIGS:
        raise ValueError(f"unknown {what} {machine!r} (known: {', '.join(sorted(CONFIGS))})")
    return CONFIGS[machine]
