"""The built machine: the hardware circuits compiled into a stock Qwen3.5 checkpoint, cached on disk.

    machine = load_machine()                 # the built-in machine (COMPACT with the float unit; built once, then cached)
    machine.model                            # a transformers Qwen3_5ForCausalLM
    machine.token_id("<go>"), machine.text(id)
    machine.reader.memory(cache)             # the machine memory, decoded from the GDN states

A build writes `save_pretrained` files plus `qwengpu_machine.json` (the vocabulary, where the
machine's memories live in the model, for decoding, and the size and sha256 of every file the build
wrote). The cache key hashes the sources of the circuits and the compiler, so a changed circuit is
never served from a stale cache; the recorded hashes keep a truncated or altered file from being
trusted (`CorruptBuild`). A build writes into a hidden temporary folder beside its destination and
renames it into place, holding a per-destination lock, so concurrent processes wait for one build
instead of writing into the same folder (docs/machine.md, "The build cache").
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import re
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from qwengpu.compiler.margins import gate_lattices
from qwengpu.engines import reference_engine
from qwengpu.machine.config import BUILTIN, MachineConfig, config_named
from qwengpu.machine.tokens import ends_launch

from .tokenizer import machine_tokenizer, save_tokenizer

MACHINE_FILE = "qwengpu_machine.json"
ENGINE_FILE = "compact_engine-{}.pt"      # tagged by the engine's source
#: what a saved machine's metadata holds (part of the cache key: 2 added the residual probes, 3 the
#: gate lattices)
META_VERSION = 3


#: the packages a built machine is made from: its cache key hashes every source of them (the
#: circuits, their specification, the semantics the specification runs on, and the compiler), so a
#: change there is never served from a stale cache. The engines that run a built machine
#: (`qwengpu.engines`) are apart: a change to them does not rebuild it (their weights file is
#: tagged by its own sources, `engine_file`).
BUILD_PACKAGES = ("compiler", "machine", "semantics")


def build_sources() -> list[Path]:
    """Every source file of `BUILD_PACKAGES`, in a fixed order."""
    qwengpu_dir = Path(__file__).resolve().parent.parent
    return [f for pkg in BUILD_PACKAGES for f in sorted((qwengpu_dir / pkg).rglob("*.py"))]


def source_hash(config: MachineConfig, target_kw: dict) -> str:
    """The cache key of a build: the geometry, the compiler options and the sources it is built
    from (`build_sources`)."""
    h = hashlib.sha256(repr((config, sorted(target_kw.items()), META_VERSION)).encode())
    for f in build_sources():
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def engine_file() -> str:
    """The compact engine's cache file: the pickled reference engine (the sparse weights; the
    compact engine is packed from them when loaded), tagged by the sources of the classes it
    pickles, so that another version of them never unpickles a stale file."""
    import inspect

    from qwengpu.compiler.sparse import SparseMatrix
    from qwengpu.engines import reference
    h = hashlib.sha256()
    for src in (inspect.getsourcefile(reference), inspect.getsourcefile(SparseMatrix)):
        h.update(Path(src).read_bytes())
    return ENGINE_FILE.format(h.hexdigest()[:8])


def cache_root() -> Path:
    return Path(os.environ.get("QWENGPU_CACHE", Path.home() / ".cache" / "qwengpu"))


# -- the integrity of a build's files ------------------------------------------------------------------

#: files up to this size are checked by sha256 when a build is opened; larger ones (the stock
#: checkpoint's safetensors, GBs) by size, which catches truncation without reading them whole
HASH_CHECK_LIMIT = 1 << 28
#: the record of a file written next to a build after it (the compact engine's weights for a newer
#: engine source): {"size", "sha256"}
RECORD_SUFFIX = ".record.json"


class CorruptBuild(ValueError):
    """A file of a built machine is missing, truncated or altered: it differs from the size and
    sha256 recorded when it was written, or it does not parse. `file` names it."""

    def __init__(self, file: Path, reason: str):
        self.file, self.reason = Path(file), reason
        super().__init__(f"{file}: {reason}")


def file_record(f: Path) -> dict:
    """The size and sha256 of a file, as a build records them."""
    h = hashlib.sha256()
    with open(f, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return {"size": f.stat().st_size, "sha256": h.hexdigest()}


def check_file(f: Path, record: dict, hash_limit: int = HASH_CHECK_LIMIT) -> None:
    """Raise `CorruptBuild` when `f` is not the file `record` describes (its size; its sha256 when
    it is at most `hash_limit` bytes)."""
    if not f.is_file():
        raise CorruptBuild(f, "missing (the build wrote it)")
    size = f.stat().st_size
    if size != record["size"]:
        raise CorruptBuild(f, f"{size} bytes where {record['size']} were written (truncated or altered)")
    if size <= hash_limit and file_record(f)["sha256"] != record["sha256"]:
        raise CorruptBuild(f, "its sha256 differs from the one recorded when it was written (altered)")


def write_atomically(f: Path, write) -> None:
    """`write(tmp_path)` then rename it over `f`: a reader sees the old file or the whole new one,
    never a partial one (a killed writer leaves only its hidden temporary file)."""
    tmp = f.with_name(f".{f.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        write(tmp)
        os.replace(tmp, f)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def build_lock(folder: Path, progress: bool = True):
    """Hold the lock of the build at `folder` (an fcntl lock on `.NAME.lock` beside it): a second
    process that wants the same build waits here for the first one, then finds its result. The
    kernel releases the lock when its holder dies, so a killed build never blocks the next."""
    try:
        import fcntl
    except ImportError:                   # no fcntl (Windows): builds are not serialised
        yield
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(f".{folder.name}.lock"), "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                print(f"waiting for another process building {folder}", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def temporary_folders(folder: Path) -> list[Path]:
    """The hidden folders that builds of `folder` write into (`.NAME.partial-PID-RANDOM`) or move an
    old build to (`.NAME.old-PID-RANDOM`) before renaming: left behind only by a killed build."""
    return sorted(folder.parent.glob(f".{folder.name}.partial-*")) + sorted(folder.parent.glob(f".{folder.name}.old-*"))


def check_output_folder(folder: Path, overwrite: bool = False) -> None:
    """Refuse a build's destination that would lose a user's files: a file; or a non-empty folder
    that is not a machine build (no `qwengpu_machine.json`) unless `overwrite`; and, even with
    `overwrite`, the root, the home folder, the cache root or a folder holding the current
    directory. A previous build there is replaced (a rebuild)."""
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"the output {folder} is a file, not a folder; choose another --out")
    if not folder.is_dir() or (folder / MACHINE_FILE).is_file() or not any(folder.iterdir()):
        return
    if not overwrite:
        raise FileExistsError(f"the output folder {folder} is not empty and holds no machine build (no {MACHINE_FILE}): "
                              f"refusing to replace its files; choose another --out, or pass --overwrite "
                              f"(overwrite=True) to replace them")
    real = folder.resolve()
    protected = {Path(real.anchor), Path.home().resolve(), cache_root().resolve()}
    if real in protected or Path.cwd().resolve().is_relative_to(real):
        raise ValueError(f"refusing to replace {folder} even with --overwrite: it is the root, the home folder, the "
                         f"cache or holds the current directory; choose an output folder of its own")


#: the default soft budgets of a build: MLP neurons and GDN key heads per layer (spreading wide
#: circuits and memories over layers: 1.5 B parameters instead of 2.15 B for COMPACT)
MLP_BUDGET = 2500
GDN_HEAD_BUDGET = 8


def with_budgets(target_kw: dict) -> dict:
    """Compiler options with the default budgets filled in (what a build, and its cache key, use)."""
    return {"mlp_budget": MLP_BUDGET, "gdn_head_budget": GDN_HEAD_BUDGET, **target_kw}


@dataclass
class Machine:
    config: MachineConfig
    path: Path | None                  # None: built in memory (`compile_machine`)
    tokens: list = field(repr=False)                       # token texts by id
    placements: dict = field(repr=False)                   # memory name -> MemoryPlacement
    report: dict = field(default_factory=dict)
    probes: dict | None = field(default=None, repr=False)  # sublayer -> 0/1-coded residual features
    lattices: dict | None = field(default=None, repr=False)  # layer -> MLP gates' lattices (margins.gate_lattices)
    records: dict = field(default_factory=dict, repr=False)   # file name -> {size, sha256} written by the build
    _model: object = field(default=None, repr=False)
    _ids: dict | None = field(default=None, repr=False)

    @property
    def model(self):
        if self._model is None:
            if self.path is None or not has_checkpoint(self.path):
                raise ValueError("this machine was built for the compact engine only (no stock checkpoint); "
                                 "build one with `qwengpu build`")
            import torch
            from transformers import AutoModelForCausalLM
            self._model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32)
            self._model.eval()
        return self._model

    def compact_engine(self):
        """The compact engine (`qwengpu.engines.compact.CompactEngine`) on this machine's weights,
        measuring the residual code margin and the form noise of every run."""
        if getattr(self, "_compact", None) is None:
            from qwengpu.engines.compact import CompactEngine
            self._compact = CompactEngine(self.reference_engine(), self.probes, self.lattices)
        return self._compact

    def reference_engine(self):
        """The compact engine's reference (`qwengpu.engines.reference.ReferenceEngine`,
        `--engine compact-ref`): the sparse weights in torch, cached next to the checkpoint."""
        if getattr(self, "_reference", None) is None:
            import torch

            from qwengpu.engines.reference import ReferenceEngine
            f = self.path / engine_file() if self.path is not None else None
            if f is None:
                self._reference = ReferenceEngine(self.model)
                return self._reference
            try:
                self._reference = self._load_engine_file(f) if f.exists() else None
            except CorruptBuild as e:
                if not has_checkpoint(self.path):      # nothing to remake it from
                    raise
                print(f"the compact engine's weights {e.file} are corrupt ({e.reason}); remaking them",
                      file=sys.stderr)
                self._reference = None
            if self._reference is None:          # made from the stock checkpoint, kept beside it
                self._reference = ReferenceEngine(self.model)
                write_atomically(f, lambda tmp: torch.save(self._reference, tmp))
                record = f.with_name(f.name + RECORD_SUFFIX)
                write_atomically(record, lambda tmp: tmp.write_text(json.dumps(file_record(f))))
        return self._reference

    def _load_engine_file(self, f: Path):
        """The pickled `ReferenceEngine` at `f`, checked against its record (the build's metadata, or the
        record written beside it) first."""
        import torch
        record, hash_limit = self.records.get(f.name), 0    # the build's records: hashed when it was opened
        sidecar = f.with_name(f.name + RECORD_SUFFIX)
        if record is None and sidecar.is_file():
            try:
                record, hash_limit = json.loads(sidecar.read_text()), HASH_CHECK_LIMIT
            except ValueError:
                raise CorruptBuild(sidecar, "not valid JSON (truncated?)") from None
        if record is not None:
            check_file(f, record, hash_limit)
        try:
            return torch.load(f, weights_only=False)
        except Exception as e:           # a file of a build made before records: torch's error, with its path
            raise CorruptBuild(f, f"unreadable ({type(e).__name__}: {e})") from None

    @property
    def tokenizer(self):
        """The machine's tokenizer (`qwengpu.runtime.tokenizer`): the saved one, or built from `tokens`."""
        if getattr(self, "_tokenizer", None) is None:
            if self.path is not None and (self.path / "tokenizer.json").exists():
                from transformers import AutoTokenizer
                self._tokenizer = AutoTokenizer.from_pretrained(self.path)
            else:
                self._tokenizer = machine_tokenizer(self.tokens)
        return self._tokenizer

    def token_id(self, text: str) -> int:
        if self._ids is None:
            self._ids = {t: i for i, t in enumerate(self.tokens)}
        try:
            return self._ids[text]
        except KeyError:
            raise ValueError(f"{text!r} is not a token of machine {self.config.name}") from None

    def text(self, token_id: int) -> str:
        return self.tokens[token_id]

    @property
    def reader(self):
        """The machine's state read from the model's GDN states (`qwengpu.runtime.readback.MachineReader`
        on this machine's placements)."""
        if getattr(self, "_reader", None) is None:
            from .readback import MachineReader
            self._reader = MachineReader(self.placements)
        return self._reader


def compile_machine(config: MachineConfig = BUILTIN, dense: bool = True, **target_kw) -> Machine:
    """Build a machine in memory (nothing written): `dense=False` keeps sparse weights, enough for
    the compact engine; `dense=True` also gives the stock transformers model."""
    from qwengpu.compiler import Target, compile_program
    from qwengpu.machine.hardware import Hardware
    target_kw = with_budgets(target_kw)
    hw = Hardware(config)
    return machine_of(config, compile_program(hw.p, Target(**target_kw), dense=dense))


def machine_of(config: MachineConfig, compiled) -> Machine:
    """The `Machine` of a compiled machine program (its engines on the compiled weights: the
    compact engine always, the stock model when the weights are dense)."""
    import torch
    prog = compiled.program
    m = Machine(config, None, [t.text for t in prog.tokens],
                {mem.name: compiled.placement(mem) for mem in prog.memories}, _report(compiled),
                residual_probes(compiled), gate_lattices(compiled))
    dense = all(isinstance(v, torch.Tensor) and v.layout == torch.strided for v in compiled.state_dict.values())
    m._reference = reference_engine(compiled) if not dense else None
    if dense:
        m._model = compiled.model()
    m.compiled = compiled
    return m


def residual_probes(compiled) -> dict:
    """{sublayer: residual features} of the 0/1-coded variables (bits, one-hot) that sublayer
    writes: a run measures how far those features are from 0 or 1 there (the residual code margin,
    0.5 minus the largest distance; a bit decodes right while it is > 0)."""
    out: dict = {}
    for v in compiled.program.residual_vars:
        b = compiled.layout.born.get(v.name, -1)
        if v.kind in ("bits", "onehot") and b >= 0:
            out.setdefault(int(b), []).extend(compiled.layout.dims[(v.name, i)] for i in range(v.size))
    return {k: sorted(fs) for k, fs in sorted(out.items())}


def _report(compiled) -> dict:
    r = compiled.report
    out = {k: r[k] for k in ("layers", "width", "intermediate", "vocab", "parameters", "nonzero") if k in r}
    out["hidden"] = compiled.config.hidden_size
    return out


def _save_meta(path: Path, config: MachineConfig, compiled, hw, report: dict):
    """The metadata, written last: with the size and sha256 of every other file of the build."""
    from dataclasses import asdict
    names = {m.name: m for m in hw.p.memories}
    meta = {
        "config": asdict(config),
        "source_hash": source_hash(config, {}),
        "tokens": [t.text for t in hw.p.tokens],
        "placements": {n: compiled.placement(mem).to_json() for n, mem in names.items()},
        "report": report,
        "probes": {str(k): fs for k, fs in residual_probes(compiled).items()},
        "lattices": {str(k): d for k, d in gate_lattices(compiled).items()},
        "files": {f.name: file_record(f) for f in sorted(path.iterdir()) if f.is_file() and f.name != MACHINE_FILE},
    }
    write_atomically(path / MACHINE_FILE, lambda tmp: tmp.write_text(json.dumps(meta)))


def read_meta(path: Path) -> dict:
    """A build's metadata (`qwengpu_machine.json`), or `CorruptBuild` naming it when it does not parse."""
    f = Path(path) / MACHINE_FILE
    if not f.is_file():
        raise FileNotFoundError(f"no built machine at {path} (no {MACHINE_FILE}); build one with `qwengpu build`")
    try:
        meta = json.loads(f.read_bytes())
    except ValueError as e:
        raise CorruptBuild(f, f"not valid JSON (truncated?): {e}") from None
    missing = [k for k in ("config", "tokens", "placements") if k not in meta] if isinstance(meta, dict) else ["all"]
    if missing:
        raise CorruptBuild(f, f"lacks {', '.join(missing)}")
    return meta


def verify_build(path) -> dict:
    """Check a build's files against the records in its metadata (`check_file`) and return the
    metadata; `CorruptBuild` names the first file that does not match. A build made before builds
    recorded their files is checked for its metadata only."""
    path = Path(path)
    meta = read_meta(path)
    for name, record in meta.get("files", {}).items():
        check_file(path / name, record)
    return meta


def open_machine(path) -> Machine:
    """The machine built at `path`, its files checked first (`verify_build`: `CorruptBuild` names
    a file that is not what the build wrote)."""
    from qwengpu.compiler.placement import MemoryPlacement
    path = Path(path)
    meta = verify_build(path)
    from dataclasses import fields
    known = {f.name for f in fields(MachineConfig)}
    cfg = {k: v for k, v in meta["config"].items() if k in known}
    config = MachineConfig.from_dict(cfg)
    if set(meta["config"]) - known or meta.get("source_hash") != source_hash(config, {}):
        raise ValueError(f"the machine at {path} was built from other circuits than this version of qwengpu's; "
                         f"rebuild it (`qwengpu build --config {config.name} --out {path}`)")
    probes = {int(k): fs for k, fs in meta["probes"].items()} if "probes" in meta else None
    lattices = {int(k): d for k, d in meta["lattices"].items()} if "lattices" in meta else None
    return Machine(config, path, meta["tokens"],
                   {n: MemoryPlacement.from_json(d) for n, d in meta["placements"].items()}, meta.get("report", {}),
                   probes, lattices, meta.get("files", {}))


def build_machine(config: MachineConfig = BUILTIN, path=None, progress: bool = True, dense: bool = True,
                  overwrite: bool = False, **target_kw) -> Machine:
    """Compile the machine's circuits and save them at `path` (default: the cache): always the
    compact engine's sparse weights and the decoding metadata; with `dense`, also the stock
    checkpoint (`save_pretrained`: config.json + safetensors, loadable with AutoModelForCausalLM).
    A previous build at `path` is replaced; any other non-empty folder only with `overwrite`
    (`check_output_folder`). Holds the build's lock (`build_lock`) while it builds."""
    target_kw = with_budgets(target_kw)
    cached = path is None
    path = Path(path) if path is not None else _cache_path(config, target_kw)
    if not cached:
        check_output_folder(path, overwrite)           # before minutes of compiling
    with build_lock(path, progress):
        return _build_locked(config, path, cached, progress, dense, overwrite, target_kw)


def _build_locked(config: MachineConfig, path: Path, cached: bool, progress: bool, dense: bool, overwrite: bool,
                  target_kw: dict) -> Machine:
    """`build_machine` with the build's lock held: write into a hidden temporary folder beside
    `path` (files, then the metadata with their hashes last), then rename it into place."""
    import torch

    from qwengpu.compiler import Target, compile_program
    from qwengpu.machine.hardware import Hardware
    for d in temporary_folders(path):                   # left by a killed build (we hold its lock)
        shutil.rmtree(d, ignore_errors=True)
    bar = _bar(4, f"building machine {config.name}", progress)
    hw = Hardware(config)
    bar.update(1)
    compiled = compile_program(hw.p, Target(**target_kw), dense=dense)
    bar.update(1)
    unique = f"{os.getpid()}-{secrets.token_hex(4)}"
    tmp = path.with_name(f".{path.name}.partial-{unique}")
    tmp.mkdir(parents=True)
    try:
        model = None
        if dense:
            model = compiled.model()
            # stock generate() stops where the launch ends: <halt> or a fault
            ends = [i for i, t in enumerate(hw.p.tokens) if ends_launch(t.text)]
            model.generation_config.eos_token_id = ends
            model.generation_config.pad_token_id = ends[0]
            model.save_pretrained(tmp)
        bar.update(1)
        reference = reference_engine(compiled)
        torch.save(reference, tmp / engine_file())
        save_tokenizer(tmp, [t.text for t in hw.p.tokens])
        _save_meta(tmp, config, compiled, hw, _report(compiled))
        if not cached:
            check_output_folder(path, overwrite)       # again: files may have appeared while it compiled
        old = path.with_name(f".{path.name}.old-{unique}")
        if path.exists():
            path.rename(old)
        try:
            tmp.rename(path)
        except BaseException:
            if old.exists():                           # put the previous build back
                old.rename(path)
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    if cached:
        evict_stale_builds(config, progress)
    bar.update(1)
    bar.close()
    m = open_machine(path)
    m._model, m._reference = model, reference
    return m


def _cache_path(config: MachineConfig, target_kw: dict) -> Path:
    return cache_root() / f"{config.name}-{source_hash(config, target_kw)}"


def cached_build_path(config: MachineConfig = BUILTIN, **target_kw) -> Path:
    """Where the cache keeps the build of `config` with these compiler options (the defaults
    filled in as `load_machine` does), built or not."""
    target_kw = with_budgets(target_kw)
    return _cache_path(config, target_kw)


#: a stale cached build opened this recently is kept: another checkout or process (a soak, a
#: fuzzer run from an older commit) may be using it
KEEP_RECENTLY_USED_S = 24 * 3600


def evict_stale_builds(config: MachineConfig, progress: bool = True) -> list:
    """Remove cached builds of `config` made from other circuits than this version's (a dense
    COMPACT build is ~7 GB; every upgrade would leave one behind) that no one opened in the last
    `KEEP_RECENTLY_USED_S` seconds. Builds of the same circuits with other compiler options stay,
    and so do other machines' builds (`compact-fpu-*` is not a build of `compact`). Returns the
    removed folders."""
    current = source_hash(config, {})
    removed = []
    for d in sorted(cache_root().glob(f"{config.name}-*")):
        meta = d / MACHINE_FILE
        if not d.is_dir() or d.name.endswith(".partial") or not _BUILD_NAME.fullmatch(d.name[len(config.name) + 1:]):
            continue
        try:
            stale = json.loads(meta.read_text()).get("source_hash") != current
        except (OSError, ValueError):
            stale = True                  # no readable metadata: an interrupted or foreign build
        if stale and time.time() - last_used(d) > KEEP_RECENTLY_USED_S:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    if removed and progress:
        # on stderr: a command's stdout may be its --json output
        print(f"removed {len(removed)} cached build(s) of machine {config.name} from older versions of qwengpu",
              file=sys.stderr)
    return removed


#: a cached build's folder name after its machine's: the hash of its sources and options (`_cache_path`)
_BUILD_NAME = re.compile(r"[0-9a-f]{16}")
_USED = ".last-used"


def _mark_used(path: Path) -> None:
    try:
        (path / _USED).touch()
    except OSError:                       # a read-only cache still loads
        pass


def last_used(path: Path) -> float:
    """When the build was last opened (or, never marked, made)."""
    for f in (path / _USED, path / MACHINE_FILE, path):
        try:
            return f.stat().st_mtime
        except OSError:
            continue
    return 0.0


def has_checkpoint(path) -> bool:
    return (Path(path) / "config.json").exists()


def load_machine(config: MachineConfig = BUILTIN, path=None, dense: bool = False, build: bool = True,
                 progress: bool = True, **target_kw) -> Machine:
    """The built machine for `config` from `path` or the cache, building it when missing (or when
    the stock checkpoint is wanted, `dense`, and only the compact engine's weights are there).
    Every load checks the build's files (`verify_build`): a corrupt cached build is said and
    rebuilt; a corrupt build at `path` raises `CorruptBuild` naming the file. Concurrent callers
    wanting the same missing build wait for one of them to build it (`build_lock`)."""
    config = config_named(config)
    kw = with_budgets(target_kw)
    cached = path is None
    p = Path(path) if path is not None else _cache_path(config, kw)

    def opened():
        """The machine at p when it is there, complete and intact; None when it must be built."""
        ready = has_checkpoint(p) if dense else (has_checkpoint(p) or (p / engine_file()).exists())
        if not ((p / MACHINE_FILE).exists() and ready):
            return None
        try:
            m = open_machine(p)
            if not dense and not m.records:     # built before builds recorded hashes: read its weights now
                m.reference_engine()
        except CorruptBuild as e:
            if not cached:
                raise CorruptBuild(e.file, f"{e.reason}; rebuild it (`qwengpu build --target {config.name} "
                                           f"--out {p}`)") from None
            print(f"the cached machine at {p} is corrupt: {e}; rebuilding it", file=sys.stderr, flush=True)
            return None
        if not (p / "tokenizer.json").exists():          # built before machines carried one
            save_tokenizer(p, m.tokens)
        return m

    m = opened()
    if m is not None:
        if cached:
            _mark_used(p)
        return m
    if not build:
        raise FileNotFoundError(f"no built machine at {p}; build it with `qwengpu build`")
    if not cached:
        check_output_folder(p)
    with build_lock(p, progress):
        m = opened()                  # built by another process while this one waited
        if m is not None:
            return m
        return _build_locked(config, p, cached, progress, dense, False, kw)


def build_gpu(target="compact", out=None, *, dense: bool = True, progress: bool = True, overwrite: bool = False,
              **target_kw) -> Machine:
    """Build the GPU as a `Qwen3_5ForCausalLM` checkpoint with its tokenizer (`save_pretrained` at
    `out`, default the cache) and return the `Machine`. `target`: a machine geometry by name
    ("compact", the built-in one; "tiny", a small test machine) or a `MachineConfig`; `target_kw`:
    compiler `Target` options (mlp_budget, gdn_head_budget ...). `dense=False` saves only the
    compact engine's sparse weights (no stock checkpoint). A previous build at `out` is replaced;
    another non-empty folder only with `overwrite=True` (never the root, the home folder, the cache
    or a folder holding the current directory)."""
    if isinstance(target, str):
        target = config_named(target, "target")
    return build_machine(target, out, progress=progress, dense=dense, overwrite=overwrite, **target_kw)


def _bar(total, desc, enabled):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, disable=not enabled)
