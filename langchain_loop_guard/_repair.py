"""Repair a thread that a stop or a crash left with tool calls no ``ToolMessage`` answers.

The callback handler raises from inside a step, so LangGraph saves the thread without that
step: the model answer is there, its tool calls' answers are not, and providers reject the
next request on that thread. The graph guards answer such calls themselves (see
:class:`~langchain_loop_guard.LoopGuardMiddleware`); with the handler, one line after the
stop does it::

    except LoopDetected as stop:
        stop.repair(graph, config)   # or repair_thread(graph, config)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig

from langchain_loop_guard._graph_state import dangling_calls, repair_update

__all__ = ["arepair_thread", "repair_thread"]


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
    """Answer every tool call of ``config``'s thread that no ``ToolMessage`` answers.

    Each such call gets a "not executed: the loop guard stopped the run" error
    ``ToolMessage`` (marked ``additional_kwargs={"loop_guard": "not_executed"}``) right
    after its model answer, so the thread's next message reaches the model as a history
    providers accept. Safe to call on any thread: a valid one is left as it is.

    Args:
        graph: the compiled graph (``create_agent``'s agent, a ``StateGraph``) with its
            checkpointer.
        config: the run configuration naming the thread (``configurable.thread_id``).
        messages_key: the state key of the message list.
        as_node: the node the answers are written as (the graph goes on from there, so
            ``invoke(None)`` continues with the model); LangGraph infers one when the graph
            has no node of that name.
        locale: the language of the answers (the context's, else English, by default).

    Returns:
        How many calls were answered (``0`` when the thread was valid).
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
