"""The handler's own cost, callback by callback: the apps' callbacks replayed, the caches cold.

``python benchmarks/bench_callbacks.py [REV] [--rounds N] [--warm]``

The callbacks the nine apps of ``bench_apps.py`` send a handler (a recording handler with the
guard's flags, in the apps' handler side) are recorded once, then replayed, each round with
fresh run ids, into the handler's no-op floor and ``LoopGuardCallbackHandler()`` (and, given a
git revision, the handler as committed there: ``bench_ab.load_earlier``), the sides in a
rotating order. Between two callbacks the replay walks about 2 MB of objects, more than a
core's own caches hold (as LangGraph's work between two callbacks does in an app): the guard's
code and data are read again from the shared cache or memory at each callback. So the replay
reproduces most of what the guard costs in the apps (``bench_apps.py``: the handler against
its floor), without the apps' own time and its noise, and says which callback it is spent in.
What it leaves out: replayed outside a graph, no invocation sees a checkpointer, so each is a
run of its own where the apps' checkpointed invocations join their thread's run.
``--warm`` replays without the walk: the guard's cost with its code and data in the caches,
which is what a profiler of a loop of callbacks sees (about a third of it).

Printed: each side's time per model call (the median over rounds), the guard's cost (the side
minus the floor), with a revision the ratio of this checkout's cost to the earlier one's (the
median of the rounds' ratios), and each callback's share.
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import bench_apps
from bench_agent import no_op_like
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard import LoopGuardCallbackHandler

CALLBACKS = (
    "on_chain_start",
    "on_chain_end",
    "on_chain_error",
    "on_chat_model_start",
    "on_llm_start",
    "on_llm_end",
    "on_llm_error",
    "on_tool_start",
    "on_tool_end",
    "on_tool_error",
    "on_retriever_start",
    "on_retriever_end",
    "on_retriever_error",
)

Event = tuple[str, tuple[Any, ...], dict[str, Any]]


class _Recorder(BaseCallbackHandler):
    """Keeps every callback it gets; made with the guard's flags (:func:`no_op_like`), so it
    gets the callbacks the guard gets."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Event] = []


def _keeping(name: str) -> Callable[..., None]:
    def keep(self: _Recorder, *args: Any, **kwargs: Any) -> None:
        self.events.append((name, args, kwargs))

    return keep


for _name in CALLBACKS:
    setattr(_Recorder, _name, _keeping(_name))


def record(apps: dict[str, Callable[..., bench_apps.Run]]) -> tuple[list[Event], int]:
    """The callbacks ``apps`` send a handler, and their model calls."""
    recorder = cast(_Recorder, no_op_like(LoopGuardCallbackHandler(), _Recorder))
    side = bench_apps.Side("recorded", callbacks=[recorder])
    calls = 0
    for build in apps.values():
        calls += build(side, InMemorySaver()).complete(side)
    return recorder.events, calls


def with_fresh_ids(events: list[Event]) -> list[Event]:
    """``events`` with new run ids (the same new id for each old one): a round of its own."""
    new: dict[uuid.UUID, uuid.UUID] = {}

    def fresh(value: Any) -> Any:
        return new.setdefault(value, uuid.uuid4()) if isinstance(value, uuid.UUID) else value

    return [(name, args, {k: fresh(v) for k, v in kwargs.items()}) for name, args, kwargs in events]


class CacheWalk:
    """A walk over about 2 MB of objects (every seventh of ``objects`` small buffers, every
    thirteenth entry of a dict as large): more than a core's own caches hold."""

    def __init__(self, objects: int = 60_000) -> None:
        self._blocks = [bytearray(64) for _ in range(objects)]
        self._table = {i: str(i) for i in range(objects)}
        self._keys = range(0, objects, 13)

    def __call__(self) -> int:
        total = 0
        for block in self._blocks[::7]:
            total += block[0]
        table = self._table
        for key in self._keys:
            total += len(table[key])
        return total


def replay(
    sides: dict[str, BaseCallbackHandler], events: list[Event], rounds: int, *, cold: bool
) -> dict[str, dict[str, list[float]]]:
    """Each side's seconds per callback name (and ``"*"``, all), one entry per round."""
    walk = CacheWalk() if cold else None
    times: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in sides}
    clock = time.perf_counter
    for round_ in range(rounds):
        fresh = with_fresh_ids(events)
        order = list(sides)[round_ % len(sides) :] + list(sides)[: round_ % len(sides)]
        for name in order:
            handler = sides[name]
            spent: dict[str, float] = defaultdict(float)
            gc.collect()
            gc.disable()
            try:
                for callback, args, kwargs in fresh:
                    if walk is not None:
                        walk()
                    method = getattr(handler, callback)
                    start = clock()
                    method(*args, **kwargs)
                    spent[callback] += clock() - start
            finally:
                gc.enable()
            for callback in CALLBACKS:
                times[name][callback].append(spent.get(callback, 0.0))
            times[name]["*"].append(sum(spent.values()))
    return times


def main() -> None:
    """Replay the apps' callbacks into the handler (and an earlier commit's) and its floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", nargs="?", help="an earlier commit to compare (a git revision)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--warm", action="store_true", help="no walk over memory in between")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    handler = LoopGuardCallbackHandler()
    sides: dict[str, BaseCallbackHandler] = {"floor": no_op_like(handler), "this checkout": handler}
    with tempfile.TemporaryDirectory() as scratch:
        if args.rev is not None:  # first: a revision git does not have fails at once
            import bench_ab  # only with a revision to load

            try:
                earlier = bench_ab.load_earlier(args.rev, Path(scratch))
            except ValueError as exc:
                parser.error(str(exc))
            logging.getLogger(bench_ab.EARLIER).propagate = False
            sides["earlier"] = earlier.LoopGuardCallbackHandler()
        logging.getLogger("langchain_loop_guard").propagate = False  # the apps' own lines
        events, calls = record({**bench_apps.AGENT_APPS, **bench_apps.GRAPH_APPS})
        times = replay(sides, events, args.rounds, cold=not args.warm)
    report(times, calls, args.rounds, cold=not args.warm)


def report(
    times: dict[str, dict[str, list[float]]], calls: int, rounds: int, *, cold: bool
) -> None:
    """Print each side's cost per model call, and each callback's share."""

    def per_call(side: str, callback: str = "*") -> float:
        return statistics.median(times[side][callback]) / calls * 1e6

    caches = "cold caches" if cold else "warm caches"
    print(f"{calls} model calls, {caches}, median of {rounds} rounds, µs per model call:")
    floor = per_call("floor")
    print(f"  floor {floor:,.1f}")
    guards = [side for side in times if side != "floor"]
    for side in guards:
        print(f"  {side} {per_call(side):,.1f}: the guard's cost {per_call(side) - floor:,.1f}")
    if "earlier" in times:
        ratios = [
            (now - base) / (before - base)
            for now, before, base in zip(
                times["this checkout"]["*"], times["earlier"]["*"], times["floor"]["*"], strict=True
            )
        ]
        print(f"  this checkout's cost / the earlier one's: {statistics.median(ratios):.3f}")
    print("  by callback (the guard's cost):", "  ".join(guards))
    for callback in sorted(CALLBACKS, key=lambda c: -per_call("this checkout", c)):
        costs = [per_call(side, callback) - per_call("floor", callback) for side in guards]
        if any(abs(cost) >= 0.05 for cost in costs):
            print(f"    {callback:<20} " + "  ".join(f"{cost:8.1f}" for cost in costs))


if __name__ == "__main__":
    main()
