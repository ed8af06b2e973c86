"""``benchmarks/calibrate_real_runs.py``: the folds and the ``--quick`` path, on a tiny synthetic
event set written into a temporary directory (the real runs are not part of the project)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A scorer with the functions the script imports from the data set's score.py, judging as the
# data set's README says (first block/abort verdict; caught, late, early, missed, false).
SCORER = """
import gzip, json
from collections import Counter
from langchain_loop_guard import LoopDetector

def load_events(events_dir):
    for path in sorted(events_dir.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                yield json.loads(line)

def first_stop(events, config, scope):
    detector = LoopDetector(config, clock=lambda: 0.0)
    for index, ev in enumerate(events):
        kind = ev["t"]
        if kind == "user":
            detector.reset() if scope == "run" else detector.user_message()
            continue
        if kind == "turn":
            verdict = detector.turn_start()
        elif kind == "assistant":
            verdict = detector.assistant_message(ev["text"], [tuple(c) for c in ev["tool_calls"]])
        elif kind == "call":
            verdict = detector.tool_call(ev["name"], ev["args"], call_id=ev["id"])
        else:
            verdict = detector.tool_result(ev["name"], ev["output"], call_id=ev["id"])
        if verdict.action in ("block", "abort"):
            return {"event": index}
    return None

def judge(label, stop):
    if label["kind"] == "unclear":
        return "excluded"
    if label["kind"] == "no_loop":
        return "false" if stop else "ok"
    if stop is None:
        return "missed"
    if stop["event"] < label["earliest_ok_stop"]:
        return "early"
    return "late" if stop["event"] > label["latest_ok_stop"] else "caught"

def tally(rows):
    c = Counter()
    for label, stop, outcome in rows:
        c["runs"] += 1
        c[label["kind"]] += 1
        c[outcome] += 1
        if outcome in ("false", "early") and label.get("outcome") == "resolved":
            c["false_resolved"] += 1
        if outcome == "excluded" and stop:
            c["unclear_stopped"] += 1
    c["false_total"] = c["false"] + c["early"]
    return c
"""


def _script() -> ModuleType:
    path = ROOT / "benchmarks" / "calibrate_real_runs.py"
    spec = importlib.util.spec_from_file_location("calibrate_real_runs", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _coding_run(run_id: str, framework: str, kind: str, rng: random.Random) -> tuple[dict, dict]:
    """A shell agent: a loop re-reads one file (same output), the others read new files."""
    events: list[dict[str, Any]] = []
    starts = []
    for step in range(8):
        starts.append(len(events))
        path = "a.txt" if kind == "loop" and step >= 2 else f"f{step}-{rng.random():.6f}.txt"
        command = f"cat {path}"
        events += [
            {"t": "turn", "step": step},
            {
                "t": "assistant",
                "step": step,
                "text": "",
                "tool_calls": [["cat", {"command": command}]],
            },
            {
                "t": "call",
                "step": step,
                "name": "cat",
                "args": {"command": command},
                "id": f"c{step}",
            },
            {"t": "result", "step": step, "name": "cat", "id": f"c{step}", "output": f"of {path}"},
        ]
    label: dict[str, Any] = {
        "id": run_id,
        "framework": framework,
        "kind": kind,
        "outcome": rng.choice(["resolved", "unresolved"]),
        "n_events": len(events),
    }
    if kind == "loop":
        label.update(
            loop_start_event=starts[2] + 1,
            earliest_ok_stop=starts[4] + 1,
            latest_ok_stop=starts[7] + 3,
            **{"class": "exact"},
        )
    return {"id": run_id, "framework": framework, "events": events}, label


ANSWERS = [
    "Your booking is confirmed for Friday morning.",
    "The flight to Denver leaves from gate twelve.",
    "I have updated the delivery address on file.",
    "A refund of the fare is on its way to your card.",
    "Two checked bags are included with this ticket.",
    "Is there anything else I can help you with today?",
]


def _chat_run(run_id: str, kind: str, rng: random.Random) -> tuple[dict, dict]:
    """A chat: a loop answers every message the same way, the others answer each anew."""
    events: list[dict[str, Any]] = []
    starts = []
    answers = rng.sample(ANSWERS, len(ANSWERS))
    for step in range(6):
        reply = "Sorry, could you rephrase that?" if kind == "loop" else answers[step]
        events.append({"t": "user", "step": 2 * step})
        starts.append(len(events))
        events += [
            {"t": "turn", "step": 2 * step + 1},
            {"t": "assistant", "step": 2 * step + 1, "text": reply, "tool_calls": []},
        ]
    label: dict[str, Any] = {
        "id": run_id,
        "framework": "chat",
        "kind": kind,
        "outcome": "unresolved",
        "n_events": len(events),
    }
    if kind == "loop":
        label.update(
            loop_start_event=starts[0] + 1,
            earliest_ok_stop=starts[2] + 1,
            latest_ok_stop=starts[5] + 1,
            **{"class": "format_errors"},
        )
    return {"id": run_id, "framework": "chat", "events": events}, label


def _write_set(directory: Path, labels_path: Path, runs: list[tuple[dict, dict]]) -> None:
    directory.mkdir(parents=True)
    with gzip.open(directory / "runs.jsonl.gz", "wt", encoding="utf-8") as handle:
        for traj, _ in runs:
            handle.write(json.dumps(traj) + "\n")
    labels_path.write_text(json.dumps([label for _, label in runs]))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rng = random.Random(27)
    coding = [
        _coding_run(f"{fw}/run-{n}", fw, kind, rng)
        for fw, loops, others in (("agent-a", 6, 9), ("agent-b", 3, 7))
        for n, kind in enumerate(["loop"] * loops + ["no_loop"] * others + ["unclear"])
    ]
    chats = [
        _chat_run(f"chat/{n}", kind, rng) for n, kind in enumerate(["loop"] * 5 + ["no_loop"] * 11)
    ]
    root = tmp_path / "real-trajectories"
    _write_set(root / "events", root / "labels.json", coding)
    _write_set(root / "conversations" / "events", root / "conversations" / "labels.json", chats)
    (root / "score.py").write_text(SCORER)
    return root


def _assert_stratified(folds: dict[str, int], strata: dict[str, str], k: int) -> None:
    assert set(folds.values()) <= set(range(k))
    per_stratum: dict[str, Counter] = defaultdict(Counter)
    for key, fold in folds.items():
        per_stratum[strata[key]][fold] += 1
    for counts in per_stratum.values():
        sizes = [counts[fold] for fold in range(k)]
        assert max(sizes) - min(sizes) <= 1, sizes
    sizes = [Counter(folds.values())[fold] for fold in range(k)]
    assert max(sizes) - min(sizes) <= 1, sizes


@pytest.mark.parametrize("k", [2, 3, 5])
def test_every_run_goes_to_one_fold_each_fold_with_its_share_of_every_stratum(k: int) -> None:
    script = _script()
    sizes = {
        "coding/swe-agent/loop": 23,
        "coding/swe-agent/no_loop": 41,
        "coding/mini/loop": 1,
        "conversations/chat/loop": 3,
        "conversations/chat/no_loop": 17,
    }
    strata = {f"{s}:{n}": s for s, size in sizes.items() for n in range(size)}
    folds = script.assign_folds(strata, k)
    assert folds.keys() == strata.keys()
    _assert_stratified(folds, strata, k)
    shuffled = dict(random.Random(1).sample(sorted(strata.items()), len(strata)))
    assert script.assign_folds(shuffled, k) == folds  # stable: the order given does not matter


def test_quick_path_holds_every_run_out_once(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script()
    out = tmp_path / "cv.json"
    assert script.main(["--quick", "--data", str(data), "--json", str(out), "--workers", "1"]) == 0
    text = capsys.readouterr().out
    for scoring in (
        "coding runs, scope run",
        "conversations, scope thread",
        "conversations, scope run",
    ):
        assert f"### {scoring}" in text
    assert "| held out (5 folds) |" in text
    assert "Stability: the 5 folds chose" in text

    result = json.loads(out.read_text())
    held = [key for fold in result["folds"] for key in fold["held_out"]]
    assert len(held) == len(set(held)) == len(result["strata"])  # each run held out once
    assert set(held) == set(result["strata"])
    folds = {key: fold["fold"] for fold in result["folds"] for key in fold["held_out"]}
    _assert_stratified(folds, result["strata"], 5)
    for fold in result["folds"]:  # every fold held out loops of each set's frameworks
        loops = {result["strata"][key] for key in fold["held_out"]} & {
            "coding/agent-a/loop",
            "conversations/chat/loop",
        }
        assert len(loops) == 2
    # the held-out totals are the folds' scores added up
    for scoring, totals in result["held_out"].items():
        for key, value in totals.items():
            assert value == sum(fold["scored"][scoring].get(key, 0) for fold in result["folds"])
    assert result["held_out"]["coding runs, scope run"]["loop"] == 9
    labels = {c["label"] for c in result["candidates"]}
    assert {fold["chosen_label"] for fold in result["folds"]} <= labels
    assert result["candidates"][0]["label"] == "defaults"


def test_a_grid_key_the_config_does_not_know_is_skipped_with_a_note() -> None:
    script = _script()
    notes: list[str] = []
    grid = {"no_new_info_calls": (9,), "a_key_not_there_yet": (1, 2)}
    candidates = script.build_candidates(grid, notes)
    assert [c.label for c in candidates] == ["defaults", "no_new_info_calls=9"]
    assert any("a_key_not_there_yet" in note for note in notes)


def test_without_the_data_it_says_so_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _script().main(["--data", str(tmp_path / "absent")]) == 0
    assert "no real-trajectories data set" in capsys.readouterr().out


def test_the_rows_cover_the_never_stop_list_of_the_detector_tests() -> None:
    """The script's never-stop rows carry test_beyond_coding's ids: none is left out."""
    from test_beyond_coding import NEVER

    rows, note = _script().hand_made_rows()
    assert note is None
    never = {row.name for row in rows if row.kind == "never"}
    assert {param.id for param in NEVER} <= never


def test_rows_flags_what_a_configuration_breaks(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    assert script.main(["--rows", "--config", '{"no_new_info_calls": 0}']) == 0
    text = capsys.readouterr().out
    assert "R8-flailing-0: never stopped" in text
    assert script.broken_rows({}) == []  # the defaults hold every row
