"""SPEC §11 (v3): the rows real agents taught us, each through the pure detector.

R1-R7 must stop within their span; N1-N5 must never stop. Each rule of ``_rules.RULES`` is
also tested on its own edges here (and in ``test_detector.py``'s threshold tables).
"""

from __future__ import annotations

from typing import Any

import pytest

from langchain_loop_guard import LoopGuardConfig, Signal
from langchain_loop_guard._core._detector import DetectorEvent, LoopDetector, Verdict
from langchain_loop_guard._core._rules import RULES
from langchain_loop_guard._core._signature import outcome
from langchain_loop_guard._core._view import Limits, RunView


def stops(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.stops]


class Agent:
    """Drives a detector the way an agent loop does: a turn, an answer, its calls, results."""

    def __init__(self, **config: Any) -> None:
        self.detector = LoopDetector(LoopGuardConfig(**config), clock=lambda: 0.0)
        self.verdicts: list[Verdict] = []
        self.calls = 0

    def turn(self, *calls: tuple[str, Any, Any], error: bool = False) -> Verdict | None:
        """One model turn making ``calls`` (name, args, output); the first stop, if any."""
        d = self.detector
        self._add(d.turn_start())
        self._add(d.assistant_message("", [(name, args) for name, args, _ in calls]))
        for name, args, output in calls:
            self.calls += 1
            verdict = d.tool_call(name, args, call_id=f"c{self.calls}")
            self._add(verdict)
            if verdict.stops:
                break
            if error:
                self._add(d.tool_result(name, error=output, call_id=f"c{self.calls}"))
            else:
                self._add(d.tool_result(name, output, call_id=f"c{self.calls}"))
        return self.first_stop

    def answer(self, text: str, *, in_context: bool = True) -> Verdict | None:
        """One model turn answering ``text`` without a tool call."""
        self._add(self.detector.turn_start())
        self._add(self.detector.assistant_message(text, in_context=in_context))
        return self.first_stop

    def user(self) -> None:
        self._add(self.detector.user_message())

    def _add(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)

    @property
    def first_stop(self) -> Verdict | None:
        found = stops(self.verdicts)
        return found[0] if found else None


# --- must stop -----------------------------------------------------------------------------------


def _view(n: int) -> str:
    """An edit tool's view of a file (20 lines and more) into which the same block was
    inserted ``n`` times."""
    head = [f"{i}: import {name}" for i, name in enumerate(["os", "re", "sys", "json"], 1)]
    body = [f"{i}: def step_{chr(96 + i)}(): return {i}" for i in range(5, 21)]
    block = [f"{i}: value = compute(x)" for i in range(21, n + 21)]
    return f"[File: a.py ({n + 20} lines total)]\n" + "\n".join(head + body + block)


def test_r1_the_same_edit_whose_long_view_grows_stops_by_the_6th() -> None:
    """R1' (SPEC §12): the same edit applied again and again, its file view (20+ lines)
    growing by the same block: stopped by the 6th identical call (the default, 4, stops at
    the 4th)."""
    agent = Agent()
    for n in range(1, 10):
        stop = agent.turn(("edit", {"text": "value = compute(x)"}, _view(n)))
        if stop:
            break
    assert stop is not None
    assert (stop.signal, stop.count) == (Signal.NEAR_REPEAT, 4)
    assert agent.calls <= 6


def test_r1_a_short_output_whose_counter_grows_is_progress() -> None:
    """N7 (SPEC §12, which withdrew §11 R1's short counter): the same call, a short output
    whose only change is a counter that grows, is never a near repeat."""
    agent = Agent()
    for n in range(1, 16):
        assert agent.turn(("run", {"x": 1}, f"ran x: counter={n * 7}")) is None


def test_r1_near_repeat_respects_a_tool_override() -> None:
    """A call loosened by ``tool_threshold_overrides`` runs past the near-repeat limit."""
    agent = Agent(tool_threshold_overrides={"edit": 12})
    for n in range(1, 12):
        assert agent.turn(("edit", {"text": "value = compute(x)"}, _view(n))) is None


@pytest.mark.parametrize(
    "outputs",
    [
        pytest.param(["request id 3f2a9b8c7d6e5f40a1", "request id 9e8d7c6b5a4f3e2d1c"], id="hex"),
        pytest.param(["req_8f3a9c21ab ok", "req_1b2c3d4e5f ok"], id="req"),
        pytest.param(["msg_01Abc23Def", "msg_09Xyz87Uvw"], id="msg"),
        pytest.param(["toolu_01A2B3C4D5", "toolu_09Z8Y7X6W5"], id="toolu"),
        pytest.param(["call_abc123def", "call_zyx987wvu"], id="call"),
        pytest.param(["chatcmpl-AbC123xYz", "chatcmpl-QrS987tUv"], id="chatcmpl"),
        pytest.param(["run-1a2b3c4d5e", "run-9z8y7x6w5v"], id="run"),
        pytest.param(
            [
                "lc_123e4567-e89b-12d3-a456-426614174000",
                "lc_9b2f6a1c-0d4e-4f5a-8b6c-7d8e9f0a1b2c",
            ],
            id="lc-uuid",
        ),
        pytest.param(
            ["/bin/bash: line 11301: foo: command not found", "/bin/bash: line 11: foo: x"][:1] * 2,
            id="bash-line-same",
        ),
    ],
)
def test_r2_volatile_ids_are_the_same_outcome(outputs: list[str]) -> None:
    """R2: outputs differing only by ids that carry no progress are one outcome."""
    assert len({outcome(text).key for text in outputs}) == 1
    agent = Agent()
    for text in [*outputs, outputs[0]]:
        stop = agent.turn(("fetch", {"q": 1}, text))
    assert stop is not None
    assert stop.signal is Signal.REPEATED_TOOL_CALL


def test_r2_bash_line_numbers_are_masked_in_outputs() -> None:
    """R2: bash's ``line N:`` prefix changes on every call."""
    a = outcome("/bin/bash: line 11301: javac: command not found").key
    assert a == outcome("/bin/bash: line 11305: javac: command not found").key


def test_r3_turns_whose_calls_all_fail_stop_within_8_whatever_the_texts() -> None:
    """R3: 12 turns, each call different, errors alternating: stopped at the 6th turn."""
    agent = Agent()
    for n in range(12):
        error = ["SyntaxError: invalid syntax", "NameError: name 'x' is not defined"][n % 2]
        stop = agent.turn(("run", {"code": f"attempt {n}"}, error), error=True)
        if stop:
            break
    assert stop is not None
    assert (stop.signal, stop.count, n + 1) == (Signal.FAILING_TURNS, 6, 6)


_TALK = [
    "I will now run the tests.",
    "Let me look at the failing module first.",
    "Next I should check the configuration file.",
    "The import path seems wrong; I will fix it.",
    "Maybe the fixture is missing, let me see.",
    "I think the database URL is not set.",
    "Let me try compiling the project again.",
    "Perhaps the environment needs a restart.",
    "I will inspect the logs for more detail.",
]
_COMMANDS = [
    "pytest -x",
    "sed -n 1,40p app/models.py",
    "cat setup.cfg",
    "grep -rn 'import app' tests",
    "ls tests/fixtures",
    "env | grep DATABASE",
    "make build",
    "systemctl restart app",
    "tail -n 50 logs/app.log",
]
_REJECTED = [
    f"{text}\n<function=bash>\n<parameter=command>{command}\n"
    if n % 2
    else f"{text}\n```bash\n{command}\n```"
    for n, (text, command) in enumerate(zip(_TALK, _COMMANDS, strict=True))
]
"""Answers a harness rejects: each holds a call in its text (call markup, a fenced command)
that the model should have made as a tool call."""


def test_r3_turns_without_a_valid_call_stop_within_8() -> None:
    """R3: 9 turns in a row with no valid tool call at all (a format check rejecting each
    answer's call written as text): an answer fails its turn when the model is asked again
    without a new human message (SPEC §12 N8), so the 6th fails when the 7th model call
    starts."""
    agent = Agent()
    answered = 0
    for text in _REJECTED:
        answered += 1
        stop = agent.answer(text)
        if stop:
            break
    assert stop is not None
    assert (stop.signal, answered) == (Signal.FAILING_TURNS, 7)


def test_r3_talk_is_no_turn_without_a_valid_call() -> None:
    """§14 N19 beside R3: the same answers without the calls written in them are talk (an
    agent thinking aloud, agents planning together), and fail no turn."""
    agent = Agent()
    for text in _TALK:
        assert agent.answer(text) is None


def test_r3_one_success_ends_the_failing_streak() -> None:
    """Five failing turns, a working one, five failing again: no stop."""
    agent = Agent()
    for n in range(11):
        if n == 5:
            assert agent.turn(("ls", {}, "a.py b.py")) is None
        else:
            error = f"Error: unknown name '{chr(97 + n)}'"
            assert agent.turn(("run", {"n": n}, error), error=True) is None


def test_r3_a_turn_judged_at_the_next_model_call_when_its_calls_were_not_announced() -> None:
    """Without an answer saying how many calls a turn makes, it is judged when the next
    model call starts; the 6th failing turn stops the run there."""
    d = LoopDetector(clock=lambda: 0.0)
    verdicts = []
    for n in range(7):
        verdicts.append(d.turn_start())
        d.tool_call("run", {"n": n})
        d.tool_result("run", error=["bad", "worse"][n % 2])
    assert [v.stops for v in verdicts] == [False] * 6 + [True]
    assert verdicts[-1].signal is Signal.FAILING_TURNS


def test_r4_the_same_failing_call_between_successes_that_say_nothing_stops_at_the_3rd() -> None:
    """R4: book(x) → error, think(i) → ok (empty), three times: stopped at the 3rd error."""
    agent = Agent()
    booking = {"flight": "HAT023", "paid": 1625}
    for i in range(3):
        stop = agent.turn(("book", booking, "Error: payment does not add up"), error=True)
        if stop:
            break
        assert agent.turn(("think", {"thought": f"idea {i}"}, "")) is None
    assert stop is not None
    assert (stop.signal, stop.tool, i + 1) == (Signal.REPEATED_TOOL_ERROR, "book", 3)


def test_r4_a_success_that_says_something_new_ends_the_streak() -> None:
    """run → E, edit(a) → new file view, run → E, edit(b), run → E: each edit is progress
    (a 4th identical result would be a repeat of its own, N1)."""
    agent = Agent()
    for i in range(3):
        assert agent.turn(("run", {}, "Error: javac not found"), error=True) is None
        assert agent.turn(("edit", {"n": i}, f"[File: A.java] line {i}: fixed v{i}")) is None


def _lap(file: int) -> list[tuple[str, Any, Any]]:
    return [
        ("search", {"q": "A"}, "3 matches"),
        ("open", {"path": f"F{file}.java"}, f"class F{file} {{}}"),
        ("search_file", {"q": "x"}, "No matches"),
        ("scroll", {}, "(end of file)"),
    ]


def test_r5_a_four_call_block_with_a_rotating_file_stops_within_the_3rd_lap() -> None:
    """R5: search / open F / search_file / scroll, F rotating over 3 files."""
    agent = Agent()
    for lap in range(5):
        for call in _lap(lap % 3):
            stop = agent.turn(call)
            if stop:
                break
        if stop:
            break
    assert stop is not None
    assert (stop.signal, lap + 1) == (Signal.REPEATED_SEQUENCE, 3)
    assert stop.tools == ("search", "open", "search_file", "scroll")


def test_r5_longer_exact_cycles_stop_within_the_3rd_lap() -> None:
    """A 5-call block repeated with identical results: longer than any seed cycle."""
    agent = Agent()
    for n in range(15):
        stop = agent.turn(("tool" + "abcde"[n % 5], {}, "same"))
        if stop:
            break
    assert stop is not None
    assert n + 1 <= 15


def _path(n: int) -> list[tuple[str, Any, Any]]:
    """An exploration path of ``n`` different calls (search, open, goto …), each with its
    result."""
    tools = ["search_dir", "open", "search_file", "goto", "scroll_down"]
    return [(tools[i % 5], {"i": i}, f"{tools[i % 5]} result {i}") for i in range(n)]


@pytest.mark.parametrize("length", [7, 11, 12])
def test_r5_a_long_path_walked_twice_and_begun_again_stops(length: int) -> None:
    """A path of up to twice ``max_sequence_length`` calls walked again exactly, calls and
    results: stopped at the first call of its third walk."""
    agent = Agent()
    for n in range(3 * length):
        stop = agent.turn(_path(length)[n % length])
        if stop:
            break
    assert stop is not None
    assert (stop.signal, n + 1) == (Signal.REPEATED_SEQUENCE, 2 * length + 1)


def test_r5_a_longer_path_or_one_whose_results_change_goes_on() -> None:
    """A path longer than twice ``max_sequence_length``, or one whose results change on the
    second walk (the walk found something), is never a repeated sequence."""
    agent = Agent()
    for n in range(39):
        assert agent.turn(_path(13)[n % 13]) is None
    changing = Agent(no_new_info_calls=0)
    for n in range(30):
        name, args, output = _path(10)[n % 10]
        assert changing.turn((name, args, f"{output} walk {n // 10}")) is None
    off = Agent(max_sequence_length=0)
    for n in range(33):
        assert off.turn(_path(11)[n % 11]) is None


def test_r5_a_path_mostly_of_one_call_is_left_to_the_repeat_rules() -> None:
    """A walk of mostly one call again and again is a repeat (the repeat, cycle and window
    rules decide it), not a sequence."""
    d = LoopDetector(
        LoopGuardConfig(
            repeat_tool_threshold=20,
            frequency_window_size=20,
            repeat_frequency_threshold=20,
            no_progress_calls=0,
            near_repeat_threshold=0,
            no_new_info_calls=0,
            cycle_repeats=3,
        ),
        clock=lambda: 0.0,
    )
    path = [("a", 1)] + [("poll", 0)] * 6
    verdicts = []
    for n in range(21):
        name, arg = path[n % 7]
        verdicts.append(d.tool_call(name, {"x": arg}))
        d.tool_result(name, "same")
    assert not any(v.signal is Signal.REPEATED_SEQUENCE for v in verdicts)


def test_r5_two_rotating_positions_are_progress() -> None:
    """Reading two new files every lap is browsing, not a loop."""
    agent = Agent(no_new_info_calls=0)
    for lap in range(6):
        for call in [
            ("search", {"q": "A"}, "3 matches"),
            ("open", {"path": f"F{lap}.java"}, f"class F{lap}"),
            ("search_file", {"q": "x"}, "No matches"),
            ("open", {"path": f"G{lap}.java"}, f"class G{lap}"),
        ]:
            assert agent.turn(call) is None


def test_r6_one_tool_with_new_arguments_and_nothing_new_stops_by_the_10th() -> None:
    """R6: ``No matches found for "<arg>"`` 20 times: stopped by the 10th call."""
    agent = Agent()
    for n in range(20):
        name = f"Handler{n}*"
        stop = agent.turn(("find_file", {"name": name}, f'No matches found for "{name}" in /repo'))
        if stop:
            break
    assert stop is not None
    assert (stop.signal, stop.tool) == (Signal.NO_NEW_INFO, "find_file")
    assert n + 1 <= 10


def test_r6_empty_outputs_are_no_information() -> None:
    """R6: a search that prints nothing, 20 times with new arguments."""
    agent = Agent()
    for n in range(20):
        stop = agent.turn(("find", {"command": f"find . -name x{n}"}, ""))
        if stop:
            break
    assert stop is not None
    assert (stop.signal, n + 1 <= 10) == (Signal.NO_NEW_INFO, True)


def test_r6_a_search_made_before_neither_adds_to_nor_ends_the_streak() -> None:
    """Queries asked again (a cycle of searches) are the repeat and sequence rules'
    business: only calls with new arguments count toward no new information."""
    agent = Agent(max_sequence_length=0, no_progress_calls=0)
    names = [f"Q{n}" for n in range(5)]
    for name in names * 4:
        output = f'No matches found for "{name}" in /repo'
        assert agent.turn(("search_dir", {"q": name}, output)) is None
    assert agent.detector._view.quiet == 5


def test_r6_a_result_that_echoes_nothing_is_not_counted() -> None:
    """Twenty writes answered ``ok``: a writer's ``ok`` is not a search that found nothing."""
    agent = Agent()
    for n in range(20):
        assert agent.turn(("write_file", {"path": f"f{n}.py", "text": "x"}, "ok")) is None


def test_r7_the_same_failure_across_user_turns_is_stopped_by_the_replies_going_round() -> None:
    """R7 as SPEC §13 N13 leaves it (scope thread): failing update(x), the same answer, a new
    human message, four times. A new human message is new information for the call and error
    counts; the conversation going round (the same reply a 3rd time) is what stops it."""
    agent = Agent(scope="thread")
    stop = None
    for _ in range(4):
        assert agent.turn(("update", {"x": 1}, "Error: record is locked"), error=True) is None
        stop = agent.answer("I could not update the record.")
        if stop:
            break
        agent.user()
    assert stop is not None
    assert (stop.signal, stop.count) == (Signal.REPEATED_ASSISTANT_RESPONSE, 3)


# --- must never stop -----------------------------------------------------------------------------


def test_n1_a_rerun_after_a_change_executes_and_a_new_result_goes_on() -> None:
    """N1: run → A, edit(a), run → A, edit(b), run → A, edit(c), run → B: nothing stops."""
    agent = Agent()
    for n, result in enumerate(["A", "A", "A", "B"]):
        if n:
            assert agent.turn(("edit", {"patch": n}, f"patched {'abc'[n - 1]}")) is None
        assert agent.turn(("run", {}, f"tests: {result}")) is None


def test_n1_a_fourth_identical_result_still_stops_on_its_result() -> None:
    """N1: the 4th run executes; an identical 4th result stops the run (one more execution)."""
    agent = Agent()
    for n in range(4):
        if n:
            agent.turn(("edit", {"patch": n}, f"patched {n}"))
        stop = agent.turn(("run", {}, "tests: A"))
    assert stop is not None
    assert (stop.signal, stop.action) == (Signal.TOOL_FREQUENCY, "abort")
    assert agent.calls == 7


def test_n2_a_grader_answering_yes_for_five_documents_is_never_stopped() -> None:
    """N2: a helper model's identical answers to new inputs."""
    agent = Agent()
    for _ in range(5):
        assert agent.answer("yes", in_context=False) is None


def test_n3_one_successful_call_per_human_turn_is_never_stopped() -> None:
    """N3 (scope thread): get_profile() once per human turn, the same answer each time."""
    agent = Agent(scope="thread")
    answers = [
        "Your name on the account is Ada Lovelace.",
        "The email we have for you is ada@example.com.",
        "You are based in London, according to your profile.",
        "You are on the Pro plan, renewed every March.",
        "Your preferred language is English.",
        "Your time zone is set to Europe/London.",
        "We have no phone number on file for you.",
        "You belong to the Analytical Engines team.",
    ]
    for text in answers:
        agent.user()
        assert agent.turn(("get_profile", {}, "Ada, ada@example.com")) is None
        assert agent.answer(text) is None


def test_n3_a_new_human_message_releases_a_stopped_run() -> None:
    """The user saw the stop and wrote again: the run goes on."""
    agent = Agent(scope="thread")
    for _ in range(3):
        agent.turn(("read", {"p": 1}, "same"))
    assert agent.detector.tripped is not None
    agent.user()
    assert agent.detector.tripped is None
    assert agent.detector.turn_start().action == "allow"


def test_n4_status_polls_whose_words_change_are_never_stopped() -> None:
    """N4: check(job) → Pending, Running, Pending, … 16 times."""
    agent = Agent()
    for n in range(16):
        assert agent.turn(("check", {"job": 7}, ["Pending", "Running"][n % 2])) is None


def test_n5_paging_and_directory_walks_are_never_stopped() -> None:
    """N5: scroll_down through a file; ls through directories; edit → test, output changing."""
    agent = Agent()
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
        "nu",
        "xi",
    ]
    for n, word in enumerate(words):
        page = f"line {n * 100}: def {word}(): ...\nline {n * 100 + 1}: return {word}_value"
        assert agent.turn(("scroll_down", {}, page)) is None
    for word in words:
        assert agent.turn(("ls", {"dir": f"src/{word}"}, f"{word}.py {word}_util.py")) is None
    for name in ["login", "logout", "signup", "reset", "profile", "search"]:
        assert agent.turn(("edit", {"fix": name}, f"patched {name}")) is None
        assert agent.turn(("pytest", {}, f"FAILED test_{name}")) is None


# --- the rules, one at a time ---------------------------------------------------------------------


def test_every_hard_signal_has_exactly_one_rule_in_report_order() -> None:
    """``RULES`` lists the hard signals once each, in ``Signal``'s order."""
    hard = [s for s in Signal if not s.is_soft]
    assert [rule.signal for rule in RULES] == hard


def test_the_view_keeps_a_bounded_amount_of_information_and_replies() -> None:
    """Many distinct failing calls, tools, results and replies: what the view remembers of
    them stays bounded (the memory of what was seen has a fixed size)."""
    d = LoopDetector(LoopGuardConfig(scope="thread"), clock=lambda: 0.0)
    for n in range(100):
        d.tool_call(f"tool{n}", {"n": n})
        d.tool_result(f"tool{n}", error=f"Error {n}")
    memory = len(repr(d._view.memory.export()))
    for n in range(100):
        d.tool_call("find", {"name": f"x{n}"})
        d.tool_result("find", f"found x{n} here: entry {n}")
    for n in range(100):
        d.assistant_message(f"reply number {n} with the word {chr(97 + n % 26)}")
    view = d._view
    assert len(repr(view.memory.export())) <= memory + 600  # a second generation, at most
    assert len(view.quiet_tools) <= 4
    assert len(view.replies.recent) <= 12


def test_a_replayed_result_without_a_sketch_compares_its_outcome() -> None:
    """Older traces have no near sketch: identical outcomes are near, different are not."""
    d = LoopDetector(clock=lambda: 0.0)
    for n in range(6):
        d.replay(DetectorEvent(kind="tool_call", tool="edit", digest="s1", call_id=f"c{n}"))
        verdict = d.replay(
            DetectorEvent(kind="tool_result", tool="edit", digest=f"o{n}", call_id=f"c{n}")
        )
        assert not verdict.stops
    assert not d.replay(DetectorEvent(kind="tool_call", tool="edit", digest="s1")).stops


def test_only_the_sequence_rule_can_fire_on_a_call_the_history_does_not_hold() -> None:
    """The premise of asking fewer rules about a new call: every other call rule needs an
    earlier call with the same signature in the history."""
    from langchain_loop_guard._core._rules import CALL_CHECKS, NEW_CALL_CHECKS
    from langchain_loop_guard._core._view import Call

    assert [r.on_call for r in RULES if r.new_calls] == list(NEW_CALL_CHECKS)
    others = [check for check in CALL_CHECKS if check not in NEW_CALL_CHECKS]
    view = RunView(Limits.of(LoopGuardConfig(repeat_tool_threshold=2, cycle_repeats=2)))
    for n in range(40):  # a history of every shape: repeats, cycles, new calls
        call = Call("t", f"s{(n * 7) % 5 if n % 3 else n}", None)
        known = view.add_call(call)
        seq = list(view.calls)
        sigs = [c.sig for c in seq]
        if not known:
            assert all(check(view, seq, sigs) is None for check in others)
        call.kind, call.outcome = "ok", "same"


def test_limits_put_the_v3_signals_off_without_progress_awareness() -> None:
    """``progress_aware=False`` is the seed's exact behaviour: none of SPEC §11's signals."""
    limits = Limits.of(LoopGuardConfig(progress_aware=False))
    assert (
        limits.near_repeat,
        limits.max_sequence,
        limits.no_new_info,
        limits.failing_turns,
        limits.no_progress,
    ) == (0, 0, 0, 0, 0)
    assert RunView(limits).limits is limits


def test_restoring_a_state_with_a_malformed_turn_or_call_starts_afresh() -> None:
    """A state whose turn flags are not booleans, or a call of an unknown kind: not taken."""
    d = LoopDetector(clock=lambda: 0.0)
    d.tool_call("read", {"p": 1})
    d.tool_result("read", "x")
    state = d.export_state()
    bad_turn = {**state, "turn": [None, 0, "yes", True, 0]}
    bad_call = {**state, "calls": [[*state["calls"][0][:3], "bogus", *state["calls"][0][4:]]]}
    assert LoopDetector().restore_state(state)
    assert not LoopDetector().restore_state(bad_turn)
    assert not LoopDetector().restore_state(bad_call)


def test_a_near_repeat_needs_one_kind_and_two_short_results_to_be_equal() -> None:
    """A success is never nearly a failure; two short results are nearly the same only when
    equal; two long ones read by their lines are."""
    from langchain_loop_guard._core._counting import alike_results as _alike_results
    from langchain_loop_guard._core._novelty import LINES
    from langchain_loop_guard._core._view import Call

    ok, error, other, long_a, long_b = (Call("t", "s", None) for _ in range(5))
    ok.kind, ok.outcome = "ok", "o1"
    error.kind, error.outcome = "error", "o1"
    other.kind, other.outcome = "ok", "o2"
    for call, outcome_key in ((long_a, "o3"), (long_b, "o4")):
        call.kind, call.outcome, call.brought = "ok", outcome_key, LINES
    assert not _alike_results(ok, error)
    assert not _alike_results(ok, other)
    assert _alike_results(ok, ok)
    assert _alike_results(long_a, long_b)
    assert not _alike_results(long_a, ok)


def test_a_block_whose_first_lap_differed_in_several_positions_is_no_sequence() -> None:
    """The last two laps nearly agree, but the first lap differed in two positions: more
    than one rotating position, so no repeated sequence."""
    d = LoopDetector(LoopGuardConfig(no_new_info_calls=0, near_repeat_threshold=0))
    laps = [
        [("search", "q0"), ("open", "f0"), ("grep", "x"), ("scroll", "s")],
        [("search", "q1"), ("open", "f1"), ("grep", "x"), ("scroll", "s")],
        [("search", "q1"), ("open", "f2"), ("grep", "x"), ("scroll", "s")],
    ]
    verdicts = []
    for lap in laps:
        for name, arg in lap:
            verdicts.append(d.tool_call(name, {"a": arg}))
            d.tool_result(name, f"{name} result")
    assert not any(v.signal is Signal.REPEATED_SEQUENCE for v in verdicts)
