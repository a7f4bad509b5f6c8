"""Repository contracts: the README opens with the two commands, and CI runs the test one."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


def test_readme_opens_with_two_commands():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert cmds[0].endswith("qwengpu demo")
    assert "pytest" in cmds[1]
    # nothing but the title and one paragraph before the commands
    head = (ROOT / "README.md").read_text().split("```bash", 1)[0]
    assert head.count("\n#") == 0


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()
