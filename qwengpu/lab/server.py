"""`qwengpu lab`: JupyterLab on the tutorial notebooks, headless-friendly, with the machine ready.

    from qwengpu.lab.server import lab_command, notebook_dir, first_notebook
    argv = lab_command(notebook_dir(), port=8888)     # the jupyter lab command line `qwengpu lab` runs

It starts `jupyter lab` on the first tutorial notebook (`notebooks/01_*`), prints the URL and opens
no browser (`--no-browser`: a remote or headless host is the normal case), and turns JupyterLab's
news and update checks off: on the server (`--LabApp.news_url=None`,
`jupyterlab.NeverCheckForUpdate`) and in the front end, which would still ask "Would you like to get
notified about official Jupyter news?" — an `overrides.json` in an app settings folder of its own
(`quiet_settings`) sets the defaults `fetchNews: "false"`, `checkForUpdates: false`; a user's own
setting still wins, and no user setting is touched.
Before it starts it loads the built-in machine (`load_machine`), building and caching it on the
first run, so the notebooks' model cells start in seconds.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
from pathlib import Path

#: the repository's tutorial notebooks (an editable or source install)
NOTEBOOKS = Path(__file__).resolve().parent.parent.parent / "notebooks"

#: JupyterLab options that keep it quiet: no news feed (and no front-end prompt about it), no update check
QUIET = ["--LabApp.news_url=None", "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


#: the front-end defaults `qwengpu lab` overrides: no news prompt, no update check
OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def quiet_settings(folder) -> Path:
    """Write an app settings folder at `folder` for `--LabApp.app_settings_dir`: JupyterLab's own
    (its `overrides.json`, `overrides.d/`, if the installation has them) with `OVERRIDES` merged in."""
    import json
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    overrides = {}
    try:
        from jupyterlab.commands import get_app_dir
        default = Path(get_app_dir()) / "settings"
    except ImportError:
        default = None
    if default is not None and default.is_dir() and default.resolve() != folder.resolve():
        shutil.copytree(default, folder, dirs_exist_ok=True)
    if (folder / "overrides.json").exists():
        overrides = json.loads((folder / "overrides.json").read_text() or "{}")
    for plugin, values in OVERRIDES.items():
        overrides.setdefault(plugin, {}).update(values)
    (folder / "overrides.json").write_text(json.dumps(overrides, indent=1))
    return folder


def notebook_dir(path=None) -> Path:
    """The folder the lab opens: `path`, else the repository's notebooks/ folder; a clear error when
    neither holds a tutorial notebook."""
    d = Path(path) if path is not None else NOTEBOOKS
    if not d.is_dir():
        raise FileNotFoundError(f"no notebook folder at {d}: pass --dir DIR (a folder with the tutorial notebooks, "
                                "e.g. the repository's notebooks/)")
    return d.resolve()


def first_notebook(folder) -> str:
    """The name of the first tutorial notebook in `folder` (`01_*.ipynb`, else the first notebook by name)."""
    folder = Path(folder)
    found = sorted(folder.glob("01_*.ipynb")) or sorted(folder.glob("*.ipynb"))
    if not found:
        raise FileNotFoundError(f"no notebook (*.ipynb) in {folder}")
    return found[0].name


def lab_command(folder, port: int = 8888, ip: str = "127.0.0.1", token: str = "", notebook: str | None = None,
                settings=None, python: str = sys.executable) -> list[str]:
    """The `jupyter lab` command line: served from `folder`, opening `notebook` (default its first
    tutorial notebook), on `ip:port` (no other port tried), no browser, no news, no update check;
    `settings`: an app settings folder (`quiet_settings`) that turns the front end's checks off too.
    `token` "" serves without a token (only sensible on 127.0.0.1). As root (a container, a cloud
    notebook host) it adds `--allow-root`, which Jupyter otherwise demands."""
    notebook = notebook or first_notebook(folder)
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return [python, "-m", "jupyterlab", *root, "--no-browser", f"--ip={ip}", f"--port={port}", "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={Path(folder)}", f"--LabApp.default_url=/lab/tree/{notebook}",
            f"--IdentityProvider.token={token}", "--ServerApp.password=", *QUIET] \
        + ([f"--LabApp.app_settings_dir={Path(settings)}"] if settings is not None else [])


def lab_url(port: int, ip: str, notebook: str, token: str = "") -> str:
    host = "127.0.0.1" if ip in ("0.0.0.0", "::", "") else ip
    return f"http://{host}:{port}/lab/tree/{notebook}" + (f"?token={token}" if token else "")


def prepare_machine(progress: bool = True):
    """The built-in machine, built and cached on the first run (2-3 min), with its compact engine's
    weights; later runs load it in seconds."""
    from qwengpu.machine.config import COMPACT
    from qwengpu.runtime.checkpoint import load_machine
    m = load_machine(COMPACT, progress=progress)
    m.reference_engine()              # the compact engine's weights file, written next to the machine
    return m


def free_port(ip: str = "127.0.0.1", port: int = 8888, tries: int = 20) -> int:
    """`port` if nothing listens there, else the next free one of the `tries` after it (the URL
    printed must be the one served, so JupyterLab itself is told not to move)."""
    for p in range(port, port + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((ip, p))
            except OSError:
                continue
            return p
    raise RuntimeError(f"ports {port}..{port + tries - 1} on {ip} are all in use: pass --port")


def run_lab(folder=None, port: int = 8888, ip: str = "127.0.0.1", token: str | None = None, build: bool = True,
            extra=(), out=print) -> int:
    """Prepare the machine (`build`), print the URL, run JupyterLab until it is stopped (Ctrl-C or
    SIGTERM). `token` None makes a random one (printed in the URL); "" serves without one; `extra`:
    more `jupyter lab` options, appended as they are."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        raise RuntimeError("JupyterLab is not installed: pip install -e '.[lab]'") from None
    folder = notebook_dir(folder)
    nb = first_notebook(folder)
    if build:
        out("qwengpu lab: loading the built-in machine (the first run builds and caches it, 2-3 min)")
        prepare_machine()
    token = secrets.token_hex(16) if token is None else token
    chosen = free_port(ip, port)
    if chosen != port:
        out(f"qwengpu lab: port {port} is in use, serving on {chosen}")
        port = chosen
    url = lab_url(port, ip, nb, token)
    out(f"qwengpu lab: serving {folder}\n\n    open {url}\n\n(Ctrl-C stops the server)")
    sys.stdout.flush()
    settings = quiet_settings(Path(tempfile.mkdtemp(prefix="qwengpu-lab-")) / "settings")
    proc = subprocess.Popen(lab_command(folder, port=port, ip=ip, token=token, notebook=nb, settings=settings)
                            + list(extra))

    def stop(*_):
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, stop)      # a SIGTERM stops the server too, not only Ctrl-C
    except ValueError:                                      # not the main thread
        previous = None
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(settings.parent, ignore_errors=True)
