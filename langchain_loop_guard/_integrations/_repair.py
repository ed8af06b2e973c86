"""Repair a thread that a stop or a crash left with tool calls no ``ToolMessage`` answers, which
providers reject. It imports no guard: the guards import it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, cast

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain_loop_guard._core._messages import not_executed
from langchain_loop_guard._integrations._guard_messages import tool_answer

__all__ = ["arepair_thread", "dangling_calls", "repair_thread", "repair_update", "repaired_history"]


def _answer_groups(
    messages: Sequence[BaseMessage],
) -> Iterator[tuple[int, int, list[tuple[str, str]]]]:
    """For each model answer with tool calls: its index, the index after its answers, and
    ``(call id, tool name)`` of each call no ``ToolMessage`` right after it answers."""
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        owner = index - 1
        answered: set[str] = set()
        while index < len(messages) and isinstance(messages[index], ToolMessage):
            answered.add(cast(ToolMessage, messages[index]).tool_call_id)
            index += 1
        open_calls = [
            (call_id, call["name"])
            for call in message.tool_calls
            if (call_id := call.get("id")) and call_id not in answered
        ]
        yield owner, index, open_calls


def dangling_calls(messages: Sequence[BaseMessage]) -> list[tuple[int, str, str]]:
    """``(index of the model answer, call id, tool name)`` of each tool call no ``ToolMessage``
    answers before the next other message."""
    return [
        (owner, call_id, name)
        for owner, _, open_calls in _answer_groups(messages)
        for call_id, name in open_calls
    ]


def repaired_history(
    messages: Sequence[BaseMessage], locale: str | None = None
) -> list[BaseMessage] | None:
    """``messages`` with each dangling call answered "not executed" (:func:`repair_thread`'s
    answer) right after its model answer's other answers; ``None`` when none dangles."""
    repaired: list[BaseMessage] = []
    done = 0
    text: str | None = None
    for _, end, open_calls in _answer_groups(messages):
        if not open_calls:
            continue
        text = text or not_executed(locale)
        repaired += messages[done:end]
        repaired += [
            tool_answer(call_id, name, text, "not_executed") for call_id, name in open_calls
        ]
        done = end
    if text is None:
        return None
    return [*repaired, *messages[done:]]


def repair_update(
    messages: Sequence[BaseMessage], locale: str | None = None
) -> list[BaseMessage] | None:
    """A ``messages`` update that repairs ``messages`` (``None`` when nothing dangles): the
    answers appended, or the whole history rewritten, since ``add_messages`` cannot insert."""
    repaired = repaired_history(messages, locale)
    if repaired is None:
        return None
    if repaired[: len(messages)] == list(messages):
        return repaired[len(messages) :]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *repaired]


class _Graph(Protocol):
    @property
    def nodes(self) -> Mapping[str, Any]: ...

    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> Any: ...

    def update_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
    ) -> RunnableConfig: ...


class _AsyncGraph(Protocol):
    @property
    def nodes(self) -> Mapping[str, Any]: ...

    async def aget_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> Any: ...

    async def aupdate_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
    ) -> RunnableConfig: ...


def _update(values: object, messages_key: str, locale: str | None) -> tuple[list[Any], int]:
    """The ``messages`` update that repairs the thread, and how many calls it answers."""
    messages = values.get(messages_key) if isinstance(values, Mapping) else None
    if not messages:
        return [], 0
    return repair_update(messages, locale) or [], len(dangling_calls(messages))


def repair_thread(
    graph: _Graph,
    config: RunnableConfig,
    *,
    messages_key: str = "messages",
    as_node: str = "tools",
    locale: str | None = None,
) -> int:
    """Answer every tool call of ``config``'s thread that no ``ToolMessage`` answers, and
    return how many (``0``: the thread was valid, and is left as it is).

    Each gets a "not executed: the loop guard stopped the run" error ``ToolMessage`` (marked
    ``additional_kwargs={"loop_guard": "not_executed"}``) right after its model answer, so the
    thread's next message reaches the model as a history providers accept.

    Args:
        graph: the compiled graph (``create_agent``'s agent, a ``StateGraph``) with its
            checkpointer.
        config: the run configuration naming the thread (``configurable.thread_id``).
        messages_key: the state key of the message list.
        as_node: the node the answers are written as (the graph goes on from there, so
            ``invoke(None)`` continues with the model); LangGraph infers one when the graph has
            no node of that name.
        locale: the language of the answers (the context's, else English, by default).
    """
    update, answered = _update(graph.get_state(config).values, messages_key, locale)
    if answered:
        graph.update_state(config, {messages_key: update}, _node(graph, as_node))
    return answered


async def arepair_thread(
    graph: _AsyncGraph,
    config: RunnableConfig,
    *,
    messages_key: str = "messages",
    as_node: str = "tools",
    locale: str | None = None,
) -> int:
    """:func:`repair_thread`, for async checkpointers."""
    snapshot = await graph.aget_state(config)
    update, answered = _update(snapshot.values, messages_key, locale)
    if answered:
        await graph.aupdate_state(config, {messages_key: update}, _node(graph, as_node))
    return answered


def _node(graph: _Graph | _AsyncGraph, name: str) -> str | None:
    return name if name in graph.nodes else None
