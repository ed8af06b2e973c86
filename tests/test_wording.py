"""What the reports say is what happened (issue 40, point 8): counts that match their limits,
the user's own label words."""

from __future__ import annotations

import json

import pytest
from conversations import Scenario, User, call, drive
from every_agent import reworded_plan

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Signal, Verdict
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._verdict import RAISED
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


# --- a limit that is not its key's value says why (issue 40, point 8) ------------------------

_POD_TABLE = (
    "NAME                     READY   STATUS    RESTARTS   AGE\n"
    "redis-master-0           1/1     Running   0          3d\n"
    "redis-replicas-0         1/1     Running   0          3d\n"
)


def _shell(command: str) -> str:
    if "upgrade" in command:
        return 'Release "redis" has been upgraded. Happy Helming!\nSTATUS: deployed\nREVISION: 7'
    return _POD_TABLE  # the rollout never starts: the same table every time


def _rollout_never_lands() -> Scenario:
    """A deploy agent upgrades a release, then polls the pods, which never change."""
    poll = call("bash", command="kubectl get pods -n shared-services")
    return Scenario(
        "rollout-never-lands",
        [
            User("Upgrade redis to 22.0.0 and tell me when the pods are up."),
            call("bash", command="helm upgrade redis bitnami/redis --version 22.0.0"),
            *[poll] * 12,
        ],
        {"bash": _shell},
    )


def _stuck_scroll() -> Scenario:
    """A browser agent scrolling a page that is at its end: the same view every time."""
    view = "Scrolled down.\nVisible content:\n" + "\n".join(
        f"[{n}] Review {n}: sturdy, easy to assemble, 4 stars" for n in range(12)
    )
    return Scenario(
        "stuck-scroll",
        [User("Read the reviews."), *[call("scroll", direction="down")] * 8],
        {"scroll": lambda direction: view},
    )


_CHAPTERS = [
    "Installation: pip install the package, then run the setup wizard once.",
    "Configuration lives in settings.toml; every key has an environment variable.",
    "The scheduler runs jobs at most once per minute and retries failures twice.",
    "Backups are written nightly to object storage and kept for thirty days.",
    "Metrics are exported on port 9100 in the Prometheus text format.",
    "Upgrades are rolling: one replica at a time, health-checked before the next.",
]


def _reread_between_news() -> Scenario:
    """R19: a docs agent re-reading the same config between chapters that each say something
    new: a browse, given one call more than the window's limit."""

    def get_config() -> str:
        return json.dumps(
            {
                "region": "eu-west-1",
                "replicas": 3,
                "image": "registry.example.com/ops/api:1.4.2",
                "database": {"host": "db.internal", "port": 5432, "pool": 20},
                "features": ["audit-log", "rate-limits", "sso"],
            },
            indent=2,
        )

    def read_chapter(number: int) -> str:
        return _CHAPTERS[number]

    script: list[object] = [User("Summarise the operations guide for the on-call team.")]
    for n in range(len(_CHAPTERS)):
        script += [call("get_config"), call("read_chapter", number=n)]
    return Scenario(
        "reread-between-news", script, {"get_config": get_config, "read_chapter": read_chapter}
    )


@pytest.mark.parametrize(
    ("scenario", "signal", "limit", "why"),
    [
        pytest.param(reworded_plan("sql-plan"), Signal.REPLY_CYCLE, 4, "reworded", id="reworded"),
        pytest.param(
            _rollout_never_lands(), Signal.REPEATED_TOOL_CALL, 7, "wait", id="wait-for-act"
        ),
        pytest.param(_stuck_scroll(), Signal.REPEATED_TOOL_CALL, 4, "paging", id="paging"),
        pytest.param(_reread_between_news(), Signal.TOOL_FREQUENCY, 5, "news", id="news"),
    ],
)
@pytest.mark.parametrize("locale", ["en", "ko"])
def test_a_limit_above_its_key_says_why(
    scenario: Scenario,
    signal: Signal,
    limit: int,
    why: str,
    locale: str,
) -> None:
    """A stop whose limit is not the configured value of its signal's key ("limit 4" under
    ``repeat_assistant_threshold=3``) says why, in the user's language; the defaults are 3
    and 4, so each limit here differs from them."""
    seen = drive(scenario, locale=locale)
    assert seen.stop is not None
    verdict = seen.stop
    assert (verdict.signal, verdict.threshold, verdict.raised) == (signal, limit, why)
    text = translator(locale).gettext(RAISED[why])
    assert text != RAISED[why] or locale == "en"
    assert verdict.message.count(text) == 1


def test_a_limit_at_its_key_s_value_adds_nothing() -> None:
    """The same read repeated with no act before it stops at the configured limit, and the
    reason adds no explanation."""
    poll = call("bash", command="kubectl get pods -n shared-services")
    seen = drive(Scenario("polls", [User("Are the pods up?"), *[poll] * 5], {"bash": _shell}))
    assert seen.stop is not None
    assert (seen.stop.threshold, seen.stop.raised) == (3, "")
    assert not any(text in seen.stop.message for text in RAISED.values())


def test_a_window_limit_raised_by_a_tool_s_own_limit_names_it() -> None:
    """``tool_threshold_overrides`` above ``repeat_frequency_threshold`` is the window's limit
    for that tool, and the stop says so."""
    detector = LoopDetector(
        LoopGuardConfig(tool_threshold_overrides={"lookup": 5}, frequency_window_size=12)
    )
    verdict = Verdict()
    for n in range(12):
        detector.turn_start()
        name, args = ("lookup", {"sku": "A-1"}) if n % 2 == 0 else ("note", {"text": f"n{n}"})
        verdict = detector.tool_call(name, args, call_id=f"c{n}")
        if verdict.stops:
            break
        detector.tool_result(
            name, "SKU A-1: 4 in stock" if name == "lookup" else "", call_id=f"c{n}"
        )
    assert verdict.signal is Signal.TOOL_FREQUENCY
    assert (verdict.threshold, verdict.raised) == (5, "tool")
    assert "`repeat_frequency_threshold`" in verdict.message


def test_no_progress_raised_to_its_tools_limit_names_it() -> None:
    """``no_progress_calls`` below the repeat limit of the streak's tools is raised to it, and
    the stop says so."""
    detector = LoopDetector(
        LoopGuardConfig(
            no_progress_calls=3, repeat_tool_threshold=5, cycle_repeats=9, max_sequence_length=0
        )
    )
    verdict = Verdict()
    calls = [("get", {"id": 1}), ("get", {"id": 2})]
    for n in range(20):
        detector.turn_start()
        name, args = calls[n % 2]
        verdict = detector.tool_call(name, args, call_id=f"c{n}")
        if verdict.stops:
            break
        detector.tool_result(name, f"item {args['id']}", call_id=f"c{n}")
    assert verdict.signal is Signal.NO_PROGRESS
    assert (verdict.threshold, verdict.raised) == (5, "tools")
    assert "`no_progress_calls`" in verdict.message
