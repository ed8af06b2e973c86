"""A loopback stand-in for the LangSmith service, for tests of what the real SDK sends.

An ``http.server`` thread on 127.0.0.1 answers ``/info`` and records every run the ``langsmith``
SDK creates (``POST``) or updates (``PATCH``), batched or not; the environment points the SDK
at it for the duration. Nothing leaves the machine::

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

__all__ = ["LangSmithService", "forget_environment"]

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

    def do_GET(self) -> None:
        self._reply(json.dumps(_INFO if self.path.startswith("/info") else {}).encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/runs/batch"):
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
        handler_class = type("Service", (_Service,), {"received": self.received})
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
        runs: dict[str, dict[str, Any]] = {}
        for _, run in self.received:
            runs.setdefault(str(run["id"]), {}).update(
                {k: v for k, v in run.items() if v is not None}
            )
        return runs


def forget_environment() -> None:
    """After the environment is restored: the SDK reads it afresh (no cached tracing switch,
    endpoint or client), so later runs are not traced into a stopped stand-in."""
    ls_utils.get_env_var.cache_clear()
    ls_utils.get_tracer_project.cache_clear()
    run_trees._CLIENT = None
