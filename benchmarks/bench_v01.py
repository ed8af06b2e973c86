"""This detector against v0.1's, in one process, on the same events.

v0.1 is the detector of commit ``3f9ea05``. Its five core modules (``_errors``, ``_config``,
``_messages``, ``_signature``, ``_detector``) are read from the git history with ``git show``
and imported under another package name, so that both detectors run side by side in this
process; without git or that commit (a source archive, a shallow clone), the row is skipped
with a message.

The workload is realistic: the events of real agent runs (``../shared/real-trajectories``,
when that data set lies beside the checkout), each run through a fresh detector, as the
scorer feeds them; without the data set, a scripted mix of turns, narrated calls, calls and
results (``bench_memory._feed_steps``). Both detectors run in observe mode, so that neither
stops a run and both do their full work on every event. A round feeds the same runs to
both, alternating which goes first; the ratio is per event.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from _harness import Row, compare, ratio_row, timed
from bench_detector import typical_args, typical_output, typical_text

import langchain_loop_guard._detector as shipped

V01 = "3f9ea05"
ALIAS = "_loop_guard_v01"
MODULES = ("_errors", "_config", "_messages", "_signature", "_detector")
ROOT = Path(__file__).resolve().parent.parent
REAL_RUNS = ROOT.parent / "shared" / "real-trajectories" / "events"
ROUND_EVENTS = 2_000  # events per round (whole runs: a round may hold a few more)

Event = tuple[str, tuple[Any, ...]]
"""A detector method's name and its arguments."""


def load_v01() -> types.ModuleType | str:
    """v0.1's ``_detector`` module, imported from the git history, or why it cannot be."""
    if ALIAS + "._detector" in sys.modules:
        return sys.modules[ALIAS + "._detector"]
    sources = {}
    for name in MODULES:
        try:
            shown = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{V01}:langchain_loop_guard/{name}.py"],
                capture_output=True,
                check=True,
                text=True,
            )
        except (OSError, subprocess.CalledProcessError) as error:
            detail = getattr(error, "stderr", "") or str(error)
            return f"v0.1 ({V01}) is not in this checkout's git history: {detail.strip()}"
        sources[name] = shown.stdout.replace("langchain_loop_guard._", ALIAS + "._")
    package = types.ModuleType(ALIAS)
    package.__path__ = []
    sys.modules[ALIAS] = package
    for name, source in sources.items():
        module = types.ModuleType(f"{ALIAS}.{name}")
        module.__file__ = f"{V01}:langchain_loop_guard/{name}.py"
        sys.modules[module.__name__] = module  # dataclasses and pydantic look modules up
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        setattr(package, name, module)
    return sys.modules[ALIAS + "._detector"]


def real_runs(limit: int | None = None) -> list[list[Event]]:
    """The events of the real agent runs beside the checkout (none when it is not there)."""
    runs: list[list[Event]] = []
    for path in sorted(REAL_RUNS.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                runs.append(list(_real_events(json.loads(line)["events"])))
                if limit is not None and len(runs) >= limit:
                    return runs
    return runs


def _real_events(events: list[dict[str, Any]]) -> Iterator[Event]:
    for event in events:
        kind = event["t"]
        if kind == "user":  # a new user message, as scope="run" (the default) feeds it
            yield "reset", ()
        elif kind == "turn":
            yield "turn_start", ()
        elif kind == "assistant":
            calls = [tuple(c) for c in event["tool_calls"]]
            yield "assistant_message", (event["text"], calls)
        elif kind == "call":
            yield "tool_call", (event["name"], event["args"], event.get("id"))
        elif kind == "result":
            yield "tool_result", (event["name"], event["output"], None, event.get("id"))
        else:
            yield "tool_result", (event["name"], None, event["error"], event.get("id"))


def scripted_runs(runs: int, steps: int = 50) -> list[list[Event]]:
    """Runs of turns, narrated calls, calls and results, every seventh result an error."""
    scripted = []
    for run in range(runs):
        events: list[Event] = []
        for i in range(run * steps, (run + 1) * steps):
            args, call_id = typical_args(i), f"call_{i}"
            events += [
                ("turn_start", ()),
                ("assistant_message", (typical_text(i), [("read_file", args)])),
                ("tool_call", ("read_file", args, call_id)),
            ]
            if i % 7:
                events.append(("tool_result", ("read_file", typical_output(i), None, call_id)))
            else:
                error = f"FileNotFoundError: {i}"
                events.append(("tool_result", ("read_file", None, error, call_id)))
        scripted.append(events)
    return scripted


def _rounds(runs: list[list[Event]]) -> list[list[list[Event]]]:
    """Consecutive runs grouped into rounds of about :data:`ROUND_EVENTS` events."""
    rounds: list[list[list[Event]]] = [[]]
    size = 0
    for run in runs:
        if size >= ROUND_EVENTS:
            rounds.append([])
            size = 0
        rounds[-1].append(run)
        size += len(run)
    return rounds


def _feeder(module: Any, runs: list[list[Event]]) -> Callable[[], None]:
    """A function that feeds ``runs`` to fresh detectors of ``module`` (its calls made first)."""
    config = module.LoopGuardConfig(mode="observe", max_turns=1_000_000)
    steps: list[Callable[[], object]] = []
    for run in runs:
        detector = module.LoopDetector(config, clock=lambda: 0.0)
        for method, args in run:
            if method == "tool_result":
                name, output, error, call_id = args
                steps.append(
                    partial(detector.tool_result, name, output, error=error, call_id=call_id)
                )
            else:
                steps.append(partial(getattr(detector, method), *args))

    def feed() -> None:
        for step in steps:
            step()

    return feed


def against_v01(rounds: int | None = None) -> list[Row]:
    """The shipped detector against v0.1's, per event of the same runs."""
    v01 = load_v01()
    name = "per event, real agent runs: this detector vs v0.1's"
    if isinstance(v01, str):
        print(f"skipped '{name}': {v01}", flush=True)
        return []
    runs = real_runs()
    workload = f"{sum(map(len, runs)):,} events of {len(runs)} real runs"
    if not runs:
        name = "per event, scripted runs: this detector vs v0.1's"
        runs = scripted_runs(40)
        workload = f"{sum(map(len, runs)):,} events of 40 scripted runs (no real runs beside)"
    grouped = _rounds(runs)
    if rounds is not None:
        grouped = grouped[:: max(1, len(grouped) // rounds)][:rounds]

    def side(module: Any) -> Callable[[int], float]:
        def batch(index: int) -> float:
            chosen = grouped[index % len(grouped)]
            feed = _feeder(module, chosen)
            return timed(feed) / sum(map(len, chosen))

        return batch

    comparison = compare(side(v01), side(shipped), rounds=len(grouped), warmup=1)
    return [
        ratio_row(name, comparison, 1.5, note=f"{workload}; observe mode, {V01} as v0.1"),
    ]


def main() -> None:
    """Run this file's benchmark alone."""
    from _harness import format_table

    print(format_table(against_v01()))


if __name__ == "__main__":
    main()
