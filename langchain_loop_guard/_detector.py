"""The pure loop detector: events in, :class:`Verdict` values out (SPEC §1-§4).

It knows nothing of LangChain or LangGraph: adapters translate their host's events into calls
of :class:`LoopDetector` and act on the verdicts. The clock is injected. Per-event work is
bounded by the configured windows, never by the run's length, and only digests and counters are
kept.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import islice
from typing import Any, Literal

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
    "Action",
    "CallInfo",
    "DetectorSnapshot",
    "LoopDetector",
    "Signal",
    "Verdict",
]

Action = Literal["allow", "warn", "observe", "block", "abort"]
OutcomeKind = Literal["pending", "ok", "error", "blocked"]
Clock = Callable[[], float]

_STATE_VERSION = 1
_MAX_REPORTED = 256  # distinct loops remembered per run for observe-mode de-duplication


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
    __slots__ = ("call_id", "kind", "name", "outcome", "sig")

    def __init__(self, name: str, sig: str, call_id: str | None) -> None:
        self.name = name
        self.sig = sig
        self.call_id = call_id
        self.outcome: str | None = None  # None: pending (or blocked), counts as equal
        self.kind: OutcomeKind = "pending"


def _same(a: str | None, b: str | None) -> bool:
    return a is None or b is None or a == b


class LoopDetector:
    """The loop detector of one run.

    Feed it the run's events; each method returns a :class:`Verdict`. After a stop in ``"on"``
    mode the run is *tripped*: later tool calls are blocked and model turns aborted until
    :meth:`reset` (or :meth:`release`, which a nudging integration uses to let the run go on).

    Args:
        config: thresholds and mode; the defaults when ``None``.
        clock: returns seconds, like :func:`time.monotonic` (the default).
    """

    def __init__(self, config: LoopGuardConfig | None = None, *, clock: Clock | None = None):
        self._config = config if config is not None else LoopGuardConfig()
        self._clock: Clock = clock if clock is not None else time.monotonic
        self._calls: deque[_Call] = deque()
        self._apply(self._config)
        self.reset()

    # --- configuration ---------------------------------------------------------------------

    @property
    def config(self) -> LoopGuardConfig:
        """The configuration in force."""
        return self._config

    def configure(self, config: LoopGuardConfig) -> None:
        """Switch to ``config`` and keep the run's history (switching ``"off"`` clears it)."""
        was_off = self._config.mode == "off"
        self._config = config
        self._apply(config)
        if config.mode == "off" or was_off:
            self.reset()

    def _apply(self, config: LoopGuardConfig) -> None:
        overrides = config.tool_threshold_overrides
        self._max_repeat = max([config.repeat_tool_threshold, *overrides.values()])
        self._no_progress = config.no_progress_calls if config.progress_aware else 0
        self._ignore = frozenset(config.ignore_tools)
        history = max(
            config.frequency_window_size,
            config.max_cycle_length * config.cycle_repeats,
            self._max_repeat,
        )
        if self._no_progress:
            history = max(
                history,
                config.frequency_window_size + max(self._no_progress, self._max_repeat) + 1,
            )
        self._calls = deque(self._calls, maxlen=history)

    def repeat_threshold(self, tool: str) -> int:
        """The repeat threshold of ``tool`` (its override, or ``repeat_tool_threshold``)."""
        return self._config.tool_threshold_overrides.get(tool, self._config.repeat_tool_threshold)

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
        self._calls.clear()
        self._calls_seen = 0
        self._turns = 0
        self._started = self._clock()
        self._warned: set[Signal] = set()
        self._reported: dict[tuple[Signal, str | None], None] = {}
        self._tripped: Verdict | None = None
        self._error_key: str | None = None
        self._error_streak = 0
        self._assistant_key: str | None = None
        self._assistant_streak = 0
        return ALLOW

    def release(self) -> None:
        """Lift the trip and keep the history: the same repeat is detected again at once."""
        self._tripped = None

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
            "warned": sorted(self._warned),
            "reported": [[s, k] for s, k in self._reported],
            "tripped": _verdict_state(self._tripped),
            "error": [self._error_key, self._error_streak],
            "assistant": [self._assistant_key, self._assistant_streak],
        }

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`export_state` output (another process's, say).

        A state of another version, or a malformed one, starts the run afresh: losing a loop's
        beginning is better than failing the agent.
        """
        self.reset()
        try:
            if state.get("v") != _STATE_VERSION:
                return
            for name, sig, outcome, kind, call_id in state["calls"]:
                call = _Call(str(name), str(sig), call_id)
                call.outcome, call.kind = outcome, kind
                self._calls.append(call)
            self._calls_seen = int(state["seen"])
            self._turns = int(state["turns"])
            self._started = self._clock() - float(state["elapsed"])
            self._warned = {Signal(s) for s in state["warned"]}
            self._reported = {(Signal(s), k): None for s, k in state["reported"]}
            self._tripped = _verdict_from_state(state["tripped"])
            self._error_key, self._error_streak = state["error"]
            self._assistant_key, self._assistant_streak = state["assistant"]
        except (KeyError, TypeError, ValueError):
            self.reset()

    # --- events --------------------------------------------------------------------------------

    def turn_start(self) -> Verdict:
        """A model call begins. A tripped run is aborted before the call is paid for."""
        if self._config.mode == "off":
            return ALLOW
        if self._tripped is not None:
            return self._still_tripped("abort")
        self._turns += 1
        return self._soft()

    def tool_call(self, name: str, args: object = None, call_id: str | None = None) -> Verdict:
        """A tool call is about to run; ``"block"`` means it must not."""
        if self._config.mode == "off":
            return ALLOW
        ignored = name in self._ignore
        if self._tripped is not None:
            if not ignored:
                call = _Call(name, call_signature(name, args), call_id)
                call.kind = "blocked"
                self._append(call)
            return self._still_tripped("block", tool=name)
        if ignored:
            return self._soft()
        call = _Call(name, call_signature(name, args), call_id)
        verdict = self._check_call(call)
        self._append(call)
        if verdict is not None:
            verdict = self._report(verdict)
            if verdict.action == "block":
                call.kind = "blocked"
            return verdict
        return self._soft()

    def tool_result(
        self,
        name: str,
        output: object = None,
        *,
        error: object = None,
        call_id: str | None = None,
    ) -> Verdict:
        """A tool call returned ``output``, or failed with ``error`` (an exception or text)."""
        if self._config.mode == "off" or name in self._ignore:
            return ALLOW if self._config.mode == "off" else self._soft()
        if error is not None:
            outcome, kind = error_key(name, error), "error"
        else:
            outcome, kind = outcome_digest(output), "ok"
        call = self._match(name, call_id)
        if call is not None:
            call.outcome, call.kind = outcome, kind
        if kind == "ok":
            self._error_key, self._error_streak = None, 0
        elif outcome == self._error_key:
            self._error_streak += 1
        else:
            self._error_key, self._error_streak = outcome, 1
        if self._tripped is not None:
            return ALLOW
        threshold = self._config.repeat_error_threshold
        if kind == "error" and self._error_streak >= threshold:
            return self._report(
                self._verdict(
                    Signal.REPEATED_TOOL_ERROR,
                    "abort",
                    tool=name,
                    count=self._error_streak,
                    threshold=threshold,
                    key=outcome,
                )
            )
        return self._soft()

    def assistant_message(
        self, text: str, tool_calls: Iterable[tuple[str, object]] = ()
    ) -> Verdict:
        """The model answered with ``text`` (and asked for ``tool_calls``)."""
        if self._config.mode == "off":
            return ALLOW
        key = assistant_key(text if isinstance(text, str) else str(text))
        if key is None or (self._config.progress_aware and any(True for _ in tool_calls)):
            return self._soft()
        if key == self._assistant_key:
            self._assistant_streak += 1
        else:
            self._assistant_key, self._assistant_streak = key, 1
        if self._tripped is not None:
            return ALLOW
        threshold = self._config.repeat_assistant_threshold
        if self._assistant_streak >= threshold:
            return self._report(
                self._verdict(
                    Signal.REPEATED_ASSISTANT_RESPONSE,
                    "abort",
                    count=self._assistant_streak,
                    threshold=threshold,
                    key=key,
                )
            )
        return self._soft()

    def tick(self) -> Verdict:
        """A clock tick: only the elapsed-time warning can fire."""
        if self._config.mode == "off":
            return ALLOW
        return self._soft()

    # --- internals -----------------------------------------------------------------------------

    def _append(self, call: _Call) -> None:
        self._calls.append(call)
        self._calls_seen += 1

    def _match(self, name: str, call_id: str | None) -> _Call | None:
        if call_id is not None:
            for call in self._calls:
                if call.call_id == call_id:
                    return call if call.kind == "pending" else None
        for call in self._calls:
            if call.kind == "pending" and call.name == name and call.call_id is None:
                return call
        if call_id is None:
            for call in self._calls:
                if call.kind == "pending" and call.name == name:
                    return call
        return None

    def _check_call(self, cur: _Call) -> Verdict | None:
        aware = self._config.progress_aware
        calls = self._calls
        sig = cur.sig
        # repeated tool call: A A A
        threshold = self.repeat_threshold(cur.name)
        count, ref, first = 1, None, True
        for call in reversed(calls):
            if call.sig != sig:
                break
            if aware:
                if first:
                    ref, first = call.outcome, False
                elif not _same(call.outcome, ref):
                    break
            count += 1
            if count >= threshold:
                return self._verdict(
                    Signal.REPEATED_TOOL_CALL,
                    "block",
                    tool=cur.name,
                    count=count,
                    threshold=threshold,
                    key=sig,
                )
        # repeating cycle: A B A B A B, shorter cycles first
        verdict = self._check_cycle(cur, aware)
        if verdict is not None:
            return verdict
        # window frequency: A … A … A … A, the current call counted
        config = self._config
        threshold = self.window_threshold(cur.name)
        window = config.frequency_window_size
        if threshold <= window:
            count, ref, first = 1, None, True
            for call in islice(reversed(calls), window - 1):
                if call.sig != sig:
                    continue
                if aware:
                    if first:
                        ref, first = call.outcome, False
                    elif not _same(call.outcome, ref):
                        continue
                count += 1
            if count >= threshold:
                return self._verdict(
                    Signal.TOOL_FREQUENCY,
                    "block",
                    tool=cur.name,
                    count=count,
                    threshold=threshold,
                    key=sig,
                )
        if self._no_progress:
            return self._check_no_progress(cur)
        return None

    def _check_cycle(self, cur: _Call, aware: bool) -> Verdict | None:
        calls = self._calls
        repeats = self._config.cycle_repeats
        for length in range(2, self._config.max_cycle_length + 1):
            span = length * repeats
            if len(calls) < span - 1 or calls[-length].sig != cur.sig:
                continue
            seq = [*islice(calls, len(calls) - span + 1, None), cur]
            if any(seq[i].sig != seq[i - length].sig for i in range(length, span)):
                continue
            pattern = seq[-length:]
            if all(c.sig == cur.sig for c in pattern):
                continue  # A A A is a repeat, not a cycle
            if aware and not all(
                len({c.outcome for c in seq[p:-1:length] if c.outcome is not None}) <= 1
                for p in range(length)
            ):
                continue
            return self._verdict(
                Signal.TOOL_CYCLE,
                "block",
                tool=cur.name,
                tools=tuple(c.name for c in pattern),
                count=repeats,
                threshold=repeats,
                key=digest(*sorted(c.sig for c in pattern)),
            )
        return None

    def _check_no_progress(self, cur: _Call) -> Verdict | None:
        seq = [*self._calls, cur]
        window = self._config.frequency_window_size
        needed = self._no_progress
        count, highest = 0, 0
        for index in range(len(seq) - 1, -1, -1):
            call = seq[index]
            repeated = any(
                earlier.sig == call.sig and _same(earlier.outcome, call.outcome)
                for earlier in seq[max(0, index - window) : index]
            )
            if not repeated:
                return None
            count += 1
            highest = max(highest, self.repeat_threshold(call.name))
            threshold = max(needed, highest)
            if count >= threshold:
                streak = seq[index:]
                return self._verdict(
                    Signal.NO_PROGRESS,
                    "block",
                    tool=cur.name,
                    tools=tuple(dict.fromkeys(c.name for c in streak)),
                    count=count,
                    threshold=threshold,
                    key=digest(*sorted({c.sig for c in streak})),
                )
        return None

    def _report(self, verdict: Verdict) -> Verdict:
        if self._config.mode == "observe":
            seen = (verdict.signal, verdict.key)
            if seen in self._reported:  # type: ignore[comparison-overlap]
                return self._soft()
            if len(self._reported) >= _MAX_REPORTED:
                del self._reported[next(iter(self._reported))]
            self._reported[seen] = None  # type: ignore[index]
            tr = translator(self._config.locale)
            message = tr.gettext("Loop detected (observe mode, the run goes on): {reason}")
            return _replace(verdict, action="observe", message=message.format(reason=verdict.message))
        self._tripped = verdict
        tr = translator(self._config.locale)
        message = tr.gettext("Loop guard stopped the run: {reason}")
        return _replace(verdict, message=message.format(reason=verdict.message))

    def _still_tripped(self, action: Action, tool: str | None = None) -> Verdict:
        tripped = self._tripped
        assert tripped is not None  # noqa: S101 - callers check
        tr = translator(self._config.locale)
        message = tr.gettext(
            "Loop guard: this run was already stopped ({signal}); "
            "no further tool or model calls are allowed."
        )
        return _replace(
            tripped,
            action=action,
            tool=tool if tool is not None else tripped.tool,
            message=message.format(signal=tripped.signal),
            tripped=True,
        )

    def _soft(self) -> Verdict:
        config = self._config
        if self._turns > config.max_turns and Signal.TURN_COUNT not in self._warned:
            self._warned.add(Signal.TURN_COUNT)
            return self._verdict(
                Signal.TURN_COUNT, "warn", count=self._turns, threshold=config.max_turns
            )
        if Signal.ELAPSED_TIME not in self._warned:
            elapsed = self._clock() - self._started
            if elapsed * 1000 > config.turn_timeout_ms:
                self._warned.add(Signal.ELAPSED_TIME)
                return self._verdict(
                    Signal.ELAPSED_TIME,
                    "warn",
                    count=int(elapsed),
                    threshold=config.turn_timeout_ms // 1000,
                )
        return ALLOW

    def _verdict(
        self,
        signal: Signal,
        action: Action,
        *,
        tool: str | None = None,
        tools: tuple[str, ...] = (),
        count: int,
        threshold: int,
        key: str | None = None,
    ) -> Verdict:
        return Verdict(
            action=action,
            signal=signal,
            message=reason(
                signal,
                locale=self._config.locale,
                tool=tool,
                tools=tools,
                count=count,
                threshold=threshold,
                window=self._config.frequency_window_size,
            ),
            tool=tool,
            tools=tools or ((tool,) if tool else ()),
            count=count,
            threshold=threshold,
            key=key,
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


def _replace(verdict: Verdict, **changes: Any) -> Verdict:
    values = {name: getattr(verdict, name) for name in Verdict.__dataclass_fields__}
    values.update(changes)
    return Verdict(**values)


def _verdict_state(verdict: Verdict | None) -> list[Any] | None:
    if verdict is None:
        return None
    return [
        verdict.action,
        verdict.signal,
        verdict.tool,
        list(verdict.tools),
        verdict.count,
        verdict.threshold,
        verdict.key,
        verdict.message,
    ]


def _verdict_from_state(state: list[Any] | None) -> Verdict | None:
    if state is None:
        return None
    action, signal, tool, tools, count, threshold, key, message = state
    return Verdict(
        action=action,
        signal=Signal(signal),
        tool=tool,
        tools=tuple(tools),
        count=int(count),
        threshold=int(threshold),
        key=key,
        message=str(message),
    )
