"""Where configuration values come from: files and ``LOOP_GUARD_*`` variables, read into
layers of entries (a field, its value, the source and key that gave it) with the problems
found reading them, and the bounds and wording of what each field allows. The model that
validates and merges the layers is :class:`~langchain_loop_guard._core._config.LoopGuardConfig`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import reprlib
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from langchain_loop_guard._core._errors import ConfigProblem

__all__ = [
    "ALLOWED",
    "MAX_COUNT",
    "MAX_CYCLE_LENGTH",
    "MAX_TIMEOUT_MS",
    "MAX_TURNS",
    "MAX_VOLATILE_FIELDS",
    "Entry",
    "Layer",
    "Parse",
    "config_problem",
    "environment_layer",
    "file_layers",
    "show",
    "suggestion",
]

MAX_COUNT: Final = 1000
"""Upper bound of every threshold, the window and the nudges: per-run memory stays bounded."""

MAX_VOLATILE_FIELDS: Final = 1024
"""The most ``volatile_fields`` names a configuration holds, over all tools."""

MAX_CYCLE_LENGTH: Final = 20
"""Upper bound of ``max_cycle_length``; longer cycles are the no-progress signal's job."""

MAX_TURNS: Final = 10**9
"""Upper bound of ``max_turns``: far beyond any run, and a number every host can print."""

MAX_TIMEOUT_MS: Final = 10**12
"""Upper bound of ``turn_timeout_ms`` (about 31 years)."""

_MAX_FILE_BYTES: Final = 1 << 20
"""The largest configuration file read (a real one is a few hundred bytes)."""

ALLOWED: Final[Mapping[str, str]] = MappingProxyType(
    {
        "mode": "one of 'on', 'observe', 'off' (any case)",
        "locale": (
            "one of 'en', 'ko', or a locale identifier naming one (ko_KR.UTF-8, ko-KR);"
            " another known locale falls back to 'en'"
        ),
        "prompt_hint": "true or false",
        "max_turns": f"an integer from 1 to {MAX_TURNS:,}",
        "turn_timeout_ms": f"an integer from 1 to {MAX_TIMEOUT_MS:,} (milliseconds)",
        "repeat_tool_threshold": f"an integer from 2 to {MAX_COUNT}",
        "repeat_error_threshold": f"an integer from 2 to {MAX_COUNT}",
        "repeat_assistant_threshold": f"an integer from 2 to {MAX_COUNT}",
        "cycle_repeats": f"an integer from 2 to {MAX_COUNT}",
        "max_cycle_length": f"an integer from 2 to {MAX_CYCLE_LENGTH}",
        "repeat_frequency_threshold": f"an integer from 2 to {MAX_COUNT}",
        "frequency_window_size": (
            f"an integer from 2 to {MAX_COUNT}, at least repeat_frequency_threshold"
        ),
        "ignore_tools": "a list of tool names (strings)",
        "acting_tools": "a list of tool names (strings), none of them in read_only_tools",
        "read_only_tools": "a list of tool names (strings), none of them in acting_tools",
        "tool_threshold_overrides": (
            f"an object mapping tool names to integers from 2 to {MAX_COUNT} (a name is one"
            " tool's: no *)"
        ),
        "progress_aware": "true or false",
        "no_progress_calls": f"0 (off) or an integer from 2 to {MAX_COUNT}",
        "near_repeat_threshold": f"0 (off) or an integer from 2 to {MAX_COUNT}",
        "max_sequence_length": f"0 (off) or an integer from 4 to {MAX_CYCLE_LENGTH}",
        "no_new_info_calls": f"0 (off) or an integer from 2 to {MAX_COUNT}",
        "failing_turns": f"0 (off) or an integer from 2 to {MAX_COUNT}",
        "reply_cycle_length": f"0 (off) or an integer from 1 to {MAX_CYCLE_LENGTH}",
        "volatile_fields": (
            "a list of field names, or an object mapping tool names ('*': every tool, no other"
            " *) to lists of field names; a name is a key, not a nested path (letters, digits,"
            f" _ - and * wildcards), at most {MAX_VOLATILE_FIELDS} names in all"
        ),
        "nudges": f"an integer from 0 to {MAX_COUNT}",
        "scope": "one of 'auto', 'run', 'thread' (any case)",
    }
)

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def show(value: object) -> str:
    """A value for an error message: its repr, shortened (never raises for a huge int)."""
    try:
        return _REPR.repr(value)
    except ValueError:  # an int with more digits than Python writes
        return f"<{type(value).__name__} too large to show>"


@dataclass(frozen=True, slots=True)
class Entry:
    """One value for one field, as one source gave it (not validated yet)."""

    field: str
    value: object
    source: str
    """The provenance label, e.g. ``"code"`` or ``"environment LOOP_GUARD_MODE"``."""
    key: str
    """The key, argument or environment variable as written."""
    where: str
    """The place, as an error message names it."""
    raw: object = None
    """The value as written, when it differs from ``value`` (an environment string)."""
    allowed: str | None = None
    """What is allowed, when the source's syntax differs from a JSON value's."""

    @property
    def shown(self) -> object:
        """The value as the source wrote it."""
        return self.value if self.raw is None else self.raw

    def problem(self, what: str, allowed: str | None = None) -> ConfigProblem:
        """A problem with this entry: ``what`` is wrong, and what would be ``allowed``."""
        return config_problem(
            where=self.where,
            source=self.source,
            key=self.key,
            value=self.shown,
            what=what,
            allowed=allowed or self.allowed or ALLOWED[self.field],
        )


@dataclass(frozen=True, slots=True)
class Layer:
    """What one source (or part of one) contributes: values, and problems found reading it."""

    entries: tuple[Entry, ...] = ()
    problems: tuple[ConfigProblem, ...] = ()


def config_problem(
    *, where: str, source: str, key: str | None, value: object, what: str, allowed: str
) -> ConfigProblem:
    return ConfigProblem(
        source=source,
        key=key,
        value=value,
        allowed=allowed,
        message=f"{where}: {what}; allowed: {allowed}",
    )


def suggestion(word: str, candidates: Iterable[str], prefix: str = "") -> str:
    """`` (did you mean 'X'?)`` for the closest candidate, or nothing."""
    close = difflib.get_close_matches(
        word.removeprefix(prefix), [c.removeprefix(prefix) for c in candidates], n=1
    )
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""


class _DuplicateKeyError(Exception):
    """A JSON object names the same key twice (the JSON parser would keep the last): the key."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


class _NotAFileError(Exception):
    """A configuration path that is not a regular file of bounded size: what it is instead."""


_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
"""Non-blocking, so that opening a FIFO returns at once (and is then refused)."""


def _read_config_file(path: Path) -> str:
    """The text of a regular file of at most :data:`_MAX_FILE_BYTES`, checked once open (what
    is read is what was checked): a FIFO, a device or a directory is refused unread.

    Raises:
        FileNotFoundError: there is no such file.
        _NotAFileError: it is not a regular file, or too large.
        OSError, UnicodeDecodeError: it cannot be read.
    """
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise _NotAFileError("a directory" if stat.S_ISDIR(mode) else "not a regular file")
        with open(descriptor, "rb", closefd=False) as file:
            data = file.read(_MAX_FILE_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > _MAX_FILE_BYTES:
        raise _NotAFileError(f"larger than {_MAX_FILE_BYTES:,} bytes")
    return data.decode("utf-8-sig")


_JSON_ALLOWED: Final = "a UTF-8 file holding a JSON object of configuration keys"

Parse = Callable[[Mapping[str, object], str], "Layer"]
"""Reads a JSON object (a file's) into a layer."""


def _file_layer(path: Path, source: str, parse: Parse) -> Layer | None:
    """The layer of a JSON configuration file, or ``None`` if there is no such file."""
    key: str | None = None
    value: object = None
    allowed = _JSON_ALLOWED
    try:
        data = json.loads(_read_config_file(path), object_pairs_hook=_unique_keys)
    except FileNotFoundError:
        return None
    except _NotAFileError as exc:
        what = f"{exc.args[0]}, not read"
    except json.JSONDecodeError as exc:
        what = f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    except _DuplicateKeyError as exc:
        key = value = exc.args[0]
        what = f"key {key!r} appears more than once"
        allowed = "each key once"
    except (OSError, UnicodeDecodeError) as exc:
        what = f"unreadable ({exc})"
    except RecursionError:
        what = "not valid JSON: nested too deeply"
    except ValueError as exc:  # a number with more digits than Python converts
        what = f"not valid JSON: {exc}"
    else:
        if isinstance(data, dict):
            return parse(data, source)
        what, value = f"the top level is {show(data)}, not an object", data
    problem = config_problem(
        where=source, source=source, key=key, value=value, what=what, allowed=allowed
    )
    return Layer(problems=(problem,))


def _global_file(environ: Mapping[str, str]) -> Path | None:
    """``$XDG_CONFIG_HOME/loop-guard/config.json``, else under ``$HOME/.config``."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the XDG spec: a relative path is to be ignored
        base = Path(xdg)
    elif environ.get("HOME"):
        base = Path(environ["HOME"]) / ".config"
    else:
        try:
            base = Path.home() / ".config"
        except RuntimeError:  # no home directory at all: there is no global file
            return None
    return base / "loop-guard" / "config.json"


_CONFIG_VARIABLE: Final = "LOOP_GUARD_CONFIG"
_PROJECT_FILE: Final = ".loop-guard.json"


def file_layers(environ: Mapping[str, str], cwd: Path, parse: Parse) -> list[Layer]:
    """The global file's layer and the project file's, those that exist (``parse`` reads a
    file's JSON object)."""
    layers: list[Layer | None] = []
    global_file = _global_file(environ)
    if global_file is not None:
        layers.append(_file_layer(global_file, f"global file {global_file}", parse))
    named = environ.get(_CONFIG_VARIABLE, "")
    project_file = cwd / (named or _PROJECT_FILE)
    layer = _file_layer(project_file, f"project file {project_file}", parse)
    if layer is None and named:
        source = f"environment {_CONFIG_VARIABLE}"
        problem = config_problem(
            where=source,
            source=source,
            key=_CONFIG_VARIABLE,
            value=named,
            what=f"names {str(project_file)!r}, which does not exist",
            allowed="the path of an existing JSON file (relative to the working directory)",
        )
        layer = Layer(problems=(problem,))
    layers.append(layer)
    return [layer for layer in layers if layer is not None]


# --- the environment -----------------------------------------------------------------------

_ENV_PREFIX: Final = "LOOP_GUARD_"
_ENV_TEST_PREFIX: Final = "LOOP_GUARD_TEST_"
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})


def _env_text(text: str) -> str:
    return text.strip()


def _env_integer(text: str) -> int | str:
    """An integer, or the text itself for validation to reject."""
    text = text.strip()
    return int(text) if _INTEGER.fullmatch(text) else text


def _env_boolean(text: str) -> bool | str:
    """A boolean, or the text itself for validation to reject."""
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    return text


def _env_names(text: str) -> list[str]:
    """``"sleep, wait"`` → ``["sleep", "wait"]``; empty items are skipped."""
    return [name for name in (part.strip() for part in text.split(",")) if name]


def _env_overrides(text: str) -> dict[str, int | str]:
    """``"bash=2, read=5"`` → ``{"bash": 2, "read": 5}``; malformed items raise ``ValueError``."""
    result: dict[str, int | str] = {}
    for item in _env_names(text):
        name, equals, number = (part.strip() for part in item.partition("="))
        if not equals or not name:
            msg = f"{item!r} is not name=integer"
            raise ValueError(msg)
        if name in result:
            msg = f"{name!r} appears more than once"
            raise ValueError(msg)
        result[name] = _env_integer(number)
    return result


def _env_fields(text: str) -> dict[str, list[str]]:
    """``"score, search:rank"`` → ``{"*": ["score"], "search": ["rank"]}``: a field of every
    tool, or ``tool:field`` for one tool's."""
    result: dict[str, list[str]] = {}
    for item in _env_names(text):
        tool, colon, name = item.rpartition(":")
        result.setdefault(tool.strip() if colon else "*", []).append(name.strip())
    return result


_ENV: Final[Mapping[str, tuple[str, Callable[[str], object]]]] = MappingProxyType(
    {
        "LOOP_GUARD_MODE": ("mode", _env_text),
        "LOOP_GUARD_LOCALE": ("locale", _env_text),
        "LOOP_GUARD_PROMPT_HINT": ("prompt_hint", _env_boolean),
        "LOOP_GUARD_MAX_TURNS": ("max_turns", _env_integer),
        "LOOP_GUARD_TURN_TIMEOUT_MS": ("turn_timeout_ms", _env_integer),
        "LOOP_GUARD_REPEAT_TOOL": ("repeat_tool_threshold", _env_integer),
        "LOOP_GUARD_REPEAT_ERROR": ("repeat_error_threshold", _env_integer),
        "LOOP_GUARD_REPEAT_ASSISTANT": ("repeat_assistant_threshold", _env_integer),
        "LOOP_GUARD_CYCLE_REPEATS": ("cycle_repeats", _env_integer),
        "LOOP_GUARD_MAX_CYCLE_LENGTH": ("max_cycle_length", _env_integer),
        "LOOP_GUARD_REPEAT_FREQUENCY": ("repeat_frequency_threshold", _env_integer),
        "LOOP_GUARD_FREQUENCY_WINDOW": ("frequency_window_size", _env_integer),
        "LOOP_GUARD_IGNORE_TOOLS": ("ignore_tools", _env_names),
        "LOOP_GUARD_ACTING_TOOLS": ("acting_tools", _env_names),
        "LOOP_GUARD_READ_ONLY_TOOLS": ("read_only_tools", _env_names),
        "LOOP_GUARD_TOOL_OVERRIDES": ("tool_threshold_overrides", _env_overrides),
        "LOOP_GUARD_PROGRESS_AWARE": ("progress_aware", _env_boolean),
        "LOOP_GUARD_NO_PROGRESS_CALLS": ("no_progress_calls", _env_integer),
        "LOOP_GUARD_NEAR_REPEAT": ("near_repeat_threshold", _env_integer),
        "LOOP_GUARD_MAX_SEQUENCE_LENGTH": ("max_sequence_length", _env_integer),
        "LOOP_GUARD_NO_NEW_INFO": ("no_new_info_calls", _env_integer),
        "LOOP_GUARD_FAILING_TURNS": ("failing_turns", _env_integer),
        "LOOP_GUARD_REPLY_CYCLE": ("reply_cycle_length", _env_integer),
        "LOOP_GUARD_VOLATILE_FIELDS": ("volatile_fields", _env_fields),
        "LOOP_GUARD_NUDGES": ("nudges", _env_integer),
        "LOOP_GUARD_SCOPE": ("scope", _env_text),
    }
)
_ENV_ALLOWED: Final[Mapping[str, str]] = MappingProxyType(
    {
        "ignore_tools": "comma-separated tool names, e.g. sleep,wait",
        "acting_tools": "comma-separated tool names, e.g. run_sql,update_block",
        "read_only_tools": "comma-separated tool names, e.g. search,get_page",
        "tool_threshold_overrides": (
            f"comma-separated name=integer pairs, integers from 2 to {MAX_COUNT}, "
            "e.g. bash=2,read=5"
        ),
        "volatile_fields": "comma-separated field names, tool:field for one tool's, e.g."
        " score,search:rank",
        "progress_aware": "true, false, 1, 0, yes, no, on or off",
        "prompt_hint": "true, false, 1, 0, yes, no, on or off",
    }
)
_VARIABLES_ALLOWED: Final = (
    f"one of {', '.join(sorted([*_ENV, _CONFIG_VARIABLE]))},"
    f" or a name starting with {_ENV_TEST_PREFIX} (reserved for test suites)"
)


def environment_layer(environ: Mapping[str, str]) -> Layer:
    """The entries of the ``LOOP_GUARD_*`` variables; any other such name is a problem."""
    entries: list[Entry] = []
    problems: list[ConfigProblem] = []
    for name in sorted(environ):
        if (
            not name.startswith(_ENV_PREFIX)
            or name == _CONFIG_VARIABLE
            or name.startswith(_ENV_TEST_PREFIX)
        ):
            continue
        text = environ[name]
        source = f"environment {name}"
        if name not in _ENV:
            what = f"unknown variable {name}={show(text)}"
            what += suggestion(name, _ENV, prefix=_ENV_PREFIX)
            problems.append(
                config_problem(
                    where="environment",
                    source=source,
                    key=name,
                    value=text,
                    what=what,
                    allowed=_VARIABLES_ALLOWED,
                )
            )
            continue
        field, parse = _ENV[name]
        allowed = _ENV_ALLOWED.get(field)
        entry = Entry(field, text, source=source, key=name, where=source, allowed=allowed)
        try:
            value = parse(text)
        except ValueError as exc:
            problems.append(entry.problem(f"got {show(text)}: {exc}"))
        else:
            entries.append(dataclasses.replace(entry, value=value, raw=text))
    return Layer(tuple(entries), tuple(problems))
