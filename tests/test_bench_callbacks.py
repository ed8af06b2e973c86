"""``benchmarks/bench_callbacks.py``: the callbacks an app sends the handler are recorded once
and replayed, each round with fresh run ids, into the guard and its no-op floor; the report
gives the guard's cost per model call, callback by callback."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
from conftest import BENCHMARKS, import_benchmark, skip_outside_git


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    yield from import_benchmark("bench_callbacks")


def test_an_apps_callbacks_replay_into_the_guard_and_its_floor(
    bench: ModuleType, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    apps = {"rag": bench.bench_apps.GRAPH_APPS["rag"]}
    events, calls = bench.record(apps)
    names = {name for name, _, _ in events}
    assert {"on_chain_start", "on_chat_model_start", "on_llm_end", "on_tool_end"} <= names
    assert calls >= 5
    fresh = bench.with_fresh_ids(events)
    ids = {kwargs["run_id"] for _, _, kwargs in events}
    assert {kwargs["run_id"] for _, _, kwargs in fresh}.isdisjoint(ids)
    assert len({kwargs["run_id"] for _, _, kwargs in fresh}) == len(ids)  # one new id for each

    guard = bench.LoopGuardCallbackHandler()
    sides = {"floor": bench.no_op_like(guard), "this checkout": guard}
    with caplog.at_level(logging.WARNING):
        times = bench.replay(sides, events, 2, cold=False)
    assert not caplog.records  # no stop, no report, no failure of the guard
    assert len(times["this checkout"]["*"]) == 2
    assert sum(times["this checkout"]["*"]) > sum(times["floor"]["*"]) > 0
    seen = guard.inspect()  # the guard's last run, ended: it saw the replay's tool calls
    assert seen is not None
    assert seen.calls > 0

    bench.report(times, calls, 2, cold=False)
    out = capsys.readouterr().out
    assert f"{calls} model calls, warm caches, median of 2 rounds" in out
    assert "this checkout" in out
    assert "the guard's cost" in out
    assert "on_tool_end" in out


def test_the_cache_walk_reads_every_block(bench: ModuleType) -> None:
    walk = bench.CacheWalk(objects=70)
    assert walk() == sum(len(str(i)) for i in range(0, 70, 13))  # blocks are zeros


def test_rounds_below_one_are_refused(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_callbacks.py", "--rounds", "0"])
    with pytest.raises(SystemExit):
        bench.main()
    assert "--rounds must be at least 1, not 0" in capsys.readouterr().err


def test_a_revision_git_does_not_have_is_named_before_anything_runs(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    skip_outside_git()
    monkeypatch.chdir(BENCHMARKS)
    monkeypatch.setattr(sys, "argv", ["bench_callbacks.py", "no-such-rev"])
    package_log = logging.getLogger("langchain_loop_guard")
    monkeypatch.setattr(package_log, "propagate", True)  # monkeypatch puts back what it was
    recorded: list[object] = []
    monkeypatch.setattr(bench, "record", recorded.append)
    with pytest.raises(SystemExit):
        bench.main()
    assert "git has no langchain_loop_guard/ at 'no-such-rev'" in capsys.readouterr().err
    assert recorded == []  # no app ran
    assert package_log.propagate  # nor was the guard's log silenced for a run that never ran
