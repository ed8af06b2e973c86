"""A loopback stand-in for the LangSmith service, for tests of what the real SDK sends.

An ``http.server`` thread on 127.0.0.1 answers ``/info`` and records every run the ``langsmith``
SDK creates (``POST``) or updates (``PATCH``), batched or not, and every feedback it creates;
it answers a project's lookup (``GET /sessions``) and ``Client.list_runs`` (``POST
/runs/query``) with the runs recorded, each with its ``feedback_stats``. The environment points
the SDK at it for the duration. Nothing leaves the machine::

    service = LangSmithService(monkeypatch)
    try:
        agent.invoke(...)   # traced by LangChain's tracer, as with a real LangSmith
    finally:
        service.close()     # flushes the SDK, stops the server
    runs = service.runs()   # {run id: the run's fields, post and patches merged}
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langsmith import run_trees
from langsmith import utils as ls_utils

__all__ = ["PROJECT_ID", "LangSmithService", "forget_environment", "merged", "v2_run"]

PROJECT_ID = "6a3c1f0e-0000-4000-8000-00000000beef"
"""The id of the one project the stand-in knows (whatever name it is asked for)."""

_INFO = {
    "version": "0.10.0",
    "batch_ingest_config": {
        "use_multipart_endpoint": False,
        "scale_up_qsize_trigger": 1000,
        "scale_up_nthreads_limit": 1,
        "scale_down_nempty_trigger": 4,
        "size_limit": 100,
        "size_limit_bytes": 20_971_520,
    },
}


class _Service(BaseHTTPRequestHandler):
    """Answers ``/info`` and records every run the SDK creates or updates."""

    received: list[tuple[str, dict[str, Any]]]
    feedback: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/sessions"):
            project = {"id": PROJECT_ID, "tenant_id": PROJECT_ID, "reference_dataset_id": None}
            self._reply(json.dumps([{**project, "name": "loop-guard-tests"}]).encode())
            return
        self._reply(json.dumps(_INFO if self.path.startswith("/info") else {}).encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/v2/runs/query"):  # client.runs.query(): SmithDB v2 runs
            selects = [name.lower() for name in json.loads(body).get("selects") or ["id"]]
            runs = [v2_run(run, selects) for run in merged(self.received, self.feedback).values()]
            self._reply(json.dumps({"items": runs, "next_cursor": None}).encode())
            return
        if self.path.endswith("/runs/query"):  # Client.list_runs()
            runs = list(merged(self.received, self.feedback).values())
            self._reply(json.dumps({"runs": runs, "cursors": {"next": None}}).encode())
            return
        if self.path.endswith("/feedback"):
            self.feedback.append(json.loads(body))
        elif self.path.endswith("/runs/batch"):
            batch = json.loads(body)
            for op in ("post", "patch"):
                self.received.extend((op, run) for run in batch.get(op) or [])
        elif self.path.endswith("/runs"):
            self.received.append(("post", json.loads(body)))
        self._reply(b"{}")

    def do_PATCH(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append(("patch", {**json.loads(body), "id": self.path.rsplit("/", 1)[-1]}))
        self._reply(b"{}")


class LangSmithService:
    """The stand-in, started, with the SDK's environment pointing at it (see the module)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        """``("post" | "patch", run)`` in the order the SDK sent them."""
        self.feedback: list[dict[str, Any]] = []
        """Each feedback the SDK created, as it sent it (``run_id``, ``key``, ``score``…)."""
        handler_class = type(
            "Service", (_Service,), {"received": self.received, "feedback": self.feedback}
        )
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        monkeypatch.setenv("LANGSMITH_TRACING", "true")
        monkeypatch.setenv("LANGSMITH_ENDPOINT", f"http://127.0.0.1:{self._server.server_port}")
        monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-dummy-key-for-a-loopback-service")
        monkeypatch.setenv("LANGSMITH_PROJECT", "loop-guard-tests")
        monkeypatch.delenv("LANGCHAIN_TRACING_V2", raising=False)
        monkeypatch.setattr(run_trees, "_CLIENT", None)
        ls_utils.get_env_var.cache_clear()
        ls_utils.get_tracer_project.cache_clear()

    def close(self) -> None:
        """Wait for the SDK to send everything, then stop the server."""
        try:
            from langchain_core.tracers.langchain import wait_for_all_tracers

            run_trees.get_cached_client().flush()
            wait_for_all_tracers()
            run_trees.get_cached_client().flush()
        finally:
            self._server.shutdown()
            self._server.server_close()
            ls_utils.get_env_var.cache_clear()
            ls_utils.get_tracer_project.cache_clear()

    def runs(self) -> dict[str, dict[str, Any]]:
        """Every run the SDK sent, by id: its post and patches merged (``None`` fields skip)."""
        return merged(self.received, [])

    def flush(self) -> None:
        """Wait for the SDK to send every run traced so far (the service goes on)."""
        from langchain_core.tracers.langchain import wait_for_all_tracers

        run_trees.get_cached_client().flush()
        wait_for_all_tracers()
        run_trees.get_cached_client().flush()


def merged(
    received: list[tuple[str, dict[str, Any]]], feedback: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The runs as ``/runs/query`` returns them: post and patches merged, with the
    ``feedback_stats`` of the feedback created on each (``{key: {"n": .., "avg": ..}}``)."""
    runs: dict[str, dict[str, Any]] = {}
    for _, run in received:
        runs.setdefault(str(run["id"]), {}).update({k: v for k, v in run.items() if v is not None})
    scores: dict[str, dict[str, list[float]]] = {}
    for given in feedback:
        if given.get("score") is not None:
            by_key = scores.setdefault(str(given.get("run_id")), {})
            by_key.setdefault(str(given.get("key")), []).append(float(given["score"]))
    for run_id, by_key in scores.items():
        if run_id in runs:
            runs[run_id]["feedback_stats"] = {
                key: {"n": len(values), "avg": sum(values) / len(values)}
                for key, values in by_key.items()
            }
    return runs


def forget_environment() -> None:
    """After the environment is restored: the SDK reads it afresh (no cached tracing switch,
    endpoint or client), so later runs are not traced into a stopped stand-in."""
    ls_utils.get_env_var.cache_clear()
    ls_utils.get_tracer_project.cache_clear()
    run_trees._CLIENT = None


def v2_run(run: dict[str, Any], selects: list[str]) -> dict[str, Any]:
    """A recorded run as SmithDB v2 returns it (``client.runs.query()``): the fields of
    ``selects`` (lower case) only, ``run_type`` and ``status`` in capitals, its ancestors in
    ``parent_run_ids``."""
    metadata = (run.get("extra") or {}).get("metadata") or {}
    dotted = str(run.get("dotted_order") or "")
    failed = run.get("error") is not None
    full = {
        **run,
        "run_type": str(run.get("run_type", "")).upper(),
        "status": "ERROR" if failed else "SUCCESS" if run.get("end_time") else "PENDING",
        "parent_run_ids": [part[-36:] for part in dotted.split(".")[:-1]],
        "metadata": metadata,
        "thread_id": metadata.get("thread_id"),
        "project_id": PROJECT_ID,
    }
    return {key: full[key] for key in ("id", *selects) if full.get(key) is not None}
