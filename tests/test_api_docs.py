"""``docs/api.md`` is what ``scripts/gen_api_docs.py`` writes from the current docstrings."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

from conftest import load_script

import langchain_loop_guard

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api.md"


def _generator() -> ModuleType:
    return load_script("gen_api_docs")


def test_api_reference_is_current() -> None:
    """A changed public docstring or signature needs ``python scripts/gen_api_docs.py``."""
    assert API.read_text(encoding="utf-8") == _generator().render(), (
        "docs/api.md is stale: run .venv/bin/python scripts/gen_api_docs.py"
    )


def test_api_reference_has_a_section_per_public_name() -> None:
    """Every name of ``__all__`` has its own heading, in order, and nothing is undocumented."""
    headings = re.findall(r"^## (\S+)$", API.read_text(encoding="utf-8"), re.MULTILINE)
    assert headings[: len(langchain_loop_guard.__all__)] == langchain_loop_guard.__all__
    assert {"GuardStatus", "RunInspection"} <= set(headings)


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    """``--check`` exits 1 for a stale file and 0 for a current one, writing nothing."""
    generator = _generator()
    stale = tmp_path / "api.md"
    stale.write_text("# old\n", encoding="utf-8")
    generator.OUTPUT = stale
    generator.ROOT = tmp_path
    assert generator.main(["--check"]) == 1
    assert stale.read_text(encoding="utf-8") == "# old\n"
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0
