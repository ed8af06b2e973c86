"""``benchmarks/bench_ab.py``: an earlier commit's package loads beside this checkout's under
another name, with its message catalogs, and its guard runs an app beside this checkout's and
the floor's, each side to its scripted end."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import BENCHMARKS, import_benchmark, skip_outside_git

pytestmark = pytest.mark.slow  # a git archive and an app on three sides


@pytest.fixture(scope="module")
def ab() -> Iterator[ModuleType]:
    skip_outside_git()
    yield from import_benchmark("bench_ab")


@pytest.mark.parametrize("integration", ["handler", "node", "middleware"])
def test_an_earlier_commit_runs_beside_this_checkout(
    ab: ModuleType,
    integration: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.chdir(BENCHMARKS)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the earlier package's folder goes again
    # the earlier handler adds its own filter to LangChain's callback logger: it goes again
    callbacks_logger = logging.getLogger("langchain_core.callbacks.manager")
    monkeypatch.setattr(callbacks_logger, "filters", list(callbacks_logger.filters))
    try:
        with caplog.at_level(logging.WARNING):
            earlier = ab.load_earlier("HEAD", tmp_path)
            three, apps = ab.sides(integration, earlier)
            name = next(iter(apps))
            timing = ab.bench_apps.run_round(apps[name], three, None, 0)
    finally:
        for module in [name for name in sys.modules if name.split(".")[0] == ab.EARLIER]:
            del sys.modules[module]
    assert earlier.__name__ == ab.EARLIER
    assert earlier.__file__.startswith(str(tmp_path))
    assert [side.name for side in three] == [f"{integration} floor", "earlier", "this checkout"]
    assert timing.model_calls >= 10  # every side ran the app to its end (else it would raise)
    assert not [r for r in caplog.records if "catalog" in r.getMessage()]


def test_a_commit_that_is_not_there_is_named(
    ab: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(BENCHMARKS)
    with pytest.raises(ValueError, match="git has no langchain_loop_guard/ at 'no-such-rev'"):
        ab.load_earlier("no-such-rev", tmp_path)
