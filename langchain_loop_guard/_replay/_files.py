"""Which files of a trace to read, and in which format: a directory's stray files (no JSON,
no trace, another format than its first trace) left out and named, the format recognised from
the first value."""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any, Final, Literal

from langchain_loop_guard._replay._langsmith import looks_like_langsmith
from langchain_loop_guard._replay._sources import json_values, trace_files
from langchain_loop_guard._replay._trace import TraceFormatError
from langchain_loop_guard._replay._trajectories import looks_like_trajectory

__all__ = ["TRACE_FORMATS", "TraceFormat", "detect", "detect_format", "screened"]

TraceFormat = Literal["loop-guard", "langsmith", "trajectories"]
"""``"loop-guard"``: the JSON Lines a guard records; ``"langsmith"``: LangSmith runs (any export
shape); ``"trajectories"``: recorded agent runs as detector events (one run and its
``events`` per line)."""

TRACE_FORMATS: Final[tuple[TraceFormat, ...]] = ("loop-guard", "langsmith", "trajectories")


def screened(
    path: str | os.PathLike[str], format: TraceFormat | None
) -> tuple[list[Path], tuple[tuple[str, str], ...]]:
    """The files of the trace at ``path`` to replay, and those of a directory left out with
    why: a file whose first value is no JSON or of no trace format (a ``notes.txt``), or of
    another format than the directory's first trace file (the reports name them); a
    directory with no file left raises the first file's problem."""
    files = trace_files(path)
    if not Path(path).is_dir():
        return files, ()
    kept: list[Path] = []
    skipped: list[tuple[str, str]] = []
    first_problem: TraceFormatError | None = None
    chosen = format
    for file in files:
        try:
            found = _first_value(file)
            kind = None if found is None else (format or detect(str(file), *found))
        except TraceFormatError as exc:
            first_problem = first_problem or exc
            skipped.append((str(file), exc.problem))
            continue
        except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:
            skipped.append((str(file), f"unreadable ({exc})"))
            continue
        if kind is not None and chosen is not None and kind != chosen:
            skipped.append((str(file), f"a {kind} trace among {chosen} traces"))
            continue
        chosen = chosen or kind
        kept.append(file)
    if not kept:
        raise first_problem or TraceFormatError(path, 0, "the directory holds no trace files")
    return kept, tuple(skipped)


def _first_value(file: Path) -> tuple[int, Any] | None:
    """The first ``(line, value)`` of ``file``, or ``None`` when it holds none."""
    values = json_values(file)
    try:
        return next(values, None)
    finally:
        close = getattr(values, "close", None)  # a generator: its file is closed now
        if close is not None:
            close()


def detect_format(path: str | os.PathLike[str]) -> TraceFormat:
    """The format of the trace at ``path``, from its first JSON value (nothing else is read).

    Raises:
        TraceFormatError: the trace is empty, or its first value is of no known format.
        OSError: a file cannot be opened.
    """
    files = screened(path, None)[0]
    first = next(
        ((str(file), *found) for file in files if (found := _first_value(file)) is not None), None
    )
    if first is None:
        raise TraceFormatError(os.fspath(path), 0, "the trace is empty")
    return detect(*first)


def detect(path: str, line: int, value: object) -> TraceFormat:
    """The format of a trace whose first JSON value is ``value`` (at ``path``, ``line``)."""
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
