"""Signatures, outcomes, error keys and assistant keys (SPEC §1-§3, §8)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from langchain_loop_guard._core._canonical import call_signature, canonical, digest
from langchain_loop_guard._core._signature import (
    assistant_key,
    error_key,
    error_text,
    normalize_outcome,
    outcome,
    outcome_digest,
)

HEX16 = re.compile(r"[0-9a-f]{16}")


def sig(args: object) -> str:
    return call_signature("tool", args)


# --- values to serialize ----------------------------------------------------------------------


class Color(enum.Enum):
    RED = 1


class Size(enum.Enum):
    SMALL = 1


class Level(enum.IntEnum):
    ONE = 1


class Mood(enum.StrEnum):
    CALM = "calm"


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    width: int
    label: str


@dataclasses.dataclass
class Lazy:
    filled: int = dataclasses.field(init=False)


class Label(str):
    pass


class Count(int):
    pass


class HostileRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class HostileEq:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no eq")

    __hash__ = object.__hash__


class HostileHash:
    def __hash__(self) -> int:
        raise RuntimeError("no hash")


class HostileItems(Mapping[str, int]):
    """A mapping whose ``items()`` and ``repr()`` raise."""

    def __getitem__(self, key: str) -> int:
        return len(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no iteration")

    def __len__(self) -> int:
        return 1

    def items(self) -> Any:
        raise RuntimeError("no items")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


class FloatImpostor:
    """An object claiming to be a float (as ``Mock(spec=float)`` does)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return float


class Shown:
    """An object whose ``repr`` is the text it is given."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class Plain:
    def __init__(self, value: int) -> None:
        self.value = value


class HostileContent:
    """An object whose every attribute lookup raises."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(name)


class HostileStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


def nested_lists(depth: int, *leaves: object) -> list[Any]:
    """``depth`` lists, one in the other, the innermost holding ``leaves``."""
    value: list[Any] = list(leaves)
    for _ in range(depth):
        value = [value]
    return value


def nested_dicts(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"k": value}
    return value


def cyclic_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def cyclic_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


# --- arguments ----------------------------------------------------------------------------------


def test_key_order_never_matters() -> None:
    """Dicts equal in Python have one signature, at any depth."""
    one = {"path": "a.ts", "opts": {"limit": 10, "offset": 0}, "tags": [{"x": 1, "y": 2}]}
    two = {"tags": [{"y": 2, "x": 1}], "opts": {"offset": 0, "limit": 10}, "path": "a.ts"}
    assert sig(one) == sig(two)


def test_list_order_matters() -> None:
    """[1, 2] and [2, 1] are different arguments."""
    assert sig([1, 2]) != sig([2, 1])


@pytest.mark.parametrize(
    ("one", "two"),
    [
        pytest.param(1, 1.0, id="scalar"),
        pytest.param({"n": 3}, {"n": 3.0}, id="dict-value"),
        pytest.param([1, 2], [1.0, 2.0], id="list-items"),
        pytest.param({1: "a"}, {1.0: "a"}, id="dict-key"),
        pytest.param({"s": {1, 2}}, {"s": {1.0, 2.0}}, id="set-members"),
        pytest.param({"n": 0}, {"n": -0.0}, id="negative-zero"),
    ],
)
def test_integral_floats_equal_their_ints(one: object, two: object) -> None:
    """``1`` and ``1.0`` are the same argument, wherever they are."""
    assert sig(one) == sig(two)


@pytest.mark.parametrize(
    ("one", "two"),
    [
        pytest.param(1, 1.5, id="fraction"),
        pytest.param(1, True, id="bool-is-not-int"),
        pytest.param(0, None, id="zero-is-not-null"),
        pytest.param("1", 1, id="text-is-not-number"),
        pytest.param({1: "a"}, {"1": "a"}, id="int-key-is-not-text-key"),
        pytest.param({True: "a"}, {1: "a"}, id="bool-key-is-not-int-key"),
        pytest.param([1, 2], {1, 2}, id="set-is-not-list"),
        pytest.param(b"abc", "abc", id="bytes-are-not-text"),
        pytest.param(dt.date(2024, 1, 2), dt.datetime(2024, 1, 2), id="date-is-not-datetime"),
        pytest.param(Color.RED, 1, id="enum-is-not-its-value"),
        pytest.param(Level.ONE, 1, id="int-enum-is-not-its-value"),
        pytest.param(Mood.CALM, "calm", id="str-enum-is-not-its-value"),
        pytest.param(Color.RED, Size.SMALL, id="enums-of-two-classes"),
        pytest.param(Point(x=1, y=2), {"x": 1, "y": 2}, id="model-is-not-a-dict"),
        pytest.param(Box(1, "a"), Box(2, "a"), id="dataclass-fields"),
        pytest.param(Point(x=1, y=2), Point(x=2, y=1), id="model-fields"),
        pytest.param(float("inf"), float("-inf"), id="infinities"),
        pytest.param(float("nan"), float("inf"), id="nan-is-not-inf"),
        pytest.param(Plain(1), {"value": 1}, id="object-is-not-a-dict"),
        pytest.param(Shown("Grid(10x5)"), Shown("Grid(10x6)"), id="repr-without-a-pointer"),
    ],
)
def test_different_arguments_have_different_signatures(one: object, two: object) -> None:
    """Values that differ in meaning or type never share a signature."""
    assert sig(one) != sig(two)


@pytest.mark.parametrize(
    ("one", "two"),
    [
        pytest.param({3, 1, 2}, {2, 3, 1}, id="set"),
        pytest.param({1, 9}, {9, 1}, id="set-iterated-in-insertion-order"),
        pytest.param({3, 1, 2}, frozenset({1, 2, 3}), id="frozenset"),
        pytest.param({"b", "a", "c"}, {"c", "b", "a"}, id="set-of-text"),
        pytest.param((1, [2, 3]), [1, (2, 3)], id="tuples-as-lists"),
        pytest.param(b"abc", bytearray(b"abc"), id="bytearray"),
        pytest.param(b"abc", memoryview(b"abc"), id="memoryview"),
        pytest.param(dt.timedelta(seconds=1), dt.timedelta(milliseconds=1000), id="timedelta"),
        pytest.param(Label("a"), "a", id="str-subclass"),
        pytest.param(Count(3), 3, id="int-subclass"),
        pytest.param(Point(x=1, y=2), Point(y=2, x=1), id="pydantic-model"),
        pytest.param(Box(1, "a"), Box(width=1, label="a"), id="dataclass"),
        pytest.param(float("nan"), float("nan"), id="nan"),
        pytest.param(Plain(1), Plain(2), id="objects-by-type-and-repr"),
    ],
)
def test_equal_arguments_have_equal_signatures(one: object, two: object) -> None:
    """Sets in any order, tuples and lists, bytes in any buffer, models by value: one signature."""
    assert sig(one) == sig(two)


def test_read_a_ts_and_read_b_ts_differ() -> None:
    """The seed's example: the arguments are part of the signature."""
    assert call_signature("read", {"path": "a.ts"}) != call_signature("read", {"path": "b.ts"})


def test_tool_name_is_part_of_the_signature() -> None:
    """read(a.ts) and write(a.ts) differ."""
    assert call_signature("read", {"path": "a.ts"}) != call_signature("write", {"path": "a.ts"})


def test_name_and_arguments_cannot_be_confused() -> None:
    """Digest parts are length-prefixed: ("ab", "c") is not ("a", "bc")."""
    assert digest("ab", "c") != digest("a", "bc")
    assert digest("ab", "c") == digest(b"ab", b"c")


SURVIVORS: list[Any] = [
    pytest.param({"when": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)}, id="datetime"),
    pytest.param({"day": dt.date(2024, 1, 2), "at": dt.time(3, 4)}, id="date-and-time"),
    pytest.param({"blob": b"\x00\xff" * 10}, id="bytes"),
    pytest.param({"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf")}, id="nan-inf"),
    pytest.param({1: "a", None: "b", (1, 2): "c", 2.5: "d", Color.RED: "e"}, id="non-text-keys"),
    pytest.param(cyclic_list(), id="cyclic-list"),
    pytest.param(cyclic_dict(), id="cyclic-dict"),
    pytest.param({"a": nested_lists(10_000)}, id="10000-deep-lists"),
    pytest.param({"a": nested_dicts(10_000)}, id="10000-deep-dicts"),
    pytest.param({"x": HostileRepr()}, id="raising-repr"),
    pytest.param({"x": HostileEq(), "s": {HostileEq()}}, id="raising-eq"),
    pytest.param({"x": HostileHash()}, id="raising-hash"),
    pytest.param({"x": HostileItems()}, id="raising-items"),
    pytest.param(HostileItems(), id="raising-items-at-top"),
    pytest.param({"x": Lazy()}, id="dataclass-field-unset"),
    pytest.param({"n": 10**5000, 10**5000: "key"}, id="int-too-long-for-text"),
    pytest.param({"x": FloatImpostor()}, id="object-claiming-to-be-a-float"),
    pytest.param({"cls": Point, "dc": Box, "fn": len}, id="classes-and-functions"),
    pytest.param({"s": {"c", "a", "b"}, "f": frozenset({3, 1})}, id="sets"),
    pytest.param(Point(x=1, y=2), id="pydantic-model"),
    pytest.param(Box(1, "a"), id="dataclass"),
    pytest.param({"e": [Color.RED, Level.ONE, Mood.CALM]}, id="enums"),
]


@pytest.mark.parametrize("value", SURVIVORS)
def test_any_value_serializes_without_raising_and_deterministically(value: object) -> None:
    """Every value gets a canonical JSON text, the same every time."""
    text = canonical(value)
    assert json.loads(text) is not None
    assert canonical(value) == text
    assert HEX16.fullmatch(sig(value))


@pytest.mark.parametrize(
    ("one", "two"),
    [
        pytest.param({"path": "a", "n": 10**5000}, {"path": "b", "n": 10**5000}, id="other-arg"),
        pytest.param({"n": 10**5000}, {"n": 10**5000 + 1}, id="other-int"),
    ],
)
def test_ints_too_long_for_text_keep_arguments_apart(one: object, two: object) -> None:
    """An int beyond Python's digit limit is written in hex, not lost with its neighbours."""
    assert sig(one) != sig(two)


@pytest.mark.parametrize("n", [2**2500, 10**5000], ids=["long", "beyond-the-digit-limit"])
def test_fast_and_normalizing_paths_write_long_ints_alike(n: int) -> None:
    """A float beside a long int sends it down the normalizing path: its text is the same."""
    assert sig({"n": n, "x": 1}) == sig({"n": n, "x": 1.0})


def test_a_raising_mapping_costs_only_its_own_part_of_the_signature() -> None:
    """The other arguments still tell calls apart."""
    assert sig({"m": HostileItems(), "n": 1}) != sig({"m": HostileItems(), "n": 2})


def test_deep_nesting_is_cut_far_below_the_recursion_limit() -> None:
    """Nesting beyond the cut is marked, not followed: two huge depths serialize alike."""
    assert canonical(nested_lists(10_000)) == canonical(nested_lists(20_000))
    assert canonical(nested_lists(50)) != canonical(nested_lists(51))


@pytest.mark.parametrize("depth", [198, 199, 200, 201])
def test_plain_json_and_normalized_values_agree_up_to_the_depth_cut(depth: int) -> None:
    """A float anywhere sends a value down the normalizing path: it serializes as before."""
    assert canonical([nested_lists(depth), 1]) == canonical([nested_lists(depth), 1.0])
    assert canonical(nested_lists(depth, 1, "a")) == canonical(nested_lists(depth, 1.0, "a"))


def test_cycles_are_marked_not_followed() -> None:
    """A list containing itself serializes with a cycle mark."""
    assert "$cycle" in canonical(cyclic_list())
    assert canonical([[1], [1]]) == canonical([[1.0], [1]])


def test_shared_values_are_not_cycles() -> None:
    """The same list twice is not a cycle."""
    shared = [1, 2]
    assert canonical({"a": shared, "b": shared}) == canonical({"a": [1, 2], "b": [1, 2]})


def test_default_reprs_do_not_leak_memory_addresses() -> None:
    """Two objects of a class without a repr serialize alike, in any process."""
    assert canonical(object()) == canonical(object())
    assert "0x#" in canonical(object())


@pytest.mark.slow
def test_set_signatures_are_stable_across_processes() -> None:
    """String hashing differs per process; a set's signature does not."""
    args = {"tags": {"alpha", "beta", "gamma", "delta"}, "ids": frozenset({"x", "y", "z"})}
    code = (
        "from langchain_loop_guard._core._canonical import call_signature;"
        "print(call_signature('tool', {'tags': {'alpha', 'beta', 'gamma', 'delta'},"
        " 'ids': frozenset({'x', 'y', 'z'})}))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert outputs == {call_signature("tool", args)}


# --- outcomes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("one", "two"),
    [
        pytest.param("tests failed in 0.51s", "tests failed in 0.62s", id="seconds"),
        pytest.param("took 12ms", "took 3ms", id="milliseconds"),
        pytest.param("ran for 2.5 minutes", "ran for 3.1 minutes", id="minutes"),
        pytest.param("done in 1.5 sec", "done in 2.25 sec", id="sec"),
        pytest.param("at 2024-05-01T10:00:00Z", "at 2024-05-02T11:30:59Z", id="iso-timestamp"),
        pytest.param("at 2024-05-01 10:00:00.123", "at 2024-06-01 09:00:00.456", id="timestamp"),
        pytest.param("[12:00:01] idle", "[12:00:07] idle", id="clock-time"),
        pytest.param("on 2024-05-01", "on 2024-05-02", id="date"),
        pytest.param(
            "job 123e4567-e89b-12d3-a456-426614174000",
            "job 9B2F6A1C-0D4E-4F5A-8B6C-7D8E9F0A1B2C",
            id="uuid",
        ),
        pytest.param("<Job object at 0x7f3a2b1c>", "<Job object at 0x7f99ffee00>", id="pointer"),
        pytest.param("offset 1714550400", "offset 1714550405", id="long-number"),
        pytest.param("a  b\n\tc ", " a b c", id="whitespace"),
        # SPEC §13: time passing is no progress, ages included (it withdrew §12 N7's ages)
        pytest.param("web-7d4b 0/1 Pending 0 5s", "web-7d4b 0/1 Pending 0 12s", id="age-seconds"),
        pytest.param("uptime 3m", "uptime 4m", id="age-minutes"),
        pytest.param("running for 2 hours", "running for 3 hours", id="age-hours"),
        pytest.param("AGE 3m20s", "AGE 4m5s", id="age-compound"),
        pytest.param("audited 312 packages in 2s", "audited 312 packages in 3s", id="npm"),
        pytest.param("up 2 days", "up 3 days", id="age-days"),
        pytest.param({"status": "idle", "ms": 1}, {"ms": 1, "status": "idle"}, id="json-key-order"),
    ],
)
def test_outcomes_equal_after_normalization(one: object, two: object) -> None:
    """What changes without meaning progress is masked."""
    assert normalize_outcome(one) == normalize_outcome(two)
    assert outcome_digest(one) == outcome_digest(two)


@pytest.mark.parametrize(
    ("one", "two"),
    [
        pytest.param("progress 45%", "progress 50%", id="percent"),
        pytest.param("Pending", "Running", id="status"),
        pytest.param("5 passed, 2 failed", "6 passed, 1 failed", id="counts"),
        pytest.param("id 12345", "id 12346", id="five-digit-number"),
        pytest.param("grid 10x5", "grid 10x6", id="not-a-pointer"),
        pytest.param("resize 2x3", "resize 2x4", id="not-a-pointer-either"),
        pytest.param("5 hosts up", "6 hosts up", id="not-a-duration"),
        pytest.param("page 2 of 9", "page 3 of 9", id="page"),
        pytest.param({"status": "a"}, {"status": "b"}, id="json-value"),
        pytest.param("Done", "done", id="case"),
    ],
)
def test_outcomes_that_differ_in_substance_stay_different(one: object, two: object) -> None:
    """Short numbers, statuses and values are progress."""
    assert outcome_digest(one) != outcome_digest(two)


# The masks, written plainly: ``str`` regular expressions with look-behinds, run one after the
# other. The package finds the same places at C speed in a digit "shape" of the UTF-8 bytes;
# the two must agree on every text.
_REF_WORD = r"[0-9A-Za-z_\x80-\U0010ffff]"  # a non-ASCII character counts as a word character
_REF_POINTER = re.compile(r"(?<!" + _REF_WORD + r")0x[0-9a-fA-F]+")
_REF_UUID = re.compile(
    r"(?<!" + _REF_WORD + r")[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
    r"(?!" + _REF_WORD + r")"
)
_REF_END = r"(?!" + _REF_WORD + r")"
_REF_VOLATILE = re.compile(
    r"[0-9]{6,}"
    r"|(?<!" + _REF_WORD + r")(?:"
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?"
    + _REF_END
    + r"|[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?"
    + _REF_END
    + r"|[0-9]+\.[0-9]+ ?(?:ns|us|µs|ms|s|secs?|seconds?|m|mins?|minutes?|h|hours?)"
    + _REF_END
    + r"|[0-9]+ ?(?:ns|us|µs|ms|s(?:ecs?|econds?)?|m(?:ins?|inutes?)?|h(?:rs?|ours?)?|d(?:ays?)?)"
    + r"(?:[0-9]+(?:ms|s|m|h))*"
    + _REF_END
    + r")"
)


_REF_IDS = re.compile(  # ids that carry no progress (SPEC §11 R2)
    r"(?<![0-9A-Za-z_\x80-\U0010ffff-])(?:"
    r"(?:req|msg|toolu|call|chatcmpl|run|lc|resp|evt|sess|conv|file|batch|job)[_-]"
    r"(?=[0-9A-Za-z_-]*[0-9])[0-9A-Za-z_-]{6,}"
    r"|(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}"
    r")(?![0-9A-Za-z_\x80-\U0010ffff])"
    r"|(?<=line )[0-9]+(?=:)"
)


def reference_normalization(text: str) -> str:
    text = " ".join(text.split())
    text = _REF_UUID.sub("<#>", text)
    text = _REF_IDS.sub("<#>", text)
    text = _REF_POINTER.sub("<#>", text)
    return _REF_VOLATILE.sub("<#>", text)


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                *"0123456789",
                *" .,:-_+xZTabcdefhimnosu\n\t\x00é—µ",
                *[
                    "0x",
                    "2024-05-01",
                    "12:30:45",
                    "a1b2c3d4-",
                    "123e4567-e89b-12d3-a456-426614174000",
                    "req_",
                    "toolu_",
                    "chatcmpl-",
                    "line ",
                    "deadbeef",
                ],
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_outcome_masks_match_a_plain_regex_reference(text: str) -> None:
    """The fast masks agree with the same rules written as plain regular expressions."""
    assert normalize_outcome(text) == reference_normalization(text)


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        pytest.param("md5s and sha1 hashes", "md5s and sha1 hashes", id="digits-inside-a-word"),
        pytest.param("x_1234567 done", "x_<#> done", id="long-number-inside-a-word"),
        pytest.param("req_8f3a9c21ab done", "<#> done", id="prefixed-id"),
        pytest.param("toolu_01AbCdEf and chatcmpl-9xYz12", "<#> and <#>", id="vendor-ids"),
        pytest.param("id 3f2a9b8c7d6e5f40 sent", "id <#> sent", id="hex-run"),
        pytest.param("decade deadbeefs", "decade deadbeefs", id="hex-letters-only"),
        pytest.param("bash: line 11301: x: not found", "bash: line <#>: x: not found", id="bash"),
        pytest.param("call_back_handler ran", "call_back_handler ran", id="no-digit-no-id"),
        pytest.param("in 0.5\n  s", "in <#>", id="whitespace-before-the-unit"),
        pytest.param("at 10:00:00.1234567", "at <#>", id="fraction-of-a-time"),
        pytest.param("NUL\x00\x00\x00\x00\x00\x00s", "NUL\x00\x00\x00\x00\x00\x00s", id="nul"),
        pytest.param("took 3µs", "took <#>", id="micro"),
        pytest.param("\ud800 12ms", "\ud800 <#>", id="lone-surrogate"),
    ],
)
def test_outcome_normalization_examples(text: str, normalized: str) -> None:
    assert normalize_outcome(text) == normalized


class Message:
    def __init__(self, content: object) -> None:
        self.content = content


@pytest.mark.parametrize(
    ("output", "text"),
    [
        pytest.param(Message("file contents"), "file contents", id="message-text"),
        pytest.param(
            Message([{"type": "text", "text": "hi"}]), '[{"text":"hi","type":"text"}]', id="blocks"
        ),
        pytest.param({"b": 2, "a": 1}, '{"a":1,"b":2}', id="json"),
        pytest.param(None, "null", id="none"),
    ],
)
def test_outcome_text_is_a_message_content_or_canonical_json(output: object, text: str) -> None:
    """A string as is, a tool message's content, anything else as canonical JSON."""
    assert normalize_outcome(output) == text


def test_outcome_of_an_object_whose_attributes_raise_is_its_canonical_text() -> None:
    """A hostile ``__getattr__`` is no tool message: it is serialized like any object."""
    assert normalize_outcome(HostileContent()).startswith('{"$repr":"<')
    assert outcome_digest(HostileContent()) == outcome_digest(HostileContent())


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("one", "two"),
    [
        pytest.param("SyntaxError at line 12", "SyntaxError at line 14", id="line-numbers"),
        pytest.param("retry 1 of 3 failed", "retry 2 of 3 failed", id="counters"),
        pytest.param(
            "lock held by 123e4567-e89b-12d3-a456-426614174000",
            "lock held by 9b2f6a1c-0d4e-4f5a-8b6c-7d8e9f0a1b2c",
            id="uuid",
        ),
        pytest.param(
            "timeout at 2024-05-01T10:00:00Z", "timeout at 2024-05-01T10:07:00Z", id="time"
        ),
        pytest.param("segfault at 0x7ffe12", "segfault at 0x55aa", id="pointer"),
        pytest.param("not\n  found", "not found ", id="whitespace"),
        pytest.param(ValueError("bad row 3"), "ValueError: bad row 4", id="exception-and-text"),
        pytest.param(Message("Error: no such tool"), "Error: no such tool", id="tool-message"),
    ],
)
def test_errors_that_differ_only_in_volatile_parts_share_a_key(one: object, two: object) -> None:
    """UUIDs, timestamps and pointers masked, digit runs collapsed, whitespace collapsed."""
    assert error_key("run", one) == error_key("run", two)


@pytest.mark.parametrize(
    ("one", "two"),
    [
        pytest.param("KeyError: 'a'", "KeyError: 'b'", id="message"),
        pytest.param(ValueError("bad"), TypeError("bad"), id="exception-type"),
        pytest.param("Not found", "Permission denied", id="text"),
    ],
)
def test_different_errors_have_different_keys(one: object, two: object) -> None:
    """Anything but the volatile parts tells errors apart."""
    assert error_key("run", one) != error_key("run", two)


def test_error_key_includes_the_tool() -> None:
    """The same error from two tools is two errors."""
    assert error_key("read", "boom") != error_key("write", "boom")


def test_error_key_is_not_an_outcome_digest() -> None:
    """An error and a success with the same text are different outcomes."""
    assert error_key("read", "boom") != outcome_digest("boom")


@pytest.mark.parametrize(
    ("error", "text"),
    [
        pytest.param(ValueError("bad input"), "ValueError: bad input", id="exception"),
        pytest.param(HostileStr(), "HostileStr: ", id="raising-str"),
        pytest.param("plain text", "plain text", id="text"),
        pytest.param({"code": 3}, '{"code":3}', id="json"),
    ],
)
def test_error_text_is_type_and_message(error: object, text: str) -> None:
    """An exception reads ``"Type: message"``; anything else is its text."""
    assert error_text(error) == text


# --- assistant responses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("one", "two", "equal"),
    [
        pytest.param("Done.", "  Done.\n", True, id="trimmed"),
        pytest.param("All  tests\npass.", "All tests pass.", True, id="whitespace-collapsed"),
        pytest.param("Done.", "done.", False, id="case-kept"),
        pytest.param("Done.", "Done!", False, id="punctuation-kept"),
        pytest.param("Wait 5 s.", "Wait 6 s.", False, id="numbers-kept"),
        pytest.param(
            [{"type": "text", "text": "hi"}], [{"text": "hi", "type": "text"}], True, id="blocks"
        ),
    ],
)
def test_assistant_key_is_the_trimmed_collapsed_text(one: object, two: object, equal: bool) -> None:
    """Only whitespace is normalized in assistant responses."""
    assert (assistant_key(one) == assistant_key(two)) is equal


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_assistant_text_has_no_key(text: str) -> None:
    """Empty responses are skipped."""
    assert assistant_key(text) is None


# --- nothing but digests leaves -----------------------------------------------------------------

SECRET = "correct-horse-battery-staple"

DIGESTS: list[Any] = [
    pytest.param(lambda: call_signature("read", {"password": SECRET}), id="call_signature"),
    pytest.param(lambda: call_signature(SECRET, {}), id="call_signature-name"),
    pytest.param(lambda: outcome_digest(f"token={SECRET}"), id="outcome_digest"),
    pytest.param(lambda: error_key("login", f"bad password {SECRET}"), id="error_key"),
    pytest.param(lambda: assistant_key(f"The password is {SECRET}."), id="assistant_key"),
    pytest.param(lambda: digest(SECRET), id="digest"),
]


@pytest.mark.parametrize("make", DIGESTS)
def test_digests_are_short_hex_and_never_contain_the_input(make: Callable[[], str]) -> None:
    """Only 16 hex digits leave the module."""
    value = make()
    assert HEX16.fullmatch(value)
    assert SECRET not in value


def test_a_validation_error_is_keyed_without_the_input_it_echoes() -> None:
    """New invalid values each time are still one error (SPEC §11)."""

    def validation_error(value: str) -> str:
        return (
            "1 validation error for add\ncount\n  Input should be a valid integer, unable to "
            f"parse string as an integer [type=int_parsing, input_value='{value}', "
            "input_type=str]"
        )

    assert error_key("add", validation_error("abc")) == error_key("add", validation_error("xyz"))
    assert error_key("add", validation_error("abc")) != error_key(
        "add", validation_error("abc").replace("integer", "float")
    )
    echoed = 'bad input_value="a, b" input_type=dict'
    assert error_key("t", echoed) == error_key("t", 'bad input_value="c" input_type=list')


# --- the canonicalization budget ---------------------------------------------------------------


class _Endless(Mapping[str, int]):
    """A mapping whose ``items()`` never ends."""

    def __getitem__(self, key: str) -> int:
        return len(key)

    def __iter__(self) -> Iterator[str]:
        return (str(n) for n in itertools.count())

    def __len__(self) -> int:
        return 0


class _List(list[object]):
    """A list subclass: never plain JSON, so it is always normalized."""


def test_a_mapping_whose_items_never_end_is_cut_quickly_and_marked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Normalization stops at its item budget and says so, instead of running out of memory.

    The time budget is lifted here so that the item budget, which is deterministic, is the
    one that cuts (on a loaded machine the two-second budget could come first; the time
    budget has its own test below, and the cost is measured in ``benchmarks/``)."""
    monkeypatch.setattr("langchain_loop_guard._core._canonical._MAX_SECONDS", 600.0)
    text = canonical({"query": _Endless()})
    assert '"$truncated":"items"' in text
    assert len(text) < 10 << 20
    assert call_signature("t", {"q": _Endless()}) == call_signature("t", {"q": _Endless()})


@pytest.mark.parametrize(
    "make",
    [
        lambda n: _List(range(n)),
        lambda n: set(range(n)),
        lambda n: {f"k{i}": i for i in range(n)} | {"x": 1.5},
    ],
    ids=["list", "set", "mapping"],
)
def test_containers_beyond_the_item_budget_are_marked_truncated(
    make: Callable[[int], object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond the item budget the container is cut and marked, and what follows it too."""
    monkeypatch.setattr("langchain_loop_guard._core._canonical._MAX_ITEMS", 100)
    text = canonical(_List([make(500), {"after": [1.5]}]))
    assert text.count('"$truncated":"items"') == 2  # the big one and the list holding it
    assert "after" not in text
    assert canonical(_List([make(50)])).count("$truncated") == 0


def test_normalization_beyond_its_time_budget_is_cut_and_marked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A value that takes too long is cut, marked ``time``."""
    monkeypatch.setattr("langchain_loop_guard._core._canonical._MAX_SECONDS", -1.0)
    text = canonical(_List(range(5_000)))
    assert text.endswith('{"$truncated":"time"}]')
    assert 0 < text.count(",") <= 1024  # cut at the first look at the clock


def test_strings_and_bytes_beyond_the_character_budget_are_digested_not_copied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the character budget, strings and bytes are written as digests: still apart."""
    monkeypatch.setattr("langchain_loop_guard._core._canonical._MAX_CHARS", 1_000)
    big, other = "a" * 2_000, "a" * 1_999 + "b"
    assert canonical(_List([big])) == canonical(_List([big]))
    assert canonical(_List([big])) != canonical(_List([other]))
    assert big not in canonical(_List([big]))
    assert '"$str"' in canonical(_List([big]))
    assert canonical(_List([b"x" * 2_000])) != canonical(_List([b"x" * 1_999 + b"y"]))
    assert '{"$bytes":"' in canonical(_List([b"x" * 2_000]))
    assert "eHh4" not in canonical(_List([b"x" * 2_000]))  # not its base64 text
    assert canonical(_List(["short"])) == '["short"]'


def test_a_large_text_is_normalized_in_bounded_parts() -> None:
    """Over 32 KB: head and tail masked as usual, the middle compared without digits and
    whitespace; a word that changes anywhere is still a change."""
    head = "run 7 started at 2024-05-01T10:00:00Z\n" + "x" * 5_000 + "\n"
    tail = "\n" + "y" * 3_000 + "\nrun 7 done in 0.53s\n"

    def log(n: int, word: str = "done", stamp: str = "00:00") -> str:
        middle = "".join(f"batch {i * n} ok\n" for i in range(3_000))
        return f"{head.replace('00:00Z', stamp + 'Z')}{middle}status {word}\n{tail}"

    assert len(log(1)) > 32 * 1024
    assert outcome(log(1)).key == outcome(log(7)).key  # numbers in the middle
    assert outcome(log(1)).key == outcome(log(1, stamp="12:34")).key  # a timestamp in the head
    assert outcome(log(1)).key != outcome(log(1, "failed")).key  # a word in the middle
    assert outcome(log(1)).near == outcome(log(7)).near
    assert error_key("t", log(1)) == error_key("t", log(3))


class _Raising(Mapping[str, object]):
    """A mapping whose values cannot be read."""

    def __getitem__(self, key: str) -> object:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no")

    def __len__(self) -> int:
        return 1


def test_argument_words_are_found_in_every_shape_of_arguments() -> None:
    """Words of string values at any of a few levels, in mappings, lists and tuples; other
    values (numbers, None, objects) add none; a hostile mapping ends the walk quietly."""
    from langchain_loop_guard._core._signature import arg_tokens

    def result_without(args: object, text: str) -> str:
        return outcome(text, tokens=arg_tokens(args)).info

    echoed = 'No matches for "Foo"'
    other = 'No matches for "Bar"'
    for args in (
        "Foo",
        {"q": "Foo", "n": 3, "x": None, "f": 1.5},
        {"q": ["Foo", ("Foo",)]},
        {"outer": {"inner": {"q": "Foo"}}},
    ):
        assert result_without(args, echoed) == outcome(other, tokens=arg_tokens("Bar")).info
    assert arg_tokens(object()) == frozenset()
    assert arg_tokens({"a": {"b": {"c": {"d": {"e": "Foo"}}}}}) == frozenset()  # too deep
    assert arg_tokens(_Raising()) == frozenset()
    assert arg_tokens("x " * 3_000) == frozenset()  # a long text is no list of words
    assert arg_tokens({"q": "x " * 3_000, "r": "Foo"}) == arg_tokens("Foo")
