"""The engine shared by the middleware and the node guard: detector state kept in graph state.

Both integrations see an agent the same way, as the message history in LangGraph state, at
two points of each turn:

* **before the model** (``LoopGuardMiddleware.wrap_model_call``, before it calls the model;
  the node guard on the edge back from the tools): the tool results that arrived since the
  last model call are fed to the detector, then the start of a turn. When none of that could
  stop or warn, the middleware leaves it to the pass after the model, which feeds the same
  events in the same order (:meth:`GraphGuard._quiet_turn`);
* **after the model** (``LoopGuardMiddleware.after_model``; the node guard on the edge from
  the model): the model's answer and each tool call it asks for. A call the guard refuses is
  answered with an error ``ToolMessage`` there, before any tool runs, so it never runs.

Each pass restores a :class:`~langchain_loop_guard._detector.LoopDetector` from the graph state
(or goes on with the one that wrote that very state, see :meth:`GraphGuard._take_live`),
feeds it, and writes its state back under one key (``"loop_guard"``): tool names, digests,
counters and tool-call ids, never arguments, outputs or text. Whatever checkpointer the graph
runs therefore saves it, so detection survives ``interrupt()``/resume and process restarts.
Exactly one node writes the key per step, so it needs no reducer.

A *run* starts when a human message arrives. With ``scope="run"`` the guard's state starts
afresh there; with ``scope="thread"`` the history is kept for the whole thread and a stopped
run is released (the human saw the stop and answered). A resume (``Command(resume=...)``, or
``invoke(None)`` after a breakpoint) is not a new run: the interrupted node re-executes from
the same saved state and must reach the same decision, which is what makes
``on_stop="interrupt"`` answerable.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Literal,
    NotRequired,
    TypeVar,
    cast,
    get_args,
)

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import interrupt
from pydantic import BeforeValidator
from typing_extensions import TypedDict

from langchain_loop_guard._config import LoopGuardConfig
from langchain_loop_guard._detector import LoopDetector, Signal, Verdict
from langchain_loop_guard._errors import LoopGuardConfigError
from langchain_loop_guard._interrupt import LoopDetected
from langchain_loop_guard._messages import (
    HINT_MARKER,
    not_executed,
    nudge,
    stopped_after_nudge,
    translator,
)
from langchain_loop_guard._observe import Site
from langchain_loop_guard._outcomes import holds_answer, tool_outcome
from langchain_loop_guard._public import safe_tool_name
from langchain_loop_guard._runtime import ConfigInput, GuardRuntime, RunInspection, logger
from langchain_loop_guard._view import successes_cannot_stop

if TYPE_CHECKING:
    from langchain_loop_guard._detector import DetectorEvent

__all__ = [
    "GUARD_KEY",
    "MESSAGE_NAME",
    "ON_STOP_VALUES",
    "RESUME_VALUES",
    "STATE_KEY",
    "STOP_KEY",
    "GraphGuard",
    "GuardData",
    "GuardKind",
    "LoopGuardResume",
    "LoopGuardState",
    "LoopGuardStop",
    "OnStop",
    "ResumeAction",
    "Update",
    "check_name",
    "dangling_calls",
    "guard_kind",
    "is_human_input",
    "repair_update",
    "repaired_history",
]

STATE_KEY = "loop_guard"
"""The graph-state key the guard keeps its state under."""

STOP_KEY = "loop_guard_stop"
"""The graph-state key where a run's stop shows, for the caller to read in the result
(:class:`LoopGuardStop`; ``None`` again once a new run starts on the thread)."""

MESSAGE_NAME = "loop_guard"
"""The ``name`` of the messages the guard adds on its own: nudges and the stop message."""

GUARD_KEY = "loop_guard"
"""The ``additional_kwargs`` key that marks every message the guard writes, with its kind:
``"nudge"`` (a refused call's answer, or a separate nudge), ``"not_executed"`` (a call
answered because the run stopped) or ``"stop"`` (the final message of an ended run). A chat
UI tells the guard's messages from the user's and the model's with :func:`guard_kind`."""

GuardKind = Literal["nudge", "not_executed", "stop"]
"""What a message the guard wrote is (the value under :data:`GUARD_KEY`)."""

OnStop = Literal["raise", "end", "interrupt"]
"""What a guard does when it stops a run.

- ``"raise"``: answer every pending tool call with an error ``ToolMessage`` in the graph state,
  then raise :class:`~langchain_loop_guard.LoopDetected` to the caller of
  ``invoke``/``stream`` from the next step, so the saved thread is valid for its next message.
  The node guard also adds the stop message after the answers, as ``"end"`` does, so that a
  router it does not control (``create_react_agent``'s, for a ``post_model_hook``) ends the
  run rather than calling the model again.
- ``"end"``: answer every pending tool call with an error ``ToolMessage``, add a final
  ``AIMessage`` that explains the stop to the user, and end the run normally. The history stays
  valid for the next model call. The result's ``"loop_guard_stop"`` key tells how the run was
  stopped (:class:`LoopGuardStop`).
- ``"interrupt"``: pause the thread with LangGraph's ``interrupt()`` so that a human decides;
  resume with ``Command(resume="continue")`` (go on with fresh counters) or
  ``Command(resume="end")`` (as ``"end"``). Needs a checkpointer.
"""

ON_STOP_VALUES: tuple[str, ...] = get_args(OnStop)

ResumeAction = Literal["continue", "end"]
"""A human's answer to a loop-guard interrupt."""

RESUME_VALUES = ('"continue"', '"end"', '{"action": "continue"}', '{"action": "end"}')
"""The resume values a loop-guard interrupt accepts, as they are written."""

_K = TypeVar("_K")
_V = TypeVar("_V")

_MAX_PENDING = 256  # tool calls awaiting their result, per thread
_MAX_THREADS = 256  # threads remembered for ``inspect``/``status`` and reset requests
_STATE_VERSION = 1
_UNKNOWN_TOOL = "unknown_tool"
_MALFORMED = "malformed tool call arguments"


class _ResumeMapping(TypedDict):
    action: ResumeAction


def _check_resume(value: object) -> object:
    actions = get_args(ResumeAction)
    if value in actions:
        return value
    if isinstance(value, Mapping) and set(value) == {"action"} and value["action"] in actions:
        return dict(value)
    accepted = ", ".join(RESUME_VALUES)
    msg = f"a loop-guard interrupt is resumed with one of {accepted}, not {value!r}"
    raise ValueError(msg)


LoopGuardResume = Annotated[ResumeAction | _ResumeMapping, BeforeValidator(_check_resume)]
"""The ``response_schema`` of the guard's interrupts: LangGraph checks a resume value against
it before anything is saved, so a wrong answer raises ``pydantic.ValidationError`` (naming the
accepted values) and the interrupt can be answered again."""

_RESUME_SCHEMA: Any = LoopGuardResume  # a type form, which ``interrupt``'s overloads do not name


class GuardData(TypedDict, total=False):
    """What the guard keeps in graph state: JSON data of names, digests, ids and counters."""

    v: int
    """Format version; any other starts afresh."""
    detector: dict[str, Any]
    """:meth:`LoopDetector.export_state` output."""
    pending: list[list[str]]
    """``[tool_call_id, tool name]`` of the calls whose results have not been seen yet."""
    ai: str | None
    """Id of the last model message the guard processed."""
    turn: bool
    """Whether the next model turn was already counted (before the model ran)."""
    nudged: int
    """Nudges given in this run."""
    last_nudge: list[Any]
    """``[key, count]`` of the verdict the last nudge answered: a stop on the same loop
    counts the nudged attempts too."""
    at: float
    """When the state was written (the guard's clock), to count time spent between steps."""
    halt: dict[str, Any]
    """A stop to raise at the next step (``on_stop="raise"``), once its answers are saved."""
    stopped: bool
    """Whether this run's stop was written under :data:`STOP_KEY` (to clear at the next run)."""
    run: str
    """An id of the run (a new one at each human message), for log lines when the caller gave
    no run id and nothing traces the run."""


class LoopGuardStop(TypedDict):
    """How a run was stopped, under ``"loop_guard_stop"`` (:data:`STOP_KEY`) in the result.

    Plain JSON data (names, counts and the user-facing message), saved by any checkpointer.
    It is set when the guard stops a run and writes its stop to the state (``on_stop="end"``,
    an interrupt answered ``"end"``, and ``"raise"`` once the stopped answer's calls are
    answered), and set back to ``None`` when a new human message starts the next run.
    """

    signal: str
    """The :class:`~langchain_loop_guard.Signal` value that stopped the run."""
    action: str
    """``"block"`` (a tool call was refused) or ``"abort"`` (a model call was)."""
    tool: str | None
    """The tool that looped, if one did."""
    tools: list[str]
    """Every tool of the loop (a cycle names each)."""
    count: int
    """How many times the loop repeated."""
    threshold: int
    """The limit it reached."""
    message: str
    """The stop's explanation for the user, in the configured locale."""


class LoopGuardState(TypedDict, total=False):
    """The state keys the node guard needs; mix them into your graph's state::

        class State(MessagesState, LoopGuardState):
            pass

    Plain (last value) channels: the guard node is their only writer. ``loop_guard`` holds
    the guard's own state; ``loop_guard_stop`` shows how a run was stopped
    (:class:`LoopGuardStop`), or ``None``.
    """

    loop_guard: NotRequired[GuardData]
    loop_guard_stop: NotRequired[LoopGuardStop | None]


@dataclass(frozen=True, slots=True)
class Update:
    """What one pass of the guard changes in the graph.

    Attributes:
        data: the guard's new state (under :data:`STATE_KEY`).
        messages: messages to append (tool messages answering refused calls, a nudge, the
            final message of an ended run).
        jump: ``"model"`` to give the model another turn after a nudge (when it would
            otherwise end), ``"end"`` when the guard ended the run, else ``None``.
        halt: the stop to raise at the next step, once these messages are saved
            (``on_stop="raise"`` with calls to answer); see :meth:`GraphGuard._pending_halt`.
        stop: the run's stop, to show under :data:`STOP_KEY`.
        clear_stop: a new run started after a stop: :data:`STOP_KEY` goes back to ``None``.
    """

    data: GuardData
    messages: tuple[BaseMessage, ...] = ()
    jump: Literal["model", "end"] | None = None
    halt: LoopDetected | None = None
    stop: LoopGuardStop | None = None
    clear_stop: bool = False

    def stop_update(self) -> dict[str, LoopGuardStop | None]:
        """The :data:`STOP_KEY` part of the state update: the stop, a clearing ``None``, or
        nothing."""
        if self.stop is not None:
            return {STOP_KEY: self.stop}
        return {STOP_KEY: None} if self.clear_stop else {}


@dataclass(slots=True)
class _Pass:
    """One pass's working state and decision, before the guard acts on a stop."""

    data: GuardData
    detector: LoopDetector
    config: LoopGuardConfig
    nudges: int
    run_id: str
    now: float
    messages: list[BaseMessage] = field(default_factory=list)
    jump: Literal["model", "end"] | None = None
    stop: Verdict | None = None
    ending: list[BaseMessage] = field(default_factory=list)
    position: str | None = None
    site: Site | None = None
    clear_stop: bool = False


Position = Literal["before_model", "after_model"]

_CallInfo = tuple[str, str, Any, bool]
"""``(tool_call_id, tool name, arguments, malformed)`` of a call a model answer makes."""


class GraphGuard(GuardRuntime):
    """A guard whose detector state lives in LangGraph state (middleware and node guard).

    Subclasses call :meth:`_guard_pass` at their two observation points and turn the
    :class:`Update` into their host's state update and routing.
    """

    _halt_ends_run: ClassVar[bool] = False
    """Whether a stop raised at the next step (``on_stop="raise"`` with calls to answer) also
    adds the stop message after the answers, as ``"end"`` does: for a guard whose host may
    route the graph on without it (the node guard as ``create_react_agent``'s
    ``post_model_hook``, whose router calls the model again after tool answers)."""

    def __init__(
        self,
        config: ConfigInput = None,
        *,
        nudges: int | None = None,
        on_stop: OnStop = "raise",
        clock: Callable[[], float] | None = None,
        record_to: str | os.PathLike[str] | None = None,
        state_key: str = STATE_KEY,
    ) -> None:
        if nudges is not None and (type(nudges) is not int or nudges < 0):
            raise LoopGuardConfigError(
                f"nudges must be a whole number of at least 0 (or None for the configured "
                f"value), not {nudges!r}",
                source="code",
                key="nudges",
                value=nudges,
                allowed="int >= 0 | None",
            )
        if on_stop not in ON_STOP_VALUES:
            raise LoopGuardConfigError(
                f"on_stop must be one of {', '.join(map(repr, ON_STOP_VALUES))}, not {on_stop!r}",
                source="code",
                key="on_stop",
                value=on_stop,
                allowed=" | ".join(ON_STOP_VALUES),
            )
        if clock is not None and not callable(clock):
            raise LoopGuardConfigError(
                f"clock must be a function returning seconds, or None, not {clock!r}",
                source="code",
                key="clock",
                value=type(clock).__name__,
                allowed="Callable[[], float] | None",
            )
        check_name("state_key", state_key)
        super().__init__(config, clock=clock, record_to=record_to)
        self._nudges = nudges
        self._on_stop: OnStop = on_stop
        self._state_key = state_key
        self._wall: Callable[[], float] = clock if clock is not None else time.time
        self._threads: OrderedDict[str, GuardData] = OrderedDict()
        self._resets: OrderedDict[str, float] = OrderedDict()
        # The detector of each recent pass, keyed by the id of the state it exported (see
        # ``_take_live``): the next pass that reads that very state object continues it.
        self._live: OrderedDict[int, tuple[object, LoopDetector]] = OrderedDict()
        # Stops waiting for the step that raises them, by token (see ``_pending_halt``).
        self._halts: OrderedDict[str, LoopDetected] = OrderedDict()
        # Stops that paused a thread (``on_stop="interrupt"``), reported once (see ``_report``).
        self._interrupted: OrderedDict[tuple[object, ...], None] = OrderedDict()

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
        """The recent tool calls of a thread (tool names, digests, outcome kinds, no content).

        Args:
            target: a ``thread_id`` this guard served (in this process); a graph state, such
                as ``graph.get_state(config).values``, from any process; or ``None`` for the
                thread this guard served most recently.

        Returns:
            The inspection, or ``None`` when the thread is unknown or holds no guard state.
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
        return self.inspection(name, detector)

    def reset(self, thread_id: str | None = None) -> bool:
        """Clear a thread's counters, history and tripped flag at its next step.

        The state lives in the graph, so the reset is applied by the guard when the thread next
        passes through it (in this process).

        Args:
            thread_id: the LangGraph ``thread_id``; the thread this guard served most recently
                when ``None``.

        Returns:
            Whether the thread is one this guard has served.
        """
        with self._lock:
            name = thread_id if thread_id is not None else next(reversed(self._threads), None)
            if name is None:
                return False
            _put(self._resets, name, self._wall())
            return name in self._threads

    def _active_runs(self) -> int:
        return len(self._threads)

    def _config_changed(self, config: LoopGuardConfig) -> None:
        if config.mode == "off":
            self._threads.clear()
            self._live.clear()

    # --- the pass -------------------------------------------------------------------------------

    def _guard_pass(
        self, messages: Sequence[AnyMessage], stored: object, position: Position
    ) -> Update | None:
        """Feed what happened since the last pass, decide, and act on a stop.

        Returns ``None`` when nothing changes (the guard is off, or it failed open). Raises
        :class:`LoopDetected` (``on_stop="raise"``, when no call needs an answer; otherwise
        the update answers them and carries the stop in :attr:`Update.halt`, for the next
        step to raise) or pauses the graph (``"interrupt"``).
        """
        if self.mode == "off":
            return None
        thread = _thread_id()
        fresh = False
        # The pass's events are recorded once it is committed: a pass that fails open, or
        # that an interrupt will execute again on resume, records nothing.
        events: list[DetectorEvent] = []
        halt: LoopDetected | None = None
        while True:
            decided: _Pass | None = None
            with self.failing_open(f"{type(self).__name__}.{position}"):
                decided = self._decide(
                    messages, stored, position, thread, fresh=fresh, events=events
                )
            if decided is None:
                return None
            stop = decided.stop
            if stop is None:
                break
            if self._on_stop == "raise":
                halt = LoopDetected.from_verdict(stop, run_id=thread)
                answers = [m for m in decided.ending if isinstance(m, ToolMessage)]
                if position == "before_model" or not answers or not _in_graph():
                    # No call is left open (the saved state is valid as it is), or no graph
                    # will save the answers (a hook called directly).
                    self._record(thread, events)
                    raise halt
                # Answer the open calls first: the step after this one raises (see
                # ``_pending_halt``), once the answers are saved. A guard that does not route
                # the graph itself adds the stop message too, so a router that knows nothing
                # of the guard ends the run instead of calling the model on the answers.
                decided.messages.extend(decided.ending if self._halt_ends_run else answers)
                decided.data["halt"] = self._hold(halt, decided.data.get("ai"))
                decided.jump = "end"
                break
            if self._on_stop == "interrupt":
                answer = interrupt(_payload(stop), response_schema=_RESUME_SCHEMA)
                if _action(answer) == "continue":
                    logger.info("loop-guard: thread=%s resumed with fresh counters", thread or "-")
                    fresh = True
                    continue
            decided.messages.extend(decided.ending)
            decided.jump = "end"
            break
        if thread is not None:
            with self._lock:
                _put(self._threads, thread, decided.data)
        self._record(thread, events)
        shown = _stop_state(decided.stop) if decided.stop is not None else None
        if shown is not None:
            decided.data["stopped"] = True
        return Update(
            data=decided.data,
            messages=tuple(decided.messages),
            jump=decided.jump,
            halt=halt,
            stop=shown,
            clear_stop=decided.clear_stop,
        )

    def _hold(self, halt: LoopDetected, ai: str | None) -> dict[str, Any]:
        """The state marker of a stop to raise at the next step (``_pending_halt``)."""
        token = uuid.uuid4().hex
        with self._lock:
            _put(self._halts, token, halt)
        return {
            "token": token,
            "ai": ai,
            "signal": halt.signal.value,
            "tool": halt.tool,
            "tools": list(halt.tools),
            "count": halt.count,
            "threshold": halt.threshold,
            "message": halt.message,
        }

    def _halt_marker(
        self, messages: Sequence[AnyMessage], stored: object
    ) -> Mapping[str, Any] | None:
        """The marker of a stop due at this step (see :meth:`_pending_halt`), if any."""
        if self.mode == "off" or not isinstance(stored, Mapping):
            return None
        marker = stored.get("halt")
        if not isinstance(marker, Mapping) or not messages:
            return None
        end = len(messages)
        if isinstance(messages[-1], AIMessage) and guard_kind(messages[-1]) == "stop":
            end -= 1  # the stop message after the answers (see ``_halt_ends_run``)
        if end == 0 or not isinstance(messages[end - 1], ToolMessage):
            return None
        index = _last_ai(messages, end)
        if index < 0:
            return None
        return marker if messages[index].id == marker.get("ai") else None

    def _pending_halt(self, messages: Sequence[AnyMessage], stored: object) -> LoopDetected | None:
        """The stop an earlier pass answered the calls of and left to this step to raise.

        Only right after that pass: its model answer is still the last one and the guard's
        answers to it are the last messages (or come just before the guard's stop message, see
        :attr:`_halt_ends_run`). The same exception object is raised when this
        process made it; otherwise (another process, a resume after a restart) it is rebuilt
        from the marker, without :attr:`LoopDetected.verdict`.
        """
        marker = self._halt_marker(messages, stored)
        if marker is None:
            return None
        with self._lock:
            halt = self._halts.pop(str(marker.get("token")), None)
        if halt is not None:
            return halt
        try:
            return LoopDetected(
                str(marker.get("message", "")),
                signal=Signal(str(marker.get("signal"))),
                tool=marker.get("tool"),
                tools=tuple(marker.get("tools") or ()),
                count=int(marker.get("count") or 0),
                threshold=int(marker.get("threshold") or 0),
                run_id=_thread_id(),
            )
        except (TypeError, ValueError):  # a marker written by hand: the stop still happens
            return LoopDetected("loop detected", signal=Signal.REPEATED_TOOL_CALL)

    def _decide(
        self,
        messages: Sequence[AnyMessage],
        stored: object,
        position: Position,
        thread: str | None,
        *,
        fresh: bool,
        events: list[DetectorEvent],
    ) -> _Pass | None:
        """Restore the detector, feed what is new, and decide; ``None`` if nothing is new.

        With a recorder, the detector's events are appended to ``events``.
        """
        work = self._restore(None if fresh else stored, thread, events, fresh=fresh)
        work.position = position
        work.data.pop("halt", None)  # raised already, or left behind by a newer step
        target: AIMessage | None = None
        end = len(messages)
        if position == "after_model":
            end = _last_ai(messages, len(messages))
            if end < 0:
                return None
            target = cast(AIMessage, messages[end])
            if target.id is not None and target.id == work.data.get("ai"):
                return None  # this answer was processed already
            if target.name == MESSAGE_NAME:
                return None  # the guard's own final message, in the model's place
        tail = _tail(messages, work.data.get("ai"), end)
        if any(is_human_input(m) for m in tail):
            self._new_run(work)
        hard = self._feed_results(work, tail)
        if target is None:
            self._before_model(work, messages, hard)
        else:
            self._after_model(work, messages, end, hard)
        work.data["v"] = _STATE_VERSION
        exported = work.data["detector"] = work.detector.export_state()
        work.data["at"] = work.now
        if self.recorder is None:
            with self._lock:
                _put(self._live, id(exported), (exported, work.detector))
        return work

    def _restore(
        self, stored: object, thread: str | None, events: list[DetectorEvent], *, fresh: bool
    ) -> _Pass:
        """The pass's working state: the stored guard state and a detector restored from it
        (or the live one that wrote it)."""
        now = self._wall()
        config = self.config  # one configuration for the whole pass
        data = _load(stored, thread)
        if thread is not None and self._reset_due(thread, data):
            data, fresh = _load(None), True
        exported = data.get("detector")
        detector = None if fresh or not exported else self._take_live(exported, config)
        if detector is None:
            detector = self.new_detector(
                config=config, listener=events.append if self.recorder else None
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
        return _Pass(
            data=data,
            detector=detector,
            config=config,
            nudges=self._nudges if self._nudges is not None else config.nudges,
            run_id=thread or "-",
            now=now,
        )

    def _quiet_turn(self, messages: Sequence[AnyMessage], stored: object) -> bool:
        """Whether the pass before a model call can be left to the pass after it.

        That pass would only feed successful tool results and count the turn: nothing in it
        can stop the run or warn before the model is called (no error result, no trip, no
        turn-count or elapsed-time warning due). The pass after the model call then feeds the
        same events in the same order, so the detector decides the same. Anything unusual,
        or unreadable, answers ``False``: the full pass decides.
        """
        if not isinstance(stored, Mapping):
            return stored is None  # a thread's first turn: nothing to feed yet
        exported = stored.get("detector")
        if not isinstance(exported, Mapping):
            return exported is None
        if exported.get("tripped") is not None:
            return False
        config = self.config
        turns, elapsed, at = exported.get("turns"), exported.get("elapsed"), stored.get("at")
        warned = exported.get("warned") or ()
        if type(turns) is not int or type(elapsed) is not float or type(at) is not float:
            return False
        if turns + 1 > config.max_turns and Signal.TURN_COUNT.value not in warned:
            return False
        gap = max(0.0, self._wall() - at)
        if (elapsed + gap) * 1000 > config.turn_timeout_ms and (
            Signal.ELAPSED_TIME.value not in warned
        ):
            return False
        if not successes_cannot_stop(exported, config.no_new_info_calls * config.progress_aware):
            return False
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return True
            if isinstance(message, ToolMessage) and message.status == "error":
                return False
        return True

    def _take_live(self, exported: object, config: LoopGuardConfig) -> LoopDetector | None:
        """The detector that exported ``exported`` in an earlier pass, if it can go on.

        Restoring a detector from the graph state is half of a pass's work, and in a running
        graph the next pass reads the very object the last one wrote. The detector is taken
        (a second reader of the same object restores its own copy), and only when it was
        built under ``config`` and nothing is recorded (a recorder's listener belongs to one
        pass). A state from a checkpoint, another process or an older pass is restored.
        """
        with self._lock:
            entry = self._live.pop(id(exported), None)
        if entry is None or entry[0] is not exported or entry[1].config is not config:
            return None
        return entry[1]

    def _new_run(self, work: _Pass) -> None:
        """A human message arrived: a new run (``scope="run"``) or a released thread."""
        work.clear_stop = work.clear_stop or bool(work.data.pop("stopped", False))
        work.data["run"] = _new_run_id()
        if work.config.scope == "run":
            work.detector.reset()
            work.data = _load(None)
        else:
            self._feed(work, "user_message")
            work.data["turn"] = False

    def _feed(self, work: _Pass, event: Any, *args: Any, **kwargs: Any) -> Verdict:
        """Feed ``work``'s detector and report what it decided.

        A verdict that stops the run is reported by :meth:`_resolve`, once it is known whether
        it stops the run or is answered with a nudge.
        """
        verdict = self.decide(work.detector, event, *args, **kwargs)
        if verdict.action != "allow" and (verdict.tripped or not verdict.stops):
            self._report(work, verdict)
        return verdict

    def _report(self, work: _Pass, verdict: Verdict, *, nudge: bool = False) -> None:
        if self._on_stop == "interrupt" and verdict.stops and not verdict.tripped and not nudge:
            # LangGraph executes an interrupted node again on resume, and the pass reaches the
            # same stop: it was reported when the thread paused.
            seen = (work.run_id, work.data.get("ai"), verdict.key, verdict.count)
            with self._lock:
                if seen in self._interrupted:
                    return
                _put(self._interrupted, seen, None)
        if work.site is None:
            site = self._site(work.position)
            if site.run_id is None:
                run = work.data.get("run")
                if not isinstance(run, str):
                    run = work.data["run"] = _new_run_id()
                site = dataclasses.replace(site, run_id=run)
            work.site = site
        self.report(work.run_id, verdict, site=work.site, nudge=nudge)

    def _feed_results(self, work: _Pass, tail: Sequence[AnyMessage]) -> Verdict | None:
        """Feed the results of the calls awaiting one; the first stopping verdict, if any."""
        pending = dict(work.data.get("pending", []))
        work.data["pending"] = []
        hard: Verdict | None = None
        for message in tail:
            if not isinstance(message, ToolMessage) or message.tool_call_id not in pending:
                continue
            name = pending.pop(message.tool_call_id)
            outcome = tool_outcome(message)
            verdict = self._feed(
                work,
                "tool_result",
                name,
                outcome.output,
                error=outcome.error,
                call_id=message.tool_call_id,
            )
            if verdict.stops and hard is None:
                hard = verdict
        return hard

    def _before_model(
        self, work: _Pass, messages: Sequence[AnyMessage], hard: Verdict | None
    ) -> None:
        """The results are in and a turn begins; a stop here needs no call answered."""
        if hard is None and not work.data.get("turn"):
            verdict = self._feed(work, "turn_start")
            work.data["turn"] = True
            hard = verdict if verdict.stops else None
        if hard is None:
            return
        calls, answered = _open_calls(messages)
        self._resolve(work, hard, calls=calls, answered=answered)
        if work.stop is None:
            work.messages.append(_standalone_nudge(hard, work.config.locale))

    def _after_model(
        self, work: _Pass, messages: Sequence[AnyMessage], index: int, hard: Verdict | None
    ) -> None:
        """Feed the model's answer at ``messages[index]`` and its calls; refuse, nudge or stop."""
        answer = cast(AIMessage, messages[index])
        answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
        calls = _calls_of(answer)
        if not work.data.get("turn"):
            verdict = self._feed(work, "turn_start")
            hard = hard or (verdict if verdict.stops else None)
        work.data["turn"] = False
        tool_calls = [(name, args) for _, name, args, _ in calls]
        in_context = self._in_context(messages, index, work.data.get("ai"))
        verdict = self._feed(
            work, "assistant_message", answer.text, tool_calls, in_context=in_context
        )
        hard = hard or (verdict if verdict.stops else None)
        work.data["ai"] = answer.id
        if hard is None:
            self._check_calls(work, calls, answered)
        else:
            self._resolve(work, hard, calls=calls, answered=answered)
            if work.stop is None:
                # A verdict about the whole answer: its open calls carry the nudge (none runs,
                # and none is fed: the model asked for them before it knew), or, for a final
                # answer, the model gets one more turn to read it.
                text = nudge(hard.tool, hard.count, work.config.locale)
                open_calls = [c for c in calls if c[0] not in answered]
                work.messages += [_tool_answer(c[0], c[1], text) for c in open_calls]
                if not open_calls:
                    work.messages.append(_standalone_nudge(hard, work.config.locale))
                    work.jump = "model"
        ours = {getattr(m, "tool_call_id", None) for m in (*work.messages, *work.ending)}
        work.data["pending"] = [
            [call_id, name]
            for call_id, name, _, malformed in calls
            if not malformed and call_id not in ours
        ][-_MAX_PENDING:]

    def _in_context(
        self, messages: Sequence[AnyMessage], index: int, processed: str | None
    ) -> bool:
        """Whether the model that answered ``messages[index]`` saw the run's previous answer
        (SPEC §11 N2): the messages before its answer are what it read."""
        return holds_answer(messages, index, processed)

    def _check_calls(self, work: _Pass, calls: list[_CallInfo], answered: set[str]) -> None:
        """Feed each tool call of the answer; refuse (nudge) or stop on a hard detection."""
        for call_id, name, args, malformed in calls:
            verdict = self._feed(work, "tool_call", name, args, call_id=call_id)
            if malformed and not verdict.stops:  # it fails without reaching a tool
                verdict = self._feed(work, "tool_result", name, error=_MALFORMED, call_id=call_id)
            if not verdict.stops:
                continue
            self._resolve(work, verdict, calls=calls, answered=answered)
            if work.stop is not None:
                return
            text = nudge(verdict.tool or name, verdict.count, work.config.locale)
            if call_id in answered:
                # Answered already (a structured-output call, answered by the agent itself):
                # nothing to refuse, so the nudge follows the answers as a message of its own.
                work.messages.append(_separate_nudge(text))
            else:
                work.messages.append(_tool_answer(call_id, name, text))

    def _resolve(
        self,
        work: _Pass,
        verdict: Verdict,
        *,
        calls: list[_CallInfo],
        answered: set[str],
    ) -> None:
        """Spend a nudge on ``verdict`` (lifting the trip), or make it the pass's stop."""
        used = work.data.get("nudged", 0)
        if not verdict.tripped and used < work.nudges:
            work.detector.release()
            work.data["nudged"] = used + 1
            work.data["last_nudge"] = [verdict.key, verdict.count]
            self._report(work, verdict, nudge=True)
            return
        reported = verdict.tripped  # a stopped run's verdict is reported when it is fed
        original = work.detector.tripped
        if verdict.tripped and original is not None and not original.tripped:
            # A call of a run stopped earlier in this pass: the stop gives the real reason.
            verdict = dataclasses.replace(original, action=verdict.action)
        verdict = _after_nudge(verdict, work.data.get("last_nudge"), work.config.locale)
        work.stop = verdict
        if not reported:
            self._report(work, verdict)
        done = answered | {getattr(m, "tool_call_id", None) for m in work.messages}
        text = not_executed(work.config.locale)
        work.ending = [
            _tool_answer(call_id, name, text, "not_executed")
            for call_id, name, _, _ in calls
            if call_id not in done
        ]
        work.ending.append(
            AIMessage(
                content=verdict.message,
                name=MESSAGE_NAME,
                additional_kwargs={GUARD_KEY: "stop"},
            )
        )

    def _record(self, thread: str | None, events: list[DetectorEvent]) -> None:
        """Record a committed pass's events under its thread (``"-"`` without one)."""
        if self.recorder is not None and events:
            self.recorder.write(thread or "-", events)
            events.clear()

    def _reset_due(self, thread: str, data: GuardData) -> bool:
        with self._lock:
            requested = self._resets.get(thread)
        if requested is None:
            return False
        if data.get("at", float("-inf")) <= requested:
            return True
        with self._lock:
            self._resets.pop(thread, None)
        return False


# --- helpers -------------------------------------------------------------------------------------


def check_name(key: str, value: object) -> None:
    """Raise :class:`LoopGuardConfigError` unless ``value`` (the parameter ``key``) is a name."""
    if not isinstance(value, str) or not value:
        raise LoopGuardConfigError(
            f"{key} must be a non-empty string, not {value!r}",
            source="code",
            key=key,
            value=value,
            allowed="non-empty str",
        )


def _put(bounded: OrderedDict[_K, _V], key: _K, value: _V) -> None:
    bounded[key] = value
    bounded.move_to_end(key)
    while len(bounded) > _MAX_THREADS:
        bounded.popitem(last=False)


def _in_graph() -> bool:
    try:
        get_config()
    except RuntimeError:  # called outside a graph (a direct call in a test, say)
        return False
    return True


def _thread_id() -> str | None:
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # called outside a graph (a direct call in a test, say)
        return None
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


def _load(stored: object, thread: str | None = None) -> GuardData:
    """The guard state as stored, or a fresh one.

    A state that cannot be read (another version, a field of the wrong type: a checkpoint
    edited by hand, written by a bug, or corrupted) is discarded with one warning, and
    detection starts afresh: the next pass writes a good state back, so the guard is never
    off for good.
    """
    if stored is None:
        return _fresh()
    problem = _malformed(stored)
    if problem is None:
        data = cast(GuardData, dict(cast(Mapping[str, Any], stored)))
        data["pending"] = [[str(call_id), str(name)] for call_id, name in data["pending"]]
        return data
    logger.warning(
        "loop-guard: thread=%s: the guard's saved state is unreadable (%s); discarded, detection "
        "starts afresh",
        thread or "-",
        problem,
    )
    return _fresh()


def _new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def _fresh() -> GuardData:
    return GuardData(v=_STATE_VERSION, pending=[], ai=None, turn=False, nudged=0)


def _is_number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(cast(float, value))


def _malformed(stored: object) -> str | None:
    """What is wrong with a stored guard state (field names only, never values), or ``None``."""
    if not isinstance(stored, Mapping):
        return f"a {type(stored).__name__}, not a mapping"
    if stored.get("v") != _STATE_VERSION or type(stored.get("v")) is not int:
        return "another version"
    for key, valid in _CHECKS:
        if key not in stored:
            if key in _REQUIRED:
                return f"no {key!r}"
            continue
        if not valid(stored[key]):
            return f"{key!r} is a {type(stored[key]).__name__}"
    return None


_CHECKS: tuple[tuple[str, Callable[[object], bool]], ...] = (
    ("detector", lambda value: value is None or isinstance(value, Mapping)),
    (
        "pending",
        lambda value: (
            isinstance(value, list)
            and all(isinstance(p, list | tuple) and len(p) == 2 for p in value)
        ),
    ),
    ("ai", lambda value: value is None or isinstance(value, str)),
    ("turn", lambda value: type(value) is bool),
    ("nudged", lambda value: type(value) is int and value >= 0),
    ("at", _is_number),
)
"""What :func:`_malformed` checks of each field of a stored guard state, in order (made
once: the state is read at every step)."""
_REQUIRED = frozenset({"pending"})


def _last_ai(messages: Sequence[AnyMessage], end: int) -> int:
    for index in range(end - 1, -1, -1):
        if isinstance(messages[index], AIMessage):
            return index
    return -1


def _tail(messages: Sequence[AnyMessage], cursor: str | None, end: int) -> Sequence[AnyMessage]:
    """The messages after the last processed model answer, up to ``end`` (exclusive).

    Without that answer in the history (a first pass, a trimmed history), the messages after
    the last model answer before ``end``.
    """
    start = -1
    if cursor is not None:
        for index in range(end - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AIMessage) and message.id == cursor:
                start = index
                break
    if start < 0:
        start = _last_ai(messages, end)
    return messages[start + 1 : end]


def is_human_input(message: BaseMessage) -> bool:
    """Whether ``message`` is a human's (a ``HumanMessage`` the guard did not write)."""
    return isinstance(message, HumanMessage) and message.name != MESSAGE_NAME


def _calls_of(message: AIMessage) -> list[_CallInfo]:
    """``(call_id, tool, args, malformed)`` of each call an answer makes, invalid ones too."""
    calls: list[_CallInfo] = []
    for index, call in enumerate(message.tool_calls):
        name = safe_tool_name(call["name"])  # what a model wrote: bounded, no control chars
        calls.append((call.get("id") or f"#{index}", name, call["args"], False))
    for index, bad in enumerate(message.invalid_tool_calls):
        call_id = bad.get("id") or f"#invalid{index}"
        name = safe_tool_name(bad.get("name") or _UNKNOWN_TOOL)
        calls.append((call_id, name, bad.get("args"), True))
    return calls


def _open_calls(
    messages: Sequence[AnyMessage],
) -> tuple[list[_CallInfo], set[str]]:
    """The calls of the last model answer, and the ids among them already answered."""
    index = _last_ai(messages, len(messages))
    if index < 0:
        return [], set()
    answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
    return _calls_of(cast(AIMessage, messages[index])), answered


def _after_nudge(verdict: Verdict, last: object, locale: str) -> Verdict:
    """``verdict`` counting the attempts a nudge refused, when it stops the loop nudged last.

    After a nudge about a repeated call the detector starts that loop's count again, so its
    stop would say "3 times" of what is the 4th identical attempt in a row.
    """
    if not isinstance(last, list | tuple) or len(last) != 2 or last[0] is None:
        return verdict
    key, nudged = last
    if key != verdict.key or type(nudged) is not int or verdict.count > nudged:
        return verdict  # another loop, or one whose count went on (an error streak, say)
    count = nudged + 1
    return dataclasses.replace(
        verdict, count=count, message=stopped_after_nudge(verdict.tool, count, locale)
    )


def _tool_answer(call_id: str, name: str, text: str, kind: GuardKind = "nudge") -> ToolMessage:
    return ToolMessage(
        content=text,
        tool_call_id=call_id,
        name=name,
        status="error",
        additional_kwargs={GUARD_KEY: kind},
    )


def guard_kind(message: BaseMessage) -> GuardKind | None:
    """What the guard wrote ``message`` as (``"nudge"``, ``"not_executed"``, ``"stop"``), or
    ``None`` for a message the guard did not write (the user's, the model's, a tool's)."""
    kind = message.additional_kwargs.get(GUARD_KEY)
    return kind if kind in get_args(GuardKind) else None


def dangling_calls(messages: Sequence[BaseMessage]) -> list[tuple[int, str, str]]:
    """The tool calls no ``ToolMessage`` answers before the next other message.

    Providers (OpenAI, Anthropic) reject a history where a model answer's ``tool_calls`` are
    not each answered right after it. Returns ``(index of the model answer, call id, tool
    name)`` for each such call.
    """
    found: list[tuple[int, str, str]] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        owner = index - 1
        answered: set[str] = set()
        while index < len(messages) and isinstance(messages[index], ToolMessage):
            answered.add(cast(ToolMessage, messages[index]).tool_call_id)
            index += 1
        for call in message.tool_calls:
            call_id = call.get("id")
            if call_id and call_id not in answered:
                found.append((owner, call_id, call["name"]))
    return found


def repaired_history(
    messages: Sequence[BaseMessage], locale: str | None = None
) -> list[BaseMessage] | None:
    """``messages`` with every dangling tool call answered, or ``None`` when none is.

    Each unanswered call gets a "not executed" error ``ToolMessage`` (marked
    ``additional_kwargs={"loop_guard": "not_executed"}``) right after its model answer's other
    answers, before any later message.
    """
    if not dangling_calls(messages):
        return None
    text = not_executed(locale)
    repaired: list[BaseMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        repaired.append(message)
        index += 1
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        answered: set[str] = set()
        while index < len(messages) and isinstance(messages[index], ToolMessage):
            answered.add(cast(ToolMessage, messages[index]).tool_call_id)
            repaired.append(messages[index])
            index += 1
        repaired += [
            _tool_answer(call_id, call["name"], text, "not_executed")
            for call in message.tool_calls
            if (call_id := call.get("id")) and call_id not in answered
        ]
    return repaired


def repair_update(
    messages: Sequence[BaseMessage], locale: str | None = None
) -> list[BaseMessage] | None:
    """A ``messages`` update (for the ``add_messages`` reducer) that repairs ``messages``.

    Answers that belong at the end are appended; otherwise the whole history is rewritten
    (``RemoveMessage(REMOVE_ALL_MESSAGES)`` first), since the reducer cannot insert.
    ``None`` when nothing dangles.
    """
    repaired = repaired_history(messages, locale)
    if repaired is None:
        return None
    if repaired[: len(messages)] == list(messages):
        return repaired[len(messages) :]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *repaired]


def _standalone_nudge(verdict: Verdict, locale: str) -> HumanMessage:
    """A nudge that answers no call: it comes after every tool message of the step."""
    tr = translator(locale)
    if verdict.signal is Signal.REPEATED_ASSISTANT_RESPONSE:
        text = tr.gettext(
            "You gave the same response {count} times in a row. Do not repeat it; change your "
            "approach, or stop and report what is blocking you."
        )
    else:
        text = tr.gettext(
            "`{tool}` failed with the same error {count} times in a row. Do not call it again "
            "the same way; change your approach, or stop and report what is blocking you."
        )
    content = f"{HINT_MARKER} {text.format(tool=verdict.tool, count=verdict.count)}"
    return HumanMessage(content=content, name=MESSAGE_NAME, additional_kwargs={GUARD_KEY: "nudge"})


def _separate_nudge(text: str) -> HumanMessage:
    """A nudge no tool message can carry, marked as the guard's (see :data:`GUARD_KEY`)."""
    return HumanMessage(content=text, name=MESSAGE_NAME, additional_kwargs={GUARD_KEY: "nudge"})


def _stop_state(verdict: Verdict) -> LoopGuardStop:
    """The :data:`STOP_KEY` value of a stop: JSON data, no arguments, output or text but the
    stop's own message."""
    return LoopGuardStop(
        signal=verdict.signal.value if verdict.signal else "",
        action=verdict.action,
        tool=verdict.tool,
        tools=list(verdict.tools),
        count=verdict.count,
        threshold=verdict.threshold,
        message=verdict.message,
    )


def _payload(verdict: Verdict) -> dict[str, Any]:
    """The interrupt's value: what was detected, never arguments, output or text."""
    return {
        "type": "loop_guard",
        "signal": verdict.signal.value if verdict.signal else None,
        "tool": verdict.tool,
        "tools": list(verdict.tools),
        "count": verdict.count,
        "threshold": verdict.threshold,
        "message": verdict.message,
        "resume": ["continue", "end"],
    }


def _action(answer: object) -> ResumeAction:
    if isinstance(answer, Mapping):
        answer = answer.get("action")
    return "continue" if answer == "continue" else "end"
