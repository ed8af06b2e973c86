"""The callback handler's run ids as its run tree keeps them."""

from __future__ import annotations

from collections.abc import Hashable
from typing import overload
from uuid import UUID

__all__ = ["RunId", "run_number", "run_text"]

RunId = Hashable
"""A callback's run id as the tree keeps it: a ``UUID`` as its 128-bit number (``UUID.int``),
which hashes in C where a ``UUID`` hashes through a method of its class (a model call looks
run ids up some fifty times); any other id a caller gave (a string) as it is."""


@overload
def run_number(run_id: None) -> None: ...
@overload
def run_number(run_id: Hashable) -> RunId: ...
def run_number(run_id: Hashable | None) -> RunId | None:
    """``run_id`` as the tree keeps it (:data:`RunId`)."""
    if type(run_id) is UUID:
        return run_id.int
    return run_id


def run_text(run_id: RunId) -> str:
    """A run id as LangChain writes it (``str`` of its ``UUID``)."""
    return str(UUID(int=run_id)) if type(run_id) is int else str(run_id)
