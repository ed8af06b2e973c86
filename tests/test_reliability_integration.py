"""Reliability of the integrations: concurrency, failing open, hostile values, no content leaks.

Every test runs real ``create_agent`` agents with the scripted model, through
``LoopGuardCallbackHandler`` or ``LoopGuardMiddleware``, or drives the handler's callbacks the
way LangChain calls them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID, uuid4

import pytest
from guard_scenarios import guard_messages
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal
from langchain_loop_guard._core._judge import Judge
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._middleware import LoopGuardMiddleware
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

Integration = Literal["handler", "middleware"]
INTEGRATIONS: tuple[Integration, ...] = ("handler", "middleware")

# --- one agent, many runs: the user message names the plan ----------------------------------------

PLANS: dict[str, Callable[[int], list[tuple[str, dict[str, Any]]]]] = {
    "productive": lambda run: [("read_file", {"run": run, "path": f"m{k}.py"}) for k in range(5)],
    "repeat": lambda run: [("read_file", {"run": run, "path": "a.py"})] * 5,
    "cycle": lambda run: (
        [
            ("read_file", {"run": run, "path": "a.py"}),
            ("grep", {"run": run, "pattern": "TODO"}),
        ]
        * 4
    ),
    "errors": lambda run: [("deploy", {"run": run, "attempt": k}) for k in range(5)],
    "window": lambda run: [
        ("read_file", {"run": run, "path": "a.py" if k % 2 == 0 else f"b{k}.py"}) for k in range(9)
    ],
}
"""Each run's tool calls, by plan; a run whose plan is done answers ``"done <run>"``."""


@dataclass(frozen=True)
class Outcome:
    """How a run ended: the signal that stopped it (or ``None``) and the tool bodies it ran."""

    signal: Signal | None
    bodies: int


SPEC_OUTCOMES = {
    "productive": Outcome(None, 5),
    "repeat": Outcome(Signal.REPEATED_TOOL_CALL, 2),  # the third identical call never runs
    "cycle": Outcome(Signal.TOOL_CYCLE, 5),  # A B A B A B: the sixth call never runs
    "errors": Outcome(Signal.REPEATED_TOOL_ERROR, 3),  # the third error stops the run
    # the fourth "a.py" in ten calls runs (other calls succeeded in between) and its result
    # stops the run (SPEC §11 N1)
    "window": Outcome(Signal.TOOL_FREQUENCY, 7),
}


def _plan_step(messages: Sequence[BaseMessage]) -> AIMessage | str:
    """The next turn of the run whose user message is ``"<plan> <run>"`` (the latest one, on
    a thread)."""
    start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    plan, run = str(messages[start].content).split()
    steps = PLANS[plan](int(run))
    turn = sum(isinstance(m, AIMessage) for m in messages[start + 1 :])
    if turn >= len(steps):
        return f"done {run}"
    name, args = steps[turn]
    return call(name, args, id=f"call_{run}_{turn}")


def _tools() -> list[BaseTool]:
    return [
        scripted_tool("read_file", lambda args: f"contents of {args['path']}"),
        scripted_tool("grep", lambda args: f"no match for {args['pattern']}"),
        scripted_tool("deploy", ToolException("disk full on host 12")),
    ]


@dataclass
class Fleet:
    """One agent (one model, one set of tools, one guard) that serves many runs."""

    integration: Integration
    guard: LoopGuardCallbackHandler | LoopGuardMiddleware
    tools: list[BaseTool]
    agent: Any
    thread: str | None = None

    def bodies(self, run: int) -> int:
        """Tool bodies that ran for ``run``."""
        return sum(
            args.get("run") == run
            for tool in self.tools
            for args in tool.arguments  # type: ignore[attr-defined]
        )

    def _inputs(self, plan: str, run: int) -> tuple[dict[str, Any], dict[str, Any]]:
        config: dict[str, Any] = {"recursion_limit": 100}
        if self.thread is not None:
            config["configurable"] = {"thread_id": self.thread}
        if self.integration == "handler":
            config["callbacks"] = [self.guard]
        return {"messages": [HumanMessage(f"{plan} {run}")]}, config

    def run(self, plan: str, run: int) -> Outcome:
        """Run ``plan`` as run number ``run``, to its end or its stop."""
        inputs, config = self._inputs(plan, run)
        try:
            result = self.agent.invoke(inputs, config)
        except LoopDetected as stop:
            return Outcome(stop.signal, self.bodies(run))
        assert result["messages"][-1].content == f"done {run}"
        return Outcome(None, self.bodies(run))

    async def arun(self, plan: str, run: int) -> Outcome:
        """:meth:`run`, with ``ainvoke``."""
        inputs, config = self._inputs(plan, run)
        try:
            result = await self.agent.ainvoke(inputs, config)
        except LoopDetected as stop:
            return Outcome(stop.signal, self.bodies(run))
        assert result["messages"][-1].content == f"done {run}"
        return Outcome(None, self.bodies(run))


def fleet(
    integration: Integration,
    *,
    thread: str | None = None,
    saver: InMemorySaver | None = None,
    **config: Any,
) -> Fleet:
    """A fresh agent with a fresh guard of ``integration``; with ``thread``, its runs are on
    that thread of an in-memory checkpointer (``saver``: another fleet's, as another process
    serving the same threads has)."""
    loop_config = LoopGuardConfig(max_turns=1_000, **config)
    model = ScriptedChatModel(script=[_plan_step], then="repeat")
    tools = _tools()
    if thread is not None and saver is None:
        saver = InMemorySaver()
    if integration == "handler":
        guard: LoopGuardCallbackHandler | LoopGuardMiddleware = LoopGuardCallbackHandler(
            loop_config
        )
        agent = create_agent(model, tools, checkpointer=saver)
    else:
        guard = LoopGuardMiddleware(loop_config)
        agent = create_agent(model, tools, middleware=[guard], checkpointer=saver)
    return Fleet(integration, guard, tools, agent, thread)


RUNS = 200
ASSIGNMENT = [(list(PLANS)[run % len(PLANS)], run) for run in range(RUNS)]


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_each_plan_alone_ends_as_the_spec_says(integration: Integration) -> None:
    """Run alone, each plan completes or stops with its signal after the expected tool bodies."""
    alone = {plan: fleet(integration).run(plan, 0) for plan in PLANS}
    assert alone == SPEC_OUTCOMES


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_concurrent_runs_on_threads_get_the_verdicts_they_get_alone(
    integration: Integration,
) -> None:
    """200 runs on 16 threads through one guard: each ends exactly as it does alone."""
    shared = fleet(integration)
    with ThreadPoolExecutor(max_workers=16) as pool:
        futures = {run: pool.submit(shared.run, plan, run) for plan, run in ASSIGNMENT}
        _, not_done = wait_all(futures.values(), timeout=120)
    assert not not_done, f"{len(not_done)} runs did not finish: a deadlock?"
    outcomes = {run: future.result() for run, future in futures.items()}
    assert outcomes == {run: SPEC_OUTCOMES[plan] for plan, run in ASSIGNMENT}
    assert shared.guard.status().active_runs == 0


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_concurrent_runs_under_asyncio_gather_get_the_verdicts_they_get_alone(
    integration: Integration,
) -> None:
    """200 runs gathered on one event loop through one guard: each ends as it does alone."""
    shared = fleet(integration)

    async def everything() -> list[Outcome]:
        runs = [shared.arun(plan, run) for plan, run in ASSIGNMENT]
        return await asyncio.wait_for(asyncio.gather(*runs), timeout=120)

    outcomes = asyncio.run(everything())
    assert outcomes == [SPEC_OUTCOMES[plan] for plan, _ in ASSIGNMENT]


# --- failing open -----------------------------------------------------------------------------


def _broken(self: object, *args: Any, **kwargs: Any) -> Any:
    msg = "injected detector failure"
    raise RuntimeError(msg)


@pytest.fixture
def warnings_logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Captures every record of level WARNING or above, from any logger (``.records``)."""
    caplog.set_level(logging.WARNING)
    return caplog


# The detector's decisions, digests in (its ``Judge``): the handler digests outside its lock
# and feeds ``digested_call``, ``digested_result`` and ``replay``, the graph guards call the
# public methods; all end up here.
@pytest.mark.parametrize("method", ["tool_call", "tool_result", "turn_start", "assistant_message"])
@pytest.mark.parametrize("integration", INTEGRATIONS)
@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_guard_failure_lets_the_run_complete_with_one_warning(
    integration: Integration,
    method: str,
    how: str,
    monkeypatch: pytest.MonkeyPatch,
    warnings_logged: pytest.LogCaptureFixture,
) -> None:
    """A detector that raises on every event never breaks the run; one warning says so."""
    monkeypatch.setattr(Judge, method, _broken)
    agent = fleet(integration)
    if how == "invoke":
        outcome = agent.run("productive", 1)
    else:
        outcome = asyncio.run(agent.arun("productive", 1))
    assert outcome == SPEC_OUTCOMES["productive"]
    assert [r.name for r in warnings_logged.records] == ["langchain_loop_guard"]
    assert "internal error" in warnings_logged.records[0].getMessage()


@pytest.mark.parametrize("method", ["export_state", "restore_state"])
def test_middleware_state_failure_lets_the_run_complete_with_one_warning(
    method: str,
    monkeypatch: pytest.MonkeyPatch,
    warnings_logged: pytest.LogCaptureFixture,
) -> None:
    """Failing to save or load the guard's graph state never breaks the run.

    A guard goes on with the detector that wrote the state it reads back (each step of a run,
    and the thread's next run); the state is loaded from the checkpoint when another process
    (another guard) serves the thread's next run.
    """
    monkeypatch.setattr(LoopDetector, method, _broken)
    agent = fleet("middleware", thread="t")
    assert agent.run("productive", 1) == SPEC_OUTCOMES["productive"]
    if method == "restore_state":
        agent = fleet("middleware", thread="t", saver=agent.agent.checkpointer)
    assert agent.run("productive", 2) == SPEC_OUTCOMES["productive"]
    assert [r.name for r in warnings_logged.records] == ["langchain_loop_guard"]


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_only_a_deliberate_stop_raises_while_the_guard_is_failing(
    integration: Integration,
    monkeypatch: pytest.MonkeyPatch,
    warnings_logged: pytest.LogCaptureFixture,
) -> None:
    """With results failing to register, repeated calls are still stopped, and only so."""
    monkeypatch.setattr(Judge, "tool_result", _broken)
    agent = fleet(integration)
    assert agent.run("repeat", 1) == SPEC_OUTCOMES["repeat"]
    assert agent.run("productive", 2) == SPEC_OUTCOMES["productive"]
    assert len(internal_errors(warnings_logged)) == 1


# --- hostile values through the handler's callbacks ---------------------------------------------


class _Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")


class _HostileError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str")


def _cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"path": "a.py"}
    value["self"] = value
    return value


def _deep(depth: int = 10_000) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        node.append([])
        node = node[0]
    return root


HOSTILE = [
    pytest.param(_cyclic(), id="cyclic"),
    pytest.param({"tree": _deep()}, id="10,000-deep"),
    pytest.param({"content": "x" * 50_000_000}, id="50 MB string", marks=pytest.mark.slow),
    pytest.param({1: "a", (2, 3): "b", None: "c", b"k": "d"}, id="non-string keys"),
    pytest.param({"value": _Hostile()}, id="raising dunders"),
    pytest.param({"nan": math.nan, "inf": -math.inf, "raw": b"\x00\xff"}, id="NaN and bytes"),
]


def internal_errors(log: pytest.LogCaptureFixture) -> list[str]:
    """The guard's reports of its own failures."""
    return [r.getMessage() for r in log.records if "internal error" in r.getMessage()]


class _Callbacks:
    """Drives a handler's callbacks the way LangChain calls them in one agent run."""

    def __init__(self, handler: LoopGuardCallbackHandler) -> None:
        self.handler = handler
        self.root = uuid4()
        handler.on_chain_start(None, {}, run_id=self.root, parent_run_id=None)

    def tool(self, inputs: Any, *, output: Any = "ok", error: BaseException | None = None) -> None:
        tool_run = uuid4()
        self.handler.on_tool_start(
            {"name": "write_file"},
            "<inputs>",
            run_id=tool_run,
            parent_run_id=self.root,
            inputs=inputs,
            tool_call_id=f"call_{tool_run.hex}",
        )
        if error is not None:
            self.handler.on_tool_error(error, run_id=tool_run, parent_run_id=self.root)
        else:
            self.handler.on_tool_end(output, run_id=tool_run, parent_run_id=self.root)

    def end(self) -> None:
        self.handler.on_chain_end({}, run_id=self.root, parent_run_id=None)


@pytest.mark.parametrize("value", HOSTILE)
def test_handler_stops_repeated_hostile_calls_and_never_fails(
    value: Any, warnings_logged: pytest.LogCaptureFixture
) -> None:
    """Hostile arguments are digested like any others: the third identical call is stopped."""
    run = _Callbacks(LoopGuardCallbackHandler(LoopGuardConfig()))
    run.tool(value, output=value)
    run.tool(value, output=value)
    with pytest.raises(LoopDetected) as stop:
        run.tool(value, output=value)
    run.end()
    assert stop.value.signal is Signal.REPEATED_TOOL_CALL
    assert internal_errors(warnings_logged) == []


@pytest.mark.parametrize(
    "error", [_HostileError(), RuntimeError(_Hostile()), ToolException(_cyclic())]
)
def test_handler_digests_hostile_errors_and_outputs_without_failing(
    error: BaseException, warnings_logged: pytest.LogCaptureFixture
) -> None:
    """Errors whose text cannot be rendered, and hostile outputs, are taken in stride."""
    run = _Callbacks(LoopGuardCallbackHandler(LoopGuardConfig()))
    run.tool({"n": 1}, error=error)
    run.tool({"n": 2}, output=_Hostile())
    run.tool({"n": 3}, output=ToolMessage.model_construct(content=_cyclic(), status="success"))
    run.end()
    assert internal_errors(warnings_logged) == []


# --- no content leaks ---------------------------------------------------------------------------

SECRETS = {
    "argument": "canary-argument-Zq81",
    "output": "canary-output-Lm42",
    "error": "canary-error-Pt77",
    "message": "canary-message-Wy09",
    "prompt": "canary-prompt-Kc35",
}


def assert_no_secret(where: str, text: str) -> None:
    """None of :data:`SECRETS` appears in ``text``."""
    found = [name for name, secret in SECRETS.items() if secret in text]
    assert not found, f"{where} leaks the {', '.join(found)}"


def _leaky_step(messages: Sequence[BaseMessage]) -> AIMessage | str:
    """A loop that handles a secret in every way: repeated reads, errors and narration."""
    turn = sum(isinstance(m, AIMessage) for m in messages)
    if turn >= 12:
        return f"Gave up on {SECRETS['message']}."
    if turn % 2:
        step = call("deploy", {"token": SECRETS["argument"]})
    else:
        step = call("read_file", {"path": SECRETS["argument"]})
    return step.model_copy(update={"content": f"Trying {SECRETS['message']} again."})


def _leaky_tools() -> list[BaseTool]:
    return [
        scripted_tool("read_file", f"contents: {SECRETS['output']}"),
        scripted_tool("deploy", ToolException(f"denied: {SECRETS['error']}")),
    ]


class _TraceRecorder(BaseCallbackHandler):
    """Keeps the custom events the guard dispatches to the trace."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data))


def _exception_texts(error: BaseException) -> str:
    copy = pickle.loads(pickle.dumps(error))
    return " ".join([str(error), repr(error), repr(error.args), repr(vars(error)), str(copy)])


def _run_leaky(agent: Any, config: dict[str, Any], *, mode: str) -> tuple[list[BaseMessage], str]:
    inputs = {"messages": [HumanMessage(f"Deploy with {SECRETS['prompt']}.")]}
    try:
        result = agent.invoke(inputs, config)
    except LoopDetected as stop:
        assert mode == "on"
        return [], _exception_texts(stop)
    return list(result["messages"]), ""


@pytest.mark.parametrize("mode", ["on", "observe"])
def test_handler_never_leaks_content(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """Logs, stop exceptions, trace events, status and inspect carry no content."""
    ticks = iter(range(0, 10_000, 100))
    handler = LoopGuardCallbackHandler(
        LoopGuardConfig(mode=mode, max_turns=2), clock=lambda: float(next(ticks))
    )
    recorder = _TraceRecorder()
    model = ScriptedChatModel(script=[_leaky_step], then="repeat")
    agent = create_agent(model, _leaky_tools())
    config = {"callbacks": [handler, recorder], "recursion_limit": 40}
    with caplog.at_level(logging.DEBUG):
        _, raised = _run_leaky(agent, config, mode=mode)
    assert all(secret in repr(model.seen) for secret in SECRETS.values())
    assert (raised != "") == (mode == "on")
    assert_no_secret("a LoopDetected", raised)
    assert caplog.records
    for record in caplog.records:
        assert_no_secret(f"log record {record.name}", record.getMessage())
        assert_no_secret(f"log record {record.name} extras", repr(vars(record)))
    assert recorder.events
    assert_no_secret("trace events", json.dumps(recorder.events, default=repr))
    status, inspection = handler.status(), handler.inspect()
    assert inspection is not None
    for shown in (status, inspection):
        assert_no_secret("status and inspect", str(shown) + shown._repr_html_())


@pytest.mark.parametrize("on_stop", ["raise", "end"])
def test_middleware_never_leaks_content(on_stop: str, caplog: pytest.LogCaptureFixture) -> None:
    """Logs, stop exceptions, added messages and the checkpointed guard state carry no content."""
    saver = InMemorySaver()
    guard = LoopGuardMiddleware(LoopGuardConfig(max_turns=2), nudges=1, on_stop=on_stop)
    model = ScriptedChatModel(script=[_leaky_step], then="repeat")
    agent = create_agent(model, _leaky_tools(), middleware=[guard], checkpointer=saver)
    config = {"configurable": {"thread_id": "leaks"}, "recursion_limit": 40}
    with caplog.at_level(logging.DEBUG):
        messages, raised = _run_leaky(agent, config, mode="on")
    assert all(secret in repr(model.seen) for secret in SECRETS.values())
    assert (raised != "") == (on_stop == "raise")
    assert_no_secret("a LoopDetected", raised)
    for record in caplog.records:
        assert_no_secret(f"log record {record.name}", record.getMessage())
        assert_no_secret(f"log record {record.name} extras", repr(vars(record)))
    assert_no_secret("guard messages", repr([m.content for m in guard_messages(messages)]))
    state = agent.get_state(config).values
    assert state.get("loop_guard")
    assert_no_secret("checkpointed guard state", json.dumps(state["loop_guard"]))
    checkpoint = saver.get_tuple(config)
    assert checkpoint is not None
    saved = checkpoint.checkpoint["channel_values"]["loop_guard"]
    assert_no_secret("saved checkpoint", json.dumps(saved))
    inspection = guard.inspect(state)
    assert inspection is not None
    for shown in (guard.status(), inspection):
        assert_no_secret("status and inspect", str(shown) + shown._repr_html_())


def test_detector_state_never_holds_content() -> None:
    """Exported detector state, after every kind of event with a secret, holds none."""
    detector = LoopDetector(LoopGuardConfig(mode="observe"))
    for _ in range(4):
        detector.turn_start()
        detector.assistant_message(f"Trying {SECRETS['message']}", [("read_file", {})])
        detector.tool_call("read_file", {"path": SECRETS["argument"]}, "c1")
        detector.tool_result("read_file", f"got {SECRETS['output']}", call_id="c1")
        detector.tool_call("deploy", {"token": SECRETS["argument"]}, "c2")
        detector.tool_result("deploy", error=ValueError(SECRETS["error"]), call_id="c2")
    assert_no_secret("exported state", json.dumps(detector.export_state()))
    assert_no_secret("snapshot", repr(detector.snapshot()))
