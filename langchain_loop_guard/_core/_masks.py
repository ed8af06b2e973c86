"""What changes in a tool's output without meaning progress, masked (SPEC §3, §11 R2).

:func:`masked` turns a result's text into the bytes its outcome digest is taken of. It runs on
every tool result, so a regular expression is tried only where a C-speed search found a place
it can match, never at every byte.
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "DEFAULT_VOLATILE_FIELDS",
    "HEAD",
    "LARGE",
    "OUTCOME_HASH",
    "TAIL",
    "VolatileFields",
    "collapse",
    "masked",
]

OUTCOME_HASH = hashlib.blake2b(digest_size=8, person=b"ok")
"""The outcome domain's fresh hasher (copied, never updated): a successful result's key is
its digest of :func:`masked` text, and a large text's middle is kept as one."""

LARGE = 32 * 1024
"""Texts longer than this (characters) are masked in their first and last parts only."""
HEAD, TAIL = 4 * 1024, 2 * 1024
"""The parts of a larger text read as they are: its first and last characters."""
_DIGITS_AND_SPACE = b"0123456789 \t\r\n\x0b\x0c"

# The masks that start with a digit are searched in a *shape* of the text where every digit
# is ``\x00`` (and a real NUL ``\x01``): a pattern that starts with a literal byte is searched
# at C speed, and only the few places that start with a digit are tried; the positions found
# then mask the text itself. UUIDs, which may start with a letter, are found from their first
# dash, and only in a text with dashes enough. Word boundaries are spelled out: a word byte is
# an ASCII letter, digit or ``_``, or any byte of a non-ASCII character.

_MASK = b"<#>"
_TEXT_WORD = rb"0-9A-Za-z_\x80-\xff"  # a word byte of the text
_SHAPE_WORD = _TEXT_WORD + rb"\x00"  # and of its shape
_X, _ZERO = ord("x"), ord("0")
_DIGIT_SHAPE = bytes.maketrans(b"0123456789\x00", b"\x00" * 10 + b"\x01")
_UUIDTAIL = re.compile(
    # from the first dash; the match starts eight hex digits earlier (a word starts there)
    rb"-(?<=[0-9a-fA-F]{8}-)(?<![%(w)b][0-9a-fA-F]{8}-)"
    rb"[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![%(w)b])" % {b"w": _TEXT_WORD}
)
_UNITS = rb"(?:[nu]s|\xc2\xb5s|ms|s(?:ecs?|econds?)?|m(?:ins?|inutes?)?|h(?:rs?|ours?)?|d(?:ays?)?)"
"""Units of time, whole or in a fraction: nanoseconds to days."""
_VOLATILE = re.compile(
    # Tried only at a digit-run's first digit (the first look-behind), so a run costs one try;
    # possessive quantifiers (``*+``) never give a run back, so a try fails in a few steps.
    rb"""
    \x00(?<!\x00\x00)  # every mask starts with a digit run, and a literal is searched fast
    (?:
        \x00{5,}+  # a number of six or more digits, anywhere
      | (?<![%(w)b]\x00)  # the others where a word starts
        (?:
            x[\x00a-fA-F]++  # a hex pointer, if that digit is a 0 (checked on each match)
          | (?=\x00*+(?:[-:.nu\xc2mshd]|\ [nu\xc2mshd]))  # a mask can follow: a quick no
            (?:
                \x00{3}-\x00\x00-\x00\x00  # a date, maybe with a time
                (?:[T\ ]\x00\x00:\x00\x00(?::\x00\x00(?:[.,]\x00++)?)?
                   (?:Z|[+-]\x00\x00:?\x00\x00)?)?
              | \x00?:\x00\x00:\x00\x00(?:[.,]\x00++)?  # a time of day
              | \x00*+\.\x00++\ ?  # a measured duration: a fraction of any unit
                (?:[nu]s|\xc2\xb5s|ms|m(?:in(?:ute)?s?)?|s(?:ecs?|econds?)?|h(?:ours?)?)
              | \x00*+\ ?%(u)b(?:\x00++(?:ms|s|m|h))*+  # or whole units: a duration or
                # an age (``2s``, ``45s``, ``3m20s``, ``5 minutes``): time passing is no
                # progress (SPEC 13, which withdrew 12 N7's ages)
            )
            (?![%(w)b])  # and ends where the word does
        )
    )
    """
    % {b"w": _SHAPE_WORD, b"u": _UNITS},
    re.VERBOSE,
)

# Ids that carry no progress (SPEC §11 R2): hex runs of eight or more characters with a digit,
# ids with a vendor's prefix, bash's ``line N:``.
_VENDORS: tuple[bytes, ...] = tuple(
    b"req msg toolu call chatcmpl run lc resp evt sess conv file batch job".split()
)
_VENDOR_SIZES = tuple(sorted({len(v) for v in _VENDORS}))
# A vendor prefix is found from its separator, in a copy of the text where ``-`` is ``_``: a
# search that starts with a literal skips to each ``_`` at C speed and looks behind it (a
# character class or an alternation of the prefixes would be tried at every position). Whether
# an id with a digit follows is then read once for each run of letters and ``_``, never again
# from each separator in it (a long run of ``_`` would be read again and again).
_SEPARATOR = bytes.maketrans(b"-", b"_")
_LETTERS = re.compile(rb"[A-Za-z_]*+")
_DIGIT = frozenset(b"0123456789")
_VENDOR = re.compile(
    rb"_(?:%b)"
    % b"|".join(
        rb"(?<=(?:%b)_)" % b"|".join(v for v in _VENDORS if len(v) == size)
        for size in _VENDOR_SIZES
    )
)
_HEX_SHAPE = bytes.maketrans(b"0123456789abcdefABCDEF\x01", b"\x01" * 22 + b"\x02")
_HEX_RUN = b"\x01" * 8  # in the hex shape: eight hex characters, found at C speed
_HEX_RUN_END = re.compile(b"\x01*")
_LINE = b"line "
_IDS = re.compile(
    rb"(?<![%(w)b-])(?:"
    rb"(?:%(v)b)[_-]"
    rb"(?=[0-9A-Za-z_-]*[0-9])[0-9A-Za-z_-]{6,}"
    rb"|(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}"
    rb")(?![%(w)b])"
    rb"|(?<=line )[0-9]+(?=:)" % {b"w": _TEXT_WORD, b"v": b"|".join(_VENDORS)}
)


def _id_spans(data: bytes) -> list[tuple[int, int]]:
    """Where :data:`_IDS` matches in ``data``, as ``_IDS.sub`` would replace them: tried only
    where a C-speed search found a candidate (a hex run, a vendor prefix, ``line ``), since
    its look-behind would make a search try every byte."""
    starts: list[int] = []
    hex_shape = data.translate(_HEX_SHAPE)
    at = hex_shape.find(_HEX_RUN)
    while at >= 0:  # each found at its first character: the previous run ended before
        starts.append(at)
        at = hex_shape.find(_HEX_RUN, _HEX_RUN_END.match(hex_shape, at).end())  # type: ignore[union-attr]
    at = data.find(_LINE)
    while at >= 0:
        starts.append(at + len(_LINE))
        at = data.find(_LINE, at + 1)
    marked, search, letters = data.translate(_SEPARATOR), _VENDOR.search, _LETTERS.match
    vendor, run_end, digit_follows = search(marked), -1, False
    while vendor is not None:
        separator = vendor.start()
        if separator >= run_end:  # the first separator of a run of letters and ``_``
            run_end = letters(marked, separator + 1).end()  # type: ignore[union-attr]
            digit_follows = run_end < len(marked) and marked[run_end] in _DIGIT
        if not digit_follows:  # nor does one after any separator of the run
            vendor = search(marked, run_end)
            continue
        starts.extend(separator - size for size in _VENDOR_SIZES if separator >= size)
        vendor = search(marked, separator + 1)
    spans: list[tuple[int, int]] = []
    if not starts:
        return spans
    end, match = 0, _IDS.match
    for start in sorted(set(starts)):
        if start >= end and (found_id := match(data, start)) is not None:
            spans.append(found_id.span())
            end = found_id.end()
    return spans


def _splice(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """``data`` with each of the ordered, disjoint ``spans`` replaced by the mask."""
    if len(spans) == 1:  # the common case, in one expression
        ((start, end),) = spans
        return data[:start] + _MASK + data[end:]
    pieces, previous = [], 0
    for start, end in spans:
        pieces.append(data[previous:start])
        previous = end
    pieces.append(data[previous:])
    return _MASK.join(pieces)


# --- volatile fields (SPEC §13 R11) -------------------------------------------------------------

DEFAULT_VOLATILE_FIELDS: tuple[str, ...] = (
    # latencies and durations: time passing is no progress
    "took", "*_ms", "*Ms", "*_time", "*Time", "time", "timestamp", "elapsed*", "latency*",
    "duration*",
    # moments: when something was created, updated, checked
    "*_at", "*At",
    # ids of the request, not of what it found
    "request_id", "requestId", "trace_id", "traceId", "span_id", "spanId",
    # paging cursors and tokens
    "*cursor", "*Cursor", "*page_token", "*PageToken", "pageToken", "etag",
)  # fmt: skip
"""Field names (``*`` matches any run of letters, digits and ``_``) whose values are noise in
every tool's results; ``volatile_fields`` adds more, for all tools or for one."""

_VALUE = (
    rb"""(?:"(?:[^"\\\n]|\\.)*+"|'[^'\n]*+'|[^\s,;}\]"']++)"""  # a quoted string, or a bare token
)
# A quoted key and its value, from a quote: a search skips to each quote at C speed; every
# quantifier is possessive, so a try reads the key and the value once and never gives back.
_KEYED = re.compile(rb"""(["'])([A-Za-z0-9_\-]++)\1\s*+:\s*+(%b)""" % _VALUE)
_MAX_PATTERN = 64  # names in one regular expression (and literal parts searched for, each)


class _Glob:
    """A field name with ``*`` (any run of letters, digits and ``_``), matched without a
    regular expression: a run of ``*`` in a regular expression backtracks (``*_*_*`` takes a
    time that grows with a power of the key's length), this never does.

    A ``*`` never matches ``-``, so a name's ``-`` stand where the key's do, and each part
    between them is matched alone: its first and last literal parts at the ends, the others
    each where it is found first (the earliest place leaves the most room for the rest), so a
    match takes one pass over the key whatever the pattern.
    """

    __slots__ = ("_parts",)

    def __init__(self, name: bytes) -> None:
        self._parts = tuple(tuple(part.split(b"*")) for part in name.split(b"-"))

    def matches(self, key: bytes) -> bool:
        pieces = key.split(b"-")
        if len(pieces) != len(self._parts):
            return False
        return all(_glob_match(seg, piece) for seg, piece in zip(self._parts, pieces, strict=True))


def _glob_match(segments: tuple[bytes, ...], word: bytes) -> bool:
    """Whether ``word`` is ``segments`` joined by runs of any bytes (``word`` has no ``-``)."""
    if len(segments) == 1:
        return word == segments[0]
    first, *middle, last = segments
    if len(word) < len(first) + len(last) or not word.startswith(first):
        return False
    if not word.endswith(last):
        return False
    at, stop = len(first), len(word) - len(last)
    for segment in middle:
        found = word.find(segment, at, stop)
        if found < 0:
            return False
        at = found + len(segment)
    return True


class VolatileFields:
    """Fields whose values change without meaning progress (a latency, a request id, a paging
    cursor), masked in a result's text wherever the field is written as a quoted key with a
    scalar value: JSON (``"took_ms": 12``) or a Python ``repr`` (``'took_ms': 12``); a dict
    result is JSON by then. (A timestamp or duration is masked wherever it stands anyway.)

    A search for the fields' longest literal parts, at C speed, decides whether the keys are
    looked at at all: most results name none of them. Names with at most one ``*`` (the
    built-in ones) are then matched by one regular expression, in a time linear in the text
    (one ``*`` backtracks over one run of the key at most); a name with several ``*``, and
    every name beyond the first 64, are looked up key by key (:class:`_KeyLookup`).
    """

    __slots__ = ("_hints", "_lookup", "_pattern")

    def __init__(self, names: tuple[str, ...]) -> None:
        encoded = sorted({name.encode() for name in names})
        simple = [name for name in encoded if name.count(b"*") <= 1]
        if len(simple) > _MAX_PATTERN:
            simple = []  # many names: a set looks each key up, an alternation would try each
        looked_up = sorted(set(encoded).difference(simple))
        self._pattern: re.Pattern[bytes] | None = None
        if simple:
            alternatives = b"|".join(
                re.escape(name).replace(rb"\*", rb"[A-Za-z0-9_]*") for name in simple
            )
            # from a quote: a search skips to each quote at C speed, and tries the names there
            self._pattern = re.compile(rb"""(["'])(?:%b)\1\s*:\s*(%b)""" % (alternatives, _VALUE))
        self._lookup = _KeyLookup(looked_up) if looked_up else None
        # the longest literal part of each name, without those holding another (``time`` is
        # in every text that holds ``timestamp``); with many names, no search for each
        parts = {max(name.split(b"*"), key=len) for name in encoded} - {b""}
        self._hints: tuple[bytes, ...] | None = None
        if len(parts) <= _MAX_PATTERN:
            self._hints = tuple(
                sorted(part for part in parts if not any(o != part and o in part for o in parts))
            )

    def mask(self, data: bytes) -> bytes:
        """``data`` with the value of each volatile field replaced by the mask: in a text with
        quoted keys (JSON, a Python ``repr``) that names one of the fields."""
        if b'":' not in data and b"':" not in data:
            return data  # no quoted key: most results, told at C speed
        if self._hints is not None and not any(hint in data for hint in self._hints):
            return data
        if self._pattern is not None:
            data = self._pattern.sub(_keep_field, data)
        if self._lookup is not None:
            data = self._lookup.mask(data)
        return data


def _keep_field(found: re.Match[bytes]) -> bytes:
    """The field's name and separator, its value masked."""
    return found.group(0)[: found.start(2) - found.start(0)] + _MASK


class _KeyLookup:
    """Volatile fields looked up key by key: each quoted key of a text is found once and
    looked up, among the names without ``*`` in a set, among the others by their first and
    last literal parts, then by :class:`_Glob`. Building and masking take a time linear in the
    names and in the text, whatever the names."""

    __slots__ = ("_by_first", "_by_last", "_firsts", "_inner", "_lasts", "_literal")

    def __init__(self, names: list[bytes]) -> None:
        self._literal = frozenset(name for name in names if b"*" not in name)
        wild = [name for name in names if b"*" in name]
        # the names with ``*`` by their first literal part, else by their last: a key that
        # starts (ends) with none of them is none of those names, told at C speed
        first = [name for name in wild if not name.startswith(b"*")]
        last = [name for name in wild if name.startswith(b"*") and not name.endswith(b"*")]
        inner = [name for name in wild if name.startswith(b"*") and name.endswith(b"*")]
        self._firsts = tuple(name.split(b"*")[0] for name in first)
        self._lasts = tuple(name.split(b"*")[-1] for name in last)
        self._by_first = tuple(_Glob(name) for name in first)
        self._by_last = tuple(_Glob(name) for name in last)
        self._inner = tuple(_Glob(name) for name in inner)

    def mask(self, data: bytes) -> bytes:
        """``data`` with the value of each of the fields replaced by the mask."""
        pieces: list[bytes] = []
        kept, search = 0, _KEYED.search
        found = search(data)
        while found is not None:
            if self._names(found.group(2)):
                pieces.append(data[kept : found.start(3)])
                kept = found.end()
                found = search(data, kept)
            else:  # from its value: a try at the key's closing quote would fail (a key char
                # must follow a quote), and the value may hold quoted keys of its own
                found = search(data, found.start(3))
        if not pieces:
            return data
        pieces.append(data[kept:])
        return _MASK.join(pieces)

    def _names(self, key: bytes) -> bool:
        """Whether ``key`` is one of the fields."""
        if key in self._literal:
            return True
        if key.startswith(self._firsts) and any(glob.matches(key) for glob in self._by_first):
            return True
        if key.endswith(self._lasts) and any(glob.matches(key) for glob in self._by_last):
            return True
        return any(glob.matches(key) for glob in self._inner)


def masked(text: str, *, digits: bool, volatile: VolatileFields | None = None) -> bytes:
    """``text`` as UTF-8 with whitespace collapsed and the volatile parts masked (SPEC §3):
    durations, timestamps, UUIDs, hex pointers, numbers of six or more digits, hex runs, prefixed
    ids (``req_…``, ``toolu_…``) and bash's ``line N:``; with ``digits`` false, other digit runs
    as ``#``.
    A text longer than :data:`LARGE` is masked in its first and last parts; in between only
    digits and whitespace are left out, so the time stays near a plain digest's.
    """
    if len(text) > LARGE:
        hasher = OUTCOME_HASH.copy()
        hasher.update(
            text[HEAD:-TAIL].encode("utf-8", "surrogatepass").translate(None, _DIGITS_AND_SPACE)
        )
        return b"".join(
            (
                masked(text[:HEAD], digits=digits, volatile=volatile),
                b"\x00",
                hasher.hexdigest().encode(),
                b"\x00",
                masked(text[-TAIL:], digits=digits, volatile=volatile),
            )
        )
    data = collapse(text).encode("utf-8", "surrogatepass")
    if volatile is not None:
        data = volatile.mask(data)
    if data.count(b"-") >= 4:
        uuids = [(found.start() - 8, found.end()) for found in _UUIDTAIL.finditer(data)]
        if uuids:
            data = _splice(data, uuids)
    ids = _id_spans(data)
    if ids:
        data = _splice(data, ids)
    shape = data.translate(_DIGIT_SHAPE)
    spans: list[tuple[int, int]] = []
    search = _VOLATILE.search
    found = search(shape)
    while found is not None:
        start, end = found.span()
        if shape[start + 1] == _X and data[start] != _ZERO:  # 1x5 is no pointer
            found = search(shape, start + 1)
            continue
        spans.append((start, end))
        found = search(shape, end)
    if digits:
        return _splice(data, spans) if spans else data
    if spans:
        shape = _splice(shape, spans)
    while b"\x00\x00" in shape:  # each digit run as one ``#`` (runs left are short)
        shape = shape.replace(b"\x00\x00", b"\x00")
    return shape.replace(b"\x00", b"#")


def collapse(text: str) -> str:
    """Whitespace runs as one space, trimmed (``str.split`` is what ``\\s+`` means, faster)."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text  # its only whitespace is single inner spaces: nothing to collapse
    return " ".join(text.split())
