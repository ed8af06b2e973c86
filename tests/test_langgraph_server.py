"""End to end under LangGraph's own API server: ``langgraph dev`` on loopback serves an agent
with the middleware, driven by ``langgraph_sdk`` as a client application would."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import convert_to_messages

from langchain_loop_guard.testing import assert_valid_history

HOST = "127.0.0.1"
START_TIMEOUT = 90.0  # seconds for the server to answer /ok
CLIENT_TIMEOUT = 30.0  # seconds for any one request

GRAPH_MODULE = textwrap.dedent(
    '''
    """A looping agent guarded by the middleware, offline (a scripted model)."""

    from langchain.agents import create_agent
    from langchain_loop_guard import LoopGuardConfig, LoopGuardMiddleware
    from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool


    def _step(messages):
        humans = [m for m in messages if m.type == "human" and m.name != "loop_guard"]
        return "Fine." if len(humans) >= 2 else call("read_file", {"path": "a.txt"})


    graph = create_agent(
        ScriptedChatModel(script=[_step], then="repeat"),
        [scripted_tool("read_file", "contents")],
        middleware=[LoopGuardMiddleware(LoopGuardConfig(nudges=0))],
    )
    '''
)


CHAT_MODULE = textwrap.dedent(
    '''
    """A support chat bot guarded by the middleware with no scope set (SPEC §13 C1): the
    server's threads have a checkpointer and a thread_id, so each thread is a conversation."""

    from langchain.agents import create_agent
    from langchain_loop_guard import LoopGuardMiddleware
    from langchain_loop_guard.testing import ScriptedChatModel

    SORRY = "Sorry, I didn't understand that, could you rephrase?"

    graph = create_agent(
        ScriptedChatModel(script=[lambda messages: SORRY], then="repeat"),
        [],
        middleware=[LoopGuardMiddleware()],
    )
    '''
)


def _cannot_run(reason: str) -> None:
    """Fail on CI (the test must run there), skip elsewhere with the reason."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _answers(url: str) -> bool:
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(f"{url}/ok", timeout=2) as response,
    ):
        return bool(response.status == 200)
    return False


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A ``langgraph dev`` server for a graph module written to ``tmp_path``; its URL."""
    cli = Path(sys.executable).with_name("langgraph")
    try:
        import langgraph_api  # noqa: F401 - only to tell a missing extra apart
        import langgraph_sdk  # noqa: F401
    except ImportError as exc:
        _cannot_run(f"langgraph-cli[inmem] and langgraph-sdk are needed: {exc}")
    if not cli.exists():
        _cannot_run(f"no langgraph command next to {sys.executable}")
    (tmp_path / "agent_graph.py").write_text(GRAPH_MODULE, encoding="utf-8")
    (tmp_path / "chat_graph.py").write_text(CHAT_MODULE, encoding="utf-8")
    graphs = {"agent": "./agent_graph.py:graph", "chat": "./chat_graph.py:graph"}
    config = {"dependencies": ["."], "graphs": graphs}
    (tmp_path / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    port = _free_port()
    url = f"http://{HOST}:{port}"
    env = {
        **os.environ,
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "XDG_CONFIG_HOME": str(tmp_path),  # no loop-guard config file of this machine applies
    }
    log = (tmp_path / "server.log").open("wb")
    command = [str(cli), "dev", "--host", HOST, "--port", str(port), "--no-browser", "--no-reload"]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(url):
            if process.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = (tmp_path / "server.log").read_text(errors="replace")[-2000:]
                _cannot_run(f"langgraph dev did not start on {url}:\n{tail}")
            time.sleep(0.25)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
        log.close()


def _messages(values: Any) -> list[Any]:
    return convert_to_messages(values["messages"])


@pytest.mark.slow
def test_stop_under_the_api_server_errors_the_run_and_the_thread_goes_on(server: str) -> None:
    """A stopped run ends in "error" with LoopDetected; the thread's next message succeeds."""
    from langgraph_sdk import get_sync_client

    with get_sync_client(url=server, timeout=CLIENT_TIMEOUT) as client:
        thread = client.threads.create()["thread_id"]
        start = {"messages": [{"role": "user", "content": "Read a.txt."}]}
        run = client.runs.create(thread, "agent", input=start)
        joined = client.runs.join(thread, run["run_id"])
        assert isinstance(joined, dict)
        assert joined["__error__"]["error"] == "LoopDetected"
        assert "read_file" in joined["__error__"]["message"]
        assert client.runs.get(thread, run["run_id"])["status"] == "error"

        saved = _messages(client.threads.get_state(thread)["values"])
        assert_valid_history(saved)
        assert saved[-1].additional_kwargs.get("loop_guard") == "not_executed"

        later = {"messages": [{"role": "user", "content": "Something else, please."}]}
        values = client.runs.wait(thread, "agent", input=later)
        assert isinstance(values, dict)
        messages = _messages(values)
        assert messages[-1].content == "Fine."
        assert_valid_history(messages)
        assert client.threads.get(thread)["status"] == "idle"


@pytest.mark.slow
def test_a_chat_on_a_server_thread_is_guarded_as_a_conversation_with_no_setting(
    server: str,
) -> None:
    """C1 under the API server: its threads have a checkpointer, so the same reply after each
    message is stopped by the 3rd with no ``scope`` set; the next message is answered and,
    the loop going on, stopped at once (C2); a run without a thread starts afresh each time."""
    from langgraph_sdk import get_sync_client

    sorry = "Sorry, I didn't understand that, could you rephrase?"
    with get_sync_client(url=server, timeout=CLIENT_TIMEOUT) as client:
        thread = client.threads.create()["thread_id"]
        outcomes = []
        for text in ("Where is my parcel?", "Order 1234.", "Order 1234, Monday.", "Hello?"):
            message = {"messages": [{"role": "user", "content": text}]}
            run = client.runs.create(thread, "chat", input=message)
            joined = client.runs.join(thread, run["run_id"])
            assert isinstance(joined, dict)
            error = joined.get("__error__")
            outcomes.append("answered" if error is None else error["error"])
        assert outcomes == ["answered", "answered", "LoopDetected", "LoopDetected"]
        saved = _messages(client.threads.get_state(thread)["values"])
        assert [m.type for m in saved] == ["human", "ai"] * 4
        assert saved[-1].content == sorry  # the reply that tripped the stop, for the app to show
        assert_valid_history(saved)

        for text in ("Where is my parcel?", "Order 1234.", "Order 1234, Monday."):
            message = {"messages": [{"role": "user", "content": text}]}
            values = client.runs.wait(None, "chat", input=message)
            assert isinstance(values, dict)
            assert _messages(values)[-1].content == sorry
