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
first run, and then warms the compact engine in a background process (`warm_compact_engine`: numba
compiles it once, ~80 s after an install, into its cache), so the notebooks' model cells start in
seconds. Notebook checkpoints go to the qwengpu cache (`checkpoints_dir`), not beside the notebooks.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
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


def checkpoints_dir(folder) -> Path:
    """Where `qwengpu lab` keeps the notebook checkpoints of the served `folder`: the qwengpu cache
    (`$QWENGPU_CACHE`, default `~/.cache/qwengpu`), one folder per served folder."""
    cache = Path(os.environ.get("QWENGPU_CACHE", Path.home() / ".cache" / "qwengpu"))
    key = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:16]
    return cache / "lab-checkpoints" / key


def lab_command(folder, port: int = 8888, ip: str = "127.0.0.1", token: str = "", notebook: str | None = None,
                settings=None, python: str = sys.executable) -> list[str]:
    """The `jupyter lab` command line: served from `folder`, opening `notebook` (default its first
    tutorial notebook), on `ip:port` (no other port tried), no browser, no news, no update check,
    checkpoints outside `folder` (`checkpoints_dir`); `settings`: an app settings folder
    (`quiet_settings`) that turns the front end's checks off too. `token` "" serves without a token
    (only sensible on 127.0.0.1). As root (a container, a cloud notebook host) it adds
    `--allow-root`, which Jupyter otherwise demands."""
    notebook = notebook or first_notebook(folder)
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return [python, "-m", "jupyterlab", *root, "--no-browser", f"--ip={ip}", f"--port={port}", "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={Path(folder)}", f"--LabApp.default_url=/lab/tree/{notebook}",
            f"--IdentityProvider.token={token}", "--ServerApp.password=", *QUIET,
            "--ContentsManager.checkpoints_class=qwengpu.lab.checkpoints.CheckpointsOutsideTheTree",
            f"--CheckpointsOutsideTheTree.checkpoint_dir={checkpoints_dir(folder)}"] \
        + ([f"--LabApp.app_settings_dir={Path(settings)}"] if settings is not None else [])


def lab_url(port: int, ip: str, notebook: str, token: str = "") -> str:
    host = "127.0.0.1" if ip in ("0.0.0.0", "::", "") else ip
    return f"http://{host}:{port}/lab/tree/{notebook}" + (f"?token={token}" if token else "")


def prepare_machine(progress: bool = True):
    """The built-in machine, built and cached on the first run (2-3 min), with its compact engine's
    weights; later runs load it in seconds."""
    from qwengpu.machine.config import BUILTIN
    from qwengpu.runtime.checkpoint import load_machine
    m = load_machine(BUILTIN, progress=progress)
    m.reference_engine()              # the compact engine's weights file, written next to the machine
    return m


#: a kernel the warm-up runs (PTX, so that no nvcc is needed): one store per lane
WARM_PTX = """
.version 7.0
.target sm_75
.address_size 64
.visible .entry warm(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mad.lo.s32 %r2, %r1, 3, 1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}
"""


def warm_compact_engine(out=print, every: float = 15.0) -> float:
    """Run one launch on the compact engine, so that numba compiles it into its cache (~80 s after
    an install; a few seconds when cached): the first model launch in a notebook then loads it
    instead. Says so when it starts, every `every` seconds while it compiles, and when done;
    returns the seconds it took."""
    import qwengpu
    t0 = time.monotonic()
    out("qwengpu lab: warming the compact engine in the background (numba compiles it once, ~80 s after "
        "an install; a model cell run before it is ready compiles it too, as slowly)")
    done = threading.Event()

    def ticker():
        while not done.wait(every):
            out(f"qwengpu lab: still compiling the compact engine ({time.monotonic() - t0:.0f} s)")
    threading.Thread(target=ticker, daemon=True).start()
    try:
        r = qwengpu.run(WARM_PTX, {"grid": 1, "block": 4, "args": [{"buffer": "int32", "size": 4}]},
                        engine="compact", progress=False)
    finally:
        done.set()
    if list(r.buffers[0]) != [1, 4, 7, 10]:
        raise RuntimeError(f"the warm-up launch gave {list(r.buffers[0])}, not [1, 4, 7, 10]")
    took = time.monotonic() - t0
    out(f"qwengpu lab: the compact engine is ready ({took:.0f} s)")
    return took


def start_warm_up(python: str = sys.executable) -> subprocess.Popen:
    """`warm_compact_engine` in a process of its own (its lines go to this process's output)."""
    return subprocess.Popen([python, "-c", "from qwengpu.lab.server import warm_compact_engine; "
                             "warm_compact_engine(out=lambda s: print(s, flush=True))"])


def free_port(ip: str = "127.0.0.1", port: int = 8888, tries: int = 20) -> int:
    """`port` if nothing listens there, else the next free one of the `tries` after it (the URL
    printed must be the one served, so JupyterLab itself is told not to move). A port whose last
    connections are still closing (TIME_WAIT, after a quick restart) is free: the server binds it
    with SO_REUSEADDR, as the probe does."""
    for p in range(port, port + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            if os.name != "nt":                 # on Windows the option would let two servers share a port
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((ip, p))
            except OSError:
                continue
            return p
    raise RuntimeError(f"ports {port}..{port + tries - 1} on {ip} are all in use: pass --port")


def run_lab(folder=None, port: int = 8888, ip: str = "127.0.0.1", token: str | None = None, build: bool = True,
            extra=(), out=print) -> int:
    """Prepare the machine (`build`) and warm its compact engine in the background, print the URL,
    run JupyterLab until it is stopped (Ctrl-C or SIGTERM). `token` None makes a random one (printed
    in the URL); "" serves without one; `extra`: more `jupyter lab` options, appended as they are."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        raise RuntimeError("JupyterLab is not installed: pip install -e '.[lab]'") from None
    folder = notebook_dir(folder)
    nb = first_notebook(folder)
    if build:
        out("qwengpu lab: loading the built-in machine (the first run builds and caches it, 2-3 min)")
        prepare_machine()
    warm = start_warm_up() if build else None
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
        if warm is not None and warm.poll() is None:
            warm.terminate()
            warm.wait(timeout=15)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(settings.parent, ignore_errors=True)
