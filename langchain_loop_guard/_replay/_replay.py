"""Replay a recorded trace through the detector: where would the guard stop, and why?

Each run gets its own detector, in mode ``"on"``, on a clock following the trace's timestamps;
a loop-guard trace also says whether the replay stops where the live run first stopped. Every
format is read as a stream of JSON values (:mod:`~langchain_loop_guard._replay._sources`).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from langchain_loop_guard._core._config import LoopGuardConfig
from langchain_loop_guard._core._cost import CostLedger, LoopCost, Usage
from langchain_loop_guard._core._detector import DetectorEvent, LoopDetector, Signal, Verdict
from langchain_loop_guard._core._limits import limits_of
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._public import json_text, terminal_safe
from langchain_loop_guard._core._remedy import remedy_text
from langchain_loop_guard._core._verdict import reason_of
from langchain_loop_guard._replay._files import (
    TRACE_FORMATS,
    TraceFormat,
    detect,
    detect_format,
    screened,
)
from langchain_loop_guard._replay._labels import (
    Feedback,
    Label,
    LabelScore,
    LabelsInput,
    label_of,
    resolve_labels,
    score,
)
from langchain_loop_guard._replay._langsmith import (
    FeedbackScores,
    read_langsmith,
)
from langchain_loop_guard._replay._replay_results import ReplayVerdict, RunReplay, Timeline
from langchain_loop_guard._replay._report import report_html
from langchain_loop_guard._replay._report_text import (
    caveat_text,
    cost_line,
    cut_runs,
    describe_run,
    label_text,
    run_line,
    runs_text,
    score_lines,
    skipped_lines,
    trace_line,
)
from langchain_loop_guard._replay._sources import json_type, json_values
from langchain_loop_guard._replay._streamed import Streamed, json_chunks
from langchain_loop_guard._replay._trace import (
    TraceFormatError,
    TraceItem,
    cut_run_id,
    decode_event,
)
from langchain_loop_guard._replay._trajectories import read_trajectories

__all__ = [
    "TRACE_FORMATS",
    "Progress",
    "ReplayReport",
    "ReplayVerdict",
    "RunReplay",
    "TraceFormat",
    "detect_format",
    "json_text",
    "replay",
    "replay_items",
    "replay_many",
    "terminal_safe",
]

Progress = Callable[[int, int], None]
"""Told ``(done, total)`` as a replay goes on: bytes of the trace's files read so far."""

_HARD: Final = frozenset({"block", "abort", "observe"})
_POOL: Final = 16  # reset detectors kept for the next runs, per configuration


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    """The replay of a whole trace: one :class:`RunReplay` per run, in order of appearance.

    ``str(report)`` is the localized text report; :meth:`to_json` the same as JSON data;
    :meth:`to_html` a page that draws each run (Jupyter shows it inline). With ``labels`` (the
    user's verdicts: run id to ``"loop"`` or ``"fine"``), each says how the stops score.
    """

    path: str
    format: TraceFormat
    runs: tuple[RunReplay, ...]
    locale: str = "en"
    config: LoopGuardConfig = field(default_factory=LoopGuardConfig)
    labels: Mapping[str, Label] | None = field(default=None, repr=False)
    skipped: tuple[tuple[str, str], ...] = ()
    """The files of a trace directory left out, each with why: ``(file, problem)``."""

    @property
    def score(self) -> LabelScore | None:
        """How the stops score against ``labels``: loops stopped, loops missed, good runs
        stopped (``None`` without labels)."""
        return None if self.labels is None else score(self.runs, self.labels)

    def label(self, run: RunReplay) -> Label | None:
        """The label of ``run`` (``None`` without labels, or when it has none)."""
        return None if self.labels is None else label_of(self.labels, run.run)

    @property
    def events(self) -> int:
        """Events replayed, over all runs."""
        return sum(run.events for run in self.runs)

    @property
    def would_stop(self) -> int:
        """Runs the guard would stop."""
        return sum(1 for run in self.runs if run.stop is not None)

    @property
    def loop_cost(self) -> LoopCost | None:
        """What the loops cost up to their stops, over all runs: model calls and the tokens
        the trace recorded for them (``None`` when no run would stop)."""
        return _sum(run.stop.cost for run in self.runs if run.stop is not None)

    @property
    def spared(self) -> LoopCost | None:
        """The model calls (and their tokens) after the stops, over all runs: what the stops
        would have spared runs recorded in observe mode (``None`` when no run would stop)."""
        return _sum(run.spared for run in self.runs)

    @property
    def by_signal(self) -> dict[str, int]:
        """Runs it would stop, by the signal that stops them (in the signals' order)."""
        counts = Counter(run.stop.signal for run in self.runs if run.stop is not None)
        return {signal.value: counts[signal] for signal in Signal if counts[signal]}

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data."""
        return {
            key: list(value) if isinstance(value, Streamed) else value
            for key, value in self._json()
        }

    def json_chunks(self) -> Iterator[str]:
        """:func:`json_text` of :meth:`to_json`, in pieces: a run at a time, never the whole
        document in memory (``loop-guard replay --json`` of a million runs)."""
        return json_chunks(Streamed(self._json(), pairs=True))

    def _json(self) -> Iterator[tuple[str, Any]]:
        yield "trace", self.path
        yield "format", self.format
        if self.skipped:
            yield "skipped", [{"file": file, "problem": problem} for file, problem in self.skipped]
        if self.labels is None:
            yield "runs", Streamed(run.to_json() for run in self.runs)
        else:
            yield "runs", Streamed({**run.to_json(), "label": self.label(run)} for run in self.runs)
        summary = {
            "runs": len(self.runs),
            "events": self.events,
            "would_stop": self.would_stop,
            "by_signal": self.by_signal,
            "loop_cost": _json_of(self.loop_cost),
            "spared": _json_of(self.spared),
        }
        found = self.score
        if found is not None:
            summary["labels"] = found.to_json()
        yield "summary", summary

    def lines(self) -> Iterator[str]:
        """The text report, line by line, in the report's locale (control characters escaped)."""
        return map(terminal_safe, self._lines())

    def _lines(self) -> Iterator[str]:
        tr = translator(self.locale)
        yield trace_line(tr, self.path, self.format, len(self.runs), self.events)
        yield from skipped_lines(tr, self.skipped)
        for run in self.runs:
            label = self.label(run)
            yield run_line(tr, run) + (f" ({label_text(tr, label)})" if label else "")
            for depth, line in describe_run(tr, run):
                yield "  " * depth + line
        signals = ", ".join(f"{name} {count}" for name, count in self.by_signal.items())
        if self.would_stop:
            yield cost_line(tr, self.loop_cost, self.spared)
        yield tr.gettext("summary: {runs}, {stopped} would stop").format(
            runs=runs_text(tr, len(self.runs)), stopped=f"{self.would_stop:,}"
        ) + (f" ({signals})" if signals else "")
        found = self.score
        if found is not None:
            yield from score_lines(tr, found)
        cut = cut_runs((self,))
        if cut:
            yield caveat_text(tr, cut)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_html(self) -> str:
        """The report as one self-contained HTML page (inline SVG and CSS, no script, nothing
        loaded from the network): an overview, a timeline per run that would stop, the others
        folded. Tool names, signals, counts and the guard's own messages only."""
        return report_html(self, page=True)

    def _repr_html_(self) -> str:
        return report_html(self, page=False)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))  # IPython's text form: the text report, not the dataclass


def _sum(costs: Iterable[LoopCost | None]) -> LoopCost | None:
    total: LoopCost | None = None
    for cost in costs:
        if cost is not None:
            total = cost if total is None else total + cost
    return total


def _json_of(cost: LoopCost | None) -> dict[str, int] | None:
    return None if cost is None else cost.to_json()


class _Clock:
    """The replay's clock: the elapsed time of the event being replayed."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Run:
    """One run being replayed under one configuration: its detector, clock and findings."""

    __slots__ = (
        "calls",
        "clock",
        "detector",
        "events",
        "ledger",
        "live",
        "recorded",
        "slot",
        "spared",
        "stop",
        "timeline",
        "warnings",
    )

    def __init__(self, config: LoopGuardConfig, pool: list[_Run], slot: int) -> None:
        self.clock: _Clock
        self.detector: LoopDetector
        if pool:  # a finished run's detector, reset: building one costs more than a short run
            spare = pool.pop()
            self.clock, self.detector = spare.clock, spare.detector
        else:
            self.clock = _Clock()
            self.detector = LoopDetector(config, clock=self.clock)
        self.slot = slot
        self.events = 0
        self.calls = 0
        self.stop: ReplayVerdict | None = None
        self.live: ReplayVerdict | None = None
        self.warnings: list[ReplayVerdict] = []
        self.recorded = False
        self.timeline: Timeline | None = None
        self.ledger = CostLedger()
        self.spared: LoopCost | None = None

    def retire(self, pool: list[_Run]) -> None:
        """Reset the detector (a reset run is a new run) and keep it for the next run."""
        if len(pool) < _POOL:
            self.clock.now = 0.0
            self.detector.reset()
            pool.append(self)

    def feed(self, item: TraceItem, locale: str, window: int) -> None:
        event = item.event
        self.events += 1
        if event.kind == "tool_call":
            self.calls += 1
        self.clock.now = event.elapsed
        if self.timeline is not None:
            self.timeline.add(event, self.events)
        self._count(event)
        verdict = self.detector.replay(event)
        if verdict.signal is not None and not verdict.tripped:
            if verdict.action == "warn":
                self.warnings.append(self._at(item, verdict, locale, window))
            elif verdict.stops and self.stop is None:
                self.stop = self._at(item, verdict, locale, window)
                self.spared = LoopCost(0)
        if item.recorded:
            self.recorded = True
            live = event.verdict
            if self.live is None and live.action in _HARD and not live.tripped:
                self.live = self._at(item, live, None, window)

    def _count(self, event: DetectorEvent) -> None:
        """Keep the model answers' tokens and calls (what a loop cost), and after the stop
        what it spares."""
        kind = event.kind
        if kind == "assistant_message":
            tokens = event.tokens
            if self.spared is not None:  # a model call after the stop: spared by it
                unmetered = tokens is None
                self.spared += LoopCost(1, tokens or 0, unmetered=unmetered)
                return
            usage = None if tokens is None else Usage(0, 0, tokens)
            self.ledger.answer(usage, reply=event.calls == 0 and event.digest is not None)
        elif kind == "tool_call" and self.spared is None:
            if event.tool not in self.detector.config.ignore_tools:
                self.ledger.call(event.tool or "")
        elif kind == "reset":
            self.ledger.clear()

    def _at(
        self, item: TraceItem, verdict: Verdict, locale: str | None, window: int
    ) -> ReplayVerdict:
        assert verdict.signal is not None  # only verdicts with a signal are kept
        text = "" if locale is None else reason_of(verdict, locale=locale, window=window)
        remedy = remedy_text(verdict.signal, verdict.tool, locale) if text else ""
        if remedy:  # what would have let the run go on, as the live stop says it
            text = f"{text} {remedy}"
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
            cost=self.ledger.cost_of(verdict.signal, verdict.tool, verdict.tools, verdict.count),
        )


def _enforcing(config: LoopGuardConfig) -> LoopGuardConfig:
    return config if config.mode == "on" else config.merged(source="replay", mode="on")


def _replay_all(
    items: Iterable[TraceItem],
    configs: Sequence[LoopGuardConfig],
    *,
    path: str,
    format: TraceFormat,
    ends: bytearray | None = None,
) -> list[ReplayReport]:
    """Replay ``items`` under each of ``configs`` in one pass. A run's detectors go at its last
    event: where ``ends`` marks it (a loop-guard trace, whose runs interleave), else at the next
    run's first event."""
    settings = [
        (_enforcing(config), config.locale, config.frequency_window_size) for config in configs
    ]
    done: list[list[Any]] = [[] for _ in configs]  # a slot per run, in order of appearance
    pools: list[list[_Run]] = [[] for _ in configs]
    open_runs: dict[str, list[_Run]] = {}
    grouped = ends is None
    for index, item in enumerate(items):
        runs = open_runs.get(item.run)
        if runs is None:
            if grouped:
                for key in list(open_runs):
                    _close(key, open_runs, done, pools)
            runs = open_runs[item.run] = [
                _Run(enforcing, pool, len(found))
                for (enforcing, _, _), pool, found in zip(settings, pools, done, strict=True)
            ]
            runs[0].timeline = Timeline()
            for found in done:
                found.append(None)
        for run, (_, locale, window) in zip(runs, settings, strict=True):
            run.feed(item, locale, window)
        if ends is not None and index < len(ends) and ends[index]:
            _close(item.run, open_runs, done, pools)
    for key in list(open_runs):
        _close(key, open_runs, done, pools)
    return [
        ReplayReport(
            path=path, format=format, runs=tuple(found), locale=config.locale, config=config
        )
        for found, config in zip(done, configs, strict=True)
    ]


def _close(
    key: str, open_runs: dict[str, list[_Run]], done: list[list[Any]], pools: list[list[_Run]]
) -> None:
    """Record what the replay of run ``key`` found and free its detectors; its timeline is kept
    only if it stops (under any configuration) or its live run stopped: the runs drawn."""
    runs = open_runs.pop(key)
    timeline = runs[0].timeline
    if all(run.stop is None and run.live is None for run in runs):
        timeline = None
    name = _shown_id(key)
    for found, run, pool in zip(done, runs, pools, strict=True):
        found[run.slot] = RunReplay(
            run=name,
            events=run.events,
            calls=run.calls,
            stop=run.stop,
            warnings=tuple(run.warnings),
            live=run.live,
            recorded=run.recorded,
            timeline=timeline,
            spared=run.spared,
        )
        run.retire(pool)


_shown_id = cut_run_id
"""A run id as reports keep it (a trace's ids are cut as they are read, other formats' here)."""


def replay(
    path: str | os.PathLike[str],
    config: LoopGuardConfig | None = None,
    *,
    format: TraceFormat | None = None,
    progress: Progress | None = None,
    labels: LabelsInput | None = None,
    feedback: str | Feedback | None = None,
) -> ReplayReport:
    """Replay the trace at ``path`` and report, per run, whether and where the guard would stop.

    Args:
        path: a loop-guard trace (``record_to=``), LangSmith runs (any export shape: see
            :mod:`._langsmith`), or recorded trajectories; plain or gzip;
            a file or a directory of such files.
        config: the configuration to evaluate; :meth:`LoopGuardConfig.load` (files and
            environment) when ``None``. Its mode is taken as ``"on"``.
        format: the trace's format; recognised from its content when ``None``.
        progress: told how far the replay is, for a progress bar.
        labels: your verdicts on the runs, to score the stops against: run id to ``"loop"``
            or ``"fine"``, or a file of them (a JSON object, or CSV ``run,label``).
        feedback: labels from a LangSmith export's feedback: ``"KEY"`` or ``"KEY=THRESHOLD"``
            (a run whose average ``KEY`` score is below ``THRESHOLD``, default 0.5, looped).

    Raises:
        TraceFormatError: the trace (or the labels file) cannot be read, naming the file and
            line; the trace is empty, or a LangSmith export without the inputs and outputs a
            replay needs, or without the ``feedback`` key.
        OSError: a file cannot be opened.
        LoopGuardConfigError: ``config`` is ``None`` and the files or environment are invalid.
        ValueError: ``feedback`` is not ``KEY[=THRESHOLD]``.
    """
    config = config if config is not None else LoopGuardConfig.load()
    return replay_many(
        path, [config], format=format, progress=progress, labels=labels, feedback=feedback
    )[0]


def replay_items(
    items: Iterable[TraceItem], config: LoopGuardConfig, *, path: str, format: TraceFormat
) -> ReplayReport:
    """Replay events already read (a LangSmith run tree's, say) under ``config``, taken in
    mode ``"on"``; no run at all gives a report without runs."""
    return _replay_all(items, [config], path=path, format=format)[0]


def replay_many(
    path: str | os.PathLike[str],
    configs: Sequence[LoopGuardConfig],
    *,
    format: TraceFormat | None,
    progress: Progress | None,
    labels: LabelsInput | None = None,
    feedback: str | Feedback | None = None,
) -> list[ReplayReport]:
    """Replay ``path`` under each of ``configs`` (which share one ``scope`` and one
    ``volatile_fields``: both decide how the trace is read) in one pass (two for a loop-guard
    trace); the reports in the order of ``configs``, scored against ``labels`` or ``feedback``
    (as :func:`replay` takes them)."""
    name = os.fspath(path)
    given = resolve_labels(labels)
    wanted = Feedback.parse(feedback) if isinstance(feedback, str) else feedback
    scores = None if wanted is None else FeedbackScores(wanted.key)
    files, skipped = screened(path, format)
    total = sum(file.stat().st_size for file in files)
    values = _values(files, total, progress)
    first = next(values, None)
    if first is None:
        raise TraceFormatError(name, 0, "the trace is empty")
    detected = format or detect(*first)
    # a trace does not tell whether its app had a checkpointer: "auto" reads it run by run
    scope = "thread" if configs[0].scope == "thread" else "run"
    volatile = limits_of(configs[0]).volatile_of  # results with content are digested here
    items: Iterable[TraceItem]
    ends = None
    if detected == "loop-guard":  # runs interleave: a first pass finds where each one ends
        values.close()
        del first  # it may be large: not kept through both passes
        ends = _run_ends(_values(files, total, _half(progress, 0)))
        stream = itertools.islice(_values(files, total, _half(progress, 1)), len(ends))
        items = (_loop_guard_item(*value) for value in stream)
    elif detected == "langsmith":
        items = read_langsmith(
            itertools.chain([first], values), scope=scope, feedback=scores, volatile=volatile
        )
    else:
        items = read_trajectories(itertools.chain([first], values), scope=scope, volatile=volatile)
    if scores is not None and detected != "langsmith":
        msg = "feedback scores come only with LangSmith exports (feedback_stats): use labels"
        raise TraceFormatError(name, 0, msg)
    reports = _replay_all(items, configs, path=name, format=detected, ends=ends)
    if not reports[0].runs:
        raise TraceFormatError(name, 0, "the trace holds no events")
    if wanted is not None and scores is not None:
        given = {**_feedback_labels(name, wanted, scores), **(given or {})}
    if given is not None:
        reports = [dataclasses.replace(report, labels=given) for report in reports]
    if skipped:
        reports = [dataclasses.replace(report, skipped=skipped) for report in reports]
    return reports


def _feedback_labels(name: str, wanted: Feedback, scores: FeedbackScores) -> dict[str, Label]:
    """Each trace's label from its feedback score; :class:`TraceFormatError` when no run of
    the export has the key (naming the keys it has)."""
    if not scores.by_trace:
        keys = ", ".join(sorted(scores.keys)) or "none"
        msg = f"no run has the feedback key {wanted.key!r} (feedback_stats keys found: {keys})"
        raise TraceFormatError(name, 0, msg)
    return {_shown_id(trace): wanted.label(value) for trace, value in scores.by_trace.items()}


def _values(
    files: list[Path], total: int, progress: Progress | None
) -> Generator[tuple[str, int, Any], None, None]:
    """``(file, line, value)`` of every JSON value of ``files``, in order."""
    before = 0
    for file in files:
        tell = None if progress is None else (lambda done, b=before: progress(b + done, total))
        for line, value in json_values(file, progress=tell):
            yield str(file), line, value
        before += file.stat().st_size
    if progress is not None:
        progress(total, total)


def _run_ends(values: Iterable[tuple[str, int, Any]]) -> bytearray:
    """For each value of a loop-guard trace, whether it is the last event of its run. Runs are
    told apart by the hash of their id: two ids with one hash only keep a detector open longer."""
    last: dict[int, int] = {}
    count = 0
    for count, (_, _, value) in enumerate(values, start=1):
        run = value.get("run") if isinstance(value, dict) else None
        last[hash(run) if isinstance(run, str) else 0] = count - 1
    ends = bytearray(count)
    for index in last.values():
        ends[index] = 1
    return ends


def _half(progress: Progress | None, half: int) -> Progress | None:
    """``progress`` for one of two passes over the files: the first or the second half."""
    if progress is None:
        return None
    return lambda done, total: progress((half * total + done) // 2, total)


def _loop_guard_item(path: str, line: int, value: Any) -> TraceItem:
    if not isinstance(value, dict):
        raise TraceFormatError(path, line, f"expected a JSON object, found {json_type(value)}")
    return decode_event(path, line, value)
