"""``langchain_loop_guard.evaluators``: the loop evaluator with the real ``langsmith`` SDK,
offline, against the loopback stand-in of its API (``tests/langsmith_service.py``)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langsmith import Client, aevaluate, evaluate
from langsmith.schemas import Example
from langsmith_service import DEFAULT_PROJECT, LangSmithService

from langchain_loop_guard import LoopGuardConfig
from langchain_loop_guard.evaluators import LoopEvaluator, loop_evaluator
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

_USAGE = {"input_tokens": 900, "output_tokens": 100, "total_tokens": 1000}


def _agent(loop: bool) -> Any:
    """An agent with no guard: one that reads the same file five times, or one that reads
    five different files; its model reports 1,000 tokens a call."""
    paths = ["notes.txt"] * 5 if loop else [f"part{i}.txt" for i in range(5)]
    script = [call("search", {"q": "notes"}), *(call("read_file", {"path": p}) for p in paths)]
    model = ScriptedChatModel(script=[*script, "done"], usage=_USAGE)
    tools = [scripted_tool("read_file", "the same text"), scripted_tool("search", "hits")]
    return create_agent(model, tools)


def _target(inputs: dict[str, Any]) -> dict[str, Any]:
    result = _agent(inputs["loop"]).invoke({"messages": [("user", "Summarize the notes")]})
    return {"answer": result["messages"][-1].text}


async def _atarget(inputs: dict[str, Any]) -> dict[str, Any]:
    result = await _agent(inputs["loop"]).ainvoke({"messages": [("user", "Summarize")]})
    return {"answer": result["messages"][-1].text}


def _examples(*loops: bool) -> list[Example]:
    dataset = uuid.uuid4()
    return [
        Example(id=uuid.uuid4(), dataset_id=dataset, inputs={"loop": loop}, created_at="2026-01-01")
        for loop in loops
    ]


def _feedback_by_example(service: LangSmithService) -> dict[bool, dict[str, Any]]:
    """Each feedback entry, by whether its example's agent looped."""
    runs = service.runs()
    found: dict[bool, dict[str, Any]] = {}
    for entry in service.feedback:
        run = runs[str(entry["run_id"])]
        found[run["inputs"]["loop"]] = entry
    return found


_LOOP_VALUE = {
    "signal": "repeated_tool_call",
    "tool": "read_file",
    "event": 15,
    "tool_call": 4,
    "count": 3,
    "threshold": 3,
    # the three reads' model calls, 1,000 tokens each
    "cost": {"calls": 3, "tokens": 3000, "input_tokens": 0, "output_tokens": 0, "unmetered": 0},
    # the three model calls after the stop (two reads, the final answer)
    "spared": {"calls": 3, "tokens": 3000, "input_tokens": 0, "output_tokens": 0, "unmetered": 0},
    "remedy": ["tool_threshold_overrides"],
}


def test_evaluate_writes_one_loop_feedback_per_example(service: LangSmithService) -> None:
    """``langsmith.evaluate``: score 1 with where and why for the looping agent, 0 for the
    productive one; one feedback entry each, under the key ``loop``."""
    client = Client()
    evaluate(
        _target,
        data=_examples(True, False),
        evaluators=[loop_evaluator(LoopGuardConfig())],
        client=client,
    )
    client.flush()
    service.close()
    assert len(service.feedback) == 2
    found = _feedback_by_example(service)
    looped, fine = found[True], found[False]
    assert (looped["key"], looped["score"]) == ("loop", 1)
    assert looped["value"] == _LOOP_VALUE
    assert looped["comment"] == (
        "The guard would stop this run at tool call 4: `read_file` was called 3 times in a row "
        "with the same arguments (limit 3). If `read_file` is meant to repeat, raise its limit "
        "with `tool_threshold_overrides`. This loop had spent 3,000 tokens over 3 model calls."
    )
    assert (fine["key"], fine["score"], fine.get("value")) == ("loop", 0, None)
    assert fine["comment"] == "No loop: the guard would not stop this run."


def test_aevaluate_scores_the_same(service: LangSmithService) -> None:
    """``langsmith.aevaluate`` with an async target: the same feedback."""

    client = Client()

    async def main() -> None:
        await aevaluate(
            _atarget,
            data=_examples(True),
            evaluators=[loop_evaluator(LoopGuardConfig(), key="loops")],
            client=client,
        )

    asyncio.run(main())
    client.flush()
    service.close()
    (entry,) = service.feedback
    assert (entry["key"], entry["score"]) == ("loops", 1)
    assert entry["value"] == _LOOP_VALUE


def test_the_users_configuration_decides(service: LangSmithService) -> None:
    """Replayed with the user's configuration: a tool allowed 10 repeats is no loop."""
    config = {"tool_threshold_overrides": {"read_file": 10}}
    client = Client()
    evaluate(_target, data=_examples(True), evaluators=[loop_evaluator(config)], client=client)
    client.flush()
    service.close()
    (entry,) = service.feedback
    assert entry["score"] == 0


@pytest.mark.filterwarnings(
    "ignore::langsmith._internal._beta_decorator.LangSmithDeprecationWarning"
)
def test_a_stored_run_is_scored_from_its_trace(service: LangSmithService) -> None:
    """A root run read back from a project (no child runs): the evaluator fetches its trace
    and scores it; ``create_feedback`` stores the result, as a loop over a project's runs
    does."""
    _agent(loop=True).invoke({"messages": [("user", "Summarize the notes")]})
    _agent(loop=False).invoke({"messages": [("user", "Summarize the notes")]})
    client = Client()
    client.flush()
    from langchain_core.tracers.langchain import wait_for_all_tracers

    wait_for_all_tracers()
    evaluator = loop_evaluator(LoopGuardConfig(), client=client)
    scores = []
    for run in client.list_runs(project_name=DEFAULT_PROJECT, is_root=True):
        assert not run.child_runs
        result = evaluator.evaluate_run(run)
        client.create_feedback(
            run.id,
            key=result.key,
            score=result.score,
            value=result.value,
            comment=result.comment,
            session_id=run.session_id,
        )
        scores.append(result.score)
    client.flush()
    assert scores == [1, 0]
    assert [entry["score"] for entry in service.feedback] == [1, 0]
    assert service.feedback[0]["value"]["signal"] == "repeated_tool_call"


def test_a_trace_given_as_json_is_scored() -> None:
    """``evaluate_trace`` takes the runs of a trace as any export shape replay reads."""
    evaluator = loop_evaluator(LoopGuardConfig())
    assert isinstance(evaluator, LoopEvaluator)
    assert evaluator.feedback_keys == ["loop"]
    trace = uuid.uuid4()
    runs: list[dict[str, Any]] = []
    for turn in range(4):
        model = str(uuid.uuid4())
        answer = {"content": "", "tool_calls": [{"id": f"c{turn}", "name": "ls", "args": {}}]}
        runs.append(
            {
                "id": model,
                "trace_id": str(trace),
                "run_type": "llm",
                "name": "model",
                "start_time": f"2026-01-01T00:00:0{2 * turn}",
                "end_time": f"2026-01-01T00:00:0{2 * turn}",
                "inputs": {"messages": []},
                "outputs": {"generations": [[{"message": answer}]]},
            }
        )
        runs.append(
            {
                "id": str(uuid.uuid4()),
                "trace_id": str(trace),
                "run_type": "tool",
                "name": "ls",
                "start_time": f"2026-01-01T00:00:0{2 * turn + 1}",
                "end_time": f"2026-01-01T00:00:0{2 * turn + 1}",
                "inputs": {"input": ""},
                "outputs": {"output": "a b c"},
                "extra": {"metadata": {}},
            }
        )
    result = evaluator.evaluate_trace(runs)
    assert result.score == 1
    assert isinstance(result.value, dict)
    assert result.value["cost"] == {
        "calls": 3,
        "tokens": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "unmetered": 3,
    }
    assert result.comment is not None
    assert result.comment.endswith("(the model reports no token usage).")


@pytest.mark.parametrize(
    ("run", "outputs", "tokens"),
    [
        ({}, {"generations": [[{"message": {"content": "", "usage_metadata": _USAGE}}]]}, 1000),
        (
            {},
            {
                "generations": [
                    [
                        {
                            "message": {
                                "lc": 1,
                                "kwargs": {"content": "", "usage_metadata": _USAGE},
                            }
                        }
                    ]
                ]
            },
            1000,
        ),
        ({}, {"llm_output": {"token_usage": {"prompt_tokens": 7, "completion_tokens": 3}}}, 10),
        ({"total_tokens": 42}, {"generations": [[{"text": "hi"}]]}, 42),
        ({}, {"generations": [[{"text": "hi"}]]}, None),
    ],
)
def test_a_model_runs_tokens_are_read_from_where_langsmith_keeps_them(
    run: dict[str, Any], outputs: dict[str, Any], tokens: int | None
) -> None:
    """The answer's ``usage_metadata``, the result's ``llm_output``, the run's own count."""
    from langchain_loop_guard._replay._langsmith_messages import model_tokens

    assert model_tokens(run, outputs) == tokens
