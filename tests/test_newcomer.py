"""A newcomer's first hour (issue 40): a forgotten repair is told, the remedy is in every
output, a plain script stays quiet, the version and the README agree, skip reasons are
portable."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard import LoopDetected, LoopGuardCallbackHandler, replay
from langchain_loop_guard._cli._main import EXIT_OK, main
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

ROOT = Path(__file__).resolve().parent.parent


# --- point 3: a stop left a call unanswered, and nobody repaired it ------------------------------


def _stopped_thread(
    thread: str,
) -> tuple[LoopGuardCallbackHandler, object, dict[str, object], LoopDetected]:
    guard = LoopGuardCallbackHandler()
    read_file = scripted_tool("read_file", "the contents of notes.txt")
    model = ScriptedChatModel(
        script=[call("read_file", {"path": "notes.txt"})] * 3 + ["done", "done"]
    )
    agent = create_agent(model, [read_file], checkpointer=InMemorySaver())
    config: dict[str, object] = {"configurable": {"thread_id": thread}, "callbacks": [guard]}
    with pytest.raises(LoopDetected) as info:
        agent.invoke({"messages": [("user", "Summarize notes.txt")]}, config)
    return guard, agent, config, info.value


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "langchain_loop_guard" and r.levelno >= logging.WARNING
    ]


def test_the_next_run_on_an_unrepaired_thread_warns_once_with_the_repair(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Forgetting ``stop.repair()``: the next run on the thread logs one WARNING naming the
    thread, the unanswered call and the line that repairs it; the run after it, none."""
    _, agent, config, _ = _stopped_thread("chat-1")
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        agent.invoke({"messages": [("user", "Just tell me what you found.")]}, config)  # type: ignore[attr-defined]
        agent.invoke({"messages": [("user", "Thanks.")]}, config)  # type: ignore[attr-defined]
    (warning,) = _warnings(caplog)
    assert "thread=chat-1" in warning
    assert "1 tool call(s)" in warning
    assert "stop.repair(agent, config)" in warning
    assert 'repair_thread(agent, {"configurable": {"thread_id": \'chat-1\'}})' in warning


def test_a_repaired_thread_gets_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    """After ``stop.repair(agent, config)`` the next run is valid: nothing to warn about."""
    _, agent, config, stop = _stopped_thread("chat-2")
    assert stop.repair(agent, config) == 1
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        agent.invoke({"messages": [("user", "Just tell me what you found.")]}, config)  # type: ignore[attr-defined]
    assert _warnings(caplog) == []


# --- point 6: the remedy in every output ---------------------------------------------------------


@pytest.fixture(scope="module")
def cycle_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's cycle, recorded."""
    folder = tmp_path_factory.mktemp("cycle")
    trace = folder / "cycle-trace.jsonl"
    assert main(["demo", "--loop", "cycle", "--record", str(trace)]) == EXIT_OK
    return trace


REMEDY = "If this run was meant to go on, raise `cycle_repeats`."


def test_the_demos_default_output_names_the_remedy(capsys: pytest.CaptureFixture[str]) -> None:
    """``loop-guard demo`` (no options) says which setting would have let the run go on."""
    assert main(["demo"]) == EXIT_OK
    out = capsys.readouterr().out
    result = out.split("Result:", 1)[1]
    assert "raise its limit with `tool_threshold_overrides`" in result


def test_every_replay_output_names_the_remedy(
    cycle_trace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The text report, its JSON (the reason and the remedy's keys) and the page."""
    capsys.readouterr()
    assert main(["replay", str(cycle_trace)]) == EXIT_OK
    assert REMEDY in capsys.readouterr().out
    assert main(["replay", str(cycle_trace), "--json"]) == EXIT_OK
    stop = json.loads(capsys.readouterr().out)["runs"][0]["stop"]
    assert REMEDY in stop["reason"]
    assert stop["remedy"] == ["cycle_repeats"]
    page = tmp_path / "page.html"
    assert main(["replay", str(cycle_trace), "--html", str(page)]) == EXIT_OK
    assert "raise <code>cycle_repeats</code>" in page.read_text("utf-8")
    capsys.readouterr()
    sweep = main(["replay", str(cycle_trace), "--sweep", "cycle_repeats=2,3", "--json"])
    assert sweep == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert REMEDY in next(iter(data["settings"][0]["stops"].values()))["reason"]


def test_the_replay_report_in_korean_names_the_remedy_too(cycle_trace: Path) -> None:
    """The remedy sentence comes from the catalogs."""
    from langchain_loop_guard import LoopGuardConfig

    text = str(replay(cycle_trace, LoopGuardConfig(locale="ko")))
    assert "`cycle_repeats`" in text
    assert "높이세요" in text


# --- point 9: a plain script prints nothing for a stop -------------------------------------------

_SCRIPT = """
from langchain.agents import create_agent
from langchain_loop_guard import LoopDetected, LoopGuardCallbackHandler
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

model = ScriptedChatModel(script=[call("read_file", {"path": "notes.txt"})] * 10 + ["done"])
agent = create_agent(model, [scripted_tool("read_file", "contents")])
try:
    agent.invoke({"messages": [("user", "go")]}, {"callbacks": [LoopGuardCallbackHandler()]})
except LoopDetected as stop:
    print("stopped", stop.signal)
"""


def test_a_plain_script_prints_nothing_on_stderr_for_a_stop(tmp_path: Path) -> None:
    """No logging configured: the stop reaches the code as ``LoopDetected`` and the
    ``langchain_loop_guard`` logger stays silent below WARNING."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=300,
    )
    assert done.stdout.strip() == "stopped repeated_tool_call"
    assert done.stderr == ""


def test_the_stop_line_is_there_for_who_asks(caplog: pytest.LogCaptureFixture) -> None:
    """At INFO on the named logger, the stop's line is logged, with its fields."""
    model = ScriptedChatModel(script=[call("read_file", {"path": "a"})] * 5 + ["done"])
    agent = create_agent(model, [scripted_tool("read_file", "contents")])
    with (
        caplog.at_level(logging.INFO, logger="langchain_loop_guard"),
        pytest.raises(LoopDetected),
    ):
        agent.invoke({"messages": [("user", "go")]}, {"callbacks": [LoopGuardCallbackHandler()]})
    (line,) = [r for r in caplog.records if getattr(r, "loop_guard_action", None) == "block"]
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith("loop-guard block: run=")


# --- point 10: a real version, and a README that speaks of versions that exist -------------------


def test_the_version_is_0_2_0_and_the_readme_names_it() -> None:
    """``pyproject.toml`` says 0.2.0; the README's upgrading section names 0.1.0 and 0.2.0
    instead of "this release", "the previous release" or a "v3" the package never had."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["version"] == "0.2.0"
    readme = (ROOT / "README.md").read_text("utf-8")
    upgrading = readme.split("## Upgrading", 1)[1].split("\n## ", 1)[0]
    assert "0.1.0" in upgrading
    assert "0.2.0" in upgrading
    for vague in ("this release", "the previous release", "v3", "v4"):
        assert vague not in upgrading.lower(), vague


def test_the_changelog_has_a_section_for_the_version_in_pyproject() -> None:
    """The CHANGELOG is cut into a release: the version ``pyproject.toml`` names has its own
    dated section right under ``[Unreleased]``, as Keep a Changelog lays them out."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]
    headings = re.findall(r"^## \[(.+?)\](.*)$", (ROOT / "CHANGELOG.md").read_text("utf-8"), re.M)
    assert [name for name, _ in headings[:2]] == ["Unreleased", version]
    assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", headings[1][1])


# --- point 11: no absolute path in a skip reason -------------------------------------------------

_SKIP_REASON = re.compile(r"""reason=f["'][^"']*\{(\w+)[^}]*\}""")


def test_no_skip_reason_names_an_absolute_path() -> None:
    """A skip reason is read on every machine: no value it interpolates is an absolute path
    (each test module is imported to read the values its skip reasons name)."""
    import importlib.util

    offenders = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        names = set(_SKIP_REASON.findall(path.read_text("utf-8")))
        if not names:
            continue
        spec = importlib.util.spec_from_file_location(f"_skips_{path.stem}", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name in names:
            value = getattr(module, name, None)
            if isinstance(value, str | Path) and Path(value).is_absolute():
                offenders.append(f"{path.name}: {name}")
    assert offenders == []


# --- point 11: exporting LangSmith runs with their feedback, as the manual says ------------------

_EXPORT = "## Exporting LangSmith runs with their feedback"
_PY = re.compile(r"^```py\n(.*?)^```", re.MULTILINE | re.DOTALL)
_BASH = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_manuals_langsmith_export_runs_against_the_sdks_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two traced runs (one looping), feedback given through the SDK's client, the manual's
    export block and its commands run as written: ``--feedback correctness`` takes the
    looping run as a loop and the other as fine, and the loop is stopped."""
    from langsmith import Client
    from langsmith_service import PROJECT_ID, LangSmithService, forget_environment

    manual = (ROOT / "docs" / "manual.md").read_text("utf-8")
    section = manual[manual.index(_EXPORT) : manual.index("\n## ", manual.index(_EXPORT))]
    (block,) = _PY.findall(section)
    commands = [
        shlex_split(line)[1:]
        for found in _BASH.findall(section)
        for line in found.splitlines()
        if line.strip()
    ]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    service = LangSmithService(monkeypatch)
    try:
        scripts = {
            "looping": [call("search", {"q": "weather"})] * 5 + ["done"],
            "fine": [call("search", {"q": "weather"}), call("search", {"q": "rain"}), "done"],
        }
        for name, script in scripts.items():
            agent = create_agent(ScriptedChatModel(script=script), [scripted_tool("search", "x")])
            agent.invoke({"messages": [("user", "go")]}, {"run_name": name})
        service.flush()
        roots = {
            run["name"]: run_id
            for run_id, run in service.runs().items()
            if not run.get("parent_run_id")
        }
        client = Client()
        for name, score in (("looping", 0), ("fine", 1)):
            client.create_feedback(
                roots[name], key="correctness", score=score, session_id=PROJECT_ID
            )
        exec(compile(block, "manual.md export", "exec"), {"__name__": "__main__"})
    finally:
        service.close()
        monkeypatch.undo()
        forget_environment()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert (tmp_path / "langsmith-runs.jsonl").stat().st_size > 1000
    capsys.readouterr()
    for command in commands:
        assert main(command) == EXIT_OK, command
    out = capsys.readouterr().out
    assert "loops stopped 1 of 1, loops missed 0, good runs stopped 0 of 1" in out
    assert (tmp_path / "sweep.html").exists()


def shlex_split(line: str) -> list[str]:
    """A shell line as its words."""
    import shlex

    return shlex.split(line)
