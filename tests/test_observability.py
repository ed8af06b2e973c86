"""Stops and observe-mode reports are visible where LangChain users look, from every
integration: on the traced LangSmith run (what the real SDK sends, recorded by a loopback
stand-in), in ``astream_events`` and ``stream_mode="custom"``, in an ``on_stop="end"`` result's
state, and in one log line per stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from typing import Any, Literal

import pytest
from guard_scenarios import AGAIN, FINE, harness, model_of
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langsmith.run_trees import RunTree
from langsmith_service import LangSmithService, forget_environment

from langchain_loop_guard import (
    CallbackStopFilter,
    LoopDetected,
    LoopGuardCallbackHandler,
    LoopGuardConfig,
)
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

Integration = Literal["handler", "middleware", "node"]
INTEGRATIONS: tuple[Integration, ...] = ("handler", "middleware", "node")
Mode = Literal["on", "observe"]
RUN_ID = "0191e3f4-0000-7000-8000-00000000abcd"


def _reader() -> list[Any]:
    return [scripted_tool("read_file", "contents")]


def _repeat(n: int) -> Any:
    return call("read_file", {"path": "a.txt"})


def _finite() -> ScriptedChatModel:
    """Five identical calls, then an answer: a loop that ends on its own in observe mode."""
    return ScriptedChatModel(script=[_repeat(n) for n in range(5)] + ["done"])


def _run(integration: Integration, mode: Mode, thread: str, **options: Any) -> dict[str, Any]:
    """One looping agent of ``integration`` in ``mode``; the result (or ``{"raised": exc}``)."""
    config = LoopGuardConfig(mode=mode)
    run_config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    if integration == "handler":
        agent = create_agent(_finite(), _reader())
        run_config["callbacks"] = [LoopGuardCallbackHandler(config)]
        try:
            return dict(agent.invoke({"messages": [("user", "go")]}, run_config))
        except LoopDetected as exc:
            return {"raised": exc}
    agent_of = harness(integration, _finite(), _reader(), config={"mode": mode}, **options)
    try:
        return dict(agent_of.graph.invoke({"messages": [("user", "go")]}, run_config))
    except LoopDetected as exc:
        return {"raised": exc}


def _run_failing(integration: Integration, thread: str) -> None:
    """Five different calls that fail the same way: stopped before the next model call."""
    from langchain_core.tools import ToolException

    model = ScriptedChatModel(script=[call("deploy", {"n": n}) for n in range(5)] + ["done"])
    tools = [scripted_tool("deploy", ToolException("disk full"))]
    run_config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    if integration == "handler":
        run_config["callbacks"] = [LoopGuardCallbackHandler(LoopGuardConfig())]
        graph = create_agent(model, tools)
    else:
        graph = harness(integration, model, tools, on_stop="end").graph
    with contextlib.suppress(LoopDetected):
        graph.invoke({"messages": [("user", "go")]}, run_config)


# --- LangSmith: what the SDK sends ----------------------------------------------------------------


@pytest.fixture(scope="module")
def traced() -> dict[str, dict[str, Any]]:
    """Every integration in both modes, traced by the real SDK into the stand-in; runs by id."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        service = LangSmithService(monkeypatch)
        try:
            for integration in INTEGRATIONS:
                for mode in ("on", "observe"):
                    _run(integration, mode, f"{integration}-{mode}", on_stop="end")
            for integration in INTEGRATIONS:
                _run_failing(integration, f"{integration}-error")
        finally:
            service.close()
    forget_environment()
    return service.runs()


def _runs_of(traced: dict[str, dict[str, Any]], thread: str) -> list[dict[str, Any]]:
    return [
        run
        for run in traced.values()
        if ((run.get("extra") or {}).get("metadata") or {}).get("thread_id") == thread
    ]


def _guard_metadata(run: dict[str, Any]) -> dict[str, Any]:
    metadata = (run.get("extra") or {}).get("metadata") or {}
    return {k: v for k, v in metadata.items() if k.startswith("loop_guard.")}


@pytest.mark.parametrize("mode", ["on", "observe"])
@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_the_top_level_run_carries_the_stop_in_metadata_and_tags(
    traced: dict[str, dict[str, Any]], integration: Integration, mode: Mode
) -> None:
    """A trace filter on metadata ``loop_guard.signal`` or tag ``loop_guard:stop`` /
    ``loop_guard:observe`` finds the run, stopped or (observe mode) would-be stopped."""
    runs = _runs_of(traced, f"{integration}-{mode}")
    (root,) = [run for run in runs if run.get("parent_run_id") is None]
    action = "observe" if mode == "observe" else "block"
    assert _guard_metadata(root) == {
        "loop_guard.action": action,
        "loop_guard.signal": "repeated_tool_call",
        "loop_guard.tool": "read_file",
        "loop_guard.count": 3,
        "loop_guard.threshold": 3,
        "loop_guard.integration": integration,
        "loop_guard.position": {
            "handler": "on_tool_start",
            "middleware": "after_model",
            "node": "after_model",
        }[integration],
    }
    tag = "loop_guard:observe" if mode == "observe" else "loop_guard:stop"
    assert {tag, "loop_guard:repeated_tool_call"} <= set(root["tags"])


@pytest.mark.parametrize("mode", ["on", "observe"])
@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_the_step_where_it_happened_carries_an_event(
    traced: dict[str, dict[str, Any]], integration: Integration, mode: Mode
) -> None:
    """The run of the step that decided (the tools step; for the middleware, the model step,
    whose ``wrap_model_call`` decides the answer since it has no after-model node; the
    guard's node) has the event, with names and counts only, and the same metadata."""
    runs = _runs_of(traced, f"{integration}-{mode}")
    steps = [
        run
        for run in runs
        if run.get("parent_run_id") is not None
        and any(event.get("name") == "loop_guard" for event in run.get("events") or ())
    ]
    (step,) = steps
    assert (
        step["name"]
        == {
            "handler": "tools",
            "middleware": "model",
            "node": "loop_guard",
        }[integration]
    )
    (event,) = [e for e in step["events"] if e["name"] == "loop_guard"]
    kwargs = event["kwargs"]
    assert (kwargs["action"], kwargs["signal"], kwargs["tool"], kwargs["count"]) == (
        "observe" if mode == "observe" else "block",
        "repeated_tool_call",
        "read_file",
        3,
    )
    assert kwargs["thread_id"] == f"{integration}-{mode}"
    assert kwargs["run_id"] == step["trace_id"]  # the top-level run's id
    assert "contents" not in json.dumps(event)  # no tool output
    assert _guard_metadata(step)["loop_guard.signal"] == "repeated_tool_call"


def test_untraced_runs_are_untouched(traced: dict[str, dict[str, Any]]) -> None:
    """Only the runs of a step that reported carry the guard's tags."""
    tagged = [run for run in traced.values() if "loop_guard:stop" in (run.get("tags") or ())]
    assert len(tagged) == 12  # 3 integrations x 2 loops x (top-level run + the step)


@pytest.mark.parametrize(
    ("integration", "step", "position"),
    [
        ("handler", "tools", "on_tool_end"),  # the handler stops at the failing result
        ("middleware", "model", "before_model"),
        ("node", "loop_guard", "before_model"),
    ],
)
def test_a_repeated_error_marks_the_step_that_decided(
    traced: dict[str, dict[str, Any]], integration: Integration, step: str, position: str
) -> None:
    """A repeated error: the step that decided carries the event (the failing tool's step for
    the handler, the model's step before the model call for the middleware, the guard's node),
    and the top-level run the metadata."""
    runs = _runs_of(traced, f"{integration}-error")
    (root,) = [run for run in runs if run.get("parent_run_id") is None]
    assert _guard_metadata(root)["loop_guard.signal"] == "repeated_tool_error"
    assert _guard_metadata(root)["loop_guard.position"] == position
    (marked,) = [
        run for run in runs if any(e.get("name") == "loop_guard" for e in run.get("events") or ())
    ]
    assert marked["name"] == step


def test_a_warning_does_not_hide_a_stop_in_the_metadata() -> None:
    """A run's metadata keeps its most serious verdict; tags accumulate."""
    from langchain_loop_guard._integrations._publish import _mark

    run = RunTree(name="agent", run_type="chain")
    stop = {"type": "loop_guard", "action": "block", "signal": "tool_cycle", "count": 3}
    warn = {"type": "loop_guard", "action": "warn", "signal": "turn_count", "count": 13}
    _mark((run, None), stop)
    _mark((run, None), warn)
    assert run.extra["metadata"]["loop_guard.signal"] == "tool_cycle"
    assert {"loop_guard:stop", "loop_guard:warn", "loop_guard:turn_count"} <= set(run.tags)
    assert [e["kwargs"]["signal"] for e in run.events if e["name"] == "loop_guard"] == [
        "tool_cycle",
        "turn_count",
    ]


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_tracing_trouble_never_breaks_the_agent(
    integration: Integration,
    service: LangSmithService,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tracer that fails when the guard marks its run: the stop still happens, the failure
    is logged once, and the agent is not broken by it."""

    def broken(self: RunTree, metadata: dict[str, Any]) -> None:
        msg = "tracing backend down"
        raise ConnectionError(msg)

    monkeypatch.setattr(RunTree, "add_metadata", broken)
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        observed = _run(integration, "observe", "down", on_stop="end")
        stopped = _run(integration, "on", "down-on", on_stop="end")
    assert observed["messages"][-1].text == "done"  # observe mode: the run went on
    if integration == "handler":
        assert isinstance(stopped["raised"], LoopDetected)
    else:
        assert stopped["loop_guard_stop"]["signal"] == "repeated_tool_call"
    failures = [r for r in caplog.records if "internal error in publishing" in r.getMessage()]
    assert len(failures) == 2  # once per guard object (one guard per run here)
    assert "tracing backend down" not in caplog.text


# --- streams --------------------------------------------------------------------------------------


def _stream_custom(integration: Integration, mode: Mode) -> list[Any]:
    config = LoopGuardConfig(mode=mode)
    if integration == "handler":
        graph = create_agent(_finite(), _reader())
        run_config: dict[str, Any] = {"callbacks": [LoopGuardCallbackHandler(config)]}
    else:
        agent = harness(integration, _finite(), _reader(), config={"mode": mode})
        graph, run_config = agent.graph, {"configurable": {"thread_id": "stream"}}
    chunks: list[Any] = []
    try:
        for chunk in graph.stream({"messages": [("user", "go")]}, run_config, stream_mode="custom"):
            chunks.append(chunk)
    except LoopDetected:
        pass
    return chunks


@pytest.mark.parametrize("mode", ["on", "observe"])
@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_every_integration_writes_to_the_custom_stream(
    integration: Integration, mode: Mode
) -> None:
    """``stream_mode="custom"`` yields one ``{"type": "loop_guard", ...}`` item per report."""
    chunks = _stream_custom(integration, mode)
    (chunk,) = [c for c in chunks if isinstance(c, dict) and c.get("type") == "loop_guard"]
    assert (chunk["action"], chunk["signal"], chunk["tool"], chunk["integration"]) == (
        "observe" if mode == "observe" else "block",
        "repeated_tool_call",
        "read_file",
        integration,
    )
    assert "contents" not in json.dumps(chunk)


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_graph_guards_send_a_custom_event_to_astream_events(integration: Integration) -> None:
    """``astream_events(v2)`` shows the report as an ``on_custom_event`` named ``loop_guard``."""
    agent = harness(integration, _finite(), _reader(), config={"mode": "observe"})

    async def events() -> list[dict[str, Any]]:
        return [
            dict(event)
            async for event in agent.graph.astream_events(
                {"messages": [("user", "go")]},
                {"configurable": {"thread_id": "events"}},
                version="v2",
            )
            if event["event"] == "on_custom_event"
        ]

    (event,) = asyncio.run(events())
    assert event["name"] == "loop_guard"
    assert (event["data"]["action"], event["data"]["signal"]) == ("observe", "repeated_tool_call")


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_graph_guards_reach_other_handlers_on_custom_event(integration: Integration) -> None:
    """Any callback handler's ``on_custom_event`` sees the stop, once."""
    seen: list[tuple[str, Any]] = []

    class Spy(BaseCallbackHandler):
        def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            seen.append((name, data["action"]))

    agent = harness(integration, model_of(_repeat), _reader(), on_stop="end")
    agent.graph.invoke(
        {"messages": [("user", "go")]},
        {"configurable": {"thread_id": "spy"}, "callbacks": [Spy()]},
    )
    assert seen == [("loop_guard", "block")]


# --- the stop in an "end" result's state ----------------------------------------------------------


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_an_ended_run_shows_its_stop_under_loop_guard_stop(integration: Integration) -> None:
    """``on_stop="end"``: the result has ``loop_guard_stop`` (signal, tool, counts, message),
    plain JSON; the next message on the thread clears it and the thread goes on."""
    agent = harness(integration, model_of(_repeat), _reader(), on_stop="end")
    result = agent.invoke()
    stop = result["loop_guard_stop"]
    assert stop == {
        "signal": "repeated_tool_call",
        "action": "block",
        "tool": "read_file",
        "tools": ["read_file"],
        "count": 3,
        "threshold": 3,
        "message": result["messages"][-1].text,
        "remedy": ["tool_threshold_overrides"],  # what would have let it go on (SPEC §13 C4)
        # the three reads' model calls; the scripted model reports no token usage
        "cost": {"calls": 3, "tokens": 0, "input_tokens": 0, "output_tokens": 0, "unmetered": 3},
    }
    assert json.loads(json.dumps(stop)) == stop
    assert agent.state()["loop_guard_stop"] == stop  # checkpointed
    again = agent.invoke(text=AGAIN)
    assert again["messages"][-1].text == FINE
    assert again["loop_guard_stop"] is None


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_a_run_that_was_not_stopped_has_no_stop_in_its_state(integration: Integration) -> None:
    """Observe mode and productive runs never write ``loop_guard_stop``."""
    agent = harness(integration, _finite(), _reader(), config={"mode": "observe"})
    result = agent.invoke()
    assert result.get("loop_guard_stop") is None


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_an_interrupt_answered_end_shows_its_stop(integration: Integration) -> None:
    """``on_stop="interrupt"`` resumed with ``"end"`` ends like ``"end"``, stop shown."""
    from langgraph.types import Command

    agent = harness(integration, model_of(_repeat), _reader(), on_stop="interrupt")
    agent.invoke()
    result = agent.graph.invoke(Command(resume="end"), agent.config)
    assert result["loop_guard_stop"]["signal"] == "repeated_tool_call"


# --- logging --------------------------------------------------------------------------------------


def test_a_handler_stop_is_one_info_line_with_run_and_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One INFO line for the stop (nothing at WARNING: a plain script prints nothing), naming
    the top-level run and the thread; LangChain's own "Error in
    LoopGuardCallbackHandler.on_tool_start callback" line is not logged."""
    model = ScriptedChatModel(script=[_repeat(n) for n in range(5)] + ["done"])
    agent = create_agent(model, _reader())
    handler = LoopGuardCallbackHandler(LoopGuardConfig())
    with caplog.at_level(logging.DEBUG), pytest.raises(LoopDetected) as info:
        agent.invoke(
            {"messages": [("user", "go")]},
            {"callbacks": [handler], "configurable": {"thread_id": "T-7"}},
        )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    (line,) = _stop_lines(caplog)
    assert line.levelno == logging.INFO
    assert f"run={info.value.run_id}" in line.getMessage()
    assert "thread=T-7" in line.getMessage()
    assert (line.loop_guard_run_id, line.loop_guard_thread_id) == (info.value.run_id, "T-7")  # type: ignore[attr-defined]
    assert "Error in LoopGuardCallbackHandler" not in caplog.text


def _stop_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The guard's log lines of stops."""
    return [
        r
        for r in caplog.records
        if r.name == "langchain_loop_guard"
        and getattr(r, "loop_guard_action", None) in ("block", "abort")
    ]


def test_concurrent_runs_without_a_thread_are_told_apart_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without a thread id, each stop line names its own run id (not ``run=-``)."""
    handler = LoopGuardCallbackHandler(LoopGuardConfig())
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        for _ in range(2):
            model = ScriptedChatModel(script=[_repeat(n) for n in range(5)] + ["done"])
            with pytest.raises(LoopDetected):
                create_agent(model, _reader()).invoke(
                    {"messages": [("user", "go")]}, {"callbacks": [handler]}
                )
    runs = {r.loop_guard_run_id for r in caplog.records}  # type: ignore[attr-defined]
    assert len(runs) == 2
    assert "-" not in runs
    assert all("thread=-" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_graph_guard_stop_is_one_info_line_with_run_and_thread(
    integration: Integration, caplog: pytest.LogCaptureFixture
) -> None:
    """The graph guards log a stop once at INFO with the run id the caller gave."""
    agent = harness(integration, model_of(_repeat), _reader(), on_stop="end")
    with caplog.at_level(logging.DEBUG, logger="langchain_loop_guard"):
        agent.graph.invoke(
            {"messages": [("user", "go")]},
            {"configurable": {"thread_id": "T-9"}, "run_id": RUN_ID},
        )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    (line,) = _stop_lines(caplog)
    assert f"run={RUN_ID} thread=T-9" in line.getMessage()


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_a_nudge_is_info_not_a_logged_block(
    integration: Integration, caplog: pytest.LogCaptureFixture
) -> None:
    """A nudge (the run goes on) logs at INFO as a nudge; the later stop once, at INFO too;
    listeners see the stop, not the nudge."""
    agent = harness(integration, model_of(_repeat), _reader(), nudges=1, on_stop="end")
    heard: list[str] = []
    agent.guard.add_verdict_listener(lambda run_id, verdict: heard.append(verdict.action))
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        agent.invoke()
    levels = [(r.levelno, r.loop_guard_action) for r in caplog.records]  # type: ignore[attr-defined]
    assert levels == [(logging.INFO, "nudge"), (logging.INFO, "block")]
    assert heard == ["block"]
    assert (agent.guard.status().stops, agent.guard.status().observed) == (1, 0)


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_expected_behaviour_logs_nothing_at_warning(
    integration: Integration, caplog: pytest.LogCaptureFixture
) -> None:
    """Observe-mode reports and soft warnings are INFO: no red lines in a notebook."""
    with caplog.at_level(logging.INFO):
        _run(integration, "observe", "quiet", on_stop="end")
    assert caplog.records
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_stop_filter_keeps_every_other_line() -> None:
    """The filter drops only a guard handler's LoopDetected line, nothing else."""
    stop_filter = CallbackStopFilter()

    def record(*args: object, msg: str = "Error in %s.%s callback: %s") -> logging.LogRecord:
        return logging.LogRecord(
            "langchain_core.callbacks.manager", logging.WARNING, __file__, 1, msg, args, None
        )

    guard_stop = ("LoopGuardCallbackHandler", "on_tool_start", "LoopDetected(signal='x')")
    assert not stop_filter.filter(record(*guard_stop))
    assert stop_filter.filter(record("OtherHandler", "on_tool_start", "LoopDetected(x)"))
    assert stop_filter.filter(record("LoopGuardCallbackHandler", "on_tool_end", "KeyError('k')"))
    assert stop_filter.filter(record(*guard_stop, msg="NotImplementedError in %s.%s callback: %s"))
    assert stop_filter.filter(record("only", "two"))
    stop_filter.add_handler_name("MyGuard")
    assert not stop_filter.filter(record("MyGuard", "on_llm_end", "LoopDetected(signal='y')"))


def test_another_handlers_callback_error_is_still_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """LangChain's line for another handler's failure passes the installed filter."""

    class Broken(BaseCallbackHandler):
        def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
            msg = "broken handler"
            raise ValueError(msg)

    LoopGuardCallbackHandler(LoopGuardConfig())  # installs the filter
    model = ScriptedChatModel(script=[_repeat(0), "done"])
    with caplog.at_level(logging.WARNING):
        create_agent(model, _reader()).invoke(
            {"messages": [("user", "go")]}, {"callbacks": [Broken()]}
        )
    assert "Error in Broken.on_tool_start callback" in caplog.text


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_an_interrupted_stop_is_reported_once_across_the_resume(
    integration: Integration, caplog: pytest.LogCaptureFixture
) -> None:
    """LangGraph executes the interrupted pass again on resume: the stop is still one line,
    one listener call and one custom event."""
    from langgraph.types import Command

    agent = harness(integration, model_of(_repeat), _reader(), on_stop="interrupt")
    heard: list[str] = []
    agent.guard.add_verdict_listener(lambda run_id, verdict: heard.append(verdict.action))
    items: list[Any] = []
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        for payload in ({"messages": [("user", "go")]}, Command(resume="end")):
            items += agent.graph.stream(payload, agent.config, stream_mode="custom")
    assert len(caplog.records) == 1
    assert heard == ["block"]
    assert [item["action"] for item in items] == ["block"]
    assert agent.state()["loop_guard_stop"]["signal"] == "repeated_tool_call"


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_async_runs_write_to_the_custom_stream(integration: Integration) -> None:
    """``astream(stream_mode="custom")`` gets the report from every integration too."""
    config = LoopGuardConfig(mode="observe")
    if integration == "handler":
        graph = create_agent(_finite(), _reader())
        run_config: dict[str, Any] = {"callbacks": [LoopGuardCallbackHandler(config)]}
    else:
        agent = harness(integration, _finite(), _reader(), config={"mode": "observe"})
        graph, run_config = agent.graph, {"configurable": {"thread_id": "async"}}

    async def items() -> list[Any]:
        payload = {"messages": [("user", "go")]}
        return [item async for item in graph.astream(payload, run_config, stream_mode="custom")]

    reports = [i for i in asyncio.run(items()) if isinstance(i, dict) and i.get("type")]
    assert [(i["action"], i["signal"]) for i in reports] == [("observe", "repeated_tool_call")]


def test_ids_from_the_config_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    """A thread id with a newline and escapes is logged (and published) without them."""
    agent = harness("middleware", _finite(), _reader(), on_stop="end")
    evil = "t1\nloop-guard block: run=forged\x1b[2J"
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        items = list(
            agent.graph.stream(
                {"messages": [("user", "go")]},
                {"configurable": {"thread_id": evil}},
                stream_mode="custom",
            )
        )
    (line,) = caplog.records
    assert "\n" not in line.getMessage()
    assert "\x1b" not in line.getMessage()
    assert "\n" not in items[0]["thread_id"]


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_a_raised_stop_is_also_in_the_saved_state(integration: Integration) -> None:
    """``on_stop="raise"``: the exception says how, and so does the saved thread."""
    agent = harness(integration, model_of(_repeat), _reader())
    with pytest.raises(LoopDetected) as info:
        agent.invoke()
    stop = agent.state()["loop_guard_stop"]
    assert (stop["signal"], stop["tool"], stop["count"]) == (
        info.value.signal.value,
        info.value.tool,
        info.value.count,
    )


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_graph_guard_runs_without_a_run_id_get_one_of_their_own(
    integration: Integration, caplog: pytest.LogCaptureFixture
) -> None:
    """Untraced and without a ``run_id`` in the config, each run of a thread still has its own
    id in the log (kept in the guard's state), not ``run=-``."""
    agent = harness(integration, model_of(_repeat), _reader(), on_stop="end")
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        agent.invoke()
        agent.invoke(text=AGAIN)  # answered: the next run
        agent.graph.invoke({"messages": [("user", "go on")]}, agent.config)  # loops again
    first, second = (r.loop_guard_run_id for r in caplog.records)  # type: ignore[attr-defined]
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert first != second
