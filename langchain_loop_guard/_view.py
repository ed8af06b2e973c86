"""The run as every rule sees it (:class:`RunView`), and the numbers they read (:class:`Limits`).

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Literal, get_args

from langchain_loop_guard._masks import DEFAULT_VOLATILE_FIELDS, VolatileFields
from langchain_loop_guard._novelty import (
    LINES,
    MOVED,
    NEUTRAL,
    NEW,
    NOTHING,
    STALE,
    WORK,
    Seen,
    line_hashes,
)
from langchain_loop_guard._signature import near_reply, reworded_reply

if TYPE_CHECKING:
    from langchain_loop_guard._config import LoopGuardConfig

__all__ = [
    "Call",
    "Key",
    "Limits",
    "OutcomeKind",
    "RunView",
    "StateError",
    "alike",
    "count_of",
    "flag_of",
    "items_of",
    "key_of",
    "key_text",
    "limits_of",
    "optional_text_of",
    "successes_cannot_stop",
    "text_of",
]

OutcomeKind = Literal["pending", "ok", "error", "blocked"]

Key = int | str
"""A call's signature or a result's key as the view keeps it: a digest of 16 hex digits as its
number (half the memory), any other text as it is."""


def key_of(digest: str) -> Key:
    """The key of ``digest``: its number if it is what :func:`key_text` writes of one."""
    if len(digest) == 16:
        try:
            number = int(digest, 16)
        except ValueError:
            return digest
        if f"{number:016x}" == digest:
            return number
    return digest


def key_text(key: Key) -> str:
    """The text of ``key`` (the digest :func:`key_of` was given)."""
    return key if type(key) is str else f"{key:016x}"


_NEW_LINES = 2
"""New lines a long result must bring to count as new (a line that changes, a ticking counter
or a rotating banner, does not: SPEC §13 R15, N11)."""

_TURN = ("expected", "results", "worked", "brought", "judged", "answered", "failing")
"""The current turn's fields (:meth:`RunView.clear` says what each is), as a state lists them."""

StateError = (KeyError, TypeError, ValueError)
"""What reading a malformed exported state raises."""


class Call:
    """One tool call of the history: digests only.

    ``outcome`` is the digest of the normalized result (``None`` while pending or when
    blocked, which counts as equal to any); ``changed`` whether a different call succeeded
    since the previous call with its signature (``None``: none in the history); ``news``
    whether a different call brought something new since then (work done is no news: a
    re-run after an edit is decided on its result, SPEC §11 N1); ``batch`` the
    first call of the model answer that asked for it; ``brought`` what its result brought (the
    bits of :mod:`._novelty`); ``tokens`` keyed hashes of the argument values, kept only while
    the call is pending.
    """

    __slots__ = (
        "batch",
        "brought",
        "call_id",
        "changed",
        "kind",
        "name",
        "news",
        "outcome",
        "sig",
        "tokens",
    )

    def __init__(
        self, name: str, sig: Key, call_id: str | None, tokens: frozenset[int] | None = None
    ) -> None:
        self.name = name
        self.sig = sig
        self.call_id = call_id
        self.batch: Call = self
        self.outcome: Key | None = None
        self.kind: OutcomeKind = "pending"
        self.changed: bool | None = None
        self.news = False
        self.brought = NEUTRAL
        self.tokens = tokens

    @property
    def fresh(self) -> bool:
        """Whether its result brought something the run had not seen."""
        return bool(self.brought & NEW)


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
    stale: int
    """Answers in a row that bring back only what the run has seen which stop the run: half
    of ``no_new_info`` (SPEC §13 R12); 0: off."""
    error: int
    error_often: int
    """Failures with one error within the window that stop the run even with progress
    between them: one more than ``error``, at least the window threshold (SPEC §12 R4')."""
    failing_turns: int
    assistant: int
    reply_cycle: int
    reply_laps: int
    """Laps of a cycle of nearly identical replies that stop the run: ``cycle_repeats``, never
    below the same reply's ``repeat_assistant_threshold``."""
    reworded: int
    """Replies in a row, each nearly the same as the one before, with nothing new from a tool
    or a human between, that stop the run in any scope: one more than
    ``repeat_assistant_threshold`` (SPEC §13 R14); 0: off."""
    volatile: Mapping[str, VolatileFields]
    """The fields masked in each tool's results (``"*"``: any other tool's)."""
    history: int

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
        error_often = max(config.repeat_frequency_threshold, config.repeat_error_threshold + 1)
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
            error_often,
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
            stale=(config.no_new_info_calls + 1) // 2 if aware else 0,
            error=config.repeat_error_threshold,
            error_often=error_often if aware else 0,
            failing_turns=config.failing_turns if aware else 0,
            assistant=config.repeat_assistant_threshold,
            # replies go round only in a conversation: a run answers once (SPEC §12 R9)
            reply_cycle=config.reply_cycle_length if aware and config.scope == "thread" else 0,
            reply_laps=max(config.cycle_repeats, config.repeat_assistant_threshold),
            reworded=config.repeat_assistant_threshold + 1
            if aware and config.reply_cycle_length
            else 0,
            volatile=_volatile_of(config.volatile_fields),
            history=history,
        )

    def repeat_threshold(self, tool: str) -> int:
        """The repeat threshold of ``tool`` (its override, or ``repeat_tool_threshold``)."""
        return self.overrides.get(tool, self.repeat)

    def window_threshold(self, tool: str) -> int:
        """The window threshold of ``tool``: never below its repeat threshold."""
        return max(self.frequency, self.repeat_threshold(tool))

    def volatile_of(self, tool: str) -> VolatileFields:
        """The fields whose values are noise in ``tool``'s results."""
        volatile = self.volatile
        return volatile.get(tool) or volatile["*"]

    def near_threshold(self, tool: str) -> int:
        """The near-repeat threshold of ``tool`` (0: off): never below its repeat threshold."""
        return max(self.near_repeat, self.repeat_threshold(tool)) if self.near_repeat else 0


def _volatile_of(fields: Mapping[str, frozenset[str]]) -> dict[str, VolatileFields]:
    """The compiled volatile fields of each tool named, and of every other (``"*"``)."""
    every = (*DEFAULT_VOLATILE_FIELDS, *sorted(fields.get("*", ())))
    compiled = {"*": VolatileFields(every)}
    for tool, names in fields.items():
        if tool != "*":
            compiled[tool] = VolatileFields((*every, *sorted(names)))
    return compiled


@lru_cache(maxsize=64)
def limits_of(config: LoopGuardConfig) -> Limits:
    """The limits of ``config``, shared by the runs of one configuration (read, never
    changed): a run's state holds none of its own."""
    return Limits.of(config)


class RunView:
    """The run's recent calls, streaks and turns, digests and counts only.

    The view does the bookkeeping of each event (:meth:`add_call`, :meth:`add_result`, …) and
    exports and restores itself as JSON data; the rules only read it. ``calls`` is the
    history, oldest first, ``limits.history`` deep; ``sigs`` their signatures, in order.
    ``memory`` is what the run's results said (:class:`~._novelty.Seen`): every signal reads
    novelty from what it made of each result (``Call.brought``), never an idea of its own.
    """

    __slots__ = (
        "answered",
        "assistant",
        "batch",
        "brought",
        "calls",
        "due",
        "error",
        "expected",
        "failing",
        "failing_grew",
        "failing_tools",
        "informed",
        "judged",
        "limits",
        "memory",
        "quiet",
        "quiet_grew",
        "quiet_tools",
        "replies",
        "results",
        "reworded",
        "seen",
        "sigs",
        "stale",
        "turns",
        "worked",
    )

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.calls: list[Call] = []
        self.sigs: list[Key] = []
        self.memory = Seen()
        self.clear()

    def clear(self) -> None:
        """Forget the run: history, streaks, turns, what it has seen."""
        self.calls.clear()
        self.sigs.clear()
        self.memory.clear()
        # the recent replies (key, word sketch), newest last, for cycles of them (R9)
        self.replies: tuple[tuple[str, str | None], ...] = ()
        # the streak of replies each nearly the previous one (R14): its length, and whether
        # something new came from a tool (or a human, ``2``) since the last reply
        self.reworded = 0
        self.informed = 0
        self.seen = 0
        self.turns = 0
        # the answer being worked through: its first call's place, and its calls still due
        self.batch: Call | None = None
        self.due = 0
        # the streak of model answers (or unannounced calls) that brought nothing new, with
        # their tools, and the streak of those that brought back only what the run had seen
        self.quiet = 0
        self.stale = 0
        self.quiet_tools: tuple[str, ...] = ()
        self.quiet_grew = False
        # the streak of one tool's error in a row: its key and length
        self.error: tuple[Key | None, int] = (None, 0)
        # the current turn: calls announced by its response, results in, whether one worked,
        # what its results brought, whether it was judged, whether it only answered; and how
        # many turns in a row failed, with the tools that failed in them
        self.expected: int | None = None
        self.results = 0
        self.worked = False
        self.brought = 0
        self.judged = True
        self.answered = False
        self.failing = 0
        self.failing_tools: tuple[str, ...] = ()
        self.failing_grew = False
        self.assistant: tuple[str | None, int] = (None, 0)

    def resize(self, limits: Limits) -> None:
        """Switch to ``limits``, keeping the history that still fits."""
        self.limits = limits
        self._trim()
        self.replies = self.replies[len(self.replies) - limits.reply_laps * limits.reply_cycle :]

    # --- bookkeeping ---------------------------------------------------------------------

    def _trim(self) -> None:
        """Drop the calls beyond the history's depth, oldest first."""
        extra = len(self.calls) - self.limits.history
        if extra > 0:
            del self.calls[:extra]
            del self.sigs[:extra]

    def add_call(self, call: Call) -> bool:
        """Append ``call``, noting whether a different call succeeded (and whether one
        brought something new) since its last time and which answer asked for it; whether the
        history held its signature."""
        calls, sigs, sig = self.calls, self.sigs, call.sig
        if sig in sigs:  # looked up at C speed: most calls are new
            since = len(sigs) - sigs[::-1].index(sig)  # the calls after its newest occurrence
            changed = news = False
            for earlier in calls[since:]:
                if earlier.kind == "ok":
                    changed = True
                    brought = earlier.brought
                    if brought & (NEW | MOVED) and not brought & WORK:  # a query's answer
                        news = True
                        break
            call.changed, call.news = changed, news
        if self.due:
            if self.batch is None:
                self.batch = call
            call.batch = self.batch
            self.due -= 1
        calls.append(call)
        sigs.append(sig)
        if len(calls) > self.limits.history:
            del calls[0], sigs[0]
        self.seen += 1
        return call.changed is not None

    def start_turn(self) -> None:
        """A model call begins: the previous turn is judged if its response did not say."""
        self.failing_grew = self.quiet_grew = False
        self._judge()
        if self.answered:  # answered without a call, and the model was asked again
            self.answered = False
            self._failed_turn()
        self.turns += 1
        self.expected, self.results, self.worked, self.judged = None, 0, False, False
        self.batch, self.due = None, 0

    def add_answer(self, *, calls: int, in_context: bool) -> None:
        """The model answered: with ``calls`` tool calls, or none (an answer, which fails the
        turn only if the model is asked again without a new human message, SPEC §12 N8)."""
        self.failing_grew = self.quiet_grew = False
        if calls:
            self.expected = calls
            self.batch, self.due = None, calls
            return
        if in_context and not self.judged:
            self.judged = True
            self.answered = True

    def add_reply(self, key: str, sketch: str | None, *, in_context: bool) -> None:
        """An answer with text and no tool call: the streak of identical replies, the recent
        replies for cycles of nearly identical ones (SPEC §12 R9), and the streak of replies
        each nearly the one before (§13 R14). A reply after something new from a tool starts
        every streak afresh, however alike the words (§13 N12); a human message ends only the
        last streak (the same reply to every message is R9's loop)."""
        informed, self.informed = self.informed, 0
        last, streak = self.assistant
        # news from a tool (with progress awareness: the seed counts every identical text), or
        # a helper model's new input
        fresh = (informed & 1 and self.limits.aware) or not in_context
        self.assistant = (key, 1 if fresh or key != last else streak + 1)
        previous = self.replies[-1] if self.replies else None
        if fresh or informed or previous is None or not _reworded(previous, (key, sketch)):
            self.reworded = 1
        else:
            self.reworded += 1
        if fresh:
            self.replies = ()
        kept = max(self.limits.reply_laps * self.limits.reply_cycle, 1)
        self.replies = (*self.replies[len(self.replies) + 1 - kept :], (key, sketch))

    def find(self, name: str, call_id: str | None) -> Call | None:
        """The call a result of ``name`` belongs to: the newest with its id, or else the
        oldest pending call of that tool (with an unknown id, only a call without an id can
        be the one: a call that has an id waits for its own)."""
        calls = self.calls
        if call_id is not None:
            for call in reversed(calls):
                if call.call_id == call_id:
                    return call
        for call in calls:
            if (
                call.kind == "pending"
                and call.name == name
                and (call.call_id is None or call_id is None)
            ):
                return call
        return None

    def add_result(
        self,
        call: Call | None,
        name: str,
        outcome: Key,
        failed: bool,
        *,
        call_id: str | None,
        near: str | None,
        info: str | None,
    ) -> Call | None:
        """A result came in for the pending ``call`` (``None``: none found; a failure nobody
        asked for still counts, as a call of its own). Returns the call it was recorded on."""
        if call is not None:
            call.outcome, call.kind, call.tokens = outcome, "error" if failed else "ok", None
        elif failed:
            call = Call(name, "", call_id)
            call.outcome, call.kind = outcome, "error"
        self.failing_grew = self.quiet_grew = False
        if not failed or call is None:
            self.error = (None, 0)  # any success ends the streak of an error in a row
        else:
            last, count = self.error
            self.error = (call.outcome, count + 1 if last == call.outcome else 1)
        if call is not None:
            brought = self._brought(call, failed, near, info)
            call.brought = brought
            self.brought |= brought
            if brought & (NEW | WORK):
                self.informed |= 1
            if brought != NEUTRAL:
                self._note_tool(name)
            if failed and name not in self.failing_tools:
                self.failing_tools = (*self.failing_tools[-3:], name)
        self.results += 1
        if not failed:
            self.worked = True
        if self.expected is None:
            self._count_quiet()  # a call no answer announced: a unit of its own
        elif self.results >= self.expected:
            self._judge()
        return call

    def user_message(self) -> None:
        """A new human message: new information for every count of calls and errors (SPEC §13
        N13, which withdrew §11 R7): no call before it is a repeat of a call after it. What the
        run has seen stays seen (a lookup answered as before brings nothing new to a reply), and
        the replies' streaks go on (R9, R14 say when they stop)."""
        self.calls.clear()  # no call before it repeats one after it, nor fails the same way
        self.sigs.clear()
        self.batch, self.due = None, 0
        self.error = (None, 0)
        self.failing, self.failing_tools, self.failing_grew = 0, (), False
        self.judged, self.answered = True, False
        self.quiet, self.stale, self.quiet_tools, self.quiet_grew, self.brought = 0, 0, (), False, 0
        self.informed |= 2

    def _judge(self) -> None:
        if self.judged or (self.results == 0 and not self.worked):
            return  # judged already, or a turn without results: it says nothing
        self.judged = True
        self._count_quiet()
        if self.worked:
            self.failing, self.failing_tools = 0, ()
        else:
            self._failed_turn()

    def _failed_turn(self) -> None:
        self.failing += 1
        self.failing_grew = True

    def _count_quiet(self) -> None:
        """One answer's calls (or one unannounced call) judged: did they bring anything?"""
        brought, self.brought = self.brought & ~(LINES | MOVED), 0
        if brought & (NEW | WORK) or not brought:  # something new, or work done
            if brought:
                self.quiet, self.stale, self.quiet_tools = 0, 0, ()
            return
        self.quiet += 1
        self.stale = self.stale + 1 if brought == STALE else 0
        self.quiet_grew = True

    def _note_tool(self, name: str) -> None:
        tools = self.quiet_tools
        if name not in tools:
            self.quiet_tools = (*tools[-3:], name)

    def _brought(self, call: Call, failed: bool, near: str | None, info: str | None) -> int:
        """What a result brought, as the bits of :mod:`._novelty`: a call that changes
        something did work, whatever it printed (SPEC §12 N9)."""
        if failed:
            return NOTHING
        if info is None:
            return NEW  # a result digested without its information (an older trace)
        if info[:1] == ".":
            return WORK | (self._said(call, info[1:], near) & (NEW | LINES))
        return self._said(call, info, near)

    def _said(self, call: Call, info: str, near: str | None) -> int:
        if not info:
            return NOTHING
        again = call.changed is not None  # the same call, made before in the history
        if info[0] == "!":  # a search that found nothing (asked again: the repeat rules')
            return NEUTRAL if again else NOTHING
        if near is not None and info[0] in "=+":  # a long result: are its lines new?
            hashes = line_hashes(near)
            if self.memory.count_new(hashes) >= min(_NEW_LINES, len(hashes)):
                return NEW | LINES
            seen = LINES
            if call.outcome is not None and not self.memory.check(_hash(call.outcome)):
                seen |= MOVED  # its numbers moved (time is masked: they are counts)
        else:
            whole = info in ("=", "+")  # an older trace's: the outcome is the information
            value = ("" if call.outcome is None else call.outcome) if whole else info
            if not self.memory.check(_hash(value)):
                return NEW
            seen = NEUTRAL
        if again:
            return seen  # seen again from the same call: the repeat rules' business
        if info[0] == "~":
            return seen | NOTHING  # a short answer about the arguments, seen before
        if info[0] == "=" and not seen:
            return NEUTRAL  # a short acknowledgement seen before: no content to bring
        return seen | STALE

    # --- state ---------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """The view as JSON data: tool names, digests and counters, never content."""
        return {
            "calls": [
                [
                    c.name,
                    key_text(c.sig),
                    None if c.outcome is None else key_text(c.outcome),
                    c.kind,
                    c.call_id,
                    c.changed,
                    c.news,
                    None if c.tokens is None else sorted(c.tokens),
                    c.batch is not c,
                    c.brought,
                ]
                for c in self.calls
            ],
            "seen": self.seen,
            "turns": self.turns,
            "batch": [self.batch is not None, self.due],
            "memory": self.memory.export(),
            "quiet": [self.quiet, self.stale, list(self.quiet_tools)],
            "turn": [getattr(self, name) for name in _TURN],
            "failing_tools": list(self.failing_tools),
            "error": [None if self.error[0] is None else key_text(self.error[0]), self.error[1]],
            "assistant": list(self.assistant),
            "replies": [list(reply) for reply in self.replies],
            "reworded": [self.reworded, self.informed],
        }

    def restore_state(self, state: Mapping[str, Any], *, version: int = 5) -> None:
        """Take an exported state (``version`` 4: the previous release's); raises one of
        :data:`StateError` (and changes nothing) when it is malformed."""
        reader = _call_from_state if version == 5 else _call_from_v4
        calls = [reader(item) for item in items_of(state["calls"])]
        if calls and calls[0].batch is _JOINED:
            calls[0].batch = calls[0]  # its answer's first call is out of the history
        for previous, call in pairwise(calls):
            if call.batch is _JOINED:  # joined the answer of the call before it
                call.batch = previous.batch
        seen, turns = count_of(state["seen"]), count_of(state["turns"])
        started, due = items_of(state["batch"])
        started = flag_of(started)
        if version == 5:
            memory = Seen.restore(state["memory"])
            count, stale, tools = items_of(state["quiet"])
            failing_tools = tuple(text_of(tool) for tool in items_of(state["failing_tools"]))
            reworded, informed = map(count_of, items_of(state["reworded"]))
        else:  # v4 kept the digests of what it had seen: they are seen again from here on
            memory = Seen()
            for number in items_of(state["infos"]):
                memory.check(_hash_from_state(number))
            (count, tools), stale = items_of(state["quiet"]), 0
            failing_tools, reworded, informed = (), 0, 0
        quiet, stale = count_of(count), count_of(stale)
        quiet_tools = tuple(text_of(tool) for tool in items_of(tools))
        expected, results, worked, brought, judged, answered, failing = items_of(state["turn"])
        turn = (
            None if expected is None else count_of(expected),
            count_of(results),
            flag_of(worked),
            count_of(brought),
            flag_of(judged),
            flag_of(answered),
            count_of(failing),
        )
        key, streak = items_of(state["assistant"])
        assistant = (optional_text_of(key), count_of(streak))
        key, streak = items_of(state["error"])
        error = (None if key is None else key_of(text_of(key)), count_of(streak))
        replies = [
            (text_of(reply_key), optional_text_of(sketch))
            for reply_key, sketch in map(items_of, items_of(state["replies"]))
        ]
        self.clear()
        self.calls.extend(calls)
        self.sigs.extend(call.sig for call in calls)
        self._trim()
        self.replies = tuple(replies)
        self.seen, self.turns, self.due = seen, turns, count_of(due)
        self.batch = calls[-1].batch if started and calls else None
        self.memory, self.quiet, self.stale, self.quiet_tools = memory, quiet, stale, quiet_tools
        self.failing_tools, self.reworded, self.informed = failing_tools, reworded, informed
        self.assistant, self.error = assistant, error
        for name, value in zip(_TURN, turn, strict=True):
            setattr(self, name, value)


def alike(a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    """Two replies the same, or nearly (sharing nearly all their words)."""
    return a[0] == b[0] or (a[1] is not None and b[1] is not None and near_reply(a[1], b[1]))


def _reworded(a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    """Two replies the same, or sharing most of their words (SPEC §13 R14)."""
    return a[0] == b[0] or (a[1] is not None and b[1] is not None and reworded_reply(a[1], b[1]))


def successes_cannot_stop(state: Mapping[str, Any], no_new_info: int) -> bool:
    """Whether, in an exported state, no successful result of the calls awaiting one can stop
    the run: none of them is a repeat decided on its result (SPEC §11 N1), and neither the
    streak of answers that brought nothing new nor that of answers that brought back only what
    the run had seen can reach its threshold with them (R6, R8, §13 R12).
    Anything unreadable answers ``False``."""
    calls, quiet = state.get("calls"), state.get("quiet")
    if not isinstance(calls, list) or not isinstance(quiet, list) or len(quiet) != 3:
        return False
    pending = 0
    for call in calls:
        if not isinstance(call, list) or len(call) != 10:
            return False
        if call[3] == "pending":
            if call[5] is not False and call[5] is not None:
                return False  # decided on its result (None: the first of its signature)
            pending += 1
    count, stale = quiet[0], quiet[1]
    if type(count) is not int or type(stale) is not int:
        return False
    # a success may bring back only what the run has seen: one more answer on both streaks
    return not no_new_info or (
        count + pending < no_new_info and stale + pending < (no_new_info + 1) // 2
    )


def _hash(value: Key) -> int:
    """A digest as a 64-bit number (its last 16 hex digits), or any text's CRC."""
    if isinstance(value, int):
        return value  # the number of its 16 hex digits already
    try:
        return int(value[-16:], 16)
    except ValueError:
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))


# --- reading an exported state ------------------------------------------------------------------

_KINDS = frozenset(get_args(OutcomeKind))
_JOINED = Call("", "", None)
"""The mark of a restored call that joined the answer of the call before it."""


def items_of(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError
    return value


def count_of(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(value)
    return value


def text_of(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


def optional_text_of(value: object) -> str | None:
    return None if value is None else text_of(value)


def flag_of(value: object) -> bool:
    if type(value) is not bool:
        raise TypeError
    return value


def _hash_from_state(value: object) -> int:
    if type(value) is not int or not 0 <= value < 1 << 64:
        raise ValueError(value)
    return value


def _call_from_state(item: object) -> Call:
    name, sig, outcome, kind, call_id, changed, news, tokens, joined, brought = items_of(item)
    call = _call((name, sig, outcome, kind, call_id, changed, tokens, joined))
    call.news = flag_of(news)
    call.brought = count_of(brought) & (NEW | NOTHING | WORK | STALE | LINES | MOVED)
    return call


def _call_from_v4(item: object) -> Call:
    """A call as the previous release exported it (its sketch and information are not
    needed once its result is in)."""
    name, sig, outcome, kind, call_id, _, _, changed, tokens, joined, fresh = items_of(item)
    call = _call((name, sig, outcome, kind, call_id, changed, tokens, joined))
    call.brought = NEW if flag_of(fresh) else NEUTRAL
    return call


def _call(fields: tuple[object, ...]) -> Call:
    """A call of a state, from its fields common to every version."""
    name, sig, outcome, kind, call_id, changed, tokens, joined = fields
    if kind not in _KINDS:
        raise ValueError(kind)
    call = Call(text_of(name), key_of(text_of(sig)), optional_text_of(call_id))
    if flag_of(joined):
        call.batch = _JOINED
    call.outcome = None if outcome is None else key_of(text_of(outcome))
    call.kind = kind  # type: ignore[assignment]  # one of _KINDS: checked above
    call.changed = None if changed is None else flag_of(changed)
    if tokens is not None:
        call.tokens = frozenset(map(count_of, items_of(tokens)))
    return call
