"""Digest-only traces: the JSON Lines format a guard records with ``record_to=``, and its reader.

One line per detector event, for example::

    {"v":1,"run":"3f2a…","t":0.0021,"e":"tool_call","tool":"search","d":"9c1e…","id":"51b0…"}
    {"v":1,"run":"3f2a…","t":0.31,"e":"tool_result","tool":"search","d":"07aa…","outcome":"ok"}
    {"v":1,"run":"3f2a…","t":0.35,"e":"tool_call","tool":"search","d":"9c1e…","id":"a4c2…",
     "verdict":{"action":"block","signal":"repeated_tool_call","tool":"search","count":3,
     "threshold":3}}

(each object on one line). ``t`` is the run's elapsed time in seconds; ``d`` the call
signature, outcome digest or error key, assistant key, or a human message's key (its words,
digested); ``id`` a digest of the tool-call id.
Never arguments, output, errors or message text (SPEC §8); every digest is keyed with a secret
the recorder never writes. :func:`decode_event` reads a line back, or raises
:class:`TraceFormatError` naming the line.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import stat
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, cast, get_args, overload

from langchain_loop_guard._core._canonical import digest
from langchain_loop_guard._core._detector import Action, DetectorEvent, EventKind, Signal, Verdict
from langchain_loop_guard._core._errors import LoopGuardError
from langchain_loop_guard._core._public import (
    MAX_TOOL_NAME,
    new_secret,
    public_digest,
    safe_tool_name,
    terminal_safe,
)

__all__ = [
    "TRACE_VERSION",
    "TraceFormatError",
    "TraceItem",
    "TraceRecorder",
    "cut_run_id",
    "cut_tool_name",
    "decode_event",
    "encode_event",
    "json_type",
    "parse_json_line",
    "quoted",
    "read_trace",
]

TRACE_VERSION: Final = 1
"""The ``"v"`` of every line this version writes and reads."""

_KINDS: Final = frozenset(get_args(EventKind))
_ACTIONS: Final = frozenset(get_args(Action))
_SIGNALS: Final = frozenset(Signal)
_OUTCOMES: Final = ("ok", "error")
_COMMON: Final = frozenset({"v", "run", "t", "e", "verdict"})
_BARE: Final = ("turn_start", "tick", "reset", "release")  # no fields of their own
_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    **{kind: frozenset() for kind in _BARE},
    "user_message": frozenset({"d"}),  # the digest of its words, when the host knew them
    "tool_call": frozenset({"tool", "d", "id"}),
    "tool_result": frozenset({"tool", "d", "id", "outcome", "n", "i"}),
    "assistant_message": frozenset({"d", "calls", "ctx", "n", "u", "talk"}),
}
_REQUIRED: Final[Mapping[str, frozenset[str]]] = {
    **{kind: frozenset() for kind in (*_BARE, "user_message")},
    "tool_call": frozenset({"tool", "d"}),
    "tool_result": frozenset({"tool", "d", "outcome"}),
    "assistant_message": frozenset({"d", "calls"}),
}
_VERDICT_FIELDS: Final = frozenset({"action", "signal", "tool", "count", "threshold", "tripped"})
_logger: Final = logging.getLogger("langchain_loop_guard")
_QUOTED: Final = 60  # characters of a value an error message quotes
_LISTED: Final = 5  # unknown fields an error message names


class TraceFormatError(LoopGuardError, ValueError):
    """A trace file that cannot be replayed: the file's fault, never the agent's.

    Attributes:
        path: the trace file.
        line: the 1-based line the problem is on (``0`` for a problem with the whole file).
        problem: what is wrong, on one line.
    """

    def __init__(self, path: str | os.PathLike[str], line: int, problem: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True, slots=True)
class TraceItem:
    """One event of a trace, ready to replay: its run (or thread), 1-based line and event, whose
    ``verdict`` is the live guard's when ``recorded``."""

    run: str
    line: int
    event: DetectorEvent
    recorded: bool = True


# --- writing ---------------------------------------------------------------------------------


def _public_sketch(near: str, secret: bytes | None) -> str:
    """A near sketch with each of its line hashes keyed: shared lines stay shared."""
    chunks = (near[i : i + 8] for i in range(0, len(near), 8))
    return "".join(public_digest(chunk, secret)[:8] for chunk in chunks)


def _public_info(info: str, secret: bytes | None) -> str:
    """An information digest keyed, its kind prefix (``.~!=+``) kept."""
    kind = info[: len(info) - len(info.lstrip(".~!=+"))]
    rest = info[len(kind) :]
    return kind + public_digest(rest, secret) if rest else kind


def encode_event(run: str, event: DetectorEvent, *, secret: bytes | None = None) -> dict[str, Any]:
    """The JSON object of one trace line, its digests keyed with ``secret`` (the process's own
    when ``None``)."""
    line: dict[str, Any] = {"v": TRACE_VERSION, "run": run, "t": event.elapsed, "e": event.kind}
    if event.kind in ("tool_call", "tool_result"):
        line["tool"] = safe_tool_name(event.tool)
        line["d"] = public_digest(event.digest, secret)
        if event.call_id is not None:
            # opaque, but anything a host chose: only the id's digest is written
            line["id"] = public_digest(digest("call", event.call_id), secret)
        if event.kind == "tool_result":
            line["outcome"] = "error" if event.error else "ok"
            if event.near is not None:
                line["n"] = _public_sketch(event.near, secret)
            if event.info is not None:
                line["i"] = _public_info(event.info, secret)
    elif event.kind == "user_message" and event.digest is not None:
        line["d"] = public_digest(event.digest, secret)
    elif event.kind == "assistant_message":
        line["d"] = public_digest(event.digest, secret)
        line["calls"] = event.calls
        if not event.in_context:
            line["ctx"] = False
        if event.near is not None:
            line["n"] = _public_sketch(event.near, secret)
        if event.tokens is not None:
            line["u"] = event.tokens  # the tokens the model call reported: a count, no content
        if event.talk:
            line["talk"] = True  # an answer without calls that was talk (SPEC §14 N19)
    verdict = event.verdict
    if verdict.signal is not None:
        encoded: dict[str, Any] = {
            "action": verdict.action,
            "signal": verdict.signal.value,
            "tool": None if verdict.tool is None else safe_tool_name(verdict.tool),
            "count": verdict.count,
            "threshold": verdict.threshold,
        }
        if verdict.tripped:
            encoded["tripped"] = True
        line["verdict"] = encoded
    return line


class TraceRecorder:
    """Appends detector events to a JSON Lines file; thread-safe, line-flushed, failing open.

    The file is opened at the first event, private: created with mode 0600, and a regular file
    that already exists with access for others is tightened to 0600 (its keyed digests still
    say which calls repeated, and when), with a warning saying so; a file this process cannot
    change (another user's) is used as it is, with a warning. The first failure to open or
    write it is told to ``on_error`` and recording stops.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        on_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self._path = Path(path)
        self._on_error = on_error
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._finalizer: Callable[[], Any] | None = None  # closes the file
        self._failed = False
        self._secret = new_secret()  # keys the digests written; never written itself

    @property
    def path(self) -> Path:
        """The trace file."""
        return self._path

    def listener(self, run: str) -> Callable[[DetectorEvent], None]:
        """A detector listener that records the events of ``run``."""
        return lambda event: self.write(run, (event,))

    def write(self, run: str, events: Iterable[DetectorEvent]) -> None:
        """Append ``events`` of ``run``, one line each, then flush; never raises."""
        text = "".join(
            json.dumps(
                encode_event(run, event, secret=self._secret),
                ensure_ascii=False,
                separators=(",", ":"),
            )
            + "\n"
            for event in events
        )
        if not text:
            return
        with self._lock:
            if self._failed:
                return
            try:
                if self._file is None:  # created private: small values' digests are guessable
                    fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                    _make_private(fd, self._path)
                    self._file = open(fd, "a", encoding="utf-8")  # noqa: SIM115 - kept open
                    self._finalizer = weakref.finalize(self, self._file.close)
                self._file.write(text)
                self._file.flush()
            except (OSError, ValueError) as exc:  # ValueError: a closed file
                self._failed = True
                self._close()
                failed = exc
            else:
                return
        if self._on_error is not None:
            self._on_error("trace recording", failed)

    def close(self) -> None:
        """Close the file (a later event opens it again)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        self._file = None
        if self._finalizer is not None:
            finalizer, self._finalizer = self._finalizer, None
            with contextlib.suppress(OSError):
                finalizer()


def _make_private(fd: int, path: Path) -> None:
    """Tighten an existing trace file others may read to 0600, on its open descriptor (no race
    with a file swapped in at ``path``); a terminal, pipe or device is left alone."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode) or not stat.S_IMODE(mode) & 0o077:
        return
    before = stat.S_IMODE(mode)
    try:
        os.fchmod(fd, 0o600)
    except (OSError, AttributeError) as exc:  # another user's file; no fchmod on the platform
        _logger.warning(
            "loop-guard: the trace file %s has mode %04o (others may read it) and could not be "
            "made private (%s); recording to it anyway",
            terminal_safe(str(path)),
            before,
            type(exc).__name__,
        )
        return
    _logger.warning(
        "loop-guard: the trace file %s had mode %04o (others could read it); it is now 0600",
        terminal_safe(str(path)),
        before,
    )


# --- reading ---------------------------------------------------------------------------------


def parse_json_line(path: str | os.PathLike[str], number: int, text: str) -> dict[str, Any]:
    """The JSON object on line ``number``, or :class:`TraceFormatError`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = exc.msg.removesuffix(" at")  # "Invalid control character at"
        msg = f"not valid JSON ({problem} at column {exc.colno})"
        raise TraceFormatError(path, number, msg) from None
    if not isinstance(value, dict):
        msg = f"expected a JSON object, found {json_type(value)}"
        raise TraceFormatError(path, number, msg)
    return value


def json_type(value: object) -> str:
    """How a JSON value is named in messages ("an array", "a string"…): never its content."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def quoted(value: object) -> str:
    """A value from a trace as an error message quotes it: JSON, cut to 60 characters (a run id
    or a string of 100 MB is not copied into one line), an array or object named by its type."""
    if isinstance(value, dict | list):
        return json_type(value)
    if isinstance(value, str):
        return json.dumps(value[:_QUOTED]) + ("…" if len(value) > _QUOTED else "")
    text = json.dumps(value)  # a number, true, false or null
    return text if len(text) <= _QUOTED else text[: _QUOTED - 1] + "…"


def _names(keys: list[str]) -> str:
    """Field names for an error message: the first few, each cut as :func:`quoted` cuts."""
    shown = ", ".join(quoted(key) for key in keys[:_LISTED])
    return shown if len(keys) <= _LISTED else f"{shown} and {len(keys) - _LISTED:,} more"


@overload
def cut_tool_name(name: str) -> str: ...
@overload
def cut_tool_name(name: None) -> None: ...
def cut_tool_name(name: str | None) -> str | None:
    """A tool name read from a trace, cut as the live guard cuts it (:func:`safe_tool_name`): at
    most :data:`MAX_TOOL_NAME` characters, a longer one ending in ``…``. Its characters are kept;
    every report escapes them."""
    if name is None or len(name) <= MAX_TOOL_NAME:
        return name
    return name[: MAX_TOOL_NAME - 1] + "…"


MAX_RUN_ID: Final = 200
"""The longest run id a replay keeps as it is."""


def cut_run_id(run: str) -> str:
    """A run id as replay keeps it: one longer than :data:`MAX_RUN_ID` characters cut, ending in
    its digest (two long ids that share their start stay apart). Cut as soon as it is read, so
    that an id of 300 MB is not kept through the replay."""
    if len(run) <= MAX_RUN_ID:
        return run
    hasher = hashlib.blake2b(digest_size=8)
    for start in range(0, len(run), 1 << 20):  # a piece at a time: no copy of a huge id
        hasher.update(run[start : start + (1 << 20)].encode("utf-8", "surrogatepass"))
    return f"{run[:160]}…{hasher.hexdigest()}"


def read_trace(path: str | os.PathLike[str], lines: Iterable[str]) -> Iterator[TraceItem]:
    """The events of a loop-guard trace read from ``lines`` (an open text file will do; blank
    lines allowed), in file order; ``path`` names the file in a :class:`TraceFormatError`."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        yield decode_event(path, number, parse_json_line(path, number, text))


def decode_event(path: str | os.PathLike[str], number: int, line: Mapping[str, Any]) -> TraceItem:
    """One trace line's event; :class:`TraceFormatError` names what is wrong with it."""
    fail = functools.partial(TraceFormatError, path, number)  # fail(problem) names the line
    version = line.get("v")
    if version != TRACE_VERSION or type(version) is not int:
        shown = quoted(version) if "v" in line else "missing"
        msg = f'trace version "v" is {shown}; this version of loop-guard reads {TRACE_VERSION}'
        raise fail(msg)
    kind = line.get("e")
    if not isinstance(kind, str) or kind not in _KINDS:
        shown = quoted(kind) if "e" in line else "missing"
        msg = f'unknown event kind "e": {shown} (expected one of {", ".join(sorted(_KINDS))})'
        raise fail(msg)
    allowed = _COMMON | _FIELDS[kind]
    unknown = sorted(set(line) - allowed)
    if unknown:
        raise fail(f"unknown field(s) {_names(unknown)} in a {kind} event")
    missing = sorted(({"run", "t"} | _REQUIRED[kind]) - set(line))
    if missing:
        raise fail(f"missing field(s) {', '.join(map(repr, missing))} in a {kind} event")
    run, elapsed = line["run"], line["t"]
    if not isinstance(run, str) or not run:
        raise fail(f'"run" must be a non-empty string, not {quoted(run)}')
    if type(elapsed) not in (int, float) or not 0 <= elapsed < math.inf:
        raise fail(f'"t" must be a number of seconds (at least 0), not {quoted(elapsed)}')
    tool = cut_tool_name(_optional_str(line, "tool", fail))
    if kind in ("tool_call", "tool_result") and not tool:
        raise fail(f'"tool" must be a non-empty string in a {kind} event')
    value = _optional_str(line, "d", fail)
    if kind in ("tool_call", "tool_result") and not value:
        raise fail(f'"d" must be a digest string in a {kind} event')
    calls = line.get("calls", 0)
    if type(calls) is not int or calls < 0:
        raise fail(f'"calls" must be a whole number of at least 0, not {quoted(calls)}')
    near, info = _optional_str(line, "n", fail), _optional_str(line, "i", fail)
    in_context = line.get("ctx", True)
    if type(in_context) is not bool:
        raise fail(f'"ctx" must be true or false, not {quoted(in_context)}')
    spoke = line.get("talk", False)
    if type(spoke) is not bool:
        raise fail(f'"talk" must be true or false, not {quoted(spoke)}')
    tokens = line.get("u")
    if tokens is not None and (type(tokens) is not int or tokens < 0):
        raise fail(f'"u" must be a whole number of tokens (at least 0), not {quoted(tokens)}')
    outcome = line.get("outcome")
    if kind == "tool_result" and outcome not in _OUTCOMES:
        raise fail(f'"outcome" must be "ok" or "error", not {quoted(outcome)}')
    event = DetectorEvent(
        kind=cast("EventKind", kind),
        tool=tool,
        digest=value,
        call_id=_optional_str(line, "id", fail),
        error=outcome == "error",
        calls=calls,
        in_context=in_context,
        near=near,
        info=info,
        tokens=tokens,
        talk=spoke,
        elapsed=float(elapsed),
        verdict=_decode_verdict(line.get("verdict"), fail),
    )
    return TraceItem(run=cut_run_id(run), line=number, event=event)


def _optional_str(
    line: Mapping[str, Any], key: str, fail: Callable[[str], TraceFormatError]
) -> str | None:
    value = line.get(key)
    if value is not None and not isinstance(value, str):
        raise fail(f'"{key}" must be a string or null, not {quoted(value)}')
    return value


def _decode_verdict(value: object, fail: Callable[[str], TraceFormatError]) -> Verdict:
    if value is None:
        return Verdict()
    if not isinstance(value, dict):
        raise fail(f'"verdict" must be an object, not {json_type(value)}')
    unknown = sorted(set(value) - _VERDICT_FIELDS)
    if unknown:
        raise fail(f"unknown verdict field(s) {_names(unknown)}")
    action, signal = value.get("action"), value.get("signal")
    if action not in _ACTIONS or action == "allow":
        raise fail(
            f'verdict "action" must be one of warn, observe, block, abort, not {quoted(action)}'
        )
    if signal not in _SIGNALS:
        raise fail(f'unknown verdict "signal": {quoted(signal)}')
    tool = value.get("tool")
    count, threshold = value.get("count", 0), value.get("threshold", 0)
    tripped = value.get("tripped", False)
    if tool is not None and not isinstance(tool, str):
        raise fail(f'verdict "tool" must be a string or null, not {quoted(tool)}')
    for key, number in (("count", count), ("threshold", threshold)):
        if type(number) is not int or number < 0:
            raise fail(f'verdict "{key}" must be a whole number, not {quoted(number)}')
    if type(tripped) is not bool:
        raise fail(f'verdict "tripped" must be true or false, not {quoted(tripped)}')
    return Verdict(
        action=cast("Action", action),
        signal=Signal(signal),
        tool=cut_tool_name(tool),
        count=count,
        threshold=threshold,
        tripped=tripped,
    )
