"""``LoopGuardMiddleware``: the loop guard for ``langchain.agents.create_agent``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    hook_config,
)
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from langchain_loop_guard._core._messages import hint
from langchain_loop_guard._integrations._engine import bounded_put
from langchain_loop_guard._integrations._graph_guard import GraphGuard
from langchain_loop_guard._integrations._graph_pass import missed_answer
from langchain_loop_guard._integrations._graph_state import STATE_KEY, GuardData, Update
from langchain_loop_guard._integrations._hint import hinted_system
from langchain_loop_guard._integrations._outcomes import holds_answer
from langchain_loop_guard._integrations._repair import repair_update
from langchain_loop_guard._integrations._runtime import ConfigInput
from langchain_loop_guard._integrations._stop import LoopGuardStop, OnStop

__all__ = ["LoopGuardAgentState", "LoopGuardMiddleware"]

_MAX_NOTED = 256  # model answers whose context flag waits for ``after_model``


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

    Each model answer, with every call in it (unknown tools and malformed arguments too), is
    decided in ``after_model`` before any tool runs; a refused call is answered there with an
    error ``ToolMessage``, as LangChain's ``ToolCallLimitMiddleware`` refuses calls, and one
    node orders parallel calls. ``wrap_model_call`` decides the tool results before the model
    is paid for, and adds the anti-loop hint. Nothing is decided in ``wrap_tool_call``: each
    call is its own parallel task there, so decisions could be neither ordered nor saved once,
    and LangGraph re-runs a tool task after an ``interrupt()``.

    Its place in ``middleware=[...]`` does not matter: ``create_agent`` runs the after-model
    hooks from the last middleware to the first, so an app's hook placed after the guard that
    jumps back to the model (``@after_model(can_jump_to=["model"])``) skips the guard's; the
    answer it hid is then read in ``wrap_model_call`` before the next model call is paid for.

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
        # Answers an after-model pass began to read, by id, bounded (SPEC §13 C3).
        self._read: dict[str, None] = {}
        self._hint_message: SystemMessage | None = None

    @property
    def name(self) -> str:
        """The middleware's name in the agent graph (its hooks' node names start with it)."""
        return type(self).__name__

    # --- hooks ----------------------------------------------------------------------------------

    def before_agent(
        self, state: LoopGuardAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Answer "not executed" the tool calls an earlier run left open (a stop by any guard, an
        interrupt answered with a new message, a crash, another middleware's error), which
        providers would reject, before the model runs."""
        if self.mode == "off":
            return None
        update: list[Any] | None = None
        with self.failing_open("LoopGuardMiddleware.before_agent"):
            update = repair_update(state["messages"], self.config.locale)
        return None if update is None else {"messages": update}

    async def abefore_agent(
        self, state: LoopGuardAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`before_agent`, for async runs."""
        return self.before_agent(state, runtime)

    def after_agent(self, state: LoopGuardAgentState, runtime: Runtime[Any]) -> None:
        """Raise the stop of ``on_stop="raise"`` now that its answers are saved (``after_model``
        answered them and ended the run; raising there would have discarded them with the step)."""
        halt = self._pending_halt(state["messages"], state.get(STATE_KEY))
        if halt is not None:
            raise halt

    async def aafter_agent(self, state: LoopGuardAgentState, runtime: Runtime[Any]) -> None:
        """:meth:`after_agent`, for async runs."""
        self.after_agent(state, runtime)

    @hook_config(can_jump_to=["end", "model"])
    def after_model(
        self, state: LoopGuardAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Feed the model's answer and its tool calls; refuse, nudge or stop (``"model"`` is a jump
        target only for a nudge about a repeated final answer, for the model to read it)."""
        messages = state["messages"]
        if self._halt_marker(messages, state.get(STATE_KEY)) is not None:
            return {"jump_to": "end"}  # a stop held before the model call: after_agent raises
        if messages and messages[-1].id is not None:
            with self._lock:
                bounded_put(self._read, messages[-1].id, None, _MAX_NOTED)
        return _as_state_update(
            self._guard_pass(state["messages"], state.get(STATE_KEY), "after_model")
        )

    @hook_config(can_jump_to=["end", "model"])
    async def aafter_model(
        self, state: LoopGuardAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`after_model`, for async runs."""
        return self.after_model(state, runtime)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Feed the tool results and the turn's start, then call the model with the anti-loop
        hint appended to its system message (once; unless the mode is ``"off"`` or
        ``prompt_hint=False``). A stop raises (or interrupts) before the model is called; with
        ``on_stop="end"`` the run's final message takes the model's place."""
        update = self._pass_before_model(request)
        if update is not None and update.jump == "end":
            return _with_state(ModelResponse(result=list(update.messages)), update)
        response = handler(self._model_request(request, update))
        self._note_context(request, response, update)
        return _with_state(response, update)

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
        update = self._pass_before_model(request)
        if update is not None and update.jump == "end":
            return _with_state(ModelResponse(result=list(update.messages)), update)
        response = await handler(self._model_request(request, update))
        self._note_context(request, response, update)
        return _with_state(response, update)

    def _pass_before_model(self, request: ModelRequest[Any]) -> Update | None:
        state = request.state
        if not state:  # a request built outside an agent run
            return None
        if self.mode != "off":  # which of the offered tools act, as they say (SPEC §14)
            with self.failing_open("LoopGuardMiddleware.wrap_model_call"):
                self._tool_kinds.learn(request.tools)
        messages, stored = state["messages"], state.get(STATE_KEY)
        halt = self._pending_halt(messages, stored)
        if halt is not None:  # held, and an app's hook sent the run back to the model
            raise halt
        try:
            missed = missed_answer(messages, stored, self._seen_previous, self._read)
        except Exception:  # noqa: BLE001 - the full pass decides, and fails open itself
            missed = -1
        if missed < 0 and self._quiet_turn(messages, stored):
            return None  # the pass after the model call feeds this step's results
        if missed >= 0 and self.mode != "off":
            return self._catch_up(messages, stored, missed)
        return self._guard_pass(messages, stored, "before_model")

    def _catch_up(
        self, messages: Sequence[AnyMessage], stored: object, index: int
    ) -> Update | None:
        """Read the answer at ``messages[index]`` that :meth:`after_model` never saw (an app's
        after-model hook placed after the guard jumped back to the model, SPEC §13 C3), then
        the rest as before any model call. A stop on it raises now (its answer is saved)."""
        first = self._guard_pass(messages[: index + 1], stored, "after_model")
        if first is None:
            return self._guard_pass(messages, stored, "before_model")
        if first.halt is not None:
            raise first.halt
        if first.jump == "end":
            return first
        second = self._guard_pass(messages, first.data, "before_model")
        if second is None:
            return dataclasses.replace(first, jump=None)
        return dataclasses.replace(
            second,
            messages=(*first.messages, *second.messages),
            clear_stop=first.clear_stop or second.clear_stop,
        )

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

    def _model_request(
        self, request: ModelRequest[Any], update: Update | None
    ) -> ModelRequest[Any]:
        """The request with the hint and, after a nudge, the nudge as the latest message."""
        request = self._with_hint(request)
        if update is not None and update.messages:
            request = request.override(messages=[*request.messages, *cast(Any, update.messages)])
        return request

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


def _as_state_update(update: Update | None) -> dict[str, Any] | None:
    if update is None:
        return None
    result: dict[str, Any] = {STATE_KEY: update.data, **update.stop_update()}
    if update.messages:
        result["messages"] = list(update.messages)
    if update.jump is not None:
        result["jump_to"] = update.jump
    return result
