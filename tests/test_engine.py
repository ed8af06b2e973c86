"""The run life cycle alone (``_engine``): begin, decide, hold, release, settle, end, evict.

No host here: a plain :class:`GuardRuntime` decides, and the runs are fed by hand. The
adapters' tests check how each one translates its host's events into these steps.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._core._detector import Verdict
from langchain_loop_guard._core._scope import choose_scope
from langchain_loop_guard._integrations._engine import Held, Run, RunEngine, bounded_put
from langchain_loop_guard._integrations._runtime import GuardRuntime

READ = ("tool_call", "read", {"path": "a.py"})


def engine(capacity: int = 4, **values: object) -> RunEngine[Run]:
    guard = GuardRuntime(LoopGuardConfig(**values))
    return RunEngine(
        guard, Run, lambda: capacity, scoped=guard._run_config, scope_seen=guard._scope_seen
    )


RUN = choose_scope("run", None, checkpointer=False)
THREAD = choose_scope("thread", "t", checkpointer=False)


def begun(runs: RunEngine[Run], key: str, *, per_thread: bool = False) -> Run:
    run = runs.begin(key, scope=THREAD if per_thread else RUN)
    assert run is not None
    return run


def stopped(run: Run) -> Verdict:
    """Make ``run`` repeat one call until it stops; the stopping verdict."""
    verdicts = [run.decide(*READ) for _ in range(3)]
    assert [v.action for v in verdicts] == ["allow", "allow", "block"]
    return verdicts[-1]


# --- a run begins -------------------------------------------------------------------------------


def test_a_run_begins_once_per_key_with_a_detector_of_its_own() -> None:
    """``begin`` makes one record per key (a thread in progress is found again)."""
    runs = engine()
    first = begun(runs, "a", per_thread=True)
    assert runs.begin("a", scope=THREAD) is first
    other = begun(runs, "b")
    assert other.detector is not first.detector
    assert (first.per_thread, other.per_thread) == (True, False)
    assert runs.find("a") is first


def test_restart_clears_the_detector_the_held_stop_and_the_nudges() -> None:
    """A run started afresh (a new run on a thread, or ``reset``) keeps nothing."""
    run = Run("r", GuardRuntime(LoopGuardConfig()).new_detector(), GuardRuntime())
    stop = stopped(run)
    run.hold(stop, "i1")
    run.nudged, run.last_nudge = 1, [stop.key, 3]
    run.restart()
    assert (run.detector.tripped, run.held, run.nudged, run.last_nudge) == (None, None, 0, None)
    assert run.decide(*READ).action == "allow"


# --- events are decided -------------------------------------------------------------------------


def test_events_are_decided_by_the_runs_own_detector() -> None:
    """Each run counts its own events: a loop in one run is not another's."""
    runs = engine()
    one, two = begun(runs, "one"), begun(runs, "two")
    assert stopped(one).signal is Signal.REPEATED_TOOL_CALL
    assert two.decide(*READ).action == "allow"


def test_a_failing_detector_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    """An event the detector cannot take is allowed and logged, never raised."""
    runs = engine()
    run = begun(runs, "r")
    assert run.decide("tool_call").action == "allow"  # no tool name: a TypeError inside
    assert "loop-guard internal error in tool_call (TypeError" in caplog.text


# --- a stop is nudged or kept -------------------------------------------------------------------


def test_settle_nudges_while_nudges_last_lifting_the_trip() -> None:
    """A nudge lifts the trip and keeps the history; it is counted and remembered."""
    run = begun(engine(), "r")
    stop = stopped(run)
    assert run.settle(stop, nudges=1) is None
    assert run.detector.tripped is None
    assert (run.nudged, run.last_nudge) == (1, [stop.key, 3])


def test_a_stop_after_a_nudge_counts_the_nudged_attempts() -> None:
    """The same loop right after its nudge stops at once, saying which attempt it was."""
    run = begun(engine(), "r")
    run.settle(stopped(run), nudges=1)
    again = run.decide(*READ)
    assert again.action == "block"
    stop = run.settle(again, nudges=1)
    assert stop is not None
    assert stop.count == 4
    assert "attempt 4" in stop.message


def test_settle_keeps_every_stop_without_nudges() -> None:
    """With no nudges, a stop is the run's stop as it was decided, its message naming what
    would have let the run go on (SPEC §13 C4)."""
    run = begun(engine(), "r")
    stop = stopped(run)
    settled = run.settle(stop, nudges=0)
    assert settled == run.stop_of(stop)
    assert settled.message.startswith(stop.message)
    assert "`tool_threshold_overrides`" in settled.message
    assert run.detector.tripped is not None


def test_a_refused_call_of_a_stopped_run_gives_the_stops_reason() -> None:
    """A call blocked because the run stopped earlier is settled as that stop."""
    run = begun(engine(), "r")
    stop = stopped(run)
    later = run.decide("tool_call", "other", {})
    assert later.tripped
    settled = run.settle(later, nudges=0)
    assert settled is not None
    assert (settled.signal, settled.tool, settled.action) == (stop.signal, "read", "block")


# --- a stop is held, and raised when due ---------------------------------------------------------


def test_a_held_stop_is_due_at_each_later_step_of_its_invocation_only() -> None:
    """Every later step of the invocation raises it (parallel siblings included); no other."""
    run = begun(engine(), "r")
    stop = stopped(run)
    run.hold(stop, "invocation-1")
    assert run.due("invocation-2") is None
    held = run.due("invocation-1")
    assert isinstance(held, Held)
    assert (held.verdict, held.raised) == (run.stop_of(stop), True)
    assert run.due("invocation-1") is held


def test_an_invocations_end_raises_a_held_stop_only_if_no_step_did() -> None:
    """``unraised``: the end of an invocation with no step after the stopped answer."""
    run = begun(engine(), "r")
    stop = stopped(run)
    run.hold(stop, "i")
    assert run.due("i", unraised=True) is not None
    assert run.due("i", unraised=True) is None
    run.hold(stop, "j")
    run.due("j")
    assert run.due("j", unraised=True) is None


# --- a human message releases a thread -----------------------------------------------------------


def test_a_new_human_message_releases_a_stopped_thread() -> None:
    """The first human message a run sees is remembered; a new one lifts the trip."""
    run = begun(engine(), "t", per_thread=True)
    stopped(run)
    assert run.human_message(None) is None
    assert run.human_message("h1") is None  # the first one seen: remembered only
    assert run.detector.tripped is not None
    assert run.human_message("h1") is None  # the same one again
    assert run.human_message("h2") is not None
    assert run.detector.tripped is None
    assert run.decide("tool_call", "read", {"path": "b.py"}).action == "allow"


# --- a run ends ---------------------------------------------------------------------------------


def test_a_run_ends_with_its_last_invocation_leaving_its_inspection() -> None:
    """An ended run is gone from the registry; ``inspect`` still shows it for a while."""
    runs = engine()
    run = begun(runs, "r")
    run.invocations.update({"i1": None, "i2": None})
    run.decide(*READ)
    assert runs.end(run, "i1") is False
    assert runs.end(run, "i2") is True
    assert "r" not in runs.runs
    assert runs.find("r") is None
    inspection = runs.inspect("r")
    assert inspection is not None
    assert inspection.calls == 1


def test_a_stopped_run_is_kept_a_while_after_its_end_for_late_events() -> None:
    """A late tool of a stopped run must be stopped too: its record stays findable."""
    runs = engine()
    run = begun(runs, "r")
    stopped(run)
    runs.end(run, "i")
    assert runs.find("r") is run
    assert runs.begin("r", scope=RUN) is not run  # a new run of that key starts afresh
    assert runs.find("r") is not run


def test_a_thread_outlives_its_invocations() -> None:
    """With ``scope="thread"`` the run is the thread's: an invocation's end keeps it."""
    runs = engine()
    run = begun(runs, "t", per_thread=True)
    run.invocations["i"] = None
    assert runs.end(run, "i") is False
    assert runs.runs["t"] is run
    runs.touch(run)
    assert runs.inspect(None) is not None  # the most recently active run


# --- the registry evicts ------------------------------------------------------------------------


def test_a_full_registry_forgets_the_least_recent_run_between_invocations(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Beyond capacity, the least recently active run with no invocation in flight goes."""
    runs = engine(capacity=2)
    forgotten: list[str] = []
    runs.forgotten = lambda run: forgotten.append(run.key)
    a = begun(runs, "a", per_thread=True)
    begun(runs, "b", per_thread=True)
    runs.touch(a)  # ``b`` is now the least recently active
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        assert runs.begin("c", scope=THREAD) is not None
    assert forgotten == ["b"]
    assert set(runs.runs) == {"a", "c"}
    assert "forgot run=b (between invocations) to make room (max_runs=2)" in caplog.text


def test_runs_in_flight_are_never_forgotten_unless_idle_and_beyond_four_times_shed() -> None:
    """A registry of runs in flight grows to four times its capacity, then sheds new runs."""
    runs = engine(capacity=1)
    clock = [1000.0]
    runs.now = lambda: clock[0]
    for key in "abcd":
        begun(runs, key).invocations["i"] = None
    assert runs.begin("e", scope=RUN) is None
    assert (len(runs.runs), runs.shed) == (4, 1)
    clock[0] += 301  # every run is idle now: the least recently active is forgotten
    assert runs.begin("e", scope=RUN) is not None
    assert set(runs.runs) == {"b", "c", "d", "e"}


def test_touching_a_run_that_ended_keeps_it_out_of_the_registry() -> None:
    """A stopped run's late event touches its record; the record stays ended."""
    runs = engine()
    run = begun(runs, "r")
    stopped(run)
    runs.end(run, "i")
    runs.touch(run)
    assert "r" not in runs.runs
    assert runs.last == "r"


def test_making_room_passes_over_a_busy_run_and_forgets_the_last_active_one_if_need_be() -> None:
    """A run in flight with recent events is passed over; a forgotten run is no longer the
    most recently active one."""
    runs = engine(capacity=2)
    begun(runs, "busy").invocations["i"] = None
    idle = begun(runs, "idle", per_thread=True)
    runs.touch(idle)
    assert runs.last == "idle"
    assert begun(runs, "new").key == "new"
    assert set(runs.runs) == {"busy", "new"}
    assert runs.last is None


def test_a_stop_on_another_loop_after_a_nudge_keeps_its_own_count() -> None:
    """Only the loop nudged last counts the nudged attempts."""
    run = begun(engine(), "r")
    run.settle(stopped(run), nudges=1)
    for _ in range(2):
        run.decide("tool_call", "write", {"path": "b.py"})
    other = run.decide("tool_call", "write", {"path": "b.py"})
    stop = run.settle(other, nudges=1)
    assert stop == run.stop_of(other)
    assert stop.count == 3


def test_shedding_is_logged_at_the_1st_2nd_4th_shed_run(caplog: pytest.LogCaptureFixture) -> None:
    """Loud, but not one line per run."""
    runs = engine(capacity=1)
    for key in "abcd":
        begun(runs, key).invocations["i"] = None
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        assert [runs.begin(key, scope=RUN) for key in "efgh"] == [None] * 4
    assert runs.shed == 4
    assert caplog.text.count("Raise max_runs.") == 3


def test_touch_and_inspect_of_the_most_recent_run() -> None:
    """Touching the most recent run again changes nothing; an empty registry inspects
    nothing."""
    runs = engine()
    assert runs.inspect(None) is None
    a, b = begun(runs, "a"), begun(runs, "b")
    runs.touch(a)
    runs.touch(a)
    assert list(runs.runs) == ["b", "a"]
    assert runs.inspect(None) is not None
    assert runs.inspect("b") is not None
    assert b.key == "b"


def test_configure_reaches_the_runs_and_off_forgets_them() -> None:
    """A new configuration is pushed to every run; ``"off"`` forgets them all."""
    runs = engine()
    run = begun(runs, "r")
    run.hold(stopped(run), "i")
    assert runs.configure(LoopGuardConfig(mode="on")) is False
    assert run.held is not None
    assert runs.configure(LoopGuardConfig(mode="observe")) is False
    assert (run.detector.config.mode, run.held) == ("observe", None)
    assert runs.configure(LoopGuardConfig(mode="off")) is True
    assert runs.runs == {}


def test_bounded_put_keeps_the_newest_entries() -> None:
    """The registries' one bounded insert: a re-inserted key becomes the newest."""
    bounded: dict[str, int] = {}
    for key in "abcab":
        bounded_put(bounded, key, ord(key), 2)
    assert list(bounded) == ["a", "b"]
    bounded_put(bounded, "c", 0, 2)
    assert list(bounded) == ["b", "c"]


@pytest.mark.slow
def test_the_engine_imports_no_host() -> None:
    """The life cycle imports nothing from LangChain or LangGraph (STYLE §1)."""
    probe = textwrap.dedent(
        """
        import sys
        from importlib.abc import MetaPathFinder

        class Blocker(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in {"langchain", "langchain_core", "langgraph"}:
                    raise ImportError(f"blocked: {name}")
                return None

        sys.meta_path.insert(0, Blocker())
        from langchain_loop_guard._integrations._engine import Run, RunEngine
        from langchain_loop_guard._integrations._runtime import GuardRuntime
        from langchain_loop_guard._core._scope import choose_scope
        guard = GuardRuntime({})
        runs = RunEngine(
            guard, Run, lambda: 4, scoped=guard._run_config, scope_seen=guard._scope_seen
        )
        run = runs.begin("r", scope=choose_scope("run", None, False))
        print([run.decide("tool_call", "read", {}).action for _ in range(3)])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['allow', 'allow', 'block']"
