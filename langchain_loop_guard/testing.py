"""Offline test helpers: a scripted tool-calling chat model and scripted tools.

None of ``langchain_core``'s fake chat models implements ``bind_tools`` (so
``create_agent`` rejects them) or streams tool calls. :class:`ScriptedChatModel` does both,
and :func:`scripted_tool` makes a tool that returns (or raises) what a script says. Our own
tests, the demo, the notebooks and your tests use the same helpers::

    from langchain.agents import create_agent
    from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

    read_file = scripted_tool("read_file", "contents of a.txt")
    model = ScriptedChatModel(script=[call("read_file", {"path": "a.txt"})] * 5 + ["done"])
    agent = create_agent(model, [read_file])
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ToolCall,
    ToolMessage,
    UsageMetadata,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import ConfigDict, Field, PrivateAttr

__all__ = [
    "InvalidHistoryError",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "ScriptedTool",
    "Step",
    "assert_valid_history",
    "call",
    "calls",
    "history_problems",
    "scripted_tool",
]

Step = AIMessage | str | Callable[[Sequence[BaseMessage]], "AIMessage | str"]
"""One model turn: a message, a text answer, or a function of the messages the model sees."""

_ANY_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


class ScriptExhaustedError(RuntimeError):
    """The scripted model (or tool) was called more often than its script has steps."""


def _exhausted(call: int, steps: int, then: str) -> str:
    if not steps:
        return f"ScriptedChatModel was called but its script is empty (then={then!r})"
    plural = "step" if steps == 1 else "steps"
    return (
        f"ScriptedChatModel was called {call} times but its script has {steps} {plural}; "
        "add steps, or pass then='repeat' or then='cycle'"
    )


def call(name: str, args: dict[str, Any] | None = None, *, id: str | None = None) -> AIMessage:
    """A model turn that calls one tool (its call id is filled in when ``None``)."""
    return calls((name, args or {}, id))


def calls(
    *tool_calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str | None],
    content: str = "",
) -> AIMessage:
    """A model turn that calls several tools at once (parallel tool calls), with ``content``."""
    built = []
    for entry in tool_calls:
        name, args = entry[0], entry[1]
        call_id = entry[2] if len(entry) > 2 else None
        built.append(ToolCall(name=name, args=args, id=call_id, type="tool_call"))
    return AIMessage(content=content, tool_calls=built)


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, Mapping):  # {"name": ...} or OpenAI's {"function": {"name": ...}}
        name = tool.get("name") or (tool.get("function") or {}).get("name")
    else:
        name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
    return name if isinstance(name, str) else None


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script, with tool calls, sync, async and streaming.

    Args:
        script: one :data:`Step` per model call. A step that is a function receives the
            messages the model is called with and returns the answer, so a script can react
            (to a loop guard's nudge, say).
        then: what happens when the script runs out: ``"error"`` raises
            :class:`ScriptExhaustedError`, ``"repeat"`` repeats the last step forever (a model
            stuck in a loop), ``"cycle"`` starts the script over.
        usage: the token usage every answer reports as its ``usage_metadata``
            (``{"input_tokens": 1200, "output_tokens": 40, "total_tokens": 1240}``), unless the
            step's message carries its own; ``None`` (the default): answers report none, as a
            model without usage reporting does. A function of the 1-based call number gives
            each call its own.

    Tool calls without an ``id`` get a unique one (``call_1``, ``call_2``, …); ``bind_tools``
    returns the model itself. See :attr:`seen` and :attr:`bound_tools` to assert on prompts.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    then: Literal["error", "repeat", "cycle"] = "error"
    usage: UsageMetadata | Callable[[int], UsageMetadata | None] | None = None

    _position: int = PrivateAttr(default=0)
    _ids: Iterator[int] = PrivateAttr(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _bound: list[str] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    @property
    def seen(self) -> list[list[BaseMessage]]:
        """The message lists the model was called with, oldest first."""
        return self._seen

    @property
    def bound_tools(self) -> list[str]:
        """Names of the tools bound with :meth:`bind_tools`."""
        return list(self._bound)

    @property
    def turns(self) -> int:
        """How many times the model was called."""
        return len(self._seen)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Record the tools' names; the script already holds the tool calls."""
        del tool_choice, kwargs
        self._bound = [name for name in map(_tool_name, tools) if name]
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._seen.append(list(messages))
            steps = len(self.script)
            if self._position >= steps:
                if not steps or self.then == "error":
                    raise ScriptExhaustedError(_exhausted(self._position + 1, steps, self.then))
                index = steps - 1 if self.then == "repeat" else self._position % steps
            else:
                index = self._position
            self._position += 1
            number = self._position
            step = self.script[index]
        answer = step(messages) if callable(step) else step
        if isinstance(answer, str):
            return self._with_usage(self._with_call_ids(AIMessage(content=answer)), number)
        # A copy: LangChain sets the id of the message it is given, and a step that is used
        # again (then="repeat", or the same message listed twice) must not share that id.
        return self._with_usage(self._with_call_ids(answer.model_copy(deep=True)), number)

    def _with_usage(self, message: AIMessage, number: int) -> AIMessage:
        usage = self.usage
        if message.usage_metadata is None and usage is not None:
            reported = usage(number) if callable(usage) else usage
            message.usage_metadata = None if reported is None else UsageMetadata(**reported)
        return message

    def _with_call_ids(self, message: AIMessage) -> AIMessage:
        if not message.tool_calls:
            return message
        with self._lock:
            message.tool_calls = [
                ToolCall(
                    name=tc["name"],
                    args=tc["args"],
                    id=tc.get("id") or f"call_{next(self._ids)}",
                    type="tool_call",
                )
                for tc in message.tool_calls
            ]
        return message

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._next(messages)
        chunk = AIMessageChunk(
            content=message.content,
            id=message.id,
            usage_metadata=message.usage_metadata,
            chunk_position="last",
            tool_call_chunks=[
                {
                    "name": tc["name"],
                    "args": json.dumps(tc["args"]),
                    "id": tc["id"],
                    "index": i,
                    "type": "tool_call_chunk",
                }
                for i, tc in enumerate(message.tool_calls)
            ],
        )
        if run_manager is not None and isinstance(message.content, str):
            run_manager.on_llm_new_token(message.content, chunk=ChatGenerationChunk(message=chunk))
        yield ChatGenerationChunk(message=chunk)


class ScriptedTool(StructuredTool):
    """A tool that returns, or raises, the next item of its script; counts its calls."""

    results: list[Any] = Field(default_factory=list)
    then: Literal["repeat", "cycle", "error"] = "repeat"

    _calls: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _arguments: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def calls(self) -> int:
        """How many times the tool body ran."""
        return self._calls

    @property
    def arguments(self) -> list[dict[str, Any]]:
        """The arguments of each call, oldest first."""
        return list(self._arguments)

    def model_post_init(self, context: Any, /) -> None:
        """Run the script as the tool's body (unless a body was given).

        The body is a plain function, not a method of the tool: a bound method's ``repr`` holds
        the tool's, so the tool's ``repr`` would contain itself without end, and LangSmith, which
        writes a traced span's inputs (the tools among them) with ``repr``, would fail to send
        the span."""
        super().model_post_init(context)
        if self.func is None:
            self.func = _script_body(self._next_result)

    def _next_result(self, arguments: dict[str, Any]) -> Any:
        with self._lock:
            index = self._calls
            self._calls += 1
            self._arguments.append(dict(arguments))
        if index >= len(self.results):
            if not self.results or self.then == "error":
                msg = (
                    f"scripted tool {self.name!r} was called {index + 1} times but has "
                    f"{len(self.results)} result(s) and then={self.then!r}"
                )
                raise ScriptExhaustedError(msg)
            index = len(self.results) - 1 if self.then == "repeat" else index % len(self.results)
        result = self.results[index]
        if callable(result) and not isinstance(result, BaseException):
            result = result(arguments)
        if isinstance(result, BaseException):
            raise result
        return result


def _script_body(next_result: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
    def run_script(**arguments: Any) -> Any:
        return next_result(arguments)

    return run_script


def scripted_tool(
    name: str,
    *results: Any,
    description: str | None = None,
    then: Literal["repeat", "cycle", "error"] = "repeat",
) -> ScriptedTool:
    """A tool named ``name`` that answers each call with the next of ``results`` (``"ok"`` without
    any), then as ``then`` says: ``"repeat"`` the last one, ``"cycle"``, or ``"error"``. A callable
    result is called with the call's arguments, and what it returns is used. An exception is raised:
    a :class:`~langchain_core.tools.ToolException` becomes an error tool message the model reads (as
    with any tool that sets ``handle_tool_error``), others propagate to the ``ToolNode``, which by
    default re-raises them. The tool accepts any arguments."""
    return ScriptedTool(
        name=name,
        handle_tool_error=True,
        description=description or f"Scripted test tool {name!r}.",
        args_schema=_ANY_ARGS,
        results=list(results) or ["ok"],
        then=then,
    )


# --- the provider-validity check ------------------------------------------------------------------


class InvalidHistoryError(AssertionError):
    """A message list a chat provider would reject; :attr:`problems` says why."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


def history_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """Why OpenAI or Anthropic would reject ``messages`` as a chat history (empty if valid): every
    tool call of a model answer (invalid ones too) must be answered by a ``ToolMessage`` with its id
    before any other message, and every ``ToolMessage`` must answer a call of the model answer right
    before it. A thread a stop left with an open call fails every later request."""
    problems: list[str] = []
    open_ids: list[str] = []
    asked: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id in open_ids:
                open_ids.remove(message.tool_call_id)
            elif message.tool_call_id in asked:
                problems.append(f"message {index} answers {message.tool_call_id!r} twice")
            else:
                problems.append(
                    f"message {index} answers {message.tool_call_id!r}, which the model answer "
                    "before it did not call"
                )
            continue
        if open_ids:
            problems.append(
                f"tool calls {', '.join(map(repr, open_ids))} are not answered before "
                f"message {index} ({type(message).__name__})"
            )
        open_ids, asked = [], set()
        if isinstance(message, AIMessage):
            ids = [str(c.get("id")) for c in [*message.tool_calls, *message.invalid_tool_calls]]
            open_ids, asked = list(ids), set(ids)
    if open_ids:
        problems.append(
            f"tool calls {', '.join(map(repr, open_ids))} are not answered at the end of the "
            "history (the next message would be rejected)"
        )
    return problems


def assert_valid_history(messages: Sequence[BaseMessage]) -> None:
    """Raise :class:`InvalidHistoryError` (an ``AssertionError``) unless a chat provider would
    accept ``messages`` (:func:`history_problems`); for example, after a stop, what the
    :class:`ScriptedChatModel` was called with last: ``assert_valid_history(model.seen[-1])``."""
    problems = history_problems(messages)
    if problems:
        raise InvalidHistoryError(problems)
