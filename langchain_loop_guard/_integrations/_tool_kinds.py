"""Which tools act, as the tools say it themselves: MCP tool annotations (SPEC §14).

``langchain-mcp-adapters`` copies an MCP tool's annotations into the LangChain tool's
``metadata`` (``{"readOnlyHint": True, "destructiveHint": None, ...}``, every field present,
``None`` when the server left it out; ``docs/mcp.md`` says where else they arrive). The
detector takes what is read here as its ``acts`` hint, below the user's ``acting_tools`` and
``read_only_tools``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from threading import Lock
from typing import Any

from langchain_loop_guard._integrations._engine import bounded_put

__all__ = ["ToolKinds", "tool_acts"]

_MAX_TOOLS = 1024  # tool names remembered per guard


def tool_acts(tool: object) -> bool | None:
    """Whether a tool acts, from its MCP annotations: ``False`` when ``readOnlyHint`` is true
    (it only reads), ``True`` when ``readOnlyHint`` is false or ``destructiveHint`` true (it
    creates, changes, sends or deletes), ``None`` when the tool says neither.

    Args:
        tool: a LangChain tool (its ``metadata`` is read), or a metadata mapping itself (the
            ``metadata`` a callback receives). Anything else, and values that are not booleans,
            say nothing. Never raises.
    """
    if tool is None:
        return None
    metadata: Mapping[Any, Any]
    if type(tool) is dict or isinstance(tool, Mapping):  # a dict first: no ABC check
        metadata = tool
    else:
        try:
            found = getattr(tool, "metadata", None)
        except Exception:  # noqa: BLE001 - a hostile tool says nothing
            return None
        if found is None or not isinstance(found, Mapping):
            return None
        metadata = found
    try:
        read_only = metadata.get("readOnlyHint")
        if read_only is True:
            return False
        if read_only is False or metadata.get("destructiveHint") is True:
            return True
    except Exception:  # noqa: BLE001 - a hostile mapping says nothing
        return None
    return None


class ToolKinds:
    """What a guard learned of the tools it saw, by name (bounded, oldest forgotten first):
    the middleware from each model request's tools, the node guard from the tools it is given,
    the handler from each tool start, for the calls it decides before a tool starts."""

    __slots__ = ("_kinds", "_last", "_lock")

    def __init__(self, tools: Iterable[object] = ()) -> None:
        self._kinds: dict[str, bool | None] = {}
        self._lock = Lock()
        # the list learned last, and its length: ``create_agent`` gives each model request the
        # same list of tools, read once
        self._last: tuple[object, int] | None = None
        self.learn(tools)

    def learn(self, tools: Iterable[object]) -> None:
        """Read the annotations of ``tools`` (LangChain tools, or a ``ToolNode``: its tools);
        what has no name (a provider's built-in tool given as a dict) is passed over."""
        last = self._last
        if isinstance(tools, list):
            if last is not None and last[0] is tools and last[1] == len(tools):
                return
            self._last = (tools, len(tools))
        by_name = getattr(tools, "tools_by_name", None)
        if isinstance(by_name, Mapping):
            tools = by_name.values()
        for tool in tools:
            if isinstance(tool, Mapping):
                continue  # a provider's tool: no annotations
            name = getattr(tool, "name", None)
            if isinstance(name, str):
                self.note(name, tool_acts(tool))

    def note(self, name: str, acts: bool | None) -> None:
        """Remember what a tool said of itself (a tool may change between runs: the last word
        wins)."""
        if self._kinds.get(name, 0) is acts:
            return
        with self._lock:
            bounded_put(self._kinds, name, acts, _MAX_TOOLS)

    def acts(self, name: str) -> bool | None:
        """Whether ``name`` acts as its annotations said, ``None`` when unknown."""
        return self._kinds.get(name)

    def started(self, name: str, *hosts: object) -> bool | None:
        """What a tool starting says of itself in the first of ``hosts`` that says anything
        (a callback's ``metadata``, then its ``serialized``: ``docs/mcp.md``), noted."""
        hint = None
        for host in hosts:
            hint = tool_acts(host)
            if hint is not None:
                break
        self.note(name, hint)
        return hint
