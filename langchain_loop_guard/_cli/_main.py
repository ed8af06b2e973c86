"""The ``loop-guard`` console command (also ``python -m langchain_loop_guard``): the
subcommands of :data:`COMMANDS`. A CLI process has no live runs, so no ``status``: ``loop-guard
config`` shows the effective configuration."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, get_args

from langchain_loop_guard._cli._demo_kinds import INTEGRATIONS, LOOP_KINDS, describe_scenarios
from langchain_loop_guard._core._config import LoopGuardConfig, Mode
from langchain_loop_guard._core._errors import LoopGuardConfigError
from langchain_loop_guard._core._messages import LOCALES, negotiate_locale, translator
from langchain_loop_guard._core._public import terminal_safe
from langchain_loop_guard._core._status import text_table

__all__ = [
    "COMMANDS",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Command",
    "build_parser",
    "main",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_PROG = "loop-guard"
_EXIT_STATUS = """\
exit status:
  0    success
  1    the command ran but failed (see each command's --help)
  2    usage error, or an invalid configuration (one line per problem on stderr)
  130  interrupted
"""
_DEMO_EXIT_STATUS = """\
exit status:
  0    the demo went as designed
  1    the demo did not go as designed: please report it
  2    usage error, or a --record file that cannot be written
  130  interrupted
"""
_CONFIG_EXIT_STATUS = """\
exit status:
  0    the configuration is valid (and was printed)
  2    usage error, or an invalid configuration (one line per problem on stderr)
  130  interrupted
"""
_REPLAY_EXIT_STATUS = """\
exit status:
  0    the report was written, whether or not the guard would stop a run
  1    the report could not be written out (its reader went away: a closed pipe)
  2    usage error, an invalid configuration, or a trace that cannot be read
       (TRACE:LINE: problem, one line on stderr)
  130  interrupted
"""


@dataclass(frozen=True, slots=True)
class Command:
    """A ``loop-guard`` subcommand: its name, ``--help`` line and text, the functions declaring
    its options and running it (returning the exit status), and its epilog (or its builder)."""

    name: str
    summary: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    epilog: str | Callable[[], str] = _EXIT_STATUS


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loop",
        choices=LOOP_KINDS,
        default="repeat",
        help="the kind of loop the agent falls into (default: %(default)s; see below)",
    )
    parser.add_argument(
        "--mode",
        choices=get_args(Mode),
        default="on",
        help="on: stop the loop; observe: report it and let the run go on; off: no detection "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--locale",
        choices=LOCALES,
        type=str.lower,
        default=None,
        help="language of the timeline and the guard's messages (default: LOOP_GUARD_LOCALE, "
        "as ko, ko_KR or ko_KR.UTF-8, else en)",
    )
    parser.add_argument(
        "--integration",
        choices=INTEGRATIONS,
        default="callbacks",
        help="callbacks: LoopGuardCallbackHandler in config={'callbacks': [...]}; "
        "middleware: LoopGuardMiddleware in create_agent(middleware=[...]); "
        "node: LoopGuardNode in a hand-built StateGraph (default: %(default)s)",
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="also record the run as a loop-guard trace (record_to=) in FILE, made afresh "
        "(mode 0600), to try `loop-guard replay FILE` on",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also show the log lines the guard writes (tool names, signals and counts only)",
    )


def _demo_epilog() -> str:
    scenarios = describe_scenarios("en")
    width = max(len(name) for name in scenarios)
    lines = [f"  {name.ljust(width)}  {text}" for name, text in scenarios.items()]
    return "loops:\n" + "\n".join(lines) + "\n\n" + _DEMO_EXIT_STATUS


_LOCALE_VARIABLE = "LOOP_GUARD_LOCALE"


def _demo_locale(requested: str | None) -> str | None:
    """``--locale``, else ``LOOP_GUARD_LOCALE`` negotiated to a catalog (English, with a line on
    stderr, when it has none), else ``"en"``; ``None`` (after a line) when it is no locale."""
    if requested is not None:
        return requested
    text = os.environ.get(_LOCALE_VARIABLE, "").strip()
    if not text:
        return "en"
    try:
        chosen = negotiate_locale(text)
    except ValueError:
        print(
            f"{_PROG}: environment {_LOCALE_VARIABLE}: got {text!r}; allowed: "
            f"{', '.join(LOCALES)}, or a locale identifier naming one (ko_KR.UTF-8, ko-KR)",
            file=sys.stderr,
        )
        return None
    if chosen is None:
        print(
            f"{_PROG}: {_LOCALE_VARIABLE}={text!r} has no messages "
            f"(available: {', '.join(LOCALES)}); using en",
            file=sys.stderr,
        )
        return "en"
    return chosen


def _run_demo(args: argparse.Namespace) -> int:
    from langchain_loop_guard._cli._demo import expected_signal, render, run_demo  # noqa: PLC0415

    locale = _demo_locale(args.locale)
    if locale is None:
        return EXIT_USAGE
    tr = translator(locale)
    if args.record is not None:
        try:  # afresh: record_to= appends, and a second demo would add a second run
            os.close(os.open(args.record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        except OSError as exc:
            problem = f"{exc.filename or args.record}: {exc.strerror or exc}"
            print(f"{_PROG}: --record: {terminal_safe(problem)}", file=sys.stderr)
            return EXIT_USAGE
    with _logging(verbose=args.verbose):
        result = run_demo(
            args.loop,
            mode=args.mode,
            locale=locale,
            integration=args.integration,
            record_to=args.record,
        )
    for line in render(result):
        print(line)
    if args.record is not None:
        recorded = tr.gettext("Recorded the run to {path}; replay it: loop-guard replay {path}")
        print(terminal_safe(recorded.format(path=args.record)))
    if result.error is not None:
        return EXIT_FAILURE
    designed = expected_signal(args.loop) if args.mode != "off" else None
    if result.first_signal != designed:
        message = tr.gettext(
            "The demo did not go as designed: expected {expected}, got {actual}. "
            "Please report this."
        )
        expected = designed.value if designed else "-"
        actual = result.first_signal.value if result.first_signal else "-"
        print(f"{_PROG}: {message.format(expected=expected, actual=actual)}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


@contextlib.contextmanager
def _logging(*, verbose: bool) -> Iterator[None]:
    """Show log lines on stderr when ``verbose``; otherwise keep them off the terminal (the
    timeline shows every verdict, which Python would also print as warnings)."""
    root = logging.getLogger()
    package = logging.getLogger("langchain_loop_guard")
    level = package.level
    handler: logging.Handler
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        package.setLevel(logging.INFO)
    else:
        handler = logging.NullHandler()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        package.setLevel(level)


DEMO = Command(
    name="demo",
    summary="run an offline agent that falls into a loop, and watch the guard stop it",
    description="""\
Run a real LangChain agent, offline (a scripted model and scripted tools, no API key),
that falls into a loop, and print the timeline: each model turn, each tool call (its name
and a digest of its arguments, never the arguments) with its outcome, and the guard's
verdicts. The guard uses the built-in defaults, not your configuration files, so the demo
behaves the same everywhere; only its language follows LOOP_GUARD_LOCALE (or --locale).""",
    add_arguments=_demo_arguments,
    run=_run_demo,
    epilog=_demo_epilog,
)


def _config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"field": {"value": ..., "source": ...}, ...} as JSON',
    )


def _run_config(args: argparse.Namespace) -> int:
    try:
        config = LoopGuardConfig.load()
    except LoopGuardConfigError as exc:
        return _usage(exc, str)
    rows = config.describe()
    if args.json:
        data = {row.field: {"value": row.value, "source": row.source} for row in rows}
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return EXIT_OK
    tr = translator(config.locale)
    table = [
        (tr.gettext("setting"), tr.gettext("value"), tr.gettext("source")),
        *((row.field, _show(row.value), row.source) for row in rows),
    ]
    print(tr.gettext("loop-guard configuration"))
    for line in text_table(table):
        print(line)
    return EXIT_OK


def _show(value: object) -> str:
    """A configuration value as JSON text (``ignore_tools`` a list, overrides an object)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


CONFIG = Command(
    name="config",
    summary="show the effective configuration and where each value comes from",
    description="""\
Resolve the configuration as a guard created without arguments would, lowest first:
built-in defaults, $XDG_CONFIG_HOME/loop-guard/config.json (default ~/.config/...),
.loop-guard.json in the working directory (or the file LOOP_GUARD_CONFIG names), and the
LOOP_GUARD_* environment variables. Print each value with its source. An invalid
configuration prints one line per problem on stderr and exits with status 2.""",
    add_arguments=_config_arguments,
    run=_run_config,
    epilog=_CONFIG_EXIT_STATUS,
)


def _replay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trace", metavar="TRACE", help="the trace file (or a directory of trace files) to replay"
    )
    parser.add_argument(
        "--format",
        # _replay.TRACE_FORMATS, not imported here
        choices=("auto", "loop-guard", "langsmith", "trajectories"),
        default="auto",
        help="loop-guard: a trace a guard recorded with record_to=; langsmith: LangSmith runs "
        "(any export shape); trajectories: recorded agent runs as detector events "
        "(default: %(default)s, from the content)",
    )
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="values",
        help="evaluate with this configuration value, over files and environment; VALUE is "
        'JSON when it parses as JSON (5, true, ["sleep"]), else a string; repeatable',
    )
    parser.add_argument(
        "--sweep",
        metavar="KEY=V1,V2,...",
        help="replay under each value of one setting (in one pass) and report, per value, how "
        "many runs would stop and which runs change from one value to the next; the values "
        'are comma-separated, or one JSON array (ignore_tools=[[],["sleep"]])',
    )
    verdicts = parser.add_mutually_exclusive_group()
    verdicts.add_argument(
        "--labels",
        metavar="FILE",
        help="your verdicts on the runs, to score the stops against: a JSON object "
        '{"RUN": "loop" | "fine", ...} or CSV rows RUN,LABEL; with --sweep, each value says '
        "the loops it stops, the loops it misses and the good runs it would stop",
    )
    verdicts.add_argument(
        "--feedback",
        metavar="KEY[=THRESHOLD]",
        help="take the verdicts from a LangSmith export's feedback (feedback_stats): a run "
        "whose average KEY score is below THRESHOLD (default 0.5) looped, others were fine",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--html",
        metavar="REPORT.html",
        help="also write the report as one self-contained HTML page: an overview, a timeline "
        "per run that would stop (the others folded) and, with --sweep, a chart per value; "
        "no script, nothing loaded from the network",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on stderr (default: when stderr is a terminal)",
    )


def _run_replay(args: argparse.Namespace) -> int:
    from langchain_loop_guard._replay._calibrate import calibrate  # noqa: PLC0415
    from langchain_loop_guard._replay._labels import Feedback  # noqa: PLC0415
    from langchain_loop_guard._replay._replay import replay, terminal_safe  # noqa: PLC0415
    from langchain_loop_guard._replay._trace import TraceFormatError  # noqa: PLC0415

    try:
        values: dict[str, Any] = dict(_setting(text) for text in args.values)
        sweep = _sweep(args.sweep) if args.sweep is not None else None
        config = LoopGuardConfig.load()
        if values:  # errors name the flag that gave the value
            config = config.merged(source="--set", **values)
        feedback = Feedback.parse(args.feedback) if args.feedback is not None else None
    except ValueError as exc:
        return _usage(exc, terminal_safe)
    verdicts = {"labels": args.labels, "feedback": feedback}
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    bar = _ProgressBar(sys.stderr) if show else None
    trace_format = None if args.format == "auto" else args.format
    result: Any
    try:
        if sweep is None:
            result = replay(args.trace, config, format=trace_format, progress=bar, **verdicts)
        else:
            key, tried = sweep
            result = calibrate(
                args.trace,
                key,
                tried,
                config,
                format=trace_format,
                progress=bar,
                source="--sweep",
                **verdicts,
            )
        if args.html is not None:
            with open(args.html, "w", encoding="utf-8") as page:
                page.write(result.to_html())

    except (LoopGuardConfigError, TraceFormatError) as exc:
        return _usage(exc, terminal_safe)
    except OSError as exc:
        problem = f"{exc.filename or args.trace}: {exc.strerror or exc}"
        print(f"{_PROG}: {terminal_safe(problem)}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if bar is not None:
            bar.close()
    if args.json:  # streamed: a run at a time, not the whole document in memory
        sys.stdout.writelines(result.json_chunks())
        sys.stdout.write("\n")
    else:
        for line in result.lines():
            print(line)
    if args.html is not None:  # after the report: the last line a terminal shows
        wrote = translator(config.locale).gettext("Wrote the HTML report to {path}")
        print(terminal_safe(wrote.format(path=args.html)), file=sys.stderr)
    return EXIT_OK


def _usage(exc: ValueError, safe: Callable[[str], str]) -> int:
    """Print a usage, configuration or trace problem (one line each); the usage status."""
    problems = exc.problems if isinstance(exc, LoopGuardConfigError) else (str(exc),)
    for problem in problems:
        print(f"{_PROG}: {safe(problem)}", file=sys.stderr)
    return EXIT_USAGE


def _setting(text: str, flag: str = "--set") -> tuple[str, object]:
    """``KEY=VALUE`` as a configuration value: JSON when it parses, else the string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        shape = "KEY=V1,V2,..." if flag == "--sweep" else "KEY=VALUE"
        msg = f"{flag} takes {shape}, not {text!r}"
        raise ValueError(msg)
    if key.startswith("_"):
        msg = f"{flag}: {key!r} is not a setting (names starting with '_' are not configuration)"
        raise ValueError(msg)
    return key, _parsed(raw)


def _parsed(raw: str) -> object:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _sweep(text: str) -> tuple[str, list[object]]:
    """``KEY=V1,V2,...`` (or ``KEY=[V1, V2, ...]``) as the key and its values."""
    key, raw = _setting(text, "--sweep")
    if isinstance(raw, list):
        values = raw
    elif isinstance(raw, dict):  # one per-tool map (tool_threshold_overrides={"search": 5})
        values = [raw]
    else:
        _, _, listed = text.partition("=")
        values = [_parsed(part.strip()) for part in listed.split(",") if part.strip()]
    if not values:
        msg = f"--sweep takes KEY=V1,V2,..., not {text!r}"
        raise ValueError(msg)
    return key, values


class _ProgressBar:
    """A one-line progress bar (``\\r``-redrawn) for long replays; redrawn per percent."""

    _WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._shown = -1

    def __call__(self, done: int, total: int) -> None:
        percent = 100 if total <= 0 else min(100, done * 100 // total)
        if percent == self._shown:
            return
        self._shown = percent
        filled = self._WIDTH * percent // 100
        bar = "#" * filled + "." * (self._WIDTH - filled)
        self._stream.write(f"\rreplaying [{bar}] {percent:3d}%")
        self._stream.flush()

    def close(self) -> None:
        if self._shown >= 0:
            self._stream.write("\r" + " " * (self._WIDTH + 20) + "\r")
            self._stream.flush()


REPLAY = Command(
    name="replay",
    summary="replay a recorded trace and report where the guard would stop each run",
    description="""\
Feed a recorded trace through the detector under the current configuration (files,
.loop-guard.json, LOOP_GUARD_* variables, then --set values) and report, per run, whether
and where the guard would stop it (event, tool call, trace line), which signal and why, the
warnings before that, and a summary. The mode is evaluated as "on" whatever the
configuration says: this is how you calibrate thresholds in observe mode before switching
to on. A nudging integration's first detections would only refuse the call; the replay
reports the first detection.

TRACE is a trace a guard recorded with record_to= (tool names, digests and timings; each run
also says whether the replay stops where the live run did), LangSmith runs (list_runs() or
runs.query() dumps, the langsmith CLI's export with --include-io, run trees, API pages;
JSON, JSON Lines or Parquet), or recorded agent trajectories; plain or gzip, a file or a
directory of files. Content is digested as it is read and not kept. A malformed trace is
reported as TRACE:LINE: problem, with exit status 2.

--sweep KEY=V1,V2,... replays the trace once under each value of one setting (over the
configuration and --set values) and reports how many runs each value would stop, and which
runs change from one value to the next: choose thresholds from your own history before
turning the guard on. Every setting that decides where a run stops can be swept, lists and
per-tool maps included (ignore_tools=[[],["sleep"]], volatile_fields=[[],["score"]]); a
setting a trace cannot answer (mode, locale, prompt_hint, nudges, the warnings' max_turns
and turn_timeout_ms; volatile_fields over a loop-guard trace, which holds digests, not
results) is refused before anything is replayed, saying why.

--labels FILE (or --feedback KEY for a LangSmith export with feedback) says which runs
looped and which were fine; each replay (each value of a sweep) then says how many loops it
stops, how many it misses and which good runs it would stop, and the page charts the loops
each value stops against the good runs it stops.""",
    add_arguments=_replay_arguments,
    run=_run_replay,
    epilog=_REPLAY_EXIT_STATUS,
)

COMMANDS: tuple[Command, ...] = (DEMO, CONFIG, REPLAY)
"""The subcommands, in ``--help`` order."""


def build_parser() -> argparse.ArgumentParser:
    """The ``loop-guard`` argument parser, with one subparser per :data:`COMMANDS` entry."""
    from langchain_loop_guard import __version__  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Stop runaway LLM-agent loops in LangChain and LangGraph.",
        epilog=_EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(
        title="commands", dest="command", required=True, metavar="COMMAND"
    )
    for command in COMMANDS:
        epilog = command.epilog if isinstance(command.epilog, str) else command.epilog()
        sub = subparsers.add_parser(
            command.name,
            help=command.summary,
            description=command.description,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``loop-guard`` with ``argv`` (default: the process's arguments); return the status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        run: Callable[[argparse.Namespace], int] = args.run
        return run(args)
    except SystemExit as exc:  # argparse: --help, --version and usage errors
        if exc.code is None:
            return EXIT_OK
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (``loop-guard config | head``): stop writing, quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURE
