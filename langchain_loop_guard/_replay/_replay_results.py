"""What a replay found, run by run: where each run would stop (:class:`ReplayVerdict`), what
else its replay saw (:class:`RunReplay`), and its tool calls as the HTML report draws them
(:class:`Timeline`: at most :data:`MAX_MARKS` marks a run, a longer run's marks each standing
for 2, 4… calls). Plain values: the replay makes them, the reports read them.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field, fields
from typing import Any, Final

from langchain_loop_guard._core._cost import LoopCost
from langchain_loop_guard._core._detector import DetectorEvent, Signal
from langchain_loop_guard._core._remedy import remedy_keys

__all__ = ["MAX_MARKS", "ReplayVerdict", "RunReplay", "Timeline"]

MAX_MARKS: Final = 256
_NAMES: Final = 32  # tool names a timeline tells apart; further ones share the last, "…"


class Timeline:
    """The tool calls of one run as marks along its events: tool names and failures only."""

    __slots__ = ("at", "codes", "failed", "names", "room", "span")

    def __init__(self) -> None:
        self.at = array("L")  # the event (1-based) of each mark
        self.codes = bytearray()  # each mark's tool (its first call's), an index into names
        self.failed = bytearray()  # 1 where its call (or one of its calls) failed
        self.names: list[str] = []
        self.span = 1  # calls a mark stands for, at most
        self.room = 0  # calls the last mark can still stand for

    def add(self, event: DetectorEvent, index: int) -> None:
        """Note event ``index`` (1-based) of the run: a call is a mark, a failure marks it."""
        if event.kind == "tool_call" and self.room:
            self.room -= 1  # the last mark stands for this call too
        elif event.kind == "tool_call":
            names, name = self.names, event.tool or "?"
            code = names.index(name) if name in names else len(names)
            if code == _NAMES:
                code, names[-1] = _NAMES - 1, "…"
            elif code == len(names):
                names.append(name)
            self.at.append(index)
            self.codes.append(code)
            self.failed.append(0)
            self.room = self.span - 1
            if len(self.at) > MAX_MARKS:  # merge neighbours: a mark stands for twice the calls
                pairs = zip(self.failed[::2], [*self.failed[1::2], 0], strict=True)
                self.failed = bytearray(a | b for a, b in pairs)
                self.at, self.codes, self.span = self.at[::2], self.codes[::2], self.span * 2
                self.room = 0
        elif event.kind == "tool_result" and event.error and self.at:
            marks = range(len(self.at) - 1, max(-1, len(self.at) - 9), -1)
            last = len(self.at) - 1  # a merged mark's other calls: the last mark
            hit = next((m for m in marks if self.names[self.codes[m]] == event.tool), last)
            self.failed[hit] = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayVerdict:
    """A verdict at one event of a replayed run: where, which signal, and why.

    Attributes:
        event: the event's 1-based position in its run.
        call: tool calls of the run up to this event (this one included).
        line: the trace file's line the event comes from.
        action, signal, tool, count, threshold: the verdict's, as :class:`LoopDetected` has
            them (``action`` ``"observe"`` for a live run in observe mode).
        reason: the localized reason (tool names and counts, never content) and, for a stop,
            the sentence naming the setting that would have let the run go on; empty for a
            live verdict read from a trace.
        cost: what the loop cost up to this stop (model calls, and the tokens the trace
            recorded for them), or ``None``.
    """

    event: int
    call: int
    line: int
    action: str
    signal: Signal
    tool: str | None
    count: int
    threshold: int
    reason: str = ""
    cost: LoopCost | None = None

    def to_json(self) -> dict[str, Any]:
        """The verdict as JSON data."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["signal"] = self.signal.value
        data["cost"] = None if self.cost is None else self.cost.to_json()
        data["remedy"] = list(self.remedy)
        return data

    @property
    def remedy(self) -> tuple[str, ...]:
        """The configuration keys that would have let the run go on, the likeliest first (as
        :attr:`LoopDetected.remedy` names them)."""
        return remedy_keys(self.signal)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReplay:
    """What the replay of one run found.

    Attributes:
        run: the run's id (the top-level run, the thread, or the LangSmith trace).
        events, calls: events replayed, and the tool calls among them.
        stop: where the guard (mode ``"on"``) would first stop the run, or ``None``.
        warnings: soft signals (turn count, elapsed time) that would warn before that.
        live: the live run's first stop (or observed loop), when the trace records one.
        recorded: whether the trace holds the live verdicts (a loop-guard trace does).
        timeline: the marks the HTML report draws, kept for the runs it draws.
        spared: the model calls (and their recorded tokens) after :attr:`stop`: what the stop
            would have spared a run recorded in observe mode; ``None`` without a stop.
    """

    run: str
    events: int
    calls: int
    stop: ReplayVerdict | None
    warnings: tuple[ReplayVerdict, ...] = ()
    live: ReplayVerdict | None = None
    recorded: bool = False
    timeline: Timeline | None = field(default=None, repr=False, compare=False)
    spared: LoopCost | None = None

    @property
    def same_as_live(self) -> bool | None:
        """Whether the replay stops at the live run's first stop, for the same signal (``None`` when
        the trace holds no live verdicts)."""
        if not self.recorded:
            return None
        if self.stop is None or self.live is None:
            return self.stop is None and self.live is None
        return (self.stop.event, self.stop.signal) == (self.live.event, self.live.signal)

    def to_json(self) -> dict[str, Any]:
        """The run's result as JSON data."""
        return {
            "run": self.run,
            "events": self.events,
            "calls": self.calls,
            "would_stop": self.stop is not None,
            "stop": self.stop.to_json() if self.stop else None,
            "warnings": [w.to_json() for w in self.warnings],
            "live": self.live.to_json() if self.live else None,
            "same_as_live": self.same_as_live,
            "spared": None if self.spared is None else self.spared.to_json(),
        }
