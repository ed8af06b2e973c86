"""This detector against v0.1's, in one process, on the same events.

v0.1 is the package of commit ``3f9ea05``. Its modules are read from the git history with
``git show`` as they are imported, under another package name, so that both run side by side in
this process; without git or that commit (a source archive, a shallow clone), the rows are
skipped with a message.

The workload is realistic: the events of real agent runs (``../shared/real-trajectories``,
when that data set lies beside the checkout), each run through a fresh detector, as the
scorer feeds them; without the data set, a scripted mix of turns, narrated calls, calls and
results (``bench_memory._feed_steps``). Both detectors run in observe mode, so that neither
stops a run and both do their full work on every event. A round feeds the same runs to
both, alternating which goes first; the ratio is per event.
"""

from __future__ import annotations

import gc
import gzip
import importlib
import importlib.abc
import importlib.util
import json
import subprocess
import sys
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any, cast

from _harness import Row, compare, patched, ratio_row, timed
from bench_detector import typical_args, typical_output, typical_text

import langchain_loop_guard._core._detector as shipped
from langchain_loop_guard._core._canonical import call_signature
from langchain_loop_guard._core._signature import arg_tokens, outcome
from langchain_loop_guard._core._view import limits_of

V01 = "3f9ea05"
ALIAS = "_loop_guard_v01"
ROOT = Path(__file__).resolve().parent.parent
REAL_RUNS = ROOT.parent / "shared" / "real-trajectories" / "events"
ROUND_EVENTS = 2_000  # events per round (whole runs: a round may hold a few more)

Event = tuple[str, tuple[Any, ...]]
"""A detector method's name and its arguments."""


def load_v01(name: str = "_detector") -> types.ModuleType | str:
    """v0.1's module ``name`` (``_detector``, ``_handler``, …), imported from the git history
    with the v0.1 modules it imports, or why it cannot be."""
    module = sys.modules.get(f"{ALIAS}.{name}")
    if module is not None:
        return module
    if ALIAS not in sys.modules:
        package = types.ModuleType(ALIAS)
        package.__path__ = []
        sys.modules[ALIAS] = package
        sys.meta_path.insert(0, _V01Finder())
    try:
        return importlib.import_module(f"{ALIAS}.{name}")
    except _NotInHistory as error:
        return str(error)


class _NotInHistory(ImportError):
    """A v0.1 module ``git show`` could not read."""


class _V01Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``_loop_guard_v01.<name>`` from ``git show 3f9ea05:langchain_loop_guard/<name>.py``,
    its imports of the package rewritten to the alias (its catalogs are the checkout's)."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> Any:
        if not fullname.startswith(ALIAS + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> None:
        return None  # the default module

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__.rpartition(".")[2]
        try:
            shown = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{V01}:langchain_loop_guard/{name}.py"],
                capture_output=True,
                check=True,
                text=True,
            )
        except (OSError, subprocess.CalledProcessError) as error:
            detail = getattr(error, "stderr", "") or str(error)
            msg = f"v0.1 ({V01}) is not in this checkout's git history: {detail.strip()}"
            raise _NotInHistory(msg) from None
        source = shown.stdout.replace("langchain_loop_guard._", ALIAS + "._").replace(
            "from langchain_loop_guard import", f"from {ALIAS} import"
        )
        module.__file__ = f"{V01}:langchain_loop_guard/{name}.py"
        setattr(sys.modules[ALIAS], name, module)
        exec(compile(source, module.__file__, "exec"), module.__dict__)


def real_runs(limit: int | None = None) -> list[list[Event]]:
    """The events of the real agent runs beside the checkout (none when it is not there)."""
    runs: list[list[Event]] = []
    for path in sorted(REAL_RUNS.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                runs.append(list(_real_events(json.loads(line)["events"])))
                if limit is not None and len(runs) >= limit:
                    return runs
    return runs


def _real_events(events: list[dict[str, Any]]) -> Iterator[Event]:
    for event in events:
        kind = event["t"]
        if kind == "user":  # a new user message, as scope="run" (the default) feeds it
            yield "reset", ()
        elif kind == "turn":
            yield "turn_start", ()
        elif kind == "assistant":
            calls = [tuple(c) for c in event["tool_calls"]]
            yield "assistant_message", (event["text"], calls)
        elif kind == "call":
            yield "tool_call", (event["name"], event["args"], event.get("id"))
        elif kind == "result":
            yield "tool_result", (event["name"], event["output"], None, event.get("id"))
        else:
            yield "tool_result", (event["name"], None, event["error"], event.get("id"))


def scripted_runs(runs: int, steps: int = 50) -> list[list[Event]]:
    """Runs of turns, narrated calls, calls and results, every seventh result an error."""
    scripted = []
    for run in range(runs):
        events: list[Event] = []
        for i in range(run * steps, (run + 1) * steps):
            args, call_id = typical_args(i), f"call_{i}"
            events += [
                ("turn_start", ()),
                ("assistant_message", (typical_text(i), [("read_file", args)])),
                ("tool_call", ("read_file", args, call_id)),
            ]
            if i % 7:
                events.append(("tool_result", ("read_file", typical_output(i), None, call_id)))
            else:
                error = f"FileNotFoundError: {i}"
                events.append(("tool_result", ("read_file", None, error, call_id)))
        scripted.append(events)
    return scripted


def _rounds(runs: list[list[Event]]) -> list[list[list[Event]]]:
    """Consecutive runs grouped into rounds of about :data:`ROUND_EVENTS` events."""
    rounds: list[list[list[Event]]] = [[]]
    size = 0
    for run in runs:
        if size >= ROUND_EVENTS:
            rounds.append([])
            size = 0
        rounds[-1].append(run)
        size += len(run)
    return rounds


def _feeder(module: Any, runs: list[list[Event]]) -> Callable[[], None]:
    """A function that feeds ``runs`` to fresh detectors of ``module`` (its calls made first)."""
    config = module.LoopGuardConfig(mode="observe", max_turns=1_000_000)
    steps: list[Callable[[], object]] = []
    for run in runs:
        detector = module.LoopDetector(config, clock=lambda: 0.0)
        for method, args in run:
            if method == "tool_result":
                name, output, error, call_id = args
                steps.append(
                    partial(detector.tool_result, name, output, error=error, call_id=call_id)
                )
            else:
                steps.append(partial(getattr(detector, method), *args))

    def feed() -> None:
        for step in steps:
            step()

    return feed


def against_v01(rounds: int | None = None) -> list[Row]:
    """The shipped detector against v0.1's, per event of the same runs."""
    v01 = load_v01()
    name = "per event, real agent runs: this detector vs v0.1's"
    if isinstance(v01, str):
        print(f"skipped '{name}': {v01}", flush=True)
        return []
    runs = real_runs()
    workload = f"{sum(map(len, runs)):,} events of {len(runs)} real runs"
    if not runs:
        name = "per event, scripted runs: this detector vs v0.1's"
        runs = scripted_runs(40)
        workload = f"{sum(map(len, runs)):,} events of 40 scripted runs (no real runs beside)"
    grouped = _rounds(runs)
    if rounds is not None:
        grouped = grouped[:: max(1, len(grouped) // rounds)][:rounds]

    def side(module: Any) -> Callable[[int], float]:
        def batch(index: int) -> float:
            chosen = grouped[index % len(grouped)]
            feed = _feeder(module, chosen)
            return timed(feed) / sum(map(len, chosen))

        return batch

    comparison = compare(side(v01), side(shipped), rounds=len(grouped), warmup=1)
    return [
        ratio_row(name, comparison, 1.5, note=f"{workload}; observe mode, {V01} as v0.1"),
    ]


HANDLER_STEPS = 200  # tool calls and results per round, on one run


def _handler_batch(handler_module: Any, config_module: Any) -> Callable[[int], float]:
    """A round of :data:`HANDLER_STEPS` tool calls and results through a fresh handler of the
    module, as an agent's tool node sends them: per round, the time of the tool callbacks
    alone (``on_tool_start`` and ``on_tool_end``; the node's own callbacks are not timed), per
    call and result."""
    config = config_module.LoopGuardConfig(mode="observe", max_turns=1_000_000)

    def batch(index: int) -> float:
        handler = handler_module.LoopGuardCallbackHandler(config)
        root = uuid.uuid4()
        handler.on_chain_start(None, {}, run_id=root, parent_run_id=None)
        first = (index + 10) * HANDLER_STEPS  # warm-up rounds are negative
        spent = 0
        gc.disable()
        try:
            for i in range(first, first + HANDLER_STEPS):
                node, tool = uuid.uuid4(), uuid.uuid4()
                args, output = typical_args(i), typical_output(i)
                handler.on_chain_start(None, {}, run_id=node, parent_run_id=root)
                start = time.perf_counter_ns()
                handler.on_tool_start(
                    {"name": "read_file"},
                    str(args),
                    run_id=tool,
                    parent_run_id=node,
                    inputs=args,
                    tool_call_id=f"call_{i}",
                )
                handler.on_tool_end(output, run_id=tool, parent_run_id=node)
                spent += time.perf_counter_ns() - start
                handler.on_chain_end({}, run_id=node, parent_run_id=root)
        finally:
            gc.enable()
        handler.on_chain_end({}, run_id=root, parent_run_id=None)
        return spent / HANDLER_STEPS

    return batch


def _detector_batch() -> Callable[[int], float]:
    """The same calls and results as :func:`_handler_batch`, straight into this detector
    (``tool_call`` and ``tool_result``, which digest them as the handler does): what the
    handler's detector alone costs, per call and result."""
    config = shipped.LoopGuardConfig(mode="observe", max_turns=1_000_000)

    def batch(index: int) -> float:
        detector = shipped.LoopDetector(config)
        first = (index + 10) * HANDLER_STEPS  # warm-up rounds are negative
        spent = 0
        gc.disable()
        try:
            for i in range(first, first + HANDLER_STEPS):
                args, output, call_id = typical_args(i), typical_output(i), f"call_{i}"
                start = time.perf_counter_ns()
                detector.tool_call("read_file", args, call_id)
                detector.tool_result("read_file", output, call_id=call_id)
                spent += time.perf_counter_ns() - start
        finally:
            gc.enable()
        return spent / HANDLER_STEPS

    return batch


class _BareHandler:
    """The detector's work in a handler's tool callbacks, and nothing else: the digests and
    decisions :class:`LoopGuardCallbackHandler` makes in ``on_tool_start`` and ``on_tool_end``
    (the same calls, the result digested between two lock sections), without the run tree, the
    registry, bounds, held stops or failing open. No handler of this detector can cost less;
    it stops nothing and guards one run."""

    def __init__(self, config: Any) -> None:
        self._detector = shipped.LoopDetector(config)
        self._lock = threading.RLock()
        self._tools: dict[uuid.UUID, tuple[str, str | None, frozenset[int]]] = {}

    def on_chain_start(self, *args: Any, **kwargs: Any) -> None:
        """Not timed by the batch: nothing."""

    def on_chain_end(self, *args: Any, **kwargs: Any) -> None:
        """Not timed by the batch: nothing."""

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: uuid.UUID,
        inputs: Any = None,
        tool_call_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        name, arguments = serialized["name"], inputs if inputs is not None else input_str
        signature, tokens = call_signature(name, arguments), arg_tokens(arguments, name)
        with self._lock:
            self._detector.digested_call(name, signature, tool_call_id)
            self._tools[run_id] = (name, tool_call_id, tokens)

    def on_tool_end(self, output: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        with self._lock:
            name, call_id, tokens = self._tools.pop(run_id)
        volatile = limits_of(self._detector.config).volatile_of(name)
        key, near, info, failed = outcome(output, tool=name, tokens=tokens, volatile=volatile)
        with self._lock:
            self._detector.digested_result(name, key, call_id, failed=failed, near=near, info=info)


def handler_against_v01(rounds: int = 15) -> list[Row]:
    """The shipped callback handler against v0.1's, per tool call and its result."""
    name = "handler, per tool call and result: this handler vs v0.1's"
    v01 = load_v01("_handler")
    if isinstance(v01, str):
        print(f"skipped '{name}': {v01}", flush=True)
        return []
    import langchain_loop_guard._core._config as config
    import langchain_loop_guard._integrations._handler as handler

    v01_batch = _handler_batch(v01, load_v01("_config"))
    this_batch = _handler_batch(handler, config)
    comparison = compare(v01_batch, this_batch, rounds=rounds)
    note = f"{HANDLER_STEPS} distinct calls of one run per round; observe mode, {V01} as v0.1"
    # what the detector alone (SPEC §13's reading of each call and result) leaves of the
    # handler's budget: at 1.5x or more of v0.1's whole handler, no plumbing meets the target
    alone = compare(v01_batch, _detector_batch(), rounds=rounds)
    bare_module = types.SimpleNamespace(LoopGuardCallbackHandler=_BareHandler)
    bare = compare(v01_batch, _handler_batch(bare_module, config), rounds=rounds)
    # the bookkeeping alone: both handlers' detectors answering "allow" to calls and results
    # digested as nothing (each handler's digests of them made free)
    with _without_detectors(handler):
        plumbing = compare(v01_batch, this_batch, rounds=rounds)
    return [
        ratio_row(name, comparison, 1.5, note=note),
        ratio_row(
            "  this detector alone (tool_call, tool_result) vs v0.1's whole handler",
            alone,
            None,
            note="the same calls and results; the handler's digests and detector, no plumbing",
        ),
        ratio_row(
            "  the same work in the two tool callbacks, no bookkeeping, vs v0.1's whole handler",
            bare,
            None,
            note="the least a handler of this detector costs (no run tree, bounds, fail-open)",
        ),
        ratio_row(
            "  this handler's bookkeeping vs v0.1's (detectors and digests made free)",
            plumbing,
            None,
            note="both detectors answering allow; this handler's digests answering constants",
        ),
    ]


ERROR_OUTPUTS = {
    "output starting 'Error:'": lambda size: "Error: " + _lines("the request failed", size),
    "JSON output with an error": lambda size: (
        '{"error": "' + "refunds policy not found; " * (size // 26) + '"}'
    ),
}
"""Tool outputs that read as errors (SPEC §13 R13), of about ``size`` characters."""


def _lines(text: str, size: int) -> str:
    line = f"{text} at line 12 of parser.py\n"
    return line * (size // len(line))


def error_outputs_against_v01(size: int = 50 << 20, rounds: int = 5) -> list[Row]:
    """A large tool output that reads as an error, digested as the handler digests it (with
    the call's argument words and the volatile fields) against v0.1's digest of the same
    output (which took every output for a success): issue 38's 50 MB ``Error: …`` took 15-20x
    v0.1's time when the words of the whole text were collected."""
    v01 = load_v01("_signature")
    if isinstance(v01, str):
        print(f"skipped the error-output rows: {v01}", flush=True)
        return []
    tokens = arg_tokens({"query": "refunds policy", "page": 2}, "search")
    volatile = limits_of(shipped.LoopGuardConfig()).volatile_of("search")
    rows = []
    for label, make in ERROR_OUTPUTS.items():
        output = make(size)

        def v01_side(index: int, output: str = output) -> float:
            return timed(lambda: v01.outcome_digest(output))

        def this_side(index: int, output: str = output) -> float:
            return timed(lambda: outcome(output, tool="search", tokens=tokens, volatile=volatile))

        comparison = compare(v01_side, this_side, rounds=rounds, warmup=1)
        rows.append(
            ratio_row(
                f"{size >> 20} MB {label}, digested: this package vs v0.1",
                comparison,
                1.5,
                unit="ms",
                note=f"as the handler digests a result (argument words, volatile fields); {V01}"
                " as v0.1, which read every output as a success",
            )
        )
    return rows


@contextmanager
def _without_detectors(handler: Any) -> Iterator[None]:
    """Both handlers' detectors answering "allow" at once, and this handler's digests of a call
    and a result answering constants (v0.1's detector digested inside its own methods)."""
    v01_module = cast(types.ModuleType, load_v01("_detector"))  # loaded with v0.1's handler
    v01_detector, v01_allow, allow = v01_module.LoopDetector, v01_module.ALLOW, shipped.ALLOW
    nothing = outcome("")
    with ExitStack() as stack:
        for owner, name, replacement in (
            (v01_detector, "tool_call", lambda self, *args, **kwargs: v01_allow),
            (v01_detector, "tool_result", lambda self, *args, **kwargs: v01_allow),
            (shipped.LoopDetector, "digested_call", lambda self, *args, **kwargs: allow),
            (shipped.LoopDetector, "digested_result", lambda self, *args, **kwargs: allow),
            (handler, "call_signature", lambda name, arguments: "0" * 16),
            (handler, "arg_tokens", lambda arguments, name: frozenset()),
            (handler, "outcome", lambda *args, **kwargs: nothing),
        ):
            stack.enter_context(patched(owner, name, replacement))
        yield


def main() -> None:
    """Run this file's benchmark alone."""
    from _harness import format_table

    print(format_table([*handler_against_v01(), *against_v01(), *error_outputs_against_v01()]))


if __name__ == "__main__":
    main()
