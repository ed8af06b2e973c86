"""Configuration: the validated, frozen ``LoopGuardConfig`` and where its values come from.

Sources, lowest first (SPEC §5): built-in defaults; the global file, the project file
(:meth:`LoopGuardConfig.load`); ``LOOP_GUARD_*`` environment variables; values passed in code;
runtime commands (:meth:`LoopGuardConfig.merged`).

Each value is checked as it is read, and every problem is reported at once. Pydantic owns the
per-field schema; this module adds the sources (read in :mod:`~._config_sources`), the seed's
``enabled`` alias, the cross-field rule and readable errors.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cache, partial
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, NamedTuple, Self, TypeVar, final

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_serializer,
)

from langchain_loop_guard._core._config_sources import (
    MAX_COUNT,
    MAX_CYCLE_LENGTH,
    MAX_TIMEOUT_MS,
    MAX_TURNS,
    MAX_VOLATILE_FIELDS,
    Entry,
    Layer,
    config_problem,
    environment_layer,
    file_layers,
    show,
    suggestion,
)
from langchain_loop_guard._core._errors import ConfigProblem, LoopGuardConfigError
from langchain_loop_guard._core._messages import LOCALES, negotiate_locale

__all__ = ["ConfigRow", "Locale", "LoopGuardConfig", "Mode", "Scope"]

Mode = Literal["on", "observe", "off"]
Locale = Literal["en", "ko"]
Scope = Literal["auto", "run", "thread"]

_logger = logging.getLogger("langchain_loop_guard")


def _any_case(value: object) -> object:
    """``"ON"``, ``"Thread"`` → ``"on"``, ``"thread"``: enumerated words are matched in any case."""
    return value.lower() if isinstance(value, str) else value


def _catalog_locale(value: object) -> object:
    """A locale identifier → the catalog that serves it (``"ko_KR.UTF-8"`` → ``"ko"``), else
    ``"en"`` with a WARNING; text that is no locale is left for validation to reject."""
    if not isinstance(value, str):
        return value
    try:
        chosen = negotiate_locale(value)
    except ValueError:
        return value
    if chosen is None:
        _logger.warning(
            "loop-guard: no messages in locale %r (available: %s); using 'en'",
            value,
            ", ".join(LOCALES),
        )
        return "en"
    return chosen


def _zero_or_at_least_two(value: int) -> int:
    """Reject 1 for ``no_progress_calls``: 0 turns the signal off, a streak needs 2 calls."""
    if value == 1:
        msg = "must be 0 (off) or at least 2"
        raise ValueError(msg)
    return value


def _zero_or_at_least_four(value: int) -> int:
    """Reject 1-3 for ``max_sequence_length``: shorter blocks are ``max_cycle_length``'s."""
    if 0 < value < 4:
        msg = "must be 0 (off) or at least 4"
        raise ValueError(msg)
    return value


_V = TypeVar("_V")


@final
class _FrozenMapping(Mapping[str, _V]):
    """A read-only, hashable ``{tool: value}`` mapping, ordered by tool name."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, _V] = MappingProxyType({})) -> None:
        self._data = dict(sorted(data.items()))

    def __getitem__(self, key: str) -> _V:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return repr(self._data)


_Threshold = Annotated[int, Field(strict=True, ge=2, le=MAX_COUNT)]
_ZeroOrThreshold = Annotated[
    int, Field(strict=True, ge=0, le=MAX_COUNT), AfterValidator(_zero_or_at_least_two)
]
_Turns = Annotated[int, Field(strict=True, ge=1, le=MAX_TURNS)]
_Timeout = Annotated[int, Field(strict=True, ge=1, le=MAX_TIMEOUT_MS)]


_FIELD_NAME = re.compile(r"[A-Za-z0-9_*-]{1,64}")


def _volatile_fields(value: object) -> object:
    """A list of field names (every tool's) → ``{"*": names}``; a mapping of tools (``"*"``:
    every tool) to names is taken as it is. Validation checks the names."""
    if isinstance(value, list | tuple | set | frozenset):
        return {"*": value}
    return value


def _field_names(value: Mapping[str, frozenset[str]]) -> _FrozenMapping[frozenset[str]]:
    count = sum(len(names) for names in value.values())
    if count > MAX_VOLATILE_FIELDS:
        msg = f"{count} field names; at most {MAX_VOLATILE_FIELDS} in all"
        raise ValueError(msg)
    for tool, names in value.items():
        if tool != "*":
            _one_tool(tool)
        for name in names:  # a dot would be a nested path, which no key of a result is
            if not _FIELD_NAME.fullmatch(name) or name.strip("*") == "":
                msg = f"{name!r} is not a field name (letters, digits, _ - and * wildcards)"
                raise ValueError(msg)
    return _FrozenMapping(value)


def _one_tool(tool: str) -> str:
    """A tool named for its own setting: a name with ``*`` would match no tool (``*`` alone is
    every tool, in ``volatile_fields`` only)."""
    if "*" in tool:
        msg = f"{tool!r} is no tool name: a per-tool setting names one tool exactly, without *"
        raise ValueError(msg)
    return tool


def _tool_overrides(value: Mapping[str, int]) -> _FrozenMapping[int]:
    for tool in value:
        _one_tool(tool)
    return _FrozenMapping(value)


class ConfigRow(NamedTuple):
    """One line of ``loop-guard config`` and ``status``: a field, its value, its source."""

    field: str
    """The snake_case field name."""
    value: object
    """The value as plain JSON data (``ignore_tools`` a sorted list, overrides a dict)."""
    source: str
    """Where the value came from, as in :attr:`LoopGuardConfig.sources`."""


class LoopGuardConfig(BaseModel):
    """Thresholds and switches of the loop guard (SPEC §5). Frozen; unknown keys are errors.

    ``LoopGuardConfig(**values)`` takes values over the defaults; :meth:`load` also reads the
    configuration files and the environment. Both accept the snake_case field names, the
    seed's camelCase aliases (``maxTurns``, ``ignoreTools``, …) and ``enabled=False`` for
    ``mode="off"``, and raise :class:`LoopGuardConfigError` listing every problem found.
    Types are strict: ``"3"`` or ``True`` is not an integer.

    Two configurations are equal when their values are, wherever the values came from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    mode: Annotated[Mode, BeforeValidator(_any_case)] = "on"
    """``"on"`` stops loops, ``"observe"`` only reports them, ``"off"`` tracks nothing (any
    case)."""
    locale: Annotated[Locale, BeforeValidator(_catalog_locale)] = "en"
    """Language of stop reasons, warnings, nudges and the prompt hint. Any locale identifier
    naming one (``"KO"``, ``"ko_KR.UTF-8"``, ``"ko-KR"``) is read as it; a known locale
    without messages (``"fr_FR"``) as ``"en"``, with a warning."""
    prompt_hint: StrictBool = Field(True, alias="promptHint")
    """Append the anti-loop hint to the system prompt (in modes ``"on"`` and ``"observe"``);
    ``False`` leaves every prompt as it is."""
    max_turns: _Turns = Field(12, alias="maxTurns")
    """Model turns in a run before a (soft) warning."""
    turn_timeout_ms: _Timeout = Field(180_000, alias="turnTimeoutMs")
    """Age of a run, in milliseconds, before a (soft) warning."""
    repeat_tool_threshold: _Threshold = Field(3, alias="repeatToolThreshold")
    """Identical tool calls in a row that stop the run."""
    repeat_error_threshold: _Threshold = Field(3, alias="repeatErrorThreshold")
    """Identical tool errors in a row that stop the run."""
    repeat_assistant_threshold: _Threshold = Field(3, alias="repeatAssistantThreshold")
    """Identical assistant messages in a row that stop the run."""
    cycle_repeats: _Threshold = Field(3, alias="cycleRepeats")
    """Full repetitions of a tool cycle (A B A B …) that stop the run."""
    max_cycle_length: Annotated[int, Field(strict=True, ge=2, le=MAX_CYCLE_LENGTH)] = Field(
        3, alias="maxCycleLength"
    )
    """Longest cycle looked for."""
    repeat_frequency_threshold: _Threshold = Field(4, alias="repeatFrequencyThreshold")
    """Calls of one tool within the window that stop the run."""
    frequency_window_size: _Threshold = Field(10, alias="frequencyWindowSize")
    """The last calls looked at for frequency and progress; at least the threshold above."""
    ignore_tools: frozenset[StrictStr] = Field(frozenset(), alias="ignoreTools")
    """Tools invisible to every signal (a poller's sleep or wait tool)."""
    acting_tools: frozenset[StrictStr] = Field(frozenset(), alias="actingTools")
    """Tools that act (create, change, send, delete, run): a new call of one that succeeds is
    progress, whatever it answers (SPEC §14). The user's word wins over a tool's annotations
    and over what the detector guesses from a call's name and arguments."""
    read_only_tools: frozenset[StrictStr] = Field(frozenset(), alias="readOnlyTools")
    """Tools that only read: their answers are judged by what they bring, never as effects,
    whatever their names or arguments say (SPEC §14). A tool in both lists is an error."""
    tool_threshold_overrides: Annotated[
        Mapping[StrictStr, _Threshold], AfterValidator(_tool_overrides)
    ] = Field(default_factory=_FrozenMapping, alias="toolThresholdOverrides")
    """Per-tool repeat thresholds, ``{tool: N}``; read-only."""
    progress_aware: StrictBool = Field(True, alias="progressAware")
    """Count a repeat only when it returned the same outcome (SPEC §3)."""
    no_progress_calls: _ZeroOrThreshold = Field(8, alias="noProgressCalls")
    """Calls in a row that only repeat recent (call, outcome) pairs; 0 turns the signal off."""
    near_repeat_threshold: _ZeroOrThreshold = Field(4, alias="nearRepeatThreshold")
    """Identical calls whose outputs are nearly the same (numbers aside); 0 turns it off."""
    max_sequence_length: Annotated[
        int, Field(strict=True, ge=0, le=MAX_CYCLE_LENGTH), AfterValidator(_zero_or_at_least_four)
    ] = Field(6, alias="maxSequenceLength")
    """Longest block of calls (4 or more) watched for repeats; 0 turns the signal off."""
    no_new_info_calls: _ZeroOrThreshold = Field(10, alias="noNewInfoCalls")
    """Model turns in a row whose tool calls bring nothing new; 0 turns the signal off."""
    failing_turns: _ZeroOrThreshold = Field(6, alias="failingTurns")
    """Model turns in a row in which no tool call succeeded; 0 turns the signal off."""
    volatile_fields: Annotated[
        Mapping[StrictStr, frozenset[StrictStr]],
        BeforeValidator(_volatile_fields),
        AfterValidator(_field_names),
    ] = Field(default_factory=_FrozenMapping, alias="volatileFields")
    """Fields whose values are noise (a score, a render id), masked in results: a list for
    every tool, or ``{tool: [names]}`` (``"*"``: every tool); ``*`` matches any run of letters,
    digits and ``_``. A name is a key, never a nested path; at most 1024 names in all.
    Latencies, moments, request ids and cursors are masked already."""
    reply_cycle_length: Annotated[int, Field(strict=True, ge=0, le=MAX_CYCLE_LENGTH)] = Field(
        4, alias="replyCycleLength"
    )
    """Longest cycle of nearly identical replies watched for (over ``cycle_repeats`` laps,
    with ``scope="thread"``); 0 turns the signal off."""
    nudges: Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT)] = 0
    """Hard detections that only block the call and tell the model, before one stops the run."""
    scope: Annotated[Scope, BeforeValidator(_any_case)] = "auto"
    """``"run"``: one invocation; ``"thread"``: everything on one LangGraph ``thread_id``;
    ``"auto"``: ``"thread"`` where the run has a checkpointer and a ``thread_id`` (a
    conversation), ``"run"`` elsewhere (SPEC §13 C1)."""

    _sources: dict[str, str] | None = PrivateAttr(default=None)

    def __init__(self, /, **values: object) -> None:
        """Validate ``values`` over the defaults; raise :class:`LoopGuardConfigError` if bad."""
        resolved, _ = _resolve([_mapping_layer(values, "code")])
        super().__init__(**resolved)

    @classmethod
    def load(cls, /, **values: object) -> Self:
        """Resolve defaults, files, environment and ``values`` (passed in code), lowest first.

        Files: ``$XDG_CONFIG_HOME/loop-guard/config.json`` (``$HOME/.config/…`` when that is
        unset), then ``.loop-guard.json`` in the working directory or, when
        ``LOOP_GUARD_CONFIG`` is set, the file it names (which must exist). Both are JSON
        objects with the same keys as ``values``, read only when they are regular files of at
        most 1 MiB. Every ``LOOP_GUARD_*`` variable must be one of SPEC §5's;
        ``LOOP_GUARD_CONFIG`` and names starting with ``LOOP_GUARD_TEST_`` (reserved for test
        suites) are the only others allowed.

        Args:
            **values: configuration values, as for ``LoopGuardConfig(**values)``. Only
                configuration keys: a key starting with ``_`` is an error.

        Raises:
            LoopGuardConfigError: naming every problem in every source; nothing is applied.
        """
        return cls._load(values)

    @classmethod
    def _load(
        cls,
        values: Mapping[str, object],
        *,
        environ: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Self:
        """:meth:`load` on ``environ`` and ``cwd`` (by default the process's); ``values`` is a
        mapping, never spread into keywords, so no configuration source can reach these hooks."""
        environ = os.environ if environ is None else environ
        cwd = Path.cwd() if cwd is None else cwd
        layers = [
            *file_layers(environ, cwd, _mapping_layer),
            environment_layer(environ),
            _mapping_layer(values, "code"),
        ]
        return cls._build(layers)

    def merged(self, *, source: str = "runtime", **values: object) -> Self:
        """A new configuration with ``values`` changed, recorded as coming from ``source``.

        The result is validated as a whole (so a smaller window is checked against the
        threshold in force); this configuration is left unchanged. Use this rather than
        ``model_copy(update=...)``, which validates nothing and keeps the old sources.

        Raises:
            LoopGuardConfigError: if a value is bad or the result is inconsistent.
        """
        current = Layer(
            entries=tuple(
                Entry(name, getattr(self, name), source=label, key=name, where=label)
                for name, label in self.sources.items()
            )
        )
        return self._build([current, _mapping_layer(values, source)])

    @property
    def sources(self) -> Mapping[str, str]:
        """Where each field's value came from, by field name (read-only).

        ``"default"``, ``"global file <path>"``, ``"project file <path>"``,
        ``"environment LOOP_GUARD_<NAME>"``, ``"code"``, or the ``source`` given to
        :meth:`merged` (``"runtime"`` by default).
        """
        if self._sources is None:
            given = self.model_fields_set
            return MappingProxyType(
                {name: "code" if name in given else "default" for name in type(self).model_fields}
            )
        return MappingProxyType(self._sources)

    def describe(self) -> tuple[ConfigRow, ...]:
        """Every field with its value (plain JSON data) and source, in declaration order."""
        values = self.model_dump(mode="json")
        sources = self.sources
        return tuple(
            ConfigRow(name, values[name], sources[name]) for name in type(self).model_fields
        )

    @classmethod
    def _build(cls, layers: Iterable[Layer]) -> Self:
        """Resolve ``layers`` and remember the source of each value."""
        values, chosen = _resolve(layers)
        config = cls(**values)
        # the class's own factory: the instance it just built takes the sources (no field)
        config._sources = {
            name: chosen[name].source if name in chosen else "default" for name in cls.model_fields
        }
        return config

    @field_serializer("ignore_tools", "acting_tools", "read_only_tools")
    def _dump_ignore_tools(self, value: frozenset[str]) -> list[str]:
        return sorted(value)

    @field_serializer("tool_threshold_overrides")
    def _dump_overrides(self, value: Mapping[str, int]) -> dict[str, int]:
        return dict(value)

    @field_serializer("volatile_fields")
    def _dump_volatile_fields(self, value: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
        return {tool: sorted(names) for tool, names in value.items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LoopGuardConfig):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self), *self.__dict__.values()))


# --- reading sources -----------------------------------------------------------------------

_ENABLED: Final = "enabled"
_FIELD_FOR_KEY: Final[Mapping[str, str]] = MappingProxyType(
    {
        key: name
        for name, info in LoopGuardConfig.model_fields.items()
        for key in (name, info.alias or name)
    }
)
_KEYS_ALLOWED: Final = (
    f"one of {', '.join(sorted([*LoopGuardConfig.model_fields, _ENABLED]))}"
    " (or the camelCase aliases)"
)


def _mapping_layer(data: Mapping[str, object], source: str) -> Layer:
    """The entries of a JSON object or keyword arguments, keys as in ``LoopGuardConfig``."""
    entries: dict[str, Entry] = {}
    problems: list[ConfigProblem] = []
    for key, value in data.items():
        if key == _ENABLED:
            continue
        where = f"{source}, key {key!r}"
        field = _FIELD_FOR_KEY.get(key)
        if field is None:  # no field name starts with "_"
            if isinstance(key, str) and key.startswith("_"):
                what = f"private key {key!r} is not configuration"
            else:
                what = f"unknown key {key!r} = {show(value)}"
                what += suggestion(str(key), [*_FIELD_FOR_KEY, _ENABLED])
            problems.append(
                config_problem(
                    where=source,
                    source=source,
                    key=key,
                    value=value,
                    what=what,
                    allowed=_KEYS_ALLOWED,
                )
            )
        elif field in entries:
            entry = Entry(field, value, source=source, key=key, where=where)
            what = f"got {show(value)}, but {entries[field].key!r} already sets {field}"
            problems.append(entry.problem(what, allowed="each field once, by name or alias"))
        else:
            entries[field] = Entry(field, value, source=source, key=key, where=where)
    if _ENABLED in data:
        problem = _apply_enabled(data[_ENABLED], entries, source)
        if problem is not None:
            problems.append(problem)
    return Layer(tuple(entries.values()), tuple(problems))


def _apply_enabled(enabled: object, entries: dict[str, Entry], source: str) -> ConfigProblem | None:
    """Apply the seed's ``enabled`` key: ``false`` sets ``mode`` to ``"off"``."""
    where = f"{source}, key {_ENABLED!r}"
    problem = partial(config_problem, where=where, source=source, key=_ENABLED, value=enabled)
    if not isinstance(enabled, bool):
        return problem(what=f"got {show(enabled)}", allowed="true or false")
    mode = entries.get("mode")
    if enabled or (mode is not None and _any_case(mode.value) == "off"):
        return None
    if mode is None:
        entries["mode"] = Entry("mode", "off", source=source, key=_ENABLED, where=where, raw=False)
        return None
    return problem(
        what=f"false contradicts mode {show(mode.value)} in the same place",
        allowed="enabled false with mode 'off' or no mode; or enabled true",
    )


# --- resolving -----------------------------------------------------------------------------


@cache
def _adapter(field: str) -> TypeAdapter[Any]:
    """The validator of one field, built from the model's own declaration."""
    return TypeAdapter(LoopGuardConfig.model_fields[field].rebuild_annotation())


def _nested_errors(error: ValidationError) -> str:
    """`` (bash: Input should be …)`` for errors inside a list or mapping, or nothing."""
    parts = [
        f"{' '.join(map(str, detail['loc']))}: {detail['msg']}"
        for detail in error.errors()
        if detail["loc"]
    ]
    return f" ({'; '.join(parts)})" if parts else ""


def _resolve(layers: Iterable[Layer]) -> tuple[dict[str, Any], dict[str, Entry]]:
    """Validate and merge ``layers`` (lowest first) into field values and their entries.

    Raises:
        LoopGuardConfigError: listing every problem of every layer, then of the merge.
    """
    problems: list[ConfigProblem] = []
    values: dict[str, Any] = {}
    chosen: dict[str, Entry] = {}
    rank: dict[str, int] = {}
    invalid: set[str] = set()
    for index, layer in enumerate(layers):
        problems += layer.problems
        for entry in layer.entries:
            try:
                values[entry.field] = _adapter(entry.field).validate_python(entry.value)
            except ValidationError as exc:
                problems.append(entry.problem(f"got {show(entry.shown)}{_nested_errors(exc)}"))
                invalid.add(entry.field)
            else:
                chosen[entry.field] = entry
                rank[entry.field] = index
    if invalid.isdisjoint({_WINDOW, _THRESHOLD}):
        problem = _window_problem(values, chosen, rank)
        if problem is not None:
            problems.append(problem)
    if invalid.isdisjoint({_ACTING, _READ_ONLY}):
        problem = _tool_kinds_problem(values, chosen, rank)
        if problem is not None:
            problems.append(problem)
    if problems:
        raise LoopGuardConfigError.from_problems(problems)
    return values, chosen


_ACTING: Final = "acting_tools"
_READ_ONLY: Final = "read_only_tools"


def _tool_kinds_problem(
    values: Mapping[str, Any], chosen: Mapping[str, Entry], rank: Mapping[str, int]
) -> ConfigProblem | None:
    """A tool cannot both act and only read: the problem is on whichever list came from the
    higher source (``read_only_tools`` on a tie), naming where the other came from."""
    both = sorted(frozenset(values.get(_ACTING, ())) & frozenset(values.get(_READ_ONLY, ())))
    if not both:
        return None
    acting, read_only = chosen[_ACTING], chosen[_READ_ONLY]
    entry, other = (acting, read_only) if rank[_ACTING] > rank[_READ_ONLY] else (read_only, acting)
    return entry.problem(
        f"got {show(entry.shown)}, naming {show(both[0])} that {other.field} ({other.where})"
        " names too",
        allowed="a tool in one of acting_tools and read_only_tools, not both",
    )


_WINDOW: Final = "frequency_window_size"
_THRESHOLD: Final = "repeat_frequency_threshold"


def _window_problem(
    values: Mapping[str, Any], chosen: Mapping[str, Entry], rank: Mapping[str, int]
) -> ConfigProblem | None:
    """The merged window must hold its threshold: the problem is on whichever of the two came
    from the higher source (the window on a tie), naming where the other came from."""
    fields = LoopGuardConfig.model_fields
    window = values.get(_WINDOW, fields[_WINDOW].default)
    threshold = values.get(_THRESHOLD, fields[_THRESHOLD].default)
    if window >= threshold:
        return None
    window_entry = chosen.get(_WINDOW)
    threshold_entry = chosen.get(_THRESHOLD)
    if threshold_entry is not None and (window_entry is None or rank[_THRESHOLD] > rank[_WINDOW]):
        window_where = "default" if window_entry is None else window_entry.where
        return threshold_entry.problem(
            f"got {show(threshold_entry.shown)}, a threshold larger than {_WINDOW} {window}"
            f" ({window_where})",
            allowed=f"a threshold of at most the window ({window})",
        )
    assert window_entry is not None, "the defaults hold the rule"
    threshold_where = "default" if threshold_entry is None else threshold_entry.where
    return window_entry.problem(
        f"got {show(window_entry.shown)}, a window smaller than {_THRESHOLD} {threshold}"
        f" ({threshold_where})",
        allowed=f"a window of at least the threshold ({threshold})",
    )
