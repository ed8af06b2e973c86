"""``LoopGuardCallbackHandler``: the loop guard as a LangChain callback handler.

A thin adapter: it resolves every callback to the top-level run (or the LangGraph thread) it
belongs to, translates the callback into an event of that run's
:class:`~langchain_loop_guard._detector.LoopDetector`, and acts on the verdict: a stop raises
:class:`~langchain_loop_guard._interrupt.LoopDetected` from the callback, which LangChain
propagates because the handler sets ``raise_error``. Everything else (configuration, runtime
commands, logging, failing open) is :class:`~langchain_loop_guard._runtime.GuardRuntime`'s.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphBubbleUp, GraphInterrupt

from langchain_loop_guard._detector import ALLOW, DetectorEvent, LoopDetector, Verdict
from langchain_loop_guard._errors import LoopGuardConfigError, LoopGuardError
from langchain_loop_guard._interrupt import LoopDetected
from langchain_loop_guard._observe import TRACE_EVENT, Site, install_callback_stop_filter
from langchain_loop_guard._outcomes import previous_answer, tool_outcome
from langchain_loop_guard._public import safe_tool_name
from langchain_loop_guard._runtime import ConfigInput, GuardRuntime, RunInspection, logger
from langchain_loop_guard._signature import (
    Outcome,
    arg_tokens,
    assistant_key,
    call_signature,
    digest,
    outcome,
    reply_sketch,
)

if TYPE_CHECKING:
    from langchain_core.outputs import LLMResult

    from langchain_loop_guard._config import LoopGuardConfig

__all__ = ["TRACE_EVENT", "LoopGuardCallbackHandler"]


_UNKNOWN_TOOL = "unknown_tool"
_MAX_ANNOUNCED = 64  # tool calls a model named that no tool has started yet, per run
_MAX_TOOLS = 256  # tool runs in flight, per run
_MAX_FINISHED = 32  # inspections of ended runs kept for ``inspect``
_MAX_STOPPED = 32  # detectors of ended, stopped runs kept for their late events
_MAX_CLOSED = 2048  # ended runs remembered (late events arrive within moments of the end)
_MAX_ROOTS = 64  # invocations in flight that feed one thread's state (older ones still count)
_MAX_SHED = 4096  # ids of runs not tracked (shed or forgotten), so their late events are ignored
_IDLE_S = 300.0  # a run with no event for this long may be forgotten when the registry is full
_DEFAULT_MAX_RUNS = 1024
_HARD_FACTOR = 4  # runs in flight are tracked up to this many times max_runs

_Callback = TypeVar("_Callback", bound=Callable[..., None])


def _put(bounded: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """Insert into an insertion-ordered dict, dropping the oldest entries beyond ``limit``."""
    bounded.pop(key, None)
    bounded[key] = value
    while len(bounded) > limit:
        del bounded[next(iter(bounded))]


@dataclass(slots=True, eq=False)
class _Run:
    """What the handler keeps for one run (or thread): a detector and call bookkeeping."""

    key: str
    detector: LoopDetector
    per_thread: bool
    roots: dict[UUID, None] = field(default_factory=dict)
    """Top-level runs in flight that feed this state (several only with ``scope="thread"``),
    oldest first; at most ``_MAX_ROOTS``."""
    tools: dict[UUID, tuple[str, str | None, frozenset[int]]] = field(default_factory=dict)
    """Tool runs in flight: tool name and call id."""
    announced: dict[str, tuple[str, str, frozenset[int]]] = field(default_factory=dict)
    """Calls the model named (by call id) that no tool has started yet: name and signature
    (a digest: the arguments themselves are not kept, SPEC §8)."""
    seen: float = 0.0
    """The handler's clock at the run's latest event."""
    paused: dict[str, bool] = field(default_factory=dict)
    """Call ids whose tool was interrupted; its resumption is not a new call."""
    said: tuple[str | None, str] | None = None
    """The run's previous model answer: its message id, or (without one) its key."""
    in_context: dict[UUID, bool] = field(default_factory=dict)
    """Model runs in flight: whether the model's input held the run's previous answer."""
    human: object = None
    """The last human message the model was called with (its id, or position and text)."""
    held: _HeldStop | None = None
    """A stop decided at a model answer, raised at the next step of its invocation."""


@dataclass(slots=True, eq=False)
class _HeldStop:
    """A stop decided at a model answer, held until the next step of its invocation.

    Raising in ``on_llm_end`` would keep the handlers after this one (LangSmith's tracer)
    from recording the answer; the step after it is refused instead, so none of its calls runs.
    """

    root: UUID
    """The top-level run (invocation) whose model gave the answer."""
    verdict: Verdict
    raised: bool = False


@dataclass(slots=True, eq=False)
class _Root:
    """A top-level run: the state it feeds, and its nested runs still open."""

    id: UUID
    key: str
    members: set[UUID] = field(default_factory=set)
    ended: bool = False


def _guarded(method: _Callback) -> _Callback:
    """Run a callback only when the guard is on, failing open around it.

    The same rule as :meth:`GuardRuntime.failing_open`, inlined: callbacks are hot.
    """
    where = method.__name__

    @functools.wraps(method)
    def callback(self: LoopGuardCallbackHandler, *args: Any, **kwargs: Any) -> None:
        if self._config.mode == "off":
            return
        try:
            method(self, *args, **kwargs)
        except (LoopGuardError, GraphBubbleUp):
            raise  # a deliberate stop
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self.internal_error(where, exc)

    return cast("_Callback", callback)


class LoopGuardCallbackHandler(GuardRuntime, BaseCallbackHandler):
    """Stop runaway agent loops from LangChain callbacks.

    Pass it with the run's configuration so that every nested callback reaches it::

        guard = LoopGuardCallbackHandler()
        agent.invoke({"messages": [...]}, {"callbacks": [guard]})

    Each top-level run (each ``invoke``, ``stream``, ``ainvoke``…) gets its own detector;
    nested chains and subgraphs count toward their top-level run, and concurrent runs through
    one handler stay apart. With ``scope="thread"`` the state belongs to the LangGraph
    ``thread_id`` instead and survives across invocations, interrupts and resumes of one
    conversation.

    When the agent loops (mode ``"on"``), the callback raises
    :class:`~langchain_loop_guard.LoopDetected`: from ``on_tool_start`` before the tool runs,
    from ``on_chat_model_start`` before the model is paid for, or from the end of the step
    that completed the loop. Stops, warnings and observe-mode reports are logged to the
    ``langchain_loop_guard`` logger (one line per stop, naming the run and the thread),
    counted in :meth:`status`, given to verdict listeners, recorded on the traced LangSmith
    run (metadata ``loop_guard.*``, tags ``loop_guard:*`` and an event) and dispatched as a
    custom event named ``"loop_guard"`` (:data:`TRACE_EVENT`; visible in ``astream_events``,
    to any handler's ``on_custom_event`` and in ``stream_mode="custom"``), with tool names,
    the signal, counts and a digest, never arguments or output. The guard's own failures
    never break the run. See ``docs/observability.md``.

    A loop found in a model's answer (the same answer again, or an answer whose calls would
    stop the run) is reported when the model answers and raised by the next step that starts
    after it, each parallel call's included, or by the invocation's end: none of the
    answer's calls runs, and the handlers after this one, LangSmith's tracer among them,
    still record the answer, so ``loop-guard replay`` of the trace stops where the run did.

    The handler goes with the run, never on a model or a tool: attached with
    ``model.with_config(callbacks=[handler])``, a model's or a tool's ``callbacks``, it sees
    each call as a run of its own and can detect nothing; it then logs one WARNING saying so.

    A callback can stop a run but not skip one call and go on, so ``nudges`` do not apply
    here; use :class:`~langchain_loop_guard.LoopGuardMiddleware` for that.

    Args:
        config: a :class:`~langchain_loop_guard.LoopGuardConfig`, a mapping of values (over
            files and environment), or ``None`` to load files and environment.
        clock: returns seconds, like :func:`time.monotonic` (the default).
        record_to: append every run's events to this file, digests only, for
            ``loop-guard replay`` (off by default; failing open).
        max_runs: the registry's capacity, runs (or threads) tracked at once (1024 by
            default). Beyond it, the least recently active run that is idle (no event for
            5 minutes: a run that never reported its end) or between invocations (a thread)
            is forgotten to make room. A run in flight is never forgotten: when every run is
            in flight, the registry grows, up to four times ``max_runs``; only beyond that is
            a new run left unguarded, with a WARNING log and a count in :meth:`status`
            (``shed_runs``), and none of its events is tracked.

    Attributes:
        max_open_runs: nested runs in flight tracked at once, over all top-level runs.
    """

    raise_error = True
    run_inline = True
    _integration = "handler"

    max_open_runs: ClassVar[int] = 65_536

    def __init__(
        self,
        config: ConfigInput = None,
        *,
        clock: Callable[[], float] | None = None,
        record_to: str | os.PathLike[str] | None = None,
        max_runs: int = _DEFAULT_MAX_RUNS,
    ) -> None:
        if type(max_runs) is not int or max_runs < 1:
            raise LoopGuardConfigError(
                f"max_runs must be a whole number of at least 1, not {max_runs!r}",
                source="code",
                key="max_runs",
                value=max_runs,
                allowed="int >= 1",
            )
        super().__init__(config, clock=clock, record_to=record_to)
        install_callback_stop_filter(type(self).__name__)  # the guard logs its stops itself
        self.max_runs = max_runs
        """Runs (or threads) tracked at once; see the ``max_runs`` argument."""
        # the registry's housekeeping reads the real clock (an injected clock is the
        # detectors' sense of a run's elapsed time, read only when they decide)
        self._now: Callable[[], float] = time.monotonic
        self._shed: dict[UUID, None] = {}  # ids of runs not tracked: their events are ignored
        self._shed_count = 0
        self._runs: dict[str, _Run] = {}
        self._roots: dict[UUID, _Root] = {}  # top-level runs in flight
        self._open: dict[UUID, _Root] = {}  # runs in flight, nested ones included
        self._closed: dict[UUID, _Root] = {}  # runs that ended recently
        self._stopped: dict[str, _Run] = {}  # stopped runs that ended recently
        self._finished: dict[str, RunInspection] = {}
        self._last: str | None = None

    @property
    def ignore_custom_event(self) -> bool:
        """The handler's own trace events are not for it."""
        return True

    # --- runtime commands ---------------------------------------------------------------------

    def inspect(self, run_id: str | UUID | None = None) -> RunInspection | None:
        """The recent tool calls of a run (tool names, digests, outcome kinds, no content).

        Args:
            run_id: the run (as :attr:`LoopDetected.run_id` names it: the top-level run id,
                or the thread id with ``scope="thread"``); the most recently active run when
                ``None``. A run that ended recently can still be inspected.

        Returns:
            The inspection, or ``None`` when the run is unknown.
        """
        with self._lock:
            key = self._key_of(run_id)
            if key is None:
                return None
            run = self._runs.get(key)
            if run is not None:
                return self.inspection(key, run.detector)
            return self._finished.get(key)

    def reset(self, run_id: str | UUID | None = None) -> bool:
        """Clear a run's counters, history and tripped flag, so that it may go on.

        Args:
            run_id: as for :meth:`inspect`; the most recently active run when ``None``.

        Returns:
            Whether a run in progress (or a thread's state) was reset.
        """
        with self._lock:
            key = self._key_of(run_id)
            run = self._runs.get(key) if key is not None else None
            if run is None:
                return False
            self.decide(run.detector, "reset")
            run.announced.clear()
            run.paused.clear()
            run.held = None
            return True

    def _key_of(self, run_id: str | UUID | None) -> str | None:
        if run_id is None:
            return self._last
        if isinstance(run_id, UUID):
            root = self._roots.get(run_id)
            if root is not None:
                return root.key
        return str(run_id)

    def _active_runs(self) -> int:
        return len(self._runs)

    def _shed_runs(self) -> int:
        return self._shed_count

    def _config_changed(self, config: LoopGuardConfig) -> None:
        if config.mode == "off":
            for tracked in (
                self._runs,
                self._roots,
                self._open,
                self._closed,
                self._stopped,
                self._shed,
            ):
                tracked.clear()
            return
        for run in self._runs.values():
            run.detector.configure(config)
            if config.mode != "on":
                run.held = None  # an observed run is never stopped

    # --- chains and the run tree --------------------------------------------------------------

    @_guarded
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Record where the chain sits in the run tree; refuse it after a stopped answer."""
        with self._lock:
            run = self._start(run_id, parent_run_id, metadata)
            if run is not None:
                self._refuse_if_held(run, run_id)

    @_guarded
    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Forget the chain; the top-level run's end ends the run.

        An invocation that ends after a stopped answer with no step in between (no tool of
        the answer started, no model was called again) raises the stop here.
        """
        with self._lock:
            root = self._roots.get(run_id)
            self._end(run_id)
            if root is not None:
                self._raise_unraised(root)

    @_guarded
    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Forget the chain; the top-level run's end ends the run."""
        with self._lock:
            self._end(run_id)

    @_guarded
    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Record where the retriever sits in the run tree (it may call models)."""
        with self._lock:
            run = self._start(run_id, parent_run_id, metadata)
            if run is not None:
                self._refuse_if_held(run, run_id)

    @_guarded
    def on_retriever_end(
        self, documents: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Forget the retriever."""
        with self._lock:
            self._end(run_id)

    @_guarded
    def on_retriever_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Forget the retriever."""
        with self._lock:
            self._end(run_id)

    # --- models ----------------------------------------------------------------------------------

    @_guarded
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A model turn begins; a stopped run is aborted here, before the model is paid for.

        Tool calls the model named that never reached a tool (an unknown tool name, say) are
        counted first, with the error message the agent answered them with. A human message
        the run's model has not seen yet starts a fresh run (``scope="run"``) or releases a
        stopped thread (``scope="thread"``).
        """
        with self._lock:
            run = self._start(run_id, parent_run_id, metadata, event="model")
            if run is None:
                return
            self._refuse_if_held(run, run_id)
            sent = messages[0] if messages else ()
            self._human_input(run, sent)
            _put(run.in_context, run_id, _holds(sent, run.said), _MAX_TOOLS)
            verdicts = self._unexecuted_calls(run, sent)
            if not any(v.stops for v in verdicts):
                verdicts.append(self.decide(run.detector, "turn_start"))
        self._act(run.key, verdicts, "on_chat_model_start", run_id, parent_run_id)

    @_guarded
    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A (text-completion) model turn begins."""
        with self._lock:
            run = self._start(run_id, parent_run_id, metadata, event="model")
            if run is None:
                return
            self._refuse_if_held(run, run_id)
            verdict = self.decide(run.detector, "turn_start")
        if verdict.action != "allow":
            self._act(run.key, (verdict,), "on_llm_start", run_id, parent_run_id)

    @_guarded
    def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """The model answered: check the text, and remember the tool calls it named.

        The answer repeats the run's previous one only if the model's input held that one
        (SPEC §11 N2): a grader that answers ``yes`` to each new document is no loop. A
        text-completion model's input is not looked into: its answers always may repeat.

        An answer with several calls, one of which would stop the run, is stopped here, so
        that none of them runs: each call is its own parallel task, and refusing only the
        stopping call's ``on_tool_start`` would not keep its siblings from running. The
        middleware and the node guard decide such an answer the same way.

        A stop decided here (those calls, or a repeated answer) is reported here but raised
        at the next step of the invocation: the next chain, tool, retriever or model that
        starts (each parallel sibling's included), or the invocation's end. Raising from this
        callback would keep the handlers after this one, LangSmith's tracer among them, from
        recording the answer, and ``loop-guard replay`` of the trace could not find the stop.
        A model called outside any chain the handler saw (on its own, or with the handler
        attached to the model only) is stopped here, as nothing of its run may follow.
        """
        with self._lock:
            tracked = self._resolve(run_id, parent_run_id) is not None
        if tracked:  # digested outside the lock: other runs' callbacks need not wait
            text, tool_calls, answer_id = _answer(response)
            key = assistant_key(text)
            replies = key is not None and not tool_calls and self.config.scope == "thread"
            sketch = reply_sketch(text) if replies else None  # replies go round in a thread
            named = [
                (name, call_signature(name, args), call_id, arg_tokens(args, name))
                for name, args, call_id in tool_calls
            ]
        with self._lock:
            run = self._resolve(run_id, parent_run_id)
            verdict = ALLOW
            held = False
            if run is not None and tracked:
                answer = DetectorEvent(
                    kind="assistant_message",
                    digest=key,
                    near=sketch,
                    calls=len(named),
                    in_context=run.in_context.pop(run_id, True),
                )
                verdict = self._replay(run, answer)
                # the key is only compared when the answer has no id
                run.said = (answer_id, "" if answer_id else key or "")
                if not verdict.stops and len(named) > 1 and self._stops_any(run, named):
                    for name, signature, call_id, _ in named:
                        call = DetectorEvent(
                            kind="tool_call", tool=name, digest=signature, call_id=call_id
                        )
                        verdict = self._replay(run, call)
                        if verdict.stops:
                            break
                if verdict.stops:  # its calls are refused, never counted as unexecuted ones
                    held = self._hold(run, run_id, parent_run_id, verdict)
                else:
                    for name, signature, call_id, tokens in named:
                        if call_id:
                            _put(run.announced, call_id, (name, signature, tokens), _MAX_ANNOUNCED)
            self._end(run_id)
        if run is not None and verdict.action != "allow":
            self._act(run.key, (verdict,), "on_llm_end", run_id, parent_run_id, stop=not held)

    @_guarded
    def on_llm_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Forget the model run."""
        with self._lock:
            run = self._resolve(run_id, parent_run_id)
            if run is not None:
                run.in_context.pop(run_id, None)
            self._end(run_id)

    # --- tools ---------------------------------------------------------------------------------

    @_guarded
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool is about to run; raising here keeps its body from running."""
        name = safe_tool_name((serialized or {}).get("name") or kwargs.get("name") or _UNKNOWN_TOOL)
        call_id = kwargs.get("tool_call_id")
        # digested before the lock is taken: other runs' callbacks need not wait for it
        arguments = inputs if inputs is not None else input_str
        signature = call_signature(name, arguments)
        tokens = arg_tokens(arguments, name)
        with self._lock:
            run = self._start(run_id, parent_run_id, metadata, event="tool")
            if run is None:
                return
            if call_id is not None:
                run.announced.pop(call_id, None)
            self._refuse_if_held(run, run_id)
            resumed = call_id is not None and run.paused.pop(call_id, False)
            if resumed and run.detector.tripped is None:
                verdict = ALLOW  # a resumed call was counted when it first started
            else:
                event = DetectorEvent(
                    kind="tool_call", tool=name, digest=signature, call_id=call_id
                )
                verdict = self._replay(run, event)
            if verdict.stops:
                self._end(run_id)  # the tool will not report an end
            else:
                _put(run.tools, run_id, (name, call_id, tokens), _MAX_TOOLS)
        if verdict.action != "allow":
            self._act(run.key, (verdict,), "on_tool_start", run_id, parent_run_id)

    @_guarded
    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """A tool returned; an error ``ToolMessage`` (``handle_tool_error``) is an error.

        A ``Command`` (or a list of them) is taken by the content of its tool messages.
        """
        result = tool_outcome(output)
        failed = result.error is not None
        value = result.error if failed else result.output
        outcome = self._outcome_of(run_id, parent_run_id, value, failed=failed)
        with self._lock:
            run = self._resolve(run_id, parent_run_id)
            verdict = ALLOW
            if run is not None and (started := run.tools.pop(run_id, None)) is not None:
                verdict = self._result(run, started, outcome, failed=failed)
            self._end(run_id)
        if run is not None and verdict.action != "allow":
            self._act(run.key, (verdict,), "on_tool_end", run_id, parent_run_id)

    @_guarded
    def on_tool_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool failed. An interrupt inside it is a pause, not a failure."""
        paused = isinstance(error, GraphInterrupt)
        outcome = None if paused else self._outcome_of(run_id, parent_run_id, error, failed=True)
        with self._lock:
            run = self._resolve(run_id, parent_run_id)
            verdict = ALLOW
            if run is not None and (started := run.tools.pop(run_id, None)) is not None:
                if paused:
                    if started[1] is not None:
                        _put(run.paused, started[1], True, _MAX_ANNOUNCED)
                else:
                    verdict = self._result(run, started, outcome, failed=True)
            self._end(run_id)
        if run is not None and verdict.action != "allow":
            self._act(run.key, (verdict,), "on_tool_error", run_id, parent_run_id)

    # --- digests, computed without the lock -------------------------------------------------------

    def _outcome_of(
        self, run_id: UUID, parent_run_id: UUID | None, value: Any, *, failed: bool
    ) -> Outcome | None:
        """The digests of a tool run's result, ``None`` if untracked.

        Normalizing a large result is the heaviest work the handler does, so it happens
        outside the lock: only the tool's name is looked up under it.
        """
        with self._lock:
            run = self._resolve(run_id, parent_run_id, touch=False)
            started = run.tools.get(run_id) if run is not None else None
        if started is None:
            return None
        name, _, tokens = started
        if failed:
            return outcome(error=value, tool=name, tokens=tokens)
        return outcome(value, tool=name, tokens=tokens)

    # --- internals (called with the lock held, except _act) ---------------------------------

    def _replay(self, run: _Run, event: DetectorEvent) -> Verdict:
        """Give ``run``'s detector an event digested beforehand; fail open."""
        return self.decide(run.detector, "replay", event)

    def _result(
        self,
        run: _Run,
        started: tuple[str, str | None, frozenset[int]],
        result: Outcome | None,
        *,
        failed: bool,
    ) -> Verdict:
        """Feed the result of the tool run ``started`` (name, call id), digested beforehand."""
        name, call_id, _ = started
        if result is None:  # its start was not tracked yet when the result was digested
            return ALLOW
        return self._replay(run, _result_event(name, call_id, result, failed=failed))

    def _start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: Mapping[str, Any] | None,
        *,
        event: Literal["chain", "model", "tool"] = "chain",
    ) -> _Run | None:
        """Place a starting run in the tree; the state of its top-level run.

        ``None`` for a late event of a run that ended (a worker thread still finishing):
        there is nothing left to track, unless the run was stopped, whose state is kept a
        while so that such an event is stopped too. ``None`` too for the runs of a top-level
        run that was not tracked (shed, or forgotten): a late event never starts a detector
        of its own under a nested id.
        """
        root = None
        if parent_run_id is not None:
            if parent_run_id in self._shed:
                _put(self._shed, run_id, None, _MAX_SHED)
                return None
            root = (
                self._open.get(parent_run_id)
                or self._roots.get(parent_run_id)
                or self._closed.get(parent_run_id)
            )
        if root is None:
            # no parent: a new top-level run; a parent never seen (a handler attached below
            # the top) is taken as the top
            root_id = run_id if parent_run_id is None else parent_run_id
            if event != "chain" and (
                parent_run_id is not None or "langgraph_node" in (metadata or {})
            ):  # a model or tool call inside a run this handler was not given
                self._warn_attached_below(event)
            created = self._new_root(root_id, metadata)
            if created is None:
                _put(self._shed, root_id, None, _MAX_SHED)
                _put(self._shed, run_id, None, _MAX_SHED)
                return None
            root, run = created
        else:
            found = self._runs.get(root.key) or self._stopped.get(root.key)
            if found is None:
                return None  # its run ended (or was forgotten): nothing left to track
            run = found
        self._open[run_id] = root  # run ids are unique: this is the newest entry
        root.members.add(run_id)
        while len(self._open) > self.max_open_runs:
            oldest = next(iter(self._open))
            self._open.pop(oldest).members.discard(oldest)
        self._touch(run)
        return run

    _warned_attached_below: bool = False

    def _warn_attached_below(self, event: str) -> None:
        """Say once that this handler sits on a model or a tool, where it guards nothing.

        A handler in ``model.with_config(callbacks=...)``, a model's or a tool's ``callbacks``
        sees each model call or tool call as a run of its own (under a parent run it never
        saw start, or inside a graph node it never saw), so no loop can ever add up.
        """
        if self._warned_attached_below:
            return
        self._warned_attached_below = True
        logger.warning(
            "loop-guard: LoopGuardCallbackHandler got a %s event whose parent run it never saw:"
            " it is attached to a model or a tool (with_config(callbacks=...), .callbacks),"
            " where each call looks like a run of its own and no loop is detected; pass it"
            ' with the run instead: agent.invoke(inputs, {"callbacks": [handler]})',
            event,
        )

    def _new_root(
        self, root_id: UUID, metadata: Mapping[str, Any] | None
    ) -> tuple[_Root, _Run] | None:
        """Register a top-level run, keyed by its id or (``scope="thread"``) its thread.

        ``None`` when the registry is full of runs in flight: the run is not tracked.
        """
        thread_id = (metadata or {}).get("thread_id")
        per_thread = self._config.scope == "thread" and thread_id not in (None, "")
        key = str(thread_id) if per_thread else str(root_id)
        run = self._runs.get(key)
        if run is None:
            run = self._new_run(key, per_thread=per_thread)
            if run is None:
                return None
        root = _Root(root_id, key)
        self._roots[root_id] = root
        run.roots[root_id] = None
        if len(run.roots) > _MAX_ROOTS:
            # a thread whose invocations never report their end: the oldest stops being a
            # root of its own (its nested runs still count toward the thread)
            oldest = next(iter(run.roots))
            del run.roots[oldest]
            self._roots.pop(oldest, None)
        return root, run

    def _new_run(self, key: str, *, per_thread: bool) -> _Run | None:
        """A new run's state, if there is room (making room by forgetting an idle run)."""
        if (
            len(self._runs) >= self.max_runs
            and not self._make_room()
            and len(self._runs) >= _HARD_FACTOR * self.max_runs
        ):
            self._shed_count += 1
            shed = self._shed_count
            if shed & (shed - 1) == 0:  # 1, 2, 4, 8…: loud, but not one line per run
                logger.warning(
                    "loop-guard: %d runs in flight fill the registry (%d times max_runs=%d); "
                    "run=%s is not guarded (%d runs shed so far). Raise max_runs.",
                    len(self._runs),
                    _HARD_FACTOR,
                    self.max_runs,
                    safe_tool_name(key),
                    shed,
                )
            return None
        self._stopped.pop(key, None)
        run = _Run(key, self.new_detector(key), per_thread, seen=self._now())
        self._runs[key] = run
        return run

    def _make_room(self) -> bool:
        """Forget the least recently active run that is idle or between invocations.

        A run with an invocation in flight that had an event in the last ``_IDLE_S``
        seconds is never forgotten. Returns whether a run was forgotten.
        """
        idle_before = self._now() - _IDLE_S
        for key, run in self._runs.items():
            if not run.roots or run.seen <= idle_before:
                logger.info(
                    "loop-guard: forgot run=%s (%s) to make room (max_runs=%d)",
                    safe_tool_name(key),
                    "between invocations" if not run.roots else "idle",
                    self.max_runs,
                )
                self._forget(key)
                return True
        return False

    def _touch(self, run: _Run) -> None:
        """Mark ``run`` the most recently active one (the registry forgets the least)."""
        run.seen = self._now()
        if self._last == run.key:
            return
        self._last = run.key
        if self._runs.get(run.key) is run:
            del self._runs[run.key]
            self._runs[run.key] = run

    def _resolve(
        self, run_id: UUID, parent_run_id: UUID | None, *, touch: bool = True
    ) -> _Run | None:
        """The state an event of a started run belongs to (``None`` if its start was missed)."""
        root = self._open.get(run_id)
        if root is None and parent_run_id is not None:
            root = self._open.get(parent_run_id)
        if root is None:
            return None
        run = self._runs.get(root.key) or self._stopped.get(root.key)
        if run is not None and touch:
            self._touch(run)
        return run

    def _end(self, run_id: UUID) -> None:
        """A run ended: forget it, and end its top-level run if it was one."""
        root = self._open.pop(run_id, None)
        if root is not None:
            root.members.discard(run_id)
            _put(self._closed, run_id, root, _MAX_CLOSED)
        if run_id in self._roots:
            self._end_root(self._roots.pop(run_id))

    def _end_root(self, root: _Root) -> None:
        root.ended = True
        _put(self._closed, root.id, root, _MAX_CLOSED)
        for member in root.members:
            self._open.pop(member, None)
            _put(self._closed, member, root, _MAX_CLOSED)
        root.members.clear()
        run = self._runs.get(root.key)
        if run is None:
            return
        run.roots.pop(root.id, None)
        if run.per_thread or run.roots:
            return
        del self._runs[root.key]
        _put(self._finished, root.key, self.inspection(root.key, run.detector), _MAX_FINISHED)
        if run.detector.tripped is not None:
            _put(self._stopped, root.key, run, _MAX_STOPPED)

    def _forget(self, key: str) -> None:
        """Forget a run that never reported its end, with everything that points to it.

        Its ids are remembered a while, so that its late events are ignored rather than
        taken for a new run.
        """
        run = self._runs.pop(key)
        if self._last == key:
            self._last = None
        for root_id in run.roots:
            _put(self._shed, root_id, None, _MAX_SHED)
            root = self._roots.pop(root_id, None)
            if root is not None:
                root.ended = True
                for member in root.members:
                    self._open.pop(member, None)
                    _put(self._shed, member, None, _MAX_SHED)
                root.members.clear()

    def _stops_any(
        self, run: _Run, named: Sequence[tuple[str, str, str | None, frozenset[int]]]
    ) -> bool:
        """Whether one of an answer's calls, made in order, would stop the run (a dry run on
        a copy of the run's detector)."""
        probe = self.new_detector(config=run.detector.config)
        if not probe.restore_state(run.detector.export_state()):
            return False
        for name, signature, call_id, _ in named:
            call = DetectorEvent(kind="tool_call", tool=name, digest=signature, call_id=call_id)
            if self.decide(probe, "replay", call).stops:
                return True
        return False

    def _hold(self, run: _Run, run_id: UUID, parent_run_id: UUID | None, verdict: Verdict) -> bool:
        """Hold the stop decided at the answer of the model run ``run_id``, to be raised at
        the next step of its invocation; whether it is held.

        It is held only when the model ran inside a chain the handler saw start and that is
        still open: the handler then sees the steps that follow. A model run that is its own
        top-level run, or whose parent the handler never saw (a handler attached to the model
        only), may have no later event here: its stop is raised at once.
        """
        root = self._open.get(run_id)
        if root is None or root.ended or parent_run_id is None or parent_run_id not in self._open:
            return False
        run.held = _HeldStop(root.id, verdict)
        return True

    def _refuse_if_held(self, run: _Run, run_id: UUID) -> None:
        """Raise the stop held for the invocation that ``run_id`` (a step starting) is part of.

        Every step that starts after the stopped answer is refused, each parallel sibling's
        included, so none of the answer's calls runs. The stop was reported when it was
        decided: it is raised again, not reported again. ``run_id`` will not report an end.
        """
        held = run.held
        if held is None:
            return
        root = self._open.get(run_id)
        if root is None or root.id != held.root:
            return
        held.raised = True
        self._end(run_id)
        raise LoopDetected.from_verdict(held.verdict, run_id=run.key)

    def _raise_unraised(self, root: _Root) -> None:
        """Raise the stop held for ``root``, an invocation that just ended, if no step raised
        it (nothing started after the stopped answer)."""
        run = self._runs.get(root.key) or self._stopped.get(root.key)
        held = run.held if run is not None else None
        if held is None or held.root != root.id or held.raised:
            return
        held.raised = True
        raise LoopDetected.from_verdict(held.verdict, run_id=root.key)

    def _human_input(self, run: _Run, messages: Sequence[BaseMessage]) -> None:
        """Release a thread (``scope="thread"``) when a new human message reached its model.

        With ``scope="run"`` every invocation starts afresh already, and a human message a
        node writes inside one (a critic's, a summary) is no new run. The first model call a
        thread makes in this process only records the latest human message.
        """
        if not run.per_thread:
            return  # a run is one invocation: the next one starts afresh anyway
        latest = _latest_human(messages)
        if latest is None or latest == run.human:
            return
        seen, run.human = run.human, latest
        if seen is not None:
            self.decide(run.detector, "user_message")

    def _unexecuted_calls(self, run: _Run, messages: Sequence[BaseMessage]) -> list[Verdict]:
        """Count the calls the model named that no tool started but the agent answered.

        The answers are the tool messages after the model's last message in its next input
        (an unknown tool's error message, say). Calls nobody answered (a structured-output
        call, say) are not counted.
        """
        verdicts: list[Verdict] = []
        if not run.announced:
            return verdicts
        found: dict[str, ToolMessage] = {}
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                break
            if isinstance(message, ToolMessage) and message.tool_call_id in run.announced:
                found[message.tool_call_id] = message
        for call_id, answer in reversed(found.items()):
            announced = run.announced.pop(call_id, None)
            if announced is None:
                continue  # a tool started it meanwhile
            name, signature, tokens = announced
            call = DetectorEvent(kind="tool_call", tool=name, digest=signature, call_id=call_id)
            verdict = self._replay(run, call)
            verdicts.append(verdict)
            if verdict.stops:
                break
            fed = tool_outcome(answer)
            failed = fed.error is not None
            if failed:
                result = outcome(error=fed.error, tool=name, tokens=tokens)
            else:
                result = outcome(fed.output, tool=name, tokens=tokens)
            verdict = self._replay(run, _result_event(name, call_id, result, failed=failed))
            verdicts.append(verdict)
            if verdict.stops:
                break
        return verdicts

    def _act(
        self,
        key: str,
        verdicts: Sequence[Verdict],
        where: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        *,
        stop: bool = True,
    ) -> None:
        """Report the verdicts (log, status, listeners, trace, streams), then stop the run on a
        stopping one (unless ``stop`` is false: a held stop is raised later, see :meth:`_hold`).

        ``where``, ``run_id`` and ``parent_run_id`` name the callback being handled, for the
        reports. Called after the lock is released: reporting runs other code (verdict
        listeners, other handlers' ``on_custom_event``).
        """
        reported = [verdict for verdict in verdicts if verdict.action != "allow"]
        if not reported:
            return
        site = self._callback_site(key, where, run_id, parent_run_id)
        for verdict in reported:
            self.report(key, verdict, site=site)
        for verdict in reported if stop else ():
            if verdict.stops:
                raise LoopDetected.from_verdict(verdict, run_id=key)

    def _callback_site(
        self, key: str, position: str, run_id: UUID | None, parent_run_id: UUID | None
    ) -> Site:
        """Where a callback happened: its name, the top-level run and the thread."""
        site = self._site(position)
        with self._lock:
            root = self._open.get(run_id) if run_id is not None else None
            if root is None and parent_run_id is not None:
                root = self._open.get(parent_run_id)
            if root is None and run_id is not None:
                root = self._closed.get(run_id)
            run = self._runs.get(key) or self._stopped.get(key)
        root_id = str(root.id) if root is not None else None
        thread_id = site.thread_id
        if thread_id is None and run is not None and run.per_thread:
            thread_id = key
        return Site(site.integration, position, root_id or site.run_id or key, thread_id)


def _latest_human(messages: Sequence[BaseMessage]) -> object:
    """The last human message of ``messages``: its id, or its position and a digest of its
    text; or ``None``.

    The guard's own messages (named ``"loop_guard"``) are not a human's.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and message.name != "loop_guard":
            if message.id:
                return message.id
            return (index, digest("human", str(message.content)))
    return None


def _holds(messages: Sequence[BaseMessage], said: tuple[str | None, str] | None) -> bool:
    """Whether the last model answer in ``messages`` is the run's previous one (``said``).

    By message id when the previous answer had one (LangChain gives every model answer an
    id, and the graph state keeps it), so a few-shot example with the same text is not it;
    by key otherwise.
    """
    if said is None:
        return False
    answer = previous_answer(messages)
    if answer is None:
        return False
    said_id, said_key = said
    if said_id is not None:
        return answer.id == said_id
    return (assistant_key(answer.text) or "") == said_key


def _answer(response: LLMResult) -> tuple[str, list[tuple[str, Any, str | None]], str | None]:
    """The text, the tool calls ``(name, args, id)`` and the message id of a model's first
    generation."""
    if not response.generations or not response.generations[0]:
        return "", [], None
    generation = response.generations[0][0]
    message = getattr(generation, "message", None)
    if not isinstance(message, AIMessage):
        return generation.text, [], None
    calls = [(safe_tool_name(tc["name"]), tc["args"], tc.get("id")) for tc in message.tool_calls]
    return message.text, calls, message.id


def _result_event(
    name: str, call_id: str | None, result: Outcome, *, failed: bool
) -> DetectorEvent:
    """A tool result as the detector takes it, digested."""
    return DetectorEvent(
        kind="tool_result",
        tool=name,
        digest=result.key,
        call_id=call_id,
        error=failed,
        near=result.near,
        info=result.info,
    )
