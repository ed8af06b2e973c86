"""LoopDetected: the typed interrupt passes every error-handling layer and reaches the caller."""

from __future__ import annotations

import asyncio
import copy
import pickle
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ModelRetryMiddleware,
    ToolErrorMiddleware,
    ToolRetryMiddleware,
)
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import RetryPolicy

from langchain_loop_guard import LoopGuardConfig, LoopGuardError, Signal, Verdict
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, call, calls, scripted_tool

# --- the exception itself -------------------------------------------------------------------------


def detected() -> LoopDetected:
    verdict = Verdict(
        action="block",
        signal=Signal.TOOL_CYCLE,
        message="stopped",
        tool="b",
        tools=("a", "b"),
        count=3,
        threshold=3,
        key="k",
    )
    return LoopDetected.from_verdict(verdict, run_id="run-1")


def attributes(error: LoopDetected) -> tuple[Any, ...]:
    return (
        type(error),
        str(error),
        error.signal,
        error.tool,
        error.tools,
        error.count,
        error.threshold,
        error.run_id,
        error.verdict,
    )


def test_loop_detected_is_a_loop_guard_error_that_bubbles_through_langgraph() -> None:
    """It subclasses LoopGuardError and GraphBubbleUp, but is not an interrupt (a pause)."""
    error = detected()
    assert isinstance(error, LoopGuardError)
    assert isinstance(error, GraphBubbleUp)
    assert not isinstance(error, GraphInterrupt)


def test_loop_detected_carries_the_verdict_as_attributes() -> None:
    """from_verdict copies signal, tools, counts and message, and keeps the run id."""
    error = detected()
    assert attributes(error)[1:] == (
        "stopped",
        Signal.TOOL_CYCLE,
        "b",
        ("a", "b"),
        3,
        3,
        "run-1",
        error.verdict,
    )
    assert repr(error) == (
        "LoopDetected(signal='tool_cycle', tool='b', count=3, threshold=3, run_id='run-1')"
    )


@pytest.mark.parametrize(
    "clone",
    [lambda e: pickle.loads(pickle.dumps(e)), copy.copy, copy.deepcopy],
    ids=["pickle", "copy", "deepcopy"],
)
def test_loop_detected_survives_pickling_and_copying(clone: Callable[[Any], Any]) -> None:
    """Pickled (a process pool, a checkpoint) or copied, it keeps its type and attributes."""
    error = detected()
    assert attributes(clone(error)) == attributes(error)


def test_loop_detected_needs_a_signal() -> None:
    """An "allow" verdict cannot become an interrupt."""
    with pytest.raises(ValueError, match="signal"):
        LoopDetected.from_verdict(Verdict())


# --- every layer lets it through ------------------------------------------------------------------


class ToolStarts(BaseCallbackHandler):
    """Counts on_tool_start: a retry of the stopped call would start it again."""

    run_inline = True  # as the guard is: LangChain leaves other handlers' coroutines unawaited

    def __init__(self) -> None:
        self.count = 0

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self.count += 1


def graph_agent(
    model: ScriptedChatModel,
    tools: list[BaseTool],
    *,
    handle_tool_errors: bool = False,
    retry: RetryPolicy | None = None,
) -> Any:
    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", RunnableLambda(agent, afunc=aagent), retry_policy=retry)
    graph.add_node(
        "tools", ToolNode(tools, handle_tool_errors=handle_tool_errors), retry_policy=retry
    )
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver())


RETRY_ANYTHING = RetryPolicy(initial_interval=0.0, jitter=False, max_attempts=3, retry_on=Exception)

LAYERS: dict[str, Callable[[ScriptedChatModel, list[BaseTool]], Any]] = {
    "ToolNode(handle_tool_errors=True)": lambda m, t: graph_agent(m, t, handle_tool_errors=True),
    "RetryPolicy on both nodes": lambda m, t: graph_agent(m, t, retry=RETRY_ANYTHING),
    "ToolRetryMiddleware": lambda m, t: create_agent(
        m,
        t,
        middleware=[ToolRetryMiddleware(max_retries=2, retry_on=(Exception,), initial_delay=0)],
        checkpointer=InMemorySaver(),
    ),
    "ModelRetryMiddleware": lambda m, t: create_agent(
        m,
        t,
        middleware=[ModelRetryMiddleware(max_retries=2, retry_on=(Exception,), initial_delay=0)],
        checkpointer=InMemorySaver(),
    ),
    "ToolErrorMiddleware": lambda m, t: create_agent(
        m,
        t,
        middleware=[ToolErrorMiddleware(on_error=lambda error, request: "tool failed")],
        checkpointer=InMemorySaver(),
    ),
}


class Stop(NamedTuple):
    """A model step repeated until the guard stops the run from one of its callbacks."""

    step: AIMessage
    signal: Signal
    tool_starts: int
    config: Mapping[str, Any] = MappingProxyType({})


STOPS = {
    "from on_tool_start": Stop(
        call("read_file", {"path": "a.py"}), Signal.REPEATED_TOOL_CALL, tool_starts=3
    ),
    "from on_chat_model_start": Stop(
        call("no_such_tool", {}), Signal.REPEATED_TOOL_CALL, tool_starts=0
    ),
    "from on_llm_end": Stop(
        calls(("read_file", {"path": "a.py"}), content="Reading it once more."),
        Signal.REPEATED_ASSISTANT_RESPONSE,
        tool_starts=2,
        config={"progress_aware": False},
    ),
}


def run(agent: Any, how: str, config: RunnableConfig) -> None:
    inputs = {"messages": [("user", "go")]}
    if how == "invoke":
        agent.invoke(inputs, config)
    elif how == "stream":
        for _ in agent.stream(inputs, config):
            pass
    elif how == "ainvoke":
        asyncio.run(agent.ainvoke(inputs, config))
    else:

        async def consume() -> None:
            async for _ in agent.astream(inputs, config):
                pass

        asyncio.run(consume())


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke", "astream"])
@pytest.mark.parametrize("stop", STOPS.values(), ids=list(STOPS))
@pytest.mark.parametrize("layer", list(LAYERS))
def test_stop_passes_error_handling_layers_untouched(layer: str, stop: Stop, how: str) -> None:
    """No layer converts, retries or swallows the stop: the caller gets the very first one."""
    model = ScriptedChatModel(script=[stop.step], then="repeat")
    read_file = scripted_tool("read_file", "contents")
    agent = LAYERS[layer](model, [read_file])
    starts = ToolStarts()  # before the guard, which raises
    handler = LoopGuardCallbackHandler(LoopGuardConfig(**stop.config))
    config: RunnableConfig = {"callbacks": [starts, handler], "configurable": {"thread_id": "t"}}
    with pytest.raises(LoopDetected) as caught:
        run(agent, how, config)
    error = caught.value
    assert type(error) is LoopDetected
    assert (error.signal, error.count, error.threshold) == (stop.signal, 3, 3)
    assert error.verdict is not None
    assert not error.verdict.tripped  # the original stop, not a retry hitting the stopped run
    bodies = min(stop.tool_starts, 2)
    assert (model.turns, starts.count, read_file.calls) == (3, stop.tool_starts, bodies)


def test_stop_leaves_a_resumable_checkpoint() -> None:
    """A stop before the 3rd tool call leaves the graph about to run its tools step."""
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"})], then="repeat")
    agent = graph_agent(model, [scripted_tool("read_file", "contents")])
    config: RunnableConfig = {
        "callbacks": [LoopGuardCallbackHandler(LoopGuardConfig())],
        "configurable": {"thread_id": "t"},
    }
    with pytest.raises(LoopDetected):
        agent.invoke({"messages": [("user", "go")]}, config)
    assert agent.get_state(config).next == ("tools",)
