"""One worker of a multi-worker deployment, for ``tests/test_many_workers.py``: a long-lived
Python process that serves turns of LangGraph threads over a shared PostgreSQL checkpointer,
as one server process of a LangGraph deployment does.

    python thread_worker.py URI INTEGRATION [store]

``INTEGRATION`` is ``middleware``, ``node`` or ``handler`` (the handler given a
PostgreSQL-backed ``PostgresStore`` with ``store``). The guard and the agent are made once, at
the start. Each line on stdin is a turn, ``{"thread": ..., "text": ...}``; each answer on
stdout is one JSON line: ``{"stopped": signal or null, "reply": the last message's text}``.
The chat model answers every message the same way (a conversation going round, SPEC §13 C1).
Log records of the guard go to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from guard_scenarios import harness
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver

from langchain_loop_guard import LoopDetected, LoopGuardCallbackHandler
from langchain_loop_guard.testing import ScriptedChatModel, scripted_tool

REPLY = "Sorry, I didn't understand that. Could you rephrase it?"


def main() -> None:
    uri, integration = sys.argv[1], sys.argv[2]
    with_store = sys.argv[3:] == ["store"]
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    model = ScriptedChatModel(script=[REPLY], then="repeat")
    tools = [scripted_tool("lookup", "nothing")]
    with PostgresSaver.from_conn_string(uri) as saver:
        saver.setup()
        callbacks: list[Any] = []
        if integration == "handler":
            store_context = None
            if with_store:
                from langgraph.store.postgres import PostgresStore

                store_context = PostgresStore.from_conn_string(uri)
                store = store_context.__enter__()
                store.setup()
                guard = LoopGuardCallbackHandler(store=store)
            else:
                guard = LoopGuardCallbackHandler()
            callbacks = [guard]
            graph = create_agent(model, tools, checkpointer=saver)
        else:
            graph = harness(integration, model, tools, checkpointer=saver).graph  # type: ignore[arg-type]
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            turn = json.loads(line)
            config = {"configurable": {"thread_id": turn["thread"]}, "callbacks": callbacks}
            stopped = None
            reply = ""
            try:
                result = graph.invoke({"messages": [HumanMessage(turn["text"])]}, config)
                reply = result["messages"][-1].text
                stop = result.get("loop_guard_stop")
                stopped = stop["signal"] if stop else None
            except LoopDetected as caught:
                stopped = caught.signal.value
            print(json.dumps({"stopped": stopped, "reply": reply}), flush=True)


if __name__ == "__main__":
    main()
