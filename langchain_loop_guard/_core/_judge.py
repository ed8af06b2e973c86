"""What a run's events decide, from their digests (:class:`Judge`).

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_loop_guard._core._reporting import RunRecord
from langchain_loop_guard._core._rules import (
    ANSWER_CHECKS,
    CALL_CHECKS,
    CHANGED,
    FAILED,
    FAILING,
    NEW_CALL_CHECKS,
    QUIET,
    REPLY,
    RESULT_CHECKS,
    TURN_CHECKS,
)
from langchain_loop_guard._core._verdict import Verdict
from langchain_loop_guard._core._view import Call, Key, RunView

if TYPE_CHECKING:
    from langchain_loop_guard._core._config import LoopGuardConfig

__all__ = ["Judge"]


class Judge:
    """The decisions of one run on its events' digests (SPEC §2, §11-§13): each event goes
    into the run's :class:`RunView`, the rules its facts call for read the view, and the first
    detection goes to the run's :class:`RunRecord`, which makes it a verdict in the mode.

    A :class:`~._detector.LoopDetector` owns one: it digests what it is given (or takes the
    digests an integration made, or a trace recorded), and gives the judge its configuration
    (:meth:`configure`) before the first event and whenever it changes.
    """

    __slots__ = ("aware", "ignore", "record", "view")

    ignore: frozenset[str]
    aware: bool

    def __init__(self, view: RunView, record: RunRecord) -> None:
        self.view = view
        self.record = record

    def configure(self, config: LoopGuardConfig) -> None:
        """Read what every event needs of ``config``, once: the tools never counted
        (:attr:`ignore`) and progress awareness (:attr:`aware`)."""
        self.ignore = frozenset(config.ignore_tools)
        self.aware = config.progress_aware

    def turn_start(self) -> Verdict:
        """A model call begins; a tripped run is aborted."""
        record = self.record
        if record.tripped is not None:
            return record.still_tripped("abort")
        view = self.view
        view.start_turn()
        facts = (QUIET if view.quiet_grew else 0) | (FAILING if view.failing_grew else 0)
        for check in TURN_CHECKS[facts]:
            found = check(view)
            if found is not None:
                return record.report(found, "abort")
        return record.soft()

    def tool_call(
        self, name: str, sig: Key, call_id: str | None, tokens: frozenset[int] | None = None
    ) -> Verdict:
        """A call of ``name`` with its signature key (and its argument words, for its result);
        a call of a tripped run is blocked, and kept as such."""
        ignored = name in self.ignore
        view, record = self.view, self.record
        if record.tripped is not None:
            if not ignored:
                call = Call(name, sig, call_id)
                call.kind = "blocked"
                view.add_call(call)
            return record.still_tripped("block", tool=name)
        if ignored:
            return record.soft()
        call = Call(name, sig, call_id, tokens)
        checks = CALL_CHECKS if view.add_call(call) else NEW_CALL_CHECKS
        seq, sigs = view.calls, view.sigs  # read, never changed, by the rules
        for check in checks:
            found = check(view, seq, sigs)
            if found is not None:
                call.changed = False  # decided on the call: its result is not judged again
                verdict = record.report(found, "block")
                if verdict.action == "block":
                    call.kind = "blocked"
                    call.tokens = None
                return verdict
        return record.soft()

    def tool_result(
        self,
        call: Call | None,
        name: str,
        outcome: Key,
        failed: bool,
        call_id: str | None,
        *,
        near: str | None,
        info: str | None,
    ) -> Verdict:
        """A result of ``name`` with its key, line sketch and information digest; ``call`` is
        the call it belongs to (:meth:`RunView.find`)."""
        record = self.record
        if name in self.ignore:
            return record.soft()
        if call is not None and call.kind != "pending":
            return record.soft()  # a second result, or the result of a blocked call
        view = self.view
        call = view.add_result(call, name, outcome, failed, call_id=call_id, near=near, info=info)
        if record.tripped is None:
            facts = (FAILED if failed else 0) | (CHANGED if call and call.changed else 0)
            facts |= (QUIET if view.quiet_grew else 0) | (FAILING if view.failing_grew else 0)
            for check in RESULT_CHECKS[facts]:
                found = check(view, call, name)
                if found is not None:
                    return record.report(found, "abort")
        return record.soft()

    def assistant_message(
        self,
        key: str | None,
        sketch: str | None,
        calls: int,
        in_context: bool,
        *,
        talk: bool = False,
    ) -> Verdict:
        """A model answer: its key and word sketch (``None``: no text, or not sketched), how
        many calls it makes, whether the model's input held the run's previous answer, and
        whether an answer without calls was talk (SPEC §14 N19)."""
        view, record = self.view, self.record
        view.add_answer(calls=calls, in_context=in_context, talk=talk)
        reply = key is not None and not (self.aware and calls)
        if reply:
            view.add_reply(key or "", sketch, in_context=in_context)
        if record.tripped is None:
            facts = (REPLY if reply else 0) | (FAILING if view.failing_grew else 0)
            # a streak of replies is reported on the reply that makes it (REPLY)
            for check in ANSWER_CHECKS[facts | (QUIET if view.quiet_grew else 0)]:
                found = check(view)
                if found is not None:
                    return record.report(found, "abort")
        return record.soft()
