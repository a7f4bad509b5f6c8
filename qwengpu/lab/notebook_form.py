"""The committed notebooks in the form JupyterLab 4 saves them, so that opening one and saving it
(or autosave) leaves `git diff` clean.

    python -m qwengpu.lab.notebook_form notebooks/*.ipynb notebooks/exercises/*.ipynb ...   # rewrite
    python -m qwengpu.lab.notebook_form --check notebooks/*.ipynb                           # list those off

What JupyterLab changes in a notebook that it only opened (measured in the browser test,
`tests/test_browser.py::test_a_notebook_opened_and_saved_is_unchanged`):

- the kernelspec: the kernel's own spec replaces the stored one (ipykernel's `python3` is
  "Python 3 (ipykernel)"; nbconvert writes "Python 3");
- numbers: the notebook goes through JavaScript's JSON on its way back, where 1.0 is 1, so every
  integral float (widget state: `"progress": 1.0`) is written as an int. Every other float comes
  back as it was (both sides write the shortest repr that reads back to the same double).

`language_info` is the kernel's too (its Python version): the notebooks carry the one of the
Python the project is tested with; another version marks them changed once.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

#: the kernelspec JupyterLab writes for ipykernel's default kernel
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

#: JavaScript writes an integral number below this without a fraction or exponent (1e21 is "1e+21")
_JS_PLAIN_INTEGERS = 1e21


def _as_javascript_returns(value):
    """`value` as it comes back from a JSON round trip through JavaScript: integral floats as ints."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < _JS_PLAIN_INTEGERS else value
    if isinstance(value, dict):
        return {k: _as_javascript_returns(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_javascript_returns(v) for v in value]
    return value


def saved_form(text: str) -> str:
    """The notebook text `text` as JupyterLab would save it after opening it with ipykernel's
    default kernel (nbformat's writer: sorted keys, indent 1, lines split, a final newline)."""
    import nbformat
    nb = _as_javascript_returns(json.loads(text))
    if nb.get("metadata", {}).get("kernelspec", {}).get("name") == KERNELSPEC["name"]:
        nb["metadata"]["kernelspec"] = dict(KERNELSPEC)
    out = nbformat.writes(nbformat.from_dict(nb), version=nbformat.NO_CONVERT)
    return out if out.endswith("\n") else out + "\n"


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    off = []
    for name in (a for a in args if a != "--check"):
        path = Path(name)
        text = path.read_text(encoding="utf-8")
        form = saved_form(text)
        if form != text:
            off.append(name)
            if not check:
                path.write_text(form, encoding="utf-8")
    for name in off:
        print(("not in the saved form: " if check else "rewritten: ") + name)
    return 1 if check and off else 0


if __name__ == "__main__":
    sys.exit(main())
