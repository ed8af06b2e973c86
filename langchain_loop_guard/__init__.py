"""Stop runaway LLM-agent loops in LangChain and LangGraph before they burn tokens.

The public names are imported lazily, so the pure detector (``LoopDetector``, ``Verdict``,
``Signal``, ``LoopGuardConfig``) works without importing LangChain or LangGraph at all.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_loop_guard._config import LoopGuardConfig
    from langchain_loop_guard._detector import LoopDetector, Signal, Verdict
    from langchain_loop_guard._errors import LoopGuardConfigError, LoopGuardError

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "LoopDetector": "langchain_loop_guard._detector",
    "LoopGuardConfig": "langchain_loop_guard._config",
    "LoopGuardConfigError": "langchain_loop_guard._errors",
    "LoopGuardError": "langchain_loop_guard._errors",
    "Signal": "langchain_loop_guard._detector",
    "Verdict": "langchain_loop_guard._detector",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'langchain_loop_guard' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
