"""Side-by-side timing: a subject and its baseline, interleaved, compared as a median ratio.

Absolute times on a shared two-core machine drift by tens of percent within a minute; a ratio
of two measurements taken back to back does not. Each round times one batch of the baseline
and one batch of the subject (alternating which goes first, so that neither always runs on a
warmer cache), and the result is the median of the per-round ratios. Garbage collection is
paused during each timed batch (and, before a whole agent run, done first), so a collection
triggered by one side's garbage is not billed to the other.

Runs that take seconds (whole agents) are compared in pairs (:func:`compare_pairs`): both
runs advance one step at a time, in turns, so that a slow second of the machine falls on both.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

Batch = Callable[[int], float]
"""Runs the batch of round ``n`` and returns the nanoseconds per operation it measured (setup
excluded). Both sides of a round get the same ``n``, so they can process the same inputs;
warm-up rounds are negative."""


@dataclass(frozen=True)
class Comparison:
    """Median per-operation times and the median of the per-round ratios."""

    baseline_ns: float
    subject_ns: float
    ratio: float
    spread: float
    """Interquartile range of the per-round ratios: how far to trust ``ratio``."""
    rounds: int


@contextmanager
def patched(owner: Any, name: str, replacement: Any) -> Iterator[None]:
    """``owner.name`` replaced while the block runs (for diagnosis rows that take a part out)."""
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


def timed(operation: Callable[[], object], repeat: int = 1) -> float:
    """Nanoseconds per call of ``operation`` over ``repeat`` calls, with GC paused."""
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(repeat):
            operation()
        return (time.perf_counter_ns() - start) / repeat
    finally:
        gc.enable()


def compare(baseline: Batch, subject: Batch, *, rounds: int, warmup: int = 2) -> Comparison:
    """Interleave ``rounds`` batches of each (after ``warmup`` untimed ones) and compare."""
    for index in range(-warmup, 0):
        baseline(index)
        subject(index)
    base: list[float] = []
    subj: list[float] = []
    for index in range(rounds):
        if index % 2:
            subj.append(subject(index))
            base.append(baseline(index))
        else:
            base.append(baseline(index))
            subj.append(subject(index))
    return _comparison(base, subj)


Pair = Callable[[int], tuple[float, float]]
"""Runs round ``n`` of a baseline and a subject *together* (their steps interleaved) and
returns the nanoseconds each took."""


def compare_pairs(pair: Pair, *, rounds: int, warmup: int = 1) -> Comparison:
    """``rounds`` rounds of ``pair`` (after ``warmup`` untimed ones), compared."""
    for index in range(-warmup, 0):
        pair(index)
    base: list[float] = []
    subj: list[float] = []
    for index in range(rounds):
        b, s = pair(index)
        base.append(b)
        subj.append(s)
    return _comparison(base, subj)


def _comparison(base: list[float], subj: list[float]) -> Comparison:
    ratios = sorted(s / b for s, b in zip(subj, base, strict=True))
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return Comparison(
        baseline_ns=statistics.median(base),
        subject_ns=statistics.median(subj),
        ratio=statistics.median(ratios),
        spread=quartiles[2] - quartiles[0],
        rounds=len(ratios),
    )


@dataclass(frozen=True)
class Row:
    """One line of the results table."""

    name: str
    baseline: str
    subject: str
    value: float
    target: float | None
    unit: str = "x"
    note: str = ""

    @property
    def passed(self) -> bool | None:
        """``None`` for a row reported for information only."""
        return None if self.target is None else self.value <= self.target

    @property
    def verdict(self) -> str:
        """PASS, MISS or ``info``."""
        return {True: "PASS", False: "MISS", None: "info"}[self.passed]


def ratio_row(
    name: str, comparison: Comparison, target: float | None, *, unit: str = "µs", note: str = ""
) -> Row:
    """A row for a timed comparison (times shown in ``unit`` per operation)."""
    scale = {"µs": 1e3, "ms": 1e6}[unit]
    spread = f"IQR ±{comparison.spread / 2:.2f}, {comparison.rounds} rounds"
    return Row(
        name=name,
        baseline=f"{comparison.baseline_ns / scale:,.2f} {unit}",
        subject=f"{comparison.subject_ns / scale:,.2f} {unit}",
        value=comparison.ratio,
        target=target,
        note=f"{spread}; {note}" if note else spread,
    )


def format_table(rows: list[Row]) -> str:
    """A Markdown table of ``rows``."""
    header = ("benchmark", "baseline", "subject", "result", "target", "", "note")
    lines = [header]
    for row in rows:
        if row.unit == "x":
            value, target = f"{row.value:.2f}x", f"≤ {row.target:.2f}x" if row.target else "-"
        else:
            value = f"{row.value:,.1f} {row.unit}"
            target = f"≤ {row.target:,.0f} {row.unit}" if row.target is not None else "-"
        lines.append((row.name, row.baseline, row.subject, value, target, row.verdict, row.note))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def render(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([render(lines[0]), rule, *(render(line) for line in lines[1:])])
