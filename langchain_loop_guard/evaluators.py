"""LangSmith evaluators: score traced runs for loops, with the guard's own detector.

:func:`loop_evaluator` makes an evaluator that ``langsmith.evaluate`` and ``aevaluate`` accept
(a ``RunEvaluator``). For each run it replays the run's trace (its model and tool runs, as
``loop-guard replay`` reads a LangSmith export) through a detector with your configuration
and returns one feedback entry::

    from langsmith import evaluate
    from langchain_loop_guard.evaluators import loop_evaluator

    evaluate(agent_target, data="my-dataset", evaluators=[loop_evaluator()])

The feedback (key ``"loop"`` unless you name another):

- ``score``: ``1`` when the guard would stop the run (a loop), ``0`` when it would not;
- ``value``: where it would stop, as data: the signal, the tool, the event and tool call it
  would stop at, the count and threshold, what the loop had cost up to there (model calls
  and tokens), the calls after the stop it would have spared, and the configuration keys
  that would have let the run go on (``None`` when it would not stop);
- ``comment``: the stop's reason and remedy, and what the loop cost, in your locale.

A run with its child runs (what ``evaluate`` passes, a run tree) is replayed as it is; a run
without them (one read back from a project) has its trace fetched with the client's
``list_runs(trace_id=...)``. :meth:`LoopEvaluator.evaluate_trace` scores runs you fetched
yourself. Only names, digests and counts go into the feedback, never content.
"""

from __future__ import annotations

import datetime as _dt
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from langsmith.evaluation import EvaluationResult, RunEvaluator

from langchain_loop_guard._core._config import LoopGuardConfig
from langchain_loop_guard._core._cost import cost_text
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._remedy import remedy_keys, remedy_text
from langchain_loop_guard._replay._langsmith import read_langsmith
from langchain_loop_guard._replay._replay import replay_items

if TYPE_CHECKING:
    from langsmith import Client

    from langchain_loop_guard._replay._replay_results import RunReplay

__all__ = ["LoopEvaluator", "loop_evaluator"]

_FIELDS = (
    "id",
    "run_type",
    "name",
    "start_time",
    "end_time",
    "inputs",
    "outputs",
    "error",
    "status",
    "trace_id",
    "parent_run_id",
    "extra",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
)
"""What a run is read by: the fields ``loop-guard replay`` reads of a LangSmith export."""


def loop_evaluator(
    config: LoopGuardConfig | Mapping[str, Any] | None = None,
    *,
    key: str = "loop",
    client: Client | None = None,
) -> LoopEvaluator:
    """An evaluator that scores each run for loops (see the module).

    Args:
        config: the configuration to replay with: a :class:`LoopGuardConfig`, or its values
            as a mapping; ``LoopGuardConfig.load()`` (files and environment) when ``None``.
            Its mode is taken as ``"on"``: the evaluator says where the guard would stop.
        key: the feedback key.
        client: the LangSmith client that fetches the trace of a run given without its
            child runs (a new ``langsmith.Client()`` when needed and ``None``).

    Raises:
        LoopGuardConfigError: an invalid configuration.
    """
    if config is None:
        resolved = LoopGuardConfig.load()
    elif isinstance(config, LoopGuardConfig):
        resolved = config
    else:
        resolved = LoopGuardConfig(**config)
    return LoopEvaluator(resolved, key=key, client=client)


class LoopEvaluator(RunEvaluator):
    """Scores runs for loops (make one with :func:`loop_evaluator`).

    Attributes:
        config: the configuration each trace is replayed with.
        key: the feedback key.
    """

    def __init__(
        self, config: LoopGuardConfig, *, key: str = "loop", client: Client | None = None
    ) -> None:
        self.config = config
        self.key = key
        self._client = client

    @property
    def feedback_keys(self) -> list[str]:
        """The one feedback key this evaluator writes."""
        return [self.key]

    def evaluate_run(
        self,
        run: Any,
        example: Any = None,
        evaluator_run_id: uuid.UUID | None = None,
    ) -> EvaluationResult:
        """Score ``run``: its trace replayed (its child runs, else fetched by its trace id).

        Raises:
            TraceFormatError: the trace cannot be read as runs, or holds no model or tool
                run with its inputs and outputs.
        """
        del example, evaluator_run_id
        if getattr(run, "child_runs", None) or (isinstance(run, Mapping) and run.get("child_runs")):
            return self.evaluate_trace([run])
        return self.evaluate_trace(self._fetch(run))

    def evaluate_trace(self, runs: Iterable[Any]) -> EvaluationResult:
        """Score the runs of one trace: LangSmith ``Run`` objects or run trees, or their JSON
        (``dict``) as any export shape ``loop-guard replay`` reads."""
        values = [("langsmith", line, _as_json(run)) for line, run in enumerate(runs, 1)]
        items = read_langsmith(values, scope="thread" if self.config.scope == "thread" else "run")
        replayed = replay_items(items, self.config, path="langsmith", format="langsmith")
        stopped = [run for run in replayed.runs if run.stop is not None]
        return self._result(stopped[0] if stopped else None)

    def _fetch(self, run: Any) -> list[Any]:
        """The runs of ``run``'s trace, from the LangSmith API."""
        from langsmith import Client  # noqa: PLC0415 - only for runs given without children

        client = self._client if self._client is not None else Client()
        trace = getattr(run, "trace_id", None) or getattr(run, "id", None)
        if isinstance(run, Mapping):
            trace = run.get("trace_id") or run.get("id")
        return list(client.list_runs(trace_id=trace))

    def _result(self, run: RunReplay | None) -> EvaluationResult:
        locale = self.config.locale
        tr = translator(locale)
        stop = None if run is None else run.stop
        if run is None or stop is None:
            comment = tr.gettext("No loop: the guard would not stop this run.")
            return EvaluationResult(key=self.key, score=0, value=None, comment=comment)
        cost, spared = stop.cost, run.spared
        value: dict[str, Any] = {
            "signal": stop.signal.value,
            "tool": stop.tool,
            "event": stop.event,
            "tool_call": stop.call,
            "count": stop.count,
            "threshold": stop.threshold,
            "cost": None if cost is None else cost.to_json(),
            "spared": None if spared is None else spared.to_json(),
            "remedy": list(remedy_keys(stop.signal)),
        }
        where = tr.gettext("The guard would stop this run at tool call {call}: {reason}")
        parts = [where.format(call=stop.call, reason=stop.reason)]
        remedy = remedy_text(stop.signal, stop.tool, locale)
        if remedy and remedy not in stop.reason:
            parts.append(remedy)
        if cost is not None:
            parts.append(cost_text(cost, locale))
        return EvaluationResult(key=self.key, score=1, value=value, comment=" ".join(parts))


def _as_json(run: Any) -> Any:
    """A run (a LangSmith ``Run``, a run tree, or JSON already) as JSON data, child runs
    included: what the replay's LangSmith reader takes."""
    if isinstance(run, Mapping):
        return json.loads(json.dumps(run, default=_plain))
    data: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(run, name, None)
        if value is not None:
            data[name] = value
    children = getattr(run, "child_runs", None)
    if children:
        data["child_runs"] = [_as_json(child) for child in children]
    return json.loads(json.dumps(data, default=_plain))


def _plain(value: Any) -> Any:
    """JSON for what a run holds: times, ids, LangChain objects (serialized as LangChain
    serializes them), pydantic models; anything else as its text."""
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return str(value)
