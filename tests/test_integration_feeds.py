"""What every integration feeds the detector (SPEC §11): ``Command`` tools, validation errors of
invalid arguments, and helper models (N2), through real ``create_agent`` and ``StateGraph`` runs
with the callback handler, the middleware and the node guard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import pytest
from guard_scenarios import harness
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from langchain_loop_guard import LoopGuardCallbackHandler, LoopGuardConfig, Signal
from langchain_loop_guard._integrations._middleware import LoopGuardMiddleware
from langchain_loop_guard._integrations._node import LoopGuardNode
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, call

Integration = Literal["handler", "middleware", "node"]
INTEGRATIONS: tuple[Integration, ...] = ("handler", "middleware", "node")


def run_guarded(
    integration: Integration, model: ScriptedChatModel, tools: Sequence[BaseTool]
) -> list[BaseMessage]:
    """Run an agent guarded by ``integration`` to its end (a checkpointer, one thread).

    The handler guards a ``create_agent`` agent through the run's callbacks; the middleware
    a ``create_agent`` agent; the node guard a hand-built ``StateGraph`` with a ``ToolNode``.
    """
    if integration == "handler":
        agent = create_agent(model, list(tools), checkpointer=InMemorySaver())
        config: RunnableConfig = {
            "callbacks": [LoopGuardCallbackHandler(LoopGuardConfig())],
            "configurable": {"thread_id": "t"},
        }
        result = agent.invoke({"messages": [HumanMessage("Please do the task.")]}, config)
        return list(result["messages"])
    guarded = harness(integration, model, tools)
    return list(guarded.invoke()["messages"])


# --- tools that return a Command ----------------------------------------------------------------


def command_tool(*contents: str) -> Any:
    """``remember(fact)``: answers through ``Command(update=...)`` with the next of ``contents``
    (the last one again when they run out); ``ran`` counts its runs."""
    ran: list[str] = []

    @tool
    def remember(fact: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Remember a fact for later."""
        content = contents[min(len(ran), len(contents) - 1)]
        ran.append(fact)
        update = {"messages": [ToolMessage(content, tool_call_id=tool_call_id)]}
        return Command(update=update)

    remember.metadata = {"ran": ran}
    return remember


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_command_tool_returning_the_same_content_is_stopped(integration: Integration) -> None:
    """Identical calls answered by Command(the same text) loop: the 3rd is stopped."""
    remember = command_tool("Saved: the build uses Python 3.11.")
    model = ScriptedChatModel(script=[call("remember", {"fact": "python 3.11"})] * 6 + ["done"])
    with pytest.raises(LoopDetected) as caught:
        run_guarded(integration, model, [remember])
    assert (caught.value.signal, caught.value.tool) == (Signal.REPEATED_TOOL_CALL, "remember")
    assert len(remember.metadata["ran"]) == 2


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_command_tool_whose_content_changes_is_not_stopped(integration: Integration) -> None:
    """The same Command call whose status words change (a poll) makes progress: it completes."""
    statuses = ["Queued.", "Running.", "Copying files.", "Indexing.", "Verifying.", "Finished."]
    remember = command_tool(*statuses)
    model = ScriptedChatModel(script=[call("remember", {"fact": "job"})] * len(statuses) + ["done"])
    messages = run_guarded(integration, model, [remember])
    assert messages[-1].text == "done"
    assert len(remember.metadata["ran"]) == len(statuses)


# --- validation errors of invalid arguments -------------------------------------------------------


@tool
def repeat_word(word: str, count: int) -> str:
    """Repeat ``word`` ``count`` times."""
    return " ".join([word] * count)


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_new_invalid_values_every_time_repeat_one_validation_error(
    integration: Integration,
) -> None:
    """A model sending a new non-integer count each time is stopped at the 3rd failure."""
    values = ["abc", "xyz", "pqr", "uvw", "rst", "klm"]
    model = ScriptedChatModel(
        script=[call("repeat_word", {"word": "hi", "count": v}) for v in values] + ["done"]
    )
    with pytest.raises(LoopDetected) as caught:
        run_guarded(integration, model, [repeat_word])
    error = caught.value
    assert (error.signal, error.tool, error.count) == (
        Signal.REPEATED_TOOL_ERROR,
        "repeat_word",
        3,
    )
    assert model.turns == 3  # stopped before a 4th model call is paid for


# --- helper models (N2) -------------------------------------------------------------------------

DOCUMENTS = [f"Document {n}: notes about topic {n}." for n in range(5)]
CRITIQUE = "Not good enough yet; answer again."


class RagState(MessagesState):
    """Messages plus the grades of the retrieved documents."""

    grades: list[str]


def rag_graph(grader: ScriptedChatModel, agent: ScriptedChatModel, rounds: int) -> Any:
    """``grade`` (the grader model, once per document) -> ``agent`` <-> ``critic`` (``rounds``).

    The grader sees one document each time, never an earlier grade; the agent sees the whole
    conversation, its own earlier answers included.
    """

    def grade(state: RagState) -> dict[str, Any]:
        prompt = SystemMessage("Is the document relevant to the question? Answer yes or no.")
        grades = [grader.invoke([prompt, HumanMessage(doc)]).text for doc in DOCUMENTS]
        return {"grades": grades}

    def answer(state: RagState) -> dict[str, Any]:
        return {"messages": [agent.invoke(state["messages"])]}

    def critic(state: RagState) -> dict[str, Any]:
        return {"messages": [HumanMessage(CRITIQUE)]}

    def again(state: RagState) -> str:
        answers = sum(isinstance(m, AIMessage) for m in state["messages"])
        return "critic" if answers < rounds else END

    builder = StateGraph(RagState)
    builder.add_node("grade", grade)
    builder.add_node("agent", answer)
    builder.add_node("critic", critic)
    builder.add_edge(START, "grade")
    builder.add_edge("grade", "agent")
    builder.add_conditional_edges("agent", again, ["critic", END])
    builder.add_edge("critic", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def run_rag(graph: Any, handler: LoopGuardCallbackHandler, how: str) -> dict[str, Any]:
    config: RunnableConfig = {"callbacks": [handler], "configurable": {"thread_id": "rag"}}
    inputs = {"messages": [HumanMessage("What do the documents say?")]}
    if how == "ainvoke":
        return dict(asyncio.run(graph.ainvoke(inputs, config)))
    return dict(graph.invoke(inputs, config))


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_grader_answering_yes_for_five_documents_is_never_stopped(how: str) -> None:
    """A grader giving the same answer to 5 new inputs, then 3 different agent answers: no stop."""
    grader = ScriptedChatModel(script=["yes"] * len(DOCUMENTS))
    agent = ScriptedChatModel(script=["Draft one.", "Draft two.", "Final answer."])
    handler = LoopGuardCallbackHandler(LoopGuardConfig())
    result = run_rag(rag_graph(grader, agent, rounds=3), handler, how)
    assert result["grades"] == ["yes"] * len(DOCUMENTS)
    assert result["messages"][-1].text == "Final answer."
    assert handler.status().stops == 0


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_agent_repeating_its_own_answer_is_still_stopped_next_to_a_grader(how: str) -> None:
    """In the same run, the agent giving the same answer to its own history is stopped at 3."""
    grader = ScriptedChatModel(script=["yes"] * len(DOCUMENTS))
    agent = ScriptedChatModel(script=["I cannot say more."], then="repeat")
    handler = LoopGuardCallbackHandler(LoopGuardConfig())
    with pytest.raises(LoopDetected) as caught:
        run_rag(rag_graph(grader, agent, rounds=10), handler, how)
    assert caught.value.signal is Signal.REPEATED_ASSISTANT_RESPONSE
    assert (grader.turns, agent.turns) == (len(DOCUMENTS), 3)


def guarded_graph_state(kind: Literal["middleware", "node"]) -> Callable[..., Any]:
    """A pass of a graph guard after the model, on hand-built messages."""
    config = LoopGuardConfig()
    guard: LoopGuardMiddleware | LoopGuardNode = (
        LoopGuardMiddleware(config) if kind == "middleware" else LoopGuardNode(config)
    )
    state: dict[str, Any] = {}

    def answer(messages: list[BaseMessage]) -> None:
        state["messages"] = messages
        if isinstance(guard, LoopGuardMiddleware):  # the model step: the guard reads the answer
            *before, last = messages
            request = ModelRequest(
                model=ScriptedChatModel(script=["unused"]),
                messages=before,
                state={**state, "messages": before},  # type: ignore[arg-type]
            )
            result = guard.wrap_model_call(request, lambda _: ModelResponse(result=[last]))
            command = getattr(result, "command", None)
            update = command.update if command is not None else None
        else:
            update = guard(state)
        state.update((update or {}) | {"messages": messages})

    return answer


@pytest.mark.parametrize("kind", ["middleware", "node"])
def test_graph_guard_counts_an_answer_only_when_the_previous_one_is_before_it(
    kind: Literal["middleware", "node"],
) -> None:
    """An answer after a history without the previous answer (summarized away) is no repeat."""
    answer = guarded_graph_state(kind)
    summary = SystemMessage("Summary of the conversation so far.", id="summary")
    for n in range(5):  # the history is summarized before every model call
        answer([summary, AIMessage("Same.", id=f"a{n}")])
    answer = guarded_graph_state(kind)
    history: list[BaseMessage] = [summary]
    for n in range(2):  # the same answers, each with the previous one before it
        history = [*history, AIMessage("Same.", id=f"a{n}"), SystemMessage(CRITIQUE, id=f"c{n}")]
        answer(history[:-1])
    with pytest.raises(LoopDetected) as caught:
        answer([*history, AIMessage("Same.", id="a2")])
    assert caught.value.signal is Signal.REPEATED_ASSISTANT_RESPONSE
