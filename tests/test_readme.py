"""The Python examples of the README and the manual each run on their own, as pasted."""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import pytest
from langgraph.warnings import LangGraphDeprecationWarning

from langchain_loop_guard._cli._main import EXIT_OK, main

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "manual.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_SHELL = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


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


def _run(where: str, block: str) -> None:
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        with warnings.catch_warnings():
            # the manual shows LangGraph's create_react_agent, deprecated since LangGraph 1.0
            warnings.filterwarnings("ignore", category=LangGraphDeprecationWarning)
            exec(compile(block, where, "exec"), namespace)
    except Exception as exc:  # pragma: no cover - the failure report
        pytest.fail(f"{where} failed: {exc!r}\n{block}")


@pytest.mark.parametrize(("where", "block"), EXAMPLES)
def test_example_runs_twice_in_the_same_folder(
    where: str,
    block: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Pasted again where it ran (its trace and page left behind), a block still runs: a
    ``record_to=`` trace, which appends, is started afresh."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for attempt in ("first", "second"):
        _run(f"{where} ({attempt} run)", block)
    capsys.readouterr()


def _commands() -> list[list[str]]:
    """The README's shell blocks made only of ``loop-guard`` commands, each as its arguments."""
    found = []
    for block in _SHELL.findall(DOCUMENTS[0].read_text(encoding="utf-8")):
        lines = [line for line in block.splitlines() if line.strip()]
        if lines and all(line.startswith("loop-guard ") for line in lines):
            found += [shlex.split(line)[1:] for line in lines]
    return found


def test_readme_commands_run_twice_on_a_fresh_clone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """demo → replay → ``--html``, and the sweep over a demo trace: each command exits 0, run
    twice in one folder, and reads nothing outside the project (no ``../shared``)."""
    commands = _commands()
    assert ["demo", "--record", "demo-trace.jsonl"] in commands
    assert ["replay", "demo-trace.jsonl", "--html", "demo-report.html"] in commands
    assert not any("../" in arg for command in commands for arg in command)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for _ in range(2):
        for command in commands:
            assert main(command) == EXIT_OK, command
    assert "would stop at event" in capsys.readouterr().out
    assert (tmp_path / "demo-report.html").stat().st_size > 1000


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
    _run(where, block)
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


_WALK = "### Scoring the stops against your own verdicts"
_CSV = re.compile(r"^```csv\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_manuals_labels_walkthrough_runs_twice_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tuning section's demo runs, labels file and replays: each command exits 0 (twice,
    in one folder), and the sweep finds the good run that ``cycle_repeats=2`` would stop."""
    text = DOCUMENTS[1].read_text(encoding="utf-8")
    section = text[text.index(_WALK) : text.index("\n## ", text.index(_WALK))]
    (labels,) = _CSV.findall(section)
    lines = [line for block in _SHELL.findall(section) for line in block.splitlines() if line]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "labels.csv").write_text(labels, encoding="utf-8")
    for _ in range(2):
        for line in lines:
            words = shlex.split(line)
            if words[:2] == ["mkdir", "-p"]:
                Path(words[2]).mkdir(parents=True, exist_ok=True)
            else:
                assert words[0] == "loop-guard", line
                assert main(words[1:]) == EXIT_OK, line
        out = capsys.readouterr().out
        assert "loops stopped 3 of 3, loops missed 0, good runs stopped 1 of 1" in out
        assert "good runs that would stop: demo-productive" in out
    assert '<svg class="verdicts"' in (tmp_path / "labels-sweep.html").read_text("utf-8")
