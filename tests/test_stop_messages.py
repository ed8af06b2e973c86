"""What a stop writes and says: marked guard messages, the right count after a nudge, the real
reason with structured output, and the hooks that answer, repair and raise."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from guard_scenarios import KINDS, LOOPS, Kind, loop_harness, stop_message
from langchain.agents import create_agent
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from pydantic import BaseModel

from langchain_loop_guard import (
    LoopDetected,
    LoopGuardCallbackHandler,
    LoopGuardConfig,
    LoopGuardMiddleware,
    LoopGuardNode,
    Signal,
    guard_kind,
)
from langchain_loop_guard._core._messages import not_executed, stopped_after_nudge
from langchain_loop_guard._integrations._repair import (
    dangling_calls,
    repair_update,
    repaired_history,
)
from langchain_loop_guard.testing import (
    ScriptedChatModel,
    assert_valid_history,
    call,
    scripted_tool,
)

REPEAT = next(loop for loop in LOOPS if loop.name == "repeat")
RESPONSE = next(loop for loop in LOOPS if loop.name == "repeated_assistant_response")
ERROR = next(loop for loop in LOOPS if loop.name == "repeated_error")


def _asked(*ids: str) -> AIMessage:
    return AIMessage(
        "",
        id=f"ai-{'-'.join(ids)}",
        tool_calls=[{"name": "read_file", "args": {}, "id": i, "type": "tool_call"} for i in ids],
    )


# --- item: the count of a stop after a nudge ------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_stop_after_a_nudge_counts_the_refused_attempt(kind: Kind) -> None:
    """The repeat nudged at its 3rd call stops at its 4th, and the stop says "attempt 4"."""
    agent = loop_harness(kind, REPEAT, config={"nudges": 1}, on_stop="end")
    final = stop_message(agent.invoke()["messages"])
    assert "attempt 4" in final.content
    assert "3 times" not in final.content


@pytest.mark.parametrize("kind", KINDS)
def test_raised_stop_after_a_nudge_carries_the_count(kind: Kind) -> None:
    """With on_stop="raise" the exception's count and message agree: the 4th attempt."""
    agent = loop_harness(kind, REPEAT, config={"nudges": 1})
    with pytest.raises(LoopDetected) as caught:
        agent.invoke()
    assert caught.value.count == 4
    assert "attempt 4" in str(caught.value)


def test_stop_after_a_nudge_is_localized() -> None:
    """The after-nudge stop reads in the configured locale."""
    agent = loop_harness("middleware", REPEAT, config={"nudges": 1, "locale": "ko"}, on_stop="end")
    final = stop_message(agent.invoke()["messages"])
    assert "4번째 시도" in final.content


@pytest.mark.parametrize("kind", KINDS)
def test_stop_of_a_streak_that_counts_on_after_a_nudge_keeps_its_own_message(kind: Kind) -> None:
    """A response streak counts past the nudge: its stop keeps the detector's message."""
    agent = loop_harness(kind, RESPONSE, config={"nudges": 1}, on_stop="end")
    final = stop_message(agent.invoke()["messages"])
    assert "same response 4 times" in final.content


@pytest.mark.parametrize(
    ("tool", "locale", "expected"),
    [
        (
            "read_file",
            "en",
            "`read_file` was called again the same way after a warning (attempt 4)",
        ),
        (None, "en", "the agent repeated the same step again after a warning (attempt 4)"),
        ("read_file", "ko", "`read_file`이(가) 같은 방식으로 다시 호출되었습니다(4번째 시도)"),
        (None, "ko", "같은 단계를 다시 반복했습니다(4번째 시도)"),
    ],
)
def test_after_nudge_stop_names_the_attempt(tool: str | None, locale: str, expected: str) -> None:
    """The after-nudge reason names the tool (or the step) and the attempt, per locale."""
    assert expected in stopped_after_nudge(tool, 4, locale)


# --- item: structured output ----------------------------------------------------------------------


class Answer(BaseModel):
    """The structured answer."""

    text: str


def test_end_with_structured_output_gives_the_real_reason() -> None:
    """A repeated invalid structured answer stops with its reason, not "already stopped"."""
    model = ScriptedChatModel(script=[call("Answer", {"wrong": 1})], then="repeat")
    agent = create_agent(
        model,
        [scripted_tool("read_file", "contents")],
        response_format=ToolStrategy(Answer),
        middleware=[LoopGuardMiddleware(LoopGuardConfig(nudges=0), on_stop="end")],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    result = agent.invoke({"messages": [HumanMessage("Answer, please.")]}, config)
    final = stop_message(result["messages"])
    assert "`Answer` was called 3 times" in final.content
    assert "already stopped" not in final.content
    assert model.turns == 3


# --- item: guard-authored messages are marked -----------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_every_message_the_guard_writes_is_marked(kind: Kind) -> None:
    """Nudges, "not executed" answers and the stop carry their kind; nothing else does."""
    agent = loop_harness(kind, REPEAT, config={"nudges": 1}, on_stop="end")
    messages = agent.invoke()["messages"]
    kinds = [guard_kind(m) for m in messages]
    assert kinds.count("nudge") == 1
    assert kinds.count("not_executed") == 1
    assert kinds[-1] == "stop"
    for message, marked in zip(messages, kinds, strict=True):
        assert (marked is not None) == ("[loop-guard]" in str(message.content) or marked == "stop")


@pytest.mark.parametrize("kind", KINDS)
def test_separate_nudge_is_marked_as_the_guards(kind: Kind) -> None:
    """A nudge no call can carry is a marked HumanMessage a UI can tell from the user's."""
    agent = loop_harness(kind, ERROR, config={"nudges": 1}, on_stop="end")
    messages = agent.invoke()["messages"]
    separate = [m for m in messages if isinstance(m, HumanMessage) and m.name == "loop_guard"]
    assert separate
    assert all(guard_kind(m) == "nudge" for m in separate)
    assert guard_kind(messages[0]) is None  # the user's own message


# --- first tier: repair helpers -------------------------------------------------------------------


def test_dangling_calls_names_each_unanswered_call_and_its_answer() -> None:
    """Calls of an answer no tool message answers before the next message are dangling."""
    messages = [
        HumanMessage("go"),
        _asked("c1", "c2"),
        ToolMessage("x", tool_call_id="c1"),
        HumanMessage("next"),
        _asked("c3"),
    ]
    assert dangling_calls(messages) == [(1, "c2", "read_file"), (4, "c3", "read_file")]


def test_repaired_history_answers_right_after_the_other_answers() -> None:
    """The "not executed" answer goes before the later human message, after the real ones."""
    messages = [HumanMessage("go"), _asked("c1", "c2"), ToolMessage("x", tool_call_id="c1")]
    messages.append(HumanMessage("next"))
    repaired = repaired_history(messages, "en")
    assert repaired is not None
    assert [type(m).__name__ for m in repaired] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    answer = repaired[3]
    assert isinstance(answer, ToolMessage)
    assert (answer.tool_call_id, answer.status, answer.content) == ("c2", "error", not_executed())
    assert guard_kind(answer) == "not_executed"
    assert repaired_history(repaired) is None


def test_repair_update_appends_at_the_end_and_rewrites_in_the_middle() -> None:
    """add_messages cannot insert: answers at the end are appended, others rewrite all."""
    at_end = [HumanMessage("go", id="h1"), _asked("c1")]
    appended = repair_update(at_end)
    assert appended is not None
    assert [getattr(m, "tool_call_id", None) for m in appended] == ["c1"]
    middle = [*at_end, HumanMessage("next", id="h2")]
    rewritten = repair_update(middle)
    assert rewritten is not None
    first = rewritten[0]
    assert isinstance(first, RemoveMessage)
    assert first.id == REMOVE_ALL_MESSAGES
    assert [m.id for m in rewritten[1:] if isinstance(m, HumanMessage)] == ["h1", "h2"]
    assert repair_update([HumanMessage("go")]) is None


# --- first tier: the hooks ------------------------------------------------------------------------


def _model_step(guard: LoopGuardMiddleware, state: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The middleware's part of the model step on ``state`` (the model answers "ok"): the
    messages the step writes, and what the model read."""
    read: list[Any] = []

    def model(request: ModelRequest[Any]) -> ModelResponse[Any]:
        read.extend(request.messages)
        return ModelResponse(result=[AIMessage("ok", id="answer")])

    request = ModelRequest(
        model=ScriptedChatModel(script=["unused"]), messages=list(state["messages"]), state=state
    )
    result = guard.wrap_model_call(request, model)
    if isinstance(result, ExtendedModelResponse):
        result = result.model_response
    return result.result, read


def test_a_run_start_repairs_a_thread_left_with_a_dangling_call() -> None:
    """At a run's start, the model step (no ``before_agent`` node any more) answers an earlier
    run's open call before the model reads the thread: the history is rewritten (the answer
    goes before the new message) and the model reads it repaired."""
    guard = LoopGuardMiddleware(LoopGuardConfig())
    state: dict[str, Any] = {"messages": [HumanMessage("go"), _asked("c1"), HumanMessage("next")]}
    written, read = _model_step(guard, state)
    assert isinstance(written[0], RemoveMessage)
    assert written[0].id == REMOVE_ALL_MESSAGES
    assert [m.content for m in written[1:]] == ["go", "", not_executed("en"), "next", "ok"]
    assert [m.content for m in read] == ["go", "", not_executed("en"), "next"]
    assert_valid_history(read)
    written, read = _model_step(guard, {"messages": [HumanMessage("go")]})
    assert [m.content for m in written] == ["ok"]
    assert [m.content for m in read] == ["go"]


def _halt_state(guard: LoopGuardMiddleware | LoopGuardNode) -> dict[str, Any]:
    """A state whose stop an earlier pass answered and left to the next step to raise."""
    stop = LoopDetected("stopped", signal=Signal.REPEATED_TOOL_CALL, tool="read_file", count=3)
    marker = guard._hold(stop, "ai-c1")
    answer = ToolMessage(not_executed(), tool_call_id="c1", status="error")
    return {"messages": [HumanMessage("go"), _asked("c1"), answer], "loop_guard": {"halt": marker}}


def test_after_agent_raises_the_stop_its_answers_were_saved_for() -> None:
    """after_agent raises the very exception after_model made, once."""
    guard = LoopGuardMiddleware(LoopGuardConfig())
    state = _halt_state(guard)
    with pytest.raises(LoopDetected) as caught:
        guard.after_agent(state, None)  # type: ignore[arg-type]
    assert caught.value.tool == "read_file"


def test_after_agent_rebuilds_a_stop_made_in_another_process() -> None:
    """A marker this process did not make still raises, rebuilt from the state."""
    state = _halt_state(LoopGuardMiddleware(LoopGuardConfig()))
    with pytest.raises(LoopDetected) as caught:
        LoopGuardMiddleware(LoopGuardConfig()).after_agent(state, None)  # type: ignore[arg-type]
    assert (caught.value.signal, caught.value.count) == (Signal.REPEATED_TOOL_CALL, 3)
    assert caught.value.verdict is None


def test_after_agent_ignores_a_marker_a_newer_answer_left_behind() -> None:
    """After a later model answer the old marker raises nothing."""
    guard = LoopGuardMiddleware(LoopGuardConfig())
    state = _halt_state(guard)
    state["messages"] += [HumanMessage("next"), AIMessage("Fine.", id="ai-2")]
    assert guard.after_agent(state, None) is None  # type: ignore[func-returns-value]


def test_node_raises_its_halt_and_routes_nowhere_until_then() -> None:
    """The node guard's route waits for the node itself, which then raises."""
    guard = LoopGuardNode(LoopGuardConfig())
    state = _halt_state(guard)
    assert guard.route(state) == []
    with pytest.raises(LoopDetected):
        guard(state)


def test_node_routes_a_new_human_message_to_the_model() -> None:
    """START -> loop_guard: a human message goes to the model, not to old open calls."""
    guard = LoopGuardNode(LoopGuardConfig())
    state = {"messages": [HumanMessage("go"), _asked("c1"), HumanMessage("next")]}
    update = guard(state)
    assert update is not None
    assert isinstance(update, dict)
    assert isinstance(update["messages"][0], RemoveMessage)
    assert guard.route(state) == "agent"


# --- first tier: the handler and a new human message ----------------------------------------------


@pytest.mark.parametrize("scope", ["thread"])
def test_handler_new_human_message_lifts_a_stop(scope: str) -> None:
    """A stopped thread stops its next model call, unless a new human message reached it.

    (With ``scope="run"`` a human message a node writes inside the same invocation is no new
    run; the next invocation starts afresh, see ``test_handler_run_scope_...`` below.)
    """
    handler = LoopGuardCallbackHandler(LoopGuardConfig(scope=scope))
    root = uuid.uuid4()
    handler.on_chain_start(None, {}, run_id=root, metadata={"thread_id": "t"})
    history: list[Any] = [HumanMessage("go", id="h1")]

    def model_start(messages: list[Any]) -> None:
        handler.on_chat_model_start(None, [messages], run_id=uuid.uuid4(), parent_run_id=root)

    def tool(index: int) -> None:
        run_id = uuid.uuid4()
        handler.on_tool_start(
            {"name": "read_file"},
            "{'path': 'a'}",
            run_id=run_id,
            parent_run_id=root,
            inputs={"path": "a"},
            tool_call_id=f"c{index}",
        )
        handler.on_tool_end("contents", run_id=run_id, parent_run_id=root)

    model_start(history)
    tool(1)
    tool(2)
    with pytest.raises(LoopDetected):
        tool(3)
    with pytest.raises(LoopDetected):
        model_start(history)  # the same conversation: still stopped
    model_start([*history, HumanMessage("Something else.", id="h2")])  # released
    tool(4)


def test_handler_run_scope_keeps_a_stop_within_one_invocation_and_starts_the_next_afresh() -> None:
    """scope="run": a human message written inside the stopped invocation does not lift the
    stop; the next invocation (a new top-level run) starts afresh."""
    handler = LoopGuardCallbackHandler(LoopGuardConfig(scope="run"))

    def invocation() -> tuple[uuid.UUID, Any]:
        root = uuid.uuid4()
        handler.on_chain_start(None, {}, run_id=root)

        def tool(index: int) -> None:
            run_id = uuid.uuid4()
            handler.on_tool_start(
                {"name": "read_file"},
                "{'path': 'a'}",
                run_id=run_id,
                parent_run_id=root,
                inputs={"path": "a"},
                tool_call_id=f"{root}-{index}",
            )
            handler.on_tool_end("contents", run_id=run_id, parent_run_id=root)

        return root, tool

    root, tool = invocation()
    tool(1)
    tool(2)
    with pytest.raises(LoopDetected):
        tool(3)
    with pytest.raises(LoopDetected):
        handler.on_chat_model_start(
            None,
            [[HumanMessage("go"), HumanMessage("critic: again")]],
            run_id=uuid.uuid4(),
            parent_run_id=root,
        )
    handler.on_chain_end({}, run_id=root)
    _, tool = invocation()
    tool(1)  # a new invocation: fresh counters
