"""SPEC §13 C3: the middleware sees every model answer wherever it stands in
``create_agent(middleware=[...])``. LangChain runs the ``after_model`` hooks from the last
middleware to the first, and a hook that jumps back to the model skips the ones after it: an
app's check placed after the guard (``[LoopGuardMiddleware(), app_check]``) used to hide every
answer from the guard."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import after_model
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard import LoopDetected, LoopGuardMiddleware, Signal
from langchain_loop_guard.testing import ScriptedChatModel, assert_valid_history

PLAN = "Plan: 1. read the logs; 2. find the failing test; 3. fix it."
"""The planner's answer, the same at every call: it never writes FINAL ANSWER."""
NOT_YET = "No FINAL ANSWER yet: go on."

Place = Literal["guard-first", "guard-last"]
How = Literal["sync", "async"]


def _check(messages: Sequence[BaseMessage], say: bool) -> dict[str, Any] | None:
    """The app's rule: no final answer yet, back to the model (with a note, if ``say``)."""
    if "FINAL ANSWER" in messages[-1].text:
        return None
    update: dict[str, Any] = {"jump_to": "model"}
    if say:
        update["messages"] = [HumanMessage(NOT_YET)]
    return update


def app_check(how: How, *, say: bool) -> Any:
    """The app's ``@after_model(can_jump_to=["model"])`` hook, sync or async."""
    if how == "sync":

        @after_model(can_jump_to=["model"])
        def final_answer_check(state: Any, runtime: Any) -> dict[str, Any] | None:
            return _check(state["messages"], say)

        return final_answer_check

    @after_model(can_jump_to=["model"])
    async def final_answer_check_async(state: Any, runtime: Any) -> dict[str, Any] | None:
        return _check(state["messages"], say)

    return final_answer_check_async


def planner(turns: int = 20) -> ScriptedChatModel:
    """A model that rewrites the same plan at every call (failing after ``turns``: no hang)."""

    def answer(messages: Sequence[BaseMessage]) -> AIMessage:
        assert_valid_history(messages)
        return AIMessage(PLAN)

    return ScriptedChatModel(script=[answer] * turns)


def run_planner(place: Place, how: How, *, say: bool = False, thread: bool = False) -> Any:
    """Run the planner agent with the guard and the app's check in the order ``place``; the
    ``LoopDetected`` it raised, and the model."""
    model = planner()
    guard = LoopGuardMiddleware()
    check = app_check(how, say=say)
    middleware = [guard, check] if place == "guard-first" else [check, guard]
    agent = create_agent(
        model, [], middleware=middleware, checkpointer=InMemorySaver() if thread else None
    )
    config: dict[str, Any] = {"recursion_limit": 100}
    if thread:
        config["configurable"] = {"thread_id": "planner"}
    payload = {"messages": [HumanMessage("Fix the failing build.")]}

    def invoke() -> Any:
        if how == "sync":
            return agent.invoke(payload, config)
        return asyncio.run(agent.ainvoke(payload, config))

    with pytest.raises(LoopDetected) as raised:
        invoke()
    return raised.value, model


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("place", ["guard-first", "guard-last"])
def test_an_app_hook_that_jumps_to_the_model_hides_no_answer_from_the_guard(
    place: Place, how: How
) -> None:
    """C3: the same plan rewritten at every call is stopped at the 3rd, before a 4th model
    call is paid for, wherever the guard stands and whether the run is sync or async."""
    stop, model = run_planner(place, how)
    assert (stop.signal, stop.count) == (Signal.REPEATED_ASSISTANT_RESPONSE, 3)
    assert model.turns == 3


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("place", ["guard-first", "guard-last"])
def test_an_app_hook_that_answers_the_model_in_a_thread_hides_no_answer_either(
    place: Place, how: How
) -> None:
    """C3 in a chat app (a checkpointer and a thread): the app's note to the model is a new
    human message to the thread; the same plan after each note is still stopped by the 3rd."""
    stop, model = run_planner(place, how, say=True, thread=True)
    assert (stop.signal, stop.count) == (Signal.REPEATED_ASSISTANT_RESPONSE, 3)
    assert model.turns == 3
