"""The detector's signals: one small rule each, over one shared view of the run.

:data:`RULES` is the list of hard signals, in the order they are reported when several fire on
one event (SPEC §2, §11). Each rule reads a :class:`RunView` (the run's recent calls, digests
only, and its streaks) and returns a :class:`Detection` or ``None``; it changes nothing. The
view keeps the bookkeeping (history, streaks, turns); :class:`~._detector.LoopDetector` feeds
the view and turns detections into verdicts. Adding a signal means adding a :class:`Signal`
member, a rule function and its row in :data:`RULES`, without reading the other rules.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from langchain_loop_guard._signature import digest, near_equal

if TYPE_CHECKING:
    from langchain_loop_guard._config import LoopGuardConfig

__all__ = [
    "RULES",
    "Call",
    "Detection",
    "Limits",
    "OutcomeKind",
    "Rule",
    "RunView",
    "Signal",
]

OutcomeKind = Literal["pending", "ok", "error", "blocked"]

_MAX_TOOLS = 64  # tools whose error streak and seen information a run remembers
_MAX_INFO = 16  # pieces of information remembered per tool


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
    TURN_COUNT = "turn_count"
    ELAPSED_TIME = "elapsed_time"

    @property
    def is_soft(self) -> bool:
        """Soft signals warn and never stop a run."""
        return self in (Signal.TURN_COUNT, Signal.ELAPSED_TIME)


class Call:
    """One tool call of the history: digests only.

    ``outcome`` is the digest of the normalized result (``None`` while pending or when
    blocked, which counts as equal to any); ``near`` a sketch of its lines with the numbers
    left out (:func:`~._signature.near_equal` compares two); ``info`` what the result says
    once the call's own argument values are removed (``""``: nothing; ``"="``: a result that
    echoes nothing, which says its ``outcome``, kept only once); ``changed`` whether a
    different call succeeded between this call and the previous one with its signature
    (``None``: the history held no call with its signature).
    ``tokens`` are keyed hashes of the argument values, kept only while the call is pending.
    """

    __slots__ = (
        "call_id",
        "changed",
        "info",
        "kind",
        "name",
        "near",
        "outcome",
        "sig",
        "tokens",
    )

    def __init__(self, name: str, sig: str, call_id: str | None) -> None:
        self.name = name
        self.sig = sig
        self.call_id = call_id
        self.outcome: str | None = None
        self.kind: OutcomeKind = "pending"
        self.near: str | None = None
        self.info: str | None = None
        self.changed: bool | None = None
        self.tokens: frozenset[int] | None = None


@dataclass(slots=True)
class Detection:
    """A signal seen on one event, before the mode decides what to do about it."""

    signal: Signal
    tool: str | None
    tools: tuple[str, ...]
    count: int
    threshold: int
    key: str | None


@dataclass(frozen=True, slots=True)
class Limits:
    """The numbers the rules read, taken once from a configuration."""

    aware: bool
    repeat: int
    overrides: dict[str, int]
    max_repeat: int
    window: int
    frequency: int
    cycle_repeats: int
    max_cycle: int
    no_progress: int
    max_sequence: int
    near_repeat: int
    no_new_info: int
    error: int
    failing_turns: int
    assistant: int
    history: int
    sketched: int
    """How many of the newest calls keep their near sketch: as far as a near repeat looks back
    (0: all of them; the calls before it are never compared again)."""

    @classmethod
    def of(cls, config: LoopGuardConfig) -> Limits:
        """The limits of ``config`` (progress-aware signals are off without awareness)."""
        overrides = dict(config.tool_threshold_overrides)
        aware = config.progress_aware
        max_repeat = max([config.repeat_tool_threshold, *overrides.values()])
        no_progress = config.no_progress_calls if aware else 0
        # SPEC §11's signals need progress awareness: without it, the seed's exact rules
        near_repeat = config.near_repeat_threshold if aware else 0
        max_sequence = config.max_sequence_length if aware else 0
        # Enough history for every signal: a repeat streak, a full cycle or sequence, a
        # window and, for no progress, the longest streak plus the window before its first
        # call; near repeats look back over their threshold's occurrences within a window each.
        history = max(
            config.frequency_window_size,
            config.max_cycle_length * config.cycle_repeats,
            max_sequence * config.cycle_repeats,
            2 * max_sequence * (config.cycle_repeats - 1) + 1,  # long blocks walked again
            max_repeat,
            near_repeat,
        )
        if no_progress:
            history = max(history, config.frequency_window_size + max(no_progress, max_repeat))
        return cls(
            aware=aware,
            repeat=config.repeat_tool_threshold,
            overrides=overrides,
            max_repeat=max_repeat,
            window=config.frequency_window_size,
            frequency=config.repeat_frequency_threshold,
            cycle_repeats=config.cycle_repeats,
            max_cycle=config.max_cycle_length,
            no_progress=no_progress,
            max_sequence=max_sequence,
            near_repeat=near_repeat,
            no_new_info=config.no_new_info_calls if aware else 0,
            error=config.repeat_error_threshold,
            failing_turns=config.failing_turns if aware else 0,
            assistant=config.repeat_assistant_threshold,
            history=history,
            sketched=2 * max(near_repeat, max_repeat) if near_repeat else 0,
        )

    def repeat_threshold(self, tool: str) -> int:
        """The repeat threshold of ``tool`` (its override, or ``repeat_tool_threshold``)."""
        return self.overrides.get(tool, self.repeat)

    def window_threshold(self, tool: str) -> int:
        """The window threshold of ``tool``: never below its repeat threshold."""
        return max(self.frequency, self.repeat_threshold(tool))

    def near_threshold(self, tool: str) -> int:
        """The near-repeat threshold of ``tool`` (0: off): never below its repeat threshold."""
        return max(self.near_repeat, self.repeat_threshold(tool)) if self.near_repeat else 0


class RunView:
    """The run as every rule sees it: recent calls and the streaks, digests and counts only.

    The view does the bookkeeping of each event (:meth:`add_call`, :meth:`add_result`, …);
    the rules only read it.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.calls: deque[Call] = deque(maxlen=limits.history)
        self.clear()

    def clear(self) -> None:
        """Forget the run: history, streaks, turns."""
        self.calls.clear()
        self.seen = 0
        self.turns = 0
        # the error streak: the last error key and how often it came in a row; and each
        # call's (by signature), which only a success that says something new ends
        self.error: tuple[str | None, int] = (None, 0)
        self.errors: dict[str, tuple[str, int]] = {}
        # what each tool's results said (info digests), and the streak of results that said
        # nothing new: (tool, count)
        self.infos: dict[str, dict[str, str]] = {}  # tool -> {info digest: call signature}
        self.quiet: tuple[str | None, int] = (None, 0)
        # the current turn: calls announced by its response, results in, whether one worked,
        # whether it was judged; and how many turns in a row failed
        self.expected: int | None = None
        self.results = 0
        self.worked = False
        self.judged = True
        self.failing = 0
        self.failing_grew = False
        self.assistant: tuple[str | None, int] = (None, 0)

    def resize(self, limits: Limits) -> None:
        """Switch to ``limits``, keeping the history that still fits."""
        self.limits = limits
        self.calls = deque(self.calls, maxlen=limits.history)

    # --- bookkeeping ---------------------------------------------------------------------

    def add_call(self, call: Call) -> bool:
        """Append ``call``, noting whether a different call succeeded since its last time;
        whether the history held its signature."""
        succeeded = False
        for earlier in reversed(self.calls):
            if earlier.sig == call.sig:
                call.changed = succeeded
                break
            succeeded = succeeded or earlier.kind == "ok"
        calls = self.calls
        calls.append(call)
        self.seen += 1
        sketched = self.limits.sketched
        if 0 < sketched < len(calls):
            calls[-sketched - 1].near = None  # out of every near repeat's reach from now on
        return call.changed is not None

    def start_turn(self) -> None:
        """A model call begins: the previous turn is judged if its response did not say."""
        self.failing_grew = False
        self._judge()
        self.turns += 1
        self.expected, self.results, self.worked, self.judged = None, 0, False, False

    def add_answer(self, key: str | None, *, calls: int, in_context: bool) -> None:
        """The model answered: with ``calls`` tool calls, or none (a turn with no action)."""
        self.failing_grew = False
        if calls:
            self.expected = calls
            return
        if in_context and not self.judged:
            self.judged = True  # an answer without a call: the turn did nothing
            self._failed_turn()

    def add_result(self, call: Call | None, name: str, failed: bool) -> None:
        """A result came in (``call`` is ``None`` when no pending call could be found)."""
        self.failing_grew = False
        if call is None:
            self.error = (None, 0)  # a success nobody asked for still ends the streak
        else:
            self._note_error(call.outcome if failed else None, call.sig)
            if self._note_info(name, call) and not failed:
                self.errors.clear()  # a success that says something new: progress
        self.results += 1
        if not failed:
            self.worked = True
        if self.expected is not None and self.results >= self.expected:
            self._judge()

    def user_message(self) -> None:
        """A new human message: successful calls before it stop counting as repeats."""
        for call in self.calls:
            if call.kind == "ok":
                call.sig = ""  # a signature no call has: it can no longer be repeated
        self.failing, self.failing_grew, self.judged = 0, False, True
        self.quiet = (None, 0)
        self.infos.clear()
        self.assistant = (None, 0)  # the same answer to a new question is no loop

    def _judge(self) -> None:
        if self.judged or (self.results == 0 and not self.worked):
            return  # judged already, or a turn without results: it says nothing
        self.judged = True
        if self.worked:
            self.failing = 0
        else:
            self._failed_turn()

    def _failed_turn(self) -> None:
        self.failing += 1
        self.failing_grew = True

    def _note_error(self, key: str | None, sig: str) -> None:
        errors = self.errors
        if key is None:  # a success ends the error streak, and this call's
            self.error = (None, 0)
            errors.pop(sig, None)
            return
        # the streak of the same error in a row (SPEC §2), and one per call: the same call
        # failing the same way between successes that said nothing new (R4)
        last, count = self.error
        self.error = (key, count + 1 if last == key else 1)
        last_call = errors.pop(sig, None)
        errors[sig] = (
            key,
            last_call[1] + 1 if last_call is not None and last_call[0] == key else 1,
        )
        if len(errors) > _MAX_TOOLS:
            del errors[next(iter(errors))]

    def _note_info(self, name: str, call: Call) -> bool:
        """Note what a result of ``name`` said; whether it was something new.

        A result says nothing new when it is empty, or when it echoed the call's arguments
        and, without them, another call of the tool said the same. The same call saying the
        same again (a re-read), or a result that echoes nothing and was seen before (an
        ``ok``), is left to the other signals: it neither adds to the streak nor ends it.
        """
        info, sig = call.info, call.sig
        if info is None:
            return False
        if info == "=":  # a result that echoes nothing says its outcome
            info = call.outcome or ""
        seen = self.infos.get(name)
        said = None if seen is None else seen.get(info)
        if info and said is None:  # something new: the streak ends
            if seen is None:
                seen = self.infos[name] = {}
                if len(self.infos) > _MAX_TOOLS:
                    del self.infos[next(iter(self.infos))]
            seen[info] = sig
            if len(seen) > _MAX_INFO:
                del seen[next(iter(seen))]
            self.quiet = (None, 0)
            return True
        if said == sig or call.info == "=" or call.changed is not None:
            # a re-read, a result that echoed nothing, a call made before: neither new nor
            # empty (a call walked again is the repeat, cycle and sequence rules' business)
            return False
        tool, count = self.quiet
        self.quiet = (name, count + 1 if tool == name else 1)
        return False


# --- progress-aware counting -----------------------------------------------------------------


def _same(a: str | None, b: str | None) -> bool:
    """Outcomes equal, an unknown one (pending, blocked) equal to any."""
    return a is None or b is None or a == b


def _chain(sig: str, earlier: Iterable[Call], aware: bool, ref: str | None = None) -> int:
    """How many of the ``earlier`` calls (newest first) count as repeats of ``sig``.

    With progress awareness, occurrences count while their outcomes stay equal: counting
    back from the newest, it ends at the first occurrence whose outcome differs from the
    newer one's (SPEC §3, §11 N4). ``ref`` is the outcome of the call being decided, when
    known.
    """
    count = 0
    for call in earlier:
        if call.sig != sig:
            continue
        if aware and call.outcome is not None:
            if ref is not None and call.outcome != ref:
                break
            ref = call.outcome
        count += 1
    return count


def _near_chain(sig: str, earlier: Iterable[Call], ref: Call | None) -> int:
    """How many of the ``earlier`` occurrences of ``sig`` (newest first) came out nearly
    the same, each like the next newer one (``ref``: the call being decided, if it returned),
    back to the first one made after a different call succeeded.
    """
    count = 0
    for call in earlier:
        if call.sig != sig:
            continue
        if ref is not None and not _nearly(call, ref):
            break
        count += 1
        if call.changed:
            break  # a different call succeeded before this one: that may be what changed
        if call.kind in ("ok", "error"):
            ref = call
    return count


def _nearly(a: Call, b: Call) -> bool:
    """Two results nearly the same: of one kind and one sketch, or the same outcome where a
    sketch is missing (a restored or replayed older state). An unknown result is equal to any.
    """
    if a.kind not in ("ok", "error") or b.kind not in ("ok", "error"):
        return True
    if a.kind != b.kind:
        return False
    if a.near is None or b.near is None:
        return a.outcome == b.outcome
    return near_equal(a.near, b.near)


def _repeats_pair(seq: Sequence[Call], index: int, window: int) -> bool:
    """Whether ``seq[index]`` repeats the latest (call, outcome) pair of its signature among
    the ``window`` calls before it. An unknown outcome (pending, blocked) is equal to any.
    """
    call = seq[index]
    sig = call.sig
    for position in range(index - 1, max(-1, index - window - 1), -1):
        earlier = seq[position]
        if earlier.sig == sig:
            return _same(earlier.outcome, call.outcome)
    return False


# --- the rules -------------------------------------------------------------------------------

CallCheck = Callable[[RunView, Sequence[Call], list[str]], "Detection | None"]
"""A rule on a tool call about to run: the history with the call last, and its signatures."""
ResultCheck = Callable[[RunView, Call | None, str], "Detection | None"]
"""A rule on a tool result: the call it belongs to (if found) and the tool's name."""
TurnCheck = Callable[[RunView], "Detection | None"]
"""A rule on a model turn or response."""


def repeated_call(view: RunView, seq: Sequence[Call], sigs: list[str]) -> Detection | None:
    """A A A: the same call ``threshold`` times in a row."""
    cur = seq[-1]
    threshold = view.limits.repeat_threshold(cur.name)
    if sigs[-threshold:].count(cur.sig) < threshold:
        return None
    earlier = reversed(seq[-threshold:-1])
    if 1 + _chain(cur.sig, earlier, view.limits.aware) < threshold:
        return None
    return Detection(
        Signal.REPEATED_TOOL_CALL, cur.name, (cur.name,), threshold, threshold, cur.sig
    )


def cycle(view: RunView, seq: Sequence[Call], sigs: list[str]) -> Detection | None:
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
        return Detection(
            Signal.TOOL_CYCLE,
            seq[-1].name,
            tuple(c.name for c in seq[-length:]),
            repeats,
            repeats,
            digest(*sorted(sigs[-length:])),
        )
    return None


def frequency(view: RunView, seq: Sequence[Call], sigs: list[str]) -> Detection | None:
    """A … A … A … A: ``threshold`` of the last ``window`` calls, the current one counted.

    A call made after a different call succeeded is decided on its result instead
    (:func:`frequency_after_change`). A tool whose threshold exceeds the window is,
    deliberately, never stopped here.
    """
    cur = seq[-1]
    if cur.changed and view.limits.aware:
        return None
    return _frequency(view, seq, len(seq) - 1)


def frequency_after_change(view: RunView, call: Call | None, name: str) -> Detection | None:
    """The window rule on the result of a call made after a different call succeeded: a
    re-run after a change executes, and a 4th identical result still stops (SPEC §11 N1).
    """
    if call is None or not call.changed or not view.limits.aware or call.kind == "blocked":
        return None
    seq = list(view.calls)  # the call is there: results are only matched to calls in it
    return _frequency(view, seq, seq.index(call))


def _frequency(view: RunView, seq: Sequence[Call], index: int) -> Detection | None:
    cur = seq[index]
    limits = view.limits
    threshold = limits.window_threshold(cur.name)
    earlier = seq[max(0, index - limits.window + 1) : index]
    if 1 + sum(1 for c in earlier if c.sig == cur.sig) < threshold:
        return None
    count = 1 + _chain(cur.sig, reversed(earlier), limits.aware, cur.outcome)
    if count < threshold:
        return None
    return Detection(Signal.TOOL_FREQUENCY, cur.name, (cur.name,), count, threshold, cur.sig)


def no_progress(view: RunView, seq: Sequence[Call], sigs: list[str]) -> Detection | None:
    """Each of the last N calls repeated the latest (call, outcome) pair of the window.

    N is ``no_progress_calls``, raised to the highest repeat threshold of the streak's
    tools. The work is at most N times the window, and nothing when the current call
    repeats no call of the window. A call made after a different call succeeded is decided
    on its result (:func:`no_progress_after_change`).
    """
    limits = view.limits
    window = limits.window
    if not limits.no_progress or sigs[-1] not in sigs[-window - 1 : -1] or seq[-1].changed:
        return None
    return _no_progress(view, seq, len(seq) - 1)


def no_progress_after_change(view: RunView, call: Call | None, name: str) -> Detection | None:
    """The no-progress rule on the result of a call made after a different call succeeded."""
    if call is None or not call.changed or not view.limits.no_progress or call.kind == "blocked":
        return None
    seq = list(view.calls)
    return _no_progress(view, seq, seq.index(call))


def _no_progress(view: RunView, seq: Sequence[Call], last: int) -> Detection | None:
    limits = view.limits
    highest = 0
    for count, index in enumerate(range(last, 0, -1), start=1):
        if not _repeats_pair(seq, index, limits.window):
            return None
        highest = max(highest, limits.repeat_threshold(seq[index].name))
        threshold = max(limits.no_progress, highest)
        if count >= threshold:
            streak = seq[index : last + 1]
            return Detection(
                Signal.NO_PROGRESS,
                streak[-1].name,
                tuple(dict.fromkeys(c.name for c in streak)),
                count,
                threshold,
                digest(*sorted({c.sig for c in streak})),
            )
    return None


def repeated_sequence(view: RunView, seq: Sequence[Call], sigs: list[str]) -> Detection | None:
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


def _walked_again(view: RunView, seq: Sequence[Call], sigs: list[str]) -> Detection | None:
    """A longer block (up to twice ``max_sequence_length`` calls) walked exactly the same
    way, its calls and their results, ``cycle_repeats - 1`` times and begun once more."""
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
        return _sequence(seq, length, laps)
    return None


def _sequence(seq: Sequence[Call], length: int, repeats: int) -> Detection:
    return Detection(
        Signal.REPEATED_SEQUENCE,
        seq[-1].name,
        tuple(c.name for c in seq[-length:]),
        repeats,
        repeats,
        digest(*sorted({c.name for c in seq[-length * repeats :]})),
    )


def near_repeat(view: RunView, seq: Sequence[Call], sigs: list[str]) -> Detection | None:
    """The same call again and again, its result only *nearly* the same each time: numbers
    changed, lines repeated (an edit applied again and again, a counter that grows). Looser
    than an exact repeat: ``near_repeat_threshold`` identical calls among the last twice as
    many calls, never below the tool's repeat threshold (SPEC §11 R1). Only the call itself
    can have changed the result: a different call that succeeded in between (an edit before
    a test run) ends the count (N5).
    """
    cur = seq[-1]
    threshold = view.limits.near_threshold(cur.name)
    if not threshold or cur.changed or sigs.count(cur.sig) < threshold:
        return None
    count = 1 + _near_chain(cur.sig, reversed(seq[-2 * threshold : -1]), None)
    return _near(cur, count, threshold)


def _near(cur: Call, count: int, threshold: int) -> Detection | None:
    if count < threshold:
        return None
    return Detection(
        Signal.NEAR_REPEAT, cur.name, (cur.name,), count, threshold, digest("near", cur.sig)
    )


def no_new_info(view: RunView, call: Call | None, name: str) -> Detection | None:
    """One tool called again and again with new arguments, and nothing new comes back:
    each result empty, or what an earlier one said once the call's own argument values are
    removed (``No matches found for "<arg>"``), ``no_new_info_calls`` times in a row while
    no other call brought anything new either (SPEC §11 R6).
    """
    threshold = view.limits.no_new_info
    tool, count = view.quiet
    if not threshold or tool != name or count < threshold or call is None:
        return None
    return Detection(Signal.NO_NEW_INFO, name, (name,), count, threshold, digest("info", name))


def repeated_error(view: RunView, call: Call | None, name: str) -> Detection | None:
    """The same normalized error from one tool ``repeat_error_threshold`` times in a row.

    A success of that tool ends the streak, and so does any success that says something new
    (an edit, a new listing); a failing call retried between successes that say nothing (a
    ``think`` step) is still a loop (SPEC §11 R4).
    """
    threshold = view.limits.error
    if call is None or call.kind != "error":
        return None
    by_call = view.errors.get(call.sig, ("", 0)) if view.limits.aware else ("", 0)
    key, count = max(view.error, by_call, key=lambda item: item[1])
    if key is None or count < threshold:
        return None
    return Detection(Signal.REPEATED_TOOL_ERROR, name, (name,), count, threshold, key)


def failing_turns(view: RunView, *_: object) -> Detection | None:
    """``failing_turns`` model turns in a row in which no tool call succeeded, whatever the
    error texts, or that gave no action at all (SPEC §11 R3).
    """
    threshold = view.limits.failing_turns
    if not threshold or not view.failing_grew or view.failing < threshold:
        return None
    return Detection(
        Signal.FAILING_TURNS, None, (), view.failing, threshold, digest("failing_turns")
    )


def repeated_response(view: RunView) -> Detection | None:
    """The same assistant text ``repeat_assistant_threshold`` times in a row, each produced
    with the previous one in the model's input (SPEC §2, §11 N2).
    """
    key, count = view.assistant
    threshold = view.limits.assistant
    if key is None or count < threshold:
        return None
    return Detection(Signal.REPEATED_ASSISTANT_RESPONSE, None, (), count, threshold, key)


@dataclass(frozen=True, slots=True)
class Rule:
    """A signal and the checks that detect it, one per kind of event it looks at."""

    signal: Signal
    on_call: CallCheck | None = None
    new_calls: bool = False
    """Whether ``on_call`` can fire on a call whose signature the history does not hold
    (most rules look for a repeat of the call, and are not asked then)."""
    on_result: ResultCheck | None = None
    on_turn: TurnCheck | None = None
    on_answer: TurnCheck | None = None


RULES: tuple[Rule, ...] = (
    Rule(Signal.REPEATED_TOOL_CALL, on_call=repeated_call),
    Rule(Signal.TOOL_CYCLE, on_call=cycle),
    Rule(Signal.TOOL_FREQUENCY, on_call=frequency, on_result=frequency_after_change),
    Rule(Signal.NO_PROGRESS, on_call=no_progress, on_result=no_progress_after_change),
    Rule(Signal.REPEATED_SEQUENCE, on_call=repeated_sequence, new_calls=True),
    Rule(Signal.NEAR_REPEAT, on_call=near_repeat),
    Rule(Signal.NO_NEW_INFO, on_result=no_new_info),
    Rule(Signal.REPEATED_TOOL_ERROR, on_result=repeated_error),
    Rule(
        Signal.FAILING_TURNS,
        on_result=failing_turns,
        on_turn=failing_turns,
        on_answer=failing_turns,
    ),
    Rule(Signal.REPEATED_ASSISTANT_RESPONSE, on_answer=repeated_response),
)
"""Every hard signal, in report order: the first that fires on an event is reported."""

CALL_CHECKS: tuple[CallCheck, ...] = tuple(r.on_call for r in RULES if r.on_call)
NEW_CALL_CHECKS: tuple[CallCheck, ...] = tuple(
    r.on_call for r in RULES if r.on_call and r.new_calls
)
"""The call checks for a call whose signature is not in the history."""
RESULT_CHECKS: tuple[ResultCheck, ...] = tuple(r.on_result for r in RULES if r.on_result)
TURN_CHECKS: tuple[TurnCheck, ...] = tuple(r.on_turn for r in RULES if r.on_turn)
ANSWER_CHECKS: tuple[TurnCheck, ...] = tuple(r.on_answer for r in RULES if r.on_answer)
