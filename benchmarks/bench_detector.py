"""The detector's hot path against its floor: serializing and digesting what it must look at.

The floor of an event is ``json.dumps(payload, sort_keys=True)`` plus one BLAKE2b digest
(``digest_size=8``, the hash the package uses) of it, where the payload is a tool call's
arguments, a result's text or a message's text. A result or a message is also compared, for
information, with a bare digest of its text (no serialization). Subject and floor process the
very same objects in the same run. Every stream is non-looping (each call has new
arguments), so the detector does its full work on every event and never short-circuits on a
tripped run.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from _harness import Row, compare, ratio_row, timed

from langchain_loop_guard import LoopDetector, LoopGuardConfig
from langchain_loop_guard._core._signature import reply_sketch

CONFIG = LoopGuardConfig(max_turns=1_000_000)  # defaults, minus the turn-count warning


def _clock() -> float:
    return 0.0


def floor(payload: object) -> str:
    """The least any guard must do with an event's payload: serialize and digest it."""
    return hashlib.blake2b(json.dumps(payload, sort_keys=True).encode(), digest_size=8).hexdigest()


def bare_digest(text: str) -> str:
    """Less than the floor, for information: a digest of a text as it is."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def typical_args(i: int) -> dict[str, object]:
    """A path and a few options."""
    return {
        "path": f"src/app/services/module_{i}.py",
        "encoding": "utf-8",
        "max_lines": 200,
        "follow_symlinks": False,
    }


def typical_output(i: int) -> str:
    """A test run's summary: a few lines with paths, counts and a duration."""
    return (
        f"============================= test session starts ==============================\n"
        f"collected {i % 50 + 3} items\n\n"
        f"tests/test_module_{i}.py ....F.                                     [100%]\n"
        f"FAILED tests/test_module_{i}.py::test_parse - AssertionError: 'a' != 'b'\n"
        f"==================== 1 failed, 5 passed in 0.{i % 90 + 10}s ===================="
    )


_WORDS = [
    *("parser", "lexer", "cache", "router", "scheduler", "encoder", "decoder", "loader"),
    *("writer", "reader", "session", "token", "queue", "worker", "config", "logger"),
    *("metrics", "client", "server", "handler", "policy", "schema", "buffer", "stream"),
]


def typical_text(i: int) -> str:
    """An assistant answer about one module: most of its words change from one answer to the
    next (answers sharing most of their words are a loop of their own, SPEC §12 R9, §13 R14)."""
    w = [_WORDS[(i * 7 + k) % len(_WORDS)] for k in range(7)]
    return f"Next, {w[0]} and {w[1]}: the {w[2]} {w[3]} {w[4]} for {w[5]} {w[6]} in module {i}."


class RoundInputs:
    """Inputs per round, built once and shared by both sides of the round (then dropped)."""

    def __init__(self, build: Callable[[int], list[Any]]) -> None:
        self._build = build
        self._round: int | None = None
        self._inputs: list[Any] = []

    def __call__(self, round_index: int) -> list[Any]:
        if round_index != self._round:
            self._round, self._inputs = round_index, self._build(round_index)
        return self._inputs


def hot_path(rounds: int) -> list[Row]:
    """Tool call, tool result and assistant message, each against its floor."""
    detector = LoopDetector(CONFIG, clock=_clock)
    batch = 200
    pending = 16  # results answer calls made just before, as in a real step (history is 19)

    def unique(round_index: int, count: int) -> range:
        first = (round_index + 10) * 1_000  # warm-up rounds are negative
        return range(first, first + count)

    call_args = RoundInputs(lambda r: [typical_args(i) for i in unique(r, batch)])
    outputs = RoundInputs(lambda r: [typical_output(i) for i in unique(r, pending)])
    # the second comparison of results feeds other results of other calls: the same output
    # twice would be nothing new to the run (SPEC §13 R12), and the stream must not loop
    others = RoundInputs(
        lambda r: [
            typical_output(i).replace("test_parse", "test_render") for i in unique(r, pending)
        ]
    )
    texts = RoundInputs(lambda r: [typical_text(i) for i in unique(r, batch)])

    def call_floor(r: int) -> float:
        work = call_args(r)
        return timed(lambda: [floor(a) for a in work]) / batch

    def call_subject(r: int) -> float:
        work, tool_call = call_args(r), detector.tool_call
        return timed(lambda: [tool_call("read_file", a) for a in work]) / batch

    def result_floor(r: int) -> float:
        work = outputs(r)
        return timed(lambda: [floor(t) for t in work]) / pending

    def result_bare(r: int) -> float:
        work = others(r)
        return timed(lambda: [bare_digest(t) for t in work]) / pending

    def results_of(inputs: RoundInputs, tool: str) -> Callable[[int], float]:
        def subject(r: int) -> float:
            work, tool_result = inputs(r), detector.tool_result
            call_ids = [f"{tool}_{i}" for i in unique(r, pending)]
            for i, call_id in zip(unique(r, pending), call_ids, strict=True):
                detector.tool_call(tool, {"k": i}, call_id)
            pairs = list(zip(work, call_ids, strict=True))
            return timed(lambda: [tool_result(tool, t, call_id=c) for t, c in pairs]) / pending

        return subject

    result_subject = results_of(outputs, "run_tests")

    def message_floor(r: int) -> float:
        work = texts(r)
        return timed(lambda: [floor(t) for t in work]) / batch

    def message_bare(r: int) -> float:
        work = texts(r)
        return timed(lambda: [bare_digest(t) for t in work]) / batch

    def message_subject(r: int) -> float:
        # without tool calls: a message that calls tools is left to the tool-call signals
        work, message = texts(r), detector.assistant_message
        return timed(lambda: [message(t) for t in work]) / batch

    def sketch_alone(r: int) -> float:
        # what SPEC §13 R14 needs of every reply in any scope (its words, hashed), without
        # the rest of the event: against the floor, the least a reply can cost
        work = texts(r)
        return timed(lambda: [reply_sketch(t) for t in work]) / batch

    calls = compare(call_floor, call_subject, rounds=rounds)
    results = compare(result_floor, result_subject, rounds=rounds)
    messages = compare(message_floor, message_subject, rounds=rounds)
    results_bare = compare(result_bare, results_of(others, "run_test_file"), rounds=rounds)
    messages_bare = compare(message_bare, message_subject, rounds=rounds)
    sketches = compare(message_floor, sketch_alone, rounds=rounds)
    assert detector.tripped is None, f"the benchmark stream must not loop: {detector.tripped}"
    return [
        ratio_row("tool call, typical arguments", calls, 2.5),
        ratio_row("tool result, typical text (~300 chars)", results, 2.5),
        ratio_row("assistant message, no tool calls", messages, 2.5),
        ratio_row("  tool result vs a bare digest of its text", results_bare, None),
        ratio_row("  assistant message vs a bare digest of its text", messages_bare, None),
        ratio_row("  a reply's word sketch alone (§13 R14) vs the floor", sketches, None),
    ]


def _step(detector: LoopDetector, i: int) -> list[Callable[[], object]]:
    """One agent step, four events: a turn, the narrated call, the call, its result."""
    args = typical_args(i)
    return [
        detector.turn_start,
        partial(detector.assistant_message, typical_text(i), [("read_file", args)]),
        partial(detector.tool_call, "read_file", args, f"call_{i}"),
        partial(detector.tool_result, "read_file", typical_output(i), call_id=f"call_{i}"),
    ]


def _events(detector: LoopDetector, first: int, steps: int) -> list[Callable[[], object]]:
    return [event for i in range(first, first + steps) for event in _step(detector, i)]


def _run(events: list[Callable[[], object]]) -> None:
    for event in events:
        event()


def run_length(rounds: int) -> list[Row]:
    """The cost of events 9-20 of a run against events after 10,000 of another."""
    old = LoopDetector(CONFIG, clock=_clock)
    _run(_events(old, 0, 2_500))  # 10,000 events
    steps = 3  # 12 events per batch

    def young_batch(r: int) -> float:
        young = LoopDetector(CONFIG, clock=_clock)
        first = 1_000_000 + (r + 10) * 10
        _run(_events(young, first, 2))  # events 1-8
        events = _events(young, first + 2, steps)
        return timed(lambda: _run(events)) / len(events)

    def old_batch(r: int) -> float:
        events = _events(old, 10_000 + (r + 10) * 10, steps)
        return timed(lambda: _run(events)) / len(events)

    comparison = compare(young_batch, old_batch, rounds=rounds)
    assert old.tripped is None, "the benchmark stream must not loop"
    events = old.snapshot().calls * 4
    return [
        ratio_row(
            "per-event cost at event 10,000 vs event 10",
            comparison,
            1.2,
            note=f"old run ends at {events:,} events",
        )
    ]


def large_arguments(rounds: int) -> list[Row]:
    """A tool call with a 1 MB argument against its floor; a 1 MB result for information."""
    line = "INFO 2024-05-01 worker[17] processed batch in 0.53s: 1024 rows, 0 errors\n"
    body = line * (1_000_000 // len(line))
    payloads = [
        {"path": f"logs/run_{i}.log", "content": f"{i}\n{body}", "append": False} for i in range(16)
    ]
    # each log of another worker: results that bring something new (reading 16 logs of the
    # same lines would be nothing new, SPEC §13 R12)
    texts = [f"{i}\n{body.replace('worker', _WORDS[i])}" for i in range(16)]
    detector = LoopDetector(CONFIG, clock=_clock)

    def call_floor(r: int) -> float:
        args = payloads[r % len(payloads)]
        return timed(lambda: floor(args))

    def call_subject(r: int) -> float:
        args = payloads[r % len(payloads)]
        return timed(lambda: detector.tool_call("write_file", args))

    calls = compare(call_floor, call_subject, rounds=rounds)

    def result_floor(r: int) -> float:
        text = texts[r % len(texts)]
        return timed(lambda: floor(text))

    def result_subject(r: int) -> float:
        text = texts[r % len(texts)]
        detector.tool_call("read_log", {"round": r}, f"log_{r}")
        return timed(lambda: detector.tool_result("read_log", text, call_id=f"log_{r}"))

    results = compare(result_floor, result_subject, rounds=max(5, rounds // 3))

    def result_bare(r: int) -> float:
        text = texts[r % len(texts)]
        return timed(lambda: bare_digest(text))

    bare = compare(result_bare, result_subject, rounds=max(5, rounds // 3))
    assert detector.tripped is None, f"the benchmark stream must not loop: {detector.tripped}"
    return [
        ratio_row("tool call, 1 MB argument", calls, 1.5, unit="ms"),
        ratio_row(
            "tool result, 1 MB text",
            results,
            None,
            unit="ms",
            note="against json.dumps + digest, for information",
        ),
        ratio_row(
            "tool result, 1 MB text vs a bare BLAKE2b digest of its bytes",
            bare,
            2.0,
            unit="ms",
            note="bounded normalization of large texts",
        ),
    ]


HOSTILE_OUTPUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    # a run of ``_`` at the defaults: the search for vendor ids read the rest of the run from
    # each ``_`` (issue 38: 1 KB 2 ms, 32 KB 1.2 s)
    "a run of '_', default masks": ("_", ()),
    # a key that nearly matches a volatile field with several ``*`` (a regular expression
    # backtracked over every split of it: 4,000 characters took over 90 s)
    "a JSON key of '_' that is no field, volatile field '*_*_*'": ('{"a": 1, "_', ("*_*_*",)),
}
"""Outputs that made a mask grow faster than their length: the text (repeated) and names."""


def hostile_masks(rounds: int) -> list[Row]:
    """Masking a 32 KB hostile output against eight times a 4 KB one: 1.00x is linear, a
    quadratic mask is 8x (the texts are masked whole up to 32 KB)."""
    from langchain_loop_guard._core._limits import limits_of
    from langchain_loop_guard._core._masks import LARGE, masked

    rows = []
    for label, (start, names) in HOSTILE_OUTPUTS.items():
        volatile = limits_of(LoopGuardConfig(volatile_fields=list(names))).volatile_of("search")

        def text(size: int, start: str = start) -> str:
            return (start + "_" * size)[:size]

        small, large = text(LARGE // 8), text(LARGE)

        def eight_small(r: int, small: str = small, volatile: Any = volatile) -> float:
            return timed(lambda: masked(small, digits=True, volatile=volatile), repeat=8)

        def one_large(r: int, large: str = large, volatile: Any = volatile) -> float:
            return timed(lambda: masked(large, digits=True, volatile=volatile)) / 8

        comparison = compare(eight_small, one_large, rounds=rounds)
        rows.append(
            ratio_row(
                f"mask of 32 KB vs 4 KB, {label}",
                comparison,
                2.0,
                note="per 4 KB; 1.00x is linear in the output, 8x quadratic",
            )
        )
    return rows


def main() -> None:
    """Run this file's benchmarks alone."""
    from _harness import format_table

    start = time.perf_counter()
    rows = hot_path(rounds=41) + run_length(rounds=301) + large_arguments(rounds=21)
    rows += hostile_masks(rounds=21)
    print(format_table(rows))
    print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
