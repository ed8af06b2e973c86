"""What the reports say is what happened (issue 40, point 8): counts that match their limits,
the user's own label words."""

from __future__ import annotations

import pytest

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal, Verdict
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._replay._report_text import label_text

TOOLS = ["search_dir", "open", "search_file", "goto", "scroll_down"]


def _walk(config: LoopGuardConfig, length: int = 7) -> tuple[int, Verdict]:
    """A path of ``length`` calls (longer than ``max_sequence_length``) walked again and
    again, calls and results alike: the call that stops it and the verdict."""
    detector = LoopDetector(config)
    for n in range(5 * length):
        step = n % length
        name, args = TOOLS[step % 5], {"i": step}
        detector.turn_start()
        detector.assistant_message("", [(name, args)])
        verdict = detector.tool_call(name, args, call_id=f"c{n}")
        if verdict.stops:
            return n + 1, verdict
        detector.tool_result(name, f"{name} result {step}", call_id=f"c{n}")
    raise AssertionError("never stopped")


@pytest.mark.parametrize("repeats", [2, 3])
def test_a_path_walked_again_counts_its_walks_as_cycle_repeats_says(repeats: int) -> None:
    """Stopped as the ``cycle_repeats``-th walk begins, the reason says so: never "repeated
    as a sequence 1 times (limit 1)" under ``cycle_repeats=2``."""
    at, verdict = _walk(LoopGuardConfig(cycle_repeats=repeats))
    assert verdict.signal is Signal.REPEATED_SEQUENCE
    assert at == 7 * (repeats - 1) + 1
    assert (verdict.count, verdict.threshold) == (repeats, repeats)
    assert f"as a sequence {repeats} times with the same results (limit {repeats})" in (
        verdict.message
    )


@pytest.mark.parametrize(("locale", "fine"), [("en", "labelled fine"), ("ko", "fine")])
def test_a_run_labelled_fine_is_said_to_be_labelled_fine(locale: str, fine: str) -> None:
    """The user's word ``fine`` is shown as such, not as "labelled good"."""
    text = label_text(translator(locale), "fine")
    assert fine in text
    assert "good" not in text
