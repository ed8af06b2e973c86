"""Where a guard's verdicts show besides its log: the traced run and the run's stream.

Every integration reports a verdict (a stop, an observe-mode "would stop", a warning, a nudge)
through :meth:`GuardRuntime.report <langchain_loop_guard._runtime.GuardRuntime.report>`, which
calls :func:`publish` here. Publishing does three things, each only when it applies and each
failing open (tracing trouble never reaches the agent):

* **the traced run**: when LangChain traces to LangSmith, the run of the step where the verdict
  happened (the graph node, or the chain around the tool or model call) gets metadata
  (``loop_guard.action``, ``loop_guard.signal``, ``loop_guard.tool``…), tags
  (``loop_guard:stop``, ``loop_guard:observe``… and ``loop_guard:<signal>``) and an event
  named ``"loop_guard"``; the top-level run of the trace gets the same metadata and tags, so a
  trace filter finds the runs that were (or would have been) stopped. LangChain's tracer sends
  a run's metadata, tags and events when the run ends, so nothing is sent by the guard itself.
* **the event stream**: a custom event named ``"loop_guard"`` (``on_custom_event`` in
  ``astream_events``, and any callback handler's ``on_custom_event``);
* **the graph's custom stream**: the same data through LangGraph's stream writer
  (``stream_mode="custom"``).

The data is names, counts and digests only (SPEC §8), as in the log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_loop_guard._detector import Verdict
from langchain_loop_guard._public import public_digest

__all__ = [
    "ACTION_RANK",
    "TRACE_EVENT",
    "Action",
    "Site",
    "context_ids",
    "event_data",
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

_TAG_OF_ACTION = {
    "warn": "warn",
    "observe": "observe",
    "nudge": "nudge",
    "block": "stop",
    "abort": "stop",
}


@dataclass(frozen=True, slots=True)
class Site:
    """Where a verdict happened.

    Attributes:
        integration: ``"handler"``, ``"middleware"`` or ``"node"``.
        position: the hook or callback that decided (``"after_model"``, ``"on_tool_start"``…).
        run_id: the top-level run's id, when known.
        thread_id: the LangGraph thread's id, when there is one.
    """

    integration: str
    position: str | None = None
    run_id: str | None = None
    thread_id: str | None = None


def context_ids() -> tuple[str | None, str | None]:
    """The top-level run id and the thread id of the runnable being executed, when known.

    The run id is the one the caller gave (``config={"run_id": ...}``, which LangGraph keeps
    in its runtime) or, when the run is traced, the trace's id (the top-level run's id).
    """
    config = _current_config()
    if config is None:
        return None, None
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    thread = configurable.get("thread_id", metadata.get("thread_id"))
    run_id: Any = None
    runtime = configurable.get("__pregel_runtime")
    info = getattr(runtime, "execution_info", None)
    run_id = getattr(info, "run_id", None)
    if run_id is None:
        traced = _traced_runs(config)
        if traced is not None:
            run_id = getattr(traced[1] or traced[0], "trace_id", None)
    return (
        None if run_id is None else str(run_id),
        None if thread in (None, "") else str(thread),
    )


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
    """The LangSmith run of the step being executed and its trace's top-level run.

    LangChain's tracer (``LangChainTracer``) is among the handlers of the current callback
    manager whenever the run is traced; its ``run_map`` holds every run in flight, the one of
    the current step (the callback manager's parent) included. ``None`` when not traced.
    """
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
    """Through the graph's stream writer (what ``langgraph.config.get_stream_writer()``
    returns), read from the runtime LangGraph keeps in the config of every node."""
    runtime = (config.get("configurable") or {}).get("__pregel_runtime")
    writer = getattr(runtime, "stream_writer", None)
    if callable(writer):
        writer(data)
