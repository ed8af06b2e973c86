"""Realistic agents that act (SPEC §14): database migrations through a SQL tool, a Notion-like
block editor, a grader, a file writer, a calendar, a store sync, parallel batches and
deliberate failure tests. Each builder returns a :class:`~conversations.Scenario` that
:func:`~conversations.drive` runs through the pure detector.
"""

from __future__ import annotations

import json
from typing import Any

from conversations import Scenario, Tool, Turn, call, fan_out
from langchain_core.tools import ToolException

_FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Linus", "Guido"]
_LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson"]


def _customers(batch: int, size: int = 20) -> str:
    rows = ",\n".join(
        f"({batch * size + i}, '{_FIRST[(batch + i) % 10]} {_LAST[i % 8]}',"
        f" 'c{batch * size + i}@example.com')"
        for i in range(size)
    )
    return f'INSERT INTO "Customer" (id, name, email) VALUES\n{rows};'


def _rows_affected(*, pretty: bool) -> Tool:
    def run_sql(query: str) -> str:
        count = query.count("\n(") + query.count(",\n(") + 1 if "INSERT" in query else 0
        answer = {"rows": [], "rowCount": min(count, 20), "fields": []}
        return json.dumps(answer, indent=2 if pretty else None)

    return run_sql


def insert_batches(batches: int = 10, *, pretty: bool = False) -> Scenario:
    """N14: a migration inserting 20 customers a batch, each batch answered
    ``{"rows": [], "rowCount": 20, "fields": []}``."""
    script = [call("run_sql", query=_customers(batch)) for batch in range(batches)]
    return Scenario("insert-batches", script, {"run_sql": _rows_affected(pretty=pretty)}, config={})


def _block(block_id: str, ratio: float = 0.5) -> str:
    return json.dumps(
        {
            "object": "block",
            "id": block_id,
            "type": "column",
            "column": {"width_ratio": ratio},
            "last_edited_time": "2025-10-20T10:50:47.000Z",
            "has_children": True,
        }
    )


def block_updates(blocks: int = 15) -> Scenario:
    """N14: a generic ``execute_action`` tool asked to ``update_a_block`` on one block after
    another, each answered with the updated block (its id masked, the rest alike)."""

    def execute_action(action_name: str, path_params: str, body_schema: str) -> str:
        block_id = json.loads(path_params)["block_id"]
        return json.dumps({"action_name": action_name, "success": True, "data": _block(block_id)})

    script = [
        call(
            "execute_action",
            action_name="update_a_block",
            path_params=json.dumps({"block_id": f"27460215-0acf-81{n:02x}-8178-d7f734489f0c"}),
            body_schema=json.dumps({"column": {"width_ratio": 0.5}}),
        )
        for n in range(blocks)
    ]
    return Scenario("block-updates", script, {"execute_action": execute_action})


def grades(students: int = 6) -> Scenario:
    """N14: a grader submitting one grade per student, each acknowledged alike."""

    def canvas_submit_grade(course_id: int, assignment_id: int, user_id: int, grade: str) -> str:
        return "Grade submitted successfully."

    script = [
        call("canvas_submit_grade", course_id=7, assignment_id=3, user_id=100 + n, grade="A-")
        for n in range(students)
    ]
    return Scenario("grades", script, {"canvas_submit_grade": canvas_submit_grade})


def files_written(files: int = 12) -> Scenario:
    """N14: a file writer answered ``File written`` each time."""

    def write(path: str, content: str) -> str:
        return "File written"

    script = [
        call("write", path=f"src/module_{n}.py", content=f"VALUE = {n}\n") for n in range(files)
    ]
    return Scenario("files-written", script, {"write": write})


def calendar_events(events: int = 10) -> Scenario:
    """N14: a calendar agent creating one event per meeting, each answered with the same
    acknowledgement and a new event id."""

    def create_event(title: str, start: str) -> str:
        return json.dumps({"status": "confirmed", "id": f"evt_{abs(hash(title)) % 10**12:012d}"})

    script = [
        call("create_event", title=f"1:1 with {_FIRST[n]}", start=f"2026-12-{n + 7:02d}T10:00")
        for n in range(events)
    ]
    return Scenario("calendar-events", script, {"create_event": create_event})


_TRANSFER_ERRORS = {
    "self": "Self-transfer not allowed: source and target inventory IDs cannot be the same",
    "zero": "Invalid transfer quantity: minimum is 1 part, attempted: 0",
    "many": "Invalid transfer quantity: maximum is 500 parts per operation, attempted: 501",
    "source": "Source inventory ID 999999 does not exist",
    "target": "Target inventory ID 999999 does not exist",
    "part": "Part number INVALID does not exist",
}
_CONTEXT = "CONTEXT:  PL/pgSQL function transfer_parts(integer,integer,integer) line {} at RAISE"


def deliberate_failures() -> Scenario:
    """N15: a transfer procedure tested with six invalid inputs, each a different call failing
    with its own error, then run for real."""

    def execute_sql(sql: str) -> str:
        for case, message in _TRANSFER_ERRORS.items():
            if f"'{case}'" in sql:
                line = 20 + 6 * list(_TRANSFER_ERRORS).index(case)
                raise ToolException(f"Error: {message}\n{_CONTEXT.format(line)}")
        return "[{'transfer_parts': 'Successfully transferred 10 parts from 11124 to 14686'}]"

    script = [
        call("execute_sql", sql=f"SELECT transfer_parts(11124, 14686, 10, '{case}');")
        for case in _TRANSFER_ERRORS
    ]
    script.append(call("execute_sql", sql="SELECT transfer_parts(11124, 14686, 10, 'real');"))
    return Scenario("deliberate-failures", script, {"execute_sql": execute_sql})


def failing_batch(kind: str = "permission") -> Scenario:
    """N16: one answer fires four calls, three fail the same way; the next answer fixes the
    cause and the work goes on."""
    errors = {
        "permission": "Error: permission denied for schema information_schema",
        "503": '{"error": {"code": 503, "message": "Service Unavailable"}}',
        "timeout": "Error: request timed out after 30 seconds",
    }
    fixed: dict[str, bool] = {"done": False}

    def create_directory(path: str) -> str:
        if not fixed["done"] and path.count("/") > 1:
            raise ToolException(errors[kind])
        return f"Successfully created directory {path}"

    def create_parents(paths: list[str]) -> str:
        fixed["done"] = True
        return f"Created {len(paths)} parent directories"

    nested = ["docs/guides/setup", "docs/guides/deploy", "docs/api/v1"]
    script: list[Any] = [
        fan_out("create_directory", [{"path": "notes"}, *({"path": p} for p in nested)]),
        call("create_parents", paths=["docs/guides", "docs/api"]),
        fan_out("create_directory", [{"path": p} for p in nested]),
    ]
    return Scenario(
        f"failing-batch-{kind}",
        script,
        {"create_directory": create_directory, "create_parents": create_parents},
    )


def inventory_sync() -> Scenario:
    """N17: a store sync where some products fail with a duplicate SKU and others are
    created or updated between them."""
    existing = {"SOUTH_PROD001", "SOUTH_PROD004", "WEST_PROD014", "WEST_PROD017"}

    def woo_products_create(product: dict[str, Any]) -> str:
        if product["sku"] in existing:
            raise ToolException(
                "Error: WooCommerce API error: Invalid or duplicated SKU. (Status: 400)"
            )
        return json.dumps(
            {"id": 40 + len(product["sku"]), "sku": product["sku"], "status": "publish"}
        )

    def woo_products_update(product_id: int, stock_quantity: int) -> str:
        return json.dumps({"id": product_id, "stock_quantity": stock_quantity, "status": "publish"})

    script: list[Turn] = []
    for n, sku in enumerate(
        [
            "SOUTH_PROD001",
            "SOUTH_PROD002",
            "SOUTH_PROD004",
            "WEST_PROD010",
            "WEST_PROD014",
            "WEST_PROD015",
            "WEST_PROD017",
            "EAST_PROD020",
        ]
    ):
        script.append(call("woo_products_create", product={"sku": sku, "name": f"Item {n}"}))
        if sku in existing:
            script.append(call("woo_products_update", product_id=50 + n, stock_quantity=10 * n))
    return Scenario(
        "inventory-sync",
        script,
        {"woo_products_create": woo_products_create, "woo_products_update": woo_products_update},
    )


def same_block_update(times: int = 4) -> Scenario:
    """R17: the same block updated with the same content, acknowledged each time."""
    scenario = block_updates(1)
    scenario.script = scenario.script * times
    scenario.name = "same-block-update"
    return scenario


def same_insert_resent(times: int = 4) -> Scenario:
    """R17: the same INSERT re-sent after a constraint error, only a trailing ``;`` and
    newline changed."""

    def run_sql(query: str) -> str:
        raise ToolException(
            'Error: duplicate key value violates unique constraint "Customer_pkey"\n'
            "DETAIL:  Key (id)=(20) already exists."
        )

    base = _customers(1)
    script = [
        call("run_sql", query=base.rstrip(";") + (";" if n % 2 else "\n")) for n in range(times)
    ]
    return Scenario("same-insert-resent", script, {"run_sql": run_sql})


def _hits() -> list[dict[str, str]]:
    return [
        {"title": f"Pizza place {name}", "url": f"https://maps.example.com/{name.lower()}"}
        for name in ("Joe's", "Prince Street", "Lucali", "Di Fara", "L'Industrie")
    ]


_PIZZA_QUERIES = [
    "best pizza in nyc",
    "top pizza places in new york",
    "famous pizza spots manhattan brooklyn",
    "where to eat great pizza nyc",
    "highly rated pizza new york city",
    "classic new york pizza slices",
    "pizza recommendations for nyc visitors",
    "iconic pizza restaurants new york",
    "must try pizza in new york",
    "legendary nyc pizza joints",
]


def echoing_search(*, pretty: bool = False) -> Scenario:
    """R16: a search tool that echoes its query around the same five hits and a latency,
    reworded ten times."""

    def web_search(query: str) -> str:
        answer = {"query": query, "results": _hits(), "response_time": 1.2}
        return json.dumps(answer, indent=2 if pretty else None)

    script = [call("web_search", query=q) for q in _PIZZA_QUERIES]
    return Scenario("echoing-search", script, {"web_search": web_search})


_FILES = [f"src/pkg/module_{n:03d}/handler_{n % 7}.py" for n in range(400)]


def listing_then_filtered() -> Scenario:
    """R18: a ``find`` listing 400 files, then filtered ``find``s printing parts of it that
    the run has seen."""

    def bash(command: str) -> str:
        if "-name" not in command:
            return "\n".join(_FILES)
        digit = command.rsplit("_", 1)[-1].split(".", 1)[0]
        return "\n".join(f for f in _FILES if f.endswith(f"handler_{digit}.py"))

    script = [call("bash", command="find src -type f")]
    script += [call("bash", command=f"find src -name 'handler_{d}.py'") for d in range(7)]
    return Scenario("listing-then-filtered", script, {"bash": bash})


def price_pages(pages: int = 40) -> Scenario:
    """N20: forty pages of a price table, each new rows of numbers in the same layout."""

    def read_prices(page: int) -> str:
        rows = ["date       | open   | close  | volume"]
        for day in range(25):
            n = page * 25 + day
            rows.append(
                f"2024-{1 + n // 28 % 12:02d}-{1 + n % 28:02d} | {100 + n * 0.37:.2f} | "
                f"{99 + n * 0.41:.2f} | {12_000 + n * 37:,}"
            )
        return "\n".join(rows)

    script = [call("read_prices", page=page) for page in range(pages)]
    return Scenario("price-pages", script, {"read_prices": read_prices})


def reread_between_work(reads: int = 6) -> Scenario:
    """R19: the same read returning the same content again and again while other calls do
    different work that brings news (reading one file after another)."""

    def get_config() -> str:
        return json.dumps({"region": "eu-west-1", "replicas": 3, "image": "api:1.4.2"})

    def read_file(path: str) -> str:
        return f"# {path}\n" + "\n".join(f"line {n} of {path}" for n in range(5))

    script: list[Any] = []
    for n in range(reads):
        script.append(call("get_config"))
        script.append(call("read_file", path=f"docs/chapter_{n}.md"))
    return Scenario(
        "reread-between-work", script, {"get_config": get_config, "read_file": read_file}
    )


# --- N19: agents that talk --------------------------------------------------------------------

GROUP_CHAT = [
    (
        "planner",
        "Plan for the churn analysis: the analyst pulls last quarter's cancellations, the "
        "engineer writes the cohort query, and I will review the findings before we report.",
    ),
    (
        "analyst",
        "Cancellations rose mostly among annual plans bought during the spring promotion; "
        "monthly customers look stable. I suggest we split cohorts by acquisition channel.",
    ),
    (
        "engineer",
        "Agreed. I can join subscriptions with the marketing attribution table on account id. "
        "Expect one row per account with channel, plan, start date and cancel date.",
    ),
    (
        "critic",
        "Careful with accounts that switched plans mid-year: counting them twice would inflate "
        "churn. Deduplicate on the latest plan before computing rates.",
    ),
    (
        "analyst",
        "Good catch. Besides that, refunds issued within fourteen days should count as "
        "cancellations, since finance books them that way.",
    ),
    (
        "planner",
        "Then the order is: deduplicate plans, fold early refunds into cancellations, compute "
        "monthly churn per channel, and chart spring promotion cohorts separately.",
    ),
    (
        "critic",
        "One more risk: the attribution table misses partner referrals before April. Flag "
        "those rows as unknown instead of dropping them.",
    ),
    (
        "engineer",
        "Understood, unknown channel it is. Running the cohort query now against the "
        "warehouse replica so production stays untouched.",
    ),
]
"""Eight messages of agents planning and agreeing, each bringing its own words, no tool."""


def _cohorts(query: str) -> str:
    return json.dumps(
        {
            "rows": [
                {"channel": "paid_search", "plan": "annual", "churn": 0.082},
                {"channel": "spring_promo", "plan": "annual", "churn": 0.214},
                {"channel": "unknown", "plan": "monthly", "churn": 0.047},
            ],
            "rowCount": 3,
        }
    )


def group_chat() -> Scenario:
    """N19: a group of agents plans, reports and agrees for eight messages without a tool,
    then one runs the query and the planner reports."""
    script: list[Any] = [Turn(text=f"{speaker}: {text}") for speaker, text in GROUP_CHAT]
    script.append(call("run_sql", query="SELECT channel, plan, churn FROM churn_cohorts"))
    script.append(
        Turn(
            text="planner: Spring promotion annual plans churn at 21.4%, almost triple paid "
            "search. Recommend a retention offer at month ten for that cohort."
        )
    )
    return Scenario("group-chat", script, {"run_sql": _cohorts})


_THOUGHTS = [
    "THOUGHT: I will look at the failing test first.",
    "THOUGHT: The previous reply was rejected; I will send the edit and the test together.",
    "THOUGHT: It still says more than one action. Maybe the heredoc counts twice.",
    "THOUGHT: I am confused by the format check, so I will try a simpler command.",
    "THOUGHT: Perhaps the comment line is parsed as an action; removing it.",
    "THOUGHT: Trying once more with the sed command and the test run.",
    "THOUGHT: This is frustrating. One more attempt with python instead of sed.",
    "THOUGHT: Final attempt: write the file, then run it.",
]


def rejected_replies(replies: int = 8) -> Scenario:
    """§14 N19's other side: replies a harness rejects (each holds two fenced command blocks
    where one is allowed; each says something new), with no call run between. Still a
    failing turn each: stopped by ``failing_turns``."""
    script: list[Any] = []
    for n, thought in enumerate(_THOUGHTS[:replies]):
        script.append(
            Turn(
                text=f"{thought}\n\n```bash\nsed -n '{60 + n},{80 + n}p' tests/constraints/"
                f"tests.py\n```\n\n```bash\npython -m pytest tests/constraints -k check_{n}\n```"
            )
        )
    return Scenario("rejected-replies", script, {})


def coder_and_executor(rounds: int = 10) -> Scenario:
    """N19 in a coding group chat: a coder agent writes a fenced block of code, an executor
    agent answers with its output in words, ten rounds; no tool call at all."""
    script: list[Any] = []
    for n in range(rounds):
        script.append(
            Turn(
                text=f"coder: Step {n}: compute the cohort churn for month {n + 1}.\n"
                f"```python\nprint(churn(cohort='2026-{n + 1:02d}'))\n```"
            )
        )
        script.append(
            Turn(text=f"executor: exit code 0. The churn for month {n + 1} is {4 + n * 0.7:.1f}%.")
        )
    return Scenario("coder-and-executor", script, {})
