"""Replay a recorded trace through the detector: where would the guard stop, and why?

This is how thresholds are calibrated before switching from ``observe`` to ``on``: record
traces (``record_to=``) or export them from LangSmith, then replay them under the
configuration being considered. Each run gets its own detector, driven by a clock that
follows the trace's timestamps, so elapsed-time warnings replay too. The replay evaluates
mode ``"on"``: it reports where each run would first be stopped, whatever the configured mode.

For a loop-guard trace the live verdicts are in the file, and each run says whether the replay
stops where the live run first stopped (or first reported a loop, in observe mode).

:func:`calibrate` replays one trace under several values of one setting in a single pass and
says, per value, how many runs would stop, where, and which runs change between values.

Every format is read as a stream of JSON values (see :mod:`langchain_loop_guard._sources`):
time is linear and memory bounded in the file's size; text meant for a terminal never holds
the control characters a trace may contain (they are escaped).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from langchain_loop_guard._config import LoopGuardConfig
from langchain_loop_guard._detector import LoopDetector, Signal, Verdict, reason
from langchain_loop_guard._errors import LoopGuardConfigError
from langchain_loop_guard._langsmith import looks_like_langsmith, read_langsmith
from langchain_loop_guard._messages import translator
from langchain_loop_guard._sources import json_type, json_values, trace_files
from langchain_loop_guard._trace import TraceFormatError, TraceItem, decode_event
from langchain_loop_guard._trajectories import looks_like_trajectory, read_trajectories

__all__ = [
    "TRACE_FORMATS",
    "Calibration",
    "Progress",
    "ReplayReport",
    "ReplayVerdict",
    "RunReplay",
    "TraceFormat",
    "calibrate",
    "json_text",
    "replay",
    "replay_items",
    "terminal_safe",
]

TraceFormat = Literal["loop-guard", "langsmith", "trajectories"]
"""``"loop-guard"``: the JSON Lines a guard records; ``"langsmith"``: LangSmith runs (any export
shape); ``"trajectories"``: recorded agent runs as detector events (one run and its
``events`` per line)."""

TRACE_FORMATS: Final[tuple[TraceFormat, ...]] = ("loop-guard", "langsmith", "trajectories")

Progress = Callable[[int, int], None]
"""Told ``(done, total)`` as a replay goes on: bytes of the trace's files read so far."""

_UNSAFE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
_UNSAFE_IN_JSON: Final = re.compile("[\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
"""What ``json.dumps`` leaves unescaped (it escapes U+0000-U+001F itself)."""


def terminal_safe(text: str) -> str:
    """``text`` with control and invisible formatting characters escaped (``\\x1b``…).

    A trace may hold anything in a tool name or a run id, terminal escape sequences included;
    a report shows them escaped, never raw.
    """
    return _UNSAFE.sub(_escape, text)


def json_text(data: object) -> str:
    """``data`` as indented JSON text with every control character escaped (``json`` leaves
    U+007F-U+009F and invisible formatting characters as they are)."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
        """The text report, line by line, in the report's locale (control characters escaped)."""
        for line in self._lines():
            yield terminal_safe(line)

    def _lines(self) -> Iterator[str]:
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
                if run.live.action == "observe":
                    text = tr.gettext(
                        "live run (observe mode): a loop reported at event {event}: {signal}"
                    )
                else:
                    text = tr.gettext("live run: stopped at event {event}: {signal}")
                yield "  " + text.format(event=run.live.event, signal=run.live.signal)
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
    return _replay_all(items, (config,), path=path, format=format)[0]


def _enforcing(config: LoopGuardConfig) -> LoopGuardConfig:
    return config if config.mode == "on" else config.merged(source="replay", mode="on")


def _replay_all(
    items: Iterable[TraceItem],
    configs: Sequence[LoopGuardConfig],
    *,
    path: str,
    format: TraceFormat,
) -> list[ReplayReport]:
    """Replay ``items`` under each of ``configs`` at once: one pass over the trace.

    Runs of a LangSmith export or a trajectories file come one after the other, so a run's
    detectors are dropped as soon as the next run starts: memory holds the findings, not the
    detectors of every run.
    """
    settings = [
        (_enforcing(config), config.locale, config.frequency_window_size) for config in configs
    ]
    done: list[list[RunReplay]] = [[] for _ in configs]
    open_runs: dict[str, list[_Run]] = {}
    grouped = format != "loop-guard"
    for item in items:
        runs = open_runs.get(item.run)
        if runs is None:
            if grouped:
                _close(open_runs, done)
            runs = open_runs[item.run] = [_Run(enforcing) for enforcing, _, _ in settings]
        for run, (_, locale, window) in zip(runs, settings, strict=True):
            run.feed(item, locale, window)
    _close(open_runs, done)
    return [
        ReplayReport(
            path=path, format=format, runs=tuple(found), locale=config.locale, config=config
        )
        for found, config in zip(done, configs, strict=True)
    ]


def _close(open_runs: dict[str, list[_Run]], done: list[list[RunReplay]]) -> None:
    for key, runs in open_runs.items():
        for found, run in zip(done, runs, strict=True):
            found.append(
                RunReplay(
                    run=key,
                    events=run.events,
                    calls=run.calls,
                    stop=run.stop,
                    warnings=tuple(run.warnings),
                    live=run.live,
                    recorded=run.recorded,
                )
            )
    open_runs.clear()


def replay(
    path: str | os.PathLike[str],
    config: LoopGuardConfig | None = None,
    *,
    format: TraceFormat | None = None,
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay the trace at ``path`` and report, per run, whether and where the guard would stop.

    Args:
        path: a loop-guard trace (``record_to=``), LangSmith runs (any export shape: see
            :mod:`langchain_loop_guard._langsmith`), or recorded trajectories; plain or gzip;
            a file or a directory of such files.
        config: the configuration to evaluate; :meth:`LoopGuardConfig.load` (files and
            environment) when ``None``. Its mode is taken as ``"on"``.
        format: the trace's format; recognised from its content when ``None``.
        progress: told how far the replay is, for a progress bar.

    Raises:
        TraceFormatError: the trace cannot be read (naming the file and line), is empty, or is
            a LangSmith export without the inputs and outputs a replay needs.
        OSError: the file cannot be opened.
        LoopGuardConfigError: ``config`` is ``None`` and the files or environment are invalid.
    """
    config = config if config is not None else LoopGuardConfig.load()
    return _replay_path(path, [config], format=format, progress=progress)[0]


def _replay_path(
    path: str | os.PathLike[str],
    configs: Sequence[LoopGuardConfig],
    *,
    format: TraceFormat | None,
    progress: Progress | None,
) -> list[ReplayReport]:
    """Replay ``path`` under each of ``configs`` (which share one ``scope``) in one pass."""
    name = os.fspath(path)
    files = trace_files(path)
    total = sum(file.stat().st_size for file in files)
    values = _values(files, total, progress)
    first = next(values, None)
    if first is None:
        raise TraceFormatError(name, 0, "the trace is empty")
    detected = format or _detect(*first)
    stream = itertools.chain([first], values)
    scope = configs[0].scope
    items: Iterable[TraceItem]
    if detected == "loop-guard":
        items = (_loop_guard_item(*value) for value in stream)
    elif detected == "langsmith":
        items = read_langsmith(stream, scope=scope)
    else:
        items = read_trajectories(stream, scope=scope)
    reports = _replay_all(items, configs, path=name, format=detected)
    if not reports[0].runs:
        raise TraceFormatError(name, 0, "the trace holds no events")
    return reports


def _values(
    files: list[Path], total: int, progress: Progress | None
) -> Iterator[tuple[str, int, Any]]:
    """``(file, line, value)`` of every JSON value of ``files``, in order."""
    before = 0
    for file in files:
        tell = None if progress is None else (lambda done, b=before: progress(b + done, total))
        for line, value in json_values(file, progress=tell):
            yield str(file), line, value
        before += file.stat().st_size
    if progress is not None:
        progress(total, total)


def _loop_guard_item(path: str, line: int, value: Any) -> TraceItem:
    if not isinstance(value, dict):
        raise TraceFormatError(path, line, f"expected a JSON object, found {json_type(value)}")
    return decode_event(path, line, value)


def _detect(path: str, line: int, value: object) -> TraceFormat:
    if isinstance(value, dict):
        if looks_like_langsmith(value):
            return "langsmith"
        if looks_like_trajectory(value):
            return "trajectories"
        if "e" in value or "v" in value:
            return "loop-guard"
    msg = (
        "neither a loop-guard trace event, LangSmith runs nor a recorded trajectory "
        "(use --format to say which)"
    )
    raise TraceFormatError(path, line, msg)


# --- calibration ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """One trace replayed under several values of one setting (see :func:`calibrate`).

    Attributes:
        key: the setting (a :class:`LoopGuardConfig` field name).
        values: its values, in the order given.
        reports: the replay under each value.
    """

    key: str
    values: tuple[object, ...]
    reports: tuple[ReplayReport, ...]

    def changes(self, index: int) -> list[tuple[str, ReplayVerdict | None, ReplayVerdict | None]]:
        """The runs whose stop differs between value ``index - 1`` and value ``index``:
        ``(run, stop before, stop after)``."""
        before, after = self.reports[index - 1], self.reports[index]
        return [
            (old.run, old.stop, new.stop)
            for old, new in zip(before.runs, after.runs, strict=True)
            if _where(old.stop) != _where(new.stop)
        ]

    def setting(self, index: int) -> str:
        """``key=value`` of value ``index``, as ``--set`` takes it."""
        return f"{self.key}={_json(self.values[index])}"

    def to_json(self) -> dict[str, Any]:
        """The calibration as JSON data: per value, the summary and each run's stop."""
        first = self.reports[0]
        return {
            "trace": first.path,
            "format": first.format,
            "key": self.key,
            "runs": len(first.runs),
            "events": first.events,
            "settings": [
                {
                    "value": value,
                    "would_stop": report.would_stop,
                    "by_signal": report.by_signal,
                    "stops": {
                        run.run: run.stop.to_json() for run in report.runs if run.stop is not None
                    },
                }
                for value, report in zip(self.values, self.reports, strict=True)
            ],
            "changes": [
                {
                    "from": self.values[index - 1],
                    "to": self.values[index],
                    "runs": [
                        {
                            "run": run,
                            "before": old.to_json() if old else None,
                            "after": new.to_json() if new else None,
                        }
                        for run, old, new in self.changes(index)
                    ],
                }
                for index in range(1, len(self.reports))
            ],
        }

    def lines(self) -> Iterator[str]:
        """The text report: a line per value, then the runs each change of value moves."""
        first = self.reports[0]
        tr = translator(first.locale)
        title = tr.gettext("loop-guard replay of {path} ({format}): {runs} runs, {events} events")
        yield terminal_safe(
            title.format(
                path=first.path, format=first.format, runs=len(first.runs), events=first.events
            )
        )
        for index, report in enumerate(self.reports):
            signals = ", ".join(f"{name} {count}" for name, count in report.by_signal.items())
            line = tr.gettext("{setting}: {stopped} of {runs} runs would stop").format(
                setting=self.setting(index), stopped=report.would_stop, runs=len(report.runs)
            )
            yield terminal_safe(line + (f" ({signals})" if signals else ""))
        for index in range(1, len(self.reports)):
            moved = self.changes(index)
            yield terminal_safe(
                tr.gettext("from {before} to {after}: {count} runs change").format(
                    before=self.setting(index - 1), after=self.setting(index), count=len(moved)
                )
            )
            for run, old, new in moved:
                yield terminal_safe(f"  {run}: {_stop_text(tr, old)} -> {_stop_text(tr, new)}")

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _where(stop: ReplayVerdict | None) -> tuple[int, str] | None:
    return None if stop is None else (stop.event, stop.signal.value)


def _json(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _stop_text(tr: Any, stop: ReplayVerdict | None) -> str:
    if stop is None:
        return str(tr.gettext("would not stop"))
    text = tr.gettext("event {event} (tool call {call}): {signal}")
    return str(text.format(event=stop.event, call=stop.call, signal=stop.signal.value))


def calibrate(
    path: str | os.PathLike[str],
    key: str,
    values: Sequence[object],
    config: LoopGuardConfig | None = None,
    *,
    format: TraceFormat | None = None,
    progress: Progress | None = None,
) -> Calibration:
    """Replay the trace at ``path`` under each of ``values`` of the setting ``key``, in one pass.

    Args:
        path: the trace, as for :func:`replay`.
        key: a :class:`LoopGuardConfig` field (``"repeat_tool_threshold"``…).
        values: the values to try.
        config: the rest of the configuration; :meth:`LoopGuardConfig.load` when ``None``.
        format: the trace's format; recognised from its content when ``None``.
        progress: told how far the replay is.

    Raises:
        LoopGuardConfigError: ``key`` is not a setting, or a value is invalid.
        TraceFormatError: as for :func:`replay`.
        OSError: the file cannot be opened.
    """
    base = config if config is not None else LoopGuardConfig.load()
    if key.startswith("_") or not values:
        problem = f"{key}: not a setting" if values else f"{key}: no values to try"
        raise LoopGuardConfigError(problem, key=key)
    configs = [base.merged(source="calibrate", **{key: value}) for value in values]
    return Calibration(
        key=key,
        values=tuple(values),
        reports=tuple(_replay_scopes(path, configs, format=format, progress=progress)),
    )


def _replay_scopes(
    path: str | os.PathLike[str],
    configs: Sequence[LoopGuardConfig],
    *,
    format: TraceFormat | None,
    progress: Progress | None,
) -> list[ReplayReport]:
    """:func:`_replay_path` with one pass per ``scope`` among ``configs`` (the scope decides
    how a trace is read into runs), the reports in the order of ``configs``."""
    reports: dict[int, ReplayReport] = {}
    for scope in dict.fromkeys(config.scope for config in configs):
        indexes = [i for i, config in enumerate(configs) if config.scope == scope]
        found = _replay_path(path, [configs[i] for i in indexes], format=format, progress=progress)
        reports.update(zip(indexes, found, strict=True))
    return [reports[i] for i in range(len(configs))]
