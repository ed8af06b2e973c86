"""Keys as the run's state keeps them, and the readers of an exported state's fields: each
raises one of :data:`StateError` when a field is malformed.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Key",
    "StateError",
    "count_of",
    "flag_of",
    "hash_from_state",
    "items_of",
    "key_of",
    "key_text",
    "optional_text_of",
    "text_of",
]

Key = int | str
"""A call's signature or a result's key as the view keeps it: a digest of 16 hex digits as its
number (half the memory), any other text as it is."""


def key_of(digest: str) -> Key:
    """The key of ``digest``: its number if it is what :func:`key_text` writes of one."""
    # 16 lower-case hex digits, exactly what key_text writes (int() alone would also take
    # "0x", "_", signs, spaces and capitals)
    if len(digest) == 16 and not digest.strip(_HEX_DIGITS):
        return int(digest, 16)
    return digest


_HEX_DIGITS = "0123456789abcdef"


def key_text(key: Key) -> str:
    """The text of ``key`` (the digest :func:`key_of` was given)."""
    return key if type(key) is str else f"{key:016x}"


StateError = (KeyError, TypeError, ValueError)
"""What reading a malformed exported state raises."""


def items_of(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError
    return value


def count_of(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(value)
    return value


def text_of(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


def optional_text_of(value: object) -> str | None:
    return None if value is None else text_of(value)


def flag_of(value: object) -> bool:
    if type(value) is not bool:
        raise TypeError
    return value


def hash_from_state(value: object) -> int:
    if type(value) is not int or not 0 <= value < 1 << 64:
        raise ValueError(value)
    return value
