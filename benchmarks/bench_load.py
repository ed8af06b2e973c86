"""Load: many looping runs in flight on one handler, and one huge tool output.

- **Runs in flight.** 1,500 top-level runs start on one handler (default ``max_runs``, 1,024)
  and none ends; then, in turns, each calls ``read_file`` with the same arguments until the
  guard raises. Every run must be stopped at its third call: a run in flight is never
  forgotten, whatever the registry's capacity. Reported: runs not stopped, the time per
  callback, and the memory the handler holds for them (``tracemalloc``).
- **A 50 MB output.** One run's tool returns 50 MB of log text. Reported: the time the
  handler takes to digest it (``on_tool_end``), the peak memory it allocates meanwhile, and the
  slowest tool step (four callbacks) another run sees while it does (the other run calls a
  tool every millisecond on a second thread). Digests are computed outside the handler's
  lock; what the other run still waits for is the interpreter's lock while one long step of C
  code runs.
"""

from __future__ import annotations

import gc
import logging
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from _harness import Row

from langchain_loop_guard import LoopDetector, LoopGuardConfig
from langchain_loop_guard._core._signature import outcome_digest
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._stop import LoopDetected

CONFIG = LoopGuardConfig(max_turns=1_000_000)
MB = 1 << 20


class _Run:
    """A top-level run whose callbacks are fired as LangGraph fires a tool step."""

    def __init__(self, handler: LoopGuardCallbackHandler) -> None:
        self.handler = handler
        self.id = uuid4()
        handler.on_chain_start(None, {}, run_id=self.id, parent_run_id=None)

    def tool(self, name: str, args: dict[str, Any], output: Any) -> int:
        """One tool step; returns the number of callbacks fired."""
        node, tool = uuid4(), uuid4()
        handler = self.handler
        handler.on_chain_start(None, {}, run_id=node, parent_run_id=self.id)
        try:
            handler.on_tool_start(
                {"name": name}, str(args), run_id=tool, parent_run_id=node, inputs=args
            )
            handler.on_tool_end(output, run_id=tool, parent_run_id=node)
        finally:
            handler.on_chain_end({}, run_id=node, parent_run_id=self.id)
        return 4

    def start_tool(self, name: str) -> tuple[UUID, UUID]:
        node, tool = uuid4(), uuid4()
        self.handler.on_chain_start(None, {}, run_id=node, parent_run_id=self.id)
        self.handler.on_tool_start({"name": name}, "{}", run_id=tool, parent_run_id=node, inputs={})
        return node, tool


def _loop_all(handler: LoopGuardCallbackHandler, runs: int) -> tuple[int, int]:
    """Start ``runs`` runs, loop them in turns; (runs not stopped, callbacks fired)."""
    active = [_Run(handler) for _ in range(runs)]
    callbacks = runs
    stopped: set[int] = set()
    for _ in range(4):  # the third identical call must stop each run
        for index, run in enumerate(active):
            if index in stopped:
                continue
            try:
                callbacks += run.tool("read_file", {"path": "src/app.py"}, "contents")
            except LoopDetected:
                callbacks += 3
                stopped.add(index)
    return runs - len(stopped), callbacks


def _per_callback(runs: int, batches: int) -> tuple[float, int, int]:
    """Seconds per callback over ``batches`` handlers of ``runs`` looping runs in flight each;
    the runs not stopped, and the runs shed."""
    elapsed, callbacks, missed, shed = 0.0, 0, 0, 0
    for _ in range(batches):
        handler = LoopGuardCallbackHandler(CONFIG)
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            not_stopped, fired = _loop_all(handler, runs)
            elapsed += time.perf_counter() - start
        finally:
            gc.enable()
        callbacks += fired
        missed += not_stopped
        shed += handler.status().shed_runs
    return elapsed / callbacks, missed, shed


def runs_in_flight(runs: int = 1_500, rounds: int = 3) -> list[Row]:
    """``runs`` looping runs in flight on one handler: all stopped, time and memory."""
    _loop_all(LoopGuardCallbackHandler(CONFIG), 50)  # warm caches
    few, many, missed, shed = [], [], 0, 0
    for _ in range(rounds):  # interleaved, so both sides see the same machine
        few.append(_per_callback(15, runs // 15)[0])
        per, not_stopped, shed_now = _per_callback(runs, 1)
        many.append(per)
        missed += not_stopped
        shed += shed_now
    few_s, many_s = sorted(few)[rounds // 2], sorted(many)[rounds // 2]

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = LoopGuardCallbackHandler(CONFIG)
        _loop_all(held, runs)
        gc.collect()
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return [
        Row(
            f"{runs:,} looping runs in flight on one handler: runs not stopped",
            "-",
            f"{rounds} x {runs:,} runs",
            missed,
            0,
            unit="runs",
            note=f"max_runs={held.max_runs} (the default), {shed} shed",
        ),
        Row(
            f"{runs:,} looping runs in flight vs 15: time per callback",
            f"{few_s * 1e6:.1f} µs",
            f"{many_s * 1e6:.1f} µs",
            many_s / few_s,
            1.5,
            note=f"median of {rounds} rounds; the same {runs:,} runs, 15 at a time",
        ),
        Row(
            f"{runs:,} looping runs in flight: memory held",
            "-",
            "-",
            size / MB,
            16,
            unit="MB",
            note="while every run is still in flight (tracemalloc)",
        ),
    ]


def _big_output(size: int) -> str:
    line = "2026-12-02T10:00:01.123Z INFO worker-7 request 4711 served in 12ms status=200\n"
    return line * (size // len(line))


_PEAK = """
import sys
sys.path.insert(0, {here!r})
from bench_load import CONFIG, _Run, _big_output, _high_water
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
output = _big_output({size})
handler = LoopGuardCallbackHandler(CONFIG)
run = _Run(handler)
node, tool = run.start_tool("tail_log")
before = _high_water()
handler.on_tool_end(output, run_id=tool, parent_run_id=node)
print(_high_water() - before)
"""


def _high_water() -> int:
    """This process's peak resident memory in bytes (``VmHWM``: unlike ``ru_maxrss``, not
    inherited from the parent of a forked process)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    msg = "no VmHWM in /proc/self/status"  # pragma: no cover - Linux only
    raise RuntimeError(msg)


def _peak_memory(size: int) -> float:
    """Peak resident memory (bytes) that digesting a ``size``-byte output adds, measured in a
    fresh process (the output itself is resident before)."""
    code = _PEAK.format(here=str(Path(__file__).resolve().parent), size=size)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return int(done.stdout.split()[-1])


def _answers_against_results(text: str, times: int = 3) -> tuple[float, float]:
    """Seconds for ``times`` assistant answers of ``text`` in one run, and for ``times`` tool
    results of it: a long answer is keyed and sketched from its first and last parts, as a
    long result is normalized."""
    detector = LoopDetector(CONFIG)
    gc.collect()
    start = time.perf_counter()
    for _ in range(times):
        detector.turn_start()
        detector.assistant_message(text)
    answers = time.perf_counter() - start
    detector = LoopDetector(CONFIG)
    gc.collect()
    start = time.perf_counter()
    for n in range(times):
        detector.tool_call("tail_log", {"n": n}, call_id=f"c{n}")
        detector.tool_result("tail_log", text, call_id=f"c{n}")
    return answers, time.perf_counter() - start


def large_output(size: int = 50 * MB) -> list[Row]:
    """A ``size``-byte tool output: time, peak memory, another run's slowest tool step."""
    output = _big_output(size)

    # the handler against the floor: the outcome digest of the same output, called directly
    gc.collect()
    start = time.perf_counter()
    outcome_digest(output)
    floor = time.perf_counter() - start
    handler = LoopGuardCallbackHandler(CONFIG)
    run = _Run(handler)
    node, tool = run.start_tool("tail_log")
    gc.collect()
    start = time.perf_counter()
    handler.on_tool_end(output, run_id=tool, parent_run_id=node)
    took = time.perf_counter() - start

    # another run's callbacks meanwhile: a tool step every millisecond on a second thread
    handler = LoopGuardCallbackHandler(CONFIG)
    big, other = _Run(handler), _Run(handler)
    node, tool = big.start_tool("tail_log")
    waits: list[float] = []
    started = threading.Event()
    done = threading.Event()

    def others() -> None:
        started.set()
        while not done.is_set():
            begin = time.perf_counter()
            other.tool("read_file", {"path": f"src/{len(waits)}.py"}, "contents")
            waits.append(time.perf_counter() - begin)  # a tool step: four callbacks
            time.sleep(0.001)

    worker = threading.Thread(target=others)
    worker.start()
    started.wait()
    start = time.perf_counter()
    handler.on_tool_end(output, run_id=tool, parent_run_id=node)
    busy = time.perf_counter() - start
    done.set()
    worker.join()
    slowest = max(waits)

    answers, results = _answers_against_results(output)

    peak = _peak_memory(size)
    name = f"{size // MB} MB tool output"
    return [
        Row(
            f"three {size // MB} MB assistant answers vs three {size // MB} MB tool results",
            f"{results:.2f} s",
            f"{answers:.2f} s",
            answers / results,
            2.0,
            note="the detector, the same text as answers and as results (issue 31)",
        ),
        Row(
            f"{name}: time to digest, handler vs outcome_digest alone",
            f"{floor:.2f} s",
            f"{took:.2f} s",
            took / floor,
            1.2,
            note="on_tool_end: the handler adds nothing to the normalization",
        ),
        Row(
            f"{name}: peak memory while digesting",
            "-",
            "-",
            peak / MB,
            600,
            unit="MB",
            note="resident memory added beyond the output itself (VmHWM, fresh process)",
        ),
        Row(
            f"{name}: another run's slowest tool step vs the digest time",
            f"{busy * 1e3:,.0f} ms",
            f"{slowest * 1e3:,.1f} ms",
            slowest / busy,
            0.25,
            note=f"{len(waits)} steps of 4 callbacks meanwhile, median "
            f"{sorted(waits)[len(waits) // 2] * 1e3:.2f} ms; 0.89x with the lock held (before)",
        ),
    ]


def main() -> None:
    """Run this file's benchmarks alone."""
    from _harness import format_table

    logging.getLogger("langchain_loop_guard").addHandler(logging.NullHandler())
    logging.getLogger("langchain_loop_guard").propagate = False
    start = time.perf_counter()
    print(format_table(runs_in_flight() + large_output()))
    print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
