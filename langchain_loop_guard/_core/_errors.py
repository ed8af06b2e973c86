"""Exceptions that do not depend on LangChain (the typed interrupt lives in ``_stop``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

__all__ = ["ConfigProblem", "LoopGuardConfigError", "LoopGuardError"]


class LoopGuardError(Exception):
    """Base class of every exception this package raises on purpose."""


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with a configuration, as data.

    Attributes:
        source: where the bad value came from, e.g. ``"code"``,
            ``"project file /repo/.loop-guard.json"`` or ``"environment LOOP_GUARD_MODE"``.
        key: the offending key or environment variable, when there is one.
        value: the offending value as it was given, when there is one.
        allowed: what would have been accepted.
        message: the whole problem on one line, naming all of the above.
    """

    source: str
    key: str | None
    value: object
    allowed: str
    message: str

    def __str__(self) -> str:
        return self.message


class LoopGuardConfigError(LoopGuardError, ValueError):
    """The configuration is invalid: the caller's fault, never the agent's.

    Attributes:
        source, key, value, allowed: those of the (first) problem, as :class:`ConfigProblem`.
        problems: every problem found, one line each.
        details: the same problems as :class:`ConfigProblem` records (empty when the error
            was raised from a bare message).
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        key: str | None = None,
        value: object = None,
        allowed: str | None = None,
        problems: tuple[str, ...] = (),
        details: tuple[ConfigProblem, ...] = (),
    ) -> None:
        super().__init__(message)
        self.source = source
        self.key = key
        self.value = value
        self.allowed = allowed
        self.problems = problems or (message,)
        self.details = details

    @classmethod
    def from_problems(cls, problems: Sequence[ConfigProblem]) -> Self:
        """One error that reports every problem in ``problems`` (at least one), with the first one's
        source, key, value and allowed as its attributes."""
        first = problems[0]
        lines = tuple(problem.message for problem in problems)
        if len(lines) == 1:
            message = f"invalid loop-guard configuration: {lines[0]}"
        else:
            listing = "\n".join(f"  - {line}" for line in lines)
            message = f"invalid loop-guard configuration ({len(lines)} problems):\n{listing}"
        return cls(
            message,
            source=first.source,
            key=first.key,
            value=first.value,
            allowed=first.allowed,
            problems=lines,
            details=tuple(problems),
        )
