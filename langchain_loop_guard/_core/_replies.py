"""What a run remembers of the model's replies (:class:`Replies`): the streak of identical
replies, the recent replies for cycles of nearly identical ones, and the streak of replies each
nearly the one before.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_loop_guard._core._signature import near_reply, reworded_reply
from langchain_loop_guard._core._state_data import count_of, items_of, optional_text_of, text_of

__all__ = ["Replies", "Reply", "alike"]

Reply = tuple[str, str | None]
"""A reply as the run keeps it: its key, and its word sketch (``None``: not sketched)."""

TOOL_NEWS, HUMAN_NEWS, ASKED_AGAIN, LOOKED_UP = 1, 2, 4, 8
"""What came since the last reply (bits of :attr:`Replies.informed`): news from a tool, a
human message, whether the latest human message is the one the last reply answered, and
whether a tool call succeeded (news or not)."""


class Replies:
    """The replies of a run (SPEC §2, §12 R9, §13 N12, R14).

    ``streak`` is the last reply's key and how many identical replies in a row end with it;
    ``recent`` the last few replies, newest last, for cycles of nearly identical ones;
    ``reworded`` how many replies in a row were each nearly the one before, with nothing new
    between; ``informed`` whether something new came from a tool or a human since the last;
    ``asked`` the key of the human message the last reply answered, and ``question`` of the
    latest human message (``None``: unknown).
    """

    __slots__ = ("asked", "informed", "question", "recent", "reworded", "streak")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.streak: tuple[str | None, int] = (None, 0)
        self.recent: tuple[Reply, ...] = ()
        self.reworded = 0
        self.informed = 0
        self.asked: str | None = None
        self.question: str | None = None

    def keep(self, kept: int) -> None:
        """Keep only the last ``kept`` replies (at least the last one)."""
        kept = max(kept, 1)
        self.recent = self.recent[max(0, len(self.recent) - kept) :]

    def tool_result(self, *, news: bool, failed: bool) -> None:
        """A tool answered since the last reply: with ``news`` (something new, or work done),
        or, unless it ``failed``, a lookup (what it brought may be seen already)."""
        self.informed |= (TOOL_NEWS if news else 0) | (0 if failed else LOOKED_UP)

    def human_news(self, question: str | None = None) -> None:
        """A new human message came since the last reply; ``question`` is its key
        (:func:`~._signature.question_key`), when known."""
        self.informed |= HUMAN_NEWS
        if question is not None and question == self.asked:
            self.informed |= ASKED_AGAIN
        else:
            self.informed &= ~ASKED_AGAIN
        self.informed &= ~LOOKED_UP  # only a lookup made for this message answers it
        self.question = question

    def add(self, reply: Reply, *, in_context: bool, aware: bool, kept: int) -> None:
        """A reply. After something new from a tool (with progress awareness) or to a helper
        model's new input, every streak starts afresh, however alike the words (§13 N12); a
        human message ends only the streak of replies each nearly the last (the same reply to
        every message is R9's loop)."""
        informed, self.informed = self.informed, 0
        self.asked = self.question
        key = reply[0]
        last, count = self.streak
        fresh = bool(informed & TOOL_NEWS and aware) or not in_context
        previous = self.recent[-1] if self.recent else None
        again = informed & (ASKED_AGAIN | LOOKED_UP) == ASKED_AGAIN | LOOKED_UP
        if again and aware and previous is not None and alike(previous, reply):
            # the same question again, looked up again and answered as before: consistency
            # (SPEC §14 N18), the exchange the streaks hold already. Without a lookup, an
            # app's own note repeated inside a run reads the same: that is §12 R9's loop
            return
        self.streak = (key, 1 if fresh or key != last else count + 1)
        if (
            fresh
            or informed
            or previous is None
            or not alike(previous, reply, words=reworded_reply)
        ):
            self.reworded = 1
        else:
            self.reworded += 1
        if fresh:
            self.recent = ()
        kept = max(kept, 1)
        self.recent = (*self.recent[len(self.recent) + 1 - kept :], reply)

    # --- state -------------------------------------------------------------------------------

    def export(self) -> dict[str, Any]:
        """The replies as JSON data: keys and word sketches (hashes), never text."""
        return {
            "assistant": list(self.streak),
            "replies": [list(reply) for reply in self.recent],
            "reworded": [self.reworded, self.informed],
            "asked": [self.asked, self.question],
        }

    @classmethod
    def restore(cls, state: Any, *, version: int) -> Replies:
        """The replies of an exported state (version 4 kept no rewording streak); raises
        what the state readers raise when it is malformed."""
        replies = cls()
        key, count = items_of(state["assistant"])
        replies.streak = (optional_text_of(key), count_of(count))
        replies.recent = tuple(
            (text_of(reply_key), optional_text_of(sketch))
            for reply_key, sketch in map(items_of, items_of(state["replies"]))
        )
        if version >= 5:
            replies.reworded, replies.informed = map(count_of, items_of(state["reworded"]))
        asked = state.get("asked")  # an older state has none: no question is known
        if asked is not None:
            replies.asked, replies.question = map(optional_text_of, items_of(asked))
        return replies


def alike(a: Reply, b: Reply, *, words: Callable[[str, str], bool] = near_reply) -> bool:
    """Two replies the same, or alike by their word sketches: sharing nearly all their words
    (``near_reply``, §12 R9), or most of them (``reworded_reply``, §13 R14)."""
    return a[0] == b[0] or (a[1] is not None and b[1] is not None and words(a[1], b[1]))
