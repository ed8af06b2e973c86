"""The pure loop detector: events in, :class:`Verdict` values out (SPEC §1-§4).

It knows nothing of LangChain or LangGraph: adapters translate their host's events into calls
of :class:`LoopDetector` and act on the verdicts. The clock is injected. Per-event work is
bounded by the configured windows, never by the run's length, and only digests and counters are
kept.
"""

from __future__ import annotations

import dataclasses
import math
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, get_args

from langchain_loop_guard._config import LoopGuardConfig
from langchain_loop_guard._messages import translator
from langchain_loop_guard._signature import (
    assistant_key,
    call_signature,
    digest,
    error_key,
    outcome_digest,
)

__all__ = [
    "ALLOW",
    "Action",
    "CallInfo",
    "Clock",
    "DetectorEvent",
    "DetectorSnapshot",
    "EventKind",
    "EventListener",
    "LoopDetector",
    "OutcomeKind",
    "Signal",
    "Verdict",
    "reason",
]

Action = Literal["allow", "warn", "observe", "block", "abort"]
OutcomeKind = Literal["pending", "ok", "error", "blocked"]
Clock = Callable[[], float]

_STATE_VERSION = 2
_MAX_REPORTED = 32  # distinct loops remembered per run for observe-mode de-duplication
_REPORT_BITS = 64  # a reported loop is remembered as its 64-bit digest (see _report_digest)


class Signal(StrEnum):
    """What kind of loop (or soft limit) a verdict is about, in the order they are reported."""

    REPEATED_TOOL_CALL = "repeated_tool_call"
    TOOL_CYCLE = "tool_cycle"
    TOOL_FREQUENCY = "tool_frequency"
    NO_PROGRESS = "no_progress"
    REPEATED_TOOL_ERROR = "repeated_tool_error"
    REPEATED_ASSISTANT_RESPONSE = "repeated_assistant_response"
    TURN_COUNT = "turn_count"
    ELAPSED_TIME = "elapsed_time"

    @property
    def is_soft(self) -> bool:
        """Soft signals warn and never stop a run."""
        return self in (Signal.TURN_COUNT, Signal.ELAPSED_TIME)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The detector's decision about one event.

    Attributes:
        action: ``"allow"``; ``"warn"`` (a soft limit was passed, go on); ``"observe"`` (a loop
            was seen in observe mode, go on); ``"block"`` (a tool call that must not run, and
            the run stops); ``"abort"`` (the run stops).
        signal: the signal that fired, or ``None`` for ``"allow"``.
        message: a localized, user-facing explanation (empty for ``"allow"``); it names tools
            and counts, never arguments or output.
        tool: the tool the verdict is about, when there is one.
        tools: every tool of the loop (a cycle names each tool of its pattern).
        count: how often the pattern was seen.
        threshold: the limit it reached.
        key: a digest identifying this loop (the same loop has the same key).
        tripped: ``True`` when the run was already stopped by an earlier verdict.
    """

    action: Action = "allow"
    signal: Signal | None = None
    message: str = ""
    tool: str | None = None
    tools: tuple[str, ...] = ()
    count: int = 0
    threshold: int = 0
    key: str | None = None
    tripped: bool = False

    @property
    def stops(self) -> bool:
        """Whether the run must stop (``"block"`` or ``"abort"``)."""
        return self.action in ("block", "abort")


ALLOW = Verdict()
"""The verdict of an event that changes nothing."""

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
    elapsed: float = 0.0
    verdict: Verdict = ALLOW


EventListener = Callable[[DetectorEvent], None]
"""Called with every event a detector decides (see ``LoopDetector(listener=...)``)."""


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


class _Call:
    """One tool call of the history: digests only."""

    __slots__ = ("call_id", "kind", "name", "outcome", "sig")

    def __init__(self, name: str, sig: str, call_id: str | None) -> None:
        self.name = name
        self.sig = sig
        self.call_id = call_id
        self.outcome: str | None = None  # None: pending or blocked, which counts as equal
        self.kind: OutcomeKind = "pending"


@dataclass(slots=True)
class _Detection:
    """A signal seen on one event, before the mode decides what to do about it."""

    signal: Signal
    tool: str | None
    tools: tuple[str, ...]
    count: int
    threshold: int
    key: str | None


def _any(items: Iterable[object]) -> bool:
    for _ in items:
        return True
    return False


def _repeats_of(sig: str, earlier: Iterable[_Call], aware: bool, *, consecutive: bool) -> int:
    """How many of the ``earlier`` calls (newest first) count as repeats of ``sig``.

    With progress awareness an occurrence counts only if its outcome equals that of the newest
    occurrence that returned; an unknown outcome (pending, blocked) counts as equal (SPEC §3).
    With ``consecutive``, counting ends at the first call that does not count.
    """
    count, ref = 0, None
    for call in earlier:
        counts = call.sig == sig
        if counts and aware and call.outcome is not None:
            if ref is None:
                ref = call.outcome
            else:
                counts = call.outcome == ref
        if counts:
            count += 1
        elif consecutive:
            break
    return count


def _repeats_pair(seq: list[_Call], index: int, window: int) -> bool:
    """Whether ``seq[index]`` repeated a (call, outcome) pair of the ``window`` calls before it.

    An unknown outcome (pending, blocked) is equal to any.
    """
    call = seq[index]
    sig, outcome = call.sig, call.outcome
    for earlier in seq[max(0, index - window) : index]:
        if earlier.sig == sig and (
            outcome is None or earlier.outcome is None or earlier.outcome == outcome
        ):
            return True
    return False


class LoopDetector:
    """The loop detector of one run.

    Feed it the run's events; each method returns a :class:`Verdict`. After a stop in ``"on"``
    mode the run is *tripped*: later tool calls are blocked and model turns aborted until
    :meth:`reset` (or :meth:`release`, which a nudging integration uses to let the run go on).

    The detector is not thread-safe: an integration serving concurrent runs holds one detector
    per run and serializes the events of each.

    Args:
        config: thresholds and mode; the defaults when ``None``.
        clock: returns seconds, like :func:`time.monotonic` (the default).
        listener: called after every event (mode ``"off"`` has none) with a
            :class:`DetectorEvent`: digests, never content. :meth:`replay` feeds such events
            back and reaches the same verdicts. Calls and results of ignored tools are digested
            too when there is a listener, so that a replay can stop ignoring them. Without a
            listener, nothing is digested that the signals do not need.
    """

    def __init__(
        self,
        config: LoopGuardConfig | None = None,
        *,
        clock: Clock | None = None,
        listener: EventListener | None = None,
    ):
        self._config = config if config is not None else LoopGuardConfig()
        self._clock: Clock = clock if clock is not None else time.monotonic
        self._listener = listener
        self._calls: deque[_Call] = deque()
        self._apply(self._config)
        self._clear()

    # --- configuration ---------------------------------------------------------------------

    @property
    def config(self) -> LoopGuardConfig:
        """The configuration in force."""
        return self._config

    def configure(self, config: LoopGuardConfig) -> None:
        """Switch to ``config`` and keep the run's history.

        Switching to ``"off"`` clears the run (off tracks nothing), and switching back from
        ``"off"`` starts it afresh. A mode other than ``"on"`` lifts a trip: an observed run
        is never blocked.
        """
        was_off = self._config.mode == "off"
        self._config = config
        self._apply(config)
        if config.mode == "off" or was_off:
            self.reset()
        elif config.mode != "on":
            self.release()

    def _apply(self, config: LoopGuardConfig) -> None:
        self._overrides = dict(config.tool_threshold_overrides)  # a plain dict: a hot lookup
        self._aware = config.progress_aware
        self._max_repeat = max([config.repeat_tool_threshold, *self._overrides.values()])
        self._no_progress = config.no_progress_calls if config.progress_aware else 0
        self._ignore = frozenset(config.ignore_tools)
        # Enough history for every signal: a repeat streak, a full cycle, a window and, for
        # no progress, the longest streak plus the window before its first call.
        history = max(
            config.frequency_window_size,
            config.max_cycle_length * config.cycle_repeats,
            self._max_repeat,
        )
        if self._no_progress:
            history = max(
                history, config.frequency_window_size + max(self._no_progress, self._max_repeat)
            )
        self._calls = deque(self._calls, maxlen=history)

    def repeat_threshold(self, tool: str) -> int:
        """The repeat threshold of ``tool`` (its override, or ``repeat_tool_threshold``)."""
        return self._overrides.get(tool, self._config.repeat_tool_threshold)

    def window_threshold(self, tool: str) -> int:
        """The window threshold of ``tool``: never below its repeat threshold."""
        return max(self._config.repeat_frequency_threshold, self.repeat_threshold(tool))

    # --- state -------------------------------------------------------------------------------

    @property
    def tripped(self) -> Verdict | None:
        """The verdict that stopped the run, or ``None``."""
        return self._tripped

    def reset(self) -> Verdict:
        """Clear the run's counters, history, warnings and tripped flag."""
        self._clear()
        if self._listener is not None and self._config.mode != "off":
            self._listener(DetectorEvent(kind="reset", elapsed=0.0))
        return ALLOW

    def _clear(self) -> None:
        self._elapsed: float | None = None  # the clock reading of the event being decided
        self._calls.clear()
        self._calls_seen = 0
        self._turns = 0
        self._started = self._clock()
        self._warned: set[Signal] = set()
        self._reported = array("Q")  # digests of the loops reported in observe mode, oldest first
        self._tripped: Verdict | None = None
        self._error_key: str | None = None
        self._error_streak = 0
        self._assistant_key: str | None = None
        self._assistant_streak = 0

    def release(self) -> None:
        """Lift the trip and keep the history: the same repeat is detected again at once."""
        if self._tripped is None:
            return
        self._tripped = None
        if self._listener is not None:
            self._emit("release", ALLOW)

    def snapshot(self, recent: int = 10) -> DetectorSnapshot:
        """Counters and the last ``recent`` calls (tool name, short digest, outcome kind)."""
        calls = list(self._calls)[-recent:] if recent > 0 else []
        return DetectorSnapshot(
            turns=self._turns,
            calls=self._calls_seen,
            elapsed_s=max(0.0, self._clock() - self._started),
            tripped=self._tripped.signal if self._tripped else None,
            warned=tuple(s for s in Signal if s in self._warned),
            recent=tuple(CallInfo(c.name, c.sig[:8], c.kind) for c in calls),
        )

    def export_state(self) -> dict[str, Any]:
        """The run's state as JSON data: tool names, digests and counters, never content."""
        return {
            "v": _STATE_VERSION,
            "calls": [[c.name, c.sig, c.outcome, c.kind, c.call_id] for c in self._calls],
            "seen": self._calls_seen,
            "turns": self._turns,
            "elapsed": max(0.0, self._clock() - self._started),
            "warned": sorted(signal.value for signal in self._warned),
            "reported": self._reported.tolist(),
            "tripped": _verdict_state(self._tripped),
            "error": [self._error_key, self._error_streak],
            "assistant": [self._assistant_key, self._assistant_streak],
        }

    def restore_state(self, state: Mapping[str, Any]) -> bool:
        """Continue from :meth:`export_state` output (another process's, say).

        Returns whether the state was taken. A state of another version, a malformed one, or
        any state in ``"off"`` mode starts the run afresh instead: losing a loop's beginning is
        better than failing the agent. Nothing is half restored.
        """
        self._clear()
        if self._config.mode == "off" or not isinstance(state, Mapping):
            return False
        try:
            if state.get("v") != _STATE_VERSION:
                return False
            calls = [_call_from_state(item) for item in state["calls"]]
            seen, turns = _count(state["seen"]), _count(state["turns"])
            elapsed = state["elapsed"]
            if type(elapsed) not in (int, float) or not 0 <= elapsed < math.inf:
                raise ValueError(elapsed)
            warned = {Signal(s) for s in _items(state["warned"])}
            reported = array("Q", map(_report_from_state, _items(state["reported"])))
            del reported[:-_MAX_REPORTED]
            tripped = _verdict_from_state(state["tripped"])
            error_key, error_streak = _streak_from_state(state["error"])
            assistant_key, assistant_streak = _streak_from_state(state["assistant"])
        except (KeyError, TypeError, ValueError):
            return False
        self._calls.extend(calls)
        self._calls_seen, self._turns = seen, turns
        self._started = self._clock() - elapsed
        self._warned, self._reported = warned, reported
        self._tripped = tripped if self._config.mode == "on" else None
        self._error_key, self._error_streak = error_key, error_streak
        self._assistant_key, self._assistant_streak = assistant_key, assistant_streak
        return True

    # --- events --------------------------------------------------------------------------------

    def turn_start(self) -> Verdict:
        """A model call begins. A tripped run is aborted before the call is paid for."""
        if self._config.mode == "off":
            return ALLOW
        verdict = self._turn_start()
        if self._listener is not None:
            self._emit("turn_start", verdict)
        return verdict

    def tool_call(self, name: str, args: object = None, call_id: str | None = None) -> Verdict:
        """A tool call is about to run; ``"block"`` means it must not."""
        if self._config.mode == "off":
            return ALLOW
        listener = self._listener
        # an ignored call is not kept: its signature is only needed for a listener
        sig = "" if listener is None and name in self._ignore else call_signature(name, args)
        verdict = self._tool_call(name, sig, call_id)
        if listener is not None:
            self._emit("tool_call", verdict, tool=name, digest=sig, call_id=call_id)
        return verdict

    def tool_result(
        self,
        name: str,
        output: object = None,
        *,
        error: object = None,
        call_id: str | None = None,
    ) -> Verdict:
        """A tool call returned ``output``, or failed with ``error`` (an exception or text).

        The result belongs to the call with the same ``call_id``; without one (or with an id
        never seen) to the oldest pending call of that tool. A second result for a call, or a
        result for a call the guard blocked, is no tool outcome and is disregarded.
        """
        if self._config.mode == "off":
            return ALLOW
        listener = self._listener
        if listener is None and name in self._ignore:
            return self._soft()
        failed = error is not None
        outcome = error_key(name, error) if failed else outcome_digest(output)
        verdict = self._tool_result(name, outcome, failed, call_id)
        if listener is not None:
            self._emit(
                "tool_result", verdict, tool=name, digest=outcome, call_id=call_id, error=failed
            )
        return verdict

    def assistant_message(
        self,
        text: str,
        tool_calls: Iterable[tuple[str, object]] = (),
        *,
        in_context: bool = True,
    ) -> Verdict:
        """The model answered with ``text`` (and asked for ``tool_calls``).

        Empty text is skipped. With progress awareness a message that calls tools is left to
        the tool-call signals: it neither counts nor breaks the streak.

        ``in_context`` says whether the model's input held the run's previous response (an
        agent reading its own history). A helper model (a grader, a router) that answers the
        same to new inputs passes ``False``: its answer starts a new streak instead of
        repeating the last one (SPEC §11 N2).
        """
        if self._config.mode == "off":
            return ALLOW
        if self._listener is None:
            if self._aware and _any(tool_calls):
                return self._soft()  # left to the tool-call signals: no key needed
            return self._assistant_message(
                assistant_key(text), has_calls=False, in_context=in_context
            )
        count = sum(1 for _ in tool_calls)
        key = assistant_key(text)
        verdict = self._assistant_message(key, has_calls=count > 0, in_context=in_context)
        self._emit("assistant_message", verdict, digest=key, calls=count, in_context=in_context)
        return verdict

    def user_message(self) -> Verdict:
        """A new human message in the same run (``scope="thread"``): the user moved it on.

        It lifts a trip (the user saw the stop and answered), and the successful calls before
        it no longer count as repeats of the calls after it (asking for the same thing in a
        new turn is no loop, SPEC §11 N3). Failures still do: the same failing call after
        every new message is a loop (R7), and so are the error and response streaks.
        """
        if self._config.mode == "off":
            return ALLOW
        verdict = self._user_message()
        if self._listener is not None:
            self._emit("user_message", verdict)
        return verdict

    def tick(self) -> Verdict:
        """A clock tick: only the elapsed-time warning can fire."""
        if self._config.mode == "off":
            return ALLOW
        verdict = self._soft()
        if self._listener is not None:
            self._emit("tick", verdict)
        return verdict

    def replay(self, event: DetectorEvent) -> Verdict:
        """Feed an event as a listener received it: digests instead of content.

        The event's ``elapsed`` and ``verdict`` are not used (drive the clock with
        ``elapsed`` to replay elapsed-time warnings). Under the configuration the events were
        recorded with, every verdict is the one the listener saw; under another, the
        verdicts that configuration gives. A listener of this detector receives the events.

        Raises:
            ValueError: a tool call or result without its tool or digest.
        """
        if self._config.mode == "off":
            return ALLOW
        kind = event.kind
        if kind == "reset":
            return self.reset()
        if kind == "release":
            self.release()
            return ALLOW
        if kind == "user_message":
            return self.user_message()
        tool, value = event.tool, event.digest
        if kind in ("tool_call", "tool_result") and (tool is None or value is None):
            msg = f"a {kind} event needs its tool and digest"
            raise ValueError(msg)
        if kind == "turn_start":
            verdict = self._turn_start()
        elif kind == "tool_call":
            verdict = self._tool_call(tool or "", value or "", event.call_id)
        elif kind == "tool_result":
            verdict = self._tool_result(tool or "", value or "", event.error, event.call_id)
        elif kind == "assistant_message":
            verdict = self._assistant_message(
                value, has_calls=event.calls > 0, in_context=event.in_context
            )
        else:
            verdict = self._soft()
        if self._listener is not None:
            self._emit(
                kind,
                verdict,
                tool=tool,
                digest=value,
                call_id=event.call_id,
                error=event.error,
                calls=event.calls,
                in_context=event.in_context,
            )
        return verdict

    def _emit(self, kind: EventKind, verdict: Verdict, **fields: Any) -> None:
        """Tell the listener about an event, with the clock reading its decision used."""
        assert self._listener is not None  # callers check, to keep the hot path lean
        elapsed = self._elapsed
        if elapsed is None:  # the decision did not read the clock
            elapsed = self._clock() - self._started
        self._elapsed = None
        self._listener(DetectorEvent(kind=kind, elapsed=elapsed, verdict=verdict, **fields))

    # --- event decisions (digests in) -------------------------------------------------------

    def _turn_start(self) -> Verdict:
        if self._tripped is not None:
            return self._still_tripped(self._tripped, "abort")
        self._turns += 1
        return self._soft()

    def _user_message(self) -> Verdict:
        self._tripped = None
        for call in self._calls:
            if call.kind == "ok":
                call.sig = ""  # a signature no call has: it can no longer be repeated
        return self._soft()

    def _tool_call(self, name: str, sig: str, call_id: str | None) -> Verdict:
        ignored = name in self._ignore
        if self._tripped is not None:
            if not ignored:
                call = _Call(name, sig, call_id)
                call.kind = "blocked"
                self._append(call)
            return self._still_tripped(self._tripped, "block", tool=name)
        if ignored:
            return self._soft()
        call = _Call(name, sig, call_id)
        found = self._check_call(call)
        self._append(call)
        if found is None:
            return self._soft()
        verdict = self._report(found, "block")
        if verdict.action == "block":
            call.kind = "blocked"
        return verdict

    def _tool_result(self, name: str, outcome: str, failed: bool, call_id: str | None) -> Verdict:
        if name in self._ignore:
            return self._soft()
        call = self._latest_with_id(call_id) if call_id is not None else None
        if call is not None and call.kind != "pending":
            return self._soft()
        if call is None:
            call = self._oldest_pending(name, anonymous_only=call_id is not None)
        kind: OutcomeKind = "error" if failed else "ok"
        if call is not None:
            call.outcome, call.kind = outcome, kind
        if kind == "ok":
            self._error_key, self._error_streak = None, 0
            return self._soft()
        if outcome == self._error_key:
            self._error_streak += 1
        else:
            self._error_key, self._error_streak = outcome, 1
        threshold = self._config.repeat_error_threshold
        if self._tripped is None and self._error_streak >= threshold:
            found = _Detection(
                Signal.REPEATED_TOOL_ERROR, name, (name,), self._error_streak, threshold, outcome
            )
            return self._report(found, "abort")
        return self._soft()

    def _assistant_message(self, key: str | None, *, has_calls: bool, in_context: bool) -> Verdict:
        if key is None or (self._aware and has_calls):
            return self._soft()
        if key == self._assistant_key and in_context:
            self._assistant_streak += 1
        else:
            self._assistant_key, self._assistant_streak = key, 1
        threshold = self._config.repeat_assistant_threshold
        if self._tripped is None and self._assistant_streak >= threshold:
            found = _Detection(
                Signal.REPEATED_ASSISTANT_RESPONSE, None, (), self._assistant_streak, threshold, key
            )
            return self._report(found, "abort")
        return self._soft()

    # --- history -------------------------------------------------------------------------------

    def _append(self, call: _Call) -> None:
        self._calls.append(call)
        self._calls_seen += 1

    def _latest_with_id(self, call_id: str) -> _Call | None:
        for call in reversed(self._calls):
            if call.call_id == call_id:
                return call
        return None

    def _oldest_pending(self, name: str, *, anonymous_only: bool) -> _Call | None:
        # With an unknown id, only a call without an id can be the one: a call that has an id
        # waits for its own.
        for call in self._calls:
            if (
                call.kind == "pending"
                and call.name == name
                and (call.call_id is None or not anonymous_only)
            ):
                return call
        return None

    # --- hard signals ----------------------------------------------------------------------

    def _check_call(self, cur: _Call) -> _Detection | None:
        """The first hard signal ``cur`` fires, in the SPEC table's order.

        ``seq`` is the history with ``cur`` last, ``sigs`` its signatures: counting calls by
        signature alone is quick (list methods) and bounds every progress-aware count from
        above, so outcomes are only looked at when a signal is within reach.
        """
        seq = [*self._calls, cur]
        sigs = [call.sig for call in seq]
        return (
            self._repeated_call(seq, sigs)
            or self._cycle(seq, sigs)
            or self._frequency(seq, sigs)
            or self._no_progress_streak(seq, sigs)
        )

    def _repeated_call(self, seq: list[_Call], sigs: list[str]) -> _Detection | None:
        """A A A: the same call ``threshold`` times in a row."""
        cur = seq[-1]
        threshold = self.repeat_threshold(cur.name)
        if sigs[-threshold:].count(cur.sig) < threshold:
            return None
        earlier = reversed(seq[-threshold:-1])
        if 1 + _repeats_of(cur.sig, earlier, self._aware, consecutive=True) < threshold:
            return None
        return _Detection(
            Signal.REPEATED_TOOL_CALL, cur.name, (cur.name,), threshold, threshold, cur.sig
        )

    def _cycle(self, seq: list[_Call], sigs: list[str]) -> _Detection | None:
        """A B A B A B: a pattern of 2..max_cycle_length calls, ``cycle_repeats`` times."""
        repeats = self._config.cycle_repeats
        for length in range(2, self._config.max_cycle_length + 1):  # shorter cycles first
            span = length * repeats
            if (
                len(sigs) < span
                or sigs[-1 - length] != sigs[-1]
                or sigs[-span:-length] != sigs[-span + length :]
            ):
                continue  # the last ``span`` calls are not ``repeats`` times one pattern
            if sigs[-length:].count(sigs[-1]) == length:
                continue  # A A A is a repeat, not a cycle
            if self._aware and not all(
                len({c.outcome for c in seq[-span + p : -1 : length]} - {None}) <= 1
                for p in range(length)
            ):
                continue  # a position of the pattern returned different outcomes
            return _Detection(
                Signal.TOOL_CYCLE,
                seq[-1].name,
                tuple(c.name for c in seq[-length:]),
                repeats,
                repeats,
                digest(*sorted(sigs[-length:])),
            )
        return None

    def _frequency(self, seq: list[_Call], sigs: list[str]) -> _Detection | None:
        """A … A … A … A: ``threshold`` of the last ``window`` calls, the current one counted.

        A tool whose threshold exceeds the window is, deliberately, never stopped here.
        """
        cur = seq[-1]
        threshold = self.window_threshold(cur.name)
        window = self._config.frequency_window_size
        if 1 + sigs[-window:-1].count(cur.sig) < threshold:
            return None
        earlier = reversed(seq[-window:-1])
        count = 1 + _repeats_of(cur.sig, earlier, self._aware, consecutive=False)
        if count < threshold:
            return None
        return _Detection(Signal.TOOL_FREQUENCY, cur.name, (cur.name,), count, threshold, cur.sig)

    def _no_progress_streak(self, seq: list[_Call], sigs: list[str]) -> _Detection | None:
        """Each of the last N calls repeated a (call, outcome) pair of the window before it.

        N is ``no_progress_calls``, raised to the highest repeat threshold of the streak's
        tools. The work is at most N times the window, and nothing when the current call
        repeats no call of the window.
        """
        window = self._config.frequency_window_size
        if not self._no_progress or sigs[-1] not in sigs[-window - 1 : -1]:
            return None
        highest = 0
        for count, index in enumerate(range(len(seq) - 1, 0, -1), start=1):
            if not _repeats_pair(seq, index, window):
                return None
            highest = max(highest, self.repeat_threshold(seq[index].name))
            threshold = max(self._no_progress, highest)
            if count >= threshold:
                streak = seq[index:]
                return _Detection(
                    Signal.NO_PROGRESS,
                    streak[-1].name,
                    tuple(dict.fromkeys(c.name for c in streak)),
                    count,
                    threshold,
                    digest(*sorted({c.sig for c in streak})),
                )
        return None

    # --- verdicts ------------------------------------------------------------------------------

    def _report(self, found: _Detection, action: Literal["block", "abort"]) -> Verdict:
        """The mode's verdict on a hard detection: a stop, or an observation reported once."""
        tr = translator(self._config.locale)
        if self._config.mode == "observe":
            seen = _report_digest(found.signal, found.key)
            if seen in self._reported:
                return self._soft()
            if len(self._reported) >= _MAX_REPORTED:
                del self._reported[0]
            self._reported.append(seen)
            frame = tr.gettext("Loop detected (observe mode, the run goes on): {reason}")
            return self._verdict("observe", found, frame)
        self._tripped = self._verdict(
            action, found, tr.gettext("Loop guard stopped the run: {reason}")
        )
        return self._tripped

    def _still_tripped(self, tripped: Verdict, action: Action, tool: str | None = None) -> Verdict:
        """The verdict on a tool or model call of a run that ``tripped`` already stopped."""
        tr = translator(self._config.locale)
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

    def _soft(self) -> Verdict:
        """The soft signals, checked on every event: each warns once per run, never stops.

        A tripped run is over: it gets no more warnings.
        """
        if self._tripped is not None:
            return ALLOW
        config = self._config
        if self._turns > config.max_turns and Signal.TURN_COUNT not in self._warned:
            self._warned.add(Signal.TURN_COUNT)
            found = _Detection(Signal.TURN_COUNT, None, (), self._turns, config.max_turns, None)
            return self._verdict("warn", found)
        elapsed = self._elapsed = self._clock() - self._started
        if elapsed * 1000 > config.turn_timeout_ms and Signal.ELAPSED_TIME not in self._warned:
            self._warned.add(Signal.ELAPSED_TIME)
            found = _Detection(
                Signal.ELAPSED_TIME, None, (), int(elapsed), config.turn_timeout_ms // 1000, None
            )
            return self._verdict("warn", found)
        return ALLOW

    def _verdict(self, action: Action, found: _Detection, frame: str = "{reason}") -> Verdict:
        """The verdict on ``found``; its message is ``frame`` around the signal's reason."""
        text = reason(
            found.signal,
            locale=self._config.locale,
            tool=found.tool,
            tools=found.tools,
            count=found.count,
            threshold=found.threshold,
            window=self._config.frequency_window_size,
        )
        return Verdict(
            action=action,
            signal=found.signal,
            message=frame.format(reason=text),
            tool=found.tool,
            tools=found.tools,
            count=found.count,
            threshold=found.threshold,
            key=found.key,
        )


def reason(
    signal: Signal,
    *,
    locale: str | None = None,
    tool: str | None = None,
    tools: tuple[str, ...] = (),
    count: int = 0,
    threshold: int = 0,
    window: int = 0,
) -> str:
    """The localized, user-facing reason of ``signal``: tool names and counts, no content."""
    tr = translator(locale)
    if signal is Signal.REPEATED_TOOL_CALL:
        text = tr.gettext(
            "`{tool}` was called {count} times in a row with the same arguments "
            "(limit {threshold})."
        )
    elif signal is Signal.TOOL_CYCLE:
        text = tr.gettext(
            "the tool calls {cycle} repeated as a cycle {count} times (limit {threshold})."
        )
    elif signal is Signal.TOOL_FREQUENCY:
        text = tr.gettext(
            "`{tool}` was called with the same arguments {count} times in the last {window} "
            "tool calls (limit {threshold})."
        )
    elif signal is Signal.NO_PROGRESS:
        text = tr.gettext(
            "the last {count} tool calls ({cycle}) only repeated earlier calls with the same "
            "results (limit {threshold})."
        )
    elif signal is Signal.REPEATED_TOOL_ERROR:
        text = tr.gettext(
            "`{tool}` failed with the same error {count} times in a row (limit {threshold})."
        )
    elif signal is Signal.REPEATED_ASSISTANT_RESPONSE:
        text = tr.gettext(
            "the assistant gave the same response {count} times in a row (limit {threshold})."
        )
    elif signal is Signal.TURN_COUNT:
        text = tr.gettext(
            "Loop guard warning: the run has made {count} model calls (more than {threshold})."
        )
    else:
        text = tr.gettext(
            "Loop guard warning: the run has been going for {count} s (more than {threshold} s)."
        )
    cycle = " → ".join(f"`{name}`" for name in tools)
    return text.format(tool=tool, cycle=cycle, count=count, threshold=threshold, window=window)


# --- exported state --------------------------------------------------------------------------

_ACTIONS = frozenset(get_args(Action))
_KINDS = frozenset(get_args(OutcomeKind))


def _items(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError
    return value


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(value)
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _call_from_state(item: object) -> _Call:
    name, sig, outcome, kind, call_id = _items(item)
    if kind not in _KINDS:
        raise ValueError(kind)
    call = _Call(_text(name), _text(sig), _optional_text(call_id))
    call.outcome, call.kind = _optional_text(outcome), kind
    return call


def _report_digest(signal: Signal, key: str | None) -> int:
    """A loop as observe mode remembers it: 64 bits, the same in every process."""
    parts = (signal.value,) if key is None else (signal.value, key)
    return int(digest("reported", *parts), 16)


def _report_from_state(item: object) -> int:
    if type(item) is not int or not 0 <= item < 1 << _REPORT_BITS:
        raise ValueError(item)
    return item


def _streak_from_state(item: object) -> tuple[str | None, int]:
    key, streak = _items(item)
    return _optional_text(key), _count(streak)


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
    action, signal, tool, tools, count, threshold, key, message = _items(state)
    if action not in _ACTIONS:
        raise ValueError(action)
    return Verdict(
        action=action,
        signal=Signal(signal),
        tool=_optional_text(tool),
        tools=tuple(_text(t) for t in _items(tools)),
        count=_count(count),
        threshold=_count(threshold),
        key=_optional_text(key),
        message=_text(message),
    )
