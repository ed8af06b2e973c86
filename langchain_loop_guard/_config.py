"""Configuration: the validated, frozen ``LoopGuardConfig`` and where its values come from."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LoopGuardConfig", "Mode", "Scope"]

Mode = Literal["on", "observe", "off"]
Scope = Literal["run", "thread"]


class LoopGuardConfig(BaseModel):
    """Thresholds and switches of the loop guard (SPEC §5). Frozen; unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    mode: Mode = "on"
    locale: Literal["en", "ko"] = "en"
    max_turns: int = Field(12, alias="maxTurns")
    turn_timeout_ms: int = Field(180_000, alias="turnTimeoutMs")
    repeat_tool_threshold: int = Field(3, alias="repeatToolThreshold")
    repeat_error_threshold: int = Field(3, alias="repeatErrorThreshold")
    repeat_assistant_threshold: int = Field(3, alias="repeatAssistantThreshold")
    cycle_repeats: int = Field(3, alias="cycleRepeats")
    max_cycle_length: int = Field(3, alias="maxCycleLength")
    repeat_frequency_threshold: int = Field(4, alias="repeatFrequencyThreshold")
    frequency_window_size: int = Field(10, alias="frequencyWindowSize")
    ignore_tools: frozenset[str] = Field(frozenset(), alias="ignoreTools")
    tool_threshold_overrides: dict[str, int] = Field({}, alias="toolThresholdOverrides")
    progress_aware: bool = Field(True, alias="progressAware")
    no_progress_calls: int = Field(8, alias="noProgressCalls")
    nudges: int = 0
    scope: Scope = "run"
