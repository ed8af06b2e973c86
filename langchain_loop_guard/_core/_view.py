"""The run as every rule sees it (:class:`RunView`): its recent calls, what their results
brought, its streaks and turns. The numbers the rules read are :mod:`._limits`'; the replies
:mod:`._replies`'; what the run has seen :mod:`._novelty`'.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any, Literal, get_args

from langchain_loop_guard._core._limits import Limits, limits_of
from langchain_loop_guard._core._novelty import (
    ACK,
    LINES,
    MOVED,
    NEUTRAL,
    NEW,
    NOTHING,
    STALE,
    UNSEEN_FAILURE,
    WORK,
    Seen,
)
from langchain_loop_guard._core._replies import Replies, alike
from langchain_loop_guard._core._state_data import (
    Key,
    StateError,
    count_of,
    flag_of,
    hash_from_state,
    items_of,
    key_of,
    key_text,
    optional_text_of,
    text_of,
)

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


_TURN = (
    "expected",
    "results",
    "worked",
    "brought",
    "judged",
    "answered",
    "failing",
    "failing_new",
)
"""The current turn's fields (:meth:`RunView.clear` says what each is), as a state lists them."""


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

    def exported(self) -> list[object]:
        """The call as :meth:`RunView.export_state` lists it."""
        return [
            self.name,
            key_text(self.sig),
            None if self.outcome is None else key_text(self.outcome),
            self.kind,
            self.call_id,
            self.changed,
            self.news,
            None if self.tokens is None else sorted(self.tokens),
            self.batch is not self,
            self.brought,
        ]

    @property
    def fresh(self) -> bool:
        """Whether its result brought something the run had not seen."""
        return bool(self.brought & NEW)


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
        "batch",
        "brought",
        "calls",
        "due",
        "error",
        "expected",
        "failing",
        "failing_grew",
        "failing_new",
        "failing_tools",
        "judged",
        "limits",
        "memory",
        "quiet",
        "quiet_grew",
        "quiet_tools",
        "replies",
        "results",
        "rows",
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
        self.replies = Replies()
        # the exported rows of the calls whose results are in, kept by the calls they show
        # (nothing of a call changes then); only a view that exports has any
        self.rows: dict[Call, list[object]] | None = None
        self.clear()

    def clear(self) -> None:
        """Forget the run: history, streaks, turns, what it has seen."""
        self.calls.clear()
        self.sigs.clear()
        self.rows = None
        self.memory.clear()
        self.replies.clear()
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
        self.failing_new = 0  # of which failed in a way the run had not seen (§14 N15)
        self.failing_tools: tuple[str, ...] = ()
        self.failing_grew = False

    def resize(self, limits: Limits) -> None:
        """Switch to ``limits``, keeping the history that still fits."""
        self.limits = limits
        self._trim()
        self.replies.keep(limits.reply_laps * limits.reply_cycle)

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

    def add_answer(self, *, calls: int, in_context: bool, talk: bool = False) -> None:
        """The model answered: with ``calls`` tool calls, or none (which fails the turn if the
        model is asked again without a human message, §12 N8; talk ends the streak, §14 N19)."""
        self.failing_grew = self.quiet_grew = False
        if calls:
            self.expected = calls
            self.batch, self.due = None, calls
            return
        talked = talk and self.limits.aware
        if talked and not self.judged and self.results == 0:
            self.failing, self.failing_new, self.failing_tools = 0, 0, ()
        elif in_context and not self.judged and not talked:
            self.judged = self.answered = True

    def add_reply(self, key: str, sketch: str | None, *, in_context: bool) -> None:
        """An answer with text and no tool call (:meth:`Replies.add`)."""
        limits = self.limits
        self.replies.add(
            (key, sketch),
            in_context=in_context,
            aware=limits.aware,
            kept=limits.reply_laps * limits.reply_cycle,
        )

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
            # the same failure of one answer's calls is one failure (§14 N16)
            same = last == call.outcome and self._batch_failed(call)
            self.error = (call.outcome, count if same else count + 1 if last == call.outcome else 1)
        if call is not None:
            brought = self.memory.judge(
                info, near, outcome, again=call.changed is not None, failed=failed
            )
            call.brought = brought & ~UNSEEN_FAILURE  # the turn's, not the call's
            self.brought |= brought
            self.replies.tool_result(news=bool(brought & (NEW | WORK)), failed=failed)
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

    def _batch_failed(self, call: Call) -> bool:
        """Whether the newest failure before ``call`` is one of its answer's calls."""
        for earlier in reversed(self.calls):
            if earlier is not call and earlier.kind == "error":
                return earlier.batch is call.batch
        return False

    def user_message(self, question: str | None = None) -> None:
        """A new human message (``question``: its key): new information for every count of
        calls and errors (SPEC §13 N13, which withdrew §11 R7). What the run has seen stays
        seen, and the replies' streaks go on (R9, R14; §14 N18 for a question asked again)."""
        self.calls.clear()  # no call before it repeats one after it, nor fails the same way
        self.sigs.clear()
        self.batch, self.due = None, 0
        self.error = (None, 0)
        self.failing, self.failing_tools, self.failing_grew = 0, (), False
        self.failing_new = 0
        self.judged, self.answered = True, False
        self.quiet, self.stale, self.quiet_tools, self.quiet_grew, self.brought = 0, 0, (), False, 0
        self.replies.human_news(question)

    def _judge(self) -> None:
        if self.judged or (self.results == 0 and not self.worked):
            return  # judged already, or a turn without results: it says nothing
        self.judged = True
        unseen = self.brought & UNSEEN_FAILURE
        self._count_quiet()
        if self.worked:
            self.failing, self.failing_new, self.failing_tools = 0, 0, ()
        else:
            self._failed_turn(new=bool(unseen))

    def _failed_turn(self, *, new: bool = False) -> None:
        self.failing += 1
        self.failing_new += new
        self.failing_grew = True

    def _count_quiet(self) -> None:
        """One answer's calls (or one unannounced call) judged: did they bring anything?"""
        brought, self.brought = self.brought & ~(LINES | MOVED | UNSEEN_FAILURE | ACK), 0
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

    # --- state ---------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """The view as JSON data: tool names, digests and counters, never content."""
        return {
            "calls": self._exported_calls(),
            "seen": self.seen,
            "turns": self.turns,
            "batch": [self.batch is not None, self.due],
            "memory": self.memory.export(),
            "quiet": [self.quiet, self.stale, list(self.quiet_tools)],
            "turn": [getattr(self, name) for name in _TURN],
            "failing_tools": list(self.failing_tools),
            "error": [None if self.error[0] is None else key_text(self.error[0]), self.error[1]],
            **self.replies.export(),
        }

    def _exported_calls(self) -> list[list[object]]:
        """The history as exported: each call's row made once, when the call is final (the
        graph guards export the history at every step); the rows of calls that left it go."""
        known, rows = self.rows or {}, {}
        exported = []
        for call in self.calls:
            row = known.get(call) or call.exported()
            if call.kind != "pending":
                rows[call] = row
            exported.append(row)
        self.rows = rows
        return exported

    def restore_state(self, state: Mapping[str, Any], *, version: int = 5) -> None:
        """Take an exported state (``version`` 4: the previous release's); raises one of
        :data:`StateError` (and changes nothing) when it is malformed."""
        reader = _call_from_state if version == 5 else _call_from_v4
        calls = [reader(item) for item in items_of(state["calls"])]
        if calls and calls[0].batch is _JOINED:
            # its answer's first call is out of the history: it stays joined to that answer
            calls[0].batch = Call("", "", None)
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

        else:  # v4 kept the digests of what it had seen: they are seen again from here on
            memory = Seen()
            for number in items_of(state["infos"]):
                memory.check(hash_from_state(number))
            (count, tools), stale = items_of(state["quiet"]), 0
            failing_tools = ()
        quiet, stale = count_of(count), count_of(stale)
        quiet_tools = tuple(text_of(tool) for tool in items_of(tools))
        turn = _turn_from_state(state["turn"])
        replies = Replies.restore(state, version=version)
        key, streak = items_of(state["error"])
        error = (None if key is None else key_of(text_of(key)), count_of(streak))
        self.clear()
        self.calls.extend(calls)
        self.sigs.extend(call.sig for call in calls)
        self._trim()
        self.replies = replies
        self.seen, self.turns, self.due = seen, turns, count_of(due)
        self.batch = calls[-1].batch if started and calls else None
        self.memory, self.quiet, self.stale, self.quiet_tools = memory, quiet, stale, quiet_tools
        self.failing_tools, self.error = failing_tools, error
        for name, value in zip(_TURN, turn, strict=True):
            setattr(self, name, value)


def successes_cannot_stop(state: Mapping[str, Any], limits: Limits) -> bool:
    """Whether, in an exported state, no successful result of the calls awaiting one can stop
    the run: none of them is a repeat decided on its result (SPEC §11 N1), and neither the
    streak of answers that brought nothing new nor that of answers that brought back only what
    the run had seen can reach its threshold in ``limits`` with them (R6, R8, §13 R12).
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
    return not limits.no_new_info or (
        count + pending < limits.no_new_info and stale + pending < limits.stale
    )


# --- reading an exported state ------------------------------------------------------------------

_KINDS = frozenset(get_args(OutcomeKind))
_JOINED = Call("", "", None)
"""The mark of a restored call that joined the answer of the call before it."""


def _turn_from_state(item: object) -> tuple[object, ...]:
    """The current turn's fields (:data:`_TURN`) of a state; 0.1's has no ``failing_new``."""
    items = items_of(item)
    if len(items) == len(_TURN) - 1:
        items = [*items, 0]  # no failure of 0.1's streak counted as new
    expected, results, worked, brought, judged, answered, failing, failing_new = items
    return (
        None if expected is None else count_of(expected),
        count_of(results),
        flag_of(worked),
        count_of(brought),
        flag_of(judged),
        flag_of(answered),
        count_of(failing),
        min(count_of(failing_new), count_of(failing)),
    )


def _call_from_state(item: object) -> Call:
    name, sig, outcome, kind, call_id, changed, news, tokens, joined, brought = items_of(item)
    call = _call((name, sig, outcome, kind, call_id, changed, tokens, joined))
    call.news = flag_of(news)
    call.brought = count_of(brought) & (NEW | NOTHING | WORK | STALE | LINES | MOVED | ACK)
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
