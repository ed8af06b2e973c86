"""SPEC §14 R20: a supervisor whose tools each invoke their own agent. A sub-agent's input is
the tool's, never a human message: with the callback handler in ``scope="auto"`` on a
checkpointed thread, a supervisor ping-ponging between its sub-agents with nothing new is
stopped as in run scope, by the 3rd lap; a productive supervisor is never stopped.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard import LoopDetected, LoopGuardCallbackHandler, Signal
from langchain_loop_guard.testing import ScriptedChatModel, call


def _sub_agent(name: str, answer: str, *, per_task: bool = False) -> Any:
    """A sub-agent without tools that answers every task the same way, or (``per_task``)
    with figures of the task it was given."""

    def answer_task(messages: list[Any]) -> str:
        task = str(messages[-1].content)
        return f"{answer} Task: {task} Figure: {sum(map(ord, task)) % 97}% growth."

    model = ScriptedChatModel(script=[answer_task if per_task else answer], then="repeat")
    return create_agent(model, [], system_prompt=f"You are the {name}.")


def _delegate(name: str, agent: Any) -> StructuredTool:
    def ask(task: str) -> str:
        result = agent.invoke({"messages": [HumanMessage(task)]})
        return str(result["messages"][-1].content)

    return StructuredTool.from_function(ask, name=name, description=f"Ask the {name}.")


def _supervisor(script: list[Any], *, then: str = "error", per_task: bool = False) -> Any:
    researcher = _sub_agent(
        "researcher",
        "The market grew 12% in 2025 (IEA, table 3); no newer figure exists.",
        per_task=per_task,
    )
    analyst = _sub_agent(
        "analyst",
        "Projection: 9% a year to 2030, from the 2025 figure; the model needs more data.",
        per_task=per_task,
    )
    tools = [_delegate("ask_researcher", researcher), _delegate("ask_analyst", analyst)]
    model = ScriptedChatModel(script=script, then=then)  # type: ignore[arg-type]
    return create_agent(
        model,
        tools,
        system_prompt="You coordinate a researcher and an analyst.",
        checkpointer=InMemorySaver(),
    )


def test_r20_a_supervisor_ping_ponging_its_sub_agents_is_stopped_in_auto_scope() -> None:
    """R20: the same two delegations again and again, each answered alike, on a checkpointed
    thread with ``scope="auto"``: stopped by the 3rd lap, the sub-agents' task messages never
    taken for the user's."""
    lap = [
        call("ask_researcher", {"task": "Find the latest heat pump market figure."}),
        call("ask_analyst", {"task": "Project heat pump growth to 2030."}),
    ]
    agent = _supervisor(lap, then="cycle")
    handler = LoopGuardCallbackHandler()
    config = {"callbacks": [handler], "configurable": {"thread_id": "report-7"}}
    with pytest.raises(LoopDetected) as caught:
        agent.invoke({"messages": [HumanMessage("Write the heat pump outlook.")]}, config)
    assert caught.value.signal in (Signal.TOOL_CYCLE, Signal.REPEATED_TOOL_CALL)
    state = agent.get_state({"configurable": {"thread_id": "report-7"}})
    delegations = [m for m in state.values["messages"] if getattr(m, "tool_calls", None)]
    assert len(delegations) <= 6  # three laps of two delegations at the most


def test_a_productive_supervisor_is_never_stopped_in_auto_scope() -> None:
    """New delegations, each answered with something new: the run ends with its answer."""
    topics = ["solar panels", "heat pumps", "battery storage", "wind turbines"]
    script: list[Any] = []
    for topic in topics:
        script += [
            call("ask_researcher", {"task": f"Collect market figures for {topic}."}),
            call("ask_analyst", {"task": f"Project the growth of {topic}."}),
        ]
    script.append("Heat pumps grow fastest; the figures and sources are above.")
    agent = _supervisor(script, per_task=True)
    handler = LoopGuardCallbackHandler()
    config = {"callbacks": [handler], "configurable": {"thread_id": "report-8"}}
    result = agent.invoke({"messages": [HumanMessage("Compare the energy markets.")]}, config)
    assert result["messages"][-1].content.startswith("Heat pumps grow fastest")
