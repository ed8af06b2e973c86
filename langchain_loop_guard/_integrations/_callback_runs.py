"""The callback handler's runs: the engine's record, and the calls each run awaits.

Everything here is bounded. The tree that callbacks are placed in is :mod:`._run_tree`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_loop_guard._core._canonical import digest
from langchain_loop_guard._core._detector import ALLOW, DetectorEvent, Verdict
from langchain_loop_guard._core._signature import Outcome, assistant_key, outcome
from langchain_loop_guard._core._view import limits_of
from langchain_loop_guard._integrations._engine import Run, bounded_put
from langchain_loop_guard._integrations._guard_messages import MESSAGE_NAME
from langchain_loop_guard._integrations._model_answer import call_digests
from langchain_loop_guard._integrations._outcomes import previous_answer, tool_outcome

if TYPE_CHECKING:
    from langchain_loop_guard._integrations._model_answer import ModelAnswer, Named
    from langchain_loop_guard._integrations._run_ids import RunId

__all__ = ["CallbackRun"]

_MAX_ANNOUNCED = 64  # tool calls a model named that no tool has started yet, per run
_MAX_TOOLS = 256  # tool runs in flight, per run


@dataclass(slots=True, eq=False)
class CallbackRun(Run):
    """A run as the handler sees it: the engine's record, and the calls it awaits."""

    tools: dict[RunId, tuple[str, str | None, frozenset[int]]] = field(default_factory=dict)
    """Tool runs in flight: tool name, call id and argument tokens."""
    announced: dict[str, tuple[str, bool | None]] = field(default_factory=dict)
    """Calls the model named (by call id) that no tool has started yet: the tool's name and
    whether it said it acts (the arguments are not kept, SPEC §8: they are read again from
    the answer in the model's next input, should the call be answered without a tool)."""
    paused: dict[str, bool] = field(default_factory=dict)
    """Call ids whose tool was interrupted; its resumption is not a new call."""
    said: tuple[str | None, str] | None = None
    """The run's previous model answer: its message id, or (without one) its key."""
    in_context: dict[RunId, bool] = field(default_factory=dict)
    """Model runs in flight: whether the model's input held the run's previous answer."""

    def result(self, name: str, call_id: str | None, result: Outcome, *, failed: bool) -> Verdict:
        """Feed a tool's result, digested beforehand."""
        key, near, info, shaped = result
        fields = {"failed": failed or shaped, "near": near, "info": info}
        return self.decide("digested_result", name, key, call_id, **fields)

    def call(self, name: str, signature: str, call_id: str | None) -> Verdict:
        """Feed a tool call, digested beforehand."""
        return self.decide("digested_call", name, signature, call_id)

    def answer(self, answer: ModelAnswer, model_run: RunId) -> Verdict:
        """Feed a model's answer: it repeats the previous one only if the model's input held that
        one (SPEC §11 N2). An answer with several calls, one of which would stop the run, is
        stopped whole: refusing only that call's tool would not keep its parallel siblings from
        running."""
        key, calls, answer_id = answer.key, len(answer.names), answer.answer_id
        event = DetectorEvent(
            kind="assistant_message",
            digest=key,
            near=answer.sketch,
            calls=calls,
            in_context=self.in_context.pop(model_run, True),
            tokens=answer.tokens,
            talk=answer.talk,
        )
        verdict = self.decide("replay", event)
        self.said = (answer_id, "" if answer_id else key or "")  # the key: only without an id
        if verdict.stops or calls < 2 or not self._stops_any(named := answer.named()):
            return verdict
        for name, signature, call_id, _ in named:
            verdict = self.call(name, signature, call_id)
            if verdict.stops:
                break
        return verdict

    def _stops_any(self, named: Sequence[Named]) -> bool:
        """Whether one of an answer's calls, made in order, would stop the run (a dry run)."""
        probe = self.guard.new_detector(config=self.detector.config)
        if not probe.restore_state(self.detector.export_state()):
            return False
        decide = self.guard.decide
        return any(decide(probe, "digested_call", n, s, i).stops for n, s, i, _ in named)

    def restart(self) -> None:
        """Start afresh (``reset``), the calls awaited forgotten too."""
        Run.restart(self)
        self.announced.clear()
        self.paused.clear()

    def model_called(
        self, model_run: RunId, sent: Sequence[BaseMessage], *, below_tool: bool = False
    ) -> list[Verdict]:
        """A chat model was called with ``sent``, and a turn begins: calls the model named that
        never reached a tool are counted first, and (with ``scope="thread"``) a human message the
        thread's model has not seen yet releases a stopped thread; not a sub-agent's, inside a
        tool call (``below_tool``): its input is the tool's (SPEC §14 R20)."""
        human = self.per_thread and not below_tool
        released = self.human_message(*_latest_human(sent)) if human else None
        bounded_put(self.in_context, model_run, _holds(sent, self.said), _MAX_TOOLS)
        verdicts = ([] if released is None else [released]) + self.unexecuted_calls(sent)
        if not any(v.stops for v in verdicts):
            verdicts.append(self.decide("turn_start"))
        return verdicts

    def announce(self, answer: ModelAnswer) -> None:
        """Remember the calls an answer named, until a tool starts them."""
        for (name, call_id), hint in zip(answer.names, answer.hints, strict=True):
            if call_id:
                bounded_put(self.announced, call_id, (name, hint), _MAX_ANNOUNCED)

    def tool_started(
        self,
        tool_run: RunId,
        name: str,
        signature: str,
        call_id: str | None,
        tokens: frozenset[int],
    ) -> Verdict:
        """A tool starts: a new call, unless it resumes one an interrupt paused."""
        if (
            call_id is not None
            and self.paused.pop(call_id, False)
            and self.detector.tripped is None
        ):
            verdict = ALLOW  # a resumed call was counted when it first started
        else:
            verdict = self.call(name, signature, call_id)
        if not verdict.stops:
            bounded_put(self.tools, tool_run, (name, call_id, tokens), _MAX_TOOLS)
        return verdict

    def tool_ended(self, tool_run: RunId, digested: Outcome | None, *, failed: bool) -> Verdict:
        """A tool run ended with a result digested beforehand."""
        started = self.tools.pop(tool_run, None)
        if started is None or digested is None:
            return ALLOW
        return self.result(started[0], started[1], digested, failed=failed)

    def tool_paused(self, tool_run: RunId) -> None:
        """A tool run was interrupted: its resumption will not be a new call."""
        started = self.tools.pop(tool_run, None)
        if started is not None and started[1] is not None:
            bounded_put(self.paused, started[1], True, _MAX_ANNOUNCED)

    def unexecuted_calls(self, messages: Sequence[BaseMessage]) -> list[Verdict]:
        """Count the calls the model named that no tool started but the agent answered (an
        unknown tool's error message, say); calls nobody answered are not counted. Their
        arguments are read from the answer that named them, the last in ``messages``."""
        verdicts: list[Verdict] = []
        if not self.announced:
            return verdicts
        found: dict[str, ToolMessage] = {}
        named: dict[str | None, object] = {}
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                named = {call.get("id"): call.get("args") for call in message.tool_calls}
                break
            if isinstance(message, ToolMessage) and message.tool_call_id in self.announced:
                found[message.tool_call_id] = message
        limits = limits_of(self.detector.config)
        for call_id, answer in reversed(found.items()):
            announced = self.announced.pop(call_id, None)
            if announced is None:
                continue  # a tool started it meanwhile
            name, hint = announced
            signature, tokens = call_digests(name, named.get(call_id), limits.acts(name, hint))
            verdict = self.call(name, signature, call_id)
            verdicts.append(verdict)
            if verdict.stops:
                break
            fed = tool_outcome(answer)
            volatile = limits.volatile_of(name)
            digested = outcome(
                fed.output, error=fed.error, tool=name, tokens=tokens, volatile=volatile
            )
            verdict = self.result(name, call_id, digested, failed=fed.error is not None)
            verdicts.append(verdict)
            if verdict.stops:
                break
        return verdicts


def _latest_human(messages: Sequence[BaseMessage]) -> tuple[object, object]:
    """The last human message of ``messages`` (not the guard's own): its id, or its position
    and a digest of its text; and its content. ``(None, None)`` without one."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and message.name != MESSAGE_NAME:
            if message.id:
                return message.id, message.content
            return (index, digest("human", str(message.content))), message.content
    return None, None


def _holds(messages: Sequence[BaseMessage], said: tuple[str | None, str] | None) -> bool:
    """Whether the last model answer in ``messages`` is the run's previous one (``said``): by
    message id when it had one (a few-shot example with the same text is not it), by key."""
    if said is None:
        return False
    answer = previous_answer(messages)
    if answer is None:
        return False
    said_id, said_key = said
    if said_id is not None:
        return answer.id == said_id
    return (assistant_key(answer.text) or "") == said_key
