"""The bodies of the detector's ``snapshot``, ``export_state`` and ``restore_state``: the view's
history plus the clock, the warnings, the loops observe mode reported and the tripping verdict.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from langchain_loop_guard._novelty import number_of
from langchain_loop_guard._reporting import MAX_REPORTED, REPORT_BITS
from langchain_loop_guard._rules import Signal
from langchain_loop_guard._verdict import Action, Verdict
from langchain_loop_guard._view import (
    OutcomeKind,
    StateError,
    count_of,
    items_of,
    key_text,
    optional_text_of,
    text_of,
)

if TYPE_CHECKING:
    from langchain_loop_guard._detector import LoopDetector

__all__ = ["CallInfo", "DetectorSnapshot", "export_state", "restore_state", "snapshot"]

_STATE_VERSION = 5
_PREVIOUS_VERSION = 4
"""The previous release's state (a checkpoint it wrote), still read."""
_OLDER_VERSION = 3
"""The release before's state: upgraded to the previous one's layout, then read."""
_ACTIONS = frozenset(get_args(Action))


@dataclass(frozen=True, slots=True)
class CallInfo:
    """A tool call as :meth:`LoopDetector.snapshot` shows it: no arguments, no output."""

    tool: str
    digest: str
    outcome: OutcomeKind


@dataclass(frozen=True, slots=True)
class DetectorSnapshot:
    """Counters of one run, safe to print or log."""

    turns: int
    calls: int
    elapsed_s: float
    tripped: Signal | None
    warned: tuple[Signal, ...]
    recent: tuple[CallInfo, ...] = field(default=())


def snapshot(detector: LoopDetector, recent: int) -> DetectorSnapshot:
    """Counters and the last ``recent`` calls (tool name, short digest, outcome kind)."""
    view = detector._view
    calls = list(view.calls)[-recent:] if recent > 0 else []
    return DetectorSnapshot(
        turns=view.turns,
        calls=view.seen,
        elapsed_s=max(0.0, detector._clock() - detector._started),
        tripped=detector._tripped.signal if detector._tripped else None,
        warned=tuple(s for s in Signal if s in detector._warned),
        recent=tuple(CallInfo(c.name, key_text(c.sig)[:8], c.kind) for c in calls),
    )


def export_state(detector: LoopDetector) -> dict[str, Any]:
    """The run's state as JSON data: tool names, digests and counters, never content."""
    return {
        "v": _STATE_VERSION,
        **detector._view.export_state(),
        "elapsed": max(0.0, detector._clock() - detector._started),
        "warned": sorted(signal.value for signal in detector._warned),
        "reported": list(detector._reported),
        "tripped": _verdict_state(detector._tripped),
    }


def restore_state(detector: LoopDetector, state: Mapping[str, Any]) -> bool:
    """Continue from :func:`export_state` output; whether the state was taken (nothing is
    half restored: a state not taken leaves the run afresh)."""
    detector._clear()
    if detector._config.mode == "off" or not isinstance(state, Mapping):
        return False
    try:
        version = state.get("v")
        if version == _OLDER_VERSION:
            state, version = _upgraded(state), _PREVIOUS_VERSION
        if version not in (_STATE_VERSION, _PREVIOUS_VERSION):
            return False
        elapsed = state["elapsed"]
        if type(elapsed) not in (int, float) or not 0 <= elapsed < math.inf:
            raise ValueError(elapsed)
        warned = frozenset(Signal(s) for s in items_of(state["warned"]))
        reported = array("Q", map(_reported_from_state, items_of(state["reported"])))
        del reported[:-MAX_REPORTED]
        tripped = _verdict_from_state(state["tripped"])
        detector._view.restore_state(state, version=version)
    except StateError:
        detector._view.clear()
        return False
    detector._started = detector._clock() - elapsed
    detector._warned, detector._reported = warned, reported
    detector._tripped = tripped if detector._config.mode == "on" else None
    return True


def _reported_from_state(item: object) -> int:
    if type(item) is not int or not 0 <= item < 1 << REPORT_BITS:
        raise ValueError(item)
    return item


def _verdict_state(verdict: Verdict | None) -> list[Any] | None:
    if verdict is None:
        return None
    return [
        verdict.action,
        verdict.signal.value if verdict.signal is not None else None,
        verdict.tool,
        list(verdict.tools),
        verdict.count,
        verdict.threshold,
        verdict.key,
        verdict.message,
    ]


def _verdict_from_state(state: object) -> Verdict | None:
    if state is None:
        return None
    action, signal, tool, tools, count, threshold, key, message = items_of(state)
    if action not in _ACTIONS:
        raise ValueError(action)
    return Verdict(
        action=action,
        signal=Signal(signal),
        tool=optional_text_of(tool),
        tools=tuple(text_of(t) for t in items_of(tools)),
        count=count_of(count),
        threshold=count_of(threshold),
        key=optional_text_of(key),
        message=text_of(message),
    )


def _upgraded(state: Mapping[str, Any]) -> dict[str, Any]:
    """A version 3 state in the layout of version 4: its calls without an answer's grouping
    or what they brought, what it had seen as numbers, no reply history. Per-call error
    streaks, which version 4 dropped, are left out. Raises one of :data:`StateError` when
    it is malformed."""
    seen = [
        number_of(text_of(value))
        for _, pairs in map(items_of, items_of(state["infos"]))
        for value, _ in map(items_of, items_of(pairs))
    ]
    tool, count = items_of(state["quiet"])
    expected, results, worked, judged, failing = items_of(state["turn"])
    return {
        **state,
        "calls": [[*items_of(call), False, False] for call in items_of(state["calls"])],
        "batch": [False, 0],
        "infos": seen,
        "quiet": [count, [] if tool is None else [tool]],
        "turn": [expected, results, worked, 0, judged, False, failing],
        "replies": [],
    }
