"""``GET /admin/audit``: the console's audit log for scripts, behind the operator token.

Kept with the console (which writes the log) so that :mod:`ledger.http.operator` gains one
route and one import.
"""

from __future__ import annotations

from typing import Any

from litestar import Response
from litestar.response import Stream

from ...errors import InvalidRequest
from ...operators import Operators
from ..runtime import Runtime

__all__ = ["audit_answer"]


async def audit_answer(
    runtime: Runtime, action: str | None, limit: int, after: str | None, format: str
) -> Response[Any]:
    """One page as ``{"items", "next"}``, or with ``format=csv`` every entry as CSV."""
    if format == "csv":
        lines = await runtime.call(lambda ledger: list(Operators(ledger.store).audit_csv(action)))
        return Stream(
            iter(lines),
            media_type="text/csv; charset=utf-8",
            headers={"content-disposition": 'attachment; filename="audit.csv"'},
        )
    if format != "json":
        raise InvalidRequest("format must be json or csv")
    page = await runtime.call(lambda ledger: Operators(ledger.store).audit(limit, after, action))
    return Response({"items": page.items, "next": page.next})
