"""The detector's event listener and ``LoopDetector.replay``: digests out, verdicts back."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import pytest

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._core._canonical import call_signature
from langchain_loop_guard._core._detector import ALLOW, DetectorEvent, LoopDetector, Verdict
from langchain_loop_guard._core._signature import arg_tokens, outcome

if TYPE_CHECKING:
    from conftest import FakeClock

SECRET = "canary-51e0-do-not-keep"


def _listening(
    config: LoopGuardConfig | None = None, **kwargs: Any
) -> tuple[LoopDetector, list[DetectorEvent]]:
    events: list[DetectorEvent] = []
    return LoopDetector(config, listener=events.append, **kwargs), events


def test_listener_hears_every_kind_of_event_as_digests() -> None:
    """Each event reaches the listener once, with tool names and digests, never content."""
    detector, events = _listening()
    detector.turn_start()
    detector.assistant_message(f"let me look {SECRET}", [("read", {"p": SECRET})])
    detector.tool_call("read", {"p": SECRET}, call_id=f"id-{SECRET}")
    detector.tool_result("read", f"text {SECRET}", call_id=f"id-{SECRET}")
    detector.tool_result("read", error=ValueError(SECRET))
    detector.tick()
    assert [e.kind for e in events] == [
        "turn_start",
        "assistant_message",
        "tool_call",
        "tool_result",
        "tool_result",
        "tick",
    ]
    message, call, result, failure = events[1], events[2], events[3], events[4]
    assert (message.calls, message.digest is not None) == (1, True)
    assert (call.tool, call.call_id) == ("read", f"id-{SECRET}")
    assert (result.error, failure.error) == (False, True)
    digests = " ".join(str(e.digest) for e in events)
    assert SECRET not in digests


def test_the_listened_verdict_is_the_returned_verdict() -> None:
    """The event carries the verdict the method returned."""
    detector, events = _listening()
    verdicts = [detector.tool_call("x", {"a": 1}) for _ in range(3)]
    assert [e.verdict for e in events] == verdicts
    assert verdicts[-1].signal is Signal.REPEATED_TOOL_CALL


def test_elapsed_is_the_clock_reading_the_decision_used() -> None:
    """The event's elapsed time is the reading the elapsed-time check used, not a later one."""
    readings = iter(float(n) for n in range(100))
    detector, events = _listening(clock=lambda: next(readings))  # started at 0
    detector.turn_start()  # the check reads 1
    assert events[0].elapsed == 1.0


def test_elapsed_is_read_when_the_decision_did_not_read_the_clock(clock: FakeClock) -> None:
    """A tripped run's events (no elapsed-time check) still carry the run's elapsed time."""
    detector, events = _listening(clock=clock)
    for _ in range(3):
        detector.tool_call("x", {"a": 1})
    clock.advance(7)
    detector.turn_start()
    assert events[-1].verdict.action == "abort"
    assert events[-1].elapsed == 7.0


def test_reset_is_heard_with_no_elapsed_time(clock: FakeClock) -> None:
    """A reset restarts the run's clock: its event has elapsed time 0."""
    detector, events = _listening(clock=clock)
    clock.advance(5)
    detector.reset()
    assert [(e.kind, e.elapsed) for e in events] == [("reset", 0.0)]


def test_release_is_heard_only_when_it_lifts_a_trip() -> None:
    """Releasing a run that is not tripped changes nothing and is not an event."""
    detector, events = _listening()
    detector.release()
    assert events == []
    for _ in range(3):
        detector.tool_call("x", {"a": 1})
    detector.release()
    assert events[-1].kind == "release"
    assert detector.tripped is None


def test_creating_or_restoring_a_detector_is_no_event() -> None:
    """Only events are heard: a new detector and a restored state are not resets."""
    source = LoopDetector()
    source.tool_call("x", {"a": 1})
    detector, events = _listening()
    assert detector.restore_state(source.export_state())
    assert events == []


def test_nothing_is_heard_in_off_mode() -> None:
    """Mode off tracks nothing, so its listener hears nothing, not even a reset."""
    detector, events = _listening(LoopGuardConfig(mode="off"))
    detector.turn_start()
    detector.tool_call("x", {"a": 1})
    detector.tool_result("x", "ok")
    detector.assistant_message("hi")
    detector.tick()
    detector.reset()
    assert detector.replay(DetectorEvent(kind="turn_start")) is ALLOW
    assert events == []


def test_ignored_tools_are_digested_only_for_a_listener() -> None:
    """With a listener, calls and results of ignored tools are heard with their digests."""
    config = LoopGuardConfig(ignore_tools=["sleep"])
    detector, events = _listening(config)
    detector.tool_call("sleep", {"s": 1})
    detector.tool_result("sleep", "slept")
    assert [(e.kind, e.digest is not None) for e in events] == [
        ("tool_call", True),
        ("tool_result", True),
    ]
    quiet = LoopDetector(config)
    assert quiet.tool_call("sleep", {"s": 1}) is ALLOW
    assert quiet.tool_result("sleep", "slept") is ALLOW


def test_an_ignored_call_of_a_tripped_run_is_blocked_and_heard() -> None:
    """After a stop, an ignored tool's call is blocked too, and still heard."""
    detector, events = _listening(LoopGuardConfig(ignore_tools=["sleep"]))
    for _ in range(3):
        detector.tool_call("x", {"a": 1})
    assert detector.tool_call("sleep", {"s": 1}).action == "block"
    assert events[-1].kind == "tool_call"
    assert events[-1].verdict.tripped


def test_replay_without_tool_or_digest_is_an_error() -> None:
    """A tool event needs its tool and digest."""
    with pytest.raises(ValueError, match="tool and digest"):
        LoopDetector().replay(DetectorEvent(kind="tool_call", tool="x"))


@pytest.mark.parametrize(
    "digests",
    [
        ["0123456789abcdef", "0123456789ABCDEF", " 123456789abcdef"],
        ["not a digest yet", "-123456789abcdef", "+123456789abcdef"],
    ],
    ids=["one-number-written-three-ways", "no-number"],
)
def test_a_replayed_digest_is_a_call_of_its_own_whatever_its_text(digests: list[str]) -> None:
    """Texts of 16 characters that read as one number are still different digests: none
    repeats another, and the state gives each back as it was."""
    d = LoopDetector(clock=lambda: 0.0)
    for digest in digests:
        assert not d.replay(DetectorEvent(kind="tool_call", tool="t", digest=digest)).stops
    assert [call[1] for call in d.export_state()["calls"]] == digests
    assert LoopDetector().restore_state(d.export_state())


def test_replaying_detector_tells_its_own_listener() -> None:
    """A replaying detector hears the events it replays, with its own verdicts."""
    detector, events = _listening()
    source, heard = _listening()
    source.turn_start()
    source.tool_call("x", {"a": 1}, call_id="c1")
    source.tool_result("x", "out", call_id="c1")
    source.assistant_message("done")
    source.tick()
    for event in heard:
        detector.replay(event)
    assert [(e.kind, e.tool, e.digest, e.call_id, e.verdict) for e in events] == [
        (e.kind, e.tool, e.digest, e.call_id, e.verdict) for e in heard
    ]


def _random_run(rng: random.Random, detector: LoopDetector, steps: int) -> list[Verdict]:
    """Feed a random mix of events (loops likely), returning the verdicts."""
    verdicts = []
    for _ in range(steps):
        choice = rng.random()
        tool = rng.choice(["read", "grep", "sleep"])
        args = {"p": rng.randint(0, 2)}
        if choice < 0.35:
            verdicts.append(detector.tool_call(tool, args, call_id=rng.choice([None, "c1", "c2"])))
        elif choice < 0.6:
            output = rng.choice(["same", "other"])
            if rng.random() < 0.3:
                verdicts.append(detector.tool_result(tool, error=f"E{rng.randint(1, 9)} failed"))
            else:
                verdicts.append(detector.tool_result(tool, output))
        elif choice < 0.75:
            calls = [(tool, args)] if rng.random() < 0.5 else []
            verdicts.append(detector.assistant_message(rng.choice(["", "ok", "same"]), calls))
        elif choice < 0.9:
            verdicts.append(detector.turn_start())
        elif choice < 0.95:
            verdicts.append(detector.tick())
        elif choice < 0.98:
            detector.release()
        else:
            verdicts.append(detector.reset())
    return verdicts


CONFIGS = {
    "defaults": LoopGuardConfig(),
    "seed rules": LoopGuardConfig(progress_aware=False),
    "observe": LoopGuardConfig(mode="observe"),
    "ignore and override": LoopGuardConfig(
        ignore_tools=["sleep"], tool_threshold_overrides={"grep": 2}, max_turns=3
    ),
}


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("seed", range(40))
def test_replay_of_heard_events_gives_the_live_verdicts(name: str, seed: int) -> None:
    """Replaying the heard events, driven by their elapsed times, gives every verdict again."""
    config = CONFIGS[name]
    rng = random.Random(seed)
    live_now = [0.0]

    def moving_clock() -> float:  # moves at every reading: only the decision's reading counts
        live_now[0] += rng.random() * 20
        return live_now[0]

    live, heard = _listening(config, clock=moving_clock)
    _random_run(rng, live, 120)
    now = [0.0]
    replayed = LoopDetector(config, clock=lambda: now[0])
    for event in heard:
        now[0] = event.elapsed
        assert replayed.replay(event) == event.verdict


def test_user_message_lifts_a_trip_and_ends_repeats_of_successful_calls() -> None:
    """A new human message: the same successful call in each turn is no loop (SPEC §11 N3)."""
    detector = LoopDetector()
    for _ in range(5):
        detector.user_message()
        assert detector.tool_call("get_profile", {}).action == "allow"
        detector.tool_result("get_profile", "Ada")
    for _ in range(3):
        verdict = detector.tool_call("get_profile", {})
        detector.tool_result("get_profile", "Ada")
    assert verdict.stops
    assert detector.user_message().action == "allow"
    assert detector.tripped is None


def test_user_message_is_new_information_for_the_failure_counts() -> None:
    """A lookup that fails, the user sends their id again, the same lookup fails again: a
    retry the human asked for is no loop (SPEC §13 N13, which withdrew §11 R7); without the
    human messages between, the 3rd identical failure stops the run."""
    detector = LoopDetector()
    stops = []
    for _ in range(4):
        detector.user_message()
        call = detector.tool_call("update", {"x": 1})
        result = detector.tool_result("update", error="ValueError: locked")
        stops.append(call.stops or result.stops)
    assert stops == [False] * 4
    detector = LoopDetector()
    stops = []
    for _ in range(3):
        call = detector.tool_call("update", {"x": 1})
        result = detector.tool_result("update", error="ValueError: locked")
        stops.append(call.stops or result.stops)
    assert stops == [False, False, True]


def test_user_message_is_recorded_and_replayed() -> None:
    """A listener sees the event, and replaying it decides the same."""
    seen: list[DetectorEvent] = []
    detector = LoopDetector(listener=seen.append)
    detector.user_message()
    assert [e.kind for e in seen] == ["user_message"]
    replayed = LoopDetector()
    assert replayed.replay(seen[0]).action == "allow"
    assert LoopDetector(LoopGuardConfig(mode="off")).user_message().action == "allow"


def test_a_helper_model_answering_the_same_to_new_inputs_is_no_loop() -> None:
    """A grader's `yes` for five documents: never a repeated response (SPEC §11 N2)."""
    detector = LoopDetector()
    for _ in range(5):
        detector.turn_start()
        assert detector.assistant_message("yes", in_context=False).action == "allow"
    detector.turn_start()
    assert detector.assistant_message("yes").action == "allow"  # two in a row, in context
    detector.turn_start()
    assert detector.assistant_message("yes").stops


def test_in_context_is_recorded_and_replayed() -> None:
    """A trace keeps whether the response's input held the previous one."""
    seen: list[DetectorEvent] = []
    detector = LoopDetector(listener=seen.append)
    for _ in range(3):
        detector.assistant_message("yes", in_context=False)
    assert [e.in_context for e in seen] == [False] * 3
    replayed = LoopDetector()
    assert not any(replayed.replay(event).stops for event in seen)


# --- events digested beforehand (what the callback handler feeds) ------------------------------


def _calls_and_results(
    rng: random.Random, detector: LoopDetector, *, digested: bool
) -> list[Verdict]:
    """A random run of calls, results (errors among them), answers and turns, fed as content
    or, with ``digested``, as the callback handler feeds calls and results: digested first
    (``call_signature``, ``arg_tokens``, ``outcome``), then ``digested_call`` and
    ``digested_result``."""
    tokens: dict[str, frozenset[int]] = {}
    verdicts = []
    for step in range(150):
        choice = rng.random()
        tool = rng.choice(["read", "grep", "sleep"])
        call_id = f"c{step}"
        args = {"path": f"src/{rng.randint(0, 2)}.py"}
        if choice < 0.45:
            if digested:
                # the words of the arguments, as the detector keeps them: not for a call of a
                # tripped run, a blocked one or an ignored tool's (none is judged by its result)
                kept = detector.tripped is None and tool not in detector.config.ignore_tools
                verdict = detector.digested_call(tool, call_signature(tool, args), call_id)
                if kept and verdict.action != "block":
                    tokens[call_id] = arg_tokens(args, tool)
            else:
                verdict = detector.tool_call(tool, args, call_id)
            verdicts.append(verdict)
            output = rng.choice(["same lines", "other lines", "\n".join(["row"] * 25), None])
            error = "E1: src/0.py failed" if output is None else None
            if digested:
                digests = outcome(output, error=error, tool=tool, tokens=tokens.get(call_id))
                failed = error is not None or digests.failed
                verdict = detector.digested_result(
                    tool, digests.key, call_id, failed=failed, near=digests.near, info=digests.info
                )
            else:
                verdict = detector.tool_result(tool, output, error=error, call_id=call_id)
            verdicts.append(verdict)
        elif choice < 0.7:
            verdicts.append(detector.assistant_message(rng.choice(["", "ok", "same"])))
        elif choice < 0.95:
            verdicts.append(detector.turn_start())
        else:
            detector.release()
    return verdicts


@pytest.mark.parametrize("name", [*CONFIGS, "off"])
@pytest.mark.parametrize("seed", range(25))
def test_digested_calls_and_results_decide_as_their_content(name: str, seed: int) -> None:
    """``digested_call`` and ``digested_result`` give every verdict that ``tool_call`` and
    ``tool_result`` give on the same content, and a listener hears the same events."""
    config = CONFIGS.get(name) or LoopGuardConfig(mode="off")
    content, heard = _listening(config, clock=lambda: 0.0)
    digests, heard_digested = _listening(config, clock=lambda: 0.0)
    assert _calls_and_results(random.Random(seed), content, digested=False) == (
        _calls_and_results(random.Random(seed), digests, digested=True)
    )
    assert heard_digested == heard
    quiet = LoopDetector(config, clock=lambda: 0.0)  # no listener: the path the handler takes
    assert _calls_and_results(random.Random(seed), quiet, digested=True) == (
        _calls_and_results(random.Random(seed), LoopDetector(config), digested=False)
    )
