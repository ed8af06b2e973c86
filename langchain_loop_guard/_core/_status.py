"""What ``status`` and ``inspect`` return (:class:`GuardStatus`, :class:`RunInspection`), as
aligned text and as HTML; labels translated, values names, numbers, sources and digests only.
"""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_loop_guard._core._config import Mode
from langchain_loop_guard._core._cost import LoopCost, cost_cell
from langchain_loop_guard._core._detector import CallInfo, Signal
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._scope import ScopeChoice

__all__ = ["GuardStatus", "RunInspection", "StopRecord", "text_table", "text_width"]


@dataclass(frozen=True, slots=True)
class StopRecord:
    """A loop the guard stopped or reported: no arguments, outputs or text."""

    run_id: str
    action: str
    signal: Signal
    tool: str | None
    count: int
    threshold: int
    at: float
    cost: LoopCost | None = None
    """What the loop cost, when the integration counted it."""


@dataclass(frozen=True, slots=True)
class _Section:
    """One table of a status view: a title, optional column headers, rows of cells."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def text_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: wide characters (Hangul, CJK) take two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def text_table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """``rows`` as lines of aligned columns (aligned on screen, wide characters included)."""
    if not rows:
        return []
    widths = [max(text_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent
        + "  ".join(
            cell + " " * (width - text_width(cell)) for cell, width in zip(row, widths, strict=True)
        ).rstrip()
        for row in rows
    ]


class _View(Protocol):
    def _sections(self) -> list[_Section]: ...


# The three below are methods of both GuardStatus and RunInspection (set on each class, see
# there): ``self`` is the status or inspection being shown.
def _as_text(self: _View) -> str:
    lines: list[str] = []
    for section in self._sections():
        lines.append(section.title)
        lines += text_table([section.header, *section.rows] if section.header else section.rows)
    return "\n".join(lines)


_CELL = "text-align:left;padding:2px 16px 2px 0;vertical-align:top"


def _as_html(self: _View) -> str:
    parts = ['<div class="loop-guard">']
    for section in self._sections():
        parts.append(
            '<table style="border-collapse:collapse;margin-bottom:1em">'
            f'<caption style="text-align:left;font-weight:bold;padding-bottom:4px">'
            f"{html.escape(section.title)}</caption>"
        )
        if section.header:
            cells = "".join(f'<th style="{_CELL}">{html.escape(c)}</th>' for c in section.header)
            parts.append(f"<thead><tr>{cells}</tr></thead>")
        parts.append("<tbody>")
        for first, *rest in section.rows:
            tag = "td" if section.header else "th"
            cells = f'<{tag} style="{_CELL}">{html.escape(first)}</{tag}>'
            cells += "".join(f'<td style="{_CELL}">{html.escape(c)}</td>' for c in rest)
            parts.append(f"<tr>{cells}</tr>")
        parts.append("</tbody></table>")
    parts.append("</div>")
    return "".join(parts)


def _pretty(self: _View, printer: Any, cycle: bool) -> None:
    printer.text(str(self))


@dataclass(frozen=True, slots=True)
class GuardStatus:
    """The guard's state for the ``status`` command: an aligned text table as ``str`` (and in
    IPython), HTML in Jupyter; labels in ``locale``, values names, numbers and sources only."""

    mode: Mode
    config: tuple[tuple[str, Any, str], ...]
    active_runs: int
    stops: int
    warnings: int
    observed: int
    recent: tuple[StopRecord, ...] = field(default=())
    locale: str = "en"
    shed_runs: int = 0
    """Runs the callback handler could not guard because its registry was full of runs in
    flight (see ``LoopGuardCallbackHandler(max_runs=...)``)."""
    scope: ScopeChoice | None = None
    """The scope chosen for the most recent run, and why (``scope="auto"`` follows the app)."""

    def _sections(self) -> list[_Section]:
        tr = translator(self.locale)
        title = tr.gettext("loop-guard status")
        counts = [
            (tr.gettext("mode"), self.mode),
            (tr.gettext("active runs"), str(self.active_runs)),
            (tr.gettext("stops"), str(self.stops)),
            (tr.gettext("observed loops"), str(self.observed)),
            (tr.gettext("warnings"), str(self.warnings)),
        ]
        if self.scope is not None:  # the most recent run's (SPEC §13 C1)
            counts.append((tr.gettext("scope"), _scope(self.scope, self.locale)))
        if self.shed_runs:
            counts.append((tr.gettext("runs not guarded (registry full)"), str(self.shed_runs)))
        sections = [
            _Section(title, (), tuple(counts)),
            _Section(
                tr.gettext("configuration"),
                (tr.gettext("setting"), tr.gettext("value"), tr.gettext("source")),
                tuple((name, _show(value), source) for name, value, source in self.config),
            ),
        ]
        if self.recent:
            header: tuple[str, ...] = (
                tr.gettext("run"),
                tr.gettext("action"),
                tr.gettext("signal"),
                tr.gettext("tool"),
                tr.gettext("count"),
            )
            rows: tuple[tuple[str, ...], ...] = tuple(
                (r.run_id, r.action, r.signal.value, r.tool or "-", f"{r.count}/{r.threshold}")
                for r in self.recent
            )
            if any(r.cost is not None for r in self.recent):
                header = (*header, tr.gettext("loop cost"))
                rows = tuple(
                    (*row, cost_cell(r.cost, self.locale))
                    for row, r in zip(rows, self.recent, strict=True)
                )
            sections.append(_Section(tr.gettext("recent loops"), header, rows))
        return sections

    # Set on each class, not in a shared base: IPython takes the first of ``_repr_pretty_`` or
    # ``__repr__`` along the MRO, and the class's own dataclass ``__repr__`` would win.
    __str__ = _as_text
    _repr_html_ = _as_html
    _repr_pretty_ = _pretty


@dataclass(frozen=True, slots=True)
class RunInspection:
    """The recent tool calls of one run for the ``inspect`` command, names and digests only;
    printed and drawn as :class:`GuardStatus` is."""

    run_id: str
    turns: int
    calls: int
    elapsed_s: float
    tripped: Signal | None
    warned: tuple[Signal, ...]
    recent: tuple[CallInfo, ...]
    locale: str = "en"
    scope: ScopeChoice | None = None
    """The scope the run is guarded in, and why (``None``: not known here)."""
    spent: LoopCost | None = None
    """The model calls and tokens the run spent, as far as the guard counted them."""
    loop_cost: LoopCost | None = None
    """What the loop that stopped the run cost (since the looping pattern began)."""

    def _sections(self) -> list[_Section]:
        tr = translator(self.locale)
        sections = [
            _Section(
                tr.gettext("loop-guard inspect"),
                (),
                (
                    (tr.gettext("run"), self.run_id),
                    (tr.gettext("scope"), _scope(self.scope, self.locale)),
                    (tr.gettext("model turns"), str(self.turns)),
                    (tr.gettext("tool calls"), str(self.calls)),
                    (tr.gettext("elapsed"), f"{self.elapsed_s:.1f} s"),
                    (tr.gettext("stopped by"), self.tripped.value if self.tripped else "-"),
                    (tr.gettext("warnings"), ", ".join(s.value for s in self.warned) or "-"),
                    *self._costs(tr.gettext("model usage"), tr.gettext("loop cost")),
                ),
            )
        ]
        if self.recent:
            header = ("#", tr.gettext("tool"), tr.gettext("digest"), tr.gettext("outcome"))
            rows = tuple(
                (str(i - len(self.recent)), c.tool, c.digest, c.outcome)
                for i, c in enumerate(self.recent)
            )
            sections.append(_Section(tr.gettext("recent tool calls"), header, rows))
        return sections

    def _costs(self, spent: str, loop: str) -> tuple[tuple[str, str], ...]:
        """The rows of what the run spent and its loop cost, when they were counted."""
        rows: tuple[tuple[str, str], ...] = ()
        if self.spent is not None:
            rows += ((spent, cost_cell(self.spent, self.locale)),)
        if self.loop_cost is not None:
            rows += ((loop, cost_cell(self.loop_cost, self.locale)),)
        return rows

    # as for GuardStatus
    __str__ = _as_text
    _repr_html_ = _as_html
    _repr_pretty_ = _pretty


def _scope(choice: ScopeChoice | None, locale: str) -> str:
    return "-" if choice is None else choice.describe(locale)


def _show(value: object) -> str:
    if isinstance(value, frozenset | set):
        return ",".join(sorted(map(str, value))) or "-"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) or "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
    return str(value)
