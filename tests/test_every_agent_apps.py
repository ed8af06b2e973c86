"""SPEC §13 (v4) through the real integrations: the scenarios of ``every_agent.py`` as a
``create_agent`` guarded by the callback handler or the middleware, and a hand-built
``StateGraph`` with a ``ToolNode`` guarded by the node guard (or the handler), each on a
checkpointed thread. Each row gives the answer the pure detector gives
(``test_every_agent.py``): the work runs to its end, the loops stop no later than
``drive()`` says. R14's agents answer without tools and are sent back to the model by the
app (a planner loop in a ``StateGraph``, an ``after_model`` hook jumping back).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import pytest
from conversations import Scenario, Turn, User
from every_agent import (
    PLANS,
    gh_run_watch,
    growing_build_log,
    happy_to_help,
    npm_install,
    pending_build,
    pending_pod,
    pods_rollout,
    reindexed_clicks,
    rendered_dashboard,
    reservation_reviews,
    retry_on_request,
    reworded_plan,
    rollout_waiter,
    same_hits,
    scored_docs,
    scrolled_feed,
    sleep_poller,
    sql_no_such_column,
    text_errors,
    ticking_page,
    volatile_search,
)
from guard_scenarios import GraphState, stop_message
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, after_model
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from test_beyond_coding_agents import (
    Case,
    Integration,
    Ran,
    assert_ran_to_its_end,
    assert_stopped_as_the_detector_does,
    run_agent,
    scripted_model,
)

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._middleware import LoopGuardMiddleware
from langchain_loop_guard._integrations._node import LoopGuardNode
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, assert_valid_history

OnStop = Literal["raise", "end"]


def guard_config(scenario: Scenario) -> dict[str, Any]:
    """What the app passes to ``LoopGuardConfig``: the scenario's scope and its own keys."""
    return {"scope": scenario.scope, **scenario.config}


# --- N10, N11: pacing and long outputs that grow --------------------------------------------------

GROWING = [
    pytest.param(partial(sleep_poller, 12), id="N10-sleep-silent"),
    pytest.param(
        partial(sleep_poller, 12, slept="slept {seconds}s", backoff=True), id="N10-backoff"
    ),
    pytest.param(partial(rollout_waiter, 2), id="N10-wait-for-rollout"),
    pytest.param(partial(rollout_waiter, 2, waits=(30,)), id="N10-wait-for-30-rollout"),
    pytest.param(partial(pods_rollout, 4), id="N11-kubectl-4-more"),
    pytest.param(partial(gh_run_watch, 2), id="N11-gh-run-view"),
    pytest.param(scrolled_feed, id="N11-feed"),
    pytest.param(partial(growing_build_log, 4, tail=25), id="N11-build-log"),
]


@pytest.mark.parametrize("integration", ["handler", "middleware", "node"])
@pytest.mark.parametrize("case", GROWING)
def test_pacing_and_growing_views_run_to_their_end(case: Case, integration: Integration) -> None:
    """N10 and N11: a wait between polls whose status moves, and 20+ line views gaining new
    lines, are never stopped."""
    assert_ran_to_its_end(run_agent(case, integration), case)


# --- N12, N13: a conversation on a checkpointed thread -------------------------------------------

THREADS = [
    pytest.param(partial(reservation_reviews, 6), id="N12-reservation-reviews"),
    pytest.param(partial(happy_to_help, 6), id="N12-happy-to-help"),
    pytest.param(partial(retry_on_request, 3), id="N13-retry-raised"),
    pytest.param(partial(retry_on_request, 3, kind="json"), id="N13-retry-json-error"),
]


@pytest.mark.parametrize("integration", ["handler", "handler-graph", "middleware", "node"])
@pytest.mark.parametrize("case", THREADS)
def test_a_thread_of_new_work_and_requested_retries_is_never_stopped(
    case: Case, integration: Integration
) -> None:
    """N12 and N13 (scope thread): replies in one template after each new lookup or action,
    and a lookup retried because the user re-sent their id, run to their end."""
    assert_ran_to_its_end(run_agent(case, integration), case)


@pytest.mark.parametrize("integration", ["handler", "middleware", "node"])
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(partial(sleep_poller, 12, slept="slept {seconds}s"), id="N10-sleep"),
        pytest.param(partial(happy_to_help, 6), id="N12-happy-to-help"),
        pytest.param(partial(retry_on_request, 3, kind="text"), id="N13-retry-error-as-text"),
    ],
)
def test_never_stopped_in_an_async_run(case: Case, integration: Integration) -> None:
    """N10, N12 and N13 under ``ainvoke``."""
    assert_ran_to_its_end(run_agent(case, integration, how="ainvoke"), case)


# --- R10-R13, R15: loops a notion of "the same" hid -----------------------------------------------

EVERY_GUARD: list[Any] = [
    pytest.param("handler", "raise", id="handler"),
    pytest.param("middleware", "raise", id="middleware"),
    pytest.param("middleware", "end", id="middleware-end"),
    pytest.param("node", "raise", id="node"),
    pytest.param("node", "end", id="node-end"),
]

REFUSED_BEFORE_THE_3RD = [
    pytest.param(npm_install, id="R10-npm-install"),
    pytest.param(pending_pod, id="R10-kubectl-pending"),
    pytest.param(pending_build, id="R10-build-checked-at"),
    pytest.param(partial(volatile_search, "response_time"), id="R11-response-time-request-id"),
    pytest.param(partial(volatile_search, "took"), id="R11-took"),
    pytest.param(partial(volatile_search, "cursor"), id="R11-cursor"),
    pytest.param(scored_docs, id="R11-volatile-fields-per-tool"),
    pytest.param(rendered_dashboard, id="R11-volatile-fields-global"),
    pytest.param(partial(text_errors, "json-error", identical=True), id="R13-identical-call"),
]


@pytest.mark.parametrize(("integration", "on_stop"), EVERY_GUARD)
@pytest.mark.parametrize("case", REFUSED_BEFORE_THE_3RD)
def test_time_and_volatile_fields_do_not_hide_an_exact_repeat(
    case: Case, integration: Integration, on_stop: OnStop
) -> None:
    """R10, R11 (and R13 with an identical call): the 3rd identical call is refused before
    its tool runs."""
    ran = run_agent(case, integration, on_stop=on_stop)
    assert ran.stop is Signal.REPEATED_TOOL_CALL
    assert len(ran.executed) == 2
    assert_stopped_as_the_detector_does(ran, case)


@pytest.mark.parametrize(("integration", "on_stop"), EVERY_GUARD)
@pytest.mark.parametrize(
    ("case", "signal"),
    [
        pytest.param(same_hits, Signal.NO_NEW_INFO, id="R12-same-top-5"),
        pytest.param(partial(same_hits, masked=True), Signal.NO_NEW_INFO, id="R12-masked"),
        pytest.param(reindexed_clicks, Signal.NO_NEW_INFO, id="R12-reindexed-clicks"),
        pytest.param(sql_no_such_column, Signal.REPEATED_TOOL_ERROR, id="R13-sql-tool"),
        pytest.param(partial(text_errors, "psql"), Signal.REPEATED_TOOL_ERROR, id="R13-psql"),
        pytest.param(
            partial(text_errors, "traceback"), Signal.REPEATED_TOOL_ERROR, id="R13-traceback"
        ),
        pytest.param(
            partial(text_errors, "status-error"), Signal.REPEATED_TOOL_ERROR, id="R13-status"
        ),
        pytest.param(partial(ticking_page, 3), Signal.NEAR_REPEAT, id="R15-banner-of-3"),
        pytest.param(partial(ticking_page, 2, seed=1), Signal.NEAR_REPEAT, id="R15-banner-of-2"),
    ],
)
def test_the_same_outcome_errors_as_text_and_ticking_pages_stop(
    case: Case, signal: Signal, integration: Integration, on_stop: OnStop
) -> None:
    """R12, R13, R15: stopped with the detector's signal, no later than it stops."""
    ran = run_agent(case, integration, on_stop=on_stop)
    assert ran.stop is signal
    assert_stopped_as_the_detector_does(ran, case)


@pytest.mark.parametrize("integration", ["handler", "middleware", "node"])
def test_errors_as_text_stop_in_an_async_run(integration: Integration) -> None:
    """R13 under ``ainvoke``: the SQL tool's error text, the 3rd time, stops the run."""
    ran = run_agent(sql_no_such_column, integration, how="ainvoke")
    assert ran.stop is Signal.REPEATED_TOOL_ERROR
    assert_stopped_as_the_detector_does(ran, sql_no_such_column)


# --- R14: the same plan, reworded, in apps that send the answer back to the model ----------------

R14Guard = Literal["handler", "handler-graph", "middleware-first", "middleware-last", "node"]


def _planner_graph(model: ScriptedChatModel, guard: LoopGuardNode | None, cap: int) -> Any:
    """``agent -> (loop_guard ->) agent`` until the app's own cap of ``cap`` answers: each
    answer is sent back to the model as it is."""

    def agent(state: GraphState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    def again(state: GraphState) -> str:
        answers = [m for m in state["messages"] if isinstance(m, AIMessage)]
        return END if len(answers) >= cap else "agent"

    builder = StateGraph(GraphState if guard is not None else MessagesState)
    builder.add_node("agent", agent)
    if guard is None:
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", again, ["agent", END])
        return builder.compile(checkpointer=InMemorySaver())

    def route(state: GraphState) -> Any:
        decided = guard.route(state)
        if decided != END or state.get("loop_guard_stop"):
            return decided
        return again(state)

    builder.add_node("loop_guard", guard)
    builder.add_edge(START, "loop_guard")
    builder.add_edge("agent", "loop_guard")
    builder.add_conditional_edges("loop_guard", route, ["agent", END])  # no tools
    return builder.compile(checkpointer=InMemorySaver())


def _replan(cap: int) -> AgentMiddleware[Any, Any]:
    """The app's ``after_model`` hook: an answer without tool calls goes back to the model,
    until ``cap`` answers. ``create_agent`` runs ``after_model`` hooks last listed first, so
    with the guard listed before it, this hook jumps back before the guard's hook runs (C3)."""

    @after_model(can_jump_to=["model"])
    def replan(state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        answers = [m for m in state["messages"] if isinstance(m, AIMessage)]
        if answers and not answers[-1].tool_calls and len(answers) < cap:
            return {"jump_to": "model"}
        return None

    return replan


PLANNER_ASK = "How did Q3 go by region?"
"""The one user message of every R14 scenario (``reworded_plan``)."""


def run_planner(shape: str, integration: R14Guard, scope: str, on_stop: OnStop) -> Ran:
    """The R14 scenario ``shape`` in a planner app guarded by ``integration``."""
    scenario = reworded_plan(shape, scope=scope)
    assert scenario.script[0] == User(PLANNER_ASK)
    text = PLANNER_ASK
    answers = [AIMessage(step.text) for step in scenario.script if isinstance(step, Turn)]
    model = scripted_model([(text, answers)])
    cap = len(answers)
    loop_config = LoopGuardConfig(**guard_config(scenario))
    thread: RunnableConfig = {"configurable": {"thread_id": f"{scenario.name}-{integration}"}}
    ran = Ran(
        "handler"
        if integration.startswith("handler")
        else "middleware"
        if integration.startswith("middleware")
        else "node"
    )
    graph: Any
    if integration == "node":
        graph = _planner_graph(model, LoopGuardNode(loop_config, on_stop=on_stop), cap)
    elif integration == "handler-graph":
        graph = _planner_graph(model, None, cap)
    elif integration == "handler":
        graph = create_agent(model, [], middleware=[_replan(cap)], checkpointer=InMemorySaver())
    else:
        guard = LoopGuardMiddleware(loop_config, on_stop=on_stop)
        order = (
            [guard, _replan(cap)] if integration == "middleware-first" else [_replan(cap), guard]
        )
        graph = create_agent(model, [], middleware=order, checkpointer=InMemorySaver())
    if integration.startswith("handler"):
        thread["callbacks"] = [LoopGuardCallbackHandler(loop_config)]
    message = ""
    try:
        result = graph.invoke({"messages": [HumanMessage(content=text)]}, thread)
    except LoopDetected as stop:
        ran.stop, message = stop.signal, stop.message
    else:
        stopped = result.get("loop_guard_stop")
        if stopped is not None:
            ran.stop = Signal(stopped["signal"])
            message = stop_message(result["messages"]).text
    ran.turns = model.turns
    ran.messages = list(graph.get_state(thread).values["messages"])
    ran.replies = [message]
    return ran


R14_GUARDS: list[Any] = [
    pytest.param("handler", "raise", id="handler-create-agent"),
    pytest.param("handler-graph", "raise", id="handler-state-graph"),
    pytest.param("middleware-first", "raise", id="middleware-listed-before-the-app-hook"),
    pytest.param("middleware-first", "end", id="middleware-listed-before-the-app-hook-end"),
    pytest.param("middleware-last", "raise", id="middleware-listed-after-the-app-hook"),
    pytest.param("middleware-last", "end", id="middleware-listed-after-the-app-hook-end"),
    pytest.param("node", "raise", id="node"),
    pytest.param("node", "end", id="node-end"),
]


@pytest.mark.parametrize(("integration", "on_stop"), R14_GUARDS)
@pytest.mark.parametrize("scope", ["run", "thread"])
@pytest.mark.parametrize("shape", list(PLANS))
def test_a_plan_reworded_without_news_stops_by_the_4th(
    shape: str,
    scope: str,
    integration: R14Guard,
    on_stop: OnStop,
    request: pytest.FixtureRequest,
) -> None:
    """R14: answers without tools, sent back to the model by the app, each sharing most of
    its words with the one before: stopped by the 4th, the message about the replies (never
    about tool calls that did not succeed)."""
    ran = run_planner(shape, integration, scope, on_stop)
    assert ran.stop is Signal.REPLY_CYCLE
    assert ran.turns <= 4
    assert ran.replies[0]
    assert "no tool call succeeded" not in ran.replies[0]
    assert_valid_history(ran.messages)
