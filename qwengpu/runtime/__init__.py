"""Running the machine: the built checkpoint (`checkpoint`), the launch prompt (`prompt`), the
machine's tokenizer (`tokenizer`) and the engines a launch runs on (the simulator, the stock
transformers forward, the compact engine)."""

from qwengpu.machine.config import BUILTIN as _BUILTIN

#: the name of the machine every engine, build and the lab run when none is named (`machine.config.BUILTIN`)
BUILTIN_MACHINE = _BUILTIN.name
