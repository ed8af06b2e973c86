"""The Python examples of the README and the manual each run on their own, as pasted."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from langgraph.warnings import LangGraphDeprecationWarning

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "manual.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks(path: Path) -> list[str]:
    return _BLOCK.findall(path.read_text(encoding="utf-8"))


EXAMPLES = [
    pytest.param(f"{path.name} block {index + 1}", block, id=f"{path.name}-{index + 1}")
    for path in DOCUMENTS
    for index, block in enumerate(_blocks(path))
]


def test_readme_has_python_examples() -> None:
    """The README shows runnable code for every integration."""
    code = "\n".join(_blocks(DOCUMENTS[0]))
    for name in (
        "LoopGuardCallbackHandler",
        "LoopGuardMiddleware",
        "LoopGuardNode",
        "with_loop_hint",
        "LoopDetector",
    ):
        assert name in code


def test_manual_is_linked_from_the_readme() -> None:
    """A reader of the README finds the manual, and the manual the API reference."""
    assert "(docs/manual.md)" in DOCUMENTS[0].read_text(encoding="utf-8")
    assert "(api.md)" in DOCUMENTS[1].read_text(encoding="utf-8")


def test_every_document_has_examples() -> None:
    """The parametrization below found blocks in both documents (none would test nothing)."""
    names = {str(param.values[0]).split()[0] for param in EXAMPLES}
    assert names == {"README.md", "manual.md"}


@pytest.mark.parametrize(("where", "block"), EXAMPLES)
def test_example_runs_when_pasted_alone(
    where: str,
    block: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each block runs in a fresh namespace and an empty directory, offline."""
    monkeypatch.chdir(tmp_path)  # no project config file of the checkout applies
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        with warnings.catch_warnings():
            # the manual shows LangGraph's create_react_agent, deprecated since LangGraph 1.0
            warnings.filterwarnings("ignore", category=LangGraphDeprecationWarning)
            exec(compile(block, where, "exec"), namespace)
    except Exception as exc:  # pragma: no cover - the failure report
        pytest.fail(f"{where} failed: {exc!r}\n{block}")
    capsys.readouterr()


def test_readme_examples_print_the_stops_in_both_languages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's examples show a stop reason in English and in Korean."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for index, block in enumerate(_blocks(DOCUMENTS[0])):
        exec(compile(block, f"README.md block {index + 1}", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert "Loop guard stopped the run" in out
    assert "루프 가드" in out
