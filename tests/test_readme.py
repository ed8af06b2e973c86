"""The README's Python examples run, in order, as a user would paste them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks() -> list[str]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


def test_readme_has_python_examples() -> None:
    """The manual shows runnable code for every integration."""
    code = "\n".join(_blocks())
    for name in (
        "LoopGuardCallbackHandler",
        "LoopGuardMiddleware",
        "LoopGuardNode",
        "with_loop_hint",
        "LoopDetector",
    ):
        assert name in code


def test_readme_examples_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every Python block runs in one namespace, top to bottom, offline."""
    monkeypatch.chdir(tmp_path)  # no project config file of the checkout applies
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    namespace: dict[str, object] = {"__name__": "readme"}
    for index, block in enumerate(_blocks()):
        try:
            exec(compile(block, f"README.md block {index + 1}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure report
            pytest.fail(f"README.md Python block {index + 1} failed: {exc!r}\n{block}")
    out = capsys.readouterr().out
    assert "Loop guard stopped the run" in out
    assert "루프 가드" in out
