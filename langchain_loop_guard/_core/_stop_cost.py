"""A stop with what its loop cost: :attr:`Verdict.cost`, and the sentence that says it after
the stop's message (the integrations' engine adds it, as it adds the remedy)."""

from __future__ import annotations

import dataclasses

from langchain_loop_guard._core._cost import CostLedger, cost_text
from langchain_loop_guard._core._verdict import Verdict

__all__ = ["with_cost"]


def with_cost(verdict: Verdict, ledger: CostLedger, locale: str | None = None) -> Verdict:
    """A stopping ``verdict`` with what its loop cost (:attr:`Verdict.cost`) and, when the
    model reported its usage, the sentence that says it after the message."""
    if not verdict.stops or verdict.cost is not None:
        return verdict
    cost = ledger.cost_of(verdict.signal, verdict.tool, verdict.tools, verdict.count)
    if cost is None:
        return verdict
    message = verdict.message
    if cost.metered and not verdict.tripped:
        message = f"{message} {cost_text(cost, locale)}"
    return dataclasses.replace(verdict, cost=cost, message=message)
