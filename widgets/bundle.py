"""The inspector's script, joined from its parts: one renderer for the live widget, the exported
HTML file and the kernel-less fallback.

    inspector_base.js   what the views share (helpers, colour maps, the `VIEWS` registry)
    view_*.js           one file per panel, each registering itself: scrubber, head, CUDA source,
                        ROM, warp (registers, lanes), memory, timeline, attention, GPU layers ...
    inspector.js        `render`: lays the registered cards out and redraws them per position

A new panel is one `view_*.js` file (picked up by name, placed by its `slot` and `order`). The
widget gets `module_script()` (an ES module, as anywidget loads it); a page without a kernel gets
`page_script()` (a classic script that sets `window.__qgInspector = { render }`).
"""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
_EXPORT = "export default { render };"


def script_parts() -> list[Path]:
    """The script's files in the order they are joined."""
    return [_HERE / "inspector_base.js", *sorted(_HERE.glob("view_*.js")), _HERE / "inspector.js"]


def module_script() -> str:
    """The inspector as one ES module (`export default { render }`), read from its parts now."""
    text = "\n".join(p.read_text() for p in script_parts())
    if text.count(_EXPORT) != 1:
        raise RuntimeError(f"inspector.js must end with `{_EXPORT}` once")
    return text


def page_script() -> str:
    """The same script for a page without a module loader: its names kept inside one function,
    `render` published as `window.__qgInspector.render` (defined once however many widgets a page
    holds)."""
    body = module_script().replace(_EXPORT, "window.__qgInspector = { render };")
    return "if (!window.__qgInspector) (function () {\n" + body + "\n})();\n"


def stylesheet() -> str:
    return (_HERE / "inspector.css").read_text()


__all__ = ["module_script", "page_script", "script_parts", "stylesheet"]
