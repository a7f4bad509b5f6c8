"""What a PTX launch means, whoever runs it: the definitions the reference interpreter (the oracle,
`qwengpu.interp`) and the machine (`qwengpu.machine`, `qwengpu.assembler`, `qwengpu.runtime`) share,
so that neither imports the other.

- `launch_model`: a launch's warps and step limit, the generic address windows, where buffers,
  `.global`, `.shared`, `.const` and `.local` variables and kernel parameters lie, CUDA's limits;
- `faults`: what a fault of a launch is (`ExecutionFault`), the same on every engine;
- `integers`, `floats` (its parts `float_exact`, `float_convert`): the bit-exact results of PTX's
  integer and IEEE instructions; `words`: what one ALU micro-op computes on 32-bit words, the
  language the approximate instructions' definitions (`approx`) are written in;
- `shuffle`: which lane a `shfl.sync` reads;
- `printf`: the text a kernel's printf records format to;
- `symbols`: the module variables a launch spec sets by name (`"symbols"`) and a result reads back.
"""
