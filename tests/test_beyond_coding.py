"""SPEC §12 (v3.1): the everyday work of LangGraph apps is never stopped, and the loops only a
whole run or a conversation shows are, each row through the pure detector on realistic agents
(``conversations.py``), in several shapes. The same scenarios run through real agents in
``test_beyond_coding_agents.py``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from conversations import (
    Scenario,
    Turn,
    User,
    apology_cycle,
    ci_poller,
    drive,
    export_poller,
    flailing_with_fan_outs,
    flailing_without_jdk,
    flight_fan_out,
    heredoc_files,
    install_without_network,
    line_count_poller,
    log_tail_poller,
    pod_poller,
    reapplied_edit,
    rephrase_loop,
    rerun_after_fixes,
    same_question,
    same_reply_to_other_questions,
    shell_setup,
    support_chat,
    web_fan_out,
    write_files,
)

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal
from langchain_loop_guard._core._novelty import ACK, NEW
from langchain_loop_guard._core._signature import (
    arg_tokens,
    changes_something,
    near_reply,
    outcome,
    reply_sketch,
)
from langchain_loop_guard._core._view import Limits, RunView, successes_cannot_stop

NEVER = [
    # N6: many calls in one model message
    *(pytest.param(flight_fan_out(seed), id=f"N6-flights-seed{seed}") for seed in range(4)),
    pytest.param(flight_fan_out(7, batches=2), id="N6-flights-two-messages"),
    pytest.param(flight_fan_out(8, routes=30, served=3), id="N6-flights-30-routes"),
    pytest.param(flight_fan_out(9, routes=12, served=1, batches=3), id="N6-flights-3x4"),
    *(pytest.param(web_fan_out(seed), id=f"N6-web-seed{seed}") for seed in range(3)),
    # N7: numbers that move
    pytest.param(ci_poller(), id="N7-ci"),
    pytest.param(export_poller(range(5, 100, 7)), id="N7-export-percent"),
    pytest.param(export_poller([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]), id="N7-export-slow"),
    pytest.param(line_count_poller([118, 131, 142, 150]), id="N7-wc-short"),
    pytest.param(line_count_poller(range(100, 400, 11)), id="N7-wc-long"),
    pytest.param(log_tail_poller(10), id="N7-log-tail"),
    pytest.param(log_tail_poller(30, lines=3), id="N7-log-tail-long"),
    # N8: a chat in scope thread (and the same chat run by run)
    pytest.param(support_chat(30), id="N8-chat-30"),
    pytest.param(replace(support_chat(30), scope="run"), id="N8-chat-30-run-scope"),
    pytest.param(support_chat(12), id="N8-chat-12"),
    # N9: silent work
    pytest.param(write_files(10), id="N9-write-file"),
    pytest.param(write_files(14, tool="create_file"), id="N9-create-file"),
    pytest.param(heredoc_files(10), id="N9-heredoc"),
    pytest.param(heredoc_files(16), id="N9-heredoc-16"),
    pytest.param(shell_setup(), id="N9-mkdir-touch-sed"),
    # N1, still: a re-run after a change
    pytest.param(rerun_after_fixes(), id="N1-rerun-after-fixes"),
    # R9 is thread scope only: in scope run each question starts afresh
    pytest.param(replace(rephrase_loop(11), scope="run"), id="R9-run-scope"),
    pytest.param(replace(apology_cycle(2), scope="run"), id="R9-cycle-run-scope"),
]


@pytest.mark.parametrize("scenario", NEVER)
def test_everyday_work_is_never_stopped(scenario: Scenario) -> None:
    """N6-N9: the scenario runs to its end under the defaults."""
    seen = drive(scenario)
    assert seen.stop is None, seen.stop
    assert seen.calls == scenario.calls()


# --- must stop ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(ci_poller(polls_per_step=3), id="ci-step-polled-while-its-age-moves"),
        pytest.param(pod_poller(3), id="kubectl-creating-while-AGE-grows"),
        pytest.param(pod_poller(12, restarts=True), id="kubectl-slow"),
    ],
)
def test_r10_a_status_whose_only_change_is_time_is_an_exact_repeat(scenario: Scenario) -> None:
    """SPEC §13 R10 (which withdrew §12 N7's ages): a poll whose status does not move, its
    age or elapsed time aside, stops at the 3rd identical poll."""
    seen = drive(scenario)
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_TOOL_CALL
    assert seen.calls == 2


@pytest.mark.parametrize("base_lines", [24, 40, 90])
def test_r1_the_same_edit_reapplied_to_a_long_view_stops_by_the_6th(base_lines: int) -> None:
    """R1': a view of 20+ lines whose lines repeat and shift while the text stays."""
    seen = drive(reapplied_edit(base_lines=base_lines))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.NEAR_REPEAT
    assert seen.calls < 6  # the 6th identical call (at the latest) is refused


@pytest.mark.parametrize("order", [0, 1, 2])
def test_r4_the_same_failure_whatever_comes_between_stops_at_the_3rd(order: int) -> None:
    """R4': apt-get install times out; between the tries other commands time out, fail or
    succeed silently; the 3rd identical failure within 10 calls stops the run."""
    seen = drive(install_without_network(order))
    assert seen.stop is not None
    assert (seen.stop.signal, seen.stop.tool) == (Signal.REPEATED_TOOL_ERROR, "bash")
    installs = [c for c in install_without_network(order).script if isinstance(c, Turn)]
    third = [n for n, t in enumerate(installs, 1) if "default-jdk" in str(t.calls)][2]
    assert seen.calls <= third


@pytest.mark.parametrize("shape", range(5))
def test_r8_nothing_new_across_tools_stops_by_the_10th(shape: int) -> None:
    """R8: empty finds, timeouts, searches that find nothing, echoes, one after another."""
    seen = drive(flailing_without_jdk(shape))
    assert seen.stop is not None
    assert seen.calls <= 10


def test_r8_a_fan_out_counts_once() -> None:
    """R8 with N6: answers of three searches each, none finding anything: stopped at the
    10th answer (30 calls), not at the 10th call."""
    seen = drive(flailing_with_fan_outs())
    assert seen.stop is not None
    assert (seen.stop.signal, seen.stop.count) == (Signal.NO_NEW_INFO, 10)
    assert seen.turns == 10


def test_r8_writes_that_print_nothing_end_the_streak() -> None:
    """N9 inside R8: a silent change between searches that find nothing is work done."""
    script: list[Turn | User] = [User("Find the config.")]
    for n in range(15):
        script.append(Turn((("search_dir", {"term": f"config {n}"}),)))
        if n % 5 == 4:
            script.append(Turn((("write_file", {"path": f"notes/{n}.md", "content": "x"}),)))
    tools: dict[str, Any] = {
        "search_dir": lambda term: f'No matches found for "{term}" in /repo',
        "write_file": lambda path, content: "",
    }
    assert drive(Scenario("searches-and-writes", script, tools)).stop is None


@pytest.mark.parametrize("messages", [3, 5, 11])
def test_r9_the_same_reply_after_each_message_stops_by_the_3rd(messages: int) -> None:
    """R9 (scope thread): "I'm sorry, could you rephrase that?" after each message."""
    seen = drive(rephrase_loop(messages))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_ASSISTANT_RESPONSE
    assert seen.turns == 3


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_r9_nearly_identical_replies_cycling_stop_by_the_3rd_lap(length: int) -> None:
    """R9 (scope thread): 1-4 apologies that differ in a few words, cycling."""
    seen = drive(apology_cycle(length))
    assert seen.stop is not None
    exact = length == 1  # one reply over and over is the same reply in a row
    assert seen.stop.signal is (Signal.REPEATED_ASSISTANT_RESPONSE if exact else Signal.REPLY_CYCLE)
    assert seen.turns <= 3 * length


# --- what the rows rest on ---------------------------------------------------------------------


def test_identical_calls_inside_one_message_still_count() -> None:
    """N6: three identical calls in one answer are a repeat, as before (SPEC §11)."""
    turn = Turn(tuple(("get_order", {"order_id": "1042"}) for _ in range(3)))
    scenario = Scenario("same-three", [User("hi"), turn], {"get_order": lambda order_id: "ok"})
    seen = drive(scenario)
    assert seen.stop is not None
    assert (seen.stop.signal, seen.calls) == (Signal.REPEATED_TOOL_CALL, 0)


def test_a_fan_out_that_brings_anything_new_ends_the_streak() -> None:
    """N6: nine answers that found nothing, then a fan-out where one search finds something:
    the streak starts afresh."""
    d = LoopDetector(clock=lambda: 0.0)
    for n in range(9):
        d.turn_start()
        d.assistant_message("", [("search", {"q": f"q{n}"})])
        d.tool_call("search", {"q": f"q{n}"}, call_id=f"a{n}")
        d.tool_result("search", f'No results for "q{n}"', call_id=f"a{n}")
    d.turn_start()
    queries = [{"q": f"x{n}"} for n in range(4)]
    d.assistant_message("", [("search", q) for q in queries])
    for n, query in enumerate(queries):
        d.tool_call("search", query, call_id=f"b{n}")
    for n, query in enumerate(queries):
        found = "3 results: a.md, b.md" if n == 2 else f'No results for "{query["q"]}"'
        assert not d.tool_result("search", found, call_id=f"b{n}").stops
    assert d._view.quiet == 0


def test_tool_frequency_counts_one_answer_once() -> None:
    """N6: the same search asked in two answers, twice in each, is two occurrences for the
    window rule (the identical pair inside an answer is the repeat rule's)."""
    d = LoopDetector(LoopGuardConfig(repeat_tool_threshold=5), clock=lambda: 0.0)
    for turn in range(3):
        d.turn_start()
        calls = [("search", {"q": "refund"}), ("search", {"q": "refund"})]
        d.assistant_message("", calls)
        for n, (name, args) in enumerate(calls):
            assert not d.tool_call(name, args, call_id=f"{turn}-{n}").stops
        for n in range(2):
            assert not d.tool_result("search", "no refund found", call_id=f"{turn}-{n}").stops
        d.turn_start()
        d.assistant_message("", [("save_note", {"n": turn})])  # work between: no news
        d.tool_call("save_note", {"n": turn}, call_id=f"note{turn}")
        d.tool_result("save_note", f"saved note {turn}", call_id=f"note{turn}")


def test_an_answer_without_a_call_fails_its_turn_only_when_the_model_is_asked_again() -> None:
    """N8: an answer ends the turn; it fails only when another model call follows without a
    new human message (a format check rejecting the call written in it, say); talk never
    does, and ends the streak (§14 N19)."""
    d = LoopDetector(clock=lambda: 0.0)
    for _ in range(10):
        d.user_message()
        d.turn_start()
        d.assistant_message(f"Answer {_letters()}\n```bash\nls reports/{_}\n```")
    assert d._view.failing == 0
    d.turn_start()
    assert d._view.failing == 1
    d.assistant_message("An answer in words only, without a command in it.")
    d.turn_start()
    assert d._view.failing == 0  # talk ends the streak


_WORDS = iter(
    [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
    ]
)


def _letters() -> str:
    return next(_WORDS)


@pytest.mark.parametrize(
    ("name", "args", "changes"),
    [
        ("write_file", {"path": "a.py", "content": "x"}, True),
        ("createUser", {"name": "ada"}, True),
        ("delete_record", {"id": 7}, True),
        ("bash", {"command": "mkdir -p build"}, True),
        ("bash", {"command": "sudo rm -rf /tmp/x"}, True),
        ("bash", {"command": "FOO=1 touch a"}, True),
        ("bash", {"command": "cat > a.py <<'EOF'\nx = 1\nEOF"}, True),
        ("bash", {"command": "echo done >> log.txt"}, True),
        ("bash", {"command": "sed -i 's/a/b/' f.py"}, True),
        ("shell", "cd src", True),
        ("bash", {"command": 'find / -name "jdk*" 2>/dev/null'}, False),
        ("bash", {"command": "grep -c x f.py > /dev/null"}, False),
        ("bash", {"command": "which javac"}, False),
        ("search_dir", {"term": "install JDK"}, False),
        ("get_order", {"order_id": "1042"}, False),
        ("bash", {"command": ""}, False),
        ("bash", {"cmd": 7}, False),
    ],
)
def test_a_call_changes_something_by_its_name_or_its_command(
    name: str, args: Any, changes: bool
) -> None:
    """What N9 calls "a call that changes something", as the README's table says."""
    assert changes_something(name, args) is changes


@pytest.mark.parametrize(
    ("one", "two", "near"),
    [
        ("I'm sorry, could you rephrase that?", "I'm sorry, could you rephrase that?", True),
        ("Your order 1042 has shipped.", "Your order 1043 has shipped!", True),
        ("Could you give me your user ID?", "Could you give me your reservation ID?", False),
        ("Here is your profile.", "Your refund was issued today.", False),
    ],
)
def test_replies_are_nearly_the_same_when_they_share_nearly_all_their_words(
    one: str, two: str, near: bool
) -> None:
    """R9's "nearly identical": numbers and punctuation aside, 80% of the words shared."""
    assert near_reply(reply_sketch(one), reply_sketch(two)) is near


def test_a_restored_view_answers_whether_successes_can_stop_the_run() -> None:
    """The graph guards skip a pass when no successful result could stop the run; the view
    answers that from its exported state, and anything unreadable answers no."""
    d = LoopDetector(clock=lambda: 0.0)
    d.tool_call("read", {"p": 1}, call_id="a")
    state = d.export_state()
    limits, off = Limits.of(LoopGuardConfig()), Limits.of(LoopGuardConfig(no_new_info_calls=0))
    assert successes_cannot_stop(state, limits)
    assert not successes_cannot_stop({**state, "quiet": [9, 0, []]}, limits)
    assert not successes_cannot_stop({**state, "quiet": [4, 4, []]}, limits)  # R12's streak
    assert successes_cannot_stop({**state, "quiet": [9, 0, []]}, off)
    assert not successes_cannot_stop({**state, "quiet": None}, limits)
    assert not successes_cannot_stop({**state, "calls": [["read"]]}, limits)
    assert not successes_cannot_stop({**state, "quiet": ["9", 0, []]}, limits)
    d.tool_result("read", "x", call_id="a")
    d.tool_call("other", {}, call_id="b")
    d.tool_result("other", "y", call_id="b")
    d.tool_call("read", {"p": 1}, call_id="c")  # after a change: decided on its result
    assert not successes_cannot_stop(d.export_state(), limits)


def test_the_view_remembers_what_it_saw_in_a_fixed_size() -> None:
    """What the run has seen is a memory of fixed size (SPEC §13: no text, bounded), and a
    digest that is no hex number is remembered too."""
    d = LoopDetector(clock=lambda: 0.0)
    d.tool_call("read", {"p": 0}, call_id="c0")
    d.tool_result("read", "line 0 of the report", call_id="c0")
    size = len(json.dumps(d.export_state()["memory"]))
    for n in range(1, 800):
        d.tool_call("read", {"p": n}, call_id=f"c{n}")
        d.tool_result("read", f"line {n} of the report", call_id=f"c{n}")
    assert len(json.dumps(d.export_state()["memory"])) <= 2 * size
    memory = RunView(d._view.limits).memory
    # new, and an acknowledgement (SPEC §14 R19: a wait may pace its neighbours)
    assert memory.judge("=", None, "not-hex!", again=False, failed=False) == NEW | ACK
    # seen: an acknowledgement again, nothing new
    assert memory.judge("=", None, "not-hex!", again=False, failed=False) == ACK


@pytest.mark.parametrize(
    "broken",
    [
        {"batch": ["x", 0]},
        {"memory": ["zz", None, 0]},
        {"turn": [None, 0, "yes", 0, True, False, 0]},
        {"quiet": [0, 0, [7]]},
    ],
)
def test_a_malformed_view_state_is_refused_whole(broken: dict[str, Any]) -> None:
    """A state with one bad field is not taken: the run starts afresh."""
    d = LoopDetector(clock=lambda: 0.0)
    d.tool_call("read", {"p": 1})
    state = {**d.export_state(), **broken}
    other = LoopDetector(clock=lambda: 0.0)
    assert other.restore_state(state) is False
    assert other.export_state()["calls"] == []


def _rejected(code: str) -> str:
    """A linter's refusal of an edit, echoing the code the edit would have written."""
    numbered = "\n".join(f"{n}:{line}" for n, line in enumerate(code.splitlines(), 1))
    return (
        "Your proposed edit has introduced new syntax error(s).\nERRORS:\n"
        "- E999 SyntaxError: invalid syntax\n"
        f"This is how your edit would have looked if applied\n{numbered}\n"
        "Your changes have NOT been applied. Please fix your edit command and try again."
    )


def test_an_error_that_echoes_the_call_is_keyed_without_the_echo() -> None:
    """The same refusal of edits with different code is one error (a same_error loop), and so
    is ``command not found`` for different commands; errors that echo nothing keep their
    text."""
    codes = [
        "public class Main {\n    int x = 1;\n}",
        "import java.util.List;\npublic class Main {\n    List<String> names;\n}",
    ]
    keys = {
        outcome(error=_rejected(code), tool="edit", tokens=arg_tokens({"text": code})).key
        for code in codes
    }
    assert len(keys) == 1
    sudo = {
        outcome(
            error=f"sudo: {name}: command not found",
            tool="sudo",
            tokens=arg_tokens({"command": f"sudo {name} /etc/hosts"}),
        ).key
        for name in ("nano", "vi", "gedit")
    }
    assert len(sudo) == 1
    plain = {outcome(error=f"disk {name} is full", tool="save").key for name in ("a", "b")}
    assert len(plain) == 2


@pytest.mark.parametrize(
    ("error", "args"),
    [
        pytest.param("exit status 2 after 5 tries", {"retries": "5"}, id="only-a-number"),
        pytest.param(
            "the parser stopped in config.yaml at an unexpected token, see the manual",
            {"path": "config.yaml"},
            id="a-long-line-that-names-it-once",
        ),
    ],
)
def test_an_error_that_echoes_only_a_number_or_a_word_in_passing_keeps_its_text(
    error: str, args: dict[str, str]
) -> None:
    """Numbers are never echoes, and a long line that names an argument once is about more
    than the argument: the error is keyed as if the call had no arguments."""
    assert outcome(error=error, tool="run", tokens=arg_tokens(args)).key == (
        outcome(error=error, tool="run").key
    )


def test_a_long_result_of_one_line_repeated_has_a_short_sketch() -> None:
    """A view of 20+ identical lines: its sketch is that line's hash alone, the same for
    any number of the line, another for another line."""
    same = outcome("=====\n" * 25).near
    assert same is not None
    assert len(same) == 8
    assert same == outcome("=====\n" * 30).near
    assert same != outcome("-----\n" * 25).near


@pytest.mark.parametrize(
    ("middle", "width"), [("é", 80), ("x", 120)], ids=["more-bytes-than-characters", "ascii"]
)
def test_a_long_result_is_sketched_from_its_first_and_last_bytes(middle: str, width: int) -> None:
    """Beyond 32 KB of UTF-8, only the lines of its first 4 KB and last 2 KB are sketched:
    a result that differs only in between has the same sketch (with two bytes a character, a
    text of fewer characters is that long too)."""
    head = "".join(f"head line {chr(97 + n % 26)}\n" for n in range(400))
    tail = "".join(f"tail line {chr(97 + n % 26)}\n" for n in range(200))
    one = head + f"{middle * width}\n" * 300 + tail
    other = head + f"{middle * (width - 10)} and more\n" * 350 + tail
    assert len(one) <= 32 * 1024 < len(one.encode()) or len(one) > 32 * 1024
    assert outcome(one).near == outcome(other).near
    assert outcome(one).key != outcome(other).key


def test_the_window_rule_counts_an_answer_with_a_call_twice_once() -> None:
    """N6: four answers each asking for the same search twice: the window rule sees four
    occurrences at the fourth answer, not at the second."""
    d = LoopDetector(clock=lambda: 0.0)
    stopped_at = None
    for turn in range(4):
        d.turn_start()
        pair = [("search", {"q": "refund"}), ("search", {"q": "refund"})]
        d.assistant_message("", pair)
        for n, (name, args) in enumerate(pair):
            verdict = d.tool_call(name, args, call_id=f"{turn}-{n}")
            if verdict.stops and stopped_at is None:
                stopped_at = (turn, verdict.signal)
        for n in range(2):
            d.tool_result("search", "no refund found", call_id=f"{turn}-{n}")
        d.turn_start()
        d.assistant_message("", [("save_note", {"n": turn})])  # work between: no news
        d.tool_call("save_note", {"n": turn}, call_id=f"note{turn}")
        d.tool_result("save_note", f"saved note {turn}", call_id=f"note{turn}")
    assert stopped_at == (3, Signal.TOOL_FREQUENCY)


def test_a_restored_state_keeps_which_calls_one_answer_made() -> None:
    """The calls of one answer are still one answer after an export and a restore, even when
    the answer's first call has left the history."""
    d = LoopDetector(clock=lambda: 0.0)
    d.turn_start()
    queries = [("search", {"q": f"route {n}"}) for n in range(30)]
    d.assistant_message("", queries)
    for n, (name, args) in enumerate(queries):
        d.tool_call(name, args, call_id=f"c{n}")
    other = LoopDetector(clock=lambda: 0.0)
    assert other.restore_state(d.export_state()) is True
    calls = list(other._view.calls)
    assert len(calls) == 25
    assert all(call.batch is calls[0].batch for call in calls)  # one answer, still
    assert other._view.batch is calls[0].batch
    assert other.export_state() == d.export_state()  # joined to it as the live run was


# --- SPEC §14 N18: the same question asked again ----------------------------------------------


def test_n18_the_same_question_answered_as_before_is_never_stopped() -> None:
    """N18: six times the same question (case and punctuation aside), six times looked up
    and given the same true answer: consistency, not a repeated response."""
    seen = drive(same_question())
    assert seen.stop is None
    assert seen.turns == 12


def test_n18_the_same_answer_without_a_lookup_is_r9() -> None:
    """Without a lookup between, the same question answered alike reads as an app's own note
    repeated inside a run (a critic asking "answer again"): §12 R9, stopped at the 3rd."""
    seen = drive(same_question(lookup=False))
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_ASSISTANT_RESPONSE
    assert seen.turns == 3


def test_n18_without_the_message_s_words_the_same_reply_is_r9() -> None:
    """A host that does not pass the human message's text gets §12 R9 as before: the third
    identical reply in a row is stopped."""
    detector = LoopDetector(LoopGuardConfig(scope="thread"), clock=lambda: 0.0)
    verdicts = []
    for _ in range(3):
        detector.user_message()
        detector.turn_start()
        verdicts.append(detector.assistant_message("Your order A-10234 shipped on December 2.", []))
    assert [v.signal for v in verdicts] == [None, None, Signal.REPEATED_ASSISTANT_RESPONSE]


def test_n18_the_same_reply_to_other_questions_is_still_r9() -> None:
    """R9 beside N18: a question asked twice, then two other questions, each answered with
    the same reply and no lookup: stopped at the 3rd reply."""
    seen = drive(same_reply_to_other_questions())
    assert seen.stop is not None
    assert seen.stop.signal is Signal.REPEATED_ASSISTANT_RESPONSE
    assert seen.turns == 3


def test_n18_the_question_survives_the_detector_s_state() -> None:
    """The question a reply answered is part of the exported state: a detector restored from
    it (a restarted server) still knows the next message asks it again (with a threshold of
    2, one reply not known to answer the same question would stop)."""
    config = LoopGuardConfig(scope="thread", repeat_assistant_threshold=2)
    first = LoopDetector(config, clock=lambda: 0.0)
    reply = "Your order A-10234 shipped on December 2."
    first.user_message("What's the status of order A-10234?")
    first.turn_start()
    first.assistant_message(reply, [])
    second = LoopDetector(config, clock=lambda: 0.0)
    second.restore_state(first.export_state())
    for n in range(3):
        second.user_message("what's the status of order A-10234")
        second.turn_start()
        second.assistant_message("", [("get_order_status", {"order_id": "A-10234"})])
        second.tool_call("get_order_status", {"order_id": "A-10234"}, call_id=f"c{n}")
        second.tool_result("get_order_status", "shipped on 2026-12-02", call_id=f"c{n}")
        second.turn_start()
        assert not second.assistant_message(reply, []).stops


def test_n18_a_question_s_key_is_its_words() -> None:
    """Case and punctuation aside, the same words are the same question; a message without
    words (an emoji, punctuation) has no key; content blocks asked again have one key."""
    from langchain_loop_guard._core._signature import question_key

    asked = question_key("Hi, what's the status of my order A-10234?")
    assert asked is not None
    assert question_key("hi what s the STATUS of my order a 10234") == asked
    blocks = [{"type": "text", "text": "Hi! What's the status of my order A-10234"}]
    assert question_key(blocks) == question_key([dict(block) for block in blocks])
    assert question_key("What's the status of my order A-10235?") != asked
    assert question_key("?!  …") is None
    assert question_key("") is None


@pytest.mark.parametrize(
    ("text", "talk"),
    [
        ("Agreed: the analyst drafts the report and I review it tomorrow.", True),
        ("I will call `ls` next to see the files.", True),
        ("THOUGHT: list the files\n```bash\nls -la\n```", False),
        ("<function=bash>\n<parameter=command>ls\n", False),
        ('{"name": "search", "arguments": {"q": "refund policy"}}', False),
        ("echo<|channel|>commentary", False),
        ("   ", False),
    ],
)
def test_n19_talk_is_words_without_a_would_be_call(text: str, talk: bool) -> None:
    """§14 N19: an answer without calls is talk unless it holds a call a harness would
    reject (a fenced block, call markup, a JSON call); a blank one is no talk."""
    from langchain_loop_guard._core._signature import talk as is_talk

    assert is_talk(text) is talk
