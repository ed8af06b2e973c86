"""Reliability of the pure detector: fuzzed streams, a reference model, hostile values, bounds.

The differential tests feed the same event streams to :class:`LoopDetector` and to
``reference_model.ReferenceGuard`` (an independent restatement of SPEC §2) and require the same
verdicts. The other tests feed arbitrary and hostile values and require that the detector never
raises and that what it keeps stays bounded, however long the run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_model import (
    AssistantMessage,
    Decision,
    Event,
    ReferenceConfig,
    ReferenceGuard,
    Tick,
    ToolCall,
    ToolResult,
    TurnStart,
    signature,
)

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Verdict


def fuzz(examples: int) -> settings:
    """Hypothesis settings for fuzzing: no deadline (the box is shared and noisy)."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


# --- a small alphabet, so that loops actually happen ----------------------------------------------

TOOLS = ("read", "grep", "test", "sleep")
ARGS: tuple[object, ...] = (
    {},
    {"path": "a.py"},
    {"path": "b.py"},
    {"path": "a.py", "lines": 10},
    {"lines": 10.0, "path": "a.py"},  # the same call as the one above
    {"q": [1, 2]},
    {"q": (1, 2)},  # the same call as the one above
    {"q": [2, 1]},
)
OUTPUTS = ("ok", "3 failed", "3  failed ", "progress 45%", "progress 50%", "")
ERRORS = (
    "boom",
    "  boom ",
    "SyntaxError at line 12",
    "SyntaxError at line 14",  # the same error as the one above
    "bad pointer 0x7fab12",
    "bad pointer 0x7f0c",  # the same error as the one above
    "deadline 2024-05-01T10:00:00Z passed",
    "deadline 2025-11-30T23:59:59Z passed",  # the same error as the one above
    "job 0f8fad5b-d9cb-469f-a165-70867728950e failed",
    "job 7c9e6679-7425-40de-944b-e07fc1f90ae7 failed",  # the same error as the one above
)
CALLS = sorted({signature(name, args) for name in TOOLS for args in ARGS})
"""The distinct calls of the alphabet: a deterministic tool answers each one way."""
TEXTS = ("Checking again.", "Checking  again.", " Checking again.\n", "Done.", "", "   ")
TICKS = (0.0, 0.5, 1.0, 2.5)

# --- configurations ------------------------------------------------------------------------------


@st.composite
def reference_configs(draw: st.DrawFn, *, progress_aware: bool) -> ReferenceConfig:
    """A valid configuration with small thresholds, so that every signal can fire."""
    frequency = draw(st.integers(2, 5))
    return ReferenceConfig(
        mode=draw(st.sampled_from(("on", "observe"))),
        max_turns=draw(st.integers(1, 6)),
        turn_timeout_ms=draw(st.integers(1, 12_000)),
        repeat_tool_threshold=draw(st.integers(2, 4)),
        repeat_error_threshold=draw(st.integers(2, 4)),
        repeat_assistant_threshold=draw(st.integers(2, 4)),
        cycle_repeats=draw(st.integers(2, 3)),
        max_cycle_length=draw(st.integers(2, 4)),
        repeat_frequency_threshold=frequency,
        frequency_window_size=draw(st.integers(frequency, 10)),
        ignore_tools=frozenset(draw(st.sets(st.sampled_from(TOOLS), max_size=2))),
        tool_threshold_overrides=draw(
            st.dictionaries(st.sampled_from(TOOLS), st.integers(2, 12), max_size=2)
        ),
        progress_aware=progress_aware,
        no_progress_calls=draw(st.sampled_from((0, 2, 3, 5, 8))) if progress_aware else 0,
    )


# --- event streams -------------------------------------------------------------------------------

turn_starts = st.just(TurnStart())
ticks = st.sampled_from(TICKS).map(Tick)
assistant_messages = st.builds(
    AssistantMessage,
    st.sampled_from(TEXTS),
    st.sampled_from(((), (("read", {"path": "a.py"}),))),
)


def _calls_and_results() -> st.SearchStrategy[Event]:
    tools = st.sampled_from(TOOLS)
    call = st.builds(ToolCall, tools, st.sampled_from(ARGS))
    success = st.builds(ToolResult, tools, st.sampled_from(OUTPUTS))
    failure = st.builds(ToolResult, tools, error=st.sampled_from(ERRORS))
    return st.one_of(call, call, call, success, failure)


seed_streams = st.lists(
    st.one_of(_calls_and_results(), _calls_and_results(), turn_starts, assistant_messages, ticks),
    max_size=60,
)


@st.composite
def deterministic_streams(draw: st.DrawFn) -> list[Event]:
    """A stream whose tools always answer the same call with the same outcome.

    Results arrive in any order when calls carry ids, and per tool in call order when they do
    not; at most three calls are pending at a time.
    """
    with_ids = draw(st.booleans())
    answers = draw(
        st.lists(
            st.one_of(
                st.sampled_from(OUTPUTS).map(lambda text: ToolResult("", text)),
                st.sampled_from(ERRORS).map(lambda text: ToolResult("", error=text)),
            ),
            min_size=len(CALLS),
            max_size=len(CALLS),
        )
    )
    steps = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("call"), st.sampled_from(TOOLS), st.integers(0, len(ARGS) - 1)),
                st.tuples(st.just("result"), st.integers(0, 2)),
                st.tuples(st.just("turn")),
                st.tuples(st.just("say"), assistant_messages),
                st.tuples(st.just("tick"), ticks),
            ),
            max_size=60,
        )
    )
    events: list[Event] = []
    pending: list[tuple[str, int, str | None]] = []
    for step in steps:
        if step[0] == "call" and len(pending) < 3:
            name, arg = step[1], step[2]
            call_id = f"call_{len(events)}" if with_ids else None
            pending.append((name, arg, call_id))
            events.append(ToolCall(name, ARGS[arg], call_id))
        elif step[0] in ("call", "result") and pending:
            if with_ids:
                name, arg, call_id = pending.pop(step[-1] % len(pending))
            else:  # the oldest pending call of some tool
                name = pending[step[-1] % len(pending)][0]
                name, arg, call_id = pending.pop(
                    next(i for i, p in enumerate(pending) if p[0] == name)
                )
            answer = answers[CALLS.index(signature(name, ARGS[arg]))]
            events.append(dataclasses.replace(answer, name=name, call_id=call_id))
        elif step[0] == "turn":
            events.append(TurnStart())
        elif step[0] in ("say", "tick"):
            events.append(step[1])
    return events


# --- running a stream ----------------------------------------------------------------------------


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def feed(detector: LoopDetector, clock: FakeClock, event: Event) -> Verdict:
    """Give ``event`` to ``detector``."""
    if isinstance(event, Tick):
        clock.now += event.seconds
        return detector.tick()
    if isinstance(event, TurnStart):
        return detector.turn_start()
    if isinstance(event, ToolCall):
        return detector.tool_call(event.name, event.args, event.call_id)
    if isinstance(event, ToolResult):
        return detector.tool_result(
            event.name, event.output, error=event.error, call_id=event.call_id
        )
    return detector.assistant_message(event.text, event.tool_calls)


def assert_same_verdicts(config: ReferenceConfig, events: Sequence[Event]) -> None:
    """Verdicts match the model's up to its first detection; after a stop, so do refusals."""
    model = ReferenceGuard(config)
    clock = FakeClock()
    detector = LoopDetector(LoopGuardConfig(**config.as_values()), clock=clock)
    stopped = False
    for index, event in enumerate(events):
        expected = model.feed(event)
        verdict = feed(detector, clock, event)
        if stopped:
            assert verdict.stops == expected.stops, f"event {index}: {event}"
            continue
        got = Decision(verdict.action, verdict.signal and verdict.signal.value)
        assert got == expected, f"event {index}: {event}"
        if expected.action == "observe":
            return  # later observations depend on what counts as one loop: not modelled
        stopped = expected.stops


@fuzz(1200)
@given(config=reference_configs(progress_aware=False), events=seed_streams)
def test_call_only_verdicts_match_the_reference_model(
    config: ReferenceConfig, events: list[Event]
) -> None:
    """With progress_aware=False the detector decides exactly as SPEC §2's seed rules say."""
    assert_same_verdicts(config, events)


@fuzz(600)
@given(config=reference_configs(progress_aware=True), events=deterministic_streams())
def test_progress_awareness_changes_nothing_when_tools_are_deterministic(
    config: ReferenceConfig, events: list[Event]
) -> None:
    """When every call has one outcome, progress awareness only adds the no-progress signal,
    up to the first event where SPEC §11 decides otherwise (see ``_seed_prefix``)."""
    assert_same_verdicts(config, _seed_prefix(config, events))


def _seed_prefix(config: ReferenceConfig, events: list[Event]) -> list[Event]:
    """The events before the first one where SPEC §11 or §13 changes the seed's progress-aware
    rules: a repeat made after a different call succeeded (decided on its result, N1), an error
    of a call that failed before with other results since (the same failing call whatever comes
    between, §11 R4 and §12 R4'), a reply after a
    tool result the run had not seen (a reply after new information is never a repeat, §13
    N12), or a call repeated after another call's new result (pacing, §13 N10)."""
    last_seen: dict[tuple[str, str], int] = {}
    successes: list[int] = []  # event indexes of successful results
    results: list[int] = []  # event indexes of every result
    pending: list[tuple[str, str, str | None]] = []  # name, signature, call id
    failed_at: dict[tuple[str, str], int] = {}
    outputs: set[str] = set()  # what successful results said
    news_at: list[int] = []  # event indexes of results the run had not seen
    for index, event in enumerate(events):
        reply = isinstance(event, AssistantMessage) and event.text.strip() and not event.tool_calls
        if reply and news_at:
            return events[:index]
        if isinstance(event, ToolCall) and event.name not in config.ignore_tools:
            sig = signature(event.name, event.args)
            before = last_seen.get(sig)
            if before is not None and any(before < at for at in successes):
                return events[:index]
            last_seen[sig] = index
            pending.append((event.name, repr(sig), event.call_id))
        elif isinstance(event, ToolResult) and event.name not in config.ignore_tools:
            match = next(
                (p for p in pending if p[0] == event.name and p[2] == event.call_id), None
            ) or next((p for p in pending if p[0] == event.name), None)
            if match is None:
                continue
            pending.remove(match)
            key = (match[0], match[1])
            if event.error is None:
                successes.append(index)
                failed_at.pop(key, None)
                said = repr(event.output)
                if said not in outputs:
                    outputs.add(said)
                    news_at.append(index)
            else:
                earlier = failed_at.get(key)
                if earlier is not None and any(earlier < at for at in results):
                    return events[:index]  # failed before, other results between (R4, R4')
                failed_at[key] = index
            results.append(index)
    return events


def test_reference_model_sees_every_signal_in_the_fuzzed_streams() -> None:
    """The differential tests are not vacuous: each hard signal fires in some stream."""
    streams: list[tuple[ReferenceConfig, list[Event]]] = [
        (ReferenceConfig(), [ToolCall("read", {"path": "a.py"})] * 3),
        (ReferenceConfig(), [ToolCall("read", {}), ToolCall("grep", {})] * 3),
        (
            ReferenceConfig(),
            [
                ToolCall("read", {}),
                ToolCall("grep", {}),
                ToolCall("test", {}),
                ToolCall("read", {}),
                ToolCall("sleep", {}),
                ToolCall("read", {}),
                ToolCall("test", {}),
                ToolCall("read", {}),
            ],
        ),
        (
            ReferenceConfig(progress_aware=True, no_progress_calls=8, cycle_repeats=5),
            [ToolCall(name, {}) for name in ("read", "grep", "test", "sleep")] * 3,
        ),
        (ReferenceConfig(), [ToolResult("read", error="line 12")] * 3),
        (ReferenceConfig(), [AssistantMessage("Checking again.")] * 3),
    ]
    signals = set()
    for config, events in streams:
        model = ReferenceGuard(config)
        signals |= {model.feed(event).signal for event in events}
        assert_same_verdicts(config, events)
    assert signals >= {
        "repeated_tool_call",
        "tool_cycle",
        "tool_frequency",
        "no_progress",
        "repeated_tool_error",
        "repeated_assistant_response",
    }


# --- arbitrary values ----------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.binary(),
    st.datetimes(),
    st.dates(),
    st.timedeltas(),
    st.decimals(),
    st.uuids(),
    st.complex_numbers(),
    st.fractions(),
)
hashables = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.binary(),
    st.tuples(st.integers(), st.text()),
    st.frozensets(st.integers(), max_size=3),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(hashables, inner, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.sets(hashables, max_size=4),
    ),
    max_leaves=20,
)
names = st.one_of(st.sampled_from(TOOLS), st.text(max_size=20))
call_ids = st.one_of(st.none(), st.sampled_from(("call_1", "call_2")), st.text(max_size=8))
errors = st.one_of(
    st.none(),
    st.text(),
    values,
    st.builds(ValueError, st.text()),
    st.builds(RuntimeError, values),
)


def _operations() -> st.SearchStrategy[tuple[Any, ...]]:
    return st.one_of(
        st.tuples(st.just("turn_start")),
        st.tuples(st.just("tool_call"), names, values, call_ids),
        st.tuples(st.just("tool_call"), names, values, call_ids),
        st.tuples(st.just("tool_result"), names, values, errors, call_ids),
        st.tuples(
            st.just("assistant_message"),
            st.text(),
            st.lists(st.tuples(names, values), max_size=3),
        ),
        st.tuples(st.just("tick"), st.floats(0, 1_000)),
        st.tuples(st.just("reset")),
    )


@st.composite
def any_configs(draw: st.DrawFn) -> LoopGuardConfig:
    """Any valid configuration, the extremes included."""
    frequency = draw(st.integers(2, 30))
    return LoopGuardConfig(
        mode=draw(st.sampled_from(("on", "observe", "off"))),
        locale=draw(st.sampled_from(("en", "ko"))),
        max_turns=draw(st.integers(1, 50)),
        repeat_tool_threshold=draw(st.integers(2, 30)),
        repeat_error_threshold=draw(st.integers(2, 30)),
        cycle_repeats=draw(st.integers(2, 10)),
        max_cycle_length=draw(st.integers(2, 6)),
        repeat_frequency_threshold=frequency,
        frequency_window_size=draw(st.integers(frequency, 60)),
        ignore_tools=draw(st.frozensets(st.sampled_from(TOOLS), max_size=2)),
        tool_threshold_overrides=draw(
            st.dictionaries(st.sampled_from(TOOLS), st.integers(2, 100), max_size=3)
        ),
        progress_aware=draw(st.booleans()),
        no_progress_calls=draw(st.sampled_from((0, 2, 8, 40))),
    )


def apply(detector: LoopDetector, clock: FakeClock, operation: tuple[Any, ...]) -> Verdict:
    """Perform one generated operation."""
    kind, *args = operation
    if kind == "tool_call":
        return detector.tool_call(*args)
    if kind == "tool_result":
        name, output, error, call_id = args
        return detector.tool_result(name, output, error=error, call_id=call_id)
    if kind == "assistant_message":
        return detector.assistant_message(*args)
    if kind == "tick":
        clock.now += args[0]
        return detector.tick()
    return getattr(detector, kind)()


_MAX_REPORTED_SIZE = 256 * 80 + 2_000
"""Room for observe mode's record of the distinct loops it reported, and the counters."""


def history_bound(config: LoopGuardConfig) -> int:
    """Calls a run may remember, from the configuration alone: never the run's length."""
    thresholds = [config.repeat_tool_threshold, *config.tool_threshold_overrides.values()]
    return (
        config.frequency_window_size
        + config.max_cycle_length * config.cycle_repeats
        + max(thresholds)
        + config.no_progress_calls
        + 1
    )


@fuzz(400)
@given(config=any_configs(), operations=st.lists(_operations(), max_size=80))
def test_detector_never_raises_and_stays_bounded_on_arbitrary_events(
    config: LoopGuardConfig, operations: list[tuple[Any, ...]]
) -> None:
    """Arbitrary names, arguments, outputs and errors give verdicts, never exceptions."""
    clock = FakeClock()
    detector = LoopDetector(config, clock=clock)
    for operation in operations:
        verdict = apply(detector, clock, operation)
        assert verdict.action in ("allow", "warn", "observe", "block", "abort")
        assert (verdict.signal is None) == (verdict.action == "allow")
    state = detector.export_state()
    assert len(state["calls"]) <= history_bound(config)
    json.dumps(state, allow_nan=False)


@fuzz(100)
@given(config=any_configs(), operations=st.lists(_operations(), min_size=1, max_size=40))
def test_exported_state_size_does_not_grow_with_the_run(
    config: LoopGuardConfig, operations: list[tuple[Any, ...]]
) -> None:
    """After a thousand events a run's exported state is no larger than its windows allow."""
    clock = FakeClock()
    detector = LoopDetector(config, clock=clock)
    replay = [op for op in operations if op[0] != "reset"] or [("turn_start",)]
    sizes = []
    for index in range(1_000):
        apply(detector, clock, replay[index % len(replay)])
        if index % 50 == 49:
            sizes.append(len(json.dumps(detector.export_state())))
    # a remembered call is its name (at most 20 characters), a digest, an outcome and an id
    per_call = 20 * 6 + 200
    assert max(sizes) <= history_bound(config) * per_call + _MAX_REPORTED_SIZE


@fuzz(120)
@given(
    config=any_configs(),
    before=st.lists(_operations(), max_size=40),
    after=st.lists(_operations(), max_size=40),
)
def test_restored_detector_decides_like_the_original(
    config: LoopGuardConfig,
    before: list[tuple[Any, ...]],
    after: list[tuple[Any, ...]],
) -> None:
    """A run continued from its exported state (another process's, say) gives the same verdicts."""
    clock = FakeClock()
    original = LoopDetector(config, clock=clock)
    for operation in before:
        apply(original, clock, operation)
    restored = LoopDetector(config, clock=clock)
    restored.restore_state(json.loads(json.dumps(original.export_state())))
    for operation in after:
        now = clock.now
        expected = apply(original, clock, operation)
        clock.now = now
        assert apply(restored, clock, operation) == expected, operation


# --- hostile values ------------------------------------------------------------------------------


class Hostile:
    """An object every dunder of which raises."""

    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")


class CollidingKey:
    """A dict key whose hash works but whose comparisons and repr raise."""

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __lt__(self, other: object) -> bool:
        raise RuntimeError("lt")

    def __repr__(self) -> str:
        raise RuntimeError("repr")


class HostileMapping(Mapping[str, int]):
    """A mapping whose every method raises."""

    def __getitem__(self, key: str) -> int:
        raise RuntimeError("getitem")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("iter")

    def __len__(self) -> int:
        raise RuntimeError("len")


class HostileContent:
    """A tool output whose ``content`` attribute raises when read."""

    @property
    def content(self) -> str:
        raise RuntimeError("content")


class HostileException(Exception):
    """An exception whose message cannot be rendered."""

    def __str__(self) -> str:
        raise RuntimeError("str")


@dataclasses.dataclass
class BrokenDataclass:
    """A dataclass with a field whose value cannot be read."""

    value: int = 0

    def __getattribute__(self, name: str) -> Any:
        if name == "value":
            raise RuntimeError("value")
        return super().__getattribute__(name)


def _cyclic_list() -> list[object]:
    items: list[object] = [1]
    items.append(items)
    return items


def _cyclic_dict() -> dict[str, object]:
    mapping: dict[str, object] = {"a": 1}
    mapping["self"] = {"parent": mapping}
    return mapping


def _deep_list(depth: int = 10_000) -> list[object]:
    root: list[object] = []
    node = root
    for _ in range(depth):
        child: list[object] = []
        node.append(child)
        node = child
    return root


def _deep_dict(depth: int = 10_000) -> dict[str, object]:
    root: dict[str, object] = {}
    node = root
    for _ in range(depth):
        child: dict[str, object] = {}
        node["k"] = child
        node = child
    return root


HOSTILE_VALUES: dict[str, Any] = {
    "cyclic list": _cyclic_list(),
    "cyclic dict": _cyclic_dict(),
    "10,000-deep list": _deep_list(),
    "10,000-deep dict": _deep_dict(),
    "non-string keys": {1: "a", (1, 2): "b", None: "c", 1.5: "d", frozenset({1}): 2, b"k": 3},
    "raising dunders": {"x": Hostile(), "y": [Hostile()]},
    "colliding raising keys": {CollidingKey(): 1, "a": 2},
    "raising mapping": HostileMapping(),
    "raising content attribute": HostileContent(),
    "raising exception message": HostileException(),
    "raising dataclass field": BrokenDataclass(),
    "NaN and infinities": {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, math.nan: 1},
    "signalling NaN decimal": {"d": decimal.Decimal("sNaN")},
    "bytes": {"b": b"\x00\xff", "ba": bytearray(b"x"), "mv": memoryview(b"y"), b"\xfe": 1},
    "lone surrogate": {"s": "\ud800", "\udfff": 1},
    "huge integer": {"n": 10**5000},
    "dates": {"d": dt.date(2024, 1, 1), "t": dt.datetime.now(dt.UTC), "td": dt.timedelta(1)},
    "types and functions": {"t": int, "f": len, "m": math},
}


@pytest.mark.parametrize("value", HOSTILE_VALUES.values(), ids=HOSTILE_VALUES.keys())
@pytest.mark.parametrize("slot", ["arguments", "output", "error"])
def test_detector_never_raises_on_hostile_values(slot: str, value: object) -> None:
    """Cycles, deep nesting, odd keys and raising dunders are handled, in every slot."""
    detector = LoopDetector(LoopGuardConfig())
    for _ in range(4):
        if slot == "arguments":
            detector.tool_call("read", value)
        elif slot == "output":
            detector.tool_call("read", {})
            detector.tool_result("read", value)
        else:
            detector.tool_call("read", {})
            detector.tool_result("read", error=value)
    json.dumps(detector.export_state(), allow_nan=False)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param({"path": "a", "n": 10**5000}, {"path": "b", "n": 10**5000}, id="huge int"),
        pytest.param({"path": "a", "x": Hostile()}, {"path": "b", "x": Hostile()}, id="raising"),
        pytest.param({"path": "a", "d": _deep_list()}, {"path": "b", "d": _deep_list()}, id="deep"),
    ],
)
def test_calls_with_different_arguments_never_collide_on_hostile_values(
    first: object, second: object
) -> None:
    """A value that cannot be serialized does not make different calls look the same."""
    detector = LoopDetector(LoopGuardConfig(progress_aware=False, repeat_tool_threshold=2))
    detector.tool_call("read", first)
    assert detector.tool_call("read", second).action == "allow"


@pytest.mark.slow
def test_fifty_megabyte_strings_are_digested_without_error() -> None:
    """A 50 MB argument, output, error and message each give a verdict."""
    big = "x" * 50_000_000
    detector = LoopDetector(LoopGuardConfig())
    assert detector.tool_call("write", {"content": big}).action == "allow"
    assert detector.tool_result("write", big).action == "allow"
    assert detector.tool_call("write", {"content": big + "y"}).action == "allow"
    assert detector.tool_result("write", error=big).action == "allow"
    assert detector.assistant_message(big).action == "allow"
    assert len(json.dumps(detector.export_state())) < 10_000
