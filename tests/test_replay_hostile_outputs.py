"""What a hostile trace can do to replay's outputs: nothing raw, nothing unbounded, no traceback.

Run ids with bidirectional overrides, line separators, escapes and lone surrogates; 100 KB
tool names and run ids; ``--json`` of many runs streamed; a ``record_to=`` file others can read.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from langchain_loop_guard import LoopGuardConfig, calibrate, replay
from langchain_loop_guard._cli._main import EXIT_OK, EXIT_USAGE, main
from langchain_loop_guard._core._detector import DetectorEvent
from langchain_loop_guard._core._public import MAX_TOOL_NAME
from langchain_loop_guard._replay._replay import json_text
from langchain_loop_guard._replay._trace import TraceRecorder

DEFAULTS = LoopGuardConfig()
RAW = "\u202e\u2028\x1b\x07\x9b"  # right-to-left override, line separator, ESC, BEL, CSI


def _event(run: str, tool: str = "search", **extra: Any) -> str:
    line = {"v": 1, "run": run, "t": 0, "e": "tool_call", "tool": tool, "d": "ab12", **extra}
    return json.dumps(line, ensure_ascii=True)  # a lone surrogate only survives as an escape


def _looping_trace(path: Path, run: str, tool: str = "search", calls: int = 4) -> Path:
    path.write_text("".join(_event(run, tool) + "\n" for _ in range(calls)), encoding="utf-8")
    return path


def _outputs(trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Every replay format of ``trace`` (text, JSON, HTML; a sweep's too), each exit 0."""
    found: dict[str, str] = {}
    for name, extra in {
        "text": [],
        "json": ["--json"],
        "sweep text": ["--sweep", "repeat_tool_threshold=3,5"],
        "sweep json": ["--sweep", "repeat_tool_threshold=3,5", "--json"],
    }.items():
        assert main(["replay", str(trace), "--no-progress", *extra]) == EXIT_OK, name
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        found[name] = captured.out
    for name, extra in {"html": [], "sweep html": ["--sweep", "repeat_tool_threshold=3,5"]}.items():
        page = tmp_path / f"{name.replace(' ', '-')}.html"
        assert main(["replay", str(trace), "--no-progress", "--html", str(page), *extra]) == 0
        capsys.readouterr()
        found[name] = page.read_text(encoding="utf-8")
    return found


def test_html_escapes_a_run_ids_controls_as_the_text_and_json_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """U+202E (a spoofed ``invoice-exe.jpg``), U+2028 and ESC show as escapes on the page."""
    trace = _looping_trace(tmp_path / "t.jsonl", f"invoice{RAW}gpj.exe")
    for name, text in _outputs(trace, tmp_path, capsys).items():
        assert not any(char in text for char in RAW), name
        assert "\\u202e" in text, name
    page = replay(trace, DEFAULTS).to_html()
    assert "invoice\\u202e\\u2028\\x1b\\x07\\x9bgpj.exe" in page


def test_a_lone_surrogate_in_a_run_id_ends_no_format_in_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``"r\\ud800x"``: every format writes it as an escape; JSON reads back the same id."""
    trace = _looping_trace(tmp_path / "t.jsonl", "r\ud800x")
    outputs = _outputs(trace, tmp_path, capsys)
    for name, text in outputs.items():
        assert "r\\ud800x" in text, name
        text.encode("utf-8")  # strict: no surrogate left
    assert json.loads(outputs["json"])["runs"][0]["run"] == "r\ud800x"
    assert "r\ud800x" in json.loads(outputs["sweep json"])["settings"][0]["stops"]


@pytest.mark.parametrize("fmt", ["loop-guard", "langsmith", "trajectories"])
def test_replay_cuts_tool_names_as_the_live_guard_does(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 100,000-character tool name is cut at MAX_TOOL_NAME (200) in every format and output."""
    tool = "x" * 100_000
    trace = tmp_path / "t.json"
    if fmt == "loop-guard":
        _looping_trace(trace, "r", tool)
    elif fmt == "trajectories":
        events = [{"t": "call", "name": tool, "args": {}, "id": f"c{i}"} for i in range(4)]
        trace.write_text(json.dumps({"id": "r", "events": events}), encoding="utf-8")
    else:
        runs = [
            {
                "id": f"tool-{i}",
                "trace_id": "t",
                "name": tool,
                "run_type": "tool",
                "start_time": f"2025-01-01T00:00:0{i}",
                "end_time": f"2025-01-01T00:00:0{i}.5",
                "inputs": {"q": 1},
                "outputs": {"output": "same"},
            }
            for i in range(4)
        ]
        trace.write_text(json.dumps(runs), encoding="utf-8")
    report = replay(trace, DEFAULTS)
    assert report.runs[0].stop is not None
    cut = report.runs[0].stop.tool
    assert cut is not None
    assert len(cut) == MAX_TOOL_NAME
    assert cut.endswith("…")
    for name, text in _outputs(trace, tmp_path, capsys).items():
        assert tool not in text, name
        assert len(text) < 60_000, name


def test_a_malformed_events_error_line_cuts_a_huge_run_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 1 MB run id (or value) is quoted by its first 60 characters, never whole."""
    huge = "r" * 1_000_000
    trajectory = tmp_path / "runs.jsonl"
    trajectory.write_text(json.dumps({"id": huge, "events": [{"t": "turn"}, 5]}))
    bad_time = tmp_path / "trace.jsonl"
    bad_time.write_text(json.dumps({"v": 1, "run": "r", "t": huge, "e": "tick"}))
    fields = {"v": 1, "run": "r", "t": 0, "e": "tick", **{f"k{i}{huge[:999]}": 1 for i in range(9)}}
    unknown = tmp_path / "fields.jsonl"
    unknown.write_text(json.dumps(fields))
    for path, problem in (
        (trajectory, "expected an object"),
        (bad_time, '"t" must be'),
        (unknown, "unknown field"),
    ):
        assert main(["replay", str(path), "--no-progress"]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert problem in err
        assert len(err) < len(str(path)) + 500, err[:300]


def test_json_chunks_are_the_json_text_of_the_report_and_the_calibration(tmp_path: Path) -> None:
    """Streamed or built, ``--json`` writes the same document."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "".join(_event(f"run-{i}") + "\n" for i in range(5))
        + _looping_trace(tmp_path / "loop.jsonl", "loop").read_text(),
        encoding="utf-8",
    )
    report = replay(trace, DEFAULTS)
    assert "".join(report.json_chunks()) == json_text(report.to_json())
    sweep = calibrate(trace, "repeat_tool_threshold", [3, 5, 9], DEFAULTS)
    assert "".join(sweep.json_chunks()) == json_text(sweep.to_json())
    assert sweep.to_json()["settings"][0]["stops"]["loop"]["signal"] == "repeated_tool_call"


def test_replay_json_streams_a_run_at_a_time(tmp_path: Path) -> None:
    """Writing ``--json`` of 20,000 runs holds a run's text at a time, not the document."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(_event(f"run-{i:06d}") + "\n" for i in range(20_000)))
    report = replay(trace, DEFAULTS)
    tracemalloc.start()
    try:
        written = sum(len(chunk) for chunk in report.json_chunks())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert written > 3_000_000
    assert peak < written // 8, peak  # the document, built whole, took about 3x its size


def _recorded(path: Path) -> None:
    recorder = TraceRecorder(path)
    recorder.write("r", [DetectorEvent(kind="turn_start")])
    recorder.close()


def test_an_existing_trace_file_others_can_read_is_made_private_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``record_to=`` a 0644 file: tightened to 0600 (on its descriptor), and the log says so."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("")
    trace.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        _recorded(trace)
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    assert "had mode 0644" in caplog.text
    assert "now 0600" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        _recorded(trace)  # private already: nothing to say
    assert caplog.text == ""
    assert len(trace.read_text().splitlines()) == 2


def test_a_trace_file_that_cannot_be_made_private_is_recorded_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's file (``fchmod`` refused): the events are still written, and a warning."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("")
    trace.chmod(0o664)

    def refuse(fd: int, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchmod", refuse)
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        _recorded(trace)
    assert stat.S_IMODE(trace.stat().st_mode) == 0o664
    assert "could not be made private (PermissionError)" in caplog.text
    assert trace.read_text().count("turn_start") == 1


def test_a_device_as_the_trace_file_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """``record_to="/dev/null"`` (not a regular file): its mode is never changed."""
    changed: list[int] = []
    monkeypatch.setattr(os, "fchmod", lambda fd, mode: changed.append(mode))
    _recorded(Path(os.devnull))
    assert changed == []
