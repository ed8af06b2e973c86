"""Calibration: one trace replayed under several values of one setting, in one pass per scope
(``loop-guard replay --sweep KEY=V1,V2,...``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from langchain_loop_guard._core._config import _FIELD_FOR_KEY, LoopGuardConfig
from langchain_loop_guard._core._errors import LoopGuardConfigError
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._public import terminal_safe
from langchain_loop_guard._replay._labels import Feedback, LabelsInput
from langchain_loop_guard._replay._replay import (
    Progress,
    ReplayReport,
    TraceFormat,
    detect_format,
    replay_many,
)
from langchain_loop_guard._replay._replay_results import ReplayVerdict
from langchain_loop_guard._replay._report import report_html
from langchain_loop_guard._replay._report_text import (
    caveat_text,
    changes_text,
    cut_runs,
    recommendation_text,
    run_name,
    score_lines,
    score_text,
    skipped_lines,
    stop_place,
    stop_text,
    trace_line,
)
from langchain_loop_guard._replay._streamed import Streamed, json_chunks, json_data

__all__ = ["Calibration", "calibrate", "sweepable", "unanswerable"]

_NAMED = 10  # good runs a text line names per value


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """One trace replayed under several values of one setting (:func:`calibrate`): the setting's
    ``key``, its ``values`` in the order given, and the replay under each (``reports``)."""

    key: str
    values: tuple[object, ...]
    reports: tuple[ReplayReport, ...]
    current: object = None
    """The setting's value in the configuration as run (files, environment, ``--set``)."""
    as_run: ReplayReport | None = None
    """The replay under the configuration as run (one of ``reports`` when its value was
    swept); ``None`` for the first value's."""

    @property
    def current_index(self) -> int | None:
        """The position of the current value among ``values`` (``None``: not swept)."""
        if self.as_run is None:
            return None
        return next((i for i, r in enumerate(self.reports) if r is self.as_run), None)

    @property
    def headline(self) -> ReplayReport:
        """The report the headline shows: the configuration as run."""
        return self.as_run if self.as_run is not None else self.reports[0]

    def current_setting(self) -> str:
        """``key=value`` of the configuration as run."""
        return f"{self.key}={_json(self.current)}"

    @property
    def recommended(self) -> int | None:
        """The value to choose, by your labels (``None`` without them): the fewest good runs
        stopped, then the most loops stopped, then the current value, then the first given.
        A false stop costs a finished task, a late stop a few calls."""
        scores = [report.score for report in self.reports]
        if any(found is None for found in scores):
            return None
        found = [score for score in scores if score is not None]
        current = self.current_index

        def rank(index: int) -> tuple[int, int, bool, int]:
            return (found[index].false_stops, -found[index].caught, index != current, index)

        return min(range(len(found)), key=rank)

    @property
    def cut_by_live_stops(self) -> int:
        """Runs whose trace ends where the live guard stopped them (recorded in mode ``on``):
        a value that would stop later cannot be judged on them."""
        return cut_runs(self.reports)

    def changes(self, index: int) -> list[tuple[str, ReplayVerdict | None, ReplayVerdict | None]]:
        """The runs whose stop differs between value ``index - 1`` and value ``index``:
        ``(run, stop before, stop after)``."""
        before, after = self.reports[index - 1], self.reports[index]
        return [
            (old.run, old.stop, new.stop)
            for old, new in zip(before.runs, after.runs, strict=True)
            if stop_place(old.stop) != stop_place(new.stop)
        ]

    def setting(self, index: int) -> str:
        """``key=value`` of value ``index``, as ``--set`` takes it."""
        return f"{self.key}={_json(self.values[index])}"

    def to_json(self) -> dict[str, Any]:
        """The calibration as JSON data: per value, the summary and each run's stop."""
        data: dict[str, Any] = json_data(self._json())
        return data

    def json_chunks(self) -> Iterator[str]:
        """:func:`json_text` of :meth:`to_json`, in pieces (a run's stop at a time)."""
        return json_chunks(self._json())

    def _json(self) -> Streamed:
        first = self.reports[0]
        head: dict[str, Any] = {
            "trace": first.path,
            "format": first.format,
            "key": self.key,
            "current": self.current,
            "runs": len(first.runs),
            "events": first.events,
        }
        recommended = self.recommended
        if recommended is not None:
            tr = translator(first.locale)
            head["recommended"] = {
                "value": self.values[recommended],
                "reason": self._recommendation(tr, recommended),
            }
        if self.cut_by_live_stops:
            head["cut_by_live_stops"] = self.cut_by_live_stops
        if first.skipped:
            head["skipped"] = [{"file": file, "problem": why} for file, why in first.skipped]
        settings = Streamed(
            Streamed(
                [
                    ("value", value),
                    ("would_stop", report.would_stop),
                    ("by_signal", report.by_signal),
                    *self._labels(report),
                    ("stops", Streamed(self._stops(report), pairs=True)),
                ],
                pairs=True,
            )
            for value, report in zip(self.values, self.reports, strict=True)
        )
        changes = Streamed(
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
        )
        return Streamed([*head.items(), ("settings", settings), ("changes", changes)], pairs=True)

    @staticmethod
    def _labels(report: ReplayReport) -> list[tuple[str, Any]]:
        """A value's score against the labels, naming the good runs stopped and the loops
        missed (nothing without labels)."""
        found = report.score
        if found is None:
            return []
        names = {
            "fine_stopped_runs": [report.runs[i].run for i in found.false_stop_runs],
            "loops_missed_runs": [report.runs[i].run for i in found.missed_runs],
        }
        return [("labels", {**found.to_json(), **names})]

    @staticmethod
    def _stops(report: ReplayReport) -> Iterator[tuple[str, Any]]:
        return ((run.run, run.stop.to_json()) for run in report.runs if run.stop is not None)

    def lines(self) -> Iterator[str]:
        """The text report: a line per value, then the runs each change of value moves."""
        return map(terminal_safe, self._lines())

    def _lines(self) -> Iterator[str]:
        first = self.reports[0]
        tr = translator(first.locale)
        yield trace_line(tr, first.path, first.format, len(first.runs), first.events)
        yield from skipped_lines(tr, first.skipped)
        current = self.current_index
        for index, report in enumerate(self.reports):
            signals = ", ".join(f"{name} {count}" for name, count in report.by_signal.items())
            runs = len(report.runs)
            line = tr.ngettext(
                "{setting}: {stopped} of {runs} run would stop",
                "{setting}: {stopped} of {runs} runs would stop",
                runs,
            ).format(
                setting=self.setting(index), stopped=f"{report.would_stop:,}", runs=f"{runs:,}"
            )
            line += f" ({signals})" if signals else ""
            yield line + (" " + tr.gettext("(current)") if index == current else "")
            yield from self._score_lines(tr, report)
        if current is None:
            yield tr.gettext("current: {setting} (not among the values swept)").format(
                setting=self.current_setting()
            )
        if self.reports[0].score is not None:  # what the labels could not match, said once
            yield from (line.strip() for line in list(score_lines(tr, self.reports[0].score))[1:])
        recommended = self.recommended
        if recommended is not None:
            yield self._recommendation(tr, recommended)
        if self.cut_by_live_stops:
            yield caveat_text(tr, self.cut_by_live_stops)
        for index in range(1, len(self.reports)):
            moved = self.changes(index)
            yield changes_text(tr, self.setting(index - 1), self.setting(index), len(moved))
            for run, old, new in moved:
                yield f"  {run_name(tr, run)}: {stop_text(tr, old)} -> {stop_text(tr, new)}"

    @staticmethod
    def _score_lines(tr: Any, report: ReplayReport) -> Iterator[str]:
        """A value's score against the labels, and the good runs it would stop."""
        found = report.score
        if found is None:
            return
        yield f"  {score_text(tr, found)}"
        false = [run_name(tr, report.runs[i].run) for i in found.false_stop_runs]
        if false:
            shown = ", ".join(false[:_NAMED]) + (", …" if len(false) > _NAMED else "")
            yield "    " + tr.gettext("good runs that would stop: {runs}").format(runs=shown)

    def _recommendation(self, tr: Any, index: int) -> str:
        """The recommendation of value ``index``, with its reason."""
        found = self.reports[index].score
        assert found is not None  # only with labels
        return recommendation_text(tr, self.setting(index), found, index == self.current_index)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))  # IPython's text form: the text report, not the dataclass

    def to_html(self) -> str:
        """The calibration as one self-contained HTML page: a chart of the runs each value
        stops, by signal; the runs that change between neighbouring values, linked to their
        timelines; and the report of the first value."""
        return report_html(self.headline, sweep=self, page=True)

    def _repr_html_(self) -> str:
        return report_html(self.headline, sweep=self, page=False)


def _json(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def calibrate(
    path: str | os.PathLike[str],
    key: str,
    values: Sequence[object],
    config: LoopGuardConfig | None = None,
    *,
    format: TraceFormat | None = None,
    progress: Progress | None = None,
    labels: LabelsInput | None = None,
    feedback: str | Feedback | None = None,
    source: str = "calibrate",
) -> Calibration:
    """Replay the trace at ``path`` under each of ``values`` of the setting ``key``, in one pass.

    Args:
        path: the trace, as for :func:`replay`.
        key: a :class:`LoopGuardConfig` field (``"repeat_tool_threshold"``…).
        values: the values to try.
        config: the rest of the configuration; :meth:`LoopGuardConfig.load` when ``None``.
        format: the trace's format; recognised from its content when ``None``.
        progress: told how far the replay is.
        labels, feedback: your verdicts on the runs, as :func:`replay` takes them: each value
            then says how many loops it stops, how many it misses, and which good runs it
            would stop.
        source: how errors name where the key and values came from (``"--sweep"`` for the
            command).

    Raises:
        LoopGuardConfigError: before anything is replayed: ``key`` is not a setting, or one a
            trace cannot answer (``mode``, ``locale``, ``prompt_hint``, ``nudges``, the
            warnings' ``max_turns`` and ``turn_timeout_ms``; ``volatile_fields`` for a
            loop-guard trace, which holds no results), saying why; or a value is invalid.
        TraceFormatError: as for :func:`replay`.
        OSError: the file cannot be opened.
    """
    base = config if config is not None else LoopGuardConfig.load()
    if not values:
        raise LoopGuardConfigError(f"{source}: {key}: no values to try", key=key)
    field = _FIELD_FOR_KEY.get(key) if isinstance(key, str) else None
    why = unanswerable(field) if field is not None else None
    if field is not None and why is None and field in _CONTENT_KEYS:
        trace_format = format or detect_format(path)
        if trace_format == "loop-guard":
            why = _CONTENT_KEYS[field]
    if why is not None:
        raise LoopGuardConfigError(
            f"{source}: {key} cannot be swept: {why}",
            source=source,
            key=key,
            value=list(values),
            allowed=", ".join(sweepable()),
        )
    configs = [base.merged(source=source, **{key: value}) for value in values]
    current = getattr(base, field) if field is not None else None
    swept = next((i for i, c in enumerate(configs) if getattr(c, field or "") == current), None)
    if swept is None:  # the configuration as run is replayed too, in the same pass
        configs.append(base)
    reports = _replay_scopes(
        path, configs, format=format, progress=progress, labels=labels, feedback=feedback
    )
    as_run = reports.pop() if swept is None else reports[swept]
    shown = base.model_dump(mode="json")[field] if field is not None else None
    return Calibration(
        key=key, values=tuple(values), reports=tuple(reports), current=shown, as_run=as_run
    )


_UNANSWERABLE: Final[Mapping[str, str]] = MappingProxyType(
    {
        "mode": "a replay evaluates mode 'on' whatever the setting (where each run would stop);"
        " the mode only decides what a live guard does about it",
        "locale": "it changes the language of the report, not where runs stop (use --set)",
        "prompt_hint": "the hint changes what the model answers, which a recorded trace cannot"
        " tell",
        "nudges": "a nudge changes what the model does next, which a recorded trace cannot tell",
        "max_turns": "it only warns, never stops a run (use --set and read the warnings)",
        "turn_timeout_ms": "it only warns, never stops a run (use --set and read the warnings)",
    }
)
"""The settings a trace cannot answer, and why."""

_CONTENT_KEYS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "volatile_fields": "a loop-guard trace holds digests of results made when they were"
        " recorded, not the results: record with the fields set, or replay a LangSmith export"
        " or trajectories, which hold the results",
    }
)
"""The settings only a trace with the results' content can answer, and why."""


def unanswerable(key: str) -> str | None:
    """Why a sweep over the setting ``key`` (a field name) means nothing, or ``None``."""
    return _UNANSWERABLE.get(key)


def sweepable() -> list[str]:
    """The settings a sweep answers (those over content only for traces that hold it)."""
    return [name for name in LoopGuardConfig.model_fields if name not in _UNANSWERABLE]


def _reading(config: LoopGuardConfig) -> tuple[object, ...]:
    """What decides how a trace is read under ``config``."""
    return (config.scope, config.volatile_fields)


def _replay_scopes(
    path: str | os.PathLike[str],
    configs: Sequence[LoopGuardConfig],
    *,
    format: TraceFormat | None,
    progress: Progress | None,
    labels: LabelsInput | None,
    feedback: str | Feedback | None,
) -> list[ReplayReport]:
    """:func:`replay_many` with one pass per ``scope`` and ``volatile_fields`` among
    ``configs`` (they decide how a trace is read: into runs, and its results into digests),
    the reports in the order of ``configs``."""
    reports: dict[int, ReplayReport] = {}
    for reading in dict.fromkeys(_reading(config) for config in configs):
        indexes = [i for i, config in enumerate(configs) if _reading(config) == reading]
        found = replay_many(
            path,
            [configs[i] for i in indexes],
            format=format,
            progress=progress,
            labels=labels,
            feedback=feedback,
        )
        reports.update(zip(indexes, found, strict=True))
    return [reports[i] for i in range(len(configs))]
