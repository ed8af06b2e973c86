"""What a loop cost, read from LangChain: each model answer's ``usage_metadata`` (or its
provider's token counts), into the run's :class:`~._core._cost.CostLedger` (the engine puts
the cost on a stop: :func:`~._core._stop_cost.with_cost`)."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import LLMResult

from langchain_loop_guard._core._cost import CostLedger, Usage, usage_of
from langchain_loop_guard._core._public import safe_tool_name
from langchain_loop_guard._integrations._guard_messages import MESSAGE_NAME, is_human_input

if TYPE_CHECKING:
    from langchain_loop_guard._core._config import LoopGuardConfig
    from langchain_loop_guard._core._scope import ScopeChoice

__all__ = ["answer_usage", "ledger_of", "message_usage", "state_ledger"]


def message_usage(message: BaseMessage | None) -> Usage | None:
    """The tokens a model answer reported: its ``usage_metadata``, else the token counts its
    provider put in ``response_metadata`` (``token_usage`` or ``usage``); ``None`` if none."""
    if not isinstance(message, AIMessage):
        return None
    usage = usage_of(message.usage_metadata)
    if usage is not None:
        return usage
    metadata = message.response_metadata or {}
    return usage_of(metadata.get("token_usage")) or usage_of(metadata.get("usage"))


def answer_usage(response: LLMResult) -> Usage | None:
    """The tokens of a model call as its callback ends: the first generation's message, else
    the result's ``llm_output`` (a text-completion model's ``token_usage``)."""
    if response.generations and response.generations[0]:
        usage = message_usage(getattr(response.generations[0][0], "message", None))
        if usage is not None:
            return usage
    output: Any = response.llm_output or {}
    return usage_of(output.get("token_usage")) if isinstance(output, dict) else None


def ledger_of(
    messages: Sequence[BaseMessage], ignore: Container[str], *, per_thread: bool
) -> CostLedger:
    """The ledger of a graph guard's run, read from the thread's messages: its model answers
    (since the last human message in run scope; the whole thread, as far as the ledger keeps,
    in a conversation). The guard's own messages are none of them."""
    start = 0
    if not per_thread:
        for index in range(len(messages) - 1, -1, -1):
            if is_human_input(messages[index]):
                start = index + 1
                break
    ledger = CostLedger()
    for message in messages[start:]:
        if not isinstance(message, AIMessage) or message.name == MESSAGE_NAME:
            continue
        names = [safe_tool_name(call["name"]) for call in message.tool_calls]
        names += [
            safe_tool_name(bad.get("name") or "unknown_tool") for bad in message.invalid_tool_calls
        ]
        tools = [name for name in names if name not in ignore]
        reply = not names and bool(message.text.strip())
        ledger.answer(message_usage(message), tools, reply=reply)
    return ledger


def state_ledger(
    state: object, config: LoopGuardConfig, scope: ScopeChoice | None
) -> CostLedger | None:
    """The ledger of a graph state's ``messages`` (``None`` for anything else: a thread id
    names no messages)."""
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if not isinstance(messages, list):
        return None
    per_thread = scope is not None and scope.per_thread
    return ledger_of(messages, config.ignore_tools, per_thread=per_thread)
