"""Which scope a run is guarded in: ``scope="auto"`` (the default) follows what the app is.

A run with a checkpointer and a ``thread_id`` is a conversation: its messages come back at the
next invocation, so the guard keeps the thread's history too (``"thread"``). Anything else is
guarded one invocation at a time (``"run"``). A scope set in the configuration is taken as set.
Every guard asks :func:`choose_scope`, so the three integrations choose alike (SPEC §13 C1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from langchain_loop_guard._core._messages import translator

if TYPE_CHECKING:
    from langchain_loop_guard._core._config import LoopGuardConfig, Scope

__all__ = [
    "CHECKPOINTER_KEY",
    "RunScope",
    "ScopeChoice",
    "ScopeReason",
    "choose_scope",
    "has_checkpointer",
    "scoped",
]

RunScope = Literal["run", "thread"]
"""The scope a run is guarded in, once ``"auto"`` is resolved."""

ScopeReason = Literal["configured", "conversation", "no_thread_id", "no_checkpointer"]

CHECKPOINTER_KEY = "__pregel_checkpointer"
"""Where LangGraph puts the graph's checkpointer in a node's ``configurable`` (its
``CONFIG_KEY_CHECKPOINTER``; the API server's threads have one there too)."""


@dataclass(frozen=True, slots=True)
class ScopeChoice:
    """The scope of one run and why it was chosen.

    Attributes:
        scope: ``"run"`` or ``"thread"``.
        reason: ``"configured"`` (``scope`` was set), ``"conversation"`` (``"auto"``: a
            checkpointer and a ``thread_id``), ``"no_thread_id"`` or ``"no_checkpointer"``
            (``"auto"``, guarded one invocation at a time).
    """

    scope: RunScope
    reason: ScopeReason

    @property
    def per_thread(self) -> bool:
        return self.scope == "thread"

    @classmethod
    def stored(cls, value: object) -> ScopeChoice | None:
        """The choice as a graph guard saves it in its state (``[scope, reason]``), or
        ``None`` when it is not one."""
        if isinstance(value, list | tuple) and len(value) == 2:
            scope, reason = value
            if scope in get_args(RunScope) and reason in get_args(ScopeReason):
                return cls(scope, reason)
        return None

    def describe(self, locale: str = "en") -> str:
        """The choice in words, for ``status`` and ``inspect``: ``thread (auto: …)``."""
        tr = translator(locale)
        why = {
            "configured": tr.gettext("set in the configuration"),
            "conversation": tr.gettext("auto: the run has a checkpointer and a thread_id"),
            "no_thread_id": tr.gettext("auto: the run has no thread_id"),
            "no_checkpointer": tr.gettext("auto: the run has no checkpointer"),
        }[self.reason]
        return f"{self.scope} ({why})"


def choose_scope(configured: Scope, thread_id: object, checkpointer: bool) -> ScopeChoice:
    """The scope of a run under the configured ``scope``, given its ``thread_id`` (``None`` or
    ``""`` for none) and whether it has a checkpointer. ``"thread"`` without a ``thread_id``
    has no thread to keep: such a run is guarded alone, as before."""
    has_thread = thread_id not in (None, "")
    if configured == "run":
        return _CONFIGURED_RUN
    if configured == "thread":
        return _CONFIGURED_THREAD if has_thread else _NO_THREAD
    if not has_thread:
        return _NO_THREAD
    return _CONVERSATION if checkpointer else _NO_CHECKPOINTER


def has_checkpointer(config: Mapping[str, object] | None) -> bool:
    """Whether a node's runnable config carries a checkpointer (LangGraph puts it there)."""
    configurable = (config or {}).get("configurable")
    return isinstance(configurable, Mapping) and configurable.get(CHECKPOINTER_KEY) is not None


def scoped(config: LoopGuardConfig, choice: ScopeChoice) -> LoopGuardConfig:
    """``config`` with ``scope`` set to the chosen one, for a run's detector (whose signals
    read ``"thread"``); ``config`` itself when it says so already."""
    if config.scope == choice.scope:
        return config
    return config.model_copy(update={"scope": choice.scope})


_CONFIGURED_RUN = ScopeChoice("run", "configured")
_CONFIGURED_THREAD = ScopeChoice("thread", "configured")
_CONVERSATION = ScopeChoice("thread", "conversation")
_NO_THREAD = ScopeChoice("run", "no_thread_id")
_NO_CHECKPOINTER = ScopeChoice("run", "no_checkpointer")
