"""``with_loop_hint``: append the anti-loop hint (SPEC §7) to a system prompt, a prompt
template or a model's input; its :data:`~langchain_loop_guard._core._messages.HINT_MARKER` shows it
is there already."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, overload

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, convert_to_messages
from langchain_core.prompt_values import ChatPromptValue, PromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnableSequence
from pydantic import Field

from langchain_loop_guard._core._messages import HINT_MARKER, hint
from langchain_loop_guard._integrations._runtime import ConfigInput, GuardRuntime, resolve_config

__all__ = ["hinted_system", "with_loop_hint"]

_Out = TypeVar("_Out")
_Prompt = TypeVar("_Prompt", str, SystemMessage, ChatPromptTemplate)  # returned as given

_STEP_NAME = "loop_guard_hint"


class _HintSource:
    """Decides, each time it is asked, whether the hint is added and in which language."""

    __slots__ = ("_config", "_guard", "_locale")

    def __init__(self, guard: GuardRuntime | None, config: ConfigInput, locale: str | None):
        if guard is not None and config is not None:
            msg = "with_loop_hint takes a guard or a config, not both"
            raise TypeError(msg)
        self._guard = guard
        self._config = None if guard is not None else resolve_config(config)
        self._locale = locale

    def text(self) -> str | None:
        """The hint, or ``None`` when the guard is off or its ``prompt_hint`` is false (a
        guard's live configuration counts)."""
        config = self._guard.config if self._guard is not None else self._config
        if config is None or config.mode == "off" or not config.prompt_hint:
            return None
        return hint(self._locale or config.locale)

    def messages(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """``messages`` with the hint in the first system message (or a new one in front)."""
        text = self.text()
        return list(messages) if text is None else _with_hint(messages, text)

    def model_input(self, value: Any) -> Any:
        """A chat model's input with the hint; inputs that are not messages pass unchanged."""
        if isinstance(value, PromptValue):
            return ChatPromptValue(messages=self.messages(value.to_messages()))
        if isinstance(value, str):
            return self.messages([HumanMessage(content=value)])
        if isinstance(value, Sequence):
            return self.messages(convert_to_messages(value))
        return value

    async def amodel_input(self, value: Any) -> Any:
        """:meth:`model_input`, for async callers."""
        return self.model_input(value)


def _append(text: str, hint_text: str) -> str:
    if HINT_MARKER in text:
        return text
    return f"{text}\n\n{hint_text}" if text.strip() else hint_text


def hinted_system(message: SystemMessage, hint_text: str) -> SystemMessage:
    """A copy of ``message`` with the hint appended (``message`` itself if it has it)."""
    if HINT_MARKER in message.text:
        return message
    content = message.content
    if isinstance(content, str):
        return message.model_copy(update={"content": _append(content, hint_text)})
    blocks = [*content, {"type": "text", "text": hint_text}]
    return message.model_copy(update={"content": blocks})


def _with_hint(messages: Sequence[BaseMessage], hint_text: str) -> list[BaseMessage]:
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            return [*messages[:index], hinted_system(message, hint_text), *messages[index + 1 :]]
    return [SystemMessage(content=hint_text), *messages]


class _Live:
    """Not serializable by LangChain: the hint follows a live guard object."""

    @classmethod
    def is_lc_serializable(cls) -> bool:
        return False


class _HintedChatPromptTemplate(_Live, ChatPromptTemplate):
    """A ``ChatPromptTemplate`` whose formatted messages carry the loop hint."""

    loop_hint: _HintSource = Field(exclude=True, repr=False)

    def format_messages(self, **kwargs: Any) -> list[BaseMessage]:
        """Format the template, then add the hint to its system message."""
        return self.loop_hint.messages(super().format_messages(**kwargs))

    async def aformat_messages(self, **kwargs: Any) -> list[BaseMessage]:
        return self.loop_hint.messages(await super().aformat_messages(**kwargs))

    def __add__(self, other: Any) -> ChatPromptTemplate:
        """Combine with ``other``, keeping the hint."""
        combined = ChatPromptTemplate.__add__(self, other)
        return _hinted_template(combined, self.loop_hint)


def _hinted_template(prompt: ChatPromptTemplate, source: _HintSource) -> ChatPromptTemplate:
    if isinstance(prompt, _HintedChatPromptTemplate):
        return prompt
    values = {name: getattr(prompt, name) for name in type(prompt).model_fields}
    return _HintedChatPromptTemplate(**values, loop_hint=source)


class _HintedModel(_Live, RunnableSequence[Any, Any]):
    """``hint_step | model`` that binds like the model: ``create_agent`` calls ``bind_tools``
    and ``bind`` on the model it is given, and gets the hinted model back, bound."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        """The wrapped model's ``bind_tools(tools, **kwargs)``, still behind the hint step.

        Raises:
            AttributeError: the wrapped runnable has no ``bind_tools`` (tools were bound
                before wrapping, say).
        """
        bound = self.last.bind_tools(tools, **kwargs)  # type: ignore[attr-defined]
        return _HintedModel(first=self.first, middle=[], last=bound)

    def bind(self, **kwargs: Any) -> Runnable[Any, Any]:
        """The wrapped model bound to ``kwargs`` (not the hint step), behind the hint step."""
        return _HintedModel(first=self.first, middle=[], last=self.last.bind(**kwargs))


def _is_hinted(runnable: Runnable[Any, Any]) -> bool:
    return (
        isinstance(runnable, RunnableSequence)
        and isinstance(runnable.first, RunnableLambda)
        and runnable.first.name == _STEP_NAME
    )


@overload
def with_loop_hint(
    target: _Prompt,
    *,
    guard: GuardRuntime | None = None,
    config: ConfigInput = None,
    locale: str | None = None,
) -> _Prompt: ...


@overload
def with_loop_hint(
    target: Runnable[Any, _Out],
    *,
    guard: GuardRuntime | None = None,
    config: ConfigInput = None,
    locale: str | None = None,
) -> Runnable[Any, _Out]: ...


def with_loop_hint(
    target: str | SystemMessage | Runnable[Any, Any],
    *,
    guard: GuardRuntime | None = None,
    config: ConfigInput = None,
    locale: str | None = None,
) -> str | SystemMessage | Runnable[Any, Any]:
    """Append the anti-loop hint to a system prompt, a prompt template or a model's input.

    * a system prompt ``str`` (or ``SystemMessage``): returns it with the hint appended, e.g.
      ``create_agent(model, tools, system_prompt=with_loop_hint("You are…"))``;
    * a ``ChatPromptTemplate``: returns a template whose formatted system message ends with
      the hint (one is put first when the messages have none);
    * a chat model, or any ``Runnable`` taking messages: returns ``hint_step | target``,
      where the step appends the hint to the input's first ``SystemMessage`` (or puts one
      first) without mutating it; inputs that are not messages pass unchanged. It binds like
      the model (``bind_tools``, ``bind``), so ``create_agent(with_loop_hint(model), tools)``
      works, and so does ``with_loop_hint(model.bind_tools(tools))``.

    The user's prompt is kept and the hint added once, however often this is applied or the
    prompt rebuilt; nothing is added in mode ``"off"`` or with ``prompt_hint=False``: with a
    ``guard``, templates and runnables follow its live configuration at each call, while a
    string is decided now.

    Args:
        target: the system prompt, template or runnable.
        guard: a guard object whose mode and locale to follow.
        config: the configuration to read the mode and locale from without a guard (a config,
            a mapping of values, or ``None`` to load files and environment).
        locale: the hint's language, over the guard's or the config's.

    Raises:
        TypeError: for another kind of target, or when both ``guard`` and ``config`` are given.
    """
    source = _HintSource(guard, config, locale)
    text = source.text()
    if isinstance(target, str):
        return target if text is None else _append(target, text)
    if isinstance(target, SystemMessage):
        return target if text is None else hinted_system(target, text)
    if not isinstance(target, Runnable):
        msg = (
            "with_loop_hint takes a system prompt (str or SystemMessage), a ChatPromptTemplate "
            f"or a Runnable, not {type(target).__name__}"
        )
        raise TypeError(msg)
    if text is None and guard is None:
        return target  # off, and a config does not change: nothing to add, ever
    if isinstance(target, ChatPromptTemplate):
        return _hinted_template(target, source)
    if _is_hinted(target):
        return target
    step = RunnableLambda(source.model_input, afunc=source.amodel_input, name=_STEP_NAME)
    return _HintedModel(first=step, middle=[], last=target)
