"""``LoopGuardMiddleware``: its hooks called directly, then real ``create_agent`` runs."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, get_args, get_type_hints

import pytest
from guard_scenarios import (
    AGAIN,
    FINE,
    KINDS,
    LOOPS,
    Kind,
    Loop,
    assert_valid_history,
    guard_messages,
    harness,
    loop_harness,
    model_of,
    scripted,
    stop_message,
)
from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromSchema,
)
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.types import Command
from pydantic import ValidationError

from langchain_loop_guard import (
    LoopDetector,
    LoopGuardConfig,
    LoopGuardConfigError,
    Signal,
    guard_kind,
)
from langchain_loop_guard._core._messages import HINT_MARKER, hint, not_executed, nudge, translator
from langchain_loop_guard._integrations._middleware import LoopGuardAgentState, LoopGuardMiddleware
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, call, calls, scripted_tool

# --- first tier: the hooks, called with hand-built state --------------------------------------


def _guard(**options: Any) -> LoopGuardMiddleware:
    config = options.pop("config", {})
    return LoopGuardMiddleware(LoopGuardConfig(**config), **options)


def _model_node(
    guard: LoopGuardMiddleware, state: dict[str, Any], answer: AIMessage | None = None
) -> tuple[dict[str, Any] | None, bool]:
    """Run the agent's model node: ``wrap_model_call`` around a model that gives ``answer``.

    Returns the node's state update (``None`` if it changes nothing) and whether the model
    was called.
    """
    called: list[ModelRequest[Any]] = []

    def model(request: ModelRequest[Any]) -> ModelResponse[Any]:
        called.append(request)
        return ModelResponse(result=[] if answer is None else [answer])

    request = ModelRequest(
        model=ScriptedChatModel(script=["unused"]),
        messages=list(state["messages"]),
        state=state,  # type: ignore[arg-type]
    )
    return _node_update(guard.wrap_model_call(request, model)), bool(called)


def _node_update(result: ModelResponse[Any] | ExtendedModelResponse[Any]) -> dict[str, Any] | None:
    """The state update a model node makes of a ``wrap_model_call`` result."""
    update: dict[str, Any] = {}
    if isinstance(result, ExtendedModelResponse):
        assert result.command is not None
        update.update(result.command.update)  # type: ignore[arg-type]
        result = result.model_response
    if result.result:
        update["messages"] = list(result.result)
    return update or None


def _step(guard: LoopGuardMiddleware, state: dict[str, Any], answer: AIMessage) -> Any:
    """Run the model node (the model answers ``answer``, and the guard decides it) on ``state``.

    Returns what the guard decided about the answer: the node's update without the messages
    up to the answer, or ``None`` when the guard ended the run before the model was called
    or changed nothing.
    """
    update, called = _model_node(guard, state, answer)
    _apply(state, update)
    if not called or update is None:
        return None
    decided = {key: value for key, value in update.items() if key != "messages"}
    messages = update.get("messages", [])
    after = messages[[m.id for m in messages].index(answer.id) + 1 :]
    if after:
        decided["messages"] = after
    return decided or None


def _apply(state: dict[str, Any], update: dict[str, Any] | None) -> None:
    for key, value in (update or {}).items():
        if key == "messages":
            state["messages"].extend(value)
        else:
            state[key] = value


def _tool_results(state: dict[str, Any], output: str = "contents") -> None:
    """Answer the open calls of the last model answer, as the tool step would."""
    answer = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage))
    answered = {m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)}
    for tool_call in answer.tool_calls:
        if tool_call["id"] not in answered:
            state["messages"].append(
                ToolMessage(output, tool_call_id=tool_call["id"], name=tool_call["name"])
            )


def _answer(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """A model answer with one call; ids as the graph's message reducer gives them."""
    return call(name, args, id=call_id).model_copy(update={"id": f"answer-{call_id}"})


def _two_reads(guard: LoopGuardMiddleware) -> dict[str, Any]:
    """A run of ``guard`` that read the same file twice: a third identical read repeats it."""
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(2):
        _step(guard, state, _answer("read", {"p": 1}, f"c{index}"))
        _tool_results(state)
    return state


def _branch(state: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``state`` that shares its values (the guard's state object included)."""
    return {**state, "messages": list(state["messages"])}


def test_after_model_refuses_the_third_identical_call_with_an_error_tool_message() -> None:
    """The call that completes a repeat is answered by the guard, so no tool runs it."""
    guard = _guard(on_stop="end")
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(2):
        update = _step(guard, state, _answer("read", {"p": 1}, f"c{index}"))
        assert update is not None
        assert "messages" not in update
        _tool_results(state)
    update = _step(guard, state, _answer("read", {"p": 1}, "c2"))
    assert update["jump_to"] == "end"
    refused, final = update["messages"]
    assert isinstance(refused, ToolMessage)
    assert (refused.tool_call_id, refused.status) == ("c2", "error")
    assert refused.content == not_executed("en")
    assert final.content.startswith("Loop guard stopped the run")
    assert_valid_history(state["messages"])


def test_after_model_answers_every_pending_call_when_it_ends_the_run() -> None:
    """Parallel calls of the stopping answer all get an error tool message."""
    guard = _guard(on_stop="end")
    state = _two_reads(guard)
    parallel = calls(("read", {"p": 1}, "c2"), ("search", {"q": 1}, "s1"), ("list", {}, "l1"))
    update = _step(guard, state, parallel)
    answered = [m.tool_call_id for m in update["messages"] if isinstance(m, ToolMessage)]
    assert sorted(answered) == ["c2", "l1", "s1"]
    assert_valid_history(state["messages"])


def test_after_model_counts_hallucinated_tool_names() -> None:
    """A tool name no tool has is still a call: three identical ones are a repeat."""
    guard = _guard()
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(2):
        _step(guard, state, _answer("no_such_tool", {}, f"c{index}"))
        _tool_results(state, "Error: no_such_tool is not a valid tool")
    with pytest.raises(LoopDetected) as caught:
        _step(guard, state, _answer("no_such_tool", {}, "c2"))
    assert (caught.value.signal, caught.value.tool) == (Signal.REPEATED_TOOL_CALL, "no_such_tool")


def test_after_model_counts_malformed_arguments_as_failed_calls() -> None:
    """Invalid tool calls (unparsable arguments) count as calls with an error outcome."""
    guard = _guard(on_stop="end")
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(3):
        broken = AIMessage(
            content="",
            invalid_tool_calls=[
                {"name": "write", "args": f"{{'path': {index}", "id": f"b{index}", "error": None}
            ],
        )
        update = _step(guard, state, broken)
    assert update["jump_to"] == "end"
    assert stop_message(state["messages"]).content.startswith("Loop guard stopped the run")
    assert "failed with the same error 3 times" in stop_message(state["messages"]).content


@pytest.mark.parametrize(
    ("statuses", "stops"),
    [
        (["error"] * 2, False),
        (["error"] * 3, True),
        (["error", "success", "error"], False),
        (["error", "error", "success", "error", "error"], True),
        (["error", "success", "error", "error", "error"], True),
    ],
    ids=[
        "two errors",
        "three errors",
        "a success between two",
        "four with a success between",
        "three after a success",
    ],
)
def test_repeated_errors_stop_the_run_before_the_next_model_call(
    statuses: list[str], stops: bool
) -> None:
    """Error ToolMessages are error outcomes; three identical ones in a row end the run, and
    so do four within the window with less news between them (SPEC §12 R4'; the tool reads:
    an acting tool's success between would end the streak, §14 N17); the run's final
    message takes the place of the model's answer."""
    guard = _guard(on_stop="end")
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index, status in enumerate(statuses):
        _step(guard, state, _answer("probe", {"n": index}, f"c{index}"))
        state["messages"].append(
            ToolMessage("disk full", tool_call_id=f"c{index}", name="probe", status=status)
        )
    update, called = _model_node(guard, state, AIMessage("I will try again."))
    assert update is not None
    assert called is not stops
    if stops:
        assert stop_message(update["messages"]).content.startswith("Loop guard stopped the run")
        assert update["jump_to"] == "end"
        _apply(state, update)
        assert [guard_kind(m) for m in state["messages"]].count("stop") == 1
        assert_valid_history(state["messages"])


def test_nudge_refuses_only_the_repeating_call_and_lifts_the_trip() -> None:
    """With a nudge left, the call is answered with the nudge and the run goes on."""
    guard = _guard(nudges=1)
    state = _two_reads(guard)
    update = _step(guard, state, _answer("read", {"p": 1}, "c2"))
    assert "jump_to" not in update
    (refused,) = update["messages"]
    assert refused.content == nudge("read", 3, "en")
    assert update["loop_guard"]["nudged"] == 1
    update = _step(guard, state, _answer("search", {"q": "x"}, "c3"))
    assert "messages" not in update


def test_same_repeat_right_after_a_nudge_is_detected_at_once() -> None:
    """The nudge keeps the history: repeating the refused call again stops the run."""
    guard = _guard(nudges=1)
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(3):
        _step(guard, state, _answer("read", {"p": 1}, f"c{index}"))
        _tool_results(state)
    with pytest.raises(LoopDetected) as caught:
        _step(guard, state, _answer("read", {"p": 1}, "c3"))
    assert caught.value.signal is Signal.REPEATED_TOOL_CALL


def test_observe_mode_refuses_nothing() -> None:
    """In observe mode the loop is reported and every call goes through."""
    guard = _guard(config={"mode": "observe"}, on_stop="end")
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(6):
        update = _step(guard, state, _answer("read", {"p": 1}, f"c{index}"))
        assert "messages" not in update
        _tool_results(state)
    assert guard.status().observed >= 1


def test_hooks_do_nothing_when_the_mode_is_off() -> None:
    """Off: no state is written and nothing is refused, whatever the loop."""
    guard = _guard(config={"mode": "off"})
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(6):
        assert _step(guard, state, _answer("read", {"p": 1}, f"c{index}")) is None
        _tool_results(state)
    assert "loop_guard" not in state


def test_a_second_answer_to_a_call_the_guard_answered_is_dropped_before_the_model() -> None:
    """The guard decides a model's answer inside the model's step, before an app's after-model
    hook runs; a hook that answers the same call again (as ``ToolCallLimitMiddleware`` does,
    without looking) leaves two answers. The next model call removes the later one, and the
    model's request never holds both."""
    guard = _guard(nudges=1)
    state = _two_reads(guard)
    update = _step(guard, state, _answer("read", {"p": 1}, "c2"))
    (refused,) = update["messages"]
    assert (guard_kind(refused), refused.tool_call_id) == ("nudge", "c2")
    refused.id = "guard-answer"  # as the graph's message reducer names it
    second = ToolMessage("limit reached", tool_call_id="c2", name="read", status="error", id="t2")
    state["messages"].append(second)
    seen: list[ModelRequest[Any]] = []

    def model(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(request)
        return ModelResponse(result=[_answer("search", {"q": 1}, "s1")])

    request = ModelRequest(
        model=ScriptedChatModel(script=["unused"]),
        messages=list(state["messages"]),
        state=state,  # type: ignore[arg-type]
    )
    update = _node_update(guard.wrap_model_call(request, model))
    assert update is not None
    assert [m.id for m in update["messages"] if isinstance(m, RemoveMessage)] == ["t2"]
    assert "t2" not in [m.id for m in seen[0].messages]
    assert "guard-answer" in [m.id for m in seen[0].messages]
    assert_valid_history(seen[0].messages)


@pytest.mark.parametrize("on_stop", ["end", "raise"])
@pytest.mark.parametrize("order", ["guard first", "limit first", "app hook"])
def test_tool_call_limit_middleware_beside_the_guard_leaves_one_answer_per_call(
    order: str, on_stop: str
) -> None:
    """With LangChain's ``ToolCallLimitMiddleware`` (``exit_behavior="continue"``) listed with
    the guard, in either order, or an app's after-model hook that refuses every call after
    the second, each refusing a call the guard refuses too: a nudged call's second answer is
    gone before the next model call; a run the guard ends is left with one answer per call
    once it ends. A run the guard stops with ``on_stop="raise"`` raises from its
    ``after_agent`` (raising discards that step's writes): the second answer is dropped at the
    thread's next model call, before the model reads the thread."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import ToolCallLimitMiddleware, after_model
    from langgraph.checkpoint.memory import InMemorySaver

    @after_model
    def budget(state: Any, runtime: Any) -> dict[str, Any] | None:
        answer = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage))
        if len([m for m in state["messages"] if isinstance(m, AIMessage)]) <= 2:
            return None
        return {
            "messages": [
                ToolMessage("Over budget.", tool_call_id=c["id"], name=c["name"], status="error")
                for c in answer.tool_calls
            ]
        }

    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    model = ScriptedChatModel(script=[call("read_file", {"path": "a.py"})] * 6 + ["done"])
    guard = LoopGuardMiddleware(nudges=1, on_stop=on_stop)  # type: ignore[arg-type]
    limit = ToolCallLimitMiddleware(run_limit=3, exit_behavior="continue")
    agent = create_agent(
        model,
        [read_file],
        middleware={"guard first": [guard, limit], "limit first": [limit, guard]}.get(
            order, [guard, budget]
        ),
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    if on_stop == "raise":
        with pytest.raises(LoopDetected):
            agent.invoke({"messages": [HumanMessage("Read a.py.")]}, config)
        model.script.append("done")
        agent.invoke({"messages": [HumanMessage("Thanks, that's all.")]}, config)
        assert_valid_history(model.seen[-1])  # what the model read: one answer per call
    else:
        agent.invoke({"messages": [HumanMessage("Read a.py.")]}, config)
    messages = agent.get_state(config).values["messages"]
    assert_valid_history(messages)
    answers = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id]
    assert len(answers) == len({m.tool_call_id for m in answers})


def test_an_answer_is_fed_once_when_the_run_goes_back_to_the_model() -> None:
    """The model step reads its own answer; sent back to the model with no tool step between
    (an app's hook jumping to the model), the next model step does not read it again."""
    guard = _guard()
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    _step(guard, state, _answer("read", {"p": 1}, "c0"))
    before = guard.inspect(state)
    _step(guard, state, AIMessage("Done.", id="answer-done"))
    after = guard.inspect(state)
    assert before is not None
    assert after is not None
    assert (before.calls, after.calls) == (1, 1)


def _answer_reading(guard: LoopGuardMiddleware, state: dict[str, Any], answer: AIMessage) -> None:
    """The model node, its request holding only the first and last state messages (another
    middleware trimmed the history); the guard decides the answer in that step."""
    request = ModelRequest(
        model=ScriptedChatModel(script=["unused"]),
        messages=[state["messages"][0], state["messages"][-1]],
        state=state,  # type: ignore[arg-type]
    )
    _apply(state, _node_update(guard.wrap_model_call(request, lambda _: ModelResponse([answer]))))


def test_async_model_call_notes_what_its_request_held() -> None:
    """awrap_model_call, like wrap_model_call, reads the answer knowing that the request
    lacked the previous one."""
    guard = _guard()
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for n in range(3):
        request = ModelRequest(
            model=ScriptedChatModel(script=["unused"]),
            messages=[state["messages"][0]],
            state=state,  # type: ignore[arg-type]
        )
        answer = AIMessage("I cannot do that.", id=f"answer-{n}")

        async def model(_: ModelRequest[Any], answer: AIMessage = answer) -> Any:
            return ModelResponse([answer])

        _apply(state, _node_update(asyncio.run(guard.awrap_model_call(request, model))))
        state["messages"].append(SystemMessage("Try again."))
    assert guard.status().stops == 0


@pytest.mark.parametrize("trimmed", [False, True], ids=["full history", "trimmed request"])
def test_an_answer_repeats_only_if_the_model_request_held_the_previous_one(trimmed: bool) -> None:
    """Three identical answers stop the run unless the model's request lacked the previous one."""
    guard = _guard()
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    answers = [AIMessage("I cannot do that.", id=f"answer-{n}") for n in range(3)]
    for answer in answers[:2]:
        if trimmed:
            _answer_reading(guard, state, answer)
        else:
            _step(guard, state, answer)
        state["messages"].append(SystemMessage("Try again."))
    if trimmed:
        _answer_reading(guard, state, answers[2])
        assert guard.status().stops == 0
    else:
        with pytest.raises(LoopDetected) as caught:
            _step(guard, state, answers[2])
        assert caught.value.signal is Signal.REPEATED_ASSISTANT_RESPONSE


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        (None, lambda h: h),
        ("You are a careful agent.", lambda h: f"You are a careful agent.\n\n{h}"),
        (f"Base prompt.\n\n{hint('en')}", lambda h: f"Base prompt.\n\n{h}"),
    ],
    ids=["no system prompt", "user prompt", "hint already there"],
)
def test_wrap_model_call_appends_the_hint_once(system: str | None, expected: Any) -> None:
    """The hint is appended to the system message, created if missing, never twice."""
    guard = _guard()
    seen: list[ModelRequest[Any]] = []
    request = ModelRequest(
        model=ScriptedChatModel(script=["ok"]),
        messages=[HumanMessage("hi")],
        system_message=None if system is None else SystemMessage(system),
    )

    def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(req)
        return ModelResponse(result=[AIMessage("ok")])

    guard.wrap_model_call(request, handler)
    (sent,) = seen
    assert sent.system_prompt == expected(hint("en"))
    assert [m.content for m in sent.messages] == ["hi"]


def test_wrap_model_call_keeps_content_blocks_of_the_system_message() -> None:
    """A system message made of content blocks gets the hint as one more block."""
    guard = _guard(config={"locale": "ko"})
    blocks: list[str | dict[str, Any]] = [{"type": "text", "text": "Base."}]
    request = ModelRequest(
        model=ScriptedChatModel(script=["ok"]),
        messages=[HumanMessage("hi")],
        system_message=SystemMessage(content=blocks),
    )
    seen: list[ModelRequest[Any]] = []
    guard.wrap_model_call(request, lambda r: seen.append(r) or ModelResponse(result=[]))  # type: ignore[func-returns-value]
    content = seen[0].system_message.content  # type: ignore[union-attr]
    assert content[0] == blocks[0]
    assert content[-1] == {"type": "text", "text": hint("ko")}


def test_wrap_model_call_adds_no_hint_when_off() -> None:
    """Off: the request reaches the model unchanged."""
    guard = _guard(config={"mode": "off"})
    request = ModelRequest(model=ScriptedChatModel(script=["ok"]), messages=[HumanMessage("hi")])
    seen: list[ModelRequest[Any]] = []
    guard.wrap_model_call(request, lambda r: seen.append(r) or ModelResponse(result=[]))  # type: ignore[func-returns-value]
    assert seen == [request]


@pytest.mark.parametrize("mode", ["on", "observe"])
def test_wrap_model_call_adds_no_hint_when_prompt_hint_is_false(mode: str) -> None:
    """``prompt_hint=False``: the request reaches the model unchanged, in any mode."""
    guard = _guard(config={"mode": mode, "prompt_hint": False})
    request = ModelRequest(
        model=ScriptedChatModel(script=["ok"]),
        messages=[HumanMessage("hi")],
        system_message=SystemMessage("Be brief."),
    )
    seen: list[ModelRequest[Any]] = []
    guard.wrap_model_call(request, lambda r: seen.append(r) or ModelResponse(result=[]))  # type: ignore[func-returns-value]
    assert seen == [request]


def test_wrap_model_call_adds_the_hint_in_observe_mode_by_default() -> None:
    """Observe previews ``on``, hint included, unless ``prompt_hint`` is false."""
    guard = _guard(config={"mode": "observe"})
    request = ModelRequest(model=ScriptedChatModel(script=["ok"]), messages=[HumanMessage("hi")])
    seen: list[ModelRequest[Any]] = []
    guard.wrap_model_call(request, lambda r: seen.append(r) or ModelResponse(result=[]))  # type: ignore[func-returns-value]
    assert seen[0].system_prompt == hint("en")


def test_wrap_model_call_follows_a_runtime_prompt_hint_change() -> None:
    """``guard.configure(prompt_hint=False)`` removes the hint from the next model call."""
    guard = _guard()
    request = ModelRequest(model=ScriptedChatModel(script=["ok"]), messages=[HumanMessage("hi")])
    seen: list[ModelRequest[Any]] = []
    guard.wrap_model_call(request, lambda r: seen.append(r) or ModelResponse(result=[]))  # type: ignore[func-returns-value]
    guard.configure(prompt_hint=False)
    guard.wrap_model_call(request, lambda r: seen.append(r) or ModelResponse(result=[]))  # type: ignore[func-returns-value]
    assert [r.system_prompt for r in seen] == [hint("en"), None]


def test_async_hooks_decide_as_the_sync_ones() -> None:
    """awrap_model_call decides as wrap_model_call: the same answers give the same updates
    (the answer and its calls are decided inside the model call, sync or async; no
    ``aafter_model`` is left), down to the stop that ends the run."""
    answers = [_answer("read", {"p": 1}, f"c{index}") for index in range(3)]

    def sync_run() -> list[dict[str, Any] | None]:
        guard, state, updates = _guard(on_stop="end"), {"messages": [HumanMessage("go")]}, []
        for answer in answers:
            update, called = _model_node(guard, state, answer)
            assert called
            updates.append(update)
            _apply(state, update)
            _tool_results(state)
        return updates

    async def async_run() -> list[dict[str, Any] | None]:
        guard, state, updates = _guard(on_stop="end"), {"messages": [HumanMessage("go")]}, []
        for answer in answers:

            async def model(req: ModelRequest[Any], answer: AIMessage = answer) -> Any:
                assert req.system_prompt == hint("en")
                return ModelResponse(result=[answer])

            request = ModelRequest(
                model=ScriptedChatModel(script=["unused"]),
                messages=list(state["messages"]),
                state=state,  # type: ignore[arg-type]
            )
            update = _node_update(await guard.awrap_model_call(request, model))
            updates.append(update)
            _apply(state, update)
            _tool_results(state)
        return updates

    def shown(update: dict[str, Any] | None) -> Any:
        update = update or {}
        return (
            [(type(m).__name__, m.content) for m in update.get("messages", [])],
            update.get("jump_to"),
            update.get("loop_guard_stop"),
        )

    synced, awaited = sync_run(), asyncio.run(async_run())
    assert [shown(u) for u in awaited] == [shown(u) for u in synced]
    assert awaited[-1] is not None
    assert awaited[-1]["jump_to"] == "end"
    assert stop_message(awaited[-1]["messages"]).content.startswith("Loop guard stopped the run")


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"nudges": -1}, "nudges"),
        ({"nudges": True}, "nudges"),
        ({"nudges": "2"}, "nudges"),
        ({"on_stop": "stop"}, "on_stop"),
        ({"on_stop": None}, "on_stop"),
        ({"clock": 3.0}, "clock"),
        ({"config": 42}, "config"),
    ],
)
def test_constructor_rejects_bad_values_naming_the_parameter(
    options: dict[str, Any], key: str
) -> None:
    """Bad arguments raise LoopGuardConfigError naming the parameter, eagerly."""
    config = options.pop("config", LoopGuardConfig())
    with pytest.raises(LoopGuardConfigError) as caught:
        LoopGuardMiddleware(config, **options)
    assert caught.value.key == key
    assert key in str(caught.value)


def test_constructor_options_are_keyword_only() -> None:
    """Only the config may be passed by position; the settings are keywords too."""
    parameters = inspect.signature(LoopGuardMiddleware).parameters
    assert [p.kind for p in parameters.values()] == [
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        *[inspect.Parameter.KEYWORD_ONLY] * 4,
        inspect.Parameter.VAR_KEYWORD,  # **settings: every configuration key
    ]
    assert list(parameters) == ["config", "nudges", "on_stop", "clock", "record_to", "settings"]


def test_on_stop_is_a_documented_literal() -> None:
    """on_stop is typed with the Literal of its three values."""
    hints = get_type_hints(LoopGuardMiddleware.__init__)
    assert set(get_args(hints["on_stop"])) == {"raise", "end", "interrupt"}


def test_middleware_follows_langchain_etiquette() -> None:
    """A name, a private checkpointed state key, and its hook set with async twins.

    The hook set is the issue-39 one: every decision in ``wrap_model_call`` (inside the
    model's own graph step; ``jump_to`` goes through its ``Command``), and one node,
    ``after_agent``, once per run, to raise a stop after its answers are saved. No
    ``before_agent``, ``before_model`` or ``after_model`` node: each would cost a superstep
    (the old set had ``before_agent`` and ``after_model``)."""
    from langchain.agents import create_agent

    guard = _guard()
    assert guard.name == "LoopGuardMiddleware"
    key = get_type_hints(LoopGuardAgentState, include_extras=True)["loop_guard"]
    assert OmitFromSchema(input=True, output=True) in key.__args__[0].__metadata__
    for hook in ("wrap_model_call", "after_agent"):
        for name in (hook, f"a{hook}"):
            assert getattr(LoopGuardMiddleware, name) is not getattr(AgentMiddleware, name)
    # a plain method returning a coroutine, so that LangSmith's traceable, which create_agent
    # puts around it, takes its synchronous path (no thread hops per model call)
    assert not inspect.iscoroutinefunction(LoopGuardMiddleware.awrap_model_call)
    for hook in ("before_agent", "before_model", "after_model", "wrap_tool_call"):
        for name in (hook, f"a{hook}"):
            assert getattr(LoopGuardMiddleware, name) is getattr(AgentMiddleware, name)

    def read_file(path: str) -> str:
        """Read a file."""
        return path

    agent = create_agent(ScriptedChatModel(script=["ok"]), [read_file], middleware=[guard])
    nodes = set(agent.get_graph().nodes) - {"__start__", "__end__"}
    assert nodes == {"model", "tools", "LoopGuardMiddleware.after_agent"}


def test_middleware_has_the_runtime_commands() -> None:
    """status, inspect, set_mode and reset exist, as on the callback handler."""
    guard = _guard(nudges=2, on_stop="end")
    assert (guard.nudges, guard.on_stop) == (2, "end")
    guard.set_mode("observe")
    assert guard.status().mode == "observe"
    assert guard.inspect() is None
    assert guard.inspect("never-seen") is None
    assert guard.reset() is False
    assert guard.reset("never-seen") is False
    with pytest.raises(LoopGuardConfigError):
        guard.set_mode("loud")  # type: ignore[arg-type]


def test_switching_off_forgets_the_threads() -> None:
    """set_mode("off") drops the guard's view of the threads it served."""
    agent = loop_harness("middleware", LOOPS[0], on_stop="end")
    agent.invoke()
    assert agent.guard.status().active_runs == 1
    agent.guard.set_mode("off")
    assert agent.guard.status().active_runs == 0
    assert agent.guard.inspect(agent.thread) is None


def _passes(guard: LoopGuardMiddleware, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The positions of the guard's passes (``"before_model"``, ``"after_model"``), in order."""
    positions: list[str] = []
    original = guard._guard_pass

    def recording(messages: Any, stored: Any, position: Any, **options: Any) -> Any:
        positions.append(position)
        return original(messages, stored, position, **options)

    monkeypatch.setattr(guard, "_guard_pass", recording)
    return positions


def test_a_quiet_step_is_fed_after_the_model_call_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Successful results and the turn's start cannot stop a run before the model call, so
    no pass runs before it: the one after the model call, in the same step, feeds them, in
    the same order."""
    guard = _guard()
    passes = _passes(guard, monkeypatch)
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    for index in range(4):
        passes.clear()
        update, called = _model_node(guard, state, _answer("read", {"p": index}, f"c{index}"))
        assert called
        assert passes == ["after_model"]
        assert update is not None
        assert "jump_to" not in update
        _apply(state, update)
        _tool_results(state)
    inspection = guard.inspect(state)
    assert inspection is not None
    assert (inspection.turns, inspection.calls) == (4, 4)
    assert [call.outcome for call in inspection.recent] == ["ok", "ok", "ok", "pending"]


@pytest.mark.parametrize(
    ("config", "before"),
    [
        pytest.param({"max_turns": 2}, [False, False, True], id="turn-count-warning-due"),
        pytest.param({"turn_timeout_ms": 1_500}, [False, True, False], id="elapsed-warning-due"),
    ],
)
def test_the_pass_before_the_model_runs_when_a_warning_is_due(
    config: dict[str, Any], before: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warning due at a turn's start is given before the model is called (and once)."""
    now = [0.0]
    guard = _guard(config=config, clock=lambda: now[0])
    passes = _passes(guard, monkeypatch)
    state: dict[str, Any] = {"messages": [HumanMessage("go")]}
    ran = []
    for index in range(3):
        now[0] = 2.0 * index  # two seconds between steps
        passes.clear()
        update, called = _model_node(guard, state, _answer("read", {"p": index}, f"c{index}"))
        assert called
        ran.append(passes[:1] == ["before_model"])
        assert passes[-1:] == ["after_model"]
        _apply(state, update)
        _tool_results(state)
    assert ran == before
    assert guard.status().warnings == 1


def test_two_passes_reading_one_state_do_not_share_a_detector() -> None:
    """Each pass goes on with the detector that wrote the state it reads, unless another pass
    took it: both branches below decide as a guard that restores the state would."""
    guard = _guard(on_stop="end")
    state = _two_reads(guard)
    answers = (_answer("read", {"p": 1}, "c2"), _answer("grep", {"q": 1}, "g2"))
    repeat, other = (_step(guard, _branch(state), answer) for answer in answers)
    fresh = _guard(on_stop="end")  # no detector of its own: it restores the state
    expected = [_step(fresh, _branch(state), answer) for answer in answers]
    assert repeat["jump_to"] == "end"
    assert "jump_to" not in other
    for got, want in zip((repeat, other), expected, strict=True):
        assert got["loop_guard"]["detector"]["calls"] == want["loop_guard"]["detector"]["calls"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_guard_goes_on_with_its_detector_and_restores_a_state_it_did_not_write(
    kind: Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within a run, and at the thread's next run (the checkpointer's copy of the state it
    wrote, equal to it), a guard goes on with its detector; a state it did not write (another
    guard's, as another process serving the thread has, or one the app changed) is restored,
    and decides the same."""
    restored: list[bool] = []
    original = LoopDetector.restore_state

    def counting(self: LoopDetector, state: Any) -> bool:
        restored.append(original(self, state))
        return restored[-1]

    monkeypatch.setattr(LoopDetector, "restore_state", counting)
    script: list[Any] = [call("read", {"p": n}) for n in range(5)]
    model = ScriptedChatModel(script=[*script, "Done.", *script, "Done again.", "All done."])
    agent = harness(kind, model, [scripted_tool("read", "contents")])
    agent.invoke()
    agent.invoke(text="Once more.")
    assert restored == []
    state = agent.graph.get_state(agent.config).values["loop_guard"]
    agent.graph.update_state(agent.config, {"loop_guard": {**state, "at": state["at"] - 1.0}})
    agent.invoke(text="Last one.")
    assert restored == [True]
    same_calls = ScriptedChatModel(script=[call("read", {"p": 4})], then="repeat")
    tools = [scripted_tool("read", "contents")]
    other = harness(kind, same_calls, tools, checkpointer=agent.checkpointer, on_stop="raise")
    with pytest.raises(LoopDetected) as caught:
        other.invoke(text="And again.")  # the thread's history, restored, holds two reads of p=4
    assert restored == [True, True]
    assert caught.value.signal is Signal.REPEATED_TOOL_CALL


def test_a_mode_change_applies_to_the_next_pass() -> None:
    """A detector kept from an earlier pass is not reused under another configuration."""
    guard = _guard(on_stop="end")
    state = _two_reads(guard)
    guard.set_mode("observe")
    update = _step(guard, state, _answer("read", {"p": 1}, "c2"))
    assert "jump_to" not in update
    assert guard.status().observed == 1


# --- second tier: real create_agent runs --------------------------------------------------------

LOOP_IDS = [loop.name for loop in LOOPS]


@pytest.mark.parametrize("loop", LOOPS, ids=LOOP_IDS)
def test_each_loop_raises_loop_detected(loop: Loop) -> None:
    """on_stop="raise": the agent's invoke raises LoopDetected with the loop's signal."""
    agent = loop_harness("middleware", loop)
    with pytest.raises(LoopDetected) as caught:
        agent.invoke()
    assert caught.value.signal is loop.signal
    assert caught.value.tool == loop.tool
    assert caught.value.run_id == agent.thread


@pytest.mark.parametrize("loop", LOOPS, ids=LOOP_IDS)
def test_each_loop_ends_the_run_with_a_valid_history(loop: Loop) -> None:
    """on_stop="end": a final stop message, every call answered, and the agent can go on."""
    agent = loop_harness("middleware", loop, on_stop="end")
    result = agent.invoke()
    final = stop_message(result["messages"])
    assert final.content.startswith("Loop guard stopped the run")
    assert_valid_history(result["messages"])
    again = agent.invoke(text=AGAIN)
    assert again["messages"][-1].content == FINE


@pytest.mark.parametrize("loop", LOOPS, ids=LOOP_IDS)
def test_each_loop_interrupts_for_a_human(loop: Loop) -> None:
    """on_stop="interrupt": the thread pauses with a payload; resuming with "end" ends it."""
    agent = loop_harness("middleware", loop, on_stop="interrupt")
    paused = agent.invoke()
    (pending,) = paused["__interrupt__"]
    assert pending.value["signal"] == loop.signal.value
    assert pending.value["tool"] == loop.tool
    assert set(pending.value) == {
        "type", "signal", "tool", "tools", "count", "threshold", "message", "remedy", "cost",
        "resume",
    }  # fmt: skip
    assert pending.value["remedy"]  # what would have let it go on (SPEC §13 C4)
    result = agent.invoke(Command(resume="end"))
    assert stop_message(result["messages"]).content == pending.value["message"]
    assert agent.invoke(text=AGAIN)["messages"][-1].content == FINE


def test_refused_call_never_runs_its_tool() -> None:
    """The refused third call is answered by the guard: the tool body ran twice."""
    agent = loop_harness("middleware", LOOPS[0], on_stop="end")
    agent.invoke()
    assert agent.tool("read_file").calls == 2


def test_interrupt_resumed_with_continue_goes_on_with_fresh_counters() -> None:
    """Resuming with "continue" runs the call; the loop is caught again three calls later."""
    agent = loop_harness("middleware", LOOPS[0], on_stop="interrupt")
    agent.invoke()
    again = agent.invoke(Command(resume={"action": "continue"}))
    assert agent.tool("read_file").calls == 4
    assert again["__interrupt__"][0].value["count"] == 3


@pytest.mark.parametrize("answer", ["stop", {"action": "retry"}, {"action": "end", "x": 1}, 1])
def test_interrupt_rejects_other_resume_values_and_stays_open(answer: object) -> None:
    """A resume value other than continue/end is refused; the interrupt can be answered."""
    agent = loop_harness("middleware", LOOPS[0], on_stop="interrupt")
    agent.invoke()
    with pytest.raises(ValidationError, match="continue"):
        agent.invoke(Command(resume=answer))
    assert agent.graph.get_state(agent.config).interrupts
    result = agent.invoke(Command(resume="end"))
    assert stop_message(result["messages"])


def _reacts_to_nudge(messages: list[BaseMessage]) -> AIMessage | str:
    last = messages[-1]
    if isinstance(last, ToolMessage) and str(last.content).startswith(HINT_MARKER):
        return call("ask_user", {"question": "a.txt keeps failing, what now?"})
    if isinstance(last, ToolMessage) and last.name == "ask_user":
        return "I reported the blocker."
    return call("read_file", {"path": "a.txt"})


def test_nudged_model_changes_approach_and_finishes() -> None:
    """nudges=1: the loop is refused with an English nudge; the model reads it and finishes."""
    model = scripted(_reacts_to_nudge)
    tools = [scripted_tool("read_file", "contents"), scripted_tool("ask_user", "try b.txt")]
    agent = harness("middleware", model, tools, nudges=1)
    result = agent.invoke()
    (nudged,) = guard_messages(result["messages"])
    assert nudged.content == nudge("read_file", 3, "en")
    assert result["messages"][-1].content == "I reported the blocker."
    assert_valid_history(result["messages"])


def test_nudge_about_a_narrated_repeat_answers_every_call_of_the_answer() -> None:
    """A repeated assistant response with calls: its calls carry the nudge, none runs."""
    loop = next(loop for loop in LOOPS if loop.name == "repeated_assistant_response")
    agent = loop_harness("middleware", loop, nudges=1, on_stop="end")
    result = agent.invoke()
    nudged, refused, final = guard_messages(result["messages"])
    assert nudged.content == nudge(None, 3, "en")
    assert refused.content == not_executed("en")
    assert "same response 4 times" in final.content
    assert agent.tool("poll").calls == 2


def test_model_ignoring_the_nudge_is_stopped() -> None:
    """nudges=1: repeating the refused call once more stops the run."""
    agent = loop_harness("middleware", LOOPS[0], nudges=1, on_stop="end")
    result = agent.invoke()
    nudged, refused, final = guard_messages(result["messages"])
    assert nudged.content == nudge("read_file", 3, "en")
    assert refused.content == not_executed("en")
    assert final.content.startswith("Loop guard stopped the run")


def test_nudge_speaks_the_configured_locale() -> None:
    """locale="ko": the nudge is the Korean catalog's text, not the English one."""
    agent = loop_harness("middleware", LOOPS[0], nudges=1, config={"locale": "ko"})
    with pytest.raises(LoopDetected):
        agent.invoke()
    nudged = guard_messages(agent.state()["messages"])[0]
    assert nudged.content == nudge("read_file", 3, "ko")
    assert nudged.content != nudge("read_file", 3, "en")


def test_stop_messages_speak_the_configured_locale() -> None:
    """locale="ko": the refused call's answer and the stop message are the Korean texts."""
    agent = loop_harness("middleware", LOOPS[0], on_stop="end", config={"locale": "ko"})
    result = agent.invoke()
    refused, final = guard_messages(result["messages"])
    assert refused.content == not_executed("ko") != not_executed("en")
    stopped = translator("ko").gettext("Loop guard stopped the run: {reason}")
    assert stopped != "Loop guard stopped the run: {reason}"
    assert final.content.startswith(stopped.split("{reason}")[0])


def test_the_same_reply_to_a_third_question_in_a_thread_is_a_conversation_going_round() -> None:
    """Three questions on a thread, the same reply to each: the third is stopped (SPEC §12
    R9); with ``scope="run"`` each question starts afresh and nothing is stopped."""
    model = ScriptedChatModel(script=["I'm sorry, could you rephrase that?"], then="repeat")
    agent = harness("middleware", model, [], config={"scope": "thread"})
    agent.invoke(text="where is my order?")
    agent.invoke(text="my order, the blue one")
    with pytest.raises(LoopDetected) as stopped:
        agent.invoke(text="order 1042, placed Monday")
    assert stopped.value.signal is Signal.REPEATED_ASSISTANT_RESPONSE
    fresh = ScriptedChatModel(script=["I'm sorry, could you rephrase that?"], then="repeat")
    per_run = harness("middleware", fresh, [], config={"scope": "run"})
    for question in ("where is my order?", "my order, the blue one", "order 1042"):
        result = per_run.invoke(text=question)
        assert result["messages"][-1].content == "I'm sorry, could you rephrase that?"
    assert not any(guard_kind(m) for m in result["messages"])


def test_hint_reaches_the_model_once_per_call() -> None:
    """Every model call sees the user's system prompt with the hint appended once."""
    model = model_of(lambda n: "done" if n else call("read_file", {"path": "a"}))
    agent = harness(
        "middleware", model, [scripted_tool("read_file", "x")], system_prompt="Be brief."
    )
    agent.invoke()
    assert model.turns == 2
    for seen in model.seen:
        assert isinstance(seen[0], SystemMessage)
        assert seen[0].content == f"Be brief.\n\n{hint('en')}"
        assert sum(HINT_MARKER in str(m.content) for m in seen) == 1


def test_agent_with_prompt_hint_false_sends_the_users_prompt_unchanged() -> None:
    """In a real agent run, ``prompt_hint=False`` leaves every model call's prompt alone."""
    model = model_of(lambda n: "done" if n else call("read_file", {"path": "a"}))
    agent = harness(
        "middleware",
        model,
        [scripted_tool("read_file", "x")],
        system_prompt="Be brief.",
        config={"mode": "observe", "prompt_hint": False},
    )
    agent.invoke()
    assert model.turns == 2
    for seen in model.seen:
        assert seen[0].content == "Be brief."
        assert not any(HINT_MARKER in str(m.content) for m in seen)


WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
]
PRODUCTIVE: dict[str, tuple[list[Any], dict[str, Any], list[Any]]] = {
    "edit then test, output changing": (
        [
            call("run_tests", {}),
            call("edit", {"file": "a.py"}),
            call("run_tests", {}),
            call("edit", {"file": "b.py"}),
            call("run_tests", {}),
            call("edit", {"file": "c.py"}),
            call("run_tests", {}),
            "All tests pass.",
        ],
        {},
        [
            scripted_tool(
                "run_tests",
                "3 failed in 0.51s",
                "2 failed in 0.62s",
                "1 failed in 0.40s",
                "12 passed in 0.33s",
            ),
            scripted_tool("edit", "ok"),
        ],
    ),
    "paging": (
        [call("next_page", {"cursor": "next"}) for _ in range(12)] + ["Read every page."],
        {},
        [
            scripted_tool(
                "next_page",
                *(f"page {n}: items {n * 20}-{n * 20 + 19}, {w}" for n, w in enumerate(WORDS)),
            )
        ],
    ),
    "polling, status changing": (
        [
            step
            for _ in range(8)
            for step in (call("job_status", {"id": 7}), call("sleep", {"seconds": 5}))
        ]
        + ["The job is done."],
        # a status whose percentage only moves is a near repeat at its 4th poll (SPEC §11 R1):
        # such a poller gets its own limit
        {"ignore_tools": ["sleep"], "tool_threshold_overrides": {"job_status": 9}},
        [
            scripted_tool(
                "job_status",
                "Pending",
                "Running 10%",
                "Running 25%",
                "Running 40%",
                "Running 60%",
                "Running 80%",
                "Running 95%",
                "Done",
            ),
            scripted_tool("sleep", "slept"),
        ],
    ),
}


@pytest.mark.parametrize(("script", "config", "tools"), PRODUCTIVE.values(), ids=list(PRODUCTIVE))
def test_productive_runs_complete_untouched(
    script: list[Any], config: dict[str, Any], tools: list[Any]
) -> None:
    """Repeated calls whose results change are progress: the guard never interferes."""
    model = ScriptedChatModel(script=script)
    agent = harness("middleware", model, tools, config=config)
    result = agent.invoke()
    assert guard_messages(result["messages"]) == []
    assert result["messages"][-1].content == script[-1]


def test_edit_test_loop_with_the_same_failure_is_stopped_at_the_fourth_test_run() -> None:
    """SPEC §3's example: an identical failure each time is stopped at the 4th test run, on
    its result: an edit succeeded in between, so the run executes (SPEC §11 N1)."""
    script = [
        step
        for file in ("a.py", "b.py", "c.py")
        for step in (call("run_tests", {}), call("edit", {"file": file}))
    ] + [call("run_tests", {}), "never reached"]
    tools = [scripted_tool("run_tests", "1 failed: test_x"), scripted_tool("edit", "ok")]
    agent = harness("middleware", ScriptedChatModel(script=script), tools)
    with pytest.raises(LoopDetected) as caught:
        agent.invoke()
    assert (caught.value.signal, caught.value.count) == (Signal.TOOL_FREQUENCY, 4)
    assert agent.tool("run_tests").calls == 4


def test_mode_off_changes_nothing() -> None:
    """Off: no hint, no guard state, the loop runs to its end."""
    script = [call("read_file", {"path": "a"})] * 6 + ["done"]
    model = ScriptedChatModel(script=script)
    agent = harness(
        "middleware",
        model,
        [scripted_tool("read_file", "x")],
        config={"mode": "off"},
        system_prompt="Base.",
    )
    result = agent.invoke()
    assert result["messages"][-1].content == "done"
    assert all(seen[0].content == "Base." for seen in model.seen)
    assert "loop_guard" not in agent.state()


def test_async_agent_is_stopped_like_a_sync_one() -> None:
    """ainvoke goes through the async hooks with the same result."""
    agent = loop_harness("middleware", LOOPS[0], on_stop="end")
    result = asyncio.run(agent.graph.ainvoke({"messages": [HumanMessage("go")]}, agent.config))
    assert stop_message(result["messages"]).content.startswith("Loop guard stopped the run")
    assert agent.tool("read_file").calls == 2


def test_status_and_inspect_report_the_stopped_thread() -> None:
    """After a stop, status counts it and inspect shows the thread's calls, no content."""
    agent = loop_harness("middleware", LOOPS[0], on_stop="end")
    agent.invoke()
    guard = agent.guard
    assert guard.status().stops == 1
    inspection = guard.inspect(agent.thread)
    assert inspection is not None
    assert inspection.tripped is Signal.REPEATED_TOOL_CALL
    assert [c.tool for c in inspection.recent] == ["read_file"] * 3
    assert guard.inspect(agent.state()) is not None


def test_reset_clears_a_thread_at_its_next_step() -> None:
    """reset(thread) makes the thread's next step start from fresh counters."""
    agent = loop_harness("middleware", LOOPS[0], config={"scope": "thread"}, on_stop="end")
    agent.invoke()
    assert agent.guard.reset(agent.thread) is True
    agent.invoke(text="try again")
    inspection = agent.guard.inspect(agent.thread)
    assert inspection is not None
    assert inspection.calls == 3
