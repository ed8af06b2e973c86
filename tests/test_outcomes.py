"""``tool_outcome`` and ``previous_answer``: what every integration feeds the detector from
LangChain objects (SPEC §11), called directly."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from langchain_loop_guard._core._signature import error_key, outcome_digest
from langchain_loop_guard._integrations._outcomes import (
    CONTEXT_SCAN,
    Outcome,
    previous_answer,
    tool_outcome,
)


def digest_of(result: object) -> str:
    """The outcome key the detector would keep for ``result`` (a success or an error)."""
    outcome = tool_outcome(result)
    if outcome.error is not None:
        return error_key("tool", outcome.error)
    return outcome_digest(outcome.output)


def command(content: str, call_id: str, **fields: Any) -> Command[Any]:
    message = ToolMessage(content, tool_call_id=call_id, id=f"msg-{call_id}", **fields)
    return Command(update={"messages": [message]})


# --- shapes of a tool's result --------------------------------------------------------------------


@pytest.mark.parametrize(
    "result",
    [
        "saved",
        ToolMessage("saved", tool_call_id="call_1"),
        command("saved", "call_2"),
        Command(update=[ToolMessage("saved", tool_call_id="call_3")]),
        Command(update=[("messages", [ToolMessage("saved", tool_call_id="call_4")])]),
        Command(update={"messages": [{"role": "tool", "content": "saved", "tool_call_id": "c"}]}),
        [command("saved", "call_5")],
    ],
    ids=["text", "message", "command", "update list", "update pairs", "dict message", "list"],
)
def test_every_shape_of_a_result_has_the_outcome_of_its_content(result: object) -> None:
    """A value, a ToolMessage, a Command in its update forms, a list: all key as the content."""
    assert tool_outcome(result) == Outcome("saved")
    assert digest_of(result) == outcome_digest("saved")


def test_ids_of_a_command_never_change_its_outcome() -> None:
    """Two Commands that differ only by tool_call_id and message id have one outcome."""
    assert digest_of(command("saved", "call_1")) == digest_of(command("saved", "call_2"))
    assert digest_of(command("saved", "call_1")) != digest_of(command("saved twice", "call_2"))


def test_a_command_with_other_state_keys_is_keyed_by_its_tool_message() -> None:
    """Keys besides the messages (a counter the tool bumps) are not the outcome."""
    first: Command[Any] = Command(
        update={"messages": [ToolMessage("ok", tool_call_id="a")], "step": 1}
    )
    second: Command[Any] = Command(
        update={"messages": [ToolMessage("ok", tool_call_id="b")], "step": 2}
    )
    assert digest_of(first) == digest_of(second)


def test_a_command_with_several_tool_messages_is_keyed_by_all_of_them() -> None:
    """Two tool messages in one update: both contents, in order."""
    both: Command[Any] = Command(
        update={
            "messages": [
                ToolMessage("first", tool_call_id="a"),
                ToolMessage("second", tool_call_id="b"),
            ]
        }
    )
    assert tool_outcome(both) == Outcome(["first", "second"])


def test_a_command_without_tool_messages_is_keyed_by_its_other_messages() -> None:
    """A handoff that only adds an assistant message is keyed by that message's content."""
    handoff = Command(update={"messages": [AIMessage("Transferring.", id="x")]}, goto="billing")
    assert tool_outcome(handoff) == Outcome("Transferring.")


def test_a_command_that_only_routes_is_keyed_by_where_it_goes() -> None:
    """No message at all: where it goes and what it updates; two destinations differ."""
    to_billing, to_support = Command(goto="billing"), Command(goto="support")
    assert digest_of(to_billing) == digest_of(Command(goto="billing"))
    assert digest_of(to_billing) != digest_of(to_support)
    assert digest_of([to_billing]) != digest_of([to_support])


@pytest.mark.parametrize(
    "result",
    [
        ToolMessage("disk full", tool_call_id="a", status="error"),
        command("disk full", "b", status="error"),
    ],
    ids=["message", "command"],
)
def test_an_error_tool_message_is_an_error(result: object) -> None:
    """status="error", alone or inside a Command, is fed as the error text."""
    assert tool_outcome(result) == Outcome(None, "disk full")


def test_an_empty_error_is_still_an_error() -> None:
    """An error ToolMessage with no text fails (the detector tells errors by error is not None)."""
    assert tool_outcome(ToolMessage("", tool_call_id="a", status="error")) == Outcome(None, "")


def test_other_values_pass_unchanged() -> None:
    """A dict, None or a list that is not of messages is the outcome as it is."""
    for value in ({"rows": 3}, None, ["a", "b"], []):
        assert tool_outcome(value) == Outcome(value)


# --- validation errors of invalid arguments ------------------------------------------------------


@tool
def repeat_word(word: str, count: int) -> str:
    """Repeat ``word`` ``count`` times."""
    return " ".join([word] * count)


def tool_node_answer(args: dict[str, Any]) -> ToolMessage:
    """The ToolMessage a real ToolNode answers a call of ``repeat_word`` with."""
    request = AIMessage(
        "", tool_calls=[{"name": "repeat_word", "args": args, "id": "c1", "type": "tool_call"}]
    )
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([repeat_word]))
    graph.add_edge(START, "tools")
    answer = graph.compile().invoke({"messages": [request]})["messages"][-1]
    assert isinstance(answer, ToolMessage)
    return answer


def test_tool_node_validation_errors_are_fed_without_the_arguments_they_quote() -> None:
    """ToolNode quotes the invalid arguments; new values each time make one error text."""
    first = tool_node_answer({"word": "hi", "count": "abc"})
    second = tool_node_answer({"word": "ho", "count": "xyz"})
    assert first.status == second.status == "error"
    assert "'abc'" in first.text  # what the model reads still names its mistake
    assert tool_outcome(first) == tool_outcome(second)
    error = tool_outcome(first).error
    assert isinstance(error, str)
    assert error.startswith("Error invoking tool 'repeat_word' with error:\n")
    assert "abc" not in error


def test_a_different_validation_error_stays_different() -> None:
    """A missing argument is another error than a non-integer one."""
    wrong = tool_node_answer({"word": "hi", "count": "abc"})
    missing = tool_node_answer({"word": "hi"})
    assert tool_outcome(wrong) != tool_outcome(missing)


def test_other_error_texts_are_fed_as_they_are() -> None:
    """Only ToolNode's invalid-arguments text is rewritten."""
    text = "Error invoking tool 'x' with kwargs, oddly, and no template"
    assert tool_outcome(ToolMessage(text, tool_call_id="a", status="error")) == Outcome(None, text)


# --- the last model answer of an input ------------------------------------------------------------


def test_previous_answer_is_the_last_model_message_before_the_end() -> None:
    """The newest AIMessage before ``end``, past tool and human messages."""
    first, second = AIMessage("one", id="1"), AIMessage("two", id="2")
    messages = [HumanMessage("q"), first, ToolMessage("r", tool_call_id="c"), second]
    assert previous_answer(messages) is second
    assert previous_answer(messages, 3) is first
    assert previous_answer(messages[:1]) is None


def test_previous_answer_looks_back_a_bounded_number_of_messages() -> None:
    """An answer more than CONTEXT_SCAN messages back is not looked for."""
    answer = AIMessage("old", id="old")
    near = [answer, *[HumanMessage("x")] * (CONTEXT_SCAN - 1)]
    assert previous_answer(near) is answer
    assert previous_answer([answer, *near[1:], HumanMessage("one more")]) is None
