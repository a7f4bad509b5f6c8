"""Notebook checkpoints kept outside the folder `qwengpu lab` serves: Jupyter's own checkpoints
(File > Revert) in a folder of the qwengpu cache, mirroring the served tree, instead of an
`.ipynb_checkpoints/` beside every notebook saved (in a checkout: the source tree).

    jupyter lab --ContentsManager.checkpoints_class=qwengpu.lab.checkpoints.CheckpointsOutsideTheTree \\
                --CheckpointsOutsideTheTree.checkpoint_dir=/abs/folder

`qwengpu lab` sets both (`qwengpu.lab.server.lab_command`); a relative `checkpoint_dir` keeps
Jupyter's behaviour (a folder of that name beside each file).
"""
from __future__ import annotations

import os
from pathlib import Path

from jupyter_core.utils import ensure_dir_exists
from jupyter_server.services.contents.filecheckpoints import AsyncFileCheckpoints


class CheckpointsOutsideTheTree(AsyncFileCheckpoints):
    """`AsyncFileCheckpoints` (the default of JupyterLab 4's contents manager) whose files live
    under an absolute `checkpoint_dir`, at the notebook's path relative to the served folder: two
    notebooks of the same name in different folders keep different checkpoints."""

    def checkpoint_path(self, checkpoint_id, path):
        if not os.path.isabs(self.checkpoint_dir):
            return super().checkpoint_path(checkpoint_id, path)
        parent, _, name = path.strip("/").rpartition("/")
        base, ext = os.path.splitext(name)
        folder = Path(self.checkpoint_dir, parent)
        with self.perm_to_403():
            ensure_dir_exists(str(folder))
        return str(folder / f"{base}-{checkpoint_id}{ext}")


__all__ = ["CheckpointsOutsideTheTree"]
