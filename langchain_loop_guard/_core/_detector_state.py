"""A detector's state as it shows it: its snapshot (:class:`DetectorSnapshot`), and the
versions of its exported state (the view's part and the run record's, under one version key),
older ones upgraded to a layout this release reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_loop_guard._core._novelty import number_of
from langchain_loop_guard._core._reporting import RunRecord
from langchain_loop_guard._core._rules import Signal
from langchain_loop_guard._core._view import OutcomeKind, RunView, items_of, key_text, text_of

__all__ = ["STATE_VERSION", "CallInfo", "DetectorSnapshot", "readable_state"]

STATE_VERSION = 5
_PREVIOUS_VERSION = 4
"""The previous release's state (a checkpoint it wrote), still read."""
_OLDER_VERSION = 3
"""The release before's state: upgraded to the previous one's layout, then read."""


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

    @classmethod
    def of(cls, view: RunView, record: RunRecord, recent: int) -> DetectorSnapshot:
        """The snapshot of the run ``view`` and ``record`` hold, with its last ``recent`` calls."""
        calls = list(view.calls)[-recent:] if recent > 0 else []
        return cls(
            turns=view.turns,
            calls=view.seen,
            elapsed_s=max(0.0, record.elapsed()),
            tripped=record.tripped.signal if record.tripped else None,
            warned=tuple(s for s in Signal if s in record.warned),
            recent=tuple(CallInfo(c.name, key_text(c.sig)[:8], c.kind) for c in calls),
        )


def readable_state(state: Mapping[str, Any]) -> tuple[Mapping[str, Any], int] | None:
    """``state`` (an exported state) in a layout this release reads, and its version; ``None``
    for a state of another version. Raises one of :data:`~._view.StateError` when an older
    state to upgrade is malformed."""
    version = state.get("v")
    if version == _OLDER_VERSION:
        state, version = _upgraded(state), _PREVIOUS_VERSION
    if version not in (STATE_VERSION, _PREVIOUS_VERSION):
        return None
    return state, version


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
