"""``LoopGuardCallbackHandler``: the loop guard as a LangChain callback handler.

A thin adapter: it resolves every callback to the top-level run (or the LangGraph thread) it
belongs to, translates the callback into an event of that run's
:class:`~langchain_loop_guard._detector.LoopDetector`, and acts on the verdict: a stop raises
:class:`~langchain_loop_guard._interrupt.LoopDetected` from the callback, which LangChain
propagates because the handler sets ``raise_error``. Everything else (configuration, runtime
commands, logging, failing open) is :class:`~langchain_loop_guard._runtime.GuardRuntime`'s.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.callbacks.manager import dispatch_custom_event
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphBubbleUp, GraphInterrupt

from langchain_loop_guard._detector import ALLOW, LoopDetector, Verdict
from langchain_loop_guard._errors import LoopGuardError
from langchain_loop_guard._interrupt import LoopDetected
from langchain_loop_guard._outcomes import previous_answer, tool_outcome
from langchain_loop_guard._runtime import ConfigInput, GuardRuntime, RunInspection
from langchain_loop_guard._signature import assistant_key, digest

if TYPE_CHECKING:
    from langchain_core.outputs import LLMResult

    from langchain_loop_guard._config import LoopGuardConfig

__all__ = ["TRACE_EVENT", "LoopGuardCallbackHandler"]

TRACE_EVENT = "loop_guard"
"""Name of the custom event a report is dispatched as (``on_custom_event`` in
``astream_events``); its data holds tool names, the signal, counts and a digest, never content."""

_UNKNOWN_TOOL = "unknown_tool"
_MAX_ANNOUNCED = 64  # tool calls a model named that no tool has started yet, per run
_MAX_TOOLS = 256  # tool runs in flight, per run
_MAX_FINISHED = 32  # inspections of ended runs kept for ``inspect``
_MAX_STOPPED = 32  # detectors of ended, stopped runs kept for their late events
_MAX_CLOSED = 2048  # ended runs remembered (late events arrive within moments of the end)

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
    roots: set[UUID] = field(default_factory=set)
    """Top-level runs in flight that feed this state (several only with ``scope="thread"``)."""
    tools: dict[UUID, tuple[str, str | None]] = field(default_factory=dict)
    """Tool runs in flight: tool name and call id."""
    announced: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """Calls the model named (by call id) that no tool has started yet."""
    paused: dict[str, bool] = field(default_factory=dict)
    """Call ids whose tool was interrupted; its resumption is not a new call."""
    said: tuple[str | None, str] | None = None
    """The run's previous model answer: its message id, or (without one) its key."""
    in_context: dict[UUID, bool] = field(default_factory=dict)
    """Model runs in flight: whether the model's input held the run's previous answer."""
    human: object = None
    """The last human message the model was called with (its id, or position and text)."""


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
        if self.mode == "off":
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
    ``langchain_loop_guard`` logger, counted in :meth:`status` and dispatched to the run's
    trace as a custom event named ``"loop_guard"`` (:data:`TRACE_EVENT`; visible in
    ``astream_events`` and to any handler's ``on_custom_event``), with tool names, the signal,
    counts and a digest, never arguments or output. The guard's own failures never break the
    run.

    A callback can stop a run but not skip one call and go on, so ``nudges`` do not apply
    here; use :class:`~langchain_loop_guard.LoopGuardMiddleware` for that.

    Args:
        config: a :class:`~langchain_loop_guard.LoopGuardConfig`, a mapping of values (over
            files and environment), or ``None`` to load files and environment.
        clock: returns seconds, like :func:`time.monotonic` (the default).
        record_to: append every run's events to this file, digests only, for
            ``loop-guard replay`` (off by default; failing open).

    Attributes:
        max_runs: runs (or threads) tracked at once; the least recently active one is
            forgotten beyond it, so runs that never report their end cannot leak.
        max_open_runs: nested runs in flight tracked at once, over all top-level runs.
    """

    raise_error = True
    run_inline = True

    max_runs: ClassVar[int] = 1024
    max_open_runs: ClassVar[int] = 65_536

    def __init__(
        self,
        config: ConfigInput = None,
        *,
        clock: Callable[[], float] | None = None,
        record_to: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(config, clock=clock, record_to=record_to)
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

    def _config_changed(self, config: LoopGuardConfig) -> None:
        if config.mode == "off":
            for tracked in (self._runs, self._roots, self._open, self._closed, self._stopped):
                tracked.clear()
            return
        for run in self._runs.values():
            run.detector.configure(config)

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
        """Record where the chain sits in the run tree."""
        with self._lock:
            self._start(run_id, parent_run_id, metadata)

    @_guarded
    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Forget the chain; the top-level run's end ends the run."""
        with self._lock:
            self._end(run_id)

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
            self._start(run_id, parent_run_id, metadata)

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
            run = self._start(run_id, parent_run_id, metadata)
            if run is None:
                return
            sent = messages[0] if messages else ()
            self._human_input(run, sent)
            _put(run.in_context, run_id, _holds(sent, run.said), _MAX_TOOLS)
            verdicts = self._unexecuted_calls(run, sent)
            if not any(v.stops for v in verdicts):
                verdicts.append(self.decide(run.detector, "turn_start"))
        self._act(run.key, verdicts)

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
            run = self._start(run_id, parent_run_id, metadata)
            if run is None:
                return
            verdict = self.decide(run.detector, "turn_start")
        self._act(run.key, [verdict])

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
        that none of them runs: each call is its own parallel task, and raising from one
        task's ``on_tool_start`` would not keep its siblings from running. The middleware and
        the node guard decide such an answer the same way.
        """
        with self._lock:
            run = self._resolve(run_id, parent_run_id)
            verdict = ALLOW
            if run is not None:
                text, tool_calls, answer_id = _answer(response)
                verdict = self.decide(
                    run.detector,
                    "assistant_message",
                    text,
                    [(name, args) for name, args, _ in tool_calls],
                    in_context=run.in_context.pop(run_id, True),
                )
                # the key is only compared when the answer has no id
                run.said = (answer_id, "" if answer_id else assistant_key(text) or "")
                if not verdict.stops and len(tool_calls) > 1 and self._stops_any(run, tool_calls):
                    for name, args, call_id in tool_calls:
                        verdict = self.decide(run.detector, "tool_call", name, args, call_id)
                        if verdict.stops:
                            break
                for name, args, call_id in tool_calls:
                    if call_id:
                        _put(run.announced, call_id, (name, args), _MAX_ANNOUNCED)
            self._end(run_id)
        if run is not None:
            self._act(run.key, [verdict])

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
        name = (serialized or {}).get("name") or kwargs.get("name") or _UNKNOWN_TOOL
        call_id = kwargs.get("tool_call_id")
        args = inputs if inputs is not None else input_str
        with self._lock:
            run = self._start(run_id, parent_run_id, metadata)
            if run is None:
                return
            if call_id is not None:
                run.announced.pop(call_id, None)
            resumed = call_id is not None and run.paused.pop(call_id, False)
            if resumed and run.detector.tripped is None:
                verdict = ALLOW  # a resumed call was counted when it first started
            else:
                verdict = self.decide(run.detector, "tool_call", name, args, call_id)
            if verdict.stops:
                self._end(run_id)  # the tool will not report an end
            else:
                _put(run.tools, run_id, (name, call_id), _MAX_TOOLS)
        self._act(run.key, [verdict])

    @_guarded
    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """A tool returned; an error ``ToolMessage`` (``handle_tool_error``) is an error.

        A ``Command`` (or a list of them) is taken by the content of its tool messages.
        """
        with self._lock:
            run = self._resolve(run_id, parent_run_id)
            verdict = ALLOW
            if run is not None and (started := run.tools.pop(run_id, None)) is not None:
                name, call_id = started
                outcome = tool_outcome(output)
                verdict = self.decide(
                    run.detector,
                    "tool_result",
                    name,
                    outcome.output,
                    error=outcome.error,
                    call_id=call_id,
                )
            self._end(run_id)
        if run is not None:
            self._act(run.key, [verdict])

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
        with self._lock:
            run = self._resolve(run_id, parent_run_id)
            verdict = ALLOW
            if run is not None and (started := run.tools.pop(run_id, None)) is not None:
                name, call_id = started
                if isinstance(error, GraphInterrupt):
                    if call_id is not None:
                        _put(run.paused, call_id, True, _MAX_ANNOUNCED)
                else:
                    verdict = self.decide(
                        run.detector, "tool_result", name, error=error, call_id=call_id
                    )
            self._end(run_id)
        if run is not None:
            self._act(run.key, [verdict])

    # --- internals (called with the lock held, except _act and _trace) ---------------------------

    def _start(
        self, run_id: UUID, parent_run_id: UUID | None, metadata: Mapping[str, Any] | None
    ) -> _Run | None:
        """Place a starting run in the tree; the state of its top-level run.

        ``None`` for a late event of a run that ended (a worker thread still finishing):
        there is nothing left to track, unless the run was stopped, whose state is kept a
        while so that such an event is stopped too.
        """
        root = None
        if parent_run_id is not None:
            root = (
                self._open.get(parent_run_id)
                or self._roots.get(parent_run_id)
                or self._closed.get(parent_run_id)
            )
        if root is None:
            # no parent: a new top-level run; a parent never seen (a handler attached below
            # the top) is taken as the top
            root, run = self._new_root(run_id if parent_run_id is None else parent_run_id, metadata)
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

    def _new_root(self, root_id: UUID, metadata: Mapping[str, Any] | None) -> tuple[_Root, _Run]:
        """Register a top-level run, keyed by its id or (``scope="thread"``) its thread."""
        thread_id = (metadata or {}).get("thread_id")
        per_thread = self._config.scope == "thread" and thread_id not in (None, "")
        key = str(thread_id) if per_thread else str(root_id)
        run = self._runs.get(key)
        if run is None:
            run = self._new_run(key, per_thread=per_thread)
        root = _Root(root_id, key)
        self._roots[root_id] = root
        run.roots.add(root_id)
        return root, run

    def _new_run(self, key: str, *, per_thread: bool) -> _Run:
        self._stopped.pop(key, None)
        run = _Run(key, self.new_detector(key), per_thread)
        self._runs[key] = run
        while len(self._runs) > self.max_runs:
            self._forget(next(iter(self._runs)))
        return run

    def _touch(self, run: _Run) -> None:
        """Mark ``run`` the most recently active one (the registry evicts the least)."""
        if self._last == run.key:
            return
        self._last = run.key
        if self._runs.get(run.key) is run:
            del self._runs[run.key]
            self._runs[run.key] = run

    def _resolve(self, run_id: UUID, parent_run_id: UUID | None) -> _Run | None:
        """The state an event of a started run belongs to (``None`` if its start was missed)."""
        root = self._open.get(run_id)
        if root is None and parent_run_id is not None:
            root = self._open.get(parent_run_id)
        if root is None:
            return None
        run = self._runs.get(root.key) or self._stopped.get(root.key)
        if run is not None:
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
        run.roots.discard(root.id)
        if run.per_thread or run.roots:
            return
        del self._runs[root.key]
        _put(self._finished, root.key, self.inspection(root.key, run.detector), _MAX_FINISHED)
        if run.detector.tripped is not None:
            _put(self._stopped, root.key, run, _MAX_STOPPED)

    def _forget(self, key: str) -> None:
        """Evict a run that never reported its end, with everything that points to it."""
        run = self._runs.pop(key)
        for root_id in run.roots:
            root = self._roots.pop(root_id, None)
            if root is not None:
                root.ended = True
                for member in root.members:
                    self._open.pop(member, None)
                root.members.clear()

    def _stops_any(self, run: _Run, tool_calls: Sequence[tuple[str, Any, str | None]]) -> bool:
        """Whether one of an answer's calls, made in order, would stop the run (a dry run on
        a copy of the run's detector)."""
        probe = self.new_detector(config=run.detector.config)
        if not probe.restore_state(run.detector.export_state()):
            return False
        for name, args, call_id in tool_calls:
            if self.decide(probe, "tool_call", name, args, call_id).stops:
                return True
        return False

    def _human_input(self, run: _Run, messages: Sequence[BaseMessage]) -> None:
        """Start afresh, or release the thread, when a new human message reached the model.

        The first model call a run (or a thread, in this process) makes only records the
        latest human message: a new top-level run starts afresh anyway.
        """
        latest = _latest_human(messages)
        if latest is None or latest == run.human:
            return
        seen, run.human = run.human, latest
        if seen is None:
            return
        if run.per_thread:
            self.decide(run.detector, "user_message")
        else:
            self.decide(run.detector, "reset")
            run.announced.clear()
            run.paused.clear()

    def _unexecuted_calls(self, run: _Run, messages: Sequence[BaseMessage]) -> list[Verdict]:
        """Count the calls the model named that no tool started but the agent answered.

        The answers (an unknown tool's error message, say) follow the model's last message in
        the next model input. Calls nobody answered (a structured-output call, say) are not
        counted.
        """
        if not run.announced:
            return []
        answers: dict[str, ToolMessage] = {}
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                break
            if isinstance(message, ToolMessage) and message.tool_call_id in run.announced:
                answers[message.tool_call_id] = message
        verdicts: list[Verdict] = []
        for call_id in [c for c in run.announced if c in answers]:
            name, args = run.announced.pop(call_id)
            answer = answers[call_id]
            verdict = self.decide(run.detector, "tool_call", name, args, call_id)
            verdicts.append(verdict)
            if verdict.stops:
                break
            outcome = tool_outcome(answer)
            result = self.decide(
                run.detector,
                "tool_result",
                name,
                outcome.output,
                error=outcome.error,
                call_id=call_id,
            )
            verdicts.append(result)
            if result.stops:
                break
        return verdicts

    def _act(self, key: str, verdicts: Sequence[Verdict]) -> None:
        """Report the verdicts (log, status, trace), then stop the run on a stopping one.

        Called after the lock is released: reporting runs other code (verdict listeners,
        other handlers' ``on_custom_event``).
        """
        reported = [verdict for verdict in verdicts if verdict.action != "allow"]
        for verdict in reported:
            self.report(key, verdict)
            if not verdict.tripped:
                self._trace(key, verdict)
        for verdict in reported:
            if verdict.stops:
                raise LoopDetected.from_verdict(verdict, run_id=key)

    def _trace(self, key: str, verdict: Verdict) -> None:
        """Dispatch ``verdict`` as a custom event of the run being traced, if there is one."""
        signal = verdict.signal
        data = {
            "action": verdict.action,
            "signal": signal.value if signal is not None else None,
            "tool": verdict.tool,
            "tools": list(verdict.tools),
            "count": verdict.count,
            "threshold": verdict.threshold,
            "key": verdict.key,
            "run_id": key,
        }
        # RuntimeError: no run to attach the event to (a model called outside any runnable)
        with self.failing_open("trace event"), contextlib.suppress(RuntimeError):
            dispatch_custom_event(TRACE_EVENT, data)


def _latest_human(messages: Sequence[BaseMessage]) -> object:
    """The last human message of ``messages``: its id, or its position and a digest of its text; or ``None``.

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
    calls = [(tc["name"], tc["args"], tc.get("id")) for tc in message.tool_calls]
    return message.text, calls, message.id
