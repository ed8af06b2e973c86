"""``loop-guard replay`` of a large LangSmith export: throughput and peak memory.

A ~100 MB export (list_runs() runs of looping and productive agent traces, with message
histories and tool outputs of realistic size) is generated in a temporary directory and
written twice: as JSON Lines and as one JSON array on one line (as ``json.dump(runs, file)``
writes it). Each is replayed in a fresh Python process that reports its time and its peak
resident memory above what it held before the replay (Linux's VmHWM, reset before the replay;
elsewhere tracemalloc's peak, which slows the replay).

Targets: the JSON array within 1.5x of JSON Lines (no quadratic parse), and the peak memory
of either at most half the file's size. The text streams; what stays is a record of digests
per run (about 0.7 KB; runs are grouped by trace only once all are read, since an export need
not keep a trace's runs together), so memory grows with the number of runs, not the bytes or
the longest line; this export averages about 2.9 KB per run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _harness import Row

MB = 1024 * 1024
_CHILD = """
import json, os, sys, time, tracemalloc
from langchain_loop_guard import LoopGuardConfig, replay

def status_kb(field):  # Linux: this process's own counters (ru_maxrss survives exec)
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])

config = LoopGuardConfig()
proc = os.path.exists("/proc/self/clear_refs")
if proc:
    before = status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset the peak (VmHWM) to the current size
else:
    tracemalloc.start()
start = time.perf_counter()
report = replay(sys.argv[1], config)
elapsed = time.perf_counter() - start
growth = status_kb("VmHWM") - before if proc else tracemalloc.get_traced_memory()[1] // 1024
print(json.dumps({"seconds": elapsed, "runs": len(report.runs), "stopped": report.would_stop,
                  "peak_kb": growth}))
"""


def _message(kind: str, content: str, **extra: Any) -> dict[str, Any]:
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", kind],
        "kwargs": {"content": content, **extra},
    }


def _trace(index: int, turns: int, looping: bool) -> Iterator[dict[str, Any]]:
    """The runs of one agent trace: a model run and a tool run per turn."""
    trace = f"00000000-0000-7000-8000-{index:012d}"
    history: list[dict[str, Any]] = [_message("HumanMessage", "please look into it " * 20)]
    for turn in range(turns):
        second = turn * 2
        call_id = f"call_{index}_{turn}"
        args = {"q": "the same query"} if looping else {"q": f"query {turn}"}
        ai = _message(
            "AIMessage",
            "",
            tool_calls=[{"name": "search", "args": args, "id": call_id, "type": "tool_call"}],
        )
        yield {
            "id": f"{trace[:-12]}{index:06d}{turn:03d}001",
            "trace_id": trace,
            "name": "ChatModel",
            "run_type": "llm",
            "start_time": f"2025-01-01T00:{second // 60:02d}:{second % 60:02d}.000000",
            "end_time": f"2025-01-01T00:{second // 60:02d}:{second % 60:02d}.400000",
            "inputs": {"messages": [history[-8:]]},
            "outputs": {"generations": [[{"text": "", "message": ai}]]},
            "error": None,
            "extra": {"metadata": {"thread_id": f"thread-{index}"}},
        }
        output = "result line of a search\n" * (40 if looping else 30 + turn)
        yield {
            "id": f"{trace[:-12]}{index:06d}{turn:03d}002",
            "trace_id": trace,
            "name": "search",
            "run_type": "tool",
            "start_time": f"2025-01-01T00:{second // 60:02d}:{second % 60:02d}.500000",
            "end_time": f"2025-01-01T00:{second // 60:02d}:{second % 60:02d}.900000",
            "inputs": args,
            "outputs": {"output": {"content": output, "type": "tool", "tool_call_id": call_id}},
            "extra": {"tool_call_id": call_id},
            "error": None,
        }
        history += [ai, _message("ToolMessage", output, tool_call_id=call_id)]


def generate(folder: Path, target_mb: int) -> tuple[Path, Path, int]:
    """Write the export as JSON Lines and as a JSON array; return both paths and the run count."""
    lines, array = folder / "runs.jsonl", folder / "runs.json"
    count = 0
    with lines.open("w", encoding="utf-8") as jsonl, array.open("w", encoding="utf-8") as out:
        out.write("[")
        index = 0
        while jsonl.tell() < target_mb * MB:
            for run in _trace(index, turns=10, looping=index % 3 == 0):
                text = json.dumps(run)
                jsonl.write(text + "\n")
                out.write(("," if count else "") + text)  # json.dump(runs, file): one line
                count += 1
            index += 1
        out.write("]\n")
    return lines, array, count


def _measure(path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def large_export(target_mb: int = 100, rounds: int = 3) -> list[Row]:
    """Rows: runs/s and peak memory for JSON Lines and the JSON array, and their time ratio.

    The two files are replayed alternately ``rounds`` times each: the best time and the
    highest peak of each count (the machine may be shared).
    """
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="loop-guard-bench-") as tmp:
        lines, array, runs = generate(Path(tmp), target_mb)
        files = (("JSON Lines", lines), ("JSON array", array))
        trials: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in files}
        for _ in range(rounds):
            for label, path in files:
                trials[label].append(_measure(path))
        measured = {}
        for label, path in files:
            result = {
                **trials[label][0],
                "seconds": min(t["seconds"] for t in trials[label]),
                "peak_kb": max(t["peak_kb"] for t in trials[label]),
            }
            size = path.stat().st_size / MB
            measured[label] = result
            rows.append(
                Row(
                    f"replay {size:,.0f} MB LangSmith export ({label}): peak memory",
                    f"{size:,.0f} MB file",
                    f"{runs / result['seconds']:,.0f} runs/s",
                    result["peak_kb"] / 1024,
                    size * 0.5,
                    unit="MB",
                    note=f"{runs:,} runs in {result['seconds']:.1f} s; "
                    f"{result['stopped']:,} of {result['runs']:,} traces stopped",
                )
            )
        jsonl, arr = measured["JSON Lines"], measured["JSON array"]
        rows.append(
            Row(
                "replay time: JSON array / JSON Lines",
                f"{jsonl['seconds']:.1f} s",
                f"{arr['seconds']:.1f} s",
                arr["seconds"] / jsonl["seconds"],
                1.5,
                note="the same runs; a quadratic array parse would be far above",
            )
        )
    return rows


if __name__ == "__main__":
    from _harness import format_table

    print(format_table(large_export(int(sys.argv[1]) if len(sys.argv) > 1 else 100)))
