"""A detector's events as its listener receives them (digests and counters, never content), and
their replay, which reaches the same verdicts under the same configuration: the bodies of the
detector's ``replay``, ``_emit`` and ``_decided``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_loop_guard._verdict import ALLOW, Verdict
from langchain_loop_guard._view import key_of

if TYPE_CHECKING:
    from langchain_loop_guard._detector import LoopDetector

__all__ = ["DetectorEvent", "EventKind", "EventListener", "decided", "emit", "replay"]

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
    elapsed: float = 0.0
    verdict: Verdict = ALLOW


EventListener = Callable[[DetectorEvent], None]
"""Called with every event a detector decides (see ``LoopDetector(listener=...)``)."""


def replay(detector: LoopDetector, event: DetectorEvent) -> Verdict:
    """Feed ``event`` to ``detector`` (see :meth:`~._detector.LoopDetector.replay`)."""
    if detector._off:
        return ALLOW
    kind = event.kind
    if kind == "reset":
        return detector.reset()
    if kind == "release":
        detector.release()
        return ALLOW
    if kind == "user_message":
        return detector.user_message()
    tool, value = event.tool, event.digest
    if kind in ("tool_call", "tool_result") and (tool is None or value is None):
        msg = f"a {kind} event needs its tool and digest"
        raise ValueError(msg)
    if kind == "turn_start":
        verdict = detector._turn_start()
    elif kind == "tool_call":
        verdict = detector._tool_call(tool or "", key_of(value or ""), event.call_id)
    elif kind == "tool_result":
        name, call_id = tool or "", event.call_id
        verdict = detector._tool_result(
            detector._view.find(name, call_id),
            name,
            key_of(value or ""),
            event.error,
            call_id,
            near=event.near,
            info=event.info,
        )
    elif kind == "assistant_message":
        verdict = detector._assistant_message(value, event.near, event.calls, event.in_context)
    else:
        verdict = detector._soft()
    if detector._listener is not None:
        emit(detector, kind, verdict, **{name: getattr(event, name) for name in _CARRIED})
    return verdict


_CARRIED = ("tool", "digest", "call_id", "error", "calls", "in_context", "near", "info")
"""The fields a replayed event passes on to the listener as they are."""


def decided(detector: LoopDetector, kind: EventKind, verdict: Verdict) -> Verdict:
    """``verdict``, after telling the listener about the event, when there is one."""
    if detector._listener is not None:
        emit(detector, kind, verdict)
    return verdict


def emit(detector: LoopDetector, kind: EventKind, verdict: Verdict, **fields: Any) -> None:
    """Tell the listener about an event, with the clock reading its decision used."""
    assert detector._listener is not None  # callers check, to keep the hot path lean
    elapsed = detector._elapsed
    if elapsed is None:  # the decision did not read the clock
        elapsed = detector._clock() - detector._started
    detector._elapsed = None
    detector._listener(DetectorEvent(kind=kind, elapsed=elapsed, verdict=verdict, **fields))
