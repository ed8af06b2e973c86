"""``benchmarks/breakdown.py``'s sixth part: the guards in the apps with the detector's work
taken out. Its rows are only honest if each stub takes out what its row says and nothing
stays patched after it: a handler whose digests were still made under "digests constant"
would put the detector's cost on the bookkeeping's side."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from conftest import import_benchmark
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard._core import _canonical, _signature
from langchain_loop_guard._integrations import _handler, _model_answer

pytestmark = pytest.mark.slow  # about 10 seconds: one app, run a few times


@pytest.fixture(scope="module")
def breakdown() -> Iterator[ModuleType]:
    logging.getLogger("langchain_loop_guard").propagate = False
    try:
        yield from import_benchmark("breakdown")
    finally:
        logging.getLogger("langchain_loop_guard").propagate = True


def _counted(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    """``owner.name`` counting its calls (what a module calls by its global name)."""
    calls = [0]
    original: Callable[..., Any] = getattr(owner, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def _run_rag(breakdown: ModuleType, handler: Any) -> int:
    """The ``rag`` app run to its end with ``handler``; its model calls."""
    bench_apps = breakdown.bench_apps
    side = bench_apps.Side("guarded", callbacks=[handler])
    return int(bench_apps.GRAPH_APPS["rag"](side, InMemorySaver()).complete(side))


def test_each_stub_takes_out_the_digests_its_row_names(
    breakdown: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = _counted(monkeypatch, _signature, "result_digests")  # inside ``outcome``
    calls = _counted(monkeypatch, _canonical, "canonical")  # inside ``call_signature``
    replies = _counted(monkeypatch, _signature, "_bounded")  # inside an answer's key

    assert _run_rag(breakdown, _handler.LoopGuardCallbackHandler()) >= 5
    made = (results[0], calls[0], replies[0])
    assert all(made), made  # as shipped, every kind of digest is made

    with breakdown.constant_digests():  # (which digests an empty result once, for its constant)
        results[0] = calls[0] = replies[0] = 0
        assert _run_rag(breakdown, breakdown._AllowingHandler()) >= 5
    assert (results[0], calls[0], replies[0]) == (0, 0, 0)

    with breakdown.plainly_hashed_results():
        results[0] = calls[0] = 0
        plain = _handler.outcome("The article: 42 tokens, fetched in 12 ms.")
        assert _run_rag(breakdown, _handler.LoopGuardCallbackHandler()) >= 5
    assert results[0] == 0  # no result masked, sketched or read for what it says
    assert calls[0] > 0  # the calls are digested as shipped
    assert plain.near is None
    assert plain.info == "+" + plain.key

    # nothing stays patched: the digests are made again as shipped
    assert _handler.outcome is _signature.outcome
    assert _model_answer.call_signature is _canonical.call_signature
    assert _handler.outcome("x") == _signature.outcome("x")


def test_an_allowing_guard_decides_nothing(breakdown: ModuleType) -> None:
    deciding, allowing = _handler.LoopGuardCallbackHandler(), breakdown._AllowingHandler()
    for handler in (deciding, allowing):
        assert _run_rag(breakdown, handler) >= 5
    seen = deciding.inspect(), allowing.inspect()
    assert seen[0] is not None
    assert seen[0].calls > 0
    assert seen[1] is not None
    assert seen[1].calls == 0  # no tool call reached its detector
    node = breakdown._AllowingNode()
    detector = node.new_detector()
    verdict = node.decide(detector, "tool_call", "search", {"q": "x"})
    assert verdict.action == "allow"


def test_an_ablation_row_per_side_against_the_floor(breakdown: ModuleType) -> None:
    bench_apps = breakdown.bench_apps
    apps = {"rag": bench_apps.GRAPH_APPS["rag"]}
    sides = bench_apps.make_sides()
    unfed = bench_apps.Side("node, events unfed", node=breakdown._AllowingNode())
    rows = breakdown._ablation(apps, sides["node floor"], [sides["node"], unfed], 1, None)
    assert [name for name, *_ in rows] == ["node", "node, events unfed"]
    for _, ratio, spread, added in rows:
        assert ratio > 0
        assert spread == 0  # one round: no spread
        assert isinstance(added, float)
