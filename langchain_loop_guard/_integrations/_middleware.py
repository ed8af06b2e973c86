"""``LoopGuardMiddleware``: the loop guard for ``langchain.agents.create_agent``."""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from langchain_loop_guard._core._messages import hint
from langchain_loop_guard._integrations._engine import bounded_put
from langchain_loop_guard._integrations._graph_guard import GraphGuard, _thread_id, graph_config
from langchain_loop_guard._integrations._graph_pass import last_ai
from langchain_loop_guard._integrations._graph_state import STATE_KEY, STOP_KEY, GuardData, Update
from langchain_loop_guard._integrations._guard_messages import guard_kind, is_human_input
from langchain_loop_guard._integrations._hint import hinted_system
from langchain_loop_guard._integrations._outcomes import holds_answer
from langchain_loop_guard._integrations._repair import repair_update
from langchain_loop_guard._integrations._runtime import ConfigInput
from langchain_loop_guard._integrations._stop import (
    RESUME_SCHEMA,
    LoopDetected,
    LoopGuardStop,
    OnStop,
)

__all__ = ["LoopGuardAgentState", "LoopGuardMiddleware"]

_MAX_NOTED = 256  # model answers whose context flag the pass after the model reads


class LoopGuardAgentState(AgentState[Any]):
    """The agent state with the guard's private key: ``PrivateStateAttr`` keeps it out of the
    agent's input and output schemas, and the checkpointer still saves it. No reducer: only the
    guard writes it, once per step."""

    loop_guard: NotRequired[Annotated[GuardData, PrivateStateAttr]]
    loop_guard_stop: NotRequired[LoopGuardStop | None]
    """How the run was stopped (``None`` before a stop and once the next run starts); in the
    agent's output, unlike ``loop_guard``."""


class LoopGuardMiddleware(GraphGuard, AgentMiddleware[LoopGuardAgentState, Any, Any]):
    """Stop runaway tool-calling loops in a ``create_agent`` agent::

        from langchain.agents import create_agent
        from langchain_loop_guard import LoopGuardMiddleware

        agent = create_agent(model, tools, middleware=[LoopGuardMiddleware(nudges=1)])

    Everything is decided in ``wrap_model_call``, inside the model's own graph step (no node
    of its own per model call): before the model is paid for, the tool results and the turn
    (and, at a run's start, the calls an earlier run left open are answered); then the
    model's answer, with every call in it (unknown tools and malformed arguments too), before
    any tool runs. A refused call is answered in the same step with an error ``ToolMessage``,
    which the model-to-tools edge treats as answered. Nothing is decided in
    ``wrap_tool_call``: each call is its own parallel task there, so decisions could be
    neither ordered nor saved once. Its one node, ``after_agent`` (once per run), raises the
    stop of ``on_stop="raise"`` once its answers are saved. An interrupt about an answer is
    asked at the next model call, before that model is paid for (a resumed node runs again).

    Its place in ``middleware=[...]`` does not matter: it reads every answer in the model's
    step, before any app's after-model hook can send the run back to the model. Such a hook
    runs after the guard has decided; one that answers a call the guard refused (as
    ``ToolCallLimitMiddleware`` does, without looking) has its second answer removed at the
    next model call or when the run ends, so the model never reads two answers to one call.

    The detector's state is kept in the agent state under the private key ``"loop_guard"``
    (digests and counters only), so any checkpointer saves it. A run starts with a human
    message and goes on across interrupts and resumes; ``scope="thread"`` keeps the history
    for the whole thread. Every stop leaves the thread valid for its next message
    (:data:`~langchain_loop_guard.OnStop`). Reports: ``docs/observability.md``.

    Args:
        config: as for :class:`~langchain_loop_guard.LoopGuardCallbackHandler`.
        nudges: hard detections that only refuse the call and tell the model (in the
            configured locale) what it repeated, before one stops the run; ``None`` takes
            ``config.nudges``. The same repeat right after a nudge is detected again at once.
        on_stop: ``"raise"`` (default), ``"end"`` or ``"interrupt"``: see
            :data:`~langchain_loop_guard.OnStop`.
        clock: returns seconds (:func:`time.time` by default for time between steps, the
            detector's :func:`time.monotonic` within one).
        record_to: as for :class:`~langchain_loop_guard.LoopGuardCallbackHandler`; a
            thread's events are recorded under its ``thread_id``.
        **settings: any :class:`~langchain_loop_guard.LoopGuardConfig` key, as for
            :class:`~langchain_loop_guard.LoopGuardCallbackHandler`
            (``LoopGuardMiddleware(on_stop="end", tool_threshold_overrides={"search": 5})``).

    Raises:
        LoopGuardConfigError: a bad ``config``, ``nudges``, ``on_stop``, ``clock`` or
            setting, naming the parameter or key.
    """

    state_schema = LoopGuardAgentState
    _integration = "middleware"

    def __init__(
        self,
        config: ConfigInput = None,
        *,
        nudges: int | None = None,
        on_stop: OnStop = "raise",
        clock: Callable[[], float] | None = None,
        record_to: str | os.PathLike[str] | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(
            config,
            nudges=nudges,
            on_stop=on_stop,
            clock=clock,
            record_to=record_to,
            settings=settings,
        )
        # Whether the request held the previous answer, by answer id (SPEC §11 N2), bounded.
        self._seen_previous: dict[str, bool] = {}
        self._hint_message: SystemMessage | None = None
        # The run each thread's stop ended, with its stop message, bounded (``_ended_before``).
        self._ended: dict[str, tuple[object, BaseMessage]] = {}

    @property
    def name(self) -> str:
        """The middleware's name in the agent graph (its hooks' node names start with it)."""
        return type(self).__name__

    # --- hooks ----------------------------------------------------------------------------------

    def after_agent(
        self, state: LoopGuardAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Raise the stop of ``on_stop="raise"`` now that its answers are saved (the model step
        answered them and ended the run; raising there would have discarded them with the
        step); else drop a second answer an app's after-model hook gave a call the guard had
        answered (:func:`_second_answers`). The guard's only graph node, once per run:
        everything else is decided in :meth:`wrap_model_call`, inside the model's own step."""
        halt = self._pending_halt(state["messages"], state.get(STATE_KEY))
        if halt is not None:
            raise halt
        if self.mode == "off":
            return None
        removed = _second_answers(state["messages"])
        return {"messages": removed} if removed else None

    async def aafter_agent(
        self, state: LoopGuardAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`after_agent`, for async runs."""
        return self.after_agent(state, runtime)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Decide the model call: repair the calls an earlier run left open, feed the tool
        results and the turn's start, call the model with the anti-loop hint, then decide its
        answer and each of its calls (refuse, nudge or stop) before any tool runs. A stop
        decided before the model call raises (or interrupts) without calling it."""
        turn = self._begin(request)
        if turn.done is not None:
            return turn.done
        response = handler(turn.request)
        return self._finish(request, turn, response)

    def awrap_model_call(  # a plain method returning a coroutine, on purpose (see below)
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Coroutine[Any, Any, ModelResponse[Any] | ExtendedModelResponse[Any]]:
        """:meth:`wrap_model_call`, for async runs.

        ``create_agent`` wraps every ``wrap_model_call`` hook in LangSmith's ``traceable``,
        whose wrapper of a coroutine function moves to a worker thread twice per call, even
        with tracing off: about 0.4 ms per model call, more than the guard's whole work (see
        ``benchmarks/``). As a plain method returning the coroutine, the hook gets the
        synchronous wrapper instead (about 0.05 ms). The price, with tracing on: this hook's
        own span closes when the coroutine is made, not when the model has answered (the
        model call keeps its span).
        """
        return self._awrap_model_call(request, handler)

    async def _awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        turn = self._begin(request)
        if turn.done is not None:
            return turn.done
        response = await handler(turn.request)
        return self._finish(request, turn, response)

    def _begin(self, request: ModelRequest[Any]) -> _Turn:
        """Everything before the model call: a held stop, a held interrupt, the repair of open
        calls, the pass before the model, and the request the model gets."""
        state = request.state
        if not state:  # a request built outside an agent run
            return _Turn(self._with_hint(request))
        messages: Sequence[AnyMessage] = state["messages"]
        stored = state.get(STATE_KEY)
        halt = self._pending_halt(messages, stored) or self._unraised_halt(stored)
        if halt is not None:  # held, and an app's hook sent the run back to the model
            raise halt
        ended = self._ended_before(request)
        if ended is not None:  # ended, and an app's hook sent the run back to the model
            again = ended.model_copy(update={"id": str(uuid.uuid4())})
            done = ModelResponse(result=[again])
            return _Turn(
                request,
                done=ExtendedModelResponse(
                    model_response=done, command=Command(update={"jump_to": "end"})
                ),
            )
        marker = None if self.mode == "off" else _pause_marker(messages, stored)
        if marker is not None:  # asked now, before any model is paid for (a resume reruns this)
            answer = interrupt(marker.get("payload"), response_schema=RESUME_SCHEMA)
            update = self._guard_pass(
                messages, marker.get("prior"), "after_model", pause=True, resume=answer
            )
            self._remember_end(request, update)
            return _Turn(request, done=_answer(ModelResponse(result=[]), update, ()))
        prefix: tuple[BaseMessage, ...] = ()
        if self.mode != "off":
            with self.failing_open("LoopGuardMiddleware.wrap_model_call"):
                prefix, messages = _repaired(messages, self.config.locale)
        update = self._pass_before_model(request, messages, stored)
        if update is not None and update.jump == "end":
            self._remember_end(request, update)
            done = ModelResponse(result=[*prefix, *update.messages])
            return _Turn(request, done=_with_state(done, update))
        model_messages = _without(request.messages, prefix) if prefix else request.messages
        if update is not None and update.messages:
            model_messages = [*model_messages, *cast(Any, update.messages)]
        if model_messages is not request.messages:
            request = request.override(messages=model_messages)
        return _Turn(self._with_hint(request), messages, update, prefix)

    def _finish(
        self, request: ModelRequest[Any], turn: _Turn, response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Decide the model's answer and its calls, in the model's step (no node of its own)."""
        before = turn.update
        if self.mode == "off" or not request.state:
            return _with_state(response, before)
        _name_answers(response)
        self._note_context(request, response, before)
        stored = request.state.get(STATE_KEY) if before is None else before.data
        seen = cast(
            list[AnyMessage],
            [*turn.messages, *(before.messages if before else ()), *response.result],
        )
        after = self._guard_pass(seen, stored, "after_model", pause=True)
        self._remember_end(request, after)
        return _answer(response, after, turn.prefix, before)

    def _ended_before(self, request: ModelRequest[Any]) -> BaseMessage | None:
        """The stop message of this very run (the same graph run, not the thread's next one),
        if the guard ended it and an app's after-model hook, which runs after the model's
        step, sent it back to the model."""
        control = getattr(request.runtime, "control", None)
        if control is None or not self._ended:
            return None
        with self._lock:
            ended = self._ended.get(_thread_id(graph_config()) or "-")
        if ended is None or ended[0] is not control:
            return None
        return ended[1]

    def _remember_end(self, request: ModelRequest[Any], update: Update | None) -> None:
        """Remember the run the guard just ended (see :meth:`_ended_before`)."""
        control = getattr(request.runtime, "control", None)
        if update is None or update.jump != "end" or update.halt is not None or control is None:
            return
        stop = next((m for m in reversed(update.messages) if guard_kind(m) == "stop"), None)
        if stop is not None:
            with self._lock:
                bounded_put(self._ended, _thread_id(graph_config()) or "-", (control, stop), 256)

    def _unraised_halt(self, stored: object) -> LoopDetected | None:
        """A stop this guard held in this run and never raised: the run did not end, as the
        stop asked, since an app's after-model hook sent it back to the model (and may have
        added a message after the stopped answer). Once raised, a stop is no longer held."""
        marker = stored.get("halt") if isinstance(stored, Mapping) else None
        if marker is None or not isinstance(marker, Mapping) or self.mode == "off":
            return None
        with self._lock:
            return self._halts.pop(str(marker.get("token")), None)

    def _pass_before_model(
        self, request: ModelRequest[Any], messages: Sequence[AnyMessage], stored: object
    ) -> Update | None:
        if self.mode != "off":  # which of the offered tools act, as they say (SPEC §14)
            with self.failing_open("LoopGuardMiddleware.wrap_model_call"):
                self._tool_kinds.learn(request.tools)
        if self._quiet_turn(messages, stored):
            return None  # the pass after the model call feeds this step's results
        return self._guard_pass(messages, stored, "before_model")

    def _note_context(
        self, request: ModelRequest[Any], response: ModelResponse[Any], update: Update | None
    ) -> None:
        """Remember, by answer id, whether the request held the run's previous answer (the
        one this call's pass read last, if it read one)."""
        if self.mode == "off" or not request.state:
            return
        with self.failing_open("LoopGuardMiddleware.wrap_model_call"):
            stored = request.state.get(STATE_KEY) if update is None else update.data
            processed = stored.get("ai") if isinstance(stored, Mapping) else None
            messages = request.messages
            held = holds_answer(messages, len(messages), processed)
            answers = [m.id for m in response.result if isinstance(m, AIMessage) and m.id]
            with self._lock:
                for answer_id in answers:
                    bounded_put(self._seen_previous, answer_id, held, _MAX_NOTED)

    def _in_context(
        self, messages: Sequence[AnyMessage], index: int, processed: str | None
    ) -> bool:
        """What the model's request held (:meth:`_note_context`), else what the state held."""
        answer_id = messages[index].id
        if answer_id is not None:
            with self._lock:
                held = self._seen_previous.get(answer_id)
            if held is not None:
                return held
        return super()._in_context(messages, index, processed)

    def _with_hint(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        config = self.config
        if config.mode == "off" or not config.prompt_hint:
            return request
        with self.failing_open("LoopGuardMiddleware.wrap_model_call"):
            system = self._hinted(request.system_message, hint(config.locale))
            if system is not request.system_message:
                return request.override(system_message=system)
        return request

    def _hinted(self, current: SystemMessage | None, text: str) -> SystemMessage:
        """``current`` with the hint, made for each call (SPEC §8: no copy of the user's prompt
        is kept); without one, the hint alone, reused while nobody changed it in place."""
        if current is not None:
            return hinted_system(current, text)
        made = self._hint_message
        if (
            made is not None
            and made.content is text
            and made.id is None
            and made.name is None
            and not made.additional_kwargs
            and not made.response_metadata
        ):
            return made
        made = self._hint_message = SystemMessage(content=text)
        return made


def _with_state(
    response: ModelResponse[Any], update: Update | None
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """The model node's result: the guard's messages before the model's, and its state."""
    if update is None:
        return response
    if update.messages and update.jump != "end":
        response = ModelResponse(
            result=[*update.messages, *response.result],
            structured_response=response.structured_response,
        )
    state: dict[str, Any] = {STATE_KEY: update.data, **update.stop_update()}
    if update.jump == "end":  # the model was not called: end the run (``after_agent`` raises)
        state["jump_to"] = "end"
    return ExtendedModelResponse(model_response=response, command=Command(update=state))


@dataclass(frozen=True, slots=True)
class _Turn:
    """What :meth:`LoopGuardMiddleware.wrap_model_call` decided before the model call."""

    request: ModelRequest[Any]
    """The request the model gets (the hint, the repaired history, a nudge)."""
    messages: Sequence[AnyMessage] = ()
    """The thread as the passes read it (repaired)."""
    update: Update | None = None
    """The pass before the model call."""
    prefix: tuple[BaseMessage, ...] = ()
    """The messages update that repairs the thread, before anything else of the step."""
    done: ModelResponse[Any] | ExtendedModelResponse[Any] | None = None
    """The step's result when the model is not called (a stop, a resumed interrupt)."""


def _pause_marker(messages: Sequence[AnyMessage], stored: object) -> Mapping[str, Any] | None:
    """The interrupt held for this model call (``on_stop="interrupt"`` on a model's answer,
    decided after the model was paid for), if the answer it is about is still the latest."""
    marker = stored.get("pause") if isinstance(stored, Mapping) else None
    if marker is None or not isinstance(marker, Mapping) or not messages:
        return None
    index = last_ai(messages, len(messages))
    if index < 0 or any(is_human_input(m) for m in messages[index + 1 :]):
        return None
    return marker if messages[index].id == marker.get("ai") else None


def _repaired(
    messages: Sequence[AnyMessage], locale: str | None
) -> tuple[tuple[BaseMessage, ...], Sequence[AnyMessage]]:
    """The ``messages`` update that drops second answers to the guard's answered calls
    (:func:`_second_answers`) and, at a run's start (a human message after the last model
    answer), answers the calls an earlier run left open; and the thread so repaired. Nothing
    and ``messages`` as they are when nothing needs it."""
    removed = _second_answers(messages)
    if removed:
        gone = {m.id for m in removed}
        messages = [m for m in messages if m.id not in gone]
    index = last_ai(messages, len(messages))
    update = None
    if any(is_human_input(m) for m in messages[index + 1 :]):
        update = repair_update(messages, locale)
    if update is None:
        return tuple(removed), messages
    if update and isinstance(update[0], RemoveMessage):
        return tuple(update), cast(Sequence[AnyMessage], update[1:])
    return (*removed, *update), [*messages, *cast(Sequence[AnyMessage], update)]


def _second_answers(messages: Sequence[BaseMessage]) -> list[RemoveMessage]:
    """Removals of the answers given, after the guard's own, to a call of the latest model
    answer with calls. The guard decides a model's answer inside the model's step, before any
    app's after-model hook runs; a hook that answers calls without looking for answers
    already there (``ToolCallLimitMiddleware`` does not look) can answer one a second time,
    which providers reject. The first answer (the guard's) is kept."""
    index = len(messages) - 1
    while index >= 0 and not _asks(messages[index]):
        index -= 1
    guard_answered: set[str] = set()
    removed: list[RemoveMessage] = []
    for message in messages[index + 1 :]:
        if not isinstance(message, ToolMessage):
            continue
        if message.tool_call_id in guard_answered and message.id is not None:
            removed.append(RemoveMessage(id=message.id))
        elif guard_kind(message) is not None:
            guard_answered.add(message.tool_call_id)
    return removed


def _asks(message: BaseMessage) -> bool:
    """Whether ``message`` is a model's answer with tool calls."""
    return isinstance(message, AIMessage) and bool(message.tool_calls)


def _without(messages: Sequence[AnyMessage], update: Sequence[BaseMessage]) -> list[AnyMessage]:
    """``messages`` after ``update`` (a repair from :func:`_repaired`), for the model's request
    (which another middleware may have trimmed: only its own messages are kept)."""
    if update and isinstance(update[0], RemoveMessage) and update[0].id == REMOVE_ALL_MESSAGES:
        return cast(list[AnyMessage], update[1:])
    gone = {m.id for m in update if isinstance(m, RemoveMessage)}
    added = [m for m in update if not isinstance(m, RemoveMessage)]
    return [*(m for m in messages if m.id not in gone), *cast(Sequence[AnyMessage], added)]


def _name_answers(response: ModelResponse[Any]) -> None:
    """Give the model's answers the id the graph would give them when it saves them: the
    guard's state names the answer it read by id."""
    for message in response.result:
        if isinstance(message, AIMessage) and message.id is None:
            message.id = str(uuid.uuid4())


def _answer(
    response: ModelResponse[Any],
    after: Update | None,
    prefix: tuple[BaseMessage, ...],
    before: Update | None = None,
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """The model step's result: the repair, the guard's messages before the model's, the
    model's answer, the guard's answers to its calls; and the guard's state."""
    if after is None and before is None and not prefix:
        return response
    result = [
        *prefix,
        *(before.messages if before is not None else ()),
        *response.result,
        *(after.messages if after is not None else ()),
    ]
    response = ModelResponse(result=result, structured_response=response.structured_response)
    last = after if after is not None else before
    if last is None:
        return response
    state: dict[str, Any] = {STATE_KEY: last.data}
    stop = next((u.stop for u in (after, before) if u is not None and u.stop is not None), None)
    if stop is not None:
        state[STOP_KEY] = stop
    elif any(u is not None and u.clear_stop for u in (after, before)):
        state[STOP_KEY] = None
    if after is not None and after.jump is not None:
        state["jump_to"] = after.jump
    return ExtendedModelResponse(model_response=response, command=Command(update=state))
