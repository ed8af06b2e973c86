"""``LoopGuardNode``: the node and its router called directly, then real ``StateGraph`` runs."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from guard_scenarios import (
    AGAIN,
    FINE,
    LOOPS,
    Loop,
    assert_valid_history,
    guard_messages,
    harness,
    loop_harness,
    model_of,
    scripted,
    stop_message,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import ToolException
from langgraph.graph import END
from langgraph.types import Command, Send

from langchain_loop_guard import LoopGuardConfig, LoopGuardConfigError, Signal, guard_kind
from langchain_loop_guard._core._messages import HINT_MARKER, not_executed, nudge
from langchain_loop_guard._integrations._node import LoopGuardNode
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, call, calls, scripted_tool

# --- first tier: the node and its router, called with hand-built state ------------------------


def _guard(**options: Any) -> LoopGuardNode:
    config = options.pop("config", {})
    return LoopGuardNode(LoopGuardConfig(**config), **options)


def _answer(*tool_calls: tuple[str, dict[str, Any], str], text: str = "") -> AIMessage:
    """A model answer with an id, as the graph's message reducer gives it."""
    first = tool_calls[0][2] if tool_calls else text
    return calls(*tool_calls, content=text).model_copy(update={"id": f"answer-{first}"})


def _apply(state: dict[str, Any], update: dict[str, Any] | None) -> None:
    for key, value in (update or {}).items():
        if key == "messages":
            state["messages"].extend(value)
        else:
            state[key] = value


def _run_tools(state: dict[str, Any], guard: LoopGuardNode, output: str = "contents") -> None:
    """Follow the router to the tools, answer what it sends, and pass the guard again."""
    destination = guard.route(state)
    if destination == "tools":
        answer = state["messages"][-1]
        sent = answer.tool_calls
    elif isinstance(destination, list):
        (send,) = destination
        sent = send.arg
    else:
        return
    for tool_call in sent:
        state["messages"].append(
            ToolMessage(output, tool_call_id=tool_call["id"], name=tool_call["name"])
        )
    _apply(state, guard(state))


def _turn(guard: LoopGuardNode, state: dict[str, Any], answer: AIMessage) -> dict[str, Any] | None:
    state["messages"].append(answer)
    update = guard(state)
    _apply(state, update)
    return update


def test_node_refuses_the_third_identical_call_and_routes_to_end() -> None:
    """on_stop="end": the guard answers the call, adds the stop message; the router ends."""
    guard = _guard(on_stop="end")
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(2):
        _turn(guard, state, _answer(("read", {"p": 1}, f"c{index}")))
        assert guard.route(state) == "tools"
        _run_tools(state, guard)
        assert guard.route(state) == "agent"
    update = _turn(guard, state, _answer(("read", {"p": 1}, "c2")))
    assert update is not None
    refused, final = update["messages"]
    assert (refused.tool_call_id, refused.content) == ("c2", not_executed("en"))
    assert final.content.startswith("Loop guard stopped the run")
    assert guard.route(state) == END
    assert_valid_history(state["messages"])


def test_router_sends_the_tools_only_the_calls_the_guard_left_open() -> None:
    """A nudged call among parallel calls is answered; the others go to the tools."""
    guard = _guard(nudges=1)
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(2):
        _turn(guard, state, _answer(("read", {"p": 1}, f"c{index}")))
        _run_tools(state, guard)
    _turn(guard, state, _answer(("read", {"p": 1}, "c2"), ("list", {}, "l1")))
    destination = guard.route(state)
    assert isinstance(destination, list)
    (send,) = destination
    assert isinstance(send, Send)
    assert (send.node, [c["id"] for c in send.arg]) == ("tools", ["l1"])


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([HumanMessage("go"), AIMessage("done")], END),
        ([HumanMessage("go"), call("read", {}, id="c1")], "tools"),
        (
            [HumanMessage("go"), call("read", {}, id="c1"), ToolMessage("x", tool_call_id="c1")],
            "agent",
        ),
        (
            [HumanMessage("go"), AIMessage("done"), HumanMessage("nudge", name="loop_guard")],
            "agent",
        ),
        ([HumanMessage("go")], "agent"),
        ([], END),
    ],
    ids=["final answer", "calls", "tool results", "nudge after answer", "no answer yet", "empty"],
)
def test_router_decides_from_the_messages(messages: list[Any], expected: object) -> None:
    """The router's table: END, the tools, or back to the model."""
    assert _guard().route({"messages": messages}) == expected


def test_node_sees_tool_results_when_the_tools_lead_back_to_it() -> None:
    """After the tools the guard feeds their results: three errors stop before the model."""
    guard = _guard(on_stop="end")
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(3):
        _turn(guard, state, _answer(("deploy", {"n": index}, f"c{index}")))
        state["messages"].append(
            ToolMessage("disk full", tool_call_id=f"c{index}", name="deploy", status="error")
        )
        update = guard(state)
        _apply(state, update)
    assert update is not None
    assert stop_message(state["messages"]).content.startswith("Loop guard stopped the run")
    assert guard.route(state) == END


def test_node_reads_state_objects_and_custom_keys() -> None:
    """A state object with attributes, and other key names, work as a mapping does."""

    class State:
        def __init__(self) -> None:
            self.history: list[Any] = [HumanMessage("go"), _answer(("read", {}, "c0"))]
            self.guard_state: Any = None

    guard = _guard(messages_key="history", state_key="guard_state")
    update = guard(State())
    assert update is not None
    assert set(update) == {"guard_state"}
    assert update["guard_state"]["pending"] == [["c0", "read"]]


def test_node_does_nothing_when_the_mode_is_off() -> None:
    """Off: the node returns no update, the router still routes."""
    guard = _guard(config={"mode": "off"})
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(5):
        assert _turn(guard, state, _answer(("read", {"p": 1}, f"c{index}"))) is None
        assert guard.route(state) == "tools"
        _run_tools(state, guard)
    assert "loop_guard" not in state


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"model": ""}, "model"),
        ({"tools": 3}, "tools"),
        ({"messages_key": None}, "messages_key"),
        ({"state_key": ""}, "state_key"),
        ({"nudges": -2}, "nudges"),
        ({"on_stop": "pause"}, "on_stop"),
    ],
)
def test_constructor_rejects_bad_values_naming_the_parameter(
    options: dict[str, Any], key: str
) -> None:
    """Bad arguments raise LoopGuardConfigError naming the parameter, eagerly."""
    with pytest.raises(LoopGuardConfigError) as caught:
        LoopGuardNode(LoopGuardConfig(), **options)
    assert caught.value.key == key


def test_constructor_options_are_keyword_only() -> None:
    """Only the config may be passed by position; the settings are keywords too."""
    parameters = list(inspect.signature(LoopGuardNode).parameters.values())
    assert parameters[0].name == "config"
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[1:-1])
    assert parameters[-1].kind is inspect.Parameter.VAR_KEYWORD  # **settings


def test_destinations_name_every_router_target() -> None:
    """The path map lists the tools node, the model node and END."""
    assert _guard(model="llm", tools="run_tools").destinations == ("run_tools", "llm", END)


# --- second tier: real StateGraph runs ----------------------------------------------------------

LOOP_IDS = [loop.name for loop in LOOPS]


@pytest.mark.parametrize("loop", LOOPS, ids=LOOP_IDS)
def test_each_loop_raises_loop_detected(loop: Loop) -> None:
    """on_stop="raise": invoke raises LoopDetected with the loop's signal."""
    graph = loop_harness("node", loop)
    with pytest.raises(LoopDetected) as caught:
        graph.invoke()
    assert (caught.value.signal, caught.value.tool) == (loop.signal, loop.tool)
    saved = graph.state()
    assert_valid_history(saved["messages"])
    # Every stop is saved before it is raised, so the thread's next message is judged on it
    # (SPEC §13 C2), and shows under loop_guard_stop; one that answered the stopped answer's
    # calls has the stop message after them (so any router ends there), one without calls none.
    assert saved["loop_guard_stop"]["signal"] == loop.signal.value
    ends_with_stop = guard_kind(saved["messages"][-1]) == "stop"
    answered = any(guard_kind(m) == "not_executed" for m in saved["messages"])
    assert ends_with_stop == answered


@pytest.mark.parametrize("loop", LOOPS, ids=LOOP_IDS)
def test_each_loop_ends_the_run_with_a_valid_history(loop: Loop) -> None:
    """on_stop="end": a final stop message, every call answered, and the graph can go on."""
    graph = loop_harness("node", loop, on_stop="end")
    result = graph.invoke()
    assert stop_message(result["messages"]).content.startswith("Loop guard stopped the run")
    assert_valid_history(result["messages"])
    assert graph.invoke(text=AGAIN)["messages"][-1].content == FINE


@pytest.mark.parametrize("loop", LOOPS, ids=LOOP_IDS)
def test_each_loop_interrupts_for_a_human(loop: Loop) -> None:
    """on_stop="interrupt": a pause with the loop's payload; "end" ends the run."""
    graph = loop_harness("node", loop, on_stop="interrupt")
    (pending,) = graph.invoke()["__interrupt__"]
    assert (pending.value["signal"], pending.value["tool"]) == (loop.signal.value, loop.tool)
    result = graph.invoke(Command(resume="end"))
    assert stop_message(result["messages"]).content == pending.value["message"]
    assert graph.invoke(text=AGAIN)["messages"][-1].content == FINE


@pytest.mark.parametrize("loop", [LOOPS[0], LOOPS[4]], ids=["repeat", "repeated_error"])
def test_guard_without_the_tools_edge_back_still_stops(loop: Loop) -> None:
    """Wired with tools -> agent, the guard sees results one model call later, and stops."""
    graph = loop_harness("node", loop, on_stop="end", hub=False)
    result = graph.invoke()
    assert stop_message(result["messages"]).content.startswith("Loop guard stopped the run")
    assert_valid_history(result["messages"])


def test_late_repeated_error_nudge_rides_on_the_next_calls() -> None:
    """Wired tools -> agent, a repeated error is seen after the next answer: its calls carry
    the nudge; the next failure stops the run."""
    graph = loop_harness("node", LOOPS[4], nudges=1, on_stop="end", hub=False)
    result = graph.invoke()
    nudged = guard_messages(result["messages"])[0]
    assert isinstance(nudged, ToolMessage)
    assert nudged.content == nudge("deploy", 3, "en")
    assert "failed with the same error 4 times" in stop_message(result["messages"]).content


def test_trimmed_history_falls_back_to_the_last_answer() -> None:
    """When the last processed answer is gone from the history, the guard still goes on."""
    guard = _guard()
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    _turn(guard, state, _answer(("read", {"p": 1}, "c0")))
    _run_tools(state, guard)
    state["messages"] = [SystemMessage("Summary: page 1 was read.")]  # a summarizer ran
    _turn(guard, state, _answer(("read", {"p": 1}, "c1")))
    assert state["loop_guard"]["detector"]["seen"] == 2
    assert state["loop_guard"]["pending"] == [["c1", "read"]]


def test_interrupt_resumed_with_continue_goes_on_with_fresh_counters() -> None:
    """Resuming with "continue" runs the paused call; the loop is caught again later."""
    graph = loop_harness("node", LOOPS[0], on_stop="interrupt")
    graph.invoke()
    again = graph.invoke(Command(resume="continue"))
    assert graph.tool("read_file").calls == 4
    assert again["__interrupt__"][0].value["signal"] == "repeated_tool_call"


def _reacts_to_nudge(messages: list[Any]) -> AIMessage | str:
    last = messages[-1]
    if isinstance(last, ToolMessage) and str(last.content).startswith(HINT_MARKER):
        return call("ask_user", {"question": "a.txt keeps failing"})
    if isinstance(last, ToolMessage) and last.name == "ask_user":
        return "I reported the blocker."
    return call("read_file", {"path": "a.txt"})


@pytest.mark.parametrize("locale", ["en", "ko"])
def test_nudged_model_changes_approach_and_finishes(locale: str) -> None:
    """nudges=1: the refused call carries the nudge in the locale; the model finishes."""
    model = scripted(_reacts_to_nudge)
    tools = [scripted_tool("read_file", "contents"), scripted_tool("ask_user", "try b.txt")]
    graph = harness("node", model, tools, config={"locale": locale}, nudges=1)
    result = graph.invoke()
    (nudged,) = guard_messages(result["messages"])
    assert nudged.content == nudge("read_file", 3, locale)
    if locale != "en":
        assert nudged.content != nudge("read_file", 3, "en")
    assert result["messages"][-1].content == "I reported the blocker."


def test_model_ignoring_the_nudge_is_stopped() -> None:
    """nudges=1: the next repeat after the nudge stops the run."""
    graph = loop_harness("node", LOOPS[0], nudges=1)
    with pytest.raises(LoopDetected):
        graph.invoke()
    assert graph.tool("read_file").calls == 2


def test_repeated_error_nudge_comes_after_every_tool_message() -> None:
    """A nudge about a repeated error is a message after the step's tool messages."""
    failing = scripted_tool("deploy", ToolException("disk full"))
    model = model_of(lambda n: call("deploy", {"attempt": n}))
    graph = harness("node", model, [failing], nudges=1, on_stop="end")
    result = graph.invoke()
    nudged = guard_messages(result["messages"])[0]
    position = result["messages"].index(nudged)
    assert isinstance(result["messages"][position - 1], ToolMessage)
    assert nudged.name == "loop_guard"
    assert "failed with the same error 3 times" in str(nudged.content)
    assert_valid_history(result["messages"])


def test_async_graph_is_stopped_like_a_sync_one() -> None:
    """ainvoke: the guard node pauses the graph and "end" ends it, as under invoke."""
    graph = loop_harness("node", LOOPS[0], on_stop="interrupt")
    start = {"messages": [HumanMessage("go")]}
    paused = asyncio.run(graph.graph.ainvoke(start, graph.config))
    assert paused["__interrupt__"][0].value["signal"] == "repeated_tool_call"
    result = asyncio.run(graph.graph.ainvoke(Command(resume="end"), graph.config))
    assert stop_message(result["messages"]).content.startswith("Loop guard stopped the run")


_POLL_STATUSES = ["Pending", "Running 10%", "Running 40%", "Running 70%", "Running 90%", "Done"]


def _poller(config: dict[str, Any] | None = None) -> Any:
    """A graph that polls ``job_status`` back to back until it says ``Done``."""
    script: list[Any] = [call("job_status", {"id": 7})] * len(_POLL_STATUSES) + ["Done."]
    return harness(
        "node",
        ScriptedChatModel(script=script),
        [scripted_tool("job_status", *_POLL_STATUSES)],
        config=config,
    )


def test_a_poller_whose_percentage_moves_completes_untouched() -> None:
    """SPEC §12 N7 (which withdrew §11's stop at the 4th poll): the identical poll whose
    output moves only in numbers is progress; it runs to its answer without configuration."""
    graph = _poller()
    result = graph.invoke()
    assert guard_messages(result["messages"]) == []
    assert result["messages"][-1].content == "Done."
    assert graph.tool("job_status").calls == len(_POLL_STATUSES)


def test_a_poll_that_does_not_move_at_all_is_still_an_exact_repeat() -> None:
    """N7's other side: a status that does not move, numbers included, is stopped at the
    third identical poll (SPEC §2), and a poller given its own threshold runs on."""
    statuses = ["Pending", "Running 40%", "Running 40%", "Running 40%", "Done"]
    script: list[Any] = [call("job_status", {"id": 7})] * len(statuses) + ["Done."]
    graph = harness(
        "node", ScriptedChatModel(script=script), [scripted_tool("job_status", *statuses)]
    )
    with pytest.raises(LoopDetected) as caught:
        graph.invoke()
    assert (caught.value.signal, caught.value.tool) == (Signal.REPEATED_TOOL_CALL, "job_status")
    loosened = harness(
        "node",
        ScriptedChatModel(script=script),
        [scripted_tool("job_status", *statuses)],
        config={"tool_threshold_overrides": {"job_status": 6}},
    )
    assert loosened.invoke()["messages"][-1].content == "Done."


def test_mode_off_changes_nothing() -> None:
    """Off: the loop runs to its end and the guard keeps no state."""
    script = [call("read_file", {"path": "a"})] * 6 + ["done"]
    graph = harness(
        "node",
        ScriptedChatModel(script=script),
        [scripted_tool("read_file", "x")],
        config={"mode": "off"},
    )
    assert graph.invoke()["messages"][-1].content == "done"
    assert "loop_guard" not in graph.state()


def _react_agent(on_stop: str, model: ScriptedChatModel, tools: list[Any], **options: Any) -> Any:
    """``create_react_agent`` with the node guard as its ``post_model_hook``, checkpointed."""
    import warnings

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt.chat_agent_executor import (
        AgentState,
        AgentStateWithStructuredResponse,
    )
    from langgraph.warnings import LangGraphDeprecationWarning

    from langchain_loop_guard import LoopGuardState

    class State(AgentState, LoopGuardState):  # type: ignore[misc]
        pass

    class StructuredState(AgentStateWithStructuredResponse, LoopGuardState):  # type: ignore[misc]
        pass

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=LangGraphDeprecationWarning)
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(
            model,
            tools,
            post_model_hook=LoopGuardNode(on_stop=on_stop),  # type: ignore[arg-type]
            state_schema=StructuredState if "response_format" in options else State,
            checkpointer=InMemorySaver(),
            **options,
        )


def test_node_guard_as_a_post_model_hook_interrupts_and_ends_on_resume() -> None:
    """``create_react_agent(post_model_hook=LoopGuardNode(on_stop="interrupt"))``: the
    interrupt carries the guard's payload, and ``Command(resume="end")`` ends the run."""
    from langchain_loop_guard import guard_kind

    read_file = scripted_tool("read_file", "same")
    model = ScriptedChatModel(script=[call("read_file", {"path": "a"})] * 10 + ["done"])
    agent = _react_agent("interrupt", model, [read_file])
    config = {"configurable": {"thread_id": "hook"}}
    paused = agent.invoke({"messages": [("user", "read a")]}, config)
    (pending,) = paused["__interrupt__"]
    assert pending.value["type"] == "loop_guard"
    assert pending.value["signal"] == "repeated_tool_call"
    result = agent.invoke(Command(resume="end"), config)
    assert guard_kind(result["messages"][-1]) == "stop"
    assert read_file.calls == 2


def _reads_until_asked_again(messages: list[Any]) -> AIMessage | str:
    """Reads the same file until a second human message arrives, then answers."""
    humans = sum(isinstance(m, HumanMessage) and m.name != "loop_guard" for m in messages)
    return FINE if humans >= 2 else call("read_file", {"path": "a"})


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_node_guard_as_a_post_model_hook_raises_without_another_model_call(how: str) -> None:
    """``on_stop="raise"`` as a ``post_model_hook``: the caller gets ``LoopDetected``, the
    model is not called again, and the saved thread takes the next message."""
    from langchain_loop_guard import guard_kind

    read_file = scripted_tool("read_file", "same")
    model = ScriptedChatModel(script=[_reads_until_asked_again], then="repeat")
    agent = _react_agent("raise", model, [read_file])
    config = {"configurable": {"thread_id": f"hook-raise-{how}"}}
    start = {"messages": [("user", "read a")]}

    def run() -> object:
        if how == "invoke":
            return agent.invoke(start, config)
        return asyncio.run(agent.ainvoke(start, config))

    with pytest.raises(LoopDetected) as caught:
        run()
    assert (caught.value.signal.value, caught.value.tool) == ("repeated_tool_call", "read_file")
    assert model.turns == 3  # the third answer was refused; nothing asked the model again
    assert read_file.calls == 2
    saved = agent.get_state(config).values
    assert_valid_history(saved["messages"])
    assert [guard_kind(m) for m in saved["messages"][-2:]] == ["not_executed", "stop"]
    assert saved["loop_guard_stop"]["signal"] == "repeated_tool_call"

    result = agent.invoke({"messages": [("user", AGAIN)]}, config)
    assert model.turns == 4
    assert_valid_history(model.seen[-1])
    assert result["messages"][-1].content == FINE
    assert result["loop_guard_stop"] is None


def test_node_guard_as_a_post_model_hook_raises_with_a_response_format() -> None:
    """With ``response_format`` the agent's structured-response step follows any end of the
    run, so it is called once alongside the raise (as the manual says); the caller still
    gets ``LoopDetected`` and the tool is not run again."""
    from pydantic import BaseModel

    class Answer(BaseModel):
        text: str

    read_file = scripted_tool("read_file", "same")
    script = [call("read_file", {"path": "a"})] * 3 + [call("Answer", {"text": "x"})]
    model = ScriptedChatModel(script=script)
    agent = _react_agent("raise", model, [read_file], response_format=Answer)
    config = {"configurable": {"thread_id": "hook-raise-structured"}}
    with pytest.raises(LoopDetected):
        agent.invoke({"messages": [("user", "read a")]}, config)
    assert read_file.calls == 2
    assert model.turns == 4  # the structured-response call
    assert_valid_history(agent.get_state(config).values["messages"])
