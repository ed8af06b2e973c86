"""``GraphGuard``: what the middleware and the node guard share, over one pass each."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.types import interrupt

from langchain_loop_guard._core._scope import ScopeChoice, choose_scope, has_checkpointer
from langchain_loop_guard._integrations._cost import state_ledger
from langchain_loop_guard._integrations._engine import Run, bounded_put
from langchain_loop_guard._integrations._graph_pass import (
    GraphPass,
    PassHost,
    Position,
    last_ai,
    quiet_turn,
)
from langchain_loop_guard._integrations._graph_state import (
    STATE_KEY,
    STATE_VERSION,
    GuardData,
    Update,
    load_state,
)
from langchain_loop_guard._integrations._guard_messages import guard_kind
from langchain_loop_guard._integrations._outcomes import holds_answer
from langchain_loop_guard._integrations._runtime import (
    ConfigInput,
    GuardRuntime,
    bad_argument,
    logger,
)
from langchain_loop_guard._integrations._stop import (
    ON_STOP_VALUES,
    RESUME_SCHEMA,
    LoopDetected,
    OnStop,
    from_marker,
    held_marker,
    interrupt_payload,
    resume_action,
    stop_state,
)
from langchain_loop_guard._integrations._tool_kinds import ToolKinds

if TYPE_CHECKING:
    from langchain_loop_guard._core._config import LoopGuardConfig
    from langchain_loop_guard._core._detector import DetectorEvent, LoopDetector
    from langchain_loop_guard._core._status import RunInspection

__all__ = ["GraphGuard", "check_name", "graph_config"]

_MAX_THREADS = 256  # threads remembered for ``inspect``/``status`` and reset requests


class GraphGuard(GuardRuntime):
    """A guard whose detector state lives in LangGraph state (middleware and node guard), which
    call :meth:`_guard_pass` before and after the model. A run starts with a human message; a
    resumed node re-executes from the same saved state and must reach the same decision."""

    _halt_ends_run: ClassVar[bool] = False
    """Whether a stop held for the next step also adds the stop message after the answers, so
    that a router that knows nothing of the guard ends the run."""

    def __init__(
        self,
        config: ConfigInput = None,
        *,
        nudges: int | None = None,
        on_stop: OnStop = "raise",
        clock: Callable[[], float] | None = None,
        record_to: str | os.PathLike[str] | None = None,
        state_key: str = STATE_KEY,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        _check_arguments(nudges, on_stop, clock, state_key)
        super().__init__(config, clock=clock, record_to=record_to, settings=settings)
        self._nudges = nudges
        self._on_stop: OnStop = on_stop
        self._state_key = state_key
        self._wall: Callable[[], float] = clock if clock is not None else time.time
        # Each bounded by ``_MAX_THREADS``, oldest first (``_WrittenStates``, ``_pending_halt``).
        self._threads: dict[str, GuardData] = {}
        self._resets = _ResetRequests()
        self._written = _WrittenStates()
        self._halts: dict[str, LoopDetected] = {}
        self._interrupted: dict[tuple[object, ...], None] = {}
        self._tool_kinds = ToolKinds()  # which tools act, as the tools it saw say (MCP)
        # what each pass asks of this guard (the pass holds these, never the guard itself)
        self._host = PassHost(
            on_stop=on_stop,
            report=self.report,
            reported_before=self._reported_before,
            site=self._site,
            in_context=self._in_context,
            tool_acts=self._tool_kinds.acts,
        )

    # --- settings -------------------------------------------------------------------------------

    @property
    def nudges(self) -> int:
        """Hard detections answered with a nudge before one stops the run."""
        return self._nudges if self._nudges is not None else self.config.nudges

    @property
    def on_stop(self) -> OnStop:
        """What happens when the guard stops a run: ``"raise"``, ``"end"`` or ``"interrupt"``."""
        return self._on_stop

    @property
    def state_key(self) -> str:
        """The graph-state key of the guard's state."""
        return self._state_key

    # --- runtime commands -----------------------------------------------------------------------

    def inspect(self, target: str | Mapping[str, Any] | None = None) -> RunInspection | None:
        """The recent tool calls of a thread (tool names, digests, outcome kinds, no content), or
        ``None`` when the thread is unknown or holds no guard state.

        Args:
            target: a ``thread_id`` this guard served (in this process); a graph state, such as
                ``graph.get_state(config).values``, from any process; or ``None`` for the thread
                this guard served most recently.
        """
        if isinstance(target, Mapping):
            data = target.get(self._state_key)
            name = "-"
        else:
            with self._lock:
                name = target if target is not None else next(reversed(self._threads), "")
                data = self._threads.get(name)
        if not isinstance(data, Mapping):
            return None
        detector = self.new_detector()
        if not detector.restore_state(data.get("detector") or {}):
            return None
        scope = ScopeChoice.stored(data.get("scope"))
        return self.inspection(name, detector, scope, state_ledger(target, self.config, scope))

    def reset(self, thread_id: str | None = None) -> bool:
        """Clear a thread's counters, history and tripped flag when it next passes through the guard
        (in this process: the state lives in the graph); whether the guard has served the thread.
        ``thread_id`` is the LangGraph one; the thread served most recently when ``None``."""
        with self._lock:
            name = thread_id if thread_id is not None else next(reversed(self._threads), None)
            if name is None:
                return False
            self._resets.ask(name, self._wall())
            return name in self._threads

    def _active_runs(self) -> int:
        return len(self._threads)

    def _config_changed(self, config: LoopGuardConfig) -> None:
        if config.mode == "off":
            self._threads.clear()
            self._written.clear()

    # --- the pass -------------------------------------------------------------------------------

    def _guard_pass(
        self,
        messages: Sequence[AnyMessage],
        stored: object,
        position: Position,
        *,
        pause: bool = False,
        resume: object = None,
    ) -> Update | None:
        """Feed what happened since the last pass, decide, and act on a stop: raise, end or
        interrupt. ``None`` when nothing changes (off, or failed open). With ``pause``, an
        interrupt is held for the next model call to ask (a resumed node runs again, and this
        one paid for a model call); ``resume`` is the answer to it, when the pass runs again."""
        if self.mode == "off":
            return None
        node_config = graph_config()  # read once: every part of the pass asks the same
        thread = _thread_id(node_config)
        fresh = False
        # Recorded once the pass is committed (not if it fails open or an interrupt reruns it).
        events: list[DetectorEvent] = []
        halt: LoopDetected | None = None
        paused = False  # an interrupt held for the next model call (``pause``)
        while True:
            decided: GraphPass | None = None
            with self.failing_open(f"{type(self).__name__}.{position}"):
                decided = self._decide(
                    messages, stored, position, thread, node_config, fresh=fresh, events=events
                )
            if decided is None:
                return None
            stop = decided.stop
            if stop is None:
                break
            if self._on_stop == "raise":
                halt = LoopDetected.from_verdict(stop, run_id=thread)
                answers = [m for m in decided.ending if isinstance(m, ToolMessage)]
                if node_config is None:  # no graph will save anything
                    self._record(thread, events)
                    raise halt
                # Save the step first (the answers to open calls, and the stopped state the
                # thread's next message is judged on, SPEC §13 C2): the step after this one
                # raises (``_pending_halt``; ``_halt_ends_run``).
                ends_run = self._halt_ends_run and answers  # a final answer ends it anyway
                decided.messages.extend(decided.ending if ends_run else answers)
                decided.data["halt"] = self._hold(halt, decided.data.get("ai"))
                decided.jump = "end"
                break
            if self._on_stop == "interrupt":
                if resume is None and pause and node_config is not None:
                    decided.data["pause"] = _pause_marker(stop, decided.data.get("ai"), stored)
                    decided.jump, paused = "model", True
                    break
                answer = resume or interrupt(interrupt_payload(stop), response_schema=RESUME_SCHEMA)
                resume = None
                if resume_action(answer) == "continue":
                    logger.info("loop-guard: thread=%s resumed with fresh counters", thread or "-")
                    fresh = True
                    continue
            decided.messages.extend(decided.ending)
            decided.jump = "end"
            break
        if thread is not None:
            with self._lock:
                bounded_put(self._threads, thread, decided.data, _MAX_THREADS)
        self._record(thread, events)
        shown = stop_state(decided.stop) if decided.stop is not None and not paused else None
        if shown is not None:
            decided.data["stopped"] = True
        live = decided.run.detector if self.recorder is None else None  # recording: restored
        self._written.wrote(decided.data, live, thread)
        return Update(
            data=decided.data,
            messages=tuple(decided.messages),
            jump=decided.jump,
            halt=halt,
            stop=shown,
            clear_stop=decided.clear_stop,
        )

    def _quiet_turn(self, messages: Sequence[AnyMessage], stored: object) -> bool:
        """:func:`~._graph_pass.quiet_turn`; anything unreadable answers ``False``."""
        try:
            return quiet_turn(messages, stored, self.config, self._wall())
        except Exception:  # noqa: BLE001 - the full pass decides, and fails open itself
            return False

    def _hold(self, halt: LoopDetected, ai: str | None) -> dict[str, Any]:
        """The state marker of a stop to raise at the next step (``_pending_halt``)."""
        token = uuid.uuid4().hex
        with self._lock:
            bounded_put(self._halts, token, halt, _MAX_THREADS)
        return held_marker(halt, token, ai)

    def _halt_marker(
        self, messages: Sequence[AnyMessage], stored: object
    ) -> Mapping[str, Any] | None:
        """The marker of a stop due at this step (see :meth:`_pending_halt`), if any."""
        if self.mode == "off" or not isinstance(stored, Mapping):
            return None
        marker = stored.get("halt")
        if marker is None or not isinstance(marker, Mapping) or not messages:
            return None
        end = len(messages)
        if isinstance(messages[-1], AIMessage) and guard_kind(messages[-1]) == "stop":
            end -= 1  # the stop message after the answers (see ``_halt_ends_run``)
        index = last_ai(messages, end)
        if index < 0 or (index < end - 1 and not isinstance(messages[end - 1], ToolMessage)):
            return None  # the marker's step is not the latest (a new message came since)
        return marker if messages[index].id == marker.get("ai") else None

    def _pending_halt(self, messages: Sequence[AnyMessage], stored: object) -> LoopDetected | None:
        """The stop held for this step (:meth:`_halt_marker`), or rebuilt from its marker."""
        marker = self._halt_marker(messages, stored)
        if marker is None:
            return None
        with self._lock:
            halt = self._halts.pop(str(marker.get("token")), None)
        if halt is not None:
            return halt
        return from_marker(marker, _thread_id(graph_config()))

    def _decide(
        self,
        messages: Sequence[AnyMessage],
        stored: object,
        position: Position,
        thread: str | None,
        node_config: RunnableConfig | None,
        *,
        fresh: bool,
        events: list[DetectorEvent],
    ) -> GraphPass | None:
        """Restore the run, feed what is new into ``events``, and decide; ``None`` if nothing is."""
        work = self._restore(
            None if fresh else stored,
            thread,
            events,
            fresh=fresh,
            checkpointed=has_checkpointer(node_config),
        )
        if not work.read(messages, position):
            return None
        work.data["v"] = STATE_VERSION
        work.data["detector"] = work.run.detector.export_state()
        work.data["at"] = work.now
        return work

    def _restore(
        self,
        stored: object,
        thread: str | None,
        events: list[DetectorEvent],
        *,
        fresh: bool,
        checkpointed: bool,
    ) -> GraphPass:
        """The pass's working state, with a detector restored (or the live one that wrote it)."""
        now = self._wall()
        config = self.config  # one configuration for the whole pass
        choice = choose_scope(config.scope, thread, checkpointed)
        run_config = self._run_config(choice, config)
        self._scope_seen(choice)
        written = self._written.take(stored, run_config, thread)
        detector: LoopDetector | None = None
        if written is None:
            data = load_state(stored, thread)
        else:
            data, detector = written
        data["scope"] = [choice.scope, choice.reason]
        if thread is not None and self._resets.due(thread, data.get("at", float("-inf"))):
            data, fresh, detector = load_state(None), True, None
        exported = data.get("detector")
        if fresh or not exported:
            detector = None
        if detector is None:
            detector = self.new_detector(
                config=run_config, listener=events.append if self.recorder else None
            )
            if fresh:
                detector.reset()  # the counters start afresh here: a replay must know
            if exported:
                # Count the time spent between two passes (model and tool calls) as elapsed.
                elapsed = exported.get("elapsed")
                if isinstance(elapsed, int | float):
                    gap = max(0.0, now - data.get("at", now))
                    exported = {**exported, "elapsed": elapsed + gap}
                if not detector.restore_state(exported):
                    logger.warning(
                        "loop-guard: thread=%s: the detector's saved state is unreadable; "
                        "discarded, detection starts afresh",
                        thread or "-",
                    )
        run = Run(
            thread or "-",
            detector,
            self,
            scope=choice,
            nudged=data.get("nudged", 0),
            last_nudge=data.get("last_nudge"),
        )
        nudges = self._nudges if self._nudges is not None else config.nudges
        return GraphPass(self._host, data=data, run=run, config=config, nudges=nudges, now=now)

    def _reported_before(self, seen: tuple[object, ...]) -> bool:
        """Whether the stop ``seen`` was reported already (and remember it)."""
        with self._lock:
            if seen in self._interrupted:
                return True
            bounded_put(self._interrupted, seen, None, _MAX_THREADS)
            return False

    def _in_context(
        self, messages: Sequence[AnyMessage], index: int, processed: str | None
    ) -> bool:
        """Whether the model saw the previous answer before ``messages[index]`` (SPEC §11 N2)."""
        return holds_answer(messages, index, processed)

    def _record(self, thread: str | None, events: list[DetectorEvent]) -> None:
        """Record a committed pass's events under its thread (``"-"`` without one)."""
        if self.recorder is not None and events:
            self.recorder.write(thread or "-", events)
            events.clear()


class _WrittenStates:
    """The states a guard wrote, by id, with the detector that exported them (``None`` while
    recording: a pass records the events it decides), and each thread's latest; bounded by
    ``_MAX_THREADS``, oldest first. A pass that reads one back goes on with its detector:
    neither is read back nor checked again, which is most of a pass's work."""

    __slots__ = ("_latest", "_lock", "_written")

    def __init__(self) -> None:
        self._written: dict[int, tuple[GuardData, LoopDetector | None]] = {}
        self._latest: dict[str, int] = {}
        self._lock = threading.Lock()

    def wrote(self, data: GuardData, detector: LoopDetector | None, thread: str | None) -> None:
        """Remember a state about to be written (of ``thread``), and its detector."""
        with self._lock:
            bounded_put(self._written, id(data), (data, detector), _MAX_THREADS)
            if thread is not None:
                bounded_put(self._latest, thread, id(data), _MAX_THREADS)

    def take(
        self, stored: object, config: LoopGuardConfig, thread: str | None
    ) -> tuple[GuardData, LoopDetector | None] | None:
        """A copy of ``stored`` if the guard wrote it, with the detector that exported it if
        that was built under ``config``. Within an invocation the graph hands the state back as
        it was written; a thread's next invocation reads the checkpointer's copy, taken for the
        state the thread's latest pass wrote when it is equal to it. Each is taken once: a
        second reader of the same state reads and checks its own copy."""
        with self._lock:
            entry = self._written.pop(id(stored), None)
            if entry is not None and entry[0] is not stored:
                entry = None  # another state at the same address: the one written is gone
            if entry is None and thread is not None and isinstance(stored, Mapping):
                latest = self._written.get(self._latest.get(thread, 0))
                if latest is not None and latest[0] == stored:
                    entry = self._written.pop(id(latest[0]))
            if entry is None:
                return None
            if thread is not None and self._latest.get(thread) == id(entry[0]):
                del self._latest[thread]  # taken: a copy of it is no longer this state
        data, detector = entry
        if detector is not None and detector.config is not config:
            detector = None
        return cast(GuardData, dict(data)), detector

    def clear(self) -> None:
        """Forget every state (the guard was switched off)."""
        with self._lock:
            self._written.clear()
            self._latest.clear()


class _ResetRequests:
    """The threads whose reset was asked for (:meth:`GraphGuard.reset`), each with when,
    bounded by ``_MAX_THREADS``, oldest first: a thread's state written before then starts
    afresh at its next pass."""

    __slots__ = ("_asked", "_lock")

    def __init__(self) -> None:
        self._asked: dict[str, float] = {}
        self._lock = threading.Lock()

    def ask(self, thread: str, at: float) -> None:
        """Reset ``thread``'s state written at or before ``at`` (a wall-clock time)."""
        with self._lock:
            bounded_put(self._asked, thread, at, _MAX_THREADS)

    def due(self, thread: str, written_at: float) -> bool:
        """Whether ``thread``'s state, written at ``written_at``, is to start afresh; a state
        written after the request was already reset, and the request is forgotten."""
        with self._lock:
            requested = self._asked.get(thread)
            if requested is None:
                return False
            if written_at <= requested:
                return True
            self._asked.pop(thread, None)
        return False


# --- helpers -------------------------------------------------------------------------------------


def _check_arguments(nudges: object, on_stop: object, clock: object, state_key: object) -> None:
    """Raise :class:`LoopGuardConfigError` naming the first bad argument of a graph guard."""
    if nudges is not None and (type(nudges) is not int or nudges < 0):
        raise bad_argument(
            "nudges",
            nudges,
            "a whole number of at least 0 (or None for the configured value)",
            "int >= 0 | None",
        )
    if on_stop not in ON_STOP_VALUES:
        one_of = f"one of {', '.join(map(repr, ON_STOP_VALUES))}"
        raise bad_argument("on_stop", on_stop, one_of, " | ".join(ON_STOP_VALUES))
    if clock is not None and not callable(clock):
        raise bad_argument(
            "clock",
            clock,
            "a function returning seconds, or None",
            "Callable[[], float] | None",
            shown=type(clock).__name__,
        )
    check_name("state_key", state_key)


def _pause_marker(stop: Any, answer_id: str | None, prior: object) -> dict[str, Any]:
    """The state marker of an interrupt held for the next model call: the answer it is about,
    what to ask, and the guard's state before that answer (the pass is run again on it)."""
    return {"ai": answer_id, "payload": interrupt_payload(stop), "prior": prior}


def check_name(key: str, value: object) -> None:
    """Raise :class:`LoopGuardConfigError` unless ``value`` (the parameter ``key``) is a name."""
    if not isinstance(value, str) or not value:
        raise bad_argument(key, value, "a non-empty string", "non-empty str")


def graph_config() -> RunnableConfig | None:
    """The config of the graph node running this pass; ``None`` outside a graph."""
    try:
        return get_config()
    except RuntimeError:
        return None


def _thread_id(node_config: RunnableConfig | None) -> str | None:
    thread = ((node_config or {}).get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)
