"""What a loop cost: the model calls and tokens spent since the looping pattern began, in the
stop (``LoopDetected.cost``, its message), ``status``/``inspect``, a trace and its replay."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from guard_scenarios import KINDS, Kind, harness
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, UsageMetadata

from langchain_loop_guard import (
    LoopCost,
    LoopDetected,
    LoopGuardCallbackHandler,
    LoopGuardConfig,
    Signal,
    replay,
)
from langchain_loop_guard._core._cost import CostLedger, Usage, cost_cell, cost_text, usage_of
from langchain_loop_guard._core._detector import Verdict
from langchain_loop_guard._core._stop_cost import with_cost
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

INTEGRATIONS = ("handler", *KINDS)


def usage_of_call(number: int) -> UsageMetadata:
    """A provider's usage: the prompt grows with the conversation, every call its own."""
    prompt = 1000 * number
    return UsageMetadata(input_tokens=prompt, output_tokens=7, total_tokens=prompt + 7)


def _spent(calls: range) -> int:
    return sum(usage_of_call(n)["total_tokens"] for n in calls)


# Two different calls, then the same read over and over: the loop begins at call 3.
_WARMUP = [call("search", {"q": "notes"}), call("read_file", {"path": "other.txt"})]
_LOOP = [call("read_file", {"path": "notes.txt"})] * 6


def _stop(kind: str, script: list[Any], usage: Any = usage_of_call, **config: Any) -> LoopDetected:
    """Run a scripted agent of ``kind`` until the guard stops it; the stop."""
    model = ScriptedChatModel(script=[*script, "done"], usage=usage)
    tools = [scripted_tool("read_file", "the notes"), scripted_tool("search", "no hits")]
    if kind == "handler":
        guard = LoopGuardCallbackHandler(LoopGuardConfig(**config))
        agent = create_agent(model, tools)
        run = {"callbacks": [guard]}
    else:
        agent = harness(kind, model, tools, config=config).graph
        run = {"configurable": {"thread_id": "t"}}
    with pytest.raises(LoopDetected) as caught:
        agent.invoke({"messages": [("user", "go")]}, run)
    return caught.value


@pytest.mark.parametrize("kind", INTEGRATIONS)
def test_a_stop_costs_the_usage_of_the_calls_inside_the_loop(kind: str) -> None:
    """The cost is the sum of the usage of model calls 3, 4 and 5: the loop's three reads."""
    stop = _stop(kind, _WARMUP + _LOOP)
    assert stop.signal is Signal.REPEATED_TOOL_CALL
    assert stop.cost == LoopCost(
        calls=3,
        tokens=_spent(range(3, 6)),
        input_tokens=sum(1000 * n for n in range(3, 6)),
        output_tokens=21,
    )
    assert f"This loop had spent {_spent(range(3, 6)):,} tokens over 3 model calls." in str(stop)


@pytest.mark.parametrize("kind", INTEGRATIONS)
def test_a_cycle_costs_every_call_of_its_laps(kind: str) -> None:
    """A B A B A B: the loop began with the first A, six model calls before the stop."""
    lap = [call("search", {"q": "notes"}), call("read_file", {"path": "notes.txt"})]
    stop = _stop(kind, [call("read_file", {"path": "x"})] + lap * 4)
    assert stop.signal is Signal.TOOL_CYCLE
    assert stop.cost is not None
    assert (stop.cost.calls, stop.cost.tokens) == (6, _spent(range(2, 8)))


@pytest.mark.parametrize("kind", INTEGRATIONS)
def test_a_model_without_usage_is_counted_in_calls_only(kind: str) -> None:
    """No ``usage_metadata``: the cost counts calls, says none reported usage, and the stop
    message says nothing of tokens."""
    stop = _stop(kind, _WARMUP + _LOOP, usage=None)
    assert stop.cost == LoopCost(calls=3, unmetered=3)
    assert not stop.cost.metered
    assert "token" not in str(stop)
    assert cost_text(stop.cost) == (
        "This loop had spent 3 model calls (the model reports no token usage)."
    )


def test_the_stop_message_says_the_cost_in_korean() -> None:
    """The cost sentence follows the configured locale."""
    stop = _stop("handler", _WARMUP + _LOOP, locale="ko")
    assert f"이 루프는 모델 호출 3번에 걸쳐 토큰 {_spent(range(3, 6)):,}개를 썼습니다." in str(stop)


@pytest.mark.parametrize("kind", KINDS)
def test_the_saved_stop_and_the_interrupt_carry_the_cost(kind: Kind) -> None:
    """``loop_guard_stop["cost"]`` (``on_stop="end"``) and the interrupt's ``"cost"``."""
    tools = [scripted_tool("read_file", "the notes"), scripted_tool("search", "no hits")]
    model = ScriptedChatModel(script=[*_WARMUP, *_LOOP, "done"], usage=usage_of_call)
    ended = harness(kind, model, tools, on_stop="end").invoke()
    assert ended["loop_guard_stop"]["cost"] == LoopCost(3, _spent(range(3, 6)), 12000, 21).to_json()
    model = ScriptedChatModel(script=[*_WARMUP, *_LOOP, "done"], usage=usage_of_call)
    paused = harness(kind, model, tools, on_stop="interrupt").invoke()
    (pending,) = paused["__interrupt__"]
    assert pending.value["cost"]["tokens"] == _spent(range(3, 6))


def test_the_cost_survives_pickling() -> None:
    """A stop that travels to another process keeps its cost."""
    stop = _stop("handler", _WARMUP + _LOOP)
    assert pickle.loads(pickle.dumps(stop)).cost == stop.cost


def test_partial_usage_is_a_lower_bound_and_says_so() -> None:
    """Calls that reported no usage are counted and named; the tokens are "at least"."""
    stop = _stop("handler", _WARMUP + _LOOP, usage=lambda n: None if n == 4 else usage_of_call(n))
    assert stop.cost is not None
    assert (stop.cost.calls, stop.cost.unmetered) == (3, 1)
    assert stop.cost.tokens == _spent(range(3, 6)) - usage_of_call(4)["total_tokens"]
    assert "at least" in str(stop)
    assert "(1 reported no usage)" in str(stop)


def test_inspect_and_status_show_the_cost() -> None:
    """``inspect`` shows what the run spent and its loop's cost; ``status`` each stop's."""
    guard = LoopGuardCallbackHandler()
    model = ScriptedChatModel(script=[*_WARMUP, *_LOOP, "done"], usage=usage_of_call)
    tools = [scripted_tool("read_file", "the notes"), scripted_tool("search", "no hits")]
    with pytest.raises(LoopDetected):
        create_agent(model, tools).invoke({"messages": [("user", "go")]}, {"callbacks": [guard]})
    inspection = guard.inspect()
    assert inspection is not None
    assert inspection.spent == LoopCost(5, _spent(range(1, 6)), 15000, 35)
    assert inspection.loop_cost is not None
    assert inspection.loop_cost.calls == 3
    assert f"{_spent(range(3, 6)):,} tokens, 3 calls" in str(inspection)
    (record,) = guard.status().recent
    assert record.cost == inspection.loop_cost
    assert "loop cost" in str(guard.status())


def test_a_trace_keeps_the_tokens_and_its_replay_totals_them(tmp_path: Path) -> None:
    """Recorded in observe mode: the replay stops where the guard would have, costs the loop,
    and counts the model calls after the stop as spared."""
    trace = tmp_path / "trace.jsonl"
    guard = LoopGuardCallbackHandler(LoopGuardConfig(mode="observe"), record_to=trace)
    model = ScriptedChatModel(script=[*_WARMUP, *_LOOP, "done"], usage=usage_of_call)
    tools = [scripted_tool("read_file", "the notes"), scripted_tool("search", "no hits")]
    create_agent(model, tools).invoke({"messages": [("user", "go")]}, {"callbacks": [guard]})
    guard.recorder.close()  # type: ignore[union-attr]
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    answers = [line for line in lines if line["e"] == "assistant_message"]
    assert [line["u"] for line in answers] == [
        usage_of_call(n)["total_tokens"] for n in range(1, 10)
    ]
    report = replay(trace)
    (run,) = report.runs
    assert run.stop is not None
    assert run.stop.cost == LoopCost(3, _spent(range(3, 6)))
    assert run.spared == LoopCost(4, _spent(range(6, 10)))
    assert report.loop_cost == run.stop.cost
    assert report.spared == run.spared
    assert report.to_json()["summary"]["spared"]["calls"] == 4
    text = str(report)
    assert f"{_spent(range(3, 6)):,} tokens (3 model calls) inside loops" in text
    assert f"{_spent(range(6, 10)):,} tokens (4 model calls) after the stops spared" in text
    page = report.to_html()
    assert "spent inside loops" in page
    assert f"{_spent(range(6, 10)):,} tokens" in page


def test_a_trace_without_usage_says_so(tmp_path: Path) -> None:
    """Without usage the replay counts calls and says no usage was recorded."""
    trace = tmp_path / "trace.jsonl"
    guard = LoopGuardCallbackHandler(LoopGuardConfig(mode="observe"), record_to=trace)
    model = ScriptedChatModel(script=[*_WARMUP, *_LOOP, "done"])
    tools = [scripted_tool("read_file", "the notes"), scripted_tool("search", "no hits")]
    create_agent(model, tools).invoke({"messages": [("user", "go")]}, {"callbacks": [guard]})
    guard.recorder.close()  # type: ignore[union-attr]
    assert '"u"' not in trace.read_text()
    assert "3 model calls (no token usage recorded) inside loops" in str(replay(trace))


# --- the ledger, alone ---------------------------------------------------------------------


def _ledger(*answers: tuple[int | None, tuple[str, ...], bool]) -> CostLedger:
    return CostLedger(
        (None if t is None else Usage(t, 0, t), tools, reply) for t, tools, reply in answers
    )


@pytest.mark.parametrize(
    ("signal", "tool", "tools", "count", "calls"),
    [
        (Signal.REPEATED_TOOL_CALL, "b", ("b",), 2, 3),  # from the first of b's last two answers
        (Signal.REPEATED_TOOL_ERROR, "a", ("a",), 2, 4),  # a's answers: 2nd and 5th
        (Signal.TOOL_CYCLE, "b", ("a", "b"), 2, 4),  # two laps of two calls
        (Signal.NO_PROGRESS, "b", ("a", "b"), 3, 3),
        (Signal.FAILING_TURNS, None, (), 4, 4),
        (Signal.NO_NEW_INFO, "b", ("a", "b"), 2, 2),  # answers that made calls
        (Signal.TOOL_CYCLE, "b", ("a", "b"), 3, 5),  # three laps: more calls than the ledger
        (Signal.REPEATED_ASSISTANT_RESPONSE, None, (), 1, 5),  # back to the only reply
        (Signal.REPEATED_TOOL_CALL, "b", ("b",), 9, 5),  # longer than the ledger: all of it
    ],
)
def test_the_ledger_counts_back_to_the_loops_first_unit(
    signal: Signal, tool: str | None, tools: tuple[str, ...], count: int, calls: int
) -> None:
    """The loop begins at the answer that made the first unit the verdict counted."""
    ledger = _ledger(
        (1, (), True),
        (2, ("a",), False),
        (4, ("b",), False),
        (8, ("a",), False),
        (16, ("b",), False),
    )
    cost = ledger.cost_of(signal, tool, tools, count)
    assert cost is not None
    assert cost.calls == calls
    assert cost.tokens == sum([1, 2, 4, 8, 16][-calls:])


def test_the_ledger_costs_no_soft_signal() -> None:
    """A warning is no loop: no cost."""
    assert _ledger((5, ("a",), False)).cost_of(Signal.TURN_COUNT, None, (), 13) is None
    assert CostLedger().cost_of(Signal.REPEATED_TOOL_CALL, "a", ("a",), 3) is None


@pytest.mark.parametrize(
    "value",
    [None, [], {"calls": 0}, {"calls": 2, "tokens": -1}, {"calls": True}, {"calls": "3"}],
)
def test_a_cost_read_back_from_bad_data_is_none(value: object) -> None:
    """``LoopCost.from_json`` takes only what ``to_json`` writes."""
    assert LoopCost.from_json(value) is None


def test_a_cost_reads_back_what_it_wrote() -> None:
    """``to_json`` and ``from_json`` round-trip."""
    cost = LoopCost(7, 18_400, 18_000, 400, 2)
    assert LoopCost.from_json(cost.to_json()) == cost
    assert cost_text(cost) == (
        "This loop had spent at least 18,400 tokens over 7 model calls (2 reported no usage)."
    )


def test_usage_is_read_from_the_providers_metadata_too() -> None:
    """Without ``usage_metadata``, OpenAI's ``token_usage`` counts."""
    from langchain_loop_guard._integrations._cost import message_usage

    message = AIMessage(
        content="", response_metadata={"token_usage": {"prompt_tokens": 10, "completion_tokens": 2}}
    )
    assert message_usage(message) == Usage(10, 2, 12)
    assert message_usage(AIMessage(content="")) is None


def test_a_cleared_ledger_costs_nothing() -> None:
    """A run that starts afresh forgets its answers."""
    ledger = _ledger((5, ("a",), False))
    ledger.clear()
    assert ledger.total() is None


def test_the_cost_in_a_table_cell() -> None:
    """Tokens and calls, calls only without usage, a dash for nothing counted."""
    assert cost_cell(LoopCost(2, 1234)) == "1,234 tokens, 2 calls"
    assert cost_cell(LoopCost(1, unmetered=1)) == "1 call, no token usage"
    assert cost_cell(None) == "-"


@pytest.mark.parametrize(
    ("value", "usage"),
    [
        ({"input_tokens": 3, "output_tokens": 4}, Usage(3, 4, 7)),
        ({"total_tokens": 9.0}, Usage(0, 0, 9)),
        ({"total_tokens": -1}, None),
        ({"cached": 3}, None),
        ("12 tokens", None),
    ],
)
def test_usage_is_read_from_counts_only(value: object, usage: Usage | None) -> None:
    """Whole, non-negative token counts; anything else is no usage."""
    assert usage_of(value) == usage


def test_only_a_stop_not_yet_costed_gets_a_cost() -> None:
    """A warning, a costed stop and a run with no answer are left as they are."""
    ledger = _ledger((5, ("a",), False))
    warning = Verdict(action="warn", signal=Signal.TURN_COUNT, message="w", count=13)
    assert with_cost(warning, ledger) is warning
    costed = Verdict(action="block", signal=Signal.REPEATED_TOOL_CALL, tool="a", count=3)
    costed = with_cost(costed, ledger)
    assert costed.cost == LoopCost(1, 5, 5)
    assert with_cost(costed, ledger) is costed
    unseen = Verdict(action="block", signal=Signal.REPEATED_TOOL_CALL, tool="a", count=3)
    assert with_cost(unseen, CostLedger()) is unseen


@pytest.mark.parametrize("kind", KINDS)
def test_a_graph_guards_inspect_of_a_state_shows_the_cost(kind: Kind) -> None:
    """``inspect(graph state)``: what the thread's model answers spent, and its loop's cost."""
    tools = [scripted_tool("read_file", "the notes"), scripted_tool("search", "no hits")]
    model = ScriptedChatModel(script=[*_WARMUP, *_LOOP, "done"], usage=usage_of_call)
    agent = harness(kind, model, tools, on_stop="end")
    agent.invoke()
    inspection = agent.guard.inspect(agent.state())
    assert inspection is not None
    assert inspection.spent == LoopCost(5, _spent(range(1, 6)), 15000, 35)
    assert inspection.loop_cost == LoopCost(3, _spent(range(3, 6)), 12000, 21)
