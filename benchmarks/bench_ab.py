"""Before and after: one integration of an earlier commit against this checkout's, on the apps of
``bench_apps.py``, in the same rounds, next to the same no-op floor.

    python benchmarks/bench_ab.py REV [handler|node|middleware] [--rounds N] [--async] [--cpu]

A speed-only change is judged by it: two sittings of ``run.py --only apps`` on this kind of
shared machine differ by up to 0.06 on unchanged code, while the two sides of one round share
the machine's slow seconds. The package as committed at ``REV`` (``git archive``) is loaded
under another name, its message catalogs copied from this checkout's; each round runs every
app on three sides, the floor, ``REV``'s guard and this checkout's, streamed side by side as
``bench_apps.py`` does. With ``--cpu`` a side's time is the process's CPU time instead of the
wall clock (threads included: a sync app's tools run on worker threads), which a busy neighbour
on the machine does not lengthen.

Prints, per round median with its IQR/2: this checkout against ``REV``, and each against the
floor, with the added time per model call.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import logging
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_apps
from bench_apps import Side

import langchain_loop_guard

PACKAGE = "langchain_loop_guard"
EARLIER = "loop_guard_earlier"
"""The name the earlier commit's package is loaded under."""


def load_earlier(rev: str, into: Path) -> Any:
    """The package as committed at ``rev``, importable as :data:`EARLIER` from ``into``.

    Raises:
        ValueError: not inside a git checkout, or ``rev`` names no commit with the package.
    """
    found = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        msg = "bench_ab.py reads the earlier commit from git: run it inside a git checkout"
        raise ValueError(msg)
    archived = subprocess.run(
        ["git", "archive", rev, PACKAGE], capture_output=True, check=False, cwd=found.stdout.strip()
    )
    if archived.returncode != 0:
        reason = archived.stderr.decode(errors="replace").strip().splitlines()[-1:]
        msg = f"git has no {PACKAGE}/ at {rev!r}: {' '.join(reason) or 'git archive failed'}"
        raise ValueError(msg)
    archive = archived.stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(into, filter="data")
        else:  # pragma: no cover - our own commit's files
            tar.extractall(into)
    package = into / EARLIER
    (into / PACKAGE).rename(package)
    for source in package.rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        source.write_text(text.replace(PACKAGE, EARLIER), encoding="utf-8")
    catalogs = Path(langchain_loop_guard.__file__).parent / "locales"
    for compiled in catalogs.rglob(f"{PACKAGE}.mo"):
        target = package / "locales" / compiled.relative_to(catalogs).parent / f"{EARLIER}.mo"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(compiled, target)
    sys.path.insert(0, str(into))
    return importlib.import_module(EARLIER)


def sides(integration: str, earlier: Any) -> tuple[list[Side], dict[str, Any]]:
    """The floor, the earlier guard and this checkout's, and the apps they run."""
    made = bench_apps.make_sides()
    now = made[integration]
    if integration == "handler":
        before = Side("earlier", callbacks=[earlier.LoopGuardCallbackHandler()])
        apps = {**bench_apps.AGENT_APPS, **bench_apps.GRAPH_APPS}
    elif integration == "node":
        before = Side("earlier", node=earlier.LoopGuardNode())
        apps = bench_apps.GRAPH_APPS
    else:
        before = Side("earlier", middleware=[earlier.LoopGuardMiddleware()])
        apps = bench_apps.AGENT_APPS
    current = Side("this checkout", now.callbacks, now.middleware, now.node)
    return [made[f"{integration} floor"], before, current], apps


def main() -> None:
    """Compare an earlier commit's integration with this checkout's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the earlier commit (any git revision)")
    parser.add_argument("integration", nargs="?", default="handler")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="time the process's CPU, not the wall")
    args = parser.parse_args()
    if args.integration not in ("handler", "node", "middleware"):
        parser.error(f"integration must be handler, node or middleware, not {args.integration!r}")
    for name in (PACKAGE, EARLIER):
        logging.getLogger(name).propagate = False
    with tempfile.TemporaryDirectory() as scratch:
        try:
            earlier = load_earlier(args.rev, Path(scratch))
        except ValueError as exc:
            parser.error(str(exc))
        three, apps = sides(args.integration, earlier)
        loop = asyncio.new_event_loop() if args.use_async else None
        clock = time.process_time_ns if args.cpu else time.perf_counter_ns
        timings = bench_apps.measure(apps, three, args.rounds, loop, clock)
    floor, before, current = (side.name for side in three)
    timed = "CPU" if args.cpu else "wall"
    mode = "async" if args.use_async else "sync"
    print(f"{args.integration}, {mode}, {timed} time, median of {args.rounds} rounds:")
    for subject, baseline in ((current, before), (before, floor), (current, floor)):
        ratio, spread, _, _ = bench_apps.ratio_over_apps(timings, subject, baseline)
        added = bench_apps.added_per_call(timings, subject, baseline)
        print(
            f"  {subject} vs {baseline}: {ratio:.3f}x (IQR ±{spread:.3f}), "
            f"{added:+,.0f} µs per model call"
        )


if __name__ == "__main__":
    main()
