"""``%loop_guard``: the runtime commands in IPython, against a real shell and a real process."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from langchain.agents import create_agent
from traitlets.config import Config

from langchain_loop_guard._cli import _magic
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._status import GuardStatus, RunInspection, text_table, text_width
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._runtime import guard_number, live_guards
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

QUESTION = {"messages": [("user", "go")]}


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InteractiveShell]:
    """One in-process IPython shell with the extension loaded (no history, own profile dir)."""
    config = Config()
    config.HistoryManager.enabled = False
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
        ipython = InteractiveShell.instance(config=config)
        ipython.run_line_magic("load_ext", "langchain_loop_guard._cli._magic")
        yield ipython
        InteractiveShell.clear_instance()


@pytest.fixture
def guard(shell: InteractiveShell) -> Iterator[LoopGuardCallbackHandler]:
    """A fresh guard held in the notebook variable ``guard`` and driven by the magic."""
    handler = LoopGuardCallbackHandler({"mode": "observe"})
    shell.user_ns["guard"] = handler
    shell.run_line_magic("loop_guard", "use guard")
    yield handler
    del shell.user_ns["guard"]


def _agent(repeats: int = 4) -> object:
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.txt"})] * repeats + ["done"])
    return create_agent(model, [scripted_tool("read_file", "contents")])


def _magic_out(shell: InteractiveShell, line: str, capsys: pytest.CaptureFixture[str]) -> str:
    shell.run_line_magic("loop_guard", line)
    return capsys.readouterr().out


def test_status_shows_mode_config_sources_and_loops(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """``status`` prints the mode, each setting with its source, and the loops seen."""
    capsys.readouterr()
    _agent().invoke(QUESTION, {"callbacks": [guard]})  # type: ignore[attr-defined]
    out = _magic_out(shell, "status", capsys)
    assert "mode            observe" in out
    assert "repeat_tool_threshold       3        default" in out
    assert "mode                        observe  code" in out
    assert "observed loops  1" in out
    assert "repeated_tool_call  read_file  3/3" in out


def test_no_argument_means_status(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """``%loop_guard`` alone shows the status."""
    capsys.readouterr()
    assert "loop-guard status" in _magic_out(shell, "", capsys)


def test_inspect_shows_names_digests_and_outcomes_only(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """``inspect`` lists the last run's calls by tool name, digest and outcome kind."""
    capsys.readouterr()
    _agent().invoke(QUESTION, {"callbacks": [guard]})  # type: ignore[attr-defined]
    out = _magic_out(shell, "inspect", capsys)
    assert "loop-guard inspect" in out
    assert out.count("read_file") == 4
    assert "a.txt" not in out
    assert "contents" not in out
    inspection = guard.inspect()
    assert inspection is not None
    assert _magic_out(shell, f"inspect {inspection.run_id}", capsys) == out


def test_inspect_before_any_run_says_so(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """No run yet, or an unknown run id: one plain line, no error."""
    capsys.readouterr()
    assert "No run to inspect yet" in _magic_out(shell, "inspect", capsys)
    assert "knows no run 'nope'" in _magic_out(shell, "inspect nope", capsys)


def test_on_off_observe_switch_the_guard(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mode commands change the guard's mode, and the next run obeys it."""
    capsys.readouterr()
    assert "mode is now on (guard)" in _magic_out(shell, "on", capsys)
    assert guard.mode == "on"
    with pytest.raises(LoopDetected):
        _agent().invoke(QUESTION, {"callbacks": [guard]})  # type: ignore[attr-defined]
    _magic_out(shell, "off", capsys)
    assert guard.mode == "off"
    _agent().invoke(QUESTION, {"callbacks": [guard]})  # type: ignore[attr-defined]
    _magic_out(shell, "observe", capsys)
    assert guard.mode == "observe"
    assert guard.config.sources["mode"] == "runtime"


def test_reset_without_a_run_in_progress_says_so(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's state ends with the run, so ``reset`` between runs has nothing to clear."""
    capsys.readouterr()
    assert "No run in progress to reset" in _magic_out(shell, "reset", capsys)


def test_reset_clears_a_stopped_thread(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``scope="thread"`` a stopped conversation can be reset, and then it goes on."""
    handler = LoopGuardCallbackHandler({"scope": "thread"})
    shell.user_ns["threaded"] = handler
    shell.run_line_magic("loop_guard", "use threaded")
    config = {"callbacks": [handler], "configurable": {"thread_id": "t-1"}}
    with pytest.raises(LoopDetected):
        _agent().invoke(QUESTION, config)  # type: ignore[attr-defined]
    capsys.readouterr()
    assert "cleared" in _magic_out(shell, "reset t-1", capsys)
    inspection = handler.inspect("t-1")
    assert inspection is not None
    assert inspection.tripped is None
    del shell.user_ns["threaded"]


def test_use_lists_every_live_guard_numbered(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """``use`` alone lists every live guard by number, variable name (or -), type and mode."""
    shell.user_ns["other"] = LoopGuardCallbackHandler({"mode": "off"})
    unnamed = LoopGuardCallbackHandler({"mode": "observe"})  # a guard in no notebook variable
    capsys.readouterr()
    out = _magic_out(shell, "use", capsys)
    number = {id(g): guard_number(g) for g in live_guards()}
    assert re.search(
        rf"^\* #{number[id(guard)]} +guard +LoopGuardCallbackHandler +observe$", out, re.M
    )
    assert re.search(
        rf"^  #{number[id(shell.user_ns['other'])]} +other +LoopGuardCallbackHandler +off$",
        out,
        re.M,
    )
    assert re.search(
        rf"^  #{number[id(unnamed)]} +- +LoopGuardCallbackHandler +observe$", out, re.M
    )
    del shell.user_ns["other"]


def test_use_by_number_picks_a_guard_in_no_variable(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """``use N`` (or ``use #N``) drives the guard listed as number N, named or not."""
    unnamed = LoopGuardCallbackHandler({"mode": "observe"})
    number = guard_number(unnamed)
    capsys.readouterr()
    out = _magic_out(shell, f"use {number}", capsys)
    assert f"now drives #{number} LoopGuardCallbackHandler." in out
    shell.run_line_magic("loop_guard", "on")
    assert (unnamed.mode, guard.mode) == ("on", "observe")
    _magic_out(shell, f"use #{guard_number(guard)}", capsys)
    shell.run_line_magic("loop_guard", "off")
    assert (unnamed.mode, guard.mode) == ("on", "off")


def test_the_newest_guard_is_named_before_it_is_driven(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``use``, each command first says which guard it drives: the newest."""
    magics = shell.magics_manager.registry["LoopGuardMagics"]
    magics._chosen = None
    newest = LoopGuardCallbackHandler({"mode": "observe"})
    shell.user_ns["newest"] = newest
    number = guard_number(newest)
    capsys.readouterr()
    out = _magic_out(shell, "status", capsys)
    first = out.splitlines()[0]
    assert first == (
        f"%loop_guard drives #{number} newest (LoopGuardCallbackHandler), the newest loop guard;"
        " %loop_guard use lists them all."
    )
    del shell.user_ns["newest"]


def test_newest_guard_is_driven_unless_one_is_chosen(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """After ``use``, newer guards do not take over; without it, the newest one is used."""
    newer = LoopGuardCallbackHandler({"mode": "observe"})
    shell.run_line_magic("loop_guard", "on")
    assert guard.mode == "on"
    assert newer.mode == "observe"
    magics = shell.magics_manager.registry["LoopGuardMagics"]
    magics._chosen = None
    shell.run_line_magic("loop_guard", "off")
    assert newer.mode == "off"
    assert live_guards()[-1] is newer


def test_command_words_ignore_case(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    """``%loop_guard ON`` is ``on``, as ``loop-guard`` and ``set_mode`` take any case."""
    shell.run_line_magic("loop_guard", "ON")
    assert guard.mode == "on"
    shell.run_line_magic("loop_guard", "Observe")
    assert guard.mode == "observe"
    assert "loop-guard status" in _magic_out(shell, "STATUS", capsys)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("bogus", "Unknown command 'bogus'"),
        ("status extra", "takes no arguments"),
        ("inspect a b", "Usage: %loop_guard inspect [RUN]"),
        ("use missing", "No variable named 'missing'"),
        ("use QUESTION", "QUESTION is a dict, not a loop guard"),
        ("use 100000", "No loop guard #100000: %loop_guard use lists them."),
        ("use #0", "No loop guard #0: %loop_guard use lists them."),
        ("use a b", "Usage: %loop_guard use [VAR | N]"),
        ('use "unterminated', "No closing quotation"),
    ],
)
def test_mistakes_are_usage_errors(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler, line: str, message: str
) -> None:
    """Each mistake raises IPython's UsageError with a clear message."""
    shell.user_ns["QUESTION"] = QUESTION
    with pytest.raises(UsageError, match=re.escape(message)):
        shell.run_line_magic("loop_guard", line)


def test_no_guard_yet_is_one_line_without_a_traceback(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any guard exists, a command prints one line telling what to do."""
    monkeypatch.setattr(_magic, "live_guards", list)
    magics = shell.magics_manager.registry["LoopGuardMagics"]
    monkeypatch.setattr(magics, "_chosen", None)
    capsys.readouterr()
    shell.run_cell("%loop_guard status")
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("UsageError: No loop guard yet")
    assert "Traceback" not in captured.err


def test_status_and_inspect_render_as_html_tables(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler
) -> None:
    """Jupyter gets HTML tables; the plain-text form is the aligned text."""
    _agent().invoke(QUESTION, {"callbacks": [guard]})  # type: ignore[attr-defined]
    status = guard.status()
    inspection = guard.inspect()
    assert isinstance(status, GuardStatus)
    assert isinstance(inspection, RunInspection)
    for value in (status, inspection):
        data, _ = shell.display_formatter.format(value)
        assert data["text/html"].startswith('<div class="loop-guard"><table')
        assert "<th" in data["text/html"]
        assert data["text/plain"] == str(value)


def test_report_draws_the_guards_recorded_trace(
    shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``report`` replays the guard's ``record_to=`` trace: a page in Jupyter, text elsewhere."""
    recorded = LoopGuardCallbackHandler({"mode": "observe"}, record_to=tmp_path / "t.jsonl")
    shell.user_ns["recorded"] = recorded
    shell.run_line_magic("loop_guard", "use recorded")
    _agent().invoke(QUESTION, {"callbacks": [recorded]})  # type: ignore[attr-defined]
    out = _magic_out(shell, "report", capsys)
    assert "would stop at event 11 (tool call 3, line 11): repeated_tool_call" in out
    assert "live run: the same" in out
    data, _ = shell.display_formatter.format(recorded.report())
    assert data["text/html"].startswith('<div class="lgr"><style>')
    assert "live run: the same" in data["text/html"]
    assert data["text/plain"] == str(recorded.report())
    del shell.user_ns["recorded"]


def test_report_without_a_recorded_trace_is_a_usage_error(
    shell: InteractiveShell, guard: LoopGuardCallbackHandler
) -> None:
    """A guard that records nothing says how to record: one line, no traceback."""
    with pytest.raises(UsageError, match="create it with record_to="):
        shell.run_line_magic("loop_guard", "report")


def test_html_escapes_names(guard: LoopGuardCallbackHandler) -> None:
    """A tool named like markup is shown, not interpreted."""
    guard.configure(ignore_tools=["<b>poll</b>"])
    html = guard.status()._repr_html_()
    assert "&lt;b&gt;poll&lt;/b&gt;" in html
    assert "<b>poll" not in html


def test_messages_follow_the_guards_locale(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Korean guard answers from the Korean catalog."""
    shell.user_ns["guard_ko"] = LoopGuardCallbackHandler({"locale": "ko"})
    shell.run_line_magic("loop_guard", "use guard_ko")
    capsys.readouterr()
    out = _magic_out(shell, "observe", capsys)
    expected = translator("ko").gettext("Loop guard mode is now {mode} ({guard}).")
    assert out.strip() == expected.format(mode="observe", guard="guard_ko")
    status = _magic_out(shell, "status", capsys)
    assert status.startswith(translator("ko").gettext("loop-guard status"))
    del shell.user_ns["guard_ko"]


def test_load_ext_by_the_package_name(shell: InteractiveShell) -> None:
    """``%load_ext langchain_loop_guard`` is how users load it."""
    import langchain_loop_guard

    assert langchain_loop_guard.load_ipython_extension is _magic.load_ipython_extension


@pytest.mark.slow
def test_magic_in_a_real_ipython_process(tmp_path: Path) -> None:
    """A real ``ipython`` runs a script of magics: status, a stop, inspect, then a mistake."""
    script = tmp_path / "session.ipy"
    script.write_text(
        "%load_ext langchain_loop_guard\n"
        "from langchain.agents import create_agent\n"
        "from langchain_loop_guard import LoopDetected, LoopGuardCallbackHandler\n"
        "from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool\n"
        "guard = LoopGuardCallbackHandler()\n"
        "%loop_guard status\n"
        "model = ScriptedChatModel(script=[call('read_file', {'path': 'a'})] * 4)\n"
        "agent = create_agent(model, [scripted_tool('read_file', 'x')])\n"
        "try:\n"
        "    agent.invoke({'messages': [('user', 'go')]}, {'callbacks': [guard]})\n"
        "except LoopDetected as stop:\n"
        "    print('stopped:', stop.signal.value)\n"
        "%loop_guard inspect\n"
        "%loop_guard nonsense\n"
        "print('not reached: a usage error ends an .ipy script')\n"
    )
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "IPython",
            "--quick",
            "--no-banner",
            "--colors=NoColor",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert "loop-guard status" in done.stdout
    assert "stopped: repeated_tool_call" in done.stdout
    assert "stopped by   repeated_tool_call" in done.stdout
    assert "not reached" not in done.stdout
    usage = [line for line in done.stderr.splitlines() if "UsageError" in line]
    assert usage == [
        "UsageError: Unknown command 'nonsense'. Use: %loop_guard status | inspect [RUN] | "
        "on | off | observe | reset [RUN] | report | use [VAR | N]"
    ]
    assert "Traceback" not in done.stderr


def test_guards_are_registered_weakly() -> None:
    """The registry finds live guards, newest last, and never keeps one alive."""
    first = LoopGuardCallbackHandler()
    second = LoopGuardCallbackHandler()
    assert live_guards()[-2:] == [first, second]
    del second
    gc.collect()
    assert live_guards()[-1] is first


def test_text_tables_line_up_with_wide_characters() -> None:
    """Korean labels take two columns each; the next column still lines up on screen."""
    first, second = text_table([("루프 가드", "x"), ("tool", "y")])
    assert text_width(first[: first.index("x")]) == text_width(second[: second.index("y")])


def test_a_guards_number_stays_when_an_older_guard_is_collected(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """The magic calls a guard by one number for its whole life: an older guard collected
    between two cells does not turn ``#2`` into ``#1``."""
    magics = shell.magics_manager.registry["LoopGuardMagics"]
    magics._chosen = None
    older = LoopGuardCallbackHandler({"mode": "observe"})
    newest = LoopGuardCallbackHandler({"mode": "observe"})
    shell.user_ns["newest"] = newest
    capsys.readouterr()
    first = re.search(r"drives (#\d+) newest", _magic_out(shell, "status", capsys))
    del older
    gc.collect()
    second = re.search(r"drives (#\d+) newest", _magic_out(shell, "status", capsys))
    assert first is not None
    assert second is not None
    assert first.group(1) == second.group(1)
    listed = _magic_out(shell, "use", capsys)
    assert re.search(rf"^\* {first.group(1)} +newest ", listed, re.M)
    _magic_out(shell, f"use {first.group(1)}", capsys)
    assert magics._chosen() is newest
    del shell.user_ns["newest"]
    magics._chosen = None
