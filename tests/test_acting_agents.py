"""SPEC §14 (v5): a step makes progress when it brings information the run has not seen, or
has an effect the run has not had. The rows through the pure detector on realistic acting
agents (``acting_agents.py``): new acts answered alike, deliberate failures, a failing batch
and the same error on other targets are never stopped; the same act again is, as §2 says.
"""

from __future__ import annotations

import pytest
from acting_agents import (
    block_updates,
    calendar_events,
    deliberate_failures,
    failing_batch,
    files_written,
    grades,
    insert_batches,
    inventory_sync,
    same_block_update,
    same_insert_resent,
)
from conversations import Scenario, drive

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal
from langchain_loop_guard._core._signature import EFFECT, arg_tokens, changes_something

NEVER = [
    # N14: the same acknowledgement to different acts
    pytest.param(insert_batches(10), id="N14-insert-batches-rowCount-20"),
    pytest.param(insert_batches(10, pretty=True), id="N14-insert-batches-pretty"),
    pytest.param(block_updates(15), id="N14-update-a-block-15"),
    pytest.param(grades(6), id="N14-submit-grade-6"),
    pytest.param(files_written(12), id="N14-file-written-12"),
    pytest.param(calendar_events(10), id="N14-calendar-events-10"),
    # N15: deliberate failures, each a different call with its own error
    pytest.param(deliberate_failures(), id="N15-transfer-tested-6-ways"),
    # N16: a failing batch, fixed by the next answer
    pytest.param(failing_batch("permission"), id="N16-batch-permission"),
    pytest.param(failing_batch("503"), id="N16-batch-503"),
    pytest.param(failing_batch("timeout"), id="N16-batch-timeout"),
    # N17: the same error on different targets, with work between
    pytest.param(inventory_sync(), id="N17-duplicate-sku-sync"),
]


@pytest.mark.parametrize("scenario", NEVER)
def test_new_effects_and_new_failures_are_never_stopped(scenario: Scenario) -> None:
    """N14-N17: the scenario runs to its end under the defaults."""
    seen = drive(scenario)
    assert seen.stop is None, seen.stop
    assert seen.calls == scenario.calls()


def test_r17_the_same_block_updated_again_is_an_exact_repeat() -> None:
    """R17: the same update with the same content, acknowledged alike: the 3rd identical
    call is refused before it runs."""
    seen = drive(same_block_update(4))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_TOOL_CALL
    assert seen.calls == 2


def test_r17_the_same_insert_resent_after_a_constraint_error_stops_at_the_third() -> None:
    """R17 with R13: the same INSERT re-sent with only a trailing ``;`` changed fails the same
    way: the 3rd failure stops the run."""
    seen = drive(same_insert_resent(5))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_TOOL_ERROR
    assert seen.calls == 3


def test_n16_one_answers_identical_failures_are_one_failure() -> None:
    """N16: three identical failures in one answer are one failure for the error streak; a
    second and third answer failing the same way make three."""
    detector = LoopDetector(LoopGuardConfig(), clock=lambda: 0.0)
    error = "Error: 503 Service Unavailable"
    ids = iter(range(100))
    for answer in range(3):
        detector.turn_start()
        calls = [("fetch", {"url": f"https://example.com/{answer}/{n}"}) for n in range(3)]
        detector.assistant_message("", calls)
        started = [(name, args, f"c{next(ids)}") for name, args in calls]
        for name, args, call_id in started:
            assert not detector.tool_call(name, args, call_id=call_id).stops
        verdicts = [detector.tool_result(n, error=error, call_id=i) for n, _, i in started]
        if answer < 2:
            assert not any(v.stops for v in verdicts), answer
    assert verdicts[0].signal is Signal.REPEATED_TOOL_ERROR


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("run-raw-sql", {"query": 'INSERT INTO "Customer" (id) VALUES (1);'}),
        ("execute_sql", {"sql": "CREATE UNIQUE INDEX idx_email ON customers (email)"}),
        ("execute_sql", {"sql": "ALTER TABLE orders ADD COLUMN note text"}),
        ("execute_sql", {"sql": 'UPDATE "Product" SET stock = 5 WHERE id = 3'}),
        ("query", {"sql": "GRANT SELECT ON ALL TABLES IN SCHEMA public TO analyst"}),
        ("execute_action", {"action_name": "update_a_block", "path_params": "{}"}),
        ("execute_action", {"action_name": "patch_block_children"}),
        ("http_request", {"url": "https://api.example.com/items", "method": "post"}),
        ("canvas-canvas_submit_grade", {"user_id": 3}),
        ("woocommerce-woo_products_create", {"sku": "A1"}),
        ("add_comment", {"issue": 4, "body": "Fixed in #5"}),
    ],
)
def test_calls_that_act_are_told_by_name_action_method_or_sql(name: str, args: object) -> None:
    """§14 Effects: the call itself says it acts (its name, an action argument, an HTTP
    method that writes, SQL that writes)."""
    assert changes_something(name, args)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("execute_sql", {"sql": "SELECT * FROM orders WHERE id = 3"}),
        ("execute_action", {"action_name": "get_block_children"}),
        ("http_request", {"url": "https://api.example.com/items", "method": "GET"}),
        ("list_products", {"search": "SOUTH"}),
        ("read_file", {"path": "docs/update_notes.md"}),
    ],
)
def test_calls_that_only_read_are_not_acts(name: str, args: object) -> None:
    """§14 Effects: a query, a read or a GET is no act, whatever its path is named."""
    assert not changes_something(name, args)


def test_the_users_word_wins_over_names_and_hints() -> None:
    """``acting_tools`` and ``read_only_tools`` win over an integration's hint, and the hint
    over what the name says."""
    config = LoopGuardConfig(acting_tools=["lookup"], read_only_tools=["update_view"])
    detector = LoopDetector(config)
    limits = detector._limits
    assert limits.acts("lookup", False) is True
    assert limits.acts("update_view", True) is False
    assert limits.acts("other", True) is True
    assert limits.acts("other") is None
    assert EFFECT in arg_tokens({}, "search", True)
    assert EFFECT not in arg_tokens({}, "update_view", False)


def test_acting_tools_keep_a_read_only_named_tool_from_no_new_info() -> None:
    """A tool the user lists in ``acting_tools`` is progress when it succeeds, however alike
    its answers: twelve ``sync`` calls answered alike are never "nothing new" (unlisted, the
    same answer to new arguments is, SPEC §13 R12)."""
    from conversations import Scenario, call

    answer = '{"status": "ok", "synced": true, "message": "the shard is in step with the primary"}'
    script = [call("sync", target=f"shard-{n}") for n in range(12)]
    scenario = Scenario("sync", script, {"sync": lambda target: answer})
    assert drive(scenario).stop is not None  # unknown: an "ok" to new arguments, again and again
    assert drive(scenario, acting_tools=["sync"]).stop is None
