"""Read recorded agent trajectories (detector events written as JSON) as replay items.

One JSON object per run, with its ``id`` and its ``events``, each one of::

    {"t": "turn"}                                           -> turn_start()
    {"t": "assistant", "text": str, "tool_calls": [[name, args], ...]}
                                                            -> assistant_message(text, calls)
    {"t": "call", "name": str, "args": ..., "id": str}      -> tool_call(name, args, call_id=id)
    {"t": "result", "name": str, "id": str, "output": ...}  -> tool_result(name, output, ...)
    {"t": "error", "name": str, "id": str, "error": ...}    -> tool_result(name, error=error, ...)
    {"t": "user"}   a new user message: reset() with scope "run", user_message() with "thread"

Other fields (``step``, ``rc``…) are ignored. Content is digested with the detector's own
functions as each run is read and is not kept. This is the format of converted third-party
agent runs used to benchmark and calibrate the detector; a run's events are numbered from 1,
so event ``n`` of a report is ``events[n - 1]`` (user markers included).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from langchain_loop_guard._core._canonical import call_signature
from langchain_loop_guard._core._detector import DetectorEvent
from langchain_loop_guard._core._signature import (
    arg_tokens,
    assistant_key,
    outcome,
    reply_sketch,
    talk,
)
from langchain_loop_guard._replay._langsmith_messages import Volatile
from langchain_loop_guard._replay._sources import json_type
from langchain_loop_guard._replay._trace import TraceFormatError, TraceItem, cut_tool_name, quoted

__all__ = ["looks_like_trajectory", "read_trajectories"]

_MAX_PENDING: Final = 64  # calls whose argument words are kept until their result

_KINDS: Final = ("turn", "assistant", "call", "result", "error", "user")


def looks_like_trajectory(obj: Mapping[str, Any]) -> bool:
    """Whether a JSON object is a recorded trajectory (a run with its ``events``)."""
    return isinstance(obj.get("events"), list) and "run_type" not in obj


def read_trajectories(
    values: Iterable[tuple[str, int, Any]], *, scope: str = "run", volatile: Volatile | None = None
) -> Iterator[TraceItem]:
    """The events of each run, run after run; :class:`TraceFormatError`, naming the file and
    line, for a line that is not a run or an event of none of the kinds above. Results are
    digested with ``volatile``'s fields masked (``volatile_fields``)."""
    for path, line, value in values:
        yield from _run(path, line, value, scope, volatile)


def _run(
    path: str, line: int, value: object, scope: str, volatile: Volatile | None = None
) -> Iterator[TraceItem]:
    fail = functools.partial(TraceFormatError, path, line)  # fail(problem) names the line
    if not isinstance(value, Mapping):
        raise fail(f"expected a run with its events, found {json_type(value)}")
    run, events = value.get("id"), value.get("events")
    if not isinstance(run, str) or not run:
        raise fail('"id" must be a non-empty string')
    if not isinstance(events, list):
        raise fail(f'"events" must be an array, not {json_type(events)}')
    tokens: dict[str, frozenset[int]] = {}  # each pending call's argument words, hashed
    for index, event in enumerate(events, start=1):
        if not isinstance(event, Mapping):
            raise fail(
                f"event {index} of {quoted(run)}: expected an object, found {json_type(event)}"
            )
        item = _event(event, index, fail, scope, tokens, volatile=volatile)
        yield TraceItem(run=run, line=line, event=item, recorded=False)


def _event(
    event: Mapping[str, Any],
    index: int,
    fail: Any,
    scope: str,
    tokens: dict[str, frozenset[int]],
    *,
    volatile: Volatile | None = None,
) -> DetectorEvent:
    kind = event.get("t")
    if kind not in _KINDS:
        shown = kind if isinstance(kind, str) and len(kind) < 20 else json_type(kind)
        raise fail(f'event {index}: unknown "t" {shown!a} (expected one of {", ".join(_KINDS)})')
    if kind == "turn":
        return DetectorEvent(kind="turn_start")
    if kind == "user":
        return DetectorEvent(kind="reset" if scope == "run" else "user_message")
    if kind == "assistant":
        calls = event.get("tool_calls") or []
        text = event.get("text")
        if not isinstance(calls, list):
            raise fail(f'event {index}: "tool_calls" must be an array')
        if text is not None and not isinstance(text, str):
            raise fail(f'event {index}: "text" must be a string')
        key = assistant_key(text or "")
        return DetectorEvent(
            kind="assistant_message",
            digest=key,
            near=reply_sketch(text or "") if key is not None and not calls else None,
            calls=len(calls),
            talk=key is not None and not calls and talk(text),
        )
    name, call_id = event.get("name"), event.get("id")
    if not isinstance(name, str) or not name:
        raise fail(f'event {index}: "name" must be a non-empty string')
    name = cut_tool_name(name)  # as the live guard cuts it
    if call_id is not None and not isinstance(call_id, str):
        raise fail(f'event {index}: "id" must be a string')
    key = call_id if call_id is not None else name
    if kind == "call":
        args = event.get("args")
        sig = call_signature(name, args)
        tokens[key] = arg_tokens(args, name)
        if len(tokens) > _MAX_PENDING:
            del tokens[next(iter(tokens))]
        return DetectorEvent(kind="tool_call", tool=name, digest=sig, call_id=call_id)
    failed = kind == "error"
    result = outcome(
        event.get("output"),
        error=(event.get("error") or "") if failed else None,
        tool=name,
        tokens=tokens.pop(key, None),
        volatile=None if volatile is None else volatile(name),
    )
    return DetectorEvent(**result.event(name, call_id, failed=failed))
