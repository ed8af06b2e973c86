"""A model's answer as the callback handler reads it when the model's callback ends: its text's
key and sketch, the calls it names, its message id and the tokens it reported. Read outside the
handler's lock: other runs' callbacks need not wait for it. Its calls are digested only when
the answer is judged by them (several calls); otherwise each call's tool digests it when it
starts, once."""

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

__all__ = ["ModelAnswer", "Named", "call_digests"]

Named = tuple[str, str, "str | None", frozenset[int]]
"""A call an answer names, digested: tool name, signature, call id, argument words."""


def call_digests(name: str, args: object, acts: bool | None) -> tuple[str, frozenset[int]]:
    """A call's signature and the words of its arguments (``acts``: whether the tool acts)."""
    return call_signature(name, args), arg_tokens(args, name, acts)


class ModelAnswer:
    """One model answer, read: what :meth:`CallbackRun.answer` and the run's cost ledger take of
    it."""

    __slots__ = (
        "_calls",
        "_limits",
        "_named",
        "answer_id",
        "hints",
        "key",
        "names",
        "sketch",
        "talk",
        "usage",
    )

    def __init__(
        self,
        response: LLMResult,
        limits: Limits,
        hinted: Callable[[str], bool | None],
        *,
        compared: bool,
        keyed: bool = True,
    ) -> None:
        """Read ``response``; ``hinted`` says what a tool's annotations said of it, and
        ``compared`` whether the reply rules compare this run's replies (SPEC §12 R9, §13 R14):
        a reply's word sketch is made only then. Without ``keyed`` (progress awareness on,
        nothing recorded), an answer with calls and a message id gets no key: the detector
        leaves it to its calls, and the id tells it in the model's next input."""
        text, tool_calls, answer_id = _answer(response)
        self.answer_id = answer_id
        self.usage: Usage | None = answer_usage(response)
        unkeyed = not keyed and tool_calls and answer_id is not None
        self.key = None if unkeyed else assistant_key(text)
        sketched = self.key is not None and not tool_calls and compared
        self.sketch = reply_sketch(text) if sketched else None
        self.talk = self.key is not None and not tool_calls and talk(text)  # SPEC §14 N19
        self.names = [(name, call_id) for name, _, call_id in tool_calls]
        """Each call's tool name and id, in order."""
        self.hints = [hinted(name) for name, _, _ in tool_calls]
        """What each call's tool said of itself: whether it acts (``None``: nothing)."""
        self._calls = tool_calls  # the arguments: read by ``named``, never kept (SPEC §8)
        self._limits = limits
        self._named: list[Named] | None = None

    def named(self) -> list[Named]:
        """The calls, digested (once, when first asked)."""
        if self._named is None:
            acts, named = self._limits.acts, []
            for (name, args, call_id), hint in zip(self._calls, self.hints, strict=True):
                signature, tokens = call_digests(name, args, acts(name, hint))
                named.append((name, signature, call_id, tokens))
            self._named = named
        return self._named

    @property
    def tokens(self) -> int | None:
        """The answer's total tokens (``None``: the model reported no usage)."""
        return None if self.usage is None else self.usage.total

    def spent(self, ledger: CostLedger, ignored: Container[str]) -> None:
        """Count the answer in its run's ``ledger``: its usage, the tools it calls
        (``ignored`` ones left out), and whether it is a reply."""
        tools = [name for name, _ in self.names if name not in ignored]
        ledger.answer(self.usage, tools, reply=self.key is not None and not self.names)


def _answer(response: LLMResult) -> tuple[str, list[tuple[str, Any, str | None]], str | None]:
    """The text, tool calls ``(name, args, id)`` and message id of a model's first generation."""
    if not response.generations or not response.generations[0]:
        return "", [], None
    generation = response.generations[0][0]
    message = getattr(generation, "message", None)
    if not isinstance(message, AIMessage):
        return generation.text, [], None
    calls = [(safe_tool_name(tc["name"]), tc["args"], tc.get("id")) for tc in message.tool_calls]
    content = message.content
    # ``.text`` copies a text into a str subclass of its own: taken only for content blocks
    text = content if type(content) is str else message.text
    return text, calls, message.id
