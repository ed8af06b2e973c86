"""Realistic agents for SPEC §13 (v4): pollers that pace themselves, long views that grow,
replies in a template after new work, retries a human asked for; and the loops a too strict
or too loose notion of "the same" hides: time passing, volatile fields, the same outcome
under new arguments, errors returned as text, a plan reworded, a page that only ticks.

The classes and :func:`drive` are ``conversations.py``'s (a scenario carries the
configuration its app passes, ``volatile_fields`` say). The tools return what real tools
return (``kubectl``, ``gh run view``, ``npm install``, LangChain's SQL tool, a search API's
JSON, a browser agent's page text), and every row comes in several shapes so that no rule
fitted to one string passes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

from conversations import Scenario, Tool, Turn, User, call
from langchain_core.tools import ToolException


def _outputs(outputs: Sequence[str]) -> Tool:
    """A tool returning ``outputs`` one call after another."""
    produced: Iterator[str] = iter(outputs)
    return lambda **_: next(produced)


def _clock(start: int, step: int) -> Iterator[str]:
    """ISO moments ``step`` seconds apart, as an API stamps its answers."""
    second = start
    while True:
        yield f"2026-12-04T16:{second // 60 % 60:02d}:{second % 60:02d}Z"
        second += step


# --- N10: pacing -------------------------------------------------------------------------------


def _job_progress(rounds: int) -> list[str]:
    """A job's status JSON, from queued to done over ``rounds`` polls."""
    percents = [3, 12, 19, 27, 35, 44, 52, 61, 70, 78, 86, 93, 97, 99][: rounds - 1]
    stamps = _clock(131, 31)
    outputs = [
        json.dumps(
            {
                "job_id": "job_4821",
                "state": "running",
                "progress": f"{p}%",
                "records_processed": p * 1184,
                "updated_at": next(stamps),
            }
        )
        for p in percents
    ]
    outputs.append(
        json.dumps(
            {"job_id": "job_4821", "state": "done", "progress": "100%", "records_processed": 118400}
        )
    )
    return outputs


def sleep_poller(rounds: int = 12, *, slept: str = "", backoff: bool = False) -> Scenario:
    """N10: ``sleep`` then ``job_status``, ``rounds`` times; ``sleep`` prints ``slept`` (bash's
    nothing, or a tool's "slept 30s"), with ``backoff`` its seconds double up to a cap of 30."""
    script: list[Turn | User] = [User("Reindex the catalog and tell me when it is done.")]
    script.append(call("start_job", kind="reindex", index="catalog"))
    for n in range(rounds):
        seconds = min(30, 2 ** (n + 1)) if backoff else 30
        script.append(call("sleep", seconds=seconds))
        script.append(call("job_status", job_id="job_4821"))
    script.append(Turn(text="The catalog reindex finished: 118,400 records."))
    shape = f"{'backoff' if backoff else 'fixed'}-{'said' if slept else 'silent'}"
    return Scenario(
        f"sleep-poller-{rounds}-{shape}",
        script,
        {
            "start_job": lambda **_: json.dumps({"job_id": "job_4821", "state": "queued"}),
            "sleep": lambda seconds: slept.format(seconds=seconds),
            "job_status": _outputs(_job_progress(rounds)),
        },
    )


def _deployment(updated: int, ready: int, replicas: int = 20) -> str:
    """``get_deployment``'s JSON: a Kubernetes Deployment's status mid-rollout."""
    done = updated == ready == replicas
    return json.dumps(
        {
            "name": "checkout",
            "namespace": "prod",
            "image": "registry.example.com/checkout:2.14.0",
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": replicas - ready,
            "conditions": [
                {"type": "Available", "status": "True" if ready >= replicas - 5 else "False"},
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                },
            ],
        },
        indent=2,
    )


def rollout_waiter(step: int = 2, *, waits: Sequence[int] = (15, 30, 30, 45)) -> Scenario:
    """N10: ``wait_for(seconds=…)`` then ``get_deployment``, the rollout ``step`` replicas
    further each time, until all 20 are updated and ready."""
    script: list[Turn | User] = [User("Roll checkout out to 2.14.0 and watch it.")]
    states = [
        (min(20, n * step), max(0, min(20, (n - 1) * step))) for n in range(1, 20 // step + 2)
    ]
    outputs = [_deployment(updated, ready) for updated, ready in states]
    for n in range(len(outputs)):
        script.append(call("wait_for", seconds=waits[n % len(waits)]))
        script.append(call("get_deployment", deployment="checkout", namespace="prod"))
    script.append(Turn(text="checkout 2.14.0 is rolled out: 20/20 ready."))
    return Scenario(
        f"rollout-waiter-step{step}",
        script,
        {
            "wait_for": lambda seconds: f"waited {seconds}s",
            "get_deployment": _outputs(outputs),
        },
    )


# --- N11: long outputs that grow --------------------------------------------------------------


def _pods(running: int, total: int = 20, *, poll: int = 0) -> str:
    rng = random.Random(7)
    names = [f"web-6c9f7d8b5-{''.join(rng.choices('bcdfghjklmnpqrstvwxz2456789', k=5))}"]
    names += [
        f"web-6c9f7d8b5-{''.join(rng.choices('bcdfghjklmnpqrstvwxz2456789', k=5))}"
        for _ in range(total - 1)
    ]
    rows = ["NAME                  READY   STATUS              RESTARTS   AGE"]
    for n, name in enumerate(names):
        age = 20 + poll * 10 + (total - n)
        ready, status = ("1/1", "Running") if n < running else ("0/1", "ContainerCreating")
        rows.append(f"{name}   {ready}     {status:<19} 0          {age}s")
    return "\n".join(rows)


def pods_rollout(per_poll: int = 4, total: int = 20) -> Scenario:
    """N11: ``kubectl get pods`` on a ``total``-pod rollout, ``per_poll`` more ``Running``
    each poll: most of the 20+ lines stay, a few are new."""
    outputs = [
        _pods(min(total, n * per_poll), total, poll=n) for n in range(-(-total // per_poll) + 1)
    ]
    command = "kubectl get pods -l app=web -n prod"
    return Scenario(
        f"pods-rollout-{total}x{per_poll}",
        [
            User("Watch the web rollout until every pod is up."),
            *[call("bash", command=command) for _ in outputs],
            Turn(text=f"All {total} web pods are Running."),
        ],
        {"bash": _outputs(outputs)},
    )


_STEPS = [
    "Set up job",
    "Run actions/checkout@v4",
    "Set up Python 3.12",
    "Restore pip cache",
    "Install dependencies",
    "Install the package",
    "Ruff",
    "Ruff format",
    "Mypy",
    "Compile translations",
    "Unit tests (core)",
    "Unit tests (integrations)",
    "Doc tests",
    "Notebook tests",
    "Coverage report",
    "Build sdist and wheel",
    "Check wheel contents",
    "Upload artifacts",
    "Post Restore pip cache",
    "Post Run actions/checkout@v4",
    "Complete job",
]


def _gh_run(done: int) -> str:
    state = "✓" if done >= len(_STEPS) else "*"
    rows = [
        f"{state} main CI · 12088841937",
        "Triggered via push about 3 minutes ago",
        "",
        "JOBS",
        f"{state} test (ubuntu-latest, 3.12) (ID 33702286501)",
    ]
    for n, step in enumerate(_STEPS):
        mark = "✓" if n < done else ("*" if n == done else "-")
        rows.append(f"  {mark} {step}")
    rows += ["", "For more information about a job, try: gh run view --job=<job-id>"]
    rows.append("View this run on GitHub: https://github.com/acme/shop/actions/runs/12088841937")
    return "\n".join(rows)


def gh_run_watch(per_poll: int = 2) -> Scenario:
    """N11: ``gh run view`` (25+ lines), ``per_poll`` more steps ✓ each poll."""
    outputs = [_gh_run(done) for done in range(0, len(_STEPS) + per_poll, per_poll)]
    command = "gh run view 12088841937"
    return Scenario(
        f"gh-run-view-{per_poll}",
        [
            User("Is CI green on main?"),
            *[call("bash", command=command) for _ in outputs],
            Turn(text="CI on main passed."),
        ],
        {"bash": _outputs(outputs)},
    )


def _feed() -> list[str]:
    """80 posts of a social feed, each a different person and story."""
    rng = random.Random(11)
    people = ["Ana Lima", "Ben Okafor", "Chen Wei", "Dara Singh", "Eli Novak", "Fay Moreau"]
    people += ["Gus Berg", "Hana Sato"]
    topics = [
        "shipped the new billing export",
        "is hiring a staff SRE in Lisbon",
        "wrote about Postgres vacuum tuning",
        "moved to the platform team",
        "shared slides from PyCon",
        "is looking for beta testers",
        "posted a retro on the outage",
        "open-sourced a rate limiter",
        "celebrates five years at Acme",
        "asked about LangGraph checkpointers",
    ]
    posts = [f"{person} {topic}" for person in people for topic in topics]
    rng.shuffle(posts)
    return [
        f"{post} · {rng.randint(2, 59)}m · {rng.randint(0, 300)} reactions · "
        f"{rng.randint(0, 40)} comments"
        for post in posts
    ]


def scrolled_feed(view: int = 20, step: int = 5, scrolls: int = 12) -> Scenario:
    """N11: a browser agent scrolling a feed: the same ``scroll`` call, a ``view``-line view
    of which ``step`` lines are new each time."""
    posts = _feed()
    outputs = []
    for n in range(scrolls):
        lines = posts[n * step : n * step + view]
        outputs.append(
            "Scrolled down the page by one step.\nVisible content:\n"
            + "\n".join(f"[{i}] {line}" for i, line in enumerate(lines))
        )
    return Scenario(
        f"scrolled-feed-{view}-{step}",
        [
            User("Find posts from the last hour about hiring."),
            call("navigate", url="https://social.example.com/feed"),
            *[call("scroll", direction="down", amount=1) for _ in outputs],
            Turn(text="Two hiring posts in the last hour: Ben Okafor and Dara Singh."),
        ],
        {
            "navigate": lambda url: (
                f"Navigated to {url}\nVisible content:\n" + "\n".join(posts[:view])
            ),
            "scroll": _outputs(outputs),
        },
    )


def _build_log() -> list[str]:
    """A CMake build's output, one object per line: 60 sources of a small compiler."""
    folders = ["parser", "codegen", "runtime", "support", "driver"]
    files = ["lexer", "tokens", "ast", "visitor", "printer", "errors"]
    files += ["scope", "types", "constants", "builder", "passes", "emitter"]
    sources = [f"{folder}/{file}" for folder in folders for file in files]
    out = ["-- The CXX compiler identification is GNU 13.2.0", "-- Configuring done (0.4s)"]
    out.append("-- Generating done (0.1s)")
    for n, source in enumerate(sources):
        out.append(
            f"[{(n + 1) * 100 // len(sources):3d}%] Building CXX object "
            f"src/CMakeFiles/core.dir/{source}.cpp.o"
        )
    out.append("[100%] Linking CXX shared library libcore.so")
    out.append("[100%] Built target core")
    return out


def growing_build_log(per_poll: int = 4, *, tail: int | None = None) -> Scenario:
    """N11: ``cat build.log`` (or ``tail -n``) while a build writes to it, ``per_poll`` more
    lines each poll: the whole log so far, or its last ``tail`` lines."""
    log = _build_log()
    outputs = []
    for shown in range(20, len(log) + per_poll, per_poll):
        lines = log[: min(shown, len(log))]
        outputs.append("\n".join(lines[-tail:] if tail else lines))
    command = f"tail -n {tail} build.log" if tail else "cat build.log"
    log_view = iter(outputs)
    return Scenario(
        f"build-log-{per_poll}-{tail or 'all'}",
        [
            User("Build the library and tell me if it links."),
            call("bash", command="nohup cmake --build build -j2 > build.log 2>&1 &"),
            *[call("bash", command=command) for _ in outputs],
            Turn(text="libcore.so is built and linked."),
        ],
        {"bash": lambda command: "[1] 48213" if command.startswith("nohup") else next(log_view)},
    )


# --- N12: work reported in a template ----------------------------------------------------------

_RESERVATIONS = [
    ("H8Q05L", "one-way", "basic economy", "JFK", "SEA", "May 20", "HAT083"),
    ("Q4TT2B", "one-way", "basic economy", "ORD", "MIA", "May 22", "HAT146"),
    ("7DK9QZ", "round-trip", "economy", "LAX", "BOS", "May 24", "HAT201"),
    ("MX2P8R", "one-way", "basic economy", "SFO", "DEN", "May 27", "HAT038"),
    ("LL03VN", "one-way", "business", "ATL", "PHX", "June 2", "HAT275"),
    ("3ZB7WE", "round-trip", "basic economy", "SEA", "LAS", "June 9", "HAT112"),
]


def _reservation(reservation_id: str) -> str:
    rid, kind, cabin, origin, destination, date, flight = next(
        r for r in _RESERVATIONS if r[0] == reservation_id
    )
    return json.dumps(
        {
            "reservation_id": rid,
            "user_id": "sophia_silva_7557",
            "origin": origin,
            "destination": destination,
            "flight_type": kind.replace("-", "_"),
            "cabin": cabin.replace(" ", "_"),
            "flights": [{"flight_number": flight, "date": f"2024-{date}", "price": 87}],
            "passengers": [{"first_name": "Sophia", "last_name": "Silva", "dob": "1991-03-04"}],
            "payment_history": [{"payment_id": "credit_card_4421", "amount": 87}],
            "total_baggages": 0,
            "insurance": "no",
        }
    )


def reservation_reviews(count: int = 6) -> Scenario:
    """N12 (scope thread): the user asks about one reservation after another; each time the
    agent looks it up and answers in the same template."""
    script: list[Turn | User] = [User("Hi, I'm Sophia Silva, user id sophia_silva_7557.")]
    script.append(Turn(text="Hello Sophia! Which reservation can I help you with?"))
    for rid, kind, cabin, origin, destination, date, _ in _RESERVATIONS[:count]:
        script.append(User(f"Can you check reservation {rid}?"))
        script.append(call("get_reservation_details", reservation_id=rid))
        script.append(
            Turn(
                text=f"Thank you, Sophia. I've reviewed reservation {rid}: {kind}, {cabin}, "
                f"from {origin} to {destination} on {date}, one passenger, no checked bags "
                "and no travel insurance. What would you like to do with it?"
            )
        )
    return Scenario(
        f"reservation-reviews-{count}",
        script,
        {"get_reservation_details": _reservation},
        scope="thread",
    )


def _returns(text: str) -> Tool:
    return lambda **_: text


_ACTIONS: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "Add a checked bag to H8Q05L.",
        "update_reservation_baggages",
        {"reservation_id": "H8Q05L", "total_baggages": 1},
        '{"reservation_id": "H8Q05L", "total_baggages": 1, "nonfree_baggages": 1, "paid": 50}',
    ),
    (
        "Upgrade Q4TT2B to economy.",
        "update_reservation_flights",
        {"reservation_id": "Q4TT2B", "cabin": "economy"},
        '{"reservation_id": "Q4TT2B", "cabin": "economy", "paid": 93}',
    ),
    (
        "Cancel 3ZB7WE please.",
        "cancel_reservation",
        {"reservation_id": "3ZB7WE"},
        '{"reservation_id": "3ZB7WE", "status": "cancelled", "refund": 174}',
    ),
    (
        "Send me a certificate for the delay on MX2P8R.",
        "send_certificate",
        {"user_id": "sophia_silva_7557", "amount": 100},
        "Certificate certificate_3221322 added to user sophia_silva_7557 with amount 100.",
    ),
    (
        "Add my husband Noah to LL03VN.",
        "update_reservation_passengers",
        {"reservation_id": "LL03VN", "passengers": [{"first_name": "Noah", "last_name": "Silva"}]},
        '{"reservation_id": "LL03VN", "passengers": 2}',
    ),
    (
        "Change my email to sophia.silva@example.com.",
        "update_user",
        {"user_id": "sophia_silva_7557", "email": "sophia.silva@example.com"},
        '{"user_id": "sophia_silva_7557", "email": "sophia.silva@example.com"}',
    ),
    (
        "Book the same flight as H8Q05L for my mother on May 21.",
        "book_reservation",
        {"flight_number": "HAT083", "date": "2024-05-21", "cabin": "economy"},
        '{"reservation_id": "PW4R1N", "status": "confirmed", "paid": 91}',
    ),
    (
        "Add insurance to 7DK9QZ.",
        "update_reservation_insurance",
        {"reservation_id": "7DK9QZ", "insurance": "yes"},
        '{"reservation_id": "7DK9QZ", "insurance": "yes", "paid": 30}',
    ),
]


def happy_to_help(actions: int = 6) -> Scenario:
    """N12 (scope thread): "Happy to help!" after each different successful action."""
    script: list[Turn | User] = []
    for ask, name, args, _ in _ACTIONS[:actions]:
        script += [User(ask), call(name, **args), Turn(text="Happy to help!")]
    return Scenario(
        f"happy-to-help-{actions}",
        script,
        {name: _returns(result) for _, name, _, result in _ACTIONS},
        scope="thread",
    )


# --- N13: a retry the human asked for ----------------------------------------------------------


def _not_found(kind: str) -> Tool:
    def lookup(**arguments: Any) -> str:
        if kind == "raise":
            raise ToolException("Error: user not found")
        if kind == "json":
            return json.dumps({"error": "user not found", "code": 404})
        return f"Error: user {next(iter(arguments.values()))} not found"

    return lookup


def retry_on_request(failures: int = 3, *, kind: str = "raise") -> Scenario:
    """N13 (scope thread): the lookup fails, the user re-sends their id, the same lookup
    fails again: ``failures`` times, the agent answering differently each time. ``kind``:
    an exception, a JSON error or an error line returned as text (R13)."""
    asks = [
        "Hi, I need to change my flight. My user id is sophia_silva_7557.",
        "It's sophia_silva_7557, I'm sure of it.",
        "sophia_silva_7557. Please try again, I just logged in with it.",
        "Again: sophia_silva_7557.",
    ]
    replies = [
        "I couldn't find a user with the id sophia_silva_7557. Could you double-check it?",
        "I'm sorry, that id still doesn't match any account. Could you check the spelling, or "
        "give me the email address on your account?",
        "I tried once more and our system still has no account with that id. I can look you up "
        "by email or by a reservation number instead.",
        "Our records still show no such user. Let me transfer you to a colleague who can "
        "search by your name and date of birth.",
    ]
    script: list[Turn | User] = []
    for ask, reply in zip(asks[:failures], replies, strict=False):
        script += [
            User(ask),
            call("get_user_details", user_id="sophia_silva_7557"),
            Turn(text=reply),
        ]
    return Scenario(
        f"retry-on-request-{failures}-{kind}",
        script,
        {"get_user_details": _not_found(kind)},
        scope="thread",
    )


# --- R10: time passing only --------------------------------------------------------------------


def npm_install(polls: int = 5) -> Scenario:
    """R10: ``npm install`` with nothing left to install, its duration the only change."""
    outputs = [
        f"\nadded 0 packages, audited 312 packages in {s}s\n\n"
        "41 packages are looking for funding\n  run `npm fund` for details\n\n"
        "found 0 vulnerabilities"
        for s in (2, 3, 2, 4, 3, 2, 5)[:polls]
    ]
    return Scenario(
        f"npm-install-{polls}",
        [
            User("The build says a module is missing, fix it."),
            *[call("bash", command="npm install") for _ in outputs],
        ],
        {"bash": _outputs(outputs)},
    )


def pending_pod(ages: Sequence[str] = ("15s", "45s", "75s", "105s", "2m15s")) -> Scenario:
    """R10: a pod stuck in ``Pending``, its AGE the only change."""
    outputs = [
        "NAME                      READY   STATUS    RESTARTS   AGE\n"
        f"worker-5b8d7c9f4-qx7tz    0/1     Pending   0          {age}"
        for age in ages
    ]
    return Scenario(
        f"pending-pod-{ages[-1]}",
        [
            User("Why isn't the worker up?"),
            *[call("bash", command="kubectl get pod -l app=worker") for _ in outputs],
        ],
        {"bash": _outputs(outputs)},
    )


def pending_build(polls: int = 5, *, style: str = "iso") -> Scenario:
    """R10: a build ``{"status": "pending", "checked_at": …}`` whose moment moves: an ISO
    timestamp, a clock time, or a human "N seconds ago"."""
    stamps = _clock(5, 20)
    outputs = []
    for n in range(polls):
        if style == "iso":
            checked: Any = next(stamps)
        elif style == "clock":
            checked = f"16:{n * 2:02d}:{(n * 17) % 60:02d}"
        else:
            checked = f"{10 + n * 20}s ago"
        outputs.append(
            json.dumps(
                {
                    "build_id": "b-20931",
                    "pipeline": "release",
                    "status": "pending",
                    "position_in_queue": 4,
                    "checked_at": checked,
                }
            )
        )
    return Scenario(
        f"pending-build-{style}",
        [
            User("Ship the release build."),
            *[call("get_build", build_id="b-20931") for _ in outputs],
        ],
        {"get_build": _outputs(outputs)},
    )


# --- R11: volatile fields ----------------------------------------------------------------------


def _volatile(shape: str, n: int, rng: random.Random) -> str:
    if shape == "response_time":
        return json.dumps(
            {
                "query": "refund policy for opened items",
                "results": [],
                "response_time": round(rng.uniform(0.4, 2.5), 2),
                "request_id": f"srch_{rng.getrandbits(64):016x}",
            }
        )
    if shape == "took_ms":
        return json.dumps(
            {
                "hits": [],
                "total": 0,
                "took_ms": rng.randint(3, 90),
                "trace": f"t-{rng.getrandbits(24)}",
            }
        )
    if shape == "took":  # Elasticsearch
        return json.dumps(
            {
                "took": rng.randint(1, 40),
                "timed_out": False,
                "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
                "hits": {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []},
            }
        )
    if shape == "elapsed":
        return json.dumps(
            {"rows": [], "row_count": 0, "elapsed": round(rng.uniform(0.001, 0.09), 4)}
        )
    if shape == "at":
        return json.dumps(
            {
                "matches": [],
                "indexed_docs": 4120,
                "served_at": 1733328000 + n * 7,
                "cache_expires_at": 52000 + n * 31,
            }
        )
    if shape == "cursor":
        token = "".join(
            rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", k=24)
        )
        return json.dumps({"items": [], "has_more": False, "next_cursor": f"eyJ{token}"})
    raise ValueError(shape)


VOLATILE_SHAPES = ("response_time", "took_ms", "took", "elapsed", "at", "cursor")


def volatile_search(shape: str, searches: int = 5) -> Scenario:
    """R11: the same search, empty every time, its answer differing only in a latency, a
    request id, a moment or a paging cursor."""
    rng = random.Random(shape)
    counter = iter(range(100))
    return Scenario(
        f"volatile-{shape}",
        [
            User("What is the refund policy for opened items?"),
            *[call("search", query="refund policy for opened items") for _ in range(searches)],
        ],
        {"search": lambda query: _volatile(shape, next(counter), rng)},
    )


_DOCS = [
    ("kb-118", "Returns and refunds", "Unused items can be returned within 30 days of delivery."),
    ("kb-203", "Opened or used items", "Opened items are refunded only when they are faulty."),
    ("kb-077", "Refund timing", "Refunds reach the original payment method in 5-7 business days."),
    ("kb-342", "Store credit", "Store credit is issued the day the return is received."),
    ("kb-019", "Return labels", "Prepaid labels are emailed once a return is approved."),
]


def scored_docs(searches: int = 5) -> Scenario:
    """R11 with a field only the user knows is noise: ``search_docs`` scores jitter between
    calls (``volatile_fields={"search_docs": ["score"]}``)."""
    rng = random.Random(3)

    def search_docs(query: str, k: int = 5) -> str:
        return json.dumps(
            [
                {"id": i, "title": t, "snippet": s, "score": round(rng.uniform(0.6, 0.9), 3)}
                for i, t, s in _DOCS[:k]
            ]
        )

    return Scenario(
        "scored-docs",
        [
            User("Can I return an opened blender?"),
            *[call("search_docs", query="return opened item", k=5) for _ in range(searches)],
        ],
        {"search_docs": search_docs},
        config={"volatile_fields": {"search_docs": ["score"]}},
    )


def rendered_dashboard(renders: int = 5) -> Scenario:
    """R11 with a global user-named field: a dashboard whose ``render_id`` counts renders
    (``volatile_fields=["render_id"]``)."""
    counter = iter(range(40, 99))

    def render_dashboard(dashboard: str, range_: str = "24h") -> str:
        return json.dumps(
            {
                "dashboard": dashboard,
                "render_id": next(counter),
                "panels": [
                    {"title": "Checkout errors", "series": [], "note": "No data"},
                    {"title": "p95 latency", "series": [], "note": "No data"},
                ],
            }
        )

    return Scenario(
        "rendered-dashboard",
        [
            User("Show me checkout errors for today."),
            *[call("render_dashboard", dashboard="checkout", range_="24h") for _ in range(renders)],
        ],
        {"render_dashboard": render_dashboard},
        config={"volatile_fields": ["render_id"]},
    )


# --- R12: the same outcome whatever the arguments ----------------------------------------------

_QUERIES = [
    "refund for an opened blender",
    "can I return a used kitchen appliance",
    "return policy opened box",
    "opened item refund eligibility",
    "blender return after opening",
    "refund rules for items already used",
    "is an unsealed product returnable",
    "kitchen appliance refund opened",
]


def same_hits(queries: int = 8, *, masked: bool = False) -> Scenario:
    """R12: reworded queries bringing back the same top-5 hits (byte-identical, or equal once
    the answer's request id is masked)."""
    rng = random.Random(5)

    def search_kb(query: str) -> str:
        hits = [{"id": i, "title": t, "snippet": s} for i, t, s in _DOCS]
        if not masked:
            return json.dumps(hits)
        return json.dumps({"hits": hits, "request_id": f"req_{rng.getrandbits(48):012x}"})

    return Scenario(
        f"same-hits-{queries}-{'masked' if masked else 'bytes'}",
        [
            User("Can I get a refund for a blender I already opened?"),
            *[call("search_kb", query=q) for q in _QUERIES[:queries]],
        ],
        {"search_kb": search_kb},
    )


_PAGE = """Clicked element: <button> Load more results
Current URL: https://shop.example.com/search?q=standing+desk
Page title: standing desk - Shop
Visible content:
Filters: Price | Brand | Width | Height range | Rating
Showing 24 of 312 results for "standing desk"
Flexi Pro 140 - $329 - 4.6 stars (1,204 reviews)
Uplift V2 Commercial - $599 - 4.8 stars (3,410 reviews)
Fezibo Electric 120 - $189 - 4.3 stars (8,022 reviews)
Vari Essential 48 - $395 - 4.5 stars (655 reviews)
[Load more results]"""


def reindexed_clicks(clicks: int = 8, *, start: int = 12) -> Scenario:
    """R12: a browser agent clicking "Load more" under a new index each render; the page
    never changes."""
    indices = [start + 2 * n + n % 2 for n in range(clicks)]
    return Scenario(
        f"reindexed-clicks-{start}",
        [
            User("Find me a standing desk under $300 with 4.5 stars or more."),
            *[call("click", index=i) for i in indices],
        ],
        {"click": lambda index: _PAGE},
    )


# --- R13: errors returned as text --------------------------------------------------------------


def _sql_error(query: str) -> str:
    shown = query.strip()
    return (
        "Error: (sqlite3.OperationalError) no such column: custmer_id\n"
        f"[SQL: {shown}]\n"
        "(Background on this error at: https://sqlalche.me/e/20/e3q8)"
    )


def sql_no_such_column(tries: int = 5) -> Scenario:
    """R13: LangChain's ``sql_db_query`` returning the error as text, for the same query with
    a trailing ``;`` or newline changed."""
    base = "SELECT name, SUM(total) FROM orders WHERE custmer_id = 42 GROUP BY name"
    variants = [base, base + ";", base + "\n", base + " ;", "\n" + base + ";\n", base + "  "]
    return Scenario(
        "sql-no-such-column",
        [
            User("How much has customer 42 spent, per product?"),
            call("sql_db_list_tables"),
            *[call("sql_db_query", query=q) for q in variants[:tries]],
        ],
        {
            "sql_db_list_tables": lambda: "customers, order_items, orders, products",
            "sql_db_query": _sql_error,
        },
    )


def _psql(query: str) -> str:
    return (
        'ERROR:  column "createdat" does not exist\n'
        f"LINE 1: {query.strip()[:60]}\n"
        '               ^\nHINT:  Perhaps you meant to reference the column "events.created_at".'
    )


def _traceback(code: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "<stdin>", line 3, in <module>\n'
        '  File "/usr/lib/python3.12/json/__init__.py", line 293, in load\n'
        "    return loads(fp.read(),\n"
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    )


def _json_error(**_: Any) -> str:
    return json.dumps(
        {"error": "invalid_grant", "error_description": "Refresh token expired or revoked"}
    )


def _status_error(**_: Any) -> str:
    return json.dumps(
        {"status": "error", "code": "RATE_LIMITED", "message": "Too many requests for this key"}
    )


TEXT_ERRORS = ("psql", "traceback", "json-error", "status-error")


def text_errors(kind: str, tries: int = 5, *, identical: bool = False) -> Scenario:
    """R13: a tool that reports failure in its text: ``ERROR: …``, a Python traceback, a
    JSON ``{"error": …}`` or ``{"status": "error", …}``; the call varies a little each try
    (or, with ``identical``, not at all)."""
    if kind == "psql":
        name, arg = "run_sql", "query"
        values = [
            "SELECT createdat, kind FROM events ORDER BY createdat DESC LIMIT 20",
            "SELECT createdat, kind FROM events ORDER BY createdat DESC LIMIT 20;",
            "select createdat, kind from events order by createdat desc limit 20",
            "SELECT createdat, kind FROM events ORDER BY 1 DESC LIMIT 20",
            "SELECT createdat,kind FROM events ORDER BY createdat DESC LIMIT 20",
        ]
        tool: Tool = _psql
    elif kind == "traceback":
        name, arg = "python", "code"
        values = [
            "import json\nwith open('out.json') as f:\n    data = json.load(f)",
            "import json\nwith open('out.json') as f:\n    data = json.load(f)\nprint(data)",
            "import json\nf = open('out.json')\ndata = json.load(f)",
            "import json\nwith open('./out.json') as f:\n    data = json.load(f)",
            "import json\nwith open('out.json', 'r') as f:\n    data = json.load(f)",
        ]
        tool = _traceback
    elif kind == "json-error":
        name, arg = "refresh_token", "client"
        values = ["crm", "crm-prod", "crm ", "CRM", "crm_prod"]
        tool = _json_error
    else:
        name, arg = "send_sms", "to"
        values = [
            "+14155550123",
            "+1 415 555 0123",
            "+1-415-555-0123",
            "14155550123",
            "+14155550123 ",
        ]
        tool = _status_error
    if identical:
        values = [values[0]] * len(values)
    return Scenario(
        f"text-error-{kind}{'-identical' if identical else ''}",
        [User("Please get this done."), *[call(name, **{arg: v}) for v in values[:tries]]],
        {name: tool},
    )


# --- R14: the same plan, reworded --------------------------------------------------------------

PLANS = {
    "sql-plan": [
        "Plan: first I will query the orders table for Q3 totals, then group them by region, "
        "then compare each region with Q2 and chart the difference.",
        "Plan: first I will query the orders table for the Q3 totals, then group them by "
        "region, then compare every region with Q2 and chart the differences.",
        "My plan: first I'll query the orders table for Q3 totals, then group them by region, "
        "then compare each region against Q2 and chart the difference.",
        "Plan: I will first query the orders table for Q3 totals, group them by region, then "
        "compare each region with Q2 and then chart the difference.",
        "Plan: first query the orders table for Q3 totals, then group them by region, then "
        "compare each region with Q2, and chart the difference.",
        "Plan: first I will query the orders table for Q3 totals, then group by region, then "
        "compare each region with Q2 and chart the difference for you.",
    ],
    "research-outline": [
        "To answer this I will search for recent benchmarks of vector databases, read the top "
        "three reports, and summarise latency and recall for each of them.",
        "To answer this I'll search for recent benchmarks of vector databases, read the top "
        "three reports, and then summarise latency and recall for each one.",
        "To answer this, I will search for recent vector database benchmarks, read the top "
        "three reports and summarise the latency and recall of each of them.",
        "To answer this I will search recent benchmarks of vector databases, read the three "
        "top reports, and summarise latency and recall for each of them.",
        "To answer this I will look for recent benchmarks of vector databases, read the top "
        "three reports, and summarise latency and recall for each of them.",
        "To answer this I will search for recent benchmarks of vector databases, read the top "
        "three reports, and summarise recall and latency for each of them.",
    ],
    "invoice-search": [
        "I could not find the March invoice in the billing system, so I will check the "
        "archive next and report back with what I find there.",
        "I could not find the March invoice in the billing system, so I will check the "
        "archive next and report back with whatever I find there.",
        "I could not find the March invoice in our billing system, so I will check the "
        "archive next and report back with what I find there.",
        "I could not find the March invoice in the billing system, so next I will check the "
        "archive and report back with what I find there.",
        "I could not locate the March invoice in the billing system, so I will check the "
        "archive next and report back with what I find there.",
        "I could not find the March invoice in the billing system, so I will search the "
        "archive next and report back with what I find there.",
    ],
    "next-step": [
        "Next step: I should check the deployment logs for the checkout service to find why "
        "the pods crash.",
        "Next step: I should check the checkout service's deployment logs to find out why the "
        "pods crash.",
        "The next step: I should check the deployment logs of the checkout service to find why "
        "its pods crash.",
        "Next step: I need to check the deployment logs for the checkout service to see why "
        "the pods crash.",
        "Next step: I should look at the deployment logs for the checkout service to find why "
        "the pods crash.",
        "Next step: I should check the deployment logs for the checkout service and find why "
        "the pods keep crashing.",
    ],
}


def reworded_plan(shape: str, answers: int = 6, *, scope: str = "run") -> Scenario:
    """R14: a model answering without tools, each answer nearly the one before (most of its
    words shared), nothing new from a tool or a human between."""
    return Scenario(
        f"reworded-{shape}-{scope}",
        [User("How did Q3 go by region?"), *[Turn(text=t) for t in PLANS[shape][:answers]]],
        {},
        scope="thread" if scope == "thread" else "run",
    )


# --- R15: a page that only ticks ---------------------------------------------------------------

_BANNERS = [
    "Holiday hours: support closes at 3 pm on Dec 24.",
    "New: track your return from the Orders page.",
    "Tip: most questions are answered in our Help Center.",
    "Black Friday deals end Sunday at midnight.",
]


def _support_page(banner: str, online: int) -> str:
    rows = [
        "Clicked element: <button id='chat-submit'> Send",
        "Current URL: https://help.example.com/chat",
        f"Banner: {banner}",
        "Acme Help Center",
        "Home | Orders | Returns | Account | Contact us",
        f"{online} agents online",
        "Chat with us",
        "Your message: I want to return order 1050",
        "Status: Your message could not be sent. Please sign in to chat with an agent.",
        "[Sign in] [Create account]",
        "Popular articles:",
        "  - How do I start a return?",
        "  - Where is my refund?",
        "  - Can I change my shipping address?",
        "  - What is the warranty on electronics?",
        "  - How do I use store credit?",
        "Still need help? Call 1-800-555-0199 (Mon-Fri 8am-8pm ET).",
        "Order status | Returns portal | Gift cards | Accessibility",
        "Privacy | Terms | Cookie settings",
        "Follow us: Twitter | Instagram | YouTube",
        "Download our app: iOS | Android",
        "Language: English (US)",
        "Region: United States",
        "Acme Inc., 100 Market St, San Francisco, CA",
        "© Acme Inc. All rights reserved.",
    ]
    return "\n".join(rows)


def ticking_page(banners: int = 3, clicks: int = 10, *, seed: int = 0) -> Scenario:
    """R15: the same click, the same 25-line page but for a banner rotating over ``banners``
    lines and an "N agents online" counter."""
    rng = random.Random(seed)
    counter = iter(range(100))

    def click(selector: str) -> str:
        n = next(counter)
        return _support_page(_BANNERS[n % banners], rng.randint(8, 19))

    return Scenario(
        f"ticking-page-{banners}-seed{seed}",
        [
            User("Ask support to start a return for order 1050."),
            *[call("click", selector="#chat-submit") for _ in range(clicks)],
        ],
        {"click": click},
    )
