"""``LoopGuardNode``: the loop guard as a node of a hand-built LangGraph ``StateGraph``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.graph import END
from langgraph.types import Command, Send

from langchain_loop_guard._integrations._graph_guard import GraphGuard, check_name, graph_config
from langchain_loop_guard._integrations._graph_pass import last_ai
from langchain_loop_guard._integrations._graph_state import STATE_KEY
from langchain_loop_guard._integrations._guard_messages import is_human_input
from langchain_loop_guard._integrations._repair import repair_update
from langchain_loop_guard._integrations._runtime import ConfigInput, bad_argument
from langchain_loop_guard._integrations._stop import OnStop

__all__ = ["LoopGuardNode"]


class LoopGuardNode(GraphGuard):
    """The loop guard as a node of a hand-built ``StateGraph``, and its router.

    Wire it as the hub between the model node and the ``ToolNode``: every model answer and
    every batch of tool results passes through it, and :meth:`route` replaces
    ``tools_condition``::

        class State(MessagesState, LoopGuardState):
            pass

        guard = LoopGuardNode(nudges=1, on_stop="end")        # model="agent", tools="tools"
        builder = StateGraph(State)
        builder.add_node("agent", call_model)
        builder.add_node("tools", ToolNode(tools))
        builder.add_node("loop_guard", guard)
        builder.add_edge(START, "loop_guard")                 # the guard sees each new message
        builder.add_edge("agent", "loop_guard")
        builder.add_edge("tools", "loop_guard")               # not "tools" -> "agent"
        builder.add_conditional_edges("loop_guard", guard.route, guard.destinations)

    ``START -> loop_guard`` lets the guard repair a thread an earlier stop or crash left with
    unanswered tool calls before the model reads it (``START -> agent`` works too, without
    that). Keep no static ``tools -> agent`` edge: a static edge fires whatever a router or a
    ``Command(goto=END)`` says, so the model would run on after the guard stopped the run.

    The node keeps the detector's state in the graph state under ``state_key`` (add
    :class:`~langchain_loop_guard.LoopGuardState` to your state): digests and counters only,
    saved by whatever checkpointer the graph runs. Refused calls are answered with an error
    ``ToolMessage`` before the tools run; :meth:`route` then sends the tools only the calls
    left. Nudges, ``on_stop``, scopes and reports behave as for
    :class:`~langchain_loop_guard.LoopGuardMiddleware`. The node does not see the model's
    prompt: add the anti-loop hint there with :func:`~langchain_loop_guard.with_loop_hint`.
    Nor does it see the tools: give it them (``known_tools=``, the tools or the ``ToolNode``)
    for their MCP annotations to say which of them act (``docs/mcp.md``).

    Args:
        config, nudges, on_stop, clock, record_to, settings: as for
            :class:`~langchain_loop_guard.LoopGuardMiddleware` (``**settings``: any
            :class:`~langchain_loop_guard.LoopGuardConfig` key, ``LoopGuardNode(mode="observe")``).
        model: the name of the model node (where :meth:`route` goes back to).
        tools: the name of the ``ToolNode`` (any node that accepts a list of tool calls).
        messages_key: the state key of the message list.
        state_key: the state key of the guard's own state.
        known_tools: the graph's tools (LangChain tools, or the ``ToolNode``), whose MCP
            annotations (``readOnlyHint``, ``destructiveHint``) tell the guard which act; tools
            the ``acting_tools`` and ``read_only_tools`` keys name go by those.

    Raises:
        LoopGuardConfigError: a bad argument, naming the parameter.
    """

    _integration = "node"
    _halt_ends_run = True  # as a ``post_model_hook``, the prebuilt router routes the graph

    def __init__(
        self,
        config: ConfigInput = None,
        *,
        nudges: int | None = None,
        on_stop: OnStop = "raise",
        clock: Callable[[], float] | None = None,
        record_to: str | os.PathLike[str] | None = None,
        model: str = "agent",
        tools: str = "tools",
        messages_key: str = "messages",
        state_key: str = STATE_KEY,
        known_tools: Iterable[Any] = (),
        **settings: Any,
    ) -> None:
        for key, value in (("model", model), ("tools", tools), ("messages_key", messages_key)):
            check_name(key, value)
        _check_tools(known_tools)
        super().__init__(
            config,
            nudges=nudges,
            on_stop=on_stop,
            clock=clock,
            record_to=record_to,
            state_key=state_key,
            settings=settings,
        )
        self._model = model
        self._tools = tools
        self._messages_key = messages_key
        self._tool_kinds.learn(known_tools)

    @property
    def destinations(self) -> tuple[str, str, str]:
        """Where :meth:`route` can go: the tools, the model and ``END`` (for the path map)."""
        return (self._tools, self._model, END)

    def __call__(self, state: Any) -> dict[str, Any] | Command[Any] | None:
        """One pass of the guard: the state update (``None`` when nothing changes).

        With ``on_stop="raise"``, a stop whose calls need answers returns them and the stop
        message (see :data:`~langchain_loop_guard.OnStop`) with a ``Command`` back to this
        node, which raises :class:`~langchain_loop_guard.LoopDetected` at the next step, once
        they are saved. After a new human message, calls an earlier run left unanswered are
        answered first ("not executed").
        """
        messages = _messages(state, self._messages_key)
        if not messages:
            return None
        stored = _get(state, self.state_key)
        halt = self._pending_halt(messages, stored)
        if halt is not None:
            raise halt
        repair: list[Any] | None = None
        if is_human_input(messages[-1]):
            with self.failing_open("LoopGuardNode.repair"):
                repair = repair_update(messages, self.config.locale)
        after_model = isinstance(messages[-1], AIMessage)
        if not after_model and self.mode != "off" and self._quiet_turn(messages, stored):
            update = None  # the pass after the model's answer feeds these results
        else:
            update = self._guard_pass(
                messages, stored, "after_model" if after_model else "before_model"
            )
        if update is None:
            return None if repair is None else {self._messages_key: repair}
        result: dict[str, Any] = {self.state_key: update.data, **update.stop_update()}
        if update.messages or repair:
            result[self._messages_key] = [*(repair or ()), *update.messages]
        if update.halt is not None:
            node = _own_node()
            if node is None:  # called outside a graph: nothing will save the answers
                raise update.halt
            return Command(update=result, goto=node)
        return result

    def route(self, state: Any) -> str | list[Send]:
        """The next step after the guard node: ``END`` after a final answer (the guard's stop
        message is one); the tools node when the last answer has calls no message answered yet (a
        ``Send`` of only those when the guard answered some); else the model node."""
        messages = _messages(state, self._messages_key)
        if not messages:
            return END
        if self._halt_marker(messages, _get(state, self.state_key)) is not None:
            return []  # the node itself runs next, to raise the stop (see ``__call__``)
        if is_human_input(messages[-1]):
            return self._model
        index = last_ai(messages, len(messages))
        if index < 0:
            return self._model
        answer = cast(AIMessage, messages[index])
        if index == len(messages) - 1:
            return self._tools if answer.tool_calls else END
        answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
        open_calls = [call for call in answer.tool_calls if call.get("id") not in answered]
        if not open_calls:
            return self._model
        return [Send(self._tools, open_calls)]


def _check_tools(known_tools: object) -> None:
    """Raise :class:`LoopGuardConfigError` unless ``known_tools`` is tools or a ``ToolNode``."""
    if hasattr(known_tools, "tools_by_name"):
        return
    if isinstance(known_tools, str | bytes | Mapping) or not isinstance(known_tools, Iterable):
        raise bad_argument(
            "known_tools", known_tools, "LangChain tools or a ToolNode", "Iterable[BaseTool]"
        )


def _own_node() -> str | None:
    """The name of the graph node running this guard pass, if known."""
    node = ((graph_config() or {}).get("metadata") or {}).get("langgraph_node")
    return node if isinstance(node, str) and node else None


def _get(state: Any, key: str) -> Any:
    if type(state) is dict or isinstance(state, Mapping):  # a dict first: no ABC check
        return state.get(key)
    return getattr(state, key, None)


def _messages(state: Any, key: str) -> Sequence[AnyMessage]:
    messages = _get(state, key)
    return messages if type(messages) is list or isinstance(messages, Sequence) else ()
