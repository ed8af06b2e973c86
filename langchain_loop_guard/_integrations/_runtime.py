"""What every guard object shares: configuration and runtime commands (SPEC §6), ``status``,
verdict reporting (names, signals, counts and digests only, SPEC §8), and failing open."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args, overload

from langchain_loop_guard._core._config import LoopGuardConfig, Mode
from langchain_loop_guard._core._detector import ALLOW, CallInfo, LoopDetector, Verdict
from langchain_loop_guard._core._errors import LoopGuardConfigError, LoopGuardError
from langchain_loop_guard._core._public import public_digest, safe_tool_name
from langchain_loop_guard._core._scope import ScopeChoice, scoped
from langchain_loop_guard._core._status import GuardStatus, RunInspection, StopRecord
from langchain_loop_guard._integrations._publish import (
    Action,
    Site,
    context_ids,
    event_data,
    publish,
)

if TYPE_CHECKING:
    from langchain_loop_guard._core._cost import CostLedger
    from langchain_loop_guard._core._detector import EventListener
    from langchain_loop_guard._replay._replay import ReplayReport
    from langchain_loop_guard._replay._trace import TraceRecorder

__all__ = [
    "ConfigInput",
    "DetectorCall",
    "GuardRuntime",
    "VerdictListener",
    "bad_argument",
    "guard_number",
    "inspection_later",
    "live_guards",
    "logger",
    "numbered_guards",
    "resolve_config",
]

logger = logging.getLogger("langchain_loop_guard")

ConfigInput = LoopGuardConfig | Mapping[str, Any] | None
"""What guard constructors accept: a config, a mapping of values, or ``None`` (load files and
environment, SPEC §5)."""

_RECENT_STOPS = 20

VerdictListener = Callable[[str, Verdict], None]
"""Called with ``(run_id, verdict)`` for every verdict a guard reports (see
:meth:`GuardRuntime.add_verdict_listener`)."""

# Every guard, weakly, in creation order: the IPython magic finds the newest one here.
_registry: weakref.WeakValueDictionary[int, GuardRuntime] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()
_registry_keys = itertools.count()


DetectorCall = Literal[
    "turn_start",
    "tool_call",
    "tool_result",
    "digested_call",
    "digested_result",
    "assistant_message",
    "user_message",
    "tick",
    "reset",
    "replay",
]
"""The :class:`LoopDetector` methods an integration feeds events through."""


def live_guards() -> list[GuardRuntime]:
    """The guard objects that still exist, oldest first (the registry holds them weakly)."""
    with _registry_lock:
        return [guard for _, guard in sorted(_registry.items())]


def numbered_guards() -> list[tuple[int, GuardRuntime]]:
    """The guard objects that still exist with their numbers, oldest first: a guard's number
    is its place in creation order (from 1), kept for its life, so a guard collected before it
    never renumbers it."""
    with _registry_lock:
        return [(key + 1, guard) for key, guard in sorted(_registry.items())]


def guard_number(guard: GuardRuntime) -> int:
    """``guard``'s number in :func:`numbered_guards` (0 for none)."""
    return next((number for number, known in numbered_guards() if known is guard), 0)


def bad_argument(
    key: str, value: object, expected: str, allowed: str, *, shown: object = None
) -> LoopGuardConfigError:
    """The error for a guard constructor's bad argument ``key`` (``shown``, when given, in the
    error's data instead of ``value``)."""
    return LoopGuardConfigError(
        f"{key} must be {expected}, not {value!r}",
        source="code",
        key=key,
        value=value if shown is None else shown,
        allowed=allowed,
    )


def resolve_config(
    config: ConfigInput, settings: Mapping[str, Any] | None = None
) -> LoopGuardConfig:
    """A config from what a guard constructor received (:data:`ConfigInput`), with its
    keyword settings (``mode="observe"``, ``cycle_repeats=4``) over it: values passed in code,
    validated by the configuration's own reader, so a field added to :class:`LoopGuardConfig`
    is a keyword of every guard at once."""
    if not settings:
        return _resolve_config_input(config)
    if config is None:  # files and environment, then the keywords: one reading, one error
        return LoopGuardConfig._load(settings)
    return _resolve_config_input(config).merged(source="code", **settings)


def _resolve_config_input(config: ConfigInput) -> LoopGuardConfig:
    if config is None:
        return LoopGuardConfig.load()
    if isinstance(config, LoopGuardConfig):
        return config
    if isinstance(config, Mapping):  # not **config: a key that is no string is named too
        # The mapping goes to the configuration's own reader whole: spread into keywords, a
        # key that is no string would fail before the error could name it.
        return LoopGuardConfig._load(config)
    msg = (
        f"config must be a LoopGuardConfig, a mapping of values or None, "
        f"not {type(config).__name__}"
    )
    raise LoopGuardConfigError(
        msg,
        source="code",
        key="config",
        value=type(config).__name__,
        allowed="LoopGuardConfig | Mapping[str, Any] | None",
    )


class GuardRuntime:
    """The shared runtime of a guard object; subclasses provide the runs they track. Thread-safe:
    one guard serves many concurrent runs, and LangChain calls tool callbacks on worker threads."""

    def __init__(
        self,
        config: ConfigInput = None,
        *,
        clock: Callable[[], float] | None = None,
        record_to: str | os.PathLike[str] | None = None,
        settings: Mapping[str, Any] | None = None,
    ):
        self._config = resolve_config(config, settings)
        self._clock = clock
        self._recorder: TraceRecorder | None = None
        if record_to is not None:
            from langchain_loop_guard._replay._trace import TraceRecorder  # noqa: PLC0415 - opt-in

            self._recorder = TraceRecorder(record_to, on_error=self.internal_error)
        self._lock = threading.RLock()
        self._stops = 0
        self._warnings = 0
        self._observed = 0
        self._recent: deque[StopRecord] = deque(maxlen=_RECENT_STOPS)
        self._failed: set[tuple[type[BaseException], str]] = set()
        self._listeners: tuple[VerdictListener, ...] = ()
        self._scoped: dict[str, tuple[LoopGuardConfig, LoopGuardConfig]] = {}
        self._last_scope: ScopeChoice | None = None
        with _registry_lock:
            _registry[next(_registry_keys)] = self

    # --- configuration and runtime commands ---------------------------------------------------

    @property
    def config(self) -> LoopGuardConfig:
        """The configuration in force (runtime commands replace it)."""
        return self._config

    @property
    def mode(self) -> Mode:
        """``"on"``, ``"observe"`` or ``"off"``."""
        return self._config.mode

    def set_mode(self, mode: Mode | str) -> None:
        """Switch every run of this guard to ``mode``, ``"on"``, ``"observe"`` or ``"off"`` in any
        case (as in the configuration); :class:`LoopGuardConfigError` for any other."""
        allowed = get_args(Mode)
        word = mode.lower() if isinstance(mode, str) else mode
        if word not in allowed:
            msg = f"mode {mode!r} is not one of {', '.join(allowed)} (any case)"
            raise LoopGuardConfigError(
                msg,
                source="runtime",
                key="mode",
                value=mode,
                allowed=" | ".join(allowed) + " (any case)",
            )
        self.configure(mode=word)

    def configure(self, **values: Any) -> None:
        """Change configuration values at runtime (validated; nothing is half applied)."""
        with self._lock:
            self._config = self._config.merged(source="runtime", **values)
            self._config_changed(self._config)

    def _config_changed(self, config: LoopGuardConfig) -> None:
        """Hook: push a new configuration to the runs being tracked."""

    def status(self) -> GuardStatus:
        """Mode, effective configuration with the source of each value, runs and stops."""
        with self._lock:
            return GuardStatus(
                mode=self._config.mode,
                config=tuple(self._config.describe()),
                active_runs=self._active_runs(),
                stops=self._stops,
                warnings=self._warnings,
                observed=self._observed,
                recent=tuple(self._recent),
                locale=self._config.locale,
                shed_runs=self._shed_runs(),
                scope=self._last_scope,
            )

    def _active_runs(self) -> int:
        return 0

    def _shed_runs(self) -> int:
        return 0

    # --- detectors and verdicts -----------------------------------------------------------------

    @property
    def recorder(self) -> TraceRecorder | None:
        """The trace recorder (``record_to=``), or ``None`` when nothing is recorded."""
        return self._recorder

    def new_detector(
        self,
        run_id: str | None = None,
        *,
        config: LoopGuardConfig | None = None,
        listener: EventListener | None = None,
    ) -> LoopDetector:
        """A detector for a new run, under ``config`` (read once by the caller; the one in force
        when ``None``). With ``record_to=``, the events of a detector given a ``run_id`` are
        recorded under it (one without, for a view, records nothing), unless a ``listener`` takes
        them (an adapter that records only the events it commits passes its own)."""
        clock = self._clock or time.monotonic
        config = config if config is not None else self._config
        if listener is None and run_id is not None and self._recorder is not None:
            listener = self._recorder.listener(run_id)
        return LoopDetector(config, clock=clock, listener=listener)

    def _run_config(
        self, choice: ScopeChoice, config: LoopGuardConfig | None = None
    ) -> LoopGuardConfig:
        """The configuration of a run's detector: ``config`` (the one in force when ``None``)
        with the scope chosen for the run (``"auto"`` resolved); the same object for the same
        configuration and scope."""
        config = config if config is not None else self._config
        if config.scope == choice.scope:
            return config
        cached = self._scoped.get(choice.scope)
        if cached is not None and cached[0] is config:
            return cached[1]
        derived = scoped(config, choice)
        self._scoped[choice.scope] = (config, derived)
        return derived

    def _scope_seen(self, choice: ScopeChoice) -> None:
        """The run being served is guarded in ``choice`` (``status`` shows the latest)."""
        self._last_scope = choice

    def inspection(
        self,
        run_id: str,
        detector: LoopDetector,
        scope: ScopeChoice | None = None,
        ledger: CostLedger | None = None,
    ) -> RunInspection:
        """The ``inspect`` view of ``detector``'s run, its digests keyed with this process's
        secret (``_public``): equal calls show equal digests, which no guess can be tested on.
        With the run's ``ledger``, what the run spent and what its loop cost."""
        return inspection_later(run_id, detector, self._config.locale, scope, ledger)()

    def feed(
        self, run_id: str, detector: LoopDetector, event: DetectorCall, *args: Any, **kwargs: Any
    ) -> Verdict:
        """Give ``detector`` one event, fail open (the guard's own failure is logged once and
        the event allowed), and report what it decided."""
        verdict = self.decide(detector, event, *args, **kwargs)
        if verdict.action != "allow":
            self.report(run_id, verdict)
        return verdict

    def decide(
        self, detector: LoopDetector, event: DetectorCall, *args: Any, **kwargs: Any
    ) -> Verdict:
        """:meth:`feed` without the report: for adapters that decide under their own lock and
        :meth:`report` after releasing it (listeners run outside any lock). ``"replay"`` feeds
        a :class:`~langchain_loop_guard._core._detector.DetectorEvent` digested beforehand."""
        try:
            verdict: Verdict = getattr(detector, event)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self.internal_error(event, exc)
            return ALLOW
        return verdict

    @overload
    def report(self) -> ReplayReport: ...
    @overload
    def report(
        self, run_id: str, verdict: Verdict, *, site: Site | None = None, nudge: bool = False
    ) -> None: ...
    def report(
        self,
        run_id: str | None = None,
        verdict: Verdict | None = None,
        *,
        site: Site | None = None,
        nudge: bool = False,
    ) -> ReplayReport | None:
        """Without arguments: the guard's ``record_to=`` trace replayed under its configuration
        (mode ``"on"``), a :class:`~langchain_loop_guard.ReplayReport` that Jupyter draws
        (``%loop_guard report``). With a run and a verdict (what adapters call): log the verdict
        (stops, warnings, observe-mode reports and nudges at ``INFO``, a stopped run's blocks at
        ``DEBUG``), count it for ``status``, tell the verdict listeners (not of a
        ``nudge``, which let the run go on) and publish it (:mod:`~._publish`).

        Raises:
            LoopGuardConfigError: no arguments, and the guard records no trace.
        """
        if run_id is None or verdict is None:
            from langchain_loop_guard._replay._replay import replay  # noqa: PLC0415 - when asked

            if self._recorder is None:
                msg = "report() replays the trace the guard records: create it with record_to="
                raise LoopGuardConfigError(msg, source="code", key="record_to", allowed="a path")
            return replay(self._recorder.path, self._config)
        self._report_verdict(run_id, verdict, site=site, nudge=nudge)
        return None

    def _report_verdict(
        self, run_id: str, verdict: Verdict, *, site: Site | None = None, nudge: bool = False
    ) -> None:
        signal = verdict.signal
        if signal is None:
            return
        action: Action = "nudge" if nudge else verdict.action  # type: ignore[assignment]
        with self._lock:
            if nudge:
                pass
            elif verdict.action == "warn":
                self._warnings += 1
            elif verdict.action == "observe":
                self._observed += 1
            elif not verdict.tripped:
                self._stops += 1
            if verdict.action != "warn" and not verdict.tripped:
                self._recent.append(
                    StopRecord(
                        run_id=run_id,
                        action=action,
                        signal=signal,
                        tool=verdict.tool,
                        count=verdict.count,
                        threshold=verdict.threshold,
                        at=time.time(),
                        cost=verdict.cost,
                    )
                )
        if site is None:
            site = self._site()
        # ids come from the caller's config: shown bounded and without control characters
        site = Site(
            site.integration,
            site.position,
            None if site.run_id is None else safe_tool_name(site.run_id),
            None if site.thread_id is None else safe_tool_name(site.thread_id),
        )
        _log_verdict(verdict, action, site.run_id or safe_tool_name(run_id), site.thread_id)
        if not nudge:
            for listener in self._listeners:
                try:
                    listener(run_id, verdict)
                except Exception as exc:  # noqa: BLE001 - a listener's bug must not break the run
                    self.internal_error("verdict listener", exc)
        if not verdict.tripped:
            with self.failing_open("publishing a verdict"):
                publish(event_data(verdict, site, action))

    _integration: ClassVar[str] = "guard"
    """The integration's name in published data: ``"handler"``, ``"middleware"``, ``"node"``."""

    def _site(self, position: str | None = None) -> Site:
        """Where the verdict being reported happened, read from the running runnable."""
        run_id: str | None = None
        thread_id: str | None = None
        with contextlib.suppress(Exception):  # no runnable, or an unexpected config
            run_id, thread_id = context_ids()
        return Site(self._integration, position, run_id, thread_id)

    def add_verdict_listener(self, listener: VerdictListener) -> Callable[[], None]:
        """Call ``listener(run_id, verdict)`` for every verdict this guard reports (not ``"allow"``:
        warnings, observed loops, stops, a stopped run's blocks and aborts with ``verdict.tripped``;
        a graph guard's nudges are no stops and are not given). It runs on the event's thread,
        outside the guard's lock; its exceptions are logged once and swallowed. Returns a function
        that removes it. Recipes (metrics counters): ``docs/observability.md``."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

        def remove() -> None:
            with self._lock:
                self._listeners = tuple(x for x in self._listeners if x is not listener)

        return remove

    def internal_error(self, where: str, exc: BaseException) -> None:
        """Log the guard's own failure: a WARNING once per origin (its type and the line that
        raised it, so a bug reached from several hooks warns once), then at DEBUG. Never its
        message, which could quote a tool's arguments."""
        frames = traceback.extract_tb(exc.__traceback__)
        origin = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        with self._lock:
            first = (type(exc), origin) not in self._failed
            self._failed.add((type(exc), origin))
        if first:
            logger.warning(
                "loop-guard internal error in %s (%s at %s); failing open, the run continues",
                where,
                type(exc).__name__,
                origin,
            )
        else:
            logger.debug("loop-guard internal error in %s (%s)", where, type(exc).__name__)

    def failing_open(self, where: str) -> contextlib.AbstractContextManager[None]:
        """Run an adapter's own code so that its failure never breaks the agent: deliberate stops
        (:class:`~langchain_loop_guard.LoopGuardError`, LangGraph's bubbling interrupts) pass
        through, anything else is logged and swallowed."""
        return _FailingOpen(self, where)


class _FailingOpen:
    """:meth:`GuardRuntime.failing_open`'s context manager (a class: cheaper than a generator)."""

    __slots__ = ("_guard", "_where")

    def __init__(self, guard: GuardRuntime, where: str) -> None:
        self._guard = guard
        self._where = where

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, LoopGuardError):
            return False
        if _is_graph_control_flow(exc):
            return False
        self._guard.internal_error(self._where, exc)
        return True


def _is_graph_control_flow(exc: BaseException) -> bool:
    # LangGraph's interrupts and parent commands must bubble (lazily: loads without LangGraph)
    try:
        from langgraph.errors import GraphBubbleUp  # noqa: PLC0415
    except ImportError:  # pragma: no cover - langgraph is a dependency
        return False
    return isinstance(exc, GraphBubbleUp)


def _log_verdict(verdict: Verdict, action: Action, run: str, thread: str | None) -> None:
    """The verdict's log line: a stopped run's blocks at DEBUG, else INFO. A stop is expected
    behaviour that reaches the app as ``LoopDetected`` (or its ``loop_guard_stop``): silent
    by default, as Python's ``logging`` shows only WARNING and above without configuration;
    WARNING is for what needs the user (the guard's own failures, a thread left invalid)."""
    level = logging.DEBUG if verdict.tripped else logging.INFO
    signal = verdict.signal.value if verdict.signal is not None else None
    logger.log(
        level,
        "loop-guard %s: run=%s thread=%s signal=%s tool=%s count=%d threshold=%d",
        action,
        run,
        thread or "-",
        signal,
        verdict.tool,
        verdict.count,
        verdict.threshold,
        extra={
            "loop_guard_action": action,
            "loop_guard_signal": signal,
            "loop_guard_tool": verdict.tool,
            "loop_guard_count": verdict.count,
            "loop_guard_threshold": verdict.threshold,
            "loop_guard_run_id": run,
            "loop_guard_thread_id": thread,
            "loop_guard_key": public_digest(verdict.key),
        },
    )


def inspection_later(
    run_id: str,
    detector: LoopDetector,
    locale: str,
    scope: ScopeChoice | None = None,
    ledger: CostLedger | None = None,
) -> Callable[[], RunInspection]:
    """:meth:`GuardRuntime.inspection` as the run stands now, made when asked for: the run's
    counters and cost are read now, its recent calls' digests keyed only then (most ended runs
    are never inspected)."""
    snap = detector.snapshot()
    spent = loop_cost = None
    if ledger is not None:
        spent = ledger.total()
        stop = detector.tripped
        if stop is not None:
            loop_cost = ledger.cost_of(stop.signal, stop.tool, stop.tools, stop.count)

    def made() -> RunInspection:
        return RunInspection(
            run_id=run_id,
            turns=snap.turns,
            calls=snap.calls,
            elapsed_s=snap.elapsed_s,
            tripped=snap.tripped,
            warned=snap.warned,
            recent=tuple(
                CallInfo(call.tool, public_digest(call.digest), call.outcome)
                for call in snap.recent
            ),
            locale=locale,
            scope=scope,
            spent=spent,
            loop_cost=loop_cost,
        )

    return made
