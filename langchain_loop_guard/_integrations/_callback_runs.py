"""The callback handler's runs: the calls each awaits, and the tree callbacks are placed in.

Everything here is bounded; late events of runs that ended or were not tracked are ignored.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.config import get_config

from langchain_loop_guard._core._canonical import digest
from langchain_loop_guard._core._detector import ALLOW, DetectorEvent, Verdict
from langchain_loop_guard._core._scope import choose_scope, has_checkpointer
from langchain_loop_guard._core._signature import Outcome, assistant_key, outcome
from langchain_loop_guard._core._view import limits_of
from langchain_loop_guard._integrations._engine import Run, RunEngine, bounded_put
from langchain_loop_guard._integrations._guard_messages import MESSAGE_NAME
from langchain_loop_guard._integrations._model_answer import call_digests
from langchain_loop_guard._integrations._outcomes import previous_answer, tool_outcome
from langchain_loop_guard._integrations._publish import Site
from langchain_loop_guard._integrations._run_ids import RunId, run_number, run_text
from langchain_loop_guard._integrations._runtime import logger
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard._integrations._thread_store import ThreadStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from langchain_loop_guard._integrations._model_answer import ModelAnswer, Named

__all__ = ["CallbackRun", "Root", "RunTree"]

_MAX_CLOSED = 2048  # ended runs remembered (late events arrive within moments of the end)
_MAX_ROOTS = 64  # invocations in flight that feed one thread's state (older ones still count)
_MAX_SHED = 4096  # ids of runs not tracked (shed or forgotten), so their late events are ignored

_MAX_ANNOUNCED = 64  # tool calls a model named that no tool has started yet, per run
_MAX_TOOLS = 256  # tool runs in flight, per run

_Metadata = Mapping[str, Any] | None  # a callback's ``metadata``


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


@dataclass(slots=True, eq=False)
class Root:
    """A top-level run (an invocation): the run it feeds, and its nested runs still open."""

    id: RunId
    key: str
    members: set[RunId] = field(default_factory=set)
    ended: bool = False
    thread: str | None = None
    """With ``scope="auto"``, the ``thread_id`` of an invocation whose scope its first model or
    tool call decides (:meth:`RunTree.settle_scope`): it has no run until then."""


class RunTree:
    """Callback run ids, each resolved to its top-level run and to that run's record."""

    def __init__(
        self,
        engine: RunEngine[CallbackRun],
        max_open: Callable[[], int],
        *,
        lock: AbstractContextManager[object],
        site: Callable[[str | None], Site],
    ) -> None:
        self.engine = engine
        self.lock = lock
        """The guard's lock, held while the tree or a run changes."""
        self.site = site
        """Where the verdict being reported happened (the guard's view of the running call)."""
        engine.forgotten = self.forget
        self._max_open = max_open
        self.roots: dict[RunId, Root] = {}
        """Top-level runs in flight."""
        self.open: dict[RunId, Root] = {}
        """Runs in flight, nested ones included, with their top-level run."""
        self.closed: OrderedDict[RunId, Root] = OrderedDict()
        """Runs that ended recently, the oldest first (an ``OrderedDict``: dropping the oldest
        at every end takes constant time, where a dict's first entry is found past the ones
        deleted before it)."""
        self.shed: dict[RunId, None] = {}
        """Ids of runs not tracked (shed, or forgotten): their events are ignored."""
        self.below_tools: dict[RunId, None] = {}
        """Runs inside a tool call (a sub-agent a supervisor's tool invokes): their human
        messages are the tool's input, never the user's (SPEC §14 R20)."""
        self._warned_attached_below = False
        self.threads = ThreadStore(None)
        """Where threads' state lives between invocations (the handler's ``store``)."""

    def refuse(self, run: CallbackRun, run_id: RunId) -> None:
        """Raise the stop held for the invocation the step ``run_id`` is part of, if any."""
        if run.held is None:
            return
        root = self.open.get(run_id)
        held = run.due(root.id) if root is not None else None
        if held is not None:
            self.end(run_id)
            raise LoopDetected.from_verdict(held.verdict, run_id=run.key)

    def start(
        self, run_id: RunId, parent_run_id: RunId | None, metadata: _Metadata, event: str = "chain"
    ) -> CallbackRun | None:
        """:meth:`place` a starting run; :meth:`refuse` it after a stopped answer of its run."""
        run = self.place(run_id, parent_run_id, metadata, event)
        if run is not None and run.held is not None:
            self.refuse(run, run_id)
        return run

    def place(
        self, run_id: RunId, parent_run_id: RunId | None, metadata: _Metadata, event: str = "chain"
    ) -> CallbackRun | None:
        """Place a starting run in the tree; the record of its top-level run, or ``None`` for a
        late event of a run that ended (unless stopped: its record is kept a while) or is not
        tracked: a late event never starts a detector of its own."""
        root = self.open.get(parent_run_id) if parent_run_id is not None else None
        # the common case, a step of an invocation in flight: its root's run, found at once
        run = self.engine.find(root.key) if root is not None and root.thread is None else None
        if root is None or run is None:
            located = self._locate(run_id, parent_run_id, metadata, event)
            if located is None:
                return None
            root, run = located
        if parent_run_id in self.below_tools or parent_run_id in run.tools:
            bounded_put(self.below_tools, run_id, None, _MAX_CLOSED)
        self._open(run_id, root)
        self.engine.touch(run)
        return run

    def _locate(
        self, run_id: RunId, parent_run_id: RunId | None, metadata: _Metadata, event: str
    ) -> tuple[Root, CallbackRun] | None:
        """:meth:`place` the long way: a new top-level run, a late event, a run not tracked, or
        an invocation whose scope waits for its first model or tool call."""
        root = None
        if parent_run_id is not None:
            if parent_run_id in self.shed:
                bounded_put(self.shed, run_id, None, _MAX_SHED)
                return None
            root = (
                self.open.get(parent_run_id)
                or self.roots.get(parent_run_id)
                or self.closed.get(parent_run_id)
            )
        if root is None:
            # no parent: a new top-level run; a parent never seen (a handler attached below
            # the top) is taken as the top
            root_id = run_id if parent_run_id is None else parent_run_id
            if event != "chain" and (
                parent_run_id is not None or "langgraph_node" in (metadata or {})
            ):  # a model or tool call inside a run this handler was not given
                self._warn_attached_below(event)
            root = self._new_root(root_id, metadata)
            if root is None:
                bounded_put(self.shed, root_id, None, _MAX_SHED)
                bounded_put(self.shed, run_id, None, _MAX_SHED)
                return None
        if root.thread is not None:  # an invocation whose scope is not decided yet
            if event == "chain":
                self._open(run_id, root)
                return None  # nothing to guard before its first model or tool call
            run = self.settle_scope(root)
            if run is None:
                self._shed(root, run_id)
                return None
            return root, run
        run = self.engine.find(root.key)
        if run is None:
            return None  # its run ended (or was forgotten): nothing left to track
        return root, run

    def _open(self, run_id: RunId, root: Root) -> None:
        """Track ``run_id`` as a run in flight of ``root``, the oldest dropped beyond the bound."""
        tracked = self.open
        tracked[run_id] = root  # run ids are unique: this is the newest entry
        root.members.add(run_id)
        while len(tracked) > self._max_open():
            oldest = next(iter(tracked))
            tracked.pop(oldest).members.discard(oldest)

    def _new_root(self, root_id: RunId, metadata: _Metadata) -> Root | None:
        """Register a top-level run, keyed by its id or (``scope="thread"``) its thread; ``None``
        when the registry is full of runs in flight. With ``scope="auto"`` and a thread id, its
        run waits for its scope (:meth:`settle_scope`)."""
        thread_id = (metadata or {}).get("thread_id")
        configured = self.engine.guard.config.scope
        # whether there is a checkpointer shows in the config of a node, not of the invocation
        choice = choose_scope(configured, thread_id, checkpointer=False)
        if configured == "auto" and choice.reason == "no_checkpointer":
            root = Root(root_id, run_text(root_id), thread=str(thread_id))
            self.roots[root_id] = root
            return root
        key = str(thread_id) if choice.per_thread else run_text(root_id)
        run = self.engine.begin(key, scope=choice)
        if run is None:
            return None
        root = Root(root_id, run.key)
        self.roots[root_id] = root
        self._join(root, run)
        return root

    def _join(self, root: Root, run: CallbackRun) -> None:
        """``root`` (an invocation) feeds ``run``."""
        root.key = run.key
        run.invocations[root.id] = None
        if run.per_thread:
            self.threads.joined(run)
        if len(run.invocations) > _MAX_ROOTS:
            # a thread whose invocations never report their end: the oldest stops being a
            # root of its own (its nested runs still count toward the thread)
            oldest = next(iter(run.invocations))
            del run.invocations[oldest]
            self.roots.pop(oldest, None)

    def settle_scope(self, root: Root) -> CallbackRun | None:
        """Decide the scope of an invocation with a ``thread_id`` (``scope="auto"``) at its first
        model or tool call, whose config tells whether the graph has a checkpointer: a
        conversation joins its thread's run, anything else is guarded alone; ``None`` when the
        registry is full of runs in flight."""
        thread, root.thread = root.thread, None
        try:
            checkpointed = has_checkpointer(get_config())
        except RuntimeError:  # not inside a runnable: no graph, no checkpointer
            checkpointed = False
        choice = choose_scope("auto", thread, checkpointer=checkpointed)
        key = thread if choice.per_thread and thread is not None else run_text(root.id)
        run = self.engine.begin(key, scope=choice)
        if run is not None:
            self._join(root, run)
        return run

    def _shed(self, root: Root, run_id: RunId) -> None:
        """Stop tracking an invocation the registry has no room for (and ``run_id``, its step):
        their late events are ignored."""
        self.roots.pop(root.id, None)
        root.ended = True
        for member in (root.id, run_id, *root.members):
            self.open.pop(member, None)
            bounded_put(self.shed, member, None, _MAX_SHED)
        root.members.clear()

    def _warn_attached_below(self, event: str) -> None:
        """Say once that the handler sits on a model or a tool, where it guards nothing."""
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

    def root_of(self, run_id: RunId, parent_run_id: RunId | None = None) -> Root | None:
        """The top-level run of a run in flight (or, failing that, of its parent)."""
        root = self.open.get(run_id)
        if root is None and parent_run_id is not None:
            root = self.open.get(parent_run_id)
        return root

    def resolve(
        self, run_id: RunId, parent_run_id: RunId | None, *, touch: bool = True
    ) -> CallbackRun | None:
        """The record an event of a started run belongs to (``None`` if its start was missed)."""
        root = self.root_of(run_id, parent_run_id)
        if root is None:
            return None
        run = self.engine.find(root.key)
        if run is not None and touch:
            self.engine.touch(run)
        return run

    def hold(
        self, run: CallbackRun, model_run: RunId, parent_run_id: RunId | None, verdict: Verdict
    ) -> bool:
        """Hold a stop decided at the answer of ``model_run`` for the later steps of its
        invocation; whether it is held: only inside a chain still open that the handler saw
        start (otherwise no later event may come, and the stop is raised at once)."""
        root = self.open.get(model_run)
        if root is None or root.ended or parent_run_id not in self.open:
            return False
        run.hold(verdict, root.id)
        return True

    def end(self, run_id: RunId) -> Root | None:
        """A run ended: forget it, and end its top-level run if it was one (returned)."""
        root = self.open.pop(run_id, None)
        if root is not None:
            root.members.discard(run_id)
            closed = self.closed
            closed[run_id] = root  # run ids are unique: this is the newest entry
            if len(closed) > _MAX_CLOSED:
                closed.popitem(last=False)
        if self.below_tools:
            self.below_tools.pop(run_id, None)
        top = self.roots.pop(run_id, None)
        if top is None:
            return None
        top.ended = True
        bounded_put(self.closed, top.id, top, _MAX_CLOSED)
        for member in top.members:
            self.open.pop(member, None)
            bounded_put(self.closed, member, top, _MAX_CLOSED)
        top.members.clear()
        run = self.engine.runs.get(top.key)
        if run is not None:
            self.engine.end(run, top.id)
            if run.per_thread:
                self.threads.left(run)
        return top

    def end_invocation(self, run_id: RunId) -> None:
        """A chain ended; if it was an invocation, raise the stop held for it that no step
        raised (nothing started after the stopped answer)."""
        root = self.end(run_id)
        if root is None:
            return
        run = self.engine.find(root.key)
        held = run.due(root.id, unraised=True) if run is not None else None
        if held is not None:
            raise LoopDetected.from_verdict(held.verdict, run_id=root.key)

    def key_of(self, run_id: str | UUID | None) -> str | None:
        """The key of the run ``run_id`` names (an invocation's id, or a run's key); the most
        recently active run's when ``None``."""
        if run_id is None:
            return self.engine.last
        root = self.roots.get(run_number(run_id))
        return root.key if root is not None else str(run_id)

    def model_started(
        self,
        run_id: RunId,
        parent_run_id: RunId | None,
        metadata: _Metadata,
        sent: Sequence[BaseMessage] | None,
    ) -> None:
        """A model turn begins (a chat model's with its input ``sent``); a stopped run is
        aborted here, before the model is paid for."""
        with self.lock:
            run = self.start(run_id, parent_run_id, metadata, "model")
            if run is None:
                return
            if sent is None:
                verdicts = [run.decide("turn_start")]
            else:
                nested = run_id in self.below_tools
                verdicts = run.model_called(run_id, sent, below_tool=nested)
        where = "on_llm_start" if sent is None else "on_chat_model_start"
        if sent is not None and run.per_thread and run.said is None:
            self.threads.model_called(run, sent)  # a thread's answers this process never saw
        self.act(run.key, verdicts, where, run_id, parent_run_id)

    def act(
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
        guard = self.engine.guard
        with self.lock:
            root = self.root_of(run_id, parent_run_id) or self.closed.get(run_id)
            run = self.engine.find(key)
        base = self.site(where)
        thread_id = base.thread_id
        if thread_id is None and run is not None and run.per_thread:
            thread_id = key
        shown = run_text(root.id) if root is not None else base.run_id or key
        site = Site(base.integration, where, shown, thread_id)
        if run is not None:  # a stop as the user reads it: its remedy and what it cost
            reported = [run.stop_of(v) if v.stops else v for v in reported]
        for verdict in reported:
            guard.report(key, verdict, site=site)
        for verdict in reported if stop else ():
            if verdict.stops:
                raise LoopDetected.from_verdict(verdict, run_id=key)

    def forget(self, run: CallbackRun) -> None:
        """The registry forgot ``run``: forget its invocations, their ids kept in :attr:`shed`."""
        for root_id in run.invocations:
            bounded_put(self.shed, root_id, None, _MAX_SHED)
            root = self.roots.pop(root_id, None)
            if root is not None:
                root.ended = True
                for member in root.members:
                    self.open.pop(member, None)
                    bounded_put(self.shed, member, None, _MAX_SHED)
                root.members.clear()

    def clear(self) -> None:
        """Forget the whole tree (the guard was switched off)."""
        for tracked in (self.roots, self.open, self.closed, self.shed):
            tracked.clear()


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
