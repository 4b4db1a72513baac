"""``GET /admin/audit``: the console's audit log for scripts, behind the operator token.

Kept with the console (which writes the log) so that :mod:`ledger.http.operator` gains one
route and one import.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from litestar import Request, Response
from litestar.response import Stream

from ...errors import InvalidRequest
from ...operators import Operators
from ...service import Ledger
from ..auth import request_address
from ..filenames import CSV
from ..logs import fingerprint
from ..runtime import Runtime

__all__ = ["audit_answer"]


async def audit_answer(
    request: Request[Any, Any, Any],
    runtime: Runtime,
    action: str | None,
    limit: int,
    after: str | None,
    format: str,
) -> Response[Any]:
    """One page as ``{"audit", "next"}`` (the list named by its path, as every list), or with
    ``format=csv`` every entry as CSV.

    An export is itself audited, as made by ``token:<fingerprint>`` of the bearer token (the
    fingerprint the operator log prints, never the token).
    """
    if format == "csv":
        presented = (request.headers.get("authorization") or "").partition(" ")[2].strip()
        who, ip = f"token:{fingerprint(presented)}", request_address(request, runtime)

        def export(ledger: Ledger) -> Iterator[str]:
            found = Operators(ledger.store)
            lines = found.audit_csv(action)  # a bad action is refused here, before the record
            found.record(who, ip, "export", "audit", only=action)
            return lines

        # Streamed, read a page at a time on a worker thread as the client takes it.
        lines = await runtime.call(export)
        return Stream(
            lines,
            media_type=CSV,
            headers={"content-disposition": 'attachment; filename="audit.csv"'},
        )
    if format != "json":
        raise InvalidRequest("format must be json or csv")
    page = await runtime.call(lambda ledger: Operators(ledger.store).audit(limit, after, action))
    return Response({"audit": page.items, "next": page.next})
