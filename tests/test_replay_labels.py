"""Calibrating on the user's own verdicts: ``--labels FILE`` and ``--feedback KEY[=THRESHOLD]``.

The runs are the demo's (``loop-guard demo --integration middleware --mode observe --record``):
three loops and a long productive run, named ``demo-<loop>`` by their thread. With
``cycle_repeats=2`` the productive run would stop (a false stop); with 3 it would not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langchain_loop_guard import LoopGuardConfig, calibrate, replay
from langchain_loop_guard._cli._demo import run_demo
from langchain_loop_guard._cli._main import EXIT_OK, EXIT_USAGE, main
from langchain_loop_guard._replay._labels import Feedback, read_labels
from langchain_loop_guard._replay._trace import TraceFormatError

EN, KO = LoopGuardConfig(), LoopGuardConfig(locale="ko")
LOOPS = ("repeat", "cycle", "error")
LABELS = {**{f"demo-{loop}": "loop" for loop in LOOPS}, "demo-productive": "fine"}
FIXTURE = Path(__file__).parent / "fixtures" / "langsmith_export.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of four recorded demo runs (observe mode: each ran to its end)."""
    folder = tmp_path_factory.mktemp("demo-runs")
    for loop in (*LOOPS, "productive"):
        result = run_demo(
            loop,  # type: ignore[arg-type]
            mode="observe",
            integration="middleware",
            record_to=folder / f"{loop}.jsonl",
        )
        assert result.error is None
    return folder


def _labels_file(folder: Path, kind: str, labels: dict[str, str] = LABELS) -> Path:
    if kind == "json":
        path = folder / "labels.json"
        path.write_text(json.dumps(labels))
    else:
        path = folder / "labels.csv"
        path.write_text("run,label\n" + "".join(f"{r},{v}\n" for r, v in labels.items()))
    return path


@pytest.mark.parametrize("kind", ["json", "csv"])
def test_a_labels_file_is_a_json_object_or_csv_rows(kind: str, tmp_path: Path) -> None:
    """Both forms read to the same labels; CSV's header row is optional, labels any case."""
    assert read_labels(_labels_file(tmp_path, kind)) == LABELS
    bare = tmp_path / "bare.csv"
    bare.write_text("demo-repeat, LOOP\n\ndemo-productive,fine\n")
    assert read_labels(bare) == {"demo-repeat": "loop", "demo-productive": "fine"}


BAD_LABELS = {
    "not loop or fine": ('{"r": "maybe"}', 0, 'must be "loop" or "fine", not "maybe"'),
    "an array": ('[["r", "loop"]]', 1, "one JSON object, not an array"),
    "broken JSON": ('{"r": "loop",\n', 2, "not valid JSON"),
    "a number as a label": ('{"a": 1}', 0, "not 1"),
    "three columns": ("run,label\nr,loop,x\n", 2, "two columns"),
    "a CSV label": ("r,good\n", 1, 'not "good"'),
}


@pytest.mark.parametrize("case", BAD_LABELS)
def test_a_bad_labels_file_is_one_line_naming_file_and_line(
    case: str, runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``loop-guard: FILE:LINE: problem`` and status 2, as for a bad trace."""
    text, line, problem = BAD_LABELS[case]
    labels = tmp_path / "labels.txt"
    labels.write_text(text)
    assert main(["replay", str(runs), "--labels", str(labels), "--no-progress"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"loop-guard: {labels}{f':{line}' if line else ''}: "), err
    assert problem in err
    assert len(err.splitlines()) == 1


def test_replay_scores_its_stops_against_the_labels(runs: Path, tmp_path: Path) -> None:
    """Loops stopped, loops missed, good runs stopped; each run says its label."""
    report = replay(runs, EN, labels=LABELS)
    found = report.score
    assert found is not None
    assert (found.loops, found.caught, found.missed) == (3, 3, 0)
    assert (found.fine, found.false_stops, found.unlabelled, found.unknown) == (1, 0, 0, 0)
    text = str(report)
    assert "run demo-repeat: 31 events, 7 tool calls (labelled a loop)" in text
    assert "(labelled fine)" in text
    assert text.endswith(
        "your labels: loops stopped 3 of 3, loops missed 0, good runs stopped 0 of 1"
    )
    data = report.to_json()
    assert data["summary"]["labels"]["loops_stopped"] == 3
    assert {run["run"]: run["label"] for run in data["runs"]} == LABELS
    korean = str(replay(runs, KO, labels=LABELS))
    assert "중단될 루프 3/3, 놓칠 루프 0, 중단될 정상 실행 0/1" in korean
    assert "(fine(정상)으로 표시됨)" in korean
    assert str(replay(runs, EN)).count("labelled") == 0  # without labels: as before


def test_labels_that_name_no_run_and_runs_without_a_label_are_counted(runs: Path) -> None:
    """An id of another kind (a LangSmith run id for a trace id) shows as unmatched."""
    labels = {"demo-repeat": "loop", "0192f0e4-not-in-the-trace": "fine"}
    report = replay(runs, EN, labels=labels)
    assert report.score is not None
    assert (report.score.unlabelled, report.score.unknown) == (3, 1)
    text = str(report)
    assert "runs without a label: 3" in text
    assert "labels naming no run of the trace: 1 (ids of another kind?)" in text


def test_a_sweep_says_per_value_the_loops_it_stops_and_the_good_runs_it_stops(
    runs: Path, tmp_path: Path
) -> None:
    """``calibrate(..., labels=)``: cycle_repeats=2 stops the good run, 3 does not."""
    sweep = calibrate(runs, "cycle_repeats", [2, 3], EN, labels=_labels_file(tmp_path, "csv"))
    scores = [report.score for report in sweep.reports]
    assert [(s.caught, s.missed, s.false_stops) for s in scores if s] == [(3, 0, 1), (3, 0, 0)]
    text = str(sweep)
    assert "  loops stopped 3 of 3, loops missed 0, good runs stopped 1 of 1" in text
    assert "    good runs that would stop: demo-productive" in text
    settings = sweep.to_json()["settings"]
    assert settings[0]["labels"]["fine_stopped_runs"] == ["demo-productive"]
    assert settings[1]["labels"]["fine_stopped"] == 0
    assert "".join(sweep.json_chunks()) == json.dumps(sweep.to_json(), indent=2, ensure_ascii=False)


def test_the_page_charts_caught_against_false_stops_and_lists_the_good_runs_first(
    runs: Path,
) -> None:
    """A bar per value for the loops stopped and the good runs stopped; the good run that
    would stop is listed, and drawn, before any loop; in Jupyter too; in Korean too."""
    sweep = calibrate(runs, "cycle_repeats", [2, 3, 4], EN, labels=LABELS)
    page = sweep.to_html()
    assert '<svg class="verdicts"' in page
    assert "<title>loops stopped: 3/3</title>" in page
    assert "<title>good runs stopped: 1/1</title>" in page
    assert "<title>good runs stopped: 0/1</title>" in page
    assert page.index("1 good run would stop") < page.index("runs stopped by each value")
    assert page.index('href="#run-') < page.index("from cycle_repeats=2")
    first_drawn = page.index('<div class="run')
    assert page.index("demo-productive", first_drawn) < page.index("demo-repeat", first_drawn)
    assert '<span class="tag fine">labelled fine</span>' in page
    assert sweep._repr_html_() in page
    korean = calibrate(runs, "cycle_repeats", [2, 3], KO, labels=LABELS).to_html()
    assert "내 판정 기준: 중단될 루프와 중단될 정상 실행" in korean
    assert "중단될 정상 실행 1개" in korean
    single = replay(runs, EN, labels=LABELS).to_html()
    assert "0 good runs would stop" in single
    assert "loops stopped 3 of 3" in single


def test_cli_labels_with_sweep_json_and_html(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``loop-guard replay RUNS --labels FILE --sweep ... --json --html PAGE``."""
    labels, page = _labels_file(tmp_path, "json"), tmp_path / "sweep.html"
    args = ["replay", str(runs), "--labels", str(labels), "--sweep", "cycle_repeats=2,3"]
    assert main([*args, "--no-progress", "--json", "--html", str(page)]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert [s["labels"]["fine_stopped"] for s in data["settings"]] == [1, 0]
    assert '<svg class="verdicts"' in page.read_text("utf-8")
    both = ["--labels", str(labels), "--feedback", "x"]
    assert main(["replay", str(runs), *both]) == EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err


# --- LangSmith feedback -------------------------------------------------------------------------


def _with_feedback(tmp_path: Path, scores: dict[str, Any]) -> Path:
    """The LangSmith fixture with ``feedback_stats`` on each trace's root run."""
    runs = json.loads(FIXTURE.read_text())
    for run in runs:
        if run["parent_run_id"] is None and run["trace_id"] in scores:
            run["feedback_stats"] = scores[run["trace_id"]]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(runs))
    return path


def _traces() -> list[str]:
    runs = json.loads(FIXTURE.read_text())
    return sorted({run["trace_id"] for run in runs if run["parent_run_id"] is None})


def test_feedback_scores_label_a_langsmith_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--feedback correctness``: below 0.5 a loop, at or above it fine; ``KEY=THRESHOLD``."""
    traces = _traces()
    scores = {
        trace: {"correctness": {"n": 2, "avg": 0.0 if index == 0 else 1.0}, "thumbs": 1}
        for index, trace in enumerate(traces)
    }
    export = _with_feedback(tmp_path, scores)
    report = replay(export, EN, feedback="correctness")
    assert report.labels == {
        trace: "loop" if index == 0 else "fine" for index, trace in enumerate(traces)
    }
    assert report.score is not None
    assert report.score.loops == 1
    assert replay(export, EN, feedback=Feedback("correctness", 1.5)).labels == dict.fromkeys(
        traces, "loop"
    )
    sweep = calibrate(export, "repeat_tool_threshold", [3, 9], EN, feedback="correctness=0.5")
    assert all(report.score is not None for report in sweep.reports)
    assert main(["replay", str(export), "--feedback", "thumbs=0.5", "--no-progress"]) == 0
    assert "your labels:" in capsys.readouterr().out


def test_feedback_problems_are_one_line(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key no run has (naming those found), a threshold that is no number, a trace that
    is not a LangSmith export."""
    export = _with_feedback(tmp_path, {trace: {"thumbs": {"avg": 1}} for trace in _traces()})
    for args, problem in (
        ([str(export), "--feedback", "correctness"], "feedback_stats keys found: thumbs"),
        ([str(export), "--feedback", "thumbs=high"], "THRESHOLD must be a number, not 'high'"),
        ([str(runs), "--feedback", "thumbs"], "only with LangSmith exports"),
    ):
        assert main(["replay", *args, "--no-progress"]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert problem in err
        assert len(err.strip().splitlines()) == 1
    with pytest.raises(TraceFormatError, match="no run has the feedback key"):
        replay(export, EN, feedback="correctness")


def test_labels_name_a_thread_replayed_as_one_run(tmp_path: Path) -> None:
    """With ``scope="thread"`` a run is ``thread:ID``; a label for ``ID`` is its label."""
    runs = json.loads(FIXTURE.read_text())
    for run in runs:
        run["extra"] = {**(run.get("extra") or {}), "metadata": {"thread_id": "ticket-7"}}
    export = tmp_path / "threads.json"
    export.write_text(json.dumps(runs))
    report = replay(export, LoopGuardConfig(scope="thread"), labels={"ticket-7": "loop"})
    assert [run.run for run in report.runs] == ["thread:ticket-7"]
    assert report.label(report.runs[0]) == "loop"


# --- hostile labels and feedback ------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_labels_fifo_is_refused_unread(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--labels`` naming a FIFO is a one-line error (it waited for a writer forever)."""
    import os

    fifo = tmp_path / "labels.fifo"
    os.mkfifo(fifo)
    assert main(["replay", str(runs), "--labels", str(fifo), "--no-progress"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "a labels file must be a regular file: not a regular file" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.timeout(60)
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_a_labels_device_is_refused_unread(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--labels /dev/zero`` is a one-line error (it was read until a MemoryError)."""
    assert main(["replay", str(runs), "--labels", "/dev/zero", "--no-progress"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "not a regular file" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("avg", "n"),
    [(10**400, 1), (0.0, 10**400), (float("nan"), 1), (float("inf"), 1)],
    ids=["400-digit-average", "400-digit-count", "nan", "infinity"],
)
def test_a_feedback_score_that_is_no_finite_number_labels_no_run(
    tmp_path: Path, avg: object, n: object
) -> None:
    """A run whose feedback average is no finite number (an integer of 400 digits made an
    OverflowError, NaN labelled the run fine) is left unlabelled; the others keep theirs."""
    traces = _traces()
    scores = {trace: {"correctness": {"n": 1, "avg": 0.0}} for trace in traces}
    scores[traces[0]] = {"correctness": {"n": n, "avg": avg}}
    report = replay(_with_feedback(tmp_path, scores), EN, feedback="correctness")
    assert report.labels is not None
    expected = dict.fromkeys(traces[1:], "loop")
    if n != 1:  # a count that is no number counts as one
        expected[traces[0]] = "loop"
    assert report.labels == expected


def test_feedback_keys_named_in_an_error_are_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When no run has the ``--feedback`` key, the keys found are named cut (a 1 MB key was
    copied whole into the one-line message)."""
    key = "k" * 1_000_000
    export = _with_feedback(tmp_path, {trace: {key: {"avg": 1}} for trace in _traces()})
    assert main(["replay", str(export), "--feedback", "correctness", "--no-progress"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "feedback_stats keys found: kkkk" in err
    assert len(err) < 1_000
