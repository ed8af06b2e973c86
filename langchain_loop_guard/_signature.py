"""Deterministic digests of tool calls, tool outcomes, errors and assistant responses.

Nothing here raises: every Python value serializes (cycles, deep nesting, objects whose
``__repr__`` raises, mappings whose ``items()`` raises), and only short digests leave this
module, never the content itself.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping

from pydantic import BaseModel

__all__ = [
    "assistant_key",
    "call_signature",
    "canonical",
    "digest",
    "error_key",
    "error_text",
    "normalize_outcome",
    "outcome_digest",
]

_MAX_DEPTH = 200
"""Containers nested deeper than this are cut (marked ``$deep``), far from the recursion limit."""

_SCALARS = frozenset({str, int, bool, type(None)})

_SHORT_INT_BITS = 2_000
"""Ints this short always have a decimal text (Python's digit limit is at least 640)."""

_DIGEST_SIZE = 8  # 64 bits: collisions are irrelevant at a window of a few dozen calls


def _compact_json() -> Callable[[object], str]:
    """``json.dumps`` with sorted keys, no spaces, no NaN, for values known to be acyclic.

    ``JSONEncoder.encode`` builds a new C encoder on every call, which costs as much as
    encoding a small tool call's arguments; this builds it once. The values it is given are
    plain JSON data (see :func:`_is_plain`) or :func:`_normalize` output, never cyclic, so the
    encoder keeps no markers to detect cycles. Where the C encoder is missing or has another
    signature (it is private to :mod:`json`), ``encode`` is used as it is.
    """
    encoder = json.JSONEncoder(
        sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    try:
        encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
            None,
            encoder.default,
            json.encoder.encode_basestring,
            None,
            ":",
            ",",
            True,
            False,
            False,
        )
    except TypeError:  # pragma: no cover - None or another signature: not CPython 3.11-3.13
        return encoder.encode
    return lambda value: "".join(encode(value, 0))


_dumps = _compact_json()


def digest(*parts: str | bytes) -> str:
    """A short hex digest of ``parts`` (each part length-prefixed, so no two splits collide)."""
    hasher = hashlib.blake2b(digest_size=_DIGEST_SIZE)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()


def _tagged(tag: bytes, text: str) -> str:
    """The digest of ``text`` in the domain ``tag``: one BLAKE2b call, personalized by the tag.

    A personalization is another hash function, so these never collide with :func:`digest`'s.
    """
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=_DIGEST_SIZE, person=tag).hexdigest()


# --- canonical serialization -------------------------------------------------------------------


def _is_plain(obj: object, depth: int = 0) -> bool:
    """True when ``obj`` is JSON already (str keys, no floats, not too deep).

    Such values go straight to the C encoder; anything else is normalized first. Scalars are
    tested inline rather than by a call per value: this walk is on every tool call's path.
    """
    values: Iterable[object]
    if type(obj) is dict:
        for key in obj:
            if type(key) is not str:
                return False
        values = obj.values()
    elif type(obj) is list:
        values = obj
    else:
        return type(obj) in _SCALARS
    for value in values:
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            continue
        if (kind is dict or kind is list) and depth < _MAX_DEPTH and _is_plain(value, depth + 1):
            continue
        return False
    return True


def _safe_repr(obj: object) -> str:
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not break the guard
        return f"<{type(obj).__qualname__}>"
    # default reprs carry memory addresses that change from one object to the next
    return _HEX.sub("0x#", text)


def _float(value: float) -> object:
    if math.isnan(value):
        return {"$float": "nan"}
    if math.isinf(value):
        return {"$float": "inf" if value > 0 else "-inf"}
    if value.is_integer():
        return int(value)  # 1.0 and 1 are the same argument
    return value


def _int(value: int) -> object:
    """An int as JSON: a number, or a mark when it has more digits than Python writes."""
    if value.bit_length() > _SHORT_INT_BITS:
        try:
            repr(value)
        except ValueError:  # beyond sys.get_int_max_str_digits()
            return {"$int": hex(value)}
    return value


def _normalize(obj: object, depth: int, path: set[int]) -> object:
    """Turn ``obj`` into plain JSON data (str keys, no NaN), marking what JSON cannot say.

    ``path`` holds the ids of the containers being walked, to cut cycles. A value that fails
    to serialize (a mapping whose ``items()`` raises, say) becomes its ``repr`` alone; the rest
    of the structure still counts. Exact scalars come first, before the depth cut, so that a
    value normalizes to what :func:`_is_plain` lets through unchanged.
    """
    kind = type(obj)
    if kind is str or kind is bool or obj is None:
        return obj
    if type(obj) is int:
        return _int(obj)
    if type(obj) is float:
        return _float(obj)
    if depth > _MAX_DEPTH:
        return {"$deep": kind.__qualname__}
    ident = id(obj)
    if ident in path:
        return {"$cycle": kind.__qualname__}
    path.add(ident)
    try:
        return _normalize_object(obj, depth, path)
    except Exception:  # noqa: BLE001 - hostile objects must not break the guard
        return {"$repr": _safe_repr(obj)}
    finally:
        path.discard(ident)


def _normalize_object(obj: object, depth: int, path: set[int]) -> object:
    if isinstance(obj, enum.Enum):
        return {"$enum": type(obj).__qualname__, "v": _normalize(obj.value, depth + 1, path)}
    if isinstance(obj, float):
        return _float(float(obj))
    if isinstance(obj, int):  # int subclasses (bool cannot be subclassed)
        return _int(int(obj))
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, Mapping):
        items: dict[str, object] = {}
        for key, value in list(obj.items()):
            name = key if type(key) is str else "$k:" + _dumps(_normalize(key, depth + 1, path))
            items[name] = _normalize(value, depth + 1, path)
        return items
    if isinstance(obj, list | tuple):
        return [_normalize(item, depth + 1, path) for item in obj]
    if isinstance(obj, set | frozenset):
        members = [_dumps(_normalize(item, depth + 1, path)) for item in obj]
        return {"$set": sorted(members)}
    if isinstance(obj, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, _dt.datetime | _dt.date | _dt.time):
        return {"$time": obj.isoformat()}
    if isinstance(obj, _dt.timedelta):
        return {"$timedelta": obj.total_seconds()}
    if isinstance(obj, BaseModel):
        return {
            "$model": type(obj).__qualname__,
            "v": _normalize(obj.model_dump(), depth + 1, path),
        }
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {"$data": type(obj).__qualname__, "v": _normalize(fields, depth + 1, path)}
    return {"$repr": _safe_repr(obj)}


def canonical(obj: object) -> str:
    """Deterministic JSON text of ``obj``: key order ignored, ``1 == 1.0``.

    It raises for no value (only an exhausted stack or memory could make it fail).
    """
    if _is_plain(obj):
        try:
            return _dumps(obj)
        except ValueError:  # an int with more digits than Python writes: normalized below
            pass
    return _dumps(_normalize(obj, 0, set()))


def call_signature(name: str, args: object) -> str:
    """The signature of a tool call: its name and its canonical arguments, digested."""
    return digest(name, canonical(args))


# --- outcomes, errors, assistant responses -----------------------------------------------------

_HEX = re.compile(r"\b0x[0-9a-fA-F]+")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_VOLATILE = re.compile(
    r"""
    [0-9]  # every other mask starts with a digit: the engine skips the rest of the text fast
    (?:
        (?<!\w[0-9])  # a word starts here
        (?:
            \d{3}-\d\d-\d\d  # a date, maybe with a time
            (?:[T\ ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?\b
          | \d?:\d\d:\d\d(?:[.,]\d+)?\b  # a time of day
          | (?<=0)x[0-9a-fA-F]+  # a hex pointer
          | \d*(?:\.\d+)?\s?  # a duration
            (?:ns|us|µs|ms|s|secs?|seconds?|m|mins?|minutes?|h|hours?)\b
        )
      | \d{5,}  # a number of six or more digits, anywhere
    )
    """,
    re.VERBOSE,
)
_DIGITS = re.compile(r"\d+")


def _mask(text: str) -> str:
    """``text`` with timestamps, UUIDs, hex pointers, durations and long numbers masked.

    This runs on every tool result, so each regular expression runs only where it can match:
    the UUID pattern when there are dashes enough, the others from digits only.
    """
    if text.count("-") >= 4:
        text = _UUID.sub("<#>", text)
    return _VOLATILE.sub("<#>", text)


def _collapse(text: str) -> str:
    """Whitespace runs as one space, trimmed (``str.split`` is what ``\\s+`` means, faster)."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text  # its only whitespace is single inner spaces: nothing to collapse
    return " ".join(text.split())


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
    short numbers are kept (``progress 45%`` is not ``progress 50%``).
    """
    return _collapse(_mask(_text_of(output)))


def outcome_digest(output: object) -> str:
    """Digest of a successful result's normalized text."""
    return _tagged(b"ok", normalize_outcome(output))


def error_text(error: object) -> str:
    """``"Type: message"`` of an exception, the text of anything else; never raises."""
    if isinstance(error, BaseException):
        try:
            message = str(error)
        except Exception:  # noqa: BLE001 - a hostile __str__
            message = ""
        return f"{type(error).__name__}: {message}"
    return _text_of(error)


def error_key(tool: str, error: object) -> str:
    """The key of an error: tool name plus its text, variable parts masked (SPEC §2).

    What :func:`normalize_outcome` masks is masked and the other digit runs collapsed, so
    ``line 12`` and ``line 14`` share a key.
    """
    text = _DIGITS.sub("#", _mask(error_text(error)))
    return digest("error", tool, _collapse(text))


def assistant_key(text: object) -> str | None:
    """The key of an assistant response: its text trimmed, whitespace collapsed.

    ``None`` for an empty response, which is skipped. Text that is not a string (a list of
    content blocks, a message) is taken as :func:`normalize_outcome` takes outputs.
    """
    collapsed = _collapse(_text_of(text))
    return _tagged(b"assistant", collapsed) if collapsed else None
