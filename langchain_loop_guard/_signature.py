"""Deterministic digests of tool calls, tool outcomes, errors and assistant responses.

Nothing here raises: every Python value serializes (cycles, deep nesting, objects whose
``__repr__`` raises), and only short digests leave this module, never the content itself.
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
from collections.abc import Mapping
from typing import Any

__all__ = [
    "assistant_key",
    "canonical",
    "call_signature",
    "digest",
    "error_key",
    "error_text",
    "normalize_outcome",
    "outcome_digest",
]

_MAX_DEPTH = 200
_DIGEST_SIZE = 8  # 64 bits: collisions are irrelevant at a window of a few dozen calls

_dumps = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
).encode


def digest(*parts: str | bytes) -> str:
    """A short hex digest of ``parts`` (each part length-prefixed, so no two splits collide)."""
    hasher = hashlib.blake2b(digest_size=_DIGEST_SIZE)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()


# --- canonical serialization -------------------------------------------------------------------


def _is_plain(obj: object, depth: int = 0) -> bool:
    """True when ``obj`` is JSON already (str keys, no floats): the C encoder's fast path."""
    kind = type(obj)
    if kind is str or kind is int or kind is bool or obj is None:
        return True
    if depth > _MAX_DEPTH:
        return False
    if kind is dict:
        for key, value in obj.items():  # type: ignore[attr-defined]
            if type(key) is not str or not _is_plain(value, depth + 1):
                return False
        return True
    if kind is list:
        return all(_is_plain(item, depth + 1) for item in obj)  # type: ignore[attr-defined]
    return False


def _safe_repr(obj: object) -> str:
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not break the guard
        return f"<{type(obj).__qualname__}>"
    # default reprs carry memory addresses that change on every call
    return _HEX.sub("0x#", text)


def _float(value: float) -> object:
    if math.isnan(value):
        return {"$float": "nan"}
    if math.isinf(value):
        return {"$float": "inf" if value > 0 else "-inf"}
    if value.is_integer():
        return int(value)
    return value


def _normalize(obj: object, depth: int, path: set[int]) -> object:
    """Turn ``obj`` into plain JSON data (str keys, no NaN), marking what JSON cannot say."""
    kind = type(obj)
    if kind is str or kind is int or kind is bool or obj is None:
        return obj
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, bool | int | str):
        # subclasses (IntEnum, StrEnum, …) and enums are caught below by value
        if isinstance(obj, enum.Enum):
            return {"$enum": _normalize(obj.value, depth + 1, path)}
        return int(obj) if isinstance(obj, int) else str(obj)
    if depth > _MAX_DEPTH:
        return {"$deep": type(obj).__qualname__}
    ident = id(obj)
    if ident in path:
        return {"$cycle": type(obj).__qualname__}
    if isinstance(obj, enum.Enum):
        return {"$enum": _normalize(obj.value, depth + 1, path)}
    if isinstance(obj, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, _dt.datetime | _dt.date | _dt.time):
        return {"$time": obj.isoformat()}
    if isinstance(obj, _dt.timedelta):
        return {"$timedelta": obj.total_seconds()}
    path.add(ident)
    try:
        if isinstance(obj, Mapping):
            items = {}
            for key, value in list(obj.items()):
                name = key if type(key) is str else "$k:" + _dumps(_normalize(key, depth + 1, path))
                items[name] = _normalize(value, depth + 1, path)
            return items
        if isinstance(obj, list | tuple):
            return [_normalize(item, depth + 1, path) for item in obj]
        if isinstance(obj, set | frozenset):
            members = [_dumps(_normalize(item, depth + 1, path)) for item in obj]
            return {"$set": sorted(members)}
        dump = getattr(obj, "model_dump", None)
        if callable(dump) and not isinstance(obj, type):  # pydantic v2 model
            return {"$model": type(obj).__qualname__, "v": _normalize(dump(), depth + 1, path)}
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            fields = {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
            return {"$data": type(obj).__qualname__, "v": _normalize(fields, depth + 1, path)}
        return {"$repr": _safe_repr(obj)}
    finally:
        path.discard(ident)


def canonical(obj: object) -> str:
    """Deterministic JSON text of ``obj``: key order ignored, ``1 == 1.0``, never raises."""
    try:
        if _is_plain(obj):
            return _dumps(obj)
        return _dumps(_normalize(obj, 0, set()))
    except Exception:  # noqa: BLE001 - e.g. a mapping whose items() raises
        return _dumps({"$repr": _safe_repr(obj)})


def call_signature(name: str, args: object) -> str:
    """The signature of a tool call: its name and its canonical arguments, digested."""
    return digest(name, canonical(args))


# --- outcomes, errors, assistant responses -----------------------------------------------------

_WS = re.compile(r"\s+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)
_DURATION = re.compile(
    r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b"
)
_LONG_NUMBER = re.compile(r"\d{6,}")
_DIGITS = re.compile(r"\d+")


def _mask(text: str) -> str:
    text = _UUID.sub("<uuid>", text)
    text = _TIMESTAMP.sub("<time>", text)
    return _HEX.sub("0x#", text)


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _text_of(output: object) -> str:
    if isinstance(output, str):
        return output
    content = getattr(output, "content", None)  # a tool message, duck-typed
    if isinstance(content, str):
        return content
    if content is not None:
        return canonical(content)
    return canonical(output)


def normalize_outcome(output: object) -> str:
    """Outcome text with what changes without meaning progress masked (SPEC §3)."""
    text = _mask(_text_of(output))
    text = _DURATION.sub("<duration>", text)
    text = _LONG_NUMBER.sub("<n>", text)
    return _collapse(text)


def outcome_digest(output: object) -> str:
    """Digest of a successful result's normalized text."""
    return digest("ok", normalize_outcome(output))


def error_text(error: object) -> str:
    """``"Type: message"`` of an exception (or ``str`` of anything else), never raising."""
    if isinstance(error, BaseException):
        try:
            message = str(error)
        except Exception:  # noqa: BLE001 - a hostile __str__
            message = ""
        return f"{type(error).__name__}: {message}"
    if isinstance(error, str):
        return error
    return _text_of(error)


def error_key(tool: str, error: object) -> str:
    """The key of an error: tool name plus its text, variable parts masked (SPEC §2)."""
    text = _DIGITS.sub("#", _mask(error_text(error)))
    return digest("error", tool, _collapse(text))


def assistant_key(text: str) -> str | None:
    """The key of an assistant response (``None`` for an empty one, which is skipped)."""
    collapsed = _collapse(text)
    return digest("assistant", collapsed) if collapsed else None
