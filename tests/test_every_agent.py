"""SPEC §13 (v4): a step makes progress when it brings what the run has not seen. Every row
through the pure detector on realistic agents (``every_agent.py``), in several shapes: the
work that paces itself, grows a view, reports in a template or retries at a user's request is
never stopped; time passing, volatile fields, the same outcome under new arguments, errors
returned as text, a plan reworded and a page that only ticks are, within the row's span. The
same scenarios run through the integrations in ``test_every_agent_apps.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from conversations import Scenario, Turn, drive
from every_agent import (
    PLANS,
    TEXT_ERRORS,
    VOLATILE_SHAPES,
    gh_run_watch,
    growing_build_log,
    happy_to_help,
    npm_install,
    pending_build,
    pending_pod,
    pods_rollout,
    reindexed_clicks,
    rendered_dashboard,
    reservation_reviews,
    retry_on_request,
    reworded_plan,
    rollout_waiter,
    same_hits,
    scored_docs,
    scrolled_feed,
    sleep_poller,
    sql_no_such_column,
    text_errors,
    ticking_page,
    volatile_search,
)

from langchain_loop_guard import Signal

NEVER = [
    # N10: pacing, a wait between polls whose status moves
    pytest.param(sleep_poller(12), id="N10-sleep-silent-12"),
    pytest.param(sleep_poller(12, slept="slept {seconds}s"), id="N10-sleep-said-12"),
    pytest.param(sleep_poller(12, backoff=True), id="N10-sleep-backoff-capped-at-30"),
    pytest.param(sleep_poller(6, slept="slept {seconds}s", backoff=True), id="N10-backoff-6"),
    pytest.param(rollout_waiter(2), id="N10-wait-for-rollout-by-2"),
    pytest.param(rollout_waiter(2, waits=(30,)), id="N10-wait-for-30-rollout-by-2"),
    pytest.param(rollout_waiter(1, waits=(30,)), id="N10-wait-for-30-rollout-by-1"),
    pytest.param(rollout_waiter(4, waits=(10, 20)), id="N10-wait-for-rollout-by-4"),
    # N11: long outputs that grow
    pytest.param(pods_rollout(4), id="N11-kubectl-20-pods-4-more"),
    pytest.param(pods_rollout(2), id="N11-kubectl-20-pods-2-more"),
    # one more pod a poll (one new line) is no progress by itself: a page whose banner
    # rotates brings one new line a poll too (R15); two new lines or more are progress
    pytest.param(pods_rollout(4, total=40), id="N11-kubectl-40-pods-4-more"),
    pytest.param(gh_run_watch(2), id="N11-gh-run-view-2-steps"),
    pytest.param(gh_run_watch(1), id="N11-gh-run-view-1-step"),
    pytest.param(gh_run_watch(3), id="N11-gh-run-view-3-steps"),
    pytest.param(scrolled_feed(), id="N11-feed-5-new-of-20"),
    pytest.param(scrolled_feed(25, 3, 15), id="N11-feed-3-new-of-25"),
    pytest.param(growing_build_log(4), id="N11-build-log-whole"),
    pytest.param(growing_build_log(4, tail=25), id="N11-build-log-tail-25"),
    pytest.param(growing_build_log(2, tail=30), id="N11-build-log-tail-30-by-2"),
    # N12: work reported in a template, in a thread
    pytest.param(reservation_reviews(6), id="N12-reservation-reviews"),
    pytest.param(reservation_reviews(3), id="N12-reservation-reviews-3"),
    pytest.param(happy_to_help(8), id="N12-happy-to-help-8"),
    pytest.param(happy_to_help(3), id="N12-happy-to-help-3"),
    # N13: a retry the human asked for, in a thread
    pytest.param(retry_on_request(3), id="N13-retry-error-raised"),
    pytest.param(retry_on_request(3, kind="json"), id="N13-retry-json-error"),
    pytest.param(retry_on_request(3, kind="text"), id="N13-retry-error-as-text"),
    pytest.param(retry_on_request(4), id="N13-retry-4-raised"),
]


@pytest.mark.parametrize("scenario", NEVER)
def test_work_that_brings_something_new_is_never_stopped(scenario: Scenario) -> None:
    """N10-N13: the scenario runs to its end under the defaults."""
    seen = drive(scenario)
    assert seen.stop is None, seen.stop
    assert seen.calls == scenario.calls()


# --- R10: time passing only --------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(npm_install(), id="npm-install-in-2s-3s"),
        pytest.param(pending_pod(), id="kubectl-pending-AGE-15s-45s-75s"),
        pytest.param(pending_pod(("2m15s", "2m45s", "3m15s", "3m45s")), id="kubectl-AGE-3m20s"),
        pytest.param(pending_build(style="iso"), id="build-checked-at-iso"),
        pytest.param(pending_build(style="clock"), id="build-checked-at-clock-time"),
        pytest.param(pending_build(style="ago"), id="build-checked-seconds-ago"),
    ],
)
def test_r10_a_result_that_only_tells_the_time_is_an_exact_repeat(scenario: Scenario) -> None:
    """R10: durations, ages and moments are masked: the 3rd identical call is refused
    before it runs."""
    seen = drive(scenario)
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_TOOL_CALL
    assert seen.calls == 2


# --- R11: volatile fields ----------------------------------------------------------------------


@pytest.mark.parametrize("shape", VOLATILE_SHAPES)
def test_r11_latencies_ids_moments_and_cursors_are_not_news(shape: str) -> None:
    """R11: ``response_time`` and ``request_id``, ``took_ms``, ``took``, ``elapsed``,
    ``*_at``, a paging cursor: the 3rd identical search is refused."""
    seen = drive(volatile_search(shape))
    assert seen.stop is not None
    assert (seen.stop.signal, seen.stop.tool) == (Signal.REPEATED_TOOL_CALL, "search")
    assert seen.calls == 2


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(scored_docs, id="per-tool-score"),
        pytest.param(rendered_dashboard, id="global-render-id"),
    ],
)
def test_r11_fields_the_user_names_are_masked(make: Callable[[], Scenario]) -> None:
    """R11 with ``volatile_fields``: a field named for one tool, or for every tool, is
    masked like a latency: the 3rd identical call is refused."""
    seen = drive(make())
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_TOOL_CALL
    assert seen.calls == 2


# --- R12: the same outcome whatever the arguments ----------------------------------------------


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(same_hits(), id="reworded-queries-same-top-5"),
        pytest.param(same_hits(masked=True), id="reworded-queries-same-top-5-new-request-id"),
        pytest.param(reindexed_clicks(), id="click-12-15-17"),
        pytest.param(reindexed_clicks(start=3), id="click-3-6-8"),
    ],
)
def test_r12_the_same_outcome_under_new_arguments_stops_by_the_5th(scenario: Scenario) -> None:
    """R12: the first answer is news; the 5th in a row bringing back only what the run has
    seen stops it (the 6th call, at the latest)."""
    seen = drive(scenario)
    assert seen.stop is not None
    assert seen.stop.signal is Signal.NO_NEW_INFO
    assert seen.calls <= 6


# --- R13: errors returned as text --------------------------------------------------------------


def test_r13_the_sql_tool_s_error_text_is_an_error() -> None:
    """R13: ``Error: (sqlite3.OperationalError) no such column`` for the same query, a ``;``
    or a newline changed: the 3rd same error stops the run."""
    scenario = sql_no_such_column()
    seen = drive(scenario)
    assert seen.stop is not None
    assert (seen.stop.signal, seen.stop.tool) == (Signal.REPEATED_TOOL_ERROR, "sql_db_query")
    assert seen.calls == 4  # the table listing, then three queries


@pytest.mark.parametrize("kind", TEXT_ERRORS)
@pytest.mark.parametrize("identical", [False, True], ids=["varied-calls", "identical-calls"])
def test_r13_errors_in_the_text_are_errors(kind: str, identical: bool) -> None:
    """R13: ``ERROR: …``, a traceback, ``{"error": …}``, ``{"status": "error", …}``: the 3rd
    same error stops (an identical call is refused before it runs, as §2 says)."""
    seen = drive(text_errors(kind, identical=identical))
    assert seen.stop is not None
    if identical:
        assert (seen.stop.signal, seen.calls) == (Signal.REPEATED_TOOL_CALL, 2)
    else:
        assert (seen.stop.signal, seen.calls) == (Signal.REPEATED_TOOL_ERROR, 3)


# --- R14: the same plan, reworded --------------------------------------------------------------


@pytest.mark.parametrize("scope", ["run", "thread"])
@pytest.mark.parametrize("shape", list(PLANS))
def test_r14_a_plan_reworded_without_news_stops_by_the_4th(shape: str, scope: str) -> None:
    """R14: answers without tools, each sharing most of its words with the one before, no
    tool or human between: stopped by the 4th, with a message about the replies."""
    seen = drive(reworded_plan(shape, scope=scope))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPLY_CYCLE
    assert seen.turns <= 4
    assert "no tool call succeeded" not in seen.stop.message


# --- R15: a page that only ticks ---------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("banners", [2, 3, 4])
def test_r15_a_page_that_only_ticks_is_a_near_repeat(banners: int, seed: int) -> None:
    """R15: the same click, the same 25-line page but for a rotating banner and an "N agents
    online" counter: a near repeat, stopped by the 6th identical call."""
    seen = drive(ticking_page(banners, seed=seed))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.NEAR_REPEAT
    assert seen.calls < 6


# --- what the rows rest on ---------------------------------------------------------------------


def test_n12_the_same_template_without_a_lookup_between_goes_round() -> None:
    """N12's other side: the first reservation's review repeated after each message, with
    no lookup between, is R9's conversation going round."""
    scenario = reservation_reviews(6)
    template = next(s.text for s in scenario.script if isinstance(s, Turn) and "H8Q05L" in s.text)
    same = [
        Turn(text=template) if isinstance(step, Turn) and step.text.startswith("Thank") else step
        for step in scenario.script
        if not (isinstance(step, Turn) and step.calls)
    ]
    seen = drive(replace(scenario, script=same))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_ASSISTANT_RESPONSE


def test_r11_without_the_user_s_field_a_jittering_score_is_news() -> None:
    """R11: a score is not masked unless the user names it: the same search whose scores
    move is not refused at the 3rd call."""
    case = scored_docs()
    seen = drive(replace(case, config={}))
    assert seen.stop is None or seen.calls > 2
