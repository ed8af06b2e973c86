"""Fixtures shared by the test suite."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from langsmith_service import LangSmithService, forget_environment

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"


def import_benchmark(name: str) -> Iterator[ModuleType]:
    """``benchmarks/<name>.py`` imported with its folder on ``sys.path`` (the benchmarks import
    each other), the folder taken off again when the generator closes: a module fixture's
    body (``yield from import_benchmark("bench_apps")``)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def skip_outside_git() -> None:
    """Skip the test outside a git checkout: the benchmarks that compare with an earlier
    commit read it from git."""
    inside = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=BENCHMARKS, capture_output=True, check=False
    )
    if inside.returncode != 0:
        pytest.skip("not a git checkout: the earlier commit is read from git")


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[LangSmithService]:
    """The LangSmith stand-in (``langsmith_service.py``), with the SDK pointed at it; stopped
    (and forgotten, once the environment is restored) after the test."""
    with monkeypatch.context() as patched:
        started = LangSmithService(patched)
        try:
            yield started
        finally:
            started.close()
    forget_environment()


@pytest.fixture(scope="module")
def browser() -> ModuleType:
    """The report screenshot script's browser helpers, once Chromium is known to be there:
    the browser tests skip without it, and fail under CI, which must run them."""
    script = load_script("report_screenshot")
    if script.chromium() is None:
        reason = "chromium is not installed (apt-get install chromium): no browser tests"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, and CI requires them")
        pytest.skip(reason)
    return script


def postgres_uri() -> str:
    """The test PostgreSQL server's URI (``source .ci/postgres.sh`` starts one and exports
    it): missing, it fails the test under CI, which must run it, and skips it elsewhere."""
    uri = os.environ.get("LOOP_GUARD_TEST_POSTGRES_URI")
    if uri:
        return uri
    message = "LOOP_GUARD_TEST_POSTGRES_URI is not set (run `source .ci/postgres.sh`)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
