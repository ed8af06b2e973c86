"""Read a LangSmith runs export as detector events, digesting content as it is read.

The export is a JSON array, or JSON Lines, of run objects as LangSmith's API returns them
(``id``, ``trace_id``, ``parent_run_id``, ``dotted_order``, ``run_type``, ``name``, ``inputs``,
``outputs``, ``error``, ``start_time``, ``end_time``…). Each trace (``trace_id``, else the root
reached through ``parent_run_id``) is one run of the guard. Model runs (``run_type`` ``"llm"``)
become a turn start at their start and an assistant message at their end; tool runs a tool call
at their start and its result at their end, so parallel calls interleave as they did live.
Tool calls the model named that no tool run answered count as a call with an error result
before the next model turn, as the callback handler counts them live.

Arguments, outputs, errors and message text are digested with the detector's own functions as
each run is read and are not kept: only tool names, digests and times reach the replay.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_loop_guard._detector import DetectorEvent
from langchain_loop_guard._signature import (
    assistant_key,
    call_signature,
    error_key,
    outcome_digest,
)
from langchain_loop_guard._trace import TraceFormatError, TraceItem, parse_json_line

__all__ = ["looks_like_langsmith", "read_langsmith"]

_RUN_TYPES: Final = frozenset(
    {"llm", "tool", "chain", "prompt", "parser", "retriever", "embedding"}
)
_NOT_EXECUTED: Final = "the tool call was not executed"
"""The error of a call the model named that no tool ran, when no message says why."""


def looks_like_langsmith(obj: Mapping[str, Any]) -> bool:
    """Whether a JSON object is a LangSmith run (rather than a loop-guard trace line)."""
    return "run_type" in obj


@dataclass(slots=True)
class _Run:
    line: int
    id: str
    run_type: str
    name: str
    start: _dt.datetime
    end: _dt.datetime | None
    order: str
    parent: str | None
    trace: str | None
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]
    error: str | None


@dataclass(slots=True)
class _Trace:
    key: str
    runs: list[_Run] = field(default_factory=list)


def read_langsmith(path: str | os.PathLike[str], text: str) -> Iterator[TraceItem]:
    """The events of every trace of a LangSmith export, trace after trace.

    Raises:
        TraceFormatError: invalid JSON, a run that is not an object, or a run without the
            fields a replay needs (``id``, ``run_type``, ``name``, ``start_time``), naming the
            line.
    """
    runs = [_run(path, line, obj) for line, obj in _objects(path, text)]
    if not runs:
        raise TraceFormatError(path, 0, "the LangSmith export holds no runs")
    for trace in _traces(runs):
        yield from _events(trace)


# --- parsing ----------------------------------------------------------------------------------


def _objects(path: str | os.PathLike[str], text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, object)`` of each run: the items of a JSON array, or one per JSON line."""
    start = len(text) - len(text.lstrip())
    if not text.startswith("[", start):
        for number, source in enumerate(text.splitlines(), start=1):
            if source.strip():
                yield number, parse_json_line(path, number, source)
        return
    decoder = json.JSONDecoder()
    pos, first = start + 1, True
    while True:
        pos = _skip_space(text, pos)
        if pos >= len(text):
            raise TraceFormatError(path, _line_at(text, pos), "the JSON array is not closed")
        if text[pos] == "]":
            break
        if not first:
            if text[pos] != ",":
                msg = "expected ',' or ']' between the runs of the array"
                raise TraceFormatError(path, _line_at(text, pos), msg)
            pos = _skip_space(text, pos + 1)
        first = False
        line = _line_at(text, pos)
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            msg = f"not valid JSON ({exc.msg})"
            raise TraceFormatError(path, _line_at(text, exc.pos), msg) from None
        if not isinstance(value, dict):
            raise TraceFormatError(path, line, "expected a run object in the array")
        yield line, value
    if text[pos + 1 :].strip():
        raise TraceFormatError(path, _line_at(text, pos + 1), "text after the JSON array")


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _run(path: str | os.PathLike[str], line: int, obj: Mapping[str, Any]) -> _Run:
    def fail(problem: str) -> TraceFormatError:
        return TraceFormatError(path, line, problem)

    missing = [key for key in ("id", "run_type", "name", "start_time") if key not in obj]
    if missing:
        raise fail(f"missing field(s) {', '.join(map(repr, missing))} in a LangSmith run")
    run_type = obj["run_type"]
    if run_type not in _RUN_TYPES:
        allowed = ", ".join(sorted(_RUN_TYPES))
        raise fail(f'unknown "run_type": {json.dumps(run_type)} (expected one of {allowed})')
    for key in ("id", "name"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise fail(f'"{key}" must be a non-empty string')
    for key in ("inputs", "outputs"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise fail(f'"{key}" must be an object or null')
    error = obj.get("error")
    if error is not None and not isinstance(error, str):
        raise fail('"error" must be a string or null')
    end = obj.get("end_time")
    return _Run(
        line=line,
        id=obj["id"],
        run_type=run_type,
        name=obj["name"],
        start=_time(obj["start_time"], "start_time", fail),
        end=None if end is None else _time(end, "end_time", fail),
        order=str(obj.get("dotted_order") or ""),
        parent=_optional_id(obj.get("parent_run_id")),
        trace=_optional_id(obj.get("trace_id")),
        inputs=obj.get("inputs") or {},
        outputs=obj.get("outputs") or {},
        error=error,
    )


def _optional_id(value: object) -> str | None:
    return None if value in (None, "") else str(value)


def _time(value: object, key: str, fail: Any) -> _dt.datetime:
    if isinstance(value, str):
        try:
            moment = _dt.datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)
    raise fail(f'"{key}" must be an ISO 8601 time, not {json.dumps(value)}')


def _traces(runs: list[_Run]) -> list[_Trace]:
    """Runs grouped by trace (``trace_id``, else the root of ``parent_run_id``), in start order."""
    by_id = {run.id: run for run in runs}
    traces: dict[str, _Trace] = {}
    for run in runs:
        key = run.trace or _root(run, by_id)
        traces.setdefault(key, _Trace(key)).runs.append(run)
    ordered = sorted(traces.values(), key=lambda t: min((r.start, r.order) for r in t.runs))
    for trace in ordered:
        trace.runs.sort(key=lambda r: (r.start, r.order))
    return ordered


def _root(run: _Run, by_id: Mapping[str, _Run]) -> str:
    seen = {run.id}
    while run.parent is not None and run.parent in by_id and run.parent not in seen:
        run = by_id[run.parent]
        seen.add(run.id)
    return run.parent if run.parent is not None and run.parent not in by_id else run.id


# --- events -------------------------------------------------------------------------------------


def _events(trace: _Trace) -> Iterator[TraceItem]:
    """The detector events of one trace, ordered by time (a run's start before its end)."""
    steps: list[tuple[_dt.datetime, int, str, _Run]] = []
    for run in trace.runs:
        if run.run_type in ("llm", "tool"):
            steps.append((run.start, len(steps), "start", run))
            steps.append((run.end or run.start, len(steps), "end", run))
    steps.sort(key=lambda step: (step[0], step[1]))
    origin = trace.runs[0].start
    named: dict[str, tuple[str, Any]] = {}  # calls the model named that no tool run took yet
    tool_ids: dict[str, str] = {}  # tool run id -> the call id its call and result share

    def item(run: _Run, moment: _dt.datetime, **values: Any) -> TraceItem:
        elapsed = max(0.0, (moment - origin).total_seconds())
        event = DetectorEvent(elapsed=elapsed, **values)
        return TraceItem(run=trace.key, line=run.line, event=event, recorded=False)

    for moment, _, phase, run in steps:
        if run.run_type == "llm" and phase == "start":
            answers = _answers(run.inputs)
            for call_id, (name, args) in list(named.items()):
                del named[call_id]
                sig = call_signature(name, args)
                yield item(run, moment, kind="tool_call", tool=name, digest=sig, call_id=call_id)
                content, failed = answers.get(call_id, (_NOT_EXECUTED, True))
                yield item(run, moment, **_result(name, content, failed, call_id))
            yield item(run, moment, kind="turn_start")
        elif run.run_type == "llm":
            text, calls = _answer(run.outputs)
            for call_id, name, args in calls:
                named[call_id] = (name, args)
            key = assistant_key(text)
            yield item(run, moment, kind="assistant_message", digest=key, calls=len(calls))
        elif phase == "start":
            call_id = _tool_call_id(run, named)
            tool_ids[run.id] = call_id
            sig = call_signature(run.name, dict(run.inputs))
            yield item(run, moment, kind="tool_call", tool=run.name, digest=sig, call_id=call_id)
        else:
            call_id = tool_ids.pop(run.id)
            if run.error is not None:
                result = _result(run.name, run.error, True, call_id)
            else:
                content, failed = _tool_output(run.outputs)
                result = _result(run.name, content, failed, call_id)
            yield item(run, moment, **result)


def _result(name: str, content: object, failed: bool, call_id: str) -> dict[str, Any]:
    outcome = error_key(name, content) if failed else outcome_digest(content)
    return {
        "kind": "tool_result",
        "tool": name,
        "digest": outcome,
        "call_id": call_id,
        "error": failed,
    }


def _tool_call_id(run: _Run, named: dict[str, tuple[str, Any]]) -> str:
    """The id of the model's call a tool run executes (and takes it off ``named``)."""
    message = _message(run.outputs.get("output"))
    call_id = message.get("tool_call_id") if message is not None else None
    if not isinstance(call_id, str) or not call_id:
        call_id = next((c for c, (name, _) in named.items() if name == run.name), None)
    if call_id is None:
        return f"run:{run.id}"
    named.pop(call_id, None)
    return call_id


def _tool_output(outputs: Mapping[str, Any]) -> tuple[object, bool]:
    """A tool run's output and whether it is an error (an error ``ToolMessage``)."""
    output = outputs.get("output", outputs)
    message = _message(output)
    if message is None:
        return output, False
    return _text(message.get("content")), message.get("status") == "error"


def _answers(inputs: Mapping[str, Any]) -> dict[str, tuple[object, bool]]:
    """Tool messages in a model's input, by call id: their content and whether they failed."""
    answers: dict[str, tuple[object, bool]] = {}
    messages = inputs.get("messages")
    if not isinstance(messages, list):
        return answers
    flat = [m for batch in messages for m in (batch if isinstance(batch, list) else [batch])]
    for candidate in flat:
        message = _message(candidate)
        if message is None or _kind(candidate, message) != "tool":
            continue
        call_id = message.get("tool_call_id")
        if isinstance(call_id, str):
            answers[call_id] = (_text(message.get("content")), message.get("status") == "error")
    return answers


def _answer(outputs: Mapping[str, Any]) -> tuple[str, list[tuple[str, str, Any]]]:
    """The text and the tool calls ``(id, name, args)`` of a model run's answer.

    Handles ``generations[0][0].message``, ``generations[0][0].text`` and ``output``.
    """
    message: Mapping[str, Any] | None = None
    text: object = ""
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0]
        if isinstance(first, list):
            first = first[0] if first else {}
        if isinstance(first, Mapping):
            message = _message(first.get("message"))
            text = first.get("text", "")
    elif "output" in outputs:
        message = _message(outputs["output"])
    if message is None:
        return _text(text), []
    calls: list[tuple[str, str, Any]] = []
    for index, call in enumerate(_tool_calls(message)):
        call_id = call.get("id") or f"#{index}"
        calls.append((str(call_id), str(call.get("name") or "unknown_tool"), call.get("args")))
    return _text(message.get("content")), calls


def _tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message's tool calls: LangChain's ``tool_calls``, else OpenAI's ``additional_kwargs``."""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        return [call for call in calls if isinstance(call, Mapping)]
    extra = message.get("additional_kwargs")
    raw = extra.get("tool_calls") if isinstance(extra, Mapping) else None
    if not isinstance(raw, list):
        return []
    parsed: list[Mapping[str, Any]] = []
    for call in raw:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        arguments = function.get("arguments")
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError:
            args = arguments  # malformed arguments still make a call (it fails)
        parsed.append({"id": call.get("id"), "name": function.get("name"), "args": args})
    return parsed


def _message(value: object) -> Mapping[str, Any] | None:
    """The fields of a serialized message: ``{"lc": 1, "kwargs": {...}}``, ``{"type": ...,
    "data": {...}}`` or a plain dict with ``content``; ``None`` for anything else."""
    if not isinstance(value, Mapping):
        return None
    for key in ("kwargs", "data"):
        inner = value.get(key)
        if isinstance(inner, Mapping) and "content" in inner:
            return inner
    return value if "content" in value else None


def _kind(value: Mapping[str, Any], fields: Mapping[str, Any]) -> str:
    """A serialized message's type: ``"tool"``, ``"ai"``… (from ``type`` or the class name)."""
    ids = value.get("id")
    if isinstance(ids, list) and ids and value.get("lc"):
        return {"ToolMessage": "tool", "AIMessage": "ai"}.get(str(ids[-1]), str(ids[-1]))
    return str(fields.get("type") or value.get("type") or "")


def _text(content: object) -> str:
    """A message's text: a string, or the text blocks of a content list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return ""
