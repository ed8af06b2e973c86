"""What a graph guard keeps in LangGraph state, and how it reads it back.

One key (:data:`STATE_KEY`) holds names, digests, counters and call ids, never content; the
graph's checkpointer saves it across ``interrupt()``/resume and restarts. One node writes it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, cast

from langchain_core.messages import BaseMessage
from typing_extensions import TypedDict

from langchain_loop_guard._integrations._runtime import logger
from langchain_loop_guard._integrations._stop import LoopDetected, LoopGuardStop

__all__ = [
    "STATE_KEY",
    "STOP_KEY",
    "GuardData",
    "LoopGuardState",
    "Update",
    "fresh_state",
    "load_state",
    "new_run_id",
]

STATE_KEY = "loop_guard"
"""The graph-state key the guard keeps its state under."""

STOP_KEY = "loop_guard_stop"
"""The graph-state key where a run's stop shows, for the caller to read in the result
(:class:`LoopGuardStop`; ``None`` again once a new run starts on the thread)."""

STATE_VERSION = 1


class GuardData(TypedDict, total=False):
    """What the guard keeps in graph state: JSON data of names, digests, ids and counters."""

    v: int
    """Format version; any other starts afresh."""
    detector: dict[str, Any]
    """:meth:`LoopDetector.export_state` output."""
    pending: list[list[str]]
    """``[tool_call_id, tool name]`` of the calls whose results have not been seen yet."""
    ai: str | None
    """Id of the last model message the guard processed."""
    turn: bool
    """Whether the next model turn was already counted (before the model ran)."""
    nudged: int
    """Nudges given in this run."""
    last_nudge: list[Any]
    """``[key, count]`` of the verdict the last nudge answered: a stop on the same loop
    counts the nudged attempts too."""
    at: float
    """When the state was written (the guard's clock), to count time spent between steps."""
    halt: dict[str, Any]
    """A stop to raise at the next step (``on_stop="raise"``), once its answers are saved."""
    pause: dict[str, Any]
    """An interrupt (``on_stop="interrupt"``) about a model's answer, to ask at the next model
    call before the model is paid for: the answer's id, the payload, the state before it."""
    stopped: bool
    """Whether this run's stop was written under :data:`STOP_KEY` (to clear at the next run)."""
    scope: list[str]
    """``[scope, reason]``: the scope the thread is guarded in and why (``scope="auto"``), for
    ``inspect``."""
    run: str
    """An id of the run (a new one at each human message), for log lines when the caller gave
    no run id and nothing traces the run."""


class LoopGuardState(TypedDict, total=False):
    """The state keys the node guard needs; mix them into your graph's state::

        class State(MessagesState, LoopGuardState):
            pass

    Plain channels (the guard node is their only writer): ``loop_guard``, the guard's own
    state, and ``loop_guard_stop``, how a run was stopped (:class:`LoopGuardStop`) or ``None``.
    """

    loop_guard: NotRequired[GuardData]
    loop_guard_stop: NotRequired[LoopGuardStop | None]


@dataclass(frozen=True, slots=True)
class Update:
    """What one pass of the guard changes in the graph.

    Attributes:
        data: the guard's new state (under :data:`STATE_KEY`).
        messages: messages to append (answers to refused calls, a nudge, a stop message).
        jump: ``"model"`` to give the model another turn after a nudge, ``"end"`` when the guard
            ended the run, else ``None``.
        halt: the stop to raise at the next step, once these messages are saved
            (:meth:`GraphGuard._pending_halt`).
        stop: the run's stop, to show under :data:`STOP_KEY`.
        clear_stop: a new run started after a stop: :data:`STOP_KEY` goes back to ``None``.
    """

    data: GuardData
    messages: tuple[BaseMessage, ...] = ()
    jump: Literal["model", "end"] | None = None
    halt: LoopDetected | None = None
    stop: LoopGuardStop | None = None
    clear_stop: bool = False

    def stop_update(self) -> dict[str, LoopGuardStop | None]:
        """The :data:`STOP_KEY` part of the state update: the stop, a clearing ``None``, or none."""
        if self.stop is not None:
            return {STOP_KEY: self.stop}
        return {STOP_KEY: None} if self.clear_stop else {}


def load_state(stored: object, thread: str | None = None) -> GuardData:
    """The guard state as stored, or a fresh one: a state that cannot be read (another version,
    a field of the wrong type) is discarded with one warning and detection starts afresh; the
    next pass writes a good state back."""
    if stored is None:
        return fresh_state()
    problem = _malformed(stored)
    if problem is None:
        data = cast(GuardData, dict(cast(Mapping[str, Any], stored)))
        data["pending"] = [[str(call_id), str(name)] for call_id, name in data["pending"]]
        return data
    logger.warning(
        "loop-guard: thread=%s: the guard's saved state is unreadable (%s); discarded, detection "
        "starts afresh",
        thread or "-",
        problem,
    )
    return fresh_state()


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def fresh_state() -> GuardData:
    return GuardData(v=STATE_VERSION, pending=[], ai=None, turn=False, nudged=0)


def _malformed(stored: object) -> str | None:
    """What is wrong with a stored guard state (field names only, never values), or ``None``."""
    if not isinstance(stored, Mapping):
        return f"a {type(stored).__name__}, not a mapping"
    if stored.get("v") != STATE_VERSION or type(stored.get("v")) is not int:
        return "another version"
    for key, valid in _CHECKS:
        if key not in stored:
            if key in _REQUIRED:
                return f"no {key!r}"
            continue
        if not valid(stored[key]):
            return f"{key!r} is a {type(stored[key]).__name__}"
    return None


_CHECKS: tuple[tuple[str, Callable[[object], bool]], ...] = (
    ("detector", lambda value: value is None or isinstance(value, Mapping)),
    (
        "pending",
        lambda value: (
            isinstance(value, list)
            and all(isinstance(p, list | tuple) and len(p) == 2 for p in value)
        ),
    ),
    ("ai", lambda value: value is None or isinstance(value, str)),
    ("turn", lambda value: type(value) is bool),
    ("nudged", lambda value: type(value) is int and value >= 0),
    ("at", lambda value: type(value) in (int, float) and math.isfinite(cast(float, value))),
)
"""What :func:`_malformed` checks of each field, in order (made once: read at every step)."""
_REQUIRED = frozenset({"pending"})
