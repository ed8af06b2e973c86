"""The callback handler's run tree: which top-level run (or thread) each callback belongs to.

Everything here is bounded; late events of runs that ended or were not tracked are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langgraph.config import get_config

from langchain_loop_guard._core._detector import Verdict
from langchain_loop_guard._core._scope import choose_scope, has_checkpointer
from langchain_loop_guard._integrations._callback_runs import CallbackRun
from langchain_loop_guard._integrations._engine import RunEngine, bounded_put
from langchain_loop_guard._integrations._run_ids import RunId, run_number, run_text
from langchain_loop_guard._integrations._runtime import logger
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard._integrations._thread_store import ThreadStore

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["Root", "RunTree"]

_MAX_CLOSED = 2048  # ended runs remembered (late events arrive within moments of the end)
_MAX_ROOTS = 64  # invocations in flight that feed one thread's state (older ones still count)
_MAX_SHED = 4096  # ids of runs not tracked (shed or forgotten), so their late events are ignored

_Metadata = Mapping[str, Any] | None  # a callback's ``metadata``


@dataclass(slots=True, eq=False)
class Root:
    """A top-level run (an invocation): the run it feeds, and how many of its nested runs are
    still open."""

    id: RunId
    key: str
    run: CallbackRun | None = None
    """The run it feeds, while it is one of the run's invocations; ``None`` before its scope is
    decided, once it ended or stopped being a root of its own, or once the registry forgot the
    run (:meth:`RunTree.run_of` then asks the registry)."""
    open: int = 0
    """How many entries of :attr:`RunTree.open` may name it (its own included): at its end,
    the open runs are searched for its runs that never reported their end only when some are
    left."""
    ended: bool = False
    thread: str | None = None
    """With ``scope="auto"``, the ``thread_id`` of an invocation whose scope its first model or
    tool call decides (:meth:`RunTree.settle_scope`): it has no run until then."""


class RunTree:
    """Callback run ids, each resolved to its top-level run and to that run's record; the
    handler calls it under the guard's lock."""

    def __init__(
        self,
        engine: RunEngine[CallbackRun],
        max_open: Callable[[], int],
    ) -> None:
        self.engine = engine
        engine.forgotten = self.forget
        self._max_open = max_open
        self.roots: dict[RunId, Root] = {}
        """Top-level runs in flight."""
        self.open: dict[RunId, Root] = {}
        """Runs in flight, nested ones included, with their top-level run."""
        self.closed: dict[RunId, Root] = {}
        """Runs that ended recently; with :attr:`closed_before`, the last 2048 to 4096 (two
        generations of plain dicts: an end adds one entry, and never drops the oldest)."""
        self.closed_before: dict[RunId, Root] = {}
        """The generation of ended runs before :attr:`closed`."""
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
        run = root.run if root is not None else None
        if root is None or run is None:
            located = self._locate(run_id, parent_run_id, metadata, event)
            if located is None:
                return None
            root, run = located
        if (self.below_tools and parent_run_id in self.below_tools) or parent_run_id in run.tools:
            bounded_put(self.below_tools, run_id, None, _MAX_CLOSED)
        self._open(run_id, root)
        if event != "chain":  # a run is active by its model and tool calls
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
                or self._ended(parent_run_id)
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
        root.open += 1
        while len(tracked) > self._max_open():
            tracked.pop(next(iter(tracked))).open -= 1

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
        root.key, root.run = run.key, run
        run.invocations[root.id] = None
        if run.per_thread:
            self.threads.joined(run)
        if len(run.invocations) > _MAX_ROOTS:
            # a thread whose invocations never report their end: the oldest stops being a
            # root of its own (its nested runs still count toward the thread)
            oldest = next(iter(run.invocations))
            del run.invocations[oldest]
            demoted = self.roots.pop(oldest, None)
            if demoted is not None:
                demoted.run = None  # found by its key from now on, as a late event's root is

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
        for member in (root.id, run_id, *self._close(root)):
            self.open.pop(member, None)
            bounded_put(self.shed, member, None, _MAX_SHED)

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
        run = self.run_of(root)
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

    def run_of(self, root: Root) -> CallbackRun | None:
        """The record ``root`` feeds: its run, or (once it is no invocation of it) the one its
        key names, in progress or stopped and ended recently."""
        return root.run if root.run is not None else self.engine.find(root.key)

    def end(self, run_id: RunId) -> Root | None:
        """A run ended: forget it, and end its top-level run if it was one (returned)."""
        if self.below_tools:
            self.below_tools.pop(run_id, None)
        root = self.open.pop(run_id, None)
        if root is not None:
            root.open -= 1
            self._remember_end(run_id, root)
            if root.id != run_id:
                return None  # a step of an invocation (the common case)
        top = self.roots.pop(run_id, None)
        if top is None:
            return None
        if top is not root:  # never in the open runs (a parent taken as the top), or dropped
            self._remember_end(top.id, top)
        for member in self._close(top):
            self.open.pop(member, None)
            self._remember_end(member, top)
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

    def root_seen(self, run_id: RunId, parent_run_id: RunId | None) -> Root | None:
        """The top-level run of a run in flight (or of its parent), or of one ended recently."""
        return self.root_of(run_id, parent_run_id) or self._ended(run_id)

    def _remember_end(self, run_id: RunId, root: Root) -> None:
        """Remember that ``run_id`` (of ``root``) ended, among the last 2048 to 4096 runs."""
        closed = self.closed
        closed[run_id] = root
        if len(closed) >= _MAX_CLOSED:
            self.closed_before, self.closed = closed, {}

    def _ended(self, run_id: RunId) -> Root | None:
        """The top-level run of ``run_id`` if it ended recently (:meth:`_remember_end`)."""
        return self.closed.get(run_id) or self.closed_before.get(run_id)

    def _close(self, root: Root) -> list[RunId]:
        """End ``root``: its runs still in :attr:`open` (which it no longer feeds), found only
        when some never reported their end."""
        root.ended, root.run = True, None
        if root.open <= 0:
            return []
        root.open = 0
        return [run_id for run_id, owner in self.open.items() if owner is root]

    def forget(self, run: CallbackRun) -> None:
        """The registry forgot ``run``: forget its invocations, their ids kept in :attr:`shed`."""
        for root_id in run.invocations:
            bounded_put(self.shed, root_id, None, _MAX_SHED)
            root = self.roots.pop(root_id, None)
            if root is not None:
                for member in self._close(root):
                    self.open.pop(member, None)
                    bounded_put(self.shed, member, None, _MAX_SHED)

    def clear(self) -> None:
        """Forget the whole tree (the guard was switched off)."""
        for tracked in (self.roots, self.open, self.closed, self.closed_before, self.shed):
            tracked.clear()
