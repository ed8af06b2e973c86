"""``benchmarks/bench_apps.py``: every app shape runs to its scripted end unguarded, with each
guard and with each floor, and no guard stops or reports anything (the benchmark must never
time a stopped run, and a productive app stopped by a guard is a false positive)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from conftest import import_benchmark

pytestmark = pytest.mark.slow  # about 15 seconds: nine apps on five sides each


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    yield from import_benchmark("bench_apps")


@pytest.fixture(scope="module")
def sides(bench: ModuleType) -> Any:
    made = bench.make_sides()
    yield made
    guards = [
        made["handler"].callbacks[0],
        made["middleware"].middleware[0],
        made["node"].node,
    ]
    for guard in guards:
        status = guard.status()
        assert (status.stops, status.observed, status.recent) == (0, 0, ())


APPS = ["sql", "browser", "supervisor", "chat-interrupt", "research-stream"]
GRAPHS = ["rag", "fan-out", "pipeline", "ops-thread"]


@pytest.mark.parametrize("name", APPS + GRAPHS)
def test_each_app_ends_normally_on_every_side(bench: ModuleType, sides: Any, name: str) -> None:
    build = {**bench.AGENT_APPS, **bench.GRAPH_APPS}[name]
    names = bench.AGENT_SIDES if name in APPS else bench.GRAPH_SIDES
    timing = bench.run_round(build, [sides[n] for n in names], None, 0)
    assert set(timing.ns) == set(names)
    assert timing.model_calls >= 10


@pytest.mark.parametrize("name", ["chat-interrupt", "fan-out"])
def test_async_runs_end_normally(bench: ModuleType, sides: Any, name: str) -> None:
    build = {**bench.AGENT_APPS, **bench.GRAPH_APPS}[name]
    names = bench.AGENT_SIDES if name in APPS else bench.GRAPH_SIDES
    loop = asyncio.new_event_loop()
    try:
        bench.run_round(build, [sides[n] for n in names], loop, 1)
    finally:
        loop.close()


def test_the_app_lists_match(bench: ModuleType) -> None:
    assert list(bench.AGENT_APPS) == APPS
    assert list(bench.GRAPH_APPS) == GRAPHS
