"""`qwengpu lab` without a browser: the command line it runs, the folder and notebook it picks, its
quiet settings (the browser test, tests/test_browser.py, starts it for real)."""
import json

import pytest

from qwengpu.cli import main
from qwengpu.lab.server import (NOTEBOOKS, OVERRIDES, checkpoints_dir, first_notebook, free_port, lab_command, lab_url,
                                notebook_dir, prepare_machine, quiet_settings, run_lab, warm_compact_engine)


def test_first_notebook_is_the_quickstart():
    assert notebook_dir() == NOTEBOOKS.resolve()
    assert first_notebook(notebook_dir()) == "01_quickstart.ipynb"


def test_first_notebook_without_01(tmp_path):
    (tmp_path / "b.ipynb").write_text("{}")
    (tmp_path / "a.ipynb").write_text("{}")
    assert first_notebook(tmp_path) == "a.ipynb"
    with pytest.raises(FileNotFoundError, match="no notebook"):
        first_notebook(tmp_path / "none")
    with pytest.raises(FileNotFoundError, match="--dir"):
        notebook_dir(tmp_path / "missing")


def test_lab_command_is_quiet_and_headless(tmp_path):
    (tmp_path / "01_x.ipynb").write_text("{}")
    cmd = lab_command(tmp_path, port=9999, token="t", settings=tmp_path / "s")
    assert cmd[1:3] == ["-m", "jupyterlab"]
    for opt in ("--no-browser", "--port=9999", "--ServerApp.port_retries=0", "--IdentityProvider.token=t",
                "--LabApp.news_url=None", "--LabApp.default_url=/lab/tree/01_x.ipynb",
                "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                f"--LabApp.app_settings_dir={tmp_path / 's'}", f"--ServerApp.root_dir={tmp_path}",
                "--ContentsManager.checkpoints_class=qwengpu.lab.checkpoints.CheckpointsOutsideTheTree",
                f"--CheckpointsOutsideTheTree.checkpoint_dir={checkpoints_dir(tmp_path)}"):
        assert opt in cmd, opt
    assert not checkpoints_dir(tmp_path).is_relative_to(tmp_path)
    assert lab_url(9999, "0.0.0.0", "01_x.ipynb", "t") == "http://127.0.0.1:9999/lab/tree/01_x.ipynb?token=t"
    assert lab_url(8888, "127.0.0.1", "n.ipynb") == "http://127.0.0.1:8888/lab/tree/n.ipynb"


def test_quiet_settings_merge(tmp_path):
    s = tmp_path / "s"
    s.mkdir()
    (s / "overrides.json").write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
                                                  "@jupyterlab/apputils-extension:notification": {"doNotDisturbMode": True}}))
    out = json.loads((quiet_settings(s) / "overrides.json").read_text())
    assert out["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}     # kept
    note = out["@jupyterlab/apputils-extension:notification"]
    assert note["doNotDisturbMode"] is True
    assert {k: note[k] for k in OVERRIDES["@jupyterlab/apputils-extension:notification"]} == \
        {"fetchNews": "false", "checkForUpdates": False}


def test_cli_lab_without_notebooks_fails_clearly(tmp_path, capsys):
    assert main(["lab", "--dir", str(tmp_path / "missing"), "--no-build"]) == 2
    assert "--dir" in capsys.readouterr().err
    assert main(["lab", "--dir", str(tmp_path / "missing"), "--no-build", "--no-browser"]) == 2   # the jupyter habit
    assert "--dir" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="no notebook"):
        run_lab(tmp_path, build=False)


def test_prepare_machine_gives_the_builtin_machine():
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)
    from qwengpu.machine.config import BUILTIN
    m = prepare_machine(progress=False)
    assert m.config.name == BUILTIN.name == "compact-fpu"


def test_a_busy_port_moves_the_lab_to_the_next_free_one():
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        got = free_port("127.0.0.1", port)
        assert got != port and port < got < port + 20
        with pytest.raises(RuntimeError, match="all in use"):
            free_port("127.0.0.1", port, tries=1)
    assert free_port("127.0.0.1", got) == got


def test_a_port_whose_connections_are_closing_is_kept():
    """A quick restart: the old server's connections are still in TIME_WAIT on the port; the server
    would bind it (SO_REUSEADDR), so the lab stays on it."""
    import socket
    import time
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # as Jupyter's server (tornado) binds
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    conn.close()                        # the server side closes first: its end waits in TIME_WAIT
    time.sleep(0.1)
    client.close()
    server.close()
    assert free_port("127.0.0.1", port) == port


def test_checkpoints_live_outside_the_served_folder(tmp_path):
    """Jupyter's checkpoints (File > Revert) under `checkpoint_dir`, mirroring the served tree: no
    `.ipynb_checkpoints/` beside the notebooks, two notebooks of one name kept apart."""
    import asyncio

    import nbformat
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

    from qwengpu.lab.checkpoints import CheckpointsOutsideTheTree
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "sub").mkdir(parents=True)
    cm = AsyncLargeFileManager(root_dir=str(tree), checkpoints_class=CheckpointsOutsideTheTree)
    cm.checkpoints.checkpoint_dir = str(outside)

    def notebook(text):
        return {"type": "notebook", "format": "json",
                "content": nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])}

    async def go():
        for path in ("a.ipynb", "sub/a.ipynb"):
            await cm.save(notebook(path), path)
            await cm.create_checkpoint(path)
            await cm.save(notebook("changed"), path)
            [cp] = await cm.list_checkpoints(path)
            await cm.restore_checkpoint(cp["id"], path)
            assert (await cm.get(path))["content"].cells[0].source == path
    asyncio.run(go())
    assert not list(tree.rglob(".ipynb_checkpoints"))
    assert sorted(p.relative_to(outside).as_posix() for p in outside.rglob("*.ipynb")) == \
        ["a-checkpoint.ipynb", "sub/a-checkpoint.ipynb"]


def test_warming_the_compact_engine_says_so():
    lines = []
    took = warm_compact_engine(out=lines.append, every=0.5)
    assert took > 0 and "warming the compact engine" in lines[0] and "is ready" in lines[-1]
