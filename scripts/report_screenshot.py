"""Draw the README's picture of the replay report (``docs/report.png``) from a trace made here.

    .venv/bin/python scripts/report_screenshot.py                # rewrite docs/report.png
    .venv/bin/python scripts/report_screenshot.py --keep DIR     # also keep the trace and page

The trace is recorded, not written by hand: the offline agents of ``loop-guard demo`` (a
scripted model and scripted tools) run through one ``LoopGuardCallbackHandler`` in observe
mode with ``record_to=``, each loop twice, between productive runs, as a day of traffic would
go. The page is ``replay(trace).to_html()``, drawn by Debian's ``chromium`` (headless) at a
laptop's width. The browser tests (``tests/test_report_browser.py``) use the same trace and
the same browser command.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from langchain.agents import create_agent

from langchain_loop_guard import LoopGuardCallbackHandler, LoopGuardConfig, replay
from langchain_loop_guard._cli._demo_scenarios import SCENARIOS
from langchain_loop_guard.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "report.png"
WIDTH, HEIGHT = 1366, 1168
DAY = (
    "productive",
    "repeat",
    "productive",
    "error",
    "cycle",
    "productive",
    "no-progress",
    "unknown-tool",
    "productive",
    "frequency",
    "repeat",
    "productive",
    "error",
)
"""The runs of the recorded day, in order: each a ``loop-guard demo`` scenario."""

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # as root, in a container
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def record_trace(path: Path) -> None:
    """Run the day's agents in observe mode and record their events to ``path``."""
    logging.getLogger("langchain_loop_guard").addHandler(logging.NullHandler())
    logging.getLogger("langchain_loop_guard").propagate = False
    # thread scope: each run is recorded under its ticket (its thread_id), not a UUID
    guard = LoopGuardCallbackHandler({"mode": "observe", "scope": "thread"}, record_to=path)
    for number, kind in enumerate(DAY, start=1):
        scenario = SCENARIOS[kind](f" #{number}")  # each run's own arguments and outputs
        agent = create_agent(ScriptedChatModel(script=list(scenario.script)), scenario.tools)
        agent.invoke(
            {"messages": [("user", "Find the retry limit, and fix what needs fixing.")]},
            {
                "callbacks": [guard],
                "configurable": {"thread_id": f"ticket-{number:02d}"},
                "recursion_limit": 200,
            },
        )
    if guard.recorder is not None:
        guard.recorder.close()


def chromium() -> str | None:
    """The Chromium binary on the PATH (Debian's ``chromium``), or ``None``."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a fresh profile in ``profile``; fails on a non-zero exit."""
    binary = chromium()
    if binary is None:
        msg = "chromium is not installed (apt-get install chromium)"
        raise FileNotFoundError(msg)
    command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    # the browser on PATH, with fixed flags and the caller's files
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)  # noqa: S603


def screenshot(
    page: Path, png: Path, *, width: int = WIDTH, height: int = HEIGHT, scale: float = 1.0
) -> None:
    """Draw ``page`` (a file) into ``png``: ``width`` x ``height`` CSS pixels, each ``scale``
    pixels of the image."""
    with tempfile.TemporaryDirectory(prefix="loop-guard-chromium-") as profile:
        run_chromium(
            f"--window-size={width},{height}",
            f"--force-device-scale-factor={scale}",
            f"--screenshot={png}",
            page.resolve().as_uri(),
            profile=Path(profile),
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the trace and the page in this folder")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the PNG to write")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loop-guard-report-") as tmp:
        folder = options.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        trace, page = folder / "trace.jsonl", folder / "report.html"
        trace.unlink(missing_ok=True)
        cwd = os.getcwd()
        os.chdir(folder)  # the page names the trace as given: a short relative path
        try:
            record_trace(Path(trace.name))
            page.write_text(replay(trace.name, LoopGuardConfig()).to_html(), encoding="utf-8")
        finally:
            os.chdir(cwd)
        screenshot(page, options.output)
    print(f"wrote {options.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
