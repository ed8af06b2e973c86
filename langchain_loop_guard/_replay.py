"""Replay a recorded trace through the detector: where would the guard stop, and why?

This is how thresholds are calibrated before switching from ``observe`` to ``on``: record
traces (``record_to=``) or export them from LangSmith, then replay them under the
configuration being considered. Each run gets its own detector, driven by a clock that
follows the trace's timestamps, so elapsed-time warnings replay too. The replay evaluates
mode ``"on"``: it reports where each run would first be stopped, whatever the configured mode.

For a loop-guard trace the live verdicts are in the file, and each run says whether the replay
stops where the live run first stopped (or first reported a loop, in observe mode).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from langchain_loop_guard._config import LoopGuardConfig
from langchain_loop_guard._detector import LoopDetector, Signal, Verdict, reason
from langchain_loop_guard._langsmith import looks_like_langsmith, read_langsmith
from langchain_loop_guard._messages import translator
from langchain_loop_guard._trace import TraceFormatError, TraceItem, parse_json_line, read_trace

__all__ = [
    "TRACE_FORMATS",
    "Progress",
    "ReplayReport",
    "ReplayVerdict",
    "RunReplay",
    "TraceFormat",
    "replay",
    "replay_items",
]

TraceFormat = Literal["loop-guard", "langsmith"]
"""``"loop-guard"``: the JSON Lines a guard records; ``"langsmith"``: a LangSmith runs export."""

TRACE_FORMATS: Final[tuple[TraceFormat, ...]] = ("loop-guard", "langsmith")

Progress = Callable[[int, int], None]
"""Told ``(done, total)`` as a replay goes on (bytes of a loop-guard trace, events of a
LangSmith export)."""

_HARD: Final = frozenset({"block", "abort", "observe"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayVerdict:
    """A verdict at one event of a replayed run: where, which signal, and why.

    Attributes:
        event: the event's 1-based position in its run.
        call: tool calls of the run up to this event (this one included).
        line: the trace file's line the event comes from.
        action: what the guard did (``"block"``, ``"abort"``, ``"warn"``; a live run in observe
            mode reported ``"observe"``).
        signal: the signal that fired.
        tool: the tool the verdict is about, if any.
        count: how often the pattern was seen.
        threshold: the limit it reached.
        reason: the localized reason (tool names and counts, never content); empty for a live
            verdict read from a trace.
    """

    event: int
    call: int
    line: int
    action: str
    signal: Signal
    tool: str | None
    count: int
    threshold: int
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The verdict as JSON data."""
        return {
            "event": self.event,
            "call": self.call,
            "line": self.line,
            "action": self.action,
            "signal": self.signal.value,
            "tool": self.tool,
            "count": self.count,
            "threshold": self.threshold,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReplay:
    """What the replay of one run found.

    Attributes:
        run: the run's id (the top-level run, the thread, or the LangSmith trace).
        events: events replayed.
        calls: tool calls among them.
        stop: where the guard (mode ``"on"``) would first stop the run, or ``None``.
        warnings: soft signals (turn count, elapsed time) that would warn before that.
        live: for a loop-guard trace, the live run's first stop (or observed loop); ``None``
            when it had none or when the trace cannot tell.
        recorded: whether the trace holds the live verdicts (a loop-guard trace does).
    """

    run: str
    events: int
    calls: int
    stop: ReplayVerdict | None
    warnings: tuple[ReplayVerdict, ...] = ()
    live: ReplayVerdict | None = None
    recorded: bool = False

    @property
    def same_as_live(self) -> bool | None:
        """Whether the replay stops at the live run's first stop, for the same signal.

        ``None`` when the trace holds no live verdicts.
        """
        if not self.recorded:
            return None
        if self.stop is None or self.live is None:
            return self.stop is None and self.live is None
        return (self.stop.event, self.stop.signal) == (self.live.event, self.live.signal)

    def to_json(self) -> dict[str, Any]:
        """The run's result as JSON data."""
        return {
            "run": self.run,
            "events": self.events,
            "calls": self.calls,
            "would_stop": self.stop is not None,
            "stop": self.stop.to_json() if self.stop else None,
            "warnings": [w.to_json() for w in self.warnings],
            "live": self.live.to_json() if self.live else None,
            "same_as_live": self.same_as_live,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    """The replay of a whole trace: one :class:`RunReplay` per run, in order of appearance.

    ``str(report)`` is the localized text report; :meth:`to_json` the same as JSON data.
    """

    path: str
    format: TraceFormat
    runs: tuple[RunReplay, ...]
    locale: str = "en"
    config: LoopGuardConfig = field(default_factory=LoopGuardConfig)

    @property
    def events(self) -> int:
        """Events replayed, over all runs."""
        return sum(run.events for run in self.runs)

    @property
    def would_stop(self) -> int:
        """Runs the guard would stop."""
        return sum(1 for run in self.runs if run.stop is not None)

    @property
    def by_signal(self) -> dict[str, int]:
        """Runs it would stop, by the signal that stops them (in the signals' order)."""
        counts = Counter(run.stop.signal for run in self.runs if run.stop is not None)
        return {signal.value: counts[signal] for signal in Signal if counts[signal]}

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data."""
        return {
            "trace": self.path,
            "format": self.format,
            "runs": [run.to_json() for run in self.runs],
            "summary": {
                "runs": len(self.runs),
                "events": self.events,
                "would_stop": self.would_stop,
                "by_signal": self.by_signal,
            },
        }

    def lines(self) -> Iterator[str]:
        """The text report, line by line, in the report's locale."""
        tr = translator(self.locale)
        title = tr.gettext("loop-guard replay of {path} ({format}): {runs} runs, {events} events")
        yield title.format(
            path=self.path, format=self.format, runs=len(self.runs), events=self.events
        )
        for run in self.runs:
            yield tr.gettext("run {run}: {events} events, {calls} tool calls").format(
                run=run.run, events=run.events, calls=run.calls
            )
            for warning in run.warnings:
                yield "  " + tr.gettext("warning at event {event} (line {line}): {reason}").format(
                    event=warning.event, line=warning.line, reason=warning.reason
                )
            if run.stop is None:
                yield "  " + tr.gettext("would not stop")
            else:
                stop = run.stop
                yield "  " + tr.gettext(
                    "would stop at event {event} (tool call {call}, line {line}): {signal}"
                ).format(event=stop.event, call=stop.call, line=stop.line, signal=stop.signal)
                yield "    " + stop.reason
            if run.same_as_live is True:
                yield "  " + tr.gettext("live run: the same")
            elif run.same_as_live is False and run.live is None:
                yield "  " + tr.gettext("live run: did not stop")
            elif run.same_as_live is False and run.live is not None:
                yield "  " + tr.gettext("live run: stopped at event {event}: {signal}").format(
                    event=run.live.event, signal=run.live.signal
                )
        signals = ", ".join(f"{name} {count}" for name, count in self.by_signal.items())
        yield tr.gettext("summary: {runs} runs, {stopped} would stop").format(
            runs=len(self.runs), stopped=self.would_stop
        ) + (f" ({signals})" if signals else "")

    def __str__(self) -> str:
        return "\n".join(self.lines())


class _Clock:
    """The replay's clock: the elapsed time of the event being replayed."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Run:
    """One run being replayed: its detector, clock and findings."""

    __slots__ = ("calls", "clock", "detector", "events", "live", "recorded", "stop", "warnings")

    def __init__(self, config: LoopGuardConfig) -> None:
        self.clock = _Clock()
        self.detector = LoopDetector(config, clock=self.clock)
        self.events = 0
        self.calls = 0
        self.stop: ReplayVerdict | None = None
        self.live: ReplayVerdict | None = None
        self.warnings: list[ReplayVerdict] = []
        self.recorded = False

    def feed(self, item: TraceItem, locale: str, window: int) -> None:
        event = item.event
        self.events += 1
        if event.kind == "tool_call":
            self.calls += 1
        self.clock.now = event.elapsed
        verdict = self.detector.replay(event)
        if verdict.signal is not None and not verdict.tripped:
            if verdict.action == "warn":
                self.warnings.append(self._at(item, verdict, locale, window))
            elif verdict.stops and self.stop is None:
                self.stop = self._at(item, verdict, locale, window)
        if item.recorded:
            self.recorded = True
            live = event.verdict
            if self.live is None and live.action in _HARD and not live.tripped:
                self.live = self._at(item, live, None, window)

    def _at(
        self, item: TraceItem, verdict: Verdict, locale: str | None, window: int
    ) -> ReplayVerdict:
        assert verdict.signal is not None  # only verdicts with a signal are kept
        text = ""
        if locale is not None:
            text = reason(
                verdict.signal,
                locale=locale,
                tool=verdict.tool,
                tools=verdict.tools,
                count=verdict.count,
                threshold=verdict.threshold,
                window=window,
            )
        return ReplayVerdict(
            event=self.events,
            call=self.calls,
            line=item.line,
            action=verdict.action,
            signal=verdict.signal,
            tool=verdict.tool,
            count=verdict.count,
            threshold=verdict.threshold,
            reason=text,
        )


def replay_items(
    items: Iterable[TraceItem],
    config: LoopGuardConfig,
    *,
    path: str = "-",
    format: TraceFormat = "loop-guard",
) -> ReplayReport:
    """Replay ``items`` under ``config`` (its mode taken as ``"on"``)."""
    enforcing = config if config.mode == "on" else config.merged(source="replay", mode="on")
    runs: dict[str, _Run] = {}
    locale, window = config.locale, config.frequency_window_size
    for item in items:
        run = runs.get(item.run)
        if run is None:
            run = runs[item.run] = _Run(enforcing)
        run.feed(item, locale, window)
    return ReplayReport(
        path=path,
        format=format,
        runs=tuple(
            RunReplay(
                run=key,
                events=run.events,
                calls=run.calls,
                stop=run.stop,
                warnings=tuple(run.warnings),
                live=run.live,
                recorded=run.recorded,
            )
            for key, run in runs.items()
        ),
        locale=locale,
        config=config,
    )


def replay(
    path: str | os.PathLike[str],
    config: LoopGuardConfig | None = None,
    *,
    format: TraceFormat | None = None,
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay the trace at ``path`` and report, per run, whether and where the guard would stop.

    Args:
        path: a loop-guard trace (``record_to=``) or a LangSmith runs export (JSON or JSONL).
        config: the configuration to evaluate; :meth:`LoopGuardConfig.load` (files and
            environment) when ``None``. Its mode is taken as ``"on"``.
        format: the trace's format; detected from its first line when ``None``.
        progress: told how far the replay is, for a progress bar.

    Raises:
        TraceFormatError: the trace cannot be read (naming the line), or is empty.
        OSError: the file cannot be opened.
        LoopGuardConfigError: ``config`` is ``None`` and the files or environment are invalid.
    """
    config = config if config is not None else LoopGuardConfig.load()
    name = os.fspath(path)
    with open(path, "rb") as file:
        total = os.fstat(file.fileno()).st_size
        head = _first_line(name, file)
        file.seek(0)
        detected = format or _detect(name, head)
        if detected == "loop-guard":
            items: Iterable[TraceItem] = read_trace(name, _decoded(name, file, total, progress))
            report = replay_items(items, config, path=name, format=detected)
        else:
            text = _decode(name, file.read(), 1)
            events = list(read_langsmith(name, text))
            report = replay_items(_counted(events, progress), config, path=name, format=detected)
    if not report.runs:
        raise TraceFormatError(name, 0, "the trace holds no events")
    return report


def _first_line(path: str, file: Any) -> tuple[int, str] | None:
    for number, raw in enumerate(file, start=1):
        text = _decode(path, raw, number)
        if text.strip():
            return number, text
    return None


def _detect(path: str, head: tuple[int, str] | None) -> TraceFormat:
    if head is None:
        raise TraceFormatError(path, 0, "the trace is empty")
    number, text = head
    if text.lstrip().startswith("["):
        return "langsmith"
    line = parse_json_line(path, number, text)
    if looks_like_langsmith(line):
        return "langsmith"
    if "e" in line or "v" in line:
        return "loop-guard"
    msg = "neither a loop-guard trace event nor a LangSmith run (use --format to say which)"
    raise TraceFormatError(path, number, msg)


def _decode(path: str, raw: bytes, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line += raw.count(b"\n", 0, exc.start)
        raise TraceFormatError(path, line, "not UTF-8 text") from None


def _decoded(path: str, file: Any, total: int, progress: Progress | None) -> Iterator[str]:
    done = 0
    for number, raw in enumerate(file, start=1):
        yield _decode(path, raw, number)
        if progress is not None:
            done += len(raw)
            progress(done, total)


def _counted(items: list[TraceItem], progress: Progress | None) -> Iterator[TraceItem]:
    for done, item in enumerate(items, start=1):
        yield item
        if progress is not None:
            progress(done, len(items))
