"""Every configuration key is a keyword-only argument of every integration (issue 40, point 1),
validated at once like the file and the variables, and placed where the README's precedence
puts values passed in code."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langchain_loop_guard import (
    LoopGuardCallbackHandler,
    LoopGuardConfig,
    LoopGuardConfigError,
    LoopGuardMiddleware,
    LoopGuardNode,
)
from langchain_loop_guard._core._config_sources import ALLOWED

ROOT = Path(__file__).resolve().parent.parent
Guard = Callable[..., Any]
GUARDS: list[Guard] = [LoopGuardCallbackHandler, LoopGuardMiddleware, LoopGuardNode]
IDS = ["handler", "middleware", "node"]


@pytest.fixture(autouse=True)
def _clean_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No configuration file or variable but the ones a test writes."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in [n for n in os.environ if n.startswith("LOOP_GUARD_")]:
        monkeypatch.delenv(name)
    return tmp_path


# A value other than the default for each field known today; a field added later is passed
# with its default value (still a keyword, still validated).
SAMPLES: dict[str, object] = {
    "mode": "observe",
    "locale": "ko",
    "prompt_hint": False,
    "max_turns": 30,
    "turn_timeout_ms": 60_000,
    "repeat_tool_threshold": 5,
    "repeat_error_threshold": 4,
    "repeat_assistant_threshold": 4,
    "cycle_repeats": 4,
    "max_cycle_length": 4,
    "repeat_frequency_threshold": 5,
    "frequency_window_size": 12,
    "ignore_tools": ["sleep"],
    "tool_threshold_overrides": {"search": 5},
    "progress_aware": False,
    "no_progress_calls": 9,
    "near_repeat_threshold": 5,
    "max_sequence_length": 7,
    "no_new_info_calls": 11,
    "failing_turns": 7,
    "volatile_fields": ["score"],
    "reply_cycle_length": 3,
    "nudges": 1,
    "scope": "thread",
}


@pytest.mark.parametrize("guard", GUARDS, ids=IDS)
@pytest.mark.parametrize("field", sorted(LoopGuardConfig.model_fields))
def test_every_field_is_a_keyword_of_every_integration(guard: Guard, field: str) -> None:
    """``Guard(field=value)`` sets the field, recorded as coming from code; a field added to
    the model later is a keyword too (derived from the model, not a list of names)."""
    value = SAMPLES.get(field)
    if value is None:  # a field added since: its default, passed explicitly, is accepted
        value = LoopGuardConfig().model_dump(mode="json")[field]
    made = guard(**{field: value})
    if field == "nudges" and guard is not LoopGuardCallbackHandler:
        assert made.nudges == value  # the graph guards' own argument, as before
        return
    assert made.config == LoopGuardConfig(**{field: value})
    assert made.config.sources[field] == "code"


def test_the_issues_examples_work() -> None:
    """The three calls the issue shows, as written."""
    middleware = LoopGuardMiddleware(on_stop="end", tool_threshold_overrides={"search": 5})
    assert middleware.on_stop == "end"
    assert dict(middleware.config.tool_threshold_overrides) == {"search": 5}
    assert LoopGuardCallbackHandler(mode="observe").mode == "observe"
    assert LoopGuardNode(mode="observe", on_stop="end").mode == "observe"


def _problems(guard: Guard, *config: object, **values: object) -> tuple[str, ...]:
    with pytest.raises(LoopGuardConfigError) as info:
        guard(*config, **values)
    return info.value.problems


@pytest.mark.parametrize("guard", GUARDS, ids=IDS)
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("cycle_repeats", 1),
        ("mode", "enforce"),
        ("tool_threshold_overrides", {"search": "5"}),
        ("ignore_tools", "sleep"),
    ],
)
def test_a_bad_keyword_is_the_same_error_as_in_a_file(
    guard: Guard, key: str, value: object, tmp_path: Path
) -> None:
    """A bad keyword raises at once, with the problem and what is allowed worded as for the
    same value in the project file."""
    (tmp_path / ".loop-guard.json").write_text(json.dumps({key: value}), "utf-8")
    with pytest.raises(LoopGuardConfigError) as from_file:
        LoopGuardConfig.load()
    (tmp_path / ".loop-guard.json").unlink()
    (keyword,) = _problems(guard, **{key: value})
    (filed,) = from_file.value.problems
    assert keyword.startswith(f"code, key {key!r}: ")
    assert keyword.split(": ", 1)[1] == filed.split(": ", 1)[1]
    assert keyword.endswith(f"allowed: {ALLOWED[key]}")


@pytest.mark.parametrize("guard", GUARDS, ids=IDS)
def test_an_unknown_keyword_is_named_with_a_suggestion(guard: Guard) -> None:
    """A typo is an error naming the key and the closest setting, never a bare TypeError."""
    (problem,) = _problems(guard, cycle_repeat=4)
    assert "unknown key 'cycle_repeat'" in problem
    assert "did you mean 'cycle_repeats'?" in problem


@pytest.mark.parametrize("guard", GUARDS, ids=IDS)
def test_every_bad_keyword_is_reported_at_once(guard: Guard) -> None:
    """Two bad keywords, two problems, nothing applied."""
    assert len(_problems(guard, cycle_repeats=1, scope="forever")) == 2


@pytest.mark.parametrize("guard", GUARDS, ids=IDS)
def test_keywords_come_over_files_and_variables(
    guard: Guard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README precedence: defaults < files < environment < code (keywords) < runtime."""
    (tmp_path / ".loop-guard.json").write_text('{"cycle_repeats": 5, "max_turns": 20}', "utf-8")
    monkeypatch.setenv("LOOP_GUARD_CYCLE_REPEATS", "6")
    monkeypatch.setenv("LOOP_GUARD_MODE", "observe")
    made = guard(cycle_repeats=4)
    assert made.config.cycle_repeats == 4
    assert made.config.max_turns == 20  # the file's value stays where no keyword is given
    assert made.config.mode == "observe"
    assert made.config.sources["cycle_repeats"] == "code"
    made.configure(cycle_repeats=7)  # a runtime command comes over the keyword
    assert made.config.cycle_repeats == 7


@pytest.mark.parametrize("guard", GUARDS, ids=IDS)
def test_keywords_come_over_a_config_given_with_them(guard: Guard) -> None:
    """A mapping or a ``LoopGuardConfig`` with keywords: the keywords win, the rest stays."""
    from_mapping = guard({"cycle_repeats": 5, "max_turns": 20}, cycle_repeats=4)
    assert (from_mapping.config.cycle_repeats, from_mapping.config.max_turns) == (4, 20)
    from_config = guard(LoopGuardConfig(max_turns=20, repeat_frequency_threshold=6), mode="off")
    assert from_config.config == LoopGuardConfig(
        max_turns=20, repeat_frequency_threshold=6, mode="off"
    )


@pytest.mark.parametrize("guard", GUARDS, ids=IDS)
def test_keywords_are_checked_together_with_the_config(guard: Guard) -> None:
    """The window rule holds across a config and keywords: a threshold above the window
    given as a keyword is an error naming the keyword."""
    (problem,) = _problems(guard, {"frequency_window_size": 5}, repeat_frequency_threshold=6)
    assert problem.startswith("code, key 'repeat_frequency_threshold': got 6")


@pytest.mark.parametrize("guard", GUARDS, ids=IDS)
def test_settings_are_keyword_only(guard: Guard) -> None:
    """Only ``config`` is positional."""
    with pytest.raises(TypeError):
        guard(None, "observe")


# --- the manual's migration table, as written ---------------------------------------------------

_TABLE_ROW = re.compile(r"^\| `(\w+)=[^|]*\| (.*) \|$", re.MULTILINE)
_ARGUMENT = re.compile(r"`(\w+=[^`]+)`")


def _migration_arguments() -> list[str]:
    """Every ``key=value`` of the ``LoopGuardMiddleware`` column of the manual's table."""
    text = (ROOT / "docs" / "manual.md").read_text(encoding="utf-8")
    table = text.split("## Moving from `ToolCallLimitMiddleware`", 1)[1].split("```python")[0]
    found = [arg for row in _TABLE_ROW.findall(table) for arg in _ARGUMENT.findall(row[1])]
    assert len(found) >= 6, found
    return found


@pytest.mark.parametrize("argument", _migration_arguments())
def test_the_manuals_migration_table_runs_as_written(argument: str) -> None:
    """``LoopGuardMiddleware(<the table's argument>)`` builds a guard, with N a number and
    ``[...]`` a list of tools."""
    source = argument.replace("N", "5").replace("[...]", '["sleep"]')
    guard = eval(f"LoopGuardMiddleware({source})", {"LoopGuardMiddleware": LoopGuardMiddleware})
    key, _, value = source.partition("=")
    expected = eval(value)  # the literal as written
    actual = getattr(guard, key) if key in ("on_stop", "nudges") else getattr(guard.config, key)
    if isinstance(expected, list):
        assert sorted(actual) == sorted(expected)
    elif isinstance(expected, dict):
        assert dict(actual) == expected
    else:
        assert actual == expected
