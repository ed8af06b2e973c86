"""The numbers the rules read (:class:`Limits`), taken once from a configuration.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from langchain_loop_guard._core._masks import DEFAULT_VOLATILE_FIELDS, VolatileFields

if TYPE_CHECKING:
    from langchain_loop_guard._core._config import LoopGuardConfig

__all__ = ["Limits", "limits_of"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The numbers the rules read, taken once from a configuration."""

    aware: bool
    repeat: int
    overrides: dict[str, int]
    max_repeat: int
    window: int
    frequency: int
    cycle_repeats: int
    max_cycle: int
    no_progress: int
    max_sequence: int
    near_repeat: int
    no_new_info: int
    stale: int
    """Answers in a row that bring back only what the run has seen which stop the run: half
    of ``no_new_info`` (SPEC §13 R12); 0: off."""
    error: int
    error_often: int
    """Failures with one error within the window that stop the run even with progress
    between them: one more than ``error``, at least the window threshold (SPEC §12 R4')."""
    failing_turns: int
    assistant: int
    reply_cycle: int
    reply_laps: int
    """Laps of a cycle of nearly identical replies that stop the run: ``cycle_repeats``, never
    below the same reply's ``repeat_assistant_threshold``."""
    reworded: int
    """Replies in a row, each nearly the same as the one before, with nothing new from a tool
    or a human between, that stop the run in any scope: one more than
    ``repeat_assistant_threshold`` (SPEC §13 R14); 0: off."""
    volatile: Mapping[str, VolatileFields]
    """The fields masked in each tool's results (``"*"``: any other tool's)."""
    history: int
    acting: frozenset[str] = frozenset()
    """Tools the user says act (``acting_tools``)."""
    read_only: frozenset[str] = frozenset()
    """Tools the user says only read (``read_only_tools``)."""

    @classmethod
    def of(cls, config: LoopGuardConfig) -> Limits:
        """The limits of ``config`` (progress-aware signals are off without awareness)."""
        overrides = dict(config.tool_threshold_overrides)
        aware = config.progress_aware
        max_repeat = max([config.repeat_tool_threshold, *overrides.values()])
        no_progress = config.no_progress_calls if aware else 0
        # SPEC §11's signals need progress awareness: without it, the seed's exact rules
        near_repeat = config.near_repeat_threshold if aware else 0
        max_sequence = config.max_sequence_length if aware else 0
        error_often = max(config.repeat_frequency_threshold, config.repeat_error_threshold + 1)
        # Enough history for every signal: a repeat streak, a full cycle or sequence, a
        # window and, for no progress, the longest streak plus the window before its first
        # call; near repeats look back over their threshold's occurrences within a window each.
        history = max(
            config.frequency_window_size,
            config.max_cycle_length * config.cycle_repeats,
            max_sequence * config.cycle_repeats,
            2 * max_sequence * (config.cycle_repeats - 1) + 1,  # long blocks walked again
            max_repeat,
            near_repeat,
            error_often,
        )
        if no_progress:
            history = max(history, config.frequency_window_size + max(no_progress, max_repeat))
        return cls(
            aware=aware,
            repeat=config.repeat_tool_threshold,
            overrides=overrides,
            max_repeat=max_repeat,
            window=config.frequency_window_size,
            frequency=config.repeat_frequency_threshold,
            cycle_repeats=config.cycle_repeats,
            max_cycle=config.max_cycle_length,
            no_progress=no_progress,
            max_sequence=max_sequence,
            near_repeat=near_repeat,
            no_new_info=config.no_new_info_calls if aware else 0,
            stale=(config.no_new_info_calls + 1) // 2 if aware else 0,
            error=config.repeat_error_threshold,
            error_often=error_often if aware else 0,
            failing_turns=config.failing_turns if aware else 0,
            assistant=config.repeat_assistant_threshold,
            # replies go round only in a conversation: a run answers once (SPEC §12 R9)
            reply_cycle=config.reply_cycle_length if aware and config.scope == "thread" else 0,
            reply_laps=max(config.cycle_repeats, config.repeat_assistant_threshold),
            reworded=config.repeat_assistant_threshold + 1
            if aware and config.reply_cycle_length
            else 0,
            volatile=_volatile_of(config.volatile_fields),
            history=history,
            acting=frozenset(config.acting_tools),
            read_only=frozenset(config.read_only_tools),
        )

    def repeat_threshold(self, tool: str) -> int:
        """The repeat threshold of ``tool`` (its override, or ``repeat_tool_threshold``)."""
        return self.overrides.get(tool, self.repeat)

    def window_threshold(self, tool: str) -> int:
        """The window threshold of ``tool``: never below its repeat threshold."""
        return max(self.frequency, self.repeat_threshold(tool))

    @property
    def sketches_replies(self) -> bool:
        """Whether replies are compared by their words (a word sketch of each is needed)."""
        return bool(self.reply_cycle or self.reworded)

    def acts(self, tool: str, hint: bool | None = None) -> bool | None:
        """Whether ``tool`` acts: the user's word (``acting_tools``, ``read_only_tools``),
        else ``hint`` (the tool's annotations, as an integration read them), else ``None``
        (the call's name and arguments decide, SPEC §14)."""
        if tool in self.acting:
            return True
        if tool in self.read_only:
            return False
        return hint

    def volatile_of(self, tool: str) -> VolatileFields:
        """The fields whose values are noise in ``tool``'s results."""
        volatile = self.volatile
        return volatile.get(tool) or volatile["*"]

    def near_threshold(self, tool: str) -> int:
        """The near-repeat threshold of ``tool`` (0: off): never below its repeat threshold."""
        return max(self.near_repeat, self.repeat_threshold(tool)) if self.near_repeat else 0


def _volatile_of(fields: Mapping[str, frozenset[str]]) -> dict[str, VolatileFields]:
    """The compiled volatile fields of each tool named, and of every other (``"*"``)."""
    every = (*DEFAULT_VOLATILE_FIELDS, *sorted(fields.get("*", ())))
    compiled = {"*": VolatileFields(every)}
    for tool, names in fields.items():
        if tool != "*":
            compiled[tool] = VolatileFields((*every, *sorted(names)))
    return compiled


def limits_of(config: LoopGuardConfig) -> Limits:
    """The limits of ``config``, shared by the runs of one configuration (read, never
    changed): a run's state holds none of its own. The same configuration object is found by
    its identity (the integrations ask on every result); an equal one by its value."""
    known = _BY_IDENTITY.get(id(config))
    if known is not None and known[0] is config:
        return known[1]
    limits = _limits_of(config)
    if len(_BY_IDENTITY) >= _MAX_KNOWN:
        _BY_IDENTITY.clear()  # a process that makes configurations by the thousand
    _BY_IDENTITY[id(config)] = (config, limits)  # holds the config: its id stays its own
    return limits


_MAX_KNOWN = 64
_BY_IDENTITY: dict[int, tuple[LoopGuardConfig, Limits]] = {}


@lru_cache(maxsize=64)
def _limits_of(config: LoopGuardConfig) -> Limits:
    return Limits.of(config)
