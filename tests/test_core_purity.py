"""The pure core imports nothing from LangChain or LangGraph (STYLE §1)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Runs in a fresh interpreter: this test process has long imported LangChain.
PROBE = textwrap.dedent(
    """
    import importlib
    import sys
    from importlib.abc import MetaPathFinder

    BLOCKED = {"langchain", "langchain_core", "langgraph"}


    class Blocker(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ImportError(f"blocked by the purity test: {name}")
            return None


    def loaded():
        return sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)


    assert loaded() == [], loaded()
    sys.meta_path.insert(0, Blocker())
    try:
        import langchain_core.messages
    except ImportError:
        pass
    else:
        raise AssertionError("the blocker does not block")

    from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal, Verdict

    for name in ("_detector", "_signature", "_config", "_messages", "_errors"):
        importlib.import_module(f"langchain_loop_guard._core.{name}")

    detector = LoopDetector(LoopGuardConfig())
    verdicts = [detector.tool_call("read", {"path": "a.ts"}) for _ in range(3)]
    assert [v.action for v in verdicts] == ["allow", "allow", "block"], verdicts
    assert isinstance(verdicts[-1], Verdict)
    assert verdicts[-1].signal is Signal.REPEATED_TOOL_CALL
    assert loaded() == [], loaded()
    print("pure")
    """
)


@pytest.mark.slow
def test_core_imports_and_detects_with_langchain_and_langgraph_blocked() -> None:
    """Import the detector, signatures, config, messages and errors with LangChain blocked."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pure"
