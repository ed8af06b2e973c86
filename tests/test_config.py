"""Configuration (SPEC §5): values, sources and their precedence, provenance, and clear errors."""

from __future__ import annotations

import copy
import json
import logging
import os
import pickle
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from langchain_loop_guard import LoopGuardConfig, LoopGuardConfigError, LoopGuardError
from langchain_loop_guard._core._config import ConfigRow
from langchain_loop_guard._core._errors import ConfigProblem

Loader = Callable[..., LoopGuardConfig]

SPEC_DEFAULTS: dict[str, object] = {
    "mode": "on",
    "locale": "en",
    "prompt_hint": True,
    "max_turns": 12,
    "turn_timeout_ms": 180_000,
    "repeat_tool_threshold": 3,
    "repeat_error_threshold": 3,
    "repeat_assistant_threshold": 3,
    "cycle_repeats": 3,
    "max_cycle_length": 3,
    "repeat_frequency_threshold": 4,
    "frequency_window_size": 10,
    "ignore_tools": frozenset(),
    "acting_tools": frozenset(),
    "read_only_tools": frozenset(),
    "tool_threshold_overrides": {},
    "progress_aware": True,
    "no_progress_calls": 8,
    # SPEC §11 (v3), calibrated on real agent runs
    "near_repeat_threshold": 4,
    "max_sequence_length": 6,
    "no_new_info_calls": 10,
    "failing_turns": 6,
    # SPEC §13 (v4)
    "volatile_fields": {},
    # SPEC §12 (v3.1)
    "reply_cycle_length": 4,
    "nudges": 0,
    # SPEC §13 C1 (v4): thread scope where the run has a checkpointer and a thread_id
    "scope": "auto",
}

CAMEL_CASE = [
    ("promptHint", "prompt_hint", False),
    ("maxTurns", "max_turns", 20),
    ("turnTimeoutMs", "turn_timeout_ms", 60_000),
    ("repeatToolThreshold", "repeat_tool_threshold", 5),
    ("repeatErrorThreshold", "repeat_error_threshold", 5),
    ("repeatAssistantThreshold", "repeat_assistant_threshold", 5),
    ("cycleRepeats", "cycle_repeats", 5),
    ("maxCycleLength", "max_cycle_length", 5),
    ("repeatFrequencyThreshold", "repeat_frequency_threshold", 5),
    ("frequencyWindowSize", "frequency_window_size", 20),
    ("ignoreTools", "ignore_tools", ["sleep"]),
    ("toolThresholdOverrides", "tool_threshold_overrides", {"bash": 5}),
    ("progressAware", "progress_aware", False),
    ("noProgressCalls", "no_progress_calls", 0),
    ("nearRepeatThreshold", "near_repeat_threshold", 0),
    ("maxSequenceLength", "max_sequence_length", 8),
    ("noNewInfoCalls", "no_new_info_calls", 12),
    ("failingTurns", "failing_turns", 0),
    ("replyCycleLength", "reply_cycle_length", 2),
    ("volatileFields", "volatile_fields", {"search": frozenset({"rank"})}),
]

# SPEC §5's environment variables, with a value, its field and the parsed value.
ENVIRONMENT = [
    ("LOOP_GUARD_MODE", "observe", "mode", "observe"),
    ("LOOP_GUARD_LOCALE", "ko", "locale", "ko"),
    ("LOOP_GUARD_PROMPT_HINT", "off", "prompt_hint", False),
    ("LOOP_GUARD_MAX_TURNS", "30", "max_turns", 30),
    ("LOOP_GUARD_TURN_TIMEOUT_MS", "60000", "turn_timeout_ms", 60_000),
    ("LOOP_GUARD_REPEAT_TOOL", "5", "repeat_tool_threshold", 5),
    ("LOOP_GUARD_REPEAT_ERROR", "4", "repeat_error_threshold", 4),
    ("LOOP_GUARD_REPEAT_ASSISTANT", "6", "repeat_assistant_threshold", 6),
    ("LOOP_GUARD_CYCLE_REPEATS", "4", "cycle_repeats", 4),
    ("LOOP_GUARD_MAX_CYCLE_LENGTH", "5", "max_cycle_length", 5),
    ("LOOP_GUARD_REPEAT_FREQUENCY", "6", "repeat_frequency_threshold", 6),
    ("LOOP_GUARD_FREQUENCY_WINDOW", "20", "frequency_window_size", 20),
    ("LOOP_GUARD_IGNORE_TOOLS", "sleep,wait", "ignore_tools", frozenset({"sleep", "wait"})),
    (
        "LOOP_GUARD_TOOL_OVERRIDES",
        "bash=2,read=5",
        "tool_threshold_overrides",
        {"bash": 2, "read": 5},
    ),
    ("LOOP_GUARD_PROGRESS_AWARE", "false", "progress_aware", False),
    ("LOOP_GUARD_NO_PROGRESS_CALLS", "0", "no_progress_calls", 0),
    ("LOOP_GUARD_NEAR_REPEAT", "10", "near_repeat_threshold", 10),
    ("LOOP_GUARD_MAX_SEQUENCE_LENGTH", "0", "max_sequence_length", 0),
    ("LOOP_GUARD_NO_NEW_INFO", "0", "no_new_info_calls", 0),
    ("LOOP_GUARD_FAILING_TURNS", "12", "failing_turns", 12),
    ("LOOP_GUARD_REPLY_CYCLE", "0", "reply_cycle_length", 0),
    (
        "LOOP_GUARD_VOLATILE_FIELDS",
        "score, search:rank",
        "volatile_fields",
        {"*": frozenset({"score"}), "search": frozenset({"rank"})},
    ),
    ("LOOP_GUARD_NUDGES", "2", "nudges", 2),
    ("LOOP_GUARD_SCOPE", "thread", "scope", "thread"),
]


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home directory of its own, so the real one is never read."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory of its own."""
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def global_file(home: Path) -> Path:
    """Where the global file is found when only ``HOME`` is set."""
    return home / ".config" / "loop-guard" / "config.json"


@pytest.fixture
def project_file(project: Path) -> Path:
    """Where the project file is found."""
    return project / ".loop-guard.json"


@pytest.fixture
def load(home: Path, project: Path) -> Loader:
    """``LoopGuardConfig.load`` on the test's own home, working directory and environment."""

    def _load(env: Mapping[str, str] | None = None, **values: object) -> LoopGuardConfig:
        environ = {"HOME": str(home), **(env or {})}
        return LoopGuardConfig._load(values, environ=environ, cwd=project)

    return _load


def write(path: Path, content: object) -> Path:
    """Write ``content`` (JSON data, or text as is) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return path


def config_error(**values: object) -> LoopGuardConfigError:
    """The error ``LoopGuardConfig(**values)`` raises."""
    with pytest.raises(LoopGuardConfigError) as info:
        LoopGuardConfig(**values)
    return info.value


def load_error(load: Loader, env: Mapping[str, str] | None = None) -> LoopGuardConfigError:
    """The error ``load(env)`` raises."""
    with pytest.raises(LoopGuardConfigError) as info:
        load(env)
    return info.value


# --- values and defaults ---------------------------------------------------------------------


def test_defaults_are_the_specs() -> None:
    """With no values, every field has SPEC §5's default."""
    config = LoopGuardConfig()
    for field, default in SPEC_DEFAULTS.items():
        assert getattr(config, field) == default, field


def test_values_override_defaults() -> None:
    """Values passed in override their fields' defaults and leave the rest alone."""
    config = LoopGuardConfig(max_turns=5, scope="thread")
    assert (config.max_turns, config.scope) == (5, "thread")
    assert config.repeat_tool_threshold == 3


@pytest.mark.parametrize(("alias", "field", "value"), CAMEL_CASE)
def test_camel_case_aliases_are_accepted(alias: str, field: str, value: object) -> None:
    """Each of the seed's camelCase names sets its snake_case field."""
    by_alias = LoopGuardConfig(**{alias: value})
    assert by_alias == LoopGuardConfig(**{field: value})
    assert by_alias != LoopGuardConfig()


def test_enabled_false_means_mode_off() -> None:
    """``enabled=False`` is the seed's alias for ``mode="off"``."""
    config = LoopGuardConfig(enabled=False)
    assert config.mode == "off"
    assert config.sources["mode"] == "code"


def test_enabled_true_changes_nothing(load: Loader, global_file: Path) -> None:
    """``enabled: true`` does not switch on a mode a lower source set."""
    write(global_file, {"mode": "observe"})
    assert LoopGuardConfig(enabled=True) == LoopGuardConfig()
    assert load(enabled=True).mode == "observe"


def test_enabled_false_in_a_higher_source_beats_a_lower_mode(load: Loader) -> None:
    """``enabled=False`` in code turns off a mode the environment set."""
    config = load({"LOOP_GUARD_MODE": "observe"}, enabled=False)
    assert (config.mode, config.sources["mode"]) == ("off", "code")


def test_enabled_false_with_mode_off_is_consistent() -> None:
    """``enabled=False`` together with ``mode="off"`` is no contradiction."""
    assert LoopGuardConfig(enabled=False, mode="off").mode == "off"


def test_enabled_false_with_another_mode_is_an_error() -> None:
    """``enabled=False`` with ``mode="observe"`` in the same source is a clear error."""
    error = config_error(enabled=False, mode="observe")
    assert "key 'enabled': false contradicts mode 'observe'" in str(error)
    assert (error.source, error.key, error.value) == ("code", "enabled", False)


def test_enabled_must_be_a_boolean() -> None:
    """``enabled`` is true or false, never a string that looks like one."""
    error = config_error(enabled="no")
    assert "key 'enabled': got 'no'; allowed: true or false" in str(error)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("mode", "ON", "on"),
        ("mode", "Observe", "observe"),
        ("mode", "OFF", "off"),
        ("scope", "Thread", "thread"),
        ("scope", "RUN", "run"),
        ("scope", "Auto", "auto"),
        ("locale", "KO", "ko"),
        ("locale", "En", "en"),
    ],
)
def test_enumerated_values_are_read_in_any_case(field: str, value: str, expected: str) -> None:
    """``"ON"``, ``"Thread"`` and ``"KO"`` are the words they spell, stored in lower case."""
    assert getattr(LoopGuardConfig(**{field: value}), field) == expected


def test_enumerated_values_are_read_in_any_case_from_the_environment(load: Loader) -> None:
    """The variables take any case too."""
    config = load({"LOOP_GUARD_MODE": "OBSERVE", "LOOP_GUARD_SCOPE": "Thread"})
    assert (config.mode, config.scope) == ("observe", "thread")


def test_enabled_false_agrees_with_mode_off_in_any_case() -> None:
    """``enabled: false`` with ``mode: "OFF"`` in one place is consistent, not a conflict."""
    assert LoopGuardConfig(enabled=False, mode="OFF").mode == "off"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("ko_KR.UTF-8", "ko"),
        ("ko-KR", "ko"),
        ("ko_KR", "ko"),
        ("ko-Kore-KR", "ko"),
        ("en_US.UTF-8", "en"),
        ("en-GB", "en"),
        ("C", "en"),
    ],
)
def test_locale_identifiers_are_negotiated_to_a_catalog(value: str, expected: str) -> None:
    """POSIX and BCP 47 identifiers name the catalog of their language, without a warning."""
    assert LoopGuardConfig(locale=value).locale == expected


def test_locale_identifier_from_the_environment(load: Loader) -> None:
    """``LOOP_GUARD_LOCALE=ko_KR.UTF-8`` (a copy of ``LANG``) selects Korean."""
    config = load({"LOOP_GUARD_LOCALE": "ko_KR.UTF-8"})
    assert config.locale == "ko"
    assert config.sources["locale"] == "environment LOOP_GUARD_LOCALE"


def test_a_locale_without_messages_falls_back_to_english_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real locale with no catalog is English, and a WARNING line names it."""
    with caplog.at_level(logging.WARNING, logger="langchain_loop_guard"):
        config = LoopGuardConfig(locale="fr_FR")
    assert config.locale == "en"
    assert [r.getMessage() for r in caplog.records] == [
        "loop-guard: no messages in locale 'fr_FR' (available: en, ko); using 'en'"
    ]


def test_a_supported_locale_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Negotiating ``ko_KR`` is quiet."""
    with caplog.at_level(logging.DEBUG, logger="langchain_loop_guard"):
        LoopGuardConfig(locale="ko_KR")
    assert caplog.records == []


def test_prompt_hint_is_on_by_default_and_can_be_switched_off(load: Loader) -> None:
    """``prompt_hint`` defaults to true; code, alias and variable turn it off."""
    assert LoopGuardConfig().prompt_hint is True
    assert LoopGuardConfig(prompt_hint=False).prompt_hint is False
    assert LoopGuardConfig(promptHint=False).prompt_hint is False
    assert load({"LOOP_GUARD_PROMPT_HINT": "false"}).prompt_hint is False
    assert LoopGuardConfig().merged(prompt_hint=False).sources["prompt_hint"] == "runtime"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_turns", "3"),
        ("max_turns", True),
        ("max_turns", 3.0),
        ("max_turns", None),
        ("repeat_tool_threshold", "3"),
        ("progress_aware", 1),
        ("progress_aware", "true"),
        ("prompt_hint", "false"),
        ("prompt_hint", 0),
        ("mode", "loud"),
        ("mode", None),
        ("locale", "korean"),
        ("locale", "kr"),
        ("locale", ""),
        ("locale", 3),
        ("scope", "graph"),
        ("ignore_tools", "sleep"),
        ("ignore_tools", ["sleep", 1]),
        ("ignore_tools", {"sleep": 1}),
        ("tool_threshold_overrides", {"bash": "2"}),
        ("tool_threshold_overrides", {"bash": True}),
        ("tool_threshold_overrides", {1: 2}),
        ("tool_threshold_overrides", [("bash", 2)]),
    ],
)
def test_types_are_strict(field: str, value: object) -> None:
    """A value of the wrong type is an error, even one that could be coerced."""
    error = config_error(**{field: value})
    assert error.key == field
    assert f"code, key {field!r}: got {value!r}" in str(error)


def test_ignore_tools_accepts_any_collection_of_names() -> None:
    """``ignore_tools`` takes a list, tuple or set of names, kept as a frozenset."""
    for names in (["sleep", "wait"], ("wait", "sleep"), {"sleep", "wait"}):
        assert LoopGuardConfig(ignore_tools=names).ignore_tools == frozenset({"sleep", "wait"})


# Edges of every bounded field: below, at and above each bound.
BOUNDS = [
    *[
        (field, value, valid)
        for field in (
            "repeat_tool_threshold",
            "repeat_error_threshold",
            "repeat_assistant_threshold",
            "cycle_repeats",
        )
        for value, valid in ((1, False), (2, True), (1000, True), (1001, False))
    ],
    ("repeat_frequency_threshold", 1, False),
    ("repeat_frequency_threshold", 2, True),
    ("repeat_frequency_threshold", 10, True),
    ("repeat_frequency_threshold", 11, False),  # above the default window of 10
    ("frequency_window_size", 3, False),  # below the default threshold of 4
    ("frequency_window_size", 4, True),
    ("frequency_window_size", 1000, True),
    ("frequency_window_size", 1001, False),
    ("max_cycle_length", 1, False),
    ("max_cycle_length", 2, True),
    ("max_cycle_length", 20, True),
    ("max_cycle_length", 21, False),
    ("max_turns", 0, False),
    ("max_turns", 1, True),
    ("max_turns", 10**9, True),
    ("turn_timeout_ms", 0, False),
    ("turn_timeout_ms", 1, True),
    ("no_progress_calls", -1, False),
    ("no_progress_calls", 0, True),
    ("no_progress_calls", 1, False),
    ("no_progress_calls", 2, True),
    ("no_progress_calls", 1000, True),
    ("no_progress_calls", 1001, False),
    ("near_repeat_threshold", 0, True),
    ("near_repeat_threshold", 1, False),
    ("near_repeat_threshold", 2, True),
    ("max_sequence_length", 0, True),
    ("max_sequence_length", 3, False),
    ("max_sequence_length", 4, True),
    ("max_sequence_length", 20, True),
    ("max_sequence_length", 21, False),
    ("no_new_info_calls", 1, False),
    ("no_new_info_calls", 1000, True),
    ("failing_turns", 1, False),
    ("failing_turns", 0, True),
    ("reply_cycle_length", -1, False),
    ("reply_cycle_length", 0, True),
    ("reply_cycle_length", 1, True),
    ("reply_cycle_length", 20, True),
    ("reply_cycle_length", 21, False),
    ("nudges", -1, False),
    ("nudges", 0, True),
    ("nudges", 1000, True),
    ("nudges", 1001, False),
]


@pytest.mark.parametrize(("field", "value", "valid"), BOUNDS)
def test_bounds(field: str, value: int, valid: bool) -> None:
    """Numbers inside their bounds are kept; outside, the error names field, value, bounds."""
    if valid:
        assert getattr(LoopGuardConfig(**{field: value}), field) == value
    else:
        error = config_error(**{field: value})
        assert (error.key, error.value) == (field, value)
        assert f"got {value}" in str(error)
        assert error.allowed is not None
        assert error.allowed in str(error)


@pytest.mark.parametrize(("value", "valid"), [(1, False), (2, True), (1000, True), (1001, False)])
def test_override_bounds(value: int, valid: bool) -> None:
    """Every threshold override is an integer from 2 to 1000."""
    if valid:
        config = LoopGuardConfig(tool_threshold_overrides={"bash": value})
        assert config.tool_threshold_overrides == {"bash": value}
    else:
        error = config_error(tool_threshold_overrides={"bash": value})
        assert "(bash: Input should be" in str(error)
        assert "allowed: an object mapping tool names to integers from 2 to 1000" in str(error)


def test_bounds_of_the_window_follow_its_threshold() -> None:
    """A larger threshold needs a larger window: 1000 and 1000 are fine together."""
    config = LoopGuardConfig(repeat_frequency_threshold=1000, frequency_window_size=1000)
    assert config.repeat_frequency_threshold == config.frequency_window_size == 1000


# --- errors ------------------------------------------------------------------------------------


def test_config_error_is_a_value_error_and_a_loop_guard_error() -> None:
    """``LoopGuardConfigError`` is caught by ``except ValueError`` and ``except LoopGuardError``."""
    error = config_error(max_turns=0)
    assert isinstance(error, ValueError)
    assert isinstance(error, LoopGuardError)
    assert not isinstance(error, ValidationError)


def test_error_names_source_key_value_and_allowed() -> None:
    """The message and the attributes say where, which key, what value and what is allowed."""
    error = config_error(repeatToolThreshold=1)
    assert str(error) == (
        "invalid loop-guard configuration: code, key 'repeatToolThreshold': got 1; "
        "allowed: an integer from 2 to 1000"
    )
    assert (error.source, error.key, error.value) == ("code", "repeatToolThreshold", 1)
    assert error.allowed == "an integer from 2 to 1000"
    assert error.problems == (str(error).removeprefix("invalid loop-guard configuration: "),)
    assert error.details == (
        ConfigProblem(
            source="code",
            key="repeatToolThreshold",
            value=1,
            allowed="an integer from 2 to 1000",
            message=error.problems[0],
        ),
    )
    assert str(error.details[0]) == error.problems[0]


def test_unknown_key_is_an_error_with_a_suggestion() -> None:
    """A typo is never silently ignored, and the error suggests the closest key."""
    error = config_error(repeatToolThresold=4)
    assert "code: unknown key 'repeatToolThresold' = 4" in str(error)
    assert "(did you mean 'repeatToolThreshold'?)" in str(error)
    assert "allowed: one of acting_tools, cycle_repeats, enabled," in str(error)
    assert (error.key, error.value) == ("repeatToolThresold", 4)


def test_unknown_key_far_from_any_gets_no_suggestion() -> None:
    """Nothing is suggested when no key is close."""
    assert "did you mean" not in str(config_error(zzz=1))


def test_field_set_twice_by_name_and_alias_is_an_error() -> None:
    """One source may not set a field under both its names."""
    error = config_error(maxTurns=5, max_turns=6)
    assert "key 'max_turns': got 6, but 'maxTurns' already sets max_turns" in str(error)


def test_window_smaller_than_threshold_is_an_error() -> None:
    """The window must hold at least its threshold (4 by default)."""
    error = config_error(frequency_window_size=3)
    assert "key 'frequency_window_size': got 3, a window smaller than" in str(error)
    assert "repeat_frequency_threshold 4 (default)" in str(error)
    assert error.allowed == "a window of at least the threshold (4)"


def test_threshold_above_the_window_is_put_on_the_threshold() -> None:
    """When the threshold is what was set, the error is put on it and names the window."""
    error = config_error(repeat_frequency_threshold=11)
    assert str(error) == (
        "invalid loop-guard configuration: code, key 'repeat_frequency_threshold': got 11, "
        "a threshold larger than frequency_window_size 10 (default); "
        "allowed: a threshold of at most the window (10)"
    )
    assert (error.source, error.key, error.value) == ("code", "repeat_frequency_threshold", 11)


def test_window_check_is_skipped_when_a_value_is_invalid() -> None:
    """An invalid window or threshold is reported once, not again as a window problem."""
    assert len(config_error(frequency_window_size="3").problems) == 1
    assert len(config_error(repeat_frequency_threshold=1, frequency_window_size=1).problems) == 2


def test_every_problem_is_reported() -> None:
    """All problems are reported together, one line each, not just the first."""
    error = config_error(
        max_turns="12",
        locale="korean",
        ignore_tools="sleep",
        nudges=-1,
        frequency_window_size=3,
        unknown=1,
    )
    assert len(error.problems) == 6
    assert str(error).startswith("invalid loop-guard configuration (6 problems):\n  - ")
    for line in error.problems:
        assert f"\n  - {line}" in str(error)
    assert {problem.key for problem in error.details} == {
        "max_turns",
        "locale",
        "ignore_tools",
        "nudges",
        "frequency_window_size",
        "unknown",
    }


def test_long_values_are_shortened_in_messages() -> None:
    """A huge bad value does not flood the message."""
    error = config_error(mode="x" * 10_000)
    assert len(str(error)) < 300
    assert error.value == "x" * 10_000


def test_error_from_a_bare_message_keeps_working() -> None:
    """``LoopGuardConfigError(message)`` still works, with the message as its one problem."""
    error = LoopGuardConfigError("bad", source="code", key="k", value=1, allowed="2")
    assert (error.problems, error.details) == (("bad",), ())
    assert (error.source, error.key, error.value, error.allowed) == ("code", "k", 1, "2")


# --- immutability, equality, serialization -----------------------------------------------------


def test_config_is_frozen() -> None:
    """Assigning a field raises; the collections in it cannot be changed either."""
    config = LoopGuardConfig(ignore_tools=["sleep"], tool_threshold_overrides={"bash": 2})
    with pytest.raises(ValidationError, match="frozen"):
        config.max_turns = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.tool_threshold_overrides["bash"] = 3  # type: ignore[index]
    assert isinstance(config.ignore_tools, frozenset)


def test_overrides_behave_as_a_read_only_mapping() -> None:
    """Overrides support ``get``, ``values``, ``len``, iteration (sorted) and dict equality."""
    overrides = LoopGuardConfig(tool_threshold_overrides={"read": 5, "bash": 2})
    mapping = overrides.tool_threshold_overrides
    assert mapping.get("bash") == 2
    assert mapping.get("grep", 3) == 3
    assert list(mapping) == ["bash", "read"]
    assert list(mapping.values()) == [2, 5]
    assert len(mapping) == 2
    assert mapping == {"bash": 2, "read": 5}
    assert repr(mapping) == "{'bash': 2, 'read': 5}"


def test_equal_values_compare_equal_whatever_their_sources(load: Loader) -> None:
    """Equality and hashing depend on the values only, not on where they came from."""
    from_code = LoopGuardConfig(max_turns=5, tool_threshold_overrides={"bash": 2})
    from_env = load({"LOOP_GUARD_MAX_TURNS": "5", "LOOP_GUARD_TOOL_OVERRIDES": "bash=2"})
    assert from_code.sources != from_env.sources
    assert from_code == from_env
    assert hash(from_code) == hash(from_env)
    assert len({from_code, from_env, LoopGuardConfig()}) == 2
    assert from_code != LoopGuardConfig(max_turns=6)
    assert from_code != {"max_turns": 5}


def test_model_dump_round_trips() -> None:
    """A dump, by name or by alias, builds the same configuration again."""
    config = LoopGuardConfig(ignore_tools=["wait", "sleep"], tool_threshold_overrides={"b": 2})
    assert LoopGuardConfig(**config.model_dump()) == config
    camel = config.model_dump(mode="json", by_alias=True)
    assert camel["ignoreTools"] == ["sleep", "wait"]
    assert camel["toolThresholdOverrides"] == {"b": 2}
    assert LoopGuardConfig(**json.loads(json.dumps(camel))) == config


def test_model_validate_takes_the_same_checks() -> None:
    """``model_validate`` goes through the same rules (pydantic wraps the error)."""
    assert LoopGuardConfig.model_validate({"enabled": False}).mode == "off"
    assert LoopGuardConfig.model_validate_json('{"maxTurns": 4}').max_turns == 4
    with pytest.raises(ValidationError, match="a window smaller than"):
        LoopGuardConfig.model_validate({"frequency_window_size": 3})


def test_json_schema_is_generated_without_warnings() -> None:
    """The JSON schema of the configuration file can be generated (camelCase keys)."""
    schema = LoopGuardConfig.model_json_schema()
    assert schema["additionalProperties"] is False
    assert schema["properties"]["repeatToolThreshold"]["minimum"] == 2


def test_copies_and_pickles_keep_values_and_sources(load: Loader) -> None:
    """A deep copy or a pickled copy is equal and keeps its sources."""
    config = load({"LOOP_GUARD_NUDGES": "2"})
    for clone in (copy.deepcopy(config), pickle.loads(pickle.dumps(config))):
        assert clone == config
        assert clone.sources == config.sources


def test_config_module_imports_no_langchain(tmp_path: Path) -> None:
    """``_config`` is part of the pure core: it imports neither LangChain nor LangGraph."""
    code = (
        "import sys, pathlib\n"
        "for name in ('langchain', 'langchain_core', 'langgraph'):\n"
        "    sys.modules[name] = None  # importing any of them now fails\n"
        "from langchain_loop_guard._core._config import LoopGuardConfig\n"
        "here = pathlib.Path(sys.argv[1])\n"
        "LoopGuardConfig._load({}, environ={'HOME': str(here)}, cwd=here).describe()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=60)


# --- provenance --------------------------------------------------------------------------------


def test_sources_of_a_plain_config_are_default_or_code() -> None:
    """``LoopGuardConfig(**values)`` says "code" for values passed and "default" otherwise."""
    config = LoopGuardConfig(maxTurns=5)
    assert config.sources["max_turns"] == "code"
    assert set(config.sources.values()) == {"code", "default"}
    assert list(config.sources) == list(SPEC_DEFAULTS)


def test_sources_are_read_only() -> None:
    """The ``sources`` mapping cannot be changed from outside."""
    with pytest.raises(TypeError):
        LoopGuardConfig().sources["mode"] = "runtime"  # type: ignore[index]


def test_describe_lists_every_field_with_value_and_source(load: Loader) -> None:
    """``describe()`` gives plain (field, value, source) rows, in declaration order."""
    config = load({"LOOP_GUARD_IGNORE_TOOLS": "wait,sleep"}, tool_threshold_overrides={"b": 2})
    rows = config.describe()
    assert [row.field for row in rows] == list(SPEC_DEFAULTS)
    by_field = {row.field: row for row in rows}
    assert by_field["ignore_tools"] == ConfigRow(
        "ignore_tools", ["sleep", "wait"], "environment LOOP_GUARD_IGNORE_TOOLS"
    )
    assert by_field["tool_threshold_overrides"] == ("tool_threshold_overrides", {"b": 2}, "code")
    assert by_field["mode"] == ("mode", "on", "default")
    json.dumps([tuple(row) for row in rows])  # plain data


def test_merged_changes_values_and_records_the_source() -> None:
    """``merged`` returns a new configuration whose changed values come from "runtime"."""
    config = LoopGuardConfig(max_turns=5)
    observed = config.merged(mode="observe")
    assert (observed.mode, observed.max_turns) == ("observe", 5)
    assert observed.sources["mode"] == "runtime"
    assert observed.sources["max_turns"] == "code"
    assert observed.sources["locale"] == "default"
    assert config.mode == "on"


def test_merged_takes_a_named_source_and_the_seed_keys() -> None:
    """``merged`` records any source name and accepts camelCase keys and ``enabled``."""
    config = LoopGuardConfig().merged(source="cli", enabled=False, maxTurns=7)
    assert (config.mode, config.max_turns) == ("off", 7)
    assert config.sources["mode"] == config.sources["max_turns"] == "cli"


def test_merged_checks_the_window_against_the_values_in_force(load: Loader) -> None:
    """A runtime window is checked against the threshold in force, naming both sources."""
    config = load({"LOOP_GUARD_REPEAT_FREQUENCY": "6"})
    with pytest.raises(LoopGuardConfigError) as info:
        config.merged(frequency_window_size=5)
    assert str(info.value) == (
        "invalid loop-guard configuration: runtime, key 'frequency_window_size': got 5, "
        "a window smaller than repeat_frequency_threshold 6 "
        "(environment LOOP_GUARD_REPEAT_FREQUENCY); allowed: a window of at least the "
        "threshold (6)"
    )


def test_failed_merge_applies_nothing() -> None:
    """If one value is bad, none is applied: the configuration in hand is unchanged."""
    config = LoopGuardConfig()
    with pytest.raises(LoopGuardConfigError) as info:
        config.merged(mode="observe", max_turns=0, nudges=3)
    assert info.value.key == "max_turns"
    assert config == LoopGuardConfig()
    assert config.sources["mode"] == "default"


# --- load: sources and their precedence ----------------------------------------------------


def test_load_without_files_or_environment_gives_defaults(load: Loader) -> None:
    """With nothing configured anywhere, ``load()`` is the defaults, all from "default"."""
    config = load()
    assert config == LoopGuardConfig()
    assert set(config.sources.values()) == {"default"}


def test_precedence_across_all_sources(load: Loader, global_file: Path, project_file: Path) -> None:
    """defaults < global file < project file < environment < code < runtime."""
    write(global_file, {"maxTurns": 20, "turnTimeoutMs": 1000, "nudges": 1, "cycleRepeats": 5})
    write(project_file, {"turnTimeoutMs": 2000, "nudges": 2, "cycleRepeats": 6})
    env = {"LOOP_GUARD_NUDGES": "3", "LOOP_GUARD_CYCLE_REPEATS": "7"}
    config = load(env, cycle_repeats=8)
    assert (config.max_turns, config.turn_timeout_ms) == (20, 2000)
    assert (config.nudges, config.cycle_repeats) == (3, 8)
    assert config.sources["max_turns"] == f"global file {global_file}"
    assert config.sources["turn_timeout_ms"] == f"project file {project_file}"
    assert config.sources["nudges"] == "environment LOOP_GUARD_NUDGES"
    assert config.sources["cycle_repeats"] == "code"
    assert config.sources["locale"] == "default"
    at_runtime = config.merged(max_turns=30)
    assert at_runtime.max_turns == 30
    assert at_runtime.sources["max_turns"] == "runtime"
    assert at_runtime.sources["nudges"] == "environment LOOP_GUARD_NUDGES"


def test_global_file_follows_xdg_config_home(load: Loader, tmp_path: Path) -> None:
    """An absolute ``XDG_CONFIG_HOME`` holds the global file."""
    xdg = tmp_path / "xdg"
    path = write(xdg / "loop-guard" / "config.json", {"nudges": 4})
    config = load({"XDG_CONFIG_HOME": str(xdg)})
    assert config.nudges == 4
    assert config.sources["nudges"] == f"global file {path}"


def test_relative_xdg_config_home_is_ignored(load: Loader, global_file: Path) -> None:
    """A relative ``XDG_CONFIG_HOME`` is invalid (XDG spec), so ``$HOME/.config`` is used."""
    write(global_file, {"nudges": 4})
    assert load({"XDG_CONFIG_HOME": "relative/dir"}).nudges == 4


def test_global_file_falls_back_to_the_home_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, project: Path
) -> None:
    """Without ``XDG_CONFIG_HOME`` or ``HOME``, the user's home directory is asked."""
    write(tmp_path / "h" / ".config" / "loop-guard" / "config.json", {"nudges": 5})
    monkeypatch.setattr(Path, "home", lambda: tmp_path / "h")
    assert LoopGuardConfig._load({}, environ={}, cwd=project).nudges == 5


def test_no_home_directory_means_no_global_file(
    monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    """With no home directory at all, there is simply no global file."""

    def no_home() -> Path:
        msg = "Could not determine home directory."
        raise RuntimeError(msg)

    monkeypatch.setattr(Path, "home", no_home)
    assert LoopGuardConfig._load({}, environ={}, cwd=project) == LoopGuardConfig()


def test_load_reads_the_real_environment_and_working_directory(
    monkeypatch: pytest.MonkeyPatch, home: Path, project: Path, global_file: Path
) -> None:
    """Without hooks, ``load()`` reads ``os.environ``, ``$HOME`` and the working directory."""
    for name in list(os.environ):
        if name.startswith("LOOP_GUARD_"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LOOP_GUARD_NUDGES", "2")
    monkeypatch.chdir(project)
    write(global_file, {"maxTurns": 20})
    write(project / ".loop-guard.json", {"mode": "observe"})
    config = LoopGuardConfig.load()
    assert (config.max_turns, config.mode, config.nudges) == (20, "observe", 2)
    assert config.sources["mode"] == f"project file {project / '.loop-guard.json'}"


def test_loop_guard_config_names_the_project_file(
    load: Loader, project: Path, project_file: Path, tmp_path: Path
) -> None:
    """``LOOP_GUARD_CONFIG`` names the project-level file, relative or absolute."""
    write(project_file, {"nudges": 1})
    relative = write(project / "conf" / "guard.json", {"nudges": 2})
    absolute = write(tmp_path / "elsewhere.json", {"nudges": 3})
    config = load({"LOOP_GUARD_CONFIG": "conf/guard.json"})
    assert config.nudges == 2
    assert config.sources["nudges"] == f"project file {relative}"
    assert load({"LOOP_GUARD_CONFIG": str(absolute)}).nudges == 3


def test_loop_guard_config_naming_a_missing_file_is_an_error(load: Loader, project: Path) -> None:
    """A ``LOOP_GUARD_CONFIG`` that names no file is an error, not a silent default."""
    error = load_error(load, {"LOOP_GUARD_CONFIG": "missing.json"})
    assert str(error) == (
        "invalid loop-guard configuration: environment LOOP_GUARD_CONFIG: names "
        f"{str(project / 'missing.json')!r}, which does not exist; allowed: the path of an "
        "existing JSON file (relative to the working directory)"
    )
    assert (error.key, error.value) == ("LOOP_GUARD_CONFIG", "missing.json")


def test_empty_loop_guard_config_is_unset(load: Loader, project_file: Path) -> None:
    """An empty ``LOOP_GUARD_CONFIG`` means the usual project file."""
    write(project_file, {"nudges": 1})
    assert load({"LOOP_GUARD_CONFIG": ""}).nudges == 1


def test_bad_value_in_a_lower_source_is_reported_even_when_overridden(
    load: Loader, project_file: Path
) -> None:
    """A bad file value is an error even if the environment overrides it: no typo hides."""
    write(project_file, {"maxTurns": "12"})
    error = load_error(load, {"LOOP_GUARD_MAX_TURNS": "20"})
    assert error.source == f"project file {project_file}"


def test_cross_field_check_names_where_each_value_came_from(
    load: Loader, project_file: Path
) -> None:
    """The window rule applies to the merged result and names both values' sources."""
    write(project_file, {"frequencyWindowSize": 5})
    error = load_error(load, {"LOOP_GUARD_REPEAT_FREQUENCY": "6"})
    assert str(error) == (
        "invalid loop-guard configuration: environment LOOP_GUARD_REPEAT_FREQUENCY: got '6', "
        "a threshold larger than frequency_window_size 5 "
        f"(project file {project_file}, key 'frequencyWindowSize'); "
        "allowed: a threshold of at most the window (5)"
    )
    write(project_file, {"frequencyWindowSize": 6})
    assert load({"LOOP_GUARD_REPEAT_FREQUENCY": "6"}).frequency_window_size == 6


def test_cross_field_problem_is_put_on_the_window_when_both_come_from_one_source() -> None:
    """Set together, a window below its threshold is the window's fault."""
    error = config_error(repeat_frequency_threshold=8, frequency_window_size=5)
    assert (error.key, error.value) == ("frequency_window_size", 5)
    assert "(code, key 'repeat_frequency_threshold')" in str(error)


def test_problems_of_every_source_are_reported_together(
    load: Loader, global_file: Path, project_file: Path
) -> None:
    """One error lists the problems of the files, the environment and the code at once."""
    write(global_file, {"maxTurn": 3})
    write(project_file, "{oops")
    with pytest.raises(LoopGuardConfigError) as info:
        load({"LOOP_GUARD_MODE": "loud"}, nudges=-1)
    sources = [problem.source for problem in info.value.details]
    assert sources == [
        f"global file {global_file}",
        f"project file {project_file}",
        "environment LOOP_GUARD_MODE",
        "code",
    ]


# --- files ---------------------------------------------------------------------------------------


def test_seed_style_camel_case_file_works_unchanged(load: Loader, project_file: Path) -> None:
    """A seed config file (camelCase keys, ``enabled: false``) loads as it is."""
    write(
        project_file,
        """{
  "enabled": false,
  "maxTurns": 20,
  "turnTimeoutMs": 300000,
  "repeatToolThreshold": 4,
  "repeatErrorThreshold": 3,
  "repeatAssistantThreshold": 3,
  "cycleRepeats": 3,
  "maxCycleLength": 3,
  "repeatFrequencyThreshold": 5,
  "frequencyWindowSize": 12,
  "ignoreTools": ["sleep", "wait"],
  "toolThresholdOverrides": {"bash": 5}
}
""",
    )
    config = load()
    assert config.mode == "off"
    assert config.max_turns == 20
    assert config.turn_timeout_ms == 300_000
    assert config.repeat_tool_threshold == 4
    assert config.repeat_frequency_threshold == 5
    assert config.frequency_window_size == 12
    assert config.ignore_tools == {"sleep", "wait"}
    assert config.tool_threshold_overrides == {"bash": 5}
    assert config.sources["mode"] == f"project file {project_file}"


def test_snake_case_file_works(load: Loader, global_file: Path) -> None:
    """A file may use the snake_case names too."""
    write(global_file, {"max_turns": 20, "ignore_tools": ["sleep"], "scope": "thread"})
    config = load()
    assert (config.max_turns, config.scope) == (20, "thread")
    assert config.ignore_tools == {"sleep"}


def test_file_with_a_byte_order_mark_is_read(load: Loader, project_file: Path) -> None:
    """A UTF-8 byte order mark (some Windows editors write one) is tolerated."""
    project_file.write_bytes(b'\xef\xbb\xbf{"nudges": 2}')
    assert load().nudges == 2


# A file's content, then what its error must say (besides the path) and what is allowed.
BAD_FILES = [
    pytest.param(
        '{\n  "maxTurns": 12,\n}',
        # the parser's own words and position differ between Python versions ("Expecting
        # property name…" on 3.11, "Illegal trailing comma…" on 3.13): the promise is the
        # prefix, a reason and where in the file
        re.compile(r"not valid JSON: \S.* \(line \d+, column \d+\)"),
        "a UTF-8 file holding a JSON object",
        id="malformed-json",
    ),
    pytest.param(
        "[1, 2]", "the top level is [1, 2], not an object", "a UTF-8 file holding", id="array"
    ),
    pytest.param(
        '"on"', "the top level is 'on', not an object", "a UTF-8 file holding", id="string"
    ),
    pytest.param(
        '{"mode": "on", "mode": "off"}',
        "key 'mode' appears more than once",
        "each key once",
        id="duplicate-key",
    ),
    pytest.param(
        '{"maxTurn": 5}',
        "unknown key 'maxTurn' = 5 (did you mean 'maxTurns'?)",
        "one of acting_tools, cycle_repeats, enabled,",
        id="unknown-key",
    ),
    pytest.param(
        '{"maxTurns": "12"}',
        "key 'maxTurns': got '12'",
        "an integer from 1 to 1,000,000,000",
        id="string-number",
    ),
    pytest.param(
        '{"progressAware": "false"}',
        "key 'progressAware': got 'false'",
        "true or false",
        id="string-boolean",
    ),
    pytest.param(
        '{"repeatToolThreshold": 1}',
        "key 'repeatToolThreshold': got 1",
        "an integer from 2 to 1000",
        id="threshold-below-2",
    ),
    pytest.param(
        '{"frequencyWindowSize": 3}',
        "key 'frequencyWindowSize': got 3, a window smaller than repeat_frequency_threshold 4",
        "a window of at least the threshold (4)",
        id="window-below-threshold",
    ),
    pytest.param(
        '{"toolThresholdOverrides": {"bash": "x"}}',
        "key 'toolThresholdOverrides': got {'bash': 'x'} (bash: Input should be a valid integer)",
        "an object mapping tool names to integers from 2 to 1000",
        id="override-bash-x",
    ),
    pytest.param(
        '{"ignoreTools": "sleep"}',
        "key 'ignoreTools': got 'sleep'",
        "a list of tool names",
        id="ignore-tools-string",
    ),
    pytest.param(
        '{"enabled": false, "mode": "on"}',
        "key 'enabled': false contradicts mode 'on' in the same place",
        "enabled false with mode 'off' or no mode",
        id="enabled-contradicts-mode",
    ),
]


@pytest.mark.parametrize(("content", "says", "allowed"), BAD_FILES)
def test_bad_project_file_is_an_error_naming_path_key_value_and_allowed(
    load: Loader, project_file: Path, content: str, says: str | re.Pattern[str], allowed: str
) -> None:
    """Every kind of bad file content gets an error naming the file, key, value, allowed."""
    write(project_file, content)
    error = load_error(load)
    assert f"project file {project_file}" in str(error)
    if isinstance(says, re.Pattern):
        assert says.search(str(error)), str(error)
    else:
        assert says in str(error)
    assert f"; allowed: {allowed}" in str(error)
    assert error.source == f"project file {project_file}"


def test_bad_global_file_names_the_global_file(load: Loader, global_file: Path) -> None:
    """An error in the global file names the global file."""
    write(global_file, {"repeatToolThreshold": 1})
    error = load_error(load)
    assert str(error).startswith(
        f"invalid loop-guard configuration: global file {global_file}, key 'repeatToolThreshold'"
    )


def test_file_that_is_not_utf8_is_an_error(load: Loader, project_file: Path) -> None:
    """A file that is not UTF-8 text is reported, not guessed at."""
    project_file.write_bytes(b'{"mode": "\xff"}')
    error = load_error(load)
    assert f"project file {project_file}: unreadable ('utf-8' codec can't decode" in str(error)


def test_directory_as_config_file_is_an_error(load: Loader, project_file: Path) -> None:
    """A project file that is a directory is refused, naming the path."""
    project_file.mkdir()
    error = load_error(load)
    assert f"project file {project_file}: a directory, not read" in str(error)
    assert error.allowed == "a UTF-8 file holding a JSON object of configuration keys"


def test_file_that_cannot_be_opened_is_an_error(load: Loader, project_file: Path) -> None:
    """A project file that cannot be opened (a dangling link's loop, here) is an error."""
    project_file.symlink_to(project_file)  # a link to itself: opening it fails (ELOOP)
    error = load_error(load)
    assert f"project file {project_file}: unreadable (" in str(error)


def _load_in_thread(load: Loader, env: Mapping[str, str]) -> BaseException | None:
    """Run ``load(env)`` in a thread; the exception it raised (fails the test if it hangs)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            load(env)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert outcome, "loading the configuration hung"
    return outcome[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_as_config_file_is_refused_without_waiting_for_a_writer(
    load: Loader, project: Path
) -> None:
    """``LOOP_GUARD_CONFIG`` naming a FIFO is an error at once, not a wait for a writer."""
    fifo = project / "guard.fifo"
    os.mkfifo(fifo)
    error = _load_in_thread(load, {"LOOP_GUARD_CONFIG": str(fifo)})
    assert isinstance(error, LoopGuardConfigError)
    assert f"project file {fifo}: not a regular file, not read" in str(error)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_device_as_config_file_is_refused_before_reading(load: Loader) -> None:
    """``LOOP_GUARD_CONFIG=/dev/zero`` is an error, not a read until memory runs out."""
    error = _load_in_thread(load, {"LOOP_GUARD_CONFIG": "/dev/zero"})
    assert isinstance(error, LoopGuardConfigError)
    assert "project file /dev/zero: not a regular file, not read" in str(error)


def test_config_file_larger_than_the_limit_is_refused(load: Loader, project_file: Path) -> None:
    """A configuration file over 1 MiB is refused (a real one is a few hundred bytes)."""
    write(project_file, '{"nudges": 1}' + " " * (1 << 20))
    error = load_error(load)
    assert f"project file {project_file}: larger than 1,048,576 bytes, not read" in str(error)


def test_config_file_at_the_limit_is_read(load: Loader, project_file: Path) -> None:
    """A file of exactly 1 MiB is still read."""
    text = '{"nudges": 1}'
    write(project_file, text + " " * ((1 << 20) - len(text)))
    assert project_file.stat().st_size == 1 << 20
    assert load().nudges == 1


@pytest.mark.parametrize(
    ("content", "says"),
    [
        pytest.param("[" * 100_000 + "]" * 100_000, "nested too deeply", id="deep-array"),
        pytest.param('{"a":' * 100_000 + "1" + "}" * 100_000, "nested too deeply", id="deep"),
        pytest.param('{"maxTurns": ' + "9" * 5_000 + "}", "integer", id="5000-digit-number"),
    ],
)
def test_hostile_json_is_a_config_error_naming_the_file(
    load: Loader, project_file: Path, content: str, says: str
) -> None:
    """Deep nesting and huge numbers are configuration errors, never a traceback."""
    write(project_file, content)
    error = _load_in_thread(load, {})
    assert isinstance(error, LoopGuardConfigError), repr(error)
    assert str(error).startswith(
        f"invalid loop-guard configuration: project file {project_file}: not valid JSON: "
    )
    assert says in str(error)
    assert error.source == f"project file {project_file}"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_turns", 10**5_000),
        ("turn_timeout_ms", 10**5_000),
        ("repeat_tool_threshold", 10**5_000),
        ("tool_threshold_overrides", {"bash": 10**5_000}),
        ("ignore_tools", [10**5_000]),
    ],
    ids=["max_turns", "turn_timeout_ms", "repeat_tool_threshold", "overrides", "ignore_tools"],
)
def test_huge_numbers_in_code_are_config_errors(field: str, value: object) -> None:
    """A 5,000-digit number passed in code is a ``LoopGuardConfigError``, never accepted."""
    error = config_error(**{field: value})
    assert error.source == "code"
    assert error.key == field
    assert "too large to show" in str(error)


def test_the_largest_turn_limits_are_accepted() -> None:
    """The bounds themselves are valid values."""
    config = LoopGuardConfig(max_turns=10**9, turn_timeout_ms=10**12)
    assert (config.max_turns, config.turn_timeout_ms) == (10**9, 10**12)


def test_huge_number_in_the_environment_is_a_config_error(load: Loader) -> None:
    """A 5,000-digit ``LOOP_GUARD_*`` value is an error naming the variable."""
    error = load_error(load, {"LOOP_GUARD_MAX_TURNS": "9" * 5_000})
    assert error.source == "environment LOOP_GUARD_MAX_TURNS"


@pytest.mark.parametrize("key", ["_environ", "_cwd", "_sources", "_anything"])
def test_private_keys_are_not_configuration_in_code(key: str) -> None:
    """``_environ``, ``_cwd`` and any other ``_`` key are refused wherever values are passed."""
    for build in (
        lambda: LoopGuardConfig(**{key: {}}),
        lambda: LoopGuardConfig.load(**{key: {}}),
        lambda: LoopGuardConfig().merged(**{key: {}}),
    ):
        with pytest.raises(LoopGuardConfigError) as info:
            build()
        assert f"private key {key!r} is not configuration" in str(info.value)
        assert info.value.key == key


def test_private_key_in_a_file_is_an_error(load: Loader, project_file: Path) -> None:
    """A ``_`` key in a configuration file is refused, naming the file."""
    write(project_file, {"_environ": {}, "nudges": 1})
    error = load_error(load)
    assert error.source == f"project file {project_file}"
    assert "private key '_environ' is not configuration" in str(error)


def test_no_value_passed_to_load_drops_the_environment(load: Loader) -> None:
    """``LOOP_GUARD_*`` variables are read whatever values ``load`` is given."""
    with pytest.raises(LoopGuardConfigError):
        load({"LOOP_GUARD_NUDGES": "2"}, _environ={})
    assert load({"LOOP_GUARD_NUDGES": "2"}, nudges=3).nudges == 3
    assert load({"LOOP_GUARD_NUDGES": "2"}, mode="observe").nudges == 2


# --- environment -------------------------------------------------------------------------------


def test_environment_table_is_the_specs() -> None:
    """The variables tested are exactly SPEC §5's, and SPEC §11's new keys'."""
    assert [name for name, *_ in ENVIRONMENT] == [
        "LOOP_GUARD_MODE",
        "LOOP_GUARD_LOCALE",
        "LOOP_GUARD_PROMPT_HINT",
        "LOOP_GUARD_MAX_TURNS",
        "LOOP_GUARD_TURN_TIMEOUT_MS",
        "LOOP_GUARD_REPEAT_TOOL",
        "LOOP_GUARD_REPEAT_ERROR",
        "LOOP_GUARD_REPEAT_ASSISTANT",
        "LOOP_GUARD_CYCLE_REPEATS",
        "LOOP_GUARD_MAX_CYCLE_LENGTH",
        "LOOP_GUARD_REPEAT_FREQUENCY",
        "LOOP_GUARD_FREQUENCY_WINDOW",
        "LOOP_GUARD_IGNORE_TOOLS",
        "LOOP_GUARD_TOOL_OVERRIDES",
        "LOOP_GUARD_PROGRESS_AWARE",
        "LOOP_GUARD_NO_PROGRESS_CALLS",
        "LOOP_GUARD_NEAR_REPEAT",
        "LOOP_GUARD_MAX_SEQUENCE_LENGTH",
        "LOOP_GUARD_NO_NEW_INFO",
        "LOOP_GUARD_FAILING_TURNS",
        "LOOP_GUARD_REPLY_CYCLE",
        "LOOP_GUARD_VOLATILE_FIELDS",
        "LOOP_GUARD_NUDGES",
        "LOOP_GUARD_SCOPE",
    ]


@pytest.mark.parametrize(("name", "text", "field", "expected"), ENVIRONMENT)
def test_every_environment_variable_is_parsed(
    load: Loader, name: str, text: str, field: str, expected: object
) -> None:
    """Each variable sets its field, and the source names the variable."""
    config = load({name: text})
    assert getattr(config, field) == expected
    assert config.sources[field] == f"environment {name}"


def test_all_environment_variables_together(load: Loader) -> None:
    """All the variables can be set at once."""
    config = load({name: text for name, text, *_ in ENVIRONMENT})
    assert {getattr(config, field) == expected for _, _, field, expected in ENVIRONMENT} == {True}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        (" TRUE ", True),
        ("false", False),
        ("0", False),
        ("no", False),
        ("off", False),
        ("Off", False),
    ],
)
def test_progress_aware_words(load: Loader, text: str, expected: bool) -> None:
    """``LOOP_GUARD_PROGRESS_AWARE`` takes true/false/1/0/yes/no/on/off, any case."""
    assert load({"LOOP_GUARD_PROGRESS_AWARE": text}).progress_aware is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("7", 7), (" 7 ", 7), ("+7", 7), ("007", 7)],
)
def test_environment_integers(load: Loader, text: str, expected: int) -> None:
    """Integers may carry surrounding spaces, a sign and leading zeros."""
    assert load({"LOOP_GUARD_NUDGES": text}).nudges == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sleep,wait", {"sleep", "wait"}),
        (" sleep , wait ,, ", {"sleep", "wait"}),
        ("sleep", {"sleep"}),
        ("", set()),
    ],
)
def test_environment_ignore_tools(load: Loader, text: str, expected: set[str]) -> None:
    """``LOOP_GUARD_IGNORE_TOOLS`` is comma-separated; spaces and empty items are dropped."""
    assert load({"LOOP_GUARD_IGNORE_TOOLS": text}).ignore_tools == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bash=2,read=5", {"bash": 2, "read": 5}),
        (" bash = 2 , read=5, ", {"bash": 2, "read": 5}),
        ("", {}),
    ],
)
def test_environment_tool_overrides(load: Loader, text: str, expected: dict[str, int]) -> None:
    """``LOOP_GUARD_TOOL_OVERRIDES`` is comma-separated ``name=integer`` pairs."""
    assert load({"LOOP_GUARD_TOOL_OVERRIDES": text}).tool_threshold_overrides == expected


# A variable, a bad value for it, and what the error must say it allows.
BAD_ENVIRONMENT = [
    ("LOOP_GUARD_MODE", "loud", "one of 'on', 'observe', 'off'"),
    ("LOOP_GUARD_LOCALE", "korean", "one of 'en', 'ko', or a locale identifier naming one"),
    ("LOOP_GUARD_PROMPT_HINT", "maybe", "true, false, 1, 0, yes, no, on or off"),
    ("LOOP_GUARD_SCOPE", "graph", "one of 'auto', 'run', 'thread'"),
    ("LOOP_GUARD_MAX_TURNS", "many", "an integer from 1 to 1,000,000,000"),
    ("LOOP_GUARD_MAX_TURNS", "0", "an integer from 1 to 1,000,000,000"),
    ("LOOP_GUARD_TURN_TIMEOUT_MS", "1.5", "an integer from 1 to 1,000,000,000,000 (milliseconds)"),
    ("LOOP_GUARD_REPEAT_TOOL", "1", "an integer from 2 to 1000"),
    ("LOOP_GUARD_REPEAT_ERROR", "1001", "an integer from 2 to 1000"),
    ("LOOP_GUARD_REPEAT_ASSISTANT", "", "an integer from 2 to 1000"),
    ("LOOP_GUARD_CYCLE_REPEATS", "3x", "an integer from 2 to 1000"),
    ("LOOP_GUARD_MAX_CYCLE_LENGTH", "21", "an integer from 2 to 20"),
    ("LOOP_GUARD_REPEAT_FREQUENCY", "\u0663", "an integer from 2 to 1000"),
    ("LOOP_GUARD_FREQUENCY_WINDOW", "3", "a window of at least the threshold (4)"),
    ("LOOP_GUARD_PROGRESS_AWARE", "maybe", "true, false, 1, 0, yes, no, on or off"),
    ("LOOP_GUARD_NO_PROGRESS_CALLS", "1", "0 (off) or an integer from 2 to 1000"),
    ("LOOP_GUARD_NUDGES", "-1", "an integer from 0 to 1000"),
    ("LOOP_GUARD_TOOL_OVERRIDES", "bash=x", "comma-separated name=integer pairs"),
    ("LOOP_GUARD_TOOL_OVERRIDES", "bash=1", "comma-separated name=integer pairs"),
    ("LOOP_GUARD_TOOL_OVERRIDES", "bash", "comma-separated name=integer pairs"),
    ("LOOP_GUARD_TOOL_OVERRIDES", "=2", "comma-separated name=integer pairs"),
    ("LOOP_GUARD_TOOL_OVERRIDES", "bash=2,bash=3", "comma-separated name=integer pairs"),
]


@pytest.mark.parametrize(("name", "text", "allowed"), BAD_ENVIRONMENT)
def test_bad_environment_value_is_an_error_naming_variable_value_and_allowed(
    load: Loader, name: str, text: str, allowed: str
) -> None:
    """A bad variable's error names the variable, its value and what is allowed."""
    error = load_error(load, {name: text})
    assert str(error).startswith(
        f"invalid loop-guard configuration: environment {name}: got {text!r}"
    )
    assert f"; allowed: {allowed}" in str(error)
    assert (error.source, error.key, error.value) == (f"environment {name}", name, text)


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("bash=x", " (bash: Input should be a valid integer)"),
        ("bash", ": 'bash' is not name=integer"),
        ("read=5,=2", ": '=2' is not name=integer"),
        ("bash=2,bash=3", ": 'bash' appears more than once"),
    ],
)
def test_malformed_tool_overrides_say_which_item(load: Loader, text: str, detail: str) -> None:
    """A malformed ``LOOP_GUARD_TOOL_OVERRIDES`` item is named in the error."""
    assert detail in str(load_error(load, {"LOOP_GUARD_TOOL_OVERRIDES": text}))


def test_unknown_loop_guard_variable_is_an_error_with_a_suggestion(load: Loader) -> None:
    """A typo like ``LOOP_GUARD_REPEAT_TOOLS`` is an error that suggests the real name."""
    error = load_error(load, {"LOOP_GUARD_REPEAT_TOOLS": "4"})
    assert str(error).startswith(
        "invalid loop-guard configuration: environment: unknown variable "
        "LOOP_GUARD_REPEAT_TOOLS='4' (did you mean 'LOOP_GUARD_REPEAT_TOOL'?); allowed: one of "
        "LOOP_GUARD_ACTING_TOOLS, LOOP_GUARD_CONFIG, "
    )
    assert str(error).endswith(
        "or a name starting with LOOP_GUARD_TEST_ (reserved for test suites)"
    )
    assert (error.source, error.key) == (
        "environment LOOP_GUARD_REPEAT_TOOLS",
        "LOOP_GUARD_REPEAT_TOOLS",
    )
    assert "did you mean" not in str(load_error(load, {"LOOP_GUARD_XYZZY": "1"}))


def test_test_suite_and_unrelated_variables_are_left_alone(load: Loader) -> None:
    """``LOOP_GUARD_TEST_*`` (for test suites) and names outside the prefix are not config."""
    env = {
        "LOOP_GUARD_TEST_POSTGRES_URI": "postgresql://localhost/test",
        "LOOP_GUARDIAN": "x",
        "loop_guard_mode": "loud",
        "PATH": "/bin",
    }
    assert load(env) == LoopGuardConfig()


# --- properties --------------------------------------------------------------------------------


def _window_holds_threshold(values: dict[str, Any]) -> bool:
    """The one cross-field rule, to keep generated values valid."""
    return bool(
        values.get("frequency_window_size", 10) >= values.get("repeat_frequency_threshold", 4)
    )


THRESHOLD = st.integers(2, 1000)
VALID_VALUES: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {},
    optional={
        "mode": st.sampled_from(["on", "observe", "off"]),
        "locale": st.sampled_from(["en", "ko"]),
        "max_turns": st.integers(1, 10**6),
        "turn_timeout_ms": st.integers(1, 10**9),
        "repeat_tool_threshold": THRESHOLD,
        "repeat_error_threshold": THRESHOLD,
        "repeat_assistant_threshold": THRESHOLD,
        "cycle_repeats": THRESHOLD,
        "max_cycle_length": st.integers(2, 20),
        "repeat_frequency_threshold": THRESHOLD,
        "frequency_window_size": st.integers(2, 1000),
        "ignore_tools": st.frozensets(st.text(max_size=8), max_size=4),
        "tool_threshold_overrides": st.dictionaries(  # a name with * would match no tool
            st.text(max_size=8).filter(lambda name: "*" not in name), THRESHOLD, max_size=4
        ),
        "progress_aware": st.booleans(),
        "prompt_hint": st.booleans(),
        "no_progress_calls": st.one_of(st.just(0), THRESHOLD),
        "nudges": st.integers(0, 1000),
        "scope": st.sampled_from(["run", "thread"]),
    },
).filter(_window_holds_threshold)


@given(values=VALID_VALUES)
def test_any_valid_config_round_trips_through_a_camel_case_file(
    tmp_path_factory: pytest.TempPathFactory, values: dict[str, Any]
) -> None:
    """Any valid configuration, dumped with camelCase keys to a file, loads back equal."""
    config = LoopGuardConfig(**values)
    directory = tmp_path_factory.mktemp("round-trip")
    write(directory / ".loop-guard.json", config.model_dump(mode="json", by_alias=True))
    loaded = LoopGuardConfig._load({}, environ={"HOME": str(directory)}, cwd=directory)
    assert loaded == config
    assert hash(loaded) == hash(config)


def test_a_tool_in_both_acting_and_read_only_tools_is_an_error_naming_both_sources(
    load: Loader,
) -> None:
    """``acting_tools`` and ``read_only_tools`` cannot name one tool: the problem is on the
    list from the higher source, naming where the other came from."""
    with pytest.raises(LoopGuardConfigError) as info:
        load({"LOOP_GUARD_ACTING_TOOLS": "run_sql,update_block"}, read_only_tools=["run_sql"])
    error = info.value
    assert "code, key 'read_only_tools'" in str(error)
    assert "naming 'run_sql' that acting_tools (environment LOOP_GUARD_ACTING_TOOLS)" in str(error)
    assert "allowed: a tool in one of acting_tools and read_only_tools, not both" in str(error)
    error = config_error(acting_tools=["a"], read_only_tools=["a"])
    assert "key 'read_only_tools'" in str(error)  # a tie: on the read-only list


def test_a_bad_acting_tools_value_is_one_error_not_two() -> None:
    """A list of tools that is no list of names is its own error; the overlap is not checked
    against it."""
    error = config_error(acting_tools=3, read_only_tools=["a"])
    assert "key 'acting_tools': got 3" in str(error)
    assert "not both" not in str(error)
