"""The demo's scripted agents: one scenario per loop kind, each a finite script designed so
that one signal fires first under the default configuration (``productive``: none, a long
edit-and-test run that must finish untouched). ``m`` is the demo's marker (``run_demo``),
appended to every argument, output and answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import ToolException

from langchain_loop_guard._cli._demo_kinds import LoopKind
from langchain_loop_guard._core._detector import Signal
from langchain_loop_guard.testing import ScriptedTool, call, scripted_tool

__all__ = ["SCENARIOS", "Scenario", "expected_signal"]


@dataclass(frozen=True, slots=True)
class Scenario:
    signal: Signal | None
    tools: tuple[ScriptedTool, ...]
    script: tuple[Any, ...]
    review: bool = False


def _echo(template: str, marker: str) -> Callable[[dict[str, Any]], str]:
    """A tool result computed from the call's arguments (so different calls differ)."""

    def result(arguments: dict[str, Any]) -> str:
        return template.format(**arguments) + marker

    return result


def _repeat(m: str) -> Scenario:
    # search once, then read the same file again and again: A A A
    return Scenario(
        Signal.REPEATED_TOOL_CALL,
        (
            scripted_tool("search_docs", f"Found 1 page: docs/retry.md{m}"),
            scripted_tool("read_file", f"max_retries = 3, backoff = exponential{m}"),
        ),
        (
            call("search_docs", {"query": f"retry settings{m}"}),
            *[call("read_file", {"path": f"docs/retry.md{m}"})] * 6,
            f"The retry limit is 3.{m}",
        ),
    )


def _cycle(m: str) -> Scenario:
    # list a folder, open a file, list it again…: A B A B A B
    return Scenario(
        Signal.TOOL_CYCLE,
        (
            scripted_tool("list_dir", f"app.py  config.py  tests/{m}"),
            scripted_tool("read_file", f"from config import settings{m}"),
        ),
        (
            *[
                step
                for _ in range(5)
                for step in (
                    call("list_dir", {"path": f"src{m}"}),
                    call("read_file", {"path": f"src/app.py{m}"}),
                )
            ],
            f"The app reads its settings from config.py.{m}",
        ),
    )


def _frequency(m: str) -> Scenario:
    # look up other things, but keep coming back to the same ticket: A x A y A z A
    names = ("alice", "bob", "carol", "dave")
    steps: list[Any] = []
    for name in names:
        steps += [
            call("get_ticket", {"ticket": f"PRJ-7{m}"}),
            call("find_user", {"name": f"{name}{m}"}),
        ]
    return Scenario(
        Signal.TOOL_FREQUENCY,
        (
            scripted_tool("get_ticket", f"PRJ-7: open, unassigned{m}"),
            scripted_tool("find_user", _echo("{name}: not on the team", m)),
        ),
        (*steps, call("get_ticket", {"ticket": f"PRJ-7{m}"}), f"Nobody can take PRJ-7.{m}"),
    )


def _no_progress(m: str) -> Scenario:
    # a seven-step round with the same results each time, its steps in another order every
    # other time (so no fixed cycle, sequence or path repeats: only no progress)
    round_ = (
        call("git_status", {"repo": "."}),
        call("read_file", {"path": f"app.py{m}"}),
        call("run_linter", {"path": f"app.py{m}"}),
        call("read_file", {"path": f"lint.toml{m}"}),
        call("git_diff", {"repo": "."}),
        call("read_file", {"path": f"setup.cfg{m}"}),
        call("read_file", {"path": f"README.md{m}"}),
    )
    return Scenario(
        Signal.NO_PROGRESS,
        (
            scripted_tool("git_status", f"modified: app.py{m}"),
            scripted_tool("read_file", _echo("contents of {path}", m)),
            scripted_tool("run_linter", f"app.py:14: E501 line too long{m}"),
            scripted_tool("git_diff", f"app.py: 1 line changed{m}"),
        ),
        (*round_, *_swapped_pairs(round_), *round_, f"The linter still fails on app.py.{m}"),
    )


def _swapped_pairs(steps: tuple[Any, ...]) -> tuple[Any, ...]:
    """``steps`` with each pair swapped: a b c d e → b a d c e."""
    swapped = list(steps)
    for i in range(0, len(swapped) - 1, 2):
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    return tuple(swapped)


def _error(m: str) -> Scenario:
    # different arguments, the same failure: E E E
    def refused(arguments: dict[str, Any]) -> ToolException:
        return ToolException(f"deploy failed: database connection refused{m}")

    return Scenario(
        Signal.REPEATED_TOOL_ERROR,
        (scripted_tool("deploy", refused),),
        (
            *[call("deploy", {"version": f"1.4.{i}{m}"}) for i in range(1, 6)],
            f"I could not deploy: the database refuses connections.{m}",
        ),
    )


def _assistant(m: str) -> Scenario:
    # a reviewer keeps sending the answer back, and the model keeps giving the same one
    answer = f"The retry limit is 3.{m}"
    return Scenario(
        Signal.REPEATED_ASSISTANT_RESPONSE,
        (scripted_tool("search_docs", f"docs/retry.md: max_retries = 3{m}"),),
        (
            call("search_docs", {"query": f"retry limit{m}"}),
            *[answer] * 4,
            f"{answer} Source: docs/retry.md",
        ),
        review=True,
    )


def _unknown_tool(m: str) -> Scenario:
    # the model keeps calling a tool the agent does not have (the "$26 loop")
    return Scenario(
        Signal.REPEATED_TOOL_CALL,
        (scripted_tool("search_docs", f"Found 1 page: docs/retry.md{m}"),),
        (
            *[call("web_search", {"query": f"retry settings{m}"})] * 6,
            f"I could not search the web.{m}",
        ),
    )


def _productive(m: str) -> Scenario:
    # edit, test, edit, test… with a different result each time: progress, never a loop
    failing = 10
    steps: list[Any] = []
    for patch in range(1, failing + 1):
        steps += [
            call("run_tests", {"path": f"tests/{m}"}),
            call("read_file", {"path": f"src/parser.py{m}"}),
            call("edit_file", {"path": f"src/parser.py{m}", "patch": f"fix #{patch}{m}"}),
        ]
    steps += [call("run_tests", {"path": f"tests/{m}"}), f"All tests pass now.{m}"]
    runs = [
        f"{40 - left} passed, {left} failed in 0.{50 + left}s{m}" for left in range(failing, -1, -1)
    ]
    revisions = [f"def parse(text):  # revision {r}{m}" for r in range(1, failing + 1)]
    return Scenario(
        None,
        (
            scripted_tool("run_tests", *runs),
            scripted_tool("read_file", *revisions),
            scripted_tool("edit_file", f"patched src/parser.py{m}"),
        ),
        tuple(steps),
    )


SCENARIOS: dict[LoopKind, Callable[[str], Scenario]] = {
    "repeat": _repeat,
    "cycle": _cycle,
    "frequency": _frequency,
    "no-progress": _no_progress,
    "error": _error,
    "assistant": _assistant,
    "unknown-tool": _unknown_tool,
    "productive": _productive,
}


def expected_signal(loop: LoopKind) -> Signal | None:
    """The signal the ``loop`` scenario is designed to trip first (``None``: no loop)."""
    return SCENARIOS[loop]("").signal
