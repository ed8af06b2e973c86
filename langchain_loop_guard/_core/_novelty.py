"""What the run has seen, and what a result brought that it had not (SPEC §13).

v4 rests on one notion: a step makes progress when it brings information the run has not seen.
:class:`Seen` remembers, without any text, what the run's results said: the digest of each short
result (what it says once the call's own argument values are removed) and a sample of the lines
of each long one. It is a Bloom filter in two generations of fixed size, so its memory is the
same after ten events and after a million: when the newer generation is full, the older one is
dropped and the run forgets its oldest news (a false "seen" is rare, about one in a hundred).

The bits below say what a result brought; :class:`~._view.RunView` adds them up per model answer
and every signal reads them.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

__all__ = [
    "ACK",
    "LINES",
    "NEUTRAL",
    "NEW",
    "NOTHING",
    "STALE",
    "UNSEEN_FAILURE",
    "WORK",
    "Seen",
    "line_hashes",
    "number_of",
]

# What a result brought (bits), read by the no-new-information streak and the repeat rules:
NEW = 1
"""Something the run had not seen: a short output never seen, a long one with new lines."""
NOTHING = 2
"""A failure, an empty output, a search that found nothing."""
WORK = 4
"""A call that changed something (a write, ``mkdir``, ``cd``), whatever it printed (§12 N9)."""
STALE = 8
"""An output the run has seen already, brought back by a call it had not made (§13 R12)."""
NEUTRAL = 0
"""The same query asked again, its answer seen: the repeat rules' business, not novelty's."""
MOVED = 32
"""A long result with no new line (numbers aside) whose numbers moved: no news for a near
repeat (a counter that ticks, R15), but news enough that a call between two of them paces
them (a rollout's counts in an indented JSON view, N10)."""
ACK = 128
"""Not what it brought but what it was: an answer with no content (empty, or a short
acknowledgement): a wait, which a call whose neighbours bring news may be (SPEC §14 R19)."""
UNSEEN_FAILURE = 64
"""Not what a result brought but what a turn's failures did: one failed in a way the run had
not seen (a deliberate test's own error is information, SPEC §14 N15). Read by the failing
turns' count, never by the streak of answers that brought nothing new (an error is nothing
there, §12 R8)."""
LINES = 16
"""Not what it brought but how it was read: a long result, judged by its lines (the others
are judged whole, so two different short results are never "nearly" the same)."""

_NEW_LINES = 2
"""New lines a long result must bring to count as new (a line that changes, a ticking counter
or a rotating banner, does not: SPEC §13 R15, N11)."""

_SAMPLED = 0x1F  # the line hashes every result samples have none of these bits (_signature)
_REREAD = 4  # lines sampled by content, all seen, that make a long result a re-read
_BITS = 2048  # bits of one generation
_BYTES = _BITS // 8
_CAPACITY = 160  # items one generation takes before it becomes the older one (~1% false seen)
_MASK = _BITS - 1
_SPREAD = 0x9E3779B97F4A7C15  # an odd 64-bit multiplier that spreads CRCs over all bits


class Seen:
    """A bounded, text-free memory of what the run's results said (see the module)."""

    __slots__ = ("_count", "_new", "_old")

    def __init__(
        self, new: bytearray | None = None, old: bytearray | None = None, count: int = 0
    ) -> None:
        """An empty memory, or the generations and count a :meth:`restore` read."""
        self._new = bytearray(_BYTES) if new is None else new
        self._old = old
        self._count = count

    def clear(self) -> None:
        """Forget everything (a new run)."""
        self._new = bytearray(_BYTES)
        self._old = None
        self._count = 0

    def check(self, value: int) -> bool:
        """Whether ``value`` was seen; it is from now on."""
        return self.count_new((value,)) == 0

    def count_new(self, values: Iterable[int]) -> int:
        """How many of ``values`` were not seen; all of them are from now on. Each value sets
        three bits of the newer generation; a value is seen when all three are set in either
        (the bit work written out once, here: a long result brings up to 32 line hashes)."""
        unseen = 0
        new, old, count = self._new, self._old, self._count
        for value in values:
            mixed = (value * _SPREAD) & 0xFFFFFFFFFFFFFFFF
            a, b, c = mixed & _MASK, (mixed >> 21) & _MASK, (mixed >> 42) & _MASK
            ia, ib, ic = a >> 3, b >> 3, c >> 3
            ba, bb, bc = 1 << (a & 7), 1 << (b & 7), 1 << (c & 7)
            if new[ia] & ba and new[ib] & bb and new[ic] & bc:
                continue
            if old is not None and old[ia] & ba and old[ib] & bb and old[ic] & bc:
                continue
            unseen += 1
            if count >= _CAPACITY:  # the newer generation is full: it becomes the older
                old, new, count = new, bytearray(_BYTES), 0
                self._old, self._new = old, new
            new[ia] |= ba
            new[ib] |= bb
            new[ic] |= bc
            count += 1
        self._count = count
        return unseen

    def judge(
        self, info: str | None, near: str | None, outcome: int | str, *, again: bool, failed: bool
    ) -> int:
        """What a result brought, as the bits above, given what it says (``info``, of
        :func:`~._signature.result_digests`; ``None`` in an older trace, taken as new), the
        sample of its lines (``near``) and its outcome key; ``again``: the same call was made
        before in the history. A call that changes something did work, whatever it printed
        (SPEC §12 N9). It is seen from now on.
        """
        if failed:
            if info is not None and info[:1] == "x" and self.count_new(_gists(info)) == 2:
                return NOTHING | UNSEEN_FAILURE  # a failure the run had not seen (§14 N15)
            return NOTHING
        if info is None:
            return NEW
        if info[:1] == ".":
            return WORK | (self._said(info[1:], near, outcome, again) & (NEW | LINES))
        return self._said(info, near, outcome, again)

    def _said(self, info: str, near: str | None, outcome: int | str, again: bool) -> int:
        if not info:
            return NOTHING | ACK
        if info[0] == "!":  # a search that found nothing (asked again: the repeat rules')
            return NEUTRAL if again else NOTHING
        if near is not None:  # a long result (20 lines or more): are its lines new?
            hashes = line_hashes(near)
            sampled = [h for h in hashes if not h & _SAMPLED]
            new = self.count_new(sampled)
            others = self.count_new(h for h in hashes if h & _SAMPLED)
            # a result whose lines sampled by content were all seen re-reads what the run has
            # read (SPEC §14 R18: a filtered part of a listing); else new lines are news
            reread = len(sampled) >= _REREAD and not new
            if not reread and new + others >= min(_NEW_LINES, len(hashes)):
                return NEW | LINES
            seen = LINES
            if not self.check(number_of(outcome)):
                seen |= MOVED  # its numbers moved (time is masked: they are counts)
        else:
            whole = info in ("=", "+")  # an older trace's: the outcome is the information
            ack = ACK if info[0] == "=" else NEUTRAL
            if not self.check(number_of(outcome if whole else info)):
                return NEW | ack
            seen = ack
        if again:
            return seen  # seen again from the same call: the repeat rules' business
        if info[0] == "~":
            return seen | NOTHING  # a short answer about the arguments, seen before
        if info[0] == "=" and not seen & ~ACK:
            return seen  # a short acknowledgement seen before: no content to bring
        return seen | STALE

    # --- state -------------------------------------------------------------------------------

    def export(self) -> list[object]:
        """The memory as JSON data: two hex strings of bits (no text) and a count."""
        return [self._new.hex(), None if self._old is None else self._old.hex(), self._count]

    @classmethod
    def restore(cls, data: object) -> Seen:
        """The memory :meth:`export` wrote; raises ``TypeError`` or ``ValueError`` if it is
        malformed."""
        if not isinstance(data, list) or len(data) != 3:
            raise TypeError(data)
        new, old, count = data
        if type(count) is not int or not 0 <= count <= _CAPACITY:
            raise ValueError(count)
        return cls(_generation(new), None if old is None else _generation(old), count)


def _generation(value: object) -> bytearray:
    if not isinstance(value, str) or len(value) != 2 * _BYTES:
        raise ValueError(value)
    return bytearray.fromhex(value)


def number_of(value: int | str) -> int:
    """A digest as a 64-bit number (its last 16 hex digits), or any text's CRC."""
    if isinstance(value, int):
        return value  # the number of its 16 hex digits already
    try:
        return int(value[-16:], 16)
    except ValueError:
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))


def _gists(info: str) -> tuple[int, int]:
    """The two digests of a failure's information: its first line as it is and without the
    call's argument words (the same twice when it echoes none); a malformed one is seen."""
    try:
        whole = int(info[1:17], 16)
        return whole, int(info[17:33], 16) if len(info) >= 33 else whole + 1
    except ValueError:
        return 0, 0


def line_hashes(sketch: str) -> list[int]:
    """The line hashes of a result's line sketch (hex, 8 digits each); none if malformed."""
    try:
        return [int(sketch[i : i + 8], 16) for i in range(0, len(sketch) - 7, 8)]
    except ValueError:
        return []
