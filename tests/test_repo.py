"""Repository contracts: the README opens with the two commands (the lab, the tests), the CLI demo
comes next, and CI runs the test one."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


def test_readme_opens_with_two_commands():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert cmds[0].endswith("qwengpu lab")               # the product: the lab, opened on notebook 01
    assert "lab" in cmds[0].split("-e", 1)[1].split()[0]   # ... with the lab's packages installed
    assert cmds[0].index("torch==") < cmds[0].index("-e ")  # torch first: pip takes the CPU build
    assert "pytest" in cmds[1]
    # nothing but the title and one paragraph before the commands
    head = (ROOT / "README.md").read_text().split("```bash", 1)[0]
    assert head.count("\n#") == 0


def test_readme_demo_is_the_second_example():
    """Right after the two commands: the command-line demo (`qwengpu demo`, the dot product on the model)."""
    rest = (ROOT / "README.md").read_text().split("```bash", 2)
    assert len(rest) == 3 and "\n## " not in rest[1].split("```", 1)[1]     # no section between them
    assert rest[2].split("```", 1)[0].strip().endswith("qwengpu demo")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()


def test_ruff_passes():
    """The linter and its config (pyproject.toml, [tool.ruff]) are part of CI."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


# -- every module, file and symbol the docs name exists --------------------------------------------------------

DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
#: first components of dotted names that are not this project's (checked elsewhere or not at all)
FOREIGN = {"Qwen3_5ForCausalLM", "AutoModelForCausalLM", "AutoTokenizer", "DynamicCache", "torch", "np", "numpy",
           "transformers", "hypothesis"}
SOURCE_EXT = (".py", ".md", ".ipynb", ".cu", ".ptx", ".toml", ".js", ".css")
#: files a build or a test writes (named as outputs), not sources
OUTPUT_EXT = (".json", ".safetensors", ".txt", ".png", ".pt", ".html")
#: paths the docs name on purpose although they are not in the repository, and why
ABSENT = {
    "qwengpu/suite/goldens/NAME.json": "hardware goldens: none recorded yet (docs/suite.md)",
    "tests/artifacts/inspector.png": "written by tests/test_browser.py (git-ignored)",
}
#: dotted names in the docs that are not Python: a margin kind, a checkpoint tensor, the machine's
#: memories (GDN memories of the circuits, named like `rom.s0`)
NOT_PYTHON = {"attention.score", "mtp.norm", "lanes.pc", "lanes.st", "rom.s0", "rom.tail", "reg.emit", "reg.term",
              "reg.0"}
#: prefixes of the routine variants the soft-float docs list (`softfloat.COST` keys: `compare.lt`)
NOT_PYTHON_PREFIXES = ("compare.", "compare64.", "testp.", "testp64.", "sf.")


def _doc_spans():
    """(where, span) of every backticked span of the docs, and those of the sources' docstrings and
    comments that are unambiguous (`qwengpu.` names, `tests/` paths)."""
    import re
    for doc in DOCS:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)     # code blocks show usage, not names
        for m in re.finditer(r"`([^`\n]+)`", text):
            yield doc.relative_to(ROOT).as_posix(), m.group(1)
    for src in sorted(list((ROOT / "qwengpu").rglob("*.py")) + list((ROOT / "widgets").rglob("*.py"))):
        for m in re.finditer(r"`((?:qwengpu\.|qwengpu_widgets\.|tests/)[^`\n ]+)`", src.read_text()):
            yield src.relative_to(ROOT).as_posix(), m.group(1)


def _index():
    """(module dotted names, {basename: [module]}, {name defined at module level: [module]},
    {class name: set of its member names})."""
    import ast
    modules, by_base, names, classes = {}, {}, {}, {}
    for f in sorted(list((ROOT / "qwengpu").rglob("*.py")) + list((ROOT / "widgets").rglob("*.py"))):
        parts = f.relative_to(ROOT).with_suffix("").parts
        parts = ("qwengpu_widgets",) + parts[1:] if parts[0] == "widgets" else parts      # its import name
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        mod = ".".join(parts)
        tree = ast.parse(f.read_text())
        defined = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    defined.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                defined.update((a.asname or a.name).split(".")[0] for a in node.names)
            if isinstance(node, ast.ClassDef):
                members = classes.setdefault(node.name, set())
                for sub in ast.walk(node):
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        members.add(sub.name)
                    elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                        members.add(sub.target.id)
                    elif isinstance(sub, ast.Assign):
                        members.update(n.id for t in sub.targets for n in ast.walk(t) if isinstance(n, ast.Name))
                        members.update(t.attr for t in sub.targets if isinstance(t, ast.Attribute))
                    elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Attribute):
                        members.add(sub.target.attr)
        modules[mod] = defined
        by_base.setdefault(parts[-1], []).append(mod)
        for n in defined:
            names.setdefault(n, []).append(mod)
    return modules, by_base, names, classes


def _resolves(span: str, index) -> bool:
    modules, by_base, names, classes = index
    parts = span.removesuffix("()").split(".")
    if parts[0] in ("qwengpu", "qwengpu_widgets"):
        mods = [".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in modules]
        if not mods:
            return False
        rest = parts[len(mods[0].split(".")):]
    elif parts[0] in by_base:                    # a module named by its last component: `engines.best_device`
        known = parts[1] in names or any(parts[1] in ms for ms in classes.values())
        if not known:
            return None                          # `compare.eq`: a table key, not a name of ours
        return any(_member(m, parts[1:], index) for m in by_base[parts[0]])
    elif parts[0] in classes:                    # `Class.member`
        return all(p in classes.get(parts[0], ()) for p in parts[1:2])
    elif parts[0][:1].isupper() and not parts[0].isupper():
        return False                             # a class name that no module defines
    else:
        return None                              # not a name of ours (a PTX opcode, a memory name, a field)
    return _member(mods[0], rest, index)


def _member(mod: str, rest: list, index) -> bool:
    modules, _, _, classes = index
    if not rest:
        return True
    sub = f"{mod}.{rest[0]}"
    if sub in modules:
        return _member(sub, rest[1:], index)
    if rest[0] not in modules[mod]:
        return False
    return len(rest) == 1 or rest[1] in classes.get(rest[0], ())


def _path_exists(span: str) -> bool:
    import re
    path, _, test = span.partition("::")
    pattern = re.sub(r"NAME|\.\.\.", "*", path)
    pattern = re.sub(r"(\d+)\.\.(\d+)", "*", pattern)
    if "/" in path:                             # from the repository root, or inside the package
        hits = list(ROOT.glob(pattern)) or list((ROOT / "qwengpu").glob(pattern))
    else:
        hits = [f for f in ROOT.rglob(pattern) if ".venv" not in f.parts]
    if not hits:
        return False
    if test:
        return any(re.search(rf"^(def {re.escape(test)}\b|{re.escape(test)}\s*=)", h.read_text(), re.M)
                   for h in hits if h.is_file())
    return True


def test_every_name_the_docs_give_exists():
    """A backticked module, file or dotted symbol in docs/ or the README names something that exists:
    `qwengpu.x.y` and `module.symbol` resolve in the sources, `Class.member` is a member of that
    class, a path (or a bare source file name) is in the repository, `tests/t.py::test_x` is a test."""
    import re
    index = _index()
    missing = []
    for doc, span in _doc_spans():
        if " " in span or span.split(".")[0] in FOREIGN or span in NOT_PYTHON or span in ABSENT \
                or span.startswith(NOT_PYTHON_PREFIXES):
            continue
        if "/" not in span and span.endswith(OUTPUT_EXT):
            continue
        if not span.startswith("qwengpu.") and re.fullmatch(r"(\.?[\w-]+/)+[\w.*-]*(::\w+)?|[\w-]+\.(py|md|ipynb|cu|ptx)(::\w+)?", span):
            if span.startswith(("qwengpu/", "tests/", "docs/", "notebooks/", "widgets/", ".ci/")) \
                    or span.endswith(SOURCE_EXT) or "::" in span:
                if not _path_exists(span):
                    missing.append(f"{doc}: file `{span}`")
            continue
        if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(\(\))?", span) and _resolves(span, index) is False:
            missing.append(f"{doc}: name `{span}`")
    assert not missing, "the docs name things that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_pyproject_lists_every_package():
    """pyproject.toml lists the packages (the widgets/ folder installs as `qwengpu_widgets`, which a
    find directive cannot say): a new package must be added there, or it is not installed."""
    tomllib = pytest.importorskip("tomllib")            # Python 3.11+
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "qwengpu").rglob("__init__.py")}
    assert found | {"qwengpu_widgets"} == listed


#: the size limits of issue 24 inside qwengpu/: a module longer than this does more than one job, a
#: class longer than this is several classes
MAX_FILE_LINES = 1000
MAX_CLASS_LINES = 400

def _sizes_over_limits(root: Path) -> list[str]:
    import ast
    out = []
    for f in sorted(root.rglob("*.py")):
        text = f.read_text()
        rel = f.relative_to(root.parent)
        if len(text.splitlines()) > MAX_FILE_LINES:
            out.append(f"{rel}: {len(text.splitlines())} lines (at most {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                out.append(f"{rel}:{node.lineno} class {node.name}: {node.end_lineno - node.lineno + 1} lines "
                           f"(at most {MAX_CLASS_LINES})")
    return out


def test_no_module_over_1000_lines_and_no_class_over_400(tmp_path):
    """Every module of qwengpu/ fits MAX_FILE_LINES and every class MAX_CLASS_LINES; the check itself
    finds both kinds of excess (on a generated tree)."""
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    (tmp_path / "big.py").write_text("class Big:\n" + "    y = 1\n" * MAX_CLASS_LINES)
    found = _sizes_over_limits(tmp_path)
    assert len(found) == 2 and "long.py" in found[0] + found[1] and "class Big" in found[0] + found[1], found
    over = _sizes_over_limits(ROOT / "qwengpu")
    assert not over, "\n".join(over)


def test_the_suite_page_counts_the_suite():
    import re

    from qwengpu import suite
    text = (ROOT / "docs" / "suite.md").read_text()
    said = int(re.search(r"holds (\d+) small CUDA kernels", text).group(1))
    assert said == len(suite.names()), f"docs/suite.md says {said} kernels; the suite has {len(suite.names())}"
