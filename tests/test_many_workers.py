"""One thread, many workers: two real Python processes alternate the turns of one LangGraph
thread over one PostgreSQL checkpointer, as the server processes of a deployment do. The
middleware and the node guard keep their state in the checkpoint and stop a conversation
going round across them as one process does; the callback handler does with a store, and
without one says that it guards its own process's share of the thread only."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import postgres_uri
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langchain_loop_guard import LoopDetected, LoopGuardCallbackHandler
from langchain_loop_guard._integrations._thread_store import NAMESPACE
from langchain_loop_guard.testing import ScriptedChatModel, scripted_tool

TESTS = Path(__file__).resolve().parent
WORKER = TESTS / "thread_worker.py"
SHARE_ONLY = "guards this process's share of the thread only"
REPLY = "Sorry, I didn't understand that. Could you rephrase it?"


class Worker:
    """A worker process (``tests/thread_worker.py``), started and ready for turns."""

    def __init__(self, integration: str, *options: str) -> None:
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), postgres_uri(), integration, *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        assert self._read() == {"ready": True}

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=60)
            raise AssertionError(self.stderr())
        answer: dict[str, Any] = json.loads(line)
        return answer

    def turn(self, thread: str, text: str) -> dict[str, Any]:
        """Serve one turn of ``thread``: the human's ``text``; the worker's answer."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"thread": thread, "text": text}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def stderr(self) -> str:
        """What the worker logged (once it has ended)."""
        assert self.process.stderr is not None
        return self.process.stderr.read()

    def close(self) -> str:
        """End the worker; what it logged."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        logged = self.stderr()
        assert self.process.returncode == 0, logged
        return logged


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """The workers a test starts (ended after it, whatever happens)."""
    started: list[Worker] = []
    yield started
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait(timeout=60)
        for stream in (worker.process.stdin, worker.process.stdout, worker.process.stderr):
            if stream is not None:
                stream.close()


def _alternate(serving: list[Worker], turns: int) -> list[str | None]:
    """``turns`` turns of one new thread, served by ``serving`` in turn; each turn's stop."""
    thread = f"many-workers-{uuid.uuid4()}"
    stops: list[str | None] = []
    for number in range(turns):
        worker = serving[number % len(serving)]
        stops.append(worker.turn(thread, f"Question number {number + 1}, worded anew.")["stopped"])
        if stops[-1] is not None:
            break
    return stops


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("integration", ["middleware", "node", "handler"])
def test_one_worker_stops_the_conversation_at_its_third_reply(
    integration: str, workers: list[Worker]
) -> None:
    """The reference: one process serves every turn; the 3rd identical reply is stopped."""
    workers.append(Worker(integration))
    assert _alternate(workers, 6) == [None, None, "repeated_assistant_response"]
    assert SHARE_ONLY not in workers[0].close()


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("integration", ["middleware", "node"])
def test_two_workers_stop_it_as_one_does(integration: str, workers: list[Worker]) -> None:
    """The guard's state is in the checkpoint: the turn that ends on the other process is
    counted, and the 3rd reply is stopped, as in one process."""
    workers += [Worker(integration), Worker(integration)]
    assert _alternate(workers, 6) == [None, None, "repeated_assistant_response"]
    assert [SHARE_ONLY in worker.close() for worker in workers] == [False, False]


@pytest.mark.slow
@pytest.mark.postgres
def test_the_handler_without_a_store_guards_its_share_and_says_so(workers: list[Worker]) -> None:
    """The handler's thread state lives in its process: across two workers the replies it
    sees are never in a row, no stop comes, and the worker that finds history it did not
    see warns once that it guards its process's share of the thread only."""
    workers += [Worker("handler"), Worker("handler")]
    assert _alternate(workers, 6) == [None] * 6
    first, second = (worker.close() for worker in workers)
    assert SHARE_ONLY not in first  # it served the thread's first turn: nothing unseen
    assert second.count(SHARE_ONLY) == 1


@pytest.mark.slow
@pytest.mark.postgres
def test_the_handler_with_a_store_stops_it_as_one_process_does(workers: list[Worker]) -> None:
    """Given a PostgreSQL-backed ``PostgresStore``, the handler keeps the thread's state there:
    the 3rd reply is stopped across two workers, and no worker warns."""
    workers += [Worker("handler", "store"), Worker("handler", "store")]
    assert _alternate(workers, 6) == [None, None, "repeated_assistant_response"]
    assert [SHARE_ONLY in worker.close() for worker in workers] == [False, False]


# --- the same in one process: two handlers standing for two workers -----------------------------


def _chat(handlers: list[LoopGuardCallbackHandler], turns: int) -> list[str | None]:
    """A chat agent on one in-memory checkpointer whose turns ``handlers`` guard in turn."""
    model = ScriptedChatModel(script=[REPLY], then="repeat")
    agent = create_agent(model, [scripted_tool("lookup", "nothing")], checkpointer=InMemorySaver())
    stops: list[str | None] = []
    for number in range(turns):
        config = {
            "configurable": {"thread_id": "chat"},
            "callbacks": [handlers[number % len(handlers)]],
        }
        try:
            agent.invoke({"messages": [("user", f"Question {number + 1}?")]}, config)
            stops.append(None)
        except LoopDetected as stop:
            stops.append(stop.signal.value)
            break
    return stops


def test_handlers_sharing_a_store_guard_the_thread_as_one() -> None:
    """Two handlers (two workers' guards) with one ``InMemoryStore``: the 3rd reply stops."""
    store = InMemoryStore()
    handlers = [LoopGuardCallbackHandler(store=store), LoopGuardCallbackHandler(store=store)]
    assert _chat(handlers, 6) == [None, None, "repeated_assistant_response"]
    item = store.get(NAMESPACE, "chat")
    assert item is not None
    assert REPLY not in json.dumps(item.value)  # digests and counters, never content


def test_handlers_without_a_store_warn_once_that_they_guard_their_share(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without a store the second handler finds answers it never saw and says so, once."""
    handlers = [LoopGuardCallbackHandler(), LoopGuardCallbackHandler()]
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        assert _chat(handlers, 6) == [None] * 6
    assert [
        r.getMessage().count(SHARE_ONLY) for r in caplog.records if SHARE_ONLY in r.getMessage()
    ] == [1]


def test_a_failing_store_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    """A store that raises is logged; the agent runs, guarded as in one process."""

    class Broken(InMemoryStore):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            raise OSError("the store is down")

    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        stops = _chat([LoopGuardCallbackHandler(store=Broken())], 6)
    assert stops == [None, None, "repeated_assistant_response"]
    assert any("thread store" in record.getMessage() for record in caplog.records)
