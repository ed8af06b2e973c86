"""Realistic agents for SPEC §12: the everyday work of LangGraph apps, and the loops only a
whole run or a conversation shows.

Each :class:`Scenario` is a script of model turns and user messages, and the tools it calls:
plain Python functions that return the text real tools return (flight searches answering
``[]``, a CI run whose step counter moves, ``kubectl get pod``, a log tail, a write that
prints nothing, ``apt-get`` timing out without a network). The same scenario drives the pure
detector (:func:`drive`) and real agents (``tests/test_beyond_coding_agents.py``). Every row
comes in several shapes (lengths, orders, tools), so that a rule fitted to one string fails.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.tools import ToolException

from langchain_loop_guard import LoopDetector, LoopGuardConfig, Verdict

Tool = Callable[..., str]
"""A tool: keyword arguments in, the text a real tool returns out (``ToolException`` when it
fails)."""


@dataclass(frozen=True)
class Turn:
    """One model turn: the calls it makes (several: a fan-out), or a reply without calls."""

    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    text: str = ""


@dataclass(frozen=True)
class User:
    """A new human message."""

    text: str


@dataclass
class Scenario:
    """A script and its tools; ``scope`` is how an integration would guard it."""

    name: str
    script: list[Turn | User]
    tools: dict[str, Tool]
    scope: Literal["run", "thread"] = "run"
    config: dict[str, Any] = field(default_factory=dict)
    """The ``LoopGuardConfig`` values its app passes besides ``scope`` (``volatile_fields``)."""

    def calls(self) -> int:
        return sum(len(step.calls) for step in self.script if isinstance(step, Turn))


@dataclass
class Outcome:
    """What :func:`drive` saw: the first stop (if any), and how far the script got."""

    stop: Verdict | None = None
    turns: int = 0
    calls: int = 0
    executed: list[str] = field(default_factory=list)


def drive(scenario: Scenario, **config: Any) -> Outcome:
    """Run ``scenario`` through a :class:`LoopDetector` the way an agent loop feeds one: a
    turn starts, the model answers, its calls run (a fan-out's calls all start before their
    results come back, as a tool node runs them), a user message releases or resets."""
    values = {**scenario.config, **config}
    detector = LoopDetector(LoopGuardConfig(scope=scenario.scope, **values), clock=lambda: 0.0)
    seen = Outcome()
    ids = iter(range(1, 1_000_000))

    def stopped(verdict: Verdict) -> bool:
        if verdict.stops and seen.stop is None:
            seen.stop = verdict
        return verdict.stops

    for step in scenario.script:
        if isinstance(step, User):
            detector.user_message(step.text) if scenario.scope == "thread" else detector.reset()
            continue
        seen.turns += 1
        if stopped(detector.turn_start()):
            return seen
        if stopped(detector.assistant_message(step.text, list(step.calls))):
            return seen
        started = []
        for name, args in step.calls:
            call_id = f"call_{next(ids)}"
            if stopped(detector.tool_call(name, args, call_id=call_id)):
                return seen
            started.append((name, args, call_id))
        for name, args, call_id in started:
            seen.calls += 1
            seen.executed.append(name)
            try:
                output = scenario.tools[name](**args)
            except ToolException as error:
                verdict = detector.tool_result(name, error=str(error), call_id=call_id)
            else:
                verdict = detector.tool_result(name, output, call_id=call_id)
            if stopped(verdict):
                return seen
    return seen


def call(name: str, **args: Any) -> Turn:
    return Turn(((name, args),))


def fan_out(name: str, arguments: Sequence[dict[str, Any]], text: str = "") -> Turn:
    return Turn(tuple((name, args) for args in arguments), text)


# --- N6: fan-out ------------------------------------------------------------------------------

_AIRPORTS = ["JFK", "LAX", "SFO", "ORD", "ATL", "SEA", "DEN", "BOS", "MIA", "PHX", "LAS", "IAH"]


def _flight_table(seed: int, served: set[tuple[str, str]]) -> Tool:
    """``search_direct_flight``: the flights of a route on a date, as the airline API's JSON
    (``[]`` for a route nobody flies)."""
    rng = random.Random(seed)

    def search_direct_flight(origin: str, destination: str, date: str) -> str:
        if (origin, destination) not in served:
            return "[]"
        flights = []
        for _ in range(rng.randint(1, 3)):
            hour = rng.randint(5, 21)
            flights.append(
                {
                    "flight_number": f"HAT{rng.randint(1, 299):03d}",
                    "origin": origin,
                    "destination": destination,
                    "scheduled_departure_time_est": f"{hour:02d}:00:00",
                    "scheduled_arrival_time_est": f"{(hour + 4) % 24:02d}:30:00",
                    "status": "available",
                    "available_seats": {"basic_economy": rng.randint(0, 9), "economy": 12},
                    "prices": {"basic_economy": rng.randint(60, 99), "economy": 180},
                }
            )
        return json.dumps(flights)

    return search_direct_flight


def _routes(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = [(a, b) for a in _AIRPORTS for b in _AIRPORTS if a != b]
    rng.shuffle(pairs)
    return pairs[:count]


def flight_fan_out(seed: int, *, routes: int = 20, served: int = 6, batches: int = 1) -> Scenario:
    """N6: one answer (or a few) searching ``routes`` routes at once; ``served`` of them have
    flights, in an order the seed picks. The agent then answers, the user picks one, and the
    agent books it."""
    chosen = _routes(seed, routes)
    flying = set(random.Random(seed + 1).sample(chosen, served))
    args = [{"origin": a, "destination": b, "date": "2024-05-20"} for a, b in chosen]
    size = -(-routes // batches)
    turns = [fan_out("search_direct_flight", args[i : i + size]) for i in range(0, routes, size)]
    booking = {"flight_number": "HAT112", "date": "2024-05-20", "cabin": "economy"}
    return Scenario(
        f"flight-fan-out-{routes}x{batches}-seed{seed}",
        [
            User("I want to fly out of the country on May 20, anywhere direct."),
            *turns,
            Turn(text=f"I found direct flights on {served} of the {routes} routes I checked."),
            User("Book the cheapest economy one."),
            call("book_reservation", **booking),
            Turn(text="Your flight is booked. Confirmation HX41Q2."),
        ],
        {
            "search_direct_flight": _flight_table(seed, flying),
            "book_reservation": lambda **_: json.dumps(
                {"reservation_id": "HX41Q2", "status": "confirmed"}
            ),
        },
    )


def web_fan_out(seed: int, *, queries: int = 16) -> Scenario:
    """N6: a research assistant searching many phrasings in parallel; most find nothing."""
    rng = random.Random(seed)
    topics = [
        "lithium iron phosphate cycle life",
        "LFP battery degradation 45C",
        "sodium ion grid storage cost 2024",
        "solid state battery pilot line",
        "flow battery vanadium price",
        "home battery recycling program",
        "second life EV battery warranty",
        "zinc air battery startup funding",
        "battery passport EU regulation",
        "graphite anode supply chain",
        "cobalt free cathode chemistry",
        "thermal runaway propagation test",
        "battery swapping scooters Taiwan",
        "iron air battery long duration",
        "silicon anode swelling mitigation",
        "BMS state of health estimation",
        "pumped hydro vs batteries cost",
        "lithium price forecast 2025",
    ][:queries]
    hits = set(rng.sample(topics, max(2, queries // 4)))

    def web_search(query: str) -> str:
        if query not in hits:
            return f"No results found for '{query}'."
        return "\n".join(
            f"{n}. {query.title()} - report {rng.randint(100, 999)} "
            f"(https://example.org/{query.replace(' ', '-')}/{n})"
            for n in range(1, 4)
        )

    return Scenario(
        f"web-fan-out-{queries}-seed{seed}",
        [
            User("Summarise what is new in battery storage research."),
            fan_out("web_search", [{"query": q} for q in topics]),
            Turn(text="Here is a summary of the few sources I found."),
        ],
        {"web_search": web_search},
    )


# --- N7: numbers that move --------------------------------------------------------------------


def _poller(name: str, outputs: Sequence[str], arguments: dict[str, Any], ask: str) -> Scenario:
    produced: Iterator[str] = iter(outputs)
    polls = [call(name, **arguments) for _ in outputs]
    return Scenario(
        f"{name}-{len(outputs)}",
        [User(ask), *polls, Turn(text="It has finished.")],
        {name: lambda **_: next(produced)},
    )


_CI_STEPS = [
    "Set up job",
    "Checkout",
    "Set up Python",
    "Install dependencies",
    "Lint",
    "Type check",
    "Build wheel",
    "Unit tests (1/3)",
    "Unit tests (2/3)",
    "Unit tests (3/3)",
    "Integration tests",
    "Upload coverage",
    "Publish artifacts",
    "Complete job",
]


def ci_poller(polls_per_step: int = 1, *, elapsed: bool = True) -> Scenario:
    """N7: a CI run polled until it completes; its step counter moves (``step 8/14 (Unit
    tests (1/3))``), and with ``elapsed`` the run's age moves too."""
    outputs = []
    seconds = 4
    for number, step in enumerate(_CI_STEPS, start=1):
        for _ in range(polls_per_step):
            seconds += 7
            age = f" ({seconds // 60}m{seconds % 60}s)" if elapsed else ""
            outputs.append(f"status: in_progress, step {number}/14 ({step}){age}")
    outputs.append("status: completed, conclusion: success")
    return _poller("get_workflow_run", outputs, {"run_id": 9812}, "Tell me when CI is green.")


def export_poller(steps: Sequence[int]) -> Scenario:
    """N7: an export polled until done, only its percentage moving."""
    total = 24_310
    outputs = [
        f"Export exp_7f3a91c2 is running: {p}% ({total * p // 100:,} of {total:,} rows)"
        for p in steps
    ]
    outputs.append(f"Export exp_7f3a91c2 completed: {total:,} rows, 3.2 MB")
    return _poller("get_export_status", outputs, {"job_id": "exp_7f3a91c2"}, "Export my data.")


def line_count_poller(counts: Sequence[int]) -> Scenario:
    """N7: ``wc -l`` on a file another process is writing."""
    outputs = [f"{n} data/out.csv" for n in counts]
    return _poller("bash", outputs, {"command": "wc -l data/out.csv"}, "Wait for the dump.")


def pod_poller(ready_after: int, *, restarts: bool = False) -> Scenario:
    """N7: ``kubectl get pod`` until the pod is ready; READY flips and AGE grows."""
    outputs = []
    for poll in range(ready_after + 1):
        age = 5 + poll * 7
        ready, status = ("1/1", "Running") if poll == ready_after else ("0/1", "ContainerCreating")
        restart = poll // 3 if restarts else 0
        outputs.append(
            "NAME                     READY   STATUS              RESTARTS   AGE\n"
            f"web-7d4b9c8f6d-x2kqp     {ready}     {status:<19} {restart:<10} {age}s"
        )
    return _poller("bash", outputs, {"command": "kubectl get pod -l app=web"}, "Is the pod up yet?")


def log_tail_poller(polls: int, lines: int = 5) -> Scenario:
    """N7: ``tail_logs`` while traffic comes in: new request lines, new ids and timestamps."""
    rng = random.Random(polls * 31 + lines)
    paths = ["/api/orders", "/api/cart", "/api/users/me", "/checkout", "/api/search", "/login"]
    log: list[str] = []
    outputs = []
    for poll in range(polls):
        for n in range(rng.randint(1, 3)):
            second = poll * 5 + n
            log.append(
                f"2026-12-03T10:{second // 60:02d}:{second % 60:02d}.{rng.randint(100, 999)}Z "
                f"INFO req_{rng.getrandbits(40):010x} {rng.choice(['GET', 'POST'])} "
                f"{rng.choice(paths)}/{rng.randint(1, 99)} {rng.choice([200, 200, 201, 404])} "
                f"{rng.randint(3, 90)}ms"
            )
        outputs.append("\n".join(log[-lines:]))
    return _poller("tail_logs", outputs, {"service": "checkout", "lines": lines}, "Watch it.")


def frozen_poller(polls: int) -> Scenario:
    """N7's other side: a status that does not move at all, numbers included."""
    outputs = ["Export exp_7f3a91c2 is running: 40% (9,724 of 24,310 rows)"] * polls
    return _poller("get_export_status", outputs, {"job_id": "exp_7f3a91c2"}, "Export my data.")


# --- N8: a chat ------------------------------------------------------------------------------

_ORDERS = {
    "1042": ("shipped", "1Z999AA10123456784", "the blue backpack"),
    "1043": ("processing", None, "two notebooks"),
    "1050": ("delivered", "1Z999AA10987654321", "a desk lamp"),
}
_CHAT = [
    ("Hi! Where is my order 1042?", ("get_order", {"order_id": "1042"})),
    ("Can you track it?", ("track_shipment", {"tracking": "1Z999AA10123456784"})),
    ("When will it arrive?", None),
    ("And order 1043?", ("get_order", {"order_id": "1043"})),
    ("Why is it still processing?", None),
    ("Can I change its address?", ("search_faq", {"question": "change shipping address"})),
    ("Please change it to 5 Elm St.", ("update_address", {"order_id": "1043", "to": "5 Elm St"})),
    ("Thanks. What is your return policy?", ("search_faq", {"question": "return policy"})),
    ("Does it cover opened items?", None),
    ("I got order 1050, the lamp flickers.", ("get_order", {"order_id": "1050"})),
    ("Can I return it?", None),
    ("Start the return please.", ("start_return", {"order_id": "1050"})),
    ("Will I get a label by email?", None),
    ("How long does a refund take?", ("search_faq", {"question": "refund time"})),
    ("Can I get store credit instead?", None),
    ("OK, store credit then.", ("set_refund_method", {"order_id": "1050", "method": "credit"})),
    ("What is my credit balance now?", ("get_balance", {"user": "ada"})),
    ("Do you ship to Canada?", ("search_faq", {"question": "international shipping"})),
    ("How much is shipping there?", None),
    ("Is there a discount for students?", ("search_faq", {"question": "student discount"})),
    ("I am a student, how do I verify?", None),
    ("Which payment methods do you take?", ("search_faq", {"question": "payment methods"})),
    ("Can I pay with my credit balance?", None),
    ("Track 1042 again please.", ("track_shipment", {"tracking": "1Z999AA10123456784"})),
    ("Great, it moved. Thanks!", None),
    ("One more thing: my email changed.", None),
    ("It is ada@lovelace.dev now.", ("update_email", {"user": "ada", "email": "ada@lovelace.dev"})),
    ("Did that work?", None),
    ("Can you send me a summary of today?", ("email_summary", {"user": "ada"})),
    ("That is all, bye!", None),
]
_REPLIES = [
    "Order 1042 (the blue backpack) shipped yesterday.",
    "It is in transit, last scanned in Memphis, TN this morning.",
    "UPS expects to deliver it on Thursday before 8pm.",
    "Order 1043 (two notebooks) is still being processed.",
    "One notebook is on backorder; the warehouse expects it Monday.",
    "Yes, addresses can be changed until an order ships.",
    "Done: order 1043 will go to 5 Elm St.",
    "You can return unused items within 30 days for a full refund.",
    "Opened items can be returned too if they are faulty.",
    "I see order 1050 was delivered on the 2nd.",
    "Yes, a flickering lamp counts as faulty, so it can be returned.",
    "Your return for order 1050 has been started.",
    "Yes, the prepaid label is on its way to your inbox.",
    "Refunds reach your card 5 to 7 business days after we receive the item.",
    "Store credit is issued the day we receive the return.",
    "Your refund for order 1050 will be store credit.",
    "You have $0 now; the lamp's $39 will be added on receipt.",
    "We ship to Canada with tracked delivery.",
    "Shipping to Canada is a flat $14, free above $120.",
    "Students get 15% off with a verified school email.",
    "Sign in, open Rewards, and enter your school email to verify.",
    "We take cards, PayPal, Apple Pay and store credit.",
    "Yes, store credit can pay for part or all of an order.",
    "Order 1042 is now out for delivery in your town.",
    "You're welcome, enjoy the backpack!",
    "Sure, tell me the new address and I will update it.",
    "Your email is now ada@lovelace.dev.",
    "Yes, I sent a confirmation to the new address.",
    "I have emailed you a summary of today's changes.",
    "Goodbye Ada, have a lovely day!",
]


def _support_tools() -> dict[str, Tool]:
    def get_order(order_id: str) -> str:
        status, tracking, items = _ORDERS[order_id]
        return json.dumps(
            {"order_id": order_id, "status": status, "tracking": tracking, "items": items}
        )

    def track_shipment(tracking: str) -> str:
        track_shipment.scans += 1  # type: ignore[attr-defined]
        places = ["Louisville, KY", "Memphis, TN", "out for delivery"]
        return f"{tracking}: {places[min(track_shipment.scans, 2)]}"  # type: ignore[attr-defined]

    track_shipment.scans = 0  # type: ignore[attr-defined]
    answers = {
        "change shipping address": "Addresses can be changed until the order ships.",
        "return policy": "Unused items can be returned within 30 days.",
        "refund time": "Refunds take 5-7 business days after receipt.",
        "international shipping": "We ship to CA, MX and the EU.",
        "student discount": "15% off with a verified school email.",
        "payment methods": "Cards, PayPal, Apple Pay, store credit.",
    }
    return {
        "get_order": get_order,
        "track_shipment": track_shipment,
        "search_faq": lambda question: answers[question],
        "update_address": lambda order_id, to: f"order {order_id}: address set to {to}",
        "start_return": lambda order_id: f"return RMA-{order_id}7 created; label emailed",
        "set_refund_method": lambda order_id, method: f"order {order_id}: refund as {method}",
        "get_balance": lambda user: f"{user}: store credit $0.00 (pending $39.00)",
        "update_email": lambda user, email: f"{user}: email changed to {email}",
        "email_summary": lambda user: f"summary sent to {user}",
    }


def support_chat(messages: int = 30) -> Scenario:
    """N8: a support chat of ``messages`` user messages, each answered, some with a tool call
    and some without."""
    script: list[Turn | User] = []
    for (question, tool_call), reply in zip(_CHAT[:messages], _REPLIES, strict=False):
        script.append(User(question))
        if tool_call is not None:
            script.append(Turn((tool_call,)))
        script.append(Turn(text=reply))
    return Scenario(f"support-chat-{messages}", script, _support_tools(), scope="thread")


def answers_only_chat(messages: int = 30) -> Scenario:
    """N8: the support chat answered from what the agent knows, without a single tool call:
    ``messages`` replies in a row, each to a new user message, each different."""
    script: list[Turn | User] = []
    for (question, _), reply in zip(_CHAT[:messages], _REPLIES, strict=False):
        script += [User(question), Turn(text=reply)]
    return Scenario(f"answers-only-chat-{messages}", script, {}, scope="thread")


# --- N9: silent work ------------------------------------------------------------------------


def _silent(**_: Any) -> str:
    return ""


def write_files(files: int = 10, *, tool: str = "write_file") -> Scenario:
    """N9: ``files`` files written one after another (each write prints nothing), then a test
    run with new output."""
    modules = ["models", "views", "urls", "forms", "admin", "serializers", "tasks", "signals"]
    writes = [
        call(tool, path=f"shop/{modules[n % 8]}{n // 8 or ''}.py", content=f"# {modules[n % 8]}\n")
        for n in range(files)
    ]
    return Scenario(
        f"{tool}-{files}",
        [
            User("Scaffold the shop app and run its tests."),
            *writes,
            call("run_tests", path="shop"),
            Turn(text="The app is scaffolded and its tests pass."),
        ],
        {tool: _silent, "run_tests": lambda path: f"{path}: 14 passed in 0.84s"},
    )


def heredoc_files(files: int = 10) -> Scenario:
    """N9 with a shell: ``cat > file <<'EOF'`` here-documents print nothing."""
    writes = [
        call("bash", command=f"cat > src/pkg/part_{n}.py <<'EOF'\nVALUE_{n} = {n}\nEOF")
        for n in range(files)
    ]
    return Scenario(
        f"heredoc-{files}",
        [
            User("Write the parts and test them."),
            *writes,
            call("bash", command="pytest -q"),
            Turn(text="All parts are written and tested."),
        ],
        {
            "bash": lambda command: (
                "" if command.startswith("cat >") else f"{files + 2} passed in 0.41s"
            )
        },
    )


def shell_setup() -> Scenario:
    """N9: ``mkdir``, ``touch``, ``sed -i``, ``cd``, ``export`` in a row, then a listing."""
    commands = [
        "mkdir -p build/reports",
        "touch build/reports/.keep",
        "sed -i 's/DEBUG = True/DEBUG = False/' settings.py",
        "cd build",
        "export REPORT_DIR=$PWD/reports",
        "mkdir -p cache",
        "touch cache/.keep",
        "sed -i 's/^# report/report/' ../setup.cfg",
        "cp ../settings.py reports/settings.bak",
        "chmod +x ../run.sh",
        "ls -la reports",
    ]
    return Scenario(
        "shell-setup",
        [
            User("Prepare the build directory."),
            *[call("bash", command=c) for c in commands],
            Turn(text="The build directory is ready."),
        ],
        {
            "bash": lambda command: (
                "total 12\n-rw-r--r-- 1 dev dev 3120 settings.bak\n-rw-r--r-- 1 dev dev 0 .keep"
                if command.startswith("ls")
                else ""
            )
        },
    )


# --- R1': the same edit re-applied -------------------------------------------------------------


def reapplied_edit(*, base_lines: int = 24) -> Scenario:
    """R1': the same edit applied again and again; each application inserts its block again,
    so the file view (20+ lines) grows and its line numbers shift."""
    block = ["    if retries > MAX_RETRIES:", "        raise TimeoutError(url)"]
    file = [
        f"def helper_{n}(x):" if n % 3 == 0 else f"    return x + {n}" for n in range(base_lines)
    ]

    def edit(path: str, line: int, text: str) -> str:
        file[line:line] = block
        shown = file[max(0, line - 10) : line + 20]
        numbered = "\n".join(f"{max(0, line - 10) + i + 1}:{row}" for i, row in enumerate(shown))
        return f"[File: {path} ({len(file)} lines total)]\n{numbered}\nFile updated."

    args = {"path": "net/fetch.py", "line": 12, "text": "\n".join(block)}
    return Scenario(
        f"reapplied-edit-{base_lines}",
        [User("Add a retry limit to fetch."), *[call("edit", **args) for _ in range(10)]],
        {"edit": edit},
    )


# --- R4': the same failing call, whatever comes between ----------------------------------------


def _no_network(command: str) -> str:
    if command.startswith(("apt-get install", "apt-get update", "pip install")):
        raise ToolException("\nEXECUTION TIMED OUT")
    if command.startswith(("sed -i", "export")):
        return ""
    if command.startswith("ping"):
        raise ToolException("/bin/bash: line 214: ping: command not found")
    return "ok"


def install_without_network(order: int = 0) -> Scenario:
    """R4': ``apt-get install default-jdk`` times out; between the tries other commands fail
    too, or succeed silently (a mirror edit): nothing between brings anything new."""
    between = [
        ["apt-get update", "sed -i 's/archive/mirrors/' /etc/apt/sources.list"],
        ["apt-get install -y iputils-ping", "ping -c 1 deb.debian.org"],
        ["export http_proxy=http://proxy:3128", "apt-get update"],
    ]
    rng = random.Random(order)
    script: list[Turn | User] = [User("Install a JDK and build the project.")]
    for round_ in range(4):
        script.append(call("bash", command="apt-get install -y default-jdk"))
        gap = between[(round_ + order) % 3][:]
        rng.shuffle(gap)
        script.extend(call("bash", command=c) for c in gap)
    return Scenario(f"install-without-network-{order}", script, {"bash": _no_network})


def rerun_after_fixes() -> Scenario:
    """N1 (still): the same test run failing the same way after each real fix; the 4th run
    executes, and its result decides."""
    results = iter(["E", "E", "E", "ok"])

    def pytest_run(path: str) -> str:
        outcome = next(results)
        if outcome == "E":
            raise ToolException("FAILED tests/test_api.py::test_login - AssertionError: 401")
        return "tests/test_api.py: 12 passed in 0.52s"

    def edit(path: str, patch: str) -> str:
        return f"[File: {path} (48 lines total)]\n12: {patch}\nFile updated."

    script: list[Turn | User] = [User("Make the login test pass.")]
    for n, patch in enumerate(["", "token = sign(user)", "headers['X-Auth'] = token", "ok"]):
        if n:
            script.append(call("edit", path="app/auth.py", patch=patch))
        script.append(call("pytest", path="tests/test_api.py"))
    return Scenario("rerun-after-fixes", script, {"pytest": pytest_run, "edit": edit})


# --- R8: no new information across tools ----------------------------------------------------


def _flailing_shell(command: str) -> str:
    if command.startswith(("which", "find", "ls")) or "| grep" in command:
        return ""
    if command.startswith("apt-get"):
        raise ToolException("\nEXECUTION TIMED OUT")
    if command.startswith("echo"):
        return command[len("echo ") :].strip('"')
    if command.startswith("javac"):
        raise ToolException("/bin/bash: line 88: javac: command not found")
    return "ok"


def _search_dir(term: str) -> str:
    return f'No matches found for "{term}" in /repo'


def flailing_without_jdk(shape: int = 0) -> Scenario:
    """R8: an agent without a network or a JDK trying one thing after another, none bringing
    anything new (empty finds, timeouts, searches that find nothing, echoes)."""
    steps = [
        ("bash", {"command": "which javac"}),
        ("bash", {"command": 'find / -name "jdk*" -type d 2>/dev/null'}),
        ("bash", {"command": "apt-get install -y default-jdk"}),
        ("bash", {"command": "ls /usr/lib | grep -i conf"}),
        ("search_dir", {"term": "install JDK"}),
        ("bash", {"command": 'echo "trying another way to get a JDK"'}),
        ("bash", {"command": 'find / -name "javac*" 2>/dev/null'}),
        ("search_dir", {"term": "JAVA_HOME"}),
        ("bash", {"command": "javac -version"}),
        ("bash", {"command": "which java"}),
        ("search_dir", {"term": "openjdk"}),
        ("bash", {"command": "ls /opt | grep -i jdk"}),
    ]
    order = steps[:]
    random.Random(shape).shuffle(order)
    return Scenario(
        f"flailing-without-jdk-{shape}",
        [
            User("Build the Java project."),
            call("bash", command="javac Main.java"),
            *[call(name, **args) for name, args in order],
        ],
        {"bash": _flailing_shell, "search_dir": _search_dir},
    )


def flailing_with_fan_outs() -> Scenario:
    """R8 with fan-outs: three searches at a time, none finding anything; each answer counts
    once, so it takes ten answers, not ten calls."""
    script: list[Turn | User] = [User("Find where the JDK is configured.")]
    for n in range(12):
        script.append(
            fan_out("search_dir", [{"term": f"{word} {n}"} for word in ("jdk", "java", "javac")])
        )
    return Scenario("flailing-fan-outs", script, {"search_dir": _search_dir})


# --- R9: a conversation going round ----------------------------------------------------------

_QUESTIONS = [
    "where is my refund",
    "I returned the lamp two weeks ago",
    "the refund for order 1050",
    "it was a desk lamp",
    "you emailed me a label",
    "I dropped it at UPS on the 4th",
    "the tracking says delivered",
    "can you check again",
    "why can't you find it",
    "I want to talk to someone",
    "hello?",
    "are you there",
]


def rephrase_loop(messages: int = 11) -> Scenario:
    """R9: the same reply after each user message."""
    script: list[Turn | User] = []
    for question in _QUESTIONS[:messages]:
        script += [User(question), Turn(text="I'm sorry, could you rephrase that?")]
    return Scenario(f"rephrase-{messages}", script, {}, scope="thread")


_APOLOGIES = [
    "I'm deeply sorry for the heartbreak you are going through. Losing a companion of so many "
    "years is never easy, and it is completely understandable to feel lost right now. Please "
    "take all the time you need, and let me know if there is anything I can do for you.",
    "I'm truly sorry for the devastation you are going through. Losing a companion of so many "
    "years is never easy, and it is completely understandable to feel lost right now. Please "
    "take all the time you need, and let me know if there is anything I can do for you.",
    "I'm so sorry for the grief you are going through. Losing a companion of so many years is "
    "never easy, and it is completely understandable to feel lost right now. Please take all "
    "the time you need, and let me know if there is anything I can do for you.",
    "I'm sincerely sorry for the pain you are going through. Losing a companion of so many "
    "years is never easy, and it is completely understandable to feel lost right now. Please "
    "take all the time you need, and let me know if there is anything I can do for you.",
]


def apology_cycle(length: int = 2, replies: int = 18) -> Scenario:
    """R9: 2-4 replies that differ only in a few words, cycling, one after each message."""
    script: list[Turn | User] = []
    for n in range(replies):
        script += [User(_QUESTIONS[n % len(_QUESTIONS)]), Turn(text=_APOLOGIES[n % length])]
    return Scenario(f"apology-cycle-{length}", script, {}, scope="thread")


# --- N18: the same question asked again -----------------------------------------------------------

_ORDER = {
    "order_id": "A-10234",
    "status": "shipped",
    "carrier": "UPS",
    "tracking": "1Z999AA10123456784",
    "shipped_at": "2026-12-02",
    "items": [{"sku": "DESK-48", "qty": 1}],
}
_STATUS = (
    "Your order A-10234 shipped on December 2 with UPS. The tracking number is "
    "1Z999AA10123456784, and it should arrive within 3-5 business days."
)
_ASKED = [
    "Hi, what's the status of my order A-10234?",
    "hi what's the status of my order A-10234",
    "Hi, what's the status of my order A-10234?",
    "Hi!! What's the status of my order A-10234??",
    "hi, what's the status of my order a-10234?",
    "Hi, what's the status of my order A-10234?",
]


def same_question(*, lookup: bool = True, asks: int = 6) -> Scenario:
    """N18: a customer asks for an order's status again and again (case and punctuation
    aside, the same words); each time the bot looks it up (or answers from the thread) and
    gives the same true answer."""
    script: list[Turn | User] = []
    for question in _ASKED[:asks]:
        script.append(User(question))
        if lookup:
            script.append(Turn((("get_order_status", {"order_id": "A-10234"}),)))
        script.append(Turn(text=_STATUS))
    return Scenario(
        f"same-question-{'lookup' if lookup else 'reply'}",
        script,
        {"get_order_status": lambda order_id: json.dumps(_ORDER)},
        scope="thread",
    )


def same_reply_to_other_questions() -> Scenario:
    """R9 beside N18: one question asked twice, then other questions all given that answer:
    the same reply to messages that change is still the loop."""
    questions = [_ASKED[0], _ASKED[0], "Can I change the delivery address?", "Can I cancel it?"]
    script: list[Turn | User] = []
    for question in questions:
        script += [User(question), Turn(text=_STATUS)]
    return Scenario("same-reply-to-other-questions", script, {}, scope="thread")
