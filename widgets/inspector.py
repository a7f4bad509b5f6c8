"""The register inspector: an anywidget that steps through one launch token by token.

    from qwengpu_widgets import Inspector
    insp = Inspector(ptx, spec)                     # engine="interp": the reference interpreter's trace
    insp = Inspector(ptx, spec, engine="compact")   # the model's forward passes (or engine="model")
    insp = Inspector(ptx, spec, engine="model", model="qwen35-gpu/", prefix="Some text")   # a spliced checkpoint
    insp                                            # display it (JupyterLab 4, ipywidgets 8)
    insp.step(); insp.back(); insp.goto(13); insp.run_to_pc(2)
    insp.snapshot.changed_regs                      # what the view shows, from Python
    insp.presentation = True                        # presentation mode (also the widget's "present" button)
    insp.memory_goto("out", 0x5000 + 12028)          # a large memory's page holding an address
    insp.memory_find("out", 9022)                    # the addresses of the elements equal to 9022

The launch is traced once (`qwengpu.lab.trace_launch`: a `LaunchView` on the interpreter, a
`MachineView` on the model engines); every position change is a lookup, formatted by
`qwengpu.lab.payload` and sent as one small JSON dict (`state`), with the model's raw GDN state and
any softmax attention as bytes (`gdn`, `attn`). Without a kernel (an nbconvert export, a notebook
opened cold) the widget shows its `text/html` fallback: the current position's payload drawn by the
widget's own script (`widgets.static`), so it shows what the widget shows.
"""
from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import anywidget
import traitlets

from qwengpu.lab import DEFAULT_SELECTIONS, LaunchView, MachineView, trace_launch
from qwengpu.lab.memory_pages import MAX_PAGE_ROWS, PAGE_ROWS, pages_of, parse_address
from qwengpu.lab.payload import (attention_payload, layer_attention_payload, machine_gdn_bytes,
                                 machine_program_payload, machine_snapshot_payload, memory_payload, program_payload,
                                 snapshot_payload)

from .bundle import module_script
from .static import render_html

_HERE = Path(__file__).resolve().parent
#: the id of the widget's stylesheet in the page, per version of the CSS
STYLE_ID = "qwengpu_widgets.Inspector-" + hashlib.sha1((_HERE / "inspector.css").read_bytes()).hexdigest()[:10]


#: seconds between two views of a background recording's passes so far
PARTIAL_EVERY = 1.0
#: a background recording pauses this long (s) after the user's last move: scrubbing gets the cores
USER_QUIET = 0.3


class RecordingCancelled(Exception):
    """A background recording stopped by `Inspector.cancel` (or the widget's cancel button)."""


def _machine_payload_of(view, position: int, mem: str, selections: tuple, layer: int) -> tuple:
    """(snapshot, state payload, raw GDN bytes, softmax windows and meta, the layers' attention and
    meta) of one position of a MachineView."""
    snap = view.snapshot(position)
    meta, att = attention_payload(view, position)
    lmeta, latt = layer_attention_payload(view, position, layer)
    return (snap, machine_snapshot_payload(view, snap, mem, list(selections)),
            machine_gdn_bytes(view, position, mem), att, meta, latt, lmeta)


class Inspector(anywidget.AnyWidget):
    _esm = module_script()                             # inspector_base.js + view_*.js + inspector.js
    _css = _HERE / "inspector.css"

    program = traitlets.Dict().tag(sync=True)          # sent once: disassembly, per-step pcs
    state = traitlets.Dict().tag(sync=True)            # the current position's snapshot
    position = traitlets.Int(0).tag(sync=True)
    fmt = traitlets.Unicode("hex").tag(sync=True)      # hex | dec | float
    breakpoints = traitlets.List(traitlets.Int()).tag(sync=True)
    line_breakpoints = traitlets.List(traitlets.Int()).tag(sync=True)   # CUDA lines (as the source panel numbers them)
    attn = traitlets.Bytes(b"").tag(sync=True)         # uint8 softmax windows of attending layers
    attn_meta = traitlets.List().tag(sync=True)
    gdn = traitlets.Bytes(b"").tag(sync=True)          # int8 raw GDN state of `gdn_memory` (model engines)
    gdn_memory = traitlets.Unicode("reg.emit").tag(sync=True)   # the memory the GDN panel shows
    selections = traitlets.List(traitlets.Unicode()).tag(sync=True)   # memories of the selection panel
    progress = traitlets.Float(1.0).tag(sync=True)
    layer = traitlets.Int(-1).tag(sync=True)           # the GPU layer whose attention is shown in detail
    latt = traitlets.Bytes(b"").tag(sync=True)         # uint8: every layer's attention now, the layer's per head
    latt_meta = traitlets.Dict().tag(sync=True)
    recording = traitlets.Dict().tag(sync=True)        # background=True: status, passes so far, last token
    # presentation mode (larger type, scrubber and current layer on one 1280x720 screen); None: as
    # the browser last showed it (the page then sets it)
    presentation = traitlets.Bool(None, allow_none=True).tag(sync=True)
    # the memory card's pages: per region key what the page asked ({"at", "mark", "find", "hit"}:
    # `qwengpu.lab.memory_pages.MemoryPages.payload`); a region not named follows the launch
    memory_pages = traitlets.Dict().tag(sync=True)
    memory_rows = traitlets.Int(PAGE_ROWS).tag(sync=True)   # rows of 8 bytes a page shows

    def __init__(self, program=None, launch=None, *, view: LaunchView | MachineView | None = None,
                 engine: str = "interp", kernel: str | None = None, names: list | None = None, position: int = 0,
                 breakpoints=(), fmt: str = "hex", machine=None, gdn_memory: str = "reg.emit",
                 selections=None, layer: int | None = None, background: bool = False, model=None, prefix=None,
                 source=None, presentation: bool | None = None, **kwargs):
        # the page's <style> for this widget is keyed by this id: a notebook that stored an older
        # version's widget state (its CSS) and is reopened must not restyle today's widgets
        kwargs.setdefault("_anywidget_id", STYLE_ID)
        super().__init__(**kwargs)
        self.presentation = presentation
        self._lock = threading.RLock()
        self._user_moves = 0                       # position changes from the page or from Python
        self._serving = 0                          # position changes being drawn for the user now
        self._moved_at = -1e9                      # when the user last moved (time.monotonic)
        self._installing = None                    # the thread installing a view: its own trait sets
                                                   # do not refresh (another thread's wait for the lock)
        opts = dict(position=position, breakpoints=breakpoints, fmt=fmt, gdn_memory=gdn_memory,
                    selections=selections, layer=layer)
        if view is not None:
            self._install(view, **opts)
            return
        if program is None or launch is None:
            raise TypeError("Inspector needs a program and a launch, or view=LaunchView / MachineView")
        if model is not None:                       # a spliced checkpoint's folder: the machine inside it
            if machine is not None:
                raise TypeError("Inspector takes model= (a spliced checkpoint's folder) or machine=, not both")
            from qwengpu.splice.machine_splice import open_spliced_machine
            machine = open_spliced_machine(model)
        record = dict(engine=engine, kernel=kernel, names=names, **({"machine": machine} if machine is not None else {}),
                      **({"prefix": prefix} if prefix is not None else {}),
                      **({"source": source} if source is not None else {}))
        if not background:
            self.progress = 0.0
            self._install(trace_launch(program, launch, progress=self._on_progress, **record), **opts)
            return
        # recorded in a thread while the widget shows its progress (and a cancel button)
        self._cancel = threading.Event()
        self.progress = 0.0
        self.recording = {"status": "recording", "passes": 0, "token": "", "engine": engine}
        self.program = {"mode": "recording", "engine": engine}
        self.on_msg(self._on_msg)
        self._thread = threading.Thread(target=self._record, args=(program, launch, record, opts), daemon=True)
        self._thread.start()

    def _record(self, program, launch, record, opts):
        """The background recording: progress at most ten times a second; on the model engines the
        passes recorded so far become the inspector's view about once a second (scrubbable while
        the launch goes on; a view at its last pass follows the new passes)."""
        from qwengpu.lab.recorder import LiveRecording
        model = record["engine"] in ("compact", "model")
        live = LiveRecording() if model else None
        last = [0.0, time.monotonic()]

        def tick(done, text=""):
            if self._cancel.is_set():
                raise RecordingCancelled(f"cancelled after {done} passes")
            waited = time.monotonic()
            while (self._serving or time.monotonic() - self._moved_at < USER_QUIET) and time.monotonic() - waited < 1.0:
                # a scrub of the user's first: the recording waits while a move is being drawn
                # and for a moment after one (the next key comes soon; it gets the cores)
                time.sleep(0.002)
            now = time.monotonic()
            if now - last[0] > 0.1:                  # at most ten updates a second
                last[0] = now
                expected = live.expected if live is not None else None
                with self._lock:
                    self.recording = {**self.recording, "passes": done, "token": text, "expected": expected}
            if live is not None and now - last[1] > PARTIAL_EVERY:
                view = live.view()
                if view is not None:
                    self._show(view, opts)
                last[1] = time.monotonic()

        hook = {"on_token": lambda i, text, state: tick(i + 1, text), "live": live} if model \
            else {"progress": lambda done, total: tick(done)}
        try:
            view = trace_launch(program, launch, **record, **hook)
        except RecordingCancelled as e:
            view = live.view() if live is not None else None
            if view is not None:                    # every pass recorded up to the cancel stays
                self._show(view, opts)
            n = len(view) if view is not None else self.recording.get("passes", 0)
            with self._lock:                        # the count is what the view holds, not the token in flight
                self.recording = {**self.recording, "status": "cancelled", "passes": n,
                                  "error": f"cancelled after {n} passes" if view is not None else str(e)}
            return
        except Exception as e:                      # shown in the widget, kept for Python
            self.error = e
            with self._lock:
                self.recording = {**self.recording, "status": "failed", "error": f"{type(e).__name__}: {e}"}
            return
        self._show(view, opts, final=True)
        with self._lock:
            self.recording = {**self.recording, "status": "done", "passes": len(view)}

    def _show(self, view, opts, final: bool = False):
        """Show a recording's view: the passes so far (`final=False`), or the whole launch. The
        first view opens at its last pass; later ones leave the position to the user (the page
        follows the last pass while it is at it: one writer, no races), and the whole launch goes
        to the asked `position` if nobody moved it since the first view."""
        if getattr(self, "view", None) is None:
            with self._lock:
                self._install(view, **{**opts, "position": len(view) - 1 if not final else opts["position"]})
                self._moves_at_first = self._user_moves
            return
        # the costly part before the lock (the user's changes wait for the lock, not for this): the
        # view's program and the payloads of the positions it is likely to show — where the user
        # is, the next step, and its last pass (the page follows the last pass while it shows the
        # last one)
        untouched = self._user_moves == self._moves_at_first
        position = opts["position"] if final and untouched else None
        program = machine_program_payload(view) if isinstance(view, MachineView) else program_payload(view)
        prepared: dict = {}
        if isinstance(view, MachineView) and self.machine_mode:
            at = min(self.position if position is None else position, len(view) - 1)
            for p in {at, min(at + 1, len(view) - 1), len(view) - 1}:
                key = self._payload_key(view, p)
                prepared[key] = _machine_payload_of(view, *key)
        with self._lock:
            self._install(view, position=position, keep=True, program=program,
                          prepared={k: v for k, v in prepared.items() if k == self._payload_key(view, k[0])})

    def set_state(self, sync_data):
        """The page's changes (position, layer, ...), applied under the lock a recording's thread
        takes to show its next view: traitlets' held notifications are per object, not per thread,
        so a change applied meanwhile would be delivered in (and counted as) the recording's."""
        with self._lock:
            super().set_state(sync_data)

    def _on_msg(self, widget, content, buffers):
        if isinstance(content, dict) and content.get("cancel"):
            self.cancel()

    def _install(self, view, position=0, breakpoints=(), fmt="hex", gdn_memory="reg.emit", selections=None,
                 layer=None, keep: bool = False, program: dict | None = None, prepared: dict | None = None):
        """Show `view`. `keep`: another view of the same launch (a recording's passes so far): the
        settings the user may be changing from the page (layer, memory, format, breakpoints) are
        left as they are, not written back with values read a moment before. `program` and
        `prepared` (payloads by `_payload_key`): computed beforehand, outside the lock."""
        self._payloads = dict(prepared or {})          # not those of another view (a recording's earlier passes)
        self.view = view
        self.progress = 1.0
        self.machine_mode = isinstance(view, MachineView)
        with self.hold_sync():                         # program and state in one message
            self._installing = threading.get_ident()   # one refresh at the end, not one per trait set
            try:
                self._set_view_traits(view, position, breakpoints, fmt, gdn_memory, selections, layer, keep, program)
            finally:
                self._installing = None
            self._refresh(ahead=not keep)

    def _installs_here(self) -> bool:
        return self._installing == threading.get_ident()

    def _set_view_traits(self, view, position, breakpoints, fmt, gdn_memory, selections, layer, keep, program):
        """The view's traits (program, panels, position) without their observers' refreshes."""
        if keep:
            self.program = program or (machine_program_payload(view) if self.machine_mode else program_payload(view))
        elif self.machine_mode:
            self.gdn_memory = gdn_memory if gdn_memory in view.trace.memories else "reg.emit"
            self.selections = list(selections or DEFAULT_SELECTIONS)
            tr = view.trace
            self.layer = int(layer) if layer is not None and 0 <= layer < len(tr.layers) else \
                int(tr.memories[self.gdn_memory].layer)
            self.program = machine_program_payload(view)
        else:
            self.program = program_payload(view)
        if not keep:
            self.fmt = fmt
            self.breakpoints = sorted(set(int(b) for b in breakpoints))
        if position is not None:
            self.position = max(0, min(position, len(view) - 1))
        elif self.position > len(view) - 1:
            self.position = len(view) - 1

    def wait(self, timeout: float | None = None) -> "Inspector":
        """Wait for a recording started with `background=True` (returns at once otherwise)."""
        t = getattr(self, "_thread", None)
        if t is not None:
            t.join(timeout)
        return self

    def cancel(self) -> "Inspector":
        """Stop a recording started with `background=True` at its next pass (the widget's cancel
        button). The widget says "cancelling" at once; "cancelled" when the recording has stopped."""
        ev = getattr(self, "_cancel", None)
        if ev is not None:
            ev.set()
            with self._lock:
                if self.recording.get("status") == "recording":
                    self.recording = {**self.recording, "status": "cancelling"}
        return self

    # -- Python API --------------------------------------------------------------------------------

    @property
    def snapshot(self):
        """The `qwengpu.lab.Snapshot` shown now."""
        return self._snap

    @property
    def positions(self) -> int:
        return len(self.view)

    def goto(self, position: int) -> "Inspector":
        self.position = max(0, min(int(position), len(self.view) - 1))
        return self

    def step(self, n: int = 1) -> "Inspector":
        return self.goto(self.position + n)

    def back(self, n: int = 1) -> "Inspector":
        return self.goto(self.position - n)

    def run_to_pc(self, pc: int) -> "Inspector":
        """Go to the next position whose next instruction is at `pc` (on the model engines: whose
        pass runs bundle `pc`); stay if there is none."""
        t = self.view.find_pc(pc, self.position)
        if t is not None:
            self.goto(t)
        return self

    def play(self) -> "Inspector":
        """Run to the next breakpoint, on a pc or a CUDA line (or the end), as the play button does."""
        t = self.view.next_break(self.position, self.breakpoints)
        for line in self.line_breakpoints:
            hit = self.view.find_line(line, self.position)
            if hit is not None:
                t = min(t, hit)
        return self.goto(t)

    def run_to_line(self, line: int) -> "Inspector":
        """Go to the next position where CUDA line `line` executes (numbered as the source panel
        numbers it: a `%%cuda` cell's lines count the `%%cuda` line as 1): on the interpreter where
        its first instruction is next, on the model engines the next pass that runs a bundle holding
        it; stay if there is none (or the launch has no CUDA source)."""
        t = self.view.find_line(int(line), self.position)
        if t is not None:
            self.goto(t)
        return self

    def toggle_line_breakpoint(self, line: int) -> "Inspector":
        """A breakpoint on a CUDA line (the source panel's gutter): play stops where it executes."""
        self.line_breakpoints = sorted(set(self.line_breakpoints) ^ {int(line)})
        return self

    # -- memory pages ------------------------------------------------------------------------------

    def _region_key(self, region: str) -> str:
        """A region's key from its name, key or space ("out", "global:out", "shared")."""
        return self.snapshot.region(region).region.key

    def _ask_memory(self, region: str, **want) -> str:
        key = self._region_key(region)
        pages = dict(self.memory_pages)
        cur = {k: v for k, v in {**pages.get(key, {}), **want}.items() if v is not None and v != ""}
        if cur:
            pages[key] = cur
        else:
            pages.pop(key, None)
        self.memory_pages = pages
        return key

    def memory_page(self, region: str) -> dict:
        """What the memory card shows of `region` now: its payload (`offset`, `hex` of the page,
        `page` {index, count, rows, follow}, the written rows outside it, `last_write`, `find`)."""
        key = self._region_key(region)
        return next(m for m in self.state["memory"] if m["key"] == key)

    def memory_goto(self, region: str, address) -> "Inspector":
        """Show the page of `region` holding `address` (as the hex dump shows it: global addresses
        absolute; a string is hex, as the card's "go to address" box takes it), marked."""
        key = self._region_key(region)
        address = parse_address(address) if isinstance(address, str) else int(address)
        off = pages_of(self.view).offset_of(key, address)
        self._ask_memory(region, at=off, mark=off, hit=None)
        return self

    def memory_follow(self, region: str) -> "Inspector":
        """`region`'s page follows the launch again (the bytes each step writes), as "follow" does."""
        key = self._region_key(region)
        pages = dict(self.memory_pages)
        want = {k: v for k, v in pages.get(key, {}).items() if k == "find"}
        self._ask_memory(region, **{k: None for k in ("at", "mark", "hit")}, **want)
        return self

    def memory_find(self, region: str, value) -> list[int]:
        """The addresses of `region`'s elements equal to `value` now (in its element type:
        `qwengpu.lab.memory_pages.find_value`); the card shows the first one's page, marked."""
        key = self._region_key(region)
        self._ask_memory(region, find=str(value), hit=0, at=None, mark=None)
        base = pages_of(self.view).region(key).base
        return [base + o for o in pages_of(self.view).find(self.position, key, str(value))]

    def memory_last_write(self, region: str):
        """Show the page of `region`'s latest write up to now, marked, as "last write" does;
        returns (position, address) of that write, or None if nothing wrote it yet."""
        key = self._region_key(region)
        pages = pages_of(self.view)
        last = pages.last_write(self.position, key)
        if last is None:
            return None
        self._ask_memory(region, at=last[1], mark=last[1], hit=None)
        return last[0], pages.region(key).base + last[1]

    def toggle_breakpoint(self, pc: int) -> "Inspector":
        bps = set(self.breakpoints)
        bps ^= {int(pc)}
        self.breakpoints = sorted(bps)
        return self

    def export_html(self, path=None, layers: str | None = "all"):
        """Write one self-contained HTML file of this launch that plays and scrubs without a kernel
        or a server (no CDN): every position's payload, every layer's attention card
        (`layers="all"`) and the widget's script (`qwengpu_widgets.export`). `path`: default
        `KERNEL.html` in the working folder. Returns the path (`ExportedHTML`: shown in a notebook
        as a link to the file); `qwengpu_widgets.export.export_html(insp)` gives the text."""
        from .export import ExportedHTML, default_export_name, export_html
        target = ExportedHTML(path if path is not None else default_export_name(self))
        export_html(self, target, layers=layers)
        return target

    def to_html(self) -> str:
        """The current position without a kernel (what exports show): its payload and the widget's
        script, which draws it in the page as the live widget does."""
        return render_html(self.program, self.state, fmt=self.fmt, attn=self.attn, gdn=self.gdn,
                           attn_meta=self.attn_meta, latt=self.latt, latt_meta=self.latt_meta,
                           breakpoints=list(self.breakpoints), line_breakpoints=list(self.line_breakpoints),
                           layer=self.layer, gdn_memory=self.gdn_memory, selections=list(self.selections),
                           presentation=self.presentation)

    # -- sync ----------------------------------------------------------------------------------------

    def _on_progress(self, done: int, total: int):
        self.progress = done / max(1, total)

    @traitlets.observe("position")
    def _position_changed(self, change):
        user = threading.current_thread() is not getattr(self, "_thread", None)
        if user:
            self._user_moves += 1                  # not the recording following its last pass
        if hasattr(self, "view") and not self._installs_here():
            self._serving += user                  # a recording waits between passes meanwhile
            if user:
                self._moved_at = time.monotonic()
            try:
                with self._lock:                   # a recording's thread may be swapping the view
                    self._refresh()
            finally:
                self._serving -= user

    def show_layer(self, layer: int) -> "Inspector":
        """Show GPU layer `layer`'s attention in detail (model engines), as clicking it does."""
        self.layer = int(layer)
        return self

    @property
    def layer_attention(self):
        """The shown layer's weights now: [heads, tokens 0..t] (`qwengpu.lab.attention.layer_attention`)."""
        from qwengpu.lab.attention import layer_attention
        tr = self.view.trace
        return layer_attention(tr, tr.prompt_len - 1 + self.position, self.layer)

    @traitlets.observe("layer")
    def _layer_changed(self, change):
        if hasattr(self, "view") and getattr(self, "machine_mode", False) and not self._installs_here():
            meta, data = layer_attention_payload(self.view, self.position, self.layer)
            with self.hold_sync():
                self.latt = data
                self.latt_meta = meta

    @traitlets.observe("gdn_memory", "selections")
    def _panels_changed(self, change):
        if hasattr(self, "view") and getattr(self, "machine_mode", False) and not self._installs_here():
            self._refresh()

    def _rows(self) -> int:
        return max(1, min(int(self.memory_rows), MAX_PAGE_ROWS))

    @traitlets.observe("memory_pages", "memory_rows")
    def _memory_pages_changed(self, change):
        """A page, a search, a jump asked for: the shown position's memory again, the rest as sent."""
        if hasattr(self, "view") and hasattr(self, "_snap") and not self._installs_here():
            with self._lock:
                self.state = {**self.state, "memory": memory_payload(self.view, self._snap, dict(self.memory_pages),
                                                                     self._rows())}

    def _payload_key(self, view, position: int) -> tuple:
        """What a position's payload depends on besides the view: (position, memory of the raw-state
        panel, memories of the selection panel, the layer shown in detail)."""
        mem = self.gdn_memory if self.gdn_memory in view.trace.memories else "reg.emit"
        return (position, mem, tuple(self.selections), self.layer)

    def _machine_payload(self, position: int) -> tuple:
        """Everything the model views send for `position` (state, raw GDN bytes, softmax windows,
        every layer's attention), cached: the next position is prepared right after a position is
        sent, so stepping forward is a lookup."""
        key = self._payload_key(self.view, position)
        cache = self.__dict__.setdefault("_payloads", {})
        got = cache.get(key)
        if got is None:
            got = _machine_payload_of(self.view, *key)
            if len(cache) >= 256:
                cache.pop(next(iter(cache)))
            cache[key] = got
        return got

    def _prepare_next(self):
        """The payload of the step after the one shown, computed now (a lookup when it is asked)."""
        view = self.view
        if getattr(self, "machine_mode", False) and self.position + 1 < len(view):
            key = self._payload_key(view, self.position + 1)
            if key not in self._payloads:
                got = _machine_payload_of(view, *key)
                if self.view is view:                   # not a payload of a view replaced meanwhile
                    self._payloads[key] = got

    def _refresh(self, ahead: bool = True):
        if not self.machine_mode:
            snap = self.view.snapshot(self.position)
            self._snap = snap
            with self.hold_sync():
                self.state = snapshot_payload(snap, self.view, dict(self.memory_pages), self._rows())
            return
        snap, payload, gdn, att, meta, latt, lmeta = self._machine_payload(self.position)
        self._snap = snap
        if self.memory_pages or self._rows() != PAGE_ROWS:     # the cached payload has the launch's pages
            payload = {**payload, "memory": memory_payload(self.view, snap, dict(self.memory_pages), self._rows())}
        with self.hold_sync():
            self.state = payload
            self.gdn = gdn
            self.attn = att
            self.attn_meta = meta
            self.latt = latt
            self.latt_meta = lmeta
        if ahead:                                       # sent: prepare the next step meanwhile
            self._prepare_next()

    def _repr_mimebundle_(self, **kwargs):
        out = super()._repr_mimebundle_(**kwargs)
        data, meta = out if isinstance(out, tuple) else (out, {})
        data = dict(data)
        data["text/html"] = self.to_html()
        return data, meta


def inspect(program, launch, **kw) -> Inspector:
    """`Inspector(program, launch, **kw)`."""
    return Inspector(program, launch, **kw)
