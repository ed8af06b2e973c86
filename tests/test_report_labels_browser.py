"""The labelled report as a person sees it, drawn by headless Chromium (as
``test_report_browser.py`` does): the chart of loops stopped against good runs stopped per
value, the good run that would stop listed and drawn first, in English and Korean.

Without ``chromium`` on the PATH these tests fail when ``CI`` is set and are skipped elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_script
from test_report_browser import (  # its PNG decoder and layout harness
    LAPTOP,
    _colors,
    _measure,
    _pixels,
)

from langchain_loop_guard import LoopGuardConfig, calibrate
from langchain_loop_guard._cli._demo import run_demo

pytestmark = pytest.mark.slow

SCRIPT = load_script("report_screenshot")
LABELS = {"demo-repeat": "loop", "demo-cycle": "loop", "demo-productive": "fine"}
GREEN, RED = "rgb(46, 125, 50)", "rgb(198, 40, 40)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three recorded demo runs: two loops and the productive run (observe mode)."""
    folder = tmp_path_factory.mktemp("demo-runs")
    for loop in ("repeat", "cycle", "productive"):
        run_demo(loop, mode="observe", integration="middleware", record_to=folder / f"{loop}.jsonl")
    return folder


_MEASURE = """
const doc = frame.contentDocument, root = doc.documentElement;
const chart = doc.querySelector("svg.verdicts");
return {
  scrollWidth: root.scrollWidth,
  clientWidth: root.clientWidth,
  loads: frame.contentWindow.performance.getEntriesByType("resource").length,
  text: doc.body.innerText,
  font: getComputedStyle(doc.querySelector(".lgr")).fontFamily,
  bars: [...chart.querySelectorAll("rect:not(.current)")].map((bar) => ({
    fill: getComputedStyle(bar).fill,
    height: bar.getBoundingClientRect().height,
    width: bar.getBoundingClientRect().width,
  })),
  listed: [...doc.querySelector("svg.verdicts ~ ul").querySelectorAll("a")].map(
    (a) => a.textContent),
  firstDrawn: doc.querySelector("div.run .id").textContent,
  tag: getComputedStyle(doc.querySelector("div.run .tag")).backgroundColor,
};
"""


def test_the_chart_draws_loops_stopped_against_good_runs_stopped_per_value(
    browser: ModuleType, runs: Path, tmp_path: Path
) -> None:
    """Per value a green bar (loops stopped) and a red one (good runs stopped): the red bar
    stands only at ``cycle_repeats=2``; the good run is listed and drawn first; the page fits
    a laptop and loads nothing; the Korean page names its Korean fonts."""
    pages = {
        locale: calibrate(
            runs, "cycle_repeats", [2, 3, 4], LoopGuardConfig(locale=locale), labels=LABELS
        ).to_html()
        for locale in ("en", "ko")
    }
    found = _measure(browser, pages, tmp_path, _MEASURE)
    for locale, page in found.items():
        assert page["scrollWidth"] <= page["clientWidth"] == LAPTOP, locale
        assert page["loads"] == 0
        bars = page["bars"]
        assert [bar["fill"] for bar in bars] == [GREEN, RED] * 3
        greens, reds = bars[0::2], bars[1::2]
        assert all(bar["height"] > 20 and bar["width"] > 10 for bar in greens)
        assert reds[0]["height"] > 20
        assert [bar["height"] for bar in reds[1:]] == [0, 0]
        assert greens[0]["height"] == pytest.approx(greens[1]["height"])  # 2 of 2 loops each
        assert page["listed"] == ["demo-productive"]
        assert page["firstDrawn"].startswith("demo-productive")
        assert page["tag"] == RED
    assert "1 good run would stop" in found["en"]["text"]
    assert "중단될 정상 실행 1개" in found["ko"]["text"]
    assert "Noto Sans KR" in found["ko"]["font"]
    assert "(가)" not in found["ko"]["text"]


def test_the_screenshot_shows_the_chart_in_green_and_red(
    browser: ModuleType, runs: Path, tmp_path: Path
) -> None:
    """What a person sees on the first screen: the chart's green and red bars, painted."""
    sweep = calibrate(runs, "cycle_repeats", [2, 3], LoopGuardConfig(), labels=LABELS)
    page, png = tmp_path / "labels.html", tmp_path / "labels.png"
    page.write_text(sweep.to_html(), encoding="utf-8")
    browser.screenshot(page, png, width=LAPTOP, height=900, scale=0.5)
    width, height, rows = _pixels(png.read_bytes())
    counts: dict[tuple[int, int, int], int] = {}
    for color in _colors(rows):
        counts[color] = counts.get(color, 0) + 1
    assert counts.get((0x2E, 0x7D, 0x32), 0) > 200  # the loops stopped, green
    assert counts.get((0xC6, 0x28, 0x28), 0) > 100  # the good run stopped, red
    assert counts.get((255, 255, 255), 0) < 0.95 * width * height
