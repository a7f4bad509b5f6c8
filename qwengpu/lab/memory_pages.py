"""The memory views of large memories: one page of a region at a time, what a pass wrote, a value
or an address found.

A region of 16-64 KiB sent whole at every position is 32-128 KB of hex per region and a few
thousand rows to draw; the memory card shows a page of `rows` rows of `ROW_BYTES` bytes instead,
and the payload carries that page plus the rows the position's step or pass wrote (the changed
rows, wherever they are), so its size follows the page, not the memory:

    view = trace_launch(cuda, spec)                  # or a MachineView (engine="compact")
    pages = MemoryPages(view)
    pages.page(p, "global:out")                      # the page shown at position p (following writes)
    pages.page(p, "global:out", at=0x1000 + 4096)    # the page holding an address
    pages.find(p, "global:out", "301")               # byte offsets of the elements equal to 301
    pages.last_write(p, "global:out")                # (position, first offset) of the latest write
    pages.payload(p, snapshot.memory, settings)      # what the memory card draws

A page not asked for follows the launch: the bytes the position wrote, else those the next
instruction accesses (the interpreter's), else the latest earlier write, else the region's start.
Values are found in the region's element type (the kernel's own: `int32`, `float32`, ...), as
the card decodes them; addresses are the ones the hex dump shows (global addresses absolute).
"""
from __future__ import annotations

import bisect
import re
import weakref
from dataclasses import dataclass

import numpy as np

#: bytes per hex-dump row (the widget's `ROW`)
ROW_BYTES = 8
#: rows per page unless the page asks for another count
PAGE_ROWS = 16
#: rows a page may hold at most (a projector shows about 30)
MAX_PAGE_ROWS = 64
#: written rows outside the page sent with it, at most (a pass writes a few; the rest are counted)
MAX_CHANGED_ROWS = 32
#: found offsets sent, at most (the count says how many there are)
MAX_HITS = 256

_INT = re.compile(r"^[+-]?(0x[0-9a-f]+|0b[01]+|\d+)$", re.I)


def parse_address(text: str) -> int:
    """An address as the hex dump shows it and the card's box takes it: hex, with or without
    `0x` (`5ffc`, `0x5ffc`)."""
    t = text.strip().lower().replace("_", "")
    if re.fullmatch(r"(0x)?[0-9a-f]+", t):
        return int(t.removeprefix("0x"), 16)
    raise ValueError(f"{text!r} is not an address (hex, as the dump shows it: 5ffc or 0x5ffc)")


def _element_bits(value: str, dtype: np.dtype) -> np.ndarray | None:
    """`value` as one element of `dtype` (its bit pattern), or None when it is not one: an integer
    out of the type's range, a fraction in an integer type. A hex literal in a float type is the
    float's bit pattern (`0x3f800000` is 1.0 in float32)."""
    t = value.strip().lower().replace("_", "")
    if dtype.kind == "f":
        if _INT.match(t) and t.lstrip("+-").startswith(("0x", "0b")):
            bits = int(t, 0)
            if bits < 0 or bits >> (8 * dtype.itemsize):
                return None
            return np.array([bits], dtype=f"<u{dtype.itemsize}").view(dtype)
        try:
            x = float(t)
        except ValueError:
            return None
        return np.array([x], dtype=dtype)
    if not _INT.match(t):
        return None
    v = int(t, 0)
    bits = 8 * dtype.itemsize
    if t.lstrip("+-").startswith(("0x", "0b")) and 0 <= v < 1 << bits:
        return np.array([v], dtype=f"<u{dtype.itemsize}").view(dtype)        # a bit pattern
    info = np.iinfo(dtype)
    if not info.min <= v <= info.max:
        return None
    return np.array([v], dtype=dtype)


def find_value(data: bytes, dtype: str, query: str) -> list[int]:
    """Byte offsets of the elements of `data` (read as `dtype`, aligned) equal to `query`; a float
    query matches the elements equal to it once rounded to the type (`nan`: the NaNs). A value that
    is not an element of the type (300 in a `uint8` region: local memory, bytes) is looked for as
    its little-endian bytes (int32 or int64, float32 for a fraction) at any offset."""
    dt = np.dtype(dtype)
    want = _element_bits(query, dt)
    if want is not None:
        n = len(data) // dt.itemsize
        elems = np.frombuffer(data, dtype=dt, count=n)
        if dt.kind == "f" and np.isnan(want[0]):
            hit = np.isnan(elems)
        elif dt.kind == "f":
            hit = elems == want[0]
        else:
            hit = elems == want[0]
        return (np.flatnonzero(hit) * dt.itemsize).tolist()
    for wide in (np.dtype("<i4"), np.dtype("<u4"), np.dtype("<i8"), np.dtype("<f4")):
        pattern = _element_bits(query, wide)
        if pattern is not None:
            return _find_bytes(data, pattern.tobytes())
    raise ValueError(f"{query!r} is not a value of {dtype} (a number: 42, -7, 0x2a, 1.5, nan)")


def _find_bytes(data: bytes, pattern: bytes) -> list[int]:
    out, i = [], data.find(pattern)
    while i >= 0:
        out.append(i)
        i = data.find(pattern, i + 1)
    return out


@dataclass
class Page:
    """A page of a region: `offset` (bytes from the region's base, a multiple of the page's size),
    `rows` rows of `ROW_BYTES` bytes; `index` of `count` pages; `follow`: chosen by the launch."""
    offset: int
    rows: int
    index: int
    count: int
    follow: bool

    @property
    def nbytes(self) -> int:
        return self.rows * ROW_BYTES


class MemoryPages:
    """Pages, writes and searches of one view's regions (a `LaunchView` or a `MachineView`)."""

    def __init__(self, view):
        self.view = view
        self._regions = {r.key: r for r in view.regions()}
        # the writes of positions 1 .. _indexed, per region [(position, first offset)]: extended
        # only as far as a position asked (a live recording's views are many and long)
        self._writes: dict = {}
        self._indexed = 0
        self._memory_now = None      # a model view's regions at position _indexed (the next diff's base)

    # -- what each position wrote ------------------------------------------------------------------

    def written(self, position: int) -> dict:
        """{region key: sorted byte offsets} the step or pass before `position` wrote."""
        v = self.view
        if position <= 0:
            return {}
        if hasattr(v, "steps"):                 # the interpreter: the step's own writes
            s = v.steps[position - 1]
            out: dict = {}
            for sp, off, size, lane, _ in s.mem_writes:
                # the interpreter view's own mapping of a write to its region (shared per block,
                # local per thread), so the pages and the snapshots agree on where a write landed
                key, o = v._locate_write(sp, off, s.block, s.warp, lane)
                if key is not None:
                    out.setdefault(key, set()).update(range(o, o + size))
            return {k: sorted(x) for k, x in out.items()}
        return {k: x.tolist() for k, x in v.written_offsets(position).items() if len(x)}

    def _index_to(self, position: int):
        """The write index extended to `position`: the interpreter's from its steps' writes, a
        model view's by comparing each pass's regions with the pass before (as bytes first)."""
        position = min(position, len(self.view) - 1)
        steps = hasattr(self.view, "steps")
        for p in range(self._indexed + 1, position + 1):
            if steps:
                if self.view.steps[p - 1].mem_writes:
                    for key, offs in self.written(p).items():
                        self._writes.setdefault(key, []).append((p, offs[0]))
                continue
            before = self._memory_now if self._memory_now is not None else self.view.memory_at(p - 1)
            now = self.view.memory_at(p)
            for key, data in now.items():
                if data != before[key]:
                    first = int(np.argmax(np.frombuffer(data, np.uint8) != np.frombuffer(before[key], np.uint8)))
                    self._writes.setdefault(key, []).append((p, first))
            self._memory_now = now
        self._indexed = max(self._indexed, position)

    def last_write(self, position: int, key: str) -> tuple[int, int] | None:
        """(position, first byte offset) of the latest write into region `key` shown at or before
        `position` (a write is shown at the position after its step or pass), or None."""
        self._index_to(position)
        writes = self._writes.get(key, [])
        i = bisect.bisect_right(writes, (position, float("inf")))
        return writes[i - 1] if i else None

    def _shares_passes_with(self, view) -> bool:
        """Whether `view` holds this view's indexed passes, the same records (a later view of the
        same recording) and the same regions."""
        mine, theirs = self.view.trace.records, view.trace.records
        k = self._indexed
        return (k < len(theirs) and mine[0] is theirs[0] and mine[k] is theirs[k]
                and [r.key for r in view.regions()] == list(self._regions))

    # -- pages -------------------------------------------------------------------------------------

    def region(self, key: str):
        return self._regions[key]

    def offset_of(self, key: str, address: int) -> int:
        """The byte offset of an address of region `key`, as its hex dump shows it (global:
        absolute; shared and local: from the space's start)."""
        r = self._regions[key]
        if not r.base <= address < r.base + r.size:
            raise ValueError(f"0x{address:x} is not in {r.name} (0x{r.base:x}..0x{r.base + r.size:x})")
        return address - r.base

    def page(self, position: int, key: str, at: int | None = None, rows: int = PAGE_ROWS,
             access: dict | None = None, changed: list | None = None) -> Page:
        """The page of region `key` holding byte offset `at`; `at=None`: the page the launch shows
        (the bytes `position` wrote, else those of `access` (offsets the next instruction touches),
        else the latest earlier write, else the start). `changed`: the bytes `position` wrote, when
        the caller has them (a snapshot's)."""
        r = self._regions[key]
        rows = max(1, min(int(rows), MAX_PAGE_ROWS))
        size = rows * ROW_BYTES
        count = max(1, -(-r.size // size))
        follow = at is None
        if follow:
            if changed is None:
                changed = self.written(position).get(key)
            if changed:
                at = changed[0]
            elif access:
                at = min(int(k) for k in access)
            else:
                last = self.last_write(position, key)
                at = last[1] if last is not None else 0
        index = max(0, min(int(at) // size, count - 1))
        return Page(index * size, rows, index, count, follow)

    def find(self, position: int, key: str, query: str) -> list[int]:
        """Byte offsets in region `key` after `position` of the elements equal to `query` (in the
        region's element type, `find_value`)."""
        return find_value(self.view.memory_at(position)[key], self._regions[key].dtype, query)

    # -- the memory card's payload ---------------------------------------------------------------

    def payload(self, position: int, views, settings: dict | None = None, rows: int = PAGE_ROWS) -> list[dict]:
        """The memory card's regions at `position` (`views`: the snapshot's `MemoryView`s, which say
        which regions show: the focus block's shared memory, its warp's local memories): each
        region's page, the rows written outside it, what the search found. `settings`: per region
        key, what the page asked: `{"at": byte offset, "mark": byte offset, "find": text, "hit": k}`
        (no `at`: the page the launch shows; `mark`: an element to outline; `hit`: the page of
        the k-th element found, marked)."""
        settings = settings or {}
        memory = None                                  # the whole regions, read once if a window is short
        out = []
        for m in views:
            r = m.region
            want = settings.get(r.key) or {}
            if m.offset == 0 and len(m.data) >= r.size:
                data = bytes(m.data)                   # the view holds the whole region
            else:                                      # the interpreter's snapshot holds a window
                if memory is None:
                    memory = self.view.memory_at(position)
                data = memory[r.key]
            query = str(want.get("find") or "").strip()
            found, hits = None, []
            if query:
                try:
                    hits = find_value(data, r.dtype, query)
                    found = {"query": query, "hits": hits[:MAX_HITS], "count": len(hits), "error": None, "hit": None}
                except ValueError as e:
                    found = {"query": query, "hits": [], "count": 0, "error": str(e), "hit": None}
            at, mark = want.get("at"), want.get("mark")
            if hits and want.get("hit") is not None:    # the k-th hit: its page, marked
                k = int(want["hit"]) % min(len(hits), MAX_HITS)
                at = mark = hits[k]
                found["hit"] = k
            changed = list(m.changed)
            page = self.page(position, r.key, at, rows, m.access, changed)
            lo, hi = page.offset, min(page.offset + page.nbytes, r.size)
            outside = sorted({o // ROW_BYTES * ROW_BYTES for o in changed if not lo <= o < hi})
            extra = [[o, data[o:o + ROW_BYTES].hex()] for o in outside[:MAX_CHANGED_ROWS]]
            shown = [(lo, hi)] + [(o, o + ROW_BYTES) for o, _ in extra]

            def visible(o, shown=shown):
                return any(a <= o < b for a, b in shown)
            last = self.last_write(position, r.key)
            entry = {"key": r.key, "name": r.name, "space": r.space, "base": r.base, "size": r.size,
                     "dtype": r.dtype, "offset": lo, "hex": data[lo:hi].hex(),
                     "changed": [o for o in changed if visible(o)],
                     "ptr": {str(k): v for k, v in m.pointers.items() if visible(int(k))},
                     "acc": {str(k): v for k, v in m.access.items() if visible(int(k))},
                     "vars": [list(v) for v in r.variables],
                     "page": {"index": page.index, "count": page.count, "rows": page.rows, "follow": page.follow},
                     "rows": extra, "more_changed": max(0, len(outside) - MAX_CHANGED_ROWS),
                     "written": len(changed),
                     "last_write": None if last is None else {"pos": last[0], "offset": last[1]},
                     "mark": None if mark is None else int(mark), "find": found}
            out.append(entry)
        return out


#: the model view paged last: a live recording's next view (the passes so far, the same pass
#: records and more) takes its write index over instead of reading every pass again
_LAST_MODEL: list = [None]


def pages_of(view) -> MemoryPages:
    """The `MemoryPages` of a view, made once (its write index is built as far as asked) and kept
    on the view, so that it goes with it (a table of views to pages would keep every view of a
    live recording alive: the pages hold their view)."""
    got = view.__dict__.get("_memory_pages")
    if got is None:
        got = view.__dict__["_memory_pages"] = MemoryPages(view)
        records = getattr(getattr(view, "trace", None), "records", None)
        if records is not None:
            before = _LAST_MODEL[0]() if _LAST_MODEL[0] is not None else None
            if before is not None and before._shares_passes_with(view):
                got._writes = {k: list(w) for k, w in before._writes.items()}
                got._indexed, got._memory_now = before._indexed, before._memory_now
            _LAST_MODEL[0] = weakref.ref(got)
    return got


__all__ = ["MemoryPages", "Page", "pages_of", "find_value", "parse_address", "ROW_BYTES", "PAGE_ROWS",
           "MAX_PAGE_ROWS", "MAX_CHANGED_ROWS", "MAX_HITS"]
