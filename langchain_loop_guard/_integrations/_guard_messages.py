"""The messages a guard writes into a thread (the stop message is in ``_stop``), each marked
with its :data:`GuardKind` under :data:`GUARD_KEY` to tell it from everyone else's."""

from __future__ import annotations

from typing import Literal, get_args

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from langchain_loop_guard._core._detector import Signal, Verdict
from langchain_loop_guard._core._messages import HINT_MARKER, translator

__all__ = [
    "GUARD_KEY",
    "MESSAGE_NAME",
    "GuardKind",
    "guard_kind",
    "is_human_input",
    "nudge_message",
    "standalone_nudge",
    "tool_answer",
]

MESSAGE_NAME = "loop_guard"
"""The ``name`` of the messages the guard adds on its own: nudges and the stop message."""

GUARD_KEY = "loop_guard"
"""The ``additional_kwargs`` key that marks every message the guard writes with its
:data:`GuardKind`; a chat UI tells them from others with :func:`guard_kind`."""

GuardKind = Literal["nudge", "not_executed", "stop"]
"""What a message the guard wrote is (under :data:`GUARD_KEY`): ``"nudge"`` (a refused call's
answer, or a separate nudge), ``"not_executed"`` (a call answered because the run stopped) or
``"stop"`` (the final message of an ended run)."""


def guard_kind(message: BaseMessage) -> GuardKind | None:
    """What the guard wrote ``message`` as (``"nudge"``, ``"not_executed"``, ``"stop"``), or
    ``None`` for a message the guard did not write (the user's, the model's, a tool's)."""
    kind = message.additional_kwargs.get(GUARD_KEY)
    return kind if kind in get_args(GuardKind) else None


def is_human_input(message: BaseMessage) -> bool:
    """Whether ``message`` is a human's (a ``HumanMessage`` the guard did not write)."""
    return isinstance(message, HumanMessage) and message.name != MESSAGE_NAME


def tool_answer(call_id: str, name: str, text: str, kind: GuardKind = "nudge") -> ToolMessage:
    """The guard's error answer to the call ``call_id``: a nudge, or "not executed"."""
    return ToolMessage(
        content=text,
        tool_call_id=call_id,
        name=name,
        status="error",
        additional_kwargs={GUARD_KEY: kind},
    )


def nudge_message(text: str) -> HumanMessage:
    """A nudge no tool message can carry: a message of its own, after the step's answers."""
    return HumanMessage(content=text, name=MESSAGE_NAME, additional_kwargs={GUARD_KEY: "nudge"})


def standalone_nudge(verdict: Verdict, locale: str) -> HumanMessage:
    """A nudge about a repeated answer or error, which answers no call."""
    tr = translator(locale)
    if verdict.signal is Signal.REPEATED_ASSISTANT_RESPONSE:
        text = tr.gettext(
            "You gave the same response {count} times in a row. Do not repeat it; change your "
            "approach, or stop and report what is blocking you."
        )
    else:
        text = tr.gettext(
            "`{tool}` failed with the same error {count} times in a row. Do not call it again "
            "the same way; change your approach, or stop and report what is blocking you."
        )
    return nudge_message(f"{HINT_MARKER} {text.format(tool=verdict.tool, count=verdict.count)}")
