"""The pure loop detector: events in, :class:`Verdict` values out (SPEC §1-§4).

It knows nothing of LangChain or LangGraph: adapters translate their host's events into calls
of :class:`LoopDetector` and act on the verdicts. The clock is injected. Per-event work is
bounded by the configured windows, never by the run's length, and only digests and counters are
kept.

:class:`LoopDetector` feeds each event to the run's view (:mod:`._view`) and asks the rules
(:mod:`._rules`) the event's facts call for. The rest has its own rooms: the verdict and its
wording (:mod:`._verdict`), what the run remembers of its verdicts and what a detection means
in the mode (:class:`~._reporting.RunRecord`), the listener and its events
(:class:`~._detector_events.Emitter`), the snapshot and the versions of the exported state
(:mod:`._detector_state`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sized
from typing import Any

from langchain_loop_guard._core._canonical import call_signature, kept_call_id
from langchain_loop_guard._core._config import LoopGuardConfig
from langchain_loop_guard._core._detector_events import (
    DetectorEvent,
    Emitter,
    EventKind,
    EventListener,
)
from langchain_loop_guard._core._detector_state import (
    STATE_VERSION,
    CallInfo,
    DetectorSnapshot,
    readable_state,
)
from langchain_loop_guard._core._judge import Judge
from langchain_loop_guard._core._reporting import Clock, RunRecord
from langchain_loop_guard._core._rules import Signal
from langchain_loop_guard._core._signature import (
    arg_tokens,
    assistant_key,
    question_key,
    reply_sketch,
    result_digests,
    talk,
)
from langchain_loop_guard._core._verdict import ALLOW, Action, Verdict, reason
from langchain_loop_guard._core._view import (
    Call,
    OutcomeKind,
    RunView,
    StateError,
    key_of,
    limits_of,
)

__all__ = [
    "ALLOW",
    "Action",
    "CallInfo",
    "Clock",
    "DetectorEvent",
    "DetectorSnapshot",
    "EventKind",
    "EventListener",
    "LoopDetector",
    "OutcomeKind",
    "Signal",
    "Verdict",
    "reason",
]


class LoopDetector:
    """The loop detector of one run.

    Feed it the run's events; each method returns a :class:`Verdict`. After a stop in ``"on"``
    mode the run is *tripped*: later tool calls are blocked and model turns aborted until
    :meth:`reset` (or :meth:`release`, which a nudging integration uses to let the run go on).

    The detector is not thread-safe: an integration serving concurrent runs holds one detector
    per run and serializes the events of each.

    Args:
        config: thresholds and mode; the defaults when ``None``.
        clock: returns seconds, like :func:`time.monotonic` (the default).
        listener: called after every event (mode ``"off"`` has none) with a
            :class:`DetectorEvent`: digests, never content. :meth:`replay` feeds such events
            back and reaches the same verdicts. Calls and results of ignored tools are digested
            too when there is a listener, so that a replay can stop ignoring them. Without a
            listener, nothing is digested that the signals do not need.
    """

    __slots__ = ("_config", "_events", "_judge", "_limits", "_off", "_record", "_view")

    def __init__(
        self,
        config: LoopGuardConfig | None = None,
        *,
        clock: Clock | None = None,
        listener: EventListener | None = None,
    ):
        config = config if config is not None else LoopGuardConfig()
        self._view = RunView(limits_of(config))
        self._record = RunRecord(clock if clock is not None else time.monotonic, config, self._view)
        # the listener's owner; none without a listener, so the hot path tests one attribute
        self._events = Emitter(listener, self._record) if listener is not None else None
        self._judge = Judge(self._view, self._record)
        self._apply(config)
        self._view.clear()

    # --- configuration ---------------------------------------------------------------------

    @property
    def config(self) -> LoopGuardConfig:
        """The configuration in force."""
        return self._config

    def configure(self, config: LoopGuardConfig) -> None:
        """Switch to ``config`` and keep the run's history.

        Switching to ``"off"`` clears the run (off tracks nothing), and switching back from
        ``"off"`` starts it afresh. A mode other than ``"on"`` lifts a trip: an observed run
        is never blocked.
        """
        was_off = self._config.mode == "off"
        self._apply(config)
        if config.mode == "off" or was_off:
            self.reset()
        elif config.mode != "on":
            self.release()

    def _apply(self, config: LoopGuardConfig) -> None:
        self._config, self._limits = config, limits_of(config)
        self._view.resize(self._limits)
        self._record.configure(config)
        # what every event reads of the configuration, read once
        self._off = config.mode == "off"
        self._judge.configure(config)

    def repeat_threshold(self, tool: str) -> int:
        """The repeat threshold of ``tool`` (its override, or ``repeat_tool_threshold``)."""
        return self._limits.repeat_threshold(tool)

    def window_threshold(self, tool: str) -> int:
        """The window threshold of ``tool``: never below its repeat threshold."""
        return self._limits.window_threshold(tool)

    # --- state -------------------------------------------------------------------------------

    @property
    def tripped(self) -> Verdict | None:
        """The verdict that stopped the run, or ``None``."""
        return self._record.tripped

    def reset(self) -> Verdict:
        """Clear the run's counters, history, warnings and tripped flag."""
        self._view.clear()
        self._record.clear()
        if self._events is not None and self._config.mode != "off":
            self._events.reset()
        return ALLOW

    def release(self) -> None:
        """Lift the trip and keep the history: the same repeat is detected again at once."""
        if self._record.release():
            self._decided("release", ALLOW)

    def snapshot(self, recent: int = 10) -> DetectorSnapshot:
        """Counters and the last ``recent`` calls (tool name, short digest, outcome kind)."""
        return DetectorSnapshot.of(self._view, self._record, recent)

    def export_state(self) -> dict[str, Any]:
        """The run's state as JSON data: tool names, digests and counters, never content."""
        return {"v": STATE_VERSION, **self._view.export_state(), **self._record.export_state()}

    def restore_state(self, state: Mapping[str, Any]) -> bool:
        """Continue from :meth:`export_state` output (another process's, say).

        Returns whether the state was taken. A state of another version, a malformed one, or
        any state in ``"off"`` mode starts the run afresh instead: losing a loop's beginning is
        better than failing the agent. Nothing is half restored.
        """
        self._view.clear()
        self._record.clear()
        if self._config.mode == "off" or not isinstance(state, Mapping):
            return False
        try:
            readable = readable_state(state)
            if readable is None:
                return False
            self._view.restore_state(readable[0], version=readable[1])
            self._record.restore_state(readable[0])  # changes nothing when it raises
        except StateError:
            self._view.clear()
            return False
        return True

    # --- events --------------------------------------------------------------------------------

    def turn_start(self) -> Verdict:
        """A model call begins. A tripped run is aborted before the call is paid for."""
        return ALLOW if self._off else self._decided("turn_start", self._judge.turn_start())

    def tool_call(
        self,
        name: str,
        args: object = None,
        call_id: str | None = None,
        *,
        acts: bool | None = None,
    ) -> Verdict:
        """A tool call is about to run; ``"block"`` means it must not.

        ``acts`` says whether the tool acts (creates, changes, sends, deletes: ``True``) or
        only reads (``False``), as its host knows it (MCP tool annotations); ``None`` when
        unknown, and the call's name and arguments decide. ``acting_tools`` and
        ``read_only_tools`` win over it (SPEC §14)."""
        if self._off:
            return ALLOW
        call_id, events = kept_call_id(call_id), self._events
        # an ignored call is not kept: its signature is only needed for a listener
        if events is None and name in self._judge.ignore:
            return self._judge.tool_call(name, "", call_id)
        sig = call_signature(name, args)
        # a blocked call gets no result: the words of its arguments are not needed
        if self._record.tripped is None:
            tokens = arg_tokens(args, name, self._limits.acts(name, acts))
        else:
            tokens = None
        return self._call(name, sig, call_id, tokens)

    def digested_call(self, name: str, signature: str, call_id: str | None = None) -> Verdict:
        """:meth:`tool_call` of a call digested beforehand: its ``signature``, as a listener's
        event carries it. For an integration that digests outside its lock: the verdict, and
        the event a listener receives, are those of :meth:`replay` of that event, and of
        :meth:`tool_call` of the arguments the signature was made of."""
        if self._off:
            return ALLOW
        return self._call(name, signature, kept_call_id(call_id))

    def tool_result(
        self, name: str, output: object = None, *, error: object = None, call_id: str | None = None
    ) -> Verdict:
        """A tool call returned ``output``, or failed with ``error`` (an exception or text).

        The result belongs to the call with the same ``call_id``; without one (or with an id
        never seen) to the oldest pending call of that tool. A second result for a call, or a
        result for a call the guard blocked, is no tool outcome and is disregarded.
        """
        if self._off:
            return ALLOW
        call_id, events = kept_call_id(call_id), self._events
        if events is None and name in self._judge.ignore:
            return self._record.soft()
        call = self._view.find(name, call_id)
        volatile, tokens = self._limits.volatile_of(name), None if call is None else call.tokens
        key, near, info, shaped = result_digests(output, error, name, tokens, volatile)
        failed = shaped or error is not None
        return self._result(call, name, key, call_id, failed=failed, near=near, info=info)

    def digested_result(
        self,
        name: str,
        key: str,
        call_id: str | None = None,
        *,
        failed: bool = False,
        near: str | None = None,
        info: str | None = None,
    ) -> Verdict:
        """:meth:`tool_result` of a result digested beforehand: its outcome digest or error
        ``key``, whether it ``failed``, its line sketch (``near``) and its information digest
        (``info``), as a listener's event carries them. For an integration that digests
        outside its lock: the verdict, and the event a listener receives, are those of
        :meth:`replay` of that event, and of :meth:`tool_result` of the output the digests
        were made of with the words of the call's arguments (as the detector keeps them: none
        for a call of a tripped run, a blocked call or an ignored tool's)."""
        if self._off:
            return ALLOW
        call_id = kept_call_id(call_id)
        call = self._view.find(name, call_id)
        return self._result(call, name, key, call_id, failed=failed, near=near, info=info)

    def _call(
        self, name: str, sig: str, call_id: str | None, tokens: frozenset[int] | None = None
    ) -> Verdict:
        """Judge a call by its signature ``sig`` (and the words of its arguments, for its
        result), and tell the listener."""
        verdict = self._judge.tool_call(name, key_of(sig), call_id, tokens)
        if self._events is not None:
            self._events.emit("tool_call", verdict, tool=name, digest=sig, call_id=call_id)
        return verdict

    def _result(
        self,
        call: Call | None,
        name: str,
        digest: str,
        call_id: str | None,
        *,
        failed: bool,
        near: str | None,
        info: str | None,
    ) -> Verdict:
        """Judge a result of ``call`` by its ``digest``, line sketch and information digest,
        and tell the listener."""
        key = key_of(digest)
        verdict = self._judge.tool_result(call, name, key, failed, call_id, near=near, info=info)
        if self._events is not None:
            fields = {"digest": digest, "call_id": call_id, "error": failed, "near": near}
            self._events.emit("tool_result", verdict, tool=name, info=info, **fields)
        return verdict

    def assistant_message(
        self,
        text: str,
        tool_calls: Iterable[tuple[str, object]] = (),
        *,
        in_context: bool = True,
        tokens: int | None = None,
    ) -> Verdict:
        """The model answered with ``text`` (and asked for ``tool_calls``).

        Empty text is skipped. With progress awareness a message that calls tools is left to
        the tool-call signals: it neither counts nor breaks the streak.

        ``in_context`` says whether the model's input held the run's previous response (an
        agent reading its own history). A helper model (a grader, a router) that answers the
        same to new inputs passes ``False``: its answer starts a new streak instead of
        repeating the last one (SPEC §11 N2).

        ``tokens`` (the tokens the model call reported) changes no verdict: it is passed on to
        the listener, so that a recorded trace keeps what the run spent.
        """
        if self._off:
            return ALLOW
        count = _count(tool_calls)
        events = self._events
        if events is None and self._judge.aware and count:
            # a message that calls tools is left to the tool-call signals: no key needed
            return self._judge.assistant_message(None, None, count, in_context)
        sketched = events is not None or self._limits.sketches_replies
        key, sketch, spoke = _answer_of(text, count, sketched=sketched)
        verdict = self._judge.assistant_message(key, sketch, count, in_context, talk=spoke)
        if events is not None:
            fields = {"digest": key, "near": sketch, "calls": count, "in_context": in_context}
            events.emit("assistant_message", verdict, tokens=tokens, talk=spoke, **fields)
        return verdict

    def user_message(self, text: object = None) -> Verdict:
        """A new human message in the same run (``scope="thread"``): the user moved it on.

        It lifts a trip (the user saw the stop and answered), and the successful calls before
        it no longer count as repeats of the calls after it (asking for the same thing in a
        new turn is no loop, SPEC §11 N3). Failures still do (R7), and so do the error and
        response streaks, but for the same ``text`` (the message, when known: a digest is
        kept) asked again and answered as before, which is consistency (SPEC §14 N18).
        """
        if self._off:
            return ALLOW
        return self._user_message(question_key(text) if text is not None else None)

    def _user_message(self, question: str | None) -> Verdict:
        self._record.release()
        self._view.user_message(question)
        verdict = self._record.soft()
        if self._events is not None:
            self._events.emit("user_message", verdict, digest=question)
        return verdict

    def tick(self) -> Verdict:
        """A clock tick: only the elapsed-time warning can fire."""
        return ALLOW if self._off else self._decided("tick", self._record.soft())

    def replay(self, event: DetectorEvent) -> Verdict:
        """Feed an event as a listener received it: digests instead of content.

        The event's ``elapsed`` and ``verdict`` are not used (drive the clock with
        ``elapsed`` to replay elapsed-time warnings). Under the configuration the events were
        recorded with, every verdict is the one the listener saw; under another, the
        verdicts that configuration gives. A listener of this detector receives the events.

        Raises:
            ValueError: a tool call or result without its tool or digest.
        """
        if self._off:
            return ALLOW
        kind, tool, value = event.kind, event.tool or "", event.digest
        call_id = kept_call_id(event.call_id)
        if kind in ("reset", "user_message"):
            return self.reset() if kind == "reset" else self._user_message(value)
        if kind == "release":
            self.release()
            return ALLOW
        if kind in ("tool_call", "tool_result") and (event.tool is None or value is None):
            msg = f"a {kind} event needs its tool and digest"
            raise ValueError(msg)
        if kind == "turn_start":
            verdict = self._judge.turn_start()
        elif kind == "tool_call":
            verdict = self._judge.tool_call(tool, key_of(value or ""), call_id)
        elif kind == "tool_result":
            call, key = self._view.find(tool, call_id), key_of(value or "")
            near, info = event.near, event.info
            verdict = self._judge.tool_result(
                call, tool, key, event.error, call_id, near=near, info=info
            )
        elif kind == "assistant_message":
            near, calls, in_context = event.near, event.calls, event.in_context
            talked = event.talk and not calls
            verdict = self._judge.assistant_message(value, near, calls, in_context, talk=talked)
        else:
            verdict = self._record.soft()
        if self._events is not None:
            self._events.replayed(event, verdict)
        return verdict

    def _decided(self, kind: EventKind, verdict: Verdict) -> Verdict:
        if self._events is not None:
            self._events.emit(kind, verdict)
        return verdict


def _answer_of(text: str, calls: int, *, sketched: bool) -> tuple[str | None, str | None, bool]:
    """An answer's key, its word sketch (if ``sketched``) and whether it was talk (§14 N19)."""
    key = assistant_key(text)
    if key is None:
        return None, None, False
    return key, reply_sketch(text) if sketched else None, not calls and talk(text)


def _count(items: Iterable[object]) -> int:
    """How many ``items`` there are: a list's length, or the items of an iterator counted."""
    kind = type(items)
    if kind is list or kind is tuple or isinstance(items, Sized):
        return len(items)  # type: ignore[arg-type]
    return sum(1 for _ in items)
