"""Score candidate settings of SPEC §11's and §12's signals on the real recorded agent runs.

    python benchmarks/calibrate_real_runs.py            # the table, as markdown
    python benchmarks/calibrate_real_runs.py --quick    # the defaults and one step off each
    python benchmarks/calibrate_real_runs.py --threads  # scope thread, as the integrations feed it

The runs and their scorer are not part of the project: they are read from
``../shared/real-trajectories/`` beside the checkout when it is there (``--data`` names
another place), and the script says so and exits 0 when it is not. Each row runs the scorer
(``score.py``) with one configuration and reports its last line; the defaults were chosen by
SPEC §11's and §12's rows first and by these scores second (see ``CALIBRATION.md``).

``--threads`` scores ``scope="thread"`` the way the integrations run it: the scorer's
``--scope thread`` feeds nothing for a new user message, while the callback handler, the
middleware and the node guard tell the detector (``LoopDetector.user_message()``, SPEC §11
N3/R7). That row replays the runs with the scorer's own loading and judging, and calls
``user_message()`` at each user message instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "real-trajectories"

# (label, configuration): the defaults first, then each key moved on its own
CANDIDATES: list[tuple[str, dict[str, object]]] = [
    ("defaults", {}),
    (
        "v0.1 signals only",
        {
            "near_repeat_threshold": 0,
            "max_sequence_length": 0,
            "no_new_info_calls": 0,
            "failing_turns": 0,
            "reply_cycle_length": 0,
        },
    ),
    ("near_repeat_threshold=0 (off)", {"near_repeat_threshold": 0}),
    ("near_repeat_threshold=3", {"near_repeat_threshold": 3}),
    ("near_repeat_threshold=5", {"near_repeat_threshold": 5}),
    ("near_repeat_threshold=6", {"near_repeat_threshold": 6}),
    ("max_sequence_length=0 (off)", {"max_sequence_length": 0}),
    ("max_sequence_length=4", {"max_sequence_length": 4}),
    ("max_sequence_length=10", {"max_sequence_length": 10}),
    ("no_new_info_calls=0 (off)", {"no_new_info_calls": 0}),
    ("no_new_info_calls=6", {"no_new_info_calls": 6}),
    ("no_new_info_calls=8", {"no_new_info_calls": 8}),
    ("no_new_info_calls=9", {"no_new_info_calls": 9}),
    ("no_new_info_calls=11", {"no_new_info_calls": 11}),
    ("no_new_info_calls=12", {"no_new_info_calls": 12}),
    ("no_new_info_calls=20", {"no_new_info_calls": 20}),
    ("failing_turns=0 (off)", {"failing_turns": 0}),
    ("failing_turns=5", {"failing_turns": 5}),
    ("failing_turns=7", {"failing_turns": 7}),
    ("failing_turns=8", {"failing_turns": 8}),
    ("failing_turns=10", {"failing_turns": 10}),
    ("repeat_error_threshold=4", {"repeat_error_threshold": 4}),
    ("repeat_frequency_threshold=5", {"repeat_frequency_threshold": 5}),
    ("repeat_frequency_threshold=6", {"repeat_frequency_threshold": 6}),
    ("frequency_window_size=8", {"frequency_window_size": 8}),
    ("frequency_window_size=15", {"frequency_window_size": 15}),
    ("reply_cycle_length=0 (off)", {"reply_cycle_length": 0}),
    ("reply_cycle_length=2", {"reply_cycle_length": 2}),
    ("reply_cycle_length=8", {"reply_cycle_length": 8}),
]
QUICK = {"defaults", "v0.1 signals only"}

_SCORE = re.compile(
    r"caught=(?P<caught>\d+)/(?P<loops>\d+) late=(?P<late>\d+) missed=(?P<missed>\d+) "
    r"early=(?P<early>\d+) false_stops=(?P<false>\d+) .*?; (?P<resolved>\d+) resolved\)"
)


def score(data: Path, config: dict[str, object]) -> dict[str, int]:
    """The scorer's totals for ``config`` (its last line, parsed)."""
    command = [sys.executable, str(data / "score.py"), "--config", json.dumps(config)]
    env = {**os.environ, "PROJECT": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    found = _SCORE.search(done.stdout.strip().splitlines()[-1])
    if found is None:
        msg = f"unexpected scorer output: {done.stdout[-300:]!r}"
        raise RuntimeError(msg)
    return {name: int(value) for name, value in found.groupdict().items()}


def thread_score(data: Path, config: dict[str, object]) -> dict[str, int]:
    """The totals with ``scope="thread"`` and each user message fed as the integrations do.

    The runs are replayed by the package's own reader of trajectory files (``replay()``),
    which tells the detector about a user message under ``scope="thread"``, and judged by
    the scorer's own functions.
    """
    spec = importlib.util.spec_from_file_location("score", data / "score.py")
    assert spec is not None
    assert spec.loader is not None
    scorer = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT))  # this checkout's package, as score.py itself would pick
    spec.loader.exec_module(scorer)
    from langchain_loop_guard import LoopGuardConfig, replay

    report = replay(data / "events", LoopGuardConfig(**{**config, "scope": "thread"}))
    labels = {rec["id"]: rec for rec in json.loads((data / "labels.json").read_text())}
    rows = []
    for run in report.runs:
        # a report numbers a run's events from 1; the labels from 0
        stop = None if run.stop is None else {"event": run.stop.event - 1}
        label = labels[run.run]
        rows.append((label, stop, scorer.judge(label, stop)))
    totals = scorer.tally(rows)
    return {
        "caught": totals["caught"],
        "loops": totals["loop"],
        "late": totals["late"],
        "missed": totals["missed"],
        "early": totals["early"],
        "false": totals["false_total"],
        "resolved": totals["false_resolved"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", action="store_true", help="scope thread, user messages fed")
    args = parser.parse_args(argv)
    if not (args.data / "score.py").is_file():
        print(f"no real-trajectories data set at {args.data}: nothing to score (it is not part")
        print("of the project; place it beside the checkout or name it with --data)")
        return 0
    print("| setting | caught | late | missed | early | false stops | on resolved runs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, config in CANDIDATES:
        if args.quick and label not in QUICK:
            continue
        s = thread_score(args.data, config) if args.threads else score(args.data, config)
        print(
            f"| {label} | {s['caught']}/{s['loops']} | {s['late']} | {s['missed']} | "
            f"{s['early']} | {s['false']} | {s['resolved']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
