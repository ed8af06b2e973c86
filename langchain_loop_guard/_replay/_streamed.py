"""JSON written a piece at a time: a report of a million runs is never one document in memory
(``loop-guard replay --json``). :class:`Streamed` marks an array or object whose items are
made as they are written; :func:`json_chunks` writes it as :func:`~.._core._public.json_text` would.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from langchain_loop_guard._core._public import json_text

__all__ = ["Streamed", "json_chunks", "json_data"]


class Streamed:
    """A JSON array (or, with ``pairs``, an object of ``(key, value)`` pairs) whose items
    :func:`json_chunks` writes one at a time, as they are made."""

    __slots__ = ("items", "pairs")

    def __init__(self, items: Iterable[Any], *, pairs: bool = False) -> None:
        self.items = items
        self.pairs = pairs

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)


def json_data(value: Any) -> Any:
    """``value`` with each :class:`Streamed` array or object made a list or a dict."""
    if not isinstance(value, Streamed):
        return value
    if value.pairs:
        return {key: json_data(item) for key, item in value}
    return [json_data(item) for item in value]


def json_chunks(value: Any, depth: int = 0) -> Iterator[str]:
    """``value`` as :func:`json_text` writes it, in pieces: a :class:`Streamed` array or object
    an item at a time (items may be :class:`Streamed` in turn), any other value at once."""
    if not isinstance(value, Streamed):
        text = json_text(value)
        yield text.replace("\n", "\n" + "  " * depth) if depth else text
        return
    pad = "  " * (depth + 1)
    opening, closing = ("{", "}") if value.pairs else ("[", "]")
    first = True
    for item in value:
        yield f"{opening}\n{pad}" if first else f",\n{pad}"
        first = False
        if value.pairs:
            key, item = item  # noqa: PLW2901 - an object's pair: its key, then its value
            yield f"{json_text(key)}: "
        yield from json_chunks(item, depth + 1)
    yield f"{opening}{closing}" if first else f"\n{'  ' * depth}{closing}"
