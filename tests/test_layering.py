"""The dependency contract, checked on the sources (imports inside functions included).

    ptx -> semantics -> machine -> assembler -> runtime -> api -> verify, opbench, limits -> bench, soak, fuzz
        -> lab, splice -> cli, the lab's widgets (`qwengpu_widgets`)
    interp: the oracle (ptx and semantics only); the api and the packages above it use it, never the
    machine, the assembler or the runtime (what both sides share is `semantics`)
    compiler: stands alone (imports nothing of qwengpu outside itself); the machine's circuits and
    everything above the machine may use it
    engines: the compiler only (a compiled model's forward passes); the runtime and splice use them
    suite: the kernels and their oracles (launch specs only)

A package may import its own modules and the packages below it, never one above; no module imports
a private name (`_x`) of another module; there is no import cycle between modules.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: what each package may import (besides itself); a module not listed under a package is a top-level
#: module of qwengpu, listed by its full name
ALLOWED = {
    "qwengpu.launch": set(),
    "qwengpu.cuda": set(),
    "qwengpu.compiler": set(),
    # the engines that run a compiled model's forward passes: weights in, logits and states out
    "qwengpu.engines": {"qwengpu.compiler"},
    "qwengpu.ptx": {"qwengpu.launch"},
    # what a launch means, shared by the oracle and the machine: layout, faults, bit-exact arithmetic
    "qwengpu.semantics": {"qwengpu.ptx", "qwengpu.launch"},
    # the reference interpreter: the oracle, not a library (nothing below the api imports it)
    "qwengpu.interp": {"qwengpu.ptx", "qwengpu.semantics", "qwengpu.launch"},
    "qwengpu.suite": {"qwengpu.launch", "qwengpu.cuda"},
    # the hardware and its specification; its circuits are written for the compiler
    "qwengpu.machine": {"qwengpu.ptx", "qwengpu.semantics", "qwengpu.launch", "qwengpu.compiler"},
    # kernel IR -> the machine's program image
    "qwengpu.assembler": {"qwengpu.ptx", "qwengpu.semantics", "qwengpu.launch", "qwengpu.machine"},
    # running the machine: checkpoints, prompts, launches on the simulator and the engines
    "qwengpu.runtime": {"qwengpu.ptx", "qwengpu.semantics", "qwengpu.launch", "qwengpu.machine", "qwengpu.assembler",
                        "qwengpu.compiler", "qwengpu.engines"},
    # the entry points
    "qwengpu.api": {"qwengpu.cuda", "qwengpu.launch", "qwengpu.ptx", "qwengpu.semantics", "qwengpu.interp",
                    "qwengpu.runtime"},
    "qwengpu.verify": {"qwengpu", "qwengpu.api", "qwengpu.launch", "qwengpu.suite"},
    "qwengpu.bench": {"qwengpu", "qwengpu.api", "qwengpu.launch", "qwengpu.suite", "qwengpu.verify",
                      "qwengpu.assembler", "qwengpu.runtime"},
    "qwengpu.opbench": {"qwengpu", "qwengpu.api", "qwengpu.cuda", "qwengpu.machine"},
    "qwengpu": {"qwengpu.cuda", "qwengpu.launch", "qwengpu.api", "qwengpu.runtime"},
    # the table of limits behind docs/limits.md
    "qwengpu.limits": {"qwengpu.launch", "qwengpu.ptx", "qwengpu.semantics", "qwengpu.machine", "qwengpu.assembler",
                       "qwengpu.runtime"},
    # on top
    "qwengpu.lab": {"qwengpu", "qwengpu.api", "qwengpu.launch", "qwengpu.ptx", "qwengpu.semantics", "qwengpu.interp",
                    "qwengpu.compiler", "qwengpu.engines",    # the recorder's captures in the engine's compiled loop
                    "qwengpu.machine", "qwengpu.assembler", "qwengpu.runtime"},
    "qwengpu.splice": {"qwengpu", "qwengpu.api", "qwengpu.launch", "qwengpu.ptx", "qwengpu.semantics", "qwengpu.interp",
                       "qwengpu.compiler", "qwengpu.engines", "qwengpu.machine", "qwengpu.assembler", "qwengpu.runtime", "qwengpu.suite",
                       "qwengpu.verify"},
    "qwengpu.soak": {"qwengpu", "qwengpu.api", "qwengpu.launch", "qwengpu.suite", "qwengpu.verify", "qwengpu.runtime"},
    "qwengpu.cli": {"qwengpu", "qwengpu.api", "qwengpu.launch", "qwengpu.cuda", "qwengpu.suite", "qwengpu.verify",
                    "qwengpu.bench", "qwengpu.opbench", "qwengpu.soak", "qwengpu.splice", "qwengpu.assembler", "qwengpu.runtime",
                    "qwengpu.lab", "qwengpu.fuzz"},          # `qwengpu lab` (qwengpu.lab.server)
    # random kernels against a host C++ oracle, on the engines
    "qwengpu.fuzz": {"qwengpu", "qwengpu.api", "qwengpu.launch", "qwengpu.cuda", "qwengpu.verify"},
    "qwengpu.__main__": {"qwengpu.cli"},
    "qwengpu_widgets": {"qwengpu", "qwengpu.lab", "qwengpu.launch", "qwengpu.splice"},   # model=: a spliced checkpoint
}


def _modules():
    out = {}
    for f in sorted(list((ROOT / "qwengpu").rglob("*.py")) + list((ROOT / "widgets").rglob("*.py"))):
        parts = f.relative_to(ROOT).with_suffix("").parts
        parts = ("qwengpu_widgets",) + parts[1:] if parts[0] == "widgets" else parts      # its import name
        is_pkg = parts[-1] == "__init__"
        parts = parts[:-1] if is_pkg else parts
        out[".".join(parts)] = (f, is_pkg)
    return out


def _imports(name: str, path: Path, is_pkg: bool):
    """(imported module, imported names, line) of every import, relative ones resolved."""
    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            yield mod, [a.name for a in node.names], node.lineno


def _owner(mod: str) -> str | None:
    """The entry of ALLOWED a module belongs to (its package, or itself)."""
    best = None
    for key in ALLOWED:
        if (mod == key or mod.startswith(key + ".")) and (best is None or len(key) > len(best)):
            best = key
    return best


def _graph():
    mods = _modules()
    edges = {}
    for name, (path, is_pkg) in mods.items():
        for mod, names, line in _imports(name, path, is_pkg):
            if not (mod == "qwengpu" or mod.startswith(("qwengpu.", "qwengpu_widgets"))):
                continue
            targets = [f"{mod}.{n}" if f"{mod}.{n}" in mods else mod for n in names] or [mod]
            for t in targets:
                edges.setdefault(name, []).append((t, names, line))
    return mods, edges


def test_packages_import_only_what_is_below_them():
    mods, edges = _graph()
    bad = []
    for src, outs in edges.items():
        own = _owner(src)
        assert own is not None, f"{src} belongs to no package of the contract (add it to ALLOWED)"
        for dst, _, line in outs:
            other = _owner(dst)
            if other != own and other not in ALLOWED[own]:
                bad.append(f"{src}:{line} imports {dst} ({own} may not import {other})")
    assert not bad, "imports against the dependency contract:\n" + "\n".join(bad)


def _map_line() -> list[list[str]]:
    """The groups of the dependency line of docs/architecture.md ("The dependency contract"), left
    to right, as ALLOWED names them."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## The dependency contract", 1)[1].split("```", 2)[1]
    line = block.strip().splitlines()[0]
    return [[n.strip() if n.strip() == "qwengpu_widgets" else f"qwengpu.{n.strip()}" for n in group.split(",")]
            for group in line.split("->")]


def test_the_architecture_map_states_this_contract():
    """docs/architecture.md's dependency line names every package of the chain once, and each
    imports (in ALLOWED) only packages of groups left of its own."""
    groups = _map_line()
    where = {name: i for i, group in enumerate(groups) for name in group}
    assert sum(len(g) for g in groups) == len(where), "a package twice in the line"
    apart = {"qwengpu", "qwengpu.__main__", "qwengpu.launch", "qwengpu.cuda", "qwengpu.compiler", "qwengpu.engines",
             "qwengpu.suite", "qwengpu.interp"}                  # the line's notes below it, and the top-level module
    assert set(where) == set(ALLOWED) - apart, set(where) ^ (set(ALLOWED) - apart)
    bad = [f"{name} imports {dep} (not left of it)" for name, i in where.items() for dep in ALLOWED[name]
           if dep in where and where[dep] >= i]
    assert not bad, bad


def test_the_oracle_is_not_a_library():
    """The reference interpreter is the oracle the machine is tested against: the machine, the
    assembler and the runtime never import it (what both sides share is in `qwengpu.semantics`),
    so a bug in the interpreter cannot hide inside the machine it checks."""
    _, edges = _graph()
    machine_side = ("qwengpu.machine", "qwengpu.assembler", "qwengpu.runtime")
    assert not [p for p in machine_side if "qwengpu.interp" in ALLOWED[p]]
    bad = [f"{src}:{line} imports {dst}" for src, outs in edges.items() if _owner(src) in machine_side
           for dst, _, line in outs if _owner(dst) == "qwengpu.interp"]
    assert not bad, "the oracle imported by the machine's side:\n" + "\n".join(bad)


def test_no_private_names_across_modules():
    mods, edges = _graph()
    bad = []
    for src, (path, is_pkg) in mods.items():
        for mod, names, line in _imports(src, path, is_pkg):
            if not mod.startswith("qwengpu") or mod == src:
                continue
            priv = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if priv:
                bad.append(f"{src}:{line} imports {', '.join(priv)} from {mod}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_no_import_cycles():
    mods, edges = _graph()
    graph = {m: sorted({d for d, _, _ in edges.get(m, []) if d in mods and d != m}) for m in mods}
    # a package's __init__ importing its own modules is how a package re-exports them: not a cycle
    for m in graph:
        if mods[m][1]:
            graph[m] = [d for d in graph[m] if not d.startswith(m + ".")]
    cycles = []
    state: dict = {}
    stack: list = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in graph[m]:
            if state.get(d) == 1:
                cycles.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles (imports inside functions count):\n" + "\n".join(cycles)
