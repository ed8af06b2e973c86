"""``docs/observability.md``'s Python examples run, in order, offline; its metrics recipes
count into tiny fake Prometheus and OpenTelemetry counters."""

from __future__ import annotations

import logging
import re
import sys
import types
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "observability.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


class _PrometheusCounter:
    """``prometheus_client.Counter``, as far as the recipe uses it."""

    made: ClassVar[list[_PrometheusCounter]] = []

    def __init__(self, name: str, documentation: str, labelnames: list[str]) -> None:
        self.name, self.labelnames = name, labelnames
        self.values: Counter[tuple[str, ...]] = Counter()
        self.made.append(self)

    def labels(self, **labels: str) -> Any:
        assert sorted(labels) == sorted(self.labelnames)
        key = tuple(labels[name] for name in self.labelnames)
        return types.SimpleNamespace(inc=lambda amount=1: self.values.update({key: amount}))


class _OtelCounter:
    """An OpenTelemetry counter, as far as the recipe uses it."""

    def __init__(self) -> None:
        self.adds: list[tuple[int, dict[str, str]]] = []

    def add(self, amount: int, attributes: dict[str, str]) -> None:
        self.adds.append((amount, dict(attributes)))


def _fake_modules(monkeypatch: pytest.MonkeyPatch) -> dict[str, _OtelCounter]:
    _PrometheusCounter.made = []
    prometheus = types.ModuleType("prometheus_client")
    prometheus.Counter = _PrometheusCounter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "prometheus_client", prometheus)
    otel_counters: dict[str, _OtelCounter] = {}

    def create_counter(name: str, unit: str = "", description: str = "") -> _OtelCounter:
        return otel_counters.setdefault(name, _OtelCounter())

    metrics = types.ModuleType("opentelemetry.metrics")
    metrics.get_meter = lambda name, *args, **kwargs: types.SimpleNamespace(  # type: ignore[attr-defined]
        create_counter=create_counter
    )
    otel = types.ModuleType("opentelemetry")
    otel.metrics = metrics  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "opentelemetry", otel)
    monkeypatch.setitem(sys.modules, "opentelemetry.metrics", metrics)
    return otel_counters


def test_doc_examples_run_and_the_metrics_recipes_count(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every Python block runs in one namespace, top to bottom; the Prometheus recipe counts
    the observed loop once, the OpenTelemetry recipe the stop once; the printed results are
    the ones the page shows."""
    monkeypatch.chdir(tmp_path)  # no project config file of the checkout applies
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    otel_counters = _fake_modules(monkeypatch)
    guard_logger = logging.getLogger("langchain_loop_guard")
    langchain_logger = logging.getLogger("langchain_core.callbacks.manager")
    level, filters = guard_logger.level, list(langchain_logger.filters)
    namespace: dict[str, object] = {"__name__": "observability_doc"}
    try:
        blocks = _BLOCK.findall(DOC.read_text(encoding="utf-8"))
        assert len(blocks) >= 6
        for index, block in enumerate(blocks):
            try:
                exec(compile(block, f"observability.md block {index + 1}", "exec"), namespace)
            except Exception as exc:  # pragma: no cover - the failure report
                pytest.fail(f"observability.md Python block {index + 1} failed: {exc!r}\n{block}")
        removed = not any(
            type(f).__name__ == "CallbackStopFilter" for f in langchain_logger.filters
        )
    finally:
        guard_logger.setLevel(level)
        langchain_logger.filters[:] = filters
    out = capsys.readouterr().out
    assert "observe repeated_tool_call search 3" in out
    assert "stopped: repeated_tool_call search 3/3" in out
    (prometheus,) = _PrometheusCounter.made
    assert prometheus.values == Counter({("observe", "repeated_tool_call"): 1})
    assert otel_counters["loop_guard.verdicts"].adds == [
        (1, {"loop_guard.action": "block", "loop_guard.signal": "repeated_tool_call"})
    ]
    assert removed  # the page's recipe to see LangChain's line again works
