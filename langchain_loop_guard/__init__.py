"""Stop runaway LLM-agent loops in LangChain and LangGraph before they burn tokens.

The public names are imported lazily, so the pure detector (``LoopDetector``, ``Verdict``,
``Signal``, ``LoopGuardConfig``) works without importing LangChain or LangGraph at all.
``%load_ext langchain_loop_guard`` loads the IPython magic ``%loop_guard``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_loop_guard._calibrate import Calibration as Calibration
    from langchain_loop_guard._calibrate import calibrate as calibrate
    from langchain_loop_guard._config import LoopGuardConfig as LoopGuardConfig
    from langchain_loop_guard._detector import LoopDetector as LoopDetector
    from langchain_loop_guard._detector import Signal as Signal
    from langchain_loop_guard._detector import Verdict as Verdict
    from langchain_loop_guard._errors import LoopGuardConfigError as LoopGuardConfigError
    from langchain_loop_guard._errors import LoopGuardError as LoopGuardError
    from langchain_loop_guard._graph_state import LoopGuardState as LoopGuardState
    from langchain_loop_guard._guard_messages import guard_kind as guard_kind
    from langchain_loop_guard._handler import LoopGuardCallbackHandler as LoopGuardCallbackHandler
    from langchain_loop_guard._hint import with_loop_hint as with_loop_hint
    from langchain_loop_guard._magic import load_ipython_extension as load_ipython_extension
    from langchain_loop_guard._magic import unload_ipython_extension as unload_ipython_extension
    from langchain_loop_guard._middleware import LoopGuardMiddleware as LoopGuardMiddleware
    from langchain_loop_guard._node import LoopGuardNode as LoopGuardNode
    from langchain_loop_guard._publish import CallbackStopFilter as CallbackStopFilter
    from langchain_loop_guard._repair import arepair_thread as arepair_thread
    from langchain_loop_guard._repair import repair_thread as repair_thread
    from langchain_loop_guard._replay import ReplayReport as ReplayReport
    from langchain_loop_guard._replay import replay as replay
    from langchain_loop_guard._stop import LoopDetected as LoopDetected
    from langchain_loop_guard._stop import LoopGuardStop as LoopGuardStop
    from langchain_loop_guard._stop import OnStop as OnStop
    from langchain_loop_guard._trace import TraceFormatError as TraceFormatError

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Calibration": "langchain_loop_guard._calibrate",
    "CallbackStopFilter": "langchain_loop_guard._publish",
    "LoopDetected": "langchain_loop_guard._stop",
    "LoopDetector": "langchain_loop_guard._detector",
    "LoopGuardCallbackHandler": "langchain_loop_guard._handler",
    "LoopGuardConfig": "langchain_loop_guard._config",
    "LoopGuardConfigError": "langchain_loop_guard._errors",
    "LoopGuardError": "langchain_loop_guard._errors",
    "LoopGuardMiddleware": "langchain_loop_guard._middleware",
    "LoopGuardNode": "langchain_loop_guard._node",
    "LoopGuardState": "langchain_loop_guard._graph_state",
    "LoopGuardStop": "langchain_loop_guard._stop",
    "OnStop": "langchain_loop_guard._stop",
    "ReplayReport": "langchain_loop_guard._replay",
    "Signal": "langchain_loop_guard._detector",
    "TraceFormatError": "langchain_loop_guard._trace",
    "Verdict": "langchain_loop_guard._detector",
    "arepair_thread": "langchain_loop_guard._repair",
    "calibrate": "langchain_loop_guard._calibrate",
    "guard_kind": "langchain_loop_guard._guard_messages",
    "load_ipython_extension": "langchain_loop_guard._magic",
    "repair_thread": "langchain_loop_guard._repair",
    "replay": "langchain_loop_guard._replay",
    "unload_ipython_extension": "langchain_loop_guard._magic",
    "with_loop_hint": "langchain_loop_guard._hint",
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
