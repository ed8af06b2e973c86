"""``LoopDetected``: the typed interrupt that halts a LangGraph run when an agent loops."""

from __future__ import annotations

import dataclasses
from typing import Any

from langgraph.errors import GraphBubbleUp

from langchain_loop_guard._detector import Signal, Verdict
from langchain_loop_guard._errors import LoopGuardError
from langchain_loop_guard._public import public_digest

__all__ = ["LoopDetected"]


class LoopDetected(LoopGuardError, GraphBubbleUp):
    """The agent looped and the guard stopped the run (the agent's fault, not yours).

    It subclasses LangGraph's ``GraphBubbleUp``, so ``ToolNode`` error handling, tool-retry
    middleware and node retry policies let it pass untouched, and it reaches the caller of
    ``invoke``/``stream``/``ainvoke``/``astream`` with its type and attributes intact. The
    checkpoint (if any) stays resumable.

    Attributes:
        signal: which loop was detected.
        tool: the tool the loop is about (``None`` for a repeated assistant response).
        tools: every tool of the loop (a cycle names each).
        count: how often the pattern was seen.
        threshold: the limit it reached.
        run_id: the top-level run (or thread) the loop happened in.
        verdict: the detector's full verdict.
    """

    def __init__(
        self,
        message: str,
        *,
        signal: Signal,
        tool: str | None = None,
        tools: tuple[str, ...] = (),
        count: int = 0,
        threshold: int = 0,
        run_id: str | None = None,
        verdict: Verdict | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.signal = signal
        self.tool = tool
        self.tools = tools
        self.count = count
        self.threshold = threshold
        self.run_id = run_id
        self.verdict = verdict

    @classmethod
    def from_verdict(cls, verdict: Verdict, *, run_id: str | None = None) -> LoopDetected:
        """The interrupt for a stopping ``verdict``.

        Exceptions travel (into logs, error trackers, other processes), so the verdict's
        ``key`` is keyed with this process's secret: the same loop has the same key within the
        process, and the key reveals nothing of the content it digests.
        """
        if verdict.signal is None:
            msg = "LoopDetected needs a verdict with a signal"
            raise ValueError(msg)
        shown = dataclasses.replace(verdict, key=public_digest(verdict.key))
        return cls(
            verdict.message,
            signal=verdict.signal,
            tool=verdict.tool,
            tools=verdict.tools,
            count=verdict.count,
            threshold=verdict.threshold,
            run_id=run_id,
            verdict=shown,
        )

    def repair(self, graph: Any, config: Any, **options: Any) -> int:
        """Answer the tool calls this stop left unanswered in ``config``'s thread.

        The callback handler stops a run from inside a step, which LangGraph does not save, so
        the thread keeps the model answer whose calls were refused; providers reject the next
        message on it until each call is answered. One line after the stop does it::

            except LoopDetected as stop:
                stop.repair(agent, config)

        Same as :func:`~langchain_loop_guard.repair_thread` (``options`` go to it); the
        middleware and the node guard answer their own stops' calls, so it answers nothing
        there. Returns how many calls were answered.
        """
        # imported here: the repair module imports the graph state, which imports this one
        from langchain_loop_guard._repair import repair_thread  # noqa: PLC0415

        return repair_thread(graph, config, **options)

    async def arepair(self, graph: Any, config: Any, **options: Any) -> int:
        """:meth:`repair`, for async checkpointers."""
        from langchain_loop_guard._repair import arepair_thread  # noqa: PLC0415 - as in repair

        return await arepair_thread(graph, config, **options)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (
                self.message,
                {
                    "signal": self.signal,
                    "tool": self.tool,
                    "tools": self.tools,
                    "count": self.count,
                    "threshold": self.threshold,
                    "run_id": self.run_id,
                    "verdict": self.verdict,
                },
            ),
        )

    def __repr__(self) -> str:
        return (
            f"LoopDetected(signal={self.signal.value!r}, tool={self.tool!r}, "
            f"count={self.count}, threshold={self.threshold}, run_id={self.run_id!r})"
        )


def _rebuild(message: str, attributes: dict[str, Any]) -> LoopDetected:
    return LoopDetected(message, **attributes)
