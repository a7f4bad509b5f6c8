"""qwenGPU lab widgets (anywidget, ipywidgets 8, JupyterLab 4).

    from qwengpu_widgets import Inspector
    Inspector(ptx, spec)          # step through a launch token by token

    %load_ext qwengpu_widgets     # in a notebook: the %%cuda cell magic (qwengpu_widgets.magic)
                                  # and %%exercise (GPU exercises checked on the machine: .exercises)

Every widget also renders without a kernel (`Inspector.to_html()`, the `text/html` of its MIME
bundle: its payload drawn by the widget's own script) when exported with nbconvert or opened cold.
"""
from . import exercises, magic
from .inspector import Inspector, inspect
from .magic import CudaCellError, run_cell
from .static import render_html


def load_ipython_extension(ipython):
    """`%load_ext qwengpu_widgets`: the `%%cuda` cell magic (`magic`) and `%%exercise` (`exercises`)."""
    magic.load_ipython_extension(ipython)
    exercises.load_ipython_extension(ipython)


__all__ = ["Inspector", "inspect", "render_html", "CudaCellError", "run_cell", "load_ipython_extension"]
