"""SPEC §13 C4: every stop names what would have let that run go on (``ignore_tools``,
``tool_threshold_overrides``, or the signal's own key), in English and Korean, in its message
and as data (``LoopDetected.remedy``, ``loop_guard_stop["remedy"]``)."""

from __future__ import annotations

from typing import Any

import pytest
from guard_scenarios import KINDS, LOOPS, Kind, Loop, loop_harness, model_of, stop_message
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from langchain_loop_guard import (
    LoopDetected,
    LoopGuardCallbackHandler,
    LoopGuardConfig,
    Signal,
    Verdict,
)
from langchain_loop_guard._core._config import LoopGuardConfig as Config
from langchain_loop_guard._core._remedy import REMEDIES, remedy_keys, with_remedy
from langchain_loop_guard._core._verdict import reason

HARD_SIGNALS = [signal for signal in Signal if not signal.is_soft]


def test_every_signal_that_stops_names_a_key() -> None:
    """A stopping signal without a key to name would leave the user guessing: each has one,
    and each key is a configuration key."""
    assert set(REMEDIES) == set(HARD_SIGNALS)
    fields = set(Config.model_fields)
    assert {key for keys in REMEDIES.values() for key in keys} <= fields


@pytest.mark.parametrize(
    ("signal", "keys"),
    [
        (Signal.TOOL_FREQUENCY, ("ignore_tools", "repeat_frequency_threshold")),
        (Signal.NEAR_REPEAT, ("tool_threshold_overrides", "ignore_tools")),
        (Signal.REPEATED_TOOL_CALL, ("tool_threshold_overrides",)),
        (Signal.REPEATED_ASSISTANT_RESPONSE, ("repeat_assistant_threshold",)),
        (Signal.NO_NEW_INFO, ("no_new_info_calls",)),
        (Signal.TURN_COUNT, ()),
    ],
)
def test_the_keys_a_stop_names(signal: Signal, keys: tuple[str, ...]) -> None:
    """A poller's wait stopped by frequency: ``ignore_tools``; a call that may repeat:
    ``tool_threshold_overrides``; anything else: the signal's own key; a warning: none."""
    assert remedy_keys(signal) == keys


@pytest.mark.parametrize("locale", ["en", "ko"])
@pytest.mark.parametrize("signal", HARD_SIGNALS)
def test_every_stop_message_names_its_keys_in_each_locale(signal: Signal, locale: str) -> None:
    """The message after the reason names every key of the stop, in the user's locale."""
    text = reason(signal, locale=locale, tool="sleep", tools=("sleep",), count=4, threshold=4)
    stop = Verdict(action="block", signal=signal, message=text, tool="sleep", count=4)
    told = with_remedy(stop, locale).message
    assert all(f"`{key}`" in told for key in remedy_keys(signal)), told
    assert told.startswith(text)
    if locale == "ko" and signal is not Signal.NEAR_REPEAT:
        added = told[len(text) :]
        assert any("\uac00" <= char <= "\ud7a3" for char in added), added


def test_a_run_already_stopped_is_told_so_and_nothing_more() -> None:
    """The refusals after a stop repeat no advice."""
    tripped = Verdict(action="block", signal=Signal.TOOL_FREQUENCY, message="x", tripped=True)
    assert with_remedy(tripped, "en") is tripped


def _handler_stop(loop: Loop, locale: str) -> LoopDetected:
    config = LoopGuardConfig(**{**loop.config, "locale": locale})
    agent = create_agent(model_of(loop.step), loop.tools())
    run: Any = {"callbacks": [LoopGuardCallbackHandler(config)], "recursion_limit": 200}
    with pytest.raises(LoopDetected) as raised:
        agent.invoke({"messages": [HumanMessage("Please do the task.")]}, run)
    return raised.value


@pytest.mark.parametrize("locale", ["en", "ko"])
@pytest.mark.parametrize("loop", LOOPS, ids=lambda loop: loop.name)
@pytest.mark.parametrize("integration", ["handler", *KINDS])
def test_a_real_agents_stop_names_what_would_have_let_it_go_on(
    integration: str, loop: Loop, locale: str
) -> None:
    """Each loop of the suite, stopped by each integration: ``LoopDetected.remedy`` holds the
    signal's keys and its message names them."""
    if integration == "handler":
        stop = _handler_stop(loop, locale)
    else:
        kind: Kind = integration  # type: ignore[assignment]
        agent = loop_harness(kind, loop, config={"locale": locale})
        with pytest.raises(LoopDetected) as raised:
            agent.invoke()
        stop = raised.value
    assert stop.remedy == remedy_keys(stop.signal)
    assert stop.remedy
    assert all(f"`{key}`" in stop.message for key in stop.remedy), stop.message


@pytest.mark.parametrize("kind", KINDS)
def test_an_ended_runs_stop_message_and_state_name_the_keys(kind: Kind) -> None:
    """With ``on_stop="end"`` the final message names the keys, and the result's
    ``loop_guard_stop`` carries them as data."""
    window = next(loop for loop in LOOPS if loop.signal is Signal.TOOL_FREQUENCY)
    result = loop_harness(kind, window, on_stop="end").invoke()
    final = stop_message(result["messages"])
    assert "`ignore_tools`" in final.text
    assert result["loop_guard_stop"]["remedy"] == ["ignore_tools", "repeat_frequency_threshold"]
