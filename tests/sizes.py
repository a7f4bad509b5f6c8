"""How big the test run is: one scheme, set by the options in tests/conftest.py.

- `RUNSLOW` (`pytest --runslow`): also run the tests marked `@pytest.mark.slow` (exhaustive proofs,
  every suite kernel on the model). Without it they are skipped, which is what CI runs.
- `SOAK` (`pytest --soak N`): multiply the example counts of the randomised tests (hypothesis
  examples, bulk samples) for a long soak run; 1 is what CI runs. `checked(n)` counts the inputs the
  bulk checks compared; the run's summary prints the total when it is a soak.

Test modules read these at import, after pytest has parsed its options.
"""
RUNSLOW = False
SOAK = 1.0
CHECKED = 0


def scaled(n: float, minimum: int = 1) -> int:
    """`n` examples at this run's size (at least `minimum`)."""
    return max(minimum, int(n * SOAK))


def checked(n: int):
    """Record that a bulk check compared `n` inputs (the soak summary's count)."""
    global CHECKED
    CHECKED += int(n)
