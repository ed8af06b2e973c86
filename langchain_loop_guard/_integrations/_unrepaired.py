"""Threads a callback handler's stop may have left invalid: it answers none of the calls it
refused (LangGraph does not save a step a callback stops), so the thread keeps them until
``stop.repair(...)`` answers them. The first model call on such a thread is looked at once, and
one WARNING names the calls still open and the line that repairs them."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_loop_guard._core._public import safe_tool_name
from langchain_loop_guard._integrations._engine import bounded_put
from langchain_loop_guard._integrations._repair import dangling_calls
from langchain_loop_guard._integrations._runtime import logger

__all__ = ["StoppedThreads"]

_REMEMBERED: Final = 256  # threads remembered at once, the oldest forgotten first
_NAMED: Final = 5  # call ids a warning names


class StoppedThreads:
    """The threads a guard stopped whose next model input is still to be checked."""

    __slots__ = ("_lock", "_threads")

    def __init__(self) -> None:
        self._threads: dict[str, None] = {}
        self._lock = threading.Lock()

    def stopped(self, thread: str) -> None:
        """A stop ended a run on ``thread``: check its next model input."""
        with self._lock:
            bounded_put(self._threads, thread, None, _REMEMBERED)

    def check(self, metadata: Mapping[str, Any] | None, messages: Sequence[BaseMessage]) -> None:
        """The model is called on the thread of ``metadata`` with ``messages``: once after a
        stop, warn if calls stay unanswered."""
        if not self._threads:  # the common case, without the lock
            return
        thread = (metadata or {}).get("thread_id")
        if thread is None:
            return
        with self._lock:
            if str(thread) not in self._threads:
                return
            del self._threads[str(thread)]
        dangling = dangling_calls(messages)
        if not dangling:
            return
        shown = safe_tool_name(str(thread))
        calls = ", ".join(safe_tool_name(call_id) for _, call_id, _ in dangling[:_NAMED])
        logger.warning(
            "loop-guard: thread=%s: the model is called with %d tool call(s) that a stop of this"
            " guard left unanswered (%s); OpenAI, Anthropic and most providers reject such a"
            " history. Repair the thread once after the stop: stop.repair(agent, config) in the"
            ' `except LoopDetected as stop` block, or repair_thread(agent, {"configurable":'
            ' {"thread_id": %r}}) (from langchain_loop_guard)',
            shown,
            len(dangling),
            calls,
            shown,
        )
