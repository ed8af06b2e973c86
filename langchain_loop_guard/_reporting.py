"""What a detection means in the configured mode (the detector's ``_report``, ``_still_tripped``
and ``_soft``): in ``"on"`` mode a hard detection stops the run, in ``"observe"`` mode it is
reported once per loop; the soft limits (turn count, elapsed time) warn once per run.
"""

from __future__ import annotations

import dataclasses
from array import array
from typing import TYPE_CHECKING, Literal

from langchain_loop_guard._canonical import digest
from langchain_loop_guard._messages import translator
from langchain_loop_guard._rules import Detection, Signal
from langchain_loop_guard._verdict import ALLOW, Action, Verdict, verdict_on

if TYPE_CHECKING:
    from langchain_loop_guard._detector import LoopDetector

__all__ = ["MAX_REPORTED", "REPORT_BITS", "report", "report_digest", "soft", "still_tripped"]

MAX_REPORTED = 32  # distinct loops remembered per run for observe-mode de-duplication
REPORT_BITS = 64  # a reported loop is remembered as its 64-bit digest (see report_digest)


def report_digest(signal: Signal, key: str | None) -> int:
    """A loop as observe mode remembers it: 64 bits, the same in every process."""
    parts = (signal.value,) if key is None else (signal.value, key)
    return int(digest("reported", *parts), 16)


def report(detector: LoopDetector, found: Detection, action: Literal["block", "abort"]) -> Verdict:
    """The mode's verdict on a hard detection: a stop, or an observation reported once."""
    config = detector._config
    tr = translator(config.locale)
    window = config.frequency_window_size
    if config.mode == "observe":
        seen = report_digest(found.signal, found.key)
        if seen in detector._reported:
            return soft(detector)
        reported = detector._reported
        if not isinstance(reported, array):
            reported = detector._reported = array("Q")
        elif len(reported) >= MAX_REPORTED:
            del reported[0]
        reported.append(seen)
        frame = tr.gettext("Loop detected (observe mode, the run goes on): {reason}")
        return verdict_on("observe", found, locale=config.locale, window=window, frame=frame)
    frame = tr.gettext("Loop guard stopped the run: {reason}")
    detector._tripped = verdict_on(action, found, locale=config.locale, window=window, frame=frame)
    return detector._tripped


def still_tripped(
    detector: LoopDetector, tripped: Verdict, action: Action, tool: str | None = None
) -> Verdict:
    """The verdict on a tool or model call of a run that ``tripped`` already stopped."""
    tr = translator(detector._config.locale)
    message = tr.gettext(
        "Loop guard: this run was already stopped ({signal}); "
        "no further tool or model calls are allowed."
    )
    return dataclasses.replace(
        tripped,
        action=action,
        tool=tool if tool is not None else tripped.tool,
        message=message.format(signal=tripped.signal),
        tripped=True,
    )


def soft(detector: LoopDetector) -> Verdict:
    """The soft signals, checked on every event: each warns once per run (a tripped run, none)."""
    if detector._tripped is not None:
        return ALLOW
    turns = detector._view.turns
    if turns > detector._max_turns and Signal.TURN_COUNT not in detector._warned:
        detector._warned |= {Signal.TURN_COUNT}
        found = Detection(Signal.TURN_COUNT, None, (), turns, detector._max_turns, None)
        return _warning(detector, found)
    elapsed = detector._elapsed = detector._clock() - detector._started
    timeout_ms = detector._timeout_ms
    if elapsed * 1000 > timeout_ms and Signal.ELAPSED_TIME not in detector._warned:
        detector._warned |= {Signal.ELAPSED_TIME}
        found = Detection(Signal.ELAPSED_TIME, None, (), int(elapsed), timeout_ms // 1000, None)
        return _warning(detector, found)
    return ALLOW


def _warning(detector: LoopDetector, found: Detection) -> Verdict:
    config = detector._config
    return verdict_on("warn", found, locale=config.locale, window=config.frequency_window_size)
