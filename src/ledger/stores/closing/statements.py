"""The one way a set-based close sends a statement: text with named parameters (a test can
watch, explain or count every statement of a close by replacing :func:`run`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

__all__ = ["run"]


def run(connection: Connection, sql: str, **params: Any) -> Any:
    return connection.execute(text(sql), params)
