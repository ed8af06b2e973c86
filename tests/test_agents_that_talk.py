"""SPEC §14 N19 through the integrations: a LangGraph group chat, agents taking turns on one
message list (a planner, an analyst, an engineer, a critic), talking for eight messages
before the engineer runs a query and the planner reports. Talk with new words is not a
failing turn: the callback handler and the node guard let the chat run to its end. Replies a
harness rejects (each holds fenced commands it could not run) still stop the run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from acting_agents import GROUP_CHAT, rejected_replies
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from langchain_loop_guard import (
    LoopDetected,
    LoopGuardCallbackHandler,
    LoopGuardNode,
    LoopGuardState,
    Signal,
)
from langchain_loop_guard.testing import ScriptedChatModel, assert_valid_history, call

SPEAKERS = ("planner", "analyst", "engineer", "critic")
REPORT = (
    "Spring promotion annual plans churn at 21.4%, almost triple paid search. Recommend a "
    "retention offer at month ten for that cohort."
)


class ChatState(MessagesState, LoopGuardState):
    """The chat's messages and the node guard's private state."""


def _run_sql(query: str) -> str:
    """Run a read-only query against the warehouse replica."""
    rows = [
        {"channel": "paid_search", "plan": "annual", "churn": 0.082},
        {"channel": "spring_promo", "plan": "annual", "churn": 0.214},
        {"channel": "unknown", "plan": "monthly", "churn": 0.047},
    ]
    return json.dumps({"rows": rows, "rowCount": len(rows)})


def _chat_script() -> list[Any]:
    """Each agent's turn as the scripted model answers it: the talk, then the engineer's
    query, then the planner's report."""
    talk: list[Any] = [AIMessage(content=text, name=speaker) for speaker, text in GROUP_CHAT]
    query = call("run_sql", {"query": "SELECT channel, plan, churn FROM churn_cohorts"})
    query.name = "engineer"
    return [*talk, query, AIMessage(content=REPORT, name="planner")]


def _rejected_script() -> list[Any]:
    """Replies a harness cannot run (two fenced command blocks each), one per turn."""
    return [AIMessage(content=step.text, name="engineer") for step in rejected_replies().script]


def _next_speaker(messages: Sequence[BaseMessage]) -> str:
    last = messages[-1]
    if isinstance(last, AIMessage) and last.tool_calls:
        return "tools"
    if isinstance(last, AIMessage) and last.text == REPORT:
        return END
    spoken = sum(1 for m in messages if isinstance(m, AIMessage) and not m.tool_calls)
    return SPEAKERS[spoken % len(SPEAKERS)]


def group_chat(model: ScriptedChatModel, tools: list[BaseTool], guard: LoopGuardNode | None) -> Any:
    """A round-robin group chat: each speaker answers the whole chat under its own system
    message; a call goes to the tools and back; the planner's report ends it. With
    ``guard``, the guard node sees every new message first and a custom router follows it."""

    def speaker(name: str) -> Any:
        def speak(state: ChatState) -> dict[str, Any]:
            persona = SystemMessage(f"You are the {name} of a data team. Be brief and concrete.")
            answer = model.invoke([persona, *state["messages"]])
            return {"messages": [answer]}

        return speak

    builder = StateGraph(ChatState)
    for name in SPEAKERS:
        builder.add_node(name, speaker(name))
    builder.add_node("tools", ToolNode(tools))
    targets = [*SPEAKERS, "tools", END]
    if guard is None:
        builder.add_edge(START, "planner")
        for name in (*SPEAKERS, "tools"):
            builder.add_conditional_edges(name, lambda s: _next_speaker(s["messages"]), targets)
    else:
        builder.add_node("loop_guard", guard)
        builder.add_edge(START, "loop_guard")
        for name in (*SPEAKERS, "tools"):
            builder.add_edge(name, "loop_guard")

        def after_guard(state: ChatState) -> Any:
            held = guard.route(state)
            return held if held == [] else _next_speaker(state["messages"])  # [] holds a stop

        builder.add_conditional_edges("loop_guard", after_guard, targets)
    return builder.compile(checkpointer=InMemorySaver())


def _run(
    script: list[Any], integration: Literal["handler", "node"]
) -> tuple[ScriptedChatModel, list[str], list[BaseMessage], LoopDetected | None]:
    model = ScriptedChatModel(script=script)
    executed: list[str] = []

    def run_sql(query: str) -> str:
        """Run a read-only query against the warehouse replica."""
        executed.append(query)
        return _run_sql(query)

    tools: list[BaseTool] = [StructuredTool.from_function(run_sql)]
    graph = group_chat(model, tools, LoopGuardNode() if integration == "node" else None)
    config: RunnableConfig = {"configurable": {"thread_id": f"chat-{integration}"}}
    config["recursion_limit"] = 100
    if integration == "handler":
        config["callbacks"] = [LoopGuardCallbackHandler()]
    stop = None
    try:
        graph.invoke({"messages": [HumanMessage("Why did churn rise last quarter?")]}, config)
    except LoopDetected as exc:
        stop = exc
    messages = list(graph.get_state(config).values["messages"])
    return model, executed, messages, stop


@pytest.mark.parametrize("integration", ["handler", "node"])
def test_a_group_chat_that_talks_runs_to_its_end(integration: Literal["handler", "node"]) -> None:
    """N19: eight messages of talk, each its own words, no tool; then the query and the
    report. Nothing is stopped, every model call is made, the query runs once."""
    model, executed, messages, stop = _run(_chat_script(), integration)
    assert stop is None
    assert model.turns == len(GROUP_CHAT) + 2
    assert executed == ["SELECT channel, plan, churn FROM churn_cohorts"]
    assert messages[-1].text == REPORT
    assert_valid_history(messages)


@pytest.mark.parametrize("integration", ["handler", "node"])
def test_replies_a_harness_rejects_still_stop(integration: Literal["handler", "node"]) -> None:
    """N19's other side: the same chat where every reply holds commands the harness could
    not run is stopped by ``failing_turns`` at the 6th failing turn: the handler before the
    8th model call is made (it sees calls start; the first answer, with no answer before it
    in its input, is not yet a model asked again), the node guard, which sees only answers
    in this wiring (no guard step between a speaker and the next), when the 8th arrives."""
    model, executed, _, stop = _run(_rejected_script(), integration)
    assert stop is not None
    assert stop.signal is Signal.FAILING_TURNS
    assert model.turns == (7 if integration == "handler" else 8)
    assert executed == []


def _planning_agent(script: list[Any]) -> tuple[Any, ScriptedChatModel, list[str]]:
    """A ``create_agent`` app whose own after-model hook sends an answer without calls back
    to the model until it calls a tool or reports (an orchestrator narrating its plan before
    it delegates), guarded by ``LoopGuardMiddleware``."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import after_model

    from langchain_loop_guard import LoopGuardMiddleware

    model = ScriptedChatModel(script=script)
    executed: list[str] = []

    def run_sql(query: str) -> str:
        """Run a read-only query against the warehouse replica."""
        executed.append(query)
        return _run_sql(query)

    @after_model(can_jump_to=["model"])
    def keep_planning(state: Any, runtime: Any) -> dict[str, Any] | None:
        said = [m for m in state["messages"] if isinstance(m, AIMessage)]
        if said[-1].tool_calls or said[-1].text == REPORT:
            return None
        return {"jump_to": "model"}

    agent = create_agent(
        model,
        [StructuredTool.from_function(run_sql)],
        middleware=[LoopGuardMiddleware(), keep_planning],
        checkpointer=InMemorySaver(),
    )
    return agent, model, executed


def test_an_orchestrator_narrating_its_plan_runs_to_its_end_under_the_middleware() -> None:
    """N19 through the middleware: eight answers of talk sent back to the model by the app's
    own hook, then the query and the report: nothing is stopped."""
    agent, model, executed = _planning_agent(_chat_script())
    config: RunnableConfig = {"configurable": {"thread_id": "plan"}, "recursion_limit": 100}
    result = agent.invoke({"messages": [HumanMessage("Why did churn rise last quarter?")]}, config)
    assert result.get("loop_guard_stop") is None
    assert model.turns == len(GROUP_CHAT) + 2
    assert len(executed) == 1
    assert result["messages"][-1].text == REPORT
    assert_valid_history(result["messages"])


def test_replies_a_harness_rejects_still_stop_under_the_middleware() -> None:
    """N19's other side through the middleware: the hook sends back replies holding commands
    the harness could not run; ``failing_turns`` stops the run."""
    agent, model, executed = _planning_agent(_rejected_script())
    config: RunnableConfig = {"configurable": {"thread_id": "rejected"}, "recursion_limit": 100}
    with pytest.raises(LoopDetected) as stopped:
        agent.invoke({"messages": [HumanMessage("Fix the failing constraint test.")]}, config)
    assert stopped.value.signal is Signal.FAILING_TURNS
    assert model.turns <= 8
    assert executed == []
