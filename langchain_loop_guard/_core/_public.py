"""What may leave the process: digests keyed with a secret, tool names made safe to show.

A digest of a small value (a PIN, a yes/no answer) could be reversed by hashing every
candidate, so a digest that leaves the process (a trace, a log record, an exception…) is keyed
(:func:`public_digest`) with a secret this process never writes. Names and text shown are
bounded and escaped, so that a made-up name cannot forge a log line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Final, overload

__all__ = [
    "MAX_TOOL_NAME",
    "json_text",
    "new_secret",
    "public_digest",
    "safe_tool_name",
    "terminal_safe",
]

MAX_TOOL_NAME: Final = 200
"""The longest tool name kept or shown, in characters (longer ones end in ``…``)."""

_SECRET_SIZE: Final = 32
_PERSON: Final = b"loop-guard-pub"


def new_secret() -> bytes:
    """A fresh random key for :func:`public_digest` (a trace recorder draws its own)."""
    return os.urandom(_SECRET_SIZE)


_PROCESS_SECRET: Final = new_secret()


@overload
def public_digest(value: str, secret: bytes | None = None) -> str: ...
@overload
def public_digest(value: None, secret: bytes | None = None) -> None: ...
def public_digest(value: str | None, secret: bytes | None = None) -> str | None:
    """``value`` (a digest) keyed with ``secret`` (the process's own when ``None``), as long as
    ``value`` was (8 to 32 hex digits)."""
    if value is None:
        return None
    size = min(max(len(value) // 2, 4), 16)
    hasher = hashlib.blake2b(
        value.encode("utf-8", "surrogatepass"),
        digest_size=size,
        key=_PROCESS_SECRET if secret is None else secret,
        person=_PERSON,
    )
    return hasher.hexdigest()


def safe_tool_name(name: object) -> str:
    """``name`` as a tool name safe to keep, log and show: at most :data:`MAX_TOOL_NAME` characters
    (a longer one ends in ``…``), each character that is not printable (newlines, escapes,
    bidirectional controls) replaced by ``?``; a name that is not a string by its type."""
    if not isinstance(name, str):
        name = f"<{type(name).__name__}>"
    if len(name) <= MAX_TOOL_NAME and name.isprintable():
        return name
    if len(name) > MAX_TOOL_NAME:
        name = name[: MAX_TOOL_NAME - 1] + "…"
    return "".join(char if char.isprintable() else "?" for char in name)


_UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ud800-\udfff\ufeff]"
)
"""Controls, invisible formatting characters, and lone surrogates (a JSON ``"\\ud800"`` decodes
to one; no UTF-8 stream can write it)."""
_UNSAFE_IN_JSON: Final = re.compile(
    "[\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ud800-\udfff\ufeff]"
)
"""What ``json.dumps`` leaves unescaped (it escapes U+0000-U+001F itself)."""


def terminal_safe(text: str) -> str:
    """``text`` with control and invisible formatting characters escaped (``\\x1b``…): a trace may
    hold terminal escape sequences in a tool name or a run id."""
    return _UNSAFE.sub(_escape, text)


def json_text(data: object) -> str:
    """``data`` as indented JSON text with every control character escaped (``json`` leaves
    U+007F-U+009F and invisible formatting characters as they are)."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
