"""The report's answer to "which setting?" as a person sees it, drawn by headless Chromium (as
``test_report_browser.py`` does), in English and Korean: the headline of the configuration as
run, the current value framed on both charts, the recommendation and the caveat, and every
link to a run landing on it.

Without ``chromium`` on the PATH these tests fail when ``CI`` is set and are skipped elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_script
from test_report_browser import LAPTOP, _colors, _measure, _pixels

from langchain_loop_guard import LoopGuardConfig, calibrate
from langchain_loop_guard._cli._demo import run_demo

pytestmark = pytest.mark.slow

SCRIPT = load_script("report_screenshot")
LABELS = {"demo-repeat": "loop", "demo-cycle": "loop", "demo-productive": "fine"}
FRAME = "rgb(21, 101, 192)"  # the current value's frame: the page's blue


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two loops (the cycle recorded in mode on: cut by its live stop) and a productive run."""
    folder = tmp_path_factory.mktemp("demo-runs")
    for loop, mode in (("repeat", "observe"), ("cycle", "on"), ("productive", "observe")):
        run_demo(loop, mode=mode, integration="middleware", record_to=folder / f"{loop}.jsonl")
    return folder


def _page(runs: Path, locale: str) -> str:
    config = LoopGuardConfig(cycle_repeats=4, locale=locale)
    return calibrate(runs, "cycle_repeats", [2, 3, 4], config, labels=LABELS).to_html()


_MEASURE = """
const doc = frame.contentDocument, root = doc.documentElement;
const box = (el) => el.getBoundingClientRect();
return {
  scrollWidth: root.scrollWidth,
  clientWidth: root.clientWidth,
  loads: frame.contentWindow.performance.getEntriesByType("resource").length,
  cards: [...doc.querySelectorAll(".card")].map((card) => card.innerText),
  frames: [...doc.querySelectorAll("rect.current")].map((rect) => ({
    stroke: getComputedStyle(rect).stroke,
    height: box(rect).height,
    width: box(rect).width,
  })),
  advice: [...doc.querySelectorAll(".advice")].map((p) => ({
    text: p.innerText,
    height: box(p).height,
    border: getComputedStyle(p).borderLeftColor,
  })),
  links: [...doc.querySelectorAll('a[href^="#run-"]')].map((a) => ({
    name: a.textContent,
    lands: doc.getElementById(a.getAttribute("href").slice(1)) !== null,
  })),
  text: doc.body.innerText,
};
"""


def test_the_page_answers_which_setting_in_english_and_korean(
    browser: ModuleType, runs: Path, tmp_path: Path
) -> None:
    """Laid out at a laptop's width: the cards of ``cycle_repeats=4`` (the configuration as
    run), a visible blue frame on each chart, the recommendation (green) and the caveat
    (yellow) as boxes with text, every run link landing on an element; nothing loaded, no
    sideways scroll; the Korean page in Korean."""
    found = _measure(browser, {loc: _page(runs, loc) for loc in ("en", "ko")}, tmp_path, _MEASURE)
    for locale, page in found.items():
        assert page["scrollWidth"] <= page["clientWidth"] == LAPTOP, locale
        assert page["loads"] == 0
        assert sum("cycle_repeats=4" in card for card in page["cards"]) >= 4, page["cards"]
        assert not any("cycle_repeats=2" in card for card in page["cards"])
        assert len(page["frames"]) == 2
        for frame in page["frames"]:
            assert frame["stroke"] == FRAME
            assert frame["height"] > 100
            assert frame["width"] > 40
        recommended, caveat = page["advice"]
        assert "cycle_repeats=3" in recommended["text"]
        assert recommended["border"] == "rgb(46, 125, 50)"
        assert caveat["border"] == "rgb(249, 168, 37)"
        assert recommended["height"] > 20
        assert caveat["height"] > 20
        names = {link["name"] for link in page["links"]}
        assert {"demo-cycle", "demo-productive"} <= names
        assert all(link["lands"] for link in page["links"])
    en, ko = found["en"], found["ko"]
    assert en["advice"][0]["text"].startswith("recommended: cycle_repeats=3: stops 2 of the 2")
    assert "1 labelled loop would not stop (cycle_repeats=4)" in en["text"]
    assert ko["advice"][0]["text"].startswith("추천: cycle_repeats=3:")
    assert ko["advice"][1]["text"].startswith("주의:")
    assert "현재 값: cycle_repeats=4" in ko["text"]
    assert "recommended" not in ko["text"]
    assert "(가)" not in ko["text"]


def test_the_screenshot_shows_the_frame_and_the_advice(
    browser: ModuleType, runs: Path, tmp_path: Path
) -> None:
    """What a person sees on the first screen: the blue dashes of the current value's frame
    and the green and yellow edges of the recommendation and the caveat, painted."""
    page, png = tmp_path / "advice.html", tmp_path / "advice.png"
    page.write_text(_page(runs, "ko"), encoding="utf-8")
    browser.screenshot(page, png, width=LAPTOP, height=1100)
    width, height, rows = _pixels(png.read_bytes())
    counts: dict[tuple[int, int, int], int] = {}
    for color in _colors(rows):
        counts[color] = counts.get(color, 0) + 1
    assert counts.get((0x15, 0x65, 0xC0), 0) > 100  # the frame's blue dashes
    assert counts.get((0x2E, 0x7D, 0x32), 0) > 200  # the recommendation's edge and the bars
    assert counts.get((0xF9, 0xA8, 0x25), 0) > 20  # the caveat's edge
    assert counts.get((255, 255, 255), 0) < 0.97 * width * height
