"""A loopback stand-in for the LangSmith service, for tests of what the real SDK sends.

An ``http.server`` thread on 127.0.0.1 answers ``/info`` and records every run the ``langsmith``
SDK creates (``POST``) or updates (``PATCH``), batched or not, and every feedback it creates;
the environment points the SDK at it for the duration. Nothing leaves the machine. It also
answers what ``langsmith.evaluate``, reading runs back and exporting them need: projects and
experiments (``/sessions``: looked up by name, created, ended), a dataset read by id, feedback
(``POST /feedback``, kept: :attr:`LangSmithService.feedback`), and the recorded runs, each with
its ``feedback_stats``, queried (``Client.list_runs``: ``/runs/query`` by trace, root or
project; ``client.runs.query()``: ``/v2/runs/query``) or read by id::

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
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest
from langsmith import run_trees
from langsmith import utils as ls_utils

__all__ = [
    "DEFAULT_PROJECT",
    "PROJECT_ID",
    "LangSmithService",
    "forget_environment",
    "merged",
    "project_id",
    "v2_run",
]

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

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    feedback: list[dict[str, Any]]
    sessions: dict[str, dict[str, Any]]

    def _json(self, value: object) -> None:
        self._reply(json.dumps(value).encode())

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path.startswith("/info"):
            self._json(_INFO)
        elif path == "/sessions":  # read_project(project_name=...)
            name = parse_qs(query).get("name", [DEFAULT_PROJECT])[0]
            self._json([self._session(name)])
        elif path.startswith("/sessions/"):
            self._json(self._session(DEFAULT_PROJECT))
        elif path.startswith("/datasets/"):
            self._json({"id": path.split("/")[2], "name": "dataset", **_CREATED})
        elif path.startswith("/runs/"):
            self._json(self._stored().get(path.split("/")[2], {}))
        else:
            self._json({})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/v2/runs/query"):  # client.runs.query(): SmithDB v2 runs
            selects = [name.lower() for name in json.loads(body).get("selects") or ["id"]]
            runs = [v2_run(run, selects) for run in self._stored().values()]
            self._json({"items": runs, "next_cursor": None})
            return
        if self.path.endswith("/runs/batch"):
            batch = json.loads(body)
            for op in ("post", "patch"):
                self.received.extend((op, run) for run in batch.get(op) or [])
        elif self.path.endswith("/runs"):
            self.received.append(("post", json.loads(body)))
        elif self.path.endswith("/runs/query"):
            self._json({"runs": self._query(json.loads(body)), "cursors": {"next": None}})
            return
        elif self.path.endswith("/sessions"):  # an experiment
            created = json.loads(body)
            self.sessions[created.get("name") or str(uuid.uuid4())] = created
            self._json({**_CREATED, "reference_dataset_id": None, **created})
            return
        elif self.path.endswith("/feedback"):
            self.feedback.append(json.loads(body))
        self._reply(b"{}")

    def _stored(self) -> dict[str, dict[str, Any]]:
        """Every run received, by id, as the API returns runs: :func:`merged`, with each
        run's trace and project."""
        runs = merged(self.received, self.feedback)
        for run in runs.values():
            run.setdefault("trace_id", run["id"])
            run["session_id"] = project_id(run.get("session_name") or DEFAULT_PROJECT)
        return runs

    def _session(self, name: str) -> dict[str, Any]:
        known = self.sessions.get(name) or {"id": project_id(name), "name": name}
        return {**_CREATED, "reference_dataset_id": None, **known}

    def _query(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        """The recorded runs a ``list_runs`` query asks for: by trace, root, project, id."""
        runs = list(self._stored().values())
        traces, ids = query.get("trace"), query.get("id")
        if traces is not None:
            wanted = {str(t) for t in (traces if isinstance(traces, list) else [traces])}
            runs = [run for run in runs if str(run.get("trace_id")) in wanted]
        if ids is not None:
            runs = [run for run in runs if run["id"] in {str(i) for i in ids}]
        if query.get("is_root"):
            runs = [run for run in runs if not run.get("parent_run_id")]
        if query.get("session"):
            wanted = {str(s) for s in query["session"]}
            runs = [run for run in runs if run["session_id"] in wanted]
        return sorted(runs, key=lambda run: str(run.get("start_time")))

    def do_PATCH(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/sessions/"):  # an experiment ends
            self._json(self._session(DEFAULT_PROJECT))
            return
        self.received.append(("patch", {**json.loads(body), "id": self.path.rsplit("/", 1)[-1]}))
        self._reply(b"{}")


DEFAULT_PROJECT = "loop-guard-tests"
_CREATED = {
    "tenant_id": str(uuid.UUID(int=1)),
    "start_time": "2026-01-01T00:00:00+00:00",
    "created_at": "2026-01-01T00:00:00+00:00",
}


def project_id(name: str) -> str:
    """The id the stand-in gives the project ``name`` (the same every time)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"project:{name}"))


PROJECT_ID = project_id(DEFAULT_PROJECT)
"""The id of the tests' project (``LANGSMITH_PROJECT``), where the runs are traced."""


class LangSmithService:
    """The stand-in, started, with the SDK's environment pointing at it (see the module)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        """``("post" | "patch", run)`` in the order the SDK sent them."""
        self.feedback: list[dict[str, Any]] = []
        """Every feedback entry the SDK created, in order."""
        shared = {"received": self.received, "feedback": self.feedback, "sessions": {}}
        handler_class = type("Service", (_Service,), shared)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        monkeypatch.setenv("LANGSMITH_TRACING", "true")
        monkeypatch.setenv("LANGSMITH_ENDPOINT", f"http://127.0.0.1:{self._server.server_port}")
        monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-dummy-key-for-a-loopback-service")
        monkeypatch.setenv("LANGSMITH_PROJECT", DEFAULT_PROJECT)
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
    for _, run in list(received):
        runs.setdefault(str(run["id"]), {}).update({k: v for k, v in run.items() if v is not None})
    scores: dict[str, dict[str, list[float]]] = {}
    for given in list(feedback):
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
        "project_id": run.get("session_id") or PROJECT_ID,
    }
    return {key: full[key] for key in ("id", *selects) if full.get(key) is not None}
