"""The replay report (``loop-guard replay --html``) and replay memory over many runs.

Each measurement runs in a fresh Python process that reports its time and its peak resident
memory above what it held before the replay (Linux's VmHWM, reset first; elsewhere
tracemalloc's peak), as ``bench_replay.py`` does.

- A loop-guard trace of 10,000 recorded runs (18 events each, eight runs interleaved at a
  time, one run in four a loop), replayed alone and replayed with its page written, in
  alternating rounds: the page's size (target under 5 MB) and the time of replay and page
  against the replay alone, best of each (target under 2x).
- A loop-guard trace of 1,000,000 runs of one event each (about 100 MB): the peak memory of
  the replay (target under 500 MB; a detector per run of the file took about 2.4 GB) and of
  the replay with its page; and of the replay with its ``--json`` document (target under
  300 MB: built whole, the document took 1.86 GB; it is streamed a run at a time).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _harness import Row

MB = 1024 * 1024
_CHILD = """
import json, os, sys, time, tracemalloc
from langchain_loop_guard import LoopGuardConfig, replay

def status_kb(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])

proc = os.path.exists("/proc/self/clear_refs")
if proc:
    before = status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
else:
    tracemalloc.start()
start = time.perf_counter()
report = replay(sys.argv[1], LoopGuardConfig())
size = 0
if sys.argv[2] == "html":
    with open(sys.argv[3], "w", encoding="utf-8") as page:
        size = page.write(report.to_html())
elif sys.argv[2] == "json":  # as loop-guard replay --json writes it
    with open(sys.argv[3], "w", encoding="utf-8") as out:
        size = sum(out.write(chunk) for chunk in report.json_chunks())
elapsed = time.perf_counter() - start
growth = status_kb("VmHWM") - before if proc else tracemalloc.get_traced_memory()[1] // 1024
print(json.dumps({"seconds": elapsed, "runs": len(report.runs), "stopped": report.would_stop,
                  "peak_kb": growth, "page_chars": size}))
"""


def _event(run: int, kind: str, step: int, **fields: Any) -> str:
    line = {"v": 1, "run": f"run-{run:07d}", "t": step * 0.5, "e": kind, **fields}
    return json.dumps(line, separators=(",", ":"))


def write_runs(path: Path, runs: int, steps: int = 6, at_once: int = 8) -> None:
    """``runs`` recorded runs of ``steps`` model turns and tool calls, ``at_once`` of them
    interleaved; every fourth run calls the same tool with the same arguments each time."""
    with path.open("w", encoding="utf-8") as out:
        for first in range(0, runs, at_once):
            group = range(first, min(first + at_once, runs))
            for step in range(steps):
                for run in group:
                    looping = run % 4 == 0
                    tool = "search" if looping else ("read", "grep", "edit")[step % 3]
                    call = f"{run:06x}{0 if looping else step:04x}"
                    result = f"{run:06x}{0 if looping else step:04x}ff"
                    out.write(_event(run, "turn_start", step) + "\n")
                    out.write(_event(run, "tool_call", step, tool=tool, d=call, id=call) + "\n")
                    out.write(
                        _event(run, "tool_result", step, tool=tool, d=result, id=call, outcome="ok")
                        + "\n"
                    )


def write_one_event_runs(path: Path, runs: int) -> None:
    """``runs`` runs of a single tool call each."""
    with path.open("w", encoding="utf-8") as out:
        for run in range(runs):
            out.write(_event(run, "tool_call", 0, tool="search", d="9c1e0000aaaa", id="51b0"))
            out.write("\n")


def _measure(trace: Path, mode: str, page: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(trace), mode, str(page)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def report_cost(runs: int = 10_000, rounds: int = 3) -> list[Row]:
    """Rows: the page's size, and replay with the page against replay alone."""
    with tempfile.TemporaryDirectory(prefix="loop-guard-bench-") as tmp:
        trace, page = Path(tmp) / "runs.jsonl", Path(tmp) / "report.html"
        write_runs(trace, runs)
        plain: list[dict[str, Any]] = []
        html: list[dict[str, Any]] = []
        for index in range(rounds):
            order = (("plain", plain), ("html", html))
            for mode, found in order if index % 2 == 0 else reversed(order):
                found.append(_measure(trace, mode, page))
        size = page.stat().st_size
        alone = min(result["seconds"] for result in plain)
        drawn = min(result["seconds"] for result in html)
        events = sum(1 for _ in trace.open(encoding="utf-8"))
        return [
            Row(
                f"replay report of {runs:,} runs: page size",
                f"{trace.stat().st_size / MB:,.0f} MB trace",
                f"{html[0]['stopped']:,} runs stop",
                size / MB,
                5.0,
                unit="MB",
                note=f"{runs:,} runs, {events:,} events",
            ),
            Row(
                f"replay report of {runs:,} runs: replay and page vs replay alone",
                f"{alone:.2f} s",
                f"{drawn:.2f} s",
                drawn / alone,
                2.0,
                note=f"best of {rounds} fresh processes each, alternating",
            ),
        ]


_ONE_EVENT_MODES: dict[str, tuple[str, float, str]] = {
    "plain": ("replay", 500.0, "a detector per run took ~2.4 KB each"),
    "html": ("replay and page", 500.0, "a detector per run took ~2.4 KB each"),
    "json": ("replay and --json", 300.0, "streamed; built whole it took 1.86 GB"),
}


def one_event_runs(runs: int = 1_000_000, modes: tuple[str, ...] = ("plain", "html")) -> list[Row]:
    """Rows: peak memory of replaying ``runs`` one-event runs, alone and with each output of
    ``modes`` (``"html"``, ``"json"``)."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="loop-guard-bench-") as tmp:
        trace, page = Path(tmp) / "one-event-runs.jsonl", Path(tmp) / "report.out"
        write_one_event_runs(trace, runs)
        size = trace.stat().st_size / MB
        for mode in modes:
            label, target, note = _ONE_EVENT_MODES[mode]
            result = _measure(trace, mode, page)
            rows.append(
                Row(
                    f"{runs:,} one-event runs: peak memory of the {label}",
                    f"{size:,.0f} MB trace",
                    f"{result['seconds']:.1f} s",
                    result["peak_kb"] / 1024,
                    target,
                    unit="MB",
                    note=f"{result['runs']:,} runs; {note}",
                )
            )
    return rows


if __name__ == "__main__":
    from _harness import format_table

    if sys.argv[1:] == ["--json-row"]:  # only the streamed --json row
        print(format_table(one_event_runs(modes=("json",))))
    else:
        print(format_table(report_cost() + one_event_runs(modes=("plain", "html", "json"))))
