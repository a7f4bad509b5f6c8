"""Running the machine: the built checkpoint (`checkpoint`), the launch prompt (`prompt`), the
machine's tokenizer (`tokenizer`) and the engines a launch runs on (the simulator, the stock
transformers forward, the compact engine)."""

from qwengpu.machine.config import BUILTIN as _BUILTIN

#: the name of the machine every engine, build and the lab run when none is named (`machine.config.BUILTIN`)
BUILTIN_MACHINE = _BUILTIN.name


def machine_sizes(machine=BUILTIN_MACHINE) -> dict:
    """What a machine (a name, or a geometry) holds for one launch: threads per block, the global,
    shared and const windows in bytes, local bytes per thread and the threads that have them."""
    from qwengpu.machine.config import config_named
    from qwengpu.machine.layout import memory_map
    config = config_named(machine) if isinstance(machine, str) else machine
    mm = memory_map(config)
    return {"threads": config.max_threads, "global": mm.window("global"), "shared": mm.window("shared"),
            "const": mm.window("const"), "local": mm.local_bytes, "local_threads": mm.local_threads}
