"""What the integrations feed the detector from LangChain objects (SPEC §11).

:func:`tool_outcome` turns a tool's result, whatever shape a host gives it, into the one thing
the detector digests, so that every integration keys the same result the same way: a message
by its content, never its ids. :func:`holds_answer` tells whether a model saw the run's
previous answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command

from langchain_loop_guard._integrations._guard_messages import MESSAGE_NAME

__all__ = ["CONTEXT_SCAN", "Outcome", "holds_answer", "previous_answer", "tool_outcome"]

CONTEXT_SCAN = 256
"""Messages a guard looks back through, from the end of a model's input, for the last model
answer. An answer further back is taken as not in the input (the safe side: a new streak)."""

_MAX_PARTS = 64  # messages (or list items) of one result taken into its outcome

# ``ToolNode``'s text for invalid arguments (``TOOL_INVOCATION_ERROR_TEMPLATE`` in
# ``langgraph.prebuilt.tool_node``): "Error invoking tool '<name>' with kwargs <repr of the
# arguments> with error:\n<errors>\n Please fix ...". The repr holds no newline.
_INVOCATION_ERROR = re.compile(r"\A(Error invoking tool '[^'\n]*') with kwargs .* (with error:\n)")


class Outcome(NamedTuple):
    """What to feed ``LoopDetector.tool_result``: ``output`` for a success, else ``error``."""

    output: object
    error: object = None


def tool_outcome(result: object) -> Outcome:
    """The outcome of a tool's ``result`` (``on_tool_end``'s output, or the ``ToolMessage`` that
    answered its call in the graph state): the content to digest, as ``error`` for a failure."""
    if type(result) is str:  # the common case first: isinstance of a pydantic class is slow
        return Outcome(result)
    if isinstance(result, ToolMessage):
        if result.status == "error":
            return Outcome(None, _without_arguments(result.content))
        return Outcome(result.content)
    if isinstance(result, Command):
        return _message_outcome(_command_messages(result), result)
    if (
        isinstance(result, list)
        and result
        and all(isinstance(item, ToolMessage | Command) for item in result)
    ):
        # a tool may return several commands and messages at once
        messages: list[object] = []
        for item in result[:_MAX_PARTS]:
            messages += [item] if isinstance(item, ToolMessage) else _command_messages(item)
        return _message_outcome(messages, result)
    return Outcome(result)


def previous_answer(messages: Sequence[object], end: int | None = None) -> AIMessage | None:
    """The last model answer in ``messages[:end]``, looking back :data:`CONTEXT_SCAN` at most;
    the guard's own stop message (``on_stop="end"``) is none: the model answered before it."""
    stop = len(messages) if end is None else end
    for index in range(stop - 1, max(-1, stop - 1 - CONTEXT_SCAN), -1):
        message = messages[index]
        if isinstance(message, AIMessage) and message.name != MESSAGE_NAME:
            return message
    return None


def holds_answer(messages: Sequence[object], end: int, answer_id: str | None) -> bool:
    """Whether the last model answer in ``messages[:end]`` is the one with id ``answer_id``
    (the model whose input this was saw it); without ids to compare, any answer counts."""
    previous = previous_answer(messages, end)
    if previous is None:
        return False
    return answer_id is None or previous.id is None or previous.id == answer_id


def _message_outcome(messages: Sequence[object], result: object) -> Outcome:
    """The contents of the tool messages among ``messages`` (all of them when none is one);
    without any message (a ``Command`` that only routes), where ``result`` goes and updates."""
    tool_messages = [m for m in messages if _kind(m) == "tool"] or list(messages)
    if not tool_messages:
        return Outcome(_command_view(result))
    contents = [_field(m, "content") for m in tool_messages]
    failed = [
        c for m, c in zip(tool_messages, contents, strict=True) if _field(m, "status") == "error"
    ]
    if failed:
        errors = [_without_arguments(c) for c in failed]
        return Outcome(None, errors[0] if len(errors) == 1 else errors)
    return Outcome(contents[0] if len(contents) == 1 else contents)


def _command_messages(command: Any) -> list[object]:
    """The messages in a ``Command``'s update: any state key's, or the update list itself."""
    update = getattr(command, "update", None)
    if isinstance(update, Mapping):
        values: list[object] = list(update.values())
    elif isinstance(update, list | tuple):
        # a list of messages (a ToolNode fed a message list), or of (key, value) pairs
        pairs = all(isinstance(i, tuple) and len(i) == 2 and isinstance(i[0], str) for i in update)
        values = [value for _, value in update] if pairs and update else [list(update)]
    else:
        return []
    found: list[object] = []
    for value in values:
        items = value if isinstance(value, list | tuple) else [value]
        found += [item for item in items[:_MAX_PARTS] if _kind(item) is not None]
    return found[:_MAX_PARTS]


def _kind(item: object) -> str | None:
    """``"tool"`` for a tool message, another string for another message, else ``None``."""
    if isinstance(item, BaseMessage):
        return item.type
    if isinstance(item, Mapping) and "content" in item:
        kind = item.get("type") or item.get("role")
        return kind if isinstance(kind, str) else None
    return None


def _field(message: object, name: str) -> object:
    if isinstance(message, Mapping):
        return message.get(name)
    return getattr(message, name, None)


def _command_view(result: object) -> object:
    """A ``Command`` (or a list of them) by where it goes and what it updates."""
    if isinstance(result, list):
        return [_command_view(item) for item in result[:_MAX_PARTS]]
    return {"goto": getattr(result, "goto", None), "update": getattr(result, "update", None)}


def _without_arguments(content: object) -> object:
    """A ``ToolNode`` invalid-arguments text without the arguments it quotes."""
    if isinstance(content, str) and content.startswith("Error invoking tool '"):
        return _INVOCATION_ERROR.sub(r"\1 \2", content, count=1)
    return content
