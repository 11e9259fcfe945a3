"""Tools of the example suite: a small, deterministic customer-support back office held in memory.

Every tool is a pure function of its arguments (no clock, no I/O), so transcripts are reproducible.
Return codes: 0 ok; 3 rejected by a business rule; 4 unknown id; ``run_script`` passes the script's
own exit status through (``rebuild_search_index`` exits 3, ``sync_crm`` exits 1). ``send_email`` raises
on a malformed address, which the executor records as return code 1.
"""

from __future__ import annotations

import re
import zlib
from typing import Any, TypeAlias

from pytest_gauge import Tool, ToolResult

__all__ = [
    "INVENTORY",
    "ORDERS",
    "RATES",
    "SCRIPTS",
    "TOOLS",
    "WEATHER",
    "check_inventory",
    "convert_currency",
    "create_ticket",
    "get_weather",
    "issue_refund",
    "lookup_order",
    "run_script",
    "send_email",
]

Reply: TypeAlias = dict[str, Any] | ToolResult
"""What a tool returns: a JSON-able result (return code 0) or a ToolResult with its own code."""

RC_REJECTED = 3
RC_NOT_FOUND = 4

ORDERS: dict[str, dict[str, Any]] = {
    "A123": {
        "order_id": "A123",
        "customer": "Dana Whitfield",
        "email": "dana.whitfield@example.com",
        "status": "delivered",
        "total": 120.0,
        "shipping_fee": 25.0,
        "carrier": "UPS",
        "tracking": "1Z999AA10123456784",
        "items": ["KB-201"],
        "delivered_on": "2024-05-20",
        "refundable": True,
    },
    "B456": {
        "order_id": "B456",
        "customer": "Tom Okafor",
        "email": "tom.okafor@example.com",
        "status": "shipped",
        "total": 89.5,
        "shipping_fee": 0.0,
        "carrier": "DHL",
        "tracking": "JD014600006281234567",
        "items": ["MS-310", "HD-550"],
        "eta": "2024-06-01",
        "shipping_address": "27 Baker Street, London NW1 6XE",
        "refundable": True,
    },
    "C789": {
        "order_id": "C789",
        "customer": "Li Wei",
        "email": "li.wei@example.com",
        "status": "processing",
        "total": 42.0,
        "shipping_fee": 0.0,
        "carrier": None,
        "tracking": None,
        "items": ["LB-900"],
        "ships_on": "2024-06-03",
        "refundable": True,
    },
    "D012": {
        "order_id": "D012",
        "customer": "Priya Natarajan",
        "email": "priya@acme.example",
        "status": "delivered",
        "total": 300.0,
        "shipping_fee": 0.0,
        "carrier": "UPS",
        "tracking": "1Z999AA10987654321",
        "items": ["HD-550"],
        "delivered_on": "2024-03-02",
        "refundable": False,
    },
}

INVENTORY: dict[str, dict[str, Any]] = {
    "KB-201": {"sku": "KB-201", "name": "Mechanical keyboard", "quantity": 14, "warehouse": "Leeds"},
    "MS-310": {
        "sku": "MS-310",
        "name": "Wireless mouse",
        "quantity": 0,
        "warehouse": "Leeds",
        "restock_date": "2024-06-12",
    },
    "HD-550": {"sku": "HD-550", "name": "USB-C hub", "quantity": 3, "warehouse": "Rotterdam"},
    "LB-900": {"sku": "LB-900", "name": "Office Tote laptop bag", "quantity": 27, "warehouse": "Leeds"},
}

WEATHER: dict[str, dict[str, Any]] = {
    "lisbon": {"city": "Lisbon", "condition": "sunny", "high_c": 24, "low_c": 16, "rain_chance": 0.05},
    "london": {"city": "London", "condition": "light rain", "high_c": 14, "low_c": 9, "rain_chance": 0.8},
    "tokyo": {"city": "Tokyo", "condition": "cloudy", "high_c": 21, "low_c": 15, "rain_chance": 0.3},
    "shanghai": {
        "city": "Shanghai",
        "condition": "heavy rain",
        "high_c": 26,
        "low_c": 21,
        "rain_chance": 0.9,
    },
    "berlin": {"city": "Berlin", "condition": "partly cloudy", "high_c": 18, "low_c": 10, "rain_chance": 0.2},
}
_CITY_ALIASES = {"上海": "shanghai", "东京": "tokyo", "伦敦": "london", "里斯本": "lisbon", "柏林": "berlin"}

SCRIPTS: dict[str, tuple[int, str]] = {
    "nightly_backup": (0, "backup completed: 1204 files, 3.2 GB written to s3://acme-backups/nightly"),
    "export_invoices": (0, "exported 58 invoices to invoices_2024-05.csv"),
    "rebuild_search_index": (3, "error: shard 2 unreachable (connection refused); index rebuild aborted"),
    "sync_crm": (1, "error: CRM API token expired; 0 records synced"),
}

RATES: dict[tuple[str, str], float] = {
    ("USD", "EUR"): 0.92,
    ("USD", "GBP"): 0.79,
    ("EUR", "USD"): 1.087,
    ("GBP", "USD"): 1.266,
    ("EUR", "GBP"): 0.859,
    ("GBP", "EUR"): 1.164,
}

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
_PRIORITIES = ["low", "normal", "high", "urgent"]


def _stable_number(*parts: str, digits: int = 5) -> int:
    """A deterministic pseudo-id from the arguments (crc32, not Python's salted hash)."""
    return int(zlib.crc32("\x1f".join(parts).encode("utf-8")) % 10**digits)


def lookup_order(order_id: str) -> Reply:
    """The order record, or return code 4 when the id is unknown."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        return ToolResult(f"error: order {order_id!r} not found", RC_NOT_FOUND)
    return dict(order)


def issue_refund(order_id: str, amount: float) -> Reply:
    """Refund ``amount`` on an order: code 4 for an unknown order, 3 when the amount is not positive,
    exceeds the order total, or the order is past its return window."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        return ToolResult(f"error: order {order_id!r} not found", RC_NOT_FOUND)
    if not isinstance(amount, int | float) or isinstance(amount, bool) or amount <= 0:
        return ToolResult(f"error: refund amount must be a positive number, got {amount!r}", RC_REJECTED)
    if amount > order["total"]:
        return ToolResult(
            f"error: refund of {amount:.2f} exceeds the order total {order['total']:.2f}", RC_REJECTED
        )
    if not order["refundable"]:
        reason = f"error: order {order['order_id']} is outside the 30-day return window"
        return ToolResult(reason, RC_REJECTED)
    cents = round(amount * 100)
    return {
        "refund_id": f"RF-{order['order_id']}-{cents}",
        "order_id": order["order_id"],
        "amount": round(float(amount), 2),
        "status": "approved",
        "method": "original payment method, 5 business days",
    }


def check_inventory(sku: str) -> Reply:
    """Stock level of a SKU, or return code 4 when the SKU is unknown."""
    item = INVENTORY.get(sku.strip().upper())
    if item is None:
        return ToolResult(f"error: SKU {sku!r} not found", RC_NOT_FOUND)
    return {**item, "in_stock": item["quantity"] > 0}


def get_weather(city: str) -> Reply:
    """Tomorrow's forecast for a city (English or Chinese name), or return code 4 for an unknown city."""
    key = _CITY_ALIASES.get(city.strip(), city.strip().casefold())
    forecast = WEATHER.get(key)
    if forecast is None:
        return ToolResult(f"error: no forecast for city {city!r}", RC_NOT_FOUND)
    return {**forecast, "day": "tomorrow"}


def run_script(name: str) -> Reply:
    """Run an operations script; the result carries the script's exit status as the return code."""
    if name not in SCRIPTS:
        return ToolResult(f"error: no script named {name!r}", RC_NOT_FOUND)
    code, output = SCRIPTS[name]
    return ToolResult({"script": name, "exit_code": code, "output": output}, code)


def send_email(to: str, subject: str, body: str = "") -> Reply:
    """Queue an email; a malformed address raises (recorded by the executor as return code 1)."""
    if not _EMAIL.fullmatch(to.strip()):
        raise ValueError(f"invalid recipient address {to!r}")
    if not subject.strip():
        return ToolResult("error: the subject must not be empty", RC_REJECTED)
    return {
        "message_id": f"MSG-{_stable_number(to, subject, body, digits=6):06d}",
        "status": "queued",
        "to": to.strip(),
        "subject": subject,
    }


def create_ticket(subject: str, priority: str) -> Reply:
    """Open a support ticket; code 3 for an unknown priority."""
    if priority not in _PRIORITIES:
        return ToolResult(f"error: priority must be one of {_PRIORITIES}, got {priority!r}", RC_REJECTED)
    return {
        "ticket_id": f"TCK-{_stable_number(subject, priority):05d}",
        "subject": subject,
        "priority": priority,
        "status": "open",
    }


def convert_currency(amount: float, from_currency: str, to_currency: str) -> Reply:
    """Convert with fixed example rates; code 4 for an unsupported currency pair."""
    pair = (from_currency.strip().upper(), to_currency.strip().upper())
    if pair[0] == pair[1]:
        rate = 1.0
    elif pair in RATES:
        rate = RATES[pair]
    else:
        return ToolResult(f"error: unsupported currency pair {pair[0]}->{pair[1]}", RC_NOT_FOUND)
    return {
        "amount": amount,
        "from": pair[0],
        "to": pair[1],
        "rate": rate,
        "converted": round(amount * rate, 2),
    }


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_STR = {"type": "string"}

TOOLS: list[Tool] = [
    Tool(
        "lookup_order",
        "Look up an order by id: status, total, carrier, tracking number, items.",
        _schema({"order_id": {**_STR, "description": "Order id such as A123"}}, ["order_id"]),
        lookup_order,
    ),
    Tool(
        "issue_refund",
        "Refund an amount (in the order's currency) to the original payment method.",
        _schema(
            {"order_id": _STR, "amount": {"type": "number", "description": "Amount to refund"}},
            ["order_id", "amount"],
        ),
        issue_refund,
    ),
    Tool(
        "check_inventory",
        "Stock level and warehouse of a product SKU such as KB-201.",
        _schema({"sku": _STR}, ["sku"]),
        check_inventory,
    ),
    Tool(
        "get_weather",
        "Tomorrow's weather forecast for a city.",
        _schema({"city": {**_STR, "description": "City name, e.g. Lisbon"}}, ["city"]),
        get_weather,
    ),
    Tool(
        "run_script",
        "Run a named operations script and report its exit code and output.",
        _schema({"name": {**_STR, "description": "Script name, e.g. nightly_backup"}}, ["name"]),
        run_script,
    ),
    Tool(
        "send_email",
        "Send an email to one recipient.",
        _schema(
            {"to": {**_STR, "description": "Recipient address"}, "subject": _STR, "body": _STR},
            ["to", "subject"],
        ),
        send_email,
    ),
    Tool(
        "create_ticket",
        "Open a support ticket with a subject and a priority.",
        _schema({"subject": _STR, "priority": {**_STR, "enum": _PRIORITIES}}, ["subject", "priority"]),
        create_ticket,
    ),
    Tool(
        "convert_currency",
        "Convert an amount between USD, EUR and GBP at today's rate.",
        _schema(
            {"amount": {"type": "number"}, "from_currency": _STR, "to_currency": _STR},
            ["amount", "from_currency", "to_currency"],
        ),
        convert_currency,
    ),
]
