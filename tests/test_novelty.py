"""What the run has seen (SPEC §13): the fixed-size memory, what a result brought, and the
state it keeps, the previous release's included."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal
from langchain_loop_guard._core._novelty import (
    ACK,
    LINES,
    MOVED,
    NEUTRAL,
    NEW,
    NOTHING,
    STALE,
    WORK,
    Seen,
    line_hashes,
    number_of,
)
from langchain_loop_guard._core._replies import Replies
from langchain_loop_guard._core._signature import outcome

FIXTURES = Path(__file__).parent / "fixtures"


def _view(lines: list[str]) -> str:
    return "\n".join(lines)


# --- the memory ----------------------------------------------------------------------------------


def test_the_memory_has_one_size_whatever_it_saw() -> None:
    """Ten thousand digests later, the memory is two generations of 256 bytes, as after one."""
    memory = Seen()
    memory.check(1)
    size = len(json.dumps(memory.export()))
    for n in range(10_000):
        memory.check(n * 7919 + 13)
    assert len(json.dumps(memory.export())) <= 2 * size
    new, old, count = memory.export()
    assert isinstance(new, str)
    assert isinstance(old, str)
    assert len(new) == len(old) == 512
    assert 0 < count <= 160


def test_the_memory_remembers_recent_news_and_forgets_the_oldest() -> None:
    """A digest is seen once it was checked; after two generations' worth of others, it is news
    again."""
    memory = Seen()
    assert memory.check(42) is False
    assert memory.check(42) is True
    for n in range(1, 400):
        memory.check(n * 1_000_003)
    assert memory.check(42) is False


def test_the_memory_round_trips_through_its_state() -> None:
    memory = Seen()
    for n in range(200):
        memory.check(n)
    again = Seen.restore(json.loads(json.dumps(memory.export())))
    assert again.export() == memory.export()
    assert all(again.check(n) for n in range(150, 200))


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        ["00" * 256, None],
        ["00" * 255, None, 0],
        ["zz" * 256, None, 0],
        ["00" * 256, 7, 0],
        ["00" * 256, None, -1],
        ["00" * 256, None, 161],
        ["00" * 256, None, "3"],
    ],
)
def test_a_malformed_memory_is_refused(data: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        Seen.restore(data)


def test_line_hashes_read_a_sketch_and_nothing_else() -> None:
    assert line_hashes("0000000a0000000b") == [10, 11]
    assert line_hashes("0000000a000") == [10]  # a torn last hash is left out
    assert line_hashes("not a sketch") == []


def test_a_digest_is_its_number_and_any_other_text_its_crc() -> None:
    assert number_of(5) == 5
    assert number_of("00000000000000ff") == 255
    assert number_of("not-hex!") == number_of("not-hex!") != number_of("other")


# --- what a result brought -----------------------------------------------------------------------


def _judge(memory: Seen, text: str, *, again: bool = False, failed: bool = False) -> int:
    found = outcome(text)
    return memory.judge(found.info, found.near, found.key, again=again, failed=failed)


def test_a_failure_brings_nothing_and_work_is_work() -> None:
    memory = Seen()
    assert memory.judge("=abc", None, "abc", again=False, failed=True) == NOTHING
    # empty: nothing, and no content (a wait, SPEC §14 R19)
    assert memory.judge("", None, "k", again=False, failed=False) == NOTHING | ACK
    assert memory.judge(".", None, "k", again=False, failed=False) == WORK


def test_a_short_result_is_new_once_then_stale_from_another_call_or_neutral_from_the_same() -> None:
    """Reworded queries returning the same hits (R12): only what the run has seen."""
    memory = Seen()
    hits = json.dumps([{"id": f"doc-{n}", "title": f"Refund policy {n}"} for n in range(5)])
    assert _judge(memory, hits) == NEW
    assert _judge(memory, hits) == STALE
    assert _judge(memory, hits, again=True) == NEUTRAL
    assert _judge(memory, "Saved.") == NEW | ACK
    assert _judge(memory, "Saved.") == ACK  # a short acknowledgement: nothing to bring


def test_a_long_result_is_new_by_two_new_lines() -> None:
    """N11 and R15: two new lines are progress; one (a banner that changes) is not; numbers
    in the rows are data, new rows when they change (SPEC §14 N20); time passing is not."""
    memory = Seen()
    pods = [f"web-{chr(97 + n)}x   0/1   Pending   0   {n}s" for n in range(20)]
    assert _judge(memory, _view(pods)) & NEW
    two = [p.replace("0/1   Pending", "1/1   Running") if i < 2 else p for i, p in enumerate(pods)]
    assert _judge(memory, _view(two)) == NEW | LINES
    one = [*two[:-1], "banner: try our new plan"]  # one new line: its numbers moved, no more
    assert _judge(memory, _view(one)) == LINES | MOVED | STALE
    counts = [line.replace("0   ", "7   ", 1) for line in one]
    assert _judge(memory, _view(counts), again=True) == NEW | LINES
    later = [re.sub(r"(\d+)s$", lambda age: f"{int(age[1]) + 30}s", line) for line in counts]
    assert not _judge(memory, _view(later), again=True) & NEW  # only the ages moved


def test_an_echo_seen_before_brings_nothing() -> None:
    """A short answer about the call's own arguments, seen before: nothing (R6)."""
    memory = Seen()
    assert memory.judge("~1234", None, "k1", again=False, failed=False) == NEW
    assert memory.judge("~1234", None, "k2", again=False, failed=False) == NOTHING
    assert memory.judge("!5678", None, "k3", again=False, failed=False) == NOTHING
    assert memory.judge("!5678", None, "k3", again=True, failed=False) == NEUTRAL


# --- replies --------------------------------------------------------------------------------------


def test_the_replies_state_round_trips_and_reads_the_previous_release() -> None:
    replies = Replies()
    replies.add(("k1", "0000000a"), in_context=True, aware=True, kept=3)
    replies.add(("k1", "0000000a"), in_context=True, aware=True, kept=3)
    state = json.loads(json.dumps(replies.export()))
    again = Replies.restore(state, version=5)
    assert (again.streak, again.recent, again.reworded) == (("k1", 2), replies.recent, 2)
    older = Replies.restore({k: v for k, v in state.items() if k != "reworded"}, version=4)
    assert (older.streak, older.reworded) == (("k1", 2), 0)


# --- the previous release's state ---------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 3], ids=["previous-release", "release-before"])
def test_a_checkpoint_of_an_earlier_release_is_read_and_goes_on(version: int) -> None:
    """A thread state an earlier release wrote (version 4 or 3, each kept as a fixture written
    by that release's code): it is taken, its calls go on (the same failing update a 3rd time
    is refused), and the run goes on in the current version."""
    state = json.loads((FIXTURES / f"detector-state-v{version}.json").read_text())
    assert state["v"] == version
    detector = LoopDetector(LoopGuardConfig(scope="thread"), clock=lambda: 0.0)
    assert detector.restore_state(state) is True
    assert [c[0] for c in detector.export_state()["calls"]] == ["search", "update", "update"]
    detector.turn_start()
    detector.assistant_message("", [("update", {"id": "H8Q05L", "cabin": "business"})])
    verdict = detector.tool_call("update", {"id": "H8Q05L", "cabin": "business"}, call_id="c4")
    assert (verdict.action, verdict.signal) == ("block", Signal.REPEATED_TOOL_CALL)
    assert detector.export_state()["v"] == 5


@pytest.mark.parametrize(
    ("version", "field", "value"),
    [
        (4, "infos", [-1]),
        *((3, field, "broken") for field in ("infos", "quiet", "turn", "calls")),
    ],
)
def test_a_malformed_state_of_an_earlier_release_is_refused_whole(
    version: int, field: str, value: object
) -> None:
    state = json.loads((FIXTURES / f"detector-state-v{version}.json").read_text())
    state[field] = value
    detector = LoopDetector(LoopGuardConfig(scope="thread"), clock=lambda: 0.0)
    assert detector.restore_state(state) is False
    assert detector.export_state()["calls"] == []


# --- the keys that name what is noise, and rewording --------------------------------------------


@pytest.mark.parametrize("names", [[""], ["*"], ["a b"], {"search": ["ok", "bad name!"]}])
def test_a_volatile_field_that_is_no_field_name_is_refused(names: Any) -> None:
    """``volatile_fields`` names fields: an empty name, a wildcard alone or a name with spaces
    is an error naming the key, never a pattern that silently matches everything."""
    from langchain_loop_guard import LoopGuardConfigError

    with pytest.raises(LoopGuardConfigError, match="volatile_fields"):
        LoopGuardConfig(volatile_fields=names)


def test_volatile_fields_mask_a_users_field_for_one_tool_only() -> None:
    """A field named for one tool is masked in that tool's results, not in another's."""
    from langchain_loop_guard._core._limits import limits_of

    limits = limits_of(LoopGuardConfig(volatile_fields={"search_docs": ["score"]}))
    text = '{"hits": ["refunds.md"], "score": 0.87}'
    other = '{"hits": ["refunds.md"], "score": 0.91}'
    search, lookup = limits.volatile_of("search_docs"), limits.volatile_of("lookup")
    assert outcome(text, volatile=search).key == outcome(other, volatile=search).key
    assert outcome(text, volatile=lookup).key != outcome(other, volatile=lookup).key


def test_a_reply_is_its_own_rewording() -> None:
    from langchain_loop_guard._core._signature import reply_sketch, reworded_reply

    plan = reply_sketch("First I will check the invoices, then the refunds, then report back.")
    assert reworded_reply(plan, plan)
    assert not reworded_reply(plan, reply_sketch("Done."))
