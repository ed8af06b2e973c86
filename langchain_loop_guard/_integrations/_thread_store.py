"""The callback handler's threads across processes: a LangGraph ``BaseStore`` holds each
thread's state between invocations, or the handler says it guards its own share only.

A deployment serves one thread from several processes: consecutive turns land on different
workers. The middleware and the node guard keep their state in the graph state, which the
checkpointer shares; the handler keeps its runs in memory. Given a store, it reads a thread's
state from it when an invocation joins the thread and writes it back when the invocation ends
(the detector's exported state, digests and counters only, and the digests that tell the
thread's last answer and the human messages it was called with: never content). Without one,
the first time it is called on a thread whose history holds an answer it never saw, it logs
one WARNING saying that it guards this process's share of the thread only.

Runs of one thread are served one at a time (a LangGraph server queues them), so reading at
an invocation's start and writing at its end is enough; a thread served by two processes at
once is guarded as each sees it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.messages import BaseMessage

from langchain_loop_guard._core._public import safe_tool_name
from langchain_loop_guard._integrations._outcomes import previous_answer
from langchain_loop_guard._integrations._runtime import logger

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langchain_loop_guard._core._detector import LoopDetector
    from langchain_loop_guard._integrations._runtime import GuardRuntime

__all__ = ["NAMESPACE", "ThreadStore"]

NAMESPACE = ("langchain_loop_guard", "threads")
"""Where the handler keeps threads in the store: one item per thread, keyed by thread id."""
_VERSION = 1
_MAX_HUMANS = 64  # human messages restored per thread (as many as a run remembers)


class CallbackRun(Protocol):
    """What the store reads and writes of one of the handler's thread runs."""

    key: str
    invocations: dict[Any, None]
    detector: LoopDetector
    guard: GuardRuntime
    said: tuple[str | None, str] | None
    humans: dict[object, None]


class ThreadStore:
    """The handler's link to a store (or its absence), for its per-thread runs."""

    __slots__ = ("_warned", "store")

    def __init__(self, store: BaseStore | None) -> None:
        self.store = store
        self._warned = False

    def joined(self, run: CallbackRun) -> None:
        """An invocation joined the thread ``run``: take the thread's state from the store,
        as the last invocation (in whichever process) left it. Nothing to take, or a state
        that cannot be read, leaves the run as this process knows it."""
        if self.store is None or len(run.invocations) > 1:
            return  # no store; or an invocation of this process is in flight: it is current
        try:
            item = self.store.get(NAMESPACE, run.key)
        except Exception as exc:  # noqa: BLE001 - a store failure must not break the agent
            run.guard.internal_error("reading the thread store", exc)
            return
        value = None if item is None else item.value
        if not isinstance(value, Mapping) or value.get("v") != _VERSION:
            return
        if not run.detector.restore_state(value.get("detector") or {}):
            return
        run.said = _pair(value.get("said"))
        found = value.get("humans")
        humans = [_human(h) for h in found] if isinstance(found, list) else []
        run.humans = {human: None for human in humans[-_MAX_HUMANS:] if human is not None}

    def left(self, run: CallbackRun) -> None:
        """An invocation of the thread ``run`` ended: write the thread's state to the store."""
        if self.store is None or run.invocations:
            return
        value = {
            "v": _VERSION,
            "detector": run.detector.export_state(),
            "said": None if run.said is None else list(run.said),
            "humans": [list(h) if isinstance(h, tuple) else h for h in run.humans],
        }
        try:
            self.store.put(NAMESPACE, run.key, value, index=False)
        except Exception as exc:  # noqa: BLE001 - a store failure must not break the agent
            run.guard.internal_error("writing the thread store", exc)

    def model_called(self, run: CallbackRun, sent: Sequence[BaseMessage]) -> None:
        """Without a store, warn once if the thread's model is called with an answer this
        process never saw: another process (a worker of the same deployment) served it."""
        if self.store is not None or self._warned or run.said is not None:
            return
        if previous_answer(sent) is None:
            return
        self._warned = True
        logger.warning(
            "loop-guard: thread %s holds model answers this process did not see (another"
            " worker served them, or this process restarted): LoopGuardCallbackHandler keeps"
            " a thread's state in its process, so it guards this process's share of the"
            " thread only. Use LoopGuardMiddleware or LoopGuardNode (their state is in the"
            " checkpoint), or give the handler a store: LoopGuardCallbackHandler(store=...).",
            safe_tool_name(run.key),
        )


def _pair(value: Any) -> tuple[str | None, str] | None:
    """The stored ``said``: ``[answer id or None, key]``."""
    if isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[1], str):
        first = value[0]
        return (first if isinstance(first, str) else None, value[1])
    return None


def _human(value: Any) -> object:
    """A stored human message the thread's model was called with: its id, or
    ``[position, digest]``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and len(value) == 2:
        return (value[0], value[1])
    return None
