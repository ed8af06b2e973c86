"""The user's own verdicts on runs, and how a replay's stops score against them.

A labels file says which runs looped and which were fine: a JSON object mapping run id to
``"loop"`` or ``"fine"``, or CSV rows ``run,label`` (a header row is optional). A LangSmith
export carries the runs' feedback (``feedback_stats``): ``Feedback("correctness", 0.5)`` makes
a run whose average score of that key is below 0.5 a loop, and one at or above it fine.

:func:`score` counts, for one replay: the loops it stops, the loops it misses, and the good
runs it would stop (false stops): what each value of a sweep trades.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from langchain_loop_guard._replay._trace import TraceFormatError, json_type, quoted

if TYPE_CHECKING:
    from langchain_loop_guard._replay._replay_results import RunReplay

__all__ = [
    "LABELS",
    "MAX_LABELS_BYTES",
    "Feedback",
    "Label",
    "LabelScore",
    "LabelsInput",
    "label_of",
    "read_labels",
    "resolve_labels",
    "score",
]

Label = Literal["loop", "fine"]
"""A run's verdict: it looped (the guard should stop it), or it was fine (it should not)."""

LABELS: Final[tuple[Label, ...]] = ("loop", "fine")

LabelsInput = Mapping[str, str] | str | os.PathLike[str]
"""Labels as :func:`~langchain_loop_guard.replay` takes them: a mapping, or a labels file."""

MAX_LABELS_BYTES: Final = 64 * 1024 * 1024
"""The largest labels file read (a million labelled runs take about 50 MB)."""

_THREAD: Final = "thread:"


@dataclass(frozen=True, slots=True)
class Feedback:
    """Labels from LangSmith feedback: a run whose average ``key`` score is below
    ``threshold`` looped; at or above it, the run was fine (``--feedback KEY[=THRESHOLD]``)."""

    key: str
    threshold: float = 0.5

    @classmethod
    def parse(cls, text: str) -> Feedback:
        """``KEY`` or ``KEY=THRESHOLD`` (a number); ``ValueError`` naming what is wrong."""
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not key:
            msg = f"--feedback takes KEY or KEY=THRESHOLD, not {text!r}"
            raise ValueError(msg)
        if not sep:
            return cls(key)
        try:
            threshold = float(raw)
        except ValueError:
            threshold = math.nan
        if not math.isfinite(threshold):
            msg = f"--feedback {key}=THRESHOLD: THRESHOLD must be a number, not {raw!r}"
            raise ValueError(msg)
        return cls(key, threshold)

    def label(self, average: float) -> Label:
        """The label of a run whose ``key`` scores ``average``."""
        return "loop" if average < self.threshold else "fine"


def read_labels(path: str | os.PathLike[str]) -> dict[str, Label]:
    """The labels of a file: a JSON object ``{"run": "loop" | "fine"}``, or CSV ``run,label``;
    :class:`~langchain_loop_guard._replay._trace.TraceFormatError` naming the line of a problem."""
    file = Path(path)
    data = _read_bounded(file)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TraceFormatError(file, 0, "a labels file that is not UTF-8 text") from None
    if text.lstrip()[:1] in ("{", "["):
        return _json_labels(file, text)
    return _csv_labels(file, text)


_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
"""Non-blocking, so that opening a FIFO returns at once (and is then refused)."""


def _read_bounded(file: Path) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_LABELS_BYTES`, checked once open (as
    the configuration loader reads): a FIFO, a device (``/dev/zero``) or a directory is refused
    unread, and a file that grows is read no further than the limit."""
    descriptor = os.open(file, _OPEN_FLAGS)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise TraceFormatError(file, 0, f"a labels file must be a regular file: {what}")
        with open(descriptor, "rb", closefd=False) as opened:
            data = opened.read(MAX_LABELS_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_LABELS_BYTES:
        raise TraceFormatError(file, 0, f"a labels file larger than {MAX_LABELS_BYTES:,} bytes")
    return data


def _json_labels(file: Path, text: str) -> dict[str, Label]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else 0
        raise TraceFormatError(file, line, "a labels file that is not valid JSON") from None
    if not isinstance(data, dict):
        problem = f"a labels file holds one JSON object, not {json_type(data)}"
        raise TraceFormatError(file, 1, problem)
    return {run: _label(file, 0, run, value) for run, value in data.items()}


def _csv_labels(file: Path, text: str) -> dict[str, Label]:
    labels: dict[str, Label] = {}
    try:
        for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
            cells = [cell.strip() for cell in row]
            if not any(cells) or (number == 1 and [c.lower() for c in cells] == ["run", "label"]):
                continue
            if len(cells) != 2 or not cells[0]:  # a run and its label
                problem = f"expected two columns, run,label; found {len(cells)}"
                raise TraceFormatError(file, number, problem)
            labels[cells[0]] = _label(file, number, cells[0], cells[1])
    except csv.Error as exc:
        raise TraceFormatError(file, 0, f"a labels file that is not CSV ({exc})") from None
    return labels


def _label(file: Path, line: int, run: str, value: object) -> Label:
    if isinstance(value, str) and value.strip().lower() in LABELS:
        return cast("Label", value.strip().lower())
    shown = quoted(value)
    problem = f'the label of run {quoted(run)} must be "loop" or "fine", not {shown}'
    raise TraceFormatError(file, line, problem)


def resolve_labels(labels: LabelsInput | None) -> dict[str, Label] | None:
    """Labels given as a mapping (checked) or as a file (read)."""
    if labels is None:
        return None
    if isinstance(labels, Mapping):
        given = Path("labels")
        return {str(run): _label(given, 0, str(run), value) for run, value in labels.items()}
    return read_labels(labels)


def label_of(labels: Mapping[str, Label], run: str) -> Label | None:
    """The label of ``run``: by its id, or (a thread replayed as one run) its thread id."""
    found = labels.get(run)
    if found is None and run.startswith(_THREAD):
        found = labels.get(run[len(_THREAD) :])
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelScore:
    """How one replay's stops score against the labels.

    Attributes:
        loops, fine: labelled runs of the trace, by label.
        caught: loops the guard would stop; missed: loops it would let run.
        false_stops: good runs it would stop (each a run to tune away).
        unlabelled: runs of the trace without a label.
        unknown: labels naming no run of the trace (an id of another kind, or another trace).
        false_stop_runs, missed_runs: their positions in the report's runs.
    """

    loops: int
    caught: int
    fine: int
    false_stops: int
    unlabelled: int
    unknown: int
    false_stop_runs: tuple[int, ...]
    missed_runs: tuple[int, ...]

    @property
    def missed(self) -> int:
        """Loops the guard would let run."""
        return self.loops - self.caught

    def to_json(self) -> dict[str, Any]:
        """The score as JSON data (runs by position: the report's ``runs`` name them)."""
        return {
            "loops": self.loops,
            "loops_stopped": self.caught,
            "loops_missed": self.missed,
            "fine": self.fine,
            "fine_stopped": self.false_stops,
            "unlabelled": self.unlabelled,
            "labels_without_a_run": self.unknown,
        }


def score(runs: Iterable[RunReplay], labels: Mapping[str, Label]) -> LabelScore:
    """Score the stops of ``runs`` against ``labels``."""
    loops = caught = fine = unlabelled = 0
    false_stops: list[int] = []
    missed: list[int] = []
    matched = 0
    for index, run in enumerate(runs):
        label = label_of(labels, run.run)
        if label is None:
            unlabelled += 1
            continue
        matched += 1
        stops = run.stop is not None
        if label == "loop":
            loops += 1
            caught += stops
            if not stops:
                missed.append(index)
        else:
            fine += 1
            if stops:
                false_stops.append(index)
    return LabelScore(
        loops=loops,
        caught=caught,
        fine=fine,
        false_stops=len(false_stops),
        unlabelled=unlabelled,
        unknown=max(0, len(labels) - matched),
        false_stop_runs=tuple(false_stops),
        missed_runs=tuple(missed),
    )
