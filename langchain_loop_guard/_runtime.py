"""What every guard object shares: configuration, runtime commands, reporting, failing open.

The callback handler, the middleware and the node guard each adapt a host's events to
:class:`~langchain_loop_guard._detector.LoopDetector`; this module holds the rest so they stay
thin: the configuration in force and the runtime commands that change it (SPEC §6), the
``status``/``inspect`` values, logging of verdicts (names, signals, counts and digests only,
SPEC §8), and the fail-open rule: the guard's own failure never breaks the user's agent.
"""

from __future__ import annotations

import contextlib
import html
import logging
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from langchain_loop_guard._config import LoopGuardConfig, Mode
from langchain_loop_guard._detector import ALLOW, CallInfo, LoopDetector, Signal, Verdict
from langchain_loop_guard._errors import LoopGuardConfigError, LoopGuardError

__all__ = [
    "ConfigInput",
    "GuardRuntime",
    "GuardStatus",
    "RunInspection",
    "StopRecord",
    "logger",
    "resolve_config",
]

logger = logging.getLogger("langchain_loop_guard")

ConfigInput = LoopGuardConfig | Mapping[str, Any] | None
"""What guard constructors accept: a config, a mapping of values, or ``None`` (load files and
environment, SPEC §5)."""

_RECENT_STOPS = 20


def resolve_config(config: ConfigInput) -> LoopGuardConfig:
    """A config object from what a guard constructor received.

    ``None`` loads the files and environment; a mapping is taken as values passed in code,
    over files and environment; a :class:`LoopGuardConfig` is used as it is.
    """
    if config is None:
        return LoopGuardConfig.load()
    if isinstance(config, LoopGuardConfig):
        return config
    if isinstance(config, Mapping):
        return LoopGuardConfig.load(**dict(config))
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


@dataclass(frozen=True, slots=True)
class StopRecord:
    """A loop the guard stopped or reported: no arguments, outputs or text."""

    run_id: str
    action: str
    signal: Signal
    tool: str | None
    count: int
    threshold: int
    at: float


def _table_text(title: str, rows: list[tuple[str, str]]) -> str:
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join([title, *(f"  {k.ljust(width)}  {v}" for k, v in rows)])


def _table_html(title: str, rows: list[tuple[str, str]]) -> str:
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
        f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table><caption>{html.escape(title)}</caption>{body}</table>"


@dataclass(frozen=True, slots=True)
class GuardStatus:
    """The guard's state for the ``status`` command; prints as text, renders as HTML."""

    mode: Mode
    config: tuple[tuple[str, Any, str], ...]
    active_runs: int
    stops: int
    warnings: int
    observed: int
    recent: tuple[StopRecord, ...] = field(default=())

    def _rows(self) -> list[tuple[str, str]]:
        rows = [
            ("mode", self.mode),
            ("active runs", str(self.active_runs)),
            ("stops", str(self.stops)),
            ("observed loops", str(self.observed)),
            ("warnings", str(self.warnings)),
        ]
        rows += [(name, f"{_show(value)}  ({source})") for name, value, source in self.config]
        rows += [
            (
                f"recent {r.action}",
                f"run {r.run_id}: {r.signal.value} tool={r.tool} {r.count}/{r.threshold}",
            )
            for r in self.recent
        ]
        return rows

    def __str__(self) -> str:
        return _table_text("loop-guard status", self._rows())

    def _repr_html_(self) -> str:
        return _table_html("loop-guard status", self._rows())


@dataclass(frozen=True, slots=True)
class RunInspection:
    """The recent tool calls of one run for the ``inspect`` command: names and digests only."""

    run_id: str
    turns: int
    calls: int
    elapsed_s: float
    tripped: Signal | None
    warned: tuple[Signal, ...]
    recent: tuple[CallInfo, ...]

    def _rows(self) -> list[tuple[str, str]]:
        rows = [
            ("run", self.run_id),
            ("model turns", str(self.turns)),
            ("tool calls", str(self.calls)),
            ("elapsed", f"{self.elapsed_s:.1f} s"),
            ("stopped by", self.tripped.value if self.tripped else "-"),
            ("warnings", ", ".join(s.value for s in self.warned) or "-"),
        ]
        rows += [
            (f"call -{len(self.recent) - i}", f"{c.tool} #{c.digest} {c.outcome}")
            for i, c in enumerate(self.recent)
        ]
        return rows

    def __str__(self) -> str:
        return _table_text("loop-guard inspect", self._rows())

    def _repr_html_(self) -> str:
        return _table_html("loop-guard inspect", self._rows())


def _show(value: object) -> str:
    if isinstance(value, frozenset | set):
        return ",".join(sorted(map(str, value))) or "-"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
    return str(value)


class GuardRuntime:
    """The shared runtime of a guard object. Subclasses provide the runs they track.

    Thread-safe: one guard serves many concurrent runs, and LangChain calls tool callbacks on
    worker threads.
    """

    def __init__(self, config: ConfigInput = None, *, clock: Callable[[], float] | None = None):
        self._config = resolve_config(config)
        self._clock = clock
        self._lock = threading.RLock()
        self._stops = 0
        self._warnings = 0
        self._observed = 0
        self._recent: deque[StopRecord] = deque(maxlen=_RECENT_STOPS)
        self._failed: set[str] = set()

    # --- configuration and runtime commands ---------------------------------------------------

    @property
    def config(self) -> LoopGuardConfig:
        """The configuration in force (runtime commands replace it)."""
        return self._config

    @property
    def mode(self) -> Mode:
        """``"on"``, ``"observe"`` or ``"off"``."""
        return self._config.mode

    def set_mode(self, mode: Mode) -> None:
        """Switch every run of this guard to ``mode`` (``"on"``, ``"observe"`` or ``"off"``)."""
        allowed = get_args(Mode)
        if mode not in allowed:
            msg = f"mode {mode!r} is not one of {', '.join(allowed)}"
            raise LoopGuardConfigError(
                msg, source="runtime", key="mode", value=mode, allowed=" | ".join(allowed)
            )
        self.configure(mode=mode)

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
            )

    def _active_runs(self) -> int:
        return 0

    # --- detectors and verdicts -----------------------------------------------------------------

    def new_detector(self) -> LoopDetector:
        """A detector for a new run, under the configuration in force."""
        return LoopDetector(self._config, clock=self._clock or time.monotonic)

    def inspection(self, run_id: str, detector: LoopDetector) -> RunInspection:
        """The ``inspect`` view of ``detector``'s run."""
        snap = detector.snapshot()
        return RunInspection(
            run_id=run_id,
            turns=snap.turns,
            calls=snap.calls,
            elapsed_s=snap.elapsed_s,
            tripped=snap.tripped,
            warned=snap.warned,
            recent=snap.recent,
        )

    def feed(
        self,
        run_id: str,
        detector: LoopDetector,
        event: Literal[
            "turn_start", "tool_call", "tool_result", "assistant_message", "tick", "reset"
        ],
        *args: Any,
        **kwargs: Any,
    ) -> Verdict:
        """Give ``detector`` one event, fail open, and report what it decided.

        The guard's own failure (a bug, a hostile value) never reaches the agent: it is logged
        once per kind of event and the event is allowed.
        """
        try:
            verdict: Verdict = getattr(detector, event)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - fail open, SPEC §8
            self.internal_error(event, exc)
            return ALLOW
        if verdict.action != "allow":
            self.report(run_id, verdict)
        return verdict

    def report(self, run_id: str, verdict: Verdict) -> None:
        """Log ``verdict`` and count it for ``status``: tool names, signals and counts only."""
        signal = verdict.signal
        if signal is None:
            return
        with self._lock:
            if verdict.action == "warn":
                self._warnings += 1
            elif verdict.action == "observe":
                self._observed += 1
            elif not verdict.tripped:
                self._stops += 1
            if verdict.action != "warn" and not verdict.tripped:
                self._recent.append(
                    StopRecord(
                        run_id=run_id,
                        action=verdict.action,
                        signal=signal,
                        tool=verdict.tool,
                        count=verdict.count,
                        threshold=verdict.threshold,
                        at=time.time(),
                    )
                )
        level = logging.INFO if verdict.tripped else logging.WARNING
        logger.log(
            level,
            "loop-guard %s: run=%s signal=%s tool=%s count=%d threshold=%d",
            verdict.action,
            run_id,
            signal.value,
            verdict.tool,
            verdict.count,
            verdict.threshold,
            extra={
                "loop_guard_action": verdict.action,
                "loop_guard_signal": signal.value,
                "loop_guard_tool": verdict.tool,
                "loop_guard_count": verdict.count,
                "loop_guard_threshold": verdict.threshold,
                "loop_guard_run_id": run_id,
                "loop_guard_key": verdict.key,
            },
        )

    def internal_error(self, where: str, exc: BaseException) -> None:
        """Log the guard's own failure: once per place with a traceback, then quietly.

        The exception's message is not logged (it could quote a tool's arguments); its type and
        traceback are.
        """
        with self._lock:
            first = where not in self._failed
            self._failed.add(where)
        if first:
            frames = traceback.extract_tb(exc.__traceback__)
            origin = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
            logger.warning(
                "loop-guard internal error in %s (%s at %s); failing open, the run continues",
                where,
                type(exc).__name__,
                origin,
            )
        else:
            logger.debug("loop-guard internal error in %s (%s)", where, type(exc).__name__)

    @contextlib.contextmanager
    def failing_open(self, where: str) -> Iterator[None]:
        """Run an adapter's own code so that its failure never breaks the agent.

        Deliberate stops (:class:`~langchain_loop_guard.LoopGuardError` subclasses and
        LangGraph's bubbling interrupts) pass through; anything else is logged and swallowed.
        """
        try:
            yield
        except LoopGuardError:
            raise
        except Exception as exc:
            if _is_graph_control_flow(exc):
                raise
            self.internal_error(where, exc)


def _is_graph_control_flow(exc: BaseException) -> bool:
    # LangGraph's interrupts and parent commands must bubble; imported lazily so this module
    # stays importable without LangGraph.
    try:
        from langgraph.errors import GraphBubbleUp  # noqa: PLC0415
    except ImportError:  # pragma: no cover - langgraph is a dependency
        return False
    return isinstance(exc, GraphBubbleUp)
