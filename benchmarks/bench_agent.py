"""End to end: a 200-step ``create_agent`` run with the guard against the same run without it.

The scripted model makes 200 productive tool calls (a new file each time, a different result
each time) and then answers; nothing loops, so the guard does all its work and never stops the
run. A fresh model and agent are built for every run (untimed). The two runs of a round are
streamed side by side (``stream``/``astream``, which ``invoke``/``ainvoke`` consume the same
way), one step of each in turn, and each side goes first every other step: on a shared
machine whose speed drifts by tens of percent within seconds, both sides then see the same
machine. Each side's time is the sum of its steps.

* ``LoopGuardCallbackHandler`` is compared with a no-op synchronous handler that has the same
  flags (``raise_error``, ``run_inline`` and every ``ignore_*``), so it receives the same
  callbacks: the difference is the guard's work, not LangChain's dispatch.
* ``LoopGuardMiddleware`` is compared with a no-op middleware with the same hooks (its floor:
  what LangChain's wiring of those hooks costs), and, for information, with LangChain's
  ``ToolCallLimitMiddleware`` with limits it never reaches.
* ``LoopGuardNode`` runs in a hand-built ``StateGraph`` of the same 200 steps (a model node, a
  ``ToolNode`` and the guard as their hub, as its docstring wires it), compared with a
  pass-through node wired the same way (its floor, ``bench_apps.floor_node``).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any, cast

from _harness import Pair, Row, compare_pairs, ratio_row
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ToolCallLimitMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage
from langgraph.graph import StateGraph

from langchain_loop_guard import LoopGuardConfig, LoopGuardNode
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._middleware import LoopGuardMiddleware
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

STEPS = 200
CONFIG = LoopGuardConfig(max_turns=1_000_000)  # defaults, minus the turn-count warning
FLAGS = (
    "raise_error",
    "run_inline",
    "ignore_llm",
    "ignore_chain",
    "ignore_agent",
    "ignore_retriever",
    "ignore_chat_model",
    "ignore_retry",
    "ignore_custom_event",
)


class NoOpHandler(BaseCallbackHandler):
    """A synchronous handler that does nothing.

    It implements ``on_chat_model_start``: without it LangChain falls back to ``on_llm_start``
    and renders every model input as one string, which is not nothing.
    """

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        """Nothing."""


def no_op_like(
    handler: BaseCallbackHandler, base: type[BaseCallbackHandler] = NoOpHandler
) -> BaseCallbackHandler:
    """A handler that does nothing (or a ``base`` of another kind), with ``handler``'s flags,
    so it gets the same callbacks."""
    flags = {name: getattr(handler, name) for name in FLAGS}
    return type(base.__name__, (base,), flags)()


class SameHooksMiddleware(AgentMiddleware[Any, Any, Any]):
    """A middleware that does nothing in the hooks ``LoopGuardMiddleware`` has, made the same
    way (``awrap_model_call`` a plain method returning a coroutine).

    Against ``ToolCallLimitMiddleware`` (an ``after_model`` hook only) it measures what
    LangChain charges for the guard's hook set (``wrap_model_call``, where it decides, and
    ``after_agent``, once per run) against one after-model node; against the guard, what the
    guard's own work costs.
    """

    def after_agent(self, state: Any, runtime: Any) -> None:
        """Nothing."""

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        """Nothing."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Call the model."""
        return handler(request)

    def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Call the model (the coroutine of it)."""
        return self._call(request, handler)

    async def _call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return await handler(request)


class CoroutineHookMiddleware(SameHooksMiddleware):
    """:class:`SameHooksMiddleware` with ``awrap_model_call`` written the usual way, as a
    coroutine function: LangSmith's ``traceable``, which ``create_agent`` puts around it, then
    takes its asynchronous path."""

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:  # type: ignore[override]
        """Call the model."""
        return await handler(request)


def _model_and_tool() -> tuple[ScriptedChatModel, Any]:
    script = [
        call("read_file", {"path": f"src/app/module_{i}.py", "encoding": "utf-8"})
        for i in range(STEPS)
    ]
    model = ScriptedChatModel(script=[*script, "All files read."])
    # each module says something of its own (a file that only echoed its path would be no
    # new information, SPEC §11 R6, and this stream must not loop)
    read_file = scripted_tool(
        "read_file",
        lambda args: f"# {args['path']}\nimport os\n\ndef {args['path'][8:-3]}_main(): ...\n",
    )
    return model, read_file


def _agent(middleware: list[AgentMiddleware[Any, Any, Any]]) -> Any:
    model, read_file = _model_and_tool()
    return create_agent(model, [read_file], middleware=middleware)


def _graph(side: Any) -> Any:
    """The same 200 steps as a hand-built ``StateGraph``: a model node and a ``ToolNode`` wired
    as ``side`` says (``bench_apps.wire_agent``: the node guard, or its pass-through floor, as
    their hub)."""
    import bench_apps  # here: bench_apps imports this module

    model, read_file = _model_and_tool()
    bound = model.bind_tools([read_file])

    def agent(state: bench_apps.GuardedState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    builder = StateGraph(bench_apps.GuardedState)
    bench_apps.wire_agent(builder, agent, [read_file], side)
    return builder.compile()


INPUT = {"messages": [HumanMessage("Read every module.")]}


def _check(result: dict[str, Any]) -> None:
    last = result["messages"][-1]
    assert last.content == "All files read.", "the run must complete"


Side = tuple[Callable[[], Any], Callable[[], list[Any]]]
"""A run's middleware (a list; or, for a hand-built graph, a ``bench_apps.Side`` with its node
guard or floor) and callbacks, each made afresh for every run."""


def _stream(side: Side, *, use_async: bool) -> Any:
    middleware, callbacks = side
    made = middleware()
    agent = _agent(made) if isinstance(made, list) else _graph(made)
    config = {"callbacks": callbacks(), "recursion_limit": 10 * STEPS}
    if use_async:
        return agent.astream(INPUT, config, stream_mode="values")
    return agent.stream(INPUT, config, stream_mode="values")


def paired(baseline: Side, subject: Side, loop: asyncio.AbstractEventLoop | None = None) -> Pair:
    """Rounds of a baseline run and a subject run, streamed side by side (async with a loop)."""

    def step(stream: Any) -> Any:
        if loop is None:
            return next(stream)
        return loop.run_until_complete(stream.__anext__())

    done = (StopIteration, StopAsyncIteration)

    def pair(_: int) -> tuple[float, float]:
        streams = [_stream(side, use_async=loop is not None) for side in (baseline, subject)]
        totals, last = [0, 0], [None, None]
        running, order = [True, True], [1, 0]
        gc.collect()
        gc.disable()
        try:
            while any(running):
                order.reverse()  # each side goes first every other step
                for side in order:
                    if not running[side]:
                        continue
                    start = time.perf_counter_ns()
                    try:
                        last[side] = step(streams[side])
                    except done:
                        running[side] = False
                    totals[side] += time.perf_counter_ns() - start
        finally:
            gc.enable()
        for state in last:
            _check(cast(dict[str, Any], state))
        return float(totals[0]), float(totals[1])

    return pair


def end_to_end(rounds: int, *, breakdown: int = 0) -> list[Row]:
    """Handler and middleware, sync and async, each against its baseline.

    With ``breakdown`` rounds, the middleware's ratio is also split into what its hooks cost
    in LangChain and what its work costs (rows for information).
    """
    guard = LoopGuardCallbackHandler(CONFIG)
    no_op = no_op_like(guard)

    def none() -> list[Any]:
        return []

    def guard_middleware() -> list[Any]:
        return [LoopGuardMiddleware(CONFIG)]

    def limit_middleware() -> list[Any]:
        return [ToolCallLimitMiddleware(run_limit=1_000_000)]

    def same_hooks() -> list[Any]:
        return [SameHooksMiddleware()]

    def coroutine_hook() -> list[Any]:
        return [CoroutineHookMiddleware()]

    # imported here: bench_apps imports this module
    from bench_apps import FloorMiddleware
    from bench_apps import Side as GraphSide

    def floor_middleware() -> list[Any]:
        return [FloorMiddleware()]

    node_guard = LoopGuardNode(CONFIG)

    def guard_graph() -> GraphSide:
        return GraphSide("node", node=node_guard)

    def floor_graph() -> GraphSide:
        return GraphSide("node floor", node="floor")

    rows = []
    loop = asyncio.new_event_loop()
    try:
        for label, event_loop in (("sync", None), ("async", loop)):

            def rounds_of(baseline: Side, subject: Side, count: int) -> Any:
                pair = paired(baseline, subject, event_loop)  # noqa: B023 - used at once
                return compare_pairs(pair, rounds=count)

            handler = rounds_of((none, lambda: [no_op]), (none, lambda: [guard]), rounds)
            rows.append(
                ratio_row(
                    f"{STEPS}-step agent, {label}: handler vs no-op handler",
                    handler,
                    1.10,
                    unit="ms",
                )
            )
            middleware = rounds_of((floor_middleware, none), (guard_middleware, none), rounds)
            rows.append(
                ratio_row(
                    f"{STEPS}-step agent, {label}: middleware vs its no-op floor",
                    middleware,
                    1.10,
                    unit="ms",
                    note="floor: the same hooks and a private state key, doing nothing",
                )
            )
            node = rounds_of((floor_graph, none), (guard_graph, none), rounds)
            rows.append(
                ratio_row(
                    f"{STEPS}-step graph, {label}: node guard vs a pass-through node",
                    node,
                    1.10,
                    unit="ms",
                    note="the pass-through node wired with the guard's edges and router",
                )
            )
            if not breakdown:
                continue
            limit = rounds_of((limit_middleware, none), (guard_middleware, none), breakdown)
            rows.append(
                ratio_row(
                    f"  {label}: middleware vs ToolCallLimitMiddleware",
                    limit,
                    None,
                    unit="ms",
                    note="a typical middleware's hooks instead of the guard's",
                )
            )
            structure = rounds_of((limit_middleware, none), (same_hooks, none), breakdown)
            rows.append(
                ratio_row(
                    f"  {label}: no-op middleware with the same hooks vs ToolCallLimitMiddleware",
                    structure,
                    None,
                    unit="ms",
                    note="LangChain's cost of a wrap_model_call hook",
                )
            )
            work = rounds_of((same_hooks, none), (guard_middleware, none), breakdown)
            rows.append(
                ratio_row(
                    f"  {label}: middleware vs no-op middleware with the same hooks",
                    work,
                    None,
                    unit="ms",
                    note="the guard's own work and prompt hint",
                )
            )
            if event_loop is not None:
                hops = rounds_of((same_hooks, none), (coroutine_hook, none), breakdown)
                rows.append(
                    ratio_row(
                        f"  {label}: no-op middleware, awrap_model_call as a coroutine function",
                        hops,
                        None,
                        unit="ms",
                        note="LangSmith traceable's async path, avoided by the guard",
                    )
                )
    finally:
        loop.close()
    assert guard.status().stops == 0, "the benchmark run must not loop"
    assert node_guard.status().stops == 0, "the benchmark run must not loop"
    return rows


def main() -> None:
    """Run this file's benchmarks alone."""
    from _harness import format_table

    start = time.perf_counter()
    print(format_table(end_to_end(rounds=7, breakdown=5)))
    print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
