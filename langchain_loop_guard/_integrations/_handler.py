"""``LoopGuardCallbackHandler``: each LangChain callback placed in the run tree
(:mod:`~langchain_loop_guard._integrations._run_tree`) and translated into events of its run
(:mod:`~langchain_loop_guard._integrations._callback_runs`), digested outside the lock."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langgraph.errors import GraphBubbleUp, GraphInterrupt

from langchain_loop_guard._core._detector import ALLOW
from langchain_loop_guard._core._errors import LoopGuardError
from langchain_loop_guard._core._public import safe_tool_name
from langchain_loop_guard._core._signature import outcome
from langchain_loop_guard._core._view import limits_of
from langchain_loop_guard._integrations._callback_runs import CallbackRun
from langchain_loop_guard._integrations._engine import RunEngine
from langchain_loop_guard._integrations._model_answer import ModelAnswer, call_digests
from langchain_loop_guard._integrations._outcomes import Outcome, tool_outcome
from langchain_loop_guard._integrations._publish import (
    TRACE_EVENT,
    Site,
    install_callback_stop_filter,
)
from langchain_loop_guard._integrations._run_ids import RunId, run_number, run_text
from langchain_loop_guard._integrations._run_tree import RunTree
from langchain_loop_guard._integrations._runtime import ConfigInput, GuardRuntime, bad_argument
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard._integrations._thread_store import ThreadStore
from langchain_loop_guard._integrations._tool_kinds import ToolKinds
from langchain_loop_guard._integrations._unrepaired import StoppedThreads

if TYPE_CHECKING:
    from langchain_core.outputs import LLMResult
    from langgraph.store.base import BaseStore

    from langchain_loop_guard._core._config import LoopGuardConfig
    from langchain_loop_guard._core._detector import Verdict
    from langchain_loop_guard._core._status import RunInspection

__all__ = ["TRACE_EVENT", "LoopGuardCallbackHandler"]


_UNKNOWN_TOOL = "unknown_tool"
_DEFAULT_MAX_RUNS = 1024

_Callback = TypeVar("_Callback", bound=Callable[..., None])


def _guarded(method: _Callback) -> _Callback:
    """Run a callback only when the guard is on, failing open (:meth:`_RunRegistry._fail_open`);
    for the callbacks that do not come at every step."""
    where = method.__name__

    @functools.wraps(method)
    def callback(self: LoopGuardCallbackHandler, *args: Any, **kwargs: Any) -> None:
        if self._config.mode == "off":
            return
        try:
            method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self._fail_open(where, exc)

    return cast("_Callback", callback)


class _RunRegistry(GuardRuntime):
    """The handler's runs (:class:`RunEngine`, the :class:`RunTree` its callbacks are placed
    in), the runtime commands on them, and how a callback's verdicts are acted on; the
    callbacks are :class:`LoopGuardCallbackHandler`'s.
    """

    _engine: RunEngine[CallbackRun]
    _tree: RunTree
    _unrepaired: StoppedThreads

    def inspect(self, run_id: str | UUID | None = None) -> RunInspection | None:
        """The recent tool calls of a run (tool names, digests, outcome kinds, no content), or
        ``None`` when the run is unknown.

        Args:
            run_id: the run as :attr:`LoopDetected.run_id` names it (the top-level run id, or the
                thread id with ``scope="thread"``), ended recently or not; the most recently active
                run when ``None``.
        """
        with self._lock:
            key = self._tree.key_of(run_id)
            return None if key is None else self._engine.inspect(key)

    def reset(self, run_id: str | UUID | None = None) -> bool:
        """Clear a run's counters, history and tripped flag, so that it may go on; whether a run in
        progress (or a thread's state) was reset. ``run_id`` as for :meth:`inspect`."""
        with self._lock:
            key = self._tree.key_of(run_id)
            run = self._engine.runs.get(key) if key is not None else None
            if run is None:
                return False
            run.restart()
            return True

    def _active_runs(self) -> int:
        return len(self._engine.runs)

    def _shed_runs(self) -> int:
        return self._engine.shed

    def _config_changed(self, config: LoopGuardConfig) -> None:
        if self._engine.configure(config):
            self._tree.clear()

    def _report_verdict(
        self, run_id: str, verdict: Verdict, *, site: Site | None = None, nudge: bool = False
    ) -> None:
        super()._report_verdict(run_id, verdict, site=site, nudge=nudge)
        thread = site.thread_id if site is not None else None
        if verdict.stops and not verdict.tripped and not nudge and thread is not None:
            self._unrepaired.stopped(thread)

    def _model_started(
        self,
        run_id: RunId,
        parent_run_id: RunId | None,
        metadata: dict[str, Any] | None,
        sent: Sequence[BaseMessage] | None,
    ) -> None:
        """A model turn begins (a chat model's with its input ``sent``); a stopped run is
        aborted here, before the model is paid for."""
        tree = self._tree
        with self._lock:
            run = tree.start(run_id, parent_run_id, metadata, "model")
            if run is None:
                return
            if sent is None:
                verdicts = [run.decide("turn_start")]
            else:
                nested = run_id in tree.below_tools
                verdicts = run.model_called(run_id, sent, below_tool=nested)
        where = "on_llm_start" if sent is None else "on_chat_model_start"
        if sent is not None and run.per_thread and run.said is None:
            tree.threads.model_called(run, sent)  # a thread's answers this process never saw
        self._act(run.key, verdicts, where, run_id, parent_run_id)

    def _act(
        self,
        key: str,
        verdicts: Sequence[Verdict],
        where: str,
        run_id: RunId,
        parent_run_id: RunId | None,
        *,
        stop: bool = True,
    ) -> None:
        """Report the verdicts of the callback ``where`` of ``run_id``, then raise a stopping
        one if ``stop``. Called without the guard's lock: reporting runs other code."""
        reported = [verdict for verdict in verdicts if verdict.action != "allow"]
        if not reported:
            return
        with self._lock:
            root = self._tree.root_seen(run_id, parent_run_id)
            run = self._engine.find(key)
        base = self._site(where)
        thread_id = base.thread_id
        if thread_id is None and run is not None and run.per_thread:
            thread_id = key
        shown = run_text(root.id) if root is not None else base.run_id or key
        site = Site(base.integration, where, shown, thread_id)
        if run is not None:  # a stop as the user reads it: its remedy and what it cost
            reported = [run.stop_of(v) if v.stops else v for v in reported]
        for verdict in reported:
            self.report(key, verdict, site=site)
        for verdict in reported if stop else ():
            if verdict.stops:
                raise LoopDetected.from_verdict(verdict, run_id=key)

    def _fail_open(self, where: str, exc: Exception) -> None:
        """A callback raised ``exc``: a deliberate stop goes on up; the guard's own failure is
        logged once and the run goes on (SPEC §8). The callbacks LangChain calls at every step
        catch for themselves (a wrapper's call costs as much as a chain's bookkeeping)."""
        if isinstance(exc, LoopGuardError | GraphBubbleUp):
            raise exc
        self.internal_error(where, exc)


class LoopGuardCallbackHandler(_RunRegistry, BaseCallbackHandler):
    """Stop runaway agent loops from LangChain callbacks.

    Pass it with the run's configuration so that every nested callback reaches it::

        guard = LoopGuardCallbackHandler()
        agent.invoke({"messages": [...]}, {"callbacks": [guard]})

    Each top-level run (``invoke``, ``stream``…) gets its own detector, which its nested
    chains and subgraphs feed; concurrent runs stay apart. With ``scope="thread"`` the state
    belongs to the LangGraph ``thread_id`` and lasts across invocations, interrupts and resumes.

    When the agent loops (mode ``"on"``), the callback raises
    :class:`~langchain_loop_guard.LoopDetected`: from ``on_tool_start`` before the tool runs,
    from ``on_chat_model_start`` before the model is paid for, or from the end of the step
    that completed the loop. Reports reach the log, :meth:`status`, the verdict listeners,
    the traced LangSmith run and the ``"loop_guard"`` custom event, names and counts only
    (``docs/observability.md``). The guard's own failures never break the run.

    A loop found in a model's answer (the same answer again, or an answer whose calls would
    stop the run) is reported when the model answers and raised by the next step that starts
    after it, each parallel call's included, or by the invocation's end: none of the
    answer's calls runs, and the handlers after this one, LangSmith's tracer among them,
    still record the answer, so ``loop-guard replay`` of the trace stops where the run did.

    The handler goes with the run, never on a model or a tool (``with_config(callbacks=...)``,
    ``.callbacks``), where each call is a run of its own: it then logs one WARNING saying so.
    A callback can stop a run but not skip one call and go on, so ``nudges`` do not apply
    here; use :class:`~langchain_loop_guard.LoopGuardMiddleware` for that.

    Args:
        config: a :class:`~langchain_loop_guard.LoopGuardConfig`, a mapping of values (over
            files and environment), or ``None`` to load files and environment.
        clock: returns seconds, like :func:`time.monotonic` (the default).
        record_to: append every run's events to this file, digests only, for
            ``loop-guard replay`` (off by default; failing open).
        max_runs: runs (or threads) tracked at once (1024 by default). Beyond it, an idle
            run (no event for 5 minutes) or a thread between invocations is forgotten to make
            room, never a run in flight: the registry grows up to four times ``max_runs``, and
            beyond that a new run goes unguarded (a WARNING, ``status().shed_runs``).
        store: a LangGraph ``BaseStore`` with synchronous methods (``PostgresStore``,
            ``InMemoryStore``…) that keeps each thread's state (``scope="thread"``, or
            ``"auto"`` with a checkpointer) between invocations: read when an invocation
            joins the thread, written when it ends, digests and counters only. For a thread
            whose turns several processes serve (a deployment's workers). Without one, the
            handler guards its own process's share of such a thread, and says so once.
        **settings: any :class:`~langchain_loop_guard.LoopGuardConfig` key, snake_case
            (``mode="observe"``, ``tool_threshold_overrides={"search": 5}``): values passed in
            code, over ``config`` and over files and environment, validated at once like them.

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
        store: BaseStore | None = None,
        **settings: Any,
    ) -> None:
        if type(max_runs) is not int or max_runs < 1:
            raise bad_argument("max_runs", max_runs, "a whole number of at least 1", "int >= 1")
        super().__init__(config, clock=clock, record_to=record_to, settings=settings)
        install_callback_stop_filter(type(self).__name__)  # the guard logs its stops itself
        self.max_runs = max_runs
        """Runs (or threads) tracked at once; see the ``max_runs`` argument."""
        self._engine: RunEngine[CallbackRun] = RunEngine(
            self,
            CallbackRun,
            lambda: self.max_runs,
            scoped=self._run_config,
            scope_seen=self._scope_seen,
        )
        self._tree = RunTree(
            # read at each chain start: a call in C, where a lambda would add a Python frame
            self._engine,
            functools.partial(getattr, self, "max_open_runs"),
        )
        self._tree.threads = ThreadStore(store)
        self._unrepaired = StoppedThreads()  # checked once at their next model call
        # what each tool's annotations said at its start, for the calls of a model's answer
        self._tool_kinds = ToolKinds()

    @property
    def ignore_custom_event(self) -> bool:
        """The handler's own trace events are not for it."""
        return True

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
        if self._config.mode == "off":
            return
        try:
            parent = run_number(parent_run_id)
            with self._lock:
                self._tree.start(run_number(run_id), parent, metadata)
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self._fail_open("on_chain_start", exc)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the chain; the top-level run's end ends the run (``RunTree.end_invocation``)."""
        if self._config.mode == "off":
            return
        try:
            with self._lock:
                self._tree.end_invocation(run_number(run_id))
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self._fail_open("on_chain_end", exc)

    @_guarded
    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the chain; the top-level run's end ends the run."""
        with self._lock:
            self._tree.end(run_number(run_id))

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
        parent = run_number(parent_run_id)
        with self._lock:
            self._tree.start(run_number(run_id), parent, metadata)

    @_guarded
    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the retriever."""
        with self._lock:
            self._tree.end(run_number(run_id))

    @_guarded
    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the retriever."""
        with self._lock:
            self._tree.end(run_number(run_id))

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
        The first model turn on a thread after one of this handler's stops warns (once) when
        the stop left calls unanswered that no repair answered."""
        if self._config.mode == "off":
            return
        try:
            sent = messages[0] if messages else ()
            self._unrepaired.check(metadata, sent)
            parent = run_number(parent_run_id)
            self._model_started(run_number(run_id), parent, metadata, sent)
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self._fail_open("on_chat_model_start", exc)

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
        """A (text-completion) model turn begins: its input is not looked into."""
        parent = run_number(parent_run_id)
        self._model_started(run_number(run_id), parent, metadata, None)

    def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """The model answered; a stop is reported here and held for the next step."""
        if self._config.mode == "off":
            return
        try:
            model_run, parent = run_number(run_id), run_number(parent_run_id)
            with self._lock:
                found = self._tree.resolve(model_run, parent)
                tracked, thread = found is not None, found is not None and found.per_thread
            if tracked:  # digested outside the lock: other runs' callbacks need not wait
                limits = limits_of(self.config)
                compared = thread or limits.sketches_replies
                keyed = self.recorder is not None or not limits.aware
                hinted = self._tool_kinds.acts
                answer = ModelAnswer(response, limits, hinted, compared=compared, keyed=keyed)
            with self._lock:
                run = self._tree.resolve(model_run, parent)
                verdict = ALLOW
                held = False
                if run is not None and tracked:
                    answer.spent(run.ledger, run.detector.config.ignore_tools)
                    verdict = run.answer(answer, model_run)
                    if verdict.stops:  # its calls are refused, never counted as unexecuted ones
                        held = self._tree.hold(run, model_run, parent, verdict)
                    else:
                        run.announce(answer)
                self._tree.end(model_run)
            if run is not None and verdict.action != "allow":
                where = "on_llm_end"
                self._act(run.key, (verdict,), where, model_run, parent, stop=not held)
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self._fail_open("on_llm_end", exc)

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
        model_run, parent = run_number(run_id), run_number(parent_run_id)
        with self._lock:
            run = self._tree.resolve(model_run, parent)
            if run is not None:
                run.in_context.pop(model_run, None)
            self._tree.end(model_run)

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
        if self._config.mode == "off":
            return
        try:
            name = (serialized or {}).get("name") or kwargs.get("name") or _UNKNOWN_TOOL
            name = safe_tool_name(name)
            call_id = kwargs.get("tool_call_id")
            # digested before the lock is taken: other runs' callbacks need not wait for it
            arguments = inputs if inputs is not None else input_str
            hint = self._tool_kinds.started(name, metadata, serialized)  # its MCP annotations
            acts = limits_of(self.config).acts(name, hint)
            signature, tokens = call_digests(name, arguments, acts)
            tool_run, parent = run_number(run_id), run_number(parent_run_id)
            with self._lock:
                run = self._tree.place(tool_run, parent, metadata, "tool")
                if run is None:
                    return
                if call_id is not None:
                    run.announced.pop(call_id, None)
                self._tree.refuse(run, tool_run)
                verdict = run.tool_started(tool_run, name, signature, call_id, tokens)
                if verdict.stops:
                    self._tree.end(tool_run)  # the tool will not report an end
            if verdict.action != "allow":
                self._act(run.key, (verdict,), "on_tool_start", tool_run, parent)
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self._fail_open("on_tool_start", exc)

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """A tool returned: an error ``ToolMessage`` (``handle_tool_error``) is an error, and a
        ``Command`` (or a list of them) is taken by the content of its tool messages."""
        if self._config.mode == "off":
            return
        try:
            parent = run_number(parent_run_id)
            self._tool_ended("on_tool_end", run_number(run_id), parent, tool_outcome(output))
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self._fail_open("on_tool_end", exc)

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
        tool_run, parent = run_number(run_id), run_number(parent_run_id)
        if not isinstance(error, GraphInterrupt):
            self._tool_ended("on_tool_error", tool_run, parent, Outcome(None, error))
            return
        with self._lock:
            run = self._tree.resolve(tool_run, parent)
            if run is not None:
                run.tool_paused(tool_run)
            self._tree.end(tool_run)

    def _tool_ended(
        self, where: str, run_id: RunId, parent_run_id: RunId | None, result: Outcome
    ) -> None:
        """Feed a tool's result, digested outside the lock (the handler's heaviest work)."""
        with self._lock:
            run = self._tree.resolve(run_id, parent_run_id, touch=False)
            started = run.tools.get(run_id) if run is not None else None
        digested = None  # None: not tracked (yet) when the result was digested
        if started is not None:
            name, _, tokens = started
            volatile = limits_of(self.config).volatile_of(name)
            digested = outcome(
                result.output, error=result.error, tool=name, tokens=tokens, volatile=volatile
            )
        failed = result.error is not None
        with self._lock:
            run = self._tree.resolve(run_id, parent_run_id)
            verdict = ALLOW if run is None else run.tool_ended(run_id, digested, failed=failed)
            self._tree.end(run_id)
        if run is not None and verdict.action != "allow":
            self._act(run.key, (verdict,), where, run_id, parent_run_id)
