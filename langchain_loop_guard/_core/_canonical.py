"""Canonical serialization: any Python value as deterministic JSON text, and its digest.

Nothing here raises: every Python value serializes, cycles and hostile objects too. A tool
call's signature is its name and its canonical arguments, digested.
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
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import cast, overload

from pydantic import BaseModel

__all__ = ["DIGEST_SIZE", "PLAIN_HASH", "call_signature", "canonical", "digest", "kept_call_id"]

_MAX_DEPTH = 200
"""Containers nested deeper than this are cut (marked ``$deep``), far from the recursion limit."""

_SCALARS = frozenset({str, int, bool, type(None)})

_SHORT_INT_BITS = 2_000
"""Ints this short always have a decimal text (Python's digit limit is at least 640)."""

DIGEST_SIZE = 8  # 64 bits: collisions are irrelevant at a window of a few dozen calls

_MAX_ITEMS = 100_000
"""Container items (mapping items, list and set members) one value is normalized with."""

_MAX_CHARS = 8 << 20
"""Characters of strings and bytes written as they are; beyond, each is written as its digest."""

_MAX_SECONDS = 2.0
"""Time one value is normalized for; beyond, the rest is cut (marked ``$truncated``)."""

_CLOCK_EVERY = 1024  # items between two looks at the clock

_HEX = re.compile(r"\b0x[0-9a-fA-F]+")  # memory addresses in reprs


def _compact_json() -> Callable[[object], str]:
    """``json.dumps`` with sorted keys, no spaces, no NaN, for values known to be acyclic.

    The C encoder is built once (``JSONEncoder.encode`` builds one per call, which costs as
    much as encoding small arguments), without cycle markers; ``encode`` where it is missing.
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


PLAIN_HASH = hashlib.blake2b(digest_size=DIGEST_SIZE)
"""The plain digest's hasher (unkeyed, not personalized); each digest copies it."""


def digest(*parts: str | bytes) -> str:
    """A short hex digest of ``parts`` (each part length-prefixed, so no two splits collide)."""
    hasher = PLAIN_HASH.copy()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()


MAX_CALL_ID = 64
"""The longest call id kept as it is (a model's ids are some thirty characters)."""


@overload
def kept_call_id(call_id: str) -> str: ...
@overload
def kept_call_id(call_id: None) -> None: ...
def kept_call_id(call_id: str | None) -> str | None:
    """A tool call id as a saved state keeps it: whole up to :data:`MAX_CALL_ID` characters, a
    digest of it beyond (``#`` and 32 hex digits), so that an id of a megabyte does not make a
    state of one. A call and its result map their id alike, and a kept id is kept as it is."""
    if type(call_id) is not str or len(call_id) <= MAX_CALL_ID:
        return call_id
    return "#" + digest("call_id", call_id)[:32]


# --- canonical serialization -------------------------------------------------------------------


def _is_plain(obj: object, depth: int = 0) -> bool:
    """True when ``obj`` is JSON already (str keys, no floats, not too deep): such values go
    straight to the C encoder. Scalars are tested inline: this is on every tool call's path."""
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


class _Budget:
    """What is left for normalizing one value: items, characters and time.

    When items or time run out, each container being walked gets a ``"$truncated"`` mark
    (``"items"`` or ``"time"``); strings and bytes beyond the characters become their digest.
    """

    __slots__ = ("chars", "deadline", "items", "reason")

    def __init__(self) -> None:
        self.items = _MAX_ITEMS
        self.chars = _MAX_CHARS
        self.deadline = time.monotonic() + _MAX_SECONDS
        self.reason: str | None = None

    def take(self) -> bool:
        """Whether one more item may be normalized."""
        if self.reason is not None:
            return False
        self.items -= 1
        if self.items < 0:
            self.reason = "items"
        elif self.items % _CLOCK_EVERY == 0 and time.monotonic() > self.deadline:
            self.reason = "time"
        return self.reason is None

    def limited(self, items: Iterable[object]) -> Iterator[object]:
        """``items`` while the budget lasts."""
        for item in items:
            if not self.take():
                return
            yield item

    def text(self, text: str) -> object:
        """``text`` as it is while the character budget lasts, else its digest."""
        self.chars -= len(text)
        return text if self.chars >= 0 else {"$str": digest(text)}


def _normalize(obj: object, depth: int, path: set[int], budget: _Budget) -> object:
    """Turn ``obj`` into plain JSON data (str keys, no NaN), marking what JSON cannot say.

    ``path`` holds the ids of the containers being walked (cycles are cut); a value that fails
    to serialize becomes its ``repr``. Exact scalars come before the depth cut, as in
    :func:`_is_plain`.
    """
    kind = type(obj)
    if kind is str:
        return budget.text(cast(str, obj))
    if kind is bool or obj is None:
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
        return _normalize_object(obj, depth, path, budget)
    except Exception:  # noqa: BLE001 - hostile objects must not break the guard
        return {"$repr": _safe_repr(obj)}
    finally:
        path.discard(ident)


def _normalize_object(obj: object, depth: int, path: set[int], budget: _Budget) -> object:
    def inner(value: object) -> object:
        return _normalize(value, depth + 1, path, budget)

    if isinstance(obj, enum.Enum):
        return {"$enum": type(obj).__qualname__, "v": inner(obj.value)}
    if isinstance(obj, float):
        return _float(float(obj))
    if isinstance(obj, int):  # int subclasses (bool cannot be subclassed)
        return _int(int(obj))
    if isinstance(obj, str):
        return budget.text(str(obj))
    if isinstance(obj, Mapping):
        items: dict[str, object] = {}
        for pair in budget.limited(obj.items()):
            key, value = cast(tuple[object, object], pair)
            name = key if type(key) is str else "$k:" + _dumps(inner(key))
            items[name] = inner(value)
        if budget.reason is not None:
            items["$truncated"] = budget.reason
        return items
    if isinstance(obj, list | tuple):
        members = [inner(item) for item in budget.limited(obj)]
        if budget.reason is not None:
            members.append({"$truncated": budget.reason})
        return members
    if isinstance(obj, set | frozenset):
        marked: dict[str, object] = {
            "$set": sorted(_dumps(inner(item)) for item in budget.limited(obj))
        }
        if budget.reason is not None:
            marked["$truncated"] = budget.reason
        return marked
    if isinstance(obj, bytes | bytearray | memoryview):
        data = bytes(obj)
        budget.chars -= len(data)
        if budget.chars < 0:
            return {"$bytes": digest(data)}
        return {"$bytes": base64.b64encode(data).decode("ascii")}
    if isinstance(obj, _dt.datetime | _dt.date | _dt.time):
        return {"$time": obj.isoformat()}
    if isinstance(obj, _dt.timedelta):
        return {"$timedelta": obj.total_seconds()}
    if isinstance(obj, BaseModel):
        return {"$model": type(obj).__qualname__, "v": inner(obj.model_dump())}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {"$data": type(obj).__qualname__, "v": inner(fields)}
    return {"$repr": _safe_repr(obj)}


def canonical(obj: object) -> str:
    """Deterministic JSON text of ``obj``: key order ignored, ``1 == 1.0``; never raises."""
    if _is_plain(obj):
        try:
            return _dumps(obj)
        except ValueError:  # an int with more digits than Python writes: normalized below
            pass
    return _dumps(_normalize(obj, 0, set(), _Budget()))


def call_signature(name: str, args: object) -> str:
    """The signature of a tool call: its name and its canonical arguments, digested."""
    return digest(name, canonical(args))
