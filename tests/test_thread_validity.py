"""Every stop leaves a thread that can go on: the next human message reaches the model as a
history a provider accepts, for each integration, each ``on_stop`` and each checkpointer."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from conftest import postgres_uri
from guard_scenarios import node_graph
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard import (
    LoopDetected,
    LoopGuardCallbackHandler,
    LoopGuardConfig,
    LoopGuardMiddleware,
    LoopGuardNode,
    Signal,
    arepair_thread,
    guard_kind,
    repair_thread,
)
from langchain_loop_guard._core._messages import not_executed
from langchain_loop_guard.testing import (
    InvalidHistoryError,
    ScriptedChatModel,
    assert_valid_history,
    call,
    calls,
    history_problems,
    scripted_tool,
)

Integration = Literal["middleware", "node", "handler"]
FINE = "Fine."
LATER = "Something else, please."

# (integration, on_stop): the callback handler only raises
CASES: list[tuple[Integration, str]] = [
    *(
        (kind, on_stop)
        for kind in ("middleware", "node")
        for on_stop in ("raise", "end", "interrupt")
    ),
    ("handler", "raise"),
]


def _humans(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) and m.name != "loop_guard" for m in messages)


def _looping(messages: Sequence[BaseMessage]) -> AIMessage | str:
    """Reads the same file until a second human message arrives, then answers."""
    return FINE if _humans(messages) >= 2 else call("read_file", {"path": "a.txt"})


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """InMemorySaver, SqliteSaver on a file, PostgresSaver on the test server."""
    if request.param == "memory":
        yield InMemorySaver()
    elif request.param == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        connection = sqlite3.connect(tmp_path / "threads.sqlite", check_same_thread=False)
        try:
            yield SqliteSaver(connection)
        finally:
            connection.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(postgres_uri()) as postgres:
            postgres.setup()
            yield postgres


def _agent(
    integration: Integration,
    on_stop: str,
    saver: BaseCheckpointSaver[Any],
    model: ScriptedChatModel | None = None,
    tools: list[Any] | None = None,
) -> tuple[Any, ScriptedChatModel, dict[str, Any]]:
    """The looping agent of ``integration``, its model and a fresh thread's configuration."""
    model = model or ScriptedChatModel(script=[_looping], then="repeat")
    tools = tools or [scripted_tool("read_file", "contents")]
    config: dict[str, Any] = {"configurable": {"thread_id": f"validity-{uuid.uuid4().hex}"}}
    loop_config = LoopGuardConfig(nudges=0)
    if integration == "middleware":
        guard = LoopGuardMiddleware(loop_config, on_stop=on_stop)  # type: ignore[arg-type]
        graph = create_agent(model, tools, middleware=[guard], checkpointer=saver)
    elif integration == "node":
        node = LoopGuardNode(loop_config, on_stop=on_stop)  # type: ignore[arg-type]
        graph = node_graph(model, tools, node, checkpointer=saver)
    else:
        graph = create_agent(model, tools, checkpointer=saver)
        config["callbacks"] = [LoopGuardCallbackHandler(loop_config)]
    return graph, model, config


def _stop(graph: Any, integration: Integration, on_stop: str, config: dict[str, Any]) -> None:
    """Run the loop until the guard stops it, as each ``on_stop`` does."""
    start = {"messages": [HumanMessage("Read a.txt.")]}
    if on_stop == "raise":
        with pytest.raises(LoopDetected) as caught:
            graph.invoke(start, config)
        assert caught.value.signal is Signal.REPEATED_TOOL_CALL
        if integration == "handler":
            caught.value.repair(graph, config)  # the one line the README gives
    else:
        result = graph.invoke(start, config)
        if on_stop == "end":
            assert guard_kind(result["messages"][-1]) == "stop"
        else:
            assert result["__interrupt__"][0].value["type"] == "loop_guard"


@pytest.mark.parametrize(("integration", "on_stop"), CASES)
def test_next_message_after_a_stop_reaches_the_model_as_a_valid_history(
    integration: Integration, on_stop: str, saver: BaseCheckpointSaver[Any]
) -> None:
    """After any stop the next human message gets an answer, from a provider-valid history."""
    graph, model, config = _agent(integration, on_stop, saver)
    _stop(graph, integration, on_stop, config)
    turns = model.turns
    result = graph.invoke({"messages": [HumanMessage(LATER)]}, config)
    assert model.turns == turns + 1
    assert_valid_history(model.seen[-1])
    assert model.seen[-1][-1].content == LATER
    assert result["messages"][-1].content == FINE
    assert_valid_history(graph.get_state(config).values["messages"])


@pytest.mark.parametrize(("integration", "on_stop"), [c for c in CASES if c[1] != "interrupt"])
def test_saved_thread_is_valid_right_after_a_stop(
    integration: Integration, on_stop: str, saver: BaseCheckpointSaver[Any]
) -> None:
    """What the checkpointer holds after a stop (and the handler's repair line) is valid."""
    graph, _, config = _agent(integration, on_stop, saver)
    _stop(graph, integration, on_stop, config)
    messages = graph.get_state(config).values["messages"]
    assert_valid_history(messages)
    answers = [m for m in messages if guard_kind(m) == "not_executed"]
    assert answers
    assert all(isinstance(m, ToolMessage) and m.status == "error" for m in answers)
    assert answers[-1].content == not_executed()


def test_handler_stop_without_the_repair_line_leaves_an_unanswered_call() -> None:
    """The handler cannot write the thread: without the repair, providers would reject it."""
    graph, _, config = _agent("handler", "raise", InMemorySaver())
    with pytest.raises(LoopDetected):
        graph.invoke({"messages": [HumanMessage("Read a.txt.")]}, config)
    messages = graph.get_state(config).values["messages"]
    assert history_problems(messages)
    assert repair_thread(graph, config) == 1
    assert repair_thread(graph, config) == 0  # a valid thread is left as it is
    assert_valid_history(graph.get_state(config).values["messages"])


def _drive(graph: Any, how: str, start: dict[str, Any], config: dict[str, Any]) -> None:
    """Run ``graph`` to its end through the entry point ``how``."""

    async def consume() -> None:
        if how == "ainvoke":
            await graph.ainvoke(start, config)
        else:
            async for _ in graph.astream(start, config):
                pass

    if how == "invoke":
        graph.invoke(start, config)
    elif how == "stream":
        list(graph.stream(start, config))
    else:
        asyncio.run(consume())


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke", "astream"])
@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_raise_keeps_the_exception_and_saves_the_answers_under_every_entry_point(
    integration: Integration, how: str
) -> None:
    """invoke/stream/ainvoke/astream: the caller gets the stop, the thread its answers."""
    graph, _, config = _agent(integration, "raise", InMemorySaver())
    start = {"messages": [HumanMessage("Read a.txt.")]}

    with pytest.raises(LoopDetected) as caught:
        _drive(graph, how, start, config)
    stop = caught.value
    assert (stop.signal, stop.tool, stop.count) == (Signal.REPEATED_TOOL_CALL, "read_file", 3)
    assert stop.verdict is not None
    assert stop.verdict.stops
    assert stop.run_id == config["configurable"]["thread_id"]
    assert_valid_history(graph.get_state(config).values["messages"])


def test_history_problems_names_an_unanswered_call_before_the_next_message() -> None:
    """The check reports an AI call left open before a human message, and at the end."""
    asked = call("read_file", {"path": "a.txt"}, id="c1")
    assert history_problems([HumanMessage("go"), asked]) == [
        "tool calls 'c1' are not answered at the end of the history (the next message would "
        "be rejected)"
    ]
    problems = history_problems([HumanMessage("go"), asked, HumanMessage("and?")])
    assert problems == ["tool calls 'c1' are not answered before message 2 (HumanMessage)"]
    with pytest.raises(InvalidHistoryError, match="c1"):
        assert_valid_history([asked, HumanMessage("and?")])


def test_history_problems_names_an_answer_to_no_call() -> None:
    """A ToolMessage that answers no call of the answer before it is reported."""
    stray = ToolMessage("x", tool_call_id="c9")
    assert history_problems([HumanMessage("go"), stray]) == [
        "message 1 answers 'c9', which the model answer before it did not call"
    ]
    two = AIMessage(
        "",
        tool_calls=[
            {"name": "a", "args": {}, "id": "c1", "type": "tool_call"},
            {"name": "b", "args": {}, "id": "c2", "type": "tool_call"},
        ],
    )
    both = [two, ToolMessage("x", tool_call_id="c2"), ToolMessage("y", tool_call_id="c1")]
    assert history_problems(both) == []  # any order, as long as nothing comes between
    assert history_problems([*both, ToolMessage("z", tool_call_id="c1")]) == [
        "message 3 answers 'c1' twice"
    ]


# --- identical parallel calls -------------------------------------------------------------------


def _parallel(messages: Sequence[BaseMessage]) -> AIMessage | str:
    """Asks for the same read three times in one answer, then answers the next message."""
    if _humans(messages) >= 2:
        return FINE
    return calls(*[("read_file", {"path": "a.txt"})] * 3)


@pytest.mark.parametrize("integration", ["middleware", "node", "handler"])
def test_identical_parallel_calls_of_one_answer_all_stay_unrun(integration: Integration) -> None:
    """Three identical calls in one answer (repeat limit 3): the run stops and none runs."""
    read_file = scripted_tool("read_file", "contents")
    model = ScriptedChatModel(script=[_parallel], then="repeat")
    graph, _, config = _agent(integration, "raise", InMemorySaver(), model, [read_file])
    with pytest.raises(LoopDetected) as caught:
        graph.invoke({"messages": [HumanMessage("Read a.txt.")]}, config)
    assert caught.value.signal is Signal.REPEATED_TOOL_CALL
    assert read_file.calls == 0
    if integration == "handler":  # stopped inside the tools step, like any handler stop
        assert caught.value.repair(graph, config) == 3
    assert_valid_history(graph.get_state(config).values["messages"])
    graph.invoke({"messages": [HumanMessage(LATER)]}, config)
    assert_valid_history(model.seen[-1])


@pytest.mark.parametrize("integration", ["middleware", "node", "handler"])
def test_two_identical_parallel_calls_below_the_limit_both_run(integration: Integration) -> None:
    """Two identical calls in one answer (repeat limit 3) are no loop: both run."""
    read_file = scripted_tool("read_file", "contents")
    steps = iter([calls(*[("read_file", {"path": "a.txt"})] * 2), FINE])
    model = ScriptedChatModel(script=[lambda messages: next(steps)], then="repeat")
    graph, _, config = _agent(integration, "raise", InMemorySaver(), model, [read_file])
    result = graph.invoke({"messages": [HumanMessage("Read a.txt.")]}, config)
    assert read_file.calls == 2
    assert result["messages"][-1].content == FINE


# --- a crash, then the graph guards repair the thread ---------------------------------------------


@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_graph_guards_repair_a_thread_a_crash_left_open(integration: Integration) -> None:
    """A tool crash leaves its call unanswered; the next run answers it before the model."""
    crashing = scripted_tool("read_file", RuntimeError("the disk went away"))
    graph, model, config = _agent(integration, "raise", InMemorySaver(), tools=[crashing])
    with pytest.raises(RuntimeError, match="disk went away"):
        graph.invoke({"messages": [HumanMessage("Read a.txt.")]}, config)
    assert history_problems(graph.get_state(config).values["messages"])
    result = graph.invoke({"messages": [HumanMessage(LATER)]}, config)
    assert_valid_history(model.seen[-1])
    assert result["messages"][-1].content == FINE
    repaired = [m for m in model.seen[-1] if guard_kind(m) == "not_executed"]
    assert len(repaired) == 1


@pytest.mark.parametrize("scope", ["run", "thread"])
def test_handler_next_message_after_a_stop_is_answered_in_either_scope(scope: str) -> None:
    """A new human message releases a thread-scoped handler too; no reset() is needed."""
    graph, model, config = _agent("handler", "raise", InMemorySaver())
    handler = LoopGuardCallbackHandler(LoopGuardConfig(nudges=0, scope=scope))
    config["callbacks"] = [handler]
    with pytest.raises(LoopDetected) as caught:
        graph.invoke({"messages": [HumanMessage("Read a.txt.")]}, config)
    caught.value.repair(graph, config)
    result = graph.invoke({"messages": [HumanMessage(LATER)]}, config)
    assert result["messages"][-1].content == FINE
    assert_valid_history(model.seen[-1])
    assert handler.status().active_runs == (1 if scope == "thread" else 0)


def test_arepair_thread_answers_with_an_async_checkpointer() -> None:
    """The async repair writes the same answers through aget_state/aupdate_state."""
    graph, _, config = _agent("handler", "raise", InMemorySaver())
    with pytest.raises(LoopDetected) as caught:
        graph.invoke({"messages": [HumanMessage("Read a.txt.")]}, config)
    assert asyncio.run(caught.value.arepair(graph, config)) == 1
    assert asyncio.run(arepair_thread(graph, config)) == 0
    assert_valid_history(graph.get_state(config).values["messages"])
