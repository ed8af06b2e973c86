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
from functools import lru_cache
from typing import Any, NamedTuple

from langchain_loop_guard._core._canonical import DIGEST_SIZE, PLAIN_HASH, canonical
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
    "reply_sketch",
    "reworded_reply",
]

# One BLAKE2b per domain, personalized by its tag, so domains never collide; each digest copies
# the domain's fresh hasher, which is cheaper than building one.
_ASSISTANT_HASH = hashlib.blake2b(digest_size=DIGEST_SIZE, person=b"assistant")
_INFO_HASH = hashlib.blake2b(digest_size=DIGEST_SIZE, person=b"info")


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
    """A sample of the distinct lines of ``text`` with digits and whitespace left out (of
    its first and last bytes only when it has more than :data:`LARGE`)."""
    if len(text) > LARGE:  # as many bytes at least: only its first and last are encoded
        head = text[:HEAD].encode("utf-8", "surrogatepass")[:HEAD]
        data = head + b"\n" + text[-TAIL:].encode("utf-8", "surrogatepass")[-TAIL:]
    else:
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > LARGE:
            data = data[:HEAD] + b"\n" + data[-TAIL:]
    lines = set(data.translate(None, b"0123456789 \t\r\x0b\x0c").split(b"\n"))
    lines.discard(b"")
    if len(lines) <= 1:
        return f"{zlib.crc32(b''.join(lines)):08x}"
    smallest = sorted(map(zlib.crc32, lines))[:_SKETCH]  # at most 6 KB of lines: C speed
    return _PACK[len(smallest)](*smallest).hex()


EFFECT = 1 << 32
"""The mark among a call's argument hashes (no CRC has it) of a call that changes something."""


def arg_tokens(args: object, name: str = "") -> frozenset[int]:
    """CRC-32s of the words in a call's argument values (the same in every process: they are
    exported state), to find them in its result, and :data:`EFFECT` for a call that changes
    something. At most :data:`_MAX_WORDS` words, from string values of a few KB each."""
    strings: list[str] = []
    # a hostile mapping (values() raising) ends the walk: what was collected is enough (a
    # try statement: contextlib.suppress costs as much as the walk of a typical call)
    try:  # noqa: SIM105
        _strings_of(args, strings, 0)
    except Exception:  # noqa: BLE001, S110
        pass
    tokens = map(zlib.crc32, _words(" ".join(strings))[:_MAX_WORDS]) if strings else ()
    if changes_something(name, args):
        return frozenset((*tokens, EFFECT))
    return frozenset(tokens)


# A call changes something when its tool's name says so (``write_file``, ``createUser``), or
# its shell command does: a command that changes the shell or the files, a redirect into a file,
# a here-document, an in-place ``sed``. An empty result of such a call is work done, not a search
# that found nothing (SPEC §12 N9).
# fmt: off
_NAME_VERBS = frozenset([
    "write", "create", "mkdir", "touch", "save", "store", "put", "set", "update", "upsert",
    "insert", "append", "delete", "remove", "move", "copy", "rename", "edit", "patch",
    "replace", "apply", "install", "uninstall", "commit", "push", "upload", "send", "post",
])
_SHELL_VERBS = frozenset([
    "cd", "pushd", "popd", "export", "unset", "source", "alias",  # the shell's own state
    "mkdir", "rmdir", "touch", "rm", "mv", "cp", "ln", "chmod", "chown", "tee", "truncate",
    "install", "kill", "pkill",
])
# fmt: on
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_COMMAND_KEYS = ("command", "cmd", "script")


@lru_cache(maxsize=1024)
def _name_changes(name: str) -> bool:
    """Whether a tool's name says it changes something (a run calls few tools, often)."""
    return any(word.lower() in _NAME_VERBS for word in _NAME_WORD.findall(name))


# A redirect into a file (not ``2>&1``, not ``> /dev/null``), and an in-place ``sed``; each
# pattern starts with a literal, so a search skips to its candidates at C speed.
_REDIRECT = re.compile(r">(?<![0-9&>]>)>?(?![>&]|\s*/dev/null)")
_SED_IN_PLACE = re.compile(r"sed(?<!\wsed)\s+(?:-\w+\s+)*-i")


def changes_something(name: str, args: object = None) -> bool:
    """Whether a call of ``name`` with ``args`` changes something: by its tool's name, or
    by the shell command it runs (``args`` a string, or its ``command`` value)."""
    if _name_changes(name):
        return True
    command = args if isinstance(args, str) else None
    if type(args) is dict:
        for key in _COMMAND_KEYS:
            command = args.get(key)
            if type(command) is str:
                break
    if not command or type(command) is not str:
        return False
    head = command[:1024]
    words = head.split(None, 1)  # its first word, and the rest
    while words and (words[0] == "sudo" or "=" in words[0]):
        # ``sudo`` and variable assignments before the command itself
        words = words[1].split(None, 1) if len(words) > 1 else []
    if words and words[0].rsplit("/", 1)[-1] in _SHELL_VERBS:
        return True
    return (
        "<<" in head
        or (">" in head and _REDIRECT.search(head) is not None)
        or ("sed" in head and _SED_IN_PLACE.search(head) is not None)
    )


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
    if len(text) > _SHORT:
        return "+" + key
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
            key = _error_key(tool, masked(_without(text, words), digits=False, volatile=volatile))
        else:
            key = _error_key(tool, masked(text, digits=False, volatile=volatile))
    else:
        key = _tagged(OUTCOME_HASH, masked(text, digits=True, volatile=volatile))
    # at least NEAR_LINES lines: counted in the first part, and further only when needed
    lines = text.count("\n", 0, LARGE) + 1
    if lines < NEAR_LINES and len(text) > LARGE:
        lines = text.count("\n") + 1
    near = _sketch(text) if lines >= NEAR_LINES else None
    if len(text) > _SHORT and not tokens:  # the common case: a result that is what it says
        return key, near, "+" + key, shaped
    return key, near, _info(text, key, tokens, words), shaped


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
