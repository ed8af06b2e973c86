"""Hostile input, load and leaks: what every guard object must withstand (SPEC §5, §8)."""

from __future__ import annotations

import gc
import json
import logging
import re
import stat
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from guard_scenarios import AGAIN, LOOPS, loop_harness, stop_message
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolCall
from langchain_core.outputs import ChatGeneration, LLMResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphInterrupt

import langchain_loop_guard._integrations._handler as handler_module
from langchain_loop_guard import LoopDetector, LoopGuardConfig, LoopGuardConfigError, Signal
from langchain_loop_guard._core._canonical import call_signature
from langchain_loop_guard._core._masks import VolatileFields
from langchain_loop_guard._core._signature import error_key, outcome_digest
from langchain_loop_guard._integrations._handler import LoopGuardCallbackHandler
from langchain_loop_guard._integrations._middleware import LoopGuardMiddleware
from langchain_loop_guard._integrations._node import LoopGuardNode
from langchain_loop_guard._integrations._stop import LoopDetected
from langchain_loop_guard._replay._trace import read_trace
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

# --- helpers ---------------------------------------------------------------------------------


class Run:
    """One top-level run of a handler, its callbacks fired as LangGraph fires them."""

    def __init__(self, handler: LoopGuardCallbackHandler, thread_id: str | None = None) -> None:
        self.handler = handler
        self.id = uuid4()
        self.metadata = {"thread_id": thread_id} if thread_id else {}
        handler.on_chain_start(None, {}, run_id=self.id, parent_run_id=None, metadata=self.metadata)

    def node(self) -> UUID:
        node = uuid4()
        self.handler.on_chain_start(
            None, {}, run_id=node, parent_run_id=self.id, metadata=self.metadata
        )
        return node

    def model(self, answer: AIMessage) -> None:
        node, llm = self.node(), uuid4()
        self.handler.on_chat_model_start(
            {}, [[]], run_id=llm, parent_run_id=node, metadata=self.metadata
        )
        result = LLMResult(generations=[[ChatGeneration(message=answer)]])
        self.handler.on_llm_end(result, run_id=llm, parent_run_id=node)
        self.handler.on_chain_end({}, run_id=node, parent_run_id=self.id)

    def tool(
        self,
        name: str,
        args: dict[str, Any],
        output: Any = "ok",
        *,
        error: BaseException | None = None,
    ) -> None:
        node, tool = self.node(), uuid4()
        self.handler.on_tool_start(
            {"name": name}, str(args), run_id=tool, parent_run_id=node, inputs=args
        )
        if error is not None:
            self.handler.on_tool_error(error, run_id=tool, parent_run_id=node)
        else:
            self.handler.on_tool_end(output, run_id=tool, parent_run_id=node)
        self.handler.on_chain_end({}, run_id=node, parent_run_id=self.id)

    def end(self, error: BaseException | None = None) -> None:
        if error is None:
            self.handler.on_chain_end({}, run_id=self.id, parent_run_id=None)
        else:
            self.handler.on_chain_error(error, run_id=self.id, parent_run_id=None)


_OPAQUE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CodeType,
    types.FrameType,
    logging.Logger,
)


def reachable_strings(root: object) -> Iterator[str]:
    """Every string reachable from ``root``'s data (not through code, classes or modules)."""
    seen: set[int] = set()
    stack: list[object] = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            yield obj
        elif isinstance(obj, bytes | bytearray):
            yield bytes(obj).decode("latin-1")
        elif not isinstance(obj, _OPAQUE):
            stack.extend(gc.get_referents(obj))


def holds(root: object, canary: str) -> bool:
    return any(canary in text for text in reachable_strings(root))


def _clean_environment(monkeypatch: pytest.MonkeyPatch, where: Path) -> None:
    monkeypatch.chdir(where)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(where / "xdg"))
    for name in [n for n in __import__("os").environ if n.startswith("LOOP_GUARD_")]:
        monkeypatch.delenv(name)


GUARDS = [LoopGuardCallbackHandler, LoopGuardMiddleware, LoopGuardNode]


# --- configuration reaching a guard constructor ---------------------------------------------------


@pytest.mark.parametrize(
    "content",
    ["[" * 100_000 + "]" * 100_000, '{"maxTurns": ' + "7" * 5_000 + "}"],
    ids=["100k-deep", "5000-digit-number"],
)
@pytest.mark.parametrize("make", GUARDS, ids=lambda g: g.__name__)
def test_guard_constructors_turn_hostile_config_files_into_config_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str, make: Any
) -> None:
    """Never a ``RecursionError`` or bare ``ValueError``: a config error naming the file."""
    _clean_environment(monkeypatch, tmp_path)
    (tmp_path / ".loop-guard.json").write_text(content, "utf-8")
    with pytest.raises(LoopGuardConfigError) as info:
        make()
    assert info.value.source == f"project file {tmp_path / '.loop-guard.json'}"


@pytest.mark.parametrize("make", GUARDS, ids=lambda g: g.__name__)
@pytest.mark.parametrize("key", ["_environ", "_cwd"])
def test_guard_constructors_refuse_private_keys(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make: Any, key: str
) -> None:
    """``config={"_environ": {}}`` is refused, not a way to drop every LOOP_GUARD_* variable."""
    _clean_environment(monkeypatch, tmp_path)
    with pytest.raises(LoopGuardConfigError) as info:
        make({key: {}})
    assert info.value.key == key


@pytest.mark.parametrize("make", GUARDS, ids=lambda g: g.__name__)
def test_guard_constructors_name_a_key_that_is_no_string(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make: Any
) -> None:
    """``config={1: 2}`` is a config error naming the key, not ``TypeError: keywords must be
    strings``."""
    _clean_environment(monkeypatch, tmp_path)
    with pytest.raises(LoopGuardConfigError, match="unknown key 1 = 2") as info:
        make({1: 2})
    assert info.value.source == "code"


# --- digests that leave the process reveal nothing ------------------------------------------------

PINS = [f"{number:04d}" for number in range(10_000)]


def _hex_words(text: str) -> set[str]:
    return set(re.findall(r"[0-9a-f]{8,}", text))


def test_pin_cannot_be_recovered_from_a_trace_by_dictionary_attack(tmp_path: Path) -> None:
    """Every digest a trace holds is keyed: hashing all 10,000 PINs finds none of them."""
    pin = "4821"
    trace = tmp_path / "trace.jsonl"
    handler = LoopGuardCallbackHandler(LoopGuardConfig(), record_to=trace)
    run = Run(handler)
    run.tool("check_pin", {"pin": pin}, f"PIN {pin} accepted")
    run.tool("login", {"user": "ann"}, error=ValueError(f"wrong PIN {pin}"))
    run.end()
    written = _hex_words(trace.read_text("utf-8"))
    assert len(written) >= 3  # the call, the outcome, the error key are there, keyed
    guesses = set()
    for guess in PINS:
        guesses.add(call_signature("check_pin", {"pin": guess}))
        guesses.add(outcome_digest(f"PIN {guess} accepted"))
        guesses.add(error_key("login", ValueError(f"wrong PIN {guess}")))
    assert call_signature("check_pin", {"pin": pin}) in guesses  # the attack is the real one
    assert not written & guesses


def test_a_trace_file_is_created_readable_by_its_owner_only(tmp_path: Path) -> None:
    """Digests of small values can be guessed by dictionary: ``record_to=`` creates mode 0600."""
    trace = tmp_path / "trace.jsonl"
    run = Run(LoopGuardCallbackHandler(LoopGuardConfig(), record_to=trace))
    run.tool("check_pin", {"pin": "4821"}, "denied")
    run.end()
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600


def test_keyed_trace_still_replays_to_the_same_verdicts(tmp_path: Path) -> None:
    """Equality within a trace is kept: a replay stops the loop where the run stopped."""
    trace = tmp_path / "trace.jsonl"
    handler = LoopGuardCallbackHandler(LoopGuardConfig(), record_to=trace)
    run = Run(handler)
    for _ in range(2):
        run.tool("check_pin", {"pin": "4821"}, "denied")
    with pytest.raises(LoopDetected):
        run.tool("check_pin", {"pin": "4821"}, "denied")
    with trace.open(encoding="utf-8") as lines:
        items = list(read_trace(trace, lines))
    calls = [item.event.digest for item in items if item.event.kind == "tool_call"]
    assert len(set(calls)) == 1
    detector = LoopDetector()
    verdicts = [detector.replay(item.event) for item in items]
    assert [v.action for v in verdicts if v.stops] == ["block"]


def test_pin_cannot_be_recovered_from_inspect_logs_exceptions_or_trace_events(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``inspect()``'s 8 digits, a log record's key, ``LoopDetected``'s and the custom event's
    key: none matches the unkeyed digest of any of the 10,000 PINs."""
    events: list[dict[str, Any]] = []
    monkeypatch.setattr("langchain_loop_guard._integrations._runtime.publish", events.append)
    handler = LoopGuardCallbackHandler(LoopGuardConfig())
    run = Run(handler)
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        for _ in range(2):
            run.tool("check_pin", {"pin": "4821"}, "denied")
        with pytest.raises(LoopDetected) as info:
            run.tool("check_pin", {"pin": "4821"}, "denied")
    shown = str(handler.inspect(run.id))
    keys = {getattr(record, "loop_guard_key", None) for record in caplog.records} - {None}
    assert keys
    assert info.value.verdict is not None
    assert info.value.verdict.key is not None
    assert events
    full = {call_signature("check_pin", {"pin": guess}) for guess in PINS}
    short = {digest[:8] for digest in full}
    assert not _hex_words(shown) & short
    assert not keys & full
    assert info.value.verdict.key not in full
    assert not {event["key"] for event in events} & full
    assert call_signature("check_pin", {"pin": "4821"}) in full


# --- only counts and digests in memory ------------------------------------------------------------


def test_handler_keeps_no_arguments_of_calls_awaiting_human_review() -> None:
    """scope="thread", a human review pauses before the tools: the arguments are not kept."""
    canary = "canary-" + uuid4().hex
    handler = LoopGuardCallbackHandler(LoopGuardConfig(scope="thread"))
    run = Run(handler, thread_id="t1")
    answer = AIMessage(
        content="",
        tool_calls=[ToolCall(name="wire", args={"iban": canary}, id="call_1", type="tool_call")],
    )
    run.model(answer)
    run.end(GraphInterrupt())  # paused for review before any tool ran
    del answer
    assert handler._engine.runs["t1"].announced  # the call is still awaited
    assert not holds(handler, canary)


def test_middleware_keeps_no_system_prompt_after_the_run() -> None:
    """The user's system prompt is not kept by the middleware once the run is over."""
    canary = "canary-" + uuid4().hex
    guard = LoopGuardMiddleware(LoopGuardConfig())
    model = ScriptedChatModel(script=[call("read_file", {"path": "a"}), "done"])
    agent = create_agent(
        model,
        [scripted_tool("read_file", lambda args: "text")],
        system_prompt=f"You are helpful. {canary}",
        middleware=[guard],
    )
    agent.invoke({"messages": [HumanMessage("go")]})
    assert not holds(guard, canary)


# --- bounded, sanitized tool names ----------------------------------------------------------------


def test_made_up_tool_names_are_cut_and_cannot_forge_log_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 100 kB tool name with a newline: at most 200 characters, no control characters."""
    name = "evil\nloop-guard block: run=forged\x1b[2J" + "x" * 100_000
    handler = LoopGuardCallbackHandler(LoopGuardConfig())
    run = Run(handler)
    with caplog.at_level(logging.INFO, logger="langchain_loop_guard"):
        for _ in range(2):
            run.tool(name, {"a": 1})
        with pytest.raises(LoopDetected) as info:
            run.tool(name, {"a": 1})
    tool = info.value.tool
    assert tool is not None
    assert len(tool) == 200
    assert tool.endswith("…")
    assert tool.isprintable()
    for record in caplog.records:
        message = record.getMessage()
        assert "\n" not in message
        assert "\x1b" not in message
        assert len(message) < 1_000
    inspection = handler.inspect(run.id)
    assert inspection is not None
    assert all(len(c.tool) <= 200 and c.tool.isprintable() for c in inspection.recent)


def test_made_up_tool_names_do_not_bloat_the_checkpoint() -> None:
    """A model naming a 100 kB tool: the guard's checkpointed state stays small."""
    name = "made\nup" + "y" * 100_000
    guard = LoopGuardMiddleware(LoopGuardConfig())
    model = ScriptedChatModel(script=[call(name, {"q": 1}), "done"])
    config = {"configurable": {"thread_id": "t1"}}
    agent = create_agent(
        model,
        [scripted_tool("search", lambda args: "x")],
        middleware=[guard],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    stored = agent.get_state(config).values["loop_guard"]
    text = json.dumps(stored)
    assert len(text) < 5_000
    assert "made\\nup" not in text


# --- heavy work outside the handler's lock --------------------------------------------------------


def test_a_large_result_does_not_make_other_runs_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """While one run's 20 MB result is digested, another run's callbacks go on: the digest is
    held in the middle (no timing: a loaded machine cannot make this flaky), and the other
    run's callbacks must all finish before it is let go."""
    handler = LoopGuardCallbackHandler(LoopGuardConfig())
    big, small = Run(handler), Run(handler)
    node, tool = big.node(), uuid4()
    handler.on_tool_start({"name": "cat"}, "{}", run_id=tool, parent_run_id=node, inputs={})
    output = "line 12: value 0.51s id 1234567 done\n" * 550_000  # about 20 MB
    digesting, go_on = threading.Event(), threading.Event()
    real_outcome = handler_module.outcome

    def held_outcome(value: object, **kwargs: Any) -> Any:
        if value is output:
            digesting.set()
            assert go_on.wait(timeout=30), "the other run's callbacks never finished"
        return real_outcome(value, **kwargs)

    monkeypatch.setattr(handler_module, "outcome", held_outcome)
    worker = threading.Thread(
        target=handler.on_tool_end, args=(output,), kwargs={"run_id": tool, "parent_run_id": node}
    )
    worker.start()
    assert digesting.wait(timeout=30)
    others = threading.Thread(
        target=lambda: [small.tool("read_file", {"path": f"{n}.py"}, "ok") for n in range(3)]
    )
    others.start()
    others.join(timeout=30)
    finished = not others.is_alive()
    go_on.set()
    worker.join()
    others.join()
    assert finished, "another run waited for the large result to be digested"
    inspection = handler.inspect(big.id)
    assert inspection is not None
    assert [(c.tool, c.outcome) for c in inspection.recent] == [("cat", "ok")]  # still taken


# --- a corrupted checkpointed guard state ---------------------------------------------------------

REPEAT = LOOPS[0]

CORRUPTIONS = {
    "detector a list": {"detector": []},
    "detector a string": {"detector": "x"},
    "detector unreadable": {"detector": {"v": 2, "calls": "x"}},
    "at None": {"at": None},
    "at a string": {"at": "soon"},
    "nudged None": {"nudged": None},
    "nudged a string": {"nudged": "2"},
    "pending a string": {"pending": "x"},
    "turn a string": {"turn": "yes"},
    "not a mapping": None,
}


@pytest.mark.parametrize("kind", ["middleware", "node"])
@pytest.mark.parametrize("corruption", list(CORRUPTIONS), ids=list(CORRUPTIONS))
def test_corrupted_guard_state_is_discarded_and_the_loop_still_stopped(
    kind: str, corruption: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One malformed field in the checkpoint: one warning, detection afresh, loop stopped."""
    harness = loop_harness(kind, REPEAT, on_stop="end")  # type: ignore[arg-type]
    assert REPEAT.name == "repeat"
    harness.invoke(text=AGAIN)  # a first run leaves a good guard state in the checkpoint
    state = harness.state()["loop_guard"]
    override = CORRUPTIONS[corruption]
    corrupted = ["broken"] if override is None else {**state, **override}
    harness.graph.update_state(harness.config, {"loop_guard": corrupted})
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        first = harness.invoke()["messages"]
        second = harness.invoke()["messages"]  # and so in every later invocation
    for messages in (first, second):
        assert stop_message(messages).content.startswith("Loop guard stopped the run")
    unreadable = [r for r in caplog.records if "unreadable" in r.getMessage()]
    assert len(unreadable) == 1
    assert isinstance(harness.state()["loop_guard"]["detector"], dict)


# --- two invocations of one conversation at once (double texting) --------------------------------


class Turns:
    """Lets the tool calls of named runs go one at a time, in turn, until one run ends."""

    def __init__(self, names: list[str]) -> None:
        self.names, self.turn, self.over = names, 0, False
        self.ran: dict[str, int] = dict.fromkeys(names, 0)
        self.changed = threading.Condition()

    def take(self, name: str) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.over or self.names[self.turn] == name, timeout=10)
            self.ran[name] += 1
            self.turn = (self.turn + 1) % len(self.names)
            self.changed.notify_all()

    def end(self) -> None:
        with self.changed:
            self.over = True
            self.changed.notify_all()


@pytest.mark.parametrize("scope", ["auto", "thread"])
def test_overlapping_invocations_of_one_thread_keep_their_counts_and_stop(scope: str) -> None:
    """A second message sent while the first run still loops (one thread_id, a checkpointer):
    each run's model calls carry its own message, which is no new message to the other run, so
    neither lifts the other's counts or stop, and both loops are stopped (without the fix they
    ran to the recursion limit)."""
    turns = Turns(["first", "second"])

    def lookup(name: str) -> Any:
        def body(args: dict[str, Any]) -> str:
            turns.take(name)
            return "the same contents"

        return scripted_tool(name, body)

    def again(messages: Any) -> AIMessage:  # each run calls the tool its message names
        asked = [m for m in messages if isinstance(m, HumanMessage)][-1]
        return call(asked.text, {"path": "notes.txt"})

    guard = LoopGuardCallbackHandler({"scope": scope})
    model = ScriptedChatModel(script=[again], then="repeat")
    tools = [lookup(name) for name in turns.names]
    agent = create_agent(model, tools, checkpointer=InMemorySaver())
    config: Any = {
        "configurable": {"thread_id": "chat-1"},
        "callbacks": [guard],
        "recursion_limit": 60,
    }
    outcomes: dict[str, str] = {}

    def send(text: str) -> None:
        try:
            agent.invoke({"messages": [("user", text)]}, config)
            outcomes[text] = "finished"
        except LoopDetected as stop:
            outcomes[text] = stop.signal
        except Exception as error:  # the recursion limit, without the fix
            outcomes[text] = type(error).__name__
        finally:
            turns.end()

    sending = [threading.Thread(target=send, args=(text,)) for text in turns.names]
    for thread in sending:
        thread.start()
    for thread in sending:
        thread.join(timeout=60)
    # the thread's calls alternate between two tools: a cycle, or too many calls of a tool
    assert outcomes.keys() == {"first", "second"}
    assert all(isinstance(signal, Signal) for signal in outcomes.values()), outcomes
    # stopped after a few calls (how many depends on where the second message lands among the
    # first run's calls: 2 to 5 seen), not at the recursion limit (30 calls each)
    assert max(turns.ran.values()) <= 10, turns.ran


# --- hostile volatile fields: every mask linear in the output -----------------------------------
# These outputs took minutes (hours for the largest) before the masks were made linear; the
# timeouts only keep a regression from hanging the suite, the timings are in benchmarks/.


def _result_key(text: str, volatile: Any = None) -> str:
    from langchain_loop_guard._core._signature import outcome

    return outcome(text, volatile=volatile).key


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("pattern", "key", "is_volatile"),
    [
        ("*_*_*", "_" * 10_000, True),
        ("*_*_*", "a" * 10_000 + "-", False),
        ("*a*a*a*a*", "a" * 10_000 + "-", False),
        ("*a*a*a*a*", "ab" * 5_000, True),
        ("x-*_*-*_*", "x-" + "_" * 10_000, False),
        ("x-*_*-*_*", "x-" + "_" * 10_000 + "-a_b", True),
    ],
    ids=["underscores", "dash-at-the-end", "many-a", "ab-run", "one-dash", "two-dashes"],
)
def test_a_volatile_field_with_many_wildcards_is_matched_in_one_pass(
    pattern: str, key: str, *, is_volatile: bool
) -> None:
    """A 20,000-character key (in a JSON result) against a name with several ``*`` is masked
    when it matches and left when it does not, without backtracking over every way to split
    it (a key of 4,000 characters took over 90 s)."""
    from langchain_loop_guard._core._limits import limits_of

    volatile = limits_of(LoopGuardConfig(volatile_fields=[pattern])).volatile_of("search")
    text = '{"id": "a", "' + key + '" 1, "' + key + '": 2}'
    same = _result_key(text, volatile) == _result_key(text.replace(": 2}", ": 3}"), volatile)
    assert same is is_volatile


@pytest.mark.timeout(60)
@pytest.mark.parametrize("filler", ["_", "-", "req_", "_1"])
def test_the_default_masks_read_a_long_run_of_separators_once(filler: str) -> None:
    """Outputs that are long runs of ``_`` (or vendor prefixes) cost a time that grew with
    the square of their length at the defaults (the search for vendor id prefixes): a hundred
    of 32 KB each are digested in well under the timeout now."""
    text = filler * (32 * 1024 // len(filler))
    digests = {outcome_digest(text) for _ in range(100)}
    assert len(digests) == 1


def test_too_many_volatile_fields_are_a_configuration_error() -> None:
    """10,000 names (which took half a minute to compile) are refused with the usual clear
    error naming the key and the limit; 1,024 are taken."""
    names = [f"field_{index}" for index in range(10_000)]
    with pytest.raises(LoopGuardConfigError, match=r"volatile_fields.*at most 1024 names"):
        LoopGuardConfig(volatile_fields=names)
    with pytest.raises(LoopGuardConfigError, match="volatile_fields"):
        LoopGuardConfig(volatile_fields={"search": names[:600], "*": names[600:1200]})
    config = LoopGuardConfig(volatile_fields=names[:1024])
    from langchain_loop_guard._core._limits import limits_of

    volatile = limits_of(config).volatile_of("search")
    assert _result_key('{"field_1023": 1}', volatile) == _result_key('{"field_1023": 2}', volatile)


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("volatile_fields", ["meta.rank"], "not a nested path"),
        ("volatile_fields", {"search": ["hits.0.score"]}, "not a nested path"),
        ("volatile_fields", {"search*": ["rank"]}, "no other \\*"),
        ("volatile_fields", {"*_docs": ["rank"]}, "no other \\*"),
        ("tool_threshold_overrides", {"read_*": 5}, "no \\*"),
        ("tool_threshold_overrides", {"*": 5}, "no \\*"),
    ],
)
def test_settings_that_would_never_apply_are_configuration_errors(
    key: str, value: Any, allowed: str
) -> None:
    """A nested path as a volatile field, or a tool name with ``*`` in a per-tool setting,
    matched nothing silently: each is refused, saying what is allowed."""
    with pytest.raises(LoopGuardConfigError, match=rf"key '{key}'.*allowed: .*{allowed}"):
        LoopGuardConfig(**{key: value})


# --- outputs that read as errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        "Error: " + "the parser failed at line 12 of refunds policy\n" * 200_000,
        '{"error": "' + "refunds policy not found; " * 400_000 + '"}',
    ],
    ids=["Error:", "error-json"],
)
def test_an_output_that_reads_as_an_error_is_read_no_further_than_the_error_rules_need(
    output: str,
) -> None:
    """A 10 MB output that reads as an error is a failure told by its first and last parts:
    the words of the whole text were collected before (600 MB and seconds for 50 MB), now
    digesting it allocates a small fraction of its size, and its middle does not count."""
    import tracemalloc

    from langchain_loop_guard._core._signature import arg_tokens, outcome

    tokens = arg_tokens({"query": "refunds policy"}, "search")
    tracemalloc.start()
    try:
        digested = outcome(output, tool="search", tokens=tokens)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert digested.failed  # an error returned as text
    assert peak < len(output) // 20, peak
    middle = len(output) // 2
    changed = output[:middle] + "another failure" + output[middle + 15 :]
    assert outcome(changed, tool="search", tokens=tokens).key == digested.key


# --- call ids in the saved state ------------------------------------------------------------------


def test_huge_call_ids_are_kept_as_digests_in_the_detector_state() -> None:
    """A detector fed calls with 1 MB ids exports a state of a few KB (the ids were kept whole:
    25 MB), and each result still belongs to its call."""
    detector = LoopDetector(LoopGuardConfig(mode="observe"), clock=lambda: 0.0)
    for index in range(12):
        call_id = f"{index}-" + "x" * 1_000_000
        detector.tool_call("read_file", {"path": f"{index}.txt"}, call_id=call_id)
        detector.tool_result("read_file", f"contents {index}", call_id=call_id)
    state = json.dumps(detector.export_state())
    assert len(state) < 8 * 1024
    assert "xxxx" not in state
    assert [call.outcome for call in detector.snapshot(recent=12).recent] == ["ok"] * 12


def test_huge_call_ids_do_not_bloat_the_checkpoint_and_the_loop_is_still_stopped() -> None:
    """With the middleware, 100 KB call ids leave the guard's saved state under the README's
    8 KB (1.2 MB before), and a repeated call with a new huge id each time is still stopped."""
    script = [
        call("read_file", {"path": f"{index % 6}.txt"}, id=f"{index}-" + "x" * 100_000)
        for index in range(12)
    ]
    repeat = [call("read_file", {"path": "a.txt"}, id=f"r{i}-" + "y" * 100_000) for i in range(3)]
    model = ScriptedChatModel(script=[*script, *repeat, "done"])
    agent = create_agent(
        model,
        [scripted_tool("read_file", "contents")],
        middleware=[LoopGuardMiddleware({"progress_aware": False}, on_stop="end")],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    messages = agent.invoke({"messages": [("user", "go")]}, config)["messages"]
    saved = json.dumps(agent.get_state(config).values["loop_guard"], default=str)
    assert len(saved) < 8 * 1024, len(saved)
    assert stop_message(messages).content.startswith("Loop guard stopped the run")


# --- huge run ids in a replayed trace -------------------------------------------------------------


def test_huge_run_ids_are_cut_as_a_trace_is_read(tmp_path: Path) -> None:
    """Forty runs in flight at once, each with a 1 MB id: replay cuts each id as its line is
    read (as reports show it), so it holds a few MB, not the 40 MB of ids, and the runs stay
    apart."""

    path = tmp_path / "trace.jsonl"
    with path.open("w") as file:
        for step in range(2):  # the runs interleave: every run is open until the last lines
            for run in range(40):
                event = {"v": 1, "e": "tool_call", "t": 0.1 * step, "tool": "read", "d": "ab12"}
                file.write(json.dumps({**event, "run": f"{run}-" + "r" * 1_000_000}) + "\n")
    report, peak = _replayed_with_peak(path)
    assert len(report.runs) == 40
    assert len({run.run for run in report.runs}) == 40
    assert max(len(run.run) for run in report.runs) <= 200
    assert peak < 20_000_000, peak


def test_a_trace_line_of_many_mb_is_read_into_a_window_of_about_its_size(tmp_path: Path) -> None:
    """Lines of 10 MB (a huge run id each): the reader stops at each line's end instead of
    doubling its window past it, so replay peaks near three times a line (the line, its window
    and the value decoded), not five (53 MB before, for these three lines)."""

    path, line = tmp_path / "trace.jsonl", 10_000_000
    with path.open("w") as file:
        for step in range(3):
            event = {"v": 1, "e": "tool_call", "t": 0.1 * step, "tool": "read", "d": "ab12"}
            file.write(json.dumps({**event, "run": "r" * line}) + "\n")
    report, peak = _replayed_with_peak(path)
    assert len(report.runs) == 1
    assert peak < 4 * line, peak


def test_volatile_fields_looked_up_key_by_key_match_each_part_and_end() -> None:
    """Names with several ``*`` are matched key by key: a part between ``-`` without ``*``
    is matched whole, a key too short for a name's ends is no match, and a name that starts
    with ``*`` is found by its last literal part."""
    fields = VolatileFields(("x-*_*", "*_*_id", "ab*cd*efg"))
    text = json.dumps(
        {"x-a_b": 1, "x-ab": 2, "req_user_id": 3, "abef": 4, "abXcdYefg": 5, "abcdXefX": 6}
    )
    masked_text = fields.mask(text.encode()).decode()
    assert '"x-a_b": <#>' in masked_text
    assert '"x-ab": 2' in masked_text  # its second part has no "_"
    assert '"req_user_id": <#>' in masked_text
    assert '"abef": 4' in masked_text  # shorter than "ab" and "efg" together
    assert '"abXcdYefg": <#>' in masked_text
    assert '"abcdXefX": 6' in masked_text  # its end is not the name's


def _replayed_with_peak(path: Path) -> tuple[Any, int]:
    """``replay`` of the trace at ``path`` under the defaults, and the peak of the memory
    Python allocated meanwhile."""
    import tracemalloc

    from langchain_loop_guard import replay

    tracemalloc.start()
    try:
        report = replay(path, LoopGuardConfig())
        return report, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
