"""``loop-guard replay --sweep`` answers every setting a trace can answer, lists and per-tool
maps included, and refuses the others before it runs, saying why (issue 40, points 2 and 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_loop_guard import LoopGuardConfig, LoopGuardConfigError, calibrate, replay
from langchain_loop_guard._cli._main import EXIT_OK, EXIT_USAGE, main
from langchain_loop_guard._core._detector import LoopDetector
from langchain_loop_guard._replay._calibrate import sweepable
from langchain_loop_guard._replay._trace import TraceRecorder

DEFAULTS = LoopGuardConfig()


def _search_run(path: Path) -> Path:
    """A trajectory: the same search, whose results differ only in a score and a rank."""
    events: list[dict[str, object]] = [{"t": "user"}]
    for i in range(8):
        result = {"hits": ["sunny"], "score": round(0.5 + 0.07 * i, 2), "rank": i}
        events += [
            {"t": "turn"},
            {"t": "assistant", "text": "", "tool_calls": [["search", {"query": "weather"}]]},
            {"t": "call", "name": "search", "args": {"query": "weather"}, "id": f"c{i}"},
            {"t": "result", "name": "search", "id": f"c{i}", "output": json.dumps(result)},
        ]
    path.write_text(json.dumps({"id": "search-run", "events": events}) + "\n", "utf-8")
    return path


def _recorded(path: Path) -> Path:
    """A loop-guard trace (digests only) of the same kind of run."""
    recorder = TraceRecorder(path)
    detector = LoopDetector(DEFAULTS, listener=recorder.listener("run-1"))
    for i in range(3):
        detector.tool_call("search", {"query": "weather"}, call_id=f"c{i}")
        detector.tool_result("search", f'{{"score": {i}}}', call_id=f"c{i}")
    recorder.close()
    return path


def test_a_sweep_over_volatile_fields_masks_the_results_it_reads(tmp_path: Path) -> None:
    """The score and rank named volatile make the repeated search an exact repeat, as the
    same setting does live."""
    trace = _search_run(tmp_path / "runs.jsonl")
    result = calibrate(trace, "volatile_fields", [[], ["score", "rank"]], DEFAULTS)
    assert [report.would_stop for report in result.reports] == [0, 1]
    assert result.reports[1].runs[0].stop is not None
    assert result.reports[1].runs[0].stop.signal == "repeated_tool_call"
    live = LoopDetector(DEFAULTS.merged(volatile_fields=["score", "rank"]))
    stops = []
    for i in range(3):
        live.tool_call("search", {"query": "weather"}, call_id=f"c{i}")
        live.tool_result("search", json.dumps({"hits": ["sunny"], "score": i, "rank": i}))
    stops.append(live.tool_call("search", {"query": "weather"}, call_id="c3").stops)
    assert stops == [True]


def test_a_plain_replay_honours_volatile_fields_too(tmp_path: Path) -> None:
    """``--set volatile_fields=...`` (``replay(config)``) reads the results with it."""
    trace = _search_run(tmp_path / "runs.jsonl")
    assert replay(trace, DEFAULTS).would_stop == 0
    assert replay(trace, DEFAULTS.merged(volatile_fields={"search": ["score", "rank"]})).would_stop
    assert not replay(trace, DEFAULTS.merged(volatile_fields={"other": ["score"]})).would_stop


def test_the_cli_sweeps_per_tool_maps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON array of per-tool maps is swept value by value."""
    monkeypatch.chdir(tmp_path)
    trace = _search_run(tmp_path / "runs.jsonl")
    sweep = 'volatile_fields=[{}, {"search": ["score", "rank"]}]'
    assert main(["replay", str(trace), "--json", "--sweep", sweep]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert [s["would_stop"] for s in data["settings"]] == [0, 1]
    overrides = 'tool_threshold_overrides=[{}, {"search": 20}]'
    assert main(["replay", str(trace), "--json", "--sweep", overrides]) == EXIT_OK


@pytest.mark.parametrize(
    ("key", "values", "why"),
    [
        ("mode", ["on", "off"], "a replay evaluates mode 'on'"),
        ("locale", ["en", "ko"], "language of the report"),
        ("prompt_hint", [True, False], "cannot tell"),
        ("nudges", [0, 1], "cannot tell"),
        ("max_turns", [5, 50], "only warns"),
    ],
)
def test_a_setting_a_trace_cannot_answer_is_refused_before_it_runs(
    key: str, values: list[object], why: str, tmp_path: Path
) -> None:
    """Refused with its reason, before the trace is even opened (here it does not exist)."""
    with pytest.raises(LoopGuardConfigError) as info:
        calibrate(tmp_path / "missing.jsonl", key, values, DEFAULTS)
    assert f"{key} cannot be swept: " in str(info.value)
    assert why in str(info.value)
    assert key not in sweepable()


def test_volatile_fields_over_a_loop_guard_trace_is_refused_with_why(tmp_path: Path) -> None:
    """A recorded trace holds digests, not results: the sweep says so instead of '0 change'."""
    trace = _recorded(tmp_path / "trace.jsonl")
    with pytest.raises(LoopGuardConfigError, match="holds digests of results"):
        calibrate(trace, "volatile_fields", [[], ["score"]], DEFAULTS)


def _cli_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["replay", *args]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing was replayed
    return captured.err


def test_the_cli_refuses_sweeping_mode_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--sweep mode=on,off`` is one line naming the flag and the reason; exit 2."""
    monkeypatch.chdir(tmp_path)
    trace = _search_run(tmp_path / "runs.jsonl")
    err = _cli_error(capsys, str(trace), "--sweep", "mode=on,off")
    assert err.startswith("loop-guard: --sweep: mode cannot be swept: a replay evaluates")


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--sweep", "cycle_repeats"], "--sweep takes KEY=V1,V2,..., not 'cycle_repeats'"),
        (["--sweep", "cycle_repeat=2,3"], "--sweep: unknown key 'cycle_repeat'"),
        (["--set", "cycle_repeat=2"], "--set: unknown key 'cycle_repeat'"),
        (["--set", "cycle_repeats=1"], "--set, key 'cycle_repeats': got 1"),
        (["--sweep", "cycle_repeats=3,1"], "--sweep, key 'cycle_repeats': got 1"),
    ],
)
def test_errors_name_the_flag_that_gave_the_value(
    option: list[str],
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bad ``--sweep`` never blames ``--set``, and no error blames ``calibrate`` or
    ``code``, which the user never wrote."""
    monkeypatch.chdir(tmp_path)
    trace = _search_run(tmp_path / "runs.jsonl")
    err = _cli_error(capsys, str(trace), *option)
    assert expected in err
    assert "calibrate" not in err
    assert "code, key" not in err
    assert "code:" not in err


# --- a trace directory with stray files ---------------------------------------------------------


def test_stray_files_in_a_trace_directory_are_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``notes.txt`` and a file of another format among the traces: the traces replay, and
    the text and JSON reports name each file left out and why."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "traces"
    folder.mkdir()
    _search_run(folder / "a-runs.jsonl")
    (folder / "notes.txt").write_text("what I tried on Monday\n", "utf-8")
    _recorded(folder / "z-trace.jsonl")  # a loop-guard trace among trajectories
    config = DEFAULTS.merged(volatile_fields=["score", "rank"])
    report = replay(folder, config)
    assert report.would_stop == 1
    assert [Path(file).name for file, _ in report.skipped] == ["notes.txt", "z-trace.jsonl"]
    assert "a loop-guard trace among trajectories traces" in report.skipped[1][1]
    text = str(report)
    assert f"skipped {folder / 'notes.txt'}: " in text
    assert main(["replay", str(folder), "--json", "--set", 'volatile_fields=["score"]']) == 0
    data = json.loads(capsys.readouterr().out)
    assert [Path(s["file"]).name for s in data["skipped"]] == ["notes.txt", "z-trace.jsonl"]
    assert main(["replay", str(folder), "--sweep", "cycle_repeats=2,3"]) == EXIT_OK
    assert "skipped " in capsys.readouterr().out


def test_a_directory_of_stray_files_only_is_still_an_error(tmp_path: Path) -> None:
    """Nothing to replay: the first file's problem, naming it."""
    from langchain_loop_guard._replay._trace import TraceFormatError

    (tmp_path / "notes.txt").write_text("hello\n", "utf-8")
    with pytest.raises(TraceFormatError, match=r"notes\.txt"):
        replay(tmp_path, DEFAULTS)
