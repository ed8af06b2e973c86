"""What a run remembers of its verdicts (:class:`RunRecord`), and what a detection means in the
configured mode: in ``"on"`` mode a hard detection stops the run, in ``"observe"`` mode it is
reported once per loop; the soft limits (turn count, elapsed time) warn once per run.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

from langchain_loop_guard._core._canonical import digest
from langchain_loop_guard._core._config import LoopGuardConfig
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._rules import Detection, Signal
from langchain_loop_guard._core._verdict import ALLOW, Action, Verdict, verdict_on
from langchain_loop_guard._core._view import RunView, count_of, items_of, optional_text_of, text_of

__all__ = ["MAX_REPORTED", "REPORT_BITS", "Clock", "RunRecord", "report_digest"]

Clock = Callable[[], float]

MAX_REPORTED = 32  # distinct loops remembered per run for observe-mode de-duplication
REPORT_BITS = 64  # a reported loop is remembered as its 64-bit digest (see report_digest)
_NO_SIGNALS: frozenset[Signal] = frozenset()  # shared: each frozenset() is a new object
_ACTIONS = frozenset(get_args(Action))


def report_digest(signal: Signal, key: str | None) -> int:
    """A loop as observe mode remembers it: 64 bits, the same in every process."""
    parts = (signal.value,) if key is None else (signal.value, key)
    return int(digest("reported", *parts), 16)


class RunRecord:
    """What one run remembers of its verdicts: when it started, the verdict that tripped it,
    the soft signals that warned, and the loops observe mode reported.

    Each verdict goes through one of :meth:`report`, :meth:`still_tripped`, :meth:`soft` and
    :meth:`release`; :attr:`reading` is then the clock reading that verdict used (``None``
    when it read no clock), the elapsed time a listener is told.
    """

    __slots__ = (
        "_clock",
        "_config",
        "_max_turns",
        "_reported",
        "_started",
        "_timeout_ms",
        "_view",
        "reading",
        "tripped",
        "warned",
    )

    def __init__(self, clock: Clock, config: LoopGuardConfig, view: RunView) -> None:
        self._clock = clock
        self._view = view  # the soft limits read its turn count
        self.configure(config)
        self.clear()

    def configure(self, config: LoopGuardConfig) -> None:
        """Decide by ``config`` from now on."""
        self._config = config
        self._max_turns, self._timeout_ms = config.max_turns, config.turn_timeout_ms

    def clear(self) -> None:
        """Start afresh: the run starts now, nothing tripped, warned or reported."""
        self.reading: float | None = None
        self._started = self._clock()
        self.warned: frozenset[Signal] = _NO_SIGNALS  # the soft signals that warned
        # digests of the loops reported in observe mode, oldest first (none: no array yet)
        self._reported: array[int] | tuple[()] = ()
        self.tripped: Verdict | None = None

    def elapsed(self) -> float:
        """Seconds since the run started, read now."""
        return self._clock() - self._started

    def release(self) -> bool:
        """Lift the trip; whether the run was tripped."""
        tripped, self.tripped, self.reading = self.tripped, None, None
        return tripped is not None

    # --- verdicts ------------------------------------------------------------------------------

    def report(self, found: Detection, action: Literal["block", "abort"]) -> Verdict:
        """The mode's verdict on a hard detection: a stop, or an observation reported once."""
        config = self._config
        tr = translator(config.locale)
        window = config.frequency_window_size
        if config.mode == "observe":
            seen = report_digest(found.signal, found.key)
            if seen in self._reported:
                return self.soft()
            reported = self._reported
            if not isinstance(reported, array):
                reported = self._reported = array("Q")
            elif len(reported) >= MAX_REPORTED:
                del reported[0]
            reported.append(seen)
            self.reading = None
            frame = tr.gettext("Loop detected (observe mode, the run goes on): {reason}")
            return verdict_on("observe", found, locale=config.locale, window=window, frame=frame)
        frame = tr.gettext("Loop guard stopped the run: {reason}")
        self.reading = None
        self.tripped = verdict_on(action, found, locale=config.locale, window=window, frame=frame)
        return self.tripped

    def still_tripped(self, action: Action, tool: str | None = None) -> Verdict:
        """The verdict on a tool or model call of a run that :attr:`tripped` already stopped."""
        tripped = self.tripped
        assert tripped is not None  # callers check, to keep the hot path lean
        self.reading = None
        tr = translator(self._config.locale)
        message = tr.gettext(
            "Loop guard: this run was already stopped ({signal}); "
            "no further tool or model calls are allowed. {stop}"
        )
        return dataclasses.replace(
            tripped,
            action=action,
            tool=tool if tool is not None else tripped.tool,
            # the stop itself too: whoever catches a later refusal learns why (SPEC §14)
            message=message.format(signal=tripped.signal, stop=tripped.message),
            tripped=True,
        )

    def soft(self) -> Verdict:
        """The soft signals, checked on every event: each warns once per run (a tripped run,
        none)."""
        if self.tripped is not None:
            self.reading = None
            return ALLOW
        turns = self._view.turns
        if turns > self._max_turns and Signal.TURN_COUNT not in self.warned:
            self.warned |= {Signal.TURN_COUNT}
            self.reading = None
            return self._warning(
                Detection(Signal.TURN_COUNT, None, (), turns, self._max_turns, None)
            )
        elapsed = self.reading = self._clock() - self._started
        timeout_ms = self._timeout_ms
        if elapsed * 1000 > timeout_ms and Signal.ELAPSED_TIME not in self.warned:
            self.warned |= {Signal.ELAPSED_TIME}
            found = Detection(Signal.ELAPSED_TIME, None, (), int(elapsed), timeout_ms // 1000, None)
            return self._warning(found)
        return ALLOW

    def _warning(self, found: Detection) -> Verdict:
        config = self._config
        return verdict_on("warn", found, locale=config.locale, window=config.frequency_window_size)

    # --- its part of the detector's state ------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """The record as JSON data: the elapsed time, signals, digests and the tripping verdict."""
        return {
            "elapsed": max(0.0, self.elapsed()),
            "warned": sorted(signal.value for signal in self.warned),
            "reported": list(self._reported),
            "tripped": _verdict_state(self.tripped),
        }

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`export_state` output; a trip is kept in ``"on"`` mode only.
        Raises one of :data:`~._view.StateError`, and changes nothing, when it is malformed."""
        elapsed = state["elapsed"]
        if type(elapsed) not in (int, float) or not 0 <= elapsed < math.inf:
            raise ValueError(elapsed)
        warned = frozenset(Signal(s) for s in items_of(state["warned"]))
        reported = array("Q", map(_reported_from_state, items_of(state["reported"])))
        del reported[:-MAX_REPORTED]
        tripped = _verdict_from_state(state["tripped"])
        self._started = self._clock() - elapsed
        self.warned, self._reported = warned, reported
        self.tripped = tripped if self._config.mode == "on" else None


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
