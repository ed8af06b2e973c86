"""Calibrate the detector's settings on the real recorded runs, by cross-validation (SPEC §11-§13).

    python benchmarks/calibrate_real_runs.py                 # the grid, as markdown tables
    python benchmarks/calibrate_real_runs.py --quick         # a tiny grid (a smoke test)
    python benchmarks/calibrate_real_runs.py --json out.json # and every figure, as JSON
    python benchmarks/calibrate_real_runs.py --rows --config '{"failing_turns": 5}'
                                                             # the hand-made rows it breaks

The runs are not part of the project: they are read from ``../shared/real-trajectories/``
beside the checkout (``--data`` names another place), and the script says so and exits 0 when
they are not there. Four sets are scored: the coding runs (``events/``, ``labels.json``) with
``scope="run"``; the chat conversations (``conversations/``) with ``scope="thread"``, each
user message told to the detector (``LoopDetector.user_message()``, as the integrations do),
and with ``scope="run"`` (a reset at each user message), where no stop is wanted; the browser
and multi-turn API agents (``browser-api/``) with ``scope="thread"``; and the agents that act
through MCP servers (``tool-agents/``, no user messages) with ``scope="run"``. A set that is
not there is skipped with a note.

A candidate is one point of the grid in :data:`GRID`. The selection rule, in this order:

0. precision first (SPEC §14): a candidate with more than one false stop per 1,000 runs on
   any scoring loses to every candidate with fewer such scorings, before loops are counted;
1. it holds every hand-made row (:func:`hand_made_rows`): each must-stop row stops within its
   span and each never-stop row never stops, through the pure detector; a candidate that
   breaks one is out (and is not replayed);
2. on the runs it is fitted on: the fewest false stops (stops on ``no_loop`` runs plus early
   stops, a stop on a run the agent resolved counting three times, summed over the three
   scorings), then the most loops caught on time, then the fewest late stops (coding runs and
   conversations in thread scope);
3. ties go to the candidate closest to the current defaults.

Cross-validation: every run goes to one of ``--folds`` folds (by a stable hash of its id, dealt
so that each fold gets its share of each set's, framework's and label's runs). For each fold the
rule chooses a candidate on the other folds, and that candidate is scored on the held-out fold;
the held-out totals (summed over the folds) stand next to the fit on all runs. Each candidate
replays each run once (with ``score.py``'s own loading and judging); folds only regroup the
results.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import json
import multiprocessing
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "real-trajectories"

# The grid: LoopGuardConfig keys and the values to try. The installed default of each key is
# always tried as well. Keys the installed LoopGuardConfig does not know are skipped with a
# note, so this table may name keys a detector rewrite is about to add.
GRID: dict[str, tuple[Any, ...]] = {
    "near_repeat_threshold": (3, 4, 5),
    "no_new_info_calls": (8, 9, 10, 12),
    "failing_turns": (5, 6, 7),
    "repeat_error_threshold": (3, 4),
    "reply_cycle_length": (3, 4),
    # SPEC §13 R12 ("by the 5th answer in a row that brings back only what the run has
    # seen, calibrate") has no key of its own: such answers count double toward
    # no_new_info_calls, so the values above try 4, 5, 5 and 6 of them
}
QUICK_GRID: dict[str, tuple[Any, ...]] = {"no_new_info_calls": (9, 10)}

FOLDS = 5
FALSE_ON_RESOLVED = 3  # a false stop on a run the agent resolved weighs this much


# --- the scorings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scoring:
    """One set of runs replayed in one scope; ``role`` says what selection reads of it:
    ``select`` (false stops, caught, late), ``false`` (false stops only), ``report``."""

    name: str
    set: str
    scope: str
    role: str


SCORINGS = (
    Scoring("coding runs, scope run", "coding", "run", "select"),
    Scoring("conversations, scope thread", "conversations", "thread", "select"),
    Scoring("conversations, scope run", "conversations", "run", "false"),
    Scoring("browser and API agents, scope thread", "browser-api", "thread", "select"),
    Scoring("tool agents (MCP), scope run", "tool-agents", "run", "select"),
)
CODING_THREAD = Scoring("coding runs, scope thread", "coding", "thread", "report")
SET_FILES = {
    "coding": ("events", "labels.json"),
    "conversations": ("conversations/events", "conversations/labels.json"),
    "browser-api": ("browser-api/events", "browser-api/labels.json"),
    "tool-agents": ("tool-agents/events", "tool-agents/labels.json"),
}
MAX_FALSE_PER_1000 = 1.0
"""Precision first (SPEC §14): a candidate with more false stops per 1,000 runs than this on
any scoring is out before loops are counted."""


@dataclass
class Run:
    key: str  # "<set>:<id>"
    set: str
    label: dict[str, Any]
    events: list[dict[str, Any]]

    @property
    def stratum(self) -> str:
        return f"{self.set}/{self.label.get('framework', '?')}/{self.label['kind']}"


def load_scorer(data: Path) -> ModuleType:
    """``score.py`` as a module (it puts this checkout's package first on ``sys.path``)."""
    spec = importlib.util.spec_from_file_location("score", data / "score.py")
    assert spec is not None
    assert spec.loader is not None
    scorer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scorer)
    return scorer


def load_runs(data: Path, scorer: ModuleType, notes: list[str]) -> dict[str, list[Run]]:
    """The labelled runs of each set that is there, in file order."""
    sets: dict[str, list[Run]] = {}
    for name, (events_dir, labels_file) in SET_FILES.items():
        if not (data / labels_file).is_file() or not (data / events_dir).is_dir():
            notes.append(f"set `{name}` not found under the data directory: not scored")
            continue
        labels = {rec["id"]: rec for rec in json.loads((data / labels_file).read_text())}
        runs = []
        for traj in scorer.load_events(data / events_dir):
            label = labels.get(traj["id"])
            if label is None:
                continue
            if label.get("n_events") not in (None, len(traj["events"])):
                msg = f"{traj['id']}: events and labels do not match"
                raise SystemExit(msg)
            runs.append(Run(f"{name}:{traj['id']}", name, label, traj["events"]))
        sets[name] = runs
    return sets


# --- folds ----------------------------------------------------------------------------------------


def stable_hash(key: str) -> int:
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16)


def assign_folds(strata: Mapping[str, str], k: int) -> dict[str, int]:
    """Run key -> fold in ``range(k)``. The runs of each stratum, in the order of a stable
    hash of their keys, are dealt to the folds in turn, the dealing going on from one stratum
    to the next: each fold gets its share of every stratum (within one run) and of all runs."""
    by_stratum: dict[str, list[str]] = defaultdict(list)
    for key, stratum in strata.items():
        by_stratum[stratum].append(key)
    folds: dict[str, int] = {}
    dealt = 0
    for stratum in sorted(by_stratum):
        for key in sorted(by_stratum[stratum], key=lambda k_: (stable_hash(k_), k_)):
            folds[key] = dealt % k
            dealt += 1
    return folds


# --- candidates -----------------------------------------------------------------------------------


@dataclass
class Candidate:
    index: int
    values: dict[str, Any]  # only the keys that differ from the defaults
    distance: tuple[int, float]
    broken: list[str] = field(default_factory=list)
    invalid: str | None = None

    @property
    def label(self) -> str:
        if not self.values:
            return "defaults"
        return ", ".join(f"{k}={v}" for k, v in self.values.items())


def _distance(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> tuple[int, float]:
    moved = 0.0
    for key, value in values.items():
        default = defaults[key]
        if isinstance(value, int | float) and isinstance(default, int | float):
            moved += abs(value - default) / max(1.0, abs(float(default)))
        else:
            moved += 1.0
    return len(values), moved


def build_candidates(grid: Mapping[str, Sequence[Any]], notes: list[str]) -> list[Candidate]:
    """Every point of ``grid`` over the keys the installed ``LoopGuardConfig`` knows, each
    key's default included; the defaults come first."""
    from langchain_loop_guard import LoopGuardConfig

    known = LoopGuardConfig.model_fields
    defaults_config = LoopGuardConfig()
    skipped = [key for key in grid if key not in known]
    if skipped:
        notes.append(
            "grid keys the installed `LoopGuardConfig` does not know, skipped: "
            + ", ".join(f"`{key}`" for key in skipped)
        )
    keys = [key for key in grid if key in known]
    defaults = {key: getattr(defaults_config, key) for key in keys}
    axes = []
    for key in keys:
        values = list(dict.fromkeys(grid[key]))
        if defaults[key] not in values:
            values.append(defaults[key])
        axes.append(sorted(values, key=lambda v: (v != defaults[key], str(type(v)), v)))
    candidates = []
    for point in itertools.product(*axes):
        values = {k: v for k, v in zip(keys, point, strict=True) if v != defaults[k]}
        candidate = Candidate(len(candidates), values, _distance(values, defaults))
        try:
            LoopGuardConfig(**values)
        except Exception as exc:  # noqa: BLE001 - any refusal makes the point invalid
            candidate.invalid = str(exc).splitlines()[0]
        candidates.append(candidate)
    return candidates


# --- the hand-made rows -----------------------------------------------------------------------


@dataclass(frozen=True)
class HandRow:
    """A row of SPEC §2/§11/§12 as a realistic scenario: ``check(config)`` says how the pure
    detector under ``config`` breaks it, or ``None`` when it holds."""

    name: str
    kind: str  # "stop" or "never"
    check: Callable[[dict[str, Any]], str | None]


_ROWS: list[HandRow] | None = None
_ROWS_NOTE: str | None = None


def _scenario_row(
    name: str,
    kind: str,
    build: Callable[[], Any],
    within: str = "",
    limit: Callable[[Any], int] | None = None,
) -> HandRow:
    """A row of ``tests/conversations.py``: must stop (by ``limit(scenario)`` of ``within``,
    ``"calls"`` or ``"turns"``), or never stop."""
    from conversations import drive

    def check(config: dict[str, Any]) -> str | None:
        scenario = build()  # a fresh one: some tools are iterators
        seen = drive(scenario, **config)
        if kind == "never":
            if seen.stop is None:
                return None
            return f"stopped at turn {seen.turns} by {_signal(seen.stop)}"
        if seen.stop is None:
            return "never stopped"
        assert limit is not None
        bound = limit(build())
        done = seen.calls if within == "calls" else seen.turns
        if done > bound:
            return f"stopped after {done} {within} by {_signal(seen.stop)} (by {bound} wanted)"
        return None

    return HandRow(name, kind, check)


def _signal(verdict: Any) -> str:
    signal = getattr(verdict.signal, "value", verdict.signal)
    return f"{signal}" + (f" on {verdict.tool}" if getattr(verdict, "tool", None) else "")


def _third_install(scenario: Any) -> int:
    from conversations import Turn

    turns = [step for step in scenario.script if isinstance(step, Turn)]
    return [n for n, turn in enumerate(turns, 1) if "default-jdk" in str(turn.calls)][2]


def _searches_and_writes() -> Any:
    """N9 inside R8 (``test_beyond_coding``): a silent write between fruitless searches."""
    from conversations import Scenario, Turn, User

    script: list[Any] = [User("Find the config.")]
    for n in range(15):
        script.append(Turn((("search_dir", {"term": f"config {n}"}),)))
        if n % 5 == 4:
            script.append(Turn((("write_file", {"path": f"notes/{n}.md", "content": "x"}),)))
    tools = {
        "search_dir": lambda term: f'No matches found for "{term}" in /repo',
        "write_file": lambda path, content: "",
    }
    return Scenario("searches-and-writes", script, tools)


def _conversation_rows() -> list[HandRow]:
    """SPEC §12's rows on ``tests/conversations.py``, the spans ``tests/test_beyond_coding.py``
    asserts (its ``NEVER`` list, with the same ids, and its must-stop tests)."""
    from dataclasses import replace

    import conversations as c

    never: list[tuple[str, Callable[[], Any]]] = [
        *((f"N6-flights-seed{s}", lambda s=s: c.flight_fan_out(s)) for s in range(4)),
        ("N6-flights-two-messages", lambda: c.flight_fan_out(7, batches=2)),
        ("N6-flights-30-routes", lambda: c.flight_fan_out(8, routes=30, served=3)),
        ("N6-flights-3x4", lambda: c.flight_fan_out(9, routes=12, served=1, batches=3)),
        *((f"N6-web-seed{s}", lambda s=s: c.web_fan_out(s)) for s in range(3)),
        ("N7-ci", c.ci_poller),
        ("N7-export-percent", lambda: c.export_poller(range(5, 100, 7))),
        ("N7-export-slow", lambda: c.export_poller(list(range(1, 12)))),
        ("N7-wc-short", lambda: c.line_count_poller([118, 131, 142, 150])),
        ("N7-wc-long", lambda: c.line_count_poller(range(100, 400, 11))),
        ("N7-log-tail", lambda: c.log_tail_poller(10)),
        ("N7-log-tail-long", lambda: c.log_tail_poller(30, lines=3)),
        ("N8-chat-30", lambda: c.support_chat(30)),
        ("N8-chat-30-run-scope", lambda: replace(c.support_chat(30), scope="run")),
        ("N8-chat-12", lambda: c.support_chat(12)),
        ("N9-write-file", lambda: c.write_files(10)),
        ("N9-create-file", lambda: c.write_files(14, tool="create_file")),
        ("N9-heredoc", lambda: c.heredoc_files(10)),
        ("N9-heredoc-16", lambda: c.heredoc_files(16)),
        ("N9-mkdir-touch-sed", c.shell_setup),
        ("N9-searches-and-writes", _searches_and_writes),
        ("N1-rerun-after-fixes", c.rerun_after_fixes),
        ("R9-run-scope", lambda: replace(c.rephrase_loop(11), scope="run")),
        ("R9-cycle-run-scope", lambda: replace(c.apology_cycle(2), scope="run")),
    ]
    rows = [_scenario_row(name, "never", build) for name, build in never]
    # SPEC §13 R10 (which withdrew §12 N7's ages): time passing only, the 3rd identical poll
    for name, build in (
        ("R10-ci-slow-steps", lambda: c.ci_poller(polls_per_step=3)),
        ("R10-kubectl", lambda: c.pod_poller(3)),
        ("R10-kubectl-slow", lambda: c.pod_poller(12, restarts=True)),
    ):
        rows.append(_scenario_row(name, "stop", build, "calls", lambda _: 2))
    for lines in (24, 40, 90):  # by the 6th identical call
        build = lambda lines=lines: c.reapplied_edit(base_lines=lines)  # noqa: E731
        rows.append(_scenario_row(f"R1'-edit-{lines}", "stop", build, "calls", lambda _: 5))
    for order in range(3):  # at the 3rd identical failure
        build = lambda order=order: c.install_without_network(order)  # noqa: E731
        rows.append(_scenario_row(f"R4'-install-{order}", "stop", build, "calls", _third_install))
    for shape in range(5):  # by the 10th call bringing nothing new
        build = lambda shape=shape: c.flailing_without_jdk(shape)  # noqa: E731
        rows.append(_scenario_row(f"R8-flailing-{shape}", "stop", build, "calls", lambda _: 10))
    rows.append(
        _scenario_row("R8-fan-outs", "stop", c.flailing_with_fan_outs, "turns", lambda _: 10)
    )
    for messages in (3, 5, 11):  # by the 3rd identical reply
        build = lambda messages=messages: c.rephrase_loop(messages)  # noqa: E731
        rows.append(_scenario_row(f"R9-rephrase-{messages}", "stop", build, "turns", lambda _: 3))
    for length in (1, 2, 3, 4):  # by the 3rd lap
        build = lambda length=length: c.apology_cycle(length)  # noqa: E731
        rows.append(
            _scenario_row(
                f"R9-cycle-{length}", "stop", build, "turns", lambda _, length=length: 3 * length
            )
        )
    return rows


# The model turn by which SPEC stops each loop of ``tests/guard_scenarios.py`` (the loops
# not named here: within the integration tests' bound, ``MAX_LOOP_TURNS``).
LOOP_SPANS: dict[str, tuple[int, str]] = {
    "repeat": (3, "§2: A A A"),
    "unknown_tool": (3, "§2: A A A"),
    "cycle": (6, "§2: 3 full cycles"),
    "window": (7, "§2: 4 of the last 10 calls"),
    "repeated_error": (3, "§2: the same error 3 times in a row"),
    "repeated_assistant_response": (3, "§2: the same text 3 times in a row"),
    "repeated_sequence": (12, "§11 R5: within the 3rd lap of a 4-call block"),
    "no_new_info": (10, "§11 R6: by the 10th call"),
    "failing_turns": (8, "§11 R3: within 8 failing turns"),
    "same_failing_call_between_think_steps": (5, "§11 R4: at the 3rd book(x) error"),
}


def _loop_row(loop: Any, max_turns: int) -> HandRow:
    """A loop of ``tests/guard_scenarios.py`` (SPEC §2, §11) through the pure detector, fed as
    an agent loop feeds it: it must stop within ``max_turns`` model turns (its signal is the
    integration tests' to check)."""
    from langchain_core.tools import ToolException

    from langchain_loop_guard import LoopDetector, LoopGuardConfig

    def check(config: dict[str, Any]) -> str | None:
        detector = LoopDetector(LoopGuardConfig(**{**config, **loop.config}), clock=lambda: 0.0)
        tools = {tool.name: tool for tool in loop.tools()}
        ids = itertools.count(1)
        for turn in range(max_turns):
            if detector.turn_start().stops:
                return None
            answer = loop.step(turn)
            text = answer if isinstance(answer, str) else str(answer.content)
            calls = (
                []
                if isinstance(answer, str)
                else [(c["name"], c["args"]) for c in answer.tool_calls]
            )
            if detector.assistant_message(text, calls).stops:
                return None
            started = []
            for name, args in calls:
                call_id = f"call_{next(ids)}"
                if detector.tool_call(name, args, call_id=call_id).stops:
                    return None
                started.append((name, args, call_id))
            for name, args, call_id in started:
                tool = tools.get(name)
                try:
                    if tool is None:
                        raise ToolException(
                            f"Error: {name} is not a valid tool, try one of [{', '.join(tools)}]."
                        )
                    output = tool.func(**args)
                except ToolException as error:
                    verdict = detector.tool_result(name, error=str(error), call_id=call_id)
                else:
                    verdict = detector.tool_result(name, str(output), call_id=call_id)
                if verdict.stops:
                    return None
        return f"not stopped within {max_turns} turns"

    return HandRow(f"loop-{loop.name}", "stop", check)


def hand_made_rows() -> tuple[list[HandRow], str | None]:
    """The rows, and a note on what could not be imported (``tests/`` is on ``sys.path``)."""
    global _ROWS, _ROWS_NOTE  # noqa: PLW0603 - one table per process
    if _ROWS is None:
        tests = str(ROOT / "tests")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        rows: list[HandRow] = []
        missing = []
        try:
            rows += _conversation_rows()
        except ImportError as exc:
            missing.append(f"tests/conversations.py ({exc})")
        try:
            from guard_scenarios import LOOPS, MAX_LOOP_TURNS

            rows += [
                _loop_row(loop, LOOP_SPANS.get(loop.name, (MAX_LOOP_TURNS, ""))[0])
                for loop in LOOPS
            ]
        except ImportError as exc:
            missing.append(f"tests/guard_scenarios.py ({exc})")
        _ROWS = rows
        _ROWS_NOTE = f"rows not loaded: {'; '.join(missing)}" if missing else None
    return _ROWS, _ROWS_NOTE


def broken_rows(config: dict[str, Any]) -> list[str]:
    """``row: how it breaks`` for every hand-made row ``config`` breaks."""
    broken = []
    for row in hand_made_rows()[0]:
        try:
            why = row.check(config)
        except Exception as exc:  # noqa: BLE001 - a row the detector cannot run is broken
            why = f"{type(exc).__name__}: {exc}"
        if why is not None:
            broken.append(f"{row.name}: {why}")
    return broken


# --- replaying ------------------------------------------------------------------------------------

_WORK: dict[str, Any] = {}  # the scorer and the runs, set before the workers fork


def _rows_task(candidate: Candidate) -> tuple[int, list[str]]:
    return candidate.index, broken_rows(candidate.values)


def _replay_task(task: tuple[int, dict[str, Any], Scoring]) -> tuple[int, str, list[Any]]:
    """Each run of the scoring's set under one candidate: (outcome, stop event) per run."""
    index, values, scoring = task
    from langchain_loop_guard import LoopGuardConfig

    scorer = _WORK["scorer"]
    config = LoopGuardConfig(**{**values, "scope": scoring.scope})
    results = []
    for run in _WORK["runs"][scoring.set]:
        stop = scorer.first_stop(run.events, config, scoring.scope)
        results.append((scorer.judge(run.label, stop), None if stop is None else stop["event"]))
    return index, scoring.name, results


def _map(function: Callable[[Any], Any], tasks: list[Any], workers: int) -> Iterable[Any]:
    if workers <= 1 or len(tasks) <= 1:
        return map(function, tasks)
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # no fork (Windows, say): one process
        return map(function, tasks)
    with context.Pool(workers) as pool:
        return list(pool.imap_unordered(function, tasks))


# --- tallies and the rule -------------------------------------------------------------------------

TOTAL_KEYS = (
    "loop",
    "caught",
    "late",
    "early",
    "missed",
    "no_loop",
    "false",
    "false_total",
    "false_resolved",
    "unclear",
    "unclear_stopped",
)


def tally(
    scorer: ModuleType, runs: Sequence[Run], results: Sequence[Any], keep: Callable[[int], bool]
) -> Counter:
    rows = [
        (run.label, None if event is None else {"event": event}, outcome)
        for n, (run, (outcome, event)) in enumerate(zip(runs, results, strict=True))
        if keep(n)
    ]
    totals = scorer.tally(rows) if rows else Counter()
    return Counter({key: totals[key] for key in TOTAL_KEYS})


def per_1000(t: Mapping[str, int]) -> float:
    """False stops (on no_loop runs, and early ones) per 1,000 scored runs."""
    runs = t["loop"] + t["no_loop"]
    return 1000.0 * t["false_total"] / runs if runs else 0.0


def objective(
    candidate: Candidate, totals: Mapping[str, Counter], scorings: Sequence[Scoring]
) -> tuple[Any, ...]:
    """Smaller is better: how many scorings have more than 1 false stop per 1,000 runs (a
    candidate with any is out before loops count), weighted false stops, loops not caught,
    late stops, distance."""
    over = sum(
        per_1000(totals[s.name]) > MAX_FALSE_PER_1000 for s in scorings if s.role != "report"
    )
    weighted = caught = late = 0
    for scoring in scorings:
        t = totals[scoring.name]
        if scoring.role in ("select", "false"):
            weighted += t["false_total"] + (FALSE_ON_RESOLVED - 1) * t["false_resolved"]
        if scoring.role == "select":
            caught += t["caught"]
            late += t["late"]
    return (over, weighted, -caught, late, candidate.distance, candidate.index)


def choose(
    candidates: Sequence[Candidate],
    totals: Mapping[int, Mapping[str, Counter]],
    scorings: Sequence[Scoring],
) -> Candidate:
    return min(candidates, key=lambda c: objective(c, totals[c.index], scorings))


# --- the run --------------------------------------------------------------------------------------


def calibrate(
    data: Path, grid: Mapping[str, Sequence[Any]], k: int, workers: int, threads: bool
) -> dict[str, Any]:
    """Everything the report shows, as plain data."""
    started = time.monotonic()
    notes: list[str] = []
    scorer = load_scorer(data)
    import langchain_loop_guard

    where = Path(langchain_loop_guard.__file__).resolve().parent
    origin = "this checkout" if where.parent == ROOT else "installed"
    candidates = build_candidates(grid, notes)
    sets = load_runs(data, scorer, notes)
    scorings = [s for s in (*SCORINGS, *((CODING_THREAD,) if threads else ())) if s.set in sets]
    if not scorings:
        msg = f"no labelled runs under {data}"
        raise SystemExit(msg)

    rows, rows_note = hand_made_rows()
    if rows_note:
        notes.append(rows_note)
    valid = [c for c in candidates if c.invalid is None]
    for index, broken in _map(_rows_task, valid, workers):
        candidates[index].broken = broken
    holding = [c for c in valid if not c.broken]
    replayed = [c for c in candidates if c.index == 0 or (c.invalid is None and not c.broken)]

    _WORK.update(scorer=scorer, runs=sets)
    tasks = [(c.index, c.values, s) for c in replayed for s in scorings]
    results: dict[int, dict[str, list[Any]]] = defaultdict(dict)
    for index, name, outcome in _map(_replay_task, tasks, workers):
        results[index][name] = outcome

    strata = {run.key: run.stratum for runs in sets.values() for run in runs}
    fold_of = assign_folds(strata, k)
    by_name = {s.name: s for s in scorings}

    def totals_for(index: int, folds: set[int]) -> dict[str, Counter]:
        out = {}
        for name, outcome in results[index].items():
            runs = sets[by_name[name].set]
            keep = [fold_of[run.key] in folds for run in runs]
            out[name] = tally(scorer, runs, outcome, keep.__getitem__)
        return out

    everything = set(range(k))
    fit_totals = {c.index: totals_for(c.index, everything) for c in replayed}
    pool = holding or [candidates[0]]
    if not holding:
        notes.append("no candidate holds every hand-made row: the defaults are shown alone")
    fit = choose(pool, fit_totals, scorings)
    folds = []
    held_out: dict[str, Counter] = {s.name: Counter() for s in scorings}
    for fold in range(k):
        train = {c.index: totals_for(c.index, everything - {fold}) for c in pool}
        chosen = choose(pool, train, scorings)
        scored = totals_for(chosen.index, {fold})
        for name, t in scored.items():
            held_out[name] += t
        folds.append(
            {
                "fold": fold,
                "held_out": sorted(key for key, f in fold_of.items() if f == fold),
                "chosen": chosen.index,
                "training": train[chosen.index],
                "scored": scored,
            }
        )
    ranking = sorted(pool, key=lambda c: objective(c, fit_totals[c.index], scorings))
    return {
        "origin": origin,
        "version": getattr(langchain_loop_guard, "__version__", "?"),
        "grid": {key: list(values) for key, values in grid.items()},
        "notes": notes,
        "k": k,
        "scorings": scorings,
        "sets": {
            name: {"runs": len(runs), "loops": sum(r.label["kind"] == "loop" for r in runs)}
            for name, runs in sets.items()
        },
        "strata": strata,
        "rows": rows,
        "candidates": candidates,
        "holding": [c.index for c in holding],
        "fit_totals": fit_totals,
        "fit": fit.index,
        "folds": folds,
        "held_out": held_out,
        "ranking": [c.index for c in ranking],
        "seconds": time.monotonic() - started,
        "workers": workers,
    }


# --- the report -----------------------------------------------------------------------------------


def _cells(t: Mapping[str, int]) -> str:
    return (
        f"{t['caught']}/{t['loop']} | {t['late']} | {t['missed']} | {t['early']} | "
        f"{t['false_total']} | {per_1000(t):.1f} | {t['false_resolved']} | "
        f"{t['unclear_stopped']}/{t['unclear']}"
    )


def _short(t: Mapping[str, int]) -> str:
    return (
        f"{t['caught']}/{t['loop']}, late {t['late']}, missed {t['missed']}, "
        f"false {t['false_total']} ({per_1000(t):.1f}/1000, {t['false_resolved']} res.)"
    )


def _head(r: dict[str, Any]) -> list[str]:
    candidates: list[Candidate] = r["candidates"]
    out = ["# Calibration by cross-validation", ""]
    out.append(f"- detector: `langchain_loop_guard` {r['version']} ({r['origin']})")
    sets = ", ".join(
        f"{name} {s['runs']} runs ({s['loops']} loops)" for name, s in r["sets"].items()
    )
    out.append(f"- runs: {sets}; {r['k']} folds")
    grid = "; ".join(f"`{key}` {', '.join(map(str, values))}" for key, values in r["grid"].items())
    out.append(f"- grid: {grid} (each key's default included)")
    invalid = sum(c.invalid is not None for c in candidates)
    broken = sum(bool(c.broken) for c in candidates)
    out.append(
        f"- candidates: {len(candidates)}; {invalid} refused by `LoopGuardConfig`, "
        f"{broken} break a hand-made row, {len(r['holding'])} hold all "
        f"{len(r['rows'])} rows and are scored"
    )
    out.extend(f"- note: {note}" for note in r["notes"])
    if candidates[0].broken:
        out.append(
            f"- the defaults break {len(candidates[0].broken)} row(s): "
            + "; ".join(candidates[0].broken)
        )
    return out


def _fit_and_held_out(r: dict[str, Any]) -> list[str]:
    candidates: list[Candidate] = r["candidates"]
    k = r["k"]
    out = ["## Fit on all runs and held out", ""]
    out.append(
        f'"held out": each fold scored with the candidate chosen on the other {k - 1}, '
        "summed over the folds. False stops = stops on no_loop runs + early stops; "
        '"on resolved": of those, runs the agent went on to resolve.'
    )
    fit = candidates[r["fit"]]
    for scoring in r["scorings"]:
        role = {
            "select": "",
            "false": " (selected on its false stops only)",
            "report": " (not selected on)",
        }[scoring.role]
        out += ["", f"### {scoring.name}{role}", ""]
        out.append(
            "| | candidate | caught | late | missed | early | false stops | per 1,000 runs "
            "| on resolved | unclear stopped |"
        )
        out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        if 0 in r["fit_totals"]:
            out.append(
                f"| defaults, all runs | defaults | {_cells(r['fit_totals'][0][scoring.name])} |"
            )
        out.append(
            f"| fit on all runs | {fit.label} | "
            f"{_cells(r['fit_totals'][fit.index][scoring.name])} |"
        )
        out.append(
            f"| held out ({k} folds) | per fold, below | {_cells(r['held_out'][scoring.name])} |"
        )
    return out


def _folds(r: dict[str, Any]) -> list[str]:
    candidates: list[Candidate] = r["candidates"]
    scorings: list[Scoring] = r["scorings"]
    out = ["## Folds", ""]
    head = " | ".join(f"{s.name}, held out" for s in scorings)
    out.append(f"| fold | runs | loops | chosen on the other folds | {head} |")
    out.append("|---:|---:|---:|---|" + "---|" * len(scorings))
    for fold in r["folds"]:
        held = fold["held_out"]
        loops = sum(r["strata"][key].endswith("/loop") for key in held)
        cells = " | ".join(_short(fold["scored"][s.name]) for s in scorings)
        out.append(
            f"| {fold['fold']} | {len(held)} | {loops} | "
            f"{candidates[fold['chosen']].label} | {cells} |"
        )
    chosen = Counter(candidates[f["chosen"]].label for f in r["folds"])
    out.append("")
    out.append(
        f"Stability: the {r['k']} folds chose {len(chosen)} different candidate(s) ("
        + "; ".join(f"{label}: {n}" for label, n in chosen.most_common())
        + f"); the fit on all runs chose {candidates[r['fit']].label}."
    )
    return out


def _ranking(r: dict[str, Any]) -> list[str]:
    candidates: list[Candidate] = r["candidates"]
    scorings: list[Scoring] = r["scorings"]
    out = ["## The best candidates on all runs", ""]
    out.append(
        "Ranked by the selection rule (weighted false stops: a false stop on a resolved "
        f"run counts {FALSE_ON_RESOLVED} times), among the candidates that hold every row."
    )
    out.append("")
    head = " | ".join(s.name for s in scorings)
    out.append(f"| rank | candidate | weighted false stops | {head} |")
    out.append("|---:|---|---:|" + "---|" * len(scorings))
    shown = r["ranking"][:10]
    if 0 in r["ranking"] and 0 not in shown:
        shown.append(0)
    for index in shown:
        totals = r["fit_totals"][index]
        weighted = objective(candidates[index], totals, scorings)[1]
        cells = " | ".join(_short(totals[s.name]) for s in scorings)
        out.append(
            f"| {r['ranking'].index(index) + 1} | {candidates[index].label} | "
            f"{weighted} | {cells} |"
        )
    return out


def _rows(r: dict[str, Any]) -> list[str]:
    out = ["## Hand-made rows", ""]
    count = Counter(line.split(":", 1)[0] for c in r["candidates"] for line in c.broken)
    stops = sum(row.kind == "stop" for row in r["rows"])
    out.append(
        f"{stops} must-stop and {len(r['rows']) - stops} never-stop rows "
        "(`tests/conversations.py` with the spans of `tests/test_beyond_coding.py`; the "
        "loops of `tests/guard_scenarios.py` with SPEC's spans), through the pure detector."
    )
    if count:
        out += ["", "| row | candidates that break it |", "|---|---:|"]
        out.extend(f"| {row} | {n} |" for row, n in count.most_common())
    return out


def report(r: dict[str, Any]) -> str:
    sections = [
        _head(r),
        _fit_and_held_out(r),
        _folds(r),
        _ranking(r),
        _rows(r),
        [f"Run time: {r['seconds']:.0f} s with {r['workers']} worker(s)."],
    ]
    return "\n\n".join("\n".join(section) for section in sections)


def to_json(r: dict[str, Any]) -> dict[str, Any]:
    candidates: list[Candidate] = r["candidates"]
    return {
        "version": r["version"],
        "grid": r["grid"],
        "notes": r["notes"],
        "k": r["k"],
        "sets": r["sets"],
        "strata": r["strata"],
        "rows": [{"name": row.name, "kind": row.kind} for row in r["rows"]],
        "candidates": [
            {
                "index": c.index,
                "label": c.label,
                "values": c.values,
                "invalid": c.invalid,
                "broken": c.broken,
                "totals": r["fit_totals"].get(c.index),
            }
            for c in candidates
        ],
        "fit": {
            "index": r["fit"],
            "label": candidates[r["fit"]].label,
            "totals": r["fit_totals"][r["fit"]],
        },
        "folds": [
            {**fold, "chosen_label": candidates[fold["chosen"]].label} for fold in r["folds"]
        ],
        "held_out": r["held_out"],
        "ranking": r["ranking"],
        "seconds": r["seconds"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="the real-trajectories directory (with score.py)",
    )
    parser.add_argument("--quick", action="store_true", help="a tiny grid")
    parser.add_argument("--folds", type=int, default=FOLDS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--threads",
        action="store_true",
        help="also report the coding runs with scope thread (not selected on)",
    )
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument(
        "--rows", action="store_true", help="only print which hand-made rows --config breaks"
    )
    parser.add_argument("--config", default="{}", help="LoopGuardConfig values (with --rows)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # this checkout's package first, as score.py picks it
    if args.rows:
        values = json.loads(args.config)
        if not isinstance(values, dict):
            parser.error("--config must be a JSON object")
        rows, note = hand_made_rows()
        if note:
            print(note)
        broken = broken_rows(values)
        print(f"{len(rows)} hand-made rows; {args.config} breaks {len(broken)}")
        for line in broken:
            print(f"  {line}")
        return 0
    if args.config != "{}":
        parser.error("--config goes with --rows")
    if args.folds < 2:
        parser.error("--folds must be 2 or more")
    if not (args.data / "score.py").is_file():
        print(f"no real-trajectories data set at {args.data}: nothing to score (it is not part")
        print("of the project; place it beside the checkout or name it with --data)")
        return 0
    r = calibrate(
        args.data, QUICK_GRID if args.quick else GRID, args.folds, args.workers, args.threads
    )
    print(report(r))
    if args.json:
        args.json.write_text(json.dumps(to_json(r), indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
