"""The built wheel: it ships the compiled catalogs, the type marker and a working core."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel once, without network (hatchling and babel are test dependencies)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("langchain_loop_guard-*.whl")
    return built


def test_wheel_contains_compiled_catalogs_and_type_marker(wheel: Path) -> None:
    """Both catalogs are compiled into the wheel, with py.typed."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for locale in ("en", "ko"):
        assert f"langchain_loop_guard/locales/{locale}/LC_MESSAGES/langchain_loop_guard.mo" in names
    assert "langchain_loop_guard/py.typed" in names
    assert not any(name.endswith(".po") for name in names)


def test_installed_wheel_gives_a_korean_stop_message(wheel: Path, tmp_path: Path) -> None:
    """A fresh environment with only the wheel and pydantic stops a loop in Korean."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Install the wheel by unpacking it (what pip does for a pure wheel), offline, and make
    # pydantic (the core's only third-party import) visible from this test environment.
    zipfile.ZipFile(wheel).extractall(site)
    import pydantic

    pydantic_site = Path(pydantic.__file__).resolve().parent.parent
    script = (
        "import sys\n"
        "from langchain_loop_guard import LoopDetector, LoopGuardConfig\n"
        "detector = LoopDetector(LoopGuardConfig(locale='ko'))\n"
        "verdicts = [detector.tool_call('read_file', {'path': 'a.txt'}) for _ in range(3)]\n"
        "print(verdicts[-1].action)\n"
        "print(verdicts[-1].message)\n"
        "import langchain_loop_guard\n"
        "print(langchain_loop_guard.__file__)\n"
        "print('langchain_core' in sys.modules)\n"
    )
    result = subprocess.run(
        [str(python), "-c", script],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(pydantic_site), "PATH": os.environ.get("PATH", "")},
        encoding="utf-8",
    )
    action, message, location, langchain_loaded = result.stdout.splitlines()
    assert action == "block"
    assert "read_file" in message
    assert "루프 가드" in message
    assert Path(location).is_relative_to(Path(site))
    assert langchain_loaded == "False"
