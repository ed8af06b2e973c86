"""The notebooks under ``notebooks/`` run top to bottom offline, and are committed clean."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "loop-guard-tests"

# What each notebook's outputs must show, once run: the story it tells really happened.
EXPECTED = {
    "01-observe-then-enforce.ipynb": [
        "loop-guard status",
        "signal=repeated_tool_call tool=read_log count=3/3",
    ],
    "02-observe-rollout.ipynb": [
        "calls that ran: {'deploy_status': 4, 'read_log': 6, 'charge_card': 5}",
        "system prompt the model saw: 'You are a support agent.'",
        "loop-guard status",
        "the newest loop guard",
        "would stop: 3 of 3",
        "(loop-guard): 3 runs, 69 events",  # not 138: a second run starts the trace afresh
        "runs replayed as they ran live",  # the report drawn (%loop_guard report)
        "ticket-2   would stop: tool call 3: repeated_tool_call (read_log, 3/3)",
        "runs stopped by each value of repeat_tool_threshold",  # the sweep's chart
        "would stop: 2 of 3",
        "1 good run would stop",  # the labelled sweep: ticket-1, at repeat_tool_threshold=3
        "loops stopped: 2/2",
        "on {'deploy_status': 6}",
    ],
}


def test_there_are_notebooks() -> None:
    """The glob finds exactly the notebooks whose outputs are checked (none left unchecked)."""
    assert sorted(path.name for path in NOTEBOOKS) == sorted(EXPECTED)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    """No outputs, no execution counts: the reader runs it, and diffs stay readable."""
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.nbformat == 4
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], cell.id
            assert cell.execution_count is None, cell.id


@pytest.fixture(scope="module")
def jupyter_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Jupyter data directory with a kernelspec that runs ipykernel in this interpreter.

    Made from the project's own test dependencies, so it works on a fresh machine whatever
    kernels are installed there (or not), and never picks another Python's ``python3``.
    """
    data = tmp_path_factory.mktemp("jupyter")
    spec = data / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python (loop-guard tests)",
                "language": "python",
            }
        )
    )
    return data


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs_top_to_bottom(
    path: Path, jupyter_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every cell runs without an error, offline, in a clean working directory and home; and
    again in the same directory (a trace it recorded must not double its counts)."""
    for name in list(os.environ):
        if name.startswith("LOOP_GUARD_") and not name.startswith("LOOP_GUARD_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")  # jupyter_core's path-migration notice
    for _ in range(2):  # a second run, in the same folder, finds what the first left behind
        text = _execute(path, tmp_path)
        for expected in EXPECTED[path.name]:
            assert expected in text, expected


def _execute(path: Path, folder: Path) -> str:
    """Run the notebook top to bottom in ``folder``, in a fresh kernel; its outputs' text."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=KERNEL,
        timeout=120,
        resources={"metadata": {"path": str(folder)}},
        # One print can reach the client as several stream messages (the kernel flushes on a
        # timer); Jupyter shows them as one text, and so does this.
        coalesce_streams=True,
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert errors == []
    return "\n".join(
        output.get("text", "") + json.dumps(output.get("data", {}))
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )
