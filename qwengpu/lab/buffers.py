"""Memory the lab's recorder writes into during a launch without page faults on the model's
thread: tables that grow by passes with their pages asked for ahead on another thread (`Rows`,
`prefault`), and capture buffers kept from one recording for the next (`reused_buffer`). On this
project's VMs a first write to a page inside a recording costs ~10 us (docs/lab.md, "Recording
speed")."""
from __future__ import annotations

import sys
import threading

import numpy as np

#: rows of the taps' tables made room for at once (`Rows`)
RESERVED_ROWS = 16384
#: rows of the taps' tables whose pages are asked for ahead of their filling (`Rows`, `prefault`)
PREFAULT_ROWS = 1024
PREFAULT_CHUNK = 64                  # ... in pieces of this many rows (~0.5 MB)
MADV_POPULATE_WRITE = 23             # <linux/mman.h>


class Rows:
    """Rows of one shape added a few at a time (a chunk of tokens, or one), in one array that
    doubles when full: no list of small arrays to join at every view. `table()` is a view of the
    rows so far; a row once filled is never written again (a view taken while recording stays
    true after the array grows: it keeps the old one). The first array has room for
    `RESERVED_ROWS`: np.zeros takes its pages from the system untouched, so only the rows filled
    cost memory. Those pages are asked for ahead of the rows being filled (half as many rows as
    are filled, up to `PREFAULT_ROWS`) on another thread (`prefault`): a first write to a page
    costs a fault, and the faults of gcd's taps tables (~30 MB) cost ~0.1 s, ~3% of its
    recording, on the thread that runs the model."""

    def __init__(self, shape: tuple):
        self.data = np.zeros((0, *shape), np.float32)
        self.count = 0
        self.asked = 0                 # rows whose pages were asked for (`prefault`)

    def add(self, n: int) -> np.ndarray:
        """The next n rows (zeros), to fill."""
        if self.count + n > len(self.data):
            grown = np.zeros((max(2 * len(self.data), self.count + n, RESERVED_ROWS), *self.data.shape[1:]),
                             np.float32)
            grown[:self.count] = self.data[:self.count]
            self.data = grown
            self.asked = self.count
        self.count += n
        lead = min(PREFAULT_ROWS, self.count // 2)         # a short launch faults its few pages itself
        while self.count + lead > self.asked + PREFAULT_CHUNK and self.asked < len(self.data):
            rows = self.data[self.asked:self.asked + PREFAULT_CHUNK]
            self.asked += len(rows)
            _prefaulter().put(rows)
        return self.data[self.count - n:self.count]

    def table(self) -> np.ndarray:
        return self.data[:self.count]


_PREFAULTS = None


def _prefaulter():
    """The queue of one daemon thread that runs `prefault` on the arrays put in it, in order (one
    thread for all recordings: a thread made per array waits for the address space's lock while a
    prefault holds it, and so does the thread that runs the model; small arrays hold it briefly)."""
    global _PREFAULTS
    if _PREFAULTS is None:
        import queue
        _PREFAULTS = queue.SimpleQueue()

        def run():
            while True:
                prefault(_PREFAULTS.get())
        threading.Thread(target=run, name="qwengpu-prefault", daemon=True).start()
    return _PREFAULTS


def prefault(array: np.ndarray) -> bool:
    """Have the system supply the pages of a contiguous array now (Linux 5.14's
    MADV_POPULATE_WRITE: the pages are made present and writable, their contents untouched), so
    that a later first write does not fault. False where the system cannot (the array is then
    as before)."""
    if not array.size or sys.platform != "linux":
        return False
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.PAGESIZE
    lo = -(-array.ctypes.data // page) * page                  # the whole pages inside the array
    hi = (array.ctypes.data + array.nbytes) // page * page
    if hi <= lo:
        return False
    return libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), MADV_POPULATE_WRITE) == 0


#: capture buffers of finished recordings, by shape, for the next (`_reused_buffer`)
_SPARE_BUFFERS: dict = {}
_SPARE_LOCK = threading.Lock()


def reused_buffer(shape: tuple, dtype=np.float32, zeroed: bool = False) -> np.ndarray:
    """An array of `shape` and `dtype` for a recording (contents undefined, or zeros with
    `zeroed`): a finished recording's if one is spare, else a new one. A new one's pages are
    faulted where the recording first writes them, inside the model's passes (the captures' ~5 MB
    in the prompt's first chunk, the rows' distance bounds' ~7 MB over the first passes: ~5-10 ms
    each a recording, measured on dot); zeroing a spare one costs ~1 ms."""
    key = (tuple(shape), np.dtype(dtype).str)
    with _SPARE_LOCK:
        spare = _SPARE_BUFFERS.get(key)
        buf = spare.pop() if spare else None
    if buf is None:
        return np.zeros(shape, dtype) if zeroed else np.empty(shape, dtype)
    if zeroed:
        buf.fill(0)
    return buf


def give_back_buffer(buf: np.ndarray):
    """Keep a finished recording's buffer for the next (at most two of a shape and type); the
    recording must hold no view of it any more."""
    with _SPARE_LOCK:
        spare = _SPARE_BUFFERS.setdefault((buf.shape, buf.dtype.str), [])
        if len(spare) < 2:
            spare.append(buf)
