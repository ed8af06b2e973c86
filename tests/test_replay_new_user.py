"""What a new user meets first: ``demo --record`` → ``replay`` → ``--html``, in English and Korean.

Plurals ("1 run"), a run without a thread id, where ``--html`` wrote, the exit statuses
``--help`` lists, and the page's wording, code, legend, colours and fonts.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
from langchain.agents import create_agent

from langchain_loop_guard import LoopGuardConfig, LoopGuardMiddleware, calibrate, replay
from langchain_loop_guard._cli._demo_kinds import INTEGRATIONS
from langchain_loop_guard._cli._main import EXIT_OK, EXIT_USAGE, main
from langchain_loop_guard._replay._report import _LIVE, _SPARED, _TOOLS
from langchain_loop_guard._replay._report_style import FONTS
from langchain_loop_guard.testing import ScriptedChatModel, call, scripted_tool

EN, KO = LoopGuardConfig(), LoopGuardConfig(locale="ko")
PARTICLES = re.compile(r"\((이|가|을|를|은|는|으|와|과)\)")  # 이(가), 을(를)…: left unresolved


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``loop-guard demo --record`` once per integration (the repeat loop, stopped)."""
    folder = tmp_path_factory.mktemp("demo")
    traces = {}
    for integration in INTEGRATIONS:
        trace = folder / f"{integration}.jsonl"
        args = ["demo", "--integration", integration, "--record", str(trace)]
        assert main(args) == EXIT_OK
        traces[integration] = trace
    return traces


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_demo_record_writes_a_trace_that_replays_as_it_ran(
    integration: str, recorded: dict[str, Path]
) -> None:
    """Each integration's recorded demo replays to the live stop."""
    report = replay(recorded[integration], EN)
    (run,) = report.runs
    assert run.stop is not None
    assert run.stop.signal == "repeated_tool_call"
    assert run.same_as_live


def test_demo_record_starts_the_file_afresh_and_private(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twice into one file: one run, mode 0600, and the demo says where it recorded."""
    trace = tmp_path / "demo-trace.jsonl"
    trace.write_text("not a trace\n")
    trace.chmod(0o644)
    for _ in range(2):
        assert main(["demo", "--record", str(trace)]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"Recorded the run to {trace}; replay it: loop-guard replay {trace}" in out
    assert len(replay(trace, EN).runs) == 1
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    assert main(["demo", "--record", str(trace), "--locale", "ko"]) == EXIT_OK
    assert f"실행을 {trace} 파일에 기록했습니다" in capsys.readouterr().out


def test_demo_record_to_a_folder_that_does_not_exist_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line on stderr, status 2, and no demo run."""
    assert main(["demo", "--record", str(tmp_path / "no" / "t.jsonl")]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("loop-guard: --record: ")
    assert len(captured.err.splitlines()) == 1


def test_a_run_without_a_thread_id_is_named_so(tmp_path: Path) -> None:
    """A middleware run without a thread id is recorded as ``-`` and shown as "(no thread
    id)", never ``run -:``; the demo's graph runs have a thread (``demo-repeat``)."""
    trace = tmp_path / "trace.jsonl"
    guard = LoopGuardMiddleware({"mode": "observe"}, record_to=trace)
    model = ScriptedChatModel(script=[call("search", {"q": "x"})] * 5 + ["done"])
    agent = create_agent(model, [scripted_tool("search", "same")], middleware=[guard])
    agent.invoke({"messages": [("user", "go")]})  # no config: no thread id
    for config, name in ((EN, "(no thread id)"), (KO, "(스레드 ID 없음)")):
        report = replay(trace, config)
        assert report.runs[0].run == "-"  # the data keeps what the trace says
        text, page = str(report), report.to_html()
        assert "run -:" not in text
        assert "실행 -:" not in text
        assert name in text
        assert f'<span class="id">{name}</span>' in page


def test_the_demos_graph_runs_are_recorded_under_their_thread(recorded: dict[str, Path]) -> None:
    """``demo --integration middleware --record``: the run is ``demo-repeat``, to label."""
    for integration in ("middleware", "node"):
        assert [run.run for run in replay(recorded[integration], EN).runs] == ["demo-repeat"]


def test_counts_are_singular_or_plural(recorded: dict[str, Path], tmp_path: Path) -> None:
    """One run is "1 run" (and "1 run changes"); Korean has one form."""
    trace = recorded["callbacks"]
    text = str(replay(trace, EN))
    assert "(loop-guard): 1 run, 15 events" in text
    assert "summary: 1 run, 1 would stop" in text
    assert "1 runs" not in text
    sweep = str(calibrate(trace, "repeat_tool_threshold", [3, 9], EN))
    assert "3: 1 of 1 run would stop" in sweep
    assert "repeat_tool_threshold=9: 1 run changes" in sweep
    korean = str(calibrate(trace, "repeat_tool_threshold", [3, 9], KO))
    assert "실행 1개, 이벤트 15개" in korean
    assert "달라지는 실행 1개" in korean
    two = tmp_path / "two.jsonl"
    two.write_text(trace.read_text() + trace.read_text().replace('"run":"', '"run":"b'))
    assert "2 runs, 30 events" in str(replay(two, EN))
    assert "summary: 2 runs, 2 would stop" in str(replay(two, EN))


def test_korean_report_says_would_stop_and_resolves_its_particles(
    recorded: dict[str, Path],
) -> None:
    """중단될 ("would stop"), not 중단됨 ("stopped"), and no 이(가) left for the reader."""
    trace = recorded["callbacks"]
    for text in (
        str(replay(trace, KO)),
        replay(trace, KO).to_html(),
        str(calibrate(trace, "repeat_tool_threshold", [3, 9], KO)),
        calibrate(trace, "repeat_tool_threshold", [3, 9], KO).to_html(),
    ):
        assert "중단될" in text
        assert "중단됨" not in text.replace("실제 실행: 이벤트", "")  # the live run did stop
        assert not PARTICLES.search(text), PARTICLES.search(text)
    assert "중단될 위치: 이벤트 15" in str(replay(trace, KO))


@pytest.mark.parametrize("loop", ["cycle", "error", "assistant", "no-progress", "frequency"])
def test_korean_reasons_of_every_loop_resolve_their_particles(
    loop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every demo loop's Korean stop reason reads as Korean (no 이(가), 을(를))."""
    trace = tmp_path / "t.jsonl"
    assert main(["demo", "--loop", loop, "--record", str(trace)]) == EXIT_OK
    capsys.readouterr()
    page = replay(trace, KO).to_html()
    assert replay(trace, KO).runs[0].stop is not None
    assert not PARTICLES.search(page), PARTICLES.search(page)


def test_stop_messages_backticks_are_code_on_the_page(recorded: dict[str, Path]) -> None:
    """`read_file` in a reason is drawn as code, not as literal backticks."""
    for config in (EN, KO):
        page = replay(recorded["callbacks"], config).to_html()
        assert "<code>read_file</code>" in page
        assert "`" not in page
    assert ".lgr code{" in page


def test_the_legend_has_the_shaded_area_and_a_live_stop_blue_no_tool_shares(
    recorded: dict[str, Path],
) -> None:
    """The legend names the shade over what would not have run; no tool is drawn in blue."""
    english = replay(recorded["callbacks"], EN).to_html()
    korean = replay(recorded["callbacks"], KO).to_html()
    assert "would not have run (after the first stop)" in english
    assert "첫 중단 이후 실행되지 않았을 부분" in korean
    assert f'fill="{_SPARED[0]}" fill-opacity="{_SPARED[1]}"' in english

    def rgb(color: str) -> tuple[int, ...]:
        return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))

    live = rgb(_LIVE)
    for tool in _TOOLS:
        distance = sum((a - b) ** 2 for a, b in zip(rgb(tool), live, strict=True)) ** 0.5
        assert distance > 60, tool  # the first tool's blue was 18 away


def test_the_page_names_a_korean_font_for_every_platform_before_the_generic_one() -> None:
    """macOS, Windows, Android/Linux (Noto) and older Linux Korean families, then sans-serif."""
    families = [name.strip().strip('"') for name in FONTS.split(",")]
    assert families[-1] == "sans-serif"
    for korean in ("Apple SD Gothic Neo", "Malgun Gothic", "Noto Sans KR", "Noto Sans CJK KR"):
        assert korean in families
    page = replay_page_ko()
    assert '<html lang="ko">' in page
    assert FONTS in page


def replay_page_ko() -> str:
    trace = Path(__file__).parent / "fixtures" / "langsmith_export.json"
    return replay(trace, KO).to_html()


def test_html_says_where_it_wrote_after_the_report(
    recorded: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On stderr, so that ``--json`` output stays one JSON document; in the report's locale."""
    page = tmp_path / "report.html"
    trace = str(recorded["callbacks"])
    assert main(["replay", trace, "--no-progress", "--json", "--html", str(page)]) == EXIT_OK
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert captured.err.strip() == f"Wrote the HTML report to {page}"
    args = ["replay", trace, "--no-progress", "--set", "locale=ko", "--html", str(page)]
    assert main(args) == EXIT_OK
    assert capsys.readouterr().err.strip() == f"HTML 보고서를 {page} 파일에 저장했습니다"


@pytest.mark.parametrize(
    ("command", "expected", "absent"),
    [
        ("replay", "the report was written, whether or not the guard would stop a run", "demo"),
        ("demo", "the demo did not go as designed: please report it", "trace"),
        ("config", "the configuration is valid", "demo"),
    ],
)
def test_each_commands_help_lists_its_own_exit_statuses(
    command: str, expected: str, absent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``replay --help`` no longer says status 1 means "the demo did not go as designed"."""
    assert main([command, "--help"]) == EXIT_OK
    epilog = capsys.readouterr().out.partition("exit status:")[2]
    assert expected in epilog
    assert absent not in epilog
