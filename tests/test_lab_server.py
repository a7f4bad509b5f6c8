"""`qwengpu lab` without a browser: the command line it runs, the folder and notebook it picks, its
quiet settings (the browser test, tests/test_browser.py, starts it for real)."""
import json

import pytest

from qwengpu.cli import main
from qwengpu.lab.server import (NOTEBOOKS, OVERRIDES, first_notebook, free_port, lab_command, lab_url, notebook_dir,
                                prepare_machine, quiet_settings, run_lab)


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
                f"--LabApp.app_settings_dir={tmp_path / 's'}", f"--ServerApp.root_dir={tmp_path}"):
        assert opt in cmd, opt
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
    with pytest.raises(FileNotFoundError, match="no notebook"):
        run_lab(tmp_path, build=False)


def test_prepare_machine_gives_the_builtin_machine():
    import torch  # noqa: F401  (a test requirement: a missing torch must fail, not skip)
    m = prepare_machine(progress=False)
    assert m.config.name == "compact"


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
