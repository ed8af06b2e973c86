"""The replay report as HTML (``loop-guard replay --html``, ``_repr_html_``): what the page holds.

The browser tests (``test_report_browser.py``) check what Chromium draws; these check the
page's text: self-contained, digests only, stopped runs first, the others folded, bounded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from langchain_loop_guard import LoopGuardConfig, calibrate, replay
from langchain_loop_guard._cli._main import EXIT_OK, main
from langchain_loop_guard._core._detector import DetectorEvent
from langchain_loop_guard._replay._replay_results import MAX_MARKS, Timeline
from langchain_loop_guard._replay._report import MAX_DRAWN, MAX_LISTED

DEFAULTS = LoopGuardConfig()
CANARIES = ("canary-arg-5f1d", "canary-out-77b2", "canary-err-c0de", "canary-say-9e9e")
HOSTILE_TOOL = '<script>alert("x")</script>&tool'


def _looping(run: str, tool: str = "read_log", calls: int = 6) -> dict[str, Any]:
    """A run that reads the same thing again and again (stops at its third call)."""
    events: list[dict[str, Any]] = []
    for i in range(calls):
        events += [
            {"t": "turn"},
            {"t": "assistant", "text": f"{CANARIES[3]} {i}", "tool_calls": [[tool, {}]]},
            {"t": "call", "name": tool, "args": {"path": CANARIES[0]}, "id": f"c{i}"},
            {"t": "result", "name": tool, "id": f"c{i}", "output": f"{CANARIES[1]} same"},
        ]
    return {"id": run, "events": events}


def _failing(run: str, tool: str = "deploy") -> dict[str, Any]:
    """A run whose calls fail alike with new arguments (a repeated error)."""
    events: list[dict[str, Any]] = []
    for i in range(5):
        events += [
            {"t": "turn"},
            {"t": "call", "name": tool, "args": {"v": f"{CANARIES[0]}-{i}"}, "id": f"d{i}"},
            {"t": "error", "name": tool, "id": f"d{i}", "error": f"{CANARIES[2]} refused"},
        ]
    return {"id": run, "events": events}


def _productive(run: str, calls: int = 8) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    for i in range(calls):
        events += [
            {"t": "turn"},
            {"t": "call", "name": "read", "args": {"path": f"{CANARIES[0]}/{i}"}, "id": f"r{i}"},
            {"t": "result", "name": "read", "id": f"r{i}", "output": f"{CANARIES[1]} {i}"},
        ]
    return {"id": run, "events": events}


def _trace(tmp_path: Path, runs: list[dict[str, Any]], name: str = "runs.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(run) + "\n" for run in runs), encoding="utf-8")
    return path


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """Productive runs around two loops, one of them by a tool with a hostile name."""
    runs = [
        _productive("quiet-1"),
        _looping("loop-1"),
        _productive("quiet-2", calls=20),
        _failing("fail-1", tool=HOSTILE_TOOL),
    ]
    return _trace(tmp_path, runs)


def test_the_page_is_self_contained_and_loads_nothing(mixed: Path) -> None:
    """No script, stylesheet link, image, frame, font or URL; a policy that forbids loads."""
    page = replay(mixed, DEFAULTS).to_html()
    assert page.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "<link", "<img", "<iframe", "@import", "url(", "http:", "https:"):
        assert forbidden not in page.lower(), forbidden
    assert re.search(r"src\s*=", page) is None
    assert "Content-Security-Policy\" content=\"default-src 'none'" in page


@pytest.mark.parametrize("sweep", [False, True], ids=["report", "sweep"])
def test_no_argument_output_error_or_message_text_of_the_trace_is_on_the_page(
    mixed: Path, sweep: bool
) -> None:
    """Digests only (SPEC §8): the trace's content never reaches the page, nor raw markup."""
    if sweep:
        page = calibrate(mixed, "repeat_tool_threshold", [2, 3, 4], DEFAULTS).to_html()
    else:
        page = replay(mixed, DEFAULTS).to_html()
    assert CANARIES[0] in mixed.read_text()  # the trace holds them all
    for canary in CANARIES:
        assert canary not in page, canary
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;tool" in page


def test_runs_that_would_stop_are_drawn_first_with_their_stop(mixed: Path) -> None:
    """Each stopped run has a timeline with an anchor, the signal, count and message."""
    report = replay(mixed, DEFAULTS)
    page = report.to_html()
    drawn = re.findall(r'<div class="run[^"]*" id="run-(\d+)"', page)
    assert [report.runs[int(i)].run for i in drawn] == ["loop-1", "fail-1"]
    assert page.index('id="run-1"') < page.index("quiet-1")
    assert "repeated_tool_call" in page
    reason = "<code>read_log</code> was called 3 times in a row with the same arguments (limit 3)."
    assert reason in page
    assert page.count("<svg") == 2


def test_runs_that_would_not_stop_are_folded_longest_first(mixed: Path) -> None:
    """A closed ``<details>`` lists them, the longest first, with their sizes."""
    page = replay(mixed, DEFAULTS).to_html()
    folded = page[page.index("<details>") :]
    assert "2 runs would not stop (the longest first)" in folded
    assert folded.index("quiet-2") < folded.index("quiet-1")
    assert "run quiet-2: 60 events, 20 tool calls" in folded


def test_a_sweep_charts_each_value_and_links_the_runs_it_moves(tmp_path: Path) -> None:
    """Bars per value by signal, and each run that changes links to its timeline."""
    path = _trace(tmp_path, [_looping("loop-1", calls=4), _productive("quiet")])
    sweep = calibrate(path, "repeat_tool_threshold", [3, 5], DEFAULTS)
    page = sweep.to_html()
    assert "runs stopped by each value of repeat_tool_threshold" in page
    assert "<title>repeated_tool_call: 1</title>" in page
    assert "from repeat_tool_threshold=3 to repeat_tool_threshold=5: 1 run changes" in page
    assert '<a href="#run-0">loop-1</a>' in page
    assert 'id="run-0"' in page
    assert "repeat_tool_threshold=5: would not stop" in page


def test_a_recorded_run_says_whether_the_replay_agrees_with_the_live_run(
    tmp_path: Path,
) -> None:
    """A loop-guard trace recorded live: the overview and the run say the replay agrees."""
    from langchain.agents import create_agent

    from langchain_loop_guard import LoopGuardCallbackHandler
    from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

    trace = tmp_path / "live.jsonl"
    guard = LoopGuardCallbackHandler({"mode": "observe"}, record_to=trace)
    model = ScriptedChatModel(script=[call("search", {"q": CANARIES[0]})] * 5 + ["done"])
    agent = create_agent(model, [scripted_tool("search", CANARIES[1])])
    agent.invoke({"messages": [("user", "go")]}, {"callbacks": [guard]})
    page = replay(trace, DEFAULTS).to_html()
    assert "<b>1/1</b>runs replayed as they ran live" in page
    assert "live run: the same" in page


def test_the_page_is_in_the_reports_locale(mixed: Path) -> None:
    """Labels come from the catalog: a Korean configuration gives a Korean page."""
    page = replay(mixed, DEFAULTS.merged(locale="ko")).to_html()
    assert '<html lang="ko">' in page
    assert "loop-guard 재생 보고서" in page
    assert "중단될 실행" in page


def test_jupyter_shows_the_body_of_the_page(mixed: Path) -> None:
    """``_repr_html_`` is the page's body: styled, scoped, without a document around it."""
    report = replay(mixed, DEFAULTS)
    body = report._repr_html_()
    assert body.startswith('<div class="lgr"><style>')
    assert "<html" not in body
    assert body in report.to_html()
    sweep = calibrate(mixed, "repeat_tool_threshold", [2, 3], DEFAULTS)
    assert "runs stopped by each value of repeat_tool_threshold" in sweep._repr_html_()


def test_a_long_run_keeps_a_bounded_number_of_marks() -> None:
    """Past ``MAX_MARKS`` neighbours merge: each mark then stands for more calls."""
    timeline = Timeline()
    for index in range(1, 10_001):
        timeline.add(DetectorEvent(kind="tool_call", tool=f"t{index % 3}", digest="d"), index)
    assert len(timeline.at) <= MAX_MARKS
    assert timeline.span == 64
    assert timeline.at[-1] > 9_000


def test_a_page_where_no_run_would_stop_draws_no_timeline(tmp_path: Path) -> None:
    """Nothing to draw: the overview says 0 and every run is in the fold."""
    page = replay(_trace(tmp_path, [_productive("a"), _productive("b")]), DEFAULTS).to_html()
    assert "<b>0</b>runs that would stop" in page
    assert "<svg" not in page
    assert "2 runs would not stop (the longest first)" in page


def test_a_long_run_says_how_many_calls_a_mark_stands_for(tmp_path: Path) -> None:
    """A run of 1,000 calls keeps at most ``MAX_MARKS`` marks and says what each stands for."""
    page = replay(_trace(tmp_path, [_looping("long", calls=1_000)]), DEFAULTS).to_html()
    timeline = page[page.index("<svg") : page.index("</svg>")]
    marks = len(re.findall(r"M[\d.]+ 7h", timeline))  # a mark: "M<x> 7h<w>v20h-<w>z"
    assert 1_000 / 4 <= marks <= MAX_MARKS
    assert "each mark stands for up to 4 tool calls" in page


def test_a_failed_result_marks_its_call() -> None:
    """An error result marks the latest call of its tool."""
    timeline = Timeline()
    timeline.add(DetectorEvent(kind="tool_call", tool="a", digest="d"), 1)
    timeline.add(DetectorEvent(kind="tool_call", tool="b", digest="d"), 2)
    timeline.add(DetectorEvent(kind="tool_result", tool="a", digest="e", error=True), 3)
    assert list(timeline.failed) == [1, 0]


def test_a_run_with_many_tool_names_keeps_a_bounded_list_of_them() -> None:
    """A hostile run with a new tool name per call keeps 32 names, the last one shared."""
    timeline = Timeline()
    for index in range(1, 101):
        timeline.add(DetectorEvent(kind="tool_call", tool=f"tool-{index}", digest="d"), index)
    assert len(timeline.names) == 32
    assert timeline.names[-1] == "…"


def test_the_page_stays_small_however_many_runs_stop(tmp_path: Path) -> None:
    """Past ``MAX_DRAWN`` timelines, stopped runs are listed; past ``MAX_LISTED``, counted."""
    runs = [_looping(f"loop-{i}", calls=3) for i in range(MAX_DRAWN + MAX_LISTED + 50)]
    report = replay(_trace(tmp_path, runs), DEFAULTS)
    page = report.to_html()
    assert report.would_stop == len(runs)
    assert page.count("<svg") == MAX_DRAWN
    assert f'id="run-{MAX_DRAWN + MAX_LISTED - 1}"' in page
    assert "and 50 more (--json lists every run)" in page
    assert len(page) < 2_000_000


def test_cli_writes_the_page_with_set_sweep_and_json(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--html`` writes the page; the text (or ``--json``) report is printed as usual."""
    page = tmp_path / "report.html"
    args = ["replay", str(mixed), "--set", "repeat_tool_threshold=4", "--no-progress"]
    assert main([*args, "--html", str(page), "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["summary"]["would_stop"] == 2
    assert "repeat_tool_threshold=4" in page.read_text(encoding="utf-8")
    sweep = ["--sweep", "repeat_tool_threshold=3,6", "--html", str(page)]
    assert main(["replay", str(mixed), "--no-progress", *sweep]) == EXIT_OK
    assert "runs stopped by each value" in page.read_text(encoding="utf-8")
    assert "repeat_tool_threshold=3: 2 of 4 runs would stop" in capsys.readouterr().out


def test_cli_says_when_the_page_cannot_be_written(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unwritable ``--html`` path is one line naming it, exit 2."""
    target = tmp_path / "missing" / "report.html"
    assert main(["replay", str(mixed), "--no-progress", "--html", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"loop-guard: {target}: No such file or directory"
