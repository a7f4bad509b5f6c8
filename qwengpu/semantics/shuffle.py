"""Which lane a `shfl.sync` reads: one rule for the interpreter, the simulator and the lab."""
from __future__ import annotations

from .launch_model import LANES


def shuffle_source(mode: str, lane: int, b: int, c: int) -> tuple[int, bool]:
    """(the lane `lane` reads, whether it is in range) for `shfl.sync.MODE d|p, a, b, c, mask`
    with operand values `b` and `c` on that lane (PTX ISA: c packs the clamp value in bits 0-4 and
    the segment mask in bits 8-12). Out of range (or beyond the warp's 4 lanes) it reads itself."""
    bval, cval, seg = b & 0x1F, c & 0x1F, (c >> 8) & 0x1F
    max_lane, min_lane = (lane & seg) | (cval & ~seg), lane & seg
    if mode == "up":
        j, ok = lane - bval, lane - bval >= max_lane
    elif mode == "down":
        j, ok = lane + bval, lane + bval <= max_lane
    elif mode == "bfly":
        j, ok = lane ^ bval, (lane ^ bval) <= max_lane
    else:                                                            # idx
        j = min_lane | (bval & ~seg)
        ok = j <= max_lane
    ok = ok and 0 <= j < LANES
    return (j if ok else lane), ok
