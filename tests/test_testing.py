"""The shipped test helpers: ScriptedChatModel, call/calls and scripted_tool."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph.graph import START, MessagesState, StateGraph
from langsmith_service import LangSmithService

from langchain_loop_guard.testing import (
    ScriptedChatModel,
    ScriptedTool,
    ScriptExhaustedError,
    call,
    calls,
    scripted_tool,
)

# --- building turns -------------------------------------------------------------------------------


def test_call_builds_one_tool_call_without_an_id() -> None:
    """call() is an AIMessage with one tool call; the id is left for the model to fill."""
    message = call("read_file", {"path": "a.py"})
    assert message.content == ""
    assert [(tc["name"], tc["args"], tc["id"]) for tc in message.tool_calls] == [
        ("read_file", {"path": "a.py"}, None)
    ]


def test_calls_builds_parallel_calls_with_content() -> None:
    """calls() holds several tool calls, optional ids and text."""
    message = calls(("a", {}), ("b", {"x": 1}, "id-b"), content="Looking.")
    assert message.content == "Looking."
    assert [(tc["name"], tc["id"]) for tc in message.tool_calls] == [("a", None), ("b", "id-b")]


# --- the scripted model ---------------------------------------------------------------------------


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return path


def test_bind_tools_records_names_and_returns_the_model() -> None:
    """bind_tools accepts tools, functions and dicts, and returns the model itself."""

    def search(q: str) -> str:
        """Search."""
        return q

    model = ScriptedChatModel(script=["ok"])
    bound = model.bind_tools(
        [read_file, search, {"name": "dict_tool"}, {"function": {"name": "openai_tool"}}]
    )
    assert bound is model
    assert model.bound_tools == ["read_file", "search", "dict_tool", "openai_tool"]


def answer(model: ScriptedChatModel, how: str, text: str = "hi") -> AIMessage:
    if how == "invoke":
        return model.invoke(text)
    if how == "ainvoke":
        return asyncio.run(model.ainvoke(text))
    if how == "stream":
        chunks = list(model.stream(text))
    else:

        async def collect() -> list[AIMessageChunk]:
            return [chunk async for chunk in model.astream(text)]

        chunks = asyncio.run(collect())
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    return merged


@pytest.mark.parametrize("how", ["invoke", "ainvoke", "stream", "astream"])
def test_model_answers_text_and_tool_calls_through_every_entry_point(how: str) -> None:
    """Sync, async and streaming calls return the scripted text and tool calls."""
    model = ScriptedChatModel(
        script=[calls(("read_file", {"path": "a.py"}), ("search", {"q": "x"})), "done"]
    )
    first, second = answer(model, how), answer(model, how)
    assert [(tc["name"], tc["args"]) for tc in first.tool_calls] == [
        ("read_file", {"path": "a.py"}),
        ("search", {"q": "x"}),
    ]
    assert (second.text, second.tool_calls) == ("done", [])
    assert model.turns == 2


def test_missing_call_ids_are_filled_uniquely_and_given_ones_kept() -> None:
    """Each call without an id gets call_1, call_2, …; an explicit id stays."""
    model = ScriptedChatModel(script=[call("a"), calls(("a", {}), ("b", {}, "mine"))])
    ids = [tc["id"] for _ in range(2) for tc in model.invoke("x").tool_calls]
    assert ids == ["call_1", "call_2", "mine"]


def test_repeated_step_is_a_new_message_each_time() -> None:
    """A step used again gets a fresh id, so graph state keeps every answer."""
    model = ScriptedChatModel(script=[AIMessage(content="same")], then="repeat")
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_edge(START, "agent")
    agent = graph.compile()
    state = agent.invoke({"messages": [("user", "1")]})
    state = agent.invoke({"messages": [*state["messages"], ("user", "2")]})
    assert [m.text for m in state["messages"]] == ["1", "same", "2", "same"]
    assert model.script[0].id is None


@pytest.mark.parametrize(
    ("then", "expected"),
    [("repeat", ["a", "b", "b", "b"]), ("cycle", ["a", "b", "a", "b"])],
)
def test_then_says_what_follows_the_last_step(then: str, expected: list[str]) -> None:
    """then="repeat" repeats the last step (a stuck model); then="cycle" starts over."""
    model = ScriptedChatModel(script=["a", "b"], then=then)
    assert [model.invoke("x").text for _ in range(4)] == expected


@pytest.mark.parametrize(
    ("script", "then", "message"),
    [
        (
            ["a"],
            "error",
            "ScriptedChatModel was called 2 times but its script has 1 step; "
            "add steps, or pass then='repeat' or then='cycle'",
        ),
        (
            ["a", "b"],
            "error",
            "ScriptedChatModel was called 3 times but its script has 2 steps; "
            "add steps, or pass then='repeat' or then='cycle'",
        ),
        ([], "repeat", "ScriptedChatModel was called but its script is empty (then='repeat')"),
    ],
    ids=["one step", "two steps", "empty script"],
)
def test_running_out_of_script_explains_itself(script: list[Any], then: str, message: str) -> None:
    """ScriptExhaustedError says how often the model was called and how to fix the script."""
    model = ScriptedChatModel(script=script, then=then)
    for _ in script:
        model.invoke("x")
    with pytest.raises(ScriptExhaustedError) as caught:
        model.invoke("x")
    assert str(caught.value) == message


def test_callable_step_sees_the_messages() -> None:
    """A step that is a function gets the model's messages and may answer text or a message."""

    def react(messages: Sequence[BaseMessage]) -> str:
        return f"you said {messages[-1].text}"

    model = ScriptedChatModel(script=[react, lambda messages: call("a")])
    assert model.invoke("hello").text == "you said hello"
    assert model.invoke("again").tool_calls[0]["name"] == "a"
    assert [[m.text for m in seen] for seen in model.seen] == [["hello"], ["again"]]


# --- scripted tools -------------------------------------------------------------------------------


def tool_call(args: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"name": "t", "args": args, "id": call_id, "type": "tool_call"}


def test_scripted_tool_returns_results_in_order_and_counts_calls() -> None:
    """Each call returns the next result (the last repeats); calls and arguments are kept."""
    t = scripted_tool("t", "one", "two")
    outputs = [t.invoke({"n": n}) for n in (1, 2, 3)]
    assert outputs == ["one", "two", "two"]
    assert (t.calls, t.arguments) == (3, [{"n": 1}, {"n": 2}, {"n": 3}])


@pytest.mark.parametrize(
    ("then", "expected"),
    [("repeat", ["a", "b", "b"]), ("cycle", ["a", "b", "a"])],
)
def test_scripted_tool_then(then: str, expected: list[str]) -> None:
    """then="repeat" or "cycle" after the last result."""
    t = scripted_tool("t", "a", "b", then=then)  # type: ignore[arg-type]
    assert [t.invoke({}) for _ in range(3)] == expected


def test_scripted_tool_out_of_results_explains_itself() -> None:
    """then="error" raises ScriptExhaustedError naming the tool and its counts."""
    t = scripted_tool("t", "a", then="error")
    t.invoke({})
    with pytest.raises(ScriptExhaustedError, match=r"'t' was called 2 times but has 1 result"):
        t.invoke({})


def test_scripted_tool_without_results_answers_ok() -> None:
    """No results: every call returns "ok", whatever its arguments."""
    t = scripted_tool("t")
    assert t.invoke({"anything": [1, 2], "goes": None}) == "ok"


def test_tool_exception_becomes_an_error_tool_message() -> None:
    """A ToolException result is an error ToolMessage the model reads, not a crash."""
    t = scripted_tool("t", ToolException("line 12: boom"))
    message = t.invoke(tool_call({}))
    assert isinstance(message, ToolMessage)
    assert (message.status, message.content, message.tool_call_id) == (
        "error",
        "line 12: boom",
        "c1",
    )


def test_other_exceptions_propagate() -> None:
    """Any other exception is raised from the tool."""
    t = scripted_tool("t", ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        t.invoke(tool_call({}))


def test_callable_result_gets_the_arguments() -> None:
    """A callable result is called with the call's arguments; what it returns is the output."""
    t = scripted_tool("t", lambda args: f"read {args['path']}")
    assert t.invoke({"path": "a.py"}) == "read a.py"


def test_a_scripted_tool_given_a_body_runs_the_body() -> None:
    """A body given as ``func`` (``ScriptedTool.from_function``) answers instead of a script."""
    t = ScriptedTool.from_function(lambda path: f"read {path}", name="read_file", description="r")
    assert t.invoke({"path": "a.py"}) == "read a.py"


def test_a_scripted_tool_writes_itself_without_repeating_itself() -> None:
    """The tool's ``repr`` is short and finite (its body is not a method of itself), and its
    body, called directly as any ``StructuredTool``'s ``func``, runs the script."""
    t = scripted_tool("read_file", "contents")
    assert "read_file" in repr(t)
    assert len(repr(t)) < 2_000
    assert (t.func(path="a.py"), t.arguments) == ("contents", [{"path": "a.py"}])


# --- together, in an agent ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream messages"])
def test_scripted_model_and_tools_drive_create_agent(stream: bool) -> None:
    """create_agent runs a scripted model with scripted tools, streamed or not."""
    read = scripted_tool("read_file", "print('hi')")
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"}), "It prints hi."])
    agent = create_agent(model, [read])
    inputs = {"messages": [("user", "what does a.py print?")]}
    if stream:
        tokens = [chunk.text for chunk, _ in agent.stream(inputs, stream_mode="messages")]
        assert "It prints hi." in tokens
    else:
        messages = agent.invoke(inputs)["messages"]
        assert [type(m).__name__ for m in messages] == [
            "HumanMessage",
            "AIMessage",
            "ToolMessage",
            "AIMessage",
        ]
        assert messages[2].tool_call_id == "call_1"
    assert (read.calls, model.bound_tools) == (1, ["read_file"])


def test_a_traced_agent_with_scripted_tools_sends_every_span(
    service: LangSmithService, caplog: pytest.LogCaptureFixture
) -> None:
    """LangSmith writes a middleware span's inputs (the model request, its tools among them)
    with ``repr``: traced by the real SDK, every span of an agent with scripted tools arrives,
    and the SDK logs no failure."""

    class Passing(AgentMiddleware[Any, Any]):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"}), "It prints hi."])
    agent = create_agent(model, [scripted_tool("read_file", "print('hi')")], middleware=[Passing()])
    agent.invoke({"messages": [("user", "what does a.py print?")]})
    service.close()  # everything sent
    assert [r.getMessage() for r in caplog.records if r.name.startswith("langsmith")] == []
    names = [run.get("name") for run in service.runs().values()]
    assert names.count("Passing.wrap_model_call") == 2
