"""with_loop_hint: the anti-loop hint appended to system prompts, templates and model inputs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langchain_loop_guard import LoopGuardConfig, LoopGuardNode
from langchain_loop_guard._core._messages import HINT_MARKER, hint
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._hint import with_loop_hint
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

ON = LoopGuardConfig()
OFF = LoopGuardConfig(mode="off")
HINT = hint("en")


def system_texts(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, SystemMessage)]


# --- system prompt strings and messages -----------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("You are a careful coder.", f"You are a careful coder.\n\n{HINT}"),
        ("", HINT),
        (f"You are a careful coder.\n\n{HINT}", f"You are a careful coder.\n\n{HINT}"),
    ],
    ids=["appended", "empty prompt", "already there"],
)
def test_hint_is_appended_to_a_system_prompt_once(prompt: str, expected: str) -> None:
    """The user's prompt is kept as is and the hint follows it, once."""
    assert with_loop_hint(prompt, config=ON) == expected
    assert with_loop_hint(with_loop_hint(prompt, config=ON), config=ON) == expected


def test_no_hint_when_the_mode_is_off() -> None:
    """Off (in a config, which cannot change): every target is returned as it is."""
    message = SystemMessage(content="You are a bot.")
    template = ChatPromptTemplate.from_messages([("human", "{q}")])
    model = ScriptedChatModel(script=["ok"])
    assert with_loop_hint("You are a bot.", config=OFF) == "You are a bot."
    for target in (message, template, model):
        assert with_loop_hint(target, config=OFF) is target


@pytest.mark.parametrize(
    "content",
    ["You are a bot.", [{"type": "text", "text": "You are a bot."}]],
    ids=["text", "content blocks"],
)
def test_hint_is_appended_to_a_system_message_without_mutating_it(content: Any) -> None:
    """A SystemMessage gets a copy with the hint; the original is untouched."""
    message = SystemMessage(content=content)
    hinted = with_loop_hint(message, config=ON)
    assert message.content == content
    assert hinted.text.startswith("You are a bot.")
    assert hinted.text.count(HINT_MARKER) == 1
    assert with_loop_hint(hinted, config=ON) is hinted


def test_no_hint_when_prompt_hint_is_false() -> None:
    """``prompt_hint=False`` (on or observe): every target is returned as it is."""
    message = SystemMessage(content="You are a bot.")
    template = ChatPromptTemplate.from_messages([("human", "{q}")])
    model = ScriptedChatModel(script=["ok"])
    for mode in ("on", "observe"):
        config = LoopGuardConfig(mode=mode, prompt_hint=False)
        assert with_loop_hint("You are a bot.", config=config) == "You are a bot."
        for target in (message, template, model):
            assert with_loop_hint(target, config=config) is target


def test_guard_prompt_hint_is_followed_live() -> None:
    """With a guard, templates and models follow a runtime ``prompt_hint`` change."""
    handler = LoopGuardCallbackHandler(ON)
    template = with_loop_hint(ChatPromptTemplate.from_messages([("human", "{q}")]), guard=handler)
    model = ScriptedChatModel(script=["ok"], then="repeat")
    hinted = with_loop_hint(model, guard=handler)
    assert system_texts(template.invoke({"q": "hi"}).to_messages()) == [HINT]
    hinted.invoke("hi")
    handler.configure(prompt_hint=False)
    assert system_texts(template.invoke({"q": "hi"}).to_messages()) == []
    hinted.invoke("hi")
    assert [system_texts(seen) for seen in model.seen] == [[HINT], []]


def test_locale_chooses_the_hint_language() -> None:
    """locale= (or the config's locale) picks the catalog; Korean differs from English."""
    korean = with_loop_hint("", config=ON, locale="ko")
    assert korean == hint("ko") == with_loop_hint("", config=LoopGuardConfig(locale="ko"))
    assert korean.startswith(HINT_MARKER)
    assert korean != HINT


def test_guard_mode_and_locale_are_followed() -> None:
    """With a guard, its mode and locale decide; a string is decided when it is built."""
    handler = LoopGuardCallbackHandler(LoopGuardConfig(locale="ko"))
    assert with_loop_hint("x", guard=handler) == f"x\n\n{hint('ko')}"
    handler.set_mode("off")
    assert with_loop_hint("x", guard=handler) == "x"


@pytest.mark.parametrize(
    ("target", "options"),
    [
        (42, {"config": ON}),
        ("x", {"config": ON, "guard": LoopGuardCallbackHandler(ON)}),
    ],
    ids=["not a prompt", "guard and config"],
)
def test_bad_arguments_are_type_errors(target: Any, options: dict[str, Any]) -> None:
    """Another kind of target, or both a guard and a config, is a TypeError."""
    with pytest.raises(TypeError):
        with_loop_hint(target, **options)


def test_config_none_reads_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Without a guard or config the mode comes from files and environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("LOOP_GUARD_MODE", "off")
    assert with_loop_hint("x") == "x"
    monkeypatch.setenv("LOOP_GUARD_MODE", "observe")
    assert with_loop_hint("x") == f"x\n\n{HINT}"


# --- prompt templates -----------------------------------------------------------------------------


TEMPLATES = {
    "system message template": (
        [("system", "You are {name}."), ("human", "{q}")],
        {"name": "Bob", "q": "hi"},
        ["You are Bob.\n\n" + HINT],
    ),
    "literal system message": (
        [SystemMessage(content="You are Bob."), ("human", "{q}")],
        {"q": "hi"},
        ["You are Bob.\n\n" + HINT],
    ),
    "no system message": ([("human", "{q}")], {"q": "hi"}, [HINT]),
    "system message from a placeholder": (
        [MessagesPlaceholder("history"), ("human", "{q}")],
        {"q": "hi", "history": [SystemMessage(content="Be brief.")]},
        ["Be brief.\n\n" + HINT],
    ),
    "mustache template": (
        [("system", "You are {{name}}."), ("human", "{{q}}")],
        {"name": "Bob", "q": "hi"},
        ["You are Bob.\n\n" + HINT],
    ),
}


@pytest.mark.parametrize(
    ("messages", "values", "expected"), TEMPLATES.values(), ids=list(TEMPLATES)
)
def test_template_system_message_gets_the_hint(
    messages: list[Any], values: dict[str, Any], expected: list[str]
) -> None:
    """The formatted system message ends with the hint; one is put first when there is none."""
    template_format = "mustache" if "{{" in str(messages) else "f-string"
    prompt = ChatPromptTemplate.from_messages(messages, template_format=template_format)
    hinted = with_loop_hint(prompt, config=ON)
    assert isinstance(hinted, ChatPromptTemplate)
    assert hinted.input_variables == prompt.input_variables
    formatted = hinted.invoke(values).to_messages()
    assert system_texts(formatted) == expected
    assert isinstance(formatted[0], SystemMessage)
    assert asyncio.run(hinted.ainvoke(values)).to_messages() == formatted


def test_template_hint_is_added_once() -> None:
    """Hinting a hinted template is a no-op, and a prompt that has the hint keeps one."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", with_loop_hint("You are Bob.", config=ON)), ("human", "{q}")]
    )
    hinted = with_loop_hint(prompt, config=ON)
    assert with_loop_hint(hinted, config=ON) is hinted
    (text,) = system_texts(hinted.format_messages(q="hi"))
    assert text.count(HINT_MARKER) == 1


def test_template_keeps_the_hint_through_partial_and_concatenation() -> None:
    """partial() and + return templates that still add the hint."""
    prompt = with_loop_hint(
        ChatPromptTemplate.from_messages([("system", "You are {name}."), ("human", "{q}")]),
        config=ON,
    )
    for derived in (
        prompt.partial(name="Bob"),
        prompt + ChatPromptTemplate.from_messages([("human", "and {more}")]),
    ):
        values = {"name": "Bob", "q": "hi", "more": "more"}
        needed = {k: v for k, v in values.items() if k in derived.input_variables}
        assert system_texts(derived.format_messages(**needed)) == ["You are Bob.\n\n" + HINT]


def test_template_follows_the_guard_live_mode() -> None:
    """With a guard, each format checks its current mode."""
    handler = LoopGuardCallbackHandler(ON)
    prompt = with_loop_hint(ChatPromptTemplate.from_messages([("human", "{q}")]), guard=handler)
    assert system_texts(prompt.format_messages(q="hi")) == [HINT]
    handler.set_mode("off")
    assert system_texts(prompt.format_messages(q="hi")) == []
    handler.set_mode("observe")
    assert system_texts(prompt.format_messages(q="hi")) == [HINT]


# --- chat models and runnables --------------------------------------------------------------------


MODEL_INPUTS = {
    "messages with a system message": (
        [SystemMessage(content="You are Bob."), HumanMessage("hi")],
        ["You are Bob.\n\n" + HINT],
    ),
    "messages without one": ([HumanMessage("hi")], [HINT]),
    "message tuples": ([("system", "You are Bob."), ("human", "hi")], ["You are Bob.\n\n" + HINT]),
    "a string": ("hi", [HINT]),
    "a prompt value": (
        ChatPromptValue(messages=[SystemMessage(content="You are Bob."), HumanMessage("hi")]),
        ["You are Bob.\n\n" + HINT],
    ),
}


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke", "astream"])
@pytest.mark.parametrize(("value", "expected"), MODEL_INPUTS.values(), ids=list(MODEL_INPUTS))
def test_model_input_gets_the_hint(value: Any, expected: list[str], how: str) -> None:
    """In front of a chat model, the hint reaches the model, through every entry point."""
    model = ScriptedChatModel(script=["ok"])
    hinted = with_loop_hint(model, config=ON)
    if how == "invoke":
        hinted.invoke(value)
    elif how == "stream":
        list(hinted.stream(value))
    elif how == "ainvoke":
        asyncio.run(hinted.ainvoke(value))
    else:

        async def consume() -> None:
            async for _ in hinted.astream(value):
                pass

        asyncio.run(consume())
    (seen,) = model.seen
    assert system_texts(seen) == expected
    assert isinstance(seen[0], SystemMessage)


def test_model_input_is_not_mutated() -> None:
    """The caller's list and messages are left as they were."""
    system = SystemMessage(content="You are Bob.")
    messages: list[BaseMessage] = [system, HumanMessage("hi")]
    with_loop_hint(ScriptedChatModel(script=["ok"]), config=ON).invoke(messages)
    assert messages == [SystemMessage(content="You are Bob."), HumanMessage("hi")]
    assert system.content == "You are Bob."


def test_runnable_hint_is_added_once() -> None:
    """Wrapping twice is wrapping once; a hinted system message is not hinted again."""
    model = ScriptedChatModel(script=["ok"])
    hinted = with_loop_hint(model, config=ON)
    assert with_loop_hint(hinted, config=ON) is hinted
    hinted.invoke([SystemMessage(content=with_loop_hint("You are Bob.", config=ON))])
    (text,) = system_texts(model.seen[0])
    assert text.count(HINT_MARKER) == 1


def test_runnable_follows_the_guard_live_mode() -> None:
    """With a guard, each call checks its current mode."""
    handler = LoopGuardCallbackHandler(ON)
    model = ScriptedChatModel(script=["a", "b"])
    hinted = with_loop_hint(model, guard=handler)
    handler.set_mode("off")
    hinted.invoke("hi")
    handler.set_mode("on")
    hinted.invoke("hi")
    assert [system_texts(seen) for seen in model.seen] == [[], [HINT]]


def test_inputs_that_are_not_messages_pass_unchanged() -> None:
    """A dict input (graph state, say) is not touched."""
    seen: list[Any] = []

    def record(value: Any) -> None:
        seen.append(value)

    hinted = with_loop_hint(RunnableLambda(record), config=ON)
    hinted.invoke({"messages": [HumanMessage("hi")]})
    assert seen == [{"messages": [HumanMessage("hi")]}]


# --- in agents ------------------------------------------------------------------------------------


def hinted_graph(model: ScriptedChatModel, handler: LoopGuardCallbackHandler) -> Any:
    tools = [scripted_tool("read_file", "contents")]
    bound = with_loop_hint(model.bind_tools(tools), guard=handler)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


AGENTS: dict[str, Callable[[ScriptedChatModel, LoopGuardCallbackHandler], Any]] = {
    "create_agent(system_prompt=with_loop_hint(...))": lambda model, handler: create_agent(
        model,
        [scripted_tool("read_file", "contents")],
        system_prompt=with_loop_hint("You are a careful coder.", guard=handler),
    ),
    "hand-built graph with with_loop_hint(model)": hinted_graph,
}


def create_agent_with_hinted_model(
    model: ScriptedChatModel, handler: LoopGuardCallbackHandler
) -> Any:
    return create_agent(
        with_loop_hint(model, guard=handler),  # type: ignore[arg-type]  # binds like a model
        [scripted_tool("read_file", "contents")],
        system_prompt="You are a careful coder.",
    )


AGENTS["create_agent(with_loop_hint(model), tools)"] = create_agent_with_hinted_model


@pytest.mark.parametrize("build", AGENTS.values(), ids=list(AGENTS))
def test_every_model_call_of_an_agent_sees_the_hint_once(
    build: Callable[[ScriptedChatModel, LoopGuardCallbackHandler], Any],
) -> None:
    """Each time the agent rebuilds its prompt, the model sees the hint exactly once."""
    handler = LoopGuardCallbackHandler(ON)
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"}), "done"])
    result = build(model, handler).invoke(
        {"messages": [("user", "read a.py")]}, {"callbacks": [handler]}
    )
    assert isinstance(result["messages"][-1], AIMessage)
    assert model.turns == 2
    for seen in model.seen:
        assert isinstance(seen[0], SystemMessage)
        assert seen[0].text.count(HINT_MARKER) == 1
        assert sum(HINT_MARKER in m.text for m in seen) == 1


def test_create_agent_binds_the_tools_of_a_hinted_model() -> None:
    """``create_agent(with_loop_hint(model), tools)`` reaches the model's own ``bind_tools``."""
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"}), "done"])
    tool = scripted_tool("read_file", "contents")
    agent = create_agent(with_loop_hint(model, config=ON), [tool])  # type: ignore[arg-type]
    result = agent.invoke({"messages": [("user", "read a.py")]})
    assert result["messages"][-1].content == "done"
    assert model.bound_tools == ["read_file"]
    assert tool.calls == 1
    assert [system_texts(seen) for seen in model.seen] == [[HINT], [HINT]]


def test_create_agent_without_tools_binds_settings_behind_the_hint() -> None:
    """Without tools ``create_agent`` calls ``bind``: the model is bound, the hint kept."""
    model = ScriptedChatModel(script=["done"])
    agent = create_agent(with_loop_hint(model, config=ON), [])  # type: ignore[arg-type]
    assert agent.invoke({"messages": [("user", "hi")]})["messages"][-1].content == "done"
    assert system_texts(model.seen[0]) == [HINT]


def test_bind_tools_of_a_hinted_model_keeps_the_hint_step() -> None:
    """``bind_tools`` returns a hinted model again; the hint is still added once."""
    model = ScriptedChatModel(script=["ok"])
    hinted = with_loop_hint(model, config=ON)
    bound = hinted.bind_tools([scripted_tool("read_file", "x")])  # type: ignore[attr-defined]
    assert with_loop_hint(bound, config=ON) is bound
    bound.invoke([SystemMessage("Be brief."), HumanMessage("hi")])
    assert system_texts(model.seen[0]) == [f"Be brief.\n\n{HINT}"]
    assert model.bound_tools == ["read_file"]


def test_bind_tools_of_a_hinted_runnable_without_it_says_so() -> None:
    """A wrapped runnable that cannot bind tools fails with an ``AttributeError``."""
    hinted = with_loop_hint(RunnableLambda(lambda x: x), config=ON)
    with pytest.raises(AttributeError, match="bind_tools"):
        hinted.bind_tools([])  # type: ignore[attr-defined]


@pytest.mark.parametrize("prompt_hint", [True, False])
def test_a_node_guard_prompt_hint_decides_for_its_hinted_model(prompt_hint: bool) -> None:
    """The node guard adds no hint itself; ``with_loop_hint(model, guard=node)`` follows it."""
    node = LoopGuardNode({"prompt_hint": prompt_hint})
    model = ScriptedChatModel(script=["ok"])
    with_loop_hint(model, guard=node).invoke([HumanMessage("hi")])
    assert system_texts(model.seen[0]) == ([HINT] if prompt_hint else [])
