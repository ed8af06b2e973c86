"""The detector's signals: one small rule each, over one shared view of the run.

:data:`RULES` is the list of hard signals, in the order they are reported when several fire on
one event (SPEC §2, §11). Each rule reads a :class:`RunView` and returns a :class:`Detection`
or ``None``; it changes nothing. :class:`~._detector.LoopDetector` feeds the view and turns
detections into verdicts.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import islice
from typing import TypeVar

from langchain_loop_guard._core._canonical import digest
from langchain_loop_guard._core._counting import chain as _chain
from langchain_loop_guard._core._counting import repeats_pair as _repeats_pair
from langchain_loop_guard._core._counting import same as _same
from langchain_loop_guard._core._counting import stale_chain as _stale_chain
from langchain_loop_guard._core._novelty import ACK, WORK
from langchain_loop_guard._core._pacing import moves as _moves
from langchain_loop_guard._core._pacing import waits_for_an_act as _waits_for_an_act
from langchain_loop_guard._core._replies import alike
from langchain_loop_guard._core._view import Call, Key, RunView, key_text

__all__ = [
    "ANSWER_CHECKS",
    "CALL_CHECKS",
    "CHANGED",
    "FAILED",
    "FAILING",
    "NEW_CALL_CHECKS",
    "QUIET",
    "REPLY",
    "RESULT_CHECKS",
    "RULES",
    "TURN_CHECKS",
    "Detection",
    "Rule",
    "Signal",
]


class Signal(StrEnum):
    """What kind of loop (or soft limit) a verdict is about, in the order they are reported."""

    REPEATED_TOOL_CALL = "repeated_tool_call"
    TOOL_CYCLE = "tool_cycle"
    TOOL_FREQUENCY = "tool_frequency"
    NO_PROGRESS = "no_progress"
    REPEATED_SEQUENCE = "repeated_sequence"
    NEAR_REPEAT = "near_repeat"
    NO_NEW_INFO = "no_new_info"
    REPEATED_TOOL_ERROR = "repeated_tool_error"
    FAILING_TURNS = "failing_turns"
    REPEATED_ASSISTANT_RESPONSE = "repeated_assistant_response"
    REPLY_CYCLE = "reply_cycle"
    TURN_COUNT = "turn_count"
    ELAPSED_TIME = "elapsed_time"

    @property
    def is_soft(self) -> bool:
        """Soft signals warn and never stop a run."""
        return self in (Signal.TURN_COUNT, Signal.ELAPSED_TIME)


@dataclass(slots=True)
class Detection:
    """A signal seen on one event, before the mode decides what to do about it."""

    signal: Signal
    tool: str | None
    tools: tuple[str, ...]
    count: int
    threshold: int
    key: str | None
    raised: str = ""
    """Why ``threshold`` is not the value of the signal's own key, when it is not (a key of
    ``_verdict.RAISED``): the reason says so, so that a limit never contradicts the settings."""


# --- the rules -------------------------------------------------------------------------------

CallCheck = Callable[[RunView, Sequence[Call], list[Key]], "Detection | None"]
"""A rule on a tool call about to run: the history with the call last, and its signatures."""
ResultCheck = Callable[[RunView, Call | None, str], "Detection | None"]
"""A rule on a tool result: the call it belongs to (if found) and the tool's name."""
TurnCheck = Callable[[RunView], "Detection | None"]
"""A rule on a model turn or response."""
_Check = TypeVar("_Check", ResultCheck, TurnCheck)


def repeated_call(view: RunView, seq: Sequence[Call], sigs: list[Key]) -> Detection | None:
    """A A A: the same call ``threshold`` times in a row."""
    cur = seq[-1]
    limits = view.limits
    threshold = limits.repeat_threshold(cur.name)
    raised = ""
    if limits.aware and cur.name not in limits.overrides and _moves(cur.name):
        # a scroll moves the view its answer does not show: paging, until it is done as
        # often as a near repeat (SPEC §14: a step's effect may be new)
        paging = limits.near_threshold(cur.name) or threshold
        raised, threshold = ("paging" if paging != threshold else ""), paging
    if sigs[-threshold:].count(cur.sig) < threshold:
        return None
    if limits.aware and _waits_for_an_act(seq, len(seq) - 1):
        threshold, raised = 2 * threshold + 1, "wait"
        if sigs[-threshold:].count(cur.sig) < threshold:
            return None
    earlier = reversed(seq[-threshold:-1])
    if 1 + _chain(cur.sig, earlier, limits.aware) < threshold:
        return None
    key = key_text(cur.sig)
    return Detection(
        Signal.REPEATED_TOOL_CALL, cur.name, (cur.name,), threshold, threshold, key, raised
    )


def cycle(view: RunView, seq: Sequence[Call], sigs: list[Key]) -> Detection | None:
    """A B A B A B: a pattern of 2..max_cycle_length calls, ``cycle_repeats`` times."""
    limits = view.limits
    repeats = limits.cycle_repeats
    for length in range(2, limits.max_cycle + 1):  # shorter cycles first
        span = length * repeats
        if (
            len(sigs) < span
            or sigs[-1 - length] != sigs[-1]
            or sigs[-span:-length] != sigs[-span + length :]
        ):
            continue  # the last ``span`` calls are not ``repeats`` times one pattern
        if sigs[-length:].count(sigs[-1]) == length:
            continue  # A A A is a repeat, not a cycle
        if limits.aware and not all(
            len({c.outcome for c in seq[-span + p : -1 : length]} - {None}) <= 1
            for p in range(length)
        ):
            continue  # a position of the pattern returned different outcomes
        tools = tuple(c.name for c in seq[-length:])
        key = digest(*sorted(map(key_text, sigs[-length:])))
        return Detection(Signal.TOOL_CYCLE, seq[-1].name, tools, repeats, repeats, key)
    return None


def frequency(view: RunView, seq: Sequence[Call], sigs: list[Key]) -> Detection | None:
    """A … A … A … A: ``threshold`` of the last ``window`` calls, the current one counted (a
    call made after a different call succeeded is decided on its result instead)."""
    cur = seq[-1]
    if cur.changed and view.limits.aware:
        return None
    return _frequency(view, seq, len(seq) - 1)


def frequency_after_change(view: RunView, call: Call | None, name: str) -> Detection | None:
    """The window rule on the result of a call made after a different call succeeded
    (SPEC §11 N1)."""
    if call is None or not call.changed or not view.limits.aware or call.kind == "blocked":
        return None
    if call.brought & WORK:
        return None  # an act again after other work is a step of it (type, Enter): §14 R19
    seq = view.calls  # the call is there: results are only matched to calls in it
    return _frequency(view, seq, seq.index(call))


def _frequency(view: RunView, seq: Sequence[Call], index: int) -> Detection | None:
    cur = seq[index]
    limits = view.limits
    threshold = limits.window_threshold(cur.name)
    raised = "tool" if threshold > limits.frequency else ""
    earlier = [
        c for c in seq[max(0, index - limits.window + 1) : index] if c.batch != cur.batch
    ]  # the calls of one answer are one decision: its siblings are not its repeats (N6)
    if 1 + len({c.batch for c in earlier if c.sig == cur.sig}) < threshold:
        return None
    # a wait (a call answered by nothing or an acknowledgement) between calls that bring
    # news is pacing (SPEC §13 N10); a read answered alike is the seed's window (§14 R19)
    paced = limits.aware and bool(cur.brought & ACK)
    if paced and cur.news:
        return None  # something new came since its last time: pacing
    if limits.aware and _waits_for_an_act(seq, index):
        waiting = max(threshold, 2 * limits.repeat_threshold(cur.name) + 1)
        raised, threshold = ("wait" if waiting > threshold else raised), waiting
    elif limits.aware and (cur.news or (cur.name not in limits.overrides and _moves(cur.name))):
        # a read re-done between reads that bring news (browsing), or a scroll (paging):
        # one more
        threshold += 1
        raised = "news" if cur.news else "paging"
    count = 1 + _chain(
        cur.sig, reversed(_first_of_each_answer(earlier)), limits.aware, cur.outcome, paced=paced
    )
    if count < threshold:
        return None
    key = key_text(cur.sig)
    return Detection(Signal.TOOL_FREQUENCY, cur.name, (cur.name,), count, threshold, key, raised)


def _first_of_each_answer(calls: list[Call]) -> list[Call]:
    """``calls`` with each answer's repeats of a call left out: an answer counts once."""
    kept: list[Call] = []
    seen: set[tuple[Call, Key]] = set()
    for call in calls:
        mark = (call.batch, call.sig)
        if mark not in seen:
            seen.add(mark)
            kept.append(call)
    return kept


def no_progress(view: RunView, seq: Sequence[Call], sigs: list[Key]) -> Detection | None:
    """Each of the last N calls repeated the latest (call, outcome) pair of the window; N is
    ``no_progress_calls``, raised to the highest repeat threshold of the streak's tools. A
    call made after a different call succeeded is decided on its result instead."""
    limits = view.limits
    window = limits.window
    if not limits.no_progress or sigs[-1] not in sigs[-window - 1 : -1] or seq[-1].changed:
        return None
    return _no_progress(view, seq, len(seq) - 1)


def no_progress_after_change(view: RunView, call: Call | None, name: str) -> Detection | None:
    """The no-progress rule on the result of a call made after a different call succeeded."""
    if call is None or not call.changed or not view.limits.no_progress or call.kind == "blocked":
        return None
    seq = view.calls
    return _no_progress(view, seq, seq.index(call))


def _no_progress(view: RunView, seq: Sequence[Call], last: int) -> Detection | None:
    limits = view.limits
    highest = count = 0
    batch = None
    for index in range(last, 0, -1):
        if not _repeats_pair(seq, index, limits.window):
            return None
        if seq[index].batch is batch:
            continue  # an answer's calls are one step (SPEC §14 N16)
        batch = seq[index].batch
        count += 1
        highest = max(highest, limits.repeat_threshold(seq[index].name))
        threshold = max(limits.no_progress, highest)
        if count >= threshold:
            streak = seq[index : last + 1]
            tools = tuple(dict.fromkeys(c.name for c in streak))
            key = digest(*sorted({key_text(c.sig) for c in streak}))
            raised = "tools" if threshold > limits.no_progress else ""
            return Detection(
                Signal.NO_PROGRESS, streak[-1].name, tools, count, threshold, key, raised
            )
    return None


def repeated_sequence(view: RunView, seq: Sequence[Call], sigs: list[Key]) -> Detection | None:
    """A block of 4..max_sequence_length calls, ``cycle_repeats`` times, each position with
    the same results; one position may change its arguments every lap (the same tool opening
    another file each time) while the others repeat exactly (SPEC §11 R5).
    """
    limits = view.limits
    repeats = limits.cycle_repeats
    for length in range(max(4, limits.max_cycle + 1), limits.max_sequence + 1):
        span = length * repeats
        if len(seq) < span or seq[-1 - length].name != seq[-1].name:
            continue
        if sigs[-1] != sigs[-1 - length] and sigs[-2] != sigs[-2 - length]:
            continue  # two positions differ: a quick no
        last, before = sigs[-length:], sigs[-2 * length : -length]
        if sum(a == b for a, b in zip(last, before, strict=True)) < length - 1:
            continue  # the last two laps differ in more than one position: a quick no
        laps = seq[-span:]
        rotating = 0
        for position in range(length):
            column = laps[position::length]
            names = {c.name for c in column}
            if len(names) > 1:
                break
            if len({c.sig for c in column}) > 1:
                rotating += 1
                if rotating > 1:
                    break
            elif len({c.outcome for c in column} - {None}) > 1:
                break  # an exact position whose results changed: progress
        else:
            if len(set(sigs[-length:])) < 2:
                continue  # one call over and over is a repeat, not a sequence
            return _sequence(seq, length, repeats)
    return _walked_again(view, seq, sigs)


def _walked_again(view: RunView, seq: Sequence[Call], sigs: list[Key]) -> Detection | None:
    """A block of up to twice ``max_sequence_length`` calls walked again exactly, results
    included, ``cycle_repeats - 1`` times and begun once more."""
    if seq[-1].changed is None:
        return None  # a call the history does not hold walks no path again
    limits = view.limits
    laps = limits.cycle_repeats - 1
    for length in range(limits.max_sequence + 1, 2 * limits.max_sequence + 1):
        span = length * laps + 1
        if len(seq) < span or sigs[-1] != sigs[-1 - length]:
            continue
        if sigs[-span + length :] != sigs[-span:-length]:
            continue
        walked = seq[-span:]
        later = walked[length:]
        if not all(_same(a.outcome, b.outcome) for a, b in zip(walked, later, strict=False)):
            continue  # a result changed: the walk found something
        if len(set(sigs[-length:])) * 2 <= length:
            continue  # mostly one call again: the repeat and cycle rules' business
        found = _sequence(seq, length, laps)
        # the lap begun again is the path's cycle_repeats-th: counted as such, never "1 times"
        found.count = found.threshold = limits.cycle_repeats
        return found
    return None


def _sequence(seq: Sequence[Call], length: int, repeats: int) -> Detection:
    tools = tuple(c.name for c in seq[-length:])
    key = digest(*sorted({c.name for c in seq[-length * repeats :]}))
    return Detection(Signal.REPEATED_SEQUENCE, seq[-1].name, tools, repeats, repeats, key)


def near_repeat(view: RunView, seq: Sequence[Call], sigs: list[Key]) -> Detection | None:
    """The same call again and again, its result bringing nothing new each time (a view
    whose lines repeat or shift, a page that only ticks): ``near_repeat_threshold`` identical
    calls among the last twice as many (SPEC §11 R1, §13 R15); new lines are progress (N11),
    and a different call that succeeded in between ends the count (N5).
    """
    cur = seq[-1]
    limits = view.limits
    threshold = limits.near_threshold(cur.name)
    if not threshold or cur.changed or sigs.count(cur.sig) < threshold:
        return None
    raised = ""
    if _waits_for_an_act(seq, len(seq) - 1):
        waiting = max(threshold, 2 * limits.repeat_threshold(cur.name) + 1)
        raised, threshold = ("wait" if waiting > threshold else ""), waiting
        if sigs.count(cur.sig) < threshold:
            return None
    count = 1 + _stale_chain(cur, reversed(seq[-2 * threshold : -1]))
    return _near(cur, count, threshold, raised)


def _near(cur: Call, count: int, threshold: int, raised: str = "") -> Detection | None:
    if count < threshold:
        return None
    key = digest("near", key_text(cur.sig))
    return Detection(Signal.NEAR_REPEAT, cur.name, (cur.name,), count, threshold, key, raised)


def no_new_info(view: RunView, *_: object) -> Detection | None:
    """Model answers in a row whose calls brought nothing new, as :class:`RunView` counts
    them (SPEC §11 R6, §12 R8, N6, N9): ``no_new_info_calls`` of them, or half as many that
    each brought back only what the run had seen (§13 R12)."""
    if not view.quiet_grew:
        return None
    limits = view.limits
    threshold, count = limits.no_new_info, view.quiet
    if not threshold:
        return None
    if count < threshold:
        threshold, count = limits.stale, view.stale
        if count < threshold:
            return None
    tools = view.quiet_tools
    return Detection(
        Signal.NO_NEW_INFO, tools[-1] if tools else None, tools, count, threshold, digest("info")
    )


def repeated_error(view: RunView, call: Call | None, name: str) -> Detection | None:
    """The same failure again (SPEC §2, §11 R4, §12 R4'), an answer's calls counted once: one
    tool's error ``repeat_error_threshold`` times in a row; the same call failing the same way
    that often within the window with nothing new in between; or one tool's error
    ``error_often`` times within the window, more often than anything new came back since."""
    if call is None or call.kind != "error":
        return None
    limits = view.limits
    key, count = view.error
    if count >= limits.error:
        return _error(name, count, limits.error, key)
    if not limits.aware:
        return None
    key, sig = call.outcome, call.sig
    quiet, failures, counted, news, news_then, moved = 1, {call.batch}, 1, 0, 0, False
    for earlier in islice(reversed(view.calls), limits.window):
        if earlier.kind == "error" and earlier.outcome == key:
            if earlier.batch not in failures:
                failures.add(earlier.batch)
                quiet += earlier.sig == sig and not news
                # the same error on another call counts only until a success that had an
                # effect (SPEC §14 N17: the sync goes on around the products that fail);
                # the same call's, whatever came between (§12 R4'); either, more often
                # than news came back
                if earlier.sig == sig or not moved:
                    counted += 1
                    news_then = news
        elif earlier.kind == "ok":
            moved = moved or bool(earlier.brought & WORK)
            news += earlier.fresh
    if quiet >= limits.error:
        return _error(name, quiet, limits.error, key)
    often = limits.error_often
    if counted >= often and counted > news_then:
        return _error(name, counted, often, key)
    return None


def _error(name: str, count: int, threshold: int, key: Key | None) -> Detection:
    shown = None if key is None else key_text(key)
    return Detection(Signal.REPEATED_TOOL_ERROR, name, (name,), count, threshold, shown)


def failing_turns(view: RunView, *_: object) -> Detection | None:
    """``failing_turns`` model turns in a row in which no tool call succeeded, or in which the
    model answered and was asked again (SPEC §11 R3, §12 N8)."""
    threshold = view.limits.failing_turns
    if not threshold or not view.failing_grew or view.failing < threshold:
        return None
    if 2 * view.failing_new > view.failing:
        return None  # mostly failures the run had not seen: tests of its work (SPEC §14 N15)
    tools = view.failing_tools  # none: the model only answered, and was asked again
    return Detection(
        Signal.FAILING_TURNS,
        None,  # no one tool: the turns failed, whatever they called
        tools,
        view.failing,
        threshold,
        digest("failing_turns"),
    )


def repeated_response(view: RunView) -> Detection | None:
    """The same assistant text ``repeat_assistant_threshold`` times in a row, each produced
    with the previous one in the model's input (SPEC §2, §11 N2, §12 R9)."""
    key, count = view.replies.streak
    threshold = view.limits.assistant
    if key is None or count < threshold:
        return None
    return Detection(Signal.REPEATED_ASSISTANT_RESPONSE, None, (), count, threshold, key)


def reply_cycle(view: RunView) -> Detection | None:
    """Replies going round: ``Limits.reworded`` replies in a row, each nearly the one before
    with nothing new between (SPEC §13 R14, any scope); or, in a conversation, a cycle of
    1..``reply_cycle_length`` replies, each nearly the same as the one a lap before, for
    ``Limits.reply_laps`` laps (§12 R9)."""
    limits = view.limits
    laps, replies, reworded = limits.reply_laps, view.replies.recent, view.replies.reworded
    if limits.reworded and reworded >= limits.reworded:
        key = digest("replies", replies[-1][0])
        return Detection(Signal.REPLY_CYCLE, None, (), reworded, limits.reworded, key, "reworded")
    for length in range(1, limits.reply_cycle + 1):
        span = length * laps
        if len(replies) < span:
            return None
        # the newest pairs first: a reply unlike the one a lap before ends the look at once
        if all(alike(replies[-1 - i], replies[-1 - i - length]) for i in range(span - length)):
            key = digest("replies", *sorted({reply[0] for reply in replies[-length:]}))
            return Detection(Signal.REPLY_CYCLE, None, (), laps, laps, key)
    return None


# What holds of a result, a turn or an answer (bits): a rule whose check needs one of these
# facts is not asked about an event of which none holds (SPEC §11 and §12 say when each
# signal can fire; the tests hold every check to it).
CHANGED = 1
"""The result's call was made after a different call succeeded (SPEC §11 N1)."""
FAILED = 2
"""The result is a failure."""
QUIET = 4
"""The streak of answers that brought nothing new grew (``RunView.quiet_grew``)."""
FAILING = 8
"""The streak of failing turns grew (``RunView.failing_grew``)."""
REPLY = 16
"""The answer is a reply: text, and no tool call the signals look at instead."""
_FACTS = 32


@dataclass(frozen=True, slots=True)
class Rule:
    """A signal and the checks that detect it, one per kind of event it looks at."""

    signal: Signal
    on_call: CallCheck | None = None
    new_calls: bool = False
    """Whether ``on_call`` can fire on a call whose signature the history does not hold."""
    on_result: ResultCheck | None = None
    on_turn: TurnCheck | None = None
    on_answer: TurnCheck | None = None
    needs: int = 0
    """The facts (bits) one of which must hold of a result, turn or answer for its check to
    fire; it is not asked otherwise (0: asked about every event)."""


RULES: tuple[Rule, ...] = (
    Rule(Signal.REPEATED_TOOL_CALL, on_call=repeated_call),
    Rule(Signal.TOOL_CYCLE, on_call=cycle),
    Rule(Signal.TOOL_FREQUENCY, on_call=frequency, on_result=frequency_after_change, needs=CHANGED),
    Rule(
        Signal.NO_PROGRESS, on_call=no_progress, on_result=no_progress_after_change, needs=CHANGED
    ),
    Rule(Signal.REPEATED_SEQUENCE, on_call=repeated_sequence, new_calls=True),
    Rule(Signal.NEAR_REPEAT, on_call=near_repeat),
    Rule(Signal.NO_NEW_INFO, on_result=no_new_info, on_turn=no_new_info, needs=QUIET),
    Rule(Signal.REPEATED_TOOL_ERROR, on_result=repeated_error, needs=FAILED),
    Rule(
        Signal.FAILING_TURNS,
        on_result=failing_turns,
        on_turn=failing_turns,
        on_answer=failing_turns,
        needs=FAILING,
    ),
    Rule(Signal.REPEATED_ASSISTANT_RESPONSE, on_answer=repeated_response, needs=REPLY),
    Rule(Signal.REPLY_CYCLE, on_answer=reply_cycle, needs=REPLY),
)
"""Every hard signal, in report order: the first that fires on an event is reported."""

CALL_CHECKS: tuple[CallCheck, ...] = tuple(r.on_call for r in RULES if r.on_call)
NEW_CALL_CHECKS: tuple[CallCheck, ...] = tuple(
    r.on_call for r in RULES if r.on_call and r.new_calls
)
"""The call checks for a call whose signature is not in the history."""


def _asked(checks: list[tuple[Rule, _Check]]) -> tuple[tuple[_Check, ...], ...]:
    """The checks to ask about an event, indexed by the facts that hold of it."""
    return tuple(
        tuple(check for rule, check in checks if not rule.needs or rule.needs & facts)
        for facts in range(_FACTS)
    )


RESULT_CHECKS: tuple[tuple[ResultCheck, ...], ...] = _asked(
    [(r, r.on_result) for r in RULES if r.on_result]
)
"""The result checks to ask, by the facts that hold of the result."""
TURN_CHECKS: tuple[tuple[TurnCheck, ...], ...] = _asked(
    [(r, r.on_turn) for r in RULES if r.on_turn]
)
"""The turn checks to ask, by the facts that hold of the turn."""
ANSWER_CHECKS: tuple[tuple[TurnCheck, ...], ...] = _asked(
    [(r, r.on_answer) for r in RULES if r.on_answer]
)
"""The answer checks to ask, by the facts that hold of the answer."""
