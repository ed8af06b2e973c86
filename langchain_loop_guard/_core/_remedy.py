"""What would have let a stopped run go on: the configuration keys each stop names (SPEC §13
C4), as data (:attr:`LoopDetected.remedy`, ``LoopGuardStop["remedy"]``) and as a sentence
after the stop's reason, in the user's locale.

A tool that repeats on purpose is named with its own key (``ignore_tools`` for a wait between
polls, ``tool_threshold_overrides`` for a call that may repeat more often); any other loop
with the signal's own key (raised, or 0 to turn the check off where 0 means off).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._rules import Signal

if TYPE_CHECKING:
    from langchain_loop_guard._core._verdict import Verdict

__all__ = ["REMEDIES", "remedy_keys", "remedy_text", "with_remedy"]

REMEDIES: dict[Signal, tuple[str, ...]] = {
    Signal.REPEATED_TOOL_CALL: ("tool_threshold_overrides",),
    Signal.TOOL_CYCLE: ("cycle_repeats",),
    Signal.TOOL_FREQUENCY: ("ignore_tools", "repeat_frequency_threshold"),
    Signal.NO_PROGRESS: ("no_progress_calls",),
    Signal.REPEATED_SEQUENCE: ("max_sequence_length",),
    Signal.NEAR_REPEAT: ("tool_threshold_overrides", "ignore_tools"),
    Signal.NO_NEW_INFO: ("no_new_info_calls",),
    Signal.REPEATED_TOOL_ERROR: ("repeat_error_threshold",),
    Signal.FAILING_TURNS: ("failing_turns",),
    Signal.REPEATED_ASSISTANT_RESPONSE: ("repeat_assistant_threshold",),
    Signal.REPLY_CYCLE: ("reply_cycle_length",),
}
"""The keys that would have let a run stopped by each signal go on, the first the likeliest."""

_OFF_AT_ZERO = frozenset(
    {"no_progress_calls", "max_sequence_length", "no_new_info_calls", "failing_turns"}
    | {"reply_cycle_length"}
)
"""The keys whose 0 turns their signal off."""


def remedy_keys(signal: Signal | str | None) -> tuple[str, ...]:
    """The configuration keys that would have let a run stopped by ``signal`` go on (none
    for a soft signal, or one this table does not know)."""
    try:
        return REMEDIES.get(Signal(signal), ()) if signal is not None else ()
    except ValueError:
        return ()


def remedy_text(signal: Signal | None, tool: str | None, locale: str | None = None) -> str:
    """The sentence that names :func:`remedy_keys` for the user, in ``locale``; empty when
    there is none, or the signal's reason names them already (a near repeat's)."""
    keys = remedy_keys(signal)
    if not keys or signal is Signal.NEAR_REPEAT:
        return ""
    tr = translator(locale)
    if signal is Signal.TOOL_FREQUENCY and tool:
        text = tr.gettext(
            "If `{tool}` is meant to repeat (a wait between polls, say), list it in "
            "`ignore_tools`, or raise `repeat_frequency_threshold`."
        )
    elif signal is Signal.REPEATED_TOOL_CALL and tool:
        text = tr.gettext(
            "If `{tool}` is meant to repeat, raise its limit with `tool_threshold_overrides`."
        )
    elif keys[0] in _OFF_AT_ZERO:
        text = tr.gettext("If this run was meant to go on, raise `{key}` (0 turns this check off).")
    else:
        text = tr.gettext("If this run was meant to go on, raise `{key}`.")
    return text.format(tool=tool, key=keys[0])


def with_remedy(verdict: Verdict, locale: str | None = None) -> Verdict:
    """``verdict`` with :func:`remedy_text` after its message (a run already stopped is
    told so, nothing more)."""
    if verdict.tripped:
        return verdict
    text = remedy_text(verdict.signal, verdict.tool, locale)
    if not text or text in verdict.message:
        return verdict
    return dataclasses.replace(verdict, message=f"{verdict.message} {text}")
