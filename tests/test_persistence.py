"""Guard state in the graph: it survives interrupts, resumes and process restarts, stays
bounded, and holds digests and counters only."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import postgres_uri
from guard_scenarios import KINDS, Kind, harness, model_of, scripted
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._integrations._node import LoopGuardNode
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard.testing import ScriptedChatModel, call, calls, scripted_tool

TESTS = Path(__file__).resolve().parent


def _reader_agent(kind: Kind, scope: str, **options: Any) -> Any:
    model = model_of(lambda n: call("read_file", {"path": "a.txt"}, id=f"call-{n}"))
    return harness(
        kind, model, [scripted_tool("read_file", "contents")], config={"scope": scope}, **options
    )


@pytest.mark.parametrize("scope", ["run", "thread"])
@pytest.mark.parametrize("kind", KINDS)
def test_loop_spread_across_interrupts_and_resumes_is_caught(kind: Kind, scope: str) -> None:
    """A breakpoint before every tool step: the third identical call is still caught.

    A resume is the same run, whatever the scope: the guard's state is in the checkpoint.
    """
    agent = _reader_agent(kind, scope, interrupt_before=["tools"])
    agent.invoke()
    agent.resume()
    with pytest.raises(LoopDetected) as caught:
        agent.resume()
    assert caught.value.signal is Signal.REPEATED_TOOL_CALL
    assert agent.tool("read_file").calls == 2


@pytest.mark.parametrize("kind", KINDS)
def test_thread_scope_lets_one_successful_call_per_user_message_run(kind: Kind) -> None:
    """scope="thread": one identical successful call per user message is an ordinary
    conversation (SPEC §11 N3), however many messages come."""
    replies = [
        "The file has one line, x.",
        "It was last changed by the build script.",
        "Nobody else reads it, as far as I can see.",
        "You can safely rename it to b.txt.",
        "I would keep a backup before deleting it.",
    ]
    steps = iter(
        [step for reply in replies for step in (call("read_file", {"path": "a.txt"}), reply)]
    )
    model = ScriptedChatModel(script=[lambda messages: next(steps)], then="repeat")
    agent = harness(kind, model, [scripted_tool("read_file", "x")], config={"scope": "thread"})
    for text, reply in zip(("first", "second", "third", "fourth", "fifth"), replies, strict=True):
        assert agent.invoke(text=text)["messages"][-1].content == reply


@pytest.mark.parametrize("kind", KINDS)
def test_thread_scope_catches_the_same_failure_across_user_messages(kind: Kind) -> None:
    """scope="thread": the same failing call after every user message, answered the same way
    each time, is a conversation going round: the 3rd identical answer stops it (SPEC §12 R9;
    the failures alone no longer do across user messages, §13 N13)."""
    steps = iter([call("update", {"x": 1}), "It failed."] * 4)
    model = ScriptedChatModel(script=[lambda messages: next(steps)], then="repeat")
    locked = scripted_tool("update", ToolException("Error: record is locked"))
    agent = harness(kind, model, [locked], config={"scope": "thread"})
    agent.invoke(text="first")
    agent.invoke(text="second")
    with pytest.raises(LoopDetected) as stop:
        agent.invoke(text="third")
    assert stop.value.signal is Signal.REPEATED_ASSISTANT_RESPONSE
    assert locked.calls == 3


@pytest.mark.parametrize("kind", KINDS)
def test_run_scope_starts_each_invocation_afresh(kind: Kind) -> None:
    """scope="run": the same spread-out calls are three separate runs, none a loop."""
    steps = iter([call("read_file", {"path": "a.txt"}), "Read it."] * 3)
    model = ScriptedChatModel(script=[lambda messages: next(steps)], then="repeat")
    agent = harness(kind, model, [scripted_tool("read_file", "x")], config={"scope": "run"})
    for text in ("first", "second", "third"):
        assert agent.invoke(text=text)["messages"][-1].content == "Read it."


@pytest.mark.parametrize("kind", KINDS)
def test_new_message_releases_a_stopped_thread_and_keeps_its_history(kind: Kind) -> None:
    """scope="thread": after a stop the user may go on; a loop that goes on is stopped again."""
    agent = _reader_agent(kind, "thread", on_stop="end")
    agent.invoke()
    assert agent.tool("read_file").calls == 2
    result = agent.invoke(text="please try again")
    assert agent.tool("read_file").calls > 2  # released: the call ran again
    assert result["messages"][-1].name == "loop_guard"


# --- two processes, one checkpointer ------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, sys
    from guard_scenarios import KINDS, harness, model_of
    from langchain_loop_guard._integrations._stop import LoopDetected
    from langchain_loop_guard.testing import call, scripted_tool

    backend, target, thread, phase = sys.argv[1:5]
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver as Saver
    else:
        from langgraph.checkpoint.postgres import PostgresSaver as Saver

    reports = {}
    with Saver.from_conn_string(target) as saver:
        if backend == "postgres":
            saver.setup()
        for kind in KINDS:
            tool = scripted_tool("read_file", "contents")
            model = model_of(lambda n: call("read_file", {"path": "a.txt"}, id=f"{phase}-{n}"))
            agent = harness(
                kind, model, [tool], checkpointer=saver, interrupt_before=["tools"],
                config={"scope": "thread"},
            )
            agent.thread = f"{thread}-{kind}"
            report = reports[kind] = {}
            try:
                if phase == "start":
                    agent.invoke()
                agent.resume()
            except LoopDetected as stop:
                report["signal"] = stop.signal.value
                report["count"] = stop.count
            report["next"] = list(agent.graph.get_state(agent.config).next)
            report["tool_runs"] = tool.calls
    print(json.dumps(reports))
    """
)


def _worker(backend: str, target: str, thread: str, phase: str) -> dict[str, Any]:
    """Run one phase for both kinds of guard in a new Python process; its reports by kind."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, backend, target, thread, phase],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    reports: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return reports


def _two_processes(backend: str, target: str) -> None:
    """Process 1 makes two identical calls and exits; process 2 resumes and is stopped."""
    thread = f"loop-guard-test-{uuid.uuid4()}"
    first = _worker(backend, target, thread, "start")
    assert first == {kind: {"next": ["tools"], "tool_runs": 1} for kind in KINDS}
    second = _worker(backend, target, thread, "finish")
    for kind in KINDS:
        assert second[kind]["signal"] == Signal.REPEATED_TOOL_CALL.value, kind
        assert second[kind]["count"] == 3, kind
        assert second[kind]["tool_runs"] == 1, kind


@pytest.mark.slow
def test_loop_spread_across_two_processes_is_caught_with_sqlite(tmp_path: Path) -> None:
    """Both guards: a loop begun in one process is caught in another sharing a SQLite file."""
    _two_processes("sqlite", str(tmp_path / "checkpoints.sqlite"))


@pytest.mark.slow
@pytest.mark.postgres
def test_loop_spread_across_two_processes_is_caught_with_postgres() -> None:
    """Both guards: the same two processes, sharing a real PostgreSQL server."""
    _two_processes("postgres", postgres_uri())


# --- what the state holds -----------------------------------------------------------------------

CANARY = "canary-5f1e-do-not-store"


def _canary_step(messages: list[Any]) -> AIMessage | str:
    turn = sum(isinstance(m, AIMessage) for m in messages)
    if turn % 2:
        return calls(("deploy", {"token": CANARY, "n": turn}), content=f"Trying {CANARY}.")
    return call("read_file", {"path": f"/secret/{CANARY}"})


@pytest.mark.parametrize("on_stop", ["end", "interrupt"])
@pytest.mark.parametrize("kind", KINDS)
def test_canary_never_reaches_the_checkpointed_guard_state(
    kind: Kind, on_stop: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A secret in arguments, outputs, errors and messages is never in the guard's keys."""
    caplog.set_level(logging.DEBUG, logger="langchain_loop_guard")
    saver = InMemorySaver()
    tools = [
        scripted_tool("read_file", f"file body {CANARY}"),
        scripted_tool("deploy", ToolException(f"auth failed for {CANARY}")),
    ]
    model = scripted(_canary_step)
    agent = harness(kind, model, tools, checkpointer=saver, nudges=1, on_stop=on_stop)
    result = agent.invoke(text=f"Use the token {CANARY}.")
    if on_stop == "interrupt":
        assert CANARY not in json.dumps(result["__interrupt__"][0].value)
        agent.resume("end")
    assert any(CANARY in str(m.content) for m in agent.state()["messages"])
    serde = JsonPlusSerializer()
    stored = [
        snapshot.checkpoint["channel_values"]["loop_guard"]
        for snapshot in saver.list(agent.config)
        if "loop_guard" in snapshot.checkpoint["channel_values"]
    ]
    assert len(stored) > 3
    for value in stored:
        assert CANARY not in json.dumps(value)
        assert CANARY.encode() not in serde.dumps_typed(value)[1]
    assert CANARY not in caplog.text
    assert CANARY not in str(agent.guard.status())
    assert CANARY not in str(agent.guard.inspect(agent.thread))


def _productive_pass(guard: LoopGuardNode, state: dict[str, Any], n: int) -> None:
    answer = call("read_page", {"page": n}, id=f"c{n}").model_copy(update={"id": f"a{n}"})
    state["messages"].append(answer)
    state.update(guard(state) or {})
    state["messages"].append(ToolMessage(f"page {n}", tool_call_id=f"c{n}", name="read_page"))
    state.update(guard(state) or {})


def test_guard_state_stays_bounded_however_long_the_thread() -> None:
    """The stored state after 600 calls is the size it was after 300."""
    guard = LoopGuardNode(LoopGuardConfig())
    state: dict[str, Any] = {"messages": [HumanMessage("read every page")]}
    sizes = {}
    for n in range(600):
        _productive_pass(guard, state, n)
        if n + 1 in (300, 600):
            sizes[n + 1] = len(json.dumps(state["loop_guard"]))
    assert state["loop_guard"]["detector"]["seen"] == 600
    assert abs(sizes[600] - sizes[300]) <= 8  # the counters' and the clock's digits


def test_guard_remembers_a_bounded_number_of_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process view of threads (for status and inspect) is bounded."""
    from langchain_loop_guard._integrations import _graph_guard

    guard = LoopGuardNode(LoopGuardConfig())
    for n in range(300):
        monkeypatch.setattr(_graph_guard, "_thread_id", lambda _config, n=n: f"thread-{n}")
        guard({"messages": [HumanMessage("go"), AIMessage("done", id=f"a{n}")]})
    assert guard.status().active_runs == 256
    assert guard.inspect("thread-299") is not None
    assert guard.inspect("thread-0") is None


@pytest.mark.parametrize(
    "stored",
    [
        {"v": 99, "detector": {}},
        {"v": 1, "pending": "garbage"},
        {"v": 1, "pending": [], "detector": {"v": 1, "calls": "nope"}},
        "not a mapping",
    ],
    ids=["other version", "bad pending", "bad detector", "not a mapping"],
)
def test_unusable_stored_state_starts_afresh(stored: object) -> None:
    """A stored state the guard cannot read is replaced by a fresh one, never an error."""
    guard = LoopGuardNode(LoopGuardConfig())
    state = {
        "messages": [HumanMessage("go"), call("read", {}, id="c1")],
        "loop_guard": stored,
    }
    update = guard(state)
    assert update is not None
    assert update["loop_guard"]["pending"] == [["c1", "read"]]
    assert update["loop_guard"]["detector"]["seen"] == 1


def test_guard_failure_fails_open(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in the guard's own code lets the run go on, and is logged once."""
    from langchain_loop_guard._integrations import _graph_pass

    def broken(*args: object) -> object:
        raise KeyError("bug")

    monkeypatch.setattr(_graph_pass, "_calls_of", broken)
    script = [call("read_file", {"path": "a.txt"})] * 4 + ["done"]
    agent = harness("middleware", ScriptedChatModel(script=script), [scripted_tool("read_file")])
    assert agent.invoke()["messages"][-1].content == "done"
    assert agent.tool("read_file").calls == 4
    assert caplog.text.count("loop-guard internal error") == 1
