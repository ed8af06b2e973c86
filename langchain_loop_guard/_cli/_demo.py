"""The ``loop-guard demo``: a real, offline agent run that falls into a loop and is stopped.

Each scenario (:mod:`~._demo_scenarios`) runs a LangChain agent on a scripted model and tools.
Its timeline, recorded by a callback handler and the guard's verdict listener, names tools and
digests, never content. Scripts are finite and the graph has a recursion limit, so a demo ends
even if the guard failed to stop it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, UsageMetadata
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from langgraph.types import Send

from langchain_loop_guard._cli._demo_kinds import (
    INTEGRATIONS,
    LOOP_KINDS,
    Integration,
    LoopKind,
    describe_scenarios,
)
from langchain_loop_guard._cli._demo_scenarios import SCENARIOS, Scenario, expected_signal
from langchain_loop_guard._core._canonical import call_signature
from langchain_loop_guard._core._config import LoopGuardConfig, Mode
from langchain_loop_guard._core._detector import Signal, Verdict
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._remedy import remedy_text
from langchain_loop_guard._core._signature import error_key, outcome_digest
from langchain_loop_guard._core._status import text_table
from langchain_loop_guard._integrations._graph_state import LoopGuardState
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._middleware import LoopGuardMiddleware
from langchain_loop_guard._integrations._node import LoopGuardNode
from langchain_loop_guard._integrations._runtime import GuardRuntime
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel

__all__ = [
    "DemoResult",
    "Event",
    "GuardVerdict",
    "ModelTurn",
    "NotRun",
    "SentBack",
    "ToolRun",
    "expected_signal",
    "render",
    "run_demo",
]

_RECURSION_LIMIT = 500  # a backstop only: every script ends long before
_SHORT = 8  # digest characters shown, as ``inspect`` shows them
_LOOP_ACTIONS = ("observe", "block", "abort")  # a loop reported, not a soft warning


# --- what the timeline records -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """The model answered: the tool calls it asked for, or a text answer (its digest)."""

    calls: tuple[tuple[str, str], ...]
    answer: str | None


@dataclass(frozen=True, slots=True)
class ToolRun:
    """A tool ran and returned (``"ok"``) or failed (``"error"``); digests only."""

    tool: str
    digest: str
    outcome: Literal["ok", "error"]
    result: str


@dataclass(frozen=True, slots=True)
class NotRun:
    """A call the model asked for was answered without running (e.g. an unknown tool)."""

    tool: str
    digest: str
    unknown_tool: bool


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """A verdict the guard reported (warning, observed loop, stop, or a block after a stop)."""

    verdict: Verdict


@dataclass(frozen=True, slots=True)
class SentBack:
    """The demo's reviewer sent a text answer back to the model."""


Event = ModelTurn | ToolRun | NotRun | GuardVerdict | SentBack


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What happened in one demo run: its options, its timeline (``events``, in order), and the
    :class:`~langchain_loop_guard.LoopDetected` it ended with (``raised``) or the type name of any
    other exception (``error``: a bug)."""

    loop: LoopKind
    mode: Mode
    integration: Integration
    locale: str
    events: tuple[Event, ...]
    raised: LoopDetected | None = None
    error: str | None = None

    @property
    def stop(self) -> Verdict | None:
        """The verdict that stopped the run (``"on"`` mode), or ``None``."""
        for event in self.events:
            if (
                isinstance(event, GuardVerdict)
                and event.verdict.stops
                and not event.verdict.tripped
            ):
                return event.verdict
        if self.raised is not None:
            return self.raised.verdict
        return None

    @property
    def first_signal(self) -> Signal | None:
        """The first loop signal the guard reported (stop or observe), soft warnings aside."""
        for event in self.events:
            if isinstance(event, GuardVerdict) and event.verdict.action in _LOOP_ACTIONS:
                return event.verdict.signal
        return None

    @property
    def observed(self) -> int:
        """How many loops the guard reported without stopping (observe mode)."""
        return sum(
            1 for e in self.events if isinstance(e, GuardVerdict) and e.verdict.action == "observe"
        )

    @property
    def turns(self) -> int:
        """Model calls that answered."""
        return sum(1 for e in self.events if isinstance(e, ModelTurn))

    @property
    def tool_runs(self) -> int:
        """Tool calls whose tool body ran."""
        return sum(1 for e in self.events if isinstance(e, ToolRun))

    @property
    def not_run(self) -> int:
        """Tool calls the model asked for that never ran (blocked, unknown tool, run stopped)."""
        asked = sum(len(e.calls) for e in self.events if isinstance(e, ModelTurn))
        return asked - self.tool_runs


def _short(value: str) -> str:
    return value[:_SHORT]


class _Timeline:
    """The events of one run, appended from callback threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = []

    def add(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def events(self) -> tuple[Event, ...]:
        with self._lock:
            return tuple(self._events)


class _Recorder(BaseCallbackHandler):
    """Records model turns, tool runs and unanswered calls, digests only. Listed before the
    guard, it has seen an event the guard raises in (the handlers after it are not called);
    it never raises itself."""

    run_inline = True

    def __init__(self, timeline: _Timeline, tools: frozenset[str]) -> None:
        self._timeline = timeline
        self._tools = tools
        self._lock = threading.Lock()
        self._asked: dict[str, tuple[str, str]] = {}  # call id -> (tool, call digest)
        self._ran: set[str] = set()  # call ids whose tool body started
        self._answered: set[str] = set()  # call ids already on the timeline
        self._running: dict[UUID, tuple[str, str, str | None]] = {}  # run id -> tool, digest, id

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        # Calls the model asked for that were answered without running show up here, as tool
        # messages in the next model input (an unknown tool, or a call a guard blocked).
        with self._lock:
            for message in messages[0] if messages else ():
                if not isinstance(message, ToolMessage):
                    continue
                call_id = message.tool_call_id
                if call_id in self._ran or call_id in self._answered or call_id not in self._asked:
                    continue
                self._answered.add(call_id)
                tool, digest = self._asked[call_id]
                self._timeline.add(NotRun(tool, digest, unknown_tool=tool not in self._tools))

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        generation = response.generations[0][0] if response.generations else None
        message = getattr(generation, "message", None)
        if not isinstance(message, AIMessage):
            return
        calls = []
        with self._lock:
            for tool_call in message.tool_calls:
                digest = _short(call_signature(tool_call["name"], tool_call["args"]))
                calls.append((tool_call["name"], digest))
                if tool_call["id"]:
                    self._asked[tool_call["id"]] = (tool_call["name"], digest)
        answer = None
        if not calls:
            answer = _short(outcome_digest(message.text))
        self._timeline.add(ModelTurn(tuple(calls), answer))

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = str(serialized.get("name") or kwargs.get("name") or "?")
        call_id = kwargs.get("tool_call_id")
        digest = _short(call_signature(name, inputs if inputs is not None else input_str))
        with self._lock:
            self._running[run_id] = (name, digest, call_id)
            if call_id:
                self._ran.add(call_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        failed = isinstance(output, ToolMessage) and output.status == "error"
        content = output.content if isinstance(output, ToolMessage) else output
        self._ended(run_id, content, failed=failed)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._ended(run_id, error, failed=True, shown=not isinstance(error, LoopDetected))

    def _ended(self, run_id: UUID, result: object, *, failed: bool, shown: bool = True) -> None:
        """A tool run ended: its result's digest on the timeline (not a stop's)."""
        with self._lock:
            started = self._running.pop(run_id, None)
        if started is not None and shown:
            name, digest, _ = started
            key = error_key(name, result) if failed else outcome_digest(result)
            self._timeline.add(ToolRun(name, digest, "error" if failed else "ok", _short(key)))


# --- the agents ---------------------------------------------------------------------------------


_TASK = "Find the retry limit, and fix what needs fixing."


def _needs_review(message: BaseMessage) -> bool:
    return (
        isinstance(message, AIMessage) and not message.tool_calls and "Source:" not in message.text
    )


class _Reviewer(AgentMiddleware[AgentState[Any], Any, Any]):
    """Sends a text answer that cites no source back to the model: a common output check, which
    loops when the model gives the same answer each time. It adds no message (a human message
    would start a new run for the graph guards)."""

    def __init__(self, timeline: _Timeline) -> None:
        super().__init__()
        self._timeline = timeline

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Jump back to the model when the answer cites no source."""
        del runtime
        if not _needs_review(state["messages"][-1]):
            return None
        self._timeline.add(SentBack())
        return {"jump_to": "model"}


class _GraphState(MessagesState, LoopGuardState):
    """The hand-built graph's state: the messages and the node guard's own key."""


class _DemoRun:
    """One run of a scenario under one integration, recorded on a timeline."""

    def __init__(
        self,
        scenario: Scenario,
        config: LoopGuardConfig,
        record_to: str | os.PathLike[str] | None = None,
        thread: str | None = None,
    ) -> None:
        self.scenario = scenario
        self.thread = thread
        self.config = config
        self.record_to = record_to
        self.timeline = _Timeline()
        self.model = ScriptedChatModel(script=list(scenario.script), usage=_demo_usage)
        self.recorder = _Recorder(self.timeline, frozenset(t.name for t in scenario.tools))
        self._unsubscribe: list[Callable[[], None]] = []
        self._guards: list[GuardRuntime] = []

    def watch(self, guard: GuardRuntime) -> None:
        """Put ``guard``'s verdicts on the timeline, as it reports them."""
        self._guards.append(guard)
        timeline = self.timeline
        self._unsubscribe.append(
            guard.add_verdict_listener(lambda _run, verdict: timeline.add(GuardVerdict(verdict)))
        )

    def close(self) -> None:
        """Stop listening to the guards, and close the trace they record to."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        for guard in self._guards:
            if guard.recorder is not None:
                guard.recorder.close()

    def run_config(self, *guards: BaseCallbackHandler, thread: str | None = None) -> RunnableConfig:
        """The run's config: the recorder goes first, so it sees an event the guard stops; a
        graph guard's run has a thread (its name in a recorded trace, ``demo-repeat``…)."""
        config: RunnableConfig = {
            "recursion_limit": _RECURSION_LIMIT,
            "callbacks": [self.recorder, *guards],
        }
        if thread is not None:
            config["configurable"] = {"thread_id": thread}
        return config

    def reviewers(self) -> list[AgentMiddleware[Any, Any, Any]]:
        """The reviewer middleware, for the scenario that has one."""
        return [_Reviewer(self.timeline)] if self.scenario.review else []

    def with_callbacks(self) -> None:
        """``create_agent`` with ``LoopGuardCallbackHandler`` in the run's callbacks."""
        handler = LoopGuardCallbackHandler(self.config, record_to=self.record_to)
        self.watch(handler)
        agent = create_agent(self.model, list(self.scenario.tools), middleware=self.reviewers())
        agent.invoke({"messages": [HumanMessage(_TASK)]}, self.run_config(handler))

    def with_middleware(self) -> None:
        """``create_agent`` with ``LoopGuardMiddleware``."""
        guard = LoopGuardMiddleware(self.config, record_to=self.record_to)
        self.watch(guard)
        # after_model hooks run last to first: the guard, listed last, sees each answer before
        # the reviewer can send it back
        agent = create_agent(
            self.model, list(self.scenario.tools), middleware=[*self.reviewers(), guard]
        )
        agent.invoke({"messages": [HumanMessage(_TASK)]}, self.run_config(thread=self.thread))

    def with_node(self) -> None:
        """A hand-built ``StateGraph``: model, node guard and ``ToolNode``, as the guard's
        documentation wires them (tool results go back through the guard)."""
        guard = LoopGuardNode(self.config, record_to=self.record_to)
        self.watch(guard)
        tools = list(self.scenario.tools)
        model = self.model.bind_tools(tools)

        def agent(state: _GraphState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        builder = StateGraph(_GraphState)
        builder.add_node("agent", agent)
        builder.add_node("tools", ToolNode(tools))
        builder.add_node("loop_guard", guard)
        builder.add_edge(START, "agent")
        builder.add_edge("agent", "loop_guard")
        builder.add_edge("tools", "loop_guard")
        timeline, review = self.timeline, self.scenario.review

        def route(state: _GraphState) -> str | list[Send]:
            destination = guard.route(state)
            if review and destination == END and _needs_review(state["messages"][-1]):
                timeline.add(SentBack())  # the output check sends it back to the model
                return "agent"
            return destination

        builder.add_conditional_edges("loop_guard", route, list(guard.destinations))
        graph = builder.compile()
        graph.invoke({"messages": [HumanMessage(_TASK)]}, self.run_config(thread=self.thread))


# --- running and rendering ----------------------------------------------------------------------


def run_demo(
    loop: LoopKind = "repeat",
    *,
    mode: Mode = "on",
    locale: str = "en",
    integration: Integration = "callbacks",
    record_to: str | os.PathLike[str] | None = None,
    _marker: str = "",
) -> DemoResult:
    """Run the ``loop`` scenario once, under the built-in defaults with ``mode`` and ``locale``
    (so it behaves the same everywhere), and return what happened. ``record_to`` is the guard's
    (its events appended to that trace, for ``loop-guard replay``). ``_marker`` is appended to
    every argument, output and answer of the script (the tests check it never shows)."""
    if loop not in SCENARIOS:
        msg = f"unknown loop {loop!r}; expected one of {', '.join(LOOP_KINDS)}"
        raise ValueError(msg)
    if integration not in INTEGRATIONS:
        msg = f"unknown integration {integration!r}; expected one of {', '.join(INTEGRATIONS)}"
        raise ValueError(msg)
    config = LoopGuardConfig(mode=mode, locale=locale)
    run = _DemoRun(SCENARIOS[loop](_marker), config, record_to, thread=f"demo-{loop}")
    raised: LoopDetected | None = None
    error: str | None = None
    try:
        if integration == "callbacks":
            run.with_callbacks()
        elif integration == "middleware":
            run.with_middleware()
        else:
            run.with_node()
    except LoopDetected as exc:
        raised = exc
    except Exception as exc:  # noqa: BLE001 - reported in the result, never content
        error = type(exc).__name__
    finally:
        run.close()
    return DemoResult(
        loop=loop,
        mode=mode,
        integration=integration,
        locale=locale,
        events=run.timeline.events(),
        raised=raised,
        error=error,
    )


def _render_event(event: Event, locale: str) -> tuple[str, str]:
    tr = translator(locale)
    if isinstance(event, ModelTurn):
        if event.calls:
            calls = ", ".join(f"{tool} #{digest}" for tool, digest in event.calls)
            return tr.gettext("model"), tr.gettext("calls {calls}").format(calls=calls)
        return tr.gettext("model"), tr.gettext("answers (text #{digest})").format(
            digest=event.answer
        )
    if isinstance(event, ToolRun):
        outcome = tr.gettext("ok") if event.outcome == "ok" else tr.gettext("error")
        return tr.gettext("tool"), tr.gettext(
            "{tool} #{digest} → {outcome}, result #{result}"
        ).format(tool=event.tool, digest=event.digest, outcome=outcome, result=event.result)
    if isinstance(event, NotRun):
        text = (
            tr.gettext("{tool} #{digest} → not run: no such tool")
            if event.unknown_tool
            else tr.gettext("{tool} #{digest} → not run")
        )
        return tr.gettext("tool"), text.format(tool=event.tool, digest=event.digest)
    if isinstance(event, SentBack):
        return tr.gettext("reviewer"), tr.gettext("sends the answer back: no source cited")
    verdict = event.verdict
    signal = verdict.signal.value if verdict.signal else "-"
    return tr.gettext("loop guard"), f"[{verdict.action} {signal}] {verdict.message}"


def render(result: DemoResult) -> list[str]:
    """The demo's report as lines of text, in the demo's locale."""
    tr = translator(result.locale)
    lines = [
        tr.gettext("loop-guard demo: loop {loop}, mode {mode}, integration {integration}").format(
            loop=result.loop, mode=result.mode, integration=result.integration
        ),
        describe_scenarios(result.locale)[result.loop],
        "",
    ]
    rows = [_render_event(event, result.locale) for event in result.events]
    number = len(str(len(rows)))
    lines += text_table(
        [(f"{i:>{number}}", actor, text) for i, (actor, text) in enumerate(rows, 1)], indent=""
    )
    lines.append("")
    stop = result.stop
    if result.error is not None:
        lines.append(tr.gettext("Result: the run failed with {error}.").format(error=result.error))
    elif stop is not None and stop.signal is not None:
        lines.append(
            tr.gettext("Result: the loop guard stopped the run ({signal}).").format(
                signal=stop.signal.value
            )
        )
        remedy = remedy_text(stop.signal, stop.tool, result.locale)
        shown = stop.message if remedy in stop.message else f"{stop.message} {remedy}"
        lines.append(f"  {shown}")
        if result.raised is not None:
            exc = result.raised
            lines.append(
                "  "
                + tr.gettext(
                    "LoopDetected: signal={signal} tool={tool} count={count} threshold={threshold}"
                ).format(
                    signal=exc.signal.value,
                    tool=exc.tool or "-",
                    count=exc.count,
                    threshold=exc.threshold,
                )
            )
    elif result.mode == "off":
        lines.append(tr.gettext("Result: the run went to its end; nothing was checked (mode off)."))
    elif result.observed:
        lines.append(
            tr.gettext(
                "Result: the run went to its end (observe mode: loops are reported, never "
                "stopped). Loops reported: {count}."
            ).format(count=result.observed)
        )
    else:
        lines.append(tr.gettext("Result: the run went to its end; no loop was detected."))
    lines.append(
        tr.gettext("Model turns: {turns}, tool runs: {runs}, calls not run: {not_run}.").format(
            turns=result.turns, runs=result.tool_runs, not_run=result.not_run
        )
    )
    return lines


def _demo_usage(call: int) -> UsageMetadata:
    """The token usage the demo's model reports for its ``call``-th answer, as a provider
    would: the prompt grows with the conversation (the numbers are made up, and fixed)."""
    prompt = 1_800 + 450 * call
    return UsageMetadata(input_tokens=prompt, output_tokens=60, total_tokens=prompt + 60)
