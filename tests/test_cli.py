"""The ``loop-guard`` command: the demo's runs and timeline, the config view, exit codes."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from itertools import product
from pathlib import Path

import pytest

from langchain_loop_guard._cli import _demo
from langchain_loop_guard._cli._demo import (
    GuardVerdict,
    ModelTurn,
    ToolRun,
    expected_signal,
    render,
    run_demo,
)
from langchain_loop_guard._cli._demo_kinds import INTEGRATIONS, LOOP_KINDS, Integration
from langchain_loop_guard._cli._main import COMMANDS, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from langchain_loop_guard._core._messages import translator

CANARY = "canary-7f3a9c"


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No configuration file or LOOP_GUARD_* variable of the machine leaks into a test."""
    for name in list(os.environ):
        if name.startswith("LOOP_GUARD_") and not name.startswith("LOOP_GUARD_TEST_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return project


def _signal_name(loop: str) -> str | None:
    signal = expected_signal(loop)  # type: ignore[arg-type]
    return signal.value if signal is not None else None


# --- loop-guard demo ---------------------------------------------------------------------------


@pytest.mark.parametrize(("loop", "integration"), list(product(LOOP_KINDS, INTEGRATIONS)))
def test_demo_stops_each_loop_with_its_signal(
    loop: str, integration: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every scenario, under every integration, trips exactly its designed signal first."""
    assert main(["demo", "--loop", loop, "--integration", integration]) == EXIT_OK
    out = capsys.readouterr().out
    signal = _signal_name(loop)
    if signal is None:
        assert "no loop was detected" in out
        assert "[block" not in out
        assert "[abort" not in out
    else:
        assert f"Result: the loop guard stopped the run ({signal})." in out
        assert f" {signal}] " in out  # the verdict's line in the timeline


def test_demo_defaults_to_the_repeat_loop_through_callbacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``loop-guard demo`` alone is the README's command: a repeated call, stopped."""
    assert main(["demo"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "loop repeat, mode on, integration callbacks" in out
    assert "(repeated_tool_call)" in out


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_demo_in_observe_mode_reports_and_runs_to_the_end(
    integration: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Observe mode shows the report in the timeline and the run reaches its final answer."""
    assert main(["demo", "--loop", "cycle", "--mode", "observe", "--integration", integration]) == 0
    out = capsys.readouterr().out
    assert "[observe tool_cycle]" in out
    assert "Loops reported: 1." in out
    assert "stopped the run (" not in out


def test_demo_in_off_mode_checks_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """Off mode: no verdict at all, and the loop runs until the script gives up."""
    assert main(["demo", "--loop", "repeat", "--mode", "off"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "loop guard " not in out
    assert "nothing was checked (mode off)" in out


@pytest.mark.parametrize(
    ("loop", "integration"),
    [("repeat", "callbacks"), ("error", "middleware"), ("assistant", "node")],
)
def test_demo_speaks_korean(
    loop: str, integration: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--locale ko`` translates the timeline and the guard's own stop reason."""
    assert main(["demo", "--loop", loop, "--integration", integration, "--locale", "ko"]) == 0
    out = capsys.readouterr().out
    tr = translator("ko")
    assert tr.gettext("Loop guard stopped the run: {reason}").split("{")[0] in out
    assert tr.gettext("model") in out
    assert f"({_signal_name(loop)})" in out


@pytest.mark.parametrize("value", ["ko", "KO", "ko_KR", "ko-KR", "ko_KR.UTF-8"])
def test_demo_follows_loop_guard_locale(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``--locale``, ``LOOP_GUARD_LOCALE`` (any form naming Korean) is the language."""
    monkeypatch.setenv("LOOP_GUARD_LOCALE", value)
    assert main(["demo"]) == EXIT_OK
    captured = capsys.readouterr()
    assert translator("ko").gettext("model") in captured.out
    assert captured.err == ""


def test_demo_locale_option_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--locale en`` (any case) overrides ``LOOP_GUARD_LOCALE=ko``."""
    monkeypatch.setenv("LOOP_GUARD_LOCALE", "ko")
    assert main(["demo", "--locale", "EN"]) == EXIT_OK
    assert translator("ko").gettext("model") not in capsys.readouterr().out


def test_demo_locale_without_messages_is_english_with_a_notice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real locale with no catalog runs in English and says so on stderr, in one line."""
    monkeypatch.setenv("LOOP_GUARD_LOCALE", "fr_FR.UTF-8")
    assert main(["demo"]) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.err == (
        "loop-guard: LOOP_GUARD_LOCALE='fr_FR.UTF-8' has no messages (available: en, ko);"
        " using en\n"
    )
    assert "loop guard stopped" in captured.out.lower()


def test_demo_locale_that_is_no_locale_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``LOOP_GUARD_LOCALE=korean`` exits 2 with one line naming the variable."""
    monkeypatch.setenv("LOOP_GUARD_LOCALE", "korean")
    assert main(["demo"]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("loop-guard: environment LOOP_GUARD_LOCALE: got 'korean'")
    assert captured.err.count("\n") == 1


def test_demo_timeline_is_what_happened() -> None:
    """The timeline records the real run: turns, tool runs and the stop, in order."""
    result = run_demo("repeat")
    kinds = [type(event).__name__ for event in result.events]
    assert kinds == [
        "ModelTurn",
        "ToolRun",
        "ModelTurn",
        "ToolRun",
        "ModelTurn",
        "ToolRun",
        "ModelTurn",
        "GuardVerdict",
    ]
    reads = [e for e in result.events if isinstance(e, ToolRun) and e.tool == "read_file"]
    assert len({(e.digest, e.result) for e in reads}) == 1  # same call, same result
    assert result.raised is not None
    assert result.raised.count == result.raised.threshold == 3
    assert (result.turns, result.tool_runs, result.not_run) == (4, 3, 1)


def test_productive_run_is_long_and_untouched() -> None:
    """``productive`` makes 30+ tool calls with changing results and is never stopped."""
    result = run_demo("productive")
    assert result.tool_runs >= 30
    assert result.stop is None
    assert result.raised is None
    assert result.first_signal is None
    tests = [e.result for e in result.events if isinstance(e, ToolRun) and e.tool == "run_tests"]
    assert len(set(tests)) == len(tests)  # each test run's result differs: progress
    final = result.events[-1]
    assert isinstance(final, ModelTurn)
    assert final.answer is not None


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_looping_demo_cannot_run_forever_without_a_guard(integration: Integration) -> None:
    """With the guard off, every looping script still ends: its last step is an answer."""
    for loop in LOOP_KINDS:
        result = run_demo(loop, mode="off", integration=integration)
        assert result.error is None
        assert not any(isinstance(e, GuardVerdict) for e in result.events)
        assert isinstance(result.events[-1], ModelTurn)


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_demo_never_shows_arguments_outputs_or_answers(
    integration: Integration, caplog: pytest.LogCaptureFixture
) -> None:
    """A canary in every argument, output and answer appears in no timeline or log line."""
    caplog.set_level(logging.DEBUG)
    for loop in LOOP_KINDS:
        for mode in ("on", "observe"):
            result = run_demo(loop, mode=mode, integration=integration, _marker=CANARY)
            assert result.first_signal == expected_signal(loop)
            text = "\n".join(render(result))
            assert CANARY not in text
            if result.raised is not None:
                assert CANARY not in str(result.raised)
                assert CANARY not in repr(result.raised)
    assert caplog.records  # the guard did log its verdicts
    assert CANARY not in caplog.text
    assert all(CANARY not in str(record.__dict__) for record in caplog.records)


def test_demo_output_quotes_none_of_the_scripts_contents(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The built-in scripts' file names and outputs never reach the terminal."""
    for loop in LOOP_KINDS:
        assert main(["demo", "--loop", loop, "--mode", "observe", "--verbose"]) == EXIT_OK
    captured = capsys.readouterr()
    for secret in ("docs/retry.md", "max_retries", "PRJ-7", "app.py", "connection refused"):
        assert secret not in captured.out
        assert secret not in captured.err


def test_demo_verbose_shows_the_guards_log_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """``--verbose`` shows the guard's log lines on stderr; by default they stay quiet."""
    assert main(["demo"]) == EXIT_OK
    assert "signal=repeated_tool_call" not in capsys.readouterr().err
    assert main(["demo", "--verbose"]) == EXIT_OK
    assert "signal=repeated_tool_call" in capsys.readouterr().err


def test_demo_that_does_not_go_as_designed_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """If the guard did not stop a loop as designed, the demo says so and exits 1."""
    monkeypatch.setattr(_demo, "expected_signal", lambda loop: None)
    assert main(["demo"]) == EXIT_FAILURE
    assert "did not go as designed" in capsys.readouterr().err


def test_demo_rejects_unknown_choices(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad option is a usage error: exit 2 and argparse's one-line message."""
    assert main(["demo", "--loop", "forever"]) == EXIT_USAGE
    assert "invalid choice: 'forever'" in capsys.readouterr().err


# --- the parser -----------------------------------------------------------------------------------


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """``loop-guard`` alone prints the usage and exits 2."""
    assert main([]) == EXIT_USAGE
    assert "usage: loop-guard" in capsys.readouterr().err


def test_help_lists_every_command_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` names each subcommand and documents the exit status."""
    assert main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command.name in out
    assert "exit status:" in out
    assert main(["demo", "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for loop in LOOP_KINDS:
        assert loop in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``--version`` prints the package version."""
    from langchain_loop_guard import __version__

    assert main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == f"loop-guard {__version__}"


# --- loop-guard config --------------------------------------------------------------------------


def test_config_shows_every_value_with_its_source(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defaults, the global file, the project file and the environment are each named."""
    global_dir = Path(os.environ["XDG_CONFIG_HOME"]) / "loop-guard"
    global_dir.mkdir()
    (global_dir / "config.json").write_text(json.dumps({"maxTurns": 20}))
    (project / ".loop-guard.json").write_text(json.dumps({"ignore_tools": ["sleep"]}))
    monkeypatch.setenv("LOOP_GUARD_MODE", "observe")
    assert main(["config"]) == EXIT_OK
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert "observe" in rows["mode"]
    assert "environment LOOP_GUARD_MODE" in rows["mode"]
    assert "20" in rows["max_turns"]
    assert "global file" in rows["max_turns"]
    assert '["sleep"]' in rows["ignore_tools"]
    assert "project file" in rows["ignore_tools"]
    assert rows["locale"].split()[1:] == ["en", "default"]


def test_config_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` gives each field's value as JSON data and its source."""
    (project / ".loop-guard.json").write_text(json.dumps({"toolThresholdOverrides": {"poll": 6}}))
    assert main(["config", "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["tool_threshold_overrides"]["value"] == {"poll": 6}
    assert data["tool_threshold_overrides"]["source"].startswith("project file")
    assert data["repeat_tool_threshold"] == {"value": 3, "source": "default"}


def _errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing applied, nothing shown
    return captured.err.splitlines()


def test_config_with_a_malformed_file_is_one_line_and_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Malformed JSON: one line naming the file, status 2."""
    (project / ".loop-guard.json").write_text('{"mode": "on",')
    assert main(["config"]) == EXIT_USAGE
    (line,) = _errors(capsys)
    assert line.startswith("loop-guard: ")
    assert ".loop-guard.json" in line


def test_config_with_a_bad_environment_variable_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad variable: one line naming it and its value, status 2."""
    monkeypatch.setenv("LOOP_GUARD_REPEAT_TOOL", "many")
    assert main(["config"]) == EXIT_USAGE
    (line,) = _errors(capsys)
    assert "LOOP_GUARD_REPEAT_TOOL" in line
    assert "many" in line


def test_config_with_a_typo_is_one_line_and_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown key (a typo) is never ignored: one line naming the key, status 2."""
    (project / ".loop-guard.json").write_text(json.dumps({"repeat_tool_treshold": 5}))
    assert main(["config"]) == EXIT_USAGE
    (line,) = _errors(capsys)
    assert "repeat_tool_treshold" in line


def test_config_lists_every_problem_on_its_own_line(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Several problems in several sources: one line each, all of them."""
    (project / ".loop-guard.json").write_text(json.dumps({"mdoe": "on"}))
    monkeypatch.setenv("LOOP_GUARD_MODE", "loud")
    assert main(["config"]) == EXIT_USAGE
    lines = _errors(capsys)
    assert len(lines) == 2
    assert any("mdoe" in line for line in lines)
    assert any("LOOP_GUARD_MODE" in line and "loud" in line for line in lines)


# --- real processes -----------------------------------------------------------------------------


@pytest.mark.slow
def test_python_dash_m_runs_the_demo() -> None:
    """``python -m langchain_loop_guard demo`` works in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-m", "langchain_loop_guard", "demo", "--loop", "cycle"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert "(tool_cycle)" in done.stdout
    assert done.stderr == ""


@pytest.mark.slow
def test_console_script_runs_the_demo_and_reports_config_errors(tmp_path: Path) -> None:
    """The installed ``loop-guard`` entry point runs, and exits 2 on a bad configuration."""
    script = shutil.which("loop-guard", path=str(Path(sys.executable).parent))
    assert script is not None, "the package is not installed (pip install -e .)"
    done = subprocess.run(
        [script, "demo", "--locale", "ko", "--integration", "middleware"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert "(repeated_tool_call)" in done.stdout
    env = {**os.environ, "LOOP_GUARD_NUDGES": "-1", "HOME": str(tmp_path)}
    env.pop("XDG_CONFIG_HOME", None)
    done = subprocess.run(
        [script, "config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == EXIT_USAGE
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "LOOP_GUARD_NUDGES" in line
