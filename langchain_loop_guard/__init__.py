"""Stop runaway LLM-agent loops in LangChain and LangGraph before they burn tokens.

The public names are imported lazily, so the pure detector (``LoopDetector``, ``Verdict``,
``Signal``, ``LoopGuardConfig``) works without importing LangChain or LangGraph at all.
``%load_ext langchain_loop_guard`` loads the IPython magic ``%loop_guard``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_loop_guard._cli._magic import load_ipython_extension as load_ipython_extension
    from langchain_loop_guard._cli._magic import (
        unload_ipython_extension as unload_ipython_extension,
    )
    from langchain_loop_guard._core._config import LoopGuardConfig as LoopGuardConfig
    from langchain_loop_guard._core._cost import LoopCost as LoopCost
    from langchain_loop_guard._core._detector import LoopDetector as LoopDetector
    from langchain_loop_guard._core._detector import Signal as Signal
    from langchain_loop_guard._core._detector import Verdict as Verdict
    from langchain_loop_guard._core._errors import LoopGuardConfigError as LoopGuardConfigError
    from langchain_loop_guard._core._errors import LoopGuardError as LoopGuardError
    from langchain_loop_guard._integrations._graph_state import LoopGuardState as LoopGuardState
    from langchain_loop_guard._integrations._guard_messages import guard_kind as guard_kind
    from langchain_loop_guard._integrations._handler import (
        LoopGuardCallbackHandler as LoopGuardCallbackHandler,
    )
    from langchain_loop_guard._integrations._hint import with_loop_hint as with_loop_hint
    from langchain_loop_guard._integrations._middleware import (
        LoopGuardMiddleware as LoopGuardMiddleware,
    )
    from langchain_loop_guard._integrations._node import LoopGuardNode as LoopGuardNode
    from langchain_loop_guard._integrations._publish import CallbackStopFilter as CallbackStopFilter
    from langchain_loop_guard._integrations._repair import arepair_thread as arepair_thread
    from langchain_loop_guard._integrations._repair import repair_thread as repair_thread
    from langchain_loop_guard._integrations._stop import LoopDetected as LoopDetected
    from langchain_loop_guard._integrations._stop import LoopGuardStop as LoopGuardStop
    from langchain_loop_guard._integrations._stop import OnStop as OnStop
    from langchain_loop_guard._replay._calibrate import Calibration as Calibration
    from langchain_loop_guard._replay._calibrate import calibrate as calibrate
    from langchain_loop_guard._replay._replay import ReplayReport as ReplayReport
    from langchain_loop_guard._replay._replay import replay as replay
    from langchain_loop_guard._replay._trace import TraceFormatError as TraceFormatError

__version__ = "0.2.0"

_EXPORTS: dict[str, str] = {
    "Calibration": "langchain_loop_guard._replay._calibrate",
    "CallbackStopFilter": "langchain_loop_guard._integrations._publish",
    "LoopCost": "langchain_loop_guard._core._cost",
    "LoopDetected": "langchain_loop_guard._integrations._stop",
    "LoopDetector": "langchain_loop_guard._core._detector",
    "LoopGuardCallbackHandler": "langchain_loop_guard._integrations._handler",
    "LoopGuardConfig": "langchain_loop_guard._core._config",
    "LoopGuardConfigError": "langchain_loop_guard._core._errors",
    "LoopGuardError": "langchain_loop_guard._core._errors",
    "LoopGuardMiddleware": "langchain_loop_guard._integrations._middleware",
    "LoopGuardNode": "langchain_loop_guard._integrations._node",
    "LoopGuardState": "langchain_loop_guard._integrations._graph_state",
    "LoopGuardStop": "langchain_loop_guard._integrations._stop",
    "OnStop": "langchain_loop_guard._integrations._stop",
    "ReplayReport": "langchain_loop_guard._replay._replay",
    "Signal": "langchain_loop_guard._core._detector",
    "TraceFormatError": "langchain_loop_guard._replay._trace",
    "Verdict": "langchain_loop_guard._core._detector",
    "arepair_thread": "langchain_loop_guard._integrations._repair",
    "calibrate": "langchain_loop_guard._replay._calibrate",
    "guard_kind": "langchain_loop_guard._integrations._guard_messages",
    "load_ipython_extension": "langchain_loop_guard._cli._magic",
    "repair_thread": "langchain_loop_guard._integrations._repair",
    "replay": "langchain_loop_guard._replay._replay",
    "unload_ipython_extension": "langchain_loop_guard._cli._magic",
    "with_loop_hint": "langchain_loop_guard._integrations._hint",
}

__all__ = list(_EXPORTS)  # the names above, in their (sorted) order


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
