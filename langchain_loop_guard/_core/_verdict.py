"""A verdict: the value a :class:`~._detector.LoopDetector` hands out for each event, and its
wording (the localized reason of each signal: tool names and counts, never content)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from langchain_loop_guard._core._cost import LoopCost
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._rules import Detection, Signal

__all__ = ["ALLOW", "RAISED", "Action", "Verdict", "reason", "reason_of", "verdict_on"]

Action = Literal["allow", "warn", "observe", "block", "abort"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The detector's decision about one event.

    Attributes:
        action: ``"allow"``; ``"warn"`` (a soft limit was passed, go on); ``"observe"`` (a loop
            was seen in observe mode, go on); ``"block"`` (a tool call that must not run, and
            the run stops); ``"abort"`` (the run stops).
        signal: the signal that fired, or ``None`` for ``"allow"``.
        message: a localized, user-facing explanation (empty for ``"allow"``); it names tools
            and counts, never arguments or output.
        tool: the tool the verdict is about, when there is one.
        tools: every tool of the loop (a cycle names each tool of its pattern).
        count: how often the pattern was seen.
        threshold: the limit it reached.
        key: a digest identifying this loop (the same loop has the same key).
        tripped: ``True`` when the run was already stopped by an earlier verdict.
        cost: what the loop cost (model calls and tokens since it began), when an
            integration or a replay counted it; the detector itself never does.
        raised: why ``threshold`` is not its signal's configured value, when it is not (a
            key of :data:`RAISED`, explained in ``message``); empty otherwise.
    """

    action: Action = "allow"
    signal: Signal | None = None
    message: str = ""
    tool: str | None = None
    tools: tuple[str, ...] = ()
    count: int = 0
    threshold: int = 0
    key: str | None = None
    tripped: bool = False
    cost: LoopCost | None = None
    raised: str = ""

    @property
    def stops(self) -> bool:
        """Whether the run must stop (``"block"`` or ``"abort"``)."""
        return self.action in ("block", "abort")


ALLOW = Verdict()
"""The verdict of an event that changes nothing."""


def N_(message: str) -> str:
    """Mark ``message`` for the catalogs (Babel extracts ``N_``); it is translated where used."""
    return message


# The reason of each signal, in English: the catalogs' message ids.
_REASONS: dict[Signal, str] = {
    Signal.REPEATED_TOOL_CALL: N_(
        "`{tool}` was called {count} times in a row with the same arguments (limit {threshold})."
    ),
    Signal.TOOL_CYCLE: N_(
        "the tool calls {cycle} repeated as a cycle {count} times (limit {threshold})."
    ),
    Signal.TOOL_FREQUENCY: N_(
        "`{tool}` was called with the same arguments {count} times in the last {window} "
        "tool calls (limit {threshold})."
    ),
    Signal.NO_PROGRESS: N_(
        "the last {count} tool calls ({cycle}) only repeated earlier calls with the same "
        "results (limit {threshold})."
    ),
    Signal.REPEATED_SEQUENCE: N_(
        "the tool calls {cycle} repeated as a sequence {count} times with the same results "
        "(limit {threshold})."
    ),
    Signal.NEAR_REPEAT: N_(
        "`{tool}` was called {count} times with the same arguments, and its results brought "
        "nothing new (limit {threshold}). If it is meant to repeat, raise its limit with "
        "`tool_threshold_overrides` or list it in `ignore_tools`."
    ),
    Signal.NO_NEW_INFO: N_(
        "nothing new in {count} model turns in a row: their tool calls ({cycle}) brought "
        "back failures, empty results, searches that found nothing, or only what the run "
        "had already seen (limit {threshold})."
    ),
    Signal.FAILING_TURNS: N_(
        "no tool call succeeded in {count} model turns in a row ({cycle}) (limit {threshold})."
    ),
    Signal.REPEATED_TOOL_ERROR: N_(
        "`{tool}` failed with the same error {count} times within {window} tool calls "
        "(limit {threshold})."
    ),
    Signal.REPEATED_ASSISTANT_RESPONSE: N_(
        "the assistant gave the same response {count} times in a row (limit {threshold})."
    ),
    Signal.REPLY_CYCLE: N_(
        "the assistant replied {count} times nearly the same way, with nothing new from a "
        "tool in between (limit {threshold})."
    ),
    Signal.TURN_COUNT: N_(
        "Loop guard warning: the run has made {count} model calls (more than {threshold})."
    ),
    Signal.ELAPSED_TIME: N_(
        "Loop guard warning: the run has been going for {count} s (more than {threshold} s)."
    ),
}


RAISED: dict[str, str] = {
    "paging": N_("The limit is higher for a call that pages, as a scroll does."),
    "wait": N_(
        "The limit is higher for the same read right after an act: it waits for the act to land."
    ),
    "news": N_("The limit is one higher: new results came between these calls."),
    "tool": N_("The limit is this tool's repeat limit, above `repeat_frequency_threshold`."),
    "tools": N_("The limit is the highest repeat limit of these tools, above `no_progress_calls`."),
    "reworded": N_(
        "The limit is one above `repeat_assistant_threshold`: these replies were reworded, "
        "not repeated."
    ),
}
"""Why a detection's limit is not its key's value (``Detection.raised``): the sentence after
its reason, so that a stop's limit never contradicts the configuration it names."""

_ANSWERED_AGAIN = N_(
    "the model answered {count} times in a row without calling a tool and was asked again, "
    "with nothing new in between (limit {threshold})."
)
"""The reason of failing turns in which the model called no tool at all (SPEC §13 R14: never
"no tool call succeeded" to an agent that called none)."""


def reason(
    signal: Signal,
    *,
    locale: str | None = None,
    tool: str | None = None,
    tools: tuple[str, ...] = (),
    count: int = 0,
    threshold: int = 0,
    window: int = 0,
    raised: str = "",
) -> str:
    """The localized, user-facing reason of ``signal``: tool names and counts, no content;
    with ``raised`` (a key of :data:`RAISED`), why the limit is what it is."""
    message = _REASONS[signal]
    if signal is Signal.FAILING_TURNS and not tools:
        message = _ANSWERED_AGAIN
    tr = translator(locale)
    cycle = " → ".join(f"`{name}`" for name in tools)
    text = tr.gettext(message).format(
        tool=tool, cycle=cycle, count=count, threshold=threshold, window=window
    )
    why = RAISED.get(raised)
    return text if why is None else f"{text} {tr.gettext(why)}"


def reason_of(found: Detection | Verdict, *, locale: str | None, window: int) -> str:
    """:func:`reason` for a detection, or for a verdict with a signal (a replayed one)."""
    assert found.signal is not None  # an "allow" verdict has no reason
    return reason(
        found.signal,
        locale=locale,
        tool=found.tool,
        tools=found.tools,
        count=found.count,
        threshold=found.threshold,
        window=window,
        raised=found.raised,
    )


def verdict_on(
    action: Action, found: Detection, *, locale: str | None, window: int, frame: str = "{reason}"
) -> Verdict:
    """The verdict on ``found``; its message is ``frame`` around the signal's reason."""
    text = reason_of(found, locale=locale, window=window)
    return Verdict(
        action=action,
        signal=found.signal,
        message=frame.format(reason=text),
        tool=found.tool,
        tools=found.tools,
        count=found.count,
        threshold=found.threshold,
        key=found.key,
        raised=found.raised,
    )
