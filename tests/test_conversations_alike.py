"""SPEC §13 C1-C2 on real chat apps: a ``create_agent`` agent or a hand-built ``StateGraph``
with a checkpointer, one invocation per human message on one ``thread_id``, guarded by the
callback handler, the middleware or the node guard with no ``scope`` set. The guard follows
the app (a conversation is guarded as one), and after a stop the three do the same, message
by message."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import pytest
from guard_scenarios import harness
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import ToolException
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from langchain_loop_guard import (
    LoopDetected,
    LoopGuardCallbackHandler,
    LoopGuardConfig,
)
from langchain_loop_guard.testing import (
    ScriptedChatModel,
    assert_valid_history,
    calls,
    scripted_tool,
)

Integration = Literal["handler", "middleware", "node"]
INTEGRATIONS: tuple[Integration, ...] = get_args(Integration)

SORRY = "Sorry, I didn't understand that, could you rephrase?"
HANDOFF = "Of course: I am connecting you to a colleague now."

ASKED_AGAIN = [
    ("Where is my parcel?", SORRY),
    ("My parcel, order 1234.", SORRY),
    ("Order 1234, sent on Monday.", SORRY),  # the 3rd identical reply: stopped (C1)
    ("Hello? Order 1234?", SORRY),  # answered, and stopped at once: the loop goes on (C2)
    ("Can I talk to a person?", HANDOFF),  # a different course clears it
    ("While I wait: your opening hours?", SORRY),
    ("And on Sunday?", SORRY),
    ("Sunday opening hours, please.", SORRY),  # the 3rd in a row again: stopped
]
"""A support bot's conversation: each human message and the model's reply to it."""


def chat_model(conversation: Sequence[tuple[str, str]]) -> ScriptedChatModel:
    """A model answering each human message with its reply in ``conversation``."""
    replies = dict(conversation)

    def answer(messages: Sequence[BaseMessage]) -> AIMessage:
        assert_valid_history(messages)
        human = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
        return AIMessage(replies[str(human.content)])

    return ScriptedChatModel(script=[answer], then="repeat")


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """InMemorySaver, or SqliteSaver on a file."""
    if request.param == "memory":
        yield InMemorySaver()
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(tmp_path / "threads.sqlite", check_same_thread=False)
    try:
        yield SqliteSaver(connection)
    finally:
        connection.close()


@dataclass
class Chat:
    """A chat app on one thread, guarded by one integration."""

    integration: Integration
    graph: Any
    config: dict[str, Any]
    guard: Any
    outcomes: list[str] = field(default_factory=list)
    """Per human message: ``"answered"``, or ``"stopped: <signal> <count>"``."""

    def say(self, text: str) -> str:
        """Send one human message; what became of it."""
        try:
            self.graph.invoke({"messages": [HumanMessage(text)]}, self.config)
            outcome = "answered"
        except LoopDetected as stop:
            outcome = f"stopped: {stop.signal.value} {stop.count}"
            stop.repair(self.graph, self.config)  # the README's line; a no-op but for the handler
        self.outcomes.append(outcome)
        return outcome

    def messages(self) -> list[BaseMessage]:
        return list(self.graph.get_state(self.config).values["messages"])


def chat_app(
    integration: Integration,
    conversation: Sequence[tuple[str, str]],
    saver: BaseCheckpointSaver[Any] | None,
    *,
    thread: str | None = "chat-1",
    config: dict[str, Any] | None = None,
) -> Chat:
    """The chat app of ``integration`` (no ``scope`` set unless ``config`` sets one)."""
    model = chat_model(conversation)
    loop_config = LoopGuardConfig(**(config or {}))
    run: dict[str, Any] = {"configurable": {"thread_id": thread}} if thread else {}
    if integration == "handler":
        guard: Any = LoopGuardCallbackHandler(loop_config)
        run["callbacks"] = [guard]
        graph = create_agent(model, [], checkpointer=saver)
    else:
        built = harness(integration, model, [], config=config, checkpointer=saver)
        if saver is None:
            built.graph.checkpointer = None
        guard, graph = built.guard, built.graph
    return Chat(integration, graph, run, guard)


def shown(messages: Sequence[BaseMessage]) -> list[tuple[str, str, str | None]]:
    """A thread as a user (and a provider) reads it: type, text and name of each message."""
    return [(m.type, m.text, m.name) for m in messages]


# --- C1: the guard follows the app ---------------------------------------------------------------


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_a_chat_app_with_a_thread_is_guarded_as_a_conversation_with_no_setting(
    integration: Integration, saver: BaseCheckpointSaver[Any]
) -> None:
    """C1: a bot answering "Sorry, I didn't understand that…" to each message is stopped by
    the 3rd, with no ``scope`` set."""
    chat = chat_app(integration, ASKED_AGAIN, saver)
    for text, _ in ASKED_AGAIN[:3]:
        chat.say(text)
    assert chat.outcomes == ["answered", "answered", "stopped: repeated_assistant_response 3"]
    assert_valid_history(chat.messages())


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_without_a_checkpointer_each_invocation_is_a_run_of_its_own(
    integration: Integration,
) -> None:
    """C1: with a ``thread_id`` but no checkpointer nothing of the thread comes back, and the
    guard watches each invocation alone (run scope)."""
    chat = chat_app(integration, ASKED_AGAIN, None)
    for text, _ in ASKED_AGAIN[:4]:
        chat.say(text)
    assert chat.outcomes == ["answered"] * 4


@pytest.mark.parametrize(
    ("integration", "shows"),
    [
        ("handler", "thread (auto: the run has a checkpointer and a thread_id)"),
        ("middleware", "thread (auto: the run has a checkpointer and a thread_id)"),
        ("node", "thread (auto: the run has a checkpointer and a thread_id)"),
    ],
)
def test_status_and_inspect_say_which_scope_was_chosen_and_why(
    integration: Integration, shows: str
) -> None:
    """C1: ``status`` shows the latest run's scope and why, ``inspect`` the inspected run's."""
    chat = chat_app(integration, ASKED_AGAIN, InMemorySaver())
    for text, _ in ASKED_AGAIN[:2]:  # the second invocation joins the thread's run
        chat.say(text)
    inspected = chat.guard.inspect("chat-1")
    assert inspected is not None
    assert inspected.scope.describe() == shows
    assert re.search(rf"\n  scope +{re.escape(shows)}\n", str(chat.guard.status()))
    assert re.search(rf"\n  scope +{re.escape(shows)}\n", str(inspected))


@pytest.mark.parametrize(
    ("config", "thread", "saver", "shows"),
    [
        ({}, None, False, "run (auto: the run has no thread_id)"),
        ({}, "chat-1", False, "run (auto: the run has no checkpointer)"),
        ({"scope": "run"}, "chat-1", True, "run (set in the configuration)"),
        ({"scope": "thread"}, "chat-1", False, "thread (set in the configuration)"),
    ],
)
@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_every_integration_chooses_the_scope_alike(
    integration: Integration,
    config: dict[str, Any],
    thread: str | None,
    saver: bool,
    shows: str,
) -> None:
    """C1: the same app gets the same scope, for the same reason, from each integration."""
    chat = chat_app(
        integration,
        ASKED_AGAIN,
        InMemorySaver() if saver else None,
        thread=thread,
        config=config,
    )
    chat.say(ASKED_AGAIN[0][0])
    status = chat.guard.status()
    assert status.scope is not None
    assert status.scope.describe() == shows


# --- C2: after a stop in a thread, one behaviour -------------------------------------------------


def test_after_a_stop_the_three_integrations_act_alike_message_by_message(
    saver: BaseCheckpointSaver[Any],
) -> None:
    """C2: the same conversation through the handler, the middleware and the node guard: the
    next human message is answered; the same reply again is stopped at once; a different
    course clears it. The threads are the same, message by message, and each stopped reply
    is saved in the thread for the app to show."""
    chats = []
    for integration in INTEGRATIONS:
        chat = chat_app(integration, ASKED_AGAIN, saver)
        chat.config["configurable"]["thread_id"] = f"chat-{integration}"
        for text, _ in ASKED_AGAIN:
            chat.say(text)
        chats.append(chat)
    expected = [
        "answered",
        "answered",
        "stopped: repeated_assistant_response 3",
        "stopped: repeated_assistant_response 4",
        "answered",
        "answered",
        "answered",
        "stopped: repeated_assistant_response 3",
    ]
    for chat in chats:
        assert chat.outcomes == expected, chat.integration
    threads = [shown(chat.messages()) for chat in chats]
    conversation = [
        (kind, text, None)
        for pair in ASKED_AGAIN
        for kind, text in zip(("human", "ai"), pair, strict=True)
    ]
    for integration, thread in zip(INTEGRATIONS, threads, strict=True):
        assert thread == conversation, integration


def _order_desk(messages: Sequence[BaseMessage]) -> AIMessage:
    """A support agent that tries to update the order after each request (a new id each
    time, the same failure), and answers anything else without a tool."""
    assert_valid_history(messages)
    last = messages[-1]
    if isinstance(last, HumanMessage):
        if "opening hours" in last.text:
            return AIMessage("We are open from 9 to 5.")
        return calls(("update_order", {"attempt": len(messages)}))
    return AIMessage("Sorry, the update failed.")


def _order_chat(integration: Integration, saver: BaseCheckpointSaver[Any]) -> Chat:
    model = ScriptedChatModel(script=[_order_desk], then="repeat")
    tools = [scripted_tool("update_order", *[ToolException("order 1234 is locked")] * 20)]
    run: dict[str, Any] = {"configurable": {"thread_id": f"orders-{integration}"}}
    if integration == "handler":
        guard: Any = LoopGuardCallbackHandler()
        run["callbacks"] = [guard]
        graph = create_agent(model, tools, checkpointer=saver)
    else:
        built = harness(integration, model, tools, checkpointer=saver)
        guard, graph = built.guard, built.graph
    return Chat(integration, graph, run, guard)


def test_after_a_stop_on_a_failing_call_the_three_integrations_act_alike(
    saver: BaseCheckpointSaver[Any],
) -> None:
    """C2 for a conversation whose tool fails the same way after each request: a new human
    message is news for the failure counts (SPEC §13 N13), so the same answer each time is
    what stops it (the 3rd); every integration saves the stop, the next human message is
    answered, and the three give the same outcome for each message and the same thread."""
    requests = ["Update my order.", "Please update it.", "Update order 1234.", "Again, please."]
    texts = [*requests, "What are your opening hours?", *requests]
    chats = [_order_chat(integration, saver) for integration in INTEGRATIONS]
    for chat in chats:
        for text in texts:
            chat.say(text)
    first = chats[0].outcomes
    assert first[:3] == ["answered", "answered", "stopped: repeated_assistant_response 3"]
    assert first[4] == "answered"  # a different course is answered
    for chat in chats:
        assert chat.outcomes == first, chat.integration
        assert_valid_history(chat.messages())
    # the handler's stop inside the tool step leaves the result unsaved: its repair answers
    # the call "not executed" where the graph guards saved the tool's own error
    threads = [
        [(kind, "" if kind == "tool" else text, name) for kind, text, name in shown(c.messages())]
        for c in chats
    ]
    assert threads[1] == threads[0]
    assert threads[2] == threads[0]
