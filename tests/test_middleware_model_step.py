"""``LoopGuardMiddleware`` decides inside the model's step (issue 39): the paths that design
adds, each through a real ``create_agent`` run with a checkpointer. An interrupt about a
model's answer is held in the guard's state (a ``pause`` marker) and asked at the next model
call, before that model is paid for; the calls an earlier run left open are answered in the
model step that starts a run; an app's after-model hook that sends a stopped run back to the
model gets the guard's stop again, not a new model call."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import after_model
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langchain_loop_guard import LoopDetected, LoopGuardMiddleware, Signal, guard_kind
from langchain_loop_guard.testing import ScriptedChatModel, assert_valid_history, call

ASK = "What does config.yaml say about retries?"


class Files:
    """A real tool: reads from a small in-memory file system, counting its reads."""

    def __init__(self) -> None:
        self.reads = 0

    def tool(self) -> Any:
        def read_file(path: str) -> str:
            """Read a file of the project."""
            self.reads += 1
            return {"config.yaml": "retries: 3\ntimeout: 30"}.get(path, "no such file")

        return read_file


def _agent(
    model: ScriptedChatModel, files: Files, guard: LoopGuardMiddleware, *hooks: Any
) -> tuple[Any, dict[str, Any]]:
    agent = create_agent(
        model, [files.tool()], middleware=[guard, *hooks], checkpointer=InMemorySaver()
    )
    return agent, {"configurable": {"thread_id": "support-42"}, "recursion_limit": 60}


def _reader(reads: int) -> ScriptedChatModel:
    """A model that reads config.yaml ``reads`` times, then answers."""
    script: list[Any] = [call("read_file", {"path": "config.yaml"})] * reads
    return ScriptedChatModel(script=[*script, "Retries are set to 3."])


def test_an_interrupt_on_an_answer_is_asked_before_the_next_model_call() -> None:
    """The third identical read is decided after the model was paid for; the interrupt is
    held as a ``pause`` marker and asked at the next model call, before that model runs: the
    model was paid three times, the tool ran twice, the call waits unanswered."""
    model, files = _reader(6), Files()
    agent, config = _agent(model, files, LoopGuardMiddleware(on_stop="interrupt"))
    paused = agent.invoke({"messages": [HumanMessage(ASK)]}, config)
    (pending,) = paused["__interrupt__"]
    assert (pending.value["signal"], pending.value["count"]) == ("repeated_tool_call", 3)
    assert (model.turns, files.reads) == (3, 2)
    state = agent.get_state(config)
    assert state.next == ("model",)
    marker = state.values["loop_guard"]["pause"]
    answer = state.values["messages"][-1]
    assert isinstance(answer, AIMessage)
    assert answer.tool_calls
    assert marker["ai"] == answer.id
    assert marker["payload"] == pending.value


def test_resuming_a_held_interrupt_with_end_ends_the_run_without_a_model_call() -> None:
    """``Command(resume="end")``: the held call is answered "not executed", the run ends with
    the stop message the interrupt showed, no model call and no tool run more; the marker is
    gone and the thread takes its next message."""
    model, files = _reader(6), Files()
    agent, config = _agent(model, files, LoopGuardMiddleware(on_stop="interrupt"))
    paused = agent.invoke({"messages": [HumanMessage(ASK)]}, config)
    (pending,) = paused["__interrupt__"]
    result = agent.invoke(Command(resume="end"), config)
    assert "__interrupt__" not in result
    assert (model.turns, files.reads) == (3, 2)
    kinds = [guard_kind(m) for m in result["messages"]]
    assert kinds.count("stop") == 1
    assert kinds.count("not_executed") == 1
    assert result["messages"][-1].content == pending.value["message"]
    assert result["loop_guard_stop"]["signal"] == "repeated_tool_call"
    assert "pause" not in agent.get_state(config).values["loop_guard"]
    assert_valid_history(result["messages"])
    model.script[3:] = ["You're welcome."]
    again = agent.invoke({"messages": [HumanMessage("Thanks!")]}, config)
    assert again["messages"][-1].content == "You're welcome."
    assert again.get("loop_guard_stop") is None


def test_resuming_a_held_interrupt_with_continue_runs_the_call_with_fresh_counters() -> None:
    """``Command(resume="continue")``: the held call runs (the tool's third read), the model
    is called again, and the loop is caught again three identical reads later."""
    model, files = _reader(8), Files()
    agent, config = _agent(model, files, LoopGuardMiddleware(on_stop="interrupt"))
    agent.invoke({"messages": [HumanMessage(ASK)]}, config)
    again = agent.invoke(Command(resume="continue"), config)
    (pending,) = again["__interrupt__"]
    assert pending.value["count"] == 3
    assert files.reads == 4  # the held call, then one more before the next repeat
    assert model.turns == 5  # the repeat's own answer was paid for, not the one after it
    assert_valid_history(agent.get_state(config).values["messages"][:-1])


def test_an_abandoned_interrupt_is_repaired_at_the_next_run_start() -> None:
    """A held interrupt answered with a new message instead of a resume: the model step that
    starts the run answers the open call "not executed" before the model reads the thread
    (no node of its own does it any more), and the run goes on."""
    model, files = _reader(3), Files()
    agent, config = _agent(model, files, LoopGuardMiddleware(on_stop="interrupt"))
    agent.invoke({"messages": [HumanMessage(ASK)]}, config)
    model.script[3:] = ["Sorry: retries are set to 3."]
    result = agent.invoke({"messages": [HumanMessage("Just tell me, please.")]}, config)
    assert result["messages"][-1].content == "Sorry: retries are set to 3."
    assert model.turns == 4
    assert_valid_history(model.seen[-1])
    assert_valid_history(result["messages"])
    answered = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [guard_kind(m) for m in answered] == [None, None, "not_executed"]
    asked = [m.content for m in result["messages"] if isinstance(m, HumanMessage)]
    assert asked == [ASK, "Just tell me, please."]


def _replan(cap: int) -> Any:
    """An app's after-model hook: an answer without calls goes back to the model (the app
    wants a plan with tool calls), until ``cap`` answers; it overrides the guard's
    ``jump_to``, since it runs after the model's step."""

    @after_model(can_jump_to=["model"])
    def replan(state: Any, runtime: Any) -> dict[str, Any] | None:
        answers = [m for m in state["messages"] if isinstance(m, AIMessage)]
        if answers and not answers[-1].tool_calls and len(answers) < cap:
            return {"jump_to": "model"}
        return None

    return replan


PLAN = "Plan: read config.yaml, then answer."


@pytest.mark.parametrize("order", ["guard first", "hook first"])
def test_an_app_hook_sending_an_ended_run_back_gets_the_stop_not_a_model_call(
    order: str,
) -> None:
    """``on_stop="end"``: the third identical plan ends the run; the app's hook, which runs
    after the model's step, sends it back to the model anyway. The guard answers with its
    stop message again instead of paying the model, until the app's own cap lets the run end:
    three model calls, every message after them the guard's stop."""
    model = ScriptedChatModel(script=[PLAN] * 10)
    guard = LoopGuardMiddleware(on_stop="end")
    hooks = [guard, _replan(6)] if order == "guard first" else [_replan(6), guard]
    agent = create_agent(model, [Files().tool()], middleware=hooks, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "planner"}}
    result = agent.invoke({"messages": [HumanMessage(ASK)]}, config)
    assert model.turns == 3
    assert result["loop_guard_stop"]["signal"] == "repeated_assistant_response"
    kinds = [guard_kind(m) for m in result["messages"][4:]]
    assert kinds == ["stop"] * 3
    assert len({m.content for m in result["messages"][4:]}) == 1
    assert_valid_history(result["messages"])


@pytest.mark.parametrize("order", ["guard first", "hook first"])
def test_an_app_hook_sending_a_raised_stop_back_raises_before_a_model_call(order: str) -> None:
    """``on_stop="raise"``: the same, and the stop raises at the next model step, before the
    model is paid for; the thread is valid and takes its next message."""
    model = ScriptedChatModel(script=[PLAN] * 10)
    guard = LoopGuardMiddleware()
    hooks = [guard, _replan(6)] if order == "guard first" else [_replan(6), guard]
    agent = create_agent(model, [Files().tool()], middleware=hooks, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "planner"}}
    with pytest.raises(LoopDetected) as raised:
        agent.invoke({"messages": [HumanMessage(ASK)]}, config)
    assert (raised.value.signal, raised.value.count) == (Signal.REPEATED_ASSISTANT_RESPONSE, 3)
    assert model.turns == 3
    messages = agent.get_state(config).values["messages"]
    assert_valid_history(messages)
    assert len(messages) == 4
