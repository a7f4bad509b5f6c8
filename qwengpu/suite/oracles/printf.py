"""Oracles of the printf kernels, and the text each prints (`PRINTF_TEXT`)."""
from __future__ import annotations

import numpy as np

from .common import oracle, s32


#: the printf output a kernel must give (as `LaunchResult.printf.text()` shows it), by kernel: C's printf,
#: written out by hand
PRINTF_TEXT = {"printf_basic": """[thread 0] [0]     7 7   | 00000007 3.14
[thread 0] a lane 21 60129542144
[thread 1] [1]   -42 4294967254| ffffffd6 -0.50
[thread 1] b lane -126 -360777252864
[thread 2] [2] 65535 65535| 0000ffff 1000.12
[thread 2] c lane 196605 562941363486720
[thread 3] [3]     0 0   | 00000000 0.00
[thread 3] d lane 0 0"""}


@oracle("printf_basic", tags={"printf"},
        about="printf from 4 threads (%d %u %x %f %s %c %ld %lld, widths, precision); y = 2x")
def printf_basic(x, f, y):
    return [x, f, np.array([s32(2 * int(v)) for v in x], dtype=np.int32)]
