"""The words of a replay report, shared by the text report, the calibration's and the HTML
page: a run's size and name, where it would stop and why, how the stops score against labels.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from langchain_loop_guard._core._cost import LoopCost
    from langchain_loop_guard._replay._labels import Label, LabelScore
    from langchain_loop_guard._replay._replay_results import ReplayVerdict, RunReplay

__all__ = [
    "NO_THREAD",
    "caveat_text",
    "changes_text",
    "cost_line",
    "cut_runs",
    "describe_run",
    "label_text",
    "recommendation_text",
    "run_line",
    "run_name",
    "runs_text",
    "score_lines",
    "score_text",
    "size_text",
    "skipped_lines",
    "stop_place",
    "stop_text",
    "tokens_over_calls",
    "trace_line",
]

NO_THREAD: Final = "-"
"""The run id under which a middleware or node guard records a thread without a thread id."""


def runs_text(tr: Any, count: int) -> str:
    """``1 run``, ``2 runs`` (thousands separated), in the locale of ``tr``."""
    return str(tr.ngettext("{count} run", "{count} runs", count).format(count=f"{count:,}"))


def size_text(tr: Any, events: int, calls: int) -> str:
    """``1 event, 2 tool calls``: a run's size, in the locale of ``tr``."""
    shown = tr.ngettext("{count} event", "{count} events", events).format(count=f"{events:,}")
    made = tr.ngettext("{count} tool call", "{count} tool calls", calls).format(count=f"{calls:,}")
    return f"{shown}, {made}"


def cost_line(tr: Any, loops: LoopCost | None, spared: LoopCost | None) -> str:
    """``cost: 18,400 tokens inside loops (7 model calls); 12 model calls after the stops
    (9,000 tokens) spared``: the report's totals of what loops cost, in the locale of ``tr``."""
    inside = tokens_over_calls(tr, loops)
    after = tokens_over_calls(tr, spared)
    return str(
        tr.gettext("cost: {inside} inside loops; {after} after the stops spared").format(
            inside=inside, after=after
        )
    )


def tokens_over_calls(tr: Any, cost: LoopCost | None) -> str:
    calls = 0 if cost is None else cost.calls
    shown = tr.ngettext("{count} model call", "{count} model calls", calls).format(
        count=f"{calls:,}"
    )
    if cost is None or not cost.calls:
        return str(shown)
    if not cost.metered:
        return str(tr.gettext("{calls} (no token usage recorded)").format(calls=shown))
    tokens = f"{cost.tokens:,}"
    if cost.unmetered:
        return str(
            tr.gettext("at least {tokens} tokens ({calls})").format(tokens=tokens, calls=shown)
        )
    return str(tr.gettext("{tokens} tokens ({calls})").format(tokens=tokens, calls=shown))


def skipped_lines(tr: Any, skipped: tuple[tuple[str, str], ...]) -> Iterator[str]:
    """A line per file of a trace directory the replay left out, with why."""
    for file, problem in skipped:
        yield str(tr.gettext("skipped {file}: {problem}").format(file=file, problem=problem))


def run_name(tr: Any, run: str) -> str:
    """A run's id as reports show it: a run a graph guard recorded without a thread id (``-``)
    is said to be one."""
    return str(tr.gettext("(no thread id)")) if run == NO_THREAD else run


def run_line(tr: Any, run: RunReplay) -> str:
    """``run abc: 12 events, 4 tool calls``."""
    text = tr.gettext("run {run}: {size}")
    return str(text.format(run=run_name(tr, run.run), size=size_text(tr, run.events, run.calls)))


def label_text(tr: Any, label: Label) -> str:
    """How a run's label is shown: ``labelled a loop``, ``labelled fine`` (the user's word)."""
    return str(tr.gettext("labelled a loop") if label == "loop" else tr.gettext("labelled fine"))


def score_text(tr: Any, found: LabelScore) -> str:
    """``loops stopped 2 of 3, loops missed 1, good runs stopped 1 of 5``."""
    text = tr.gettext(
        "loops stopped {caught} of {loops}, loops missed {missed}, "
        "good runs stopped {false} of {fine}"
    )
    return str(
        text.format(
            caught=f"{found.caught:,}",
            loops=f"{found.loops:,}",
            missed=f"{found.missed:,}",
            false=f"{found.false_stops:,}",
            fine=f"{found.fine:,}",
        )
    )


def score_lines(tr: Any, found: LabelScore) -> Iterator[str]:
    """The text report's lines on the labels: the score, and what it could not match."""
    yield str(tr.gettext("your labels: {score}").format(score=score_text(tr, found)))
    if found.unlabelled:
        text = tr.gettext("runs without a label: {count}")
        yield "  " + str(text.format(count=f"{found.unlabelled:,}"))
    if found.unknown:
        text = tr.gettext("labels naming no run of the trace: {count} (ids of another kind?)")
        yield "  " + str(text.format(count=f"{found.unknown:,}"))


def recommendation_text(tr: Any, setting: str, found: LabelScore, current: bool) -> str:
    """``recommended: `cycle_repeats=3`: stops 2 of the 2 labelled loops, and no labelled good
    run``: the value a sweep recommends, and why."""
    if found.false_stops:
        text = tr.ngettext(
            "recommended: `{setting}`: stops {caught} of the {loops} labelled loop, and "
            "{false} of the {fine} labelled good runs (no value stops fewer)",
            "recommended: `{setting}`: stops {caught} of the {loops} labelled loops, and "
            "{false} of the {fine} labelled good runs (no value stops fewer)",
            found.loops,
        )
    else:
        text = tr.ngettext(
            "recommended: `{setting}`: stops {caught} of the {loops} labelled loop, and no "
            "labelled good run",
            "recommended: `{setting}`: stops {caught} of the {loops} labelled loops, and no "
            "labelled good run",
            found.loops,
        )
    shown = text.format(
        setting=setting,
        caught=f"{found.caught:,}",
        loops=f"{found.loops:,}",
        false=f"{found.false_stops:,}",
        fine=f"{found.fine:,}",
    )
    return str(shown + (" " + tr.gettext("(current)") if current else ""))


def cut_runs(reports: Any) -> int:
    """Runs the live guard stopped (in mode ``on``, not an observed loop) that a replay among
    ``reports`` lets go on: their trace ends at the live stop, so a value that would stop
    later looks as if it stopped nothing."""
    return sum(
        1
        for runs in zip(*(report.runs for report in reports), strict=True)
        if runs[0].live is not None
        and runs[0].live.action in ("block", "abort")
        and any(run.stop is None for run in runs)
    )


def caveat_text(tr: Any, count: int) -> str:
    """Why a looser value seems to stop nothing on runs a live stop cut."""
    text = tr.ngettext(
        "caveat: {count} run ends where the live guard stopped it, so its trace holds nothing "
        "after that stop: a value that would stop later shows it as not stopping. Record in "
        "observe mode to tune on whole runs.",
        "caveat: {count} runs end where the live guard stopped them, so their traces hold "
        "nothing after those stops: a value that would stop later shows them as not stopping. "
        "Record in observe mode to tune on whole runs.",
        count,
    )
    return str(text.format(count=f"{count:,}"))


def changes_text(tr: Any, before: str, after: str, count: int) -> str:
    """``from KEY=3 to KEY=5: 1 run changes``."""
    text = tr.ngettext(
        "from {before} to {after}: {count} run changes",
        "from {before} to {after}: {count} runs change",
        count,
    )
    return str(text.format(before=before, after=after, count=f"{count:,}"))


def stop_text(tr: Any, stop: ReplayVerdict | None) -> str:
    """Where a run would stop, short: ``event 12 (tool call 5): tool_cycle``."""
    if stop is None:
        return str(tr.gettext("would not stop"))
    text = tr.gettext("event {event} (tool call {call}): {signal}")
    return str(text.format(event=stop.event, call=stop.call, signal=stop.signal.value))


def describe_run(tr: Any, run: RunReplay, *, stops: bool = True) -> Iterator[tuple[int, str]]:
    """What a report says of a run, as ``(depth, line)``: its warnings, where it would stop
    and why (unless not ``stops``), and how its live run went (when the trace recorded it)."""
    for warning in run.warnings:
        text = tr.gettext("warning at event {event} (line {line}): {reason}")
        yield 1, text.format(event=warning.event, line=warning.line, reason=warning.reason)
    stop, live = run.stop, run.live
    if not stops:
        pass
    elif stop is None:
        yield 1, tr.gettext("would not stop")
    else:
        text = tr.gettext("would stop at event {event} (tool call {call}, line {line}): {signal}")
        yield 1, text.format(event=stop.event, call=stop.call, line=stop.line, signal=stop.signal)
        yield 2, stop.reason
        if stop.cost is not None:
            text = tr.gettext("the loop had cost {cost}; {spared} came after the stop")
            spent = tokens_over_calls(tr, stop.cost)
            yield 2, text.format(cost=spent, spared=tokens_over_calls(tr, run.spared))
    if run.same_as_live:
        yield 1, tr.gettext("live run: the same")
    elif run.same_as_live is False and live is None:
        yield 1, tr.gettext("live run: did not stop")
    elif run.same_as_live is False and live is not None:
        text = tr.gettext("live run: stopped at event {event}: {signal}")
        if live.action == "observe":
            text = tr.gettext("live run (observe mode): a loop reported at event {event}: {signal}")
        yield 1, text.format(event=live.event, signal=live.signal)


def stop_place(stop: ReplayVerdict | None) -> tuple[int, str] | None:
    """Where a run stops (event and signal), to compare two replays of it."""
    return None if stop is None else (stop.event, stop.signal.value)


def trace_line(tr: Any, path: str, format: str, runs: int, events: int) -> str:
    """The first line of a text report (a calibration's too): the trace, its format and size."""
    title = tr.gettext("loop-guard replay of {path} ({format}): {size}")
    size = tr.ngettext("{count} event", "{count} events", events)
    size = f"{runs_text(tr, runs)}, {size.format(count=f'{events:,}')}"
    return str(title.format(path=path, format=format, size=size))
