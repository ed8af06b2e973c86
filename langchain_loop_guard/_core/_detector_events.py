"""A detector's events as its listener receives them (digests and counters, never content):
:class:`DetectorEvent`, and :class:`Emitter`, which owns a detector's listener and tells it each
event. ``LoopDetector.replay`` feeds such events back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from langchain_loop_guard._core._reporting import RunRecord
from langchain_loop_guard._core._verdict import ALLOW, Verdict

__all__ = ["DetectorEvent", "Emitter", "EventKind", "EventListener"]

EventKind = Literal[
    "turn_start",
    "tool_call",
    "tool_result",
    "assistant_message",
    "user_message",
    "tick",
    "reset",
    "release",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DetectorEvent:
    """One event as the detector saw it, digested: what a trace records and a replay feeds.

    Attributes:
        kind: the event (the name of the :class:`LoopDetector` method that received it).
        tool: the tool of a call or result.
        digest: the call's signature, the result's outcome digest or error key, or the
            assistant key (``None`` for an empty response); never content.
        call_id: the tool-call id the host gave, if any.
        error: whether a result is an error.
        calls: how many tool calls an assistant message made.
        in_context: whether the model's input held the run's previous response.
        near: a long result's near sketch (its lines with the numbers left out, hashed), or
            an assistant reply's (its words, hashed).
        info: a result's information digest (its text without the call's argument values).
        tokens: the tokens the model call of an assistant message reported (``None``: not
            reported), a plain number the integrations read; the detector only passes it on.
        talk: whether an assistant message without tool calls was talk (words, no would-be
            call in them: SPEC §14 N19), which fails no turn.
        elapsed: the run's elapsed time when the event was decided, in seconds (the clock
            reading the decision used, so a replay driven by it decides the same).
        verdict: what the detector decided.
    """

    kind: EventKind
    tool: str | None = None
    digest: str | None = None
    call_id: str | None = None
    error: bool = False
    calls: int = 0
    in_context: bool = True
    near: str | None = None
    info: str | None = None
    tokens: int | None = None
    talk: bool = False
    elapsed: float = 0.0
    verdict: Verdict = ALLOW


EventListener = Callable[[DetectorEvent], None]
"""Called with every event a detector decides (see ``LoopDetector(listener=...)``)."""


class Emitter:
    """The listener of one detector: told each event the detector decides, with the clock
    reading its decision used (the run's :class:`~._reporting.RunRecord` keeps it)."""

    __slots__ = ("_listener", "_record")

    def __init__(self, listener: EventListener, record: RunRecord) -> None:
        self._listener = listener
        self._record = record

    def emit(self, kind: EventKind, verdict: Verdict, **fields: Any) -> None:
        """Tell the listener about an event, with the clock reading its decision used."""
        elapsed = self._record.reading
        if elapsed is None:  # the decision did not read the clock
            elapsed = self._record.elapsed()
        self._listener(DetectorEvent(kind=kind, elapsed=elapsed, verdict=verdict, **fields))

    def replayed(self, event: DetectorEvent, verdict: Verdict) -> None:
        """Tell the listener about a replayed ``event``: its fields as they are, the new
        ``verdict`` and the clock reading of this decision."""
        self.emit(event.kind, verdict, **{name: getattr(event, name) for name in _CARRIED})

    def reset(self) -> None:
        """Tell the listener the run started afresh."""
        self._listener(DetectorEvent(kind="reset", elapsed=0.0))


_CARRIED = (
    *("tool", "digest", "call_id", "error", "calls", "in_context", "near", "info", "tokens"),
    "talk",
)
"""The fields a replayed event passes on to the listener as they are."""
