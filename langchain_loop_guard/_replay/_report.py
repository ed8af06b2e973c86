"""The replay report drawn as HTML: an overview, a timeline per run, a sweep's chart.

One self-contained page for ``loop-guard replay --html`` (no script; its Content-Security-Policy
lets nothing load), and the same body inline in Jupyter: what the text report shows (SPEC §8),
escaped. Its size is bounded: :data:`MAX_DRAWN` runs drawn, :data:`MAX_LISTED` listed, and
:data:`~._replay_results.MAX_MARKS` marks a run (a longer run's marks each stand for 2, 4…
calls). It reads a report and a sweep by what it draws of them (:class:`Drawn`, :class:`Swept`),
so that the report and the calibration may ask it for their pages.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from langchain_loop_guard._core._detector import Signal
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._public import safe_tool_name, terminal_safe
from langchain_loop_guard._replay._report_drawn import Drawn, Swept
from langchain_loop_guard._replay._report_style import CSS as _CSS
from langchain_loop_guard._replay._report_text import (
    caveat_text,
    changes_text,
    cut_runs,
    describe_run,
    label_text,
    recommendation_text,
    run_line,
    run_name,
    score_lines,
    score_text,
    size_text,
    stop_place,
    stop_text,
    tokens_over_calls,
)

if TYPE_CHECKING:
    from langchain_loop_guard._replay._labels import LabelScore
    from langchain_loop_guard._replay._replay_results import ReplayVerdict, RunReplay

__all__ = ["MAX_DRAWN", "MAX_LISTED", "Drawn", "Swept", "report_html"]

MAX_DRAWN: Final = 300
MAX_LISTED: Final = 300
_NAMES: Final = 32  # tool names a timeline tells apart; further ones share the last, "…"
_TOOLS: Final = ("#e8871e", "#2e9e4f", "#8e5cc2", "#17a2a2", "#c2458a", "#8c6d31", "#7c8a1c")
"""The tools' colours: no blue (the live stop's) and no red (a failure's), yellow (a warning's)."""
_OTHER, _FAILED, _LIVE, _WARN = "#a3abb8", "#e53935", "#1565c0", "#f9a825"
_SPARED: Final = ("#c62828", 0.07)  # the shade over what would not have run: colour, opacity
_STOPS: Final = ("#1d2330", "#6a1b9a", "#00838f", "#ef6c00", "#283593", "#6d4c41")
_SIGNALS: Final = (  # in the order of Signal, cycled past the twelfth
    "#c62828", "#ef6c00", "#f9a825", "#2e7d32", "#00838f", "#1565c0",
    "#6a1b9a", "#ad1457", "#5d4037", "#455a64", "#9e9d24", "#00695c",
)  # fmt: skip
_W: Final = 1000  # a timeline's length in SVG units, stretched to the page's width
_CSP: Final = "default-src 'none'; style-src 'unsafe-inline'"


def report_html(report: Drawn, *, sweep: Swept | None = None, page: bool) -> str:
    """``report`` (with ``sweep``'s chart and stops) as HTML: a page, or the body alone."""
    body = "".join(_Page(report, sweep).parts())
    if not page:
        return body
    title = _e(translator(report.locale).gettext("loop-guard replay report"))
    return (
        f'<!DOCTYPE html>\n<html lang="{_e(report.locale)}"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}"><meta name="viewport" '
        f'content="width=device-width,initial-scale=1"><title>{title}</title></head>'
        f'<body style="margin:0">\n{body}</body></html>\n'
    )


_TICKED: Final = re.compile(r"`([^`\n]{1,300})`")


def _code(text: object) -> str:
    """:func:`_e`, then each `` `name` `` of a guard's message (a tool, a cycle) as code."""
    return _TICKED.sub(r"<code>\1</code>", _e(text))


def _e(text: object) -> str:
    """Text for the page: controls, bidirectional overrides, line separators and lone
    surrogates made visible escapes (as the text report shows them), then HTML-escaped."""
    return html.escape(terminal_safe(str(text)), quote=True)


def _setting_value(setting: str) -> tuple[str, str]:
    """A sweep step's value (``key=value``), whole for its tooltip and cut to fit under a bar."""
    value = setting.partition("=")[2]
    return value, value if len(value) <= 14 else value[:13] + "…"


def _sw(color: str, label: str = "") -> str:
    return (
        f'<span class="key"><span class="sw" style="background:{color}"></span>{_e(label)}</span>'
    )


def _line(at: float, color: str, title: str, top: int = 0, dash: str = "") -> str:
    """A mark across the timeline at ``at`` (a short one at its top when ``top`` is -1)."""
    return (
        f'<line x1="{at:.1f}" x2="{at:.1f}" y1="0" y2="{34 if top == 0 else 7}" '
        f'stroke="{color}" stroke-width="3" vector-effect="non-scaling-stroke" '
        f'stroke-dasharray="{dash}"><title>{_e(title)}</title></line>'
    )


class _Page:
    """The HTML of one report (and sweep), part after part."""

    def __init__(self, report: Drawn, sweep: Swept | None) -> None:
        self.report, self.sweep, self.tr = report, sweep, translator(report.locale)
        self.reports = sweep.reports if sweep is not None else (report,)
        stops = [i for i in range(len(report.runs)) if self._stops(i)]
        if report.labels is not None:  # the good runs that would stop first: the false stops
            stops.sort(key=lambda i: report.label(report.runs[i]) != "fine")
        lives = [i for i, run in enumerate(report.runs) if run.live and not self._stops(i)]
        self.shown = stops + lives  # the runs drawn, then listed; the others are folded
        counts: Counter[str] = Counter()
        for index in self.shown[:MAX_DRAWN]:
            timeline = report.runs[index].timeline
            if timeline is not None:
                counts.update(timeline.names[code] for code in timeline.codes)
        self.colors = {name: _TOOLS[i] for i, (name, _) in enumerate(counts.most_common(7))}
        self.signal_colors = {s: _SIGNALS[i % len(_SIGNALS)] for i, s in enumerate(Signal)}
        self.current = sweep.current_index if sweep is not None else None
        """The step of the configuration as run among the sweep's values (``None``: none)."""

    def _stops(self, index: int) -> bool:
        return any(report.runs[index].stop is not None for report in self.reports)

    def setting(self, step: int) -> str:
        """``KEY=VALUE`` of value ``step`` of the sweep (empty without one)."""
        return "" if self.sweep is None else self.sweep.setting(step)

    def parts(self) -> Iterator[str]:
        tr, report = self.tr, self.report
        yield f'<div class="lgr"><style>{_CSS}</style>'
        yield f'<h1>{_e(tr.gettext("loop-guard replay report"))}</h1><p class="meta">'
        yield f'<span class="id">{_e(report.path)}</span> ({_e(report.format)}) '
        what = tr.gettext(
            "replayed in mode on: where each run would first stop. Tool names, signals, counts "
            "and the guard's own messages only: no arguments, outputs or messages of the trace."
        )
        yield _e(what)
        rows = report.config.describe()
        swept = self.sweep.key if self.sweep is not None else None
        changed = [
            f"{row.field}={json.dumps(row.value, ensure_ascii=False)}"
            for row in rows
            if row.source not in ("default", "calibrate", "--sweep") and row.field != swept
        ]
        if self.sweep is not None:  # the headline is the configuration as run
            changed.insert(0, self.sweep.current_setting())
        if changed:
            settings = tr.gettext("settings: {settings}").format(settings=", ".join(changed))
            yield f"<br>{_e(settings)}"
        yield "</p>"
        yield from self._overview()
        yield from self._costs()
        yield from self._advice()
        if self.report.labels is not None:
            yield from _verdicts(self)
        if self.sweep is not None:
            yield from self._chart(self.sweep)
        yield from self._timelines()
        yield from self._folded()
        yield "</div>\n"

    def _overview(self) -> Iterator[str]:
        tr, runs = self.tr, self.report.runs
        setting = f" ({self.sweep.current_setting()})" if self.sweep is not None else ""
        cards: list[tuple[object, str]] = [
            (f"{len(runs):,}", tr.gettext("runs read")),
            (f"{self.report.events:,}", tr.gettext("events")),
            (f"{self.report.would_stop:,}", tr.gettext("runs that would stop") + setting),
            (f"{sum(1 for run in runs if run.warnings):,}", tr.gettext("runs with warnings")),
        ]
        recorded = [run for run in runs if run.recorded]
        if recorded:
            same = sum(1 for run in recorded if run.same_as_live)
            cards.append((f"{same}/{len(recorded)}", tr.gettext("runs replayed as they ran live")))
        found = self.report.score
        if found is not None:
            cards += [
                (f"{found.caught:,}/{found.loops:,}", tr.gettext("loops stopped") + setting),
                (f"{found.missed:,}", tr.gettext("loops missed") + setting),
                (
                    f"{found.false_stops:,}/{found.fine:,}",
                    tr.gettext("good runs stopped") + setting,
                ),
            ]
        cells = (f'<div class="card"><b>{_e(value)}</b>{_e(label)}</div>' for value, label in cards)
        yield f'<div class="cards">{"".join(cells)}</div><div class="cols">'
        by_tool = Counter(safe_tool_name(r.stop.tool) for r in runs if r.stop and r.stop.tool)
        by_signal = Counter(r.stop.signal for r in runs if r.stop)
        warned = Counter(w.signal for r in runs for w in r.warnings)
        tools = [(name, n, self.colors.get(name, _OTHER)) for name, n in by_tool.most_common(10)]
        yield from self._bars(tr.gettext("stops by signal"), self._signals(by_signal))
        yield from self._bars(tr.gettext("stops by tool"), tools)
        yield from self._bars(tr.gettext("warnings by signal"), self._signals(warned))
        yield "</div>"

    def _costs(self) -> Iterator[str]:
        """What the loops cost, over all runs that would stop: the tokens and model calls
        inside the loops, and those after the stops (what a run recorded in observe mode
        would have been spared)."""
        report, tr = self.report, self.tr
        if not report.would_stop:
            return
        cards = (
            (tokens_over_calls(tr, report.loop_cost), tr.gettext("spent inside loops")),
            (tokens_over_calls(tr, report.spared), tr.gettext("spared after the stops")),
        )
        cells = (f'<div class="card"><b>{_e(value)}</b>{_e(label)}</div>' for value, label in cards)
        yield f'<div class="cards cost">{"".join(cells)}</div>'

    def _advice(self) -> Iterator[str]:
        """Which value to choose, and why (a sweep with labels); the caveat of traces a live
        stop cut."""
        tr, sweep = self.tr, self.sweep
        recommended = sweep.recommended if sweep is not None else None
        if sweep is not None and recommended is not None:
            found = sweep.reports[recommended].score
            assert found is not None  # a recommendation needs labels
            text = recommendation_text(
                tr, sweep.setting(recommended), found, recommended == self.current
            )
            yield f'<p class="advice recommended">{_code(text)}</p>'
        elif sweep is not None and self.report.labels is None:
            hint = tr.gettext(
                "No recommendation without your verdicts: say which runs looped with --labels "
                "FILE (or --feedback KEY for a LangSmith export)."
            )
            yield f'<p class="meta">{_e(hint)}</p>'
        cut = cut_runs(self.reports)
        if cut:
            yield f'<p class="advice caveat">{_e(caveat_text(tr, cut))}</p>'

    def _signals(self, counts: Counter[Signal]) -> list[tuple[str, int, str]]:
        return [(s.value, counts[s], self.signal_colors[s]) for s in Signal]

    def _bars(self, title: str, rows: list[tuple[str, int, str]]) -> Iterator[str]:
        rows = [row for row in rows if row[1]]
        if rows:
            top = max(count for _, count, _ in rows)
            yield f"<div><h3>{_e(title)}</h3><table>"
            for name, count, color in rows:
                bar = f'<span class="bar" style="width:{max(2, 120 * count // top)}px;'
                yield f'<tr><td>{_e(name)}</td><td>{bar}background:{color}"></span>{count:,}'
            yield "</table></div>"

    def _chart(self, sweep: Swept) -> Iterator[str]:
        tr, colors = self.tr, self.signal_colors
        title = tr.gettext("runs stopped by each value of {key}").format(key=sweep.key)
        signals = [s for s in Signal if any(r.by_signal.get(s.value) for r in sweep.reports)]
        top, width = max(1, *(r.would_stop for r in sweep.reports)), 60 + 110 * len(sweep.reports)
        yield f'<h2>{_e(title)}</h2><svg viewBox="0 0 {width} 250" style="max-width:{width}px">'
        for step, report in enumerate(sweep.reports):
            x, y = 60 + 110 * step, 200.0
            for signal in signals:
                count = report.by_signal.get(signal.value, 0)
                y -= 170 * count / top
                tip = f"<title>{_e(signal.value)}: {count}</title>"
                yield f'<rect x="{x}" y="{y:.1f}" width="70" height="{170 * count / top:.1f}" '
                yield f'fill="{colors[signal]}">{tip}</rect>'
            value, short = _setting_value(self.setting(step))
            yield f'<text x="{x + 35}" y="{y - 5:.1f}" text-anchor="middle" font-weight="600">'
            yield f'{report.would_stop}</text><text x="{x + 35}" y="220" text-anchor="middle">'
            yield f"<title>{_e(value)}</title>{_e(short)}</text>"
            if step == self.current:
                yield from self.current_mark(x - 8, 86)
        yield f'<line x1="50" x2="{width}" y1="200" y2="200" stroke="#5b6577"/></svg><p>'
        yield "".join(_sw(colors[signal], signal.value) for signal in signals)
        yield from self.current_key()
        yield "</p>"
        drawn = set(self.shown)
        for step in range(1, len(sweep.reports)):
            before, after = sweep.reports[step - 1].runs, sweep.reports[step].runs
            pairs = enumerate(zip(before, after, strict=True))
            moved = [i for i, (old, new) in pairs if stop_place(old.stop) != stop_place(new.stop)]
            head = changes_text(tr, self.setting(step - 1), self.setting(step), len(moved))
            yield f"<h3>{_e(head)}</h3><ul>"
            for i in moved[:MAX_LISTED]:
                run = _e(run_name(tr, before[i].run))
                link = f'<a href="#run-{i}">{run}</a>' if i in drawn else run
                change = f"{stop_text(tr, before[i].stop)} → {stop_text(tr, after[i].stop)}"
                yield f"<li>{link}: {_e(change)}</li>"
            yield from self.more(len(moved))

    def current_mark(self, x: float, width: float) -> Iterator[str]:
        """The frame around the bars of the current value, and its label above them."""
        label = _e(self.tr.gettext("current"))
        yield f'<rect class="current" x="{x}" y="4" width="{width}" height="224" fill="none" '
        yield f'stroke="{_LIVE}" stroke-width="2" stroke-dasharray="5 3" rx="4">'
        yield f"<title>{label}</title></rect>"
        yield f'<text x="{x + width / 2}" y="244" text-anchor="middle" fill="{_LIVE}" '
        yield f'font-size="12" font-weight="600">{label}</text>'

    def current_key(self) -> Iterator[str]:
        """The legend of the current value's frame, or where it stands when not swept."""
        if self.sweep is None:
            return
        if self.current is None:
            note = self.tr.gettext("current: {setting} (not among the values swept)")
            yield f'<br><span class="meta">{_e(note.format(setting=self.sweep.current_setting()))}'
            yield "</span>"
            return
        frame = f"border:2px dashed {_LIVE};background:none;box-sizing:border-box"
        label = self.tr.gettext("current: {setting}").format(setting=self.sweep.current_setting())
        yield f'<span class="key"><span class="sw" style="{frame}"></span>{_e(label)}</span>'

    def more(self, count: int) -> Iterator[str]:
        """The end of a list of ``count`` runs: how many it leaves out, then ``</ul>``."""
        if count > MAX_LISTED:
            more = self.tr.gettext("and {count} more (--json lists every run)")
            yield f"<li>{_e(more.format(count=count - MAX_LISTED))}</li>"
        yield "</ul>"

    def _timelines(self) -> Iterator[str]:
        tr = self.tr
        if not self.shown:
            return
        title = tr.gettext("runs that would stop, and runs the live guard stopped")
        yield f"<h2>{_e(title)}</h2><p>"
        yield "".join(_sw(color, name) for name, color in self.colors.items())
        stops = [(_STOPS[0], tr.gettext("stop"))]
        if self.sweep is not None:
            stops = [(_STOPS[i % 6], self.setting(i)) for i in range(len(self.reports))]
        legend = [(_OTHER, tr.gettext("other tools")), (_FAILED, tr.gettext("failed call"))]
        legend += [*stops, (_LIVE, tr.gettext("live stop")), (_WARN, tr.gettext("warning"))]
        yield "".join(_sw(color, label) for color, label in legend)
        color, opacity = _SPARED
        shade = f"background:{color};opacity:{opacity * 3:.2f}"  # the swatch is small: darker
        spared = tr.gettext("would not have run (after the first stop)")
        yield f'<span class="key"><span class="sw spared" style="{shade}"></span>'
        yield f"{_e(spared)}</span></p>"
        for index in self.shown[:MAX_DRAWN]:
            yield from self._run(index)
        rest = self.shown[MAX_DRAWN:]
        if rest:
            yield "<ul>"
            for index in rest[:MAX_LISTED]:
                run = self.report.runs[index]
                lines = [text for _, text in self._stops_of(index, reasons=False)]
                text = "; ".join(lines) or stop_text(tr, run.stop)
                yield f'<li id="run-{index}">{_e(run_name(tr, run.run))}: {_e(text)}</li>'
            yield from self.more(len(rest))

    def _run(self, index: int) -> Iterator[str]:
        tr, run = self.tr, self.report.runs[index]
        size = size_text(tr, run.events, run.calls)
        kind = "run" if self._stops(index) else "run live"
        name = _e(run_name(tr, run.run))
        label = self.report.label(run)
        if label is not None:
            name += f' <span class="tag {label}">{_e(label_text(tr, label))}</span>'
        yield f'<div class="{kind}" id="run-{index}"><span class="id">{name}</span> '
        yield f'<span class="meta">{_e(size)}</span>{"".join(self._svg(index, run))}<ul>'
        items = [f"{_sw(c) if c else ''}{_code(t)}" for c, t in self._stops_of(index)]
        for depth, text in describe_run(tr, run, stops=self.sweep is None):
            if depth == 1:
                items.append(_code(text))
            else:
                items[-1] += f" — {_code(text)}"
        if run.timeline is not None and run.timeline.span > 1:
            note = tr.gettext("each mark stands for up to {count} tool calls")
            items.append(_e(note.format(count=run.timeline.span)))
        yield "".join(f"<li>{item}</li>" for item in items) + "</ul></div>"

    def _stops_of(self, index: int, *, reasons: bool = True) -> Iterator[tuple[str | None, str]]:
        """A sweep's stops of run ``index``, ``(color, text)``: the values that stop it alike
        share a line, in the color of their mark."""
        if self.sweep is None:
            return
        groups: dict[tuple[int, str] | None, list[int]] = {}
        for step, report in enumerate(self.reports):
            groups.setdefault(stop_place(report.runs[index].stop), []).append(step)
        for steps in groups.values():
            stop = self.reports[steps[0]].runs[index].stop
            values = ", ".join(self.setting(i).partition("=")[2] for i in steps)
            text = f"{self.sweep.key}={values}: {stop_text(self.tr, stop)}"
            if stop is None:
                yield None, text
            else:
                yield _STOPS[steps[0] % 6], f"{text} — {stop.reason}" if reasons else text

    def _svg(self, index: int, run: RunReplay) -> Iterator[str]:
        events = max(run.events, 1)

        def x(event: int) -> float:
            return _W * (event - 0.5) / events

        yield f'<svg viewBox="0 0 {_W} 34" preserveAspectRatio="none" style="height:34px">'
        yield f'<rect y="16" width="{_W}" height="2" fill="#dde2ea"/>'
        timeline = run.timeline
        if timeline is not None:
            width = min(24.0, max(1.5, 0.7 * _W * timeline.span / events))
            paths: dict[int, list[str]] = {}
            failed: list[str] = []
            for at, code, bad in zip(timeline.at, timeline.codes, timeline.failed, strict=True):
                left = f"M{min(max(0.0, x(at) - width / 2), _W - width):.1f} "
                paths.setdefault(code, []).append(f"{left}7h{width:.1f}v20h-{width:.1f}z")
                if bad:
                    failed.append(f"{left}28h{width:.1f}v6h-{width:.1f}z")
            for code, path in paths.items():
                name = timeline.names[code]
                tip = f"<title>{_e(safe_tool_name(name))}</title>"
                color = self.colors.get(name, _OTHER)
                yield f'<path d="{"".join(path)}" fill="{color}">{tip}</path>'
            if failed:
                tip = f"<title>{_e(self.tr.gettext('failed call'))}</title>"
                yield f'<path d="{"".join(failed)}" fill="{_FAILED}">{tip}</path>'
        for warning in run.warnings:
            yield _line(x(warning.event), _WARN, warning.signal.value, top=-1)
        if run.live is not None:
            yield _line(x(run.live.event), _LIVE, run.live.signal.value, dash="4 3")
        found = [(i, r.runs[index].stop) for i, r in enumerate(self.reports)]
        stops = [(step, stop) for step, stop in found if stop is not None]
        if stops:  # what the guard would have spared: the rest of the run, shaded
            start = x(min(stop.event for _, stop in stops))
            color, opacity = _SPARED
            yield f'<rect x="{start:.1f}" width="{_W - start:.1f}" height="34" fill="{color}" '
            yield f'fill-opacity="{opacity}"/>'
        for step, stop in reversed(stops):  # the first value's mark on top
            title = f"{self.setting(step)} {stop.signal.value}".strip()
            yield _line(x(stop.event), _STOPS[step % 6], title)
        yield "</svg>"

    def _folded(self) -> Iterator[str]:
        tr, runs, shown = self.tr, self.report.runs, set(self.shown)
        quiet = sorted(
            (i for i in range(len(runs)) if i not in shown), key=lambda i: -runs[i].events
        )
        if quiet:
            summary = tr.ngettext(
                "{count} run would not stop",
                "{count} runs would not stop (the longest first)",
                len(quiet),
            )
            yield f"<details><summary>{_e(summary.format(count=f'{len(quiet):,}'))}</summary><ul>"
            for i in quiet[:MAX_LISTED]:
                run = runs[i]
                warned = ", ".join(w.signal.value for w in run.warnings)
                text = run_line(tr, run)
                label = self.report.label(run)
                tag = "" if label is None else f' <span class="tag {label}">'
                tag += "" if label is None else f"{_e(label_text(tr, label))}</span>"
                yield f'<li id="run-{i}">{_e(text)}{_e(f" ({warned})" if warned else "")}'
                yield f"{tag}</li>"
            yield from self.more(len(quiet))
            yield "</details>"


_CAUGHT, _FALSE = "#2e7d32", "#c62828"  # loops stopped, good runs stopped


def _verdicts(page: _Page) -> Iterator[str]:
    """The section on the user's labels: with a sweep, a chart of the loops each value stops
    against the good runs it stops; then the good runs that would stop (under any value),
    linked to their timelines, first."""
    tr, reports = page.tr, page.reports
    scores = [report.score for report in reports]
    found = [score for score in scores if score is not None]
    title = tr.gettext("your labels: loops stopped, good runs stopped")
    yield f"<h2>{_e(title)}</h2>"
    if page.sweep is not None:
        yield from _verdict_chart(page, found)
    else:
        yield f"<p>{_e(score_text(tr, found[0]))}</p>"
    false = sorted({i for score in found for i in score.false_stop_runs})
    title = tr.ngettext(
        "{count} good run would stop", "{count} good runs would stop", len(false)
    ).format(count=f"{len(false):,}")
    yield f"<h3>{_e(title)}</h3><ul>"
    drawn = set(page.shown[:MAX_DRAWN])
    for index in false[:MAX_LISTED]:
        run = page.report.runs[index]
        name = _e(run_name(tr, run.run))
        link = f'<a href="#run-{index}">{name}</a>' if index in drawn else name
        values = [
            page.setting(step) for step, score in enumerate(found) if index in score.false_stop_runs
        ]
        where = f" ({_e(', '.join(values))})" if page.sweep is not None else ""
        yield f"<li>{link}{where}: {_e(stop_text(tr, _first_stop(page, index)))}</li>"
    yield from page.more(len(false))
    yield from _missed(page)
    notes = list(score_lines(tr, found[0]))[1:]  # what the labels could not match
    if notes:
        yield f'<p class="meta">{"<br>".join(_e(note.strip()) for note in notes)}</p>'


def _missed(page: _Page) -> Iterator[str]:
    """The loops the configuration as run would let run, named and linked (to their timeline
    when another value stops them, else to their line among the runs that would not stop)."""
    tr, current = page.tr, page.report.score
    if current is None:
        return
    missed = list(current.missed_runs)
    title = tr.ngettext(
        "{count} labelled loop would not stop", "{count} labelled loops would not stop", len(missed)
    ).format(count=f"{len(missed):,}")
    setting = f" ({page.sweep.current_setting()})" if page.sweep is not None else ""
    yield f"<h3>{_e(title + setting)}</h3><ul>"
    for index in missed[:MAX_LISTED]:
        run = page.report.runs[index]
        name = _e(run_name(tr, run.run))
        stopped = [
            page.setting(step)
            for step, report in enumerate(page.reports)
            if report.runs[index].stop is not None
        ]
        where = ""
        if stopped:
            where = " — " + _e(
                tr.gettext("stopped with {settings}").format(settings=", ".join(stopped))
            )
        size = _e(size_text(tr, run.events, run.calls))
        yield f'<li><a href="#run-{index}">{name}</a>: {size}{where}</li>'
    yield from page.more(len(missed))


def _first_stop(page: _Page, index: int) -> ReplayVerdict | None:
    """Run ``index``'s stop under the first value that stops it."""
    return next((r.runs[index].stop for r in page.reports if r.runs[index].stop), None)


def _verdict_chart(page: _Page, found: list[LabelScore]) -> Iterator[str]:
    """Per value of the sweep, two bars: the loops it stops (of the loops labelled) and the
    good runs it stops (of the good runs labelled)."""
    tr = page.tr
    top = max(1, *(max(score.loops, score.fine) for score in found))
    width = 60 + 130 * len(found)
    yield f'<svg class="verdicts" viewBox="0 0 {width} 250" style="max-width:{width}px">'
    caught_label, false_label = tr.gettext("loops stopped"), tr.gettext("good runs stopped")
    for step, score in enumerate(found):
        x = 60 + 130 * step
        for offset, count, of, color, label in (
            (0, score.caught, score.loops, _CAUGHT, caught_label),
            (44, score.false_stops, score.fine, _FALSE, false_label),
        ):
            height = 170 * count / top
            tip = f"<title>{_e(f'{label}: {count}/{of}')}</title>"
            yield f'<rect x="{x + offset}" y="{200 - height:.1f}" width="40" '
            yield f'height="{height:.1f}" fill="{color}">{tip}</rect>'
            yield f'<text x="{x + offset + 20}" y="{195 - height:.1f}" text-anchor="middle" '
            yield f'font-weight="600">{count}</text>'
        value, short = _setting_value(page.setting(step))
        yield f'<text x="{x + 42}" y="220" text-anchor="middle"><title>{_e(value)}</title>'
        yield f"{_e(short)}</text>"
        if step == page.current:
            yield from page.current_mark(x - 8, 100)
    yield f'<line x1="50" x2="{width}" y1="200" y2="200" stroke="#5b6577"/></svg><p>'
    yield _sw(_CAUGHT, caught_label) + _sw(_FALSE, false_label)
    yield from page.current_key()
    yield "</p>"
