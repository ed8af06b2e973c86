"""The pure loop detector, behaviour by behaviour (SPEC §1-§4)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal, Verdict
from langchain_loop_guard._core._detector import ALLOW, DetectorEvent, EventKind, reason
from langchain_loop_guard._core._reporting import MAX_REPORTED

if TYPE_CHECKING:
    from conftest import FakeClock

# --- scripting --------------------------------------------------------------------------------


def _letters(n: int) -> str:
    """``n`` spelled in letters: a word that no other ``n`` gives (numbers are masked)."""
    return "".join(chr(97 + int(digit)) for digit in str(n))


@dataclass(frozen=True)
class Call:
    """A tool call and its result: ``output``, or ``error`` when that is set."""

    name: str
    args: Any = None
    output: Any = "ok"
    error: Any = None


@dataclass(frozen=True)
class Say:
    """An assistant message, and the tool calls it makes."""

    text: str
    tool_calls: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Turn:
    """A model call begins."""


@dataclass(frozen=True)
class Round:
    """A whole model turn: the call begins, the model answers with ``calls``, each runs."""

    calls: tuple[Call, ...]


Step = Call | Say | Turn | Round


def detector(clock: Callable[[], float] | None = None, **values: Any) -> LoopDetector:
    return LoopDetector(LoopGuardConfig(**values), clock=clock)


def feed(d: LoopDetector, step: Step) -> Verdict:
    """Give ``d`` one step; its first verdict that is not ``allow``, else ``allow``.

    A tool call that is not stopped gets its result, as a tool node would deliver it.
    """
    if isinstance(step, Turn):
        return d.turn_start()
    if isinstance(step, Round):
        verdicts = [d.turn_start()]
        verdicts.append(d.assistant_message("", [(c.name, c.args) for c in step.calls]))
        verdicts.extend(feed(d, call) for call in step.calls)
        return next((v for v in verdicts if v.action != "allow"), ALLOW)
    if isinstance(step, Say):
        return d.assistant_message(step.text, step.tool_calls)
    verdict = d.tool_call(step.name, step.args)
    if verdict.stops:
        return verdict
    result = d.tool_result(step.name, step.output, error=step.error)
    return verdict if verdict.action != "allow" else result


def run(d: LoopDetector, steps: Sequence[Step]) -> list[Verdict]:
    return [feed(d, step) for step in steps]


def actions(verdicts: list[Verdict]) -> list[str]:
    return [v.action for v in verdicts]


def first_stop(verdicts: list[Verdict]) -> tuple[int, Verdict] | None:
    """The 1-based step at which the run stopped, and its verdict."""
    for number, verdict in enumerate(verdicts, start=1):
        if verdict.stops:
            return number, verdict
    return None


def same(name: str, output: Any = "same result") -> Call:
    return Call(name, {"path": "a.ts"}, output)


def calls_of(names: str, output: Any = "same result") -> list[Step]:
    """One call per letter, each tool with fixed arguments and ``output``."""
    return [Call(name, {}, output) for name in names]


# --- threshold edges ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Loop:
    """A looping script: its i-th step, the step (1-based) that must stop it, and the limit."""

    signal: Signal
    step: Callable[[int], Step]
    at: int
    threshold: int
    config: dict[str, Any] = field(default_factory=dict)
    action: str = "block"
    """``"block"`` (decided on the call), ``"abort"`` (on a result, a response or a turn)."""

    def steps(self, count: int) -> list[Step]:
        return [self.step(i) for i in range(count)]


def _repeat(i: int) -> Step:
    return same("read")


def _cycle2(i: int) -> Step:
    return Call("ab"[i % 2], {}, "same")


def _cycle3(i: int) -> Step:
    return Call("abc"[i % 3], {}, "same")


def _cycle4(i: int) -> Step:
    return Call("abcd"[i % 4], {}, "same")


def _spread(i: int) -> Step:
    """read, then a different write, then read again: only the window sees it."""
    return same("read") if i % 2 == 0 else Call("write", {"n": i}, "ok")


def _error(i: int) -> Step:
    return Call("run", {"script": i}, error=f"SyntaxError at line {i + 10}")


def _say(i: int) -> Step:
    return Say("I cannot do that.")


_NO_SEQUENCE: dict[str, Any] = {"max_sequence_length": 0}
_NO_OTHERS: dict[str, Any] = {"no_progress_calls": 0, "repeat_frequency_threshold": 5}


def _rotating(i: int) -> Step:
    """search, open one of three files in turn, search_file, scroll: the same lap (R5)."""
    position = i % 4
    if position == 1:
        return Call("open", {"path": f"f{(i // 4) % 3}.py"}, f"file {(i // 4) % 3}")
    return Call(["search", "open", "search_file", "scroll"][position], {}, "same")


def _growing(i: int) -> Step:
    """The same edit applied again: the file view (20 lines and more) grows by its block each
    time (R1')."""
    body = "\n".join(f"{n}: line {_letters(n)} of the module" for n in range(1, 21))
    block = "\n".join(f"{n}: value = compute(x)" for n in range(21, i + 22))
    return Call(
        "edit",
        {"line": 1, "text": "value = compute(x)"},
        f"[File: a.py ({i + 21} lines)]\n{body}\n{block}",
    )


def _no_match(i: int) -> Step:
    """A search for a new name each time, and nothing found (R6)."""
    return Call("find_file", {"name": f"Name{i}*"}, f'No matches found for "Name{i}*" in /repo')


def _failing_turn(i: int) -> Step:
    """A turn whose only call fails with one of two errors, over two tools in turn (R3; a
    failure the run has not seen is a test of its work, SPEC §14 N15, so a run whose every
    turn fails another way is no loop)."""
    tool = ("run", "exec")[i // 2 % 2]
    return Round((Call(tool, {"n": i}, error=f"ValueError: no {_letters(i % 2)}"),))


LOOPS = [
    pytest.param(Loop(Signal.REPEATED_TOOL_CALL, _repeat, 3, 3), id="repeat-default"),
    pytest.param(
        Loop(Signal.REPEATED_TOOL_CALL, _repeat, 5, 5, {"repeat_tool_threshold": 5}),
        id="repeat-repeat_tool_threshold=5",
    ),
    pytest.param(
        Loop(Signal.REPEATED_TOOL_CALL, _repeat, 4, 4, {"tool_threshold_overrides": {"read": 4}}),
        id="repeat-override=4",
    ),
    pytest.param(
        Loop(Signal.REPEATED_TOOL_CALL, _repeat, 2, 2, {"tool_threshold_overrides": {"read": 2}}),
        id="repeat-override=2",
    ),
    pytest.param(
        Loop(Signal.REPEATED_TOOL_CALL, _repeat, 3, 3, {"tool_threshold_overrides": {"x": 6}}),
        id="repeat-override-of-another-tool",
    ),
    pytest.param(Loop(Signal.TOOL_CYCLE, _cycle2, 6, 3), id="cycle2-default"),
    pytest.param(Loop(Signal.TOOL_CYCLE, _cycle3, 9, 3), id="cycle3-default"),
    pytest.param(
        Loop(
            Signal.TOOL_CYCLE,
            _cycle2,
            8,
            4,
            {"cycle_repeats": 4, "repeat_frequency_threshold": 5},
        ),
        id="cycle2-cycle_repeats=4",
    ),
    pytest.param(
        Loop(
            Signal.TOOL_CYCLE,
            _cycle3,
            12,
            4,
            {"cycle_repeats": 4, "repeat_frequency_threshold": 5, "no_progress_calls": 0},
        ),
        id="cycle3-cycle_repeats=4",
    ),
    pytest.param(
        Loop(Signal.TOOL_CYCLE, _cycle4, 12, 3, {"max_cycle_length": 4, "no_progress_calls": 0}),
        id="cycle4-max_cycle_length=4",
    ),
    # A repeat made after a different call succeeded is decided on its result (SPEC §11 N1).
    pytest.param(Loop(Signal.TOOL_FREQUENCY, _spread, 7, 4, action="abort"), id="window-default"),
    pytest.param(
        Loop(Signal.TOOL_FREQUENCY, _spread, 9, 5, {"repeat_frequency_threshold": 5}, "abort"),
        id="window-repeat_frequency_threshold=5",
    ),
    pytest.param(
        Loop(Signal.TOOL_FREQUENCY, _spread, 9, 5, {"repeat_tool_threshold": 5}, "abort"),
        id="window-repeat_tool_threshold=5",
    ),
    pytest.param(
        Loop(
            Signal.TOOL_FREQUENCY,
            _spread,
            11,
            6,
            {"tool_threshold_overrides": {"read": 6}, "frequency_window_size": 12},
            "abort",
        ),
        id="window-override=6",
    ),
    # A 4-call cycle is a repeated sequence first (SPEC §11 R5); without that signal, no
    # progress sees it, on the results of its calls (N1).
    pytest.param(Loop(Signal.REPEATED_SEQUENCE, _cycle4, 12, 3), id="sequence-default"),
    pytest.param(
        Loop(Signal.REPEATED_SEQUENCE, _cycle4, 16, 4, {"cycle_repeats": 4, **_NO_OTHERS}),
        id="sequence-cycle_repeats=4",
    ),
    pytest.param(
        Loop(Signal.REPEATED_SEQUENCE, _rotating, 12, 3), id="sequence-with-a-rotating-call"
    ),
    pytest.param(
        Loop(Signal.NO_PROGRESS, _cycle4, 12, 8, _NO_SEQUENCE, "abort"), id="no-progress-default"
    ),
    pytest.param(
        Loop(
            Signal.NO_PROGRESS, _cycle4, 14, 10, {"no_progress_calls": 10, **_NO_SEQUENCE}, "abort"
        ),
        id="no-progress-no_progress_calls=10",
    ),
    pytest.param(
        Loop(
            Signal.NO_PROGRESS,
            _cycle4,
            13,
            9,
            {"tool_threshold_overrides": {"a": 9}, **_NO_SEQUENCE},
            "abort",
        ),
        id="no-progress-override=9",
    ),
    pytest.param(
        Loop(
            Signal.NO_PROGRESS,
            _cycle4,
            24,
            20,
            {"tool_threshold_overrides": {"d": 20}, **_NO_SEQUENCE},
            "abort",
        ),
        id="no-progress-poller-override=20",
    ),
    pytest.param(Loop(Signal.NEAR_REPEAT, _growing, 4, 4), id="near-default"),
    pytest.param(
        Loop(Signal.NEAR_REPEAT, _growing, 6, 6, {"near_repeat_threshold": 6}),
        id="near-near_repeat_threshold=6",
    ),
    pytest.param(
        Loop(Signal.NEAR_REPEAT, _growing, 8, 8, {"tool_threshold_overrides": {"edit": 8}}),
        id="near-override=8",
    ),
    pytest.param(
        Loop(Signal.NO_NEW_INFO, _no_match, 10, 10, action="abort"), id="no-new-info-default"
    ),
    pytest.param(
        Loop(Signal.NO_NEW_INFO, _no_match, 4, 4, {"no_new_info_calls": 4}, "abort"),
        id="no-new-info-no_new_info_calls=4",
    ),
    pytest.param(
        Loop(Signal.FAILING_TURNS, _failing_turn, 6, 6, action="abort"), id="failing-turns-default"
    ),
    pytest.param(
        Loop(Signal.FAILING_TURNS, _failing_turn, 4, 4, {"failing_turns": 4}, "abort"),
        id="failing-turns-failing_turns=4",
    ),
    pytest.param(Loop(Signal.REPEATED_TOOL_ERROR, _error, 3, 3), id="error-default"),
    pytest.param(
        Loop(Signal.REPEATED_TOOL_ERROR, _error, 5, 5, {"repeat_error_threshold": 5}),
        id="error-repeat_error_threshold=5",
    ),
    pytest.param(Loop(Signal.REPEATED_ASSISTANT_RESPONSE, _say, 3, 3), id="assistant-default"),
    pytest.param(
        Loop(Signal.REPEATED_ASSISTANT_RESPONSE, _say, 4, 4, {"repeat_assistant_threshold": 4}),
        id="assistant-repeat_assistant_threshold=4",
    ),
]


@pytest.mark.parametrize("loop", LOOPS)
def test_loop_below_threshold_is_allowed(loop: Loop) -> None:
    """Threshold - 1: every step of the loop is allowed."""
    d = detector(**loop.config)
    assert actions(run(d, loop.steps(loop.at - 1))) == ["allow"] * (loop.at - 1)


@pytest.mark.parametrize("loop", LOOPS)
def test_loop_at_threshold_stops_the_run(loop: Loop) -> None:
    """Threshold: the step that reaches it stops the run with the loop's signal and limit."""
    d = detector(**loop.config)
    verdict = run(d, loop.steps(loop.at))[-1]
    aborts = {Signal.REPEATED_TOOL_ERROR, Signal.REPEATED_ASSISTANT_RESPONSE}
    expected = "abort" if loop.signal in aborts else loop.action
    assert (verdict.action, verdict.signal) == (expected, loop.signal)
    assert (verdict.count, verdict.threshold) == (loop.threshold, loop.threshold)
    assert verdict.tripped is False
    assert d.tripped == verdict


@pytest.mark.parametrize("loop", LOOPS)
def test_loop_above_threshold_finds_the_run_tripped(loop: Loop) -> None:
    """Threshold + 1: the run is tripped: tool calls blocked, turns aborted, messages allowed."""
    d = detector(**loop.config)
    stop = run(d, loop.steps(loop.at))[-1]
    following = loop.step(loop.at)
    verdict = feed(d, following)
    if isinstance(following, Round):  # its model call is aborted first
        assert (verdict.action, verdict.signal, verdict.tripped) == ("abort", stop.signal, True)
    elif isinstance(following, Call):
        assert (verdict.action, verdict.signal, verdict.tripped) == ("block", stop.signal, True)
    else:
        assert verdict == ALLOW
    turn = d.turn_start()
    assert (turn.action, turn.signal, turn.tripped) == ("abort", stop.signal, True)


@pytest.mark.parametrize("loop", LOOPS)
def test_loop_in_observe_mode_is_reported_at_threshold_and_not_again(loop: Loop) -> None:
    """Observe mode: below, nothing; at the threshold, one observation; above, nothing new."""
    d = detector(mode="observe", **loop.config)
    verdicts = run(d, loop.steps(loop.at + 1))
    assert actions(verdicts) == ["allow"] * (loop.at - 1) + ["observe", "allow"]
    assert verdicts[-2].signal is loop.signal
    assert d.tripped is None


# --- repeated tool call -------------------------------------------------------------------------


def test_repeat_is_a_repeat_not_a_cycle() -> None:
    """A A A stops as a repeated call, never as a cycle."""
    stop = first_stop(run(detector(), [same("read")] * 3))
    assert stop is not None
    assert stop[1].signal is Signal.REPEATED_TOOL_CALL


def test_one_call_repeated_is_never_a_cycle() -> None:
    """With the repeat and window signals loosened, A A A … still never counts as a cycle."""
    d = detector(
        tool_threshold_overrides={"read": 20},
        repeat_frequency_threshold=20,
        frequency_window_size=20,
        no_progress_calls=0,
    )
    assert actions(run(d, [same("read")] * 19)) == ["allow"] * 19


def test_another_call_breaks_a_repeat_streak() -> None:
    """A A B A A is no repeat; the third A in a row is."""
    d = detector(repeat_frequency_threshold=10)
    assert actions(run(d, calls_of("aabaa"))) == ["allow"] * 5
    assert feed(d, Call("a", {}, "same result")).signal is Signal.REPEATED_TOOL_CALL


def test_other_arguments_break_a_repeat_streak() -> None:
    """read(a.ts) read(a.ts) read(b.ts) read(a.ts): the signature includes the arguments."""
    d = detector()
    steps: list[Step] = [same("read"), same("read"), Call("read", {"path": "b.ts"}), same("read")]
    assert actions(run(d, steps)) == ["allow"] * 4


def test_raising_the_repeat_threshold_lets_four_identical_calls_through() -> None:
    """repeat_tool_threshold=5 raises the window threshold too: the fifth call is the repeat."""
    verdicts = run(detector(repeat_tool_threshold=5), [same("read")] * 5)
    assert actions(verdicts) == ["allow"] * 4 + ["block"]
    assert verdicts[-1].signal is Signal.REPEATED_TOOL_CALL


# --- cycles -------------------------------------------------------------------------------------


def test_cycle_verdict_names_each_tool_of_its_pattern() -> None:
    """A B C A B C A B C stops naming the pattern's tools, ending with the current call."""
    stop = first_stop(run(detector(), calls_of("abc" * 3)))
    assert stop is not None
    assert stop[0] == 9
    assert (stop[1].tool, stop[1].tools) == ("c", ("a", "b", "c"))


def test_shorter_cycles_are_checked_first() -> None:
    """A B A B … is reported as the cycle A B, never as the longer A B A B."""
    d = detector(mode="observe", cycle_repeats=2, max_cycle_length=4, no_progress_calls=0)
    verdicts = run(d, calls_of("ab" * 6))
    assert [(v.signal, v.tools) for v in verdicts if v.action == "observe"] == [
        (Signal.TOOL_CYCLE, ("a", "b"))
    ]


@pytest.mark.parametrize(
    ("progress_aware", "stops_at"),
    [pytest.param(True, None, id="progress-aware"), pytest.param(False, 6, id="call-only")],
)
def test_cycle_whose_results_change_is_no_cycle(progress_aware: bool, stops_at: int | None) -> None:
    """check, wait, check, wait, …: a cycle only if each position kept returning the same."""
    steps: list[Step] = []
    for status in ["Queued", "Running", "Done"]:
        steps += [same("check", status), Call("wait", {"s": 5}, "waited")]
    stop = first_stop(run(detector(progress_aware=progress_aware), steps))
    assert (stop[0] if stop else None) == stops_at
    assert stop is None or stop[1].signal is Signal.TOOL_CYCLE


def test_broken_cycle_is_no_cycle() -> None:
    """A B A C A B is no cycle of length 2 or 3."""
    assert actions(run(detector(), calls_of("abacab"))) == ["allow"] * 6


def test_cycle_longer_than_max_cycle_length_is_no_cycle() -> None:
    """A B C D, three times, slips under the cycle signal (with no-progress and repeated
    sequences off, under all)."""
    d = detector(no_progress_calls=0, max_sequence_length=0)
    assert actions(run(d, calls_of("abcd" * 3))) == ["allow"] * 12


# --- window frequency ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last", "stops"),
    [
        pytest.param(10, True, id="first-read-is-the-10th-call-back"),
        pytest.param(11, False, id="first-read-is-the-11th-call-back"),
    ],
)
def test_window_is_the_last_frequency_window_size_calls_counting_the_current_one(
    last: int, stops: bool
) -> None:
    """Four reads in the last 10 calls stop; when the first is 11 calls back, they do not."""
    fillers: list[Step] = [Call("write", {"n": n}) for n in range(last - 4)]
    steps: list[Step] = [same("read"), *fillers[:-2], same("read"), fillers[-2], same("read")]
    steps += [fillers[-1], same("read")]
    assert len(steps) == last
    verdicts = run(detector(), steps)
    assert actions(verdicts[:-1]) == ["allow"] * (last - 1)
    assert (verdicts[-1].signal is Signal.TOOL_FREQUENCY) is stops


def test_window_threshold_is_never_below_the_repeat_threshold() -> None:
    """The window threshold of a tool is max(repeat_frequency_threshold, its repeat threshold)."""
    d = detector(repeat_frequency_threshold=4, tool_threshold_overrides={"poll": 7})
    assert (d.repeat_threshold("read"), d.window_threshold("read")) == (3, 4)
    assert (d.repeat_threshold("poll"), d.window_threshold("poll")) == (7, 7)


def test_tool_whose_threshold_exceeds_the_window_is_never_stopped_by_the_window() -> None:
    """A poller loosened to 11 with a window of 10: polls between other calls never stop.

    (Near repeats, off here, count such polls over a span of their own, SPEC §11 R1.)
    """
    d = detector(tool_threshold_overrides={"poll": 11}, near_repeat_threshold=0)
    steps: list[Step] = []
    for n in range(30):
        steps += [same("poll", "Pending"), Call("log", {"n": n})]
    assert actions(run(d, steps)) == ["allow"] * 60


# --- no progress --------------------------------------------------------------------------------


def test_long_cycle_with_identical_outcomes_slips_under_the_other_signals() -> None:
    """A B C D … never reaches the repeat, cycle or window signals: only no-progress stops it
    (and the repeated-sequence signal of SPEC §11 R5, off here, which comes first)."""
    off = {"max_sequence_length": 0, "near_repeat_threshold": 0}
    assert first_stop(run(detector(no_progress_calls=0, **off), calls_of("abcd" * 10))) is None
    stop = first_stop(run(detector(**off), calls_of("abcd" * 10)))
    assert stop is not None
    assert (stop[0], stop[1].signal, stop[1].tools) == (
        12,
        Signal.NO_PROGRESS,
        ("a", "b", "c", "d"),
    )


def test_long_cycle_with_changing_outcomes_makes_progress() -> None:
    """A B C D … whose results change every time is never stopped."""
    steps: list[Step] = [Call(name, {}, f"result {n}") for n, name in enumerate("abcd" * 10)]
    assert first_stop(run(detector(), steps)) is None


def test_no_progress_threshold_is_never_below_the_repeat_threshold_of_a_tool_in_the_streak() -> (
    None
):
    """A poller loosened to 20 is not cut at 8 by the no-progress signal."""
    d = detector(tool_threshold_overrides={"d": 20}, max_sequence_length=0)
    stop = first_stop(run(d, calls_of("abcd" * 10)))
    assert stop is not None
    assert (stop[0], stop[1].signal, stop[1].threshold) == (24, Signal.NO_PROGRESS, 20)


@pytest.mark.parametrize(
    ("period", "stops_at"),
    [
        pytest.param(10, 18, id="previous-read-within-the-window"),
        pytest.param(13, None, id="previous-read-beyond-the-window"),
        # a third walk through the same files, each read the same: a repeated sequence (up to
        # twice max_sequence_length calls; SPEC §11 R5)
        pytest.param(11, 23, id="third-walk-through-11-files"),
        pytest.param(12, 25, id="third-walk-through-12-files"),
    ],
)
def test_rereading_beyond_the_window_is_not_a_repeat(period: int, stops_at: int | None) -> None:
    """Reading files again after a summary repeats only if the earlier read is in the window,
    or when the same walk through the files is begun a third time."""
    reads: list[Step] = [Call("read", {"path": f"f{n}.py"}, f"file {n}") for n in range(period)]
    stop = first_stop(run(detector(), reads * 3))
    assert (stop[0] if stop else None) == stops_at


def test_rereads_beyond_the_window_do_not_join_a_later_streak() -> None:
    """Files read again after 11 calls, then one read repeated: a streak of one, not twelve."""
    reads: list[Step] = [Call("read", {"path": f"f{n}.py"}, f"file {n}") for n in range(11)]
    assert first_stop(run(detector(), [*reads, *reads, reads[-1]])) is None


def test_no_progress_calls_zero_turns_the_signal_off() -> None:
    """no_progress_calls=0: A B C D … runs on (with repeated sequences off too)."""
    d = detector(no_progress_calls=0, max_sequence_length=0, near_repeat_threshold=0)
    assert first_stop(run(d, calls_of("abcd" * 10))) is None


def test_no_progress_needs_progress_awareness() -> None:
    """progress_aware=False: the seed's call-only rules, without the no-progress signal."""
    assert first_stop(run(detector(progress_aware=False), calls_of("abcd" * 10))) is None


def test_call_that_repeats_nothing_breaks_a_no_progress_streak() -> None:
    """A new call in A B C D … restarts the streak."""
    before, after = calls_of("abcd" * 2 + "abc"), calls_of("dabcdab")
    assert first_stop(run(detector(), before + after)) is not None
    assert first_stop(run(detector(), [*before, Call("new", {}), *after])) is None


# --- signal order -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "steps", "signal"),
    [
        pytest.param(
            {"repeat_frequency_threshold": 3},
            calls_of("aaa"),
            Signal.REPEATED_TOOL_CALL,
            id="repeat-before-window",
        ),
        pytest.param(
            {"repeat_frequency_threshold": 3, "tool_threshold_overrides": {"a": 4}},
            calls_of("ababab"),
            Signal.TOOL_CYCLE,
            id="cycle-before-window",
        ),
        pytest.param(
            {"repeat_frequency_threshold": 3, "no_progress_calls": 4, "cycle_repeats": 10},
            calls_of("abcabca"),
            Signal.TOOL_FREQUENCY,
            id="window-before-no-progress",
        ),
    ],
)
def test_first_signal_in_table_order_is_reported(
    config: dict[str, Any], steps: list[Step], signal: Signal
) -> None:
    """When several signals fire on one event, the first of SPEC §2's table is reported.

    (A repeat made after another call succeeded is decided on its result, SPEC §11 N1: the
    last step stops with a block or, on its result, an abort.)
    """
    verdicts = run(detector(**config), steps)
    assert [v.stops for v in verdicts] == [False] * (len(steps) - 1) + [True]
    assert verdicts[-1].signal is signal


@pytest.mark.parametrize(
    ("config", "steps", "signal"),
    [
        pytest.param(
            {"repeat_frequency_threshold": 3},
            calls_of("abaa"),
            Signal.TOOL_FREQUENCY,
            id="window-alone",
        ),
        pytest.param(
            {
                "repeat_frequency_threshold": 3,
                "tool_threshold_overrides": {"a": 4},
                "cycle_repeats": 4,
            },
            calls_of("ababab"),
            Signal.TOOL_FREQUENCY,
            id="window-alone-without-the-cycle",
        ),
        pytest.param(
            {"repeat_frequency_threshold": 4, "no_progress_calls": 4, "cycle_repeats": 10},
            calls_of("abcabca"),
            Signal.NO_PROGRESS,
            id="no-progress-alone",
        ),
    ],
)
def test_second_signal_fires_on_its_own(
    config: dict[str, Any], steps: list[Step], signal: Signal
) -> None:
    """Each pair above really fires both: without the first signal, the second stops the run."""
    verdicts = run(detector(**config), steps)
    assert [v.stops for v in verdicts] == [False] * (len(steps) - 1) + [True]
    assert verdicts[-1].signal is signal


# --- repeated tool error ------------------------------------------------------------------------


def test_errors_differing_only_in_numbers_share_a_key() -> None:
    """`line 12` and `line 14` are the same error: the third stops the run."""
    steps: list[Step] = [
        Call("run", {"n": n}, error=f"SyntaxError at line {line}")
        for n, line in enumerate((12, 14, 16))
    ]
    verdicts = run(detector(), steps)
    assert actions(verdicts) == ["allow", "allow", "abort"]
    assert (verdicts[-1].signal, verdicts[-1].tool) == (Signal.REPEATED_TOOL_ERROR, "run")


def test_exception_errors_count_like_text_errors() -> None:
    """An exception's type and message make its key."""
    steps: list[Step] = [Call("run", {"n": n}, error=ValueError(f"bad row {n}")) for n in range(3)]
    assert actions(run(detector(), steps)) == ["allow", "allow", "abort"]


def test_any_success_clears_the_error_streak() -> None:
    """error, error, success, error, error: no stop; the next error does (the window's count
    of one error, SPEC §12 R4', loosened out of the way)."""
    err = [Call("run", {"n": n}, error="boom") for n in range(5)]
    ok = Call("other", {}, "fine")
    d = detector(repeat_frequency_threshold=10)
    assert actions(run(d, [err[0], err[1], ok, err[2], err[3]])) == ["allow"] * 5
    assert feed(d, err[4]).signal is Signal.REPEATED_TOOL_ERROR


def test_a_different_error_resets_the_error_streak() -> None:
    """boom, boom, crash, boom, boom: no stop in a row (the window's count of one error,
    SPEC §12 R4', loosened out of the way)."""
    steps: list[Step] = [
        Call("run", {"n": n}, error=text)
        for n, text in enumerate(["boom", "boom", "crash", "boom", "boom"])
    ]
    assert first_stop(run(detector(repeat_frequency_threshold=10), steps)) is None


def test_the_same_error_text_from_another_tool_is_another_error() -> None:
    """The error key includes the tool name."""
    steps: list[Step] = [Call(name, {}, error="boom") for name in "abab"]
    assert first_stop(run(detector(cycle_repeats=5), steps)) is None


def test_calls_that_never_reach_a_tool_count_as_calls_with_an_error() -> None:
    """The "$26 loop": the model calls a tool that does not exist, again and again."""
    missing = Call("web_search", {"q": "x"}, error="Error: web_search is not a valid tool")
    verdicts = run(detector(), [missing] * 3)
    assert actions(verdicts) == ["allow", "allow", "block"]
    assert verdicts[-1].signal is Signal.REPEATED_TOOL_CALL


# --- repeated assistant response ----------------------------------------------------------------


def test_assistant_text_is_compared_trimmed_and_whitespace_collapsed() -> None:
    """Trimmed, with whitespace collapsed, "Done." and "  Done.\\n" are one response."""
    steps: list[Step] = [Say("Done."), Say("  Done.\n"), Say("Done. ")]
    verdicts = run(detector(), steps)
    assert actions(verdicts) == ["allow", "allow", "abort"]
    assert verdicts[-1].signal is Signal.REPEATED_ASSISTANT_RESPONSE


def test_empty_assistant_text_neither_counts_nor_breaks_the_streak() -> None:
    """Done, "", "  ", Done, Done: the fifth message stops the run."""
    steps: list[Step] = [Say("Done."), Say(""), Say("  \n"), Say("Done."), Say("Done.")]
    assert actions(run(detector(), steps)) == ["allow"] * 4 + ["abort"]


def test_a_different_response_breaks_the_assistant_streak() -> None:
    """Done, Done, Working, Done: no stop."""
    steps: list[Step] = [Say("Done."), Say("Done."), Say("Working."), Say("Done.")]
    assert first_stop(run(detector(), steps)) is None


def test_message_with_tool_calls_is_left_to_the_tool_signals() -> None:
    """With progress awareness, a narrated poller is never stopped for saying the same thing.

    (Its percentages are numbers only: past the near-repeat limit, SPEC §11 R1, a poller needs
    its override, as here.)
    """
    d = detector(tool_threshold_overrides={"poll": 20})
    steps: list[Step] = []
    for percent in range(0, 100, 10):
        steps += [Say("Checking again.", (("poll", {"job": 1}),)), same("poll", f"{percent}%")]
    assert first_stop(run(d, steps)) is None


def test_message_with_tool_calls_does_not_break_the_assistant_streak() -> None:
    """Done, (tool call), Done, Done: the fourth message stops the run."""
    steps: list[Step] = [
        Say("Done."),
        Say("Let me check.", (("read", {}),)),
        Say("Done."),
        Say("Done."),
    ]
    assert actions(run(detector(), steps)) == ["allow"] * 3 + ["abort"]


def test_tool_calls_given_as_any_iterable_are_counted() -> None:
    """A message's tool calls may come as a generator: they count as a list of them does."""
    d = detector()
    assert not d.assistant_message("Done.", iter([])).stops  # no call: a reply
    assert not d.assistant_message("Done.", (call for call in [("read", {})])).stops
    assert not d.assistant_message("Done.", iter([])).stops
    assert d.assistant_message("Done.", iter([])).stops  # the third reply in a row


def test_without_progress_awareness_every_message_with_text_counts() -> None:
    """progress_aware=False: "Checking again." three times stops, tool calls or not."""
    say = Say("Checking again.", (("poll", {"job": 1}),))
    assert actions(run(detector(progress_aware=False), [say] * 3)) == ["allow", "allow", "abort"]


def test_tool_events_between_messages_do_not_break_the_assistant_streak() -> None:
    """Done, a call that fails, Done, a call that fails, Done: the third stops (the calls
    between brought nothing new)."""
    steps: list[Step] = [
        Say("Done."),
        Call("a", {"n": 1}, error="ValueError: no"),
        Say("Done."),
        Call("b", {}, error="ValueError: no"),
        Say("Done."),
    ]
    assert actions(run(detector(), steps))[-1] == "abort"


def test_a_reply_after_new_information_from_a_tool_starts_a_new_streak() -> None:
    """SPEC §13 N12: "Done." after each lookup that brought something new is work reported
    in a template, never a repeated response, however often."""
    steps: list[Step] = []
    for n in range(6):
        steps += [Say("Done."), Call("lookup", {"id": n}, f'{{"id": {n}, "status": "shipped"}}')]
    steps.append(Say("Done."))
    assert actions(run(detector(), steps)) == ["allow"] * len(steps)


# --- ignore_tools -------------------------------------------------------------------------------


def test_ignored_tool_never_stops() -> None:
    """Twenty identical sleeps: invisible."""
    d = detector(ignore_tools=["sleep"])
    assert first_stop(run(d, [same("sleep")] * 20)) is None
    assert d.snapshot().calls == 0


@pytest.mark.parametrize(
    ("ignore", "stops_at"),
    [pytest.param([], None, id="sleep-visible"), pytest.param(["sleep"], 5, id="sleep-ignored")],
)
def test_ignored_tool_does_not_break_a_streak(ignore: list[str], stops_at: int | None) -> None:
    """poll sleep poll sleep poll: with sleep ignored it is poll poll poll, a repeat."""
    steps: list[Step] = [same("poll", "Pending"), Call("sleep", {"s": 5}, "slept")] * 3
    stop = first_stop(run(detector(ignore_tools=ignore), steps[:5]))
    assert (stop[0] if stop else None) == stops_at


def test_ignored_tool_results_are_invisible_to_the_error_streak() -> None:
    """An ignored tool's success does not clear the streak, nor its error break it."""
    err = Call("run", {}, error="boom")
    d = detector(ignore_tools=["sleep"], repeat_tool_threshold=10, repeat_frequency_threshold=10)
    steps: list[Step] = [err, Call("sleep", {}, "ok"), err, Call("sleep", {}, error="other"), err]
    assert actions(run(d, steps))[-1] == "abort"


# --- the tripped latch --------------------------------------------------------------------------


@pytest.fixture
def tripped() -> LoopDetector:
    d = detector(ignore_tools=["sleep"])
    run(d, [same("read")] * 3)
    assert d.tripped is not None
    return d


def test_tripped_run_blocks_every_tool_call(tripped: LoopDetector) -> None:
    """Any later tool call is blocked, whatever the tool or arguments."""
    verdict = tripped.tool_call("write", {"path": "new.txt"})
    assert (verdict.action, verdict.tripped, verdict.tool) == ("block", True, "write")
    assert verdict.signal is Signal.REPEATED_TOOL_CALL


def test_tripped_run_blocks_ignored_tools_too(tripped: LoopDetector) -> None:
    """ignore_tools does not exempt a call from a stopped run."""
    calls = tripped.snapshot().calls
    verdict = tripped.tool_call("sleep", {"s": 1})
    assert (verdict.action, verdict.tripped) == ("block", True)
    assert tripped.snapshot().calls == calls  # still invisible to the history


def test_tripped_run_aborts_every_model_call(tripped: LoopDetector) -> None:
    """A model turn of a stopped run is aborted before it is paid for."""
    verdict = tripped.turn_start()
    assert (verdict.action, verdict.tripped, verdict.signal) == (
        "abort",
        True,
        Signal.REPEATED_TOOL_CALL,
    )


def test_tripped_run_allows_results_messages_and_ticks(tripped: LoopDetector) -> None:
    """Results still arriving, messages and ticks of a stopped run are allowed."""
    assert tripped.tool_result("read", "late") == ALLOW
    assert tripped.tool_result("run", error="boom") == ALLOW
    assert tripped.assistant_message("I was stopped.") == ALLOW
    assert tripped.tick() == ALLOW


def test_tripped_run_gets_no_more_warnings(clock: FakeClock) -> None:
    """A stopped run is over: soft limits passed after the stop warn nothing."""
    d = detector(clock=clock, max_turns=1)
    run(d, [same("read")] * 3)
    clock.advance(1_000)
    assert [d.tick(), d.assistant_message("hi"), d.tool_result("read", "x")] == [ALLOW] * 3


def test_tripped_message_names_the_original_signal(tripped: LoopDetector) -> None:
    """A refused call's message says the run was already stopped, and why: the signal and
    the stop's own reason (SPEC §14: "already stopped" alone is not enough)."""
    message = tripped.tool_call("read").message
    assert "already stopped (repeated_tool_call)" in message
    assert "`read` was called 3 times in a row with the same arguments" in message


def test_reset_clears_the_trip_and_the_history(tripped: LoopDetector) -> None:
    """After reset, the run starts afresh: the same call is allowed again."""
    assert tripped.reset() == ALLOW
    assert tripped.tripped is None
    assert actions(run(tripped, [same("read")] * 2)) == ["allow", "allow"]


def test_release_lifts_the_trip(tripped: LoopDetector) -> None:
    """After release, the run goes on: another call and a model turn are allowed."""
    tripped.release()
    assert tripped.tripped is None
    assert tripped.tool_call("other", {}) == ALLOW
    assert tripped.turn_start() == ALLOW


def test_release_keeps_the_history(tripped: LoopDetector) -> None:
    """After release, the same repeat is detected again at once, as a new detection."""
    tripped.release()
    verdict = feed(tripped, same("read"))
    assert (verdict.action, verdict.signal, verdict.count, verdict.tripped) == (
        "block",
        Signal.REPEATED_TOOL_CALL,
        3,
        False,
    )
    assert tripped.tripped == verdict


def test_blocked_call_stays_in_the_history_without_an_outcome() -> None:
    """The call that tripped the run, and every call refused after, have no outcome."""
    d = detector()
    run(d, [same("read")] * 3)
    d.tool_call("write", {}, call_id="w1")
    d.tool_result("write", "written anyway", call_id="w1")
    assert [c.outcome for c in d.snapshot().recent] == ["ok", "ok", "blocked", "blocked"]
    assert [c[2] for c in d.export_state()["calls"][-2:]] == [None, None]


def test_result_for_a_blocked_call_is_no_tool_error() -> None:
    """An integration answering a call it blocked does not feed the error streak."""
    d = detector()
    run(d, [same("read")] * 2)
    assert d.tool_call("read", {"path": "a.ts"}, call_id="blocked").stops
    d.release()
    run(d, [Call("run", {"n": n}, error="boom") for n in range(2)])
    assert d.tool_result("run", error="boom", call_id="blocked") == ALLOW
    assert feed(d, Call("run", {"n": 2}, error="boom")).signal is Signal.REPEATED_TOOL_ERROR


# --- observe and off ----------------------------------------------------------------------------


def test_observe_mode_never_blocks_or_stops() -> None:
    """Every kind of loop in observe mode: the run goes on."""
    d = detector(mode="observe")
    steps: list[Step] = [
        *[same("read")] * 5,
        *calls_of("ab" * 4),
        *[Say("Done.")] * 4,
        *[Call("run", {"n": n}, error="boom") for n in range(4)],
        *[Turn()] * 3,
    ]
    verdicts = run(d, steps)
    assert not any(v.stops for v in verdicts)
    assert d.tripped is None


def test_observe_mode_reports_each_distinct_loop_once_per_run() -> None:
    """Two loops on two calls are two reports; repeating either adds none."""
    d = detector(mode="observe", repeat_frequency_threshold=10, near_repeat_threshold=0)
    steps = [same("read")] * 5 + [Call("list", {"dir": "."})] * 5 + [same("read")] * 3
    observed = [v for v in run(d, steps) if v.action == "observe"]
    assert [(v.signal, v.tool) for v in observed] == [
        (Signal.REPEATED_TOOL_CALL, "read"),
        (Signal.REPEATED_TOOL_CALL, "list"),
    ]
    assert all(v.message.startswith("Loop detected (observe mode") for v in observed)


def test_observe_mode_reports_again_after_a_reset() -> None:
    """Each loop is reported once per run, and a reset starts a new run."""
    d = detector(mode="observe")
    assert actions(run(d, [same("read")] * 3))[-1] == "observe"
    d.reset()
    assert actions(run(d, [same("read")] * 3))[-1] == "observe"


def test_observe_mode_remembers_a_bounded_number_of_reported_loops() -> None:
    """Memory stays bounded however many distinct loops a run has."""
    d = detector(mode="observe")
    for n in range(300):
        run(d, [Call("read", {"n": n})] * 3)
    assert len(d.export_state()["reported"]) == MAX_REPORTED


def test_restored_state_keeps_the_reported_loops_bounded() -> None:
    """A state listing more reported loops than a run keeps is cut to the newest."""
    state = detector(mode="observe").export_state()
    state["reported"] = list(range(1_000))
    d = detector(mode="observe")
    assert d.restore_state(state) is True
    assert d.export_state()["reported"] == state["reported"][-MAX_REPORTED:]


def test_off_mode_replays_nothing() -> None:
    """Recorded events fed to a detector that is off decide nothing and are not heard."""
    heard: list[DetectorEvent] = []
    d = LoopDetector(LoopGuardConfig(mode="off"), listener=heard.append)
    event = DetectorEvent(kind="tool_call", tool="read", digest="0" * 16)
    assert [d.replay(event) for _ in range(3)] == [ALLOW] * 3
    assert heard == []


def test_replay_decides_recorded_digests_like_the_live_run() -> None:
    """Three identical calls heard live, replayed without their arguments: still a repeat."""
    heard: list[DetectorEvent] = []
    live = LoopDetector(listener=heard.append)
    verdicts = run(live, [same("read")] * 3)
    replayed = LoopDetector()
    assert [v for v in map(replayed.replay, heard) if v.action != "allow"] == verdicts[-1:]
    assert replayed.tripped == live.tripped


@pytest.mark.parametrize("kind", ["tool_call", "tool_result"])
def test_replaying_a_tool_event_without_its_digest_is_refused(kind: EventKind) -> None:
    """A recorded tool event that lost its digest cannot be decided: it is an error."""
    with pytest.raises(ValueError, match="needs its tool and digest"):
        LoopDetector().replay(DetectorEvent(kind=kind, tool="read"))


def test_off_mode_tracks_nothing() -> None:
    """mode="off": every event is allowed and nothing is counted."""
    d = detector(mode="off")
    steps: list[Step] = [*[same("read")] * 5, *[Say("Done.")] * 4, *[Turn()] * 20]
    assert set(actions(run(d, steps))) == {"allow"}
    assert d.tick() == ALLOW
    snapshot = d.snapshot()
    assert (snapshot.calls, snapshot.turns, snapshot.recent) == (0, 0, ())


# --- soft signals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "max_turns"),
    [pytest.param({}, 12, id="default"), pytest.param({"max_turns": 5}, 5, id="max_turns=5")],
)
def test_turn_count_warns_once_above_max_turns_and_never_stops(
    config: dict[str, Any], max_turns: int
) -> None:
    """max_turns turns are quiet, the next warns, later turns are quiet again."""
    verdicts = run(detector(**config), [Turn()] * (max_turns + 3))
    assert actions(verdicts) == ["allow"] * max_turns + ["warn", "allow", "allow"]
    warning = verdicts[max_turns]
    assert (warning.signal, warning.count, warning.threshold) == (
        Signal.TURN_COUNT,
        max_turns + 1,
        max_turns,
    )


_fresh = itertools.count()

EVENTS: dict[str, Callable[[LoopDetector], Verdict]] = {
    "turn_start": lambda d: d.turn_start(),
    "tool_call": lambda d: d.tool_call("read", {"n": next(_fresh)}),
    "tool_result": lambda d: d.tool_result("read", "contents"),
    "assistant_message": lambda d: d.assistant_message(f"Working on {_letters(next(_fresh))}."),
    "tick": lambda d: d.tick(),
}


@pytest.mark.parametrize("event", EVENTS)
@pytest.mark.parametrize(
    ("config", "timeout_s"),
    [
        pytest.param({}, 180, id="default"),
        pytest.param({"turn_timeout_ms": 30_000}, 30, id="turn_timeout_ms=30000"),
    ],
)
def test_elapsed_time_warns_once_on_any_event_after_the_timeout(
    clock: FakeClock, event: str, config: dict[str, Any], timeout_s: int
) -> None:
    """At the timeout: quiet; just past it: one warning, on whatever event comes; then quiet."""
    d = detector(clock=clock, **config)
    clock.advance(timeout_s)
    assert EVENTS[event](d) == ALLOW
    clock.advance(0.001)
    warning = EVENTS[event](d)
    assert (warning.action, warning.signal, warning.threshold) == (
        "warn",
        Signal.ELAPSED_TIME,
        timeout_s,
    )
    clock.advance(600)
    assert EVENTS[event](d) == ALLOW


def test_soft_warnings_due_together_come_one_event_after_the_other(clock: FakeClock) -> None:
    """Turn count first (table order), elapsed time on the next event."""
    d = detector(clock=clock, max_turns=1)
    d.turn_start()
    clock.advance(181)
    assert [d.turn_start().signal, d.tick().signal, d.tick().signal] == [
        Signal.TURN_COUNT,
        Signal.ELAPSED_TIME,
        None,
    ]
    assert d.snapshot().warned == (Signal.TURN_COUNT, Signal.ELAPSED_TIME)


def test_soft_warnings_warn_in_observe_mode_too(clock: FakeClock) -> None:
    """Observe mode detects and reports everything, soft limits included."""
    d = detector(clock=clock, mode="observe")
    clock.advance(200)
    assert d.tick().action == "warn"


# --- progress awareness (SPEC §3) ---------------------------------------------------------------


def _pytest_edit(failures: list[str]) -> list[Step]:
    steps: list[Step] = []
    for n, failure in enumerate(failures):
        if n:
            steps.append(Call("edit", {"path": "app.py", "patch": f"fix {n}"}, "edited"))
        steps.append(Call("pytest", {"args": "-x"}, failure))
    return steps


def test_rerunning_tests_after_edits_with_changing_failures_is_allowed() -> None:
    """pytest, edit(a), pytest, edit(b), … with a different failure each time runs on."""
    names = ["login", "logout", "signup", "reset", "profile", "search"]
    failures = [f"FAILED test_app.py::test_{name} - AssertionError" for name in names]
    assert first_stop(run(detector(), _pytest_edit(failures))) is None


def test_rerunning_tests_without_progress_awareness_stops_at_the_fourth_run() -> None:
    """progress_aware=False: the seed's window rule stops the 4th pytest."""
    failures = [f"FAILED test_app.py::test_{n} - AssertionError" for n in range(4)]
    stop = first_stop(run(detector(progress_aware=False), _pytest_edit(failures)))
    assert stop is not None
    assert (stop[0], stop[1].signal, stop[1].tool) == (7, Signal.TOOL_FREQUENCY, "pytest")


def test_rerunning_tests_with_an_identical_failure_stops_at_the_fourth_run() -> None:
    """The same failure after every edit: no progress, stopped at the 4th pytest."""
    failures = ["FAILED test_app.py::test_login - AssertionError in 0.5s"] * 4
    stop = first_stop(run(detector(), _pytest_edit(failures)))
    assert stop is not None
    assert (stop[0], stop[1].signal, stop[1].tool) == (7, Signal.TOOL_FREQUENCY, "pytest")


def test_polling_whose_status_changes_is_not_stopped() -> None:
    """Pending → Running → Done, and one more poll: each status is new, nothing is stopped."""
    steps = [same("poll", status) for status in ["Pending", "Running", "Done", "Done"]]
    assert first_stop(run(detector(), steps)) is None


def test_polling_whose_status_does_not_change_is_stopped() -> None:
    """Pending, Pending, and a third identical poll: a repeat."""
    stop = first_stop(run(detector(), [same("poll", "Pending")] * 3))
    assert stop is not None
    assert stop[1].signal is Signal.REPEATED_TOOL_CALL


def test_a_different_outcome_breaks_the_repeat_streak_and_the_newest_one_counts() -> None:
    """x, y, y: the streak is the two y's and the current call."""
    d = detector()
    assert actions(run(d, [same("read", "x"), same("read", "y")])) == ["allow", "allow"]
    assert feed(d, same("read", "y")) == ALLOW
    assert feed(d, same("read", "z")).signal is Signal.REPEATED_TOOL_CALL


@pytest.mark.parametrize(
    "outputs",
    [
        pytest.param(["tests failed in 0.51s", "tests failed in 0.62s"], id="duration"),
        pytest.param(["took 12ms", "took 9ms"], id="milliseconds"),
        pytest.param(["at 2024-05-01T10:00:00Z: idle", "at 2024-05-01T10:00:05Z: idle"], id="time"),
        pytest.param(
            [
                "request 123e4567-e89b-12d3-a456-426614174000 queued",
                "request 9b2f6a1c-0d4e-4f5a-8b6c-7d8e9f0a1b2c queued",
            ],
            id="uuid",
        ),
        pytest.param(["<Job at 0x7f3a2b1c>", "<Job at 0x7f3a2b9d>"], id="hex-pointer"),
        pytest.param(["offset 1714550400", "offset 1714550405"], id="long-number"),
    ],
)
def test_volatile_parts_of_an_output_are_not_progress(outputs: list[str]) -> None:
    """Durations, timestamps, UUIDs, pointers and long numbers change without progress."""
    steps = [same("status", output) for output in [*outputs, outputs[0]]]
    stop = first_stop(run(detector(), steps))
    assert stop is not None
    assert stop[0] == 3


def test_short_numbers_in_an_output_are_progress() -> None:
    """progress 45% → 50% → 55%: the job moves; no exact-repeat signal stops it."""
    steps = [same("status", f"progress {p}%") for p in range(45, 100, 5)]
    assert first_stop(run(detector(near_repeat_threshold=0), steps)) is None


def test_a_poller_whose_numbers_move_is_never_a_near_repeat() -> None:
    """The same poll, only its percentage moving: progress, however many polls (SPEC §12 N7,
    which withdrew §11's stop at the 4th)."""
    steps = [same("status", f"progress {p}%") for p in range(5, 100, 5)]
    assert first_stop(run(detector(), steps)) is None


def test_a_near_repeat_stop_names_the_keys_that_let_a_call_repeat() -> None:
    """The stop message of a near repeat names ``tool_threshold_overrides`` and
    ``ignore_tools``, which let a call that is meant to repeat run."""
    stop = first_stop(run(detector(), [_growing(i) for i in range(6)]))
    assert stop is not None
    assert stop[1].signal is Signal.NEAR_REPEAT
    assert "tool_threshold_overrides" in stop[1].message
    assert "ignore_tools" in stop[1].message
    loosened = detector(tool_threshold_overrides={"edit": 20})
    assert first_stop(run(loosened, [_growing(i) for i in range(12)])) is None


def test_the_history_keeps_no_sketch_of_a_result_only_what_it_brought() -> None:
    """A result is read once, against what the run has seen (SPEC §13): its call keeps what it
    brought, never a sketch of its text, and a call loosened by an override is still stopped
    by its own threshold."""
    d = detector()
    long_view = "\n".join(f"line {_letters(n)}" for n in range(25))
    run(d, [Call("read", {"path": f"f{n}"}, f"{long_view}\nend {n}") for n in range(30)])
    calls = d.export_state()["calls"]
    assert len(calls) == 25
    assert all(len(call) == 10 for call in calls)
    assert all(isinstance(item, (str, int, bool, type(None))) for c in calls for item in c[:7])
    loosened = detector(tool_threshold_overrides={"edit": 9})
    stop = first_stop(run(loosened, [_growing(i) for i in range(9)]))
    assert stop is not None
    assert (stop[0], stop[1].signal) == (9, Signal.NEAR_REPEAT)


def test_pending_outcomes_count_as_equal() -> None:
    """Three identical calls made in parallel, before any result: the third is blocked."""
    d = detector()
    assert [d.tool_call("read", {"p": 1}, call_id=f"c{n}").action for n in range(3)] == [
        "allow",
        "allow",
        "block",
    ]


def test_pending_outcome_does_not_hide_a_change_before_it() -> None:
    """x, y, then parallel calls: pending ones count, but x still differs from y."""
    d = detector(repeat_tool_threshold=4)
    run(d, [same("read", "x"), same("read", "y")])
    assert d.tool_call("read", {"path": "a.ts"}) == ALLOW
    assert d.tool_call("read", {"path": "a.ts"}) == ALLOW
    assert d.tool_call("read", {"path": "a.ts"}).signal is Signal.REPEATED_TOOL_CALL


def test_results_are_matched_by_call_id() -> None:
    """Parallel calls answered out of order get their own results."""
    d = detector()
    d.tool_call("read", {"p": 1}, call_id="first")
    d.tool_call("read", {"p": 2}, call_id="second")
    d.tool_result("read", error="gone", call_id="second")
    d.tool_result("read", "contents", call_id="first")
    assert [c.outcome for c in d.snapshot().recent] == ["ok", "error"]


def test_result_without_call_id_belongs_to_the_oldest_pending_call_of_its_tool() -> None:
    """read, list, read; a read result without an id answers the first read."""
    d = detector()
    d.tool_call("read", {"p": 1})
    d.tool_call("list", {})
    d.tool_call("read", {"p": 2})
    d.tool_result("read", error="gone")
    assert [c.outcome for c in d.snapshot().recent] == ["error", "pending", "pending"]


def test_result_with_an_unknown_call_id_belongs_to_a_pending_call_without_one() -> None:
    """A call that has an id waits for its own; a call without one takes the result."""
    d = detector()
    d.tool_call("read", {"p": 1}, call_id="known")
    d.tool_call("read", {"p": 2})
    d.tool_result("read", error="gone", call_id="unknown")
    assert [c.outcome for c in d.snapshot().recent] == ["pending", "error"]


def test_result_with_an_unknown_call_id_and_no_candidate_still_counts_as_an_error() -> None:
    """Nothing to attach it to, but the error streak sees it."""
    d = detector()
    d.tool_call("read", {"p": 1}, call_id="known")
    verdicts = [d.tool_result("read", error="boom", call_id=f"lost{n}") for n in range(3)]
    assert actions(verdicts) == ["allow", "allow", "abort"]
    assert [c.outcome for c in d.snapshot().recent] == ["pending"]


def test_second_result_for_a_call_is_disregarded() -> None:
    """A duplicate answer changes neither the outcome nor the error streak."""
    d = detector()
    d.tool_call("read", {"p": 1}, call_id="c1")
    d.tool_result("read", "contents", call_id="c1")
    assert [d.tool_result("read", error="boom", call_id="c1") for _ in range(3)] == [ALLOW] * 3
    assert [c.outcome for c in d.snapshot().recent] == ["ok"]


def test_reused_call_id_answers_the_newest_call_with_it() -> None:
    """Scripted models reuse ids across turns: the result belongs to the latest call."""
    d = detector()
    d.tool_call("read", {"p": 1}, call_id="call_0")
    d.tool_result("read", "first", call_id="call_0")
    d.tool_call("read", {"p": 2}, call_id="call_0")
    d.tool_result("read", error="second", call_id="call_0")
    assert [c.outcome for c in d.snapshot().recent] == ["ok", "error"]


# --- configuration at runtime -------------------------------------------------------------------


def test_configure_keeps_the_history() -> None:
    """A new configuration applies to the calls already seen."""
    d = detector()
    run(d, [same("read")] * 2)
    d.configure(LoopGuardConfig(locale="ko"))
    assert feed(d, same("read")).signal is Signal.REPEATED_TOOL_CALL


def test_configure_to_observe_lifts_the_trip() -> None:
    """An observed run is never blocked, even one stopped before the switch."""
    d = detector()
    run(d, [same("read")] * 3)
    d.configure(LoopGuardConfig(mode="observe"))
    assert d.tripped is None
    assert d.tool_call("write", {}) == ALLOW


def test_configure_to_off_clears_the_run_and_back_on_starts_afresh() -> None:
    """Off tracks nothing; switching it back on starts with an empty history."""
    d = detector()
    run(d, [same("read")] * 2)
    d.configure(LoopGuardConfig(mode="off"))
    assert d.snapshot().calls == 0
    d.configure(LoopGuardConfig())
    assert actions(run(d, [same("read")] * 2)) == ["allow", "allow"]


def test_configure_with_a_shorter_history_keeps_the_newest_calls() -> None:
    """The history shrinks from its old end."""
    d = detector(frequency_window_size=20)
    run(d, [Call("read", {"n": n}) for n in range(20)])
    before = d.snapshot(recent=100).recent
    d.configure(LoopGuardConfig(no_progress_calls=0, max_sequence_length=0))
    assert d.snapshot(recent=100).recent == before[-10:]


# --- snapshot and exported state ----------------------------------------------------------------


def test_snapshot_shows_names_short_digests_and_outcome_kinds_only(clock: FakeClock) -> None:
    """What ``inspect`` prints: never an argument or an output."""
    d = detector(clock=clock)
    d.turn_start()
    feed(d, Call("read", {"path": "secret.txt"}, "SECRET CONTENT"))
    feed(d, Call("run", {}, error="SECRET ERROR"))
    d.tool_call("write", {"text": "SECRET"})
    clock.advance(2.5)
    snapshot = d.snapshot()
    assert (snapshot.turns, snapshot.calls, snapshot.elapsed_s, snapshot.tripped) == (
        1,
        3,
        2.5,
        None,
    )
    assert [(c.tool, c.outcome) for c in snapshot.recent] == [
        ("read", "ok"),
        ("run", "error"),
        ("write", "pending"),
    ]
    assert all(len(c.digest) == 8 for c in snapshot.recent)
    assert "SECRET" not in repr(snapshot)
    assert d.snapshot(recent=1).recent == snapshot.recent[-1:]
    assert d.snapshot(recent=0).recent == ()


def test_snapshot_names_the_signal_that_tripped_the_run() -> None:
    """``inspect`` says what stopped the run."""
    d = detector()
    run(d, [same("read")] * 3)
    assert d.snapshot().tripped is Signal.REPEATED_TOOL_CALL


def test_exported_state_is_json_without_content() -> None:
    """Only tool names, digests and counters leave the detector."""
    d = detector(mode="observe")
    run(d, [Call("read", {"q": "SECRET"}, "SECRET")] * 3 + [Say("SECRET")] * 3)
    text = json.dumps(d.export_state())
    assert "SECRET" not in text


def test_restored_state_continues_the_run(clock: FakeClock) -> None:
    """Two of each loop in one process, the third in another: still detected."""
    d = detector(clock=clock)
    d.turn_start()
    run(d, [Call("run", {"n": n}, error="boom") for n in range(2)] + [Say("Done.")] * 2)
    d.tool_call("read", {"path": "a.ts"})
    d.tool_call("read", {"path": "a.ts"})
    clock.advance(30)
    state = json.loads(json.dumps(d.export_state()))
    continued: list[tuple[Step, Signal]] = [
        (Say("Done."), Signal.REPEATED_ASSISTANT_RESPONSE),
        (Call("run", {"n": 9}, error="boom"), Signal.REPEATED_TOOL_ERROR),
        (Call("read", {"path": "a.ts"}), Signal.REPEATED_TOOL_CALL),
    ]
    for step, signal in continued:
        other = detector(clock=clock)
        assert other.restore_state(state) is True
        assert other.export_state() == d.export_state()
        assert feed(other, step).signal is signal


_KEY_PROBE = """
from langchain_loop_guard import LoopDetector
d = LoopDetector()
verdicts = [d.tool_call(name, {}) for name in "abcdefgh" * 2]
print(verdicts[-1].signal, verdicts[-1].key)
"""


@pytest.mark.slow
def test_loop_keys_do_not_depend_on_the_process() -> None:
    """A run restored elsewhere recognizes the loops it reported: keys ignore string hashing."""
    keys = {
        subprocess.run(
            [sys.executable, "-c", _KEY_PROBE],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    verdict = run(detector(), calls_of("abcdefgh" * 2, None))[-1]
    assert verdict.signal is Signal.NO_PROGRESS
    assert keys == {f"{verdict.signal} {verdict.key}"}


def test_restored_state_keeps_the_trip_and_the_reported_loops() -> None:
    """A stopped run stays stopped; an observed loop is not reported twice."""
    stopped = detector()
    run(stopped, [same("read")] * 3)
    again = detector()
    again.restore_state(stopped.export_state())
    assert again.tripped == stopped.tripped
    observed = detector(mode="observe")
    run(observed, [same("read")] * 3)
    again = detector(mode="observe")
    again.restore_state(observed.export_state())
    assert feed(again, same("read")) == ALLOW


def test_restoring_a_tripped_state_in_observe_mode_does_not_trip() -> None:
    """Observe mode never blocks, whatever state it continues from."""
    stopped = detector()
    run(stopped, [same("read")] * 3)
    observing = detector(mode="observe")
    assert observing.restore_state(stopped.export_state()) is True
    assert observing.tripped is None


def test_restoring_in_off_mode_tracks_nothing() -> None:
    """Off ignores the state it is given."""
    d = detector()
    run(d, [same("read")] * 2)
    off = detector(mode="off")
    assert off.restore_state(d.export_state()) is False
    assert off.snapshot().calls == 0


def _valid_state() -> dict[str, Any]:
    d = detector()
    run(d, [same("read")] * 3)
    return d.export_state()


BAD_STATES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("not-a-mapping", lambda s: [s]),
    ("other-version", lambda s: {**s, "v": 99}),
    ("missing-key", lambda s: {k: v for k, v in s.items() if k != "turns"}),
    ("calls-not-a-list", lambda s: {**s, "calls": "x"}),
    ("call-too-short", lambda s: {**s, "calls": [["read", "sig"]]}),
    ("call-bad-kind", lambda s: {**s, "calls": [["read", "sig", None, "weird", None]]}),
    ("call-name-not-text", lambda s: {**s, "calls": [[1, "sig", None, "ok", None]]}),
    ("call-digest-not-text", lambda s: {**s, "calls": [["read", 2, None, "ok", None]]}),
    ("call-outcome-not-text", lambda s: {**s, "calls": [["read", "sig", 3, "ok", None]]}),
    ("call-id-not-text", lambda s: {**s, "calls": [["read", "sig", None, "ok", 4]]}),
    ("negative-count", lambda s: {**s, "seen": -1}),
    ("count-is-bool", lambda s: {**s, "turns": True}),
    ("elapsed-text", lambda s: {**s, "elapsed": "1"}),
    ("elapsed-infinite", lambda s: {**s, "elapsed": float("inf")}),
    ("unknown-signal", lambda s: {**s, "warned": ["bogus"]}),
    ("reported-not-a-digest", lambda s: {**s, "reported": [["tool_cycle", "3"]]}),
    ("reported-too-wide", lambda s: {**s, "reported": [1 << 64]}),
    ("reported-negative", lambda s: {**s, "reported": [-1]}),
    ("reported-bool", lambda s: {**s, "reported": [True]}),
    ("tripped-bad-action", lambda s: {**s, "tripped": ["explode", *s["tripped"][1:]]}),
    (
        "tripped-bad-tools",
        lambda s: {**s, "tripped": [*s["tripped"][:3], "read", *s["tripped"][4:]]},
    ),
    ("error-streak-text", lambda s: {**s, "error": [None, "3"]}),
    ("error-key-not-text", lambda s: {**s, "error": [5, 1]}),
]


@pytest.mark.parametrize("corrupt", [pytest.param(f, id=name) for name, f in BAD_STATES])
def test_malformed_state_starts_the_run_afresh(corrupt: Callable[[dict[str, Any]], Any]) -> None:
    """A state that is not ours is refused whole: nothing is half restored, nothing raises."""
    d = detector()
    run(d, [Turn(), same("write")])
    assert d.restore_state(corrupt(_valid_state())) is False
    assert (d.snapshot().calls, d.snapshot().turns, d.tripped) == (0, 0, None)


# --- verdicts and messages ----------------------------------------------------------------------


def test_verdict_stops_only_for_block_and_abort() -> None:
    """``Verdict.stops`` is what an integration checks before raising."""
    assert [Verdict(action=a).stops for a in ("allow", "warn", "observe", "block", "abort")] == [
        False,
        False,
        False,
        True,
        True,
    ]


def test_only_turn_count_and_elapsed_time_are_soft() -> None:
    """Soft signals warn; the others stop."""
    assert {s for s in Signal if s.is_soft} == {Signal.TURN_COUNT, Signal.ELAPSED_TIME}


def test_signal_values_are_the_spec_names() -> None:
    """``Signal`` is a str enum of SPEC §10's names, in SPEC §2's table order, with the
    signals of SPEC §11 and §12 after the ones they sharpen."""
    assert [s.value for s in Signal] == [
        "repeated_tool_call",
        "tool_cycle",
        "tool_frequency",
        "no_progress",
        "repeated_sequence",
        "near_repeat",
        "no_new_info",
        "repeated_tool_error",
        "failing_turns",
        "repeated_assistant_response",
        "reply_cycle",
        "turn_count",
        "elapsed_time",
    ]


def test_stop_message_names_tool_counts_and_limit() -> None:
    """The user-facing reason names the tool, the count and the limit."""
    verdict = run(detector(), [same("read")] * 3)[-1]
    assert verdict.message == (
        "Loop guard stopped the run: `read` was called 3 times in a row with the same "
        "arguments (limit 3)."
    )


@pytest.mark.parametrize("signal", list(Signal))
def test_every_signal_has_a_reason_with_its_numbers(signal: Signal) -> None:
    """Each signal's reason is its own text, with the count and limit filled in."""
    text = reason(signal, tool="read", tools=("read", "list"), count=7, threshold=5, window=10)
    assert "7" in text
    assert "5" in text
    assert "{" not in text


def test_reasons_of_all_signals_differ() -> None:
    """No two signals share a reason."""
    texts = {reason(s, tool="t", count=3, threshold=2) for s in Signal}
    assert len(texts) == len(Signal)


def test_messages_are_localized() -> None:
    """locale="ko" gives the Korean catalog's text, with the same tool name and numbers."""
    english = run(detector(), [same("read")] * 3)[-1].message
    korean = run(detector(locale="ko"), [same("read")] * 3)[-1].message
    assert korean != english
    assert "`read`" in korean
    assert "3" in korean


def test_messages_never_quote_arguments_outputs_errors_or_text() -> None:
    """Stops, observations and warnings name tools and counts only (SPEC §8)."""
    secret = "hunter2-SECRET"
    for mode in ("on", "observe"):
        for steps in (
            [Call("read", {"password": secret}, secret)] * 3,
            [Call("run", {"n": n}, error=f"{secret} failed") for n in range(3)],
            [Say(f"The password is {secret}.")] * 3,
        ):
            d = detector(mode=mode, max_turns=1)
            verdicts = [*run(d, [Turn(), Turn(), *steps]), d.turn_start(), d.tool_call("x", secret)]
            assert any(v.message for v in verdicts)
            assert not any(secret in v.message for v in verdicts)


def test_default_config_and_clock_are_used_when_none_are_given() -> None:
    """``LoopDetector()`` runs with the defaults and ``time.monotonic``."""
    d = LoopDetector()
    assert d.config == LoopGuardConfig()
    assert 0 <= d.snapshot().elapsed_s < 60
