"""The replay report as a person sees it: drawn by headless Chromium (Debian's ``chromium``).

The assertions are on what the browser lays out and paints: the page measured in a harness
(the report in an ``<iframe srcdoc>`` 1,366 pixels wide, a script of the harness reading its
layout and its resource loads, the DOM read back with ``--dump-dom``), and a screenshot
decoded here. Chromium starts four times in all.

Without ``chromium`` on the PATH these tests fail when ``CI`` is set (``.ci/run`` installs
it) and are skipped elsewhere, saying why.
"""

from __future__ import annotations

import html
import json
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import load_script

from langchain_loop_guard import LoopGuardConfig, calibrate, replay
from langchain_loop_guard._cli._main import EXIT_OK, main
from langchain_loop_guard._replay._report import _TOOLS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "real-trajectories" / "events" / "swe-agent.jsonl.gz"
REAL_SHOWN = os.path.relpath(REAL, ROOT)  # a skip reason names no path of this machine
LAPTOP = 1366
LONG_NAME = "a" * 200  # no place to break a line: the page must wrap it, not scroll


SCRIPT = load_script("report_screenshot")


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's day of recorded agent runs (``scripts/report_screenshot.py``)."""
    folder = tmp_path_factory.mktemp("day")
    SCRIPT.record_trace(folder / "trace.jsonl")
    return folder / "trace.jsonl"


def _hostile(folder: Path) -> Path:
    """A run whose id and tool name are 200 characters without a place to break."""
    events = [
        event
        for i in range(5)
        for event in (
            {"t": "call", "name": LONG_NAME, "args": {}, "id": f"c{i}"},
            {"t": "result", "name": LONG_NAME, "id": f"c{i}", "output": "same"},
        )
    ]
    path = folder / "hostile.jsonl"
    path.write_text(json.dumps({"id": "r" * 200, "events": events}) + "\n")
    return path


_MEASURE = """
const win = frame.contentWindow, doc = frame.contentDocument, root = doc.documentElement;
const shown = (el) => el.getClientRects().length > 0 && el.getBoundingClientRect().height > 0;
return {
  scrollWidth: root.scrollWidth,
  clientWidth: root.clientWidth,
  loads: win.performance.getEntriesByType("resource").map((entry) => entry.name),
  text: doc.body.innerText,
  runs: [...doc.querySelectorAll("div.run")].map((run) => ({
    id: run.querySelector(".id").textContent,
    height: run.getBoundingClientRect().height,
    timeline: run.querySelector("svg").getBoundingClientRect().width,
    marks: run.querySelectorAll("svg path").length,
  })),
  links: [...doc.querySelectorAll('a[href^="#"]')].map((a) => {
    const target = doc.getElementById(a.getAttribute("href").slice(1));
    return target !== null && shown(target);
  }),
  bars: doc.querySelectorAll("h2 + svg rect").length,
  folded: [...doc.querySelectorAll("details")].map((d) => !d.open && shown(d)),
};
"""


_HARNESS = """
window.addEventListener("load", () => {
  const read = (frame) => {/* read */};
  const found = {};
  for (const frame of document.querySelectorAll("iframe")) {
    found[frame.id] = read(frame);
  }
  const out = document.createElement("pre");
  out.id = "result";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
"""


def _measure(
    browser: ModuleType, pages: dict[str, str], folder: Path, read: str = _MEASURE
) -> dict[str, Any]:
    """Lay each page out in an iframe of a laptop's width; what ``read`` (the body of a
    script's function of one ``frame``: by default this file's) returned of each, by the
    frame's name."""
    frames = "".join(
        f'<iframe id="{name}" style="width:{LAPTOP}px;height:900px;border:0" '
        f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
        for name, page in pages.items()
    )
    script = _HARNESS.replace("/* read */", read)
    harness = folder / "harness.html"
    # Undeclared, Chromium takes the encoding from the first bytes it reads: an English page
    # long enough ahead of a Korean one is read as windows-1252 when the file comes in chunks.
    harness.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head>'
        f"<body>{frames}<script>{script}</script></body></html>",
        encoding="utf-8",
    )
    done = browser.run_chromium(
        f"--window-size={LAPTOP + 40},900",
        "--virtual-time-budget=5000",
        "--dump-dom",
        harness.as_uri(),
        profile=folder / "profile",
    )
    found = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found is not None, done.stdout[-2000:]
    result: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return result


def _assert_laid_out(found: dict[str, Any], stopped: list[str]) -> None:
    """A page that fits a laptop, loads nothing, and shows each stopped run with its marks."""
    assert found["scrollWidth"] <= found["clientWidth"] == LAPTOP
    assert found["loads"] == []
    assert [run["id"] for run in found["runs"]] == stopped
    for run in found["runs"]:
        assert run["height"] > 40, run
        assert run["timeline"] > 1000, run
        assert run["marks"] >= 1, run
    for run in stopped:
        assert run in found["text"]
    assert all(found["links"])


def _stopped(report: Any) -> list[str]:
    return [run.run for run in report.runs if run.stop is not None]


def test_the_report_fits_a_laptop_shows_every_stopped_run_and_loads_nothing(
    browser: ModuleType, day: Path, tmp_path: Path
) -> None:
    """The report, a sweep and a hostile page: laid out at 1,366 pixels without scrolling
    sideways, each stopped run drawn and linked, the rest folded, nothing loaded."""
    config = LoopGuardConfig()
    report = replay(day, config)
    sweep = calibrate(day, "repeat_tool_threshold", [3, 5], config)
    hostile = replay(_hostile(tmp_path), config)
    found = _measure(
        browser,
        {"report": report.to_html(), "sweep": sweep.to_html(), "hostile": hostile.to_html()},
        tmp_path,
    )
    _assert_laid_out(found["report"], _stopped(report))
    assert found["report"]["folded"] == [True]
    assert "ticket-01" not in found["report"]["text"]  # productive: folded, not shown
    either = [
        r.run for r, s in zip(*(x.runs for x in sweep.reports), strict=True) if r.stop or s.stop
    ]
    _assert_laid_out(found["sweep"], either)
    assert found["sweep"]["links"]
    assert found["sweep"]["bars"] >= 2
    _assert_laid_out(found["hostile"], ["r" * 200])


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the pixel rows of an 8-bit RGB or RGBA PNG (no interlace)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, data = 8, b""
    while pos < len(png):
        (length, kind), body = struct.unpack(">I4s", png[pos : pos + 8]), b""
        body = png[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, interlace) == (8, 0)
            size = {2: 3, 6: 4}[color]
        elif kind == b"IDAT":
            data += body
    raw, stride = zlib.decompress(data), width * size
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, row = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            left = row[i - size] if i >= size else 0
            up, corner = previous[i], previous[i - size] if i >= size else 0
            if kind == 1:
                row[i] = (row[i] + left) & 255
            elif kind == 2:
                row[i] = (row[i] + up) & 255
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 255
            elif kind == 4:
                guess = left + up - corner
                near = min(
                    (abs(guess - left), 0, left),
                    (abs(guess - up), 1, up),
                    (abs(guess - corner), 2, corner),
                )
                row[i] = (row[i] + near[2]) & 255
        rows.append(bytes(row))
        previous = row
    return (
        width,
        height,
        [bytes(b for j, b in enumerate(r) if size == 3 or j % 4 != 3) for r in rows],
    )


def _colors(rows: list[bytes]) -> Iterator[tuple[int, int, int]]:
    for row in rows:
        for i in range(0, len(row), 3):
            yield row[i], row[i + 1], row[i + 2]


_READ_TEXT = """
return frame.contentDocument.body.innerText;
"""


def test_the_harness_reads_a_korean_page_after_a_long_english_one_in_korean(
    browser: ModuleType, tmp_path: Path
) -> None:
    """The harness's file declares its encoding: undeclared, Chromium read a Korean page that
    came after 300 KB of English as windows-1252 (and a Korean report after an English one, when
    the file came in chunks)."""
    english = "<p>" + "plain English, nothing else. " * 10_000 + "</p>"
    korean = "<p>추천: cycle_repeats=3</p>"
    found = _measure(browser, {"en": english, "ko": korean}, tmp_path, _READ_TEXT)
    assert found["ko"] == "추천: cycle_repeats=3"
    assert found["en"].startswith("plain English, nothing else.")


def test_the_screenshot_shows_the_runs_drawn_not_a_blank_page(
    browser: ModuleType, day: Path, tmp_path: Path
) -> None:
    """At a laptop's size the first screen holds text, the stopped runs' colored marks and
    their stop lines: what a person sees, decoded from Chromium's PNG."""
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(replay(day, LoopGuardConfig()).to_html(), encoding="utf-8")
    browser.screenshot(page, png, width=LAPTOP, height=900, scale=0.5)
    width, height, rows = _pixels(png.read_bytes())
    assert (width, height) == (LAPTOP // 2, 450)
    counts: dict[tuple[int, int, int], int] = {}
    for color in _colors(rows):
        counts[color] = counts.get(color, 0) + 1
    white = counts.get((255, 255, 255), 0)
    assert white < 0.95 * width * height  # not blank
    assert len(counts) > 50  # text and shapes, antialiased
    tools = {tuple(bytes.fromhex(color[1:])) for color in _TOOLS}
    drawn = [color for color in tools if counts.get(color, 0) > 20]  # type: ignore[call-overload]
    assert len(drawn) >= 3, counts
    assert counts.get((0x1D, 0x23, 0x30), 0) > 10  # the stop lines (and the title's ink)


@pytest.mark.skipif(not REAL.exists(), reason=f"the real runs are not here: {REAL_SHOWN}")
def test_real_swe_agent_runs_render_naming_every_run_that_would_stop(
    browser: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``loop-guard replay …/swe-agent.jsonl.gz --html`` (and with ``--sweep``): each run the
    ``--json`` replay stops is named and drawn, nothing is loaded, nothing scrolls sideways."""
    plain, swept = tmp_path / "r.html", tmp_path / "s.html"
    assert main(["replay", str(REAL), "--json", "--no-progress", "--html", str(plain)]) == EXIT_OK
    stopped = [run["run"] for run in json.loads(capsys.readouterr().out)["runs"] if run["stop"]]
    sweep = ["--sweep", "no_new_info_calls=4,9,15", "--json", "--html", str(swept)]
    assert main(["replay", str(REAL), "--no-progress", *sweep]) == EXIT_OK
    settings = json.loads(capsys.readouterr().out)["settings"]
    anywhere = {run for setting in settings for run in setting["stops"]}
    found = _measure(
        browser,
        {"plain": plain.read_text("utf-8"), "sweep": swept.read_text("utf-8")},
        tmp_path,
    )
    assert len(stopped) > 40
    _assert_laid_out(found["plain"], stopped)
    assert {run["id"] for run in found["sweep"]["runs"]} == anywhere
    assert found["sweep"]["loads"] == []
    assert found["sweep"]["scrollWidth"] <= LAPTOP
