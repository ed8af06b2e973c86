"""The pure loop detector: events in, :class:`Verdict` values out (SPEC §1-§4).

It knows nothing of LangChain or LangGraph: adapters translate their host's events into calls
of :class:`LoopDetector` and act on the verdicts. The clock is injected. Per-event work is
bounded by the configured windows, never by the run's length, and only digests and counters are
kept.
"""

from __future__ import annotations

import dataclasses
import math
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sized
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from langchain_loop_guard._canonical import call_signature, digest
from langchain_loop_guard._config import LoopGuardConfig
from langchain_loop_guard._messages import translator
from langchain_loop_guard._rules import (
    ANSWER_CHECKS,
    CALL_CHECKS,
    CHANGED,
    FAILED,
    FAILING,
    NEW_CALL_CHECKS,
    QUIET,
    REPLY,
    RESULT_CHECKS,
    TURN_CHECKS,
    Detection,
    Signal,
)
from langchain_loop_guard._signature import arg_tokens, assistant_key, reply_sketch, result_digests
from langchain_loop_guard._view import (
    Call,
    Key,
    OutcomeKind,
    RunView,
    StateError,
    count_of,
    items_of,
    key_of,
    key_text,
    limits_of,
    optional_text_of,
    text_of,
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

Action = Literal["allow", "warn", "observe", "block", "abort"]
Clock = Callable[[], float]

_STATE_VERSION = 4
_MAX_REPORTED = 32  # distinct loops remembered per run for observe-mode de-duplication
_NO_SIGNALS: frozenset[Signal] = frozenset()
_REPORT_BITS = 64  # a reported loop is remembered as its 64-bit digest (see _report_digest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The detector's decision about one event.

    Attributes:
        action: ``"allow"``; ``"warn"`` (a soft limit was passed, go on); ``"observe"`` (a loop
            was seen in observe mode, go on); ``"block"`` (a tool call that must not run, and
            the run stops); ``"abort"`` (the run stops).
        signal: the signal that fired, or ``None`` for ``"allow"``.
        message: a localized, user-facing explanation (empty for ``"allow"``); it names tools
            and counts, never arguments or output.
        tool: the tool the verdict is about, when there is one.
        tools: every tool of the loop (a cycle names each tool of its pattern).
        count: how often the pattern was seen.
        threshold: the limit it reached.
        key: a digest identifying this loop (the same loop has the same key).
        tripped: ``True`` when the run was already stopped by an earlier verdict.
    """

    action: Action = "allow"
    signal: Signal | None = None
    message: str = ""
    tool: str | None = None
    tools: tuple[str, ...] = ()
    count: int = 0
    threshold: int = 0
    key: str | None = None
    tripped: bool = False

    @property
    def stops(self) -> bool:
        """Whether the run must stop (``"block"`` or ``"abort"``)."""
        return self.action in ("block", "abort")


ALLOW = Verdict()
"""The verdict of an event that changes nothing."""

EventKind = Literal[
    "turn_start",
    "tool_call",
    "tool_result",
    "assistant_message",
    "user_message",
    "tick",
    "reset",
    "release",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DetectorEvent:
    """One event as the detector saw it, digested: what a trace records and a replay feeds.

    Attributes:
        kind: the event (the name of the :class:`LoopDetector` method that received it).
        tool: the tool of a call or result.
        digest: the call's signature, the result's outcome digest or error key, or the
            assistant key (``None`` for an empty response); never content.
        call_id: the tool-call id the host gave, if any.
        error: whether a result is an error.
        calls: how many tool calls an assistant message made.
        in_context: whether the model's input held the run's previous response.
        near: a long result's near sketch (its lines with the numbers left out, hashed), or
            an assistant reply's (its words, hashed).
        info: a result's information digest (its text without the call's argument values).
        elapsed: the run's elapsed time when the event was decided, in seconds (the clock
            reading the decision used, so a replay driven by it decides the same).
        verdict: what the detector decided.
    """

    kind: EventKind
    tool: str | None = None
    digest: str | None = None
    call_id: str | None = None
    error: bool = False
    calls: int = 0
    in_context: bool = True
    near: str | None = None
    info: str | None = None
    elapsed: float = 0.0
    verdict: Verdict = ALLOW


EventListener = Callable[[DetectorEvent], None]
"""Called with every event a detector decides (see ``LoopDetector(listener=...)``)."""


@dataclass(frozen=True, slots=True)
class CallInfo:
    """A tool call as :meth:`LoopDetector.snapshot` shows it: no arguments, no output."""

    tool: str
    digest: str
    outcome: OutcomeKind


@dataclass(frozen=True, slots=True)
class DetectorSnapshot:
    """Counters of one run, safe to print or log."""

    turns: int
    calls: int
    elapsed_s: float
    tripped: Signal | None
    warned: tuple[Signal, ...]
    recent: tuple[CallInfo, ...] = field(default=())


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

    def __init__(
        self,
        config: LoopGuardConfig | None = None,
        *,
        clock: Clock | None = None,
        listener: EventListener | None = None,
    ):
        self._config = config if config is not None else LoopGuardConfig()
        self._clock: Clock = clock if clock is not None else time.monotonic
        self._listener = listener
        self._limits = limits_of(self._config)
        self._view = RunView(self._limits)
        self._apply(self._config)
        self._clear()

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
        self._config = config
        self._apply(config)
        if config.mode == "off" or was_off:
            self.reset()
        elif config.mode != "on":
            self.release()

    def _apply(self, config: LoopGuardConfig) -> None:
        self._limits = limits_of(config)
        self._view.resize(self._limits)
        # what every event reads of the configuration, read once
        self._off = config.mode == "off"
        self._aware = config.progress_aware
        self._ignore = frozenset(config.ignore_tools)
        self._max_turns = config.max_turns
        self._timeout_ms = config.turn_timeout_ms

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
        return self._tripped

    def reset(self) -> Verdict:
        """Clear the run's counters, history, warnings and tripped flag."""
        self._clear()
        if self._listener is not None and self._config.mode != "off":
            self._listener(DetectorEvent(kind="reset", elapsed=0.0))
        return ALLOW

    def _clear(self) -> None:
        self._elapsed: float | None = None  # the clock reading of the event being decided
        self._view.clear()
        self._started = self._clock()
        self._warned: frozenset[Signal] = _NO_SIGNALS  # the soft signals that warned
        # digests of the loops reported in observe mode, oldest first (none: no array yet)
        self._reported: array[int] | tuple[()] = ()
        self._tripped: Verdict | None = None

    def release(self) -> None:
        """Lift the trip and keep the history: the same repeat is detected again at once."""
        if self._tripped is None:
            return
        self._tripped = None
        if self._listener is not None:
            self._emit("release", ALLOW)

    def snapshot(self, recent: int = 10) -> DetectorSnapshot:
        """Counters and the last ``recent`` calls (tool name, short digest, outcome kind)."""
        view = self._view
        calls = list(view.calls)[-recent:] if recent > 0 else []
        return DetectorSnapshot(
            turns=view.turns,
            calls=view.seen,
            elapsed_s=max(0.0, self._clock() - self._started),
            tripped=self._tripped.signal if self._tripped else None,
            warned=tuple(s for s in Signal if s in self._warned),
            recent=tuple(CallInfo(c.name, key_text(c.sig)[:8], c.kind) for c in calls),
        )

    def export_state(self) -> dict[str, Any]:
        """The run's state as JSON data: tool names, digests and counters, never content."""
        return {
            "v": _STATE_VERSION,
            **self._view.export_state(),
            "elapsed": max(0.0, self._clock() - self._started),
            "warned": sorted(signal.value for signal in self._warned),
            "reported": list(self._reported),
            "tripped": _verdict_state(self._tripped),
        }

    def restore_state(self, state: Mapping[str, Any]) -> bool:
        """Continue from :meth:`export_state` output (another process's, say).

        Returns whether the state was taken. A state of another version, a malformed one, or
        any state in ``"off"`` mode starts the run afresh instead: losing a loop's beginning is
        better than failing the agent. Nothing is half restored.
        """
        self._clear()
        if self._config.mode == "off" or not isinstance(state, Mapping):
            return False
        try:
            if state.get("v") != _STATE_VERSION:
                return False
            elapsed = state["elapsed"]
            if type(elapsed) not in (int, float) or not 0 <= elapsed < math.inf:
                raise ValueError(elapsed)
            warned = frozenset(Signal(s) for s in items_of(state["warned"]))
            reported = array("Q", map(_report_from_state, items_of(state["reported"])))
            del reported[:-_MAX_REPORTED]
            tripped = _verdict_from_state(state["tripped"])
            self._view.restore_state(state)
        except StateError:
            self._view.clear()
            return False
        self._started = self._clock() - elapsed
        self._warned, self._reported = warned, reported
        self._tripped = tripped if self._config.mode == "on" else None
        return True

    # --- events --------------------------------------------------------------------------------

    def turn_start(self) -> Verdict:
        """A model call begins. A tripped run is aborted before the call is paid for."""
        if self._off:
            return ALLOW
        verdict = self._turn_start()
        if self._listener is not None:
            self._emit("turn_start", verdict)
        return verdict

    def tool_call(self, name: str, args: object = None, call_id: str | None = None) -> Verdict:
        """A tool call is about to run; ``"block"`` means it must not."""
        if self._off:
            return ALLOW
        listener = self._listener
        # an ignored call is not kept: its signature is only needed for a listener
        if listener is None and name in self._ignore:
            return self._tool_call(name, "", call_id)
        sig = call_signature(name, args)
        # a blocked call gets no result: the words of its arguments are not needed
        tokens = arg_tokens(args, name) if self._tripped is None else None
        verdict = self._tool_call(name, int(sig, 16), call_id, tokens)
        if listener is not None:
            self._emit("tool_call", verdict, tool=name, digest=sig, call_id=call_id)
        return verdict

    def tool_result(
        self,
        name: str,
        output: object = None,
        *,
        error: object = None,
        call_id: str | None = None,
    ) -> Verdict:
        """A tool call returned ``output``, or failed with ``error`` (an exception or text).

        The result belongs to the call with the same ``call_id``; without one (or with an id
        never seen) to the oldest pending call of that tool. A second result for a call, or a
        result for a call the guard blocked, is no tool outcome and is disregarded.
        """
        if self._off:
            return ALLOW
        listener = self._listener
        if listener is None and name in self._ignore:
            return self._soft()
        failed = error is not None
        call = self._find(name, call_id)
        key, near, info = result_digests(output, error, name, None if call is None else call.tokens)
        verdict = self._tool_result(call, name, int(key, 16), failed, call_id, near=near, info=info)
        if listener is not None:
            self._emit(
                "tool_result",
                verdict,
                tool=name,
                digest=key,
                call_id=call_id,
                error=failed,
                near=near,
                info=info,
            )
        return verdict

    def assistant_message(
        self,
        text: str,
        tool_calls: Iterable[tuple[str, object]] = (),
        *,
        in_context: bool = True,
    ) -> Verdict:
        """The model answered with ``text`` (and asked for ``tool_calls``).

        Empty text is skipped. With progress awareness a message that calls tools is left to
        the tool-call signals: it neither counts nor breaks the streak.

        ``in_context`` says whether the model's input held the run's previous response (an
        agent reading its own history). A helper model (a grader, a router) that answers the
        same to new inputs passes ``False``: its answer starts a new streak instead of
        repeating the last one (SPEC §11 N2).
        """
        if self._off:
            return ALLOW
        kind = type(tool_calls)
        if kind is list or kind is tuple or isinstance(tool_calls, Sized):
            count = len(tool_calls)  # type: ignore[arg-type]
        else:
            count = sum(1 for _ in tool_calls)
        if self._listener is None:
            # a message that calls tools is left to the tool-call signals: no key needed
            if self._aware and count:
                return self._assistant_message(None, None, count, in_context)
            key = assistant_key(text)
            sketch = reply_sketch(text) if key is not None and self._limits.reply_cycle else None
            return self._assistant_message(key, sketch, count, in_context)
        key = assistant_key(text)
        sketch = reply_sketch(text) if key is not None else None
        verdict = self._assistant_message(key, sketch, count, in_context)
        self._emit(
            "assistant_message",
            verdict,
            digest=key,
            near=sketch,
            calls=count,
            in_context=in_context,
        )
        return verdict

    def user_message(self) -> Verdict:
        """A new human message in the same run (``scope="thread"``): the user moved it on.

        It lifts a trip (the user saw the stop and answered), and the successful calls before
        it no longer count as repeats of the calls after it (asking for the same thing in a
        new turn is no loop, SPEC §11 N3). Failures still do: the same failing call after
        every new message is a loop (R7), and so are the error and response streaks.
        """
        if self._off:
            return ALLOW
        verdict = self._user_message()
        if self._listener is not None:
            self._emit("user_message", verdict)
        return verdict

    def tick(self) -> Verdict:
        """A clock tick: only the elapsed-time warning can fire."""
        if self._off:
            return ALLOW
        verdict = self._soft()
        if self._listener is not None:
            self._emit("tick", verdict)
        return verdict

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
        kind = event.kind
        if kind == "reset":
            return self.reset()
        if kind == "release":
            self.release()
            return ALLOW
        if kind == "user_message":
            return self.user_message()
        tool, value = event.tool, event.digest
        if kind in ("tool_call", "tool_result") and (tool is None or value is None):
            msg = f"a {kind} event needs its tool and digest"
            raise ValueError(msg)
        if kind == "turn_start":
            verdict = self._turn_start()
        elif kind == "tool_call":
            verdict = self._tool_call(tool or "", key_of(value or ""), event.call_id)
        elif kind == "tool_result":
            name, call_id = tool or "", event.call_id
            verdict = self._tool_result(
                self._find(name, call_id),
                name,
                key_of(value or ""),
                event.error,
                call_id,
                near=event.near,
                info=event.info,
            )
        elif kind == "assistant_message":
            verdict = self._assistant_message(value, event.near, event.calls, event.in_context)
        else:
            verdict = self._soft()
        if self._listener is not None:
            self._emit(
                kind,
                verdict,
                tool=tool,
                digest=value,
                call_id=event.call_id,
                error=event.error,
                calls=event.calls,
                in_context=event.in_context,
                near=event.near,
                info=event.info,
            )
        return verdict

    def _emit(self, kind: EventKind, verdict: Verdict, **fields: Any) -> None:
        """Tell the listener about an event, with the clock reading its decision used."""
        assert self._listener is not None  # callers check, to keep the hot path lean
        elapsed = self._elapsed
        if elapsed is None:  # the decision did not read the clock
            elapsed = self._clock() - self._started
        self._elapsed = None
        self._listener(DetectorEvent(kind=kind, elapsed=elapsed, verdict=verdict, **fields))

    # --- event decisions (digests in) -------------------------------------------------------

    def _turn_start(self) -> Verdict:
        if self._tripped is not None:
            return self._still_tripped(self._tripped, "abort")
        view = self._view
        view.start_turn()
        facts = (QUIET if view.quiet_grew else 0) | (FAILING if view.failing_grew else 0)
        for check in TURN_CHECKS[facts]:
            found = check(view)
            if found is not None:
                return self._report(found, "abort")
        return self._soft()

    def _user_message(self) -> Verdict:
        self._tripped = None
        self._view.user_message()
        return self._soft()

    def _tool_call(
        self, name: str, sig: Key, call_id: str | None, tokens: frozenset[int] | None = None
    ) -> Verdict:
        ignored = name in self._ignore
        view = self._view
        if self._tripped is not None:
            if not ignored:
                call = Call(name, sig, call_id)
                call.kind = "blocked"
                view.add_call(call)
            return self._still_tripped(self._tripped, "block", tool=name)
        if ignored:
            return self._soft()
        call = Call(name, sig, call_id, tokens)
        checks = CALL_CHECKS if view.add_call(call) else NEW_CALL_CHECKS
        seq, sigs = view.calls, view.sigs  # read, never changed, by the rules
        for check in checks:
            found = check(view, seq, sigs)
            if found is not None:
                call.changed = False  # decided on the call: its result is not judged again
                verdict = self._report(found, "block")
                if verdict.action == "block":
                    call.kind = "blocked"
                    call.tokens = None
                return verdict
        return self._soft()

    def _tool_result(
        self,
        call: Call | None,
        name: str,
        outcome: Key,
        failed: bool,
        call_id: str | None,
        *,
        near: str | None,
        info: str | None,
    ) -> Verdict:
        """A result of ``name``; ``call`` is the call it belongs to (:meth:`_find`)."""
        if name in self._ignore:
            return self._soft()
        view = self._view
        facts = 0
        if call is not None:
            if call.kind != "pending":
                return self._soft()  # a second result, or the result of a blocked call
            call.outcome, call.kind = outcome, "error" if failed else "ok"
            # a result that echoes nothing says what its outcome is: kept once, as the outcome
            call.near, call.tokens = near, None
            call.info = "=" if info is not None and info[:1] == "=" else info
            facts = (CHANGED if call.changed else 0) | (FAILED if failed else 0)
        elif failed:
            call = Call(name, "", call_id)  # a result nobody asked for still fails
            call.outcome, call.kind = outcome, "error"
            facts = FAILED
        view.add_result(call, name, failed)
        if self._tripped is None:
            facts |= (QUIET if view.quiet_grew else 0) | (FAILING if view.failing_grew else 0)
            for check in RESULT_CHECKS[facts]:
                found = check(view, call, name)
                if found is not None:
                    return self._report(found, "abort")
        return self._soft()

    def _assistant_message(
        self, key: str | None, sketch: str | None, calls: int, in_context: bool
    ) -> Verdict:
        view = self._view
        view.add_answer(calls=calls, in_context=in_context)
        reply = key is not None and not (self._aware and calls)
        if reply:
            view.add_reply(key or "", sketch, in_context=in_context)
        if self._tripped is None:
            facts = (REPLY if reply else 0) | (FAILING if view.failing_grew else 0)
            # a streak of replies is reported on the reply that makes it (REPLY)
            for check in ANSWER_CHECKS[facts | (QUIET if view.quiet_grew else 0)]:
                found = check(view)
                if found is not None:
                    return self._report(found, "abort")
        return self._soft()

    # --- history -------------------------------------------------------------------------------

    def _find(self, name: str, call_id: str | None) -> Call | None:
        """The call a result of ``name`` belongs to: the newest with its id, or else the
        oldest pending call of that tool (with an unknown id, only a call without an id can
        be the one: a call that has an id waits for its own)."""
        calls = self._view.calls
        if call_id is not None:
            for call in reversed(calls):
                if call.call_id == call_id:
                    return call
        for call in calls:
            if (
                call.kind == "pending"
                and call.name == name
                and (call.call_id is None or call_id is None)
            ):
                return call
        return None

    # --- verdicts ------------------------------------------------------------------------------

    def _report(self, found: Detection, action: Literal["block", "abort"]) -> Verdict:
        """The mode's verdict on a hard detection: a stop, or an observation reported once."""
        tr = translator(self._config.locale)
        if self._config.mode == "observe":
            seen = _report_digest(found.signal, found.key)
            if seen in self._reported:
                return self._soft()
            reported = self._reported
            if not isinstance(reported, array):
                reported = self._reported = array("Q")
            elif len(reported) >= _MAX_REPORTED:
                del reported[0]
            reported.append(seen)
            frame = tr.gettext("Loop detected (observe mode, the run goes on): {reason}")
            return self._verdict("observe", found, frame)
        self._tripped = self._verdict(
            action, found, tr.gettext("Loop guard stopped the run: {reason}")
        )
        return self._tripped

    def _still_tripped(self, tripped: Verdict, action: Action, tool: str | None = None) -> Verdict:
        """The verdict on a tool or model call of a run that ``tripped`` already stopped."""
        tr = translator(self._config.locale)
        message = tr.gettext(
            "Loop guard: this run was already stopped ({signal}); "
            "no further tool or model calls are allowed."
        )
        return dataclasses.replace(
            tripped,
            action=action,
            tool=tool if tool is not None else tripped.tool,
            message=message.format(signal=tripped.signal),
            tripped=True,
        )

    def _soft(self) -> Verdict:
        """The soft signals, checked on every event: each warns once per run, never stops.

        A tripped run is over: it gets no more warnings.
        """
        if self._tripped is not None:
            return ALLOW
        turns = self._view.turns
        if turns > self._max_turns and Signal.TURN_COUNT not in self._warned:
            self._warned |= {Signal.TURN_COUNT}
            found = Detection(Signal.TURN_COUNT, None, (), turns, self._max_turns, None)
            return self._verdict("warn", found)
        elapsed = self._elapsed = self._clock() - self._started
        if elapsed * 1000 > self._timeout_ms and Signal.ELAPSED_TIME not in self._warned:
            self._warned |= {Signal.ELAPSED_TIME}
            found = Detection(
                Signal.ELAPSED_TIME, None, (), int(elapsed), self._timeout_ms // 1000, None
            )
            return self._verdict("warn", found)
        return ALLOW

    def _verdict(self, action: Action, found: Detection, frame: str = "{reason}") -> Verdict:
        """The verdict on ``found``; its message is ``frame`` around the signal's reason."""
        text = reason(
            found.signal,
            locale=self._config.locale,
            tool=found.tool,
            tools=found.tools,
            count=found.count,
            threshold=found.threshold,
            window=self._config.frequency_window_size,
        )
        return Verdict(
            action=action,
            signal=found.signal,
            message=frame.format(reason=text),
            tool=found.tool,
            tools=found.tools,
            count=found.count,
            threshold=found.threshold,
            key=found.key,
        )


def reason(
    signal: Signal,
    *,
    locale: str | None = None,
    tool: str | None = None,
    tools: tuple[str, ...] = (),
    count: int = 0,
    threshold: int = 0,
    window: int = 0,
) -> str:
    """The localized, user-facing reason of ``signal``: tool names and counts, no content."""
    tr = translator(locale)
    if signal is Signal.REPEATED_TOOL_CALL:
        text = tr.gettext(
            "`{tool}` was called {count} times in a row with the same arguments "
            "(limit {threshold})."
        )
    elif signal is Signal.TOOL_CYCLE:
        text = tr.gettext(
            "the tool calls {cycle} repeated as a cycle {count} times (limit {threshold})."
        )
    elif signal is Signal.TOOL_FREQUENCY:
        text = tr.gettext(
            "`{tool}` was called with the same arguments {count} times in the last {window} "
            "tool calls (limit {threshold})."
        )
    elif signal is Signal.NO_PROGRESS:
        text = tr.gettext(
            "the last {count} tool calls ({cycle}) only repeated earlier calls with the same "
            "results (limit {threshold})."
        )
    elif signal is Signal.REPEATED_SEQUENCE:
        text = tr.gettext(
            "the tool calls {cycle} repeated as a sequence {count} times with the same results "
            "(limit {threshold})."
        )
    elif signal is Signal.NEAR_REPEAT:
        text = tr.gettext(
            "`{tool}` was called {count} times with the same arguments and nearly the same "
            "result (limit {threshold}). If it is meant to repeat, raise its limit with "
            "`tool_threshold_overrides` or list it in `ignore_tools`."
        )
    elif signal is Signal.NO_NEW_INFO:
        text = tr.gettext(
            "the last {count} model turns called tools ({cycle}) that brought nothing new: "
            "failures, empty results, searches that found nothing (limit {threshold})."
        )
    elif signal is Signal.FAILING_TURNS:
        text = tr.gettext(
            "no tool call succeeded in {count} model turns in a row (limit {threshold})."
        )
    elif signal is Signal.REPEATED_TOOL_ERROR:
        text = tr.gettext(
            "`{tool}` failed with the same error {count} times within {window} tool calls "
            "(limit {threshold})."
        )
    elif signal is Signal.REPEATED_ASSISTANT_RESPONSE:
        text = tr.gettext(
            "the assistant gave the same response {count} times in a row (limit {threshold})."
        )
    elif signal is Signal.REPLY_CYCLE:
        text = tr.gettext(
            "the assistant's replies went round {count} times, nearly the same each time "
            "(limit {threshold})."
        )
    elif signal is Signal.TURN_COUNT:
        text = tr.gettext(
            "Loop guard warning: the run has made {count} model calls (more than {threshold})."
        )
    else:
        text = tr.gettext(
            "Loop guard warning: the run has been going for {count} s (more than {threshold} s)."
        )
    cycle = " → ".join(f"`{name}`" for name in tools)
    return text.format(tool=tool, cycle=cycle, count=count, threshold=threshold, window=window)


# --- exported state --------------------------------------------------------------------------

_ACTIONS = frozenset(get_args(Action))


def _report_digest(signal: Signal, key: str | None) -> int:
    """A loop as observe mode remembers it: 64 bits, the same in every process."""
    parts = (signal.value,) if key is None else (signal.value, key)
    return int(digest("reported", *parts), 16)


def _report_from_state(item: object) -> int:
    if type(item) is not int or not 0 <= item < 1 << _REPORT_BITS:
        raise ValueError(item)
    return item


def _verdict_state(verdict: Verdict | None) -> list[Any] | None:
    if verdict is None:
        return None
    return [
        verdict.action,
        verdict.signal.value if verdict.signal is not None else None,
        verdict.tool,
        list(verdict.tools),
        verdict.count,
        verdict.threshold,
        verdict.key,
        verdict.message,
    ]


def _verdict_from_state(state: object) -> Verdict | None:
    if state is None:
        return None
    action, signal, tool, tools, count, threshold, key, message = items_of(state)
    if action not in _ACTIONS:
        raise ValueError(action)
    return Verdict(
        action=action,
        signal=Signal(signal),
        tool=optional_text_of(tool),
        tools=tuple(text_of(t) for t in items_of(tools)),
        count=count_of(count),
        threshold=count_of(threshold),
        key=optional_text_of(key),
        message=text_of(message),
    )
