"""Properties of signatures and of the detector over generated values and event streams."""

from __future__ import annotations

import dataclasses
import enum
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal, Verdict
from langchain_loop_guard._core import _judge as judge_module
from langchain_loop_guard._core._canonical import call_signature, canonical
from langchain_loop_guard._core._detector import DetectorEvent
from langchain_loop_guard._core._reporting import MAX_REPORTED
from langchain_loop_guard._core._signature import assistant_key, error_key, outcome_digest

# Generated values nest and event streams are long: the default deadline would flake on a
# loaded two-core machine, and data_too_large / too_slow only say the strategies are rich.
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SECRET = "SECRET-d41d8cd9"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Pair:
    left: Any
    right: Any


# --- values -------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=24,
)

hashable_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=6)
    | st.binary(max_size=6)
    | st.dates()
    | st.datetimes()
    | st.sampled_from(Color),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
python_values = st.recursive(
    hashable_values | st.times() | st.timedeltas() | st.just(object()),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashable_values, inner, max_size=4)
        | st.sets(hashable_values, max_size=4)
        | st.builds(Pair, inner, inner)
        | st.builds(bytearray, st.binary(max_size=6))
    ),
    max_leaves=24,
)


def shuffled(value: Any, rnd: random.Random) -> Any:
    """``value`` with every dict's keys in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {key: shuffled(item, rnd) for key, item in items}
    if isinstance(value, list):
        return [shuffled(item, rnd) for item in value]
    return value


def as_floats(value: Any) -> Any:
    """``value`` with every int (not bool) that a float holds exactly turned into a float."""
    if isinstance(value, dict):
        return {key: as_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_floats(item) for item in value]
    if type(value) is int and abs(value) <= 2**53:
        return float(value)
    return value


@PROPERTY
@given(json_values, st.randoms(use_true_random=False))
def test_signature_ignores_dict_key_order(value: Any, rnd: random.Random) -> None:
    """Any reordering of any dict's keys keeps the signature."""
    assert call_signature("tool", shuffled(value, rnd)) == call_signature("tool", value)


@PROPERTY
@given(json_values)
def test_integral_floats_sign_like_ints(value: Any) -> None:
    """Turning ints into equal floats keeps the signature."""
    assert call_signature("tool", as_floats(value)) == call_signature("tool", value)


@PROPERTY
@given(st.text() | st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000ab"))
def test_assistant_key_is_the_key_of_the_whitespace_collapsed_text(text: str) -> None:
    """An assistant key ignores leading, trailing and repeated Unicode whitespace, nothing else."""
    collapsed = " ".join(text.split())
    assert assistant_key(text) == (assistant_key(collapsed) if collapsed else None)
    assert assistant_key(text) != assistant_key(collapsed + ".")


@PROPERTY
@given(python_values)
def test_any_value_serializes_deterministically_without_raising(value: Any) -> None:
    """Canonical text is JSON, and the same on every call, for any nested value."""
    text = canonical(value)
    json.loads(text)
    assert canonical(value) == text


@PROPERTY
@given(python_values)
def test_outcome_error_and_assistant_keys_never_raise(value: Any) -> None:
    """Whatever a tool returns or raises, or a model says, it gets a key."""
    assert outcome_digest(value) == outcome_digest(value)
    assert error_key("tool", value) == error_key("tool", value)
    assistant_key(value)


# --- event streams ------------------------------------------------------------------------------

TOOLS = ("read", "write", "poll", "sleep", "a", "b")


@st.composite
def configs(draw: st.DrawFn) -> LoopGuardConfig:
    frequency = draw(st.integers(2, 6))
    return LoopGuardConfig(
        mode=draw(st.sampled_from(["on", "on", "observe", "off"])),
        locale=draw(st.sampled_from(["en", "ko"])),
        max_turns=draw(st.integers(1, 20)),
        turn_timeout_ms=draw(st.integers(1, 20_000)),
        repeat_tool_threshold=draw(st.integers(2, 6)),
        repeat_error_threshold=draw(st.integers(2, 5)),
        repeat_assistant_threshold=draw(st.integers(2, 5)),
        cycle_repeats=draw(st.integers(2, 4)),
        max_cycle_length=draw(st.integers(2, 4)),
        repeat_frequency_threshold=frequency,
        frequency_window_size=draw(st.integers(frequency, 14)),
        ignore_tools=draw(st.frozensets(st.sampled_from(TOOLS), max_size=2)),
        tool_threshold_overrides=draw(
            st.dictionaries(st.sampled_from(TOOLS), st.integers(2, 12), max_size=2)
        ),
        progress_aware=draw(st.booleans()),
        no_progress_calls=draw(st.sampled_from([0, 2, 3, 5, 8])),
    )


# Mostly a few distinct arguments and outputs, so that loops happen; sometimes anything at all.
small_values = st.recursive(
    json_scalars | hashable_values,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(hashable_values, inner, max_size=3)
        | st.builds(Pair, inner, inner)
    ),
    max_leaves=8,
)
few_arguments = st.sampled_from([{"path": "a.ts"}, {"path": "b.ts"}, {}, None, {"q": SECRET}])
arguments = st.one_of(few_arguments, few_arguments, few_arguments, small_values)
few_outputs = st.sampled_from(["ok", "Pending", "Running", f"token {SECRET}", None])
outputs = st.one_of(few_outputs, few_outputs, few_outputs, small_values)
errors = st.one_of(
    st.none(),
    st.none(),
    st.sampled_from(["boom at line 12", "boom at line 14", f"denied {SECRET}"]),
    st.builds(ValueError, st.sampled_from(["bad 1", "bad 2"])),
    small_values,
)
names = st.one_of(st.sampled_from(TOOLS), st.sampled_from(TOOLS), st.text(max_size=6))
call_ids = st.one_of(st.none(), st.sampled_from(["c1", "c2", "c3"]), st.text(max_size=4))
texts = st.sampled_from(["Done.", "  Done. ", "", f"The key is {SECRET}"]) | st.text(max_size=10)
tool_calls = st.lists(st.tuples(st.sampled_from(TOOLS), few_arguments), max_size=2)

step = st.tuples(st.just("step"), names, arguments, outputs, errors, call_ids)
"""A tool call and, unless it is stopped, its result."""
loop = st.tuples(st.just("loop"), st.integers(1, 6), st.integers(1, 6))
"""The last 1-6 steps and messages again, 1-6 times: repeats, cycles, no progress."""
spread = st.tuples(st.just("spread"), st.integers(1, 6))
"""The last step again, 1-6 times, each after a call never seen before: window frequency."""
hard_events = st.one_of(
    step,
    step,
    loop,
    loop,
    spread,
    st.tuples(st.just("turn_start")),
    st.tuples(st.just("tool_call"), names, arguments, call_ids),
    st.tuples(st.just("tool_result"), names, outputs, errors, call_ids),
    st.tuples(st.just("assistant_message"), texts, tool_calls),
)
"""Events of a run, without clock, mode or state changes."""
events = st.one_of(
    hard_events,
    hard_events,
    hard_events,
    st.tuples(st.just("tick"), st.floats(0, 30)),
    st.tuples(st.just("reset")),
    st.tuples(st.just("release")),
    st.tuples(st.just("configure"), configs()),
    st.tuples(st.just("restore")),
)


def _step(name: str, args: Any = None, output: Any = "ok", error: Any = None) -> tuple[Any, ...]:
    return ("step", name, args, output, error, None)


LOOPING: dict[Signal, list[tuple[Any, ...]]] = {
    Signal.REPEATED_TOOL_CALL: [_step("read", {"path": "a.ts"}), ("loop", 1, 3)],
    Signal.TOOL_CYCLE: [_step("a"), _step("b"), ("loop", 2, 3)],
    Signal.TOOL_FREQUENCY: [_step("read", {"path": "a.ts"}), ("spread", 4)],
    # the same calls and results again, in another order each time: no fixed cycle or walk
    Signal.NO_PROGRESS: [_step(name) for name in "abcdefgbadcfeggfedcba"],
    Signal.REPEATED_SEQUENCE: [
        _step("a"),
        _step("b"),
        _step("read"),
        _step("poll"),
        ("loop", 4, 3),
    ],
    Signal.NEAR_REPEAT: [
        _step("edit", {"n": 1}, "\n".join(["view", *["line"] * (20 + n)])) for n in range(6)
    ],
    Signal.NO_NEW_INFO: [
        _step("find", {"name": f"N{n}"}, f'No matches for "N{n}"') for n in range(10)
    ],
    Signal.REPEATED_TOOL_ERROR: [_step("run", {"n": n}, error=f"boom {n}") for n in range(3)],
    Signal.FAILING_TURNS: [
        event
        for n in range(8)
        for event in (
            ("turn_start",),
            ("assistant_message", "", [("run", {"n": n})]),
            _step("run", {"n": n}, error=("bad", "worse")[n % 2]),
        )
    ],
    Signal.REPEATED_ASSISTANT_RESPONSE: [("assistant_message", "Done.", []), ("loop", 1, 3)],
    Signal.REPLY_CYCLE: [
        ("assistant_message", text, [])
        for text in ["Sorry, which order do you mean?", "Could you give me the order number?"] * 3
    ],
}
"""A stream that stops for each hard signal under the defaults (in a thread for a reply cycle);
every property runs them."""


def with_looping_examples(test: Any) -> Any:
    """Run ``test`` on the :data:`LOOPING` streams too, whatever hypothesis generates."""
    for signal, stream in LOOPING.items():
        test = example(_config_of(signal), stream)(test)
    return test


def _config_of(signal: Signal) -> LoopGuardConfig:
    """The defaults, in a thread for the signal only a conversation shows (SPEC §12 R9)."""
    return LoopGuardConfig(scope="thread" if signal is Signal.REPLY_CYCLE else "run")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Driver:
    """Feeds generated events to a detector; each verdict comes back with its event kind."""

    def __init__(self, config: LoopGuardConfig, *, listen: bool = False) -> None:
        self.clock = Clock()
        self.heard: list[DetectorEvent] = []
        listener = self.heard.append if listen else None
        self.detector = LoopDetector(config, clock=self.clock, listener=listener)
        self.replayable: list[tuple[Any, ...]] = []  # steps and messages, for loops to replay
        self.fresh = 0

    def apply(self, event: tuple[Any, ...]) -> list[tuple[str, Verdict]]:
        d, kind = self.detector, event[0]
        if kind == "loop":
            _, length, times = event
            again = self.replayable[-length:] * times
            return [verdict for replayed in again for verdict in self.apply(replayed)]
        if kind == "spread":
            verdicts = []
            last = self.replayable[-1:]
            for _ in range(event[1]):
                self.fresh += 1
                verdicts += self.apply(("step", "write", {"n": self.fresh}, "ok", None, None))
                verdicts += [verdict for replayed in last for verdict in self.apply(replayed)]
            return verdicts
        if kind in ("step", "assistant_message"):
            self.replayable.append(event)
        if kind == "step":
            _, name, args, output, error, call_id = event
            verdicts = [("tool_call", d.tool_call(name, args, call_id=call_id))]
            if not verdicts[0][1].stops:
                result = d.tool_result(name, output, error=error, call_id=call_id)
                verdicts.append(("tool_result", result))
            return verdicts
        if kind == "turn_start":
            return [(kind, d.turn_start())]
        if kind == "tool_call":
            return [(kind, d.tool_call(event[1], event[2], call_id=event[3]))]
        if kind == "tool_result":
            return [(kind, d.tool_result(event[1], event[2], error=event[3], call_id=event[4]))]
        if kind == "assistant_message":
            return [(kind, d.assistant_message(event[1], event[2]))]
        if kind == "tick":
            self.clock.now += event[1]
            return [(kind, d.tick())]
        if kind == "reset":
            return [(kind, d.reset())]
        if kind == "release":
            d.release()
        elif kind == "configure":
            d.configure(event[1])
        else:
            state = json.loads(json.dumps(d.export_state()))
            assert SECRET not in json.dumps(state)
            if d.restore_state(state):
                assert d.export_state() == state
        return []


def check(d: LoopDetector, kind: str, verdict: Verdict) -> None:
    """The invariants every verdict and the detector's state keep."""
    mode = d.config.mode
    assert verdict.action in ("allow", "warn", "observe", "block", "abort")
    assert (verdict.action == "allow") == (verdict.signal is None)
    assert SECRET not in verdict.message
    if mode == "off":
        assert verdict.action == "allow"
    if verdict.stops:
        assert mode == "on"
        assert verdict.signal is not None
        assert not verdict.signal.is_soft
        assert d.tripped is not None
    if verdict.action == "block":
        assert kind == "tool_call"
    if kind == "tick":
        assert not verdict.stops
    if verdict.action == "warn":
        assert verdict.signal is not None
        assert verdict.signal.is_soft
    if verdict.action == "observe":
        assert mode == "observe"
        assert verdict.signal is not None
        assert not verdict.signal.is_soft
    if verdict.tripped:
        assert verdict.stops
    if d.tripped is not None:
        assert mode == "on"


@PROPERTY
@given(configs(), st.lists(events, max_size=40))
@with_looping_examples
def test_detector_never_raises_and_keeps_its_invariants(
    config: LoopGuardConfig, stream: list[tuple[Any, ...]]
) -> None:
    """Any stream of events, under any configuration: verdicts keep their contract."""
    driver = Driver(config)
    d = driver.detector
    latched = False
    for event in stream:
        if event[0] in ("reset", "release", "configure", "restore"):
            latched = False
        for kind, verdict in driver.apply(event):
            check(d, kind, verdict)
            if latched and kind in ("tool_call", "turn_start"):
                assert verdict.tripped
            latched = latched or verdict.stops
        limits = d._view.limits
        assert len(d._view.calls) <= limits.history
        assert d._view.sigs == [c.sig for c in d._view.calls]
        assert len(d._view.memory.export()[0]) == 512  # a fixed size, whatever was seen
        assert len(d._view.replies.recent) <= max(1, limits.reply_laps * limits.reply_cycle)
        assert len(d._record.export_state()["reported"]) <= MAX_REPORTED


class AskingEveryCheck:
    """A table of the checks to ask about an event (``RESULT_CHECKS`` and the like) that
    asks every check, whatever holds of the event."""

    def __init__(self, table: tuple[tuple[Any, ...], ...]) -> None:
        self.every = table[-1]  # every fact holds: every check

    def __getitem__(self, facts: int) -> tuple[Any, ...]:
        return self.every


def _verdicts(config: LoopGuardConfig, stream: list[tuple[Any, ...]]) -> list[Any]:
    driver = Driver(config)
    return [driver.apply(event) for event in stream]


@PROPERTY
@given(configs(), st.lists(events, max_size=40))
@with_looping_examples
def test_asking_only_the_checks_a_fact_calls_for_changes_no_verdict(
    config: LoopGuardConfig, stream: list[tuple[Any, ...]]
) -> None:
    """The premise of asking fewer rules about a result, a turn or an answer (``Rule.needs``):
    every verdict is the one asking every check gives. (A check not asked may still find a
    streak it found before, reported once already or stopped on: asking it again changes
    nothing a user sees.)"""
    asked = _verdicts(config, stream)
    with pytest.MonkeyPatch.context() as patch:
        for table in ("RESULT_CHECKS", "TURN_CHECKS", "ANSWER_CHECKS"):
            patch.setattr(judge_module, table, AskingEveryCheck(getattr(judge_module, table)))
        every = _verdicts(config, stream)
    found: set[tuple[Any, Any]] = set()  # the loops found so far (signal and key)
    reconfigured = False
    for event, mine, theirs in zip(stream, asked, every, strict=True):
        reconfigured = reconfigured or event[0] == "configure"
        if mine != theirs:  # only a loop found before, found again (after a release, say)
            again = {(v.signal, v.key) for _, v in theirs if v.signal is not None}
            # or a streak a new configuration's lower threshold put past it: reported at the
            # next event of its kind, not at once
            streaks = {signal for signal, _ in again} <= _STREAKS
            assert again <= found or (reconfigured and streaks), (mine, theirs)
        found |= {(v.signal, v.key) for _, v in mine if v.signal is not None}


_STREAKS = {
    Signal.REPEATED_ASSISTANT_RESPONSE,
    Signal.REPLY_CYCLE,
    Signal.REPEATED_TOOL_ERROR,
    Signal.FAILING_TURNS,
    Signal.NO_NEW_INFO,
}
"""The signals of a streak the view keeps counting, which a check finds whenever asked."""


@PROPERTY
@given(configs(), st.lists(hard_events, max_size=40))
@with_looping_examples
def test_observe_mode_detects_what_on_mode_stops(
    config: LoopGuardConfig, stream: list[tuple[Any, ...]]
) -> None:
    """Up to the first stop, observe mode sees the same loop on the same event."""
    on = Driver(config.model_copy(update={"mode": "on"}))
    observe = Driver(config.model_copy(update={"mode": "observe"}))
    for event in stream:
        for (_, stopped), (_, observed) in zip(on.apply(event), observe.apply(event), strict=False):
            if stopped.stops:
                assert observed.action == "observe"
                assert (observed.signal, observed.tools, observed.count, observed.key) == (
                    stopped.signal,
                    stopped.tools,
                    stopped.count,
                    stopped.key,
                )
                return
            assert observed.action in ("allow", "warn")
            assert observed.signal is stopped.signal


run_events = st.one_of(
    hard_events,
    hard_events,
    st.tuples(st.just("tick"), st.floats(0, 30)),
    st.tuples(st.just("reset")),
    st.tuples(st.just("release")),
)
"""Events of a run, with the clock moving, resets and releases; no configuration changes."""


@PROPERTY
@given(configs(), st.lists(run_events, max_size=40))
@with_looping_examples
@example(
    LoopGuardConfig(),
    [
        *LOOPING[Signal.REPEATED_TOOL_CALL],
        ("release",),
        ("tick", 200.0),
        ("reset",),
        ("assistant_message", "Done.", [("read", {})]),
    ],
)
def test_replaying_what_a_listener_heard_gives_the_live_verdicts(
    config: LoopGuardConfig, stream: list[tuple[Any, ...]]
) -> None:
    """What a listener heard, replayed on its recorded clock, is decided and heard the same."""
    live = Driver(config, listen=True)
    verdicts = [verdict for event in stream for _, verdict in live.apply(event)]
    heard = [event.verdict for event in live.heard if event.kind != "release"]
    assert heard == ([] if config.mode == "off" else verdicts)  # off tracks nothing
    assert all(SECRET not in str(event.digest) for event in live.heard)
    clock, reheard = Clock(), list[DetectorEvent]()
    again = LoopDetector(config, clock=clock, listener=reheard.append)
    for event in live.heard:
        clock.now = event.elapsed
        assert again.replay(event) == event.verdict
    assert reheard == live.heard


def first_stop(config: LoopGuardConfig, stream: list[tuple[Any, ...]]) -> Signal | None:
    driver = Driver(config.model_copy(update={"mode": "on"}))
    for event in stream:
        for _, verdict in driver.apply(event):
            if verdict.stops:
                return verdict.signal
    return None


@pytest.mark.parametrize(("signal", "stream"), LOOPING.items(), ids=[s.value for s in LOOPING])
def test_explicit_examples_stop_for_every_hard_signal(
    signal: Signal, stream: list[tuple[Any, ...]]
) -> None:
    """The streams every property also runs do stop runs for each reason: none is vacuous."""
    assert first_stop(_config_of(signal), stream) is signal
