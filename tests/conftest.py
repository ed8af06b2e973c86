"""Fixtures shared by the test suite."""

from __future__ import annotations

import pytest


class FakeClock:
    """An injectable clock (seconds, like ``time.monotonic``) that moves only when told to."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock to inject into a detector or a guard."""
    return FakeClock()
