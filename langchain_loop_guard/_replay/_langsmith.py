"""Read LangSmith runs as detector events, digesting content as each run is read.

Every export shape the README lists is read, each recognised by its content: ``list_runs()``
dumps, SmithDB v2 runs from ``runs.query()`` (``run_type`` ``"LLM"``, ``parent_run_ids``),
the ``langsmith`` CLI's JSON Lines (``run_id``), run trees (``child_runs``), API pages
(``{"runs": [...]}``) and Parquet rows; ``runs.query()`` without ``selects`` (ids only) is
refused, saying which fields to select.

Each trace (``trace_id``, else the root reached through the parents) is one run of the guard;
with ``scope="thread"`` the traces of one thread (:func:`_thread`) are one run. Model and tool
runs become events at their start and end (:func:`_events`), so parallel calls interleave as
they did live. Only tool names, digests and times reach the replay. A run exported twice is
merged. An export without inputs and outputs is refused: it would stop runs that never looped.
What a run's inputs and outputs say (messages, tool calls) is read in :mod:`._langsmith_messages`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import math
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_loop_guard._core._canonical import call_signature
from langchain_loop_guard._core._detector import DetectorEvent
from langchain_loop_guard._core._signature import (
    Outcome,
    arg_tokens,
    assistant_key,
    outcome,
    reply_sketch,
    talk,
)
from langchain_loop_guard._replay._langsmith_messages import (
    Volatile,
    model_answer,
    model_tokens,
    tool_answers,
    tool_call_id,
    tool_outcome,
)
from langchain_loop_guard._replay._sources import json_type
from langchain_loop_guard._replay._trace import TraceFormatError, TraceItem, cut_tool_name

__all__ = ["MISSING_IO_HELP", "FeedbackScores", "looks_like_langsmith", "read_langsmith"]

_RUN_TYPES: Final = frozenset(
    {"llm", "tool", "chain", "prompt", "parser", "retriever", "embedding"}
)
_NOT_EXECUTED: Final = "the tool call was not executed"
"""The error of a call the model named that no tool ran, when no message says why."""
_STOPPED: Final = "LoopDetected"
"""What the error of a run the guard stopped starts with (the exception's name)."""
_THREAD_KEYS: Final = ("thread_id", "session_id", "conversation_id")
MISSING_IO_HELP: Final = (
    "export them with `langsmith run export --include-io`, or "
    '`Client.list_runs(select=[..., "inputs", "outputs"])`'
)
"""How to export the inputs and outputs a replay needs (for the refusal message)."""
_IDS_ONLY: Final = (
    'a run with nothing but its id: client.runs.query() returns only "id" without selects; '
    'export with client.runs.query(..., selects=["ID", "TRACE_ID", "PARENT_RUN_IDS", "NAME", '
    '"RUN_TYPE", "STATUS", "START_TIME", "END_TIME", "ERROR", "INPUTS", "OUTPUTS", "EXTRA", '
    '"METADATA", "THREAD_ID"])'
)


def looks_like_langsmith(obj: Mapping[str, Any]) -> bool:
    """Whether a JSON object is LangSmith data: a run, a run tree or a page of runs."""
    if "run_type" in obj or "child_runs" in obj or isinstance(obj.get("runs"), list):
        return True
    return ("run_id" in obj and "start_time" in obj) or _ids_only(obj)


def _ids_only(obj: Mapping[str, Any]) -> bool:
    """Whether a run holds its id and nothing else (``runs.query()`` without ``selects``)."""
    rest = (value for key, value in obj.items() if key not in ("id", "run_id"))
    return ("id" in obj or "run_id" in obj) and all(value is None for value in rest)


_KEYS_NAMED: Final = 20  # feedback keys an error message can name


@dataclass(slots=True)
class FeedbackScores:
    """What :func:`read_langsmith` finds of one feedback key: each trace's average score
    (``feedback_stats[key]["avg"]``, weighted by its ``n``, over the trace's runs), and the
    feedback keys the export holds (the first few), to name them when ``key`` is not one."""

    key: str
    by_trace: dict[str, float] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)

    def of(self, obj: Mapping[str, Any]) -> tuple[float, float] | None:
        """A run's ``(average, count)`` of the key, from its ``feedback_stats``."""
        stats = obj.get("feedback_stats")
        if not isinstance(stats, Mapping):
            return None
        if len(self.keys) < _KEYS_NAMED:  # cut: a key of 20 MB is not copied into a message
            self.keys.update(map(_cut_key, list(stats)[:_KEYS_NAMED]))
        found = stats.get(self.key)
        if isinstance(found, Mapping):
            average, count = found.get("avg"), found.get("n", 1)
        else:
            average, count = found, 1
        score, weight = _number(average), _number(count)
        if score is None:  # not a number, a huge integer, NaN or infinite: no score
            return None
        return score, weight if weight is not None and weight > 0 else 1.0

    def add(self, trace: str, runs: Iterable[_Run]) -> None:
        """Note the average score of ``trace`` (its runs' scores weighted by their counts)."""
        scored = [run.feedback for run in runs if run.feedback is not None]
        total = sum(count for _, count in scored)
        if total > 0:
            average = sum(average * count for average, count in scored) / total
            if math.isfinite(average):  # counts so large that the sum overflows: no score
                self.by_trace[trace] = average


_KEY_SHOWN: Final = 60  # characters of a feedback key an error message shows


def _cut_key(key: object) -> str:
    """A feedback key as an error message names it: cut to :data:`_KEY_SHOWN` characters."""
    text = str(key)
    return text if len(text) <= _KEY_SHOWN else text[: _KEY_SHOWN - 1] + "…"


def _number(value: object) -> float | None:
    """A finite number of a feedback's ``avg`` or ``n`` as a float, else ``None`` (an integer
    of more than 309 digits has no float: ``float()`` would raise ``OverflowError``)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


@dataclass(slots=True)
class _Run:
    """One run, digested: what the replay needs of it and nothing else."""

    path: str
    line: int
    id: str
    kind: str  # the run_type, lower case
    name: str
    start: _dt.datetime
    end: _dt.datetime | None
    order: int  # position in the export: the tie-break of runs that start together
    parent: str | None
    trace: str | None
    thread: str | None
    failed: bool
    stopped: bool  # failed with the guard's LoopDetected
    io: bool  # holds the inputs and outputs a replay needs
    result: tuple[bool, Outcome] | None = None  # a tool run: (failed, its outcome's digests)
    signature: str = ""  # a tool run's call signature
    call_id: str | None = None  # a tool run: the model's call it executes
    key: str | None = None  # a model run: the assistant key of its answer
    sketch: str | None = None  # a model run answering without calls: its reply's word sketch
    talk: bool = False  # a model run answering without calls: talk (SPEC §14 N19)
    calls: tuple[tuple[str, str, str], ...] = ()  # a model run's calls: (id, name, signature)
    answers: Mapping[str, tuple[bool, Outcome]] | None = None  # tool messages in its input
    feedback: tuple[float, float] | None = None  # (average, count) of the key asked for
    tokens: int | None = None  # a model run: the tokens it reported

    @property
    def complete(self) -> int:
        """How complete this copy of the run is (the better copy of a duplicate wins)."""
        return (self.end is not None or self.failed) * 2 + self.io


def read_langsmith(
    values: Iterable[tuple[str, int, Any]],
    *,
    scope: str = "run",
    feedback: FeedbackScores | None = None,
    volatile: Volatile | None = None,
) -> Iterator[TraceItem]:
    """The events of every trace of a LangSmith export, trace after trace, from ``(file, line,
    value)`` of each JSON value read. :class:`TraceFormatError`, naming the file and line, for a
    value that is no run, a run missing a field or with one of the wrong type, or an export
    without inputs and outputs. ``feedback`` is told each trace's score (before the first
    event). Results are digested with ``volatile``'s fields masked (``volatile_fields``)."""
    runs: dict[str, _Run] = {}
    for path, line, value in values:
        for obj in _flatten(path, line, value):
            run = _run(path, line, obj, len(runs), volatile)
            if feedback is not None:
                run.feedback = feedback.of(obj)
            known = runs.get(run.id)
            if known is None or run.complete > known.complete:
                runs[run.id] = run
    _check_io(runs.values())
    traces = _traces(runs, scope)
    if feedback is not None:
        for key, trace in traces:
            feedback.add(key, trace)
    for key, trace in traces:
        yield from _events(key, trace)


# --- parsing ----------------------------------------------------------------------------------


def _flatten(path: str, line: int, value: object) -> Iterator[Mapping[str, Any]]:
    """The runs of one JSON value: a run and its ``child_runs``, or a page's ``runs``."""
    if not isinstance(value, Mapping):
        raise TraceFormatError(path, line, f"expected a LangSmith run, found {json_type(value)}")
    if "run_type" not in value and isinstance(value.get("runs"), list):
        stack: list[object] = list(reversed(value["runs"]))
    else:
        stack = [value]
    while stack:
        item = stack.pop()
        if not isinstance(item, Mapping):
            msg = f"expected a LangSmith run, found {json_type(item)}"
            raise TraceFormatError(path, line, msg)
        children = item.get("child_runs")
        if children is not None:
            if not isinstance(children, list):
                raise TraceFormatError(path, line, '"child_runs" must be an array or null')
            stack.extend(reversed(children))
        yield item


def _run(
    path: str, line: int, obj: Mapping[str, Any], order: int, volatile: Volatile | None = None
) -> _Run:
    fail = functools.partial(TraceFormatError, path, line)  # fail(problem) names the line
    if _ids_only(obj):
        raise fail(_IDS_ONLY)
    run_id = obj.get("id", obj.get("run_id"))
    missing = [key for key in ("run_type", "name", "start_time") if key not in obj]
    if run_id is None:
        missing.insert(0, "id")
    if missing:
        raise fail(f"missing field(s) {', '.join(map(repr, missing))} in a LangSmith run")
    run_type = obj["run_type"]
    if not isinstance(run_type, str):
        raise fail(f'"run_type" must be a string, not {json_type(run_type)}')
    kind = run_type.lower()
    if kind not in _RUN_TYPES:
        allowed = ", ".join(sorted(_RUN_TYPES))
        raise fail(f'unknown "run_type": {_shown(run_type)} (expected one of {allowed})')
    name = obj["name"]
    if not isinstance(run_id, str) or not run_id:
        raise fail('"id" must be a non-empty string')
    if not isinstance(name, str) or not name:
        raise fail('"name" must be a non-empty string')
    inputs = _mapping(obj.get("inputs"), "inputs", fail)
    outputs = _mapping(obj.get("outputs"), "outputs", fail)
    error = obj.get("error")
    if error is not None and not isinstance(error, str):
        raise fail(f'"error" must be a string or null, not {json_type(error)}')
    failed = error is not None or obj.get("status") in ("ERROR", "error")
    end = obj.get("end_time")
    run = _Run(
        path=path,
        line=line,
        id=run_id,
        kind=kind,
        name=sys.intern(cut_tool_name(name)),  # as the live guard cuts a tool's name
        start=_time(obj["start_time"], "start_time", fail),
        end=None if end is None else _time(end, "end_time", fail),
        order=order,
        parent=_interned(_parent(obj, fail)),
        trace=_interned(_optional_id(obj.get("trace_id"), "trace_id", fail)),
        thread=_interned(_thread(obj)),
        failed=failed,
        stopped=isinstance(error, str) and error.lstrip().startswith(_STOPPED),
        io=True,
    )
    if kind == "llm":
        run.io = bool(inputs) and (bool(outputs) or failed or run.end is None)
        text, calls = model_answer(outputs or {})
        run.calls = tuple(calls)
        answered = run.end is not None or bool(calls)
        run.key = assistant_key(text) if answered and not failed else None
        run.sketch = reply_sketch(text) if run.key is not None and not calls else None
        run.talk = run.key is not None and not calls and talk(text)
        run.answers = tool_answers(inputs or {}, volatile) or None
        run.tokens = model_tokens(obj, outputs or {})
    elif kind == "tool":
        _digest_tool(run, obj, inputs, outputs, error, volatile=volatile)
    return run


def _digest_tool(
    run: _Run,
    obj: Mapping[str, Any],
    inputs: Mapping[str, Any] | None,
    outputs: Mapping[str, Any] | None,
    error: str | None,
    *,
    volatile: Volatile | None = None,
) -> None:
    """Fill in a tool run's call signature, call id and outcome."""
    name, failed = run.name, run.failed
    done = run.end is not None
    run.io = inputs is not None and (bool(outputs) or failed or not done)
    run.signature = call_signature(name, dict(inputs or {}))
    run.call_id = tool_call_id(obj, outputs or {})
    tokens = arg_tokens(dict(inputs or {}), name)
    if run.stopped or not (done or failed):
        run.result = None  # blocked by the guard, or never finished: no outcome
    elif failed:
        fields = None if volatile is None else volatile(name)
        run.result = (True, outcome(error=error or "", tool=name, tokens=tokens, volatile=fields))
    else:
        found = outputs or {}
        run.result = tool_outcome(name, found.get("output", found), tokens, volatile)


def _interned(value: str | None) -> str | None:
    """One copy of an id many runs share (their trace, parent or thread)."""
    return None if value is None else sys.intern(value)


def _shown(value: str) -> str:
    return json.dumps(value[:40])


def _mapping(value: object, key: str, fail: Any) -> Mapping[str, Any] | None:
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:  # a Parquet bulk export holds inputs and outputs as JSON text
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise fail(f'"{key}" is text that is not a JSON object') from None
    if value is not None and not isinstance(value, Mapping):
        raise fail(f'"{key}" must be an object or null, not {json_type(value)}')
    return value


def _optional_id(value: object, key: str, fail: Any) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str | int):
        raise fail(f'"{key}" must be a string or null, not {json_type(value)}')
    return str(value)


def _parent(obj: Mapping[str, Any], fail: Any) -> str | None:
    parent = _optional_id(obj.get("parent_run_id"), "parent_run_id", fail)
    if parent is not None:
        return parent
    ancestors = obj.get("parent_run_ids")  # SmithDB v2: the ancestors, the parent last
    if ancestors in (None, []):
        return None
    if not isinstance(ancestors, list):
        raise fail(f'"parent_run_ids" must be an array or null, not {json_type(ancestors)}')
    return _optional_id(ancestors[-1], "parent_run_ids", fail)


def _thread(obj: Mapping[str, Any]) -> str | None:
    """The run's thread, as LangSmith finds it: ``thread_id``, ``session_id`` or
    ``conversation_id`` in its metadata (or SmithDB's top-level ``thread_id``)."""
    top = obj.get("thread_id")
    if isinstance(top, str) and top:
        return top
    extra = obj.get("extra")
    for metadata in (
        obj.get("metadata"),
        extra.get("metadata") if isinstance(extra, Mapping) else None,
    ):
        if isinstance(metadata, Mapping):
            for key in _THREAD_KEYS:
                value = metadata.get(key)
                if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
                    return str(value)
    return None


def _time(value: object, key: str, fail: Any) -> _dt.datetime:
    if isinstance(value, str) and len(value) <= 64:
        with contextlib.suppress(ValueError):
            value = _dt.datetime.fromisoformat(value)
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
    shown = _shown(value) if isinstance(value, str) else json_type(value)
    raise fail(f'"{key}" must be an ISO 8601 time, not {shown}')


def _check_io(runs: Iterable[_Run]) -> None:
    """Refuse an export whose model or tool runs lack their inputs or outputs."""
    lacking = [run for run in runs if run.kind in ("llm", "tool") and not run.io]
    if lacking:
        first = min(lacking, key=lambda run: (run.path, run.line))
        msg = (
            f"{len(lacking)} model or tool run(s) have no inputs or outputs, which the loop "
            f"signals need: {MISSING_IO_HELP}"
        )
        raise TraceFormatError(first.path, first.line, msg)


def _traces(by_id: dict[str, _Run], scope: str) -> list[tuple[str, list[_Run]]]:
    """Runs grouped by trace (or thread), in start order (``by_id`` is emptied)."""
    groups: dict[str, list[_Run]] = {}
    for run in by_id.values():
        key = run.trace or _root(run, by_id)
        if scope == "thread":
            thread = run.thread or by_id.get(key, run).thread
            key = f"thread:{thread}" if thread else key
        groups.setdefault(key, []).append(run)
    by_id.clear()
    for group in groups.values():
        group.sort(key=lambda r: (r.start, r.order))
    return sorted(groups.items(), key=lambda item: (item[1][0].start, item[1][0].order))


def _root(run: _Run, by_id: Mapping[str, _Run]) -> str:
    seen = {run.id}
    while run.parent is not None and run.parent in by_id and run.parent not in seen:
        run = by_id[run.parent]
        seen.add(run.id)
    return run.parent if run.parent is not None and run.parent not in by_id else run.id


# --- events -------------------------------------------------------------------------------------


def _events(key: str, runs: list[_Run]) -> Iterator[TraceItem]:
    """The detector events of one trace, ordered by time (a run's start before its end). Calls
    the model named that no tool run took count as failed before the next model turn, as the
    handler counts them live. In a trace the guard stopped (it acts before the tracer), a tool
    run that never finished is the call whose result it stopped on, and the last turn's calls
    without a tool run were blocked or refused: their outcome is the tool's last one."""
    stopped = any(run.stopped for run in runs)
    steps: list[tuple[_dt.datetime, int, str, _Run]] = []
    for run in runs:
        if run.kind in ("llm", "tool"):
            steps.append((run.start, len(steps), "start", run))
            if run.kind == "llm" or run.result is not None or (stopped and run.end is None):
                steps.append((run.end or run.start, len(steps), "end", run))
    steps.sort(key=lambda step: (step[0], step[1]))
    origin = runs[0].start
    named: dict[str, tuple[str, str]] = {}  # calls the model named that no tool run took yet
    tool_ids: dict[str, str] = {}  # tool run id -> the call id its call and result share
    last: dict[str, tuple[bool, Outcome]] = {}  # tool -> its latest outcome

    def item(run: _Run, moment: _dt.datetime, **values: Any) -> TraceItem:
        elapsed = max(0.0, (moment - origin).total_seconds())
        event = DetectorEvent(elapsed=elapsed, **values)
        return TraceItem(run=key, line=run.line, event=event, recorded=False)

    for moment, _, phase, run in steps:
        if run.kind == "llm" and phase == "start":
            for call_id, (name, sig) in list(named.items()):
                del named[call_id]
                yield item(run, moment, kind="tool_call", tool=name, digest=sig, call_id=call_id)
                answer = (run.answers or {}).get(call_id) or (
                    True,
                    outcome(error=_NOT_EXECUTED, tool=name),
                )
                last[name] = answer
                yield item(run, moment, **answer[1].event(name, call_id, failed=answer[0]))
            yield item(run, moment, kind="turn_start")
        elif run.kind == "llm":
            unfinished = run.end is None and not (stopped and run.calls)
            if unfinished or (run.failed and not (run.stopped and run.calls)):
                continue  # no answer: the model call failed or never finished
            for call_id, name, sig in run.calls:
                named[call_id] = (name, sig)
            yield item(
                run,
                moment,
                kind="assistant_message",
                digest=run.key,
                near=run.sketch,
                calls=len(run.calls),
                talk=run.talk,
                tokens=run.tokens,
            )
        elif phase == "start":
            call_id = _claim(run, named)
            tool_ids[run.id] = call_id
            sig = run.signature
            yield item(run, moment, kind="tool_call", tool=run.name, digest=sig, call_id=call_id)
        else:
            outcome_of = run.result or last.get(run.name)
            if outcome_of is not None:
                last[run.name] = outcome_of
                failed, result = outcome_of
                yield item(run, moment, **result.event(run.name, tool_ids[run.id], failed=failed))
    if named and steps and stopped:
        # the guard stopped the run before any tracer saw the last turn's calls (see above)
        moment, _, _, final = steps[-1]
        for call_id, (name, sig) in named.items():
            yield item(final, moment, kind="tool_call", tool=name, digest=sig, call_id=call_id)
            failed, result = last.get(name) or (True, outcome(error=_NOT_EXECUTED, tool=name))
            yield item(final, moment, **result.event(name, call_id, failed=failed))


def _claim(run: _Run, named: dict[str, tuple[str, str]]) -> str:
    """The id of the model's call a tool run executes (and take it off ``named``)."""
    call_id = run.call_id
    if call_id is None:
        call_id = next((c for c, (name, _) in named.items() if name == run.name), None)
    if call_id is None:
        return f"run:{run.id}"
    named.pop(call_id, None)
    return call_id
