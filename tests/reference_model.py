"""An independent, deliberately naive model of the loop signals of SPEC §2, for differential tests.

It is written from the SPEC text alone, never from ``_core._detector``: it keeps
the whole history (no windows, no digests), recomputes every rule from scratch at each event,
and serializes arguments with a few lines of its own. It is slow and obviously bounded by
nothing, which is the point: the real detector must decide the same on every stream where the
two are comparable.

What it models:

* the seed's call-only rules (``progress_aware=False``): repeated call, cycles of length
  ``2..max_cycle_length`` repeated ``cycle_repeats`` times, window frequency with the rule
  ``max(repeat_frequency_threshold, the tool's repeat threshold)``, repeated error, repeated
  assistant response, and the turn-count and elapsed-time warnings;
* with ``progress_aware=True``, only streams whose tools are *deterministic* (the same call
  always has the same outcome). There progress awareness must change nothing for the repeat,
  cycle and window rules (every earlier outcome equals the most recent one), assistant messages
  that make tool calls are skipped, and the no-progress rule reduces to: each of the last ``n``
  calls has its signature among the ``frequency_window_size`` calls before it.

Up to the first stop it gives the full verdict (action and signal) of every event. After a stop
it only knows which events are refused (every tool call is blocked, every model turn aborted).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

Action = Literal["allow", "warn", "observe", "block", "abort"]


@dataclass(frozen=True)
class TurnStart:
    """A model call begins."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call is about to run."""

    name: str
    args: object
    call_id: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """A tool call returned ``output`` or failed with ``error``."""

    name: str
    output: object = None
    error: str | None = None
    call_id: str | None = None


@dataclass(frozen=True)
class AssistantMessage:
    """The model answered with ``text`` and, maybe, asked for tool calls."""

    text: str
    tool_calls: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Tick:
    """Time passes by ``seconds``, then a clock tick is delivered."""

    seconds: float


Event = TurnStart | ToolCall | ToolResult | AssistantMessage | Tick


@dataclass(frozen=True)
class ReferenceConfig:
    """The subset of ``LoopGuardConfig`` the model understands, with the SPEC's defaults."""

    mode: Literal["on", "observe"] = "on"
    max_turns: int = 12
    turn_timeout_ms: int = 180_000
    repeat_tool_threshold: int = 3
    repeat_error_threshold: int = 3
    repeat_assistant_threshold: int = 3
    cycle_repeats: int = 3
    max_cycle_length: int = 3
    repeat_frequency_threshold: int = 4
    frequency_window_size: int = 10
    ignore_tools: frozenset[str] = frozenset()
    tool_threshold_overrides: dict[str, int] = field(default_factory=dict)
    progress_aware: bool = False
    no_progress_calls: int = 0

    def as_values(self) -> dict[str, object]:
        """The same settings as keyword values for ``LoopGuardConfig``."""
        return {
            "mode": self.mode,
            "max_turns": self.max_turns,
            "turn_timeout_ms": self.turn_timeout_ms,
            "repeat_tool_threshold": self.repeat_tool_threshold,
            "repeat_error_threshold": self.repeat_error_threshold,
            "repeat_assistant_threshold": self.repeat_assistant_threshold,
            "cycle_repeats": self.cycle_repeats,
            "max_cycle_length": self.max_cycle_length,
            "repeat_frequency_threshold": self.repeat_frequency_threshold,
            "frequency_window_size": self.frequency_window_size,
            "ignore_tools": self.ignore_tools,
            "tool_threshold_overrides": dict(self.tool_threshold_overrides),
            "progress_aware": self.progress_aware,
            "no_progress_calls": self.no_progress_calls,
            # the signals of SPEC §11 are not modelled here
            "near_repeat_threshold": 0,
            "max_sequence_length": 0,
            "no_new_info_calls": 0,
            "failing_turns": 0,
        }


# --- keys, from the SPEC's wording --------------------------------------------------------------


def _plain(value: object) -> object:
    """JSON data of the values the differential tests use: ``1 == 1.0``, tuples are lists."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    msg = f"the reference model does not serialize {type(value).__name__}"
    raise TypeError(msg)


def signature(name: str, args: object) -> tuple[str, str]:
    """Tool name and arguments: key order ignored, list order kept, ``1`` equal to ``1.0``."""
    return name, json.dumps(_plain(args), sort_keys=True)


_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?")
_POINTER = re.compile(r"0x[0-9a-fA-F]+")


def error_key(name: str, text: str) -> tuple[str, str]:
    """Tool name and error text with UUIDs, timestamps and pointers masked, digit runs collapsed,
    whitespace collapsed."""
    text = _UUID.sub("<uuid>", text)
    text = _ISO_TIME.sub("<time>", text)
    text = _POINTER.sub("<pointer>", text)
    text = re.sub(r"\d+", "#", text)
    return name, " ".join(text.split())


def assistant_key(text: str) -> str:
    """The message text, trimmed, whitespace collapsed (empty: skipped)."""
    return " ".join(text.split())


# --- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What the model says about one event."""

    action: Action
    signal: str | None = None

    @property
    def stops(self) -> bool:
        """Whether the event is refused (a blocked call or an aborted turn)."""
        return self.action in ("block", "abort")


ALLOW = Decision("allow")


class ReferenceGuard:
    """The SPEC's rules for one run, recomputed from the full history at every event."""

    def __init__(self, config: ReferenceConfig) -> None:
        self.config = config
        self.now = 0.0
        self.calls: list[tuple[str, str]] = []  # signatures of the visible calls, in order
        self.turns = 0
        self.warned: set[str] = set()
        self.tripped: str | None = None
        self.detected = False
        self.errors: list[tuple[str, str] | None] = []  # None: a success cleared the streak
        self.replies: list[str] = []

    def repeat_threshold(self, tool: str) -> int:
        """The tool's override, or ``repeat_tool_threshold``."""
        return self.config.tool_threshold_overrides.get(tool, self.config.repeat_tool_threshold)

    def feed(self, event: Event) -> Decision:
        """The decision about ``event``."""
        if isinstance(event, Tick):
            self.now += event.seconds
            return self._soft()
        if isinstance(event, TurnStart):
            if self.tripped:
                return Decision("abort", self.tripped)
            self.turns += 1
            return self._soft()
        if isinstance(event, ToolCall):
            return self._call(event)
        if isinstance(event, ToolResult):
            return self._result(event)
        return self._assistant(event)

    def _call(self, event: ToolCall) -> Decision:
        if self.tripped:
            return Decision("block", self.tripped)
        if event.name in self.config.ignore_tools:
            return self._soft()
        self.calls.append(signature(event.name, event.args))
        signal = (
            self._repeat(event.name)
            or self._cycle()
            or self._window(event.name)
            or self._no_progress()
        )
        return self._hard(signal, "block") if signal else self._soft()

    def _result(self, event: ToolResult) -> Decision:
        if event.name in self.config.ignore_tools:
            return self._soft()
        if event.error is None:
            self.errors.append(None)
        else:
            self.errors.append(error_key(event.name, event.error))
        if self.tripped:
            return ALLOW
        last = self.errors[-1]
        streak = 0
        for key in reversed(self.errors):
            if key is None or key != last:
                break
            streak += 1
        if last is not None and streak >= self.config.repeat_error_threshold:
            return self._hard("repeated_tool_error", "abort")
        return self._soft()

    def _assistant(self, event: AssistantMessage) -> Decision:
        key = assistant_key(event.text)
        if not key or (self.config.progress_aware and event.tool_calls):
            return self._soft()
        self.replies.append(key)
        if self.tripped:
            return ALLOW
        streak = 0
        for reply in reversed(self.replies):
            if reply != key:
                break
            streak += 1
        if streak >= self.config.repeat_assistant_threshold:
            return self._hard("repeated_assistant_response", "abort")
        return self._soft()

    # --- the call rules, each over the full history ---------------------------------------------

    def _repeat(self, tool: str) -> str | None:
        current = self.calls[-1]
        streak = 0
        for sig in reversed(self.calls):
            if sig != current:
                break
            streak += 1
        return "repeated_tool_call" if streak >= self.repeat_threshold(tool) else None

    def _cycle(self) -> str | None:
        for length in range(2, self.config.max_cycle_length + 1):
            span = length * self.config.cycle_repeats
            if len(self.calls) < span:
                continue
            tail = self.calls[-span:]
            pattern = tail[:length]
            if len(set(pattern)) == 1:
                continue  # A A A is a repeat, not a cycle
            if tail == pattern * self.config.cycle_repeats:
                return "tool_cycle"
        return None

    def _window(self, tool: str) -> str | None:
        threshold = max(self.config.repeat_frequency_threshold, self.repeat_threshold(tool))
        window = self.calls[-self.config.frequency_window_size :]
        return "tool_frequency" if window.count(self.calls[-1]) >= threshold else None

    def _no_progress(self) -> str | None:
        if not (self.config.progress_aware and self.config.no_progress_calls):
            return None
        size = self.config.frequency_window_size
        for n in range(1, len(self.calls) + 1):
            index = len(self.calls) - n
            if self.calls[index] not in self.calls[max(0, index - size) : index]:
                return None
            streak = self.calls[index:]
            highest = max(self.repeat_threshold(name) for name, _ in streak)
            if n >= max(self.config.no_progress_calls, highest):
                return "no_progress"
        return None

    # --- outcomes -------------------------------------------------------------------------------

    def _hard(self, signal: str, action: Action) -> Decision:
        if self.config.mode == "observe":
            if self.detected:
                return self._soft()  # later observations are not modelled
            self.detected = True
            return Decision("observe", signal)
        self.tripped = signal
        return Decision(action, signal)

    def _soft(self) -> Decision:
        if self.turns > self.config.max_turns and "turn_count" not in self.warned:
            self.warned.add("turn_count")
            return Decision("warn", "turn_count")
        elapsed_ms = self.now * 1000
        if elapsed_ms > self.config.turn_timeout_ms and "elapsed_time" not in self.warned:
            self.warned.add("elapsed_time")
            return Decision("warn", "elapsed_time")
        return ALLOW
