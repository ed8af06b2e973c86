"""Agents and loops shared by the middleware, node-guard and persistence tests.

Every loop of SPEC §2 as a scripted model plus its tools, and the two ways of running one: a
``create_agent`` agent with ``LoopGuardMiddleware``, or a hand-built ``StateGraph`` with
``LoopGuardNode`` wired as the hub between model and tools. The scripted model checks the
history it is called with, every time, the way a provider would: a model answer's tool calls
must all be answered by the tool messages right after it. So no test passes with a nudge
between a call and its answer, or with a call left unanswered after ``on_stop="end"``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._integrations._graph_state import LoopGuardState
from langchain_loop_guard._integrations._middleware import LoopGuardMiddleware
from langchain_loop_guard._integrations._node import LoopGuardNode
from langchain_loop_guard.testing import (
    ScriptedChatModel,
    assert_valid_history,
    call,
    calls,
    scripted_tool,
)

Kind = Literal["middleware", "node"]
KINDS: tuple[Kind, ...] = ("middleware", "node")

AGAIN = "Thanks. One more question."
"""A user message after a run; the model answers it with :data:`FINE`."""
FINE = "Fine."


Step = Callable[[int], AIMessage | str]


MAX_LOOP_TURNS = 40
"""A loop the guard has not stopped after this many model turns fails its test (no hang)."""


Answer = Callable[[Sequence[BaseMessage]], AIMessage | str]


def bounded(answer: Answer) -> Answer:
    """``answer``, checking the history first and failing after :data:`MAX_LOOP_TURNS` turns."""
    counter = itertools.count()

    def checked(messages: Sequence[BaseMessage]) -> AIMessage | str:
        assert_valid_history(messages)
        assert next(counter) < MAX_LOOP_TURNS, "the guard never stopped this loop"
        return answer(messages)

    return checked


def scripted(answer: Answer) -> ScriptedChatModel:
    """A scripted model that answers with ``answer`` (:func:`bounded`) on every turn."""
    return ScriptedChatModel(script=[bounded(answer)], then="repeat")


def driver(step: Step) -> Answer:
    """A model step that answers :data:`AGAIN` with :data:`FINE` and otherwise gives
    ``step(n)`` for its n-th loop turn (:func:`bounded`)."""
    counter = itertools.count()

    def answer(messages: Sequence[BaseMessage]) -> AIMessage | str:
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.content == AGAIN:
            return FINE
        return step(next(counter))

    return bounded(answer)


def model_of(step: Step) -> ScriptedChatModel:
    """A scripted model that follows ``step`` forever (see :func:`driver`)."""
    return ScriptedChatModel(script=[driver(step)], then="repeat")


def contents(arguments: dict[str, Any]) -> str:
    """A deterministic tool result that depends on the arguments."""
    return f"contents of {sorted(arguments.items())}"


@dataclass(frozen=True)
class Loop:
    """A looping agent: its model's n-th turn, its tools, the signal that must stop it."""

    name: str
    signal: Signal
    step: Step
    tools: Callable[[], list[BaseTool]]
    config: dict[str, Any] = field(default_factory=dict)
    tool: str | None = None


def _reader() -> list[BaseTool]:
    return [scripted_tool("read_file", contents)]


def _failing() -> list[BaseTool]:
    return [scripted_tool("deploy", ToolException("disk full at /var/tmp/x123"))]


def _growing_editor() -> list[BaseTool]:
    """An edit tool whose view grows by the same line each time it is applied."""
    views = [f"[File: a.py ({n} lines)]\n" + "x = 1\n" * n for n in range(1, 30)]
    return [scripted_tool("edit", *views)]


def _finder() -> list[BaseTool]:
    """A search that never finds the name it is given."""
    return [scripted_tool("find_file", lambda args: f'No matches found for "{args["name"]}"')]


def _alternating_failures() -> list[BaseTool]:
    """Each attempt fails, the error text alternating between two (SPEC §11 R3)."""
    errors = [ToolException("SyntaxError: invalid syntax"), ToolException("NameError: x")]
    return [scripted_tool("run_code", *errors, then="cycle")]


def _booking() -> list[BaseTool]:
    """A booking that always fails the same way, and a think step that says nothing (R4)."""
    return [
        scripted_tool("book", ToolException("Error: payment amount does not add up")),
        scripted_tool("think", ""),
    ]


def _poller() -> list[BaseTool]:
    return [scripted_tool("poll", contents)]


LOOPS: tuple[Loop, ...] = (
    Loop(
        "repeat",
        Signal.REPEATED_TOOL_CALL,
        lambda n: call("read_file", {"path": "a.txt"}),
        _reader,
        tool="read_file",
    ),
    Loop(
        "cycle",
        Signal.TOOL_CYCLE,
        lambda n: call("read_file", {"path": "ab"[n % 2]}),
        _reader,
        tool="read_file",
    ),
    Loop(
        "window",
        Signal.TOOL_FREQUENCY,
        lambda n: call("read_file", {"path": "a" if n % 2 == 0 else f"other{n}"}),
        _reader,
        tool="read_file",
    ),
    Loop(
        "no_progress",
        Signal.NO_PROGRESS,
        # a 7-call round, each pair swapped every other round: no fixed cycle, sequence or
        # path repeats; its results echo the path only
        lambda n: call("read_file", {"path": ("abcdefg", "badcfeg")[n // 7 % 2][n % 7]}),
        _reader,
        config={"no_new_info_calls": 0},
        tool="read_file",
    ),
    Loop(
        "repeated_error",
        Signal.REPEATED_TOOL_ERROR,
        lambda n: call("deploy", {"attempt": n}),
        _failing,
        tool="deploy",
    ),
    Loop(
        "repeated_assistant_response",
        Signal.REPEATED_ASSISTANT_RESPONSE,
        lambda n: calls(("poll", {"n": n}), content="Checking again."),
        _poller,
        config={"progress_aware": False},
    ),
    Loop(
        "unknown_tool",
        Signal.REPEATED_TOOL_CALL,
        lambda n: call("delete_everything", {"confirm": True}),
        _reader,
        tool="delete_everything",
    ),
    Loop(
        "repeated_sequence",
        Signal.REPEATED_SEQUENCE,
        lambda n: call("read_file", {"path": "abcd"[n % 4]}),
        _reader,
        tool="read_file",
    ),
    Loop(
        "near_repeat",
        Signal.NEAR_REPEAT,
        lambda n: call("edit", {"line": 1, "text": "x = 1"}),
        _growing_editor,
        tool="edit",
    ),
    Loop(
        "no_new_info",
        Signal.NO_NEW_INFO,
        lambda n: call("find_file", {"name": f"Handler{n}"}),
        _finder,
        tool="find_file",
    ),
    Loop(
        "failing_turns",
        Signal.FAILING_TURNS,
        lambda n: call("run_code", {"attempt": n}),
        _alternating_failures,
    ),
    Loop(
        "same_failing_call_between_think_steps",
        Signal.REPEATED_TOOL_ERROR,
        lambda n: call("book", {"flight": "HAT023"}) if n % 2 == 0 else call("think", {"i": n}),
        _booking,
        tool="book",
    ),
)


class GraphState(MessagesState, LoopGuardState):
    """The state of the hand-built graph: messages plus the guard's key."""


def node_graph(
    model: ScriptedChatModel,
    tools: Sequence[BaseTool],
    guard: LoopGuardNode,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    hub: bool = True,
    interrupt_before: Sequence[str] | None = None,
) -> Any:
    """``START -> loop_guard -> (tools | agent | END)``, ``agent -> loop_guard``,
    ``tools -> loop_guard``.

    With ``hub=False`` the tools go straight back to the model (``tools -> agent``) and the
    guard sees their results one model call later.
    """
    bound = model.bind_tools(list(tools))

    def agent(state: GraphState) -> dict[str, list[BaseMessage]]:
        return {"messages": [bound.invoke(state["messages"])]}

    builder = StateGraph(GraphState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(list(tools)))
    builder.add_node("loop_guard", guard)
    builder.add_edge(START, "loop_guard")
    builder.add_edge("agent", "loop_guard")
    builder.add_edge("tools", "loop_guard" if hub else "agent")
    builder.add_conditional_edges("loop_guard", guard.route, list(guard.destinations))
    return builder.compile(checkpointer=checkpointer, interrupt_before=list(interrupt_before or ()))


@dataclass
class Harness:
    """One agent of either kind, with its guard, model, tools and thread."""

    kind: Kind
    guard: LoopGuardMiddleware | LoopGuardNode
    model: ScriptedChatModel
    tools: list[BaseTool]
    graph: Any
    checkpointer: BaseCheckpointSaver[Any]
    thread: str = "thread-1"

    @property
    def config(self) -> dict[str, Any]:
        """The run configuration (the thread)."""
        return {"configurable": {"thread_id": self.thread}}

    def invoke(self, payload: Any = None, text: str = "Please do the task.") -> Any:
        """Invoke the agent with a user message ``text`` (or with ``payload``)."""
        value = {"messages": [HumanMessage(content=text)]} if payload is None else payload
        return self.graph.invoke(value, self.config)

    def resume(self, value: Any = None) -> Any:
        """Go on after a pause: ``Command(resume=value)``, or ``None`` after a breakpoint."""
        return self.graph.invoke(None if value is None else Command(resume=value), self.config)

    def state(self) -> dict[str, Any]:
        """The thread's current state values."""
        values: dict[str, Any] = self.graph.get_state(self.config).values
        return values

    def tool(self, name: str) -> Any:
        """The tool named ``name``."""
        return next(t for t in self.tools if t.name == name)


def harness(
    kind: Kind,
    model: ScriptedChatModel,
    tools: Sequence[BaseTool],
    *,
    config: dict[str, Any] | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    interrupt_before: Sequence[str] | None = None,
    hub: bool = True,
    system_prompt: str | None = None,
    **guard_options: Any,
) -> Harness:
    """An agent of ``kind`` guarded with ``LoopGuardConfig(**config)`` and ``guard_options``."""
    loop_config = LoopGuardConfig(**(config or {}))
    saver = checkpointer if checkpointer is not None else InMemorySaver()
    guard: LoopGuardMiddleware | LoopGuardNode
    if kind == "middleware":
        guard = LoopGuardMiddleware(loop_config, **guard_options)
        graph = create_agent(
            model,
            list(tools),
            system_prompt=system_prompt,
            middleware=[guard],
            checkpointer=saver,
            interrupt_before=list(interrupt_before or ()),
        )
    else:
        guard = LoopGuardNode(loop_config, **guard_options)
        graph = node_graph(
            model,
            tools,
            guard,
            checkpointer=saver,
            hub=hub,
            interrupt_before=interrupt_before,
        )
    return Harness(kind, guard, model, list(tools), graph, saver)


def loop_harness(kind: Kind, loop: Loop, **options: Any) -> Harness:
    """The agent of ``kind`` running ``loop``."""
    config = {**loop.config, **options.pop("config", {})}
    return harness(kind, model_of(loop.step), loop.tools(), config=config, **options)


def stop_message(messages: Sequence[BaseMessage]) -> AIMessage:
    """The guard's final message of an ended run."""
    last = messages[-1]
    assert isinstance(last, AIMessage)
    assert last.name == "loop_guard"
    assert not last.tool_calls
    return last


def guard_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages the guard added: refused-call answers, nudges and stop messages."""
    return [m for m in messages if "[loop-guard]" in str(m.content) or m.name == "loop_guard"]
