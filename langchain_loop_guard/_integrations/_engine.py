"""The run life cycle every guard drives: written once, with no host in it (no LangChain).

A *run* (:class:`Run`) is what one detector watches: a top-level invocation, or with
``scope="thread"`` a LangGraph thread. The handler keeps its runs in a :class:`RunEngine`; the
graph guards keep theirs (and a held stop, as the step that raises it may run in another
process) in the graph state, making the record afresh for each pass. The adapters drive the
steps and act on what they return: nothing here raises or touches a message.

====  ==========================  ========================  ==================================
#     step                        here                      driven by
====  ==========================  ========================  ==================================
1     a run begins                ``RunEngine.begin``,      handler: a new top-level run;
                                  ``Run.restart``           graph: a human message (run scope)
2     an event is decided         ``Run.decide``            each callback; each message of a
                                                            graph pass
3     a human message releases    ``Run.human_message``     a model call with a new one; one
      a thread                                              in a graph pass
4     a stop is nudged or kept    ``Run.settle``            graph, while ``nudges`` last
5     a stop is held              ``Run.hold``              handler: a stop in an answer
6     a held stop is raised       ``Run.due``               handler: the invocation's next
                                                            step, or its end
7     a run ends                  ``RunEngine.end``         handler: its last invocation
8     the registry evicts         ``RunEngine.begin``       the least recently active idle run
====  ==========================  ========================  ==================================

The handler calls every step under its lock; a graph pass owns its record alone.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from langchain_loop_guard._core._cost import CostLedger
from langchain_loop_guard._core._detector import Verdict
from langchain_loop_guard._core._messages import stopped_after_nudge
from langchain_loop_guard._core._public import safe_tool_name
from langchain_loop_guard._core._remedy import with_remedy
from langchain_loop_guard._core._scope import ScopeChoice, choose_scope
from langchain_loop_guard._core._stop_cost import with_cost
from langchain_loop_guard._integrations._runtime import inspection_later, logger

if TYPE_CHECKING:
    from langchain_loop_guard._core._config import LoopGuardConfig
    from langchain_loop_guard._core._detector import LoopDetector
    from langchain_loop_guard._core._status import RunInspection
    from langchain_loop_guard._integrations._runtime import DetectorCall, GuardRuntime

__all__ = ["Held", "Run", "RunEngine", "bounded_put"]

IDLE_S = 300.0  # a run with no event for this long may be forgotten when the registry is full
HARD_FACTOR = 4  # runs in flight are tracked up to this many times the capacity
_MAX_FINISHED = 32  # inspections of ended runs kept for ``inspect``
_MAX_STOPPED = 32  # records of ended, stopped runs kept for their late events
_MAX_HUMANS = 64  # human messages remembered per run (as many as its invocations in flight)

_K = TypeVar("_K")
_V = TypeVar("_V")


def bounded_put(bounded: dict[_K, _V], key: _K, value: _V, limit: int) -> None:
    """Insert into an insertion-ordered dict as its newest entry, dropping the oldest entries
    beyond ``limit``."""
    bounded.pop(key, None)
    bounded[key] = value
    while len(bounded) > limit:
        del bounded[next(iter(bounded))]


@dataclass(slots=True, eq=False)
class Held:
    """A stop decided at one step and raised at a later one: ``at`` names the invocation (the
    handler) or the model answer (the graph guards) whose later steps it refuses."""

    at: object
    verdict: Verdict
    raised: bool = False


@dataclass(slots=True, eq=False)
class Run:
    """One run's life: its detector, its held stop, its nudges, the human message it saw."""

    key: str
    """The run's id as :attr:`LoopDetected.run_id` names it: the top-level run's, or the
    thread's with ``scope="thread"``."""
    detector: LoopDetector
    guard: GuardRuntime = field(repr=False)
    scope: ScopeChoice = field(default_factory=lambda: choose_scope("run", None, False))
    """The scope the run is guarded in, and why (``scope="auto"`` resolved)."""
    seen: float = 0.0
    """The registry's clock at the run's latest event."""
    invocations: dict[Any, None] = field(default_factory=dict)
    """Invocations in flight that feed the run (several only with ``scope="thread"``), oldest
    first. A run without one is between invocations: the registry may forget it."""
    humans: dict[object, None] = field(default_factory=dict)
    """The human messages the run's model was called with (ids, or positions and texts), the
    newest last: each releases a thread once, however the model calls of invocations that
    overlap on the thread (double texting) interleave."""
    held: Held | None = None
    nudged: int = 0
    last_nudge: object = None
    """``[key, count]`` of the verdict the last nudge answered (as stored: checked when read)."""
    ledger: CostLedger = field(default_factory=CostLedger)
    """The run's model answers and their token usage, for what a loop cost (the handler
    keeps it as answers come; a graph pass reads it from the thread's messages)."""

    @property
    def per_thread(self) -> bool:
        """Whether the run is a thread (a conversation), not one invocation."""
        return self.scope.per_thread

    def decide(self, event: DetectorCall, *args: Any, **kwargs: Any) -> Verdict:
        """Give the detector one event; fail open (see :meth:`GuardRuntime.decide`)."""
        return self.guard.decide(self.detector, event, *args, **kwargs)

    def restart(self) -> None:
        """Start the run afresh: counters, history, trip, held stop and nudges."""
        self.decide("reset")
        self.held = None
        self.nudged = 0
        self.last_nudge = None
        self.ledger.clear()

    def human_message(self, latest: object, text: object = None) -> Verdict | None:
        """A model was called with ``latest`` as its last human message (``text``: its
        content): a new one releases a thread (the first one a run sees is only remembered);
        the verdict when released. A message seen before is no new one: an invocation that
        overlaps another on the thread calls the model with its own latest message, which
        does not lift the other's stop."""
        if latest is None or latest in self.humans:
            return None
        first = not self.humans
        bounded_put(self.humans, latest, None, _MAX_HUMANS)
        return None if first else self.release(text)

    def release(self, text: object = None) -> Verdict:
        """A new human message on a thread (``text``: its content, when known): the detector
        lifts the trip and keeps the history (SPEC §11 N3). The same for every integration
        (SPEC §13 C2): the message is answered; a loop that goes on (the same reply again) is
        stopped at once, as the history still holds it; a different course clears it; the
        same question answered as before is consistency (§14 N18)."""
        return self.decide("user_message", text)

    def human_turn(self, text: object = None) -> Verdict | None:
        """A human message (``text``: its content) starts the next turn of the conversation:
        a thread is released (:meth:`release`), a run restarts; the verdict when released."""
        if self.per_thread:
            return self.release(text)
        self.restart()
        return None

    def settle(self, verdict: Verdict, nudges: int) -> Verdict | None:
        """Spend a nudge on a stopping ``verdict`` (``None``: the trip lifted, the history kept),
        or keep it as the run's stop, returned as reported (with the real reason and count)."""
        if not verdict.tripped and self.nudged < nudges:
            self.detector.release()
            self.nudged += 1
            self.last_nudge = [verdict.key, verdict.count]
            return None
        original = self.detector.tripped
        if verdict.tripped and original is not None and not original.tripped:
            verdict = dataclasses.replace(original, action=verdict.action)
        last = self.last_nudge
        if not isinstance(last, list | tuple) or len(last) != 2 or last[0] is None:
            return self.stop_of(verdict)
        key, nudged = last
        if key != verdict.key or type(nudged) is not int or verdict.count > nudged:
            # another loop, or one whose count went on (an error streak, say)
            return self.stop_of(verdict)
        count = nudged + 1
        return self.stop_of(
            dataclasses.replace(
                verdict,
                count=count,
                message=stopped_after_nudge(verdict.tool, count, self.detector.config.locale),
            )
        )

    def stop_of(self, verdict: Verdict) -> Verdict:
        """A stopping ``verdict`` as the user reads it, in every integration alike: its message
        names the configuration keys that would have let the run go on (SPEC §13 C4), and
        says what the loop cost when the model reported its usage."""
        locale = self.detector.config.locale
        return with_cost(with_remedy(verdict, locale), self.ledger, locale)

    def hold(self, verdict: Verdict, at: object) -> None:
        """Hold a stop decided now, to be raised by the later steps ``at`` names."""
        self.held = Held(at, self.stop_of(verdict))

    def due(self, at: object, *, unraised: bool = False) -> Held | None:
        """The held stop a step of ``at`` must raise (only one no step raised yet, with
        ``unraised``: an invocation's end); it counts as raised."""
        held = self.held
        if held is None or held.at != at or (unraised and held.raised):
            return None
        held.raised = True
        return held


R = TypeVar("R", bound=Run)


class RunEngine(Generic[R]):
    """The runs one guard keeps in memory, bounded by the handler's ``max_runs``; ended runs
    leave their inspection, and stopped ones their record a while for late events."""

    def __init__(
        self,
        guard: GuardRuntime,
        make: Callable[..., R],
        capacity: Callable[[], int],
        *,
        scoped: Callable[[ScopeChoice, LoopGuardConfig | None], LoopGuardConfig],
        scope_seen: Callable[[ScopeChoice], None],
    ) -> None:
        self.guard = guard
        self.scoped = scoped
        """The configuration of a run's detector in a scope (``None``: the one in force)."""
        self.scope_seen = scope_seen
        """Told the scope of the run being served (``status`` shows the latest)."""
        self.capacity = capacity
        """The registry's capacity, read at each new run (the handler's ``max_runs``)."""
        self._make = make
        self.forgotten: Callable[[R], None] = lambda run: None
        """Told of every run the registry forgets to make room (the run tree forgets it too)."""
        self.now: Callable[[], float] = time.monotonic
        """The registry's clock (an injected clock is the detectors' own, for elapsed time)."""
        self.runs: dict[str, R] = {}
        """Runs in progress, least recently active first."""
        self.stopped: dict[str, R] = {}
        self.finished: dict[str, Callable[[], RunInspection]] = {}
        """Ended runs' inspections, each made when asked for."""
        self.shed = 0
        self.last: str | None = None
        """The most recently active run's key."""

    def begin(self, key: str, *, scope: ScopeChoice) -> R | None:
        """The run ``key`` (a new one, unless it is a thread already in progress), or ``None``
        when the registry is full of runs in flight."""
        run = self.runs.get(key)
        if run is not None:
            return run
        capacity = self.capacity()
        if (
            len(self.runs) >= capacity
            and not self._make_room(capacity)
            and len(self.runs) >= HARD_FACTOR * capacity
        ):
            self.shed += 1
            if self.shed & (self.shed - 1) == 0:  # 1, 2, 4, 8…: loud, but not one line per run
                logger.warning(
                    "loop-guard: %d runs in flight fill the registry (%d times max_runs=%d); "
                    "run=%s is not guarded (%d runs shed so far). Raise max_runs.",
                    len(self.runs),
                    HARD_FACTOR,
                    capacity,
                    safe_tool_name(key),
                    self.shed,
                )
            return None
        self.stopped.pop(key, None)
        detector = self.guard.new_detector(key, config=self.scoped(scope, None))
        run = self._make(key=key, detector=detector, guard=self.guard, scope=scope, seen=self.now())
        self.runs[key] = run
        return run

    def find(self, key: str) -> R | None:
        """The run ``key``, in progress or stopped and ended recently."""
        return self.runs.get(key) or self.stopped.get(key)

    def touch(self, run: R) -> None:
        """Mark ``run`` the most recently active one (the registry forgets the least)."""
        run.seen = self.now()
        if self.last == run.key:
            return  # its scope was seen when it became the latest
        self.scope_seen(run.scope)
        self.last = run.key
        if self.runs.get(run.key) is run:
            del self.runs[run.key]
            self.runs[run.key] = run

    def end(self, run: R, invocation: object) -> bool:
        """An invocation of ``run`` ended; whether the run ended with it (a thread does not)."""
        run.invocations.pop(invocation, None)
        if run.per_thread or run.invocations or self.runs.get(run.key) is not run:
            return False
        del self.runs[run.key]
        bounded_put(
            self.finished,
            run.key,
            inspection_later(
                run.key, run.detector, self.guard.config.locale, run.scope, run.ledger
            ),
            _MAX_FINISHED,
        )
        if run.detector.tripped is not None:
            bounded_put(self.stopped, run.key, run, _MAX_STOPPED)
        return True

    def configure(self, config: LoopGuardConfig) -> bool:
        """A new configuration for the runs in progress; whether they were all forgotten (the
        guard was switched off). An observed run is never stopped: its held stop goes."""
        if config.mode == "off":
            self.runs.clear()
            self.stopped.clear()
            return True
        for run in self.runs.values():
            run.detector.configure(self.scoped(run.scope, config))
            if config.mode != "on":
                run.held = None
        return False

    def inspect(self, key: str | None) -> RunInspection | None:
        """The inspection of the run ``key`` (the most recently active when ``None``), in
        progress or ended recently."""
        key = self.last if key is None else key
        if key is None:
            return None
        run = self.runs.get(key)
        if run is not None:
            return self.guard.inspection(key, run.detector, run.scope, run.ledger)
        made = self.finished.get(key)
        return None if made is None else made()

    def _make_room(self, capacity: int) -> bool:
        """Forget the least recently active run that is idle or between invocations."""
        idle_before = self.now() - IDLE_S
        for key, run in self.runs.items():
            if not run.invocations or run.seen <= idle_before:
                logger.info(
                    "loop-guard: forgot run=%s (%s) to make room (max_runs=%d)",
                    safe_tool_name(key),
                    "between invocations" if not run.invocations else "idle",
                    capacity,
                )
                del self.runs[key]
                if self.last == key:
                    self.last = None
                self.forgotten(run)
                return True
        return False
