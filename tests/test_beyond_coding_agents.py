"""SPEC §12 (v3.1) through the real integrations: the scenarios of ``conversations.py`` run as
agents, a ``create_agent`` guarded by the callback handler or the middleware, and a hand-built
``StateGraph`` with a ``ToolNode`` guarded by the node guard (or the handler). Each row gives
the same answer there as through the pure detector (``test_beyond_coding.py``): the everyday
work runs to its end, and the loops stop no later than ``drive()`` says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal, get_args

import pytest
from conversations import (
    Scenario,
    Turn,
    User,
    answers_only_chat,
    apology_cycle,
    ci_poller,
    drive,
    export_poller,
    flailing_with_fan_outs,
    flailing_without_jdk,
    flight_fan_out,
    frozen_poller,
    heredoc_files,
    install_without_network,
    line_count_poller,
    log_tail_poller,
    pod_poller,
    rephrase_loop,
    rerun_after_fixes,
    same_question,
    same_reply_to_other_questions,
    shell_setup,
    support_chat,
    web_fan_out,
    write_files,
)
from guard_scenarios import guard_messages, harness, stop_message
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, assert_valid_history, calls

# --- a scenario as an agent -----------------------------------------------------------------------

Integration = Literal["handler", "handler-graph", "middleware", "node"]
"""The callback handler on ``create_agent`` or on a hand-built ``StateGraph``; the middleware
on ``create_agent``; the node guard on a hand-built ``StateGraph``."""
EVERY_INTEGRATION: tuple[Integration, ...] = get_args(Integration)

Case = Callable[[], Scenario]
"""Makes a scenario afresh: its tools keep state (a poller's next output), so a scenario
drives one agent or one detector, never both."""

ANY_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}
FINAL = "That is all I can do for now."
"""The reply that ends an invocation whose script ends with tool calls."""
FIRST = "Please go ahead."
"""The user message of a scenario that starts without one."""


def invocations(scenario: Scenario) -> list[tuple[str, list[AIMessage]]]:
    """The scenario as invocations of an agent: each user message and the model's answers to
    it, up to the reply that ends the invocation (a reply is added where the script ends on
    tool calls)."""
    runs: list[tuple[str, list[AIMessage]]] = []
    for step in scenario.script:
        if isinstance(step, User):
            runs.append((step.text, []))
            continue
        if not runs:
            runs.append((FIRST, []))
        answers = runs[-1][1]
        assert not answers or answers[-1].tool_calls, "a reply ends an invocation: a User next"
        answers.append(
            calls(*step.calls, content=step.text) if step.calls else AIMessage(step.text)
        )
    for _, answers in runs:
        if not answers or answers[-1].tool_calls:
            answers.append(AIMessage(FINAL))
    return runs


def scripted_model(runs: Sequence[tuple[str, list[AIMessage]]]) -> ScriptedChatModel:
    """A model giving the scenario's answers in order; each checks that it answers in its own
    invocation (as many human messages as invocations so far) and that the history it is
    given would be accepted by a provider."""

    def step(invocation: int, answer: AIMessage) -> Callable[[Sequence[BaseMessage]], AIMessage]:
        def answering(messages: Sequence[BaseMessage]) -> AIMessage:
            assert_valid_history(messages)
            humans = [m for m in messages if isinstance(m, HumanMessage) and m.name is None]
            assert len(humans) == invocation + 1, "an answer given in the wrong invocation"
            return answer

        return answering

    steps = [step(n, answer) for n, (_, answers) in enumerate(runs) for answer in answers]
    return ScriptedChatModel(script=steps)


def as_tools(scenario: Scenario, executed: list[str]) -> list[BaseTool]:
    """The scenario's tool functions as LangChain tools that record each run of their body;
    a ``ToolException`` becomes an error tool message (``handle_tool_error``), as
    ``ToolNode``'s default handler re-raises it otherwise."""

    def wrap(name: str, function: Callable[..., str]) -> BaseTool:
        def run(**arguments: Any) -> str:
            executed.append(name)
            return function(**arguments)

        return StructuredTool.from_function(
            run,
            name=name,
            description=f"The {name} tool.",
            args_schema=ANY_ARGS,
            handle_tool_error=True,
        )

    return [wrap(name, function) for name, function in scenario.tools.items()]


def state_graph(
    model: ScriptedChatModel, tools: Sequence[BaseTool], checkpointer: InMemorySaver
) -> Any:
    """``agent -> tools_condition -> tools -> agent``, checkpointed."""
    bound = model.bind_tools(list(tools))

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(list(tools)))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


@dataclass
class Ran:
    """What an agent did with a scenario."""

    integration: Integration
    stop: Signal | None = None
    """The signal that stopped it (``LoopDetected``, or ``loop_guard_stop``)."""
    executed: list[str] = field(default_factory=list)
    """The tool bodies that ran, by name."""
    replies: list[str] = field(default_factory=list)
    """The last message of each invocation that completed."""
    turns: int = 0
    """Model calls."""
    messages: list[BaseMessage] = field(default_factory=list)
    """The thread's history at the end."""
    repaired: int = 0
    """Calls a raised stop left unanswered (``LoopDetected.repair``)."""


def run_agent(
    case: Case,
    integration: Integration,
    *,
    how: Literal["invoke", "ainvoke"] = "invoke",
    on_stop: Literal["raise", "end"] = "raise",
    restart: bool = False,
) -> Ran:
    """Run the scenario ``case`` makes through an agent guarded by ``integration``, one
    invocation per user message on one checkpointed thread, until it ends or is stopped.

    With ``restart``, each invocation gets a new guard and agent over the same checkpointer,
    as after a server restart: all the guard knows of the thread is in the checkpoint.
    """
    scenario = case()
    ran = Ran(integration)
    runs = invocations(scenario)
    model = scripted_model(runs)
    tools = as_tools(scenario, ran.executed)
    config = {"scope": scenario.scope, **scenario.config}  # what its app passes
    thread: RunnableConfig = {"configurable": {"thread_id": f"{scenario.name}-{integration}"}}
    saver = InMemorySaver()

    def agent() -> Any:
        if integration in ("middleware", "node"):
            built = harness(
                integration, model, tools, config=config, on_stop=on_stop, checkpointer=saver
            )
            return built.graph
        assert on_stop == "raise", "a callback can only raise"
        assert not restart, "a handler's state is its own, not the checkpoint's"
        if integration == "handler":
            return create_agent(model, tools, checkpointer=saver)
        return state_graph(model, tools, saver)

    graph = agent()
    if integration.startswith("handler"):
        thread["callbacks"] = [LoopGuardCallbackHandler(LoopGuardConfig(**config))]
    for text, _ in runs:
        if restart:
            graph = agent()
        payload = {"messages": [HumanMessage(content=text)]}
        try:
            if how == "invoke":
                result = graph.invoke(payload, thread)
            else:
                result = asyncio.run(graph.ainvoke(payload, thread))
        except LoopDetected as stop:
            ran.stop = stop.signal
            # the README's line after a stop; only the handler's stops leave calls to answer
            ran.repaired = stop.repair(graph, thread)
            break
        stopped = result.get("loop_guard_stop")
        if stopped is not None:
            stop_message(result["messages"])
            ran.stop = Signal(stopped["signal"])
            break
        ran.replies.append(result["messages"][-1].text)
    ran.turns = model.turns
    ran.messages = list(graph.get_state(thread).values["messages"])
    return ran


def expected_replies(case: Case) -> list[str]:
    """The reply that ends each invocation of the scenario."""
    return [answers[-1].text for _, answers in invocations(case())]


def expected_calls(case: Case) -> list[str]:
    """Every tool call of the scenario, by name."""
    return sorted(
        name for step in case().script if isinstance(step, Turn) for name, _ in step.calls
    )


def in_run_scope(case: Case) -> Case:
    """``case`` guarded with ``scope="run"``: each invocation starts afresh."""
    return lambda: replace(case(), scope="run")


def assert_ran_to_its_end(ran: Ran, case: Case) -> None:
    """Never stopped, as by the pure detector: every invocation reached its reply, every call
    ran, the guard wrote nothing, and the thread is one a provider accepts."""
    assert drive(case()).stop is None
    assert ran.stop is None
    assert ran.replies == expected_replies(case)
    assert sorted(ran.executed) == expected_calls(case)
    assert guard_messages(ran.messages) == []
    assert_valid_history(ran.messages)


def assert_stopped_as_the_detector_does(ran: Ran, case: Case) -> None:
    """Stopped with the pure detector's signal, no later than it stops (tool bodies run and
    models called), leaving a thread a provider accepts."""
    seen = drive(case())
    assert seen.stop is not None
    assert ran.stop is seen.stop.signal
    assert len(ran.executed) <= seen.calls
    assert ran.turns <= seen.turns
    assert_valid_history(ran.messages)
    if not ran.integration.startswith("handler"):
        assert ran.repaired == 0  # the graph guards answer their own stops' calls


# --- N6: many calls in one model message ----------------------------------------------------------

FAN_OUTS = [
    pytest.param(partial(flight_fan_out, 0), id="flights-seed0"),
    pytest.param(partial(flight_fan_out, 3), id="flights-seed3"),
    pytest.param(partial(flight_fan_out, 7, batches=2), id="flights-two-messages"),
    pytest.param(partial(flight_fan_out, 8, routes=30, served=3), id="flights-30-routes"),
    pytest.param(partial(flight_fan_out, 9, routes=12, served=1, batches=3), id="flights-3x4"),
    pytest.param(partial(web_fan_out, 0), id="web-seed0"),
    pytest.param(partial(web_fan_out, 2, queries=12), id="web-12-seed2"),
]


@pytest.mark.parametrize("integration", ["handler", "middleware", "node"])
@pytest.mark.parametrize("case", FAN_OUTS)
def test_a_fan_out_runs_to_its_end(case: Case, integration: Integration) -> None:
    """N6: a model message with many parallel calls, most finding nothing, is one decision:
    the agent reaches its answer with every call run."""
    assert_ran_to_its_end(run_agent(case, integration), case)


@pytest.mark.parametrize("integration", ["handler", "middleware", "node"])
def test_a_fan_out_runs_to_its_end_in_an_async_run(integration: Integration) -> None:
    """N6 under ``ainvoke``, where the parallel calls' events interleave differently."""
    case = partial(flight_fan_out, 5, batches=2)
    assert_ran_to_its_end(run_agent(case, integration, how="ainvoke"), case)


# --- N7: numbers that move ------------------------------------------------------------------------

POLLERS = [
    pytest.param(ci_poller, id="ci"),
    pytest.param(partial(ci_poller, elapsed=False), id="ci-step-counter-only"),
    pytest.param(partial(export_poller, range(5, 100, 7)), id="export-percent"),
    pytest.param(partial(export_poller, range(1, 12)), id="export-slow"),
    pytest.param(partial(line_count_poller, [118, 131, 142, 150]), id="wc-short"),
    pytest.param(partial(line_count_poller, range(100, 400, 11)), id="wc-long"),
    pytest.param(partial(log_tail_poller, 10), id="log-tail"),
    pytest.param(partial(log_tail_poller, 30, lines=3), id="log-tail-long"),
]


@pytest.mark.parametrize("integration", ["middleware", "node"])
@pytest.mark.parametrize("case", POLLERS)
def test_a_poll_whose_numbers_move_runs_until_done(case: Case, integration: Integration) -> None:
    """N7: the same status call polled until done, only numbers changing, is never a near
    repeat, however many polls."""
    assert_ran_to_its_end(run_agent(case, integration), case)


@pytest.mark.parametrize("on_stop", ["raise", "end"])
@pytest.mark.parametrize("integration", ["middleware", "node"])
@pytest.mark.parametrize("polls", [4, 9])
def test_a_status_that_does_not_move_is_still_an_exact_repeat(
    polls: int, integration: Integration, on_stop: Literal["raise", "end"]
) -> None:
    """N7's other side: a status that does not move at all, numbers included, stops at the
    3rd identical poll, before it runs."""
    case = partial(frozen_poller, polls)
    ran = run_agent(case, integration, on_stop=on_stop)
    assert ran.stop is Signal.REPEATED_TOOL_CALL
    assert ran.executed == ["get_export_status"] * 2
    assert_stopped_as_the_detector_does(ran, case)


@pytest.mark.parametrize("integration", ["handler", "middleware", "node"])
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(partial(pod_poller, 3), id="kubectl-creating-while-AGE-grows"),
        pytest.param(partial(ci_poller, polls_per_step=3), id="ci-step-while-elapsed-moves"),
    ],
)
def test_a_status_whose_only_change_is_time_is_an_exact_repeat(
    case: Case, integration: Integration
) -> None:
    """SPEC §13 R10: time passing is no progress: a pod creating while its AGE grows, a CI
    step polled while its elapsed time moves, stop at the 3rd identical poll."""
    ran = run_agent(case, integration)
    assert ran.stop is Signal.REPEATED_TOOL_CALL
    assert len(ran.executed) == 2
    assert_stopped_as_the_detector_does(ran, case)


# --- N8 and R9: a conversation on a checkpointed thread -------------------------------------------

EVERY_GUARD: list[Any] = [
    pytest.param("handler", "raise", id="handler"),
    pytest.param("handler-graph", "raise", id="handler-on-state-graph"),
    pytest.param("middleware", "raise", id="middleware"),
    pytest.param("middleware", "end", id="middleware-end"),
    pytest.param("node", "raise", id="node"),
    pytest.param("node", "end", id="node-end"),
]


@pytest.mark.parametrize("integration", EVERY_INTEGRATION)
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(partial(support_chat, 30), id="some-with-tool-calls"),
        pytest.param(partial(answers_only_chat, 30), id="answers-only"),
    ],
)
def test_a_chat_of_30_messages_in_thread_scope_is_never_stopped(
    case: Case, integration: Integration
) -> None:
    """N8: 30 user messages on one thread, each answered, some with a tool call and some
    without (or none with one): an answer to a new message is never a failing turn."""
    assert_ran_to_its_end(run_agent(case, integration), case)


@pytest.mark.parametrize(("integration", "on_stop"), EVERY_GUARD)
@pytest.mark.parametrize("messages", [3, 11])
def test_the_same_reply_after_each_message_stops_by_the_3rd(
    messages: int, integration: Integration, on_stop: Literal["raise", "end"]
) -> None:
    """R9 (scope thread): "I'm sorry, could you rephrase that?" after each message is
    stopped at the 3rd reply, in the 3rd invocation of the thread."""
    case = partial(rephrase_loop, messages)
    ran = run_agent(case, integration, on_stop=on_stop)
    assert ran.stop is Signal.REPEATED_ASSISTANT_RESPONSE
    assert (ran.turns, len(ran.replies)) == (3, 2)
    assert_stopped_as_the_detector_does(ran, case)


@pytest.mark.parametrize(("integration", "on_stop"), EVERY_GUARD)
@pytest.mark.parametrize("length", [2, 3, 4])
def test_nearly_identical_replies_cycling_stop_by_the_3rd_lap(
    length: int, integration: Integration, on_stop: Literal["raise", "end"]
) -> None:
    """R9 (scope thread): 2-4 apologies that differ in a few words, one after each message,
    cycling: stopped within the 3rd lap."""
    case = partial(apology_cycle, length)
    ran = run_agent(case, integration, on_stop=on_stop)
    assert ran.stop is Signal.REPLY_CYCLE
    assert ran.turns <= 3 * length
    assert_stopped_as_the_detector_does(ran, case)


@pytest.mark.parametrize("integration", ["middleware", "node"])
@pytest.mark.parametrize(
    ("case", "signal"),
    [
        pytest.param(partial(rephrase_loop, 11), Signal.REPEATED_ASSISTANT_RESPONSE, id="same"),
        pytest.param(partial(apology_cycle, 3), Signal.REPLY_CYCLE, id="cycle"),
        pytest.param(partial(answers_only_chat, 12), None, id="N8-answers-only"),
    ],
)
def test_a_conversation_is_judged_from_the_checkpoint_after_a_restart(
    case: Case, signal: Signal | None, integration: Integration
) -> None:
    """N8 and R9 with a new guard for each message (a restarted server): the replies so far
    are in the thread's checkpoint, so the loop stops as before and the chat runs on."""
    ran = run_agent(case, integration, restart=True)
    if signal is None:
        assert_ran_to_its_end(ran, case)
    else:
        assert ran.stop is signal
        assert_stopped_as_the_detector_does(ran, case)


@pytest.mark.parametrize("integration", EVERY_INTEGRATION)
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(in_run_scope(partial(rephrase_loop, 11)), id="same-reply"),
        pytest.param(in_run_scope(partial(apology_cycle, 2)), id="reply-cycle"),
    ],
)
def test_in_run_scope_each_message_starts_afresh(case: Case, integration: Integration) -> None:
    """R9 is thread scope only: with ``scope="run"`` the same replies on the same thread are
    never stopped."""
    assert_ran_to_its_end(run_agent(case, integration), case)


# --- R8, R4', N1 and N9 through a StateGraph ------------------------------------------------------

STATE_GRAPH_GUARDS: list[Any] = [
    pytest.param("node", "raise", id="node"),
    pytest.param("node", "end", id="node-end"),
    pytest.param("handler-graph", "raise", id="handler"),
]


@pytest.mark.parametrize(("integration", "on_stop"), STATE_GRAPH_GUARDS)
@pytest.mark.parametrize(
    "case",
    [
        *(
            pytest.param(partial(flailing_without_jdk, shape), id=f"R8-shape{shape}")
            for shape in range(4)
        ),
        pytest.param(flailing_with_fan_outs, id="R8-fan-outs"),
        *(
            pytest.param(partial(install_without_network, order), id=f"R4-order{order}")
            for order in range(3)
        ),
    ],
)
def test_nothing_new_across_tools_and_the_same_failure_between_others_stop(
    case: Case, integration: Integration, on_stop: Literal["raise", "end"]
) -> None:
    """R8 and R4': an agent without a network or a JDK trying one thing after another, or
    the same install timing out between other calls, stops no later than the detector says."""
    assert_stopped_as_the_detector_does(run_agent(case, integration, on_stop=on_stop), case)


@pytest.mark.parametrize("integration", ["node", "handler-graph"])
def test_a_fan_out_counts_once_toward_nothing_new(integration: Integration) -> None:
    """R8 with N6: answers of three searches each, none finding anything, stop at the 10th
    answer (30 calls), not at the 10th call."""
    ran = run_agent(flailing_with_fan_outs, integration)
    assert ran.stop is Signal.NO_NEW_INFO
    assert (ran.turns, len(ran.executed)) == (10, 30)


@pytest.mark.parametrize("integration", ["node", "handler-graph"])
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(rerun_after_fixes, id="N1-rerun-after-fixes"),
        pytest.param(write_files, id="N9-write-file"),
        pytest.param(partial(write_files, 14, tool="create_file"), id="N9-create-file"),
        pytest.param(heredoc_files, id="N9-heredoc"),
        pytest.param(partial(heredoc_files, 16), id="N9-heredoc-16"),
        pytest.param(shell_setup, id="N9-mkdir-touch-sed"),
    ],
)
def test_reruns_after_changes_and_silent_work_run_to_their_end(
    case: Case, integration: Integration
) -> None:
    """N1 and N9: a re-run after each fix, files written one after another, mkdir, touch and
    sed in a row: never stopped."""
    assert_ran_to_its_end(run_agent(case, integration), case)


# --- SPEC §14 N18: the same question asked again --------------------------------------------------


@pytest.mark.parametrize("integration", EVERY_INTEGRATION)
def test_n18_the_same_question_answered_as_before_runs_to_its_end(
    integration: Integration,
) -> None:
    """N18: a customer asks for an order's status six times on one thread; the bot looks it
    up and gives the same true answer each time. Every integration reads the human
    message's words and lets each invocation answer."""
    assert_ran_to_its_end(run_agent(same_question, integration), same_question)


@pytest.mark.parametrize(("integration", "on_stop"), EVERY_GUARD)
def test_n18_the_same_answer_without_a_lookup_is_stopped_as_r9(
    integration: Integration, on_stop: Literal["raise", "end"]
) -> None:
    """The same question answered alike with no lookup between is §12 R9 (an app's own note
    repeated reads the same): stopped as the detector stops it, no later."""
    case = partial(same_question, lookup=False)
    ran = run_agent(case, integration, on_stop=on_stop)
    assert ran.stop is Signal.REPEATED_ASSISTANT_RESPONSE
    assert_stopped_as_the_detector_does(ran, case)


@pytest.mark.parametrize(("integration", "on_stop"), EVERY_GUARD)
def test_n18_the_same_reply_to_other_questions_is_still_stopped(
    integration: Integration, on_stop: Literal["raise", "end"]
) -> None:
    """R9 beside N18: after one question asked twice, the same answer to new questions is
    stopped, as the detector stops it (no later)."""
    case = same_reply_to_other_questions
    ran = run_agent(case, integration, on_stop=on_stop)
    assert ran.stop is Signal.REPEATED_ASSISTANT_RESPONSE
    assert_stopped_as_the_detector_does(ran, case)
