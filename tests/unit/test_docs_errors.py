"""docs/errors.md names every error key the code can answer or print."""

from __future__ import annotations

import re
from pathlib import Path

from ledger.http.error_docs import ERRORS
from ledger.http.errors import HTTP_KEYS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "src" / "ledger").rglob("*.py"))

# The ways a key is written in the code: a class's or a call's `key`, a printed
# `error: <key>:` or `warning: <key>:` line, an error helper's first argument, the kit's keys.
PATTERNS = [
    re.compile(r"\bkey(?:: str)?\s*=\s*\"([a-z_]+(?:\.[a-z_]+)*)\""),
    re.compile(r"(?:error|warning): ([a-z_]+\.[a-z_]+):"),
    re.compile(r"(?:error_body|_error)\(\"([a-z_]+(?:\.[a-z_]+)*)\""),
    re.compile(r"\"(tournament_ticket\.[a-z_]+)\""),
]
REJECT = re.compile(r"_reject\(\"([a-z_]+)\"")


def keys_in_the_code() -> set[str]:
    keys = set(ERRORS) | set(HTTP_KEYS.values()) | {"internal"}
    for path in SOURCES:
        text = path.read_text()
        for pattern in PATTERNS:
            keys.update(pattern.findall(text))
        keys.update(f"tournament_ticket.{key}" for key in REJECT.findall(text))
    return keys


def test_the_scan_finds_the_keys_it_is_meant_to_find() -> None:
    found = keys_in_the_code()
    # One of each way of writing a key, so that a broken pattern cannot pass silently.
    assert {
        "user.insufficient_funds",
        "operator.invalid_token",
        "missing.extra",
        "backup.check_failed",
        "jwt.short_secret",
        "usage",
        "tournament_ticket.due_at_in_past",
        "tournament_ticket.unavailable",
        "ledger.check_failed",
        "method_not_allowed",
        "ledger.error",
    } <= found
    assert len(found) > 70


def test_every_error_key_in_the_code_is_in_docs_errors_md() -> None:
    page = (ROOT / "docs" / "errors.md").read_text()
    missing = sorted(key for key in keys_in_the_code() if f"`{key}`" not in page)
    assert not missing, f"error keys missing from docs/errors.md: {missing}"
