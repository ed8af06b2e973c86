"""Trace recording (``record_to=``) and ``loop-guard replay``: the same verdicts as live."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import ToolException

from langchain_loop_guard import (
    LoopDetected,
    LoopGuardConfig,
    LoopGuardConfigError,
    LoopGuardMiddleware,
    Signal,
)
from langchain_loop_guard._cli._main import EXIT_OK, EXIT_USAGE, build_parser, main
from langchain_loop_guard._core._detector import DetectorEvent, LoopDetector
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._replay._replay import TRACE_FORMATS, replay
from langchain_loop_guard._replay._trace import TraceFormatError, TraceRecorder
from langchain_loop_guard.testing import ScriptedChatModel, call, calls, scripted_tool

if TYPE_CHECKING:
    from conftest import FakeClock

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "canary-7f3a9c-do-not-leak"
DEFAULTS = LoopGuardConfig()

# --- agents that loop (or not) -----------------------------------------------------------------


def _repeat() -> tuple[list[Any], list[Any]]:
    return [call("search", {"q": "weather"})] * 6 + ["done"], [scripted_tool("search", "sunny")]


def _cycle() -> tuple[list[Any], list[Any]]:
    steps = [call("open", {"p": "a"}), call("close", {"p": "a"})] * 4
    return [*steps, "done"], [scripted_tool("open", "opened"), scripted_tool("close", "closed")]


def _error() -> tuple[list[Any], list[Any]]:
    steps = [call("fetch", {"url": f"https://x/{i}"}) for i in range(5)]
    failing = scripted_tool("fetch", ToolException("HTTP 503 at line 12"))
    return [*steps, "done"], [failing]


def _answer() -> tuple[list[Any], list[Any]]:
    return ["I cannot do that."] * 4, [scripted_tool("search")]


def _unknown_tool() -> tuple[list[Any], list[Any]]:
    steps = [call("teleport", {"to": f"mars-{i}"}) for i in range(5)]
    return [*steps, "done"], [scripted_tool("search")]


def _productive() -> tuple[list[Any], list[Any]]:
    steps = [call("read", {"path": f"src/{i}.py"}) for i in range(8)]
    return [*steps, "all files read"], [scripted_tool("read", lambda a: f"text of {a['path']}")]


LOOPS: dict[str, Callable[[], tuple[list[Any], list[Any]]]] = {
    "repeat": _repeat,
    "cycle": _cycle,
    "repeated error": _error,
    "unknown tool": _unknown_tool,
    "productive": _productive,
}


def _run_agent(script: list[Any], tools: list[Any], **guard: Any) -> Signal | None:
    """Run a ``create_agent`` agent once; the signal that stopped it, if any."""
    model = ScriptedChatModel(script=script)
    handler = guard.pop("handler", None)
    middleware = [guard.pop("middleware")] if "middleware" in guard else []
    agent = create_agent(model, tools, middleware=middleware)
    config: dict[str, Any] = {"callbacks": [handler]} if handler is not None else {}
    try:
        agent.invoke({"messages": [("user", "go")]}, config)
    except LoopDetected as exc:
        return exc.signal
    return None


# --- recorded live runs replay the same ----------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_replay_of_a_handler_recording_gives_the_live_verdicts(loop: str, tmp_path: Path) -> None:
    """A run recorded through the callback handler replays to the same stop, at the same event."""
    trace = tmp_path / "trace.jsonl"
    script, tools = LOOPS[loop]()
    handler = LoopGuardCallbackHandler(DEFAULTS, record_to=trace)
    live = _run_agent(script, tools, handler=handler)
    report = replay(trace, DEFAULTS)
    assert len(report.runs) == 1
    run = report.runs[0]
    assert run.same_as_live is True
    assert (run.stop.signal if run.stop else None) == live
    assert (live is None) == (loop == "productive")


@pytest.mark.parametrize(
    "loop", ["repeat", "cycle", "repeated error", "unknown tool", "productive"]
)
def test_replay_of_a_middleware_recording_gives_the_live_verdicts(
    loop: str, tmp_path: Path
) -> None:
    """A run recorded through the middleware replays to the same stop, at the same event."""
    trace = tmp_path / "trace.jsonl"
    script, tools = LOOPS[loop]()
    live = _run_agent(script, tools, middleware=LoopGuardMiddleware(DEFAULTS, record_to=trace))
    report = replay(trace, DEFAULTS)
    run = report.runs[0]
    assert run.same_as_live is True
    assert (run.stop.signal if run.stop else None) == live


def test_replay_of_an_observe_recording_stops_where_the_first_loop_was_observed(
    tmp_path: Path,
) -> None:
    """Observe mode records the loops it saw; the replay (mode on) stops at the first one."""
    trace = tmp_path / "trace.jsonl"
    script, tools = _repeat()
    observe = DEFAULTS.merged(mode="observe")
    assert (
        _run_agent(script, tools, handler=LoopGuardCallbackHandler(observe, record_to=trace))
        is None
    )
    run = replay(trace, observe).runs[0]
    assert run.stop is not None
    assert run.stop.signal is Signal.REPEATED_TOOL_CALL
    assert run.live is not None
    assert run.live.action == "observe"
    assert run.same_as_live is True


def test_replay_under_a_higher_threshold_lets_the_repeat_through(tmp_path: Path) -> None:
    """Raising the threshold in the replay's configuration changes the verdict."""
    trace = tmp_path / "trace.jsonl"
    script, tools = _repeat()
    _run_agent(script, tools, handler=LoopGuardCallbackHandler(DEFAULTS, record_to=trace))
    loose = replay(trace, DEFAULTS.merged(repeat_tool_threshold=10, repeat_frequency_threshold=10))
    run = loose.runs[0]
    assert run.stop is None
    assert run.same_as_live is False
    assert loose.would_stop == 0


def test_replay_under_a_lower_threshold_stops_earlier(tmp_path: Path) -> None:
    """Lowering the threshold stops the run at an earlier event."""
    trace = tmp_path / "trace.jsonl"
    script, tools = _repeat()
    _run_agent(script, tools, handler=LoopGuardCallbackHandler(DEFAULTS, record_to=trace))
    live = replay(trace, DEFAULTS).runs[0].stop
    strict = replay(trace, DEFAULTS.merged(repeat_tool_threshold=2)).runs[0].stop
    assert live is not None
    assert strict is not None
    assert strict.call == live.call - 1


def test_replay_counts_ignored_tools_once_they_are_no_longer_ignored(tmp_path: Path) -> None:
    """Calls of ignored tools are recorded with their digests, so a replay can count them."""
    trace = tmp_path / "trace.jsonl"
    script, tools = _repeat()
    ignoring = DEFAULTS.merged(ignore_tools=["search"])
    assert (
        _run_agent(script, tools, handler=LoopGuardCallbackHandler(ignoring, record_to=trace))
        is None
    )
    assert replay(trace, ignoring).runs[0].stop is None
    stop = replay(trace, DEFAULTS).runs[0].stop
    assert stop is not None
    assert stop.signal is Signal.REPEATED_TOOL_CALL


def test_replay_reproduces_elapsed_time_warnings(tmp_path: Path, clock: FakeClock) -> None:
    """The trace's timings drive the replay's clock: the elapsed-time warning replays too."""
    trace = tmp_path / "trace.jsonl"
    recorder = TraceRecorder(trace)
    detector = LoopDetector(DEFAULTS, clock=clock, listener=recorder.listener("r1"))
    for step in range(5):
        clock.advance(50)
        detector.turn_start()
        detector.tool_call("read", {"page": step})
        detector.tool_result("read", f"page {step}")
    recorder.close()
    run = replay(trace, DEFAULTS).runs[0]
    assert [w.signal for w in run.warnings] == [Signal.ELAPSED_TIME]
    assert run.warnings[0].event == 10  # the turn at 200 s, past 180 s
    assert run.same_as_live is True


@pytest.mark.parametrize("asked", ["the same question", "other questions"])
def test_replay_knows_a_question_asked_again(asked: str, tmp_path: Path) -> None:
    """A human message is recorded with its words' digest (never its text), so the replay
    tells the same question answered as before (SPEC §14 N18) from the same reply to other
    questions (§12 R9), as the live detector did."""
    trace = tmp_path / "trace.jsonl"
    recorder = TraceRecorder(trace)
    config = LoopGuardConfig(scope="thread")
    detector = LoopDetector(config, clock=lambda: 0.0, listener=recorder.listener("t1"))
    questions = ["Where is my order A-10234?", "Can I cancel it?", "Can I change the address?"]
    live = []
    for n in range(4):
        question = questions[0] if asked == "the same question" else questions[n % 3]
        detector.user_message(question)
        detector.turn_start()
        detector.assistant_message("", [("get_order", {"id": "A-10234"})])
        detector.tool_call("get_order", {"id": "A-10234"}, call_id=f"c{n}")
        detector.tool_result("get_order", '{"status": "shipped"}', call_id=f"c{n}")
        detector.turn_start()
        live.append(detector.assistant_message("It shipped on December 2 with UPS.", []))
        if live[-1].stops:
            break
    recorder.close()
    assert "Where is my order" not in trace.read_text()
    run = replay(trace, config).runs[0]
    assert run.same_as_live is True
    assert (run.stop is None) == (asked == "the same question") == (not live[-1].stops)


def test_recording_appends_and_interleaved_runs_replay_apart(tmp_path: Path) -> None:
    """Two runs in one file (appended, interleaved) are replayed with a detector each."""
    trace = tmp_path / "trace.jsonl"
    recorder = TraceRecorder(trace)
    first = LoopDetector(DEFAULTS, listener=recorder.listener("a"))
    second = LoopDetector(DEFAULTS, listener=recorder.listener("b"))
    for _ in range(3):
        first.tool_call("x", {"n": 1})
        second.tool_call("y", {"n": 1})
        second.tool_result("y", "different")  # results break nothing: same outcome each time
    recorder.close()
    TraceRecorder(trace).write("c", [DetectorEvent(kind="turn_start")])
    report = replay(trace, DEFAULTS)
    assert [run.run for run in report.runs] == ["a", "b", "c"]
    assert [run.same_as_live for run in report.runs] == [True, True, True]
    assert report.by_signal == {"repeated_tool_call": 2}


# --- LangSmith exports ---------------------------------------------------------------------------


def test_langsmith_export_replays_the_looping_trace_and_passes_the_productive_one() -> None:
    """A LangSmith export: the looping trace would stop, the productive one would not."""
    report = replay(FIXTURES / "langsmith_export.json", DEFAULTS)
    assert report.format == "langsmith"
    by_run = {run.run: run for run in report.runs}
    looping = by_run["1f0b2c1e-7a2d-6e21-9a4e-0c5a1d3b7e01"]
    productive = by_run["1f0b2c1e-8b3e-6f32-8b5f-1d6b2e4c8f02"]
    assert looping.stop is not None
    assert looping.stop.signal is Signal.REPEATED_TOOL_CALL
    assert looping.stop.tool == "search_flights"
    assert looping.same_as_live is None  # a LangSmith export holds no guard verdicts
    assert productive.stop is None
    assert productive.calls == 3
    assert report.would_stop == 1


def test_langsmith_jsonl_export_replays_like_the_json_array(tmp_path: Path) -> None:
    """The same runs as JSON Lines give the same report."""
    runs = json.loads((FIXTURES / "langsmith_export.json").read_text(encoding="utf-8"))
    jsonl = tmp_path / "runs.jsonl"
    jsonl.write_text("".join(json.dumps(run) + "\n" for run in runs), encoding="utf-8")
    array = replay(FIXTURES / "langsmith_export.json", DEFAULTS)
    lines = replay(jsonl, DEFAULTS)
    assert [(r.run, r.events, r.calls) for r in lines.runs] == [
        (r.run, r.events, r.calls) for r in array.runs
    ]
    assert [(r.stop.event, r.stop.signal) if r.stop else None for r in lines.runs] == [
        (r.stop.event, r.stop.signal) if r.stop else None for r in array.runs
    ]


def test_langsmith_calls_no_tool_ran_count_as_failed_calls(tmp_path: Path) -> None:
    """A tool the model named that never ran (an unknown tool) counts as a failed call."""
    runs = [
        _llm_run(f"l{i}", i * 2, tool_calls=[("teleport", {"to": "mars"}, f"c{i}")])
        for i in range(4)
    ]
    export = tmp_path / "runs.json"
    export.write_text(json.dumps(runs), encoding="utf-8")
    stop = replay(export, DEFAULTS).runs[0].stop
    assert stop is not None
    assert stop.signal is Signal.REPEATED_TOOL_CALL
    assert stop.tool == "teleport"


def _llm_run(run_id: str, second: int, *, tool_calls: list[tuple[str, Any, str]]) -> dict[str, Any]:
    message = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "AIMessage"],
        "kwargs": {
            "content": "",
            "type": "ai",
            "tool_calls": [
                {"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in tool_calls
            ],
        },
    }
    return {
        "id": run_id,
        "trace_id": "t1",
        "name": "ChatOpenAI",
        "run_type": "llm",
        "start_time": f"2025-01-01T00:00:{second:02d}.000000",
        "end_time": f"2025-01-01T00:00:{second:02d}.500000",
        "inputs": {"messages": []},
        "outputs": {"generations": [[{"text": "", "message": message}]]},
        "error": None,
    }


# --- malformed traces ----------------------------------------------------------------------------

_GOOD = '{"v":1,"run":"r","t":0.0,"e":"turn_start"}'
MALFORMED = {
    "bad json": (f'{_GOOD}\n{{"v":1,', 2, "not valid JSON"),
    "not an object": (f"{_GOOD}\n[1, 2]\n", 2, "expected a JSON object, found an array"),
    "unknown kind": (f'{_GOOD}\n{_GOOD}\n{{"v":1,"run":"r","t":1,"e":"jump"}}', 3, "unknown event"),
    "missing field": (f'{_GOOD}\n{{"v":1,"run":"r","t":1,"e":"tool_call","tool":"x"}}', 2, "'d'"),
    "bad version": ('{"v":2,"run":"r","t":0,"e":"turn_start"}', 1, "trace version"),
    "unknown field": ('{"v":1,"run":"r","t":0,"e":"tick","args":"x"}', 1, "unknown field"),
    "negative time": ('{"v":1,"run":"r","t":-1,"e":"tick"}', 1, '"t" must be'),
    "unknown signal": (
        '{"v":1,"run":"r","t":0,"e":"tick","verdict":{"action":"warn","signal":"x"}}',
        1,
        "unknown verdict",
    ),
    "neither format": ('{"hello": 1}', 1, "neither a loop-guard trace event"),
    "langsmith run without name": (
        '[{"id": "a", "run_type": "tool", "start_time": "x"}]',
        1,
        "'name'",
    ),
    "langsmith bad run type": (
        '[\n{"id": "a", "name": "n", "run_type": "robot", "start_time": "2025-01-01T00:00:00"}\n]',
        2,
        'unknown "run_type"',
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_trace_is_an_error_naming_its_line(case: str, tmp_path: Path) -> None:
    """Each malformed trace raises TraceFormatError with the line of the problem."""
    text, line, problem = MALFORMED[case]
    trace = tmp_path / "trace.jsonl"
    trace.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError) as caught:
        replay(trace, DEFAULTS)
    assert caught.value.line == line
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"{trace}:{line}: ")


def test_empty_trace_is_an_error(tmp_path: Path) -> None:
    """An empty file is not an empty report: it is an error."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="empty"):
        replay(trace, DEFAULTS)


@pytest.mark.parametrize("case", ["bad json", "unknown kind", "bad version"])
def test_cli_reports_a_malformed_trace_on_one_line_and_exits_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``loop-guard replay`` prints ``TRACE:LINE: problem`` on stderr and exits with 2."""
    text, line, _ = MALFORMED[case]
    trace = tmp_path / "trace.jsonl"
    trace.write_text(text, encoding="utf-8")
    assert main(["replay", str(trace)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"loop-guard: {trace}:{line}: ")


def test_cli_reports_a_missing_file_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace that does not exist is a usage error."""
    assert main(["replay", str(tmp_path / "nope.jsonl")]) == EXIT_USAGE
    assert "nope.jsonl" in capsys.readouterr().err


# --- the CLI -------------------------------------------------------------------------------------


def test_cli_replay_prints_each_run_and_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The text report names the stop's event, signal and reason, then a summary."""
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "trace.jsonl"
    script, tools = _repeat()
    _run_agent(script, tools, handler=LoopGuardCallbackHandler(DEFAULTS, record_to=trace))
    assert main(["replay", str(trace), "--no-progress"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "would stop at event" in out
    assert "repeated_tool_call" in out
    assert "`search` was called 3 times in a row" in out
    assert "live run: the same" in out
    assert out.rstrip().endswith("summary: 1 run, 1 would stop (repeated_tool_call 1)")


def test_cli_replay_json_and_set_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--json`` prints the report as JSON; ``--set`` changes the configuration evaluated."""
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "trace.jsonl"
    script, tools = _repeat()
    _run_agent(script, tools, handler=LoopGuardCallbackHandler(DEFAULTS, record_to=trace))
    assert main(["replay", str(trace), "--json", "--set", "repeat_tool_threshold=10"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["runs"] == 1
    assert data["summary"]["would_stop"] == 0  # the window threshold rises with it, to 10
    assert data["runs"][0]["stop"] is None
    assert data["runs"][0]["same_as_live"] is False


def test_cli_replay_rejects_a_bad_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An invalid ``--set`` value is a configuration error: exit 2, one line per problem."""
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "trace.jsonl"
    trace.write_text(_GOOD + "\n", encoding="utf-8")
    assert main(["replay", str(trace), "--set", "repeat_tool_threshold=1"]) == EXIT_USAGE
    assert "repeat_tool_threshold" in capsys.readouterr().err


def test_cli_progress_bar_goes_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--progress`` draws a bar on stderr and clears it; stdout holds only the report."""
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "trace.jsonl"
    trace.write_text(_GOOD + "\n", encoding="utf-8")
    assert main(["replay", str(trace), "--progress"]) == EXIT_OK
    captured = capsys.readouterr()
    assert "100%" in captured.err
    assert "\r" not in captured.out


# --- safety --------------------------------------------------------------------------------------


def test_recorded_trace_and_logs_hold_no_content(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A secret in arguments, outputs, errors, messages and call ids never reaches file or log."""
    trace = tmp_path / "trace.jsonl"
    script = [
        calls(("lookup", {"key": SECRET}, f"id-{SECRET}-1"), content=f"thinking about {SECRET}"),
        calls(("lookup", {"key": SECRET}, f"id-{SECRET}-2")),
        calls(("fail", {"key": SECRET}, f"id-{SECRET}-3")),
        *[call("lookup", {"key": SECRET})] * 3,
        f"final {SECRET}",
    ]
    tools = [
        scripted_tool("lookup", f"value {SECRET}"),
        scripted_tool("fail", ToolException(f"bad {SECRET}")),
    ]
    with caplog.at_level(logging.DEBUG):
        for guard in (
            {"handler": LoopGuardCallbackHandler(DEFAULTS, record_to=trace)},
            {"middleware": LoopGuardMiddleware(DEFAULTS, record_to=trace)},
        ):
            assert _run_agent(list(script), list(tools), **guard) is not None
    text = trace.read_text(encoding="utf-8")
    assert text.count("\n") > 10
    assert SECRET not in text
    assert "canary" not in text
    assert SECRET not in caplog.text
    assert all(SECRET not in str(record.__dict__) for record in caplog.records)


def test_unwritable_record_to_fails_open_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A trace path that cannot be written is logged once; the guard still stops the loop."""
    script, tools = _repeat()
    handler = LoopGuardCallbackHandler(DEFAULTS, record_to=tmp_path)  # a directory
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        assert _run_agent(script, tools, handler=handler) is Signal.REPEATED_TOOL_CALL
    failures = [r for r in caplog.records if "trace recording" in r.getMessage()]
    assert len(failures) == 1


def test_a_guard_reports_its_recorded_trace(tmp_path: Path) -> None:
    """``guard.report()`` is the replay of its ``record_to=`` trace under its configuration."""
    script, tools = _repeat()
    handler = LoopGuardCallbackHandler({"mode": "observe"}, record_to=tmp_path / "t.jsonl")
    assert _run_agent(script, tools, handler=handler) is None  # observed, not stopped
    report = handler.report()
    assert report.would_stop == 1
    assert report.runs[0].same_as_live is True
    assert str(report) == str(replay(tmp_path / "t.jsonl", handler.config))


def test_a_guard_that_records_nothing_says_how_to_record(tmp_path: Path) -> None:
    """Without ``record_to=`` there is nothing to replay: a config error naming the key."""
    with pytest.raises(LoopGuardConfigError, match="record_to=") as info:
        LoopGuardMiddleware().report()
    assert info.value.key == "record_to"


def test_nothing_is_recorded_in_off_mode(tmp_path: Path) -> None:
    """Mode ``"off"`` tracks nothing, so it records nothing."""
    trace = tmp_path / "trace.jsonl"
    script, tools = _repeat()
    handler = LoopGuardCallbackHandler(DEFAULTS.merged(mode="off"), record_to=trace)
    assert _run_agent(script, tools, handler=handler) is None
    assert not trace.exists()


def test_cli_format_choices_are_the_trace_formats() -> None:
    """The CLI's ``--format`` choices (spelled out, to keep startup light) match the readers."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    replay_parser = sub.choices["replay"]  # type: ignore[index]
    option = next(a for a in replay_parser._actions if a.dest == "format")
    assert tuple(option.choices or ()) == ("auto", *TRACE_FORMATS)


def test_a_trace_keeps_helper_model_answers_apart(tmp_path: Path) -> None:
    """`ctx: false` round-trips through a recorded trace (SPEC §11 N2)."""
    from langchain_loop_guard._replay._trace import decode_event, encode_event

    seen: list[DetectorEvent] = []
    detector = LoopDetector(listener=seen.append)
    detector.assistant_message("yes", in_context=False)
    detector.assistant_message("yes")
    lines = [encode_event("r", event) for event in seen]
    assert "ctx" in lines[0]
    assert "ctx" not in lines[1]
    decoded = [decode_event(tmp_path / "t.jsonl", 1, line).event for line in lines]
    assert [e.in_context for e in decoded] == [False, True]
