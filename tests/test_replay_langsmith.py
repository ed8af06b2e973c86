"""``loop-guard replay`` of LangSmith data as users have it: every export shape, built from the
runs the real ``langsmith`` SDK sends when it traces real ``create_agent`` runs, replays to the
live guard's verdicts (same signal, tool and tool call).

The SDK traces into a loopback stand-in for the LangSmith service (an ``http.server`` thread on
127.0.0.1 that records the batches it receives); nothing leaves the machine.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import ToolException
from langsmith import schemas
from langsmith.types.run import Run as RunV2
from langsmith_service import LangSmithService, forget_environment

from langchain_loop_guard import LoopDetected, LoopGuardConfig, Signal
from langchain_loop_guard._cli._main import EXIT_OK, EXIT_USAGE, main
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._replay._replay import ReplayVerdict, replay
from langchain_loop_guard._replay._trace import TraceFormatError
from langchain_loop_guard.testing import ScriptedChatModel, call, calls, scripted_tool

DEFAULTS = LoopGuardConfig()

# --- the agents -------------------------------------------------------------------------------


def _repeat() -> tuple[list[Any], list[Any]]:
    return [call("search", {"q": "weather"})] * 6 + ["done"], [scripted_tool("search", "sunny")]


def _cycle() -> tuple[list[Any], list[Any]]:
    steps = [call("open", {"p": "a"}), call("close", {"p": "a"})] * 4
    return [*steps, "done"], [scripted_tool("open", "opened"), scripted_tool("close", "closed")]


def _error() -> tuple[list[Any], list[Any]]:
    steps = [call("fetch", {"url": f"https://x/{i}"}) for i in range(5)]
    return [*steps, "done"], [scripted_tool("fetch", ToolException("HTTP 503 at line 12"))]


def _unknown_tool() -> tuple[list[Any], list[Any]]:
    steps = [call("teleport", {"to": f"mars-{i}"}) for i in range(5)]
    return [*steps, "done"], [scripted_tool("search")]


def _parallel() -> tuple[list[Any], list[Any]]:
    steps = [
        calls(("lookup", {"k": "a"}, f"a{i}"), ("lookup", {"k": "a"}, f"b{i}")) for i in range(3)
    ]
    return [*steps, "done"], [scripted_tool("lookup", "value")]


def _productive() -> tuple[list[Any], list[Any]]:
    steps = [call("read", {"path": f"src/{i}.py"}) for i in range(8)]
    return [*steps, "all files read"], [scripted_tool("read", lambda a: f"text of {a['path']}")]


AGENTS: dict[str, Callable[[], tuple[list[Any], list[Any]]]] = {
    "repeat": _repeat,
    "cycle": _cycle,
    "repeated-error": _error,
    "unknown-tool": _unknown_tool,
    "parallel": _parallel,
    "productive": _productive,
}


def _traced_runs(
    monkeypatch: pytest.MonkeyPatch,
    record: Path,
    agents: dict[str, Callable[[], tuple[list[Any], list[Any]]]] = AGENTS,
    settings: LoopGuardConfig = DEFAULTS,
) -> dict[str, Any]:
    """Run every agent once, traced by the SDK into the stand-in and guarded live (mode on).

    Returns the SDK's runs (post and patch merged, by id), the live verdicts per agent and
    how many tool bodies ran per agent.
    """
    service = LangSmithService(monkeypatch)
    live: dict[str, Any] = {}
    ran: dict[str, int] = {}
    try:
        for name, agent in agents.items():
            script, tools = agent()
            trace = record / f"{name}.jsonl"
            handler = LoopGuardCallbackHandler(settings, record_to=trace)
            graph = create_agent(ScriptedChatModel(script=script), tools)
            config: dict[str, Any] = {"callbacks": [handler], "metadata": {"thread_id": name}}
            raised = None
            try:
                graph.invoke({"messages": [("user", "go")]}, config)
            except LoopDetected as exc:
                raised = exc.signal
            live[name] = (raised, replay(trace, settings).runs[0].live)
            ran[name] = sum(tool.calls for tool in tools)
    finally:
        service.close()
    runs = service.runs()
    return {"runs": list(runs.values()), "live": live, "ran": ran}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The SDK's runs of every agent, and the live guard's verdicts."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        traced = _traced_runs(monkeypatch, tmp_path_factory.mktemp("record"))
    forget_environment()  # the next user builds a client for its own environment
    return traced


# --- the export shapes, from the SDK's objects --------------------------------------------------


def _sdk_runs(traced: dict[str, Any]) -> list[schemas.Run]:
    return [schemas.Run(**run) for run in traced["runs"]]


def _list_runs(traced: dict[str, Any]) -> list[dict[str, Any]]:
    """What ``Client.list_runs()`` returns, dumped as users dump it."""
    return [json.loads(run.model_dump_json()) for run in _sdk_runs(traced)]


def _v2(traced: dict[str, Any]) -> list[dict[str, Any]]:
    """What ``client.runs.query()`` returns (SmithDB v2 runs), dumped."""
    out = []
    for run in _list_runs(traced):
        ancestors = [part[-36:] for part in str(run["dotted_order"]).split(".")[:-1]]
        metadata = (run.get("extra") or {}).get("metadata") or {}
        failed = run.get("error") is not None
        v2 = RunV2(
            id=run["id"],
            trace_id=run["trace_id"],
            parent_run_ids=ancestors,
            dotted_order=run["dotted_order"],
            name=run["name"],
            run_type=run["run_type"].upper(),
            status="ERROR" if failed else "SUCCESS" if run.get("end_time") else "PENDING",
            start_time=run["start_time"],
            end_time=run.get("end_time"),
            error=run.get("error"),
            inputs=run.get("inputs"),
            outputs=run.get("outputs"),
            extra=run.get("extra"),
            metadata=metadata,
            thread_id=metadata.get("thread_id"),
        )
        out.append(v2.model_dump(mode="json", exclude_none=True))
    return out


def _cli(traced: dict[str, Any], *, io: bool = True) -> list[dict[str, Any]]:
    """The ``langsmith`` CLI's export: ``run_id`` for ``id``; inputs/outputs with --include-io."""
    out = []
    for run in _list_runs(traced):
        row = {"run_id": run.pop("id"), **run}
        if not io:
            row.pop("inputs", None)
            row.pop("outputs", None)
        out.append(row)
    return out


def _tree(traced: dict[str, Any]) -> list[dict[str, Any]]:
    """``read_run(load_child_runs=True)`` of each trace: roots with nested ``child_runs``."""
    runs = _list_runs(traced)
    children: dict[str | None, list[dict[str, Any]]] = {}
    for run in sorted(runs, key=lambda r: r["dotted_order"]):
        children.setdefault(run.get("parent_run_id"), []).append(run)
    for run in runs:
        run["child_runs"] = children.get(run["id"], [])
    return children[None]


def _jsonl(rows: list[Any]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


SHAPES: dict[str, Callable[[dict[str, Any], Path], Path]] = {}


def _shape(name: str) -> Callable[[Callable[[dict[str, Any], Path], Path]], Any]:
    def register(build: Callable[[dict[str, Any], Path], Path]) -> Any:
        SHAPES[name] = build
        return build

    return register


@_shape("list_runs JSONL")
def _(traced: dict[str, Any], tmp: Path) -> Path:
    path = tmp / "runs.jsonl"
    path.write_text(_jsonl(_list_runs(traced)), encoding="utf-8")
    return path


@_shape("list_runs JSON array, pretty, BOM")
def _(traced: dict[str, Any], tmp: Path) -> Path:
    path = tmp / "runs.json"
    path.write_text("\ufeff" + json.dumps(_list_runs(traced), indent=2), encoding="utf-8")
    return path


@_shape("list_runs gzip, no file extension")
def _(traced: dict[str, Any], tmp: Path) -> Path:
    path = tmp / "export"
    path.write_bytes(gzip.compress(_jsonl(_list_runs(traced)).encode()))
    return path


@_shape("runs.query() v2 JSONL")
def _(traced: dict[str, Any], tmp: Path) -> Path:
    path = tmp / "v2.jsonl"
    path.write_text(_jsonl(_v2(traced)), encoding="utf-8")
    return path


@_shape("CLI export --include-io, one file per trace")
def _(traced: dict[str, Any], tmp: Path) -> Path:
    folder = tmp / "cli"
    folder.mkdir()
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in _cli(traced):
        by_trace.setdefault(row["trace_id"], []).append(row)
    for trace, rows in by_trace.items():
        (folder / f"{trace}.jsonl").write_text(_jsonl(rows), encoding="utf-8")
    return folder


@_shape("run trees, pretty-printed objects")
def _(traced: dict[str, Any], tmp: Path) -> Path:
    path = tmp / "trees.json"
    path.write_text("\n".join(json.dumps(t, indent=2) for t in _tree(traced)), encoding="utf-8")
    return path


@_shape("raw API pages")
def _(traced: dict[str, Any], tmp: Path) -> Path:
    runs = _list_runs(traced)
    half = len(runs) // 2
    pages = [{"runs": runs[:half], "cursors": {"next": "x"}}, {"runs": runs[half:], "cursors": {}}]
    path = tmp / "pages.json"
    path.write_text("\n".join(json.dumps(page, indent=1) for page in pages), encoding="utf-8")
    return path


@_shape("two overlapping exports joined with cat")
def _(traced: dict[str, Any], tmp: Path) -> Path:
    runs = _list_runs(traced)
    path = tmp / "joined.jsonl"
    path.write_text(_jsonl(runs[: len(runs) * 2 // 3]) + _jsonl(runs[len(runs) // 3 :]))
    return path


def _trace_of(traced: dict[str, Any]) -> dict[str, str]:
    """Agent name -> its trace id (the thread id in the metadata names the agent)."""
    return {
        run["extra"]["metadata"]["thread_id"]: str(run["trace_id"])
        for run in traced["runs"]
        if run.get("parent_run_id") is None
    }


def _where(stop: ReplayVerdict | None) -> tuple[Signal, str | None, int] | None:
    return None if stop is None else (stop.signal, stop.tool, stop.call)


def _answers(traced: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The model runs of ``name``'s trace, in order."""
    trace = _trace_of(traced)[name]
    runs = [r for r in _list_runs(traced) if r["trace_id"] == trace and r["run_type"] == "llm"]
    return sorted(runs, key=lambda r: r["dotted_order"])


def test_the_sdk_traced_every_agent_and_the_live_guard_stopped_the_loops(
    traced: dict[str, Any],
) -> None:
    """The fixture is what it claims: a trace per agent, a live stop for each loop only, and
    every model answer in the export, finished, with its calls (the guard raises no stop
    before the tracer has recorded the answer)."""
    assert sorted(_trace_of(traced)) == sorted(AGENTS)
    for name, (raised, live) in traced["live"].items():
        assert (raised is None) == (name == "productive"), name
        assert (live is None) == (name == "productive"), name
        if live is not None:
            assert live.signal is raised
        for answer in _answers(traced, name):
            assert answer.get("end_time") is not None, name
            assert answer["outputs"]["generations"][0][0]["message"], name


def test_the_stopped_parallel_answer_is_in_the_export_and_none_of_its_calls_ran(
    traced: dict[str, Any],
) -> None:
    """The parallel agent is stopped at its second answer, as a whole: the export holds that
    answer with both calls, and no tool run (no tool body ran for either)."""
    answers = _answers(traced, "parallel")
    assert [_calls_in(answer) for answer in answers] == [["a0", "b0"], ["a1", "b1"]]
    trace = _trace_of(traced)["parallel"]
    tools = [r for r in _list_runs(traced) if r["trace_id"] == trace and r["run_type"] == "tool"]
    assert len(tools) == traced["ran"]["parallel"] == 2  # the first answer's calls only


@pytest.mark.parametrize("shape", SHAPES)
def test_each_langsmith_shape_replays_to_the_live_verdicts(
    shape: str, traced: dict[str, Any], tmp_path: Path
) -> None:
    """Same signal, tool and tool call as the live guard, for every agent (stopped, parallel,
    productive), whatever shape the export has."""
    report = replay(SHAPES[shape](traced, tmp_path), DEFAULTS)
    assert report.format == "langsmith"
    by_trace = {run.run: run for run in report.runs}
    traces = _trace_of(traced)
    assert set(by_trace) == set(traces.values())
    for name in traced["live"]:
        assert _where(by_trace[traces[name]].stop) == _where(traced["live"][name][1]), name


def test_a_stopped_answer_exported_before_its_model_run_finished_replays_the_same(
    traced: dict[str, Any], tmp_path: Path
) -> None:
    """An export whose stopped answer has its outputs but no end time (an export taken while
    the run was being written) stops where the live guard did too."""
    name = "parallel"
    stopped = _answers(traced, name)[-1]
    rows = [r for r in _list_runs(traced) if r["trace_id"] == stopped["trace_id"]]
    for row in rows:
        if row["id"] == stopped["id"]:
            row["end_time"] = None
    path = tmp_path / "unfinished.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    live = _where(traced["live"][name][1])
    assert live is not None
    assert _where(replay(path, DEFAULTS).runs[0].stop) == live


SAYS_THE_SAME = LoopGuardConfig(progress_aware=False)  # a message with calls counts too


def _says_the_same() -> tuple[list[Any], list[Any]]:
    steps = [
        calls(("read", {"path": f"{n}.py"}), content="Let me look at the file again.")
        for n in range(5)
    ]
    return [*steps, "done"], [scripted_tool("read", lambda a: f"text of {a['path']}")]


def test_a_run_stopped_at_a_repeated_answer_replays_to_the_live_stop(tmp_path: Path) -> None:
    """The answer-level stop is raised after the tracer recorded the answer too: the SDK's
    export holds the third identical answer, and replays to the live stop."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        traced = _traced_runs(
            monkeypatch, tmp_path, {"says-the-same": _says_the_same}, SAYS_THE_SAME
        )
    forget_environment()
    raised, live = traced["live"]["says-the-same"]
    assert raised is Signal.REPEATED_ASSISTANT_RESPONSE
    assert traced["ran"]["says-the-same"] == 2  # the third answer's call never ran
    answers = _answers(traced, "says-the-same")
    assert len(answers) == 3
    assert all(answer.get("end_time") and answer["outputs"] for answer in answers)
    path = SHAPES["list_runs JSONL"](traced, tmp_path)
    assert _where(replay(path, SAYS_THE_SAME).runs[0].stop) == _where(live)


def test_thread_scope_replays_the_traces_of_one_thread_as_one_run(
    traced: dict[str, Any], tmp_path: Path
) -> None:
    """With scope thread, runs are grouped by the ``thread_id`` of their metadata."""
    path = SHAPES["list_runs JSONL"](traced, tmp_path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:  # every agent's trace in one conversation
        row["extra"]["metadata"]["thread_id"] = "one-conversation"
    path.write_text(_jsonl(rows))
    assert len(replay(path, DEFAULTS).runs) == len(AGENTS)
    threaded = replay(path, DEFAULTS.merged(scope="thread"))
    assert [run.run for run in threaded.runs] == ["thread:one-conversation"]
    assert threaded.runs[0].calls == sum(run.calls for run in replay(path, DEFAULTS).runs)


def test_an_export_without_inputs_and_outputs_is_refused_not_falsely_stopped(
    traced: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's default export (no --include-io): one line naming what is missing and how to
    export it, exit 2."""
    path = tmp_path / "no-io.jsonl"
    path.write_text(_jsonl(_cli(traced, io=False)), encoding="utf-8")
    with pytest.raises(TraceFormatError, match="no inputs or outputs") as caught:
        replay(path, DEFAULTS)
    assert caught.value.line >= 1
    assert main(["replay", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--include-io" in err[0]
    assert '"inputs", "outputs"' in err[0]


@pytest.mark.parametrize("nulls", [False, True], ids=["ids", "ids-and-nulls"])
def test_a_runs_query_export_without_selects_is_refused_saying_what_to_select(
    traced: dict[str, Any], tmp_path: Path, nulls: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """``runs.query()`` without ``selects`` returns ids only (the other fields absent or
    null): one line saying so and which fields to select, exit 2."""
    rows = []
    for run in _v2(traced):
        row = {"id": run["id"]}
        if nulls:
            row |= dict.fromkeys(("run_type", "name", "start_time", "inputs"))
        rows.append(row)
    path = tmp_path / "ids.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    with pytest.raises(TraceFormatError, match="nothing but its id") as caught:
        replay(path, DEFAULTS)
    assert caught.value.line == 1
    assert main(["replay", str(path)]) == EXIT_USAGE
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert 'selects=["ID", "TRACE_ID"' in err
    assert '"INPUTS", "OUTPUTS"' in err


def test_hidden_model_inputs_are_refused(traced: dict[str, Any], tmp_path: Path) -> None:
    """``LANGSMITH_HIDE_INPUTS`` leaves empty objects: refused too."""
    rows = _list_runs(traced)
    for row in rows:
        row["inputs"] = {}
    path = tmp_path / "hidden.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    with pytest.raises(TraceFormatError, match="no inputs or outputs"):
        replay(path, DEFAULTS)


def test_a_stopped_trace_with_the_blocked_tool_run_errored_or_unfinished_stops_the_same(
    traced: dict[str, Any], tmp_path: Path
) -> None:
    """However the blocked call shows in the export (absent, errored with LoopDetected, never
    finished), the replay stops at it."""
    rows = [r for r in _list_runs(traced) if r["extra"].get("metadata", {}).get("thread_id")]
    rows = [r for r in rows if r["extra"]["metadata"]["thread_id"] == "repeat"]
    live = traced["live"]["repeat"][1]
    blocked_call = next(
        r for r in rows if r["run_type"] == "llm" and r["outputs"] and _calls_in(r) == ["call_3"]
    )
    for variant in ("errored", "unfinished"):
        tool = {
            "id": f"blocked-{variant}",
            "trace_id": blocked_call["trace_id"],
            "parent_run_id": blocked_call["parent_run_id"],
            "name": "search",
            "run_type": "tool",
            "start_time": blocked_call["end_time"],
            "end_time": blocked_call["end_time"] if variant == "errored" else None,
            "error": "LoopDetected('repeated_tool_call')" if variant == "errored" else None,
            "inputs": {"q": "weather"},
            "outputs": None,
            "extra": {"tool_call_id": "call_3"},
        }
        path = tmp_path / f"{variant}.jsonl"
        path.write_text(_jsonl([*rows, tool]), encoding="utf-8")
        assert _where(replay(path, DEFAULTS).runs[0].stop) == _where(live), variant


def _calls_in(run: dict[str, Any]) -> list[str]:
    message = run["outputs"]["generations"][0][0]["message"]["kwargs"]
    return [c["id"] for c in message.get("tool_calls", [])]


def test_parquet_bulk_export_replays_like_jsonl(traced: dict[str, Any], tmp_path: Path) -> None:
    """A Parquet bulk export (inputs and outputs as JSON text) gives the same stops."""
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    rows = _list_runs(traced)
    columns = ("id", "trace_id", "parent_run_id", "dotted_order", "name", "run_type")
    table = {key: [row.get(key) for row in rows] for key in columns}
    for key in ("start_time", "end_time", "error"):
        table[key] = [row.get(key) for row in rows]
    for key in ("inputs", "outputs", "extra"):
        table[key] = [json.dumps(row.get(key)) for row in rows]
    path = tmp_path / "bulk.parquet"
    pq.write_table(pa.table(table), path)
    jsonl = SHAPES["list_runs JSONL"](traced, tmp_path)
    expected = [_where(run.stop) for run in replay(jsonl, DEFAULTS).runs]
    assert [_where(run.stop) for run in replay(path, DEFAULTS).runs] == expected


def test_parquet_without_pyarrow_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without pyarrow, a Parquet file is one line saying what to install, exit 2."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    path = tmp_path / "bulk.parquet"
    path.write_bytes(b"PAR1" + b"\0" * 32 + b"PAR1")
    assert main(["replay", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "pyarrow" in err[0]
    assert "langchain-loop-guard[parquet]" in err[0]


def test_cli_replays_a_directory_of_cli_exports(
    traced: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``loop-guard replay DIR`` reads every per-trace file of the directory."""
    folder = SHAPES["CLI export --include-io, one file per trace"](traced, tmp_path)
    assert main(["replay", str(folder), "--no-progress"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"{len(AGENTS)} runs" in out.splitlines()[0]
    stops = sum(traced["live"][name][1] is not None for name in AGENTS)
    assert f"summary: {len(AGENTS)} runs, {stops} would stop" in out
