"""The demo's loop kinds and integrations, with their descriptions.

Kept apart from :mod:`._demo` so that building the ``loop-guard`` parser (for
``--help`` or ``loop-guard config``) does not import LangChain.
"""

from __future__ import annotations

from typing import Literal, get_args

from langchain_loop_guard._core._messages import translator

__all__ = ["INTEGRATIONS", "LOOP_KINDS", "Integration", "LoopKind", "describe_scenarios"]

LoopKind = Literal[
    "repeat",
    "cycle",
    "frequency",
    "no-progress",
    "error",
    "assistant",
    "unknown-tool",
    "productive",
]
"""The demo's scenarios: one per signal that stops a run, and a productive run."""

Integration = Literal["callbacks", "middleware", "node"]
"""How the demo attaches the guard to its agent."""

LOOP_KINDS: tuple[LoopKind, ...] = get_args(LoopKind)
INTEGRATIONS: tuple[Integration, ...] = get_args(Integration)


def describe_scenarios(locale: str = "en") -> dict[LoopKind, str]:
    """Each scenario's one-line description, in ``locale``."""
    tr = translator(locale)
    return {
        "repeat": tr.gettext("The agent reads the same file again and again."),
        "cycle": tr.gettext("The agent alternates between two calls that return the same."),
        "frequency": tr.gettext(
            "The agent keeps coming back to the same lookup between other calls."
        ),
        "no-progress": tr.gettext(
            "The agent goes round the same steps in a shifting order, and they keep returning"
            " the same results."
        ),
        "error": tr.gettext("The agent retries a deployment that fails the same way each time."),
        "assistant": tr.gettext(
            "A reviewer sends the answer back, and the model gives the same answer again."
        ),
        "unknown-tool": tr.gettext("The model keeps calling a tool that does not exist."),
        "productive": tr.gettext(
            "A long edit-and-test run whose results change each time: progress, not a loop."
        ),
    }
