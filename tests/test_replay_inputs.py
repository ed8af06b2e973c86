"""``loop-guard replay`` on hostile and odd input, recorded trajectories, and calibration sweeps.

Every bad file is one line ``loop-guard: FILE:LINE: problem`` and exit status 2, never a
traceback; nothing from a trace reaches the terminal unescaped.
"""

from __future__ import annotations

import gzip
import json
import random
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._cli._main import EXIT_OK, EXIT_USAGE, main
from langchain_loop_guard._core._detector import DetectorEvent, LoopDetector
from langchain_loop_guard._core._errors import LoopGuardConfigError
from langchain_loop_guard._replay import _sources
from langchain_loop_guard._replay._calibrate import calibrate
from langchain_loop_guard._replay._replay import ReplayVerdict, replay, terminal_safe
from langchain_loop_guard._replay._trace import TraceFormatError, encode_event, parse_json_line

DEFAULTS = LoopGuardConfig()

# --- LangSmith runs, written by hand (the SDK-built shapes are in test_replay_langsmith.py) -------


def _llm(run_id: str, second: int, calls: list[tuple[str, Any, str]], trace: str = "t1") -> dict:
    message = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "AIMessage"],
        "kwargs": {
            "content": "",
            "type": "ai",
            "tool_calls": [
                {"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in calls
            ],
        },
    }
    return {
        "id": run_id,
        "trace_id": trace,
        "name": "ChatModel",
        "run_type": "llm",
        "start_time": f"2025-01-01T00:00:{second:02d}.000000",
        "end_time": f"2025-01-01T00:00:{second:02d}.400000",
        "inputs": {"messages": [[{"type": "human", "content": "go"}]]},
        "outputs": {"generations": [[{"text": "", "message": message}]]},
        "error": None,
    }


def _tool(
    run_id: str, second: int, name: str, args: Any, call_id: str, *, trace: str = "t1"
) -> dict:
    return {
        "id": run_id,
        "trace_id": trace,
        "name": name,
        "run_type": "tool",
        "start_time": f"2025-01-01T00:00:{second:02d}.500000",
        "end_time": f"2025-01-01T00:00:{second:02d}.600000",
        "inputs": args,
        "outputs": {"output": {"content": "same", "type": "tool", "tool_call_id": call_id}},
        "extra": {"tool_call_id": call_id},
        "error": None,
    }


def _looping_runs(tool: str = "search", trace: str = "t1", repeats: int = 5) -> list[dict]:
    runs: list[dict] = []
    for i in range(repeats):
        runs.append(_llm(f"{trace}-l{i}", i * 2, [(tool, {"q": "x"}, f"c{i}")], trace))
        runs.append(_tool(f"{trace}-t{i}", i * 2, tool, {"q": "x"}, f"c{i}", trace=trace))
    return runs


def _where(stop: ReplayVerdict | None) -> tuple[int, int, Signal, str | None] | None:
    """Where a run stops (the file line aside, which depends on the copy a merge kept)."""
    return None if stop is None else (stop.event, stop.call, stop.signal, stop.tool)


def _jsonl(rows: list[Any]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def _cli_error(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    """Run the CLI on ``path``: exit 2 and exactly one line on stderr, which is returned."""
    assert main(["replay", str(path), "--no-progress", *extra]) == EXIT_USAGE
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


# --- bad input: one line, file and line, exit 2 ------------------------------------------------

_RUN = json.dumps(_looping_runs()[0])
BAD: dict[str, tuple[bytes, int, str]] = {
    "deep JSON": (b"[" * 100_000 + b"]" * 100_000, 1, "nested too deeply"),
    "deep JSON after a good line": (
        (_RUN + "\n").encode() + b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        2,
        "nested too deeply",
    ),
    "5,000-digit number": (b'{"run_type": "tool", "x": ' + b"9" * 5000 + b"}", 1, "number"),
    "truncated array": (("[" + _RUN + ",\n" + _RUN[:40]).encode(), 2, "not valid JSON"),
    "unclosed array": (("[\n" + _RUN + ",\n").encode(), 3, "not closed"),
    "binary garbage": (bytes(range(256)) * 4, 2, "not UTF-8"),  # byte 0x80 is on line 2
    "not UTF-8": ((_RUN + "\n").encode() + b'{"a": "\xff\xfe"}\n', 2, "not UTF-8"),
    "run_type a list": (_RUN.replace('"llm"', '["llm"]').encode(), 1, '"run_type" must be'),
    "run_type a dict": (_RUN.replace('"llm"', '{"a": 1}').encode(), 1, '"run_type" must be'),
    "a string, not a run": (b'[\n"hello"\n]', 2, "neither"),
    "control character in a string": (b'{"run_type": "tool", "name": "a\x01b"}', 1, "control"),
    "text after the array": (("[" + _RUN + "]\n{}").encode(), 2, "text after"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_naming_file_and_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Deep JSON, huge numbers, truncated files, garbage and wrong shapes: never a traceback."""
    data, line, problem = BAD[case]
    path = tmp_path / "trace.json"
    path.write_bytes(data)
    err = _cli_error(path, capsys)
    assert err.startswith(f"loop-guard: {path}:{line}: "), err
    assert problem in err
    assert "at at" not in err


def test_a_value_longer_than_the_limit_is_an_error_not_unbounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One run (or line) longer than the limit stops the read instead of growing without end."""
    monkeypatch.setattr(_sources, "MAX_VALUE_CHARS", 5_000)
    monkeypatch.setattr(_sources, "_CHUNK", 1_000)
    path = tmp_path / "runs.jsonl"
    huge = {**_looping_runs()[0], "inputs": {"messages": [["x" * 50_000]]}}
    path.write_text(_jsonl([_looping_runs()[0], huge]))
    err = _cli_error(path, capsys)
    assert err.startswith(f"loop-guard: {path}:2: a JSON value longer than 5,000 characters")


def test_parse_json_line_says_at_once() -> None:
    """The loop-guard line parser no longer writes "at at column"."""
    with pytest.raises(TraceFormatError) as caught:
        parse_json_line("t.jsonl", 3, '{"a": "x\x01"}')
    assert "at at" not in caught.value.problem
    assert "Invalid control character at column" in caught.value.problem


def test_a_truncated_gzip_file_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gzip file cut short is reported as damaged, with exit status 2."""
    path = tmp_path / "runs.jsonl.gz"
    data = gzip.compress(_jsonl(_looping_runs()).encode())
    path.write_bytes(data[: len(data) // 2])
    assert "damaged" in _cli_error(path, capsys)


def test_an_empty_directory_and_an_empty_file_are_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing to replay is an error, not an empty report."""
    folder = tmp_path / "empty"
    folder.mkdir()
    assert "no trace files" in _cli_error(folder, capsys)
    path = tmp_path / "blank.jsonl"
    path.write_text("\ufeff\n  \n")
    assert "empty" in _cli_error(path, capsys)


def test_a_langsmith_run_twice_is_merged_not_a_crash(tmp_path: Path) -> None:
    """The same runs twice (two exports joined) replay as once; the finished copy wins."""
    runs = _looping_runs()
    unfinished = [{**run, "end_time": None, "outputs": None} for run in runs]
    once, twice = tmp_path / "once.jsonl", tmp_path / "twice.jsonl"
    once.write_text(_jsonl(runs))
    twice.write_text(_jsonl(unfinished) + _jsonl(runs) + _jsonl(unfinished))
    first, second = replay(once, DEFAULTS).runs, replay(twice, DEFAULTS).runs
    assert [(r.events, r.calls, _where(r.stop)) for r in second] == [
        (r.events, r.calls, _where(r.stop)) for r in first
    ]
    assert first[0].stop is not None


def test_the_json_array_is_read_in_linear_time(tmp_path: Path) -> None:
    """An array export costs about what the same runs as JSON Lines cost (no quadratic parse)."""
    import time

    runs = [run for t in range(300) for run in _looping_runs(trace=f"t{t}", repeats=4)]
    lines, array = tmp_path / "runs.jsonl", tmp_path / "runs.json"
    lines.write_text(_jsonl(runs))
    array.write_text(json.dumps(runs, indent=1))
    timings = []
    for path in (lines, array):
        start = time.perf_counter()
        assert replay(path, DEFAULTS).would_stop == 300
        timings.append(time.perf_counter() - start)
    assert timings[1] < timings[0] * 3 + 0.5


# --- escaping: nothing from a trace reaches the terminal raw ---------------------------------

ESCAPE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e"


def test_control_characters_in_tool_names_and_ids_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Terminal escape sequences in a tool name or run id are printed escaped, text and JSON."""
    path = tmp_path / "runs.jsonl"
    path.write_text(_jsonl(_looping_runs(tool=f"se{ESCAPE}arch", trace=f"t{ESCAPE}")))
    for extra in ((), ("--json",)):
        assert main(["replay", str(path), "--no-progress", *extra]) == EXIT_OK
        out = capsys.readouterr().out
        assert not any(ch in out for ch in "\x1b\x07\x9b\u202e")
        assert "would stop" in out or '"would_stop": 1' in out
    assert main(["replay", str(path), "--json", "--no-progress"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["runs"][0]["stop"]["tool"] == f"se{ESCAPE}arch"  # JSON escapes round-trip


def test_control_characters_in_an_error_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad value from the trace shown in an error message is escaped too."""
    path = tmp_path / "runs.jsonl"
    run = {**_looping_runs()[0], "run_type": f"robot{ESCAPE}"}
    path.write_text(json.dumps(run, ensure_ascii=False) + "\n")
    err = _cli_error(path, capsys)
    assert "unknown" in err
    assert not any(ch in err for ch in "\x1b\x07\x9b\u202e")


def test_terminal_safe_keeps_text_and_escapes_controls() -> None:
    """Ordinary text (Korean included) is kept; controls become visible escapes."""
    assert terminal_safe("검색 search\x1b[0m") == "검색 search\\x1b[0m"
    assert terminal_safe("a\u202eb") == "a\\u202eb"


# --- fuzzing: mutated files never raise a traceback ------------------------------------------

_SEEDS = [
    _jsonl(_looping_runs()).encode(),
    json.dumps(_looping_runs(), indent=2).encode(),
    json.dumps({"runs": _looping_runs(), "cursors": {}}).encode(),
    b'{"v":1,"run":"r","t":0.0,"e":"tool_call","tool":"x","d":"ab","id":"c"}\n' * 4,
    (
        json.dumps({"id": "r", "events": [{"t": "turn"}, {"t": "call", "name": "x", "args": {}}]})
        + "\n"
    ).encode(),
]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.sampled_from(range(len(_SEEDS))),
    cuts=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 40), st.binary(max_size=12)), max_size=6
    ),
    gzipped=st.booleans(),
)
def test_fuzzed_files_exit_0_or_2_never_a_traceback(
    seed: int,
    cuts: list[tuple[int, int, bytes]],
    gzipped: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Random splices into valid traces of every format: a report or one error line."""
    data = bytearray(_SEEDS[seed])
    for offset, length, insert in cuts:
        at = offset % (len(data) + 1)
        data[at : at + length] = insert
    if gzipped:
        data = bytearray(gzip.compress(bytes(data)))
    path = tmp_path / "fuzzed"
    path.write_bytes(bytes(data))
    status = main(["replay", str(path), "--no-progress"])
    captured = capsys.readouterr()
    assert status in (EXIT_OK, EXIT_USAGE)
    assert "Traceback" not in captured.err
    if status == EXIT_USAGE:
        assert len(captured.err.strip().splitlines()) == 1


# --- recorded trajectories ------------------------------------------------------------------------


def _trajectory(run_id: str, repeats: int, *, user_between: bool = False) -> dict:
    events: list[dict] = []
    for i in range(repeats):
        if user_between and i:
            events.append({"t": "user", "step": i})
        events.append({"t": "turn", "step": i})
        events.append(
            {
                "t": "assistant",
                "step": i,
                "text": "try",
                "tool_calls": [["cd", {"command": f"cd x{i}"}]],
            }
        )
        events.append(
            {"t": "call", "step": i, "name": "cd", "args": {"command": f"cd x{i}"}, "id": f"c{i}"}
        )
        events.append(
            {"t": "error", "step": i, "name": "cd", "id": f"c{i}", "error": "no such dir"}
        )
        if user_between:  # the same answer to each message: a conversation going round
            events.append({"t": "turn", "step": i})
            events.append(
                {"t": "assistant", "step": i, "text": "The folder is missing.", "tool_calls": []}
            )
    return {
        "id": run_id,
        "framework": "test",
        "outcome": "unresolved",
        "n_steps": repeats,
        "events": events,
    }


def _productive_trajectory(run_id: str) -> dict:
    events: list[dict] = []
    for i in range(6):
        events.append({"t": "turn", "step": i})
        events.append(
            {
                "t": "call",
                "step": i,
                "name": "open",
                "args": {"command": f"open f{i}"},
                "id": f"o{i}",
            }
        )
        events.append(
            {"t": "result", "step": i, "name": "open", "id": f"o{i}", "output": f"file {i}"}
        )
    events.append({"t": "assistant", "step": 6, "text": "done", "tool_calls": []})
    return {"id": run_id, "events": events}


def _write_events(folder: Path) -> Path:
    folder.mkdir()
    runs = [_trajectory("loop-a", 6), _productive_trajectory("calm-b"), _trajectory("loop-c", 3)]
    (folder / "one.jsonl.gz").write_bytes(gzip.compress(_jsonl(runs[:2]).encode()))
    (folder / "two.jsonl.gz").write_bytes(gzip.compress(_jsonl(runs[2:]).encode()))
    (folder / "three.jsonl.gz").write_bytes(
        gzip.compress(_jsonl([_trajectory("users", 4, user_between=True)]).encode())
    )
    return folder


def test_trajectory_files_replay_like_feeding_the_detector(tmp_path: Path) -> None:
    """A directory of gzip trajectory files: each run fed as the format's table says."""
    report = replay(_write_events(tmp_path / "events"), DEFAULTS)
    assert report.format == "trajectories"
    by_run = {run.run: run for run in report.runs}
    assert sorted(by_run) == ["calm-b", "loop-a", "loop-c", "users"]
    loop = by_run["loop-a"]
    assert loop.stop is not None
    assert loop.stop.tool == "cd"
    assert loop.events == len(_trajectory("loop-a", 6)["events"])
    assert by_run["calm-b"].stop is None
    assert by_run["loop-c"].stop is not None
    assert by_run["loop-c"].stop.call == loop.stop.call  # the same loop, the same place


def test_trajectory_user_messages_reset_with_scope_run_and_not_with_scope_thread(
    tmp_path: Path,
) -> None:
    """A user marker resets the detector under scope run; under scope thread it does not."""
    folder = _write_events(tmp_path / "events")
    per_run = {r.run: r for r in replay(folder, DEFAULTS).runs}["users"]
    threaded = {r.run: r for r in replay(folder, DEFAULTS.merged(scope="thread")).runs}["users"]
    assert per_run.stop is None
    assert threaded.stop is not None
    assert threaded.events == per_run.events  # markers keep their place in the numbering


def test_a_bad_trajectory_event_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An event of an unknown kind is an error on the line of its run."""
    path = tmp_path / "events.jsonl"
    bad = _trajectory("x", 2)
    bad["events"][3] = {"t": "teleport"}
    path.write_text(_jsonl([_trajectory("ok", 1), bad]))
    err = _cli_error(path, capsys)
    assert err.startswith(f"loop-guard: {path}:2: event 4")


# --- calibration ---------------------------------------------------------------------------------


def test_calibrate_reports_each_value_and_the_runs_that_change(tmp_path: Path) -> None:
    """One pass, several thresholds: stops per value, and which runs a change moves."""
    folder = _write_events(tmp_path / "events")
    result = calibrate(folder, "repeat_error_threshold", [2, 3, 5])
    stops = [report.would_stop for report in result.reports]
    assert stops[0] >= stops[1] >= stops[2]
    singles = [replay(folder, DEFAULTS.merged(repeat_error_threshold=v)) for v in (2, 3, 5)]
    for report, single in zip(result.reports, singles, strict=True):
        assert [r.stop for r in report.runs] == [r.stop for r in single.runs]
    changed = {run for run, _, _ in result.changes(2)}
    expected = {
        a.run
        for a, b in zip(singles[1].runs, singles[2].runs, strict=True)
        if (a.stop and a.stop.event) != (b.stop and b.stop.event)
    }
    assert changed == expected
    assert changed  # loop-c (3 repeats) is no longer stopped at 5


def test_cli_sweep_prints_a_line_per_value_and_the_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--sweep KEY=V1,V2`` in text and in JSON."""
    monkeypatch.chdir(tmp_path)
    folder = _write_events(tmp_path / "events")
    args = ["replay", str(folder), "--no-progress", "--sweep", "repeat_error_threshold=3,5"]
    assert main(args) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("repeat_error_threshold=3: ")
    assert out[2].startswith("repeat_error_threshold=5: ")
    assert out[3].startswith("from repeat_error_threshold=3 to repeat_error_threshold=5: ")
    assert any(line.startswith("  loop-c: ") and "would not stop" in line for line in out)
    assert main([*args, "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert [s["value"] for s in data["settings"]] == [3, 5]
    assert "loop-c" in data["settings"][0]["stops"]
    assert "loop-c" not in data["settings"][1]["stops"]
    assert [c["run"] for c in data["changes"][0]["runs"]] == ["loop-a", "loop-c"]


def test_cli_sweep_takes_a_json_array_of_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """List values are swept as one JSON array."""
    monkeypatch.chdir(tmp_path)
    folder = _write_events(tmp_path / "events")
    assert main(["replay", str(folder), "--json", "--sweep", 'ignore_tools=[[], ["cd"]]']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"][0]["would_stop"] > 0
    assert data["settings"][1]["would_stop"] == 0


def test_a_sweep_over_scope_reads_the_trace_once_per_scope(tmp_path: Path) -> None:
    """``scope`` decides how runs are grouped: each value gives what a plain replay gives."""
    folder = _write_events(tmp_path / "events")
    result = calibrate(folder, "scope", ["thread", "run"], DEFAULTS)
    for value, report in zip(result.values, result.reports, strict=True):
        single = replay(folder, DEFAULTS.merged(scope=value))
        assert [_where(r.stop) for r in report.runs] == [_where(r.stop) for r in single.runs]
    assert [run for run, _, _ in result.changes(1)] == ["users"]


@pytest.mark.parametrize(
    "option", [["--set", "_cwd=/"], ["--set", "_environ={}"], ["--sweep", "_cwd=a,b"]]
)
def test_private_keys_are_not_configuration(
    option: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Names starting with ``_`` are the loader's hooks, not settings: rejected."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "runs.jsonl"
    path.write_text(_jsonl(_looping_runs()))
    assert "not a setting" in _cli_error(path, capsys, *option)


def test_calibrate_rejects_a_private_key_and_no_values(tmp_path: Path) -> None:
    """The API refuses what the CLI refuses."""
    path = tmp_path / "runs.jsonl"
    path.write_text(_jsonl(_looping_runs()))
    with pytest.raises(LoopGuardConfigError):
        calibrate(path, "_cwd", ["/"], DEFAULTS)
    with pytest.raises(LoopGuardConfigError):
        calibrate(path, "repeat_tool_threshold", [], DEFAULTS)


def test_a_bad_sweep_value_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value the configuration refuses: exit 2, naming the setting."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "runs.jsonl"
    path.write_text(_jsonl(_looping_runs()))
    assert main(["replay", str(path), "--sweep", "repeat_tool_threshold=3,1"]) == EXIT_USAGE
    assert "repeat_tool_threshold" in capsys.readouterr().err


# --- the observe-mode live line ------------------------------------------------------------------


def test_an_observe_mode_trace_never_says_the_live_run_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Observe mode reported a loop and let the run go on: the report says so."""
    from langchain_loop_guard._core._detector import LoopDetector
    from langchain_loop_guard._replay._trace import TraceRecorder

    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "trace.jsonl"
    recorder = TraceRecorder(trace)
    detector = LoopDetector(DEFAULTS.merged(mode="observe"), listener=recorder.listener("r"))
    for _ in range(4):
        detector.tool_call("search", {"q": 1})
    recorder.close()
    assert main(["replay", str(trace), "--set", "repeat_tool_threshold=5"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "live run: stopped" not in out
    assert "live run (observe mode): a loop reported at event 3: repeated_tool_call" in out
    assert replay(trace, DEFAULTS).runs[0].stop.signal is Signal.REPEATED_TOOL_CALL  # type: ignore[union-attr]


def test_random_order_of_runs_in_an_export_gives_the_same_report(tmp_path: Path) -> None:
    """Runs are grouped by trace and ordered by time, whatever their order in the file."""
    runs = _looping_runs(trace="a") + _looping_runs(tool="fetch", trace="b", repeats=2)
    shuffled = list(runs)
    random.Random(7).shuffle(shuffled)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(_jsonl(runs))
    second.write_text(_jsonl(shuffled))
    assert [(r.run, _where(r.stop)) for r in replay(first, DEFAULTS).runs] == [
        (r.run, _where(r.stop)) for r in replay(second, DEFAULTS).runs
    ]


def test_format_flag_forces_a_reader(tmp_path: Path) -> None:
    """``format=`` overrides recognition: a LangSmith file read as trajectories is an error."""
    path = tmp_path / "runs.jsonl"
    path.write_text(_jsonl(_looping_runs()))
    with pytest.raises(TraceFormatError, match='"events" must be an array'):
        replay(path, DEFAULTS, format="trajectories")


# --- bounded memory: detectors for the runs open at once, not the runs of the file ---------------


def _loop_guard_lines(runs: dict[str, int], order: list[str]) -> str:
    """A loop-guard trace: run ``r`` calls ``read`` with the same arguments ``runs[r]`` times,
    its events in the file in ``order`` (one entry per event of that run)."""
    events: dict[str, list[DetectorEvent]] = {}
    for run, count in runs.items():
        seen: list[DetectorEvent] = []  # the events as a recorder would write them
        detector = LoopDetector(DEFAULTS.merged(mode="observe"), listener=seen.append)
        for _ in range(count):
            detector.tool_call("read", {"path": run})
            detector.tool_result("read", "same")
        events[run] = seen
    cursor = dict.fromkeys(runs, 0)
    lines = []
    for run in order:
        lines.append(json.dumps(encode_event(run, events[run][cursor[run]])))
        cursor[run] += 1
    return "\n".join(lines) + "\n"


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_interleaved_runs_replay_as_each_run_alone(tmp_path: Path, rng: random.Random) -> None:
    """However runs interleave, each is replayed as if it were alone in the file (its
    detector freed at its last event, a freed detector reset for the next run)."""
    runs = {f"run-{i}": rng.randint(1, 6) for i in range(6)}
    order = [run for run, count in runs.items() for _ in range(2 * count)]
    rng.shuffle(order)
    mixed = tmp_path / f"mixed-{rng.random()}.jsonl"
    mixed.write_text(_loop_guard_lines(runs, order))
    report = replay(mixed, DEFAULTS)
    assert [run.run for run in report.runs] == list(dict.fromkeys(order))
    for found in report.runs:
        alone = tmp_path / f"alone-{found.run}.jsonl"
        alone.write_text(
            _loop_guard_lines({found.run: runs[found.run]}, [found.run] * 2 * runs[found.run])
        )
        (single,) = replay(alone, DEFAULTS).runs
        assert (found.events, _where(found.stop)) == (single.events, _where(single.stop))


def test_many_one_event_runs_replay_in_memory_of_the_runs_open_at_once(tmp_path: Path) -> None:
    """20,000 one-event runs: a small record each, not a detector each (about 3 KB)."""
    runs = 20_000
    path = tmp_path / "many.jsonl"
    with path.open("w") as out:
        for i in range(runs):
            out.write(f'{{"v":1,"run":"r{i}","t":0,"e":"tool_call","tool":"s","d":"ab"}}\n')
    tracemalloc.start()
    try:
        report = replay(path, DEFAULTS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(report.runs) == runs
    assert peak / runs < 600, f"{peak / runs:.0f} bytes per run"  # each detector: ~3 KB


def test_a_huge_run_id_is_cut_and_kept_apart_from_its_neighbours(tmp_path: Path) -> None:
    """Ids longer than 200 characters are cut with a digest of the whole: distinct, small."""
    prefix = "x" * 5_000
    path = tmp_path / "ids.jsonl"
    path.write_text(
        "".join(
            f'{{"v":1,"run":"{prefix}{end}","t":0,"e":"tool_call","tool":"s","d":"ab"}}\n'
            for end in ("a", "b")
        )
    )
    first, second = (run.run for run in replay(path, DEFAULTS).runs)
    assert first != second
    assert len(first) == len(second) == 177
    assert first.startswith("x" * 160 + "…")


def test_whitespace_between_values_is_skipped_at_reading_speed(tmp_path: Path) -> None:
    """16 MB of blank lines around one event: well under a second (it took ~2 s)."""
    path = tmp_path / "blank.jsonl"
    blank = (" " * 1023 + "\n") * 16_384
    path.write_text(blank + '{"v":1,"run":"r","t":0,"e":"turn_start"}\n' + blank)
    start = time.perf_counter()
    report = replay(path, DEFAULTS)
    elapsed = time.perf_counter() - start
    assert report.events == 1
    assert elapsed < 1.0, f"{elapsed:.2f} s"
