"""Memory: what a run's state retains, and what a handler keeps after many runs.

Measured with :mod:`tracemalloc`: the bytes allocated while the measured work ran and still
alive after it (``gc.collect()`` first). Inputs are made on the fly and dropped, so only what
the guard keeps is counted. Caches that fill once per process (the message catalogs, compiled
patterns) are warmed up before measuring.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
import tracemalloc
from collections.abc import Callable
from typing import Any
from uuid import uuid4

from _harness import Row
from bench_detector import typical_args, typical_output, typical_text
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from langchain_loop_guard import LoopDetector, LoopGuardConfig
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

CONFIG = LoopGuardConfig(max_turns=1_000_000)
KB = 1024


def retained(work: Callable[[], Any], *, frames: int = 1) -> tuple[int, Any]:
    """Bytes that ``work`` allocated and that are still alive after it, and its result."""
    gc.collect()
    tracemalloc.start(frames)
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, result
    finally:
        tracemalloc.stop()


def _feed_steps(detector: LoopDetector, first: int, steps: int) -> None:
    for i in range(first, first + steps):
        args = typical_args(i)
        detector.turn_start()
        detector.assistant_message(typical_text(i), [("read_file", args)])
        detector.tool_call("read_file", args, f"call_{i}")
        if i % 7:
            detector.tool_result("read_file", typical_output(i), call_id=f"call_{i}")
        else:
            detector.tool_result("read_file", error=f"FileNotFoundError: {i}", call_id=f"call_{i}")


def detector_state() -> list[Row]:
    """A run's detector after a few events and after many, in "on" and "observe" modes."""
    _feed_steps(LoopDetector(CONFIG), 0, 100)  # warm caches
    rows = []
    for events in (12, 1_000, 100_000):

        def run(events: int = events) -> LoopDetector:
            detector = LoopDetector(CONFIG)
            _feed_steps(detector, 0, events // 4)
            return detector

        size, detector = retained(run)
        assert detector.tripped is None
        rows.append(
            Row(
                f"detector state after {events:,} events",
                "-",
                "-",
                size / KB,
                8,
                unit="KB",
                note="non-looping run",
            )
        )

    observe = LoopGuardConfig(mode="observe", max_turns=1_000_000)  # shared, as CONFIG is

    def observed() -> LoopDetector:
        # every call is repeated three times, so every call is a new loop to report
        detector = LoopDetector(observe)
        for i in range(10_000):
            args = typical_args(i // 3)
            detector.tool_call("read_file", args)
            detector.tool_result("read_file", "same")
        return detector

    observed()  # warm the caches of observe mode's reports (message catalogs, reasons)
    size, _ = retained(observed)
    rows.append(
        Row(
            "detector state, observe mode, 3,333 distinct loops",
            "-",
            "-",
            size / KB,
            8,
            unit="KB",
            note="de-duplication of reported loops",
        )
    )
    return rows


HUMAN = [[HumanMessage("Read the module.")]]
ANSWER = LLMResult(
    generations=[
        [
            ChatGeneration(
                message=AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "read_file", "args": {"path": "a.py"}, "id": "call_1"},
                    ],
                )
            )
        ]
    ]
)
RESULT = ToolMessage(content="import os\n", tool_call_id="call_1", name="read_file")
ARGS = {"path": "a.py"}


def short_run(handler: LoopGuardCallbackHandler, *, end: bool = True) -> None:
    """One model turn and one tool call, as LangChain reports them; ended or not."""
    root, model, tool = uuid4(), uuid4(), uuid4()
    handler.on_chain_start(None, {}, run_id=root, parent_run_id=None, metadata={})
    handler.on_chat_model_start({"name": "m"}, HUMAN, run_id=model, parent_run_id=root)
    handler.on_llm_end(ANSWER, run_id=model, parent_run_id=root)
    handler.on_tool_start(
        {"name": "read_file"},
        "{'path': 'a.py'}",
        run_id=tool,
        parent_run_id=root,
        inputs=ARGS,
        tool_call_id="call_1",
    )
    handler.on_tool_end(RESULT, run_id=tool, parent_run_id=root)
    if end:
        handler.on_chain_end({}, run_id=root, parent_run_id=None)


def handler_runs(short_runs: int, unended_runs: int, agent_runs: int) -> list[Row]:
    """Many short runs through one handler; runs that never end; real agent runs."""
    handler = LoopGuardCallbackHandler(CONFIG)
    for _ in range(5_000):  # past every bounded record of ended runs
        short_run(handler)

    def many() -> None:
        for _ in range(short_runs):
            short_run(handler)

    size, _ = retained(many)
    assert handler.status().active_runs == 0
    rows = [
        Row(
            f"{short_runs:,} short runs through one handler",
            "-",
            "-",
            size / KB,
            1024,
            unit="KB",
            note="retained after they all ended",
        )
    ]

    leaky = LoopGuardCallbackHandler(CONFIG)
    # Runs that never report their end fall silent: a registry clock that moves a second per
    # event makes them idle (5 minutes) within the benchmark, so the registry forgets them
    # (runs still in flight it keeps; see bench_load).
    ticks = itertools.count()
    leaky._engine.now = lambda: float(next(ticks))
    registry = leaky.max_runs
    # past the registry and the 4,096 ids it remembers of runs it forgot, every bounded
    # record has been replaced: what that many runs retain is what any more retain
    baseline = 5 * registry
    for _ in range(baseline):
        short_run(leaky, end=False)
    few, _ = retained(lambda: [short_run(leaky, end=False) for _ in range(baseline)])

    def unended() -> None:
        for _ in range(unended_runs):
            short_run(leaky, end=False)

    many_size, _ = retained(unended)
    active = leaky.status().active_runs
    assert active == registry, f"{active} runs tracked, the registry holds {registry}"
    rows.append(
        Row(
            f"runs that never end: retained by {unended_runs:,} vs by {baseline:,}",
            f"{few / KB:,.0f} KB",
            f"{many_size / KB:,.0f} KB",
            many_size / few,
            1.1,
            note=f"registry of {registry:,} runs, {active:,} tracked at the end",
        )
    )
    rows.append(real_agent_runs(agent_runs))
    return rows


def _agent_run(handler: LoopGuardCallbackHandler, i: int) -> None:
    script = [call("read_file", {"path": f"src/{i}/module_{k}.py"}) for k in range(5)]
    model = ScriptedChatModel(script=[*script, "Done."])
    read_file = scripted_tool("read_file", lambda args: f"# {args['path']}\n")
    agent = create_agent(model, [read_file])
    messages = {"messages": [HumanMessage("Read the modules.")]}
    if i % 2:
        agent.invoke(messages, {"callbacks": [handler]})
    else:
        asyncio.run(agent.ainvoke(messages, {"callbacks": [handler]}))


def real_agent_runs(runs: int) -> Row:
    """Real ``create_agent`` runs (sync and async) through one handler: what the guard keeps."""
    handler = LoopGuardCallbackHandler(CONFIG)
    for i in range(20):
        _agent_run(handler, i)

    def many() -> tracemalloc.Snapshot:
        for i in range(runs):
            _agent_run(handler, i)
        gc.collect()
        return tracemalloc.take_snapshot()

    total, snapshot = retained(many, frames=8)
    # allocations with a frame of the package's private modules (the guard, not the test model)
    package = tracemalloc.Filter(True, "*langchain_loop_guard/_*", all_frames=True)
    guard = sum(trace.size for trace in snapshot.filter_traces([package]).traces)
    assert handler.status().active_runs == 0
    return Row(
        f"{runs} real agent runs through one handler",
        "-",
        f"{total / KB:,.1f} KB in all",
        guard / KB,
        1024,
        unit="KB",
        note="allocated in the package and retained",
    )


def main() -> None:
    """Run this file's benchmarks alone."""
    from _harness import format_table

    start = time.perf_counter()
    print(format_table(detector_state() + handler_runs(100_000, 10_000, 60)))
    print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
