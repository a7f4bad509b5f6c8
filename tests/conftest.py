"""Test options: `--runslow` and `--soak N` (see tests/sizes.py), the one scheme for test size."""
import pytest
import sizes


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run the tests marked slow (exhaustive proofs, every suite kernel on the model)")
    parser.addoption("--soak", type=float, default=1.0, metavar="N",
                     help="multiply the randomised tests' example counts by N (a soak run; default 1)")


def pytest_configure(config):
    sizes.RUNSLOW = config.getoption("--runslow")
    sizes.SOAK = config.getoption("--soak")


def pytest_collection_modifyitems(config, items):
    if sizes.RUNSLOW:
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    if sizes.SOAK != 1 or sizes.RUNSLOW:
        terminalreporter.write_line(f"test size: --soak {sizes.SOAK:g}{' --runslow' if sizes.RUNSLOW else ''}; "
                                    f"{sizes.CHECKED:,} inputs compared in bulk")


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    """`module_tmp(name)`: a new directory for a module's fixtures, removed when the module's
    tests are done. The splice fixtures write GiBs of checkpoints; CI's disk holds one module's
    worth, not the whole session's (passing tests' own tmp_path goes at once too: pyproject's
    `tmp_path_retention_policy`)."""
    import shutil
    made = []

    def make(name: str):
        made.append(tmp_path_factory.mktemp(name))
        return made[-1]
    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)
