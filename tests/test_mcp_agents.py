"""A real MCP server behind a ``create_agent`` app, guarded by each integration (SPEC §14).

``mcp_inventory_server.py`` is served over stdio by the ``mcp`` package's ``FastMCP`` and
loaded with ``langchain-mcp-adapters`` (one server process per test, so that every run starts
from the same database). Its tools carry MCP annotations (``readOnlyHint``,
``destructiveHint``, ``idempotentHint``), which the adapters copy into each tool's
``metadata``: the guards read them there (``docs/mcp.md``) and tell the detector which tools
act. The scripted model drives one productive run (reads, ten stock counts answered alike,
deliberate failures with their own errors, parallel batches of orders and invoices) and
loops (the same read, the same failing write): the first runs to its end, the loops stop.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
from guard_scenarios import node_graph
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode

from langchain_loop_guard import (
    LoopDetected,
    LoopGuardCallbackHandler,
    LoopGuardConfig,
    LoopGuardConfigError,
    LoopGuardMiddleware,
    LoopGuardNode,
    Signal,
)
from langchain_loop_guard._core import _detector
from langchain_loop_guard._core._signature import EFFECT
from langchain_loop_guard._integrations import _model_answer
from langchain_loop_guard._integrations._tool_kinds import ToolKinds, tool_acts
from langchain_loop_guard.testing import ScriptedChatModel, assert_valid_history, call, calls

slow = pytest.mark.slow  # the tests that start an MCP server process

SERVER = Path(__file__).with_name("mcp_inventory_server.py")
Integration = Literal["handler", "middleware", "node"]
INTEGRATIONS: list[Integration] = ["handler", "middleware", "node"]

READS = ("list_products", "get_order", "search_customers")
ACTS = ("create_order", "update_stock", "send_invoice", "cancel_order")


@asynccontextmanager
async def inventory_tools() -> AsyncIterator[list[BaseTool]]:
    """The server's tools as LangChain tools, over one stdio session for the whole block."""
    client = MultiServerMCPClient(
        {"inventory": {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)]}}
    )
    async with client.session("inventory") as session:
        yield await load_mcp_tools(session)


def on_server(work: Callable[[list[BaseTool]], Any]) -> Any:
    """Run the coroutine ``work(tools)`` makes with the server's tools, then stop the server."""

    async def main() -> Any:
        async with inventory_tools() as tools:
            return await work(tools)

    return asyncio.run(main())


# --- where the annotations arrive -----------------------------------------------------------------


@slow
def test_the_adapters_copy_each_tools_annotations_into_its_metadata() -> None:
    """``load_mcp_tools`` puts every annotation field in ``BaseTool.metadata`` (``None`` for
    the fields the server left out), and nothing for a tool without annotations."""

    async def metadata(tools: list[BaseTool]) -> dict[str, Any]:
        return {tool.name: tool.metadata for tool in tools}

    found = on_server(metadata)
    assert found["get_order"] == {
        "title": None,
        "readOnlyHint": True,
        "destructiveHint": None,
        "idempotentHint": None,
        "openWorldHint": False,
    }
    assert found["update_stock"]["readOnlyHint"] is False
    assert found["update_stock"]["destructiveHint"] is True
    assert found["update_stock"]["idempotentHint"] is True
    assert found["order_summary"] is None


@slow
def test_tool_acts_reads_the_annotations_of_each_mcp_tool() -> None:
    """Read-only tools read, tools with ``readOnlyHint=False`` act, a tool without
    annotations is unknown (its name and arguments decide)."""

    async def kinds(tools: list[BaseTool]) -> dict[str, bool | None]:
        return {tool.name: tool_acts(tool) for tool in tools}

    found = on_server(kinds)
    assert {name: found[name] for name in READS} == dict.fromkeys(READS, False)
    assert {name: found[name] for name in ACTS} == dict.fromkeys(ACTS, True)
    assert found["order_summary"] is None


@pytest.mark.parametrize(
    ("metadata", "acts"),
    [
        ({"readOnlyHint": True}, False),
        ({"readOnlyHint": True, "destructiveHint": True}, False),  # read-only wins (MCP)
        ({"readOnlyHint": False}, True),
        ({"readOnlyHint": None, "destructiveHint": True}, True),
        ({"readOnlyHint": None, "destructiveHint": False, "idempotentHint": True}, None),
        ({"readOnlyHint": "yes"}, None),  # not a boolean: says nothing
        ({}, None),
        (None, None),
        ("readOnlyHint", None),
    ],
)
def test_tool_acts_of_a_metadata_mapping(metadata: object, acts: bool | None) -> None:
    """``tool_acts`` of the ``metadata`` a callback receives: only booleans speak."""
    assert tool_acts(metadata) is acts


def test_tool_kinds_learn_from_tools_or_a_tool_node_and_stay_bounded() -> None:
    """A guard's map of tool kinds learns from tools or a ``ToolNode``, skips what has no
    name (a provider's tool given as a dict), lets the last word win, and forgets the oldest
    names beyond its bound."""
    from langchain_core.tools import StructuredTool

    def tool(name: str, **hints: bool) -> BaseTool:
        return StructuredTool.from_function(
            lambda: "ok", name=name, description=name, metadata=hints or None
        )

    kinds = ToolKinds(ToolNode([tool("get_order", readOnlyHint=True), tool("plain")]))
    offered: list[Any] = [{"type": "web_search"}, tool("cancel_order", readOnlyHint=False)]
    kinds.learn(offered)
    assert (kinds.acts("get_order"), kinds.acts("cancel_order")) == (False, True)
    offered.append(tool("send_invoice", readOnlyHint=False))  # the same list, grown
    kinds.learn(offered)
    assert kinds.acts("send_invoice") is True
    assert kinds.acts("plain") is None
    assert kinds.acts("never_seen") is None
    kinds.note("get_order", True)
    assert kinds.acts("get_order") is True
    for n in range(1100):
        kinds.note(f"tool_{n}", True)
    assert kinds.acts("cancel_order") is None  # forgotten, as the oldest
    assert kinds.acts("tool_1099") is True


# --- the scripts -------------------------------------------------------------------------------

STOCK_COUNT = [
    ("SKU-1001", 38),
    ("SKU-1002", 115),
    ("SKU-1003", 5),
    ("SKU-1004", 24),
    ("SKU-1005", 17),
    ("SKU-1006", 30),
    ("SKU-1007", 11),
    ("SKU-1008", 48),
    ("SKU-1009", 9),
    ("SKU-1010", 57),
]


def productive_script() -> list[AIMessage | str]:
    """A stock count and a round of orders: reads, ten ``update_stock`` calls on different
    products each answered ``{"updated": 1}``, failures each with its own error, batches of
    parallel orders and invoices, a tool without annotations, then the report."""
    script: list[AIMessage | str] = [
        call("list_products", {"category": "coffee"}),
        call("search_customers", {"query": "Seoul"}),
        call("get_order", {"order_id": 999}),  # a wrong id: "order 999 does not exist"
        call("get_order", {"order_id": 502}),
    ]
    script += [call("update_stock", {"sku": sku, "quantity": n}) for sku, n in STOCK_COUNT]
    script += [
        call("update_stock", {"sku": "SKU-9999", "quantity": 4}),  # "unknown product SKU-9999"
        call("list_products", {"category": "equipment"}),
        calls(
            ("create_order", {"customer_id": 1, "sku": "SKU-1002", "quantity": 3}),
            ("create_order", {"customer_id": 2, "sku": "SKU-1007", "quantity": 1}),
            ("create_order", {"customer_id": 4, "sku": "SKU-1011", "quantity": 2}),
        ),
        call("create_order", {"customer_id": 3, "sku": "SKU-1003", "quantity": 50}),  # too many
        calls(*(("send_invoice", {"order_id": n}) for n in (504, 505, 506))),
        call("cancel_order", {"order_id": 503}),
        call("order_summary", {"order_id": 505}),
        "Stock counted for 10 products; 3 orders placed and invoiced; order 503 cancelled.",
    ]
    return script


PRODUCTIVE_CALLS = 25  # tool calls in the productive script
PRODUCTIVE_ERRORS = 3  # get_order 999, update_stock SKU-9999, create_order of 50


def promo_cancellations() -> list[AIMessage | str]:
    """Twelve promo orders cancelled one by one, each answered ``{"cancelled": 1,
    "order_id": <its id>}``: the answer says nothing but what the call said, and no word of
    ``cancel_order`` says it acts; only its annotations do."""
    script: list[AIMessage | str] = [call("search_customers", {"query": "example.com"})]
    script += [call("cancel_order", {"order_id": 401 + n}) for n in range(12)]
    script.append("Cancelled the 12 travel-mug promo orders.")
    return script


def same_read() -> list[AIMessage | str]:
    """The same order looked up again and again, with the same answer each time."""
    return [call("get_order", {"order_id": 503})] * 8 + ["Order 503 is pending."]


def same_failing_write() -> list[AIMessage | str]:
    """The same invalid stock count sent again and again, failing the same way each time."""
    return [call("update_stock", {"sku": "SKU-1003", "quantity": -2})] * 8 + ["Done."]


# --- the app, guarded by each integration -------------------------------------------------------


class Ran:
    """What a run of the app did: its messages, or the stop that ended it."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []
        self.stop: LoopDetected | None = None

    @property
    def results(self) -> list[ToolMessage]:
        return [m for m in self.messages if isinstance(m, ToolMessage)]


async def run_app(
    tools: list[BaseTool],
    script: list[AIMessage | str],
    integration: Integration,
    config: dict[str, Any] | None = None,
) -> Ran:
    """Run the inventory agent on ``script`` under ``integration`` on a checkpointed thread."""
    model = ScriptedChatModel(script=script)
    saver = InMemorySaver()
    loop_config = LoopGuardConfig(**(config or {}))
    run_config: dict[str, Any] = {"configurable": {"thread_id": "stock-count"}}
    if integration == "handler":
        graph = create_agent(model, tools, checkpointer=saver)
        run_config["callbacks"] = [LoopGuardCallbackHandler(loop_config)]
    elif integration == "middleware":
        graph = create_agent(
            model, tools, middleware=[LoopGuardMiddleware(loop_config)], checkpointer=saver
        )
    else:
        guard = LoopGuardNode(loop_config, known_tools=tools)
        graph = node_graph(model, tools, guard, checkpointer=saver)
    ran = Ran()
    payload = {"messages": [HumanMessage("Count the stock, then place this week's orders.")]}
    try:
        await graph.ainvoke(payload, run_config)
    except LoopDetected as stop:
        ran.stop = stop
        await stop.arepair(graph, run_config)  # the README's line after a stop
    state = await graph.aget_state(run_config)
    ran.messages = list(state.values["messages"])
    return ran


@slow
@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_a_productive_mcp_agent_runs_to_its_end(integration: Integration) -> None:
    """N14-N16 on a real MCP server: different acts answered alike (ten ``{"updated": 1}``),
    failures each with its own error, parallel batches: every call runs, and the agent
    gives its report."""
    ran = on_server(lambda tools: run_app(tools, productive_script(), integration))
    assert ran.stop is None, f"stopped: {ran.stop}"
    assert ran.messages[-1].text.startswith("Stock counted for 10 products")
    assert len(ran.results) == PRODUCTIVE_CALLS
    failed = [m for m in ran.results if m.status == "error"]
    assert len(failed) == PRODUCTIVE_ERRORS
    updated = [m for m in ran.results if m.name == "update_stock" and m.status == "success"]
    assert [m.text for m in updated] == ['{"updated": 1}'] * 10
    assert_valid_history(ran.messages)


@slow
@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_acts_only_annotations_call_acts_run_to_their_end(integration: Integration) -> None:
    """N14 where only the server's annotations tell: twelve cancellations answered with
    nothing but their own order id all run, and the agent gives its report."""
    ran = on_server(lambda tools: run_app(tools, promo_cancellations(), integration))
    assert ran.stop is None, f"stopped: {ran.stop}"
    assert ran.messages[-1].text == "Cancelled the 12 travel-mug promo orders."
    cancelled = [m for m in ran.results if m.name == "cancel_order" and m.status == "success"]
    assert len(cancelled) == 12
    assert_valid_history(ran.messages)


def failing_batch() -> list[AIMessage | str]:
    """N16: one answer sends three invoices for order ids that do not exist (each fails
    alike, ``order 60x does not exist``); the next answer looks the orders up and sends
    them right."""
    return [
        calls(*(("send_invoice", {"order_id": n}) for n in (601, 602, 603))),
        call("search_customers", {"query": "Prague"}),
        calls(*(("send_invoice", {"order_id": n}) for n in (501, 502, 503))),
        "Sent the invoices of orders 501, 502 and 503.",
    ]


@slow
@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_a_failing_batch_then_its_fix_runs_to_its_end(integration: Integration) -> None:
    """N16: the identical failures of one model answer are one failure (the model had no
    chance to react); the fix in the next answer runs, and the agent gives its report."""
    ran = on_server(lambda tools: run_app(tools, failing_batch(), integration))
    assert ran.stop is None, f"stopped: {ran.stop}"
    assert ran.messages[-1].text == "Sent the invoices of orders 501, 502 and 503."
    sent = [m for m in ran.results if m.name == "send_invoice" and m.status == "success"]
    assert len(sent) == 3


@slow
@pytest.mark.parametrize("integration", INTEGRATIONS)
@pytest.mark.parametrize(
    ("script", "tool", "answer"),
    [
        pytest.param(same_read, "get_order", '"status": "pending"', id="same-read"),
        pytest.param(
            same_failing_write, "update_stock", "stock cannot be negative", id="same-failing-write"
        ),
    ],
)
def test_a_looping_mcp_agent_is_stopped(
    script: Callable[[], list[AIMessage | str]], tool: str, answer: str, integration: Integration
) -> None:
    """The same read with the same answer, or the same write failing the same way, is
    stopped by the third identical call, which never reaches the server."""
    ran = on_server(lambda tools: run_app(tools, script(), integration))
    assert ran.stop is not None, "the loop ran to its end"
    assert ran.stop.tool == tool
    assert ran.stop.signal in (Signal.REPEATED_TOOL_CALL, Signal.REPEATED_TOOL_ERROR)
    answered_by_server = [m for m in ran.results if m.name == tool and answer in m.text]
    assert len(answered_by_server) == 2
    assert_valid_history(ran.messages)


# --- the annotations reach the detector ---------------------------------------------------------


def annotated_calls() -> list[AIMessage | str]:
    """One call of a read-only tool, an acting tool whose name does not say so, and a tool
    without annotations."""
    return [
        call("get_order", {"order_id": 503}),
        call("cancel_order", {"order_id": 503}),
        call("order_summary", {"order_id": 503}),
        "Order 503 is cancelled.",
    ]


@slow
@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_the_graph_guards_tell_the_detector_which_mcp_tools_act(
    integration: Integration, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The middleware (from the model request's tools) and the node guard (from the tools it
    is given) pass each tool's annotations to ``LoopDetector.tool_call`` as ``acts``."""
    seen: dict[str, bool | None] = {}
    tool_call = _detector.LoopDetector.tool_call

    def spied(self: Any, name: str, *args: Any, acts: bool | None = None, **kw: Any) -> Any:
        seen[name] = acts
        return tool_call(self, name, *args, acts=acts, **kw)

    monkeypatch.setattr(_detector.LoopDetector, "tool_call", spied)
    ran = on_server(lambda tools: run_app(tools, annotated_calls(), integration))
    assert ran.stop is None
    assert seen == {"get_order": False, "cancel_order": True, "order_summary": None}


@slow
@pytest.mark.parametrize(
    ("config", "acting"),
    [
        pytest.param({}, {"cancel_order"}, id="annotations"),
        pytest.param(
            {"read_only_tools": ["cancel_order"], "acting_tools": ["order_summary"]},
            {"order_summary"},
            id="the-users-word-first",
        ),
    ],
)
def test_the_handler_reads_the_annotations_from_the_tool_runs_metadata(
    config: dict[str, Any], acting: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``on_tool_start`` finds the annotations in its ``metadata``: the call of an acting
    tool whose name says nothing of it (``cancel_order``) carries the detector's mark of an
    effect, a read-only tool's does not; ``acting_tools`` and ``read_only_tools`` win."""
    effects: dict[str, bool] = {}
    arg_tokens = _model_answer.arg_tokens

    def spied(args: object, name: str = "", acts: bool | None = None) -> frozenset[int]:
        tokens = arg_tokens(args, name, acts)
        effects[name] = EFFECT in tokens
        return tokens

    monkeypatch.setattr(_model_answer, "arg_tokens", spied)
    ran = on_server(lambda tools: run_app(tools, annotated_calls(), "handler", config))
    assert ran.stop is None
    assert {name for name, effect in effects.items() if effect} == acting
    assert set(effects) == {"get_order", "cancel_order", "order_summary"}


@pytest.mark.parametrize("known_tools", ["get_order", {"get_order": True}, 3, None])
def test_the_node_guard_refuses_known_tools_that_are_no_tools(known_tools: Any) -> None:
    """``known_tools`` takes tools or a ``ToolNode``; anything else names the parameter."""
    with pytest.raises(LoopGuardConfigError) as raised:
        LoopGuardNode(known_tools=known_tools)
    assert raised.value.key == "known_tools"
