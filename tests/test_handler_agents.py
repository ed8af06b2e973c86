"""LoopGuardCallbackHandler in real agents: ``create_agent`` and a hand-built ``StateGraph``,
driven through ``invoke``, ``stream``, ``ainvoke`` and ``astream``, offline."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._core._detector import LoopDetector
from langchain_loop_guard._core._messages import HINT_MARKER
from langchain_loop_guard._integrations._handler import TRACE_EVENT, LoopGuardCallbackHandler
from langchain_loop_guard._integrations._hint import with_loop_hint
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, call, calls, scripted_tool

# --- two ways to build an agent, four ways to run it ----------------------------------------------


def build_create_agent(model: ScriptedChatModel, tools: Sequence[BaseTool], **options: Any) -> Any:
    return create_agent(model, list(tools), **options)


def build_state_graph(
    model: ScriptedChatModel,
    tools: Sequence[BaseTool],
    *,
    system_prompt: str | None = None,
    checkpointer: InMemorySaver | None = None,
) -> Any:
    bound = model.bind_tools(list(tools))

    def prompt(state: MessagesState) -> list[BaseMessage]:
        head = [SystemMessage(content=system_prompt)] if system_prompt else []
        return [*head, *state["messages"]]

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(prompt(state))]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(prompt(state))]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", RunnableLambda(agent, afunc=aagent))
    graph.add_node("tools", ToolNode(list(tools)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


BUILDERS: dict[str, Callable[..., Any]] = {
    "create_agent": build_create_agent,
    "state_graph": build_state_graph,
}


def drive(agent: Any, how: str, text: str, config: RunnableConfig) -> list[BaseMessage]:
    """Run ``agent`` to its end the way ``how`` says; return the final messages."""
    inputs = {"messages": [("user", text)]}
    if how == "invoke":
        return list(agent.invoke(inputs, config)["messages"])
    if how == "stream":
        states = list(agent.stream(inputs, config, stream_mode="values"))
        return list(states[-1]["messages"])
    if how == "ainvoke":
        return list(asyncio.run(agent.ainvoke(inputs, config))["messages"])

    async def astream() -> list[BaseMessage]:
        states = [state async for state in agent.astream(inputs, config, stream_mode="values")]
        return list(states[-1]["messages"])

    return asyncio.run(astream())


@pytest.fixture(params=sorted(BUILDERS))
def build(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Each way to build an agent."""
    return BUILDERS[request.param]


@pytest.fixture(params=["invoke", "stream", "ainvoke", "astream"])
def how(request: pytest.FixtureRequest) -> str:
    """Each way to run one."""
    return str(request.param)


def guard(**values: Any) -> LoopGuardCallbackHandler:
    return LoopGuardCallbackHandler(LoopGuardConfig(**values))


def run_agent(
    build: Callable[..., Any],
    how: str,
    handler: LoopGuardCallbackHandler,
    script: list[Any],
    tools: Sequence[BaseTool],
    *,
    then: str = "error",
) -> tuple[list[BaseMessage], ScriptedChatModel]:
    model = ScriptedChatModel(script=script, then=then)
    agent = build(model, tools)
    return drive(agent, how, "go", {"callbacks": [handler]}), model


def by_path(args: dict[str, Any]) -> str:
    return f"contents of {args.get('path')}"


# --- loops are stopped with the right signal ------------------------------------------------------


class Loop(NamedTuple):
    """A looping script, what its tools return, and how the guard must stop it."""

    script: list[Any]
    results: dict[str, list[Any]]
    signal: Signal
    tool: str | None
    ran: int
    """Tool bodies that ran before the stop."""
    config: Mapping[str, Any] = MappingProxyType({})


def syntax_errors() -> list[Any]:
    return [ToolException(f"SyntaxError: invalid syntax (line {n})") for n in (12, 14, 17, 21)]


LOOPS = {
    "identical calls": Loop(
        [call("read_file", {"path": "a.py"})] * 5,
        {"read_file": ["print('hi')"]},
        Signal.REPEATED_TOOL_CALL,
        "read_file",
        ran=2,
    ),
    "A-B cycle": Loop(
        [call("read_file", {"path": "a.py"}), call("run_tests")] * 4,
        {"read_file": [by_path], "run_tests": ["1 failed"]},
        Signal.TOOL_CYCLE,
        "run_tests",
        ran=5,
    ),
    "window frequency": Loop(
        [
            call("search", {"q": "bug"}),
            call("save_note", {"text": "1.py: no hit"}),
            call("search", {"q": "bug"}),
            call("save_note", {"text": "2.py: no hit"}),
            call("search", {"q": "bug"}),
            call("save_note", {"text": "3.py: no hit"}),
            call("search", {"q": "bug"}),
            "done",
        ],
        # the calls between do work and bring nothing new: no pacing (SPEC §13 N10)
        {"search": ["no results"], "save_note": ["saved"]},
        Signal.TOOL_FREQUENCY,
        "search",
        ran=7,  # other calls succeeded in between: the 4th search runs, its result stops (N1)
    ),
    "cycle too long for the cycle rule": Loop(
        [call("step", {"n": n}) for n in (1, 2, 3, 4)] * 4,
        {"step": ["same"]},
        Signal.REPEATED_SEQUENCE,  # a 4-call block, 3 laps (SPEC §11 R5)
        "step",
        ran=11,
    ),
    "identical error, varying line": Loop(
        [call("run_script", {"attempt": n}) for n in (1, 2, 3, 4)],
        {"run_script": syntax_errors()},
        Signal.REPEATED_TOOL_ERROR,
        "run_script",
        ran=3,
    ),
    "identical assistant text": Loop(
        [
            calls(("read_file", {"path": f"{n}.py"}), content="Let me look at the file again.")
            for n in (1, 2, 3, 4)
        ],
        {"read_file": [by_path]},
        Signal.REPEATED_ASSISTANT_RESPONSE,
        None,
        ran=2,
        config={"progress_aware": False},
    ),
}


@pytest.mark.parametrize("loop", LOOPS.values(), ids=list(LOOPS))
def test_loop_is_stopped_with_its_signal(build: Callable[..., Any], how: str, loop: Loop) -> None:
    """Each kind of loop raises LoopDetected with its signal, and no tool runs after it."""
    tools = [scripted_tool(name, *outputs) for name, outputs in loop.results.items()]
    handler = guard(**loop.config)
    with pytest.raises(LoopDetected) as caught:
        run_agent(build, how, handler, loop.script, tools)
    assert (caught.value.signal, caught.value.tool) == (loop.signal, loop.tool)
    assert sum(t.calls for t in tools) == loop.ran
    assert handler.status().stops == 1


def test_identical_read_file_loop_stops_at_the_third_call(
    build: Callable[..., Any], how: str
) -> None:
    """The third identical read_file raises before its body runs: the body ran twice."""
    read_file = scripted_tool("read_file", "print('hi')")
    handler = guard()
    with pytest.raises(LoopDetected) as caught:
        run_agent(
            build, how, handler, [call("read_file", {"path": "a.py"})], [read_file], then="repeat"
        )
    assert read_file.calls == 2
    error = caught.value
    assert (error.signal, error.tool, error.count, error.threshold) == (
        Signal.REPEATED_TOOL_CALL,
        "read_file",
        3,
        3,
    )
    inspection = handler.inspect(error.run_id)
    assert inspection is not None
    assert [c.outcome for c in inspection.recent] == ["ok", "ok", "blocked"]


# --- calls that never reach a tool ----------------------------------------------------------------


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


NEVER_RUN = {
    # name: (the model's repeated call, signal)
    "unknown tool": (
        lambda n: call("delete_everything", {"force": True}),
        Signal.REPEATED_TOOL_CALL,
    ),
    "unknown tool, varying arguments": (
        lambda n: call("delete_everything", {"attempt": n}),
        Signal.REPEATED_TOOL_ERROR,
    ),
    "invalid arguments": (lambda n: call("add", {"a": "one"}), Signal.REPEATED_TOOL_CALL),
}


@pytest.mark.parametrize(("step", "signal"), NEVER_RUN.values(), ids=list(NEVER_RUN))
def test_calls_that_never_reach_a_tool_are_stopped_within_the_threshold(
    build: Callable[..., Any], how: str, step: Callable[[int], AIMessage], signal: Signal
) -> None:
    """Calls of a missing tool (or with bad arguments) count: stopped at the 3rd, no body ran."""
    counter = iter(range(1, 100))
    read_file = scripted_tool("read_file", "contents")
    tools = [read_file, _typed_add()]
    model = ScriptedChatModel(script=[lambda _: step(next(counter))], then="repeat")
    with pytest.raises(LoopDetected) as caught:
        drive(build(model, tools), how, "go", {"callbacks": [guard()]})
    assert caught.value.signal is signal
    assert read_file.calls == 0
    assert model.turns == 3  # the 3rd call is caught before a 4th model call is paid for


def _typed_add() -> BaseTool:
    return StructuredTool.from_function(add)


# --- productive runs are untouched ----------------------------------------------------------------


def test_productive_edit_test_run_of_30_steps_completes_with_one_warning(
    build: Callable[..., Any], how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """30 edit→test steps whose test output changes complete; the turn warning does not stop."""
    script: list[Any] = []
    for n in range(15):
        script += [call("edit_file", {"path": "app.py", "patch": f"fix {n}"}), call("run_tests")]
    edit_file = scripted_tool("edit_file", "edited app.py")
    run_tests = scripted_tool(
        "run_tests", *[f"{n} failed, {30 - n} passed in 0.{n}s" for n in range(15, 0, -1)]
    )
    handler = guard()
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        messages, model = run_agent(
            build, how, handler, [*script, "All tests pass."], [edit_file, run_tests]
        )
    assert messages[-1].text == "All tests pass."
    assert (edit_file.calls, run_tests.calls, model.turns) == (15, 15, 31)
    status = handler.status()
    assert (status.stops, status.warnings, status.active_runs) == (0, 1, 0)
    assert [r.loop_guard_signal for r in caplog.records] == ["turn_count"]  # type: ignore[attr-defined]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # expected: no noise


# --- parallel calls and concurrent runs -----------------------------------------------------------


def test_parallel_calls_in_one_message_are_each_counted(
    build: Callable[..., Any], how: str
) -> None:
    """Three parallel calls are three calls, each matched to its own result."""
    read_file = scripted_tool("read_file", by_path)
    handler = guard()
    parallel = calls(*[("read_file", {"path": f"{n}.py"}) for n in (1, 2, 3)])
    messages, _ = run_agent(build, how, handler, [parallel, "done"], [read_file])
    assert messages[-1].text == "done"
    inspection = handler.inspect()
    assert inspection is not None
    assert (inspection.calls, [c.outcome for c in inspection.recent]) == (3, ["ok", "ok", "ok"])


def test_parallel_identical_calls_are_stopped(build: Callable[..., Any], how: str) -> None:
    """Four identical parallel calls: the third is blocked (pending results count as equal)."""
    read_file = scripted_tool("read_file", "contents")
    parallel = calls(*[("read_file", {"path": "a.py"})] * 4)
    with pytest.raises(LoopDetected) as caught:
        run_agent(build, how, guard(), [parallel, "done"], [read_file])
    assert caught.value.signal is Signal.REPEATED_TOOL_CALL
    assert read_file.calls == 0  # the answer is stopped as a whole: none of its calls runs


class AnswerSeen(BaseCallbackHandler):
    """A handler after the guard, as LangSmith's tracer is: records each answer's call ids."""

    raise_error = True
    run_inline = True

    def __init__(self) -> None:
        self.answers: list[list[str | None]] = []

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        message = getattr(response.generations[0][0], "message", None)
        self.answers.append([c["id"] for c in getattr(message, "tool_calls", [])])


def test_no_call_of_a_stopped_answer_runs_and_the_handlers_after_the_guard_see_it(
    build: Callable[..., Any], how: str
) -> None:
    """An answer whose first call is the third identical lookup: neither it nor its siblings
    (each a parallel task in create_agent) run, in sync and async runs; the stop is counted
    once; and the handler after the guard recorded the answer, so a trace holds the stop."""
    tools = {name: scripted_tool(name, "value") for name in ("lookup", "write", "notify")}
    stopping = calls(("lookup", {"k": "a"}, "l"), ("write", {"x": 1}, "w"), ("notify", {}, "n"))
    script = [call("lookup", {"k": "a"}, id="l1"), call("lookup", {"k": "a"}, id="l2"), stopping]
    handler, seen = guard(), AnswerSeen()
    agent = build(ScriptedChatModel(script=[*script, "done"]), list(tools.values()))
    with pytest.raises(LoopDetected) as caught:
        drive(agent, how, "go", {"callbacks": [handler, seen]})
    assert (caught.value.signal, caught.value.tool) == (Signal.REPEATED_TOOL_CALL, "lookup")
    assert {name: t.calls for name, t in tools.items()} == {"lookup": 2, "write": 0, "notify": 0}
    assert seen.answers == [["l1"], ["l2"], ["l", "w", "n"]]
    assert handler.status().stops == 1


@pytest.mark.parametrize("how", ["ainvoke", "astream"])
def test_no_call_of_a_stopped_answer_runs_with_async_tools(
    build: Callable[..., Any], how: str
) -> None:
    """The same with coroutine tools, whose callbacks go through the async callback manager."""
    ran: list[str] = []

    def recording(name: str) -> BaseTool:
        async def body(**kwargs: Any) -> str:
            ran.append(name)
            return "value"

        return StructuredTool.from_function(
            coroutine=body, name=name, description=f"Records that {name} ran."
        )

    stopping = calls(("lookup", {}, "l"), ("write", {}, "w"), ("notify", {}, "n"))
    script = [call("lookup", {}, id="l1"), call("lookup", {}, id="l2"), stopping, "done"]
    agent = build(
        ScriptedChatModel(script=script), [recording(n) for n in ("lookup", "write", "notify")]
    )
    with pytest.raises(LoopDetected) as caught:
        drive(agent, how, "go", {"callbacks": [guard()]})
    assert (caught.value.signal, caught.value.tool) == (Signal.REPEATED_TOOL_CALL, "lookup")
    assert ran == ["lookup", "lookup"]


@pytest.mark.parametrize("concurrency", ["threads", "asyncio.gather"])
def test_concurrent_runs_through_one_handler_stay_isolated(
    build: Callable[..., Any], concurrency: str
) -> None:
    """Two runs that each call read_file twice, in lockstep, are two runs, not one loop of 4."""
    barrier = threading.Barrier(2, timeout=10)

    def in_lockstep(args: dict[str, Any]) -> str:
        barrier.wait()
        return "contents"

    handler = guard()
    agents = [
        build(
            ScriptedChatModel(script=[call("read_file", {"path": "a.py"})] * 2 + ["done"]),
            [scripted_tool("read_file", in_lockstep)],
        )
        for _ in range(2)
    ]
    config: RunnableConfig = {"callbacks": [handler]}
    inputs = {"messages": [("user", "go")]}
    if concurrency == "threads":
        with ThreadPoolExecutor(2) as pool:
            outputs = list(pool.map(lambda agent: agent.invoke(inputs, config), agents))
    else:

        async def both() -> list[Any]:
            return list(await asyncio.gather(*(a.ainvoke(inputs, config) for a in agents)))

        outputs = asyncio.run(both())
    assert [o["messages"][-1].text for o in outputs] == ["done", "done"]
    assert (handler.status().stops, handler.status().active_runs) == (0, 0)
    assert (handler._tree.roots, handler._tree.open) == ({}, {})  # every step reported its end


# --- modes and locales ----------------------------------------------------------------------------


def test_observe_mode_reports_once_and_never_stops(
    build: Callable[..., Any], how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """In observe mode the loop is logged and counted once, and the run completes."""
    read_file = scripted_tool("read_file", "contents")
    handler = guard(mode="observe")
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        messages, _ = run_agent(
            build, how, handler, [call("read_file", {"path": "a.py"})] * 5 + ["done"], [read_file]
        )
    assert messages[-1].text == "done"
    assert read_file.calls == 5
    status = handler.status()
    assert (status.observed, status.stops) == (1, 0)
    assert [(r.loop_guard_action, r.loop_guard_signal) for r in caplog.records] == [  # type: ignore[attr-defined]
        ("observe", "repeated_tool_call")
    ]


def test_off_mode_tracks_nothing_and_adds_no_hint(build: Callable[..., Any], how: str) -> None:
    """Off: the loop runs to its end, no run is tracked, and with_loop_hint adds nothing."""
    handler = guard(mode="off")
    tracked: list[int] = []

    def read(args: dict[str, Any]) -> str:
        tracked.append(handler.status().active_runs)
        return "contents"

    read_file = scripted_tool("read_file", read)
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"})] * 5 + ["done"])
    prompt = with_loop_hint("You are a careful coder.", guard=handler)
    agent = build(model, [read_file], system_prompt=prompt)
    messages = drive(agent, how, "go", {"callbacks": [handler]})
    assert messages[-1].text == "done"
    assert tracked == [0] * 5
    assert handler.inspect() is None
    assert prompt == "You are a careful coder."
    assert all(HINT_MARKER not in m.text for seen in model.seen for m in seen)


def test_korean_locale_gives_a_korean_stop_message(build: Callable[..., Any], how: str) -> None:
    """locale="ko": the LoopDetected message is Korean and names the tool."""
    messages = {}
    for locale in ("en", "ko"):
        with pytest.raises(LoopDetected) as caught:
            run_agent(
                build,
                how,
                guard(locale=locale),
                [call("read_file", {"path": "a.py"})],
                [scripted_tool("read_file", "contents")],
                then="repeat",
            )
        messages[locale] = str(caught.value)
    assert "read_file" in messages["ko"]
    assert messages["ko"] != messages["en"]


# --- scope="thread" -------------------------------------------------------------------------------


_ASKED = ("read a.py", "show me a.py", "and a.py once more")
_SAME_ASKED = ("read a.py again",) * 3


@pytest.mark.parametrize(
    ("scope", "asked", "stopped_at"),
    [("thread", _ASKED, 3), ("thread", _SAME_ASKED, None), ("run", _ASKED, None)],
    ids=["thread-3", "thread-same-question", "run"],
)
def test_loop_spread_over_invocations_of_one_thread(
    build: Callable[..., Any],
    how: str,
    scope: str,
    asked: tuple[str, ...],
    stopped_at: int | None,
) -> None:
    """scope="thread": each new message makes the read a.py progress (SPEC §11 N3), but the
    same reply to each new message, the third time, is a conversation going round (SPEC §12
    R9), unless the message is the same question again, answered as before (§14 N18);
    scope="run" sees three short runs."""
    read_file = scripted_tool("read_file", "contents")
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"}), "Here it is."] * 3)
    agent = build(model, [read_file], checkpointer=InMemorySaver())
    handler = guard(scope=scope)
    config: RunnableConfig = {"callbacks": [handler], "configurable": {"thread_id": "chat-1"}}
    stops: list[tuple[int, Signal, str | None]] = []
    for invocation, text in enumerate(asked, start=1):
        try:
            drive(agent, how, text, config)
        except LoopDetected as error:
            stops.append((invocation, error.signal, error.run_id))
    assert stops == ([(3, Signal.REPEATED_ASSISTANT_RESPONSE, "chat-1")] if stopped_at else [])
    assert read_file.calls == 3
    assert handler.status().active_runs == (1 if scope == "thread" else 0)


@tool
def deploy(env: str) -> str:
    """Deploy after a human approves."""
    return f"deployed {env}: {interrupt('approve?')}"


def test_interrupted_tool_is_one_call_across_pause_and_resume(build: Callable[..., Any]) -> None:
    """With scope="thread", a tool paused by interrupt() and resumed is counted once."""
    handler = guard(scope="thread")
    model = ScriptedChatModel(script=[call("deploy", {"env": "prod"}), "Deployed."])
    agent = build(model, [deploy], checkpointer=InMemorySaver())
    config: RunnableConfig = {"callbacks": [handler], "configurable": {"thread_id": "ops"}}
    paused = agent.invoke({"messages": [("user", "deploy to prod")]}, config)
    assert "__interrupt__" in paused
    resumed = agent.invoke(Command(resume="yes"), config)
    assert resumed["messages"][-1].text == "Deployed."
    inspection = handler.inspect("ops")
    assert inspection is not None
    assert (inspection.calls, [c.outcome for c in inspection.recent]) == (1, ["ok"])


# --- the guard's own failure ----------------------------------------------------------------------


def test_detector_failure_fails_open_with_one_warning(
    build: Callable[..., Any],
    how: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug inside the detector never breaks the run: it completes and one warning is logged."""

    def broken(self: LoopDetector, *args: Any, **kwargs: Any) -> Any:
        msg = "detector bug"
        raise RuntimeError(msg)

    # the handler feeds events digested outside its lock: calls and results through
    # ``digested_call`` and ``digested_result``, model answers through ``replay``
    for method in ("replay", "digested_call", "digested_result"):
        monkeypatch.setattr(LoopDetector, method, broken)
    read_file = scripted_tool("read_file", "contents")
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        messages, _ = run_agent(
            build, how, guard(), [call("read_file", {"path": "a.py"})] * 4 + ["done"], [read_file]
        )
    assert messages[-1].text == "done"
    assert read_file.calls == 4
    assert len(caplog.records) == 1
    assert "internal error in replay" in caplog.records[0].getMessage()


# --- state is freed -------------------------------------------------------------------------------


def test_runs_free_their_state_when_they_end(build: Callable[..., Any], how: str) -> None:
    """After completed and stopped runs, the registry and the run tree are empty."""
    handler = guard()
    read_file = scripted_tool("read_file", "contents")
    run_agent(build, how, handler, [call("read_file", {"path": "a.py"}), "done"], [read_file])
    with pytest.raises(LoopDetected):
        run_agent(
            build, how, handler, [call("read_file", {"path": "a.py"})], [read_file], then="repeat"
        )
    assert handler.status().active_runs == 0
    assert (handler._engine.runs, handler._tree.roots, handler._tree.open) == ({}, {}, {})


# --- what the trace shows -------------------------------------------------------------------------


def test_reports_appear_in_astream_events_as_custom_events(build: Callable[..., Any]) -> None:
    """An observed loop shows up in astream_events(v2) as a "loop_guard" custom event."""
    handler = guard(mode="observe")
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"})] * 3 + ["done"])
    agent = build(model, [scripted_tool("read_file", "secret contents")])

    async def events() -> list[dict[str, Any]]:
        return [
            dict(event)
            async for event in agent.astream_events(
                {"messages": [("user", "go")]}, {"callbacks": [handler]}, version="v2"
            )
            if event["event"] == "on_custom_event"
        ]

    (event,) = asyncio.run(events())
    assert event["name"] == TRACE_EVENT
    data = event["data"]
    assert (data["action"], data["signal"], data["tool"], data["count"]) == (
        "observe",
        "repeated_tool_call",
        "read_file",
        3,
    )
    assert "secret" not in repr(event)


def test_stop_is_dispatched_to_other_handlers_before_raising(build: Callable[..., Any]) -> None:
    """Another handler's on_custom_event sees the stop, with names and counts only."""
    from langchain_core.callbacks import BaseCallbackHandler

    seen: list[tuple[str, Any]] = []

    class Spy(BaseCallbackHandler):
        def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            seen.append((name, data))

    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"})], then="repeat")
    agent = build(model, [scripted_tool("read_file", "contents")])
    with pytest.raises(LoopDetected):
        agent.invoke({"messages": [("user", "go")]}, {"callbacks": [guard(), Spy()]})
    assert [(name, data["action"], data["signal"]) for name, data in seen] == [
        (TRACE_EVENT, "block", "repeated_tool_call")
    ]


# --- a handler attached where it cannot guard -------------------------------------------------

ATTACHED_BELOW = "it is attached to a model or a tool"


def _attached_below_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "langchain_loop_guard" and ATTACHED_BELOW in r.getMessage()
    ]


def test_handler_on_a_model_warns_once_where_it_goes(caplog: pytest.LogCaptureFixture) -> None:
    """A handler in a model's ``callbacks`` guards nothing: one WARNING line says so."""
    handler = LoopGuardCallbackHandler()
    model = ScriptedChatModel(
        script=[call("read_file", {"path": "a"})] * 5 + ["done"], callbacks=[handler]
    )
    tool = scripted_tool("read_file", "same")
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        create_agent(model, [tool]).invoke({"messages": [("user", "go")]})
    assert tool.calls == 5  # the loop was not stopped, as the warning says
    (record,) = _attached_below_warnings(caplog)
    assert record.levelno == logging.WARNING
    assert "\n" not in record.getMessage()
    assert 'agent.invoke(inputs, {"callbacks": [handler]})' in record.getMessage()
    assert "got a model event" in record.getMessage()


def test_handler_on_a_tool_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    """A handler in a tool's ``callbacks`` warns once, however many calls it sees."""
    handler = LoopGuardCallbackHandler()
    model = ScriptedChatModel(script=[call("read_file", {"path": "a"})] * 4 + ["done"])
    tool = scripted_tool("read_file", "same")
    tool.callbacks = [handler]
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        create_agent(model, [tool]).invoke({"messages": [("user", "go")]})
    assert tool.calls == 4
    (record,) = _attached_below_warnings(caplog)
    assert "got a tool event" in record.getMessage()


def test_handler_with_the_run_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    """Passed with the run (or to a model called on its own), the handler says nothing."""
    handler = LoopGuardCallbackHandler()
    model = ScriptedChatModel(script=[call("read_file", {"path": "a"}), "done", "ok"])
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        create_agent(model, [scripted_tool("read_file", "x")]).invoke(
            {"messages": [("user", "go")]}, {"callbacks": [handler]}
        )
        model.invoke("hi", {"callbacks": [handler]})
    assert _attached_below_warnings(caplog) == []


def test_handler_in_a_models_with_config_inside_a_graph_node_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``model.with_config(callbacks=[handler])`` called in a node: the same one warning."""
    handler = LoopGuardCallbackHandler()
    model = ScriptedChatModel(script=[call("read_file", {"path": "a"})] * 4 + ["done"])
    tool = scripted_tool("read_file", "same")
    configured = model.with_config(callbacks=[handler])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [configured.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    graph = builder.compile()
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        graph.invoke({"messages": [("user", "go")]})
    assert tool.calls == 4
    assert len(_attached_below_warnings(caplog)) == 1
