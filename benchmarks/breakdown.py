"""Where a guarded agent's time goes: the middleware's 200-step agent of ``bench_agent.py``,
taken apart. For diagnosis, not a target; it patches the package's internals while it runs,
so it runs alone, in its own process:

    python benchmarks/breakdown.py

1. The sync middleware row as ``bench_agent.py`` measures it, then twice more with a part of
   the guard taken out: its passes before and after each model call (the guard then only
   adds its prompt hint; without the pass after the model alone, the pass before the next
   call would read the answer it missed, SPEC §13 C3, and do the same work), and the digests
   of the results (served from a cache, as if a result's text cost nothing to read).
2. The wall time, per agent step, of the parts of that pass (each timed where it is called).
3. One result's digests inside the running agent, computed three times in a row: the first
   time pays for whatever the agent's own code pushed out of the processor's caches since
   the guard last ran; the second and third show the same work warm, as a tight loop of a
   microbenchmark measures it.
4. The tool-result row of ``bench_detector.py`` taken apart the same way: the row as it is,
   the row with the result digests served from a cache (what the rest of the event costs),
   and, against the same floor, the whitespace collapse alone and the whole masking alone.
5. The callback handler in the nine apps of ``bench_apps.py`` (sync): the wall time of each
   of its callbacks per model call, and of the digests and detector decisions made inside
   them. What the callbacks spend beyond those is the handler's bookkeeping (its run tree,
   registry, bounds, locks and failing open).
6. The callback handler and the node guard in ``bench_apps.py``'s apps, sync and async, each
   against its no-op floor in the same rounds as the app benchmark measures them (the
   process's CPU time, which a busy neighbour does not lengthen, as ``bench_ab.py --cpu``),
   then with the detector's work taken out: the handler with every decision answered "allow"
   (its digests still made), then with its digests served as constants too (what is left is
   its bookkeeping), and, deciding again, with each result's digests replaced by one plain
   hash of its text (the cheapest a result's digest can be); the node guard with every event
   left unfed (the node's digests are made inside the detector's events). What each part
   costs of the 1.05x the whole guard may.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import hashlib
import logging
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import bench_agent
import bench_apps
import bench_detector
from _harness import compare, compare_pairs, format_table, patched, ratio_row, timed
from langchain.agents.middleware import ToolCallLimitMiddleware
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard._core import _detector, _masks, _view
from langchain_loop_guard._core._detector import ALLOW
from langchain_loop_guard._integrations import _graph_guard, _handler, _middleware, _model_answer
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._middleware import LoopGuardMiddleware
from langchain_loop_guard._integrations._node import LoopGuardNode


def timed_calls(
    owner: Any, name: str, totals: dict[str, int], counts: dict[str, int] | None = None
) -> Any:
    """``owner.name`` wrapped to add its wall time to ``totals[name]`` (and, with ``counts``,
    one to ``counts[name]`` per call)."""
    original = getattr(owner, name)

    @functools.wraps(original)  # the same signature: LangGraph reads a hook's
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return original(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0) + time.perf_counter_ns() - start
            if counts is not None:
                counts[name] = counts.get(name, 0) + 1

    return patched(owner, name, timed)


def middleware_row(label: str, rounds: int) -> Any:
    none: Callable[[], list[Any]] = list
    pair = bench_agent.paired(
        (lambda: [ToolCallLimitMiddleware(run_limit=1_000_000)], none),
        (lambda: [LoopGuardMiddleware(bench_agent.CONFIG)], none),
    )
    return ratio_row(
        f"sync middleware vs ToolCallLimitMiddleware, {label}",
        compare_pairs(pair, rounds=rounds),
        None,
        unit="ms",
    )


def cached_digests() -> Any:
    """The detector's result digests, each computed once and then served from a cache."""
    compute, cache = _detector.result_digests, {}

    def served(output: object, error: object, tool: str, tokens: Any, volatile: Any = None) -> Any:
        key = (output, str(error), tool, tokens, id(volatile))
        if key not in cache:
            cache[key] = compute(output, error, tool, tokens, volatile)
        return cache[key]

    return patched(_detector, "result_digests", served)


@contextmanager
def skipped_passes() -> Iterator[None]:
    """The middleware's passes doing nothing: the pass ``wrap_model_call`` makes before
    calling the model, and the one after it (the model's answer returned as it is)."""

    def pass_before_model(*_: Any, **__: Any) -> None:
        return None

    def finish(_guard: Any, _request: Any, _turn: Any, response: Any) -> Any:
        return response

    guard = _middleware.LoopGuardMiddleware
    with (
        patched(guard, "_finish", finish),
        patched(guard, "_pass_before_model", pass_before_model),
    ):
        yield


def agent_run() -> None:
    agent = bench_agent._agent([LoopGuardMiddleware(bench_agent.CONFIG)])
    gc.collect()
    gc.disable()
    try:
        agent.invoke(
            {"messages": [HumanMessage("Read every module.")]},
            {"recursion_limit": 10 * bench_agent.STEPS},
        )
    finally:
        gc.enable()


PARTS = (
    (_middleware.LoopGuardMiddleware, "_finish", "the pass after a model answer"),
    (_graph_guard.Run, "decide", "  the detector: every event fed"),
    (_detector.LoopDetector, "tool_result", "    tool results"),
    (_detector.LoopDetector, "tool_call", "    tool calls"),
    (_view.RunView, "export_state", "  the detector's state, exported"),
    (_graph_guard, "load_state", "  the stored state, read"),
    (_middleware.LoopGuardMiddleware, "_pass_before_model", "the pass before a model call"),
    (_middleware.LoopGuardMiddleware, "_with_hint", "the prompt hint"),
    (_middleware.LoopGuardMiddleware, "_note_context", "what the model's request held"),
)


def parts(runs: int) -> list[tuple[str, float]]:
    """Microseconds per agent step of each part in :data:`PARTS`."""
    totals: dict[str, int] = {}
    agent_run()  # warm
    with ExitStack() as stack:
        for owner, name, _ in PARTS:
            stack.enter_context(timed_calls(owner, name, totals))
        for _ in range(runs):
            agent_run()
    steps = runs * bench_agent.STEPS
    return [(label, totals.get(name, 0) / steps / 1e3) for _, name, label in PARTS]


def cold_and_warm(runs: int) -> list[float]:
    """Median microseconds of a result's digests, computed three times in a row in the agent."""
    compute = _detector.result_digests
    times: list[list[int]] = [[], [], []]

    def three_times(
        output: object, error: object, tool: str, tokens: Any, volatile: Any = None
    ) -> Any:
        for spent in times:
            start = time.perf_counter_ns()
            digests = compute(output, error, tool, tokens, volatile)
            spent.append(time.perf_counter_ns() - start)
        return digests

    with patched(_detector, "result_digests", three_times):
        for _ in range(runs):
            agent_run()
    return [statistics.median(spent) / 1e3 for spent in times]


def result_row(rounds: int) -> list[Any]:
    """The tool-result row as shipped, with its digests cached, and its masks alone."""
    outputs = [bench_detector.typical_output(i) for i in range(10_000, 10_016)]
    rows = [_labelled(bench_detector.hot_path(rounds)[1], "as shipped")]
    # Every output of hot_path's rounds, warm-up ones included (its ``unique``), computed
    # ahead and looked up by the text alone: a lookup as cheap as can be, unlike
    # cached_digests's (fine beside an agent's step, not beside a 3 µs floor).
    compute, cache = _detector.result_digests, {}
    for first in ((index + 10) * 1_000 for index in range(-2, rounds)):
        for i in range(first, first + 16):
            text = bench_detector.typical_output(i)
            cache[text] = compute(text, None, "run_tests", frozenset())

    def served(output: Any, error: object, tool: str, tokens: Any, volatile: Any = None) -> Any:
        found = cache.get(output)
        return compute(output, error, tool, tokens, volatile) if found is None else found

    with patched(_detector, "result_digests", served):
        rows.append(_labelled(bench_detector.hot_path(rounds)[1], "digests cached"))

    def floor(_: int) -> float:
        return timed(lambda: [bench_detector.floor(t) for t in outputs]) / len(outputs)

    for label, part in (
        ("whitespace collapsed, alone", _masks.collapse),
        ("masked, alone", lambda text: _masks.masked(text, digits=True)),
    ):

        def subject(_: int, part: Any = part) -> float:
            return timed(lambda: [part(t) for t in outputs]) / len(outputs)

        rows.append(
            ratio_row(f"tool result: {label}", compare(floor, subject, rounds=rounds), None)
        )
    return rows


HANDLER_CALLBACKS = tuple(name for name in vars(LoopGuardCallbackHandler) if name.startswith("on_"))
HANDLER_WORK = (
    ((_model_answer,), "call_signature", "a call's signature (tool start; several calls: answer)"),
    ((_model_answer,), "arg_tokens", "a call's argument words (tool start; several: answer)"),
    ((_handler,), "outcome", "a result's digests"),
    ((_model_answer,), "assistant_key", "an answer's key"),
    ((_model_answer,), "reply_sketch", "a reply's word sketch"),
    ((_model_answer,), "talk", "whether an answer without calls is talk"),
    ((_detector.LoopDetector,), "digested_call", "the detector: a call"),
    ((_detector.LoopDetector,), "digested_result", "the detector: a result"),
    ((_detector.LoopDetector,), "replay", "the detector: an answer"),
    ((_detector.LoopDetector,), "turn_start", "the detector: a turn"),
    ((_detector.LoopDetector,), "user_message", "the detector: a human message"),
)
"""Where each digest and decision is made (the modules that call it), its name, its label."""


def handler_parts(runs: int) -> tuple[list[tuple[str, float, float]], list[tuple[str, float]]]:
    """Per model call of the nine apps (sync), microseconds: each handler callback (with its
    calls per model call), and each piece of :data:`HANDLER_WORK` made inside them."""
    side = bench_apps.make_sides()["handler"]
    apps = {**bench_apps.AGENT_APPS, **bench_apps.GRAPH_APPS}

    def all_apps() -> int:
        calls = 0
        for build in apps.values():
            run = build(side, InMemorySaver())
            gc.collect()
            gc.disable()
            try:
                calls += run.complete(side)
            finally:
                gc.enable()
        return calls

    all_apps()  # warm
    totals: dict[str, int] = {}
    counts: dict[str, int] = {}
    with ExitStack() as stack:
        for name in HANDLER_CALLBACKS:
            stack.enter_context(timed_calls(LoopGuardCallbackHandler, name, totals, counts))
        for owners, name, _ in HANDLER_WORK:
            for owner in owners:
                stack.enter_context(timed_calls(owner, name, totals))
        calls = sum(all_apps() for _ in range(runs))
    callbacks = sorted(
        ((name, counts[name] / calls, totals[name] / calls / 1e3) for name in counts),
        key=lambda row: -row[2],
    )
    work = [(label, totals.get(name, 0) / calls / 1e3) for _, name, label in HANDLER_WORK]
    return callbacks, work


class _Allowing:
    """A guard whose every detector decision is answered "allow": no event reaches its
    detector (whose events make the node guard's digests too)."""

    def decide(self, detector: Any, event: Any, *args: Any, **kwargs: Any) -> Any:
        return ALLOW


class _AllowingHandler(_Allowing, LoopGuardCallbackHandler):
    """The handler deciding nothing (its digests still made)."""


class _AllowingNode(_Allowing, LoopGuardNode):
    """The node guard with every event left unfed."""


@contextmanager
def constant_digests() -> Iterator[None]:
    """The handler's digests (of calls, results and answers) served as constants."""
    result = _handler.outcome("")
    stubs: tuple[tuple[Any, str, Callable[..., Any]], ...] = (
        (_handler, "outcome", lambda *_, **__: result),
        (_model_answer, "call_signature", lambda *_: "0"),
        (_model_answer, "arg_tokens", lambda *_: frozenset()),
        (_model_answer, "assistant_key", lambda _: None),
        (_model_answer, "reply_sketch", lambda _: ""),
        (_model_answer, "talk", lambda _: False),
    )
    with ExitStack() as stack:
        for owner, name, stub in stubs:
            stack.enter_context(patched(owner, name, stub))
        yield


@contextmanager
def plainly_hashed_results() -> Iterator[None]:
    """Each result's digests replaced by one hash of its text, nothing masked or sketched: the
    cheapest a result's digest can be (what the handler's digests could save at most)."""
    empty = _handler.outcome("")

    def plain(output: object = None, *, error: object = None, **_: Any) -> Any:
        text = str(error) if error is not None else output if type(output) is str else repr(output)
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        return empty._replace(key=key, info="+" + key)

    with patched(_handler, "outcome", plain):
        yield


Ablation = tuple[str, float, float, float]
"""A side's name, its app time over its floor (median over rounds of the geometric mean over
apps), that ratio's IQR/2, and its added µs per model call over the floor."""


def _ablation(
    apps: dict[str, Any],
    floor: bench_apps.Side,
    sides: list[bench_apps.Side],
    rounds: int,
    loop: asyncio.AbstractEventLoop | None,
) -> list[Ablation]:
    timings = bench_apps.measure(apps, [floor, *sides], rounds, loop, time.process_time_ns)
    rows = []
    for side in sides:
        ratio, spread, _, _ = bench_apps.ratio_over_apps(timings, side.name, floor.name)
        added = bench_apps.added_per_call(timings, side.name, floor.name)
        rows.append((side.name, ratio, spread, added))
    return rows


def guards_without_the_detector(
    rounds: int, loop: asyncio.AbstractEventLoop | None = None
) -> list[Ablation]:
    """The handler and the node guard in the apps as the app benchmark runs them (sync, or
    async in ``loop``), each with the detector's work taken out, against its floor."""
    sides = bench_apps.make_sides()
    handler_apps = {**bench_apps.AGENT_APPS, **bench_apps.GRAPH_APPS}
    allowing = bench_apps.Side("handler, decisions allowed", callbacks=[_AllowingHandler()])
    floor = sides["handler floor"]
    rows = _ablation(handler_apps, floor, [sides["handler"], allowing], rounds, loop)
    bookkeeping = bench_apps.Side(
        "handler, decisions allowed, digests constant", callbacks=[_AllowingHandler()]
    )
    with constant_digests():  # the handler as shipped would read the constants too
        rows += _ablation(handler_apps, floor, [bookkeeping], rounds, loop)
    plain = bench_apps.Side(
        "handler, results hashed plainly", callbacks=[LoopGuardCallbackHandler()]
    )
    with plainly_hashed_results():
        rows += _ablation(handler_apps, floor, [plain], rounds, loop)
    unfed = bench_apps.Side("node, events unfed", node=_AllowingNode())
    node_sides = [sides["node"], unfed]
    rows += _ablation(bench_apps.GRAPH_APPS, sides["node floor"], node_sides, rounds, loop)
    return rows


def _labelled(row: Any, label: str) -> Any:
    return dataclasses.replace(row, name=f"{row.name}, {label}", target=None)


def main() -> None:
    logging.getLogger("langchain_loop_guard").addHandler(logging.NullHandler())
    logging.getLogger("langchain_loop_guard").propagate = False
    rounds = 7
    rows = [middleware_row("as shipped", rounds)]
    with skipped_passes():
        rows.append(middleware_row("without its passes (the prompt hint alone)", rounds))
    with cached_digests():
        rows.append(middleware_row("with the result digests cached", rounds))
    print(format_table(rows), flush=True)
    print("\n| part of the guard's work (sync middleware) | µs per agent step |\n|---|---|")
    for label, spent in parts(runs=5):
        print(f"| {label} | {spent:,.1f} |")
    first, second, third = cold_and_warm(runs=3)
    print()
    print(format_table(result_row(rounds=61)))
    print(
        f"\nA result's digests inside the agent: {first:.1f} µs the first time, "
        f"{second:.1f} µs the second, {third:.1f} µs the third (median of "
        f"{3 * bench_agent.STEPS} results)."
    )
    callbacks, work = handler_parts(runs=3)
    print("\n| callback handler, 9 apps (sync) | calls per model call | µs per model call |")
    print("|---|---|---|")
    for name, per_call, spent in callbacks:
        print(f"| {name} | {per_call:.2f} | {spent:,.1f} |")
    print("\n| made inside the callbacks | µs per model call |\n|---|---|")
    for label, spent in work:
        print(f"| {label} | {spent:,.1f} |")
    whole, inside = sum(row[2] for row in callbacks), sum(spent for _, spent in work)
    print(
        f"\nThe callbacks: {whole:,.1f} µs per model call; the digests and decisions in them "
        f"{inside:,.1f} µs; the handler's bookkeeping the other {whole - inside:,.1f} µs."
    )
    for mode in ("sync", "async"):
        print(
            f"\n| the guard in the apps ({mode}, CPU time), against its no-op floor"
            " | over the floor | IQR/2 | µs per model call over the floor |\n|---|---|---|---|",
            flush=True,
        )
        loop = asyncio.new_event_loop() if mode == "async" else None
        try:
            for name, ratio, spread, added in guards_without_the_detector(rounds=9, loop=loop):
                print(f"| {name} | {ratio:.3f}x | ±{spread:.3f} | {added:,.0f} |")
        finally:
            if loop is not None:
                loop.close()


if __name__ == "__main__":
    main()
