"""LoopGuardCallbackHandler, first tier: its callbacks called directly, as LangChain calls them."""

from __future__ import annotations

import logging
import threading
from typing import Any
from uuid import UUID, uuid4

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, Generation, LLMResult
from langgraph.errors import GraphInterrupt
from langgraph.types import Command
from pydantic import BaseModel, ValidationError

from langchain_loop_guard import LoopGuardConfig, LoopGuardConfigError, Signal
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import calls


def guard(**values: Any) -> LoopGuardCallbackHandler:
    return LoopGuardCallbackHandler(LoopGuardConfig(**values))


class Run:
    """One top-level run, its callbacks fired the way LangGraph fires them."""

    def __init__(
        self,
        handler: LoopGuardCallbackHandler,
        *,
        thread_id: str | None = None,
        parent: UUID | None = None,
    ) -> None:
        self.handler = handler
        self.id = uuid4()
        self.metadata = {"thread_id": thread_id} if thread_id else {}
        self.calls = 0
        handler.on_chain_start(
            None, {}, run_id=self.id, parent_run_id=parent, metadata=self.metadata
        )

    def node(self) -> UUID:
        node = uuid4()
        self.handler.on_chain_start(
            None, {}, run_id=node, parent_run_id=self.id, metadata=self.metadata
        )
        return node

    def model(
        self, answer: AIMessage | str = "", seen: list[BaseMessage] | None = None
    ) -> AIMessage:
        """A model turn answering ``answer``; tool calls without an id get one."""
        message = AIMessage(content=answer) if isinstance(answer, str) else answer
        for tool_call in message.tool_calls:
            if tool_call["id"] is None:
                self.calls += 1
                tool_call["id"] = f"call_{self.calls}"
        node, llm = self.node(), uuid4()
        self.handler.on_chat_model_start(
            {}, [seen or []], run_id=llm, parent_run_id=node, metadata=self.metadata
        )
        result = LLMResult(generations=[[ChatGeneration(message=message)]])
        self.handler.on_llm_end(result, run_id=llm, parent_run_id=node)
        self.handler.on_chain_end({}, run_id=node, parent_run_id=self.id)
        return message

    def tool(
        self,
        name: str,
        args: dict[str, Any] | None = None,
        output: Any = "ok",
        *,
        error: BaseException | None = None,
        call_id: str | None = None,
    ) -> None:
        """A tool node running one tool that returns ``output`` (or raises ``error``)."""
        args = args or {}
        node, tool = self.node(), uuid4()
        self.handler.on_tool_start(
            {"name": name, "description": ""},
            str(args),
            run_id=tool,
            parent_run_id=node,
            metadata=self.metadata,
            inputs=args,
            tool_call_id=call_id,
        )
        if error is not None:
            self.handler.on_tool_error(error, run_id=tool, parent_run_id=node, tool_call_id=call_id)
        else:
            self.handler.on_tool_end(output, run_id=tool, parent_run_id=node)
        self.handler.on_chain_end({}, run_id=node, parent_run_id=self.id)

    def end(self, error: BaseException | None = None) -> None:
        if error is None:
            self.handler.on_chain_end({}, run_id=self.id, parent_run_id=None)
        else:
            self.handler.on_chain_error(error, run_id=self.id, parent_run_id=None)


def tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[ToolCall(name=name, args=args, id=call_id, type="tool_call")]
    )


# --- the handler's contract with LangChain --------------------------------------------------------


def test_handler_raises_inline_and_sees_every_event() -> None:
    """raise_error and run_inline are set; only its own custom events are ignored."""
    handler = guard()
    assert (handler.raise_error, handler.run_inline) == (True, True)
    assert handler.ignore_custom_event
    assert not any(
        (handler.ignore_llm, handler.ignore_chain, handler.ignore_agent, handler.ignore_chat_model)
    )
    assert isinstance(handler, BaseCallbackHandler)


@pytest.mark.parametrize(
    ("config", "mode"),
    [
        (None, "observe"),
        ({"repeat_tool_threshold": 4}, "observe"),
        (LoopGuardConfig(mode="off"), "off"),
    ],
    ids=["None loads the environment", "mapping over the environment", "config as is"],
)
def test_config_argument_forms(
    config: Any, mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """None and a mapping read files and environment; a LoopGuardConfig is used as it is."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("LOOP_GUARD_MODE", "observe")
    handler = LoopGuardCallbackHandler(config)
    assert handler.mode == mode
    if isinstance(config, dict):
        assert handler.config.repeat_tool_threshold == 4


def test_config_of_another_type_is_rejected() -> None:
    """A config that is neither a mapping nor a LoopGuardConfig is a configuration error."""
    with pytest.raises(LoopGuardConfigError):
        LoopGuardCallbackHandler(["mode", "on"])  # type: ignore[arg-type]


# --- tool calls -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "calls", "stops"),
    [(3, 2, False), (3, 3, True), (5, 4, False), (5, 5, True)],
    ids=["below", "at", "override below", "override at"],
)
def test_identical_calls_raise_from_tool_start_at_the_threshold(
    threshold: int, calls: int, stops: bool
) -> None:
    """The Nth identical call raises from on_tool_start, so its body never runs."""
    run = Run(guard(tool_threshold_overrides={"read_file": threshold}))
    for _ in range(calls - 1):
        run.tool("read_file", {"path": "a.py"}, "contents")
    if stops:
        with pytest.raises(LoopDetected):
            run.tool("read_file", {"path": "a.py"}, "contents")
    else:
        run.tool("read_file", {"path": "a.py"}, "contents")


def test_loop_detected_carries_signal_tool_counts_and_run_id() -> None:
    """The interrupt says which loop, which tool, how often, the limit and the run."""
    run = Run(guard())
    run.tool("read_file", {"path": "a.py"})
    run.tool("read_file", {"path": "a.py"})
    with pytest.raises(LoopDetected) as caught:
        run.tool("read_file", {"path": "a.py"})
    error = caught.value
    assert (error.signal, error.tool, error.count, error.threshold, error.run_id) == (
        Signal.REPEATED_TOOL_CALL,
        "read_file",
        3,
        3,
        str(run.id),
    )
    assert "read_file" in str(error)


def test_tool_name_comes_from_serialized_and_args_from_inputs() -> None:
    """Args are the parsed ``inputs`` dict: key order does not matter, input_str is unused."""
    handler = guard()
    run = Run(handler)
    for args in ({"a": 1, "b": 2}, {"b": 2, "a": 1}):
        node = run.node()
        handler.on_tool_start(
            {"name": "add"}, f"noise {uuid4()}", run_id=uuid4(), parent_run_id=node, inputs=args
        )
    with pytest.raises(LoopDetected) as caught:
        run.tool("add", {"a": 1.0, "b": 2})
    assert caught.value.tool == "add"


def test_stopped_run_aborts_the_next_model_call() -> None:
    """After a stop, the next model start raises before the model is paid for."""
    run = Run(guard())
    for _ in range(2):
        run.tool("read_file", {"path": "a.py"})
    with pytest.raises(LoopDetected):
        run.tool("read_file", {"path": "a.py"})
    with pytest.raises(LoopDetected) as caught:
        run.model("let me try again")
    assert caught.value.signal is Signal.REPEATED_TOOL_CALL
    assert caught.value.verdict is not None
    assert caught.value.verdict.tripped


@pytest.mark.parametrize(
    "fail",
    [
        lambda run, n: run.tool(
            "run_script",
            {"n": n},
            ToolMessage(f"SyntaxError (line {n})", tool_call_id=f"c{n}", status="error"),
        ),
        lambda run, n: run.tool("run_script", {"n": n}, error=ValueError(f"bad line {n}")),
    ],
    ids=["error ToolMessage from handle_tool_error", "on_tool_error"],
)
def test_identical_errors_in_a_row_stop_the_run(fail: Any) -> None:
    """Three identical errors (line numbers aside) stop the run, whichever callback reports them."""
    run = Run(guard())
    fail(run, 12)
    fail(run, 14)
    with pytest.raises(LoopDetected) as caught:
        fail(run, 17)
    assert caught.value.signal is Signal.REPEATED_TOOL_ERROR


def test_success_tool_message_is_not_an_error() -> None:
    """A ToolMessage with status "success" is a result, not an error."""
    run = Run(guard())
    for n in (1, 2, 3, 4):
        run.tool("run_script", {"n": n}, ToolMessage("same", tool_call_id=f"c{n}"))


def test_interrupt_in_a_tool_is_a_pause_and_its_resumption_not_a_new_call() -> None:
    """An interrupt() inside a tool is not an error, and the resumed call is counted once."""
    handler = guard(scope="thread")
    first = Run(handler, thread_id="t")
    first.tool("approve", {"id": 1}, error=GraphInterrupt(()), call_id="c1")
    first.end()
    resumed = Run(handler, thread_id="t")
    resumed.tool("approve", {"id": 1}, "approved", call_id="c1")
    resumed.tool("approve", {"id": 1}, "approved", call_id="c2")
    inspection = handler.inspect("t")
    assert inspection is not None
    assert (inspection.calls, [c.outcome for c in inspection.recent]) == (2, ["ok", "ok"])


# --- what a tool returned -------------------------------------------------------------------------


def test_command_results_are_keyed_by_their_tool_message_content() -> None:
    """on_tool_end gets the tool's Command: identical calls returning one content repeat."""
    handler = guard()
    run = Run(handler)
    for n in (1, 2):
        update = {"messages": [ToolMessage("saved", tool_call_id=f"c{n}", id=f"m{n}")]}
        run.tool("remember", {"fact": "x"}, Command(update=update), call_id=f"c{n}")
    inspection = handler.inspect(run.id)
    assert inspection is not None
    assert [c.outcome for c in inspection.recent] == ["ok", "ok"]
    assert inspection.recent[0].digest == inspection.recent[1].digest
    with pytest.raises(LoopDetected) as caught:
        run.tool("remember", {"fact": "x"}, call_id="c3")
    assert caught.value.signal is Signal.REPEATED_TOOL_CALL


def test_command_with_an_error_tool_message_is_a_failure() -> None:
    """A Command whose tool message has status="error" counts toward the error streak."""
    run = Run(guard())
    failed = {"messages": [ToolMessage("quota exceeded", tool_call_id="c", status="error")]}
    run.tool("book", {"n": 1}, Command(update=failed), call_id="c1")
    run.tool("book", {"n": 2}, Command(update=failed), call_id="c2")
    with pytest.raises(LoopDetected) as caught:
        run.tool("book", {"n": 3}, Command(update=failed), call_id="c3")
    assert caught.value.signal is Signal.REPEATED_TOOL_ERROR


def test_a_validation_error_from_on_tool_error_is_an_error() -> None:
    """Invalid arguments raise pydantic's ValidationError in on_tool_error: an error outcome."""

    class Args(BaseModel):
        count: int

    handler = guard()
    run = Run(handler)
    with pytest.raises(ValidationError) as invalid:
        Args.model_validate({"count": "abc"})
    run.tool("repeat_word", {"count": "abc"}, error=invalid.value, call_id="c1")
    inspection = handler.inspect(run.id)
    assert inspection is not None
    assert [c.outcome for c in inspection.recent] == ["error"]


# --- model turns ----------------------------------------------------------------------------------


def test_identical_assistant_text_stops_the_run_at_its_next_step() -> None:
    """The third identical answer to an input holding the previous one is reported when the
    model answers (the tracers after the guard still record it) and raised at the next step."""
    handler = guard()
    run = Run(handler)
    history: list[BaseMessage] = [HumanMessage("Find the bug.")]
    for answer in ("I cannot find it.", "I  cannot find it. "):
        history += [run.model(answer, seen=history), HumanMessage("Look again.")]
    run.model("I cannot find it.", seen=history)
    assert handler.status().stops == 1
    with pytest.raises(LoopDetected) as caught:
        run.node()
    assert caught.value.signal is Signal.REPEATED_ASSISTANT_RESPONSE


def test_helper_model_giving_the_same_answer_to_new_inputs_is_never_stopped() -> None:
    """A grader answering "yes" to 5 documents, none of its inputs holding an answer, is no loop."""
    handler = guard()
    run = Run(handler)
    for n in range(5):
        run.model("yes", seen=[SystemMessage("Is it relevant?"), HumanMessage(f"document {n}")])
    assert handler.status().stops == 0


def test_a_few_shot_example_with_the_answer_text_is_not_the_previous_answer() -> None:
    """A grader whose prompt ends with an example answer "no" may answer "no" to every input."""
    handler = guard()
    run = Run(handler)
    for n in range(5):
        example = AIMessage("no", id="example")
        seen = [HumanMessage("doc: cats"), example, HumanMessage(f"doc: {n}")]
        run.model(AIMessage("no", id=f"answer-{n}"), seen=seen)
    assert handler.status().stops == 0


def test_an_answer_whose_input_holds_the_previous_answer_by_id_repeats_it() -> None:
    """The agent's history keeps its answers' ids: the third identical answer is stopped."""
    run = Run(guard())
    history: list[BaseMessage] = [HumanMessage("q")]
    for n in range(2):
        history += [run.model(AIMessage("Same.", id=f"a{n}"), seen=history), HumanMessage("more")]
    run.model(AIMessage("Same.", id="a2"), seen=history)
    with pytest.raises(LoopDetected) as caught:
        run.end()  # the invocation ends right after the answer: its end raises
    assert caught.value.signal is Signal.REPEATED_ASSISTANT_RESPONSE


def test_model_runs_in_flight_are_forgotten_when_they_end_or_fail() -> None:
    """The per-call context flag is kept only while the model call is in flight."""
    handler = guard()
    run = Run(handler)
    node, llm = run.node(), uuid4()
    handler.on_chat_model_start({}, [[HumanMessage("q")]], run_id=llm, parent_run_id=node)
    assert len(handler._engine.runs[str(run.id)].in_context) == 1
    handler.on_llm_error(RuntimeError("rate limited"), run_id=llm, parent_run_id=node)
    run.model("done", seen=[HumanMessage("q")])
    assert handler._engine.runs[str(run.id)].in_context == {}


def test_text_completion_models_count_turns() -> None:
    """on_llm_start (a text-completion model) is a model turn, and its text an answer."""
    handler = guard(max_turns=2, mode="observe")
    run = Run(handler)
    for _ in range(3):
        llm = uuid4()
        handler.on_llm_start({}, ["prompt"], run_id=llm, parent_run_id=run.id)
        result = LLMResult(generations=[[Generation(text="same")]])
        handler.on_llm_end(result, run_id=llm, parent_run_id=run.id)
    status = handler.status()
    assert (status.warnings, status.observed) == (1, 1)


def answered(*calls: tuple[str, str]) -> list[BaseMessage]:
    """The next model input after the agent answered ``(call_id, error)`` without a tool."""
    return [
        HumanMessage("go"),
        AIMessage(content="", tool_calls=[]),
        *(ToolMessage(error, tool_call_id=call_id, status="error") for call_id, error in calls),
    ]


def test_calls_that_reach_no_tool_are_counted_at_the_next_model_start() -> None:
    """A call to a missing tool counts with its error answer; the 3rd raises before the model."""
    run = Run(guard())
    error = "Error: nope is not a valid tool, try one of [read_file]."
    run.model(tool_call("nope", {}, "c1"))
    run.model(tool_call("nope", {}, "c2"), seen=answered(("c1", error)))
    run.model(tool_call("nope", {}, "c3"), seen=answered(("c2", error)))
    with pytest.raises(LoopDetected) as caught:
        run.model("never paid for", seen=answered(("c3", error)))
    assert (caught.value.signal, caught.value.tool) == (Signal.REPEATED_TOOL_CALL, "nope")


@pytest.mark.parametrize(
    ("in_input", "signal"),
    [(True, Signal.REPEATED_TOOL_ERROR), (False, Signal.REPEATED_TOOL_CALL)],
    ids=["answer-in-input", "answer-gone"],
)
def test_calls_that_reach_no_tool_are_told_apart_by_their_arguments(
    in_input: bool, signal: Signal
) -> None:
    """The arguments of a call no tool started are read from the answer that named it, in the
    model's next input (the handler keeps no arguments, SPEC §8): three calls of a missing tool
    with other arguments are the same error three times, not the same call. An input without
    that answer leaves the tool's name alone to tell them by."""
    run = Run(guard())
    error = "Error: nope is not a valid tool, try one of [read_file]."

    def seen(n: int) -> list[BaseMessage]:
        answer = tool_call("nope", {"attempt": n}, f"c{n}")
        said = answer if in_input else AIMessage(content="", tool_calls=[])
        return [HumanMessage("go"), said, ToolMessage(error, tool_call_id=f"c{n}", status="error")]

    run.model(tool_call("nope", {"attempt": 1}, "c1"))
    run.model(tool_call("nope", {"attempt": 2}, "c2"), seen=seen(1))
    run.model(tool_call("nope", {"attempt": 3}, "c3"), seen=seen(2))
    with pytest.raises(LoopDetected) as caught:
        run.model("never paid for", seen=seen(3))
    assert (caught.value.signal, caught.value.tool) == (signal, "nope")


def test_calls_nobody_answered_are_not_counted() -> None:
    """A named call with no tool run and no answer (structured output, say) is not a call."""
    handler = guard()
    run = Run(handler)
    for n in range(5):
        run.model(tool_call("Classification", {"label": "bug"}, f"c{n}"), seen=[HumanMessage("x")])
    inspection = handler.inspect()
    assert inspection is not None
    assert inspection.calls == 0


def test_calls_that_reach_a_tool_are_not_counted_twice() -> None:
    """A named call that starts a tool is counted by the tool callbacks only."""
    handler = guard()
    run = Run(handler)
    run.model(tool_call("read_file", {"path": "a.py"}, "c1"))
    run.tool("read_file", {"path": "a.py"}, "contents", call_id="c1")
    run.model("done", seen=answered(("c1", "contents")))
    inspection = handler.inspect()
    assert inspection is not None
    assert inspection.calls == 1


# --- an answer whose calls would stop the run -----------------------------------------------------

STOPPING = calls(("lookup", {"k": "a"}, "l"), ("write", {"x": 1}, "w"), ("notify", {}, "n"))
"""After two ``lookup(k=a)``: its lookup is the third identical call in a row, so none of its
calls runs."""


def _answer_stopping(handler: LoopGuardCallbackHandler, run: Run) -> UUID:
    """Two lookups, then :data:`STOPPING` answered inside a chain still open (the model's
    node, as in a hand-written agent node); returns that chain."""
    for _ in range(2):
        run.tool("lookup", {"k": "a"}, "value")
    node, llm = run.node(), uuid4()
    handler.on_chat_model_start({}, [[HumanMessage("go")]], run_id=llm, parent_run_id=node)
    result = LLMResult(generations=[[ChatGeneration(message=STOPPING)]])
    handler.on_llm_end(result, run_id=llm, parent_run_id=node)  # reported, not raised
    return node


def _tool_start(handler: LoopGuardCallbackHandler, parent: UUID, name: str, call_id: str) -> None:
    args = dict(next(c["args"] for c in STOPPING.tool_calls if c["id"] == call_id))
    handler.on_tool_start(
        {"name": name},
        str(args),
        run_id=uuid4(),
        parent_run_id=parent,
        inputs=args,
        tool_call_id=call_id,
    )


NEXT_STEPS: dict[str, Any] = {
    "a chain starts": lambda h, run, node: h.on_chain_start(
        None, {}, run_id=uuid4(), parent_run_id=run.id
    ),
    "a model starts": lambda h, run, node: h.on_chat_model_start(
        {}, [[HumanMessage("go")]], run_id=uuid4(), parent_run_id=node
    ),
    "a text model starts": lambda h, run, node: h.on_llm_start(
        {}, ["go"], run_id=uuid4(), parent_run_id=node
    ),
    "a retriever starts": lambda h, run, node: h.on_retriever_start(
        {}, "q", run_id=uuid4(), parent_run_id=node
    ),
    "a call of the answer starts": lambda h, run, node: _tool_start(h, node, "notify", "n"),
    "the invocation ends": lambda h, run, node: (
        h.on_chain_end({}, run_id=node, parent_run_id=run.id),
        run.end(),
    ),
}


@pytest.mark.parametrize("step", NEXT_STEPS)
def test_a_stopping_answer_is_reported_at_once_and_raised_at_the_next_step(step: str) -> None:
    """Not raised in on_llm_end (the tracers after the guard record the answer): the next
    chain, model, retriever or tool that starts, or the invocation's end, raises the stop."""
    handler = guard()
    run = Run(handler)
    node = _answer_stopping(handler, run)
    assert handler.status().stops == 1
    with pytest.raises(LoopDetected) as caught:
        NEXT_STEPS[step](handler, run, node)
    error = caught.value
    assert (error.signal, error.tool, error.count, error.run_id) == (
        Signal.REPEATED_TOOL_CALL,
        "lookup",
        3,
        str(run.id),
    )
    assert error.verdict is not None
    assert not error.verdict.tripped  # the stop itself, not "this run was already stopped"
    assert handler.status().stops == 1


def test_every_call_of_a_stopped_answer_is_refused_and_the_stop_counted_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each parallel sibling raises at its start, so none runs; the detector is fed nothing
    more, and the stop is logged and counted once."""
    handler = guard()
    run = Run(handler)
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        node = _answer_stopping(handler, run)
        before = handler.inspect(run.id)
        assert before is not None
        for name, call_id in (("write", "w"), ("notify", "n"), ("lookup", "l")):
            with pytest.raises(LoopDetected) as caught:
                _tool_start(handler, node, name, call_id)
            assert caught.value.tool == "lookup"
    after = handler.inspect(run.id)
    assert after is not None
    assert (after.calls, after.recent) == (before.calls, before.recent)
    assert [c.outcome for c in after.recent][-1] == "blocked"
    assert [r.loop_guard_action for r in caplog.records] == ["block"]  # type: ignore[attr-defined]
    assert handler.status().stops == 1


@pytest.mark.parametrize("parent", ["none", "unseen"])
def test_a_model_outside_any_chain_seen_is_stopped_at_its_answer(parent: str) -> None:
    """A model that is its own run, or whose chain the handler never saw (the handler given to
    the model only), may have no later event: its stopping answer raises in on_llm_end."""
    handler = guard(scope="thread")  # a model on its own: each call is a top-level run
    parent_id = None if parent == "none" else uuid4()
    history: list[BaseMessage] = [HumanMessage("q")]
    for n in range(3):
        llm, answer = uuid4(), AIMessage("Same.", id=f"a{n}")
        handler.on_chat_model_start(
            {}, [history], run_id=llm, parent_run_id=parent_id, metadata={"thread_id": "t"}
        )
        history = [*history, answer]
        result = LLMResult(generations=[[ChatGeneration(message=answer)]])
        if n < 2:
            handler.on_llm_end(result, run_id=llm, parent_run_id=parent_id)
            continue
        with pytest.raises(LoopDetected) as caught:
            handler.on_llm_end(result, run_id=llm, parent_run_id=parent_id)
        assert caught.value.signal is Signal.REPEATED_ASSISTANT_RESPONSE


def test_observe_mode_reports_a_stopping_answer_once_and_refuses_nothing() -> None:
    """Observe: the answer's calls all start, the loop is reported once, nothing raises."""
    handler = guard(mode="observe")
    run = Run(handler)
    node = _answer_stopping(handler, run)
    for name, call_id in (("lookup", "l"), ("write", "w"), ("notify", "n")):
        _tool_start(handler, node, name, call_id)
    handler.on_chain_end({}, run_id=node, parent_run_id=run.id)
    run.node()
    run.end()
    assert (handler.status().observed, handler.status().stops) == (1, 0)


def test_reset_drops_a_held_stop() -> None:
    """reset() lets the run go on: the stop held for its next step is not raised."""
    handler = guard()
    run = Run(handler)
    node = _answer_stopping(handler, run)
    assert handler.reset(run.id) is True
    _tool_start(handler, node, "notify", "n")
    run.end()


def test_switching_to_observe_drops_a_held_stop() -> None:
    """set_mode("observe") between the answer and its calls: an observed run is never stopped."""
    handler = guard()
    run = Run(handler)
    node = _answer_stopping(handler, run)
    handler.set_mode("observe")
    _tool_start(handler, node, "notify", "n")
    run.end()
    assert handler.status().stops == 1


def test_a_thread_goes_on_after_a_stopped_answer_without_counting_its_calls() -> None:
    """scope="thread": the stop is raised in its own invocation only; the next one, with a
    new human message, goes on, and the refused calls (answered "not executed" by a repair)
    are not counted as calls that reached no tool."""
    handler = guard(scope="thread")
    run = Run(handler, thread_id="chat-1")
    node = _answer_stopping(handler, run)
    with pytest.raises(LoopDetected):
        run.node()
    handler.on_chain_error(RuntimeError(), run_id=node, parent_run_id=run.id)
    run.end(RuntimeError())
    stopped = handler.inspect("chat-1")
    assert stopped is not None
    repaired = [
        HumanMessage("go", id="h1"),
        STOPPING,
        *(
            ToolMessage("not executed", tool_call_id=c["id"], status="error")
            for c in STOPPING.tool_calls
        ),
        HumanMessage("Something else.", id="h2"),
    ]
    later = Run(handler, thread_id="chat-1")
    later.node()
    later.model("Sure.", seen=repaired)
    later.end()
    inspection = handler.inspect("chat-1")
    assert inspection is not None
    assert (inspection.calls, inspection.tripped) == (stopped.calls, None)


# --- the run tree ---------------------------------------------------------------------------------


def test_nested_runs_count_toward_their_root() -> None:
    """Tool calls deep inside subgraphs and nested chains count toward one top-level run."""
    handler = guard()
    run = Run(handler)
    for _ in range(2):
        node = run.node()
        subgraph, inner, tool = uuid4(), uuid4(), uuid4()
        handler.on_chain_start(None, {}, run_id=subgraph, parent_run_id=node)
        handler.on_chain_start(None, {}, run_id=inner, parent_run_id=subgraph)
        handler.on_tool_start({"name": "t"}, "", run_id=tool, parent_run_id=inner, inputs={})
        handler.on_tool_end("ok", run_id=tool, parent_run_id=inner)
    assert handler.status().active_runs == 1
    with pytest.raises(LoopDetected):
        run.tool("t", {})


def test_interleaved_runs_stay_isolated() -> None:
    """Two top-level runs through one handler have separate counters."""
    handler = guard()
    runs = [Run(handler), Run(handler)]
    for _ in range(2):
        for run in runs:
            run.tool("read_file", {"path": "a.py"})
    assert handler.status().active_runs == 2
    for run in runs:
        with pytest.raises(LoopDetected) as caught:
            run.tool("read_file", {"path": "a.py"})
        assert caught.value.run_id == str(run.id)


def test_unknown_parent_is_taken_as_the_root() -> None:
    """Events under a parent never seen count toward that parent, whose end ends the run."""
    handler = guard()
    parent = uuid4()
    for _ in range(2):
        tool = uuid4()
        handler.on_tool_start({"name": "t"}, "", run_id=tool, parent_run_id=parent, inputs={})
        handler.on_tool_end("ok", run_id=tool, parent_run_id=parent)
    assert handler.status().active_runs == 1
    handler.on_chain_end({}, run_id=parent, parent_run_id=None)
    assert handler.status().active_runs == 0


def test_events_of_runs_never_started_are_ignored() -> None:
    """An end whose start was missed (a handler added mid-run) changes nothing."""
    handler = guard()
    handler.on_tool_end("ok", run_id=uuid4(), parent_run_id=uuid4())
    handler.on_llm_end(LLMResult(generations=[]), run_id=uuid4())
    assert handler.status().active_runs == 0


# --- state is freed and bounded -------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["end", "error"])
def test_root_end_frees_the_run_and_its_tree(ending: str) -> None:
    """The top-level run's end frees its detector and every run-tree entry, even after a stop."""
    handler = guard()
    run = Run(handler)
    run.tool("read_file", {"path": "a.py"})
    run.tool("read_file", {"path": "a.py"})
    with pytest.raises(LoopDetected) as caught:
        run.tool("read_file", {"path": "a.py"})  # its tool run never reports an end
    handler.on_chain_start(None, {}, run_id=uuid4(), parent_run_id=run.id)  # nor does this
    run.end(caught.value if ending == "error" else None)
    assert handler.status().active_runs == 0
    assert (handler._engine.runs, handler._tree.roots, handler._tree.open) == ({}, {}, {})


def _loop(run: Run, times: int = 3) -> bool:
    """Call ``read_file`` with the same arguments ``times`` times; whether the guard stopped it."""
    try:
        for _ in range(times):
            run.tool("read_file", {"path": "a.py"}, "contents")
    except LoopDetected:
        return True
    return False


def test_runs_in_flight_beyond_max_runs_are_all_guarded() -> None:
    """40 looping runs in flight on a registry of 16: every one is stopped, none forgotten."""
    handler = LoopGuardCallbackHandler(LoopGuardConfig(), max_runs=16)
    runs = [Run(handler) for _ in range(40)]
    for round_ in range(2):  # interleaved, as concurrent runs are
        for run in runs:
            run.tool("read_file", {"path": "a.py"}, "contents")
            assert len(handler._tree.roots) == 40, f"round {round_}"
    stopped = [_loop(run, times=1) for run in runs]
    assert stopped == [True] * 40
    assert handler.status().shed_runs == 0


@pytest.mark.parametrize("threads", [False, True], ids=["runs", "auto-scoped-threads"])
def test_runs_beyond_four_times_max_runs_are_shed_loudly_and_counted(
    threads: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Only beyond 4 x max_runs is a new run left unguarded: a WARNING, and a count. An
    invocation with a thread id (``scope="auto"``) takes its place at its first call, when its
    scope is known: here, with no checkpointer, a run of its own."""
    handler = LoopGuardCallbackHandler(LoopGuardConfig(), max_runs=4)
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        runs = [Run(handler, thread_id=f"t{n}" if threads else None) for n in range(20)]
        if threads:
            assert handler._engine.runs == {}  # no run before the scope is known
        stopped = [_loop(run) for run in runs]
    assert stopped == [True] * 16 + [False] * 4
    status = handler.status()
    assert (status.active_runs, status.shed_runs) == (16, 4)
    assert "runs not guarded (registry full)  4" in str(status)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "registry" in r.getMessage()
    ]
    assert len(warnings) == 3  # the 1st, 2nd and 4th: loud, but not a line per run
    assert "is not guarded (1 runs shed so far). Raise max_runs." in warnings[0]
    # the shed runs' nested events started no detector of their own under a nested id
    assert len(handler._engine.runs) == 16


def test_registry_forgets_the_least_recent_idle_run_beyond_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs that never report their end are forgotten once idle, least recently active first."""
    handler = LoopGuardCallbackHandler(LoopGuardConfig(), max_runs=3)
    runs = [Run(handler) for _ in range(3)]
    monkeypatch.setattr(
        "langchain_loop_guard._integrations._engine.IDLE_S", 0.0
    )  # every run is idle now
    runs[0].tool("read_file", {"path": "a.py"})  # the first run is now the most recent
    runs.append(Run(handler))
    assert handler.status().active_runs == 3
    assert handler.inspect(runs[1].id) is None
    assert handler.inspect(runs[0].id) is not None
    assert set(handler._tree.roots) == {runs[0].id.int, runs[2].id.int, runs[3].id.int}


def test_a_run_id_of_the_callers_own_is_tracked_as_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A top-level run id that is no ``UUID`` (a caller's own, passed as the config's
    ``run_id``) is kept as it is: the run is guarded, and ``inspect`` finds it by that id."""
    handler = LoopGuardCallbackHandler()
    root: Any = "job-42"
    handler.on_chain_start(None, {}, run_id=root, parent_run_id=None, metadata={})

    def step() -> None:
        node, tool = uuid4(), uuid4()
        handler.on_chain_start(None, {}, run_id=node, parent_run_id=root, metadata={})
        handler.on_tool_start(
            {"name": "read_file"}, "{}", run_id=tool, parent_run_id=node, inputs={"p": "a"}
        )
        handler.on_tool_end("the same text", run_id=tool, parent_run_id=node)
        handler.on_chain_end({}, run_id=node)

    with caplog.at_level(logging.DEBUG):
        step()
        step()
        with pytest.raises(LoopDetected):
            step()  # the third identical call
    inspection = handler.inspect(root)
    assert inspection is not None
    assert inspection.run_id == "job-42"
    assert inspection.tripped is not None
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]


def test_late_events_of_a_forgotten_run_start_no_new_detector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A forgotten run's late events are ignored, never taken for a new top-level run."""
    handler = LoopGuardCallbackHandler(LoopGuardConfig(), max_runs=1)
    old = Run(handler)
    node = old.node()
    monkeypatch.setattr(
        "langchain_loop_guard._integrations._engine.IDLE_S", 0.0
    )  # the old run is idle now
    Run(handler)  # the old run is idle: forgotten to make room
    tool = uuid4()
    handler.on_tool_start({"name": "read_file"}, "{}", run_id=tool, parent_run_id=node, inputs={})
    old.tool("read_file", {"path": "a.py"})
    assert len(handler._engine.runs) == 1
    assert node.int not in handler._tree.roots
    assert old.id.int not in handler._tree.roots


def test_max_runs_must_be_a_positive_whole_number() -> None:
    """A bad capacity is a configuration error naming the argument."""
    for bad in (0, -1, 2.5, "16", True):
        with pytest.raises(LoopGuardConfigError) as info:
            LoopGuardCallbackHandler(LoopGuardConfig(), max_runs=bad)  # type: ignore[arg-type]
        assert info.value.key == "max_runs"


def test_thread_whose_invocations_never_end_keeps_a_bounded_number_of_roots() -> None:
    """10,000 invocations of one thread that never report their end: roots stay bounded."""
    handler = guard(scope="thread")
    runs = [Run(handler, thread_id="t1") for _ in range(10_000)]
    assert len(handler._tree.roots) <= 64
    assert len(handler._engine.runs["t1"].invocations) <= 64
    assert _loop(runs[0])  # the oldest invocation's events still count toward the thread


def test_run_tree_is_bounded() -> None:
    """Nested runs that never end cannot grow the run tree beyond its bound."""
    handler = guard()
    handler.max_open_runs = 10  # type: ignore[misc]
    run = Run(handler)
    for _ in range(50):
        handler.on_chain_start(None, {}, run_id=uuid4(), parent_run_id=run.id)
    assert len(handler._tree.open) == 10
    run.end()
    assert (handler._engine.runs, handler._tree.roots, handler._tree.open) == ({}, {}, {})


@pytest.mark.parametrize("ended_since", [0, 3_000])
def test_late_events_of_a_stopped_run_are_stopped_too(ended_since: int) -> None:
    """A tool starting on a worker thread after its run was stopped and ended does not run,
    even after 3,000 other runs ended since (the last 2048 to 4096 ended runs are
    remembered, and no more); a run whose steps never reported their end frees them too."""
    handler = guard()
    run = Run(handler)
    node = run.node()
    for _ in range(2):
        run.tool("read_file", {"path": "a.py"})
    with pytest.raises(LoopDetected) as caught:
        run.tool("read_file", {"path": "a.py"})
    handler.on_chain_error(caught.value, run_id=node, parent_run_id=run.id)
    run.end(caught.value)
    other = Run(handler)
    for _ in range(ended_since):
        other.node()  # never reports its end
        handler.on_chain_end({}, run_id=other.node(), parent_run_id=other.id)
    with pytest.raises(LoopDetected) as late:
        handler.on_tool_start({"name": "other"}, "", run_id=uuid4(), parent_run_id=node, inputs={})
    assert late.value.run_id == str(run.id)
    tree = handler._tree
    assert len(tree.closed) + len(tree.closed_before) <= 4096
    other.end()
    assert (handler._engine.runs, tree.roots, tree.open) == ({}, {}, {})


def test_late_events_of_an_ended_run_are_ignored() -> None:
    """An event under a run that ended normally is not taken for a new run."""
    handler = guard()
    run = Run(handler)
    node = run.node()
    handler.on_chain_end({}, run_id=node, parent_run_id=run.id)
    run.end()
    for _ in range(3):
        handler.on_tool_start({"name": "t"}, "", run_id=uuid4(), parent_run_id=node, inputs={})
    assert (handler._engine.runs, handler._tree.roots, handler._tree.open) == ({}, {}, {})


# --- scope="thread" -------------------------------------------------------------------------------


def test_thread_scope_keeps_state_across_invocations_of_a_thread() -> None:
    """State is keyed by thread_id and survives the end of each invocation (its tree does not)."""
    handler = guard(scope="thread")
    for _ in range(2):
        run = Run(handler, thread_id="chat-1")
        run.tool("read_file", {"path": "a.py"})
        run.end()
    assert handler.status().active_runs == 1
    assert (handler._tree.roots, handler._tree.open) == ({}, {})
    run = Run(handler, thread_id="chat-1")
    with pytest.raises(LoopDetected) as caught:
        run.tool("read_file", {"path": "a.py"})
    assert caught.value.run_id == "chat-1"


def test_thread_scope_without_a_thread_id_is_per_run() -> None:
    """With no thread_id in the metadata, scope="thread" falls back to the top-level run."""
    handler = guard(scope="thread")
    for _ in range(3):
        run = Run(handler)
        run.tool("read_file", {"path": "a.py"})
        run.end()
    assert handler.status().active_runs == 0


# --- runtime commands -----------------------------------------------------------------------------


def test_inspect_shows_the_most_recent_run_without_content() -> None:
    """inspect() picks the most recent run, also after it ended; it holds no arguments or output."""
    handler = guard()
    older, newer = Run(handler), Run(handler)
    older.tool("read_file", {"path": "secret-path.txt"}, "secret output")
    newer.tool("search", {"q": "secret query"}, "secret results")
    newer.end()
    inspection = handler.inspect()
    assert inspection is not None
    assert (inspection.run_id, [c.tool for c in inspection.recent]) == (str(newer.id), ["search"])
    assert "secret" not in f"{inspection}{inspection._repr_html_()}"
    older_inspection = handler.inspect(str(older.id))
    assert older_inspection is not None
    assert older_inspection.calls == 1


def test_inspect_of_an_unknown_run_is_none() -> None:
    """Nothing to inspect before any run, or for an id never seen."""
    handler = guard()
    assert handler.inspect() is None
    Run(handler)
    assert handler.inspect("no-such-run") is None


def test_reset_clears_counters_and_the_trip() -> None:
    """After reset the same run may make the same calls again."""
    handler = guard()
    run = Run(handler)
    run.tool("read_file", {"path": "a.py"})
    run.tool("read_file", {"path": "a.py"})
    with pytest.raises(LoopDetected):
        run.tool("read_file", {"path": "a.py"})
    assert handler.reset() is True
    run.model("trying again")
    run.tool("read_file", {"path": "a.py"})
    run.tool("read_file", {"path": "a.py"})


def test_reset_of_a_thread_lets_the_conversation_go_on() -> None:
    """With scope="thread" a stopped thread stays stopped until reset(thread_id)."""
    handler = guard(scope="thread")
    run = Run(handler, thread_id="chat-1")
    for _ in range(2):
        run.tool("read_file", {"path": "a.py"})
    with pytest.raises(LoopDetected) as caught:
        run.tool("read_file", {"path": "a.py"})
    run.end(caught.value)
    with pytest.raises(LoopDetected):
        Run(handler, thread_id="chat-1").model("hello again")
    assert handler.reset("chat-1") is True
    Run(handler, thread_id="chat-1").model("hello again")


def test_reset_of_no_run_in_progress_is_false() -> None:
    """Nothing is reset for an ended or unknown run."""
    handler = guard()
    run = Run(handler)
    run.end()
    assert (handler.reset(), handler.reset("nope")) == (False, False)


def test_set_mode_applies_to_runs_in_progress() -> None:
    """Switching to observe mid-run lets the loop go on; switching off forgets every run."""
    handler = guard()
    run = Run(handler)
    run.tool("read_file", {"path": "a.py"})
    run.tool("read_file", {"path": "a.py"})
    handler.set_mode("observe")
    run.tool("read_file", {"path": "a.py"})
    assert handler.status().observed == 1
    handler.set_mode("off")
    assert handler.status().active_runs == 0
    run.tool("read_file", {"path": "a.py"})
    assert handler.status().active_runs == 0


@pytest.mark.parametrize("kind", ["handler", "middleware", "node"])
def test_set_mode_and_configure_accept_any_case_as_the_configuration_does(kind: str) -> None:
    """``set_mode("ON")`` is ``set_mode("on")`` on every guard, as ``mode: ON`` is in a file;
    an unknown mode is still refused, naming the allowed ones, and changes nothing."""
    from langchain_loop_guard import LoopGuardMiddleware, LoopGuardNode

    guards = {
        "handler": LoopGuardCallbackHandler,
        "middleware": LoopGuardMiddleware,
        "node": LoopGuardNode,
    }
    subject = guards[kind](LoopGuardConfig())
    for given, expected in (("OBSERVE", "observe"), ("Off", "off"), ("ON", "on")):
        subject.set_mode(given)
        assert subject.status().mode == expected
        assert subject.config.mode == expected
    assert subject.config.sources["mode"] == "runtime"
    subject.configure(mode="Observe")
    assert subject.status().mode == "observe"
    for bad in ("loud", "", None):
        with pytest.raises(LoopGuardConfigError, match="on, observe, off") as caught:
            subject.set_mode(bad)  # type: ignore[arg-type]
        assert (caught.value.key, caught.value.value) == ("mode", bad)
    assert subject.status().mode == "observe"


def test_off_mode_tracks_nothing() -> None:
    """Off: no run is tracked and nothing raises."""
    handler = guard(mode="off")
    run = Run(handler)
    for _ in range(5):
        run.tool("read_file", {"path": "a.py"})
        run.model("same")
    assert handler.status().active_runs == 0
    assert handler.inspect() is None


# --- reporting ------------------------------------------------------------------------------------


def test_observe_mode_logs_and_counts_without_raising(caplog: pytest.LogCaptureFixture) -> None:
    """Observe: the loop is logged once with names and counts, and counted in status."""
    handler = guard(mode="observe")
    run = Run(handler)
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        for _ in range(5):
            run.tool("read_file", {"path": "secret.txt"}, "secret output")
    (record,) = caplog.records
    assert record.levelno == logging.INFO  # expected behaviour in observe mode: no WARNING
    assert "observe" in record.getMessage()
    assert "read_file" in record.getMessage()
    assert "secret" not in record.getMessage()
    assert (handler.status().observed, handler.status().stops) == (1, 0)


def test_soft_warning_is_logged_and_counted_without_raising(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Passing max_turns warns once and the run goes on."""
    handler = guard(max_turns=2)
    run = Run(handler)
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        for n in range(5):
            run.model(f"step {n}")
    assert [r.loop_guard_signal for r in caplog.records] == ["turn_count"]  # type: ignore[attr-defined]
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert handler.status().warnings == 1


def test_elapsed_time_uses_the_injected_clock(caplog: pytest.LogCaptureFixture) -> None:
    """The clock passed to the handler drives the elapsed-time warning."""
    now = [0.0]
    handler = LoopGuardCallbackHandler(LoopGuardConfig(turn_timeout_ms=1000), clock=lambda: now[0])
    run = Run(handler)
    run.model("first")
    now[0] = 2.0
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        run.model("second")
    assert [r.loop_guard_signal for r in caplog.records] == ["elapsed_time"]  # type: ignore[attr-defined]


def test_a_warning_due_when_a_new_message_releases_a_thread_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """scope="thread": the elapsed-time warning falls due at the next human message; the
    release of the thread gives it, and the handler reports it (it was given and lost)."""
    now = [0.0]
    config = LoopGuardConfig(scope="thread", turn_timeout_ms=1000)
    handler = LoopGuardCallbackHandler(config, clock=lambda: now[0])
    first = HumanMessage("Where is my order?", id="h1")
    run = Run(handler, thread_id="chat-1")
    answer = run.model("It ships tomorrow.", seen=[first])
    run.end()
    now[0] = 2.0
    later = Run(handler, thread_id="chat-1")
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        later.model("You are welcome.", seen=[first, answer, HumanMessage("Thanks!", id="h2")])
    later.end()
    assert [r.loop_guard_signal for r in caplog.records] == ["elapsed_time"]  # type: ignore[attr-defined]
    assert handler.status().warnings == 1


def test_verdict_listeners_run_outside_the_lock() -> None:
    """A listener may use the guard from another thread while a verdict is reported."""
    handler = guard(mode="observe")
    finished: list[bool] = []

    def listener(run_id: str, verdict: Any) -> None:
        worker = threading.Thread(target=handler.status)
        worker.start()
        worker.join(timeout=5)
        finished.append(not worker.is_alive())

    handler.add_verdict_listener(listener)
    run = Run(handler)
    for _ in range(3):
        run.tool("read_file", {"path": "a.py"})
    assert finished == [True]


# --- failing open ---------------------------------------------------------------------------------


def test_handler_failure_fails_open_with_one_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the handler's own code is logged once and never raises."""
    import langchain_loop_guard._integrations._model_answer as module

    def broken(response: Any) -> Any:
        msg = "handler bug"
        raise RuntimeError(msg)

    monkeypatch.setattr(module, "_answer", broken)
    run = Run(guard())
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        for _ in range(3):
            run.model("same answer")
    (record,) = caplog.records
    assert "internal error in on_llm_end" in record.getMessage()
    assert "handler bug" not in record.getMessage()


@pytest.mark.parametrize(
    "event",
    [
        lambda h, p: h.on_tool_start(None, "", run_id=uuid4(), parent_run_id=p),
        lambda h, p: h.on_tool_start({"name": None}, "x", run_id=uuid4(), parent_run_id=p),
        lambda h, p: h.on_chat_model_start(None, [], run_id=uuid4(), parent_run_id=p),
        lambda h, p: h.on_llm_end(LLMResult(generations=[[]]), run_id=uuid4(), parent_run_id=p),
        lambda h, p: h.on_tool_end(object(), run_id=uuid4(), parent_run_id=p),
        lambda h, p: h.on_tool_error(KeyboardInterrupt(), run_id=uuid4(), parent_run_id=p),
        lambda h, p: h.on_llm_error(RuntimeError(), run_id=uuid4(), parent_run_id=uuid4()),
        lambda h, p: h.on_chain_start(None, None, run_id=uuid4(), parent_run_id=p, metadata=None),
    ],
    ids=[
        "no serialized",
        "no tool name",
        "no messages",
        "no generations",
        "odd output",
        "odd error",
        "error of a model never started",
        "no metadata",
    ],
)
def test_odd_callback_arguments_never_raise(event: Any) -> None:
    """Arguments LangChain would not send are taken in stride."""
    handler = guard()
    run = Run(handler)
    event(handler, run.id)
    run.end()
    assert handler.status().active_runs == 0
