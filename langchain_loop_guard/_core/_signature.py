"""Deterministic digests of tool outcomes, errors and assistant responses, and the words of calls.

Nothing here raises, and only short digests leave this module, never the content itself. The
canonical serialization of values (and a call's signature) is in :mod:`._canonical`.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from langchain_loop_guard._core._canonical import DIGEST_SIZE, PLAIN_HASH, canonical
from langchain_loop_guard._core._effects import changes_something
from langchain_loop_guard._core._masks import (
    HEAD,
    LARGE,
    OUTCOME_HASH,
    TAIL,
    VolatileFields,
    collapse,
    masked,
)

__all__ = [
    "EFFECT",
    "NEAR_LINES",
    "SAMPLED",
    "Outcome",
    "arg_tokens",
    "assistant_key",
    "changes_something",
    "error_key",
    "error_shaped",
    "error_text",
    "near_reply",
    "normalize_outcome",
    "outcome",
    "outcome_digest",
    "question_key",
    "reply_sketch",
    "reworded_reply",
    "talk",
]

# One BLAKE2b per domain, personalized by its tag, so domains never collide; each digest copies
# the domain's fresh hasher, which is cheaper than building one.
_ASSISTANT_HASH = hashlib.blake2b(digest_size=DIGEST_SIZE, person=b"assistant")
_INFO_HASH = hashlib.blake2b(digest_size=DIGEST_SIZE, person=b"info")
_QUESTION_HASH = hashlib.blake2b(digest_size=8, person=b"question")


def _tagged(domain: hashlib.blake2b, data: bytes) -> str:
    """The digest of ``data`` in ``domain`` (one of the fresh hashers above)."""
    hasher = domain.copy()
    hasher.update(data)
    return hasher.hexdigest()


# --- outcomes, errors, assistant responses -----------------------------------------------------


def _text_of(value: object) -> str:
    """A string as it is, a message's string content, anything else as canonical JSON."""
    if isinstance(value, str):
        return value
    try:
        content = getattr(value, "content", None)  # a tool message, duck-typed
    except Exception:  # noqa: BLE001 - a hostile __getattr__
        content = None
    if isinstance(content, str):
        return content
    return canonical(value if content is None else content)


def normalize_outcome(output: object) -> str:
    """Outcome text with what changes without meaning progress masked (SPEC §3).

    Durations, timestamps, UUIDs, hex pointers and numbers of six or more digits are masked;
    short numbers are kept (``progress 45%`` is not ``progress 50%``). Whitespace is collapsed.
    """
    return masked(_text_of(output), digits=True).decode("utf-8", "surrogatepass")


def outcome_digest(output: object) -> str:
    """Digest of a successful result's normalized text."""
    return _tagged(OUTCOME_HASH, masked(_text_of(output), digits=True))


def error_text(error: object) -> str:
    """``"Type: message"`` of an exception, the text of anything else; never raises."""
    if isinstance(error, BaseException):
        try:
            message = str(error)
        except Exception:  # noqa: BLE001 - a hostile __str__
            message = ""
        return f"{type(error).__name__}: {message}"
    return _text_of(error)


_ECHOED_INPUT = re.compile(r"input_(?:value|type)=(?:'[^'\n]*'|\"[^\"\n]*\"|[^,\]\n]*)")
"""What a pydantic validation error echoes of the invalid input (SPEC §11)."""


def _error_text(error: object) -> str:
    """The text an error is told by: its first and last parts when it is longer than
    :data:`LARGE` (the error rules read no further, however large an ``Error: …`` output)."""
    text = _bounded(error_text(error))
    if "input_" in text:
        text = _ECHOED_INPUT.sub("input_…", text)
    return text


def error_key(tool: str, error: object) -> str:
    """The key of an error: tool name plus its text, variable parts masked (SPEC §2).

    Digit runs are collapsed too (``line 12`` and ``line 14`` share a key), and what a
    validation error echoes of the invalid input (``input_value=…``) is left out (SPEC §11).
    """
    return _error_key(tool, masked(_error_text(error), digits=False))


_ERROR_HASH = PLAIN_HASH.copy()
_ERROR_HASH.update(b"\x05\x00\x00\x00\x00\x00\x00\x00error")  # digest("error", ...) begun


def _error_key(tool: str, text: bytes) -> str:
    """``digest("error", tool, text)``, its first part hashed once."""
    hasher = _ERROR_HASH.copy()
    name = tool.encode("utf-8", "surrogatepass")
    hasher.update(len(name).to_bytes(8, "little") + name + len(text).to_bytes(8, "little"))
    hasher.update(text)
    return hasher.hexdigest()


# --- near outcomes and the information in them (SPEC §11 R1, R6) -----------------------------

_SKETCH = 32  # line hashes kept per outcome: the smallest, a sample of its distinct lines
NEAR_LINES = 20
"""Results of at least this many lines are read line by line (a file view, a listing)."""
_SHORT = 256  # characters: longer results always count as information
_ACK = 64  # characters: a result this short that echoes nothing is an acknowledgement


class Outcome(NamedTuple):
    """The digests of one result: its key, its near sketch and what it says."""

    key: str
    """The outcome digest (a success) or the error key (a failure)."""
    near: str | None
    """A sample of the result's distinct lines (hashed, numbers left out), from which the
    run learns which lines are new; ``None`` for a result shorter than :data:`NEAR_LINES`
    lines, which is compared whole (counts that move in a short status are progress)."""
    info: str
    """What the result says once the call's argument values are removed (``""``: nothing)."""
    failed: bool = False
    """Whether a successful output reads as a failure (an error returned as text, §13 R13):
    its key is then an error key."""

    def event(self, tool: str, call_id: str | None, *, failed: bool) -> dict[str, Any]:
        """The fields of the ``tool_result`` event that feeds this result to a detector
        (``failed``: the tool failed; an error returned as text fails too)."""
        return {
            "kind": "tool_result",
            "tool": tool,
            "digest": self.key,
            "call_id": call_id,
            "error": failed or self.failed,
            "near": self.near,
            "info": self.info,
        }


_PACK = tuple(struct.Struct(f">{size}I").pack for size in range(_SKETCH + 1))
"""Big-endian packers of 0.._SKETCH line hashes (or reply words), built once."""


def _sketch(text: str) -> str:
    """A sample of the distinct lines of ``text`` (of its first and last bytes only when it
    has more than :data:`LARGE`), each line with time, ids and its first number (a line
    number, a count of lines above) masked and its whitespace left out: the other numbers are
    data (a price table's rows, SPEC §14 N20). The sample is chosen by content: every line
    whose hash is in :data:`SAMPLED` (the same lines of a listing and of a filtered part of
    it, §14 R18), and the smallest of the others."""
    if len(text) > LARGE:  # as many bytes at least: only its first and last are read
        text = f"{text[:HEAD]}\n{text[-TAIL:]}"
    elif len(text) * 4 > LARGE:
        encoded = text.encode("utf-8", "surrogatepass")
        if len(encoded) > LARGE:
            cut = encoded[:HEAD] + b"\n" + encoded[-TAIL:]
            text = cut.decode("utf-8", "ignore")
    data = masked(text.replace("\n", _EOL), digits=True)
    lines = {_FIRST_NUMBER.sub(b"", line, 1) for line in data.split(_EOL_BYTES)}
    lines = {line.translate(None, b" \t\r\x0b\x0c") for line in lines}
    lines.discard(b"")
    if len(lines) <= 1:
        return f"{zlib.crc32(b''.join(lines)):08x}"
    hashes = sorted(map(_line_hash, lines))
    sampled = [h for h in hashes if not h & SAMPLED][:_SKETCH]
    others = [h for h in hashes if h & SAMPLED][: max(_FEW, _SKETCH - len(sampled))]
    chosen = sorted((*sampled, *others))
    return _PACK_ANY(chosen).hex()


_EOL = "\x07"
"""Lines are masked as one text, kept apart by a byte no mask treats as a word or a space."""
_EOL_BYTES = _EOL.encode()
_FIRST_NUMBER = re.compile(rb"[0-9][0-9.,]*")
SAMPLED = 0x1F
"""A line whose hash has none of these bits set is always in its result's sample: one line in
32, the same in every result that holds it."""
_FEW = 8
"""Lines of a result sampled besides those, at least."""
_SAID = 12
"""Bytes a line needs (whitespace left out) to be sampled by its content."""


def _line_hash(line: bytes) -> int:
    """A line's CRC; a line too short to say much (a bracket, a key) never in :data:`SAMPLED`."""
    crc = zlib.crc32(line)
    return crc | 1 if len(line) < _SAID and not crc & SAMPLED else crc


def _pack_any(values: list[int]) -> bytes:
    return struct.pack(f">{len(values)}I", *values)


_PACK_ANY = _pack_any


EFFECT = 1 << 32
"""The mark among a call's argument hashes (no CRC has it) of a call that changes something."""


def arg_tokens(args: object, name: str = "", acts: bool | None = None) -> frozenset[int]:
    """CRC-32s of the words in a call's argument values (the same in every process: they are
    exported state), to find them in its result, and :data:`EFFECT` for a call that changes
    something: ``acts`` when known (the user's word or the tool's annotations: ``True`` acts,
    ``False`` only reads), else as :func:`changes_something` reads the call. At most
    :data:`_MAX_WORDS` words, from string values of a few KB each."""
    strings: list[str] = []
    # a hostile mapping (values() raising) ends the walk: what was collected is enough (a
    # try statement: contextlib.suppress costs as much as the walk of a typical call)
    try:  # noqa: SIM105
        _strings_of(args, strings, 0)
    except Exception:  # noqa: BLE001, S110
        pass
    tokens = map(zlib.crc32, _words(" ".join(strings))[:_MAX_WORDS]) if strings else ()
    if acts if acts is not None else changes_something(name, args):
        return frozenset((*tokens, EFFECT))
    return frozenset(tokens)


_DELIMITERS = bytes.maketrans(b"\"'`()[]{},;:=", b" " * 13)
_DELIMITERS_AND_SPACE = b"\"'`()[]{},;:= \t\n\r\x0b\x0c"
_MAX_WORDS = 4 * _SHORT


def _words(text: str) -> list[bytes]:
    """The words of ``text`` (UTF-8): runs between whitespace, quotes, brackets and ``,;:=``."""
    return text.encode("utf-8", "surrogatepass").translate(_DELIMITERS).split()


def _strings_of(value: object, strings: list[str], depth: int) -> None:
    """Collect the string values in ``value`` (a few levels, a few KB each)."""
    if isinstance(value, str):
        if len(value) <= _SHORT * 16:
            strings.append(value)
    elif depth < 4 and len(strings) < _SHORT:
        items: Iterable[object]
        if type(value) is dict and len(value) <= _SHORT:  # the common case, without the ABC
            items = value.values()
        elif isinstance(value, Mapping):
            items = itertools.islice(value.values(), _SHORT)
        elif isinstance(value, list | tuple):
            items = value[:_SHORT]
        else:
            return
        for item in items:
            if isinstance(item, str):  # the common case, without a call
                if len(item) <= _SHORT * 16:
                    strings.append(item)
            elif not (item is None or isinstance(item, int | float)):
                _strings_of(item, strings, depth + 1)


_NOTHING = frozenset(
    b"no not none nothing empty zero 0 No Not None Nothing Empty Zero NO NOT".split()
)
"""Words by which a short result that repeats the query says it found nothing."""


def _info(text: str, key: str, tokens: frozenset[int] | None, words: _Words | None = None) -> str:
    """What a result says, for the no-new-information streak: ``""`` nothing (empty, or only
    the call's argument values); for a short result that echoed them, ``"~"`` and a digest of
    the rest, or ``"!"`` and one when the rest says nothing was found; ``"+"`` and its key for
    a result of more than 64 characters (content: an output seen again is nothing new, SPEC
    §13 R12), ``"="`` and its key for a shorter one (an acknowledgement). A call that
    changes something (:data:`EFFECT`) gets a ``"."`` in front."""
    if tokens and EFFECT in tokens:
        return "." + _said(text, key, tokens, words)
    return _said(text, key, tokens, words)


_Words = tuple[list[bytes], list[bytes]]
"""A text's words, and those of them that are no words of the call's arguments."""


def _echoes(text: str, tokens: frozenset[int]) -> _Words:
    """The words of ``text``, and those of them whose CRC is none of the call's ``tokens``."""
    words = _words(text)
    return words, [word for word in words if zlib.crc32(word) not in tokens]


def _said(text: str, key: str, tokens: frozenset[int] | None, words: _Words | None = None) -> str:
    """:func:`_info` of a result of at most :data:`_SHORT` characters (a longer one is what
    it says, or :func:`_unechoed`)."""
    whole = ("+" if len(text) > _ACK else "=") + key  # content, or an acknowledgement
    if not tokens:  # only whether it has a word at all
        data = text.encode("utf-8", "surrogatepass")
        return whole if data.translate(None, _DELIMITERS_AND_SPACE) else ""
    every, kept = words or _echoes(text, tokens)
    if not every:
        return ""
    if len(kept) < len(every):
        if not kept:
            return ""
        mark = "!" if _NOTHING.intersection(kept) else "~"
        return mark + _tagged(_INFO_HASH, b" ".join(kept))
    return whole


def _without(text: str, words: _Words) -> str:
    """``text`` without the lines made mostly of the call's argument words, and without those
    words in short lines (``sudo: nano: command not found``), and, once anything was echoed,
    without lines left with no word. Numbers are never echoes."""
    every, kept_words = words
    if len(kept_words) == len(every):
        return text  # it echoes nothing
    echoed = {word for word in set(every).difference(kept_words) if not word.isdigit()}
    if not echoed:
        return text
    kept: list[bytes] = []
    echoes = False
    for line in text.encode("utf-8", "surrogatepass").split(b"\n"):
        line_words = line.translate(_DELIMITERS).split()
        if echoed.isdisjoint(line_words):  # kept as it is if it has a word that is no number
            if not all(map(bytes.isdigit, line_words)):
                kept.append(line)
            continue
        said = [w for w in line_words if not w.isdigit()]
        marks = [w in echoed for w in said]
        if sum(marks) * 2 > len(said):
            echoes = True
        elif len(said) <= _SHORT_LINE:
            echoes = True
            kept.append(b" ".join(w for w, echo in zip(said, marks, strict=True) if not echo))
        else:
            kept.append(line)
    return b"\n".join(kept).decode("utf-8", "surrogatepass") if echoes else text


_SHORT_LINE = 6  # words: a line this short that names an argument is about that argument


def outcome(
    output: object = None,
    *,
    error: object = None,
    tool: str = "",
    tokens: frozenset[int] | None = None,
    volatile: VolatileFields | None = None,
) -> Outcome:
    """The digests of a result: ``output``, or ``error`` (an exception or text) of ``tool``;
    ``volatile`` the fields whose values are noise in this tool's results."""
    return Outcome._make(result_digests(output, error, tool, tokens, volatile))


# How an error returned as text begins (SPEC §13 R13): ``Error: …``, ``ERROR …``, a Python
# traceback or exception line (LangChain's SQL tool returns ``Error: (sqlite3.Operational…``),
# or a JSON object whose ``error`` is set or whose ``status`` is ``"error"``.
_ERROR_START = re.compile(
    r"""\s*+(?:
        (?:Error|ERROR)\b(?!\s*[=|])
      | error:
      | Traceback\ \(most\ recent\ call\ last\)
      | (?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception):
      | \{\s*+(?:"[^"\n]{0,64}"\s*:\s*(?:"[^"\n]{0,64}"|[\w.-]{1,32})\s*,\s*){0,3}
        (?:"error"\s*:\s*(?!null\b|false\b|""|\{\s*\}|\[\s*\]|0\b)|"status"\s*:\s*"error")
    )""",
    re.VERBOSE,
)


def error_shaped(text: str) -> bool:
    """Whether a successful output is an error returned as text (SPEC §13 R13)."""
    return _ERROR_START.match(text, 0, 512) is not None


def result_digests(
    output: object,
    error: object,
    tool: str,
    tokens: frozenset[int] | None,
    volatile: VolatileFields | None = None,
) -> tuple[str, str | None, str, bool]:
    """:func:`outcome`'s key, line sketch, information and whether it failed, from one reading
    of the text."""
    words = None
    shaped = False
    if error is None:
        text = output if type(output) is str else _text_of(output)
        shaped = error_shaped(text)
        if shaped:
            error = text
    if error is not None:
        text = _error_text(error)
        if tokens:  # the words it echoes, for its key and what it says
            words = _echoes(text, tokens)
            said = _without(text, words)
        else:
            said = text
        key = _error_key(tool, masked(said, digits=False, volatile=volatile))
        lines = text.count("\n", 0, LARGE) + 1
        near = _sketch(text) if lines >= NEAR_LINES else None
        gist = _gist(text) + (_gist(said)[1:] if said is not text else "")
        return key, near, gist, shaped
    data = masked(text, digits=True, volatile=volatile)
    key = _tagged(OUTCOME_HASH, data)
    # at least NEAR_LINES lines: counted in the first part, and further only when needed
    lines = text.count("\n", 0, LARGE) + 1
    if lines < NEAR_LINES and len(text) > LARGE:
        lines = text.count("\n") + 1
    near = _sketch(text) if lines >= NEAR_LINES else None
    if len(text) > _SHORT:
        if not tokens:  # the common case: a result that is what it says
            return key, near, "+" + key, shaped
        compact = text.count("\n", 0, _ECHO_SCAN) <= 2  # a text of lines says it by them
        said = "+" + (_unechoed(data, tokens, key) if compact else key)
        return key, near, "." + said if EFFECT in tokens else said, shaped
    return key, near, _info(text, key, tokens, words), shaped


_ECHO_SCAN = 16 * 1024
_ECHO_RUN = 3
"""Bytes of a long result searched for the call's own argument words (SPEC §14 R16)."""
_ECHO_RUNS = re.compile(b"\x01{%d,}" % _ECHO_RUN)


def _unechoed(data: bytes, tokens: frozenset[int], key: str) -> str:
    """A long result's information: its key, or, when a compact one (JSON on one line)
    repeats words of its own call's arguments (a search that echoes its query), the digest of
    the rest (SPEC §14 R16: what a result repeats of its call is no information)."""
    if len(data) > _ECHO_SCAN:
        return key
    words = data.translate(_DELIMITERS).split()
    echoed = bytes(map(tokens.__contains__, map(zlib.crc32, words)))  # 1: an argument's word
    # an echo is a run of three words or more of the arguments (``"query": "best pizza in
    # nyc"``); fewer are the text's own (a snippet that says "a return"): found at C speed
    kept: list[bytes] = []
    at = 0
    for echo in _ECHO_RUNS.finditer(echoed):
        kept += words[at : echo.start()]
        at = echo.end()
    if not at:
        return key  # no echo
    kept += words[at:]
    return _tagged(_INFO_HASH, b" ".join(kept)) if kept else key


def _gist(said: str) -> str:
    """What a failure says, for whether the run has seen it (SPEC §14 N15): ``"x"`` and a
    digest of its first line, without paths and numbers. ``/usr/lib/jvm/a/bin/java`` and
    ``/opt/b/bin/java`` not found are one failure seen twice; a deliberate test's own message
    is a failure the run has not seen. :func:`result_digests` adds the digest of the line
    without the call's argument words when it echoes them (``No match for "<arg>"``)."""
    for line in said[:1024].split("\n"):
        words = [word for word in line.split() if "/" not in word and "\\" not in word]
        if words:
            gist = masked(" ".join(words), digits=False)
            return "x" + _tagged(_INFO_HASH, gist)
    return "x"


_PUNCTUATION_MARKS = b".!?,;:'\"()[]{}*_#`-0123456789"
# punctuation and digits as spaces: a word's letters are what a reply says (an id or an amount
# falls apart into short pieces, as numbers are left out)
_PUNCTUATION = bytes.maketrans(_PUNCTUATION_MARKS, b" " * len(_PUNCTUATION_MARKS))


def reply_sketch(text: object) -> str:
    """A sample of a reply's distinct words (the smallest of their hashes), lower-cased,
    without numbers and punctuation: :func:`near_reply` compares two (SPEC §12 R9)."""
    whole = text if type(text) is str else _text_of(text)
    data = _bounded(whole).encode("utf-8", "surrogatepass").lower()
    hashes = sorted(set(map(zlib.crc32, data.translate(_PUNCTUATION).split())))[:_REPLY_WORDS]
    return _PACK[len(hashes)](*hashes).hex()


_REPLY_WORDS = 32
_NEAR_REPLY = 0.8


def near_reply(a: str, b: str) -> bool:
    """Whether two reply sketches share nearly all their words: at least 80% of the words
    of either are words of both (their Jaccard similarity, exact for replies of up to 32
    distinct words, estimated on the samples for longer ones)."""
    if a == b:
        return True
    first, second = _sketch_words(a), _sketch_words(b)
    return len(first & second) >= _NEAR_REPLY * len(first | second) > 0


_MOST = 0.6
_FEWEST_SHARED = 3


def reworded_reply(a: str, b: str) -> bool:
    """Whether two reply sketches share most of their words: at least 60% of the words of the
    shorter one (and three words at least) are words of both (SPEC §13 R14: the same plan,
    reworded). Estimated on the samples for replies of more than 32 distinct words."""
    if a == b:
        return True
    first, second = _sketch_words(a), _sketch_words(b)
    shared = len(first & second)
    return shared >= _FEWEST_SHARED and shared >= _MOST * min(len(first), len(second))


def _sketch_words(sketch: str) -> set[str]:
    """The word hashes of a reply sketch (8 hex digits each)."""
    return {sketch[i : i + 8] for i in range(0, len(sketch), 8)}


def _bounded(text: str) -> str:
    """A reply's (or an error's) first and last parts, when it is longer than :data:`LARGE`:
    its words are sampled there, as a large result's lines are."""
    return text if len(text) <= LARGE else f"{text[:HEAD]}\n{text[-TAIL:]}"


_SPACE = b" \t\n\r\x0b\x0c"


def assistant_key(text: object) -> str | None:
    """The key of an assistant response, its text with whitespace collapsed (``None`` when
    empty); content blocks or a message are read as :func:`normalize_outcome` reads outputs.
    A text longer than :data:`LARGE` is collapsed in its first and last parts, and its middle
    hashed without whitespace, as a large result is masked."""
    whole = _text_of(text)
    if len(whole) > LARGE:
        hasher = _ASSISTANT_HASH.copy()
        hasher.update(collapse(whole[:HEAD]).encode("utf-8", "surrogatepass") + b"\x00")
        hasher.update(whole[HEAD:-TAIL].encode("utf-8", "surrogatepass").translate(None, _SPACE))
        hasher.update(b"\x00" + collapse(whole[-TAIL:]).encode("utf-8", "surrogatepass"))
        return hasher.hexdigest()
    collapsed = collapse(whole)
    if not collapsed:
        return None
    return _tagged(_ASSISTANT_HASH, collapsed.encode("utf-8", "surrogatepass"))


_WORD = re.compile(r"\w+")


def question_key(text: object) -> str | None:
    """The key of a human message: its words, case and punctuation aside (``None`` when it
    has none), so that the same question asked again has the same key (SPEC §14 N18). Only
    equality is asked of it: a short digest."""
    words = _WORD.findall(_bounded(_text_of(text)).casefold())
    if not words:
        return None
    return _tagged(_QUESTION_HASH, " ".join(words).encode("utf-8", "surrogatepass"))


_WOULD_BE_CALL = re.compile(
    r"```|~~~|<\|[a-z_]+\|>|</?(?:function|tool_call|tool_use|invoke|execute|bash)\b"
    r"|\"(?:name|tool|function)\"\s*:\s*\"[^\"]*\"\s*,\s*\"(?:arguments|args|parameters|input)\"\s*:",
    re.IGNORECASE,
)


def talk(text: object) -> bool:
    """Whether an answer without tool calls is talk: words, with no would-be call in them (a
    fenced block of code or commands, call markup, a JSON call). Talk that brings new words is
    not a failing turn; an answer a harness rejected, because it held a call it could not run,
    still is (SPEC §14 N19)."""
    whole = _bounded(_text_of(text))
    return bool(whole.strip()) and _WOULD_BE_CALL.search(whole) is None
