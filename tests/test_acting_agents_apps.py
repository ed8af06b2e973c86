"""SPEC §14 (v5) through the real integrations: the acting agents of ``acting_agents.py`` as a
``create_agent`` guarded by the callback handler or the middleware, and a hand-built
``StateGraph`` with a ``ToolNode`` guarded by the node guard, each on a checkpointed thread.
Each row gives the answer the pure detector gives (``test_acting_agents.py``): new acts,
deliberate failures, a failing batch and the same error on other targets run to their end;
the same act again stops no later than ``drive()`` says.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from acting_agents import (
    block_updates,
    calendar_events,
    deliberate_failures,
    echoing_search,
    failing_batch,
    files_written,
    grades,
    insert_batches,
    inventory_sync,
    listing_then_filtered,
    price_pages,
    reread_between_work,
    same_block_update,
    same_insert_resent,
)
from test_beyond_coding_agents import (
    Case,
    Integration,
    assert_ran_to_its_end,
    assert_stopped_as_the_detector_does,
    run_agent,
)

ACTS = [
    pytest.param(partial(insert_batches, 10), id="N14-insert-batches"),
    pytest.param(partial(insert_batches, 10, pretty=True), id="N14-insert-batches-pretty"),
    pytest.param(partial(block_updates, 15), id="N14-update-a-block"),
    pytest.param(partial(grades, 6), id="N14-submit-grade"),
    pytest.param(partial(files_written, 12), id="N14-file-written"),
    pytest.param(partial(calendar_events, 10), id="N14-calendar-events"),
    pytest.param(deliberate_failures, id="N15-deliberate-failures"),
    pytest.param(partial(failing_batch, "permission"), id="N16-failing-batch"),
    pytest.param(partial(failing_batch, "503"), id="N16-failing-batch-503"),
    pytest.param(inventory_sync, id="N17-duplicate-sku-sync"),
    pytest.param(partial(price_pages, 40), id="N20-price-pages"),
]


@pytest.mark.parametrize("integration", ["handler", "handler-graph", "middleware", "node"])
@pytest.mark.parametrize("case", ACTS)
def test_new_acts_and_new_failures_run_to_their_end(case: Case, integration: Integration) -> None:
    """N14-N17, N20: every call runs, the agent gives its reply, the guard writes nothing."""
    assert_ran_to_its_end(run_agent(case, integration), case)


@pytest.mark.parametrize(
    ("integration", "on_stop"),
    [
        pytest.param("handler", "raise", id="handler"),
        pytest.param("middleware", "raise", id="middleware"),
        pytest.param("middleware", "end", id="middleware-end"),
        pytest.param("node", "raise", id="node"),
        pytest.param("node", "end", id="node-end"),
    ],
)
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(partial(same_block_update, 5), id="R17-same-block-update"),
        pytest.param(partial(same_insert_resent, 5), id="R17-same-insert-resent"),
        pytest.param(echoing_search, id="R16-echoing-search"),
        pytest.param(partial(echoing_search, pretty=True), id="R16-echoing-search-pretty"),
        pytest.param(listing_then_filtered, id="R18-listing-then-filtered"),
        pytest.param(partial(reread_between_work, 6), id="R19-reread-between-work"),
    ],
)
def test_the_same_act_again_stops_as_the_detector_does(
    case: Case, integration: Integration, on_stop: Any
) -> None:
    """R16-R19: the same update with the same content, the same INSERT re-sent after a
    constraint error, a search echoing its query around the same hits, filtered listings of
    lines seen, the same read between other reads: stopped with the detector's signal, no
    later than it stops."""
    assert_stopped_as_the_detector_does(run_agent(case, integration, on_stop=on_stop), case)
