"""One pass of a graph guard, before or after the model: the messages since the last pass, read
into detector events, and a stopping verdict settled into a nudge or the pass's stop (what a stop
then does is :class:`~langchain_loop_guard._integrations._graph_guard.GraphGuard`'s)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage

from langchain_loop_guard._core._canonical import kept_call_id
from langchain_loop_guard._core._detector import Signal
from langchain_loop_guard._core._messages import not_executed, nudge
from langchain_loop_guard._core._public import safe_tool_name
from langchain_loop_guard._core._signature import error_shaped
from langchain_loop_guard._core._view import limits_of, successes_cannot_stop
from langchain_loop_guard._integrations._cost import ledger_of, message_usage
from langchain_loop_guard._integrations._graph_state import GuardData, fresh_state, new_run_id
from langchain_loop_guard._integrations._guard_messages import (
    MESSAGE_NAME,
    is_human_input,
    nudge_message,
    standalone_nudge,
    tool_answer,
)
from langchain_loop_guard._integrations._outcomes import tool_outcome
from langchain_loop_guard._integrations._stop import OnStop, stop_message

if TYPE_CHECKING:
    from langchain_loop_guard._core._config import LoopGuardConfig
    from langchain_loop_guard._core._detector import Verdict
    from langchain_loop_guard._integrations._engine import Run
    from langchain_loop_guard._integrations._publish import Site
    from langchain_loop_guard._integrations._runtime import DetectorCall

__all__ = ["GraphPass", "PassHost", "Position", "last_ai", "quiet_turn"]

Position = Literal["before_model", "after_model"]

_MAX_PENDING = 256  # tool calls awaiting their result, per thread
_UNKNOWN_TOOL = "unknown_tool"
_MALFORMED = "malformed tool call arguments"

_CallInfo = tuple[str, str, Any, bool]
"""``(tool_call_id, tool name, arguments, malformed)`` of a call a model answer makes."""


@dataclass(frozen=True, slots=True)
class PassHost:
    """What a pass asks of the guard it runs for (:class:`~._graph_guard.GraphGuard` makes one
    of its own methods): what a stop does, and how a verdict is reported."""

    on_stop: OnStop
    report: Callable[..., None]
    """``report(run_id, verdict, *, site, nudge)``: the guard's :meth:`GuardRuntime.report`."""
    reported_before: Callable[[tuple[object, ...]], bool]
    """Whether a stop was reported already (a resumed interrupt runs the pass again)."""
    site: Callable[[str | None], Site]
    """Where the verdict being reported happened."""
    in_context: Callable[[Sequence[AnyMessage], int, str | None], bool]
    """Whether the model saw the previous answer before ``messages[index]`` (SPEC §11 N2)."""
    tool_acts: Callable[[str], bool | None] = lambda _name: None
    """Whether a tool acts as its annotations said (``None``: unknown), by name (SPEC §14)."""


class GraphPass:
    """One pass's working state and decision, before the guard acts on a stop."""

    __slots__ = (
        "clear_stop",
        "config",
        "data",
        "ending",
        "history",
        "host",
        "jump",
        "messages",
        "now",
        "nudges",
        "position",
        "run",
        "site",
        "stop",
    )

    def __init__(
        self,
        host: PassHost,
        *,
        data: GuardData,
        run: Run,
        config: LoopGuardConfig,
        nudges: int,
        now: float,
    ) -> None:
        self.host = host
        self.data = data
        """The guard's state, as it will be saved."""
        self.run = run
        self.config = config
        self.nudges = nudges
        self.now = now
        self.position: Position | None = None
        self.messages: list[BaseMessage] = []
        """Messages to add: answers to refused calls, nudges."""
        self.jump: Literal["model", "end"] | None = None
        self.stop: Verdict | None = None
        self.ending: list[BaseMessage] = []
        """The messages that end the run, if the guard ends it: open calls' answers, the stop."""
        self.site: Site | None = None
        self.clear_stop = False
        self.history: Sequence[AnyMessage] = ()
        """The thread's messages the pass read (what a loop cost is counted from)."""

    @property
    def run_id(self) -> str:
        return self.run.key

    def read(self, messages: Sequence[AnyMessage], position: Position) -> bool:
        """Feed what is new since the last pass, and decide; ``False`` if nothing is new."""
        self.position = position
        self.history = messages
        self.data.pop("halt", None)  # raised already, or left behind by a newer step
        self.data.pop("pause", None)  # asked already, or left behind by a newer step
        target: AIMessage | None = None
        end = len(messages)
        if position == "after_model":
            end = last_ai(messages, len(messages))
            if end < 0:
                return False
            target = cast(AIMessage, messages[end])
            if target.id is not None and target.id == self.data.get("ai"):
                return False  # this answer was processed already
            if target.name == MESSAGE_NAME:
                return False  # the guard's own final message, in the model's place
        tail = _tail(messages, self.data.get("ai"), end)
        humans = [m for m in tail if is_human_input(m)]
        if humans:
            self._new_run(humans[-1].content)
        hard = self._feed_results(tail)
        if target is None:
            self._before_model(messages, hard)
        else:
            self._after_model(messages, end, hard)
        return True

    def _new_run(self, text: object) -> None:
        """A human message arrived (``text``: its content): a new run (``scope="run"``) or a
        released thread."""
        self.clear_stop = self.clear_stop or bool(self.data.pop("stopped", False))
        self.data["run"] = new_run_id()
        released = self.run.human_turn(text)
        if released is None:  # a new run: its state starts afresh
            scope = self.data.get("scope")
            self.data = fresh_state()
            if scope is not None:
                self.data["scope"] = scope
        else:
            self._reported(released)
            self.data["turn"] = False

    def _feed(self, event: DetectorCall, *args: Any, **kwargs: Any) -> Verdict:
        """Feed the run's detector and report its verdict, but a stop (:meth:`_settle` does)."""
        verdict = self.run.decide(event, *args, **kwargs)
        if verdict.tripped or not verdict.stops:
            self._reported(verdict)
        return verdict

    def _reported(self, verdict: Verdict, *, nudge: bool = False) -> None:
        """Report a verdict that is not ``"allow"``, at the pass's thread and run."""
        if verdict.action == "allow":
            return
        host = self.host
        # A resumed interrupt runs the pass again: its stop was reported when the thread paused.
        pauses = host.on_stop == "interrupt" and verdict.stops and not verdict.tripped
        seen = (self.run_id, self.data.get("ai"), verdict.key, verdict.count)
        if pauses and not nudge and host.reported_before(seen):
            return
        if self.site is None:
            site = host.site(self.position)
            if site.run_id is None:
                run = self.data.get("run")
                if not isinstance(run, str):
                    run = self.data["run"] = new_run_id()
                site = dataclasses.replace(site, run_id=run)
            self.site = site
        host.report(self.run_id, verdict, site=self.site, nudge=nudge)

    def _feed_results(self, tail: Sequence[AnyMessage]) -> Verdict | None:
        """Feed the results of the calls awaiting one; the first stopping verdict, if any."""
        pending = dict(self.data.get("pending", []))
        self.data["pending"] = []
        hard: Verdict | None = None
        for message in tail:
            if not isinstance(message, ToolMessage):
                continue
            name = pending.pop(kept_call_id(message.tool_call_id), None)
            if name is None:  # a huge id saved whole before ids were digested, or none
                name = pending.pop(message.tool_call_id, None)
            if name is None:
                continue
            outcome = tool_outcome(message)
            verdict = self._feed(
                "tool_result",
                name,
                outcome.output,
                error=outcome.error,
                call_id=message.tool_call_id,
            )
            if verdict.stops and hard is None:
                hard = verdict
        return hard

    def _before_model(self, messages: Sequence[AnyMessage], hard: Verdict | None) -> None:
        """The results are in and a turn begins; a stop here needs no call answered."""
        if hard is None and not self.data.get("turn"):
            verdict = self._feed("turn_start")
            self.data["turn"] = True
            hard = verdict if verdict.stops else None
        if hard is None:
            return
        index = last_ai(messages, len(messages))
        calls: list[_CallInfo] = []
        answered: set[str] = set()
        if index >= 0:
            calls = _calls_of(cast(AIMessage, messages[index]))
            answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
        if self._settle(hard, calls, answered):
            self.messages.append(standalone_nudge(hard, self.config.locale))

    def _after_model(
        self, messages: Sequence[AnyMessage], index: int, hard: Verdict | None
    ) -> None:
        """Feed the model's answer at ``messages[index]`` and its calls; refuse, nudge or stop."""
        answer = cast(AIMessage, messages[index])
        answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
        calls = _calls_of(answer)
        if not self.data.get("turn"):
            verdict = self._feed("turn_start")
            hard = hard or (verdict if verdict.stops else None)
        self.data["turn"] = False
        tool_calls = [(name, args) for _, name, args, _ in calls]
        in_context = self.host.in_context(messages, index, self.data.get("ai"))
        usage = message_usage(answer)
        tokens = None if usage is None else usage.total
        verdict = self._feed(
            "assistant_message", answer.text, tool_calls, in_context=in_context, tokens=tokens
        )
        hard = hard or (verdict if verdict.stops else None)
        self.data["ai"] = answer.id
        if hard is None:
            self._check_calls(calls, answered)
        elif self._settle(hard, calls, answered):
            # About the whole answer: its open calls carry the nudge (none runs or is fed), or,
            # for a final answer, the model gets one more turn to read it.
            text = nudge(hard.tool, hard.count, self.config.locale)
            open_calls = [c for c in calls if c[0] not in answered]
            self.messages += [tool_answer(c[0], c[1], text) for c in open_calls]
            if not open_calls:
                self.messages.append(standalone_nudge(hard, self.config.locale))
                self.jump = "model"
        ours = {getattr(m, "tool_call_id", None) for m in (*self.messages, *self.ending)}
        self.data["pending"] = [  # ids as the detector keeps them: a huge one as a digest
            [kept_call_id(call_id), name]
            for call_id, name, _, malformed in calls
            if not malformed and call_id not in ours
        ][-_MAX_PENDING:]

    def _check_calls(self, calls: list[_CallInfo], answered: set[str]) -> None:
        """Feed each tool call of the answer; refuse (nudge) or stop on a hard detection."""
        acts = self.host.tool_acts
        for call_id, name, args, malformed in calls:
            verdict = self._feed("tool_call", name, args, call_id=call_id, acts=acts(name))
            if malformed and not verdict.stops:  # it fails without reaching a tool
                verdict = self._feed("tool_result", name, error=_MALFORMED, call_id=call_id)
            if not verdict.stops:
                continue
            if not self._settle(verdict, calls, answered):
                return
            text = nudge(verdict.tool or name, verdict.count, self.config.locale)
            if call_id in answered:
                # Answered already (structured output): the nudge follows as its own message.
                self.messages.append(nudge_message(text))
            else:
                self.messages.append(tool_answer(call_id, name, text))

    def _settle(self, verdict: Verdict, calls: list[_CallInfo], answered: set[str]) -> bool:
        """Nudge on a stopping ``verdict`` (``True``: the caller writes the nudge), or make it
        the pass's stop, with the messages that end the run."""
        ignored = self.config.ignore_tools
        self.run.ledger = ledger_of(self.history, ignored, per_thread=self.run.per_thread)
        stop = self.run.settle(verdict, self.nudges)
        if stop is None:
            self.data["nudged"] = self.run.nudged
            self.data["last_nudge"] = cast(list[Any], self.run.last_nudge)
            self._reported(verdict, nudge=True)
            return True
        self.stop = stop
        if not verdict.tripped:  # a stopped run's verdict was reported when it was fed
            self._reported(stop)
        done = answered | {getattr(m, "tool_call_id", None) for m in self.messages}
        text = not_executed(self.config.locale)
        self.ending = [
            tool_answer(call_id, name, text, "not_executed")
            for call_id, name, _, _ in calls
            if call_id not in done
        ]
        self.ending.append(stop_message(stop))
        return False


def last_ai(messages: Sequence[AnyMessage], end: int) -> int:
    """The index of the last model answer before ``end`` (``-1`` if there is none)."""
    for index in range(end - 1, -1, -1):
        if isinstance(messages[index], AIMessage):
            return index
    return -1


def _tail(messages: Sequence[AnyMessage], cursor: str | None, end: int) -> Sequence[AnyMessage]:
    """The messages after the last processed model answer (else, in a first pass or a trimmed
    history, after the last model answer) up to ``end``, exclusive."""
    start = -1
    if cursor is not None:
        for index in range(end - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AIMessage) and message.id == cursor:
                start = index
                break
    if start < 0:
        start = last_ai(messages, end)
    return messages[start + 1 : end]


def _calls_of(message: AIMessage) -> list[_CallInfo]:
    """``(call_id, tool, args, malformed)`` of each call an answer makes, invalid ones too."""
    calls: list[_CallInfo] = []
    for index, call in enumerate(message.tool_calls):
        name = safe_tool_name(call["name"])  # what a model wrote: bounded, no control chars
        calls.append((call.get("id") or f"#{index}", name, call["args"], False))
    for index, bad in enumerate(message.invalid_tool_calls):
        call_id = bad.get("id") or f"#invalid{index}"
        name = safe_tool_name(bad.get("name") or _UNKNOWN_TOOL)
        calls.append((call_id, name, bad.get("args"), True))
    return calls


def quiet_turn(
    messages: Sequence[AnyMessage], stored: object, config: LoopGuardConfig, now: float
) -> bool:
    """Whether the pass before a model call can be left to the pass after it, which feeds the
    same events: only successful results and the turn, no error, trip or warning due. Anything
    unusual or unreadable answers ``False``."""
    if type(stored) is not dict and not isinstance(stored, Mapping):  # a dict: no ABC check
        return stored is None  # a thread's first turn: nothing to feed yet
    exported = stored.get("detector")
    if type(exported) is not dict and not isinstance(exported, Mapping):
        return exported is None
    if exported.get("tripped") is not None:
        return False
    turns, elapsed, at = exported.get("turns"), exported.get("elapsed"), stored.get("at")
    warned = exported.get("warned") or ()
    if type(turns) is not int or type(elapsed) is not float or type(at) is not float:
        return False
    if turns + 1 > config.max_turns and Signal.TURN_COUNT.value not in warned:
        return False
    gap = max(0.0, now - at)
    if (elapsed + gap) * 1000 > config.turn_timeout_ms and Signal.ELAPSED_TIME.value not in warned:
        return False
    if not successes_cannot_stop(exported, limits_of(config)):
        return False
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return True
        if isinstance(message, ToolMessage) and (
            message.status == "error"
            or (isinstance(message.content, str) and error_shaped(message.content))
        ):
            return False  # a failure, or an error returned as text (SPEC §13 R13)
    return True
