"""A model's answer as the callback handler reads it when the model's callback ends: its text's
key and sketch, the calls it names (digested), its message id and the tokens it reported. Read
outside the handler's lock: other runs' callbacks need not wait for it."""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage

from langchain_loop_guard._core._canonical import call_signature
from langchain_loop_guard._core._public import safe_tool_name
from langchain_loop_guard._core._signature import arg_tokens, assistant_key, reply_sketch, talk
from langchain_loop_guard._integrations._cost import answer_usage

if TYPE_CHECKING:
    from langchain_core.outputs import LLMResult

    from langchain_loop_guard._core._cost import CostLedger, Usage
    from langchain_loop_guard._core._limits import Limits

__all__ = ["ModelAnswer"]


class ModelAnswer:
    """One model answer, digested: what :meth:`CallbackRun.answer` and the run's cost ledger
    take of it."""

    __slots__ = ("answer_id", "key", "named", "sketch", "talk", "usage")

    def __init__(
        self,
        response: LLMResult,
        limits: Limits,
        hinted: Callable[[str], bool | None],
        *,
        compared: bool,
    ) -> None:
        """Read ``response``; ``hinted`` says what a tool's annotations said of it, and
        ``compared`` whether the reply rules compare this run's replies (SPEC §12 R9, §13 R14):
        a reply's word sketch is made only then."""
        text, tool_calls, answer_id = _answer(response)
        self.answer_id = answer_id
        self.usage: Usage | None = answer_usage(response)
        self.key = assistant_key(text)
        sketched = self.key is not None and not tool_calls and compared
        self.sketch = reply_sketch(text) if sketched else None
        self.talk = self.key is not None and not tool_calls and talk(text)  # SPEC §14 N19
        acts = limits.acts
        self.named = [
            (n, call_signature(n, args), i, arg_tokens(args, n, acts(n, hinted(n))))
            for n, args, i in tool_calls
        ]

    @property
    def tokens(self) -> int | None:
        """The answer's total tokens (``None``: the model reported no usage)."""
        return None if self.usage is None else self.usage.total

    def spent(self, ledger: CostLedger, ignored: Container[str]) -> None:
        """Count the answer in its run's ``ledger``: its usage, the tools it calls
        (``ignored`` ones left out), and whether it is a reply."""
        tools = [name for name, *_ in self.named if name not in ignored]
        ledger.answer(self.usage, tools, reply=self.key is not None and not self.named)


def _answer(response: LLMResult) -> tuple[str, list[tuple[str, Any, str | None]], str | None]:
    """The text, tool calls ``(name, args, id)`` and message id of a model's first generation."""
    if not response.generations or not response.generations[0]:
        return "", [], None
    generation = response.generations[0][0]
    message = getattr(generation, "message", None)
    if not isinstance(message, AIMessage):
        return generation.text, [], None
    calls = [(safe_tool_name(tc["name"]), tc["args"], tc.get("id")) for tc in message.tool_calls]
    return message.text, calls, message.id
