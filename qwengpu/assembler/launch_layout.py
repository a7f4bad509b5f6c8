"""A launch laid out on the machine's memory map (`qwengpu.machine.layout`): where its buffers,
globals, constants, shared and local memory go, and which machine bytes are valid."""
from __future__ import annotations

from qwengpu.semantics.launch_model import ModuleAnalysis
from qwengpu.semantics.launch_model import check_kernel_limits, global_layout
from qwengpu.launch import GLOBAL_BASE, LaunchSpec
from qwengpu.machine.config import BUILTIN, LANES, MachineConfig
from qwengpu.machine.format import BLOCK_BITS
from qwengpu.machine.layout import MachineLayout, memory_map
from qwengpu.ptx.ir import Module

from .lower import AssemblerError


def check_launch_shape(spec: LaunchSpec, config: MachineConfig = BUILTIN):
    """The machine's limits on a launch's shape: the blocks (every geometry's: the token fields'
    widths) and the geometry's threads per block."""
    if spec.blocks > 1 << BLOCK_BITS:
        raise AssemblerError(f"the launch has {spec.blocks} blocks; the machine runs at most {1 << BLOCK_BITS}")
    if spec.threads_per_block > config.max_threads:
        raise AssemblerError(f"a block of {spec.threads_per_block} threads needs more than the machine's "
                             f"{config.max_warps} warps of {LANES} lanes")


def machine_layout(module: Module, spec: LaunchSpec, kernel_name: str,
                   config: MachineConfig = BUILTIN) -> MachineLayout:
    """Where the launch's memories lie on the memory map of a machine of geometry `config`. CUDA's
    limits are refused first, as the interpreter refuses them, then the machine's own."""
    fn = module.kernel(kernel_name)
    check_kernel_limits(module, spec, fn)
    check_launch_shape(spec, config)
    prog = ModuleAnalysis(module, fn)
    glay = global_layout(spec, module)
    lay = MachineLayout(glay.buffer_addresses, dict(glay.var_addresses), glay.end, dict(prog.const_offsets),
                        len(prog.const_init), {}, 0, dict(prog.local_offsets), dict(prog.local_size), 0,
                        spec.threads_per_block, memory_map(config))
    mm = lay.memory
    if glay.end > lay.window_end("global"):
        raise AssemblerError(f"the launch needs {glay.end - GLOBAL_BASE} bytes of global memory; the "
                             f"machine has {mm.window('global')}")

    def mark(space, addr, size, thread=0):
        m = lay.machine_address(space, addr, thread)
        if m is None or lay.machine_address(space, addr + size - 1, thread) is None:
            raise AssemblerError(f"{space} memory of {addr + size} bytes does not fit the machine's {space} window")
        for k in range(size):           # byte by byte: a rotated global window is not contiguous
            lay.valid[lay.machine_address(space, addr + k, thread)] = 1

    for a, addr in zip(spec.args, glay.buffer_addresses):
        if addr is not None and a.data.nbytes:
            mark("global", addr, a.data.nbytes)
    for name, addr in glay.var_addresses.items():
        v = module.vars[name]
        if v.size:
            mark("global", addr, v.size)
    if lay.const_size:
        mark("const", 0, lay.const_size)
    shared_size = ((prog.static_shared + 15) // 16 * 16) + spec.shared_bytes
    lay.shared_size = shared_size
    lay.shared_vars = dict(prog.shared_offsets)
    for name in prog.dynamic_shared:
        lay.shared_vars[name] = (prog.static_shared + 15) // 16 * 16
    if shared_size:
        mark("shared", 0, shared_size)
    stride = sum(prog.local_size.values())
    lay.local_stride = stride
    if stride:
        if stride > mm.local_bytes:
            raise AssemblerError(f"the kernel needs {stride} bytes of local memory per thread; the machine has "
                                 f"{mm.local_bytes}")
        if spec.threads_per_block > mm.local_threads:
            raise AssemblerError(f"local memory is available to blocks of at most {mm.local_threads} threads")
        for t in range(spec.threads_per_block):
            mark("local", 0, stride, t)
    return lay
