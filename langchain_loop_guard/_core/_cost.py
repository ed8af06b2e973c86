"""What a loop cost: the model calls and tokens spent since the looping pattern began.

The detector counts units (tool calls, failures, replies, turns) and never tokens. A stop's
verdict says how many units the loop took (``count``, and for a cycle the tools of one lap);
:class:`CostLedger` keeps, per run, each model answer's token usage and the units it made, and
counts back from the latest answer to the one that made the loop's first unit. The tokens of
that answer and of every answer after it are the loop's cost. Plain numbers only: the
integrations read them from their host (``usage_metadata``), a replay from a trace.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._rules import Signal

__all__ = [
    "MAX_ANSWERS",
    "CostLedger",
    "LoopCost",
    "Usage",
    "cost_cell",
    "cost_text",
    "usage_of",
]

MAX_ANSWERS = 256
"""Model answers a ledger keeps per run (a loop longer than that is counted from its last
ones: its cost is then a lower bound)."""


class Usage(NamedTuple):
    """The tokens one model call reported: its input, output and total."""

    input: int
    output: int
    total: int


@dataclass(frozen=True, slots=True)
class LoopCost:
    """What a loop cost, from the model answer that began it to the stop.

    Attributes:
        calls: the model calls inside the loop (the one that began it counted).
        tokens: the total tokens those calls reported (input and output).
        input_tokens: the input (prompt) tokens among them.
        output_tokens: the output (completion) tokens among them.
        unmetered: how many of the calls reported no token usage: ``calls`` when the model
            reports none (the loop is then counted in calls only), and ``tokens`` is a lower
            bound whenever this is not 0.
    """

    calls: int
    tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    unmetered: int = 0

    @property
    def metered(self) -> bool:
        """Whether any call of the loop reported its token usage."""
        return self.unmetered < self.calls

    def to_json(self) -> dict[str, int]:
        """The cost as JSON data (numbers only)."""
        return {
            "calls": self.calls,
            "tokens": self.tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "unmetered": self.unmetered,
        }

    @classmethod
    def from_json(cls, value: object) -> LoopCost | None:
        """The cost :meth:`to_json` wrote, or ``None`` for anything else (a hand-made value)."""
        if not isinstance(value, Mapping):
            return None
        numbers = [value.get(key, 0) for key in _FIELDS]
        if not all(type(n) is int and n >= 0 for n in numbers) or numbers[0] < 1:
            return None
        calls, tokens, input_tokens, output_tokens, unmetered = numbers
        return cls(calls, tokens, input_tokens, output_tokens, min(unmetered, calls))

    def __add__(self, other: LoopCost) -> LoopCost:
        return LoopCost(
            self.calls + other.calls,
            self.tokens + other.tokens,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.unmetered + other.unmetered,
        )


_FIELDS = ("calls", "tokens", "input_tokens", "output_tokens", "unmetered")


def cost_text(cost: LoopCost, locale: str | None = None) -> str:
    """The cost as one sentence for the user, in ``locale``: tokens and calls, or calls only
    (saying so) when the model reported no usage."""
    tr = translator(locale)
    calls = f"{cost.calls:,}"
    if not cost.metered:
        text = tr.ngettext(
            "This loop had spent {calls} model call (the model reports no token usage).",
            "This loop had spent {calls} model calls (the model reports no token usage).",
            cost.calls,
        )
        return str(text).format(calls=calls)
    if cost.unmetered:
        text = tr.ngettext(
            "This loop had spent at least {tokens} tokens over {calls} model call "
            "({unmetered} reported no usage).",
            "This loop had spent at least {tokens} tokens over {calls} model calls "
            "({unmetered} reported no usage).",
            cost.calls,
        )
    else:
        text = tr.ngettext(
            "This loop had spent {tokens} tokens over {calls} model call.",
            "This loop had spent {tokens} tokens over {calls} model calls.",
            cost.calls,
        )
    return str(text).format(tokens=f"{cost.tokens:,}", calls=calls, unmetered=cost.unmetered)


def cost_cell(cost: LoopCost | None, locale: str | None = None) -> str:
    """The cost in a few words for a table cell: tokens and calls, or calls only (saying the
    model reports no usage); ``-`` when nothing was counted."""
    if cost is None:
        return "-"
    tr = translator(locale)
    calls = f"{cost.calls:,}"
    if not cost.metered:
        text = tr.ngettext(
            "{calls} call, no token usage", "{calls} calls, no token usage", cost.calls
        )
        return str(text).format(calls=calls)
    text = tr.ngettext(
        "{tokens} tokens, {calls} call", "{tokens} tokens, {calls} calls", cost.calls
    )
    return str(text).format(tokens=f"{cost.tokens:,}", calls=calls)


class _Answer(NamedTuple):
    usage: Usage | None
    tools: tuple[str, ...]
    reply: bool


# Signals counted in answers that called the verdict's tool (an answer's calls count once).
_PER_TOOL = frozenset(
    {
        Signal.REPEATED_TOOL_CALL,
        Signal.TOOL_FREQUENCY,
        Signal.NEAR_REPEAT,
        Signal.REPEATED_TOOL_ERROR,
    }
)
_LAPS = frozenset({Signal.TOOL_CYCLE, Signal.REPEATED_SEQUENCE})  # count laps of len(tools) calls
_REPLIES = frozenset({Signal.REPEATED_ASSISTANT_RESPONSE, Signal.REPLY_CYCLE})


class CostLedger:
    """One run's model answers, newest last: each one's token usage, the tools it called (those
    the signals see) and whether it was a reply. Bounded (:data:`MAX_ANSWERS`)."""

    __slots__ = ("_answers",)

    def __init__(self, answers: Iterable[tuple[Usage | None, Iterable[str], bool]] = ()) -> None:
        self._answers: deque[_Answer] = deque(maxlen=MAX_ANSWERS)
        for usage, tools, reply in answers:
            self.answer(usage, tools, reply=reply)

    def answer(
        self, usage: Usage | None, tools: Iterable[str] = (), *, reply: bool = False
    ) -> None:
        """A model answered: ``usage`` as it reported it (``None``: not reported), the
        ``tools`` it called (ignored tools left out), and whether it is a reply (text and no
        call)."""
        self._answers.append(_Answer(usage, tuple(tools), reply))

    def call(self, tool: str) -> None:
        """The latest answer's call of ``tool`` arrived as an event of its own (a trace's)."""
        answers = self._answers
        if answers:
            last = answers[-1]
            answers[-1] = last._replace(tools=(*last.tools, tool))

    def clear(self) -> None:
        """Forget every answer (the run starts afresh)."""
        self._answers.clear()

    def total(self) -> LoopCost | None:
        """What every answer the ledger holds cost (``None`` without one)."""
        return self._sum(0)

    def cost_of(
        self, signal: Signal | None, tool: str | None, tools: tuple[str, ...], count: int
    ) -> LoopCost | None:
        """What the loop a stop describes cost (``None`` for a soft signal or no answer): the
        answers from the one that made the loop's first unit to the latest."""
        if signal is None or signal.is_soft or not self._answers:
            return None
        return self._sum(self._start(signal, tool, tools, max(1, count)))

    def _start(self, signal: Signal, tool: str | None, tools: tuple[str, ...], count: int) -> int:
        """The index of the answer that made the loop's first unit (the oldest kept if the
        loop began before it)."""
        answers = self._answers
        if signal in _LAPS or signal is Signal.NO_PROGRESS:
            calls = count * max(1, len(tools)) if signal in _LAPS else count
            for index in range(len(answers) - 1, -1, -1):
                calls -= len(answers[index].tools)
                if calls <= 0:
                    return index
            return 0
        for index in range(len(answers) - 1, -1, -1):
            answer = answers[index]
            if signal in _PER_TOOL:
                counted = tool in answer.tools if tool is not None else bool(answer.tools)
            elif signal in _REPLIES:
                counted = answer.reply
            elif signal is Signal.NO_NEW_INFO:
                counted = bool(answer.tools)
            else:  # failing turns: every answer is a turn
                counted = True
            count -= counted
            if count <= 0:
                return index
        return 0

    def _sum(self, start: int) -> LoopCost | None:
        calls = tokens = input_tokens = output_tokens = unmetered = 0
        for index in range(start, len(self._answers)):
            usage = self._answers[index].usage
            calls += 1
            if usage is None:
                unmetered += 1
            else:
                tokens += usage.total
                input_tokens += usage.input
                output_tokens += usage.output
        if not calls:
            return None
        return LoopCost(calls, tokens, input_tokens, output_tokens, unmetered)


def usage_of(value: Any) -> Usage | None:
    """A usage mapping (``usage_metadata``'s keys, or OpenAI's ``prompt_tokens`` /
    ``completion_tokens``) as :class:`Usage`; ``None`` when it holds no token count."""
    if value is None or (type(value) is not dict and not isinstance(value, Mapping)):
        return None  # nothing reported (the common case) or a dict: told without an ABC check
    input_tokens = _count(value, "input_tokens", "prompt_tokens")
    output_tokens = _count(value, "output_tokens", "completion_tokens")
    total = _count(value, "total_tokens")
    if input_tokens is None and output_tokens is None and total is None:
        return None
    input_tokens, output_tokens = input_tokens or 0, output_tokens or 0
    return Usage(
        input_tokens, output_tokens, total if total is not None else input_tokens + output_tokens
    )


def _count(value: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        number = value.get(key)
        if type(number) is int and number >= 0:
            return number
        if type(number) is float and number >= 0 and number.is_integer():
            return int(number)
    return None
