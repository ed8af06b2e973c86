"""SPEC §14 (v5): a step makes progress when it brings information the run has not seen, or
has an effect the run has not had. The rows through the pure detector on realistic acting
agents (``acting_agents.py``): new acts answered alike, deliberate failures, a failing batch
and the same error on other targets are never stopped; the same act again is, as §2 says.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from acting_agents import (
    GROUP_CHAT,
    block_updates,
    calendar_events,
    coder_and_executor,
    deliberate_failures,
    echoing_search,
    failing_batch,
    files_written,
    grades,
    group_chat,
    insert_batches,
    inventory_sync,
    listing_then_filtered,
    price_pages,
    rejected_replies,
    reread_between_work,
    same_block_update,
    same_insert_resent,
)
from conversations import Scenario, drive

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal
from langchain_loop_guard._core._signature import EFFECT, arg_tokens, changes_something, outcome

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


@pytest.mark.parametrize("pretty", [False, True], ids=["compact", "pretty-printed"])
def test_r16_a_search_echoing_its_query_is_stopped_by_the_5th_answer(pretty: bool) -> None:
    """R16: reworded queries, each echoed around the same hits: what a result repeats of its
    own call is no information, so the 2nd to 6th answers bring only what the run has seen."""
    seen = drive(echoing_search(pretty=pretty))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.NO_NEW_INFO
    assert seen.calls == 6


def test_r18_a_filtered_part_of_a_listing_seen_brings_nothing_new() -> None:
    """R18: after a 400-line listing, ``find``s printing parts of it are re-reads: the run
    is stopped as by answers that bring back only what it has seen."""
    seen = drive(listing_then_filtered())
    assert seen.stop is not None
    assert seen.stop.signal is Signal.NO_NEW_INFO
    assert seen.calls == 6  # the listing, then five re-reads


def test_n20_pages_of_numbers_are_information() -> None:
    """N20: forty pages of new rows of numbers in one layout are forty pages of news."""
    scenario = price_pages(40)
    seen = drive(scenario)
    assert seen.stop is None, seen.stop
    assert seen.calls == 40


def test_r19_the_same_read_between_other_work_is_the_seeds_window_one_call_later() -> None:
    """R19: the same read with the same content, between other reads, is stopped by the
    window rule at its 4th time in the window, on its result, as the seed's window (the
    reads between repeat their own paths and nothing else: no news). Between reads that do
    bring news, a browse is given one call more (``test_wording``); a wait between polls is
    still pacing (§13 N10)."""
    seen = drive(reread_between_work(6))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.TOOL_FREQUENCY
    assert seen.executed.count("get_config") == 4


@pytest.mark.parametrize(
    ("command", "acts"),
    [
        ("helm --kubeconfig=k.yaml upgrade redis bitnami/redis --version 22.0.0", True),
        ("kubectl --kubeconfig=k.yaml apply -f deploy.yaml", True),
        ("kubectl --kubeconfig=k.yaml get pods -n shared-services", False),
        ("git commit -m 'Fix the parser'", True),
        ("git status", False),
        ("gh pr create --title 'Fix' --body 'x'", True),
        ("gh pr view 3", False),
        ("gh", False),
        ("sudo", False),  # no command after it
        ("docker run --rm alpine true", True),
        ("apt-get install default-jdk", False),  # the classic loop's: no act of its own
    ],
)
def test_acting_subcommands_of_command_line_tools(command: str, acts: bool) -> None:
    """§14 Effects: a shell command acts by its subcommand (``helm upgrade``, ``kubectl
    apply``, ``git commit``, ``gh pr create``); a read of the same tool does not."""
    assert changes_something("run_command", {"command": command}) is acts


PLACES = ["lucali", "di-fara", "prince-street", "joes", "l-industrie", "scarrs"]


def test_what_a_compact_result_echoes_is_left_out_wherever_it_stands() -> None:
    """R16: the echo of the call's words is left out at the end of a result as at its start;
    a result beyond the scanned size is read whole; two words of the query in a row are the
    result's own words."""
    query = "best pizza in new york"
    tokens = arg_tokens({"query": query}, "web_search")
    hits = json.dumps(
        [{"title": name, "url": f"https://maps.example.com/{name}"} for name in PLACES]
    )
    first = outcome(f'{{"results": {hits}, "query": "{query}"}}', tool="s", tokens=tokens)
    other = "the best pizza places in new york city"
    second = outcome(
        f'{{"results": {hits}, "query": "{other}"}}',
        tool="s",
        tokens=arg_tokens({"query": other}, "web_search"),
    )
    assert first.info == second.info  # the same once the echoes are left out
    assert first.key != second.key
    two = outcome(f'{{"results": {hits}, "note": "new york"}}', tool="s", tokens=tokens)
    assert two.info == "+" + two.key  # "new york" alone is the result's own
    huge = json.dumps({"query": query, "rows": ["x" * 80] * 300})
    assert outcome(huge, tool="s", tokens=tokens).info == "+" + outcome(huge, tool="s").key


# --- N19: agents that talk ----------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["run", "thread"])
def test_n19_agents_that_talk_are_never_failing_turns(scope: str) -> None:
    """N19: eight messages of planning and agreeing, no tool, then a query and a report: the
    talk is no failing turn, in either scope."""
    seen = drive(replace(group_chat(), scope=scope))
    assert seen.stop is None, seen.stop
    assert seen.executed == ["run_sql"]
    assert seen.turns == len(GROUP_CHAT) + 2


def test_n19_replies_a_harness_rejects_are_still_failing_turns() -> None:
    """N19's other side: replies holding commands the harness could not run, each new in
    its words: stopped by ``failing_turns`` at the 6th (the coding set's format errors)."""
    seen = drive(rejected_replies())
    assert seen.stop is not None
    assert seen.stop.signal is Signal.FAILING_TURNS
    assert seen.turns == 7  # the 6th failing turn is judged when the 7th begins


def test_n19_talk_between_fenced_code_ends_the_failing_streak() -> None:
    """N19: a coder's fenced code answered by an executor's words, ten rounds without a
    tool: each answer in words ends the streak, so no string of failing turns grows."""
    seen = drive(coder_and_executor())
    assert seen.stop is None, seen.stop
    assert seen.turns == 20
