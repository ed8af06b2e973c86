"""Where a guard's verdicts show besides its log: the traced LangSmith runs, a custom event and
the graph's custom stream (``docs/observability.md``); and the filter that keeps LangChain from
logging each deliberate stop of the callback handler a second time, as an error."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_loop_guard._core._detector import Verdict
from langchain_loop_guard._core._public import public_digest

__all__ = [
    "ACTION_RANK",
    "LANGCHAIN_CALLBACK_LOGGER",
    "TRACE_EVENT",
    "Action",
    "CallbackStopFilter",
    "Site",
    "context_ids",
    "event_data",
    "install_callback_stop_filter",
    "publish",
    "trace_metadata",
    "trace_tags",
]

TRACE_EVENT = "loop_guard"
"""The name of the custom event, of the stream item's ``"type"`` and of the traced run's event."""

Action = Literal["warn", "observe", "nudge", "block", "abort"]
"""What a published verdict did: a verdict's action, or ``"nudge"`` (a refused call; the run
goes on)."""

ACTION_RANK: Mapping[str, int] = {"warn": 0, "observe": 1, "nudge": 2, "block": 3, "abort": 3}
"""A run's metadata keeps its most serious verdict: a later warning does not hide a stop."""

_TAG_OF_ACTION = {"block": "stop", "abort": "stop"}  # any other action is its own tag


@dataclass(frozen=True, slots=True)
class Site:
    """Where a verdict happened: the integration (``"handler"``, ``"middleware"``, ``"node"``), the
    hook or callback that decided (``"after_model"``, ``"on_tool_start"``…), the top-level run's id
    and the LangGraph thread's, when known."""

    integration: str
    position: str | None = None
    run_id: str | None = None
    thread_id: str | None = None


def context_ids() -> tuple[str | None, str | None]:
    """The top-level run id and the thread id of the runnable being executed, when known: the
    run id the caller gave (which LangGraph keeps in its runtime), else the trace's id."""
    config = _current_config()
    if config is None:
        return None, None
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    thread = configurable.get("thread_id", metadata.get("thread_id"))
    runtime = configurable.get("__pregel_runtime")
    info = getattr(runtime, "execution_info", None)
    run_id: Any = getattr(info, "run_id", None)
    if run_id is None:
        traced = _traced_runs(config)
        if traced is not None:
            run_id = getattr(traced[1] or traced[0], "trace_id", None)
    return (None if run_id is None else str(run_id), None if thread in (None, "") else str(thread))


def event_data(verdict: Verdict, site: Site, action: Action) -> dict[str, Any]:
    """The published data of a verdict: names, counts and a digest, never content."""
    signal = verdict.signal
    return {
        "type": TRACE_EVENT,
        "action": action,
        "signal": signal.value if signal is not None else None,
        "tool": verdict.tool,
        "tools": list(verdict.tools),
        "count": verdict.count,
        "threshold": verdict.threshold,
        "key": public_digest(verdict.key),
        "integration": site.integration,
        "position": site.position,
        "run_id": site.run_id,
        "thread_id": site.thread_id,
    }


def trace_metadata(data: Mapping[str, Any]) -> dict[str, Any]:
    """The traced run's metadata for a published verdict (``loop_guard.<field>``)."""
    fields = ("action", "signal", "tool", "count", "threshold", "integration", "position")
    return {f"loop_guard.{name}": data[name] for name in fields if data.get(name) is not None}


def trace_tags(data: Mapping[str, Any]) -> list[str]:
    """The traced run's tags for a published verdict."""
    tags = [f"loop_guard:{_TAG_OF_ACTION.get(str(data['action']), str(data['action']))}"]
    if data.get("signal"):
        tags.append(f"loop_guard:{data['signal']}")
    return tags


def publish(data: Mapping[str, Any]) -> None:
    """Send ``data`` (see :func:`event_data`) to the traced run, the event stream and the
    graph's custom stream, whichever exist. Raises only on the guard's own bugs (the caller
    fails open); an absent tracer or stream is not an error."""
    config = _current_config()
    if config is None:
        return  # outside any runnable: no trace, no stream
    traced = _traced_runs(config)
    if traced is not None:
        _mark(traced, data)
    _dispatch(dict(data))
    _write(dict(data), config)


# --- the traced run ---------------------------------------------------------------------------


def _current_config() -> Mapping[str, Any] | None:
    from langchain_core.runnables.config import var_child_runnable_config  # noqa: PLC0415

    config = var_child_runnable_config.get()
    return config if isinstance(config, Mapping) else None


def _traced_runs(config: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The LangSmith run of the step being executed and its trace's top-level run, from the
    ``run_map`` of the tracer among the callback manager's handlers; ``None`` when not traced."""
    callbacks = config.get("callbacks")
    parent = getattr(callbacks, "parent_run_id", None)
    handlers = getattr(callbacks, "handlers", None)
    if parent is None or not handlers:
        return None
    from langchain_core.tracers.langchain import LangChainTracer  # noqa: PLC0415

    tracer = next((h for h in handlers if isinstance(h, LangChainTracer)), None)
    if tracer is None:
        return None
    run = tracer.run_map.get(str(parent))
    if run is None:
        return None
    trace_id = getattr(run, "trace_id", None)
    root = tracer.run_map.get(str(trace_id)) if trace_id is not None else None
    return run, root if root is not run else None


def _mark(traced: tuple[Any, Any], data: Mapping[str, Any]) -> None:
    step, root = traced
    metadata = trace_metadata(data)
    tags = trace_tags(data)
    for run in (step, root):
        if run is None:
            continue
        current = (run.extra or {}).get("metadata") or {}
        held = ACTION_RANK.get(str(current.get("loop_guard.action")), -1)
        if ACTION_RANK.get(str(data["action"]), 0) >= held:
            run.add_metadata(metadata)
        run.add_tags([tag for tag in tags if tag not in (run.tags or ())])
    step.add_event(
        {
            "name": TRACE_EVENT,
            "time": datetime.now(UTC).isoformat(),
            "kwargs": {k: v for k, v in data.items() if v is not None and k != "type"},
        }
    )


# --- the streams ------------------------------------------------------------------------------


def _dispatch(data: dict[str, Any]) -> None:
    from langchain_core.callbacks.manager import dispatch_custom_event  # noqa: PLC0415

    # RuntimeError: no parent run to attach the event to
    with contextlib.suppress(RuntimeError):
        dispatch_custom_event(TRACE_EVENT, data)


def _write(data: dict[str, Any], config: Mapping[str, Any]) -> None:
    """Through the graph's stream writer, from the runtime in every node's config."""
    runtime = (config.get("configurable") or {}).get("__pregel_runtime")
    writer = getattr(runtime, "stream_writer", None)
    if callable(writer):
        writer(data)


# --- LangChain's line for a callback that raised ------------------------------------------------

LANGCHAIN_CALLBACK_LOGGER = "langchain_core.callbacks.manager"
"""The logger LangChain's callback manager logs a raising callback to."""

_CALLBACK_ERROR = "Error in %s.%s callback: %s"
_STOP_REPRS = ("LoopDetected(",)


class CallbackStopFilter(logging.Filter):
    """Drop LangChain's ``Error in LoopGuardCallbackHandler.on_tool_start callback:
    LoopDetected(...)`` log line.

    LangChain's callback manager logs every exception a callback raises at ``WARNING``, also
    when the handler asks for it to propagate (``raise_error``), which is how the callback
    handler stops a run; the guard has already logged the stop, once. This filter drops
    exactly those lines: the message of a ``LoopDetected`` raised by a handler whose class
    name it was given. Every other line passes, other handlers' errors included.

    :class:`~langchain_loop_guard.LoopGuardCallbackHandler` installs one on LangChain's logger
    (``"langchain_core.callbacks.manager"``) when it is created; to see LangChain's line
    again, remove it as ``docs/observability.md`` shows.
    """

    def __init__(self, handler_names: tuple[str, ...] = ("LoopGuardCallbackHandler",)) -> None:
        super().__init__()
        self._names = set(handler_names)

    def add_handler_name(self, name: str) -> None:
        """Also drop the stop lines of handlers of class ``name`` (a subclass of the guard's)."""
        self._names.add(name)

    def filter(self, record: logging.LogRecord) -> bool:
        """``False`` for a deliberate stop's line (dropped), ``True`` for anything else."""
        if record.msg != _CALLBACK_ERROR:
            return True
        args = record.args
        if not isinstance(args, tuple) or len(args) != 3:
            return True
        name, _, error = args
        return not (
            name in self._names and isinstance(error, str) and error.startswith(_STOP_REPRS)
        )


_installed: CallbackStopFilter | None = None
_install_lock = threading.Lock()


def install_callback_stop_filter(handler_name: str) -> CallbackStopFilter:
    """Install the shared :class:`CallbackStopFilter` on LangChain's callback logger (once),
    dropping the stop lines of handlers named ``handler_name``."""
    global _installed  # noqa: PLW0603 - one filter per process, installed once
    with _install_lock:
        if _installed is None:
            _installed = CallbackStopFilter()
            logging.getLogger(LANGCHAIN_CALLBACK_LOGGER).addFilter(_installed)
        _installed.add_handler_name(handler_name)
        return _installed
