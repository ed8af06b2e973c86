"""What a stop is: ``LoopDetected``, the ``on_stop`` choices, and the stop's shapes as data
(result key, interrupt, held marker, final message), each made from the verdict."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, cast, get_args

from langchain_core.messages import AIMessage
from langgraph.errors import GraphBubbleUp
from pydantic import BeforeValidator
from typing_extensions import TypedDict

from langchain_loop_guard._core._cost import LoopCost
from langchain_loop_guard._core._detector import Signal, Verdict
from langchain_loop_guard._core._errors import LoopGuardError
from langchain_loop_guard._core._public import public_digest
from langchain_loop_guard._core._remedy import remedy_keys
from langchain_loop_guard._integrations._guard_messages import GUARD_KEY, MESSAGE_NAME
from langchain_loop_guard._integrations._repair import arepair_thread, repair_thread

__all__ = [
    "ON_STOP_VALUES",
    "RESUME_SCHEMA",
    "RESUME_VALUES",
    "LoopDetected",
    "LoopGuardResume",
    "LoopGuardStop",
    "OnStop",
    "ResumeAction",
    "from_marker",
    "held_marker",
    "interrupt_payload",
    "resume_action",
    "stop_message",
    "stop_state",
]


class LoopDetected(LoopGuardError, GraphBubbleUp):
    """The agent looped and the guard stopped the run (the agent's fault, not yours).

    It subclasses LangGraph's ``GraphBubbleUp``, so ``ToolNode`` error handling, tool-retry
    middleware and node retry policies let it pass untouched, and it reaches the caller of
    ``invoke``/``stream``/``ainvoke``/``astream`` with its type and attributes intact. The
    checkpoint (if any) stays resumable.

    Attributes:
        signal: which loop was detected.
        tool: the tool the loop is about (``None`` for a repeated assistant response).
        tools: every tool of the loop (a cycle names each).
        count: how often the pattern was seen.
        threshold: the limit it reached.
        run_id: the top-level run (or thread) the loop happened in.
        verdict: the detector's full verdict.
        remedy: the configuration keys that would have let this run go on, the likeliest
            first (``("ignore_tools", "repeat_frequency_threshold")`` for a poller's wait
            stopped by ``tool_frequency``); the message names them too.
        cost: what the loop cost (:class:`LoopCost`: the model calls and tokens spent since
            the looping pattern began, as the model reported its ``usage_metadata``), or
            ``None`` when no model answer was counted.
    """

    def __init__(
        self,
        message: str,
        *,
        signal: Signal,
        tool: str | None = None,
        tools: tuple[str, ...] = (),
        count: int = 0,
        threshold: int = 0,
        run_id: str | None = None,
        verdict: Verdict | None = None,
        remedy: tuple[str, ...] | None = None,
        cost: LoopCost | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.signal = signal
        self.tool = tool
        self.tools = tools
        self.count = count
        self.threshold = threshold
        self.run_id = run_id
        self.verdict = verdict
        self.remedy = remedy_keys(signal) if remedy is None else tuple(remedy)
        self.cost = cost

    @classmethod
    def from_verdict(cls, verdict: Verdict, *, run_id: str | None = None) -> LoopDetected:
        """The interrupt for a stopping ``verdict``, its ``key`` keyed with this process's secret:
        exceptions travel (into logs, error trackers, other processes), and the key must reveal
        nothing of the content it digests."""
        if verdict.signal is None:
            msg = "LoopDetected needs a verdict with a signal"
            raise ValueError(msg)
        shown = dataclasses.replace(verdict, key=public_digest(verdict.key))
        return cls(
            verdict.message,
            signal=verdict.signal,
            tool=verdict.tool,
            tools=verdict.tools,
            count=verdict.count,
            threshold=verdict.threshold,
            run_id=run_id,
            verdict=shown,
            cost=verdict.cost,
        )

    def repair(self, graph: Any, config: Any, **options: Any) -> int:
        """Answer the tool calls this stop left unanswered in ``config``'s thread; how many it
        answered. The callback handler stops a run inside a step, which LangGraph does not save, so
        the thread keeps the refused answer, and providers reject its next message until each
        call is answered. One line after the stop does it::

            except LoopDetected as stop:
                stop.repair(agent, config)

        As :func:`~langchain_loop_guard.repair_thread` (``options`` go to it); the graph guards
        answer their own stops' calls, so it answers nothing there.
        """
        return repair_thread(graph, config, **options)

    async def arepair(self, graph: Any, config: Any, **options: Any) -> int:
        """:meth:`repair`, for async checkpointers."""
        return await arepair_thread(graph, config, **options)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.message, {key: getattr(self, key) for key in _ATTRIBUTES}))

    def __repr__(self) -> str:
        return (
            f"LoopDetected(signal={self.signal.value!r}, tool={self.tool!r}, "
            f"count={self.count}, threshold={self.threshold}, run_id={self.run_id!r})"
        )


_ATTRIBUTES = (
    "signal",
    "tool",
    "tools",
    "count",
    "threshold",
    "run_id",
    "verdict",
    "remedy",
    "cost",
)
"""The keyword arguments of :class:`LoopDetected`, which a pickled one is rebuilt from."""


def _rebuild(message: str, attributes: dict[str, Any]) -> LoopDetected:
    return LoopDetected(message, **attributes)


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
  ``Command(resume="end")`` (as ``"end"``); ``{"action": ...}`` works too, and anything else
  is refused with ``pydantic.ValidationError`` (the interrupt stays open). Needs a checkpointer.
"""

ON_STOP_VALUES: tuple[str, ...] = get_args(OnStop)

ResumeAction = Literal["continue", "end"]
"""A human's answer to a loop-guard interrupt."""

RESUME_VALUES = ('"continue"', '"end"', '{"action": "continue"}', '{"action": "end"}')
"""The resume values a loop-guard interrupt accepts, as they are written."""


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

RESUME_SCHEMA: Any = LoopGuardResume  # a type form, which ``interrupt``'s overloads do not name


class LoopGuardStop(TypedDict):
    """How a run was stopped, under ``"loop_guard_stop"`` (:data:`STOP_KEY`) in the result.

    Plain JSON data, saved by any checkpointer: set when the guard writes its stop to the state
    (``on_stop="end"``, an interrupt answered ``"end"``, ``"raise"`` once the stopped answer's
    calls are answered), and back to ``None`` when a new human message starts the next run.
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
    remedy: list[str]
    """The configuration keys that would have let the run go on (the message names them)."""
    cost: NotRequired[dict[str, int] | None]
    """What the loop cost (:meth:`LoopCost.to_json`: ``calls``, ``tokens``, ``input_tokens``,
    ``output_tokens``, ``unmetered``), ``None`` when no model answer was counted."""


def _described(stop: Verdict | LoopDetected) -> dict[str, Any]:
    """What every shape of a stop tells: names, counts and its message, never content."""
    return {
        "tool": stop.tool,
        "tools": list(stop.tools),
        "count": stop.count,
        "threshold": stop.threshold,
        "message": stop.message,
        "remedy": list(remedy_keys(stop.signal)),
        "cost": None if stop.cost is None else stop.cost.to_json(),
    }


def stop_state(verdict: Verdict) -> LoopGuardStop:
    """The ``"loop_guard_stop"`` value of a stop."""
    signal = verdict.signal.value if verdict.signal else ""
    return cast(LoopGuardStop, {"signal": signal, "action": verdict.action, **_described(verdict)})


def interrupt_payload(verdict: Verdict) -> dict[str, Any]:
    """The value of the interrupt that asks a human about a stop."""
    signal = verdict.signal.value if verdict.signal else None
    return {
        "type": "loop_guard",
        "signal": signal,
        **_described(verdict),
        "resume": ["continue", "end"],
    }


def resume_action(answer: object) -> ResumeAction:
    """What a human's resume value asks for (anything but ``"continue"`` ends the run)."""
    if isinstance(answer, Mapping):
        answer = answer.get("action")
    return "continue" if answer == "continue" else "end"


def held_marker(stop: LoopDetected, token: str, answer_id: str | None) -> dict[str, Any]:
    """The graph-state marker of a stop held for the next step (its answer, its token)."""
    return {"token": token, "ai": answer_id, "signal": stop.signal.value, **_described(stop)}


def from_marker(marker: Mapping[str, Any], run_id: str | None) -> LoopDetected:
    """A held stop rebuilt from its marker (another process made it), without its verdict."""
    try:
        return LoopDetected(
            str(marker.get("message", "")),
            signal=Signal(str(marker.get("signal"))),
            tool=marker.get("tool"),
            tools=tuple(marker.get("tools") or ()),
            count=int(marker.get("count") or 0),
            threshold=int(marker.get("threshold") or 0),
            run_id=run_id,
            cost=LoopCost.from_json(marker.get("cost")),
        )
    except (TypeError, ValueError):  # a marker written by hand: the stop still happens
        return LoopDetected("loop detected", signal=Signal.REPEATED_TOOL_CALL)


def stop_message(verdict: Verdict) -> AIMessage:
    """The final message of a stopped run: the stop's explanation for the user."""
    return AIMessage(
        content=verdict.message, name=MESSAGE_NAME, additional_kwargs={GUARD_KEY: "stop"}
    )
