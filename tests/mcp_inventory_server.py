"""A small inventory and CRM server speaking MCP over stdio, for ``tests/test_mcp_agents.py``.

Run as a script (``python tests/mcp_inventory_server.py``): the ``mcp`` package's ``FastMCP``
serves an in-memory SQLite database, seeded the same way on every start, through read-only
tools (``readOnlyHint=True``), acting tools (``readOnlyHint=False`` with ``destructiveHint`` and
``idempotentHint``) and one tool the server says nothing about (``order_summary``, no
annotations). ``cancel_order`` acts though no word of its name says so: only its annotations
tell. Errors are raised as exceptions, which the server answers with ``isError``.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

READS = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
CREATES = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
)
OVERWRITES = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False
)
SENDS = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True
)

PRODUCTS = [
    ("SKU-1001", "Espresso beans 1 kg", "coffee", 24.50, 40),
    ("SKU-1002", "Filter papers (100)", "coffee", 4.90, 120),
    ("SKU-1003", "Burr grinder", "equipment", 189.00, 6),
    ("SKU-1004", "Milk jug 600 ml", "equipment", 17.25, 25),
    ("SKU-1005", "Decaf beans 500 g", "coffee", 13.80, 18),
    ("SKU-1006", "Descaler (4 doses)", "care", 11.40, 33),
    ("SKU-1007", "Tamper 58 mm", "equipment", 29.00, 12),
    ("SKU-1008", "Cleaning tablets", "care", 9.75, 50),
    ("SKU-1009", "Cold brew bottle", "equipment", 22.00, 9),
    ("SKU-1010", "Green tea 250 g", "tea", 8.60, 60),
    ("SKU-1011", "Chai blend 250 g", "tea", 9.10, 44),
    ("SKU-1012", "Travel mug", "equipment", 19.90, 31),
]
CUSTOMERS = [
    (1, "Ada Moreno", "ada@example.com", "Lisbon"),
    (2, "Bruno Kim", "bruno@example.com", "Seoul"),
    (3, "Chloe Novak", "chloe@example.com", "Prague"),
    (4, "Dmitri Olsen", "dmitri@example.com", "Oslo"),
]
ORDERS = [
    (501, 1, "SKU-1001", 2, "shipped"),
    (502, 2, "SKU-1003", 1, "paid"),
    (503, 3, "SKU-1010", 5, "pending"),
    *((401 + n, 1 + n % 4, "SKU-1012", 1, "pending") for n in range(12)),  # a travel-mug promo
]


def _database() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.executescript(
        """
        CREATE TABLE product (sku TEXT PRIMARY KEY, name TEXT, category TEXT, price REAL,
                              stock INTEGER);
        CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT, email TEXT, city TEXT);
        CREATE TABLE "order" (id INTEGER PRIMARY KEY, customer_id INTEGER, sku TEXT,
                              quantity INTEGER, status TEXT);
        CREATE TABLE invoice (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id INTEGER);
        """
    )
    db.executemany("INSERT INTO product VALUES (?, ?, ?, ?, ?)", PRODUCTS)
    db.executemany("INSERT INTO customer VALUES (?, ?, ?, ?)", CUSTOMERS)
    db.executemany('INSERT INTO "order" VALUES (?, ?, ?, ?, ?)', ORDERS)
    db.commit()
    return db


db = _database()
server = FastMCP("inventory", log_level="WARNING")


def _order(order_id: int) -> dict[str, Any]:
    row = db.execute(
        'SELECT o.id, c.name, o.sku, o.quantity, o.status FROM "order" o '
        "JOIN customer c ON c.id = o.customer_id WHERE o.id = ?",
        (order_id,),
    ).fetchone()
    if row is None:
        raise ValueError(f"order {order_id} does not exist")
    keys = ("order_id", "customer", "sku", "quantity", "status")
    return dict(zip(keys, row, strict=True))


@server.tool(annotations=READS)
def list_products(category: str = "") -> str:
    """List the products of a category (all of them when empty), with price and stock."""
    rows = db.execute(
        "SELECT sku, name, price, stock FROM product WHERE ? = '' OR category = ? ORDER BY sku",
        (category, category),
    ).fetchall()
    products = [{"sku": s, "name": n, "price": p, "stock": q} for s, n, p, q in rows]
    return json.dumps({"products": products, "count": len(products)})


@server.tool(annotations=READS)
def get_order(order_id: int) -> str:
    """One order: its customer, product, quantity and status."""
    return json.dumps(_order(order_id))


@server.tool(annotations=READS)
def search_customers(query: str) -> str:
    """Customers whose name, email or city contains the query."""
    pattern = f"%{query}%"
    rows = db.execute(
        "SELECT id, name, email, city FROM customer "
        "WHERE name LIKE ? OR email LIKE ? OR city LIKE ? ORDER BY id",
        (pattern, pattern, pattern),
    ).fetchall()
    keys = ("id", "name", "email", "city")
    return json.dumps({"customers": [dict(zip(keys, row, strict=True)) for row in rows]})


@server.tool(annotations=CREATES)
def create_order(customer_id: int, sku: str, quantity: int) -> str:
    """Place an order for a customer; the stock is reserved."""
    if quantity <= 0:
        raise ValueError(f"quantity must be positive, got {quantity}")
    stock = db.execute("SELECT stock FROM product WHERE sku = ?", (sku,)).fetchone()
    if stock is None:
        raise ValueError(f"unknown product {sku}")
    if stock[0] < quantity:
        raise ValueError(f"insufficient stock for {sku}: {stock[0]} left, {quantity} asked")
    cursor = db.execute(
        'INSERT INTO "order" (customer_id, sku, quantity, status) VALUES (?, ?, ?, ?)',
        (customer_id, sku, quantity, "pending"),
    )
    db.execute("UPDATE product SET stock = stock - ? WHERE sku = ?", (quantity, sku))
    db.commit()
    return json.dumps({"created": 1, "order_id": cursor.lastrowid})


@server.tool(annotations=OVERWRITES)
def update_stock(sku: str, quantity: int) -> str:
    """Set a product's stock after a count."""
    if quantity < 0:
        raise ValueError(f"stock cannot be negative: {quantity}")
    cursor = db.execute("UPDATE product SET stock = ? WHERE sku = ?", (quantity, sku))
    db.commit()
    if cursor.rowcount == 0:
        raise ValueError(f"unknown product {sku}")
    return json.dumps({"updated": cursor.rowcount})


@server.tool(annotations=SENDS)
def send_invoice(order_id: int) -> str:
    """Email the invoice of an order to its customer."""
    order = _order(order_id)
    db.execute("INSERT INTO invoice (order_id) VALUES (?)", (order_id,))
    db.commit()
    return json.dumps({"sent": True, "to": order["customer"]})


@server.tool(annotations=OVERWRITES)
def cancel_order(order_id: int) -> str:
    """Cancel an order that has not shipped; its stock is released."""
    order = _order(order_id)
    if order["status"] == "shipped":
        raise ValueError(f"order {order_id} has shipped and cannot be cancelled")
    db.execute('UPDATE "order" SET status = ? WHERE id = ?', ("cancelled", order_id))
    db.execute(
        "UPDATE product SET stock = stock + ? WHERE sku = ?", (order["quantity"], order["sku"])
    )
    db.commit()
    return json.dumps({"cancelled": 1, "order_id": order_id})


@server.tool()
def order_summary(order_id: int) -> str:
    """A one-line summary of an order (the server does not say whether this reads or acts)."""
    order = _order(order_id)
    return f"Order {order_id}: {order['quantity']} x {order['sku']} for {order['customer']}"


if __name__ == "__main__":
    server.run("stdio")
