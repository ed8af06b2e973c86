"""Exceptions that do not depend on LangChain (the typed interrupt lives in ``_interrupt``)."""

from __future__ import annotations

__all__ = ["LoopGuardConfigError", "LoopGuardError"]


class LoopGuardError(Exception):
    """Base class of every exception this package raises on purpose."""


class LoopGuardConfigError(LoopGuardError, ValueError):
    """The configuration is invalid: the caller's fault, never the agent's.

    Attributes:
        source: where the bad value came from (``"code"``, ``"environment"``, a file path).
        key: the offending key or environment variable name, when there is one.
        value: the offending value, when there is one.
        allowed: what would have been accepted.
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
    ) -> None:
        super().__init__(message)
        self.source = source
        self.key = key
        self.value = value
        self.allowed = allowed
        self.problems = problems or (message,)
