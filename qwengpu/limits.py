"""Every limit a launch runs under, in one table, and `docs/limits.md` written from it.

Three kinds of limit (`docs/limits.md` says what each engine does at each one):
- CUDA's (`qwengpu.launch.CUDA_LIMITS`): every engine refuses a launch beyond them before running
  it, with the same `LaunchError` (`qwengpu.semantics.launch_model.check_kernel_limits`).
- the machine's capacity (the built-in geometry, `qwengpu.machine.config.BUILTIN`: COMPACT with the float unit): the sim and the
  model engines refuse beyond it with an `AssemblerError`; the interpreter runs what CUDA allows.
- qwenGPU's own bounds (the parser's register count, global memory, the step limits), which keep a
  small input from allocating or running without end.

`python -m qwengpu.limits > docs/limits.md` rewrites the page; `tests/test_limits.py` checks that
the committed page is what this module writes, and that the engines behave as it says.
"""
from __future__ import annotations

from qwengpu.assembler.launch_layout import check_launch_shape
from qwengpu.semantics.launch_model import DEFAULT_MAX_STEPS, LANES, LOCAL_BYTES, STEPS_PER_WARP
from qwengpu.launch import (CUDA_LIMITS, MAX_GLOBAL_BYTES, LaunchError, LaunchSpec, check_dims, check_shared_bytes,
                            check_step_limit)
from qwengpu.machine.config import BUILTIN, COMPACT, COMPACT_FPU_COURSE, MachineConfig
from qwengpu.machine.format import BLOCK_BITS, REG_BITS
from qwengpu.machine.layout import memory_map
from qwengpu.runtime import machine_sizes
from qwengpu.ptx.parser import MAX_REGISTERS, PTX_VERSIONS
from qwengpu.runtime.run import DEFAULT_MAX_TOKENS, TOKENS_PER_WARP


def _refusal(check, *args) -> str:
    """The message `check(*args)` refuses with (the engines' own text, so the page cannot drift)."""
    try:
        check(*args)
    except (LaunchError, ValueError) as e:
        return f"`{e}`"
    raise AssertionError(f"{check.__name__}{args} accepted")


#: the built-in machine's memory map (`MachineConfig`'s sizes)
MEMORY = memory_map(BUILTIN)


def _window(space: str) -> int:
    return MEMORY.window(space)


def _spec(blocks: int, threads: int) -> LaunchSpec:
    return LaunchSpec(kernel="k", grid=(blocks, 1, 1), block=(threads, 1, 1))


def rows() -> list[tuple[str, str, str, str]]:
    """(limit, CUDA's, the interpreter's, the machine's on sim and compact) for each limit."""
    lim = CUDA_LIMITS
    over = "refuses beyond CUDA's limit:"
    machine_blocks, machine_threads = 1 << BLOCK_BITS, BUILTIN.max_threads
    return [
        ("threads per block", f"{lim.threads_per_block}",
         f"{over} {_refusal(check_dims, (1, 1, 1), (1024, 2, 1))}",
         f"{machine_threads} ({BUILTIN.max_warps} warps of {LANES} lanes): "
         f"{_refusal(check_launch_shape, _spec(1, machine_threads + 1))}"),
        ("block dimensions (x, y, z)", ", ".join(map(str, lim.block_dims)),
         f"{over} {_refusal(check_dims, (1, 1, 1), (1, 1, lim.block_dims[2] + 1))}",
         "CUDA's, within the threads per block"),
        ("grid dimensions (x, y, z)", ", ".join(map(str, lim.grid_dims)),
         f"{over} {_refusal(check_dims, (1, lim.grid_dims[1] + 1, 1), (1, 1, 1))}; blocks run one after "
         "another, so the step limit bounds a large grid's time",
         f"{machine_blocks} blocks in all: {_refusal(check_launch_shape, _spec(machine_blocks + 1, 1))}"),
        ("warp width", "32 lanes", f"{LANES} lanes (`%laneid`, `WARP_SZ`, shuffles and votes see {LANES})",
         f"{LANES} lanes"),
        ("warp scheduling", "independent: a warp may spin on a flag another warp sets",
         "a block's warps run one at a time, each until a barrier or its exit: a warp spinning on "
         "another warp's write never sees it, and the step limit's message says so",
         "the same order: a spin-wait on another warp stops at the token limit"),
        ("static shared memory per kernel", f"{lim.static_shared_bytes} bytes",
         f"{over} {_refusal(check_shared_bytes, lim.static_shared_bytes + 16, 0, 'k')}. Only the shared "
         "variables the kernel reaches (through its calls) are laid out",
         f"{_window('shared')} bytes (the shared window, both kinds together): `shared memory of N bytes "
         f"does not fit the machine's shared window`"),
        ("static + dynamic shared memory (`shared_bytes`)", f"{lim.shared_bytes} bytes without an opt-in "
         "(cudaFuncAttributeMaxDynamicSharedMemorySize, which a launch spec cannot give)",
         f"{over} {_refusal(check_shared_bytes, 1024, lim.shared_bytes, 'k')}; the dynamic part starts "
         "16-byte aligned after the static variables",
         f"the same {_window('shared')}-byte window: a CUDA-legal size beyond it is refused as capacity"),
        ("global memory (buffers and `.global` variables)", "the device's memory",
         f"{MAX_GLOBAL_BYTES} bytes (qwenGPU's bound, so a small spec cannot allocate gigabytes): "
         "`args[k]: a buffer of N ... qwenGPU's global memory holds at most ...`",
         f"{_window('global')} bytes from 0x{MEMORY.regions['global'].base:x}: `the launch needs N bytes of global "
         f"memory; the machine has {_window('global')}`"),
        ("local memory (stack) per thread", f"{lim.local_bytes_per_thread} bytes",
         f"{LOCAL_BYTES} bytes; an access beyond it faults (`out-of-bounds local ...`)",
         f"{MEMORY.local_bytes} bytes per thread, for blocks of at most {MEMORY.local_threads} threads: "
         f"`the kernel needs N bytes of local memory per thread; the machine has {MEMORY.local_bytes}`"),
        ("constant memory (`.const` together)", f"{lim.const_bytes} bytes",
         f"{over} `line L: .const NAME ends at byte N; CUDA's constant memory holds {lim.const_bytes} bytes`",
         f"{_window('const')} bytes: `const memory of N bytes does not fit the machine's const window`"),
        ("registers", "PTX registers are virtual (ptxas allocates at most 255 per thread)",
         f"{MAX_REGISTERS} declared in one function (`.reg .b32 %r<N>`): `line L: %r<N> declares more "
         f"registers than qwenGPU accepts in one function ({MAX_REGISTERS} together)`",
         f"{BUILTIN.registers} physical registers per warp on the built-in machine (the tokens hold up to {1 << REG_BITS}); "
         "more live values spill to memory, and a program still needing more is refused naming the count"),
        ("program size (ROM)", "-", "-",
         f"{BUILTIN.rom_bundles} bundles: `the program needs N bundles; the machine's ROM holds "
         f"{BUILTIN.rom_bundles}`"),
        ("step limit", "none (a kernel runs until it ends)",
         f"`max_steps` warp-instructions; default the larger of {DEFAULT_MAX_STEPS:,} and {STEPS_PER_WARP:,} "
         "per warp of the launch: `step limit of N steps exceeded (a runaway loop? raise max_steps)`; "
         "a warp spinning on memory while other warps of its block have not run is named as such",
         f"`max_steps` generated tokens; default the larger of {DEFAULT_MAX_TOKENS:,} and {TOKENS_PER_WARP:,} "
         "per warp; the model engines' progress bar runs up to the limit: `token limit of N reached "
         "(a runaway loop?)`; a warp that ran alone for the last half of the launch while other warps of "
         "its block waited is named as a likely spin-wait"),
        ("`max_steps` / `--max-steps`", "-", f"a positive int, or none for the default: "
         f"{_refusal(check_step_limit, 0)}", "the same"),
        ("PTX version", "ptxas of CUDA 13.0 accepts up to 9.0",
         f"{PTX_VERSIONS[0][0]}.{PTX_VERSIONS[0][1]} to {PTX_VERSIONS[1][0]}.x; beyond: `line L: PTX version "
         "99.9 is not supported ...`", "the same (one parser)"),
        ("integer immediates", "64-bit literals; ptxas keeps the low bits of a wider one",
         "refused beyond the operand's width: `line L: immediate V does not fit the W-bit operand of ...`",
         "the same (one validator)"),
        ("launch spec values", "-",
         "an int must fit its dtype, a float its dtype's finite range (\"inf\" is written as such), a "
         "\"0x...\" bit pattern its width; `grid` and `block` are required positive ints (not booleans); "
         "each refusal names `args[k].data[j]` or the field", "the same (one spec reader)"),
        ("`__constant__` / `__device__` variables set by the spec (`symbols`)", "`cudaMemcpyToSymbol`: up to the "
         "variable's size",
         "a module-scope `.global` or `.const` variable by name, data up to its size in a dtype that divides it: "
         "`symbols.NAME.data: 6 float32 values are 24 bytes; NAME holds 20 ...`; an unknown name lists the "
         "module's variables", "the same (one spec reader); the data reach memory through the prompt"),
    ]


def _bytes(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


def sizes_rows(configs=(BUILTIN, COMPACT_FPU_COURSE, COMPACT)) -> list[tuple[str, ...]]:
    """(machine, threads per block, global, shared, local per thread, const, ROM) of each named
    machine, from its geometry (`--machine NAME`)."""
    def row(c: MachineConfig) -> tuple[str, ...]:
        has = machine_sizes(c)
        local = _bytes(has["local"]) + ("" if has["local_threads"] >= has["threads"] else
                                        f" (threads 0-{has['local_threads'] - 1})")
        return (f"`{c.name}`" + (" (built in)" if c is BUILTIN else ""), f"{has['threads']}",
                _bytes(has["global"]), _bytes(has["shared"]), local, _bytes(has["const"]),
                f"{c.rom_bundles} bundles")
    return [row(c) for c in configs]


def limits_page() -> str:
    """docs/limits.md, written from the limits in code."""
    out = ["# Limits",
           "",
           "<!-- written by `python -m qwengpu.limits > docs/limits.md`; tests/test_limits.py checks it -->",
           "",
           "What a launch may ask for, and what each engine does at each limit. CUDA's limits (compute "
           "capability 9.0, what nvcc 13 compiles for) are refused alike by every engine, with the same "
           "`LaunchError`, before anything runs: the interpreter never runs what CUDA itself refuses. The "
           "machine's limits (the built-in geometry, COMPACT with the float unit, run by `sim`, `compact` and `model`) are "
           "capacity: those engines refuse beyond them with an `AssemblerError` (`qwengpu verify` lists "
           "such kernels apart from wrong ones), while the interpreter runs any size CUDA allows. "
           "qwenGPU's own bounds keep a small input from allocating or running without end.",
           "",
           "| limit | CUDA | interpreter (`interp`) | machine (`sim`, `compact`, `model`) |",
           "|---|---|---|---|"]
    for row in rows():
        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    out += ["",
            "The machine's sizes are its geometry (`docs/memory_sizes.md`); a launch that needs more than "
            "the built-in machine holds runs on a named one with `--machine NAME` (`run`, `verify`, `bench`, "
            "`fuzz`). `compact-fpu-course` holds a course's problem sizes stand-alone; the "
            "Qwen3.5-2B splice keeps the built-in sizes (its bound of 45 GPU layers and 20 GiB):",
            "",
            "| machine | threads per block | global | shared | local per thread | const | ROM |",
            "|---|---|---|---|---|---|---|"]
    out += ["| " + " | ".join(r) + " |" for r in sizes_rows()]
    out += ["",
            "Messages quote the code (N, L, V stand for the numbers of the case). The tables behind them: "
            "`qwengpu.launch.CUDA_LIMITS` and `MAX_GLOBAL_BYTES`, `qwengpu.ptx.parser.MAX_REGISTERS` and "
            "`PTX_VERSIONS`, the memory sizes of `qwengpu.machine.config.BUILTIN` (`qwengpu.machine.layout.MemoryMap`) "
            "and `qwengpu.machine.format`, the step "
            "limits in `qwengpu.semantics.launch_model` and `qwengpu.runtime.run`.",
            ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(limits_page(), end="")
