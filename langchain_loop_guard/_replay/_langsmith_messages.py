"""What a LangSmith run's inputs and outputs say, in the shapes LangChain serializes messages
(``{"lc": 1, "kwargs": ...}``, ``{"type": ..., "data": ...}``, plain dicts): a model run's
answer and tool calls, the tool results its input holds, a tool run's call id and outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_loop_guard._core._canonical import call_signature
from langchain_loop_guard._core._cost import usage_of
from langchain_loop_guard._core._masks import VolatileFields
from langchain_loop_guard._core._signature import Outcome, arg_tokens, outcome
from langchain_loop_guard._replay._trace import cut_tool_name

__all__ = [
    "Volatile",
    "model_answer",
    "model_tokens",
    "tool_answers",
    "tool_call_id",
    "tool_outcome",
]

Volatile = Callable[[str], VolatileFields]
"""The fields whose values are noise in a tool's results (``volatile_fields``), by tool."""


def tool_call_id(obj: Mapping[str, Any], outputs: Mapping[str, Any]) -> str | None:
    extra = obj.get("extra")
    call_id = extra.get("tool_call_id") if isinstance(extra, Mapping) else None
    if not isinstance(call_id, str) or not call_id:
        message = _message(outputs.get("output"))
        call_id = message.get("tool_call_id") if message is not None else None
    return call_id if isinstance(call_id, str) and call_id else None


def tool_outcome(
    name: str, output: object, tokens: frozenset[int] | None, volatile: Volatile | None = None
) -> tuple[bool, Outcome]:
    """A tool's output (or tool message): whether it failed (an error ``ToolMessage``) and its
    digests, ``volatile``'s fields of the tool masked."""
    fields = None if volatile is None else volatile(name)
    message = _message(output)
    if message is None:
        return False, outcome(output, tool=name, tokens=tokens, volatile=fields)
    content = _text(message.get("content"))
    if message.get("status") == "error":
        return True, outcome(error=content, tool=name, tokens=tokens, volatile=fields)
    return False, outcome(content, tool=name, tokens=tokens, volatile=fields)


def tool_answers(
    inputs: Mapping[str, Any], volatile: Volatile | None = None
) -> dict[str, tuple[bool, Outcome]]:
    """The tool messages after the last model message of a model's input, by call id."""
    answers: dict[str, tuple[bool, Outcome]] = {}
    messages = inputs.get("messages")
    if not isinstance(messages, list):
        return answers
    flat = [m for batch in messages for m in (batch if isinstance(batch, list) else [batch])]
    names: dict[str, str] = {}
    tokens: dict[str, frozenset[int]] = {}
    for candidate in flat:
        message = _message(candidate)
        if message is None:
            continue
        kind = _kind(candidate, message)
        if kind == "ai":
            answers.clear()
            for call in _tool_calls(message):
                if isinstance(call.get("id"), str):
                    names[call["id"]] = _tool_name(call.get("name"))
                    tokens[call["id"]] = arg_tokens(call.get("args"), names[call["id"]])
        elif kind == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                continue
            name = names.get(call_id) or _tool_name(message.get("name"))
            answers[call_id] = tool_outcome(name, candidate, tokens.get(call_id), volatile)
    return answers


def model_answer(outputs: Mapping[str, Any]) -> tuple[str, list[tuple[str, str, str]]]:
    """The text and the tool calls ``(id, name, signature)`` of a model run's answer (from
    ``generations[0][0].message``, ``generations[0][0].text`` or ``output``)."""
    message: Mapping[str, Any] | None = None
    text: object = ""
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0]
        if isinstance(first, list):
            first = first[0] if first else {}
        if isinstance(first, Mapping):
            message = _message(first.get("message"))
            text = first.get("text", "")
    elif "output" in outputs:
        message = _message(outputs["output"])
    if message is None:
        return _text(text), []
    calls: list[tuple[str, str, str]] = []
    for index, call in enumerate(_tool_calls(message)):
        call_id = str(call.get("id") or f"#{index}")
        name = _tool_name(call.get("name"))
        calls.append((call_id, name, call_signature(name, call.get("args"))))
    return _text(message.get("content")), calls


def model_tokens(run: Mapping[str, Any], outputs: Mapping[str, Any]) -> int | None:
    """The tokens a model run reported: its answer's ``usage_metadata``, else the result's
    ``llm_output`` token usage, else the run's own ``total_tokens`` (LangSmith's count)."""
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0]
        if isinstance(first, list):
            first = first[0] if first else {}
        message = _message(first.get("message")) if isinstance(first, Mapping) else None
        usage = usage_of(message.get("usage_metadata")) if message is not None else None
        if usage is not None:
            return usage.total
    llm_output = outputs.get("llm_output")
    if isinstance(llm_output, Mapping):
        usage = usage_of(llm_output.get("token_usage")) or usage_of(llm_output.get("usage"))
        if usage is not None:
            return usage.total
    usage = usage_of(run)
    return None if usage is None else usage.total


def _tool_name(name: object) -> str:
    """The tool a model's call names, cut as the live guard cuts it."""
    return cut_tool_name(str(name or "unknown_tool"))


def _tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message's tool calls: LangChain's ``tool_calls``, else OpenAI's ``additional_kwargs``."""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        return [call for call in calls if isinstance(call, Mapping)]
    extra = message.get("additional_kwargs")
    raw = extra.get("tool_calls") if isinstance(extra, Mapping) else None
    if not isinstance(raw, list):
        return []
    parsed: list[Mapping[str, Any]] = []
    for call in raw:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        arguments = function.get("arguments")
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except (ValueError, RecursionError):
            args = arguments  # malformed arguments still make a call (it fails)
        parsed.append({"id": call.get("id"), "name": function.get("name"), "args": args})
    return parsed


def _message(value: object) -> Mapping[str, Any] | None:
    """The fields of a serialized message: ``{"lc": 1, "kwargs": {...}}``, ``{"type": ...,
    "data": {...}}`` or a plain dict with ``content``; ``None`` for anything else."""
    if not isinstance(value, Mapping):
        return None
    for key in ("kwargs", "data"):
        inner = value.get(key)
        if isinstance(inner, Mapping) and "content" in inner:
            return inner
    return value if "content" in value else None


def _kind(value: Mapping[str, Any], fields: Mapping[str, Any]) -> str:
    """A serialized message's type: ``"tool"``, ``"ai"``… (from ``type`` or the class name)."""
    ids = value.get("id")
    if isinstance(ids, list) and ids and value.get("lc"):
        return {"ToolMessage": "tool", "AIMessage": "ai"}.get(str(ids[-1]), str(ids[-1]))
    return str(fields.get("type") or value.get("type") or "")


def _text(content: object) -> str:
    """A message's text: a string, or the text blocks of a content list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return ""
