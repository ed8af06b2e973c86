"""What paces a repeat (SPEC §14): a wait for an act to land, and a scroll through a view.

The same read polled right after an act succeeded waits for the act to land (a rollout
polled after ``helm upgrade`` where ``sleep`` is forbidden); a scroll moves a view its answer
does not show. The repeat rules give both more room before they stop the run.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from langchain_loop_guard._core._novelty import WORK
from langchain_loop_guard._core._view import Call

__all__ = ["moves", "waits_for_an_act"]


def waits_for_an_act(seq: Sequence[Call], index: int) -> bool:
    """Whether the same read, again and again, began right after an act succeeded: a wait
    for the act to land (a rollout polled after ``helm upgrade`` in a sandbox without
    ``sleep``), which gets twice as many polls and one more (SPEC §14: an effect the run has
    not had is progress). An act again is the same effect again (R17): never a wait."""
    cur = seq[index]
    before = seq[index - 1] if index else None
    if before is None or before.sig != cur.sig or before.batch is cur.batch:
        return False  # polls in a row, an answer each: a re-run after each edit is no wait
    if (cur.brought | before.brought) & WORK:
        return False  # the call itself acts (what its result said, as a replay knows it too)
    for position in range(index - 1, -1, -1):
        call = seq[position]
        if call.sig != cur.sig:
            return call.kind == "ok" and bool(call.brought & WORK)
    return False


_PAGING = frozenset(["down", "up", "next", "previous", "prev"])
"""Words that, with ``page``, name a step through a view (``page_down``, ``next_page``)."""
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


@lru_cache(maxsize=256)
def moves(name: str) -> bool:
    """Whether a tool's name says it moves a view by a step (``scroll``, ``scroll_down``,
    ``page_down``, ``next_page``; not ``search_page``); a run calls few tools, often."""
    words = {word.lower() for word in _WORD.findall(name)}
    return "scroll" in words or ("page" in words and not words.isdisjoint(_PAGING))
