"""The report answers "which setting?" (issue 40, points 4 and 5): headline cards for the
configuration as run, the current value marked on every chart, missed loops and stopped good
runs named and linked, a recommendation with its reason, and the caveat for traces a live
stop cut; in the page, the text and the JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from langchain_loop_guard import LoopGuardConfig, calibrate
from langchain_loop_guard._cli._demo import run_demo
from langchain_loop_guard._cli._main import EXIT_OK, main

LABELS = {"demo-repeat": "loop", "demo-cycle": "loop", "demo-productive": "fine"}
RECOMMENDED = (
    "recommended: `cycle_repeats=3`: stops 2 of the 2 labelled loops, and no labelled good run"
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two loops and a productive run; the cycle recorded in mode on, so the live guard cut
    its trace at its third lap."""
    folder = tmp_path_factory.mktemp("demo-runs")
    for loop, mode in (("repeat", "observe"), ("cycle", "on"), ("productive", "observe")):
        run_demo(loop, mode=mode, integration="middleware", record_to=folder / f"{loop}.jsonl")
    return folder


def _sweep(runs: Path, current: int, labels: dict[str, str] | None = LABELS) -> str:
    config = LoopGuardConfig(cycle_repeats=current)
    return calibrate(runs, "cycle_repeats", [2, 3, 4], config, labels=labels).to_html()


def _cards(page: str) -> list[str]:
    return re.findall(r'<div class="card"><b>[^<]*</b>([^<]*)</div>', page)


def test_the_headline_cards_are_the_configuration_as_run(runs: Path) -> None:
    """With ``cycle_repeats=4`` in force, the cards count the stops of 4, not of the first
    value swept (2): 1 run stops, 1 loop missed, and 2 of 3 runs replay as they ran live."""
    page = _sweep(runs, current=4)
    cards = _cards(page)
    assert "runs that would stop (cycle_repeats=4)" in cards
    assert "loops missed (cycle_repeats=4)" in cards
    assert not any("cycle_repeats=2" in card for card in cards)
    assert '<div class="card"><b>1</b>runs that would stop (cycle_repeats=4)</div>' in page
    assert '<div class="card"><b>2/3</b>runs replayed as they ran live</div>' in page
    assert "settings: cycle_repeats=4" in page


def test_the_current_value_is_marked_on_every_chart(runs: Path) -> None:
    """A frame around the current value's bars on the labels chart and the stops chart, with
    its legend."""
    page = _sweep(runs, current=3)
    charts = re.findall(r"<svg[^>]*viewBox=\"0 0 \d+ 250\".*?</svg>", page, re.DOTALL)
    assert len(charts) == 2
    for chart in charts:
        assert chart.count('class="current"') == 1
        frame = re.search(r'<rect class="current" x="([\d.]+)"', chart)
        assert frame is not None
        assert float(frame.group(1)) == pytest.approx(
            (60 + 130 * 1 - 8) if "verdicts" in chart else (60 + 110 * 1 - 8)
        )
    assert page.count("current: cycle_repeats=3") == 2


def test_a_current_value_not_swept_is_replayed_and_said(runs: Path) -> None:
    """``cycle_repeats=5`` in force, 2-4 swept: the cards are 5's, no chart frames a value,
    and the page says where the current value stands."""
    sweep = calibrate(runs, "cycle_repeats", [2, 3, 4], LoopGuardConfig(cycle_repeats=5))
    assert sweep.current_index is None
    assert sweep.headline.config.cycle_repeats == 5
    page = sweep.to_html()
    assert 'class="current"' not in page
    assert "current: cycle_repeats=5 (not among the values swept)" in page
    assert "current: cycle_repeats=5 (not among the values swept)" in str(sweep)


def test_missed_loops_and_stopped_good_runs_are_named_and_linked(runs: Path) -> None:
    """The loop the current value misses and the good run another value stops are listed by
    name, each linking to an element of the page."""
    page = _sweep(runs, current=4)
    assert "1 labelled loop would not stop (cycle_repeats=4)" in page
    missed = re.search(
        r'<li><a href="#(run-\d+)">demo-cycle</a>: [^<]*stopped with ([^<]*)</li>', page
    )
    assert missed is not None
    assert missed.group(2) == "cycle_repeats=2, cycle_repeats=3"
    good = re.search(r'<li><a href="#(run-\d+)">demo-productive</a> \(cycle_repeats=2\)', page)
    assert good is not None
    ids = set(re.findall(r'id="(run-\d+)"', page))
    for target in re.findall(r'href="#(run-\d+)"', page):
        assert target in ids


def test_a_recommendation_with_its_reason_in_every_output(
    runs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The value that stops every labelled loop and no good run, and why: the page (the
    setting as code), the text report and the JSON."""
    page = _sweep(runs, current=4)
    assert RECOMMENDED.replace("`cycle_repeats=3`", "<code>cycle_repeats=3</code>") in page
    labels = runs.parent / "labels.json"
    labels.write_text(json.dumps(LABELS), "utf-8")
    monkeypatch.setenv("LOOP_GUARD_CYCLE_REPEATS", "4")
    args = ["replay", str(runs), "--sweep", "cycle_repeats=2,3,4", "--labels", str(labels)]
    assert main(args) == EXIT_OK
    assert RECOMMENDED in capsys.readouterr().out
    assert main([*args, "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["current"] == 4
    assert data["recommended"] == {"value": 3, "reason": RECOMMENDED}


def test_the_recommendation_says_when_it_is_the_current_value(runs: Path) -> None:
    """Already in force: it says so."""
    sweep = calibrate(
        runs, "cycle_repeats", [2, 3, 4], LoopGuardConfig(cycle_repeats=3), labels=LABELS
    )
    assert sweep.recommended == 1
    assert f"{RECOMMENDED} (current)" in str(sweep)


def test_without_labels_the_page_says_how_to_get_a_recommendation(runs: Path) -> None:
    """No verdicts, no recommendation: the page names the flags that give one."""
    page = _sweep(runs, current=3, labels=None)
    assert "recommended:" not in page
    assert "No recommendation without your verdicts" in page


def test_runs_a_live_stop_cut_carry_a_caveat(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cycle recorded in mode on ends at its live stop, so cycle_repeats=4 shows it as not
    stopping: the sweep's text, JSON and page say why."""
    sweep = calibrate(runs, "cycle_repeats", [3, 4], LoopGuardConfig())
    assert sweep.cut_by_live_stops == 1
    caveat = "caveat: 1 run ends where the live guard stopped it"
    assert caveat in str(sweep)
    assert sweep.to_json()["cut_by_live_stops"] == 1
    assert caveat in sweep.to_html()
    assert main(["replay", str(runs), "--set", "cycle_repeats=4"]) == EXIT_OK
    assert caveat in capsys.readouterr().out


def test_no_caveat_where_every_value_stops_the_cut_run(runs: Path) -> None:
    """A live stop that every value also stops cuts nothing the sweep needs."""
    sweep = calibrate(runs, "cycle_repeats", [2, 3], LoopGuardConfig())
    assert sweep.cut_by_live_stops == 0
    assert "caveat" not in str(sweep)
