"""The curated public surface of ``langchain_loop_guard``."""

from __future__ import annotations

import importlib

import pytest

import langchain_loop_guard

EXPECTED = [
    "Calibration",
    "CallbackStopFilter",
    "LoopCost",
    "LoopDetected",
    "LoopDetector",
    "LoopGuardCallbackHandler",
    "LoopGuardConfig",
    "LoopGuardConfigError",
    "LoopGuardError",
    "LoopGuardMiddleware",
    "LoopGuardNode",
    "LoopGuardState",
    "LoopGuardStop",
    "OnStop",
    "ReplayReport",
    "Signal",
    "TraceFormatError",
    "Verdict",
    "arepair_thread",
    "calibrate",
    "guard_kind",
    "load_ipython_extension",
    "repair_thread",
    "replay",
    "unload_ipython_extension",
    "with_loop_hint",
]


def test_all_is_the_sorted_expected_list() -> None:
    """``__all__`` is exactly the public names, sorted."""
    assert langchain_loop_guard.__all__ == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_every_public_name_resolves(name: str) -> None:
    """Each lazily exported name imports and is the object of its private module."""
    value = getattr(langchain_loop_guard, name)
    module = importlib.import_module(langchain_loop_guard._EXPORTS[name])
    assert value is getattr(module, name)


def test_unknown_name_is_an_attribute_error() -> None:
    """A typo is an AttributeError naming the module, as for any module."""
    with pytest.raises(AttributeError, match="langchain_loop_guard"):
        _ = langchain_loop_guard.LoopGuardHandler  # type: ignore[attr-defined]


def test_exceptions_form_one_hierarchy() -> None:
    """Both exceptions are LoopGuardErrors; the config error is also a ValueError."""
    from langchain_loop_guard import (
        LoopDetected,
        LoopGuardConfigError,
        LoopGuardError,
        TraceFormatError,
    )

    assert issubclass(LoopDetected, LoopGuardError)
    assert issubclass(TraceFormatError, LoopGuardError)
    assert issubclass(LoopGuardConfigError, LoopGuardError)
    assert issubclass(LoopGuardConfigError, ValueError)


def test_loop_detected_bubbles_through_langgraph() -> None:
    """``LoopDetected`` is a ``GraphBubbleUp``, so LangGraph never swallows or retries it."""
    from langgraph.errors import GraphBubbleUp

    from langchain_loop_guard import LoopDetected

    assert issubclass(LoopDetected, GraphBubbleUp)
