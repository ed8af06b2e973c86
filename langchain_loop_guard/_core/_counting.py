"""Progress-aware counting of repeats (SPEC §3, §11-§13): how many earlier calls count as
repeats of the one being decided, back to the first whose outcome differs or that brought
something new. The rules of :mod:`._rules` count with these.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langchain_loop_guard._core._novelty import LINES, NEW, WORK
from langchain_loop_guard._core._view import Call, Key

__all__ = ["alike_results", "chain", "repeats_pair", "same", "stale_chain"]


def same(a: Key | None, b: Key | None) -> bool:
    """Outcomes equal, an unknown one (pending, blocked) equal to any."""
    return a is None or b is None or a == b


def chain(
    sig: Key, earlier: Iterable[Call], aware: bool, ref: Key | None = None, *, paced: bool = False
) -> int:
    """How many of the ``earlier`` calls (newest first) count as repeats of ``sig``: with
    progress awareness, back to the first whose outcome differs from the newer one's (SPEC §3,
    §11 N4). ``ref`` is the outcome of the call being decided, when known. With ``paced``, also
    back to the first made after a different call brought something new: a call whose
    neighbours bring new information is pacing, not a loop (§13 N10)."""
    count = 0
    for call in earlier:
        if call.sig != sig:
            continue
        if aware and call.outcome is not None:
            if ref is not None and call.outcome != ref:
                break
            ref = call.outcome
        count += 1
        if paced and call.news:
            break
    return count


def stale_chain(cur: Call, earlier: Iterable[Call]) -> int:
    """How many of the ``earlier`` occurrences of ``cur``'s signature (newest first) brought
    nothing new, back to (and counting) the first that did, or the first made after a
    different call brought something new or did work; an answer counts once (SPEC §12 N6,
    §13 N11, R15). A change applied again brings nothing new, whatever its output shows: an
    edit that re-inserts its block shifts the view, and that is no progress (§11 R1)."""
    count, sig, batch, ref = 0, cur.sig, cur.batch, None
    for call in earlier:
        if call.sig != sig or call.batch == batch:
            continue
        if call.kind in ("ok", "error"):
            if ref is not None and not alike_results(call, ref):
                break
            ref = call
        count += 1
        batch = call.batch
        if call.changed or call.brought & (NEW | WORK) == NEW:
            break  # the first that brought something new (a change re-applied brings nothing)
    return count


def alike_results(a: Call, b: Call) -> bool:
    """Two results of one kind, and, unless both were long and read by their lines, one
    outcome: two different short results are never nearly the same (§12 N7, §13 N4)."""
    if a.kind != b.kind:
        return False
    return bool(a.brought & b.brought & LINES) or a.outcome == b.outcome


def repeats_pair(seq: Sequence[Call], index: int, window: int) -> bool:
    """Whether ``seq[index]`` repeats the latest (call, outcome) pair of its signature among
    the ``window`` calls before it."""
    call = seq[index]
    sig = call.sig
    for position in range(index - 1, max(-1, index - window - 1), -1):
        earlier = seq[position]
        if earlier.sig == sig:
            return same(earlier.outcome, call.outcome)
    return False
